// SPDX-License-Identifier: GPL-2.0

//! Result lines: one for people (`PASS name k=v...`, `FAIL name: reason`,
//! `SKIP name: reason`, `NOTE name: text`) and one for harnesses
//! (`@@KVMTEST case=name result=PASS k=v...`, then a final
//! `@@KVMTEST summary pass=N fail=M skip=K`).

use crate::cases::Outcome;

/// How a case ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail(String),
    Skip(String),
}

impl Verdict {
    fn word(&self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail(_) => "FAIL",
            Verdict::Skip(_) => "SKIP",
        }
    }
}

/// A value for a `key=value` pair: bare if it is simple, else in double
/// quotes with `"` and `\` escaped and line breaks as spaces.
pub fn quote(v: &str) -> String {
    let simple = !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._:/+-,".contains(c));
    if simple {
        return v.to_string();
    }
    let mut s = String::with_capacity(v.len() + 2);
    s.push('"');
    for c in v.chars() {
        match c {
            '"' | '\\' => {
                s.push('\\');
                s.push(c);
            }
            '\n' | '\r' | '\t' => s.push(' '),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

fn pairs(out: &Outcome) -> String {
    out.values
        .iter()
        .map(|(k, v)| format!(" {k}={}", quote(v)))
        .collect()
}

/// The lines for people: the verdict, then the notes.
pub fn human(name: &str, verdict: &Verdict, out: &Outcome, secs: f64) -> Vec<String> {
    let mut lines = vec![match verdict {
        Verdict::Pass => format!("PASS {name}{} secs={secs:.2}", pairs(out)),
        Verdict::Fail(why) => format!("FAIL {name}: {why}"),
        Verdict::Skip(why) => format!("SKIP {name}: {why}"),
    }];
    if let Verdict::Fail(_) = verdict {
        if !out.values.is_empty() {
            lines.push(format!("  measured so far:{}", pairs(out)));
        }
    }
    lines.extend(out.notes.iter().map(|n| format!("NOTE {name}: {n}")));
    lines
}

/// The line for harnesses.
pub fn machine(name: &str, verdict: &Verdict, out: &Outcome, secs: f64) -> String {
    let mut s = format!("@@KVMTEST case={name} result={}", verdict.word());
    if let Verdict::Fail(why) | Verdict::Skip(why) = verdict {
        s.push_str(&format!(" reason={}", quote(why)));
    }
    s.push_str(&pairs(out));
    if !out.notes.is_empty() {
        s.push_str(&format!(" note={}", quote(&out.notes.join("; "))));
    }
    if !matches!(verdict, Verdict::Skip(_)) {
        s.push_str(&format!(" secs={secs:.2}"));
    }
    s
}

/// The final line for harnesses.
pub fn summary(pass: usize, fail: usize, skip: usize) -> String {
    format!("@@KVMTEST summary pass={pass} fail={fail} skip={skip}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome() -> Outcome {
        let mut o = Outcome::default();
        o.set("kicks", 200);
        o.set("lat_median_us", "12.5");
        o
    }

    #[test]
    fn quotes_only_when_needed() {
        assert_eq!(quote("12.5"), "12.5");
        assert_eq!(quote("0xffffffea"), "0xffffffea");
        assert_eq!(quote(""), "\"\"");
        assert_eq!(quote("a b"), "\"a b\"");
        assert_eq!(quote("say \"hi\"\n"), "\"say \\\"hi\\\" \"");
        assert_eq!(quote("a=b"), "\"a=b\"");
    }

    #[test]
    fn pass_lines() {
        let o = outcome();
        assert_eq!(
            human("wait_kick_wakes", &Verdict::Pass, &o, 1.234),
            vec!["PASS wait_kick_wakes kicks=200 lat_median_us=12.5 secs=1.23"]
        );
        assert_eq!(
            machine("wait_kick_wakes", &Verdict::Pass, &o, 1.234),
            "@@KVMTEST case=wait_kick_wakes result=PASS kicks=200 lat_median_us=12.5 secs=1.23"
        );
    }

    #[test]
    fn fail_and_skip_lines() {
        let mut o = outcome();
        o.note("upstream left no wake-up");
        let f = Verdict::Fail("kick returned 1 (HELD)".into());
        let h = human("x", &f, &o, 0.5);
        assert_eq!(h[0], "FAIL x: kick returned 1 (HELD)");
        assert_eq!(h[1], "  measured so far: kicks=200 lat_median_us=12.5");
        assert_eq!(h[2], "NOTE x: upstream left no wake-up");
        assert_eq!(
            machine("x", &f, &o, 0.5),
            "@@KVMTEST case=x result=FAIL reason=\"kick returned 1 (HELD)\" kicks=200 \
             lat_median_us=12.5 note=\"upstream left no wake-up\" secs=0.50"
        );
        let s = Verdict::Skip("needs host_kvm".into());
        assert_eq!(
            machine("y", &s, &Outcome::default(), 0.0),
            "@@KVMTEST case=y result=SKIP reason=\"needs host_kvm\""
        );
        assert_eq!(summary(6, 1, 2), "@@KVMTEST summary pass=6 fail=1 skip=2");
    }
}

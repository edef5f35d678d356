// SPDX-License-Identifier: GPL-2.0

//! Judging a run: the checks every scenario gets, and the scenario's own
//! `[[expect]]` checks on the result JSON.

use crate::result::Parsed;
use crate::scenario::{Expect, Scenario};
use regex::Regex;
use serde_json::Value;

/// Why a run failed; empty if it passed.
pub fn judge(s: &Scenario, parsed: &Parsed, result: &Value, timed_out: bool) -> Vec<String> {
    let mut why = Vec::new();
    if timed_out {
        why.push(format!("the run did not finish within {} s", s.timeout));
    }
    let mut expected = vec!["l1".to_string()];
    expected.extend(s.l2_instances());
    for name in &expected {
        let Some(n) = parsed.nodes.get(name) else {
            why.push(format!("{name}: no output at all"));
            continue;
        };
        if !n.booted {
            why.push(format!("{name}: never reached its init{}", problem_hint(n)));
        } else if !n.done {
            why.push(format!(
                "{name}: stopped before its plan finished{}",
                problem_hint(n)
            ));
        }
        for st in &n.steps {
            if st.timed_out {
                let func = st.call.split_whitespace().next().unwrap_or("");
                why.push(format!("{name}: step {} ({func}) timed out", st.id));
            }
        }
        for e in &n.errors {
            why.push(format!("{name}: {e}"));
        }
        if !s.allow_kernel_problems {
            if let Some(p) = n.problems.first() {
                why.push(format!("{name}: kernel problem: {}", p.trim()));
            }
        }
        for lt in &n.locktorture {
            if lt.total.is_none() || lt.verdict.is_none() {
                why.push(format!(
                    "{name}: locktorture {} printed no summary",
                    lt.kind
                ));
            }
        }
    }
    for e in &s.expect {
        if let Err(msg) = check(e, result) {
            why.push(format!("expect '{}': {msg}", e.name));
        }
    }
    why
}

fn problem_hint(n: &crate::result::Node) -> String {
    match n
        .problems
        .iter()
        .find(|p| p.contains("panic") || p.contains("BUG"))
    {
        Some(p) => format!(" ({})", p.trim()),
        None => match n.problems.first() {
            Some(p) => format!(" ({})", p.trim()),
            None => String::new(),
        },
    }
}

/// Every value at `path` (segments may be globs).
pub fn select<'a>(v: &'a Value, path: &str) -> Vec<(String, &'a Value)> {
    let mut cur = vec![(String::new(), v)];
    for seg in path.split('.') {
        let mut next = Vec::new();
        for (p, v) in cur {
            let join = |k: &str| {
                if p.is_empty() {
                    k.to_string()
                } else {
                    format!("{p}.{k}")
                }
            };
            match v {
                Value::Object(m) => {
                    for (k, child) in m {
                        if glob(seg, k) {
                            next.push((join(k), child));
                        }
                    }
                }
                Value::Array(a) => {
                    for (i, child) in a.iter().enumerate() {
                        let k = i.to_string();
                        if glob(seg, &k) || (seg == "last" && i + 1 == a.len()) {
                            next.push((join(&k), child));
                        }
                    }
                }
                _ => {}
            }
        }
        cur = next;
    }
    cur
}

/// `*` matches any run of characters.
fn glob(pat: &str, s: &str) -> bool {
    if !pat.contains('*') {
        return pat == s;
    }
    let parts: Vec<&str> = pat.split('*').collect();
    let mut rest = s;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(p) => rest = &rest[p + part.len()..],
                None => return false,
            }
        }
    }
    rest.is_empty()
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a.iter().flat_map(strings).collect(),
        other => vec![other.to_string()],
    }
}

fn check_one(e: &Expect, v: &Value) -> Result<(), String> {
    let show = || v.to_string();
    if let Some(want) = &e.eq {
        let same = v == want || matches!((num(v), num(want)), (Some(a), Some(b)) if a == b);
        if !same {
            return Err(format!("{} != {}", show(), want));
        }
    }
    if let Some(want) = &e.ne {
        if v == want {
            return Err(format!("{} == {}", show(), want));
        }
    }
    let bounds = [(e.gt, ">"), (e.ge, ">="), (e.lt, "<"), (e.le, "<=")];
    for (bound, op) in bounds {
        if let Some(b) = bound {
            let Some(x) = num(v) else {
                return Err(format!("{} is not a number", show()));
            };
            let ok = match op {
                ">" => x > b,
                ">=" => x >= b,
                "<" => x < b,
                _ => x <= b,
            };
            if !ok {
                return Err(format!("{x} is not {op} {b}"));
            }
        }
    }
    if let Some(r) = &e.matches {
        let re = Regex::new(r).map_err(|e| e.to_string())?;
        if !strings(v).iter().any(|s| re.is_match(s)) {
            let mut shown = show();
            shown.truncate(200);
            return Err(format!("nothing matches /{r}/ in {shown}"));
        }
    }
    if let Some(r) = &e.not_matches {
        let re = Regex::new(r).map_err(|e| e.to_string())?;
        if let Some(s) = strings(v).iter().find(|s| re.is_match(s)) {
            return Err(format!("/{r}/ matches '{s}'"));
        }
    }
    Ok(())
}

/// One `[[expect]]` check.
pub fn check(e: &Expect, result: &Value) -> Result<(), String> {
    let found = select(result, &e.path);
    if found.is_empty() {
        return if e.allow_missing {
            Ok(())
        } else {
            Err(format!("nothing at {}", e.path))
        };
    }
    let mut fails = Vec::new();
    for (p, v) in &found {
        match check_one(e, v) {
            Ok(()) if e.any => return Ok(()),
            Ok(()) => {}
            Err(m) => fails.push(format!("{p}: {m}")),
        }
    }
    if fails.is_empty() {
        Ok(())
    } else {
        Err(fails.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn expect(path: &str) -> Expect {
        toml::from_str(&format!("name = \"t\"\npath = \"{path}\"")).unwrap()
    }

    #[test]
    fn globs_and_paths() {
        let v = json!({"nodes": {"g-1": {"lt": [{"fail": 0}, {"fail": 0}]}, "g-2": {"lt": [{"fail": 3}]}, "l1": {}}});
        assert_eq!(select(&v, "nodes.g-*.lt.*.fail").len(), 3);
        assert_eq!(
            select(&v, "nodes.g-1.lt.last.fail")[0].0,
            "nodes.g-1.lt.1.fail"
        );
        assert!(glob("g-*", "g-12") && !glob("g-*", "l1") && glob("*", "x") && glob("a*c", "abbc"));

        let mut e = expect("nodes.g-*.lt.*.fail");
        e.eq = Some(json!(0));
        let err = check(&e, &v).unwrap_err();
        assert!(err.contains("nodes.g-2.lt.0.fail: 3 != 0"), "{err}");
        e.any = true;
        assert!(check(&e, &v).is_ok());
    }

    #[test]
    fn numbers_strings_and_missing() {
        let v = json!({"h": {"5": 12, "s": "PV spinlocks enabled", "a": ["x", "kvm-guest: PV spinlocks disabled"]}});
        let mut e = expect("h.5");
        e.gt = Some(0.0);
        assert!(check(&e, &v).is_ok());
        e.gt = Some(12.0);
        assert!(check(&e, &v).is_err());

        let mut e = expect("h.a");
        e.matches = Some("PV spinlocks disabled".into());
        assert!(check(&e, &v).is_ok());
        e.matches = Some("enabled".into());
        assert!(check(&e, &v).is_err());

        let mut e = expect("h.nothere");
        e.eq = Some(json!(0));
        assert!(check(&e, &v).unwrap_err().contains("nothing at"));
        e.allow_missing = true;
        assert!(check(&e, &v).is_ok());
    }
}

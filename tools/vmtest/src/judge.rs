// SPDX-License-Identifier: GPL-2.0

//! Judging a run: the checks every scenario gets, and the scenario's own
//! `[[expect]]` checks on the result JSON. Each failed check is a
//! [`Failure`] that says what it is about, so that [`crate::platform`] can
//! tell whether it follows from a platform event or is evidence of its own.

use crate::console::{Node, Parsed};
use crate::regs;
use crate::scenario::{Expect, Scenario};
use crate::watchdog::STALL_SECS;
use regex::Regex;
use serde_json::Value;

/// How an attempt ended, besides its console.
#[derive(Debug, Clone, Default)]
pub struct RunEnd {
    /// The run outlived its bound and was killed.
    pub timed_out: bool,
    /// The kernel that went silent; the watchdog stopped the run.
    pub stalled: Option<String>,
    /// The console said nothing for this many seconds (the caller's bound);
    /// the run was stopped.
    pub console_silent: Option<u64>,
    /// L1's QEMU exit status.
    pub qemu_status: Option<i32>,
    /// A kernel reported a problem, and the harness stopped the run a
    /// while later (the attempt had failed): every kernel stopped where it
    /// was.
    pub problem_stop: bool,
}

impl RunEnd {
    /// The run was cut short: every kernel stopped where it was.
    pub fn stopped(&self) -> bool {
        self.timed_out
            || self.stalled.is_some()
            || self.console_silent.is_some()
            || self.problem_stop
    }
}

/// What a failed check is about.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// The run outlived its bound.
    RunTimeout,
    /// The console said nothing for the caller's bound.
    ConsoleSilent,
    /// The kernel went silent and the watchdog stopped the run.
    Stalled,
    /// The kernel printed nothing at all.
    NoOutput,
    /// The kernel never reached its init.
    NeverBooted,
    /// The kernel stopped before its plan finished.
    Unfinished,
    /// A step timed out or ended with a non-zero status, at this point of
    /// the console ([`Parsed::seq`]).
    Step(Option<u64>),
    /// A step reported an error, at this point of the console.
    Error(Option<u64>),
    /// A kernel problem report (BUG, Oops, WARNING, RCU stall, lockup...).
    KernelProblem,
    /// A locktorture run printed no summary.
    NoSummary,
    /// locktorture counted lock failures, or said FAILURE.
    LocktortureFail,
    /// The kernel was silent until an NMI ended its waits.
    LostWakeup,
    /// An `[[expect]]` check.
    Expect(Vec<ExpectPart>),
}

/// One value (or missing path) that failed an `[[expect]]` check.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectPart {
    /// Where (the concrete path, or the pattern if nothing matched).
    pub path: String,
    /// The kernel the path is about (`nodes.<kernel>.`), if one.
    pub kernel: Option<String>,
    /// Nothing was at the path.
    pub missing: bool,
    /// The value shows that something went wrong (`eq`, `ne`, `lt`, `le`,
    /// `not_matches` failed), not only that too little happened (`gt`,
    /// `ge`, `matches`: a run cut short fails those).
    pub evidence: bool,
}

/// A failed check.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The kernel it is about, if one.
    pub kernel: Option<String>,
    pub kind: Kind,
    /// For people.
    pub text: String,
}

impl Failure {
    fn new(kernel: &str, kind: Kind, text: String) -> Failure {
        Failure {
            kernel: Some(kernel.to_string()),
            kind,
            text: format!("{kernel}: {text}"),
        }
    }
}

/// The failures' texts.
pub fn reasons(failures: &[Failure]) -> Vec<String> {
    failures.iter().map(|f| f.text.clone()).collect()
}

/// What an NMI probe of a silent kernel found, for people.
pub fn describe_probe(n: &Node, by: &str) -> String {
    let p = &n.nmi;
    let regs = match (&n.regs_failed, n.regs.is_empty()) {
        (_, false) => format!("; registers before the NMI: {}", regs::describe(&n.regs)),
        (Some(why), true) => format!("; no register samples ({why})"),
        (None, true) => String::new(),
    };
    if p.injected == 0 {
        return match &p.failed {
            Some(why) => format!("{by} could not inject an NMI ({why}){regs}"),
            None => format!("no NMI from {by}{regs}"),
        };
    }
    let answered = if p.answered.is_empty() {
        "no CPU reported it".to_string()
    } else {
        format!(
            "CPU(s) {} reported it",
            p.answered
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    let after = if p.silent_after_last {
        "and the kernel stayed silent"
    } else {
        "and the kernel ran on"
    };
    format!("{by} injected an NMI: {answered}, {after}{regs}")
}

/// Why a run failed; empty if it passed.
pub fn judge(s: &Scenario, parsed: &Parsed, result: &Value, end: &RunEnd) -> Vec<Failure> {
    let mut why = end_failures(s, parsed, end);
    let mut expected = vec!["l1".to_string()];
    expected.extend(s.l2_instances());
    for name in &expected {
        match parsed.nodes.get(name) {
            None => why.push(Failure::new(
                name,
                Kind::NoOutput,
                "no output at all".into(),
            )),
            Some(n) => kernel_failures(s, name, n, &mut why),
        }
    }
    for e in &s.expect {
        if let Err((msg, parts)) = check_parts(e, result) {
            why.push(Failure {
                kernel: None,
                kind: Kind::Expect(parts),
                text: format!("expect '{}': {msg}", e.name),
            });
        }
    }
    why
}

/// How the run ended, if the harness stopped it: silence, its bound, a
/// stalled kernel (with what its NMI probe found).
fn end_failures(s: &Scenario, parsed: &Parsed, end: &RunEnd) -> Vec<Failure> {
    let mut why = Vec::new();
    if let Some(secs) = end.console_silent {
        why.push(Failure {
            kernel: None,
            kind: Kind::ConsoleSilent,
            text: format!("no console output for {secs} s (stalled); stopped"),
        });
    }
    if end.timed_out {
        why.push(Failure {
            kernel: None,
            kind: Kind::RunTimeout,
            text: format!("the run did not finish within {} s", s.timeout),
        });
    }
    if let Some(name) = &end.stalled {
        let probe = parsed
            .nodes
            .get(name)
            .map(|n| {
                let by = if name == "l1" { "the harness" } else { "L1" };
                let code = match (n.state.project_code, name == "l1") {
                    (false, _) => "",
                    (true, true) => "; host_kvm was loaded",
                    (true, false) => "; guest_pvlock was loaded",
                };
                format!("; {}{code}", describe_probe(n, by))
            })
            .unwrap_or_default();
        why.push(Failure::new(
            name,
            Kind::Stalled,
            format!("silent for {STALL_SECS} s (no line, heartbeat included){probe}; stopped"),
        ));
    }
    why
}

/// The failures of kernel `name` (`n`, its result) into `why`: it never
/// booted or did not finish, a wait only an NMI ended, its steps, its
/// errors and kernel problems, its locktorture runs.
fn kernel_failures(s: &Scenario, name: &str, n: &Node, why: &mut Vec<Failure>) {
    if !n.booted {
        why.push(Failure::new(
            name,
            Kind::NeverBooted,
            format!("never reached its init{}", problem_hint(n)),
        ));
    } else if !n.done {
        // L1 ended the guest at its step's bound: the guest's own step
        // timeout never fired (as with a CPU that waits for good with
        // interrupts off while the others run on).
        let killed = match (&n.killed, n.steps.last()) {
            (Some(_), Some(st)) if st.rc.is_none() && !st.timed_out => format!(
                ": L1 ended its QEMU at the l2 step's bound, in step {}",
                st.id
            ),
            (Some(_), _) => ": L1 ended its QEMU at the l2 step's bound".into(),
            (None, _) => String::new(),
        };
        why.push(Failure::new(
            name,
            Kind::Unfinished,
            format!(
                "stopped before its plan finished{killed}{}",
                problem_hint(n)
            ),
        ));
    }
    if let Some(line) = &n.nmi.resumed {
        why.push(Failure::new(
            name,
            Kind::LostWakeup,
            format!(
                "silent until an NMI ended its waits: a lost wake-up (then: {})",
                line.trim()
            ),
        ));
    }
    step_failures(s, name, n, why);
    for (i, e) in n.errors.iter().enumerate() {
        why.push(Failure::new(
            name,
            Kind::Error(n.error_seqs.get(i).copied()),
            e.clone(),
        ));
    }
    if !s.allows_problems_of(name) {
        if let Some(p) = n.problems.first() {
            why.push(Failure::new(
                name,
                Kind::KernelProblem,
                format!("kernel problem: {}", p.trim()),
            ));
        }
    }
    locktorture_failures(name, n, why);
}

/// Steps of kernel `name` that timed out, or failed without the scenario
/// allowing it (`may_fail`).
fn step_failures(s: &Scenario, name: &str, n: &Node, why: &mut Vec<Failure>) {
    for st in &n.steps {
        let func = st.call.split_whitespace().next().unwrap_or("");
        if st.timed_out {
            why.push(Failure::new(
                name,
                Kind::Step(st.end_seq),
                format!("step {} ({func}) timed out", st.id),
            ));
        } else if let Some(rc) = st.rc.filter(|&rc| rc != 0) {
            if !s.step(name, &st.id).is_some_and(|d| d.may_fail) {
                why.push(Failure::new(
                    name,
                    Kind::Step(st.end_seq),
                    format!("step {} ({func}) failed with status {rc}", st.id),
                ));
            }
        }
    }
}

/// locktorture runs of kernel `name` without a summary, or that failed.
fn locktorture_failures(name: &str, n: &Node, why: &mut Vec<Failure>) {
    for lt in &n.locktorture {
        if lt.total.is_none() || lt.verdict.is_none() {
            why.push(Failure::new(
                name,
                Kind::NoSummary,
                format!("locktorture {} printed no summary", lt.kind),
            ));
        }
        if lt.fail.is_some_and(|f| f > 0) || lt.verdict.as_deref() == Some("FAILURE") {
            why.push(Failure::new(
                name,
                Kind::LocktortureFail,
                format!(
                    "locktorture {} failed: Fail: {}, {}",
                    lt.kind,
                    lt.fail.map(|f| f.to_string()).unwrap_or_else(|| "?".into()),
                    lt.verdict.as_deref().unwrap_or("no verdict")
                ),
            ));
        }
    }
}

fn problem_hint(n: &Node) -> String {
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

/// The kernel a result path is about: `nodes.<kernel>....`, unless the
/// segment is a glob.
fn path_kernel(path: &str) -> Option<String> {
    let mut it = path.split('.');
    match (it.next(), it.next()) {
        (Some("nodes"), Some(k)) if !k.contains('*') => Some(k.to_string()),
        _ => None,
    }
}

/// The shape of a kernel's result: every field of [`Node`], with one
/// default element in each list of structs, so that a path can be checked
/// against the fields that exist before any kernel runs.
fn node_shape() -> Value {
    let mut n = Node::default();
    n.steps.push(Default::default());
    n.locktorture.push(Default::default());
    n.hackbench.push(Default::default());
    n.stressng.push(Default::default());
    n.mmbench.push(Default::default());
    n.runq.push(Default::default());
    n.nmi_late_in_project.push(Default::default());
    serde_json::to_value(n).unwrap_or(Value::Null)
}

/// Reads a scenario ([`Scenario::load`]) and checks its expectations'
/// paths ([`check_paths`]): what every scenario a run or the benchmark
/// uses goes through, so that a wrong field fails before a kernel boots.
pub fn load_scenario(path: &std::path::Path) -> anyhow::Result<Scenario> {
    use anyhow::Context as _;
    let s = Scenario::load(path)?;
    check_paths(&s).with_context(|| format!("bad scenario {}", path.display()))?;
    Ok(s)
}

/// Checks every expectation's path against the result's types: a field
/// that does not exist (renamed, misspelt) or a kernel that the scenario
/// never boots is an error when the scenario is loaded, not after its run.
/// Below a map, a list of strings or a JSON document (`stats`), the keys
/// are data, and the path is not checked further.
pub fn check_paths(s: &Scenario) -> anyhow::Result<()> {
    let mut kernels = s.l2_instances();
    kernels.push("l1".to_string());
    let shape = node_shape();
    for e in &s.expect {
        check_path(&e.path, &kernels, &shape)
            .and_then(|()| check_stat_counter(&e.path))
            .map_err(|why| anyhow::anyhow!("expect '{}': path {}: {why}", e.name, e.path))?;
    }
    Ok(())
}

/// A path to a counter of a `stat` snapshot
/// (`nodes.K.stats.I.dirs.KIND.counters.NAME`): NAME must be one of the
/// module's counters, the one list in the ABI
/// ([`pvlock_common::stats::Kind::counters`]), so that a renamed counter
/// fails here and not as a missing value after the run.
fn check_stat_counter(path: &str) -> Result<(), String> {
    use pvlock_common::stats::Kind;
    let segs: Vec<&str> = path.split('.').collect();
    let [_, _, "stats", _, "dirs", kind, "counters", name, ..] = segs.as_slice() else {
        return Ok(());
    };
    let kinds: Vec<Kind> = [Kind::Guest, Kind::Host]
        .into_iter()
        .filter(|k| glob(kind, k.label()))
        .collect();
    if kinds.is_empty() {
        return Err(format!("no statistics directory '{kind}' (guest, host)"));
    }
    if kinds.iter().any(|k| k.counters().any(|c| glob(name, c))) {
        return Ok(());
    }
    Err(format!(
        "no counter '{name}' in {} (the ABI's list: rust/kernel/pvlock/abi.rs)",
        kinds
            .iter()
            .map(|k| k.module())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

fn check_path(path: &str, kernels: &[String], shape: &Value) -> Result<(), String> {
    let mut segs = path.split('.');
    if segs.next() != Some("nodes") {
        return Err("does not begin with 'nodes.'".into());
    }
    let Some(k) = segs.next() else {
        return Err("names no kernel".into());
    };
    if !kernels.iter().any(|n| glob(k, n)) {
        return Err(format!(
            "no kernel '{k}' in this scenario (it has {})",
            kernels.join(", ")
        ));
    }
    // The segments below the kernel walked so far, for the messages.
    let mut walked: Vec<&str> = Vec::new();
    let at = |walked: &[&str]| match walked {
        [] => "a kernel's result".to_string(),
        w => format!("'{}'", w.join(".")),
    };
    let mut cur = shape;
    for seg in segs {
        match cur {
            Value::Object(m) if !m.is_empty() => {
                let Some((_, next)) = m.iter().find(|(key, _)| glob(seg, key)) else {
                    let fields: Vec<&str> = m.keys().map(String::as_str).collect();
                    return Err(format!(
                        "no field '{seg}' in {} (fields: {})",
                        at(&walked),
                        fields.join(", ")
                    ));
                };
                cur = next;
            }
            Value::Array(a) if !a.is_empty() => {
                // What `select` can match in a list: an index, `last`, or
                // a glob.
                if seg != "last" && !seg.contains('*') && seg.parse::<usize>().is_err() {
                    return Err(format!(
                        "'{seg}' is not an index of the list {}",
                        at(&walked)
                    ));
                }
                cur = &a[0];
            }
            // A map, a list of plain values, a document, or a value that
            // may be absent: its keys are data.
            Value::Object(_) | Value::Array(_) | Value::Null => return Ok(()),
            _ => {
                return Err(format!(
                    "{} is a plain value, with no '{seg}' in it",
                    at(&walked)
                ))
            }
        }
        walked.push(seg);
    }
    Ok(())
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

/// One value against a check: why it fails, and whether that is evidence
/// that something went wrong (see [`ExpectPart::evidence`]).
fn check_one(e: &Expect, v: &Value) -> Result<(), (String, bool)> {
    let show = || v.to_string();
    // No value (a step that never ran reports null): too little happened,
    // which a run cut short explains; not a value that shows a problem.
    if v.is_null() && e.eq.as_ref().is_none_or(|w| !w.is_null()) {
        return Err(("no value (null)".into(), false));
    }
    if let Some(want) = &e.eq {
        let same = v == want || matches!((num(v), num(want)), (Some(a), Some(b)) if a == b);
        if !same {
            return Err((format!("{} != {}", show(), want), true));
        }
    }
    if let Some(want) = &e.ne {
        if v == want {
            return Err((format!("{} == {}", show(), want), true));
        }
    }
    let bounds = [(e.gt, ">"), (e.ge, ">="), (e.lt, "<"), (e.le, "<=")];
    for (bound, op) in bounds {
        if let Some(b) = bound {
            let Some(x) = num(v) else {
                return Err((format!("{} is not a number", show()), true));
            };
            let ok = match op {
                ">" => x > b,
                ">=" => x >= b,
                "<" => x < b,
                _ => x <= b,
            };
            if !ok {
                return Err((format!("{x} is not {op} {b}"), op.starts_with('<')));
            }
        }
    }
    if let Some(r) = &e.matches {
        let re = Regex::new(r).map_err(|e| (e.to_string(), true))?;
        if !strings(v).iter().any(|s| re.is_match(s)) {
            let mut shown = show();
            shown.truncate(200);
            return Err((format!("nothing matches /{r}/ in {shown}"), false));
        }
    }
    if let Some(r) = &e.not_matches {
        let re = Regex::new(r).map_err(|e| (e.to_string(), true))?;
        if let Some(s) = strings(v).iter().find(|s| re.is_match(s)) {
            return Err((format!("/{r}/ matches '{s}'"), true));
        }
    }
    Ok(())
}

/// One `[[expect]]` check.
pub fn check(e: &Expect, result: &Value) -> Result<(), String> {
    check_parts(e, result).map_err(|(msg, _)| msg)
}

/// One `[[expect]]` check, with what failed.
fn check_parts(e: &Expect, result: &Value) -> Result<(), (String, Vec<ExpectPart>)> {
    let found = select(result, &e.path);
    if found.is_empty() {
        return if e.allow_missing {
            Ok(())
        } else {
            Err((
                format!("nothing at {}", e.path),
                vec![ExpectPart {
                    path: e.path.clone(),
                    kernel: path_kernel(&e.path),
                    missing: true,
                    evidence: false,
                }],
            ))
        };
    }
    let mut fails = Vec::new();
    let mut parts = Vec::new();
    for (p, v) in &found {
        match check_one(e, v) {
            Ok(()) if e.any => return Ok(()),
            Ok(()) => {}
            Err((m, evidence)) => {
                fails.push(format!("{p}: {m}"));
                parts.push(ExpectPart {
                    path: p.clone(),
                    kernel: path_kernel(p),
                    missing: false,
                    evidence,
                });
            }
        }
    }
    if fails.is_empty() {
        Ok(())
    } else {
        Err((fails.join("; "), parts))
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

    fn scenario(toml_text: &str) -> Scenario {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn expectation_paths_are_checked_against_the_result_types() {
        let base = r#"
description = "t"
[l1]
steps = [{ l2 = ["g"] }]
[[l2]]
group = "g"
count = 2
steps = []
"#;
        let with = |path: &str| {
            scenario(&format!(
                "{base}[[expect]]\nname = \"e\"\npath = \"{path}\"\neq = 0\n"
            ))
        };
        for ok in [
            "nodes.g-1.locktorture.0.fail",
            "nodes.g-*.locktorture.last.verdict",
            "nodes.*.warnings",
            "nodes.l1.stats.0.dirs.host.counters.kicks",
            "nodes.l1.stats.0.dirs.host.counters.advice_shared",
            "nodes.g-1.stats.last.dirs.guest.counters.wakeups_missed",
            "nodes.g-1.stats.0.dirs.*.counters.kicks",
            "nodes.g-1.stats.0.dirs.guest.counters.switch_max_ns",
            "nodes.g-1.stats.0.dirs.guest.histograms.histo_wait.buckets",
            "nodes.g-2.info.mode",
            "nodes.l1.hypercalls.x.y",
            "nodes.g-1.hackbench.0.secs",
        ] {
            assert!(
                check_paths(&with(ok)).is_ok(),
                "{ok}: {:?}",
                check_paths(&with(ok))
            );
        }
        for (bad, why) in [
            ("nodes.g-1.locktortures.0.fail", "no field 'locktortures'"),
            ("nodes.g-1.locktorture.0.failures", "no field 'failures'"),
            ("nodes.h-1.warnings", "no kernel 'h-1'"),
            ("nodes.g-3.warnings", "no kernel 'g-3'"),
            ("node.g-1.warnings", "does not begin"),
            ("nodes.g-1.locktorture.first.fail", "not an index"),
            ("nodes.g-1.level.x", "plain value"),
            (
                "nodes.g-1.stats.0.dirs.guest.counters.wakeups_dropped",
                "no counter 'wakeups_dropped' in guest_pvlock",
            ),
            (
                "nodes.l1.stats.0.dirs.host.counters.taken_slow",
                "no counter 'taken_slow' in host_kvm",
            ),
            (
                "nodes.l1.stats.0.dirs.hosts.counters.kicks",
                "no statistics directory",
            ),
        ] {
            let err = check_paths(&with(bad)).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn every_scenario_of_the_repository_has_valid_paths() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests");
        let mut n = 0;
        for dir in ["scenarios", "debug", "distro", "platform"] {
            let Ok(rd) = std::fs::read_dir(root.join(dir)) else {
                continue;
            };
            for f in rd.flatten() {
                let p = f.path();
                if p.extension().is_some_and(|e| e == "toml") {
                    load_scenario(&p).unwrap_or_else(|e| panic!("{}: {e:#}", p.display()));
                    n += 1;
                }
            }
        }
        assert!(n >= 20, "only {n} scenarios found");
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

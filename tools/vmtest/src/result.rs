// SPDX-License-Identifier: GPL-2.0

//! Turning the L1 console (which carries L2's, relayed with a `[<name>] `
//! prefix) into one result per run.
//!
//! The guest library prints marker lines `@@PV L<level>.<name> <event>
//! <data>`; everything else is kernel or QEMU output, kept for the console
//! log and scanned for kernel problems.

use regex::Regex;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// A step as it ran.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StepResult {
    pub id: String,
    pub call: String,
    pub rc: Option<i64>,
    pub secs: Option<f64>,
    pub timed_out: bool,
}

/// One locktorture run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Locktorture {
    pub kind: String,
    pub writers: u64,
    pub secs: f64,
    pub total: Option<u64>,
    pub max: Option<u64>,
    pub min: Option<u64>,
    /// Writes per second over the run.
    pub per_sec: Option<f64>,
    pub fail: Option<u64>,
    /// `SUCCESS` or `FAILURE` from "End of test".
    pub verdict: Option<String>,
    /// locktorture's own "???" mark of a suspicious Max/Min spread.
    pub suspicious: bool,
}

/// One hackbench run (rt-tests, the `hackbench` step).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Hackbench {
    pub groups: u64,
    pub loops: u64,
    /// hackbench's own "Time:" seconds; `None` if it failed or timed out.
    pub time: Option<f64>,
    pub rc: Option<i64>,
    /// Wall seconds of the step's hackbench, as the guest measured them.
    pub secs: Option<f64>,
    /// Stopped by the step's own bound.
    pub timed_out: bool,
    pub error: Option<String>,
}

/// One kernel (L1 or an L2 instance).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Node {
    pub level: u32,
    pub booted: bool,
    pub boot_uptime: Option<f64>,
    pub nproc: Option<u64>,
    pub kernel: Option<String>,
    pub cmdline: Option<String>,
    pub done: bool,
    pub done_uptime: Option<f64>,
    pub steps: Vec<StepResult>,
    pub modules: Vec<String>,
    pub dmesg: Vec<String>,
    pub params: BTreeMap<String, BTreeMap<String, String>>,
    pub stats: Vec<serde_json::Value>,
    pub stat_errors: Vec<String>,
    pub info: BTreeMap<String, String>,
    pub locktorture: Vec<Locktorture>,
    pub loadloops: Vec<BTreeMap<String, String>>,
    pub hackbench: Vec<Hackbench>,
    pub warnings: Option<u64>,
    /// L1: KVM hypercalls by number (decimal string) during each `l2` step.
    pub hypercalls: BTreeMap<String, BTreeMap<String, u64>>,
    pub kvmtest: Vec<String>,
    /// `@@KVMTEST case=...` lines, by case.
    pub kvmtest_cases: BTreeMap<String, BTreeMap<String, String>>,
    pub out: Vec<String>,
    pub errors: Vec<String>,
    /// Kernel messages that report a problem (BUG, Oops, WARNING, panic,
    /// RCU stall, soft lockup), from the console.
    pub problems: Vec<String>,
    /// Reports of CPUs that answered no NMI (a backtrace request, from the
    /// RCU stall detector or `csdlock_debug`): those vCPUs did not run.
    pub nmi_silent: Vec<String>,
    /// L2 instances: the exit status L1 saw.
    pub exit_rc: Option<i64>,
    /// L1: KVM's shutdown exits of its guests (`kvm:kvm_exit` trace lines
    /// with SVM exit code 0x7f), i.e. the guest triple faults.
    pub shutdown_exits: Vec<String>,
    /// The last console lines of this kernel.
    #[serde(skip)]
    pub tail: Vec<String>,
}

/// Everything parsed from one run's console.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Parsed {
    /// "l1" and the L2 instance names.
    pub nodes: BTreeMap<String, Node>,
}

fn re(cell: &'static OnceLock<Regex>, pat: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pat).expect("valid regex"))
}

fn writes_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(
        &R,
        r"Writes:\s+Total:\s+(\d+)\s+Max/Min:\s+(\d+)/(\d+)\s*(\?\?\?)?\s*Fail:\s+(\d+)",
    )
}

fn problem_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(
        &R,
        r"(BUG:|Oops|WARNING:|Kernel panic|rcu: INFO|soft lockup|hard LOCKUP|general protection fault|stack guard page|Call Trace:|cut here|Code: )",
    )
}

fn kv(s: &str) -> BTreeMap<String, String> {
    s.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const TAIL: usize = 40;

/// The kernel a console line comes from and its text: L2 lines come
/// relayed by L1 as "[<name>] ...", everything else is L1's.
pub fn split_origin(line: &str) -> (&str, &str) {
    match line.strip_prefix('[').and_then(|r| r.split_once("] ")) {
        Some((name, rest)) if name.contains('-') && !name.contains(' ') => (name, rest),
        _ => ("l1", line),
    }
}

impl Parsed {
    fn node(&mut self, name: &str) -> &mut Node {
        self.nodes.entry(name.to_string()).or_default()
    }

    /// Feeds one console line.
    pub fn line(&mut self, raw: &str) {
        let line = raw.trim_end_matches(['\r', '\n']);
        let (origin, text) = split_origin(line);
        let origin = origin.to_string();
        {
            let n = self.node(&origin);
            n.tail.push(text.to_string());
            if n.tail.len() > TAIL {
                n.tail.remove(0);
            }
        }
        if let Some(pos) = text.find("@@PV ") {
            // Consoles interleave: a line may hold more than one marker (an
            // L2's unfinished line, then L1's own marker after it).
            for m in text[pos + 5..].split("@@PV ") {
                self.marker(&origin, m.trim_end());
            }
            // Kernel output may share the line before the marker.
            if pos > 0 && problem_re().is_match(&text[..pos]) {
                self.node(&origin).problems.push(text[..pos].to_string());
            }
        } else if problem_re().is_match(text) {
            self.node(&origin).problems.push(text.to_string());
        }
        if text.contains("haven't responded to the NMI") {
            self.node(&origin).nmi_silent.push(text.to_string());
        }
    }

    fn marker(&mut self, origin: &str, m: &str) {
        let mut it = m.splitn(3, ' ');
        let who = it.next().unwrap_or("");
        let event = it.next().unwrap_or("");
        let data = it.next().unwrap_or("").to_string();
        let (level, name) = match who.split_once('.') {
            Some((l, n)) => (
                l.trim_start_matches('L').parse().unwrap_or(0),
                n.to_string(),
            ),
            None => (0, origin.to_string()),
        };
        // L1 reports about L2 instances.
        if event == "l2-exit" {
            let mut w = data.split_whitespace();
            let inst = w.next().unwrap_or("").to_string();
            let rc = w
                .next()
                .and_then(|r| r.strip_prefix("rc="))
                .and_then(|r| r.parse().ok());
            self.node(&inst).exit_rc = rc;
            return;
        }
        let node = self.node(&name);
        node.level = level;
        match event {
            "boot" => {
                node.booted = true;
                let m = kv(&data);
                node.boot_uptime = m.get("uptime").and_then(|v| v.parse().ok());
                node.nproc = m.get("nproc").and_then(|v| v.parse().ok());
                node.kernel = m.get("kernel").cloned();
            }
            "cmdline" => node.cmdline = Some(data),
            "done" => {
                node.done = true;
                node.done_uptime = kv(&data).get("uptime").and_then(|v| v.parse().ok());
            }
            "step-begin" => {
                let (id, call) = data.split_once(' ').unwrap_or((&data, ""));
                node.steps.push(StepResult {
                    id: id.to_string(),
                    call: call.to_string(),
                    ..Default::default()
                });
            }
            "step-end" => {
                let (id, rest) = data.split_once(' ').unwrap_or((&data, ""));
                let m = kv(rest);
                if let Some(s) = node.steps.iter_mut().rev().find(|s| s.id == id) {
                    s.rc = m.get("rc").and_then(|v| v.parse().ok());
                    s.secs = m.get("secs").and_then(|v| v.parse().ok());
                }
            }
            "step-timeout" => {
                let id = data.split_whitespace().next().unwrap_or("");
                if let Some(s) = node.steps.iter_mut().rev().find(|s| s.id == id) {
                    s.timed_out = true;
                }
            }
            "module" => node.modules.push(data),
            "dmesg" => node.dmesg.push(data),
            "params" => {
                let (m, rest) = data.split_once(' ').unwrap_or((&data, ""));
                node.params.insert(m.to_string(), kv(rest));
            }
            "stat" => match serde_json::from_str(&data) {
                Ok(v) => node.stats.push(v),
                Err(e) => node.stat_errors.push(format!("bad JSON ({e}): {data}")),
            },
            "stat-error" => node.stat_errors.push(data),
            "info" => {
                node.info = data
                    .split(';')
                    .filter_map(|kv| kv.split_once(": "))
                    .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                    .collect();
            }
            "lt" => {
                if node.locktorture.last().is_none_or(|l| !l.kind.is_empty()) {
                    node.locktorture.push(Locktorture::default());
                }
                let lt = node.locktorture.last_mut().expect("pushed above");
                if let Some(c) = writes_re().captures(&data) {
                    lt.total = c[1].parse().ok();
                    lt.max = c[2].parse().ok();
                    lt.min = c[3].parse().ok();
                    lt.suspicious = c.get(4).is_some();
                    lt.fail = c[5].parse().ok();
                }
                if data.contains("End of test: SUCCESS") {
                    lt.verdict = Some("SUCCESS".into());
                } else if data.contains("End of test: FAILURE") {
                    lt.verdict = Some("FAILURE".into());
                }
            }
            "locktorture" => {
                if node.locktorture.last().is_none_or(|l| !l.kind.is_empty()) {
                    node.locktorture.push(Locktorture::default());
                }
                let lt = node.locktorture.last_mut().expect("pushed above");
                let m = kv(&data);
                lt.kind = m.get("type").cloned().unwrap_or_else(|| "?".into());
                lt.writers = m.get("writers").and_then(|v| v.parse().ok()).unwrap_or(0);
                lt.secs = m.get("secs").and_then(|v| v.parse().ok()).unwrap_or(0.0);
                // The guest's one-line copy of the summary, for a run whose
                // "lt" lines the kernel's console output split.
                let num = |k: &str| m.get(k).and_then(|v| v.parse().ok());
                if lt.total.is_none() {
                    lt.total = num("total");
                    lt.max = num("max");
                    lt.min = num("min");
                    lt.fail = num("fail");
                    lt.suspicious = m.get("suspicious").is_some_and(|v| v == "1");
                }
                if lt.verdict.is_none() {
                    lt.verdict = m.get("verdict").cloned();
                }
                if let (Some(t), true) = (lt.total, lt.secs > 0.0) {
                    lt.per_sec = Some(t as f64 / lt.secs);
                }
                if m.contains_key("error") || data.starts_with("error=") {
                    node.errors.push(format!("locktorture: {data}"));
                }
            }
            "loadloop" => node.loadloops.push(kv(&data)),
            "hackbench" => {
                let m = kv(&data);
                let num = |k: &str| m.get(k).and_then(|v| v.parse().ok());
                let error = data.split_once("error=").map(|(_, e)| e.to_string());
                let hb = Hackbench {
                    groups: num("groups").unwrap_or(0),
                    loops: num("loops").unwrap_or(0),
                    time: if error.is_none() {
                        m.get("time").and_then(|v| v.parse().ok())
                    } else {
                        None
                    },
                    rc: m.get("rc").and_then(|v| v.parse().ok()),
                    secs: m.get("secs").and_then(|v| v.parse().ok()),
                    timed_out: error.as_deref() == Some("timeout"),
                    error,
                };
                if let Some(e) = &hb.error {
                    node.errors.push(format!("hackbench: {e}"));
                } else if hb.time.is_none() {
                    node.errors.push(format!("hackbench: no time in '{data}'"));
                }
                node.hackbench.push(hb);
            }
            "warnings" => node.warnings = kv(&data).get("count").and_then(|v| v.parse().ok()),
            "hypercalls" => {
                let mut w = data.split_whitespace();
                let step = w.next().unwrap_or("l2").to_string();
                let counts = w
                    .filter_map(|p| p.split_once(':'))
                    .filter_map(|(nr, c)| Some((nr.to_string(), c.parse().ok()?)))
                    .collect();
                node.hypercalls.insert(step, counts);
            }
            "kvmtest" => {
                if let Some(rest) = data.strip_prefix("@@KVMTEST ") {
                    let m = kv(rest);
                    if let Some(case) = m.get("case") {
                        node.kvmtest_cases.insert(case.clone(), m);
                    } else if rest.starts_with("summary") {
                        node.kvmtest_cases.insert("summary".into(), m);
                    }
                }
                node.kvmtest.push(data);
            }
            "out" => node.out.push(data),
            "error" => node.errors.push(data),
            "l2-shutdown-exit" => node.shutdown_exits.push(data),
            _ => {}
        }
    }
}

/// What a `kvm_exit ... reason shutdown` trace line says in words: the
/// vCPU, where it was and what it was delivering when the fault that
/// could not be delivered (a triple fault) happened.
pub fn describe_shutdown(line: &str) -> Option<String> {
    static R: OnceLock<Regex> = OnceLock::new();
    let c = re(
        &R,
        r"vcpu (\d+) reason shutdown rip (0x[0-9a-f]+) .*intr_info (0x[0-9a-f]+) error_code (0x[0-9a-f]+)",
    )
    .captures(line)?;
    let hex = |i: usize| u64::from_str_radix(c[i].trim_start_matches("0x"), 16).ok();
    let info = hex(3)?;
    let what = if info & (1 << 31) == 0 {
        "delivering nothing".to_string()
    } else {
        let vector = info & 0xff;
        let code = if info & (1 << 11) != 0 {
            format!(", error code {:#x}", hex(4)?)
        } else {
            String::new()
        };
        match (info >> 8) & 7 {
            0 => format!("delivering external interrupt {vector:#x}"),
            2 => "delivering an NMI".to_string(),
            3 => format!("delivering exception {vector}{code}"),
            4 => format!("delivering software interrupt {vector:#x}"),
            t => format!("delivering event type {t} vector {vector:#x}"),
        }
    };
    Some(format!(
        "triple fault on vCPU {} at rip {}, {what}",
        &c[1], &c[2]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_line_stands_in_for_split_lt_lines() {
        // As seen: the kernel's own "End of test" line landed inside the
        // guest's echo of the Writes line.
        let mut p = Parsed::default();
        for l in [
            "[g-1] @@PV L2.g-1 step-begin lt1 locktorture spin_lock 8 60",
            "[g-1] [   72.332591] Writes:  Total: 26284561  Max/Min: 3920091/2097268   Fail: 0 ",
            "[g-1] @@PV L2.g-1 lt [[   72.332814] spin_lock-torture:--- End of test: SUCCESS: acq_writer_lim=0",
            "[g-1]    72.332591] Writes:  Total: 26284561  Max/Min: 3920091/2097268   Fail: 0",
            "[g-1] @@PV L2.g-1 lt [   72.332814] spin_lock-torture:--- End of test: SUCCESS: acq_writer_lim=0",
            "[g-1] @@PV L2.g-1 locktorture type=spin_lock writers=8 secs=61.46 total=26284561 max=3920091 min=2097268 fail=0 verdict=SUCCESS",
        ] {
            p.line(l);
        }
        let lt = &p.nodes["g-1"].locktorture[0];
        assert_eq!(lt.total, Some(26284561));
        assert_eq!(
            (lt.max, lt.min, lt.fail),
            (Some(3920091), Some(2097268), Some(0))
        );
        assert_eq!(lt.verdict.as_deref(), Some("SUCCESS"));
        assert!(lt
            .per_sec
            .is_some_and(|r| (r - 26284561.0 / 61.46).abs() < 1.0));
        // Intact lt lines win over the summary line.
        let mut q = Parsed::default();
        q.line("[g-1] @@PV L2.g-1 lt [ 9.1] Writes:  Total: 10  Max/Min: 6/4   Fail: 1");
        q.line("[g-1] @@PV L2.g-1 lt [ 9.2] spin_lock-torture:--- End of test: FAILURE: x");
        q.line("[g-1] @@PV L2.g-1 locktorture type=spin_lock writers=2 secs=5 total=99 fail=0 verdict=SUCCESS");
        let lt = &q.nodes["g-1"].locktorture[0];
        assert_eq!((lt.total, lt.fail), (Some(10), Some(1)));
        assert_eq!(lt.verdict.as_deref(), Some("FAILURE"));
    }

    #[test]
    fn shutdown_exits_in_words() {
        let l = |i: &str| {
            format!("vcpu 3 reason shutdown rip 0xffffffffa000092b info1 0x0 info2 0x0 intr_info {i} error_code 0x00000000 requests 0x0")
        };
        assert_eq!(
            describe_shutdown(&l("0x800000ec")).unwrap(),
            "triple fault on vCPU 3 at rip 0xffffffffa000092b, delivering external interrupt 0xec"
        );
        assert!(describe_shutdown(&l("0x00000000"))
            .unwrap()
            .ends_with("delivering nothing"));
        assert!(describe_shutdown(&l("0x80000202"))
            .unwrap()
            .ends_with("an NMI"));
        assert!(describe_shutdown("kvm_exit: vcpu 0 reason npf rip 0x0").is_none());
    }

    const CONSOLE: &str = "\
@@PV L1.l1 boot uptime=1.36 nproc=2 kernel=7.3.4
@@PV L1.l1 step-begin load1 load host_kvm force=1
@@PV L1.l1 module host_kvm loaded params=[force=1]
@@PV L1.l1 step-end load1 rc=0 secs=0.12
@@PV L1.l1 step-begin l22 l2 290 g:1:4:768M:host
[g-1] @@PV L2.g-1 boot uptime=4.72 nproc=4 kernel=7.3.4
[g-1] @@PV L2.g-1 dmesg [    0.47] kvm-guest: PV spinlocks enabled
[g-1] @@PV L2.g-1 step-begin locktorture1 locktorture spin_lock 0 15
[g-1] @@PV L2.g-1 lt [   15.20] Writes:  Total: 7527856  Max/Min: 1972719/1828955 ???  Fail: 0
[g-1] @@PV L2.g-1 lt [   15.21] spin_lock-torture:--- End of test: SUCCESS: acq_writer_lim=0
[g-1] @@PV L2.g-1 locktorture type=spin_lock writers=8 secs=10.00
[g-1] @@PV L2.g-1 step-end locktorture1 rc=0 secs=10.91
[g-1] [   16.0] WARNING: CPU: 1 PID: 0 at kernel/foo.c:1
[g-1] @@PV L2.g-1 stat {\"dirs\":{\"guest\":{\"counters\":{\"kicks\":41}}}}
[g-1] @@PV L2.g-1 info lock_ops: pvlock;installed: 1;
[g-1] @@PV L2.g-1 done rc=0 uptime=16.13
[g-1] @@PV L1.l1 l2-exit g-1 rc=0
@@PV L1.l1 hypercalls all 5:41 1886781441:2
@@PV L1.l1 step-end l22 rc=0 secs=20.62
@@PV L1.l1 done rc=0 uptime=22.56
";

    #[test]
    fn parses_a_run() {
        let mut p = Parsed::default();
        for l in CONSOLE.lines() {
            p.line(l);
        }
        let l1 = &p.nodes["l1"];
        assert!(l1.done && l1.booted);
        assert_eq!(l1.steps.len(), 2);
        assert_eq!(l1.steps[1].secs, Some(20.62));
        assert_eq!(l1.hypercalls["all"]["5"], 41);
        let g = &p.nodes["g-1"];
        assert_eq!(g.level, 2);
        assert_eq!(g.exit_rc, Some(0));
        assert!(g.done);
        assert_eq!(g.locktorture.len(), 1);
        let lt = &g.locktorture[0];
        assert_eq!(lt.total, Some(7527856));
        assert_eq!(lt.min, Some(1828955));
        assert_eq!(lt.fail, Some(0));
        assert!(lt.suspicious);
        assert_eq!(lt.verdict.as_deref(), Some("SUCCESS"));
        assert_eq!(lt.per_sec, Some(752785.6));
        assert_eq!(g.stats[0]["dirs"]["guest"]["counters"]["kicks"], 41);
        assert_eq!(g.info["lock_ops"], "pvlock");
        assert_eq!(g.problems.len(), 1);
        assert!(l1.problems.is_empty());
    }

    #[test]
    fn parses_interleaved_markers() {
        let mut p = Parsed::default();
        p.line("[g-1] @@PV L2.g-1 step-begin lt3 locktorture @@PV L1.l1 l2-exit g-1 rc=0");
        let g = &p.nodes["g-1"];
        assert_eq!(g.exit_rc, Some(0));
        assert_eq!(g.steps[0].call, "locktorture");
    }

    #[test]
    fn parses_hackbench() {
        let mut p = Parsed::default();
        p.line("[g-1] @@PV L2.g-1 hackbench groups=2 loops=50 rc=0 secs=3.21 time=2.875");
        p.line("[g-1] @@PV L2.g-1 hackbench groups=4 loops=50 rc=0 secs=90.02 error=timeout");
        p.line("[g-1] @@PV L2.g-1 hackbench groups=4 loops=50 rc=127 secs=0.01 error=[not found ]");
        let g = &p.nodes["g-1"];
        assert_eq!(g.hackbench.len(), 3);
        let ok = &g.hackbench[0];
        assert_eq!((ok.groups, ok.loops, ok.rc), (2, 50, Some(0)));
        assert_eq!(ok.time, Some(2.875));
        assert_eq!(ok.secs, Some(3.21));
        assert!(!ok.timed_out && ok.error.is_none());
        assert!(g.hackbench[1].timed_out);
        assert_eq!(g.hackbench[1].time, None);
        assert!(!g.hackbench[2].timed_out);
        assert_eq!(g.hackbench[2].error.as_deref(), Some("[not found ]"));
        assert_eq!(g.errors.len(), 2);
        assert!(g.errors[0].contains("timeout"));
    }

    #[test]
    fn marker_after_kernel_text_on_one_line() {
        let mut p = Parsed::default();
        p.line("[g-1] [ 1.0] BUG: oops here@@PV L2.g-1 done rc=0 uptime=3");
        let g = &p.nodes["g-1"];
        assert!(g.done);
        assert_eq!(g.problems.len(), 1);
    }
}

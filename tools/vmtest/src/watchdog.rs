// SPDX-License-Identifier: GPL-2.0

//! The watchdog of a run: it stops a run whose kernels went silent, so that
//! a stall under nested TCG does not hold the machine until the run's whole
//! bound, and it has a silent kernel asked why first.
//!
//! Two bounds, both on the console: a kernel whose heartbeat runs (every
//! 5 s, `guest/init`) and that says nothing for [`STALL_SECS`] stalled
//! ([`Stall::Heartbeat`]; its heartbeat arms it, so a boot is not watched);
//! and, when the caller sets one, a bound on the whole console's silence,
//! heartbeats aside ([`Stall::Console`], pvlock-bench's bound per run: the
//! longest step that prints nothing until it ends, and a margin).
//!
//! A silent kernel gets an NMI on every vCPU before it is stopped: L1 sends
//! one to an L2 silent for [`L2_NMI_SECS`] (the guest library's relay loop,
//! through the L2's QMP socket; it says so with an `nmi-injected` line),
//! the harness one to an L1 silent for [`STALL_SECS`] ([`Stall::Probe`],
//! through L1's QMP socket). The kernel then has [`NMI_GRACE_SECS`] to
//! answer (a CPU's report of the NMI, which does not count as output) or
//! resume; an L2 whose probe L1 did not report gets as long past
//! [`STALL_SECS`], or, once L1 said it is asking (`nmi-asking`: the
//! register samples come first, and a loaded L1 takes its time), until
//! [`PROBE_SECS`] after that.
//!
//! An L2 that L1 paused (its QEMU's vCPUs stopped, `paused NAME`, the
//! guest library's `interleave`) is not watched until L1 resumes it
//! (`resumed NAME`), from when its silence counts afresh.

use crate::console::is_nmi_report;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Seconds without a line from a kernel whose heartbeat runs after which it
/// counts as stalled. The heartbeat comes every 5 s (`guest/init`).
pub const STALL_SECS: u64 = 90;

/// Seconds of silence after which L1 injects an NMI into an L2 (the guest
/// library's `l2_watch`, which checks every 5 s).
pub const L2_NMI_SECS: u64 = 60;

/// Seconds a kernel has, after its NMI, before the run is stopped.
pub const NMI_GRACE_SECS: u64 = 30;

/// Seconds L1 has, once it said it is asking an L2 why it is silent, to
/// report the NMI it injected (or could not).
pub const PROBE_SECS: u64 = 120;

/// A kernel's heartbeat line (L2s' relayed by L1 with their prefix); never
/// logged or parsed.
const HEARTBEAT: &str = "@@HB";

/// What the watchdog wants done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stall {
    /// Stop the run: the kernel named ("l1" or an L2's name) said nothing
    /// for [`STALL_SECS`] after its heartbeat had started, and its NMI
    /// probe is over.
    Heartbeat(String),
    /// Stop the run: the console said nothing but heartbeats for this many
    /// seconds.
    Console(u64),
    /// Inject an NMI into the kernel named (L1) and tell the watchdog
    /// ([`Watchdog::nmi_injected`] or [`Watchdog::nmi_failed`]).
    Probe(String),
}

/// A kernel's NMI probe.
#[derive(Debug, Clone, Copy)]
enum Probe {
    Injected(Instant),
    Failed(Instant),
    /// L1 began asking (register samples, then the NMI).
    Asking(Instant),
}

/// What the watchdog heard, and when.
#[derive(Debug, Clone)]
pub struct Watchdog {
    /// Per kernel, armed by its first heartbeat and refreshed by any line
    /// of it.
    heard: BTreeMap<String, Instant>,
    /// Per kernel, its last NMI probe.
    probes: BTreeMap<String, Probe>,
    /// L2s that L1 paused.
    paused: BTreeSet<String>,
    /// The bound on the whole console's silence, seconds.
    console_bound: Option<u64>,
    /// The last line that was not a heartbeat (or the start).
    last_output: Instant,
}

impl Watchdog {
    /// A watchdog from `start`, with a bound on the console's silence if
    /// `console_bound` is set.
    pub fn new(start: Instant, console_bound: Option<u64>) -> Self {
        Watchdog {
            heard: BTreeMap::new(),
            probes: BTreeMap::new(),
            paused: BTreeSet::new(),
            console_bound,
            last_output: start,
        }
    }

    /// A console line of kernel `origin` (see
    /// [`crate::console::split_origin`]) with text `text`, at `now`.
    /// Returns whether it is a heartbeat, which is neither logged nor
    /// parsed.
    pub fn console_line(&mut self, origin: &str, text: &str, now: Instant) -> bool {
        if text.trim_end() == HEARTBEAT {
            self.heard.insert(origin.to_string(), now);
            if origin != "l1" {
                // Relayed by L1, so L1 runs too.
                self.heard.insert("l1".to_string(), now);
            }
            return true;
        }
        // L1's word on its probe of an L2.
        for (event, p) in [
            (" nmi-injected ", Probe::Injected(now)),
            (" nmi-failed ", Probe::Failed(now)),
            (" nmi-asking ", Probe::Asking(now)),
        ] {
            if let Some((_, rest)) = text.split_once(event) {
                let kernel = rest.split_whitespace().next().unwrap_or("");
                if text.contains("@@PV L1.") && !kernel.is_empty() {
                    self.probes.insert(kernel.to_string(), p);
                }
            }
        }
        // L1's word that it paused or resumed an L2.
        if text.contains("@@PV L1.") {
            for (event, pause) in [(" paused ", true), (" resumed ", false)] {
                if let Some((_, rest)) = text.split_once(event) {
                    let kernel = rest.split_whitespace().next().unwrap_or("").to_string();
                    if pause {
                        self.paused.insert(kernel);
                    } else {
                        self.paused.remove(&kernel);
                        if let Some(t) = self.heard.get_mut(&kernel) {
                            *t = now;
                        }
                    }
                }
            }
        }
        // A CPU's report of an NMI is not the kernel running on; that L1
        // relayed it is L1 running.
        let report = is_nmi_report(text);
        for who in [origin, "l1"] {
            if report && who == origin {
                continue;
            }
            if let Some(t) = self.heard.get_mut(who) {
                *t = now;
            }
        }
        self.last_output = now;
        false
    }

    /// Output that is no kernel's (QEMU's own), at `now`.
    pub fn other_output(&mut self, now: Instant) {
        self.last_output = now;
    }

    /// An NMI was injected into kernel `kernel` at `now`.
    pub fn nmi_injected(&mut self, kernel: &str, now: Instant) {
        self.probes.insert(kernel.to_string(), Probe::Injected(now));
    }

    /// No NMI could be injected into kernel `kernel`, at `now`.
    pub fn nmi_failed(&mut self, kernel: &str, now: Instant) {
        self.probes.insert(kernel.to_string(), Probe::Failed(now));
    }

    /// What to do at `now`, if anything; `finished` says whether a kernel
    /// is done (an L2 is watched until its plan is done or it exited).
    pub fn stall(&self, now: Instant, finished: impl Fn(&str) -> bool) -> Option<Stall> {
        let secs = |since: Instant| now.saturating_duration_since(since);
        let past = |since: Instant, s: u64| secs(since) > Duration::from_secs(s);
        // The probe of a kernel since it went silent at `since`.
        let probe = |name: &str, since: Instant| {
            self.probes.get(name).copied().filter(|p| match p {
                Probe::Injected(t) | Probe::Failed(t) | Probe::Asking(t) => *t >= since,
            })
        };
        // L1 first: while it is silent, so are its guests.
        if let Some(&t) = self.heard.get("l1").filter(|_| !finished("l1")) {
            if past(t, STALL_SECS) {
                return match probe("l1", t) {
                    None | Some(Probe::Asking(_)) => Some(Stall::Probe("l1".into())),
                    Some(Probe::Injected(at)) if !past(at, NMI_GRACE_SECS) => None,
                    Some(_) => Some(Stall::Heartbeat("l1".into())),
                };
            }
        }
        for (name, &t) in &self.heard {
            if name == "l1" || finished(name) || self.paused.contains(name) || !past(t, STALL_SECS)
            {
                continue;
            }
            let over = match probe(name, t) {
                None => past(t, STALL_SECS + NMI_GRACE_SECS),
                Some(Probe::Injected(at)) => past(at, NMI_GRACE_SECS),
                Some(Probe::Failed(_)) => true,
                // L1 runs (it spoke): give it time to finish asking.
                Some(Probe::Asking(at)) => past(at, PROBE_SECS),
            };
            if over {
                return Some(Stall::Heartbeat(name.clone()));
            }
        }
        self.console_bound
            .filter(|&secs| past(self.last_output, secs))
            .map(Stall::Console)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: Instant, secs: u64) -> Instant {
        start + Duration::from_secs(secs)
    }

    #[test]
    fn a_heartbeat_arms_the_kernel() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(t0, None);
        // Booting: not watched, however long.
        assert!(!w.console_line("l1", "[ 1.0] booting", at(t0, 1)));
        assert_eq!(w.stall(at(t0, 500), |_| false), None);
        assert!(w.console_line("g-1", "@@HB", at(t0, 500)));
        assert!(!w.console_line("l1", "@@PV L1.l1 step-begin x", at(t0, 550)));
        assert_eq!(w.stall(at(t0, 590), |_| false), None);
        // g-1 silent for 90 s, but L1 may still be asking it why.
        assert_eq!(w.stall(at(t0, 591), |_| false), None);
        // L1 never said it did: stopped 30 s later.
        assert_eq!(
            w.stall(at(t0, 621), |_| false),
            Some(Stall::Heartbeat("g-1".into()))
        );
        // A finished L2 is no longer watched; L1 spoke at 550, and is
        // asked why (an NMI through QMP) at 90 s of silence.
        assert_eq!(w.stall(at(t0, 621), |n| n == "g-1"), None);
        assert_eq!(
            w.stall(at(t0, 641), |n| n == "g-1"),
            Some(Stall::Probe("l1".into()))
        );
        w.nmi_injected("l1", at(t0, 641));
        // Its CPUs' reports of the NMI do not count as output.
        w.console_line(
            "l1",
            "[  99.1] Uhhuh. NMI received for unknown reason 3c on CPU 0.",
            at(t0, 645),
        );
        assert_eq!(w.stall(at(t0, 671), |n| n == "g-1"), None);
        assert_eq!(
            w.stall(at(t0, 672), |n| n == "g-1"),
            Some(Stall::Heartbeat("l1".into()))
        );
    }

    #[test]
    fn a_paused_l2_is_not_watched_until_resumed() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(t0, None);
        w.console_line("g-1", "@@HB", t0);
        w.console_line("l1", "@@PV L1.l1 paused g-1", at(t0, 10));
        for s in (15..600).step_by(5) {
            w.console_line("l1", "@@HB", at(t0, s));
        }
        assert_eq!(w.stall(at(t0, 599), |_| false), None);
        // An L2 cannot pause itself.
        w.console_line("g-1", "@@PV L2.g-1 resumed g-1", at(t0, 599));
        assert_eq!(w.stall(at(t0, 599), |_| false), None);
        w.console_line("l1", "@@PV L1.l1 resumed g-1", at(t0, 600));
        for s in (605..730).step_by(5) {
            w.console_line("l1", "@@HB", at(t0, s));
        }
        // Its silence counts from the resume.
        assert_eq!(w.stall(at(t0, 690), |_| false), None);
        assert_eq!(
            w.stall(at(t0, 721), |_| false),
            Some(Stall::Heartbeat("g-1".into()))
        );
    }

    #[test]
    fn an_l1_that_is_asking_gets_time_to_finish() {
        // An L2 goes silent and L1 runs on: the run must not stop before
        // L1's samples and NMI come, or it ends with no evidence either
        // way.
        let t0 = Instant::now();
        let mut w = Watchdog::new(t0, None);
        w.console_line("g-1", "@@HB", t0);
        w.console_line("l1", "@@PV L1.l1 nmi-asking g-1", at(t0, 65));
        for s in (70..400).step_by(5) {
            w.console_line("l1", "@@HB", at(t0, s));
        }
        // Past 90 + 30 s of silence, but L1 said it is asking.
        assert_eq!(w.stall(at(t0, 150), |_| false), None);
        assert_eq!(w.stall(at(t0, 185), |_| false), None);
        // It does not finish: stopped 120 s after it began.
        assert_eq!(
            w.stall(at(t0, 186), |_| false),
            Some(Stall::Heartbeat("g-1".into()))
        );
        // It finishes: the NMI's grace, as ever.
        w.console_line("l1", "@@PV L1.l1 nmi-injected g-1", at(t0, 170));
        assert_eq!(w.stall(at(t0, 199), |_| false), None);
        assert_eq!(
            w.stall(at(t0, 201), |_| false),
            Some(Stall::Heartbeat("g-1".into()))
        );
    }

    #[test]
    fn a_silent_l2_gets_its_nmi_grace() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(t0, None);
        w.console_line("g-1", "@@HB", t0);
        // L1 runs on (its own heartbeat), g-1 says nothing.
        for s in (5..200).step_by(5) {
            w.console_line("l1", "@@HB", at(t0, s));
        }
        w.console_line("l1", "@@PV L1.l1 nmi-injected g-1", at(t0, 85));
        // 90 s of silence, but the NMI was 5 s ago: 30 s to answer.
        assert_eq!(w.stall(at(t0, 95), |_| false), None);
        // Its reports of the NMI are not output.
        w.console_line(
            "g-1",
            "[   61.123456] Uhhuh. NMI received for unknown reason 3c on CPU 2.",
            at(t0, 90),
        );
        assert_eq!(w.stall(at(t0, 115), |_| false), None);
        assert_eq!(
            w.stall(at(t0, 116), |_| false),
            Some(Stall::Heartbeat("g-1".into()))
        );
        // A kernel that resumed is silent no longer.
        w.console_line("g-1", "@@HB", at(t0, 110));
        assert_eq!(w.stall(at(t0, 116), |_| false), None);
        // L1 could not ask: no grace.
        w.console_line(
            "l1",
            "@@PV L1.l1 nmi-failed g-1 no pvlock-qmp in L1 to talk to QMP",
            at(t0, 200),
        );
        assert_eq!(
            w.stall(at(t0, 201), |_| false),
            Some(Stall::Heartbeat("g-1".into()))
        );
    }

    #[test]
    fn any_line_of_a_kernel_refreshes_it_and_l1() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(t0, None);
        w.console_line("g-1", "@@HB", t0);
        w.console_line("g-1", "[g-1 text]", at(t0, 80));
        assert_eq!(w.stall(at(t0, 160), |_| false), None);
        assert!(w.stall(at(t0, 201), |_| false).is_some());
    }

    #[test]
    fn the_console_bound_counts_everything_but_heartbeats() {
        let t0 = Instant::now();
        let mut w = Watchdog::new(t0, Some(100));
        assert_eq!(w.stall(at(t0, 100), |_| false), None);
        assert_eq!(w.stall(at(t0, 101), |_| false), Some(Stall::Console(100)));
        w.other_output(at(t0, 50));
        assert_eq!(w.stall(at(t0, 101), |_| false), None);
        // Heartbeats alone do not count as output; L1 is done.
        w.console_line("l1", "@@HB", at(t0, 140));
        assert_eq!(w.stall(at(t0, 151), |_| true), Some(Stall::Console(100)));
        w.console_line("l1", "@@PV L1.l1 done", at(t0, 150));
        assert_eq!(w.stall(at(t0, 249), |_| true), None);
    }
}

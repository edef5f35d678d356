// SPDX-License-Identifier: GPL-2.0

//! Failures the platform causes, not the code under test: the ways nested
//! TCG fails (a stalled guest timer, a vCPU that L1 stopped running, a
//! guest that vanished, crashes whose signature no real kernel bug has).
//!
//! [`events`] finds the platform events of an attempt, each with a short
//! stable name ([`Signature`]); [`judge_platform`] says whether every
//! failed check of the attempt follows from one of them. Only then is the
//! attempt the platform's (and retried, [`crate::retry`]): any failure that
//! none explains (a locktorture `Fail:`, a kernel problem in another
//! kernel, a step that failed before the event, a kernel that resumed
//! after an NMI) is evidence of its own, and the attempt is a real failure.
//!
//! A signature that the project's own bugs could produce counts only where
//! no project code ran: entry-fault recursion, a jump to 0 from idle, a
//! zeroed register state and a silent kernel whose every CPU answered an
//! NMI are the platform's in an L2 without guest_pvlock and in an L1
//! without host_kvm (see [`crate::console::CodeState`]); a stale `int3` is
//! the platform's only when no lock-op switch was in flight.

use crate::console::{project_frame, CodeState, Node, Parsed};
use crate::judge::{Failure, Kind, RunEnd};
use crate::regs::{self, Verdict};
use crate::scenario::Scenario;
use crate::watchdog::STALL_SECS;
use regex::Regex;
use std::sync::OnceLock;

/// A platform signature: the rule that recognised a platform event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signature {
    /// L1 went silent: a vCPU answered no NMI, or it ran no project code.
    L1Stall,
    /// L1's QEMU exited cleanly in the middle of the plan, no message.
    L1Reset,
    /// An L2 without project code went silent (its timer stopped).
    L2TimerStall,
    /// An L2 vCPU answered no NMI: L1 did not run it.
    VcpuNotRun,
    /// An L2's QEMU exited cleanly in the middle of the plan, no message.
    L2Reset,
    /// An L2 failed before its init ran.
    BootFailure,
    /// An `int3` where memory holds none, outside a lock-op switch.
    StaleInt3,
    /// Page faults recursed in the exception entry, no project code.
    EntryFaultRecursion,
    /// A jump to 0 out of the idle loop, no project code.
    IdleJumpToZero,
    /// A vCPU's register state zeroed (CS=0, RIP=0), no project code.
    ZeroedRegisters,
    /// RCU stall reports from an L2 running no project code.
    StarvedRcuStall,
    /// An interrupt taken inside a hardirq handler, not in project code.
    IrqInIrq,
    /// A register dump with a code segment no x86-64 kernel uses.
    BadFrame,
    /// A silent kernel whose every vCPU was halted with interrupts on,
    /// outside the project's code: no interrupt came.
    HaltedNoInterrupts,
    /// The interrupt entry read `current` through GS as NULL while the
    /// same report names the running task: the vCPU's GS base was lost.
    LostGsBase,
    /// An L1 CPU did not answer an IPI for 5 s while in guest mode.
    L1StuckInGuest,
    /// L1 scheduled with an NMI entry's count left in its preempt count
    /// while an L2 crashed in its exception entry.
    LostNmiExit,
    /// A silent L2 with a vCPU whose RIP stayed in KVM's world switch.
    HostStateInGuest,
    /// The entry stack overflowed: an event nested in the entry code
    /// before its `swapgs`, where interrupts are off.
    IrqBeforeSwapgs,
}

impl Signature {
    /// Every signature, in report order.
    pub const ALL: [Signature; 19] = [
        Signature::L1Stall,
        Signature::L1Reset,
        Signature::L2TimerStall,
        Signature::VcpuNotRun,
        Signature::L2Reset,
        Signature::BootFailure,
        Signature::StaleInt3,
        Signature::EntryFaultRecursion,
        Signature::IdleJumpToZero,
        Signature::ZeroedRegisters,
        Signature::StarvedRcuStall,
        Signature::IrqInIrq,
        Signature::BadFrame,
        Signature::HaltedNoInterrupts,
        Signature::LostGsBase,
        Signature::L1StuckInGuest,
        Signature::LostNmiExit,
        Signature::HostStateInGuest,
        Signature::IrqBeforeSwapgs,
    ];

    /// Its short stable name, for tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Signature::L1Stall => "l1-stall",
            Signature::L1Reset => "l1-reset",
            Signature::L2TimerStall => "l2-timer-stall",
            Signature::VcpuNotRun => "vcpu-not-run",
            Signature::L2Reset => "l2-reset",
            Signature::BootFailure => "boot-failure",
            Signature::StaleInt3 => "stale-int3",
            Signature::EntryFaultRecursion => "entry-fault-recursion",
            Signature::IdleJumpToZero => "idle-jump-to-zero",
            Signature::ZeroedRegisters => "zeroed-registers",
            Signature::StarvedRcuStall => "starved-rcu-stall",
            Signature::IrqInIrq => "irq-in-irq",
            Signature::BadFrame => "bad-frame",
            Signature::HaltedNoInterrupts => "halted-no-interrupts",
            Signature::LostGsBase => "lost-gs-base",
            Signature::L1StuckInGuest => "l1-stuck-in-guest",
            Signature::LostNmiExit => "lost-nmi-exit",
            Signature::HostStateInGuest => "host-state-in-guest",
            Signature::IrqBeforeSwapgs => "irq-before-swapgs",
        }
    }
}

/// A platform event in one kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub kernel: String,
    pub signature: Signature,
    /// For people.
    pub why: String,
    /// Where it began on the console ([`Parsed::seq`]): a step or error of
    /// the kernel that ended before is not its consequence.
    pub since: u64,
    /// It is made of kernel problem reports (a crash, a stall report): the
    /// kernel's problems from `since` on are its own.
    pub problems: bool,
}

/// The platform's part in a failed attempt.
#[derive(Debug, Clone, Default)]
pub struct Judgement {
    /// Every platform event of the attempt.
    pub events: Vec<Event>,
    /// The failures that no event explains: evidence of their own.
    pub unexplained: Vec<String>,
}

impl Judgement {
    /// The attempt failed for the platform: it failed, and every failure
    /// follows from a platform event.
    pub fn platform(&self) -> bool {
        !self.events.is_empty() && self.unexplained.is_empty()
    }

    /// The events, for people.
    pub fn why(&self) -> String {
        self.events
            .iter()
            .map(|e| e.why.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// The events' signatures, each once, in order.
    pub fn signatures(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = Vec::new();
        for e in &self.events {
            if !v.contains(&e.signature.name()) {
                v.push(e.signature.name());
            }
        }
        v
    }
}

/// Page faults that recurse in the exception entry itself until the stack
/// runs out (`stack guard page was hit`, `#DF` or task stack, with the
/// faulting RIP in the entry code): the entry code is fixed, the TLB under
/// it is nested TCG's. It comes in L1 and in L2s with and without pvlock;
/// but a real hang of an L2 with HLT exits disabled and guest_pvlock
/// installed ends in exactly these lines, so in an L2 only a kernel that
/// runs no project code counts (in L1, see [`crash_signature`]).
fn entry_fault_recursion<'a>(lines: impl Iterator<Item = &'a String> + Clone) -> bool {
    guard_page_hit_in(
        lines,
        "stack guard page was hit",
        &[
            "exc_page_fault",
            "irqentry_enter",
            "error_entry",
            "asm_exc_page_fault",
        ],
    )
}

/// A report with a line containing `guard` (a stack's guard page hit) and
/// a kernel `RIP:` line whose function starts with one of `rips`.
fn guard_page_hit_in<'a>(
    mut lines: impl Iterator<Item = &'a String> + Clone,
    guard: &str,
    rips: &[&str],
) -> bool {
    lines.clone().any(|l| l.contains(guard))
        && lines.any(|l| {
            l.split_once("RIP: 0010:")
                .is_some_and(|(_, f)| rips.iter().any(|r| f.starts_with(r)))
        })
}

/// An oops in the kernel's interrupt entry at the instruction that uses
/// `current`, just read through GS (`mov %gs:disp32,%rax`, bytes `65 48 8b
/// 04 25`, before the faulting one in the `Code:` dump), as NULL (RAX 0, a
/// fault on a small address), in a report that names the task running on
/// that CPU (`CPU: 1 ... PID: 139 Comm: ...`): the oops code read the same
/// `current` through GS a moment later to print it. Entry from kernel mode
/// does not touch GS (no `swapgs`), and no code of the project's writes
/// the GS base or per-CPU `current`: the vCPU ran with a GS base that was
/// not its own. It comes in L2s with guest_pvlock, in the entry right
/// after a kick hypercall returned, as in an L2 whose L1 crashes at the
/// same moment (nested TCG's world switch), so it counts whatever is
/// loaded.
fn lost_gs_base<'a>(mut lines: impl Iterator<Item = &'a String> + Clone) -> bool {
    let gs_load_before_fault = |l: &&String| {
        l.split_once("Code: ").is_some_and(|(_, c)| {
            let before: Vec<&str> = c
                .split('<')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            before
                .windows(5)
                .any(|w| w == ["65", "48", "8b", "04", "25"])
        })
    };
    let small_cr2 = |l: &&String| {
        l.split_once("CR2: ").is_some_and(|(_, v)| {
            v.split_whitespace()
                .next()
                .and_then(|h| u64::from_str_radix(h, 16).ok())
                .is_some_and(|a| a < 0x1000)
        })
    };
    lines
        .clone()
        .any(|l| l.contains("RIP: 0010:irqentry_enter+"))
        && lines.clone().any(|l| gs_load_before_fault(&l))
        && lines.clone().any(|l| l.contains("RAX: 0000000000000000"))
        && lines.any(|l| small_cr2(&l))
}

/// The entry stack (`ENTRY_TRAMPOLINE`) overflowed, the report's RIP in the
/// exception or interrupt entry. The kernel runs on that stack only in its
/// first instructions after an event from user mode (until `error_entry`'s
/// `swapgs` and `sync_regs` move the frame to the task stack) and in its
/// last ones on the way back (the `sysret` path, and the `iret` path with
/// PTI): every one of them with interrupts off (every IDT gate clears IF),
/// touching nothing that can fault, the same with any module loaded; no
/// project code runs there. Overflowing it takes events nested there. A
/// nested event there sees a kernel CS in its frame, so the entry takes
/// the kernel-mode path without `swapgs`, on the user's GS base: the faults
/// that then recur are `irqentry_enter`'s read of `current` (through GS
/// base 0: the boot copy of the per-CPU area, in freed init memory, so
/// `0xcccc...` or 0), as in both sightings. The CPU delivered an interrupt
/// with IF clear: the fault of [`Signature::IrqInIrq`], in another place.
fn irq_before_swapgs<'a>(lines: impl Iterator<Item = &'a String> + Clone) -> bool {
    guard_page_hit_in(
        lines,
        "BUG: ENTRY_TRAMPOLINE stack guard page was hit",
        &[
            "irqentry_enter+",
            "error_entry+",
            "asm_exc_",
            "asm_sysvec_",
            "asm_common_interrupt+",
            "exc_",
        ],
    )
}

/// An `int3` trap at an address whose byte in memory is not `int3`
/// (`0xcc`): the `Code:` dump of the oops shows the instruction bytes around
/// RIP, and the byte before the marked one is the one that trapped. The
/// kernel's text patching (static calls, static keys) writes `int3` first
/// and the final byte last, then serialises every CPU with an IPI before it
/// drops its `int3` handler's record; on an x86 CPU no CPU can execute the
/// old `int3` after that. Nested TCG does: it runs a stale translation of
/// the patched code, with the kernel's own tracepoint patching in L2s
/// without pvlock too (tests/platform/textpoke-native.toml reproduces it).
/// A bug in the project's lock-op switching looks the same, so not during
/// a switch.
fn stale_int3<'a>(mut lines: impl Iterator<Item = &'a String> + Clone) -> bool {
    let stale = |l: &&String| {
        let Some((_, code)) = l.split_once("Code: ") else {
            return false;
        };
        let bytes: Vec<&str> = code.split_whitespace().collect();
        bytes
            .iter()
            .position(|b| b.starts_with('<'))
            .and_then(|i| i.checked_sub(1))
            .is_some_and(|i| bytes[i].len() == 2 && bytes[i] != "cc")
    };
    lines.clone().any(|l| l.contains("Oops: int3")) && lines.any(|l| stale(&l))
}

/// A jump to address 0 taken from the idle loop's halt (the interrupted
/// context is `default_idle`/`do_idle`, no frame of the project's on the
/// stack): nested TCG does it, in L1 and an L2 at once.
fn idle_jump_to_zero<'a>(mut lines: impl Iterator<Item = &'a String> + Clone) -> bool {
    // A frame (or RIP) of the project's code in the report.
    let project = |l: &&String| {
        l.split_whitespace()
            .any(|w| w.contains("+0x") && project_frame(w.rsplit(':').next().unwrap_or(w)))
    };
    lines.clone().any(|l| l.contains("RIP: 0010:0x0"))
        && lines.clone().any(|l| l.contains("do_idle"))
        && !lines.any(|l| project(&l))
}

/// The CPUs that answered no backtrace NMI within 10 s: the kernel's own
/// `these CPUS still haven't responded to the NMI: 0-1`, or the parser's
/// `CPU 2 did not answer the backtrace NMI ...`.
fn silent_cpus(n: &Node) -> Vec<u32> {
    let mut v = Vec::new();
    for l in not_run_reports(n) {
        if let Some((_, list)) = l.split_once("responded to the NMI:") {
            v.extend(crate::console::cpu_list(list));
        } else if let Some(cpu) = l
            .strip_prefix("CPU ")
            .and_then(|r| r.split(' ').next())
            .and_then(|c| c.parse().ok())
        {
            v.push(cpu);
        }
    }
    v
}

/// How much of a late NMI answer L1's run-queue record may leave
/// unexplained (seconds): the record's sampling and the wake-up itself.
/// So at most that much of the delay can have been the vCPU kept halted
/// by the host half despite the NMI, and no more than host_kvm's own
/// bound on a lock wait (`max_wait_ms`, 1 s by default) allows anyway.
pub const RUNQ_SLACK_SECS: f64 = 1.0;

/// Backtrace NMIs answered late in the project's code (most often its lock
/// wait, halted in the host with interrupts off) that L1's run-queue
/// record explains: the first `runq` record of that vCPU after the request
/// shows one stretch, runnable on L1's run queue and not run, that covers
/// all of the delay but [`RUNQ_SLACK_SECS`]. A vCPU halted in a lock wait
/// sleeps in L1 and is not counted there: an NMI makes it runnable at once
/// (KVM's halt ends on it), and once it runs it takes the NMI at its first
/// guest instruction. So only a vCPU that L1 could run and did not answers
/// that late; one that the host half kept halted despite the NMI shows no
/// such stretch and stays a failure.
fn late_answers_not_run(n: &Node) -> Vec<String> {
    n.nmi_late_in_project
        .iter()
        .filter_map(|l| {
            let r = n
                .runq
                .iter()
                .find(|r| r.cpu == l.cpu && r.seq > l.sent_seq)?;
            (r.stretch() >= l.late - RUNQ_SLACK_SECS).then(|| {
                format!(
                    "CPU {} answered the backtrace NMI sent at {:.1} s only {:.1} s later, in the project's code ({}), and L1 had kept its thread runnable without running it for at least {:.1} s of that (runq: waited {:.2} s within {:.2} s)",
                    l.cpu,
                    l.sent_at,
                    l.late,
                    l.rip,
                    r.stretch(),
                    r.waited,
                    r.within
                )
            })
        })
        .collect()
}

/// The reports of vCPUs that L1 did not run: NMIs not answered, or
/// answered late outside the project's code, or late in it as
/// [`late_answers_not_run`] says.
fn not_run_reports(n: &Node) -> Vec<String> {
    let mut v = n.nmi_silent.clone();
    v.extend(late_answers_not_run(n));
    v
}

/// What L1's run-queue record says of `cpus` (for the record of a
/// `vcpu-not-run` verdict): each one's longest stretch runnable and not
/// run, or that it has none. A vCPU that answered no NMI, or answered late
/// outside the project's code, with no stretch was not run because L1's
/// own vCPU was not (by QEMU), or it stayed halted in L1.
fn runq_note(n: &Node, cpus: &[u32]) -> String {
    let mut cpus = cpus.to_vec();
    cpus.sort_unstable();
    cpus.dedup();
    let parts: Vec<String> = cpus
        .iter()
        .map(|&c| {
            let longest = n
                .runq
                .iter()
                .filter(|r| r.cpu == c)
                .map(|r| r.stretch())
                .reduce(f64::max);
            match longest {
                Some(s) => {
                    format!("vCPU {c} waited on its run queue for at least {s:.1} s in one stretch")
                }
                None => format!("vCPU {c} never waited on its run queue for 2 s in one stretch"),
            }
        })
        .collect();
    format!("L1's run-queue record: {}", parts.join(", "))
}

/// Every soft lockup the kernel reported is of a CPU that it also reported
/// waiting for an IPI from a CPU that answered no NMI (`csd: ... on CPU#2,
/// waiting ... for CPU#00`): each spins in `csd_lock_wait()` because that
/// vCPU is not run.
fn soft_lockups_wait_for_silent(n: &Node) -> bool {
    let silent = silent_cpus(n);
    n.soft_lockups.iter().all(|&(_, cpu)| {
        n.csd_waits
            .iter()
            .any(|&(_, w, t)| w == cpu && silent.contains(&t))
    })
}

/// An RCU stall, or a CPU waiting for an IPI (`csdlock_debug`), in which a
/// vCPU answered no NMI: an NMI reaches a vCPU whatever the guest runs on
/// it (halted, spinning, interrupts off), unless it is already inside an
/// NMI handler: an NMI ends a `HLT` whatever the guest waits for, a lost
/// kick included. So L1 did not run that vCPU. It comes in L2s without any
/// project code (an idle vCPU that an IPI never woke; CPUs spinning for a
/// TLB-flush IPI to a vCPU that never answered) as in L2s with it. A CPU
/// waiting for an IPI counts only when the CPU it waits for is one that
/// answered no NMI. A report whose CPUs all answered shows their stacks
/// and stays a failure, as does any oops, warning or lockup report.
fn vcpu_stopped_running(n: &Node) -> bool {
    const REAL: [&str; 7] = [
        "BUG:",
        "Oops",
        "WARNING:",
        "Kernel panic",
        "general protection",
        "soft lockup",
        "hard LOCKUP",
    ];
    let lockups_explained = soft_lockups_wait_for_silent(n);
    let silent = silent_cpus(n);
    let waits_for_silent = n.csd_waits.iter().any(|&(_, _, t)| silent.contains(&t));
    !silent.is_empty()
        && (n.problems.iter().any(|l| l.contains("rcu: INFO")) || waits_for_silent)
        && !n.problems.iter().any(|l| {
            REAL.iter().any(|k| l.contains(k))
                && !(lockups_explained && l.contains("soft lockup - CPU#"))
        })
}

/// L1 reported a CPU that did not answer an IPI for 5 s (`csdlock_debug`)
/// and that CPU's backtrace NMI found it in guest mode: KVM runs every
/// guest with the physical interrupt intercepted, so an IPI pending that
/// long while a CPU is in guest mode was not delivered by the level below
/// (nested TCG; guest code of any kind cannot hold it there, and the
/// project's host code runs after an exit, not in guest mode). Returns the
/// sequence number of the CSD report and the CPU.
fn l1_stuck_in_guest(l1: &Node) -> Option<(u64, u32)> {
    l1.csd_waits.iter().find_map(|&(seq, _, t)| {
        l1.nmi_rips
            .iter()
            .any(|(s, cpu, f)| *s > seq && *cpu == t && regs::in_world_switch(f))
            .then_some((seq, t))
    })
}

/// From how long before to how long after an L1 event of `sig` an L2
/// problem counts as its consequence, in seconds of the run's time: an L1
/// crash ends the run; an L1 CPU stuck in guest mode resumes, and its L2
/// reports what it missed at once. `None`: the event explains no L2
/// problem (an L2's crash is what it follows).
fn l2_reach(sig: Signature) -> Option<(f64, f64)> {
    match sig {
        Signature::L1StuckInGuest => Some((L1_CRASH_REACH_SECS, L1_STUCK_REACH_SECS)),
        // Only an L2 that crashed in its exception entry, nothing before
        // (see `entry_crash_out_of_the_blue`).
        Signature::LostNmiExit => Some((LOST_NMI_EXIT_SECS, LOST_NMI_EXIT_SECS)),
        _ => Some((L1_CRASH_REACH_SECS, f64::INFINITY)),
    }
}

/// See [`l2_reach`].
const L1_STUCK_REACH_SECS: f64 = 15.0;

/// How far apart (seconds of the run's time) an L2's crash in its
/// exception entry and L1's [`Signature::LostNmiExit`] may be: L2 lines
/// reach the console through L1's userspace, later than L1's own.
const LOST_NMI_EXIT_SECS: f64 = 30.0;

/// `NMI_OFFSET` of Linux 7.3's preempt count (PREEMPT 8 bits, SOFTIRQ 8,
/// HARDIRQ_DISABLE 8, HARDIRQ 4, then NMI).
const NMI_OFFSET: u64 = 1 << 28;

/// L1 scheduled (`BUG: scheduling while atomic: qemu-system-x86/91/
/// 0x11000001`) with an NMI entry's count (and its hardirq count) left in
/// its preempt count, in a report without the project's code, while an L2
/// crashed in its exception entry (page faults recursing into the stack
/// guard page) at the same time: the NMI was left without its exit path,
/// which no code of the project's runs in (host_kvm has no NMI handler,
/// and KVM's pvlock hooks run in vCPU threads). It comes with no project
/// code in L1 or L2 too, L1 then reporting the L2's fault address in its
/// own CR2. Returns the sequence number of the report.
fn lost_nmi_exit(p: &Parsed, l1: &Node) -> Option<u64> {
    let seq = l1.problems.iter().zip(&l1.problem_at).find_map(|(l, at)| {
        let count = l
            .split_once("BUG: scheduling while atomic: ")?
            .1
            .rsplit('/')
            .next()?
            .trim();
        let count = u64::from_str_radix(count.trim_start_matches("0x"), 16).ok()?;
        (count & NMI_OFFSET != 0).then_some(at.0)
    })?;
    let own_code = l1.project_frames.iter().any(|&f| f >= seq && f <= seq + 60);
    let l2_entry_crash = p.nodes.iter().any(|(name, n)| {
        name != "l1"
            && n.problems.iter().zip(&n.problem_at).any(|(l, at)| {
                l.contains("stack guard page was hit")
                    && (p.wall_of(at.0) - p.wall_of(seq)).abs() <= LOST_NMI_EXIT_SECS
            })
    });
    (!own_code && l2_entry_crash).then_some(seq)
}

/// Kernel problem lines that are a crash (not a stall report or a
/// deliberate panic).
fn is_crash(l: &str) -> bool {
    ["BUG:", "Oops", "general protection", "stack guard page"]
        .iter()
        .any(|k| l.contains(k))
}

/// The first interrupt taken inside a hardirq handler that interrupted
/// code other than the project's. Hardirq handlers run with interrupts
/// off; an interrupt delivered there anyway deadlocks on whatever lock the
/// handler held (`hrtimer_interrupt`, say, holding its base lock, taken
/// again by the timer interrupt nested in it). Project code that enabled
/// interrupts would be the interrupted frame.
fn irq_in_irq(n: &Node) -> Option<&(u64, String)> {
    n.irq_in_irq.iter().find(|(_, f)| !project_frame(f))
}

/// A register dump whose code segment no x86-64 kernel uses (`RIP: f0a2:`):
/// the exception frame the CPU pushed is not where the entry code reads
/// it (nested TCG delivered the exception wrongly). 0 (a zeroed state) is
/// [`Signature::ZeroedRegisters`].
fn bad_frame<'a>(mut lines: impl Iterator<Item = &'a String>) -> bool {
    lines.any(|l| {
        l.split_once("RIP: ").is_some_and(|(_, r)| {
            let sel = r.split(':').next().unwrap_or("");
            sel.len() == 4
                && sel.chars().all(|c| c.is_ascii_hexdigit())
                && !["0010", "0033", "0023", "002b", "0000"].contains(&sel)
        })
    })
}

/// The problems of `n` that belong to evidence at console position `seq`:
/// from the first problem reported within 30 s (kernel time) before the
/// last one up to `seq`.
fn problems_since(n: &Node, seq: u64) -> u64 {
    let Some(i) = n.problem_at.iter().rposition(|p| p.0 <= seq) else {
        return seq;
    };
    let Some(t) = n.problem_at[i].1 else {
        return n.problem_at[i].0;
    };
    let mut start = n.problem_at[i].0;
    for &(s, ts, _) in n.problem_at[..i].iter().rev() {
        match ts {
            Some(u) if t - u > 30.0 => break,
            _ => start = s,
        }
    }
    start
}

fn anchor(n: &Node, anchor: impl Fn(&str) -> bool) -> usize {
    n.problems
        .iter()
        .position(|l| anchor(l))
        .or_else(|| n.problems.iter().position(|l| is_crash(l)))
        .unwrap_or(0)
}

/// The kernel's state at problem line `i` (its current state if it
/// reported no problem).
fn state_at(n: &Node, i: usize) -> CodeState {
    n.problem_at.get(i).map(|p| p.2).unwrap_or(n.state)
}

/// Where a crash whose line `i` is its anchor began: the crash's report
/// comes within seconds (kernel time), so the problem lines up to 5 s
/// before the anchor are the crash's; earlier ones are not.
fn crash_start(n: &Node, i: usize) -> u64 {
    let Some(&(seq, ts, _)) = n.problem_at.get(i) else {
        return n.last_seq;
    };
    let Some(t) = ts else {
        return seq;
    };
    let mut start = seq;
    for &(s, ts, _) in n.problem_at[..i].iter().rev() {
        match ts {
            Some(u) if t - u > 5.0 => break,
            _ => start = s,
        }
    }
    start
}

/// The crash of a kernel (L1 or an L2) that only nested TCG causes, judged
/// from its last console lines and problem reports, where no project code
/// could have caused it. `None` also when a signature matched but the
/// project's code was running.
fn crash_signature(name: &str, n: &Node) -> Option<Event> {
    let lines = || n.tail.iter().chain(&n.problems);
    let event = |signature, i: usize, why: String| {
        Some(Event {
            kernel: name.to_string(),
            signature,
            why: format!("{name}: {why}"),
            since: crash_start(n, i),
            problems: true,
        })
    };
    let module = if name == "l1" {
        "host_kvm"
    } else {
        "guest_pvlock"
    };
    if let Some((seq, f)) = irq_in_irq(n) {
        return Some(Event {
            kernel: name.to_string(),
            signature: Signature::IrqInIrq,
            why: format!(
                "{name}: an interrupt was taken inside a hardirq handler, where interrupts are off (it interrupted {f}; nested TCG)"
            ),
            since: problems_since(n, *seq),
            problems: true,
        });
    }
    if irq_before_swapgs(lines()) {
        let i = anchor(n, |l| l.contains("stack guard page was hit"));
        return event(
            Signature::IrqBeforeSwapgs,
            i,
            "the entry stack overflowed with events nested in the entry code before its swapgs, where interrupts are off (nested TCG)".into(),
        );
    }
    if lost_gs_base(lines()) {
        let i = anchor(n, |l| l.contains("BUG:"));
        return event(
            Signature::LostGsBase,
            i,
            "the interrupt entry read current through GS as NULL while the report names the running task: the vCPU's GS base was lost (nested TCG)".into(),
        );
    }
    if bad_frame(n.rips.iter()) {
        let i = anchor(n, |l| l.contains("BUG:") || l.contains("Oops"));
        return event(
            Signature::BadFrame,
            i,
            "an exception frame with a code segment no kernel uses (the CPU pushed it wrongly; nested TCG)".into(),
        );
    }
    if entry_fault_recursion(lines()) {
        let i = anchor(n, |l| l.contains("stack guard page was hit"));
        // In an L2 the real hang of guest_pvlock with HLT exits disabled
        // ended in these lines, so only a guest without it counts. In L1
        // the project's code (host_kvm, the KVM hooks) runs in vCPU
        // threads and touches no page table or exception entry, and L1s
        // without host_kvm end this way as often as with it.
        let loaded = state_at(n, i).project_code;
        if loaded && name != "l1" {
            return None;
        }
        return event(
            Signature::EntryFaultRecursion,
            i,
            format!(
                "page faults recursed in the exception entry with {}{module} loaded (nested TCG)",
                if loaded { "" } else { "no " }
            ),
        );
    }
    if stale_int3(lines()) {
        let i = anchor(n, |l| l.contains("Oops: int3"));
        if state_at(n, i).switching {
            return None;
        }
        return event(
            Signature::StaleInt3,
            i,
            "an int3 trapped where memory holds no int3, no lock-op switch in flight (stale code after text patching; nested TCG)".into(),
        );
    }
    // In L1 the project's code (host_kvm, KVM's pvlock hooks) runs in vCPU
    // threads, in their hypercalls and ioctls: never in the idle task or an
    // interrupt it takes. So a crash out of L1's idle loop with no project
    // frame is the platform's with host_kvm loaded too. An L2's idle loop
    // takes locks in its interrupts, guest_pvlock's slowpath among them.
    let idle_is_clean = |loaded: bool| !loaded || name == "l1";
    if idle_jump_to_zero(lines()) {
        let i = anchor(n, |l| l.contains("BUG:"));
        let loaded = state_at(n, i).project_code;
        if !idle_is_clean(loaded) {
            return None;
        }
        return event(
            Signature::IdleJumpToZero,
            i,
            format!(
                "a jump to 0 out of the idle loop with {}{module} loaded (nested TCG)",
                if loaded { "" } else { "no " }
            ),
        );
    }
    // A 64-bit kernel never runs with code segment 0: its register state
    // was zeroed under it, which nested TCG does; counted only with no
    // project code loaded.
    if lines().any(|l| l.contains("RIP: 0000:0x0")) {
        let i = anchor(n, |l| l.contains("BUG:"));
        if state_at(n, i).project_code {
            return None;
        }
        return event(
            Signature::ZeroedRegisters,
            i,
            format!("a vCPU's register state was zeroed (CS=0, RIP=0) with no {module} loaded (nested TCG)"),
        );
    }
    None
}

/// The CPUs online in a kernel, as it last said (`hotplug_loop`,
/// `online_cpus`, or at boot).
fn online_cpus(n: &Node) -> u32 {
    let online = |v: &Vec<std::collections::BTreeMap<String, String>>| {
        v.last()
            .and_then(|m| m.get("online"))
            .and_then(|o| o.parse().ok())
    };
    online(&n.hotplug)
        .or_else(|| online(&n.cpus))
        .or(n.nproc.map(|p| p as u32))
        .unwrap_or(1)
}

/// A kernel that said nothing (its heartbeat included) until the watchdog
/// stopped the run, after an NMI probe ([`crate::console::NmiProbe`]):
/// - some CPUs reported the NMI, others did not: those vCPUs were not run
///   (by L1 for an L2, by QEMU for L1): the platform's;
/// - every CPU reported it, or none did, and it stayed silent: the
///   platform's only if the kernel ran no project code. (A CPU reports an
///   NMI from interrupt context, later: a kernel whose every CPU keeps
///   interrupts off prints no report though it took the NMI, so "none"
///   proves nothing);
/// - it resumed after the NMI: a lost wake-up, never the platform's (the
///   judge's [`Kind::LostWakeup`]).
fn silent_kernel(name: &str, n: &Node) -> Option<Event> {
    let l1 = name == "l1";
    let p = &n.nmi;
    let event = |signature, why: String| {
        Some(Event {
            kernel: name.to_string(),
            signature,
            why: format!("{name}: {why}"),
            since: n.last_seq,
            problems: false,
        })
    };
    // A vCPU that took a maskable interrupt with interrupts off: what its
    // interrupted code held, the handler waits for (the irq-in-irq of a
    // silent kernel, which prints no stack). Before the project's-code
    // rule: a lock wait nested this way waits for its own CPU.
    if let Some(v) = regs::masked_interrupt(&n.regs) {
        return event(
            Signature::IrqInIrq,
            format!(
                "{v}: the CPU delivered an interrupt with interrupts disabled, and the handler waits for what the code it interrupted holds ({}; nested TCG)",
                regs::describe(&n.regs)
            ),
        );
    }
    // Where its vCPUs were, taken before the NMI ([`crate::regs`]): one in
    // the project's code (RIP, or a return address at the top of its
    // stack) makes it the project's whatever else is seen; every vCPU
    // halted with interrupts on, nowhere near the project's code, makes it
    // the platform's: a halted CPU with interrupts on runs again at the
    // next interrupt (its timer's, at the latest), so the level below
    // delivered none for a minute. A vCPU halted in a lock wait shows the
    // wait on its stack.
    if !l1 {
        if let Some(v) = regs::host_state_in_guest(&n.regs) {
            return event(
                Signature::HostStateInGuest,
                format!(
                    "{v}: the guest's vCPU held L1's own register state, KVM's world switch, which the guest never runs; it did not run the guest's code ({}; nested TCG)",
                    regs::describe(&n.regs)
                ),
            );
        }
    }
    match regs::verdict(&n.regs, online_cpus(n)) {
        Verdict::InProject(_) => return None,
        Verdict::HaltedNoInterrupts => {
            return event(
                Signature::HaltedNoInterrupts,
                format!(
                    "every vCPU was halted with interrupts on, outside the project's code, and none woke: no interrupt was delivered ({}; nested TCG)",
                    regs::describe(&n.regs)
                ),
            )
        }
        Verdict::Unclear => {}
    }
    if p.injected > 0 && p.silent_after_last {
        let missing: Vec<String> = (0..online_cpus(n))
            .filter(|c| !p.answered.contains(c))
            .map(|c| c.to_string())
            .collect();
        if !p.answered.is_empty() && !missing.is_empty() {
            return if l1 {
                event(
                    Signature::L1Stall,
                    format!(
                        "vCPU(s) {} answered no NMI: not run by QEMU (nested TCG stall)",
                        missing.join(",")
                    ),
                )
            } else {
                event(
                    Signature::VcpuNotRun,
                    format!(
                        "vCPU(s) {} answered no NMI: not run by L1 (nested TCG)",
                        missing.join(",")
                    ),
                )
            };
        }
    }
    let code = if p.injected > 0 {
        p.at_last.project_code
    } else {
        n.state.project_code
    };
    if code {
        return None;
    }
    let probe = match (p.injected, p.answered.is_empty()) {
        (0, _) => "",
        (_, false) => ", every vCPU answered an NMI",
        (_, true) => ", no vCPU reported an NMI",
    };
    if l1 {
        event(
            Signature::L1Stall,
            format!("silent for {STALL_SECS} s with no host_kvm loaded{probe} (nested TCG stall)"),
        )
    } else {
        event(
            Signature::L2TimerStall,
            format!("silent for {STALL_SECS} s with no guest_pvlock loaded{probe} (nested TCG timer stall)"),
        )
    }
}

/// The platform events of an attempt, L1's first, then each L2's in the
/// scenario's order.
pub fn events(s: &Scenario, p: &Parsed, end: &RunEnd) -> Vec<Event> {
    let mut v = l1_events(p, end);
    let stalled = end.stalled.as_deref();
    for name in s.l2_instances() {
        let Some(n) = p.nodes.get(&name) else {
            continue;
        };
        v.extend(l2_events(p, &name, n, stalled == Some(name.as_str())));
    }
    v
}

/// L1's platform events: it went silent or did not finish
/// ([`l1_unfinished`]), one of its CPUs stuck in guest mode, an NMI's exit
/// lost beside its guest's crash.
fn l1_events(p: &Parsed, end: &RunEnd) -> Vec<Event> {
    let mut v = Vec::new();
    let Some(l1) = p.nodes.get("l1") else {
        return v;
    };
    if end.stalled.as_deref() == Some("l1") {
        v.extend(silent_kernel("l1", l1));
    }
    if !l1.done {
        v.extend(l1_unfinished(p, l1, end));
    }
    if let Some((since, cpu)) = l1_stuck_in_guest(l1) {
        v.push(Event {
            kernel: "l1".into(),
            signature: Signature::L1StuckInGuest,
            why: format!(
                "l1: CPU {cpu} answered no IPI for 5 s and its NMI found it in guest mode (nested TCG did not deliver the interrupt)"
            ),
            since,
            problems: true,
        });
    }
    if let Some(since) = lost_nmi_exit(p, l1) {
        v.push(Event {
            kernel: "l1".into(),
            signature: Signature::LostNmiExit,
            why: "l1: scheduled with an NMI's count left in its preempt count while its guest crashed in its exception entry (nested TCG lost the NMI's exit)".into(),
            since,
            problems: true,
        });
    }
    v
}

/// The events of an L1 that did not finish its plan: a crash only nested
/// TCG causes, RCU stalls before its init ran, a reset with no message.
fn l1_unfinished(p: &Parsed, l1: &Node, end: &RunEnd) -> Vec<Event> {
    let mut v = Vec::new();
    v.extend(crash_signature("l1", l1));
    // RCU stall reports from L1 before its init ran: no guest, no
    // host_kvm, nothing of the project had run in it (the KVM patches act
    // for guests only), so its vCPUs starved under TCG.
    if l1_starved_before_init(p, l1) {
        v.push(Event {
            kernel: "l1".into(),
            signature: Signature::StarvedRcuStall,
            why: "l1: RCU stall before its init ran, no project code (vCPU starvation, TCG)".into(),
            since: l1.problem_at.first().map_or(l1.last_seq, |p| p.0),
            problems: true,
        });
    }
    // QEMU ends with status 0 on a reset (-no-reboot): L1 reset itself
    // with no oops, panic or warning first, i.e. a triple fault that no
    // kernel code reported (oops=panic makes every kernel fault loud).
    if l1.booted && l1.problems.is_empty() && end.qemu_status == Some(0) {
        v.push(Event {
            kernel: "l1".into(),
            signature: Signature::L1Reset,
            why: "l1: QEMU exited cleanly in the middle of the plan with no kernel message (a reset; nested TCG)".into(),
            since: l1.last_seq,
            problems: false,
        });
    }
    v
}

/// The platform events of L2 `name` (`stalled`: the one the watchdog
/// stopped the run for): it went silent, a vCPU that L1 did not run, and,
/// if it did not finish, starvation, a crash only nested TCG causes, or an
/// end with no message ([`l2_vanished`]).
fn l2_events(p: &Parsed, name: &str, n: &Node, stalled: bool) -> Vec<Event> {
    let mut v = Vec::new();
    if stalled {
        v.extend(silent_kernel(name, n));
    }
    // A vCPU that L1 did not run makes problem reports that stay in the
    // log whether or not the guest got over it and finished.
    if vcpu_stopped_running(n) {
        v.push(Event {
            kernel: name.to_string(),
            signature: Signature::VcpuNotRun,
            why: format!(
                "{name}: RCU stall or IPI wait with a vCPU that answered no NMI for 10 s, or answered it {} s late outside the project's code or while L1 kept it off its CPUs, so L1 did not run it (nested TCG); {}; {}",
                crate::console::NMI_LATE_SECS,
                not_run_reports(n)[0].trim(),
                runq_note(n, &silent_cpus(n))
            ),
            since: n.problem_at.first().map(|p| p.0).unwrap_or(n.last_seq),
            problems: true,
        });
    }
    if n.done {
        return v;
    }
    // RCU stall reports (or a CPU waiting on an IPI that a starved vCPU
    // does not answer) from a guest that runs no project code: its vCPUs
    // starved under nested TCG (a guest still booting, say). With
    // guest_pvlock loaded they are never the platform's.
    if !n.problems.is_empty()
        && !state_at(n, 0).project_code
        && n.problems
            .iter()
            .all(|l| l.contains("rcu") || l.contains("csd: Detected non-responsive"))
    {
        v.push(Event {
            kernel: name.to_string(),
            signature: Signature::StarvedRcuStall,
            why: format!(
                "{name}: RCU stall with no guest_pvlock loaded (vCPU starvation, nested TCG)"
            ),
            since: n.problem_at.first().map_or(n.last_seq, |p| p.0),
            problems: true,
        });
    }
    v.extend(crash_signature(name, n));
    v.extend(l2_vanished(p, name, n));
    v
}

/// An unfinished L2 whose QEMU exited with no kernel message (a reset), or
/// that failed before its init ran.
fn l2_vanished(p: &Parsed, name: &str, n: &Node) -> Option<Event> {
    // (Not when QEMU said a signal ended it: L1 stopped it at its step's
    // bound, and QEMU exits with 0 then too.)
    if n.problems.is_empty() && n.exit_rc == Some(0) && n.killed.is_none() {
        // L1 traced the triple fault (shown for the record; with several
        // guests the trace does not say whose it was).
        let seen = p
            .nodes
            .get("l1")
            .and_then(|l1| l1.shutdown_exits.iter().find_map(|l| describe_shutdown(l)))
            .map(|d| format!("; KVM in L1: {d}"))
            .unwrap_or_default();
        Some(Event {
            kernel: name.to_string(),
            signature: Signature::L2Reset,
            why: format!(
                "{name}: QEMU exited cleanly in the middle of the plan with no kernel message (nested TCG){seen}"
            ),
            since: n.last_seq,
            problems: false,
        })
    } else if !n.booted && n.exit_rc.is_some() {
        // A guest that failed before its init ran none of the project's
        // code but the kernel's own patches, which would fail every
        // attempt alike: a failure that comes and goes there is the
        // platform's. A crash (oops, BUG) there is part of it; a panic
        // without one (no init, no root) is the configuration's. (A guest
        // that L1 did not see end was cut short by L1's end or the
        // harness's: no event of its own.)
        let crashed = n.problems.iter().any(|l| is_crash(l));
        Some(Event {
            kernel: name.to_string(),
            signature: Signature::BootFailure,
            why: format!("{name}: failed while booting, before any step (nested TCG)"),
            since: n.problem_at.first().map(|p| p.0).unwrap_or(n.last_seq),
            problems: crashed,
        })
    } else {
        None
    }
}

/// How long before L1's platform crash began an L2's problems count as
/// part of it (seconds of the run's time).
const L1_CRASH_REACH_SECS: f64 = 10.0;

/// Whether kernel `kernel` printed no frame of the project's code in the
/// report around console line `seq` (from 200 lines before to 200 after):
/// a guest CPU that spun in the project's code when L1 stopped running it
/// is not explained by L1.
fn no_project_frame_near(p: &Parsed, kernel: &str, seq: u64) -> bool {
    p.nodes.get(kernel).is_none_or(|n| {
        !n.project_frames
            .iter()
            .any(|&f| f + 200 >= seq && f <= seq + 200)
    })
}

/// Whether L2 `kernel`'s problems are one crash in its exception entry
/// (page faults recursing into the stack guard page) that came out of the
/// blue: its first problem line is that crash's, no NMI was injected into
/// it before, and it printed no frame of the project's code around it.
/// With L1's [`Signature::LostNmiExit`] beside it, that is one platform
/// event in both kernels: L1's NMI lost its exit path while its guest's
/// address space went wrong (L1 then showed the guest's fault address in
/// its own CR2). A guest that hung first (a lost wake-up, as in
/// broken-dropped-kick) reports a stall or gets the harness's NMI before
/// such a crash, and stays real.
fn entry_crash_out_of_the_blue(p: &Parsed, kernel: &str) -> bool {
    p.nodes.get(kernel).is_some_and(|n| {
        n.nmi.injected == 0
            && n.problems
                .first()
                .is_some_and(|l| l.contains("stack guard page was hit"))
            && n.problem_at
                .first()
                .is_some_and(|&(seq, _, _)| no_project_frame_near(p, kernel, seq))
    })
}

/// L1's problems are RCU stall reports from before its init ran (before
/// its boot mark, by kernel time), with no project frame near them.
fn l1_starved_before_init(p: &Parsed, l1: &Node) -> bool {
    !l1.problems.is_empty()
        && l1.problems.iter().all(|l| l.contains("rcu"))
        && l1.problem_at.iter().all(|&(seq, ts, state)| {
            !state.project_code
                && ts.is_some_and(|t| l1.boot_uptime.is_none_or(|b| t < b))
                && no_project_frame_near(p, "l1", seq)
        })
}

/// Whether failure `f` follows from one of `events`.
fn explained(f: &Failure, events: &[Event], p: &Parsed, end: &RunEnd) -> bool {
    let has = |k: &str| events.iter().any(|e| e.kernel == k);
    let l1 = has("l1");
    let any = !events.is_empty();
    // A kernel whose run the events cut short: its own event, L1's (which
    // runs every L2), or any, when the run was stopped.
    let cut = |k: &str| has(k) || l1 || (end.stopped() && any);
    // Data about a kernel: L1's data also comes from its guests.
    let data_cut = |k: Option<&str>| match k {
        None | Some("l1") => any,
        Some(k) => cut(k),
    };
    let kernel = f.kernel.as_deref().unwrap_or("");
    match &f.kind {
        Kind::RunTimeout | Kind::ConsoleSilent => l1,
        Kind::Stalled => has(kernel) || l1,
        Kind::NoOutput | Kind::NeverBooted | Kind::Unfinished => cut(kernel),
        // A step or error that ended before the event is not its doing.
        Kind::Step(seq) | Kind::Error(seq) => events
            .iter()
            .any(|e| (e.kernel == kernel || e.kernel == "l1") && seq.is_some_and(|q| q >= e.since)),
        // Problems are the event's own only if it is made of them, from
        // where it began: a problem in another kernel, or before the
        // event, is not. But an L2 runs on L1's vCPUs: when L1 crashed for
        // the platform, an L2's problems from the seconds before on are
        // the same event's (the guest's CPU 1 and L1's CPU 1, say,
        // crashing out of their idle loops a second apart).
        Kind::KernelProblem => p.nodes.get(kernel).is_some_and(|n| {
            n.problem_at.iter().all(|(seq, _, _)| {
                events.iter().any(|e| {
                    e.problems
                        && (e.kernel == kernel && *seq >= e.since
                            || e.kernel == "l1"
                                && kernel != "l1"
                                && l2_reach(e.signature).is_some_and(|(before, after)| {
                                    p.wall_of(e.since) - p.wall_of(*seq) <= before
                                        && p.wall_of(*seq) - p.wall_of(e.since) <= after
                                })
                                && (e.signature != Signature::L1StuckInGuest
                                    || no_project_frame_near(p, kernel, *seq))
                                && (e.signature != Signature::LostNmiExit
                                    || entry_crash_out_of_the_blue(p, kernel)))
                })
            })
        }),
        Kind::NoSummary | Kind::LocktortureFail | Kind::LostWakeup => false,
        Kind::Expect(parts) => parts.iter().all(|pt| {
            if pt.evidence {
                // A kernel's count of its own problem reports.
                pt.path.ends_with(".warnings")
                    && pt
                        .kernel
                        .as_deref()
                        .is_some_and(|k| events.iter().any(|e| e.kernel == k && e.problems))
            } else {
                data_cut(pt.kernel.as_deref())
            }
        }),
    }
}

/// The platform's part in an attempt that failed with `failures`.
pub fn judge_platform(s: &Scenario, p: &Parsed, failures: &[Failure], end: &RunEnd) -> Judgement {
    if failures.is_empty() {
        return Judgement::default();
    }
    let events = events(s, p, end);
    let unexplained = failures
        .iter()
        .filter(|f| !explained(f, &events, p, end))
        .map(|f| f.text.clone())
        .collect();
    Judgement {
        events,
        unexplained,
    }
}

/// What a `kvm_exit ... reason shutdown` trace line says in words: the
/// vCPU, where it was and what it was delivering when the fault that
/// could not be delivered (a triple fault) happened.
pub fn describe_shutdown(line: &str) -> Option<String> {
    static R: OnceLock<Regex> = OnceLock::new();
    let c = R
        .get_or_init(|| {
            Regex::new(
                r"vcpu (\d+) reason shutdown rip (0x[0-9a-f]+) .*intr_info (0x[0-9a-f]+) error_code (0x[0-9a-f]+)",
            )
            .expect("valid regex")
        })
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
    //! Most consoles below are real ones, cut down to what a rule reads;
    //! the runs they came from are listed in
    //! Documentation/pvlock/log/testing-2026-12.rst.

    use super::*;
    use crate::judge::{judge, reasons};
    use regex::Regex;

    /// One L1 that loads host_kvm and boots one L2, which loads
    /// guest_pvlock with one CPU online, brings the others online and runs
    /// locktorture (the shape of the pvlock scenarios).
    const PVLOCK: &str = r#"
description = "t"
[l1]
steps = [
  { run = "load", args = ["host_kvm", "force=1"] },
  { l2 = ["g"], timeout = 500 },
]
[[l2]]
group = "g"
cpus = 4
cmdline = "maxcpus=1"
steps = [
  { run = "load", args = ["guest_pvlock"] },
  { run = "online_cpus" },
  { run = "locktorture", args = ["spin_lock_irq", "8", "30"], timeout = 200 },
  { run = "info" },
]
"#;

    /// The same without any project code: upstream PV locks in L2 and a
    /// stock KVM in L1.
    const STOCK: &str = r#"
description = "t"
[l1]
steps = [{ l2 = ["g"], timeout = 500 }]
[[l2]]
group = "g"
cpus = 4
steps = [
  { run = "locktorture", args = ["spin_lock_irq", "8", "30"], timeout = 200 },
  { run = "info" },
]
"#;

    fn scenario(text: &str) -> Scenario {
        let mut s: Scenario = toml::from_str(text).unwrap();
        s.name = "t".into();
        s
    }

    fn feed(p: &mut Parsed, lines: &str) {
        for l in lines.lines().map(str::trim).filter(|l| !l.is_empty()) {
            p.line(l);
        }
    }

    /// L1 booted, loaded host_kvm and started the guest.
    const L1_START: &str = "
        @@PV L1.l1 boot uptime=1.36 nproc=2 kernel=7.3.4
        @@PV L1.l1 step-begin load1 load host_kvm force=1
        @@PV L1.l1 module host_kvm loaded params=[force=1]
        @@PV L1.l1 step-end load1 rc=0 secs=0.12
        @@PV L1.l1 step-begin l22 l2 490 g:1:4:768M:host,tsc-deadline=off,pmu=off
    ";

    /// The guest booted with one CPU, installed guest_pvlock, brought the
    /// other CPUs online and started locktorture.
    const G_LOCKTORTURE: &str = "
        [g-1] @@PV L2.g-1 boot uptime=4.72 nproc=1 kernel=7.3.4
        [g-1] @@PV L2.g-1 step-begin load1 load guest_pvlock
        [g-1] [    5.101234] guest_pvlock: KVM features 0x1000ffb: pv_unhalt=1 pvlock_kick=1 steal_time=1; lock ops: upstream-pv
        [g-1] [    5.102002] guest_pvlock: switching the lock ops to pvlock
        [g-1] [    5.131977] guest_pvlock: installed in 29 ms (was upstream-pv): mode kvm_hc_pvlock_wait, spin threshold 0; 0 waiters moved from the bridge
        [g-1] @@PV L2.g-1 module guest_pvlock loaded params=[]
        [g-1] @@PV L2.g-1 step-end load1 rc=0 secs=0.41
        [g-1] @@PV L2.g-1 step-begin online_cpus2 online_cpus
        [g-1] [    6.220412] smpboot: Booting Node 0 Processor 1 APIC 0x1
        [g-1] @@PV L2.g-1 cpus online=4 busy=0
        [g-1] @@PV L2.g-1 step-end online_cpus2 rc=0 secs=1.90
        [g-1] @@PV L2.g-1 step-begin locktorture3 locktorture spin_lock_irq 8 30
    ";

    /// A console up to there: L1 started the guest, which installed
    /// guest_pvlock and runs locktorture.
    fn in_locktorture() -> Parsed {
        let mut p = Parsed::default();
        feed(&mut p, L1_START);
        feed(&mut p, G_LOCKTORTURE);
        p
    }

    /// The rest of a guest's plan and L1's, once locktorture is over.
    const G_FINISH: &str = "
        [g-1] @@PV L2.g-1 lt [  141.20] Writes:  Total: 7527856  Max/Min: 1972719/1828955   Fail: 0
        [g-1] @@PV L2.g-1 lt [  141.21] spin_lock_irq-torture:--- End of test: SUCCESS: acq_writer_lim=0
        [g-1] @@PV L2.g-1 locktorture type=spin_lock_irq writers=8 secs=130.02
        [g-1] @@PV L2.g-1 step-end locktorture3 rc=0 secs=131.10
        [g-1] @@PV L2.g-1 step-begin info4 info
        [g-1] @@PV L2.g-1 info lock_ops: pvlock;mode: kvm_hc_pvlock_wait;
        [g-1] @@PV L2.g-1 step-end info4 rc=0 secs=0.10
        [g-1] @@PV L2.g-1 done rc=0 uptime=143.13
        [g-1] @@PV L1.l1 l2-exit g-1 rc=0
        @@PV L1.l1 step-end l22 rc=0 secs=150.62
        @@PV L1.l1 done rc=0 uptime=152.56
    ";

    /// Whether an attempt is the platform's, as `run` judges it.
    fn judged(s: &Scenario, p: &Parsed, end: &RunEnd) -> Judgement {
        let result = serde_json::json!({ "nodes": serde_json::to_value(&p.nodes).unwrap() });
        let failures = judge(s, p, &result, end);
        let j = judge_platform(s, p, &failures, end);
        assert!(!failures.is_empty(), "the attempt passed");
        // Every failure is accounted for: explained, or listed.
        assert!(j.unexplained.len() <= failures.len());
        j
    }

    fn stalled(name: &str) -> RunEnd {
        RunEnd {
            stalled: Some(name.into()),
            ..Default::default()
        }
    }

    fn signatures(j: &Judgement) -> Vec<&'static str> {
        assert!(j.platform(), "not the platform's: {:?}", j.unexplained);
        j.signatures()
    }

    #[test]
    fn a_silent_guest_that_an_nmi_revives_lost_a_wake_up() {
        // Every vCPU waited with interrupts off for a kick that never
        // came: no detector spoke, nothing for 60 s. L1's NMI ended the
        // waits, every CPU reported it and the guest ran on to the end.
        let s = scenario(PVLOCK);
        let mut p = in_locktorture();
        feed(
            &mut p,
            "
            @@PV L1.l1 nmi-injected g-1
            [g-1] [   71.884120] Uhhuh. NMI received for unknown reason 3c on CPU 0.
            [g-1] [   71.884122] Dazed and confused, but trying to continue
            [g-1] [   71.884130] Uhhuh. NMI received for unknown reason 00 on CPU 1.
            [g-1] [   71.884131] Dazed and confused, but trying to continue
            [g-1] [   71.884140] Uhhuh. NMI received for unknown reason 00 on CPU 2.
            [g-1] [   71.884141] Dazed and confused, but trying to continue
            [g-1] [   71.884150] Uhhuh. NMI received for unknown reason 00 on CPU 3.
            [g-1] [   71.884151] Dazed and confused, but trying to continue
        ",
        );
        let g = &p.nodes["g-1"];
        assert_eq!(
            g.nmi.answered.iter().copied().collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        assert!(g.nmi.silent_after_last && g.nmi.resumed.is_none());
        // Then its heartbeat, and the rest of the plan.
        p.heartbeat("g-1");
        feed(&mut p, G_FINISH);
        assert!(p.nodes["g-1"].nmi.resumed.is_some());
        let j = judged(&s, &p, &RunEnd::default());
        assert!(!j.platform());
        assert_eq!(j.unexplained.len(), 1);
        assert!(
            j.unexplained[0]
                .starts_with("g-1: silent until an NMI ended its waits: a lost wake-up"),
            "{}",
            j.unexplained[0]
        );
        // The broken-* scenarios' wanted failure (with the lost wake-up).
        let want = Regex::new(
            r"g-1: (kernel problem: .*(rcu: INFO|hard LOCKUP|soft lockup|hung)|stuck in the lock|silent until an NMI ended its waits: a lost wake-up)",
        )
        .unwrap();
        assert!(want.is_match(&j.unexplained[0]));
    }

    #[test]
    fn a_silent_guest_whose_vcpu_answers_no_nmi_was_not_run() {
        let s = scenario(PVLOCK);
        let silent = |answering: &[u32]| {
            let mut p = in_locktorture();
            p.line("@@PV L1.l1 nmi-injected g-1");
            for cpu in answering {
                let r = if *cpu == 0 { "3c" } else { "00" };
                p.line(&format!(
                    "[g-1] [   71.884{cpu}] Uhhuh. NMI received for unknown reason {r} on CPU {cpu}."
                ));
                p.line("[g-1] [   71.884] Dazed and confused, but trying to continue");
            }
            p
        };
        // vCPU 2 never answered: L1 did not run it, whatever the guest ran.
        let p = silent(&[0, 1, 3]);
        let j = judged(&s, &p, &stalled("g-1"));
        assert_eq!(signatures(&j), ["vcpu-not-run"]);
        assert!(j
            .why()
            .contains("g-1: vCPU(s) 2 answered no NMI: not run by L1"));
        // Every vCPU answered and it stayed silent, guest_pvlock loaded:
        // stuck, not the platform's.
        let p = silent(&[0, 1, 2, 3]);
        let j = judged(&s, &p, &stalled("g-1"));
        assert!(!j.platform() && j.events.is_empty());
        assert!(
            j.unexplained[0].contains(
                "CPU(s) 0,1,2,3 reported it, and the kernel stayed silent; guest_pvlock was loaded"
            ),
            "{:?}",
            j.unexplained
        );
        // None reported it: with every CPU's interrupts off the reports
        // are never printed, so that proves nothing either.
        let p = silent(&[]);
        assert!(!judged(&s, &p, &stalled("g-1")).platform());
    }

    #[test]
    fn a_silent_kernel_is_judged_by_where_its_vcpus_are() {
        let s = scenario(PVLOCK);
        let map = "ffffffff81000000 T _stext
            ffffffff81001330 T asm_sysvec_apic_timer_interrupt
            ffffffff81480b00 t default_idle
            ffffffff81490000 T rust_helper_pvlock_kvm_wait
            ffffffff814b0000 T do_idle
            ffffffff81f00000 T _etext";
        let map: String = map.lines().map(|l| format!("{}\n", l.trim())).collect();
        let idle = |cpu: u32, sample: u32| {
            format!("@@PV L1.l1 regs g-1 sample={sample} cpu={cpu} rip=ffffffff81480b26 rfl=00000246 hlt=1 cpl=0 stack=ffffffff81480b60")
        };
        let silent = |regs: &[String]| {
            let mut p = in_locktorture();
            p.symbols = Some(std::sync::Arc::new(crate::regs::Symbols::parse(&map)));
            p.line("[g-1] @@PV L2.g-1 modmap guest_pvlock 45056 0xffffffffa0000000;locktorture 20480 0xffffffffa0010000");
            for l in regs {
                p.line(l);
            }
            p.line("@@PV L1.l1 nmi-injected g-1");
            p
        };
        let all_idle: Vec<String> = (1..=2)
            .flat_map(|smp| (0..4).map(move |c| (c, smp)))
            .map(|(c, smp)| idle(c, smp))
            .collect();
        // Every vCPU halted in the idle loop with interrupts on, in both
        // samples: no interrupt came for a minute, whatever was loaded.
        let j = judged(&s, &silent(&all_idle), &stalled("g-1"));
        assert_eq!(signatures(&j), ["halted-no-interrupts"]);
        assert!(
            j.why()
                .contains("vCPU 3 at default_idle+0x26 (halted, IF=1)"),
            "{}",
            j.why()
        );
        // One vCPU in the lock wait: the project's, and the reason says
        // where it was.
        let mut waiting = all_idle.clone();
        waiting[6] = "@@PV L1.l1 regs g-1 sample=2 cpu=2 rip=ffffffff8149001c rfl=00000046 hlt=0 cpl=0 stack=ffffffffa0000200".into();
        let j = judged(&s, &silent(&waiting), &stalled("g-1"));
        assert!(!j.platform() && j.events.is_empty());
        assert!(
            j.unexplained[0].contains("vCPU 2 at rust_helper_pvlock_kvm_wait+0x1c (IF=0)"),
            "{:?}",
            j.unexplained
        );
        // Halted in HLT but called from guest_pvlock (a wait of the
        // KVM_HC_KICK_CPU mode): the project's.
        let mut hlt_wait = all_idle.clone();
        hlt_wait[1] = "@@PV L1.l1 regs g-1 sample=1 cpu=1 rip=ffffffff81480b26 rfl=00000246 hlt=1 cpl=0 stack=ffffffffa0000300".into();
        assert!(!judged(&s, &silent(&hlt_wait), &stalled("g-1")).platform());
        // The same wait, but nested in a timer interrupt whose frame says
        // the CPU delivered it with interrupts off (IF=0 saved), in both
        // samples: what it waits for, its own CPU holds; the platform's.
        // With IF=1 saved, an ordinary interrupt: still the project's.
        let nested = |fl: &str| {
            let mut v = waiting.clone();
            for (i, smp) in [(2, 1), (6, 2)] {
                v[i] = format!("@@PV L1.l1 regs g-1 sample={smp} cpu=2 rip=ffffffff8149001c rfl=00000046 hlt=0 cpl=0 stack=ffffffffa0000200 iframes=ffffffff8100134a:ffffffff814b0040:{fl}");
            }
            v
        };
        let judge_with = |lines: &[String]| judged(&s, &silent(lines), &stalled("g-1"));
        let j = judge_with(&nested("46"));
        assert_eq!(signatures(&j), ["irq-in-irq"]);
        assert!(
            j.why().contains(
                "entered at asm_sysvec_apic_timer_interrupt+0x1a from do_idle+0x40 with IF=0"
            ),
            "{}",
            j.why()
        );
        assert!(!judge_with(&nested("246")).platform());
        // A vCPU that spins outside the project with interrupts off: the
        // registers do not decide, and with guest_pvlock loaded it stays
        // a failure.
        let mut spinning = all_idle.clone();
        spinning[5] = "@@PV L1.l1 regs g-1 sample=2 cpu=1 rip=ffffffff81480b26 rfl=00000046 hlt=0 cpl=0 stack=".into();
        assert!(!judged(&s, &silent(&spinning), &stalled("g-1")).platform());
        // No samples: as before.
        let mut p = silent(&[]);
        p.line("@@PV L1.l1 regs-failed g-1 QMP closed the connection");
        let j = judged(&s, &p, &stalled("g-1"));
        assert!(!j.platform());
        assert!(
            j.unexplained[0].contains("no register samples (QMP closed the connection)"),
            "{:?}",
            j.unexplained
        );
    }

    #[test]
    fn a_silent_guest_without_project_code_is_the_platforms() {
        let s = scenario(STOCK);
        let console = |warning: &str| {
            let mut p = Parsed::default();
            feed(
                &mut p,
                "
                @@PV L1.l1 boot uptime=1.36 nproc=2 kernel=7.3.4
                @@PV L1.l1 step-begin l21 l2 490 g:1:4:768M:host,tsc-deadline=off,pmu=off
                [g-1] @@PV L2.g-1 boot uptime=4.72 nproc=4 kernel=7.3.4
                [g-1] @@PV L2.g-1 step-begin locktorture1 locktorture spin_lock_irq 8 30
            ",
            );
            feed(&mut p, warning);
            p
        };
        // L1 could not ask (no NMI), or every CPU answered: the timer.
        let mut p = console("");
        p.line("@@PV L1.l1 nmi-failed g-1 no python3 or socat on the host to talk to QMP");
        let j = judged(&s, &p, &stalled("g-1"));
        assert_eq!(signatures(&j), ["l2-timer-stall"]);
        let nmi = |p: &mut Parsed| {
            p.line("@@PV L1.l1 nmi-injected g-1");
            for cpu in 0..4 {
                p.line(&format!(
                    "[g-1] [   71.8841{cpu}] Uhhuh. NMI received for unknown reason 00 on CPU {cpu}."
                ));
            }
        };
        let mut p = console("");
        nmi(&mut p);
        let j = judged(&s, &p, &stalled("g-1"));
        assert_eq!(signatures(&j), ["l2-timer-stall"]);
        assert!(j.why().contains("every vCPU answered an NMI"));
        // A kernel problem before the silence is evidence of its own.
        let mut p =
            console("[g-1] [   40.1] WARNING: CPU: 1 PID: 0 at kernel/time/tick-sched.c:1:");
        nmi(&mut p);
        let j = judged(&s, &p, &stalled("g-1"));
        assert!(
            !j.platform() && j.unexplained.len() == 1,
            "{:?}",
            j.unexplained
        );
    }

    #[test]
    fn int3_during_a_switch_is_real_and_outside_one_the_platforms() {
        let s = scenario(PVLOCK);
        let oops = "
            [g-1] [    5.180001] Oops: int3: 0000 [#1] SMP
            [g-1] [    5.180150] CPU: 2 UID: 0 PID: 97 Comm: lock_torture_wr Not tainted 7.3.4 #1
            [g-1] [    5.180200] RIP: 0010:_raw_spin_unlock_irqrestore+0x5/0x30
            [g-1] [    5.180300] Code: 00 f3 0f 1e fa e8 <07> 04 00 00 0f ba e6 09
            [g-1] [    5.181000] Kernel panic - not syncing: Fatal exception in interrupt
            [g-1] @@PV L1.l1 l2-exit g-1 rc=0
            @@PV L1.l1 step-end l22 rc=0 secs=20.62
            @@PV L1.l1 done rc=0 uptime=22.56
        ";
        // During the switch: the project's text patching.
        let mut p = Parsed::default();
        feed(&mut p, L1_START);
        feed(
            &mut p,
            "
            [g-1] @@PV L2.g-1 boot uptime=4.72 nproc=1 kernel=7.3.4
            [g-1] @@PV L2.g-1 step-begin load1 load guest_pvlock
            [g-1] [    5.102002] guest_pvlock: switching the lock ops to pvlock
        ",
        );
        feed(&mut p, oops);
        assert!(p.nodes["g-1"].state.switching);
        let j = judged(&s, &p, &RunEnd::default());
        assert!(!j.platform() && j.events.is_empty(), "{:?}", j.events);
        // After it: a stale translation of patched code.
        let mut p = in_locktorture();
        feed(&mut p, oops);
        let j = judged(&s, &p, &RunEnd::default());
        assert_eq!(signatures(&j), ["stale-int3"]);
        // The trap byte still in memory is a real breakpoint.
        let mut p = in_locktorture();
        feed(&mut p, &oops.replace("fa e8 <07>", "fa cc <07>"));
        assert!(!judged(&s, &p, &RunEnd::default()).platform());
    }

    #[test]
    fn entry_fault_recursion_counts_only_without_project_code() {
        let recursion = "
            [g-1] [   13.010000] BUG: #DF stack guard page was hit at fffffe0000043ff8 (stack is fffffe0000044000..fffffe0000048fff)
            [g-1] [   13.100000] Oops: stack guard page: 0000 [#1] SMP
            [g-1] [   13.110000] RIP: 0010:error_entry+0x1a/0xc0
            [g-1] [   13.120000] Kernel panic - not syncing: Fatal exception in interrupt
            [g-1] @@PV L1.l1 l2-exit g-1 rc=0
            @@PV L1.l1 step-end l22 rc=0 secs=20.62
            @@PV L1.l1 done rc=0 uptime=22.56
        ";
        let s = scenario(PVLOCK);
        let mut p = Parsed::default();
        feed(&mut p, L1_START);
        feed(
            &mut p,
            "
            [g-1] @@PV L2.g-1 boot uptime=4.72 nproc=1 kernel=7.3.4
            [g-1] @@PV L2.g-1 step-begin load1 load guest_pvlock
            [g-1] @@PV L2.g-1 module guest_pvlock failed params=[] error=[insmod: can't insert: No such device]
            [g-1] @@PV L2.g-1 step-end load1 rc=1 secs=0.31
        ",
        );
        // A failed load leaves no project code, but is a failure itself.
        let mut q = p.clone();
        feed(&mut q, recursion);
        let j = judged(&s, &q, &RunEnd::default());
        assert_eq!(j.signatures(), ["entry-fault-recursion"]);
        assert_eq!(
            j.unexplained,
            ["g-1: step load1 (load) failed with status 1"]
        );
        // guest_pvlock loaded: the real hang of an L2 with HLT exits
        // disabled ended in exactly these lines.
        let mut p = in_locktorture();
        feed(&mut p, recursion);
        let j = judged(&s, &p, &RunEnd::default());
        assert!(!j.platform() && j.events.is_empty());
        // Without it: the platform's.
        let s = scenario(STOCK);
        let mut p = Parsed::default();
        feed(
            &mut p,
            "
            @@PV L1.l1 boot uptime=1.36 nproc=2 kernel=7.3.4
            @@PV L1.l1 step-begin l21 l2 490 g:1:4:768M:host
            [g-1] @@PV L2.g-1 boot uptime=4.72 nproc=4 kernel=7.3.4
            [g-1] @@PV L2.g-1 step-begin locktorture1 locktorture spin_lock_irq 8 30
        ",
        );
        feed(&mut p, &recursion.replace("l22", "l21"));
        let j = judged(&s, &p, &RunEnd::default());
        assert_eq!(signatures(&j), ["entry-fault-recursion"]);
        // A warning seconds earlier is not part of the crash.
        let mut q = Parsed::default();
        feed(
            &mut q,
            "
            @@PV L1.l1 boot uptime=1.36 nproc=2 kernel=7.3.4
            @@PV L1.l1 step-begin l21 l2 490 g:1:4:768M:host
            [g-1] @@PV L2.g-1 boot uptime=4.72 nproc=4 kernel=7.3.4
            [g-1] [    2.0] WARNING: CPU: 1 PID: 60 at kernel/smp.c:815 smp_call_function_many_cond+0x1c1/0x5c0
        ",
        );
        feed(&mut q, &recursion.replace("l22", "l21"));
        let j = judged(&s, &q, &RunEnd::default());
        assert!(!j.platform());
        assert!(j.unexplained[0].contains("WARNING"), "{:?}", j.unexplained);
    }

    #[test]
    fn a_late_nmi_answer_from_the_idle_loop_is_a_vcpu_not_run() {
        // CPU 2 (loading guest_pvlock) waits 5 s for an IPI to CPU 0,
        // halted in the idle loop, which answers the backtrace NMI 5.5 s
        // after it was sent.
        let s = scenario(PVLOCK);
        let report = |answered: &str, rip: &str| {
            let mut q = in_locktorture();
            feed(
                &mut q,
                &format!(
                    "
                [g-1] [   28.291997] smp: csd: Detected non-responsive CSD lock (#1) on CPU#2, waiting 5000000118 ns for CPU#00 do_sync_core+0x0/0x30(0x0).
                [g-1] [   28.293537] smp: \tcsd: CSD lock (#1) unresponsive.
                [g-1] [   28.293760] Sending NMI from CPU 2 to CPUs 0:
                [g-1] [   28.381564] torture_spin_lock_write_delay: delay = 0 jiffies.
                [g-1] [   {answered}] NMI backtrace for cpu 0
                [g-1] [   {answered}] CPU: 0 UID: 0 PID: 0 Comm: swapper/0 Tainted: G           O        7.3.4 #2 PREEMPTLAZY
                [g-1] [   {answered}] RIP: 0010:{rip}
                [g-1] [   {answered}] Call Trace:
                [g-1] [   {answered}]  <TASK>
                [g-1] [   {answered}]  ? default_idle+0x9/0x10
                [g-1] [   {answered}]  </TASK>
                [g-1] [   34.923111] smp: csd: Re-sending CSD lock (#1) IPI from CPU#02 to CPU#00
                [g-1] [   34.940855] smp: csd: CSD lock (#1) got unstuck on CPU#02, CPU#00 released the lock.
                [g-1] @@PV L2.g-1 lt [  141.20] Writes:  Total: 7527856  Max/Min: 1972719/1828955   Fail: 0
                [g-1] @@PV L2.g-1 lt [  141.21] spin_lock_irq-torture:--- End of test: SUCCESS: acq_writer_lim=0
                [g-1] @@PV L2.g-1 locktorture type=spin_lock_irq writers=8 secs=130.02
                [g-1] @@PV L2.g-1 step-end locktorture3 rc=0 secs=131.10
                [g-1] @@PV L2.g-1 done rc=0 uptime=140
                [g-1] @@PV L1.l1 l2-exit g-1 rc=0
                @@PV L1.l1 step-end l22 rc=0 secs=150.62
                @@PV L1.l1 done rc=0 uptime=152.56
            "
                ),
            );
            judged(&s, &q, &RunEnd::default())
        };
        let j = report("33.826574", "pv_native_safe_halt+0x16/0x20");
        assert_eq!(signatures(&j), ["vcpu-not-run"]);
        // With what L1's run-queue record says of that vCPU (none here).
        assert!(
            j.why()
                .contains("L1's run-queue record: vCPU 0 never waited on its run queue for 2 s in one stretch"),
            "{}",
            j.why()
        );
        // Answered at once: its stack decides, and it is a failure.
        assert!(!report("28.326574", "pv_native_safe_halt+0x16/0x20").platform());
        // Late, but in the project's lock wait: a failure.
        assert!(!report("33.826574", "rust_helper_pvlock_kvm_wait+0x10/0x20").platform());
    }

    #[test]
    fn a_late_nmi_answer_in_a_lock_wait_needs_l1s_run_queue_record() {
        // CPU 0 waits 5 s for an IPI to CPU 1, which sits in
        // guest_pvlock's lock wait with interrupts off (spin_lock_irq) and
        // answers the backtrace NMI 6.7 s after it was sent, in that
        // wait. Alone that is a failure
        // (the host half could have kept it halted); with L1's record of
        // a stretch on its run queue that covers the delay, L1 did not run
        // it.
        let s = scenario(PVLOCK);
        let report = |before: &str, after: &str| {
            let mut q = in_locktorture();
            feed(
                &mut q,
                &format!(
                    "
                {before}
                [g-1] [   19.937597] smp: csd: Detected non-responsive CSD lock (#1) on CPU#0, waiting 5000000049 ns for CPU#01 do_flush_tlb_all+0x0/0x10(0x0).
                [g-1] [   19.937800] smp: \tcsd: CSD lock (#1) unresponsive.
                [g-1] [   19.938000] Sending NMI from CPU 0 to CPUs 1:
                {after}
                [g-1] [   26.684900] NMI backtrace for cpu 1
                [g-1] [   26.684972] CPU: 1 UID: 0 PID: 153 Comm: lock_torture_wr Tainted: G           O        7.3.4 #2 PREEMPTLAZY
                [g-1] [   26.686536] RIP: 0010:rust_helper_pvlock_kvm_wait+0x1d/0x20
                [g-1] [   26.686600] Call Trace:
                [g-1] [   26.686700]  <TASK>
                [g-1] [   26.686800]  ? _raw_spin_lock_irqsave+0x29/0x40
                [g-1] [   26.686900]  </TASK>
                [g-1] [   26.731367] CPU: 0 UID: 0 PID: 9 Comm: kworker/0:1 Tainted: G           O        7.3.4 #2 PREEMPTLAZY
                [g-1] [   26.740000] smp: csd: CSD lock (#1) got unstuck on CPU#00, CPU#01 released the lock.
                [g-1] @@PV L2.g-1 lt [   29.874869] Writes:  Total: 1743543  Max/Min: 488103/69027 ???  Fail: 0
                [g-1] @@PV L2.g-1 lt [   29.875126] spin_lock_irq-torture:--- End of test: SUCCESS: acq_writer_lim=0
                [g-1] @@PV L2.g-1 locktorture type=spin_lock_irq writers=8 secs=17.54
                [g-1] @@PV L2.g-1 step-end locktorture3 rc=0 secs=23.10
                [g-1] @@PV L2.g-1 done rc=0 uptime=31
                [g-1] @@PV L1.l1 l2-exit g-1 rc=0
                @@PV L1.l1 step-end l22 rc=0 secs=40.62
                @@PV L1.l1 done rc=0 uptime=52.56
            "
                ),
            );
            judged(&s, &q, &RunEnd::default())
        };
        let runq = |cpu: u32, waited: f64| {
            format!("@@PV L1.l1 runq g-1 cpu={cpu} thread=1402 waited={waited:.2} within=1.01")
        };
        // A stretch of at least 6.9 - 1.01 s: all but 0.85 s of the 6.75 s.
        let j = report("", &runq(1, 6.9));
        assert_eq!(signatures(&j), ["vcpu-not-run"]);
        assert!(
            j.events[0]
                .why
                .contains("runq: waited 6.90 s within 1.01 s"),
            "{:?}",
            j.events
        );
        assert!(
            j.why()
                .contains("vCPU 1 waited on its run queue for at least 5.9 s in one stretch"),
            "{}",
            j.why()
        );
        // No record, a stretch too short for the delay, another vCPU's, or
        // one from before the request: a failure.
        assert!(!report("", "").platform());
        assert!(!report("", &runq(1, 6.5)).platform());
        assert!(!report("", &runq(2, 6.9)).platform());
        assert!(!report(&runq(1, 6.9), "").platform());
    }

    #[test]
    fn a_guest_that_l1_ended_at_its_bound_did_not_reset() {
        // A dropped kick: a writer waits for good with interrupts off, the
        // others steal the lock and go on, no detector speaks, and the
        // guest's own step timeout never fires; L1's `timeout` ends QEMU
        // (status 0) at the l2 step's bound.
        let s = scenario(PVLOCK);
        let mut p = in_locktorture();
        feed(
            &mut p,
            "
            [g-1] [  481.47] torture_spin_lock_write_delay: delay = 0 jiffies.
            [g-1] qemu-system-x86_64: terminating on signal 15 from pid 98 ()
            [g-1] @@PV L1.l1 l2-exit g-1 rc=0
            @@PV L1.l1 step-end l22 rc=0 secs=491.19
            @@PV L1.l1 done rc=0 uptime=494.01
        ",
        );
        let j = judged(&s, &p, &RunEnd::default());
        assert!(j.events.is_empty(), "{:?}", j.signatures());
        assert_eq!(
            j.unexplained,
            ["g-1: stopped before its plan finished: L1 ended its QEMU at the l2 step's bound, in step locktorture3"]
        );
    }

    #[test]
    fn a_platform_event_does_not_hide_a_locktorture_failure() {
        let s = scenario(PVLOCK);
        let mut p = in_locktorture();
        // locktorture counted lock failures, then the guest vanished.
        feed(
            &mut p,
            "
            [g-1] @@PV L2.g-1 lt [  141.20] Writes:  Total: 7527856  Max/Min: 1972719/1828955   Fail: 3
            [g-1] @@PV L2.g-1 lt [  141.21] spin_lock_irq-torture:--- End of test: FAILURE: acq_writer_lim=0
            [g-1] @@PV L2.g-1 locktorture type=spin_lock_irq writers=8 secs=130.02
            [g-1] @@PV L2.g-1 step-end locktorture3 rc=0 secs=131.10
            [g-1] @@PV L2.g-1 step-begin info4 info
            [g-1] @@PV L1.l1 l2-exit g-1 rc=0
            @@PV L1.l1 step-end l22 rc=0 secs=150.62
            @@PV L1.l1 done rc=0 uptime=152.56
        ",
        );
        let j = judged(&s, &p, &RunEnd::default());
        assert_eq!(j.signatures(), ["l2-reset"]);
        assert!(!j.platform());
        assert_eq!(
            j.unexplained,
            ["g-1: locktorture spin_lock_irq failed: Fail: 3, FAILURE"]
        );
        // The same with a check on it, and without the Fail count.
        let mut s = scenario(PVLOCK);
        s.expect = vec![toml::from_str(
            "name = \"no failures\"\npath = \"nodes.g-1.locktorture.*.fail\"\neq = 0",
        )
        .unwrap()];
        let mut q = in_locktorture();
        feed(
            &mut q,
            "
            [g-1] @@PV L2.g-1 locktorture type=spin_lock_irq writers=8 secs=130.02 total=99 max=60 min=39 fail=2 verdict=SUCCESS
            [g-1] @@PV L1.l1 l2-exit g-1 rc=0
            @@PV L1.l1 step-end l22 rc=0 secs=150.62
            @@PV L1.l1 done rc=0 uptime=152.56
        ",
        );
        let j = judged(&s, &q, &RunEnd::default());
        assert!(!j.platform());
        assert!(j
            .unexplained
            .iter()
            .any(|u| u.starts_with("expect 'no failures'")));
        // Data the reset cut short is its consequence.
        let mut s = scenario(PVLOCK);
        s.expect = vec![
            toml::from_str("name = \"kicks\"\npath = \"nodes.l1.hypercalls.g-1:lt.1886781441\"\ngt = 0").unwrap(),
            toml::from_str("name = \"waits\"\npath = \"nodes.g-1.stats.0.dirs.guest.counters.halts_head\"\ngt = 0").unwrap(),
        ];
        let mut r = in_locktorture();
        feed(
            &mut r,
            "
            [g-1] @@PV L1.l1 l2-exit g-1 rc=0
            @@PV L1.l1 step-end l22 rc=0 secs=150.62
            @@PV L1.l1 done rc=0 uptime=152.56
        ",
        );
        assert_eq!(
            signatures(&judged(&s, &r, &RunEnd::default())),
            ["l2-reset"]
        );
    }

    #[test]
    fn a_failed_load_is_a_failure_unless_it_may_fail() {
        let text = PVLOCK.replace(
            r#"{ run = "load", args = ["guest_pvlock"] },"#,
            r#"{ run = "load", args = ["guest_pvlock", "spin_threshold=99999999999"] },"#,
        );
        let refused = "
            [g-1] @@PV L2.g-1 boot uptime=4.72 nproc=1 kernel=7.3.4
            [g-1] @@PV L2.g-1 step-begin load1 load guest_pvlock spin_threshold=99999999999
            [g-1] @@PV L2.g-1 module guest_pvlock failed params=[spin_threshold=99999999999] error=[insmod: can't insert '/lib/modules/7.3.4/extra/guest_pvlock.ko': invalid parameter]
            [g-1] @@PV L2.g-1 step-end load1 rc=1 secs=0.31
            [g-1] @@PV L2.g-1 step-begin online_cpus2 online_cpus
            [g-1] @@PV L2.g-1 cpus online=4 busy=0
            [g-1] @@PV L2.g-1 step-end online_cpus2 rc=0 secs=1.90
            [g-1] @@PV L2.g-1 step-begin locktorture3 locktorture spin_lock_irq 8 30
        ";
        let mut p = Parsed::default();
        feed(&mut p, L1_START);
        feed(&mut p, refused);
        feed(&mut p, G_FINISH);
        let s = scenario(&text);
        let result = serde_json::json!({ "nodes": serde_json::to_value(&p.nodes).unwrap() });
        let f = judge(&s, &p, &result, &RunEnd::default());
        assert_eq!(reasons(&f), ["g-1: step load1 (load) failed with status 1"]);
        assert!(!judge_platform(&s, &p, &f, &RunEnd::default()).platform());
        let s = scenario(&text.replace(
            r#"spin_threshold=99999999999"] },"#,
            r#"spin_threshold=99999999999"], may_fail = true },"#,
        ));
        assert!(judge(&s, &p, &result, &RunEnd::default()).is_empty());
    }

    #[test]
    fn a_group_may_allow_kernel_problems_of_its_own_guests_only() {
        // The benchmark's native guest under overcommit: its lock stalls a
        // CPU long enough for the soft lockup detector, which is its
        // result. Allowed for the group, it fails nothing; L1's problems
        // and other groups' still fail the run.
        let lockup = "
            [g-1] [  163.542506] watchdog: BUG: soft lockup - CPU#5 stuck for 32s! [hackbench:216]
        ";
        let mut p = in_locktorture();
        feed(&mut p, lockup);
        feed(&mut p, G_FINISH);
        let strict = scenario(PVLOCK);
        assert!(!strict.allows_problems_of("g-1"));
        assert_eq!(
            reasons_of(&strict, &p),
            ["g-1: kernel problem: [  163.542506] watchdog: BUG: soft lockup - CPU#5 stuck for 32s! [hackbench:216]"]
        );
        let text = PVLOCK.replace(
            "group = \"g\"\n",
            "group = \"g\"\nallow_kernel_problems = true\n",
        );
        assert_ne!(text, PVLOCK);
        let allowing = scenario(&text);
        assert!(allowing.allows_problems_of("g-1"));
        assert!(!allowing.allows_problems_of("l1"));
        assert!(reasons_of(&allowing, &p).is_empty());
        feed(
            &mut p,
            "[  170.000001] WARNING: CPU: 1 PID: 99 at arch/x86/kvm/x86.c:1 x+0x1/0x2",
        );
        let r = reasons_of(&allowing, &p);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0].starts_with("l1: kernel problem:"), "{r:?}");
    }

    #[test]
    fn a_step_error_before_the_event_is_evidence() {
        let s = scenario(PVLOCK);
        let mut p = Parsed::default();
        feed(&mut p, L1_START);
        feed(
            &mut p,
            "
            [g-1] @@PV L2.g-1 boot uptime=4.72 nproc=1 kernel=7.3.4
            [g-1] @@PV L2.g-1 step-begin load1 load guest_pvlock
            [g-1] @@PV L2.g-1 module guest_pvlock loaded params=[]
            [g-1] @@PV L2.g-1 step-end load1 rc=0 secs=0.41
            [g-1] @@PV L2.g-1 step-begin online_cpus2 online_cpus
            [g-1] @@PV L2.g-1 error cpu 3 did not come online
            [g-1] @@PV L2.g-1 cpus online=3 busy=100
            [g-1] @@PV L2.g-1 step-end online_cpus2 rc=0 secs=11.90
            [g-1] @@PV L2.g-1 step-begin locktorture3 locktorture spin_lock_irq 8 30
            [g-1] @@PV L1.l1 l2-exit g-1 rc=0
            @@PV L1.l1 step-end l22 rc=0 secs=150.62
            @@PV L1.l1 done rc=0 uptime=152.56
        ",
        );
        let j = judged(&s, &p, &RunEnd::default());
        assert_eq!(j.signatures(), ["l2-reset"]);
        assert_eq!(j.unexplained, ["g-1: cpu 3 did not come online"]);
    }

    #[test]
    fn a_problem_in_another_kernel_is_evidence() {
        let s = scenario(PVLOCK);
        let mut p = in_locktorture();
        feed(
            &mut p,
            "
            [   80.1] WARNING: CPU: 0 PID: 211 at arch/x86/kvm/x86.c:10432 kvm_pvlock_kick+0x2c/0xc0
            [g-1] @@PV L1.l1 l2-exit g-1 rc=0
            @@PV L1.l1 step-end l22 rc=0 secs=150.62
            @@PV L1.l1 done rc=0 uptime=152.56
        ",
        );
        let j = judged(&s, &p, &RunEnd::default());
        assert_eq!(j.signatures(), ["l2-reset"]);
        assert!(!j.platform());
        assert!(
            j.unexplained[0].starts_with("l1: kernel problem:")
                && j.unexplained[0].contains("WARNING"),
            "{:?}",
            j.unexplained
        );
    }

    #[test]
    fn a_silent_l1_is_asked_by_nmi() {
        let s = scenario(PVLOCK);
        let base = |host_kvm: bool| {
            let mut p = Parsed::default();
            p.line("@@PV L1.l1 boot uptime=1.36 nproc=2 kernel=7.3.4");
            if host_kvm {
                p.line("@@PV L1.l1 step-begin load1 load host_kvm force=1");
                p.line("@@PV L1.l1 module host_kvm loaded params=[force=1]");
            }
            // A guest still booting is cut short, with no event of its own.
            p.line("@@PV L1.l1 step-begin l22 l2 490 g:1:4:768M:host");
            p.line("[g-1] SeaBIOS (version 1.16.3-debian-1.16.3-2)");
            p.line("@@PV L0.vmtest nmi-injected l1");
            p
        };
        // vCPU 1 answered no NMI: QEMU did not run it.
        let mut p = base(true);
        p.line("[  120.5] Uhhuh. NMI received for unknown reason 3c on CPU 0.");
        let j = judged(&s, &p, &stalled("l1"));
        assert_eq!(signatures(&j), ["l1-stall"]);
        assert!(j
            .why()
            .contains("vCPU(s) 1 answered no NMI: not run by QEMU"));
        // Both answered, host_kvm loaded: a deadlock of the host's.
        p.line("[  120.5] Uhhuh. NMI received for unknown reason 00 on CPU 1.");
        assert!(!judged(&s, &p, &stalled("l1")).platform());
        // Both answered, before host_kvm: the platform's.
        let mut q = base(false);
        q.line("[  120.5] Uhhuh. NMI received for unknown reason 3c on CPU 0.");
        q.line("[  120.5] Uhhuh. NMI received for unknown reason 00 on CPU 1.");
        assert_eq!(signatures(&judged(&s, &q, &stalled("l1"))), ["l1-stall"]);
        // A stall report after the NMI is no sign that it ran on (a stuck
        // kernel prints those), though it is a problem of its own.
        let mut r = q.clone();
        r.line("[  121.0] rcu: INFO: rcu_sched self-detected stall on CPU");
        assert!(r.nodes["l1"].nmi.resumed.is_none());
        // It ran on after the NMI: a lost wake-up.
        q.line("[  121.0] 9pnet: Installing 9P2000 support");
        let j = judged(&s, &q, &stalled("l1"));
        assert!(!j.platform());
        assert!(j
            .unexplained
            .iter()
            .any(|u| u.contains("l1: silent until an NMI")));
    }

    #[test]
    fn vanished_guest_is_a_platform_failure() {
        let s = scenario(STOCK);
        let mut p = Parsed::default();
        feed(
            &mut p,
            "
            @@PV L1.l1 boot uptime=1.36 nproc=2 kernel=7.3.4
            @@PV L1.l1 step-begin l21 l2 490 g:1:4:768M:host
            [g-1] @@PV L2.g-1 boot uptime=2 nproc=4 kernel=7.3.4
            [g-1] @@PV L1.l1 l2-exit g-1 rc=0
            @@PV L1.l1 l2-shutdown-exit  qemu-system-x86-84 [000] d..1. 18.49: kvm_exit: vcpu 0 reason shutdown rip 0xffffffff81164560 info1 0x0 info2 0x0 intr_info 0x80000b0e error_code 0x00000010 requests 0x0
            @@PV L1.l1 step-end l21 rc=0 secs=20.62
            @@PV L1.l1 done rc=0 uptime=22.56
        ",
        );
        let j = judged(&s, &p, &RunEnd::default());
        assert_eq!(signatures(&j), ["l2-reset"]);
        // L1's trace of the triple fault is carried along.
        assert!(j.why().ends_with(
            "KVM in L1: triple fault on vCPU 0 at rip 0xffffffff81164560, delivering exception 14, error code 0x10"
        ));
        // A panic is never the platform's.
        p.line("[g-1] [ 3.0] Kernel panic - not syncing: oops");
        assert!(!judged(&s, &p, &RunEnd::default()).platform());
    }

    #[test]
    fn a_count_never_reported_after_a_reset_is_no_evidence() {
        // The guest reset after locktorture passed, before its warnings
        // step: `warnings` is null, which the reset explains; a count the
        // guest did report (1 warning) is evidence of its own.
        let s = scenario(&format!(
            "{STOCK}\n[[expect]]\nname = \"no warnings\"\npath = \"nodes.g-1.warnings\"\neq = 0\n"
        ));
        let mut p = in_locktorture();
        feed(
            &mut p,
            "
            [g-1] @@PV L2.g-1 lt [  141.20] Writes:  Total: 7527856  Max/Min: 1972719/1828955   Fail: 0
            [g-1] @@PV L2.g-1 lt [  141.21] spin_lock_irq-torture:--- End of test: SUCCESS: acq_writer_lim=0
            [g-1] @@PV L2.g-1 locktorture type=spin_lock_irq writers=8 secs=130.02
            [g-1] @@PV L1.l1 l2-exit g-1 rc=0
            @@PV L1.l1 step-end l22 rc=0 secs=150.62
            @@PV L1.l1 done rc=0 uptime=152.56
        ",
        );
        let j = judged(&s, &p, &RunEnd::default());
        assert_eq!(signatures(&j), ["l2-reset"]);
    }

    #[test]
    fn boot_failures() {
        let s = scenario(STOCK);
        let start = "
            @@PV L1.l1 boot uptime=1.36 nproc=2 kernel=7.3.4
            @@PV L1.l1 step-begin l21 l2 490 g:1:4:768M:host
        ";
        let end = "
            [g-1] @@PV L1.l1 l2-exit g-1 rc=0
            @@PV L1.l1 step-end l21 rc=0 secs=20.62
            @@PV L1.l1 done rc=0 uptime=22.56
        ";
        // A page fault while booting: the platform's.
        let mut p = Parsed::default();
        feed(&mut p, start);
        feed(
            &mut p,
            "
            [g-1] [    0.912000] BUG: unable to handle page fault for address: ffffffffff5fd0f0
            [g-1] [    0.912100] Oops: Oops: 0000 [#1] SMP
            [g-1] [    0.913000] Kernel panic - not syncing: Attempted to kill the idle task!
        ",
        );
        feed(&mut p, end);
        assert_eq!(
            signatures(&judged(&s, &p, &RunEnd::default())),
            ["boot-failure"]
        );
        // A panic without a crash is the configuration's (broken-panic).
        let mut q = Parsed::default();
        feed(&mut q, start);
        feed(
            &mut q,
            "[g-1] [    1.101000] Kernel panic - not syncing: No working init found.  Try passing init= option to kernel.",
        );
        feed(&mut q, end);
        let j = judged(&s, &q, &RunEnd::default());
        assert!(!j.platform());
        let want =
            Regex::new(r"g-1: (never reached its init|no output).*(panic|Kernel panic)").unwrap();
        assert!(reasons_of(&s, &q).iter().any(|r| want.is_match(r)));
    }

    fn reasons_of(s: &Scenario, p: &Parsed) -> Vec<String> {
        let result = serde_json::json!({ "nodes": serde_json::to_value(&p.nodes).unwrap() });
        reasons(&judge(s, p, &result, &RunEnd::default()))
    }

    #[test]
    fn a_zeroed_register_state_is_the_platforms() {
        let s = scenario(STOCK);
        let mut p = Parsed::default();
        feed(
            &mut p,
            "
            @@PV L1.l1 boot uptime=1.36 nproc=2 kernel=7.3.4
            @@PV L1.l1 step-begin l21 l2 490 g:1:4:768M:host
            [g-1] @@PV L2.g-1 boot uptime=2 nproc=4 kernel=7.3.4
        ",
        );
        p.line("[g-1] [ 9.19] BUG: kernel NULL pointer dereference, address: 000000000000002c");
        p.line("[g-1] [ 9.19] RIP: 0000:0x0");
        feed(
            &mut p,
            "
            [g-1] [ 9.20] Kernel panic - not syncing: Fatal exception
            [g-1] @@PV L1.l1 l2-exit g-1 rc=0
            @@PV L1.l1 step-end l21 rc=0 secs=20.62
            @@PV L1.l1 done rc=0 uptime=22.56
        ",
        );
        assert_eq!(
            signatures(&judged(&s, &p, &RunEnd::default())),
            ["zeroed-registers"]
        );
    }

    #[test]
    fn an_idle_jump_to_zero_without_project_frames_is_the_platforms() {
        let s = scenario(STOCK);
        // A jump to 0 from idle, in L1 before host_kvm.
        let mut z = Parsed::default();
        z.line("@@PV L1.l1 boot uptime=1 nproc=2 kernel=7.3.4");
        z.line("[   31.0] BUG: kernel NULL pointer dereference, address: 0000000000000000");
        z.line("[   31.0] RIP: 0010:0x0");
        z.line("[   31.0]  ? do_idle+0x14a/0x180");
        let j = judged(&s, &z, &RunEnd::default());
        assert_eq!(j.signatures(), ["idle-jump-to-zero"]);
        // (L1 stopping cut g-1 short: it never started.)
        assert!(j.platform(), "{:?}", j.unexplained);
        // A frame of the project's code in the report: not the platform's.
        z.line("[   31.0]  ? guest_pvlock_unlock+0x1d/0x40");
        assert!(!judged(&s, &z, &RunEnd::default()).platform());
    }

    #[test]
    fn l1s_entry_fault_recursion_is_the_platforms_with_host_kvm_too() {
        let s = scenario(STOCK);
        let mut l = Parsed::default();
        l.line("@@PV L1.l1 boot uptime=1 nproc=2 kernel=7.3.4");
        l.line("[   29.24] BUG: TASK stack guard page was hit at ffa000000012fff8");
        // A stack overflow elsewhere is the code's.
        l.line("[   29.25] RIP: 0010:kvm_pvlock_kick+0x2c/0xc0");
        assert!(!judged(&s, &l, &RunEnd::default()).platform());
        l.line("[   29.25] RIP: 0010:exc_page_fault+0x2c/0xc0");
        assert_eq!(
            signatures(&judged(&s, &l, &RunEnd::default())),
            ["entry-fault-recursion"]
        );
        // In L1 also with host_kvm loaded.
        let mut h = Parsed::default();
        h.line("@@PV L1.l1 boot uptime=1 nproc=2 kernel=7.3.4");
        h.line("@@PV L1.l1 step-begin load1 load host_kvm force=1");
        h.line("[    5.2] host_kvm: registered");
        h.line("@@PV L1.l1 module host_kvm loaded params=[force=1]");
        h.line("[   29.24] BUG: TASK stack guard page was hit at ffa000000012fff8");
        h.line("[   29.25] RIP: 0010:error_entry+0x2c/0xc0");
        let j = judged(&s, &h, &RunEnd::default());
        assert_eq!(signatures(&j), ["entry-fault-recursion"]);
        assert!(j.why().contains("with host_kvm loaded"));
    }

    #[test]
    fn an_l2_crash_just_before_l1s_platform_crash_is_part_of_it() {
        // Both levels crash out of their idle loops a second apart, with
        // guest_pvlock in the guest and host_kvm in L1: L1's crash is the
        // platform's, and so is the guest's just before it; the same guest
        // crash a minute before is not.
        let s = scenario(STOCK);
        let both = |l2_at: f64| {
            let mut p = in_locktorture();
            p.wall = l2_at;
            feed(
                &mut p,
                "
                [g-1] [    9.041789] Oops: Oops: 0000 [#1] SMP
                [g-1] [    9.078775] CPU: 1 UID: 0 PID: 0 Comm: swapper/1 Tainted: G           O        7.3.4 #1 PREEMPTLAZY
                [g-1] [    9.228271] RIP: 0010:irqentry_enter+0x1f/0x30
                [g-1] [   10.277497]  ? __schedule+0x6ec/0x910
                [g-1] [   10.309903]  ? ct_kernel_exit+0x55/0x80
                ",
            );
            p.wall = 31.0;
            feed(
                &mut p,
                "
                [   17.182020] BUG: kernel NULL pointer dereference, address: 0000000000000000
                [   17.183154] #PF: supervisor instruction fetch in kernel mode
                [   17.185575] CPU: 1 UID: 0 PID: 0 Comm: swapper/1 Tainted: G           O        7.3.4 #1 PREEMPTLAZY
                [   17.186263] RIP: 0010:0x0
                [   17.191566]  ? pv_native_safe_halt+0x16/0x20
                [   17.192757]  ? do_idle+0x14a/0x180
                [   17.193721] Modules linked in: host_kvm(O)
                [   17.195802] Kernel panic - not syncing: Fatal exception
                ",
            );
            p
        };
        let j = judged(&s, &both(30.0), &RunEnd::default());
        assert_eq!(signatures(&j), ["idle-jump-to-zero"]);
        assert!(j
            .why()
            .contains("l1: a jump to 0 out of the idle loop with host_kvm loaded"));
        let j = judged(&s, &both(-30.0), &RunEnd::default());
        assert!(!j.platform());
        assert!(
            j.unexplained
                .iter()
                .any(|u| u.starts_with("g-1: kernel problem: [    9.041789] Oops")),
            "{:?}",
            j.unexplained
        );
    }

    #[test]
    fn a_null_current_in_the_interrupt_entry_is_a_lost_gs_base() {
        // The interrupt entry read current as NULL right after the
        // unlock's KVM_HC_KICK_CPU returned: the platform's, guest_pvlock
        // loaded or not; the same oops elsewhere is not.
        let s = scenario(STOCK);
        let gs = |rip: &str| {
            let mut p = in_locktorture();
            feed(
                &mut p,
                &format!(
                    "
                [g-1] [   11.087814] BUG: kernel NULL pointer dereference, address: 000000000000002c
                [g-1] [   11.227893] Oops: Oops: 0000 [#1] SMP
                [g-1] [   11.248848] CPU: 1 UID: 0 PID: 139 Comm: lock_torture_wr Tainted: G           O        7.3.4 #2 PREEMPTLAZY
                [g-1] [   11.323594] RIP: 0010:{rip}
                [g-1] [   11.361518] Code: ff cc cc cc cc cc cc cc cc cc cc 0f 1f 40 d6 65 48 8b 04 25 08 00 c2 81 f6 87 88 00 00 00 03 74 09 c6 80 52 09 00 00 01 eb 06 <f6> 40 2c 02 75 03 31 c0 c3
                [g-1] [   11.487261] RSP: 0018:ffa0000000247d18 EFLAGS: 00010046
                [g-1] [   11.536600] RAX: 0000000000000000 RBX: ffa0000000247d48 RCX: ffffffff81001519
                [g-1] [   11.890797] CR2: 000000000000002c CR3: 0000000001a3d000 CR4: 00000000007516b0
                [g-1] [   11.943734] Call Trace:
                [g-1] [   11.995410]  ? _RNvXCsjnTaV2mjA7B_17guest_pvlock_mainNtB2_6PvlockNtNtNtCs1EKtwoKEMO2_6kernel6pvlock7lockops10QueuedLock8slowpath+0xd08/0xe39 [guest_pvlock]
                [g-1] [   12.082081]  ? _RNvNtNtCs1EKtwoKEMO2_6kernel6pvlock5guest8kick_cpu+0x15/0x22
                [g-1] [   12.769307] Kernel panic - not syncing: Fatal exception
                [g-1] @@PV L1.l1 l2-exit g-1 rc=0
                @@PV L1.l1 step-end l22 rc=0 secs=19.74
                @@PV L1.l1 done rc=0 uptime=21.34
                "
                ),
            );
            p
        };
        let j = judged(&s, &gs("irqentry_enter+0x1f/0x30"), &RunEnd::default());
        assert_eq!(signatures(&j), ["lost-gs-base"]);
        assert!(!judged(&s, &gs("guest_pvlock_unlock+0x1d/0x20"), &RunEnd::default()).platform());
    }

    #[test]
    fn an_entry_stack_overflow_is_an_interrupt_before_swapgs() {
        // An upstream-pv guest with no project code, L1's QEMU flushing
        // its translated code often (tests/platform/
        // upstream-stressng-tbflush.toml, 2026-12-05): a timer interrupt
        // nested in the entry of one from user mode, before its swapgs,
        // and general protection faults recurring in irqentry_enter's
        // read of current through the user's GS base until the entry
        // stack's guard page; the two sightings of 2026-12-04 with
        // guest_pvlock had the same shape. The platform's, whatever is
        // loaded. The same recursion on another stack, or with its RIP in
        // the project's code, is not this.
        let crash = |stack: &str, rip: &str| {
            let mut p = in_locktorture();
            feed(
                &mut p,
                &format!(
                    "
                [g-1] [   18.942250] BUG: {stack} stack guard page was hit at fffffe0000001ff8 (stack is fffffe0000002000..fffffe0000003000)
                [g-1] [   18.963171] Oops: stack guard page: 0000 [#1] SMP
                [g-1] [   19.045459] CPU: 0 UID: 0 PID: 154 Comm: stress-ng-sigq Tainted: G           O        7.3.4 #31 PREEMPTLAZY
                [g-1] [   19.090614] RIP: 0010:{rip}
                [g-1] [   19.162451] RSP: 0000:fffffe0000002000 EFLAGS: 00000046
                [g-1] [   19.228016] RAX: cccccccccccccccc RBX: fffffe0000002168 RCX: ffffffff81001519
                [g-1] [   19.365535] FS:  00007fe768750d00(0000) GS:ff110000ac1f5000(0000) knlGS:ff110000ac1f5000
                [g-1] [   19.452979] Call Trace:
                [g-1] [   19.464128]  <ENTRY_TRAMPOLINE>
                [g-1] [   19.494193]  ? irqentry_enter+0x1f/0x30
                [g-1] [   19.504715]  ? exc_general_protection+0x27/0x150
                [g-1] [   19.540199]  ? asm_exc_general_protection+0x26/0x30
                [g-1] [   20.270204]  ? sysvec_apic_timer_interrupt+0xe/0x80
                [g-1] [   20.279242]  ? asm_sysvec_apic_timer_interrupt+0x1a/0x20
                [g-1] [   20.310451]  </ENTRY_TRAMPOLINE>
                [g-1] [   20.340343] Kernel panic - not syncing: Fatal exception in interrupt
                [g-1] @@PV L1.l1 l2-exit g-1 rc=0
                @@PV L1.l1 step-end l22 rc=0 secs=26.62
                @@PV L1.l1 done rc=0 uptime=26.57
                "
                ),
            );
            p
        };
        let s = scenario(PVLOCK);
        for rip in ["error_entry+0x1e/0xc0", "irqentry_enter+0x1f/0x30"] {
            let j = judged(&s, &crash("ENTRY_TRAMPOLINE", rip), &RunEnd::default());
            assert_eq!(signatures(&j), ["irq-before-swapgs"], "{rip}");
            assert!(j.platform());
        }
        // The task stack with guest_pvlock loaded: a real recursion looks
        // like this (entry-fault-recursion counts it only without it).
        let j = judged(
            &s,
            &crash("TASK", "error_entry+0x1e/0xc0"),
            &RunEnd::default(),
        );
        assert!(!j.platform());
        let j = judged(
            &s,
            &crash("ENTRY_TRAMPOLINE", "guest_pvlock_unlock+0x1d/0x20"),
            &RunEnd::default(),
        );
        assert!(!j.platform());
    }

    #[test]
    fn l1_resetting_with_no_kernel_message_is_the_platforms() {
        let s = scenario(STOCK);
        let mut r = Parsed::default();
        r.line("@@PV L1.l1 boot uptime=1 nproc=2 kernel=7.3.4");
        let reset = RunEnd {
            qemu_status: Some(0),
            ..Default::default()
        };
        assert_eq!(signatures(&judged(&s, &r, &reset)), ["l1-reset"]);
        // After a panic it is not.
        r.line("[  9.1] Kernel panic - not syncing: Fatal exception");
        assert!(!judged(&s, &r, &reset).platform());
    }

    #[test]
    fn rcu_stalls() {
        let s = scenario(PVLOCK);
        // With guest_pvlock loaded, a stall is the platform's only when a
        // vCPU answered no NMI (a vCPU that did not run), and not with an
        // oops or warning besides.
        let mut q = in_locktorture();
        q.line("[g-1] [   20.42] smp: csd: Detected non-responsive CSD lock (#1) on CPU#1, waiting 5000054102 ns for CPU#02 flush_tlb_func+0x0/0x210(0xffa000000019bb00).");
        q.line("[g-1] [   36.42] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:");
        q.line("[g-1] [   36.44] rcu: \t2-...!: (668 ticks this GP) idle=788c/1/0x4000000000000000 softirq=408/410 fqs=27");
        assert!(!judged(&s, &q, &stalled("g-1")).platform());
        q.line(
            "[g-1] [   38.69] After 10 seconds, these CPUS still haven't responded to the NMI: 2",
        );
        q.line("[g-1] [   38.70] Call Trace:");
        let j = judged(&s, &q, &stalled("g-1"));
        assert_eq!(j.signatures(), ["vcpu-not-run"]);
        assert!(j.platform(), "{:?}", j.unexplained);
        q.line("[g-1] [   39.00] WARNING: CPU: 1 PID: 60 at kernel/smp.c:815");
        assert!(!judged(&s, &q, &stalled("g-1")).platform());
        // A stall before guest_pvlock was loaded is the platform's.
        let mut b = Parsed::default();
        feed(&mut b, L1_START);
        b.line("[g-1] @@PV L2.g-1 boot uptime=6 nproc=1 kernel=7.3.4");
        b.line("[g-1] [ 27.2] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:");
        // (Silent since, with no project code: its timer stalled too.)
        assert_eq!(
            signatures(&judged(&s, &b, &stalled("g-1"))),
            ["l2-timer-stall", "starved-rcu-stall"]
        );
    }

    #[test]
    fn an_l1_rcu_stall_before_init_is_the_platforms() {
        let s = scenario(PVLOCK);
        let stall = "
            [   21.90] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:
            [   21.91] rcu: \t1-...!: (0 ticks this GP) idle=1f4c/1/0x4000000000000000 softirq=35/35 fqs=0
        ";
        let mut q = Parsed::default();
        feed(&mut q, stall);
        let j = judged(&s, &q, &RunEnd::default());
        assert_eq!(signatures(&j), ["starved-rcu-stall"]);
        // The same report after init ran (host_kvm loaded, a guest
        // started) is not.
        let mut q = Parsed::default();
        feed(&mut q, L1_START);
        feed(&mut q, stall.replace("21.9", "41.9").as_str());
        assert!(!judged(&s, &q, &RunEnd::default()).platform());
        // Nor one with anything but the RCU report.
        let mut q = Parsed::default();
        feed(&mut q, stall);
        q.line(
            "[   22.50] WARNING: CPU: 0 PID: 1 at arch/x86/kvm/x86.c:100 kvm_arch_init+0x10/0x20",
        );
        assert!(!judged(&s, &q, &RunEnd::default()).platform());
    }

    #[test]
    fn a_cpu_stuck_in_a_lock_wait_is_a_real_failure() {
        // A dropped kick left CPU 1 in its lock wait with interrupts off;
        // CSD lock debugging names it and its NMI backtrace shows the
        // wait. Every vCPU answered.
        let s = scenario(PVLOCK);
        let mut q = in_locktorture();
        feed(
            &mut q,
            "
            [g-1] [   34.416962] smp: csd: Detected non-responsive CSD lock (#1) on CPU#2, waiting 5008914370 ns for CPU#01 do_flush_tlb_all+0x0/0x10(0x0).
            [g-1] [   34.453881] smp: \tcsd: CSD lock (#1) unresponsive.
            [g-1] [   34.489429] Sending NMI from CPU 2 to CPUs 1:
            [g-1] [   34.573817] NMI backtrace for cpu 1
            [g-1] [   34.617463] RIP: 0010:rust_helper_pvlock_kvm_wait+0x1d/0x20
            [g-1] [   34.633366] RSP: 0018:ffa0000000183cc0 EFLAGS: 00010046
            [g-1] [   34.642357] Call Trace:
        ",
        );
        let j = judged(&s, &q, &stalled("g-1"));
        assert!(!j.platform());
        assert!(j
            .unexplained
            .iter()
            .any(|r| r.contains("kernel problem")
                && r.contains("csd: Detected non-responsive CSD lock")));
        // The same report from a guest still booting, with no project code,
        // is vCPU starvation: the platform's.
        let mut b = Parsed::default();
        feed(&mut b, L1_START);
        b.line("[g-1] @@PV L2.g-1 boot uptime=6 nproc=1 kernel=7.3.4");
        b.line("[g-1] [   15.574701] smp: csd: Detected non-responsive CSD lock (#1) on CPU#1, waiting 5002182118 ns for CPU#03 do_sync_core+0x0/0x30(0x0).");
        assert!(judged(&s, &b, &stalled("g-1")).platform());
    }

    #[test]
    fn an_interrupt_inside_a_hardirq_handler_is_the_platforms() {
        // CPU 1's timer interrupt nested in its timer interrupt, which
        // held the hrtimer base lock: the inner one waits
        // for that lock forever (in guest_pvlock's lock wait, as it would
        // in any lock's).
        let s = scenario(PVLOCK);
        let mut q = in_locktorture();
        let report = "
            [g-1] [   25.664713] smp: csd: Detected non-responsive CSD lock (#1) on CPU#0, waiting 5000566994 ns for CPU#01 flush_tlb_func+0x0/0x210(0xffa0000000013cc0).
            [g-1] [   25.675417] Sending NMI from CPU 0 to CPUs 1:
            [g-1] [   25.688807] NMI backtrace for cpu 1
            [g-1] [   25.707920] RIP: 0010:rust_helper_pvlock_kvm_wait+0x1d/0x20
            [g-1] [   25.727579] Call Trace:
            [g-1] [   25.732677]  <IRQ>
            [g-1] [   25.733962]  ? _RNvXCsjnTaV2mjA7B_17guest_pvlock_mainNtB2_6PvlockNtNtNtCs1EKtwoKEMO2_6kernel6pvlock7lockops10QueuedLock8slowpath+0xa39/0xe40 [guest_pvlock]
            [g-1] [   25.734012]  ? _raw_spin_lock_irqsave+0x29/0x30
            [g-1] [   25.734695]  ? hrtimer_interrupt+0x4e/0x1c0
            [g-1] [   25.736118]  ? __sysvec_apic_timer_interrupt+0x46/0x90
            [g-1] [   25.736403]  ? sysvec_apic_timer_interrupt+0x31/0x80
            [g-1] [   25.736642]  ? asm_sysvec_apic_timer_interrupt+0x1a/0x20
            [g-1] [   25.743580]  ? ktime_get_update_offsets_now+0x8b/0x160
            [g-1] [   25.743748]  ? hrtimer_interrupt+0x7e/0x1c0
            [g-1] [   25.743809]  ? sysvec_apic_timer_interrupt+0x67/0x80
            [g-1] [   25.743997]  </IRQ>
            [g-1] [   25.744133]  <TASK>
            [g-1] [   25.744150]  ? asm_sysvec_apic_timer_interrupt+0x1a/0x20
            [g-1] [   25.744190]  ? pv_native_safe_halt+0x16/0x20
            [g-1] [   25.745973]  </TASK>
            [g-1] [   40.966794] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:
        ";
        feed(&mut q, report);
        let j = judged(&s, &q, &stalled("g-1"));
        assert_eq!(signatures(&j), ["irq-in-irq"]);
        // The same when the harness stopped the attempt 90 s after the
        // report: that L1 did not finish is the stop's doing, not
        // evidence.
        let problem_stop = RunEnd {
            problem_stop: true,
            ..Default::default()
        };
        assert_eq!(signatures(&judged(&s, &q, &problem_stop)), ["irq-in-irq"]);
        assert!(!judged(&s, &q, &RunEnd::default()).platform());
        assert!(j
            .why()
            .contains("it interrupted ktime_get_update_offsets_now+0x8b/0x160"));
        // The same nesting where the interrupt came in the project's code
        // (which would have enabled interrupts) is a failure.
        let mut r = in_locktorture();
        feed(
            &mut r,
            &report.replace(
                "? ktime_get_update_offsets_now+0x8b/0x160",
                "? rust_helper_pvlock_kvm_wait+0x1d/0x20",
            ),
        );
        assert!(!judged(&s, &r, &stalled("g-1")).platform());
        // An interrupt taken in softirq processing (on the IRQ stack,
        // interrupts on) is no evidence.
        let mut sirq = in_locktorture();
        feed(
            &mut sirq,
            "
            [g-1] [   71.252157]  <IRQ>
            [g-1] [   71.278149]  ? _raw_spin_lock_irqsave+0x29/0x30
            [g-1] [   71.281547]  ? serial8250_interrupt+0x3e/0xa0
            [g-1] [   71.285546]  ? asm_common_interrupt+0x26/0x40
            [g-1] [   71.286107]  ? handle_softirqs+0x80/0x2a0
            [g-1] [   71.293171]  ? __irq_exit_rcu+0x4c/0xb0
            [g-1] [   71.293259]  ? sysvec_apic_timer_interrupt+0x6c/0x80
            [g-1] [   71.293430]  </IRQ>
            [g-1] [   71.294230]  <TASK>
            [g-1] [   71.294685]  ? pv_native_safe_halt+0x16/0x20
            [g-1] [   71.299141]  </TASK>
            [g-1] [   72.0] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:
        ",
        );
        assert!(sirq.nodes["g-1"].irq_in_irq.is_empty());
        let mut sirq2 = in_locktorture();
        feed(
            &mut sirq2,
            "
            [g-1] [   71.252157]  <IRQ>
            [g-1] [   71.285546]  ? asm_sysvec_apic_timer_interrupt+0x26/0x40
            [g-1] [   71.286107]  ? run_timer_softirq+0x80/0x2a0
            [g-1] [   71.286207]  ? handle_softirqs+0x80/0x2a0
            [g-1] [   71.293430]  </IRQ>
        ",
        );
        assert!(sirq2.nodes["g-1"].irq_in_irq.is_empty());
        // An interrupt on top of a task is no nesting.
        let mut t = in_locktorture();
        feed(
            &mut t,
            &report.replace(
                "  ? asm_sysvec_apic_timer_interrupt+0x1a/0x20\n            [g-1] [   25.743580]",
                "  ? irq_exit_rcu+0x1a/0x20\n            [g-1] [   25.743580]",
            ),
        );
        assert!(!judged(&s, &t, &stalled("g-1")).platform());
    }

    #[test]
    fn a_cpu_that_answers_no_backtrace_nmi_was_not_run() {
        // CPU 3 waits on an IPI to CPU 2, asks it for its stack by NMI,
        // and CPU 2 never answers; the RCU stall report names CPU 2's
        // timer. L1 did not run vCPU 2.
        let s = scenario(PVLOCK);
        let mut q = in_locktorture();
        feed(
            &mut q,
            "
            [g-1] [   50.544146] smp: csd: Detected non-responsive CSD lock (#1) on CPU#3, waiting 5007085970 ns for CPU#02 flush_tlb_func+0x0/0x210(0xffa000000015bbc0).
            [g-1] [   50.552223] smp: \tcsd: CSD lock (#1) unresponsive.
            [g-1] [   50.552607] Sending NMI from CPU 3 to CPUs 2:
        ",
        );
        assert!(q.nodes["g-1"].nmi_silent.is_empty());
        feed(
            &mut q,
            "
            [g-1] [   66.837799] rcu: INFO: rcu_sched self-detected stall on CPU
            [g-1] [   67.570248] rcu: \tPossible timer handling issue on cpu=2 timer-softirq=187
        ",
        );
        assert_eq!(q.nodes["g-1"].nmi_silent.len(), 1);
        assert_eq!(
            signatures(&judged(&s, &q, &stalled("g-1"))),
            ["vcpu-not-run"]
        );
        // A CPU that answered is no evidence.
        let mut a = in_locktorture();
        feed(
            &mut a,
            "
            [g-1] [   50.552607] Sending NMI from CPU 3 to CPUs 2:
            [g-1] [   50.573817] NMI backtrace for cpu 2
            [g-1] [   66.837799] rcu: INFO: rcu_sched self-detected stall on CPU
        ",
        );
        assert!(a.nodes["g-1"].nmi_silent.is_empty());
        assert!(!judged(&s, &a, &stalled("g-1")).platform());
    }

    #[test]
    fn a_soft_lockup_waiting_for_a_vcpu_not_run_is_the_platforms() {
        // CPU 2 (insmod, exiting) waits for a TLB flush IPI to CPU 0,
        // which answers no backtrace NMI; the soft lockup detector then
        // reports CPU 2 spinning in csd_lock_wait().
        let s = scenario(PVLOCK);
        let lines = "
            [g-1] [   52.663239] smp: csd: Detected non-responsive CSD lock (#1) on CPU#2, waiting 5002288608 ns for CPU#00 flush_tlb_func+0x0/0x210(0xffa00000002efc00).
            [g-1] [   52.667698] smp: \tcsd: CSD lock (#1) unresponsive.
            [g-1] [   52.667949] Sending NMI from CPU 2 to CPUs 0:
            [g-1] [   68.622135] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:
            [g-1] [   76.586560] After 10 seconds, these CPUS still haven't responded to the NMI: 0
            [g-1] [  103.507421] watchdog: BUG: soft lockup - CPU#2 stuck for 52s! [insmod:174]
            [g-1] [  103.507981] RIP: 0010:__csd_lock_wait+0xa1/0x2e0
            [g-1] [  103.508963] Call Trace:
        ";
        let mut q = in_locktorture();
        feed(&mut q, lines);
        assert_eq!(q.nodes["g-1"].csd_waits.len(), 1);
        assert_eq!(q.nodes["g-1"].soft_lockups.len(), 1);
        assert_eq!(
            signatures(&judged(&s, &q, &stalled("g-1"))),
            ["vcpu-not-run"]
        );
        // A soft lockup of a CPU that waits for nobody silent is evidence.
        let mut o = in_locktorture();
        feed(&mut o, lines);
        feed(
            &mut o,
            "[g-1] [  104.000000] watchdog: BUG: soft lockup - CPU#3 stuck for 22s! [lock_torture_wr:99]",
        );
        assert!(!judged(&s, &o, &stalled("g-1")).platform());
        // And so is one that waits for a CPU that answered the NMI.
        let mut a = in_locktorture();
        feed(
            &mut a,
            &lines
                .replace(
                    "[   52.667949] Sending NMI from CPU 2 to CPUs 0:",
                    "[   52.667949] NMI backtrace for cpu 0",
                )
                .replace(
                    "these CPUS still haven't responded to the NMI: 0",
                    "NMI backtrace for cpu 0",
                ),
        );
        assert!(!judged(&s, &a, &stalled("g-1")).platform());
    }

    #[test]
    fn cpus_waiting_for_an_ipi_to_a_vcpu_not_run_are_the_platforms() {
        // No RCU stall yet: CPUs 0 and 1 wait for a TLB-flush IPI to CPU
        // 2, which answers no backtrace NMI; both
        // then report soft lockups in csd_lock_wait(), and the harness
        // stops the attempt 90 s after the first report.
        let s = scenario(PVLOCK);
        let lines = "
            [g-1] [   39.217500] smp: csd: Detected non-responsive CSD lock (#1) on CPU#0, waiting 5000024060 ns for CPU#02 flush_tlb_func+0x0/0x210(0xffa000000010fc00).
            [g-1] [   39.227030] smp: \tcsd: CSD lock (#1) unresponsive.
            [g-1] [   39.233221] Sending NMI from CPU 0 to CPUs 2:
            [g-1] [   40.334666] smp: csd: Detected non-responsive CSD lock (#2) on CPU#1, waiting 5000754865 ns for CPU#02 flush_tlb_func+0x0/0x210(0xffa0000000277c00).
            [g-1] [   67.761099] watchdog: BUG: soft lockup - CPU#1 stuck for 34s! [sleep:120]
            [g-1] [   67.761400] RIP: 0010:__csd_lock_wait+0xa1/0x2e0
            [g-1] [   72.896233] After 10 seconds, these CPUS still haven't responded to the NMI: 2
            [g-1] [   97.889777] watchdog: BUG: soft lockup - CPU#0 stuck for 60s! [sleep:116]
        ";
        let stopped = RunEnd {
            problem_stop: true,
            ..Default::default()
        };
        let mut q = in_locktorture();
        feed(&mut q, lines);
        assert_eq!(q.nodes["g-1"].csd_waits.len(), 2);
        assert_eq!(signatures(&judged(&s, &q, &stopped)), ["vcpu-not-run"]);
        // The CPU waited for answered its NMI: evidence, whatever else.
        let mut a = in_locktorture();
        feed(
            &mut a,
            &lines
                .replace(
                    "[   39.233221] Sending NMI from CPU 0 to CPUs 2:",
                    "[   39.233221] Sending NMI from CPU 0 to CPUs 2:\n[g-1] [   39.240000] NMI backtrace for cpu 2",
                )
                .replace("these CPUS still haven't responded to the NMI: 2", "rcu: 0"),
        );
        assert!(a.nodes["g-1"].nmi_silent.is_empty());
        assert!(!judged(&s, &a, &stopped).platform());
        // A silent CPU that nobody waits for explains no IPI wait.
        let mut o = in_locktorture();
        feed(
            &mut o,
            &lines
                .replace("CPU#02 flush_tlb_func", "CPU#03 flush_tlb_func")
                .replace(
                    "[   39.233221] Sending NMI from CPU 0 to CPUs 2:",
                    "[   39.233221] Sending NMI from CPU 0 to CPUs 3:\n[g-1] [   39.240000] NMI backtrace for cpu 3",
                ),
        );
        assert!(!o.nodes["g-1"].nmi_silent.is_empty());
        assert!(!judged(&s, &o, &stopped).platform());
    }

    #[test]
    fn an_l1_cpu_stuck_in_guest_mode_explains_its_guests_missed_seconds() {
        // L1's CPU 1 waits 5 s for an IPI to CPU 0, whose backtrace NMI
        // finds it right after VMRUN;
        // the guest's CPU 0, not run meanwhile, reports a soft lockup as
        // soon as it runs again, in code that is not the project's.
        let s = scenario(PVLOCK);
        let l1 = "
            [   52.763753] smp: csd: Detected non-responsive CSD lock (#1) on CPU#1, waiting 5000000135 ns for CPU#00 flush_tlb_func+0x0/0x210(0xffa0000000163bc0).
            [   52.765586] smp: \tcsd: CSD lock (#1) unresponsive.
            [   52.768180] NMI backtrace for cpu 0
            [   52.773740] RIP: 0010:svm_vcpu_run+0x37b/0x700
            [   52.778719] Call Trace:
            [   52.785434] smp: csd: CSD lock (#1) got unstuck on CPU#01, CPU#00 released the lock.
        ";
        let g = "
            [g-1] [   39.214255] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [init:47]
            [g-1] [   39.222279] RIP: 0010:handle_mm_fault+0x15f4/0x20e0
            [g-1] [   39.229219]  <TASK>
            [g-1] [   39.229751]  ? do_user_addr_fault+0x1be/0x650
            [g-1] [   39.231553]  </TASK>
        ";
        let mut q = in_locktorture();
        feed(&mut q, l1);
        feed(&mut q, g);
        feed(&mut q, G_FINISH);
        assert_eq!(
            signatures(&judged(&s, &q, &RunEnd::default())),
            ["l1-stuck-in-guest"]
        );
        // A guest CPU that was in the project's code is evidence.
        let mut pv = in_locktorture();
        feed(&mut pv, l1);
        feed(
            &mut pv,
            &g.replace(
                "handle_mm_fault+0x15f4/0x20e0",
                "_RNvCs1_guest_pvlock_slowpath+0x21/0x400",
            ),
        );
        feed(&mut pv, G_FINISH);
        assert!(!judged(&s, &pv, &RunEnd::default()).platform());
        // So is a guest problem long after L1 got going again.
        let mut late = in_locktorture();
        feed(&mut late, l1);
        late.wall = 60.0;
        feed(&mut late, g);
        feed(&mut late, G_FINISH);
        assert!(!judged(&s, &late, &RunEnd::default()).platform());
        // An L1 CPU that an NMI found anywhere but in guest mode is no
        // evidence: it may have held interrupts off itself.
        let mut host = in_locktorture();
        feed(
            &mut host,
            &l1.replace(
                "svm_vcpu_run+0x37b/0x700",
                "_RNvCs2_host_kvm_wait+0x10/0x80",
            ),
        );
        feed(&mut host, g);
        feed(&mut host, G_FINISH);
        assert!(!judged(&s, &host, &RunEnd::default()).platform());
    }

    #[test]
    fn an_nmi_count_left_in_l1_beside_a_guest_entry_crash_is_the_platforms() {
        // No project code in L1 or L2: the guest's page faults recurse in
        // its exception entry, and L1's vCPU thread schedules with
        // NMI_OFFSET + HARDIRQ_OFFSET still in its preempt count.
        let l1 = "
            [   29.869009] BUG: scheduling while atomic: qemu-system-x86/74/0x11000001
            [   29.869369] Modules linked in:
            [   29.875207] Call Trace:
            [   29.886802]  <TASK>
            [   29.888356]  ? __schedule+0x72e/0x910
            [   29.888898]  ? __x64_sys_ioctl+0x6ea/0x780
            [   29.889395]  </TASK>
        ";
        let g = "
            [g-1] [   16.400465] BUG: #DF stack guard page was hit at fffffe0000043ff8 (stack is fffffe0000044000..fffffe0000046000)
            [g-1] [   16.427512] Oops: stack guard page: 0000 [#1] SMP
            [g-1] [   16.812808] RIP: 0010:asm_exc_page_fault+0x8/0x30
            [g-1] [   28.685175] Kernel panic - not syncing: Fatal exception in interrupt
            [g-1] @@PV L1.l1 l2-exit g-1 rc=0
            @@PV L1.l1 step-end l22 rc=0 secs=41.06
            @@PV L1.l1 done rc=0 uptime=44.40
        ";
        let start = "
            @@PV L1.l1 boot uptime=1.36 nproc=2 kernel=7.3.4
            @@PV L1.l1 step-begin l22 l2 490 g:1:4:768M:host
            [g-1] @@PV L2.g-1 boot uptime=4.72 nproc=4 kernel=7.3.4
            [g-1] @@PV L2.g-1 step-begin lt1 locktorture spin_lock_irq 8 30
        ";
        let s = scenario(STOCK);
        let mut p = Parsed::default();
        feed(&mut p, start);
        feed(&mut p, l1);
        feed(&mut p, g);
        let mut sigs = signatures(&judged(&s, &p, &RunEnd::default()));
        sigs.sort();
        assert_eq!(sigs, ["entry-fault-recursion", "lost-nmi-exit"]);
        // With guest_pvlock in the guest (running locktorture), a crash
        // out of the blue is the same event.
        let mut pv = in_locktorture();
        feed(&mut pv, l1);
        feed(&mut pv, g);
        let j = judged(&scenario(PVLOCK), &pv, &RunEnd::default());
        assert!(j.platform(), "{:?}", j.unexplained);
        assert!(j.signatures().contains(&"lost-nmi-exit"));
        // A guest that hung first (a dropped kick, say) stays real: one
        // that reported a stall before the crash, or one that the
        // harness's NMI asked.
        let stall = "
            [g-1] [    9.100000] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:
        ";
        let injected = "
            @@PV L1.l1 nmi-injected g-1
        ";
        for before in [stall, injected] {
            let mut hung = in_locktorture();
            feed(&mut hung, before);
            feed(&mut hung, l1);
            feed(&mut hung, g);
            let j = judged(&scenario(PVLOCK), &hung, &RunEnd::default());
            assert!(!j.platform(), "{before}");
        }
        // So does a crash in the project's code.
        let mut own = in_locktorture();
        feed(&mut own, l1);
        feed(
            &mut own,
            &g.replace(
                "RIP: 0010:asm_exc_page_fault+0x8/0x30",
                "RIP: 0010:asm_exc_page_fault+0x8/0x30\n[g-1] [   16.900000]  pvlock_lock_slowpath+0x10/0x300 [guest_pvlock]",
            ),
        );
        assert!(!judged(&scenario(PVLOCK), &own, &RunEnd::default()).platform());
        // A count without the NMI bit is a bug like any other.
        let mut plain = Parsed::default();
        feed(&mut plain, start);
        feed(&mut plain, &l1.replace("0x11000001", "0x00000002"));
        feed(&mut plain, g);
        assert!(!judged(&s, &plain, &RunEnd::default()).platform());
        // So is one with no guest crash beside it.
        let mut alone = Parsed::default();
        feed(&mut alone, start);
        feed(&mut alone, l1);
        feed(&mut alone, "@@PV L1.l1 done rc=0 uptime=44.40");
        assert!(!judged(&s, &alone, &RunEnd::default()).platform());
    }

    #[test]
    fn a_frame_with_an_impossible_code_segment_is_the_platforms() {
        // A page fault whose frame was pushed where the entry code does
        // not read it.
        let s = scenario(PVLOCK);
        let mut q = in_locktorture();
        feed(
            &mut q,
            "
            [g-1] [   41.163441] BUG: unable to handle page fault for address: 0000000000000000
            [g-1] [   41.353782] #PF: supervisor read access in user mode
            [g-1] [   41.922424] Oops: Oops: 8000 [#1] SMP
            [g-1] [   42.226270] RIP: f0a2:0xffa0000000003ee8
            [g-1] [   42.292933] RSP: 4931:ffffffff81480b01 EFLAGS: ffffbce4
            [g-1] [   43.199113] Kernel panic - not syncing: Fatal exception in interrupt
            [g-1] @@PV L1.l1 l2-exit g-1 rc=0
            @@PV L1.l1 step-end l22 rc=0 secs=56.58
            @@PV L1.l1 done rc=0 uptime=60.54
        ",
        );
        assert_eq!(
            signatures(&judged(&s, &q, &RunEnd::default())),
            ["bad-frame"]
        );
        let mut ok = in_locktorture();
        feed(
            &mut ok,
            "
            [g-1] [   41.16] BUG: unable to handle page fault for address: 0000000000000000
            [g-1] [   42.22] RIP: 0010:rust_helper_pvlock_kvm_wait+0x1d/0x20
            [g-1] [   43.19] Kernel panic - not syncing: Fatal exception
            [g-1] @@PV L1.l1 l2-exit g-1 rc=0
        ",
        );
        assert!(!judged(&s, &ok, &RunEnd::default()).platform());
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
}

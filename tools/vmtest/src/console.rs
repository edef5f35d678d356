// SPDX-License-Identifier: GPL-2.0

//! Turning the L1 console (which carries L2's, relayed with a `[<name>] `
//! prefix) into one result per run.
//!
//! The guest library prints marker lines `@@PV L<level>.<name> <event>
//! <data>`; everything else is kernel or QEMU output, kept for the console
//! log and scanned for kernel problems.

use crate::regs::{parse_modmap, Module, Symbols, VcpuRegs};
use regex::Regex;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

/// A step as it ran.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StepResult {
    pub id: String,
    pub call: String,
    pub rc: Option<i64>,
    pub secs: Option<f64>,
    pub timed_out: bool,
    /// Where on the console it ended (see [`Parsed::seq`]).
    #[serde(skip)]
    pub end_seq: Option<u64>,
}

/// One locktorture run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Locktorture {
    pub kind: String,
    pub writers: u64,
    /// Seconds from loading locktorture to having unloaded it, as the
    /// guest's shell measured them.
    pub secs: f64,
    /// Seconds the writers ran, in the kernel's clock: from locktorture's
    /// "Start of test" to its summary, printed once the writers stopped
    /// (`None` from a guest that did not report it).
    pub window: Option<f64>,
    pub total: Option<u64>,
    pub max: Option<u64>,
    pub min: Option<u64>,
    /// Writes per second over the writers' window (over `secs` without
    /// one).
    pub per_sec: Option<f64>,
    pub fail: Option<u64>,
    /// `SUCCESS` or `FAILURE` from "End of test".
    pub verdict: Option<String>,
    /// locktorture's own "???" mark of a suspicious Max/Min spread.
    pub suspicious: bool,
}

/// One hackbench run (rt-tests, the `hackbench` step).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
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

/// One stress-ng run (the `stressng` step): its stressors ran at once,
/// each with `instances` instances, for `duration` seconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StressNg {
    /// The stressors, as the step named them.
    pub stressors: Vec<String>,
    /// Instances of each stressor.
    pub instances: u64,
    /// The seconds asked for (stress-ng's `--timeout`).
    pub duration: u64,
    /// The geometric mean of the stressors' bogo ops/s (real time), as
    /// stress-ng's `--metrics-brief` reports them; `None` if it failed or
    /// timed out.
    pub ops_per_sec: Option<f64>,
    /// Each stressor's bogo ops/s (real time).
    pub rates: BTreeMap<String, f64>,
    /// stress-ng's exit status.
    pub rc: Option<i64>,
    /// Wall seconds of the step's stress-ng, as the guest measured them.
    pub secs: Option<f64>,
    /// Stopped by the step's own bound.
    pub timed_out: bool,
    /// What went wrong (`timeout` when the bound stopped it).
    pub error: Option<String>,
}

/// One `mmbench` run (tools/pvlock-mmbench): `threads` threads mapped,
/// touched and unmapped `ops` chunks of `chunk_kib` KiB in `secs`
/// seconds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct MmBench {
    pub threads: u64,
    pub chunk_kib: u64,
    pub ops: Option<u64>,
    pub secs: Option<f64>,
    pub error: Option<String>,
}

impl MmBench {
    /// Chunks per second, if the run gave a count.
    pub fn per_sec(&self) -> Option<f64> {
        match (self.ops, self.secs) {
            (Some(n), Some(s)) if s > 0.0 => Some(n as f64 / s),
            _ => None,
        }
    }
}

/// What a kernel was running at a point of its console: the harness tells
/// the platform's failures from the project's by it ([`crate::platform`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CodeState {
    /// Project code ran in the kernel: guest_pvlock in an L2, from the step
    /// that loads it (or its first kernel line) until it is unloaded;
    /// host_kvm in L1, from the step that loads it on.
    pub project_code: bool,
    /// A lock-op switch was in flight: guest_pvlock's `switching the lock
    /// ops` line had come, its `installed`/`uninstalled` line not yet.
    pub switching: bool,
}

/// L1's NMI probe of a silent L2 (the harness's, through QMP, of a silent
/// L1): QEMU's `inject-nmi` sends an NMI to every vCPU, and a Linux guest
/// reports each (`Uhhuh. NMI received for unknown reason 3c on CPU 2.`).
/// An NMI ends a `HLT` and a lock wait, whatever the guest waits for.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct NmiProbe {
    /// NMIs injected (each to every vCPU).
    pub injected: u32,
    /// Why an NMI could not be injected, if one could not.
    pub failed: Option<String>,
    /// The CPUs that reported the last NMI.
    pub answered: BTreeSet<u32>,
    /// The kernel's first line (its heartbeat included) after an NMI that
    /// is not its report of the NMI: it was silent until the NMI, then ran
    /// on.
    pub resumed: Option<String>,
    /// Nothing but NMI reports from the kernel since the last NMI.
    pub silent_after_last: bool,
    /// The kernel's state when the last NMI was injected.
    pub at_last: CodeState,
}

/// A backtrace NMI that a vCPU answered late, in the project's code.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LateNmi {
    /// Console sequence number of the request (`Sending NMI from ...`).
    pub sent_seq: u64,
    pub cpu: u32,
    /// Kernel time of the request, and how many seconds later the answer
    /// came.
    pub sent_at: f64,
    pub late: f64,
    /// The function at the answer's RIP.
    pub rip: String,
}

/// One `runq` line of L1 (`l2_runq` in the guest library): vCPU `cpu` of
/// an L2 waited `waited` seconds, in all, on L1's run queues (runnable, not
/// run) in the `within` seconds since the sample before; so one stretch of
/// at least `waited - within` seconds ended in that time.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunqWait {
    pub seq: u64,
    pub cpu: u32,
    pub waited: f64,
    pub within: f64,
}

impl RunqWait {
    /// The shortest the longest stretch can be.
    pub fn stretch(&self) -> f64 {
        (self.waited - self.within).max(0.0)
    }
}

/// One kernel (L1 or an L2 instance).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
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
    /// `stat` steps' snapshots (pvlock-stat `--json`).
    pub stats: Vec<pvlock_common::stats::StatDoc>,
    pub stat_errors: Vec<String>,
    pub info: BTreeMap<String, String>,
    pub locktorture: Vec<Locktorture>,
    pub loadloops: Vec<BTreeMap<String, String>>,
    /// `online_cpus` results (`online`, `busy`).
    pub cpus: Vec<BTreeMap<String, String>>,
    /// `hotplug_loop` results (`rounds`, `ok`, `busy`, `online`).
    pub hotplug: Vec<BTreeMap<String, String>>,
    pub hackbench: Vec<Hackbench>,
    /// `stressng` results.
    pub stressng: Vec<StressNg>,
    /// `mmbench` results.
    pub mmbench: Vec<MmBench>,
    /// `barrier` steps passed: `name`, and `waited` (seconds until every
    /// guest of the l2 step had reached it).
    pub barriers: Vec<BTreeMap<String, String>>,
    /// `await_lock` steps that saw their state: `state`, `secs` (until it
    /// was seen).
    pub awaits: Vec<BTreeMap<String, String>>,
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
    /// RCU stall detector or `csdlock_debug`), or answered it late
    /// ([`NMI_LATE_SECS`]) outside the project's code: those vCPUs did not
    /// run.
    pub nmi_silent: Vec<String>,
    /// The probe of the kernel when it went silent.
    pub nmi: NmiProbe,
    /// Register samples of the kernel when it went silent
    /// ([`crate::regs`]), and why none could be taken.
    pub regs: Vec<VcpuRegs>,
    pub regs_failed: Option<String>,
    /// The modules the kernel last said it had loaded (`modmap`).
    pub modmap: Vec<Module>,
    /// guest_pvlock's lock-op switch lines, from the kernel's console.
    pub switches: Vec<String>,
    /// What the kernel runs now (at the end of the console).
    pub state: CodeState,
    /// `csd: Detected non-responsive CSD lock` reports: console sequence
    /// number, the CPU that waits, the CPU it waits for.
    pub csd_waits: Vec<(u64, u32, u32)>,
    /// Backtrace NMIs answered: sequence number of the `RIP:` line, the
    /// CPU, and the function at its RIP.
    pub nmi_rips: Vec<(u64, u32, String)>,
    /// Soft lockup reports: sequence number, the CPU stuck.
    pub soft_lockups: Vec<(u64, u32)>,
    /// Backtrace NMIs answered late ([`NMI_LATE_SECS`]) in the project's
    /// code: not evidence on their own (the project's lock wait could be
    /// what kept the vCPU), only with L1's run-queue record of that vCPU
    /// ([`Node::runq`], judged in [`crate::platform`]).
    pub nmi_late_in_project: Vec<LateNmi>,
    /// L1's run-queue record of this guest's vCPU threads (`runq` lines of
    /// `l2_runq`): stretches in which L1 kept a vCPU runnable but did not
    /// run it.
    pub runq: Vec<RunqWait>,
    /// Sequence numbers of stack frames and `RIP:` lines in the project's
    /// code.
    pub project_frames: Vec<u64>,
    /// Parser state: the CPU of the NMI backtrace whose `RIP:` line comes
    /// next.
    #[serde(skip)]
    pub nmi_bt_cpu: Option<u32>,
    /// A marker that a kernel message cut in two, up to the cut: the rest
    /// of it is the kernel's next console line (see `spliced_marker`).
    #[serde(skip)]
    pub pending_marker: Option<String>,
    /// Per line of `problems`: where it came on the console
    /// ([`Parsed::seq`]), the kernel's timestamp, and the kernel's state.
    #[serde(skip)]
    pub problem_at: Vec<(u64, Option<f64>, CodeState)>,
    /// Per line of `errors`: where it came on the console.
    #[serde(skip)]
    pub error_seqs: Vec<u64>,
    /// Where the kernel's last line (NMI reports aside) came.
    #[serde(skip)]
    pub last_seq: u64,
    /// L2 instances: the exit status L1 saw.
    pub exit_rc: Option<i64>,
    /// L2 instances: QEMU's message that a signal ended it (L1's `timeout`
    /// at the end of the `l2` step's bound), which also exits with 0.
    pub killed: Option<String>,
    /// L1: KVM's shutdown exits of its guests (`kvm:kvm_exit` trace lines
    /// with SVM exit code 0x7f), i.e. the guest triple faults.
    pub shutdown_exits: Vec<String>,
    /// The last console lines of this kernel.
    #[serde(skip)]
    pub tail: Vec<String>,
    /// The kernel's first problem report: its first problem line and the
    /// kernel lines after it, up to [`FIRST_REPORT`] lines, for the
    /// summary of a failure (the console log keeps the rest).
    #[serde(skip)]
    pub first_report: Vec<String>,
    /// Interrupts taken inside a hardirq handler (an `asm_sysvec_*` or
    /// `asm_common_interrupt` frame within a stack's `<IRQ>` block), with
    /// the function each one interrupted: the console sequence number and
    /// that function's frame line. x86 Linux runs hardirq handlers with
    /// interrupts off, so only a CPU that delivers an interrupt with them
    /// off, or code that enabled them there, makes one.
    pub irq_in_irq: Vec<(u64, String)>,
    /// Backtrace NMIs the kernel sent (`Sending NMI from CPU 3 to CPUs
    /// 2:`) that the CPU has not answered yet (`NMI backtrace for cpu 2`):
    /// CPU and the kernel time of the request. One unanswered 10 s later
    /// goes to `nmi_silent`.
    #[serde(skip)]
    pub nmi_pending: Vec<(u32, f64, u64)>,
    /// Parser state: the CPU whose backtrace NMI came late (see
    /// [`NMI_LATE_SECS`]), with the kernel time it was sent, how late, and
    /// the console sequence number of the request, until its `RIP:` line
    /// says where it was.
    #[serde(skip)]
    pub nmi_late: Option<(u32, f64, f64, u64)>,
    /// The register dumps' `RIP:` lines (oopses, NMI backtraces).
    #[serde(skip)]
    pub rips: Vec<String>,
    /// Parser state: inside a stack's `<IRQ>` block; an interrupt entry
    /// frame was just seen there.
    #[serde(skip)]
    pub stack: StackState,
    /// Interrupts nested in the current `<IRQ>` block, kept when the block
    /// ends unless a frame from the interrupted one on is softirq
    /// processing (softirqs run on the IRQ stack with interrupts on).
    #[serde(skip)]
    pub irq_candidates: Vec<(u64, String)>,
    #[serde(skip)]
    pub irq_softirq: bool,
}

/// Where the parser is in a stack trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StackState {
    #[default]
    Outside,
    InIrq,
    /// Inside `<IRQ>`, right after an interrupt entry frame.
    IrqEntry,
}

/// A stack frame of the project's code: guest_pvlock, host_kvm, the
/// kernel crate's pvlock abstractions and their helpers (Rust symbols are
/// mangled `_R...`; any counts).
pub(crate) fn project_frame(f: &str) -> bool {
    f.contains("pvlock") || f.contains("host_kvm") || f.starts_with("_R")
}

/// A frame of softirq processing, which runs on the IRQ stack with
/// interrupts enabled: an interrupt nested below it is legitimate.
fn is_softirq_frame(f: &str) -> bool {
    [
        "handle_softirqs",
        "__do_softirq",
        "do_softirq",
        "irq_exit_rcu",
        "__irq_exit_rcu",
        "irq_exit",
        "run_ksoftirqd",
    ]
    .iter()
    .any(|k| f.starts_with(&format!("{k}+")))
}

/// The function name of a stack trace line (`[ 1.2]  ? name+0x1/0x2`).
fn frame_of(text: &str) -> Option<&str> {
    let body = match text.find("] ") {
        Some(i) if text.starts_with('[') => &text[i + 2..],
        _ => text,
    };
    let f = body.trim_start().trim_start_matches("? ").trim();
    // A module's function carries the module's name: `fn+0x1/0x2 [mod]`.
    let symbol = match f.split_once(" [") {
        Some((sym, m)) if m.ends_with(']') && !m.contains(' ') => sym,
        _ => f,
    };
    (symbol.contains("+0x") && !symbol.contains(' ')).then_some(f)
}

/// A kernel's first problem report in a few lines, for a failure's
/// summary: its first line, the lines that name the CPU, the task and the
/// instruction (`CPU:`, `RIP:`), and its stack as one line of functions,
/// innermost first (`?`: a stale frame).
pub fn condensed_report(report: &[String]) -> Vec<String> {
    let Some(first) = report.first() else {
        return Vec::new();
    };
    let mut out = vec![first.clone()];
    let mut frames = Vec::new();
    for l in &report[1..] {
        let body = match l.find("] ") {
            Some(i) if l.starts_with('[') => &l[i + 2..],
            _ => l.as_str(),
        };
        if (body.starts_with("CPU: ") || body.starts_with("RIP: ")) && out.len() < 4 {
            out.push(l.clone());
        } else if let Some(f) = frame_of(l) {
            let name = f.split_once('/').map_or(f, |(n, _)| n);
            let module = f
                .split_once(" [")
                .map_or(String::new(), |(_, m)| format!(" [{m}"));
            let stale = if body.trim_start().starts_with("? ") {
                "?"
            } else {
                ""
            };
            if frames.len() < 20 {
                frames.push(format!("{stale}{name}{module}"));
            }
        }
    }
    if !frames.is_empty() {
        out.push(format!("stack: {}", frames.join(" < ")));
    }
    out
}

/// Everything parsed from one run's console.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Parsed {
    /// "l1" and the L2 instance names.
    pub nodes: BTreeMap<String, Node>,
    /// Console lines fed so far: a line's place in the console, which
    /// orders events across kernels.
    #[serde(skip)]
    pub seq: u64,
    /// The kernel's symbols, to name the addresses of register samples.
    #[serde(skip)]
    pub symbols: Option<Arc<Symbols>>,
    /// Seconds since the run began, as the caller last said: the time at
    /// which the next line arrives.
    #[serde(skip)]
    pub wall: f64,
    /// Per line fed (index `seq - 1`), the `wall` at which it came: the
    /// console interleaves kernels, and kernel timestamps are each
    /// kernel's own.
    #[serde(skip)]
    pub wall_at: Vec<f64>,
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
        r"(BUG:|Oops|WARNING:|Kernel panic|rcu: INFO|soft lockup|hard LOCKUP|general protection fault|stack guard page|Call Trace:|cut here|Code: |csd: Detected non-responsive CSD lock)",
    )
}

fn uhhuh_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(
        &R,
        r"NMI received for unknown reason [0-9a-f]+ on CPU (\d+)",
    )
}

fn csd_wait_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(
        &R,
        r"csd: Detected non-responsive CSD lock \(#\d+\) on CPU#(\d+), waiting \d+ ns for CPU#(\d+)",
    )
}

fn soft_lockup_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(&R, r"soft lockup - CPU#(\d+) stuck")
}

/// The CPUs named by a kernel's list (`0-2,5`).
pub fn cpu_list(s: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    v.extend(a..=b.min(a + 8192));
                }
            }
            None => v.extend(part.parse::<u32>().ok()),
        }
    }
    v
}

/// A backtrace NMI answered this long after it was sent (kernel time)
/// was late: an NMI reaches a halted or spinning vCPU at once, so L1 did
/// not run that one for as long (`vcpu-not-run` in
/// Documentation/pvlock/testing.rst).
pub const NMI_LATE_SECS: f64 = 5.0;

fn nmi_sent_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(&R, r"Sending NMI from CPU \d+ to CPUs ([\d,]+):")
}

fn nmi_backtrace_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(&R, r"NMI backtrace for cpu (\d+)")
}

fn timestamp_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(&R, r"^\[\s*(\d+\.\d+)\]")
}

/// The kernel's timestamp of a console line (`[   60.64] ...`).
pub fn timestamp(text: &str) -> Option<f64> {
    timestamp_re()
        .captures(text)
        .and_then(|c| c[1].parse().ok())
}

fn kmsg_inside_re() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    re(&R, r"\[\s*\d+\.\d{6}\] ")
}

/// A marker with a kernel message printed into the middle of it: the
/// guest's userspace and its kernel share the serial console, and a
/// kernel message can land anywhere in a marker still being written (the
/// L2's `ACPI: PM: Preparing to enter system sleep state S5` inside a long
/// `stat` line; a locktorture message inside `hotplug`, which cuts it into
/// `@@PV L2.g-1 hotp[   20.195176] torture_...` and `lug rounds=6 ...`).
/// Returns the marker up to the message, and the message, which runs to
/// the end of the console line; the rest of the marker is the kernel's
/// next console line. `None` for a marker that holds no kernel message,
/// or holds one as its data: `dmesg` and `lt` start with the kernel line
/// they quote, `out` and `kvmtest` quote a program's output, and a `stat`
/// marker's JSON that parses is whole, whatever it quotes.
fn spliced_marker(m: &str) -> Option<(&str, &str)> {
    let mut it = m.splitn(3, ' ');
    let (_who, event, data) = (it.next()?, it.next().unwrap_or(""), it.next().unwrap_or(""));
    let from = match event {
        "out" | "kvmtest" => return None,
        "stat" if serde_json::from_str::<serde_json::Value>(data).is_ok() => return None,
        // The quoted line's own timestamp is not a cut.
        "dmesg" | "lt" if kmsg_inside_re().find(data).is_some_and(|t| t.start() == 0) => {
            m.len() - data.len() + 1
        }
        _ => 0,
    };
    let at = from + kmsg_inside_re().find(&m[from..])?.start();
    Some((&m[..at], &m[at..]))
}

/// A kernel's report of an NMI that no handler claimed (one per CPU:
/// `Uhhuh. NMI received for unknown reason 3c on CPU 2.`, then `Dazed and
/// confused, but trying to continue`), or of a slow NMI handler, printed
/// once the CPU can print: it says the CPU took the NMI, not that the
/// kernel runs on.
pub fn is_nmi_report(text: &str) -> bool {
    [
        "NMI received for unknown reason",
        "Dazed and confused",
        "strange power saving mode",
        "unknown_nmi_error",
    ]
    .iter()
    .any(|k| text.contains(k))
        || (text.contains("NMI handler") && text.contains("took too long"))
}

/// A line of a kernel's problem report (the stall detectors' reports and
/// reminders, a backtrace, a register dump): a stuck kernel prints these
/// as long as one CPU takes timer ticks.
pub fn is_report_line(text: &str) -> bool {
    let body = match text.find("] ") {
        Some(i) if text.starts_with('[') => &text[i + 2..],
        _ => text,
    };
    problem_re().is_match(text)
        || body.starts_with(' ')
        || body.starts_with('<')
        || [
            "rcu:",
            "csd:",
            "NMI",
            "CPU: ",
            "RIP:",
            "RSP:",
            "RAX:",
            "RDX:",
            "RBP:",
            "R10:",
            "R13:",
            "FS:",
            "CS:",
            "CR2:",
            "PKRU:",
            "Tainted:",
            "task:",
            "watchdog:",
            "Modules linked",
            "INFO:",
            "Hardware name",
            "Workqueue:",
            "---[",
        ]
        .iter()
        .any(|k| body.starts_with(k))
        || body.starts_with("smp:")
        || body.starts_with("Sending NMI")
        || body.starts_with("After 10 seconds")
}

/// The project's module in a kernel: guest_pvlock in an L2, host_kvm in L1.
fn project_module(kernel: &str) -> &'static str {
    if kernel == "l1" {
        "host_kvm"
    } else {
        "guest_pvlock"
    }
}

fn kv(s: &str) -> BTreeMap<String, String> {
    s.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const TAIL: usize = 40;

/// Lines kept of a kernel's first problem report ([`Node::first_report`]).
pub const FIRST_REPORT: usize = 60;

/// The kernel a console line comes from and its text: L2 lines come
/// relayed by L1 as "[<name>] ...", everything else is L1's.
pub fn split_origin(line: &str) -> (&str, &str) {
    match line.strip_prefix('[').and_then(|r| r.split_once("] ")) {
        Some((name, rest)) if name.contains('-') && !name.contains(' ') => (name, rest),
        _ => ("l1", line),
    }
}

impl Parsed {
    /// When console line `seq` came (seconds since the run began).
    pub fn wall_of(&self, seq: u64) -> f64 {
        let i = (seq as usize).saturating_sub(1);
        self.wall_at
            .get(i)
            .or(self.wall_at.last())
            .copied()
            .unwrap_or(0.0)
    }

    fn node(&mut self, name: &str) -> &mut Node {
        self.nodes.entry(name.to_string()).or_default()
    }

    /// Feeds one console line.
    pub fn line(&mut self, raw: &str) {
        self.seq += 1;
        self.wall_at.push(self.wall);
        let line = raw.trim_end_matches(['\r', '\n']);
        let (origin, text) = split_origin(line);
        let origin = origin.to_string();
        // The rest of a marker that a kernel message cut (see
        // `spliced_marker`) is the kernel's next line, unless that line is a
        // marker, a heartbeat or a kernel message of its own: then the cut
        // marker stands as it is (a stat line is reported as bad JSON).
        let joined: String;
        let text = match self.node(&origin).pending_marker.take() {
            Some(head) if !text.starts_with("@@") && timestamp(text).is_none() => {
                joined = format!("{head}{text}");
                joined.as_str()
            }
            Some(head) => {
                self.marker(&origin, &head["@@PV ".len()..]);
                text
            }
            None => text,
        };
        {
            let n = self.node(&origin);
            n.tail.push(text.to_string());
            if n.tail.len() > TAIL {
                n.tail.remove(0);
            }
        }
        if !is_nmi_report(text) && !text.contains("@@PV L0.") {
            self.output(&origin, text);
        }
        let kernel_text = match text.find("@@PV ") {
            Some(pos) => &text[..pos],
            None => text,
        };
        self.kernel_text(&origin, kernel_text);
        if let Some(pos) = text.find("@@PV ") {
            // Consoles interleave: a line may hold more than one marker (an
            // L2's unfinished line, then L1's own marker after it).
            for m in text[pos + 5..].split("@@PV ") {
                let m = m.trim_end();
                if let Some((head, kmsg)) = spliced_marker(m) {
                    self.kernel_text(&origin, kmsg);
                    self.node(&origin).pending_marker = Some(format!("@@PV {head}"));
                    continue;
                }
                self.marker(&origin, m);
            }
        }
        if text.contains("haven't responded to the NMI") {
            self.node(&origin).nmi_silent.push(text.to_string());
        }
        if let Some(c) = uhhuh_re().captures(text) {
            if let Ok(cpu) = c[1].parse() {
                self.node(&origin).nmi.answered.insert(cpu);
            }
        }
    }

    /// A line of `origin` other than an NMI report: the kernel runs (an
    /// L2's console also carries L1's marker about it and QEMU's messages,
    /// which are not the L2's). Any line at all says that L1 runs.
    fn output(&mut self, origin: &str, text: &str) {
        let own = if origin == "l1" {
            !text.starts_with("[qemu]")
        } else {
            match text.find("@@PV ") {
                Some(pos) => pos > 0 || text[pos + 5..].starts_with(&format!("L2.{origin} ")),
                None => !text.starts_with("qemu-system"),
            }
        };
        let seq = self.seq;
        if origin != "l1"
            && text.starts_with("qemu-system")
            && text.contains("terminating on signal")
        {
            self.node(origin).killed = Some(text.trim().to_string());
        }
        if own {
            let n = self.node(origin);
            n.last_seq = seq;
            // A report of a problem (an RCU stall's periodic reminder, a
            // backtrace) comes from a stuck kernel too: no sign that it
            // runs on.
            if !is_report_line(text) {
                Self::resumed(n, text);
            }
        }
        if origin != "l1" {
            if let Some(l1) = self.nodes.get_mut("l1") {
                Self::resumed(l1, &format!("[{origin}] {text}"));
            }
        }
    }

    fn resumed(n: &mut Node, text: &str) {
        if n.nmi.silent_after_last {
            n.nmi.silent_after_last = false;
            if n.nmi.resumed.is_none() {
                n.nmi.resumed = Some(text.to_string());
            }
        }
    }

    /// A heartbeat of kernel `origin` (neither logged nor parsed otherwise):
    /// it runs on, and so does L1, which relayed it.
    pub fn heartbeat(&mut self, origin: &str) {
        for who in [origin, "l1"] {
            if let Some(n) = self.nodes.get_mut(who) {
                Self::resumed(n, "@@HB (its heartbeat)");
            }
        }
    }

    /// An NMI was injected into every vCPU of kernel `kernel` (by L1, or
    /// by the harness for L1).
    pub fn nmi_injected(&mut self, kernel: &str) {
        let n = self.node(kernel);
        n.nmi.injected += 1;
        n.nmi.answered.clear();
        n.nmi.silent_after_last = true;
        n.nmi.at_last = n.state;
    }

    /// No NMI could be injected into kernel `kernel`, for reason `why`.
    pub fn nmi_failed(&mut self, kernel: &str, why: &str) {
        self.node(kernel).nmi.failed = Some(why.to_string());
    }

    /// Kernel output (not a marker) of `origin`: problems, and what the
    /// project's code is doing.
    fn kernel_text(&mut self, origin: &str, text: &str) {
        let seq = self.seq;
        let module = project_module(origin);
        let n = self.node(origin);
        n.project_code_text(module, text);
        n.rip_or_frame(seq, text);
        n.ipi_waits_and_lockups(seq, text);
        if let Some(t) = timestamp(text) {
            n.backtrace_nmis(seq, t, text);
        }
        n.irq_nesting(seq, text);
        n.problem_text(seq, text);
    }

    /// A marker (`L<level>.<name> <event> <data>`, without its `@@PV `) on
    /// `origin`'s console: a report about another kernel
    /// ([`Parsed::about_kernel`]), or a kernel's own record, which goes to
    /// the handler of its family of events. Errors it adds are placed at
    /// the current console line.
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
        if self.about_kernel(event, &data) {
            return;
        }
        let seq = self.seq;
        let module = project_module(&name);
        let node = self.node(&name);
        node.level = level;
        let errors = node.errors.len();
        match event {
            "boot" | "cmdline" | "done" => node.lifecycle_marker(event, data),
            "step-begin" | "step-end" | "step-timeout" => {
                node.step_marker(event, &data, seq, module)
            }
            "module" | "dmesg" | "modmap" | "params" => node.module_marker(event, data, module),
            "stat" | "stat-error" | "info" | "warnings" | "hypercalls" => {
                node.stats_marker(event, data)
            }
            "lt" => node.lt_marker(&data),
            "locktorture" => node.locktorture_marker(&data),
            "hackbench" => node.hackbench_marker(&data),
            "stressng" => node.stressng_marker(&data),
            "mmbench" => node.mmbench_marker(&data),
            "loadloop" | "cpus" | "hotplug" => node.cpus_marker(event, &data),
            "barrier-passed" | "barrier-error" | "await" | "await-error" => {
                node.sync_marker(event, &data)
            }
            "kvmtest" | "out" | "error" | "l2-shutdown-exit" => node.output_marker(event, data),
            _ => {}
        }
        let added = node.errors.len() - errors;
        node.error_seqs.extend(std::iter::repeat_n(seq, added));
    }

    /// A marker by L1 (or by the harness, about L1) that reports on the
    /// kernel named first in `data`: an NMI injected or not, register
    /// samples of a silent kernel, L1's run-queue record of an L2's vCPU
    /// threads, an L2's exit. `false` for any other `event`.
    fn about_kernel(&mut self, event: &str, data: &str) -> bool {
        let (kernel, rest) = data.split_once(' ').unwrap_or((data, ""));
        match event {
            "nmi-injected" => self.nmi_injected(kernel),
            "nmi-failed" => self.nmi_failed(kernel, rest),
            // Named with the modules that kernel had loaded.
            "regs" | "regs-failed" => {
                let symbols = self.symbols.clone();
                let n = self.node(kernel);
                if event == "regs-failed" {
                    n.regs_failed = Some(rest.to_string());
                } else if let Some(r) = VcpuRegs::parse(rest, &n.modmap, symbols.as_deref()) {
                    n.regs.push(r);
                }
            }
            "runq" => self.runq_record(kernel, rest),
            "l2-exit" => {
                let mut w = data.split_whitespace();
                let inst = w.next().unwrap_or("").to_string();
                let rc = w
                    .next()
                    .and_then(|r| r.strip_prefix("rc="))
                    .and_then(|r| r.parse().ok());
                self.node(&inst).exit_rc = rc;
            }
            _ => return false,
        }
        true
    }

    /// L1's run-queue record of vCPU `cpu=` of kernel `kernel` (`l2_runq`).
    fn runq_record(&mut self, kernel: &str, rest: &str) {
        let m = kv(rest);
        let num = |k: &str| m.get(k).and_then(|v| v.parse::<f64>().ok());
        let seq = self.seq;
        if let (Some(cpu), Some(waited), Some(within)) = (
            m.get("cpu").and_then(|v| v.parse().ok()),
            num("waited"),
            num("within"),
        ) {
            self.node(kernel).runq.push(RunqWait {
                seq,
                cpu,
                waited,
                within,
            });
        }
    }
}

// What the parser reads into a kernel's `Node`: the parts of its kernel
// output (`Parsed::kernel_text`) and its markers (`Parsed::marker`), one
// family each.
impl Node {
    /// A line of the project's module `module` says its code runs; and
    /// guest_pvlock's lines that open and close a lock-op switch.
    fn project_code_text(&mut self, module: &str, text: &str) {
        if text.contains(&format!("{module}: ")) {
            self.state.project_code = true;
        }
        if module != "guest_pvlock" {
            return;
        }
        if text.contains("guest_pvlock: switching the lock ops") {
            self.state.switching = true;
            self.switches.push(text.to_string());
        } else if [
            "guest_pvlock: installed in",
            "guest_pvlock: uninstalled in",
            "guest_pvlock: not installing: the lock ops cannot be switched",
        ]
        .iter()
        .any(|k| text.contains(k))
        {
            self.state.switching = false;
            self.switches.push(text.to_string());
        }
    }

    /// A register dump's `RIP:` line or a stack frame: where the project's
    /// code shows, and where a backtrace NMI found its CPU (the `RIP:`
    /// line after `NMI backtrace for cpu N`).
    fn rip_or_frame(&mut self, seq: u64, text: &str) {
        if let Some((_, r)) = text.split_once("RIP: ") {
            self.rips.push(text.to_string());
            let f = r.split_once(':').map_or(r, |(_, f)| f).trim();
            if project_frame(f) {
                self.project_frames.push(seq);
            }
            if let Some(cpu) = self.nmi_bt_cpu.take() {
                self.nmi_rips.push((seq, cpu, f.to_string()));
                self.late_answer_at(cpu, f);
            }
        } else if let Some(f) = frame_of(text) {
            if project_frame(f) {
                self.project_frames.push(seq);
            }
        }
    }

    /// CPU `cpu`'s backtrace NMI answer was at function `f`: if it came
    /// late ([`NMI_LATE_SECS`]), record it by where it was.
    fn late_answer_at(&mut self, cpu: u32, f: &str) {
        // Answered late, outside the project's code: that vCPU was not run
        // for as long, like one that never answers. In the project's code,
        // it is evidence only with L1's record of that vCPU (judged in
        // crate::platform).
        let Some((_, at, after, sent_seq)) = self.nmi_late.take().filter(|l| l.0 == cpu) else {
            return;
        };
        if !project_frame(f) {
            self.nmi_silent.push(format!(
                "CPU {cpu} answered the backtrace NMI sent at {at:.1} s only {after:.1} s later, at {f}"
            ));
        } else {
            self.nmi_late_in_project.push(LateNmi {
                sent_seq,
                cpu,
                sent_at: at,
                late: after,
                rip: f.to_string(),
            });
        }
    }

    /// A CPU waiting for another's IPI (`csd: Detected non-responsive CSD
    /// lock`), and a soft lockup report.
    fn ipi_waits_and_lockups(&mut self, seq: u64, text: &str) {
        if let Some(c) = csd_wait_re().captures(text) {
            if let (Ok(w), Ok(t)) = (c[1].parse(), c[2].parse()) {
                self.csd_waits.push((seq, w, t));
            }
        }
        if let Some(c) = soft_lockup_re().captures(text) {
            if let Ok(cpu) = c[1].parse() {
                self.soft_lockups.push((seq, cpu));
            }
        }
    }

    /// A line stamped `t` (kernel time): backtrace NMIs requested 10 s
    /// before and not answered go to `nmi_silent`; a request (`Sending NMI
    /// from CPU 3 to CPUs 2:`) waits for its answer (`NMI backtrace for cpu
    /// 2`), which is late [`NMI_LATE_SECS`] after it.
    fn backtrace_nmis(&mut self, seq: u64, t: f64, text: &str) {
        let (late, pending): (Vec<_>, Vec<_>) = self
            .nmi_pending
            .iter()
            .partition(|&&(_, at, _)| t - at > 10.0);
        for (cpu, at, _) in late {
            self.nmi_silent.push(format!(
                "CPU {cpu} did not answer the backtrace NMI sent at {at:.1} s within 10 s"
            ));
        }
        self.nmi_pending = pending;
        if let Some(c) = nmi_sent_re().captures(text) {
            for cpu in c[1].split(',').filter_map(|c| c.trim().parse().ok()) {
                self.nmi_pending.push((cpu, t, seq));
            }
        } else if let Some(c) = nmi_backtrace_re().captures(text) {
            if let Ok(cpu) = c[1].parse::<u32>() {
                self.nmi_late = self
                    .nmi_pending
                    .iter()
                    .find(|&&(p, at, _)| p == cpu && t - at >= NMI_LATE_SECS)
                    .map(|&(_, at, sent)| (cpu, at, t - at, sent));
                self.nmi_pending.retain(|&(p, _, _)| p != cpu);
                self.nmi_bt_cpu = Some(cpu);
            }
        }
    }

    /// A stack's `<IRQ>` block and the frames in it: an interrupt entry
    /// frame there is an interrupt taken inside a hardirq handler
    /// (`irq_in_irq`), unless softirq processing runs below it.
    fn irq_nesting(&mut self, seq: u64, text: &str) {
        if text.contains("<IRQ>") {
            self.stack = StackState::InIrq;
            self.irq_candidates.clear();
            self.irq_softirq = false;
        } else if text.contains("</IRQ>") || text.contains("<TASK>") || text.contains("<NMI>") {
            if self.stack != StackState::Outside && !self.irq_softirq {
                let found = std::mem::take(&mut self.irq_candidates);
                self.irq_in_irq.extend(found);
            }
            self.irq_candidates.clear();
            self.stack = StackState::Outside;
        } else if self.stack != StackState::Outside {
            if let Some(f) = frame_of(text) {
                if !self.irq_candidates.is_empty() && is_softirq_frame(f) {
                    self.irq_softirq = true;
                }
                if self.stack == StackState::IrqEntry {
                    if is_softirq_frame(f) {
                        self.irq_softirq = true;
                    }
                    self.irq_candidates.push((seq, f.to_string()));
                    self.stack = StackState::InIrq;
                } else if f.starts_with("asm_sysvec_") || f.starts_with("asm_common_interrupt") {
                    self.stack = StackState::IrqEntry;
                }
            }
        }
    }

    /// A line that reports a problem, with where it came and the kernel's
    /// state; and the kernel's first problem report, from its first
    /// problem line on ([`FIRST_REPORT`] lines).
    fn problem_text(&mut self, seq: u64, text: &str) {
        if !text.is_empty() && problem_re().is_match(text) {
            self.problems.push(text.to_string());
            self.problem_at.push((seq, timestamp(text), self.state));
            if self.first_report.is_empty() {
                self.first_report.push(text.to_string());
                return;
            }
        }
        if !self.first_report.is_empty() && self.first_report.len() < FIRST_REPORT {
            self.first_report.push(text.to_string());
        }
    }

    /// `boot`, `cmdline`, `done`: the kernel's init began, its command
    /// line, and the end of its plan.
    fn lifecycle_marker(&mut self, event: &str, data: String) {
        match event {
            "boot" => {
                self.booted = true;
                let m = kv(&data);
                self.boot_uptime = m.get("uptime").and_then(|v| v.parse().ok());
                self.nproc = m.get("nproc").and_then(|v| v.parse().ok());
                self.kernel = m.get("kernel").cloned();
            }
            "cmdline" => self.cmdline = Some(data),
            "done" => {
                self.done = true;
                self.done_uptime = kv(&data).get("uptime").and_then(|v| v.parse().ok());
            }
            _ => {}
        }
    }

    /// `step-begin`, `step-end`, `step-timeout` at console line `seq`: a
    /// step that loads the project's module `module` starts its code.
    fn step_marker(&mut self, event: &str, data: &str, seq: u64, module: &str) {
        match event {
            "step-begin" => {
                let (id, call) = data.split_once(' ').unwrap_or((data, ""));
                if call.starts_with(&format!("load {module}")) || call.starts_with("loadloop") {
                    self.state.project_code = true;
                }
                self.steps.push(StepResult {
                    id: id.to_string(),
                    call: call.to_string(),
                    ..Default::default()
                });
            }
            "step-end" => {
                let (id, rest) = data.split_once(' ').unwrap_or((data, ""));
                let m = kv(rest);
                if let Some(s) = self.steps.iter_mut().rev().find(|s| s.id == id) {
                    s.rc = m.get("rc").and_then(|v| v.parse().ok());
                    s.secs = m.get("secs").and_then(|v| v.parse().ok());
                    s.end_seq = Some(seq);
                }
            }
            "step-timeout" => {
                let id = data.split_whitespace().next().unwrap_or("");
                if let Some(s) = self.steps.iter_mut().rev().find(|s| s.id == id) {
                    s.timed_out = true;
                    s.end_seq.get_or_insert(seq);
                }
            }
            _ => {}
        }
    }

    /// `module` (a load or unload of a module, the project's `module`
    /// among them), `dmesg`, `modmap`, `params`.
    fn module_marker(&mut self, event: &str, data: String, module: &str) {
        match event {
            "module" => {
                // guest_pvlock's code is gone once it is unloaded (or its
                // load failed); L1's KVM keeps host_kvm's state for its
                // guests, so L1 counts as running project code from the
                // first load on.
                if let Some(rest) = data.strip_prefix(&format!("{module} ")) {
                    if rest.starts_with("loaded") {
                        self.state.project_code = true;
                    } else if module == "guest_pvlock"
                        && (rest.starts_with("unloaded") || rest.starts_with("failed"))
                    {
                        self.state.project_code = false;
                        self.state.switching = false;
                    }
                }
                self.modules.push(data)
            }
            "dmesg" => self.dmesg.push(data),
            "modmap" => self.modmap = parse_modmap(&data),
            "params" => {
                let (m, rest) = data.split_once(' ').unwrap_or((&data, ""));
                self.params.insert(m.to_string(), kv(rest));
            }
            _ => {}
        }
    }

    /// `stat` (a module's statistics, JSON), `stat-error`, `info`,
    /// `warnings` (the kernel's count), `hypercalls` (L1's counts per `l2`
    /// step).
    fn stats_marker(&mut self, event: &str, data: String) {
        match event {
            "stat" => match serde_json::from_str(&data) {
                Ok(v) => self.stats.push(v),
                Err(e) => self.stat_errors.push(format!("bad snapshot ({e}): {data}")),
            },
            "stat-error" => self.stat_errors.push(data),
            "info" => {
                self.info = data
                    .split(';')
                    .filter_map(|kv| kv.split_once(": "))
                    .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                    .collect();
            }
            "warnings" => self.warnings = kv(&data).get("count").and_then(|v| v.parse().ok()),
            "hypercalls" => {
                let mut w = data.split_whitespace();
                let step = w.next().unwrap_or("l2").to_string();
                let counts = w
                    .filter_map(|p| p.split_once(':'))
                    .filter_map(|(nr, c)| Some((nr.to_string(), c.parse().ok()?)))
                    .collect();
                self.hypercalls.insert(step, counts);
            }
            _ => {}
        }
    }

    /// The locktorture run that the next `lt` or `locktorture` marker
    /// belongs to: a new one once the last has its `locktorture` line.
    fn open_locktorture(&mut self) -> &mut Locktorture {
        if self.locktorture.last().is_none_or(|l| !l.kind.is_empty()) {
            self.locktorture.push(Locktorture::default());
        }
        self.locktorture.last_mut().expect("pushed above")
    }

    /// `lt`: a line of locktorture's own output (its summary, its verdict).
    fn lt_marker(&mut self, data: &str) {
        let lt = self.open_locktorture();
        if let Some(c) = writes_re().captures(data) {
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

    /// `locktorture`: the guest's record of a run, which ends it.
    fn locktorture_marker(&mut self, data: &str) {
        let lt = self.open_locktorture();
        let m = kv(data);
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
        lt.window = m
            .get("window")
            .and_then(|v| v.parse().ok())
            .filter(|w: &f64| *w > 0.0);
        let secs = lt.window.unwrap_or(lt.secs);
        if let (Some(t), true) = (lt.total, secs > 0.0) {
            lt.per_sec = Some(t as f64 / secs);
        }
        if m.contains_key("error") || data.starts_with("error=") {
            self.errors.push(format!("locktorture: {data}"));
        }
    }

    /// `hackbench`: one run's result, or what went wrong.
    fn hackbench_marker(&mut self, data: &str) {
        let m = kv(data);
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
            self.errors.push(format!("hackbench: {e}"));
        } else if hb.time.is_none() {
            self.errors.push(format!("hackbench: no time in '{data}'"));
        }
        self.hackbench.push(hb);
    }

    /// `stressng`: one run's result, or what went wrong.
    fn stressng_marker(&mut self, data: &str) {
        let m = kv(data);
        let num = |k: &str| m.get(k).and_then(|v| v.parse().ok());
        let error = data.split_once("error=").map(|(_, e)| e.to_string());
        let sn = StressNg {
            stressors: m
                .get("stressors")
                .map(|v| v.split(',').map(str::to_string).collect())
                .unwrap_or_default(),
            instances: num("instances").unwrap_or(0),
            duration: num("duration").unwrap_or(0),
            ops_per_sec: if error.is_none() {
                m.get("ops_per_sec").and_then(|v| v.parse().ok())
            } else {
                None
            },
            rates: m
                .get("rates")
                .map(|v| {
                    v.split(',')
                        .filter_map(|p| p.split_once(':'))
                        .filter_map(|(k, r)| Some((k.to_string(), r.parse().ok()?)))
                        .collect()
                })
                .unwrap_or_default(),
            rc: m.get("rc").and_then(|v| v.parse().ok()),
            secs: m.get("secs").and_then(|v| v.parse().ok()),
            timed_out: error.as_deref() == Some("timeout"),
            error,
        };
        if let Some(e) = &sn.error {
            self.errors.push(format!("stressng: {e}"));
        } else if sn.ops_per_sec.is_none() {
            self.errors.push(format!("stressng: no rate in '{data}'"));
        }
        self.stressng.push(sn);
    }

    /// `mmbench`: one run's result, or what went wrong.
    fn mmbench_marker(&mut self, data: &str) {
        let m = kv(data);
        let num = |k: &str| m.get(k).and_then(|v| v.parse().ok());
        let error = data.split_once("error=").map(|(_, e)| e.to_string());
        let mb = MmBench {
            threads: num("threads").unwrap_or(0),
            chunk_kib: num("chunk_kib").unwrap_or(0),
            ops: if error.is_none() { num("ops") } else { None },
            secs: m.get("secs").and_then(|v| v.parse().ok()),
            error,
        };
        if let Some(e) = &mb.error {
            self.errors.push(format!("mmbench: {e}"));
        } else if mb.per_sec().is_none() {
            self.errors.push(format!("mmbench: no count in '{data}'"));
        }
        self.mmbench.push(mb);
    }

    /// `loadloop`, `cpus`, `hotplug`: results of the steps that load the
    /// module in a loop, bring CPUs online, and take them off and on.
    fn cpus_marker(&mut self, event: &str, data: &str) {
        match event {
            "loadloop" => self.loadloops.push(kv(data)),
            "cpus" => self.cpus.push(kv(data)),
            "hotplug" => self.hotplug.push(kv(data)),
            _ => {}
        }
    }

    /// `barrier-passed`, `barrier-error`, `await`, `await-error`: the
    /// steps that wait for the other guests or for a lock's state.
    fn sync_marker(&mut self, event: &str, data: &str) {
        match event {
            "barrier-passed" => {
                let mut m = kv(data);
                if let Some(name) = data.split_whitespace().next() {
                    m.insert("name".into(), name.into());
                }
                self.barriers.push(m);
            }
            // A guest that never reached the barrier, or no port to wait on:
            // the guests' measurements did not start together.
            "barrier-error" => self.errors.push(format!("barrier: {data}")),
            "await" => self.awaits.push(kv(data)),
            // The lock did not reach the state in time.
            "await-error" => self.errors.push(format!("await_lock: {data}")),
            _ => {}
        }
    }

    /// `kvmtest` (pvlock-kvmtest's output, its `@@KVMTEST` lines by
    /// case), `out` (a program's output), `error`, `l2-shutdown-exit`
    /// (L1's trace of a guest's triple fault).
    fn output_marker(&mut self, event: &str, data: String) {
        match event {
            "kvmtest" => {
                if let Some(rest) = data.strip_prefix("@@KVMTEST ") {
                    let m = kv(rest);
                    if let Some(case) = m.get("case") {
                        self.kvmtest_cases.insert(case.clone(), m);
                    } else if rest.starts_with("summary") {
                        self.kvmtest_cases.insert("summary".into(), m);
                    }
                }
                self.kvmtest.push(data);
            }
            "out" => self.out.push(data),
            "error" => self.errors.push(data),
            "l2-shutdown-exit" => self.shutdown_exits.push(data),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A parser that has read `lines`, in order.
    fn parse<'a>(lines: impl IntoIterator<Item = &'a str>) -> Parsed {
        let mut p = Parsed::default();
        for l in lines {
            p.line(l);
        }
        p
    }

    #[test]
    fn a_failure_shows_the_first_report_condensed() {
        let p = parse([
            "[   49.000000] kvm: something ordinary",
            "[   49.096163] BUG: scheduling while atomic: qemu-system-x86/94/0x11000001",
            "[   49.096200] Modules linked in:",
            "[   49.096300] CPU: 1 UID: 0 PID: 94 Comm: qemu-system-x86 Not tainted 7.3.4 #1",
            "[   49.096400] Call Trace:",
            "[   49.096410]  <TASK>",
            "[   49.096420]  dump_stack_lvl+0x4b/0x70",
            "[   49.096430]  ? __schedule+0x72e/0x910",
            "[   49.096440]  __x64_sys_ioctl+0x6ea/0x780",
            "[   49.096445]  kvm_hc_wait+0x10/0x80 [host_kvm]",
            "[   49.096450]  </TASK>",
            "[   50.000000] BUG: a second report, not the first",
        ]);
        let r = condensed_report(&p.nodes["l1"].first_report);
        assert_eq!(
            r,
            [
                "[   49.096163] BUG: scheduling while atomic: qemu-system-x86/94/0x11000001",
                "[   49.096300] CPU: 1 UID: 0 PID: 94 Comm: qemu-system-x86 Not tainted 7.3.4 #1",
                "stack: dump_stack_lvl+0x4b < ?__schedule+0x72e < __x64_sys_ioctl+0x6ea < kvm_hc_wait+0x10 [host_kvm]",
            ]
        );
        // A module's frame is the project's when the module is.
        assert_eq!(p.nodes["l1"].project_frames.len(), 1);
        assert!(condensed_report(&[]).is_empty());
    }

    #[test]
    fn a_result_reads_back_into_the_same_types() {
        // pvlock-bench reads vmtest's result JSON with these types: what
        // one writes, the other must read back unchanged.
        let p = parse([
            "[g-1] @@PV L2.g-1 boot uptime=1.5 nproc=2",
            "[g-1] @@PV L2.g-1 step-begin lt1 locktorture",
            "[g-1] @@PV L2.g-1 locktorture type=spin_lock writers=4 secs=8.34 window=6.92 total=1237595 max=396703 min=264342 fail=0 verdict=SUCCESS",
            "[g-1] @@PV L2.g-1 step-end lt1 rc=0 secs=9.00",
            "[g-1] @@PV L2.g-1 hackbench groups=2 loops=30 time=1.25 rc=0 secs=2.0",
            "[g-1] @@PV L2.g-1 kvmtest @@KVMTEST case=cap_and_cpuid result=PASS",
            "[g-1] @@PV L2.g-1 done rc=0 uptime=12.0",
        ]);
        let json = serde_json::to_value(&p.nodes).unwrap();
        let back: BTreeMap<String, Node> = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), json);
        let g = &back["g-1"];
        assert!(g.booted && g.done);
        assert_eq!(g.locktorture[0].total, Some(1237595));
        assert_eq!(g.steps.len(), 1);
    }

    #[test]
    fn writes_per_second_over_the_writers_window() {
        // The guest reports the writers' window (kernel clock): the rate is
        // taken over it, not over the load-to-unload seconds.
        let p = parse([
            "[g-1] @@PV L2.g-1 lt [   22.167655] Writes:  Total: 1237595  Max/Min: 396703/264342   Fail: 0",
            "[g-1] @@PV L2.g-1 locktorture type=spin_lock writers=4 secs=8.34 window=6.92 total=1237595 max=396703 min=264342 fail=0 verdict=SUCCESS",
            "[g-1] @@PV L2.g-1 locktorture type=spin_lock writers=4 secs=8.00 total=800 fail=0 verdict=SUCCESS",
            "[g-1] @@PV L2.g-1 locktorture type=spin_lock writers=4 secs=8.00 window=0.00 total=800 fail=0 verdict=SUCCESS",
        ]);
        let lts = &p.nodes["g-1"].locktorture;
        assert_eq!(lts[0].window, Some(6.92));
        assert_eq!(lts[0].secs, 8.34);
        assert!(lts[0]
            .per_sec
            .is_some_and(|r| (r - 1237595.0 / 6.92).abs() < 1.0));
        // Without a window (an older guest), or with a useless one, the
        // load-to-unload seconds.
        for lt in &lts[1..] {
            assert_eq!(lt.window, None);
            assert_eq!(lt.per_sec, Some(100.0));
        }
    }

    #[test]
    fn summary_line_stands_in_for_split_lt_lines() {
        // The kernel's own "End of test" line landed inside the guest's
        // echo of the Writes line.
        let p = parse([
            "[g-1] @@PV L2.g-1 step-begin lt1 locktorture spin_lock 8 60",
            "[g-1] [   72.332591] Writes:  Total: 26284561  Max/Min: 3920091/2097268   Fail: 0 ",
            "[g-1] @@PV L2.g-1 lt [[   72.332814] spin_lock-torture:--- End of test: SUCCESS: acq_writer_lim=0",
            "[g-1]    72.332591] Writes:  Total: 26284561  Max/Min: 3920091/2097268   Fail: 0",
            "[g-1] @@PV L2.g-1 lt [   72.332814] spin_lock-torture:--- End of test: SUCCESS: acq_writer_lim=0",
            "[g-1] @@PV L2.g-1 locktorture type=spin_lock writers=8 secs=61.46 total=26284561 max=3920091 min=2097268 fail=0 verdict=SUCCESS",
        ]);
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
    fn stat_line_cut_by_a_kernel_message_is_joined() {
        // The L2's power-off message landed inside its pvlock-stat line,
        // whose rest came on the next line; unjoined, a check finds no
        // statistics.
        let p = parse([
            r#"[g-1] @@PV L2.g-1 stat {"dirs":{"guest":{"counters":{"mode_changes":1},"histograms":{"histo_blocked":{"unit":"ns","buckets":[0[   52.561346] ACPI: PM: Preparing to enter system sleep state S5"#,
            "[g-1] ,0,6,20]}}}}}",
            "[g-1] @@PV L2.g-1 step-end stat6 rc=0 secs=0.25",
        ]);
        let g = &p.nodes["g-1"];
        assert!(g.stat_errors.is_empty(), "{:?}", g.stat_errors);
        assert_eq!(g.stats.len(), 1);
        let guest = &g.stats[0].dirs["guest"];
        assert_eq!(guest.counters["mode_changes"], 1);
        assert_eq!(guest.histograms["histo_blocked"].buckets[3], 20);
        // A kernel problem in the cut is still seen.
        let mut q = Parsed::default();
        q.line(r#"[g-1] @@PV L2.g-1 stat {"dirs":{"guest":{"counters":{"kicks":1,[   9.000001] BUG: soft lockup - CPU#1 stuck for 22s!"#);
        q.line(r#"[g-1] "halts_head":2}}}}"#);
        assert_eq!(
            q.nodes["g-1"].stats[0].dirs["guest"].counters["halts_head"],
            2
        );
        assert_eq!(q.nodes["g-1"].problems.len(), 1);
        // A cut line whose rest never comes is bad JSON, as before.
        let mut r = Parsed::default();
        r.line(r#"[g-1] @@PV L2.g-1 stat {"dirs":{"guest":{"counters":{"kicks":1,[   9.000001] ACPI: PM: x"#);
        r.line("[g-1] @@PV L2.g-1 step-end stat6 rc=0 secs=0.25");
        assert!(r.nodes["g-1"].stats.is_empty());
        assert_eq!(r.nodes["g-1"].stat_errors.len(), 1);
        // Whole JSON is never cut, whatever it quotes.
        let mut w = Parsed::default();
        w.line(r#"[g-1] @@PV L2.g-1 stat {"debugfs":"[   9.000001] x"}"#);
        assert_eq!(w.nodes["g-1"].stats.len(), 1);
        // Not a pvlock-stat snapshot: an error, not a result.
        let mut x = Parsed::default();
        x.line(r#"[g-1] @@PV L2.g-1 stat {"dirs":{"guest":{"countrs":{}}}}"#);
        assert!(x.nodes["g-1"].stats.is_empty());
        assert_eq!(x.nodes["g-1"].stat_errors.len(), 1);
    }

    #[test]
    fn any_marker_cut_by_a_kernel_message_is_joined() {
        // A locktorture message landed inside the hotplug marker;
        // unjoined, a check finds no rounds.
        let p = parse([
            "[g-1] @@PV L2.g-1 hotp[   20.195176] torture_spin_lock_write_delay: delay = 27 jiffies.",
            "[g-1] lug rounds=6 ok=6 busy=10 online=4",
            "[g-1] @@PV L2.g-1 step-end hotplug rc=0 secs=11.96",
        ]);
        let g = &p.nodes["g-1"];
        assert_eq!(g.hotplug.len(), 1);
        assert_eq!(g.hotplug[0]["rounds"], "6");
        assert_eq!(g.hotplug[0]["online"], "4");
        // The power-down lines cut a done marker three times, the name
        // included.
        let q = parse([
            "[hostkvm-1] @@PV L2.host[   24.583591] ACPI: PM: Preparing to enter system sleep state S5",
            "[hostkvm-1] kvm-1 done rc=0 [   24.610908] reboot: Power down",
            "[hostkvm-1] uptime=24.27",
        ]);
        let h = &q.nodes["hostkvm-1"];
        assert!(h.done);
        assert_eq!(h.done_uptime, Some(24.27));
        // A kernel problem in the cut is still seen.
        let mut r = Parsed::default();
        r.line(
            "[g-1] @@PV L2.g-1 hotplug rou[   9.000001] BUG: soft lockup - CPU#1 stuck for 22s!",
        );
        r.line("[g-1] nds=6 ok=6 busy=0 online=4");
        assert_eq!(r.nodes["g-1"].hotplug[0]["rounds"], "6");
        assert_eq!(r.nodes["g-1"].problems.len(), 1);
        // A quoted kernel line is no cut, nor is a program's output; a
        // quoted line cut in its middle is.
        let w = parse([
            "[g-1] @@PV L2.g-1 dmesg [    3.810014] guest_pvlock: lock ops: upstream-pv",
            "[g-1] @@PV L2.g-1 out [    1.000000] x",
            "[g-1] @@PV L2.g-1 dmesg [    3.900000] guest_pvlock: inst[    3.950000] smpboot: CPU 2 is now offline",
            "[g-1] alled",
        ]);
        let g = &w.nodes["g-1"];
        assert_eq!(
            g.dmesg,
            [
                "[    3.810014] guest_pvlock: lock ops: upstream-pv",
                "[    3.900000] guest_pvlock: installed"
            ]
        );
        assert!(g.hotplug.is_empty() && g.pending_marker.is_none());
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
        let p = parse(CONSOLE.lines());
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
        assert_eq!(g.stats[0].dirs["guest"].counters["kicks"], 41);
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
    fn parses_awaits() {
        let mut p = Parsed::default();
        p.line("[g-1] @@PV L2.g-1 await state=native secs=3.20");
        p.line("[g-1] @@PV L2.g-1 await-error state=pvlock timeout=30 now=native");
        let g = &p.nodes["g-1"];
        assert_eq!(g.awaits.len(), 1);
        assert_eq!(g.awaits[0]["state"], "native");
        assert_eq!(g.awaits[0]["secs"], "3.20");
        assert_eq!(
            g.errors,
            vec!["await_lock: state=pvlock timeout=30 now=native".to_string()]
        );
    }

    #[test]
    fn parses_barriers() {
        let mut p = Parsed::default();
        p.line("[g-1] @@PV L2.g-1 barrier contended");
        p.line("[g-1] @@PV L2.g-1 barrier-passed contended waited=12.40");
        p.line("[g-1] @@PV L2.g-1 barrier hackbench");
        p.line("[g-1] @@PV L2.g-1 barrier-error hackbench timeout=120");
        let g = &p.nodes["g-1"];
        assert_eq!(g.barriers.len(), 1);
        assert_eq!(g.barriers[0]["name"], "contended");
        assert_eq!(g.barriers[0]["waited"], "12.40");
        assert_eq!(g.errors, vec!["barrier: hackbench timeout=120".to_string()]);
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
    fn parses_stressng() {
        let mut p = Parsed::default();
        p.line("[g-1] @@PV L2.g-1 stressng stressors=futex,sigq,eventfd instances=4 duration=10 rc=0 secs=10.62 ops_per_sec=28727.5 rates=futex:17817.95,sigq:174394.24,eventfd:7727.23");
        p.line("[g-1] @@PV L2.g-1 stressng stressors=futex,sigq,eventfd instances=4 duration=10 rc=124 secs=55.01 error=timeout");
        p.line("[g-1] @@PV L2.g-1 stressng stressors=futex instances=2 duration=5 rc=1 secs=0.30 error=[stress-ng: error: [42] futex: not implemented ]");
        let g = &p.nodes["g-1"];
        assert_eq!(g.stressng.len(), 3);
        let ok = &g.stressng[0];
        assert_eq!(ok.stressors, ["futex", "sigq", "eventfd"]);
        assert_eq!((ok.instances, ok.duration, ok.rc), (4, 10, Some(0)));
        assert_eq!(ok.ops_per_sec, Some(28727.5));
        assert_eq!(ok.rates["sigq"], 174394.24);
        assert_eq!(ok.rates.len(), 3);
        assert_eq!(ok.secs, Some(10.62));
        assert!(!ok.timed_out && ok.error.is_none());
        assert!(g.stressng[1].timed_out);
        assert_eq!(g.stressng[1].ops_per_sec, None);
        assert!(!g.stressng[2].timed_out);
        assert_eq!(
            g.stressng[2].error.as_deref(),
            Some("[stress-ng: error: [42] futex: not implemented ]")
        );
        assert_eq!(g.errors.len(), 2);
        assert!(g.errors[0].contains("timeout"));
    }

    #[test]
    fn parses_mmbench() {
        let mut p = Parsed::default();
        p.line("[g-1] @@PV L2.g-1 mmbench rc=0 ops=12000 secs=10.000 threads=8 chunk_kib=256");
        p.line("[g-1] @@PV L2.g-1 mmbench threads=8 secs=10 rc=2 error=[pvlock-mmbench: mmap: Cannot allocate memory]");
        let g = &p.nodes["g-1"];
        assert_eq!(g.mmbench.len(), 2);
        assert_eq!(g.mmbench[0].per_sec(), Some(1200.0));
        assert_eq!((g.mmbench[0].threads, g.mmbench[0].chunk_kib), (8, 256));
        assert_eq!(g.mmbench[1].per_sec(), None);
        assert_eq!(g.errors.len(), 1);
        assert!(g.errors[0].contains("Cannot allocate"));
    }

    #[test]
    fn tracks_project_code_and_lock_op_switches() {
        let mut p = Parsed::default();
        p.line("@@PV L1.l1 boot uptime=1.36 nproc=2 kernel=7.3.4");
        p.line("[g-1] @@PV L2.g-1 boot uptime=4.72 nproc=1 kernel=7.3.4");
        assert!(!p.nodes["g-1"].state.project_code);
        p.line("[g-1] @@PV L2.g-1 step-begin load1 load guest_pvlock");
        assert!(p.nodes["g-1"].state.project_code && !p.nodes["l1"].state.project_code);
        p.line("[g-1] [    5.102002] guest_pvlock: switching the lock ops to pvlock");
        assert!(p.nodes["g-1"].state.switching);
        p.line("[g-1] [    5.120000] BUG: scheduling while atomic: insmod/97/0x00000002");
        p.line("[g-1] [    5.131977] guest_pvlock: installed in 29 ms (was upstream-pv): mode kvm_hc_pvlock_wait, spin threshold 0; 0 waiters moved from the bridge");
        let g = &p.nodes["g-1"];
        assert!(!g.state.switching && g.switches.len() == 2);
        let during = CodeState {
            project_code: true,
            switching: true,
        };
        assert_eq!(g.problem_at[0].1, Some(5.12));
        assert_eq!(g.problem_at[0].2, during);
        // The guest library's copies of the lines (markers) are no switch.
        p.line(
            "[g-1] @@PV L2.g-1 dmesg [    5.102002] guest_pvlock: switching the lock ops to pvlock",
        );
        assert!(!p.nodes["g-1"].state.switching);
        p.line("[g-1] @@PV L2.g-1 step-begin unload2 unload guest_pvlock");
        p.line("[g-1] [    9.1] guest_pvlock: switching the lock ops back");
        assert!(p.nodes["g-1"].state.switching);
        p.line("[g-1] [    9.2] guest_pvlock: uninstalled in 3 ms, lock ops: upstream-pv (mode kvm_hc_pvlock_wait, slow acquisitions 12, kicks 9); 0 waiters moved from the bridge");
        p.line("[g-1] @@PV L2.g-1 module guest_pvlock unloaded");
        assert_eq!(p.nodes["g-1"].state, CodeState::default());
        // A failed load leaves no project code; a load from a script does.
        p.line("[g-1] @@PV L2.g-1 step-begin load3 load guest_pvlock spin_threshold=-1");
        p.line("[g-1] @@PV L2.g-1 module guest_pvlock failed params=[spin_threshold=-1] error=[x]");
        assert!(!p.nodes["g-1"].state.project_code);
        p.line("[g-1] [   12.0] guest_pvlock: KVM features 0x1000ffb: pv_unhalt=1 pvlock_kick=1 steal_time=1; lock ops: upstream-pv");
        assert!(p.nodes["g-1"].state.project_code);
        // L1 runs project code from host_kvm's load on.
        p.line("@@PV L1.l1 module host_kvm loaded params=[force=1]");
        p.line("@@PV L1.l1 module host_kvm unloaded");
        assert!(p.nodes["l1"].state.project_code);
        // Errors and step ends know where they came.
        p.line("[g-1] @@PV L2.g-1 error cpu 3 did not come online");
        p.line("[g-1] @@PV L2.g-1 step-end load3 rc=1 secs=0.2");
        let g = &p.nodes["g-1"];
        assert_eq!(g.error_seqs, [p.seq - 1]);
        assert_eq!(g.steps.last().unwrap().end_seq, Some(p.seq));
    }

    #[test]
    fn nmi_probes() {
        let mut p = Parsed::default();
        p.line("@@PV L1.l1 boot uptime=1.36 nproc=2 kernel=7.3.4");
        p.line("[g-1] @@PV L2.g-1 boot uptime=4.72 nproc=4 kernel=7.3.4");
        p.line("@@PV L1.l1 nmi-injected g-1");
        p.line("[g-1] [   61.123456] Uhhuh. NMI received for unknown reason 3c on CPU 0.");
        p.line("[g-1] [   61.123460] Dazed and confused, but trying to continue");
        p.line("[g-1] [   61.123470] Uhhuh. NMI received for unknown reason 00 on CPU 2.");
        // L1's marker about the guest and QEMU's message are not its own.
        p.line("[g-1] qemu-system-x86_64: terminating on signal 15 from pid 211 (timeout)");
        p.line("[g-1] @@PV L1.l1 l2-exit g-1 rc=124");
        let g = &p.nodes["g-1"];
        assert_eq!(g.nmi.injected, 1);
        assert_eq!(g.nmi.answered.iter().copied().collect::<Vec<_>>(), [0, 2]);
        assert!(g.nmi.silent_after_last && g.nmi.resumed.is_none());
        assert!(g.problems.is_empty());
        let v = serde_json::to_value(g).unwrap();
        assert_eq!(v["nmi"]["answered"], serde_json::json!([0, 2]));
        // A stall report is no sign that it runs on: a stuck kernel prints
        // those too. Any other line of its own is. Only the first counts.
        p.line("[g-1] [   62.000001] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:");
        p.line("[g-1] [   62.000002] rcu: \t0-...!: (1 GPs behind) idle=691c/0/0x3 softirq=1702/1703 fqs=43");
        p.line("[g-1] [   62.000003]  ? handle_softirqs+0x80/0x2a0");
        assert!(p.nodes["g-1"].nmi.silent_after_last);
        p.line("[g-1] [   63.000001] spin_lock-torture: Stopping lock_torture_writer task");
        p.line("@@PV L1.l1 nmi-injected g-1");
        assert!(p.nodes["g-1"].nmi.answered.is_empty());
        p.heartbeat("g-1");
        let g = &p.nodes["g-1"];
        assert_eq!((g.nmi.injected, g.nmi.silent_after_last), (2, false));
        assert!(g
            .nmi
            .resumed
            .as_deref()
            .unwrap()
            .contains("Stopping lock_torture_writer"));
        // The harness's probe of L1: no node of its own; L1 runs on when
        // anything comes through it.
        p.line("@@PV L0.vmtest nmi-injected l1");
        p.line("[  120.5] Uhhuh. NMI received for unknown reason 3c on CPU 1.");
        assert!(!p.nodes.contains_key("vmtest"));
        assert!(p.nodes["l1"].nmi.silent_after_last);
        p.line("[g-1] @@PV L2.g-1 step-begin x sleep 1");
        assert!(p.nodes["l1"]
            .nmi
            .resumed
            .as_deref()
            .unwrap()
            .starts_with("[g-1] "));
        p.line("@@PV L0.vmtest nmi-failed l1 cannot connect to QMP at build/x/qmp.sock");
        assert_eq!(
            p.nodes["l1"].nmi.failed.as_deref(),
            Some("cannot connect to QMP at build/x/qmp.sock")
        );
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

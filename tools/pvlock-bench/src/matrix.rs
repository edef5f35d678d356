// SPDX-License-Identifier: GPL-2.0

//! The benchmark matrix (overcommit x lock mode x workload), the settings
//! that size it, and the runs that measure it: one vmtest scenario (one L1
//! boot) per overcommit level and repetition, booting one L2 (or two, for
//! "two guests") per lock mode in turn, in an order that rotates from one
//! repetition to the next.
//!
//! guest_pvlock follows the host's load by default ("adaptive"): while
//! host_kvm advises that the guest's vCPUs have CPUs to themselves it
//! parks its lock and the native queued spinlock runs. pvlock-kickcpu and
//! pvlock-hostkvm measure that lock as it ships; pvlock-static measures
//! pvlock held installed (`adaptive=0`), where the two should not differ.
//!
//! guest_pvlock also registers each CPU's preemption count with host_kvm
//! (the critical-section hint, `hint=1` by default), and host_kvm lets a
//! lock holder run on a little instead of preempting it. pvlock-nohint
//! measures the same lock with `hint=2`: the host only counts the lock
//! holders it preempts and defers none. L1 takes a statistics snapshot of
//! host_kvm after each mode's guests, so that its `holder_preemptions` and
//! `grants` are known per mode.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;
use vmtest::scenario::Scenario;

/// How many L2 vCPUs run on L1's two vCPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Overcommit {
    /// One L2 with 2 vCPUs.
    #[serde(rename = "1x")]
    X1,
    /// One L2 with 4 vCPUs.
    #[serde(rename = "2x")]
    X2,
    /// One L2 with 6 vCPUs.
    #[serde(rename = "3x")]
    X3,
    /// Two L2 with 2 vCPUs each, at the same time.
    #[serde(rename = "two-guests")]
    Two,
}

impl Overcommit {
    /// Every level, in the order of the tables and of the runs.
    pub const ALL: [Overcommit; 4] = [
        Overcommit::X1,
        Overcommit::X2,
        Overcommit::X3,
        Overcommit::Two,
    ];

    /// The name in cell ids and tables (`1x`, ..., `two-guests`).
    pub fn label(self) -> &'static str {
        match self {
            Overcommit::X1 => "1x",
            Overcommit::X2 => "2x",
            Overcommit::X3 => "3x",
            Overcommit::Two => "two-guests",
        }
    }

    /// For scenario names.
    pub fn key(self) -> &'static str {
        match self {
            Overcommit::X1 => "1x",
            Overcommit::X2 => "2x",
            Overcommit::X3 => "3x",
            Overcommit::Two => "two",
        }
    }

    /// L2 guests booted at once.
    pub fn guests(self) -> u32 {
        if self == Overcommit::Two {
            2
        } else {
            1
        }
    }

    /// vCPUs of each L2.
    pub fn vcpus(self) -> u32 {
        match self {
            Overcommit::X1 | Overcommit::Two => 2,
            Overcommit::X2 => 4,
            Overcommit::X3 => 6,
        }
    }

    /// L2 vCPUs per L1 vCPU (L1 has two).
    pub fn factor(self) -> u32 {
        self.guests() * self.vcpus() / 2
    }
}

/// The spinlock an L2 runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Mode {
    /// `nopvspin`: the native qspinlock.
    #[serde(rename = "native")]
    Native,
    /// `nopvspin` on one L2 with 2 vCPUs, alone, in the L1 boot of an
    /// overcommit level (2x, 3x, two guests): the same work per vCPU as
    /// the overcommitted guests' without the overcommit, the denominator
    /// of the limit ratio (for two guests, their writes summed).
    #[serde(rename = "native-2vcpu")]
    NativeTwo,
    /// Upstream PV spinlocks (KVM_HC_KICK_CPU), as the kernel boots.
    #[serde(rename = "upstream-pv")]
    Upstream,
    /// guest_pvlock with `kick=1`: HLT and KVM_HC_KICK_CPU, as on a stock
    /// host, even though L1 runs host_kvm.
    #[serde(rename = "pvlock-kickcpu")]
    KickCpu,
    /// guest_pvlock with host_kvm in L1: the project's lock wait and kick
    /// hypercalls; adaptive (as it loads by default): the native lock
    /// while the host advises that the vCPUs have CPUs to themselves.
    #[serde(rename = "pvlock-hostkvm")]
    HostKvm,
    /// guest_pvlock with `adaptive=0` and host_kvm in L1: pvlock-hostkvm's
    /// lock held installed whatever the host advises (the lock before it
    /// followed the host's load). Measured only where the adaptive lock
    /// should stay on pvlock (contended, under overcommit), to show that
    /// following the host costs nothing there.
    #[serde(rename = "pvlock-static")]
    Static,
    /// guest_pvlock with `hint=2` and host_kvm in L1: pvlock-hostkvm's
    /// lock (adaptive, the project's lock wait) whose critical-section
    /// hint the host only observes: it counts the reschedules of a vCPU
    /// that holds a lock and defers none. Measured where pvlock-static is,
    /// to show what the hint gains (pvlock-hostkvm / pvlock-nohint).
    #[serde(rename = "pvlock-nohint")]
    NoHint,
}

impl Mode {
    /// Every mode, in the canonical order: repetition 1 runs an L1 boot's
    /// modes in this order, repetition r rotates it left by r-1 (see
    /// [`plan`]).
    pub const ALL: [Mode; 7] = [
        Mode::Native,
        Mode::NativeTwo,
        Mode::Upstream,
        Mode::KickCpu,
        Mode::HostKvm,
        Mode::Static,
        Mode::NoHint,
    ];
    /// The modes measured in every cell of the full matrix
    /// (native-2vcpu is only the limit ratio's cell, pvlock-static only
    /// the adaptive / static ratio's, pvlock-nohint only the hint on /
    /// off ratio's).
    pub const MAIN: [Mode; 4] = [Mode::Native, Mode::Upstream, Mode::KickCpu, Mode::HostKvm];
    /// The project's modes as they ship (adaptive), the ones the goals
    /// against native and upstream are about.
    pub const PVLOCK: [Mode; 2] = [Mode::KickCpu, Mode::HostKvm];
    /// What pvlock is compared with, in the order of the tables.
    pub const BASES: [Mode; 3] = [Mode::Native, Mode::Upstream, Mode::NativeTwo];
    /// Every ratio the tables show and the goals use, as (numerator,
    /// denominator), in the order of the tables' columns: each of
    /// [`Mode::PVLOCK`] against each of [`Mode::BASES`], then the adaptive
    /// lock against the static one (`hostkvm / static`, where both run),
    /// then the lock with the critical-section hint against the one
    /// without (`hostkvm / nohint`).
    pub const RATIOS: [(Mode, Mode); 8] = [
        (Mode::KickCpu, Mode::Native),
        (Mode::KickCpu, Mode::Upstream),
        (Mode::KickCpu, Mode::NativeTwo),
        (Mode::HostKvm, Mode::Native),
        (Mode::HostKvm, Mode::Upstream),
        (Mode::HostKvm, Mode::NativeTwo),
        (Mode::HostKvm, Mode::Static),
        (Mode::HostKvm, Mode::NoHint),
    ];

    /// The name in cell ids, tables and `results.json`.
    pub fn label(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::NativeTwo => "native-2vcpu",
            Mode::Upstream => "upstream-pv",
            Mode::KickCpu => "pvlock-kickcpu",
            Mode::HostKvm => "pvlock-hostkvm",
            Mode::Static => "pvlock-static",
            Mode::NoHint => "pvlock-nohint",
        }
    }

    /// The L2 group name (alphanumeric); instances are `<group>-<i>`.
    pub fn group(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::NativeTwo => "nativetwo",
            Mode::Upstream => "upstream",
            Mode::KickCpu => "kickcpu",
            Mode::HostKvm => "hostkvm",
            Mode::Static => "static",
            Mode::NoHint => "nohint",
        }
    }

    /// The name in ratio and column headings (`hostkvm / upstream`).
    pub fn short(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::NativeTwo => "native-2vcpu",
            Mode::Upstream => "upstream",
            Mode::KickCpu => "kickcpu",
            Mode::HostKvm => "hostkvm",
            Mode::Static => "static",
            Mode::NoHint => "nohint",
        }
    }

    /// Booted with `nopvspin`.
    pub fn is_native(self) -> bool {
        matches!(self, Mode::Native | Mode::NativeTwo)
    }

    /// The native lock on an overcommitted guest: the mode whose runs are
    /// kept short and bounded generously, and whose stall during the
    /// contended workload is a result (not the platform's).
    pub fn crawls_under_overcommit(self) -> bool {
        self == Mode::Native
    }

    /// At overcommit `oc` this mode's guest may stall by itself: the
    /// native lock on an overcommitted guest. Its stall is a result.
    pub fn stalls_at(self, oc: Overcommit) -> bool {
        self.crawls_under_overcommit() && oc != Overcommit::X1
    }

    /// The guest loads guest_pvlock.
    pub fn loads_guest_pvlock(self) -> bool {
        matches!(
            self,
            Mode::KickCpu | Mode::HostKvm | Mode::Static | Mode::NoHint
        )
    }

    /// The guest's `load` step arguments: guest_pvlock and its parameters
    /// (`kick=1` forces HLT and KVM_HC_KICK_CPU although L1 offers the
    /// project's hypercalls; `adaptive=0` keeps pvlock installed whatever
    /// the host advises; `hint=2` lets the host count the lock holders it
    /// preempts but defer none); empty if it loads nothing.
    pub fn guest_pvlock_args(self) -> &'static [&'static str] {
        match self {
            Mode::KickCpu => &["guest_pvlock", "kick=1", "hint=0"],
            Mode::HostKvm => &["guest_pvlock"],
            Mode::Static => &["guest_pvlock", "adaptive=0"],
            Mode::NoHint => &["guest_pvlock", "hint=2"],
            _ => &[],
        }
    }

    /// guest_pvlock follows the host's advice in this mode (it may run
    /// the native lock): the modes that load it as it ships, and
    /// pvlock-nohint (adaptive as it ships, only the hint differs).
    pub fn is_adaptive(self) -> bool {
        matches!(self, Mode::KickCpu | Mode::HostKvm | Mode::NoHint)
    }

    /// vCPUs of each of this mode's guests at overcommit `oc`.
    pub fn vcpus(self, oc: Overcommit) -> u32 {
        if self == Mode::NativeTwo {
            2
        } else {
            oc.vcpus()
        }
    }

    /// This mode's guests booted at once at overcommit `oc`.
    pub fn guests(self, oc: Overcommit) -> u32 {
        if self == Mode::NativeTwo {
            1
        } else {
            oc.guests()
        }
    }
}

/// The stress-ng stressors of the `stress-ng` workload, as the guest step
/// takes them (see `Documentation/pvlock/benchmark.rst` for why these).
pub const STRESSNG_STRESSORS: &str = "futex,sigq,eventfd";

/// What the L2 runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Workload {
    /// locktorture spin_lock, 2 writers per vCPU.
    #[serde(rename = "contended")]
    Contended,
    /// locktorture spin_lock, 1 writer.
    #[serde(rename = "uncontended")]
    Uncontended,
    /// rt-tests hackbench (process mode, sockets).
    #[serde(rename = "hackbench")]
    Hackbench,
    /// stress-ng's futex, sigq and eventfd stressors, one instance of each
    /// per vCPU.
    #[serde(rename = "stress-ng")]
    StressNg,
}

impl Workload {
    /// Every workload, in the order of the tables.
    pub const ALL: [Workload; 4] = [
        Workload::Contended,
        Workload::Uncontended,
        Workload::Hackbench,
        Workload::StressNg,
    ];
    /// The order inside an L2: the workload most likely to hit its bound
    /// (contended, for native) last, so that it cannot spoil the others.
    pub const RUN_ORDER: [Workload; 4] = [
        Workload::Uncontended,
        Workload::Hackbench,
        Workload::StressNg,
        Workload::Contended,
    ];

    /// The name in cell ids and tables.
    pub fn label(self) -> &'static str {
        match self {
            Workload::Contended => "contended",
            Workload::Uncontended => "uncontended",
            Workload::Hackbench => "hackbench",
            Workload::StressNg => "stress-ng",
        }
    }

    /// The id of its step in the guest's plan (also the label of its
    /// hypercall mark and, with `stat-`, of the statistics snapshot after
    /// it).
    pub fn step_id(self) -> &'static str {
        match self {
            Workload::StressNg => "stressng",
            w => w.label(),
        }
    }

    /// The unit of a measurement and which way is better.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::Contended | Workload::Uncontended => "writes/s, higher is better",
            Workload::Hackbench => "seconds, lower is better",
            Workload::StressNg => {
                "bogo ops/s (geometric mean over the stressors), higher is better"
            }
        }
    }

    /// Higher values are better (throughput; hackbench's time is not).
    pub fn higher_is_better(self) -> bool {
        self != Workload::Hackbench
    }

    /// A program from userspace rather than a locktorture run.
    pub fn is_macro(self) -> bool {
        matches!(self, Workload::Hackbench | Workload::StressNg)
    }

    /// locktorture writers in an L2 with `vcpus` vCPUs (0 for the macro
    /// workloads).
    pub fn writers(self, vcpus: u32) -> u32 {
        match self {
            Workload::Contended => 2 * vcpus,
            Workload::Uncontended => 1,
            Workload::Hackbench | Workload::StressNg => 0,
        }
    }
}

/// One point of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Cell {
    /// The L1 boot it runs in.
    pub overcommit: Overcommit,
    /// What its guests run.
    pub workload: Workload,
    /// The lock its guests run.
    pub mode: Mode,
}

impl Cell {
    /// `2x/contended/native`: what `--only` matches.
    pub fn id(&self) -> String {
        format!(
            "{}/{}/{}",
            self.overcommit.label(),
            self.workload.label(),
            self.mode.label()
        )
    }

    /// vCPUs of each of its guests.
    pub fn vcpus(&self) -> u32 {
        self.mode.vcpus(self.overcommit)
    }

    /// Its guests, booted at once.
    pub fn guests(&self) -> u32 {
        self.mode.guests(self.overcommit)
    }

    /// locktorture writers in each of its guests.
    pub fn writers(&self) -> u32 {
        self.workload.writers(self.vcpus())
    }
}

/// Durations and bounds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Settings {
    /// The quick matrix.
    pub quick: bool,
    /// Repetitions.
    pub reps: u32,
    /// locktorture seconds, contended, PV modes and native-2vcpu.
    pub contended_secs: u64,
    /// locktorture seconds, contended, native (kept short: lock-holder
    /// preemption makes it crawl under overcommit).
    pub native_contended_secs: u64,
    /// locktorture seconds, one writer.
    pub uncontended_secs: u64,
    /// hackbench messages per sender; groups = the L2's vCPUs.
    pub hackbench_loops: u64,
    /// stress-ng seconds (its `--timeout`).
    #[serde(default)]
    pub stressng_secs: u64,
    /// Bound on a native contended locktorture step (and a native stress-ng
    /// run) beyond its duration.
    pub native_bound_secs: u64,
    /// Bound on any other locktorture step (and stress-ng run) beyond its
    /// duration.
    pub bound_secs: u64,
    /// Bound on native hackbench.
    pub native_hackbench_bound_secs: u64,
    /// Bound on hackbench in the other modes.
    pub hackbench_bound_secs: u64,
    /// Make-up runs of the guests the platform lost (nested TCG), per
    /// run.
    pub retries: u32,
}

// The time model of the estimate (seconds when nothing is lost), from the
// runs on this machine: an L1 boot takes about 8 s, an L2 boot 12-20 s,
// loading guest_pvlock 2-4 s. L1's snapshots of host_kvm's statistics
// (one after the load, one after each mode's guests) take about 0.1 s
// each and are not counted.
/// L1: boot, and its last steps and power-off.
const T_L1: f64 = 8.0 + 2.0;
/// L1 loads host_kvm.
const T_HOST_KVM: f64 = 1.0;
/// An L2: boot, `info`, the first hypercall mark, `warnings`, power-off
/// (and with guest_pvlock the snapshot before the first workload, 0.2 s).
const T_L2: f64 = 15.0;
/// An L2 loads guest_pvlock.
const T_GUEST_PVLOCK: f64 = 3.0;
/// An L2 with guest_pvlock waits after loading it, before `info`
/// ([`SETTLE_SECS`]).
const T_SETTLE: f64 = SETTLE_SECS as f64;
/// After each workload: its hypercall mark (1 s) and, for pvlock, the
/// statistics snapshot.
const T_AFTER_STEP: f64 = 2.0;

/// How long a guest with guest_pvlock waits after loading it before it
/// reads `info` and starts its workloads: the adaptive lock settles first
/// (at 1x host_kvm advises "dedicated" after about 1 s of calm and the
/// guest parks pvlock about 0.3 s later), so that what `info` says and
/// what the workloads measure is the steady state, not the switch.
pub const SETTLE_SECS: u64 = 3;

/// How long a guest waits at a barrier for the other guests of its boot
/// before its workload (the bound; they usually arrive within seconds).
pub const BARRIER_SECS: u64 = 120;

impl Settings {
    /// The settings of the quick or the full matrix; `reps` overrides the
    /// default repetitions (3 quick, 5 full).
    pub fn new(quick: bool, reps: Option<u32>, retries: u32) -> Settings {
        if quick {
            Settings {
                quick,
                reps: reps.unwrap_or(3),
                contended_secs: 5,
                native_contended_secs: 5,
                uncontended_secs: 5,
                hackbench_loops: 20,
                stressng_secs: 5,
                native_bound_secs: 80,
                bound_secs: 30,
                native_hackbench_bound_secs: 90,
                hackbench_bound_secs: 45,
                retries,
            }
        } else {
            Settings {
                quick,
                reps: reps.unwrap_or(5),
                contended_secs: 10,
                native_contended_secs: 5,
                uncontended_secs: 10,
                hackbench_loops: 30,
                stressng_secs: 10,
                native_bound_secs: 150,
                bound_secs: 45,
                native_hackbench_bound_secs: 150,
                hackbench_bound_secs: 60,
                retries,
            }
        }
    }

    /// locktorture's seconds for workload `w` (contended or uncontended)
    /// in mode `mode`.
    pub fn lt_secs(&self, mode: Mode, w: Workload) -> u64 {
        match (mode.crawls_under_overcommit(), w) {
            (true, Workload::Contended) => self.native_contended_secs,
            (false, Workload::Contended) => self.contended_secs,
            _ => self.uncontended_secs,
        }
    }

    /// hackbench's bound in the guest (its `timeout`).
    pub fn hackbench_bound(&self, mode: Mode) -> u64 {
        if mode.crawls_under_overcommit() {
            self.native_hackbench_bound_secs
        } else {
            self.hackbench_bound_secs
        }
    }

    /// stress-ng's bound in the guest (its `timeout`): its duration and
    /// the bound beyond it.
    pub fn stressng_bound(&self, mode: Mode) -> u64 {
        self.stressng_secs
            + if mode.crawls_under_overcommit() {
                self.native_bound_secs
            } else {
                self.bound_secs
            }
    }

    /// The step timeout of workload `w` in mode `mode`.
    pub fn step_timeout(&self, mode: Mode, w: Workload) -> u64 {
        match w {
            Workload::Hackbench => self.hackbench_bound(mode) + 20,
            Workload::StressNg => self.stressng_bound(mode) + 20,
            Workload::Contended if mode.crawls_under_overcommit() => {
                self.lt_secs(mode, w) + self.native_bound_secs
            }
            _ => self.lt_secs(mode, w) + self.bound_secs,
        }
    }

    /// What a workload is expected to take when nothing goes wrong, for the
    /// time estimate (seconds: locktorture's run and its load and unload,
    /// hackbench's usual time, stress-ng's run and its start and stop).
    pub fn expected_secs(&self, mode: Mode, w: Workload) -> f64 {
        match w {
            Workload::Hackbench => 8.0,
            Workload::StressNg => self.stressng_secs as f64 + 3.0,
            _ => self.lt_secs(mode, w) as f64 + 4.0,
        }
    }
}

/// The levels at which pvlock-static runs: contended under overcommit,
/// where the adaptive lock should stay on pvlock (never at 1x, where it
/// runs the native lock by design). pvlock-nohint runs at the same ones:
/// under overcommit, where the host preempts lock holders.
pub const STATIC_LEVELS: [Overcommit; 3] = [Overcommit::X2, Overcommit::X3, Overcommit::Two];

/// The id of L1's snapshot of host_kvm's statistics right after it loads
/// host_kvm, before the first guest.
pub const HOST_STAT_START: &str = "host-stat-start";

/// The id of L1's snapshot of host_kvm's statistics right after the `l2`
/// step of `mode` (its guests have powered off).
pub fn host_stat_id(mode: Mode) -> String {
    format!("host-stat-{}", mode.group())
}

/// The cells of the quick or the full matrix.
///
/// Quick: 2x contended in every mode (native-2vcpu, pvlock-static and
/// pvlock-nohint included); 1x contended in native, upstream-pv and both
/// pvlock modes; 1x uncontended in native and pvlock-hostkvm (the fast
/// path does not depend on the kick). Full: every overcommit level,
/// workload and main mode, but the native lock's macro workloads under
/// overcommit; native-2vcpu, pvlock-static and pvlock-nohint contended
/// at 2x, 3x and two guests ([`STATIC_LEVELS`]).
pub fn cells(quick: bool) -> Vec<Cell> {
    let cell = |overcommit, workload, mode| Cell {
        overcommit,
        workload,
        mode,
    };
    let mut v = Vec::new();
    if quick {
        // pvlock-static and pvlock-nohint among them: the adaptive /
        // static and the hint on / off goals at 2x, the one of their
        // levels the quick matrix has.
        for mode in Mode::ALL {
            v.push(cell(Overcommit::X2, Workload::Contended, mode));
        }
        for mode in Mode::MAIN {
            v.push(cell(Overcommit::X1, Workload::Contended, mode));
        }
        for mode in [Mode::Native, Mode::HostKvm] {
            v.push(cell(Overcommit::X1, Workload::Uncontended, mode));
        }
    } else {
        for overcommit in Overcommit::ALL {
            for workload in Workload::ALL {
                for mode in Mode::MAIN {
                    // The native lock livelocks an overcommitted guest
                    // under a macro workload (hackbench at 3x: soft
                    // lockups, never finished): such a run measures only
                    // its bound, and no goal uses it.
                    if mode.stalls_at(overcommit) && workload.is_macro() {
                        continue;
                    }
                    v.push(cell(overcommit, workload, mode));
                }
            }
        }
        for overcommit in STATIC_LEVELS {
            v.push(cell(overcommit, Workload::Contended, Mode::NativeTwo));
            v.push(cell(overcommit, Workload::Contended, Mode::Static));
            v.push(cell(overcommit, Workload::Contended, Mode::NoHint));
        }
    }
    v.sort();
    v
}

/// The cells whose id matches `re`.
pub fn filter(cells: Vec<Cell>, re: Option<&regex::Regex>) -> Vec<Cell> {
    match re {
        None => cells,
        Some(re) => cells.into_iter().filter(|c| re.is_match(&c.id())).collect(),
    }
}

/// Whether vmtest's scenario parser knows the guest step function
/// `function` (a step it does not know makes the whole scenario invalid):
/// loads a one-step scenario written to the temporary directory.
pub fn vmtest_knows_step(function: &str) -> bool {
    static PROBES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("pvlock-bench-probe-{}-{n}", std::process::id()));
    let path = dir.join(format!("probe-{function}.toml"));
    let text = format!(
        "description = \"pvlock-bench: does vmtest know the step {function}?\"\n\
         [l1]\nsteps = [{{ run = \"{function}\" }}]\n"
    );
    let ok = std::fs::create_dir_all(&dir).is_ok()
        && std::fs::write(&path, text).is_ok()
        && Scenario::load(&path).is_ok();
    let _ = std::fs::remove_dir_all(&dir);
    ok
}

/// One L1 boot: every selected mode of one overcommit level, in one
/// repetition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unit {
    /// The repetition (from 1).
    pub rep: u32,
    /// The overcommit level of every cell it measures.
    pub overcommit: Overcommit,
    /// The modes in run order, each with its workloads in run order.
    pub modes: Vec<(Mode, Vec<Workload>)>,
    /// 0 for the planned run; n for the n-th make-up run of the modes
    /// whose guests the platform lost.
    pub retry: u32,
    /// L1 loads host_kvm before the first guest: the planned run has a
    /// pvlock mode (a make-up run inherits it, so that its guests run on
    /// the host the planned run's did).
    pub host_kvm: bool,
}

impl Unit {
    /// The scenario name: `r<rep>-<overcommit>`, `-retry<n>` for a
    /// make-up run.
    pub fn name(&self) -> String {
        match self.retry {
            0 => format!("r{}-{}", self.rep, self.overcommit.key()),
            n => format!("r{}-{}-retry{n}", self.rep, self.overcommit.key()),
        }
    }

    /// A make-up run of `modes` only, in the same repetition and in this
    /// unit's order.
    pub fn retry_of(&self, modes: &[Mode]) -> Unit {
        Unit {
            rep: self.rep,
            overcommit: self.overcommit,
            modes: self
                .modes
                .iter()
                .filter(|(m, _)| modes.contains(m))
                .cloned()
                .collect(),
            retry: self.retry + 1,
            host_kvm: self.host_kvm,
        }
    }

    /// The modes in run order.
    pub fn order(&self) -> Vec<Mode> {
        self.modes.iter().map(|(m, _)| *m).collect()
    }

    /// The place of `mode` in the run order, from 1.
    pub fn position(&self, mode: Mode) -> Option<u32> {
        self.modes
            .iter()
            .position(|(m, _)| *m == mode)
            .map(|p| p as u32 + 1)
    }

    /// L1 loads host_kvm (first, before any guest boots).
    pub fn loads_host_kvm(&self) -> bool {
        self.host_kvm
    }

    /// The ids of L1's snapshots of host_kvm's statistics around the
    /// guests of `mode`: the one right before its `l2` step (after the
    /// load for the first mode, else after the previous mode's guests)
    /// and the one right after; `None` if L1 takes none (no host_kvm) or
    /// the unit has no such mode.
    pub fn host_stats_around(&self, mode: Mode) -> Option<(String, String)> {
        if !self.loads_host_kvm() {
            return None;
        }
        let k = self.modes.iter().position(|(m, _)| *m == mode)?;
        let before = match k {
            0 => HOST_STAT_START.to_string(),
            k => host_stat_id(self.modes[k - 1].0),
        };
        Some((before, host_stat_id(mode)))
    }

    /// Its cells, in run order.
    pub fn cells(&self) -> Vec<Cell> {
        let mut v = Vec::new();
        for (mode, ws) in &self.modes {
            for w in ws {
                v.push(Cell {
                    overcommit: self.overcommit,
                    workload: *w,
                    mode: *mode,
                });
            }
        }
        v
    }

    /// The time this unit should take when nothing is lost, for the
    /// estimate.
    pub fn expected_secs(&self, s: &Settings) -> f64 {
        let mut t = T_L1;
        if self.loads_host_kvm() {
            t += T_HOST_KVM;
        }
        for (mode, ws) in &self.modes {
            t += T_L2;
            if mode.loads_guest_pvlock() {
                t += T_GUEST_PVLOCK + T_SETTLE;
            }
            for w in ws {
                t += s.expected_secs(*mode, *w) + T_AFTER_STEP;
            }
        }
        t
    }

    /// How long the console of this unit's L1 can stay silent before the
    /// run is taken for stalled: the longest step bound (a step prints
    /// nothing until it ends or hits its bound) and a margin.
    pub fn silence_bound(&self, s: &Settings) -> u64 {
        let longest = self
            .modes
            .iter()
            .flat_map(|(m, ws)| ws.iter().map(move |w| s.step_timeout(*m, *w)))
            .max()
            .unwrap_or(0);
        longest.max(60) + 40
    }

    /// Bounds the L2 as a whole (a guest whose timer stalls under nested
    /// TCG never reaches its own step timeouts): boot, module load and
    /// settling, the workloads' own bounds, the marks and statistics.
    fn l2_timeout(&self, s: &Settings, mode: Mode, ws: &[Workload]) -> u64 {
        let mut t = 40;
        if mode.loads_guest_pvlock() {
            // The load, the settling and the snapshot before the first
            // workload.
            t += 20 + SETTLE_SECS + 10;
        }
        for w in ws {
            t += s.step_timeout(mode, *w) + 10;
            if mode.guests(self.overcommit) > 1 {
                t += BARRIER_SECS + 10;
            }
        }
        t
    }

    /// The scenario, as TOML text (also written next to the results, so
    /// that a run can be repeated with `vmtest run <file>`).
    pub fn scenario_toml(&self, s: &Settings) -> String {
        let oc = self.overcommit;
        let mut l1 = Vec::new();
        let mut groups = String::new();
        let mut total = 120;
        // host_kvm first, so that every guest of the boot runs on the same
        // host whatever the order; pvlock-kickcpu keeps to the stock kick
        // with kick=1.
        // L1 snapshots host_kvm's statistics right after the load and
        // after each mode's guests: the difference of consecutive
        // snapshots is what host_kvm counted over that mode's guests
        // (their whole boot), e.g. the lock holders it preempted and the
        // preemptions it deferred (see `extract::HostRun`).
        if self.loads_host_kvm() {
            l1.push(
                r#"{ run = "load", args = ["host_kvm", "force=1"], id = "host_kvm" }"#.to_string(),
            );
            l1.push(format!(r#"{{ run = "stat", id = "{HOST_STAT_START}" }}"#));
        }
        for (mode, ws) in &self.modes {
            let vcpus = mode.vcpus(oc);
            let to = self.l2_timeout(s, *mode, ws);
            total += to + 10;
            l1.push(format!(
                r#"{{ l2 = ["{}"], timeout = {to}, id = "l2-{}" }}"#,
                mode.group(),
                mode.group()
            ));
            if self.loads_host_kvm() {
                l1.push(format!(
                    r#"{{ run = "stat", id = "{}" }}"#,
                    host_stat_id(*mode)
                ));
            }
            let mut steps = Vec::new();
            if mode.loads_guest_pvlock() {
                let args: Vec<String> = mode
                    .guest_pvlock_args()
                    .iter()
                    .map(|a| format!("\"{a}\""))
                    .collect();
                steps.push(format!(
                    r#"{{ run = "load", args = [{}], timeout = 60 }}"#,
                    args.join(", ")
                ));
                // The adaptive lock settles before `info` reads what it
                // runs (see SETTLE_SECS).
                steps.push(format!(r#"{{ run = "sleep", args = ["{SETTLE_SECS}"] }}"#));
            }
            steps.push(r#"{ run = "info" }"#.to_string());
            steps.push(r#"{ run = "hcmark", args = ["start"] }"#.to_string());
            // The statistics right before the first workload (before its
            // barrier, as the snapshots after the workloads are before the
            // next one's), so that each workload's counters, and what the
            // adaptive lock did during it, are the difference of the
            // snapshots around it.
            if mode.loads_guest_pvlock() {
                steps.push(r#"{ run = "stat", id = "stat-start" }"#.to_string());
            }
            for w in Workload::RUN_ORDER.iter().filter(|w| ws.contains(w)) {
                let timeout = s.step_timeout(*mode, *w);
                let id = w.step_id();
                // Guests that run at once start each workload together:
                // one whose plan ran ahead would measure alone.
                if mode.guests(oc) > 1 {
                    steps.push(format!(
                        r#"{{ run = "barrier", args = ["{id}", "{BARRIER_SECS}"], timeout = {}, id = "barrier-{id}" }}"#,
                        BARRIER_SECS + 10
                    ));
                }
                match w {
                    Workload::Hackbench => steps.push(format!(
                        r#"{{ run = "hackbench", args = ["{vcpus}", "{}", "{}"], timeout = {timeout}, id = "{id}" }}"#,
                        s.hackbench_loops,
                        s.hackbench_bound(*mode)
                    )),
                    Workload::StressNg => steps.push(format!(
                        r#"{{ run = "stressng", args = ["{STRESSNG_STRESSORS}", "{vcpus}", "{}", "{}"], timeout = {timeout}, id = "{id}" }}"#,
                        s.stressng_secs,
                        s.stressng_bound(*mode)
                    )),
                    _ => steps.push(format!(
                        r#"{{ run = "locktorture", args = ["spin_lock", "{}", "{}"], timeout = {timeout}, id = "{id}" }}"#,
                        w.writers(vcpus),
                        s.lt_secs(*mode, *w)
                    )),
                }
                steps.push(format!(r#"{{ run = "hcmark", args = ["{id}"] }}"#));
                if mode.loads_guest_pvlock() {
                    steps.push(format!(r#"{{ run = "stat", id = "stat-{id}" }}"#));
                }
            }
            steps.push(r#"{ run = "warnings" }"#.to_string());
            // The native lock's stall under overcommit is a result: its
            // soft lockups neither fail the run nor stop the other guests.
            let allow = if mode.stalls_at(oc) {
                "allow_kernel_problems = true\n"
            } else {
                ""
            };
            let _ = write!(
                groups,
                "\n[[l2]]\ngroup = \"{}\"\ncount = {}\ncpus = {vcpus}\ncmdline = \"{}\"\n{allow}steps = [\n  {},\n]\n",
                mode.group(),
                mode.guests(oc),
                if mode.is_native() { "nopvspin" } else { "" },
                steps.join(",\n  ")
            );
        }
        // (The snapshot after the last mode's guests is the one after the
        // last guest, which a `host-stat` step used to take.)
        l1.push(r#"{ run = "warnings" }"#.to_string());
        let modes: Vec<&str> = self.modes.iter().map(|(m, _)| m.label()).collect();
        format!(
            "# Generated by pvlock-bench; run again with `vmtest run <this file>`\n\
             # (hackbench and stress-ng need their --extra files, see results.json).\n\
             description = \"pvlock-bench repetition {} at {} overcommit: {}\"\n\
             timeout = {total}\n\
             # pvlock-bench runs again only the guests the platform lost.\n\
             retries = 0\n\n[l1]\nsteps = [\n  {},\n]\n{groups}",
            self.rep,
            oc.label(),
            modes.join(", then "),
            l1.join(",\n  ")
        )
    }

    /// Writes the scenario to `dir/<name>.toml` and loads it through
    /// vmtest (which checks it).
    pub fn scenario(&self, s: &Settings, dir: &Path) -> Result<Scenario> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("{}.toml", self.name()));
        std::fs::write(&path, self.scenario_toml(s))
            .with_context(|| format!("cannot write {}", path.display()))?;
        vmtest::judge::load_scenario(&path)
    }
}

/// The runs: repetition by repetition, every overcommit level in one L1
/// boot, in which every selected mode boots its guests in turn, so that
/// the machine's drift hits every mode alike.
///
/// The order of the modes inside an L1 boot is a cyclic Latin square over
/// the repetitions: repetition r runs the canonical order ([`Mode::ALL`],
/// restricted to the unit's modes, k of them) rotated left by
/// (r-1) mod k, so that over k repetitions every mode runs once in every
/// place. (L1 loads host_kvm before the first guest, so the order changes
/// nothing else; see [`Unit::scenario_toml`].) Make-up runs
/// ([`Unit::retry_of`]) keep their unit's order.
pub fn plan(cells: &[Cell], reps: u32) -> Vec<Unit> {
    let mut units = Vec::new();
    for rep in 1..=reps {
        for oc in Overcommit::ALL {
            let mut modes = Vec::new();
            for mode in Mode::ALL {
                let ws: Vec<Workload> = Workload::RUN_ORDER
                    .into_iter()
                    .filter(|w| {
                        cells.contains(&Cell {
                            overcommit: oc,
                            workload: *w,
                            mode,
                        })
                    })
                    .collect();
                if !ws.is_empty() {
                    modes.push((mode, ws));
                }
            }
            if !modes.is_empty() {
                let k = modes.len();
                modes.rotate_left((rep as usize - 1) % k);
                let host_kvm = modes.iter().any(|(m, _)| m.loads_guest_pvlock());
                units.push(Unit {
                    rep,
                    overcommit: oc,
                    modes,
                    retry: 0,
                    host_kvm,
                });
            }
        }
    }
    units
}

/// The contended cells at 2x of `modes`, in that order: for tests.
#[cfg(test)]
pub(crate) fn contended_2x(modes: &[Mode]) -> Vec<Cell> {
    modes
        .iter()
        .map(|&mode| Cell {
            overcommit: Overcommit::X2,
            workload: Workload::Contended,
            mode,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quick matrix's L2 group `name` at 2x: guest_pvlock loaded with
    /// `arg`, the settling, `info`, the snapshot before the workload, and
    /// only the contended workload.
    fn assert_contended_only_group(text: &str, name: &str, arg: &str) {
        let group = &text[text.find(&format!("group = \"{name}\"")).unwrap()..];
        let group = &group[..group.find("\n]\n").unwrap()];
        assert_eq!(
            group,
            format!(
                "group = \"{name}\"\ncount = 1\ncpus = 4\ncmdline = \"\"\nsteps = [\n  \
                 {{ run = \"load\", args = [\"guest_pvlock\", \"{arg}\"], timeout = 60 }},\n  \
                 {{ run = \"sleep\", args = [\"3\"] }},\n  \
                 {{ run = \"info\" }},\n  \
                 {{ run = \"hcmark\", args = [\"start\"] }},\n  \
                 {{ run = \"stat\", id = \"stat-start\" }},\n  \
                 {{ run = \"locktorture\", args = [\"spin_lock\", \"8\", \"5\"], timeout = 35, id = \"contended\" }},\n  \
                 {{ run = \"hcmark\", args = [\"contended\"] }},\n  \
                 {{ run = \"stat\", id = \"stat-contended\" }},\n  \
                 {{ run = \"warnings\" }},"
            )
        );
    }

    fn total_secs(units: &[Unit], s: &Settings) -> f64 {
        units.iter().map(|u| u.expected_secs(s)).sum()
    }

    #[test]
    fn full_matrix_is_complete() {
        let c = cells(false);
        // Every level, workload and main mode, but native's macro
        // workloads under overcommit (3 levels x 2); and native-2vcpu,
        // pvlock-static and pvlock-nohint contended at 2x, 3x and two
        // guests.
        assert_eq!(c.len(), 4 * 4 * 4 - 3 * 2 + 3 + 3 + 3);
        let ids: std::collections::BTreeSet<String> = c.iter().map(Cell::id).collect();
        assert_eq!(ids.len(), 67);
        assert!(ids.contains("two-guests/hackbench/pvlock-hostkvm"));
        assert!(ids.contains("3x/uncontended/native"));
        assert!(ids.contains("3x/contended/native"));
        assert!(ids.contains("1x/hackbench/native"));
        assert!(ids.contains("1x/stress-ng/native"));
        assert!(!ids.contains("3x/hackbench/native"));
        assert!(!ids.contains("2x/stress-ng/native"));
        assert!(!ids.contains("two-guests/hackbench/native"));
        assert!(ids.contains("3x/stress-ng/upstream-pv"));
        for level in ["2x", "3x", "two-guests"] {
            assert!(ids.contains(&format!("{level}/contended/native-2vcpu")));
        }
        assert_eq!(ids.iter().filter(|i| i.contains("native-2vcpu")).count(), 3);
        // pvlock-static: contended under overcommit only, never at 1x
        // (where the adaptive lock runs native by design).
        let statics: Vec<&String> = ids
            .iter()
            .filter(|i| i.ends_with("/pvlock-static"))
            .collect();
        assert_eq!(
            statics,
            [
                "2x/contended/pvlock-static",
                "3x/contended/pvlock-static",
                "two-guests/contended/pvlock-static"
            ]
        );
        // pvlock-nohint where pvlock-static is.
        let nohints: Vec<&String> = ids
            .iter()
            .filter(|i| i.ends_with("/pvlock-nohint"))
            .collect();
        assert_eq!(
            nohints,
            [
                "2x/contended/pvlock-nohint",
                "3x/contended/pvlock-nohint",
                "two-guests/contended/pvlock-nohint"
            ]
        );
        let s = Settings::new(false, None, 1);
        assert_eq!(s.reps, 5);
        let units = plan(&c, s.reps);
        assert_eq!(units.len(), 20);
        for u in &units {
            let want = match u.overcommit {
                Overcommit::X1 => 4,
                Overcommit::X2 | Overcommit::X3 | Overcommit::Two => 7,
            };
            assert_eq!(u.modes.len(), want, "{}", u.name());
            // pvlock-static and pvlock-nohint need host_kvm, as
            // pvlock-hostkvm does.
            assert!(u.loads_host_kvm());
            for (m, ws) in &u.modes {
                if matches!(m, Mode::NativeTwo | Mode::Static | Mode::NoHint) {
                    assert_eq!(ws, &[Workload::Contended]);
                } else if *m == Mode::Native && u.overcommit != Overcommit::X1 {
                    assert_eq!(ws, &[Workload::Uncontended, Workload::Contended]);
                } else {
                    assert_eq!(ws, &Workload::RUN_ORDER.to_vec());
                }
            }
        }
        // The estimate of the full matrix, 5 repetitions, when nothing is
        // lost: an L1 boot 10 + 1 (host_kvm) + native 67 + upstream 72 +
        // kickcpu 78 + hostkvm 78 (each 3 s to settle after the load) =
        // 306 s at 1x; under overcommit native 42 (no macro workloads),
        // pvlock-static 15 + 3 + 3 + 14 + 2 = 37 and pvlock-nohint as
        // much, and 31 s for native-2vcpu, 386 s; 1464 s per repetition,
        // 7320 s (122 min) in all. (L1's snapshots of host_kvm, about
        // 0.1 s each, are not counted.)
        let one = plan(&c, 1);
        let per: Vec<f64> = one.iter().map(|u| u.expected_secs(&s)).collect();
        assert_eq!(per, [306.0, 386.0, 386.0, 386.0]);
        assert_eq!(total_secs(&units, &s), 7320.0);
    }

    #[test]
    fn quick_matrix_answers_the_goals() {
        let c = cells(true);
        let ids: Vec<String> = c.iter().map(Cell::id).collect();
        // 2x contended in every mode: pvlock-static's and pvlock-nohint's
        // one cell each in the quick matrix, for the adaptive / static
        // and the hint on / off goals at 2x.
        for m in Mode::ALL {
            assert!(ids.contains(&format!("2x/contended/{}", m.label())));
        }
        // The 1x goals, answered by the adaptive lock.
        for m in Mode::MAIN {
            assert!(ids.contains(&format!("1x/contended/{}", m.label())));
        }
        assert!(ids.contains(&"1x/uncontended/native".to_string()));
        assert!(ids.contains(&"1x/uncontended/pvlock-hostkvm".to_string()));
        assert!(!ids.iter().any(|i| i.starts_with("1x/")
            && (i.ends_with("pvlock-static") || i.ends_with("pvlock-nohint"))));
        assert_eq!(c.len(), 7 + 4 + 2);
        assert!(!c.iter().any(|c| c.workload.is_macro()));
        let s = Settings::new(true, None, 1);
        assert_eq!(s.reps, 3);
        assert!(s.contended_secs <= 10 && s.uncontended_secs <= 10);
        let units = plan(&c, s.reps);
        assert_eq!(units.len(), 6);
        // The estimate: per repetition, the 1x boot 10 + 1 (host_kvm) +
        // native 37 + upstream 26 + kickcpu 32 + hostkvm 43 (each 3 s to
        // settle after the load) = 149 s, the 2x boot 10 + 1 + 3 x 26 + 4
        // x 32 (kickcpu, hostkvm, static, nohint) = 217 s; 3 repetitions:
        // 1098 s, 18 min 18 s. It was 14 min 30 s before the adaptive
        // lock: the settling alone makes it 15 min 06 s, pvlock-static's
        // 2x guest 16 min 42 s, pvlock-nohint's 2x guest (32 s a
        // repetition) the rest. (Quick runs have taken about half their
        // estimate.)
        let per: Vec<f64> = units[..2].iter().map(|u| u.expected_secs(&s)).collect();
        assert_eq!(per, [149.0, 217.0]);
        let est = total_secs(&units, &s);
        assert_eq!(est, 1098.0);
        assert!(est < 19.0 * 60.0, "quick mode is estimated at {est} s");
        assert_eq!(Settings::new(true, Some(5), 1).reps, 5);
    }

    #[test]
    fn pvlock_static_is_the_static_lock_under_overcommit_only() {
        let m = Mode::Static;
        assert_eq!(
            (m.label(), m.group(), m.short()),
            ("pvlock-static", "static", "static")
        );
        assert_eq!(m.guest_pvlock_args(), ["guest_pvlock", "adaptive=0"]);
        assert!(m.loads_guest_pvlock() && !m.is_adaptive() && !m.is_native());
        assert!(Mode::HostKvm.is_adaptive() && Mode::KickCpu.is_adaptive());
        assert_eq!(
            serde_json::to_value(m).unwrap(),
            serde_json::json!("pvlock-static")
        );
        // Contended only, at 2x, 3x and two guests (full), at 2x (quick).
        for quick in [false, true] {
            let statics: Vec<Cell> = cells(quick).into_iter().filter(|c| c.mode == m).collect();
            assert!(statics.iter().all(|c| c.workload == Workload::Contended));
            let levels: Vec<Overcommit> = statics.iter().map(|c| c.overcommit).collect();
            if quick {
                assert_eq!(levels, [Overcommit::X2]);
            } else {
                assert_eq!(levels, STATIC_LEVELS);
            }
        }
        // Its guest: host_kvm in L1 first, then guest_pvlock adaptive=0,
        // the settling, `info`, the snapshot before the workload, only the
        // contended workload.
        let s = Settings::new(true, None, 1);
        let units = plan(&cells(true), 1);
        let x2 = units
            .iter()
            .find(|u| u.overcommit == Overcommit::X2)
            .unwrap();
        // After pvlock-hostkvm in the canonical order (pvlock-nohint
        // last).
        assert_eq!(x2.position(m), Some(6));
        assert!(x2.loads_host_kvm());
        let text = x2.scenario_toml(&s);
        assert_contended_only_group(&text, "static", "adaptive=0");
        // Not at 1x.
        let x1 = units
            .iter()
            .find(|u| u.overcommit == Overcommit::X1)
            .unwrap();
        assert_eq!(x1.position(m), None);
        assert!(!x1.scenario_toml(&s).contains("adaptive=0"));
    }

    #[test]
    fn pvlock_nohint_is_the_lock_whose_hint_the_host_only_counts() {
        let m = Mode::NoHint;
        assert_eq!(
            (m.label(), m.group(), m.short()),
            ("pvlock-nohint", "nohint", "nohint")
        );
        assert_eq!(m.guest_pvlock_args(), ["guest_pvlock", "hint=2"]);
        // The same lock as pvlock-hostkvm: adaptive, the project's lock
        // wait (no kick=1).
        assert!(m.loads_guest_pvlock() && m.is_adaptive() && !m.is_native());
        assert!(!Mode::PVLOCK.contains(&m));
        assert!(Mode::RATIOS.contains(&(Mode::HostKvm, m)));
        assert!(!Mode::RATIOS.contains(&(Mode::KickCpu, m)));
        assert_eq!(
            serde_json::to_value(m).unwrap(),
            serde_json::json!("pvlock-nohint")
        );
        assert_eq!(
            serde_json::from_value::<Mode>(serde_json::json!("pvlock-nohint")).unwrap(),
            m
        );
        // Where pvlock-static is: contended only, at 2x, 3x and two
        // guests (full), at 2x (quick).
        for quick in [false, true] {
            let c = cells(quick);
            let levels = |mode: Mode| -> Vec<(Overcommit, Workload)> {
                c.iter()
                    .filter(|c| c.mode == mode)
                    .map(|c| (c.overcommit, c.workload))
                    .collect()
            };
            assert_eq!(levels(m), levels(Mode::Static));
            let want: Vec<(Overcommit, Workload)> = if quick {
                vec![(Overcommit::X2, Workload::Contended)]
            } else {
                STATIC_LEVELS
                    .iter()
                    .map(|oc| (*oc, Workload::Contended))
                    .collect()
            };
            assert_eq!(levels(m), want);
        }
        // Its guest: host_kvm in L1 first, then guest_pvlock hint=2, the
        // settling, `info`, the snapshot before the workload, only the
        // contended workload; last in the canonical order.
        let s = Settings::new(true, None, 1);
        let units = plan(&cells(true), 1);
        let x2 = units
            .iter()
            .find(|u| u.overcommit == Overcommit::X2)
            .unwrap();
        assert_eq!(x2.order().last(), Some(&m));
        assert!(x2.loads_host_kvm());
        let text = x2.scenario_toml(&s);
        assert_contended_only_group(&text, "nohint", "hint=2");
        // Not at 1x; the other guests load guest_pvlock without hint=2.
        let x1 = units
            .iter()
            .find(|u| u.overcommit == Overcommit::X1)
            .unwrap();
        assert_eq!(x1.position(m), None);
        assert!(!x1.scenario_toml(&s).contains("hint=2"));
        assert_eq!(text.matches("hint=2").count(), 1);
    }

    #[test]
    fn l1_snapshots_host_kvm_after_each_modes_guests() {
        let s = Settings::new(true, None, 1);
        let units = plan(&cells(true), 2);
        // Repetition 2 at 2x: the order rotated left by one.
        let u = &units[3];
        assert_eq!(u.name(), "r2-2x");
        let text = u.scenario_toml(&s);
        let l1 = &text[text.find("[l1]\nsteps = [\n").unwrap()..text.find("\n]\n").unwrap()];
        let mut want = vec![
            r#"{ run = "load", args = ["host_kvm", "force=1"], id = "host_kvm" }"#.to_string(),
            r#"{ run = "stat", id = "host-stat-start" }"#.to_string(),
        ];
        for m in u.order() {
            let g = m.group();
            let to = u.l2_timeout(&s, m, &u.modes[u.position(m).unwrap() as usize - 1].1);
            want.push(format!(
                r#"{{ l2 = ["{g}"], timeout = {to}, id = "l2-{g}" }}"#
            ));
            want.push(format!(r#"{{ run = "stat", id = "host-stat-{g}" }}"#));
        }
        want.push(r#"{ run = "warnings" }"#.to_string());
        let got: Vec<&str> = l1
            .lines()
            .skip(2)
            .map(|l| l.trim().trim_end_matches(','))
            .collect();
        assert_eq!(got, want, "{text}");
        // The snapshots around each mode's guests: the previous one
        // before, its own after.
        assert_eq!(u.order()[0], Mode::NativeTwo);
        assert_eq!(
            u.host_stats_around(Mode::NativeTwo),
            Some(("host-stat-start".into(), "host-stat-nativetwo".into()))
        );
        assert_eq!(
            u.host_stats_around(Mode::NoHint),
            Some(("host-stat-static".into(), "host-stat-nohint".into()))
        );
        assert_eq!(
            u.host_stats_around(Mode::Native),
            Some(("host-stat-nohint".into(), "host-stat-native".into()))
        );
        // A make-up run has its own.
        let again = u.retry_of(&[Mode::Native, Mode::HostKvm]);
        assert_eq!(
            again.host_stats_around(Mode::Native),
            Some(("host-stat-hostkvm".into(), "host-stat-native".into()))
        );
        assert_eq!(again.host_stats_around(Mode::Static), None);
        let t = again.scenario_toml(&s);
        assert!(t.contains(r#"{ run = "stat", id = "host-stat-start" }"#));
        assert_eq!(t.matches(r#"run = "stat", id = "host-stat-"#).count(), 3);
        // No host_kvm, no snapshots.
        let c = contended_2x(&[Mode::Native, Mode::Upstream]);
        let bare = &plan(&c, 1)[0];
        assert_eq!(bare.host_stats_around(Mode::Native), None);
        assert!(!bare.scenario_toml(&s).contains("host-stat"));
    }

    #[test]
    fn interleaved_order() {
        let units = plan(&cells(true), 3);
        let names: Vec<String> = units.iter().map(Unit::name).collect();
        assert_eq!(
            names,
            ["r1-1x", "r1-2x", "r2-1x", "r2-2x", "r3-1x", "r3-2x"]
        );
        use Mode::*;
        // A cyclic Latin square: repetition r rotates the canonical order
        // left by r-1.
        assert_eq!(
            units[1].order(),
            [Native, NativeTwo, Upstream, KickCpu, HostKvm, Static, NoHint]
        );
        assert_eq!(
            units[3].order(),
            [NativeTwo, Upstream, KickCpu, HostKvm, Static, NoHint, Native]
        );
        assert_eq!(
            units[5].order(),
            [Upstream, KickCpu, HostKvm, Static, NoHint, Native, NativeTwo]
        );
        assert_eq!(units[0].order(), [Native, Upstream, KickCpu, HostKvm]);
        assert_eq!(units[2].order(), [Upstream, KickCpu, HostKvm, Native]);
        assert_eq!(units[4].order(), [KickCpu, HostKvm, Native, Upstream]);
        assert_eq!(units[4].position(Native), Some(3));
        assert_eq!(units[4].position(NativeTwo), None);
        // Each repetition measures every cell once before the next begins.
        let per_rep: Vec<Vec<Cell>> = (1..=3)
            .map(|r| {
                let mut v: Vec<Cell> = units
                    .iter()
                    .filter(|u| u.rep == r)
                    .flat_map(Unit::cells)
                    .collect();
                v.sort();
                v
            })
            .collect();
        assert_eq!(per_rep[0], per_rep[1]);
        assert_eq!(per_rep[0], per_rep[2]);
        assert_eq!(per_rep[0], cells(true));
        // Over k repetitions every mode runs once in every place: every
        // overcommitted level has 7 modes (native-2vcpu, pvlock-static and
        // pvlock-nohint with the main four), so it needs 7 repetitions
        // (the default 5 square none).
        for (oc, k) in [
            (Overcommit::X3, 7u32),
            (Overcommit::Two, 7),
            (Overcommit::X2, 7),
        ] {
            let units = plan(&cells(false), k);
            let at: Vec<&Unit> = units.iter().filter(|u| u.overcommit == oc).collect();
            let modes = at[0].order();
            assert_eq!(modes.len(), k as usize);
            for m in modes {
                let mut places: Vec<u32> = at.iter().filter_map(|u| u.position(m)).collect();
                places.sort();
                assert_eq!(places, (1..=k).collect::<Vec<_>>(), "{oc:?} {m:?}");
            }
        }
        // A unit of one mode has nothing to rotate.
        let c = vec![Cell {
            overcommit: Overcommit::X3,
            workload: Workload::Contended,
            mode: HostKvm,
        }];
        assert!(plan(&c, 3).iter().all(|u| u.order() == [HostKvm]));
    }

    #[test]
    fn make_up_runs() {
        let units = plan(&cells(false), 2);
        let u2 = &units[5];
        assert_eq!(u2.name(), "r2-2x");
        let u = u2.retry_of(&[Mode::HostKvm, Mode::Native, Mode::Upstream]);
        assert_eq!(u.name(), "r2-2x-retry1");
        assert_eq!(u.retry_of(&[Mode::HostKvm]).name(), "r2-2x-retry2");
        // The unit's (rotated) order, not the canonical one.
        assert_eq!(u.order(), [Mode::Upstream, Mode::HostKvm, Mode::Native]);
        let s = Settings::new(false, None, 1);
        let text = u.scenario_toml(&s);
        assert!(text.contains("load\", args = [\"host_kvm\", \"force=1\"]"));
        assert!(text.contains("cmdline = \"nopvspin\""));
        assert!(text.contains("retries = 0"));
        assert!(text.contains("upstream-pv, then pvlock-hostkvm, then native"));
        // A make-up run of the stock modes only still loads host_kvm
        // first, as its planned run did.
        let stock = u2.retry_of(&[Mode::Native, Mode::Upstream]);
        assert!(stock.loads_host_kvm());
        let text = stock.scenario_toml(&s);
        assert!(text.find("host_kvm").unwrap() < text.find("l2 = [").unwrap());
        // A plan without pvlock loads none.
        let c = contended_2x(&[Mode::Native, Mode::Upstream]);
        let units = plan(&c, 2);
        assert!(units.iter().all(|u| !u.loads_host_kvm()));
        assert!(!units[1].scenario_toml(&s).contains("host_kvm"));
        assert!(!units[1]
            .retry_of(&[Mode::Native])
            .scenario_toml(&s)
            .contains("host_kvm"));
        let units = plan(&cells(false), 2);
        // The longest step at 2x: native contended, 5 s and the bound of
        // 150 s. (At 1x native's hackbench or stress-ng, bound 150 (+ 10
        // s) + 20 s.)
        assert_eq!(units[1].silence_bound(&s), 195);
        assert_eq!(units[0].silence_bound(&s), 220);
        assert_eq!(u.retry_of(&[Mode::HostKvm]).silence_bound(&s), 120);
    }

    #[test]
    fn only_filters_cells() {
        let re = regex::Regex::new("^2x/contended/(native|pvlock-hostkvm)$").unwrap();
        let c = filter(cells(false), Some(&re));
        assert_eq!(c.len(), 2);
        let units = plan(&c, 1);
        assert_eq!(units.len(), 1);
        assert_eq!(units[0].modes.len(), 2);
        let re = regex::Regex::new("/stress-ng/").unwrap();
        assert_eq!(filter(cells(false), Some(&re)).len(), 13);
    }

    #[test]
    fn vmtest_knows_its_own_steps_only() {
        assert!(vmtest_knows_step("hackbench"));
        assert!(vmtest_knows_step("locktorture"));
        assert!(!vmtest_knows_step("nosuchstep"));
    }

    /// The cells vmtest can run: the stress-ng step only once vmtest's
    /// scenario parser knows it.
    fn runnable(cells: Vec<Cell>) -> Vec<Cell> {
        if vmtest_knows_step("stressng") {
            cells
        } else {
            cells
                .into_iter()
                .filter(|c| c.workload != Workload::StressNg)
                .collect()
        }
    }

    #[test]
    fn every_scenario_of_both_plans_parses() {
        let dir = std::env::temp_dir().join(format!("pvlock-bench-plans-{}", std::process::id()));
        for quick in [true, false] {
            let s = Settings::new(quick, None, 1);
            let units = plan(&runnable(cells(quick)), s.reps);
            assert!(!units.is_empty());
            for u in &units {
                for unit in [u.clone(), u.retry_of(&u.order()[1..])] {
                    let sc = unit
                        .scenario(&s, &dir)
                        .unwrap_or_else(|e| panic!("{}: {e:#}", unit.name()));
                    assert_eq!(sc.name, unit.name());
                    let want: usize = unit
                        .modes
                        .iter()
                        .map(|(m, _)| m.guests(u.overcommit))
                        .sum::<u32>() as usize;
                    assert_eq!(sc.l2_instances().len(), want);
                }
            }
        }
        // The stress-ng steps, whether or not vmtest knows the function
        // yet: the rest of the TOML is what vmtest checks.
        let s = Settings::new(false, None, 1);
        for u in plan(&cells(false), 1) {
            let text = u.scenario_toml(&s);
            assert_eq!(
                text.matches(r#"{ run = "stressng", args = ["futex,sigq,eventfd", "#)
                    .count(),
                u.modes
                    .iter()
                    .filter(|(_, ws)| ws.contains(&Workload::StressNg))
                    .count()
            );
            let p = dir.join(format!("{}-stressng.toml", u.name()));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                &p,
                text.replace(r#"run = "stressng""#, r#"run = "sh_step""#),
            )
            .unwrap();
            vmtest::judge::load_scenario(&p).unwrap_or_else(|e| panic!("{}: {e:#}", u.name()));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn scenarios_say_what_they_run() {
        let dir = std::env::temp_dir().join(format!("pvlock-bench-test-{}", std::process::id()));
        let s = Settings::new(false, None, 1);
        for u in plan(&runnable(cells(false)), 2) {
            let sc = u.scenario(&s, &dir).unwrap();
            let text = u.scenario_toml(&s);
            let plans = sc.plans();
            let l1 = &plans[0].1;
            let plan_of = |g: &str| {
                &plans
                    .iter()
                    .find(|(p, _)| *p == format!("plan/L2-{g}.sh"))
                    .unwrap_or_else(|| panic!("no {g} in {}", u.name()))
                    .1
            };
            // host_kvm is loaded before the first guest boots, whatever
            // the order.
            let hk = l1.find("load host_kvm force=1").unwrap();
            let first = u.order()[0].group();
            assert!(hk < l1.find(&format!("step l2-{first} ")).unwrap(), "{l1}");
            assert_eq!(l1.matches("load host_kvm").count(), 1);
            // The L2 steps in the unit's order, each followed right away
            // by L1's snapshot of host_kvm; the first snapshot right after
            // the load.
            let at: Vec<usize> = u
                .order()
                .iter()
                .map(|m| l1.find(&format!("step l2-{} ", m.group())).unwrap())
                .collect();
            assert!(at.windows(2).all(|w| w[0] < w[1]), "{l1}");
            let next_step = |from: usize| {
                let rest = &l1[from..];
                let nl = rest.find("\nstep ").unwrap();
                &rest[nl + 1..]
            };
            assert!(
                next_step(hk).starts_with("step host-stat-start ")
                    && next_step(hk).lines().next().unwrap().ends_with(" stat"),
                "{l1}"
            );
            for m in u.order() {
                let after = next_step(l1.find(&format!("step l2-{} ", m.group())).unwrap());
                assert!(
                    after.starts_with(&format!("step host-stat-{} ", m.group())),
                    "{l1}"
                );
            }
            assert_eq!(l1.matches(" stat\n").count(), u.modes.len() + 1, "{l1}");
            assert!(text.contains("cmdline = \"nopvspin\""));
            let native = plan_of("native");
            assert!(!native.contains("guest_pvlock"));
            let kickcpu = plan_of("kickcpu");
            assert!(kickcpu.contains("load guest_pvlock kick=1"), "{kickcpu}");
            let hostkvm = plan_of("hostkvm");
            assert!(
                hostkvm.contains("load guest_pvlock\n") || hostkvm.contains("load guest_pvlock ")
            );
            assert!(!hostkvm.contains("kick=1"));
            let v = u.overcommit.vcpus();
            let w = 2 * v;
            assert!(
                hostkvm.contains(&format!("locktorture spin_lock {w} 10")),
                "{hostkvm}"
            );
            assert!(native.contains(&format!("locktorture spin_lock {w} 5")));
            assert!(native.contains("locktorture spin_lock 1 10"));
            // The native lock livelocks an overcommitted guest under the
            // macro workloads: they run at 1x only, and its stalls under
            // overcommit are results, not kernel problems that stop the
            // run.
            let native_group = sc.group("native").unwrap();
            if u.overcommit == Overcommit::X1 {
                assert!(native.contains(&format!("hackbench {v} 30 150")));
                assert!(!native_group.allow_kernel_problems);
            } else {
                assert!(!native.contains("hackbench") && !native.contains("stressng"));
                assert!(native_group.allow_kernel_problems);
            }
            for g in ["upstream", "kickcpu", "hostkvm"] {
                assert!(!sc.group(g).unwrap().allow_kernel_problems);
            }
            assert!(hostkvm.contains(&format!("hackbench {v} 30 ")));
            if vmtest_knows_step("stressng") {
                if u.overcommit == Overcommit::X1 {
                    assert!(native.contains(&format!("stressng futex,sigq,eventfd {v} 10 160")));
                }
                assert!(hostkvm.contains(&format!("stressng futex,sigq,eventfd {v} 10 55")));
                assert!(hostkvm.contains("step stat-stressng "));
            }
            // Contended last.
            assert!(
                hostkvm.find("hackbench").unwrap()
                    < hostkvm.find(&format!("spin_lock {w} ")).unwrap()
            );
            if u.overcommit != Overcommit::X1 {
                // The limit cell: 2 vCPUs, 4 writers, the PV modes'
                // duration and bounds.
                let two = sc.group("nativetwo").unwrap();
                assert_eq!((two.cpus, two.count), (2, 1));
                assert_eq!(two.cmdline, "nopvspin");
                let p = plan_of("nativetwo");
                assert!(
                    p.contains("step contended 55 locktorture spin_lock 4 10"),
                    "{p}"
                );
                assert!(!p.contains("hackbench"));
            } else {
                assert!(sc.group("nativetwo").is_none());
            }
            if u.overcommit == Overcommit::Two {
                // Two of each mode's guests, but native-2vcpu's one.
                assert_eq!(sc.l2_instances().len(), 13);
                assert!(sc.l2_instances().contains(&"nativetwo-1".to_string()));
                assert!(!sc.l2_instances().contains(&"nativetwo-2".to_string()));
                assert!(sc.l2_instances().contains(&"upstream-2".to_string()));
                assert!(sc.l2_instances().contains(&"static-2".to_string()));
                assert!(sc.l2_instances().contains(&"nohint-2".to_string()));
            }
            // pvlock-static: under overcommit only, contended only, with
            // adaptive=0 and the project's lock wait (no kick=1), settled
            // and snapshotted like the others.
            if u.overcommit == Overcommit::X1 {
                assert!(sc.group("static").is_none());
            } else {
                let st = plan_of("static");
                assert!(st.contains("load guest_pvlock adaptive=0\n"), "{st}");
                assert!(!st.contains("kick=1"));
                assert!(
                    st.contains(&format!("locktorture spin_lock {w} 10")),
                    "{st}"
                );
                for other in ["uncontended", "hackbench", "stressng"] {
                    assert!(!st.contains(&format!("step {other} ")), "{st}");
                }
                assert!(st.contains("step stat-contended "));
                assert!(!sc.group("static").unwrap().allow_kernel_problems);
                let hk = l1.find("load host_kvm force=1").unwrap();
                assert!(hk < l1.find("step l2-static ").unwrap(), "{l1}");
            }
            // pvlock-nohint: likewise, with hint=2 (adaptive as it ships,
            // the project's lock wait); the only guest with hint=2.
            if u.overcommit == Overcommit::X1 {
                assert!(sc.group("nohint").is_none());
            } else {
                let nh = plan_of("nohint");
                assert!(nh.contains("load guest_pvlock hint=2\n"), "{nh}");
                assert!(!nh.contains("kick=1") && !nh.contains("adaptive=0"));
                assert!(
                    nh.contains(&format!("locktorture spin_lock {w} 10")),
                    "{nh}"
                );
                for other in ["uncontended", "hackbench", "stressng"] {
                    assert!(!nh.contains(&format!("step {other} ")), "{nh}");
                }
                assert!(nh.contains("step stat-contended "));
                assert!(!sc.group("nohint").unwrap().allow_kernel_problems);
                for g in ["hostkvm", "static"] {
                    assert!(!plan_of(g).contains("hint="), "{g}");
                }
                // The stock kick runs as on a stock host: no hint.
                assert!(plan_of("kickcpu").contains("load guest_pvlock kick=1 hint=0\n"));
            }
            // Every guest_pvlock guest settles after the load, then reads
            // `info`, and takes a snapshot right before its first workload
            // (before the barrier, with two guests); the others do
            // neither.
            for g in [
                "native", "upstream", "kickcpu", "hostkvm", "static", "nohint",
            ] {
                let Some(group) = sc.group(g) else {
                    continue;
                };
                let p = plan_of(g);
                let pv = g != "native" && g != "upstream";
                assert_eq!(p.contains(" sleep 3\n"), pv, "{p}");
                assert_eq!(p.contains("step stat-start "), pv, "{p}");
                if pv {
                    let load = p.find(" load guest_pvlock").unwrap();
                    let sleep = p.find(" sleep 3\n").unwrap();
                    let info = p.find(" info\n").unwrap();
                    assert!(load < sleep && sleep < info, "{p}");
                    let start = p.find("step stat-start ").unwrap();
                    let first = Workload::RUN_ORDER
                        .iter()
                        .filter_map(|w| {
                            p.find(&format!("step barrier-{} ", w.step_id()))
                                .or_else(|| p.find(&format!("step {} ", w.step_id())))
                        })
                        .min()
                        .unwrap();
                    assert!(info < start && start < first, "{p}");
                    // Nothing between the snapshot and the first workload
                    // (or its barrier).
                    assert!(!p[start..first].contains("\nstep "), "{p}");
                }
                assert!(!group.allow_kernel_problems || g == "native");
            }
            // Guests that run at once meet at a barrier before each
            // workload, right before it; a guest alone has none.
            for g in [
                "native", "upstream", "kickcpu", "hostkvm", "static", "nohint",
            ] {
                if sc.group(g).is_none() {
                    continue;
                }
                let p = plan_of(g);
                let workloads = ["uncontended", "hackbench", "stressng", "contended"]
                    .iter()
                    .filter(|id| p.contains(&format!("step {id} ")))
                    .collect::<Vec<_>>();
                assert!(!workloads.is_empty(), "{p}");
                for id in workloads {
                    let barrier =
                        format!("step barrier-{id} 130 barrier {id} {BARRIER_SECS}\nstep {id} ");
                    assert_eq!(
                        p.contains(&barrier),
                        u.overcommit == Overcommit::Two,
                        "{}: {p}",
                        u.name()
                    );
                }
                assert_eq!(p.contains("barrier"), u.overcommit == Overcommit::Two);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

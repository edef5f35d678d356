// SPDX-License-Identifier: GPL-2.0

//! Reading the numbers out of a vmtest run's result JSON (the `result` of
//! `vmtest::run::Report`, also saved as `<scenario>.json`): one
//! [`Measurement`] per cell the run measured, whatever happened to the
//! others.

use crate::matrix::{Cell, Mode, Settings, Unit, Workload};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// How a measurement ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// A number.
    Ok,
    /// The workload outlived its bound (recorded, not a benchmark crash).
    Timeout,
    /// The workload ran and reported a failure, or printed no result; or
    /// the guest stopped (stalled, vanished, crashed) with guest_pvlock
    /// loaded and nothing showed it the platform's: the project's failure
    /// until shown otherwise, not run again.
    Failed,
    /// The guest did not run the lock it was meant to (e.g. host_kvm
    /// missing): its number would compare the wrong things.
    WrongMode,
    /// The guest never got to the workload (did not boot, crashed before,
    /// the whole run failed).
    NotRun,
}

impl Status {
    /// As `results.json` and `results.md` say it.
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Timeout => "timeout",
            Status::Failed => "failed",
            Status::WrongMode => "wrong-mode",
            Status::NotRun => "not-run",
        }
    }
}

// --- vmtest's result JSON, read with vmtest's own types ------------------

use pvlock_common::stats::{Kind, StatDoc};
use vmtest::console::Node;

/// The `result` of a run, read; one that does not parse (a vmtest of
/// another version) says so and counts as a run that measured nothing.
fn read_result(result: &Value) -> RResult {
    serde_json::from_value(result.clone()).unwrap_or_else(|e| {
        eprintln!("pvlock-bench: warning: vmtest's result does not parse ({e}): nothing measured");
        RResult::default()
    })
}

/// The `result` of a run: what `vmtest::run` writes (`nodes`, and
/// `timed_out` when the run outlived its bound).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct RResult {
    timed_out: bool,
    nodes: BTreeMap<String, Node>,
}

// --- what the benchmark keeps --------------------------------------------

/// One L2 instance's share of a measurement.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Instance {
    /// `<group>-<i>`.
    pub name: String,
    /// How its share ended.
    pub status: Option<Status>,
    /// Why, if not ok.
    pub note: Option<String>,
    /// The lock the guest reported running.
    pub lock: Option<String>,
    /// locktorture: its writes.
    pub total: Option<u64>,
    /// locktorture: the most writes of one writer.
    pub max: Option<u64>,
    /// locktorture: the fewest writes of one writer.
    pub min: Option<u64>,
    /// locktorture: its failures.
    pub fail: Option<u64>,
    /// locktorture: the seconds its writes per second are over: the
    /// writers' window in the guest kernel's clock ("Start of test" to the
    /// summary), or module load to unload from a guest that did not
    /// report the window.
    pub lt_secs: Option<f64>,
    /// locktorture: writes per second.
    pub per_sec: Option<f64>,
    /// hackbench: its "Time:" seconds.
    pub hackbench_time: Option<f64>,
    /// hackbench: its groups.
    pub hackbench_groups: Option<u64>,
    /// hackbench: its loops.
    pub hackbench_loops: Option<u64>,
    /// stress-ng: the geometric mean of its stressors' bogo ops/s (real
    /// time).
    #[serde(default)]
    pub stressng_ops: Option<f64>,
    /// stress-ng: each stressor's bogo ops/s (real time).
    #[serde(default)]
    pub stressng_rates: BTreeMap<String, f64>,
    /// The step's wall seconds in the guest.
    pub step_secs: Option<f64>,
    /// KVM hypercalls L1 counted during the workload, by number
    /// (5 = KVM_HC_KICK_CPU, 1886781441 = KVM_HC_PVLOCK_KICK). With two
    /// guests at once the counter is shared: each guest's share includes
    /// some of the other's.
    pub hypercalls: BTreeMap<String, u64>,
    /// guest_pvlock's counters during this workload (the difference of
    /// the pvlock-stat snapshots around it).
    pub counters: BTreeMap<String, i64>,
    /// What guest_pvlock's adaptive lock ran during this workload, from
    /// the same snapshots (`None`: no guest_pvlock, no snapshots, or a
    /// guest_pvlock or a `results.json` from before the adaptive lock).
    #[serde(default)]
    pub adaptive: Option<AdaptiveRun>,
    /// The pvlock-stat snapshot taken right after the workload.
    pub stat: Option<StatDoc>,
    /// Kernel problems this guest reported (whole boot).
    pub problems: Vec<String>,
}

/// What guest_pvlock's adaptive lock ran during one workload: the
/// differences of its adaptive counters (`switches_to_native`,
/// `switches_to_pvlock`, `time_native_ns`, `time_pvlock_ns`, cumulative
/// since load or zero_stats) between the pvlock-stat snapshots before and
/// after the workload.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct AdaptiveRun {
    /// Switches from pvlock to the native lock during the workload.
    pub to_native: i64,
    /// Switches from the native lock back to pvlock.
    pub to_pvlock: i64,
    /// Nanoseconds on the native lock (parked pvlock).
    pub native_ns: i64,
    /// Nanoseconds on pvlock.
    pub pvlock_ns: i64,
    /// The share of the time on the native lock, native_ns / (native_ns +
    /// pvlock_ns); `None` when neither grew.
    pub native_share: Option<f64>,
    /// The longest switch since load (`switch_max_ns` after the
    /// workload, not a difference), if the snapshot has it.
    pub switch_max_ns: Option<i64>,
}

impl AdaptiveRun {
    /// From guest_pvlock's counters before and after a workload (each
    /// pvlock-stat snapshot's `dirs.guest.counters`; `before` empty for
    /// "since load"). `None` if `after` lacks the adaptive counters (a
    /// guest_pvlock from before them), or if one went down (the
    /// statistics were zeroed in between: the differences mean nothing).
    pub fn between(before: &BTreeMap<String, i64>, after: &BTreeMap<String, i64>) -> Option<Self> {
        let delta = |c: &str| -> Option<i64> {
            let d = after.get(c)? - before.get(c).copied().unwrap_or(0);
            (d >= 0).then_some(d)
        };
        let run = AdaptiveRun {
            to_native: delta("switches_to_native")?,
            to_pvlock: delta("switches_to_pvlock")?,
            native_ns: delta("time_native_ns")?,
            pvlock_ns: delta("time_pvlock_ns")?,
            native_share: None,
            switch_max_ns: after.get("switch_max_ns").copied(),
        };
        Some(run.with_share())
    }

    /// Several guests' runs of one workload as one (their switches and
    /// times added up, the share of the sums, the longest switch); `None`
    /// for none.
    pub fn sum<'a>(runs: impl IntoIterator<Item = &'a AdaptiveRun>) -> Option<Self> {
        let mut total: Option<AdaptiveRun> = None;
        for r in runs {
            let t = total.get_or_insert_with(AdaptiveRun::default);
            t.to_native += r.to_native;
            t.to_pvlock += r.to_pvlock;
            t.native_ns += r.native_ns;
            t.pvlock_ns += r.pvlock_ns;
            t.switch_max_ns = t.switch_max_ns.max(r.switch_max_ns);
        }
        total.map(AdaptiveRun::with_share)
    }

    fn with_share(mut self) -> Self {
        let all = self.native_ns + self.pvlock_ns;
        self.native_share = (all > 0).then(|| self.native_ns as f64 / all as f64);
        self
    }
}

/// What host_kvm counted over one mode's guests in one L1 boot: the
/// differences of its cumulative counters (`dirs.host.counters` of L1's
/// pvlock-stat snapshots) between the snapshot right before the mode's
/// `l2` step and the one right after it. host_kvm counts over all VMs,
/// and only that mode's guests ran in between, so this is what their
/// whole boot made it count: every workload of the mode (and the module
/// load, the settling, the snapshots), not one workload alone.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct HostRun {
    /// Reschedules of a vCPU whose guest was in a critical section (held
    /// a lock) and not waiting for a lock: `holder_preemptions`, counted
    /// for guests with the critical-section hint on (`hint=1`) and
    /// observed (`hint=2`).
    pub holder_preemptions: i64,
    /// Of those, the ones host_kvm deferred, letting the holder run on a
    /// little (`grants`): `hint=1` guests only.
    pub grants: i64,
    /// Why KVM deferred the others none (`None`: a host_kvm from before
    /// it said).
    pub why_not: Option<NotDeferred>,
    /// vCPU threads preempted in a critical section, whatever preempted
    /// them, counted in the scheduler (`holders_preempted`; `None`: a
    /// host_kvm from before it counted them): the number the hint is
    /// meant to cut, where the ones above are only those the check on the
    /// way back into the guest saw.
    #[serde(default)]
    pub holders_preempted: Option<i64>,
}

/// Why KVM deferred a holder's reschedule none: host_kvm's
/// `not_deferred_*` counters over one mode's guests.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct NotDeferred {
    /// This tick's grant ran out with the lock still held.
    pub expired: i64,
    /// This tick's grant ended otherwise.
    pub tick: i64,
    /// A grant was running.
    pub running: i64,
    /// On the way back from a kick.
    pub kick: i64,
    /// The guest only lets the host count (`hint=2`).
    pub observed: i64,
    /// `grant_us=0`, or pvlock not enabled for the VM.
    pub off: i64,
}

impl HostRun {
    /// From L1's pvlock-stat snapshots before and after a mode's guests.
    /// `None` if `after` lacks the counters (a host_kvm from before the
    /// hint), or if one went down (zeroed in between).
    pub fn between(before: &StatDoc, after: &StatDoc) -> Option<Self> {
        let (b, a) = (host_counters(before), host_counters(after));
        let delta = |c: &str| -> Option<i64> {
            let d = a.get(c)? - b.get(c).copied().unwrap_or(0);
            (d >= 0).then_some(d)
        };
        let why_not = (|| {
            Some(NotDeferred {
                expired: delta("not_deferred_expired")?,
                tick: delta("not_deferred_tick")?,
                running: delta("not_deferred_running")?,
                kick: delta("not_deferred_kick")?,
                observed: delta("not_deferred_observed")?,
                off: delta("not_deferred_off")?,
            })
        })();
        Some(HostRun {
            holder_preemptions: delta("holder_preemptions")?,
            grants: delta("grants")?,
            why_not,
            holders_preempted: delta("holders_preempted"),
        })
    }

    /// The lock holders' preemptions host_kvm did not defer: what a
    /// guest's critical sections still suffered.
    pub fn not_deferred(&self) -> i64 {
        self.holder_preemptions - self.grants
    }

    /// The share of the holders' preemptions host_kvm deferred; `None`
    /// when there was none.
    pub fn deferred_share(&self) -> Option<f64> {
        (self.holder_preemptions > 0).then(|| self.grants as f64 / self.holder_preemptions as f64)
    }
}

/// One cell of the matrix in one repetition.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Measurement {
    /// The cell's id.
    pub cell: String,
    /// The cell.
    #[serde(flatten)]
    pub key: Cell,
    /// The repetition.
    pub rep: u32,
    /// The scenario (L1 boot) that ran it.
    pub unit: String,
    /// Its mode's place in that L1 boot's run order, from 1 (`None` in
    /// results from before the order rotated).
    #[serde(default)]
    pub position: Option<u32>,
    /// How it ended: the worst of its instances'.
    pub status: Status,
    /// Why, if not ok.
    pub note: Option<String>,
    /// writes/s (locktorture, summed over guests), seconds (hackbench,
    /// mean over guests) or bogo ops/s (stress-ng, summed over guests).
    pub value: Option<f64>,
    /// locktorture's per-writer Max/Min (over every writer of every
    /// guest).
    pub fairness: Option<f64>,
    /// Each guest's share.
    pub instances: Vec<Instance>,
    /// What host_kvm counted over this measurement's mode's guests in its
    /// L1 boot ([`HostRun`]: their whole boot, every workload of the
    /// mode, the same for each of the mode's measurements of that boot);
    /// `None` without host_kvm, without L1's snapshots around the mode's
    /// guests (a `results.json` from before them), or with a host_kvm
    /// from before the hint.
    #[serde(default)]
    pub host: Option<HostRun>,
}

impl Measurement {
    /// What the adaptive lock ran during the workload, over every guest
    /// of the measurement; `None` unless each of them has its record.
    pub fn adaptive(&self) -> Option<AdaptiveRun> {
        if self.instances.is_empty() || self.instances.iter().any(|i| i.adaptive.is_none()) {
            return None;
        }
        AdaptiveRun::sum(self.instances.iter().filter_map(|i| i.adaptive.as_ref()))
    }
}

/// L1's side of a run.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct HostSide {
    /// L1's module loads (`host_kvm loaded params=[force=1]`).
    pub modules: Vec<String>,
    /// host_kvm's pvlock-stat snapshot after the last guest.
    pub host_stat: Option<StatDoc>,
    /// KVM hypercalls per `<instance>:<mark>`, by number.
    pub hypercalls: BTreeMap<String, BTreeMap<String, u64>>,
    /// L1's kernel warnings.
    pub warnings: Option<u64>,
    /// L1's kernel problems.
    pub problems: Vec<String>,
}

fn counters_at(stat: &StatDoc, kind: Kind) -> BTreeMap<String, i64> {
    stat.counters(kind)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), i64::try_from(*v).ok()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// guest_pvlock's counters in a pvlock-stat snapshot.
fn counters(stat: &StatDoc) -> BTreeMap<String, i64> {
    counters_at(stat, Kind::Guest)
}

/// host_kvm's counters in a pvlock-stat snapshot.
fn host_counters(stat: &StatDoc) -> BTreeMap<String, i64> {
    counters_at(stat, Kind::Host)
}

/// A node's pvlock-stat snapshots by the id of the `stat` step that took
/// each: the steps in order, each finished one with its snapshot, up to
/// the first that did not finish (killed, or the node stopped: what
/// follows cannot be matched). Nothing if a snapshot failed (`stat-error`:
/// which step's is not known).
fn snapshots(node: &Node) -> BTreeMap<&str, &StatDoc> {
    let mut out = BTreeMap::new();
    if !node.stat_errors.is_empty() {
        return out;
    }
    let mut stats = node.stats.iter();
    for st in node
        .steps
        .iter()
        .filter(|st| st.call == "stat" || st.call.starts_with("stat "))
    {
        if st.rc.is_none() {
            break;
        }
        let Some(v) = stats.next() else {
            break;
        };
        out.insert(st.id.as_str(), v);
    }
    out
}

/// What host_kvm counted over each mode's guests of `unit`, from L1's
/// snapshots before and after them ([`Unit::host_stats_around`]); a mode
/// is left out if either snapshot is missing.
fn host_runs(unit: &Unit, l1: Option<&Node>) -> BTreeMap<Mode, HostRun> {
    let mut out = BTreeMap::new();
    let Some(l1) = l1 else {
        return out;
    };
    let snaps = snapshots(l1);
    for mode in unit.order() {
        let Some((before, after)) = unit.host_stats_around(mode) else {
            continue;
        };
        if let (Some(b), Some(a)) = (snaps.get(before.as_str()), snaps.get(after.as_str())) {
            if let Some(r) = HostRun::between(b, a) {
                out.insert(mode, r);
            }
        }
    }
    out
}

/// What the guest says it runs; `Err` if it is not what `mode` means.
///
/// For the guest_pvlock modes this is what its `info` said once, after
/// the load and the settling and before the workloads; what the adaptive
/// lock ran during each workload is [`Instance::adaptive`]. An adaptive
/// guest may run the native lock by the host's advice (`lock_ops` native,
/// `adaptive_state` native): that is pvlock's choice, accepted; a guest
/// whose guest_pvlock is not installed is not. pvlock-static must run
/// pvlock with `adaptive: 0`; pvlock-nohint must have registered the
/// critical-section hint for the host to observe only (`hint: 2`).
fn lock_of(node: &Node, mode: Mode) -> Result<String, String> {
    let pv_enabled = node
        .dmesg
        .iter()
        .any(|l| l.contains("PV spinlocks enabled"));
    let pv_disabled = node
        .dmesg
        .iter()
        .any(|l| l.contains("PV spinlocks disabled"));
    let info = |k: &str| node.info.get(k).map(String::as_str);
    match mode {
        Mode::Native | Mode::NativeTwo if pv_enabled => {
            Err("native guest reports PV spinlocks enabled".into())
        }
        Mode::Native | Mode::NativeTwo => Ok("native qspinlock (nopvspin)".into()),
        Mode::Upstream if pv_disabled => {
            Err("upstream-pv guest reports PV spinlocks disabled".into())
        }
        Mode::Upstream if info("lock_ops") == Some("pvlock") => {
            Err("upstream-pv guest runs pvlock".into())
        }
        Mode::Upstream => Ok("upstream-pv".into()),
        Mode::KickCpu | Mode::HostKvm | Mode::Static | Mode::NoHint => {
            // guest_pvlock's `info` names its mode (how waiters wait and
            // unlockers kick; parked, the mode pvlock would run in); before
            // the lock waits came it named the kick.
            let (want_mode, want_kick) = if mode == Mode::KickCpu {
                ("hlt_kvm_hc_kick_cpu", "kvm_hc_kick_cpu")
            } else {
                ("kvm_hc_pvlock_wait", "kvm_hc_pvlock_kick")
            };
            let ops = info("lock_ops").unwrap_or("");
            let state = info("adaptive_state").unwrap_or("");
            let not_installed = || {
                format!(
                    "guest_pvlock is not installed (lock_ops '{ops}'{}{})",
                    if state.is_empty() {
                        String::new()
                    } else {
                        format!(", adaptive_state '{state}'")
                    },
                    node.errors
                        .first()
                        .map(|e| format!(", {e}"))
                        .unwrap_or_default()
                )
            };
            // guest_pvlock records its state once a switch is done: lock
            // ops and state that disagree, or `other` ops, were read in
            // the middle of a switch. The lock is installed and following
            // the host: what it ran during each workload is in
            // `Instance::adaptive`.
            let lock = match (ops, state) {
                ("pvlock", "native") | ("native", "pvlock") | ("other", "pvlock" | "native")
                    if mode.is_adaptive() =>
                {
                    "pvlock (switching when `info` was read)"
                }
                ("pvlock", _) if !mode.is_adaptive() => match info("adaptive") {
                    Some("0") => "pvlock (static, adaptive=0)",
                    a => {
                        return Err(format!(
                            "pvlock-static guest's guest_pvlock follows the host (adaptive '{}', not 0)",
                            a.unwrap_or("")
                        ))
                    }
                },
                ("pvlock", _) => "pvlock",
                ("native", "native") if !mode.is_adaptive() => {
                    return Err(
                        "pvlock-static guest runs the native lock by the host's advice (adaptive=0 did not take)"
                            .into(),
                    )
                }
                ("native", "native") => "pvlock (native by the host's advice)",
                _ => return Err(not_installed()),
            };
            // pvlock-nohint: the host counts the holders it preempts and
            // defers none (`hint: 0`: not registered, the host would not
            // see them; `1`: it would defer them).
            let lock = match (mode, info("hint")) {
                (Mode::NoHint, Some("2")) => format!("{lock}, hint 2 (observed, none deferred)"),
                (Mode::NoHint, h) => {
                    return Err(format!(
                        "pvlock-nohint guest's guest_pvlock has hint '{}', not 2 (the host observing only)",
                        h.unwrap_or("")
                    ))
                }
                // The other side of the hint on/off comparison: the hint
                // must be on (`0` there: the host refused it). A guest_pvlock
                // from before the hint says nothing.
                (Mode::HostKvm, Some(h)) if h != "1" => {
                    return Err(format!(
                        "pvlock-hostkvm guest's guest_pvlock has hint '{h}', not 1 (the host refused it?)"
                    ))
                }
                // The stock kick, as on a host without host_kvm: no hint.
                (Mode::KickCpu, Some(h)) if h != "0" => {
                    return Err(format!(
                        "pvlock-kickcpu guest's guest_pvlock has hint '{h}', not 0 (as on a stock host)"
                    ))
                }
                _ => lock.to_string(),
            };
            match (info("mode"), info("kick")) {
                (Some(m), _) if m == want_mode => Ok(format!("{lock}, mode {m}")),
                (Some(m), _) => Err(format!("guest_pvlock runs mode '{m}', not {want_mode}")),
                (None, Some(k)) if k == want_kick => Ok(format!("{lock}, kick {k}")),
                (None, k) => Err(format!(
                    "guest_pvlock kicks with '{}', not {want_kick}",
                    k.unwrap_or("")
                )),
            }
        }
    }
}

fn first_problem(node: &Node) -> String {
    node.problems
        .iter()
        .find(|p| p.contains("panic") || p.contains("BUG"))
        .or(node.problems.first())
        .map(|p| format!(": {}", p.trim()))
        .unwrap_or_default()
}

/// What the note of a guest lost with guest_pvlock loaded, and no platform
/// verdict, says: its measurement is [`Status::Failed`], the project's.
pub const LOST_WITH_LOCK: &str = "guest_pvlock was loaded and nothing showed it the platform's";

/// One instance's measurement of workload `w`. `platform` is vmtest's
/// verdict that the attempt failed for the platform (its events), if it
/// did.
fn instance(
    name: &str,
    node: Option<&Node>,
    l1: Option<&Node>,
    cell: &Cell,
    s: &Settings,
    platform: Option<&str>,
) -> Instance {
    let mut inst = Instance {
        name: name.to_string(),
        ..Default::default()
    };
    let set = |inst: &mut Instance, st: Status, note: String| {
        inst.status = Some(st);
        inst.note = Some(note);
    };
    // A guest lost after guest_pvlock was loaded in it: the project's lock
    // ran there, so the loss is the project's failure unless vmtest showed
    // it the platform's; only then is it `not-run`, to be run again.
    let lost = |inst: &mut Instance, node: &Node, note: String| {
        let lock_loaded = cell.mode.loads_guest_pvlock()
            && node
                .modules
                .iter()
                .any(|m| m.starts_with("guest_pvlock loaded"));
        match platform {
            Some(p) => set(
                inst,
                Status::NotRun,
                format!("{note} (vmtest: the platform's: {p})"),
            ),
            None if lock_loaded => set(
                inst,
                Status::Failed,
                format!("{note}; {LOST_WITH_LOCK}: the project's failure until shown otherwise"),
            ),
            None => set(inst, Status::NotRun, note),
        }
    };
    let Some(node) = node else {
        set(&mut inst, Status::NotRun, format!("{name}: no output"));
        return inst;
    };
    inst.problems = node.problems.clone();
    if !node.booted {
        set(
            &mut inst,
            Status::NotRun,
            format!("{name}: never booted{}", first_problem(node)),
        );
        return inst;
    }
    let w = cell.workload;
    if let Some(l1) = l1 {
        if let Some(h) = l1.hypercalls.get(&format!("{name}:{}", w.step_id())) {
            inst.hypercalls = h.clone();
        }
    }
    // The pvlock-stat snapshot after this workload, and the one before.
    let stat_ids: Vec<&str> = node
        .steps
        .iter()
        .filter(|st| st.call.starts_with("stat"))
        .map(|st| st.id.as_str())
        .collect();
    // guest_pvlock's mode changes since it was loaded, by the end of this
    // workload.
    let mut mode_changes = None;
    if node.stat_errors.is_empty() && node.stats.len() == stat_ids.len() {
        if let Some(k) = stat_ids
            .iter()
            .position(|id| *id == format!("stat-{}", w.step_id()))
        {
            let now = counters(&node.stats[k]);
            mode_changes = now.get("mode_changes").copied();
            let before = if k > 0 {
                counters(&node.stats[k - 1])
            } else {
                BTreeMap::new()
            };
            inst.counters = now
                .iter()
                .map(|(c, v)| (c.clone(), v - before.get(c).copied().unwrap_or(0)))
                .collect();
            inst.adaptive = AdaptiveRun::between(&before, &now);
            inst.stat = Some(node.stats[k].clone());
        }
    }
    let step = node.steps.iter().find(|st| st.id == w.step_id());
    inst.step_secs = step.and_then(|st| st.secs);
    let lock = lock_of(node, cell.mode);
    inst.lock = lock.as_ref().ok().cloned();
    let Some(step) = step else {
        match &lock {
            _ if !node.done => lost(
                &mut inst,
                node,
                format!(
                    "{name}: stopped before {}{}",
                    w.label(),
                    first_problem(node)
                ),
            ),
            Err(e) => set(&mut inst, Status::NotRun, format!("{name}: {e}")),
            Ok(_) => set(
                &mut inst,
                Status::NotRun,
                format!("{name}: the plan skipped it"),
            ),
        }
        return inst;
    };
    if let Err(e) = lock {
        set(&mut inst, Status::WrongMode, format!("{name}: {e}"));
        return inst;
    }
    // A pvlock guest whose kick stopped working moves to another mode for
    // good: from then on it measures something else.
    if let Some(n) = mode_changes.filter(|n| *n > 0) {
        let start = node.info.get("mode").map(String::as_str).unwrap_or("?");
        set(
            &mut inst,
            Status::WrongMode,
            format!(
                "{name}: guest_pvlock changed its mode {n} time(s) by the end of {} (mode at the start '{start}')",
                w.label()
            ),
        );
        return inst;
    }
    if !step.timed_out && step.rc.is_none() && !node.done {
        // The guest stopped answering inside the workload and L1 killed it
        // at the L2's bound (or it vanished). Native spinlocks under
        // overcommit can do that by themselves. With guest_pvlock loaded
        // it is the project's failure unless vmtest showed otherwise;
        // without, the platform's (a nested-TCG timer stall: the guest
        // runs no code of the project), worth running again.
        if cell.mode.stalls_at(cell.overcommit) && w == Workload::Contended {
            set(
                &mut inst,
                Status::Timeout,
                format!(
                    "{name}: stopped answering during {} and was killed at the guest's bound",
                    w.label()
                ),
            );
        } else {
            lost(
                &mut inst,
                node,
                format!(
                    "{name}: stalled or vanished during {}{}",
                    w.label(),
                    first_problem(node)
                ),
            );
        }
        return inst;
    }
    if step.timed_out {
        set(
            &mut inst,
            Status::Timeout,
            format!(
                "{name}: {} did not finish within its {} s bound",
                w.label(),
                s.step_timeout(cell.mode, w)
            ),
        );
        return inst;
    }
    match w {
        Workload::Hackbench => {
            let Some(hb) = node.hackbench.last() else {
                set(
                    &mut inst,
                    Status::Failed,
                    format!("{name}: hackbench printed nothing (rc {:?})", step.rc),
                );
                return inst;
            };
            inst.hackbench_groups = Some(hb.groups);
            inst.hackbench_loops = Some(hb.loops);
            inst.hackbench_time = hb.time;
            if hb.timed_out {
                set(
                    &mut inst,
                    Status::Timeout,
                    format!("{name}: hackbench stopped at its bound"),
                );
            } else if let Some(e) = &hb.error {
                set(
                    &mut inst,
                    Status::Failed,
                    format!("{name}: hackbench failed: {e}"),
                );
            } else if hb.time.is_none() {
                set(
                    &mut inst,
                    Status::Failed,
                    format!("{name}: hackbench printed no time"),
                );
            } else {
                inst.status = Some(Status::Ok);
            }
        }
        Workload::StressNg => {
            let Some(sn) = node.stressng.last() else {
                set(
                    &mut inst,
                    Status::Failed,
                    format!("{name}: stress-ng printed nothing (rc {:?})", step.rc),
                );
                return inst;
            };
            inst.stressng_ops = sn.ops_per_sec;
            inst.stressng_rates = sn.rates.clone();
            if sn.timed_out {
                set(
                    &mut inst,
                    Status::Timeout,
                    format!("{name}: stress-ng stopped at its bound"),
                );
            } else if let Some(e) = &sn.error {
                set(
                    &mut inst,
                    Status::Failed,
                    format!("{name}: stress-ng failed: {e}"),
                );
            } else if sn.ops_per_sec.is_none() {
                set(
                    &mut inst,
                    Status::Failed,
                    format!("{name}: stress-ng printed no rate"),
                );
            } else {
                inst.status = Some(Status::Ok);
            }
        }
        Workload::Contended | Workload::Uncontended => {
            let want = u64::from(cell.writers());
            let Some(lt) = node.locktorture.iter().find(|l| l.writers == want) else {
                set(
                    &mut inst,
                    Status::Failed,
                    format!(
                        "{name}: no locktorture result with {want} writers (rc {:?})",
                        step.rc
                    ),
                );
                return inst;
            };
            inst.total = lt.total;
            inst.max = lt.max;
            inst.min = lt.min;
            inst.fail = lt.fail;
            inst.lt_secs = Some(lt.window.unwrap_or(lt.secs));
            inst.per_sec = lt.per_sec;
            if lt.per_sec.is_none() || lt.verdict.is_none() {
                set(
                    &mut inst,
                    Status::Failed,
                    format!("{name}: locktorture printed no summary"),
                );
            } else if lt.fail.unwrap_or(0) > 0 || lt.verdict.as_deref() != Some("SUCCESS") {
                set(
                    &mut inst,
                    Status::Failed,
                    format!(
                        "{name}: locktorture {} with {} failures",
                        lt.verdict.as_deref().unwrap_or("?"),
                        lt.fail.unwrap_or(0)
                    ),
                );
            } else {
                inst.status = Some(Status::Ok);
            }
        }
    }
    inst
}

/// The measurements of every cell of `unit`, from its run's result JSON.
/// `run_error` says why the run produced nothing at all (harness error).
pub fn measurements(
    unit: &Unit,
    s: &Settings,
    result: &Value,
    run_error: Option<&str>,
) -> Vec<Measurement> {
    measurements_judged(unit, s, result, run_error, None)
}

/// [`measurements`], with vmtest's verdict that the attempt failed for the
/// platform (`platform`: its events), which makes a guest lost with
/// guest_pvlock loaded `not-run` (to be run again) rather than `failed`.
pub fn measurements_judged(
    unit: &Unit,
    s: &Settings,
    result: &Value,
    run_error: Option<&str>,
    platform: Option<&str>,
) -> Vec<Measurement> {
    let r = read_result(result);
    let l1 = r.nodes.get("l1");
    let host = host_runs(unit, l1);
    let mut out = Vec::new();
    for cell in unit.cells() {
        let names: Vec<String> = (1..=cell.guests())
            .map(|i| format!("{}-{i}", cell.mode.group()))
            .collect();
        let instances: Vec<Instance> = names
            .iter()
            .map(|n| instance(n, r.nodes.get(n), l1, &cell, s, platform))
            .collect();
        let mut m = Measurement {
            cell: cell.id(),
            key: cell,
            rep: unit.rep,
            unit: unit.name(),
            position: unit.position(cell.mode),
            status: Status::Ok,
            note: None,
            value: None,
            fairness: None,
            instances,
            host: host.get(&cell.mode).copied(),
        };
        if let Some(e) = run_error {
            m.status = Status::NotRun;
            m.note = Some(e.to_string());
            m.instances.clear();
            m.host = None;
        } else if let Some(bad) = m
            .instances
            .iter()
            .filter(|i| i.status != Some(Status::Ok))
            // A failure of the project first (no make-up run may hide it),
            // then a result (timeout), then the rest.
            .max_by_key(|i| match i.status {
                Some(Status::Failed) => 2,
                Some(Status::Timeout) => 1,
                _ => 0,
            })
        {
            m.status = bad.status.unwrap_or(Status::Failed);
            m.note = bad.note.clone();
            if r.timed_out && m.status == Status::NotRun {
                m.note = Some(format!(
                    "{} (the whole run hit its bound)",
                    m.note.unwrap_or_default()
                ));
            }
        } else {
            let is = &m.instances;
            match cell.workload {
                Workload::Hackbench => {
                    let t: Vec<f64> = is.iter().filter_map(|i| i.hackbench_time).collect();
                    m.value = Some(t.iter().sum::<f64>() / t.len() as f64);
                }
                Workload::StressNg => {
                    m.value = Some(is.iter().filter_map(|i| i.stressng_ops).sum());
                }
                Workload::Contended | Workload::Uncontended => {
                    m.value = Some(is.iter().filter_map(|i| i.per_sec).sum());
                    let max = is.iter().filter_map(|i| i.max).max();
                    let min = is.iter().filter_map(|i| i.min).min();
                    m.fairness = match (max, min) {
                        (Some(a), Some(0)) if a > 0 => Some(f64::INFINITY),
                        (Some(a), Some(b)) if b > 0 => Some(a as f64 / b as f64),
                        _ => None,
                    };
                }
            }
        }
        out.push(m);
    }
    out
}

/// L1's side of a run.
pub fn host_side(result: &Value) -> HostSide {
    let r = read_result(result);
    let Some(l1) = r.nodes.get("l1") else {
        return HostSide::default();
    };
    HostSide {
        modules: l1.modules.clone(),
        host_stat: l1.stats.last().cloned(),
        hypercalls: l1.hypercalls.clone(),
        warnings: l1.warnings,
        problems: l1.problems.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// guest_pvlock's counters in a pvlock-stat snapshot's JSON.
    fn counters_of(v: &Value) -> BTreeMap<String, i64> {
        counters(&doc(v.clone()))
    }

    /// A pvlock-stat snapshot from its JSON.
    fn doc(v: Value) -> StatDoc {
        serde_json::from_value(v).expect("a pvlock-stat snapshot")
    }
    use crate::matrix::{contended_2x, plan, Overcommit};

    fn unit2x() -> Unit {
        let cells = contended_2x(&Mode::MAIN);
        plan(&cells, 1).remove(0)
    }

    #[test]
    fn a_whole_run_from_the_fixture() {
        let report: Value =
            serde_json::from_str(include_str!("../tests/fixtures/r1-2x.json")).unwrap();
        let s = Settings::new(true, None, 1);
        let ms = measurements(&unit2x(), &s, &report["result"], None);
        assert_eq!(ms.len(), 4);
        let by = |m: Mode| ms.iter().find(|x| x.key.mode == m).unwrap();
        let native = by(Mode::Native);
        assert_eq!(native.status, Status::Ok);
        assert_eq!(native.cell, "2x/contended/native");
        let v = native.value.unwrap();
        assert!((v - 26189.0 / 9.58).abs() < 1e-6, "{v}");
        assert!((native.fairness.unwrap() - 11319.0 / 19.0).abs() < 1e-9);
        assert_eq!(
            native.instances[0].lock.as_deref(),
            Some("native qspinlock (nopvspin)")
        );
        let up = by(Mode::Upstream);
        assert_eq!(up.status, Status::Ok);
        assert_eq!(up.instances[0].hypercalls["5"], 654);
        // The kick-cpu guest crashed at boot: recorded, not fatal.
        let kc = by(Mode::KickCpu);
        assert_eq!(kc.status, Status::NotRun);
        assert!(
            kc.note
                .as_deref()
                .unwrap()
                .contains("never booted: [    9.19] BUG"),
            "{:?}",
            kc.note
        );
        assert_eq!(kc.value, None);
        let hk = by(Mode::HostKvm);
        assert_eq!(hk.status, Status::Ok);
        assert_eq!(
            hk.instances[0].lock.as_deref(),
            Some("pvlock, kick kvm_hc_pvlock_kick")
        );
        assert_eq!(hk.instances[0].counters["kicks"], 6051);
        assert_eq!(hk.instances[0].hypercalls["1886781441"], 6036);
        // A guest_pvlock from before the adaptive lock: no record of it.
        assert_eq!(hk.instances[0].adaptive, None);
        assert_eq!(hk.adaptive(), None);
        // A plan from before L1's snapshots around each mode's guests (one
        // `host-stat` at the end), and a host_kvm from before the hint:
        // no host counters per mode.
        assert!(ms.iter().all(|m| m.host.is_none()));
        let host = host_side(&report["result"]);
        assert_eq!(
            host.host_stat.unwrap().counters(Kind::Host).unwrap()["kicks"],
            6053
        );
        assert_eq!(host.modules, ["host_kvm loaded params=[force=1]"]);
    }

    #[test]
    fn a_guest_lost_with_guest_pvlock_loaded_is_the_projects_failure() {
        // 2026-12-04: a pvlock guest (stock kick) went silent during
        // stress-ng at 1x, its vCPUs in guest_pvlock's lock wait and slow
        // path with interrupts off; vmtest gave no platform verdict. The
        // benchmark then took it for lost to the platform and ran it
        // again. Now it is the project's failure unless vmtest says
        // otherwise; a guest lost before its lock was loaded, or one that
        // never ran the project's lock, is still the platform's.
        let guest = |loaded: bool, mode: &str| {
            serde_json::json!({ "booted": true, "done": false,
                "modules": if loaded { vec!["guest_pvlock loaded params=[]"] } else { vec![] },
                "info": { "lock_ops": "pvlock", "mode": mode },
                "steps": [{ "id": "contended", "call": "locktorture spin_lock 8 5", "rc": null }] })
        };
        let result = |loaded: bool| {
            serde_json::json!({
                "timed_out": false,
                "nodes": {
                    "l1": { "booted": true, "done": false },
                    "upstream-1": { "booted": true, "done": false,
                        "dmesg": ["[0.4] kvm-guest: PV spinlocks enabled"],
                        "steps": [{ "id": "contended", "call": "locktorture spin_lock 8 5", "rc": null }] },
                    "kickcpu-1": guest(loaded, "hlt_kvm_hc_kick_cpu"),
                    "hostkvm-1": guest(loaded, "kvm_hc_pvlock_wait")
                }
            })
        };
        let s = Settings::new(true, None, 1);
        let status = |ms: &[Measurement], m: Mode| {
            let x = ms.iter().find(|x| x.key.mode == m).unwrap();
            (x.status, x.note.clone().unwrap_or_default())
        };
        let ms = measurements(&unit2x(), &s, &result(true), None);
        let (st, note) = status(&ms, Mode::KickCpu);
        assert_eq!(st, Status::Failed, "{note}");
        assert!(
            note.starts_with("kickcpu-1: stalled or vanished during contended")
                && note.contains("the project's failure until shown otherwise"),
            "{note}"
        );
        assert_eq!(status(&ms, Mode::HostKvm).0, Status::Failed);
        // upstream's guest runs no code of the project: the platform's.
        assert_eq!(status(&ms, Mode::Upstream).0, Status::NotRun);
        // Lost before guest_pvlock was loaded: the platform's.
        let ms = measurements(&unit2x(), &s, &result(false), None);
        assert_eq!(status(&ms, Mode::KickCpu).0, Status::NotRun);
        // vmtest's platform verdict: the platform's, and the note says so.
        let ms = measurements_judged(
            &unit2x(),
            &s,
            &result(true),
            None,
            Some("vcpu-not-run: vCPU 1 ..."),
        );
        let (st, note) = status(&ms, Mode::KickCpu);
        assert_eq!(st, Status::NotRun);
        assert!(
            note.contains("(vmtest: the platform's: vcpu-not-run"),
            "{note}"
        );
        // Of two guests of a mode, the project's failure decides.
        let mut two = result(true);
        two["nodes"]["kickcpu-2"] = two["nodes"]["kickcpu-1"].clone();
        two["nodes"]["kickcpu-2"]["modules"] = serde_json::json!([]);
        let cells = [Cell {
            overcommit: Overcommit::Two,
            workload: Workload::Contended,
            mode: Mode::KickCpu,
        }];
        let ms = measurements(&plan(&cells, 1).remove(0), &s, &two, None);
        assert_eq!(ms[0].status, Status::Failed, "{:?}", ms[0].note);
    }

    #[test]
    fn timeouts_and_wrong_modes_are_recorded() {
        let result = serde_json::json!({
            "timed_out": false,
            "nodes": {
                "l1": { "booted": true, "done": true },
                "native-1": { "booted": true, "done": true,
                    "dmesg": ["[0.4] kvm-guest: PV spinlocks disabled, forced by \"nopvspin\" parameter"],
                    "steps": [{ "id": "contended", "call": "locktorture spin_lock 8 5", "rc": null, "timed_out": true }] },
                "upstream-1": { "booted": true, "done": true,
                    "dmesg": ["[0.4] kvm-guest: PV spinlocks enabled"],
                    "steps": [{ "id": "contended", "call": "locktorture spin_lock 8 5", "rc": 0, "secs": 7.1 }],
                    "locktorture": [{ "kind": "spin_lock", "writers": 8, "secs": 6.0, "total": 600, "max": 100, "min": 50,
                        "per_sec": 100.0, "fail": 0, "verdict": "SUCCESS" }] },
                "kickcpu-1": { "booted": true, "done": true,
                    "info": { "lock_ops": "pvlock", "kick": "kvm_hc_kick_cpu" },
                    "steps": [{ "id": "contended", "call": "locktorture spin_lock 8 5", "rc": 0 }],
                    "locktorture": [{ "kind": "spin_lock", "writers": 8, "secs": 6.0, "total": 600, "max": 100, "min": 0,
                        "per_sec": 100.0, "fail": 3, "verdict": "FAILURE" }] },
                "hostkvm-1": { "booted": true, "done": true,
                    "info": { "lock_ops": "pvlock", "kick": "kvm_hc_kick_cpu" },
                    "steps": [{ "id": "contended", "call": "locktorture spin_lock 8 5", "rc": 0 }] }
            }
        });
        let s = Settings::new(true, None, 1);
        let ms = measurements(&unit2x(), &s, &result, None);
        let st: Vec<Status> = ms.iter().map(|m| m.status).collect();
        assert_eq!(
            st,
            [
                Status::Timeout,
                Status::Ok,
                Status::Failed,
                Status::WrongMode
            ]
        );
        assert!(
            ms[0]
                .note
                .as_deref()
                .unwrap()
                .contains("within its 85 s bound"),
            "{:?}",
            ms[0].note
        );
        assert_eq!(ms[0].value, None);
        assert_eq!(ms[1].value, Some(100.0));
        assert_eq!(ms[1].fairness, Some(2.0));
        assert!(ms[2]
            .note
            .as_deref()
            .unwrap()
            .contains("FAILURE with 3 failures"));
        assert!(ms[3]
            .note
            .as_deref()
            .unwrap()
            .contains("not kvm_hc_pvlock_kick"));
    }

    #[test]
    fn stalled_guests() {
        let stalled = |g: &str, pv: bool| {
            serde_json::json!({ "booted": true, "done": false,
                "dmesg": [if pv { "[0.4] kvm-guest: PV spinlocks enabled" } else { "[0.4] kvm-guest: PV spinlocks disabled" }],
                "info": if g.starts_with("hostkvm") || g.starts_with("kickcpu") {
                    serde_json::json!({ "lock_ops": "pvlock", "kick": if g.starts_with("hostkvm") { "kvm_hc_pvlock_kick" } else { "kvm_hc_kick_cpu" } })
                } else { serde_json::json!({}) },
                "steps": [{ "id": "contended", "call": "locktorture spin_lock 8 5", "rc": null, "timed_out": false }] })
        };
        let result = serde_json::json!({ "nodes": {
            "l1": { "booted": true, "done": true },
            "native-1": stalled("native-1", false),
            "upstream-1": stalled("upstream-1", true),
            "kickcpu-1": stalled("kickcpu-1", true),
            "hostkvm-1": stalled("hostkvm-1", true),
        }});
        let ms = measurements(&unit2x(), &Settings::new(true, None, 1), &result, None);
        let st: Vec<Status> = ms.iter().map(|m| m.status).collect();
        // Native under overcommit stalls by itself: a timeout. The others
        // are the platform's: run again.
        assert_eq!(
            st,
            [
                Status::Timeout,
                Status::NotRun,
                Status::NotRun,
                Status::NotRun
            ]
        );
        assert!(ms[3]
            .note
            .as_deref()
            .unwrap()
            .contains("stalled or vanished during contended"));
    }

    #[test]
    fn a_harness_error_marks_every_cell() {
        let s = Settings::new(true, None, 1);
        let ms = measurements(&unit2x(), &s, &Value::Null, Some("cannot start qemu"));
        assert!(ms
            .iter()
            .all(|m| m.status == Status::NotRun && m.note.as_deref() == Some("cannot start qemu")));
    }

    fn lt_ok(writers: u64) -> Value {
        serde_json::json!([{ "kind": "spin_lock", "writers": writers, "secs": 10.0, "total": 1000, "max": 300,
            "min": 200, "per_sec": 100.0, "fail": 0, "verdict": "SUCCESS" }])
    }

    #[test]
    fn the_guest_pvlock_mode_and_the_limit_cell() {
        let cells = contended_2x(&[Mode::NativeTwo, Mode::KickCpu, Mode::HostKvm]);
        // Repetition 2: the order rotated left by one.
        let unit = plan(&cells, 2).remove(1);
        assert_eq!(
            unit.order(),
            [Mode::KickCpu, Mode::HostKvm, Mode::NativeTwo]
        );
        let step = serde_json::json!([{ "id": "contended", "call": "locktorture spin_lock 8 10", "rc": 0 },
            { "id": "stat-contended", "call": "stat" }]);
        let stat = |changes: i64| serde_json::json!([{ "dirs": { "guest": { "counters": { "kicks": 5, "mode_changes": changes } } } }]);
        let result = serde_json::json!({ "nodes": {
            "l1": { "booted": true, "done": true },
            "nativetwo-1": { "booted": true, "done": true,
                "dmesg": ["[0.4] kvm-guest: PV spinlocks disabled, forced by \"nopvspin\" parameter"],
                "steps": [{ "id": "contended", "call": "locktorture spin_lock 4 10", "rc": 0 }],
                "locktorture": lt_ok(4) },
            // kick=1 did not take: the guest waits in the project's
            // hypercall.
            "kickcpu-1": { "booted": true, "done": true,
                "info": { "lock_ops": "pvlock", "mode": "kvm_hc_pvlock_wait", "mode_at_load": "kvm_hc_pvlock_wait" },
                "steps": step, "stats": stat(0), "locktorture": lt_ok(8) },
            // The project's kick went away during an earlier workload:
            // no change during this one, but another mode all through it.
            "hostkvm-1": { "booted": true, "done": true,
                "info": { "lock_ops": "pvlock", "mode": "kvm_hc_pvlock_wait" },
                "steps": [{ "id": "stat-uncontended", "call": "stat" }, step[0], step[1]],
                "stats": [stat(1)[0], stat(1)[0]], "locktorture": lt_ok(8) },
        }});
        let s = Settings::new(false, None, 1);
        let ms = measurements(&unit, &s, &result, None);
        let by = |m: Mode| ms.iter().find(|x| x.key.mode == m).unwrap();
        let two = by(Mode::NativeTwo);
        assert_eq!(two.status, Status::Ok, "{:?}", two.note);
        assert_eq!(two.instances[0].name, "nativetwo-1");
        assert_eq!(two.value, Some(100.0));
        assert_eq!(two.position, Some(3));
        let kc = by(Mode::KickCpu);
        assert_eq!(kc.status, Status::WrongMode);
        assert_eq!(
            kc.note.as_deref(),
            Some("kickcpu-1: guest_pvlock runs mode 'kvm_hc_pvlock_wait', not hlt_kvm_hc_kick_cpu")
        );
        assert_eq!(kc.position, Some(1));
        let hk = by(Mode::HostKvm);
        assert_eq!(hk.status, Status::WrongMode);
        assert!(
            hk.note
                .as_deref()
                .unwrap()
                .contains("changed its mode 1 time(s)"),
            "{:?}",
            hk.note
        );
        // The same guests as they should be.
        let mut good = result.clone();
        good["nodes"]["kickcpu-1"]["info"]["mode"] = "hlt_kvm_hc_kick_cpu".into();
        good["nodes"]["hostkvm-1"]["stats"] = serde_json::json!([stat(0)[0], stat(0)[0]]);
        let ms = measurements(&unit, &s, &good, None);
        assert!(ms.iter().all(|m| m.status == Status::Ok), "{ms:?}");
        let kc = ms.iter().find(|x| x.key.mode == Mode::KickCpu).unwrap();
        assert_eq!(
            kc.instances[0].lock.as_deref(),
            Some("pvlock, mode hlt_kvm_hc_kick_cpu")
        );
        // A native-2vcpu guest is not overcommitted: a stall is the
        // platform's, to be run again, not a result.
        let mut stalled = good.clone();
        stalled["nodes"]["nativetwo-1"]["done"] = false.into();
        stalled["nodes"]["nativetwo-1"]["steps"][0]["rc"] = Value::Null;
        let ms = measurements(&unit, &s, &stalled, None);
        let two = ms.iter().find(|x| x.key.mode == Mode::NativeTwo).unwrap();
        assert_eq!(two.status, Status::NotRun, "{:?}", two.note);
    }

    #[test]
    fn stress_ng_results() {
        let cells: Vec<Cell> = [Mode::Native, Mode::HostKvm]
            .into_iter()
            .map(|mode| Cell {
                overcommit: Overcommit::Two,
                workload: Workload::StressNg,
                mode,
            })
            .collect();
        let unit = plan(&cells, 1).remove(0);
        let guest = |pv: bool, sn: Value| {
            serde_json::json!({ "booted": true, "done": true,
                "dmesg": [if pv { "[0.4] kvm-guest: PV spinlocks enabled" } else { "[0.4] kvm-guest: PV spinlocks disabled" }],
                "info": if pv { serde_json::json!({ "lock_ops": "pvlock", "mode": "kvm_hc_pvlock_wait" }) } else { serde_json::json!({}) },
                "steps": [{ "id": "stressng", "call": "stressng futex,sigq,eventfd 2 10 55", "rc": 0 }],
                "stressng": [sn] })
        };
        let ok = |r: f64| {
            serde_json::json!({ "stressors": ["futex", "sigq", "eventfd"], "ops_per_sec": r,
            "rates": { "futex": r / 2.0, "sigq": r * 4.0, "eventfd": r / 2.0 }, "rc": 0, "secs": 11.0, "timed_out": false })
        };
        let result = serde_json::json!({ "nodes": {
            "l1": { "booted": true, "done": true,
                "hypercalls": { "hostkvm-1:stressng": { "1886781441": 77 } } },
            "native-1": guest(false, ok(1000.0)),
            "native-2": guest(false, serde_json::json!({ "timed_out": true, "error": "timeout" })),
            "hostkvm-1": guest(true, ok(3000.0)),
            "hostkvm-2": guest(true, ok(5000.0)),
        }});
        let ms = measurements(&unit, &Settings::new(false, None, 1), &result, None);
        assert_eq!(ms[0].key.mode, Mode::Native);
        assert_eq!(ms[0].status, Status::Timeout);
        assert_eq!(
            ms[0].note.as_deref(),
            Some("native-2: stress-ng stopped at its bound")
        );
        assert_eq!(ms[1].status, Status::Ok);
        // Summed over the two guests.
        assert_eq!(ms[1].value, Some(8000.0));
        assert_eq!(ms[1].fairness, None);
        assert_eq!(ms[1].instances[0].stressng_rates["sigq"], 12000.0);
        assert_eq!(ms[1].instances[0].hypercalls["1886781441"], 77);
    }

    fn node(info: Value) -> Node {
        serde_json::from_value(serde_json::json!({ "booted": true, "info": info })).unwrap()
    }

    #[test]
    fn the_adaptive_lock_may_run_native_by_the_hosts_advice() {
        // At 1x the host advises "dedicated" and guest_pvlock parks its
        // lock: `info` says lock_ops native, adaptive_state native; the
        // mode line stays the lock's wait and kick.
        let parked = |mode: &str| {
            node(
                serde_json::json!({ "lock_ops": "native", "installed": "1", "mode": mode,
                "adaptive": "1", "adaptive_state": "native",
                "adaptive_reason": "the host says dedicated and steal time agrees",
                "advice": "dedicated=1 spin_threshold=0" }),
            )
        };
        assert_eq!(
            lock_of(&parked("kvm_hc_pvlock_wait"), Mode::HostKvm).as_deref(),
            Ok("pvlock (native by the host's advice), mode kvm_hc_pvlock_wait")
        );
        assert_eq!(
            lock_of(&parked("hlt_kvm_hc_kick_cpu"), Mode::KickCpu).as_deref(),
            Ok("pvlock (native by the host's advice), mode hlt_kvm_hc_kick_cpu")
        );
        // The mode check still applies.
        assert_eq!(
            lock_of(&parked("kvm_hc_pvlock_wait"), Mode::KickCpu),
            Err("guest_pvlock runs mode 'kvm_hc_pvlock_wait', not hlt_kvm_hc_kick_cpu".into())
        );
        // Running pvlock, as under overcommit: as before.
        let running = node(
            serde_json::json!({ "lock_ops": "pvlock", "mode": "kvm_hc_pvlock_wait",
            "adaptive": "1", "adaptive_state": "pvlock" }),
        );
        assert_eq!(
            lock_of(&running, Mode::HostKvm).as_deref(),
            Ok("pvlock, mode kvm_hc_pvlock_wait")
        );
        // Not installed: the native lock because guest_pvlock is not
        // there, not by its choice.
        let absent = node(
            serde_json::json!({ "lock_ops": "native", "installed": "0", "mode": "none",
            "adaptive": "0", "adaptive_state": "none" }),
        );
        for m in [Mode::KickCpu, Mode::HostKvm, Mode::Static, Mode::NoHint] {
            let e = lock_of(&absent, m).unwrap_err();
            assert_eq!(
                e,
                "guest_pvlock is not installed (lock_ops 'native', adaptive_state 'none')"
            );
        }
        // A guest_pvlock without the adaptive lines that is not installed.
        let old = node(serde_json::json!({ "lock_ops": "native" }));
        assert_eq!(
            lock_of(&old, Mode::HostKvm),
            Err("guest_pvlock is not installed (lock_ops 'native')".into())
        );
        // `info` read in the middle of a switch: installed and following
        // the host (what ran is measured per workload), not a wrong mode.
        for (ops, state) in [
            ("other", "pvlock"),
            ("native", "pvlock"),
            ("pvlock", "native"),
        ] {
            let n = node(
                serde_json::json!({ "lock_ops": ops, "mode": "kvm_hc_pvlock_wait",
                "adaptive": "1", "adaptive_state": state }),
            );
            assert_eq!(
                lock_of(&n, Mode::HostKvm),
                Ok("pvlock (switching when `info` was read), mode kvm_hc_pvlock_wait".into())
            );
        }
    }

    #[test]
    fn pvlock_static_runs_pvlock_with_adaptive_off() {
        let info = |ops: &str, adaptive: Option<&str>, state: &str| {
            let mut v = serde_json::json!({ "lock_ops": ops, "mode": "kvm_hc_pvlock_wait",
                "adaptive_state": state, "adaptive_reason": "adaptive=0" });
            if let Some(a) = adaptive {
                v["adaptive"] = a.into();
            }
            node(v)
        };
        assert_eq!(
            lock_of(&info("pvlock", Some("0"), "pvlock"), Mode::Static).as_deref(),
            Ok("pvlock (static, adaptive=0), mode kvm_hc_pvlock_wait")
        );
        // adaptive=0 did not take.
        let e = lock_of(&info("pvlock", Some("1"), "pvlock"), Mode::Static).unwrap_err();
        assert_eq!(
            e,
            "pvlock-static guest's guest_pvlock follows the host (adaptive '1', not 0)"
        );
        assert!(lock_of(&info("pvlock", None, "pvlock"), Mode::Static).is_err());
        let e = lock_of(&info("native", Some("1"), "native"), Mode::Static).unwrap_err();
        assert!(e.contains("adaptive=0 did not take"), "{e}");
        // The mode: the project's lock wait, as pvlock-hostkvm.
        let mut kick = info("pvlock", Some("0"), "pvlock");
        kick.info
            .insert("mode".into(), "hlt_kvm_hc_kick_cpu".into());
        assert_eq!(
            lock_of(&kick, Mode::Static),
            Err("guest_pvlock runs mode 'hlt_kvm_hc_kick_cpu', not kvm_hc_pvlock_wait".into())
        );
    }

    #[test]
    fn pvlock_nohint_runs_pvlock_with_the_hint_observed() {
        let info = |ops: &str, state: &str, hint: Option<&str>| {
            let mut v = serde_json::json!({ "lock_ops": ops, "mode": "kvm_hc_pvlock_wait",
                "adaptive": "1", "adaptive_state": state });
            if let Some(h) = hint {
                v["hint"] = h.into();
            }
            node(v)
        };
        assert_eq!(
            lock_of(&info("pvlock", "pvlock", Some("2")), Mode::NoHint).as_deref(),
            Ok("pvlock, hint 2 (observed, none deferred), mode kvm_hc_pvlock_wait")
        );
        // Adaptive as it ships: native by the host's advice is accepted,
        // as for pvlock-hostkvm (it does not happen under overcommit).
        assert_eq!(
            lock_of(&info("native", "native", Some("2")), Mode::NoHint).as_deref(),
            Ok("pvlock (native by the host's advice), hint 2 (observed, none deferred), mode kvm_hc_pvlock_wait")
        );
        assert_eq!(
            lock_of(&info("other", "pvlock", Some("2")), Mode::NoHint).as_deref(),
            Ok("pvlock (switching when `info` was read), hint 2 (observed, none deferred), mode kvm_hc_pvlock_wait")
        );
        // hint=2 did not take: the host defers (1), or sees nothing (0, a
        // hint the host refused), or a guest_pvlock without the hint.
        for (h, shown) in [(Some("1"), "1"), (Some("0"), "0"), (None, "")] {
            assert_eq!(
                lock_of(&info("pvlock", "pvlock", h), Mode::NoHint),
                Err(format!(
                    "pvlock-nohint guest's guest_pvlock has hint '{shown}', not 2 (the host observing only)"
                ))
            );
        }
        // pvlock-hostkvm must have the hint on (or be from before it).
        assert!(lock_of(&info("pvlock", "pvlock", Some("1")), Mode::HostKvm).is_ok());
        assert!(lock_of(&info("pvlock", "pvlock", None), Mode::HostKvm).is_ok());
        assert!(lock_of(&info("pvlock", "pvlock", Some("2")), Mode::HostKvm).is_err());
        assert!(lock_of(&info("pvlock", "pvlock", Some("0")), Mode::HostKvm).is_err());
        // The mode: the project's lock wait, as pvlock-hostkvm.
        let mut kick = info("pvlock", "pvlock", Some("2"));
        kick.info
            .insert("mode".into(), "hlt_kvm_hc_kick_cpu".into());
        assert_eq!(
            lock_of(&kick, Mode::NoHint),
            Err("guest_pvlock runs mode 'hlt_kvm_hc_kick_cpu', not kvm_hc_pvlock_wait".into())
        );
    }

    /// L1's steps as the unit's scenario plans them: (id, call) as the
    /// console reports them (`step-begin ID CALL`).
    fn l1_steps(unit: &Unit, s: &Settings) -> Vec<(String, String)> {
        let dir = std::env::temp_dir().join(format!(
            "pvlock-bench-l1-{}-{}",
            std::process::id(),
            unit.name()
        ));
        let sc = unit.scenario(s, &dir).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        sc.plans()[0]
            .1
            .lines()
            .filter_map(|l| {
                let mut w = l.strip_prefix("step ")?.splitn(3, ' ');
                let id = w.next()?.to_string();
                let _timeout = w.next()?;
                Some((id, w.next()?.to_string()))
            })
            .collect()
    }

    /// A pvlock-stat snapshot of L1 with these host counters.
    fn host_snapshot(holder_preemptions: i64, grants: i64) -> Value {
        serde_json::json!({ "dirs": { "host": { "counters": {
            "kicks": 7, "holder_preemptions": holder_preemptions, "grants": grants } } } })
    }

    #[test]
    fn why_no_deferral_from_the_reasons() {
        let snap = |k: i64| {
            serde_json::json!({ "dirs": { "host": { "counters": {
                "holder_preemptions": 100 * k, "grants": 70 * k,
                "not_deferred_expired": 20 * k, "not_deferred_tick": 4 * k,
                "not_deferred_running": 3 * k, "not_deferred_kick": 2 * k,
                "not_deferred_observed": 0, "not_deferred_off": k,
                "holders_preempted": 50 * k } } } })
        };
        let h = HostRun::between(&doc(snap(1)), &doc(snap(3))).unwrap();
        assert_eq!((h.holder_preemptions, h.grants), (200, 140));
        assert_eq!(h.holders_preempted, Some(100));
        assert_eq!(
            h.why_not,
            Some(NotDeferred {
                expired: 40,
                tick: 8,
                running: 6,
                kick: 4,
                observed: 0,
                off: 2
            })
        );
        // A host_kvm that does not say why: the counts without reasons.
        let h = HostRun::between(&doc(host_snapshot(5, 3)), &doc(host_snapshot(305, 203))).unwrap();
        assert_eq!((h.not_deferred(), h.why_not), (100, None));
        assert_eq!(h.holders_preempted, None);
    }

    #[test]
    fn host_counters_per_mode_from_l1s_snapshots() {
        // Repetition 2 of the three modes of the hint and static goals at
        // 2x: static, nohint, hostkvm.
        let cells = contended_2x(&[Mode::HostKvm, Mode::Static, Mode::NoHint]);
        let unit = plan(&cells, 2).remove(1);
        assert_eq!(unit.order(), [Mode::Static, Mode::NoHint, Mode::HostKvm]);
        let s = Settings::new(true, None, 1);
        let steps = l1_steps(&unit, &s);
        let ids: Vec<&str> = steps.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "host_kvm",
                "host-stat-start",
                "l2-static",
                "host-stat-static",
                "l2-nohint",
                "host-stat-nohint",
                "l2-hostkvm",
                "host-stat-hostkvm",
                "warnings9"
            ]
        );
        // What host_kvm counted, cumulative: (holder preemptions, grants)
        // at each snapshot. static's guest 300 / 200, nohint's 500 / 0
        // (observed only), hostkvm's 400 / 320.
        let cumulative = [(5, 3), (305, 203), (805, 203), (1205, 523)];
        let l1 = |upto: usize, errors: Vec<&str>| {
            let st: Vec<Value> = steps
                .iter()
                .map(|(id, call)| serde_json::json!({ "id": id, "call": call, "rc": 0 }))
                .collect();
            let stats: Vec<Value> = cumulative[..upto]
                .iter()
                .map(|(h, g)| host_snapshot(*h, *g))
                .collect();
            serde_json::json!({ "booted": true, "done": true, "steps": st,
                "stats": stats, "stat_errors": errors })
        };
        let result = |l1: Value| serde_json::json!({ "nodes": { "l1": l1 } });
        let host = |ms: &[Measurement], m: Mode| ms.iter().find(|x| x.key.mode == m).unwrap().host;
        let ms = measurements(&unit, &s, &result(l1(4, vec![])), None);
        let run = |hp, g| {
            Some(HostRun {
                holder_preemptions: hp,
                grants: g,
                why_not: None,
                holders_preempted: None,
            })
        };
        assert_eq!(host(&ms, Mode::Static), run(300, 200));
        assert_eq!(host(&ms, Mode::NoHint), run(500, 0));
        let hk = host(&ms, Mode::HostKvm).unwrap();
        assert_eq!(
            hk,
            HostRun {
                holder_preemptions: 400,
                grants: 320,
                why_not: None,
                holders_preempted: None,
            }
        );
        assert_eq!(hk.not_deferred(), 80);
        assert_eq!(hk.deferred_share(), Some(0.8));
        assert_eq!(HostRun::default().deferred_share(), None);
        // The guests are not there (not-run): the host's counts still are.
        assert!(ms.iter().all(|m| m.status == Status::NotRun));
        // L1 stopped during nohint's guests: its snapshot after them never
        // came (the step never finished), nor hostkvm's.
        let mut stopped = l1(2, vec![]);
        stopped["done"] = false.into();
        stopped["steps"] = Value::Array(stopped["steps"].as_array().unwrap()[..6].to_vec());
        stopped["steps"][4]["rc"] = Value::Null;
        stopped["steps"][5]["rc"] = Value::Null;
        let ms = measurements(&unit, &s, &result(stopped), None);
        assert_eq!(host(&ms, Mode::Static), run(300, 200));
        assert_eq!(host(&ms, Mode::NoHint), None);
        assert_eq!(host(&ms, Mode::HostKvm), None);
        // A snapshot failed: which one is not known, so none is used.
        let ms = measurements(&unit, &s, &result(l1(3, vec!["no debugfs"])), None);
        assert!(ms.iter().all(|m| m.host.is_none()));
        // Zeroed in between, or a host_kvm without the counters: nothing
        // to say about that mode.
        let mut zeroed = l1(4, vec![]);
        zeroed["stats"][2] = host_snapshot(0, 0);
        let ms = measurements(&unit, &s, &result(zeroed), None);
        assert_eq!(host(&ms, Mode::Static), run(300, 200));
        assert_eq!(host(&ms, Mode::NoHint), None);
        assert_eq!(host(&ms, Mode::HostKvm), run(1205, 523));
        let mut old = l1(4, vec![]);
        for k in 0..4 {
            old["stats"][k] =
                serde_json::json!({ "dirs": { "host": { "counters": { "kicks": k } } } });
        }
        let ms = measurements(&unit, &s, &result(old), None);
        assert!(ms.iter().all(|m| m.host.is_none()));
        // A harness error: nothing at all.
        let ms = measurements(&unit, &s, &result(l1(4, vec![])), Some("cannot start qemu"));
        assert!(ms.iter().all(|m| m.host.is_none()));
        // The host side keeps the last snapshot, after the last guest.
        assert_eq!(
            host_side(&result(l1(4, vec![])))
                .host_stat
                .unwrap()
                .counters(Kind::Host)
                .unwrap()["grants"],
            523
        );
    }

    #[test]
    fn a_measurement_from_before_the_host_counters_still_reads() {
        let m = Measurement {
            cell: "2x/contended/pvlock-hostkvm".into(),
            key: Cell {
                overcommit: Overcommit::X2,
                workload: Workload::Contended,
                mode: Mode::HostKvm,
            },
            rep: 1,
            unit: "r1-2x".into(),
            position: Some(5),
            status: Status::Ok,
            note: None,
            value: Some(100.0),
            fairness: Some(1.5),
            instances: vec![],
            host: Some(HostRun {
                holder_preemptions: 10,
                grants: 9,
                why_not: None,
                holders_preempted: Some(4),
            }),
        };
        let mut v = serde_json::to_value(&m).unwrap();
        assert_eq!(v["host"]["holder_preemptions"], 10);
        let back: Measurement = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back, m);
        v.as_object_mut().unwrap().remove("host");
        let old: Measurement = serde_json::from_value(v).unwrap();
        assert_eq!(old.host, None);
        assert_eq!(old.value, Some(100.0));
    }

    /// A pvlock-stat snapshot with these guest counters.
    fn snapshot(counters: &[(&str, i64)]) -> Value {
        let c: serde_json::Map<String, Value> = counters
            .iter()
            .map(|(k, v)| (k.to_string(), (*v).into()))
            .collect();
        serde_json::json!({ "dirs": { "guest": { "counters": c } } })
    }

    #[test]
    fn adaptive_switches_and_share_from_two_snapshots() {
        let before = snapshot(&[
            ("kicks", 10),
            ("switches_to_native", 1),
            ("switches_to_pvlock", 0),
            ("time_native_ns", 2_000_000_000),
            ("time_pvlock_ns", 1_500_000_000),
            ("switch_last_ns", 300_000),
            ("switch_max_ns", 300_000),
        ]);
        // During the workload: back to pvlock once, and to native again;
        // 9.7 s native, 0.3 s pvlock.
        let after = snapshot(&[
            ("kicks", 25),
            ("switches_to_native", 2),
            ("switches_to_pvlock", 1),
            ("time_native_ns", 11_700_000_000),
            ("time_pvlock_ns", 1_800_000_000),
            ("switch_last_ns", 200_000),
            ("switch_max_ns", 450_000),
        ]);
        let a = AdaptiveRun::between(&counters_of(&before), &counters_of(&after)).unwrap();
        assert_eq!((a.to_native, a.to_pvlock), (1, 1));
        assert_eq!((a.native_ns, a.pvlock_ns), (9_700_000_000, 300_000_000));
        assert!((a.native_share.unwrap() - 0.97).abs() < 1e-12);
        assert_eq!(a.switch_max_ns, Some(450_000));
        // Nothing before: since load.
        let a = AdaptiveRun::between(&BTreeMap::new(), &counters_of(&after)).unwrap();
        assert_eq!((a.to_native, a.to_pvlock), (2, 1));
        // No time passed on either lock: no share.
        let a = AdaptiveRun::between(&counters_of(&after), &counters_of(&after)).unwrap();
        assert_eq!((a.to_native, a.native_share), (0, None));
        // Zeroed in between: nothing to say.
        assert_eq!(
            AdaptiveRun::between(&counters_of(&after), &counters_of(&before)),
            None
        );
        // A guest_pvlock without the adaptive counters.
        let old = counters_of(&snapshot(&[("kicks", 3)]));
        assert_eq!(AdaptiveRun::between(&BTreeMap::new(), &old), None);
        // Two guests: the sums, the share of the sums, the longest switch.
        let one = AdaptiveRun::between(&counters_of(&before), &counters_of(&after)).unwrap();
        let idle = AdaptiveRun {
            pvlock_ns: 10_000_000_000,
            switch_max_ns: Some(100),
            ..Default::default()
        };
        let both = AdaptiveRun::sum([&one, &idle]).unwrap();
        assert_eq!(
            (both.to_native, both.native_ns, both.pvlock_ns),
            (1, 9_700_000_000, 10_300_000_000)
        );
        assert!((both.native_share.unwrap() - 0.485).abs() < 1e-12);
        assert_eq!(both.switch_max_ns, Some(450_000));
        assert_eq!(AdaptiveRun::sum([]), None);
    }

    #[test]
    fn each_workload_gets_what_the_adaptive_lock_ran_during_it() {
        // A 2x pvlock-hostkvm guest with the new plan: a snapshot right
        // before the first workload and one after each; it ran pvlock,
        // then switched to native once during contended.
        let cells: Vec<Cell> = [Workload::Uncontended, Workload::Contended]
            .into_iter()
            .map(|workload| Cell {
                overcommit: Overcommit::X2,
                workload,
                mode: Mode::HostKvm,
            })
            .collect();
        let unit = plan(&cells, 1).remove(0);
        let stat = |to_native: i64, native_s: i64, pvlock_s: i64| {
            snapshot(&[
                ("mode_changes", 0),
                ("switches_to_native", to_native),
                ("switches_to_pvlock", 0),
                ("time_native_ns", native_s * 1_000_000_000),
                ("time_pvlock_ns", pvlock_s * 1_000_000_000),
            ])
        };
        let result = serde_json::json!({ "nodes": {
            "l1": { "booted": true, "done": true },
            "hostkvm-1": { "booted": true, "done": true,
                "info": { "lock_ops": "pvlock", "mode": "kvm_hc_pvlock_wait", "adaptive": "1", "adaptive_state": "pvlock" },
                "steps": [
                    { "id": "load1", "call": "load guest_pvlock", "rc": 0 },
                    { "id": "stat-start", "call": "stat", "rc": 0 },
                    { "id": "uncontended", "call": "locktorture spin_lock 1 10", "rc": 0 },
                    { "id": "stat-uncontended", "call": "stat", "rc": 0 },
                    { "id": "contended", "call": "locktorture spin_lock 8 10", "rc": 0 },
                    { "id": "stat-contended", "call": "stat", "rc": 0 }],
                "stats": [stat(0, 0, 5), stat(0, 0, 17), stat(1, 3, 26)],
                "locktorture": [lt_ok(1)[0].clone(), lt_ok(8)[0].clone()] },
        }});
        let ms = measurements(&unit, &Settings::new(false, None, 1), &result, None);
        let by = |w: Workload| ms.iter().find(|m| m.key.workload == w).unwrap();
        let un = by(Workload::Uncontended);
        assert_eq!(un.status, Status::Ok, "{:?}", un.note);
        // The settling and `info` before the start snapshot are not
        // counted.
        let a = un.instances[0].adaptive.unwrap();
        assert_eq!(
            (a.to_native, a.to_pvlock, a.pvlock_ns),
            (0, 0, 12_000_000_000)
        );
        assert_eq!(a.native_share, Some(0.0));
        let co = by(Workload::Contended);
        let a = co.adaptive().unwrap();
        assert_eq!(
            (a.to_native, a.native_ns, a.pvlock_ns),
            (1, 3_000_000_000, 9_000_000_000)
        );
        assert_eq!(a.native_share, Some(0.25));
        assert_eq!(co.instances[0].counters["switches_to_native"], 1);
    }

    #[test]
    fn an_instance_without_the_adaptive_record_still_reads() {
        // An instance as results.json had it before the adaptive lock.
        let v = serde_json::json!({ "name": "hostkvm-1", "status": "ok", "note": null,
            "lock": "pvlock, mode kvm_hc_pvlock_wait", "total": 1000, "max": 300, "min": 200,
            "fail": 0, "lt_secs": 10.0, "per_sec": 100.0, "hackbench_time": null,
            "hackbench_groups": null, "hackbench_loops": null, "step_secs": 12.0,
            "hypercalls": {}, "counters": { "kicks": 5 }, "stat": null, "problems": [] });
        let i: Instance = serde_json::from_value(v).unwrap();
        assert_eq!(i.adaptive, None);
        assert_eq!(i.counters["kicks"], 5);
        // And one with it, both ways.
        let mut i2 = i.clone();
        i2.adaptive = AdaptiveRun::between(
            &BTreeMap::new(),
            &counters_of(&snapshot(&[
                ("switches_to_native", 0),
                ("switches_to_pvlock", 0),
                ("time_native_ns", 0),
                ("time_pvlock_ns", 5),
            ])),
        );
        let back: Instance = serde_json::from_value(serde_json::to_value(&i2).unwrap()).unwrap();
        assert_eq!(back, i2);
        assert_eq!(back.adaptive.unwrap().native_share, Some(0.0));
    }
}

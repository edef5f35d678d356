// SPDX-License-Identifier: GPL-2.0

//! The arithmetic: medians with their spread and a distribution-free
//! interval for the median, ratios taken inside each repetition, the goals
//! decided on those intervals, what the adaptive lock ran in each cell,
//! what host_kvm counted over each guest_pvlock mode's guests (the lock
//! holders it preempted and the preemptions it deferred), and how many
//! measurements each mode lost.

use crate::extract::{AdaptiveRun, HostRun, Measurement, Status};
use crate::matrix::{Cell, Mode, Overcommit, Workload};
use pvlock_common::fmt::{fmt_count_short, fmt_num};
use pvlock_common::quantile::median_midpoint;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The coverage the interval for a median is chosen for (see
/// [`interval_rank`]).
pub const COVERAGE: f64 = 0.90;

/// P(X <= j) for X ~ Binomial(n, 1/2).
pub fn binomial_half_cdf(n: usize, j: usize) -> f64 {
    // P(X = i), from P(X = 0) = 2^-n by P(i+1) = P(i) (n-i) / (i+1).
    let mut p = 0.5f64.powi(n.min(i32::MAX as usize) as i32);
    let mut sum = 0.0;
    for i in 0..=j.min(n) {
        sum += p;
        p = p * (n - i) as f64 / (i + 1) as f64;
    }
    sum.min(1.0)
}

/// The probability that [x(k), x(n+1-k)], of n values sorted x(1..n) drawn
/// independently from one continuous distribution, holds that
/// distribution's median: 1 - 2 P(Binomial(n, 1/2) <= k-1). `k` is at
/// least 1.
pub fn interval_coverage(n: usize, k: usize) -> f64 {
    (1.0 - 2.0 * binomial_half_cdf(n, k.max(1) - 1)).max(0.0)
}

/// The rank k of the order-statistic interval for the median of n values:
/// the largest k whose coverage is at least `level`, or 1 (min..max) if
/// even that falls short; with its coverage.
pub fn interval_rank(n: usize, level: f64) -> (usize, f64) {
    let mut k = 1;
    while 2 * (k + 1) <= n + 1 && interval_coverage(n, k + 1) >= level {
        k += 1;
    }
    (k, interval_coverage(n, k))
}

/// Median, minimum, maximum and the interval for the median of `n`
/// values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Agg {
    /// The median (the mean of the middle two of an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// How many values.
    pub n: usize,
    /// The distribution-free interval for the median, [x(k), x(n+1-k)] of
    /// the sorted values with k from [`interval_rank`]: its low end.
    #[serde(default)]
    pub lo: f64,
    /// Its high end.
    #[serde(default)]
    pub hi: f64,
    /// The probability that it holds the median (below [`COVERAGE`] when
    /// there are too few values even for min..max).
    #[serde(default)]
    pub coverage: f64,
}

/// `None` for no values. The median of an even count is the mean of the
/// middle two ([`median_midpoint`]). Infinite values (a writer that never
/// got the lock) sort last; NaN values are left out.
pub fn agg(values: &[f64]) -> Option<Agg> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let (k, coverage) = interval_rank(n, COVERAGE);
    Some(Agg {
        median: median_midpoint(&v),
        min: v[0],
        max: v[n - 1],
        n,
        lo: v[k - 1],
        hi: v[n - k],
        coverage,
    })
}

/// One cell over the repetitions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CellSummary {
    /// The cell's id.
    pub cell: String,
    /// The cell.
    #[serde(flatten)]
    pub key: Cell,
    /// Index r-1: repetition r's value (`None`: not measured).
    pub per_rep: Vec<Option<f64>>,
    /// Index r-1: how repetition r's measurement ended (`None`: none).
    pub statuses: Vec<Option<Status>>,
    /// The values over the repetitions.
    pub value: Option<Agg>,
    /// locktorture's Max/Min over the repetitions.
    pub fairness: Option<Agg>,
    /// What guest_pvlock's adaptive lock ran during the cell's workload,
    /// over the repetitions (`None`: no guest_pvlock, or nothing
    /// recorded).
    #[serde(default)]
    pub adaptive: Option<AdaptiveSummary>,
}

/// What the adaptive lock ran in one cell, over the repetitions whose
/// measurement is ok (the ones its values and ratios come from).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AdaptiveSummary {
    /// Index r-1: repetition r's, over the cell's guests (`None`: not
    /// measured, not ok, or not recorded).
    pub per_rep: Vec<Option<AdaptiveRun>>,
    /// The share of the workload's time on the native lock, over the
    /// repetitions.
    pub native_share: Option<Agg>,
    /// Switches to the native lock, over every repetition and guest.
    pub to_native: i64,
    /// Switches back to pvlock, likewise.
    pub to_pvlock: i64,
    /// The repetitions with a record.
    pub n: usize,
}

/// What the adaptive lock ran in the cell measured by `ms` over `reps`
/// repetitions; `None` if no ok measurement recorded it.
fn adaptive_summary(ms: &[Measurement], c: &Cell, reps: u32) -> Option<AdaptiveSummary> {
    let per_rep: Vec<Option<AdaptiveRun>> = (1..=reps)
        .map(|r| {
            ms.iter()
                .find(|m| m.key == *c && m.rep == r && m.status == Status::Ok)
                .and_then(Measurement::adaptive)
        })
        .collect();
    let runs: Vec<&AdaptiveRun> = per_rep.iter().flatten().collect();
    if runs.is_empty() {
        return None;
    }
    let shares: Vec<f64> = runs.iter().filter_map(|a| a.native_share).collect();
    Some(AdaptiveSummary {
        native_share: agg(&shares),
        to_native: runs.iter().map(|a| a.to_native).sum(),
        to_pvlock: runs.iter().map(|a| a.to_pvlock).sum(),
        n: runs.len(),
        per_rep,
    })
}

/// What host_kvm counted over one guest_pvlock mode's guests at one
/// overcommit level ([`HostRun`]: their whole boot, every workload of the
/// mode), per repetition and over the repetitions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HostSummary {
    /// Where.
    pub overcommit: Overcommit,
    /// The mode.
    pub mode: Mode,
    /// Index r-1: repetition r's (`None`: not recorded, or not every
    /// measurement of the mode at that level in that repetition is ok
    /// and from one L1 boot: the counts would not be over the same work).
    pub per_rep: Vec<Option<HostRun>>,
    /// Lock holders' preemptions per L1 boot, over the repetitions.
    pub holder_preemptions: Option<Agg>,
    /// Of those, the ones host_kvm deferred.
    pub grants: Option<Agg>,
    /// Of those, the ones it did not defer.
    pub not_deferred: Option<Agg>,
    /// Of those, the ones it did not defer because this tick's grant had
    /// run out, because it had ended otherwise, because a grant was
    /// running, and on the way back from a kick (`None` without
    /// host_kvm's reasons).
    pub not_deferred_why: Option<[Agg; 4]>,
    /// vCPU threads preempted in a critical section, whatever preempted
    /// them (the scheduler's count; `None` without it).
    pub holders_preempted: Option<Agg>,
    /// The share deferred, grants / holder preemptions, over the
    /// repetitions that had a holder preempted.
    pub deferred_share: Option<Agg>,
    /// The repetitions with a record.
    pub n: usize,
}

/// The critical-section hint on against off at one overcommit level, from
/// host_kvm's counts in the same L1 boot: the holders' preemptions
/// pvlock-hostkvm's guests still suffered (not deferred) over those of
/// pvlock-nohint's guests (whose hint the host only observes). Below 1:
/// fewer preemptions of vCPUs in a critical section with the hint.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HintSummary {
    /// Where.
    pub overcommit: Overcommit,
    /// Index r-1: repetition r's ratio (`None`: either not recorded, or
    /// pvlock-nohint's guests had no holder preempted).
    pub per_rep: Vec<Option<f64>>,
    /// The ratios over the repetitions.
    pub agg: Option<Agg>,
}

/// What host_kvm counted over `mode`'s guests at `oc` in repetition
/// `rep`: the record of its measurements there (every cell of `cells` of
/// that mode and level), if each is ok and all come from one L1 boot.
fn host_run(
    ms: &[Measurement],
    cells: &[Cell],
    oc: Overcommit,
    mode: Mode,
    rep: u32,
) -> Option<HostRun> {
    let mut run: Option<(&str, HostRun)> = None;
    for c in cells
        .iter()
        .filter(|c| c.overcommit == oc && c.mode == mode)
    {
        let m = ms.iter().find(|m| m.key == *c && m.rep == rep)?;
        if m.status != Status::Ok {
            return None;
        }
        let h = m.host?;
        match run {
            None => run = Some((m.unit.as_str(), h)),
            Some((unit, _)) if unit != m.unit => return None,
            Some(_) => {}
        }
    }
    run.map(|(_, h)| h)
}

/// [`HostSummary`] of every guest_pvlock mode and level of `cells` that
/// recorded something.
fn host_summaries(ms: &[Measurement], cells: &[Cell], reps: u32) -> Vec<HostSummary> {
    let mut out = Vec::new();
    for oc in Overcommit::ALL {
        for mode in Mode::ALL.into_iter().filter(|m| m.loads_guest_pvlock()) {
            let per_rep: Vec<Option<HostRun>> = (1..=reps)
                .map(|r| host_run(ms, cells, oc, mode, r))
                .collect();
            let runs: Vec<&HostRun> = per_rep.iter().flatten().collect();
            if runs.is_empty() {
                continue;
            }
            let of = |f: &dyn Fn(&HostRun) -> Option<f64>| {
                agg(&runs.iter().filter_map(|h| f(h)).collect::<Vec<_>>())
            };
            out.push(HostSummary {
                overcommit: oc,
                mode,
                holder_preemptions: of(&|h: &HostRun| Some(h.holder_preemptions as f64)),
                grants: of(&|h: &HostRun| Some(h.grants as f64)),
                not_deferred: of(&|h: &HostRun| Some(h.not_deferred() as f64)),
                holders_preempted: of(&|h: &HostRun| h.holders_preempted.map(|v| v as f64)),
                not_deferred_why: (|| {
                    let by = |f: fn(&crate::extract::NotDeferred) -> i64| {
                        of(&|h: &HostRun| h.why_not.as_ref().map(|w| f(w) as f64))
                    };
                    Some([
                        by(|w| w.expired)?,
                        by(|w| w.tick)?,
                        by(|w| w.running)?,
                        by(|w| w.kick)?,
                    ])
                })(),
                deferred_share: of(&HostRun::deferred_share),
                n: runs.len(),
                per_rep,
            });
        }
    }
    out
}

/// [`HintSummary`] of every level with both pvlock-hostkvm's and
/// pvlock-nohint's records.
fn hint_summaries(host: &[HostSummary]) -> Vec<HintSummary> {
    let mut out = Vec::new();
    for oc in Overcommit::ALL {
        let of = |m: Mode| host.iter().find(|h| h.overcommit == oc && h.mode == m);
        let (Some(on), Some(off)) = (of(Mode::HostKvm), of(Mode::NoHint)) else {
            continue;
        };
        let per_rep: Vec<Option<f64>> = on
            .per_rep
            .iter()
            .zip(&off.per_rep)
            .map(|(a, b)| match (a, b) {
                (Some(a), Some(b)) if b.holder_preemptions > 0 => {
                    Some(a.not_deferred() as f64 / b.holder_preemptions as f64)
                }
                _ => None,
            })
            .collect();
        out.push(HintSummary {
            overcommit: oc,
            agg: agg(&per_rep.iter().flatten().copied().collect::<Vec<_>>()),
            per_rep,
        });
    }
    out
}

/// pvlock against a baseline, computed inside each repetition.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Ratio {
    /// Where.
    pub overcommit: Overcommit,
    /// What.
    pub workload: Workload,
    /// The pvlock mode measured.
    pub pvlock: Mode,
    /// The mode it is compared with.
    pub base: Mode,
    /// How much better pvlock did: throughput pvlock / base, or for
    /// hackbench time base / pvlock. Above 1: pvlock is better.
    pub per_rep: Vec<Option<f64>>,
    /// The ratios over the repetitions that measured both.
    pub agg: Option<Agg>,
}

impl Ratio {
    /// `hostkvm / upstream`.
    pub fn name(&self) -> String {
        format!("{} / {}", self.pvlock.short(), self.base.short())
    }
}

/// How one mode's planned measurements came out.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Loss {
    /// The mode.
    pub mode: Option<Mode>,
    /// Its cells times the repetitions.
    pub planned: usize,
    /// Of those, how many have a result (status ok).
    pub ok: usize,
    /// Planned but without a result.
    pub missing: usize,
    /// Every measurement of the mode the runs made, make-up runs included
    /// (the ones used and the ones a make-up run replaced or repeated).
    pub attempts: usize,
    /// The attempts by how they ended (`ok`, `not-run`, `wrong-mode`,
    /// `timeout`, `failed`).
    pub by_status: BTreeMap<String, usize>,
    /// The share of the attempts that gave no result.
    pub loss_rate: Option<f64>,
}

/// Everything the report shows.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// One per cell of the matrix.
    pub cells: Vec<CellSummary>,
    /// pvlock / native, / upstream, / native-2vcpu where both ran.
    pub ratios: Vec<Ratio>,
    /// Fairness: pvlock's Max/Min divided by upstream's, per repetition
    /// (at most 1: pvlock is no less fair).
    pub fairness_ratios: Vec<Ratio>,
    /// The goals and how the run did.
    pub goals: Vec<Goal>,
    /// Per mode: measurements planned, measured and lost.
    #[serde(default)]
    pub losses: Vec<Loss>,
    /// Per guest_pvlock mode and level: what host_kvm counted over its
    /// guests (lock holders preempted, preemptions deferred).
    #[serde(default)]
    pub host: Vec<HostSummary>,
    /// Per level: the holders' preemptions not deferred with the hint on
    /// over those with it off.
    #[serde(default)]
    pub hint: Vec<HintSummary>,
}

impl Summary {
    /// The summary of one cell, if it is in the matrix.
    pub fn cell(&self, oc: Overcommit, w: Workload, m: Mode) -> Option<&CellSummary> {
        self.cells
            .iter()
            .find(|c| c.key.overcommit == oc && c.key.workload == w && c.key.mode == m)
    }

    /// The ratio `pv / base`, if both are in the matrix.
    pub fn ratio(&self, oc: Overcommit, w: Workload, pv: Mode, base: Mode) -> Option<&Ratio> {
        self.ratios
            .iter()
            .find(|r| r.overcommit == oc && r.workload == w && r.pvlock == pv && r.base == base)
    }

    /// The fairness ratio of `pv`, if it and upstream are in the matrix.
    pub fn fairness_ratio(&self, oc: Overcommit, w: Workload, pv: Mode) -> Option<&Ratio> {
        self.fairness_ratios
            .iter()
            .find(|r| r.overcommit == oc && r.workload == w && r.pvlock == pv)
    }

    /// What host_kvm counted over `m`'s guests at `oc`, if recorded.
    pub fn host(&self, oc: Overcommit, m: Mode) -> Option<&HostSummary> {
        self.host.iter().find(|h| h.overcommit == oc && h.mode == m)
    }

    /// The hint on / off comparison of host_kvm's counts at `oc`, if both
    /// were recorded.
    pub fn hint(&self, oc: Overcommit) -> Option<&HintSummary> {
        self.hint.iter().find(|h| h.overcommit == oc)
    }
}

fn per_rep<F: Fn(&Measurement) -> Option<f64>>(
    ms: &[Measurement],
    c: &Cell,
    reps: u32,
    f: F,
) -> Vec<Option<f64>> {
    (1..=reps)
        .map(|r| ms.iter().find(|m| m.key == *c && m.rep == r).and_then(&f))
        .collect()
}

fn ok_value(m: &Measurement) -> Option<f64> {
    if m.status == Status::Ok {
        m.value
    } else {
        None
    }
}

fn ok_fairness(m: &Measurement) -> Option<f64> {
    if m.status == Status::Ok {
        m.fairness
    } else {
        None
    }
}

fn ratio_series(
    a: &[Option<f64>],
    b: &[Option<f64>],
    f: impl Fn(f64, f64) -> f64,
) -> Vec<Option<f64>> {
    a.iter()
        .zip(b)
        .map(|(x, y)| match (x, y) {
            (Some(x), Some(y)) => Some(f(*x, *y)),
            _ => None,
        })
        .collect()
}

/// Per mode: the measurements `cells` x `reps` planned, those with a
/// result in `ms` (the ones used), and every attempt in `ms` and `unused`
/// (replaced or repeated by make-up runs) by status.
pub fn losses(ms: &[Measurement], unused: &[Measurement], cells: &[Cell], reps: u32) -> Vec<Loss> {
    let mut out = Vec::new();
    for mode in Mode::ALL {
        let planned = cells.iter().filter(|c| c.mode == mode).count() * reps as usize;
        if planned == 0 {
            continue;
        }
        let mine = |m: &&Measurement| m.key.mode == mode && cells.contains(&m.key);
        let ok = ms
            .iter()
            .filter(mine)
            .filter(|m| m.status == Status::Ok)
            .count();
        let mut by_status = BTreeMap::new();
        let mut attempts = 0;
        for m in ms.iter().chain(unused).filter(mine) {
            attempts += 1;
            *by_status.entry(m.status.label().to_string()).or_insert(0) += 1;
        }
        let ok_attempts = by_status.get(Status::Ok.label()).copied().unwrap_or(0);
        out.push(Loss {
            mode: Some(mode),
            planned,
            ok,
            missing: planned.saturating_sub(ok),
            attempts,
            by_status,
            loss_rate: (attempts > 0).then(|| (attempts - ok_attempts) as f64 / attempts as f64),
        });
    }
    out
}

/// Summarises `ms` (one measurement per cell and repetition) over `cells`
/// and `reps` repetitions; `unused` are the measurements make-up runs
/// replaced or repeated (counted in the losses only).
pub fn summarize(ms: &[Measurement], unused: &[Measurement], cells: &[Cell], reps: u32) -> Summary {
    let mut out = Vec::new();
    for c in cells {
        let values = per_rep(ms, c, reps, ok_value);
        let fair = per_rep(ms, c, reps, ok_fairness);
        out.push(CellSummary {
            cell: c.id(),
            key: *c,
            statuses: (1..=reps)
                .map(|r| {
                    ms.iter()
                        .find(|m| m.key == *c && m.rep == r)
                        .map(|m| m.status)
                })
                .collect(),
            value: agg(&values.iter().flatten().copied().collect::<Vec<_>>()),
            fairness: agg(&fair.iter().flatten().copied().collect::<Vec<_>>()),
            adaptive: adaptive_summary(ms, c, reps),
            per_rep: values,
        });
    }
    let mut ratios = Vec::new();
    let mut fairness_ratios = Vec::new();
    for oc in Overcommit::ALL {
        for w in Workload::ALL {
            for (pv, base) in Mode::RATIOS {
                let pvc = Cell {
                    overcommit: oc,
                    workload: w,
                    mode: pv,
                };
                let bc = Cell {
                    overcommit: oc,
                    workload: w,
                    mode: base,
                };
                if !cells.contains(&pvc) || !cells.contains(&bc) {
                    continue;
                }
                let ratio = |series: Vec<Option<f64>>| Ratio {
                    overcommit: oc,
                    workload: w,
                    pvlock: pv,
                    base,
                    agg: agg(&series.iter().flatten().copied().collect::<Vec<_>>()),
                    per_rep: series,
                };
                let a = per_rep(ms, &pvc, reps, ok_value);
                let b = per_rep(ms, &bc, reps, ok_value);
                ratios.push(ratio(if w.higher_is_better() {
                    ratio_series(&a, &b, |p, q| p / q)
                } else {
                    ratio_series(&a, &b, |p, q| q / p)
                }));
                if base == Mode::Upstream && !w.is_macro() {
                    let a = per_rep(ms, &pvc, reps, ok_fairness);
                    let b = per_rep(ms, &bc, reps, ok_fairness);
                    fairness_ratios.push(ratio(ratio_series(&a, &b, |p, q| p / q)));
                }
            }
        }
    }
    let host = host_summaries(ms, cells, reps);
    let mut s = Summary {
        cells: out,
        ratios,
        fairness_ratios,
        goals: Vec::new(),
        losses: losses(ms, unused, cells, reps),
        hint: hint_summaries(&host),
        host,
    };
    s.goals = goals(&s);
    s
}

/// Whether a goal was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GoalStatus {
    /// The whole interval for the median is on the right side of the
    /// target.
    #[serde(rename = "PASS")]
    Pass,
    /// The whole interval is on the wrong side.
    #[serde(rename = "MISS")]
    Miss,
    /// The interval straddles the target: more repetitions needed.
    #[serde(rename = "undecided")]
    Undecided,
    /// Not measured in this run (quick mode, --only, or every repetition
    /// failed or timed out).
    #[serde(rename = "n/a")]
    NotMeasured,
}

impl GoalStatus {
    /// As `results.md` says it.
    pub fn label(self) -> &'static str {
        match self {
            GoalStatus::Pass => "PASS",
            GoalStatus::Miss => "MISS",
            GoalStatus::Undecided => "undecided",
            GoalStatus::NotMeasured => "n/a",
        }
    }
}

/// A goal and how the run did.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Goal {
    /// What is compared, e.g. `2x contended: pvlock-hostkvm / upstream-pv`.
    pub name: String,
    /// `>=` or `<=`.
    pub op: String,
    /// The value the ratio must reach.
    pub target: f64,
    /// What one would like to see beyond the target (none of the goals
    /// has one now; kept for older results).
    pub aim: Option<f64>,
    /// The in-repetition ratios: median, spread and interval.
    pub measured: Option<Agg>,
    /// Decided on the interval.
    pub status: GoalStatus,
    /// How far the median is from the target: median / target - 1.
    pub margin: Option<f64>,
    /// Why it was not measured, or what else there is to say.
    pub note: String,
}

impl Goal {
    /// The goal is out of this run's matrix altogether (not a failure of
    /// the run).
    pub fn out_of_matrix(&self) -> bool {
        self.status == GoalStatus::NotMeasured && self.note.starts_with(NOT_IN_MATRIX)
    }

    /// For an undecided goal, the numbers that make it so: its interval
    /// reaches past the target further than the median's margin from it.
    pub fn undecided_because(&self) -> Option<String> {
        let a = self
            .measured
            .filter(|_| self.status == GoalStatus::Undecided)?;
        let pct = |x: f64| {
            let p = (x / self.target - 1.0) * 100.0;
            if p.abs() < 10.0 {
                format!("{p:+.1}%")
            } else {
                format!("{p:+.0}%")
            }
        };
        Some(format!(
            "median {}, {} from the target {} {}, but its {:.1}% interval [{}, {}] (n={}) runs from {} to {} of it: the interval is wider than the margin it would decide; more repetitions needed",
            fmt_num(a.median),
            pct(a.median),
            self.op,
            self.target,
            a.coverage * 100.0,
            fmt_num(a.lo),
            fmt_num(a.hi),
            a.n,
            pct(a.lo),
            pct(a.hi),
        ))
    }
}

/// What a goal's note starts with when its cells are not in the matrix.
const NOT_IN_MATRIX: &str = "not in this run's matrix";

/// The target of the ratio pvlock / `base` of workload `w` at `oc` (for
/// each pair of [`Mode::RATIOS`]: either pvlock mode against a base, the
/// adaptive pvlock-hostkvm against pvlock-static, the hint on
/// (pvlock-hostkvm) against off (pvlock-nohint)), if it has one: the
/// ratio must be at least this. The goals and the flags of the tables'
/// ratio cells both come from here.
pub fn target(oc: Overcommit, w: Workload, base: Mode) -> Option<f64> {
    use Overcommit::*;
    use Workload::*;
    match (oc, w, base) {
        (X1, Contended, Mode::Native) => Some(0.97),
        (X1, Contended, Mode::Upstream) => Some(1.05),
        (X1, Uncontended, Mode::Native) => Some(0.97),
        (X2 | X3 | Two, Contended, Mode::Upstream) => Some(1.2),
        // Following the host costs nothing where the lock stays on pvlock.
        (X2 | X3 | Two, Contended, Mode::Static) => Some(1.0),
        // The critical-section hint loses nothing where the host preempts
        // lock holders (the gain per level is the ratio itself).
        (X2 | X3 | Two, Contended, Mode::NoHint) => Some(1.0),
        (X2 | X3, Contended, Mode::Native) => Some(10.0),
        // The limit: overcommit costs (almost) nothing.
        (X2, Contended, Mode::NativeTwo) => Some(0.95),
        (X3 | Two, Contended, Mode::NativeTwo) => Some(0.9),
        (_, Hackbench | StressNg, Mode::Upstream) => Some(1.1),
        _ => None,
    }
}

/// The fairness target: pvlock's Max/Min over upstream's, at most this.
pub const FAIRNESS_TARGET: f64 = 1.0;

/// How the interval `a` of a goal `op target` decides it: for `>=`, PASS
/// if its low end reaches the target, MISS if its high end stays below,
/// undecided otherwise; mirrored for `<=`.
pub fn decide(op: &str, target: f64, a: &Agg) -> GoalStatus {
    let (pass, miss) = if op == "<=" {
        (a.hi <= target, a.lo > target)
    } else {
        (a.lo >= target, a.hi < target)
    };
    if pass {
        GoalStatus::Pass
    } else if miss {
        GoalStatus::Miss
    } else {
        GoalStatus::Undecided
    }
}

fn judge_goal(
    name: String,
    op: &str,
    target: f64,
    measured: Option<Agg>,
    why_missing: String,
) -> Goal {
    let (status, margin, note) = match measured {
        None => (GoalStatus::NotMeasured, None, why_missing),
        Some(a) => (
            decide(op, target, &a),
            Some(a.median / target - 1.0),
            String::new(),
        ),
    };
    Goal {
        name,
        op: op.to_string(),
        target,
        aim: None,
        measured,
        status,
        margin,
        note,
    }
}

/// Why a ratio has no value.
fn missing(s: &Summary, oc: Overcommit, w: Workload, modes: &[Mode]) -> String {
    let mut why = Vec::new();
    for m in modes {
        match s.cell(oc, w, *m) {
            None => why.push(format!("{} {NOT_IN_MATRIX}", m.label())),
            Some(c) => {
                let bad: Vec<&str> = c
                    .statuses
                    .iter()
                    .flatten()
                    .filter(|st| **st != Status::Ok)
                    .map(|st| st.label())
                    .collect();
                if c.value.is_none() {
                    if bad.is_empty() {
                        why.push(format!("{}: no measurement", m.label()));
                    } else {
                        why.push(format!("{}: {}", m.label(), bad.join(", ")));
                    }
                }
            }
        }
    }
    if !why.is_empty() && why.iter().all(|w| w.ends_with(NOT_IN_MATRIX)) {
        format!("{NOT_IN_MATRIX} (quick mode or --only)")
    } else if why.is_empty() {
        "no repetition measured both".into()
    } else {
        why.join("; ")
    }
}

/// The goal `pv / base >= target(oc, w, base)`.
fn ratio_goal(s: &Summary, oc: Overcommit, w: Workload, pv: Mode, base: Mode) -> Option<Goal> {
    let t = target(oc, w, base)?;
    let name = if base == Mode::Static {
        format!(
            "{} {}, adaptive / static: {} / {}",
            oc.label(),
            w.label(),
            pv.label(),
            base.label()
        )
    } else if base == Mode::NoHint {
        format!(
            "{} {}, hint on / off: {} / {}",
            oc.label(),
            w.label(),
            pv.label(),
            base.label()
        )
    } else if base == Mode::NativeTwo {
        let guests = match pv.guests(oc) {
            1 => format!("{} vCPUs", pv.vcpus(oc)),
            n => format!("{n} guests x {} vCPUs, summed", pv.vcpus(oc)),
        };
        format!(
            "{} {} limit: {} ({guests}) / {} ({} vCPUs)",
            oc.label(),
            w.label(),
            pv.label(),
            base.label(),
            base.vcpus(oc)
        )
    } else {
        format!(
            "{} {}: {} / {}",
            oc.label(),
            w.label(),
            pv.label(),
            base.label()
        )
    };
    Some(judge_goal(
        name,
        ">=",
        t,
        s.ratio(oc, w, pv, base).and_then(|r| r.agg),
        missing(s, oc, w, &[pv, base]),
    ))
}

/// `native 97%` or `native 97% [95%, 100%]`: the share of the time on the
/// native lock (median [min, max] over the repetitions).
pub fn fmt_native_share(a: &Agg) -> String {
    let pct = |x: f64| {
        if x > 0.0 && x < 0.005 {
            "<1%".to_string()
        } else if (0.995..1.0).contains(&x) {
            ">99%".to_string()
        } else {
            format!("{:.0}%", x * 100.0)
        }
    };
    if a.n == 1 || a.min == a.max {
        format!("native {}", pct(a.median))
    } else {
        format!("native {} [{}, {}]", pct(a.median), pct(a.min), pct(a.max))
    }
}

/// What a goal's note adds about the adaptive lock of its pvlock cell,
/// if it recorded anything: against pvlock-static, the switches to native
/// (none expected: under overcommit the lock stays on pvlock); at 1x, the
/// share of the time on the native lock and the switches (there the host
/// advises "dedicated" and the lock is expected to run native: the 1x
/// goals measure that).
fn adaptive_note(s: &Summary, oc: Overcommit, w: Workload, pv: Mode, base: Mode) -> Option<String> {
    let a = s.cell(oc, w, pv)?.adaptive.as_ref()?;
    let reps = if a.n == 1 {
        "repetition"
    } else {
        "repetitions"
    };
    if base == Mode::Static {
        Some(format!(
            "switches to native in the {} guests: {} over {} {reps} (expected 0)",
            pv.label(),
            a.to_native,
            a.n
        ))
    } else if oc == Overcommit::X1 {
        let share = a.native_share.as_ref()?;
        Some(format!(
            "the adaptive lock ran {} of the time, {}/{} switches ({} {reps})",
            fmt_native_share(share),
            a.to_native,
            a.to_pvlock,
            a.n
        ))
    } else {
        None
    }
}

/// `120 [80, 200]`: a count's median [min, max] over the repetitions.
pub fn fmt_count_agg(a: &Agg) -> String {
    if a.n == 1 || a.min == a.max {
        fmt_count_short(a.median)
    } else {
        format!(
            "{} [{}, {}]",
            fmt_count_short(a.median),
            fmt_count_short(a.min),
            fmt_count_short(a.max)
        )
    }
}

/// What the hint on / off goal's note adds from host_kvm's counts at
/// `oc`: the holders' preemptions that pvlock-hostkvm's guests still
/// suffered (not deferred, of all) against pvlock-nohint's, per L1 boot,
/// and their ratio in the same boots.
fn hint_note(s: &Summary, oc: Overcommit) -> Option<String> {
    let on = s.host(oc, Mode::HostKvm)?;
    let off = s.host(oc, Mode::NoHint)?;
    let mut t = format!(
        "lock holders preempted per L1 boot (whole guest boots), not deferred: {} {} of {}, {} {}",
        Mode::HostKvm.label(),
        fmt_count_agg(on.not_deferred.as_ref()?),
        fmt_count_agg(on.holder_preemptions.as_ref()?),
        Mode::NoHint.label(),
        fmt_count_agg(off.holder_preemptions.as_ref()?),
    );
    if let Some(a) = s.hint(oc).and_then(|h| h.agg) {
        t.push_str(&format!(
            ", ratio {} [{}, {}] (n={})",
            fmt_num(a.median),
            fmt_num(a.lo),
            fmt_num(a.hi),
            a.n
        ));
    }
    Some(t)
}

fn goals(s: &Summary) -> Vec<Goal> {
    use Overcommit::*;
    use Workload::*;
    let mut v = Vec::new();
    // The goals of one cell each, listed whether they ran or not.
    let fixed = [
        (X1, Contended, Mode::Native),
        (X1, Contended, Mode::Upstream),
        (X1, Uncontended, Mode::Native),
        (X2, Contended, Mode::Upstream),
        (X3, Contended, Mode::Upstream),
        (Two, Contended, Mode::Upstream),
        (X2, Contended, Mode::Static),
        (X3, Contended, Mode::Static),
        (Two, Contended, Mode::Static),
        (X2, Contended, Mode::NoHint),
        (X3, Contended, Mode::NoHint),
        (Two, Contended, Mode::NoHint),
        (X2, Contended, Mode::NativeTwo),
        (X3, Contended, Mode::NativeTwo),
        (Two, Contended, Mode::NativeTwo),
        (X2, Contended, Mode::Native),
        (X3, Contended, Mode::Native),
    ];
    for (oc, w, base) in fixed {
        for pv in Mode::PVLOCK {
            if !Mode::RATIOS.contains(&(pv, base)) {
                continue;
            }
            let Some(mut g) = ratio_goal(s, oc, w, pv, base) else {
                continue;
            };
            let extra = if base == Mode::NoHint {
                hint_note(s, oc)
            } else {
                adaptive_note(s, oc, w, pv, base)
            };
            if let Some(extra) = extra {
                g.note = if g.note.is_empty() {
                    extra
                } else {
                    format!("{}; {extra}", g.note)
                };
            }
            v.push(g);
        }
    }
    // The goals at every level: listed for the levels in the matrix (or
    // once, as not measured, if there is none).
    for pv in Mode::PVLOCK {
        let w = Contended;
        let levels: Vec<Overcommit> = Overcommit::ALL
            .into_iter()
            .filter(|oc| s.fairness_ratio(*oc, w, pv).is_some())
            .collect();
        for oc in &levels {
            let f = s.fairness_ratio(*oc, w, pv).and_then(|r| r.agg);
            let mut g = judge_goal(
                format!(
                    "{} contended fairness: Max/Min of {} / Max/Min of upstream-pv",
                    oc.label(),
                    pv.label()
                ),
                "<=",
                FAIRNESS_TARGET,
                f,
                missing(s, *oc, w, &[pv, Mode::Upstream]),
            );
            let (a, b) = (
                s.cell(*oc, w, pv).and_then(|c| c.fairness),
                s.cell(*oc, w, Mode::Upstream).and_then(|c| c.fairness),
            );
            if let (Some(a), Some(b)) = (a, b) {
                g.note = format!(
                    "median Max/Min over all repetitions {:.2} vs {:.2}",
                    a.median, b.median
                );
            }
            v.push(g);
        }
        if levels.is_empty() {
            v.push(judge_goal(
                format!(
                    "contended fairness at every level: Max/Min of {} / Max/Min of upstream-pv",
                    pv.label()
                ),
                "<=",
                FAIRNESS_TARGET,
                None,
                format!("{NOT_IN_MATRIX} (quick mode or --only)"),
            ));
        }
    }
    for w in [Hackbench, StressNg] {
        for pv in Mode::PVLOCK {
            let levels: Vec<Overcommit> = Overcommit::ALL
                .into_iter()
                .filter(|oc| s.ratio(*oc, w, pv, Mode::Upstream).is_some())
                .collect();
            for oc in &levels {
                v.extend(ratio_goal(s, *oc, w, pv, Mode::Upstream));
            }
            if levels.is_empty() {
                v.push(judge_goal(
                    format!("{} at every level: {} / upstream-pv", w.label(), pv.label()),
                    ">=",
                    target(X2, w, Mode::Upstream).unwrap_or(1.0),
                    None,
                    format!("{NOT_IN_MATRIX} (quick mode or --only)"),
                ));
            }
        }
    }
    v
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::extract::{HostRun, Instance, Measurement};

    #[test]
    fn median_and_spread() {
        assert_eq!(agg(&[]), None);
        let a = agg(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((a.median, a.min, a.max, a.n), (2.0, 1.0, 3.0, 3));
        assert_eq!((a.lo, a.hi, a.coverage), (1.0, 3.0, 0.75));
        let a = agg(&[4.0, 1.0]).unwrap();
        assert_eq!((a.median, a.min, a.max, a.n), (2.5, 1.0, 4.0, 2));
        let a = agg(&[5.0]).unwrap();
        assert_eq!((a.median, a.min, a.max), (5.0, 5.0, 5.0));
        // One value says nothing about where the median is.
        assert_eq!((a.lo, a.hi, a.coverage), (5.0, 5.0, 0.0));
        let a = agg(&[2.0, f64::INFINITY]).unwrap();
        assert_eq!((a.median, a.max), (f64::INFINITY, f64::INFINITY));
        let a = agg(&[2.0, f64::NAN, 1.0]).unwrap();
        assert_eq!(a.n, 2);
    }

    #[test]
    fn binomial_tail() {
        assert_eq!(binomial_half_cdf(3, 0), 0.125);
        assert_eq!(binomial_half_cdf(3, 1), 0.5);
        assert_eq!(binomial_half_cdf(3, 3), 1.0);
        assert_eq!(binomial_half_cdf(3, 7), 1.0);
        // C(10, 0..=2) = 1 + 10 + 45.
        assert_eq!(binomial_half_cdf(10, 2), 56.0 / 1024.0);
        // C(20, 0..=5) = 1 + 20 + 190 + 1140 + 4845 + 15504 = 21700.
        assert!((binomial_half_cdf(20, 5) - 21700.0 / 1048576.0).abs() < 1e-15);
        assert!((binomial_half_cdf(50, 50) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn interval_coverage_arithmetic() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        // n, the k chosen and its coverage 1 - 2 P(B(n, 1/2) <= k-1).
        let cases: [(usize, usize, f64); 12] = [
            (1, 1, 0.0),
            (2, 1, 0.5),
            (3, 1, 0.75),
            (4, 1, 0.875),
            (5, 1, 1.0 - 2.0 / 32.0),                 // 93.75%
            (6, 1, 1.0 - 2.0 / 64.0),                 // k=2 would be 78.1%
            (7, 1, 1.0 - 2.0 / 128.0),                // k=2 would be 87.5%
            (8, 2, 1.0 - 2.0 * 9.0 / 256.0),          // 92.97%
            (9, 2, 1.0 - 2.0 * 10.0 / 512.0),         // 96.1%; k=3 82.0%
            (10, 2, 1.0 - 2.0 * 11.0 / 1024.0),       // 97.85%; k=3 89.06%
            (11, 3, 1.0 - 2.0 * 67.0 / 2048.0),       // 93.46%
            (20, 6, 1.0 - 2.0 * 21700.0 / 1048576.0), // 95.86%
        ];
        for (n, k, cov) in cases {
            let (kk, c) = interval_rank(n, COVERAGE);
            assert_eq!(kk, k, "n={n}");
            assert!(close(c, cov), "n={n}: {c} != {cov}");
            assert!(close(interval_coverage(n, k), cov));
        }
        // The next k falls short of 90% where k=2 and k=6 were chosen.
        assert!(close(interval_coverage(10, 3), 1.0 - 2.0 * 56.0 / 1024.0));
        assert!(interval_coverage(10, 3) < COVERAGE);
        assert!(interval_coverage(20, 7) < COVERAGE);
        assert!((interval_coverage(20, 7) - 0.8847).abs() < 1e-4);
        // The ends of the interval: x(2) and x(9) of 10 values.
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let a = agg(&v).unwrap();
        assert_eq!((a.lo, a.hi, a.median), (2.0, 9.0, 5.5));
        let a = agg(&[5.0, 1.0, 4.0, 2.0, 3.0]).unwrap();
        assert_eq!((a.lo, a.hi, a.coverage), (1.0, 5.0, 0.9375));
    }

    fn a(values: &[f64]) -> Agg {
        agg(values).unwrap()
    }

    #[test]
    fn goals_are_decided_on_the_interval() {
        // >= 1.2: the interval above, below, straddling, touching.
        assert_eq!(decide(">=", 1.2, &a(&[1.21, 1.3, 1.25])), GoalStatus::Pass);
        assert_eq!(decide(">=", 1.2, &a(&[1.2, 1.3, 1.25])), GoalStatus::Pass);
        assert_eq!(decide(">=", 1.2, &a(&[1.0, 1.1, 1.19])), GoalStatus::Miss);
        assert_eq!(
            decide(">=", 1.2, &a(&[1.1, 1.3, 1.5])),
            GoalStatus::Undecided
        );
        // A median above the target is not enough.
        assert_eq!(
            decide(">=", 1.2, &a(&[1.0, 1.3, 1.35])),
            GoalStatus::Undecided
        );
        // <= 1: mirrored.
        assert_eq!(decide("<=", 1.0, &a(&[0.8, 0.9, 1.0])), GoalStatus::Pass);
        assert_eq!(decide("<=", 1.0, &a(&[1.01, 1.2, 1.1])), GoalStatus::Miss);
        assert_eq!(
            decide("<=", 1.0, &a(&[0.8, 0.9, 1.1])),
            GoalStatus::Undecided
        );
        // Ten values: x(2)..x(9) decides, the extremes do not.
        let mut v = vec![0.5, 9.0];
        v.extend([1.3, 1.3, 1.4, 1.4, 1.5, 1.5, 1.6, 1.6]);
        assert_eq!(decide(">=", 1.2, &a(&v)), GoalStatus::Pass);
        assert_eq!(decide(">=", 1.2, &a(&v[..9])), GoalStatus::Pass);
        // Seven: min..max decides, and 0.5 is in it.
        assert_eq!(decide(">=", 1.2, &a(&v[..7])), GoalStatus::Undecided);
    }

    fn m(
        oc: Overcommit,
        w: Workload,
        mode: Mode,
        rep: u32,
        value: Option<f64>,
        fairness: Option<f64>,
    ) -> Measurement {
        let key = Cell {
            overcommit: oc,
            workload: w,
            mode,
        };
        Measurement {
            cell: key.id(),
            key,
            rep,
            unit: format!("r{rep}-{}", oc.key()),
            position: None,
            status: if value.is_some() {
                Status::Ok
            } else {
                Status::Timeout
            },
            note: None,
            value,
            fairness,
            instances: Vec::new(),
            host: None,
        }
    }

    /// What the adaptive lock ran during a workload: `to_native` and
    /// `to_pvlock` switches, `native_ms` and `pvlock_ms` on each lock (from
    /// a guest_pvlock loaded right before it).
    pub(crate) fn run(
        to_native: i64,
        to_pvlock: i64,
        native_ms: i64,
        pvlock_ms: i64,
    ) -> AdaptiveRun {
        let after: BTreeMap<String, i64> = [
            ("switches_to_native", to_native),
            ("switches_to_pvlock", to_pvlock),
            ("time_native_ns", native_ms * 1_000_000),
            ("time_pvlock_ns", pvlock_ms * 1_000_000),
            ("switch_max_ns", 250_000),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        AdaptiveRun::between(&BTreeMap::new(), &after).unwrap()
    }

    /// Three repetitions of the quick matrix: repetition r runs everything
    /// r times as fast (drift, which the in-repetition ratios do not see),
    /// and each pvlock mode's ratios vary a little with r. The adaptive
    /// lock ran native at 1x (pvlock-kickcpu's switched to native during
    /// repetition 2) and pvlock at 2x (pvlock-kickcpu's third repetition
    /// recorded nothing). host_kvm preempted lock holders at 2x: 1000 of
    /// pvlock-hostkvm's per boot, of which it deferred 820, 840, 860 in
    /// repetitions 1-3; 1000, 1100, 1200 of pvlock-nohint's, none
    /// deferred; at 1x 20 per boot, all deferred.
    pub(crate) fn sample() -> (Vec<Measurement>, Vec<Cell>) {
        use Mode::*;
        use Overcommit::*;
        use Workload::*;
        let mut ms = Vec::new();
        for rep in 1..=3u32 {
            let k = f64::from(rep);
            // kickcpu's ratios: 1.05, 1.10, 1.15 (times the base);
            // hostkvm's: 1.25, 1.30, 1.35.
            let kc = 1.0 + 0.05 * k;
            let hk = 1.2 + 0.05 * k;
            let mut add = |oc, w, mode, v: f64, f: Option<f64>| {
                ms.push(m(oc, w, mode, rep, Some(v * k), f));
            };
            add(X2, Contended, Native, 10_000.0, Some(500.0));
            add(X2, Contended, NativeTwo, 500_000.0, Some(1.2));
            add(X2, Contended, Upstream, 400_000.0, Some(1.5));
            add(
                X2,
                Contended,
                KickCpu,
                400_000.0 * kc,
                Some(1.2 + 0.2 * (k - 1.0)),
            );
            add(X2, Contended, HostKvm, 400_000.0 * hk, Some(1.4));
            // hostkvm / static: 1.04, 1.08, 1.13.
            add(X2, Contended, Static, 400_000.0 * 1.2, Some(1.4));
            // hostkvm / nohint: 1.14, 1.18, 1.23.
            add(X2, Contended, NoHint, 400_000.0 * 1.1, Some(1.4));
            add(X1, Contended, Native, 600_000.0, Some(1.1));
            add(X1, Contended, Upstream, 300_000.0, Some(1.2));
            add(
                X1,
                Contended,
                KickCpu,
                600_000.0 * (0.9 + 0.05 * k),
                Some(1.1),
            );
            add(X1, Contended, HostKvm, 600_000.0, Some(1.1));
            add(X1, Uncontended, Native, 200_000.0, Some(1.0));
            add(X1, Uncontended, HostKvm, 190_000.0, Some(1.0));
        }
        // Repetition 3 of native at 2x timed out.
        ms.retain(|x| !(x.rep == 3 && x.key.mode == Native && x.key.overcommit == X2));
        ms.push(m(X2, Contended, Native, 3, None, None));
        for x in ms.iter_mut() {
            let r = i64::from(x.rep);
            let host = |holder_preemptions, grants| {
                Some(HostRun {
                    holder_preemptions,
                    grants,
                    why_not: Some(crate::extract::NotDeferred {
                        expired: (holder_preemptions - grants) / 2,
                        ..Default::default()
                    }),
                    holders_preempted: Some(holder_preemptions - grants + 7),
                })
            };
            x.host = match (x.key.overcommit, x.key.mode) {
                (_, m) if !m.loads_guest_pvlock() => None,
                (X1, _) => host(20, 20),
                (_, HostKvm) => host(1000, 800 + 20 * r),
                (_, NoHint) => host(900 + 100 * r, 0),
                _ => host(1000, 850),
            };
            let adaptive = match (x.key.overcommit, x.key.mode, x.rep) {
                (_, m, _) if !m.loads_guest_pvlock() => continue,
                (X1, KickCpu, 2) => run(1, 0, 9_000, 1_000),
                (X1, _, _) => run(0, 0, 10_000, 0),
                (X2, KickCpu, 3) => {
                    x.instances.push(Instance {
                        name: "kickcpu-1".into(),
                        status: Some(Status::Ok),
                        ..Default::default()
                    });
                    continue;
                }
                _ => run(0, 0, 0, 10_000),
            };
            x.instances.push(Instance {
                name: format!("{}-1", x.key.mode.group()),
                status: Some(Status::Ok),
                adaptive: Some(adaptive),
                ..Default::default()
            });
        }
        (ms, crate::matrix::cells(true))
    }

    #[test]
    fn ratios_inside_each_repetition() {
        let (ms, cells) = sample();
        let s = summarize(&ms, &[], &cells, 3);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        let hu = s
            .ratio(
                Overcommit::X2,
                Workload::Contended,
                Mode::HostKvm,
                Mode::Upstream,
            )
            .unwrap();
        let want = [1.25, 1.30, 1.35];
        for (got, want) in hu.per_rep.iter().zip(want) {
            assert!(close(got.unwrap(), want), "{:?}", hu.per_rep);
        }
        let a = hu.agg.unwrap();
        assert!(close(a.median, 1.30));
        assert_eq!(a.n, 3);
        assert!(close(a.lo, 1.25) && close(a.hi, 1.35));
        assert_eq!(a.coverage, 0.75);
        // Native timed out in repetition 3: two ratios.
        let hn = s
            .ratio(
                Overcommit::X2,
                Workload::Contended,
                Mode::HostKvm,
                Mode::Native,
            )
            .unwrap();
        assert_eq!(hn.per_rep[2], None);
        assert_eq!(hn.agg.unwrap().n, 2);
        let native = s
            .cell(Overcommit::X2, Workload::Contended, Mode::Native)
            .unwrap();
        assert_eq!(
            native.statuses,
            [Some(Status::Ok), Some(Status::Ok), Some(Status::Timeout)]
        );
        assert_eq!(native.value.unwrap().n, 2);
        // The limit ratio: pvlock with 4 vCPUs over native with 2.
        let lim = s
            .ratio(
                Overcommit::X2,
                Workload::Contended,
                Mode::KickCpu,
                Mode::NativeTwo,
            )
            .unwrap();
        assert!(close(lim.agg.unwrap().median, 0.8 * 1.10));
        // No ratio for a cell outside the matrix, and none against
        // native-2vcpu at 1x.
        assert!(s
            .ratio(
                Overcommit::X1,
                Workload::Uncontended,
                Mode::KickCpu,
                Mode::Native
            )
            .is_none());
        assert!(s
            .ratio(
                Overcommit::X1,
                Workload::Contended,
                Mode::KickCpu,
                Mode::NativeTwo
            )
            .is_none());
        // Throughput median over repetitions.
        let up = s
            .cell(Overcommit::X2, Workload::Contended, Mode::Upstream)
            .unwrap();
        assert_eq!(up.value.unwrap().median, 800_000.0);
    }

    #[test]
    fn hackbench_ratio_is_time_inverted() {
        let ms = vec![
            m(
                Overcommit::X3,
                Workload::Hackbench,
                Mode::Native,
                1,
                Some(30.0),
                None,
            ),
            m(
                Overcommit::X3,
                Workload::Hackbench,
                Mode::HostKvm,
                1,
                Some(6.0),
                None,
            ),
        ];
        let cells: Vec<Cell> = ms.iter().map(|x| x.key).collect();
        let s = summarize(&ms, &[], &cells, 1);
        let r = s
            .ratio(
                Overcommit::X3,
                Workload::Hackbench,
                Mode::HostKvm,
                Mode::Native,
            )
            .unwrap();
        assert_eq!(r.agg.unwrap().median, 5.0);
        assert!(s.fairness_ratios.is_empty());
    }

    #[test]
    fn goals_pass_miss_undecided_and_not_measured() {
        let (ms, cells) = sample();
        let s = summarize(&ms, &[], &cells, 3);
        let g = |name: &str| {
            s.goals
                .iter()
                .find(|g| g.name == name)
                .unwrap_or_else(|| panic!("no goal {name}"))
        };
        // 1.25..1.35 >= 1.2.
        let x = g("2x contended: pvlock-hostkvm / upstream-pv");
        assert_eq!(x.status, GoalStatus::Pass);
        assert!((x.margin.unwrap() - (1.3 / 1.2 - 1.0)).abs() < 1e-9);
        assert_eq!(x.undecided_because(), None);
        // 1.05..1.15 < 1.2.
        let x = g("2x contended: pvlock-kickcpu / upstream-pv");
        assert_eq!(x.status, GoalStatus::Miss);
        // 0.95..1.05 around 0.97.
        let x = g("1x contended: pvlock-kickcpu / native");
        assert_eq!(x.status, GoalStatus::Undecided);
        assert_eq!(
            x.undecided_because().unwrap(),
            "median 1.00, +3.1% from the target >= 0.97, but its 75.0% interval [0.950, 1.05] (n=3) runs from -2.1% to +8.2% of it: the interval is wider than the margin it would decide; more repetitions needed"
        );
        // The 1x goals say what the adaptive lock ran.
        assert_eq!(
            x.note,
            "the adaptive lock ran native 100% [90%, 100%] of the time, 1/0 switches (3 repetitions)"
        );
        let x = g("1x contended: pvlock-hostkvm / native");
        assert_eq!(x.status, GoalStatus::Pass);
        assert_eq!(
            x.note,
            "the adaptive lock ran native 100% of the time, 0/0 switches (3 repetitions)"
        );
        let x = g("1x contended: pvlock-hostkvm / upstream-pv");
        assert_eq!(x.status, GoalStatus::Pass);
        // The adaptive lock against the static one where it stays on
        // pvlock: 1.04..1.13 >= 1, and the switches to native beside it.
        let x = g("2x contended, adaptive / static: pvlock-hostkvm / pvlock-static");
        assert_eq!(x.status, GoalStatus::Pass);
        assert_eq!((x.op.as_str(), x.target), (">=", 1.0));
        assert_eq!(
            x.note,
            "switches to native in the pvlock-hostkvm guests: 0 over 3 repetitions (expected 0)"
        );
        for oc in ["3x", "two-guests"] {
            let x = g(&format!(
                "{oc} contended, adaptive / static: pvlock-hostkvm / pvlock-static"
            ));
            assert!(x.out_of_matrix(), "{x:?}");
        }
        // No kickcpu / static goal, and no ratio either.
        assert!(!s
            .goals
            .iter()
            .any(|g| g.name.contains("pvlock-kickcpu / pvlock-static")));
        assert!(s
            .ratio(
                Overcommit::X2,
                Workload::Contended,
                Mode::KickCpu,
                Mode::Static
            )
            .is_none());
        let x = g("1x uncontended: pvlock-hostkvm / native");
        assert_eq!(x.status, GoalStatus::Miss);
        assert!((x.margin.unwrap() - (0.95 / 0.97 - 1.0)).abs() < 1e-9);
        // The limit ratio: 0.8 x (1.25..1.35) = 1.00..1.08 >= 0.95.
        let x = g("2x contended limit: pvlock-hostkvm (4 vCPUs) / native-2vcpu (2 vCPUs)");
        assert_eq!(x.status, GoalStatus::Pass);
        // 0.8 x (1.05..1.15) = 0.84..0.92 < 0.95.
        let x = g("2x contended limit: pvlock-kickcpu (4 vCPUs) / native-2vcpu (2 vCPUs)");
        assert_eq!(x.status, GoalStatus::Miss);
        // The limit at 3x and two guests (summed) is a goal, not run here.
        let x = g("3x contended limit: pvlock-hostkvm (6 vCPUs) / native-2vcpu (2 vCPUs)");
        assert_eq!((x.status, x.target), (GoalStatus::NotMeasured, 0.9));
        let x = g(
            "two-guests contended limit: pvlock-hostkvm (2 guests x 2 vCPUs, summed) / native-2vcpu (2 vCPUs)",
        );
        assert_eq!((x.status, x.target), (GoalStatus::NotMeasured, 0.9));
        // Two repetitions of 40x-ish native ratios: 50% coverage, still
        // decided.
        let x = g("2x contended: pvlock-hostkvm / native");
        assert_eq!(x.status, GoalStatus::Pass);
        assert_eq!(x.measured.unwrap().coverage, 0.5);
        let x = g("3x contended: pvlock-hostkvm / native");
        assert_eq!(x.status, GoalStatus::NotMeasured);
        assert_eq!(x.note, "not in this run's matrix (quick mode or --only)");
        assert!(x.out_of_matrix());
        let x = g("two-guests contended: pvlock-kickcpu / upstream-pv");
        assert!(x.out_of_matrix());
        let x = g("1x uncontended: pvlock-kickcpu / native");
        assert_eq!(x.status, GoalStatus::NotMeasured);
        assert!(x.out_of_matrix());
        // Fairness at the levels measured: kickcpu 1.2, 1.4, 1.6 against
        // upstream's 1.5: straddles 1.
        let x = g("2x contended fairness: Max/Min of pvlock-kickcpu / Max/Min of upstream-pv");
        assert_eq!(x.status, GoalStatus::Undecided);
        assert_eq!(x.note, "median Max/Min over all repetitions 1.40 vs 1.50");
        let x = g("1x contended fairness: Max/Min of pvlock-hostkvm / Max/Min of upstream-pv");
        assert_eq!(x.status, GoalStatus::Pass);
        assert!(!s
            .goals
            .iter()
            .any(|g| g.name.starts_with("3x contended fairness")));
        // The macro goals: not in the quick matrix, one line each.
        let x = g("hackbench at every level: pvlock-hostkvm / upstream-pv");
        assert!(x.out_of_matrix());
        assert_eq!(x.target, 1.1);
        assert!(s
            .goals
            .iter()
            .any(|g| g.name == "stress-ng at every level: pvlock-kickcpu / upstream-pv"));
        // The hint on against off: 1.14..1.23 >= 1, and host_kvm's counts
        // of preempted lock holders beside it.
        let x = g("2x contended, hint on / off: pvlock-hostkvm / pvlock-nohint");
        assert_eq!(x.status, GoalStatus::Pass);
        assert_eq!((x.op.as_str(), x.target), (">=", 1.0));
        assert!((x.measured.unwrap().median - 1.3 / 1.1).abs() < 1e-12);
        assert_eq!(
            x.note,
            "lock holders preempted per L1 boot (whole guest boots), not deferred: pvlock-hostkvm 160 [140, 180] of 1000, pvlock-nohint 1100 [1000, 1200], ratio 0.145 [0.117, 0.180] (n=3)"
        );
        for oc in ["3x", "two-guests"] {
            let x = g(&format!(
                "{oc} contended, hint on / off: pvlock-hostkvm / pvlock-nohint"
            ));
            assert!(x.out_of_matrix(), "{x:?}");
        }
        assert!(!s
            .goals
            .iter()
            .any(|g| g.name.contains("pvlock-kickcpu / pvlock-nohint")));
        // 11 goals of one cell each (the limit at 3 levels), 2 fairness
        // levels and 2 macro workloads, for both pvlock modes; adaptive /
        // static and hint on / off at 3 levels each.
        assert_eq!(s.goals.len(), 2 * (11 + 2 + 2) + 3 + 3);
        assert_eq!(
            target(Overcommit::X3, Workload::Contended, Mode::Native),
            Some(10.0)
        );
        assert_eq!(
            target(Overcommit::Two, Workload::Contended, Mode::Native),
            None
        );
        assert_eq!(
            target(Overcommit::X1, Workload::StressNg, Mode::Upstream),
            Some(1.1)
        );
        assert_eq!(
            target(Overcommit::Two, Workload::Contended, Mode::Static),
            Some(1.0)
        );
        assert_eq!(
            target(Overcommit::X1, Workload::Contended, Mode::Static),
            None
        );
        for oc in crate::matrix::STATIC_LEVELS {
            assert_eq!(target(oc, Workload::Contended, Mode::NoHint), Some(1.0));
            assert_eq!(target(oc, Workload::Hackbench, Mode::NoHint), None);
        }
        assert_eq!(
            target(Overcommit::X1, Workload::Contended, Mode::NoHint),
            None
        );
    }

    #[test]
    fn what_host_kvm_counted_per_mode_and_the_hint() {
        use Mode::*;
        use Overcommit::*;
        let (ms, cells) = sample();
        let s = summarize(&ms, &[], &cells, 3);
        let hk = s.host(X2, HostKvm).unwrap();
        assert_eq!(hk.n, 3);
        assert_eq!(hk.holder_preemptions.unwrap().median, 1000.0);
        let g = hk.grants.unwrap();
        assert_eq!((g.median, g.min, g.max), (840.0, 820.0, 860.0));
        let nd = hk.not_deferred.unwrap();
        assert_eq!((nd.median, nd.min, nd.max), (160.0, 140.0, 180.0));
        assert!((hk.deferred_share.unwrap().median - 0.84).abs() < 1e-12);
        assert_eq!(fmt_count_agg(&nd), "160 [140, 180]");
        let nh = s.host(X2, NoHint).unwrap();
        assert_eq!(nh.grants.unwrap().max, 0.0);
        assert_eq!(nh.deferred_share.unwrap().max, 0.0);
        assert_eq!(
            fmt_count_agg(&nh.holder_preemptions.unwrap()),
            "1100 [1000, 1200]"
        );
        // At 1x every holder preemption deferred; every guest_pvlock mode
        // and level of the matrix has its record, no other mode has one.
        let one = s.host(X1, KickCpu).unwrap();
        assert_eq!(one.deferred_share.unwrap().median, 1.0);
        assert_eq!(s.host.len(), 2 + 4);
        assert!(s.host(X2, Upstream).is_none() && s.host(X3, HostKvm).is_none());
        // Hint on / off in the same boots: 180/1000, 160/1100, 140/1200.
        let h = s.hint(X2).unwrap();
        let want = [0.18, 160.0 / 1100.0, 140.0 / 1200.0];
        for (got, want) in h.per_rep.iter().zip(want) {
            assert!((got.unwrap() - want).abs() < 1e-12, "{:?}", h.per_rep);
        }
        assert!((h.agg.unwrap().median - 160.0 / 1100.0).abs() < 1e-12);
        assert!(s.hint(X1).is_none());
        // A repetition whose pvlock-nohint measurement failed has no
        // record of it, nor a hint ratio.
        let mut ms2 = ms.clone();
        for x in ms2
            .iter_mut()
            .filter(|x| x.key.mode == NoHint && x.rep == 2)
        {
            x.status = Status::Failed;
        }
        let s2 = summarize(&ms2, &[], &cells, 3);
        assert_eq!(s2.host(X2, NoHint).unwrap().n, 2);
        assert_eq!(s2.hint(X2).unwrap().per_rep[1], None);
        assert_eq!(s2.hint(X2).unwrap().agg.unwrap().n, 2);
        // Cells of one mode measured in two L1 boots of a repetition (a
        // make-up run replaced one): their counts are not over the same
        // work, no record.
        let mut ms3 = ms.clone();
        for x in ms3.iter_mut().filter(|x| {
            x.key.mode == HostKvm
                && x.key.overcommit == X1
                && x.key.workload == Workload::Uncontended
                && x.rep == 1
        }) {
            x.unit = "r1-1x-retry1".into();
        }
        let s3 = summarize(&ms3, &[], &cells, 3);
        let hk1 = s3.host(X1, HostKvm).unwrap();
        assert_eq!((hk1.n, hk1.per_rep[0]), (2, None));
        // Nothing recorded (a results.json from before L1's snapshots per
        // mode): no records, and the goal without the note.
        let mut old = ms.clone();
        for x in old.iter_mut() {
            x.host = None;
        }
        let s4 = summarize(&old, &[], &cells, 3);
        assert!(s4.host.is_empty() && s4.hint.is_empty());
        let x = s4
            .goals
            .iter()
            .find(|g| g.name == "2x contended, hint on / off: pvlock-hostkvm / pvlock-nohint")
            .unwrap();
        assert_eq!((x.status, x.note.as_str()), (GoalStatus::Pass, ""));
    }

    #[test]
    fn what_the_adaptive_lock_ran_per_cell() {
        let (ms, cells) = sample();
        let s = summarize(&ms, &[], &cells, 3);
        let a = |oc, w, m| s.cell(oc, w, m).unwrap().adaptive.clone();
        use Mode::*;
        use Overcommit::*;
        use Workload::*;
        let kc = a(X1, Contended, KickCpu).unwrap();
        assert_eq!((kc.to_native, kc.to_pvlock, kc.n), (1, 0, 3));
        let share = kc.native_share.unwrap();
        assert_eq!((share.median, share.min, share.max), (1.0, 0.9, 1.0));
        assert_eq!(kc.per_rep[1].unwrap().native_ns, 9_000_000_000);
        assert_eq!(fmt_native_share(&share), "native 100% [90%, 100%]");
        // pvlock-kickcpu's third repetition at 2x recorded nothing.
        let kc = a(X2, Contended, KickCpu).unwrap();
        assert_eq!(kc.n, 2);
        assert_eq!(kc.per_rep[2], None);
        assert_eq!(kc.native_share.unwrap().median, 0.0);
        let st = a(X2, Contended, Static).unwrap();
        assert_eq!((st.to_native, st.to_pvlock, st.n), (0, 0, 3));
        // No guest_pvlock, no record.
        assert_eq!(a(X2, Contended, Native), None);
        assert_eq!(a(X2, Contended, Upstream), None);
        // Only ok measurements count: the 2x native timeout aside, a
        // pvlock measurement that is not ok is left out.
        let mut ms2 = ms.clone();
        for x in ms2
            .iter_mut()
            .filter(|x| x.key.mode == KickCpu && x.key.overcommit == X1 && x.rep == 2)
        {
            x.status = Status::Failed;
        }
        let s2 = summarize(&ms2, &[], &cells, 3);
        let kc = s2
            .cell(X1, Contended, KickCpu)
            .unwrap()
            .adaptive
            .clone()
            .unwrap();
        assert_eq!((kc.to_native, kc.n), (0, 2));
        // The shares' formats at the edges.
        let one = |x: f64| agg(&[x]).unwrap();
        assert_eq!(fmt_native_share(&one(0.0)), "native 0%");
        assert_eq!(fmt_native_share(&one(0.001)), "native <1%");
        assert_eq!(fmt_native_share(&one(0.997)), "native >99%");
        assert_eq!(fmt_native_share(&one(1.0)), "native 100%");
    }

    #[test]
    fn goal_without_data_says_why() {
        let (mut ms, cells) = sample();
        for x in ms
            .iter_mut()
            .filter(|x| x.key.mode == Mode::Native && x.key.overcommit == Overcommit::X2)
        {
            x.status = Status::Timeout;
            x.value = None;
        }
        let s = summarize(&ms, &[], &cells, 3);
        let x = s
            .goals
            .iter()
            .find(|g| g.name == "2x contended: pvlock-kickcpu / native")
            .unwrap();
        assert_eq!(x.status, GoalStatus::NotMeasured);
        assert_eq!(x.note, "native: timeout, timeout, timeout");
        assert!(!x.out_of_matrix());
    }

    #[test]
    fn losses_per_mode() {
        let (mut ms, cells) = sample();
        // A make-up run replaced hostkvm's lost 2x guest of repetition 1,
        // and a wrong-mode kickcpu guest of repetition 2 was not replaced.
        let mut lost = ms
            .iter()
            .find(|x| x.key.mode == Mode::HostKvm && x.key.overcommit == Overcommit::X2)
            .unwrap()
            .clone();
        lost.status = Status::NotRun;
        lost.value = None;
        let unused = vec![lost.clone(), lost];
        for x in ms.iter_mut().filter(|x| {
            x.key.mode == Mode::KickCpu && x.rep == 2 && x.key.overcommit == Overcommit::X1
        }) {
            x.status = Status::WrongMode;
        }
        let s = summarize(&ms, &unused, &cells, 3);
        let l = |m: Mode| s.losses.iter().find(|l| l.mode == Some(m)).unwrap();
        let hk = l(Mode::HostKvm);
        // 2x contended, 1x contended, 1x uncontended; 3 repetitions.
        assert_eq!((hk.planned, hk.ok, hk.missing, hk.attempts), (9, 9, 0, 11));
        assert_eq!(hk.by_status["not-run"], 2);
        assert_eq!(hk.loss_rate, Some(2.0 / 11.0));
        let kc = l(Mode::KickCpu);
        assert_eq!((kc.planned, kc.ok, kc.missing, kc.attempts), (6, 5, 1, 6));
        assert_eq!(kc.by_status["wrong-mode"], 1);
        let native = l(Mode::Native);
        assert_eq!((native.planned, native.ok, native.missing), (9, 8, 1));
        assert_eq!(native.by_status["timeout"], 1);
        let two = l(Mode::NativeTwo);
        assert_eq!((two.planned, two.ok, two.loss_rate), (3, 3, Some(0.0)));
        let st = l(Mode::Static);
        assert_eq!((st.planned, st.ok, st.loss_rate), (3, 3, Some(0.0)));
        let nh = l(Mode::NoHint);
        assert_eq!((nh.planned, nh.ok, nh.loss_rate), (3, 3, Some(0.0)));
        assert_eq!(s.losses.len(), 7);
    }
}

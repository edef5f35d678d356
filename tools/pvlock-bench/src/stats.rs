// SPDX-License-Identifier: GPL-2.0

//! The arithmetic: medians with their spread, ratios taken inside each
//! repetition, and the goals.

use crate::extract::{Measurement, Status};
use crate::matrix::{Cell, Mode, Overcommit, Workload};
use serde::{Deserialize, Serialize};

/// Median, minimum and maximum of `n` values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Agg {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

/// `None` for no values. The median of an even count is the mean of the
/// middle two. Infinite values (a writer that never got the lock) sort
/// last.
pub fn agg(values: &[f64]) -> Option<Agg> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 || v[n / 2 - 1].is_infinite() || v[n / 2].is_infinite() {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    Some(Agg {
        median,
        min: v[0],
        max: v[n - 1],
        n,
    })
}

/// One cell over the repetitions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CellSummary {
    pub cell: String,
    #[serde(flatten)]
    pub key: Cell,
    /// Index r-1: repetition r's value (`None`: not measured).
    pub per_rep: Vec<Option<f64>>,
    pub statuses: Vec<Option<Status>>,
    pub value: Option<Agg>,
    pub fairness: Option<Agg>,
}

/// pvlock against a baseline, computed inside each repetition.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Ratio {
    pub overcommit: Overcommit,
    pub workload: Workload,
    pub pvlock: Mode,
    pub base: Mode,
    /// How much better pvlock did: throughput pvlock / base, or for
    /// hackbench time base / pvlock. Above 1: pvlock is better.
    pub per_rep: Vec<Option<f64>>,
    pub agg: Option<Agg>,
}

impl Ratio {
    pub fn name(&self) -> String {
        format!("{} / {}", self.pvlock.short(), self.base.short())
    }
}

/// Everything the report shows.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub cells: Vec<CellSummary>,
    pub ratios: Vec<Ratio>,
    /// Fairness: pvlock's Max/Min divided by upstream's, per repetition
    /// (at most 1: pvlock is no less fair).
    pub fairness_ratios: Vec<Ratio>,
    pub goals: Vec<Goal>,
}

impl Summary {
    pub fn cell(&self, oc: Overcommit, w: Workload, m: Mode) -> Option<&CellSummary> {
        self.cells
            .iter()
            .find(|c| c.key.overcommit == oc && c.key.workload == w && c.key.mode == m)
    }

    pub fn ratio(&self, oc: Overcommit, w: Workload, pv: Mode, base: Mode) -> Option<&Ratio> {
        self.ratios
            .iter()
            .find(|r| r.overcommit == oc && r.workload == w && r.pvlock == pv && r.base == base)
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

/// Summarises `ms` over `cells` and `reps` repetitions.
pub fn summarize(ms: &[Measurement], cells: &[Cell], reps: u32) -> Summary {
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
            per_rep: values,
        });
    }
    let mut ratios = Vec::new();
    let mut fairness_ratios = Vec::new();
    for oc in Overcommit::ALL {
        for w in Workload::ALL {
            for pv in Mode::PVLOCK {
                let pvc = Cell {
                    overcommit: oc,
                    workload: w,
                    mode: pv,
                };
                if !cells.contains(&pvc) {
                    continue;
                }
                for base in [Mode::Native, Mode::Upstream] {
                    let bc = Cell {
                        overcommit: oc,
                        workload: w,
                        mode: base,
                    };
                    if !cells.contains(&bc) {
                        continue;
                    }
                    let a = per_rep(ms, &pvc, reps, ok_value);
                    let b = per_rep(ms, &bc, reps, ok_value);
                    let series = if w.higher_is_better() {
                        ratio_series(&a, &b, |p, q| p / q)
                    } else {
                        ratio_series(&a, &b, |p, q| q / p)
                    };
                    ratios.push(Ratio {
                        overcommit: oc,
                        workload: w,
                        pvlock: pv,
                        base,
                        agg: agg(&series.iter().flatten().copied().collect::<Vec<_>>()),
                        per_rep: series,
                    });
                    if base == Mode::Upstream && w != Workload::Hackbench {
                        let a = per_rep(ms, &pvc, reps, ok_fairness);
                        let b = per_rep(ms, &bc, reps, ok_fairness);
                        let series = ratio_series(&a, &b, |p, q| p / q);
                        fairness_ratios.push(Ratio {
                            overcommit: oc,
                            workload: w,
                            pvlock: pv,
                            base,
                            agg: agg(&series.iter().flatten().copied().collect::<Vec<_>>()),
                            per_rep: series,
                        });
                    }
                }
            }
        }
    }
    let mut s = Summary {
        cells: out,
        ratios,
        fairness_ratios,
        goals: Vec::new(),
    };
    s.goals = goals(&s);
    s
}

/// Whether a goal was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GoalStatus {
    #[serde(rename = "PASS")]
    Pass,
    #[serde(rename = "MISS")]
    Miss,
    /// Not measured in this run (quick mode, --only, or every repetition
    /// failed or timed out).
    #[serde(rename = "n/a")]
    NotMeasured,
}

impl GoalStatus {
    pub fn label(self) -> &'static str {
        match self {
            GoalStatus::Pass => "PASS",
            GoalStatus::Miss => "MISS",
            GoalStatus::NotMeasured => "n/a",
        }
    }
}

/// A goal and how the run did.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Goal {
    pub name: String,
    /// `>=` or `<=`.
    pub op: String,
    pub target: f64,
    /// What one would like to see (pvlock / upstream: 1.2).
    pub aim: Option<f64>,
    /// The median over repetitions (with its spread).
    pub measured: Option<Agg>,
    pub status: GoalStatus,
    /// How far from the target: measured / target - 1.
    pub margin: Option<f64>,
    pub note: String,
}

/// The target a ratio of the tables is held to, if any: what
/// `results.md` flags when missed.
pub fn threshold(oc: Overcommit, w: Workload, base: Mode) -> Option<f64> {
    match (oc, w, base) {
        (Overcommit::X2 | Overcommit::X3, Workload::Contended, Mode::Native) => Some(10.0),
        (Overcommit::X2 | Overcommit::X3, Workload::Contended, Mode::Upstream) => Some(1.0),
        (Overcommit::X1, Workload::Uncontended, Mode::Native) => Some(0.97),
        _ => None,
    }
}

fn judge_goal(
    name: String,
    op: &str,
    target: f64,
    aim: Option<f64>,
    measured: Option<Agg>,
    why_missing: String,
) -> Goal {
    let (status, margin) = match measured {
        None => (GoalStatus::NotMeasured, None),
        Some(a) => {
            let ok = if op == ">=" {
                a.median >= target
            } else {
                a.median <= target
            };
            (
                if ok {
                    GoalStatus::Pass
                } else {
                    GoalStatus::Miss
                },
                Some(a.median / target - 1.0),
            )
        }
    };
    let note = match (status, aim, measured) {
        (GoalStatus::NotMeasured, _, _) => why_missing,
        (_, Some(aim), Some(a)) if a.median >= aim => format!("aim {aim} met"),
        (_, Some(aim), Some(_)) => format!("aim {aim} not met"),
        _ => String::new(),
    };
    Goal {
        name,
        op: op.to_string(),
        target,
        aim,
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
            None => why.push(format!("{} not in this run's matrix", m.label())),
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
    if !why.is_empty() && why.iter().all(|w| w.ends_with("not in this run's matrix")) {
        "not in this run's matrix (quick mode or --only)".into()
    } else if why.is_empty() {
        "no repetition measured both".into()
    } else {
        why.join("; ")
    }
}

fn goals(s: &Summary) -> Vec<Goal> {
    let mut v = Vec::new();
    for oc in [Overcommit::X2, Overcommit::X3] {
        for pv in Mode::PVLOCK {
            for (base, target, aim) in
                [(Mode::Native, 10.0, None), (Mode::Upstream, 1.0, Some(1.2))]
            {
                let w = Workload::Contended;
                v.push(judge_goal(
                    format!(
                        "{} contended: {} / {}",
                        oc.label(),
                        pv.label(),
                        base.label()
                    ),
                    ">=",
                    target,
                    aim,
                    s.ratio(oc, w, pv, base).and_then(|r| r.agg),
                    missing(s, oc, w, &[pv, base]),
                ));
            }
        }
    }
    for pv in Mode::PVLOCK {
        let (oc, w) = (Overcommit::X1, Workload::Uncontended);
        v.push(judge_goal(
            format!("1x uncontended: {} / native", pv.label()),
            ">=",
            0.97,
            None,
            s.ratio(oc, w, pv, Mode::Native).and_then(|r| r.agg),
            missing(s, oc, w, &[pv, Mode::Native]),
        ));
    }
    for oc in Overcommit::ALL {
        for pv in Mode::PVLOCK {
            let w = Workload::Contended;
            let f = s
                .fairness_ratios
                .iter()
                .find(|r| r.overcommit == oc && r.workload == w && r.pvlock == pv);
            let Some(f) = f else { continue };
            let mut g = judge_goal(
                format!(
                    "{} contended fairness: Max/Min of {} / Max/Min of upstream-pv",
                    oc.label(),
                    pv.label()
                ),
                "<=",
                1.0,
                None,
                f.agg,
                missing(s, oc, w, &[pv, Mode::Upstream]),
            );
            let (a, b) = (
                s.cell(oc, w, pv).and_then(|c| c.fairness),
                s.cell(oc, w, Mode::Upstream).and_then(|c| c.fairness),
            );
            if let (Some(a), Some(b)) = (a, b) {
                g.note = format!(
                    "median Max/Min over all repetitions {:.2} vs {:.2}",
                    a.median, b.median
                );
            }
            v.push(g);
        }
    }
    v
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::extract::Measurement;

    #[test]
    fn median_and_spread() {
        assert_eq!(agg(&[]), None);
        let a = agg(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((a.median, a.min, a.max, a.n), (2.0, 1.0, 3.0, 3));
        let a = agg(&[4.0, 1.0]).unwrap();
        assert_eq!((a.median, a.min, a.max, a.n), (2.5, 1.0, 4.0, 2));
        let a = agg(&[5.0]).unwrap();
        assert_eq!((a.median, a.min, a.max), (5.0, 5.0, 5.0));
        let a = agg(&[2.0, f64::INFINITY]).unwrap();
        assert_eq!((a.median, a.max), (f64::INFINITY, f64::INFINITY));
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
            unit: format!("r{rep}"),
            status: if value.is_some() {
                Status::Ok
            } else {
                Status::Timeout
            },
            note: None,
            value,
            fairness,
            instances: Vec::new(),
        }
    }

    /// Two repetitions of 2x contended and 1x uncontended: repetition 2
    /// runs everything twice as fast, which the in-repetition ratios do not
    /// see.
    pub(crate) fn sample() -> (Vec<Measurement>, Vec<Cell>) {
        use Mode::*;
        use Overcommit::*;
        use Workload::*;
        let mut ms = Vec::new();
        for (rep, k) in [(1, 1.0), (2, 2.0)] {
            ms.push(m(X2, Contended, Native, rep, Some(1000.0 * k), Some(500.0)));
            ms.push(m(
                X2,
                Contended,
                Upstream,
                rep,
                Some(100_000.0 * k),
                Some(1.5),
            ));
            ms.push(m(
                X2,
                Contended,
                KickCpu,
                rep,
                Some(110_000.0 * k),
                Some(1.2),
            ));
            ms.push(m(
                X2,
                Contended,
                HostKvm,
                rep,
                Some(130_000.0 * k * if rep == 1 { 1.0 } else { 1.2 }),
                Some(1.8),
            ));
            ms.push(m(
                X1,
                Uncontended,
                Native,
                rep,
                Some(200_000.0 * k),
                Some(1.0),
            ));
            ms.push(m(
                X1,
                Uncontended,
                HostKvm,
                rep,
                Some(190_000.0 * k),
                Some(1.0),
            ));
        }
        // Repetition 2 of native at 2x timed out.
        ms.retain(|x| !(x.rep == 2 && x.key.mode == Native && x.key.overcommit == X2));
        ms.push(m(X2, Contended, Native, 2, None, None));
        let cells = crate::matrix::cells(true);
        (ms, cells)
    }

    #[test]
    fn ratios_inside_each_repetition() {
        let (ms, cells) = sample();
        let s = summarize(&ms, &cells, 2);
        let hu = s
            .ratio(
                Overcommit::X2,
                Workload::Contended,
                Mode::HostKvm,
                Mode::Upstream,
            )
            .unwrap();
        assert_eq!(hu.per_rep, [Some(1.3), Some(1.3 * 1.2)]);
        let a = hu.agg.unwrap();
        assert!((a.median - (1.3 + 1.56) / 2.0).abs() < 1e-12);
        assert_eq!((a.min, a.max, a.n), (1.3, 1.56, 2));
        // Native timed out in repetition 2: one ratio.
        let hn = s
            .ratio(
                Overcommit::X2,
                Workload::Contended,
                Mode::HostKvm,
                Mode::Native,
            )
            .unwrap();
        assert_eq!(hn.per_rep, [Some(130.0), None]);
        assert_eq!(hn.agg.unwrap().n, 1);
        let native = s
            .cell(Overcommit::X2, Workload::Contended, Mode::Native)
            .unwrap();
        assert_eq!(native.statuses, [Some(Status::Ok), Some(Status::Timeout)]);
        assert_eq!(native.value.unwrap().n, 1);
        // Throughput median over repetitions: (110k + 220k) / 2.
        let kc = s
            .cell(Overcommit::X2, Workload::Contended, Mode::KickCpu)
            .unwrap();
        assert_eq!(kc.value.unwrap().median, 165_000.0);
        // No kick-cpu at 1x in the quick matrix.
        assert!(s
            .ratio(
                Overcommit::X1,
                Workload::Uncontended,
                Mode::KickCpu,
                Mode::Native
            )
            .is_none());
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
        let s = summarize(&ms, &cells, 1);
        let r = s
            .ratio(
                Overcommit::X3,
                Workload::Hackbench,
                Mode::HostKvm,
                Mode::Native,
            )
            .unwrap();
        assert_eq!(r.agg.unwrap().median, 5.0);
    }

    #[test]
    fn goals_pass_miss_and_not_measured() {
        let (ms, cells) = sample();
        let s = summarize(&ms, &cells, 2);
        let g = |name: &str| s.goals.iter().find(|g| g.name == name).unwrap();
        let x = g("2x contended: pvlock-hostkvm / native");
        assert_eq!(x.status, GoalStatus::Pass);
        assert!((x.margin.unwrap() - 12.0).abs() < 1e-9);
        let x = g("2x contended: pvlock-kickcpu / upstream-pv");
        assert_eq!(x.status, GoalStatus::Pass);
        assert_eq!(x.note, "aim 1.2 not met");
        let x = g("2x contended: pvlock-hostkvm / upstream-pv");
        assert_eq!(x.note, "aim 1.2 met");
        let x = g("1x uncontended: pvlock-hostkvm / native");
        assert_eq!(x.status, GoalStatus::Miss);
        assert!((x.margin.unwrap() - (0.95 / 0.97 - 1.0)).abs() < 1e-9);
        let x = g("3x contended: pvlock-hostkvm / native");
        assert_eq!(x.status, GoalStatus::NotMeasured);
        assert_eq!(x.note, "not in this run's matrix (quick mode or --only)");
        let x = g("1x uncontended: pvlock-kickcpu / native");
        assert_eq!(x.status, GoalStatus::NotMeasured);
        let x = g("2x contended fairness: Max/Min of pvlock-kickcpu / Max/Min of upstream-pv");
        assert_eq!(x.status, GoalStatus::Pass);
        assert_eq!(x.note, "median Max/Min over all repetitions 1.20 vs 1.50");
        let x = g("2x contended fairness: Max/Min of pvlock-hostkvm / Max/Min of upstream-pv");
        assert_eq!(x.status, GoalStatus::Miss);
        assert_eq!(
            threshold(Overcommit::X3, Workload::Contended, Mode::Native),
            Some(10.0)
        );
        assert_eq!(
            threshold(Overcommit::X1, Workload::Contended, Mode::Native),
            None
        );
    }

    #[test]
    fn goal_without_data_says_why() {
        let (mut ms, cells) = sample();
        ms.retain(|x| x.key.mode != Mode::Native || x.key.overcommit != Overcommit::X2);
        for rep in 1..=2 {
            ms.push(m(
                Overcommit::X2,
                Workload::Contended,
                Mode::Native,
                rep,
                None,
                None,
            ));
        }
        let s = summarize(&ms, &cells, 2);
        let x = s
            .goals
            .iter()
            .find(|g| g.name == "2x contended: pvlock-kickcpu / native")
            .unwrap();
        assert_eq!(x.status, GoalStatus::NotMeasured);
        assert_eq!(x.note, "native: timeout, timeout");
    }
}

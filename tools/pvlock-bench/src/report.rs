// SPDX-License-Identifier: GPL-2.0

//! The goals, `results.json` (every measurement, every attempt, every
//! parameter) and `results.md` (one table of goals per level, the arms'
//! rates, what the modules counted).

use crate::measure::{HostCounts, Measurement};
use crate::plan::{Arm, Level, Shape, Timing, Workload};
use crate::stats::{self, Decided, Goal, Verdict};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The goals of a level's arms: what `Documentation/pvlock/benchmark.rst`
/// lists, for the arms the run has.
pub fn goals(level: Level, arms: &[Arm], workloads: &[Workload]) -> Vec<Goal> {
    let has = |a: &str| arms.iter().any(|x| x.name == a);
    let mut v = Vec::new();
    for &w in workloads {
        let mut g = |num: &str, den: &str, target: f64, what: &str| {
            if has(num) && has(den) {
                v.push(Goal {
                    level,
                    workload: w,
                    num: num.into(),
                    den: den.into(),
                    target,
                    resolution: false,
                    what: what.into(),
                });
            }
        };
        if level.overcommitted() {
            let limit = if level == Level::X3 { 0.9 } else { 0.95 };
            let beat = if w == Workload::Lt { 1.2 } else { 1.1 };
            g(
                "pvlock",
                "native-2vcpu",
                limit,
                "the limit: overcommit costs nothing",
            );
            g("pvlock", "upstream", beat, "faster than upstream");
            g(
                "pvlock-stock",
                "upstream",
                1.0,
                "on a stock host, not slower than upstream",
            );
            g(
                "pvlock",
                "pvlock-stock",
                1.0,
                "the host half pays (its waits and kicks / the stock kick)",
            );
            for a in arms.iter().filter(|a| a.name.starts_with("pvlock ")) {
                g(
                    "pvlock",
                    &a.name,
                    1.0,
                    "the mechanism pays (pvlock with it / without it)",
                );
            }
        } else {
            g("pvlock", "native", 0.97, "native speed");
            g("pvlock", "upstream", 1.05, "faster than upstream");
            g(
                "pvlock-stock",
                "native",
                0.97,
                "on a stock host, native speed",
            );
            g(
                "pvlock-stock",
                "upstream",
                1.0,
                "on a stock host, not slower than upstream",
            );
            g(
                "upstream+host_kvm",
                "upstream",
                0.97,
                "host_kvm costs guests that do not use it nothing",
            );
        }
        let control = if level.overcommitted() {
            "upstream"
        } else {
            "native"
        };
        let twin = format!("{control}~2");
        if has(control) && has(&twin) {
            v.push(Goal {
                level,
                workload: w,
                num: twin,
                den: control.into(),
                target: stats::RESOLUTION.0,
                resolution: true,
                what: "resolution: same code, another place in the order".into(),
            });
        }
    }
    v
}

/// One L1 boot as it ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UnitRecord {
    pub name: String,
    pub level: Level,
    pub rep: u32,
    pub order: Vec<String>,
    /// Each attempt's verdict (`pass`, `real`, `platform (...)`): every
    /// retry, and why vmtest made it.
    pub attempts: Vec<String>,
    pub passed: bool,
    pub reasons: Vec<String>,
    pub wall_secs: f64,
}

/// Everything a run measured and decided.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub started: String,
    pub kernel: String,
    pub shape: Shape,
    pub reps: u32,
    pub seed: u64,
    pub timing: Timing,
    /// Every workload's parameters, per level.
    pub workloads: Vec<(Level, Workload, String)>,
    pub arms: Vec<(Level, Vec<Arm>)>,
    pub units: Vec<UnitRecord>,
    pub measurements: Vec<Measurement>,
    pub host: Vec<HostCounts>,
    pub goals: Vec<Decided>,
    pub complete: bool,
}

fn fmt_rate(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

fn fmt_ratio(d: &Decided) -> String {
    match (d.median, d.interval) {
        (Some(m), Some((lo, hi, _))) => format!("{m:.3} [{lo:.3}, {hi:.3}]"),
        _ => "-".into(),
    }
}

/// The medians of the arms' counters over the repetitions, per second of
/// the measured run, for the lines under a level's table.
fn counters_line(ms: &[&Measurement], secs: u64) -> String {
    let med = |k: &str| {
        let v: Vec<f64> = ms
            .iter()
            .filter_map(|m| m.guest.get(k))
            .map(|v| *v as f64 / secs as f64)
            .collect();
        stats::median(&v)
    };
    let share: Vec<f64> = ms.iter().filter_map(|m| m.native_share()).collect();
    let mut s = String::new();
    for k in ["taken_slow", "halts_head", "halts_node", "kicks", "yields"] {
        if let Some(v) = med(k) {
            let _ = write!(s, "{k} {}/s, ", fmt_rate(v));
        }
    }
    if let Some(v) = stats::median(&share) {
        let _ = write!(s, "on the native lock {:.0}%", v * 100.0);
    }
    s.trim_end_matches(", ").to_string()
}

pub fn markdown(r: &Results) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# pvlock-bench {}\n\nKernel {}; {} repetitions, {} L1 boots ({}); seed {}; settle {} s, warm-up {} s, measured {} s. \
         Ratios inside each repetition: median [interval of the median, >= {:.0}% coverage]. \
         Verdicts: two-sided exact signed-rank test against the goal, Holm-adjusted over each level's goals at {}, \
         and only outside the level's same-code control spread, with at least {} repetitions.\n",
        r.started,
        r.kernel,
        r.reps,
        r.units.len(),
        match r.shape {
            Shape::Shared => "every arm of a level in one boot",
            Shape::Fresh => "one arm per boot",
            Shape::Paired => "every repetition in one boot, the arms' windows interleaved",
        },
        r.seed,
        r.timing.settle,
        r.timing.warmup,
        r.timing.measure,
        stats::COVERAGE * 100.0,
        stats::ALPHA,
        stats::MIN_DECIDE,
    );
    if !r.complete {
        let _ = writeln!(s, "**Incomplete run** (interrupted).\n");
    }
    for (level, arms) in &r.arms {
        let _ = writeln!(s, "## {}\n", level.label());
        let _ = writeln!(
            s,
            "| workload | ratio | goal | median [interval] | n | p (Holm) | verdict | note |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
        for d in r.goals.iter().filter(|d| d.goal.level == *level) {
            let g = &d.goal;
            let goal = if g.resolution {
                format!("in [{}, {}]", stats::RESOLUTION.0, stats::RESOLUTION.1)
            } else {
                format!(">= {}", g.target)
            };
            let _ = writeln!(
                s,
                "| {} | {} / {} | {goal} | {} | {} | {} | {} | {}{} |",
                g.workload.label(),
                g.num,
                g.den,
                fmt_ratio(d),
                d.ratios.len(),
                d.p_holm.map_or("-".into(), |p| format!("{p:.3}")),
                d.verdict.label(),
                g.what,
                if d.why.is_empty() {
                    String::new()
                } else {
                    format!("; {}", d.why)
                },
            );
        }
        let _ = writeln!(
            s,
            "\n| arm | workload | median rate | runs | lost | guest_pvlock per second (medians) |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for a in arms {
            for (_, w, _) in r.workloads.iter().filter(|(l, _, _)| l == level) {
                let ms: Vec<&Measurement> = r
                    .measurements
                    .iter()
                    .filter(|m| m.level == *level && m.arm == a.name && m.workload == *w)
                    .collect();
                let vals: Vec<f64> = ms.iter().filter_map(|m| m.value).collect();
                let _ = writeln!(
                    s,
                    "| {} | {} | {} {} | {} | {} | {} |",
                    a.name,
                    w.label(),
                    stats::median(&vals).map_or("-".into(), fmt_rate),
                    w.unit(),
                    vals.len(),
                    ms.len() - vals.len(),
                    counters_line(&ms, r.timing.measure),
                );
            }
        }
        let hosts: Vec<&HostCounts> = r.host.iter().filter(|h| h.level == *level).collect();
        for a in arms.iter().filter(|a| a.host_kvm) {
            let hs: Vec<&&HostCounts> = hosts.iter().filter(|h| h.arm == a.name).collect();
            let med = |k: &str| {
                let v: Vec<f64> = hs
                    .iter()
                    .filter_map(|h| h.counters.get(k))
                    .map(|v| *v as f64)
                    .collect();
                stats::median(&v)
            };
            let parts: Vec<String> = [
                "kicks",
                "waits",
                "yields",
                "advice_dedicated",
                "advice_shared",
            ]
            .iter()
            .filter_map(|k| med(k).map(|v| format!("{k} {}", fmt_rate(v))))
            .collect();
            if !parts.is_empty() {
                let _ = writeln!(
                    s,
                    "\nhost_kvm under `{}` (medians per boot of that arm): {}",
                    a.name,
                    parts.join(", ")
                );
            }
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(s, "## Workloads\n");
    for (l, w, p) in &r.workloads {
        let _ = writeln!(s, "- {} {}: `{p}`", l.label(), w.label());
    }
    let retried: Vec<&UnitRecord> = r
        .units
        .iter()
        .filter(|u| u.attempts.len() > 1 || !u.passed)
        .collect();
    let _ = writeln!(s, "\n## L1 boots retried or failed: {}\n", retried.len());
    for u in retried {
        let _ = writeln!(
            s,
            "- {}: attempts {}; {}",
            u.name,
            u.attempts.join(", "),
            u.reasons.join("; ")
        );
    }
    let lost: Vec<&Measurement> = r
        .measurements
        .iter()
        .filter(|m| m.error.is_some())
        .collect();
    if !lost.is_empty() {
        let _ = writeln!(s, "\n## Runs lost: {}\n", lost.len());
        for m in lost {
            let _ = writeln!(
                s,
                "- {} r{} {} {}: {}",
                m.level.label(),
                m.rep,
                m.arm,
                m.workload.label(),
                m.error.as_deref().unwrap_or("")
            );
        }
    }
    s
}

/// The verdicts that a run must not hide: any lock failure makes the
/// benchmark exit non-zero.
pub fn lock_failures(r: &Results) -> usize {
    r.measurements
        .iter()
        .filter(|m| m.error.as_deref().is_some_and(|e| e.contains("failed")))
        .count()
}

pub fn summary_counts(goals: &[Decided]) -> String {
    let count = |v: Verdict| goals.iter().filter(|d| d.verdict == v).count();
    format!(
        "{} PASS, {} MISS, {} undecided, {} without enough repetitions",
        count(Verdict::Pass),
        count(Verdict::Miss),
        count(Verdict::Undecided),
        goals.len() - count(Verdict::Pass) - count(Verdict::Miss) - count(Verdict::Undecided)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::arms;

    #[test]
    fn every_level_has_its_control_and_its_goals() {
        for level in Level::ALL {
            let a = arms(
                level,
                &[crate::plan::Arm::mechanism("early_halt=1").unwrap()],
                crate::plan::Shape::Shared,
            );
            let g = goals(level, &a, &Workload::ALL);
            assert_eq!(g.iter().filter(|g| g.resolution).count(), 2, "{level:?}");
            for x in &g {
                assert!(a.iter().any(|a| a.name == x.num) && a.iter().any(|a| a.name == x.den));
            }
            let mech = g.iter().any(|g| g.den == "pvlock early_halt=1");
            assert_eq!(mech, level.overcommitted());
            // The host half against the stock kick, where it should help.
            let host = g
                .iter()
                .any(|g| g.num == "pvlock" && g.den == "pvlock-stock");
            assert_eq!(host, level.overcommitted());
        }
    }
}

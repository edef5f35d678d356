// SPDX-License-Identifier: GPL-2.0

//! `results.md`: the goals, one table per workload (rows overcommit,
//! columns modes, then the ratios and the fairness), the failures and the
//! runs.

use crate::extract::Status;
use crate::matrix::{Mode, Overcommit, Workload};
use crate::results::Results;
use crate::stats::{threshold, Agg, GoalStatus, Summary};
use std::fmt::Write as _;

/// Three significant digits, with k/M for large numbers.
pub fn fmt_num(x: f64) -> String {
    if x.is_infinite() {
        return "inf".into();
    }
    if x.is_nan() {
        return "nan".into();
    }
    let (v, suffix) = if x.abs() >= 1e6 {
        (x / 1e6, "M")
    } else if x.abs() >= 1e4 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    let a = v.abs();
    let s = if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    };
    format!("{s}{suffix}")
}

/// A count: an integer, with k/M when large.
pub fn fmt_count(x: f64) -> String {
    if x.abs() >= 1e4 {
        fmt_num(x)
    } else {
        format!("{x:.0}")
    }
}

/// `median [min, max]`, or just the value when there is one.
pub fn fmt_agg(a: &Agg) -> String {
    if a.n == 1 {
        fmt_num(a.median)
    } else {
        format!(
            "{} [{}, {}]",
            fmt_num(a.median),
            fmt_num(a.min),
            fmt_num(a.max)
        )
    }
}

/// Minutes and seconds.
pub fn fmt_secs(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s >= 60 {
        format!("{} min {:02} s", s / 60, s % 60)
    } else {
        format!("{s} s")
    }
}

fn status_counts(st: &[Option<Status>]) -> String {
    let mut parts = Vec::new();
    for s in [
        Status::Timeout,
        Status::Failed,
        Status::WrongMode,
        Status::NotRun,
    ] {
        let n = st.iter().filter(|x| **x == Some(s)).count();
        if n > 0 {
            parts.push(format!("{n} {}", s.label()));
        }
    }
    parts.join(", ")
}

fn value_cell(
    s: &Summary,
    oc: Overcommit,
    w: Workload,
    m: Mode,
    reps: u32,
    fairness: bool,
) -> String {
    let Some(c) = s.cell(oc, w, m) else {
        return "-".into();
    };
    let a = if fairness { c.fairness } else { c.value };
    let bad = status_counts(&c.statuses);
    match a {
        None if bad.is_empty() => "-".into(),
        None => format!("**{bad}**"),
        Some(a) => {
            let mut t = fmt_agg(&a);
            if a.n < reps as usize {
                let _ = write!(t, " (n={}/{reps}", a.n);
                if !bad.is_empty() {
                    let _ = write!(t, "; {bad}");
                }
                t.push(')');
            }
            t
        }
    }
}

fn ratio_cell(s: &Summary, oc: Overcommit, w: Workload, pv: Mode, base: Mode, reps: u32) -> String {
    let Some(r) = s.ratio(oc, w, pv, base) else {
        return "-".into();
    };
    let Some(a) = r.agg else {
        return "n/a".into();
    };
    let mut t = fmt_agg(&a);
    if a.n < reps as usize {
        let _ = write!(t, " (n={}/{reps})", a.n);
    }
    if let Some(th) = threshold(oc, w, base) {
        if a.median < th {
            let _ = write!(t, " **MISS < {th}**");
        }
    }
    t
}

/// The Markdown table of workload `w`, or `None` if nothing of it ran.
pub fn workload_table(s: &Summary, w: Workload, reps: u32) -> Option<String> {
    let ocs: Vec<Overcommit> = Overcommit::ALL
        .into_iter()
        .filter(|oc| Mode::ALL.iter().any(|m| s.cell(*oc, w, *m).is_some()))
        .collect();
    if ocs.is_empty() {
        return None;
    }
    let modes: Vec<Mode> = Mode::ALL
        .into_iter()
        .filter(|m| ocs.iter().any(|oc| s.cell(*oc, w, *m).is_some()))
        .collect();
    let mut ratios = Vec::new();
    for pv in Mode::PVLOCK {
        for base in [Mode::Native, Mode::Upstream] {
            if ocs.iter().any(|oc| s.ratio(*oc, w, pv, base).is_some()) {
                ratios.push((pv, base));
            }
        }
    }
    let fair = w != Workload::Hackbench;
    let mut head = vec!["overcommit".to_string()];
    head.extend(modes.iter().map(|m| m.label().to_string()));
    head.extend(
        ratios
            .iter()
            .map(|(p, b)| format!("{} / {}", p.short(), b.short())),
    );
    if fair {
        head.extend(modes.iter().map(|m| format!("Max/Min {}", m.short())));
    }
    let mut t = format!("| {} |\n|{}\n", head.join(" | "), "---|".repeat(head.len()));
    for oc in &ocs {
        let mut row = vec![format!(
            "{} ({} vCPUs / 2)",
            oc.label(),
            oc.guests() * oc.vcpus()
        )];
        row.extend(modes.iter().map(|m| value_cell(s, *oc, w, *m, reps, false)));
        row.extend(
            ratios
                .iter()
                .map(|(p, b)| ratio_cell(s, *oc, w, *p, *b, reps)),
        );
        if fair {
            row.extend(modes.iter().map(|m| value_cell(s, *oc, w, *m, reps, true)));
        }
        let _ = writeln!(t, "| {} |", row.join(" | "));
    }
    Some(t)
}

/// The goals table.
pub fn goals_table(s: &Summary) -> String {
    let mut t = String::from(
        "| goal | target | measured: median [min, max] | result |\n|---|---|---|---|\n",
    );
    for g in &s.goals {
        let target = match g.aim {
            Some(aim) => format!("{} {} (aim {aim})", g.op, g.target),
            None => format!("{} {}", g.op, g.target),
        };
        let measured = g
            .measured
            .map(|a| fmt_agg(&a))
            .unwrap_or_else(|| "-".into());
        let margin = g
            .margin
            .map(|m| {
                if (m * 100.0).abs() < 10.0 {
                    format!(" ({:+.1}% of target)", m * 100.0)
                } else {
                    format!(" ({:+.0}% of target)", m * 100.0)
                }
            })
            .unwrap_or_default();
        let result = match g.status {
            GoalStatus::Pass => format!("PASS{margin}"),
            GoalStatus::Miss => format!("**MISS**{margin}"),
            GoalStatus::NotMeasured => "n/a".into(),
        };
        let note = if g.note.is_empty() {
            String::new()
        } else {
            format!("; {}", g.note)
        };
        let _ = writeln!(t, "| {} | {target} | {measured} | {result}{note} |", g.name);
    }
    t
}

fn workload_title(w: Workload, r: &Results) -> String {
    let s = &r.settings;
    match w {
        Workload::Contended => format!(
            "contended: locktorture spin_lock, 2 writers per L2 vCPU, {} s ({} s native)",
            s.contended_secs, s.native_contended_secs
        ),
        Workload::Uncontended => format!(
            "uncontended: locktorture spin_lock, 1 writer, {} s",
            s.uncontended_secs
        ),
        Workload::Hackbench => format!(
            "hackbench: rt-tests hackbench, process mode over sockets, groups = L2 vCPUs, {} loops",
            s.hackbench_loops
        ),
    }
}

/// Median of a per-instance number over the ok measurements of a cell.
fn median_of(
    r: &Results,
    oc: Overcommit,
    m: Mode,
    f: impl Fn(&crate::extract::Instance) -> Option<f64>,
) -> String {
    let v: Vec<f64> = r
        .measurements
        .iter()
        .filter(|x| {
            x.key.overcommit == oc
                && x.key.mode == m
                && x.key.workload == Workload::Contended
                && x.status == Status::Ok
        })
        .filter_map(|x| {
            let per: Vec<f64> = x.instances.iter().filter_map(&f).collect();
            (!per.is_empty()).then(|| per.iter().sum())
        })
        .collect();
    crate::stats::agg(&v)
        .map(|a| fmt_count(a.median))
        .unwrap_or_else(|| "-".into())
}

/// Kicks and hypercalls during the contended workload.
fn kicks_table(r: &Results) -> Option<String> {
    let s = &r.summary;
    let mut rows = Vec::new();
    for oc in Overcommit::ALL {
        for m in Mode::ALL {
            if s.cell(oc, Workload::Contended, m).is_none() || m == Mode::Native {
                continue;
            }
            let hc = |nr: &'static str| {
                move |i: &crate::extract::Instance| i.hypercalls.get(nr).map(|v| *v as f64)
            };
            let ctr = |c: &'static str| {
                move |i: &crate::extract::Instance| i.counters.get(c).map(|v| *v as f64)
            };
            rows.push(format!(
                "| {} | {} | {} | {} | {} | {} | {} |",
                oc.label(),
                m.label(),
                median_of(r, oc, m, hc("5")),
                median_of(r, oc, m, hc("1886781441")),
                median_of(r, oc, m, ctr("kicks")),
                median_of(r, oc, m, ctr("taken_slow")),
                median_of(r, oc, m, |i| {
                    let h = i.counters.get("halts_head").copied().unwrap_or(0)
                        + i.counters.get("halts_node").copied().unwrap_or(0)
                        + i.counters.get("halts_early").copied().unwrap_or(0);
                    (!i.counters.is_empty()).then_some(h as f64)
                }),
            ));
        }
    }
    if rows.is_empty() {
        return None;
    }
    Some(format!(
        "| overcommit | mode | L1: KVM_HC_KICK_CPU | L1: KVM_HC_PVLOCK_KICK | guest kicks | guest slow acquisitions | guest halts |\n|---|---|---|---|---|---|---|\n{}\n",
        rows.join("\n")
    ))
}

/// The whole `results.md`.
pub fn markdown(r: &Results) -> String {
    let s = &r.settings;
    let reps = s.reps;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# pvlock benchmark: {} mode{}\n",
        if s.quick { "quick" } else { "full" },
        if r.complete {
            ""
        } else {
            " (INCOMPLETE: interrupted)"
        }
    );
    let make_up = r.units.iter().filter(|u| u.name.contains("-retry")).count();
    let _ = writeln!(
        o,
        "- started {}, took {} ({} runs of L1, {make_up} of them make-up runs for guests the platform lost)",
        r.started,
        fmt_secs(r.wall_secs),
        r.units.len(),
    );
    let _ = writeln!(
        o,
        "- kernel {}, pvlock {}; L1: QEMU TCG with 2 vCPUs (KVM host, no pause-loop exiting); L2: KVM guests in L1",
        r.kernel, r.git
    );
    let _ = writeln!(
        o,
        "- {reps} repetitions, interleaved (every mode of an overcommit level runs in one L1 boot, in turn); values are median [min, max] over the repetitions; ratios are taken inside each repetition, then median [min, max]; n=k/{reps} when only k repetitions measured both sides"
    );
    let _ = writeln!(
        o,
        "- ratios say how much better pvlock did: writes/s pvlock / base, for hackbench time base / pvlock; Max/Min is locktorture's per-writer spread (1 is perfectly fair)"
    );
    if let Some(only) = &r.only {
        let _ = writeln!(o, "- only the cells matching `{only}`");
    }
    for n in &r.notes {
        let _ = writeln!(o, "- note: {n}");
    }
    let _ = writeln!(o, "\n## Goals\n\n{}", goals_table(&r.summary));
    for w in Workload::ALL {
        if let Some(t) = workload_table(&r.summary, w, reps) {
            let _ = writeln!(o, "## {}\n\n{}\n\n{t}", workload_title(w, r), w.unit());
        }
    }
    if let Some(t) = kicks_table(r) {
        let _ = writeln!(
            o,
            "## Kicks during the contended workload (median per run)\n\n{t}\nHypercalls as L1's kvm_hypercall trace event counted them; with two guests at once the counter is shared between them.\n"
        );
    }
    let bad: Vec<_> = r
        .measurements
        .iter()
        .filter(|m| m.status != Status::Ok)
        .collect();
    let _ = writeln!(o, "## Failed and timed-out measurements\n");
    if bad.is_empty() {
        let _ = writeln!(o, "None.\n");
    } else {
        for m in bad {
            let _ = writeln!(
                o,
                "- {} {}: **{}**: {}",
                m.unit,
                m.cell,
                m.status.label(),
                m.note.as_deref().unwrap_or("")
            );
        }
        o.push('\n');
    }
    if !r.unused.is_empty() {
        let _ = writeln!(
            o,
            "Not used (replaced by a make-up run, or repeated by one):\n"
        );
        for m in &r.unused {
            let what = match m.status {
                Status::Ok => format!(
                    "{}: {}",
                    m.status.label(),
                    m.value.map(fmt_num).unwrap_or_default()
                ),
                _ => format!("{}: {}", m.status.label(), m.note.as_deref().unwrap_or("")),
            };
            let _ = writeln!(o, "- {} {}: {what}", m.unit, m.cell);
        }
        o.push('\n');
    }
    let _ = writeln!(
        o,
        "## Runs\n\n| run | modes | wall | attempts | vmtest verdict |\n|---|---|---|---|---|"
    );
    for u in &r.units {
        let attempts = u.attempts.as_array().map(|a| a.len()).unwrap_or(0);
        let verdict = match (&u.error, u.passed) {
            (Some(e), _) => format!("error: {e}"),
            (None, true) => "passed".into(),
            (None, false) => {
                let mut v = u
                    .reasons
                    .iter()
                    .take(2)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ");
                if u.reasons.len() > 2 {
                    let _ = write!(v, "; +{} more", u.reasons.len() - 2);
                }
                format!("failed: {}", v.replace('|', "/"))
            }
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {attempts} | {verdict} |",
            u.name,
            u.modes.join(", "),
            fmt_secs(u.wall_secs)
        );
    }
    let _ = writeln!(
        o,
        "\nRaw numbers: `results.json`; charts: `throughput.svg`{}; each run's scenario, result and console logs: `scenarios/`, `runs/`.",
        if r.summary.cells.iter().any(|c| c.key.workload == Workload::Hackbench) {
            ", `hackbench.svg`"
        } else {
            ""
        }
    );
    o
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::matrix::{cells, Settings};
    use crate::results::Results;
    use crate::stats::summarize;

    #[test]
    fn numbers() {
        assert_eq!(fmt_num(259083.7), "259k");
        assert_eq!(fmt_num(2733.7), "2734");
        assert_eq!(fmt_num(27337.0), "27.3k");
        assert_eq!(fmt_num(6589240.0), "6.59M");
        assert_eq!(fmt_num(95.24), "95.2");
        assert_eq!(fmt_num(1.3), "1.30");
        assert_eq!(fmt_num(0.9651), "0.965");
        assert_eq!(fmt_num(f64::INFINITY), "inf");
        assert_eq!(fmt_count(42.0), "42");
        assert_eq!(fmt_count(374_123.0), "374k");
        assert_eq!(fmt_secs(412.4), "6 min 52 s");
        assert_eq!(fmt_secs(7.0), "7 s");
    }

    pub(crate) fn results() -> Results {
        let (ms, cells) = crate::stats::tests::sample();
        let summary = summarize(&ms, &cells, 2);
        Results {
            tool: "pvlock-bench".into(),
            version: "0".into(),
            started: "2026-11-30 00:00:00 UTC".into(),
            finished: None,
            wall_secs: 412.0,
            complete: true,
            kernel: "7.3.4".into(),
            git: "abc1234".into(),
            kdir: "/k".into(),
            settings: Settings::new(true, None, 1),
            only: None,
            hackbench: None,
            notes: vec![],
            matrix: cells.iter().map(|c| c.id()).collect(),
            order: vec![],
            units: vec![],
            measurements: ms,
            unused: vec![],
            summary,
        }
    }

    #[test]
    fn contended_table() {
        let r = results();
        let t = workload_table(&r.summary, Workload::Contended, 2).unwrap();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert_eq!(
            lines[0],
            "| overcommit | native | upstream-pv | pvlock-kickcpu | pvlock-hostkvm | kickcpu / native | kickcpu / upstream | hostkvm / native | hostkvm / upstream | Max/Min native | Max/Min upstream | Max/Min kickcpu | Max/Min hostkvm |"
        );
        assert_eq!(lines[1].matches("---|").count(), 13);
        let row: Vec<&str> = lines[2].split(" | ").collect();
        assert_eq!(row[0], "| 2x (4 vCPUs / 2)");
        assert_eq!(row[1], "1000 (n=1/2; 1 timeout)");
        assert_eq!(row[2], "150k [100k, 200k]");
        assert_eq!(row[5], "110 (n=1/2)");
        assert_eq!(row[6], "1.10 [1.10, 1.10]");
        assert_eq!(row[8], "1.43 [1.30, 1.56]");
        assert_eq!(row[9], "500 (n=1/2; 1 timeout)");
        assert!(workload_table(&r.summary, Workload::Hackbench, 2).is_none());
    }

    #[test]
    fn misses_are_flagged() {
        let r = results();
        let t = workload_table(&r.summary, Workload::Uncontended, 2).unwrap();
        assert!(
            t.contains("| 0.950 [0.950, 0.950] **MISS < 0.97** |"),
            "{t}"
        );
        assert!(!t.contains("kickcpu"), "{t}");
        let g = goals_table(&r.summary);
        assert!(g.contains("| 1x uncontended: pvlock-hostkvm / native | >= 0.97 | 0.950 [0.950, 0.950] | **MISS** (-2.1% of target) |"), "{g}");
        assert!(
            g.contains(
                "| 2x contended: pvlock-hostkvm / native | >= 10 | 130 | PASS (+1200% of target) |"
            ),
            "{g}"
        );
        assert!(
            g.contains("| 3x contended: pvlock-kickcpu / native | >= 10 | - | n/a; "),
            "{g}"
        );
        assert!(g.contains("(aim 1.2)"));
    }

    #[test]
    fn results_json_round_trip() {
        let r = results();
        let dir = std::env::temp_dir().join(format!("pvlock-bench-rt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("results.json");
        std::fs::write(&p, serde_json::to_string_pretty(&r).unwrap()).unwrap();
        let back = Results::load(&p).unwrap();
        assert_eq!(back.summary, r.summary);
        assert_eq!(markdown(&back), markdown(&r));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn whole_report() {
        let r = results();
        let md = markdown(&r);
        assert!(md.starts_with("# pvlock benchmark: quick mode\n"));
        assert!(md.contains("## Goals"));
        assert!(md.contains(
            "## contended: locktorture spin_lock, 2 writers per L2 vCPU, 5 s (5 s native)"
        ));
        assert!(md.contains("## uncontended"));
        assert!(!md.contains("## hackbench"));
        assert!(md.contains(
            "## Failed and timed-out measurements\n\n- r2 2x/contended/native: **timeout**"
        ));
        assert!(md.contains("took 6 min 52 s"));
        assert!(!md.contains("Not used"));
        let mut r = r;
        let mut lost = r.measurements[0].clone();
        lost.status = Status::NotRun;
        lost.note = Some("native-1: never booted".into());
        lost.unit = "r1-2x".into();
        r.unused.push(lost);
        let md = markdown(&r);
        assert!(md.contains("Not used (replaced by a make-up run, or repeated by one):\n\n- r1-2x 2x/contended/native: not-run: native-1: never booted\n"), "{md}");
        let _ = cells(false);
    }
}

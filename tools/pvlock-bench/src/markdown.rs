// SPDX-License-Identifier: GPL-2.0

//! `results.md`: the goals (decided on the intervals of the in-repetition
//! ratios), one table per workload (rows overcommit, columns modes, then
//! the ratios and the fairness), what the adaptive lock ran in each
//! guest_pvlock cell, the lock holders host_kvm preempted and deferred
//! per guest_pvlock mode (and the hint on against off), the kicks, the
//! measurements lost per mode, the failures and the runs with their
//! order.

use crate::extract::Status;
use crate::matrix::{Mode, Overcommit, Workload, STRESSNG_STRESSORS};
use crate::results_json::Results;
use crate::stats::{decide, fmt_count_agg, fmt_native_share, target, Agg, GoalStatus, Summary};
use pvlock_common::fmt::{fmt_count_short, fmt_num};
use std::fmt::Write as _;

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

/// `median [lo, hi]` with the interval for the median, or just the value
/// when there is one.
pub fn fmt_ratio(a: &Agg) -> String {
    if a.n == 1 {
        fmt_num(a.median)
    } else {
        format!(
            "{} [{}, {}]",
            fmt_num(a.median),
            fmt_num(a.lo),
            fmt_num(a.hi)
        )
    }
}

/// `[lo, hi] 93.8%, n=5`: the interval for the median with its coverage.
pub fn fmt_interval(a: &Agg) -> String {
    format!(
        "[{}, {}] {:.1}%, n={}",
        fmt_num(a.lo),
        fmt_num(a.hi),
        a.coverage * 100.0,
        a.n
    )
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

/// `+4.2%`, `-12%`.
fn fmt_pct(x: f64) -> String {
    if (x * 100.0).abs() < 10.0 {
        format!("{:+.1}%", x * 100.0)
    } else {
        format!("{:+.0}%", x * 100.0)
    }
}

/// The statuses other than ok, in the order of the tables.
const BAD: [Status; 4] = [
    Status::Timeout,
    Status::Failed,
    Status::WrongMode,
    Status::NotRun,
];

fn status_counts(st: &[Option<Status>]) -> String {
    let mut parts = Vec::new();
    for s in BAD {
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
    let mut t = fmt_ratio(&a);
    if a.n < reps as usize {
        let _ = write!(t, " (n={}/{reps})", a.n);
    }
    if let Some(th) = target(oc, w, base) {
        match decide(">=", th, &a) {
            GoalStatus::Miss => {
                let _ = write!(t, " **MISS < {th}**");
            }
            GoalStatus::Undecided => {
                let _ = write!(t, " (undecided at {th})");
            }
            _ => {}
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
    let ratios: Vec<(Mode, Mode)> = Mode::RATIOS
        .into_iter()
        .filter(|(pv, base)| ocs.iter().any(|oc| s.ratio(*oc, w, *pv, *base).is_some()))
        .collect();
    let fair = !w.is_macro();
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

/// One cell of the adaptive table: `native 97% [95%, 100%], 1/0
/// switches`, the share of the time on the native lock and the switches to
/// native / to pvlock over the repetitions; `-` outside the matrix, `n/a`
/// when nothing was recorded.
fn adaptive_cell(s: &Summary, oc: Overcommit, w: Workload, m: Mode, reps: u32) -> String {
    let Some(c) = s.cell(oc, w, m) else {
        return "-".into();
    };
    let Some(a) = &c.adaptive else {
        return "n/a".into();
    };
    let mut t = match &a.native_share {
        Some(share) => format!("{}, ", fmt_native_share(share)),
        None => String::new(),
    };
    let _ = write!(t, "{}/{} switches", a.to_native, a.to_pvlock);
    if a.n < reps as usize {
        let _ = write!(t, " (n={}/{reps})", a.n);
    }
    t
}

/// What guest_pvlock's lock ran during each workload: a row per overcommit
/// level and guest_pvlock mode, a column per workload; `None` if no cell
/// recorded it (no guest_pvlock, or a `results.json` from before the
/// adaptive lock).
pub fn adaptive_table(s: &Summary, reps: u32) -> Option<String> {
    if !s.cells.iter().any(|c| c.adaptive.is_some()) {
        return None;
    }
    let has = |oc: Overcommit, w: Workload, m: Mode| s.cell(oc, w, m).is_some();
    let modes: Vec<Mode> = Mode::ALL
        .into_iter()
        .filter(|m| m.loads_guest_pvlock())
        .collect();
    let ws: Vec<Workload> = Workload::ALL
        .into_iter()
        .filter(|w| {
            Overcommit::ALL
                .iter()
                .any(|oc| modes.iter().any(|m| has(*oc, *w, *m)))
        })
        .collect();
    let mut t = format!(
        "| overcommit | mode | {} |\n|---|---|{}\n",
        ws.iter().map(|w| w.label()).collect::<Vec<_>>().join(" | "),
        "---|".repeat(ws.len())
    );
    for oc in Overcommit::ALL {
        for m in &modes {
            if !ws.iter().any(|w| has(oc, *w, *m)) {
                continue;
            }
            let row: Vec<String> = ws
                .iter()
                .map(|w| adaptive_cell(s, oc, *w, *m, reps))
                .collect();
            let _ = writeln!(
                t,
                "| {} | {} | {} |",
                oc.label(),
                m.label(),
                row.join(" | ")
            );
        }
    }
    Some(t)
}

/// `84% [82%, 86%]`: a share's median [min, max] over the repetitions.
fn fmt_share(a: &Agg) -> String {
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    if a.n == 1 || a.min == a.max {
        pct(a.median)
    } else {
        format!("{} [{}, {}]", pct(a.median), pct(a.min), pct(a.max))
    }
}

/// The workloads of `m` at `oc` in the matrix, in run order.
fn workloads_of(s: &Summary, oc: Overcommit, m: Mode) -> Vec<Workload> {
    Workload::RUN_ORDER
        .into_iter()
        .filter(|w| s.cell(oc, *w, m).is_some())
        .collect()
}

/// What host_kvm counted over each guest_pvlock mode's guests: a row per
/// overcommit level and mode, the lock holders it preempted, the ones it
/// deferred, their share and the ones it did not defer, per L1 boot;
/// `None` if nothing was recorded (no host_kvm with the hint, or a
/// `results.json` from before L1's snapshots per mode).
pub fn host_table(s: &Summary, reps: u32) -> Option<String> {
    if s.host.is_empty() {
        return None;
    }
    let mut t = String::from(
        "| overcommit | mode | workloads of its guests | lock holders preempted | deferred (grants) | share deferred | not deferred | not deferred because the grant ran out / ended otherwise / was running / after a kick | preempted in a critical section, any cause (scheduler) |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    let count = |a: &Option<Agg>| a.as_ref().map(fmt_count_agg).unwrap_or_else(|| "-".into());
    for h in &s.host {
        let ws: Vec<&str> = workloads_of(s, h.overcommit, h.mode)
            .iter()
            .map(|w| w.label())
            .collect();
        let mut preempted = count(&h.holder_preemptions);
        if h.n < reps as usize {
            let _ = write!(preempted, " (n={}/{reps})", h.n);
        }
        let why = h
            .not_deferred_why
            .as_ref()
            .map(|w| {
                w.iter()
                    .map(|a| pvlock_common::fmt::fmt_count_short(a.median))
                    .collect::<Vec<_>>()
                    .join(" / ")
            })
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            t,
            "| {} | {} | {} | {preempted} | {} | {} | {} | {why} | {} |",
            h.overcommit.label(),
            h.mode.label(),
            ws.join(", "),
            count(&h.grants),
            h.deferred_share
                .as_ref()
                .map(fmt_share)
                .unwrap_or_else(|| "-".into()),
            count(&h.not_deferred),
            count(&h.holders_preempted),
        );
    }
    Some(t)
}

/// The critical-section hint on against off, per overcommit level: the
/// contended gain (pvlock-hostkvm / pvlock-nohint, with its goal), and
/// from host_kvm's counts in the same L1 boots the lock holders'
/// preemptions pvlock-hostkvm's guests still suffered (not deferred)
/// against pvlock-nohint's (none deferred), and their ratio per boot;
/// `None` if neither ran.
pub fn hint_table(s: &Summary, reps: u32) -> Option<String> {
    let w = Workload::Contended;
    let ocs: Vec<Overcommit> = Overcommit::ALL
        .into_iter()
        .filter(|oc| {
            s.ratio(*oc, w, Mode::HostKvm, Mode::NoHint).is_some() || s.hint(*oc).is_some()
        })
        .collect();
    if ocs.is_empty() {
        return None;
    }
    let mut t = String::from(
        "| overcommit | contended: hostkvm / nohint | holders preempted, not deferred: pvlock-hostkvm | holders preempted: pvlock-nohint | hostkvm / nohint, same boot | workloads of the guests (hostkvm; nohint) |\n|---|---|---|---|---|---|\n",
    );
    let count = |m: Mode, oc: Overcommit, f: fn(&crate::stats::HostSummary) -> Option<Agg>| {
        s.host(oc, m)
            .and_then(f)
            .map(|a| fmt_count_agg(&a))
            .unwrap_or_else(|| "-".into())
    };
    for oc in ocs {
        let ratio = match s.hint(oc).and_then(|h| h.agg) {
            Some(a) => {
                let mut r = fmt_ratio(&a);
                if a.n < reps as usize {
                    let _ = write!(r, " (n={}/{reps})", a.n);
                }
                r
            }
            None => "-".into(),
        };
        let ws = |m: Mode| {
            workloads_of(s, oc, m)
                .iter()
                .map(|w| w.label())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {ratio} | {}; {} |",
            oc.label(),
            ratio_cell(s, oc, w, Mode::HostKvm, Mode::NoHint, reps),
            count(Mode::HostKvm, oc, |h| h.not_deferred),
            count(Mode::NoHint, oc, |h| h.holder_preemptions),
            ws(Mode::HostKvm),
            ws(Mode::NoHint),
        );
    }
    Some(t)
}

/// The goals table, then the goals outside this run's matrix in one line.
pub fn goals_table(s: &Summary) -> String {
    let mut t = String::from(
        "| goal | target | median | interval for the median (coverage, n) | result |\n|---|---|---|---|---|\n",
    );
    let mut outside = Vec::new();
    for g in &s.goals {
        if g.out_of_matrix() {
            outside.push(g.name.as_str());
            continue;
        }
        let target = match g.aim {
            Some(aim) => format!("{} {} (aim {aim})", g.op, g.target),
            None => format!("{} {}", g.op, g.target),
        };
        let (median, interval) = match &g.measured {
            Some(a) => (fmt_num(a.median), fmt_interval(a)),
            None => ("-".into(), "-".into()),
        };
        let margin = g
            .margin
            .map(|m| format!(" ({} of target)", fmt_pct(m)))
            .unwrap_or_default();
        let result = match g.status {
            GoalStatus::Pass => format!("PASS{margin}"),
            GoalStatus::Miss => format!("**MISS**{margin}"),
            GoalStatus::Undecided => format!("undecided{margin}"),
            GoalStatus::NotMeasured => "n/a".into(),
        };
        let note = if g.note.is_empty() {
            String::new()
        } else {
            format!("; {}", g.note)
        };
        let _ = writeln!(
            t,
            "| {} | {target} | {median} | {interval} | {result}{note} |",
            g.name
        );
    }
    if !outside.is_empty() {
        let _ = writeln!(
            t,
            "\nNot in this run's matrix (quick mode or --only), n/a: {}.",
            outside.join("; ")
        );
    }
    t
}

/// One line per undecided goal: why its interval does not decide it.
pub fn undecided_list(s: &Summary) -> Option<String> {
    let lines: Vec<String> = s
        .goals
        .iter()
        .filter_map(|g| Some(format!("- {}: {}", g.name, g.undecided_because()?)))
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n") + "\n")
}

/// Per mode: the measurements planned, those with a result, and every
/// attempt (make-up runs included) by how it ended.
pub fn loss_table(s: &Summary) -> Option<String> {
    if s.losses.is_empty() {
        return None;
    }
    let mut t = String::from(
        "| mode | planned | measured | missing | attempts | ok | timeout | failed | wrong-mode | not-run | lost attempts |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for l in &s.losses {
        let n = |st: Status| l.by_status.get(st.label()).copied().unwrap_or(0);
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            l.mode.map(|m| m.label()).unwrap_or("?"),
            l.planned,
            l.ok,
            l.missing,
            l.attempts,
            n(Status::Ok),
            n(Status::Timeout),
            n(Status::Failed),
            n(Status::WrongMode),
            n(Status::NotRun),
            l.loss_rate
                .map(|r| format!("{:.0}%", r * 100.0))
                .unwrap_or_else(|| "-".into()),
        );
    }
    Some(t)
}

fn workload_title(w: Workload, r: &Results) -> String {
    let s = &r.settings;
    match w {
        Workload::Contended => {
            let mut t = format!(
                "contended: locktorture spin_lock, 2 writers per L2 vCPU, {} s ({} s native)",
                s.contended_secs, s.native_contended_secs
            );
            if r.summary
                .cells
                .iter()
                .any(|c| c.key.mode == Mode::NativeTwo)
            {
                let _ = write!(
                    t,
                    "; native-2vcpu: one guest, 2 vCPUs, 4 writers, {} s, alone in each overcommitted L1 boot",
                    s.contended_secs
                );
            }
            t
        }
        Workload::Uncontended => format!(
            "uncontended: locktorture spin_lock, 1 writer, {} s",
            s.uncontended_secs
        ),
        Workload::Hackbench => format!(
            "hackbench: rt-tests hackbench, process mode over sockets, groups = L2 vCPUs, {} loops",
            s.hackbench_loops
        ),
        Workload::StressNg => format!(
            "stress-ng: {} stressors, one instance of each per L2 vCPU, {} s",
            STRESSNG_STRESSORS.replace(',', ", "),
            s.stressng_secs
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
        .map(|a| fmt_count_short(a.median))
        .unwrap_or_else(|| "-".into())
}

/// Kicks and hypercalls during the contended workload.
fn kicks_table(r: &Results) -> Option<String> {
    let s = &r.summary;
    let mut rows = Vec::new();
    for oc in Overcommit::ALL {
        for m in Mode::ALL {
            if s.cell(oc, Workload::Contended, m).is_none() || m.is_native() {
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
        "- kernel {}, pvlock {}; L1: QEMU TCG with 3 vCPUs, its guests confined to 2 of them (KVM host, no pause-loop exiting), host_kvm force=1 loaded before the first guest of every L1 boot with a pvlock mode; L2: KVM guests in L1 (pvlock-kickcpu with guest_pvlock kick=1, pvlock-static with adaptive=0, pvlock-nohint with hint=2; every guest_pvlock guest waits {} s after the load, for the adaptive lock to settle, before it reads what it runs)",
        r.kernel,
        r.git,
        crate::matrix::SETTLE_SECS
    );
    let _ = writeln!(
        o,
        "- {reps} repetitions, interleaved: every mode of an overcommit level runs in one L1 boot, in turn, in an order that rotates left by one with each repetition (see the runs); values are median [min, max] over the repetitions"
    );
    let _ = writeln!(
        o,
        "- ratios are taken inside each repetition and shown as median [lo, hi]: [lo, hi] is the distribution-free interval for the median of the in-repetition ratios (order statistics: the narrowest with at least 90% coverage, which is min..max from 5 to 7 repetitions; with fewer, min..max and its real coverage, 75% for 3); n=k/{reps} when only k repetitions measured both sides; a goal passes or misses only when its whole interval is on one side of the target, else it is undecided"
    );
    let _ = writeln!(
        o,
        "- ratios say how much better pvlock did: throughput pvlock / base, for hackbench time base / pvlock; the limit ratio is the overcommitted pvlock guest's writes (two guests: summed) over native-2vcpu's, one 2-vCPU guest alone on the same L1 (1 means overcommit costs nothing); hostkvm / static is the adaptive lock over the same lock held installed (1 means following the host costs nothing); hostkvm / nohint is the lock with the critical-section hint over the same lock whose hint the host only observes (1 means the hint gains nothing); Max/Min is locktorture's per-writer spread (1 is perfectly fair)"
    );
    if let Some(only) = &r.only {
        let _ = writeln!(o, "- only the cells matching `{only}`");
    }
    for n in &r.notes {
        let _ = writeln!(o, "- note: {n}");
    }
    let _ = writeln!(o, "\n## Goals\n\n{}", goals_table(&r.summary));
    if let Some(u) = undecided_list(&r.summary) {
        let _ = writeln!(o, "Undecided:\n\n{u}");
    }
    for w in Workload::ALL {
        if let Some(t) = workload_table(&r.summary, w, reps) {
            let _ = writeln!(o, "## {}\n\n{}\n\n{t}", workload_title(w, r), w.unit());
        }
    }
    if let Some(t) = adaptive_table(&r.summary, reps) {
        let _ = writeln!(
            o,
            "## What the adaptive lock ran\n\nPer cell of a guest_pvlock mode: the share of the workload's time on the native lock (guest_pvlock parked by the host's advice), median [min, max] over the repetitions, and the switches to native / to pvlock during the workloads, summed over the repetitions and guests; from the pvlock-stat snapshots before and after each workload, of the measurements with a number. Expected: native at 1x, pvlock (0 switches) under overcommit; pvlock-static never switches.\n\n{t}"
        );
    }
    if let Some(t) = hint_table(&r.summary, reps) {
        let _ = writeln!(
            o,
            "## The critical-section hint, on / off\n\npvlock-hostkvm (guest_pvlock as it ships, hint=1: host_kvm may let a vCPU in a critical section run on a little instead of preempting it) against pvlock-nohint (hint=2: host_kvm only counts those preemptions and defers none). The gain is the contended throughput ratio, median [lo, hi] of the in-repetition ratios (goal >= 1, no loss). The preemptions are host_kvm's counters per L1 boot over each mode's guests, median [min, max] over the repetitions: they cover each guest's **whole boot, every workload of the mode**, not the contended workload alone; where pvlock-hostkvm's guests run more workloads than pvlock-nohint's (the full matrix), its counts cover more work, and pvlock-static's row below (hint on, contended only, like pvlock-nohint) is the like-for-like number. hostkvm / nohint, same boot: pvlock-hostkvm's holders' preemptions not deferred over pvlock-nohint's holders' preemptions in the same L1 boot, median [lo, hi] over the repetitions; below 1, fewer preemptions of vCPUs in a critical section with the hint.\n\n{t}"
        );
    }
    if let Some(t) = host_table(&r.summary, reps) {
        let _ = writeln!(
            o,
            "## Lock holders preempted (host_kvm), per guest_pvlock mode\n\nhost_kvm's counters over all of L1's VMs, the differences of L1's snapshots right before and right after each mode's guests: they cover each guest's **whole boot, every workload listed, not the contended workload alone**. Per L1 boot, median [min, max] over the repetitions in which every measurement of the mode at that level has a number and came from one boot. Lock holders preempted: reschedules of a vCPU whose guest was in a critical section (`holder_preemptions`; guests with the hint on, hint=1, and observed, hint=2); deferred: those host_kvm let run on instead (`grants`, hint=1 only); not deferred: the difference, and its medians by KVM's reason for deferring none (host_kvm's `not_deferred_*`: this tick's grant ran out with the lock still held, it ended otherwise, a grant was running, the way back from a kick; the rest, `hint=2` guests' and `grant_us=0`, make up the difference). Preempted in a critical section, any cause: the vCPU threads L1's scheduler took off their CPU while their guest was in a critical section and not waiting (`holders_preempted`, counted where it happens: the tick's reschedules not deferred, a wake-up's preemption, which the check on the way back into the guest never sees, and grants that ran out); hint=1 and hint=2 guests alike, the like-for-like number for the hint's effect.\n\n{t}"
        );
    }
    if let Some(t) = kicks_table(r) {
        let _ = writeln!(
            o,
            "## Kicks during the contended workload (median per run)\n\n{t}\nHypercalls as L1's kvm_hypercall trace event counted them; with two guests at once the counter is shared between them.\n"
        );
    }
    if let Some(t) = loss_table(&r.summary) {
        let _ = writeln!(
            o,
            "## Measurements per mode\n\nPlanned: the mode's cells x {reps} repetitions; measured: those with a number; attempts: every measurement the runs made, make-up runs included, by how it ended.\n\n{t}"
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
        "## Runs\n\n| run | modes, in run order | wall | attempts | vmtest verdict |\n|---|---|---|---|---|"
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
            u.modes.join(" → "),
            fmt_secs(u.wall_secs)
        );
    }
    let charts: Vec<&str> = [
        (Workload::Hackbench, "`hackbench.svg`"),
        (Workload::StressNg, "`stressng.svg`"),
    ]
    .into_iter()
    .filter(|(w, _)| r.summary.cells.iter().any(|c| c.key.workload == *w))
    .map(|(_, f)| f)
    .collect();
    let _ = writeln!(
        o,
        "\nRaw numbers: `results.json`; charts: `throughput.svg`{}; each run's scenario, result and console logs: `scenarios/`, `runs/`.",
        charts.iter().map(|c| format!(", {c}")).collect::<String>()
    );
    o
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::matrix::Settings;
    use crate::results_json::{Results, UnitRecord};
    use crate::stats::summarize;

    #[test]
    fn numbers() {
        assert_eq!(fmt_secs(412.4), "6 min 52 s");
        assert_eq!(fmt_secs(7.0), "7 s");
        assert_eq!(fmt_pct(0.0421), "+4.2%");
        assert_eq!(fmt_pct(-0.123), "-12%");
        let a = crate::stats::agg(&[1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        assert_eq!(fmt_interval(&a), "[1.00, 5.00] 93.8%, n=5");
    }

    fn unit(name: &str, modes: &[Mode]) -> UnitRecord {
        UnitRecord {
            name: name.into(),
            rep: 1,
            overcommit: "2x".into(),
            modes: modes.iter().map(|m| m.label().to_string()).collect(),
            scenario: "s.toml".into(),
            result_file: "r.json".into(),
            wall_secs: 150.0,
            attempts: serde_json::json!([{}]),
            passed: true,
            reasons: vec![],
            error: None,
            host: Default::default(),
            loadavg: String::new(),
            other_qemus: 0,
        }
    }

    pub(crate) fn results() -> Results {
        let (ms, cells) = crate::stats::tests::sample();
        let summary = summarize(&ms, &[], &cells, 3);
        use Mode::*;
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
            stressng: None,
            notes: vec![],
            matrix: cells.iter().map(|c| c.id()).collect(),
            order: vec!["r1-2x".into(), "r2-2x".into()],
            units: vec![
                unit("r1-2x", &[Native, NativeTwo, Upstream, KickCpu, HostKvm]),
                unit("r2-2x", &[NativeTwo, Upstream, KickCpu, HostKvm, Native]),
            ],
            measurements: ms,
            unused: vec![],
            summary,
        }
    }

    #[test]
    fn contended_table() {
        let r = results();
        let t = workload_table(&r.summary, Workload::Contended, 3).unwrap();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert_eq!(
            lines[0],
            "| overcommit | native | native-2vcpu | upstream-pv | pvlock-kickcpu | pvlock-hostkvm | pvlock-static | pvlock-nohint | kickcpu / native | kickcpu / upstream | kickcpu / native-2vcpu | hostkvm / native | hostkvm / upstream | hostkvm / native-2vcpu | hostkvm / static | hostkvm / nohint | Max/Min native | Max/Min native-2vcpu | Max/Min upstream | Max/Min kickcpu | Max/Min hostkvm | Max/Min static | Max/Min nohint |"
        );
        assert_eq!(lines[1].matches("---|").count(), 23);
        let row: Vec<&str> = lines[3].split(" | ").collect();
        assert_eq!(row[0], "| 2x (4 vCPUs / 2)");
        assert_eq!(row[1], "15.0k [10.0k, 20.0k] (n=2/3; 1 timeout)");
        assert_eq!(row[2], "1.00M [500k, 1.50M]");
        assert_eq!(row[6], "960k [480k, 1.44M]");
        assert_eq!(row[7], "880k [440k, 1.32M]");
        assert_eq!(row[9], "1.10 [1.05, 1.15] **MISS < 1.2**");
        assert_eq!(row[10], "0.880 [0.840, 0.920] **MISS < 0.95**");
        assert_eq!(row[12], "1.30 [1.25, 1.35]");
        // The adaptive lock over the static one, goal >= 1.
        assert_eq!(row[14], "1.08 [1.04, 1.12]");
        // The hint on over off, goal >= 1: the gain at 2x.
        assert_eq!(row[15], "1.18 [1.14, 1.23]");
        assert_eq!(row[16], "500 [500, 500] (n=2/3; 1 timeout)");
        assert_eq!(row[22], "1.40 [1.40, 1.40] |");
        // native-2vcpu only runs at 2x, pvlock-static and pvlock-nohint
        // only under overcommit.
        let row: Vec<&str> = lines[2].split(" | ").collect();
        assert_eq!(row[0], "| 1x (2 vCPUs / 2)");
        assert_eq!(row[2], "-");
        assert_eq!(row[6], "-");
        assert_eq!(row[7], "-");
        assert_eq!(row[10], "-");
        assert_eq!(row[14], "-");
        assert_eq!(row[15], "-");
        assert_eq!(row[8], "1.00 [0.950, 1.05] (undecided at 0.97)");
        assert!(workload_table(&r.summary, Workload::Hackbench, 3).is_none());
        assert!(workload_table(&r.summary, Workload::StressNg, 3).is_none());
    }

    #[test]
    fn goals_and_misses_are_flagged() {
        let r = results();
        let t = workload_table(&r.summary, Workload::Uncontended, 3).unwrap();
        assert!(
            t.contains("| 0.950 [0.950, 0.950] **MISS < 0.97** |"),
            "{t}"
        );
        assert!(!t.contains("kickcpu"), "{t}");
        let g = goals_table(&r.summary);
        assert!(g.starts_with(
            "| goal | target | median | interval for the median (coverage, n) | result |\n"
        ));
        assert!(g.contains("| 1x uncontended: pvlock-hostkvm / native | >= 0.97 | 0.950 | [0.950, 0.950] 75.0%, n=3 | **MISS** (-2.1% of target); the adaptive lock ran native 100% of the time, 0/0 switches (3 repetitions) |"), "{g}");
        assert!(
            g.contains("| 2x contended: pvlock-hostkvm / native | >= 10 | 51.0 | [50.0, 52.0] 50.0%, n=2 | PASS (+410% of target) |"),
            "{g}"
        );
        assert!(
            g.contains("| 1x contended: pvlock-kickcpu / native | >= 0.97 | 1.00 | [0.950, 1.05] 75.0%, n=3 | undecided (+3.1% of target); the adaptive lock ran native 100% [90%, 100%] of the time, 1/0 switches (3 repetitions) |"),
            "{g}"
        );
        assert!(
            g.contains("| 2x contended, adaptive / static: pvlock-hostkvm / pvlock-static | >= 1 | 1.08 | [1.04, 1.12] 75.0%, n=3 | PASS (+8.3% of target); switches to native in the pvlock-hostkvm guests: 0 over 3 repetitions (expected 0) |"),
            "{g}"
        );
        assert!(g.contains("| 2x contended fairness: Max/Min of pvlock-kickcpu / Max/Min of upstream-pv | <= 1 | 0.933 | [0.800, 1.07] 75.0%, n=3 | undecided (-6.7% of target); median Max/Min over all repetitions 1.40 vs 1.50 |"), "{g}");
        // Goals outside the matrix: one line, not a row each.
        let outside = g
            .lines()
            .find(|l| l.starts_with("Not in this run's matrix (quick mode or --only), n/a: "))
            .unwrap();
        for name in [
            "1x uncontended: pvlock-kickcpu / native",
            "3x contended: pvlock-kickcpu / native",
        ] {
            assert!(!g.contains(&format!("| {name} |")), "{g}");
            assert!(outside.contains(&format!("{name}; ")), "{outside}");
        }
        assert!(g.contains("hackbench at every level: pvlock-hostkvm / upstream-pv"));
        let u = undecided_list(&r.summary).unwrap();
        assert!(u.starts_with("- 1x contended: pvlock-kickcpu / native: median 1.00, +3.1% from the target >= 0.97, but its 75.0% interval [0.950, 1.05] (n=3) runs from -2.1% to +8.2% of it: the interval is wider than the margin it would decide"), "{u}");
        assert_eq!(u.lines().count(), 2, "{u}");
    }

    #[test]
    fn loss_table_per_mode() {
        let r = results();
        let t = loss_table(&r.summary).unwrap();
        assert!(
            t.contains("| native | 9 | 8 | 1 | 9 | 8 | 1 | 0 | 0 | 0 | 11% |"),
            "{t}"
        );
        assert!(
            t.contains("| native-2vcpu | 3 | 3 | 0 | 3 | 3 | 0 | 0 | 0 | 0 | 0% |"),
            "{t}"
        );
        assert!(
            t.contains("| pvlock-static | 3 | 3 | 0 | 3 | 3 | 0 | 0 | 0 | 0 | 0% |"),
            "{t}"
        );
        assert!(
            t.contains("| pvlock-nohint | 3 | 3 | 0 | 3 | 3 | 0 | 0 | 0 | 0 | 0% |"),
            "{t}"
        );
        assert_eq!(t.lines().count(), 2 + 7);
    }

    #[test]
    fn what_the_adaptive_lock_ran() {
        let r = results();
        let t = adaptive_table(&r.summary, 3).unwrap();
        assert_eq!(
            t,
            "| overcommit | mode | contended | uncontended |\n\
             |---|---|---|---|\n\
             | 1x | pvlock-kickcpu | native 100% [90%, 100%], 1/0 switches | - |\n\
             | 1x | pvlock-hostkvm | native 100%, 0/0 switches | native 100%, 0/0 switches |\n\
             | 2x | pvlock-kickcpu | native 0%, 0/0 switches (n=2/3) | - |\n\
             | 2x | pvlock-hostkvm | native 0%, 0/0 switches | - |\n\
             | 2x | pvlock-static | native 0%, 0/0 switches | - |\n\
             | 2x | pvlock-nohint | native 0%, 0/0 switches | - |\n"
        );
        let md = markdown(&r);
        assert!(md.contains("## What the adaptive lock ran\n\nPer cell of a guest_pvlock mode: "));
        // A cell of a guest_pvlock mode that recorded nothing says n/a.
        let mut r = r;
        for m in r
            .measurements
            .iter_mut()
            .filter(|m| m.key.mode == Mode::Static)
        {
            m.instances.clear();
        }
        r.summary = summarize(&r.measurements, &[], &r.cells(), 3);
        let t = adaptive_table(&r.summary, 3).unwrap();
        assert!(t.contains("| 2x | pvlock-static | n/a | - |"), "{t}");
    }

    #[test]
    fn lock_holders_preempted_and_the_hint() {
        let r = results();
        let t = host_table(&r.summary, 3).unwrap();
        assert_eq!(
            t,
            "| overcommit | mode | workloads of its guests | lock holders preempted | deferred (grants) | share deferred | not deferred | not deferred because the grant ran out / ended otherwise / was running / after a kick | preempted in a critical section, any cause (scheduler) |\n\
             |---|---|---|---|---|---|---|---|---|\n\
             | 1x | pvlock-kickcpu | contended | 20 | 20 | 100% | 0 | 0 / 0 / 0 / 0 | 7 |\n\
             | 1x | pvlock-hostkvm | uncontended, contended | 20 | 20 | 100% | 0 | 0 / 0 / 0 / 0 | 7 |\n\
             | 2x | pvlock-kickcpu | contended | 1000 | 850 | 85% | 150 | 75 / 0 / 0 / 0 | 157 |\n\
             | 2x | pvlock-hostkvm | contended | 1000 | 840 [820, 860] | 84% [82%, 86%] | 160 [140, 180] | 80 / 0 / 0 / 0 | 167 [147, 187] |\n\
             | 2x | pvlock-static | contended | 1000 | 850 | 85% | 150 | 75 / 0 / 0 / 0 | 157 |\n\
             | 2x | pvlock-nohint | contended | 1100 [1000, 1200] | 0 | 0% | 1100 [1000, 1200] | 550 / 0 / 0 / 0 | 1107 [1007, 1207] |\n"
        );
        let t = hint_table(&r.summary, 3).unwrap();
        assert_eq!(
            t,
            "| overcommit | contended: hostkvm / nohint | holders preempted, not deferred: pvlock-hostkvm | holders preempted: pvlock-nohint | hostkvm / nohint, same boot | workloads of the guests (hostkvm; nohint) |\n\
             |---|---|---|---|---|---|\n\
             | 2x | 1.18 [1.14, 1.23] | 160 [140, 180] | 1100 [1000, 1200] | 0.145 [0.117, 0.180] | contended; contended |\n"
        );
        let md = markdown(&r);
        let hint = md.find("## The critical-section hint, on / off\n").unwrap();
        let host = md
            .find("## Lock holders preempted (host_kvm), per guest_pvlock mode\n")
            .unwrap();
        assert!(hint < host, "{md}");
        assert!(md[host..]
            .contains("**whole boot, every workload listed, not the contended workload alone**"));
        assert!(md.contains("| 2x contended, hint on / off: pvlock-hostkvm / pvlock-nohint | >= 1 | 1.18 | [1.14, 1.23] 75.0%, n=3 | PASS (+18% of target); lock holders preempted per L1 boot (whole guest boots), not deferred: pvlock-hostkvm 160 [140, 180] of 1000, pvlock-nohint 1100 [1000, 1200], ratio 0.145 [0.117, 0.180] (n=3) |"), "{md}");
        // A failed nohint measurement: n=2/3 in both tables, the gain
        // flagged as it is decided.
        let mut r = r;
        for m in r
            .measurements
            .iter_mut()
            .filter(|m| m.key.mode == Mode::NoHint && m.rep == 3)
        {
            m.status = Status::Failed;
            m.value = None;
        }
        r.summary = summarize(&r.measurements, &[], &r.cells(), 3);
        let t = host_table(&r.summary, 3).unwrap();
        assert!(
            t.contains("| 2x | pvlock-nohint | contended | 1050 [1000, 1100] (n=2/3) | 0 |"),
            "{t}"
        );
        let t = hint_table(&r.summary, 3).unwrap();
        assert!(
            t.contains("| 2x | 1.16 [1.14, 1.18] (n=2/3) | 160 [140, 180] | 1050 [1000, 1100] | 0.163 [0.145, 0.180] (n=2/3) |"),
            "{t}"
        );
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
    fn an_older_results_json_still_makes_a_report() {
        // results.json as pvlock-bench wrote it before the order rotated:
        // none of the fields added since.
        let mut v = serde_json::to_value(results()).unwrap();
        let o = v.as_object_mut().unwrap();
        o.remove("stressng");
        o.remove("summary");
        o["settings"]
            .as_object_mut()
            .unwrap()
            .remove("stressng_secs");
        // ... and before the adaptive lock: no instance has its record;
        // and before L1's snapshots per mode: no host counters.
        for m in o["measurements"].as_array_mut().unwrap() {
            m.as_object_mut().unwrap().remove("position");
            m.as_object_mut().unwrap().remove("host");
            for i in m["instances"].as_array_mut().unwrap() {
                assert!(i.as_object_mut().unwrap().remove("adaptive").is_some());
            }
        }
        let dir = std::env::temp_dir().join(format!("pvlock-bench-old-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("results.json");
        std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
        let back = Results::load(&p).unwrap();
        assert_eq!(back.settings.stressng_secs, 0);
        let md = markdown(&back);
        assert!(md.contains("## Goals"));
        assert!(
            md.contains("| 2x contended: pvlock-hostkvm / upstream-pv | >= 1.2 | 1.30 |"),
            "{md}"
        );
        // Without the records: no table of them, the goals without the
        // notes, every measurement still there.
        assert!(back.measurements.iter().all(|m| m.adaptive().is_none()));
        assert!(!md.contains("## What the adaptive lock ran"), "{md}");
        assert!(back.measurements.iter().all(|m| m.host.is_none()));
        assert!(!md.contains("## Lock holders preempted"), "{md}");
        // The hint's gain is still there, without host_kvm's counts.
        assert!(
            md.contains("## The critical-section hint, on / off"),
            "{md}"
        );
        assert!(
            md.contains("| 2x | 1.18 [1.14, 1.23] | - | - | - | contended; contended |"),
            "{md}"
        );
        assert!(md.contains("| 2x contended, hint on / off: pvlock-hostkvm / pvlock-nohint | >= 1 | 1.18 | [1.14, 1.23] 75.0%, n=3 | PASS (+18% of target) |"), "{md}");
        assert!(md.contains("| 2x contended, adaptive / static: pvlock-hostkvm / pvlock-static | >= 1 | 1.08 | [1.04, 1.12] 75.0%, n=3 | PASS (+8.3% of target) |"), "{md}");
        assert_eq!(back.measurements.len(), results().measurements.len());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn whole_report() {
        let r = results();
        let md = markdown(&r);
        assert!(md.starts_with("# pvlock benchmark: quick mode\n"));
        assert!(md.contains("## Goals"));
        assert!(md.contains("Undecided:\n\n- "));
        assert!(md.contains(
            "## contended: locktorture spin_lock, 2 writers per L2 vCPU, 5 s (5 s native); native-2vcpu: one guest, 2 vCPUs, 4 writers, 5 s, alone in each overcommitted L1 boot"
        ));
        assert!(md.contains("## uncontended"));
        assert!(!md.contains("## hackbench"));
        assert!(md.contains("## Measurements per mode"));
        assert!(md.contains(
            "## Failed and timed-out measurements\n\n- r3-2x 2x/contended/native: **timeout**"
        ));
        assert!(md.contains("took 6 min 52 s"));
        assert!(!md.contains("Not used"));
        // The run list shows each run's order.
        assert!(md.contains("| r2-2x | native-2vcpu → upstream-pv → pvlock-kickcpu → pvlock-hostkvm → native | 2 min 30 s | 1 | passed |"), "{md}");
        let mut r = r;
        let mut lost = r.measurements[0].clone();
        lost.status = Status::NotRun;
        lost.note = Some("native-1: never booted".into());
        lost.unit = "r1-2x".into();
        r.unused.push(lost);
        let md = markdown(&r);
        assert!(md.contains("Not used (replaced by a make-up run, or repeated by one):\n\n- r1-2x 2x/contended/native: not-run: native-1: never booted\n"), "{md}");
    }
}

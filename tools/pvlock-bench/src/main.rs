// SPDX-License-Identifier: GPL-2.0

//! pvlock-bench: runs the benchmark matrix (overcommit x lock mode x
//! workload) through the vmtest harness, one L1 boot per overcommit level
//! and repetition, and writes `results.json`, `results.md`,
//! `throughput.svg` and `hackbench.svg`. `make bench [QUICK=1]` runs it;
//! `Documentation/pvlock/benchmark.rst` explains the numbers.

use anyhow::{bail, Context, Result};
use clap::Parser;
use pvlock_bench::extract::{self, Measurement, Status};
use pvlock_bench::markdown::{self, fmt_secs};
use pvlock_bench::matrix::{self, Settings, Unit, Workload};
use pvlock_bench::results_json::{Results, UnitRecord};
use pvlock_bench::{chart, stats};
use pvlock_common::cli;
use pvlock_common::fmt::{fmt_mmss, fmt_num};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use vmtest::programs::{extra_files, program_files};
use vmtest::run::{self, Config, INTERRUPTED};

#[derive(Parser)]
#[command(
    version,
    about = "Benchmark native, upstream PV and pvlock spinlocks under vCPU overcommit (L2 KVM guests in a TCG L1)",
    after_help = "Examples:\n  pvlock-bench --kdir $KDIR --repo . --tools-bin tools/target/x86_64-unknown-linux-gnu/release --quick\n  pvlock-bench ... --only '^2x/contended/' --reps 10\n\nCells are named OVERCOMMIT/WORKLOAD/MODE: overcommit 1x, 2x, 3x, two-guests; workload contended,\nuncontended, hackbench, stress-ng; mode native, native-2vcpu (one 2-vCPU guest alone,\ncontended at 2x, 3x and two-guests only), upstream-pv,\npvlock-kickcpu, pvlock-hostkvm (guest_pvlock as it ships: adaptive, the native lock while the\nhost advises that the vCPUs have CPUs to themselves), pvlock-static (guest_pvlock adaptive=0,\ncontended at 2x, 3x and two-guests only), pvlock-nohint (guest_pvlock hint=2: the host counts\nthe lock holders it preempts and defers none; where pvlock-static runs)."
)]
struct Cli {
    /// The built kernel tree (make print-kdir).
    #[arg(long, env = "KDIR", required_unless_present = "report")]
    kdir: Option<PathBuf>,
    /// The repository root (modules, guest library).
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// Where the statically linked tools (pvlock-stat) are.
    #[arg(long)]
    tools_bin: Option<PathBuf>,
    /// The reduced matrix (2x contended, every mode, pvlock-static and
    /// pvlock-nohint included; 1x contended, native, upstream and pvlock;
    /// 1x uncontended, native and pvlock-hostkvm), 3 repetitions, short
    /// runs: estimated at about 18 minutes.
    #[arg(long)]
    quick: bool,
    /// Repetitions (default: 3 quick, 5 full).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=50))]
    reps: Option<u32>,
    /// Output directory (default: build/bench/<UTC time>, and
    /// build/bench/latest points at it).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Only the cells whose name matches this regex (e.g. '^2x/contended/').
    #[arg(long)]
    only: Option<String>,
    /// Make-up runs, in the same repetition, of the guests the platform
    /// lost: an L2 that vanished or stalled without guest_pvlock loaded,
    /// or any, by vmtest's platform verdict (one that stopped with
    /// guest_pvlock loaded otherwise is `failed`, not run again).
    #[arg(long, default_value_t = 2)]
    retries: u32,
    /// Write results.md and the charts again from DIR/results.json (e.g.
    /// after a change of the report), run nothing.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Print the runs and the time estimate, run nothing.
    #[arg(long)]
    dry_run: bool,
    /// hackbench (default: found on PATH; Debian package rt-tests).
    #[arg(long)]
    hackbench: Option<PathBuf>,
    /// stress-ng (default: found on PATH; Debian package stress-ng).
    #[arg(long)]
    stress_ng: Option<PathBuf>,
    /// QEMU binary.
    #[arg(long, default_value = "qemu-system-x86_64")]
    qemu: String,
    /// Cache of initramfs images (default: $PVLOCK_CACHE/vmtest or
    /// ~/.cache/pvlock/vmtest).
    #[arg(long)]
    cache: Option<PathBuf>,
}

fn main() -> ExitCode {
    cli::exit_status("pvlock-bench: error", real_main().map(ExitCode::from))
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// (`20261130-005012`, `2026-11-30 00:50:12 UTC`).
fn stamps(t: SystemTime) -> (String, String) {
    let s = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (y, mo, d) = civil(s.div_euclid(86_400));
    let r = s.rem_euclid(86_400);
    let (h, mi, se) = (r / 3600, r / 60 % 60, r % 60);
    (
        format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{se:02}"),
        format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{se:02} UTC"),
    )
}

/// How many QEMU processes run on this machine (read-only look at /proc).
fn qemus() -> usize {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    std::fs::read_to_string(e.path().join("comm"))
                        .is_ok_and(|c| c.trim().starts_with("qemu-system"))
                })
                .count()
        })
        .unwrap_or(0)
}

fn describe(m: &Measurement) -> String {
    match (m.status, m.value) {
        (Status::Ok, Some(v)) => {
            let unit = match m.key.workload {
                Workload::Hackbench => "s",
                Workload::StressNg => "bogo ops/s",
                Workload::Contended | Workload::Uncontended => "writes/s",
            };
            let fair = m
                .fairness
                .map(|f| format!(", Max/Min {}", fmt_num(f)))
                .unwrap_or_default();
            // What guest_pvlock's lock ran during it.
            let adaptive = m
                .adaptive()
                .map(|a| {
                    let share = a
                        .native_share
                        .map(|x| format!("native {:.0}%, ", x * 100.0))
                        .unwrap_or_default();
                    format!(" ({share}{}/{} switches)", a.to_native, a.to_pvlock)
                })
                .unwrap_or_default();
            format!("{} {unit}{fair}{adaptive}", fmt_num(v))
        }
        (st, _) => format!(
            "{}: {}",
            st.label().to_uppercase(),
            m.note.as_deref().unwrap_or("")
        ),
    }
}

/// A result JSON like vmtest's, from a console log (of a run that was
/// stopped, so vmtest wrote none).
fn parse_console(log: &Path) -> serde_json::Value {
    let mut p = vmtest::console::Parsed::default();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        if line.starts_with("# ") {
            continue;
        }
        match line.strip_prefix("[qemu stderr] ") {
            Some(l) => p.line(&format!("[qemu] {l}")),
            None => p.line(line),
        }
    }
    serde_json::json!({ "timed_out": true, "nodes": serde_json::to_value(&p.nodes).unwrap_or_default() })
}

/// `results.md`, `throughput.svg` and `hackbench.svg` into `out`; returns
/// the Markdown.
fn write_reports(res: &Results, out: &Path) -> Result<String> {
    let md = markdown::markdown(res);
    std::fs::write(out.join("results.md"), &md)?;
    let reps = res.settings.reps;
    let title = format!("locktorture spin_lock, 2 writers per vCPU: writes/s (median, min-max over {reps} repetitions)");
    chart::chart(
        &res.summary,
        Workload::Contended,
        &title,
        &out.join("throughput.svg"),
    )?;
    let cells = res.cells();
    if cells.iter().any(|c| c.workload == Workload::Hackbench) {
        let title = format!(
            "hackbench: seconds, lower is better (median, min-max over {reps} repetitions)"
        );
        chart::chart(
            &res.summary,
            Workload::Hackbench,
            &title,
            &out.join("hackbench.svg"),
        )?;
    }
    if cells.iter().any(|c| c.workload == Workload::StressNg) {
        let title = format!(
            "stress-ng: bogo ops/s, geometric mean over the stressors (median, min-max over {reps} repetitions)"
        );
        chart::chart(
            &res.summary,
            Workload::StressNg,
            &title,
            &out.join("stressng.svg"),
        )?;
    }
    Ok(md)
}

fn write_json(path: &Path, r: &Results) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(r)?)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

fn real_main() -> Result<u8> {
    let cli = Cli::parse();
    let t0 = Instant::now();
    let (stamp, started) = stamps(SystemTime::now());
    let repo = cli.repo.canonicalize().context("--repo")?;
    if let Some(dir) = &cli.report {
        let r = Results::load(&dir.join("results.json"))?;
        write_reports(&r, dir)?;
        eprintln!(
            "pvlock-bench: wrote {}/results.md and the charts",
            dir.display()
        );
        return Ok(0);
    }
    let kdir = cli
        .kdir
        .clone()
        .context("--kdir")?
        .canonicalize()
        .context("--kdir")?;
    let kernel = run::kernel_release(&kdir)?;
    let tools_bin = cli
        .tools_bin
        .clone()
        .unwrap_or_else(|| Config::default_tools_bin(&repo));
    let settings = Settings::new(cli.quick, cli.reps, cli.retries);
    let only = cli
        .only
        .as_deref()
        .map(regex::Regex::new)
        .transpose()
        .context("--only")?;
    let mut cells = matrix::filter(matrix::cells(cli.quick), only.as_ref());
    let mut notes = Vec::new();
    if !tools_bin.join("pvlock-stat").exists() {
        notes.push(format!(
            "{} has no pvlock-stat: no statistics snapshots (make static-tools)",
            tools_bin.display()
        ));
    }
    let mut hackbench = None;
    if cells.iter().any(|c| c.workload == Workload::Hackbench) {
        hackbench = program_files("hackbench", cli.hackbench.as_deref())?;
        if hackbench.is_none() {
            notes.push("hackbench is not installed (Debian package rt-tests; make deps): the hackbench workload was skipped".into());
            cells.retain(|c| c.workload != Workload::Hackbench);
        }
    }
    let mut stressng = None;
    if cells.iter().any(|c| c.workload == Workload::StressNg) {
        if !matrix::vmtest_knows_step("stressng") {
            notes.push("vmtest does not know the guest step stressng (its STEP_FUNCTIONS in tools/vmtest/src/scenario.rs): the stress-ng workload was skipped".into());
            cells.retain(|c| c.workload != Workload::StressNg);
        } else {
            stressng = program_files("stress-ng", cli.stress_ng.as_deref())?;
            if stressng.is_none() {
                notes.push("stress-ng is not installed (Debian package stress-ng; make deps): the stress-ng workload was skipped".into());
                cells.retain(|c| c.workload != Workload::StressNg);
            }
        }
    }
    if cells.is_empty() {
        bail!(
            "no cell of the {} matrix matches --only",
            if cli.quick { "quick" } else { "full" }
        );
    }
    let units = matrix::plan(&cells, settings.reps);

    if cli.dry_run {
        for n in &notes {
            println!("note: {n}");
        }
        let mut total = 0.0;
        for u in &units {
            total += u.expected_secs(&settings);
            let order: Vec<String> = u
                .modes
                .iter()
                .map(|(m, ws)| {
                    format!(
                        "{} ({})",
                        m.label(),
                        ws.iter().map(|w| w.label()).collect::<Vec<_>>().join(", ")
                    )
                })
                .collect();
            println!(
                "{:<10} ~{:>4.0} s  {}{}",
                u.name(),
                u.expected_secs(&settings),
                if u.loads_host_kvm() {
                    "host_kvm, then "
                } else {
                    ""
                },
                order.join(" -> ")
            );
        }
        println!(
            "{} runs of L1, {} cells x {} repetitions; estimated {} when nothing is lost (make-up runs come on top)",
            units.len(),
            cells.len(),
            settings.reps,
            fmt_secs(total)
        );
        return Ok(0);
    }
    let default_out = cli.out.is_none();
    let out = match &cli.out {
        Some(o) => o.clone(),
        None => {
            let base = repo.join("build/bench");
            let mut o = base.join(&stamp);
            let mut i = 1;
            while o.exists() {
                i += 1;
                o = base.join(format!("{stamp}-{i}"));
            }
            o
        }
    };
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let out = out.canonicalize()?;
    if default_out {
        let latest = repo.join("build/bench/latest");
        let _ = std::fs::remove_file(&latest);
        if let Some(name) = out.file_name() {
            std::os::unix::fs::symlink(name, &latest).context("cannot link build/bench/latest")?;
        }
    }
    let runs_dir = out.join("runs");
    let scen_dir = out.join("scenarios");
    std::fs::create_dir_all(&runs_dir)?;
    let cache = cli.cache.clone().unwrap_or_else(Config::default_cache);
    let cfg = Config {
        kdir: kdir.clone(),
        repo: repo.clone(),
        tools_bin,
        cache,
        out: runs_dir.clone(),
        qemu: cli.qemu.clone(),
        retries: None,
        retry_deadline: None,
        attempts_per_round: None,
        console: false,
        console_silence: None,
        extra: extra_files(&[hackbench.as_ref(), stressng.as_ref()]),
        modules: None,
    };
    ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::Relaxed))
        .context("cannot install the Ctrl-C handler")?;

    let mut res = Results {
        tool: "pvlock-bench".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        started: started.clone(),
        finished: None,
        wall_secs: 0.0,
        complete: false,
        kernel,
        git: Command::new("git")
            .args(["describe", "--always", "--dirty"])
            .current_dir(&repo)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "unknown".into()),
        kdir,
        settings: settings.clone(),
        only: cli.only.clone(),
        hackbench,
        stressng,
        notes,
        matrix: cells.iter().map(|c| c.id()).collect(),
        order: Vec::new(),
        units: Vec::new(),
        measurements: Vec::new(),
        unused: Vec::new(),
        summary: stats::summarize(&[], &[], &cells, settings.reps),
    };
    let json_path = out.join("results.json");
    let total_expected: f64 = units.iter().map(|u| u.expected_secs(&settings)).sum();
    eprintln!(
        "pvlock-bench: {} mode, {} cells x {} repetitions in {} runs of L1; estimated {}; results in {}",
        if cli.quick { "quick" } else { "full" },
        cells.len(),
        settings.reps,
        units.len(),
        fmt_secs(total_expected),
        out.display()
    );
    for n in &res.notes {
        eprintln!("pvlock-bench: note: {n}");
    }
    let mut done_actual = 0.0f64;
    let mut done_expected = 0.0;
    let mut interrupted = false;
    let mut queue: std::collections::VecDeque<Unit> = units.into();
    let mut i = 0;
    while let Some(unit) = queue.pop_front() {
        i += 1;
        let unit = &unit;
        // How this machine compares with the model, from the runs that went
        // well (a stalled run says nothing about the next), within reason.
        let factor = if done_expected > 0.0 {
            (done_actual / done_expected).clamp(0.33, 3.0)
        } else {
            1.0
        };
        let this_expected = unit.expected_secs(&settings);
        let left: f64 = (this_expected
            + queue
                .iter()
                .map(|u| u.expected_secs(&settings))
                .sum::<f64>())
            * factor;
        let modes: Vec<String> = unit
            .modes
            .iter()
            .map(|(m, ws)| {
                format!(
                    "{} ({})",
                    m.label(),
                    ws.iter().map(|w| w.label()).collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        eprintln!(
            "\n=== [{}/{}] {}: {} overcommit: {} | elapsed {}, about {} left",
            i,
            i + queue.len(),
            unit.name(),
            unit.overcommit.label(),
            modes.join("; "),
            fmt_mmss(t0.elapsed().as_secs_f64()),
            fmt_mmss(left)
        );
        let loadavg = std::fs::read_to_string("/proc/loadavg")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let other_qemus = qemus();
        if other_qemus > 0 {
            eprintln!(
                "pvlock-bench: note: {other_qemus} other QEMU process(es) running: expect noise"
            );
        }
        res.order.push(unit.name());
        let started_unit = Instant::now();
        let scenario = unit.scenario(&settings, &scen_dir)?;
        // Besides vmtest's watchdog on each kernel's heartbeat, a bound on
        // the console's silence: an L1 whose timer stalled under nested TCG
        // would otherwise hold the machine until the scenario's whole-run
        // bound.
        let silence = unit.silence_bound(&settings);
        let unit_cfg = Config {
            console_silence: Some(silence),
            ..cfg.clone()
        };
        let outcome = run::run(&unit_cfg, &scenario, Vec::new());
        let wall = started_unit.elapsed().as_secs_f64();

        let mut stalled = false;
        let mut rec = UnitRecord {
            name: unit.name(),
            rep: unit.rep,
            overcommit: unit.overcommit.label().into(),
            modes: unit
                .modes
                .iter()
                .map(|(m, _)| m.label().to_string())
                .collect(),
            scenario: scen_dir.join(format!("{}.toml", unit.name())),
            result_file: runs_dir.join(format!("{}.json", unit.name())),
            wall_secs: wall,
            attempts: serde_json::Value::Array(Vec::new()),
            passed: false,
            reasons: Vec::new(),
            error: None,
            host: Default::default(),
            loadavg,
            other_qemus,
        };
        let ms = match outcome {
            Ok(report) if report.console_silent.is_none() => {
                rec.attempts = serde_json::to_value(&report.attempts)?;
                rec.passed = report.passed;
                rec.reasons = report.reasons.clone();
                rec.host = extract::host_side(&report.result);
                let platform = report
                    .attempts
                    .last()
                    .and_then(|a| a.platform_failure.as_deref());
                extract::measurements_judged(unit, &settings, &report.result, None, platform)
            }
            Ok(_) => {
                // Heartbeats are not output: L1 may have been running, its
                // plan waiting for a guest that said nothing.
                let msg = format!("no console output for {silence} s; stopped");
                eprintln!("pvlock-bench: {}: {msg}", unit.name());
                rec.error = Some(msg);
                stalled = true;
                // What the guests reported before the stall still counts.
                let log = runs_dir.join(unit.name()).join("console-1.log");
                rec.attempts =
                    serde_json::json!([{ "attempt": 1, "stalled": true, "console_log": log }]);
                let result = parse_console(&log);
                rec.host = extract::host_side(&result);
                extract::measurements(unit, &settings, &result, None)
            }
            Err(e) if INTERRUPTED.load(Ordering::Relaxed) => {
                eprintln!("pvlock-bench: interrupted during {}: {e:#}", unit.name());
                interrupted = true;
                break;
            }
            Err(e) => {
                let msg = format!("{e:#}");
                eprintln!("pvlock-bench: run {} could not run: {msg}", unit.name());
                rec.error = Some(msg.clone());
                extract::measurements(unit, &settings, &serde_json::Value::Null, Some(&msg))
            }
        };
        // The initramfs copies are large and can be made again.
        if let Ok(rd) = std::fs::read_dir(runs_dir.join(unit.name())) {
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with("initrd-") {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        eprintln!(
            "--- {} in {:.0} s ({} attempt(s), vmtest {}):",
            unit.name(),
            wall,
            rec.attempts.as_array().map(|a| a.len()).unwrap_or(0),
            if rec.passed { "passed" } else { "failed" }
        );
        for m in &ms {
            eprintln!("    {:<34} {}", m.cell, describe(m));
        }
        // What host_kvm counted over each guest_pvlock mode's guests (their
        // whole boot).
        let mut shown = Vec::new();
        for m in ms.iter().filter(|m| m.key.mode.loads_guest_pvlock()) {
            if let (Some(h), false) = (m.host, shown.contains(&m.key.mode)) {
                shown.push(m.key.mode);
                eprintln!(
                    "    host_kvm over the {} guests (whole boot): {} lock holders preempted, {} deferred",
                    m.key.mode.label(),
                    h.holder_preemptions,
                    h.grants
                );
            }
        }
        if !stalled && !ms.iter().any(|m| m.status == Status::NotRun) {
            done_actual += wall;
            done_expected += this_expected;
        }
        // The guests the platform lost run again, right away, in the same
        // repetition.
        let lost: Vec<_> = unit
            .modes
            .iter()
            .map(|(m, _)| *m)
            .filter(|m| {
                ms.iter()
                    .any(|x| x.key.mode == *m && x.status == Status::NotRun)
            })
            .collect();
        // A guest that stopped with guest_pvlock loaded and no platform
        // verdict is `failed`, never run again: said out loud.
        for m in ms.iter().filter(|m| {
            m.status == Status::Failed
                && m.note
                    .as_deref()
                    .is_some_and(|n| n.contains(extract::LOST_WITH_LOCK))
        }) {
            eprintln!(
                "pvlock-bench: {} FAILED, the project's until shown otherwise, not run again: {}",
                m.cell,
                m.note.as_deref().unwrap_or("")
            );
        }
        if !lost.is_empty() && (rec.error.is_none() || stalled) && unit.retry < settings.retries {
            let again = unit.retry_of(&lost);
            // Why each is taken for the platform's: in the note of its
            // first lost measurement (no guest_pvlock in the lost guest, or
            // vmtest's platform verdict).
            let why: Vec<String> = lost
                .iter()
                .map(|mode| {
                    let note = ms
                        .iter()
                        .find(|x| x.key.mode == *mode && x.status == Status::NotRun)
                        .and_then(|x| x.note.clone())
                        .unwrap_or_default();
                    format!("{} ({note})", mode.label())
                })
                .collect();
            eprintln!(
                "pvlock-bench: lost to the platform, without the project's lock running in the lost guest or by vmtest's verdict: {}; running them again as {}",
                why.join("; "),
                again.name()
            );
            queue.push_front(again);
        }
        res.units.push(rec);
        for m in ms {
            match res
                .measurements
                .iter()
                .position(|x| x.key == m.key && x.rep == m.rep)
            {
                None => res.measurements.push(m),
                Some(k) if res.measurements[k].status == Status::NotRun => {
                    let old = std::mem::replace(&mut res.measurements[k], m);
                    res.unused.push(old);
                }
                Some(_) => res.unused.push(m),
            }
        }
        res.wall_secs = t0.elapsed().as_secs_f64();
        res.summary = stats::summarize(&res.measurements, &res.unused, &cells, settings.reps);
        write_json(&json_path, &res)?;
    }

    res.complete = !interrupted;
    res.finished = Some(stamps(SystemTime::now()).1);
    res.wall_secs = t0.elapsed().as_secs_f64();
    res.summary = stats::summarize(&res.measurements, &res.unused, &cells, settings.reps);
    write_json(&json_path, &res)?;
    let md = write_reports(&res, &out)?;
    println!("{md}");
    eprintln!(
        "pvlock-bench: {} in {} ({}); results in {}",
        if interrupted { "interrupted" } else { "done" },
        fmt_secs(res.wall_secs),
        started,
        out.display()
    );
    Ok(if interrupted { 130 } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_of_a_stopped_run() {
        let dir = std::env::temp_dir().join(format!("pvlock-bench-console-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("console-1.log");
        std::fs::write(
            &log,
            "# \"qemu-system-x86_64\" ...\n@@PV L1.l1 boot uptime=1.3 nproc=2 kernel=7.3.4\n\
             [native-1] @@PV L2.native-1 boot uptime=3.0 nproc=2 kernel=7.3.4\n\
             [native-1] @@PV L2.native-1 step-begin uncontended locktorture spin_lock 1 5\n\
             [native-1] @@PV L2.native-1 lt [ 10.0] Writes:  Total: 3594867  Max/Min: 3594867/3594867   Fail: 0\n\
             [native-1] @@PV L2.native-1 lt [ 10.0] spin_lock-torture:--- End of test: SUCCESS: x\n\
             [native-1] @@PV L2.native-1 locktorture type=spin_lock writers=1 secs=5.52\n\
             [native-1] @@PV L2.native-1 step-end uncontended rc=0 secs=5.80\n\
             [qemu stderr] something\n",
        )
        .unwrap();
        let v = parse_console(&log);
        assert_eq!(v["timed_out"], true);
        assert_eq!(v["nodes"]["native-1"]["locktorture"][0]["total"], 3594867);
        assert_eq!(v["nodes"]["l1"]["booted"], true);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn utc_stamps() {
        let t = UNIX_EPOCH + std::time::Duration::from_secs(1_795_999_812);
        assert_eq!(stamps(t).0, "20261130-005012");
        assert_eq!(stamps(UNIX_EPOCH).1, "1970-01-01 00:00:00 UTC");
        assert_eq!(civil(11_016), (2000, 2, 29));
    }
}

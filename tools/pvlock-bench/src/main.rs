// SPDX-License-Identifier: GPL-2.0

//! pvlock-bench: native, upstream PV and pvlock spinlocks side by side
//! under vCPU overcommit, on the vmtest harness. See
//! `Documentation/pvlock/benchmark.rst`.

mod measure;
mod plan;
mod report;
mod stats;

use anyhow::{bail, Context, Result};
use clap::Parser;
use plan::{Arm, Level, Shape, Timing, Workload};
use report::{Results, UnitRecord};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use vmtest::run::{self, Config, INTERRUPTED};

#[derive(Parser, Debug)]
#[command(
    version,
    about = "pvlock's benchmark: every lock side by side under vCPU overcommit, decided against same-code controls"
)]
struct Cli {
    /// The built kernel tree (make print-kdir).
    #[arg(long)]
    kdir: PathBuf,
    /// The repository (modules, guest library).
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// The static tools (default: tools/'s static release build).
    #[arg(long)]
    tools_bin: Option<PathBuf>,
    /// Levels, comma-separated: 1x, 2x, 3x, two.
    #[arg(long, value_delimiter = ',', default_value = "1x,2x,3x,two")]
    levels: Vec<String>,
    /// Workloads, comma-separated: lt (locktorture), mm (pvlock-mmbench).
    #[arg(long, value_delimiter = ',', default_value = "lt,mm")]
    workloads: Vec<String>,
    /// Repetitions (verdicts need 8; default 10, quick 5).
    #[arg(long)]
    reps: Option<u32>,
    /// Every arm of a level in one L1 boot, or each in a boot of its own.
    #[arg(long, value_enum, default_value = "shared")]
    shape: Shape,
    /// Seconds of each measured run (default 10, quick 5).
    #[arg(long)]
    secs: Option<u64>,
    /// Seconds of each warm-up run, discarded.
    #[arg(long, default_value_t = 3)]
    warmup: u64,
    /// Seconds every guest waits, CPUs online, before its first run.
    #[arg(long, default_value_t = 5)]
    settle: u64,
    /// A mechanism to measure at the overcommitted levels: pvlock with
    /// these parameters against pvlock as it loads (`early_halt=1`,
    /// `host_kvm.yield_to_target=0`; repeat for more).
    #[arg(long = "mech")]
    mechanisms: Vec<String>,
    /// The seed of the order (default: the clock), recorded.
    #[arg(long)]
    seed: Option<u64>,
    /// 1x and 2x, 5 repetitions of 5 s: the smoke run (no verdicts).
    #[arg(long)]
    quick: bool,
    /// Print the L1 boots and their order; run nothing.
    #[arg(long)]
    dry_run: bool,
    /// Write results.md again from DIR/results.json; run nothing.
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
    /// Where results go (default build/bench/<UTC time>).
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long, default_value = "qemu-system-x86_64")]
    qemu: String,
}

fn utc_stamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = (secs / 86400) as i64;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let t = secs % 86400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}{:02}{:02}Z",
        t / 3600,
        t / 60 % 60,
        t % 60
    )
}

fn write(out: &std::path::Path, r: &Results) -> Result<()> {
    std::fs::write(out.join("results.json"), serde_json::to_string_pretty(r)?)?;
    std::fs::write(out.join("results.md"), report::markdown(r))?;
    Ok(())
}

fn real_main() -> Result<u8> {
    let cli = Cli::parse();
    if let Some(dir) = &cli.report {
        let path = dir.join("results.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let mut r: Results = serde_json::from_str(&text).with_context(|| {
            format!(
                "{}: not a results.json of this pvlock-bench",
                path.display()
            )
        })?;
        let mut ws: Vec<Workload> = r.workloads.iter().map(|(_, w, _)| *w).collect();
        ws.sort();
        ws.dedup();
        let goals: Vec<_> = r
            .arms
            .iter()
            .flat_map(|(l, a)| report::goals(*l, a, &ws))
            .collect();
        r.goals = stats::decide(&r.measurements, &goals);
        write(dir, &r)?;
        print!("{}", report::markdown(&r));
        return Ok(0);
    }
    let levels: Vec<Level> = if cli.quick && cli.levels.len() == 4 {
        vec![Level::X1, Level::X2]
    } else {
        cli.levels
            .iter()
            .map(|l| {
                Level::parse(l).with_context(|| format!("unknown level '{l}' (1x, 2x, 3x, two)"))
            })
            .collect::<Result<_>>()?
    };
    let workloads: Vec<Workload> = cli
        .workloads
        .iter()
        .map(|w| Workload::parse(w).with_context(|| format!("unknown workload '{w}' (lt, mm)")))
        .collect::<Result<_>>()?;
    let mechs: Vec<Arm> = cli
        .mechanisms
        .iter()
        .map(|m| Arm::mechanism(m).map_err(|e| anyhow::anyhow!("--mech '{m}': {e}")))
        .collect::<Result<_>>()?;
    let reps = cli.reps.unwrap_or(if cli.quick { 5 } else { 10 });
    if reps == 0 || reps > 100 {
        bail!("--reps must be 1 to 100");
    }
    let timing = Timing {
        settle: cli.settle,
        warmup: cli.warmup,
        measure: cli.secs.unwrap_or(if cli.quick { 5 } else { 10 }),
    };
    let seed = cli.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_secs())
    });
    let level_arms: Vec<(Level, Vec<Arm>)> = levels
        .iter()
        .map(|&l| (l, plan::arms(l, &mechs, cli.shape)))
        .collect();
    let sizes: Vec<(Level, usize)> = level_arms.iter().map(|(l, a)| (*l, a.len())).collect();
    let units = plan::units(&sizes, reps, cli.shape, seed);
    let arms_of = |l: Level| {
        &level_arms
            .iter()
            .find(|(x, _)| *x == l)
            .expect("every unit's level has arms")
            .1
    };

    if cli.dry_run {
        for u in &units {
            for r in &u.rounds {
                let names: Vec<&str> = r
                    .order
                    .iter()
                    .map(|&i| arms_of(u.level)[i].name.as_str())
                    .collect();
                println!("{:<28} {}", u.name(arms_of(u.level)), names.join(" -> "));
            }
        }
        println!("{} L1 boots; seed {seed}", units.len());
        return Ok(0);
    }

    let repo = cli.repo.canonicalize().context("--repo")?;
    let kdir = cli.kdir.canonicalize().context("--kdir")?;
    let kernel = run::kernel_release(&kdir)?;
    let started = utc_stamp();
    let out = cli
        .out
        .clone()
        .unwrap_or_else(|| repo.join("build/bench").join(&started));
    let runs = out.join("runs");
    std::fs::create_dir_all(&runs).with_context(|| format!("cannot create {}", runs.display()))?;
    let latest = repo.join("build/bench/latest");
    let _ = std::fs::remove_file(&latest);
    let _ = std::os::unix::fs::symlink(&out, &latest);
    let cfg = Config {
        kdir,
        repo: repo.clone(),
        tools_bin: cli
            .tools_bin
            .clone()
            .unwrap_or_else(|| Config::default_tools_bin(&repo)),
        cache: Config::default_cache(),
        out: runs,
        qemu: cli.qemu.clone(),
        retries: None,
        retry_deadline: None,
        attempts_per_round: None,
        console: false,
        console_silence: None,
        extra: Vec::new(),
        // The modules users install: no test hooks.
        modules: None,
    };
    ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::Relaxed))
        .context("cannot install the Ctrl-C handler")?;
    let goals: Vec<_> = level_arms
        .iter()
        .flat_map(|(l, a)| report::goals(*l, a, &workloads))
        .collect();
    let mut res = Results {
        started,
        kernel,
        shape: cli.shape,
        reps,
        seed,
        timing,
        workloads: levels
            .iter()
            .flat_map(|&l| {
                workloads
                    .iter()
                    .map(move |&w| (l, w, w.params(l.vcpus(), timing.measure)))
            })
            .collect(),
        arms: level_arms.clone(),
        units: Vec::new(),
        measurements: Vec::new(),
        host: Vec::new(),
        goals: Vec::new(),
        complete: false,
    };
    let t0 = Instant::now();
    for (k, u) in units.iter().enumerate() {
        if INTERRUPTED.load(Ordering::Relaxed) {
            break;
        }
        let arms = arms_of(u.level);
        let s = plan::scenario(u, arms, &workloads, &timing)?;
        let names: Vec<&str> = u.arms().iter().map(|&i| arms[i].name.as_str()).collect();
        eprintln!(
            "pvlock-bench: [{}/{}] {} ({:.0} min in): {}",
            k + 1,
            units.len(),
            s.name,
            t0.elapsed().as_secs_f64() / 60.0,
            names.join(" -> ")
        );
        let r = run::run(&cfg, &s, Vec::new())?;
        for a in r.attempts.iter().filter(|a| a.platform_failure.is_some()) {
            eprintln!(
                "pvlock-bench:   attempt {} was the platform's: {}",
                a.attempt,
                a.verdict()
            );
        }
        let (ms, hosts) = measure::read(u, arms, &workloads, &r.result);
        for m in &ms {
            match (m.value, &m.error) {
                (Some(v), _) => eprintln!(
                    "pvlock-bench:   {:<20} {} {:.0} {}",
                    m.arm,
                    m.workload.label(),
                    v,
                    m.workload.unit()
                ),
                (None, e) => eprintln!(
                    "pvlock-bench:   {:<20} {} LOST: {}",
                    m.arm,
                    m.workload.label(),
                    e.as_deref().unwrap_or("")
                ),
            }
        }
        res.units.push(UnitRecord {
            name: s.name.clone(),
            level: u.level,
            rep: u.rounds.first().map_or(0, |r| r.rep),
            order: names.iter().map(|n| n.to_string()).collect(),
            attempts: r.attempts.iter().map(|a| a.verdict()).collect(),
            passed: r.passed,
            reasons: r.reasons.clone(),
            wall_secs: r.wall_secs,
        });
        res.measurements.extend(ms);
        res.host.extend(hosts);
        res.goals = stats::decide(&res.measurements, &goals);
        write(&out, &res)?;
    }
    res.complete = !INTERRUPTED.load(Ordering::Relaxed);
    res.goals = stats::decide(&res.measurements, &goals);
    write(&out, &res)?;
    print!("{}", report::markdown(&res));
    eprintln!(
        "pvlock-bench: {} in {:.0} min; results in {}",
        report::summary_counts(&res.goals),
        t0.elapsed().as_secs_f64() / 60.0,
        out.display()
    );
    let failures = report::lock_failures(&res);
    if failures > 0 {
        eprintln!("pvlock-bench: {failures} runs in which the lock failed (see 'Runs lost')");
        return Ok(1);
    }
    Ok(u8::from(!res.complete))
}

fn main() -> ExitCode {
    match real_main() {
        Ok(rc) => ExitCode::from(rc),
        Err(e) => {
            eprintln!("pvlock-bench: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

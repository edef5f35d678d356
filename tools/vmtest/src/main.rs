// SPDX-License-Identifier: GPL-2.0

//! vmtest: boots the pvlock kernel as a KVM host (L1, QEMU TCG with nested
//! SVM) and, inside it, as KVM guests (L2), runs declarative scenarios
//! (`tests/scenarios/*.toml`) and judges them.
//!
//! Every run is bounded (a whole-run timeout, and a timeout per step inside
//! the guests); QEMU dies with the harness (Ctrl-C included); each run
//! leaves `<out>/<scenario>.json` and the console logs. A run that failed
//! the way nested TCG sometimes fails (a guest that vanishes without a
//! kernel message, a vCPU that answers no NMI), and only that way, is
//! retried, visibly, as many times as the scenario allows (at most 3);
//! after three in a row it is deferred to a later round, after the other
//! scenarios, as such failures come in spells. `vmtest rate` measures
//! failure rates instead: a scenario and its control, N runs each, no
//! retries.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use pvlock_common::cli;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use vmtest::judge;
use vmtest::platform::Signature;
use vmtest::rate::Tally;
use vmtest::report::{Attempt, Report};
use vmtest::retry;
use vmtest::run::{self, Config, INTERRUPTED};
use vmtest::scenario::{Scenario, MAX_RETRIES};

#[derive(Parser)]
#[command(
    version,
    about = "Boot pvlock kernels under QEMU (L1 KVM host, L2 KVM guests) and run test scenarios",
    after_help = "Examples:\n  vmtest --kdir ~/.cache/pvlock/linux-7.3.4-1~bpo13+1 run --fast\n  vmtest --kdir $KDIR run upstream-pv pvlock-kick --console\n  vmtest --kdir $KDIR rate pvlock-loadloop --control tests/platform/textpoke-native.toml -n 10\n  vmtest list\n  vmtest plan upstream-pv"
)]
struct Cli {
    /// The built kernel tree (make print-kdir).
    #[arg(long, env = "KDIR", global = true)]
    kdir: Option<PathBuf>,
    /// The repository root.
    #[arg(long, global = true, default_value = ".")]
    repo: PathBuf,
    /// Where the statically linked tools are.
    #[arg(long, global = true)]
    tools_bin: Option<PathBuf>,
    /// Results and console logs.
    #[arg(long, global = true, default_value = "build/vmtest")]
    out: PathBuf,
    /// Cache of initramfs images.
    #[arg(long, global = true)]
    cache: Option<PathBuf>,
    /// Where guest_pvlock/ and host_kvm/ with their .ko files are, if not in
    /// the repository (make modules CONFIG=distro puts them in
    /// build/modules-distro).
    #[arg(long, global = true)]
    modules: Option<PathBuf>,
    /// The QEMU binary, for L1 and, inside it, for the L2 guests (make
    /// qemu builds the project's and the Makefile passes it).
    #[arg(long, global = true, default_value = "qemu-system-x86_64")]
    qemu: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run scenarios (names from tests/scenarios/ or paths).
    Run {
        scenarios: Vec<String>,
        /// Every scenario marked `fast = true`.
        #[arg(long)]
        fast: bool,
        /// Every scenario.
        #[arg(long)]
        all: bool,
        /// Retries after platform failures (default: each scenario's own,
        /// at most 3).
        #[arg(long)]
        retries: Option<u32>,
        /// No retry starts once this many minutes have passed since the
        /// first scenario began (bounds `make test` on a bad day).
        #[arg(long, default_value_t = 50)]
        retry_budget: u64,
        /// Attempts in a row before a scenario that keeps failing for
        /// platform reasons is deferred to a later round, after the other
        /// scenarios (its remaining retries are kept).
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
        attempts_per_round: u32,
        /// Echo the whole console instead of a progress line.
        #[arg(long)]
        console: bool,
        /// After each scenario, show what every kernel reported: lock ops,
        /// locktorture results, step output (e.g. pvlock-stat tables).
        #[arg(long)]
        summary: bool,
        /// Extra file for the initramfs, HOST_PATH:IMAGE_PATH.
        #[arg(long = "extra")]
        extra: Vec<String>,
    },
    /// Failure rates: run SCENARIO and CONTROL N times each, alternating
    /// (scenario, control, scenario, ...), with no retries; print and save
    /// (<out>/rate-<scenario>-vs-<control>.json) the attempts, passes,
    /// failures by verdict (real, or each platform signature) and the
    /// failure rate with its 95% Wilson score interval.
    Rate {
        scenario: String,
        /// The control: the same load without the code under test (e.g.
        /// tests/platform/textpoke-native.toml).
        #[arg(long)]
        control: String,
        /// Runs of each.
        #[arg(short = 'n', long = "runs", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
        n: u32,
        /// Echo the whole console instead of a progress line.
        #[arg(long)]
        console: bool,
        /// Extra file for the initramfs, HOST_PATH:IMAGE_PATH.
        #[arg(long = "extra")]
        extra: Vec<String>,
    },
    /// Judge a console log again (`build/vmtest/<scenario>/console-N.log`)
    /// with the harness's current rules: the failures, the platform
    /// events, and what no event explains. Arrival times are not in the
    /// log: rules that compare them across kernels see every line at 0.
    Judge {
        scenario: String,
        console_log: PathBuf,
    },
    /// List the scenarios.
    List,
    /// Print the plans a scenario generates.
    Plan { scenario: String },
}

fn scenario_dir(repo: &Path) -> PathBuf {
    repo.join("tests/scenarios")
}

fn all_scenarios(repo: &Path) -> Result<Vec<Scenario>> {
    let mut v = Vec::new();
    let dir = scenario_dir(repo);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    for p in paths {
        v.push(judge::load_scenario(&p)?);
    }
    Ok(v)
}

fn find(repo: &Path, name: &str) -> Result<Scenario> {
    let p = Path::new(name);
    if p.exists() {
        return judge::load_scenario(p);
    }
    let p = scenario_dir(repo).join(format!("{name}.toml"));
    if !p.exists() {
        bail!(
            "no scenario '{name}' ({} does not exist; 'vmtest list' shows them)",
            p.display()
        );
    }
    judge::load_scenario(&p)
}

/// Prints a scenario's final verdict (and, with `summary`, what its
/// kernels reported).
fn report_one(s: &Scenario, r: &Report, summary: bool) {
    if r.passed {
        let note = if s.expect_failure.is_some() {
            format!(" (failed as expected: {})", r.reasons.join("; "))
        } else {
            String::new()
        };
        let retried = &r.attempts[..r.attempts.len().saturating_sub(1)];
        let after = if retried.is_empty() {
            String::new()
        } else {
            format!(
                " after {} platform retries ({})",
                retried.len(),
                retried
                    .iter()
                    .map(|a| a.platform_signatures.join("+"))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        };
        eprintln!("PASS {}{after} in {:.0} s{note}", s.name, r.wall_secs);
    } else {
        eprintln!("FAIL {} in {:.0} s:", s.name, r.wall_secs);
        if r.reasons.is_empty() {
            eprintln!(
                "  - expected a failure matching /{}/, the run passed",
                s.expect_failure.as_deref().unwrap_or("")
            );
        }
        for why in &r.reasons {
            eprintln!("  - {why}");
        }
        for (node, report) in &r.first_reports {
            eprintln!("  first problem report of {node}:");
            for l in report {
                eprintln!("    > {l}");
            }
        }
        for (node, tail) in &r.tails {
            eprintln!("  last console lines of {node}:");
            for l in tail.iter().rev().take(15).rev() {
                eprintln!("    | {l}");
            }
        }
        if let Some(a) = r.attempts.last() {
            eprintln!("  console: {}", a.console_log.display());
        }
    }
    if r.attempts.len() > 1 || s.expect_failure.is_some() {
        for a in &r.attempts {
            let what = match (&a.platform_failure, a.reasons.first()) {
                (Some(why), _) => format!(": {why}"),
                (None, Some(first)) => format!(": {first}"),
                (None, None) => String::new(),
            };
            eprintln!("  attempt {} {}{what}", a.attempt, a.verdict());
            if !a.overruled.is_empty() {
                eprintln!(
                    "    (not the platform's though it saw {}: other failures came with it)",
                    a.overruled.join("; ")
                );
            }
        }
    }
    if summary {
        print_summary(r);
    }
}

/// What each kernel of a run reported, for people: the result's nodes,
/// read back as the harness's own [`vmtest::console::Node`]s.
fn print_summary(r: &Report) {
    let nodes = &r.result.nodes;
    let opt = |v: Option<u64>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    for (name, n) in nodes {
        println!("--- {name} ---");
        if let Some(k) = &n.kernel {
            println!("kernel {k}, {} CPUs", opt(n.nproc));
        }
        for d in &n.dmesg {
            if d.contains("guest_pvlock:") || d.contains("host_kvm:") || d.contains("PV spinlocks")
            {
                println!("  {d}");
            }
        }
        for lt in &n.locktorture {
            println!(
                "  locktorture {} with {} writers: {} acquisitions in {:.0} s ({:.0}/s), Max/Min {}/{}, Fail {}, {}",
                lt.kind,
                lt.writers,
                opt(lt.total),
                lt.secs,
                lt.per_sec.unwrap_or(0.0),
                opt(lt.max),
                opt(lt.min),
                opt(lt.fail),
                lt.verdict.as_deref().unwrap_or("no verdict")
            );
        }
        for (step, counts) in &n.hypercalls {
            println!("  hypercalls seen by KVM ({step}): {counts:?}");
        }
        for l in &n.out {
            println!("  | {l}");
        }
    }
}

/// The platform signatures of a run's attempts: per signature, the
/// attempts it made the platform's, and those it did not (failures of
/// their own came with it).
fn signature_table(reports: &[Report]) {
    let mut rows = Vec::new();
    for sig in Signature::ALL {
        let name = sig.name();
        let count = |f: fn(&Attempt) -> &Vec<String>| {
            reports
                .iter()
                .flat_map(|r| &r.attempts)
                .filter(|a| f(a).iter().any(|s| s == name))
                .count()
        };
        let (platform, overruled) = (
            count(|a| &a.platform_signatures),
            count(|a| &a.overruled_signatures),
        );
        if platform + overruled > 0 {
            rows.push((name, platform, overruled));
        }
    }
    if rows.is_empty() {
        eprintln!("\nno platform signature fired");
        return;
    }
    eprintln!(
        "\n{:<24} {:>9} {:>10}",
        "platform signature", "platform", "overruled"
    );
    for (name, platform, overruled) in rows {
        eprintln!("{name:<24} {platform:>9} {overruled:>10}");
    }
}

/// The initramfs copies of a run directory are large and can be made
/// again.
fn remove_initrds(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            remove_initrds(&p);
        } else if e.file_name().to_string_lossy().starts_with("initrd-") {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// `vmtest rate`: `s` and `control`, `n` runs each, alternating, no
/// retries.
fn rate(cfg: &Config, s: &Scenario, control: &Scenario, n: u32) -> Result<()> {
    let name = format!("rate-{}-vs-{}", s.name, control.name);
    let dir = cfg.out.join(&name);
    let json = cfg.out.join(format!("{name}.json"));
    let mut tallies = [Tally::new(&s.name), Tally::new(&control.name)];
    let save = |t: &[Tally; 2], done: bool| -> Result<()> {
        let v = serde_json::json!({
            "scenario": t[0],
            "control": t[1],
            "runs_each": n,
            "complete": done,
        });
        std::fs::write(&json, serde_json::to_string_pretty(&v)?)
            .with_context(|| format!("cannot write {}", json.display()))
    };
    for i in 1..=n {
        for (k, sc) in [s, control].into_iter().enumerate() {
            eprintln!("=== {} run {i} of {n}: {}", sc.name, sc.description);
            let one = Config {
                out: dir.join(format!("{}-{i}", sc.name)),
                retries: Some(0),
                retry_deadline: None,
                attempts_per_round: None,
                ..cfg.clone()
            };
            std::fs::create_dir_all(&one.out)?;
            let r = run::run(&one, sc, Vec::new());
            remove_initrds(&one.out);
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    save(&tallies, false)?;
                    return Err(e);
                }
            };
            tallies[k].add(&r);
            if let Some(a) = r.attempts.last() {
                eprintln!(
                    "RATE {} run {i}: {}{}",
                    sc.name,
                    if r.passed { "pass".into() } else { a.verdict() },
                    a.reasons
                        .first()
                        .map(|w| format!(": {w}"))
                        .unwrap_or_default()
                );
            }
            save(&tallies, false)?;
        }
    }
    save(&tallies, true)?;
    eprintln!();
    for t in &tallies {
        eprintln!("{}", t.line());
    }
    eprintln!("saved in {}", json.display());
    Ok(())
}

fn extra_files(extra: &[String]) -> Result<Vec<(PathBuf, String)>> {
    extra
        .iter()
        .map(|e| {
            e.split_once(':')
                .map(|(h, g)| (PathBuf::from(h), g.to_string()))
                .context("--extra wants HOST_PATH:IMAGE_PATH")
        })
        .collect()
}

fn main() -> ExitCode {
    cli::exit_status("vmtest: error", real_main().map(|()| ExitCode::SUCCESS))
}

fn real_main() -> Result<()> {
    let cli = Cli::parse();
    let repo = cli.repo.canonicalize().context("--repo")?;
    match &cli.cmd {
        Cmd::List => {
            for s in all_scenarios(&repo)? {
                println!(
                    "{:<28} {:<5} {}",
                    s.name,
                    if s.fast { "fast" } else { "" },
                    s.description
                );
            }
            Ok(())
        }
        Cmd::Judge {
            scenario,
            console_log,
        } => {
            let s = find(&repo, scenario)?;
            let kdir = cli.kdir.clone().unwrap_or_else(|| repo.join("."));
            print!("{}", run::rejudge(&s, console_log, &kdir)?);
            Ok(())
        }
        Cmd::Plan { scenario } => {
            let s = find(&repo, scenario)?;
            for (path, text) in s.plans() {
                println!("### {path}\n{text}");
            }
            Ok(())
        }
        Cmd::Rate {
            scenario,
            control,
            n,
            console,
            extra,
        } => {
            let s = find(&repo, scenario)?;
            let c = find(&repo, control)?;
            let mut cfg = config(&cli, repo, extra)?;
            cfg.retries = Some(0);
            cfg.console = *console;
            start(&cfg)?;
            rate(&cfg, &s, &c, *n)
        }
        Cmd::Run { .. } => cmd_run(&cli, repo),
    }
}

/// Where things are, from the command line, for a command that boots
/// kernels: no retries of its own, no round limit, no echo.
fn config(cli: &Cli, repo: PathBuf, extra: &[String]) -> Result<Config> {
    let kdir = cli
        .kdir
        .clone()
        .context("--kdir (or KDIR) must name the built kernel tree; 'make print-kdir' prints it")?;
    Ok(Config {
        kdir,
        tools_bin: cli
            .tools_bin
            .clone()
            .unwrap_or_else(|| Config::default_tools_bin(&repo)),
        repo,
        cache: cli.cache.clone().unwrap_or_else(Config::default_cache),
        out: cli.out.clone(),
        qemu: cli.qemu.clone(),
        retries: None,
        retry_deadline: None,
        attempts_per_round: None,
        console: false,
        console_silence: None,
        extra: extra_files(extra)?,
        modules: cli.modules.clone(),
    })
}

/// The output directory made, Ctrl-C caught: ready to boot.
fn start(cfg: &Config) -> Result<()> {
    std::fs::create_dir_all(&cfg.out)?;
    ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::Relaxed))
        .context("cannot install the Ctrl-C handler")
}

/// `vmtest run`: the scenarios named (or every fast one, or all), in
/// rounds until each has a verdict; a table of them at the end.
fn cmd_run(cli: &Cli, repo: PathBuf) -> Result<()> {
    let Cmd::Run {
        scenarios,
        fast,
        all,
        retries,
        retry_budget,
        attempts_per_round,
        console,
        summary,
        extra,
    } = &cli.cmd
    else {
        bail!("not a run command");
    };
    let mut list = Vec::new();
    if *fast || *all {
        list.extend(all_scenarios(&repo)?.into_iter().filter(|s| *all || s.fast));
    }
    for n in scenarios {
        list.push(find(&repo, n)?);
    }
    if list.is_empty() {
        bail!("no scenario given (names, --fast or --all)");
    }
    // A program a scenario needs and this machine lacks stops the run
    // here, not after the scenarios before it have run.
    for s in &list {
        vmtest::programs::scenario_files(&s.programs)
            .with_context(|| format!("scenario {}", s.name))?;
    }
    if retries.is_some_and(|r| r > MAX_RETRIES) {
        eprintln!(
            "vmtest: note: --retries {} is more than the scenarios' most ({MAX_RETRIES}): a retry can hide a failure",
            retries.unwrap_or(0)
        );
    }
    let mut cfg = config(cli, repo, extra)?;
    cfg.retries = *retries;
    cfg.retry_deadline =
        Some(std::time::Instant::now() + std::time::Duration::from_secs(retry_budget * 60));
    cfg.attempts_per_round = Some(*attempts_per_round);
    cfg.console = *console;
    start(&cfg)?;
    // Round one runs every scenario; a scenario still failing for
    // platform reasons after its attempts in a row is deferred to the
    // next round, after the others, until it passes, fails for a reason
    // of its own, or its retries or the budget run out.
    let reports = retry::rounds(
        list.len(),
        |i, earlier| {
            let s = &list[i];
            eprintln!("=== {}: {}", s.name, s.description);
            let r = run::run(&cfg, s, earlier)?;
            if !r.deferred {
                report_one(s, &r, *summary);
            }
            Ok(r)
        },
        |round, pending| {
            eprintln!(
                "=== round {round}: again after platform failures: {}",
                pending
                    .iter()
                    .map(|&i| list[i].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
    )?;
    verdict_table(&list, &reports)
}

/// The table of every scenario's verdict, and of the platform signatures
/// seen; an error naming the scenarios that failed.
fn verdict_table(list: &[Scenario], reports: &[Report]) -> Result<()> {
    let mut failed = Vec::new();
    eprintln!(
        "\n{:<28} {:<6} {:>8} {:>8}",
        "scenario", "result", "secs", "retries"
    );
    for (s, r) in list.iter().zip(reports) {
        if !r.passed {
            failed.push(s.name.clone());
        }
        eprintln!(
            "{:<28} {:<6} {:>8.0} {:>8}",
            s.name,
            if r.passed { "PASS" } else { "FAIL" },
            r.wall_secs,
            r.attempts.len().saturating_sub(1)
        );
    }
    signature_table(reports);
    if !failed.is_empty() {
        bail!(
            "{} of {} scenarios failed: {}",
            failed.len(),
            list.len(),
            failed.join(", ")
        );
    }
    Ok(())
}

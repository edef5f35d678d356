// SPDX-License-Identifier: GPL-2.0

//! vmtest: boots the pvlock kernel as a KVM host (L1, QEMU TCG with nested
//! SVM) and, inside it, as KVM guests (L2), runs declarative scenarios
//! (`tests/scenarios/*.toml`) and judges them.
//!
//! Every run is bounded (a whole-run timeout, and a timeout per step inside
//! the guests); QEMU dies with the harness (Ctrl-C included); each run
//! leaves `<out>/<scenario>.json` and the console logs. A run that failed
//! the way nested TCG sometimes fails (a guest that vanishes without a
//! kernel message, a stalled guest timer) is retried, visibly, as many
//! times as the scenario allows; after three in a row it is deferred to a
//! later round, after the other scenarios, as such failures come in spells.

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use vmtest::run::{self, Config, INTERRUPTED};
use vmtest::scenario::Scenario;

#[derive(Parser)]
#[command(
    version,
    about = "Boot pvlock kernels under QEMU (L1 KVM host, L2 KVM guests) and run test scenarios",
    after_help = "Examples:\n  vmtest --kdir ~/.cache/pvlock/linux-7.3.4-1~bpo13+1 run --fast\n  vmtest --kdir $KDIR run upstream-pv pvlock-kick --console\n  vmtest list\n  vmtest plan upstream-pv"
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
        /// Retries after platform failures (default: each scenario's own).
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
        /// QEMU binary.
        #[arg(long, default_value = "qemu-system-x86_64")]
        qemu: String,
        /// Extra file for the initramfs, HOST_PATH:IMAGE_PATH.
        #[arg(long = "extra")]
        extra: Vec<String>,
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
        v.push(Scenario::load(&p)?);
    }
    Ok(v)
}

fn find(repo: &Path, name: &str) -> Result<Scenario> {
    let p = Path::new(name);
    if p.exists() {
        return Scenario::load(p);
    }
    let p = scenario_dir(repo).join(format!("{name}.toml"));
    if !p.exists() {
        bail!(
            "no scenario '{name}' ({} does not exist; 'vmtest list' shows them)",
            p.display()
        );
    }
    Scenario::load(&p)
}

/// Prints a scenario's final verdict (and, with `summary`, what its
/// kernels reported).
fn report_one(s: &Scenario, r: &run::Report, summary: bool) {
    if r.passed {
        let note = if s.expect_failure.is_some() {
            format!(" (failed as expected: {})", r.reasons.join("; "))
        } else {
            String::new()
        };
        eprintln!("PASS {} in {:.0} s{note}", s.name, r.wall_secs);
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
    if summary {
        print_summary(r);
    }
}

/// What each kernel of a run reported, for people.
fn print_summary(r: &run::Report) {
    let Some(nodes) = r.result.get("nodes").and_then(|n| n.as_object()) else {
        return;
    };
    for (name, n) in nodes {
        println!("--- {name} ---");
        if let Some(k) = n.get("kernel").and_then(|v| v.as_str()) {
            println!(
                "kernel {k}, {} CPUs",
                n.get("nproc").unwrap_or(&serde_json::Value::Null)
            );
        }
        for d in n
            .get("dmesg")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            let d = d.as_str().unwrap_or("");
            if d.contains("guest_pvlock:") || d.contains("host_kvm:") || d.contains("PV spinlocks")
            {
                println!("  {d}");
            }
        }
        for lt in n
            .get("locktorture")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            println!(
                "  locktorture {} with {} writers: {} acquisitions in {:.0} s ({:.0}/s), Max/Min {}/{}, Fail {}, {}",
                lt["kind"].as_str().unwrap_or("?"),
                lt["writers"],
                lt["total"],
                lt["secs"].as_f64().unwrap_or(0.0),
                lt["per_sec"].as_f64().unwrap_or(0.0),
                lt["max"],
                lt["min"],
                lt["fail"],
                lt["verdict"].as_str().unwrap_or("no verdict")
            );
        }
        if let Some(h) = n.get("hypercalls").and_then(|v| v.as_object()) {
            for (step, counts) in h {
                println!("  hypercalls seen by KVM ({step}): {counts}");
            }
        }
        for l in n
            .get("out")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
        {
            println!("  | {}", l.as_str().unwrap_or(""));
        }
    }
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("vmtest: error: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    let cli = Cli::parse();
    let repo = cli.repo.canonicalize().context("--repo")?;
    match cli.cmd {
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
        Cmd::Plan { scenario } => {
            let s = find(&repo, &scenario)?;
            for (path, text) in s.plans() {
                println!("### {path}\n{text}");
            }
            Ok(())
        }
        Cmd::Run {
            scenarios,
            fast,
            all,
            retries,
            retry_budget,
            attempts_per_round,
            console,
            summary,
            qemu,
            extra,
        } => {
            let mut list = Vec::new();
            if fast || all {
                list.extend(all_scenarios(&repo)?.into_iter().filter(|s| all || s.fast));
            }
            for n in &scenarios {
                list.push(find(&repo, n)?);
            }
            if list.is_empty() {
                bail!("no scenario given (names, --fast or --all)");
            }
            let kdir = cli.kdir.context(
                "--kdir (or KDIR) must name the built kernel tree; 'make print-kdir' prints it",
            )?;
            let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
            let cache = cli.cache.unwrap_or_else(|| {
                std::env::var("PVLOCK_CACHE")
                    .map(PathBuf::from)
                    .unwrap_or_else(|_| PathBuf::from(home).join(".cache/pvlock"))
                    .join("vmtest")
            });
            let extra = extra
                .iter()
                .map(|e| {
                    e.split_once(':')
                        .map(|(h, g)| (PathBuf::from(h), g.to_string()))
                        .context("--extra wants HOST_PATH:IMAGE_PATH")
                })
                .collect::<Result<Vec<_>>>()?;
            let cfg = Config {
                kdir,
                tools_bin: cli
                    .tools_bin
                    .unwrap_or_else(|| repo.join("tools/target/x86_64-unknown-linux-gnu/release")),
                repo,
                cache,
                out: cli.out,
                qemu,
                retries,
                retry_deadline: Some(
                    std::time::Instant::now() + std::time::Duration::from_secs(retry_budget * 60),
                ),
                attempts_per_round: Some(attempts_per_round),
                console,
                extra,
            };
            std::fs::create_dir_all(&cfg.out)?;
            ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::Relaxed))
                .context("cannot install the Ctrl-C handler")?;
            // Round one runs every scenario; a scenario still failing for
            // platform reasons after its attempts in a row is deferred to
            // the next round, after the others, until it passes, fails for
            // a reason of its own, or its retries or the budget run out.
            let reports = run::rounds(
                list.len(),
                |i, earlier| {
                    let s = &list[i];
                    eprintln!("=== {}: {}", s.name, s.description);
                    let r = run::run(&cfg, s, earlier)?;
                    if !r.deferred {
                        report_one(s, &r, summary);
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
            let mut failed = Vec::new();
            let mut rows = Vec::new();
            for (s, r) in list.iter().zip(&reports) {
                if !r.passed {
                    failed.push(s.name.clone());
                }
                let retried = r.attempts.len().saturating_sub(1);
                rows.push((s.name.clone(), r.passed, r.wall_secs, retried));
            }
            eprintln!(
                "\n{:<28} {:<6} {:>8} {:>8}",
                "scenario", "result", "secs", "retries"
            );
            for (n, ok, secs, retried) in &rows {
                eprintln!(
                    "{n:<28} {:<6} {secs:>8.0} {retried:>8}",
                    if *ok { "PASS" } else { "FAIL" }
                );
            }
            if !failed.is_empty() {
                bail!(
                    "{} of {} scenarios failed: {}",
                    failed.len(),
                    rows.len(),
                    failed.join(", ")
                );
            }
            Ok(())
        }
    }
}

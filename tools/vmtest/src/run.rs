// SPDX-License-Identifier: GPL-2.0

//! Running one scenario: the initramfs, QEMU for L1 (which boots L2 itself),
//! the console, the bounds, the retries and the verdict.

use crate::initramfs;
use crate::judge::judge;
use crate::result::{describe_shutdown, split_origin, Parsed};
use crate::scenario::Scenario;
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Set by the Ctrl-C handler.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Where things are.
#[derive(Debug, Clone)]
pub struct Config {
    /// The kernel tree (bzImage, locktorture.ko, kernel.release).
    pub kdir: PathBuf,
    /// The repository (modules, guest library, scenarios).
    pub repo: PathBuf,
    /// Where the static tools (pvlock-stat, pvlock-kvmtest) are.
    pub tools_bin: PathBuf,
    /// Cache of base initramfs images.
    pub cache: PathBuf,
    /// Results and console logs.
    pub out: PathBuf,
    pub qemu: String,
    /// Overrides the scenarios' retry counts.
    pub retries: Option<u32>,
    /// No retry starts after this instant.
    pub retry_deadline: Option<Instant>,
    /// Attempts in a row before a scenario that keeps failing for platform
    /// reasons is deferred (see [`Report::deferred`]); `None`: never defer.
    pub attempts_per_round: Option<u32>,
    /// Echo the console.
    pub console: bool,
    /// Further files for the initramfs.
    pub extra: Vec<(PathBuf, String)>,
}

/// The outcome of one attempt.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    pub attempt: u32,
    pub reasons: Vec<String>,
    pub platform_failure: Option<String>,
    pub wall_secs: f64,
    pub console_log: PathBuf,
}

/// The outcome of a scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: String,
    pub description: String,
    pub passed: bool,
    /// The reasons of the last attempt (for `expect_failure` scenarios,
    /// the failure that was expected).
    pub reasons: Vec<String>,
    pub attempts: Vec<Attempt>,
    pub wall_secs: f64,
    pub result: Value,
    /// The last attempt failed for platform reasons and retries remain,
    /// but this round's attempts are used up: run it again later, after
    /// the other scenarios, so that a bad spell of the machine does not
    /// use up every retry at once.
    pub deferred: bool,
    #[serde(skip)]
    pub tails: Vec<(String, Vec<String>)>,
}

impl Config {
    pub fn bzimage(&self) -> PathBuf {
        self.kdir.join("arch/x86/boot/bzImage")
    }

    fn inputs(&self) -> Result<initramfs::Inputs> {
        let release = std::fs::read_to_string(self.kdir.join("include/config/kernel.release"))
            .with_context(|| {
                format!(
                    "{} is not a built kernel tree (run 'make kernel')",
                    self.kdir.display()
                )
            })?
            .trim()
            .to_string();
        let mut modules = vec![
            self.repo.join("guest_pvlock/guest_pvlock.ko"),
            self.repo.join("host_kvm/host_kvm.ko"),
            self.kdir.join("kernel/locking/locktorture.ko"),
            self.kdir.join("kernel/torture.ko"),
        ];
        modules.retain(|m| m.exists() || !m.starts_with(&self.repo));
        for m in &modules {
            if !m.exists() {
                bail!(
                    "{} is missing (run 'make kernel' and 'make modules')",
                    m.display()
                );
            }
        }
        let mut programs = Vec::new();
        for p in ["pvlock-stat", "pvlock-kvmtest"] {
            let path = self.tools_bin.join(p);
            if path.exists() {
                programs.push(path);
            }
        }
        Ok(initramfs::Inputs {
            busybox: PathBuf::from("/bin/busybox"),
            guest_dir: self.repo.join("tools/vmtest/guest"),
            kernel_release: release,
            modules,
            programs,
            extra: self.extra.clone(),
        })
    }
}

fn fmt_secs(s: f64) -> String {
    format!("{:02}:{:02}", (s as u64) / 60, (s as u64) % 60)
}

/// A console line, with the node it came from, or QEMU's stderr.
enum Line {
    Out(String),
    Err(String),
}

fn spawn_reader<R: std::io::Read + Send + 'static>(
    r: R,
    tx: mpsc::Sender<Line>,
    err: bool,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut rd = BufReader::new(r);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match rd.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let s = String::from_utf8_lossy(&buf).into_owned();
                    let s = s.trim_end_matches(['\n', '\r']).to_string();
                    if tx
                        .send(if err { Line::Err(s) } else { Line::Out(s) })
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    })
}

fn kill_group(child: &mut Child) {
    let pid = child.id() as i32;
    // SAFETY: Sends a signal to the process group QEMU leads (it was made
    // its own group leader at spawn); no memory is involved.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// What the progress line says: the step each kernel is in.
fn activity(p: &Parsed) -> String {
    let mut parts = Vec::new();
    for (name, n) in &p.nodes {
        let what = if n.done {
            "done".to_string()
        } else if let Some(s) = n
            .steps
            .iter()
            .rev()
            .find(|s| s.rc.is_none() && !s.timed_out)
        {
            format!(
                "step {} ({})",
                s.id,
                s.call.split_whitespace().next().unwrap_or("")
            )
        } else if n.booted {
            "running".into()
        } else {
            "booting".into()
        };
        parts.push(format!("{name}: {what}"));
    }
    if parts.is_empty() {
        "L1 booting".into()
    } else {
        parts.join(" | ")
    }
}

/// Seconds without a line from a kernel whose heartbeat runs after which it
/// counts as stalled. The heartbeat comes every 5 s (`guest/init`).
pub const STALL_SECS: u64 = 90;

/// A kernel's heartbeat line (L2s' relayed by L1 with their prefix); never
/// logged or parsed.
const HEARTBEAT: &str = "@@HB";

/// Page faults that recurse in the exception entry itself until the stack
/// runs out (`stack guard page was hit`, `#DF` or task stack, with the
/// faulting RIP in the entry code): the entry code is fixed, the TLB under
/// it is nested TCG's. Seen in L1 and in L2s with and without pvlock, with
/// no project code on the stack.
fn entry_fault_recursion<'a>(mut lines: impl Iterator<Item = &'a String> + Clone) -> bool {
    lines
        .clone()
        .any(|l| l.contains("stack guard page was hit"))
        && lines.any(|l| {
            [
                "RIP: 0010:exc_page_fault",
                "RIP: 0010:irqentry_enter",
                "RIP: 0010:error_entry",
            ]
            .iter()
            .any(|r| l.contains(r))
        })
}

/// An `int3` trap at an address whose byte in memory is not `int3`
/// (`0xcc`): the `Code:` dump of the oops shows the instruction bytes around
/// RIP, and the byte before the marked one is the one that trapped. The
/// kernel's text patching (static calls, static keys) writes `int3` first
/// and the final byte last, then serialises every CPU with an IPI before it
/// drops its `int3` handler's record; on an x86 CPU no CPU can execute the
/// old `int3` after that. Nested TCG does: it runs a stale translation of
/// the patched code. Seen with the kernel's own tracepoint patching in L2s
/// without pvlock (tests/platform/textpoke-native.toml).
fn stale_int3<'a>(mut lines: impl Iterator<Item = &'a String> + Clone) -> bool {
    let stale = |l: &&String| {
        let Some((_, code)) = l.split_once("Code: ") else {
            return false;
        };
        let bytes: Vec<&str> = code.split_whitespace().collect();
        bytes
            .iter()
            .position(|b| b.starts_with('<'))
            .and_then(|i| i.checked_sub(1))
            .is_some_and(|i| bytes[i].len() == 2 && bytes[i] != "cc")
    };
    lines.clone().any(|l| l.contains("Oops: int3")) && lines.any(|l| stale(&l))
}

/// A jump to address 0 taken from the idle loop's halt (the interrupted
/// context is `default_idle`/`do_idle`, nothing of the project's on the
/// stack): seen in L1 and L2 at once under nested TCG.
fn idle_jump_to_zero<'a>(mut lines: impl Iterator<Item = &'a String> + Clone) -> bool {
    let project = |l: &&String| {
        !l.contains("Modules linked in") && (l.contains("pvlock") || l.contains("host_kvm"))
    };
    lines.clone().any(|l| l.contains("RIP: 0010:0x0"))
        && lines.clone().any(|l| l.contains("do_idle"))
        && !lines.any(|l| project(&l))
}

/// An RCU stall in which a vCPU answered no NMI: an NMI reaches a vCPU
/// whatever the guest runs on it (halted, spinning, interrupts off), unless
/// it is already inside an NMI handler: an NMI ends a `HLT` whatever the
/// guest waits for, a lost kick included. So L1 did not run that vCPU.
/// Seen in L2s without any project code (an idle vCPU that an IPI never
/// woke) as with it. A stall whose CPUs all answered shows their stacks and
/// stays a failure, as does any oops, warning or lockup report.
fn vcpu_stopped_running(n: &crate::result::Node) -> bool {
    const REAL: [&str; 7] = [
        "BUG:",
        "Oops",
        "WARNING:",
        "Kernel panic",
        "general protection",
        "soft lockup",
        "hard LOCKUP",
    ];
    !n.nmi_silent.is_empty()
        && n.problems.iter().any(|l| l.contains("rcu: INFO"))
        && !n
            .problems
            .iter()
            .any(|l| REAL.iter().any(|k| l.contains(k)))
}

/// The crashes of a kernel (L1 or an L2) that only nested TCG causes,
/// judged from its last console lines and problem reports.
fn crash_signature(name: &str, n: &crate::result::Node) -> Option<String> {
    let lines = || n.tail.iter().chain(&n.problems);
    if entry_fault_recursion(lines()) {
        return Some(format!(
            "{name}: page faults recursed in the exception entry (nested TCG)"
        ));
    }
    if idle_jump_to_zero(lines()) {
        return Some(format!(
            "{name}: a jump to 0 out of the idle loop (nested TCG)"
        ));
    }
    if stale_int3(lines()) {
        return Some(format!(
            "{name}: an int3 trapped where memory holds no int3 (stale code after text patching; nested TCG)"
        ));
    }
    // A 64-bit kernel never runs with code segment 0: a register state
    // zeroed under it (seen only under nested TCG, with no pvlock code
    // involved).
    if lines().any(|l| l.contains("RIP: 0000:0x0")) {
        return Some(format!(
            "{name}: a vCPU's register state was zeroed (CS=0, RIP=0; nested TCG)"
        ));
    }
    None
}

/// A failure the platform causes (nested TCG), not the code under test.
fn platform_failure(
    s: &Scenario,
    p: &Parsed,
    stalled: Option<&str>,
    l1_exit: Option<i32>,
) -> Option<String> {
    match stalled {
        Some("l1") => {
            return Some(format!(
                "l1: silent for {STALL_SECS} s, its heartbeat stopped (nested TCG stall)"
            ))
        }
        // An L2 whose heartbeat stopped while L1 ran on, and that said
        // nothing first: a deadlock of the guest would have had its RCU
        // stall or lockup detectors speak (they run off the timer tick), so
        // the guest's timer stopped.
        Some(name) if p.nodes.get(name).is_some_and(|n| n.problems.is_empty()) => {
            return Some(format!(
                "{name}: silent for {STALL_SECS} s with no kernel message, its heartbeat stopped (nested TCG timer stall)"
            ))
        }
        _ => {}
    }
    if let Some(l1) = p.nodes.get("l1").filter(|n| !n.done) {
        if let Some(why) = crash_signature("l1", l1) {
            return Some(why);
        }
        // QEMU ends with status 0 on a reset (-no-reboot): L1 reset itself
        // with no oops, panic or warning first, i.e. a triple fault that no
        // kernel code reported (oops=panic makes every kernel fault loud).
        if l1.booted && l1.problems.is_empty() && l1_exit == Some(0) {
            return Some(
                "l1: QEMU exited cleanly in the middle of the plan with no kernel message (a reset; nested TCG)"
                    .to_string(),
            );
        }
    }
    for name in s.l2_instances() {
        let Some(n) = p.nodes.get(&name) else {
            continue;
        };
        if n.done {
            continue;
        }
        // RCU stall reports from a guest that runs no project code yet: its
        // vCPUs starved under nested TCG (seen during boot). With
        // guest_pvlock loaded they are never the platform's.
        let pvlock_loaded = n
            .modules
            .iter()
            .any(|m| m.starts_with("guest_pvlock loaded"));
        if !pvlock_loaded && !n.problems.is_empty() && n.problems.iter().all(|l| l.contains("rcu"))
        {
            return Some(format!(
                "{name}: RCU stall before any project code was loaded (vCPU starvation, nested TCG)"
            ));
        }
        if let Some(why) = crash_signature(&name, n) {
            return Some(why);
        }
        if vcpu_stopped_running(n) {
            return Some(format!(
                "{name}: RCU stall with a vCPU that answered no NMI for 10 s, so L1 did not run it (nested TCG); {}",
                n.nmi_silent[0].trim()
            ));
        }
        if n.problems
            .iter()
            .any(|l| l.contains("timer wakeup didn't happen"))
        {
            return Some(format!(
                "{name}: the guest's timer stopped (nested TCG timer stall)"
            ));
        }
        if n.problems.is_empty() && n.exit_rc == Some(0) {
            // L1 traced the triple fault (shown for the record; with
            // several guests the trace does not say whose it was).
            let seen = p
                .nodes
                .get("l1")
                .and_then(|l1| l1.shutdown_exits.iter().find_map(|l| describe_shutdown(l)))
                .map(|d| format!("; KVM in L1: {d}"))
                .unwrap_or_default();
            return Some(format!(
                "{name}: QEMU exited cleanly in the middle of the plan with no kernel message (nested TCG){seen}"
            ));
        }
        // A guest that failed before its init ran none of the project's
        // code but the kernel's own patches, which would fail every
        // attempt alike: a failure that comes and goes there is the
        // platform's.
        if !n.booted {
            return Some(format!(
                "{name}: failed while booting, before any step (nested TCG)"
            ));
        }
    }
    None
}

struct AttemptRun {
    parsed: Parsed,
    timed_out: bool,
    /// The kernel that went silent (no heartbeat); the run was stopped.
    stalled: Option<String>,
    wall: f64,
    log: PathBuf,
    qemu_status: Option<i32>,
}

fn run_once(cfg: &Config, s: &Scenario, base: &Path, attempt: u32) -> Result<AttemptRun> {
    let dir = cfg.out.join(&s.name);
    std::fs::create_dir_all(&dir)?;
    let initrd = dir.join(format!("initrd-{attempt}.cpio.gz"));
    initramfs::with_plans(base, &s.plans(), &initrd)?;
    let initrd = initrd.canonicalize()?;
    let kernel = cfg.bzimage().canonicalize()?;
    let log_path = dir.join(format!("console-{attempt}.log"));
    let mut log = std::fs::File::create(&log_path)?;

    let cmdline = format!(
        "console=ttyS0 panic=-1 oops=panic quiet csdlock_debug=1 pv_level=1 pv_name=l1 pv_kernel={} pv_initrd={} {}",
        kernel.display(),
        initrd.display(),
        s.l1.cmdline
    );
    let mut cmd = Command::new(&cfg.qemu);
    cmd.args(["-accel", "tcg,thread=multi", "-cpu", "max"])
        .args(["-smp", &s.l1.cpus.to_string(), "-m", &s.l1.memory])
        .args(["-nographic", "-monitor", "none", "-no-reboot"])
        .arg("-kernel")
        .arg(&kernel)
        .arg("-initrd")
        .arg(&initrd)
        .args([
            "-virtfs",
            "local,path=/,mount_tag=hostroot,security_model=none,readonly=on",
        ])
        .arg("-append")
        .arg(&cmdline)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // SAFETY: prctl() is async-signal-safe; it only asks the kernel to kill
    // QEMU if the harness dies, so no QEMU outlives it.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    writeln!(log, "# {:?}", cmd)?;
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {} (run 'make deps')", cfg.qemu))?;
    let (tx, rx) = mpsc::channel();
    let r1 = spawn_reader(child.stdout.take().expect("piped"), tx.clone(), false);
    let r2 = spawn_reader(child.stderr.take().expect("piped"), tx, true);

    let tty = std::io::stderr().is_terminal();
    let pb = if tty && !cfg.console {
        let pb = ProgressBar::new_spinner();
        pb.set_style(ProgressStyle::with_template(
            "{spinner} {prefix} {elapsed_precise} {wide_msg}",
        )?);
        pb.set_prefix(format!("{} #{attempt}", s.name));
        pb.enable_steady_tick(Duration::from_millis(200));
        Some(pb)
    } else {
        None
    };

    let start = Instant::now();
    let deadline = start + Duration::from_secs(s.timeout);
    let mut parsed = Parsed::default();
    let mut timed_out = false;
    let mut stalled: Option<String> = None;
    // Per kernel ("l1" or an L2's name), armed by its first heartbeat (a
    // boot is not watched) and refreshed by any line of it; an L2 is
    // watched until its plan is done.
    let mut heard: BTreeMap<String, Instant> = BTreeMap::new();
    let mut last_activity = String::new();
    loop {
        if INTERRUPTED.load(Ordering::Relaxed) {
            kill_group(&mut child);
            if let Some(pb) = &pb {
                pb.finish_and_clear();
            }
            bail!("interrupted");
        }
        if Instant::now() >= deadline {
            timed_out = true;
            kill_group(&mut child);
            break;
        }
        let silent = heard.iter().find(|(name, t)| {
            t.elapsed() > Duration::from_secs(STALL_SECS)
                && !parsed
                    .nodes
                    .get(*name)
                    .is_some_and(|n| n.done || n.exit_rc.is_some())
        });
        if let Some((name, _)) = silent {
            writeln!(
                log,
                "# vmtest: nothing from {name} for {STALL_SECS} s (heartbeat stopped): stalled, stopped"
            )?;
            stalled = Some(name.clone());
            kill_group(&mut child);
            break;
        }
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(Line::Out(l)) => {
                let (origin, text) = split_origin(&l);
                let now = Instant::now();
                if text.trim_end() == HEARTBEAT {
                    heard.insert(origin.to_string(), now);
                    if origin != "l1" {
                        // Relayed by L1, so L1 runs too.
                        heard.insert("l1".to_string(), now);
                    }
                    continue;
                }
                for who in [origin, "l1"] {
                    if let Some(t) = heard.get_mut(who) {
                        *t = now;
                    }
                }
                writeln!(log, "{l}")?;
                if cfg.console {
                    eprintln!("{l}");
                }
                parsed.line(&l);
            }
            Ok(Line::Err(l)) => {
                writeln!(log, "[qemu stderr] {l}")?;
                eprintln!("[qemu stderr] {l}");
                parsed.line(&format!("[qemu] {l}"));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let act = activity(&parsed);
        if act != last_activity {
            let line = format!("{} {}", fmt_secs(start.elapsed().as_secs_f64()), act);
            match &pb {
                Some(pb) => pb.set_message(act.clone()),
                None if !cfg.console => eprintln!("  {} #{attempt} {line}", s.name),
                None => {}
            }
            last_activity = act;
        }
    }
    let status = child.wait().ok().and_then(|s| s.code());
    let _ = r1.join();
    let _ = r2.join();
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    writeln!(
        log,
        "# qemu exit status {status:?}, {:.1} s",
        start.elapsed().as_secs_f64()
    )?;
    Ok(AttemptRun {
        parsed,
        timed_out,
        stalled,
        wall: start.elapsed().as_secs_f64(),
        log: log_path,
        qemu_status: status,
    })
}

/// Runs `s`, with retries for platform failures; writes
/// `<out>/<scenario>.json`. `earlier` holds the attempts of the rounds
/// before (empty on the first run of `s`); their retries count.
pub fn run(cfg: &Config, s: &Scenario, earlier: Vec<Attempt>) -> Result<Report> {
    let base = initramfs::base(&cfg.inputs()?, &cfg.cache)?;
    let retries = cfg.retries.unwrap_or(s.retries);
    let want = s
        .expect_failure
        .as_deref()
        .map(regex::Regex::new)
        .transpose()?;
    let started = Instant::now();
    let earlier_secs: f64 = earlier.iter().map(|a| a.wall_secs).sum();
    let mut attempts = earlier;
    let mut attempt = attempts.len() as u32;
    let mut this_round = 0;
    loop {
        attempt += 1;
        this_round += 1;
        let r = run_once(cfg, s, &base, attempt)?;
        let result = json!({
            "scenario": s.name,
            "wall_secs": r.wall,
            "timed_out": r.timed_out,
            "stalled": r.stalled,
            "qemu_status": r.qemu_status,
            "nodes": serde_json::to_value(&r.parsed.nodes)?,
        });
        let mut reasons = judge(s, &r.parsed, &result, r.timed_out);
        if let Some(name) = &r.stalled {
            reasons.insert(
                0,
                format!("{name}: no heartbeat for {STALL_SECS} s (stalled); stopped"),
            );
        }
        let platform = if reasons.is_empty() {
            None
        } else {
            platform_failure(s, &r.parsed, r.stalled.as_deref(), r.qemu_status)
        };
        attempts.push(Attempt {
            attempt,
            reasons: reasons.clone(),
            platform_failure: platform.clone(),
            wall_secs: r.wall,
            console_log: r.log.clone(),
        });
        // A scenario that must fail is retried only when the failure it
        // wants did not show: a platform failure must not pass it.
        let wanted_shown = want
            .as_ref()
            .is_some_and(|re| reasons.iter().any(|r| re.is_match(r)));
        let retryable = platform.is_some() && attempt <= retries && !wanted_shown;
        let in_budget = cfg.retry_deadline.is_none_or(|d| Instant::now() < d);
        let retry = retryable && in_budget;
        let defer = retry && cfg.attempts_per_round.is_some_and(|n| this_round >= n);
        if let (Some(why), true) = (&platform, retry) {
            eprintln!(
                "{} {} (attempt {attempt} of {}): {why}; console in {}",
                if defer { "DEFER" } else { "RETRY" },
                s.name,
                retries + 1,
                r.log.display()
            );
            if !defer {
                continue;
            }
        }
        if retryable && !in_budget {
            eprintln!("NO RETRY {}: the retry budget is spent", s.name);
        }
        let passed = match &want {
            None => reasons.is_empty(),
            Some(_) => wanted_shown,
        };
        let tails = r
            .parsed
            .nodes
            .iter()
            .map(|(n, node)| (n.clone(), node.tail.clone()))
            .collect();
        let report = Report {
            scenario: s.name.clone(),
            description: s.description.clone(),
            passed,
            reasons,
            attempts,
            wall_secs: earlier_secs + started.elapsed().as_secs_f64(),
            result,
            deferred: defer,
            tails,
        };
        std::fs::write(
            cfg.out.join(format!("{}.json", s.name)),
            serde_json::to_string_pretty(&report)?,
        )?;
        return Ok(report);
    }
}

/// Runs scenarios `0..n` in rounds: round one runs each once (with its
/// retries in a row); a scenario whose report is `deferred` runs again in
/// the next round, after the others, with its attempts so far, until no
/// report is deferred. `announce` hears of each round after the first.
/// Ends: every deferred report has used a retry, and retries are finite.
pub fn rounds(
    n: usize,
    mut run_one: impl FnMut(usize, Vec<Attempt>) -> Result<Report>,
    mut announce: impl FnMut(u32, &[usize]),
) -> Result<Vec<Report>> {
    let mut reports: Vec<Option<Report>> = vec![None; n];
    let mut pending: Vec<usize> = (0..n).collect();
    let mut round = 1;
    while !pending.is_empty() {
        if round > 1 {
            announce(round, &pending);
        }
        let mut deferred = Vec::new();
        for &i in &pending {
            let earlier = reports[i].take().map(|r| r.attempts).unwrap_or_default();
            let r = run_one(i, earlier)?;
            if r.deferred {
                deferred.push(i);
            }
            reports[i] = Some(r);
        }
        pending = deferred;
        round += 1;
    }
    Ok(reports.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario() -> Scenario {
        let mut s: Scenario = toml::from_str(
            r#"
description = "t"
[l1]
steps = [{ l2 = ["g"] }]
[[l2]]
group = "g"
steps = [{ run = "info" }]
"#,
        )
        .unwrap();
        s.name = "t".into();
        s
    }

    #[test]
    fn deferred_scenarios_run_again_after_the_others() {
        // Scenario 0 fails for the platform in rounds one and two, then
        // passes; scenario 1 passes at once; scenario 2 gives up in round
        // two (retries used up).
        let mut order = Vec::new();
        let mut rounds_seen = Vec::new();
        let reports = rounds(
            3,
            |i, earlier| {
                order.push((i, earlier.len()));
                let mut attempts = earlier;
                attempts.push(Attempt {
                    attempt: attempts.len() as u32 + 1,
                    reasons: vec![],
                    platform_failure: None,
                    wall_secs: 1.0,
                    console_log: PathBuf::new(),
                });
                let deferred = match i {
                    0 => attempts.len() < 3,
                    2 => attempts.len() < 2,
                    _ => false,
                };
                Ok(Report {
                    scenario: i.to_string(),
                    description: String::new(),
                    passed: i != 2,
                    reasons: vec![],
                    attempts,
                    wall_secs: 0.0,
                    result: Value::Null,
                    deferred,
                    tails: vec![],
                })
            },
            |round, pending| rounds_seen.push((round, pending.to_vec())),
        )
        .unwrap();
        assert_eq!(order, [(0, 0), (1, 0), (2, 0), (0, 1), (2, 1), (0, 2)]);
        assert_eq!(rounds_seen, [(2, vec![0, 2]), (3, vec![0])]);
        let tries: Vec<_> = reports.iter().map(|r| r.attempts.len()).collect();
        assert_eq!(tries, [3, 1, 2]);
        assert!(reports.iter().all(|r| !r.deferred));
    }

    #[test]
    fn vanished_guest_is_a_platform_failure() {
        let s = scenario();
        let mut p = Parsed::default();
        p.line("[g-1] @@PV L2.g-1 boot uptime=2 nproc=4 kernel=7.3.4");
        p.line("[g-1] @@PV L1.l1 l2-exit g-1 rc=0");
        assert!(platform_failure(&s, &p, None, None)
            .unwrap()
            .contains("exited cleanly"));
        // L1's trace of the triple fault is carried along.
        p.line("@@PV L1.l1 l2-shutdown-exit  qemu-system-x86-84 [000] d..1. 18.49: kvm_exit: vcpu 0 reason shutdown rip 0xffffffff81164560 info1 0x0 info2 0x0 intr_info 0x80000b0e error_code 0x00000010 requests 0x0");
        assert!(platform_failure(&s, &p, None, None).unwrap().ends_with(
            "KVM in L1: triple fault on vCPU 0 at rip 0xffffffff81164560, delivering exception 14, error code 0x10"
        ));
        // A panic is never the platform's.
        p.line("[g-1] [ 3.0] Kernel panic - not syncing: oops");
        assert!(platform_failure(&s, &p, None, None).is_none());
    }

    #[test]
    fn stale_int3_is_a_platform_failure() {
        let s = scenario();
        let mut p = Parsed::default();
        p.line("[g-1] @@PV L2.g-1 boot uptime=2 nproc=4 kernel=7.3.4");
        p.line("[g-1] [   60.64] Oops: int3: 0000 [#1] SMP");
        p.line("[g-1] [   60.73] RIP: 0010:_raw_spin_unlock_irqrestore+0x5/0x30");
        // The trap byte still in memory: a real breakpoint, the code's.
        p.line("[g-1] [   60.75] Code: 00 f3 0f 1e fa cc <07> 04 00 00 0f ba e6 09");
        assert!(platform_failure(&s, &p, None, None).is_none());
        // Memory holds the patched call: the CPU ran a stale int3.
        p.line("[g-1] [   60.75] Code: 00 f3 0f 1e fa e8 <07> 04 00 00 0f ba e6 09");
        assert!(platform_failure(&s, &p, None, None)
            .unwrap()
            .contains("stale code"));
        // Without an int3 oops, a Code: line alone says nothing.
        let mut q = Parsed::default();
        q.line("[g-1] @@PV L2.g-1 boot uptime=2 nproc=4 kernel=7.3.4");
        q.line("[g-1] [   60.64] Oops: general protection fault: 0000 [#1] SMP");
        q.line("[g-1] [   60.75] Code: 00 f3 0f 1e fa e8 <07> 04 00 00 0f ba e6 09");
        assert!(platform_failure(&s, &q, None, None).is_none());
    }

    #[test]
    fn zeroed_vcpu_state_is_a_platform_failure() {
        let s = scenario();
        let mut p = Parsed::default();
        p.line("[g-1] [ 9.19] BUG: kernel NULL pointer dereference, address: 000000000000002c");
        p.line("[g-1] [ 9.19] RIP: 0000:0x0");
        assert!(platform_failure(&s, &p, None, None)
            .unwrap()
            .contains("zeroed"));
    }

    #[test]
    fn l1_entry_fault_recursion_and_stall_are_platform_failures() {
        let s = scenario();
        let mut p = Parsed::default();
        p.line("@@PV L1.l1 boot uptime=1 nproc=2 kernel=7.3.4");
        assert!(platform_failure(&s, &p, None, None).is_none());
        assert!(platform_failure(&s, &p, Some("l1"), None)
            .unwrap()
            .contains("heartbeat"));
        p.line("[   29.24] BUG: TASK stack guard page was hit at ffa000000012fff8");
        // A stack overflow elsewhere is the code's.
        p.line("[   29.25] RIP: 0010:kvm_pvlock_kick+0x2c/0xc0");
        assert!(platform_failure(&s, &p, None, None).is_none());
        p.line("[   29.25] RIP: 0010:exc_page_fault+0x2c/0xc0");
        assert!(platform_failure(&s, &p, None, None)
            .unwrap()
            .contains("exception entry"));
        // L1 gone without a word: reset.
        let mut q = Parsed::default();
        q.line("@@PV L1.l1 boot uptime=1 nproc=2 kernel=7.3.4");
        assert!(platform_failure(&s, &q, None, Some(0))
            .unwrap()
            .contains("reset"));
        q.line("[  9.1] Kernel panic - not syncing: Fatal exception");
        assert!(platform_failure(&s, &q, None, Some(0)).is_none());
        // The same recursion in an L2, through the #DF stack.
        let mut g = Parsed::default();
        g.line("[g-1] [ 13.01] BUG: #DF stack guard page was hit at fffffe0000043ff8");
        g.line("[g-1] [ 13.11] RIP: 0010:error_entry+0x1a/0xc0");
        assert!(platform_failure(&s, &g, None, None)
            .unwrap()
            .contains("g-1: page faults recursed"));
        // A silent L2: its timer stopped, unless it reported a problem.
        let mut h = Parsed::default();
        h.line("[g-1] @@PV L2.g-1 boot uptime=1 nproc=4 kernel=7.3.4");
        assert!(platform_failure(&s, &h, Some("g-1"), None)
            .unwrap()
            .contains("timer stall"));
        h.line("[g-1] @@PV L2.g-1 module guest_pvlock loaded params=[]");
        h.line("[g-1] [ 30.1] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:");
        assert!(platform_failure(&s, &h, Some("g-1"), None).is_none());
        // A jump to 0 from idle.
        let mut z = Parsed::default();
        z.line("@@PV L1.l1 boot uptime=1 nproc=2 kernel=7.3.4");
        z.line("[   31.0] BUG: kernel NULL pointer dereference, address: 0000000000000000");
        z.line("[   31.0] RIP: 0010:0x0");
        z.line("[   31.0]  ? do_idle+0x14a/0x180");
        assert!(platform_failure(&s, &z, None, None)
            .unwrap()
            .contains("jump to 0"));
        z.line("[   31.0]  ? guest_pvlock_unlock+0x1d/0x40");
        assert!(platform_failure(&s, &z, None, None).is_none());
        // With guest_pvlock loaded, a stall is the platform's only when a
        // vCPU answered no NMI (a vCPU that did not run), and not with an
        // oops or warning besides.
        let mut q = Parsed::default();
        q.line("[g-1] @@PV L2.g-1 boot uptime=6 nproc=4 kernel=7.3.4");
        q.line("[g-1] @@PV L2.g-1 module guest_pvlock loaded params=[]");
        q.line("[g-1] [   20.42] smp: csd: Detected non-responsive CSD lock (#1) on CPU#1, waiting 5000054102 ns for CPU#02 flush_tlb_func+0x0/0x210(0xffa000000019bb00).");
        q.line("[g-1] [   36.42] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:");
        q.line("[g-1] [   36.44] rcu: \t2-...!: (668 ticks this GP) idle=788c/1/0x4000000000000000 softirq=408/410 fqs=27");
        assert!(platform_failure(&s, &q, None, None).is_none());
        q.line(
            "[g-1] [   38.69] After 10 seconds, these CPUS still haven't responded to the NMI: 2",
        );
        q.line("[g-1] [   38.70] Call Trace:");
        assert!(platform_failure(&s, &q, None, None)
            .unwrap()
            .contains("answered no NMI"));
        q.line("[g-1] [   39.00] WARNING: CPU: 1 PID: 60 at kernel/smp.c:815");
        assert!(platform_failure(&s, &q, None, None).is_none());
        // The same stall before guest_pvlock was loaded is the platform's.
        let mut b = Parsed::default();
        b.line("[g-1] @@PV L2.g-1 boot uptime=6 nproc=4 kernel=7.3.4");
        b.line("[g-1] [ 27.2] rcu: INFO: rcu_sched detected stalls on CPUs/tasks:");
        assert!(platform_failure(&s, &b, None, None)
            .unwrap()
            .contains("before any project code"));
    }

    #[test]
    fn activity_names_the_step() {
        let mut p = Parsed::default();
        p.line("@@PV L1.l1 boot uptime=1 nproc=2 kernel=7.3.4");
        p.line("@@PV L1.l1 step-begin l21 l2 290 g:1:4");
        assert_eq!(activity(&p), "l1: step l21 (l2)");
    }
}

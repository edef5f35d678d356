// SPDX-License-Identifier: GPL-2.0

//! Running one scenario: the initramfs, QEMU for L1 (which boots L2 itself),
//! its console (logged, parsed into [`crate::console::Parsed`] and watched by
//! [`crate::watchdog`], which has a silent L1 asked why through QMP), the
//! bounds, and the attempts until a verdict: each judged by
//! [`crate::judge`], told a platform failure by [`crate::platform`],
//! retried or deferred as [`crate::retry`] says.

use crate::console::{split_origin, Parsed};
use crate::initramfs;
use crate::judge::{judge, reasons, RunEnd};
use crate::platform::judge_platform;
use crate::qmp;
use crate::regs::Symbols;
use crate::report::{Attempt, Report, RunResult};
use crate::retry::{Next, Policy};
use crate::scenario::Scenario;
use crate::watchdog::{Stall, Watchdog, NMI_GRACE_SECS, STALL_SECS};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use pvlock_common::fmt::fmt_mmss;
use serde_json::json;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
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
    /// Where the static tools are ([`initramfs::STATIC_TOOLS`]).
    pub tools_bin: PathBuf,
    /// Cache of base initramfs images.
    pub cache: PathBuf,
    /// Results and console logs.
    pub out: PathBuf,
    pub qemu: String,
    /// Overrides the scenarios' retry counts (which are at most
    /// [`crate::scenario::MAX_RETRIES`]).
    pub retries: Option<u32>,
    /// No retry starts after this instant.
    pub retry_deadline: Option<Instant>,
    /// Attempts in a row before a scenario that keeps failing for platform
    /// reasons is deferred (see [`Report::deferred`]); `None`: never defer.
    pub attempts_per_round: Option<u32>,
    /// Echo the console.
    pub console: bool,
    /// Stop a run whose console says nothing but heartbeats for this many
    /// seconds (besides the watchdog's own bound on each kernel, see
    /// [`crate::watchdog`]); `None`: no such bound.
    pub console_silence: Option<u64>,
    /// Further files for the initramfs.
    pub extra: Vec<(PathBuf, String)>,
    /// Where `guest_pvlock/guest_pvlock.ko` and `host_kvm/host_kvm.ko`
    /// are, if not in the repository (modules built for another kernel
    /// tree, `make modules CONFIG=distro`).
    pub modules: Option<PathBuf>,
}

/// The release of the built kernel tree `kdir`.
pub fn kernel_release(kdir: &Path) -> Result<String> {
    let path = kdir.join("include/config/kernel.release");
    let text = std::fs::read_to_string(path).with_context(|| {
        format!(
            "{} is not a built kernel tree (run 'make kernel')",
            kdir.display()
        )
    })?;
    Ok(text.trim().to_string())
}

impl Config {
    /// Where the static tools are when `--tools-bin` does not say:
    /// `tools/`'s static release build in `repo`.
    pub fn default_tools_bin(repo: &Path) -> PathBuf {
        repo.join("tools/target/x86_64-unknown-linux-gnu/release")
    }

    /// The cache of initramfs images when `--cache` does not say:
    /// `$PVLOCK_CACHE/vmtest`, or `~/.cache/pvlock/vmtest`.
    pub fn default_cache() -> PathBuf {
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        std::env::var("PVLOCK_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|_| PathBuf::from(home).join(".cache/pvlock"))
            .join("vmtest")
    }

    pub fn bzimage(&self) -> PathBuf {
        self.kdir.join("arch/x86/boot/bzImage")
    }

    /// The initramfs inputs of a run whose scenario names `scenario_programs`
    /// (see [`crate::programs::scenario_files`]).
    fn inputs(&self, scenario_programs: &[String]) -> Result<initramfs::Inputs> {
        let release = kernel_release(&self.kdir)?;
        let ours = self.modules.as_ref().unwrap_or(&self.repo);
        let mut modules = vec![
            ours.join("guest_pvlock/guest_pvlock.ko"),
            ours.join("host_kvm/host_kvm.ko"),
            self.kdir.join("kernel/locking/locktorture.ko"),
            self.kdir.join("kernel/torture.ko"),
        ];
        modules.retain(|m| m.exists() || !m.starts_with(ours));
        // A kernel with KVM built as modules (a distribution's): L1's plan
        // loads them (irqbypass, kvm, kvm-amd) before host_kvm.
        for m in [
            "virt/lib/irqbypass.ko",
            "arch/x86/kvm/kvm.ko",
            "arch/x86/kvm/kvm-amd.ko",
            "arch/x86/kvm/kvm-intel.ko",
        ] {
            let path = self.kdir.join(m);
            if path.exists() {
                modules.push(path);
            }
        }
        for m in &modules {
            if !m.exists() {
                bail!(
                    "{} is missing (run 'make kernel' and 'make modules')",
                    m.display()
                );
            }
        }
        let mut programs = Vec::new();
        for p in initramfs::STATIC_TOOLS {
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
            extra: {
                // The command line's --extra first: a path in the image
                // that both name comes from there.
                let mut extra = self.extra.clone();
                crate::programs::add_files(
                    &mut extra,
                    crate::programs::scenario_files(scenario_programs)?,
                );
                extra
            },
        })
    }
}

/// Register samples of L1 ([`qmp::registers`]) into the log and the
/// parse, as `@@PV L0.vmtest regs l1 ...` lines: before the harness asks a
/// silent L1 by NMI, and before it stops an attempt that it will not let
/// run to its end, so that a stuck L1 says where it is stuck.
fn sample_l1(log: &mut std::fs::File, parsed: &mut Parsed, sock: &Path) -> Result<()> {
    let lines = match qmp::registers(sock) {
        Ok(lines) => lines
            .iter()
            .map(|l| format!("@@PV L0.vmtest regs l1 {l}"))
            .collect(),
        Err(e) => vec![format!("@@PV L0.vmtest regs-failed l1 {e:#}")],
    };
    for line in lines {
        writeln!(log, "{line}")?;
        parsed.line(&line);
    }
    Ok(())
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

/// What one attempt produced: its parse, how it ended, its console log.
struct AttemptRun {
    parsed: Parsed,
    end: RunEnd,
    wall: f64,
    log: PathBuf,
}

/// Seconds an attempt runs on after a kernel's first problem report: the
/// RCU stall report follows a CPU stuck on an IPI by about 16 s of guest
/// time, its NMI backtraces (or the CPUs that answer none) 10 s later, and
/// guest time runs slower than the wall clock under nested TCG.
const PROBLEM_GRACE_SECS: u64 = 90;

/// L1's QEMU for one attempt: the kernel and `initrd`, the kernel console
/// on stdio, L1's userspace on `out_sock` (its ttyS1), QMP on `qmp_sock`.
fn l1_command(
    cfg: &Config,
    s: &Scenario,
    kernel: &Path,
    initrd: &Path,
    out_sock: &Path,
    qmp_sock: &Path,
) -> Command {
    // No hard-lockup detector in L1 (nmi_watchdog=0): nested TCG can run
    // an L1 vCPU inside its L2 for over 10 s without delivering L1's
    // timer, and the buddy detector then reports a hard LOCKUP in an L1
    // with no project module loaded. L1 keeps the soft-lockup and RCU
    // stall detectors and the harness's NMI probe; L2s keep both lockup
    // detectors. L1's TSC is the host's, constant and the same on every
    // vCPU (tsc=reliable): the clocksource watchdog reads HPET through
    // emulated MMIO and can take TCG's delays for skew, marking the TSC
    // unstable mid-run and moving L1's clock and its guests' kvmclock.
    //
    // L1 runs its guests with the same QEMU as L0 (pv_qemu, a path in the
    // host's root, which L1 mounts): the project's, which knows pvlock.
    let cmdline = format!(
        "console=ttyS0 panic=-1 oops=panic quiet csdlock_debug=1 nmi_watchdog=0 tsc=reliable pv_level=1 pv_name=l1 pv_l2_affinity=1-{} pv_kernel={} pv_initrd={} pv_qemu={} {}",
        s.l1.cpus,
        kernel.display(),
        initrd.display(),
        qemu_path(&cfg.qemu).display(),
        s.l1.cmdline
    );
    // L1's CPU 0 runs no guest: L1 gets one CPU more than the scenario's,
    // and its guests (every L2's QEMU, the KVM selftest) run on CPUs 1 to
    // N (pv_l2_affinity, the guest library's guest_cpus). Under nested
    // TCG, L2 triple faults and corrupted vCPU state hit L2 vCPUs running
    // on L1's CPU 0 (every one traced, whatever the vCPU and scenario);
    // Documentation/pvlock/testing.rst has the failure rates before and
    // after. L1's CPU 0 is mostly idle (its init, the console relays), so
    // the host's two cores still run the guests' two.
    //
    // L1's userspace (its plan, and the consoles of its L2s that it
    // relays) writes to its second serial port, ttyS1, not to the kernel
    // console's: on one port they contend, and an L1 CPU can spin for good
    // with interrupts off in uart_write_room(), waiting for the console
    // port's nbcon ownership while the relay writes an L2's burst.
    let mut cmd = Command::new(&cfg.qemu);
    cmd.args(["-accel", &s.l1.accel(), "-cpu", "max"])
        .args(["-smp", &(s.l1.cpus + 1).to_string(), "-m", &s.l1.memory])
        .args(["-nographic", "-monitor", "none", "-no-reboot"])
        .args(["-serial", "stdio", "-chardev"])
        .arg(format!(
            "socket,id=userout,path={},server=on,wait=off",
            out_sock.display()
        ))
        .args(["-serial", "chardev:userout"])
        .arg("-qmp")
        .arg(format!("unix:{},server=on,wait=off", qmp_sock.display()))
        .arg("-kernel")
        .arg(kernel)
        .arg("-initrd")
        .arg(initrd)
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
    cmd
}

/// Reads L1's ttyS1 from `sock` into `tx`. QEMU listens on the socket
/// before the guest runs (output begins with L1's init, seconds later):
/// connects within 10 s, or kills QEMU and fails.
fn read_ttys1(
    child: &mut Child,
    sock: &Path,
    tx: mpsc::Sender<Line>,
) -> Result<std::thread::JoinHandle<()>> {
    let connect_by = Instant::now() + Duration::from_secs(10);
    loop {
        match std::os::unix::net::UnixStream::connect(sock) {
            Ok(stream) => return Ok(spawn_reader(stream, tx, false)),
            Err(_) if Instant::now() < connect_by && child.try_wait()?.is_none() => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                kill_group(child);
                return Err(e).with_context(|| {
                    format!("cannot connect to L1's ttyS1 at {}", sock.display())
                });
            }
        }
    }
}

/// The spinner of an attempt on a terminal (none with `--console`, whose
/// lines would break it).
fn progress_bar(cfg: &Config, s: &Scenario, attempt: u32) -> Result<Option<ProgressBar>> {
    if !std::io::stderr().is_terminal() || cfg.console {
        return Ok(None);
    }
    let pb = ProgressBar::new_spinner();
    pb.set_style(ProgressStyle::with_template(
        "{spinner} {prefix} {elapsed_precise} {wide_msg}",
    )?);
    pb.set_prefix(format!("{} #{attempt}", s.name));
    pb.enable_steady_tick(Duration::from_millis(200));
    Ok(Some(pb))
}

/// What the supervision of an attempt does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// Read the console.
    Read,
    /// Look at the bounds again before reading (an NMI was just asked).
    Again,
    /// Stop QEMU: the attempt is over.
    Stop,
}

/// An attempt while L1's QEMU runs: its console log and parse, its
/// watchdog, and how it ended so far.
struct Supervisor<'a> {
    cfg: &'a Config,
    s: &'a Scenario,
    qmp_sock: &'a Path,
    log: std::fs::File,
    parsed: Parsed,
    watchdog: Watchdog,
    start: Instant,
    end: RunEnd,
    /// When a kernel first reported a problem: the attempt has failed (a
    /// kernel problem fails it unless the scenario allows them), so it
    /// stops once the reports had time to complete (NMI backtraces, the
    /// CPUs that answered none), instead of running into its step
    /// timeouts.
    first_problem: Option<Instant>,
}

impl Supervisor<'_> {
    /// Register samples of L1 into the log and the parse.
    fn sample_l1(&mut self) -> Result<()> {
        sample_l1(&mut self.log, &mut self.parsed, self.qmp_sock)
    }

    /// The attempt's bound: past it, L1 is sampled and the run stopped.
    fn past_deadline(&mut self) -> Result<Flow> {
        if self.start.elapsed() < Duration::from_secs(self.s.timeout) {
            return Ok(Flow::Read);
        }
        self.end.timed_out = true;
        writeln!(
            self.log,
            "# vmtest: the run did not finish within {} s: stopped",
            self.s.timeout
        )?;
        self.sample_l1()?;
        Ok(Flow::Stop)
    }

    /// What the watchdog says of the kernels' silence: stop, or ask a
    /// silent kernel why (its registers, then an NMI through QMP).
    fn watch(&mut self) -> Result<Flow> {
        let parsed = &self.parsed;
        let finished = |name: &str| {
            parsed
                .nodes
                .get(name)
                .is_some_and(|n| n.done || n.exit_rc.is_some())
        };
        match self.watchdog.stall(Instant::now(), finished) {
            None => Ok(Flow::Read),
            Some(Stall::Heartbeat(name)) => {
                writeln!(
                    self.log,
                    "# vmtest: nothing from {name} for {STALL_SECS} s or more (heartbeat included), its NMI probe over: stalled, stopped"
                )?;
                self.end.stalled = Some(name);
                Ok(Flow::Stop)
            }
            Some(Stall::Console(secs)) => {
                writeln!(
                    self.log,
                    "# vmtest: no console output for {secs} s: stalled, stopped"
                )?;
                self.end.console_silent = Some(secs);
                Ok(Flow::Stop)
            }
            Some(Stall::Probe(name)) => {
                // Where its vCPUs are first (registers need nothing of the
                // kernel), then an NMI, which ends its halts and lock
                // waits, and each CPU that takes it says so.
                self.sample_l1()?;
                let now = Instant::now();
                let line = match qmp::inject_nmi(self.qmp_sock) {
                    Ok(()) => {
                        self.watchdog.nmi_injected(&name, now);
                        writeln!(
                            self.log,
                            "# vmtest: nothing from {name} for {STALL_SECS} s: an NMI to every vCPU through QMP, {NMI_GRACE_SECS} s to answer"
                        )?;
                        format!("@@PV L0.vmtest nmi-injected {name}")
                    }
                    Err(e) => {
                        self.watchdog.nmi_failed(&name, now);
                        format!("@@PV L0.vmtest nmi-failed {name} {e:#}")
                    }
                };
                writeln!(self.log, "{line}")?;
                if self.cfg.console {
                    eprintln!("{line}");
                }
                self.parsed.line(&line);
                Ok(Flow::Again)
            }
        }
    }

    /// A line from QEMU: logged and parsed (heartbeats only fed to the
    /// watchdog). Whether it was a heartbeat.
    fn take(&mut self, line: Line) -> Result<bool> {
        match line {
            Line::Out(l) => {
                let (origin, text) = split_origin(&l);
                if self.watchdog.console_line(origin, text, Instant::now()) {
                    self.parsed.heartbeat(origin);
                    return Ok(true);
                }
                writeln!(self.log, "{l}")?;
                if self.cfg.console {
                    eprintln!("{l}");
                }
                self.parsed.wall = self.start.elapsed().as_secs_f64();
                self.parsed.line(&l);
            }
            Line::Err(l) => {
                self.watchdog.other_output(Instant::now());
                writeln!(self.log, "[qemu stderr] {l}")?;
                eprintln!("[qemu stderr] {l}");
                self.parsed.line(&format!("[qemu] {l}"));
            }
        }
        Ok(false)
    }

    /// Stops the attempt [`PROBLEM_GRACE_SECS`] after a kernel's first
    /// problem that the scenario does not allow.
    fn after_problem(&mut self) -> Result<Flow> {
        let s = self.s;
        let any = self
            .parsed
            .nodes
            .iter()
            .any(|(name, n)| !n.problems.is_empty() && !s.allows_problems_of(name));
        match self.first_problem {
            None if any => self.first_problem = Some(Instant::now()),
            Some(t) if t.elapsed() >= Duration::from_secs(PROBLEM_GRACE_SECS) => {
                writeln!(
                    self.log,
                    "# vmtest: a kernel problem {PROBLEM_GRACE_SECS} s ago fails this attempt: stopped"
                )?;
                self.sample_l1()?;
                self.end.problem_stop = true;
                return Ok(Flow::Stop);
            }
            _ => {}
        }
        Ok(Flow::Read)
    }
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
    // The harness asks a silent L1 why through QMP (an NMI to every vCPU).
    let qmp_sock = qmp::socket_path(&dir);
    let _ = std::fs::remove_file(&qmp_sock);
    let out_sock = qmp::unix_socket_path(&dir, "ttyS1");
    let _ = std::fs::remove_file(&out_sock);
    let mut cmd = l1_command(cfg, s, &kernel, &initrd, &out_sock, &qmp_sock);
    writeln!(log, "# {:?}", cmd)?;
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {} (run 'make deps')", cfg.qemu))?;
    let (tx, rx) = mpsc::channel();
    let readers = [
        spawn_reader(child.stdout.take().expect("piped"), tx.clone(), false),
        spawn_reader(child.stderr.take().expect("piped"), tx.clone(), true),
        read_ttys1(&mut child, &out_sock, tx)?,
    ];
    let pb = progress_bar(cfg, s, attempt)?;
    let start = Instant::now();
    let mut sv = Supervisor {
        cfg,
        s,
        qmp_sock: &qmp_sock,
        log,
        parsed: Parsed {
            symbols: Symbols::load(&cfg.kdir).map(Arc::new),
            ..Default::default()
        },
        watchdog: Watchdog::new(start, cfg.console_silence),
        start,
        end: RunEnd::default(),
        first_problem: None,
    };
    let mut last_activity = String::new();
    // Whether the harness ends the attempt (else QEMU ended, closing its
    // output).
    let stop = loop {
        if INTERRUPTED.load(Ordering::Relaxed) {
            kill_group(&mut child);
            if let Some(pb) = &pb {
                pb.finish_and_clear();
            }
            bail!("interrupted");
        }
        if sv.past_deadline()? == Flow::Stop {
            break true;
        }
        match sv.watch()? {
            Flow::Read => {}
            Flow::Again => continue,
            Flow::Stop => break true,
        }
        match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(line) => {
                if sv.take(line)? {
                    continue;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break false,
        }
        if sv.after_problem()? == Flow::Stop {
            break true;
        }
        let act = activity(&sv.parsed);
        if act != last_activity {
            let line = format!("{} {}", fmt_mmss(start.elapsed().as_secs_f64()), act);
            match &pb {
                Some(pb) => pb.set_message(act.clone()),
                None if !cfg.console => eprintln!("  {} #{attempt} {line}", s.name),
                None => {}
            }
            last_activity = act;
        }
    };
    if stop {
        kill_group(&mut child);
    }
    for r in readers {
        let _ = r.join();
    }
    let _ = std::fs::remove_file(&out_sock);
    if let Some(pb) = pb {
        pb.finish_and_clear();
    }
    let Supervisor {
        mut log,
        parsed,
        mut end,
        ..
    } = sv;
    end.qemu_status = child.wait().ok().and_then(|s| s.code());
    writeln!(
        log,
        "# qemu exit status {:?}, {:.1} s",
        end.qemu_status,
        start.elapsed().as_secs_f64()
    )?;
    let _ = std::fs::remove_file(&qmp_sock);
    Ok(AttemptRun {
        parsed,
        end,
        wall: start.elapsed().as_secs_f64(),
        log: log_path,
    })
}

/// Judges a console log of `s` written by [`run_once`] again, with the
/// symbols of `kdir`: its failures, its platform events and the failures
/// none explains, for people.
pub fn rejudge(s: &Scenario, log: &Path, kdir: &Path) -> Result<String> {
    let text =
        std::fs::read_to_string(log).with_context(|| format!("cannot read {}", log.display()))?;
    let mut parsed = Parsed {
        symbols: Symbols::load(kdir).map(Arc::new),
        ..Default::default()
    };
    let mut end = RunEnd::default();
    for l in text.lines() {
        if let Some(c) = l.strip_prefix("# ") {
            if let Some(rest) = c.strip_prefix("vmtest: nothing from ") {
                end.stalled = rest.split_whitespace().next().map(String::from);
            } else if let Some(st) = c.strip_prefix("qemu exit status Some(") {
                end.qemu_status = st.split(')').next().and_then(|v| v.parse().ok());
            } else if c.contains("did not finish within") {
                end.timed_out = true;
            } else if c.contains("fails this attempt: stopped") {
                end.problem_stop = true;
            }
            continue;
        }
        parsed.line(
            l.strip_prefix("[qemu stderr] ")
                .map_or(l.to_string(), |e| format!("[qemu] {e}"))
                .as_str(),
        );
    }
    let result = json!({ "nodes": serde_json::to_value(&parsed.nodes)? });
    let failures = judge(s, &parsed, &result, &end);
    let j = judge_platform(s, &parsed, &failures, &end);
    let mut out = String::new();
    let list = |title: &str, items: Vec<String>, out: &mut String| {
        out.push_str(&format!("{title}:\n"));
        if items.is_empty() {
            out.push_str("  (none)\n");
        }
        for i in items {
            out.push_str(&format!("  - {i}\n"));
        }
    };
    list("failures", reasons(&failures), &mut out);
    list(
        "platform events",
        j.events
            .iter()
            .map(|e| format!("{} [{}]", e.why, e.signature.name()))
            .collect(),
        &mut out,
    );
    list("not explained by them", j.unexplained.clone(), &mut out);
    out.push_str(&format!(
        "verdict: {}\n",
        if failures.is_empty() {
            "pass"
        } else if j.platform() {
            "platform"
        } else {
            "real"
        }
    ));
    Ok(out)
}

/// The outcome of attempt number `attempt`, `r`, judged: `reasons` its
/// failures, `judgement` what the platform explains of them.
fn attempt_of(
    attempt: u32,
    r: &AttemptRun,
    reasons: &[String],
    judgement: &crate::platform::Judgement,
) -> Attempt {
    let platform = judgement.platform().then(|| judgement.why());
    let signatures: Vec<String> = judgement
        .signatures()
        .into_iter()
        .map(String::from)
        .collect();
    let mut a = Attempt {
        attempt,
        reasons: reasons.to_vec(),
        platform_failure: platform.clone(),
        wall_secs: r.wall,
        console_log: r.log.clone(),
        ..Default::default()
    };
    if platform.is_some() {
        a.platform_signatures = signatures;
    } else {
        // Platform events that came with failures of their own.
        a.overruled = judgement.events.iter().map(|e| e.why.clone()).collect();
        a.overruled_signatures = signatures;
    }
    a
}

/// Per kernel, its last console lines; per kernel with a problem, its
/// first report, condensed: what a failure's summary shows.
type Tails = Vec<(String, Vec<String>)>;

fn tails_and_reports(parsed: &Parsed) -> (Tails, Tails) {
    let tails = parsed
        .nodes
        .iter()
        .map(|(n, node)| (n.clone(), node.tail.clone()))
        .collect();
    let first_reports = parsed
        .nodes
        .iter()
        .filter(|(_, node)| !node.first_report.is_empty())
        .map(|(n, node)| {
            (
                n.clone(),
                crate::console::condensed_report(&node.first_report),
            )
        })
        .collect();
    (tails, first_reports)
}

/// Runs `s`, with retries for platform failures; writes
/// `<out>/<scenario>.json`. `earlier` holds the attempts of the rounds
/// before (empty on the first run of `s`); their retries count.
pub fn run(cfg: &Config, s: &Scenario, earlier: Vec<Attempt>) -> Result<Report> {
    let base = initramfs::base(&cfg.inputs(&s.programs)?, &cfg.cache)?;
    let policy = Policy {
        retries: cfg.retries.unwrap_or(s.retries()),
        deadline: cfg.retry_deadline,
        attempts_per_round: cfg.attempts_per_round,
    };
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
        let result = RunResult {
            scenario: s.name.clone(),
            wall_secs: r.wall,
            timed_out: r.end.timed_out,
            stalled: r.end.stalled.clone(),
            qemu_status: r.end.qemu_status,
            nodes: r.parsed.nodes.clone(),
        };
        let end = &r.end;
        let failures = judge(s, &r.parsed, &serde_json::to_value(&result)?, end);
        let reasons = reasons(&failures);
        let judgement = judge_platform(s, &r.parsed, &failures, end);
        let a = attempt_of(attempt, &r, &reasons, &judgement);
        let platform = a.platform_failure.clone();
        attempts.push(a);
        // A scenario that must fail passes only when the failure it wants
        // shows in an attempt that is not the platform's: it is retried
        // while it did not.
        let wanted_shown = platform.is_none()
            && want
                .as_ref()
                .is_some_and(|re| reasons.iter().any(|r| re.is_match(r)));
        let next = policy.next(
            platform.is_some(),
            wanted_shown,
            attempt,
            this_round,
            Instant::now(),
        );
        match (&platform, next) {
            (Some(why), Next::Retry | Next::Defer) => {
                eprintln!(
                    "{} {} (attempt {attempt} of {}): {why}; console in {}",
                    if next == Next::Defer {
                        "DEFER"
                    } else {
                        "RETRY"
                    },
                    s.name,
                    policy.retries + 1,
                    r.log.display()
                );
                if next == Next::Retry {
                    continue;
                }
            }
            (_, Next::BudgetSpent) => {
                eprintln!("NO RETRY {}: the retry budget is spent", s.name);
            }
            _ => {}
        }
        let passed = match &want {
            None => reasons.is_empty(),
            Some(_) => wanted_shown,
        };
        let (tails, first_reports) = tails_and_reports(&r.parsed);
        let report = Report {
            scenario: s.name.clone(),
            description: s.description.clone(),
            passed,
            reasons,
            attempts,
            wall_secs: earlier_secs + started.elapsed().as_secs_f64(),
            result,
            deferred: next == Next::Defer,
            console_silent: r.end.console_silent,
            tails,
            first_reports,
        };
        std::fs::write(
            cfg.out.join(format!("{}.json", s.name)),
            serde_json::to_string_pretty(&report)?,
        )?;
        return Ok(report);
    }
}

/// `qemu` as an absolute path: as given if it names a file, else the first
/// match in `PATH` (L1 runs it from the host's root, without our `PATH`).
fn qemu_path(qemu: &str) -> PathBuf {
    let p = Path::new(qemu);
    if qemu.contains('/') {
        return p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    }
    crate::programs::which(qemu).unwrap_or_else(|| p.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activity_names_the_step() {
        let mut p = Parsed::default();
        p.line("@@PV L1.l1 boot uptime=1 nproc=2 kernel=7.3.4");
        p.line("@@PV L1.l1 step-begin l21 l2 290 g:1:4");
        assert_eq!(activity(&p), "l1: step l21 (l2)");
    }
}

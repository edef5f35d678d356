// SPDX-License-Identifier: GPL-2.0

//! A test VM: one memory slot, an in-kernel irqchip and two vCPUs, each on
//! its own thread, driven from the test's thread through channels.
//!
//! vCPU 0 (APIC ID 0) is the kicker, vCPU 1 (APIC ID 1) the target; see
//! [`crate::guest`]. Each vCPU thread calls `KVM_RUN` in a loop and sends
//! every `out` to the test as an [`Event`] stamped with the time `KVM_RUN`
//! returned. After an `out` to [`guest::PORT_RESULT`] it stops until the
//! test calls [`VcpuThread::resume`]; other exits are passed on without
//! stopping. A stopped vCPU thread runs ioctls on its vCPU for the test
//! ([`VcpuThread::call`]); [`VcpuThread::pause`] stops a running one (a
//! signal makes `KVM_RUN` return `EINTR`, which leaves a halted vCPU
//! halted). Every wait of the test has a timeout, so a vCPU that never
//! comes back fails the case instead of hanging it.
//!
//! Teardown ([`Drop`]) stops the threads: it sets their stop flag and
//! signals them until they leave `KVM_RUN`; the VM is closed when the last
//! of its file descriptors is.

use crate::kvmstats::{Stats, StatsFd};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use kvm_bindings::{
    kvm_cpuid_entry2, kvm_enable_cap, kvm_mp_state, kvm_userspace_memory_region, CpuId,
    KVM_CAP_ENFORCE_PV_FEATURE_CPUID, KVM_CAP_X86_DISABLE_EXITS, KVM_MP_STATE_RUNNABLE,
};
use kvm_ioctls::{Kvm, VcpuExit, VcpuFd, VmFd};
use vmm_sys_util::signal::{register_signal_handler, Killable, SIGRTMIN};

use crate::guest::{self, GuestMem};
use crate::stats::{decode, describe, describe_wait};
use pvlock_common::abi;

/// The signal that interrupts `KVM_RUN` to pause a vCPU or at teardown.
fn stop_signal() -> libc::c_int {
    SIGRTMIN()
}

extern "C" fn on_stop_signal(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {}

/// Installs the (empty) handler of the stop signal, without `SA_RESTART`,
/// so that the signal makes `KVM_RUN` return `EINTR`. Call once, before
/// any VM.
pub fn install_signal_handler() -> Result<()> {
    register_signal_handler(stop_signal(), on_stop_signal).map_err(|e| {
        anyhow!(
            "cannot install the handler of signal {}: {e}",
            stop_signal()
        )
    })
}

/// KVM's CPUID leaves for hypervisor signature and features.
pub const KVM_CPUID_SIGNATURE: u32 = 0x4000_0000;
pub const KVM_CPUID_FEATURES: u32 = 0x4000_0001;

/// The CPUID entry for `function`/`index`.
pub fn cpuid_leaf(cpuid: &CpuId, function: u32, index: u32) -> Option<&kvm_cpuid_entry2> {
    cpuid
        .as_slice()
        .iter()
        .find(|e| e.function == function && e.index == index)
}

/// The CPU vendor string in leaf 0.
pub fn vendor(cpuid: &CpuId) -> String {
    let Some(e) = cpuid_leaf(cpuid, 0, 0) else {
        return String::new();
    };
    let bytes: Vec<u8> = [e.ebx, e.edx, e.ecx]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Whether the vendor's CPUs make hypercalls with `vmcall` (VMX) rather
/// than `vmmcall` (SVM).
pub fn vendor_uses_vmcall(vendor: &str) -> bool {
    matches!(vendor, "GenuineIntel" | "CentaurHauls" | "  Shanghai  ")
}

/// The CPUID a VMM gives its guest: what KVM supports, the KVM signature
/// leaf, the features leaf with `KVM_FEATURE_PV_UNHALT` (for upstream's
/// `KVM_HC_KICK_CPU`), and `KVM_FEATURE_PVLOCK_KICK` only if `pvlock` (a
/// VMM that enables pvlock sets it; one that does not know pvlock does
/// not).
pub fn guest_cpuid(supported: &CpuId, pvlock: bool) -> Result<CpuId> {
    let features = cpuid_leaf(supported, KVM_CPUID_FEATURES, 0).map_or(0, |e| e.eax);
    let mut entries: Vec<kvm_cpuid_entry2> = supported
        .as_slice()
        .iter()
        .filter(|e| e.function != KVM_CPUID_SIGNATURE && e.function != KVM_CPUID_FEATURES)
        .copied()
        .collect();
    let sig = *b"KVMKVMKVM\0\0\0";
    let word = |i: usize| u32::from_le_bytes([sig[i], sig[i + 1], sig[i + 2], sig[i + 3]]);
    entries.push(kvm_cpuid_entry2 {
        function: KVM_CPUID_SIGNATURE,
        eax: KVM_CPUID_FEATURES,
        ebx: word(0),
        ecx: word(4),
        edx: word(8),
        ..Default::default()
    });
    let bit = 1 << abi::KVM_FEATURE_PVLOCK_KICK;
    let eax = (features | 1 << abi::KVM_FEATURE_PV_UNHALT) & !bit;
    entries.push(kvm_cpuid_entry2 {
        function: KVM_CPUID_FEATURES,
        eax: if pvlock { eax | bit } else { eax },
        ..Default::default()
    });
    CpuId::from_entries(&entries).map_err(|e| anyhow!("cannot build the guest CPUID: {e:?}"))
}

/// `KVM_ENABLE_CAP(KVM_CAP_PVLOCK_KICK)` arguments.
pub fn pvlock_cap(args: [u64; 4]) -> kvm_enable_cap {
    kvm_enable_cap {
        cap: abi::KVM_CAP_PVLOCK_KICK,
        flags: 0,
        args,
        ..Default::default()
    }
}

/// `KVM_ENABLE_CAP(KVM_CAP_X86_DISABLE_EXITS)` arguments.
pub fn disable_exits_cap(exits: u32) -> kvm_enable_cap {
    let mut cap = kvm_enable_cap {
        cap: KVM_CAP_X86_DISABLE_EXITS,
        ..Default::default()
    };
    cap.args[0] = u64::from(exits);
    cap
}

/// `KVM_ENABLE_CAP(KVM_CAP_ENFORCE_PV_FEATURE_CPUID)` on a vCPU.
pub fn enforce_pv_cpuid_cap() -> kvm_enable_cap {
    let mut cap = kvm_enable_cap {
        cap: KVM_CAP_ENFORCE_PV_FEATURE_CPUID,
        ..Default::default()
    };
    cap.args[0] = 1;
    cap
}

/// What the VMM sets up before the vCPUs run.
#[derive(Clone, Copy)]
pub struct VmConfig<'a> {
    /// `KVM_SET_CPUID2` on both vCPUs.
    pub cpuid: &'a CpuId,
    /// `KVM_CAP_ENFORCE_PV_FEATURE_CPUID` on both vCPUs.
    pub enforce_pv_cpuid: bool,
    /// `KVM_CAP_X86_DISABLE_EXITS` args\[0\] before the vCPUs exist (0:
    /// none).
    pub disable_exits: u32,
}

/// An `out` of a guest.
#[derive(Debug, Clone, Copy)]
pub struct Event {
    pub port: u16,
    pub value: u32,
    /// When `KVM_RUN` returned with it.
    pub at: Instant,
}

impl Event {
    pub fn name(&self) -> String {
        guest::event_name(self.port, self.value)
    }

    fn is(&self, port: u16, value: u32) -> bool {
        self.port == port && self.value == value
    }
}

/// What a vCPU thread reports.
enum Report {
    Out(Event),
    /// Stopped at [`VcpuThread::pause`]'s request.
    Paused,
    /// The vCPU stopped for good: an unexpected exit or error.
    Failed(String),
}

/// Work for a stopped vCPU thread.
type VcpuCall = Box<dyn FnOnce(&mut VcpuFd) + Send>;

/// What the test tells a stopped vCPU thread.
enum Cmd {
    /// Run the vCPU (again).
    Run,
    /// Run this on the vCPU fd, and stay stopped.
    Call(VcpuCall),
}

/// A vCPU running `KVM_RUN` in a loop on its own thread.
pub struct VcpuThread {
    name: &'static str,
    events: Receiver<Report>,
    /// Events that came while [`pause`](Self::pause) waited.
    backlog: RefCell<VecDeque<Event>>,
    cmds: Option<Sender<Cmd>>,
    stop: Arc<AtomicBool>,
    pause: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl VcpuThread {
    /// Starts the thread; the vCPU runs at the first [`resume`](Self::resume).
    fn spawn(name: &'static str, vcpu: VcpuFd) -> Result<Self> {
        let (events_tx, events) = mpsc::channel();
        let (cmds, cmds_rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let pause = Arc::new(AtomicBool::new(false));
        let (stop2, pause2) = (Arc::clone(&stop), Arc::clone(&pause));
        let handle = thread::Builder::new()
            .name(format!("vcpu-{name}"))
            .spawn(move || vcpu_loop(vcpu, &events_tx, &cmds_rx, &stop2, &pause2))
            .with_context(|| format!("cannot start the {name} vCPU thread"))?;
        Ok(VcpuThread {
            name,
            events,
            backlog: RefCell::new(VecDeque::new()),
            cmds: Some(cmds),
            stop,
            pause,
            handle: Some(handle),
        })
    }

    fn send(&self, cmd: Cmd) -> Result<()> {
        self.cmds
            .as_ref()
            .and_then(|c| c.send(cmd).ok())
            .ok_or_else(|| anyhow!("the {} vCPU thread is gone", self.name))
    }

    /// Lets the stopped vCPU run (again) until its next gated exit.
    pub fn resume(&self) -> Result<()> {
        self.send(Cmd::Run)
    }

    /// Runs `f` on the vCPU fd in the vCPU's thread, which must be stopped
    /// (before its first run, at a gated exit, or paused), and returns its
    /// result.
    pub fn call<R: Send + 'static>(
        &self,
        timeout: Duration,
        f: impl FnOnce(&mut VcpuFd) -> R + Send + 'static,
    ) -> Result<R> {
        let (tx, rx) = mpsc::channel();
        self.send(Cmd::Call(Box::new(move |vcpu| {
            let _ = tx.send(f(vcpu));
        })))?;
        rx.recv_timeout(timeout).map_err(|_| {
            anyhow!(
                "the {} vCPU thread did not run an ioctl within {} ms (not stopped?)",
                self.name,
                timeout.as_millis()
            )
        })
    }

    /// Stops the running vCPU: interrupts `KVM_RUN` until its thread
    /// reports that it stopped. Events that come meanwhile are kept for
    /// [`wait`](Self::wait). A vCPU that reaches a gated exit meanwhile
    /// counts as stopped there.
    pub fn pause(&self, timeout: Duration) -> Result<()> {
        self.pause.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + timeout;
        let r = loop {
            if let Some(h) = &self.handle {
                let _ = h.kill(stop_signal());
            }
            match self.events.recv_timeout(Duration::from_millis(2)) {
                Ok(Report::Paused) => break Ok(()),
                Ok(Report::Out(ev)) => {
                    self.backlog.borrow_mut().push_back(ev);
                    if ev.port == guest::PORT_RESULT {
                        break Ok(());
                    }
                }
                Ok(Report::Failed(why)) => break Err(anyhow!("{} vCPU: {why}", self.name)),
                Err(RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                Err(RecvTimeoutError::Timeout) => {
                    break Err(anyhow!(
                        "{} vCPU: did not stop within {} ms",
                        self.name,
                        timeout.as_millis()
                    ))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    break Err(anyhow!("the {} vCPU thread ended", self.name))
                }
            }
        };
        // Stopped (or failed): nobody waits for Paused any more.
        self.pause.store(false, Ordering::SeqCst);
        r
    }

    /// Events that came while the vCPU was being paused.
    pub fn backlog(&self) -> Vec<Event> {
        self.backlog.borrow().iter().copied().collect()
    }

    /// The next event, or `None` after `timeout`.
    pub fn wait(&self, timeout: Duration) -> Result<Option<Event>> {
        if let Some(ev) = self.backlog.borrow_mut().pop_front() {
            return Ok(Some(ev));
        }
        match self.events.recv_timeout(timeout) {
            Ok(Report::Out(ev)) => Ok(Some(ev)),
            Ok(Report::Paused) => bail!("{} vCPU: paused unasked", self.name),
            Ok(Report::Failed(why)) => bail!("{} vCPU: {why}", self.name),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => bail!("the {} vCPU thread ended", self.name),
        }
    }

    /// The next event, which must be `value` on `port`, within `timeout`.
    pub fn expect(&self, port: u16, value: u32, timeout: Duration) -> Result<Event> {
        let want = guest::event_name(port, value);
        match self.wait(timeout)? {
            Some(ev) if ev.is(port, value) => Ok(ev),
            Some(ev) => bail!("{} vCPU: {} instead of {want}", self.name, ev.name()),
            None => bail!(
                "{} vCPU: no {want} within {} ms",
                self.name,
                timeout.as_millis()
            ),
        }
    }

    /// Fails if the vCPU reports anything within `quiet`.
    pub fn expect_quiet(&self, quiet: Duration, why: &str) -> Result<()> {
        match self.wait(quiet)? {
            None => Ok(()),
            Some(ev) => bail!(
                "{} vCPU: {} within {} ms {why}",
                self.name,
                ev.name(),
                quiet.as_millis()
            ),
        }
    }

    /// Stops the thread; true if it ended.
    fn stop(&mut self) -> bool {
        self.stop.store(true, Ordering::SeqCst);
        // A stopped thread sees the channel closed.
        self.cmds = None;
        let Some(handle) = self.handle.take() else {
            return true;
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while !handle.is_finished() && Instant::now() < deadline {
            // Interrupts KVM_RUN (EINTR); the loop then sees the flag.
            let _ = handle.kill(stop_signal());
            thread::sleep(Duration::from_millis(2));
        }
        if handle.is_finished() {
            let _ = handle.join();
            true
        } else {
            eprintln!(
                "pvlock-kvmtest: the {} vCPU thread does not stop; leaving it",
                self.name
            );
            false
        }
    }
}

/// Serves the test while the vCPU is stopped: false if the test is gone.
fn serve(vcpu: &mut VcpuFd, cmds: &Receiver<Cmd>) -> bool {
    loop {
        match cmds.recv() {
            Ok(Cmd::Run) => return true,
            Ok(Cmd::Call(f)) => f(vcpu),
            Err(_) => return false,
        }
    }
}

/// The body of a vCPU thread.
fn vcpu_loop(
    mut vcpu: VcpuFd,
    events: &Sender<Report>,
    cmds: &Receiver<Cmd>,
    stop: &AtomicBool,
    pause: &AtomicBool,
) {
    if !serve(&mut vcpu, cmds) {
        return;
    }
    while !stop.load(Ordering::SeqCst) {
        // Checked before every KVM_RUN: a pause signal that came between
        // two runs is not lost.
        if pause.swap(false, Ordering::SeqCst) {
            if events.send(Report::Paused).is_err() || !serve(&mut vcpu, cmds) {
                return;
            }
            continue;
        }
        let exit = vcpu.run();
        let at = Instant::now();
        let out = match exit {
            Ok(VcpuExit::IoOut(port, data)) => {
                let mut w = [0u8; 4];
                let n = data.len().min(4);
                w[..n].copy_from_slice(&data[..n]);
                Ok((port, u32::from_le_bytes(w)))
            }
            Ok(VcpuExit::Intr) => continue,
            Ok(VcpuExit::Hlt) => Err(
                "KVM_EXIT_HLT: the halt was not handled in the kernel (no in-kernel irqchip?)"
                    .to_string(),
            ),
            Ok(other) => Err(format!("unexpected exit {other:?}")),
            Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => continue,
            Err(e) => Err(format!("KVM_RUN failed: {e}")),
        };
        match out {
            Ok((port, value)) => {
                if events.send(Report::Out(Event { port, value, at })).is_err() {
                    return;
                }
                if port == guest::PORT_RESULT && !serve(&mut vcpu, cmds) {
                    return;
                }
            }
            Err(why) => {
                let regs = vcpu
                    .get_regs()
                    .map(|r| format!(" (rip {:#x} rax {:#x})", r.rip, r.rax))
                    .unwrap_or_default();
                let _ = events.send(Report::Failed(format!("{why}{regs}")));
                return;
            }
        }
    }
}

/// The result of a hypercall (or CPUID) by the kicker.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    /// EAX, as the guest sees it.
    pub eax: u32,
    /// When the kicker's `KVM_RUN` returned with it.
    pub at: Instant,
}

impl Call {
    /// The result, sign-extended from 32 bits.
    pub fn ret(&self) -> i64 {
        decode(self.eax)
    }
}

/// The result of a hypercall loop by the kicker.
#[derive(Debug, Clone, Copy)]
pub struct Loop {
    /// EAX of the last hypercall.
    pub eax: u32,
    /// Repetitions left when the loop stopped (0: all made).
    pub left: u32,
    pub started: Instant,
    pub at: Instant,
}

/// What the target does after spinning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rest {
    /// A plain `hlt` (interrupts disabled).
    Hlt,
    /// `KVM_HC_PVLOCK_WAIT` with a0 = `flags`, a1 = `token`.
    Wait { flags: u32, token: u32 },
}

impl Rest {
    /// A valid lock wait with `token`.
    pub fn wait(token: u32) -> Rest {
        Rest::Wait { flags: 0, token }
    }

    /// The target's event before it waits or halts.
    fn event(self) -> u32 {
        match self {
            Rest::Hlt => guest::EV_HALTING,
            Rest::Wait { .. } => guest::EV_WAITING,
        }
    }
}

/// A kick that ended the target's lock wait.
#[derive(Debug, Clone, Copy)]
pub struct Woken {
    /// The kick that returned `KVM_PVLOCK_KICK_WOKEN`.
    pub kick: Call,
    /// Rounds whose kick came before the target's wait (`HELD`, and the
    /// wait returned at once) before this one.
    pub retries: u32,
}

/// How often [`TestVm::kick_wait`] starts over before giving up.
const MAX_KICK_RETRIES: u32 = 30;
/// How long [`TestVm::kick_wait`] first lets the target get into its wait.
const FIRST_SETTLE: Duration = Duration::from_millis(1);
/// The most it lets it, after kicks that came too early.
const MAX_SETTLE: Duration = Duration::from_millis(200);
/// The first token of a target.
const FIRST_TOKEN: u32 = 0x10;
/// The value of [`guest::TGT_RET`] before a wait writes it.
const NO_RET: u32 = 0xdead_beef;

/// A VM with the kicker and the target.
pub struct TestVm {
    // Fields drop in this order: the vCPU threads (and their fds) first,
    // then the VM fd, then the memory the VM maps.
    kicker: VcpuThread,
    target: VcpuThread,
    /// KVM's binary statistics of the kicker and of the target.
    stats: [StatsFd; 2],
    vm: VmFd,
    mem: Option<GuestMem>,
    target_started: Cell<bool>,
    /// What the target does in its round in progress.
    rest: Cell<Rest>,
    /// The target's next lock-wait token: tokens only grow.
    next_token: Cell<u32>,
    /// How long [`kick_wait`](Self::kick_wait) sleeps before kicking.
    settle: Cell<Duration>,
    /// Timeout of each wait for a guest.
    pub timeout: Duration,
}

impl TestVm {
    /// Creates the VM; the vCPUs run only when the test lets them.
    ///
    /// Both vCPUs are made runnable with `KVM_SET_MP_STATE`, which also
    /// arms a kick for each vCPU's next lock wait: the target's first wait
    /// returns at once ([`prime_target`](Self::prime_target)).
    pub fn new(kvm: &Kvm, cfg: &VmConfig, vmx: bool, timeout: Duration) -> Result<Self> {
        let vm = kvm.create_vm().context("KVM_CREATE_VM")?;
        let mem = GuestMem::new();
        let region = kvm_userspace_memory_region {
            slot: 0,
            flags: 0,
            guest_phys_addr: 0,
            memory_size: guest::MEM_SIZE as u64,
            userspace_addr: mem.host_addr(),
        };
        // SAFETY: The region is `mem`, MEM_SIZE bytes of page-aligned memory
        // that this TestVm owns and frees only after the VM and every vCPU
        // fd are closed (see Drop), or never if a vCPU thread cannot be
        // stopped. The host accesses it only through atomics.
        unsafe { vm.set_user_memory_region(region) }.context("KVM_SET_USER_MEMORY_REGION")?;
        // Before the vCPUs: HLT and lock waits then block in the kernel
        // (mp_state HALTED) instead of exiting to userspace.
        vm.create_irq_chip().context("KVM_CREATE_IRQCHIP")?;
        if cfg.disable_exits != 0 {
            vm.enable_cap(&disable_exits_cap(cfg.disable_exits))
                .with_context(|| {
                    format!(
                        "KVM_ENABLE_CAP(KVM_CAP_X86_DISABLE_EXITS, {:#x})",
                        cfg.disable_exits
                    )
                })?;
        }

        for (at, blob) in [
            (guest::KICKER_AT, &guest::KICKER),
            (guest::TARGET_AT, &guest::TARGET),
        ] {
            let code = blob.code(vmx);
            ensure!(
                code.len() <= guest::SNIPPET_MAX,
                "the {} snippet is too big ({} bytes)",
                blob.name,
                code.len()
            );
            mem.load(at, &code);
        }
        mem.write(guest::CMD_COUNT, 1);

        let mut vcpus = Vec::new();
        for (id, rip) in [(0u64, guest::KICKER_AT), (1, guest::TARGET_AT)] {
            let vcpu = vm
                .create_vcpu(id)
                .with_context(|| format!("KVM_CREATE_VCPU {id}"))?;
            vcpu.set_cpuid2(cfg.cpuid)
                .with_context(|| format!("KVM_SET_CPUID2 on vCPU {id}"))?;
            if cfg.enforce_pv_cpuid {
                vcpu.enable_cap(&enforce_pv_cpuid_cap()).with_context(|| {
                    format!("KVM_ENABLE_CAP(KVM_CAP_ENFORCE_PV_FEATURE_CPUID) on vCPU {id}")
                })?;
            }
            let mut sregs = vcpu.get_sregs().context("KVM_GET_SREGS")?;
            for seg in [
                &mut sregs.cs,
                &mut sregs.ds,
                &mut sregs.es,
                &mut sregs.ss,
                &mut sregs.fs,
                &mut sregs.gs,
            ] {
                seg.base = 0;
                seg.selector = 0;
            }
            vcpu.set_sregs(&sregs).context("KVM_SET_SREGS")?;
            let mut regs = vcpu.get_regs().context("KVM_GET_REGS")?;
            regs.rip = rip as u64;
            regs.rflags = 0x2;
            regs.rsp = 0x8000 + 0x1000 * id;
            vcpu.set_regs(&regs).context("KVM_SET_REGS")?;
            vcpus.push(vcpu);
        }
        // With every vCPU created, rewrite each LAPIC so that KVM rebuilds
        // its APIC ID map; without this, kicks do not find their target.
        for (id, vcpu) in vcpus.iter().enumerate() {
            let lapic = vcpu
                .get_lapic()
                .with_context(|| format!("KVM_GET_LAPIC on vCPU {id}"))?;
            vcpu.set_lapic(&lapic)
                .with_context(|| format!("KVM_SET_LAPIC on vCPU {id}"))?;
        }
        // With an in-kernel irqchip, every vCPU but the BSP starts in
        // KVM_MP_STATE_UNINITIALIZED, waiting for INIT/SIPI: KVM_RUN would
        // block. Make both runnable at their RIP.
        for (id, vcpu) in vcpus.iter().enumerate() {
            vcpu.set_mp_state(kvm_mp_state {
                mp_state: KVM_MP_STATE_RUNNABLE,
            })
            .with_context(|| format!("KVM_SET_MP_STATE(RUNNABLE) on vCPU {id}"))?;
        }
        let target = vcpus.pop().expect("two vCPUs");
        let kicker = vcpus.pop().expect("two vCPUs");
        let stats = [StatsFd::open(&kicker)?, StatsFd::open(&target)?];
        Ok(TestVm {
            stats,
            kicker: VcpuThread::spawn("kicker", kicker)?,
            target: VcpuThread::spawn("target", target)?,
            vm,
            mem: Some(mem),
            target_started: Cell::new(false),
            rest: Cell::new(Rest::Hlt),
            next_token: Cell::new(FIRST_TOKEN),
            settle: Cell::new(FIRST_SETTLE),
            timeout,
        })
    }

    /// KVM's statistics of the kicker and of the target, now.
    pub fn vcpu_stats(&self) -> Result<[Stats; 2]> {
        Ok([self.stats[0].read()?, self.stats[1].read()?])
    }

    fn mem(&self) -> &GuestMem {
        self.mem.as_ref().expect("guest memory")
    }

    /// `KVM_ENABLE_CAP(KVM_CAP_PVLOCK_KICK)`; the errno on failure.
    pub fn enable_pvlock(&self, args: [u64; 4]) -> std::result::Result<(), i32> {
        self.vm.enable_cap(&pvlock_cap(args)).map_err(|e| e.errno())
    }

    /// `KVM_CHECK_EXTENSION(KVM_CAP_PVLOCK_KICK)` on the VM fd.
    pub fn check_pvlock(&self) -> i32 {
        self.vm
            .check_extension_raw(libc::c_ulong::from(abi::KVM_CAP_PVLOCK_KICK))
    }

    /// Has the kicker do `op` with the command block, and waits up to
    /// `timeout` for the report.
    fn command(
        &self,
        op: u32,
        nr: u32,
        args: [u32; 4],
        count: u32,
        expect: u32,
        timeout: Duration,
    ) -> Result<Loop> {
        assert!(count >= 1);
        let m = self.mem();
        m.write(guest::CMD_OP, op);
        m.write(guest::CMD_NR, nr);
        for (i, a) in args.iter().enumerate() {
            m.write(guest::CMD_A0 + 4 * i, *a);
        }
        m.write(guest::CMD_COUNT, count);
        m.write(guest::CMD_EXPECT, expect);
        m.write(guest::CMD_LEFT, u32::MAX);
        let started = Instant::now();
        self.kicker.resume()?;
        let ev = self.kicker.wait(timeout)?.ok_or_else(|| {
            anyhow!(
                "kicker vCPU: {} did not come back within {} s",
                if op == guest::OP_CPUID {
                    "CPUID".to_string()
                } else {
                    format!("hypercall {nr:#x}")
                },
                timeout.as_secs_f64()
            )
        })?;
        if ev.port != guest::PORT_RESULT {
            bail!("kicker vCPU: {} instead of a result", ev.name());
        }
        Ok(Loop {
            eax: ev.value,
            left: m.read(guest::CMD_LEFT),
            started,
            at: ev.at,
        })
    }

    /// Runs the kicker's hypercall `count` times while the result is
    /// `expect`, and waits up to `timeout` for the report.
    pub fn hypercall_loop(
        &self,
        nr: u32,
        args: [u32; 4],
        count: u32,
        expect: u32,
        timeout: Duration,
    ) -> Result<Loop> {
        self.command(guest::OP_HYPERCALL, nr, args, count, expect, timeout)
    }

    /// One hypercall by the kicker.
    pub fn hypercall(&self, nr: u32, args: [u32; 4]) -> Result<Call> {
        let l = self.hypercall_loop(nr, args, 1, 0, self.timeout)?;
        Ok(Call {
            eax: l.eax,
            at: l.at,
        })
    }

    /// `KVM_HC_PVLOCK_KICK` from the kicker.
    pub fn kick(&self, flags: u32, apic_id: u32, token: u32) -> Result<Call> {
        self.hypercall(abi::KVM_HC_PVLOCK_KICK, [flags, apic_id, token, 0])
    }

    /// `KVM_HC_PVLOCK_GET_PARAM` from the kicker.
    pub fn get_param(&self, param: u32) -> Result<i64> {
        Ok(self
            .hypercall(abi::KVM_HC_PVLOCK_GET_PARAM, [param, 0, 0, 0])?
            .ret())
    }

    /// CPUID `leaf` as the kicker sees it: EAX.
    pub fn guest_cpuid_eax(&self, leaf: u32) -> Result<u32> {
        let l = self.command(guest::OP_CPUID, 0, [leaf, 0, 0, 0], 1, 0, self.timeout)?;
        Ok(l.eax)
    }

    /// A fresh token for the target's next lock wait.
    pub fn token(&self) -> u32 {
        let t = self.next_token.get();
        self.next_token.set(t + 1);
        t
    }

    /// Makes later tokens larger than `token` (a kick with `token` is
    /// held for every wait up to it).
    pub fn tokens_past(&self, token: u32) {
        if self.next_token.get() <= token {
            self.next_token.set(token + 1);
        }
    }

    /// Starts a round of the target: waits until it is READY, sets it up
    /// to spin or not and then to `rest`, and waits for SPINNING, or for
    /// WAITING or HALTING.
    pub fn target_round(&self, spin: bool, rest: Rest) -> Result<Event> {
        if !self.target_started.replace(true) {
            self.target.resume()?;
        }
        self.target
            .expect(guest::PORT_RESULT, guest::EV_READY, self.timeout)?;
        let m = self.mem();
        let (mode, flags, token) = match rest {
            Rest::Hlt => (guest::MODE_HLT, 0, 0),
            Rest::Wait { flags, token } => (guest::MODE_WAIT, flags, token),
        };
        m.write(guest::TGT_MODE, mode);
        m.write(guest::TGT_NR, abi::KVM_HC_PVLOCK_WAIT);
        m.write(guest::TGT_FLAGS, flags);
        m.write(guest::TGT_TOKEN, token);
        m.write(guest::TGT_A2, 0);
        m.write(guest::TGT_RET, NO_RET);
        m.write(guest::TGT_SPIN, u32::from(spin));
        self.rest.set(rest);
        self.target.resume()?;
        let ev = if spin {
            guest::EV_SPINNING
        } else {
            rest.event()
        };
        self.target.expect(guest::PORT_EVENT, ev, self.timeout)
    }

    /// Ends the target's spinning and waits for WAITING or HALTING.
    pub fn target_stop_spinning(&self) -> Result<Event> {
        self.mem().write(guest::TGT_SPIN, 0);
        self.target
            .expect(guest::PORT_EVENT, self.rest.get().event(), self.timeout)
    }

    /// Waits for the target's WOKE (its `hlt` returned).
    pub fn expect_woke(&self) -> Result<Event> {
        self.target
            .expect(guest::PORT_EVENT, guest::EV_WOKE, self.timeout)
    }

    /// Waits for the target's WAITED (its lock wait returned) within
    /// `timeout`: the event and the wait's result.
    pub fn expect_waited_within(&self, timeout: Duration) -> Result<(Event, i64)> {
        let ev = self
            .target
            .expect(guest::PORT_EVENT, guest::EV_WAITED, timeout)?;
        let eax = self.mem().read(guest::TGT_RET);
        ensure!(eax != NO_RET, "the target's wait left no result");
        Ok((ev, decode(eax)))
    }

    /// Waits for the target's WAITED; its wait must have returned
    /// `KVM_PVLOCK_WAIT_KICKED`: its kick ended it, or came before it.
    pub fn expect_waited(&self) -> Result<Event> {
        self.expect_returned(abi::KVM_PVLOCK_WAIT_KICKED)
    }

    /// Waits for the target's WAITED; its hypercall must have returned
    /// `want`.
    pub fn expect_returned(&self, want: i64) -> Result<Event> {
        let (ev, ret) = self.expect_waited_within(self.timeout)?;
        // Lock waits have names for their results.
        let name = match self.rest.get() {
            Rest::Wait { .. } => describe_wait,
            Rest::Hlt => describe,
        };
        ensure!(
            ret == want,
            "the target's hypercall returned {} instead of {}",
            name(ret),
            name(want)
        );
        Ok(ev)
    }

    /// Fails if the target reports anything (wakes up) within `quiet`.
    pub fn expect_target_halted(&self, quiet: Duration, why: &str) -> Result<()> {
        self.target.expect_quiet(quiet, why)
    }

    /// The target's next event within `timeout`, if any.
    pub fn target_event(&self, timeout: Duration) -> Result<Option<Event>> {
        self.target.wait(timeout)
    }

    /// Kicks the target's lock wait with `token`, which the target is
    /// making (after WAITING): first lets it get into the wait, then kicks
    /// APIC ID 1 until a kick returns `KVM_PVLOCK_KICK_WOKEN`. A kick that
    /// comes first returns `KVM_PVLOCK_KICK_HELD`, and the wait must then
    /// return at once; the target then starts a new wait with a new token
    /// and the next kick waits twice as long. The target must not wake up
    /// before its kick. Does not wait for WAITED after the WOKEN kick.
    pub fn kick_wait(&self, token: u32) -> Result<Woken> {
        let mut retries = 0;
        let mut token = token;
        loop {
            thread::sleep(self.settle.get());
            if let Some(ev) = self.target.wait(Duration::ZERO)? {
                bail!(
                    "target vCPU: {} before the kick of its wait (token {token:#x})",
                    ev.name()
                );
            }
            let kick = self.kick(0, 1, token)?;
            match kick.ret() {
                abi::KVM_PVLOCK_KICK_WOKEN => return Ok(Woken { kick, retries }),
                abi::KVM_PVLOCK_KICK_HELD if retries < MAX_KICK_RETRIES => {
                    self.expect_waited().with_context(|| {
                        format!(
                            "after a kick that came before the target's wait (HELD, token \
                             {token:#x}), the wait must return at once"
                        )
                    })?;
                    retries += 1;
                    self.settle.set((self.settle.get() * 2).min(MAX_SETTLE));
                    token = self.token();
                    self.target_round(false, Rest::wait(token))?;
                }
                r => bail!(
                    "kick of the target's wait (token {token:#x}) returned {} (after {retries} \
                     HELD)",
                    describe(r)
                ),
            }
        }
    }

    /// Uses up the kick that `KVM_SET_MP_STATE` armed in [`new`](Self::new):
    /// the target makes a lock wait, which should return at once. Returns
    /// whether it did; if it halts instead, a kick ends it. pvlock must be
    /// enabled for the VM.
    pub fn prime_target(&self) -> Result<bool> {
        let token = self.token();
        self.target_round(false, Rest::wait(token))?;
        let quick = Duration::from_millis(1000).min(self.timeout);
        match self.target.wait(quick)? {
            Some(ev) if ev.is(guest::PORT_EVENT, guest::EV_WAITED) => {
                let ret = decode(self.mem().read(guest::TGT_RET));
                ensure!(
                    ret == 0,
                    "the target's first KVM_HC_PVLOCK_WAIT returned {}",
                    describe_wait(ret)
                );
                Ok(true)
            }
            Some(ev) => bail!("target vCPU: {} instead of WAITED", ev.name()),
            None => {
                self.kick_wait(token)?;
                self.expect_waited()?;
                Ok(false)
            }
        }
    }

    /// Stops the target vCPU, which must be running (spinning, waiting or
    /// halted). Returns the events it sent meanwhile (they stay queued).
    pub fn pause_target(&self) -> Result<Vec<Event>> {
        self.target.pause(self.timeout)?;
        Ok(self.target.backlog())
    }

    /// Lets the paused target run again.
    pub fn resume_target(&self) -> Result<()> {
        self.target.resume()
    }

    /// `KVM_GET_MP_STATE` on the stopped target.
    pub fn target_mp_state(&self) -> Result<u32> {
        self.target
            .call(self.timeout, |v| v.get_mp_state().map(|s| s.mp_state))?
            .map_err(|e| anyhow!("KVM_GET_MP_STATE on the target: {e}"))
    }

    /// `KVM_GET_REGS` on the stopped target: RAX.
    pub fn target_rax(&self) -> Result<u64> {
        self.target
            .call(self.timeout, |v| v.get_regs().map(|r| r.rax))?
            .map_err(|e| anyhow!("KVM_GET_REGS on the target: {e}"))
    }

    /// `KVM_GET_REGS`, then `KVM_SET_REGS` with RAX = `rax`, on the
    /// stopped target: what a VMM does when it restores a vCPU.
    pub fn set_target_rax(&self, rax: u64) -> Result<()> {
        self.target
            .call(self.timeout, move |v| {
                let mut r = v.get_regs()?;
                r.rax = rax;
                v.set_regs(&r)
            })?
            .map_err(|e| anyhow!("KVM_SET_REGS on the target: {e}"))
    }

    /// `KVM_SET_MP_STATE` on the stopped target.
    pub fn set_target_mp_state(&self, mp_state: u32) -> Result<()> {
        self.target
            .call(self.timeout, move |v| {
                v.set_mp_state(kvm_mp_state { mp_state })
            })?
            .map_err(|e| anyhow!("KVM_SET_MP_STATE({mp_state}) on the target: {e}"))
    }
}

impl Drop for TestVm {
    fn drop(&mut self) {
        let stopped = self.kicker.stop() & self.target.stop();
        if !stopped {
            // A vCPU may still run and write the memory: never free it.
            std::mem::forget(self.mem.take());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(function: u32, eax: u32, ebx: u32, ecx: u32, edx: u32) -> kvm_cpuid_entry2 {
        kvm_cpuid_entry2 {
            function,
            eax,
            ebx,
            ecx,
            edx,
            ..Default::default()
        }
    }

    #[test]
    fn vendors() {
        let amd = u32::from_le_bytes(*b"Auth");
        let cpuid = CpuId::from_entries(&[entry(
            0,
            0xd,
            amd,
            u32::from_le_bytes(*b"cAMD"),
            u32::from_le_bytes(*b"enti"),
        )])
        .unwrap();
        assert_eq!(vendor(&cpuid), "AuthenticAMD");
        assert!(!vendor_uses_vmcall("AuthenticAMD"));
        assert!(!vendor_uses_vmcall("HygonGenuine"));
        assert!(vendor_uses_vmcall("GenuineIntel"));
    }

    #[test]
    fn guest_cpuid_hides_pvlock_and_shows_pv_unhalt() {
        let supported = CpuId::from_entries(&[
            entry(0, 0xd, 0, 0, 0),
            entry(KVM_CPUID_SIGNATURE, KVM_CPUID_FEATURES, 1, 2, 3),
            entry(KVM_CPUID_FEATURES, 1 << 23 | 1 << 3, 0, 0, 0),
        ])
        .unwrap();
        let g = guest_cpuid(&supported, false).unwrap();
        assert_eq!(g.as_slice().len(), 3);
        let f = cpuid_leaf(&g, KVM_CPUID_FEATURES, 0).unwrap();
        assert_eq!(f.eax, 1 << 7 | 1 << 3);
        // A VMM that enables pvlock sets the bit itself.
        let p = guest_cpuid(&supported, true).unwrap();
        let f = cpuid_leaf(&p, KVM_CPUID_FEATURES, 0).unwrap();
        assert_eq!(f.eax, 1 << 23 | 1 << 7 | 1 << 3);
        let s = cpuid_leaf(&g, KVM_CPUID_SIGNATURE, 0).unwrap();
        assert_eq!(s.eax, KVM_CPUID_FEATURES);
        let sig: Vec<u8> = [s.ebx, s.ecx, s.edx]
            .iter()
            .flat_map(|r| r.to_le_bytes())
            .collect();
        assert_eq!(&sig, b"KVMKVMKVM\0\0\0");
    }

    #[test]
    fn enable_cap_arguments() {
        let c = pvlock_cap([1, 1234, 0, 0]);
        assert_eq!(c.cap, 0x7076);
        assert_eq!(c.flags, 0);
        assert_eq!(c.args, [1, 1234, 0, 0]);
        let d = disable_exits_cap(kvm_bindings::KVM_X86_DISABLE_EXITS_HLT);
        assert_eq!(d.cap, 143);
        assert_eq!(d.args, [2, 0, 0, 0]);
        let e = enforce_pv_cpuid_cap();
        assert_eq!(e.cap, 190);
        assert_eq!(e.args, [1, 0, 0, 0]);
    }

    #[test]
    fn rests() {
        assert_eq!(Rest::wait(5), Rest::Wait { flags: 0, token: 5 });
        assert_eq!(Rest::wait(5).event(), guest::EV_WAITING);
        assert_eq!(Rest::Hlt.event(), guest::EV_HALTING);
    }
}

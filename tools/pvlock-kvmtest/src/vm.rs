// SPDX-License-Identifier: GPL-2.0

//! A test VM: one memory slot, an in-kernel irqchip and two vCPUs, each on
//! its own thread, driven from the test's thread through channels.
//!
//! vCPU 0 (APIC ID 0) is the kicker or the CPUID probe, vCPU 1 (APIC ID 1)
//! the target; see [`crate::guest`]. Each vCPU thread calls `KVM_RUN` in a
//! loop and sends every `out` to the test as an [`Event`] stamped with the
//! time `KVM_RUN` returned. After an `out` to [`guest::PORT_RESULT`] it
//! waits until the test calls [`VcpuThread::resume`]; other exits are
//! passed on without stopping. Every wait of the test has a timeout, so a
//! vCPU that never comes back fails the case instead of hanging it.
//!
//! Teardown ([`Drop`]) stops the threads: it sets their stop flag and
//! signals them until they leave `KVM_RUN` (a halted vCPU returns `EINTR`
//! on a signal); the VM is closed when the last of its file descriptors
//! is.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use kvm_bindings::{
    kvm_cpuid_entry2, kvm_enable_cap, kvm_mp_state, kvm_userspace_memory_region, CpuId,
    KVM_MP_STATE_RUNNABLE,
};
use kvm_ioctls::{Kvm, VcpuExit, VcpuFd, VmFd};
use vmm_sys_util::signal::{register_signal_handler, Killable, SIGRTMIN};

use crate::abi;
use crate::guest::{self, GuestMem};
use crate::stats::{decode, describe};

/// The signal that interrupts `KVM_RUN` at teardown.
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

/// The CPUID a VMM that does not know pvlock would give its guest: what
/// KVM supports, the KVM signature leaf, the features leaf with
/// `KVM_FEATURE_PV_UNHALT` (for upstream's `KVM_HC_KICK_CPU`) and without
/// `KVM_FEATURE_PVLOCK_KICK`.
pub fn guest_cpuid(supported: &CpuId) -> Result<CpuId> {
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
    entries.push(kvm_cpuid_entry2 {
        function: KVM_CPUID_FEATURES,
        eax: (features | 1 << abi::KVM_FEATURE_PV_UNHALT) & !(1 << abi::KVM_FEATURE_PVLOCK_KICK),
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
}

/// What a vCPU thread reports.
enum Report {
    Out(Event),
    /// The vCPU stopped for good: an unexpected exit or error.
    Failed(String),
}

/// A vCPU running `KVM_RUN` in a loop on its own thread.
pub struct VcpuThread {
    name: &'static str,
    events: Receiver<Report>,
    go: Option<Sender<()>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl VcpuThread {
    /// Starts the thread; the vCPU runs at the first [`resume`](Self::resume).
    fn spawn(name: &'static str, vcpu: VcpuFd) -> Result<Self> {
        let (events_tx, events) = mpsc::channel();
        let (go, go_rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let handle = thread::Builder::new()
            .name(format!("vcpu-{name}"))
            .spawn(move || vcpu_loop(vcpu, &events_tx, &go_rx, &stop2))
            .with_context(|| format!("cannot start the {name} vCPU thread"))?;
        Ok(VcpuThread {
            name,
            events,
            go: Some(go),
            stop,
            handle: Some(handle),
        })
    }

    /// Lets the vCPU run (again) until its next gated exit.
    pub fn resume(&self) -> Result<()> {
        self.go
            .as_ref()
            .and_then(|g| g.send(()).ok())
            .ok_or_else(|| anyhow!("the {} vCPU thread is gone", self.name))
    }

    /// The next event, or `None` after `timeout`.
    pub fn wait(&self, timeout: Duration) -> Result<Option<Event>> {
        match self.events.recv_timeout(timeout) {
            Ok(Report::Out(ev)) => Ok(Some(ev)),
            Ok(Report::Failed(why)) => bail!("{} vCPU: {why}", self.name),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => bail!("the {} vCPU thread ended", self.name),
        }
    }

    /// The next event, which must be `value` on `port`, within `timeout`.
    pub fn expect(&self, port: u16, value: u32, timeout: Duration) -> Result<Event> {
        let want = guest::event_name(port, value);
        match self.wait(timeout)? {
            Some(ev) if ev.port == port && ev.value == value => Ok(ev),
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
        // A thread waiting for `resume` sees the channel closed.
        self.go = None;
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

/// The body of a vCPU thread.
fn vcpu_loop(mut vcpu: VcpuFd, events: &Sender<Report>, go: &Receiver<()>, stop: &AtomicBool) {
    if go.recv().is_err() {
        return;
    }
    while !stop.load(Ordering::SeqCst) {
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
                if port == guest::PORT_RESULT && go.recv().is_err() {
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

/// What vCPU 0 runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vcpu0 {
    Kicker,
    CpuidProbe,
}

/// The result of a hypercall by the kicker.
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

/// A kick that woke the target.
#[derive(Debug, Clone, Copy)]
pub struct Woken {
    /// The kick that returned `KVM_PVLOCK_KICK_WOKEN`.
    pub kick: Call,
    /// Earlier kicks that returned `KVM_PVLOCK_KICK_NOT_HALTED`.
    pub retries: u32,
}

/// How often [`TestVm::kick_until_woken`] tries before giving up.
const MAX_KICK_RETRIES: u32 = 2000;

/// A VM with the kicker (or CPUID probe) and the target.
pub struct TestVm {
    // Fields drop in this order: the vCPU threads (and their fds) first,
    // then the VM fd, then the memory the VM maps.
    kicker: VcpuThread,
    target: VcpuThread,
    vm: VmFd,
    mem: Option<GuestMem>,
    target_started: std::cell::Cell<bool>,
    /// Timeout of each wait for a guest.
    pub timeout: Duration,
}

impl TestVm {
    /// Creates the VM; the vCPUs run only when the test lets them.
    pub fn new(
        kvm: &Kvm,
        cpuid: &CpuId,
        vmx: bool,
        vcpu0: Vcpu0,
        timeout: Duration,
    ) -> Result<Self> {
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
        // Before the vCPUs: HLT then blocks in the kernel (mp_state HALTED)
        // instead of exiting to userspace.
        vm.create_irq_chip().context("KVM_CREATE_IRQCHIP")?;

        let entry0 = match vcpu0 {
            Vcpu0::Kicker => guest::KICKER_AT,
            Vcpu0::CpuidProbe => guest::CPUID_PROBE_AT,
        };
        for (at, blob) in [
            (guest::KICKER_AT, &guest::KICKER),
            (guest::CPUID_PROBE_AT, &guest::CPUID_PROBE),
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
        for (id, rip) in [(0u64, entry0), (1, guest::TARGET_AT)] {
            let vcpu = vm
                .create_vcpu(id)
                .with_context(|| format!("KVM_CREATE_VCPU {id}"))?;
            vcpu.set_cpuid2(cpuid)
                .with_context(|| format!("KVM_SET_CPUID2 on vCPU {id}"))?;
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
        Ok(TestVm {
            kicker: VcpuThread::spawn("kicker", kicker)?,
            target: VcpuThread::spawn("target", target)?,
            vm,
            mem: Some(mem),
            target_started: std::cell::Cell::new(false),
            timeout,
        })
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

    /// Runs the kicker's command `count` times while the result is
    /// `expect`, and waits up to `timeout` for the report.
    pub fn hypercall_loop(
        &self,
        nr: u32,
        args: [u32; 4],
        count: u32,
        expect: u32,
        timeout: Duration,
    ) -> Result<Loop> {
        assert!(count >= 1);
        let m = self.mem();
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
                "kicker vCPU: hypercall {nr:#x} did not come back within {} s",
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

    /// One hypercall by the kicker.
    pub fn hypercall(&self, nr: u32, args: [u32; 4]) -> Result<Call> {
        let l = self.hypercall_loop(nr, args, 1, 0, self.timeout)?;
        Ok(Call {
            eax: l.eax,
            at: l.at,
        })
    }

    /// `KVM_HC_PVLOCK_KICK` from the kicker.
    pub fn kick(&self, flags: u32, apic_id: u32) -> Result<Call> {
        self.hypercall(abi::KVM_HC_PVLOCK_KICK, [flags, apic_id, 0, 0])
    }

    /// `KVM_HC_PVLOCK_GET_PARAM` from the kicker.
    pub fn get_param(&self, param: u32) -> Result<i64> {
        Ok(self
            .hypercall(abi::KVM_HC_PVLOCK_GET_PARAM, [param, 0, 0, 0])?
            .ret())
    }

    /// CPUID `leaf` as the CPUID probe (vCPU 0) sees it: EAX.
    pub fn guest_cpuid_eax(&self, leaf: u32) -> Result<u32> {
        Ok(self.hypercall(0, [leaf, 0, 0, 0])?.eax)
    }

    /// Starts a round of the target: waits until it is READY, tells it to
    /// spin or not, and waits for SPINNING or HALTING.
    pub fn target_round(&self, spin: bool) -> Result<Event> {
        if !self.target_started.replace(true) {
            self.target.resume()?;
        }
        self.target
            .expect(guest::PORT_RESULT, guest::EV_READY, self.timeout)?;
        self.mem().write(guest::TGT_SPIN, u32::from(spin));
        self.target.resume()?;
        let ev = if spin {
            guest::EV_SPINNING
        } else {
            guest::EV_HALTING
        };
        self.target.expect(guest::PORT_EVENT, ev, self.timeout)
    }

    /// Ends the target's spinning and waits for HALTING.
    pub fn target_stop_spinning(&self) -> Result<Event> {
        self.mem().write(guest::TGT_SPIN, 0);
        self.target
            .expect(guest::PORT_EVENT, guest::EV_HALTING, self.timeout)
    }

    /// Waits for the target's WOKE.
    pub fn expect_woke(&self) -> Result<Event> {
        self.target
            .expect(guest::PORT_EVENT, guest::EV_WOKE, self.timeout)
    }

    /// Fails if the target reports anything (wakes up) within `quiet`.
    pub fn expect_target_halted(&self, quiet: Duration, why: &str) -> Result<()> {
        self.target.expect_quiet(quiet, why)
    }

    /// The target's next event within `timeout`, if any.
    pub fn target_event(&self, timeout: Duration) -> Result<Option<Event>> {
        self.target.wait(timeout)
    }

    /// Kicks APIC ID 1 until a kick returns `KVM_PVLOCK_KICK_WOKEN`,
    /// waiting 1 ms after each `KVM_PVLOCK_KICK_NOT_HALTED` (the target
    /// may not have reached its `hlt` yet). The target must not wake up
    /// before that kick. Does not wait for WOKE.
    pub fn kick_until_woken(&self) -> Result<Woken> {
        let mut retries = 0;
        loop {
            let kick = self.kick(0, 1)?;
            match kick.ret() {
                abi::KVM_PVLOCK_KICK_WOKEN => return Ok(Woken { kick, retries }),
                abi::KVM_PVLOCK_KICK_NOT_HALTED if retries < MAX_KICK_RETRIES => {
                    retries += 1;
                    if let Some(ev) = self.target_event(Duration::from_millis(1))? {
                        bail!(
                            "target vCPU: {} after a kick that returned NOT_HALTED, \
                             before any kick woke it",
                            ev.name()
                        );
                    }
                }
                r => bail!(
                    "kick of the halted target returned {} (after {retries} NOT_HALTED)",
                    describe(r)
                ),
            }
        }
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
        let g = guest_cpuid(&supported).unwrap();
        assert_eq!(g.as_slice().len(), 3);
        let f = cpuid_leaf(&g, KVM_CPUID_FEATURES, 0).unwrap();
        assert_eq!(f.eax, 1 << 7 | 1 << 3);
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
    }
}

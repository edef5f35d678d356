// SPDX-License-Identifier: GPL-2.0

//! guest_pvlock's lock algorithm, the very file the kernel module builds
//! (`guest_pvlock/algo.rs`), run in userspace against a model of the lock
//! word and of the hypervisor:
//!
//! - [`ModelLock`]: the qspinlock word as one `u32`; the byte and half-word
//!   operations the kernel does with narrower atomics are compare-and-swap
//!   loops on the whole word (the same atomicity, one more step to explore).
//! - [`Hypervisor`]: per vCPU, what KVM keeps (`arch/x86/kvm/pvlock.c`): the
//!   token of the lock wait in progress and the largest token kicked, with
//!   the same barriers, plus `pv_unhalted` (`KVM_HC_KICK_CPU`), a pending
//!   interrupt and a pending NMI; a vCPU that waits or halts blocks on a
//!   condition variable until one of them ends the wait. Faults can be
//!   injected: the host refuses kicks, or withdraws the pvlock hypercalls;
//!   and the host itself can be mutated (no held kicks).
//!
//! Built with `--cfg loom`, the tests in `loom_tests` explore every
//! interleaving (up to loom's bounds) of holders unlocking while waiters
//! decide to wait; a lost wake-up leaves a thread blocked for good, which
//! loom reports as a deadlock, and two owners at once write a
//! `loom::cell::UnsafeCell` concurrently, which loom reports too. Seeded
//! bugs (`algo::Mutant`, and the host's held kick) must make them fail.
//! Built normally, `stress` runs threads hammering one lock.

// The model serves two test builds, loom and plain threads, each using a
// part of it.
#![allow(dead_code)]

#[path = "../../../rust/kernel/pvlock/abi.rs"]
pub(crate) mod abi;
#[path = "../../../guest_pvlock/algo.rs"]
pub(crate) mod algo;
#[path = "../../../rust/kernel/pvlock/qspinlock.rs"]
pub(crate) mod qspinlock;
pub(crate) mod sync;

use abi::Kick;
use algo::{KickError, LockWord, Mutant, Platform, Wait, Waited};
use sync::{AtomicU32, AtomicU64, Condvar, Mutex, Ordering};

/// The lock word.
pub(crate) struct ModelLock {
    word: AtomicU32,
    /// The hash key (`addr()`): two locks with one key model a lock whose
    /// memory was freed and reused for another.
    key: usize,
}

impl Default for ModelLock {
    fn default() -> Self {
        Self::new(0)
    }
}

impl ModelLock {
    /// A lock whose word is `v` (1: held).
    pub fn new(v: u32) -> Self {
        Self::with_key(v, 0)
    }

    /// A lock whose word is `v` and whose hash key is `key` (0: its address).
    pub fn with_key(v: u32, key: usize) -> Self {
        ModelLock {
            word: AtomicU32::new(v),
            key,
        }
    }

    /// The whole word.
    pub fn word(&self) -> u32 {
        self.word.load(Ordering::Acquire)
    }

    /// Replaces the bits of `mask` with `bits`; returns the old word.
    fn update(&self, mask: u32, bits: u32, ord: Ordering) -> u32 {
        let mut cur = self.word.load(Ordering::Relaxed);
        loop {
            let new = (cur & !mask) | (bits & mask);
            match self.word.compare_exchange(cur, new, ord, Ordering::Relaxed) {
                Ok(old) => return old,
                Err(c) => cur = c,
            }
        }
    }
}

impl LockWord for ModelLock {
    // The lock word is read in busy-wait loops: see `sync::spin_load`.
    fn val(&self) -> u32 {
        self.word.fetch_add(0, Ordering::Relaxed)
    }

    fn cmpxchg_val(&self, old: u32, new: u32) -> Result<u32, u32> {
        self.word
            .compare_exchange(old, new, Ordering::Acquire, Ordering::Relaxed)
    }

    fn cmpxchg_locked(&self, old: u8, new: u8) -> Result<u8, u8> {
        let mut cur = self.word.load(Ordering::Relaxed);
        loop {
            if cur & 0xff != old as u32 {
                return Err(cur as u8);
            }
            let next = (cur & !0xff) | new as u32;
            match self
                .word
                .compare_exchange(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Ok(old),
                Err(c) => cur = c,
            }
        }
    }

    fn xchg_locked(&self, new: u8) -> u8 {
        self.update(0xff, new as u32, Ordering::AcqRel) as u8
    }

    fn locked(&self) -> u8 {
        self.word.fetch_add(0, Ordering::Relaxed) as u8
    }

    fn set_locked(&self, v: u8) {
        self.update(0xff, v as u32, Ordering::Relaxed);
    }

    fn release_locked(&self, v: u8) {
        self.update(0xff, v as u32, Ordering::Release);
    }

    fn set_pending(&self, v: u8) {
        self.update(0xff00, (v as u32) << 8, Ordering::Relaxed);
    }

    fn cmpxchg_locked_pending(&self, old: u16, new: u16) -> bool {
        let mut cur = self.word.load(Ordering::Relaxed);
        loop {
            if cur & 0xffff != old as u32 {
                return false;
            }
            let next = (cur & !0xffff) | new as u32;
            match self
                .word
                .compare_exchange(cur, next, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(c) => cur = c,
            }
        }
    }

    fn xchg_tail(&self, tail: u32) -> u32 {
        self.update(0xffff_0000, tail, Ordering::AcqRel) & 0xffff_0000
    }

    fn addr(&self) -> usize {
        if self.key != 0 {
            self.key
        } else {
            self as *const Self as usize
        }
    }
}

/// Loom debugging (MODEL_TRACE=1): the events of the current execution,
/// printed by the panic hook when loom reports a failure.
pub(crate) static TRACE: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

pub(crate) fn trace(f: impl FnOnce() -> String) {
    if std::env::var_os("MODEL_TRACE").is_some() {
        TRACE.lock().unwrap().push(f());
    }
}

/// What goes wrong with the host's kicks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Fault {
    /// Nothing.
    None,
    /// No vCPU has the APIC ID the guest knows its targets by: the project
    /// kick is refused (`-KVM_EINVAL`), and `KVM_HC_KICK_CPU` reaches
    /// nobody and returns 0, as upstream's does. Only an NMI, sent by CPU
    /// number, reaches the target.
    Refused,
    /// The pvlock hypercalls are withdrawn (`-KVM_ENOSYS`): waits and kicks.
    Gone,
    /// `KVM_HC_KICK_CPU` fails too, after the pvlock hypercalls went.
    AllGone,
    /// A broken host (host_kvm's `inject_ignore_kicks`): the project kick
    /// reports [`Kick::Woken`] and delivers nothing; only an interrupt (or
    /// an NMI) ends the wait it was for.
    Lost,
}

/// How a model run is set up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Config {
    /// The mode the lock starts in.
    pub mode: algo::Mode,
    /// `KVM_HC_KICK_CPU` is offered.
    pub have_kick_cpu: bool,
    /// The host holds a kick that comes before its wait (false: a mutated
    /// host that drops it).
    pub hold_kicks: bool,
    pub fault: Fault,
    /// Every vCPU looks preempted (early waits, yields).
    pub preempted: bool,
    pub yield_enabled: bool,
    /// Waiters spin as the pending waiter first (`pending`).
    pub pending: bool,
    pub spin_threshold: u32,
    /// A seeded bug in the algorithm.
    pub mutant: Option<Mutant>,
}

impl Config {
    /// The project's waits and kicks on a host that offers both kinds.
    pub(crate) fn new(mode: algo::Mode) -> Self {
        Config {
            mode,
            have_kick_cpu: true,
            hold_kicks: true,
            fault: Fault::None,
            preempted: false,
            yield_enabled: false,
            pending: true,
            spin_threshold: 1,
            mutant: None,
        }
    }
}

/// What KVM keeps per vCPU (`arch/x86/kvm/pvlock.c`), and the events that
/// end a halt.
struct VcpuHost {
    /// Token of the lock wait in progress, 0 if none.
    wait: AtomicU64,
    /// The largest token kicked.
    kick: AtomicU64,
    /// Set under `m`: `KVM_REQ_PVLOCK_KICK`, `pv_unhalted`, an interrupt,
    /// an NMI.
    m: Mutex<Events>,
    cv: Condvar,
}

#[derive(Default)]
struct Events {
    request: bool,
    unhalted: bool,
    irq: bool,
    nmi: bool,
}

/// The model hypervisor.
pub(crate) struct Hypervisor {
    vcpus: Vec<VcpuHost>,
    pub(crate) cfg: Config,
    /// Kicks the host held.
    pub(crate) held: AtomicU32,
    /// NMIs sent.
    pub(crate) nmis: AtomicU32,
    /// Steps each vCPU (and, last, anyone else) took, for `relax()` under
    /// loom.
    epoch: Mutex<Vec<u64>>,
    epoch_cv: Condvar,
}

impl Hypervisor {
    /// `n` vCPUs set up as `cfg` says.
    pub(crate) fn new(n: usize, cfg: Config) -> Self {
        if std::env::var_os("MODEL_TRACE").is_some() {
            let mut t = TRACE.lock().unwrap();
            t.clear();
            t.push("=== new execution".into());
        }
        Hypervisor {
            vcpus: (0..n)
                .map(|_| VcpuHost {
                    wait: AtomicU64::new(0),
                    kick: AtomicU64::new(0),
                    m: Mutex::new(Events::default()),
                    cv: Condvar::new(),
                })
                .collect(),
            cfg,
            held: AtomicU32::new(0),
            nmis: AtomicU32::new(0),
            epoch: Mutex::new(vec![0; n + 1]),
            epoch_cv: Condvar::new(),
        }
    }

    /// An interrupt for `cpu`: ends its wait (as an interrupt ends a wait
    /// entered with interrupts enabled), or its next one.
    pub fn interrupt(&self, cpu: usize) {
        let v = &self.vcpus[cpu];
        v.m.lock().unwrap().irq = true;
        v.cv.notify_all();
    }

    /// `who` (a vCPU, or `usize::MAX` for anyone else) took a step: see
    /// `wait_for_progress`.
    pub(crate) fn progress(&self, who: usize) {
        let mut e = self.epoch.lock().unwrap();
        let i = who.min(e.len() - 1);
        e[i] += 1;
        trace(|| format!("progress by {who}: {:?}", *e));
        self.epoch_cv.notify_all();
    }

    /// A busy-wait iteration under loom: announce a step, then wait for
    /// another vCPU to take one. Loom explores schedules, not time: a spin
    /// loop would let it run the spinner for ever. Waiting for someone
    /// else's step is the spin loop with the iterations in which nothing
    /// changed left out; a spinner that waits for a vCPU which never moves
    /// again (blocked for good) shows up as a deadlock, which it is.
    ///
    /// `seen` is the step count this vCPU saw at its previous iteration: if
    /// another vCPU moved since, the spinner just looks again.
    #[cfg(loom)]
    fn wait_for_progress(&self, me: usize, seen: &std::cell::Cell<u64>) {
        let others = |e: &Vec<u64>| -> u64 {
            e.iter()
                .enumerate()
                .filter(|(i, _)| *i != me)
                .map(|(_, c)| *c)
                .sum()
        };
        let mut e = self.epoch.lock().unwrap();
        trace(|| format!("cpu{me} relax, steps {:?}, seen {}", *e, seen.get()));
        while others(&e) == seen.get() {
            e = self.epoch_cv.wait(e).unwrap();
            trace(|| format!("cpu{me} woke: {:?}", *e));
        }
        seen.set(others(&e));
    }

    /// Blocks `cpu` until `ended(events, wait)` or an interrupt, NMI or
    /// `pv_unhalted`; consumes them. For the lock wait `token` returns
    /// whether its kick came, as `kvm_pvlock_wait_end()` decides it: the
    /// wait marked over, a full barrier, then the kicks read (a kick that
    /// found the wait raised them before it looked).
    fn block(&self, cpu: usize, lock_wait: Option<u64>) -> bool {
        let v = &self.vcpus[cpu];
        let mut e = v.m.lock().unwrap();
        let over = |e: &Events| {
            e.unhalted
                || e.irq
                || e.nmi
                || (lock_wait.is_some()
                    && e.request
                    && v.kick.load(Ordering::SeqCst) >= v.wait.load(Ordering::SeqCst))
        };
        if !over(&e) {
            trace(|| format!("cpu{cpu} blocks"));
            // Halted is a step others may wait for.
            self.progress(cpu);
            while !over(&e) {
                e = v.cv.wait(e).unwrap();
            }
        }
        trace(|| format!("cpu{cpu} runs again"));
        *e = Events::default();
        v.wait.store(0, Ordering::SeqCst);
        // Pairs with the barrier in `hc_kick`.
        sync::fence(Ordering::SeqCst);
        lock_wait.is_some_and(|t| v.kick.load(Ordering::SeqCst) >= t)
    }

    /// `KVM_HC_PVLOCK_WAIT` (`kvm_pvlock_wait()`).
    fn hc_wait(&self, cpu: usize, token: u64) -> Waited {
        if matches!(self.cfg.fault, Fault::Gone | Fault::AllGone) {
            return Waited::Gone;
        }
        let v = &self.vcpus[cpu];
        v.wait.store(token, Ordering::SeqCst);
        // Pairs with the barrier in `hc_kick`.
        sync::fence(Ordering::SeqCst);
        if v.kick.load(Ordering::SeqCst) >= token {
            trace(|| format!("cpu{cpu} wait {token}: its kick came first"));
            v.wait.store(0, Ordering::SeqCst);
            self.progress(cpu);
            return Waited::Kicked;
        }
        trace(|| format!("cpu{cpu} waits, token {token}"));
        if self.block(cpu, Some(token)) {
            Waited::Kicked
        } else {
            Waited::Other
        }
    }

    /// `KVM_HC_PVLOCK_KICK` (`kvm_pvlock_kick()`).
    fn hc_kick(&self, from: usize, cpu: usize, token: u64) -> Result<Kick, KickError> {
        match self.cfg.fault {
            Fault::Refused => return Err(KickError::Refused),
            Fault::Gone | Fault::AllGone => return Err(KickError::Gone),
            Fault::Lost => {
                trace(|| format!("cpu{from} kicks cpu{cpu} token {token}: lost"));
                self.progress(from);
                return Ok(Kick::Woken);
            }
            Fault::None => {}
        }
        // host_kvm refuses a kick without a token (`-KVM_EINVAL`,
        // `kicks_bad_args`): no wait has token 0.
        if token == 0 {
            return Err(KickError::Refused);
        }
        let v = &self.vcpus[cpu];
        // The kick value only grows.
        let raise = || {
            let mut old = v.kick.load(Ordering::SeqCst);
            while old < token {
                match v
                    .kick
                    .compare_exchange(old, token, Ordering::SeqCst, Ordering::SeqCst)
                {
                    Ok(_) => break,
                    Err(o) => old = o,
                }
            }
        };
        if self.cfg.hold_kicks {
            raise();
        }
        // Pairs with the barrier in `hc_wait`.
        sync::fence(Ordering::SeqCst);
        let r = if v.wait.load(Ordering::SeqCst) == token {
            if !self.cfg.hold_kicks {
                // The mutated host raises the kick only for a wait it finds.
                raise();
            }
            v.m.lock().unwrap().request = true;
            v.cv.notify_all();
            Kick::Woken
        } else {
            self.held.fetch_add(1, Ordering::Relaxed);
            Kick::Held
        };
        trace(|| format!("cpu{from} kicks cpu{cpu} token {token}: {r:?}"));
        self.progress(from);
        Ok(r)
    }

    /// `HLT`, ended by `KVM_HC_KICK_CPU`'s `pv_unhalted`.
    fn hlt(&self, cpu: usize) {
        trace(|| format!("cpu{cpu} halts"));
        self.block(cpu, None);
    }

    /// `KVM_HC_KICK_CPU`: sets `pv_unhalted`, which ends a halt or a lock
    /// wait, now or the next.
    fn kick_cpu(&self, from: usize, cpu: usize) -> Result<(), KickError> {
        if self.cfg.fault == Fault::AllGone || !self.cfg.have_kick_cpu {
            return Err(KickError::Gone);
        }
        if self.cfg.fault == Fault::Refused {
            // No vCPU answers the APIC ID: nobody is woken, and success is
            // reported.
            trace(|| format!("cpu{from} kick_cpu cpu{cpu}: no such APIC ID"));
            self.progress(from);
            return Ok(());
        }
        let v = &self.vcpus[cpu];
        v.m.lock().unwrap().unhalted = true;
        v.cv.notify_all();
        trace(|| format!("cpu{from} kick_cpu cpu{cpu}"));
        self.progress(from);
        Ok(())
    }

    /// An NMI to `cpu`.
    fn nmi(&self, from: usize, cpu: usize) {
        let v = &self.vcpus[cpu];
        v.m.lock().unwrap().nmi = true;
        v.cv.notify_all();
        self.nmis.fetch_add(1, Ordering::Relaxed);
        trace(|| format!("cpu{from} NMI to cpu{cpu}"));
        self.progress(from);
    }
}

/// One vCPU's view: the [`Platform`] the algorithm runs on.
pub(crate) struct Cpu<'a> {
    pub(crate) hv: &'a Hypervisor,
    pub(crate) id: usize,
    /// Loom only: the step count at this vCPU's last busy-wait iteration.
    pub(crate) seen: std::cell::Cell<u64>,
}

impl<'a> Cpu<'a> {
    pub(crate) fn new(hv: &'a Hypervisor, id: usize) -> Self {
        Cpu {
            hv,
            id,
            seen: std::cell::Cell::new(u64::MAX),
        }
    }
}

impl Platform for Cpu<'_> {
    fn cpu(&self) -> usize {
        self.id
    }

    fn relax(&self) {
        #[cfg(loom)]
        self.hv.wait_for_progress(self.id, &self.seen);
        #[cfg(not(loom))]
        std::hint::spin_loop();
    }

    fn wait_if(&self, how: Wait, token: u64, cond: impl FnOnce() -> bool) -> Waited {
        // Interrupts are "off" here: nothing runs on this vCPU between the
        // re-check and the wait.
        if !cond() {
            trace(|| format!("cpu{} wait_if: condition false", self.id));
            return Waited::Skipped;
        }
        match how {
            Wait::Hypercall => self.hv.hc_wait(self.id, token),
            Wait::Hlt => {
                self.hv.hlt(self.id);
                Waited::Ended
            }
        }
    }

    fn kick(&self, cpu: usize, token: u64) -> Result<Kick, KickError> {
        self.hv.hc_kick(self.id, cpu, token)
    }

    fn have_kick_cpu(&self) -> bool {
        self.hv.cfg.have_kick_cpu
    }

    fn kick_cpu(&self, cpu: usize) -> Result<(), KickError> {
        self.hv.kick_cpu(self.id, cpu)
    }

    fn wake_nmi(&self, cpu: usize) {
        self.hv.nmi(self.id, cpu);
    }

    fn preempted(&self, _cpu: usize) -> bool {
        self.hv.cfg.preempted
    }

    fn now(&self) -> u64 {
        0
    }

    fn spin_threshold(&self) -> u32 {
        self.hv.cfg.spin_threshold
    }

    fn early_halt(&self) -> algo::EarlyHalt {
        algo::EarlyHalt::Preempted
    }

    fn yield_enabled(&self) -> bool {
        self.hv.cfg.yield_enabled
    }

    fn pending_enabled(&self) -> bool {
        self.hv.cfg.pending
    }

    fn yield_to(&self, cpu: usize) {
        trace(|| format!("cpu{} yields to cpu{cpu}", self.id));
    }

    fn stats_enabled(&self) -> bool {
        true
    }

    fn note(&self, what: &str, v: impl FnOnce() -> u64) {
        trace(|| format!("cpu{} {what} {}", self.id, v()));
    }

    fn mutant(&self, m: Mutant) -> bool {
        self.hv.cfg.mutant == Some(m)
    }
}

/// The lock state for `n` model CPUs in the configured mode.
pub(crate) fn new_lock(n: usize, cfg: &Config) -> sync::Arc<algo::PvLock> {
    sync::Arc::new(algo::PvLock::new(n, cfg.mode, 0).expect("allocation"))
}

/// Sum of a counter over CPUs, by its debugfs name.
pub(crate) fn counter(lock: &algo::PvLock, name: &str) -> u64 {
    algo::COUNTERS
        .iter()
        .find(|c| c.name().to_str() == Ok(name))
        .map(|c| lock.counter(*c))
        .unwrap_or(0)
}

/// Takes `word` through the algorithm on `cpu`, the fast path included (as
/// `queued_spin_lock()` does).
pub(crate) fn lock(l: &algo::PvLock, cpu: &Cpu<'_>, word: &ModelLock) {
    if word
        .cmpxchg_val(0, u32::from(qspinlock::Q_LOCKED_VAL))
        .is_err()
    {
        l.lock_slowpath(cpu, word);
    }
}

/// Releases `word` (fast path, then slowpath).
pub(crate) fn unlock(l: &algo::PvLock, cpu: &Cpu<'_>, word: &ModelLock) {
    l.unlock(cpu, word);
}

#[cfg(all(test, not(loom)))]
mod stress;

#[cfg(all(test, loom))]
mod loom_tests;

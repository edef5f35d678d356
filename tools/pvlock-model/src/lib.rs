// SPDX-License-Identifier: GPL-2.0

//! guest_pvlock's lock algorithm, the very file the kernel module builds
//! (`guest_pvlock/algo.rs`), run in userspace against a model of the lock
//! word and of the hypervisor:
//!
//! - [`ModelLock`]: the qspinlock word as one `u32`; the byte and half-word
//!   operations the kernel does with narrower atomics are compare-and-swap
//!   loops on the whole word (the same atomicity, one more step to explore).
//! - [`Hypervisor`]: per vCPU, a halted flag behind a mutex and a condition
//!   variable. `halt_if()` evaluates the guest's re-check and then blocks
//!   until kicked; `kick()` wakes a halted vCPU. With [`KickSemantics::Latched`]
//!   a kick to a running vCPU is kept and ends its next halt at once
//!   (upstream `KVM_HC_KICK_CPU`); with [`KickSemantics::NotHalted`] it is
//!   dropped and the kicker is told (`KVM_HC_PVLOCK_KICK`). A model
//!   "interrupt" can end a halt early, as an interrupt ends `safe_halt()`.
//!
//! Built with `--cfg loom`, the tests in `loom_tests` explore every
//! interleaving (up to loom's bounds) of a holder unlocking while a waiter
//! decides to halt; a lost wake-up leaves a thread blocked for good, which
//! loom reports as a deadlock. Built normally, `stress` runs threads
//! hammering one lock and checks mutual exclusion.

#[path = "../../../guest_pvlock/algo.rs"]
#[allow(dead_code)]
pub(crate) mod algo;
pub(crate) mod sync;

use algo::{Kick, LockWord, Platform};
use sync::{AtomicU32, Condvar, Mutex, Ordering};

/// The lock word.
pub struct ModelLock {
    word: AtomicU32,
}

impl Default for ModelLock {
    fn default() -> Self {
        Self::new(0)
    }
}

impl ModelLock {
    /// A lock whose word is `v` (1: held).
    pub fn new(v: u32) -> Self {
        ModelLock {
            word: AtomicU32::new(v),
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
    fn val(&self) -> u32 {
        self.word.load(Ordering::Relaxed)
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
        self.word.load(Ordering::Relaxed) as u8
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
        self.update(0xffff_0000, tail, Ordering::Relaxed) & 0xffff_0000
    }

    fn addr(&self) -> usize {
        self as *const Self as usize
    }
}

/// What a kick to a vCPU that is not halted does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KickSemantics {
    /// Kept for the target's next halt (`KVM_HC_KICK_CPU`'s pv_unhalted).
    Latched,
    /// Dropped; the kicker learns it (`KVM_HC_PVLOCK_KICK`).
    NotHalted,
}

#[derive(Default)]
struct VcpuState {
    halted: bool,
    latch: bool,
    /// An interrupt is pending: the next (or current) halt ends.
    irq: bool,
}

struct Vcpu {
    state: Mutex<VcpuState>,
    cv: Condvar,
}

/// The model hypervisor.
pub struct Hypervisor {
    vcpus: Vec<Vcpu>,
    semantics: KickSemantics,
    /// Mutation for the model check: halt without the guest's re-check.
    pub skip_recheck: bool,
    spin_threshold: u32,
    /// Kicks that found their target not halted.
    pub not_halted: AtomicU32,
}

impl Hypervisor {
    /// `n` vCPUs, kicks with `semantics`, waiters spinning `spin_threshold`
    /// loops before they halt.
    pub fn new(n: usize, semantics: KickSemantics, spin_threshold: u32) -> Self {
        Hypervisor {
            vcpus: (0..n)
                .map(|_| Vcpu {
                    state: Mutex::new(VcpuState::default()),
                    cv: Condvar::new(),
                })
                .collect(),
            semantics,
            skip_recheck: false,
            spin_threshold,
            not_halted: AtomicU32::new(0),
        }
    }

    /// An interrupt for `cpu`: ends its halt (like `safe_halt()` waking for
    /// an interrupt), or its next one if it is not halted.
    pub fn interrupt(&self, cpu: usize) {
        let v = &self.vcpus[cpu];
        let mut s = v.state.lock().unwrap();
        s.irq = true;
        v.cv.notify_all();
    }

    fn halt(&self, cpu: usize) {
        let v = &self.vcpus[cpu];
        let mut s = v.state.lock().unwrap();
        if s.latch || s.irq {
            s.latch = false;
            s.irq = false;
            return;
        }
        s.halted = true;
        while s.halted && !s.irq {
            s = v.cv.wait(s).unwrap();
        }
        s.halted = false;
        s.irq = false;
    }

    fn kick(&self, cpu: usize) -> Kick {
        let v = &self.vcpus[cpu];
        let mut s = v.state.lock().unwrap();
        if s.halted {
            s.halted = false;
            v.cv.notify_all();
            return Kick::Delivered;
        }
        match self.semantics {
            KickSemantics::Latched => {
                s.latch = true;
                Kick::Delivered
            }
            KickSemantics::NotHalted => {
                self.not_halted.fetch_add(1, Ordering::Relaxed);
                Kick::NotHalted
            }
        }
    }
}

/// One vCPU's view: the [`Platform`] the algorithm runs on.
pub struct Cpu<'a> {
    pub hv: &'a Hypervisor,
    pub id: usize,
}

impl Platform for Cpu<'_> {
    fn cpu(&self) -> usize {
        self.id
    }

    fn relax(&self) {
        #[cfg(loom)]
        loom::thread::yield_now();
        #[cfg(not(loom))]
        std::hint::spin_loop();
    }

    fn halt_if(&self, cond: impl FnOnce() -> bool) -> bool {
        // Interrupts are "off" here: nothing runs on this vCPU between the
        // re-check and the halt.
        if !self.hv.skip_recheck && !cond() {
            return false;
        }
        self.hv.halt(self.id);
        true
    }

    fn kick(&self, cpu: usize) -> Kick {
        self.hv.kick(cpu)
    }

    fn preempted(&self, _cpu: usize) -> bool {
        false
    }

    fn now(&self) -> u64 {
        0
    }

    fn spin_threshold(&self) -> u32 {
        self.hv.spin_threshold
    }

    fn stats_enabled(&self) -> bool {
        cfg!(not(loom))
    }
}

/// The lock state for the model's CPUs.
pub type Lock = algo::PvLock<4, 16>;

/// A fresh lock state (boxed: it is large).
pub fn new_lock() -> sync::Arc<Lock> {
    sync::Arc::new(Lock::new())
}

/// Sum of a counter over CPUs, by its debugfs name.
pub fn counter(lock: &Lock, name: &str) -> u64 {
    algo::COUNTERS
        .iter()
        .find(|(_, n)| n.to_str() == Ok(name))
        .map(|(c, _)| lock.counter(*c))
        .unwrap_or(0)
}

/// Takes and releases `word` through the algorithm on `cpu`, the fast paths
/// included (as `queued_spin_lock()` / `queued_spin_unlock()` do).
pub fn lock(l: &Lock, cpu: &Cpu<'_>, word: &ModelLock) {
    if word.cmpxchg_val(0, algo::Q_LOCKED_VAL as u32).is_err() {
        l.lock_slowpath(cpu, word);
    }
}

/// Releases `word` (fast path, then slowpath).
pub fn unlock(l: &Lock, cpu: &Cpu<'_>, word: &ModelLock) {
    l.unlock(cpu, word);
}

#[cfg(all(test, not(loom)))]
mod stress {
    use super::*;
    use std::sync::atomic::AtomicU64;

    fn hammer(semantics: KickSemantics, threads: usize, iters: u64, threshold: u32) {
        let hv = Hypervisor::new(threads, semantics, threshold);
        let l = new_lock();
        let word = ModelLock::default();
        // Not atomic on purpose as a read-modify-write: two owners at once
        // would lose increments.
        let counter = AtomicU64::new(0);
        let inside = AtomicU32::new(0);
        std::thread::scope(|s| {
            for id in 0..threads {
                let (hv, l, word, counter, inside) = (&hv, &l, &word, &counter, &inside);
                s.spawn(move || {
                    let cpu = Cpu { hv, id };
                    for i in 0..iters {
                        lock(l, &cpu, word);
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two owners");
                        let v = counter.load(Ordering::Relaxed);
                        if i % 64 == 0 {
                            std::thread::yield_now();
                        }
                        counter.store(v + 1, Ordering::Relaxed);
                        inside.fetch_sub(1, Ordering::SeqCst);
                        unlock(l, &cpu, word);
                    }
                });
            }
        });
        assert_eq!(counter.load(Ordering::Relaxed), threads as u64 * iters);
        assert_eq!(word.word(), 0, "lock left held or queued");
        assert!(l.idle());
        // Every waiter that halted as head was kicked by a slow unlock.
        assert_eq!(
            counter_of(&l, "released_slow"),
            counter_of(&l, "released_slow_kicked")
        );
        assert_eq!(counter_of(&l, "bad_unlocks"), 0);
    }

    fn counter_of(l: &Lock, name: &str) -> u64 {
        counter(l, name)
    }

    #[test]
    fn mutual_exclusion_pvlock_kick() {
        hammer(KickSemantics::NotHalted, 4, 20_000, 4);
    }

    #[test]
    fn mutual_exclusion_kick_cpu() {
        hammer(KickSemantics::Latched, 4, 20_000, 4);
    }

    #[test]
    fn halting_happens_and_is_undone() {
        // A tiny threshold makes waiters halt often: the protocol paths run.
        let hv = Hypervisor::new(3, KickSemantics::NotHalted, 1);
        let l = new_lock();
        let word = ModelLock::default();
        std::thread::scope(|s| {
            for id in 0..3 {
                let (hv, l, word) = (&hv, &l, &word);
                s.spawn(move || {
                    let cpu = Cpu { hv, id };
                    for _ in 0..20_000 {
                        lock(l, &cpu, word);
                        std::thread::yield_now();
                        unlock(l, &cpu, word);
                    }
                });
            }
        });
        assert!(counter(&l, "halts_head") + counter(&l, "halts_node") > 0);
        assert!(counter(&l, "kicks") > 0);
        assert_eq!(word.word(), 0);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::thread;
    use std::sync::Arc as StdArc;

    /// CPU 0 holds the lock and releases it; CPU 1 wants it, spins once and
    /// halts; optionally an interrupt ends CPU 1's halt early once.
    fn holder_and_waiter(semantics: KickSemantics, interrupt: bool, skip_recheck: bool) {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        b.check(move || {
            let mut hv = Hypervisor::new(2, semantics, 1);
            hv.skip_recheck = skip_recheck;
            let hv = Arc::new(hv);
            let l = new_lock();
            let word = Arc::new(ModelLock::new(algo::Q_LOCKED_VAL as u32));

            let waiter = {
                let (hv, l, word) = (hv.clone(), l.clone(), word.clone());
                thread::spawn(move || {
                    let cpu = Cpu { hv: &hv, id: 1 };
                    lock(&l, &cpu, &word);
                    unlock(&l, &cpu, &word);
                })
            };
            let irq = interrupt.then(|| {
                let hv = hv.clone();
                thread::spawn(move || hv.interrupt(1))
            });
            {
                let cpu = Cpu { hv: &hv, id: 0 };
                unlock(&l, &cpu, &word);
            }
            waiter.join().unwrap();
            if let Some(i) = irq {
                i.join().unwrap();
            }
            assert_eq!(word.word(), 0);
        });
    }

    #[test]
    fn halt_kick_pvlock_kick() {
        holder_and_waiter(KickSemantics::NotHalted, false, false);
    }

    #[test]
    fn halt_kick_kick_cpu() {
        holder_and_waiter(KickSemantics::Latched, false, false);
    }

    #[test]
    fn halt_kick_with_interrupt_pvlock_kick() {
        holder_and_waiter(KickSemantics::NotHalted, true, false);
    }

    #[test]
    fn halt_kick_with_interrupt_kick_cpu() {
        holder_and_waiter(KickSemantics::Latched, true, false);
    }

    /// The mutation: without the re-check before halting, loom finds the
    /// lost wake-up (a waiter halted for good: a deadlock).
    #[test]
    fn without_recheck_a_wakeup_is_lost() {
        let found = std::panic::catch_unwind(|| {
            holder_and_waiter(KickSemantics::NotHalted, true, true);
        });
        let err = found.expect_err("loom must find the lost wake-up");
        let msg = err
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        assert!(
            msg.to_lowercase().contains("deadlock"),
            "expected loom to report a deadlock, got: {msg}"
        );
        let _ = StdArc::new(());
    }

    /// Two waiters behind a holder: the queue, the hand-over to a halted
    /// successor (hashed by the new head for the unlock to kick).
    #[test]
    fn queue_of_two_waiters() {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(2);
        b.check(|| {
            let hv = Arc::new(Hypervisor::new(3, KickSemantics::NotHalted, 1));
            let l = new_lock();
            let word = Arc::new(ModelLock::new(algo::Q_LOCKED_VAL as u32));
            let mut ts = Vec::new();
            for id in 1..3 {
                let (hv, l, word) = (hv.clone(), l.clone(), word.clone());
                ts.push(thread::spawn(move || {
                    let cpu = Cpu { hv: &hv, id };
                    lock(&l, &cpu, &word);
                    unlock(&l, &cpu, &word);
                }));
            }
            {
                let cpu = Cpu { hv: &hv, id: 0 };
                unlock(&l, &cpu, &word);
            }
            for t in ts {
                t.join().unwrap();
            }
            assert_eq!(word.word(), 0);
        });
    }
}

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

// The model serves two test builds, loom and plain threads, each using a
// part of it.
#![allow(dead_code)]

#[path = "../../../guest_pvlock/algo.rs"]
#[allow(dead_code)]
pub(crate) mod algo;
pub(crate) mod sync;

use algo::{Kick, LockWord, Platform};
use sync::{AtomicU32, Condvar, Mutex, Ordering};

/// The lock word.
pub(crate) struct ModelLock {
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
        self as *const Self as usize
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

/// What a kick to a vCPU that is not halted does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum KickSemantics {
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
pub(crate) struct Hypervisor {
    vcpus: Vec<Vcpu>,
    semantics: KickSemantics,
    /// Mutation for the model check: halt without the guest's re-check.
    pub(crate) skip_recheck: bool,
    spin_threshold: u32,
    /// Kicks that found their target not halted.
    pub(crate) not_halted: AtomicU32,
    /// Steps each vCPU (and, last, anyone else) took, for `relax()` under
    /// loom.
    epoch: Mutex<Vec<u64>>,
    epoch_cv: Condvar,
}

impl Hypervisor {
    /// `n` vCPUs, kicks with `semantics`, waiters spinning `spin_threshold`
    /// loops before they halt.
    pub(crate) fn new(n: usize, semantics: KickSemantics, spin_threshold: u32) -> Self {
        if std::env::var_os("MODEL_TRACE").is_some() {
            let mut t = TRACE.lock().unwrap();
            t.clear();
            t.push("=== new execution".into());
        }
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
            epoch: Mutex::new(vec![0; n + 1]),
            epoch_cv: Condvar::new(),
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
    /// again (halted for good) shows up as a deadlock, which it is.
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

    fn halt(&self, cpu: usize) {
        let v = &self.vcpus[cpu];
        let mut s = v.state.lock().unwrap();
        if s.latch || s.irq {
            s.latch = false;
            s.irq = false;
            drop(s);
            self.progress(cpu);
            return;
        }
        s.halted = true;
        trace(|| format!("cpu{cpu} halts"));
        // Halted is a step others may wait for (a kicker retrying).
        self.progress(cpu);
        while s.halted && !s.irq {
            s = v.cv.wait(s).unwrap();
        }
        s.halted = false;
        s.irq = false;
    }

    fn kick(&self, from: usize, cpu: usize) -> Kick {
        let v = &self.vcpus[cpu];
        let mut s = v.state.lock().unwrap();
        let r = if s.halted {
            s.halted = false;
            v.cv.notify_all();
            Kick::Delivered
        } else {
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
        };
        drop(s);
        trace(|| format!("cpu{from} kick cpu{cpu}: {r:?}"));
        self.progress(from);
        r
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

    fn halt_if(&self, cond: impl FnOnce() -> bool) -> bool {
        // Interrupts are "off" here: nothing runs on this vCPU between the
        // re-check and the halt.
        if !self.hv.skip_recheck && !cond() {
            trace(|| format!("cpu{} halt_if: condition false", self.id));
            return false;
        }
        self.hv.halt(self.id);
        true
    }

    fn kick(&self, cpu: usize) -> Kick {
        self.hv.kick(self.id, cpu)
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

    fn early_halt(&self) -> u32 {
        algo::EARLY_PREEMPTED
    }

    fn yield_enabled(&self) -> bool {
        false
    }

    fn yield_to(&self, _cpu: usize) {}

    fn stats_enabled(&self) -> bool {
        cfg!(not(loom))
    }

    fn kick_retry_polls(&self) -> u32 {
        // Polling only delays the next kick; under loom a bounded busy-wait
        // would block in `relax()` (see `wait_for_progress`).
        if cfg!(loom) {
            0
        } else {
            algo::KICK_RETRY_POLLS
        }
    }

    fn note(&self, what: &str, v: impl FnOnce() -> u64) {
        trace(|| format!("cpu{} {what} {}", self.id, v()));
    }
}

/// The lock state for the model's CPUs.
pub(crate) type Lock = algo::PvLock<4, 16>;

/// A fresh lock state (boxed: it is large).
pub(crate) fn new_lock() -> sync::Arc<Lock> {
    sync::Arc::new(Lock::new())
}

/// Sum of a counter over CPUs, by its debugfs name.
pub(crate) fn counter(lock: &Lock, name: &str) -> u64 {
    algo::COUNTERS
        .iter()
        .find(|(_, n)| n.to_str() == Ok(name))
        .map(|(c, _)| lock.counter(*c))
        .unwrap_or(0)
}

/// Takes and releases `word` through the algorithm on `cpu`, the fast paths
/// included (as `queued_spin_lock()` / `queued_spin_unlock()` do).
pub(crate) fn lock(l: &Lock, cpu: &Cpu<'_>, word: &ModelLock) {
    if word.cmpxchg_val(0, u32::from(algo::Q_LOCKED_VAL)).is_err() {
        l.lock_slowpath(cpu, word);
    }
}

/// Releases `word` (fast path, then slowpath).
pub(crate) fn unlock(l: &Lock, cpu: &Cpu<'_>, word: &ModelLock) {
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
                    let cpu = Cpu::new(hv, id);
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
                    let cpu = Cpu::new(hv, id);
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
    use crate::sync::Arc;
    use loom::thread;

    /// CPU 0 holds the lock and releases it; CPU 1 wants it, spins once and
    /// halts; optionally an interrupt ends CPU 1's halt early once.
    /// With MODEL_TRACE set, a failing execution prints its trace.
    fn trace_on_panic() {
        if std::env::var_os("MODEL_TRACE").is_some() {
            std::panic::set_hook(Box::new(|info| {
                eprintln!("{info}");
                if let Ok(t) = TRACE.try_lock() {
                    for l in t.iter() {
                        eprintln!("  trace: {l}");
                    }
                }
            }));
        }
    }

    fn holder_and_waiter(semantics: KickSemantics, interrupt: bool, skip_recheck: bool) {
        trace_on_panic();
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        // Kick retries and spin loops make long (finite) paths.
        b.max_branches = 100_000;
        b.check(move || {
            let mut hv = Hypervisor::new(2, semantics, 1);
            hv.skip_recheck = skip_recheck;
            let hv = Arc::new(hv);
            let l = new_lock();
            let word = Arc::new(ModelLock::new(u32::from(algo::Q_LOCKED_VAL)));

            let waiter = {
                let (hv, l, word) = (hv.clone(), l.clone(), word.clone());
                thread::spawn(move || {
                    let cpu = Cpu::new(&hv, 1);
                    lock(&l, &cpu, &word);
                    unlock(&l, &cpu, &word);
                    hv.progress(1);
                })
            };
            let irq = interrupt.then(|| {
                let hv = hv.clone();
                thread::spawn(move || {
                    hv.interrupt(1);
                })
            });
            {
                let cpu = Cpu::new(&hv, 0);
                unlock(&l, &cpu, &word);
                hv.progress(0);
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

    /// The mutation, run by `without_recheck_a_wakeup_is_lost` in a child
    /// process (loom aborts the process when it finds a deadlock).
    #[test]
    #[ignore = "run by without_recheck_a_wakeup_is_lost"]
    fn mutation_no_recheck() {
        holder_and_waiter(KickSemantics::NotHalted, true, true);
    }

    /// Without the re-check before halting, loom finds the lost wake-up (a
    /// waiter halted for good, which loom reports as a deadlock).
    #[test]
    fn without_recheck_a_wakeup_is_lost() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "loom_tests::mutation_no_recheck",
                "--ignored",
                "--nocapture",
            ])
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "the mutation must fail:\n{text}");
        assert!(
            text.contains("deadlock"),
            "expected a deadlock report:\n{text}"
        );
    }

    /// Two waiters behind a holder: the queue, the hand-over to a halted
    /// successor (hashed by the new head for the unlock to kick).
    #[test]
    fn queue_of_two_waiters() {
        trace_on_panic();
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(2);
        b.max_branches = 100_000;
        b.check(|| {
            let hv = Arc::new(Hypervisor::new(3, KickSemantics::NotHalted, 1));
            let l = new_lock();
            let word = Arc::new(ModelLock::new(u32::from(algo::Q_LOCKED_VAL)));
            let mut ts = Vec::new();
            for id in 1..3 {
                let (hv, l, word) = (hv.clone(), l.clone(), word.clone());
                ts.push(thread::spawn(move || {
                    let cpu = Cpu::new(&hv, id);
                    lock(&l, &cpu, &word);
                    unlock(&l, &cpu, &word);
                    hv.progress(id);
                }));
            }
            {
                let cpu = Cpu::new(&hv, 0);
                unlock(&l, &cpu, &word);
                hv.progress(0);
            }
            for t in ts {
                t.join().unwrap();
            }
            assert_eq!(word.word(), 0);
        });
    }
}

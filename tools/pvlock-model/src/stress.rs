// SPDX-License-Identifier: GPL-2.0

//! The algorithm with real threads: mutual exclusion, every mode, faults.
//! A lost wake-up blocks a thread for good: each run is bounded, and a run
//! that does not finish in time fails as a deadlock.

use super::*;
use std::sync::atomic::AtomicU64 as StdU64;
use std::time::Duration;

/// Returns once a waiter has marked `word` slow (panics after 60 s).
fn wait_for_slow_mark(word: &ModelLock) {
    let t = std::time::Instant::now();
    while word.word() & 0xff != u32::from(qspinlock::Q_SLOW_VAL) {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the waiter never marked the lock"
        );
        std::thread::yield_now();
    }
}

/// However the threads of `hammer` happen to be scheduled, one release takes the
/// slow path: CPU 1 waits for the lock CPU 0 holds, and CPU 0 releases it
/// only once the waiter has marked it slow. (On a loaded machine the
/// threads of a run can take turns without ever meeting on the lock; the
/// tests that count kicks need at least one.)
fn slow_release(hv: &Hypervisor, l: &algo::PvLock, word: &ModelLock) {
    let holder = Cpu::new(hv, 0);
    lock(l, &holder, word);
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            let cpu = Cpu::new(hv, 1);
            lock(l, &cpu, word);
            unlock(l, &cpu, word);
        });
        wait_for_slow_mark(word);
        unlock(l, &holder, word);
        w.join().unwrap();
    });
}

/// `threads` threads take and release one lock `iters` times each; returns
/// the lock state for the counters. Panics on two owners at once, a lost
/// increment, a lock left held, a bad unlock, or a run over 120 s.
fn hammer(cfg: Config, threads: usize, iters: u64) -> std::sync::Arc<algo::PvLock> {
    hammer_with(cfg, threads, iters, false)
}

/// [`hammer`], with interrupts for every vCPU every 20 us if `interrupts`
/// (they end waits, as a timer's do in a guest waiting with interrupts
/// enabled).
fn hammer_with(
    cfg: Config,
    threads: usize,
    iters: u64,
    interrupts: bool,
) -> std::sync::Arc<algo::PvLock> {
    let (tx, rx) = std::sync::mpsc::channel();
    let l = new_lock(threads, &cfg);
    let l2 = l.clone();
    std::thread::spawn(move || {
        let hv = Hypervisor::new(threads, cfg);
        let word = ModelLock::default();
        // Not atomic on purpose as a read-modify-write: two owners at once
        // would lose increments.
        let counter = StdU64::new(0);
        let inside = AtomicU32::new(0);
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let irqs = interrupts.then(|| {
                let (hv, done) = (&hv, &done);
                s.spawn(move || {
                    while !done.load(Ordering::Relaxed) {
                        for id in 0..threads {
                            hv.interrupt(id);
                        }
                        std::thread::sleep(Duration::from_micros(20));
                    }
                })
            });
            if threads >= 2 {
                slow_release(&hv, &l2, &word);
            }
            let workers: Vec<_> = (0..threads)
                .map(|id| {
                    let (hv, l, word, counter, inside) = (&hv, &l2, &word, &counter, &inside);
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
                    })
                })
                .collect();
            for w in workers {
                w.join().unwrap();
            }
            done.store(true, Ordering::Relaxed);
            if let Some(i) = irqs {
                i.join().unwrap();
            }
        });
        assert_eq!(counter.load(Ordering::Relaxed), threads as u64 * iters);
        assert_eq!(word.word(), 0, "lock left held or queued");
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(120))
        .expect("a thread never got the lock: a lost wake-up");
    assert!(l.idle());
    assert_eq!(counter(&l, "bad_unlocks"), 0);
    l
}

#[test]
fn mutual_exclusion_wait_hypercall() {
    let l = hammer(Config::new(algo::Mode::Wait), 4, 20_000);
    // Every slow release kicked, once.
    assert_eq!(counter(&l, "released_slow"), counter(&l, "kicks"));
    assert_eq!(counter(&l, "kick_failures"), 0);
}

#[test]
fn mutual_exclusion_hlt_kick_cpu() {
    let l = hammer(Config::new(algo::Mode::Hlt), 4, 20_000);
    assert_eq!(counter(&l, "released_slow"), counter(&l, "kicks"));
}

#[test]
fn waits_happen_and_kicks_are_held() {
    // A tiny threshold makes waiters wait often: the protocol paths run.
    let l = hammer(Config::new(algo::Mode::Wait), 3, 20_000);
    assert!(counter(&l, "halts_head") + counter(&l, "halts_node") > 0);
    assert!(counter(&l, "kicks") > 0);
}

#[test]
fn refused_kicks_wake_by_nmi() {
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.fault = Fault::Refused;
    let l = hammer(cfg, 3, 5_000);
    assert!(counter(&l, "kick_failures") > 0);
    assert_eq!(counter(&l, "kicks_fallback"), counter(&l, "kick_failures"));
    assert_eq!(counter(&l, "kicks_nmi"), counter(&l, "kick_failures"));
    assert_eq!(counter(&l, "mode_changes"), 0);
}

#[test]
fn refused_kicks_without_kick_cpu_wake_with_an_nmi() {
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.fault = Fault::Refused;
    cfg.have_kick_cpu = false;
    let l = hammer(cfg, 3, 5_000);
    assert!(counter(&l, "kicks_nmi") > 0);
    assert_eq!(counter(&l, "kicks_nmi"), counter(&l, "kick_failures"));
}

#[test]
fn withdrawn_hypercalls_move_to_hlt() {
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.fault = Fault::Gone;
    let l = hammer(cfg, 3, 5_000);
    assert_eq!(l.mode(), algo::Mode::Hlt);
    assert_eq!(counter(&l, "mode_changes"), 1);
}

#[test]
fn no_kick_at_all_moves_to_spin() {
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.fault = Fault::AllGone;
    let l = hammer(cfg, 3, 5_000);
    assert_eq!(l.mode(), algo::Mode::Spin);
    assert_eq!(counter(&l, "mode_changes"), 2);
}

#[test]
fn preempted_holders_early_waits_and_yields() {
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.preempted = true;
    cfg.yield_enabled = true;
    cfg.spin_threshold = 1 << 12;
    hammer(cfg, 4, 10_000);

    // However the threads are scheduled: CPU 1 takes the lock through the
    // slowpath (so the lock knows its owner) and holds it; CPU 2, the
    // queue head, finds that owner preempted, yields to it once, then
    // waits before its threshold.
    let l = new_lock(3, &cfg);
    let hv = Hypervisor::new(3, cfg);
    let word = ModelLock::default();
    let first = Cpu::new(&hv, 0);
    let (has_it, go) = (AtomicU32::new(0), AtomicU32::new(0));
    lock(&l, &first, &word);
    std::thread::scope(|s| {
        s.spawn(|| {
            let cpu = Cpu::new(&hv, 1);
            lock(&l, &cpu, &word);
            has_it.store(1, Ordering::SeqCst);
            while go.load(Ordering::SeqCst) == 0 {
                std::thread::yield_now();
            }
            unlock(&l, &cpu, &word);
        });
        wait_for_slow_mark(&word);
        unlock(&l, &first, &word);
        while has_it.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        s.spawn(|| {
            let cpu = Cpu::new(&hv, 2);
            lock(&l, &cpu, &word);
            unlock(&l, &cpu, &word);
        });
        wait_for_slow_mark(&word);
        go.store(1, Ordering::SeqCst);
    });
    assert_eq!(word.word(), 0);
    assert_eq!(counter(&l, "yields"), 1);
    assert_eq!(counter(&l, "halts_early"), 1);
}

/// A waiter that finds the lock held and nobody waiting spins as the
/// pending waiter and takes the lock when it is released: no queue, no
/// wait.
#[test]
fn a_pending_waiter_takes_the_released_lock() {
    let mut cfg = Config::new(algo::Mode::Wait);
    // The largest threshold: the pending waiter outlasts any delay here.
    cfg.spin_threshold = abi::MAX_SPIN_THRESHOLD;
    let l = new_lock(2, &cfg);
    let hv = Hypervisor::new(2, cfg);
    let word = ModelLock::default();
    let holder = Cpu::new(&hv, 0);
    lock(&l, &holder, &word);
    std::thread::scope(|s| {
        let w = s.spawn(|| {
            let cpu = Cpu::new(&hv, 1);
            lock(&l, &cpu, &word);
            unlock(&l, &cpu, &word);
        });
        // Release only once the waiter has claimed the pending bit.
        let t = std::time::Instant::now();
        while word.word() & qspinlock::Q_PENDING_VAL == 0 {
            assert!(t.elapsed() < Duration::from_secs(60), "no pending waiter");
            std::thread::yield_now();
        }
        unlock(&l, &holder, &word);
        w.join().unwrap();
    });
    assert_eq!(word.word(), 0);
    assert_eq!(counter(&l, "taken_pending"), 1);
    assert_eq!(counter(&l, "taken_slow"), 0);
}

/// Pending waiters and queue heads race for the released lock.
#[test]
fn pending_waiters_and_queue_heads() {
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.spin_threshold = 1 << 12;
    hammer(cfg, 4, 20_000);
}

#[test]
fn without_pending_every_waiter_queues() {
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.spin_threshold = 1 << 12;
    cfg.pending = false;
    let l = hammer(cfg, 4, 20_000);
    assert_eq!(counter(&l, "taken_pending"), 0);
    assert!(counter(&l, "taken_slow") > 0);
}

#[test]
fn interrupts_end_waits_and_lose_no_kick() {
    // Interrupts end waits before their kicks: every such wait is told
    // apart from a kicked one, and none is counted as a lost kick.
    let l = hammer_with(Config::new(algo::Mode::Wait), 3, 20_000, true);
    assert!(counter(&l, "waits_other") > 0, "no interrupt ended a wait");
    assert_eq!(counter(&l, "wakeups_lost"), 0);
    assert_eq!(counter(&l, "kick_failures"), 0);
}

#[test]
fn kicks_lost_in_the_host_are_counted() {
    // A host that reports kicks delivered and delivers none: interrupts end
    // the waits, and the waits that ended without the kick the host
    // reported are counted, whichever half (kicker or waiter) came last.
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.fault = Fault::Lost;
    let l = hammer_with(cfg, 3, 5_000, true);
    assert!(counter(&l, "released_slow") > 0);
    let lost = counter(&l, "wakeups_lost");
    assert!(lost > 0, "no lost kick counted");
    // Each kick is counted once at most, and only kicks that reported a
    // woken target.
    assert!(lost <= counter(&l, "kicks") - counter(&l, "kicks_held"));
}

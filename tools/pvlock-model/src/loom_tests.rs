// SPDX-License-Identifier: GPL-2.0

//! The model check: every interleaving (up to loom's bounds) of small
//! scenarios. A lost wake-up leaves a thread blocked for good (loom reports
//! a deadlock); two owners at once touch the critical section's
//! `UnsafeCell` concurrently (loom reports a causality violation).

use super::*;
use crate::sync::Arc;
use loom::cell::UnsafeCell;
use loom::thread;

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

fn builder(preemptions: usize) -> loom::model::Builder {
    trace_on_panic();
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    // Spin loops make long (finite) paths.
    b.max_branches = 200_000;
    b
}

/// The critical section: owners take turns on this cell, and loom reports
/// two at once.
struct Shared {
    cell: UnsafeCell<u64>,
}

impl Shared {
    fn new() -> Self {
        Shared {
            cell: UnsafeCell::new(0),
        }
    }

    fn enter(&self) {
        // SAFETY: Only the lock's owner gets here: that is what is checked.
        self.cell.with_mut(|p| unsafe { *p += 1 });
    }

    fn total(&self) -> u64 {
        // SAFETY: Every thread has been joined.
        self.cell.with(|p| unsafe { *p })
    }
}

/// CPU 0 holds the lock and releases it; CPU 1 wants it, spins once and
/// waits; with `interrupt`, an interrupt may end CPU 1's wait early.
fn holder_and_waiter(cfg: Config, interrupt: bool) {
    builder(3).check(move || {
        let hv = Arc::new(Hypervisor::new(2, cfg));
        let l = new_lock(2, &cfg);
        let word = Arc::new(ModelLock::new(u32::from(qspinlock::Q_LOCKED_VAL)));

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
            thread::spawn(move || hv.interrupt(1))
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
        assert_eq!(
            counter(&l, "bad_unlocks"),
            0,
            "an unlock found no waiter to kick"
        );
        if matches!(cfg.fault, Fault::None) {
            assert_eq!(counter(&l, "kick_failures"), 0, "a kick was refused");
        }
        // An interrupt that ends the wait as its kick comes is told apart
        // from a lost kick in every interleaving.
        assert_eq!(counter(&l, "wakeups_lost"), 0, "a kick counted as lost");
    });
}

/// Two waiters behind a holder: the queue, the hand-over to a waiting
/// successor (hashed by the new head for the unlock to kick); with
/// `pending`, one of them may be the pending waiter, racing the other, the
/// queue head, for the released lock. Both touch the critical section.
fn two_waiters(cfg: Config) {
    builder(2).check(move || {
        let hv = Arc::new(Hypervisor::new(3, cfg));
        let l = new_lock(3, &cfg);
        let word = Arc::new(ModelLock::new(u32::from(qspinlock::Q_LOCKED_VAL)));
        let shared = Arc::new(Shared::new());
        let ts: Vec<_> = (1..3)
            .map(|id| {
                let (hv, l, word, shared) = (hv.clone(), l.clone(), word.clone(), shared.clone());
                thread::spawn(move || {
                    let cpu = Cpu::new(&hv, id);
                    lock(&l, &cpu, &word);
                    shared.enter();
                    unlock(&l, &cpu, &word);
                    hv.progress(id);
                })
            })
            .collect();
        {
            let cpu = Cpu::new(&hv, 0);
            unlock(&l, &cpu, &word);
            hv.progress(0);
        }
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(shared.total(), 2);
        assert_eq!(word.word(), 0);
        assert_eq!(counter(&l, "kick_failures"), 0, "a kick was refused");
    });
}

/// Two CPUs take the lock twice each, from free, touching the critical
/// section: mutual exclusion, and node, token and hash-entry reuse.
fn twice_each(cfg: Config) {
    builder(2).check(move || {
        let hv = Arc::new(Hypervisor::new(2, cfg));
        let l = new_lock(2, &cfg);
        let word = Arc::new(ModelLock::default());
        let shared = Arc::new(Shared::new());
        let ts: Vec<_> = (0..2)
            .map(|id| {
                let (hv, l, word, shared) = (hv.clone(), l.clone(), word.clone(), shared.clone());
                thread::spawn(move || {
                    let cpu = Cpu::new(&hv, id);
                    for _ in 0..2 {
                        lock(&l, &cpu, &word);
                        shared.enter();
                        unlock(&l, &cpu, &word);
                        hv.progress(id);
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(shared.total(), 4);
        assert_eq!(word.word(), 0);
        assert_eq!(
            counter(&l, "bad_unlocks"),
            0,
            "an unlock found no waiter to kick"
        );
    });
}

#[test]
fn wait_and_kick() {
    holder_and_waiter(Config::new(algo::Mode::Wait), false);
}

#[test]
fn wait_and_kick_with_interrupt() {
    holder_and_waiter(Config::new(algo::Mode::Wait), true);
}

#[test]
fn hlt_and_kick_cpu() {
    holder_and_waiter(Config::new(algo::Mode::Hlt), false);
}

#[test]
fn hlt_and_kick_cpu_with_interrupt() {
    holder_and_waiter(Config::new(algo::Mode::Hlt), true);
}

#[test]
fn queue_of_two_waiters() {
    two_waiters(Config::new(algo::Mode::Wait));
}

#[test]
fn mutual_exclusion_and_reuse() {
    twice_each(Config::new(algo::Mode::Wait));
}

/// The scenarios above run with the pending waiter (the model's `Config`
/// default, though the module's `pending` is off by default); these
/// two without it, where every waiter queues.
#[test]
fn queue_of_two_waiters_without_pending() {
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.pending = false;
    two_waiters(cfg);
}

/// A queued waiter's wait, ended by its kick or by an interrupt that comes
/// as the kick does: in every interleaving the wait's result and the
/// kick's agree (no lost kick counted), as KVM's wait end promises.
#[test]
fn wait_and_kick_queued_with_interrupt() {
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.pending = false;
    holder_and_waiter(cfg, true);
}

#[test]
fn mutual_exclusion_and_reuse_without_pending() {
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.pending = false;
    twice_each(cfg);
}

/// The pending waiter spins longer than one loop, next to a queue head.
#[test]
fn pending_waiter_spins_beside_the_head() {
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.spin_threshold = 3;
    two_waiters(cfg);
}

#[test]
fn preempted_holder_early_wait_and_yield() {
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.preempted = true;
    cfg.yield_enabled = true;
    cfg.spin_threshold = 1 << 10;
    holder_and_waiter(cfg, false);
}

#[test]
fn refused_kick_wakes_by_nmi_not_kick_cpu() {
    // KVM_HC_KICK_CPU to the same APIC ID would reach nobody.
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.fault = Fault::Refused;
    holder_and_waiter(cfg, false);
}

#[test]
fn refused_kick_without_kick_cpu_sends_an_nmi() {
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.fault = Fault::Refused;
    cfg.have_kick_cpu = false;
    holder_and_waiter(cfg, false);
}

#[test]
fn withdrawn_hypercalls_fall_back_to_hlt() {
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.fault = Fault::Gone;
    holder_and_waiter(cfg, false);
}

#[test]
fn no_kick_at_all_spins() {
    let mut cfg = Config::new(algo::Mode::Wait);
    cfg.fault = Fault::AllGone;
    holder_and_waiter(cfg, false);
}

/// The seeded bugs, each with the scenario that shows it, and what loom
/// must report.
const MUTANTS: [(&str, &str); 7] = [
    ("no-recheck", "deadlock"),
    ("no-held-kick", "deadlock"),
    ("no-slow-mark", "deadlock"),
    ("token-after-recheck", "deadlock"),
    ("mark-before-hash", "an unlock found no waiter to kick"),
    ("no-fallback", "deadlock"),
    ("pending-plain-take", "Causality violation"),
];

/// Runs the mutant named by `PVLOCK_MUTANT`; `mutants_fail_the_model` runs
/// it in a child process (loom aborts on a deadlock).
#[test]
#[ignore = "run by mutants_fail_the_model"]
fn mutant() {
    let name = std::env::var("PVLOCK_MUTANT").unwrap_or_default();
    let mut cfg = Config::new(algo::Mode::Wait);
    // The wait and kick mutants are bugs of the queue: without the pending
    // waiter every waiter queues, and the scenarios reach them within the
    // preemption bound.
    cfg.pending = false;
    match name.as_str() {
        "no-recheck" => {
            cfg.mutant = Some(Mutant::NoRecheck);
            holder_and_waiter(cfg, false);
        }
        "no-held-kick" => {
            cfg.hold_kicks = false;
            holder_and_waiter(cfg, false);
        }
        "no-slow-mark" => {
            cfg.mutant = Some(Mutant::NoSlowMark);
            two_waiters(cfg);
        }
        "token-after-recheck" => {
            cfg.mutant = Some(Mutant::TokenAfterRecheck);
            holder_and_waiter(cfg, false);
        }
        "mark-before-hash" => {
            cfg.mutant = Some(Mutant::MarkBeforeHash);
            holder_and_waiter(cfg, false);
        }
        "no-fallback" => {
            cfg.mutant = Some(Mutant::NoFallback);
            cfg.fault = Fault::Refused;
            holder_and_waiter(cfg, false);
        }
        "pending-plain-take" => {
            cfg.mutant = Some(Mutant::PendingPlainTake);
            cfg.pending = true;
            two_waiters(cfg);
        }
        other => panic!("unknown mutant {other:?}"),
    }
}

/// Runs mutant `name` in a child process; its output and whether it failed.
fn run_mutant(name: &str) -> (bool, String) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "loom_tests::mutant", "--ignored", "--nocapture"])
        .env("PVLOCK_MUTANT", name)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    (!out.status.success(), text.into_owned())
}

/// Each seeded bug makes loom find the failure it causes.
#[test]
fn mutants_fail_the_model() {
    for (name, want) in MUTANTS {
        let (failed, text) = run_mutant(name);
        assert!(failed, "mutant {name} must fail the model:\n{text}");
        assert!(
            text.contains(want),
            "mutant {name}: expected {want:?} in:\n{text}"
        );
        eprintln!("mutant {name}: the model fails ({want})");
    }
}

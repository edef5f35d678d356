// SPDX-License-Identifier: GPL-2.0

//! The kernel under `algo.rs`: the lock word of a kernel `qspinlock` and a
//! KVM guest as the [`Platform`].

use crate::abi::{self, Kick};
use crate::algo::{EarlyHalt, KickError, LockWord, Platform, Wait, Waited};
use crate::params;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use kernel::pvlock::{guest, lockops::QSpinLock};
use kernel::sync::atomic::{Atomic, Relaxed};

impl LockWord for QSpinLock {
    #[inline(always)]
    fn val(&self) -> u32 {
        QSpinLock::val(self)
    }

    #[inline(always)]
    fn cmpxchg_val(&self, old: u32, new: u32) -> Result<u32, u32> {
        QSpinLock::cmpxchg_val(self, old, new)
    }

    #[inline(always)]
    fn cmpxchg_locked(&self, old: u8, new: u8) -> Result<u8, u8> {
        QSpinLock::cmpxchg_locked(self, old, new)
    }

    #[inline(always)]
    fn xchg_locked(&self, new: u8) -> u8 {
        QSpinLock::xchg_locked(self, new)
    }

    #[inline(always)]
    fn locked(&self) -> u8 {
        QSpinLock::locked(self)
    }

    #[inline(always)]
    fn set_locked(&self, v: u8) {
        QSpinLock::set_locked(self, v)
    }

    #[inline(always)]
    fn release_locked(&self, v: u8) {
        QSpinLock::release_locked(self, v)
    }

    #[inline(always)]
    fn set_pending(&self, v: u8) {
        QSpinLock::set_pending(self, v)
    }

    #[inline(always)]
    fn cmpxchg_locked_pending(&self, old: u16, new: u16) -> bool {
        QSpinLock::cmpxchg_locked_pending(self, old, new)
    }

    #[inline(always)]
    fn xchg_tail(&self, tail: u32) -> u32 {
        QSpinLock::xchg_tail(self, tail)
    }

    #[inline(always)]
    fn addr(&self) -> usize {
        QSpinLock::addr(self)
    }
}

/// Whether `KVM_HC_KICK_CPU` is offered (`KVM_FEATURE_PV_UNHALT`). Read on
/// the lock's paths, so a `core` atomic, like [`TSC_MULT`].
pub(crate) static HAVE_KICK_CPU: AtomicBool = AtomicBool::new(false);
/// Whether `KVM_HC_SCHED_YIELD` is offered.
pub(crate) static HAVE_SCHED_YIELD: AtomicBool = AtomicBool::new(false);
/// The statistics' clock: a [`guest::tsc_ns_mult`] multiplier, 0 for
/// `local_clock()`. Read by every timed slow acquisition, so a `core`
/// atomic (a plain `mov`).
pub(crate) static TSC_MULT: AtomicU64 = AtomicU64::new(0);

/// Faults injected so far (`inject_*` parameters): kicks dropped, kicks
/// failed, waits delayed.
pub(crate) static INJECTED_DROPS: Atomic<u64> = Atomic::new(0);
pub(crate) static INJECTED_FAILURES: Atomic<u64> = Atomic::new(0);
pub(crate) static INJECTED_DELAYS: Atomic<u64> = Atomic::new(0);
/// Kicks made while an `inject_*_kick` parameter is on, to pick every Nth.
static INJECT_SEQ: Atomic<u64> = Atomic::new(0);

/// An APIC ID that no vCPU has (x2APIC, not the broadcast ID).
const BAD_APIC_ID: u32 = 0xffff_fffe;
/// CPUs whose [`INJECT_FAIL_KICK`](params::INJECT_FAIL_KICK) applies.
const INJECT_CPUS: usize = 64;
/// Per kicking CPU (below [`INJECT_CPUS`]): the target, plus 1, of the kick
/// in progress whose target's APIC ID is wrong on purpose, 0 for none. Its
/// unlock runs with preemption disabled, so the CPU's entry is its own.
static BAD_TARGET: [Atomic<u32>; INJECT_CPUS] = [const { Atomic::new(0) }; INJECT_CPUS];

/// The APIC ID to kick `target` with from `here`: a wrong one while the
/// kick in progress is one that `inject_fail_kick` picked.
fn apic_of(here: usize, target: usize) -> u32 {
    match BAD_TARGET.get(here) {
        Some(b) if b.load(Relaxed) as usize == target + 1 => BAD_APIC_ID,
        _ => guest::apic_id(target as u32),
    }
}

/// Whether this kick is the Nth of `every` (0: never).
fn nth(every: u32) -> bool {
    every != 0 && INJECT_SEQ.fetch_add(1u64, Relaxed).wrapping_add(1) % u64::from(every) == 0
}

/// What a kick hypercall's error means.
fn kick_error(e: i64) -> KickError {
    if e == -abi::KVM_ENOSYS {
        KickError::Gone
    } else {
        KickError::Refused
    }
}

/// The KVM guest this module runs in.
pub(crate) struct Guest;

impl Platform for Guest {
    #[inline]
    fn cpu(&self) -> usize {
        guest::this_cpu() as usize
    }

    #[inline]
    fn relax(&self) {
        // `pause`, as cpu_relax() is, without a call to a C helper.
        core::hint::spin_loop()
    }

    fn wait_if(&self, how: Wait, token: u64, cond: impl FnOnce() -> bool) -> Waited {
        let how = match how {
            Wait::Hypercall => guest::Wait::Hypercall,
            Wait::Hlt => guest::Wait::Hlt,
        };
        let delay_us = params::INJECT_WAIT_DELAY_US.get();
        let cond = || {
            let c = cond();
            if c && delay_us != 0 {
                // Between the last look at the lock and the wait, with
                // interrupts off: a kick comes in this window and must be
                // held for the wait.
                INJECTED_DELAYS.add(1u64, Relaxed);
                let t = guest::local_clock();
                while guest::local_clock().wrapping_sub(t) < u64::from(delay_us) * 1000 {
                    core::hint::spin_loop();
                }
            }
            c
        };
        match guest::wait_if(how, token, cond) {
            guest::Waited::Skipped => Waited::Skipped,
            guest::Waited::Ended => Waited::Ended,
            guest::Waited::Bound => Waited::Bound,
            // A host that refuses the wait hypercall (withdrawn, or any
            // other error) is not waited on again.
            guest::Waited::Failed(_) => Waited::Gone,
        }
    }

    fn kick(&self, cpu: usize, token: u64) -> Result<Kick, KickError> {
        if nth(params::INJECT_DROP_KICK.get()) {
            INJECTED_DROPS.add(1u64, Relaxed);
            return Ok(Kick::Woken);
        }
        let here = self.cpu();
        if let Some(b) = BAD_TARGET.get(here) {
            // A new kick: the APIC ID of its target is wrong, for this kick
            // and its fallbacks, if it is the Nth.
            let bad = nth(params::INJECT_FAIL_KICK.get());
            if bad {
                INJECTED_FAILURES.add(1u64, Relaxed);
            }
            b.store(if bad { cpu as u32 + 1 } else { 0 }, Relaxed);
        }
        guest::pvlock_kick(apic_of(here, cpu), token).map_err(kick_error)
    }

    #[inline]
    fn have_kick_cpu(&self) -> bool {
        HAVE_KICK_CPU.load(Ordering::Relaxed)
    }

    fn kick_cpu(&self, cpu: usize) -> Result<(), KickError> {
        if nth(params::INJECT_DROP_KICK.get()) {
            INJECTED_DROPS.add(1u64, Relaxed);
            return Ok(());
        }
        let apic = apic_of(self.cpu(), cpu);
        // The last use of a wrong APIC ID: a later kick of this CPU
        // (`KVM_HC_KICK_CPU` only, once the lock is in `hlt` mode) is
        // aimed right unless `kick()` picks it again.
        if let Some(b) = BAD_TARGET.get(self.cpu()) {
            b.store(0, Relaxed);
        }
        guest::kick_cpu(apic).map_err(kick_error)
    }

    fn wake_nmi(&self, cpu: usize) {
        guest::wake_cpu_nmi(cpu as u32);
    }

    #[inline]
    fn preempted(&self, cpu: usize) -> bool {
        guest::vcpu_is_preempted(cpu as u32)
    }

    #[inline]
    fn now(&self) -> u64 {
        match TSC_MULT.load(Ordering::Relaxed) {
            0 => guest::local_clock(),
            m => guest::tsc_ns(m),
        }
    }

    #[inline]
    fn spin_threshold(&self) -> u32 {
        params::effective_spin_threshold()
    }

    #[inline]
    fn early_halt(&self) -> EarlyHalt {
        params::early_halt()
    }

    #[inline]
    fn yield_enabled(&self) -> bool {
        params::YIELD.get() && HAVE_SCHED_YIELD.load(Ordering::Relaxed)
    }

    #[inline]
    fn pending_enabled(&self) -> bool {
        params::PENDING.get()
    }

    fn yield_to(&self, cpu: usize) {
        guest::sched_yield(guest::apic_id(cpu as u32));
    }

    #[inline]
    fn stats_enabled(&self) -> bool {
        params::STATS.get()
    }

    #[inline(always)]
    fn waiting(&self, begins: bool) {
        guest::hint_waiting(begins);
    }

    #[inline(always)]
    fn stat_add(&self, a: &AtomicU64, v: u64) {
        kernel::pvlock::stats::local_add(a, v);
    }

    #[inline(always)]
    fn stat_inc(&self, a: &AtomicU32) {
        kernel::pvlock::stats::local_inc(a);
    }
}

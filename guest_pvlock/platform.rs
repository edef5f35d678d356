// SPDX-License-Identifier: GPL-2.0

//! The kernel under `algo.rs`: the lock word of a kernel `qspinlock` and a
//! KVM guest as the [`Platform`].

use crate::abi::{self, Kick};
use crate::algo::{EarlyHalt, KickError, LockWord, Platform, Wait, Waited};
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use crate::{faults, params};
use kernel::pvlock::{guest, lockops::QSpinLock};

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
/// Whether the host's lock waits say that their kick ended them
/// (`KVM_PVLOCK_WAIT_KICKED`, ABI 4): then a wait that returns
/// `KVM_PVLOCK_WAIT_ENDED` was ended by something else.
pub(crate) static WAIT_SAYS_KICKED: AtomicBool = AtomicBool::new(false);
/// Whether `KVM_HC_SCHED_YIELD` is offered.
pub(crate) static HAVE_SCHED_YIELD: AtomicBool = AtomicBool::new(false);
/// The statistics' clock: a [`guest::tsc_ns_mult`] multiplier, 0 for
/// `local_clock()`. Read by every timed slow acquisition, so a `core`
/// atomic (a plain `mov`).
pub(crate) static TSC_MULT: AtomicU64 = AtomicU64::new(0);

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
        let delay_us = faults::wait_delay_us();
        let cond = || {
            let c = cond();
            if c && delay_us != 0 {
                // Between the last look at the lock and the wait, with
                // interrupts off: a kick comes in this window and must be
                // held for the wait.
                faults::delayed();
                let t = guest::local_clock();
                while guest::local_clock().wrapping_sub(t) < u64::from(delay_us) * 1000 {
                    core::hint::spin_loop();
                }
            }
            c
        };
        match guest::wait_if(how, token, cond) {
            guest::Waited::Skipped => Waited::Skipped,
            guest::Waited::Kicked => Waited::Kicked,
            guest::Waited::Ended
                if how == guest::Wait::Hypercall && WAIT_SAYS_KICKED.load(Ordering::Relaxed) =>
            {
                Waited::Other
            }
            guest::Waited::Ended => Waited::Ended,
            guest::Waited::Bound => Waited::Bound,
            // A host that refuses the wait hypercall (withdrawn, or any
            // other error) is not waited on again.
            guest::Waited::Failed(_) => Waited::Gone,
        }
    }

    fn kick(&self, cpu: usize, token: u64) -> Result<Kick, KickError> {
        if faults::drop_kick() {
            return Ok(Kick::Woken);
        }
        let here = self.cpu();
        faults::begin_kick(here, cpu);
        guest::pvlock_kick(faults::apic_of(here, cpu), token).map_err(kick_error)
    }

    #[inline]
    fn have_kick_cpu(&self) -> bool {
        HAVE_KICK_CPU.load(Ordering::Relaxed)
    }

    fn kick_cpu(&self, cpu: usize) -> Result<(), KickError> {
        if faults::drop_kick() {
            return Ok(());
        }
        let here = self.cpu();
        let apic = faults::apic_of(here, cpu);
        // The last use of a wrong APIC ID: a later kick of this CPU
        // (`KVM_HC_KICK_CPU` only, once the lock is in `hlt` mode) is
        // aimed right unless `kick()` picks it again.
        faults::end_kick(here);
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
    fn stat_add(&self, a: &AtomicU64, v: u64) {
        kernel::pvlock::stats::local_add(a, v);
    }

    #[inline(always)]
    fn stat_inc(&self, a: &AtomicU32) {
        kernel::pvlock::stats::local_inc(a);
    }
}

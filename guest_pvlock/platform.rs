// SPDX-License-Identifier: GPL-2.0

//! The kernel under `algo.rs`: the lock word of a kernel `qspinlock` and a
//! KVM guest as the [`Platform`].

use crate::algo::{Kick, LockWord, Platform};
use crate::params;
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

/// How the unlocker kicks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub(crate) enum KickMethod {
    /// Upstream's `KVM_HC_KICK_CPU` (`KVM_FEATURE_PV_UNHALT`).
    KickCpu = 1,
    /// The project's `KVM_HC_PVLOCK_KICK` (`KVM_FEATURE_PVLOCK_KICK`).
    Pvlock = 2,
}

impl KickMethod {
    pub(crate) fn name(self) -> &'static str {
        match self {
            KickMethod::KickCpu => "kvm_hc_kick_cpu",
            KickMethod::Pvlock => "kvm_hc_pvlock_kick",
        }
    }
}

/// The kick method in use; may fall back from `Pvlock` to `KickCpu` at
/// run time if the host withdraws the project hypercall.
pub(crate) static KICK_METHOD: Atomic<u32> = Atomic::new(KickMethod::KickCpu as u32);
/// Whether `KVM_HC_KICK_CPU` is available as a fallback.
pub(crate) static HAVE_KICK_CPU: Atomic<bool> = Atomic::new(false);
/// Whether `KVM_HC_SCHED_YIELD` is available.
pub(crate) static HAVE_SCHED_YIELD: Atomic<bool> = Atomic::new(false);
/// Kicks that failed for lack of any working hypercall.
pub(crate) static KICK_FAILURES: Atomic<u64> = Atomic::new(0);

pub(crate) fn kick_method() -> KickMethod {
    if KICK_METHOD.load(Relaxed) == KickMethod::Pvlock as u32 {
        KickMethod::Pvlock
    } else {
        KickMethod::KickCpu
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

    #[inline]
    fn halt_if(&self, cond: impl FnOnce() -> bool) -> bool {
        guest::halt_if(cond)
    }

    fn kick(&self, cpu: usize) -> Kick {
        let apic = guest::apic_id(cpu as u32);
        if kick_method() == KickMethod::Pvlock {
            match guest::pvlock_kick(apic) {
                Ok(guest::Kick::Woken) => return Kick::Delivered,
                Ok(guest::Kick::NotHalted) => return Kick::NotHalted,
                Err(_) => {
                    // The host withdrew the hypercall (host_kvm unloaded):
                    // fall back for good.
                    KICK_METHOD.store(KickMethod::KickCpu as u32, Relaxed);
                }
            }
        }
        if HAVE_KICK_CPU.load(Relaxed) {
            guest::kick_cpu(apic);
        } else {
            KICK_FAILURES.add(1u64, Relaxed);
        }
        Kick::Delivered
    }

    #[inline]
    fn preempted(&self, cpu: usize) -> bool {
        guest::vcpu_is_preempted(cpu as u32)
    }

    #[inline]
    fn now(&self) -> u64 {
        guest::local_clock()
    }

    #[inline]
    fn spin_threshold(&self) -> u32 {
        params::effective_spin_threshold()
    }

    #[inline]
    fn early_halt(&self) -> u32 {
        params::EARLY_HALT.get()
    }

    #[inline]
    fn yield_enabled(&self) -> bool {
        params::YIELD.get() && HAVE_SCHED_YIELD.load(Relaxed)
    }

    fn yield_to(&self, cpu: usize) {
        guest::sched_yield(guest::apic_id(cpu as u32));
    }

    #[inline]
    fn stats_enabled(&self) -> bool {
        params::STATS.get()
    }
}

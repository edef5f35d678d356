// SPDX-License-Identifier: GPL-2.0

//! guest_pvlock's module parameters (`/sys/module/guest_pvlock/parameters/`).

use crate::algo;
use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
use kernel::pvlock::abi::MAX_SPIN_THRESHOLD;
use kernel::pvlock::param::{BoolParam, U32Param};

/// Spin loops before waiting when neither parameter nor host says
/// otherwise; upstream's `SPIN_THRESHOLD`.
pub(crate) const DEFAULT_SPIN_THRESHOLD: u32 = 1 << 15;

pub(crate) static ENABLE: BoolParam = BoolParam::new(true);
kernel::pvlock_module_param!(enable: BoolParam = ENABLE, 0o444,
    "Install the pvlock spinlock at load (default Y); N keeps the lock the kernel runs");

pub(crate) static SPIN_THRESHOLD: U32Param = U32Param::new(0, 0, MAX_SPIN_THRESHOLD);
kernel::pvlock_module_param!(spin_threshold: U32Param = SPIN_THRESHOLD, 0o644,
    "Spin loops before a waiter waits while the vCPU it waits for runs; 0: the host's recommendation, else 32768");

pub(crate) static EARLY_HALT: U32Param = U32Param::new(
    algo::EarlyHalt::Preempted as u32,
    algo::EarlyHalt::Never as u32,
    algo::EarlyHalt::Preempted as u32,
);

/// The early wait policy in effect.
#[inline]
pub(crate) fn early_halt() -> algo::EarlyHalt {
    // The parameter's range is the policies'.
    algo::EarlyHalt::from_u32(EARLY_HALT.get()).unwrap_or(algo::EarlyHalt::Preempted)
}
kernel::pvlock_module_param!(early_halt: U32Param = EARLY_HALT, 0o644,
    "Wait before the spin threshold: 0 never, 1 when the waiter ahead waits, 2 also when the awaited vCPU is preempted (default)");

pub(crate) static YIELD: BoolParam = BoolParam::new(true);
kernel::pvlock_module_param!(yield_to_holder: BoolParam = YIELD, 0o644,
    "A spinning queue head first yields to the likely lock holder when its vCPU is preempted (KVM_HC_SCHED_YIELD; default Y)");

pub(crate) static PENDING: BoolParam = BoolParam::new(false);
kernel::pvlock_module_param!(pending: BoolParam = PENDING, 0o644,
    "A waiter that finds the lock held and nobody waiting spins on the pending bit before it queues (default N)");

pub(crate) static STATS: BoolParam = BoolParam::new(true);
kernel::pvlock_module_param!(stats: BoolParam = STATS, 0o644,
    "Keep statistics in debugfs pvlock/ (default Y)");

pub(crate) static ADAPTIVE: BoolParam = BoolParam::new(true);
kernel::pvlock_module_param!(adaptive: BoolParam = ADAPTIVE, 0o644,
    "Run the native lock while the host says the vCPUs have CPUs to themselves and steal time agrees, pvlock otherwise (default Y); N: pvlock always");

pub(crate) static ADAPTIVE_PERIOD_MS: U32Param = U32Param::new(100, 10, 10_000);
kernel::pvlock_module_param!(adaptive_period_ms: U32Param = ADAPTIVE_PERIOD_MS, 0o644,
    "Milliseconds between two looks at the host's advice and the steal time (default 100)");

pub(crate) static ADAPTIVE_HOLD_MS: U32Param = U32Param::new(300, 0, 600_000);
kernel::pvlock_module_param!(adaptive_hold_ms: U32Param = ADAPTIVE_HOLD_MS, 0o644,
    "Milliseconds the advice and the steal time must say dedicated before the native lock runs (default 300); back to pvlock at once");

pub(crate) static ADAPTIVE_MAX_STEAL: U32Param = U32Param::new(250, 0, 1000);
kernel::pvlock_module_param!(adaptive_max_steal: U32Param = ADAPTIVE_MAX_STEAL, 0o644,
    "Thousandths of a period that the host may keep a vCPU from running, in two periods in a row, while the native lock runs (default 250; 1000: no guard)");

/// `kick=0`: the project's lock wait and kick when the host offers them,
/// else `HLT` and `KVM_HC_KICK_CPU`; `1`: always the latter; `2`: only the
/// project's.
pub(crate) static KICK: U32Param = U32Param::new(0, 0, 2);
kernel::pvlock_module_param!(kick: U32Param = KICK, 0o444,
    "Wait and kick: 0 auto (default), 1 HLT + KVM_HC_KICK_CPU, 2 KVM_HC_PVLOCK_WAIT + KVM_HC_PVLOCK_KICK");

/// The spin threshold the host recommends (`KVM_HC_PVLOCK_GET_PARAM`), 0
/// for none. Read by every slow acquisition, so a `core` atomic (a plain
/// `mov`; see `sync.rs`).
pub(crate) static HOST_SPIN_THRESHOLD: AtomicU32 = AtomicU32::new(0);

/// The spin threshold in effect.
#[inline]
pub(crate) fn effective_spin_threshold() -> u32 {
    match SPIN_THRESHOLD.get() {
        0 => match HOST_SPIN_THRESHOLD.load(Relaxed) {
            0 => DEFAULT_SPIN_THRESHOLD,
            h => h,
        },
        t => t,
    }
}

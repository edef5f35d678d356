// SPDX-License-Identifier: GPL-2.0

//! pvlock: paravirtual spinlocks for KVM guests and the KVM host hooks.
//!
//! The `unsafe` that the pvlock modules need lives here, so that
//! `guest_pvlock` and `host_kvm` stay leaf code.

pub mod abi;
#[cfg(CONFIG_KVM_GUEST)]
pub mod guest;
// KVM's pvlock hooks: their registration point (arch/x86/virt/kvm_pvlock.c)
// is built into the kernel whenever KVM is configured, built in or as
// modules (`CONFIG_KVM` is set for both).
#[cfg(CONFIG_KVM)]
pub mod kvm;
pub mod lockops;
pub mod param;
pub mod periodic;
pub mod qspinlock;
pub mod stats;

// The ABI numbers are defined twice, in the C uapi headers and in `abi`
// (which userspace shares); they must agree.
const _: () = {
    use crate::bindings as b;
    assert!(abi::KVM_FEATURE_PVLOCK_KICK == b::KVM_FEATURE_PVLOCK_KICK);
    assert!(abi::KVM_FEATURE_PV_UNHALT == b::KVM_FEATURE_PV_UNHALT);
    assert!(abi::KVM_FEATURE_STEAL_TIME == b::KVM_FEATURE_STEAL_TIME);
    assert!(abi::KVM_HINTS_REALTIME == b::KVM_HINTS_REALTIME);
    assert!(abi::KVM_FEATURE_PV_SCHED_YIELD == b::KVM_FEATURE_PV_SCHED_YIELD);
    assert!(abi::KVM_HC_SCHED_YIELD == b::KVM_HC_SCHED_YIELD);
    assert!(abi::KVM_HC_KICK_CPU == b::KVM_HC_KICK_CPU);
    assert!(abi::KVM_HC_PVLOCK_KICK == b::KVM_HC_PVLOCK_KICK);
    assert!(abi::KVM_HC_PVLOCK_GET_PARAM == b::KVM_HC_PVLOCK_GET_PARAM);
    assert!(abi::KVM_HC_PVLOCK_WAIT == b::KVM_HC_PVLOCK_WAIT);
    assert!(abi::KVM_PVLOCK_KICK_WOKEN == b::KVM_PVLOCK_KICK_WOKEN as i64);
    assert!(abi::KVM_PVLOCK_KICK_HELD == b::KVM_PVLOCK_KICK_HELD as i64);
    assert!(abi::KVM_PVLOCK_WAIT_ENDED == b::KVM_PVLOCK_WAIT_ENDED as i64);
    assert!(abi::KVM_PVLOCK_WAIT_BOUND == b::KVM_PVLOCK_WAIT_BOUND as i64);
    assert!(abi::KVM_PVLOCK_WAIT_KICKED == b::KVM_PVLOCK_WAIT_KICKED as i64);
    assert!(abi::KVM_PVLOCK_PARAM_VERSION == b::KVM_PVLOCK_PARAM_VERSION as u64);
    assert!(abi::KVM_PVLOCK_PARAM_SPIN_THRESHOLD == b::KVM_PVLOCK_PARAM_SPIN_THRESHOLD as u64);
    assert!(abi::KVM_PVLOCK_PARAM_ADVICE == b::KVM_PVLOCK_PARAM_ADVICE as u64);
    assert!(abi::KVM_PVLOCK_PARAM_TOKEN_BASE == b::KVM_PVLOCK_PARAM_TOKEN_BASE as u64);
    assert!(abi::KVM_PVLOCK_ABI_VERSION == b::KVM_PVLOCK_ABI_VERSION as u64);
    assert!(abi::KVM_PVLOCK_ADVICE_THRESHOLD_MASK == b::KVM_PVLOCK_ADVICE_THRESHOLD_MASK as u64);
    assert!(abi::KVM_PVLOCK_ADVICE_DEDICATED == b::KVM_PVLOCK_ADVICE_DEDICATED as u64);
    assert!(abi::KVM_PVLOCK_ADVICE_AUTO == b::KVM_PVLOCK_ADVICE_AUTO as u64);
    assert!(abi::KVM_PVLOCK_ADVICE_PINNED == b::KVM_PVLOCK_ADVICE_PINNED as u64);
    assert!(abi::KVM_PVLOCK_ADVICE_SHARED == b::KVM_PVLOCK_ADVICE_SHARED as u64);
    assert!(abi::KVM_ENOSYS == b::KVM_ENOSYS as i64);
    assert!(abi::KVM_EINVAL == b::KVM_EINVAL as i64);
    assert!(abi::KVM_CAP_PVLOCK_KICK == b::KVM_CAP_PVLOCK_KICK);
    assert!(abi::KVM_PVLOCK_KICK_ENABLE == b::KVM_PVLOCK_KICK_ENABLE as u64);
    assert!(abi::KVM_PVLOCK_KICK_YIELD == b::KVM_PVLOCK_KICK_YIELD as u64);
    assert!(abi::KVM_PVLOCK_KICK_VALID_FLAGS == b::KVM_PVLOCK_KICK_VALID_FLAGS as u64);
    assert!(abi::MAX_SPIN_THRESHOLD as u64 == b::KVM_PVLOCK_MAX_SPIN_THRESHOLD as u64);
    // The tail encodes every CPU number.
    assert!((b::NR_CPUS as usize) < qspinlock::MAX_CPUS);
};

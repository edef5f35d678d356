// SPDX-License-Identifier: GPL-2.0

//! The pvlock ABI numbers, defined once for every user.
//!
//! This file has no dependencies: the kernel crate builds it as
//! `kernel::pvlock::abi` (and checks it against the C headers at compile
//! time), and the userspace tools include it with `#[path]`.
//!
//! All numbers are project-local until upstream assigns them; see
//! `Documentation/virt/kvm/pvlock.rst`.

/// CPUID bit in the KVM features leaf (`KVM_CPUID_FEATURES`, eax).
pub const KVM_FEATURE_PVLOCK_KICK: u32 = 23;
/// Upstream's bit for `KVM_HC_KICK_CPU`.
pub const KVM_FEATURE_PV_UNHALT: u32 = 7;
/// Upstream's steal time bit (`vcpu_is_preempted()`).
pub const KVM_FEATURE_STEAL_TIME: u32 = 5;
/// Upstream's directed yield bit (`KVM_HC_SCHED_YIELD`).
pub const KVM_FEATURE_PV_SCHED_YIELD: u32 = 13;
/// Upstream's hint bit: vCPUs are pinned to dedicated pCPUs.
pub const KVM_HINTS_REALTIME: u32 = 0;

/// Upstream's kick hypercall: a0 = flags (0), a1 = APIC ID.
pub const KVM_HC_KICK_CPU: u32 = 5;
/// Upstream's directed yield: a0 = APIC ID of the vCPU to yield to.
pub const KVM_HC_SCHED_YIELD: u32 = 11;
/// pvlock kick: a0 = flags (0), a1 = APIC ID of the target.
pub const KVM_HC_PVLOCK_KICK: u32 = 0x7076_0001;
/// pvlock parameter read: a0 = parameter number.
pub const KVM_HC_PVLOCK_GET_PARAM: u32 = 0x7076_0002;

/// `KVM_HC_PVLOCK_KICK` result: the target was halted and is now runnable.
pub const KVM_PVLOCK_KICK_WOKEN: i64 = 0;
/// `KVM_HC_PVLOCK_KICK` result: the target was not halted; nothing was kept.
pub const KVM_PVLOCK_KICK_NOT_HALTED: i64 = 1;

/// `KVM_HC_PVLOCK_GET_PARAM` parameter: ABI version.
pub const KVM_PVLOCK_PARAM_VERSION: u64 = 0;
/// `KVM_HC_PVLOCK_GET_PARAM` parameter: spin threshold the host recommends.
pub const KVM_PVLOCK_PARAM_SPIN_THRESHOLD: u64 = 1;
/// The ABI version this file describes.
pub const KVM_PVLOCK_ABI_VERSION: u64 = 1;

/// Error returned to the guest for an unknown hypercall or a disabled one.
pub const KVM_ENOSYS: i64 = 1000;
/// Error returned to the guest for a bad argument.
pub const KVM_EINVAL: i64 = 22;

/// Capability number for `KVM_CHECK_EXTENSION` and `KVM_ENABLE_CAP`.
pub const KVM_CAP_PVLOCK_KICK: u32 = 0x7076;
/// `KVM_ENABLE_CAP` args\[0\]: enable the pvlock hypercalls for the VM.
pub const KVM_PVLOCK_KICK_ENABLE: u64 = 1 << 0;
/// `KVM_ENABLE_CAP` args\[0\]: yield to a target that is preempted.
pub const KVM_PVLOCK_KICK_YIELD: u64 = 1 << 1;
/// Every flag `KVM_ENABLE_CAP` accepts.
pub const KVM_PVLOCK_KICK_VALID_FLAGS: u64 = KVM_PVLOCK_KICK_ENABLE | KVM_PVLOCK_KICK_YIELD;

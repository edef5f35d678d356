// SPDX-License-Identifier: GPL-2.0

//! What a paravirtual spinlock needs from a KVM guest kernel: the KVM
//! features leaf, the kick hypercalls, halting, and a few per-CPU facts.
//!
//! C headers: [`include/linux/kvm_para.h`](srctree/include/linux/kvm_para.h),
//! [`arch/x86/include/asm/kvm_para.h`](srctree/arch/x86/include/asm/kvm_para.h)

use super::abi;
use crate::{bindings, prelude::*};

/// Whether the kernel runs on KVM (the KVM CPUID signature is present).
pub fn kvm_para_available() -> bool {
    // SAFETY: Reads CPUID, no requirement.
    unsafe { bindings::pvlock_kvm_para_available() }
}

/// The KVM features leaf (eax of `KVM_CPUID_FEATURES`), 0 off KVM.
pub fn kvm_features() -> u32 {
    if !kvm_para_available() {
        return 0;
    }
    // SAFETY: Reads CPUID, no requirement.
    unsafe { bindings::pvlock_kvm_features() }
}

/// The KVM hints (edx of `KVM_CPUID_FEATURES`), 0 off KVM.
pub fn kvm_hints() -> u32 {
    if !kvm_para_available() {
        return 0;
    }
    // SAFETY: Reads CPUID, no requirement.
    unsafe { bindings::pvlock_kvm_hints() }
}

/// Whether KVM offers the feature with bit number `bit`.
pub fn kvm_has_feature(bit: u32) -> bool {
    bit < 32 && kvm_features() & (1 << bit) != 0
}

fn hypercall2(nr: u32, a0: u64, a1: u64) -> i64 {
    // SAFETY: The pvlock hypercalls take values, not guest addresses; the
    // host validates them. Callers check the feature bit first.
    unsafe { bindings::pvlock_kvm_hypercall2(nr, a0 as _, a1 as _) as i64 }
}

/// `KVM_HC_KICK_CPU`: wake the vCPU with APIC ID `apic_id` if it halted,
/// or make its next halt return at once. Needs `KVM_FEATURE_PV_UNHALT`.
pub fn kick_cpu(apic_id: u32) {
    hypercall2(abi::KVM_HC_KICK_CPU, 0, apic_id.into());
}

/// `KVM_HC_SCHED_YIELD`: give this vCPU's time slice to the vCPU with APIC
/// ID `apic_id` if the host has preempted it. Needs
/// `KVM_FEATURE_PV_SCHED_YIELD`.
pub fn sched_yield(apic_id: u32) {
    hypercall2(abi::KVM_HC_SCHED_YIELD, apic_id.into(), 0);
}

/// What `KVM_HC_PVLOCK_KICK` did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kick {
    /// The target was halted and is runnable now.
    Woken,
    /// The target was not halted; nothing was kept for a later halt.
    NotHalted,
}

/// `KVM_HC_PVLOCK_KICK` on `apic_id`. Needs `KVM_FEATURE_PVLOCK_KICK`.
///
/// Returns the host's negative KVM error code (`-KVM_EINVAL`, `-KVM_ENOSYS`)
/// as `Err`.
pub fn pvlock_kick(apic_id: u32) -> core::result::Result<Kick, i64> {
    match hypercall2(abi::KVM_HC_PVLOCK_KICK, 0, apic_id.into()) {
        abi::KVM_PVLOCK_KICK_WOKEN => Ok(Kick::Woken),
        abi::KVM_PVLOCK_KICK_NOT_HALTED => Ok(Kick::NotHalted),
        e => Err(e),
    }
}

/// `KVM_HC_PVLOCK_GET_PARAM`: a parameter the host publishes to the guest.
pub fn pvlock_get_param(param: u64) -> Result<u64> {
    let r = hypercall2(abi::KVM_HC_PVLOCK_GET_PARAM, param, 0);
    if r < 0 {
        return Err(EINVAL);
    }
    Ok(r as u64)
}

/// The APIC ID of CPU `cpu`, the target of a kick.
pub fn apic_id(cpu: u32) -> u32 {
    if cpu >= crate::cpu::nr_cpu_ids() {
        return u32::MAX;
    }
    // SAFETY: `cpu` is a possible CPU, the per-CPU variable exists for it.
    unsafe { bindings::pvlock_cpu_apic_id(cpu as i32) }
}

/// Whether the host has preempted `cpu`'s vCPU (steal time), false when
/// the host does not tell.
pub fn vcpu_is_preempted(cpu: u32) -> bool {
    if cpu >= crate::cpu::nr_cpu_ids() {
        return false;
    }
    // SAFETY: `cpu` is a possible CPU.
    unsafe { bindings::pvlock_vcpu_is_preempted(cpu as i32) }
}

/// The current CPU. The caller runs with preemption disabled (in a lock
/// slowpath) whenever the answer has to stay true.
pub fn this_cpu() -> u32 {
    // SAFETY: No requirement.
    unsafe { bindings::raw_smp_processor_id() }
}

/// Whether the caller runs in NMI context.
pub fn in_nmi() -> bool {
    // SAFETY: Reads the preempt count, no requirement.
    unsafe { bindings::pvlock_in_nmi() }
}

/// A clock in nanoseconds, monotonic on each CPU (`local_clock()`).
pub fn local_clock() -> u64 {
    // SAFETY: No requirement.
    unsafe { bindings::pvlock_local_clock() }
}

/// Halts the CPU if `cond()`, evaluated with interrupts disabled, is true;
/// returns whether it halted.
///
/// This is the only safe way to halt for an event another CPU announces by
/// changing memory and then kicking: `cond()` re-checks the memory with
/// interrupts off, so an interrupt handler cannot change what it saw, and
/// the halt follows without a window in which the guest could miss a kick
/// that the host keeps (`KVM_HC_KICK_CPU`). If interrupts were enabled they
/// are enabled atomically with the halt (`sti; hlt`) and are enabled again
/// on return; otherwise the CPU halts with interrupts disabled and only a
/// kick or an NMI wakes it. Never halts in NMI context.
pub fn halt_if(cond: impl FnOnce() -> bool) -> bool {
    if in_nmi() {
        return false;
    }
    // SAFETY: No requirement.
    let irqs_were_enabled = !unsafe { bindings::pvlock_irqs_disabled() };
    // SAFETY: Restored below on every path.
    let flags = unsafe { bindings::pvlock_local_irq_save() };
    if !cond() {
        // SAFETY: `flags` comes from the save above.
        unsafe { bindings::pvlock_local_irq_restore(flags) };
        return false;
    }
    if irqs_were_enabled {
        // SAFETY: Interrupts were enabled on entry: `safe_halt()` enables
        // them again, which is the state the caller expects on return.
        unsafe { bindings::pvlock_safe_halt() };
    } else {
        // SAFETY: Interrupts stay disabled, as on entry.
        unsafe { bindings::pvlock_halt() };
    }
    true
}

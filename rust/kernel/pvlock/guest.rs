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

fn hypercall3(nr: u32, a0: u64, a1: u64, a2: u64) -> i64 {
    // SAFETY: The pvlock hypercalls and the upstream ones used here take
    // values, not guest addresses; the host validates them. Callers check
    // the feature bit first.
    unsafe { bindings::pvlock_kvm_hypercall3(nr, a0 as usize, a1 as usize, a2 as usize) as i64 }
}

/// `KVM_HC_KICK_CPU`: wake the vCPU with APIC ID `apic_id` if it halted,
/// or make its next halt return at once. Needs `KVM_FEATURE_PV_UNHALT`.
/// `Err` holds the host's negative KVM error code.
pub fn kick_cpu(apic_id: u32) -> core::result::Result<(), i64> {
    match hypercall3(abi::KVM_HC_KICK_CPU, 0, apic_id.into(), 0) {
        0 => Ok(()),
        e => Err(e),
    }
}

/// `KVM_HC_SCHED_YIELD`: give this vCPU's time slice to the vCPU with APIC
/// ID `apic_id` if the host has preempted it. Needs
/// `KVM_FEATURE_PV_SCHED_YIELD`.
pub fn sched_yield(apic_id: u32) {
    hypercall3(abi::KVM_HC_SCHED_YIELD, apic_id.into(), 0, 0);
}

/// `KVM_HC_PVLOCK_KICK` on `apic_id` for its wait `token`. Needs
/// `KVM_FEATURE_PVLOCK_KICK`. `Err` holds the host's negative KVM error
/// code (`-KVM_EINVAL`, `-KVM_ENOSYS`).
pub fn pvlock_kick(apic_id: u32, token: u64) -> core::result::Result<abi::Kick, i64> {
    abi::Kick::from_ret(hypercall3(
        abi::KVM_HC_PVLOCK_KICK,
        0,
        apic_id.into(),
        token,
    ))
}

/// `KVM_HC_PVLOCK_GET_PARAM`: a parameter the host publishes to the guest.
pub fn pvlock_get_param(param: u64) -> Result<u64> {
    let r = hypercall3(abi::KVM_HC_PVLOCK_GET_PARAM, param, 0, 0);
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
#[inline]
pub fn this_cpu() -> u32 {
    crate::cpu::CpuId::current().as_u32()
}

/// Nanoseconds the host has kept `cpu`'s vCPU from running while it was
/// runnable (steal time), since boot; 0 if the host does not tell.
pub fn steal_clock(cpu: u32) -> u64 {
    if cpu >= crate::cpu::nr_cpu_ids() {
        return 0;
    }
    // SAFETY: `cpu` is a possible CPU.
    unsafe { bindings::pvlock_steal_clock(cpu as i32) }
}

/// Whether `cpu` is online.
pub fn cpu_online(cpu: u32) -> bool {
    // SAFETY: Reads a CPU mask; any number is accepted.
    cpu < crate::cpu::nr_cpu_ids() && unsafe { bindings::pvlock_cpu_online(cpu) }
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

/// The multiplier that turns time-stamp counter ticks into nanoseconds,
/// times 2^32, at the TSC rate the kernel calibrated (`tsc_khz`); `None` if
/// that rate is not known. For [`tsc_ns`]; a caller keeps it in an atomic.
pub fn tsc_ns_mult() -> Option<u64> {
    // SAFETY: Reads a variable that is set once at boot.
    let khz = u64::from(unsafe { bindings::pvlock_tsc_khz() });
    (1_000_000u64 << 32).checked_div(khz)
}

/// Time in nanoseconds from the time-stamp counter, with `mult` from
/// [`tsc_ns_mult`]: one `rdtsc` and a multiplication, where `local_clock()`
/// is a call into kvm-clock's pvclock arithmetic (and, when the guest's
/// sched_clock is not stable, a locked `cmpxchg`). For measuring short
/// intervals on one CPU cheaply: not ordered against the loads and stores
/// around it, and not comparable between CPUs; good for statistics, not
/// for tokens or deadlines.
#[inline(always)]
pub fn tsc_ns(mult: u64) -> u64 {
    // SAFETY: `rdtsc` reads the time-stamp counter into two registers and
    // touches no memory; the kernel runs with CR4.TSD clear, where it
    // never faults.
    let tsc = unsafe { core::arch::x86_64::_rdtsc() };
    ((u128::from(tsc) * u128::from(mult)) >> 32) as u64
}

/// How a waiter halts.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Wait {
    /// `KVM_HC_PVLOCK_WAIT` with a token (`KVM_FEATURE_PVLOCK_KICK`).
    Hypercall,
    /// `HLT`, ended by `KVM_HC_KICK_CPU` (`KVM_FEATURE_PV_UNHALT`).
    Hlt,
}

/// What [`wait_if`] did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Waited {
    /// `cond()` was false: no wait.
    Skipped,
    /// The CPU waited and its kick ended the wait or came before it
    /// ([`abi::KVM_PVLOCK_WAIT_KICKED`], hosts of ABI 4).
    Kicked,
    /// The CPU waited and the wait ended: by an event other than its kick
    /// on hosts of ABI 4, by anything on older hosts and in `HLT`.
    Ended,
    /// The CPU waited until the host's bound on the wait ended it
    /// ([`abi::KVM_PVLOCK_WAIT_BOUND`]): no kick came in that time.
    Bound,
    /// The wait hypercall failed with this negative KVM error code
    /// (`-KVM_ENOSYS`: the host withdrew it); the CPU did not wait.
    Failed(i64),
}

/// Waits as `how` says, with token `token` for a hypercall wait, if
/// `cond()`, evaluated with interrupts disabled, is true.
///
/// This is the only safe way to halt for an event another CPU announces by
/// changing memory and then kicking: `cond()` re-checks the memory with
/// interrupts off, so no interrupt handler runs between the check and the
/// wait, and a kick that comes in that window is kept by the host for the
/// wait (`KVM_HC_PVLOCK_WAIT`'s token, `KVM_HC_KICK_CPU`'s `pv_unhalted`).
/// If interrupts were enabled they are enabled atomically with the wait
/// (`sti` right before `hlt` or the hypercall) and are enabled on return;
/// otherwise the CPU waits with interrupts disabled and only a kick or an
/// NMI ends the wait. Never waits in NMI context.
///
/// `kernel::interrupt::local_interrupt_disable()` is not used: it counts
/// the disabling in the preempt count and warns in NMI context, while this
/// function enables interrupts inside the wait instruction pair and runs
/// in lock slowpaths, NMI included.
pub fn wait_if(how: Wait, token: u64, cond: impl FnOnce() -> bool) -> Waited {
    if in_nmi() {
        return Waited::Skipped;
    }
    // SAFETY: No requirement.
    let irqs_were_enabled = !unsafe { bindings::pvlock_irqs_disabled() };
    // SAFETY: Restored below on every path but the waits that enable
    // interrupts themselves, which is the state on entry then.
    let flags = unsafe { bindings::pvlock_local_irq_save() };
    if !cond() {
        // SAFETY: `flags` comes from the save above.
        unsafe { bindings::pvlock_local_irq_restore(flags) };
        return Waited::Skipped;
    }
    match how {
        Wait::Hlt => {
            if irqs_were_enabled {
                // SAFETY: Interrupts were enabled on entry: `safe_halt()`
                // enables them again, the state the caller expects.
                unsafe { bindings::pvlock_safe_halt() };
            } else {
                // SAFETY: Interrupts stay disabled, as on entry.
                unsafe { bindings::pvlock_halt() };
                irqs_still_disabled();
            }
            Waited::Ended
        }
        Wait::Hypercall => {
            // SAFETY: As for the halts above: with `irqs_were_enabled` the
            // helper executes `sti` right before the hypercall and returns
            // with interrupts enabled; otherwise they stay disabled.
            let r =
                unsafe { bindings::pvlock_kvm_wait(0, token as usize, irqs_were_enabled) } as i64;
            if !irqs_were_enabled {
                irqs_still_disabled();
            }
            if r < 0 {
                // SAFETY: `flags` comes from the save above (if interrupts
                // were enabled the helper enabled them already).
                unsafe { bindings::pvlock_local_irq_restore(flags) };
                return Waited::Failed(r);
            }
            match r {
                abi::KVM_PVLOCK_WAIT_BOUND => Waited::Bound,
                abi::KVM_PVLOCK_WAIT_KICKED => Waited::Kicked,
                _ => Waited::Ended,
            }
        }
    }
}

/// A wait entered with interrupts disabled must return with them disabled:
/// its caller is a lock slowpath, in a hardirq handler perhaps, whose
/// interrupted code may hold the lock an interrupt handler takes. Neither
/// `HLT` nor the wait hypercall changes the flag; should the host ever
/// return with it set, this warns (a kernel `WARNING`, which the test
/// harness fails a run on) and disables interrupts again.
fn irqs_still_disabled() {
    // SAFETY: Reads the flags, no requirement.
    if unsafe { bindings::pvlock_irqs_disabled() } {
        return;
    }
    crate::warn_on!(true);
    // SAFETY: Disabling interrupts is always allowed; they were disabled
    // when the wait began, which is what the caller expects. The saved
    // flags (enabled) are not needed.
    let _ = unsafe { bindings::pvlock_local_irq_save() };
}

/// Ends a wait of `cpu` with an NMI, whatever it waits for and whatever
/// its interrupt flag: for when no kick works any more.
pub fn wake_cpu_nmi(cpu: u32) {
    if cpu >= crate::cpu::nr_cpu_ids() {
        return;
    }
    // SAFETY: `cpu` is a possible CPU; the NMI is claimed by its handler.
    unsafe { bindings::pv_lock_wake_cpu(cpu as i32) }
}

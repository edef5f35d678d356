// SPDX-License-Identifier: GPL-2.0

//! The KVM side of pvlock: registering the implementation of the pvlock
//! hypercalls, `KVM_CAP_PVLOCK_KICK` and `KVM_FEATURE_PVLOCK_KICK`, and the
//! few vCPU operations it needs.
//!
//! C header: [`include/linux/kvm_pvlock.h`](srctree/include/linux/kvm_pvlock.h)

use crate::{bindings, error::to_result, prelude::*, types::Opaque};
use core::marker::PhantomData;

/// A vCPU of a running VM.
///
/// # Invariants
///
/// The wrapped `kvm_vcpu` is alive: vCPUs live as long as their VM, and a
/// [`Vcpu`] reference is only handed out while a call about that VM runs.
#[repr(transparent)]
pub struct Vcpu(Opaque<bindings::kvm_vcpu>);

// SAFETY: Every operation below is safe from any thread (KVM's own rules for
// kicking and inspecting other vCPUs).
unsafe impl Sync for Vcpu {}

impl Vcpu {
    /// # Safety
    ///
    /// `ptr` is a live vCPU for `'a`.
    unsafe fn from_raw<'a>(ptr: *mut bindings::kvm_vcpu) -> &'a Self {
        // SAFETY: Transparent wrapper; validity from the caller.
        unsafe { &*ptr.cast() }
    }

    fn as_raw(&self) -> *mut bindings::kvm_vcpu {
        self.0.get()
    }

    /// The VM of this vCPU.
    pub fn vm(&self) -> &Vm {
        // SAFETY: The vCPU is alive (type invariant), so is its VM, at least
        // as long as the vCPU.
        unsafe { Vm::from_raw(bindings::kvm_pvlock_vcpu_vm(self.as_raw())) }
    }

    /// Whether the vCPU is halted (HLT with the in-kernel local APIC).
    pub fn is_halted(&self) -> bool {
        // SAFETY: The vCPU is alive.
        unsafe { bindings::kvm_pvlock_vcpu_halted(self.as_raw()) }
    }

    /// Whether the vCPU's thread was preempted while runnable.
    pub fn is_preempted(&self) -> bool {
        // SAFETY: The vCPU is alive.
        unsafe { bindings::kvm_pvlock_vcpu_preempted(self.as_raw()) }
    }

    /// Raises `KVM_REQ_PVLOCK_KICK` and kicks the vCPU: wakes it if it is
    /// halted; if it runs, the request is dropped at its next guest entry.
    pub fn pvlock_kick(&self) {
        // SAFETY: The vCPU is alive.
        unsafe { bindings::kvm_pvlock_kick_vcpu(self.as_raw()) }
    }

    /// Gives the caller's time slice to this vCPU; may sleep. Returns
    /// whether the scheduler switched to it.
    pub fn yield_to(&self) -> bool {
        // SAFETY: The vCPU is alive; callers run in a hypercall, which may
        // sleep (the hooks run under SRCU).
        unsafe { bindings::kvm_pvlock_yield_to(self.as_raw()) }
    }

    /// Whether `self` and `other` are the same vCPU.
    pub fn is(&self, other: &Vcpu) -> bool {
        core::ptr::eq(self, other)
    }
}

/// A VM.
///
/// # Invariants
///
/// The wrapped `kvm` is alive for as long as the reference.
#[repr(transparent)]
pub struct Vm(Opaque<bindings::kvm>);

// SAFETY: The operations below are safe from any thread.
unsafe impl Sync for Vm {}

/// The pvlock state of a VM (`KVM_ENABLE_CAP(KVM_CAP_PVLOCK_KICK)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmState {
    /// `KVM_PVLOCK_KICK_*` flags; 0 when the capability was not enabled.
    pub flags: u64,
    /// Spin threshold the host recommends to the guest.
    pub spin_threshold: u64,
}

impl Vm {
    /// # Safety
    ///
    /// `ptr` is a live VM for `'a`.
    unsafe fn from_raw<'a>(ptr: *mut bindings::kvm) -> &'a Self {
        // SAFETY: Transparent wrapper; validity from the caller.
        unsafe { &*ptr.cast() }
    }

    fn state_ptr(&self) -> *mut bindings::kvm_pvlock_vm {
        // SAFETY: The VM is alive; the state is embedded in it.
        unsafe { bindings::kvm_pvlock_vm_state(self.0.get()) }
    }

    /// The VM's vCPU with physical APIC ID `apic_id`, if any.
    pub fn vcpu_by_apic_id(&self, apic_id: u64) -> Option<&Vcpu> {
        // SAFETY: The VM is alive; any ID is accepted.
        let vcpu = unsafe { bindings::kvm_pvlock_vcpu_by_apic_id(self.0.get(), apic_id) };
        if vcpu.is_null() {
            None
        } else {
            // SAFETY: A vCPU found in the VM lives as long as the VM.
            Some(unsafe { Vcpu::from_raw(vcpu) })
        }
    }

    /// The VM's pvlock state (a snapshot; it changes under `kvm->lock`).
    pub fn pvlock_state(&self) -> VmState {
        let p = self.state_ptr();
        // SAFETY: `p` points into the live VM; the fields are plain u64 that
        // are read atomically on x86-64 (READ_ONCE semantics).
        unsafe {
            VmState {
                flags: core::ptr::read_volatile(&raw const (*p).flags),
                spin_threshold: core::ptr::read_volatile(&raw const (*p).spin_threshold),
            }
        }
    }
}

/// What the module implements. All functions may be called concurrently
/// from any vCPU thread.
pub trait PvlockHost: 'static {
    /// The `KVM_PVLOCK_KICK_*` flags `enable_cap` accepts; also what
    /// `KVM_CHECK_EXTENSION(KVM_CAP_PVLOCK_KICK)` returns.
    const SUPPORTED_FLAGS: u64;

    /// A hypercall KVM does not know; `None` if `nr` is not pvlock's, else
    /// the value for the guest's RAX.
    fn hypercall(vcpu: &Vcpu, nr: u64, args: [u64; 4]) -> Option<i64>;

    /// `KVM_ENABLE_CAP(KVM_CAP_PVLOCK_KICK)` with `args`; returns the new
    /// state for the VM, or an error for the VMM (nothing is changed then).
    fn enable_cap(vm: &Vm, args: [u64; 4]) -> Result<VmState>;

    /// Whether the guests of `vm` see `KVM_FEATURE_PVLOCK_KICK`.
    fn guest_has_feature(vm: &Vm) -> bool;

    /// A vCPU kicked with [`Vcpu::pvlock_kick`] runs again, `latency_ns`
    /// after the kick.
    fn kick_done(vcpu: &Vcpu, latency_ns: u64);
}

struct Adapter<T>(PhantomData<T>);

impl<T: PvlockHost> Adapter<T> {
    const OPS: bindings::kvm_pvlock_ops = bindings::kvm_pvlock_ops {
        supported_flags: T::SUPPORTED_FLAGS,
        hypercall: Some(Self::hypercall),
        enable_cap: Some(Self::enable_cap),
        guest_has_feature: Some(Self::guest_has_feature),
        kick_done: Some(Self::kick_done),
    };

    unsafe extern "C" fn hypercall(
        vcpu: *mut bindings::kvm_vcpu,
        nr: c_ulong,
        args: *const c_ulong,
        ret: *mut c_ulong,
    ) -> bool {
        // SAFETY: KVM passes the live vCPU making the hypercall.
        let vcpu = unsafe { Vcpu::from_raw(vcpu) };
        // SAFETY: KVM passes an array of four arguments.
        let a = unsafe { core::slice::from_raw_parts(args, 4) };
        match T::hypercall(
            vcpu,
            nr as u64,
            [a[0] as u64, a[1] as u64, a[2] as u64, a[3] as u64],
        ) {
            Some(r) => {
                // SAFETY: `ret` is valid for writes.
                unsafe { *ret = r as c_ulong };
                true
            }
            None => false,
        }
    }

    unsafe extern "C" fn enable_cap(kvm: *mut bindings::kvm, args: *const u64) -> c_int {
        // SAFETY: KVM passes the live VM.
        let vm = unsafe { Vm::from_raw(kvm) };
        // SAFETY: KVM passes `cap->args`, four u64.
        let a = unsafe { core::slice::from_raw_parts(args, 4) };
        match T::enable_cap(vm, [a[0], a[1], a[2], a[3]]) {
            Ok(state) => {
                let p = vm.state_ptr();
                // SAFETY: KVM holds `kvm->lock`, which serialises writers;
                // readers use volatile reads of whole u64s.
                unsafe {
                    core::ptr::write_volatile(&raw mut (*p).flags, state.flags);
                    core::ptr::write_volatile(&raw mut (*p).spin_threshold, state.spin_threshold);
                }
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    unsafe extern "C" fn guest_has_feature(kvm: *mut bindings::kvm) -> bool {
        // SAFETY: KVM passes a live VM.
        T::guest_has_feature(unsafe { Vm::from_raw(kvm) })
    }

    unsafe extern "C" fn kick_done(vcpu: *mut bindings::kvm_vcpu, latency_ns: u64) {
        // SAFETY: KVM passes the live vCPU, on its own thread.
        T::kick_done(unsafe { Vcpu::from_raw(vcpu) }, latency_ns)
    }
}

/// The registration of a [`PvlockHost`] with KVM; unregistered on drop,
/// which waits for every call in flight.
pub struct Registration<T: PvlockHost> {
    ops: &'static bindings::kvm_pvlock_ops,
    _p: PhantomData<T>,
}

impl<T: PvlockHost> Registration<T> {
    /// Registers `T`; `EBUSY` if another implementation is registered.
    pub fn new() -> Result<Self> {
        // A promoted constant: one address, kept for unregistering.
        let ops: &'static bindings::kvm_pvlock_ops = &Adapter::<T>::OPS;
        // SAFETY: `ops` is valid for `'static`.
        to_result(unsafe { bindings::kvm_pvlock_register(ops) })?;
        Ok(Self {
            ops,
            _p: PhantomData,
        })
    }
}

impl<T: PvlockHost> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: Registered in `new()` with this pointer.
        unsafe { bindings::kvm_pvlock_unregister(self.ops) };
    }
}

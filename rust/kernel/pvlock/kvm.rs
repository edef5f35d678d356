// SPDX-License-Identifier: GPL-2.0

//! The KVM side of pvlock: registering the implementation of the pvlock
//! hypercalls, `KVM_CAP_PVLOCK_KICK` and `KVM_FEATURE_PVLOCK_KICK`, and the
//! few vCPU operations it needs.
//!
//! C header: [`include/linux/kvm_pvlock.h`](srctree/include/linux/kvm_pvlock.h)

use super::abi;
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

    /// Whether the vCPU's thread was preempted while runnable.
    pub fn is_preempted(&self) -> bool {
        // SAFETY: The vCPU is alive.
        unsafe { bindings::kvm_pvlock_vcpu_preempted(self.as_raw()) }
    }

    /// Kicks this vCPU's lock wait with `token` (not 0), now or when it
    /// comes: [`abi::Kick::Woken`] if the vCPU was in that wait.
    pub fn kick(&self, token: u64) -> abi::Kick {
        // SAFETY: The vCPU is alive; kicking is safe from any thread.
        if unsafe { bindings::kvm_pvlock_kick(self.as_raw(), token) } {
            abi::Kick::Woken
        } else {
            abi::Kick::Held
        }
    }

    /// Whether `self` and `other` are the same vCPU.
    pub fn is(&self, other: &Vcpu) -> bool {
        core::ptr::eq(self, other)
    }
}

/// The vCPU making a pvlock hypercall, on its own thread, in a context that
/// may sleep: what only that vCPU may do (wait, give away its time slice).
/// [`PvlockHost::hypercall`] gets one; the other callbacks get a [`Vcpu`].
///
/// # Invariants
///
/// The wrapped vCPU is the one whose thread runs the code holding the
/// reference, inside KVM's dispatch of its hypercall (the hooks run under
/// SRCU, where sleeping is allowed), with an in-kernel local APIC when the
/// hypercall is `KVM_HC_PVLOCK_WAIT`.
#[repr(transparent)]
pub struct CurrentVcpu(Vcpu);

impl CurrentVcpu {
    /// # Safety
    ///
    /// `ptr` is a live vCPU for `'a` that makes the hypercall being
    /// dispatched, on the calling thread.
    unsafe fn from_raw<'a>(ptr: *mut bindings::kvm_vcpu) -> &'a Self {
        // SAFETY: Transparent wrapper of a transparent wrapper; validity
        // and the thread from the caller.
        unsafe { &*ptr.cast() }
    }

    /// Starts a lock wait with `token` (not 0) on this vCPU (the
    /// `KVM_HC_PVLOCK_WAIT` it makes), ended by KVM after `bound_ns`
    /// nanoseconds if nothing ended it before (0: no bound); returns how it
    /// starts.
    pub fn wait(&self, token: u64, bound_ns: u64) -> WaitStart {
        // SAFETY: By the type invariant the vCPU makes this hypercall on its
        // own thread; KVM dispatches a wait only with an in-kernel local
        // APIC.
        let r = unsafe { bindings::kvm_pvlock_wait(self.0.as_raw(), token, bound_ns) };
        match r {
            bindings::kvm_pvlock_wait_start_KVM_PVLOCK_WAIT_KICKED_FIRST => WaitStart::KickedFirst,
            bindings::kvm_pvlock_wait_start_KVM_PVLOCK_WAIT_PENDING => WaitStart::Pending,
            _ => WaitStart::Halts,
        }
    }

    /// Gives the rest of this vCPU's time slice to `target`; may sleep.
    /// Returns whether the scheduler switched to it.
    pub fn yield_to(&self, target: &Vcpu) -> bool {
        // SAFETY: `target` is alive; by the type invariant the caller is
        // this vCPU's thread in a context that may sleep.
        unsafe { bindings::kvm_pvlock_yield_to(target.as_raw()) }
    }
}

impl core::ops::Deref for CurrentVcpu {
    type Target = Vcpu;

    fn deref(&self) -> &Vcpu {
        &self.0
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
    /// `KVM_PVLOCK_KICK_*` flags; 0 when the capability is disabled.
    pub flags: u64,
    /// Spin threshold the host recommends to the guest.
    pub spin_threshold: u64,
    /// `KVM_PVLOCK_ADVICE_*`: where the VM's advice comes from.
    pub advice_mode: u64,
    /// The VMM configured the capability (enabled or disabled it) at least
    /// once; set by KVM, ignored in what [`PvlockHost::enable_cap`] returns.
    pub configured: bool,
    /// The advice in force (`KVM_PVLOCK_PARAM_ADVICE`), as
    /// [`PvlockHost::advise`] last set it; set by KVM, ignored in what
    /// [`PvlockHost::enable_cap`] returns.
    pub advice: u64,
}

/// How much a VM's vCPUs compete for CPUs, sampled by KVM (`struct
/// kvm_pvlock_load`): shares of a CPU in thousandths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Load {
    /// The time since the previous sample, in nanoseconds.
    pub window_ns: u64,
    /// The VM's vCPUs.
    pub vcpus: u32,
    /// The CPUs its vCPU threads may run on.
    pub cpus: u32,
    /// What its vCPU threads asked of them: run time plus time runnable but
    /// waiting for a CPU, over the window, summed.
    pub demand: u32,
    /// The same for the other VMs' vCPU threads that may run on those CPUs
    /// (each counted once it asks for 1/16 of a CPU).
    pub others: u32,
    /// The largest share of the window that a vCPU spent preempted while it
    /// ran (not counting a wake-up's wait for a CPU).
    pub preempted: u32,
    /// The VMM's `KVM_PVLOCK_ADVICE_*`.
    pub mode: u64,
}

impl Vm {
    /// # Safety
    ///
    /// `ptr` is a live VM for `'a`.
    unsafe fn from_raw<'a>(ptr: *mut bindings::kvm) -> &'a Self {
        // SAFETY: Transparent wrapper; validity from the caller.
        unsafe { &*ptr.cast() }
    }

    /// The VM's vCPU with physical APIC ID `apic_id`, found as
    /// `KVM_HC_KICK_CPU` finds its target; `None` for a broadcast ID or one
    /// that no single vCPU has.
    pub fn find_vcpu(&self, apic_id: u64) -> Option<&Vcpu> {
        // SAFETY: The VM is alive; any ID is accepted.
        let vcpu = unsafe { bindings::kvm_pvlock_find_vcpu(self.0.get(), apic_id) };
        if vcpu.is_null() {
            None
        } else {
            // SAFETY: A vCPU found in the VM lives as long as the VM.
            Some(unsafe { Vcpu::from_raw(vcpu) })
        }
    }

    /// A token larger than every kick token held for the VM's vCPUs.
    pub fn token_base(&self) -> u64 {
        // SAFETY: The VM is alive.
        unsafe { bindings::kvm_pvlock_token_base(self.0.get()) }
    }

    /// The VM's pvlock state (a snapshot; it changes under `kvm->lock`).
    pub fn pvlock_state(&self) -> VmState {
        let mut st = bindings::kvm_pvlock_vm::default();
        // SAFETY: The VM is alive; the function fills `st`.
        unsafe { bindings::kvm_pvlock_vm_state(self.0.get(), &mut st) };
        VmState {
            flags: st.flags,
            spin_threshold: st.spin_threshold,
            advice_mode: st.advice_mode,
            configured: st.configured,
            advice: st.advice,
        }
    }
}

/// How a lock wait starts ([`CurrentVcpu::wait`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitStart {
    /// The vCPU halts: KVM writes the hypercall's result when the wait ends
    /// ([`PvlockHost::wait_end`]).
    Halts,
    /// Its kick came first: the wait is over, and its result is
    /// [`abi::KVM_PVLOCK_WAIT_KICKED`].
    KickedFirst,
    /// A wake-up event is pending: the wait is over, and its result is
    /// [`abi::KVM_PVLOCK_WAIT_ENDED`].
    Pending,
}

impl WaitStart {
    /// The hypercall's result: the wait's if it is over; if the vCPU
    /// halts, the one KVM replaces when the wait ends.
    pub const fn ret(self) -> i64 {
        match self {
            WaitStart::KickedFirst => abi::KVM_PVLOCK_WAIT_KICKED,
            WaitStart::Halts | WaitStart::Pending => abi::KVM_PVLOCK_WAIT_ENDED,
        }
    }
}

/// What ended a lock wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitEnd {
    /// Its kick (or the module's unload).
    Kick {
        /// From the kick to the end of the wait, in nanoseconds; `None` if
        /// KVM did not see when the kick came (KVM passes 0).
        latency_ns: Option<u64>,
    },
    /// The bound given to [`Vcpu::wait`]: no kick came in time.
    Bound,
    /// Another event: an interrupt, an NMI, the VMM.
    Other,
}

/// What the module implements. All functions may be called concurrently
/// from any vCPU thread.
pub trait PvlockHost: 'static {
    /// The `KVM_PVLOCK_KICK_*` flags `enable_cap` accepts; also what
    /// `KVM_CHECK_EXTENSION(KVM_CAP_PVLOCK_KICK)` returns.
    const SUPPORTED_FLAGS: u64;

    /// A pvlock hypercall (`KVM_HC_PVLOCK_*` number `nr`) of `vcpu`, on its
    /// thread, where it may sleep; returns the guest's RAX.
    fn hypercall(vcpu: &CurrentVcpu, nr: u32, args: [u64; 4]) -> i64;

    /// `KVM_ENABLE_CAP(KVM_CAP_PVLOCK_KICK)` with `args`; returns the new
    /// state for the VM, or an error for the VMM (nothing is changed then).
    fn enable_cap(vm: &Vm, args: [u64; 4]) -> Result<VmState>;

    /// Whether the guests of `vm`, whose VMM never configured the
    /// capability, see `KVM_FEATURE_PVLOCK_KICK` and may use the hypercalls.
    fn force_feature(vm: &Vm) -> bool;

    /// `vcpu` left a lock wait, ended as `how` says; on its thread, from
    /// wherever KVM changes its state (it must not sleep: no
    /// [`CurrentVcpu`] here).
    fn wait_end(vcpu: &Vcpu, how: WaitEnd);

    /// The advice (`KVM_PVLOCK_PARAM_ADVICE`) for `vm` under `load`, from
    /// the advice in force, `advice`, and the module's own `state` for the
    /// VM (0 at first), which it may change. Called for every VM from
    /// [`Registration::update_advice`], with KVM's VM list locked: it must
    /// not create or destroy VMs.
    fn advise(vm: &Vm, load: &Load, advice: u64, state: &mut u64) -> u64;
}

struct Adapter<T>(PhantomData<T>);

impl<T: PvlockHost> Adapter<T> {
    const OPS: bindings::kvm_pvlock_ops = bindings::kvm_pvlock_ops {
        supported_flags: T::SUPPORTED_FLAGS,
        hypercall: Some(Self::hypercall),
        enable_cap: Some(Self::enable_cap),
        force_feature: Some(Self::force_feature),
        wait_end: Some(Self::wait_end),
        advise: Some(Self::advise),
    };

    /// # Safety
    ///
    /// `vcpu` is a live vCPU, `args` points to four values (KVM's call).
    unsafe extern "C" fn hypercall(
        vcpu: *mut bindings::kvm_vcpu,
        nr: c_ulong,
        args: *const c_ulong,
    ) -> c_long {
        // SAFETY: KVM passes the live vCPU making the hypercall, on its own
        // thread, under SRCU (it may sleep).
        let vcpu = unsafe { CurrentVcpu::from_raw(vcpu) };
        // SAFETY: KVM passes an array of four arguments.
        let a = unsafe { core::slice::from_raw_parts(args, 4) };
        T::hypercall(
            vcpu,
            nr as u32,
            [a[0] as u64, a[1] as u64, a[2] as u64, a[3] as u64],
        ) as c_long
    }

    /// # Safety
    ///
    /// `kvm` is a live VM, `args` points to four values and `state` is
    /// valid for writes (KVM's call).
    unsafe extern "C" fn enable_cap(
        kvm: *mut bindings::kvm,
        args: *const u64,
        state: *mut bindings::kvm_pvlock_vm,
    ) -> c_int {
        // SAFETY: KVM passes the live VM.
        let vm = unsafe { Vm::from_raw(kvm) };
        // SAFETY: KVM passes `cap->args`, four u64.
        let a = unsafe { core::slice::from_raw_parts(args, 4) };
        match T::enable_cap(vm, [a[0], a[1], a[2], a[3]]) {
            Ok(st) => {
                // SAFETY: KVM passes a state to fill, valid for writes.
                unsafe {
                    (*state).flags = st.flags;
                    (*state).spin_threshold = st.spin_threshold;
                    (*state).advice_mode = st.advice_mode;
                }
                0
            }
            Err(e) => e.to_errno(),
        }
    }

    /// # Safety
    ///
    /// `kvm` is a live VM (KVM's call).
    unsafe extern "C" fn force_feature(kvm: *mut bindings::kvm) -> bool {
        // SAFETY: KVM passes a live VM.
        T::force_feature(unsafe { Vm::from_raw(kvm) })
    }

    /// # Safety
    ///
    /// `vcpu` is a live vCPU, on its own thread (KVM's call).
    unsafe extern "C" fn wait_end(vcpu: *mut bindings::kvm_vcpu, how: c_uint, latency_ns: u64) {
        let how = match how {
            bindings::kvm_pvlock_wait_end_KVM_PVLOCK_END_KICK => WaitEnd::Kick {
                latency_ns: (latency_ns != 0).then_some(latency_ns),
            },
            bindings::kvm_pvlock_wait_end_KVM_PVLOCK_END_BOUND => WaitEnd::Bound,
            _ => WaitEnd::Other,
        };
        // SAFETY: KVM passes the live vCPU, on its own thread.
        T::wait_end(unsafe { Vcpu::from_raw(vcpu) }, how)
    }

    /// # Safety
    ///
    /// `kvm` is a live VM, `load` points to a sample and `state` is valid
    /// for reads and writes (KVM's call).
    unsafe extern "C" fn advise(
        kvm: *mut bindings::kvm,
        load: *const bindings::kvm_pvlock_load,
        advice: u64,
        state: *mut u64,
    ) -> u64 {
        // SAFETY: KVM passes a sample to read.
        let l = unsafe { &*load };
        let load = Load {
            window_ns: l.window_ns,
            vcpus: l.vcpus,
            cpus: l.cpus,
            demand: l.demand,
            others: l.others,
            preempted: l.preempted,
            mode: l.mode,
        };
        // SAFETY: KVM passes the live VM and the module's state for it, to
        // read and write; nothing else touches it during the call (KVM's
        // VM list lock is held).
        T::advise(unsafe { Vm::from_raw(kvm) }, &load, advice, unsafe {
            &mut *state
        })
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

impl<T: PvlockHost> Registration<T> {
    /// Samples every VM's load and sets each VM's advice from
    /// [`PvlockHost::advise`]; nothing while KVM is not loaded. May sleep.
    pub fn update_advice(&self) {
        // SAFETY: `self.ops` is the registered implementation.
        unsafe { bindings::kvm_pvlock_update_advice(self.ops) }
    }
}

impl<T: PvlockHost> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: Registered in `new()` with this pointer.
        unsafe { bindings::kvm_pvlock_unregister(self.ops) };
    }
}

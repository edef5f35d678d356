// SPDX-License-Identifier: GPL-2.0

//! Switching the x86 queued spinlock slowpath and unlock at run time.
//!
//! Linux routes `queued_spin_lock_slowpath()` and `queued_spin_unlock()`
//! through two static calls. [`switch`] retargets both, safely with respect
//! to locks that are in use at that moment, using a test-and-set *bridge*
//! slowpath that lives in the kernel itself:
//!
//! 1. slowpath := bridge; `synchronize_rcu()`
//! 2. unlock := new unlock; `synchronize_rcu()`
//! 3. slowpath := new slowpath; `synchronize_rcu()`
//!
//! The bridge takes a lock only when the whole lock word is zero, so it never
//! joins a queue and never marks a lock for a kick: while it is the slowpath,
//! no lock can be in a state that only one of the two unlocks understands.
//! A bridge waiter that sees step 3's slowpath in place joins that slowpath
//! instead: under contention its queue may keep the word non-zero for good.
//! Spinlock waiters and holders run with preemption disabled, so each
//! `synchronize_rcu()` waits for every CPU to leave the code that was just
//! replaced. After step 1 no waiter of the old algorithm is left (each has
//! taken its lock, which an unlock of either kind releases correctly); after
//! step 2 no CPU runs the old unlock, so waiters of the new algorithm cannot
//! meet it; after step 3 no CPU runs the old slowpath or the bridge, so the
//! old code may be unloaded. `Documentation/pvlock/design.rst` has the full
//! argument.
//!
//! C header: [`arch/x86/include/asm/paravirt-spinlock.h`](srctree/arch/x86/include/asm/paravirt-spinlock.h)

use crate::{
    bindings,
    prelude::*,
    sync::atomic::{Acquire, Atomic, Relaxed},
    types::Opaque,
};

/// The locked byte value of a held lock.
pub const Q_LOCKED_VAL: u32 = 1;
/// Mask of the locked byte.
pub const Q_LOCKED_MASK: u32 = 0xff;
/// The pending bit.
pub const Q_PENDING_VAL: u32 = 1 << 8;
/// Mask of the locked byte and the pending byte.
pub const Q_LOCKED_PENDING_MASK: u32 = 0xffff;
/// Offset of the tail (queue index and CPU) in the lock word.
pub const Q_TAIL_OFFSET: u32 = 16;
/// Mask of the tail.
pub const Q_TAIL_MASK: u32 = 0xffff_0000;

/// The signature of the `queued_spin_lock_slowpath` static call.
pub type SlowpathFn = unsafe extern "C" fn(*mut bindings::qspinlock, u32);
/// The signature of the `queued_spin_unlock` static call. The call is made
/// with the callee-saved convention (`PV_CALLEE_SAVE_REGS_THUNK`): only the
/// return register may be clobbered, so the target is an assembly thunk.
pub type UnlockFn = unsafe extern "C" fn(*mut bindings::qspinlock);

/// A queued spinlock, as the lock ops see it.
///
/// The lock word is `val`; on x86 (little endian) its byte 0 is the locked
/// byte, byte 1 the pending byte, bytes 2-3 the tail.
///
/// # Invariants
///
/// The wrapped `qspinlock` is a live lock of the kernel.
#[repr(transparent)]
pub struct QSpinLock(Opaque<bindings::qspinlock>);

// SAFETY: A qspinlock is made to be shared between CPUs; every access below is
// atomic.
unsafe impl Sync for QSpinLock {}

impl QSpinLock {
    /// Creates a reference to a kernel lock.
    ///
    /// # Safety
    ///
    /// `ptr` points to a live `qspinlock` for the lifetime `'a`.
    pub unsafe fn from_raw<'a>(ptr: *mut bindings::qspinlock) -> &'a Self {
        // SAFETY: `QSpinLock` is a transparent wrapper of `qspinlock`, and
        // the caller guarantees that `ptr` is valid for `'a`.
        unsafe { &*ptr.cast() }
    }

    /// The whole lock word, as a kernel atomic.
    #[inline]
    pub fn word(&self) -> &Atomic<u32> {
        // SAFETY: By the type invariant the lock is live; `val` is an aligned
        // 32-bit word at offset 0 that is only accessed atomically.
        unsafe { Atomic::from_ptr(self.ptr().cast::<u32>()) }
    }

    // The operations below are what the slowpaths spin on. They are written
    // as the instructions the kernel's x86 atomics are (see
    // `arch/x86/include/asm/cmpxchg.h`): a `READ_ONCE()`/`WRITE_ONCE()` is a
    // volatile access, a locked instruction is a full barrier, and every
    // `asm!` without `nomem` is a compiler barrier as `asm volatile(... :
    // "memory")` is. Going through `Atomic<T>` instead costs a chain of
    // out-of-line calls per access while `CONFIG_RUST_INLINE_HELPERS` is off.

    /// The lock word's address.
    #[inline(always)]
    fn ptr(&self) -> *mut u8 {
        // `QSpinLock` is transparent over `Opaque<qspinlock>`, itself over
        // the `qspinlock`: the same address, writable through `&self`.
        core::ptr::from_ref(self).cast_mut().cast()
    }

    /// `READ_ONCE(lock->val)`.
    #[inline(always)]
    pub fn val(&self) -> u32 {
        // SAFETY: By the type invariant the lock is live; `val` is an aligned
        // 32-bit word at offset 0.
        unsafe { core::ptr::read_volatile(self.ptr().cast::<u32>()) }
    }

    /// `READ_ONCE(lock->locked)`.
    #[inline(always)]
    pub fn locked(&self) -> u8 {
        // SAFETY: As in `val()`; byte 0 is the locked byte.
        unsafe { core::ptr::read_volatile(self.ptr()) }
    }

    /// `WRITE_ONCE(lock->locked, v)`.
    #[inline(always)]
    pub fn set_locked(&self, v: u8) {
        // SAFETY: As in `val()`; byte 0 is the locked byte.
        unsafe { core::ptr::write_volatile(self.ptr(), v) }
    }

    /// `smp_store_release(&lock->locked, v)`: on x86 a compiler barrier and
    /// a store.
    #[inline(always)]
    pub fn release_locked(&self, v: u8) {
        // SAFETY: An empty `asm!` only orders the compiler's memory accesses
        // (x86 stores are not reordered with earlier accesses by the CPU).
        unsafe { core::arch::asm!("", options(nostack, preserves_flags)) };
        self.set_locked(v);
    }

    /// `WRITE_ONCE(lock->pending, v)`.
    #[inline(always)]
    pub fn set_pending(&self, v: u8) {
        // SAFETY: As in `val()`; byte 1 is the pending byte.
        unsafe { core::ptr::write_volatile(self.ptr().add(1), v) }
    }

    /// `cmpxchg_acquire(&lock->val, old, new)`: the value found, `Ok` if
    /// it was `old` and is now `new`.
    #[inline(always)]
    pub fn cmpxchg_val(&self, old: u32, new: u32) -> Result<u32, u32> {
        let mut found = old;
        // SAFETY: As in `val()`. `lock cmpxchg` compares eax with the word
        // and stores `new` if equal; eax gets the value found.
        unsafe {
            core::arch::asm!(
                "lock cmpxchg dword ptr [{p}], {n:e}",
                p = in(reg) self.ptr(),
                n = in(reg) new,
                inout("eax") found,
                options(nostack),
            )
        };
        if found == old {
            Ok(found)
        } else {
            Err(found)
        }
    }

    /// `cmpxchg_acquire(&lock->locked, old, new)`.
    #[inline(always)]
    pub fn cmpxchg_locked(&self, old: u8, new: u8) -> Result<u8, u8> {
        let mut found = old;
        // SAFETY: As in `cmpxchg_val()`, on byte 0.
        unsafe {
            core::arch::asm!(
                "lock cmpxchg byte ptr [{p}], {n}",
                p = in(reg) self.ptr(),
                n = in(reg_byte) new,
                inout("al") found,
                options(nostack),
            )
        };
        if found == old {
            Ok(found)
        } else {
            Err(found)
        }
    }

    /// `cmpxchg_acquire(&lock->locked_pending, old, new) == old`.
    #[inline(always)]
    pub fn cmpxchg_locked_pending(&self, old: u16, new: u16) -> bool {
        let mut found = old;
        // SAFETY: As in `cmpxchg_val()`, on the 2-aligned bytes 0-1.
        unsafe {
            core::arch::asm!(
                "lock cmpxchg word ptr [{p}], {n:x}",
                p = in(reg) self.ptr(),
                n = in(reg) new,
                inout("ax") found,
                options(nostack),
            )
        };
        found == old
    }

    /// `xchg(&lock->locked, v)`, fully ordered: the old locked byte.
    #[inline(always)]
    pub fn xchg_locked(&self, v: u8) -> u8 {
        let mut v = v;
        // SAFETY: As in `val()`; `xchg` with memory is locked implicitly.
        unsafe {
            core::arch::asm!(
                "xchg byte ptr [{p}], {v}",
                p = in(reg) self.ptr(),
                v = inout(reg_byte) v,
                options(nostack, preserves_flags),
            )
        };
        v
    }

    /// `xchg_tail()`: exchanges the tail half-word (bytes 2-3), fully
    /// ordered; returns the old tail in the word's position.
    #[inline(always)]
    pub fn xchg_tail(&self, tail: u32) -> u32 {
        let mut v = (tail >> Q_TAIL_OFFSET) as u16;
        // SAFETY: As in `val()`; bytes 2-3 are the 2-aligned tail.
        unsafe {
            core::arch::asm!(
                "xchg word ptr [{p}], {v:x}",
                p = in(reg) self.ptr().add(2),
                v = inout(reg) v,
                options(nostack, preserves_flags),
            )
        };
        u32::from(v) << Q_TAIL_OFFSET
    }

    /// The lock's address, as a key for tables; never dereferenced.
    #[inline]
    pub fn addr(&self) -> usize {
        self.ptr() as usize
    }
}

/// A queued spinlock implementation that the lock ops can be switched to.
///
/// # Safety
///
/// Implementers provide mutual exclusion on the kernel's qspinlock word
/// compatible with the inline fast paths (`queued_spin_lock()` takes a lock
/// by a 0 -> [`Q_LOCKED_VAL`] cmpxchg of the word, `queued_spin_trylock()`
/// likewise): `slowpath` returns only once the calling CPU owns `lock`;
/// `unlock_slowpath` is called by the owner with the locked byte it found
/// (anything but [`Q_LOCKED_VAL`]) and releases the lock. Neither may sleep
/// and both must work in any context, NMI included.
pub unsafe trait QueuedLock: 'static {
    /// Acquires `lock`; `val` is the lock word the fast path last saw.
    fn slowpath(lock: &QSpinLock, val: u32);
    /// Releases `lock` whose locked byte was `locked`, not [`Q_LOCKED_VAL`].
    fn unlock_slowpath(lock: &QSpinLock, locked: u8);
}

unsafe extern "C" fn slowpath_trampoline<T: QueuedLock>(lock: *mut bindings::qspinlock, val: u32) {
    // SAFETY: The static call passes the live lock being acquired.
    T::slowpath(unsafe { QSpinLock::from_raw(lock) }, val)
}

/// The `extern "C"` slowpath that calls `T::slowpath`.
pub fn slowpath_fn<T: QueuedLock>() -> SlowpathFn {
    slowpath_trampoline::<T>
}

/// Defines the `extern "C"` function `$name(lock, locked)` that calls
/// `<$ty as QueuedLock>::unlock_slowpath()`, for the module's callee-saved
/// unlock thunk to call.
#[macro_export]
macro_rules! pvlock_unlock_slowpath {
    ($name:ident, $ty:ty) => {
        /// Called by the unlock thunk when the locked byte is not 1.
        #[no_mangle]
        pub unsafe extern "C" fn $name(lock: *mut $crate::bindings::qspinlock, locked: u8) {
            // SAFETY: The unlock thunk passes the live lock being released.
            let lock = unsafe { $crate::pvlock::lockops::QSpinLock::from_raw(lock) };
            <$ty as $crate::pvlock::lockops::QueuedLock>::unlock_slowpath(lock, locked)
        }
    };
}

/// The two lock ops.
#[derive(Clone, Copy)]
pub struct LockOps {
    /// `queued_spin_lock_slowpath`.
    pub slowpath: SlowpathFn,
    /// `queued_spin_unlock`, a callee-saved thunk.
    pub unlock: UnlockFn,
}

impl LockOps {
    /// The lock ops in place now.
    pub fn current() -> LockOps {
        // SAFETY: Reading the static call target has no requirement.
        let unlock = unsafe { bindings::pvlock_unlock_query() };
        LockOps {
            slowpath: Self::current_slowpath(),
            // SAFETY: Static call targets are never null and have the static
            // call's signature, which is `UnlockFn`.
            unlock: unsafe { core::mem::transmute::<*mut c_void, UnlockFn>(unlock) },
        }
    }

    /// The slowpath in place now.
    fn current_slowpath() -> SlowpathFn {
        // SAFETY: Reading the static call target has no requirement.
        let slow = unsafe { bindings::pvlock_slowpath_query() };
        // SAFETY: Static call targets are never null and have the static
        // call's signature, which is `SlowpathFn`.
        unsafe { core::mem::transmute::<*mut c_void, SlowpathFn>(slow) }
    }

    /// Whether both ops are those of `other`.
    pub fn same_as(&self, other: &LockOps) -> bool {
        core::ptr::fn_addr_eq(self.slowpath, other.slowpath)
            && core::ptr::fn_addr_eq(self.unlock, other.unlock)
    }
}

/// Which lock the kernel runs, judged by the slowpath.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// `native_queued_spin_lock_slowpath`.
    Native,
    /// Upstream's `__pv_queued_spin_lock_slowpath`.
    UpstreamPv,
    /// Anything else, e.g. another module's lock or the bridge.
    Other,
}

impl Kind {
    /// The kind of the lock ops in place now.
    pub fn current() -> Kind {
        // SAFETY: Reading the static call target has no requirement.
        match unsafe { bindings::pvlock_ops_kind() } {
            0 => Kind::Native,
            1 => Kind::UpstreamPv,
            _ => Kind::Other,
        }
    }

    /// A name for logs and statistics.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Native => "native",
            Kind::UpstreamPv => "upstream-pv",
            Kind::Other => "other",
        }
    }
}

/// Whether the kernel was booted with `nopvspin`.
pub fn nopvspin() -> bool {
    // SAFETY: Reads a boolean set once at boot.
    unsafe { bindings::pvlock_nopvspin() }
}

/// Waiters that were on the bridge when step 3 replaced it, since boot;
/// [`switch`] reports its own share.
static BRIDGE_HANDOFFS: Atomic<u64> = Atomic::new(0);

/// Whether `f` is the bridge.
fn is_bridge(f: SlowpathFn) -> bool {
    core::ptr::fn_addr_eq(f, bridge_slowpath as SlowpathFn)
}

/// The test-and-set slowpath used while switching; see the module docs.
unsafe extern "C" fn bridge_slowpath(lock: *mut bindings::qspinlock, _val: u32) {
    // SAFETY: The static call passes the live lock being acquired.
    let qlock = unsafe { QSpinLock::from_raw(lock) };
    let val = qlock.word();
    let mut waited = false;
    loop {
        // Once step 3 has made another slowpath current, that slowpath's
        // waiters keep the tail set for as long as the lock stays contended,
        // and a whole word of 0 may not come for seconds. Join their queue.
        // (A call site that step 3 has not patched yet also lands here.)
        let current = LockOps::current_slowpath();
        if !is_bridge(current) {
            if waited {
                BRIDGE_HANDOFFS.add(1u64, Relaxed);
            }
            // SAFETY: A CPU reaches the bridge only after step 1 stored it
            // as the target (call sites are patched after the key is
            // written, with IPIs in between), so the target read here is
            // the one step 3 stored after step 2's grace period: every CPU
            // unlocks with the unlock that matches it. `lock` is the live
            // lock being acquired.
            return unsafe { current(lock, val.load(Relaxed)) };
        }
        if val.load(Relaxed) == 0 && val.cmpxchg(0, Q_LOCKED_VAL, Acquire).is_ok() {
            return;
        }
        waited = true;
        crate::processor::cpu_relax();
    }
}

/// The bridge's lock ops, for tests and statistics.
pub fn bridge_slowpath_fn() -> SlowpathFn {
    bridge_slowpath
}

/// What a [`switch`] did.
pub struct Switched {
    /// The lock ops that were in place before.
    pub previous: LockOps,
    /// Waiters that were on the bridge when step 3 replaced it and moved to
    /// the new slowpath.
    pub bridge_moved: u64,
}

/// Switches the lock ops to `to` through the bridge; may sleep.
///
/// Returns the ops that were in place and how many bridge waiters moved.
/// See the module documentation for the protocol and why it is safe.
///
/// # Safety
///
/// - `to.slowpath` and `to.unlock` implement one queued spinlock algorithm
///   ([`QueuedLock`]'s requirements); `to.unlock` follows the callee-saved
///   convention and calls the algorithm's unlock slowpath for any locked
///   byte other than [`Q_LOCKED_VAL`].
/// - The code of `to` stays in place until another `switch()` away from it
///   has returned.
/// - Calls to `switch()` are serialised by the caller.
pub unsafe fn switch(to: LockOps) -> Switched {
    let from = LockOps::current();
    // Switches are serialised and waiters leave the bridge only during one,
    // so the counter's growth until the end is this switch's.
    let moved0 = BRIDGE_HANDOFFS.load(Relaxed);
    // SAFETY: The bridge is a valid slowpath for any lock whose unlock is
    // either of the two in use (it only takes a lock whose word is 0).
    unsafe { bindings::pvlock_slowpath_update(Some(bridge_slowpath)) };
    crate::sync::rcu::synchronize_rcu();
    // SAFETY: Only the bridge and the fast paths take locks now, so every
    // held lock has locked byte 1, which both unlocks release alike.
    unsafe { bindings::pvlock_unlock_update(Some(to.unlock)) };
    crate::sync::rcu::synchronize_rcu();
    // SAFETY: Every CPU now unlocks with `to.unlock`, which matches
    // `to.slowpath` by the caller's guarantee.
    unsafe { bindings::pvlock_slowpath_update(Some(to.slowpath)) };
    crate::sync::rcu::synchronize_rcu();
    Switched {
        previous: from,
        bridge_moved: BRIDGE_HANDOFFS.load(Relaxed).wrapping_sub(moved0),
    }
}

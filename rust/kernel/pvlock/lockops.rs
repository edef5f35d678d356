// SPDX-License-Identifier: GPL-2.0

//! Installing a queued spinlock into the running kernel.
//!
//! Linux routes `queued_spin_lock_slowpath()` and `queued_spin_unlock()`
//! through two static calls. [`Installed::install`] switches both to a
//! [`QueuedLock`] implementation and dropping the [`Installed`] switches back
//! to the kernel's own lock (native or upstream PV, whichever was there),
//! safely with respect to locks that are in use at that moment, through a
//! test-and-set *bridge* slowpath that lives in the kernel itself:
//!
//! 1. slowpath := bridge; sync
//! 2. unlock := new unlock; sync
//! 3. slowpath := new slowpath; sync
//!
//! where sync waits until every CPU has left the code it ran before
//! (`pv_lock_ops_sync()`: `synchronize_rcu()` and a work item on every CPU).
//! The bridge takes a lock only when the whole lock word is zero, so it never
//! joins a queue and never marks a lock for a kick: while it is the slowpath,
//! no lock can be in a state that only one of the two unlocks understands.
//! A bridge waiter that sees step 3's slowpath in place joins that slowpath
//! instead: under contention its queue may keep the word non-zero for good.
//! After step 1 no waiter of the old algorithm is left (each has taken its
//! lock, which an unlock of either kind releases correctly); after step 2 no
//! CPU runs the old unlock, so waiters of the new algorithm cannot meet it;
//! after step 3 no CPU runs the old slowpath or the bridge, so the old code
//! may go.
//!
//! The kernel side (`pv_lock_ops_begin()`) makes one owner at a time switch
//! the ops, serialises the switch with the `contended_release` tracepoint
//! (which swaps the unlock too) and blocks CPU hotplug meanwhile: a CPU
//! going offline takes locks after RCU stopped watching it. Those functions
//! are not exported; this module is the only way to them.
//! `Documentation/pvlock/design.rst` has the full argument.
//!
//! C header: [`arch/x86/include/asm/paravirt-spinlock.h`](srctree/arch/x86/include/asm/paravirt-spinlock.h)

use super::periodic::{Periodic, PeriodicWork};
pub use super::qspinlock::*;
use crate::{
    alloc::KBox,
    bindings,
    prelude::*,
    sync::atomic::{Acquire, Atomic, Relaxed},
    types::Opaque,
    ThisModule,
};
use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

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
/// and both must work in any context, NMI included. [`QueuedLock::slot`]
/// returns the same slot every time, used by no other type, and
/// [`QueuedLock::unlock_thunk`] a thunk that follows the callee-saved
/// convention of the unlock static call, releases a lock whose locked byte
/// is [`Q_LOCKED_VAL`] inline (a 1 -> 0 cmpxchg of the locked byte) and
/// otherwise calls the function defined by [`pvlock_unlock_slowpath!`] for
/// this type.
pub unsafe trait QueuedLock: Sync + Sized + 'static {
    /// Acquires `lock`; `val` is the lock word the fast path last saw.
    fn slowpath(&self, lock: &QSpinLock, val: u32);
    /// Releases `lock` whose locked byte was `locked`, not [`Q_LOCKED_VAL`].
    fn unlock_slowpath(&self, lock: &QSpinLock, locked: u8);
    /// Where the installed instance is published to the static calls.
    fn slot() -> &'static Slot<Self>;
    /// The callee-saved unlock (an assembly thunk).
    fn unlock_thunk() -> UnlockFn;
}

/// Where an installed [`QueuedLock`] is published, for the functions the
/// static calls reach (which take no data).
///
/// # Invariants
///
/// Non-null only while an [`Installed`] owns the pointee, and from before its
/// lock ops are installed until after no CPU can run them any more.
pub struct Slot<T>(AtomicPtr<T>);

impl<T: QueuedLock> Slot<T> {
    /// An empty slot.
    pub const fn new() -> Self {
        Self(AtomicPtr::new(core::ptr::null_mut()))
    }

    /// The installed lock, `None` if there is none.
    #[inline(always)]
    pub fn get(&self) -> Option<&T> {
        let p = self.0.load(Ordering::Acquire);
        // SAFETY: By the type invariant a non-null pointer points to the
        // lock an `Installed` owns, which outlives every CPU that can reach
        // this code through the lock ops.
        unsafe { p.as_ref() }
    }
}

impl<T: QueuedLock> Default for Slot<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The slowpath of `T` as the static call calls it.
///
/// # Safety
///
/// `lock` points to a live lock, which the caller is acquiring.
unsafe extern "C" fn slowpath_trampoline<T: QueuedLock>(lock: *mut bindings::qspinlock, val: u32) {
    // SAFETY: The static call passes the live lock being acquired.
    let qlock = unsafe { QSpinLock::from_raw(lock) };
    match T::slot().get() {
        Some(t) => t.slowpath(qlock, val),
        // Not reachable while the switch protocol holds; taking the lock
        // like the bridge is right for a lock that no queue uses.
        None => bridge_lock(qlock),
    }
}

#[doc(hidden)]
pub fn unlock_slowpath_trampoline<T: QueuedLock>(lock: &QSpinLock, locked: u8) {
    match T::slot().get() {
        Some(t) => t.unlock_slowpath(lock, locked),
        None => lock.release_locked(0),
    }
}

/// Defines the `extern "C"` function `$name(lock, locked)` that calls the
/// installed `$ty`'s [`QueuedLock::unlock_slowpath`], for the type's
/// callee-saved unlock thunk to call.
#[macro_export]
macro_rules! pvlock_unlock_slowpath {
    ($name:ident, $ty:ty) => {
        /// Called by the unlock thunk when the locked byte is not 1.
        #[no_mangle]
        pub unsafe extern "C" fn $name(lock: *mut $crate::bindings::qspinlock, locked: u8) {
            // SAFETY: The unlock thunk passes the live lock being released.
            let lock = unsafe { $crate::pvlock::lockops::QSpinLock::from_raw(lock) };
            $crate::pvlock::lockops::unlock_slowpath_trampoline::<$ty>(lock, locked)
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

    /// The ops of `T`.
    pub fn of<T: QueuedLock>() -> LockOps {
        LockOps {
            slowpath: slowpath_trampoline::<T>,
            unlock: T::unlock_thunk(),
        }
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
/// a switch reports its own share.
static BRIDGE_HANDOFFS: Atomic<u64> = Atomic::new(0);

/// Whether `f` is the bridge.
fn is_bridge(f: SlowpathFn) -> bool {
    core::ptr::fn_addr_eq(f, bridge_slowpath as SlowpathFn)
}

/// Takes `lock` when its whole word is 0; see [`bridge_slowpath`].
fn bridge_lock(qlock: &QSpinLock) {
    let val = qlock.word();
    while val.load(Relaxed) != 0 || val.cmpxchg(0, u32::from(Q_LOCKED_VAL), Acquire).is_err() {
        crate::processor::cpu_relax();
    }
}

/// The test-and-set slowpath used while switching; see the module docs.
///
/// # Safety
///
/// `lock` points to a live lock, which the caller is acquiring.
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
        if val.load(Relaxed) == 0 && val.cmpxchg(0, u32::from(Q_LOCKED_VAL), Acquire).is_ok() {
            return;
        }
        waited = true;
        crate::processor::cpu_relax();
    }
}

/// Wakes every online CPU with an NMI, periodically, while a switch waits
/// ([`Switch::to`]).
struct Waker {
    rounds: AtomicU32,
}

impl Waker {
    /// How long a switch waits before waking, and between wakes: a switch
    /// takes 50 ms to a few seconds under overcommit; a wait is bounded by
    /// host_kvm at 1 s by default.
    const AFTER_MS: u32 = 2000;

    fn new() -> Self {
        Self {
            rounds: AtomicU32::new(0),
        }
    }
}

impl PeriodicWork for Waker {
    fn run(&self) -> Option<u32> {
        self.rounds.fetch_add(1, Ordering::Relaxed);
        for cpu in 0..crate::cpu::nr_cpu_ids() {
            // SAFETY: Reads the online mask; then `cpu` is an online CPU (CPU
            // hotplug is blocked during a switch), and the NMI is claimed by
            // its handler.
            unsafe {
                if bindings::pvlock_cpu_online(cpu) {
                    bindings::pv_lock_wake_cpu(cpu as i32);
                }
            }
        }
        Some(Self::AFTER_MS)
    }
}

/// The switch of one owner, between `pv_lock_ops_begin()` and
/// `pv_lock_ops_end()`.
///
/// # Invariants
///
/// `pv_lock_ops_begin(owner)` succeeded and `pv_lock_ops_end(owner)` has not
/// been called yet.
struct Switch {
    owner: *const c_void,
}

impl Switch {
    /// Starts switching as `owner`; `EBUSY` while another owner's lock ops
    /// are installed. May sleep.
    fn begin(owner: &'static ThisModule) -> Result<Self> {
        let owner = owner.as_ptr().cast::<c_void>().cast_const();
        // SAFETY: `owner` is a module, which is not NULL.
        crate::error::to_result(unsafe { bindings::pv_lock_ops_begin(owner) })?;
        // INVARIANT: `pv_lock_ops_begin()` succeeded.
        Ok(Self { owner })
    }

    /// Moves from the ops in place to `slowpath` and `unlock` through the
    /// bridge; returns how many bridge waiters moved to the new slowpath.
    ///
    /// # Safety
    ///
    /// `slowpath` and `unlock` implement one queued spinlock algorithm, as
    /// [`QueuedLock`] requires, and their code stays until another switch
    /// away from them has returned.
    unsafe fn to(&self, slowpath: SlowpathFn, unlock: UnlockFn) -> u64 {
        // Switches are serialised and waiters leave the bridge only during
        // one, so the counter's growth until the end is this switch's.
        let moved0 = BRIDGE_HANDOFFS.load(Relaxed);
        // Each sync waits for every waiter of the old slowpath to leave it.
        // A paravirtual waiter whose kick was lost (on a host that does not
        // bound waits) would keep it waiting, and this task with the switch
        // mutex and CPU hotplug: after a while, wake every CPU with an NMI,
        // which ends any wait (a waiter that wakes early looks at its lock
        // again). Without the memory for it, the switch goes on unguarded.
        let waker = KBox::pin_init(Periodic::new(Waker::new()), GFP_KERNEL).ok();
        if let Some(w) = &waker {
            w.as_ref().start(Waker::AFTER_MS);
        }
        // SAFETY: By the type invariant this owner may update the ops now.
        // Step 1: the bridge is a valid slowpath for any lock whose unlock
        // is either of the two in use (it only takes a lock whose word is
        // 0). Step 2: only the bridge and the fast paths take locks, so
        // every held lock has locked byte 1, which both unlocks release
        // alike. Step 3: every CPU unlocks with `unlock`, which matches
        // `slowpath` by the caller's guarantee. `pv_lock_ops_sync()` has no
        // requirement.
        unsafe {
            bindings::pv_lock_ops_set(self.owner, Some(bridge_slowpath), None);
            bindings::pv_lock_ops_sync();
            bindings::pv_lock_ops_set(self.owner, None, Some(unlock));
            bindings::pv_lock_ops_sync();
            bindings::pv_lock_ops_set(self.owner, Some(slowpath), None);
            bindings::pv_lock_ops_sync();
        }
        if let Some(w) = waker {
            w.stop();
            let rounds = w.data().rounds.load(Ordering::Relaxed);
            if rounds != 0 {
                pr_warn!(
                    "pvlock: a lock-op switch waited for halted waiters for over {} ms: woke every CPU {} times (a lost kick?)\n",
                    Waker::AFTER_MS,
                    rounds
                );
            }
        }
        BRIDGE_HANDOFFS.load(Relaxed).wrapping_sub(moved0)
    }

    /// Waits until no CPU runs a lock op it entered before.
    fn sync(&self) {
        // SAFETY: No requirement (the switch is in progress, so CPU hotplug
        // is blocked).
        unsafe { bindings::pv_lock_ops_sync() };
    }

    /// The kernel's own ops of `kind` (the traced unlock while the
    /// `contended_release` tracepoint is enabled).
    fn kernel_ops(&self, kind: Kind) -> Option<(SlowpathFn, UnlockFn)> {
        let mut slowpath = None;
        let mut unlock = None;
        // SAFETY: By the type invariant the switch is in progress; the
        // function only writes the two pointers.
        unsafe {
            bindings::pv_lock_ops_kernel(kind == Kind::UpstreamPv, &mut slowpath, &mut unlock)
        };
        Some((slowpath?, unlock?))
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        // SAFETY: By the type invariant `pv_lock_ops_begin(self.owner)`
        // succeeded and this is the matching end.
        unsafe { bindings::pv_lock_ops_end(self.owner) };
    }
}

/// A [`QueuedLock`] installed as the kernel's lock; dropping it installs the
/// kernel's own lock again (native or upstream PV, whichever was in place)
/// and frees the lock once no CPU can run its code.
///
/// In between it may be *parked*: the kernel's native lock runs instead
/// ([`Installed::park`]) and the lock is kept, its state readable, until
/// [`Installed::unpark`] installs it again. Both are switches through the
/// bridge, as installing is, so either direction is safe with locks in use.
///
/// # Invariants
///
/// While `T::slot()` is not empty it points to `*lock`, and `lock` is
/// dropped only once the slot is empty. While `parked`, no CPU runs `T`'s
/// code (the park's last sync has returned) and the lock ops are not `T`'s.
pub struct Installed<T: QueuedLock> {
    lock: core::mem::ManuallyDrop<KBox<T>>,
    owner: &'static ThisModule,
    previous: Kind,
    bridge_moved: u64,
    parked: bool,
}

impl<T: QueuedLock> Installed<T> {
    /// Installs `lock` as the kernel's lock, as `owner`; may sleep.
    ///
    /// `EBUSY` if another owner's lock is installed or the lock ops are
    /// neither native nor upstream PV; nothing changes then.
    pub fn install(owner: &'static ThisModule, lock: KBox<T>) -> Result<Self> {
        let switch = Switch::begin(owner)?;
        let previous = Kind::current();
        if previous == Kind::Other || T::slot().get().is_some() {
            return Err(EBUSY);
        }
        T::slot()
            .0
            .store(core::ptr::from_ref(&*lock).cast_mut(), Ordering::Release);
        let ops = LockOps::of::<T>();
        // SAFETY: `T` is a `QueuedLock`, whose slowpath trampoline and
        // unlock thunk implement it; the slot points to `lock`, which
        // `Installed` keeps until the switch away from it.
        let bridge_moved = unsafe { switch.to(ops.slowpath, ops.unlock) };
        drop(switch);
        // INVARIANT: The slot points to `lock`; `T`'s ops are in place.
        Ok(Self {
            lock: core::mem::ManuallyDrop::new(lock),
            owner,
            previous,
            bridge_moved,
            parked: false,
        })
    }

    /// Whether the kernel's native lock runs instead of this one.
    pub fn is_parked(&self) -> bool {
        self.parked
    }

    /// Switches to the kernel's native lock and keeps this one for
    /// [`Installed::unpark`]; returns the waiters that moved from the
    /// bridge. May sleep.
    ///
    /// `EBUSY` if the lock ops are not this lock's (nothing changes then).
    /// Once parked, no CPU runs this lock's code: every waiter that was in
    /// it took its lock (its kick came from this lock's unlock, which
    /// stays until every such waiter has left) and released it with an
    /// unlock that understands the lock word.
    pub fn park(&mut self) -> Result<u64> {
        if self.parked {
            return Ok(0);
        }
        let switch = Switch::begin(self.owner)?;
        if !LockOps::current().same_as(&LockOps::of::<T>()) {
            return Err(EBUSY);
        }
        let (slowpath, unlock) = switch.kernel_ops(Kind::Native).ok_or(EINVAL)?;
        // SAFETY: The kernel's native slowpath and unlock: kernel text, one
        // algorithm.
        let moved = unsafe { switch.to(slowpath, unlock) };
        drop(switch);
        // INVARIANT: The switch synced after its last step: no CPU runs
        // `T`'s code, and the ops are the kernel's.
        self.parked = true;
        Ok(moved)
    }

    /// Switches from the kernel's native lock back to this one; returns
    /// the waiters that moved from the bridge. May sleep.
    ///
    /// `EBUSY` if another owner's lock ops are installed, or the lock ops
    /// are not the kernel's native ones; nothing changes then.
    pub fn unpark(&mut self) -> Result<u64> {
        if !self.parked {
            return Ok(0);
        }
        let switch = Switch::begin(self.owner)?;
        if Kind::current() != Kind::Native {
            return Err(EBUSY);
        }
        let ops = LockOps::of::<T>();
        // SAFETY: `T` is a `QueuedLock`, whose slowpath trampoline and
        // unlock thunk implement it; the slot still points to the lock,
        // which `Installed` keeps until the switch away from it.
        let moved = unsafe { switch.to(ops.slowpath, ops.unlock) };
        drop(switch);
        self.parked = false;
        Ok(moved)
    }

    /// The installed lock.
    pub fn lock(&self) -> &T {
        &self.lock
    }

    /// The kind of lock that was in place before, and is restored.
    pub fn previous(&self) -> Kind {
        self.previous
    }

    /// Waiters that moved from the bridge to the new slowpath while
    /// installing.
    pub fn bridge_moved(&self) -> u64 {
        self.bridge_moved
    }

    /// Installs the kernel's own lock again and frees this one; returns
    /// the waiters that moved from the bridge.
    pub fn uninstall(mut self) -> u64 {
        self.restore()
    }

    /// Switches back to the kernel's lock and empties the slot; returns
    /// the waiters that moved.
    ///
    /// It returns only once no CPU can run `T`'s code, so the module that
    /// owns that code cannot go before (its exit waits here). While `T`'s
    /// ops are installed the kernel keeps `T`'s module the owner of the lock
    /// ops, so no other owner can refuse the switch and nobody else changes
    /// the ops: the first attempt succeeds. Should that ever not hold, it
    /// warns and tries again every second rather than let code in use go.
    fn restore(&mut self) -> u64 {
        if T::slot().get().is_none() {
            return 0;
        }
        if self.parked {
            return self.restore_parked();
        }
        let mut warned = false;
        let moved = loop {
            match self.try_restore() {
                Ok(moved) => break moved,
                Err(why) => {
                    if !warned {
                        pr_warn!(
                            "pvlock: cannot switch the lock ops back ({}); the module's code stays until it can\n",
                            why
                        );
                        warned = true;
                    }
                    crate::time::delay::fsleep(crate::time::Delta::from_millis(1000));
                }
            }
        };
        // No CPU runs `T`'s code any more (the switch synced after its last
        // step): the lock may go.
        T::slot().0.store(core::ptr::null_mut(), Ordering::Release);
        moved
    }

    /// One attempt of [`Installed::restore`]: `Ok` once no CPU can run
    /// `T`'s code, with the waiters that moved from the bridge.
    fn try_restore(&self) -> core::result::Result<u64, &'static str> {
        let switch =
            Switch::begin(self.owner).map_err(|_| "another owner's lock ops are installed")?;
        let ours = LockOps::of::<T>();
        let now = LockOps::current();
        if !now.same_as(&ours) {
            if core::ptr::fn_addr_eq(now.slowpath, ours.slowpath)
                || core::ptr::fn_addr_eq(now.unlock, ours.unlock)
            {
                return Err("the lock ops are this lock's only in part");
            }
            // Replaced by someone else's whole: wait until no CPU runs ours.
            switch.sync();
            return Ok(0);
        }
        let (slowpath, unlock) = switch
            .kernel_ops(self.previous)
            .ok_or("no kernel lock ops")?;
        // SAFETY: The kernel's own slowpath and unlock of one kind: kernel
        // text, one algorithm.
        Ok(unsafe { switch.to(slowpath, unlock) })
    }
}

impl<T: QueuedLock> Installed<T> {
    /// `restore()` of a parked lock: the native lock runs, so this lock may
    /// go whatever happens; the kernel's upstream PV lock is installed
    /// again if it was the one in place at install time and the native one
    /// is still in place.
    fn restore_parked(&mut self) -> u64 {
        let mut moved = 0;
        if self.previous != Kind::Native {
            if let Ok(switch) = Switch::begin(self.owner) {
                if Kind::current() == Kind::Native {
                    if let Some((slowpath, unlock)) = switch.kernel_ops(self.previous) {
                        // SAFETY: The kernel's own slowpath and unlock of
                        // one kind: kernel text, one algorithm.
                        moved = unsafe { switch.to(slowpath, unlock) };
                    }
                }
            }
        }
        // By the type invariant no CPU runs `T`'s code while parked.
        T::slot().0.store(core::ptr::null_mut(), Ordering::Release);
        moved
    }
}

impl<T: QueuedLock> Drop for Installed<T> {
    fn drop(&mut self) {
        self.restore();
        // SAFETY: `restore()` returned, so the slot is empty and no CPU
        // runs `T`'s code: by the type invariant `lock` may be dropped, and
        // it is only once.
        unsafe { core::mem::ManuallyDrop::drop(&mut self.lock) };
    }
}

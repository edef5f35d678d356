// SPDX-License-Identifier: GPL-2.0

//! The atomics and tables `algo.rs` is written against: loom's under
//! `--cfg loom` (model checking), the standard library's otherwise (stress
//! tests).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex};

/// A table sized when the lock is made.
pub(crate) type Table<T> = Vec<T>;

/// A table of `n` values made by `f`.
pub(crate) fn table<T>(n: usize, f: impl Fn() -> T) -> Option<Table<T>> {
    Some((0..n).map(|_| f()).collect())
}

/// A read in a busy-wait loop. Loom can return an old value to a plain load
/// for ever, which no CPU does: reading with a read-modify-write gives the
/// latest value, as a real busy-wait loop eventually sees it.
#[cfg(loom)]
pub(crate) fn spin_load(a: &AtomicU32) -> u32 {
    a.fetch_add(0, Ordering::AcqRel)
}

/// A read in a busy-wait loop.
#[cfg(not(loom))]
pub(crate) fn spin_load(a: &AtomicU32) -> u32 {
    a.load(Ordering::Acquire)
}

/// The store a busy-wait loop waits for. Loom's modification order is a
/// partial order: a plain store concurrent with the spinner's
/// read-modify-writes ([`spin_load`]) can stay unordered with them, and the
/// spinner then reads its own writes for ever, which no CPU does (a store
/// becomes visible). An exchange reads the latest value and is ordered
/// after it, so the spinner's next read sees it. Release, as the kernel's
/// store.
#[cfg(loom)]
pub(crate) fn publish(a: &AtomicU32, v: u32) {
    a.swap(v, Ordering::Release);
}

/// The store a busy-wait loop waits for.
#[cfg(not(loom))]
pub(crate) fn publish(a: &AtomicU32, v: u32) {
    a.store(v, Ordering::Release)
}

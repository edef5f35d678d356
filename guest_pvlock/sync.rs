// SPDX-License-Identifier: GPL-2.0

//! The atomics and tables `algo.rs` is written against, in the kernel.
//!
//! `algo.rs` uses the `core::sync::atomic` vocabulary so that the model
//! checker (loom) can supply its own atomics. In the kernel it gets
//! `core::sync::atomic` itself, for the memory only this module touches:
//! the queue nodes, the hash table, the owner hints and the statistics. (The
//! lock word, which C code shares, goes through `kernel::pvlock::lockops`.)
//!
//! Why not the kernel's `Atomic<T>`: without `CONFIG_RUST_INLINE_HELPERS`
//! (which needs rustc and clang on the same LLVM) each of its operations is
//! a chain of out-of-line calls ending in a C helper, four calls for one
//! load, and the lock's slowpath is made of little else; the contended lock
//! was measurably slower for it. `core`'s atomics compile to the instructions
//! the kernel's own x86 atomics are (`mov` for loads and relaxed or release
//! stores, `lock cmpxchg`, `xchg`, `lock xadd`), and they are the memory
//! model (C11's) under which the model checker checked this algorithm.

use kernel::alloc::{flags::GFP_KERNEL, KVVec};

pub(crate) use core::sync::atomic::{
    fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};

/// A table sized at load time by the CPUs the guest can have.
pub(crate) type Table<T> = KVVec<T>;

/// A table of `n` values made by `f`; `None` if memory runs out.
pub(crate) fn table<T>(n: usize, f: impl Fn() -> T) -> Option<Table<T>> {
    let mut v = KVVec::with_capacity(n, GFP_KERNEL).ok()?;
    for _ in 0..n {
        v.push(f(), GFP_KERNEL).ok()?;
    }
    Some(v)
}

/// A read in a busy-wait loop, ordered like an acquire load: the value
/// another CPU stores becomes visible to the loop in time. (The model
/// checker, which has no notion of "in time", reads with an atomic
/// read-modify-write instead.)
#[inline(always)]
pub(crate) fn spin_load(a: &AtomicU32) -> u32 {
    a.load(Ordering::Acquire)
}

/// The store a busy-wait loop ([`spin_load`]) waits for: a release store.
/// (The model checker makes it an exchange: its modification order is
/// partial, and a plain store concurrent with the spinner's
/// read-modify-writes could stay unordered with them for good.)
#[inline(always)]
pub(crate) fn publish(a: &AtomicU32, v: u32) {
    a.store(v, Ordering::Release)
}

// SPDX-License-Identifier: GPL-2.0

//! The atomics `algo.rs` is written against, on the kernel's atomics.
//!
//! `algo.rs` uses the `core::sync::atomic` vocabulary so that the model
//! checker (loom) can supply its own atomics; here each operation maps to
//! the kernel's `Atomic<T>` with the matching LKMM ordering. A sequentially
//! consistent or acquire-release read-modify-write is fully ordered.

pub(crate) use core::sync::atomic::Ordering;
use kernel::sync::{
    atomic::{Acquire, Atomic, Full, Relaxed, Release},
    barrier,
};

macro_rules! atomic {
    ($name:ident, $t:ty) => {
        /// An atomic integer with the `core` API subset `algo.rs` uses.
        #[repr(transparent)]
        pub(crate) struct $name(Atomic<$t>);

        #[allow(dead_code)]
        impl $name {
            pub(crate) const fn new(v: $t) -> Self {
                Self(Atomic::new(v))
            }

            #[inline]
            pub(crate) fn load(&self, o: Ordering) -> $t {
                match o {
                    Ordering::Relaxed => self.0.load(Relaxed),
                    _ => self.0.load(Acquire),
                }
            }

            #[inline]
            pub(crate) fn store(&self, v: $t, o: Ordering) {
                match o {
                    Ordering::Relaxed => self.0.store(v, Relaxed),
                    Ordering::Release => self.0.store(v, Release),
                    _ => {
                        self.0.xchg(v, Full);
                    }
                }
            }

            #[inline]
            pub(crate) fn swap(&self, v: $t, o: Ordering) -> $t {
                match o {
                    Ordering::Relaxed => self.0.xchg(v, Relaxed),
                    Ordering::Acquire => self.0.xchg(v, Acquire),
                    Ordering::Release => self.0.xchg(v, Release),
                    _ => self.0.xchg(v, Full),
                }
            }

            #[inline]
            pub(crate) fn compare_exchange(
                &self,
                old: $t,
                new: $t,
                o: Ordering,
                _failure: Ordering,
            ) -> Result<$t, $t> {
                match o {
                    Ordering::Relaxed => self.0.cmpxchg(old, new, Relaxed),
                    Ordering::Acquire => self.0.cmpxchg(old, new, Acquire),
                    Ordering::Release => self.0.cmpxchg(old, new, Release),
                    _ => self.0.cmpxchg(old, new, Full),
                }
            }

            #[inline]
            pub(crate) fn fetch_add(&self, v: $t, o: Ordering) -> $t {
                match o {
                    Ordering::Relaxed => self.0.fetch_add(v, Relaxed),
                    Ordering::Acquire => self.0.fetch_add(v, Acquire),
                    Ordering::Release => self.0.fetch_add(v, Release),
                    _ => self.0.fetch_add(v, Full),
                }
            }
        }
    };
}

atomic!(AtomicU32, u32);
atomic!(AtomicU64, u64);
atomic!(AtomicUsize, usize);

/// A read in a busy-wait loop, ordered like an acquire load: the value
/// another CPU stores becomes visible to the loop in time. (The model
/// checker, which has no notion of "in time", reads with an atomic
/// read-modify-write instead.)
#[inline]
pub(crate) fn spin_load(a: &AtomicU32) -> u32 {
    a.load(Ordering::Acquire)
}

/// A memory fence.
#[inline]
pub(crate) fn fence(o: Ordering) {
    match o {
        Ordering::Acquire => barrier::smp_mb(barrier::Read),
        Ordering::Release => barrier::smp_mb(barrier::Write),
        _ => barrier::smp_mb(barrier::Full),
    }
}

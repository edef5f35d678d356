// SPDX-License-Identifier: GPL-2.0

//! Statistics for pvlock's debugfs files: log2 histograms (buckets as
//! [`super::abi::bucket`] defines them) and the text format of
//! `debugfs_create_u32_array()`.

use crate::{
    fmt,
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
    uaccess::UserSliceReader,
};

pub use super::abi::{bucket, HIST_BUCKETS as BUCKETS};
use core::sync::atomic::{AtomicU32, AtomicU64};

/// Adds `v` to `counter` the way `this_cpu_add()` does: with one `add`
/// instruction, not a locked one. An interrupt or NMI on this CPU comes
/// before or after it, never in the middle, so no addition made on this
/// CPU is lost; one made at the same moment on another CPU may be. For a
/// per-CPU counter that only its own CPU adds to (preemption off); readers
/// on any CPU see the value before or after (an aligned 8-byte store).
///
/// A locked read-modify-write (`fetch_add()`) costs several times as much,
/// and the lock slowpath counts while it holds the lock it just took.
#[inline(always)]
pub fn local_add(counter: &AtomicU64, v: u64) {
    // SAFETY: `counter` is a live, aligned `u64` that may be accessed
    // atomically from any CPU. The instruction reads it once and writes it
    // once, each an aligned 8-byte access, as a relaxed load and a relaxed
    // store would; it touches no other memory and leaves the stack alone.
    unsafe {
        core::arch::asm!(
            "add qword ptr [{p}], {v}",
            p = in(reg) counter.as_ptr(),
            v = in(reg) v,
            options(nostack),
        )
    };
}

/// Adds 1 to `counter` as [`local_add`] does, for a 32-bit counter
/// (`debugfs_create_u32_array()` histograms).
#[inline(always)]
pub fn local_inc(counter: &AtomicU32) {
    // SAFETY: As in `local_add()`, on an aligned `u32`.
    unsafe {
        core::arch::asm!(
            "add dword ptr [{p}], 1",
            p = in(reg) counter.as_ptr(),
            options(nostack),
        )
    };
}

/// A histogram of log2 buckets with relaxed atomic counters.
pub struct Log2Histogram {
    buckets: [Atomic<u32>; BUCKETS],
}

impl Default for Log2Histogram {
    fn default() -> Self {
        Self::new()
    }
}

impl Log2Histogram {
    /// An empty histogram.
    pub const fn new() -> Self {
        Self {
            buckets: [const { Atomic::new(0) }; BUCKETS],
        }
    }

    /// Counts `v`.
    #[inline]
    pub fn record(&self, v: u64) {
        self.buckets[bucket(v)].add(1u32, Relaxed);
    }

    /// The count of bucket `k`.
    pub fn get(&self, k: usize) -> u32 {
        self.buckets.get(k).map_or(0, |b| b.load(Relaxed))
    }

    /// Zeroes every bucket.
    pub fn clear(&self) {
        for b in &self.buckets {
            b.store(0, Relaxed);
        }
    }
}

/// Writes `values` the way `debugfs_create_u32_array()` shows an array:
/// separated by single spaces, a newline after the last.
pub fn write_u32_array(
    f: &mut fmt::Formatter<'_>,
    values: impl IntoIterator<Item = u32>,
) -> fmt::Result {
    let mut first = true;
    for v in values {
        if first {
            write!(f, "{v}")?;
            first = false;
        } else {
            write!(f, " {v}")?;
        }
    }
    writeln!(f)
}

/// Checks a write to a `zero_stats` file: only `1` (a trailing newline
/// allowed) asks for zeroing; anything else is `EINVAL`, so that a bad write
/// changes nothing.
pub fn check_zero_stats_write(reader: &mut UserSliceReader) -> Result {
    let mut buf = [0u8; 8];
    let n = reader.len();
    if n == 0 || n > buf.len() {
        return Err(EINVAL);
    }
    reader.read_slice(&mut buf[..n])?;
    match &buf[..n] {
        b"1" | b"1\n" => Ok(()),
        _ => Err(EINVAL),
    }
}

// SPDX-License-Identifier: GPL-2.0

//! The layout of the kernel's `struct qspinlock` word on x86 (see
//! `include/asm-generic/qspinlock_types.h`), defined once.
//!
//! This file has no dependencies: the kernel crate builds it as
//! `kernel::pvlock::qspinlock`, and `tools/pvlock-model` includes it with
//! `#[path]` for the model of `guest_pvlock/algo.rs`.
//!
//! Bits 0-7 are the locked byte, 8-15 the pending byte, 16-17 the tail's
//! nesting index and 18-31 the tail's CPU number plus one. That holds for
//! `NR_CPUS < 16384` ([`MAX_CPUS`]): the kernel's byte-wide pending and
//! 14-bit tail CPU.

/// Locked byte: held.
pub const Q_LOCKED_VAL: u8 = 1;
/// Locked byte: held, and a halted waiter is hashed for this lock (a
/// paravirtual lock's unlock must kick it).
pub const Q_SLOW_VAL: u8 = 3;
/// Mask of the locked byte in the word.
pub const Q_LOCKED_MASK: u32 = 0xff;
/// The pending bit in the word.
pub const Q_PENDING_VAL: u32 = 1 << 8;
/// Locked and pending bytes of the word.
pub const Q_LOCKED_PENDING_MASK: u32 = 0xffff;
/// Offset of the tail in the word.
pub const Q_TAIL_OFFSET: u32 = 16;
/// The tail: (CPU + 1) << 18 | nesting index << 16.
pub const Q_TAIL_MASK: u32 = 0xffff_0000;
/// Offset of the tail's nesting index.
pub const Q_TAIL_IDX_OFFSET: u32 = 16;
/// Offset of the tail's CPU number plus one.
pub const Q_TAIL_CPU_OFFSET: u32 = 18;
/// Nesting levels of queue nodes per CPU: task, softirq, hardirq, NMI.
pub const MAX_NODES: usize = 4;
/// CPU numbers the tail encodes: `NR_CPUS` must be below this.
pub const MAX_CPUS: usize = 1 << (32 - Q_TAIL_CPU_OFFSET);

/// The tail of a waiter on node `idx` of `cpu`.
#[inline(always)]
pub const fn encode_tail(cpu: usize, idx: usize) -> u32 {
    ((cpu as u32).wrapping_add(1) << Q_TAIL_CPU_OFFSET) | ((idx as u32) << Q_TAIL_IDX_OFFSET)
}

/// The CPU and nesting index of a non-zero tail.
#[inline(always)]
pub const fn decode_tail(tail: u32) -> (usize, usize) {
    (
        ((tail >> Q_TAIL_CPU_OFFSET).wrapping_sub(1)) as usize,
        ((tail >> Q_TAIL_IDX_OFFSET) & (MAX_NODES as u32 - 1)) as usize,
    )
}

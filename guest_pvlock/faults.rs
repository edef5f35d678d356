// SPDX-License-Identifier: GPL-2.0

//! Fault injection, for the tests only.
//!
//! A build with `PVLOCK_TEST_HOOKS=y` (the harness's, `make modules-test`)
//! has the `inject_*` parameters: drop every Nth kick, aim every Nth at an
//! APIC ID no vCPU has, delay a waiter between its last look at the lock
//! and its wait, tell the host that every CPU is always in a critical
//! section. Every other build, the one users install, has none of them:
//! the functions below are constants there, and the lock's paths compile
//! as if the hooks had never been written.

#[cfg(pvlock_test_hooks)]
pub(crate) use hooks::*;
#[cfg(not(pvlock_test_hooks))]
pub(crate) use none::*;

#[cfg(pvlock_test_hooks)]
mod hooks {
    use kernel::pvlock::guest;
    use kernel::pvlock::param::U32Param;
    use kernel::sync::atomic::{Atomic, Relaxed};

    static INJECT_DROP_KICK: U32Param = U32Param::new(0, 0, u32::MAX);
    kernel::pvlock_module_param!(inject_drop_kick: U32Param = INJECT_DROP_KICK, 0o644,
        "Test only: drop every Nth kick as if it had been delivered (0: off)");

    static INJECT_FAIL_KICK: U32Param = U32Param::new(0, 0, u32::MAX);
    kernel::pvlock_module_param!(inject_fail_kick: U32Param = INJECT_FAIL_KICK, 0o644,
        "Test only: kick the target of every Nth project kick by an APIC ID no vCPU has, so that the host refuses it (0: off)");

    static INJECT_WAIT_DELAY_US: U32Param = U32Param::new(0, 0, 100_000);
    kernel::pvlock_module_param!(inject_wait_delay_us: U32Param = INJECT_WAIT_DELAY_US, 0o644,
        "Test only: microseconds a waiter spends between its last look at the lock and its wait (0: off)");

    /// Faults injected so far: kicks dropped, kicks failed, waits delayed.
    static DROPS: Atomic<u64> = Atomic::new(0);
    static FAILURES: Atomic<u64> = Atomic::new(0);
    static DELAYS: Atomic<u64> = Atomic::new(0);
    /// Kicks made while an `inject_*_kick` parameter is on, to pick every
    /// Nth.
    static SEQ: Atomic<u64> = Atomic::new(0);

    /// An APIC ID that no vCPU has (x2APIC, not the broadcast ID).
    const BAD_APIC_ID: u32 = 0xffff_fffe;
    /// CPUs whose `inject_fail_kick` applies.
    const CPUS: usize = 64;
    /// Per kicking CPU (below [`CPUS`]): the target, plus 1, of the kick
    /// in progress whose target's APIC ID is wrong on purpose, 0 for none.
    /// Its unlock runs with preemption disabled, so the CPU's entry is its
    /// own.
    static BAD_TARGET: [Atomic<u32>; CPUS] = [const { Atomic::new(0) }; CPUS];

    /// Whether this kick is the Nth of `every` (0: never).
    fn nth(every: u32) -> bool {
        every != 0 && SEQ.fetch_add(1u64, Relaxed).wrapping_add(1) % u64::from(every) == 0
    }

    /// Whether to drop this kick (report it delivered, make none).
    pub(crate) fn drop_kick() -> bool {
        let d = nth(INJECT_DROP_KICK.get());
        if d {
            DROPS.add(1u64, Relaxed);
        }
        d
    }

    /// A new kick from `here` to `target`: aims it, and its fallbacks, at a
    /// wrong APIC ID if it is the Nth.
    pub(crate) fn begin_kick(here: usize, target: usize) {
        if let Some(b) = BAD_TARGET.get(here) {
            let bad = nth(INJECT_FAIL_KICK.get());
            if bad {
                FAILURES.add(1u64, Relaxed);
            }
            b.store(if bad { target as u32 + 1 } else { 0 }, Relaxed);
        }
    }

    /// The APIC ID to kick `target` with from `here`: a wrong one while the
    /// kick in progress is one that `begin_kick()` picked.
    pub(crate) fn apic_of(here: usize, target: usize) -> u32 {
        match BAD_TARGET.get(here) {
            Some(b) if b.load(Relaxed) as usize == target + 1 => BAD_APIC_ID,
            _ => guest::apic_id(target as u32),
        }
    }

    /// The last use of a wrong APIC ID from `here`: a later kick is aimed
    /// right unless `begin_kick()` picks it again.
    pub(crate) fn end_kick(here: usize) {
        if let Some(b) = BAD_TARGET.get(here) {
            b.store(0, Relaxed);
        }
    }

    /// Microseconds to spend between the last look at the lock and the
    /// wait (0: none).
    pub(crate) fn wait_delay_us() -> u32 {
        INJECT_WAIT_DELAY_US.get()
    }

    /// A waiter spent [`wait_delay_us()`] before its wait.
    pub(crate) fn delayed() {
        DELAYS.add(1u64, Relaxed);
    }

    /// The `info` file's lines of the faults injected.
    pub(crate) fn info(f: &mut impl core::fmt::Write) -> core::fmt::Result {
        writeln!(f, "injected_drops: {}", DROPS.load(Relaxed))?;
        writeln!(f, "injected_failures: {}", FAILURES.load(Relaxed))?;
        writeln!(f, "injected_delays: {}", DELAYS.load(Relaxed))
    }
}

#[cfg(not(pvlock_test_hooks))]
mod none {
    use kernel::pvlock::guest;

    #[inline(always)]
    pub(crate) fn drop_kick() -> bool {
        false
    }

    #[inline(always)]
    pub(crate) fn begin_kick(_here: usize, _target: usize) {}

    #[inline(always)]
    pub(crate) fn apic_of(_here: usize, target: usize) -> u32 {
        guest::apic_id(target as u32)
    }

    #[inline(always)]
    pub(crate) fn end_kick(_here: usize) {}

    #[inline(always)]
    pub(crate) fn wait_delay_us() -> u32 {
        0
    }

    #[inline(always)]
    pub(crate) fn delayed() {}

    #[inline(always)]
    pub(crate) fn info(_f: &mut impl core::fmt::Write) -> core::fmt::Result {
        Ok(())
    }
}

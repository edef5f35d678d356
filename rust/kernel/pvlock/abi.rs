// SPDX-License-Identifier: GPL-2.0

//! The pvlock ABI numbers, defined once for every user.
//!
//! This file has no dependencies: the kernel crate builds it as
//! `kernel::pvlock::abi` (and checks it against the C headers at compile
//! time), and the userspace tools include it with `#[path]`.
//!
//! All numbers are project-local until upstream assigns them; see
//! `Documentation/virt/kvm/pvlock.rst`.

/// CPUID bit in the KVM features leaf (`KVM_CPUID_FEATURES`, eax).
pub const KVM_FEATURE_PVLOCK_KICK: u32 = 23;
/// Upstream's bit for `KVM_HC_KICK_CPU`.
pub const KVM_FEATURE_PV_UNHALT: u32 = 7;
/// Upstream's steal time bit (`vcpu_is_preempted()`).
pub const KVM_FEATURE_STEAL_TIME: u32 = 5;
/// Upstream's directed yield bit (`KVM_HC_SCHED_YIELD`).
pub const KVM_FEATURE_PV_SCHED_YIELD: u32 = 13;
/// Upstream's hint bit: vCPUs are pinned to dedicated pCPUs.
pub const KVM_HINTS_REALTIME: u32 = 0;

/// Upstream's kick hypercall: a0 = flags (0), a1 = APIC ID.
pub const KVM_HC_KICK_CPU: u32 = 5;
/// Upstream's directed yield: a0 = APIC ID of the vCPU to yield to.
pub const KVM_HC_SCHED_YIELD: u32 = 11;
/// pvlock kick: a0 = flags (0), a1 = APIC ID of the target, a2 = the token
/// of the target's lock wait that the kick ends.
pub const KVM_HC_PVLOCK_KICK: u32 = 0x7076_0001;
/// pvlock parameter read: a0 = parameter number.
pub const KVM_HC_PVLOCK_GET_PARAM: u32 = 0x7076_0002;
/// pvlock lock wait: a0 = flags (0), a1 = token (not 0). The vCPU halts
/// until a `KVM_HC_PVLOCK_KICK` with this token or a larger one, or any
/// other event that ends a `HLT` (an interrupt if the guest enabled them,
/// an NMI, the VMM), or the host's bound on the wait; returns
/// [`KVM_PVLOCK_WAIT_KICKED`] (at once if such a kick came before),
/// [`KVM_PVLOCK_WAIT_BOUND`] or [`KVM_PVLOCK_WAIT_ENDED`]. A vCPU's tokens
/// grow from one wait to the next.
pub const KVM_HC_PVLOCK_WAIT: u32 = 0x7076_0003;
/// `KVM_HC_PVLOCK_WAIT` result: an event other than its kick ended the
/// wait (an interrupt, an NMI, the VMM). Before ABI 4
/// ([`KVM_PVLOCK_ABI_WAIT_KICKED`]), a kick too.
pub const KVM_PVLOCK_WAIT_ENDED: i64 = 0;
/// `KVM_HC_PVLOCK_WAIT` result: the wait lasted the host's bound and the
/// host ended it; no kick had come. A guest that knows only
/// [`KVM_PVLOCK_WAIT_ENDED`] treats it as that.
pub const KVM_PVLOCK_WAIT_BOUND: i64 = 1;
/// `KVM_HC_PVLOCK_WAIT` result (ABI 4): a kick with the wait's token or a
/// larger one ended the wait or came before it (or the host's module went
/// away). A kick that returned [`Kick::Woken`] for a wait is always
/// followed by this result for that wait: anything else means a lost kick.
pub const KVM_PVLOCK_WAIT_KICKED: i64 = 2;

/// What `KVM_HC_PVLOCK_KICK` did, both meaning the kick is delivered.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kick {
    /// The target was in the lock wait with this token and is runnable.
    Woken,
    /// The target was not in that wait yet: the kick is held, and that
    /// wait (only a wait with this token or a smaller one) returns at once.
    Held,
}

/// `KVM_HC_PVLOCK_KICK` result: [`Kick::Woken`].
pub const KVM_PVLOCK_KICK_WOKEN: i64 = 0;
/// `KVM_HC_PVLOCK_KICK` result: [`Kick::Held`].
pub const KVM_PVLOCK_KICK_HELD: i64 = 1;

impl Kick {
    /// The result of `KVM_HC_PVLOCK_KICK` (the guest's RAX, sign-extended):
    /// `Err` holds a negative KVM error code (`-KVM_EINVAL`, `-KVM_ENOSYS`).
    pub const fn from_ret(ret: i64) -> Result<Kick, i64> {
        match ret {
            KVM_PVLOCK_KICK_WOKEN => Ok(Kick::Woken),
            KVM_PVLOCK_KICK_HELD => Ok(Kick::Held),
            e => Err(e),
        }
    }

    /// The hypercall's return value.
    pub const fn ret(self) -> i64 {
        match self {
            Kick::Woken => KVM_PVLOCK_KICK_WOKEN,
            Kick::Held => KVM_PVLOCK_KICK_HELD,
        }
    }
}

/// `KVM_HC_PVLOCK_GET_PARAM` parameter: ABI version.
pub const KVM_PVLOCK_PARAM_VERSION: u64 = 0;
/// `KVM_HC_PVLOCK_GET_PARAM` parameter: spin threshold the host recommends
/// now (it follows the advice's).
pub const KVM_PVLOCK_PARAM_SPIN_THRESHOLD: u64 = 1;
/// `KVM_HC_PVLOCK_GET_PARAM` parameter: the host's advice for the current
/// load ([`Advice`]), which it may change at any time.
pub const KVM_PVLOCK_PARAM_ADVICE: u64 = 2;
/// `KVM_HC_PVLOCK_GET_PARAM` parameter: a token larger than every kick
/// token held for the VM's vCPUs (kicks outlive a kexec); a guest starts
/// its tokens above it.
pub const KVM_PVLOCK_PARAM_TOKEN_BASE: u64 = 3;
/// The ABI version this file describes: 2 added `KVM_HC_PVLOCK_WAIT` and
/// the token of `KVM_HC_PVLOCK_KICK`; 3 added [`KVM_PVLOCK_PARAM_ADVICE`]
/// and [`KVM_PVLOCK_PARAM_TOKEN_BASE`]; 4 added [`KVM_PVLOCK_WAIT_KICKED`].
pub const KVM_PVLOCK_ABI_VERSION: u64 = 4;
/// The lowest ABI version whose lock waits the guest uses.
pub const KVM_PVLOCK_ABI_WAIT: u64 = 2;
/// The lowest ABI version with [`KVM_PVLOCK_PARAM_ADVICE`] and
/// [`KVM_PVLOCK_PARAM_TOKEN_BASE`].
pub const KVM_PVLOCK_ABI_ADVICE: u64 = 3;
/// The lowest ABI version whose lock waits say whether their kick ended
/// them ([`KVM_PVLOCK_WAIT_KICKED`]).
pub const KVM_PVLOCK_ABI_WAIT_KICKED: u64 = 4;

/// [`KVM_PVLOCK_PARAM_ADVICE`] bits 0-26: the spin threshold recommended
/// now, 0 for none. The whole value fits in 31 bits: a 32-bit guest reads
/// a hypercall's result from EAX, as a positive value.
pub const KVM_PVLOCK_ADVICE_THRESHOLD_MASK: u64 = 0x07ff_ffff;
/// [`KVM_PVLOCK_PARAM_ADVICE`] bit 30: the VM's vCPUs have CPUs to
/// themselves now.
pub const KVM_PVLOCK_ADVICE_DEDICATED: u64 = 1 << 30;

/// The host's advice to a guest's spinlock ([`KVM_PVLOCK_PARAM_ADVICE`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Advice {
    /// The VM's vCPUs have CPUs to themselves: a waiter may spin as on
    /// bare metal, and the native spinlock is the fastest.
    pub dedicated: bool,
    /// The spin threshold recommended for the current load, 0 for none.
    pub spin_threshold: u32,
}

impl Advice {
    /// The advice in a [`KVM_PVLOCK_PARAM_ADVICE`] value; `None` if bits
    /// that this ABI does not define are set.
    pub const fn from_value(v: u64) -> Option<Advice> {
        if v & !(KVM_PVLOCK_ADVICE_THRESHOLD_MASK | KVM_PVLOCK_ADVICE_DEDICATED) != 0 {
            return None;
        }
        Some(Advice {
            dedicated: v & KVM_PVLOCK_ADVICE_DEDICATED != 0,
            spin_threshold: (v & KVM_PVLOCK_ADVICE_THRESHOLD_MASK) as u32,
        })
    }

    /// The [`KVM_PVLOCK_PARAM_ADVICE`] value (a threshold above
    /// [`MAX_SPIN_THRESHOLD`] is clamped to it).
    pub const fn value(self) -> u64 {
        let t = if self.spin_threshold > MAX_SPIN_THRESHOLD {
            MAX_SPIN_THRESHOLD
        } else {
            self.spin_threshold
        };
        (if self.dedicated {
            KVM_PVLOCK_ADVICE_DEDICATED
        } else {
            0
        }) | t as u64
    }
}

/// Error returned to the guest for an unknown hypercall or a disabled one.
pub const KVM_ENOSYS: i64 = 1000;
/// Error returned to the guest for a bad argument.
pub const KVM_EINVAL: i64 = 22;

/// Capability number for `KVM_CHECK_EXTENSION` and `KVM_ENABLE_CAP`.
pub const KVM_CAP_PVLOCK_KICK: u32 = 0x7076;
/// `KVM_ENABLE_CAP` args\[0\]: enable the pvlock hypercalls for the VM.
pub const KVM_PVLOCK_KICK_ENABLE: u64 = 1 << 0;
/// `KVM_ENABLE_CAP` args\[0\]: yield to a target that is preempted.
pub const KVM_PVLOCK_KICK_YIELD: u64 = 1 << 1;
/// Every flag `KVM_ENABLE_CAP` accepts.
pub const KVM_PVLOCK_KICK_VALID_FLAGS: u64 = KVM_PVLOCK_KICK_ENABLE | KVM_PVLOCK_KICK_YIELD;
/// `KVM_ENABLE_CAP` args\[2\]: the advice follows the host's load.
pub const KVM_PVLOCK_ADVICE_AUTO: u64 = 0;
/// `KVM_ENABLE_CAP` args\[2\]: the VMM pinned every vCPU to a CPU of its
/// own; the advice says dedicated.
pub const KVM_PVLOCK_ADVICE_PINNED: u64 = 1;
/// `KVM_ENABLE_CAP` args\[2\]: the advice never says dedicated.
pub const KVM_PVLOCK_ADVICE_SHARED: u64 = 2;

/// The largest spin threshold a host may recommend (`KVM_ENABLE_CAP`
/// args\[1\], host_kvm's `spin_threshold`) and a guest accepts (its
/// `spin_threshold` parameter, `KVM_PVLOCK_PARAM_SPIN_THRESHOLD`).
pub const MAX_SPIN_THRESHOLD: u32 = 1 << 26;

// ---------------------------------------------------------------- debugfs
//
// The statistics files of both modules, which `tools/` read. Documented in
// `Documentation/pvlock/guest.rst` and `Documentation/virt/kvm/pvlock.rst`.

/// guest_pvlock's debugfs directory.
pub const GUEST_DEBUGFS_DIR: &core::ffi::CStr = c"pvlock";
/// host_kvm's debugfs directory.
pub const HOST_DEBUGFS_DIR: &core::ffi::CStr = c"pvlock_host";
/// The write-only file in both directories: writing `1` zeroes every
/// statistic of the directory.
pub const ZERO_STATS: &core::ffi::CStr = c"zero_stats";

/// Defines a list of statistics once: an enum of them in order, their
/// debugfs names in that order (`$names`) and every one of them (`$all`).
/// The module that keeps them indexes its storage with the enum, the
/// tools read the files by the names: a reordering renames nothing.
macro_rules! stat_list {
    (
        $(#[$m:meta])*
        pub enum $name:ident, $names:ident, $all:ident {
            $($(#[$vm:meta])* $v:ident = $n:literal,)*
        }
    ) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Debug)]
        #[repr(usize)]
        pub enum $name {
            $($(#[$vm])* $v,)*
        }

        /// The debugfs file names, in the order of the enum.
        pub const $names: [&core::ffi::CStr; [$($n),*].len()] = [$($n),*];

        /// Every one, in order.
        pub const $all: [$name; [$($n),*].len()] = [$($name::$v),*];

        impl $name {
            /// The debugfs file name.
            pub const fn name(self) -> &'static core::ffi::CStr {
                $names[self as usize]
            }
        }
    };
}

stat_list! {
    /// guest_pvlock's counters, per CPU (one decimal u64 per file), as
    /// `Documentation/pvlock/guest.rst` documents them.
    pub enum GuestCounter, GUEST_COUNTERS, GUEST_COUNTER_LIST {
        /// Acquisitions through the queue (slowpath).
        TakenSlow = c"taken_slow",
        /// ... of which the head found the lock free while about to wait.
        TakenSlowPickup = c"taken_slow_pickup",
        /// Acquisitions by stealing a free lock ahead of the queue.
        TakenSteal = c"taken_steal",
        /// Acquisitions of a pending waiter (never queued).
        TakenPending = c"taken_pending",
        /// Slowpaths beyond four nesting levels (trylock loop).
        TakenNested = c"taken_nested",
        /// Unlocks that took the slow path (a waiting waiter was hashed);
        /// each kicks once.
        ReleasedSlow = c"released_slow",
        /// Waits of a queue head.
        HaltsHead = c"halts_head",
        /// Waits of a queued waiter behind the head.
        HaltsNode = c"halts_node",
        /// Waits decided early: the awaited vCPU was preempted or waiting.
        HaltsEarly = c"halts_early",
        /// Wake-ups that found the wait not over.
        SpuriousWakeups = c"spurious_wakeups",
        /// Kick hypercalls made.
        Kicks = c"kicks",
        /// Project kicks the host held for a wait not started yet.
        KicksHeld = c"kicks_held",
        /// Kicks the host refused or no longer offers.
        KickFailures = c"kick_failures",
        /// Targets woken by CPU number (an NMI) after the host refused the
        /// project kick for them.
        KicksFallback = c"kicks_fallback",
        /// Targets woken with an NMI because no kick works.
        KicksNmi = c"kicks_nmi",
        /// Nanoseconds spent waiting.
        TimeBlocked = c"time_blocked_ns",
        /// Unlocks that found a locked byte they did not expect.
        BadUnlocks = c"bad_unlocks",
        /// Directed yields of a queue head to the preempted likely holder.
        Yields = c"yields",
        /// Moves to a mode that waits and kicks differently (or not at all).
        ModeChanges = c"mode_changes",
        /// Waits that the host's bound ended (no kick came in that time).
        WaitsBound = c"waits_bound",
        /// ... of which the waiter found the lock released to it: its kick
        /// was lost, or came later than the bound.
        WakeupsMissed = c"wakeups_missed",
        /// Waits that an event other than their kick or the bound ended
        /// (an interrupt, an NMI); hosts of ABI 4 only.
        WaitsOther = c"waits_other",
        /// Waits that ended without their kick (an interrupt, an NMI, the
        /// bound) although the host had said that the kick found them
        /// waiting ([`Kick::Woken`]): a kick lost in the host. Hosts of ABI
        /// 4 only; it must stay 0.
        WakeupsLost = c"wakeups_lost",
    }
}

/// guest_pvlock's counters of its switches between pvlock and the native
/// lock (`guest_pvlock/adaptive.rs`), after [`GUEST_COUNTERS`].
pub const GUEST_ADAPTIVE_COUNTERS: [&core::ffi::CStr; 6] = [
    c"switches_to_native",
    c"switches_to_pvlock",
    c"time_native_ns",
    c"time_pvlock_ns",
    c"switch_last_ns",
    c"switch_max_ns",
];

stat_list! {
    /// guest_pvlock's histograms, per CPU (`HIST_BUCKETS` u32 each).
    pub enum GuestHistogram, GUEST_HISTOGRAMS, GUEST_HISTOGRAM_LIST {
        /// Time from entering the slowpath to owning the lock.
        Wait = c"histo_wait",
        /// Time spent spinning before owning the lock or waiting.
        Spin = c"histo_spin",
        /// Time of each wait.
        Blocked = c"histo_blocked",
    }
}

stat_list! {
    /// host_kvm's counters, for all VMs (one decimal u64 per file), as
    /// `Documentation/virt/kvm/pvlock.rst` documents them.
    pub enum HostCounter, HOST_COUNTERS, HOST_COUNTER_LIST {
        /// `KVM_HC_PVLOCK_KICK` calls from enabled VMs.
        Kicks = c"kicks",
        /// ... that found their target in the wait.
        KicksWoken = c"kicks_woken",
        /// ... held for a wait not started yet.
        KicksHeld = c"kicks_held",
        /// ... with no single vCPU at that APIC ID.
        KicksBadTarget = c"kicks_bad_target",
        /// ... aimed at the caller itself.
        KicksSelf = c"kicks_self",
        /// ... with bad flags or a token of 0.
        KicksBadArgs = c"kicks_bad_args",
        /// `KVM_HC_PVLOCK_WAIT` calls from enabled VMs.
        Waits = c"waits",
        /// ... that returned without halting.
        WaitsAtOnce = c"waits_at_once",
        /// Waits ended by their kick.
        WaitsKicked = c"waits_kicked",
        /// Waits ended otherwise.
        WaitsOther = c"waits_other",
        /// Waits with bad flags or a token of 0.
        WaitsBadArgs = c"waits_bad_args",
        /// pvlock hypercalls from VMs without pvlock enabled.
        Disabled = c"hypercalls_disabled",
        /// Directed yields tried for a held kick.
        Yields = c"yields",
        /// ... that switched to the target.
        YieldsDone = c"yields_done",
        /// `KVM_HC_PVLOCK_GET_PARAM` calls.
        GetParam = c"get_param",
        /// ... with an unknown parameter.
        GetParamBad = c"get_param_bad",
        /// `KVM_ENABLE_CAP(KVM_CAP_PVLOCK_KICK)` calls.
        EnableCap = c"enable_cap",
        /// ... refused.
        EnableCapBad = c"enable_cap_bad",
        /// Kicks dropped by `inject_ignore_kicks`.
        KicksIgnored = c"kicks_ignored",
        /// Waits ended by the bound.
        WaitsBound = c"waits_bound",
        /// Advice decisions, one per enabled VM per sample.
        AdviceSamples = c"advice_samples",
        /// Changes of a VM's advice to dedicated.
        AdviceDedicated = c"advice_dedicated",
        /// Changes of a VM's advice back to shared.
        AdviceShared = c"advice_shared",
    }
}

/// host_kvm's histograms.
pub const HOST_HISTOGRAMS: [&core::ffi::CStr; 1] = [c"histo_kick_latency"];

/// Buckets of every histogram: bucket `k` counts values in `[2^k, 2^(k+1))`
/// nanoseconds; bucket 0 also counts 0, the last bucket everything from
/// `2^(HIST_BUCKETS-1)` on. A histogram file is the text format of
/// `debugfs_create_u32_array()`: the values separated by single spaces, a
/// newline after the last.
pub const HIST_BUCKETS: usize = 32;

/// The histogram bucket of `v`.
#[inline]
pub const fn bucket(v: u64) -> usize {
    if v == 0 {
        return 0;
    }
    let k = (63 - v.leading_zeros()) as usize;
    if k >= HIST_BUCKETS {
        HIST_BUCKETS - 1
    } else {
        k
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Following the host's load: the native lock while the vCPUs have CPUs to
//! themselves, pvlock while they do not.
//!
//! Without overcommit the kernel's native queued spinlock is the fastest
//! lock (a waiter spins, and the holder is never preempted), and a
//! paravirtual lock only pays for its checks. Only the host knows whether a
//! VM's vCPUs compete for CPUs: `host_kvm` publishes that as the advice
//! (`KVM_PVLOCK_PARAM_ADVICE`, `Documentation/virt/kvm/pvlock.rst`). Every
//! `adaptive_period_ms` this module reads the advice and the steal time of
//! every online vCPU, and
//!
//! - parks the lock (the kernel's native lock runs instead,
//!   [`Installed::park`]) once the host has said *dedicated* and no vCPU
//!   has been kept from running for more than `adaptive_max_steal`
//!   thousandths of two periods in a row, for `adaptive_hold_ms` without a
//!   break;
//! - installs it again ([`Installed::unpark`]) at the first period in which
//!   either stops being true, or the advice cannot be read (host_kvm gone);
//! - keeps the host's recommended spin threshold current.
//!
//! The host holds its advice back until the load has been low for a while
//! (its `advice_hold_ms`) and withdraws it at the first sign of
//! competition; steal time is the guest's own guard against advice that is
//! late. Each switch goes through the bridge (`lockops.rs`), which is safe
//! with locks in use in both directions: see "Following the host's load"
//! in `Documentation/pvlock/design.rst`.

use crate::{algo, params, Pvlock};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use kernel::{
    new_mutex,
    prelude::*,
    pvlock::{
        abi::{self, Advice},
        guest,
        lockops::Installed,
        periodic::PeriodicWork,
    },
    sync::Mutex,
};

/// Why the lock is in the state it is; shown in `info`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u32)]
pub(crate) enum Reason {
    /// Installed at load time; no period has run yet.
    Load = 0,
    /// `adaptive=0`.
    Off,
    /// The host gives no advice (host_kvm not loaded or too old).
    NoAdvice,
    /// The host says the vCPUs compete for CPUs.
    Shared,
    /// The host says dedicated, but steal time does not agree.
    Steal,
    /// The host says dedicated and steal time agrees, not for long enough.
    Holding,
    /// The host says dedicated and steal time agrees.
    Dedicated,
    /// A switch was refused: another owner's lock ops are installed.
    Busy,
}

impl Reason {
    const ALL: [Reason; 8] = [
        Reason::Load,
        Reason::Off,
        Reason::NoAdvice,
        Reason::Shared,
        Reason::Steal,
        Reason::Holding,
        Reason::Dedicated,
        Reason::Busy,
    ];

    fn from_u32(v: u32) -> Reason {
        Self::ALL.get(v as usize).copied().unwrap_or(Reason::Load)
    }

    /// The text of `info`'s `adaptive_reason`.
    pub(crate) fn text(self) -> &'static str {
        match self {
            Reason::Load => "installed at load",
            Reason::Off => "adaptive=0",
            Reason::NoAdvice => "the host gives no advice",
            Reason::Shared => "the host says the vCPUs compete for CPUs",
            Reason::Steal => "steal time: a vCPU waited for its CPU",
            Reason::Holding => "the host says dedicated; holding",
            Reason::Dedicated => "the host says dedicated and steal time agrees",
            Reason::Busy => "another owner's lock ops are installed",
        }
    }
}

/// The statistics of the switches (debugfs, `abi::GUEST_ADAPTIVE_COUNTERS`).
pub(crate) struct Stats {
    /// Whether the native lock runs (the lock is parked).
    native: AtomicU32,
    reason: AtomicU32,
    to_native: AtomicU64,
    to_pvlock: AtomicU64,
    /// Time spent in each state before the current one began.
    time_native: AtomicU64,
    time_pvlock: AtomicU64,
    /// When the current state began, or the statistics were zeroed.
    since: AtomicU64,
    /// Duration of the last switch and of the longest one, in ns.
    switch_last: AtomicU64,
    switch_max: AtomicU64,
    /// The advice last read (`u64::MAX`: none) and the largest steal share
    /// of that period, in thousandths.
    advice: AtomicU64,
    steal: AtomicU32,
}

pub(crate) static STATS: Stats = Stats {
    native: AtomicU32::new(0),
    reason: AtomicU32::new(Reason::Load as u32),
    to_native: AtomicU64::new(0),
    to_pvlock: AtomicU64::new(0),
    time_native: AtomicU64::new(0),
    time_pvlock: AtomicU64::new(0),
    since: AtomicU64::new(0),
    switch_last: AtomicU64::new(0),
    switch_max: AtomicU64::new(0),
    advice: AtomicU64::new(u64::MAX),
    steal: AtomicU32::new(0),
};

/// One of the counters of `abi::GUEST_ADAPTIVE_COUNTERS`, by its index.
pub(crate) fn counter(i: usize) -> u64 {
    let s = &STATS;
    let native = s.native.load(Relaxed) != 0;
    let current = guest::local_clock().saturating_sub(s.since.load(Relaxed));
    match i {
        0 => s.to_native.load(Relaxed),
        1 => s.to_pvlock.load(Relaxed),
        2 => s.time_native.load(Relaxed) + if native { current } else { 0 },
        3 => s.time_pvlock.load(Relaxed) + if native { 0 } else { current },
        4 => s.switch_last.load(Relaxed),
        5 => s.switch_max.load(Relaxed),
        _ => 0,
    }
}

/// Zeroes the switch statistics (`zero_stats`); the state stays.
pub(crate) fn zero_stats() {
    let s = &STATS;
    for c in [
        &s.to_native,
        &s.to_pvlock,
        &s.time_native,
        &s.time_pvlock,
        &s.switch_last,
        &s.switch_max,
    ] {
        c.store(0, Relaxed);
    }
    s.since.store(guest::local_clock(), Relaxed);
}

/// What `info` shows of the adaptive state.
pub(crate) struct State {
    pub(crate) native: bool,
    pub(crate) reason: Reason,
    pub(crate) advice: Option<Advice>,
    pub(crate) steal: u32,
}

pub(crate) fn state() -> State {
    let s = &STATS;
    let advice = s.advice.load(Relaxed);
    State {
        native: s.native.load(Relaxed) != 0,
        reason: Reason::from_u32(s.reason.load(Relaxed)),
        advice: if advice == u64::MAX {
            None
        } else {
            Advice::from_value(advice)
        },
        steal: s.steal.load(Relaxed),
    }
}

/// The mutable part of [`Control`], used by one run at a time.
struct Inner {
    installed: Option<Installed<Pvlock>>,
    /// Since when the advice and steal time have both said dedicated.
    calm_since: Option<u64>,
    /// Per CPU, its steal clock at the last run; and when that was.
    steal: KVec<u64>,
    last: u64,
    /// The steal share of the period before (thousandths).
    steal_before: u32,
    /// The last message about bounded waits.
    told: BoundedWaitsTold,
}

/// At most one message about bounded waits, and one about lost wake-ups,
/// per minute.
const BOUND_MESSAGE_NS: u64 = 60 * 1_000_000_000;

/// What the last messages about bounded waits and lost wake-ups counted,
/// and when they were printed (`None`: never).
#[derive(Default)]
struct BoundedWaitsTold {
    bound: u64,
    missed: u64,
    at: Option<u64>,
    lost: u64,
    lost_at: Option<u64>,
}

/// Whether a message printed at `at` is less than a minute old at `now`.
fn recent(at: Option<u64>, now: u64) -> bool {
    at.is_some_and(|t| now.saturating_sub(t) < BOUND_MESSAGE_NS)
}

impl BoundedWaitsTold {
    /// Prints, at most once a minute, how many lock waits the host's bound
    /// ended since the last message, and how many of them had been owed a
    /// kick (`wakeups_missed`); and, at most once a minute, how many waits
    /// ended without the kick that the host had said found them
    /// (`wakeups_lost`, whatever ended them, an interrupt included): a user
    /// sees a lost kick without reading counters. From the periodic work,
    /// not the slowpath: no printk under a lock wait.
    fn tell(&mut self, lock: &algo::PvLock, now: u64) {
        let bound = lock.counter(algo::Counter::WaitsBound);
        let missed = lock.counter(algo::Counter::WakeupsMissed);
        if bound > self.bound && !recent(self.at, now) {
            pr_warn!(
                "{} lock waits reached the host's bound, {} of them owed a kick (waits_bound {}, wakeups_missed {})\n",
                bound - self.bound,
                missed.saturating_sub(self.missed),
                bound,
                missed
            );
            self.bound = bound;
            self.missed = missed;
            self.at = Some(now);
        }
        let lost = lock.counter(algo::Counter::WakeupsLost);
        if lost > self.lost && !recent(self.lost_at, now) {
            pr_warn!(
                "{} lock waits ended without the kick the host had delivered to them (wakeups_lost {})\n",
                lost - self.lost,
                lost
            );
            self.lost = lost;
            self.lost_at = Some(now);
        }
    }
}

/// The lock and the state of the periodic decision.
#[pin_data]
pub(crate) struct Control {
    #[pin]
    inner: Mutex<Inner>,
}

impl Control {
    pub(crate) fn new(installed: Installed<Pvlock>) -> Result<impl PinInit<Self, Error>> {
        let n = kernel::cpu::nr_cpu_ids() as usize;
        let mut steal = KVec::with_capacity(n, GFP_KERNEL)?;
        for cpu in 0..n {
            steal.push(guest::steal_clock(cpu as u32), GFP_KERNEL)?;
        }
        let now = guest::local_clock();
        STATS.since.store(now, Relaxed);
        Ok(try_pin_init!(Self {
            inner <- new_mutex!(Inner {
                installed: Some(installed),
                calm_since: None,
                steal,
                last: now,
                steal_before: 0,
                told: BoundedWaitsTold::default(),
            }),
        }? Error))
    }

    /// The installed lock, for unloading; the periodic work must be
    /// stopped first.
    pub(crate) fn take(&self) -> Option<Installed<Pvlock>> {
        self.inner.lock().installed.take()
    }
}

/// The largest share of the time since `inner.last`, in thousandths, that
/// the host kept an online vCPU from running; updates the clocks.
fn steal_share(inner: &mut Inner, now: u64) -> u32 {
    let dt = now.saturating_sub(inner.last).max(1);
    inner.last = now;
    let mut worst = 0;
    for (cpu, last) in inner.steal.iter_mut().enumerate() {
        let s = guest::steal_clock(cpu as u32);
        let d = s.saturating_sub(*last);
        *last = s;
        if guest::cpu_online(cpu as u32) {
            worst = worst.max((d.saturating_mul(1000) / dt).min(1000) as u32);
        }
    }
    worst
}

/// The host's advice, if it gives one.
fn read_advice() -> Option<Advice> {
    guest::pvlock_get_param(abi::KVM_PVLOCK_PARAM_ADVICE)
        .ok()
        .and_then(Advice::from_value)
}

/// Whether to run the native lock, and why.
fn decide(advice: Option<Advice>, steal: u32) -> (bool, Reason) {
    if !params::ADAPTIVE.get() {
        return (false, Reason::Off);
    }
    match advice {
        None => (false, Reason::NoAdvice),
        Some(a) if !a.dedicated => (false, Reason::Shared),
        Some(_) if steal > params::ADAPTIVE_MAX_STEAL.get() => (false, Reason::Steal),
        Some(_) => (true, Reason::Dedicated),
    }
}

impl Control {
    /// Switches to the native lock (`native`) or to pvlock; counts it.
    fn switch(installed: &mut Installed<Pvlock>, native: bool, reason: Reason) -> Result {
        let t0 = guest::local_clock();
        let moved = if native {
            installed.park()?
        } else {
            installed.unpark()?
        };
        let now = guest::local_clock();
        let took = now.saturating_sub(t0);
        let s = &STATS;
        let spent = now.saturating_sub(s.since.swap(now, Relaxed));
        if native {
            s.time_pvlock.fetch_add(spent, Relaxed);
            s.to_native.fetch_add(1, Relaxed);
        } else {
            s.time_native.fetch_add(spent, Relaxed);
            s.to_pvlock.fetch_add(1, Relaxed);
        }
        s.native.store(u32::from(native), Relaxed);
        s.switch_last.store(took, Relaxed);
        s.switch_max.fetch_max(took, Relaxed);
        pr_info!(
            "switched the lock ops to {} in {} us ({}); {} waiters moved from the bridge\n",
            if native { "native" } else { "pvlock" },
            took / 1000,
            reason.text(),
            moved
        );
        Ok(())
    }
}

impl PeriodicWork for Control {
    fn run(&self) -> Option<u32> {
        let period = params::ADAPTIVE_PERIOD_MS.get();
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        let now = guest::local_clock();
        // Like the host's wait share: two periods in a row count, one
        // burst of the host's own work does not.
        let share = steal_share(inner, now);
        let steal = share.min(inner.steal_before);
        inner.steal_before = share;
        let advice = if params::ADAPTIVE.get() {
            read_advice()
        } else {
            None
        };
        STATS
            .advice
            .store(advice.map_or(u64::MAX, Advice::value), Relaxed);
        STATS.steal.store(share, Relaxed);
        if let Some(a) = advice {
            params::HOST_SPIN_THRESHOLD
                .store(a.spin_threshold.min(abi::MAX_SPIN_THRESHOLD), Relaxed);
        }
        let (native, mut reason) = decide(advice, steal);
        let installed = inner.installed.as_mut()?;
        inner.told.tell(&installed.lock().lock, now);
        if native {
            let since = *inner.calm_since.get_or_insert(now);
            let hold = u64::from(params::ADAPTIVE_HOLD_MS.get()) * 1_000_000;
            if !installed.is_parked() {
                if now.saturating_sub(since) < hold {
                    reason = Reason::Holding;
                } else if Self::switch(installed, true, reason).is_err() {
                    reason = Reason::Busy;
                }
            }
        } else {
            inner.calm_since = None;
            if installed.is_parked() && Self::switch(installed, false, reason).is_err() {
                reason = Reason::Busy;
            }
        }
        STATS.reason.store(reason as u32, Relaxed);
        Some(period)
    }
}

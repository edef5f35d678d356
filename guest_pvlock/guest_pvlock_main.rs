// SPDX-License-Identifier: GPL-2.0

//! guest_pvlock: a paravirtual queued spinlock for KVM guests, installed at
//! run time.
//!
//! Loading the module switches the kernel's `queued_spin_lock_slowpath` and
//! `queued_spin_unlock` to the lock in `algo.rs` (spin, then wait in the
//! hypervisor; the unlocker kicks a waiting waiter with a hypercall);
//! unloading restores the kernel's own lock, native or upstream PV. Statistics
//! are in debugfs `pvlock/`, tunables in `/sys/module/guest_pvlock/parameters/`.
//! See `Documentation/pvlock/guest.rst`.

use kernel::{
    debugfs::{Scope, Writer},
    fmt,
    prelude::*,
    pvlock::{
        guest,
        lockops::{self, Installed, Kind, LockOps, QSpinLock, QueuedLock, Slot, UnlockFn},
        periodic::Periodic,
        stats::{check_zero_stats_write, write_u32_array},
    },
    uaccess::UserSliceReader,
};

pub(crate) use kernel::pvlock::{abi, qspinlock};

mod adaptive;
mod algo;
mod faults;
mod params;
mod platform;
mod sync;

use platform::Guest;

module! {
    type: GuestPvlock,
    name: "guest_pvlock",
    authors: ["pvlock developers"],
    description: "Paravirtual spinlocks for KVM guests, installable at run time",
    license: "GPL",
}

/// The lock, as installed.
pub(crate) struct Pvlock {
    lock: algo::PvLock,
}

/// Where the installed lock is published to the lock ops.
static SLOT: Slot<Pvlock> = Slot::new();

// SAFETY: `algo::PvLock` is a queued spinlock on the kernel's lock word:
// `lock_slowpath` returns owning the lock, taking it only by atomic
// transitions the inline fast paths respect (0 -> locked with no tail, or the
// locked byte 0 -> 1 when neither locked nor pending); `unlock_slowpath`
// releases it. Neither sleeps; waiting is skipped in NMI context. `SLOT` is
// used by this type only, and `guest_pvlock_unlock` (unlock_thunk.c) is the
// callee-saved thunk that releases a locked byte of 1 inline and calls
// `guest_pvlock_unlock_slowpath`, defined below for this type, otherwise.
unsafe impl QueuedLock for Pvlock {
    fn slowpath(&self, lock: &QSpinLock, _val: u32) {
        self.lock.lock_slowpath(&Guest, lock)
    }

    fn unlock_slowpath(&self, lock: &QSpinLock, locked: u8) {
        self.lock.unlock_slowpath(&Guest, lock, locked)
    }

    fn slot() -> &'static Slot<Self> {
        &SLOT
    }

    fn unlock_thunk() -> UnlockFn {
        guest_pvlock_unlock
    }
}

kernel::pvlock_unlock_slowpath!(guest_pvlock_unlock_slowpath, Pvlock);

extern "C" {
    /// The callee-saved unlock in `unlock_thunk.c`.
    fn guest_pvlock_unlock(lock: *mut kernel::bindings::qspinlock);
}

/// The installed lock's state, if it is installed.
fn installed() -> Option<&'static algo::PvLock> {
    SLOT.get().map(|p| &p.lock)
}

/// What the lock ops are now, by name.
fn current_ops_name() -> &'static str {
    if LockOps::current().same_as(&LockOps::of::<Pvlock>()) {
        "pvlock"
    } else {
        Kind::current().name()
    }
}

/// What happened at load time.
struct Info {
    reason: &'static str,
    previous: Kind,
    /// The mode chosen at load time, if installed.
    mode: Option<algo::Mode>,
    /// The host publishes advice (ABI 3): the lock follows it.
    advice: bool,
}

impl Writer for Info {
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "lock_ops: {}", current_ops_name())?;
        writeln!(f, "installed: {}", u8::from(self.mode.is_some()))?;
        writeln!(f, "reason: {}", self.reason)?;
        writeln!(f, "previous: {}", self.previous.name())?;
        match (self.mode, installed()) {
            (Some(m), Some(l)) => {
                writeln!(f, "mode: {}", l.mode().name())?;
                writeln!(f, "mode_at_load: {}", m.name())?;
            }
            _ => {
                writeln!(f, "mode: none")?;
                writeln!(f, "mode_at_load: none")?;
            }
        }
        let a = adaptive::state();
        writeln!(
            f,
            "adaptive: {}",
            u8::from(params::ADAPTIVE.get() && self.mode.is_some() && self.advice)
        )?;
        writeln!(
            f,
            "adaptive_state: {}",
            match self.mode {
                None => "none",
                Some(_) if a.native => "native",
                Some(_) => "pvlock",
            }
        )?;
        writeln!(f, "adaptive_reason: {}", a.reason.text())?;
        match a.advice {
            Some(adv) => writeln!(
                f,
                "advice: dedicated={} spin_threshold={}",
                u8::from(adv.dedicated),
                adv.spin_threshold
            )?,
            None => writeln!(f, "advice: none")?,
        }
        writeln!(f, "steal_permille: {}", a.steal)?;
        writeln!(
            f,
            "wait_says_kicked: {}",
            u8::from(platform::WAIT_SAYS_KICKED.load(core::sync::atomic::Ordering::Relaxed))
        )?;
        writeln!(f, "spin_threshold: {}", params::effective_spin_threshold())?;
        writeln!(
            f,
            "host_spin_threshold: {}",
            params::HOST_SPIN_THRESHOLD.load(core::sync::atomic::Ordering::Relaxed)
        )?;
        writeln!(f, "stats: {}", u8::from(params::STATS.get()))?;
        writeln!(f, "early_halt: {}", params::EARLY_HALT.get())?;
        writeln!(
            f,
            "yield_to_holder: {}",
            u8::from(
                params::YIELD.get()
                    && platform::HAVE_SCHED_YIELD.load(core::sync::atomic::Ordering::Relaxed)
            )
        )?;
        writeln!(f, "pending: {}", u8::from(params::PENDING.get()))?;
        faults::info(f)
    }
}

struct CounterFile(algo::Counter);

impl Writer for CounterFile {
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", installed().map_or(0, |l| l.counter(self.0)))
    }
}

/// A counter of `abi::GUEST_ADAPTIVE_COUNTERS`, by index.
struct AdaptiveFile(usize);

impl Writer for AdaptiveFile {
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", adaptive::counter(self.0))
    }
}

struct HistogramFile(algo::Histogram);

impl Writer for HistogramFile {
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_u32_array(
            f,
            (0..abi::HIST_BUCKETS)
                .map(|k| installed().map_or(0, |l| l.histogram_bucket(self.0, k))),
        )
    }
}

/// The data behind debugfs `pvlock/`.
struct Files {
    info: Info,
    counters: [CounterFile; algo::NR_COUNTERS],
    adaptive: [AdaptiveFile; abi::GUEST_ADAPTIVE_COUNTERS.len()],
    histograms: [HistogramFile; algo::NR_HISTOGRAMS],
}

/// `zero_stats`: writing `1` zeroes every counter and histogram; anything
/// else is refused with `EINVAL` and changes nothing.
fn zero_stats(_: &Files, reader: &mut UserSliceReader) -> Result {
    check_zero_stats_write(reader)?;
    if let Some(l) = installed() {
        l.zero_stats();
    }
    adaptive::zero_stats();
    Ok(())
}

/// What to do at load time.
enum Decision {
    /// Install the lock, waiting and kicking in this mode.
    Install(algo::Mode),
    /// Keep the lock ops in place, for this reason.
    Keep(&'static str),
}

/// Decides whether to install, and how the lock waits and kicks, or why
/// not; an error refuses the load. Sets `advice` if the host publishes
/// advice (`KVM_PVLOCK_PARAM_ADVICE`, ABI 3).
fn decide(advice: &mut bool) -> Result<Decision> {
    if !params::ENABLE.get() {
        return Ok(Decision::Keep("guest_pvlock.enable=0"));
    }
    if lockops::nopvspin() {
        return Ok(Decision::Keep("nopvspin on the kernel command line"));
    }
    if !guest::kvm_para_available() {
        pr_err!("not installing: not running on KVM\n");
        return Err(ENODEV);
    }
    if guest::kvm_hints() & (1 << abi::KVM_HINTS_REALTIME) != 0 {
        return Ok(Decision::Keep(
            "KVM_HINTS_REALTIME: vCPUs have dedicated pCPUs",
        ));
    }
    if kernel::cpu::nr_cpu_ids() < 2 {
        return Ok(Decision::Keep("single CPU"));
    }
    let unhalt = guest::kvm_has_feature(abi::KVM_FEATURE_PV_UNHALT);
    let mut pvlock = guest::kvm_has_feature(abi::KVM_FEATURE_PVLOCK_KICK);
    if pvlock {
        match guest::pvlock_get_param(abi::KVM_PVLOCK_PARAM_VERSION) {
            Ok(v) if v >= abi::KVM_PVLOCK_ABI_WAIT => {
                *advice = v >= abi::KVM_PVLOCK_ABI_ADVICE;
                platform::WAIT_SAYS_KICKED.store(
                    v >= abi::KVM_PVLOCK_ABI_WAIT_KICKED,
                    core::sync::atomic::Ordering::Relaxed,
                );
                if let Ok(t) = guest::pvlock_get_param(abi::KVM_PVLOCK_PARAM_SPIN_THRESHOLD) {
                    let t = t.min(u64::from(abi::MAX_SPIN_THRESHOLD)) as u32;
                    params::HOST_SPIN_THRESHOLD.store(t, core::sync::atomic::Ordering::Relaxed);
                }
            }
            v => {
                pr_warn!(
                    "the host's pvlock hypercalls do not answer ABI version {} ({:?}); not using them\n",
                    abi::KVM_PVLOCK_ABI_WAIT,
                    v
                );
                pvlock = false;
            }
        }
    }
    match (params::KICK.get(), pvlock, unhalt) {
        (0 | 2, true, _) => Ok(Decision::Install(algo::Mode::Wait)),
        (0 | 1, _, true) => Ok(Decision::Install(algo::Mode::Hlt)),
        _ => {
            pr_err!(
                "not installing: the host offers no working kick (KVM_FEATURE_PV_UNHALT={}, KVM_FEATURE_PVLOCK_KICK={}, kick={})\n",
                u8::from(unhalt),
                u8::from(pvlock),
                params::KICK.get()
            );
            Err(ENODEV)
        }
    }
}

struct GuestPvlock {
    /// Removed before the lock is uninstalled: its files read the lock.
    debugfs: Option<Pin<KBox<Scope<Files>>>>,
    /// The installed lock, and the periodic work that parks and unparks it
    /// as the host's load changes (started only if the host advises).
    control: Option<Pin<KBox<Periodic<adaptive::Control>>>>,
}

/// Installs the lock in `mode`, its wait tokens starting at least at
/// `token_base`.
fn install(
    module: &'static ThisModule,
    mode: algo::Mode,
    token_base: u64,
) -> Result<Installed<Pvlock>> {
    // Above every token of an earlier load in this kernel (the clock), and
    // of an earlier kernel of this VM, whose held kicks a kexec keeps
    // (the host's token base).
    let lock = algo::PvLock::new(
        kernel::cpu::nr_cpu_ids() as usize,
        mode,
        guest::local_clock().max(token_base),
    )
    .ok_or(ENOMEM)?;
    let lock = KBox::new(Pvlock { lock }, GFP_KERNEL)?;
    // The harness knows a lock-op switch is under way from here until the
    // "installed" line.
    pr_info!("switching the lock ops to pvlock\n");
    let t0 = guest::local_clock();
    let installed = Installed::install(module, lock).inspect_err(|e| {
        pr_err!(
            "not installing: the lock ops cannot be switched ({:?})\n",
            e
        );
    })?;
    pr_info!(
        "installed in {} ms (was {}): mode {}, spin threshold {}; {} waiters moved from the bridge\n",
        guest::local_clock().wrapping_sub(t0) / 1_000_000,
        installed.previous().name(),
        mode.name(),
        params::effective_spin_threshold(),
        installed.bridge_moved()
    );
    Ok(installed)
}

impl kernel::Module for GuestPvlock {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let features = guest::kvm_features();
        let before = Kind::current();
        pr_info!(
            "KVM features {:#x}: pv_unhalt={} pvlock_kick={} steal_time={}; lock ops: {}\n",
            features,
            u8::from(guest::kvm_has_feature(abi::KVM_FEATURE_PV_UNHALT)),
            u8::from(guest::kvm_has_feature(abi::KVM_FEATURE_PVLOCK_KICK)),
            u8::from(guest::kvm_has_feature(abi::KVM_FEATURE_STEAL_TIME)),
            before.name()
        );
        if before == Kind::Other {
            pr_err!("not installing: the lock ops are neither native nor upstream PV\n");
            return Err(EBUSY);
        }
        platform::HAVE_KICK_CPU.store(
            guest::kvm_has_feature(abi::KVM_FEATURE_PV_UNHALT),
            core::sync::atomic::Ordering::Relaxed,
        );
        platform::HAVE_SCHED_YIELD.store(
            guest::kvm_has_feature(abi::KVM_FEATURE_PV_SCHED_YIELD),
            core::sync::atomic::Ordering::Relaxed,
        );
        platform::TSC_MULT.store(
            guest::tsc_ns_mult().unwrap_or(0),
            core::sync::atomic::Ordering::Relaxed,
        );

        let mut advice = false;
        let decision = decide(&mut advice)?;
        // ABI 3 (the advice) has the token base too.
        let token_base = if advice {
            guest::pvlock_get_param(abi::KVM_PVLOCK_PARAM_TOKEN_BASE).unwrap_or(0)
        } else {
            0
        };
        let (installed, reason, mode) = match decision {
            Decision::Install(mode) => (
                Some(install(module, mode, token_base)?),
                "installed",
                Some(mode),
            ),
            Decision::Keep(reason) => {
                pr_info!(
                    "not installed: {}; lock ops stay {}\n",
                    reason,
                    before.name()
                );
                (None, reason, None)
            }
        };

        // On an error the lock is dropped, which uninstalls it.
        let control = match installed {
            Some(i) => Some(KBox::pin_init(
                Periodic::new(adaptive::Control::new(i)?),
                GFP_KERNEL,
            )?),
            None => None,
        };
        let files = Files {
            info: Info {
                reason,
                previous: before,
                mode,
                advice,
            },
            counters: algo::COUNTERS.map(CounterFile),
            adaptive: core::array::from_fn(AdaptiveFile),
            histograms: algo::HISTOGRAMS.map(HistogramFile),
        };
        // On an error `installed` is dropped, which uninstalls the lock.
        let debugfs = KBox::pin_init(
            Scope::dir(files, abi::GUEST_DEBUGFS_DIR, |files, dir| {
                dir.read_only_file(c"info", &files.info);
                for file in &files.counters {
                    dir.read_only_file(file.0.name(), file);
                }
                for file in &files.adaptive {
                    dir.read_only_file(abi::GUEST_ADAPTIVE_COUNTERS[file.0], file);
                }
                for file in &files.histograms {
                    dir.read_only_file(file.0.name(), file);
                }
                dir.write_only_callback_file(abi::ZERO_STATS, files, &zero_stats);
            }),
            GFP_KERNEL,
        )?;
        if let Some(c) = &control {
            if advice {
                c.as_ref().start(params::ADAPTIVE_PERIOD_MS.get());
            }
        }
        Ok(GuestPvlock {
            debugfs: Some(debugfs),
            control,
        })
    }
}

impl Drop for GuestPvlock {
    fn drop(&mut self) {
        // No reader of the lock's statistics is left after this.
        drop(self.debugfs.take());
        let Some(control) = self.control.take() else {
            return;
        };
        // No switch runs any more; then the lock is ours to uninstall.
        control.stop();
        if let Some(installed) = control.data().take() {
            let l = &installed.lock().lock;
            let (taken, kicks, mode) = (
                l.counter(algo::Counter::TakenSlow),
                l.counter(algo::Counter::Kicks),
                l.mode(),
            );
            pr_info!("switching the lock ops back\n");
            let t0 = guest::local_clock();
            let moved = installed.uninstall();
            pr_info!(
                "uninstalled in {} ms, lock ops: {} (mode {}, slow acquisitions {}, kicks {}); {} waiters moved from the bridge\n",
                guest::local_clock().wrapping_sub(t0) / 1_000_000,
                Kind::current().name(),
                mode.name(),
                taken,
                kicks,
                moved
            );
        }
    }
}

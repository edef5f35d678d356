// SPDX-License-Identifier: GPL-2.0

//! guest_pvlock: a paravirtual queued spinlock for KVM guests, installed at
//! run time.
//!
//! Loading the module switches the kernel's `queued_spin_lock_slowpath` and
//! `queued_spin_unlock` to the lock in `algo.rs` (spin, then halt; the
//! unlocker kicks a halted waiter with a hypercall); unloading restores the
//! lock ops that were in place before, native or upstream PV. Statistics are
//! in debugfs `pvlock/`, tunables in `/sys/module/guest_pvlock/parameters/`.
//! See `Documentation/pvlock/guest.rst`.

use kernel::{
    debugfs::{Scope, Writer},
    fmt,
    prelude::*,
    pvlock::{
        abi, guest,
        lockops::{self, Kind, LockOps, QSpinLock, QueuedLock},
        stats::{check_zero_stats_write, write_u32_array},
    },
    uaccess::UserSliceReader,
};

mod algo;
mod params;
mod platform;
mod sync;

use platform::{Guest, KickMethod};

module! {
    type: GuestPvlock,
    name: "guest_pvlock",
    authors: ["pvlock developers"],
    description: "Paravirtual spinlocks for KVM guests, installable at run time",
    license: "GPL",
}

const NCPU: usize = kernel::bindings::NR_CPUS as usize;
const NHASH: usize = (NCPU * algo::MAX_NODES).next_power_of_two();

/// The lock's queue nodes, hash table and statistics.
static LOCK: algo::PvLock<NCPU, NHASH> = algo::PvLock::new();

struct Pvlock;

// SAFETY: `algo::PvLock` is a queued spinlock on the kernel's lock word:
// `lock_slowpath` returns owning the lock, taking it only by atomic
// transitions the inline fast paths respect (0 -> locked with no tail, or the
// locked byte 0 -> 1 when neither locked nor pending); `unlock_slowpath`
// releases it. Neither sleeps; halting is skipped in NMI context.
unsafe impl QueuedLock for Pvlock {
    fn slowpath(lock: &QSpinLock, _val: u32) {
        LOCK.lock_slowpath(&Guest, lock)
    }

    fn unlock_slowpath(lock: &QSpinLock, locked: u8) {
        LOCK.unlock_slowpath(&Guest, lock, locked)
    }
}

kernel::pvlock_unlock_slowpath!(guest_pvlock_unlock_slowpath, Pvlock);

extern "C" {
    /// The callee-saved unlock in `unlock_thunk.c`.
    fn guest_pvlock_unlock(lock: *mut kernel::bindings::qspinlock);
}

fn our_ops() -> LockOps {
    LockOps {
        slowpath: lockops::slowpath_fn::<Pvlock>(),
        unlock: guest_pvlock_unlock,
    }
}

/// What the lock ops are now, by name.
fn current_ops_name() -> &'static str {
    if LockOps::current().same_as(&our_ops()) {
        "pvlock"
    } else {
        Kind::current().name()
    }
}

/// What happened at load time.
struct Info {
    installed: bool,
    reason: &'static str,
    previous: Kind,
}

impl Writer for Info {
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "lock_ops: {}", current_ops_name())?;
        writeln!(f, "installed: {}", u8::from(self.installed))?;
        writeln!(f, "reason: {}", self.reason)?;
        writeln!(f, "previous: {}", self.previous.name())?;
        if self.installed {
            writeln!(f, "kick: {}", platform::kick_method().name())?;
        } else {
            writeln!(f, "kick: none")?;
        }
        writeln!(f, "spin_threshold: {}", params::effective_spin_threshold())?;
        writeln!(
            f,
            "host_spin_threshold: {}",
            params::HOST_SPIN_THRESHOLD.load(kernel::sync::atomic::Relaxed)
        )?;
        writeln!(f, "stats: {}", u8::from(params::STATS.get()))?;
        writeln!(f, "early_halt: {}", params::EARLY_HALT.get())?;
        writeln!(
            f,
            "yield_to_holder: {}",
            u8::from(
                params::YIELD.get()
                    && platform::HAVE_SCHED_YIELD.load(kernel::sync::atomic::Relaxed)
            )
        )?;
        writeln!(
            f,
            "kick_failures: {}",
            platform::KICK_FAILURES.load(kernel::sync::atomic::Relaxed)
        )
    }
}

struct CounterFile(algo::Counter);

impl Writer for CounterFile {
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", LOCK.counter(self.0))
    }
}

struct HistogramFile(algo::Histogram);

impl Writer for HistogramFile {
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_u32_array(
            f,
            (0..algo::HIST_BUCKETS).map(|k| LOCK.histogram_bucket(self.0, k)),
        )
    }
}

/// The data behind debugfs `pvlock/`.
struct Files {
    info: Info,
    counters: [CounterFile; algo::NR_COUNTERS],
    histograms: [HistogramFile; algo::NR_HISTOGRAMS],
}

/// `zero_stats`: writing `1` zeroes every counter and histogram; anything
/// else is refused with `EINVAL` and changes nothing.
fn zero_stats(_: &Files, reader: &mut UserSliceReader) -> Result {
    check_zero_stats_write(reader)?;
    LOCK.zero_stats();
    Ok(())
}

/// Decides whether to install, and how to kick.
fn decide() -> Result<core::result::Result<KickMethod, &'static str>> {
    if !params::ENABLE.get() {
        return Ok(Err("guest_pvlock.enable=0"));
    }
    if lockops::nopvspin() {
        return Ok(Err("nopvspin on the kernel command line"));
    }
    if !guest::kvm_para_available() {
        pr_err!("not installing: not running on KVM\n");
        return Err(ENODEV);
    }
    if guest::kvm_hints() & (1 << abi::KVM_HINTS_REALTIME) != 0 {
        return Ok(Err("KVM_HINTS_REALTIME: vCPUs have dedicated pCPUs"));
    }
    if kernel::cpu::nr_cpu_ids() < 2 {
        return Ok(Err("single CPU"));
    }
    let unhalt = guest::kvm_has_feature(abi::KVM_FEATURE_PV_UNHALT);
    let pvlock = guest::kvm_has_feature(abi::KVM_FEATURE_PVLOCK_KICK);
    let method = match (params::KICK.get(), pvlock, unhalt) {
        (0 | 2, true, _) => KickMethod::Pvlock,
        (0 | 1, _, true) => KickMethod::KickCpu,
        _ => {
            pr_err!(
                "not installing: the host offers no kick (KVM_FEATURE_PV_UNHALT={}, KVM_FEATURE_PVLOCK_KICK={}, kick={})\n",
                u8::from(unhalt),
                u8::from(pvlock),
                params::KICK.get()
            );
            return Err(ENODEV);
        }
    };
    if method == KickMethod::Pvlock {
        match guest::pvlock_get_param(abi::KVM_PVLOCK_PARAM_VERSION) {
            Ok(v) if v >= abi::KVM_PVLOCK_ABI_VERSION => {}
            _ => {
                pr_err!("not installing: the host's pvlock hypercalls do not answer\n");
                return Err(ENODEV);
            }
        }
        if let Ok(t) = guest::pvlock_get_param(abi::KVM_PVLOCK_PARAM_SPIN_THRESHOLD) {
            let t = t.min(u64::from(params::MAX_SPIN_THRESHOLD)) as u32;
            params::HOST_SPIN_THRESHOLD.store(t, kernel::sync::atomic::Relaxed);
        }
    }
    Ok(Ok(method))
}

struct GuestPvlock {
    /// The lock ops to restore, when installed.
    previous: Option<LockOps>,
    _debugfs: Pin<KBox<Scope<Files>>>,
}

impl kernel::Module for GuestPvlock {
    fn init(_module: &'static ThisModule) -> Result<Self> {
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

        let (previous, reason) = match decide()? {
            Ok(method) => {
                platform::HAVE_KICK_CPU.store(
                    guest::kvm_has_feature(abi::KVM_FEATURE_PV_UNHALT),
                    kernel::sync::atomic::Relaxed,
                );
                platform::KICK_METHOD.store(method as u32, kernel::sync::atomic::Relaxed);
                platform::HAVE_SCHED_YIELD.store(
                    guest::kvm_has_feature(abi::KVM_FEATURE_PV_SCHED_YIELD),
                    kernel::sync::atomic::Relaxed,
                );
                LOCK.zero_stats();
                let t0 = guest::local_clock();
                // SAFETY: `our_ops()` is `Pvlock`, a `QueuedLock`, with the
                // callee-saved thunk that calls its unlock slowpath for any
                // locked byte but 1. Its code stays until `drop()` switched
                // back. Module init and exit are serialised.
                let switched = unsafe { lockops::switch(our_ops()) };
                pr_info!(
                    "installed in {} ms (was {}): kick {}, spin threshold {}; {} waiters moved from the bridge\n",
                    guest::local_clock().wrapping_sub(t0) / 1_000_000,
                    before.name(),
                    method.name(),
                    params::effective_spin_threshold(),
                    switched.bridge_moved
                );
                (Some(switched.previous), "installed")
            }
            Err(reason) => {
                pr_info!(
                    "not installed: {}; lock ops stay {}\n",
                    reason,
                    before.name()
                );
                (None, reason)
            }
        };

        let files = Files {
            info: Info {
                installed: previous.is_some(),
                reason,
                previous: before,
            },
            counters: algo::COUNTERS.map(|(c, _)| CounterFile(c)),
            histograms: algo::HISTOGRAMS.map(|(h, _)| HistogramFile(h)),
        };
        let debugfs = KBox::pin_init(
            Scope::dir(files, c"pvlock", |files, dir| {
                dir.read_only_file(c"info", &files.info);
                for (file, (_, name)) in files.counters.iter().zip(algo::COUNTERS.iter()) {
                    dir.read_only_file(name, file);
                }
                for (file, (_, name)) in files.histograms.iter().zip(algo::HISTOGRAMS.iter()) {
                    dir.read_only_file(name, file);
                }
                dir.write_only_callback_file(c"zero_stats", files, &zero_stats);
            }),
            GFP_KERNEL,
        );
        let debugfs = match debugfs {
            Ok(d) => d,
            Err(e) => {
                if let Some(prev) = previous {
                    // SAFETY: `prev` were the lock ops in place before.
                    unsafe { lockops::switch(prev) };
                }
                return Err(e);
            }
        };
        Ok(GuestPvlock {
            previous,
            _debugfs: debugfs,
        })
    }
}

impl Drop for GuestPvlock {
    fn drop(&mut self) {
        if let Some(prev) = self.previous.take() {
            let t0 = guest::local_clock();
            // SAFETY: `prev` are the kernel's own lock ops that were in place
            // before `init()` (native or upstream PV, kernel text). After the
            // switch no CPU runs this module's lock code.
            let switched = unsafe { lockops::switch(prev) };
            pr_info!(
                "uninstalled in {} ms, lock ops: {} (slow acquisitions {}, kicks {}); {} waiters moved from the bridge\n",
                guest::local_clock().wrapping_sub(t0) / 1_000_000,
                Kind::current().name(),
                LOCK.counter(algo::Counter::TakenSlow),
                LOCK.counter(algo::Counter::Kicks),
                switched.bridge_moved
            );
        }
    }
}

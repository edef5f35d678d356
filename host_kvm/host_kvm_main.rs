// SPDX-License-Identifier: GPL-2.0

//! host_kvm: the host half of pvlock.
//!
//! Implements `KVM_HC_PVLOCK_WAIT`, `KVM_HC_PVLOCK_KICK` and
//! `KVM_HC_PVLOCK_GET_PARAM`, the `KVM_CAP_PVLOCK_KICK` capability and,
//! for VMMs that know nothing of pvlock, the `force` parameter, through the
//! hooks of the pvlock KVM patches. A lock wait halts the vCPU until the
//! kick with its token; a kick that comes first is held for that wait
//! (KVM keeps the tokens, `KVM_REQ_PVLOCK_KICK` wakes the vCPU). Statistics
//! are in debugfs `pvlock_host/`. See `Documentation/virt/kvm/pvlock.rst`.

use kernel::{
    cpu::CpuId,
    debugfs::{Scope, Writer},
    fmt,
    prelude::*,
    pvlock::{
        abi::{Advice, Kick},
        kvm::{CurrentVcpu, Load, PvlockHost, Registration, Vcpu, Vm, VmState, WaitEnd, WaitStart},
        param::{BoolParam, U32Param},
        periodic::{Periodic, PeriodicWork},
        stats::{check_zero_stats_write, write_u32_array, Log2Histogram, BUCKETS},
    },
    sync::atomic::{Atomic, Relaxed},
    uaccess::UserSliceReader,
};

mod advice;

pub(crate) use kernel::pvlock::abi;

module! {
    type: HostKvm,
    name: "host_kvm",
    authors: ["pvlock developers"],
    description: "pvlock host side: the KVM pvlock lock-wait and kick hypercalls and capability",
    license: "GPL",
}

static FORCE: BoolParam = BoolParam::new(false);
kernel::pvlock_module_param!(force: BoolParam = FORCE, 0o644,
    "Enable pvlock for VMs whose VMM never configured KVM_CAP_PVLOCK_KICK, and show them the CPUID bit (default N)");

static YIELD: BoolParam = BoolParam::new(true);
kernel::pvlock_module_param!(yield_to_target: BoolParam = YIELD, 0o644,
    "For VMs enabled by 'force': a kick held for a preempted target yields to it (default Y)");

static SPIN_THRESHOLD: U32Param = U32Param::new(0, 0, abi::MAX_SPIN_THRESHOLD);
kernel::pvlock_module_param!(spin_threshold: U32Param = SPIN_THRESHOLD, 0o644,
    "For VMs enabled by 'force': spin threshold recommended to guests, 0 for none");

static MAX_WAIT_MS: U32Param = U32Param::new(1000, 0, 60_000);
kernel::pvlock_module_param!(max_wait_ms: U32Param = MAX_WAIT_MS, 0o644,
    "Bound on a lock wait, in ms: a wait that lasts it ends as if kicked, and the guest is told (0: no bound; default 1000)");

static ADVICE_MODE: U32Param = U32Param::new(0, 0, 2);
kernel::pvlock_module_param!(advice_mode: U32Param = ADVICE_MODE, 0o644,
    "For VMs enabled by 'force': 0 advise guests from the host's load (default), 1 their vCPUs have CPUs to themselves, 2 they never do");

static ADVICE_PERIOD_MS: U32Param = U32Param::new(100, 10, 10_000);
kernel::pvlock_module_param!(advice_period_ms: U32Param = ADVICE_PERIOD_MS, 0o644,
    "Milliseconds between samples of the load behind the advice to guests (default 100)");

static ADVICE_HOLD_MS: U32Param = U32Param::new(1000, 0, 600_000);
kernel::pvlock_module_param!(advice_hold_ms: U32Param = ADVICE_HOLD_MS, 0o644,
    "Milliseconds a VM's vCPUs must not compete for their CPUs before the advice says they have them to themselves (default 1000; 0: at the first calm sample)");

static ADVICE_MAX_PREEMPTED: U32Param = U32Param::new(100, 0, 1000);
kernel::pvlock_module_param!(advice_max_preempted: U32Param = ADVICE_MAX_PREEMPTED, 0o644,
    "Thousandths of a sample a vCPU may spend preempted while it runs, in two samples in a row, and its VM still count as not competing (default 100)");

// A broken host, for the harness's build only (PVLOCK_TEST_HOOKS=y).
#[cfg(pvlock_test_hooks)]
static INJECT_IGNORE_KICKS: BoolParam = BoolParam::new(false);
#[cfg(pvlock_test_hooks)]
kernel::pvlock_module_param!(inject_ignore_kicks: BoolParam = INJECT_IGNORE_KICKS, 0o644,
    "Test only: answer kicks without delivering them, a broken host (default N)");

/// Host counters: the list is [`abi::HostCounter`], defined once with its
/// debugfs names (`Documentation/virt/kvm/pvlock.rst`).
use kernel::pvlock::abi::HostCounter as Counter;

const NR_COUNTERS: usize = abi::HOST_COUNTERS.len();

/// Counter shards. Every pvlock hypercall of every VM counts here, so a
/// counter is not one word that all host CPUs write: a hypercall adds to
/// the shard of the CPU it runs on (CPU number modulo [`SHARDS`]), each
/// shard on cache lines of its own, and a read sums the shards. A vCPU
/// thread that migrates between reading its CPU number and adding still
/// adds atomically, to another shard: no count is lost.
const SHARDS: usize = 64;

#[repr(align(64))]
struct Shard([Atomic<u64>; NR_COUNTERS]);

struct Stats {
    shards: [Shard; SHARDS],
    /// Nanoseconds from a kick to the kicked vCPU leaving its wait.
    latency: Log2Histogram,
}

static STATS: Stats = Stats {
    shards: [const { Shard([const { Atomic::new(0) }; NR_COUNTERS]) }; SHARDS],
    latency: Log2Histogram::new(),
};

#[inline]
fn count(c: Counter) {
    let shard = CpuId::current().as_u32() as usize % SHARDS;
    STATS.shards[shard].0[c as usize].add(1u64, Relaxed);
}

/// The sum of counter `c` over the shards (monotonic between zeroings).
fn get(c: Counter) -> u64 {
    STATS
        .shards
        .iter()
        .map(|s| s.0[c as usize].load(Relaxed))
        .fold(0, u64::wrapping_add)
}

/// Whether the VM may use the pvlock hypercalls: as its VMM configured
/// the capability, or by `force` if it never did.
fn enabled(state: &VmState) -> bool {
    if state.configured {
        state.flags & abi::KVM_PVLOCK_KICK_ENABLE != 0
    } else {
        FORCE.get()
    }
}

struct Host;

impl Host {
    fn kick(vcpu: &CurrentVcpu, state: &VmState, args: [u64; 4]) -> i64 {
        count(Counter::Kicks);
        let [flags, apic_id, token, _] = args;
        if flags != 0 || token == 0 {
            count(Counter::KicksBadArgs);
            return -abi::KVM_EINVAL;
        }
        let Some(target) = vcpu.vm().find_vcpu(apic_id) else {
            count(Counter::KicksBadTarget);
            return -abi::KVM_EINVAL;
        };
        if target.is(vcpu) {
            count(Counter::KicksSelf);
            return -abi::KVM_EINVAL;
        }
        #[cfg(pvlock_test_hooks)]
        if INJECT_IGNORE_KICKS.get() {
            count(Counter::KicksIgnored);
            return Kick::Woken.ret();
        }
        let r = target.kick(token);
        match r {
            Kick::Woken => count(Counter::KicksWoken),
            Kick::Held => {
                count(Counter::KicksHeld);
                // The target is on its way into the wait; if its thread
                // was preempted on the way, let it run there.
                let want_yield = if state.configured {
                    state.flags & abi::KVM_PVLOCK_KICK_YIELD != 0
                } else {
                    YIELD.get()
                };
                if want_yield && target.is_preempted() {
                    count(Counter::Yields);
                    if vcpu.yield_to(target) {
                        count(Counter::YieldsDone);
                    }
                }
            }
        }
        r.ret()
    }

    fn wait(vcpu: &CurrentVcpu, args: [u64; 4]) -> i64 {
        let [flags, token, _, _] = args;
        if flags != 0 || token == 0 {
            count(Counter::WaitsBadArgs);
            return -abi::KVM_EINVAL;
        }
        count(Counter::Waits);
        let bound_ns = u64::from(MAX_WAIT_MS.get()) * 1_000_000;
        let start = vcpu.wait(token, bound_ns);
        if start != WaitStart::Halts {
            count(Counter::WaitsAtOnce);
        }
        start.ret()
    }

    fn get_param(vm: &Vm, state: &VmState, param: u64) -> i64 {
        count(Counter::GetParam);
        match param {
            abi::KVM_PVLOCK_PARAM_VERSION => abi::KVM_PVLOCK_ABI_VERSION as i64,
            abi::KVM_PVLOCK_PARAM_SPIN_THRESHOLD => {
                // The advice's, once the VM has one; the base before.
                match Advice::from_value(state.advice) {
                    Some(a) if state.advice != 0 => a.spin_threshold.into(),
                    _ => base_spin_threshold(state).into(),
                }
            }
            abi::KVM_PVLOCK_PARAM_ADVICE => state.advice as i64,
            // Tokens are clock values in nanoseconds: far below 2^63.
            abi::KVM_PVLOCK_PARAM_TOKEN_BASE => vm.token_base().min(i64::MAX as u64) as i64,
            _ => {
                count(Counter::GetParamBad);
                -abi::KVM_EINVAL
            }
        }
    }
}

impl PvlockHost for Host {
    const SUPPORTED_FLAGS: u64 = abi::KVM_PVLOCK_KICK_VALID_FLAGS;

    fn hypercall(vcpu: &CurrentVcpu, nr: u32, args: [u64; 4]) -> i64 {
        let state = vcpu.vm().pvlock_state();
        if !enabled(&state) {
            count(Counter::Disabled);
            return -abi::KVM_ENOSYS;
        }
        match nr {
            abi::KVM_HC_PVLOCK_KICK => Host::kick(vcpu, &state, args),
            abi::KVM_HC_PVLOCK_WAIT => Host::wait(vcpu, args),
            abi::KVM_HC_PVLOCK_GET_PARAM => Host::get_param(vcpu.vm(), &state, args[0]),
            _ => -abi::KVM_ENOSYS,
        }
    }

    fn enable_cap(_vm: &Vm, args: [u64; 4]) -> Result<VmState> {
        count(Counter::EnableCap);
        let [flags, spin_threshold, advice_mode, a3] = args;
        if flags & !abi::KVM_PVLOCK_KICK_VALID_FLAGS != 0
            || (flags != 0 && flags & abi::KVM_PVLOCK_KICK_ENABLE == 0)
            || spin_threshold > u64::from(abi::MAX_SPIN_THRESHOLD)
            || advice_mode > abi::KVM_PVLOCK_ADVICE_SHARED
            || a3 != 0
        {
            count(Counter::EnableCapBad);
            return Err(EINVAL);
        }
        let on = flags != 0;
        Ok(VmState {
            flags,
            spin_threshold: if on { spin_threshold } else { 0 },
            advice_mode: if on { advice_mode } else { 0 },
            ..VmState::default()
        })
    }

    fn force_feature(_vm: &Vm) -> bool {
        FORCE.get()
    }

    fn wait_end(_vcpu: &Vcpu, how: WaitEnd) {
        match how {
            WaitEnd::Kick { latency_ns } => {
                count(Counter::WaitsKicked);
                if let Some(ns) = latency_ns {
                    STATS.latency.record(ns);
                }
            }
            WaitEnd::Bound => count(Counter::WaitsBound),
            WaitEnd::Other => count(Counter::WaitsOther),
        }
    }

    fn advise(vm: &Vm, load: &Load, in_force: u64, saved: &mut u64) -> u64 {
        let state = vm.pvlock_state();
        if !enabled(&state) {
            *saved = 0;
            return 0;
        }
        count(Counter::AdviceSamples);
        let mode = if state.configured {
            state.advice_mode
        } else {
            ADVICE_MODE.get().into()
        };
        let was = Advice::from_value(in_force).unwrap_or_default();
        let sample = advice::Sample {
            window_ns: load.window_ns,
            vcpus: load.vcpus,
            cpus: load.cpus,
            others: load.others,
            preempted: load.preempted,
        };
        let mut calm = advice::Calm::unpack(*saved);
        let new = advice::advise(
            &sample,
            mode,
            base_spin_threshold(&state),
            was.dedicated,
            &mut calm,
            &advice::Policy {
                hold_ns: u64::from(ADVICE_HOLD_MS.get()) * 1_000_000,
                max_preempted: ADVICE_MAX_PREEMPTED.get(),
            },
        );
        *saved = calm.pack();
        if new.dedicated != was.dedicated {
            count(if new.dedicated {
                Counter::AdviceDedicated
            } else {
                Counter::AdviceShared
            });
        }
        new.value()
    }
}

/// The spin threshold the VM's advice starts from: the VMM's, or the
/// parameter's for a VM enabled by `force`.
fn base_spin_threshold(state: &VmState) -> u32 {
    if state.configured {
        state.spin_threshold.min(abi::MAX_SPIN_THRESHOLD.into()) as u32
    } else {
        SPIN_THRESHOLD.get()
    }
}

/// Samples the load behind the advice every `advice_period_ms`.
struct Sampler {
    reg: Registration<Host>,
}

impl PeriodicWork for Sampler {
    fn run(&self) -> Option<u32> {
        self.reg.update_advice();
        Some(ADVICE_PERIOD_MS.get())
    }
}

struct CounterFile(Counter);

impl Writer for CounterFile {
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", get(self.0))
    }
}

struct LatencyFile;

impl Writer for LatencyFile {
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_u32_array(f, (0..BUCKETS).map(|k| STATS.latency.get(k)))
    }
}

struct Files {
    counters: [CounterFile; NR_COUNTERS],
    latency: LatencyFile,
}

/// `zero_stats`: writing `1` zeroes every statistic; anything else is
/// refused with `EINVAL`.
fn zero_stats(_: &Files, reader: &mut UserSliceReader) -> Result {
    check_zero_stats_write(reader)?;
    for c in STATS.shards.iter().flat_map(|s| s.0.iter()) {
        c.store(0, Relaxed);
    }
    STATS.latency.clear();
    Ok(())
}

struct HostKvm {
    /// The registration, and the work that keeps the advice current;
    /// dropped first: unregistering ends every lock wait.
    _sampler: Pin<KBox<Periodic<Sampler>>>,
    _debugfs: Pin<KBox<Scope<Files>>>,
}

impl kernel::Module for HostKvm {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let files = Files {
            counters: abi::HOST_COUNTER_LIST.map(CounterFile),
            latency: LatencyFile,
        };
        let debugfs = KBox::pin_init(
            Scope::dir(files, abi::HOST_DEBUGFS_DIR, |files, dir| {
                for file in &files.counters {
                    dir.read_only_file(file.0.name(), file);
                }
                dir.read_only_file(abi::HOST_HISTOGRAMS[0], &files.latency);
                dir.write_only_callback_file(abi::ZERO_STATS, files, &zero_stats);
            }),
            GFP_KERNEL,
        )?;
        let reg = Registration::<Host>::new().inspect_err(|e| {
            pr_err!(
                "cannot register with KVM ({:?}): another pvlock host module?\n",
                e
            );
        })?;
        pr_info!(
            "registered: hypercalls {:#x} (kick), {:#x} (get_param), {:#x} (wait), KVM_CAP_PVLOCK_KICK {:#x}, CPUID bit {}; force={} max_wait_ms={} advice_mode={}\n",
            abi::KVM_HC_PVLOCK_KICK,
            abi::KVM_HC_PVLOCK_GET_PARAM,
            abi::KVM_HC_PVLOCK_WAIT,
            abi::KVM_CAP_PVLOCK_KICK,
            abi::KVM_FEATURE_PVLOCK_KICK,
            u8::from(FORCE.get()),
            MAX_WAIT_MS.get(),
            ADVICE_MODE.get()
        );
        let sampler = KBox::pin_init(Periodic::new(Sampler { reg }), GFP_KERNEL)?;
        sampler.as_ref().start(ADVICE_PERIOD_MS.get());
        Ok(HostKvm {
            _sampler: sampler,
            _debugfs: debugfs,
        })
    }
}

impl Drop for HostKvm {
    fn drop(&mut self) {
        pr_info!(
            "unregistering (kicks {}, waits {}, waits kicked {}); every lock wait in progress ends\n",
            get(Counter::Kicks),
            get(Counter::Waits),
            get(Counter::WaitsKicked)
        );
    }
}

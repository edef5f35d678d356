// SPDX-License-Identifier: GPL-2.0

//! host_kvm: the host half of pvlock.
//!
//! Implements `KVM_HC_PVLOCK_KICK` and `KVM_HC_PVLOCK_GET_PARAM`, the
//! `KVM_CAP_PVLOCK_KICK` capability and the `KVM_FEATURE_PVLOCK_KICK` CPUID
//! bit through the hooks of the pvlock KVM patches. A kick wakes the target
//! only if it is halted (`KVM_REQ_PVLOCK_KICK`) and tells the guest what
//! happened; nothing is kept for a target that runs. Statistics are in
//! debugfs `pvlock_host/`. See `Documentation/virt/kvm/pvlock.rst`.

use kernel::{
    debugfs::{Scope, Writer},
    fmt,
    prelude::*,
    pvlock::{
        abi,
        kvm::{PvlockHost, Registration, Vcpu, Vm, VmState},
        param::{BoolParam, U32Param},
        stats::{check_zero_stats_write, write_u32_array, Log2Histogram, BUCKETS},
    },
    sync::atomic::{Atomic, Relaxed},
    uaccess::UserSliceReader,
};

module! {
    type: HostKvm,
    name: "host_kvm",
    authors: ["pvlock developers"],
    description: "pvlock host side: the KVM pvlock kick hypercall and capability",
    license: "GPL",
}

/// The largest spin threshold a VMM or the parameter may recommend.
const MAX_SPIN_THRESHOLD: u64 = 1 << 26;

static FORCE: BoolParam = BoolParam::new(false);
kernel::pvlock_module_param!(force: BoolParam = FORCE, 0o644,
    "Enable pvlock for VMs whose VMM did not enable KVM_CAP_PVLOCK_KICK, and show them the CPUID bit (default N)");

static YIELD: BoolParam = BoolParam::new(true);
kernel::pvlock_module_param!(yield_to_target: BoolParam = YIELD, 0o644,
    "For VMs enabled by 'force': yield to a kicked vCPU that is preempted before halting (default Y)");

static SPIN_THRESHOLD: U32Param = U32Param::new(0, 0, MAX_SPIN_THRESHOLD as u32);
kernel::pvlock_module_param!(spin_threshold: U32Param = SPIN_THRESHOLD, 0o644,
    "For VMs enabled by 'force': spin threshold recommended to guests, 0 for none");

/// Host counters; see `Documentation/virt/kvm/pvlock.rst`.
#[derive(Clone, Copy)]
#[repr(usize)]
enum Counter {
    Kicks,
    KicksWoken,
    KicksNotHalted,
    KicksBadTarget,
    KicksSelf,
    KicksBadFlags,
    Disabled,
    Yields,
    YieldsDone,
    GetParam,
    GetParamBad,
    EnableCap,
    EnableCapBad,
    KicksDone,
}

const NR_COUNTERS: usize = Counter::KicksDone as usize + 1;

const COUNTERS: [(Counter, &CStr); NR_COUNTERS] = [
    (Counter::Kicks, c"kicks"),
    (Counter::KicksWoken, c"kicks_woken"),
    (Counter::KicksNotHalted, c"kicks_not_halted"),
    (Counter::KicksBadTarget, c"kicks_bad_target"),
    (Counter::KicksSelf, c"kicks_self"),
    (Counter::KicksBadFlags, c"kicks_bad_flags"),
    (Counter::Disabled, c"hypercalls_disabled"),
    (Counter::Yields, c"yields"),
    (Counter::YieldsDone, c"yields_done"),
    (Counter::GetParam, c"get_param"),
    (Counter::GetParamBad, c"get_param_bad"),
    (Counter::EnableCap, c"enable_cap"),
    (Counter::EnableCapBad, c"enable_cap_bad"),
    (Counter::KicksDone, c"kicks_done"),
];

struct Stats {
    counters: [Atomic<u64>; NR_COUNTERS],
    /// Nanoseconds from a kick to the kicked vCPU running again.
    latency: Log2Histogram,
}

static STATS: Stats = Stats {
    counters: [const { Atomic::new(0) }; NR_COUNTERS],
    latency: Log2Histogram::new(),
};

#[inline]
fn count(c: Counter) {
    STATS.counters[c as usize].add(1u64, Relaxed);
}

fn enabled(state: &VmState) -> bool {
    state.flags & abi::KVM_PVLOCK_KICK_ENABLE != 0 || FORCE.get()
}

struct Host;

impl Host {
    fn kick(vcpu: &Vcpu, state: &VmState, flags: u64, apic_id: u64) -> i64 {
        count(Counter::Kicks);
        if flags != 0 {
            count(Counter::KicksBadFlags);
            return -abi::KVM_EINVAL;
        }
        let Some(target) = vcpu.vm().vcpu_by_apic_id(apic_id) else {
            count(Counter::KicksBadTarget);
            return -abi::KVM_EINVAL;
        };
        if target.is(vcpu) {
            count(Counter::KicksSelf);
            return -abi::KVM_EINVAL;
        }
        if target.is_halted() {
            target.pvlock_kick();
            count(Counter::KicksWoken);
            return abi::KVM_PVLOCK_KICK_WOKEN;
        }
        count(Counter::KicksNotHalted);
        // The target is on its way into the halt, or just out of it. If its
        // thread was preempted on the way, let it run.
        let want_yield = if state.flags & abi::KVM_PVLOCK_KICK_ENABLE != 0 {
            state.flags & abi::KVM_PVLOCK_KICK_YIELD != 0
        } else {
            YIELD.get()
        };
        if want_yield && target.is_preempted() {
            count(Counter::Yields);
            if target.yield_to() {
                count(Counter::YieldsDone);
            }
        }
        abi::KVM_PVLOCK_KICK_NOT_HALTED
    }

    fn get_param(state: &VmState, param: u64) -> i64 {
        count(Counter::GetParam);
        match param {
            abi::KVM_PVLOCK_PARAM_VERSION => abi::KVM_PVLOCK_ABI_VERSION as i64,
            abi::KVM_PVLOCK_PARAM_SPIN_THRESHOLD => {
                if state.flags & abi::KVM_PVLOCK_KICK_ENABLE != 0 {
                    state.spin_threshold as i64
                } else {
                    SPIN_THRESHOLD.get().into()
                }
            }
            _ => {
                count(Counter::GetParamBad);
                -abi::KVM_EINVAL
            }
        }
    }
}

impl PvlockHost for Host {
    const SUPPORTED_FLAGS: u64 = abi::KVM_PVLOCK_KICK_VALID_FLAGS;

    fn hypercall(vcpu: &Vcpu, nr: u64, args: [u64; 4]) -> Option<i64> {
        if nr != abi::KVM_HC_PVLOCK_KICK.into() && nr != abi::KVM_HC_PVLOCK_GET_PARAM.into() {
            return None;
        }
        let state = vcpu.vm().pvlock_state();
        if !enabled(&state) {
            count(Counter::Disabled);
            return Some(-abi::KVM_ENOSYS);
        }
        Some(if nr == abi::KVM_HC_PVLOCK_KICK.into() {
            Host::kick(vcpu, &state, args[0], args[1])
        } else {
            Host::get_param(&state, args[0])
        })
    }

    fn enable_cap(_vm: &Vm, args: [u64; 4]) -> Result<VmState> {
        count(Counter::EnableCap);
        let [flags, spin_threshold, a2, a3] = args;
        if flags & !abi::KVM_PVLOCK_KICK_VALID_FLAGS != 0
            || (flags != 0 && flags & abi::KVM_PVLOCK_KICK_ENABLE == 0)
            || spin_threshold > MAX_SPIN_THRESHOLD
            || a2 != 0
            || a3 != 0
        {
            count(Counter::EnableCapBad);
            return Err(EINVAL);
        }
        Ok(VmState {
            flags,
            spin_threshold: if flags == 0 { 0 } else { spin_threshold },
        })
    }

    fn guest_has_feature(vm: &Vm) -> bool {
        enabled(&vm.pvlock_state())
    }

    fn kick_done(_vcpu: &Vcpu, latency_ns: u64) {
        count(Counter::KicksDone);
        STATS.latency.record(latency_ns);
    }
}

struct CounterFile(Counter);

impl Writer for CounterFile {
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", STATS.counters[self.0 as usize].load(Relaxed))
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
    for c in &STATS.counters {
        c.store(0, Relaxed);
    }
    STATS.latency.clear();
    Ok(())
}

struct HostKvm {
    _reg: Registration<Host>,
    _debugfs: Pin<KBox<Scope<Files>>>,
}

impl kernel::Module for HostKvm {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let files = Files {
            counters: COUNTERS.map(|(c, _)| CounterFile(c)),
            latency: LatencyFile,
        };
        let debugfs = KBox::pin_init(
            Scope::dir(files, c"pvlock_host", |files, dir| {
                for (file, (_, name)) in files.counters.iter().zip(COUNTERS.iter()) {
                    dir.read_only_file(name, file);
                }
                dir.read_only_file(c"histo_kick_latency", &files.latency);
                dir.write_only_callback_file(c"zero_stats", files, &zero_stats);
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
            "registered: hypercalls {:#x} (kick) and {:#x} (get_param), KVM_CAP_PVLOCK_KICK {:#x}, CPUID bit {}; force={}\n",
            abi::KVM_HC_PVLOCK_KICK,
            abi::KVM_HC_PVLOCK_GET_PARAM,
            abi::KVM_CAP_PVLOCK_KICK,
            abi::KVM_FEATURE_PVLOCK_KICK,
            u8::from(FORCE.get())
        );
        Ok(HostKvm {
            _reg: reg,
            _debugfs: debugfs,
        })
    }
}

impl Drop for HostKvm {
    fn drop(&mut self) {
        pr_info!(
            "unregistering (kicks {}, woken {})\n",
            STATS.counters[Counter::Kicks as usize].load(Relaxed),
            STATS.counters[Counter::KicksWoken as usize].load(Relaxed)
        );
    }
}

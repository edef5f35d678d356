// SPDX-License-Identifier: GPL-2.0

//! The test cases. Each creates its own VM(s), asserts, and records what it
//! measured in an [`Outcome`]; an `Err` is the reason it failed, or, for a
//! [`Skip`], why it could not run.
//!
//! The target's lock waits run with interrupts disabled, so that only a
//! kick (or the VMM) can end them: a wait that ends without its kick, or
//! that does not end with it, is a failure. Where host_kvm's debugfs
//! counters are readable, a case also checks that they grew by exactly
//! what it did.

use std::fmt::{self, Display};
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use kvm_bindings::{
    CpuId, KVM_CAP_ENFORCE_PV_FEATURE_CPUID, KVM_CAP_X86_DISABLE_EXITS, KVM_MAX_CPUID_ENTRIES,
    KVM_MP_STATE_RUNNABLE, KVM_X86_DISABLE_EXITS_HLT,
};
use kvm_ioctls::Kvm;

use crate::guest;
use crate::host::{self, Counters, Debugfs, ForceGuard, Params};
use crate::kvmstats::Stats;
use crate::stats::{self, describe, summarize, us};
use crate::vm::{self, Rest, TestVm, VmConfig, KVM_CPUID_FEATURES};
use pvlock_common::abi;
use pvlock_common::stats::{KVM_VCPU_COUNTERS, KVM_VCPU_KICK_LATENCY_HIST};

/// Whether a case needs host_kvm loaded, absent, or either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Runs with `--expect-host-kvm yes`.
    Loaded,
    /// Runs with `--expect-host-kvm no`.
    Absent,
    /// Runs either way.
    Any,
}

/// A test case.
#[derive(Debug)]
pub struct Case {
    pub name: &'static str,
    pub needs: Needs,
    /// One line for `--list`.
    pub about: &'static str,
    pub run: fn(&Ctx, &mut Outcome) -> Result<()>,
}

/// The error of a case that cannot run on this host: reported as SKIP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip(pub String);

impl Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Skip {}

/// Every case, in the order they run.
pub const CASES: &[Case] = &[
    Case {
        name: "cap_and_cpuid",
        needs: Needs::Loaded,
        about: "CHECK_EXTENSION == 3, supported CPUID bit 23; force shows the bit only to VMs \
                whose VMM never configured the cap (not after ENABLE_CAP(0))",
        run: cap_and_cpuid,
    },
    Case {
        name: "cpuid_from_vmm",
        needs: Needs::Loaded,
        about: "force=N: the VMM sets bit 23 (SET_CPUID2) and enables the cap: the guest sees \
                it, the hypercalls work",
        run: cpuid_from_vmm,
    },
    Case {
        name: "enforce_pv_cpuid",
        needs: Needs::Loaded,
        about: "ENFORCE_PV_FEATURE_CPUID: without bit 23 the hypercalls return -1000, with it \
                they work",
        run: enforce_pv_cpuid,
    },
    Case {
        name: "enable_cap_validation",
        needs: Needs::Loaded,
        about: "ENABLE_CAP refuses bad arguments; GET_PARAM returns the threshold and version",
        run: enable_cap_validation,
    },
    Case {
        name: "wait_kick_wakes",
        needs: Needs::Loaded,
        about: "a kick with the wait's token ends the lock wait (WOKEN), N times; latency",
        run: wait_kick_wakes,
    },
    Case {
        name: "kvm_stats_per_vcpu",
        needs: Needs::Loaded,
        about:
            "KVM_GET_STATS_FD: pvlock counters and kick-latency histogram per vCPU, two VMs apart",
        run: kvm_stats_per_vcpu,
    },
    Case {
        name: "kick_before_wait_is_held",
        needs: Needs::Loaded,
        about: "a kick to a running vCPU is HELD: its wait with that token returns at once",
        run: kick_before_wait_is_held,
    },
    Case {
        name: "stale_kick_no_wakeup",
        needs: Needs::Loaded,
        about: "a kick for an older token or a finished wait ends no later wait; no pvlock \
                kick ends a plain HLT",
        run: stale_kick_no_wakeup,
    },
    Case {
        name: "wait_bound",
        needs: Needs::Loaded,
        about: "a lock wait no kick ends lasts host_kvm's max_wait_ms and returns BOUND (1); \
                with max_wait_ms=0 it lasts until its kick",
        run: wait_bound,
    },
    Case {
        name: "kick_bad_args",
        needs: Needs::Loaded,
        about: "kicks with flags, token 0, to self, no vCPU, broadcast IDs, and waits with \
                flags or token 0 return -22 and wake nobody",
        run: kick_bad_args,
    },
    Case {
        name: "mp_state_round_trip",
        needs: Needs::Loaded,
        about: "GET_MP_STATE of a vCPU stopped in its wait is RUNNABLE, SET_MP_STATE ends \
                one later wait at once; a held kick survives the round trip",
        run: mp_state_round_trip,
    },
    Case {
        name: "restore_keeps_rax",
        needs: Needs::Loaded,
        about: "a VMM that restores a waiting vCPU's registers and then its MP state, as QEMU \
                does, resumes it with the restored RAX: KVM_SET_MP_STATE writes no register",
        run: restore_keeps_rax,
    },
    Case {
        name: "no_wait_outside_run",
        needs: Needs::Loaded,
        about: "a lock wait ends when its vCPU leaves KVM_RUN: the saved RAX holds its result, \
                and a kick while the VMM holds the vCPU is HELD, not WOKEN for a wait the \
                saved state does not have",
        run: no_wait_outside_run,
    },
    Case {
        name: "kick_cpu_latch_used_up",
        needs: Needs::Loaded,
        about: "a KVM_HC_KICK_CPU latched before a lock wait ends that wait only: the next \
                wait halts until its own kick",
        run: kick_cpu_latch_used_up,
    },
    Case {
        name: "restore_keeps_held_kicks",
        needs: Needs::Loaded,
        about: "after KVM_SET_MP_STATE a kick held for an outer wait survives a nested wait \
                that the restore's armed kick ends",
        run: restore_keeps_held_kicks,
    },
    Case {
        name: "token_base",
        needs: Needs::Loaded,
        about: "GET_PARAM(TOKEN_BASE) is above every kick held for the VM (a new kernel \
                after kexec starts its tokens there)",
        run: token_base,
    },
    Case {
        name: "hlt_in_guest",
        needs: Needs::Loaded,
        about: "with HLT exits disabled, a lock wait still halts and its kick ends it",
        run: hlt_in_guest,
    },
    Case {
        name: "advice",
        needs: Needs::Loaded,
        about: "GET_PARAM(ADVICE): the VMM's PINNED and SHARED, and with AUTO dedicated alone, \
                shared at once beside a busy VM and under CPU hogs, dedicated again after; bad \
                mode refused",
        run: advice,
    },
    Case {
        name: "no_cap_enosys",
        needs: Needs::Any,
        about: "without ENABLE_CAP (and force=N) the pvlock hypercalls return -1000",
        run: no_cap_enosys,
    },
    Case {
        name: "kick_storm",
        needs: Needs::Loaded,
        about: "N kicks to a spinning vCPU from inside the guest are HELD; counters grow by N",
        run: kick_storm,
    },
    Case {
        name: "absent_cap_and_cpuid",
        needs: Needs::Absent,
        about: "without host_kvm: CHECK_EXTENSION == 0, no CPUID bit 23 (supported or in a guest)",
        run: absent_cap_and_cpuid,
    },
    Case {
        name: "absent_enable_cap",
        needs: Needs::Absent,
        about: "without host_kvm: ENABLE_CAP(KVM_CAP_PVLOCK_KICK) fails with EINVAL, the \
                hypercalls return -1000",
        run: absent_enable_cap,
    },
];

/// Finds a case by name.
pub fn find(name: &str) -> Option<&'static Case> {
    CASES.iter().find(|c| c.name == name)
}

/// Settings from the command line.
#[derive(Debug, Clone)]
pub struct Settings {
    pub kicks: u32,
    pub storm: u32,
    pub timeout: Duration,
    pub storm_timeout: Duration,
    pub stale_wait: Duration,
}

/// What every case gets.
pub struct Ctx {
    pub kvm: Kvm,
    /// `KVM_GET_SUPPORTED_CPUID`.
    pub supported: CpuId,
    /// The CPUID of a VMM that does not know pvlock: no bit 23, see
    /// [`vm::guest_cpuid`].
    pub guest_cpuid: CpuId,
    /// The CPUID of a VMM that enables pvlock: with bit 23.
    pub pvlock_cpuid: CpuId,
    /// Hypercalls with `vmcall` (Intel) instead of `vmmcall` (AMD).
    pub vmx: bool,
    pub debugfs: Debugfs,
    pub params: Params,
    pub settings: Settings,
}

impl Ctx {
    pub fn new(kvm: Kvm, debugfs: Debugfs, params: Params, settings: Settings) -> Result<Self> {
        let supported = kvm
            .get_supported_cpuid(KVM_MAX_CPUID_ENTRIES)
            .context("KVM_GET_SUPPORTED_CPUID")?;
        let guest_cpuid = vm::guest_cpuid(&supported, false)?;
        let pvlock_cpuid = vm::guest_cpuid(&supported, true)?;
        let vmx = vm::vendor_uses_vmcall(&vm::vendor(&supported));
        Ok(Ctx {
            kvm,
            supported,
            guest_cpuid,
            pvlock_cpuid,
            vmx,
            debugfs,
            params,
            settings,
        })
    }

    /// A VM set up as `cfg` says.
    fn vm_with(&self, cfg: VmConfig) -> Result<TestVm> {
        TestVm::new(&self.kvm, &cfg, self.vmx, self.settings.timeout)
    }

    /// A VM whose VMM does not know pvlock: no bit 23, nothing enforced.
    fn vm(&self) -> Result<TestVm> {
        self.vm_with(self.config(false, false))
    }

    fn config(&self, pvlock_bit: bool, enforce_pv_cpuid: bool) -> VmConfig<'_> {
        VmConfig {
            cpuid: if pvlock_bit {
                &self.pvlock_cpuid
            } else {
                &self.guest_cpuid
            },
            enforce_pv_cpuid,
            disable_exits: 0,
        }
    }

    /// A VM with pvlock enabled with `flags` (none if 0). If enabled, the
    /// target's first lock wait, which the VM's creation ended beforehand
    /// ([`TestVm::prime_target`]), is over.
    fn kick_vm(&self, flags: u64) -> Result<TestVm> {
        let vm = self.vm()?;
        if flags != 0 {
            enable(&vm, [flags, 0, 0, 0])?;
            vm.prime_target()?;
        }
        Ok(vm)
    }

    fn check_extension(&self) -> i32 {
        self.kvm
            .check_extension_raw(libc::c_ulong::from(abi::KVM_CAP_PVLOCK_KICK))
    }

    /// Supported CPUID 0x40000001 EAX.
    fn supported_features(&self) -> Result<u32> {
        vm::cpuid_leaf(&self.supported, KVM_CPUID_FEATURES, 0)
            .map(|e| e.eax)
            .context("KVM_GET_SUPPORTED_CPUID has no leaf 0x40000001")
    }
}

/// What a case measured: `key=value` pairs and notes.
#[derive(Debug, Default)]
pub struct Outcome {
    pub values: Vec<(String, String)>,
    pub notes: Vec<String>,
}

impl Outcome {
    pub fn set(&mut self, key: &str, value: impl Display) {
        self.values.push((key.to_string(), value.to_string()));
    }

    /// Adds `n` to the number under `key` (set to `n` if there is none).
    pub fn bump(&mut self, key: &str, n: usize) {
        match self.values.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = (v.parse::<usize>().unwrap_or(0) + n).to_string(),
            None => self.set(key, n),
        }
    }

    /// Adds a note, once.
    pub fn note(&mut self, note: impl Into<String>) {
        let note = note.into();
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }
}

fn errno_error(what: &str, errno: i32) -> anyhow::Error {
    anyhow::anyhow!(
        "{what} failed: {}",
        std::io::Error::from_raw_os_error(errno)
    )
}

/// `KVM_ENABLE_CAP(KVM_CAP_PVLOCK_KICK)`, which must succeed.
fn enable(vm: &TestVm, args: [u64; 4]) -> Result<()> {
    vm.enable_pvlock(args)
        .map_err(|e| errno_error(&format!("KVM_ENABLE_CAP(KVM_CAP_PVLOCK_KICK, {args:?})"), e))
}

/// Expects a hypercall result.
fn expect_ret(what: &str, got: i64, want: i64) -> Result<()> {
    ensure!(
        got == want,
        "{what} returned {} instead of {}",
        describe(got),
        describe(want)
    );
    Ok(())
}

/// Expects -22 in EAX, as a real-mode guest sees it.
fn expect_einval(what: &str, eax: u32) -> Result<()> {
    ensure!(
        eax == 0xffff_ffea,
        "{what} returned {} (eax {eax:#x}) instead of -22 (0xffffffea)",
        describe(stats::decode(eax))
    );
    Ok(())
}

/// Expects -1000 in EAX, as a real-mode guest sees it.
fn expect_enosys(what: &str, eax: u32) -> Result<()> {
    ensure!(
        eax == 0xffff_fc18,
        "{what} returned {} (eax {eax:#x}) instead of -1000 (0xfffffc18)",
        describe(stats::decode(eax))
    );
    Ok(())
}

/// The target makes a lock wait with `rest` that must return `want` at
/// once (an error, or a kick held for it).
fn wait_returns(vm: &TestVm, what: &str, rest: Rest, want: i64) -> Result<()> {
    vm.target_round(false, rest)?;
    let (_, ret) = vm
        .expect_waited_within(vm.timeout)
        .with_context(|| format!("{what}: the wait did not return"))?;
    expect_ret(what, ret, want)
}

/// Runs `f` with host_kvm's `force` set to `value`, and puts the old value
/// back (a no-op without host_kvm).
fn with_force(
    ctx: &Ctx,
    out: &mut Outcome,
    value: bool,
    f: impl FnOnce(&ForceGuard, &mut Outcome) -> Result<()>,
) -> Result<()> {
    let (force, changed) = ForceGuard::set(&ctx.params, value)?;
    if changed {
        let yn = |b| if b { "Y" } else { "N" };
        out.note(format!(
            "host_kvm force was {}: set to {} for the case",
            yn(!value),
            yn(value)
        ));
    }
    let result = f(&force, out);
    let restored = force.restore();
    result.and(restored)
}

/// Checks debugfs counter deltas if debugfs is readable; notes it if not.
fn check_deltas(
    ctx: &Ctx,
    out: &mut Outcome,
    before: Option<&Counters>,
    want: &[(&str, i128)],
) -> Result<()> {
    let (Some(before), Some(after)) = (before, ctx.debugfs.try_counters()) else {
        out.note(format!(
            "{} not readable: host counters not checked",
            ctx.debugfs.dir.display()
        ));
        return Ok(());
    };
    for (name, n) in want {
        let d = after.delta(before, name);
        ensure!(
            d == *n,
            "debugfs {name} grew by {d} instead of {n} (other KVM users on this host?)"
        );
    }
    out.bump("counters_checked", want.len());
    Ok(())
}

/// The counter deltas of a lock wait ended by its kick `n` times, after
/// `retries` kicks that came before their wait (HELD, the wait returned at
/// once).
fn kicked_waits(n: u32, retries: u32) -> [(&'static str, i128); 9] {
    let (n, r) = (i128::from(n), i128::from(retries));
    [
        ("kicks", n + r),
        ("kicks_woken", n),
        ("kicks_held", r),
        ("kicks_ignored", 0),
        ("waits", n + r),
        ("waits_kicked", n),
        ("waits_at_once", r),
        ("waits_other", 0),
        ("hypercalls_disabled", 0),
    ]
}

/// The target makes a lock wait and the kicker's kick ends it; returns the
/// HELD retries ([`TestVm::kick_wait`]).
fn wait_and_kick(vm: &TestVm) -> Result<u32> {
    let t = vm.token();
    vm.target_round(false, Rest::wait(t))?;
    let w = vm.kick_wait(t)?;
    vm.expect_waited()?;
    Ok(w.retries)
}

fn pvlock_bit(eax: u32) -> bool {
    eax & (1 << abi::KVM_FEATURE_PVLOCK_KICK) != 0
}

fn mp_state_name(s: u32) -> &'static str {
    match s {
        0 => "RUNNABLE",
        1 => "UNINITIALIZED",
        2 => "INIT_RECEIVED",
        3 => "HALTED",
        4 => "SIPI_RECEIVED",
        5 => "STOPPED",
        6 => "CHECK_STOP",
        7 => "OPERATING",
        8 => "LOAD",
        9 => "AP_RESET_HOLD",
        10 => "SUSPENDED",
        _ => "?",
    }
}

/// Case: the capability, the supported CPUID bit, and what `force` shows.
fn cap_and_cpuid(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let supported = abi::KVM_PVLOCK_KICK_VALID_FLAGS as i32;
    let sys = ctx.check_extension();
    out.set("check_extension", sys);
    ensure!(
        sys == supported,
        "KVM_CHECK_EXTENSION(0x7076) on /dev/kvm returned {sys} instead of {supported}"
    );
    let features = ctx.supported_features()?;
    out.set("supported_features", format!("{features:#x}"));
    ensure!(
        pvlock_bit(features),
        "KVM_GET_SUPPORTED_CPUID 0x40000001 eax {features:#x} lacks bit 23"
    );

    // The guest's own view: KVM serves CPUID at run time, so one VM shows
    // the bit come and go with force. force must be N for "before" to
    // mean anything.
    with_force(ctx, out, false, |force, out| {
        let vm = ctx.vm()?;
        let on_vm = vm.check_pvlock();
        ensure!(
            on_vm == supported,
            "KVM_CHECK_EXTENSION(0x7076) on the VM returned {on_vm} instead of {supported}"
        );
        let before = vm.guest_cpuid_eax(KVM_CPUID_FEATURES)?;
        out.set("guest_before", format!("{before:#x}"));
        ensure!(
            before & (1 << abi::KVM_FEATURE_PV_UNHALT) != 0,
            "the guest's CPUID 0x40000001 eax {before:#x} is not what the test set (no PV_UNHALT)"
        );
        ensure!(
            !pvlock_bit(before),
            "the guest sees bit 23 ({before:#x}) although the VMM did not set it and force is N"
        );

        // force shows the bit to a VM whose VMM never configured the
        // capability, and enables the hypercalls for it.
        force.change(true)?;
        let forced = vm.guest_cpuid_eax(KVM_CPUID_FEATURES);
        let version = vm.get_param(0);
        force.change(false)?;
        let (forced, version) = (forced?, version?);
        out.set("guest_forced", format!("{forced:#x}"));
        ensure!(
            pvlock_bit(forced),
            "with force=Y the guest of a VMM that never configured the capability does not \
             see bit 23 ({forced:#x})"
        );
        ensure!(
            forced & !(1 << abi::KVM_FEATURE_PVLOCK_KICK) == before,
            "force changed other bits: {before:#x} -> {forced:#x}"
        );
        expect_ret(
            "GET_PARAM(VERSION) with force=Y",
            version,
            abi::KVM_PVLOCK_ABI_VERSION as i64,
        )?;
        let unforced = vm.guest_cpuid_eax(KVM_CPUID_FEATURES)?;
        ensure!(
            !pvlock_bit(unforced),
            "with force back to N the guest still sees bit 23 ({unforced:#x})"
        );

        // Once the VMM configured the capability, the CPUID is the VMM's
        // alone: KVM_ENABLE_CAP shows nothing, nor does force.
        enable(&vm, [abi::KVM_PVLOCK_KICK_ENABLE, 0, 0, 0])?;
        let enabled = vm.guest_cpuid_eax(KVM_CPUID_FEATURES)?;
        force.change(true)?;
        let enabled_forced = vm.guest_cpuid_eax(KVM_CPUID_FEATURES);
        force.change(false)?;
        let enabled_forced = enabled_forced?;
        out.set("guest_enabled", format!("{enabled:#x}"));
        ensure!(
            enabled == before,
            "KVM_ENABLE_CAP(ENABLE) changed the guest's CPUID: {before:#x} -> {enabled:#x} \
             (the VMM sets the bit)"
        );
        ensure!(
            enabled_forced == before,
            "with force=Y, the guest of a VMM that enabled the capability without the bit \
             sees {enabled_forced:#x} instead of {before:#x}"
        );

        // force never overrides an explicit disable.
        let vm = ctx.vm()?;
        enable(&vm, [0, 0, 0, 0])?;
        let counters = ctx.debugfs.try_counters();
        force.change(true)?;
        let r = (|| -> Result<()> {
            let eax = vm.guest_cpuid_eax(KVM_CPUID_FEATURES)?;
            out.set("guest_disabled_forced", format!("{eax:#x}"));
            ensure!(
                !pvlock_bit(eax),
                "with force=Y, the guest of a VMM that disabled the capability \
                 (ENABLE_CAP(0)) sees bit 23 ({eax:#x})"
            );
            let t = vm.token();
            expect_enosys(
                "GET_PARAM(0) after ENABLE_CAP(0), force=Y",
                vm.hypercall(abi::KVM_HC_PVLOCK_GET_PARAM, [0, 0, 0, 0])?
                    .eax,
            )?;
            expect_enosys("KICK after ENABLE_CAP(0), force=Y", vm.kick(0, 1, t)?.eax)?;
            wait_returns(
                &vm,
                "WAIT after ENABLE_CAP(0), force=Y",
                Rest::wait(t),
                -abi::KVM_ENOSYS,
            )
        })();
        force.change(false)?;
        r?;
        check_deltas(
            ctx,
            out,
            counters.as_ref(),
            &[
                ("hypercalls_disabled", 3),
                ("kicks", 0),
                ("waits", 0),
                ("get_param", 0),
            ],
        )
    })
}

/// Case: a VMM that knows pvlock sets the bit and enables the capability.
fn cpuid_from_vmm(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    with_force(ctx, out, false, |_, out| {
        let vm = ctx.vm_with(ctx.config(true, false))?;
        let eax = vm.guest_cpuid_eax(KVM_CPUID_FEATURES)?;
        out.set("guest_features", format!("{eax:#x}"));
        ensure!(
            pvlock_bit(eax),
            "the guest does not see bit 23 ({eax:#x}) that its VMM set with KVM_SET_CPUID2"
        );
        // The bit alone enables nothing.
        let counters = ctx.debugfs.try_counters();
        expect_enosys(
            "GET_PARAM(0) with the VMM's bit but without ENABLE_CAP",
            vm.hypercall(abi::KVM_HC_PVLOCK_GET_PARAM, [0, 0, 0, 0])?
                .eax,
        )?;
        check_deltas(
            ctx,
            out,
            counters.as_ref(),
            &[("hypercalls_disabled", 1), ("get_param", 0)],
        )?;

        enable(&vm, [abi::KVM_PVLOCK_KICK_ENABLE, 77, 0, 0])?;
        vm.prime_target()?;
        let counters = ctx.debugfs.try_counters();
        let after = vm.guest_cpuid_eax(KVM_CPUID_FEATURES)?;
        ensure!(
            after == eax,
            "KVM_ENABLE_CAP changed the guest's CPUID: {eax:#x} -> {after:#x}"
        );
        expect_ret(
            "GET_PARAM(VERSION)",
            vm.get_param(0)?,
            abi::KVM_PVLOCK_ABI_VERSION as i64,
        )?;
        expect_ret("GET_PARAM(SPIN_THRESHOLD)", vm.get_param(1)?, 77)?;
        let retries = wait_and_kick(&vm)?;
        out.set("kick_retries", retries);
        let mut want = kicked_waits(1, retries).to_vec();
        want.push(("get_param", 2));
        check_deltas(ctx, out, counters.as_ref(), &want)
    })
}

/// Case: `KVM_CAP_ENFORCE_PV_FEATURE_CPUID` gates the pvlock hypercalls on
/// bit 23.
fn enforce_pv_cpuid(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let cap = ctx
        .kvm
        .check_extension_raw(libc::c_ulong::from(KVM_CAP_ENFORCE_PV_FEATURE_CPUID));
    if cap <= 0 {
        return Err(Skip(format!(
            "KVM_CHECK_EXTENSION(KVM_CAP_ENFORCE_PV_FEATURE_CPUID) = {cap}: not supported here"
        ))
        .into());
    }
    with_force(ctx, out, false, |force, out| {
        // Enabled, but the bit is not in the CPUID: KVM refuses the
        // hypercalls before host_kvm sees them.
        let vm = ctx.vm_with(ctx.config(false, true))?;
        enable(&vm, [abi::KVM_PVLOCK_KICK_ENABLE, 0, 0, 0])?;
        let counters = ctx.debugfs.try_counters();
        let eax = vm.guest_cpuid_eax(KVM_CPUID_FEATURES)?;
        ensure!(!pvlock_bit(eax), "the guest sees bit 23 ({eax:#x})");
        let t = vm.token();
        expect_enosys(
            "GET_PARAM(0) without bit 23, enforced",
            vm.hypercall(abi::KVM_HC_PVLOCK_GET_PARAM, [0, 0, 0, 0])?
                .eax,
        )?;
        expect_enosys("KICK without bit 23, enforced", vm.kick(0, 1, t)?.eax)?;
        wait_returns(
            &vm,
            "WAIT without bit 23, enforced",
            Rest::wait(t),
            -abi::KVM_ENOSYS,
        )?;
        check_deltas(
            ctx,
            out,
            counters.as_ref(),
            &[
                ("hypercalls_disabled", 0),
                ("get_param", 0),
                ("kicks", 0),
                ("waits", 0),
                ("waits_bad_args", 0),
            ],
        )?;

        // force shows nothing to a VMM that enforces the PV CPUID bits.
        let vm = ctx.vm_with(ctx.config(false, true))?;
        force.change(true)?;
        let forced = vm.guest_cpuid_eax(KVM_CPUID_FEATURES);
        let p0 = vm.hypercall(abi::KVM_HC_PVLOCK_GET_PARAM, [0, 0, 0, 0]);
        force.change(false)?;
        let forced = forced?;
        out.set("guest_enforced_forced", format!("{forced:#x}"));
        ensure!(
            !pvlock_bit(forced),
            "with force=Y, the guest of a VMM that enforces the PV CPUID bits sees bit 23 \
             ({forced:#x})"
        );
        expect_enosys("GET_PARAM(0) enforced, force=Y", p0?.eax)?;

        // With the bit, enforced: the hypercalls work.
        let vm = ctx.vm_with(ctx.config(true, true))?;
        enable(&vm, [abi::KVM_PVLOCK_KICK_ENABLE, 0, 0, 0])?;
        vm.prime_target()?;
        let counters = ctx.debugfs.try_counters();
        let eax = vm.guest_cpuid_eax(KVM_CPUID_FEATURES)?;
        ensure!(pvlock_bit(eax), "the guest does not see bit 23 ({eax:#x})");
        expect_ret(
            "GET_PARAM(VERSION) with bit 23, enforced",
            vm.get_param(0)?,
            abi::KVM_PVLOCK_ABI_VERSION as i64,
        )?;
        let retries = wait_and_kick(&vm)?;
        out.set("kick_retries", retries);
        let mut want = kicked_waits(1, retries).to_vec();
        want.push(("get_param", 1));
        check_deltas(ctx, out, counters.as_ref(), &want)
    })
}

/// Case: `KVM_ENABLE_CAP` arguments, and `KVM_HC_PVLOCK_GET_PARAM`.
fn enable_cap_validation(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    with_force(ctx, out, false, |force, out| {
        let counters = ctx.debugfs.try_counters();
        let vm = ctx.kick_vm(0)?;
        let enable = abi::KVM_PVLOCK_KICK_ENABLE;
        let max = u64::from(abi::MAX_SPIN_THRESHOLD);
        let bad: [(&str, [u64; 4]); 5] = [
            ("unknown flag 1<<2", [1 << 2, 0, 0, 0]),
            (
                "YIELD without ENABLE",
                [abi::KVM_PVLOCK_KICK_YIELD, 0, 0, 0],
            ),
            ("threshold (1<<26)+1", [enable, max + 1, 0, 0]),
            ("advice mode args[2]=3", [enable, 0, 3, 0]),
            ("args[3]=1", [enable, 0, 0, 1]),
        ];
        for (what, args) in bad {
            match vm.enable_pvlock(args) {
                Err(libc::EINVAL) => {}
                Err(e) => bail!(
                    "ENABLE_CAP with {what} failed with {} instead of EINVAL",
                    std::io::Error::from_raw_os_error(e)
                ),
                Ok(()) => bail!("ENABLE_CAP with {what} ({args:?}) succeeded"),
            }
        }
        // A refused ENABLE_CAP changed nothing: pvlock is still off...
        expect_ret(
            "GET_PARAM(0) after refused ENABLE_CAPs",
            vm.get_param(0)?,
            -abi::KVM_ENOSYS,
        )?;
        // ...and the VM still counts as never configured: force applies.
        force.change(true)?;
        let forced = vm.get_param(0);
        force.change(false)?;
        expect_ret(
            "GET_PARAM(0) with force=Y after refused ENABLE_CAPs",
            forced?,
            abi::KVM_PVLOCK_ABI_VERSION as i64,
        )?;

        let ok = |args: [u64; 4]| {
            vm.enable_pvlock(args)
                .map_err(|e| errno_error(&format!("ENABLE_CAP {args:?}"), e))
        };
        ok([enable, max, 0, 0])?;
        expect_ret(
            "GET_PARAM(1) with threshold 1<<26",
            vm.get_param(1)?,
            max as i64,
        )?;
        ok([enable, 1234, 0, 0])?;
        let threshold = vm.get_param(1)?;
        let version = vm.get_param(0)?;
        let bad_param = vm.get_param(7)?;
        out.set("threshold", threshold);
        out.set("version", version);
        out.set("param7", bad_param);
        expect_ret("GET_PARAM(1)", threshold, 1234)?;
        expect_ret("GET_PARAM(0)", version, abi::KVM_PVLOCK_ABI_VERSION as i64)?;
        expect_ret("GET_PARAM(7)", bad_param, -abi::KVM_EINVAL)?;

        // Refused again: the state stays.
        ensure!(
            vm.enable_pvlock([abi::KVM_PVLOCK_KICK_YIELD, 1, 0, 0]) == Err(libc::EINVAL),
            "ENABLE_CAP(YIELD, 1) was not refused"
        );
        expect_ret(
            "GET_PARAM(1) after a refused ENABLE_CAP",
            vm.get_param(1)?,
            1234,
        )?;
        // ENABLE|YIELD is valid too.
        ok([enable | abi::KVM_PVLOCK_KICK_YIELD, 99, 0, 0])?;
        expect_ret("GET_PARAM(1) after ENABLE|YIELD", vm.get_param(1)?, 99)?;

        // args[0] = 0 disables.
        ok([0, 0, 0, 0])?;
        expect_ret(
            "GET_PARAM(0) after disabling",
            vm.get_param(0)?,
            -abi::KVM_ENOSYS,
        )?;

        // 6 refused, 4 accepted; GET_PARAM: 2 disabled, 7 answered, 1 bad.
        check_deltas(
            ctx,
            out,
            counters.as_ref(),
            &[
                ("enable_cap", 10),
                ("enable_cap_bad", 6),
                ("get_param", 7),
                ("get_param_bad", 1),
                ("hypercalls_disabled", 2),
            ],
        )
    })
}

/// Case: the kick with the wait's token ends the wait, `--kicks` times.
fn wait_kick_wakes(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let n = ctx.settings.kicks;
    let vm = ctx.kick_vm(abi::KVM_PVLOCK_KICK_ENABLE)?;
    let counters = ctx.debugfs.try_counters();
    let histo = ctx.debugfs.kick_latency().ok();
    let mut lat = Vec::with_capacity(n as usize);
    let mut retries = 0u32;
    for i in 0..n {
        let t = vm.token();
        vm.target_round(false, Rest::wait(t))
            .with_context(|| format!("round {i}"))?;
        let w = vm.kick_wait(t).with_context(|| format!("kick {i}"))?;
        retries += w.retries;
        let woke = vm.expect_waited().with_context(|| format!("kick {i}"))?;
        // Signed: the target may get back to userspace before the kicker.
        let ns = if woke.at >= w.kick.at {
            woke.at.duration_since(w.kick.at).as_nanos() as i64
        } else {
            -(w.kick.at.duration_since(woke.at).as_nanos() as i64)
        };
        lat.push(ns);
    }
    let s = summarize(&lat).context("no kicks")?;
    out.set("kicks", s.count);
    out.set("retries", retries);
    out.set("lat_median_us", us(s.median));
    out.set("lat_p90_us", us(s.p90));
    out.set("lat_p99_us", us(s.p99));
    out.set("lat_max_us", us(s.max));
    out.set("lat_min_us", us(s.min));
    if let (Some(before), Ok(after)) = (&histo, ctx.debugfs.kick_latency()) {
        if let Some(b) = host::histogram_percentile(before, &after, 50.0) {
            out.set("host_lat_median_bucket_us", us(b as i64));
        }
    }
    check_deltas(ctx, out, counters.as_ref(), &kicked_waits(n, retries))
}

/// The change of every pvlock statistic of one vCPU.
fn stats_delta(before: &Stats, after: &Stats) -> Result<Vec<(&'static str, i128)>> {
    KVM_VCPU_COUNTERS
        .iter()
        .copied()
        .chain([KVM_VCPU_KICK_LATENCY_HIST])
        .map(|name| {
            let b = before.total(name);
            let a = after.total(name);
            match (b, a) {
                (Some(b), Some(a)) => Ok((name, i128::from(a) - i128::from(b))),
                _ => {
                    bail!("KVM_GET_STATS_FD has no {name} (kernel without the pvlock statistics?)")
                }
            }
        })
        .collect()
}

fn expect_deltas(who: &str, got: &[(&str, i128)], want: &[(&str, i128)]) -> Result<()> {
    for (name, n) in want {
        let d = got.iter().find(|(g, _)| g == name).map_or(0, |(_, d)| *d);
        ensure!(d == *n, "{who}: {name} grew by {d} instead of {n}");
    }
    Ok(())
}

/// Case: KVM's binary statistics count each vCPU's own lock waits and
/// kicks, and one VM's activity shows in none of another's.
fn kvm_stats_per_vcpu(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let a = ctx.kick_vm(abi::KVM_PVLOCK_KICK_ENABLE)?;
    let b = ctx.kick_vm(abi::KVM_PVLOCK_KICK_ENABLE)?;
    let [ak0, at0] = a.vcpu_stats()?;
    let [bk0, bt0] = b.vcpu_stats()?;
    let n = 20u32;
    let mut retries = 0;
    for i in 0..n {
        retries += wait_and_kick(&a).with_context(|| format!("round {i}"))?;
    }
    // One kick held for a wait, which then returns at once.
    let t = a.token();
    a.target_round(true, Rest::wait(t))?;
    expect_ret(
        "kick of the spinning target",
        a.kick(0, 1, t)?.ret(),
        abi::KVM_PVLOCK_KICK_HELD,
    )?;
    a.target_stop_spinning()?;
    a.expect_waited()?;
    // A kick of a vCPU that does not exist fails.
    let bad = a.kick(0, 77, a.token())?.ret();
    ensure!(bad < 0, "kick of APIC ID 77 returned {}", describe(bad));

    let [ak1, at1] = a.vcpu_stats()?;
    let [bk1, bt1] = b.vcpu_stats()?;
    let (n, r) = (i128::from(n), i128::from(retries));
    let kicker = stats_delta(&ak0, &ak1)?;
    let target = stats_delta(&at0, &at1)?;
    expect_deltas(
        "VM A kicker",
        &kicker,
        &[
            ("pvlock_kicks_woken", n),
            ("pvlock_kicks_held", r + 1),
            ("pvlock_kicks_failed", 1),
            ("pvlock_waits", 0),
        ],
    )?;
    expect_deltas(
        "VM A target",
        &target,
        &[
            ("pvlock_waits", n + r + 1),
            ("pvlock_waits_kicked", n),
            ("pvlock_waits_at_once", r + 1),
            ("pvlock_kick_latency_hist", n),
            ("pvlock_kicks_woken", 0),
        ],
    )?;
    for (who, before, after) in [("VM B kicker", &bk0, &bk1), ("VM B target", &bt0, &bt1)] {
        let d = stats_delta(before, after)?;
        let moved: Vec<String> = d
            .iter()
            .filter(|(_, v)| *v != 0)
            .map(|(k, v)| format!("{k} +{v}"))
            .collect();
        ensure!(
            moved.is_empty(),
            "{who} counted VM A's waits and kicks: {}",
            moved.join(", ")
        );
    }
    out.set("kicks", n);
    out.set("retries", r);
    out.set("stats_checked", (KVM_VCPU_COUNTERS.len() + 1) * 4);
    Ok(())
}

/// Case: a kick that comes before its wait is held for it.
fn kick_before_wait_is_held(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let vm = ctx.kick_vm(abi::KVM_PVLOCK_KICK_ENABLE)?;
    let counters = ctx.debugfs.try_counters();
    const HELD: u32 = 3;
    for i in 0..HELD {
        let t = vm.token();
        vm.target_round(true, Rest::wait(t))?;
        // The last time with a larger token: held for every wait up to it.
        let k = if i == HELD - 1 { t + 5 } else { t };
        vm.tokens_past(k);
        let r = vm.kick(0, 1, k)?.ret();
        expect_ret(
            &format!("kick (token {k:#x}) of the spinning target"),
            r,
            abi::KVM_PVLOCK_KICK_HELD,
        )?;
        vm.target_stop_spinning()?;
        vm.expect_waited().with_context(|| {
            format!(
                "the wait (token {t:#x}) after a kick held for token {k:#x} did not return \
                 at once"
            )
        })?;
    }
    out.set("held", HELD);
    // The held kicks are used up: the next wait halts until its own kick.
    let t = vm.token();
    vm.target_round(false, Rest::wait(t))?;
    vm.expect_target_halted(
        ctx.settings.stale_wait,
        "of its wait: a kick held for an earlier wait ended it",
    )?;
    let w = vm.kick_wait(t)?;
    vm.expect_waited()?;
    out.set("final_kick_retries", w.retries);
    let r = i128::from(w.retries);
    let held = i128::from(HELD);
    check_deltas(
        ctx,
        out,
        counters.as_ref(),
        &[
            ("kicks", held + 1 + r),
            ("kicks_held", held + r),
            ("kicks_woken", 1),
            ("waits", held + 1 + r),
            ("waits_at_once", held + r),
            ("waits_kicked", 1),
            ("waits_other", 0),
        ],
    )
}

/// Case: kicks that are not for the wait in progress end nothing.
fn stale_kick_no_wakeup(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let stale = ctx.settings.stale_wait;
    let vm = ctx.kick_vm(abi::KVM_PVLOCK_KICK_ENABLE)?;
    let counters = ctx.debugfs.try_counters();

    // A kick held for token t1 does not end the wait t2 > t1.
    let t1 = vm.token();
    let t2 = vm.token();
    vm.target_round(true, Rest::wait(t2))?;
    expect_ret(
        "kick (older token) of the spinning target",
        vm.kick(0, 1, t1)?.ret(),
        abi::KVM_PVLOCK_KICK_HELD,
    )?;
    vm.target_stop_spinning()?;
    vm.expect_target_halted(
        stale,
        "of its wait: a kick held for an older token ended a later wait",
    )?;
    out.set("stayed_halted_ms", stale.as_millis());
    expect_ret(
        &format!("kick of the wait, {} ms into it", stale.as_millis()),
        vm.kick(0, 1, t2)?.ret(),
        abi::KVM_PVLOCK_KICK_WOKEN,
    )?;
    vm.expect_waited()?;

    // A kick for a wait that is over ends no later wait.
    expect_ret(
        "a second kick of the wait that is over",
        vm.kick(0, 1, t2)?.ret(),
        abi::KVM_PVLOCK_KICK_HELD,
    )?;
    let t3 = vm.token();
    vm.target_round(false, Rest::wait(t3))?;
    vm.expect_target_halted(
        stale,
        "of its wait: a kick for a wait that was over ended the next one",
    )?;
    expect_ret(
        &format!("kick of the next wait, {} ms into it", stale.as_millis()),
        vm.kick(0, 1, t3)?.ret(),
        abi::KVM_PVLOCK_KICK_WOKEN,
    )?;
    vm.expect_waited()?;

    // No pvlock kick ends a plain HLT, whatever its token (the last
    // token, the largest, is held for every later wait: no waits after).
    vm.target_round(false, Rest::Hlt)?;
    std::thread::sleep(Duration::from_millis(20));
    let hlt_tokens = [vm.token(), u32::MAX];
    for t in hlt_tokens {
        expect_ret(
            &format!("kick (token {t:#x}) of the target in HLT"),
            vm.kick(0, 1, t)?.ret(),
            abi::KVM_PVLOCK_KICK_HELD,
        )?;
    }
    vm.expect_target_halted(stale, "of its hlt: a pvlock kick ended a plain HLT")?;
    // Upstream's KVM_HC_KICK_CPU ends it: the HLT was a real one.
    let r = vm.hypercall(abi::KVM_HC_KICK_CPU, [0, 1, 0, 0])?.ret();
    out.set("upstream_kick_ret", r);
    match vm.target_event(vm.timeout)? {
        Some(ev) if ev.port == guest::PORT_EVENT && ev.value == guest::EV_WOKE => {}
        Some(ev) => bail!("target vCPU: {} instead of WOKE", ev.name()),
        None => {
            out.note(format!(
                "upstream KVM_HC_KICK_CPU (returned {}) did not end the HLT; \
                 KVM_SET_MP_STATE did",
                describe(r)
            ));
            vm.pause_target()?;
            vm.set_target_mp_state(KVM_MP_STATE_RUNNABLE)?;
            vm.resume_target()?;
            vm.expect_woke()?;
        }
    }

    let hlt_kicks = hlt_tokens.len() as i128;
    check_deltas(
        ctx,
        out,
        counters.as_ref(),
        &[
            ("kicks", 4 + hlt_kicks),
            ("kicks_held", 2 + hlt_kicks),
            ("kicks_woken", 2),
            ("waits", 2),
            ("waits_kicked", 2),
            ("waits_at_once", 0),
            ("waits_other", 0),
        ],
    )
}

/// Case: host_kvm's bound on a lock wait (`max_wait_ms`).
fn wait_bound(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    const BOUND_MS: u64 = 100;
    let original = ctx
        .params
        .read("max_wait_ms")?
        .context("host_kvm has no max_wait_ms parameter")?;
    let vm = ctx.kick_vm(abi::KVM_PVLOCK_KICK_ENABLE)?;
    let counters = ctx.debugfs.try_counters();
    let result = (|| -> Result<()> {
        ctx.params.write("max_wait_ms", &BOUND_MS.to_string())?;
        // No kick: the bound ends the wait, and the guest is told.
        let t = vm.token();
        let started = vm.target_round(false, Rest::wait(t))?;
        let (ev, ret) = vm
            .expect_waited_within(vm.timeout)
            .context("a wait that no kick ends did not end at its bound")?;
        expect_ret("a wait that no kick ended", ret, abi::KVM_PVLOCK_WAIT_BOUND)?;
        let took = ev.at.duration_since(started.at);
        ensure!(
            took >= Duration::from_millis(BOUND_MS),
            "the wait ended after {} ms, before its bound of {BOUND_MS} ms",
            took.as_millis()
        );
        out.set("bounded_wait_ms", took.as_millis());
        // Its token's kick, after it, is held and ends nothing.
        expect_ret(
            "a kick of the wait that the bound ended",
            vm.kick(0, 1, t)?.ret(),
            abi::KVM_PVLOCK_KICK_HELD,
        )?;
        // No bound: the wait lasts until its kick.
        ctx.params.write("max_wait_ms", "0")?;
        let t = vm.token();
        vm.target_round(false, Rest::wait(t))?;
        vm.expect_target_halted(
            Duration::from_millis(BOUND_MS) + ctx.settings.stale_wait,
            "of its wait: with max_wait_ms=0 a wait ended with no kick",
        )?;
        expect_ret(
            "kick of the unbounded wait",
            vm.kick(0, 1, t)?.ret(),
            abi::KVM_PVLOCK_KICK_WOKEN,
        )?;
        vm.expect_waited()?;
        Ok(())
    })();
    let restored = ctx.params.write("max_wait_ms", &original);
    result.and(restored)?;
    check_deltas(
        ctx,
        out,
        counters.as_ref(),
        &[
            ("waits", 2),
            ("waits_bound", 1),
            ("waits_kicked", 1),
            ("waits_other", 0),
            ("kicks", 2),
            ("kicks_woken", 1),
            ("kicks_held", 1),
        ],
    )
}

/// The advice of `vm` once `want(advice)` holds, polled for up to 3 s;
/// `Err` with the last advice seen if it never does.
fn advice_until(
    vm: &TestVm,
    what: &str,
    want: impl Fn(abi::Advice) -> bool,
) -> Result<abi::Advice> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let v = vm.get_param(abi::KVM_PVLOCK_PARAM_ADVICE as u32)?;
        ensure!(v >= 0, "GET_PARAM(ADVICE) failed with {v}");
        let a = abi::Advice::from_value(v as u64)
            .with_context(|| format!("GET_PARAM(ADVICE) = {v:#x} sets undefined bits"))?;
        if want(a) {
            return Ok(a);
        }
        ensure!(
            Instant::now() < deadline,
            "the advice did not become {what} within 3 s (last {a:?})"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// CPU hogs: `n` threads that spin until dropped (in this process, so on
/// the CPUs the vCPU threads may use).
struct Hogs {
    stop: Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Hogs {
    fn start(n: usize) -> Hogs {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = Arc::clone(&stop);
                thread::spawn(move || {
                    while !stop.load(AtomicOrdering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Hogs { stop, threads }
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        self.stop.store(true, AtomicOrdering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Case: the host's advice (`KVM_PVLOCK_PARAM_ADVICE`).
fn advice(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let on = abi::KVM_PVLOCK_KICK_ENABLE;
    let hold = ctx
        .params
        .read("advice_hold_ms")?
        .context("host_kvm has no advice_hold_ms parameter (ABI 3)")?;
    let counters = ctx.debugfs.try_counters();
    let vm = ctx.kick_vm(0)?;
    // The VMM pinned its vCPUs: dedicated, with its threshold.
    enable(&vm, [on, 5000, abi::KVM_PVLOCK_ADVICE_PINNED, 0])?;
    vm.prime_target()?;
    let a = advice_until(&vm, "dedicated (PINNED)", |a| a.dedicated)?;
    ensure!(
        a.spin_threshold == 5000,
        "PINNED advice {a:?}: not the VMM's threshold 5000"
    );
    expect_ret(
        "GET_PARAM(SPIN_THRESHOLD) with the advice",
        vm.get_param(abi::KVM_PVLOCK_PARAM_SPIN_THRESHOLD as u32)?,
        5000,
    )?;
    // SHARED: never dedicated.
    enable(&vm, [on, 5000, abi::KVM_PVLOCK_ADVICE_SHARED, 0])?;
    advice_until(&vm, "shared (SHARED)", |a| !a.dedicated)?;
    // A bad mode is refused and changes nothing.
    ensure!(
        vm.enable_pvlock([on, 0, 3, 0]) == Err(libc::EINVAL),
        "ENABLE_CAP with advice mode 3 was not refused"
    );
    thread::sleep(Duration::from_millis(300));
    advice_until(&vm, "still shared after a refused mode", |a| !a.dedicated)?;

    // AUTO, no hold: this VM's two vCPUs alone on the CPUs this process
    // may use (two or more: the harness runs it on L1's guest CPUs).
    ctx.params.write("advice_hold_ms", "0")?;
    let result = (|| -> Result<()> {
        enable(&vm, [on, 5000, abi::KVM_PVLOCK_ADVICE_AUTO, 0])?;
        let t0 = Instant::now();
        advice_until(&vm, "dedicated (AUTO, alone)", |a| a.dedicated)?;
        out.set("dedicated_after_ms", t0.elapsed().as_millis());

        // A second VM whose vCPU spins on the same CPUs: shared at once.
        let other = ctx.kick_vm(on)?;
        other.target_round(true, Rest::Hlt)?;
        let t0 = Instant::now();
        let shared = advice_until(&vm, "shared (a busy VM beside it)", |a| !a.dedicated);
        out.set("shared_after_busy_vm_ms", t0.elapsed().as_millis());
        other.target_stop_spinning()?;
        drop(other);
        // The threshold is the VMM's whatever the load: a guest cannot
        // solve it for the other VM's demand.
        let shared = shared?;
        ensure!(
            shared.spin_threshold == 5000,
            "advice beside a busy VM {shared:?}: not the VMM's threshold 5000"
        );
        advice_until(&vm, "dedicated again (the busy VM gone)", |a| a.dedicated)?;

        // CPU hogs beside this VM's own spinning vCPU: its wait shows it.
        vm.target_round(true, Rest::Hlt)?;
        let hogs = Hogs::start(4);
        let t0 = Instant::now();
        let shared = advice_until(&vm, "shared (CPU hogs)", |a| !a.dedicated);
        out.set("shared_after_hogs_ms", t0.elapsed().as_millis());
        drop(hogs);
        shared?;
        advice_until(&vm, "dedicated again (the hogs gone)", |a| a.dedicated)?;
        vm.target_stop_spinning()?;
        Ok(())
    })();
    let restored = ctx.params.write("advice_hold_ms", &hold);
    result.and(restored)?;
    if let (Some(before), Ok(after)) = (counters.as_ref(), ctx.debugfs.counters()) {
        for name in ["advice_dedicated", "advice_shared"] {
            let d = after.delta(before, name);
            out.set(name, d);
            ensure!(d >= 3, "debugfs {name} grew by {d}, not at least 3");
        }
    }
    Ok(())
}

/// Case: a `KVM_HC_KICK_CPU` latched in `pv_unhalted` (the guest's
/// fallback kick, made before the wait it is for) ends one lock wait.
fn kick_cpu_latch_used_up(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let vm = ctx.kick_vm(abi::KVM_PVLOCK_KICK_ENABLE)?;
    let t = vm.token();
    vm.target_round(true, Rest::wait(t))?;
    expect_ret(
        "KVM_HC_KICK_CPU of the spinning target",
        vm.hypercall(abi::KVM_HC_KICK_CPU, [0, 1, 0, 0])?.ret(),
        0,
    )?;
    vm.target_stop_spinning()?;
    vm.expect_returned(abi::KVM_PVLOCK_WAIT_ENDED).context(
        "the lock wait after a latched KVM_HC_KICK_CPU did not return at once (and not kicked)",
    )?;
    let t = vm.token();
    vm.target_round(false, Rest::wait(t))?;
    vm.expect_target_halted(
        ctx.settings.stale_wait,
        "of the next lock wait: the KVM_HC_KICK_CPU latched for the wait before ended it too",
    )?;
    let w = vm.kick_wait(t)?;
    vm.expect_waited()?;
    out.set("next_wait_halted", "yes");
    out.set("kick_retries", w.retries);
    Ok(())
}

/// Case: a restore (`KVM_SET_MP_STATE`) arms the next lock wait to end at
/// once; a kick held meanwhile for another wait stays held for it.
fn restore_keeps_held_kicks(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let vm = ctx.kick_vm(abi::KVM_PVLOCK_KICK_ENABLE)?;
    // An outer wait (token a) is on its way in when a nested one (b, a
    // later token: an interrupt handler's) waits first.
    let a = vm.token();
    let b = vm.token();
    vm.target_round(true, Rest::wait(b))?;
    let s = mp_state_round_trip_of_target(&vm, "while spinning")?;
    ensure!(
        s == KVM_MP_STATE_RUNNABLE,
        "KVM_GET_MP_STATE of the spinning target returned {s} ({})",
        mp_state_name(s)
    );
    expect_ret(
        "the outer wait's kick, before it",
        vm.kick(0, 1, a)?.ret(),
        abi::KVM_PVLOCK_KICK_HELD,
    )?;
    vm.target_stop_spinning()?;
    vm.expect_returned(abi::KVM_PVLOCK_WAIT_ENDED).context(
        "the nested wait after the restore did not return at once (by the restore, not a kick)",
    )?;
    vm.target_round(false, Rest::wait(a))?;
    let (_, ret) = vm.expect_waited_within(ctx.settings.stale_wait).context(
        "the outer wait halted although its kick was held: the restore's armed kick swallowed it",
    )?;
    expect_ret("the outer wait", ret, abi::KVM_PVLOCK_WAIT_KICKED)?;
    out.set("outer_wait_at_once", "yes");
    Ok(())
}

/// Case: `KVM_PVLOCK_PARAM_TOKEN_BASE` is above every held kick.
fn token_base(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let vm = ctx.kick_vm(abi::KVM_PVLOCK_KICK_ENABLE)?;
    let param = abi::KVM_PVLOCK_PARAM_TOKEN_BASE as u32;
    let before = vm.get_param(param)?;
    ensure!(before > 0, "GET_PARAM(TOKEN_BASE) returned {before}");
    // A kick held for a wait far ahead, as a kernel before a kexec leaves.
    let far = (before as u32).saturating_add(0x10_0000);
    vm.tokens_past(far);
    let next = vm.token();
    vm.target_round(true, Rest::wait(next))?;
    expect_ret(
        "a kick of the spinning target",
        vm.kick(0, 1, far)?.ret(),
        abi::KVM_PVLOCK_KICK_HELD,
    )?;
    let after = vm.get_param(param)?;
    // The held kick is below the next wait's token: that wait halts until
    // its own kick.
    vm.target_stop_spinning()?;
    vm.kick_wait(next)?;
    vm.expect_waited()?;
    out.set("token_base_before", before);
    out.set("token_base_after", after);
    ensure!(
        after > i64::from(far),
        "GET_PARAM(TOKEN_BASE) is {after}, not above the held kick {far}"
    );
    Ok(())
}

/// Case: bad kick and wait arguments.
fn kick_bad_args(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let vm = ctx.kick_vm(abi::KVM_PVLOCK_KICK_ENABLE)?;
    let counters = ctx.debugfs.try_counters();

    // Waits with flags or token 0: -22 at once.
    let t = vm.token();
    for (what, rest) in [
        ("WAIT with flags=1", Rest::Wait { flags: 1, token: t }),
        ("WAIT with token 0", Rest::Wait { flags: 0, token: 0 }),
    ] {
        vm.target_round(false, rest)?;
        let (_, ret) = vm.expect_waited_within(vm.timeout)?;
        expect_ret(what, ret, -abi::KVM_EINVAL)?;
    }

    // Kicks with bad arguments, with the wait's token where there is one:
    // -22, and the waiting target stays in its wait.
    vm.target_round(false, Rest::wait(t))?;
    std::thread::sleep(Duration::from_millis(50));
    let bad: [(&str, u32, u32, u32); 6] = [
        ("flags=1 to APIC ID 1", 1, 1, t),
        ("token 0 to APIC ID 1", 0, 1, 0),
        ("self (APIC ID 0)", 0, 0, t),
        ("APIC ID 7 (no such vCPU)", 0, 7, t),
        ("APIC ID 0xffffffff (x2APIC broadcast)", 0, 0xffff_ffff, t),
        ("APIC ID 0xff (xAPIC broadcast)", 0, 0xff, t),
    ];
    for (what, flags, apic, token) in bad {
        let c = vm.kick(flags, apic, token)?;
        expect_einval(&format!("kick {what}"), c.eax)?;
    }
    out.set("bad_kicks", bad.len());
    out.set("bad_waits", 2);
    vm.expect_target_halted(
        Duration::from_millis(200),
        "of the bad kicks: one of them ended the wait",
    )?;
    let w = vm.kick_wait(t)?;
    vm.expect_waited()?;
    out.set("valid_kick_retries", w.retries);
    let r = i128::from(w.retries);
    check_deltas(
        ctx,
        out,
        counters.as_ref(),
        &[
            ("kicks", 6 + 1 + r),
            ("kicks_bad_args", 2),
            ("kicks_self", 1),
            ("kicks_bad_target", 3),
            ("kicks_woken", 1),
            ("kicks_held", r),
            ("waits_bad_args", 2),
            ("waits", 1 + r),
            ("waits_kicked", 1),
            ("waits_at_once", r),
        ],
    )
}

/// `KVM_GET_MP_STATE` and `KVM_SET_MP_STATE` with its result on the
/// target, which the test stops for them.
fn mp_state_round_trip_of_target(vm: &TestVm, what: &str) -> Result<u32> {
    stop_target_quiet(vm, what)?;
    let s = vm.target_mp_state()?;
    vm.set_target_mp_state(s)?;
    vm.resume_target()?;
    Ok(s)
}

/// Stops the target, which must have reported nothing since it started
/// `what` (waiting, spinning).
fn stop_target_quiet(vm: &TestVm, what: &str) -> Result<()> {
    if let Some(ev) = vm.pause_target()?.first() {
        bail!("target vCPU: {} {what}, before it was stopped", ev.name());
    }
    Ok(())
}

/// A value no lock wait returns, for RAX.
const RAX_MARKER: u64 = 0x1234_5678;

/// Stops the target in a halted lock wait, enabled and primed.
fn target_stopped_in_wait(ctx: &Ctx) -> Result<(TestVm, u32)> {
    let vm = ctx.vm()?;
    enable(&vm, [abi::KVM_PVLOCK_KICK_ENABLE, 0, 0, 0])?;
    vm.prime_target()?;
    let t = vm.token();
    vm.target_round(false, Rest::wait(t))?;
    vm.expect_target_halted(ctx.settings.stale_wait, "of its wait, before any kick")?;
    stop_target_quiet(&vm, "in its wait")?;
    Ok((vm, t))
}

/// Case: restoring registers, then the MP state, keeps the registers.
fn restore_keeps_rax(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let (vm, _) = target_stopped_in_wait(ctx)?;
    let s = vm.target_mp_state()?;
    out.set("mp_state_in_wait", mp_state_name(s));
    // A snapshot's RAX, restored before the MP state (QEMU's order).
    vm.set_target_rax(RAX_MARKER)?;
    vm.set_target_mp_state(s)?;
    vm.resume_target()?;
    let (_, ret) = vm.expect_waited_within(vm.timeout).context(
        "after KVM_SET_REGS and KVM_SET_MP_STATE the target did not go on from its wait",
    )?;
    out.set("rax_after_restore", format!("{:#x}", ret as u32));
    ensure!(
        ret == RAX_MARKER as i64,
        "the target resumed with RAX {} instead of the restored {RAX_MARKER:#x}: \
         KVM_SET_MP_STATE overwrote a register the VMM had restored",
        describe(ret)
    );
    Ok(())
}

/// Case: no lock wait outlives `KVM_RUN`.
fn no_wait_outside_run(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let (vm, t) = target_stopped_in_wait(ctx)?;
    let s = vm.target_mp_state()?;
    let rax = vm.target_rax()?;
    out.set("mp_state_stopped", mp_state_name(s));
    out.set("rax_stopped", format!("{rax:#x}"));
    // The kicker runs while the VMM holds the target, as during a save.
    let kick = vm.kick(0, 1, t)?.ret();
    out.set("kick_while_stopped", describe(kick));
    ensure!(
        kick == abi::KVM_PVLOCK_KICK_HELD,
        "a kick of the stopped target returned {} instead of HELD: it found a wait that \
         the state the VMM saves (MP state {}, RAX {rax:#x}) does not have, so a restored \
         guest counts a lost kick",
        describe(kick),
        mp_state_name(s)
    );
    ensure!(
        s == KVM_MP_STATE_RUNNABLE && rax == abi::KVM_PVLOCK_WAIT_ENDED as u64,
        "the stopped target's saved state is MP state {} with RAX {rax:#x}, not RUNNABLE \
         with KVM_PVLOCK_WAIT_ENDED (the wait's result)",
        mp_state_name(s)
    );
    vm.resume_target()?;
    vm.expect_returned(abi::KVM_PVLOCK_WAIT_ENDED)
        .context("the target, resumed, did not go on from its ended wait")?;
    // The held kick is below the next wait's token: it halts until its own.
    let t = vm.token();
    vm.target_round(false, Rest::wait(t))?;
    vm.kick_wait(t)?;
    vm.expect_waited()?;
    Ok(())
}

/// Case: saving and restoring the MP state of a vCPU in or near a wait.
fn mp_state_round_trip(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let stale = ctx.settings.stale_wait;
    let vm = ctx.vm()?;
    enable(&vm, [abi::KVM_PVLOCK_KICK_ENABLE, 0, 0, 0])?;
    // The KVM_SET_MP_STATE(RUNNABLE) that made the target runnable armed
    // a kick for its first wait.
    let armed = vm.prime_target()?;
    out.set("first_wait_at_once", if armed { "yes" } else { "no" });
    ensure!(
        armed,
        "the target's first lock wait halted: the KVM_SET_MP_STATE that made it runnable did \
         not arm a kick for it"
    );

    // A kick held for the target survives the round trip.
    let counters = ctx.debugfs.try_counters();
    let t = vm.token();
    vm.target_round(true, Rest::wait(t))?;
    expect_ret(
        "kick of the spinning target",
        vm.kick(0, 1, t)?.ret(),
        abi::KVM_PVLOCK_KICK_HELD,
    )?;
    let s = mp_state_round_trip_of_target(&vm, "while spinning")?;
    ensure!(
        s == KVM_MP_STATE_RUNNABLE,
        "KVM_GET_MP_STATE of the spinning target returned {s} ({})",
        mp_state_name(s)
    );
    vm.target_stop_spinning()?;
    vm.expect_waited()
        .context("after GET/SET_MP_STATE, the wait whose kick was held did not return at once")?;
    out.set("held_kick_kept", "yes");
    check_deltas(
        ctx,
        out,
        counters.as_ref(),
        &[
            ("kicks_held", 1),
            ("waits", 1),
            ("waits_at_once", 1),
            ("waits_kicked", 0),
            ("waits_other", 0),
        ],
    )?;

    // A vCPU in a lock wait reads as RUNNABLE, and restoring that ends
    // the wait: the guest looks at its lock again.
    let counters = ctx.debugfs.try_counters();
    let t = vm.token();
    vm.target_round(false, Rest::wait(t))?;
    vm.expect_target_halted(stale, "of its wait, before any kick or round trip")?;
    let s = mp_state_round_trip_of_target(&vm, "in its wait")?;
    out.set("mp_state_in_wait", mp_state_name(s));
    ensure!(
        s == KVM_MP_STATE_RUNNABLE,
        "KVM_GET_MP_STATE of the target in a lock wait returned {s} ({}) instead of RUNNABLE",
        mp_state_name(s)
    );
    vm.expect_returned(abi::KVM_PVLOCK_WAIT_ENDED).context(
        "after KVM_SET_MP_STATE(RUNNABLE), the target did not leave its lock wait, as not kicked",
    )?;
    out.set("wait_ended_by_set_mp_state", "yes");
    if let (Some(before), Some(after)) = (&counters, ctx.debugfs.try_counters()) {
        let d = |name| after.delta(before, name);
        ensure!(
            d("waits") == 1 && d("waits_at_once") == 0,
            "debugfs: waits grew by {}, waits_at_once by {} instead of 1 and 0 (the wait \
             must have halted before the round trip)",
            d("waits"),
            d("waits_at_once")
        );
        ensure!(
            d("waits_kicked") + d("waits_other") == 1 && d("kicks") == 0,
            "debugfs: waits_kicked grew by {}, waits_other by {}, kicks by {} (one wait ended, \
             no kick)",
            d("waits_kicked"),
            d("waits_other"),
            d("kicks")
        );
        out.set(
            "restored_wait_counted_as",
            if d("waits_kicked") == 1 {
                "waits_kicked"
            } else {
                "waits_other"
            },
        );
        out.bump("counters_checked", 5);
    }

    // The wait ended when the target left KVM_RUN, so KVM_SET_MP_STATE
    // armed a kick for the next wait (a restored vCPU may be on its way
    // into a wait whose kick its source held): that one ends at once, and
    // no other.
    let t = vm.token();
    vm.target_round(false, Rest::wait(t))?;
    vm.expect_returned(abi::KVM_PVLOCK_WAIT_ENDED).context(
        "the wait after KVM_SET_MP_STATE did not end at once (the restore arms a kick for the \
         next wait)",
    )?;
    let counters = ctx.debugfs.try_counters();
    let t = vm.token();
    vm.target_round(false, Rest::wait(t))?;
    vm.expect_target_halted(
        stale,
        "of the wait after that: KVM_SET_MP_STATE ended two waits (a restored vCPU leaves a \
         wait at most once without a kick)",
    )?;
    let w = vm.kick_wait(t)?;
    vm.expect_waited()?;
    out.set("next_wait_halted", "yes");
    check_deltas(ctx, out, counters.as_ref(), &kicked_waits(1, w.retries))
}

/// Case: lock waits with HLT exits disabled.
fn hlt_in_guest(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let hlt = KVM_X86_DISABLE_EXITS_HLT;
    let allowed = ctx
        .kvm
        .check_extension_raw(libc::c_ulong::from(KVM_CAP_X86_DISABLE_EXITS));
    out.set("disable_exits", format!("{allowed:#x}"));
    if allowed <= 0 || allowed as u32 & hlt == 0 {
        return Err(Skip(format!(
            "KVM_CHECK_EXTENSION(KVM_CAP_X86_DISABLE_EXITS) = {allowed:#x}: HLT exits cannot be \
             disabled on this host"
        ))
        .into());
    }
    let vm = ctx.vm_with(VmConfig {
        disable_exits: hlt,
        ..ctx.config(false, false)
    })?;
    enable(&vm, [abi::KVM_PVLOCK_KICK_ENABLE, 0, 0, 0])?;
    vm.prime_target()?;
    let counters = ctx.debugfs.try_counters();
    // The wait halts although HLT would not exit...
    let t = vm.token();
    vm.target_round(false, Rest::wait(t))?;
    vm.expect_target_halted(
        ctx.settings.stale_wait,
        "of its lock wait: with HLT exits disabled, the wait did not halt",
    )?;
    let mut retries = vm.kick_wait(t)?.retries;
    vm.expect_waited()?;
    // ...and its kick ends it, every time.
    let rounds = ctx.settings.kicks.clamp(1, 50);
    for i in 1..rounds {
        retries += wait_and_kick(&vm).with_context(|| format!("round {i}"))?;
    }
    out.set("kicks", rounds);
    out.set("retries", retries);
    check_deltas(ctx, out, counters.as_ref(), &kicked_waits(rounds, retries))
}

/// Case: without the capability (and force N), -KVM_ENOSYS.
fn no_cap_enosys(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    with_force(ctx, out, false, |_, out| {
        let loaded = ctx.params.module_loaded();
        let counters = if loaded {
            ctx.debugfs.try_counters()
        } else {
            None
        };
        let vm = ctx.kick_vm(0)?;
        let t = vm.token();
        let kick = vm.kick(0, 1, t)?;
        let p0 = vm.hypercall(abi::KVM_HC_PVLOCK_GET_PARAM, [0, 0, 0, 0])?;
        let p1 = vm.hypercall(abi::KVM_HC_PVLOCK_GET_PARAM, [1, 0, 0, 0])?;
        for (what, c) in [("KICK", kick), ("GET_PARAM(0)", p0), ("GET_PARAM(1)", p1)] {
            expect_enosys(what, c.eax)?;
        }
        out.set("kick_eax", format!("{:#x}", kick.eax));
        wait_returns(&vm, "WAIT", Rest::wait(t), -abi::KVM_ENOSYS)?;
        // A kick that returns -KVM_ENOSYS ends no HLT either.
        vm.target_round(false, Rest::Hlt)?;
        std::thread::sleep(Duration::from_millis(20));
        expect_enosys("KICK of the target in HLT", vm.kick(0, 1, vm.token())?.eax)?;
        vm.expect_target_halted(
            Duration::from_millis(100),
            "of a kick that returned -KVM_ENOSYS",
        )?;
        if loaded {
            check_deltas(
                ctx,
                out,
                counters.as_ref(),
                &[("hypercalls_disabled", 5), ("kicks", 0), ("waits", 0)],
            )?;
        }
        Ok(())
    })
}

/// Case: a storm of kicks to a running vCPU, all held.
fn kick_storm(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let n = ctx.settings.storm;
    let flags = abi::KVM_PVLOCK_KICK_ENABLE | abi::KVM_PVLOCK_KICK_YIELD;
    let vm = ctx.kick_vm(flags)?;
    let before = ctx
        .debugfs
        .counters()
        .context("kick_storm checks host_kvm's debugfs counters")?;
    // The storm's kicks carry token t, the target's next wait t + 1.
    let t = vm.token();
    let wait = vm.token();
    vm.target_round(true, Rest::wait(wait))?;
    let held = abi::KVM_PVLOCK_KICK_HELD as u32;
    let l = vm.hypercall_loop(
        abi::KVM_HC_PVLOCK_KICK,
        [0, 1, t, 0],
        n,
        held,
        ctx.settings.storm_timeout,
    )?;
    let after = ctx.debugfs.counters()?;
    let secs = l.at.duration_since(l.started).as_secs_f64();
    let done = n - l.left;
    ensure!(
        l.left == 0 && l.eax == held,
        "kick {} of {n} to the spinning target returned {}",
        done,
        describe(stats::decode(l.eax))
    );
    out.set("kicks", n);
    out.set("storm_secs", format!("{secs:.3}"));
    out.set(
        "kicks_per_s",
        format!("{:.0}", f64::from(n) / secs.max(1e-9)),
    );
    out.set("yields", after.delta(&before, "yields"));
    out.set("yields_done", after.delta(&before, "yields_done"));
    for name in ["kicks", "kicks_held"] {
        let d = after.delta(&before, name);
        ensure!(
            d == i128::from(n),
            "debugfs {name} grew by {d} instead of {n} (other KVM users on this host?)"
        );
    }
    for name in ["kicks_woken", "waits"] {
        let d = after.delta(&before, name);
        ensure!(d == 0, "debugfs {name} grew by {d} during the storm");
    }

    // The host is still healthy: the target's wait (a larger token than
    // the storm's) halts, and its kick ends it.
    vm.target_stop_spinning()?;
    vm.expect_target_halted(
        Duration::from_millis(100),
        "of its wait: the storm's held kicks (an older token) ended it",
    )?;
    let w = vm.kick_wait(wait)?;
    vm.expect_waited()?;
    out.set("final_kick_retries", w.retries);
    Ok(())
}

/// Absence case: no capability, no CPUID bit.
fn absent_cap_and_cpuid(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let sys = ctx.check_extension();
    out.set("check_extension", sys);
    ensure!(
        sys == 0,
        "KVM_CHECK_EXTENSION(0x7076) on /dev/kvm returned {sys} instead of 0"
    );
    let features = ctx.supported_features()?;
    out.set("supported_features", format!("{features:#x}"));
    ensure!(
        !pvlock_bit(features),
        "KVM_GET_SUPPORTED_CPUID 0x40000001 eax {features:#x} has bit 23"
    );
    let vm = ctx.vm()?;
    let on_vm = vm.check_pvlock();
    ensure!(
        on_vm == 0,
        "KVM_CHECK_EXTENSION(0x7076) on the VM returned {on_vm} instead of 0"
    );
    let eax = vm.guest_cpuid_eax(KVM_CPUID_FEATURES)?;
    out.set("guest_features", format!("{eax:#x}"));
    ensure!(!pvlock_bit(eax), "the guest sees bit 23 ({eax:#x})");
    Ok(())
}

/// Absence case: the capability cannot be enabled, and the hypercalls
/// fail even where the VMM set the bit.
fn absent_enable_cap(ctx: &Ctx, _out: &mut Outcome) -> Result<()> {
    let vm = ctx.vm_with(ctx.config(true, false))?;
    for args in [
        [abi::KVM_PVLOCK_KICK_ENABLE, 0, 0, 0],
        [abi::KVM_PVLOCK_KICK_VALID_FLAGS, 1234, 0, 0],
    ] {
        match vm.enable_pvlock(args) {
            Err(libc::EINVAL) => {}
            Err(e) => bail!(
                "ENABLE_CAP {args:?} failed with {} instead of EINVAL",
                std::io::Error::from_raw_os_error(e)
            ),
            Ok(()) => bail!("ENABLE_CAP {args:?} succeeded without host_kvm"),
        }
    }
    expect_ret(
        "GET_PARAM(0) after the refused ENABLE_CAP",
        vm.get_param(0)?,
        -abi::KVM_ENOSYS,
    )?;
    let t = vm.token();
    expect_enosys("KICK without host_kvm", vm.kick(0, 1, t)?.eax)?;
    wait_returns(
        &vm,
        "WAIT without host_kvm",
        Rest::wait(t),
        -abi::KVM_ENOSYS,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_simple() {
        for (i, c) in CASES.iter().enumerate() {
            assert!(c
                .name
                .chars()
                .all(|ch| ch.is_ascii_lowercase() || ch == '_'));
            assert!(CASES[..i].iter().all(|o| o.name != c.name), "{}", c.name);
        }
        assert!(find("kick_storm").is_some());
        assert!(find("nope").is_none());
    }

    #[test]
    fn every_mode_has_cases() {
        for needs in [Needs::Loaded, Needs::Absent] {
            assert!(CASES
                .iter()
                .any(|c| c.needs == needs || c.needs == Needs::Any));
        }
        assert_eq!(find("no_cap_enosys").unwrap().needs, Needs::Any);
    }
}

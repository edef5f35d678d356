// SPDX-License-Identifier: GPL-2.0

//! The test cases. Each creates its own VM(s), asserts, and records what it
//! measured in an [`Outcome`]; an `Err` is the reason it failed.

use std::fmt::Display;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use kvm_bindings::{CpuId, KVM_MAX_CPUID_ENTRIES};
use kvm_ioctls::Kvm;

use crate::abi;
use crate::host::{self, Counters, Debugfs, ForceGuard, Params};
use crate::stats::{self, describe, summarize, us};
use crate::vm::{self, TestVm, Vcpu0, KVM_CPUID_FEATURES};

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

/// Every case, in the order they run.
pub const CASES: &[Case] = &[
    Case {
        name: "cap_and_cpuid",
        needs: Needs::Loaded,
        about: "CHECK_EXTENSION == 3, supported CPUID bit 23, guest sees bit 23 only once enabled",
        run: cap_and_cpuid,
    },
    Case {
        name: "enable_cap_validation",
        needs: Needs::Loaded,
        about: "ENABLE_CAP refuses bad arguments; GET_PARAM returns the threshold and version",
        run: enable_cap_validation,
    },
    Case {
        name: "kick_wakes_halted",
        needs: Needs::Loaded,
        about: "a kick wakes a halted vCPU (WOKEN), N times; kick-to-run latency",
        run: kick_wakes_halted,
    },
    Case {
        name: "kick_not_halted_no_stale",
        needs: Needs::Loaded,
        about: "a kick to a running vCPU returns NOT_HALTED and leaves no wake-up behind",
        run: kick_not_halted_no_stale,
    },
    Case {
        name: "kick_bad_targets",
        needs: Needs::Loaded,
        about: "kicks to self, to no vCPU, to 0xffffffff and with flags return -22 and wake nobody",
        run: kick_bad_targets,
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
        about: "N kicks to a spinning vCPU from inside the guest; debugfs counters grow by N",
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
        about: "without host_kvm: ENABLE_CAP(KVM_CAP_PVLOCK_KICK) fails with EINVAL",
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
    /// The CPUID given to the guests, see [`vm::guest_cpuid`].
    pub guest_cpuid: CpuId,
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
        let guest_cpuid = vm::guest_cpuid(&supported)?;
        let vmx = vm::vendor_uses_vmcall(&vm::vendor(&supported));
        Ok(Ctx {
            kvm,
            supported,
            guest_cpuid,
            vmx,
            debugfs,
            params,
            settings,
        })
    }

    fn vm(&self, vcpu0: Vcpu0) -> Result<TestVm> {
        TestVm::new(
            &self.kvm,
            &self.guest_cpuid,
            self.vmx,
            vcpu0,
            self.settings.timeout,
        )
    }

    /// A VM with the kicker, pvlock enabled with `flags` (none if 0).
    fn kick_vm(&self, flags: u64) -> Result<TestVm> {
        let vm = self.vm(Vcpu0::Kicker)?;
        if flags != 0 {
            vm.enable_pvlock([flags, 0, 0, 0])
                .map_err(|e| errno_error("KVM_ENABLE_CAP(KVM_CAP_PVLOCK_KICK)", e))?;
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

    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }
}

fn errno_error(what: &str, errno: i32) -> anyhow::Error {
    anyhow::anyhow!(
        "{what} failed: {}",
        std::io::Error::from_raw_os_error(errno)
    )
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
    out.set("counters_checked", want.len());
    Ok(())
}

fn pvlock_bit(eax: u32) -> bool {
    eax & (1 << abi::KVM_FEATURE_PVLOCK_KICK) != 0
}

/// Case 1.
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
    // the bit appear. force must be N for "before" to mean anything.
    let (force, changed) = ForceGuard::set(&ctx.params, false)?;
    if changed {
        out.note("host_kvm force was Y: set to N for the case");
    }
    let result = (|| -> Result<()> {
        let vm = ctx.vm(Vcpu0::CpuidProbe)?;
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
            "the guest sees bit 23 ({before:#x}) although the VMM did not set it, \
             did not enable the capability and force is N"
        );

        // host_kvm's force shows the bit to every VM.
        force.change(true)?;
        let forced = vm.guest_cpuid_eax(KVM_CPUID_FEATURES)?;
        force.change(false)?;
        out.set("guest_forced", format!("{forced:#x}"));
        ensure!(
            pvlock_bit(forced),
            "with force=Y the guest does not see bit 23 ({forced:#x})"
        );
        let unforced = vm.guest_cpuid_eax(KVM_CPUID_FEATURES)?;
        ensure!(
            !pvlock_bit(unforced),
            "with force back to N the guest still sees bit 23 ({unforced:#x})"
        );

        vm.enable_pvlock([abi::KVM_PVLOCK_KICK_ENABLE, 0, 0, 0])
            .map_err(|e| errno_error("KVM_ENABLE_CAP(ENABLE)", e))?;
        let after = vm.guest_cpuid_eax(KVM_CPUID_FEATURES)?;
        out.set("guest_after", format!("{after:#x}"));
        ensure!(
            pvlock_bit(after),
            "after KVM_ENABLE_CAP(ENABLE) the guest does not see bit 23 ({after:#x})"
        );
        ensure!(
            after & !(1 << abi::KVM_FEATURE_PVLOCK_KICK) == before,
            "enabling changed other bits: {before:#x} -> {after:#x}"
        );
        Ok(())
    })();
    let restored = force.restore();
    result.and(restored)
}

/// Case 2.
fn enable_cap_validation(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let (force, changed) = ForceGuard::set(&ctx.params, false)?;
    if changed {
        out.note("host_kvm force was Y: set to N for the case");
    }
    let result = (|| -> Result<()> {
        let counters = ctx.debugfs.try_counters();
        let vm = ctx.kick_vm(0)?;
        let enable = abi::KVM_PVLOCK_KICK_ENABLE;
        let max = 1u64 << 26;
        let bad: [(&str, [u64; 4]); 5] = [
            ("unknown flag 1<<2", [1 << 2, 0, 0, 0]),
            (
                "YIELD without ENABLE",
                [abi::KVM_PVLOCK_KICK_YIELD, 0, 0, 0],
            ),
            ("threshold (1<<26)+1", [enable, max + 1, 0, 0]),
            ("args[2]=1", [enable, 0, 1, 0]),
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
        // A refused ENABLE_CAP changed nothing.
        expect_ret(
            "GET_PARAM(0) after refused ENABLE_CAPs",
            vm.get_param(0)?,
            -abi::KVM_ENOSYS,
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

        // 6 refused, 4 accepted; GET_PARAM: 2 disabled, 6 answered, 1 bad.
        check_deltas(
            ctx,
            out,
            counters.as_ref(),
            &[
                ("enable_cap", 10),
                ("enable_cap_bad", 6),
                ("get_param", 6),
                ("get_param_bad", 1),
                ("hypercalls_disabled", 2),
            ],
        )
    })();
    let restored = force.restore();
    result.and(restored)
}

/// Case 3.
fn kick_wakes_halted(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let n = ctx.settings.kicks;
    let counters = ctx.debugfs.try_counters();
    let histo = ctx.debugfs.kick_latency().ok();
    let vm = ctx.kick_vm(abi::KVM_PVLOCK_KICK_ENABLE)?;
    let mut lat = Vec::with_capacity(n as usize);
    let mut retries = 0u32;
    for i in 0..n {
        vm.target_round(false)
            .with_context(|| format!("round {i}"))?;
        let w = vm.kick_until_woken().with_context(|| format!("kick {i}"))?;
        retries += w.retries;
        let woke = vm.expect_woke().with_context(|| format!("kick {i}"))?;
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
    let n = i128::from(n);
    check_deltas(
        ctx,
        out,
        counters.as_ref(),
        &[
            ("kicks", n + i128::from(retries)),
            ("kicks_woken", n),
            ("kicks_not_halted", i128::from(retries)),
            ("kicks_done", n),
        ],
    )
}

/// Case 4.
fn kick_not_halted_no_stale(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let stale_wait = ctx.settings.stale_wait;
    let vm = ctx.kick_vm(abi::KVM_PVLOCK_KICK_ENABLE)?;

    // pvlock: a kick to a running target returns NOT_HALTED...
    vm.target_round(true)?;
    let r = vm.kick(0, 1)?.ret();
    expect_ret(
        "kick of the spinning target",
        r,
        abi::KVM_PVLOCK_KICK_NOT_HALTED,
    )?;
    // ...and its next HLT halts.
    vm.target_stop_spinning()?;
    vm.expect_target_halted(
        stale_wait,
        "of halting: a kick that returned NOT_HALTED woke a later HLT",
    )?;
    out.set("stayed_halted_ms", stale_wait.as_millis());
    let w = vm.kick_until_woken()?;
    vm.expect_woke()?;
    out.set("second_kick_retries", w.retries);

    // Upstream's KVM_HC_KICK_CPU to a running target sets pv_unhalted,
    // which KVM keeps: the target's next HLT returns at once.
    vm.target_round(true)?;
    let r = vm.hypercall(abi::KVM_HC_KICK_CPU, [0, 1, 0, 0])?.ret();
    out.set("upstream_kick_ret", r);
    if r != 0 {
        out.note(format!(
            "upstream KVM_HC_KICK_CPU returned {} (expected 0): contrast not observed",
            describe(r)
        ));
        out.set("upstream_stale_wakeup", "unknown");
        return Ok(());
    }
    let halting = vm.target_stop_spinning()?;
    match vm.target_event(stale_wait)? {
        Some(ev) if ev.value == crate::guest::EV_WOKE => {
            out.set("upstream_stale_wakeup", "yes");
            out.set(
                "upstream_wake_after_us",
                us(ev.at.saturating_duration_since(halting.at).as_nanos() as i64),
            );
        }
        Some(ev) => bail!("target vCPU: {} after HALTING", ev.name()),
        None => {
            out.set("upstream_stale_wakeup", "no");
            out.note(format!(
                "upstream KVM_HC_KICK_CPU to a running vCPU left no wake-up: its next HLT \
                 stayed halted for {} ms (documented: it returns at once)",
                stale_wait.as_millis()
            ));
            vm.kick_until_woken()?;
            vm.expect_woke()?;
        }
    }
    Ok(())
}

/// Case 5.
fn kick_bad_targets(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let counters = ctx.debugfs.try_counters();
    let vm = ctx.kick_vm(abi::KVM_PVLOCK_KICK_ENABLE)?;
    vm.target_round(false)?;
    // Let it reach its HLT.
    std::thread::sleep(Duration::from_millis(50));
    let bad: [(&str, u32, u32); 4] = [
        ("self (APIC ID 0)", 0, 0),
        ("APIC ID 7 (no such vCPU)", 0, 7),
        ("APIC ID 0xffffffff", 0, 0xffff_ffff),
        ("flags=1 to APIC ID 1", 1, 1),
    ];
    for (what, flags, apic) in bad {
        let c = vm.kick(flags, apic)?;
        ensure!(
            c.eax == 0xffff_ffea,
            "kick to {what} returned {} (eax {:#x}) instead of -22 (0xffffffea)",
            describe(c.ret()),
            c.eax
        );
    }
    out.set("bad_kicks", bad.len());
    let quiet = Duration::from_millis(200);
    vm.expect_target_halted(quiet, "of the bad kicks: one of them woke the target")?;
    let w = vm.kick_until_woken()?;
    vm.expect_woke()?;
    out.set("valid_kick_retries", w.retries);
    check_deltas(
        ctx,
        out,
        counters.as_ref(),
        &[
            ("kicks", 5 + i128::from(w.retries)),
            ("kicks_self", 1),
            ("kicks_bad_target", 2),
            ("kicks_bad_flags", 1),
            ("kicks_woken", 1),
        ],
    )
}

/// Case 6.
fn no_cap_enosys(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let (force, changed) = ForceGuard::set(&ctx.params, false)?;
    if changed {
        out.note("host_kvm force was Y: set to N for the case");
    }
    let result = (|| -> Result<()> {
        let loaded = ctx.params.module_loaded();
        let counters = if loaded {
            ctx.debugfs.try_counters()
        } else {
            None
        };
        let vm = ctx.kick_vm(0)?;
        vm.target_round(false)?;
        std::thread::sleep(Duration::from_millis(20));
        let kick = vm.kick(0, 1)?;
        let p0 = vm.hypercall(abi::KVM_HC_PVLOCK_GET_PARAM, [0, 0, 0, 0])?;
        let p1 = vm.hypercall(abi::KVM_HC_PVLOCK_GET_PARAM, [1, 0, 0, 0])?;
        for (what, c) in [("KICK", kick), ("GET_PARAM(0)", p0), ("GET_PARAM(1)", p1)] {
            ensure!(
                c.eax == 0xffff_fc18,
                "{what} returned {} (eax {:#x}) instead of -1000 (0xfffffc18)",
                describe(c.ret()),
                c.eax
            );
        }
        out.set("kick_eax", format!("{:#x}", kick.eax));
        vm.expect_target_halted(
            Duration::from_millis(100),
            "of a kick that returned -KVM_ENOSYS",
        )?;
        if loaded {
            check_deltas(
                ctx,
                out,
                counters.as_ref(),
                &[("hypercalls_disabled", 3), ("kicks", 0)],
            )?;
        }
        Ok(())
    })();
    let restored = force.restore();
    result.and(restored)
}

/// Case 7.
fn kick_storm(ctx: &Ctx, out: &mut Outcome) -> Result<()> {
    let n = ctx.settings.storm;
    let before = ctx
        .debugfs
        .counters()
        .context("kick_storm checks host_kvm's debugfs counters")?;
    let flags = abi::KVM_PVLOCK_KICK_ENABLE | abi::KVM_PVLOCK_KICK_YIELD;
    let vm = ctx.kick_vm(flags)?;
    vm.target_round(true)?;
    let l = vm.hypercall_loop(
        abi::KVM_HC_PVLOCK_KICK,
        [0, 1, 0, 0],
        n,
        abi::KVM_PVLOCK_KICK_NOT_HALTED as u32,
        ctx.settings.storm_timeout,
    )?;
    let after = ctx.debugfs.counters()?;
    let secs = l.at.duration_since(l.started).as_secs_f64();
    let done = n - l.left;
    ensure!(
        l.left == 0 && stats::decode(l.eax) == abi::KVM_PVLOCK_KICK_NOT_HALTED,
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
    for name in ["kicks", "kicks_not_halted"] {
        let d = after.delta(&before, name);
        ensure!(
            d == i128::from(n),
            "debugfs {name} grew by {d} instead of {n} (other KVM users on this host?)"
        );
    }
    ensure!(
        after.delta(&before, "kicks_woken") == 0,
        "debugfs kicks_woken grew during the storm"
    );

    // The host is still healthy: the target halts and one kick wakes it.
    vm.target_stop_spinning()?;
    let w = vm.kick_until_woken()?;
    vm.expect_woke()?;
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
    let vm = ctx.vm(Vcpu0::CpuidProbe)?;
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

/// Absence case: the capability cannot be enabled.
fn absent_enable_cap(ctx: &Ctx, _out: &mut Outcome) -> Result<()> {
    let vm = ctx.kick_vm(0)?;
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

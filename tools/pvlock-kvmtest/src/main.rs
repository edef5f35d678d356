// SPDX-License-Identifier: GPL-2.0

//! `pvlock-kvmtest`: a KVM selftest for the host half of pvlock.
//!
//! In the style of the kernel's `tools/testing/selftests/kvm/x86/`
//! `kvm_pv_test.c` and `xapic_ipi_test.c`: each case builds a VM with
//! tiny real-mode guests ([`guest`]) and asserts what they and KVM report.
//! It talks to KVM through rust-vmm's `kvm-ioctls`, runs as root inside the
//! L1 test VM (an AMD CPU with SVM under QEMU TCG; `vmmcall`, or `vmcall`
//! when KVM reports an Intel vendor) whose kernel has the pvlock patches,
//! with or without the `host_kvm` module loaded, and links statically.
//!
//! Every VM ([`vm::TestVm`]) has an in-kernel irqchip and two vCPUs on their
//! own threads: vCPU 0, the *kicker*, makes the hypercalls the test writes
//! into guest memory (or runs CPUID), and vCPU 1, the *target*, spins and
//! then makes a lock wait (`KVM_HC_PVLOCK_WAIT` with a token the test
//! chooses) or a plain `hlt`, with interrupts disabled, so that only a
//! kick (or the VMM) can end it. The ABI numbers come from the kernel's
//! `pvlock/abi.rs`, as `pvlock_common::abi`.
//!
//! The cases (`--list`), each with fresh VMs:
//!
//! - `cap_and_cpuid`: `KVM_CHECK_EXTENSION(KVM_CAP_PVLOCK_KICK)` is 3
//!   (ENABLE|YIELD) on `/dev/kvm` and on a VM; `KVM_GET_SUPPORTED_CPUID`
//!   has bit 23 in leaf 0x40000001 EAX; a guest whose VMM set the KVM
//!   leaves without bit 23 and never configured the capability does not
//!   see it, sees it (and `GET_PARAM(VERSION)` returns 2) while host_kvm's
//!   `force` is Y, and no longer once the VMM enabled the capability
//!   (force or not: the VMM owns the CPUID). A VMM that disabled it
//!   (`KVM_ENABLE_CAP` args\[0\] = 0): with force=Y its guest sees no bit
//!   and KICK, WAIT and GET_PARAM return -1000.
//! - `cpuid_from_vmm`: with force N, a VMM that sets bit 23 with
//!   `KVM_SET_CPUID2`: its guest sees it, but the hypercalls return -1000
//!   until `KVM_ENABLE_CAP(ENABLE, 77)`; then GET_PARAM returns 2 and 77
//!   and a kick ends a lock wait.
//! - `enforce_pv_cpuid`: with `KVM_CAP_ENFORCE_PV_FEATURE_CPUID` on the
//!   vCPUs and the capability enabled but bit 23 not in the CPUID, KICK,
//!   WAIT and GET_PARAM return -1000 and host_kvm sees none of them; force
//!   shows no bit to such a VM; with the bit, the hypercalls work. SKIP if
//!   KVM lacks the capability.
//! - `enable_cap_validation`: `KVM_ENABLE_CAP` refuses (EINVAL) an unknown
//!   flag, YIELD without ENABLE, a threshold above 1<<26 and nonzero
//!   args\[2\] or args\[3\], and changes nothing then (the VM still counts
//!   as never configured: force applies to it); it accepts ENABLE with
//!   threshold 1<<26 and 1234, after which the guest's
//!   `KVM_HC_PVLOCK_GET_PARAM` returns 1234 (threshold), 2 (version) and
//!   -22 (parameter 7); args\[0\] = 0 disables (-1000 again).
//! - `wait_kick_wakes`: the target waits with token T, the kicker's
//!   `KVM_HC_PVLOCK_KICK` with T returns 0 (WOKEN) and the wait returns 0;
//!   `--kicks` times, with the kick-to-run latency (from the kicker's exit
//!   after the hypercall to the target's exit after its wait, host clock;
//!   negative when the target gets back to userspace first): median, p90,
//!   p99, max; and the median bucket of host_kvm's own kick-to-run
//!   histogram over the case (`host_lat_median_bucket_us`, the bucket's
//!   lower bound). A kick that comes before the wait (HELD) makes the wait
//!   return at once, and the round starts over (`retries`).
//! - `kick_before_wait_is_held`: a kick with token T to the spinning
//!   target returns 1 (HELD), and the target's wait with T then returns at
//!   once (`waits_at_once`); a kick with T+5 is held for the wait T too.
//!   The next wait halts until its own kick.
//! - `stale_kick_no_wakeup`: a kick held for token T does not end the
//!   wait T' > T (it stays halted for `--stale-wait-ms`), the kick with T'
//!   does; a second kick for that finished wait ends no later wait; pvlock
//!   kicks (the next token, 0xffffffff) to a target in a plain `hlt` return
//!   HELD and do not end it (upstream's `KVM_HC_KICK_CPU` then does).
//! - `wait_bound`: with host_kvm's `max_wait_ms` at 100 (set for the case
//!   and restored), a wait that no kick ends returns 1 (BOUND) after at
//!   least 100 ms and its kick, after that, is held; with `max_wait_ms` 0 a
//!   wait stays halted (100 ms + `--stale-wait-ms`) until its kick.
//! - `kick_bad_args`: waits with flags=1 or token 0 return -22 at once;
//!   kicks with flags=1, token 0, to the kicker itself, to APIC ID 7 (no
//!   such vCPU), 0xffffffff and 0xff (broadcast IDs) return -22 (0xffffffea
//!   in EAX) and do not end the target's wait; the valid kick then does.
//! - `mp_state_round_trip`: the `KVM_SET_MP_STATE` that made the target
//!   runnable makes its first wait return at once; a kick held for the
//!   spinning target survives `KVM_GET_MP_STATE` + `KVM_SET_MP_STATE` (its
//!   wait returns at once); `KVM_GET_MP_STATE` of the target in a lock wait
//!   is RUNNABLE and setting it ends the wait without a kick; the next
//!   wait halts until its kick (a restored vCPU leaves a wait at most once
//!   without a kick).
//! - `hlt_in_guest`: in a VM with `KVM_CAP_X86_DISABLE_EXITS(HLT)`, a lock
//!   wait still halts (`--stale-wait-ms`) and its kick ends it, up to 50
//!   times. SKIP if KVM does not allow disabling HLT exits.
//! - `no_cap_enosys`: in a VM without `KVM_ENABLE_CAP`, with host_kvm's
//!   `force` N (set for the case and restored), KICK, GET_PARAM and WAIT
//!   return -1000 (0xfffffc18), and such a kick ends no HLT. Runs with
//!   host_kvm loaded or not.
//! - `kick_storm`: `--storm` kicks (1,000,000) from a loop inside the
//!   guest to a spinning target all return 1 (HELD); host_kvm's debugfs
//!   counters `kicks` and `kicks_held` grow by exactly that; then the
//!   target's wait (a later token) still halts and its kick ends it.
//!   Reports kicks per second.
//! - `absent_cap_and_cpuid`, `absent_enable_cap` (`--expect-host-kvm no`):
//!   without host_kvm, `KVM_CHECK_EXTENSION` returns 0, no CPUID bit 23 is
//!   supported or shown to a guest, `KVM_ENABLE_CAP` fails with EINVAL,
//!   and the hypercalls return -1000 even where the VMM set the bit.
//!
//! Where host_kvm's debugfs counters are readable, the cases also check
//! that they grew by exactly what the case did.
//!
//! Output: `PASS name k=v...`, `FAIL name: reason`, `SKIP name: reason`,
//! `NOTE name: text`, and for harnesses `@@KVMTEST case=NAME result=...`
//! lines and a final `@@KVMTEST summary pass=N fail=M skip=K`
//! ([`result_lines`]). Exit status 1 if any case failed.

mod cases;
mod guest;
mod host;
mod kvmstats;
mod result_lines;
mod stats;
mod vm;

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use kvm_ioctls::Kvm;
use pvlock_common::cli::{self, parse_secs};

use cases::{Case, Ctx, Needs, Outcome, Settings, Skip, CASES};
use host::{Debugfs, Params};
use result_lines::Verdict;

const LONG_ABOUT: &str = "\
KVM selftest for the host half of pvlock: the KVM_HC_PVLOCK_WAIT, \
KVM_HC_PVLOCK_KICK and KVM_HC_PVLOCK_GET_PARAM hypercalls, \
KVM_CAP_PVLOCK_KICK and the KVM_FEATURE_PVLOCK_KICK CPUID bit, implemented \
by the host_kvm module on the pvlock-patched kernel.

Each case builds a VM with two real-mode vCPUs: a kicker that makes \
hypercalls and a target that spins, then makes a lock wait with a token or \
a plain HLT, with interrupts disabled. Run \
it as root on the KVM host to test (the L1 VM), with host_kvm loaded \
(--expect-host-kvm yes: every case but the absent_* ones) or not \
(--expect-host-kvm no: the cases that check absence, and no_cap_enosys). \
Without CASE arguments, every case that fits runs; --list shows them.

Cases that need host_kvm's force parameter to be N set it for their \
duration and put the old value back. The debugfs counters of host_kvm are \
checked where readable; kick_storm needs them.";

const AFTER_HELP: &str = "\
Examples:
  pvlock-kvmtest --expect-host-kvm yes          every case, host_kvm loaded
  pvlock-kvmtest --expect-host-kvm no           host_kvm not loaded
  pvlock-kvmtest --list                         the cases
  pvlock-kvmtest wait_kick_wakes --kicks 1000   one case, more kicks
  pvlock-kvmtest kick_storm --storm 100000      a shorter storm
  pvlock-kvmtest --timeout 30 --expect-host-kvm yes   a slow host

Output: PASS/FAIL/SKIP/NOTE lines (SKIP: a case that does not fit \
--expect-host-kvm, or that this KVM cannot run), and @@KVMTEST lines for harnesses:
  @@KVMTEST case=NAME result=PASS|FAIL|SKIP [reason=\"...\"] KEY=VALUE... secs=S
  @@KVMTEST summary pass=N fail=M skip=K

Exit status: 0 if no case failed; 1 if one did, on a setup error or a bad \
command line.";

/// Whether host_kvm is expected to be loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Expect {
    /// Loaded: run every case that needs it.
    Yes,
    /// Not loaded: run the cases that check its absence.
    No,
    /// Whatever /sys/module/host_kvm says.
    Auto,
}

/// KVM selftest for pvlock's host side (host_kvm).
#[derive(Parser, Debug)]
#[command(
    name = "pvlock-kvmtest",
    version,
    long_about = LONG_ABOUT,
    after_help = AFTER_HELP,
    max_term_width = 100,
)]
struct Cli {
    /// Cases to run, in this order (default: every case that fits).
    ///
    /// A named case that does not fit --expect-host-kvm is skipped.
    ///
    /// Example: pvlock-kvmtest cap_and_cpuid kick_bad_args
    #[arg(value_name = "CASE", value_parser = parse_case)]
    cases: Vec<&'static Case>,

    /// List the cases and what they need, then exit.
    ///
    /// Example: pvlock-kvmtest --list
    #[arg(short, long)]
    list: bool,

    /// Whether host_kvm is loaded: yes runs the cases that need it, no
    /// the cases that check its absence; no_cap_enosys runs either way.
    ///
    /// auto decides by the existence of the module's parameter directory
    /// (--params).
    ///
    /// Example: pvlock-kvmtest --expect-host-kvm no
    #[arg(short, long, value_enum, default_value_t = Expect::Auto, value_name = "WHEN")]
    expect_host_kvm: Expect,

    /// wait_kick_wakes: how many kicks to time (hlt_in_guest: at most 50
    /// of them).
    ///
    /// Example: pvlock-kvmtest wait_kick_wakes --kicks 2000
    #[arg(short, long, default_value_t = 200, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    kicks: u32,

    /// kick_storm: how many kicks the guest makes in its loop.
    ///
    /// Example: pvlock-kvmtest kick_storm --storm 10000000
    #[arg(short, long, default_value_t = 1_000_000, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    storm: u32,

    /// How long to wait for each step of a guest before failing.
    ///
    /// Example: pvlock-kvmtest --timeout 30
    #[arg(short, long, default_value = "10", value_name = "SECS", value_parser = parse_secs)]
    timeout: f64,

    /// How long kick_storm's guest loop may take before failing.
    ///
    /// Example: pvlock-kvmtest kick_storm --storm-timeout 1800
    #[arg(long, default_value = "600", value_name = "SECS", value_parser = parse_secs)]
    storm_timeout: f64,

    /// How long a target in a lock wait or HLT must stay halted to show
    /// that a kick not meant for it ended nothing.
    ///
    /// Example: pvlock-kvmtest stale_kick_no_wakeup --stale-wait-ms 1000
    #[arg(long, default_value_t = 300, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(10..=60_000))]
    stale_wait_ms: u64,

    /// host_kvm's debugfs directory.
    ///
    /// Example: pvlock-kvmtest --debugfs /mnt/debug/pvlock_host
    #[arg(long, default_value_os_t = host::default_debugfs(), value_name = "DIR")]
    debugfs: PathBuf,

    /// host_kvm's module parameter directory.
    ///
    /// Example: pvlock-kvmtest --params /sys/module/host_kvm/parameters
    #[arg(long, default_value_os_t = host::default_params(), value_name = "DIR")]
    params: PathBuf,

    /// The KVM device.
    ///
    /// Example: pvlock-kvmtest --device /dev/kvm
    #[arg(long, default_value = "/dev/kvm", value_name = "PATH")]
    device: PathBuf,
}

fn parse_case(s: &str) -> Result<&'static Case, String> {
    cases::find(s).ok_or_else(|| {
        let names: Vec<&str> = CASES.iter().map(|c| c.name).collect();
        format!("no case {s:?}; the cases are: {}", names.join(", "))
    })
}

fn needs_text(n: Needs) -> &'static str {
    match n {
        Needs::Loaded => "host_kvm",
        Needs::Absent => "no host_kvm",
        Needs::Any => "either",
    }
}

/// The cases to run, in order, without repeats.
fn selection(cli: &Cli) -> Vec<&'static Case> {
    if cli.cases.is_empty() {
        return CASES.iter().collect();
    }
    let mut v: Vec<&'static Case> = Vec::new();
    for c in &cli.cases {
        if !v.iter().any(|o| o.name == c.name) {
            v.push(c);
        }
    }
    v
}

/// Why `case` does not run when host_kvm is (not) `loaded`, if it does not.
fn skip_reason(case: &Case, loaded: bool) -> Option<String> {
    match (case.needs, loaded) {
        (Needs::Loaded, false) => Some("needs host_kvm (--expect-host-kvm no)".into()),
        (Needs::Absent, true) => Some("checks host_kvm's absence (--expect-host-kvm yes)".into()),
        _ => None,
    }
}

fn main() -> ExitCode {
    let cli = match cli::parse::<Cli>() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    if cli.list {
        for c in CASES {
            println!("{:<26} [{:<11}] {}", c.name, needs_text(c.needs), c.about);
        }
        return ExitCode::SUCCESS;
    }
    if run(&cli) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Prints a line at once (the console of a VM may be all there is).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn setup(cli: &Cli) -> Result<Ctx> {
    vm::install_signal_handler()?;
    let path = CString::new(cli.device.as_os_str().as_bytes())
        .with_context(|| format!("bad device path {}", cli.device.display()))?;
    let kvm = Kvm::new_with_path(path)
        .with_context(|| format!("cannot open {}", cli.device.display()))?;
    let settings = Settings {
        kicks: cli.kicks,
        storm: cli.storm,
        timeout: Duration::from_secs_f64(cli.timeout),
        storm_timeout: Duration::from_secs_f64(cli.storm_timeout),
        stale_wait: Duration::from_millis(cli.stale_wait_ms),
    };
    Ctx::new(
        kvm,
        Debugfs::new(&cli.debugfs),
        Params::new(&cli.params),
        settings,
    )
}

/// How a case that ran ended: an error is a failure, unless it is a
/// [`Skip`].
fn verdict(r: Result<()>) -> Verdict {
    match r {
        Ok(()) => Verdict::Pass,
        Err(e) => match e.downcast_ref::<Skip>() {
            Some(Skip(why)) => Verdict::Skip(why.clone()),
            None => Verdict::Fail(format!("{e:#}")),
        },
    }
}

/// Runs the selected cases; true if none failed.
fn run(cli: &Cli) -> bool {
    let params = Params::new(&cli.params);
    let present = params.module_loaded();
    let loaded = match cli.expect_host_kvm {
        Expect::Yes => true,
        Expect::No => false,
        Expect::Auto => present,
    };
    let ctx = match setup(cli) {
        Ok(ctx) => ctx,
        Err(e) => {
            let v = Verdict::Fail(format!("{e:#}"));
            let o = Outcome::default();
            for l in result_lines::human("setup", &v, &o, 0.0) {
                say(&l);
            }
            say(&result_lines::machine("setup", &v, &o, 0.0));
            say(&result_lines::summary(0, 1, 0));
            return false;
        }
    };
    let vendor = vm::vendor(&ctx.supported);
    let hypercall = if ctx.vmx { "vmcall" } else { "vmmcall" };
    let module = if present {
        format!(
            "loaded {}",
            params.describe(&[
                "force",
                "yield_to_target",
                "spin_threshold",
                "inject_ignore_kicks",
            ])
        )
    } else {
        "not-loaded".into()
    };
    say(&format!(
        "# pvlock-kvmtest: vendor {vendor}, hypercalls with {hypercall}, host_kvm {module}, \
         running the cases for host_kvm {}",
        if loaded { "loaded" } else { "not loaded" }
    ));
    if present != loaded {
        say(&format!(
            "# warning: --expect-host-kvm says host_kvm is{} loaded, but {} {}",
            if loaded { "" } else { " not" },
            params.dir.display(),
            if present { "exists" } else { "does not exist" }
        ));
    }
    if present && params.read_bool("inject_ignore_kicks").ok().flatten() == Some(true) {
        say(
            "# warning: host_kvm inject_ignore_kicks is Y: kicks are answered but not \
             delivered, the cases that kick a wait will fail",
        );
    }
    say(&format!(
        "@@KVMTEST info vendor={} hypercall={hypercall} host_kvm={} expect={}",
        result_lines::quote(&vendor),
        if present { "loaded" } else { "absent" },
        if loaded { "yes" } else { "no" }
    ));

    let (mut pass, mut fail, mut skip) = (0, 0, 0);
    for case in selection(cli) {
        let mut out = Outcome::default();
        let start = Instant::now();
        let verdict = match skip_reason(case, loaded) {
            Some(why) => Verdict::Skip(why),
            None => match panic::catch_unwind(AssertUnwindSafe(|| (case.run)(&ctx, &mut out))) {
                Ok(r) => verdict(r),
                Err(_) => Verdict::Fail("panicked (see above)".into()),
            },
        };
        let secs = start.elapsed().as_secs_f64();
        match verdict {
            Verdict::Pass => pass += 1,
            Verdict::Fail(_) => fail += 1,
            Verdict::Skip(_) => skip += 1,
        }
        for l in result_lines::human(case.name, &verdict, &out, secs) {
            say(&l);
        }
        say(&result_lines::machine(case.name, &verdict, &out, secs));
    }
    say(&result_lines::summary(pass, fail, skip));
    fail == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_option_has_an_example() {
        cli::assert_every_option_has_an_example::<Cli>();
    }

    #[test]
    fn defaults() {
        let cli = Cli::try_parse_from(["pvlock-kvmtest"]).unwrap();
        assert_eq!(cli.expect_host_kvm, Expect::Auto);
        assert_eq!(cli.kicks, 200);
        assert_eq!(cli.storm, 1_000_000);
        assert_eq!(cli.stale_wait_ms, 300);
        assert_eq!(selection(&cli).len(), CASES.len());
    }

    #[test]
    fn parses_arguments() {
        let cli = Cli::try_parse_from([
            "pvlock-kvmtest",
            "--expect-host-kvm",
            "yes",
            "--kicks",
            "50",
            "--storm",
            "1000",
            "--timeout",
            "2.5",
            "kick_storm",
            "cap_and_cpuid",
            "kick_storm",
        ])
        .unwrap();
        assert_eq!(cli.expect_host_kvm, Expect::Yes);
        assert_eq!(cli.kicks, 50);
        assert_eq!(cli.storm, 1000);
        assert_eq!(cli.timeout, 2.5);
        let names: Vec<&str> = selection(&cli).iter().map(|c| c.name).collect();
        assert_eq!(names, ["kick_storm", "cap_and_cpuid"]);
        let no = Cli::try_parse_from(["pvlock-kvmtest", "--expect-host-kvm", "no"]).unwrap();
        assert_eq!(no.expect_host_kvm, Expect::No);
    }

    #[test]
    fn refuses_bad_arguments() {
        for args in [
            &["pvlock-kvmtest", "no_such_case"][..],
            &["pvlock-kvmtest", "--expect-host-kvm", "maybe"],
            &["pvlock-kvmtest", "--kicks", "0"],
            &["pvlock-kvmtest", "--storm", "0"],
            &["pvlock-kvmtest", "--timeout", "-1"],
            &["pvlock-kvmtest", "--timeout", "soon"],
            &["pvlock-kvmtest", "--stale-wait-ms", "1"],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?} accepted");
        }
        let e = Cli::try_parse_from(["pvlock-kvmtest", "kick_strom"]).unwrap_err();
        assert!(e.to_string().contains("kick_storm"), "{e}");
    }

    #[test]
    fn verdicts() {
        assert_eq!(verdict(Ok(())), Verdict::Pass);
        let fail = Err(anyhow::anyhow!("inner")).context("outer");
        assert_eq!(verdict(fail), Verdict::Fail("outer: inner".into()));
        let skip = Err(Skip("no HLT exits to disable".into()).into());
        assert_eq!(
            verdict(skip),
            Verdict::Skip("no HLT exits to disable".into())
        );
    }

    #[test]
    fn skips_by_mode() {
        let find = |n| cases::find(n).unwrap();
        assert!(skip_reason(find("kick_storm"), true).is_none());
        assert!(skip_reason(find("kick_storm"), false).is_some());
        assert!(skip_reason(find("absent_enable_cap"), true).is_some());
        assert!(skip_reason(find("absent_enable_cap"), false).is_none());
        assert!(skip_reason(find("no_cap_enosys"), true).is_none());
        assert!(skip_reason(find("no_cap_enosys"), false).is_none());
    }
}

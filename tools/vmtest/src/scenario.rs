// SPDX-License-Identifier: GPL-2.0

//! Scenarios: declarative TOML files that say which kernels to boot, what
//! to run in each and what the results must show. Adding a scenario needs
//! no code; see `Documentation/pvlock/testing.rst` for the format.

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

/// One scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Set from the file name.
    #[serde(skip)]
    pub name: String,
    /// One line for listings and reports.
    pub description: String,
    /// Bound on the whole run (L1 boot to power-off), seconds.
    #[serde(default = "default_timeout")]
    pub timeout: u64,
    /// How many times a run that failed for platform reasons is retried
    /// (a guest that vanished without a kernel message; see `platform.rs`);
    /// at most [`MAX_RETRIES`], whatever the file says.
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// Part of the fast set that `make test` runs.
    #[serde(default)]
    pub fast: bool,
    /// The run must fail, with a reason matching this regex: used by the
    /// scenarios that prove the harness catches broken guests.
    #[serde(default)]
    pub expect_failure: Option<String>,
    /// Problems in kernel logs (WARNING, BUG, ...) that do not fail the run.
    #[serde(default)]
    pub allow_kernel_problems: bool,
    /// Programs of this machine the guests run (e.g. `stress-ng`), found on
    /// PATH and copied into the image with their shared libraries as
    /// `/usr/bin/<name>` (see [`crate::programs`]); a missing one fails the
    /// run before anything boots.
    #[serde(default)]
    pub programs: Vec<String>,
    pub l1: Level1,
    #[serde(default)]
    pub l2: Vec<Level2>,
    #[serde(default)]
    pub expect: Vec<Expect>,
}

fn default_timeout() -> u64 {
    600
}

/// The most retries a scenario gets (its `retries` is capped there): a
/// retry can only hide a failure, so a scenario that needs more fails too
/// often for a reason worth knowing.
pub const MAX_RETRIES: u32 = 3;

fn default_retries() -> u32 {
    MAX_RETRIES
}

/// The KVM host, under QEMU TCG.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Level1 {
    /// The L1 CPUs that its guests (every L2's QEMU, the KVM selftest) run
    /// on; L1 has one more, its CPU 0, which runs no guest vCPU (see
    /// [`crate::run`]).
    #[serde(default = "default_l1_cpus")]
    pub cpus: u32,
    #[serde(default = "default_l1_memory")]
    pub memory: String,
    /// Extra kernel command line.
    #[serde(default)]
    pub cmdline: String,
    /// Extra options of L1's TCG accelerator (`-accel
    /// tcg,thread=multi,<these>`), for experiments on the platform, e.g.
    /// `tb-size=32` (MiB of translated code before QEMU flushes it all).
    #[serde(default)]
    pub tcg: String,
    /// L1's recorders while its guests run: the hypercall histogram
    /// (`hcmark`, `hypercalls`), the lock-wait and interrupt records, the
    /// run-queue record and the trace of the guests' shutdown exits. On by
    /// default (the tests read them when a guest fails); the benchmark
    /// turns them off, so that no trace event fires in a measured window.
    #[serde(default = "yes")]
    pub record: bool,
    pub steps: Vec<Step>,
}

fn yes() -> bool {
    true
}

impl Level1 {
    /// The `-accel` argument of L1's QEMU.
    pub fn accel(&self) -> String {
        if self.tcg.is_empty() {
            "tcg,thread=multi".into()
        } else {
            format!("tcg,thread=multi,{}", self.tcg)
        }
    }
}

fn default_l1_cpus() -> u32 {
    2
}

fn default_l1_memory() -> String {
    "4G".into()
}

/// A group of identical KVM guests started by an `l2` step in L1.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Level2 {
    pub group: String,
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default = "default_l2_cpus")]
    pub cpus: u32,
    #[serde(default = "default_l2_memory")]
    pub memory: String,
    /// QEMU `-cpu` model. TSC deadline timer, PMU and async page faults are
    /// off by default: under nested TCG they made guests stall or crash.
    #[serde(default = "default_l2_cpu")]
    pub cpu: String,
    /// The VMM offers pvlock as a VMM that knows it does: the CPUID bit
    /// and `KVM_CAP_PVLOCK_KICK` (QEMU's `kvm-pvlock=on`, appended to
    /// `cpu`), for host_kvm loaded without `force`.
    #[serde(default)]
    pub kvm_pvlock: bool,
    /// Extra kernel command line.
    #[serde(default)]
    pub cmdline: String,
    /// Extra QEMU arguments (e.g. `-overcommit cpu-pm=on`).
    #[serde(default)]
    pub qemu: String,
    /// Problems in this group's kernel logs (WARNING, BUG, soft lockup,
    /// ...) neither fail the run nor stop it: for guests whose stall is a
    /// result, the benchmark's native lock under overcommit. The other
    /// kernels are judged as usual.
    #[serde(default)]
    pub allow_kernel_problems: bool,
    pub steps: Vec<Step>,
}

impl Level2 {
    /// The `-cpu` model the guests run with.
    pub fn model(&self) -> String {
        if self.kvm_pvlock {
            format!("{},kvm-pvlock=on", self.cpu)
        } else {
            self.cpu.clone()
        }
    }
}

fn one() -> u32 {
    1
}

fn default_l2_cpus() -> u32 {
    4
}

fn default_l2_memory() -> String {
    "768M".into()
}

fn default_l2_cpu() -> String {
    "host,-svm,tsc-deadline=off,pmu=off".into()
}

/// One step of a level's plan.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// A function of the guest library (`tools/vmtest/guest/pvlock.sh`),
    /// one of `STEP_FUNCTIONS`. Exclusive with `l2`.
    #[serde(default)]
    pub run: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// L1 only: boot these L2 groups at once and wait for them.
    #[serde(default)]
    pub l2: Vec<String>,
    /// Seconds before the step is killed.
    #[serde(default = "default_step_timeout")]
    pub timeout: u64,
    /// Start the step and go on; a later `wait` step waits for it.
    #[serde(default)]
    pub background: bool,
    /// A name for results; defaults to `<run>` or `l2`, numbered.
    #[serde(default)]
    pub id: Option<String>,
    /// The step may end with a non-zero status (e.g. a load that must be
    /// refused); otherwise a non-zero status fails the run.
    #[serde(default)]
    pub may_fail: bool,
    /// Run the step this many times in a row (at least 1, at most
    /// [`MAX_REPEAT`]): the plan gets that many copies, whose ids are the
    /// step's id (or its function) followed by 0, 1, ... Not with
    /// `background`, whose `wait` would not know which copy it waits for.
    #[serde(default = "default_repeat")]
    pub repeat: u32,
}

fn default_repeat() -> u32 {
    1
}

/// The most copies a `repeat` makes.
pub const MAX_REPEAT: u32 = 1000;

/// Replaces every step that has `repeat = N` by N copies of it, numbered.
fn expand_repeats(steps: &mut Vec<Step>) -> Result<()> {
    let mut out = Vec::with_capacity(steps.len());
    for s in steps.drain(..) {
        match s.repeat {
            1 => out.push(s),
            0 => bail!("repeat must be at least 1"),
            n if n > MAX_REPEAT => bail!("repeat {n} is more than {MAX_REPEAT}"),
            _ if s.background => bail!("a background step cannot repeat"),
            n => {
                let base = s.id.clone().unwrap_or_else(|| s.function().to_string());
                for k in 0..n {
                    let mut c = s.clone();
                    c.repeat = 1;
                    c.id = Some(format!("{base}{k}"));
                    out.push(c);
                }
            }
        }
    }
    *steps = out;
    Ok(())
}

impl Step {
    /// A step that runs guest-library function `run` with `args`, bounded
    /// by `timeout` seconds (for programs that build scenarios).
    pub fn call(run: &str, args: &[&str], timeout: u64) -> Step {
        Step {
            run: Some(run.to_string()),
            args: args.iter().map(|a| a.to_string()).collect(),
            l2: Vec::new(),
            timeout,
            background: false,
            id: None,
            may_fail: false,
            repeat: 1,
        }
    }

    /// An L1 step that boots the L2 groups `groups` and waits for them.
    pub fn boot(groups: &[&str], timeout: u64) -> Step {
        Step {
            run: None,
            l2: groups.iter().map(|g| g.to_string()).collect(),
            ..Step::call("l2", &[], timeout)
        }
    }

    /// The same step with id `id`.
    pub fn with_id(mut self, id: &str) -> Step {
        self.id = Some(id.to_string());
        self
    }

    /// The step's name in the plan and the results: its `id`, or its
    /// function (`l2` for an `l2` step) numbered by its place (`i`, from 0)
    /// in its level's steps.
    pub fn id(&self, i: usize) -> String {
        self.id
            .clone()
            .unwrap_or_else(|| format!("{}{}", self.function(), i + 1))
    }

    /// What the step runs: its function, or `l2` for an `l2` step.
    fn function(&self) -> &str {
        self.run.as_deref().unwrap_or("l2")
    }
}

fn default_step_timeout() -> u64 {
    120
}

/// A check on the run's result (see `judge.rs`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// What the check means, for the report.
    pub name: String,
    /// Dotted path into the result JSON; a segment may be a glob (`*`,
    /// `g-*`) and then every match must pass.
    pub path: String,
    #[serde(default)]
    pub eq: Option<serde_json::Value>,
    #[serde(default)]
    pub ne: Option<serde_json::Value>,
    #[serde(default)]
    pub gt: Option<f64>,
    #[serde(default)]
    pub ge: Option<f64>,
    #[serde(default)]
    pub lt: Option<f64>,
    #[serde(default)]
    pub le: Option<f64>,
    /// A string, or an array of strings of which at least one, matches.
    #[serde(default)]
    pub matches: Option<String>,
    /// No string (or array element) matches.
    #[serde(default)]
    pub not_matches: Option<String>,
    /// Passes if the path matches nothing (default: that fails).
    #[serde(default)]
    pub allow_missing: bool,
    /// `any`: one match passing is enough (default `all`).
    #[serde(default)]
    pub any: bool,
}

const STEP_FUNCTIONS: &[&str] = &[
    "online_cpus",
    "hotplug_loop",
    "load",
    "unload",
    "params",
    "stat",
    "info",
    "locktorture",
    "loadloop",
    "warnings",
    "sh_step",
    "kvmtest",
    "sleep",
    "wait",
    "hcmark",
    "hackbench",
    "stressng",
    "barrier",
    "await_lock",
    "burn",
    "mmbench",
    "migrate",
    "kexec_to",
    "vmstate_image",
    "snapshots",
    "release",
    "await_guest",
    "hold",
    "interleave",
];

impl Scenario {
    /// Reads and checks a scenario file.
    pub fn load(path: &Path) -> Result<Scenario> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read scenario {}", path.display()))?;
        let mut s: Scenario =
            toml::from_str(&text).with_context(|| format!("bad scenario {}", path.display()))?;
        s.name = path
            .file_stem()
            .and_then(|n| n.to_str())
            .unwrap_or("scenario")
            .to_string();
        s.expand()
            .with_context(|| format!("bad scenario {}", path.display()))?;
        s.validate()
            .with_context(|| format!("bad scenario {}", path.display()))?;
        Ok(s)
    }

    /// Checks a scenario that a program built (as [`Scenario::load`]
    /// checks a file) and expands its `repeat`s.
    pub fn checked(mut self) -> Result<Scenario> {
        self.expand()?;
        self.validate()?;
        Ok(self)
    }

    /// Expands `repeat`s into the steps they stand for.
    fn expand(&mut self) -> Result<()> {
        expand_repeats(&mut self.l1.steps)?;
        for g in &mut self.l2 {
            expand_repeats(&mut g.steps).with_context(|| format!("l2 group '{}'", g.group))?;
        }
        Ok(())
    }

    fn validate(&self) -> Result<()> {
        let mut groups = BTreeSet::new();
        for g in &self.l2 {
            if g.group.is_empty() || !g.group.chars().all(|c| c.is_ascii_alphanumeric()) {
                bail!("l2 group name '{}' must be alphanumeric", g.group);
            }
            if !groups.insert(g.group.clone()) {
                bail!("l2 group '{}' defined twice", g.group);
            }
            if g.count == 0 || g.cpus == 0 {
                bail!("l2 group '{}': count and cpus must be at least 1", g.group);
            }
            check_steps(&g.steps, false)?;
        }
        check_steps(&self.l1.steps, true)?;
        let key_value = |o: &str| {
            o.split_once('=').is_some_and(|(k, v)| {
                plain_name(k, &['-']) && !v.is_empty() && plain_name(v, &['-', '.'])
            })
        };
        if !self.l1.tcg.is_empty() && !self.l1.tcg.split(',').all(key_value) {
            bail!(
                "l1 tcg '{}': QEMU accelerator options are key=value pairs separated by commas",
                self.l1.tcg
            );
        }
        let mut used = BTreeSet::new();
        for s in &self.l1.steps {
            for g in &s.l2 {
                if !groups.contains(g) {
                    bail!("l1 step boots l2 group '{g}', which is not defined");
                }
                used.insert(g.clone());
            }
        }
        // A guest may also boot into another group's plan by kexec.
        for s in self.l2.iter().flat_map(|g| &g.steps) {
            if s.run.as_deref() == Some("kexec_to") {
                match s.args.as_slice() {
                    [g] if groups.contains(g) => {
                        used.insert(g.clone());
                    }
                    _ => bail!(
                        "a kexec_to step takes args = [GROUP], an l2 group of the scenario, not {:?}",
                        s.args
                    ),
                }
            }
        }
        if let Some(g) = groups.difference(&used).next() {
            bail!("l2 group '{g}' is never booted by an l1 step (or a kexec_to step)");
        }
        for e in &self.expect {
            if let Some(r) = &e.matches {
                regex::Regex::new(r).with_context(|| format!("expect '{}'", e.name))?;
            }
            if let Some(r) = &e.not_matches {
                regex::Regex::new(r).with_context(|| format!("expect '{}'", e.name))?;
            }
        }
        if let Some(r) = &self.expect_failure {
            regex::Regex::new(r).context("expect_failure")?;
        }
        for p in &self.programs {
            if !plain_name(p, &['-', '_', '.', '+']) {
                bail!("programs: '{p}' is not a program name (a name found on PATH, no '/')");
            }
        }
        Ok(())
    }

    /// The L2 group called `name`.
    pub fn group(&self, name: &str) -> Option<&Level2> {
        self.l2.iter().find(|g| g.group == name)
    }

    /// Whether problems in the kernel log of `kernel` (`l1`, or an L2
    /// instance `<group>-<i>`) are allowed: by the scenario, or by the
    /// kernel's L2 group.
    pub fn allows_problems_of(&self, kernel: &str) -> bool {
        self.allow_kernel_problems
            || kernel
                .rsplit_once('-')
                .and_then(|(group, _)| self.group(group))
                .is_some_and(|g| g.allow_kernel_problems)
    }

    /// The retries a run of the scenario gets: its own, at most
    /// [`MAX_RETRIES`].
    pub fn retries(&self) -> u32 {
        self.retries.min(MAX_RETRIES)
    }

    /// The steps of kernel `kernel` (`l1`, or an L2 instance
    /// `<group>-<i>`).
    pub fn steps_of(&self, kernel: &str) -> Option<&[Step]> {
        if kernel == "l1" {
            return Some(&self.l1.steps);
        }
        let (group, _) = kernel.rsplit_once('-')?;
        self.group(group).map(|g| g.steps.as_slice())
    }

    /// The step of kernel `kernel` whose id (see [`Step::id`]) is `id`.
    pub fn step(&self, kernel: &str, id: &str) -> Option<&Step> {
        self.steps_of(kernel)?
            .iter()
            .enumerate()
            .find(|(i, st)| st.id(*i) == id)
            .map(|(_, st)| st)
    }

    /// Every L2 instance name (`<group>-<i>`) the run boots.
    pub fn l2_instances(&self) -> Vec<String> {
        let mut v = Vec::new();
        for g in &self.l2 {
            for i in 1..=g.count {
                v.push(format!("{}-{}", g.group, i));
            }
        }
        v
    }

    /// The plan files for the initramfs: `plan/L1.sh` and one
    /// `plan/L2-<group>.sh` per group.
    pub fn plans(&self) -> Vec<(String, String)> {
        let mut out = vec![("plan/L1.sh".to_string(), self.l1_plan())];
        for g in &self.l2 {
            out.push((
                format!("plan/L2-{}.sh", g.group),
                plan_steps(&g.steps, |_| String::new()),
            ));
        }
        out
    }

    fn l1_plan(&self) -> String {
        let mut s = String::new();
        if !self.l1.record {
            s.push_str("pv_record=0\n");
        }
        for g in &self.l2 {
            let _ = writeln!(s, "pv_l2cmd_{}={}", g.group, shell_quote(&g.cmdline));
            let _ = writeln!(s, "pv_l2qemu_{}={}", g.group, shell_quote(&g.qemu));
        }
        s + &plan_steps(&self.l1.steps, |step| {
            step.l2
                .iter()
                .filter_map(|name| self.group(name))
                .map(|g| {
                    shell_quote(&format!(
                        "{}:{}:{}:{}:{}",
                        g.group,
                        g.count,
                        g.cpus,
                        g.memory,
                        g.model()
                    ))
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
    }
}

fn check_steps(steps: &[Step], l1: bool) -> Result<()> {
    for s in steps {
        match (&s.run, s.l2.is_empty()) {
            (Some(f), true) => {
                if !STEP_FUNCTIONS.contains(&f.as_str()) {
                    bail!(
                        "unknown step function '{f}' (known: {})",
                        STEP_FUNCTIONS.join(", ")
                    );
                }
                if f == "barrier" {
                    check_barrier(s, l1)?;
                }
            }
            (None, false) if l1 => {}
            (None, false) => bail!("only L1 steps can boot l2 guests"),
            _ => bail!("a step needs exactly one of 'run' and 'l2'"),
        }
        if s.timeout == 0 {
            bail!("step timeouts must be at least 1 s");
        }
    }
    Ok(())
}

/// A `barrier` step: L2 only (L1 lets the guests of one `l2` step on),
/// `args = [NAME]` or `[NAME, SECONDS]`, NAME of letters, digits, `_`, `.`
/// and `-` (L1 keeps a directory by that name).
fn check_barrier(s: &Step, l1: bool) -> Result<()> {
    if l1 {
        bail!("'barrier' is an L2 step: L1 lets the guests of one l2 step on together");
    }
    let name_ok = |n: &str| plain_name(n, &['_', '.', '-']);
    match s.args.as_slice() {
        [name] if name_ok(name) => Ok(()),
        [name, secs] if name_ok(name) && secs.parse::<u32>().is_ok_and(|v| v > 0) => Ok(()),
        _ => bail!(
            "a barrier step takes args = [NAME] or [NAME, SECONDS] (NAME of letters, digits, '_', '.' and '-', not starting with '.'; SECONDS > 0), not {:?}",
            s.args
        ),
    }
}

/// Whether `n` can name a file (L1's directory of a barrier, a program on
/// PATH): not empty, of letters, digits and the characters of `also`, and
/// not starting with '.', so never `.` or `..`.
fn plain_name(n: &str, also: &[char]) -> bool {
    !n.is_empty()
        && !n.starts_with('.')
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || also.contains(&c))
}

/// The shell lines of a plan; `l2_specs` gives the spec arguments of an
/// `l2` step.
fn plan_steps(steps: &[Step], l2_specs: impl Fn(&Step) -> String) -> String {
    let mut s = String::new();
    for (i, step) in steps.iter().enumerate() {
        let func = step.run.clone().unwrap_or_else(|| "l2".into());
        let id = step.id(i);
        if func == "wait" {
            let _ = writeln!(s, "wait");
            continue;
        }
        let mut args: Vec<String> = Vec::new();
        if func == "l2" {
            // The guests get the step's timeout minus a margin, so that
            // they are killed (and reported) before the step is.
            args.push(step.timeout.saturating_sub(10).max(1).to_string());
            let _ = write!(
                s,
                "step {} {} l2 {} {}",
                shell_quote(&id),
                step.timeout,
                args[0],
                l2_specs(step)
            );
        } else {
            args.extend(step.args.iter().map(|a| shell_quote(a)));
            let _ = write!(s, "step {} {} {}", shell_quote(&id), step.timeout, func);
            for a in &args {
                let _ = write!(s, " {a}");
            }
        }
        if step.background {
            s.push_str(" &");
        }
        s.push('\n');
    }
    s
}

/// Quotes `s` for a POSIX shell.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.,:=/+@%".contains(c))
    {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Scenario> {
        let mut s: Scenario = toml::from_str(text)?;
        s.name = "t".into();
        s.expand()?;
        s.validate()?;
        Ok(s)
    }

    const BASIC: &str = r#"
description = "basic"
[l1]
steps = [
  { run = "load", args = ["host_kvm", "force=1"] },
  { l2 = ["g"], timeout = 300 },
]
[[l2]]
group = "g"
cpus = 4
cmdline = "nopvspin"
steps = [
  { run = "locktorture", args = ["spin_lock", "0", "15"], timeout = 200 },
  { run = "sh_step", args = ["echo it's"] },
]
"#;

    #[test]
    fn plans_call_the_guest_library() {
        let s = parse(BASIC).unwrap();
        let plans = s.plans();
        assert_eq!(plans[0].0, "plan/L1.sh");
        assert!(plans[0].1.contains("pv_l2cmd_g=nopvspin\n"));
        assert!(plans[0]
            .1
            .contains("step load1 120 load host_kvm force=1\n"));
        assert!(plans[0]
            .1
            .contains("step l22 300 l2 290 g:1:4:768M:host,-svm,tsc-deadline=off,pmu=off\n"));
        assert_eq!(plans[1].0, "plan/L2-g.sh");
        assert!(plans[1]
            .1
            .contains("step locktorture1 200 locktorture spin_lock 0 15\n"));
        assert!(plans[1].1.contains("sh_step 'echo it'\\''s'\n"));
        assert_eq!(s.l2_instances(), vec!["g-1"]);
        assert!(!plans[0].1.contains("pv_record"));
    }

    #[test]
    fn an_l1_that_records_nothing_says_so_first() {
        let text = BASIC.replace("[l1]\n", "[l1]\nrecord = false\n");
        let s = parse(&text).unwrap();
        assert!(s.plans()[0].1.starts_with("pv_record=0\n"));
    }

    #[test]
    fn rejects_unknown_functions_and_groups() {
        let bad = BASIC.replace("\"locktorture\"", "\"rm_rf\"");
        assert!(parse(&bad)
            .unwrap_err()
            .to_string()
            .contains("unknown step function"));
        let bad = BASIC.replace("l2 = [\"g\"]", "l2 = [\"h\"]");
        assert!(parse(&bad).unwrap_err().to_string().contains("not defined"));
        let bad = BASIC.replace("{ l2 = [\"g\"], timeout = 300 },", "");
        assert!(parse(&bad)
            .unwrap_err()
            .to_string()
            .contains("never booted"));
    }

    #[test]
    fn barriers_are_l2_steps_with_a_plain_name() {
        let step = |args: &str| {
            BASIC.replace(
                r#"{ run = "sh_step", args = ["echo it's"] },"#,
                &format!(r#"{{ run = "barrier", args = {args} }},"#),
            )
        };
        let s = parse(&step(r#"["contended"]"#)).unwrap();
        assert!(s.plans()[1]
            .1
            .contains("step barrier2 120 barrier contended\n"));
        assert!(parse(&step(r#"["hackbench", "60"]"#)).is_ok());
        for bad in [
            r#"[]"#,
            r#"["a b"]"#,
            r#"["../x"]"#,
            r#"[".."]"#,
            r#"["."]"#,
            r#"["x", "0"]"#,
            r#"["x", "1", "2"]"#,
        ] {
            let e = parse(&step(bad)).unwrap_err().to_string();
            assert!(e.contains("a barrier step takes"), "{bad}: {e}");
        }
        let l1 = BASIC.replace(
            r#"{ run = "load", args = ["host_kvm", "force=1"] },"#,
            r#"{ run = "barrier", args = ["x"] },"#,
        );
        assert!(parse(&l1)
            .unwrap_err()
            .to_string()
            .contains("is an L2 step"));
    }

    #[test]
    fn programs_are_plain_names() {
        let with = |list: &str| BASIC.replace("[l1]", &format!("programs = {list}\n[l1]"));
        let s = parse(&with(r#"["stress-ng", "hackbench"]"#)).unwrap();
        assert_eq!(s.programs, ["stress-ng", "hackbench"]);
        assert!(parse(BASIC).unwrap().programs.is_empty());
        for bad in [
            r#"["/usr/bin/stress-ng"]"#,
            r#"[""]"#,
            r#"["../x"]"#,
            r#"["a b"]"#,
            r#"[".."]"#,
        ] {
            let e = parse(&with(bad)).unwrap_err().to_string();
            assert!(e.contains("is not a program name"), "{bad}: {e}");
        }
    }

    #[test]
    fn background_and_wait() {
        let text = r#"
description = "bg"
[l1]
steps = [
  { run = "sleep", args = ["5"], background = true, id = "s" },
  { run = "wait" },
]
"#;
        let s = parse(text).unwrap();
        assert_eq!(s.plans()[0].1, "step s 120 sleep 5 &\nwait\n");
    }

    #[test]
    fn steps_by_id_and_may_fail() {
        let s = parse(&BASIC.replace(
            r#"{ run = "sh_step", args = ["echo it's"] },"#,
            r#"{ run = "sh_step", args = ["echo it's"], may_fail = true },"#,
        ))
        .unwrap();
        assert!(s.step("g-1", "sh_step2").unwrap().may_fail);
        assert!(!s.step("g-1", "locktorture1").unwrap().may_fail);
        assert!(s.step("l1", "l22").is_some() && s.step("l1", "load1").is_some());
        assert!(s.step("g-2", "sh_step2").is_some());
        assert!(s.step("h-1", "sh_step2").is_none() && s.step("g-1", "x").is_none());
        // Retries: 3 by default, and at most 3.
        assert_eq!((s.retries, s.retries()), (3, 3));
        let s = parse(&BASIC.replace(
            "description = \"basic\"",
            "description = \"basic\"\nretries = 11",
        ))
        .unwrap();
        assert_eq!((s.retries, s.retries()), (11, MAX_RETRIES));
        let s = parse(&BASIC.replace(
            "description = \"basic\"",
            "description = \"basic\"\nretries = 1",
        ))
        .unwrap();
        assert_eq!(s.retries(), 1);
    }

    #[test]
    fn l1_tcg_options_are_key_value_pairs() {
        let with = |tcg: &str| parse(&BASIC.replace("[l1]\n", &format!("[l1]\ntcg = \"{tcg}\"\n")));
        assert_eq!(parse(BASIC).unwrap().l1.accel(), "tcg,thread=multi");
        assert_eq!(
            with("tb-size=32").unwrap().l1.accel(),
            "tcg,thread=multi,tb-size=32"
        );
        for bad in ["tb-size", "tb-size=", "a=b,", "x=1 -m 8G", "a=$(b)"] {
            let e = with(bad).unwrap_err();
            assert!(format!("{e:#}").contains("key=value"), "{bad}: {e:#}");
        }
    }

    #[test]
    fn a_repeated_step_is_that_many_numbered_steps() {
        let s = parse(&BASIC.replace(
            r#"{ run = "sh_step", args = ["echo it's"] },"#,
            r#"{ run = "sh_step", args = ["echo it's"], id = "echo", repeat = 3, may_fail = true },
  { run = "info", repeat = 2 },"#,
        ))
        .unwrap();
        let ids: Vec<String> = s
            .steps_of("g-1")
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, st)| st.id(i))
            .collect();
        assert_eq!(
            ids,
            ["locktorture1", "echo0", "echo1", "echo2", "info0", "info1"]
        );
        let echo2 = s.step("g-1", "echo2").unwrap();
        assert!(echo2.may_fail && echo2.args == ["echo it's"] && echo2.repeat == 1);
        let plan = &s.plans()[1].1;
        assert!(plan.contains("echo2") && !plan.contains("repeat"), "{plan}");
        for (bad, why) in [
            ("repeat = 0", "at least 1"),
            ("repeat = 1001", "more than 1000"),
            ("repeat = 2, background = true", "background"),
        ] {
            let e = parse(&BASIC.replace(
                r#"{ run = "sh_step", args = ["echo it's"] },"#,
                &format!(r#"{{ run = "sh_step", args = ["x"], {bad} }},"#),
            ))
            .unwrap_err();
            assert!(format!("{e:#}").contains(why), "{bad}: {e:#}");
        }
    }

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("a=b"), "a=b");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("$(x)"), "'$(x)'");
    }
}

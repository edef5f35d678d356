// SPDX-License-Identifier: GPL-2.0

//! The benchmark matrix (overcommit x lock mode x workload), the settings
//! that size it, and the runs that measure it: one vmtest scenario (one L1
//! boot) per overcommit level and repetition, booting one L2 (or two, for
//! "two guests") per lock mode in turn.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;
use vmtest::scenario::Scenario;

/// How many L2 vCPUs run on L1's two vCPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Overcommit {
    /// One L2 with 2 vCPUs.
    #[serde(rename = "1x")]
    X1,
    /// One L2 with 4 vCPUs.
    #[serde(rename = "2x")]
    X2,
    /// One L2 with 6 vCPUs.
    #[serde(rename = "3x")]
    X3,
    /// Two L2 with 2 vCPUs each, at the same time.
    #[serde(rename = "two-guests")]
    Two,
}

impl Overcommit {
    pub const ALL: [Overcommit; 4] = [
        Overcommit::X1,
        Overcommit::X2,
        Overcommit::X3,
        Overcommit::Two,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Overcommit::X1 => "1x",
            Overcommit::X2 => "2x",
            Overcommit::X3 => "3x",
            Overcommit::Two => "two-guests",
        }
    }

    /// For scenario names.
    pub fn key(self) -> &'static str {
        match self {
            Overcommit::X1 => "1x",
            Overcommit::X2 => "2x",
            Overcommit::X3 => "3x",
            Overcommit::Two => "two",
        }
    }

    /// L2 guests booted at once.
    pub fn guests(self) -> u32 {
        if self == Overcommit::Two {
            2
        } else {
            1
        }
    }

    /// vCPUs of each L2.
    pub fn vcpus(self) -> u32 {
        match self {
            Overcommit::X1 | Overcommit::Two => 2,
            Overcommit::X2 => 4,
            Overcommit::X3 => 6,
        }
    }

    /// L2 vCPUs per L1 vCPU (L1 has two).
    pub fn factor(self) -> u32 {
        self.guests() * self.vcpus() / 2
    }
}

/// The spinlock an L2 runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Mode {
    /// `nopvspin`: the native qspinlock.
    #[serde(rename = "native")]
    Native,
    /// Upstream PV spinlocks (KVM_HC_KICK_CPU), as the kernel boots.
    #[serde(rename = "upstream-pv")]
    Upstream,
    /// guest_pvlock on a stock host: kicks with KVM_HC_KICK_CPU.
    #[serde(rename = "pvlock-kickcpu")]
    KickCpu,
    /// guest_pvlock with host_kvm in L1: the project's kick hypercall.
    #[serde(rename = "pvlock-hostkvm")]
    HostKvm,
}

impl Mode {
    /// In run order: host_kvm is loaded in L1 before the last.
    pub const ALL: [Mode; 4] = [Mode::Native, Mode::Upstream, Mode::KickCpu, Mode::HostKvm];
    pub const PVLOCK: [Mode; 2] = [Mode::KickCpu, Mode::HostKvm];

    pub fn label(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::Upstream => "upstream-pv",
            Mode::KickCpu => "pvlock-kickcpu",
            Mode::HostKvm => "pvlock-hostkvm",
        }
    }

    /// The L2 group name (alphanumeric); instances are `<group>-<i>`.
    pub fn group(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::Upstream => "upstream",
            Mode::KickCpu => "kickcpu",
            Mode::HostKvm => "hostkvm",
        }
    }

    pub fn short(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::Upstream => "upstream",
            Mode::KickCpu => "kickcpu",
            Mode::HostKvm => "hostkvm",
        }
    }

    pub fn loads_guest_pvlock(self) -> bool {
        matches!(self, Mode::KickCpu | Mode::HostKvm)
    }
}

/// What the L2 runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Workload {
    /// locktorture spin_lock, 2 writers per vCPU.
    #[serde(rename = "contended")]
    Contended,
    /// locktorture spin_lock, 1 writer.
    #[serde(rename = "uncontended")]
    Uncontended,
    /// rt-tests hackbench (process mode, sockets).
    #[serde(rename = "hackbench")]
    Hackbench,
}

impl Workload {
    pub const ALL: [Workload; 3] = [
        Workload::Contended,
        Workload::Uncontended,
        Workload::Hackbench,
    ];
    /// The order inside an L2: the workload most likely to hit its bound
    /// (contended, for native) last, so that it cannot spoil the others.
    pub const RUN_ORDER: [Workload; 3] = [
        Workload::Uncontended,
        Workload::Hackbench,
        Workload::Contended,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Workload::Contended => "contended",
            Workload::Uncontended => "uncontended",
            Workload::Hackbench => "hackbench",
        }
    }

    /// The unit of a measurement and which way is better.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::Contended | Workload::Uncontended => "writes/s, higher is better",
            Workload::Hackbench => "seconds, lower is better",
        }
    }

    pub fn higher_is_better(self) -> bool {
        self != Workload::Hackbench
    }

    /// locktorture writers in each L2 (0 for hackbench).
    pub fn writers(self, oc: Overcommit) -> u32 {
        match self {
            Workload::Contended => 2 * oc.vcpus(),
            Workload::Uncontended => 1,
            Workload::Hackbench => 0,
        }
    }
}

/// One point of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Cell {
    pub overcommit: Overcommit,
    pub workload: Workload,
    pub mode: Mode,
}

impl Cell {
    /// `2x/contended/native`: what `--only` matches.
    pub fn id(&self) -> String {
        format!(
            "{}/{}/{}",
            self.overcommit.label(),
            self.workload.label(),
            self.mode.label()
        )
    }
}

/// Durations and bounds.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Settings {
    pub quick: bool,
    pub reps: u32,
    /// locktorture seconds, contended, PV modes.
    pub contended_secs: u64,
    /// locktorture seconds, contended, native (kept short: lock-holder
    /// preemption makes it crawl under overcommit).
    pub native_contended_secs: u64,
    /// locktorture seconds, one writer.
    pub uncontended_secs: u64,
    /// hackbench messages per sender; groups = the L2's vCPUs.
    pub hackbench_loops: u64,
    /// Bound on a native contended locktorture step beyond its duration.
    pub native_bound_secs: u64,
    /// Bound on any other locktorture step beyond its duration.
    pub bound_secs: u64,
    /// Bound on hackbench (native / the PV modes).
    pub native_hackbench_bound_secs: u64,
    pub hackbench_bound_secs: u64,
    /// Make-up runs of the guests the platform lost (nested TCG), per
    /// run.
    pub retries: u32,
}

impl Settings {
    pub fn new(quick: bool, reps: Option<u32>, retries: u32) -> Settings {
        if quick {
            Settings {
                quick,
                reps: reps.unwrap_or(2),
                contended_secs: 5,
                native_contended_secs: 5,
                uncontended_secs: 5,
                hackbench_loops: 20,
                native_bound_secs: 80,
                bound_secs: 30,
                native_hackbench_bound_secs: 90,
                hackbench_bound_secs: 45,
                retries,
            }
        } else {
            Settings {
                quick,
                reps: reps.unwrap_or(3),
                contended_secs: 10,
                native_contended_secs: 5,
                uncontended_secs: 10,
                hackbench_loops: 30,
                native_bound_secs: 150,
                bound_secs: 45,
                native_hackbench_bound_secs: 150,
                hackbench_bound_secs: 60,
                retries,
            }
        }
    }

    pub fn lt_secs(&self, mode: Mode, w: Workload) -> u64 {
        match (mode, w) {
            (Mode::Native, Workload::Contended) => self.native_contended_secs,
            (_, Workload::Contended) => self.contended_secs,
            _ => self.uncontended_secs,
        }
    }

    fn hackbench_bound(&self, mode: Mode) -> u64 {
        if mode == Mode::Native {
            self.native_hackbench_bound_secs
        } else {
            self.hackbench_bound_secs
        }
    }

    /// The step timeout of workload `w` in mode `mode`.
    pub fn step_timeout(&self, mode: Mode, w: Workload) -> u64 {
        match (mode, w) {
            (_, Workload::Hackbench) => self.hackbench_bound(mode) + 20,
            (Mode::Native, Workload::Contended) => self.lt_secs(mode, w) + self.native_bound_secs,
            _ => self.lt_secs(mode, w) + self.bound_secs,
        }
    }

    /// What a workload is expected to take when nothing goes wrong, for the
    /// time estimate (seconds, including locktorture's load and unload).
    pub fn expected_secs(&self, mode: Mode, w: Workload) -> f64 {
        match w {
            Workload::Hackbench => 8.0,
            _ => self.lt_secs(mode, w) as f64 + 4.0,
        }
    }
}

/// The cells of the quick or the full matrix.
pub fn cells(quick: bool) -> Vec<Cell> {
    let mut v = Vec::new();
    if quick {
        for mode in Mode::ALL {
            v.push(Cell {
                overcommit: Overcommit::X2,
                workload: Workload::Contended,
                mode,
            });
        }
        // The fast path is the same whatever kicks: one pvlock mode is
        // enough to compare with native.
        for mode in [Mode::Native, Mode::HostKvm] {
            v.push(Cell {
                overcommit: Overcommit::X1,
                workload: Workload::Uncontended,
                mode,
            });
        }
    } else {
        for overcommit in Overcommit::ALL {
            for workload in Workload::ALL {
                for mode in Mode::ALL {
                    v.push(Cell {
                        overcommit,
                        workload,
                        mode,
                    });
                }
            }
        }
    }
    v.sort();
    v
}

/// The cells whose id matches `re`.
pub fn filter(cells: Vec<Cell>, re: Option<&regex::Regex>) -> Vec<Cell> {
    match re {
        None => cells,
        Some(re) => cells.into_iter().filter(|c| re.is_match(&c.id())).collect(),
    }
}

/// One L1 boot: every selected mode of one overcommit level, in one
/// repetition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unit {
    pub rep: u32,
    pub overcommit: Overcommit,
    /// The modes in run order, each with its workloads in run order.
    pub modes: Vec<(Mode, Vec<Workload>)>,
    /// 0 for the planned run; n for the n-th make-up run of the modes
    /// whose guests the platform lost.
    pub retry: u32,
}

impl Unit {
    /// The scenario name: `r<rep>-<overcommit>`, `-retry<n>` for a
    /// make-up run.
    pub fn name(&self) -> String {
        match self.retry {
            0 => format!("r{}-{}", self.rep, self.overcommit.key()),
            n => format!("r{}-{}-retry{n}", self.rep, self.overcommit.key()),
        }
    }

    /// A make-up run of `modes` only, in the same repetition.
    pub fn retry_of(&self, modes: &[Mode]) -> Unit {
        Unit {
            rep: self.rep,
            overcommit: self.overcommit,
            modes: self
                .modes
                .iter()
                .filter(|(m, _)| modes.contains(m))
                .cloned()
                .collect(),
            retry: self.retry + 1,
        }
    }

    pub fn cells(&self) -> Vec<Cell> {
        let mut v = Vec::new();
        for (mode, ws) in &self.modes {
            for w in ws {
                v.push(Cell {
                    overcommit: self.overcommit,
                    workload: *w,
                    mode: *mode,
                });
            }
        }
        v
    }

    /// The time this unit should take, for the estimate.
    pub fn expected_secs(&self, s: &Settings) -> f64 {
        let mut t = 5.0;
        for (mode, ws) in &self.modes {
            // L2 boot, info, hcmarks, power-off.
            t += 12.0;
            if mode.loads_guest_pvlock() {
                t += 4.0;
            }
            for w in ws {
                t += s.expected_secs(*mode, *w) + 2.0;
            }
        }
        t
    }

    /// How long the console of this unit's L1 can stay silent before the
    /// run is taken for stalled: the longest step bound (a step prints
    /// nothing until it ends or hits its bound) and a margin.
    pub fn silence_bound(&self, s: &Settings) -> u64 {
        let longest = self
            .modes
            .iter()
            .flat_map(|(m, ws)| ws.iter().map(move |w| s.step_timeout(*m, *w)))
            .max()
            .unwrap_or(0);
        longest.max(60) + 40
    }

    /// Bounds the L2 as a whole (a guest whose timer stalls under nested
    /// TCG never reaches its own step timeouts): boot, module load, the
    /// workloads' own bounds, the marks and statistics.
    fn l2_timeout(&self, s: &Settings, mode: Mode, ws: &[Workload]) -> u64 {
        let mut t = 40;
        if mode.loads_guest_pvlock() {
            t += 20;
        }
        for w in ws {
            t += s.step_timeout(mode, *w) + 10;
        }
        t
    }

    /// The scenario, as TOML text (also written next to the results, so
    /// that a run can be repeated with `vmtest run <file>`).
    pub fn scenario_toml(&self, s: &Settings) -> String {
        let oc = self.overcommit;
        let mut l1 = Vec::new();
        let mut groups = String::new();
        let mut total = 120;
        for (mode, ws) in &self.modes {
            if *mode == Mode::HostKvm {
                l1.push(
                    r#"{ run = "load", args = ["host_kvm", "force=1"], id = "host_kvm" }"#
                        .to_string(),
                );
            }
            let to = self.l2_timeout(s, *mode, ws);
            total += to + 10;
            l1.push(format!(
                r#"{{ l2 = ["{}"], timeout = {to}, id = "l2-{}" }}"#,
                mode.group(),
                mode.group()
            ));
            let mut steps = Vec::new();
            if mode.loads_guest_pvlock() {
                steps
                    .push(r#"{ run = "load", args = ["guest_pvlock"], timeout = 60 }"#.to_string());
            }
            steps.push(r#"{ run = "info" }"#.to_string());
            steps.push(r#"{ run = "hcmark", args = ["start"] }"#.to_string());
            for w in Workload::RUN_ORDER.iter().filter(|w| ws.contains(w)) {
                let timeout = s.step_timeout(*mode, *w);
                let id = w.label();
                match w {
                    Workload::Hackbench => steps.push(format!(
                        r#"{{ run = "hackbench", args = ["{}", "{}", "{}"], timeout = {timeout}, id = "{id}" }}"#,
                        oc.vcpus(),
                        s.hackbench_loops,
                        s.hackbench_bound(*mode)
                    )),
                    _ => steps.push(format!(
                        r#"{{ run = "locktorture", args = ["spin_lock", "{}", "{}"], timeout = {timeout}, id = "{id}" }}"#,
                        w.writers(oc),
                        s.lt_secs(*mode, *w)
                    )),
                }
                steps.push(format!(r#"{{ run = "hcmark", args = ["{id}"] }}"#));
                if mode.loads_guest_pvlock() {
                    steps.push(format!(r#"{{ run = "stat", id = "stat-{id}" }}"#));
                }
            }
            steps.push(r#"{ run = "warnings" }"#.to_string());
            let _ = write!(
                groups,
                "\n[[l2]]\ngroup = \"{}\"\ncount = {}\ncpus = {}\ncmdline = \"{}\"\nsteps = [\n  {},\n]\n",
                mode.group(),
                oc.guests(),
                oc.vcpus(),
                if *mode == Mode::Native { "nopvspin" } else { "" },
                steps.join(",\n  ")
            );
        }
        if self.modes.iter().any(|(m, _)| *m == Mode::HostKvm) {
            l1.push(r#"{ run = "stat", id = "host-stat" }"#.to_string());
        }
        l1.push(r#"{ run = "warnings" }"#.to_string());
        let modes: Vec<&str> = self.modes.iter().map(|(m, _)| m.label()).collect();
        format!(
            "# Generated by pvlock-bench; run again with `vmtest run <this file>`\n\
             # (hackbench needs its --extra files, see results.json).\n\
             description = \"pvlock-bench repetition {} at {} overcommit: {}\"\n\
             timeout = {total}\n\
             # pvlock-bench runs again only the guests the platform lost.\n\
             retries = 0\n\n[l1]\nsteps = [\n  {},\n]\n{groups}",
            self.rep,
            oc.label(),
            modes.join(", "),
            l1.join(",\n  ")
        )
    }

    /// Writes the scenario to `dir/<name>.toml` and loads it through
    /// vmtest (which checks it).
    pub fn scenario(&self, s: &Settings, dir: &Path) -> Result<Scenario> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(format!("{}.toml", self.name()));
        std::fs::write(&path, self.scenario_toml(s))
            .with_context(|| format!("cannot write {}", path.display()))?;
        Scenario::load(&path)
    }
}

/// The runs, interleaved: repetition by repetition, every overcommit level
/// and, inside each L1 boot, every mode in turn (native, upstream PV,
/// pvlock-kickcpu, pvlock-hostkvm), so that the machine's drift hits every
/// mode alike.
pub fn plan(cells: &[Cell], reps: u32) -> Vec<Unit> {
    let mut units = Vec::new();
    for rep in 1..=reps {
        for oc in Overcommit::ALL {
            let mut modes = Vec::new();
            for mode in Mode::ALL {
                let ws: Vec<Workload> = Workload::RUN_ORDER
                    .into_iter()
                    .filter(|w| {
                        cells.contains(&Cell {
                            overcommit: oc,
                            workload: *w,
                            mode,
                        })
                    })
                    .collect();
                if !ws.is_empty() {
                    modes.push((mode, ws));
                }
            }
            if !modes.is_empty() {
                units.push(Unit {
                    rep,
                    overcommit: oc,
                    modes,
                    retry: 0,
                });
            }
        }
    }
    units
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_matrix_is_complete() {
        let c = cells(false);
        assert_eq!(c.len(), 4 * 4 * 3);
        let ids: std::collections::BTreeSet<String> = c.iter().map(Cell::id).collect();
        assert_eq!(ids.len(), 48);
        assert!(ids.contains("two-guests/hackbench/pvlock-hostkvm"));
        assert!(ids.contains("3x/uncontended/native"));
        let units = plan(&c, 3);
        assert_eq!(units.len(), 12);
        for u in &units {
            assert_eq!(u.modes.len(), 4);
            for (_, ws) in &u.modes {
                assert_eq!(ws, &Workload::RUN_ORDER.to_vec());
            }
        }
    }

    #[test]
    fn quick_matrix_answers_the_goals() {
        let c = cells(true);
        let ids: Vec<String> = c.iter().map(Cell::id).collect();
        for m in Mode::ALL {
            assert!(ids.contains(&format!("2x/contended/{}", m.label())));
        }
        assert!(ids.contains(&"1x/uncontended/native".to_string()));
        assert!(ids.contains(&"1x/uncontended/pvlock-hostkvm".to_string()));
        assert_eq!(c.len(), 6);
        let s = Settings::new(true, None, 1);
        assert_eq!(s.reps, 2);
        assert!(s.contended_secs <= 10 && s.uncontended_secs <= 10);
        let units = plan(&c, s.reps);
        assert_eq!(units.len(), 4);
        let est: f64 = units.iter().map(|u| u.expected_secs(&s)).sum();
        assert!(est < 480.0, "quick mode is estimated at {est} s");
        assert!(est > 240.0, "quick mode is estimated at {est} s");
        assert_eq!(Settings::new(false, None, 1).reps, 3);
        assert_eq!(Settings::new(true, Some(5), 1).reps, 5);
    }

    #[test]
    fn interleaved_order() {
        let units = plan(&cells(true), 2);
        let names: Vec<String> = units.iter().map(Unit::name).collect();
        assert_eq!(names, ["r1-1x", "r1-2x", "r2-1x", "r2-2x"]);
        let modes: Vec<Mode> = units[1].modes.iter().map(|(m, _)| *m).collect();
        assert_eq!(modes, Mode::ALL);
        let modes: Vec<Mode> = units[0].modes.iter().map(|(m, _)| *m).collect();
        assert_eq!(modes, [Mode::Native, Mode::HostKvm]);
        // Each repetition measures every cell once before the next begins.
        let per_rep: Vec<Vec<Cell>> = (1..=2)
            .map(|r| {
                units
                    .iter()
                    .filter(|u| u.rep == r)
                    .flat_map(Unit::cells)
                    .collect()
            })
            .collect();
        assert_eq!(per_rep[0], per_rep[1]);
        assert_eq!(per_rep[0].len(), 6);
    }

    #[test]
    fn make_up_runs() {
        let units = plan(&cells(false), 1);
        let u = units[1].retry_of(&[Mode::Upstream, Mode::HostKvm]);
        assert_eq!(u.name(), "r1-2x-retry1");
        assert_eq!(u.retry_of(&[Mode::HostKvm]).name(), "r1-2x-retry2");
        let modes: Vec<Mode> = u.modes.iter().map(|(m, _)| *m).collect();
        assert_eq!(modes, [Mode::Upstream, Mode::HostKvm]);
        let s = Settings::new(false, None, 1);
        let text = u.scenario_toml(&s);
        assert!(text.contains("load\", args = [\"host_kvm\""));
        assert!(!text.contains("nopvspin"));
        assert!(text.contains("retries = 0"));
        // The longest step: native hackbench, bound 150 + 20 s.
        assert_eq!(units[1].silence_bound(&s), 210);
        assert_eq!(u.retry_of(&[Mode::HostKvm]).silence_bound(&s), 120);
    }

    #[test]
    fn only_filters_cells() {
        let re = regex::Regex::new("^2x/contended/(native|pvlock-hostkvm)$").unwrap();
        let c = filter(cells(false), Some(&re));
        assert_eq!(c.len(), 2);
        let units = plan(&c, 1);
        assert_eq!(units.len(), 1);
        assert_eq!(units[0].modes.len(), 2);
    }

    #[test]
    fn scenarios_parse_and_say_what_they_run() {
        let dir = std::env::temp_dir().join(format!("pvlock-bench-test-{}", std::process::id()));
        let s = Settings::new(false, None, 1);
        for u in plan(&cells(false), 1) {
            let sc = u.scenario(&s, &dir).unwrap();
            assert_eq!(sc.name, u.name());
            let text = u.scenario_toml(&s);
            let plans = sc.plans();
            let l1 = &plans[0].1;
            // host_kvm is loaded after the stock-host modes, before its own.
            let hk = l1.find("load host_kvm force=1").unwrap();
            assert!(l1.find("kickcpu:").unwrap() < hk && hk < l1.find("hostkvm:").unwrap());
            assert!(text.contains("cmdline = \"nopvspin\""));
            let native = plans
                .iter()
                .find(|(p, _)| p == "plan/L2-native.sh")
                .unwrap();
            assert!(!native.1.contains("guest_pvlock"));
            let hostkvm = plans
                .iter()
                .find(|(p, _)| p == "plan/L2-hostkvm.sh")
                .unwrap();
            assert!(hostkvm.1.contains("load guest_pvlock"));
            let w = 2 * u.overcommit.vcpus();
            assert!(
                hostkvm.1.contains(&format!("locktorture spin_lock {w} 10")),
                "{}",
                hostkvm.1
            );
            assert!(native.1.contains(&format!("locktorture spin_lock {w} 5")));
            assert!(native.1.contains("locktorture spin_lock 1 10"));
            assert!(native
                .1
                .contains(&format!("hackbench {} 30 150", u.overcommit.vcpus())));
            // Contended last.
            assert!(
                native.1.find("hackbench").unwrap()
                    < native.1.find(&format!("spin_lock {w} ")).unwrap()
            );
            if u.overcommit == Overcommit::Two {
                assert_eq!(sc.l2_instances().len(), 8);
                assert!(sc.l2_instances().contains(&"upstream-2".to_string()));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

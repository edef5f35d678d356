// SPDX-License-Identifier: GPL-2.0

//! What the benchmark runs: the levels of overcommit, the arms (a lock, the
//! host it runs on and its parameters) measured side by side at each level,
//! the workloads, the balanced order, and the vmtest scenario of each L1
//! boot, built as vmtest's own types.
//!
//! Every arm gets the same guest plan: boot with one CPU online, (pvlock
//! arms: load guest_pvlock), bring the other CPUs online, settle, then per
//! workload a warm-up run that is discarded and the measured run. host_kvm
//! is loaded in L1 only around the guests of the arms that run on it, and
//! L1 records nothing while guests run (`[l1] record = false`).

use serde::{Deserialize, Serialize};
use vmtest::scenario::{Level1, Level2, Scenario, Step};

/// How many L2 vCPUs share L1's two guest CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Level {
    /// One guest with 2 vCPUs.
    #[serde(rename = "1x")]
    X1,
    /// One guest with 4 vCPUs.
    #[serde(rename = "2x")]
    X2,
    /// One guest with 6 vCPUs.
    #[serde(rename = "3x")]
    X3,
    /// Two guests with 2 vCPUs each, at once.
    #[serde(rename = "two")]
    Two,
}

impl Level {
    pub const ALL: [Level; 4] = [Level::X1, Level::X2, Level::X3, Level::Two];

    pub fn label(self) -> &'static str {
        match self {
            Level::X1 => "1x",
            Level::X2 => "2x",
            Level::X3 => "3x",
            Level::Two => "two",
        }
    }

    pub fn parse(s: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.label() == s)
    }

    /// Guests booted at once.
    pub fn guests(self) -> u32 {
        if self == Level::Two {
            2
        } else {
            1
        }
    }

    /// vCPUs of each guest.
    pub fn vcpus(self) -> u32 {
        match self {
            Level::X1 | Level::Two => 2,
            Level::X2 => 4,
            Level::X3 => 6,
        }
    }

    pub fn overcommitted(self) -> bool {
        self != Level::X1
    }
}

/// The lock an arm's guest runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lock {
    /// The native queued spinlock (`nopvspin`).
    Native,
    /// Upstream's PV spinlocks, as the kernel boots on KVM.
    Upstream,
    /// guest_pvlock, loaded after boot.
    Pvlock,
}

/// One arm: a lock, the host under it, and their parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arm {
    /// Unique at its level (`native`, `native~2`, `pvlock early_halt=1`, ...).
    pub name: String,
    pub lock: Lock,
    /// host_kvm is loaded in L1 while this arm's guests run, and unloaded
    /// after them; their QEMU enables pvlock for them (`kvm-pvlock=on`).
    pub host_kvm: bool,
    /// guest_pvlock's parameters.
    pub guest_params: Vec<String>,
    /// host_kvm's parameters.
    pub host_params: Vec<String>,
    /// vCPUs of its guest, where they differ from the level's (the limit
    /// arm `native-2vcpu`).
    pub vcpus: Option<u32>,
}

impl Arm {
    fn new(name: &str, lock: Lock, host_kvm: bool) -> Arm {
        Arm {
            name: name.into(),
            lock,
            host_kvm,
            guest_params: Vec::new(),
            host_params: Vec::new(),
            vcpus: None,
        }
    }

    pub fn vcpus(&self, level: Level) -> u32 {
        self.vcpus.unwrap_or(level.vcpus())
    }

    pub fn guests(&self, level: Level) -> u32 {
        if self.vcpus.is_some() {
            1
        } else {
            level.guests()
        }
    }

    /// An arm of pvlock with other parameters (`early_halt=1`,
    /// `host_kvm.yield_to_target=0`; space-separated), on host_kvm: a
    /// mechanism's "off" side against the arm `pvlock`.
    pub fn mechanism(spec: &str) -> Result<Arm, String> {
        let mut a = Arm::new(&format!("pvlock {spec}"), Lock::Pvlock, true);
        for p in spec.split_whitespace() {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| format!("'{p}' is not PARAM=VALUE"))?;
            let ok =
                |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            match k.strip_prefix("host_kvm.") {
                Some(hk) if ok(hk) && ok(v) => a.host_params.push(format!("{hk}={v}")),
                None if ok(k) && ok(v) => a.guest_params.push(p.to_string()),
                _ => {
                    return Err(format!(
                        "'{p}': a parameter name and value are letters, digits and '_'"
                    ))
                }
            }
        }
        if a.guest_params.is_empty() && a.host_params.is_empty() {
            return Err("a mechanism arm needs a parameter".into());
        }
        Ok(a)
    }
}

/// The arms of a level. The controls (`~2`) run the same code as the arm
/// they copy, at another place in the order: their ratio is what the
/// bench cannot resolve.
pub fn arms(level: Level, mechanisms: &[Arm], shape: Shape) -> Vec<Arm> {
    let mut stock = Arm::new("pvlock-stock", Lock::Pvlock, false);
    // What a host without host_kvm offers: HLT and KVM_HC_KICK_CPU.
    stock.guest_params.push("kick=1".into());
    let mut v = Vec::new();
    if level.overcommitted() {
        v.push(Arm::new("upstream", Lock::Upstream, false));
        v.push(Arm::new("upstream~2", Lock::Upstream, false));
        v.push(Arm::new("pvlock", Lock::Pvlock, true));
        v.push(stock);
        let mut limit = Arm::new("native-2vcpu", Lock::Native, false);
        limit.vcpus = Some(2);
        v.push(limit);
        v.extend(mechanisms.iter().cloned());
    } else {
        v.push(Arm::new("native", Lock::Native, false));
        v.push(Arm::new("native~2", Lock::Native, false));
        v.push(Arm::new("upstream", Lock::Upstream, false));
        // In a paired boot host_kvm is loaded under every arm.
        if shape != Shape::Paired {
            v.push(Arm::new("upstream+host_kvm", Lock::Upstream, true));
        }
        v.push(Arm::new("pvlock", Lock::Pvlock, true));
        v.push(stock);
    }
    v
}

/// A workload: what it runs and its parameters, all of them recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// locktorture `spin_lock`, 2 writers per vCPU, with the torture
    /// test's randomness off: no long holds, no shuffling of the writers,
    /// no real-time boost.
    Lt,
    /// pvlock-mmbench, 2 threads per vCPU, 256 KiB chunks: contention
    /// from the kernel's memory paths.
    Mm,
}

/// locktorture's parameters besides type, writers and duration.
pub const LT_PARAMS: [&str; 5] = [
    "long_hold=0",
    "shuffle_interval=0",
    "rt_boost=0",
    "stutter=0",
    "stat_interval=0",
];
pub const MM_CHUNK_KIB: u32 = 256;

impl Workload {
    pub const ALL: [Workload; 2] = [Workload::Lt, Workload::Mm];

    pub fn label(self) -> &'static str {
        match self {
            Workload::Lt => "lt",
            Workload::Mm => "mm",
        }
    }

    pub fn parse(s: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.label() == s)
    }

    pub fn unit(self) -> &'static str {
        match self {
            Workload::Lt => "writes/s",
            Workload::Mm => "chunks/s",
        }
    }

    /// The guest-library call: function and arguments.
    pub fn call(self, vcpus: u32, secs: u64) -> (&'static str, Vec<String>) {
        let n = (2 * vcpus).to_string();
        match self {
            Workload::Lt => {
                let mut a = vec!["spin_lock".to_string(), n, secs.to_string()];
                // (stutter=0 and stat_interval=0 are the library's own.)
                a.extend(LT_PARAMS[..3].iter().map(|p| p.to_string()));
                ("locktorture", a)
            }
            Workload::Mm => (
                "mmbench",
                vec![n, secs.to_string(), MM_CHUNK_KIB.to_string()],
            ),
        }
    }

    /// Every parameter, for results.json.
    pub fn params(self, vcpus: u32, secs: u64) -> String {
        match self {
            Workload::Lt => format!(
                "locktorture torture_type=spin_lock nwriters_stress={} {} duration={secs}s",
                2 * vcpus,
                LT_PARAMS.join(" ")
            ),
            Workload::Mm => format!(
                "pvlock-mmbench threads={} chunk_kib={MM_CHUNK_KIB} duration={secs}s",
                2 * vcpus
            ),
        }
    }
}

/// How long things take, in seconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Timing {
    /// After the guest's CPUs are online (and guest_pvlock loaded), before
    /// the first warm-up: the same for every arm.
    pub settle: u64,
    pub warmup: u64,
    pub measure: u64,
}

/// How arms share L1 boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Shape {
    /// Every arm of a level in one L1 boot per repetition, one after the
    /// other, each guest booted for its turn.
    Shared,
    /// Each arm's guests in an L1 boot of their own.
    Fresh,
    /// Every repetition of a level in one L1 boot: every arm's guests
    /// booted once, and their windows run one at a time, the others
    /// paused (vmtest's `interleave`), so that a repetition's arms are
    /// seconds apart, not minutes. host_kvm is loaded throughout; the
    /// arms without it are guests that do not enable it.
    Paired,
}

/// Williams' design for `k` treatments: orders in which each one comes
/// once in each place and after each other one equally often (k orders
/// for even k, 2k for odd k).
pub fn williams(k: usize) -> Vec<Vec<usize>> {
    if k == 0 {
        return Vec::new();
    }
    // 0, 1, k-1, 2, k-2, ...
    let mut first = vec![0usize];
    let (mut lo, mut hi) = (1usize, k - 1);
    while first.len() < k {
        first.push(lo);
        lo += 1;
        if first.len() < k {
            first.push(hi);
            hi -= 1;
        }
    }
    let mut rows: Vec<Vec<usize>> = (0..k)
        .map(|i| first.iter().map(|a| (a + i) % k).collect())
        .collect();
    if k % 2 == 1 {
        let rev: Vec<Vec<usize>> = rows
            .iter()
            .map(|r| r.iter().rev().copied().collect())
            .collect();
        rows.extend(rev);
    }
    rows
}

/// splitmix64: the shuffle of the rows a run uses, from a recorded seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

/// The order of the arms in each of `reps` repetitions: whole Williams
/// squares, in a shuffled order, and for the repetitions that do not
/// fill a square, rows drawn from a shuffled square.
pub fn orders(k: usize, reps: u32, seed: u64) -> Vec<Vec<usize>> {
    let rows = williams(k);
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    while out.len() < reps as usize {
        let mut square = rows.clone();
        rng.shuffle(&mut square);
        out.extend(square);
    }
    out.truncate(reps as usize);
    out
}

/// One repetition: the arms in the order they run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Round {
    pub rep: u32,
    /// Indices into the level's arms.
    pub order: Vec<usize>,
}

/// One L1 boot: a level and the repetitions it runs (one, or with
/// `paired` all of them, interleaved).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Unit {
    pub level: Level,
    pub rounds: Vec<Round>,
    pub paired: bool,
}

impl Unit {
    pub fn name(&self, arms: &[Arm]) -> String {
        let l = self.level.label();
        match self.rounds.as_slice() {
            _ if self.paired => format!("bench-{l}-paired"),
            [r] if r.order.len() == 1 => {
                format!("bench-{l}-r{}-{}", r.rep, slug(&arms[r.order[0]].name))
            }
            [r, ..] => format!("bench-{l}-r{}", r.rep),
            [] => format!("bench-{l}"),
        }
    }

    /// The arms the boot runs, each once, in the order of the first round.
    pub fn arms(&self) -> Vec<usize> {
        let mut v: Vec<usize> = Vec::new();
        for r in &self.rounds {
            for &i in &r.order {
                if !v.contains(&i) {
                    v.push(i);
                }
            }
        }
        v
    }
}

fn slug(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The L2 group name of arm `i` (group names are alphanumeric).
pub fn group(i: usize) -> String {
    format!("a{i}")
}

/// Every unit of the run, repetition by repetition, level by level.
pub fn units(levels: &[(Level, usize)], reps: u32, shape: Shape, seed: u64) -> Vec<Unit> {
    let per_level: Vec<Vec<Vec<usize>>> = levels
        .iter()
        .enumerate()
        .map(|(i, (_, k))| orders(*k, reps, seed.wrapping_add(i as u64)))
        .collect();
    let mut v = Vec::new();
    if shape == Shape::Paired {
        for (li, (level, _)) in levels.iter().enumerate() {
            v.push(Unit {
                level: *level,
                rounds: (0..reps)
                    .map(|rep| Round {
                        rep,
                        order: per_level[li][rep as usize].clone(),
                    })
                    .collect(),
                paired: true,
            });
        }
        return v;
    }
    for rep in 0..reps {
        for (li, (level, _)) in levels.iter().enumerate() {
            let order = &per_level[li][rep as usize];
            let unit = |order: Vec<usize>| Unit {
                level: *level,
                rounds: vec![Round { rep, order }],
                paired: false,
            };
            match shape {
                Shape::Fresh => v.extend(order.iter().map(|a| unit(vec![*a]))),
                _ => v.push(unit(order.clone())),
            }
        }
    }
    v
}

/// Bound on one arm's guests (boot to power-off), seconds.
fn guest_timeout(level: Level, arm: &Arm, workloads: &[Workload], t: &Timing) -> u64 {
    let slow = if arm.vcpus(level) * arm.guests(level) > 2 {
        2
    } else {
        1
    };
    let per_workload = (t.warmup + t.measure) * slow + 60;
    (120 + t.settle) * slow + per_workload * workloads.len() as u64
}

/// Bound on one window of a paired boot (its warm-up, its measured run,
/// the statistics), seconds.
fn window_timeout(level: Level, t: &Timing) -> u64 {
    let slow = if level.overcommitted() { 2 } else { 1 };
    ((t.warmup + t.measure) * 2 + 60) * slow
}

/// The guest plan of arm `arm` at `level`: in a paired boot, `reps`
/// windows per workload, each released by L1 (hold).
fn guest_steps(
    level: Level,
    arm: &Arm,
    workloads: &[Workload],
    t: &Timing,
    paired: Option<(u32, u64)>,
) -> Vec<Step> {
    let vcpus = arm.vcpus(level);
    let pv = arm.lock == Lock::Pvlock;
    let together = arm.guests(level) > 1 && paired.is_none();
    let (reps, hold) = paired.unwrap_or((1, 0));
    let hold_at = |k: usize| {
        let h = format!("h{k}");
        Step::call("hold", &[&h, &hold.to_string()], hold + 30).with_id(&h)
    };
    let mut s = vec![Step::call("info", &[], 60).with_id("boot-info")];
    // Paired: booted, then set up alone (interleave).
    if paired.is_some() {
        s.push(hold_at(0));
    }
    if pv {
        let mut args = vec!["guest_pvlock"];
        args.extend(arm.guest_params.iter().map(String::as_str));
        s.push(Step::call("load", &args, 120));
    }
    s.push(Step::call("online_cpus", &[], 180));
    s.push(Step::call("sleep", &[&t.settle.to_string()], t.settle + 30));
    s.push(Step::call("info", &[], 60));
    if pv {
        s.push(Step::call("stat", &[], 60).with_id("stat-0"));
    }
    let mut k = 1;
    for r in 0..reps {
        // The step ids of a paired boot carry the repetition.
        let sfx = if paired.is_some() {
            format!("-r{r}")
        } else {
            String::new()
        };
        for w in workloads {
            if paired.is_some() {
                s.push(hold_at(k));
                k += 1;
            }
            for (id, secs) in [
                (format!("warm-{}{sfx}", w.label()), t.warmup),
                (format!("{}{sfx}", w.label()), t.measure),
            ] {
                if together {
                    s.push(Step::call("barrier", &[&id, "300"], 320).with_id(&format!("bar-{id}")));
                }
                let (f, args) = w.call(vcpus, secs);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                s.push(Step::call(f, &args, secs * 4 + 120).with_id(&id));
            }
            if pv {
                s.push(Step::call("stat", &[], 60).with_id(&format!("stat-{}{sfx}", w.label())));
            }
        }
    }
    if paired.is_some() {
        s.push(hold_at(k));
    }
    if pv {
        s.push(Step::call("info", &[], 60).with_id("info-end"));
    }
    s.push(Step::call("warnings", &[], 60));
    s
}

/// The guests of arm `i` at `level`, in a group of their own.
fn group_of(level: Level, i: usize, arm: &Arm, steps: Vec<Step>) -> Level2 {
    let mut cmdline = "maxcpus=1".to_string();
    if arm.lock == Lock::Native {
        cmdline.push_str(" nopvspin");
    }
    Level2 {
        group: group(i),
        count: arm.guests(level),
        cpus: arm.vcpus(level),
        memory: "768M".into(),
        cpu: "host,-svm,tsc-deadline=off,pmu=off".into(),
        kvm_pvlock: arm.host_kvm,
        cmdline,
        qemu: String::new(),
        allow_kernel_problems: false,
        steps,
    }
}

/// The L1 plan of a paired boot: host_kvm loaded, every arm's guests
/// booted at once, then their windows one at a time (interleave): for
/// each repetition and workload, the arms in the repetition's order.
fn paired_plan(
    unit: &Unit,
    arms: &[Arm],
    workloads: &[Workload],
    t: &Timing,
) -> anyhow::Result<(Vec<Step>, Vec<Level2>, u64)> {
    let level = unit.level;
    let idx = unit.arms();
    if let Some(a) = idx
        .iter()
        .map(|&i| &arms[i])
        .find(|a| !a.host_params.is_empty())
    {
        anyhow::bail!(
            "arm '{}': host_kvm's parameters are the whole boot's in a paired boot; use --shape shared",
            a.name
        );
    }
    let windows: Vec<String> = unit
        .rounds
        .iter()
        .flat_map(|r| {
            workloads.iter().flat_map(move |_| {
                r.order.iter().map(move |&i| {
                    (1..=arms[i].guests(level))
                        .map(|k| format!("{}-{k}", group(i)))
                        .collect::<Vec<_>>()
                        .join("+")
                })
            })
        })
        .collect();
    let boot = 300 * if level.overcommitted() { 2 } else { 1 } + t.settle;
    // interleave's bound on each wait: the boots, a setup, a window.
    let wait = window_timeout(level, t).max(boot);
    // Boots at once; then each guest's setup and every window, one by one.
    let guests: u64 = idx.iter().map(|&i| u64::from(arms[i].guests(level))).sum();
    let total = boot + (guests + windows.len() as u64) * wait;
    let reps = unit.rounds.len() as u32;
    let l2 = idx
        .iter()
        .map(|&i| {
            let steps = guest_steps(level, &arms[i], workloads, t, Some((reps, total)));
            group_of(level, i, &arms[i], steps)
        })
        .collect();
    let groups: Vec<String> = idx.iter().map(|&i| group(i)).collect();
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    let mut args = vec![wait.to_string()];
    args.extend(windows);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut boot_all = Step::boot(&groups, total + 120).with_id("guests");
    boot_all.background = true;
    let l1 = vec![
        Step::call("load", &["host_kvm"], 60).with_id("hk-load"),
        boot_all,
        Step::call("interleave", &args, total).with_id("interleave"),
        Step::call("wait", &[], total + 120),
        Step::call("stat", &[], 60).with_id("hk-stat"),
    ];
    Ok((l1, l2, total + 300))
}

/// The vmtest scenario of `unit`.
pub fn scenario(
    unit: &Unit,
    arms: &[Arm],
    workloads: &[Workload],
    t: &Timing,
) -> anyhow::Result<Scenario> {
    let level = unit.level;
    let (mut l1, l2, total) = if unit.paired {
        paired_plan(unit, arms, workloads, t)?
    } else {
        one_by_one(unit, arms, workloads, t)
    };
    l1.push(Step::call("warnings", &[], 60));
    let names: Vec<String> = unit
        .rounds
        .iter()
        .map(|r| {
            let n: Vec<&str> = r.order.iter().map(|&i| arms[i].name.as_str()).collect();
            format!("{}: {}", r.rep, n.join(", then "))
        })
        .collect();
    let s = Scenario {
        name: unit.name(arms),
        description: format!(
            "pvlock-bench {}{}, repetition {}",
            level.label(),
            if unit.paired { " paired" } else { "" },
            names.join("; ")
        ),
        timeout: total,
        retries: 1,
        fast: false,
        expect_failure: None,
        allow_kernel_problems: false,
        programs: Vec::new(),
        l1: Level1 {
            cpus: 2,
            memory: "4G".into(),
            cmdline: String::new(),
            tcg: String::new(),
            record: false,
            steps: l1,
        },
        l2,
        expect: Vec::new(),
    };
    s.checked()
}

/// The L1 plan of a boot whose arms run one after the other, each
/// guest booted for its turn, host_kvm loaded around the arms on it.
fn one_by_one(
    unit: &Unit,
    arms: &[Arm],
    workloads: &[Workload],
    t: &Timing,
) -> (Vec<Step>, Vec<Level2>, u64) {
    let level = unit.level;
    let mut l1 = Vec::new();
    let mut l2 = Vec::new();
    let mut total = 120;
    for &i in &unit.arms() {
        let arm = &arms[i];
        let g = group(i);
        let to = guest_timeout(level, arm, workloads, t);
        total += to + 60;
        if arm.host_kvm {
            let mut args = vec!["host_kvm"];
            args.extend(arm.host_params.iter().map(String::as_str));
            l1.push(Step::call("load", &args, 60).with_id(&format!("hk-load-{g}")));
        }
        l1.push(Step::boot(&[&g], to).with_id(&format!("l2-{g}")));
        if arm.host_kvm {
            l1.push(Step::call("stat", &[], 60).with_id(&format!("hk-stat-{g}")));
            l1.push(Step::call("unload", &["host_kvm"], 60).with_id(&format!("hk-unload-{g}")));
        }
        l2.push(group_of(
            level,
            i,
            arm,
            guest_steps(level, arm, workloads, t, None),
        ));
    }
    (l1, l2, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timing = Timing {
        settle: 5,
        warmup: 3,
        measure: 10,
    };

    /// Each treatment once per place, and each ordered pair of neighbours
    /// equally often: what makes a Williams design balanced.
    fn balanced(rows: &[Vec<usize>], k: usize) {
        for p in 0..k {
            let mut seen: Vec<usize> = rows.iter().map(|r| r[p]).collect();
            seen.sort();
            let per = rows.len() / k;
            assert!(seen
                .chunks(per)
                .enumerate()
                .all(|(t, c)| c.iter().all(|x| *x == t)));
        }
        let mut pairs = std::collections::BTreeMap::new();
        for r in rows {
            for w in r.windows(2) {
                *pairs.entry((w[0], w[1])).or_insert(0) += 1;
            }
        }
        assert_eq!(pairs.len(), k * (k - 1), "every ordered pair follows");
        let n: Vec<i32> = pairs.values().copied().collect();
        assert!(n.iter().all(|c| *c == n[0]), "{pairs:?}");
    }

    #[test]
    fn williams_designs_are_balanced() {
        for k in 2..=7 {
            let rows = williams(k);
            assert_eq!(rows.len(), if k % 2 == 0 { k } else { 2 * k });
            balanced(&rows, k);
        }
    }

    #[test]
    fn orders_use_whole_squares_first_and_follow_the_seed() {
        let o = orders(6, 8, 7);
        assert_eq!(o.len(), 8);
        balanced(&o[..6], 6);
        assert_eq!(o, orders(6, 8, 7));
        assert_ne!(o, orders(6, 8, 8));
    }

    #[test]
    fn fresh_units_hold_one_arm() {
        let u = units(&[(Level::X1, 6), (Level::X2, 5)], 2, Shape::Fresh, 1);
        assert_eq!(u.len(), 2 * (6 + 5));
        assert!(u
            .iter()
            .all(|u| u.rounds.len() == 1 && u.rounds[0].order.len() == 1));
        let s = units(&[(Level::X1, 6)], 3, Shape::Shared, 1);
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn every_arm_gets_the_same_plan_but_its_lock() {
        let arms = arms(Level::X1, &[], Shape::Shared);
        let order: Vec<usize> = (0..arms.len()).collect();
        let s = scenario(
            &Unit {
                level: Level::X1,
                rounds: vec![Round { rep: 0, order }],
                paired: false,
            },
            &arms,
            &Workload::ALL,
            &T,
        )
        .unwrap();
        assert!(!s.l1.record);
        let plan = |g: &Level2| -> Vec<String> {
            g.steps
                .iter()
                .filter(|s| !matches!(s.run.as_deref(), Some("load" | "stat")))
                .filter(|s| s.id.as_deref() != Some("info-end"))
                .map(|s| format!("{:?} {:?}", s.run, s.args))
                .collect()
        };
        let first = plan(&s.l2[0]);
        assert!(s.l2.iter().all(|g| plan(g) == first));
        let lt = first.iter().find(|l| l.contains("locktorture")).unwrap();
        for p in ["long_hold=0", "shuffle_interval=0", "rt_boost=0"] {
            assert!(lt.contains(p), "{lt}");
        }
        // host_kvm only around the arms that run on it.
        let loads: Vec<&str> =
            s.l1.steps
                .iter()
                .filter_map(|s| s.id.as_deref())
                .filter(|i| i.starts_with("hk-load"))
                .collect();
        let on: Vec<String> = arms
            .iter()
            .enumerate()
            .filter(|(_, a)| a.host_kvm)
            .map(|(i, _)| format!("hk-load-{}", group(i)))
            .collect();
        assert_eq!(loads, on);
        assert!(
            s.l2.iter()
                .filter(|g| g.cmdline.contains("nopvspin"))
                .count()
                == 2
        );
    }

    /// A paired boot: every arm's guests booted once, one window per
    /// repetition and workload, in each repetition's order, every guest
    /// holding twice more than its windows (booted, set up); host_kvm
    /// loaded once.
    #[test]
    fn a_paired_boot_interleaves_every_repetition() {
        let arms = arms(Level::Two, &[], Shape::Paired);
        let u = units(&[(Level::Two, arms.len())], 3, Shape::Paired, 5);
        assert_eq!(u.len(), 1);
        let u = &u[0];
        assert!(u.paired && u.rounds.len() == 3);
        let ws = [Workload::Lt, Workload::Mm];
        let s = scenario(u, &arms, &ws, &T).unwrap();
        assert_eq!(s.l2.len(), arms.len());
        let il =
            s.l1.steps
                .iter()
                .find(|x| x.run.as_deref() == Some("interleave"))
                .unwrap();
        let windows = &il.args[1..];
        assert_eq!(windows.len(), 3 * ws.len() * arms.len());
        // Repetition 1, second workload: the arms in that round's order;
        // two guests of a group run together.
        let k = arms.len();
        let want: Vec<String> = u.rounds[1]
            .order
            .iter()
            .map(|&i| {
                let g = group(i);
                if arms[i].guests(Level::Two) == 2 {
                    format!("{g}-1+{g}-2")
                } else {
                    format!("{g}-1")
                }
            })
            .collect();
        assert_eq!(windows[3 * k..4 * k], want[..]);
        for g in &s.l2 {
            let holds = g
                .steps
                .iter()
                .filter(|x| x.run.as_deref() == Some("hold"))
                .count();
            assert_eq!(holds, 3 * ws.len() + 2, "{}", g.group);
            assert!(g.steps.iter().all(|x| x.run.as_deref() != Some("barrier")));
        }
        let loads =
            s.l1.steps
                .iter()
                .filter(|x| x.run.as_deref() == Some("load"))
                .count();
        assert_eq!(loads, 1);
        assert!(arms.iter().all(|a| a.name != "upstream+host_kvm"));
        let mech = Arm::mechanism("host_kvm.yield_to_target=0").unwrap();
        let arms = super::arms(Level::X2, &[mech], Shape::Paired);
        let u = units(&[(Level::X2, arms.len())], 1, Shape::Paired, 5);
        assert!(scenario(&u[0], &arms, &ws, &T).is_err());
    }

    #[test]
    fn mechanism_arms_parse_their_parameters() {
        let a = Arm::mechanism("early_halt=1 host_kvm.yield_to_target=0").unwrap();
        assert_eq!(a.guest_params, ["early_halt=1"]);
        assert_eq!(a.host_params, ["yield_to_target=0"]);
        assert!(Arm::mechanism("").is_err());
        assert!(Arm::mechanism("early_halt").is_err());
        assert!(Arm::mechanism("x=1;reboot").is_err());
    }
}

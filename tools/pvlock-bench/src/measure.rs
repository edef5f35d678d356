// SPDX-License-Identifier: GPL-2.0

//! What one L1 boot measured, read from vmtest's typed result: per arm and
//! workload, the rate of the measured run (warm-ups are discarded) and what
//! guest_pvlock and host_kvm counted during it.

use crate::plan::{group, Arm, Lock, Unit, Workload};
use pvlock_common::stats::{Kind, StatDoc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use vmtest::console::Node;
use vmtest::report::RunResult;

/// One arm's measured run of one workload in one repetition.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Measurement {
    pub level: crate::plan::Level,
    pub rep: u32,
    pub arm: String,
    /// Its place in the L1 boot's order (0: first).
    pub position: usize,
    pub workload: Workload,
    /// The rate (summed over the guests of `two`); `None`: lost, see
    /// `error`.
    pub value: Option<f64>,
    /// Each guest's rate.
    pub per_guest: Vec<f64>,
    pub error: Option<String>,
    /// guest_pvlock's counters over the run (first guest), from the
    /// snapshots around it.
    pub guest: BTreeMap<String, u64>,
    /// guest_pvlock's lock at the end (`pvlock`, `native`), or the lock
    /// ops the guest reported.
    pub lock_state: Option<String>,
}

impl Measurement {
    /// The share of the run that guest_pvlock spent on the native lock.
    pub fn native_share(&self) -> Option<f64> {
        let n = *self.guest.get("time_native_ns")? as f64;
        let p = *self.guest.get("time_pvlock_ns")? as f64;
        (n + p > 0.0).then(|| n / (n + p))
    }
}

/// host_kvm's counters over one arm's guests (it is loaded only for them).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HostCounts {
    pub level: crate::plan::Level,
    pub rep: u32,
    pub arm: String,
    pub counters: BTreeMap<String, u64>,
}

fn delta(before: &StatDoc, after: &StatDoc, kind: Kind) -> BTreeMap<String, u64> {
    let (Some(b), Some(a)) = (before.counters(kind), after.counters(kind)) else {
        return BTreeMap::new();
    };
    a.iter()
        .map(|(k, v)| (k.clone(), v.saturating_sub(*b.get(k).unwrap_or(&0))))
        .collect()
}

/// The rate of the measured run of `w` in window `k` of `n` on `node`
/// (each window has two runs of a workload: a warm-up, then the measured
/// one), or why there is none. A run that the lock failed (locktorture's
/// Fail, or no SUCCESS) is an error, not a rate.
fn rate(node: &Node, w: Workload, k: usize, n: usize) -> Result<f64, String> {
    match w {
        Workload::Lt => {
            let runs = &node.locktorture;
            if runs.len() != 2 * n {
                return Err(format!("{} locktorture runs, not {}", runs.len(), 2 * n));
            }
            let m = &runs[2 * k + 1];
            if m.fail != Some(0) || m.verdict.as_deref() != Some("SUCCESS") {
                return Err(format!(
                    "locktorture failed: fail={:?} verdict={:?}",
                    m.fail, m.verdict
                ));
            }
            let secs = m.window.unwrap_or(m.secs);
            match m.total {
                Some(t) if secs > 0.0 => Ok(t as f64 / secs),
                _ => Err("locktorture gave no total".into()),
            }
        }
        Workload::Mm => {
            let runs = &node.mmbench;
            if runs.len() != 2 * n {
                return Err(format!("{} mmbench runs, not {}", runs.len(), 2 * n));
            }
            let m = &runs[2 * k + 1];
            m.per_sec()
                .ok_or_else(|| m.error.clone().unwrap_or_else(|| "no count".into()))
        }
    }
}

/// Every measurement of one L1 boot, and host_kvm's counts per arm (per
/// boot in a paired one: it is loaded under every arm).
pub fn read(
    unit: &Unit,
    arms: &[Arm],
    workloads: &[Workload],
    result: &RunResult,
) -> (Vec<Measurement>, Vec<HostCounts>) {
    let mut ms = Vec::new();
    let mut hosts = Vec::new();
    let l1 = result.nodes.get("l1");
    let n = unit.rounds.len();
    for (k, round) in unit.rounds.iter().enumerate() {
        for (position, &i) in round.order.iter().enumerate() {
            let arm = &arms[i];
            let g = group(i);
            let nodes: Vec<Option<&Node>> = (1..=arm.guests(unit.level))
                .map(|x| result.nodes.get(&format!("{g}-{x}")))
                .collect();
            let first = nodes.first().copied().flatten();
            let stats = first.map(|n| n.stats.as_slice()).unwrap_or_default();
            let state = first.and_then(|n| {
                let mut s: Vec<&str> = n
                    .info
                    .get("adaptive_state")
                    .map(|v| vec![v.as_str()])
                    .unwrap_or_default();
                s.extend(n.info.get("lock_ops").map(String::as_str));
                s.first().map(|v| v.to_string())
            });
            for (wi, &w) in workloads.iter().enumerate() {
                let mut per_guest = Vec::new();
                let mut error = None;
                for (x, node) in nodes.iter().enumerate() {
                    match node.map(|node| rate(node, w, k, n)) {
                        Some(Ok(v)) => per_guest.push(v),
                        Some(Err(e)) => error = Some(format!("{g}-{}: {e}", x + 1)),
                        None => error = Some(format!("{g}-{} did not run", x + 1)),
                    }
                }
                // stat-0, then one after each window.
                let after = 1 + k * workloads.len() + wi;
                let guest = if arm.lock == Lock::Pvlock && stats.len() > after {
                    delta(&stats[after - 1], &stats[after], Kind::Guest)
                } else {
                    BTreeMap::new()
                };
                ms.push(Measurement {
                    level: unit.level,
                    rep: round.rep,
                    arm: arm.name.clone(),
                    position,
                    workload: w,
                    value: error.is_none().then(|| per_guest.iter().sum()),
                    per_guest,
                    error,
                    guest,
                    lock_state: state.clone(),
                });
            }
        }
    }
    // host_kvm's statistics: after each arm on it (hk-stat-GROUP), or
    // after a paired boot (hk-stat).
    let host_stat = |id: &str| {
        l1.and_then(|n| {
            let idx = n
                .steps
                .iter()
                .filter(|s| s.call.split_whitespace().next() == Some("stat"))
                .position(|s| s.id == id)?;
            n.stats.get(idx)
        })
    };
    let rep = unit.rounds.first().map_or(0, |r| r.rep);
    if unit.paired {
        if let Some(s) = host_stat("hk-stat") {
            hosts.push(HostCounts {
                level: unit.level,
                rep,
                arm: "every arm".into(),
                counters: s.counters(Kind::Host).cloned().unwrap_or_default(),
            });
        }
    } else {
        for i in unit.arms().into_iter().filter(|&i| arms[i].host_kvm) {
            if let Some(s) = host_stat(&format!("hk-stat-{}", group(i))) {
                hosts.push(HostCounts {
                    level: unit.level,
                    rep,
                    arm: arms[i].name.clone(),
                    counters: s.counters(Kind::Host).cloned().unwrap_or_default(),
                });
            }
        }
    }
    (ms, hosts)
}

// SPDX-License-Identifier: GPL-2.0

//! The statistics of the pvlock modules as values, whatever they were read
//! from: which module ([`Kind`]), its counters and its log2 histograms,
//! named as [`crate::abi`] names them.

use core::ffi::CStr;
use std::fmt;

use crate::abi;

pub use crate::abi::HIST_BUCKETS;

/// A name of [`crate::abi`] as text (they are ASCII).
pub const fn abi_name(c: &'static CStr) -> &'static str {
    match c.to_str() {
        Ok(s) => s,
        Err(_) => panic!("the names in abi.rs are ASCII"),
    }
}

/// Which module the statistics belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `guest_pvlock`, debugfs `pvlock/`.
    Guest,
    /// `host_kvm`, debugfs `pvlock_host/`.
    Host,
}

impl Kind {
    /// The short name used in headings, JSON keys and `--log` columns.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Guest => "guest",
            Kind::Host => "host",
        }
    }

    /// The module that keeps the statistics.
    pub fn module(self) -> &'static str {
        match self {
            Kind::Guest => "guest_pvlock",
            Kind::Host => "host_kvm",
        }
    }

    /// The module's counters, in the order it declares them (the guest's
    /// lock counters, then those of its switches to and from the native
    /// lock).
    pub fn counters(self) -> impl Iterator<Item = &'static str> + Clone {
        let (list, more): (&'static [&'static CStr], &'static [&'static CStr]) = match self {
            Kind::Guest => (&abi::GUEST_COUNTERS, &abi::GUEST_ADAPTIVE_COUNTERS),
            Kind::Host => (&abi::HOST_COUNTERS, &[]),
        };
        list.iter().chain(more).map(|c| abi_name(c))
    }

    /// The module's histograms, in the order it declares them.
    pub fn histograms(self) -> impl Iterator<Item = &'static str> + Clone {
        let list: &'static [&'static CStr] = match self {
            Kind::Guest => &abi::GUEST_HISTOGRAMS,
            Kind::Host => &abi::HOST_HISTOGRAMS,
        };
        list.iter().map(|c| abi_name(c))
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The unit of a counter or histogram, from its name.
pub fn unit_of(name: &str) -> Option<&'static str> {
    if name.starts_with("histo_") || name.ends_with("_ns") {
        Some("ns")
    } else {
        None
    }
}

/// One counter's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counter {
    pub name: String,
    pub value: u64,
}

/// One histogram: bucket `k` counts values in `[2^k, 2^(k+1))`; bucket 0
/// also counts 0 and the last bucket everything from `2^31` on
/// ([`abi::bucket`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    pub name: String,
    pub buckets: [u32; HIST_BUCKETS],
}

impl Histogram {
    /// The number of samples.
    pub fn total(&self) -> u64 {
        self.buckets.iter().map(|&b| u64::from(b)).sum()
    }

    /// The unit of the recorded values.
    pub fn unit(&self) -> &'static str {
        unit_of(&self.name).unwrap_or("ns")
    }
}

/// The pvlock counters KVM keeps per vCPU in its binary statistics
/// (`KVM_GET_STATS_FD`; KVM's per-VM debugfs directory sums them over the
/// VM's vCPUs), in the order tools show them
/// (Documentation/virt/kvm/pvlock.rst): lock waits and kicks.
pub const KVM_VCPU_COUNTERS: [&str; 7] = [
    "pvlock_waits",
    "pvlock_waits_at_once",
    "pvlock_waits_kicked",
    "pvlock_kicks_woken",
    "pvlock_kicks_held",
    "pvlock_kicks_failed",
    "pvlock_waits_bound",
];

/// KVM's per-VM statistics of the host's advice (`kernel/patches/0008-*`,
/// Documentation/virt/kvm/pvlock.rst "The advice"): the advice in force
/// (1: dedicated), its changes, and the last sample of the VM's load, in
/// thousandths of a CPU.
pub const KVM_VM_ADVICE: [&str; 5] = [
    "pvlock_advice_dedicated",
    "pvlock_advice_changes",
    "pvlock_load_demand",
    "pvlock_load_others",
    "pvlock_load_preempted",
];

/// KVM's per-vCPU log2 histogram of the nanoseconds from a kick to the end
/// of the wait it ended.
pub const KVM_VCPU_KICK_LATENCY_HIST: &str = "pvlock_kick_latency_hist";

/// pvlock-stat's `--json` snapshot as it reads back (`pvlock-stat
/// --json`: `{"debugfs": ROOT, "dirs": {"guest"|"host": {"path",
/// "counters", "info", "histograms": {NAME: {"unit", "buckets"}}}}}`): the
/// one type by which the harness keeps a snapshot (a `stat` step's
/// result) and the benchmark reads it. The counters' names are the ABI's
/// ([`Kind::counters`]); maps are ordered by name here, by the module's
/// order in pvlock-stat's own output.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StatDoc {
    /// Where debugfs was.
    pub debugfs: String,
    /// By kind (`guest`, `host`; [`Kind::label`]).
    pub dirs: std::collections::BTreeMap<String, StatDir>,
}

/// One module's directory in a [`StatDoc`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StatDir {
    /// The directory.
    pub path: String,
    /// Counter values by name.
    pub counters: std::collections::BTreeMap<String, u64>,
    /// The info files' contents by name.
    pub info: std::collections::BTreeMap<String, String>,
    /// Histograms by name.
    pub histograms: std::collections::BTreeMap<String, StatHistogram>,
}

/// One histogram in a [`StatDir`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StatHistogram {
    /// The unit of its values (`ns`).
    pub unit: String,
    /// Bucket counts ([`crate::abi::HIST_BUCKETS`] of them).
    pub buckets: Vec<u32>,
}

impl StatDoc {
    /// The counters of the directory of `kind` (empty if it has none).
    pub fn counters(&self, kind: Kind) -> Option<&std::collections::BTreeMap<String, u64>> {
        self.dirs.get(kind.label()).map(|d| &d.counters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_from_names() {
        assert_eq!(unit_of("time_blocked_ns"), Some("ns"));
        assert_eq!(unit_of("histo_wait"), Some("ns"));
        assert_eq!(unit_of("kicks"), None);
    }

    #[test]
    fn names_come_from_the_abi() {
        assert_eq!(Kind::Host.counters().count(), 23);
        assert_eq!(Kind::Host.counters().last(), Some("advice_shared"));
        assert_eq!(Kind::Guest.counters().count(), 29);
        assert!(Kind::Guest.counters().any(|c| c == "wakeups_lost"));
        assert_eq!(Kind::Host.counters().next(), Some("kicks"));
        assert_eq!(Kind::Guest.counters().next(), Some("taken_slow"));
        assert!(Kind::Guest
            .histograms()
            .eq(["histo_wait", "histo_spin", "histo_blocked"]));
        assert!(Kind::Host.histograms().eq(["histo_kick_latency"]));
    }
}

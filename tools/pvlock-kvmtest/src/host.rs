// SPDX-License-Identifier: GPL-2.0

//! host_kvm's statistics (debugfs `pvlock_host/`) and parameters
//! (`/sys/module/host_kvm/parameters/`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use pvlock_common::abi;
use pvlock_common::debugfs::{self, Dir};
use pvlock_common::quantile::histogram_bucket;
use pvlock_common::stats::{abi_name, Kind};

pub use pvlock_common::params::Params;

/// Default directory of host_kvm's statistics.
pub fn default_debugfs() -> PathBuf {
    Path::new(debugfs::DEFAULT_ROOT).join(Kind::Host.dir_name())
}

/// Default directory of host_kvm's parameters.
pub fn default_params() -> PathBuf {
    Params::of_module(Kind::Host.module()).dir
}

/// The kick latency histogram file: bucket k = [2^k, 2^(k+1)) ns.
const HISTO_KICK_LATENCY: &str = abi_name(abi::HOST_HISTOGRAMS[0]);

/// The debugfs directory of host_kvm.
#[derive(Debug, Clone)]
pub struct Debugfs {
    pub dir: PathBuf,
}

/// Values of every counter at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters(pub BTreeMap<&'static str, u64>);

impl Counters {
    /// How much each counter grew from `before` to `self`, by name.
    pub fn delta(&self, before: &Counters, name: &str) -> i128 {
        let get = |c: &Counters| c.0.get(name).copied().unwrap_or(0) as i128;
        get(self) - get(before)
    }
}

impl Debugfs {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Debugfs { dir: dir.into() }
    }

    fn open(&self) -> Result<Dir, debugfs::Error> {
        Dir::open(Kind::Host, &self.dir)
    }

    /// Every counter.
    pub fn counters(&self) -> Result<Counters> {
        let dir = self.open()?;
        let mut c = Counters::default();
        for name in Kind::Host.counters() {
            c.0.insert(name, dir.counter(name)?);
        }
        Ok(c)
    }

    /// Every counter, or `None` if the directory cannot be read.
    pub fn try_counters(&self) -> Option<Counters> {
        self.counters().ok()
    }

    /// The kick latency histogram.
    pub fn kick_latency(&self) -> Result<Vec<u64>> {
        let buckets = self.open()?.histogram(HISTO_KICK_LATENCY)?;
        Ok(buckets.into_iter().map(u64::from).collect())
    }
}

/// The bucket that holds the `p`-th percentile of the samples that went
/// into `after` since `before`, as the lower bound 2^k ns; `None` if there
/// were no samples.
pub fn histogram_percentile(before: &[u64], after: &[u64], p: f64) -> Option<u64> {
    let delta: Vec<u64> = after
        .iter()
        .zip(before.iter().chain(std::iter::repeat(&0)))
        .map(|(a, b)| a.saturating_sub(*b))
        .collect();
    histogram_bucket(&delta, p / 100.0).map(|k| 1u64 << k)
}

/// Sets host_kvm's `force` parameter for the duration of a case and puts
/// the old value back in [`ForceGuard::restore`] (or, failing that, on
/// drop). Does nothing when host_kvm is not loaded.
pub struct ForceGuard {
    params: Params,
    original: Option<bool>,
    restored: bool,
}

impl ForceGuard {
    /// Makes `force` read `value`; returns whether it had to be changed.
    pub fn set(params: &Params, value: bool) -> Result<(Self, bool)> {
        let original = params.read_bool("force")?;
        let guard = ForceGuard {
            params: params.clone(),
            original,
            restored: false,
        };
        let changed = original.is_some_and(|o| o != value);
        if changed {
            params.write_bool("force", value)?;
        }
        Ok((guard, changed))
    }

    /// Changes `force` again within the case.
    pub fn change(&self, value: bool) -> Result<()> {
        if self.original.is_none() {
            bail!("host_kvm is not loaded: no force parameter");
        }
        self.params.write_bool("force", value)
    }

    /// Puts the original value back.
    pub fn restore(mut self) -> Result<()> {
        self.restored = true;
        match self.original {
            Some(v) if self.params.read_bool("force")? != Some(v) => {
                self.params.write_bool("force", v)
            }
            _ => Ok(()),
        }
    }
}

impl Drop for ForceGuard {
    fn drop(&mut self) {
        if self.restored {
            return;
        }
        if let Some(v) = self.original {
            if let Err(e) = self.params.write_bool("force", v) {
                eprintln!("pvlock-kvmtest: cannot restore host_kvm force={v}: {e:#}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_percentiles() {
        let before = vec![0u64; 32];
        let mut after = vec![0u64; 32];
        after[10] = 50; // [1024, 2048) ns
        after[14] = 49;
        after[20] = 1;
        assert_eq!(histogram_percentile(&before, &after, 50.0), Some(1024));
        assert_eq!(histogram_percentile(&before, &after, 90.0), Some(1 << 14));
        assert_eq!(histogram_percentile(&before, &after, 100.0), Some(1 << 20));
        assert_eq!(histogram_percentile(&after, &after, 50.0), None);
    }

    #[test]
    fn counter_deltas() {
        let mut a = Counters::default();
        let mut b = Counters::default();
        a.0.insert("kicks", 5);
        b.0.insert("kicks", 1_000_005);
        assert_eq!(b.delta(&a, "kicks"), 1_000_000);
        assert_eq!(b.delta(&a, "yields"), 0);
    }

    #[test]
    fn force_guard_without_module_is_a_no_op() {
        let p = Params::new("/nonexistent/host_kvm/parameters");
        assert!(!p.module_loaded());
        let (g, changed) = ForceGuard::set(&p, false).unwrap();
        assert!(!changed);
        assert!(g.change(true).is_err());
        g.restore().unwrap();
    }
}

// SPDX-License-Identifier: GPL-2.0

//! host_kvm's statistics (debugfs `pvlock_host/`) and parameters
//! (`/sys/module/host_kvm/parameters/`).

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};

/// Default directory of host_kvm's statistics.
pub const DEFAULT_DEBUGFS: &str = "/sys/kernel/debug/pvlock_host";
/// Default directory of host_kvm's parameters.
pub const DEFAULT_PARAMS: &str = "/sys/module/host_kvm/parameters";

/// host_kvm's one-number statistics files.
pub const COUNTERS: [&str; 14] = [
    "kicks",
    "kicks_woken",
    "kicks_not_halted",
    "kicks_bad_target",
    "kicks_self",
    "kicks_bad_flags",
    "hypercalls_disabled",
    "yields",
    "yields_done",
    "get_param",
    "get_param_bad",
    "enable_cap",
    "enable_cap_bad",
    "kicks_done",
];

/// The kick latency histogram file: 32 u32, bucket k = [2^k, 2^(k+1)) ns.
pub const HISTO_KICK_LATENCY: &str = "histo_kick_latency";

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

    fn read_file(&self, name: &str) -> Result<String> {
        let path = self.dir.join(name);
        fs::read_to_string(&path).with_context(|| {
            format!(
                "cannot read host_kvm statistics {} (host_kvm loaded? debugfs mounted: \
                 mount -t debugfs debugfs /sys/kernel/debug? running as root?)",
                path.display()
            )
        })
    }

    /// One counter.
    pub fn counter(&self, name: &str) -> Result<u64> {
        let text = self.read_file(name)?;
        parse_counter(&text).with_context(|| format!("{}/{name}", self.dir.display()))
    }

    /// Every counter.
    pub fn counters(&self) -> Result<Counters> {
        let mut c = Counters::default();
        for name in COUNTERS {
            c.0.insert(name, self.counter(name)?);
        }
        Ok(c)
    }

    /// Every counter, or `None` if the directory cannot be read.
    pub fn try_counters(&self) -> Option<Counters> {
        self.counters().ok()
    }

    /// The kick latency histogram.
    pub fn kick_latency(&self) -> Result<Vec<u64>> {
        let text = self.read_file(HISTO_KICK_LATENCY)?;
        parse_histogram(&text)
            .with_context(|| format!("{}/{HISTO_KICK_LATENCY}", self.dir.display()))
    }
}

/// A counter file: one decimal number and a newline.
pub fn parse_counter(text: &str) -> Result<u64> {
    let t = text.trim();
    t.parse().with_context(|| format!("not a counter: {t:?}"))
}

/// A histogram file: 32 space-separated numbers.
pub fn parse_histogram(text: &str) -> Result<Vec<u64>> {
    let v = text
        .split_whitespace()
        .map(|w| {
            w.parse::<u64>()
                .with_context(|| format!("not a number: {w:?}"))
        })
        .collect::<Result<Vec<_>>>()?;
    if v.len() != 32 {
        bail!("{} buckets instead of 32", v.len());
    }
    Ok(v)
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
    let total: u64 = delta.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((p / 100.0 * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (k, n) in delta.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return Some(1u64 << k);
        }
    }
    None
}

/// host_kvm's parameters.
#[derive(Debug, Clone)]
pub struct Params {
    pub dir: PathBuf,
}

impl Params {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Params { dir: dir.into() }
    }

    /// Whether host_kvm is loaded: its parameter directory exists.
    pub fn module_loaded(&self) -> bool {
        self.dir.is_dir()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// A parameter as text, or `None` if the module is not loaded.
    pub fn read(&self, name: &str) -> Result<Option<String>> {
        let path = self.path(name);
        if !self.module_loaded() {
            return Ok(None);
        }
        let s =
            fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        Ok(Some(s.trim().to_string()))
    }

    /// A boolean parameter, or `None` if the module is not loaded.
    pub fn read_bool(&self, name: &str) -> Result<Option<bool>> {
        match self.read(name)? {
            None => Ok(None),
            Some(s) => parse_bool(&s)
                .map(Some)
                .with_context(|| format!("{}", self.path(name).display())),
        }
    }

    /// Sets a boolean parameter.
    pub fn write_bool(&self, name: &str, value: bool) -> Result<()> {
        let path = self.path(name);
        fs::write(&path, if value { "Y" } else { "N" })
            .with_context(|| format!("cannot write {} (root?)", path.display()))
    }

    /// Every parameter as `name=value`, for the log.
    pub fn describe(&self) -> String {
        let mut out = Vec::new();
        for name in ["force", "yield_to_target", "spin_threshold"] {
            if let Ok(Some(v)) = self.read(name) {
                out.push(format!("{name}={v}"));
            }
        }
        out.join(" ")
    }
}

/// A kernel boolean parameter: Y/N (also y/n/1/0).
pub fn parse_bool(s: &str) -> Result<bool> {
    match s.trim() {
        "Y" | "y" | "1" => Ok(true),
        "N" | "n" | "0" => Ok(false),
        other => bail!("not a boolean parameter value: {other:?}"),
    }
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
    fn parses_files() {
        assert_eq!(parse_counter("42\n").unwrap(), 42);
        assert!(parse_counter("x").is_err());
        let h: String = (0..32).map(|i| format!("{i} ")).collect();
        assert_eq!(parse_histogram(&format!("{h}\n")).unwrap()[31], 31);
        assert!(parse_histogram("1 2 3").is_err());
        assert!(parse_bool("Y\n").unwrap());
        assert!(!parse_bool("N").unwrap());
        assert!(parse_bool("maybe").is_err());
    }

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

// SPDX-License-Identifier: GPL-2.0

//! `results.json`: everything a benchmark run measured and how it went.

use crate::extract::{HostSide, Measurement};
use crate::matrix::Settings;
use crate::stats::Summary;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::PathBuf;

/// One L1 boot (vmtest scenario) of the benchmark.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UnitRecord {
    /// The scenario name (`r2-3x`, `r2-3x-retry1`).
    pub name: String,
    /// The repetition.
    pub rep: u32,
    /// The overcommit level.
    pub overcommit: String,
    /// The modes in the order their guests ran (repetition r rotates the
    /// canonical order left by r-1; a make-up run keeps its unit's order).
    pub modes: Vec<String>,
    /// The generated scenario file.
    pub scenario: PathBuf,
    /// vmtest's result file (`<runs>/<name>.json`, with the console logs
    /// beside it).
    pub result_file: PathBuf,
    /// How long it took.
    pub wall_secs: f64,
    /// vmtest's attempts (a platform failure is retried): reasons, wall
    /// time and console log of each.
    pub attempts: Value,
    /// vmtest's verdict: every guest finished its plan cleanly.
    pub passed: bool,
    /// Why vmtest failed it.
    pub reasons: Vec<String>,
    /// The harness could not run it at all.
    pub error: Option<String>,
    /// L1's side: host_kvm, its statistics, the hypercalls.
    pub host: HostSide,
    /// /proc/loadavg when the run started, and how many other QEMU
    /// processes were running on the machine then (noise).
    pub loadavg: String,
    /// Other QEMU processes on the machine when it started.
    pub other_qemus: usize,
}

/// A program of a macro workload (hackbench, stress-ng) and what it needs
/// in the initramfs.
pub use vmtest::programs::ProgramFiles;

/// The whole of `results.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Results {
    /// `pvlock-bench`.
    pub tool: String,
    /// Its version.
    pub version: String,
    /// When the run started (UTC).
    pub started: String,
    /// When it ended (UTC), if it did.
    pub finished: Option<String>,
    /// Its wall time so far.
    pub wall_secs: f64,
    /// False while running and after an interruption.
    pub complete: bool,
    /// The kernel release of L1 and L2.
    pub kernel: String,
    /// `git describe --always --dirty` of the repository (the modules
    /// measured).
    pub git: String,
    /// The kernel tree.
    pub kdir: PathBuf,
    /// Durations, bounds, repetitions.
    pub settings: Settings,
    /// `--only`.
    pub only: Option<String>,
    /// hackbench's files, if hackbench ran.
    pub hackbench: Option<ProgramFiles>,
    /// stress-ng's files, if stress-ng ran.
    #[serde(default)]
    pub stressng: Option<ProgramFiles>,
    /// What the run skipped or could not do.
    pub notes: Vec<String>,
    /// The cells measured (`2x/contended/native`, ...).
    pub matrix: Vec<String>,
    /// The runs in the order they ran (make-up runs included).
    pub order: Vec<String>,
    /// The runs, with how each went.
    pub units: Vec<UnitRecord>,
    /// One per cell and repetition: what the summary uses.
    pub measurements: Vec<Measurement>,
    /// Measurements a make-up run replaced (the platform lost the guest),
    /// and the make-up run's repeats of cells that had a result already.
    pub unused: Vec<Measurement>,
    /// Computed again from the measurements when the file is read back
    /// (JSON has no infinity for a starved writer's Max/Min).
    #[serde(skip_deserializing)]
    pub summary: Summary,
}

impl Results {
    /// The cells measured, from the measurements.
    pub fn cells(&self) -> Vec<crate::matrix::Cell> {
        let mut v: Vec<_> = self.measurements.iter().map(|m| m.key).collect();
        v.sort();
        v.dedup();
        v
    }

    /// Reads a `results.json` and recomputes its summary.
    pub fn load(path: &std::path::Path) -> anyhow::Result<Results> {
        use anyhow::Context;
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let mut r: Results = serde_json::from_str(&text)
            .with_context(|| format!("bad results file {}", path.display()))?;
        r.summary =
            crate::stats::summarize(&r.measurements, &r.unused, &r.cells(), r.settings.reps);
        Ok(r)
    }
}

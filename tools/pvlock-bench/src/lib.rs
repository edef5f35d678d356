// SPDX-License-Identifier: GPL-2.0

//! pvlock-bench: measures native spinlocks, upstream PV spinlocks and
//! pvlock (on a stock host and with host_kvm; adaptive, as it ships, and
//! held installed with `adaptive=0`) under vCPU overcommit, with
//! locktorture, hackbench and stress-ng, through the vmtest harness;
//! records what the adaptive lock ran during each workload; writes
//! `results.json`, `results.md` and SVG charts. See
//! `Documentation/pvlock/benchmark.rst`.

pub mod chart;
pub mod extract;
pub mod markdown;
pub mod matrix;
pub mod results_json;
pub mod stats;

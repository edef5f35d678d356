// SPDX-License-Identifier: GPL-2.0

//! pvlock-bench: measures native spinlocks, upstream PV spinlocks and
//! pvlock (on a stock host and with host_kvm) under vCPU overcommit, with
//! locktorture and hackbench, through the vmtest harness; writes
//! `results.json`, `results.md` and SVG charts. See
//! `Documentation/pvlock/benchmark.rst`.

pub mod chart;
pub mod extract;
pub mod markdown;
pub mod matrix;
pub mod results_json;
pub mod stats;

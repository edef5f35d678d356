// SPDX-License-Identifier: GPL-2.0

//! pvlock-bench: measures native spinlocks, upstream PV spinlocks and
//! pvlock (on a stock host and with host_kvm; adaptive, as it ships, held
//! installed with `adaptive=0`, and with its critical-section hint only
//! observed by the host, `hint=2`) under vCPU overcommit, with
//! locktorture, hackbench and stress-ng, through the vmtest harness;
//! records what the adaptive lock ran during each workload and what
//! host_kvm counted over each mode's guests (lock holders preempted,
//! preemptions deferred); writes `results.json`, `results.md` and SVG
//! charts. See
//! `Documentation/pvlock/benchmark.rst`.

pub mod chart;
pub mod extract;
pub mod markdown;
pub mod matrix;
pub mod results_json;
pub mod stats;

// SPDX-License-Identifier: GPL-2.0

//! What running a scenario produced: each [`Attempt`] and the scenario's
//! [`Report`]. Written by [`crate::run`], read by [`crate::retry`] (what
//! next), [`crate::rate`] and the programs; a leaf, so that none of them
//! imports another for its types.

use crate::console::Node;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// What one attempt's kernels reported, by kernel (`l1`, `<group>-<i>`),
/// and how the run ended: the result the scenario's expectations read
/// (as JSON paths) and the benchmark reads (as types).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunResult {
    pub scenario: String,
    pub wall_secs: f64,
    pub timed_out: bool,
    /// The kernel that went silent; the watchdog stopped the run.
    pub stalled: Option<String>,
    /// L1's QEMU exit status.
    pub qemu_status: Option<i32>,
    pub nodes: BTreeMap<String, Node>,
}

/// The outcome of one attempt.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Attempt {
    pub attempt: u32,
    pub reasons: Vec<String>,
    /// The attempt failed for the platform: its events (every failure
    /// follows from them).
    pub platform_failure: Option<String>,
    /// The signatures of those events ([`crate::platform::Signature`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub platform_signatures: Vec<String>,
    /// Platform events of a failed attempt that is not the platform's:
    /// failures that no event explains came with them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overruled: Vec<String>,
    /// Their signatures.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overruled_signatures: Vec<String>,
    pub wall_secs: f64,
    pub console_log: PathBuf,
}

impl Attempt {
    /// `pass`, `real` or `platform (<signatures>)`.
    pub fn verdict(&self) -> String {
        if self.reasons.is_empty() {
            "pass".into()
        } else if self.platform_failure.is_some() {
            format!("platform ({})", self.platform_signatures.join("; "))
        } else {
            "real".into()
        }
    }
}

/// The outcome of a scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: String,
    pub description: String,
    pub passed: bool,
    /// The reasons of the last attempt (for `expect_failure` scenarios,
    /// the failure that was expected).
    pub reasons: Vec<String>,
    pub attempts: Vec<Attempt>,
    pub wall_secs: f64,
    pub result: RunResult,
    /// The last attempt failed for platform reasons and retries remain,
    /// but this round's attempts are used up: run it again later, after
    /// the other scenarios, so that a bad spell of the machine does not
    /// use up every retry at once.
    pub deferred: bool,
    /// The last attempt was stopped because its console said nothing for
    /// this many seconds ([`Config::console_silence`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub console_silent: Option<u64>,
    #[serde(skip)]
    pub tails: Vec<(String, Vec<String>)>,
    /// Per kernel with a problem, its first report, condensed
    /// ([`crate::console::condensed_report`]).
    #[serde(skip)]
    pub first_reports: Vec<(String, Vec<String>)>,
}

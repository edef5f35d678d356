// SPDX-License-Identifier: GPL-2.0

//! Failure rates (`vmtest rate`): a scenario and its control run N times
//! each, alternating, with no retries; each attempt's verdict is tallied
//! (pass, real failure, or the platform signatures of a platform failure),
//! and the failure rate is given with its 95% Wilson score interval.

use crate::report::{Attempt, Report};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The normal quantile of a two-sided 95% interval.
const Z95: f64 = 1.959_963_984_540_054;

/// The 95% Wilson score interval of a proportion: `k` successes in `n`
/// trials; `None` without trials. Unlike the normal approximation it stays
/// within [0, 1] and is not empty at k = 0 or k = n, which matters for the
/// small counts VM runs give.
pub fn wilson(k: u32, n: u32) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let (k, n) = (f64::from(k.min(n)), f64::from(n));
    let p = k / n;
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    Some(((center - half).max(0.0), (center + half).min(1.0)))
}

/// One run of a scenario.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    /// 1, 2, ... in the order the runs of this scenario came.
    pub run: u32,
    /// `pass`, `real` or `platform (<signatures>)`.
    pub verdict: String,
    pub reasons: Vec<String>,
    /// Platform events of a real failure (see [`Attempt::overruled`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub overruled: Vec<String>,
    pub wall_secs: f64,
    pub console_log: PathBuf,
}

/// The tally of one scenario's runs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tally {
    pub scenario: String,
    pub attempts: u32,
    pub passes: u32,
    /// Failures by verdict: `real`, or the platform signatures of a
    /// platform failure (`+`-joined when it had several).
    pub failures: BTreeMap<String, u32>,
    /// Failures over attempts.
    pub failure_rate: Option<f64>,
    /// Its 95% Wilson score interval.
    pub wilson95: Option<(f64, f64)>,
    pub runs: Vec<RunRecord>,
}

/// What kind of failure an attempt was: `real`, or its signatures.
fn failure_key(a: &Attempt) -> String {
    if a.platform_failure.is_some() && !a.platform_signatures.is_empty() {
        a.platform_signatures.join("+")
    } else {
        "real".into()
    }
}

impl Tally {
    pub fn new(scenario: &str) -> Tally {
        Tally {
            scenario: scenario.to_string(),
            ..Default::default()
        }
    }

    /// Counts a scenario's report (one attempt: rates run without retries;
    /// a report with more counts each).
    pub fn add(&mut self, r: &Report) {
        let n = r.attempts.len();
        for (i, a) in r.attempts.iter().enumerate() {
            // The last attempt carries the scenario's verdict (for an
            // expect_failure scenario, "passed" is the wanted failure).
            let passed = if i + 1 == n {
                r.passed
            } else {
                a.reasons.is_empty()
            };
            self.attempts += 1;
            let verdict = if passed {
                self.passes += 1;
                "pass".to_string()
            } else {
                *self.failures.entry(failure_key(a)).or_default() += 1;
                a.verdict()
            };
            self.runs.push(RunRecord {
                run: self.runs.len() as u32 + 1,
                verdict,
                reasons: a.reasons.clone(),
                overruled: a.overruled.clone(),
                wall_secs: a.wall_secs,
                console_log: a.console_log.clone(),
            });
        }
        let failed = self.attempts - self.passes;
        self.failure_rate =
            (self.attempts > 0).then(|| f64::from(failed) / f64::from(self.attempts));
        self.wilson95 = wilson(failed, self.attempts);
    }

    /// One line for people.
    pub fn line(&self) -> String {
        let failures = if self.failures.is_empty() {
            "none".to_string()
        } else {
            self.failures
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let rate = match (self.failure_rate, self.wilson95) {
            (Some(r), Some((lo, hi))) => format!(
                "failure rate {:.1}% (95% Wilson interval {:.1}%-{:.1}%)",
                r * 100.0,
                lo * 100.0,
                hi * 100.0
            ),
            _ => "no attempts".into(),
        };
        format!(
            "{}: {} attempts, {} passes, failures: {failures}; {rate}",
            self.scenario, self.attempts, self.passes
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: (f64, f64), b: (f64, f64)) -> bool {
        (a.0 - b.0).abs() < 5e-5 && (a.1 - b.1).abs() < 5e-5
    }

    #[test]
    fn wilson_interval() {
        // Reference values (Wilson 1927; Newcombe 1998, table I).
        assert!(close(wilson(0, 10).unwrap(), (0.0, 0.27753)));
        assert!(close(wilson(10, 10).unwrap(), (0.72247, 1.0)));
        assert!(close(wilson(5, 10).unwrap(), (0.23659, 0.76341)));
        assert!(close(wilson(1, 20).unwrap(), (0.00888, 0.23613)));
        assert!(close(wilson(81, 263).unwrap(), (0.25529, 0.36621)));
        assert_eq!(wilson(0, 0), None);
        // Symmetric in k <-> n - k, and it narrows with n.
        let (lo, hi) = wilson(3, 40).unwrap();
        let (lo2, hi2) = wilson(37, 40).unwrap();
        assert!((lo - (1.0 - hi2)).abs() < 1e-12 && (hi - (1.0 - lo2)).abs() < 1e-12);
        let w = |k, n| {
            let (a, b) = wilson(k, n).unwrap();
            b - a
        };
        assert!(w(30, 400) < w(3, 40));
    }

    fn report(passed: bool, reasons: &[&str], signatures: &[&str]) -> Report {
        Report {
            scenario: "s".into(),
            description: String::new(),
            passed,
            reasons: vec![],
            attempts: vec![Attempt {
                attempt: 1,
                reasons: reasons.iter().map(|r| r.to_string()).collect(),
                platform_failure: (!signatures.is_empty()).then(|| "why".into()),
                platform_signatures: signatures.iter().map(|r| r.to_string()).collect(),
                ..Default::default()
            }],
            wall_secs: 1.0,
            result: Default::default(),
            deferred: false,
            console_silent: None,
            tails: vec![],
            first_reports: vec![],
        }
    }

    #[test]
    fn tallies_verdicts() {
        let mut t = Tally::new("s");
        t.add(&report(true, &[], &[]));
        t.add(&report(false, &["g-1: kernel problem: x"], &[]));
        t.add(&report(false, &["g-1: stopped"], &["l2-reset"]));
        t.add(&report(false, &["g-1: stopped"], &["l2-reset"]));
        assert_eq!((t.attempts, t.passes), (4, 1));
        assert_eq!(t.failures["real"], 1);
        assert_eq!(t.failures["l2-reset"], 2);
        assert_eq!(t.failure_rate, Some(0.75));
        assert!(close(t.wilson95.unwrap(), wilson(3, 4).unwrap()));
        assert_eq!(t.runs[2].verdict, "platform (l2-reset)");
        assert!(t
            .line()
            .contains("4 attempts, 1 passes, failures: l2-reset 2, real 1"));
        // An expect_failure scenario passes by failing.
        let mut e = Tally::new("broken");
        e.add(&report(true, &["g-1: kernel problem: rcu: INFO"], &[]));
        assert_eq!((e.passes, e.runs[0].verdict.as_str()), (1, "pass"));
    }
}

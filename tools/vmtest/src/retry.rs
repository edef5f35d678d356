// SPDX-License-Identifier: GPL-2.0

//! The retry policy: a run that failed for platform reasons
//! ([`crate::platform`]) is retried, as many times as the scenario allows
//! and while the retry budget lasts; after a number of attempts in a row it
//! is deferred to a later round, after the other scenarios ([`rounds`]), as
//! such failures come in spells.

use crate::report::{Attempt, Report};
use anyhow::Result;
use std::time::Instant;

/// What follows an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// The attempt stands: it passed, failed for a reason of its own, or
    /// its retries are used up.
    Stop,
    /// Run it again at once.
    Retry,
    /// Run it again in the next round, after the other scenarios.
    Defer,
    /// It would be retried, but the retry budget is spent: it stands.
    BudgetSpent,
}

/// The bounds on retries.
#[derive(Debug, Clone)]
pub struct Policy {
    /// Retries after platform failures (the first attempt not counted).
    pub retries: u32,
    /// No retry starts after this instant.
    pub deadline: Option<Instant>,
    /// Attempts in a row before a scenario that keeps failing for platform
    /// reasons is deferred; `None`: never defer.
    pub attempts_per_round: Option<u32>,
}

impl Policy {
    /// What follows attempt `attempt` (counting every round), the
    /// `this_round`-th of this round, at `now`. `platform_failure`: it
    /// failed for platform reasons; `wanted_shown`: the failure an
    /// `expect_failure` scenario wants showed, so that it passed (a
    /// platform failure must not pass it, nor be retried away).
    pub fn next(
        &self,
        platform_failure: bool,
        wanted_shown: bool,
        attempt: u32,
        this_round: u32,
        now: Instant,
    ) -> Next {
        let retryable = platform_failure && attempt <= self.retries && !wanted_shown;
        if !retryable {
            Next::Stop
        } else if self.deadline.is_some_and(|d| now >= d) {
            Next::BudgetSpent
        } else if self.attempts_per_round.is_some_and(|n| this_round >= n) {
            Next::Defer
        } else {
            Next::Retry
        }
    }
}

/// Runs scenarios `0..n` in rounds: round one runs each once (with its
/// retries in a row); a scenario whose report is `deferred` runs again in
/// the next round, after the others, with its attempts so far, until no
/// report is deferred. `announce` hears of each round after the first.
/// Ends: every deferred report has used a retry, and retries are finite.
pub fn rounds(
    n: usize,
    mut run_one: impl FnMut(usize, Vec<Attempt>) -> Result<Report>,
    mut announce: impl FnMut(u32, &[usize]),
) -> Result<Vec<Report>> {
    let mut reports: Vec<Option<Report>> = vec![None; n];
    let mut pending: Vec<usize> = (0..n).collect();
    let mut round = 1;
    while !pending.is_empty() {
        if round > 1 {
            announce(round, &pending);
        }
        let mut deferred = Vec::new();
        for &i in &pending {
            let earlier = reports[i].take().map(|r| r.attempts).unwrap_or_default();
            let r = run_one(i, earlier)?;
            if r.deferred {
                deferred.push(i);
            }
            reports[i] = Some(r);
        }
        pending = deferred;
        round += 1;
    }
    Ok(reports.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn platform_failures_are_retried_within_the_bounds() {
        let now = Instant::now();
        let p = Policy {
            retries: 2,
            deadline: Some(now + Duration::from_secs(60)),
            attempts_per_round: Some(2),
        };
        assert_eq!(p.next(false, false, 1, 1, now), Next::Stop);
        assert_eq!(p.next(true, false, 1, 1, now), Next::Retry);
        assert_eq!(p.next(true, true, 1, 1, now), Next::Stop);
        assert_eq!(p.next(true, false, 2, 2, now), Next::Defer);
        assert_eq!(p.next(true, false, 3, 1, now), Next::Stop);
        let late = now + Duration::from_secs(60);
        assert_eq!(p.next(true, false, 1, 1, late), Next::BudgetSpent);
        let forever = Policy {
            deadline: None,
            attempts_per_round: None,
            ..p
        };
        assert_eq!(forever.next(true, false, 2, 2, late), Next::Retry);
    }

    #[test]
    fn deferred_scenarios_run_again_after_the_others() {
        // Scenario 0 fails for the platform in rounds one and two, then
        // passes; scenario 1 passes at once; scenario 2 gives up in round
        // two (retries used up).
        let mut order = Vec::new();
        let mut rounds_seen = Vec::new();
        let reports = rounds(
            3,
            |i, earlier| {
                order.push((i, earlier.len()));
                let mut attempts = earlier;
                attempts.push(Attempt {
                    attempt: attempts.len() as u32 + 1,
                    wall_secs: 1.0,
                    ..Default::default()
                });
                let deferred = match i {
                    0 => attempts.len() < 3,
                    2 => attempts.len() < 2,
                    _ => false,
                };
                Ok(Report {
                    scenario: i.to_string(),
                    description: String::new(),
                    passed: i != 2,
                    reasons: vec![],
                    attempts,
                    wall_secs: 0.0,
                    result: Default::default(),
                    deferred,
                    console_silent: None,
                    tails: vec![],
                    first_reports: vec![],
                })
            },
            |round, pending| rounds_seen.push((round, pending.to_vec())),
        )
        .unwrap();
        assert_eq!(order, [(0, 0), (1, 0), (2, 0), (0, 1), (2, 1), (0, 2)]);
        assert_eq!(rounds_seen, [(2, vec![0, 2]), (3, vec![0])]);
        let tries: Vec<_> = reports.iter().map(|r| r.attempts.len()).collect();
        assert_eq!(tries, [3, 1, 2]);
        assert!(reports.iter().all(|r| !r.deferred));
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Ratios and verdicts. A ratio is taken inside one repetition (the two
//! arms ran in the same L1 boot, or in the same block of fresh boots), so
//! that the machine's drift cancels; a goal is decided on the ratios of
//! every repetition:
//!
//! - the exact Wilcoxon signed-rank test of the log ratios against the
//!   goal (two-sided: the bench says PASS or MISS, whichever the data
//!   show), its p-values adjusted by Holm's method over the goals of one
//!   level (the family), at [`ALPHA`];
//! - and only when the effect (the median's distance from the goal) is
//!   larger than the spread of the level's same-code control, and with at
//!   least [`MIN_DECIDE`] repetitions; below [`MIN_SHOW`] no verdict of
//!   any kind.

use crate::measure::Measurement;
use crate::plan::{Level, Workload};
use serde::{Deserialize, Serialize};

/// Family-wise error rate of one level's goals.
pub const ALPHA: f64 = 0.10;
/// Coverage of the intervals shown.
pub const COVERAGE: f64 = 0.90;
/// Repetitions a verdict needs.
pub const MIN_DECIDE: usize = 8;
/// Repetitions below which nothing is said, not even "likely".
pub const MIN_SHOW: usize = 5;
/// The resolution goal: the control's interval lies within this.
pub const RESOLUTION: (f64, f64) = (0.95, 1.05);

pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// P(Bin(n, 1/2) <= j).
fn binom_half_cdf(n: usize, j: usize) -> f64 {
    let mut c = 1.0f64;
    let mut sum = 0.0;
    for k in 0..=j.min(n) {
        if k > 0 {
            c = c * (n - k + 1) as f64 / k as f64;
        }
        sum += c;
    }
    sum / 2f64.powi(n as i32)
}

/// The distribution-free interval of the median, [x_(k), x_(n+1-k)] with
/// the largest k whose coverage is at least [`COVERAGE`] (the whole range
/// when even that falls short), and its coverage.
pub fn interval(v: &[f64]) -> Option<(f64, f64, f64)> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let mut k = 1;
    while k < n / 2 && 1.0 - 2.0 * binom_half_cdf(n, k) >= COVERAGE {
        k += 1;
    }
    let cov = 1.0 - 2.0 * binom_half_cdf(n, k - 1);
    Some((s[k - 1], s[n - k], cov))
}

/// Exact one-sided p-values of the Wilcoxon signed-rank test of `x`
/// (differences; zeros dropped, ties given their mean rank): P(W+ >= w)
/// and P(W+ <= w) when every sign is equally likely.
pub fn wilcoxon(x: &[f64]) -> (f64, f64) {
    let mut d: Vec<f64> = x.iter().copied().filter(|v| *v != 0.0).collect();
    let n = d.len();
    if n == 0 {
        return (1.0, 1.0);
    }
    d.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
    // Ranks doubled, so that mean ranks of ties stay integers.
    let mut r2 = vec![0u64; n];
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && d[j + 1].abs() == d[i].abs() {
            j += 1;
        }
        for r in r2.iter_mut().take(j + 1).skip(i) {
            *r = (i + j + 2) as u64;
        }
        i = j + 1;
    }
    let w: u64 = d
        .iter()
        .zip(&r2)
        .filter(|(v, _)| **v > 0.0)
        .map(|(_, r)| r)
        .sum();
    // The null distribution of W+ (doubled): counts of each sum.
    let total: u64 = r2.iter().sum();
    let mut counts = vec![0f64; total as usize + 1];
    counts[0] = 1.0;
    for &r in &r2 {
        for s in (r as usize..=total as usize).rev() {
            counts[s] += counts[s - r as usize];
        }
    }
    let all = 2f64.powi(n as i32);
    let ge: f64 = counts[w as usize..].iter().sum();
    let le: f64 = counts[..=w as usize].iter().sum();
    (ge / all, le / all)
}

/// Holm's step-down adjustment.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut idx: Vec<usize> = (0..m).collect();
    idx.sort_by(|a, b| p[*a].total_cmp(&p[*b]));
    let mut out = vec![0.0; m];
    let mut run = 0.0f64;
    for (rank, &i) in idx.iter().enumerate() {
        run = run.max(((m - rank) as f64 * p[i]).min(1.0));
        out[i] = run;
    }
    out
}

/// What a goal compares.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Goal {
    pub level: Level,
    pub workload: Workload,
    pub num: String,
    pub den: String,
    /// The ratio num/den must be at least this; for a resolution goal,
    /// the lower end of the range its interval must lie in.
    pub target: f64,
    pub resolution: bool,
    /// What it means, for the table.
    pub what: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    Pass,
    Miss,
    /// The test or the control's spread does not decide.
    Undecided,
    /// 5 to 7 repetitions: which side, not decided.
    LikelyPass,
    LikelyMiss,
    /// Fewer than [`MIN_SHOW`] repetitions.
    TooFew,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Miss => "MISS",
            Verdict::Undecided => "undecided",
            Verdict::LikelyPass => "(pass?)",
            Verdict::LikelyMiss => "(miss?)",
            Verdict::TooFew => "-",
        }
    }
}

/// A goal as the run decided it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Decided {
    pub goal: Goal,
    /// The ratio in each repetition that measured both arms.
    pub ratios: Vec<(u32, f64)>,
    pub median: Option<f64>,
    /// The interval of the median and its coverage.
    pub interval: Option<(f64, f64, f64)>,
    /// Two-sided p of the signed-rank test, and Holm's adjustment in the
    /// level's family.
    pub p: Option<f64>,
    pub p_holm: Option<f64>,
    /// The control's spread at this level and workload (a factor: 1.03
    /// is +-3%).
    pub spread: Option<f64>,
    pub verdict: Verdict,
    pub why: String,
}

/// The ratios num/den, repetition by repetition.
pub fn ratios(
    ms: &[Measurement],
    level: Level,
    w: Workload,
    num: &str,
    den: &str,
) -> Vec<(u32, f64)> {
    let value = |arm: &str, rep: u32| {
        ms.iter()
            .find(|m| m.level == level && m.workload == w && m.arm == arm && m.rep == rep)
            .and_then(|m| m.value)
    };
    let mut reps: Vec<u32> = ms
        .iter()
        .filter(|m| m.level == level)
        .map(|m| m.rep)
        .collect();
    reps.sort();
    reps.dedup();
    reps.into_iter()
        .filter_map(|r| match (value(num, r), value(den, r)) {
            (Some(a), Some(b)) if b > 0.0 => Some((r, a / b)),
            _ => None,
        })
        .collect()
}

/// Decides every goal; `goals` of one level form one family.
pub fn decide(ms: &[Measurement], goals: &[Goal]) -> Vec<Decided> {
    let mut out: Vec<Decided> = goals
        .iter()
        .map(|g| {
            let rs = ratios(ms, g.level, g.workload, &g.num, &g.den);
            let v: Vec<f64> = rs.iter().map(|(_, r)| *r).collect();
            let x: Vec<f64> = v.iter().map(|r| r.ln() - g.target.ln()).collect();
            let p = (v.len() >= MIN_SHOW && !g.resolution).then(|| {
                let (ge, le) = wilcoxon(&x);
                (2.0 * ge.min(le)).min(1.0)
            });
            Decided {
                goal: g.clone(),
                median: median(&v),
                interval: interval(&v),
                ratios: rs,
                p,
                p_holm: None,
                spread: None,
                verdict: Verdict::TooFew,
                why: String::new(),
            }
        })
        .collect();
    // The controls' spread, per level and workload.
    let spreads: Vec<Option<f64>> = out
        .iter()
        .map(|d| {
            out.iter()
                .find(|c| {
                    c.goal.resolution
                        && c.goal.level == d.goal.level
                        && c.goal.workload == d.goal.workload
                })
                .filter(|c| c.ratios.len() >= MIN_SHOW)
                .and_then(|c| c.interval)
                .map(|(lo, hi, _)| (1.0 / lo).max(hi).max(1.0))
        })
        .collect();
    for (d, s) in out.iter_mut().zip(spreads) {
        d.spread = s;
    }
    for level in Level::ALL {
        let fam: Vec<usize> = (0..out.len())
            .filter(|&i| out[i].goal.level == level && out[i].p.is_some())
            .collect();
        let adj = holm(
            &fam.iter()
                .map(|&i| out[i].p.unwrap_or(1.0))
                .collect::<Vec<_>>(),
        );
        for (&i, a) in fam.iter().zip(adj) {
            out[i].p_holm = Some(a);
        }
    }
    for d in &mut out {
        (d.verdict, d.why) = verdict(d);
    }
    out
}

fn verdict(d: &Decided) -> (Verdict, String) {
    let n = d.ratios.len();
    let (Some(med), Some((lo, hi, _))) = (d.median, d.interval) else {
        return (Verdict::TooFew, "no repetition measured both arms".into());
    };
    if n < MIN_SHOW {
        return (Verdict::TooFew, format!("{n} repetitions"));
    }
    let g = &d.goal;
    if g.resolution {
        let inside = lo >= RESOLUTION.0 && hi <= RESOLUTION.1;
        return match (inside, n >= MIN_DECIDE) {
            (true, true) => (Verdict::Pass, String::new()),
            (false, true) => (Verdict::Miss, String::new()),
            (true, false) => (Verdict::LikelyPass, format!("{n} repetitions")),
            (false, false) => (Verdict::LikelyMiss, format!("{n} repetitions")),
        };
    }
    let above = med >= g.target;
    let effect = (med / g.target).ln().abs();
    let Some(spread) = d.spread else {
        return (Verdict::Undecided, "no control at this level".into());
    };
    if effect <= spread.ln() {
        return (
            Verdict::Undecided,
            format!(
                "effect {:.1}% within the control's spread {:.1}%",
                effect.exp_m1() * 100.0,
                (spread - 1.0) * 100.0
            ),
        );
    }
    if n < MIN_DECIDE {
        let v = if above {
            Verdict::LikelyPass
        } else {
            Verdict::LikelyMiss
        };
        return (v, format!("{n} repetitions"));
    }
    match d.p_holm {
        Some(p) if p <= ALPHA => (
            if above { Verdict::Pass } else { Verdict::Miss },
            String::new(),
        ),
        Some(p) => (Verdict::Undecided, format!("p {p:.3} after Holm")),
        None => (Verdict::Undecided, "no test".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Level;

    #[test]
    fn wilcoxon_matches_its_tables() {
        // All 8 above: 1/256 each way round.
        let (ge, le) = wilcoxon(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        assert!((ge - 1.0 / 256.0).abs() < 1e-12);
        assert!((le - 1.0).abs() < 1e-12);
        // n = 10, W+ = 45 (only rank 10 negative): P(W+ >= 45) = 5/1024
        // (sums 45..55 come from the subsets missing at most 10 in ranks).
        let x: Vec<f64> = (1..=10)
            .map(|i| if i == 10 { -(i as f64) } else { i as f64 })
            .collect();
        let (ge, _) = wilcoxon(&x);
        assert!((ge - 0.04199).abs() < 1e-4, "{ge}");
        // Ties get mean ranks and the p-values stay in [0, 1].
        let (ge, le) = wilcoxon(&[1.0, -1.0, 1.0, 2.0, 2.0]);
        assert!(ge > 0.0 && ge <= 1.0 && le > 0.0 && le <= 1.0);
    }

    #[test]
    fn holm_is_step_down_and_monotone() {
        let a = holm(&[0.01, 0.04, 0.03, 0.2]);
        assert_eq!(a, vec![0.04, 0.09, 0.09, 0.2]);
    }

    #[test]
    fn intervals_cover_as_claimed() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        let (lo, hi, cov) = interval(&v).unwrap();
        assert_eq!((lo, hi), (2.0, 9.0));
        assert!((COVERAGE..0.99).contains(&cov), "{cov}");
        let (lo, hi, _) = interval(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!((lo, hi), (1.0, 3.0));
    }

    fn m(arm: &str, rep: u32, v: f64) -> Measurement {
        Measurement {
            level: Level::X2,
            rep,
            arm: arm.into(),
            position: 0,
            workload: Workload::Lt,
            value: Some(v),
            per_guest: vec![v],
            error: None,
            guest: Default::default(),
            lock_state: None,
        }
    }

    fn goal(num: &str, den: &str, target: f64, resolution: bool) -> Goal {
        Goal {
            level: Level::X2,
            workload: Workload::Lt,
            num: num.into(),
            den: den.into(),
            target,
            resolution,
            what: String::new(),
        }
    }

    fn run(n: u32, pv: f64, noise: f64) -> Vec<Decided> {
        let mut ms = Vec::new();
        for r in 0..n {
            // Noise alternating in sign and growing: the same for all arms'
            // ratios in kind, different in size.
            let e = 1.0 + noise * (r as f64 / n as f64) * if r % 2 == 0 { 1.0 } else { -1.0 };
            ms.push(m("upstream", r, 100.0));
            ms.push(m("upstream~2", r, 100.0 * e));
            ms.push(m("pvlock", r, 100.0 * pv * e));
        }
        decide(
            &ms,
            &[
                goal("upstream~2", "upstream", 0.95, true),
                goal("pvlock", "upstream", 1.2, false),
            ],
        )
    }

    #[test]
    fn a_clear_effect_passes_and_a_clear_shortfall_misses() {
        let d = run(10, 1.5, 0.02);
        assert_eq!(d[0].verdict, Verdict::Pass, "{:?}", d[0]);
        assert_eq!(d[1].verdict, Verdict::Pass, "{:?}", d[1]);
        let d = run(10, 0.9, 0.02);
        assert_eq!(d[1].verdict, Verdict::Miss, "{:?}", d[1]);
    }

    #[test]
    fn an_effect_inside_the_controls_spread_is_undecided() {
        // The control moves by up to 20%; pvlock is 10% above the goal.
        let d = run(10, 1.32, 0.2);
        assert_eq!(d[0].verdict, Verdict::Miss);
        assert_eq!(d[1].verdict, Verdict::Undecided, "{:?}", d[1]);
        assert!(d[1].why.contains("spread"), "{}", d[1].why);
    }

    #[test]
    fn too_few_repetitions_decide_nothing() {
        assert_eq!(run(4, 1.5, 0.01)[1].verdict, Verdict::TooFew);
        assert_eq!(run(6, 1.5, 0.01)[1].verdict, Verdict::LikelyPass);
    }
}

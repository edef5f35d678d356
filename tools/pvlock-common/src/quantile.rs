// SPDX-License-Identifier: GPL-2.0

//! Medians and percentiles. Two kinds, for two uses:
//!
//! - [`nearest_rank`] is always one of the samples (the median of an even
//!   count is the lower middle one): latencies, where a value that was
//!   measured says more than a mean of two; [`histogram_bucket`] is the
//!   same rule over the buckets of a histogram.
//! - [`median_midpoint`] is the mean of the middle two for an even count:
//!   the benchmark's repetitions, where there are few values.

/// The nearest-rank `p`-th percentile (0 < p <= 100) of sorted samples:
/// the sample of rank ceil(p/100 * n), counting from 1.
pub fn nearest_rank<T: Copy>(sorted: &[T], p: f64) -> T {
    assert!(!sorted.is_empty() && p > 0.0 && p <= 100.0);
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The bucket of a histogram that holds quantile `q` (0 < q <= 1) of its
/// samples, by nearest rank; `None` if it has none.
pub fn histogram_bucket<T: Copy + Into<u64>>(buckets: &[T], q: f64) -> Option<usize> {
    let total: u64 = buckets.iter().map(|&b| b.into()).sum();
    if total == 0 {
        return None;
    }
    let want = ((total as f64) * q).ceil().max(1.0) as u64;
    let mut cum = 0u64;
    for (k, &b) in buckets.iter().enumerate() {
        cum += b.into();
        if cum >= want {
            return Some(k);
        }
    }
    Some(buckets.len() - 1)
}

/// The median of sorted values, not empty and without NaN: the middle one,
/// or for an even count the mean of the middle two (the upper one if
/// either is infinite, which sorts last: a mean with it would say nothing
/// more).
pub fn median_midpoint(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    assert!(n > 0);
    let (lo, hi) = (sorted[(n - 1) / 2], sorted[n / 2]);
    if n % 2 == 1 || lo.is_infinite() || hi.is_infinite() {
        hi
    } else {
        (lo + hi) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let s: Vec<i64> = (1..=100).collect();
        assert_eq!(nearest_rank(&s, 50.0), 50);
        assert_eq!(nearest_rank(&s, 90.0), 90);
        assert_eq!(nearest_rank(&s, 99.0), 99);
        assert_eq!(nearest_rank(&s, 100.0), 100);
        assert_eq!(nearest_rank(&[7], 50.0), 7);
        assert_eq!(nearest_rank(&[1, 2], 50.0), 1);
        assert_eq!(nearest_rank(&[1, 2, 3], 50.0), 2);
        assert_eq!(nearest_rank(&[1, 2, 3], 99.0), 3);
    }

    #[test]
    fn quantiles_find_the_bucket() {
        let mut b = [0u32; 32];
        b[3] = 50;
        b[5] = 49;
        b[31] = 1;
        assert_eq!(histogram_bucket(&b, 0.5), Some(3));
        assert_eq!(histogram_bucket(&b, 0.9), Some(5));
        assert_eq!(histogram_bucket(&b, 0.99), Some(5));
        assert_eq!(histogram_bucket(&b, 1.0), Some(31));
        assert_eq!(histogram_bucket(&[0u32; 32], 0.5), None);
        assert_eq!(histogram_bucket(&[0u64, 3, 1], 0.75), Some(1));
    }

    #[test]
    fn medians_of_even_counts_are_midpoints() {
        assert_eq!(median_midpoint(&[1.0, 2.0, 3.0]), 2.0);
        assert_eq!(median_midpoint(&[1.0, 2.0, 3.0, 4.0]), 2.5);
        assert_eq!(median_midpoint(&[5.0]), 5.0);
        assert_eq!(median_midpoint(&[1.0, f64::INFINITY]), f64::INFINITY);
        assert_eq!(
            median_midpoint(&[f64::NEG_INFINITY, f64::INFINITY]),
            f64::INFINITY
        );
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Latency statistics and hypercall result decoding.

use crate::abi;

/// Summary of a set of latencies, in nanoseconds. Percentiles use the
/// nearest-rank method: the p-th percentile of n sorted samples is the
/// sample of rank ceil(p/100 * n), counting from 1, so it is always one of
/// the samples (the median of an even count is the lower middle one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub count: usize,
    pub min: i64,
    pub median: i64,
    pub p90: i64,
    pub p99: i64,
    pub max: i64,
}

/// The nearest-rank `p`-th percentile (0 < p <= 100) of sorted samples.
pub fn percentile(sorted: &[i64], p: f64) -> i64 {
    assert!(!sorted.is_empty() && p > 0.0 && p <= 100.0);
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Summarises `samples`, or `None` if there are none.
pub fn summarize(samples: &[i64]) -> Option<Summary> {
    if samples.is_empty() {
        return None;
    }
    let mut s = samples.to_vec();
    s.sort_unstable();
    Some(Summary {
        count: s.len(),
        min: s[0],
        median: percentile(&s, 50.0),
        p90: percentile(&s, 90.0),
        p99: percentile(&s, 99.0),
        max: s[s.len() - 1],
    })
}

/// Nanoseconds as microseconds with one decimal.
pub fn us(ns: i64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// The hypercall result as the guest's EAX holds it, sign-extended: KVM
/// truncates results to 32 bits for guests not in 64-bit mode, so -22
/// reads as 0xffffffea.
pub fn decode(eax: u32) -> i64 {
    i64::from(eax as i32)
}

/// A hypercall result with its name, for messages.
pub fn describe(ret: i64) -> String {
    let name = match ret {
        abi::KVM_PVLOCK_KICK_WOKEN => "WOKEN",
        abi::KVM_PVLOCK_KICK_NOT_HALTED => "NOT_HALTED",
        r if r == -abi::KVM_EINVAL => "-KVM_EINVAL",
        r if r == -abi::KVM_ENOSYS => "-KVM_ENOSYS",
        _ => return format!("{ret} ({:#x})", ret as u32),
    };
    format!("{ret} ({name})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_truncated_errors() {
        assert_eq!(decode(0xffff_ffea), -22);
        assert_eq!(decode(0xffff_ffea), -abi::KVM_EINVAL);
        assert_eq!(decode(0xffff_fc18), -1000);
        assert_eq!(decode(0xffff_fc18), -abi::KVM_ENOSYS);
        assert_eq!(decode(0), abi::KVM_PVLOCK_KICK_WOKEN);
        assert_eq!(decode(1), abi::KVM_PVLOCK_KICK_NOT_HALTED);
        assert_eq!(decode(1234), 1234);
        assert_eq!(decode(1 << 26), 1 << 26);
    }

    #[test]
    fn describes_results() {
        assert_eq!(describe(0), "0 (WOKEN)");
        assert_eq!(describe(1), "1 (NOT_HALTED)");
        assert_eq!(describe(-22), "-22 (-KVM_EINVAL)");
        assert_eq!(describe(-1000), "-1000 (-KVM_ENOSYS)");
        assert_eq!(describe(-38), "-38 (0xffffffda)");
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let s: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&s, 50.0), 50);
        assert_eq!(percentile(&s, 90.0), 90);
        assert_eq!(percentile(&s, 99.0), 99);
        assert_eq!(percentile(&s, 100.0), 100);
        assert_eq!(percentile(&[7], 50.0), 7);
        assert_eq!(percentile(&[1, 2], 50.0), 1);
        assert_eq!(percentile(&[1, 2, 3], 50.0), 2);
        assert_eq!(percentile(&[1, 2, 3], 99.0), 3);
    }

    #[test]
    fn summary_of_unsorted_samples() {
        let mut v: Vec<i64> = (1..=200).map(|i| i * 1000).collect();
        v.reverse();
        v.push(-500); // the target may reach userspace before the kicker
        let s = summarize(&v).unwrap();
        assert_eq!(s.count, 201);
        assert_eq!(s.min, -500);
        assert_eq!(s.median, 100_000);
        assert_eq!(s.p90, 180_000);
        assert_eq!(s.p99, 198_000);
        assert_eq!(s.max, 200_000);
        assert_eq!(summarize(&[]), None);
    }

    #[test]
    fn formats_microseconds() {
        assert_eq!(us(12_345), "12.3");
        assert_eq!(us(-500), "-0.5");
        assert_eq!(us(0), "0.0");
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Latency statistics and hypercall result decoding.

use pvlock_common::abi;
use pvlock_common::quantile::nearest_rank;

/// Summary of a set of latencies, in nanoseconds. Percentiles use the
/// nearest-rank method ([`nearest_rank`]): the p-th percentile of n sorted
/// samples is the sample of rank ceil(p/100 * n), counting from 1, so it is
/// always one of the samples (the median of an even count is the lower
/// middle one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub count: usize,
    pub min: i64,
    pub median: i64,
    pub p90: i64,
    pub p99: i64,
    pub max: i64,
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
        median: nearest_rank(&s, 50.0),
        p90: nearest_rank(&s, 90.0),
        p99: nearest_rank(&s, 99.0),
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

/// A hypercall result with its name, for messages (0 and 1 named as
/// `KVM_HC_PVLOCK_KICK` results).
pub fn describe(ret: i64) -> String {
    let name = match ret {
        abi::KVM_PVLOCK_KICK_WOKEN => "WOKEN",
        abi::KVM_PVLOCK_KICK_HELD => "HELD",
        r if r == -abi::KVM_EINVAL => "-KVM_EINVAL",
        r if r == -abi::KVM_ENOSYS => "-KVM_ENOSYS",
        _ => return format!("{ret} ({:#x})", ret as u32),
    };
    format!("{ret} ({name})")
}

/// A `KVM_HC_PVLOCK_WAIT` result with its name, for messages.
pub fn describe_wait(ret: i64) -> String {
    let name = match ret {
        abi::KVM_PVLOCK_WAIT_ENDED => "ENDED",
        abi::KVM_PVLOCK_WAIT_BOUND => "BOUND",
        abi::KVM_PVLOCK_WAIT_KICKED => "KICKED",
        _ => return describe(ret),
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
        assert_eq!(decode(1), abi::KVM_PVLOCK_KICK_HELD);
        assert_eq!(decode(1234), 1234);
        assert_eq!(decode(1 << 26), 1 << 26);
    }

    #[test]
    fn describes_results() {
        assert_eq!(describe(0), "0 (WOKEN)");
        assert_eq!(describe(1), "1 (HELD)");
        assert_eq!(describe(-22), "-22 (-KVM_EINVAL)");
        assert_eq!(describe(-1000), "-1000 (-KVM_ENOSYS)");
        assert_eq!(describe(-38), "-38 (0xffffffda)");
        assert_eq!(describe_wait(0), "0 (ENDED)");
        assert_eq!(describe_wait(1), "1 (BOUND)");
        assert_eq!(describe_wait(2), "2 (KICKED)");
        assert_eq!(describe_wait(-22), "-22 (-KVM_EINVAL)");
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

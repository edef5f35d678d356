// SPDX-License-Identifier: GPL-2.0

//! The host's advice to a guest's spinlock, from a sample of its load.
//!
//! This file knows nothing of the kernel: host_kvm calls [`advise`] with
//! what KVM sampled (`struct kvm_pvlock_load`), and the tools build the
//! same file to test it (`tools/pvlock-common`, `cargo test`).
//!
//! A VM is *calm* when its vCPUs could all run at once on the CPUs they
//! may use, alongside the other VMs' vCPUs that ask for those CPUs
//! (`vcpus + others <= cpus`, in thousandths of a CPU; each of its own
//! vCPUs counts as a whole CPU however idle, since it may want one at any
//! moment), and none of its vCPUs spends more than
//! [`Policy::max_preempted`] of the time preempted while it runs (load
//! that is not a vCPU, which KVM does not count as demand, shows there).
//! Preempted, not waiting: a vCPU woken from a halt may wait for a CPU,
//! but it held no lock while it halted; one preempted while it ran may
//! hold one, and that is what costs a guest whose lock is native.
//!
//! The preempted share counts only when two samples in a row exceed the
//! limit (the smaller of the last two is compared): a burst of the host's
//! own work in one sample does not count, steady competition does from its
//! second sample (100 ms later by default), and competition from vCPUs
//! counts at once. Measured here, two CPU hogs beside a 2-vCPU guest make
//! it 500 and more; the first measurement of the wait share (all waits
//! for a CPU, wake-ups' too) at 1x gave 0-130 thousandths with bursts to
//! 330 under locktorture, and more under hackbench and stress-ng, whose
//! vCPUs halt and are woken all the time, which made the advice flap. The advice says *dedicated*
//! once the VM has been calm for [`Policy::hold_ns`] without a break, and
//! stops at the first sample that is not calm: a guest on the native lock
//! while its vCPUs compete loses far more than one on the paravirtual
//! lock while they do not. A VMM that pinned its vCPUs says so
//! ([`abi::KVM_PVLOCK_ADVICE_PINNED`]), or keeps its guests paravirtual
//! ([`abi::KVM_PVLOCK_ADVICE_SHARED`]).
//!
//! The spin threshold is the VMM's (or host_kvm's `spin_threshold`), as
//! it is, whatever the load. It used to be scaled down by how far the
//! demand exceeded the CPUs; that was never measured to pay, and it
//! published `base * cpus * 1000 / (vcpus * 1000 + others)` every period,
//! from which a guest could solve for the other VMs' demand on its CPUs,
//! at a finer grain than its own steal time gives (issue 40, finding 8).
//! What a guest learns of other VMs through the advice is the one bit
//! *dedicated*, which changes at most once per hold (a second by default)
//! and says no more than the steal time its vCPUs already read: that
//! other threads take their CPUs.

use crate::abi::{self, Advice};

/// A sample of a VM's load (KVM's `struct kvm_pvlock_load`); shares of a
/// CPU are in thousandths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sample {
    /// The time since the previous sample, in nanoseconds.
    pub(crate) window_ns: u64,
    /// The VM's vCPUs.
    pub(crate) vcpus: u32,
    /// The CPUs its vCPU threads may run on.
    pub(crate) cpus: u32,
    /// What the other VMs' vCPU threads asked of those CPUs (each
    /// thread's demand spread evenly over the CPUs it may run on).
    pub(crate) others: u32,
    /// The largest share of the window (thousandths) that a vCPU spent
    /// preempted while it ran.
    pub(crate) preempted: u32,
}

/// The knobs (host_kvm's parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    /// How long a VM must be calm before the advice says dedicated.
    pub(crate) hold_ns: u64,
    /// The largest preempted share (thousandths) of a calm VM, in two
    /// samples in a row.
    pub(crate) max_preempted: u32,
}

/// What [`advise`] keeps of a VM between samples, in one word (KVM keeps
/// it per VM for the module).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Calm {
    /// How long the VM has been calm without a break, in microseconds.
    pub(crate) us: u64,
    /// The VM's preempted share in the sample before (thousandths).
    pub(crate) preempted: u32,
}

impl Calm {
    const US_MASK: u64 = (1 << 48) - 1;

    /// From KVM's word: microseconds in bits 0-47, the preempted share in
    /// 48-63.
    pub(crate) fn unpack(v: u64) -> Calm {
        Calm {
            us: v & Self::US_MASK,
            preempted: ((v >> 48) as u32).min(1000),
        }
    }

    /// To KVM's word.
    pub(crate) fn pack(self) -> u64 {
        self.us.min(Self::US_MASK) | (u64::from(self.preempted.min(1000)) << 48)
    }
}

/// The advice for a VM under `sample`, with the VMM's `mode`
/// (`KVM_PVLOCK_ADVICE_*`) and spin threshold `base`, given the advice in
/// force (`was_dedicated`) and what was kept of the VM (`calm`, updated).
pub(crate) fn advise(
    sample: &Sample,
    mode: u64,
    base: u32,
    was_dedicated: bool,
    calm: &mut Calm,
    policy: &Policy,
) -> Advice {
    let cpus = u64::from(sample.cpus) * 1000;
    let demand = u64::from(sample.vcpus) * 1000 + u64::from(sample.others);
    let preempted = sample.preempted.min(1000);
    let is_calm = demand <= cpus && preempted.min(calm.preempted) <= policy.max_preempted;
    calm.preempted = preempted;
    calm.us = if is_calm {
        calm.us.saturating_add(sample.window_ns / 1000)
    } else {
        0
    };
    let dedicated = match mode {
        abi::KVM_PVLOCK_ADVICE_PINNED => true,
        abi::KVM_PVLOCK_ADVICE_SHARED => false,
        _ => is_calm && (was_dedicated || calm.us.saturating_mul(1000) >= policy.hold_ns),
    };
    Advice {
        dedicated,
        spin_threshold: base,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: Policy = Policy {
        hold_ns: 1_000_000_000,
        max_preempted: 100,
    };
    const MS100: u64 = 100_000_000;

    fn sample(vcpus: u32, cpus: u32, others: u32, preempted: u32) -> Sample {
        Sample {
            window_ns: MS100,
            vcpus,
            cpus,
            others,
            preempted,
        }
    }

    /// Runs `samples` through `advise` from a fresh VM in auto mode; the
    /// advice after each.
    fn run(samples: &[Sample]) -> Vec<bool> {
        let mut calm = Calm::default();
        let mut was = false;
        samples
            .iter()
            .map(|s| {
                was = advise(s, abi::KVM_PVLOCK_ADVICE_AUTO, 0, was, &mut calm, &POLICY).dedicated;
                was
            })
            .collect()
    }

    #[test]
    fn dedicated_only_after_the_hold() {
        let calm = vec![sample(2, 2, 0, 10); 12];
        let got = run(&calm);
        // 1 s of calm at 100 ms a sample: the tenth sample.
        assert_eq!(got.iter().position(|&d| d), Some(9));
        assert!(got[9..].iter().all(|&d| d));
    }

    #[test]
    fn more_vcpus_than_cpus_is_never_dedicated() {
        assert!(run(&vec![sample(4, 2, 0, 0); 50]).iter().all(|&d| !d));
    }

    #[test]
    fn other_vms_count_by_what_they_ask() {
        // One vCPU on two CPUs: room for 0.9 of another VM's, not 1.1.
        let mut s = vec![sample(1, 2, 900, 0); 10];
        s.push(sample(1, 2, 1100, 0));
        let got = run(&s);
        assert!(got[9]);
        assert!(!got[10], "a busier other VM ends it at once");
    }

    #[test]
    fn one_burst_of_preemption_does_not_count_steady_does() {
        let mut s = vec![sample(2, 2, 0, 0); 10];
        s.extend([
            sample(2, 2, 0, 330),
            sample(2, 2, 0, 40),
            sample(2, 2, 0, 900),
        ]);
        s.push(sample(2, 2, 0, 0));
        let got = run(&s);
        assert!(got[9..].iter().all(|&d| d), "{got:?}");

        let mut s = vec![sample(2, 2, 0, 0); 10];
        s.extend([sample(2, 2, 0, 168), sample(2, 2, 0, 520)]);
        let got = run(&s);
        assert!(got[10], "one sample does not count");
        assert!(!got[11], "two in a row do");
    }

    #[test]
    fn hold_starts_again_after_a_break() {
        let mut s = vec![sample(2, 2, 0, 0); 5];
        s.push(sample(3, 2, 0, 0));
        s.extend(vec![sample(2, 2, 0, 0); 10]);
        let got = run(&s);
        assert!(got.iter().take(15).all(|&d| !d), "{got:?}");
        assert!(got[15]);
    }

    #[test]
    fn the_vmm_pins_or_shares() {
        let mut calm = Calm::default();
        let busy = sample(8, 2, 5000, 900);
        let a = advise(
            &busy,
            abi::KVM_PVLOCK_ADVICE_PINNED,
            0,
            false,
            &mut calm,
            &POLICY,
        );
        assert!(a.dedicated);
        let idle = sample(1, 4, 0, 0);
        for _ in 0..100 {
            let a = advise(
                &idle,
                abi::KVM_PVLOCK_ADVICE_SHARED,
                0,
                true,
                &mut calm,
                &POLICY,
            );
            assert!(!a.dedicated);
        }
    }

    #[test]
    fn the_threshold_says_nothing_of_other_vms() {
        let mut calm = Calm::default();
        let t = |s: Sample, calm: &mut Calm| {
            advise(&s, abi::KVM_PVLOCK_ADVICE_AUTO, 30000, false, calm, &POLICY).spin_threshold
        };
        // The same whatever this VM's or the other VMs' demand: a guest
        // cannot solve the published threshold for the others' load.
        for (vcpus, others, preempted) in [
            (2, 0, 0),
            (4, 0, 0),
            (6, 0, 0),
            (2, 1500, 0),
            (2, 7777, 900),
        ] {
            assert_eq!(t(sample(vcpus, 2, others, preempted), &mut calm), 30000);
        }
        let none = advise(&sample(6, 2, 0, 0), 0, 0, false, &mut calm, &POLICY);
        assert_eq!(none.spin_threshold, 0, "no base, no recommendation");
    }

    #[test]
    fn the_advice_fits_in_31_bits_and_round_trips() {
        for a in [
            Advice {
                dedicated: true,
                spin_threshold: abi::MAX_SPIN_THRESHOLD,
            },
            Advice {
                dedicated: false,
                spin_threshold: 12345,
            },
        ] {
            assert!(a.value() < 1 << 31, "{a:?}");
            assert_eq!(Advice::from_value(a.value()), Some(a));
        }
        let over = Advice {
            dedicated: true,
            spin_threshold: u32::MAX,
        };
        assert_eq!(
            Advice::from_value(over.value()).map(|a| a.spin_threshold),
            Some(abi::MAX_SPIN_THRESHOLD)
        );
        assert_eq!(Advice::from_value(1 << 31), None, "undefined bit");
    }

    #[test]
    fn state_round_trips_in_one_word() {
        let c = Calm {
            us: 123_456_789,
            preempted: 999,
        };
        assert_eq!(Calm::unpack(c.pack()), c);
        assert_eq!(Calm::unpack(u64::MAX).preempted, 1000);
    }
}

// SPDX-License-Identifier: GPL-2.0

//! What the pvlock tools share, each defined once.
//!
//! - [`abi`]: the kernel's `rust/kernel/pvlock/abi.rs`, the ABI numbers and
//!   the names of the statistics files, included here and nowhere else.
//! - [`stats`]: the statistics of the two modules as values (counters and
//!   log2 histograms of a [`stats::Kind`]), whatever they were read from.
//! - [`debugfs`]: reading them from the modules' debugfs directories, and
//!   zeroing them. A second source, KVM's binary statistics
//!   (`KVM_GET_STATS_FD`), would be a module beside it that yields the
//!   same [`stats`] values.
//! - [`params`]: a module's parameters in `/sys/module/<module>/parameters`.
//! - [`quantile`]: medians and percentiles, of samples and of histograms.
//! - [`fmt`]: number formats shared by the tools' output.
//! - [`cli`]: command-line pieces: `SECS` options, `main()`'s exit status
//!   and the checks of a command line's help.
//! - [`testing`]: running a built tool in integration tests.

#[path = "../../../rust/kernel/pvlock/abi.rs"]
pub mod abi;
/// host_kvm's advice policy, built here for its tests.
#[cfg(test)]
#[path = "../../../host_kvm/advice.rs"]
mod advice;
pub mod cli;
pub mod debugfs;
pub mod fmt;
pub mod params;
pub mod quantile;
pub mod stats;
pub mod testing;

// SPDX-License-Identifier: GPL-2.0

//! vmtest: the pvlock VM test harness, as a library for the `vmtest` and
//! `pvlock-bench` programs.

pub mod console;
pub mod initramfs;
pub mod judge;
pub mod platform;
pub mod programs;
pub mod qmp;
pub mod rate;
pub mod regs;
pub mod report;
pub mod retry;
pub mod run;
pub mod scenario;
pub mod watchdog;

#[cfg(test)]
mod guest_tests;

// SPDX-License-Identifier: GPL-2.0

//! vmtest: the pvlock VM test harness, as a library for the `vmtest` and
//! `pvlock-bench` programs.

pub mod initramfs;
pub mod judge;
pub mod result;
pub mod run;
pub mod scenario;

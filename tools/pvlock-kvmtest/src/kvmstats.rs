// SPDX-License-Identifier: GPL-2.0

//! KVM's binary statistics (`KVM_GET_STATS_FD`, Documentation/virt/kvm/
//! api.rst): the file a vCPU fd hands out, its header, descriptors and
//! data, read with `pread`.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;

use anyhow::{bail, ensure, Context, Result};

/// `KVM_GET_STATS_FD`: `_IO(KVMIO, 0xce)`.
const KVM_GET_STATS_FD: libc::c_ulong = 0xae << 8 | 0xce;
/// `struct kvm_stats_header`: six u32.
const HEADER_SIZE: usize = 24;
/// `struct kvm_stats_desc` before its name.
const DESC_FIXED: usize = 16;

/// The statistics of one vCPU (or VM): every descriptor's name and values
/// (one for a counter, one per bucket for a histogram).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats(pub BTreeMap<String, Vec<u64>>);

impl Stats {
    /// A counter's value, or the sum of a histogram's buckets.
    pub fn total(&self, name: &str) -> Option<u64> {
        self.0.get(name).map(|v| v.iter().sum())
    }
}

/// The statistics file of a vCPU or VM fd.
pub struct StatsFd(File);

impl StatsFd {
    /// `KVM_GET_STATS_FD` on `fd` (a vCPU or VM fd).
    pub fn open(fd: &impl AsRawFd) -> Result<Self> {
        // SAFETY: KVM_GET_STATS_FD takes no argument and returns a new file
        // descriptor (or -1 with errno); `fd` is a valid open descriptor.
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), KVM_GET_STATS_FD) };
        if r < 0 {
            bail!("KVM_GET_STATS_FD: {}", std::io::Error::last_os_error());
        }
        // SAFETY: `r` is a new descriptor that nothing else owns.
        Ok(StatsFd(unsafe { File::from_raw_fd(r) }))
    }

    fn u32_at(buf: &[u8], at: usize) -> u32 {
        u32::from_ne_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
    }

    /// Every statistic and its current values.
    pub fn read(&self) -> Result<Stats> {
        let mut h = [0u8; HEADER_SIZE];
        self.0.read_exact_at(&mut h, 0).context("stats header")?;
        let name_size = Self::u32_at(&h, 4) as usize;
        let num_desc = Self::u32_at(&h, 8) as usize;
        let desc_offset = u64::from(Self::u32_at(&h, 16));
        let data_offset = u64::from(Self::u32_at(&h, 20));
        ensure!(
            num_desc < 4096 && (1..=4096).contains(&name_size),
            "implausible stats header: {num_desc} descriptors, names of {name_size} bytes"
        );
        let desc_size = DESC_FIXED + name_size;
        let mut d = vec![0u8; desc_size * num_desc];
        self.0
            .read_exact_at(&mut d, desc_offset)
            .context("stats descriptors")?;
        let mut out = BTreeMap::new();
        for i in 0..num_desc {
            let at = i * desc_size;
            let size = usize::from(u16::from_ne_bytes([d[at + 6], d[at + 7]]));
            let offset = u64::from(Self::u32_at(&d, at + 8));
            let name = &d[at + DESC_FIXED..at + desc_size];
            let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            let name = String::from_utf8_lossy(&name[..end]).into_owned();
            let mut data = vec![0u8; size * 8];
            self.0
                .read_exact_at(&mut data, data_offset + offset)
                .with_context(|| format!("stats data of {name}"))?;
            let values = data
                .chunks_exact(8)
                .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
                .collect();
            out.insert(name, values);
        }
        Ok(Stats(out))
    }
}

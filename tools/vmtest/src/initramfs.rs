// SPDX-License-Identifier: GPL-2.0

//! The test initramfs: one image for L1 and L2 (busybox, the guest library,
//! the modules, the static tools), cached by content, plus a small per-run
//! archive with the plans, appended (the kernel unpacks concatenated cpio
//! archives in order).

use anyhow::{bail, Context, Result};
use flate2::{write::GzEncoder, Compression};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A `newc` cpio archive being written.
pub struct Cpio {
    buf: Vec<u8>,
    ino: u32,
}

impl Default for Cpio {
    fn default() -> Self {
        Self::new()
    }
}

impl Cpio {
    pub fn new() -> Self {
        Cpio {
            buf: Vec::new(),
            ino: 1,
        }
    }

    fn entry(&mut self, name: &str, mode: u32, data: &[u8], rdev: (u32, u32)) {
        let name = name.trim_start_matches('/');
        let header = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            self.ino,
            mode,
            0,
            0,
            1,
            0,
            data.len(),
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() + 1,
            0
        );
        self.ino += 1;
        self.buf.extend_from_slice(header.as_bytes());
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(0);
        self.pad();
        self.buf.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while self.buf.len() % 4 != 0 {
            self.buf.push(0);
        }
    }

    /// A directory.
    pub fn dir(&mut self, name: &str) {
        self.entry(name, 0o040755, &[], (0, 0));
    }

    /// A regular file.
    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, 0o100000 | (mode & 0o7777), data, (0, 0));
    }

    /// A character device node.
    pub fn chardev(&mut self, name: &str, major: u32, minor: u32) {
        self.entry(name, 0o020600, &[], (major, minor));
    }

    /// The archive with its trailer, gzip-compressed.
    pub fn finish_gz(mut self) -> Result<Vec<u8>> {
        self.entry("TRAILER!!!", 0, &[], (0, 0));
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        gz.write_all(&self.buf)?;
        Ok(gz.finish()?)
    }
}

/// What goes into the base image.
pub struct Inputs {
    pub busybox: PathBuf,
    pub guest_dir: PathBuf,
    pub kernel_release: String,
    /// Module files, installed under /lib/modules/<release>/extra/.
    pub modules: Vec<PathBuf>,
    /// Programs, installed under /usr/bin/: the static tools
    /// ([`STATIC_TOOLS`]) and what the scenario needs.
    pub programs: Vec<PathBuf>,
    /// Further files: (host path, path in the image).
    pub extra: Vec<(PathBuf, String)>,
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The static tools (`make static-tools`, in the directory `--tools-bin`
/// names), which the image carries under /usr/bin/ with the programs:
/// pvlock-qmp is L1's QMP client, which the guest library runs to ask a
/// silent L2 why (`l2_regs`, `l2_nmi`, `l2_threads`); pvlock-kexec boots
/// a guest into another kernel (`kexec_to`).
pub const STATIC_TOOLS: [&str; 5] = [
    "pvlock-stat",
    "pvlock-kvmtest",
    "pvlock-qmp",
    "pvlock-mmbench",
    "pvlock-kexec",
];

/// Builds the base image, or finds it in `cache`; returns its path.
pub fn base(inputs: &Inputs, cache: &Path) -> Result<PathBuf> {
    let init = inputs.guest_dir.join("init");
    let lib = inputs.guest_dir.join("pvlock.sh");
    let mut files: Vec<(String, u32, Vec<u8>)> = vec![
        ("bin/busybox".into(), 0o755, read(&inputs.busybox)?),
        ("init".into(), 0o755, read(&init)?),
        ("lib/pvlock.sh".into(), 0o644, read(&lib)?),
    ];
    let moddir = format!("lib/modules/{}/extra", inputs.kernel_release);
    for m in &inputs.modules {
        files.push((format!("{moddir}/{}", file_name(m)), 0o644, read(m)?));
    }
    for p in &inputs.programs {
        files.push((format!("usr/bin/{}", file_name(p)), 0o755, read(p)?));
    }
    for (p, dest) in &inputs.extra {
        let mode = if dest.starts_with("usr/bin/") || dest.starts_with("bin/") {
            0o755
        } else {
            0o644
        };
        files.push((dest.trim_start_matches('/').to_string(), mode, read(p)?));
    }
    if !files[0].2.starts_with(b"\x7fELF") {
        bail!("{} is not an ELF program", inputs.busybox.display());
    }

    let mut h = Sha256::new();
    h.update(b"pvlock-initramfs-v1\0");
    for (name, mode, data) in &files {
        h.update(name.as_bytes());
        h.update(mode.to_le_bytes());
        h.update((data.len() as u64).to_le_bytes());
        h.update(data);
    }
    let key: String = h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::create_dir_all(cache).with_context(|| format!("cannot create {}", cache.display()))?;
    let out = cache.join(format!("base-{key}.cpio.gz"));
    if out.exists() {
        return Ok(out);
    }

    let mut c = Cpio::new();
    for d in [
        "bin",
        "sbin",
        "dev",
        "etc",
        "host",
        "lib",
        "plan",
        "proc",
        "root",
        "sys",
        "tmp",
        "usr",
        "usr/bin",
        "lib/modules",
    ] {
        c.dir(d);
    }
    c.dir(&format!("lib/modules/{}", inputs.kernel_release));
    c.dir(&moddir);
    c.chardev("dev/console", 5, 1);
    c.chardev("dev/null", 1, 3);
    let mut made = std::collections::BTreeSet::new();
    for (name, mode, data) in &files {
        // Parent directories of extra files.
        let mut parent = Path::new(name).parent();
        let mut dirs = Vec::new();
        while let Some(p) = parent {
            if p.as_os_str().is_empty() {
                break;
            }
            dirs.push(p.to_string_lossy().into_owned());
            parent = p.parent();
        }
        for d in dirs.into_iter().rev() {
            if made.insert(d.clone()) {
                c.dir(&d);
            }
        }
        c.file(name, *mode, data);
    }
    let tmp = out.with_extension("tmp");
    std::fs::write(&tmp, c.finish_gz()?)?;
    std::fs::rename(&tmp, &out)?;
    Ok(out)
}

/// Writes `base` followed by an archive of `plans` to `out`.
pub fn with_plans(base: &Path, plans: &[(String, String)], out: &Path) -> Result<()> {
    let mut c = Cpio::new();
    for (name, text) in plans {
        c.file(name, 0o644, text.as_bytes());
    }
    let mut data = read(base)?;
    data.extend_from_slice(&c.finish_gz()?);
    if let Some(d) = out.parent() {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(out, data).with_context(|| format!("cannot write {}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn newc_layout() {
        let mut c = Cpio::new();
        c.file("plan/L1.sh", 0o644, b"echo hi\n");
        let gz = c.finish_gz().unwrap();
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut raw)
            .unwrap();
        // Header (110 bytes) + name + NUL, padded to 4.
        assert_eq!(&raw[..6], b"070701");
        let namesize =
            usize::from_str_radix(std::str::from_utf8(&raw[94..102]).unwrap(), 16).unwrap();
        assert_eq!(namesize, "plan/L1.sh".len() + 1);
        let filesize =
            usize::from_str_radix(std::str::from_utf8(&raw[54..62]).unwrap(), 16).unwrap();
        assert_eq!(filesize, 8);
        let data_at = (110 + namesize).div_ceil(4) * 4;
        assert_eq!(&raw[data_at..data_at + 8], b"echo hi\n");
        assert!(raw.windows(10).any(|w| w == b"TRAILER!!!"));
        assert_eq!(raw.len() % 4, 0);
    }
}

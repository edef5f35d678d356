// SPDX-License-Identifier: GPL-2.0

//! The harness's side of QMP: where the sockets of a run go, and what the
//! harness asks a silent L1 through its QEMU's QMP socket (`-qmp
//! unix:<path>,server=on,wait=off`): register samples, then an NMI into
//! every vCPU. The client is [`pvlock_qmp`], the one L1 runs for its L2s
//! too (the static `pvlock-qmp` in its initramfs, from
//! `tools/vmtest/guest/pvlock.sh`).

use anyhow::Result;
use std::path::{Path, PathBuf};

/// The longest socket path that fits `sockaddr_un` (108 bytes with the
/// terminating NUL), with a margin.
const MAX_PATH: usize = 100;

/// Where the QMP socket of a run in directory `dir` goes: `dir/qmp.sock`,
/// or a path under the temporary directory if that is too long for a
/// socket address.
pub fn socket_path(dir: &Path) -> PathBuf {
    unix_socket_path(dir, "qmp")
}

/// A socket `NAME.sock` in `dir`, or in the temporary directory if that
/// path is too long for a Unix socket.
pub fn unix_socket_path(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(format!("{name}.sock"));
    if p.as_os_str().len() <= MAX_PATH {
        return p;
    }
    std::env::temp_dir().join(format!("vmtest-{}-{name}.sock", std::process::id()))
}

/// Register samples of every vCPU of the QEMU at `sock`, as lines
/// `sample=S cpu=N rip=... stack=...` (see [`pvlock_qmp`] and
/// [`crate::regs`]).
pub fn registers(sock: &Path) -> Result<Vec<String>> {
    pvlock_qmp::regs(sock)
}

/// Injects an NMI into every vCPU of the QEMU at `sock`.
pub fn inject_nmi(sock: &Path) -> Result<()> {
    pvlock_qmp::nmi(sock)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regs::{IFrame, VcpuRegs};
    use pvlock_qmp::fake;

    #[test]
    fn samples_registers() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("regs.sock");
        let server = fake::hmp(&sock);
        let lines = registers(&sock).unwrap();
        assert_eq!(lines.len(), 4, "{lines:?}");
        // R15 points into the kernel's data: the word there (the fake
        // answers every `x` alike; QEMU prints one 32-bit word for x/1wx).
        assert_eq!(
            lines[0],
            "sample=1 cpu=0 rip=ffffffff81480b26 rfl=00000246 hlt=1 cpl=0 stack=ffffffff8148077e,ffffffffa0001234,ffffffff81001346,ffffffff81234567 ptrs=r15:ff11000000132120:0000000000000001 iframes=ffffffff81001346:ffffffff81234567:46"
        );
        assert_eq!(
            server.join().unwrap(),
            [
                "info registers -a",
                "x/512gx 0xffa0000000093e10 @0",
                "x/1wx 0xff11000000132120 @0",
                "info registers -a",
                "x/512gx 0xffa0000000093e10 @0",
                "x/1wx 0xff11000000132120 @0",
            ]
        );
        // What the harness reads of them (no symbols: addresses).
        let r: Vec<VcpuRegs> = lines
            .iter()
            .map(|l| VcpuRegs::parse(l, &[], None).unwrap())
            .collect();
        assert_eq!(
            r.iter().map(|r| (r.sample, r.cpu)).collect::<Vec<_>>(),
            [(1, 0), (1, 1), (2, 0), (2, 1)]
        );
        assert_eq!(
            (r[0].rip, r[0].rflags, r[0].halted),
            (0xffffffff81480b26, 0x246, true)
        );
        assert_eq!(
            r[0].stack,
            [
                0xffffffff8148077e,
                0xffffffffa0001234,
                0xffffffff81001346,
                0xffffffff81234567
            ]
        );
        assert_eq!(
            r[0].iframes,
            [IFrame {
                entry: "0xffffffff81001346".into(),
                at: "0xffffffff81234567".into(),
                rflags: 0x46
            }]
        );
        assert_eq!((r[1].cpl, r[1].at.as_str()), (3, "user space"));
        let e = registers(&dir.path().join("none.sock")).unwrap_err();
        assert!(format!("{e:#}").contains("No such file"), "{e:#}");
    }

    #[test]
    fn injects_an_nmi() {
        let dir = tempfile::tempdir().unwrap();
        let sock = socket_path(dir.path());
        let server = fake::qemu(&sock, false);
        inject_nmi(&sock).unwrap();
        assert_eq!(server.join().unwrap(), ["qmp_capabilities", "inject-nmi"]);

        let sock = dir.path().join("other.sock");
        let server = fake::qemu(&sock, true);
        let e = inject_nmi(&sock).unwrap_err().to_string();
        assert!(e.contains("no NMI here"), "{e}");
        server.join().unwrap();
        // What the harness's nmi-failed line says of a QEMU that is not
        // there.
        let e = inject_nmi(&dir.path().join("none.sock")).unwrap_err();
        assert!(
            e.to_string().starts_with("cannot connect to QMP at "),
            "{e:#}"
        );
    }

    #[test]
    fn long_socket_paths_move_to_the_temporary_directory() {
        assert_eq!(
            socket_path(Path::new("build/x")),
            Path::new("build/x/qmp.sock")
        );
        let long = PathBuf::from(format!("/{}", "d".repeat(120)));
        let p = socket_path(&long);
        assert!(p.as_os_str().len() <= MAX_PATH + 40 && p.starts_with(std::env::temp_dir()));
    }
}

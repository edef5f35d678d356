// SPDX-License-Identifier: GPL-2.0

//! A minimal QMP client: the harness asks a silent L1 why by injecting an
//! NMI into every vCPU through its QEMU's QMP socket (`-qmp
//! unix:<path>,server=on,wait=off`). L1 does the same for its L2s with the
//! host's python3 (`tools/vmtest/guest/pvlock.sh`).

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// The next reply on a QMP connection (asynchronous events skipped).
fn reply(r: &mut impl BufRead) -> Result<Value> {
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            bail!("QMP closed the connection");
        }
        let v: Value = serde_json::from_str(line.trim())
            .with_context(|| format!("bad QMP reply '{}'", line.trim()))?;
        if v.get("event").is_none() {
            return Ok(v);
        }
    }
}

/// Runs QMP command `cmd` (without arguments) after the greeting and
/// capabilities negotiation.
pub fn execute(sock: &Path, cmd: &str) -> Result<()> {
    let s = UnixStream::connect(sock)
        .with_context(|| format!("cannot connect to QMP at {}", sock.display()))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.set_write_timeout(Some(Duration::from_secs(10)))?;
    let mut w = s.try_clone()?;
    let mut r = BufReader::new(s);
    let greeting = reply(&mut r)?;
    if greeting.get("QMP").is_none() {
        bail!("no QMP greeting: {greeting}");
    }
    for c in ["qmp_capabilities", cmd] {
        writeln!(w, "{{\"execute\":\"{c}\"}}")?;
        let v = reply(&mut r)?;
        if let Some(e) = v.get("error") {
            bail!("QMP {c}: {}", e.get("desc").unwrap_or(e));
        }
        if v.get("return").is_none() {
            bail!("QMP {c}: unexpected reply {v}");
        }
    }
    Ok(())
}

/// The QMP client script of the guest library, in the repository; the
/// harness runs it for L1's register samples.
pub const SCRIPT: &str = "tools/vmtest/guest/qmp.py";

/// Register samples of every vCPU of the QEMU at `sock`, as lines
/// `sample=S cpu=N rip=... stack=...` (`script regs`, see
/// [`crate::regs`]), with this machine's python3.
pub fn registers(script: &Path, sock: &Path) -> Result<Vec<String>> {
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(sock)
        .arg("regs")
        .output()
        .with_context(|| format!("cannot run python3 {}", script.display()))?;
    if !out.status.success() {
        bail!(
            "{}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("failed")
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("sample="))
        .map(String::from)
        .collect())
}

/// Injects an NMI into every vCPU of the QEMU at `sock`.
pub fn inject_nmi(sock: &Path) -> Result<()> {
    execute(sock, "inject-nmi")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::thread::JoinHandle;

    /// A QMP server that answers one connection as QEMU does and returns
    /// the commands it got; `fail` makes it refuse `inject-nmi`. It has two
    /// vCPUs, on threads 113 and 114 (`query-cpus-fast`).
    pub(crate) fn fake_qemu(path: &Path, fail: bool) -> JoinHandle<Vec<String>> {
        let l = UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            writeln!(
                w,
                r#"{{"QMP": {{"version": {{"qemu": {{"micro": 2, "minor": 0, "major": 10}}}}, "capabilities": ["oob"]}}}}"#
            )
            .unwrap();
            let mut got = Vec::new();
            let mut line = String::new();
            while r.read_line(&mut line).unwrap_or(0) > 0 {
                let v: Value = serde_json::from_str(line.trim()).unwrap();
                let cmd = v["execute"].as_str().unwrap().to_string();
                line.clear();
                if cmd == "inject-nmi" {
                    writeln!(
                        w,
                        r#"{{"timestamp": {{"seconds": 1, "microseconds": 2}}, "event": "NMI"}}"#
                    )
                    .unwrap();
                    if fail {
                        writeln!(
                            w,
                            r#"{{"error": {{"class": "GenericError", "desc": "no NMI here"}}}}"#
                        )
                        .unwrap();
                        got.push(cmd);
                        continue;
                    }
                }
                if cmd == "query-cpus-fast" {
                    // Two vCPUs, trimmed to what the client reads.
                    writeln!(
                        w,
                        r#"{{"return": [{{"cpu-index": 0, "thread-id": 113}}, {{"cpu-index": 1, "thread-id": 114}}]}}"#
                    )
                    .unwrap();
                    got.push(cmd);
                    continue;
                }
                writeln!(w, r#"{{"return": {{}}}}"#).unwrap();
                got.push(cmd);
            }
            got
        })
    }

    /// What QEMU 10's HMP prints for `info registers -a` (trimmed): vCPU 0
    /// halted in kernel mode, vCPU 1 in user space.
    pub(crate) const INFO_REGISTERS: &str = "CPU#0\r
RAX=0000000000000000 RBX=0000000000000000 RCX=0000000000000001 RDX=0000000000000000\r
R8 =0000000000000000 R9 =0000000000000000 R10=0000000000000000 R11=0000000000000000\r
R12=0000000000000000 R13=0000000000000000 R14=0000000000000000 R15=ff11000000132120\r
RSI=0000000000000000 RDI=000000000023c65c RBP=0000000000000001 RSP=ffa0000000093e10\r
RIP=ffffffff81480b26 RFL=00000246 [---Z-P-] CPL=0 II=0 A20=1 SMM=0 HLT=1\r
CS =0010 0000000000000000 ffffffff 00af9b00 DPL=0 CS64 [-RA]\r
CPU#1\r
RSI=0000000000000001 RDI=000000000024d07c RBP=0000000000000000 RSP=00007ffd2a1b3ee8\r
RIP=000055ca3bfdf529 RFL=00000246 [---Z-P-] CPL=3 II=0 A20=1 SMM=0 HLT=0\r
";

    /// A QMP server that answers one connection's `human-monitor-command`s
    /// as QEMU does for `info registers -a` ([`INFO_REGISTERS`]) and `x`
    /// (a stack with two text addresses); returns the HMP command lines,
    /// each with `@<cpu-index>` when it had one.
    pub(crate) fn fake_hmp(path: &Path) -> JoinHandle<Vec<String>> {
        let l = UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            writeln!(w, r#"{{"QMP": {{"version": {{}}, "capabilities": []}}}}"#).unwrap();
            let mut got = Vec::new();
            let mut line = String::new();
            while r.read_line(&mut line).unwrap_or(0) > 0 {
                let v: Value = serde_json::from_str(line.trim()).unwrap();
                line.clear();
                if v["execute"] != "human-monitor-command" {
                    writeln!(w, r#"{{"return": {{}}}}"#).unwrap();
                    continue;
                }
                let c = v["arguments"]["command-line"].as_str().unwrap().to_string();
                let out = if c == "info registers -a" {
                    INFO_REGISTERS.to_string()
                } else {
                    // Four words, then an interrupt's frame: the entry's
                    // return address and a struct pt_regs (r15 .. orig_ax,
                    // then ip, cs, flags (IF clear), sp, ss).
                    let mut w: Vec<u64> = vec![
                        1,
                        0xffffffff8148077e,
                        0xff11000100b0a000,
                        0xffffffffa0001234,
                        0xffffffff81001346,
                    ];
                    w.extend([0; 16]);
                    w.extend([0xffffffff81234567, 0x10, 0x46, 0xffa0000000093f00, 0x18]);
                    w.chunks(2)
                        .enumerate()
                        .map(|(i, c)| {
                            let ws: String = c.iter().map(|x| format!(" 0x{x:016x}")).collect();
                            format!("{:x}:{ws}\r\n", 0xffa0000000093e10u64 + 16 * i as u64)
                        })
                        .collect()
                };
                got.push(match v["arguments"]["cpu-index"].as_u64() {
                    Some(i) => format!("{c} @{i}"),
                    None => c,
                });
                writeln!(w, "{}", serde_json::json!({ "return": out })).unwrap();
            }
            got
        })
    }

    #[test]
    fn samples_registers() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("regs.sock");
        let server = fake_hmp(&sock);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("guest/qmp.py");
        let lines = match registers(&script, &sock) {
            Ok(l) => l,
            Err(e) if e.to_string().contains("cannot run python3") => return,
            Err(e) => panic!("{e:#}"),
        };
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
        let e = registers(&script, &dir.path().join("none.sock")).unwrap_err();
        assert!(e.to_string().contains("No such file"), "{e:#}");
    }

    #[test]
    fn injects_an_nmi() {
        let dir = tempfile::tempdir().unwrap();
        let sock = socket_path(dir.path());
        let server = fake_qemu(&sock, false);
        inject_nmi(&sock).unwrap();
        assert_eq!(server.join().unwrap(), ["qmp_capabilities", "inject-nmi"]);

        let sock = dir.path().join("other.sock");
        let server = fake_qemu(&sock, true);
        let e = inject_nmi(&sock).unwrap_err().to_string();
        assert!(e.contains("no NMI here"), "{e}");
        server.join().unwrap();
        assert!(inject_nmi(&dir.path().join("none.sock")).is_err());
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

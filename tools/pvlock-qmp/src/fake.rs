// SPDX-License-Identifier: GPL-2.0

//! Fake QEMUs for tests (this crate's, and vmtest's of its guest library):
//! QMP servers on a Unix socket that answer one connection as QEMU 10
//! does, and return what they were asked. They panic on what a test did
//! not expect.

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::thread::JoinHandle;

/// A QMP server at `path` that answers one connection as QEMU does and
/// returns the commands it got; `fail` makes it refuse `inject-nmi` (with
/// QEMU's error `no NMI here`, after an event). It has two vCPUs, on
/// threads 113 and 114 (`query-cpus-fast`).
pub fn qemu(path: &Path, fail: bool) -> JoinHandle<Vec<String>> {
    qemu_n(path, 1, fail)
}

/// [`qemu`] for `n` connections, one after the other; the commands of all
/// of them.
pub fn qemu_n(path: &Path, n: usize, fail: bool) -> JoinHandle<Vec<String>> {
    let l = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        let mut got = Vec::new();
        for _ in 0..n {
            let (s, _) = l.accept().unwrap();
            got.extend(serve(s, fail));
        }
        got
    })
}

/// One connection of [`qemu_n`].
fn serve(s: std::os::unix::net::UnixStream, fail: bool) -> Vec<String> {
    {
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
    }
}

/// What QEMU 10's HMP prints for `info registers -a` (trimmed): vCPU 0
/// halted in kernel mode, vCPU 1 in user space.
pub const INFO_REGISTERS: &str = "CPU#0\r
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

/// A QMP server at `path` that answers one connection's
/// `human-monitor-command`s as QEMU does for `info registers -a`
/// ([`INFO_REGISTERS`]) and `x` (a stack with two text addresses, then an
/// interrupt's frame); returns the HMP command lines, each with
/// `@<cpu-index>` when it had one.
pub fn hmp(path: &Path) -> JoinHandle<Vec<String>> {
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

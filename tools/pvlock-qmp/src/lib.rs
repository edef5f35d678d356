// SPDX-License-Identifier: GPL-2.0

//! The QMP client of the pvlock harness: asks a silent kernel's QEMU why.
//!
//! ```text
//! pvlock-qmp SOCKET nmi      an NMI to every vCPU (inject-nmi)
//! pvlock-qmp SOCKET regs     register samples of every vCPU
//! pvlock-qmp SOCKET threads  "cpu=N thread=TID" per vCPU
//! ```
//!
//! L1's guest library (`tools/vmtest/guest/pvlock.sh`) runs the program,
//! static in L1's initramfs, against the QMP socket of each L2's QEMU; the
//! harness (`tools/vmtest`) calls this library against L1's. `regs` needs
//! no help from the guest: a kernel whose every CPU has interrupts off
//! prints nothing, not even for an NMI, but QEMU still shows where each
//! vCPU is. It prints, per sample (two, half a second apart) and vCPU, one
//! line
//!
//! ```text
//! sample=S cpu=N rip=HEX rfl=HEX hlt=0|1 cpl=N stack=HEX,...
//! ```
//!
//! from HMP's `info registers -a` (hlt is QEMU's view: KVM's halted state
//! for an L2, whose pvlock lock waits KVM reports as runnable) and the
//! words of the top of the vCPU's kernel stack that point into kernel or
//! module text (at most 12 of the first 24). Two more fields, only when not
//! empty, are for a human deciding a stall; the harness's verdicts do not
//! use them:
//!
//! ```text
//! deep=HEX,...                text addresses among the next 40 words of
//!                             the stack (at most 24): the frames below
//!                             the top, stale ones among them
//! ptrs=REG:ADDR:WORD,...      for each general register that points into
//!                             the kernel's data (4-byte aligned), the
//!                             32-bit word there: the lock word, when a
//!                             vCPU spins or waits on a lock
//! ```
//!
//! and one that the harness reads (vmtest's `regs.rs`):
//!
//! ```text
//! iframes=RET:IP:FLAGS,...    interrupt and exception frames (struct
//!                             pt_regs) among the first 512 words of the
//!                             stack, innermost first (at most 6): the
//!                             return address into the entry code that
//!                             called the handler, and the interrupted
//!                             code's RIP and RFLAGS as the CPU saved
//!                             them. A maskable interrupt's entry with IF
//!                             clear in its saved RFLAGS is an interrupt
//!                             the CPU delivered with interrupts disabled.
//! ```
//!
//! Errors (QEMU cannot stop a vCPU thread within 10 s, say) end the
//! program with a non-zero status and a message; the library returns them.

use anyhow::{bail, Context, Result};
use regex::Regex;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::str::FromStr;
use std::sync::LazyLock;
use std::time::Duration;

pub mod fake;

/// How long QEMU may take to accept a command or answer it: `info
/// registers` waits for QEMU to stop every vCPU thread.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Kernel and module text.
const TEXT_LO: u64 = 0xffff_ffff_8000_0000;
const TEXT_HI: u64 = 0xffff_ffff_ff00_0000;
/// Kernel data: the direct map, vmalloc, per-CPU areas (below the text).
const DATA_LO: u64 = 0xff00_0000_0000_0000;
/// The end of user space (canonical lower half, 4-level paging).
const USER_HI: u64 = 0x8000_0000_0000;
/// The general registers whose targets `ptrs=` shows, as HMP names them.
const GPRS: [&str; 15] = [
    "RAX", "RBX", "RCX", "RDX", "RSI", "RDI", "RBP", "R8", "R9", "R10", "R11", "R12", "R13", "R14",
    "R15",
];
/// Register samples per `regs`, and the pause between two.
const SAMPLES: u32 = 2;
const SAMPLE_GAP: Duration = Duration::from_millis(500);

/// HMP's `info registers -a`: one block per vCPU, each from `CPU#N`.
static CPU_BLOCK: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^CPU#").unwrap());
/// A word of HMP's `x/512gx`.
static STACK_WORD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r" 0x([0-9a-f]{16})").unwrap());
/// The word of HMP's `x/1wx`.
static DATA_WORD: LazyLock<Regex> = LazyLock::new(|| Regex::new(r":\s+0x([0-9a-f]+)").unwrap());
/// A register in a vCPU's block of `info registers` (`R8 =...` has a space
/// before the `=`), for each one read.
static REGISTERS: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    GPRS.iter()
        .chain(&["RSP", "RIP", "RFL", "HLT", "CPL"])
        .map(|k| (*k, Regex::new(&format!(r"\b{k} ?=([0-9a-f]+)")).unwrap()))
        .collect()
});

fn is_text(w: u64) -> bool {
    (TEXT_LO..TEXT_HI).contains(&w)
}

/// How long a snapshot (`savevm`, `loadvm`) may take: the guest's memory
/// written to or read from a qcow2 image, under nested TCG.
pub const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(300);

/// A QMP connection, past the greeting and the capabilities negotiation.
pub struct Qmp {
    r: BufReader<UnixStream>,
    w: UnixStream,
    timeout: Duration,
}

impl Qmp {
    /// Connects to the QMP socket `sock`, reads QEMU's greeting and leaves
    /// capabilities negotiation mode (`qmp_capabilities`).
    pub fn connect(sock: &Path) -> Result<Qmp> {
        let s = UnixStream::connect(sock)
            .with_context(|| format!("cannot connect to QMP at {}", sock.display()))?;
        s.set_read_timeout(Some(TIMEOUT))?;
        s.set_write_timeout(Some(TIMEOUT))?;
        let w = s.try_clone()?;
        let mut q = Qmp {
            r: BufReader::new(s),
            w,
            timeout: TIMEOUT,
        };
        let greeting = q.reply()?;
        if greeting.get("QMP").is_none() {
            bail!("no QMP greeting: {greeting}");
        }
        q.execute("qmp_capabilities", None)?;
        Ok(q)
    }

    /// Waits up to `d` for each reply from now on.
    pub fn set_timeout(&mut self, d: Duration) -> Result<()> {
        self.r.get_ref().set_read_timeout(Some(d))?;
        self.timeout = d;
        Ok(())
    }

    /// The next reply (asynchronous events skipped).
    fn reply(&mut self) -> Result<Value> {
        loop {
            let mut line = String::new();
            match self.r.read_line(&mut line) {
                Ok(0) => bail!("QMP closed the connection"),
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    bail!("no answer from QMP within {} s", self.timeout.as_secs())
                }
                Err(e) => return Err(e).context("cannot read from QMP"),
            }
            let v: Value = serde_json::from_str(line.trim())
                .with_context(|| format!("bad QMP reply '{}'", line.trim()))?;
            if v.get("event").is_none() {
                return Ok(v);
            }
        }
    }

    /// Runs QMP command `cmd` with `args`; what it returned. An error reply
    /// is an error `CMD: DESC`.
    pub fn execute(&mut self, cmd: &str, args: Option<Value>) -> Result<Value> {
        let mut msg = json!({ "execute": cmd });
        if let Some(a) = args {
            msg["arguments"] = a;
        }
        let mut text = msg.to_string();
        text.push('\n');
        self.w
            .write_all(text.as_bytes())
            .with_context(|| format!("cannot send {cmd} to QMP"))?;
        let mut v = self.reply()?;
        if let Some(e) = v.get("error") {
            let desc = e.get("desc").and_then(Value::as_str).unwrap_or("error");
            bail!("{cmd}: {desc}");
        }
        match v.as_object_mut().and_then(|o| o.remove("return")) {
            Some(r) => Ok(r),
            None => bail!("{cmd}: unexpected reply {v}"),
        }
    }

    /// Runs HMP command `line` (`human-monitor-command`), on vCPU `cpu`
    /// if given (the one `x` reads memory through); its output.
    pub fn hmp(&mut self, line: &str, cpu: Option<u32>) -> Result<String> {
        let mut a = json!({ "command-line": line });
        if let Some(c) = cpu {
            a["cpu-index"] = json!(c);
        }
        match self.execute("human-monitor-command", Some(a))? {
            Value::String(s) => Ok(s),
            v => bail!("human-monitor-command: no text in {v}"),
        }
    }
}

/// What the program does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// [`nmi`].
    Nmi,
    /// [`regs`].
    Regs,
    /// [`threads`].
    Threads,
    /// [`snapshot`] `savevm NAME`.
    Save(String),
    /// [`snapshot`] `loadvm NAME`.
    Load(String),
    /// [`migrate`] to `URI`.
    Migrate(String),
    /// [`run_state`] `false`: pause the vCPUs (`stop`).
    Stop,
    /// [`run_state`] `true`: let them run again (`cont`).
    Cont,
}

impl Op {
    /// The operation the words after the socket name.
    pub fn parse(words: &[String]) -> Result<Op> {
        match words {
            [op] => op.parse(),
            [op, uri] if op == "migrate" => {
                if !uri.starts_with("unix:") || uri.len() == 5 || uri.contains(char::is_whitespace)
                {
                    bail!("migrate '{uri}': a unix:PATH URI expected");
                }
                Ok(Op::Migrate(uri.clone()))
            }
            [op, name] if op == "savevm" || op == "loadvm" => {
                if name.is_empty()
                    || !name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                {
                    bail!("snapshot name '{name}': letters, digits, '-' and '_' only");
                }
                Ok(if op == "savevm" {
                    Op::Save(name.clone())
                } else {
                    Op::Load(name.clone())
                })
            }
            [op, ..] => bail!("'{op}' with {} arguments", words.len() - 1),
            [] => bail!("no operation"),
        }
    }
}

impl FromStr for Op {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Op> {
        Ok(match s {
            "nmi" => Op::Nmi,
            "regs" => Op::Regs,
            "threads" => Op::Threads,
            "stop" => Op::Stop,
            "cont" => Op::Cont,
            "savevm" | "loadvm" => bail!("'{s}' needs a snapshot name"),
            "migrate" => bail!("'migrate' needs a unix:PATH URI"),
            _ => bail!("unknown operation '{s}'"),
        })
    }
}

/// Runs `op` against the QEMU at `sock`; the lines it prints.
pub fn run(sock: &Path, op: Op) -> Result<Vec<String>> {
    match op {
        Op::Nmi => nmi(sock).map(|()| Vec::new()),
        Op::Regs => regs(sock),
        Op::Threads => threads(sock),
        Op::Save(name) => snapshot(sock, "savevm", &name),
        Op::Load(name) => snapshot(sock, "loadvm", &name),
        Op::Migrate(uri) => migrate(sock, &uri),
        Op::Stop => run_state(sock, false).map(|()| Vec::new()),
        Op::Cont => run_state(sock, true).map(|()| Vec::new()),
    }
}

/// Pauses (`stop`) or, with `run`, resumes (`cont`) the vCPUs of the QEMU
/// at `sock`. QEMU stops the guest's kvmclock with them and tells the
/// guest it was stopped (KVM_KVMCLOCK_CTRL), so its clock and watchdogs
/// see no gap.
pub fn run_state(sock: &Path, run: bool) -> Result<()> {
    let cmd = if run { "cont" } else { "stop" };
    Qmp::connect(sock)?.execute(cmd, None)?;
    Ok(())
}

/// How long a migration may take (`migrate`): the guest's memory, sent
/// between two QEMUs of one L1 under nested TCG.
pub const MIGRATE_TIMEOUT: Duration = Duration::from_secs(300);

/// Migrates the QEMU at `sock` to the QEMU listening at `uri` (started
/// with `-incoming URI`), waits until QEMU says the migration completed
/// (`query-migrate`, every 0.2 s, at most [`MIGRATE_TIMEOUT`]) and ends
/// the source (`quit`). The line it prints: how long the migration took
/// and the guest's downtime, as QEMU measured them.
pub fn migrate(sock: &Path, uri: &str) -> Result<Vec<String>> {
    let mut q = Qmp::connect(sock)?;
    let t0 = std::time::Instant::now();
    q.execute("migrate", Some(json!({ "uri": uri })))?;
    loop {
        let st = q.execute("query-migrate", None)?;
        match st.get("status").and_then(Value::as_str) {
            Some("completed") => {
                let ms = |k: &str| st.get(k).and_then(Value::as_u64).unwrap_or(0);
                let line = format!(
                    "migrate {uri} secs={:.2} total_ms={} downtime_ms={}",
                    t0.elapsed().as_secs_f64(),
                    ms("total-time"),
                    ms("downtime")
                );
                // The source's work is done; QEMU may close the socket
                // before it answers.
                let _ = q.execute("quit", None);
                return Ok(vec![line]);
            }
            Some(s @ ("failed" | "cancelled")) => {
                let why = st
                    .get("error-desc")
                    .and_then(Value::as_str)
                    .unwrap_or("no reason given");
                bail!("migrate {uri}: {s}: {why}");
            }
            _ if t0.elapsed() > MIGRATE_TIMEOUT => {
                bail!(
                    "migrate {uri}: not completed within {} s: {st}",
                    MIGRATE_TIMEOUT.as_secs()
                )
            }
            _ => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// Takes (`savevm`) or restores (`loadvm`) the snapshot `name` of the QEMU
/// at `sock`, with HMP, which reports failure as text: any output is an
/// error. The line it prints: how long that took.
pub fn snapshot(sock: &Path, op: &str, name: &str) -> Result<Vec<String>> {
    let mut q = Qmp::connect(sock)?;
    q.set_timeout(SNAPSHOT_TIMEOUT)?;
    let t0 = std::time::Instant::now();
    let out = q.hmp(&format!("{op} {name}"), None)?;
    let out = out.trim();
    if !out.is_empty() {
        bail!("{op} {name}: {out}");
    }
    Ok(vec![format!(
        "{op} {name} secs={:.2}",
        t0.elapsed().as_secs_f64()
    )])
}

/// Injects an NMI into every vCPU of the QEMU at `sock` (`inject-nmi`).
pub fn nmi(sock: &Path) -> Result<()> {
    Qmp::connect(sock)?.execute("inject-nmi", None)?;
    Ok(())
}

/// Each vCPU's host thread (`query-cpus-fast`), as lines `cpu=N
/// thread=TID`: for an L2, L1's thread ID.
pub fn threads(sock: &Path) -> Result<Vec<String>> {
    let cpus = Qmp::connect(sock)?.execute("query-cpus-fast", None)?;
    let Value::Array(cpus) = cpus else {
        bail!("query-cpus-fast: no list in {cpus}");
    };
    cpus.iter()
        .map(|c| {
            let n = |k: &str| c.get(k).and_then(Value::as_u64);
            match (n("cpu-index"), n("thread-id")) {
                (Some(i), Some(t)) => Ok(format!("cpu={i} thread={t}")),
                _ => bail!("query-cpus-fast: no cpu-index or thread-id in {c}"),
            }
        })
        .collect()
}

/// Register samples of every vCPU of the QEMU at `sock`, two, half a
/// second apart, as the lines the crate's documentation describes.
pub fn regs(sock: &Path) -> Result<Vec<String>> {
    let mut q = Qmp::connect(sock)?;
    let mut lines = Vec::new();
    for s in 1..=SAMPLES {
        if s > 1 {
            std::thread::sleep(SAMPLE_GAP);
        }
        lines.extend(sample(&mut q, s)?);
    }
    Ok(lines)
}

/// Register `k` of a vCPU's block of `info registers`, `"0"` if missing.
fn reg<'a>(block: &'a str, k: &str) -> &'a str {
    REGISTERS
        .iter()
        .find(|(name, _)| *name == k)
        .and_then(|(_, re)| re.captures(block))
        .and_then(|c| c.get(1))
        .map_or("0", |m| m.as_str())
}

fn hex(s: &str) -> Result<u64> {
    u64::from_str_radix(s, 16).with_context(|| format!("'{s}' is not a 64-bit number"))
}

/// The text addresses among `words`, in hex.
fn text(words: &[u64]) -> Vec<String> {
    words
        .iter()
        .filter(|w| is_text(**w))
        .map(|w| format!("{w:x}"))
        .collect()
}

/// Words `from..to` of `words`, as far as there are any.
fn slice(words: &[u64], from: usize, to: usize) -> &[u64] {
    &words[from.min(words.len())..to.min(words.len())]
}

/// Sample number `sample` of every vCPU on connection `q`: one `regs`
/// line per vCPU.
pub fn sample(q: &mut Qmp, sample: u32) -> Result<Vec<String>> {
    let info = q.hmp("info registers -a", None)?;
    let mut lines = Vec::new();
    for block in CPU_BLOCK.split(&info).skip(1) {
        let cpu: u32 = block
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("no CPU number in 'CPU#{}'", block.trim()))?;
        let rsp = hex(reg(block, "RSP"))?;
        let cpl: u32 = reg(block, "CPL")
            .parse()
            .with_context(|| format!("bad CPL of CPU#{cpu}"))?;
        let (mut stack, mut deep, mut ptrs, mut frames) = (vec![], vec![], vec![], vec![]);
        if cpl == 0 && rsp != 0 {
            let out = q.hmp(&format!("x/512gx {rsp:#x}"), Some(cpu))?;
            let words: Vec<u64> = STACK_WORD
                .captures_iter(&out)
                .map(|c| hex(&c[1]))
                .collect::<Result<_>>()?;
            stack = text(slice(&words, 0, 24));
            stack.truncate(12);
            deep = text(slice(&words, 24, 64));
            deep.truncate(24);
            frames = iframes(&words);
            frames.truncate(6);
            for k in GPRS {
                let v = hex(reg(block, k))?;
                if (DATA_LO..TEXT_LO).contains(&v) && v % 4 == 0 {
                    let out = q.hmp(&format!("x/1wx {v:#x}"), Some(cpu))?;
                    if let Some(m) = DATA_WORD.captures(&out) {
                        ptrs.push(format!("{}:{v:x}:{}", k.to_lowercase(), &m[1]));
                    }
                }
            }
        }
        let extra: String = [("deep", deep), ("ptrs", ptrs), ("iframes", frames)]
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!(" {k}={}", v.join(",")))
            .collect();
        lines.push(format!(
            "sample={sample} cpu={cpu} rip={} rfl={} hlt={} cpl={cpl} stack={}{extra}",
            reg(block, "RIP"),
            reg(block, "RFL"),
            reg(block, "HLT"),
            stack.join(",")
        ));
    }
    Ok(lines)
}

/// The struct pt_regs frames among stack words, innermost first, as
/// `RET:IP:FLAGS`: RET (the word before the frame) a text address, the
/// entry code's return from its call of the handler; CS the kernel's
/// (0x10) with IP in its text and SS 0 or the kernel's (0x18), or the
/// user's (0x33, 0x2b); RFLAGS with its always-set bit 1 and nothing
/// above bit 21.
pub fn iframes(words: &[u64]) -> Vec<String> {
    // A window is RET, then the frame: r15 .. orig_ax (16 words), ip, cs,
    // flags, sp, ss.
    words
        .windows(22)
        .filter_map(|w| {
            let (ret, ip, cs, fl, sp, ss) = (w[0], w[17], w[18], w[19], w[20], w[21]);
            if !is_text(ret) || fl & 2 == 0 || fl >> 22 != 0 {
                return None;
            }
            let kernel = cs == 0x10 && (ss == 0 || ss == 0x18) && is_text(ip) && sp >= DATA_LO;
            let user = cs == 0x33 && ss == 0x2b && ip < USER_HI;
            (kernel || user).then(|| format!("{ret:x}:{ip:x}:{fl:x}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel frame: RET, 16 words of pt_regs, then ip, cs, flags, sp,
    /// ss.
    fn frame(ret: u64, ip: u64, cs: u64, fl: u64, sp: u64, ss: u64) -> Vec<u64> {
        let mut w = vec![ret];
        w.extend([0; 16]);
        w.extend([ip, cs, fl, sp, ss]);
        w
    }

    const RET: u64 = 0xffffffff81001346;
    const IP: u64 = 0xffffffff81234567;
    const SP: u64 = 0xffa0000000093f00;

    #[test]
    fn iframes_are_found_innermost_first() {
        // Words before the frame, a kernel frame, a user frame below it.
        let mut w = vec![1, 0xffffffff8148077e];
        w.extend(frame(RET, IP, 0x10, 0x46, SP, 0x18));
        w.extend(frame(
            0xffffffff81001400,
            0x55ca3bfdf529,
            0x33,
            0x246,
            0x7ffd2a1b3ee8,
            0x2b,
        ));
        assert_eq!(
            iframes(&w),
            [
                "ffffffff81001346:ffffffff81234567:46",
                "ffffffff81001400:55ca3bfdf529:246"
            ]
        );
        // SS 0 is the kernel's too.
        assert_eq!(iframes(&frame(RET, IP, 0x10, 0x246, SP, 0)).len(), 1);
        // One word short of a frame: none.
        assert!(iframes(&frame(RET, IP, 0x10, 0x46, SP, 0x18)[..21]).is_empty());
        assert!(iframes(&[]).is_empty());
    }

    #[test]
    fn what_is_not_an_iframe() {
        let none = |w: Vec<u64>| assert!(iframes(&w).is_empty(), "{w:x?}");
        // RET not in text.
        none(frame(0xffa0000000093e10, IP, 0x10, 0x46, SP, 0x18));
        // RFLAGS without bit 1, or with bits above 21.
        none(frame(RET, IP, 0x10, 0x44, SP, 0x18));
        none(frame(RET, IP, 0x10, 0x400046, SP, 0x18));
        // Kernel CS with IP outside text, SP outside kernel data, the
        // user's SS.
        none(frame(RET, 0x55ca3bfdf529, 0x10, 0x46, SP, 0x18));
        none(frame(RET, IP, 0x10, 0x46, 0x7ffd2a1b3ee8, 0x18));
        none(frame(RET, IP, 0x10, 0x46, SP, 0x2b));
        // User CS with a kernel IP, or the kernel's SS.
        none(frame(RET, IP, 0x33, 0x246, SP, 0x2b));
        none(frame(RET, 0x55ca3bfdf529, 0x33, 0x246, SP, 0x18));
        // Any other CS.
        none(frame(RET, IP, 0x08, 0x46, SP, 0x18));
    }

    #[test]
    fn samples_registers() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("regs.sock");
        let server = fake::hmp(&sock);
        let lines = regs(&sock).unwrap();
        // Two samples of two vCPUs; only the stack words that point into
        // text, the word at the register that points into the kernel's
        // data (the fake answers every `x` alike; QEMU prints one 32-bit
        // word for x/1wx), the interrupt frame on the stack.
        let cpu0 = "cpu=0 rip=ffffffff81480b26 rfl=00000246 hlt=1 cpl=0 stack=ffffffff8148077e,ffffffffa0001234,ffffffff81001346,ffffffff81234567 ptrs=r15:ff11000000132120:0000000000000001 iframes=ffffffff81001346:ffffffff81234567:46";
        let cpu1 = "cpu=1 rip=000055ca3bfdf529 rfl=00000246 hlt=0 cpl=3 stack=";
        assert_eq!(
            lines,
            [
                format!("sample=1 {cpu0}"),
                format!("sample=1 {cpu1}"),
                format!("sample=2 {cpu0}"),
                format!("sample=2 {cpu1}"),
            ]
        );
        // The stack of the kernel-mode vCPU is read through that vCPU;
        // the user-mode one's is not read.
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
        let e = regs(&dir.path().join("none.sock")).unwrap_err();
        assert!(format!("{e:#}").contains("No such file"), "{e:#}");
    }

    #[test]
    fn deep_words_come_after_the_first_24() {
        // 24 words of which 13 in text (12 kept), then 40 more with two.
        let mut w = vec![0xffffffff81000010u64; 13];
        w.extend([0; 11]);
        w.extend([0xffffffffa0000020, 5, 0xffffffff81000030]);
        let stack = text(slice(&w, 0, 24));
        assert_eq!(stack.len(), 13);
        assert_eq!(
            text(slice(&w, 24, 64)),
            ["ffffffffa0000020", "ffffffff81000030"]
        );
        assert!(slice(&w, 64, 100).is_empty());
    }

    #[test]
    fn lists_threads_and_injects_nmis() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("qmp.sock");
        let server = fake::qemu(&sock, false);
        assert_eq!(
            threads(&sock).unwrap(),
            ["cpu=0 thread=113", "cpu=1 thread=114"]
        );
        assert_eq!(
            server.join().unwrap(),
            ["qmp_capabilities", "query-cpus-fast"]
        );

        let server = fake::qemu(&sock_at(&dir, "nmi"), false);
        nmi(&sock_at(&dir, "nmi")).unwrap();
        assert_eq!(server.join().unwrap(), ["qmp_capabilities", "inject-nmi"]);

        for op in ["stop", "cont"] {
            let server = fake::qemu(&sock_at(&dir, op), false);
            run(&sock_at(&dir, op), op.parse().unwrap()).unwrap();
            assert_eq!(server.join().unwrap(), ["qmp_capabilities", op]);
        }

        // QEMU's error, after an event.
        let server = fake::qemu(&sock_at(&dir, "fail"), true);
        let e = nmi(&sock_at(&dir, "fail")).unwrap_err();
        assert_eq!(format!("{e:#}"), "inject-nmi: no NMI here");
        server.join().unwrap();

        let e = nmi(&sock_at(&dir, "none")).unwrap_err();
        assert!(
            format!("{e:#}").starts_with("cannot connect to QMP at "),
            "{e:#}"
        );
    }

    fn sock_at(dir: &tempfile::TempDir, name: &str) -> std::path::PathBuf {
        dir.path().join(format!("{name}.sock"))
    }

    #[test]
    fn operations_by_name() {
        assert_eq!("nmi".parse::<Op>().unwrap(), Op::Nmi);
        assert_eq!("regs".parse::<Op>().unwrap(), Op::Regs);
        assert_eq!("threads".parse::<Op>().unwrap(), Op::Threads);
        assert_eq!("stop".parse::<Op>().unwrap(), Op::Stop);
        assert_eq!("cont".parse::<Op>().unwrap(), Op::Cont);
        assert!("NMI".parse::<Op>().is_err());
        let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            Op::parse(&w(&["savevm", "s1"])).unwrap(),
            Op::Save("s1".into())
        );
        assert_eq!(
            Op::parse(&w(&["loadvm", "s-2"])).unwrap(),
            Op::Load("s-2".into())
        );
        assert!(Op::parse(&w(&["savevm"])).is_err());
        assert!(Op::parse(&w(&["savevm", "a b"])).is_err());
        assert!(Op::parse(&w(&["nmi", "x"])).is_err());
        assert_eq!(
            Op::parse(&w(&["migrate", "unix:/run/m.sock"])).unwrap(),
            Op::Migrate("unix:/run/m.sock".into())
        );
        assert!(Op::parse(&w(&["migrate", "tcp:1.2.3.4:5"])).is_err());
        assert!(Op::parse(&w(&["migrate", "unix:"])).is_err());
    }
}

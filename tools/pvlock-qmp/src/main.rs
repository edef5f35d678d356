// SPDX-License-Identifier: GPL-2.0

//! `pvlock-qmp SOCKET OPERATION`: the QMP client of the pvlock
//! harness, static in L1's initramfs (see the library's documentation for
//! what it prints). Exit status 0, or 1 with one line on stderr: a bad
//! command line, or QMP's error.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str =
    "usage: pvlock-qmp SOCKET nmi|regs|threads|stop|cont|savevm NAME|loadvm NAME|migrate URI";

const HELP: &str = "\
Asks the QEMU whose QMP socket is SOCKET about its vCPUs, or tells it what\nto do with them.

  nmi      an NMI to every vCPU (inject-nmi)
  regs     register samples of every vCPU, two, half a second apart:
           sample=S cpu=N rip=HEX rfl=HEX hlt=0|1 cpl=N stack=HEX,...
           [deep=HEX,...] [ptrs=REG:ADDR:WORD,...] [iframes=RET:IP:FLAGS,...]
  threads  each vCPU's host thread: cpu=N thread=TID
  stop, cont
           pause the vCPUs, or let them run again (the guest's clock
           stops with them)
  savevm NAME, loadvm NAME
           take or restore snapshot NAME (HMP's savevm and loadvm; the
           guest needs a qcow2 drive): {savevm|loadvm} NAME secs=S
  migrate unix:PATH
           migrate to the QEMU started with -incoming unix:PATH, wait
           until it completes, quit this one: migrate URI secs=S
           total_ms=MS downtime_ms=MS";

fn main() -> ExitCode {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    if args.len() == 1 && (args[0] == "-h" || args[0] == "--help") {
        println!("{USAGE}\n\n{HELP}");
        return ExitCode::SUCCESS;
    }
    let Some((sock, words)) = args.split_first() else {
        eprintln!("pvlock-qmp: no arguments ({USAGE})");
        return ExitCode::FAILURE;
    };
    let words: Vec<String> = words
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    let op = match pvlock_qmp::Op::parse(&words) {
        Ok(op) => op,
        Err(e) => {
            eprintln!("pvlock-qmp: {e} ({USAGE})");
            return ExitCode::FAILURE;
        }
    };
    match pvlock_qmp::run(&PathBuf::from(sock), op) {
        Ok(lines) => {
            let mut out = std::io::stdout().lock();
            for l in lines {
                if let Err(e) = writeln!(out, "{l}") {
                    eprintln!("pvlock-qmp: cannot write: {e}");
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("pvlock-qmp: {e:#}");
            ExitCode::FAILURE
        }
    }
}

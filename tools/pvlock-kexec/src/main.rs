// SPDX-License-Identifier: GPL-2.0

//! `pvlock-kexec KERNEL INITRD CMDLINE`: loads KERNEL (a bzImage) with
//! INITRD and CMDLINE through `kexec_file_load(2)` and reboots into it
//! (`reboot(LINUX_REBOOT_CMD_KEXEC)`), as `kexec -s -l ... && kexec -e`
//! would; static, for the harness's guests, whose initramfs has no
//! kexec-tools. On success it does not return; exit status 1 with one line
//! on stderr otherwise (a bad command line, a file it cannot open, the
//! kernel's refusal).

use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::process::ExitCode;

const USAGE: &str = "usage: pvlock-kexec KERNEL INITRD CMDLINE";

fn open(path: &str) -> Result<File, String> {
    File::open(path).map_err(|e| format!("cannot open {path}: {e}"))
}

fn kexec(kernel: &str, initrd: &str, cmdline: &str) -> Result<(), String> {
    let k = open(kernel)?;
    let i = open(initrd)?;
    let c = CString::new(cmdline).map_err(|_| "the command line has a NUL byte".to_string())?;
    let len = c.as_bytes_with_nul().len();
    // SAFETY: the two descriptors are open for the call's duration, and the
    // command line is a NUL-terminated string of `len` bytes with the NUL,
    // as kexec_file_load(2) asks; the kernel only reads them.
    let r = unsafe {
        libc::syscall(
            libc::SYS_kexec_file_load,
            k.as_raw_fd(),
            i.as_raw_fd(),
            len,
            c.as_ptr(),
            0,
        )
    };
    if r != 0 {
        return Err(format!(
            "kexec_file_load: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: sync(2) has no arguments and cannot fail.
    unsafe { libc::sync() };
    // SAFETY: reboot(2) with LINUX_REBOOT_CMD_KEXEC boots the kernel loaded
    // above; it returns only on failure.
    unsafe { libc::reboot(libc::LINUX_REBOOT_CMD_KEXEC) };
    Err(format!(
        "reboot(LINUX_REBOOT_CMD_KEXEC): {}",
        std::io::Error::last_os_error()
    ))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() == 1 && (args[0] == "-h" || args[0] == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let [kernel, initrd, cmdline] = args.as_slice() else {
        eprintln!(
            "pvlock-kexec: {} arguments, 3 expected ({USAGE})",
            args.len()
        );
        return ExitCode::FAILURE;
    };
    match kexec(kernel, initrd, cmdline) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pvlock-kexec: {e}");
            ExitCode::FAILURE
        }
    }
}

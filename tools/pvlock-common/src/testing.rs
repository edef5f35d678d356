// SPDX-License-Identifier: GPL-2.0

//! Running a built tool in integration tests (`tests/*.rs`), with the
//! assertions every such test makes on its exit status and output.

use std::process::{Command, Output, Stdio};

/// Runs `bin` with `args` and no standard input.
pub fn run(bin: &str, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {bin}: {e}"))
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// Asserts success with nothing on stderr; returns stdout.
pub fn ok(o: Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}, stderr: {}",
        o.status,
        stderr(&o)
    );
    assert!(o.stderr.is_empty(), "stderr: {}", stderr(&o));
    stdout(&o)
}

/// Asserts exit code 1 with one line on stderr and nothing on stdout;
/// returns that line.
pub fn fails(o: Output) -> String {
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(o.stdout.is_empty(), "stdout: {}", stdout(&o));
    assert_eq!(err.lines().count(), 1, "stderr: {err}");
    err
}

/// The busybox whose sh runs the guest library in tests, as the
/// initramfs's does.
pub const BUSYBOX: &str = "/bin/busybox";

/// The guest library, `tools/vmtest/guest/pvlock.sh`, from a crate of
/// `tools/` (`manifest_dir`: its `CARGO_MANIFEST_DIR`).
pub fn guest_library(manifest_dir: &str) -> std::path::PathBuf {
    std::path::Path::new(manifest_dir).join("../vmtest/guest/pvlock.sh")
}

/// Runs `script` in busybox sh after `prelude` and after sourcing
/// `library` as L1 does (`pv_level=1`, `pv_name=l1`), with `bin` first in
/// PATH and `env` set; its exit status and output (stdout, then stderr).
/// `None`, saying so, where this machine has no busybox.
pub fn guest_sh(
    library: &std::path::Path,
    prelude: &str,
    script: &str,
    bin: &std::path::Path,
    env: &[(&str, &str)],
) -> Option<(i32, String)> {
    if !std::path::Path::new(BUSYBOX).exists() {
        eprintln!("no {BUSYBOX}: skipped");
        return None;
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(BUSYBOX)
        .args(["sh", "-c"])
        .arg(format!("{prelude}\n. {}\n{script}", library.display()))
        .env("pv_level", "1")
        .env("pv_name", "l1")
        .env("PATH", path)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Some((out.status.code().unwrap_or(-1), text))
}

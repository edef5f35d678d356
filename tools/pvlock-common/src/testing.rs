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

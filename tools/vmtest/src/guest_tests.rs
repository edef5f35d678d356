// SPDX-License-Identifier: GPL-2.0

//! Tests of the guest library (`tools/vmtest/guest/pvlock.sh`) itself, run
//! by this machine's busybox sh (the one the initramfs carries): step
//! statuses, when L1 asks an L2 that went silent, barriers. No VM. The
//! steps that talk to an L2's QEMU through the static `pvlock-qmp` are
//! tested with the built program, in that crate's integration tests
//! (`tools/pvlock-qmp/tests/guest_lib.rs`): cargo builds a package's
//! program only for its own integration tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use pvlock_common::testing::guest_sh;

fn library() -> PathBuf {
    pvlock_common::testing::guest_library(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `script` after sourcing the library as L1 would, with `bin` first
/// in PATH and `env` set; its status and output. `None` without busybox.
fn sh(script: &str, bin: &Path, env: &[(&str, &str)]) -> Option<(i32, String)> {
    guest_sh(&library(), "", script, bin, env)
}

/// As [`sh`], with `prelude` run before the library is sourced (shell
/// functions that stand in for commands the library runs as it loads).
fn sh_after(
    prelude: &str,
    script: &str,
    bin: &Path,
    env: &[(&str, &str)],
) -> Option<(i32, String)> {
    guest_sh(&library(), prelude, script, bin, env)
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

#[test]
fn steps_return_their_commands_status() {
    let bin = tempfile::tempdir().unwrap();
    let kvmtest = bin.path().join("pvlock-kvmtest");
    std::fs::write(
        &kvmtest,
        "#!/bin/sh\necho \"@@KVMTEST case=kick_wakes_halted result=FAIL\"\nexit ${KVMTEST_RC:-0}\n",
    )
    .unwrap();
    std::fs::set_permissions(
        &kvmtest,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let Some((rc, out)) = sh(
        "sh_step 'echo a; echo b; exit 3'; echo rc=$?
         sh_step 'echo c'; echo rc=$?
         kvmtest --kicks 5; echo rc=$?
         KVMTEST_RC=2 kvmtest; echo rc=$?
         load no_such_module_here; echo rc=$?",
        bin.path(),
        &[],
    ) else {
        return;
    };
    assert_eq!(rc, 0, "{out}");
    assert_eq!(
        lines(&out),
        [
            "@@PV L1.l1 out a",
            "@@PV L1.l1 out b",
            "rc=3",
            "@@PV L1.l1 out c",
            "rc=0",
            "@@PV L1.l1 kvmtest @@KVMTEST case=kick_wakes_halted result=FAIL",
            "rc=0",
            "@@PV L1.l1 kvmtest @@KVMTEST case=kick_wakes_halted result=FAIL",
            "rc=2",
            "@@PV L1.l1 error no module no_such_module_here",
            "rc=1",
        ]
    );
}

/// An L2 writes a line, then waits for its serial port to send it (stty
/// sets the saved mode with TCSETSW, which drains the output first); L1,
/// whose output port is not an L2's emulated UART, does not wait. `stty`
/// is a shell function here, defined before the library is sourced (the
/// busybox applet would win over one in PATH, on this machine's console).
#[test]
fn an_l2_sends_each_line_before_the_next() {
    let bin = tempfile::tempdir().unwrap();
    let run = |level: &str| {
        sh_after(
            r#"stty() { case "$3" in -g) echo MODE ;; *) echo "drain $*" ;; esac; }"#,
            "mark out a; sh_step 'echo b; echo c'",
            bin.path(),
            &[("pv_level", level), ("pv_name", "g-1")],
        )
    };
    let (Some((rc2, l2)), Some((rc1, l1))) = (run("2"), run("1")) else {
        return;
    };
    let drain = "drain -F /dev/console MODE";
    assert_eq!(rc2, 0, "{l2}");
    assert_eq!(
        lines(&l2),
        [
            "@@PV L2.g-1 out a",
            drain,
            "@@PV L2.g-1 out b",
            drain,
            "@@PV L2.g-1 out c",
            drain,
        ]
    );
    assert_eq!(rc1, 0, "{l1}");
    assert_eq!(
        lines(&l1),
        [
            "@@PV L1.g-1 out a",
            "@@PV L1.g-1 out b",
            "@@PV L1.g-1 out c"
        ]
    );
}

#[test]
fn the_relay_notes_the_last_line_but_not_nmi_reports() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen");
    let seen = seen.to_str().unwrap();
    let script = r#"
        hist_stop() { echo "hist $1"; }; hist_start() { :; }
        uptime_int() { read -r up _ </proc/uptime; echo "${up%.*}"; }
        # A booting guest (no heartbeat yet) is not watched.
        printf '%s\n' '[    2.1] booting' | l2_relay g-1 SEEN
        [ -e SEEN ] || echo unarmed
        # Its reports of an NMI are not its last line.
        { printf '@@HB\r\n'; sleep 1.2; printf '%s\n' '[   61.1] Uhhuh. NMI received for unknown reason 3c on CPU 2.' '[   61.1] Dazed and confused, but trying to continue'; } | l2_relay g-1 SEEN >/dev/null
        [ "$(cat SEEN)" -lt "$(uptime_int)" ] && echo not-refreshed
        # Any other line is.
        t=$(uptime_int)
        { printf '@@HB\n'; sleep 1.2; printf '%s\n' '@@PV L2.g-1 hcmark lt'; } | l2_relay g-1 SEEN
        [ "$(cat SEEN)" -gt "$t" ] && echo refreshed
    "#;
    let Some((_, out)) = sh(&script.replace("SEEN", seen), dir.path(), &[]) else {
        return;
    };
    assert_eq!(
        lines(&out),
        [
            "[g-1] [    2.1] booting",
            "unarmed",
            "not-refreshed",
            "[g-1] @@HB",
            "[g-1] @@PV L2.g-1 hcmark lt",
            "hist g-1:lt",
            "refreshed",
        ]
    );
}

#[test]
fn a_silent_guest_is_asked_once_per_silence() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen");
    let seen = seen.to_str().unwrap();
    // Not armed yet (no heartbeat, no file), then silent since uptime 0,
    // then since 1 (a line came, and silence again), then not silent: two
    // NMIs.
    let Some((_, out)) = sh(
        &format!(
            "l2_regs() {{ echo \"regs $1\"; }}
             l2_nmi() {{ echo \"nmi $1\"; }}
             l2_watch g-1 {seen} &
             sleep 0.6
             echo 0 >{seen}
             sleep 1
             echo 1 >{seen}
             sleep 1
             read -r up _ </proc/uptime; echo \"${{up%.*}}\" >{seen}
             sleep 1
             : >{seen}.done
             wait"
        ),
        dir.path(),
        &[("PV_NMI_AFTER", "3"), ("PV_WATCH_EVERY", "0.1")],
    ) else {
        return;
    };
    // Said first (the harness then waits for it), then the registers:
    // the NMI changes what the vCPUs do.
    let asking = "@@PV L1.l1 nmi-asking g-1";
    assert_eq!(
        lines(&out),
        [asking, "regs g-1", "nmi g-1", asking, "regs g-1", "nmi g-1"],
        "{out}"
    );
}

/// L1 lets the guests of an l2 step past a barrier only once all of them
/// reached it, with one line each per barrier, and a barrier of the same
/// name later starts afresh. (The guests' ports are plain files here; in a
/// run they are FIFOs that each guest's QEMU reads.)
#[test]
fn l1_opens_a_barrier_once_every_guest_reached_it() {
    let bin = tempfile::tempdir().unwrap();
    let host = tempfile::tempdir().unwrap();
    let run = host.path().join("run");
    std::fs::create_dir(&run).unwrap();
    let bars = host.path().join("bars");
    for g in ["g-1", "g-2", "h-1"] {
        std::fs::write(run.join(format!("bar-{g}")), "").unwrap();
    }
    let Some((rc, out)) = sh(
        r#"show() { for f in $PV_HOST/run/bar-*; do echo "${f##*/}: $(tr '\n' ' ' <"$f")"; : >"$f"; done; }
           l2_barrier g-1 contended; echo "after 1: $(cat $PV_HOST/run/bar-* | wc -l)"
           l2_barrier g-2 contended; echo "after 2: $(cat $PV_HOST/run/bar-* | wc -l)"
           l2_barrier h-1 contended; show
           l2_barrier g-2 'again/../x'; l2_barrier h-1 'again/../x'; l2_barrier g-1 'again/../x'; show
           l2_barrier g-1 contended; l2_barrier g-2 contended; show
           ls "$PV_BAR_DIR""#,
        bin.path(),
        &[
            ("PV_HOST", host.path().to_str().unwrap()),
            ("PV_QMP_DIR", "/run"),
            ("PV_BAR_DIR", bars.to_str().unwrap()),
            ("PV_BAR_N", "3"),
        ],
    ) else {
        return;
    };
    assert_eq!(rc, 0, "{out}");
    assert_eq!(
        lines(&out),
        [
            "after 1: 0",
            "after 2: 0",
            "@@PV L1.l1 barrier-open contended guests=g-1 g-2 h-1 ",
            "bar-g-1: go ",
            "bar-g-2: go ",
            "bar-h-1: go ",
            "@@PV L1.l1 barrier-open again/../x guests=g-1 g-2 h-1 ",
            "bar-g-1: go ",
            "bar-g-2: go ",
            "bar-h-1: go ",
            "bar-g-1: ",
            "bar-g-2: ",
            "bar-h-1: ",
            "contended",
        ]
    );
}

/// A guest at a barrier marks it with its port already open, passes on the
/// line L1 sends and says how long it waited; with no line within its bound
/// it fails, marked.
#[test]
fn a_guest_waits_at_a_barrier_for_l1s_line() {
    let bin = tempfile::tempdir().unwrap();
    let d = tempfile::tempdir().unwrap();
    let port = d.path().join("ttyS1");
    let Ok(st) = Command::new("mkfifo").arg(&port).status() else {
        eprintln!("no mkfifo: skipped");
        return;
    };
    assert!(st.success());
    let Some((rc, out)) = sh(
        r#"barrier b1 10 & pid=$!
           sleep 1; echo go >"$PV_BAR_PORT"
           wait $pid; echo rc=$?
           barrier b2 1; echo rc=$?"#,
        bin.path(),
        &[
            ("pv_level", "2"),
            ("pv_name", "g-1"),
            ("PV_BAR_PORT", port.to_str().unwrap()),
        ],
    ) else {
        return;
    };
    assert_eq!(rc, 0, "{out}");
    let l = lines(&out);
    assert_eq!(l.len(), 6, "{out}");
    assert_eq!(l[0], "@@PV L2.g-1 barrier b1");
    let waited: f64 = l[1]
        .strip_prefix("@@PV L2.g-1 barrier-passed b1 waited=")
        .unwrap_or_else(|| panic!("{out}"))
        .parse()
        .unwrap();
    assert!((0.5..9.0).contains(&waited), "{out}");
    assert_eq!(l[2], "rc=0");
    assert_eq!(l[3], "@@PV L2.g-1 barrier b2");
    assert_eq!(l[4], "@@PV L2.g-1 barrier-error b2 timeout=1");
    assert_eq!(l[5], "rc=1");
}

/// `nmis` adds up the NMI row of /proc/interrupts, one column per CPU,
/// and no other row (what locktorture's "release" waits on).
#[test]
fn nmis_adds_up_every_cpus_nmis() {
    let bin = tempfile::tempdir().unwrap();
    let proc = tempfile::tempdir().unwrap();
    std::fs::write(
        proc.path().join("interrupts"),
        "           CPU0       CPU1       CPU2\n\
         \x20 0:         45          0          0  IO-APIC   2-edge      timer\n\
         NMI:          3          0         12   Non-maskable interrupts\n\
         LOC:      16422      15021      14810   Local timer interrupts\n",
    )
    .unwrap();
    let env = [("PV_PROC", proc.path().to_str().unwrap())];
    let Some((_, out)) = sh("nmis", bin.path(), &env) else {
        return;
    };
    assert_eq!(lines(&out), ["15"]);
}

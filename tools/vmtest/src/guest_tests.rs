// SPDX-License-Identifier: GPL-2.0

//! Tests of the guest library (`tools/vmtest/guest/pvlock.sh`) itself, run
//! by this machine's busybox sh (the one the initramfs carries): step
//! statuses, and what L1 does when an L2 goes silent. No VM, no QEMU: the
//! L2's QMP socket is a fake ([`crate::qmp::tests::fake_qemu`]) and
//! `chroot` a shell function.

use crate::qmp::tests::{fake_hmp, fake_qemu};
use std::path::{Path, PathBuf};
use std::process::Command;

const BUSYBOX: &str = "/bin/busybox";

fn library() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("guest/pvlock.sh")
}

/// Runs `script` after sourcing the library as L1 would, with `bin` first
/// in PATH and `env` set; its status and output. `None` without busybox.
fn sh(script: &str, bin: &Path, env: &[(&str, &str)]) -> Option<(i32, String)> {
    sh_after("", script, bin, env)
}

/// As [`sh`], with `prelude` run before the library is sourced (shell
/// functions that stand in for commands the library runs as it loads).
fn sh_after(
    prelude: &str,
    script: &str,
    bin: &Path,
    env: &[(&str, &str)],
) -> Option<(i32, String)> {
    if !Path::new(BUSYBOX).exists() {
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
        .arg(format!("{prelude}\n. {}\n{script}", library().display()))
        .env("pv_level", "1")
        .env("pv_name", "l1")
        .env(
            "PV_QMP_PY",
            Path::new(env!("CARGO_MANIFEST_DIR")).join("guest/qmp.py"),
        )
        .env("PATH", path)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    Some((out.status.code().unwrap_or(-1), text))
}

/// Whether python3 runs here (the QMP client needs it); says so if not.
fn have_python3() -> bool {
    let ok = Command::new("python3").arg("--version").output().is_ok();
    if !ok {
        eprintln!("no python3: skipped");
    }
    ok
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

#[test]
fn l1_injects_an_nmi_through_the_guests_qmp_socket() {
    if !have_python3() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let env = [("PV_QMP_DIR", dir.path().to_str().unwrap())];
    // The host root is this machine's.
    let chroot = "chroot() { shift; \"$@\"; }\n";
    let server = fake_qemu(&dir.path().join("qmp-g-1.sock"), false);
    let Some((_, out)) = sh(&format!("{chroot}l2_nmi g-1; echo rc=$?"), dir.path(), &env) else {
        return;
    };
    assert_eq!(lines(&out), ["@@PV L1.l1 nmi-injected g-1", "rc=0"]);
    assert_eq!(server.join().unwrap(), ["qmp_capabilities", "inject-nmi"]);

    let server = fake_qemu(&dir.path().join("qmp-g-2.sock"), true);
    let (_, out) = sh(&format!("{chroot}l2_nmi g-2; echo rc=$?"), dir.path(), &env).unwrap();
    assert_eq!(
        lines(&out),
        ["@@PV L1.l1 nmi-failed g-2 inject-nmi: no NMI here", "rc=1"]
    );
    server.join().unwrap();

    let (_, out) = sh(&format!("{chroot}l2_nmi g-3"), dir.path(), &env).unwrap();
    assert!(out.starts_with("@@PV L1.l1 nmi-failed g-3 "), "{out}");

    // Nothing on the host to talk QMP with.
    let (_, out) = sh("chroot() { return 1; }\nl2_nmi g-4", dir.path(), &env).unwrap();
    assert_eq!(
        out.trim(),
        "@@PV L1.l1 nmi-failed g-4 no python3 or socat on the host to talk to QMP"
    );
}

#[test]
fn l1_samples_an_l2s_registers_through_its_qmp_socket() {
    if !have_python3() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let env = [("PV_QMP_DIR", dir.path().to_str().unwrap())];
    let chroot = "chroot() { shift; \"$@\"; }\n";
    let server = fake_hmp(&dir.path().join("qmp-g-1.sock"));
    let Some((_, out)) = sh(
        &format!("{chroot}l2_regs g-1; echo rc=$?"),
        dir.path(),
        &env,
    ) else {
        return;
    };
    // Two samples of two vCPUs; only the stack words that point into text,
    // and the word at the register that points into the kernel's data.
    assert_eq!(
        lines(&out),
        [
            "@@PV L1.l1 regs g-1 sample=1 cpu=0 rip=ffffffff81480b26 rfl=00000246 hlt=1 cpl=0 stack=ffffffff8148077e,ffffffffa0001234,ffffffff81001346,ffffffff81234567 ptrs=r15:ff11000000132120:0000000000000001 iframes=ffffffff81001346:ffffffff81234567:46",
            "@@PV L1.l1 regs g-1 sample=1 cpu=1 rip=000055ca3bfdf529 rfl=00000246 hlt=0 cpl=3 stack=",
            "@@PV L1.l1 regs g-1 sample=2 cpu=0 rip=ffffffff81480b26 rfl=00000246 hlt=1 cpl=0 stack=ffffffff8148077e,ffffffffa0001234,ffffffff81001346,ffffffff81234567 ptrs=r15:ff11000000132120:0000000000000001 iframes=ffffffff81001346:ffffffff81234567:46",
            "@@PV L1.l1 regs g-1 sample=2 cpu=1 rip=000055ca3bfdf529 rfl=00000246 hlt=0 cpl=3 stack=",
            "rc=0"
        ],
        "{out}"
    );
    let got = server.join().unwrap();
    // The stack of the kernel-mode vCPU is read through that vCPU.
    assert!(
        got.contains(&"x/512gx 0xffa0000000093e10 @0".to_string()),
        "{got:?}"
    );
    assert!(!got.iter().any(|c| c.ends_with("@1")), "{got:?}");

    // No QEMU there.
    let (_, out) = sh(
        &format!("{chroot}l2_regs g-2; echo rc=$?"),
        dir.path(),
        &env,
    )
    .unwrap();
    assert!(out.starts_with("@@PV L1.l1 regs-failed g-2 "), "{out}");
    assert!(out.trim_end().ends_with("rc=1"), "{out}");
}

#[test]
fn l1_records_the_ipis_and_wakeups_of_an_l2s_vcpus() {
    if !have_python3() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // L1's trace of its guests: thread 114 (vCPU 1) sends IPIs to APIC 0
    // (one older than the last three), vCPU 0's own timer (not an IPI),
    // another guest's thread 999 (not this guest's), wake-ups.
    std::fs::write(
        dir.path().join("trace"),
        "# tracer: nop\n\
 qemu-system-x86-114 [001] d..1.  10.000001: kvm_apic_accept_irq: apicid 0 vec 251 (Fixed|edge)\n\
 qemu-system-x86-113 [002] .....  10.100000: kvm_vcpu_wakeup: wait time 1000 ns, polling invalid\n\
 qemu-system-x86-114 [001] d..1.  11.000001: kvm_apic_accept_irq: apicid 0 vec 252 (Fixed|edge)\n\
 qemu-system-x86-113 [001] d..1.  11.200001: kvm_apic_accept_irq: apicid 0 vec 236 (Fixed|edge)\n\
 qemu-system-x86-999 [001] d..1.  11.500001: kvm_apic_accept_irq: apicid 0 vec 251 (Fixed|edge)\n\
 qemu-system-x86-114 [001] d..1.  12.000001: kvm_apic_accept_irq: apicid 0 vec 251 (Fixed|edge)\n\
 qemu-system-x86-113 [001] d..1.  12.000002: kvm_apic_accept_irq: apicid 1 vec 251 (Fixed|edge)\n\
 qemu-system-x86-114 [001] d..1.  13.000001: kvm_apic_accept_irq: apicid 0 vec 251 (Fixed|edge)\n\
 qemu-system-x86-114 [002] .....  13.100000: kvm_vcpu_wakeup: wait time 1000 ns, polling invalid\n",
    )
    .unwrap();
    let env = [("PV_QMP_DIR", dir.path().to_str().unwrap())];
    let chroot = "chroot() { shift; \"$@\"; }\n";
    let server = fake_qemu(&dir.path().join("qmp-g-1.sock"), false);
    // The trace instance (WI) is the library's own: set after sourcing.
    let script = format!(
        "{chroot}WI={}; irqrec g-1; echo rc=$?",
        dir.path().display()
    );
    let Some((_, out)) = sh(&script, dir.path(), &env) else {
        return;
    };
    let mut got = lines(&out);
    got.sort();
    assert_eq!(
        got,
        [
            "@@PV L1.l1 irqrec g-1 cpu=0 thread=113 ipis=4 last_ipis=11.000001/252,12.000001/251,13.000001/251 wakeups=1 last_wakeups=10.100000 ipis_since_wakeup=3 first_since_wakeup=11.000001/252/from1 trace_until=13.100000",
            "@@PV L1.l1 irqrec g-1 cpu=1 thread=114 ipis=1 last_ipis=12.000002/251 wakeups=1 last_wakeups=13.100000 ipis_since_wakeup=0 first_since_wakeup=- trace_until=13.100000",
            "rc=0",
        ],
        "{out}"
    );
    assert_eq!(
        server.join().unwrap(),
        ["qmp_capabilities", "query-cpus-fast"]
    );

    // No QEMU there: an error line, no record.
    let script = format!("{chroot}WI={}; irqrec g-2", dir.path().display());
    let (_, out) = sh(&script, dir.path(), &env).unwrap();
    assert!(out.starts_with("@@PV L1.l1 irqrec g-2 error=["), "{out}");
    assert_eq!(lines(&out).len(), 1, "{out}");
}

#[test]
fn l1_records_how_long_an_l2s_vcpus_waited_on_its_run_queues() {
    if !have_python3() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A /proc of two vCPU threads (those of the fake QEMU: 113 and 114),
    // and a `sleep` that moves it on, one step per sample: first thread
    // 113 waits 0.5 s on the run queue and 114 4 s in one second; then
    // 114 waits 2 s more in 3 s; then both threads are gone.
    let p = d.join("proc");
    for t in ["113", "114"] {
        std::fs::create_dir_all(p.join(t)).unwrap();
    }
    let w = |f: &str, s: &str| std::fs::write(p.join(f), s).unwrap();
    w("uptime", "10.00 3.00\n");
    w("113/schedstat", "500 1000000000 7\n");
    w("114/schedstat", "500 2000000000 7\n");
    let steps = format!(
        "#!/bin/sh\n\
         n=$(cat {p}/n 2>/dev/null || echo 0); echo $((n + 1)) >{p}/n\n\
         case $n in\n\
         0) echo '11.00 3.00' >{p}/uptime; echo '600 1500000000 8' >{p}/113/schedstat; echo '600 6000000000 8' >{p}/114/schedstat ;;\n\
         1) echo '14.00 3.00' >{p}/uptime; echo '700 8000000000 9' >{p}/114/schedstat ;;\n\
         *) rm -r {p}/113 {p}/114 ;;\n\
         esac\n",
        p = p.display()
    );
    let sleep = d.join("sleep");
    std::fs::write(&sleep, steps).unwrap();
    std::fs::set_permissions(&sleep, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let env = [
        ("PV_QMP_DIR", d.to_str().unwrap()),
        ("PV_PROC", p.to_str().unwrap()),
    ];
    let chroot = "chroot() { shift; \"$@\"; }\n";
    let server = fake_qemu(&d.join("qmp-g-1.sock"), false);
    let Some((_, out)) = sh(&format!("{chroot}l2_runq g-1; echo rc=$?"), d, &env) else {
        return;
    };
    // Reported: 4 s in 1 s and 2 s in 3 s (the default threshold is 2 s);
    // not: 0.5 s.
    assert_eq!(
        lines(&out),
        [
            "@@PV L1.l1 runq-on g-1 threads=2",
            "@@PV L1.l1 runq g-1 cpu=1 thread=114 waited=4.00 within=1.00",
            "@@PV L1.l1 runq g-1 cpu=1 thread=114 waited=2.00 within=3.00",
            "rc=0"
        ],
        "{out}"
    );
    assert_eq!(
        server.join().unwrap(),
        ["qmp_capabilities", "query-cpus-fast"]
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

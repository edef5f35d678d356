// SPDX-License-Identifier: GPL-2.0

//! The guest library's QMP steps (`tools/vmtest/guest/pvlock.sh`: `l2_nmi`,
//! `l2_regs`, `irqrec`, `l2_runq`) with the built `pvlock-qmp`, as L1 runs
//! them: by this machine's busybox sh (the one the initramfs carries), the
//! program first in PATH, against the QMP socket of an L2's QEMU under the
//! host root (`$PV_HOST$PV_QMP_DIR/qmp-NAME.sock`). No VM, no QEMU: the
//! socket is a fake ([`pvlock_qmp::fake`]). Here rather than in vmtest,
//! whose other tests of the library are in `src/guest_tests.rs`: cargo
//! builds a package's program for its integration tests, and only for
//! them.

use pvlock_common::testing::{guest_library, guest_sh};
use pvlock_qmp::fake;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_pvlock-qmp");

fn library() -> PathBuf {
    guest_library(env!("CARGO_MANIFEST_DIR"))
}

/// An L1: a host root with /run (where the L2s' QMP sockets are) and a
/// directory of programs with `pvlock-qmp`.
struct L1 {
    dir: tempfile::TempDir,
}

impl L1 {
    fn new() -> L1 {
        assert!(
            Path::new(BIN).is_file(),
            "{BIN} (the built pvlock-qmp) is missing"
        );
        let dir = tempfile::tempdir().unwrap();
        for d in ["host/run", "bin"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::os::unix::fs::symlink(BIN, dir.path().join("bin/pvlock-qmp")).unwrap();
        L1 { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Where QEMU puts the QMP socket of L2 `name`, as L1 sees it.
    fn sock(&self, name: &str) -> PathBuf {
        self.path().join(format!("host/run/qmp-{name}.sock"))
    }

    /// Runs `script` after sourcing the library as L1 does, with `env`
    /// set; its status and output. `None` without busybox.
    fn sh(&self, script: &str, env: &[(&str, &str)]) -> Option<(i32, String)> {
        let host = self.path().join("host");
        let host = host.to_str().expect("a UTF-8 temporary directory");
        let mut all = vec![("PV_HOST", host), ("PV_QMP_DIR", "/run")];
        all.extend_from_slice(env);
        guest_sh(&library(), "", script, &self.path().join("bin"), &all)
    }
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

#[test]
fn l1_injects_an_nmi_through_the_guests_qmp_socket() {
    let l1 = L1::new();
    let server = fake::qemu(&l1.sock("g-1"), false);
    let Some((_, out)) = l1.sh("l2_nmi g-1; echo rc=$?", &[]) else {
        return;
    };
    assert_eq!(lines(&out), ["@@PV L1.l1 nmi-injected g-1", "rc=0"]);
    assert_eq!(server.join().unwrap(), ["qmp_capabilities", "inject-nmi"]);

    let server = fake::qemu(&l1.sock("g-2"), true);
    let (_, out) = l1.sh("l2_nmi g-2; echo rc=$?", &[]).unwrap();
    assert_eq!(
        lines(&out),
        [
            "@@PV L1.l1 nmi-failed g-2 pvlock-qmp: inject-nmi: no NMI here",
            "rc=1"
        ]
    );
    server.join().unwrap();

    // No QEMU there.
    let (_, out) = l1.sh("l2_nmi g-3", &[]).unwrap();
    assert!(
        out.starts_with("@@PV L1.l1 nmi-failed g-3 pvlock-qmp: cannot connect to QMP at "),
        "{out}"
    );

    // No client in L1.
    let (_, out) = l1
        .sh("l2_nmi g-4; echo rc=$?", &[("PV_QMP", "pvlock-qmp-gone")])
        .unwrap();
    assert_eq!(
        lines(&out),
        [
            "@@PV L1.l1 nmi-failed g-4 no pvlock-qmp-gone in L1 to talk to QMP",
            "rc=1"
        ]
    );
}

#[test]
fn l1_samples_an_l2s_registers_through_its_qmp_socket() {
    let l1 = L1::new();
    let server = fake::hmp(&l1.sock("g-1"));
    let Some((_, out)) = l1.sh("l2_regs g-1; echo rc=$?", &[]) else {
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
    let (_, out) = l1.sh("l2_regs g-2; echo rc=$?", &[]).unwrap();
    assert!(
        out.starts_with("@@PV L1.l1 regs-failed g-2 pvlock-qmp: cannot connect to QMP at "),
        "{out}"
    );
    assert!(out.trim_end().ends_with("rc=1"), "{out}");

    // No client in L1.
    let (_, out) = l1
        .sh("l2_regs g-3; echo rc=$?", &[("PV_QMP", "pvlock-qmp-gone")])
        .unwrap();
    assert_eq!(
        lines(&out),
        [
            "@@PV L1.l1 regs-failed g-3 no pvlock-qmp-gone in L1 to talk to QMP",
            "rc=1"
        ]
    );
}

#[test]
fn l1_records_the_ipis_and_wakeups_of_an_l2s_vcpus() {
    let l1 = L1::new();
    let dir = l1.path();
    // L1's trace of its guests: thread 114 (vCPU 1) sends IPIs to APIC 0
    // (one older than the last three), vCPU 0's own timer (not an IPI),
    // another guest's thread 999 (not this guest's), wake-ups.
    std::fs::write(
        dir.join("trace"),
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
    let server = fake::qemu(&l1.sock("g-1"), false);
    // The trace instance (WI) is the library's own: set after sourcing.
    let script = format!("WI={}; irqrec g-1; echo rc=$?", dir.display());
    let Some((_, out)) = l1.sh(&script, &[]) else {
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
    let script = format!("WI={}; irqrec g-2", dir.display());
    let (_, out) = l1.sh(&script, &[]).unwrap();
    assert!(
        out.starts_with("@@PV L1.l1 irqrec g-2 error=[pvlock-qmp: cannot connect to QMP at "),
        "{out}"
    );
    assert_eq!(lines(&out).len(), 1, "{out}");

    // The guest's QEMU gone before its report reached L1: the threads
    // l2_runq saw at boot, said so.
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(
        tmp.join("pv-threads-g-2"),
        "cpu=0 thread=113\ncpu=1 thread=114\n",
    )
    .unwrap();
    let script = format!("WI={}; irqrec g-2", dir.display());
    let (_, out) = l1
        .sh(&script, &[("PV_TMP", tmp.to_str().unwrap())])
        .unwrap();
    let got = lines(&out);
    assert!(
        got[0].starts_with(
            "@@PV L1.l1 irqrec g-2 threads-at-boot why=[pvlock-qmp: cannot connect to QMP at "
        ),
        "{out}"
    );
    assert_eq!(got.len(), 3, "{out}");
    assert!(
        got.contains(&"@@PV L1.l1 irqrec g-2 cpu=0 thread=113 ipis=4 last_ipis=11.000001/252,12.000001/251,13.000001/251 wakeups=1 last_wakeups=10.100000 ipis_since_wakeup=3 first_since_wakeup=11.000001/252/from1 trace_until=13.100000"),
        "{out}"
    );
}

/// L1's release ends a guest's "locktorture ... release" run with an NMI
/// through its QMP socket, once if the guest says it took it; else sent
/// again, each time said, and an error after the sixth.
#[test]
fn l1_releases_a_guest_with_an_nmi_until_it_says_so() {
    let l1 = L1::new();
    let aw = l1.path().join("await");
    std::fs::create_dir_all(&aw).unwrap();
    let env = [
        ("PV_AWAIT_DIR", aw.to_str().unwrap()),
        ("PV_RELEASE_EVERY", "1"),
    ];
    std::fs::write(aw.join("g-1.released"), "").unwrap();
    let server = fake::qemu(&l1.sock("g-1"), false);
    let Some((_, out)) = l1.sh("release g-1; echo rc=$?", &env) else {
        return;
    };
    assert_eq!(lines(&out), ["@@PV L1.l1 out released g-1", "rc=0"]);
    assert_eq!(server.join().unwrap(), ["qmp_capabilities", "inject-nmi"]);

    // A guest that never says: six NMIs, five resends said, an error.
    let server = fake::qemu_n(&l1.sock("g-2"), 6, false);
    let (_, out) = l1.sh("release g-2; echo rc=$?", &env).unwrap();
    let again = "@@PV L1.l1 out release: g-2 said nothing in 1 s; sending again";
    let mut want = Vec::new();
    for _ in 0..5 {
        want.extend(["@@PV L1.l1 out released g-2", again]);
    }
    want.extend([
        "@@PV L1.l1 out released g-2",
        "@@PV L1.l1 error release: g-2 said nothing of 6 NMIs",
        "rc=1",
    ]);
    assert_eq!(lines(&out), want);
    let nmis = server.join().unwrap();
    assert_eq!(nmis.iter().filter(|c| *c == "inject-nmi").count(), 6);

    // No QEMU there: an error at once.
    let (_, out) = l1.sh("release g-3; echo rc=$?", &env).unwrap();
    assert!(
        out.starts_with("@@PV L1.l1 error release: g-3: pvlock-qmp: cannot connect to QMP at "),
        "{out}"
    );
    assert!(out.ends_with("rc=1\n"), "{out}");
}

#[test]
fn l1_records_how_long_an_l2s_vcpus_waited_on_its_run_queues() {
    let l1 = L1::new();
    let d = l1.path();
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
    let sleep = d.join("bin/sleep");
    std::fs::write(&sleep, steps).unwrap();
    std::fs::set_permissions(&sleep, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let server = fake::qemu(&l1.sock("g-1"), false);
    let Some((_, out)) = l1.sh(
        "l2_runq g-1; echo rc=$?",
        &[("PV_PROC", p.to_str().unwrap())],
    ) else {
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

/// The program's own command line: a usage error names the usage.
#[test]
fn a_bad_command_line_says_the_usage() {
    let run = |args: &[&str]| Command::new(BIN).args(args).output().unwrap();
    for args in [
        &[][..],
        &["sock"],
        &["sock", "nmi", "x"],
        &["sock", "stop", "x"],
        &["sock", "reboot"],
        &["sock", "savevm"],
        &["sock", "loadvm", "a b"],
        &["sock", "savevm", "s1", "x"],
        &["sock", "migrate", "tcp:localhost:4444"],
    ] {
        let o = run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("pvlock-qmp: ")
                && err.contains(
                    "(usage: pvlock-qmp SOCKET nmi|regs|threads|stop|cont|savevm NAME|loadvm NAME|migrate URI)"
                ),
            "{args:?}: {err}"
        );
    }
    let o = run(&["sock", "reboot"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown operation 'reboot'"));
    let o = run(&["--help"]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("usage: pvlock-qmp SOCKET"));
    // A QMP error: one line, status 1.
    let o = run(&["/nonexistent/qmp.sock", "threads"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim_end(),
        "pvlock-qmp: cannot connect to QMP at /nonexistent/qmp.sock: No such file or directory (os error 2)"
    );
}

/// `interleave` (the benchmark's paired boots): every guest paused once it
/// holds at h0 (booted), each set up alone, then each window's guests
/// resumed, released (a line to their barrier port) and paused at their
/// next hold, in the order given; at the end every guest resumed and
/// released; the harness told of every pause and resume. A guest that
/// never boots ends the interleave with an error.
#[test]
fn l1_interleaves_the_guests_windows() {
    let l1 = L1::new();
    // g-1: stop; setup cont+stop; two windows cont+stop; cont at the end.
    let g = fake::qemu_n(&l1.sock("g-1"), 8, false);
    let h = fake::qemu_n(&l1.sock("h-1"), 6, false);
    let aw = l1.path().join("await");
    let tmp = l1.path().join("tmp");
    std::fs::create_dir_all(&aw).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    // Every hold the guests will reach, there from the start.
    for (n, last) in [("g-1", 3), ("h-1", 2)] {
        for k in 0..=last {
            std::fs::write(aw.join(format!("{n}.h{k}")), "").unwrap();
        }
        std::fs::write(l1.path().join(format!("host/run/bar-{n}")), "").unwrap();
    }
    let env = [
        ("PV_AWAIT_DIR", aw.to_str().unwrap()),
        ("PV_TMP", tmp.to_str().unwrap()),
    ];
    let Some((_, out)) = l1.sh("interleave 5 g-1 h-1 g-1; echo rc=$?", &env) else {
        return;
    };
    let marks: Vec<&str> = out
        .lines()
        .filter(|l| !l.contains(" step-"))
        .map(|l| l.trim_start_matches("@@PV L1.l1 "))
        .collect();
    assert_eq!(
        marks,
        [
            "paused g-1",
            "paused h-1",
            "out interleave: 3 windows of 2 guests",
            // Set up one at a time.
            "resumed g-1",
            "paused g-1",
            "resumed h-1",
            "paused h-1",
            // The windows.
            "resumed g-1",
            "paused g-1",
            "resumed h-1",
            "paused h-1",
            "resumed g-1",
            "paused g-1",
            // Let go.
            "resumed g-1",
            "resumed h-1",
            "rc=0",
        ],
        "{out}"
    );
    let qmp = |v: Vec<String>| -> Vec<String> {
        v.into_iter().filter(|c| c != "qmp_capabilities").collect()
    };
    assert_eq!(
        qmp(g.join().unwrap()),
        ["stop", "cont", "stop", "cont", "stop", "cont", "stop", "cont"]
    );
    assert_eq!(
        qmp(h.join().unwrap()),
        ["stop", "cont", "stop", "cont", "stop", "cont"]
    );
    let bar = std::fs::read_to_string(l1.path().join("host/run/bar-g-1")).unwrap();
    assert_eq!(bar, "go\n");

    // h-1 never boots: an error within the bound, and no window runs.
    let g = fake::qemu_n(&l1.sock("g-2"), 1, false);
    std::fs::write(aw.join("g-2.h0"), "").unwrap();
    let (_, out) = l1.sh("interleave 1 g-2 h-2; echo rc=$?", &env).unwrap();
    assert!(
        out.contains("@@PV L1.l1 error interleave: not booted after 1 s: h-2"),
        "{out}"
    );
    assert!(out.ends_with("rc=1\n") && !out.contains("resumed"), "{out}");
    assert_eq!(qmp(g.join().unwrap()), ["stop"]);
}

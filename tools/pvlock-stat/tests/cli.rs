// SPDX-License-Identifier: GPL-2.0
//! Runs the built `pvlock-stat` on the fixture directories in
//! `tests/fixtures/`, which mock debugfs: `good/` (guest and host),
//! `guest-only/`, `host-only/`, `empty/` (no pvlock directories) and the
//! malformed `bad-*/`.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use pvlock_common::testing::{self, fails, ok};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_pvlock-stat");

/// The real `histo_wait` of a guest run, as in `good/pvlock/histo_wait`.
const HISTO_WAIT: [u64; 32] = [
    0, 0, 0, 0, 0, 0, 0, 0, 0, 2511189, 1155248, 1479063, 55051, 10622, 3154, 4093, 2253, 2706,
    1399, 1820, 3021, 2688, 1613, 326, 24, 0, 17, 0, 0, 0, 0, 0,
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn run(args: &[&str]) -> Output {
    testing::run(BIN, args)
}

/// Runs `pvlock-stat --debugfs FIXTURE ARGS...`.
fn run_on(fixture_dir: &Path, args: &[&str]) -> Output {
    let mut all = vec!["--debugfs", fixture_dir.to_str().unwrap()];
    all.extend_from_slice(args);
    run(&all)
}

fn json_of(o: Output) -> Value {
    let out = ok(o);
    assert_eq!(out.matches('\n').count(), 1, "not one line: {out}");
    serde_json::from_str(&out).expect("valid JSON")
}

/// A fresh copy of fixture `name` under the target's temporary directory.
fn temp_copy(name: &str, test: &str) -> PathBuf {
    let dst = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("pvlock-stat-{test}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dst);
    copy_dir(&fixture(name), &dst);
    dst
}

fn copy_dir(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    for e in fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            fs::copy(e.path(), &to).unwrap();
        }
    }
}

/// Replaces `path` at once (by renaming), so a reader never sees it empty.
fn replace_file(path: &Path, text: &str) {
    let tmp = path
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join(".replace.tmp");
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, path).unwrap();
}

// ---- the one-shot table ----

#[test]
fn table_shows_counters_info_and_histograms() {
    let out = ok(run_on(&fixture("good"), &[]));
    // Sections in order: counters of both directories, info, histograms.
    let guest = out.find("guest (pvlock/)").expect("guest heading");
    let host = out.find("host (pvlock_host/)").expect("host heading");
    let info = out.find("info (pvlock/)").expect("info heading");
    let histo = out.find("histo_wait (pvlock/, ns)").expect("histogram");
    let kick = out.find("histo_kick_latency (pvlock_host/, ns)").unwrap();
    assert!(guest < host && host < info && info < histo && histo < kick);

    let line = |prefix: &str| -> String {
        out.lines()
            .find(|l| l.trim_start().starts_with(prefix))
            .unwrap_or_else(|| panic!("no line {prefix:?} in\n{out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(line("taken_slow "), "taken_slow 213,995");
    assert_eq!(line("halts_head"), "halts_head 17");
    assert_eq!(
        line("time_blocked_ns"),
        "time_blocked_ns 1,834,712 ns (1.8ms)"
    );
    assert_eq!(line("lock_ops"), "lock_ops pvlock");
    assert_eq!(line("mode "), "mode kvm_hc_pvlock_wait");
    assert!(!out.contains("mode: "), "info is aligned, not printed raw");
    assert!(!out.contains("zero_stats"));

    // The histogram: bucket 9 is [512ns, 1.0us) and the largest, so it
    // has the full bar; empty buckets are left out; the total is shown.
    let total: u64 = HISTO_WAIT.iter().sum();
    assert!(out.contains("histo_wait (pvlock/, ns): 5,234,287 samples"));
    assert_eq!(total, 5_234_287);
    let b9 = line("[512ns, 1.0us)");
    assert!(
        b9.starts_with("[512ns, 1.0us) 2,511,189 47.98 47.98 ████"),
        "{b9}"
    );
    assert_eq!(b9.matches('█').count(), 40);
    assert!(!out.contains("[0ns, 2ns)"));
    assert!(!out.contains("[33.6ms, 67.1ms)"), "empty bucket 25 shown");
    assert!(out.contains("[67.1ms, 134.2ms)"));
    assert_eq!(line("total "), "total 5,234,287 100.00");
    // Sub-percent buckets still get a sliver of a bar.
    assert!(line("[16.8ms, 33.6ms)").ends_with('▏'));
}

#[test]
fn table_skip_zero_leaves_out_zero_counters_and_empty_histograms() {
    let dir = fixture("guest-only");
    let all = ok(run_on(&dir, &[]));
    assert!(all.contains("bad_unlocks"));
    assert!(all.contains("histo_blocked (pvlock/, ns): no samples"));

    let out = ok(run_on(&dir, &["--skip-zero"]));
    assert!(out.contains("taken_slow "));
    assert!(out.contains("taken_steal"));
    assert!(!out.contains("bad_unlocks"));
    assert!(!out.contains("halts_head"));
    assert!(!out.contains("histo_blocked"));
    assert!(out.contains("histo_wait"));
    assert!(out.contains("(15 zero counters not shown)"));
    assert!(!out.contains("host ("));
}

#[test]
fn table_fields_selects_by_name() {
    let out = ok(run_on(&fixture("good"), &["--fields", "^kicks"]));
    assert!(out.contains("kicks_held"));
    assert!(out.contains("kicks_woken"));
    assert!(!out.contains("taken_slow"));
    assert!(!out.contains("yields"));
    assert!(!out.contains("histo_"));
    // The info file is always shown.
    assert!(out.contains("info (pvlock/)"));

    let out = ok(run_on(&fixture("good"), &["--fields", "latency"]));
    assert!(out.contains("histo_kick_latency"));
    assert!(!out.contains("histo_wait"));
    assert!(out.contains("(no counters to show)"));
}

// ---- --json ----

#[test]
fn json_round_trips_the_fixture() {
    let root = fixture("good");
    let v = json_of(run_on(&root, &["--json"]));
    assert_eq!(v["debugfs"], root.to_str().unwrap());
    let dirs = v["dirs"].as_object().unwrap();
    assert_eq!(dirs.keys().collect::<Vec<_>>(), ["guest", "host"]);

    let g = &v["dirs"]["guest"];
    assert_eq!(g["path"], root.join("pvlock").to_str().unwrap());
    assert_eq!(g["counters"]["taken_slow"], 213995);
    assert_eq!(g["counters"]["halts_head"], 17);
    assert_eq!(g["counters"]["kicks"], 41);
    assert_eq!(g["counters"]["kicks_held"], 18);
    assert_eq!(g["counters"]["time_blocked_ns"], 1834712);
    assert_eq!(g["counters"]["taken_pending"], 7);
    assert_eq!(g["counters"].as_object().unwrap().len(), 19);
    assert!(g["counters"].get("zero_stats").is_none());
    assert_eq!(g["info"]["lock_ops"], "pvlock");
    assert_eq!(g["info"]["previous"], "upstream-pv");
    assert_eq!(g["info"]["spin_threshold"], "32768");
    assert_eq!(g["info"].as_object().unwrap().len(), 10);
    let hw = &g["histograms"]["histo_wait"];
    assert_eq!(hw["unit"], "ns");
    let buckets: Vec<u64> = hw["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap())
        .collect();
    assert_eq!(buckets, HISTO_WAIT);
    assert_eq!(g["histograms"].as_object().unwrap().len(), 3);

    // The text keeps the modules' own order of the counters.
    let text = ok(run_on(&root, &["--json"]));
    let at = |key: &str| text.find(&format!("\"{key}\":")).unwrap();
    assert!(at("taken_slow") < at("taken_slow_pickup"));
    assert!(at("taken_slow_pickup") < at("bad_unlocks"));
    assert!(at("kicks_woken") < at("kicks_bad_args"));
    assert!(at("waits_kicked") < at("hypercalls_disabled"));

    let h = &v["dirs"]["host"];
    assert_eq!(h["path"], root.join("pvlock_host").to_str().unwrap());
    assert_eq!(h["counters"]["kicks_woken"], 23);
    assert_eq!(h["counters"].as_object().unwrap().len(), 19);
    assert_eq!(h["info"], serde_json::json!({}));
    assert_eq!(
        h["histograms"]["histo_kick_latency"]["buckets"]
            .as_array()
            .unwrap()
            .len(),
        32
    );
}

#[test]
fn json_leaves_out_absent_directories() {
    let v = json_of(run_on(&fixture("guest-only"), &["--json"]));
    let dirs = v["dirs"].as_object().unwrap();
    assert_eq!(dirs.keys().collect::<Vec<_>>(), ["guest"]);

    let v = json_of(run_on(&fixture("host-only"), &["--json"]));
    let dirs = v["dirs"].as_object().unwrap();
    assert_eq!(dirs.keys().collect::<Vec<_>>(), ["host"]);

    let v = json_of(run_on(&fixture("good"), &["--json", "--host"]));
    assert_eq!(v["dirs"].as_object().unwrap().len(), 1);
    assert_eq!(v["dirs"]["host"]["counters"]["kicks"], 41);
}

#[test]
fn json_of_a_directory_given_directly() {
    let guest = fixture("good").join("pvlock");
    let v = json_of(run_on(&guest, &["--json"]));
    assert_eq!(v["debugfs"], guest.to_str().unwrap());
    assert_eq!(v["dirs"]["guest"]["path"], guest.to_str().unwrap());
    assert_eq!(v["dirs"]["guest"]["counters"]["taken_slow"], 213995);
    assert!(v["dirs"].get("host").is_none());

    let host = fixture("good").join("pvlock_host");
    let v = json_of(run_on(&host, &["--json"]));
    assert_eq!(v["dirs"]["host"]["counters"]["kicks_woken"], 23);
    assert!(v["dirs"].get("guest").is_none());
}

#[test]
fn json_applies_fields_and_skip_zero() {
    let v = json_of(run_on(
        &fixture("good"),
        &["--json", "--fields", "^kicks|histo_wait", "--skip-zero"],
    ));
    let g = v["dirs"]["guest"]["counters"].as_object().unwrap();
    assert_eq!(g.keys().collect::<Vec<_>>(), ["kicks", "kicks_held"]);
    let h = v["dirs"]["host"]["counters"].as_object().unwrap();
    // kicks_bad_target, kicks_self, kicks_bad_args and kicks_ignored are 0.
    // (serde_json's map sorts the keys.)
    assert_eq!(
        h.keys().collect::<Vec<_>>(),
        ["kicks", "kicks_held", "kicks_woken"]
    );
    let gh = v["dirs"]["guest"]["histograms"].as_object().unwrap();
    assert_eq!(gh.keys().collect::<Vec<_>>(), ["histo_wait"]);
    assert_eq!(v["dirs"]["host"]["histograms"], serde_json::json!({}));

    let v = json_of(run_on(&fixture("guest-only"), &["--json", "-z"]));
    let gh = v["dirs"]["guest"]["histograms"].as_object().unwrap();
    assert!(gh.get("histo_blocked").is_none());
    assert!(gh.get("histo_wait").is_some());
}

// ---- --log ----

#[test]
fn log_prints_a_header_and_a_line_per_interval() {
    let out = ok(run_on(&fixture("good"), &["--log", "0.1", "--count", "2"]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header[0], "time");
    assert_eq!(header[1], "guest.taken_slow");
    assert!(header.contains(&"host.kicks_woken"));
    assert_eq!(header.len(), 1 + 19 + 19);
    for l in &lines[1..] {
        let cells: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(cells.len(), header.len(), "{l}");
        assert!(cells[0].parse::<f64>().unwrap() > 0.0);
        // Nothing changes in a fixture.
        assert!(cells[1..].iter().all(|c| *c == "0"), "{l}");
        assert_eq!(l.len(), lines[0].len(), "columns not aligned");
    }
}

#[test]
fn log_csv_with_fields_and_skip_zero() {
    let out = ok(run_on(
        &fixture("good"),
        &[
            "--log", "0.1", "-n", "2", "--csv", "--fields", "^kicks", "-z",
        ],
    ));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "time,guest.kicks,guest.kicks_held,host.kicks,host.kicks_woken,\
         host.kicks_held"
    );
    assert_eq!(lines.len(), 3);
    for l in &lines[1..] {
        let cells: Vec<&str> = l.split(',').collect();
        assert_eq!(cells.len(), 6, "{l}");
        assert!(cells[1..].iter().all(|c| *c == "0"));
    }
}

#[test]
fn log_shows_deltas_of_changing_counters() {
    let root = temp_copy("good", "log-deltas");
    let mut child = Command::new(BIN)
        .args(["--debugfs", root.to_str().unwrap()])
        .args([
            "--log",
            "1",
            "--count",
            "3",
            "--csv",
            "--fields",
            "^(taken_slow|kicks)$",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let header = lines.next().unwrap().unwrap();
    assert_eq!(header, "time,guest.taken_slow,guest.kicks,host.kicks");
    let first = lines.next().unwrap().unwrap();
    assert!(first.ends_with(",0,0,0"), "{first}");
    // After the first interval was read: the guest took the slow path 100
    // more times and kicked 5 times; the host saw 5 kicks.
    replace_file(&root.join("pvlock/taken_slow"), "214095\n");
    replace_file(&root.join("pvlock/kicks"), "46\n");
    replace_file(&root.join("pvlock_host/kicks"), "46\n");
    let mut sums = [0u64; 3];
    for _ in 0..2 {
        let l = lines.next().unwrap().unwrap();
        for (sum, cell) in sums.iter_mut().zip(l.split(',').skip(1)) {
            *sum += cell.parse::<u64>().unwrap();
        }
    }
    assert!(lines.next().is_none());
    let status = child.wait().unwrap();
    assert!(status.success());
    assert_eq!(sums, [100, 5, 5]);
    fs::remove_dir_all(&root).unwrap();
}

// ---- --watch ----

#[test]
fn watch_count_1_prints_one_frame() {
    let out = ok(run_on(&fixture("good"), &["--watch", "1", "--count", "1"]));
    assert_eq!(out.matches("pvlock-stat: ").count(), 1);
    // Not a terminal: no escape sequences.
    assert!(!out.contains('\x1b'));
    assert!(out.contains("guest (pvlock/)"));
    assert!(out.contains("host (pvlock_host/)"));
    let taken = out.lines().find(|l| l.contains("taken_slow ")).unwrap();
    assert_eq!(
        taken.split_whitespace().collect::<Vec<_>>(),
        ["taken_slow", "213,995"]
    );
    assert!(out.contains("info: lock_ops=pvlock installed=1"));
    assert!(out.contains("histo_wait"));
    assert!(out.contains("p50 < 2.0us"));
}

#[test]
fn watch_shows_rates_from_the_second_frame() {
    let out = ok(run_on(
        &fixture("host-only"),
        &["-w", "0.1", "-n", "2", "--skip-zero"],
    ));
    let frames: Vec<&str> = out.split("pvlock-stat: ").skip(1).collect();
    assert_eq!(frames.len(), 2, "{out}");
    let row = |frame: &str, name: &str| -> Vec<String> {
        frame
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in {frame}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(row(frames[0], "kicks_woken"), ["kicks_woken", "23"]);
    assert_eq!(row(frames[1], "kicks_woken"), ["kicks_woken", "23", "0.0"]);
    assert!(!frames[1].contains("kicks_self"));
}

// ---- --reset ----

#[test]
fn reset_writes_1_to_every_zero_stats() {
    let root = temp_copy("good", "reset-all");
    let out = ok(run_on(&root, &["--reset"]));
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.contains("zeroed the guest statistics"));
    assert!(out.contains(root.join("pvlock/zero_stats").to_str().unwrap()));
    assert!(out.contains(root.join("pvlock_host/zero_stats").to_str().unwrap()));
    assert_eq!(
        fs::read_to_string(root.join("pvlock/zero_stats")).unwrap(),
        "1\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("pvlock_host/zero_stats")).unwrap(),
        "1\n"
    );
    // Nothing else was touched.
    assert_eq!(
        fs::read_to_string(root.join("pvlock/taken_slow")).unwrap(),
        "213995\n"
    );
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn reset_guest_only() {
    let root = temp_copy("good", "reset-guest");
    let out = ok(run_on(&root, &["--reset", "--guest"]));
    assert_eq!(out.lines().count(), 1, "{out}");
    assert_eq!(
        fs::read_to_string(root.join("pvlock/zero_stats")).unwrap(),
        "1\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("pvlock_host/zero_stats")).unwrap(),
        ""
    );
    fs::remove_dir_all(&root).unwrap();
}

#[test]
fn reset_without_zero_stats_fails() {
    let root = temp_copy("host-only", "reset-missing");
    fs::remove_file(root.join("pvlock_host/zero_stats")).unwrap();
    let err = fails(run_on(&root, &["--reset"]));
    assert!(err.contains("pvlock_host/zero_stats"), "{err}");
    // It was not created either.
    assert!(!root.join("pvlock_host/zero_stats").exists());
    fs::remove_dir_all(&root).unwrap();
}

// ---- errors ----

#[test]
fn bad_counter_names_file_and_line() {
    let err = fails(run_on(&fixture("bad-counter"), &[]));
    assert!(
        err.contains("bad-counter/pvlock/taken_slow: line 1:"),
        "{err}"
    );
    assert!(err.contains("\"12abc\""), "{err}");
    // Every mode reads the same way.
    let err = fails(run_on(&fixture("bad-counter"), &["--json"]));
    assert!(err.contains("taken_slow: line 1"), "{err}");
    // Unless the file is not selected.
    ok(run_on(
        &fixture("bad-counter"),
        &["--json", "--fields", "^kicks$"],
    ));
}

#[test]
fn bad_histogram_names_file_and_line() {
    let err = fails(run_on(&fixture("bad-histo"), &[]));
    assert!(
        err.contains(
            "bad-histo/pvlock_host/histo_kick_latency: line 1: expected 32 values, found 31"
        ),
        "{err}"
    );
    let err = fails(run_on(&fixture("bad-histo-value"), &["--log", "1"]));
    assert!(
        err.contains(
            "histo_kick_latency: line 1: value 12 (\"x7\") is not an unsigned 32-bit integer"
        ),
        "{err}"
    );
}

#[test]
fn bad_info_names_file_and_line() {
    let err = fails(run_on(&fixture("bad-info"), &["--watch", "1"]));
    assert!(err.contains("bad-info/pvlock/info: line 3:"), "{err}");
    assert!(err.contains("reason installed"), "{err}");
}

#[test]
fn no_pvlock_directories() {
    let root = fixture("empty");
    let err = fails(run_on(&root, &[]));
    assert!(
        err.contains("no pvlock statistics: load guest_pvlock or host_kvm"),
        "{err}"
    );
    assert!(err.contains(root.join("pvlock").to_str().unwrap()), "{err}");
    assert!(
        err.contains(root.join("pvlock_host").to_str().unwrap()),
        "{err}"
    );
}

#[test]
fn empty_root_is_not_mounted() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pvlock-stat-unmounted");
    fs::create_dir_all(&root).unwrap();
    let err = fails(run_on(&root, &[]));
    assert!(err.contains("debugfs is not mounted"), "{err}");
    assert!(
        err.contains(&format!("mount -t debugfs none {}", root.display())),
        "{err}"
    );
}

#[test]
fn missing_root_and_missing_directory() {
    let err = fails(run(&["--debugfs", "/nonexistent/debugfs"]));
    assert!(err.contains("/nonexistent/debugfs"), "{err}");
    let err = fails(run_on(&fixture("host-only"), &["--guest"]));
    assert!(err.contains("no guest statistics"), "{err}");
    assert!(err.contains("guest_pvlock"), "{err}");
    let file = fixture("good").join("pvlock/info");
    let err = fails(run_on(&file, &[]));
    assert!(err.contains("not a directory"), "{err}");
}

#[test]
fn bad_command_lines_exit_1() {
    for args in [
        &["--log", "1", "--json"][..],
        &["--watch", "1", "--log", "1"],
        &["--csv"],
        &["--count", "2"],
        &["--log", "0"],
        &["--log", "soon"],
        &["--fields", "("],
        &["--reset", "--skip-zero"],
        &["--no-such-option"],
    ] {
        let o = run(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(!o.stderr.is_empty(), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn help_documents_every_option_with_examples() {
    let out = ok(run(&["--help"]));
    for opt in [
        "--debugfs",
        "--watch",
        "--log",
        "--csv",
        "--count",
        "--json",
        "--fields",
        "--skip-zero",
        "--reset",
        "--guest",
        "--host",
        "--vms",
    ] {
        assert!(out.contains(opt), "{opt} missing from --help");
    }
    assert!(out.contains("Examples:"));
    assert!(out.contains("RAW DELTA"));
    assert_eq!(out.matches("Example: pvlock-stat").count(), 12);
    let short = ok(run(&["-h"]));
    assert!(short.contains("Examples:"));
}

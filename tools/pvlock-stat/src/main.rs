// SPDX-License-Identifier: GPL-2.0
//! `pvlock-stat`: shows the statistics of the pvlock kernel modules.
//!
//! `guest_pvlock` keeps its counters, an `info` file and log2 histograms in
//! debugfs `pvlock/`; `host_kvm` keeps its counters and a kick latency
//! histogram in `pvlock_host/`. In the spirit of the kernel's `kvm_stat`,
//! this tool prints them once as a table (the default), refreshes them in
//! place with rates (`--watch`), prints one line of deltas per interval for
//! scripts (`--log`, `--csv`), prints one JSON snapshot (`--json`) or zeroes
//! them (`--reset`).
//!
//! It is meant to run as root in small VMs (busybox initramfs, no `/etc`, no
//! terminfo), so it uses only pure-Rust crates, links statically and draws
//! with plain ANSI escapes. `pvlock_common::debugfs` finds and parses the
//! files, [`render`] formats them; this file holds the command line and the
//! loops.

mod render;
mod vms;

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::{ArgGroup, Parser};
use pvlock_common::cli::{self, parse_secs};
use pvlock_common::debugfs::{self, Located, Snapshot};
use pvlock_common::stats::Kind;
use regex::Regex;

use render::LogColumns;

const LONG_ABOUT: &str = "\
Show the statistics of the pvlock kernel modules: guest_pvlock's debugfs \
directory pvlock/ (in a guest) and host_kvm's pvlock_host/ (on a host).

Without a mode option, print once: every counter of every directory found, \
the guest's info file, and every histogram. Histogram bucket k counts values \
in [2^k, 2^(k+1)) nanoseconds; bucket 0 also counts 0, and the last bucket \
counts everything from 2^31 ns (2.1s) on. Counters whose name ends in _ns \
are nanoseconds too.

Needs root: debugfs is readable by root only.";

const AFTER_HELP: &str = "\
Examples:
  pvlock-stat                                  everything, once
  pvlock-stat --fields '^(taken|kicks)' -z     some counters, none that is 0
  pvlock-stat --watch 1                        refresh every second, with rates
  pvlock-stat --log 5 --csv --count 12 >s.csv  a minute of 5-second deltas
  pvlock-stat --json                           one-line JSON snapshot
  pvlock-stat --reset --guest                  zero the guest's statistics
  pvlock-stat --vms                            per VM, on a host (KVM's counts)
  pvlock-stat --debugfs /tmp/snap/pvlock       read a copied directory

Exit status: 0 on success; 1 on any error, a bad command line included.";

/// Statistics of the pvlock paravirtual spinlock modules, from debugfs.
#[derive(Parser, Debug)]
#[command(
    name = "pvlock-stat",
    version,
    long_about = LONG_ABOUT,
    after_help = AFTER_HELP,
    max_term_width = 100,
    group(ArgGroup::new("mode").args(["watch", "log", "json", "reset"])),
    group(ArgGroup::new("interval").args(["watch", "log"])),
)]
struct Cli {
    /// The debugfs root to read instead of /sys/kernel/debug.
    ///
    /// DIR holds pvlock/ and/or pvlock_host/, or is one of these directories
    /// itself (a copied snapshot, say): a directory with a kicks_woken file
    /// is the host's, one with info or taken_slow the guest's. Without this
    /// option, /proc/mounts must list a debugfs mount.
    ///
    /// Example: pvlock-stat --debugfs /tmp/snapshot/pvlock_host
    #[arg(short, long, value_name = "DIR")]
    debugfs: Option<PathBuf>,

    /// Refresh in place every SECS seconds, with rates; until Ctrl-C.
    ///
    /// Each frame shows every counter's total and its rate per second since
    /// the previous frame (blank in the first frame), and each histogram's
    /// number of samples, their rate and the buckets of the median, 90th and
    /// 99th percentiles. On a terminal, the screen is cleared before each
    /// frame; otherwise frames are separated by a blank line. SECS may be
    /// fractional.
    ///
    /// Example: pvlock-stat --watch 2 --skip-zero
    #[arg(short, long, value_name = "SECS", value_parser = parse_secs)]
    watch: Option<f64>,

    /// Print one line per SECS seconds, vmstat-style, for scripts.
    ///
    /// The first line names the columns: "time", then each selected counter
    /// as DIR.NAME (guest.taken_slow, host.kicks). Every SECS seconds follows
    /// a line with the seconds since the start and, per counter, its RAW
    /// DELTA over that interval: how much it grew, not a rate per second
    /// (divide by SECS for that). A counter that went down was zeroed and
    /// counts from 0. Histograms are not logged. With --skip-zero, the
    /// counters that are zero at the start are left out.
    ///
    /// Example: pvlock-stat --log 1 --count 60 --fields '^halts'
    #[arg(short, long, value_name = "SECS", value_parser = parse_secs)]
    log: Option<f64>,

    /// With --log: separate the columns by commas (CSV with a header).
    ///
    /// Example: pvlock-stat --log 10 --csv > pvlock.csv
    #[arg(short, long, requires = "log")]
    csv: bool,

    /// With --log or --watch: stop after N lines or frames.
    ///
    /// Example: pvlock-stat --log 1 --count 5
    #[arg(short = 'n', long, value_name = "N", requires = "interval",
          value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,

    /// Print one snapshot as JSON, on one line.
    ///
    /// Schema: {"debugfs": ROOT, "dirs": {"guest": DIR, "host": DIR}} where
    /// a directory that is absent is left out and each DIR is
    /// {"path": PATH, "counters": {NAME: NUMBER, ...}, "info": {KEY: STRING,
    /// ...}, "histograms": {NAME: {"unit": "ns", "buckets": [32 NUMBERS]}}}.
    /// "info" is {} for the host. --fields and --skip-zero apply.
    ///
    /// Example: pvlock-stat --json | jq .dirs.guest.counters.kicks
    #[arg(short, long)]
    json: bool,

    /// Show only the counters and histograms whose name matches REGEX.
    ///
    /// The regular expression is searched for in the bare file name
    /// (taken_slow, histo_wait), as kvm_stat does: anchor it with ^ and $ to
    /// match whole names. Applies to every mode; the info file is always
    /// shown. Use --guest or --host to choose directories.
    ///
    /// Example: pvlock-stat --fields '^kicks|histo_kick'
    #[arg(short, long, value_name = "REGEX", value_parser = parse_regex)]
    fields: Option<Regex>,

    /// Leave out the counters that are zero and the empty histograms.
    ///
    /// Example: pvlock-stat --skip-zero
    #[arg(short = 'z', long)]
    skip_zero: bool,

    /// Zero the statistics: write "1" to each directory's zero_stats.
    ///
    /// Zeroes every directory found, or those chosen with --guest/--host,
    /// and says which.
    ///
    /// Example: pvlock-stat --reset --host
    #[arg(long, conflicts_with_all = ["fields", "skip_zero"])]
    reset: bool,

    /// Per VM: the pvlock statistics KVM keeps (on a host).
    ///
    /// KVM counts lock waits and kicks per vCPU (KVM_GET_STATS_FD); its
    /// debugfs directory kvm/PID-FD/ sums them per VM. One row per VM,
    /// named by its VMM's pid and command; with --json, one JSON object
    /// {"vms": [{"vm", "pid", "comm", "counters": {NAME: N}}]}.
    ///
    /// Example: pvlock-stat --vms
    #[arg(long, conflicts_with_all = ["watch", "log", "reset", "guest", "host", "fields", "skip_zero"])]
    vms: bool,

    /// Only the guest's directory, pvlock/ (an error if it is missing).
    ///
    /// Example: pvlock-stat --guest --json
    #[arg(long)]
    guest: bool,

    /// Only the host's directory, pvlock_host/ (an error if it is missing).
    ///
    /// Example: pvlock-stat --host --watch 1
    #[arg(long)]
    host: bool,
}

fn parse_regex(s: &str) -> Result<Regex, regex::Error> {
    Regex::new(s)
}

fn main() -> ExitCode {
    let cli = match cli::parse::<Cli>() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let run = match run(&cli) {
        // `pvlock-stat --log 1 | head` ends quietly.
        Err(e) if cli::is_broken_pipe(&e) => Ok(()),
        r => r,
    };
    cli::exit_status("pvlock-stat", run.map(|()| ExitCode::SUCCESS))
}

fn run(cli: &Cli) -> Result<()> {
    let root = match &cli.debugfs {
        Some(dir) => dir.clone(),
        None => {
            let mounts = std::fs::read_to_string("/proc/mounts").ok();
            debugfs::default_root(mounts.as_deref())?
        }
    };
    if cli.vms {
        let vms = vms::read(&root, Path::new("/proc"))?;
        let text = if cli.json {
            vms::json(&vms) + "\n"
        } else {
            vms::table(&vms)
        };
        io::stdout().lock().write_all(text.as_bytes())?;
        return Ok(());
    }
    let kinds: Vec<Kind> = [(cli.guest, Kind::Guest), (cli.host, Kind::Host)]
        .into_iter()
        .filter_map(|(on, kind)| on.then_some(kind))
        .collect();
    let located = debugfs::locate(&root)?.select(&kinds)?;
    let mut out = io::stdout().lock();

    if cli.reset {
        for dir in &located.dirs {
            let path = debugfs::reset(dir)?;
            writeln!(
                out,
                "zeroed the {} statistics: wrote 1 to {}",
                dir.kind,
                path.display()
            )?;
        }
        return Ok(());
    }

    let reader = Reader {
        located: &located,
        fields: cli.fields.as_ref(),
    };
    if cli.json {
        let snaps = skip_zeros(reader.read()?, cli.skip_zero);
        writeln!(out, "{}", render::json(&located.root, &snaps))?;
    } else if let Some(secs) = cli.log {
        log(&mut out, &reader, secs, cli)?;
    } else if let Some(secs) = cli.watch {
        watch(&mut out, &reader, secs, cli)?;
    } else {
        let snaps = reader.read()?;
        let zeros = if cli.skip_zero {
            snaps
                .iter()
                .map(|s| s.counters.iter().filter(|c| c.value == 0).count())
                .sum()
        } else {
            0
        };
        let snaps = skip_zeros(snaps, cli.skip_zero);
        write!(out, "{}", render::table(&located.root, &snaps, zeros))?;
    }
    out.flush()?;
    Ok(())
}

/// Reads the selected directories, keeping the `--fields` that match.
struct Reader<'a> {
    located: &'a Located,
    fields: Option<&'a Regex>,
}

impl Reader<'_> {
    fn read(&self) -> Result<Vec<Snapshot>, debugfs::Error> {
        let select = |name: &str| self.fields.is_none_or(|re| re.is_match(name));
        self.located
            .dirs
            .iter()
            .map(|d| debugfs::read(d, &select).map(render::in_shown_order))
            .collect()
    }

    fn root(&self) -> &Path {
        &self.located.root
    }
}

fn skip_zeros(snaps: Vec<Snapshot>, skip: bool) -> Vec<Snapshot> {
    if skip {
        snaps.iter().map(Snapshot::without_zeros).collect()
    } else {
        snaps
    }
}

/// Sleeps until `start` plus `n` intervals, so that rounds do not drift.
fn sleep_until_round(start: Instant, interval: f64, n: u64) {
    let due = start + Duration::from_secs_f64(interval * n as f64);
    std::thread::sleep(due.saturating_duration_since(Instant::now()));
}

/// `--log`: a header, then a line of deltas per interval.
fn log(out: &mut impl Write, reader: &Reader, secs: f64, cli: &Cli) -> Result<()> {
    let first = reader.read()?;
    let start = Instant::now();
    let cols = LogColumns::new(&first, cli.skip_zero);
    if cols.0.is_empty() {
        match (&cli.fields, cli.skip_zero) {
            (Some(re), _) if LogColumns::new(&first, false).0.is_empty() => {
                bail!("no counter matches --fields {:?}", re.as_str())
            }
            _ => bail!("no counter to log: every selected counter is 0 (drop --skip-zero)"),
        }
    }
    writeln!(out, "{}", cols.header(cli.csv))?;
    out.flush()?;
    let mut old = cols.values(&first);
    for n in 1.. {
        sleep_until_round(start, secs, n);
        let snaps = reader.read()?;
        let elapsed = start.elapsed().as_secs_f64();
        let new = cols.values(&snaps);
        writeln!(out, "{}", cols.line(elapsed, &old, &new, cli.csv))?;
        out.flush()?;
        old = new;
        if cli.count.is_some_and(|c| n >= c) {
            break;
        }
    }
    Ok(())
}

/// `--watch`: a frame now, then one per interval.
fn watch(out: &mut impl Write, reader: &Reader, secs: f64, cli: &Cli) -> Result<()> {
    let tty = io::stdout().is_terminal();
    let start = Instant::now();
    let mut prev: Option<(Vec<Snapshot>, Instant)> = None;
    for n in 1.. {
        let snaps = reader.read()?;
        let now = Instant::now();
        let since = prev
            .as_ref()
            .map(|(p, t)| (p.as_slice(), now.duration_since(*t).as_secs_f64()));
        let frame = render::watch_frame(reader.root(), secs, since, &snaps, cli.skip_zero);
        if tty {
            // Cursor home, clear the screen.
            write!(out, "\x1b[H\x1b[2J{frame}")?;
        } else {
            if n > 1 {
                writeln!(out)?;
            }
            write!(out, "{frame}")?;
        }
        out.flush()?;
        if cli.count.is_some_and(|c| n >= c) {
            break;
        }
        prev = Some((snaps, now));
        sleep_until_round(start, secs, n);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_option_has_an_example() {
        cli::assert_every_option_has_an_example::<Cli>();
    }

    #[test]
    fn modes_exclude_each_other() {
        assert!(Cli::try_parse_from(["pvlock-stat", "--log", "1", "--json"]).is_err());
        assert!(Cli::try_parse_from(["pvlock-stat", "--watch", "1", "--log", "1"]).is_err());
        assert!(Cli::try_parse_from(["pvlock-stat", "--csv"]).is_err());
        assert!(Cli::try_parse_from(["pvlock-stat", "--count", "2"]).is_err());
        assert!(Cli::try_parse_from(["pvlock-stat", "--reset", "--fields", "x"]).is_err());
        assert!(Cli::try_parse_from(["pvlock-stat", "--log", "0"]).is_err());
        assert!(Cli::try_parse_from(["pvlock-stat", "--log", "1", "-n", "0"]).is_err());
        let cli = Cli::try_parse_from(["pvlock-stat", "-l", "0.5", "-c", "-n", "3", "-z"]).unwrap();
        assert_eq!(
            (cli.log, cli.csv, cli.count, cli.skip_zero),
            (Some(0.5), true, Some(3), true)
        );
    }
}

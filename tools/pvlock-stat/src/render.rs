// SPDX-License-Identifier: GPL-2.0
//! Output: the one-shot table, the `--watch` frames, the `--log` lines and
//! the `--json` snapshot. Every function returns text; `main.rs` writes it.

use std::fmt::Write as _;
use std::path::Path;

use pvlock_common::debugfs::Snapshot;
use pvlock_common::fmt::fmt_count_grouped;
use pvlock_common::quantile::histogram_bucket;
use pvlock_common::stats::{unit_of, Histogram, Kind, HIST_BUCKETS};
use serde::ser::{Serialize, SerializeMap, Serializer};

/// Width of a full histogram bar, in characters.
const BAR_WIDTH: usize = 40;

/// `s` with its counters in the order their module declares them (as
/// `abi.rs` lists them); names the module does not declare last, by name.
pub fn in_shown_order(mut s: Snapshot) -> Snapshot {
    let known: Vec<&str> = s.dir.kind.counters().collect();
    s.counters.sort_by_cached_key(|c| {
        let at = known.iter().position(|k| *k == c.name);
        (at.unwrap_or(known.len()), c.name.clone())
    });
    s
}

/// A duration in nanoseconds, short: `512ns`, `1.0us`, `65.5us`, `2.1s`.
pub fn fmt_ns(ns: u64) -> String {
    if ns < 1000 {
        return format!("{ns}ns");
    }
    fmt_ns_f64(ns as f64)
}

/// As [`fmt_ns`] for a fractional number of nanoseconds (rates).
fn fmt_ns_f64(ns: f64) -> String {
    if ns < 999.5 {
        return format!("{ns:.0}ns");
    }
    let units = [(1e3, "us"), (1e6, "ms"), (1e9, "s")];
    for (i, &(div, unit)) in units.iter().enumerate() {
        let x = (ns / div * 10.0).round() / 10.0;
        if x < 1000.0 || i == units.len() - 1 {
            return format!("{x:.1}{unit}");
        }
    }
    unreachable!("the last unit always returns")
}

/// A value of `unit` (`ns` gets [`fmt_ns`]).
fn fmt_value(v: u64, unit: &str) -> String {
    match unit {
        "ns" => fmt_ns(v),
        _ => format!("{v}{unit}"),
    }
}

/// A rate per second: `0.5`, `12.3`, `1,234`.
fn fmt_rate(r: f64, unit: Option<&str>) -> String {
    match unit {
        Some("ns") => fmt_ns_f64(r),
        _ if r < 99.95 => format!("{r:.1}"),
        _ => fmt_count_grouped(r.round() as u64),
    }
}

/// The bounds of histogram bucket `k`: `[2^k, 2^(k+1))`, with 0 as the
/// lower bound of bucket 0 and no upper bound for the last bucket.
pub fn bucket_bounds(k: usize) -> (u64, Option<u64>) {
    let lo = if k == 0 { 0 } else { 1u64 << k };
    let hi = (k + 1 < HIST_BUCKETS).then(|| 1u64 << (k + 1));
    (lo, hi)
}

/// The label of bucket `k`: `[512ns, 1.0us)`, `[2.1s, inf)`.
pub fn bucket_label(k: usize, unit: &str) -> String {
    let (lo, hi) = bucket_bounds(k);
    match hi {
        Some(hi) => format!("[{}, {})", fmt_value(lo, unit), fmt_value(hi, unit)),
        None => format!("[{}, inf)", fmt_value(lo, unit)),
    }
}

/// A bar of unicode blocks, [`BAR_WIDTH`] long for `max`, in eighths of a
/// character; a non-zero count always gets at least one eighth.
pub fn bar(count: u64, max: u64) -> String {
    const PARTIAL: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    if count == 0 || max == 0 {
        return String::new();
    }
    let eighths =
        (u128::from(count) * (BAR_WIDTH as u128) * 8 + u128::from(max) / 2) / u128::from(max);
    let eighths = (eighths as usize).max(1);
    let mut s = "█".repeat(eighths / 8);
    if eighths % 8 != 0 {
        s.push(PARTIAL[eighths % 8]);
    }
    s
}

/// `p50 < 2.0us  p90 < 4.1us  p99 < 131.1us`, from the buckets' bounds.
fn quantiles(h: &Histogram) -> String {
    [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)]
        .iter()
        .filter_map(|&(name, q)| {
            let k = histogram_bucket(&h.buckets, q)?;
            Some(match bucket_bounds(k) {
                (_, Some(hi)) => format!("{name} < {}", fmt_value(hi, h.unit())),
                (lo, None) => format!("{name} >= {}", fmt_value(lo, h.unit())),
            })
        })
        .collect::<Vec<_>>()
        .join("  ")
}

/// How much a counter grew from `old` to `new`; a counter that went down
/// was zeroed (`zero_stats`, module reload) and grew by `new` since.
pub fn delta(old: u64, new: u64) -> u64 {
    if new >= old {
        new - old
    } else {
        new
    }
}

/// The heading of a directory: `guest (pvlock/)`.
fn heading(s: &Snapshot) -> String {
    format!("{} ({})", s.dir.kind, s.dir.display_name())
}

/// A line of an aligned table.
enum Line {
    /// Printed as it is, not aligned.
    Text(String),
    /// Cells; `true` aligns right. The last cell is not padded.
    Cells(Vec<(String, bool)>),
}

/// Renders lines, each column as wide as its widest cell.
fn align(lines: &[Line]) -> String {
    let mut widths: Vec<usize> = Vec::new();
    for line in lines {
        if let Line::Cells(cells) = line {
            for (i, (text, _)) in cells.iter().enumerate() {
                let w = text.chars().count();
                if widths.len() <= i {
                    widths.push(w);
                } else {
                    widths[i] = widths[i].max(w);
                }
            }
        }
    }
    let mut out = String::new();
    for line in lines {
        match line {
            Line::Text(t) => out.push_str(t),
            Line::Cells(cells) => {
                let mut s = String::from(" ");
                for (i, (text, right)) in cells.iter().enumerate() {
                    let pad = widths[i] - text.chars().count();
                    s.push(' ');
                    if *right {
                        s.extend(std::iter::repeat_n(' ', pad));
                        s.push_str(text);
                    } else {
                        s.push_str(text);
                        s.extend(std::iter::repeat_n(' ', pad));
                    }
                }
                out.push_str(s.trim_end());
            }
        }
        out.push('\n');
    }
    out
}

fn left(s: impl Into<String>) -> (String, bool) {
    (s.into(), false)
}

fn right(s: impl Into<String>) -> (String, bool) {
    (s.into(), true)
}

/// The one-shot output: the counters of every directory, then the `info`
/// files, then the histograms.
pub fn table(root: &Path, snaps: &[Snapshot], skipped_zeros: usize) -> String {
    let mut out = format!("pvlock statistics in {}\n\n", root.display());

    let mut lines = Vec::new();
    for (i, s) in snaps.iter().enumerate() {
        if i > 0 {
            lines.push(Line::Text(String::new()));
        }
        lines.push(Line::Text(heading(s)));
        if s.counters.is_empty() {
            lines.push(Line::Text("  (no counters to show)".into()));
        }
        for c in &s.counters {
            let unit = unit_of(&c.name);
            let human = match unit {
                Some(u) if c.value >= 1000 => format!("({})", fmt_value(c.value, u)),
                _ => String::new(),
            };
            lines.push(Line::Cells(vec![
                left(&c.name),
                right(fmt_count_grouped(c.value)),
                left(unit.unwrap_or("")),
                left(human),
            ]));
        }
    }
    out.push_str(&align(&lines));
    if skipped_zeros > 0 {
        let _ = writeln!(out, "  ({skipped_zeros} zero counters not shown)");
    }

    for s in snaps.iter().filter(|s| !s.info.is_empty()) {
        let mut lines = vec![Line::Text(format!("\ninfo ({})", s.dir.display_name()))];
        for (k, v) in &s.info {
            lines.push(Line::Cells(vec![left(k), left(v)]));
        }
        out.push_str(&align(&lines));
    }

    for s in snaps {
        for h in &s.histograms {
            out.push('\n');
            out.push_str(&histogram(s, h));
        }
    }
    out
}

/// One histogram: a heading with the total and quantiles, then a row per
/// non-empty bucket with its count, share, cumulative share and a bar.
pub fn histogram(s: &Snapshot, h: &Histogram) -> String {
    let total = h.total();
    let unit = h.unit();
    let head = format!("{} ({}, {unit})", h.name, s.dir.display_name());
    if total == 0 {
        return format!("{head}: no samples\n");
    }
    let max = h.buckets.iter().copied().max().map_or(0, u64::from);
    let mut lines = vec![
        Line::Text(format!(
            "{head}: {} samples; {}",
            fmt_count_grouped(total),
            quantiles(h)
        )),
        Line::Cells(vec![
            left("bucket"),
            right("count"),
            right("%"),
            right("cum %"),
            left(""),
        ]),
    ];
    let mut cum = 0u64;
    for (k, &b) in h.buckets.iter().enumerate() {
        let b = u64::from(b);
        cum += b;
        if b == 0 {
            continue;
        }
        let pct = |n: u64| format!("{:.2}", n as f64 * 100.0 / total as f64);
        lines.push(Line::Cells(vec![
            left(bucket_label(k, unit)),
            right(fmt_count_grouped(b)),
            right(pct(b)),
            right(pct(cum)),
            left(bar(b, max)),
        ]));
    }
    lines.push(Line::Cells(vec![
        left("total"),
        right(fmt_count_grouped(total)),
        right("100.00"),
    ]));
    align(&lines)
}

/// One `--watch` frame: per counter its total and its rate per second since
/// `prev` (read `secs` seconds before `cur`); per histogram its number of
/// samples, their rate and quantiles. Without `prev` the rates are blank.
pub fn watch_frame(
    root: &Path,
    interval: f64,
    prev: Option<(&[Snapshot], f64)>,
    cur: &[Snapshot],
    skip_zero: bool,
) -> String {
    let mut out = format!(
        "pvlock-stat: {} every {interval}s (Ctrl-C quits)\n\n",
        root.display()
    );
    let rate = |old: Option<u64>, new: u64, unit: Option<&str>| match prev {
        Some((_, secs)) if secs > 0.0 => {
            let grew = delta(old.unwrap_or(0), new);
            fmt_rate(grew as f64 / secs, unit)
        }
        _ => String::new(),
    };
    let mut lines = Vec::new();
    for (i, s) in cur.iter().enumerate() {
        if i > 0 {
            lines.push(Line::Text(String::new()));
        }
        let old = prev.and_then(|(p, _)| p.iter().find(|o| o.dir.kind == s.dir.kind));
        lines.push(Line::Cells(vec![
            left(heading(s)),
            right("total"),
            left(""),
            right("/s"),
        ]));
        for c in &s.counters {
            if skip_zero && c.value == 0 {
                continue;
            }
            let unit = unit_of(&c.name);
            let was = old.and_then(|o| o.counter(&c.name));
            lines.push(Line::Cells(vec![
                left(format!(" {}", c.name)),
                right(fmt_count_grouped(c.value)),
                left(unit.unwrap_or("")),
                right(rate(was, c.value, unit)),
            ]));
        }
        for h in &s.histograms {
            let total = h.total();
            if skip_zero && total == 0 {
                continue;
            }
            let was = old.and_then(|o| o.histogram(&h.name)).map(Histogram::total);
            lines.push(Line::Cells(vec![
                left(format!(" {}", h.name)),
                right(fmt_count_grouped(total)),
                left("samples"),
                right(rate(was, total, None)),
                left(quantiles(h)),
            ]));
        }
        if !s.info.is_empty() {
            let info: Vec<String> = s.info.iter().map(|(k, v)| format!("{k}={v}")).collect();
            lines.push(Line::Text(format!("   info: {}", info.join(" "))));
        }
    }
    out.push_str(&align(&lines));
    out
}

/// The counters that `--log` shows, in column order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogColumns(pub Vec<(Kind, String)>);

impl LogColumns {
    /// Every counter of `snaps`, or with `skip_zero` those that are not 0.
    pub fn new(snaps: &[Snapshot], skip_zero: bool) -> Self {
        LogColumns(
            snaps
                .iter()
                .flat_map(|s| {
                    s.counters
                        .iter()
                        .filter(move |c| !skip_zero || c.value != 0)
                        .map(move |c| (s.dir.kind, c.name.clone()))
                })
                .collect(),
        )
    }

    /// The column names: `guest.taken_slow`.
    fn names(&self) -> impl Iterator<Item = String> + '_ {
        self.0.iter().map(|(k, n)| format!("{k}.{n}"))
    }

    /// The values of the columns in `snaps` (0 for a counter not there).
    pub fn values(&self, snaps: &[Snapshot]) -> Vec<u64> {
        self.0
            .iter()
            .map(|(kind, name)| {
                snaps
                    .iter()
                    .find(|s| s.dir.kind == *kind)
                    .and_then(|s| s.counter(name))
                    .unwrap_or(0)
            })
            .collect()
    }

    /// The header line: `time` and the column names.
    pub fn header(&self, csv: bool) -> String {
        let names: Vec<String> = std::iter::once("time".to_owned())
            .chain(self.names())
            .collect();
        if csv {
            names.join(",")
        } else {
            self.plain(&names)
        }
    }

    /// A line: seconds since the start and each column's delta.
    pub fn line(&self, secs: f64, old: &[u64], new: &[u64], csv: bool) -> String {
        let cells: Vec<String> = std::iter::once(format!("{secs:.2}"))
            .chain(old.iter().zip(new).map(|(&o, &n)| delta(o, n).to_string()))
            .collect();
        if csv {
            cells.join(",")
        } else {
            self.plain(&cells)
        }
    }

    /// Cells right-aligned under the column names, vmstat-style.
    fn plain(&self, cells: &[String]) -> String {
        let widths = std::iter::once(8).chain(self.names().map(|n| n.len().max(6)));
        cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:>w$}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A list of pairs serialized as a JSON object, in order.
struct Ordered<'a, T>(Vec<(&'a str, T)>);

impl<T: Serialize> Serialize for Ordered<'_, T> {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let mut map = ser.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[derive(serde::Serialize)]
struct JsonHistogram<'a> {
    unit: &'a str,
    buckets: &'a [u32],
}

#[derive(serde::Serialize)]
struct JsonDir<'a> {
    path: String,
    counters: Ordered<'a, u64>,
    info: Ordered<'a, &'a str>,
    histograms: Ordered<'a, JsonHistogram<'a>>,
}

#[derive(serde::Serialize)]
struct JsonSnapshot<'a> {
    debugfs: String,
    dirs: Ordered<'a, JsonDir<'a>>,
}

/// The `--json` snapshot, on one line:
/// `{"debugfs": ROOT, "dirs": {"guest"|"host": {"path", "counters", "info",
/// "histograms": {NAME: {"unit", "buckets"}}}}}`.
pub fn json(root: &Path, snaps: &[Snapshot]) -> String {
    let dirs = snaps
        .iter()
        .map(|s| {
            let dir = JsonDir {
                path: s.dir.path.to_string_lossy().into_owned(),
                counters: Ordered(
                    s.counters
                        .iter()
                        .map(|c| (c.name.as_str(), c.value))
                        .collect(),
                ),
                info: Ordered(
                    s.info
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect(),
                ),
                histograms: Ordered(
                    s.histograms
                        .iter()
                        .map(|h| {
                            (
                                h.name.as_str(),
                                JsonHistogram {
                                    unit: h.unit(),
                                    buckets: &h.buckets,
                                },
                            )
                        })
                        .collect(),
                ),
            };
            (s.dir.kind.label(), dir)
        })
        .collect();
    let snap = JsonSnapshot {
        debugfs: root.to_string_lossy().into_owned(),
        dirs: Ordered(dirs),
    };
    serde_json::to_string(&snap).expect("a snapshot always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use pvlock_common::debugfs::Dir;
    use pvlock_common::stats::Counter;
    use std::path::PathBuf;

    #[test]
    fn nanoseconds_are_short() {
        assert_eq!(fmt_ns(0), "0ns");
        assert_eq!(fmt_ns(512), "512ns");
        assert_eq!(fmt_ns(1024), "1.0us");
        assert_eq!(fmt_ns(65536), "65.5us");
        assert_eq!(fmt_ns(999_960), "1.0ms");
        assert_eq!(fmt_ns(1_834_712), "1.8ms");
        assert_eq!(fmt_ns(1 << 31), "2.1s");
        assert_eq!(fmt_ns(3_600_000_000_000), "3600.0s");
    }

    #[test]
    fn bucket_labels() {
        assert_eq!(bucket_label(0, "ns"), "[0ns, 2ns)");
        assert_eq!(bucket_label(1, "ns"), "[2ns, 4ns)");
        assert_eq!(bucket_label(9, "ns"), "[512ns, 1.0us)");
        assert_eq!(bucket_label(10, "ns"), "[1.0us, 2.0us)");
        assert_eq!(bucket_label(19, "ns"), "[524.3us, 1.0ms)");
        assert_eq!(bucket_label(29, "ns"), "[536.9ms, 1.1s)");
        assert_eq!(bucket_label(31, "ns"), "[2.1s, inf)");
        assert_eq!(bucket_bounds(31), (1 << 31, None));
        assert_eq!(bucket_bounds(0), (0, Some(2)));
    }

    #[test]
    fn bars_scale_to_the_largest_bucket() {
        assert_eq!(bar(100, 100).chars().count(), BAR_WIDTH);
        assert!(bar(100, 100).chars().all(|c| c == '█'));
        assert_eq!(bar(50, 100), "█".repeat(BAR_WIDTH / 2));
        // A tiny bucket still shows.
        assert_eq!(bar(1, 1_000_000), "▏");
        assert_eq!(bar(0, 100), "");
        // 1/80 of the maximum is half a character: four eighths.
        assert_eq!(bar(10, 800), "▌");
    }

    #[test]
    fn quantiles_find_the_bucket() {
        let mut b = [0u32; HIST_BUCKETS];
        b[3] = 50;
        b[5] = 49;
        b[31] = 1;
        let h = Histogram {
            name: "histo_x".into(),
            buckets: b,
        };
        assert_eq!(quantiles(&h), "p50 < 16ns  p90 < 64ns  p99 < 64ns");
    }

    #[test]
    fn deltas_survive_a_reset() {
        assert_eq!(delta(10, 15), 5);
        assert_eq!(delta(10, 10), 0);
        assert_eq!(delta(1000, 7), 7);
    }

    fn snap(kind: Kind, counters: &[(&str, u64)]) -> Snapshot {
        Snapshot {
            dir: Dir {
                kind,
                path: PathBuf::from(format!("/d/{}", kind.dir_name())),
            },
            counters: counters
                .iter()
                .map(|&(n, v)| Counter {
                    name: n.into(),
                    value: v,
                })
                .collect(),
            info: vec![],
            histograms: vec![],
        }
    }

    #[test]
    fn counters_are_shown_in_the_module_order() {
        let names =
            |s: &Snapshot| -> Vec<String> { s.counters.iter().map(|c| c.name.clone()).collect() };
        let mut all: Vec<(&str, u64)> = Kind::Host.counters().map(|n| (n, 0)).collect();
        all.reverse();
        let shown = in_shown_order(snap(Kind::Host, &all));
        assert_eq!(
            names(&shown)[..4],
            ["kicks", "kicks_woken", "kicks_held", "kicks_bad_target"]
        );
        assert_eq!(names(&shown).len(), Kind::Host.counters().count());
        let some = in_shown_order(snap(
            Kind::Host,
            &[
                ("yields", 0),
                ("zzz_new", 0),
                ("waits_kicked", 0),
                ("kicks", 0),
            ],
        ));
        assert_eq!(names(&some), ["kicks", "waits_kicked", "yields", "zzz_new"]);
    }

    #[test]
    fn log_columns_and_lines() {
        let a = [
            snap(Kind::Guest, &[("kicks", 5), ("bad_unlocks", 0)]),
            snap(Kind::Host, &[("kicks", 7)]),
        ];
        let cols = LogColumns::new(&a, false);
        assert_eq!(
            cols.header(true),
            "time,guest.kicks,guest.bad_unlocks,host.kicks"
        );
        let skip = LogColumns::new(&a, true);
        assert_eq!(skip.header(true), "time,guest.kicks,host.kicks");
        let b = [
            snap(Kind::Guest, &[("kicks", 9), ("bad_unlocks", 0)]),
            snap(Kind::Host, &[("kicks", 2)]),
        ];
        let (old, new) = (cols.values(&a), cols.values(&b));
        assert_eq!(cols.line(1.0, &old, &new, true), "1.00,4,0,2");
        let plain = cols.line(1.0, &old, &new, false);
        assert_eq!(
            plain.split_whitespace().collect::<Vec<_>>(),
            ["1.00", "4", "0", "2"]
        );
        // Plain columns end where their names end.
        let header = cols.header(false);
        assert_eq!(header.len(), plain.len());
        let end = header.find("guest.kicks").unwrap() + "guest.kicks".len();
        assert_eq!(&plain[end - 1..end], "4");
    }

    #[test]
    fn watch_rates_are_per_second() {
        let row = |frame: &str, name: &str| -> Vec<String> {
            let line = frame
                .lines()
                .find(|l| l.split_whitespace().next() == Some(name));
            line.unwrap()
                .split_whitespace()
                .map(str::to_owned)
                .collect()
        };
        let a = [snap(Kind::Guest, &[("kicks", 10), ("time_blocked_ns", 0)])];
        let b = [snap(
            Kind::Guest,
            &[("kicks", 30), ("time_blocked_ns", 3_000_000), ("new", 500)],
        )];
        let first = watch_frame(Path::new("/d"), 2.0, None, &a, false);
        assert_eq!(row(&first, "kicks"), ["kicks", "10"]);
        let second = watch_frame(Path::new("/d"), 2.0, Some((&a, 2.0)), &b, false);
        assert_eq!(row(&second, "kicks"), ["kicks", "30", "10.0"]);
        // 3ms blocked in 2s: 1.5ms per second.
        assert_eq!(
            row(&second, "time_blocked_ns"),
            ["time_blocked_ns", "3,000,000", "ns", "1.5ms"]
        );
        // A counter that appeared counts from 0.
        assert_eq!(row(&second, "new"), ["new", "500", "250"]);
        let skipped = watch_frame(Path::new("/d"), 2.0, None, &a, true);
        assert!(!skipped.contains("time_blocked_ns"));
    }

    #[test]
    fn json_keeps_order_and_shape() {
        let mut g = snap(Kind::Guest, &[("taken_slow", 3), ("kicks", 1)]);
        g.info.push(("lock_ops".into(), "pvlock".into()));
        let h = snap(Kind::Host, &[]);
        let text = json(Path::new("/d"), &[g, h]);
        assert!(!text.contains('\n'));
        assert!(text.starts_with(r#"{"debugfs":"/d","dirs":{"guest":{"path":"/d/pvlock","counters":{"taken_slow":3,"kicks":1},"info":{"lock_ops":"pvlock"},"histograms":{}},"host":"#), "{text}");
        // What the harness and the benchmark read it as.
        let doc: pvlock_common::stats::StatDoc = serde_json::from_str(&text).unwrap();
        assert_eq!(doc.counters(Kind::Guest).unwrap()["taken_slow"], 3);
        assert_eq!(doc.dirs["guest"].info["lock_ops"], "pvlock");
        assert!(doc.counters(Kind::Host).unwrap().is_empty());
    }
}

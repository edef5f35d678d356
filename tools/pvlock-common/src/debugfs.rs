// SPDX-License-Identifier: GPL-2.0
//! The debugfs source of the statistics: finding the modules' directories,
//! reading their files into [`crate::stats`] values, and zeroing them.
//!
//! The kernel modules write three kinds of files, told apart by name:
//! - `info`: `key: value` lines;
//! - `histo_*`: the text format of `debugfs_create_u32_array()`: 32
//!   unsigned 32-bit values separated by single spaces, then a newline;
//! - every other regular file but the write-only `zero_stats` (and hidden
//!   files, which debugfs does not have): one decimal u64 and a newline.
//!
//! Anything else is a [`Error::Malformed`] naming the file and the line.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::abi;
use crate::stats::{abi_name, Counter, Histogram, Kind, HIST_BUCKETS};

/// Where debugfs is normally mounted.
pub const DEFAULT_ROOT: &str = "/sys/kernel/debug";

/// The write-only file that zeroes a directory's statistics.
pub const ZERO_STATS: &str = abi_name(abi::ZERO_STATS);

/// The command that mounts debugfs where `root` is.
fn mount_hint(root: &Path) -> String {
    format!("mount -t debugfs none {}", root.display())
}

/// Everything that can go wrong while finding or reading the statistics.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "debugfs is not mounted at {}: mount it with `{}`",
        root.display(),
        mount_hint(root)
    )]
    NotMounted { root: PathBuf },
    #[error(
        "no pvlock statistics: load guest_pvlock or host_kvm (looked at {} and {})",
        guest.display(),
        host.display()
    )]
    NoStats { guest: PathBuf, host: PathBuf },
    #[error("no {kind} statistics in {}: load {}", root.display(), kind.module())]
    Missing { kind: Kind, root: PathBuf },
    #[error(
        "permission denied: {}: {} needs root (debugfs is readable by root only)",
        path.display(),
        crate::cli::program()
    )]
    Permission { path: PathBuf },
    #[error("{}: line {line}: {msg}", path.display())]
    Malformed {
        path: PathBuf,
        line: usize,
        msg: String,
    },
    #[error("{}: not a directory", path.display())]
    NotADirectory { path: PathBuf },
    #[error("{}: {err}", path.display())]
    Io { path: PathBuf, err: io::Error },
}

impl Error {
    /// An I/O error on `path`; permission problems get their own message.
    pub fn io(path: &Path, source: io::Error) -> Self {
        if source.kind() == io::ErrorKind::PermissionDenied {
            Error::Permission {
                path: path.to_owned(),
            }
        } else {
            Error::Io {
                path: path.to_owned(),
                err: source,
            }
        }
    }
}

/// What is wrong with a file's text, and on which line (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub msg: String,
}

impl ParseError {
    fn new(line: usize, msg: impl Into<String>) -> Self {
        Self {
            line,
            msg: msg.into(),
        }
    }

    fn at(self, path: &Path) -> Error {
        Error::Malformed {
            path: path.to_owned(),
            line: self.line,
            msg: self.msg,
        }
    }
}

impl Kind {
    /// The directory the module creates in the debugfs root.
    pub fn dir_name(self) -> &'static str {
        abi_name(match self {
            Kind::Guest => abi::GUEST_DEBUGFS_DIR,
            Kind::Host => abi::HOST_DEBUGFS_DIR,
        })
    }
}

/// A statistics directory that was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dir {
    pub kind: Kind,
    pub path: PathBuf,
}

impl Dir {
    /// The directory's own name with a slash, for headings: `pvlock/`.
    pub fn display_name(&self) -> String {
        match self.path.file_name() {
            Some(n) => format!("{}/", n.to_string_lossy()),
            None => format!("{}/", self.kind.dir_name()),
        }
    }
}

impl Dir {
    /// The statistics directory of `kind` at `path` itself (not a debugfs
    /// root), with the errors of [`locate`]: debugfs not mounted at
    /// `path`'s parent, the module not loaded, permission denied.
    pub fn open(kind: Kind, path: &Path) -> Result<Dir, Error> {
        match fs::metadata(path) {
            Ok(m) if m.is_dir() => Ok(Dir {
                kind,
                path: path.to_owned(),
            }),
            Ok(_) => Err(Error::NotADirectory {
                path: path.to_owned(),
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let root = path.parent().unwrap_or(path);
                let empty = fs::read_dir(root).is_ok_and(|mut d| d.next().is_none());
                if empty {
                    Err(Error::NotMounted {
                        root: root.to_owned(),
                    })
                } else {
                    Err(Error::Missing {
                        kind,
                        root: root.to_owned(),
                    })
                }
            }
            Err(e) => Err(Error::io(path, e)),
        }
    }

    /// The counter `name`.
    pub fn counter(&self, name: &str) -> Result<u64, Error> {
        read_counter(&self.path.join(name))
    }

    /// The histogram `name`.
    pub fn histogram(&self, name: &str) -> Result<[u32; HIST_BUCKETS], Error> {
        read_histogram(&self.path.join(name))
    }
}

/// The debugfs root and the statistics directories in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub root: PathBuf,
    pub dirs: Vec<Dir>,
}

impl Located {
    /// Keeps only the directories of `kinds` (all when empty); asking for
    /// a kind that is not there is an error.
    pub fn select(mut self, kinds: &[Kind]) -> Result<Self, Error> {
        if kinds.is_empty() {
            return Ok(self);
        }
        for &kind in kinds {
            if !self.dirs.iter().any(|d| d.kind == kind) {
                return Err(Error::Missing {
                    kind,
                    root: self.root.clone(),
                });
            }
        }
        self.dirs.retain(|d| kinds.contains(&d.kind));
        Ok(self)
    }
}

/// The debugfs mount points listed in a `/proc/mounts` text.
pub fn debugfs_mount_points(mounts: &str) -> Vec<PathBuf> {
    mounts
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let _source = fields.next()?;
            let point = fields.next()?;
            let fstype = fields.next()?;
            (fstype == "debugfs").then(|| PathBuf::from(unescape_mount(point)))
        })
        .collect()
}

/// Undoes the octal escapes (`\040` for a space) of `/proc/mounts`.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() {
            let oct = &b[i + 1..i + 4];
            if oct.iter().all(|c| (b'0'..=b'7').contains(c)) {
                let v = oct
                    .iter()
                    .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                if let Ok(v) = u8::try_from(v) {
                    out.push(v);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Chooses the debugfs root when none was given on the command line.
///
/// `mounts` is the text of `/proc/mounts`, or `None` when it cannot be
/// read (no `/proc`): then [`DEFAULT_ROOT`] is used and [`locate`] finds out
/// by itself whether anything is there. Debugfs mounted somewhere else than
/// [`DEFAULT_ROOT`] is used where it is.
pub fn default_root(mounts: Option<&str>) -> Result<PathBuf, Error> {
    let default = PathBuf::from(DEFAULT_ROOT);
    let Some(mounts) = mounts else {
        return Ok(default);
    };
    let points = debugfs_mount_points(mounts);
    if points.contains(&default) {
        Ok(default)
    } else if let Some(first) = points.into_iter().next() {
        Ok(first)
    } else {
        Err(Error::NotMounted { root: default })
    }
}

/// Finds the statistics directories under `root`.
///
/// `root` is either a debugfs root holding `pvlock/` and/or `pvlock_host/`,
/// or one such directory itself (a copied snapshot, say), told apart by its
/// files: the host's has `kicks_woken`, the guest's `info` or `taken_slow`.
pub fn locate(root: &Path) -> Result<Located, Error> {
    let meta = fs::metadata(root).map_err(|e| Error::io(root, e))?;
    if !meta.is_dir() {
        return Err(Error::NotADirectory {
            path: root.to_owned(),
        });
    }
    let direct = if root.join("kicks_woken").is_file() {
        Some(Kind::Host)
    } else if root.join("info").is_file() || root.join("taken_slow").is_file() {
        Some(Kind::Guest)
    } else {
        None
    };
    if let Some(kind) = direct {
        return Ok(Located {
            root: root.to_owned(),
            dirs: vec![Dir {
                kind,
                path: root.to_owned(),
            }],
        });
    }

    let mut entries = fs::read_dir(root).map_err(|e| Error::io(root, e))?;
    if entries.next().is_none() {
        return Err(Error::NotMounted {
            root: root.to_owned(),
        });
    }
    let dirs: Vec<Dir> = [Kind::Guest, Kind::Host]
        .into_iter()
        .map(|kind| Dir {
            kind,
            path: root.join(kind.dir_name()),
        })
        .filter(|d| d.path.is_dir())
        .collect();
    if dirs.is_empty() {
        return Err(Error::NoStats {
            guest: root.join(Kind::Guest.dir_name()),
            host: root.join(Kind::Host.dir_name()),
        });
    }
    Ok(Located {
        root: root.to_owned(),
        dirs,
    })
}

/// Everything read from one directory at one time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub dir: Dir,
    pub counters: Vec<Counter>,
    /// The `info` file's lines, in file order; empty without `info`.
    pub info: Vec<(String, String)>,
    pub histograms: Vec<Histogram>,
}

impl Snapshot {
    /// The value of counter `name`, if read.
    pub fn counter(&self, name: &str) -> Option<u64> {
        self.counters
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.value)
    }

    /// The histogram `name`, if read.
    pub fn histogram(&self, name: &str) -> Option<&Histogram> {
        self.histograms.iter().find(|h| h.name == name)
    }

    /// A copy without zero counters and empty histograms (`--skip-zero`).
    pub fn without_zeros(&self) -> Snapshot {
        Snapshot {
            dir: self.dir.clone(),
            counters: self
                .counters
                .iter()
                .filter(|c| c.value != 0)
                .cloned()
                .collect(),
            info: self.info.clone(),
            histograms: self
                .histograms
                .iter()
                .filter(|h| h.total() != 0)
                .cloned()
                .collect(),
        }
    }
}

/// Reads directory `dir`: its `info` and those counters and histograms
/// whose names `select` accepts.
pub fn read(dir: &Dir, select: &dyn Fn(&str) -> bool) -> Result<Snapshot, Error> {
    let mut names = Vec::new();
    for entry in fs::read_dir(&dir.path).map_err(|e| Error::io(&dir.path, e))? {
        let entry = entry.map_err(|e| Error::io(&dir.path, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        // Debugfs has no hidden files; a copied snapshot may (`.keep`).
        if name == ZERO_STATS || name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        // Follow symbolic links, as a copied snapshot may have them.
        match fs::metadata(&path) {
            Ok(m) if m.is_file() => names.push(name),
            Ok(_) => {}
            Err(e) => return Err(Error::io(&path, e)),
        }
    }

    let mut snap = Snapshot {
        dir: dir.clone(),
        counters: Vec::new(),
        info: Vec::new(),
        histograms: Vec::new(),
    };
    for name in names {
        let path = dir.path.join(&name);
        if name == "info" {
            snap.info = parse_info(&read_text(&path)?).map_err(|e| e.at(&path))?;
        } else if !select(&name) {
            continue;
        } else if name.starts_with("histo_") {
            let buckets = read_histogram(&path)?;
            snap.histograms.push(Histogram { name, buckets });
        } else {
            let value = read_counter(&path)?;
            snap.counters.push(Counter { name, value });
        }
    }
    // The module's order; names it does not declare (a newer module) after
    // these, by name.
    let order = |known: &[&str], name: &str| {
        (
            known.iter().position(|k| *k == name).unwrap_or(known.len()),
            name.to_owned(),
        )
    };
    let counters: Vec<&str> = dir.kind.counters().collect();
    let histograms: Vec<&str> = dir.kind.histograms().collect();
    snap.counters
        .sort_by_cached_key(|c| order(&counters, &c.name));
    snap.histograms
        .sort_by_cached_key(|h| order(&histograms, &h.name));
    Ok(snap)
}

/// Reads a counter file.
pub fn read_counter(path: &Path) -> Result<u64, Error> {
    parse_counter(&read_text(path)?).map_err(|e| e.at(path))
}

/// Reads a histogram file.
pub fn read_histogram(path: &Path) -> Result<[u32; HIST_BUCKETS], Error> {
    parse_histogram(&read_text(path)?).map_err(|e| e.at(path))
}

/// A file's text; bytes that are not UTF-8 are a [`Error::Malformed`].
fn read_text(path: &Path) -> Result<String, Error> {
    let bytes = fs::read(path).map_err(|e| Error::io(path, e))?;
    String::from_utf8(bytes).map_err(|e| {
        let good = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = good.iter().filter(|&&b| b == b'\n').count() + 1;
        ParseError::new(line, "not UTF-8 text").at(path)
    })
}

/// Writes `1\n` to the directory's `zero_stats`; returns the file's path.
pub fn reset(dir: &Dir) -> Result<PathBuf, Error> {
    let path = dir.path.join(ZERO_STATS);
    // No truncation and no creation: the kernel file is write-only and a
    // missing one means this is not a pvlock directory.
    let mut file = fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    file.write_all(b"1\n").map_err(|e| Error::io(&path, e))?;
    Ok(path)
}

/// The lines of `text`; a final newline ends the last line rather than
/// starting an empty one. A missing final newline is accepted.
fn lines(text: &str) -> Vec<&str> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    if text.is_empty() {
        Vec::new()
    } else {
        body.split('\n').collect()
    }
}

/// A decimal number of digits only (no sign, no blanks).
fn parse_decimal<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses a counter file: one unsigned 64-bit decimal integer.
pub fn parse_counter(text: &str) -> Result<u64, ParseError> {
    let lines = lines(text);
    let Some(first) = lines.first() else {
        return Err(ParseError::new(
            1,
            "empty file, expected one unsigned integer",
        ));
    };
    let value = parse_decimal::<u64>(first).ok_or_else(|| {
        if !first.is_empty() && first.bytes().all(|b| b.is_ascii_digit()) {
            ParseError::new(1, format!("{first} does not fit in 64 bits"))
        } else {
            ParseError::new(1, format!("expected one unsigned integer, found {first:?}"))
        }
    })?;
    if let Some(extra) = lines.get(1) {
        return Err(ParseError::new(
            2,
            format!("unexpected {extra:?}: a counter file holds one integer on one line"),
        ));
    }
    Ok(value)
}

/// Parses a histogram file: [`HIST_BUCKETS`] unsigned 32-bit decimal
/// integers separated by single spaces, as `debugfs_create_u32_array()`
/// writes them.
pub fn parse_histogram(text: &str) -> Result<[u32; HIST_BUCKETS], ParseError> {
    let lines = lines(text);
    let Some(first) = lines.first() else {
        return Err(ParseError::new(
            1,
            format!("empty file, expected {HIST_BUCKETS} values separated by spaces"),
        ));
    };
    let mut values = Vec::with_capacity(HIST_BUCKETS);
    for (i, token) in first.split(' ').enumerate() {
        let n = i + 1;
        if token.is_empty() {
            return Err(ParseError::new(
                1,
                format!("value {n} is empty: values are separated by single spaces"),
            ));
        }
        let v = parse_decimal::<u32>(token).ok_or_else(|| {
            ParseError::new(
                1,
                format!("value {n} ({token:?}) is not an unsigned 32-bit integer"),
            )
        })?;
        values.push(v);
    }
    let buckets: [u32; HIST_BUCKETS] = values.as_slice().try_into().map_err(|_| {
        ParseError::new(
            1,
            format!("expected {HIST_BUCKETS} values, found {}", values.len()),
        )
    })?;
    if let Some(extra) = lines.get(1) {
        return Err(ParseError::new(
            2,
            format!("unexpected {extra:?}: a histogram file holds one line"),
        ));
    }
    Ok(buckets)
}

/// Parses an `info` file: `key: value` lines with distinct keys.
pub fn parse_info(text: &str) -> Result<Vec<(String, String)>, ParseError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (i, line) in lines(text).into_iter().enumerate() {
        let n = i + 1;
        let Some((key, value)) = line.split_once(':') else {
            return Err(ParseError::new(
                n,
                format!("expected `key: value`, found {line:?}"),
            ));
        };
        if key.is_empty() || key.contains(char::is_whitespace) {
            return Err(ParseError::new(
                n,
                format!("bad key {key:?}: expected `key: value` with a key without blanks"),
            ));
        }
        if out.iter().any(|(k, _)| k == key) {
            return Err(ParseError::new(n, format!("duplicate key {key:?}")));
        }
        out.push((key.to_owned(), value.trim().to_owned()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_parses_one_integer() {
        assert_eq!(parse_counter("213995\n"), Ok(213995));
        assert_eq!(parse_counter("0\n"), Ok(0));
        assert_eq!(parse_counter("18446744073709551615\n"), Ok(u64::MAX));
        // A snapshot written without the final newline is still fine.
        assert_eq!(parse_counter("41"), Ok(41));
    }

    #[test]
    fn counter_rejects_garbage_with_line() {
        let e = parse_counter("12abc\n").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.msg.contains("\"12abc\""), "{}", e.msg);
        assert_eq!(parse_counter("").unwrap_err().line, 1);
        assert_eq!(parse_counter("\n").unwrap_err().line, 1);
        assert_eq!(parse_counter(" 12\n").unwrap_err().line, 1);
        assert_eq!(parse_counter("-1\n").unwrap_err().line, 1);
        assert_eq!(parse_counter("+1\n").unwrap_err().line, 1);
        let e = parse_counter("18446744073709551616\n").unwrap_err();
        assert!(e.msg.contains("64 bits"), "{}", e.msg);
        let e = parse_counter("1\n2\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(parse_counter("1\n\n").unwrap_err().line, 2);
    }

    fn histo_text(values: &[u64]) -> String {
        let v: Vec<String> = values.iter().map(u64::to_string).collect();
        format!("{}\n", v.join(" "))
    }

    #[test]
    fn histogram_parses_32_values() {
        let mut v = vec![0u64; 32];
        v[9] = 2511189;
        v[31] = u64::from(u32::MAX);
        let b = parse_histogram(&histo_text(&v)).unwrap();
        assert_eq!(b[9], 2511189);
        assert_eq!(b[31], u32::MAX);
        assert_eq!(b.iter().filter(|&&x| x != 0).count(), 2);
    }

    #[test]
    fn histogram_rejects_wrong_shapes() {
        let e = parse_histogram(&histo_text(&[1; 31])).unwrap_err();
        assert_eq!(e, ParseError::new(1, "expected 32 values, found 31"));
        let e = parse_histogram(&histo_text(&[1; 33])).unwrap_err();
        assert_eq!(e.msg, "expected 32 values, found 33");
        let mut t = histo_text(&[1; 32]);
        t.replace_range(2..3, "x");
        let e = parse_histogram(&t).unwrap_err();
        assert_eq!(e.line, 1);
        assert!(e.msg.starts_with("value 2 (\"x\")"), "{}", e.msg);
        let e = parse_histogram(&histo_text(&[4294967296; 32])).unwrap_err();
        assert!(e.msg.contains("32-bit"), "{}", e.msg);
        let e = parse_histogram("1  2\n").unwrap_err();
        assert!(e.msg.contains("single spaces"), "{}", e.msg);
        let e = parse_histogram(&format!("{}0\n", histo_text(&[0; 32]))).unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(parse_histogram("").unwrap_err().line, 1);
    }

    #[test]
    fn parses_files() {
        assert_eq!(parse_counter("42\n").unwrap(), 42);
        assert!(parse_counter("x").is_err());
        let h: Vec<String> = (0..32).map(|i| i.to_string()).collect();
        assert_eq!(
            parse_histogram(&format!("{}\n", h.join(" "))).unwrap()[31],
            31
        );
        assert!(parse_histogram("1 2 3").is_err());
    }

    #[test]
    fn open_says_what_is_missing() {
        let root = std::env::temp_dir().join(format!("pvlock-common-open-{}", std::process::id()));
        let host = root.join("pvlock_host");
        fs::create_dir_all(&host).unwrap();
        fs::write(host.join("kicks_woken"), "23\n").unwrap();
        fs::write(
            host.join("histo_kick_latency"),
            format!("{}\n", ["0"; 32].join(" ")),
        )
        .unwrap();
        let dir = Dir::open(Kind::Host, &host).unwrap();
        assert_eq!(dir.counter("kicks_woken").unwrap(), 23);
        assert_eq!(dir.histogram("histo_kick_latency").unwrap(), [0; 32]);
        let e = dir.counter("kicks").unwrap_err();
        assert!(e.to_string().contains("pvlock_host/kicks"), "{e}");
        let e = Dir::open(Kind::Guest, &root.join("pvlock")).unwrap_err();
        assert!(e.to_string().contains("load guest_pvlock"), "{e}");
        let empty = root.join("empty");
        fs::create_dir_all(&empty).unwrap();
        let e = Dir::open(Kind::Host, &empty.join("pvlock_host")).unwrap_err();
        assert!(matches!(e, Error::NotMounted { .. }), "{e}");
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn info_parses_key_values_in_order() {
        let text = "lock_ops: pvlock\ninstalled: 1\nreason: nopvspin on the kernel command line\nkick: none\n";
        let info = parse_info(text).unwrap();
        assert_eq!(info.len(), 4);
        assert_eq!(info[0], ("lock_ops".into(), "pvlock".into()));
        assert_eq!(info[2].1, "nopvspin on the kernel command line");
        assert_eq!(parse_info("").unwrap(), vec![]);
        assert_eq!(parse_info("a: b: c\n").unwrap()[0].1, "b: c");
    }

    #[test]
    fn info_rejects_bad_lines() {
        let e = parse_info("lock_ops: pvlock\ninstalled: 1\nnonsense\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.msg.contains("nonsense"), "{}", e.msg);
        assert_eq!(parse_info("a: 1\n\nb: 2\n").unwrap_err().line, 2);
        assert_eq!(parse_info("a: 1\na: 2\n").unwrap_err().line, 2);
        assert_eq!(parse_info("two words: 1\n").unwrap_err().line, 1);
        assert_eq!(parse_info(": 1\n").unwrap_err().line, 1);
    }

    #[test]
    fn mount_points_from_proc_mounts() {
        let mounts = "sysfs /sys sysfs rw 0 0\n\
                      debugfs /sys/kernel/debug debugfs rw,relatime 0 0\n\
                      tracefs /sys/kernel/debug/tracing tracefs rw 0 0\n\
                      none /mnt/my\\040debug debugfs rw 0 0\n";
        assert_eq!(
            debugfs_mount_points(mounts),
            vec![
                PathBuf::from("/sys/kernel/debug"),
                PathBuf::from("/mnt/my debug")
            ]
        );
    }

    #[test]
    fn default_root_needs_a_debugfs_mount() {
        let mounted = "debugfs /sys/kernel/debug debugfs rw 0 0\n";
        assert_eq!(
            default_root(Some(mounted)).unwrap(),
            PathBuf::from(DEFAULT_ROOT)
        );
        let elsewhere = "proc /proc proc rw 0 0\nnone /debug debugfs rw 0 0\n";
        assert_eq!(
            default_root(Some(elsewhere)).unwrap(),
            PathBuf::from("/debug")
        );
        let e = default_root(Some("proc /proc proc rw 0 0\n")).unwrap_err();
        assert!(matches!(e, Error::NotMounted { .. }));
        assert!(
            e.to_string()
                .contains("mount -t debugfs none /sys/kernel/debug"),
            "{e}"
        );
        // Without /proc the directory itself is looked at.
        assert_eq!(default_root(None).unwrap(), PathBuf::from(DEFAULT_ROOT));
    }

    #[test]
    fn permission_denied_says_root() {
        let e = Error::io(
            Path::new("/sys/kernel/debug"),
            io::Error::from(io::ErrorKind::PermissionDenied),
        );
        let msg = e.to_string();
        assert!(msg.contains("needs root"), "{msg}");
        assert!(msg.contains("/sys/kernel/debug"), "{msg}");
    }
}

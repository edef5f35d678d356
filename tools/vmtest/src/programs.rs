// SPDX-License-Identifier: GPL-2.0

//! Host programs in the guests' image: a scenario's `programs` (and the
//! benchmark's macro workloads) are this machine's binaries, copied into
//! the initramfs with the shared libraries `ldd` names, the program as
//! `usr/bin/<name>` and each library at its own path.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A program and what it needs in the initramfs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProgramFiles {
    /// The program on this machine.
    pub program: PathBuf,
    /// (host path, path in the image), as `vmtest --extra HOST:IMAGE`.
    pub extra: Vec<(PathBuf, String)>,
}

/// The files `ldd` names (libraries and the dynamic loader).
pub fn ldd_paths(text: &str) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        let path = match l.split_once("=>") {
            Some((_, r)) => r.split_whitespace().next(),
            None => l.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            v.push(PathBuf::from(p));
        }
    }
    v
}

/// `name` found in a directory of `PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// Program `name` (`explicit`, or found on PATH) and its shared
/// libraries, as initramfs extra files, the program as `usr/bin/<name>`;
/// `None` if it is not installed.
pub fn program_files(name: &str, explicit: Option<&Path>) -> Result<Option<ProgramFiles>> {
    let prog = match explicit {
        Some(p) => p.to_path_buf(),
        None => match which(name) {
            Some(p) => p,
            None => return Ok(None),
        },
    };
    let out = Command::new("ldd")
        .arg(&prog)
        .output()
        .with_context(|| format!("cannot run ldd on {}", prog.display()))?;
    let mut extra = vec![(prog.clone(), format!("usr/bin/{name}"))];
    // A static program: ldd says "not a dynamic executable" and fails.
    if out.status.success() {
        for p in ldd_paths(&String::from_utf8_lossy(&out.stdout)) {
            let dest = p.to_string_lossy().trim_start_matches('/').to_string();
            extra.push((p, dest));
        }
    }
    Ok(Some(ProgramFiles {
        program: prog,
        extra,
    }))
}

/// The extra files of every program, each path in the image once.
pub fn extra_files(programs: &[Option<&ProgramFiles>]) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for f in programs.iter().flatten() {
        add_files(&mut out, f.extra.iter().cloned());
    }
    out
}

/// Adds to `out` the (host path, path in the image) pairs of `files` whose
/// path in the image `out` does not have yet: the first to name a path
/// keeps it.
pub fn add_files(
    out: &mut Vec<(PathBuf, String)>,
    files: impl IntoIterator<Item = (PathBuf, String)>,
) {
    for (host, image) in files {
        if !out.iter().any(|(_, d)| *d == image) {
            out.push((host, image));
        }
    }
}

/// The files of a scenario's `programs`, each found on PATH; a program
/// that is not installed is an error that says so.
pub fn scenario_files(names: &[String]) -> Result<Vec<(PathBuf, String)>> {
    let mut found = Vec::new();
    for n in names {
        match program_files(n, None)? {
            Some(f) => found.push(f),
            None => bail!(
                "the scenario needs the program '{n}', which is not on PATH on this machine ('make deps' installs it)"
            ),
        }
    }
    Ok(extra_files(&found.iter().map(Some).collect::<Vec<_>>()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibpthread.so.0 => /lib/x86_64-linux-gnu/libpthread.so.0 (0x00007f)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        assert_eq!(
            ldd_paths(text),
            [
                "/lib/x86_64-linux-gnu/libpthread.so.0",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn extra_files_once_each() {
        let prog = |name: &str, libs: &[&str]| ProgramFiles {
            program: PathBuf::from(format!("/usr/bin/{name}")),
            extra: std::iter::once((
                PathBuf::from(format!("/usr/bin/{name}")),
                format!("usr/bin/{name}"),
            ))
            .chain(
                libs.iter()
                    .map(|l| (PathBuf::from(format!("/lib/{l}")), format!("lib/{l}"))),
            )
            .collect(),
        };
        let hb = prog("hackbench", &["libc.so.6"]);
        let sn = prog("stress-ng", &["libm.so.6", "libc.so.6"]);
        let images: Vec<String> = extra_files(&[Some(&hb), None, Some(&sn)])
            .into_iter()
            .map(|(_, d)| d)
            .collect();
        assert_eq!(
            images,
            [
                "usr/bin/hackbench",
                "lib/libc.so.6",
                "usr/bin/stress-ng",
                "lib/libm.so.6"
            ]
        );
    }

    #[test]
    fn first_file_for_an_image_path_keeps_it() {
        let pair = |h: &str, i: &str| (PathBuf::from(h), i.to_string());
        let mut out = vec![pair("/opt/stress-ng", "usr/bin/stress-ng")];
        add_files(
            &mut out,
            [
                pair("/usr/bin/stress-ng", "usr/bin/stress-ng"),
                pair("/lib/libc.so.6", "lib/libc.so.6"),
            ],
        );
        assert_eq!(
            out,
            [
                pair("/opt/stress-ng", "usr/bin/stress-ng"),
                pair("/lib/libc.so.6", "lib/libc.so.6")
            ]
        );
    }

    #[test]
    fn scenario_programs_found_or_refused() {
        // `sh` is on PATH wherever the harness runs (the guests' plans are
        // shell); a name no machine has is refused with the name in it.
        let files = scenario_files(&["sh".to_string()]).unwrap();
        assert_eq!(files[0].1, "usr/bin/sh");
        let e = scenario_files(&["pvlock-no-such-program".to_string()]).unwrap_err();
        assert!(format!("{e:#}").contains("'pvlock-no-such-program'"));
        assert!(scenario_files(&[]).unwrap().is_empty());
    }
}

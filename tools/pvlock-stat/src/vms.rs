// SPDX-License-Identifier: GPL-2.0
//! `--vms`: the pvlock statistics KVM keeps per VM.
//!
//! KVM counts lock waits and kicks per vCPU in its binary statistics
//! (`KVM_GET_STATS_FD`; the `pvlock_*` descriptors). Its debugfs directory
//! has one directory per VM, `kvm/PID-FD/`, with a file per statistic that
//! sums it over the VM's vCPUs; this is what `kvm_stat` reads too. Here: one
//! row per VM, named by the pid and command of its VMM.

use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use pvlock_common::stats::{KVM_VCPU_COUNTERS, KVM_VM_ADVICE};

/// The per-VM statistics shown, in order (KVM's names): the lock waits and
/// kicks, then the host's advice and the load behind it.
pub fn columns() -> impl Iterator<Item = &'static str> {
    KVM_VCPU_COUNTERS.into_iter().chain(KVM_VM_ADVICE)
}

/// One VM's counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Vm {
    /// KVM's name for it: `PID-FD`.
    pub vm: String,
    pub pid: u32,
    /// The VMM's command (`/proc/PID/comm`), if readable.
    pub comm: String,
    /// Per statistic of [`columns`], in order; `None` if KVM has no such
    /// file (a kernel without the pvlock statistics, or without the
    /// advice's).
    pub counters: Vec<(String, Option<u64>)>,
}

/// Every VM under `root/kvm`, by pid and fd.
pub fn read(root: &Path, proc_root: &Path) -> Result<Vec<Vm>> {
    let dir = root.join("kvm");
    let entries = fs::read_dir(&dir)
        .with_context(|| format!("cannot read {} (KVM loaded?)", dir.display()))?;
    let mut vms = Vec::new();
    for e in entries {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((pid, fd)) = name.split_once('-') else {
            continue;
        };
        let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), fd.parse::<u32>()) else {
            continue;
        };
        let counters = columns()
            .map(|c| {
                let v = fs::read_to_string(e.path().join(c))
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
                (c.to_string(), v)
            })
            .collect();
        let comm = fs::read_to_string(proc_root.join(pid.to_string()).join("comm"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        vms.push(Vm {
            vm: name,
            pid,
            comm,
            counters,
        });
    }
    vms.sort_by(|a, b| (a.pid, &a.vm).cmp(&(b.pid, &b.vm)));
    if vms.iter().any(|v| {
        v.counters
            .iter()
            .take(KVM_VCPU_COUNTERS.len())
            .all(|(_, c)| c.is_none())
    }) {
        bail!(
            "KVM in this kernel keeps no pvlock statistics ({} has no pvlock_waits)",
            dir.display()
        );
    }
    Ok(vms)
}

/// The table: a row per VM, a column per counter (without the `pvlock_`
/// prefix).
pub fn table(vms: &[Vm]) -> String {
    if vms.is_empty() {
        return "no VM is running\n".into();
    }
    let mut head = vec!["VM".to_string(), "COMMAND".to_string()];
    head.extend(columns().map(|c| c.trim_start_matches("pvlock_").to_string()));
    let rows: Vec<Vec<String>> = vms
        .iter()
        .map(|v| {
            let mut r = vec![v.vm.clone(), v.comm.clone()];
            r.extend(
                v.counters
                    .iter()
                    .map(|(_, c)| c.map_or("-".into(), |n| n.to_string())),
            );
            r
        })
        .collect();
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([head[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |r: &[String]| {
        r.iter()
            .enumerate()
            .map(|(i, c)| {
                if i < 2 {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = line(&head) + "\n";
    for r in &rows {
        out += &line(r);
        out.push('\n');
    }
    out
}

/// `--vms --json`: `{"vms": [{"vm", "pid", "comm", "counters": {NAME: N}}]}`.
pub fn json(vms: &[Vm]) -> String {
    let v: Vec<serde_json::Value> = vms
        .iter()
        .map(|v| {
            let counters: serde_json::Map<String, serde_json::Value> = v
                .counters
                .iter()
                .map(|(k, c)| (k.clone(), c.map_or(serde_json::Value::Null, Into::into)))
                .collect();
            serde_json::json!({ "vm": v.vm, "pid": v.pid, "comm": v.comm, "counters": counters })
        })
        .collect();
    serde_json::json!({ "vms": v }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (vm, base) in [("120-11", 1u64), ("98-12", 100)] {
            let p = d.path().join("debugfs/kvm").join(vm);
            fs::create_dir_all(&p).unwrap();
            for (i, c) in columns().enumerate() {
                fs::write(p.join(c), format!("{}\n", base + i as u64)).unwrap();
            }
            fs::write(p.join("halt_exits"), "5\n").unwrap();
        }
        fs::create_dir_all(d.path().join("debugfs/kvm/not-a-vm")).unwrap();
        fs::create_dir_all(d.path().join("proc/98")).unwrap();
        fs::write(d.path().join("proc/98/comm"), "qemu-system-x86\n").unwrap();
        d
    }

    #[test]
    fn one_row_per_vm_in_pid_order() {
        let d = fixture();
        let vms = read(&d.path().join("debugfs"), &d.path().join("proc")).unwrap();
        assert_eq!(vms.len(), 2);
        assert_eq!((vms[0].pid, vms[0].comm.as_str()), (98, "qemu-system-x86"));
        assert_eq!(vms[0].counters[0], ("pvlock_waits".into(), Some(100)));
        assert_eq!(vms[1].counters[5], ("pvlock_kicks_failed".into(), Some(6)));
        assert_eq!(vms[1].counters[6], ("pvlock_waits_bound".into(), Some(7)));
        assert_eq!(
            vms[1].counters[7],
            ("pvlock_advice_dedicated".into(), Some(8))
        );
        let t = table(&vms);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("VM "), "{t}");
        assert!(lines[0].contains("kicks_woken"), "{t}");
        assert!(lines[1].starts_with("98-12   qemu-system-x86"), "{t}");
        assert!(lines[0].ends_with("load_preempted"), "{t}");
        assert!(lines[0].contains("waits_bound"), "{t}");
        assert!(lines[2].ends_with(" 12"), "{t}");
        let j: serde_json::Value = serde_json::from_str(&json(&vms)).unwrap();
        assert_eq!(j["vms"][1]["counters"]["pvlock_waits_kicked"], 3);
    }

    #[test]
    fn a_kernel_without_the_statistics_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir_all(d.path().join("debugfs/kvm/7-3")).unwrap();
        let e = read(&d.path().join("debugfs"), Path::new("/nonexistent")).unwrap_err();
        assert!(e.to_string().contains("no pvlock statistics"), "{e}");
        assert!(read(&d.path().join("nothing"), Path::new("/")).is_err());
    }
}

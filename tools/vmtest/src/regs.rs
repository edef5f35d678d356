// SPDX-License-Identifier: GPL-2.0

//! Register samples of a silent kernel (`pvlock-qmp regs`, through the
//! QMP socket of its QEMU): where each vCPU is, whether it is halted, and
//! the text addresses at the top of its stack. They need nothing of the
//! guest, so they answer what an NMI cannot when every CPU of the kernel
//! has interrupts off: is a vCPU in the project's code (a hang of the
//! project's), or is every vCPU halted with interrupts enabled, waiting for
//! interrupts that the level below does not deliver (the platform's)?
//!
//! Addresses are named with the kernel's `System.map` (one kernel image
//! serves L1 and L2, without KASLR) and the module map each kernel prints
//! when it loads a module (`modmap` lines: name, size, address).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The modules that are the project's, by level.
const PROJECT_MODULES: [&str; 2] = ["guest_pvlock", "host_kvm"];

/// The start of the module area of x86-64 (kernel text ends before it).
const MODULES_START: u64 = 0xffff_ffff_a000_0000;

/// RFLAGS.IF.
const RFLAGS_IF: u64 = 1 << 9;

/// A kernel's text symbols, by address (`System.map`).
#[derive(Debug, Default)]
pub struct Symbols {
    syms: Vec<(u64, String)>,
    /// `_etext`: no text beyond it.
    end: Option<u64>,
}

impl Symbols {
    /// The text symbols of a `System.map`.
    pub fn parse(map: &str) -> Symbols {
        let mut syms: Vec<(u64, String)> = map
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let addr = u64::from_str_radix(w.next()?, 16).ok()?;
                let kind = w.next()?;
                let name = w.next()?;
                matches!(kind, "t" | "T" | "W" | "w").then(|| (addr, name.to_string()))
            })
            .collect();
        syms.sort();
        let end = syms.iter().find(|(_, n)| n == "_etext").map(|(a, _)| *a);
        Symbols { syms, end }
    }

    /// `<kdir>/System.map`, if it is there.
    pub fn load(kdir: &Path) -> Option<Symbols> {
        let s = std::fs::read_to_string(kdir.join("System.map")).ok()?;
        let syms = Symbols::parse(&s);
        (!syms.syms.is_empty()).then_some(syms)
    }

    /// The symbol at or before `addr` and the offset into it, for an
    /// address in kernel text.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        if addr >= MODULES_START || self.end.is_some_and(|e| addr >= e) {
            return None;
        }
        let i = self.syms.partition_point(|(a, _)| *a <= addr);
        let (a, name) = self.syms.get(i.checked_sub(1)?)?;
        Some((name, addr - a))
    }
}

/// A loaded module, from a kernel's `modmap` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    pub name: String,
    pub base: u64,
    pub size: u64,
}

/// The modules of a `modmap` line: `NAME SIZE 0xADDRESS` separated by `;`.
pub fn parse_modmap(data: &str) -> Vec<Module> {
    data.split(';')
        .filter_map(|m| {
            let mut w = m.split_whitespace();
            let name = w.next()?.to_string();
            let size = w.next()?.parse().ok()?;
            let base = u64::from_str_radix(w.next()?.trim_start_matches("0x"), 16).ok()?;
            Some(Module { name, base, size })
        })
        .collect()
}

/// Whose code an address is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Owner {
    /// The project's: a project module, or a pvlock symbol of the kernel
    /// (the kernel crate's `kernel::pvlock`, its C helpers, KVM's pvlock
    /// hooks, the x86 lock-op switching). An address in the module area
    /// that no known module covers counts as the project's too: the map
    /// may be older than the module.
    Project(String),
    /// Anyone else's, named.
    Other(String),
    /// Not known (no symbols).
    Unknown,
}

impl Owner {
    /// The name of `addr`, which this owns: the function or module and
    /// offset, or the address itself when nothing names it.
    fn name(self, addr: u64) -> String {
        match self {
            Owner::Project(s) | Owner::Other(s) => s,
            Owner::Unknown => format!("{addr:#x}"),
        }
    }
}

fn is_project_symbol(name: &str) -> bool {
    name.contains("pvlock") || name.starts_with("pv_lock_")
}

fn owner(addr: u64, modules: &[Module], syms: Option<&Symbols>) -> Owner {
    if addr >= MODULES_START {
        return match modules
            .iter()
            .rev()
            .find(|m| addr >= m.base && addr < m.base.saturating_add(m.size))
        {
            Some(m) if PROJECT_MODULES.contains(&m.name.as_str()) => {
                Owner::Project(format!("{}+{:#x}", m.name, addr - m.base))
            }
            Some(m) => Owner::Other(format!("{}+{:#x}", m.name, addr - m.base)),
            None => Owner::Project(format!("{addr:#x} (module area, no module known there)")),
        };
    }
    match syms.and_then(|s| s.lookup(addr)) {
        Some((name, off)) if is_project_symbol(name) => Owner::Project(format!("{name}+{off:#x}")),
        Some((name, off)) => Owner::Other(format!("{name}+{off:#x}")),
        None => Owner::Unknown,
    }
}

/// One vCPU in one sample.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct VcpuRegs {
    pub sample: u32,
    pub cpu: u32,
    pub rip: u64,
    pub rflags: u64,
    /// QEMU's halted state (KVM's, for an L2).
    pub halted: bool,
    pub cpl: u32,
    /// Text addresses at the top of its kernel stack.
    pub stack: Vec<u64>,
    /// Where RIP is, named (`?` when not known).
    pub at: String,
    /// The first project address of RIP and the stack, named: the vCPU
    /// was in the project's code.
    pub project: Option<String>,
    /// Every address was named (symbols were there).
    pub resolved: bool,
    /// Interrupt and exception frames on its stack, innermost first.
    pub iframes: Vec<IFrame>,
}

/// An interrupt or exception frame on a vCPU's stack (`iframes=` of
/// `pvlock-qmp regs`): which entry code took it, and the interrupted code's
/// RIP and RFLAGS as the CPU saved them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct IFrame {
    /// The entry code's return address, named (`asm_sysvec_...+0x1a`).
    pub entry: String,
    /// The interrupted RIP, named.
    pub at: String,
    pub rflags: u64,
}

impl IFrame {
    /// Taken through the entry of a maskable (external) interrupt, which
    /// the CPU delivers only with RFLAGS.IF set; exceptions and NMIs come
    /// whatever the flag.
    pub fn maskable(&self) -> bool {
        [
            "asm_sysvec_",
            "asm_common_interrupt+",
            "asm_spurious_interrupt+",
        ]
        .iter()
        .any(|k| self.entry.starts_with(k))
    }

    /// A maskable interrupt that came with interrupts disabled.
    pub fn masked(&self) -> bool {
        self.maskable() && self.rflags & RFLAGS_IF == 0
    }
}

impl VcpuRegs {
    /// A `regs` line (`sample=S cpu=N rip=HEX rfl=HEX hlt=0|1 cpl=N
    /// stack=HEX,...`), its addresses named with `modules` and `syms`.
    pub fn parse(data: &str, modules: &[Module], syms: Option<&Symbols>) -> Option<VcpuRegs> {
        let kv: BTreeMap<&str, &str> = data
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .collect();
        let hex = |k: &str| kv.get(k).and_then(|v| u64::from_str_radix(v, 16).ok());
        let num = |k: &str| kv.get(k).and_then(|v| v.parse::<u32>().ok());
        let stack: Vec<u64> = kv
            .get("stack")
            .map(|s| {
                s.split(',')
                    .filter_map(|w| u64::from_str_radix(w, 16).ok())
                    .collect()
            })
            .unwrap_or_default();
        let mut r = VcpuRegs {
            sample: num("sample")?,
            cpu: num("cpu")?,
            rip: hex("rip")?,
            rflags: hex("rfl")?,
            halted: kv.get("hlt") == Some(&"1"),
            cpl: num("cpl").unwrap_or(0),
            stack,
            resolved: true,
            ..Default::default()
        };
        if r.cpl != 0 {
            r.at = "user space".into();
            return Some(r);
        }
        let name = |a: u64| owner(a, modules, syms).name(a);
        r.iframes = kv
            .get("iframes")
            .map(|f| {
                f.split(',')
                    .filter_map(|fr| {
                        let mut it = fr.split(':').map(|x| u64::from_str_radix(x, 16).ok());
                        let (ret, ip, fl) = (it.next()??, it.next()??, it.next()??);
                        Some(IFrame {
                            entry: name(ret),
                            at: if ip >> 47 == 0 {
                                "user space".into()
                            } else {
                                name(ip)
                            },
                            rflags: fl,
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        for (i, addr) in std::iter::once(r.rip).chain(r.stack.clone()).enumerate() {
            let o = owner(addr, modules, syms);
            if i == 0 {
                r.at = o.clone().name(addr);
            }
            match o {
                Owner::Project(s) if r.project.is_none() => {
                    r.project = Some(if i == 0 {
                        s
                    } else {
                        format!("{s} on its stack")
                    })
                }
                Owner::Unknown => r.resolved = false,
                _ => {}
            }
        }
        Some(r)
    }

    /// Interrupts enabled.
    pub fn irqs_on(&self) -> bool {
        self.rflags & RFLAGS_IF != 0
    }

    /// In words: `vCPU 2 at default_idle+0x12 (halted, IF=1)`.
    pub fn describe(&self) -> String {
        format!(
            "vCPU {} at {}{} ({}IF={})",
            self.cpu,
            self.at,
            match &self.project {
                Some(p) if !p.starts_with(&self.at) => format!(", {p}"),
                _ => String::new(),
            },
            if self.halted { "halted, " } else { "" },
            u8::from(self.irqs_on())
        )
    }
}

/// What a kernel's register samples say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A vCPU was in the project's code: its description.
    InProject(String),
    /// Every vCPU of `0..cpus` was halted with interrupts enabled, outside
    /// the project's code, in every sample: the kernel waited for
    /// interrupts that did not come.
    HaltedNoInterrupts,
    /// Neither (or no samples).
    Unclear,
}

/// KVM's world switch: code that only a kernel running guests executes.
const HOST_WORLD_SWITCH: [&str; 5] = [
    "__svm_vcpu_run+",
    "svm_vcpu_run+",
    "__vmx_vcpu_run+",
    "vmx_vcpu_enter_exit+",
    "vmx_vmexit+",
];

/// Whether function-and-offset `f` (`svm_vcpu_run+0x37b/0x700`) is in
/// KVM's world switch: where a CPU that an NMI found in guest mode resumes.
pub fn in_world_switch(f: &str) -> bool {
    HOST_WORLD_SWITCH.iter().any(|k| f.starts_with(k))
}

/// In the samples of a guest (an L2, which runs no guests of its own), a
/// vCPU whose RIP is in KVM's world switch in every sample taken of it:
/// the register state the level below keeps for the guest's vCPU is its
/// own (L1 and L2 boot the same image at the same addresses), so that vCPU
/// does not run the guest's code, and whatever waits for it (a lock its
/// code holds, an IPI) waits for ever. Its description.
pub fn host_state_in_guest(samples: &[VcpuRegs]) -> Option<String> {
    in_every_sample(samples, |r| r.cpl == 0 && in_world_switch(&r.at)).map(VcpuRegs::describe)
}

/// The first sample of a vCPU for which `holds`, when it holds in every
/// sample taken of that vCPU (one that held in one sample only moved on).
fn in_every_sample(samples: &[VcpuRegs], holds: impl Fn(&VcpuRegs) -> bool) -> Option<&VcpuRegs> {
    samples
        .iter()
        .find(|r| holds(r) && samples.iter().filter(|o| o.cpu == r.cpu).all(&holds))
}

/// A vCPU whose stack holds, in every sample taken of it, the frame of a
/// maskable interrupt that the CPU delivered with interrupts disabled (IF
/// clear in the RFLAGS it saved): whatever the interrupted code held with
/// interrupts off (a lock that the handler takes, say) it holds while the
/// handler waits for it, for ever. Software cannot make the CPU do that;
/// the emulated CPU did. Its description.
pub fn masked_interrupt(samples: &[VcpuRegs]) -> Option<String> {
    fn frame(r: &VcpuRegs) -> Option<&IFrame> {
        r.iframes.iter().find(|f| f.masked())
    }
    let r = in_every_sample(samples, |r| frame(r).is_some())?;
    let f = frame(r)?;
    Some(format!(
        "{}: a maskable interrupt entered at {} from {} with IF=0",
        r.describe(),
        f.entry,
        f.at
    ))
}

/// The verdict of `samples` of a kernel with `cpus` CPUs online.
pub fn verdict(samples: &[VcpuRegs], cpus: u32) -> Verdict {
    if let Some(r) = samples.iter().find(|r| r.project.is_some()) {
        return Verdict::InProject(r.describe());
    }
    let online: Vec<&VcpuRegs> = samples.iter().filter(|r| r.cpu < cpus).collect();
    let seen: std::collections::BTreeSet<u32> = online.iter().map(|r| r.cpu).collect();
    if seen.len() as u32 == cpus
        && online
            .iter()
            .all(|r| r.resolved && r.halted && r.irqs_on() && r.cpl == 0)
    {
        return Verdict::HaltedNoInterrupts;
    }
    Verdict::Unclear
}

/// The samples in words, one vCPU each (the last sample).
pub fn describe(samples: &[VcpuRegs]) -> String {
    let last = samples.iter().map(|r| r.sample).max().unwrap_or(0);
    samples
        .iter()
        .filter(|r| r.sample == last)
        .map(VcpuRegs::describe)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = "\
ffffffff81000000 T _text
ffffffff81480b00 t default_idle
ffffffff81480c00 T pv_native_safe_halt
ffffffff81490000 T rust_helper_pvlock_kvm_wait
ffffffff81490100 T rust_helper_pvlock_safe_halt
ffffffff814a0000 T _RNvNtNtCs1_6kernel6pvlock8lockops6bridge
ffffffff814b0000 T do_idle
ffffffff81f00000 T _etext
ffffffff82000000 D some_data
";

    fn syms() -> Symbols {
        Symbols::parse(MAP)
    }

    fn mods() -> Vec<Module> {
        parse_modmap("guest_pvlock 45056 0xffffffffa0000000;locktorture 20480 0xffffffffa0010000")
    }

    fn regs(line: &str) -> VcpuRegs {
        VcpuRegs::parse(line, &mods(), Some(&syms())).unwrap()
    }

    #[test]
    fn names_addresses() {
        let s = syms();
        assert_eq!(s.lookup(0xffffffff81480b26), Some(("default_idle", 0x26)));
        assert_eq!(s.lookup(0xffffffff80000000), None);
        // Nothing past the end of text is named.
        assert_eq!(s.lookup(0xffffffff82000010), None);
        assert_eq!(
            mods(),
            [
                Module {
                    name: "guest_pvlock".into(),
                    base: 0xffffffffa0000000,
                    size: 45056
                },
                Module {
                    name: "locktorture".into(),
                    base: 0xffffffffa0010000,
                    size: 20480
                }
            ]
        );
    }

    #[test]
    fn a_vcpu_in_a_lock_wait_is_in_the_project() {
        let r = regs("sample=1 cpu=2 rip=ffffffff8149001c rfl=00000046 hlt=0 cpl=0 stack=");
        assert_eq!(
            r.project.as_deref(),
            Some("rust_helper_pvlock_kvm_wait+0x1c")
        );
        assert!(!r.irqs_on());
        let r = regs("sample=1 cpu=1 rip=ffffffffa0000123 rfl=00000046 hlt=0 cpl=0 stack=");
        assert_eq!(r.project.as_deref(), Some("guest_pvlock+0x123"));
        // Halted in HLT, called from the project's wait: its return
        // address is on the stack.
        let r = regs(
            "sample=1 cpu=3 rip=ffffffff81480c05 rfl=00000246 hlt=1 cpl=0 stack=ffffffff81490110,ffffffffa0000200",
        );
        assert_eq!(
            r.project.as_deref(),
            Some("rust_helper_pvlock_safe_halt+0x10 on its stack")
        );
        assert_eq!(
            r.describe(),
            "vCPU 3 at pv_native_safe_halt+0x5, rust_helper_pvlock_safe_halt+0x10 on its stack (halted, IF=1)"
        );
        // The kernel crate's abstractions are the project's too.
        let r = regs("sample=1 cpu=0 rip=ffffffff814a0010 rfl=00000046 hlt=0 cpl=0 stack=");
        assert!(r.project.is_some());
        // Module code nobody knows of is counted as the project's.
        let r = regs("sample=1 cpu=0 rip=ffffffffa0100000 rfl=00000046 hlt=0 cpl=0 stack=");
        assert!(r.project.unwrap().contains("no module known"));
    }

    #[test]
    fn other_code_is_not_the_project() {
        let r = regs(
            "sample=1 cpu=0 rip=ffffffff81480b26 rfl=00000246 hlt=1 cpl=0 stack=ffffffff814b0040,ffffffffa0010010",
        );
        assert_eq!(r.project, None);
        assert_eq!(r.at, "default_idle+0x26");
        assert!(r.resolved && r.irqs_on() && r.halted);
        let u = regs("sample=1 cpu=0 rip=000055ca3bfdf529 rfl=00000246 hlt=0 cpl=3 stack=");
        assert_eq!((u.at.as_str(), u.project.clone()), ("user space", None));
        // Without symbols nothing in kernel text can be named.
        let r = VcpuRegs::parse(
            "sample=1 cpu=0 rip=ffffffff81480b26 rfl=00000246 hlt=1 cpl=0 stack=",
            &[],
            None,
        )
        .unwrap();
        assert!(!r.resolved && r.project.is_none());
        assert!(VcpuRegs::parse("sample=1 cpu=x", &[], None).is_none());
    }

    #[test]
    fn a_guest_vcpu_in_the_hosts_world_switch_is_not_its_own() {
        // pvlock-faults, CI on 2026-12-02: a silent L2 whose vCPU 0 sat at
        // L1's __svm_vcpu_run+0x9c in both samples while its other vCPUs
        // waited for a lock, one in a lock wait.
        let m = "ffffffff81000000 T _stext
ffffffff8147eaa0 T __svm_vcpu_run
ffffffff8147ec00 T __svm_sev_es_vcpu_run
ffffffff812e3fa0 T rust_helper_pvlock_kvm_wait
ffffffff812e4000 T other
";
        let syms = Symbols::parse(m);
        let r = |l: &str| VcpuRegs::parse(l, &[], Some(&syms)).unwrap();
        let lines = [
            "sample=1 cpu=0 rip=ffffffff8147eb3c rfl=00010246 hlt=0 cpl=0 stack=",
            "sample=1 cpu=1 rip=ffffffff812e3fbd rfl=00000046 hlt=0 cpl=0 stack=",
            "sample=2 cpu=0 rip=ffffffff8147eb3c rfl=00010246 hlt=0 cpl=0 stack=",
            "sample=2 cpu=1 rip=ffffffff812e3fbd rfl=00000046 hlt=0 cpl=0 stack=",
        ];
        let samples: Vec<VcpuRegs> = lines.iter().map(|l| r(l)).collect();
        assert_eq!(
            host_state_in_guest(&samples).as_deref(),
            Some("vCPU 0 at __svm_vcpu_run+0x9c (IF=1)")
        );
        // A vCPU that was there in one sample only moved on: no evidence.
        let mut moved = samples.clone();
        moved[2] = r("sample=2 cpu=0 rip=ffffffff812e4010 rfl=00000246 hlt=0 cpl=0 stack=");
        assert_eq!(host_state_in_guest(&moved), None);
        assert_eq!(host_state_in_guest(&samples[1..2]), None);
    }

    #[test]
    fn a_masked_interrupt_on_a_stack_is_the_platforms() {
        // The stall of a pvlock-kickcpu guest under stress-ng
        // (2026-12-04): vCPU 1 halted, as the queue head, in
        // hrtimer_interrupt's wait for its base lock; the frame of that
        // timer interrupt, below it, saved the interrupted code's flags.
        let m = "ffffffff81000000 T _stext
ffffffff81001330 T asm_sysvec_apic_timer_interrupt
ffffffff81001400 T asm_exc_page_fault
ffffffff810e20c0 T native_halt
ffffffff81178f00 T __hrtimer_run_queues
ffffffff812e3f40 T rust_helper_pvlock_halt
ffffffff812e4000 T other
";
        let syms = Symbols::parse(m);
        let r = |l: &str| VcpuRegs::parse(l, &mods(), Some(&syms)).unwrap();
        let line = |sample, fl| {
            format!("sample={sample} cpu=1 rip=ffffffff810e20d5 rfl=00000046 hlt=1 cpl=0 stack=ffffffff812e3f49 iframes=ffffffff8100134a:ffffffff81178fcf:{fl}")
        };
        let masked = [r(&line(1, "46")), r(&line(2, "46"))];
        assert_eq!(masked[0].iframes.len(), 1);
        assert_eq!(
            masked[0].iframes[0],
            IFrame {
                entry: "asm_sysvec_apic_timer_interrupt+0x1a".into(),
                at: "__hrtimer_run_queues+0xcf".into(),
                rflags: 0x46
            }
        );
        assert_eq!(
            masked_interrupt(&masked).as_deref(),
            Some("vCPU 1 at native_halt+0x15, rust_helper_pvlock_halt+0x9 on its stack (halted, IF=0): a maskable interrupt entered at asm_sysvec_apic_timer_interrupt+0x1a from __hrtimer_run_queues+0xcf with IF=0")
        );
        // Interrupts on when it came: an ordinary interrupt.
        assert_eq!(
            masked_interrupt(&[r(&line(1, "246")), r(&line(2, "246"))]),
            None
        );
        // In one sample only: the vCPU moved on, no evidence.
        assert_eq!(
            masked_interrupt(&[r(&line(1, "46")), r(&line(2, "246"))]),
            None
        );
        // An exception comes whatever IF says.
        let exc = r("sample=1 cpu=0 rip=ffffffff810e20d5 rfl=00000046 hlt=0 cpl=0 stack= iframes=ffffffff81001420:ffffffff81178fcf:46");
        assert!(!exc.iframes[0].maskable());
        assert_eq!(masked_interrupt(&[exc]), None);
        // From user space, and frames that do not parse.
        let u = r("sample=1 cpu=0 rip=ffffffff810e20d5 rfl=00000046 hlt=0 cpl=0 stack= iframes=ffffffff8100134a:55ca3bfdf529:246,zz:1");
        assert_eq!(u.iframes.len(), 1);
        assert_eq!(u.iframes[0].at, "user space");
    }

    #[test]
    fn verdicts() {
        let idle = |cpu, sample| {
            regs(&format!(
                "sample={sample} cpu={cpu} rip=ffffffff81480b26 rfl=00000246 hlt=1 cpl=0 stack=ffffffff814b0040"
            ))
        };
        let all_idle: Vec<_> = (0..4).flat_map(|c| [idle(c, 1), idle(c, 2)]).collect();
        assert_eq!(verdict(&all_idle, 4), Verdict::HaltedNoInterrupts);
        // A vCPU not sampled, or one spinning, leaves it open.
        assert_eq!(verdict(&all_idle[..6], 4), Verdict::Unclear);
        let mut spinning = all_idle.clone();
        spinning[7] = regs("sample=2 cpu=3 rip=ffffffff81480b26 rfl=00000046 hlt=0 cpl=0 stack=");
        assert_eq!(verdict(&spinning, 4), Verdict::Unclear);
        // Halted with interrupts off: no interrupt would end it anyway.
        let mut irqs_off = all_idle.clone();
        irqs_off[0].rflags = 0x46;
        assert_eq!(verdict(&irqs_off, 4), Verdict::Unclear);
        // Offline CPUs beyond the online count do not count.
        let mut offline = all_idle.clone();
        offline.push(regs(
            "sample=1 cpu=4 rip=ffffffff81480b26 rfl=00000046 hlt=1 cpl=0 stack=",
        ));
        assert_eq!(verdict(&offline, 4), Verdict::HaltedNoInterrupts);
        // One vCPU in a lock wait decides.
        let mut waiting = all_idle.clone();
        waiting[3] = regs("sample=2 cpu=1 rip=ffffffff8149001c rfl=00000046 hlt=0 cpl=0 stack=");
        assert_eq!(
            verdict(&waiting, 4),
            Verdict::InProject("vCPU 1 at rust_helper_pvlock_kvm_wait+0x1c (IF=0)".into())
        );
        // Without symbols, no platform verdict.
        let unnamed: Vec<_> = all_idle
            .iter()
            .map(|r| VcpuRegs {
                resolved: false,
                ..r.clone()
            })
            .collect();
        assert_eq!(verdict(&unnamed, 4), Verdict::Unclear);
        assert_eq!(verdict(&[], 1), Verdict::Unclear);
    }
}

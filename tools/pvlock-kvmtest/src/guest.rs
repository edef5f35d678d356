// SPDX-License-Identifier: GPL-2.0

//! The guests: two real-mode snippets and the memory layout they share
//! with the test.
//!
//! Each test VM has one 64 KiB memory slot at guest physical address 0 and
//! two vCPUs that start in real mode with every segment base at 0, so a
//! guest address is a 16-bit offset and the same number as in this file.
//!
//! - vCPU 0 runs [`KICKER`]: it reads a command block at [`CMD`], makes
//!   the hypercall (or, with [`CMD_OP`] = [`OP_CPUID`], runs CPUID) on the
//!   test's behalf and reports EAX with an `out` to [`PORT_RESULT`]. That
//!   exit is *gated*: the vCPU's thread waits for the test before it runs
//!   again, and the guest then starts over with the command block the test
//!   has rewritten in the meantime.
//! - vCPU 1 runs [`TARGET`]: with interrupts disabled, it reports
//!   [`EV_READY`] (gated), then spins while the word at [`TGT_SPIN`] is not
//!   0, and then, as [`TGT_MODE`] says, either makes a hypercall (a lock
//!   wait: [`TGT_NR`] = `KVM_HC_PVLOCK_WAIT` with a0 = [`TGT_FLAGS`], a1 =
//!   [`TGT_TOKEN`]; or another, with a2 = [`TGT_A2`]), stores its result
//!   at [`TGT_RET`] and reports [`EV_WAITED`], or
//!   executes a plain `hlt` and reports [`EV_WOKE`]; then it starts over.
//!   Its other exits go to [`PORT_EVENT`] and are not gated, so it reaches
//!   its wait or `hlt` without waiting for the test. With IF = 0, only a
//!   kick (or the VMM) can end either.
//!
//! The snippets are assembled by `global_asm!` into `.rodata` and copied
//! into guest memory. They make hypercalls with AMD's `vmmcall`;
//! [`Blob::code`] turns them into Intel's `vmcall` for VMX hosts. KVM
//! truncates the arguments and the result of a hypercall from real mode to
//! 32 bits: tokens and APIC IDs are u32 here.

use std::sync::atomic::{AtomicU32, Ordering};

/// Size of the guest's memory slot at guest physical address 0.
pub const MEM_SIZE: usize = 0x10000;

/// Command block read by the kicker (u32 words).
pub const CMD: usize = 0x500;
/// Hypercall number (EAX).
pub const CMD_NR: usize = CMD;
/// a0 (EBX); for CPUID: the leaf (EAX).
pub const CMD_A0: usize = CMD + 0x4;
/// a1 (ECX); for CPUID: the subleaf (ECX).
pub const CMD_A1: usize = CMD + 0x8;
/// a2 (EDX).
pub const CMD_A2: usize = CMD + 0xc;
/// a3 (ESI).
pub const CMD_A3: usize = CMD + 0x10;
/// How many times to make the hypercall (at least 1).
pub const CMD_COUNT: usize = CMD + 0x14;
/// Keep repeating while the result is this value.
pub const CMD_EXPECT: usize = CMD + 0x18;
/// Written by the kicker: repetitions left when it stopped (0: all done).
pub const CMD_LEFT: usize = CMD + 0x1c;
/// What the kicker does: [`OP_HYPERCALL`] or [`OP_CPUID`].
pub const CMD_OP: usize = CMD + 0x20;

/// [`CMD_OP`]: the hypercall of the command block, [`CMD_COUNT`] times.
pub const OP_HYPERCALL: u32 = 0;
/// [`CMD_OP`]: CPUID leaf [`CMD_A0`], subleaf [`CMD_A1`]; reports EAX.
pub const OP_CPUID: u32 = 1;

/// Word the target spins on while it is not 0.
pub const TGT_SPIN: usize = 0x600;
/// What the target does after spinning: [`MODE_HLT`] or [`MODE_WAIT`].
pub const TGT_MODE: usize = 0x604;
/// a0 (flags) of the target's lock wait.
pub const TGT_FLAGS: usize = 0x608;
/// a1 (token) of the target's lock wait.
pub const TGT_TOKEN: usize = 0x60c;
/// Written by the target: EAX after its lock wait.
pub const TGT_RET: usize = 0x610;
/// The target's hypercall number in [`MODE_WAIT`] (`KVM_HC_PVLOCK_WAIT`
/// for a lock wait).
pub const TGT_NR: usize = 0x614;
/// a2 (EDX) of the target's hypercall.
pub const TGT_A2: usize = 0x618;

/// [`TGT_MODE`]: a plain `hlt`.
pub const MODE_HLT: u32 = 0;
/// [`TGT_MODE`]: the hypercall [`TGT_NR`] (a lock wait, or another).
pub const MODE_WAIT: u32 = 1;

/// Where the kicker is loaded (vCPU 0's RIP, CS base 0).
pub const KICKER_AT: usize = 0x1000;
/// Where the target is loaded (vCPU 1's RIP).
pub const TARGET_AT: usize = 0x2000;
/// Room for each snippet.
pub const SNIPPET_MAX: usize = 0x800;

// The layout does not overlap (checked at compile time).
const _: () = {
    assert!(CMD_OP + 4 <= TGT_SPIN);
    assert!(TGT_A2 + 4 <= KICKER_AT);
    assert!(KICKER_AT + SNIPPET_MAX <= TARGET_AT);
    assert!(TARGET_AT + SNIPPET_MAX <= MEM_SIZE);
};

/// Gated report: EAX = hypercall result, CPUID EAX or [`EV_READY`].
pub const PORT_RESULT: u16 = 0xe0;
/// Ungated report: the target's [`EV_SPINNING`], [`EV_HALTING`],
/// [`EV_WOKE`], [`EV_WAITING`], [`EV_WAITED`].
pub const PORT_EVENT: u16 = 0xe1;

/// Target: starting a round, waiting for the test to set it up.
pub const EV_READY: u32 = 1;
/// Target: spinning until [`TGT_SPIN`] is 0 (running, not halted).
pub const EV_SPINNING: u32 = 2;
/// Target: about to execute `hlt` with interrupts disabled.
pub const EV_HALTING: u32 = 3;
/// Target: `hlt` returned.
pub const EV_WOKE: u32 = 4;
/// Target: about to make its lock wait, with interrupts disabled.
pub const EV_WAITING: u32 = 5;
/// Target: the lock wait returned; its EAX is at [`TGT_RET`].
pub const EV_WAITED: u32 = 6;

/// The name of a target event, for messages.
pub fn event_name(port: u16, value: u32) -> String {
    match (port, value) {
        (PORT_RESULT, EV_READY) => "READY".into(),
        (PORT_EVENT, EV_SPINNING) => "SPINNING".into(),
        (PORT_EVENT, EV_HALTING) => "HALTING".into(),
        (PORT_EVENT, EV_WOKE) => "WOKE".into(),
        (PORT_EVENT, EV_WAITING) => "WAITING".into(),
        (PORT_EVENT, EV_WAITED) => "WAITED".into(),
        _ => format!("out {value:#x} to port {port:#x}"),
    }
}

// Kicker, at KICKER_AT:
//
//     edi = count
//     if (op == OP_CPUID) goto cpuid
//     do {
//         eax = nr; ebx = a0; ecx = a1; edx = a2; esi = a3
//         vmmcall
//     } while (--edi != 0 && eax == expect)
//     left = edi
//     out eax -> PORT_RESULT        (gated)
//     start over
//   cpuid:
//     eax = a0; ecx = a1; cpuid
//     out eax -> PORT_RESULT        (gated)
//     start over
//
// Target, at TARGET_AT:
//
//     cli
//     round:
//       out EV_READY -> PORT_RESULT  (gated: the test sets up the round)
//       if (TGT_SPIN) {
//           out EV_SPINNING -> PORT_EVENT
//           while (TGT_SPIN) pause
//       }
//       if (TGT_MODE == MODE_WAIT) {
//           out EV_WAITING -> PORT_EVENT
//           eax = TGT_NR; ebx = TGT_FLAGS; ecx = TGT_TOKEN
//           edx = TGT_A2; esi = 0
//           vmmcall                  (a lock wait: only its kick ends it)
//           TGT_RET = eax
//           out EV_WAITED -> PORT_EVENT
//           goto round
//       }
//       out EV_HALTING -> PORT_EVENT
//       hlt                          (IF = 0: a pvlock kick must not end it)
//       out EV_WOKE -> PORT_EVENT
//       goto round
//
// Memory operands without `$` are absolute addresses (DS base 0). Jumps use
// `.L` labels so that the assembler resolves them: the snippets must not
// need relocations.
core::arch::global_asm!(
    ".pushsection .rodata.pvlock_kvmtest_guest, \"a\"",
    ".code16",
    //
    ".globl pvlock_kvmtest_kicker",
    ".hidden pvlock_kvmtest_kicker",
    "pvlock_kvmtest_kicker:",
    ".Lkicker_start:",
    "    movl {count}, %edi",
    "    cmpl ${op_cpuid}, {op}",
    "    je .Lkicker_cpuid",
    ".Lkicker_again:",
    "    movl {nr}, %eax",
    "    movl {a0}, %ebx",
    "    movl {a1}, %ecx",
    "    movl {a2}, %edx",
    "    movl {a3}, %esi",
    "    vmmcall",
    "    decl %edi",
    "    jz .Lkicker_report",
    "    cmpl {expect}, %eax",
    "    je .Lkicker_again",
    ".Lkicker_report:",
    "    movl %edi, {left}",
    "    outl %eax, ${port_result}",
    "    jmp .Lkicker_start",
    ".Lkicker_cpuid:",
    "    movl {a0}, %eax",
    "    movl {a1}, %ecx",
    "    cpuid",
    "    outl %eax, ${port_result}",
    "    jmp .Lkicker_start",
    ".Lkicker_end:",
    //
    ".globl pvlock_kvmtest_target",
    ".hidden pvlock_kvmtest_target",
    "pvlock_kvmtest_target:",
    "    cli",
    ".Ltarget_round:",
    "    movl ${ev_ready}, %eax",
    "    outl %eax, ${port_result}",
    "    cmpl $0, {spin}",
    "    je .Ltarget_go",
    "    movl ${ev_spinning}, %eax",
    "    outl %eax, ${port_event}",
    ".Ltarget_spin:",
    "    pause",
    "    cmpl $0, {spin}",
    "    jne .Ltarget_spin",
    ".Ltarget_go:",
    "    cmpl ${mode_wait}, {mode}",
    "    jne .Ltarget_halt",
    "    movl ${ev_waiting}, %eax",
    "    outl %eax, ${port_event}",
    "    movl {tnr}, %eax",
    "    movl {flags}, %ebx",
    "    movl {token}, %ecx",
    "    movl {ta2}, %edx",
    "    xorl %esi, %esi",
    "    vmmcall",
    "    movl %eax, {ret}",
    "    movl ${ev_waited}, %eax",
    "    outl %eax, ${port_event}",
    "    jmp .Ltarget_round",
    ".Ltarget_halt:",
    "    movl ${ev_halting}, %eax",
    "    outl %eax, ${port_event}",
    "    hlt",
    "    movl ${ev_woke}, %eax",
    "    outl %eax, ${port_event}",
    "    jmp .Ltarget_round",
    ".Ltarget_end:",
    //
    // The lengths, as data the Rust side can read.
    ".balign 4",
    ".globl pvlock_kvmtest_kicker_len",
    ".hidden pvlock_kvmtest_kicker_len",
    "pvlock_kvmtest_kicker_len: .long .Lkicker_end - pvlock_kvmtest_kicker",
    ".globl pvlock_kvmtest_target_len",
    ".hidden pvlock_kvmtest_target_len",
    "pvlock_kvmtest_target_len: .long .Ltarget_end - pvlock_kvmtest_target",
    ".code64",
    ".popsection",
    count = const CMD_COUNT,
    op = const CMD_OP,
    op_cpuid = const OP_CPUID,
    nr = const CMD_NR,
    a0 = const CMD_A0,
    a1 = const CMD_A1,
    a2 = const CMD_A2,
    a3 = const CMD_A3,
    expect = const CMD_EXPECT,
    left = const CMD_LEFT,
    spin = const TGT_SPIN,
    mode = const TGT_MODE,
    mode_wait = const MODE_WAIT,
    flags = const TGT_FLAGS,
    token = const TGT_TOKEN,
    ret = const TGT_RET,
    tnr = const TGT_NR,
    ta2 = const TGT_A2,
    port_result = const PORT_RESULT,
    port_event = const PORT_EVENT,
    ev_ready = const EV_READY,
    ev_spinning = const EV_SPINNING,
    ev_halting = const EV_HALTING,
    ev_woke = const EV_WOKE,
    ev_waiting = const EV_WAITING,
    ev_waited = const EV_WAITED,
    options(att_syntax),
);

unsafe extern "C" {
    safe static pvlock_kvmtest_kicker: u8;
    safe static pvlock_kvmtest_kicker_len: u32;
    safe static pvlock_kvmtest_target: u8;
    safe static pvlock_kvmtest_target_len: u32;
}

/// AMD's hypercall instruction, as assembled into the snippets.
pub const VMMCALL: [u8; 3] = [0x0f, 0x01, 0xd9];
/// Intel's hypercall instruction.
pub const VMCALL: [u8; 3] = [0x0f, 0x01, 0xc1];

/// One assembled snippet.
#[derive(Clone, Copy)]
pub struct Blob {
    /// For messages.
    pub name: &'static str,
    start: &'static u8,
    len: &'static u32,
}

/// The kicker: hypercalls (or CPUID) from the command block.
pub static KICKER: Blob = Blob {
    name: "kicker",
    start: &pvlock_kvmtest_kicker,
    len: &pvlock_kvmtest_kicker_len,
};

/// The target: spins, then waits or halts, as told.
pub static TARGET: Blob = Blob {
    name: "target",
    start: &pvlock_kvmtest_target,
    len: &pvlock_kvmtest_target_len,
};

impl Blob {
    /// The snippet's bytes, as assembled.
    pub fn bytes(&self) -> &'static [u8] {
        let len = *self.len as usize;
        // SAFETY: `start` and `len` are a label of the `global_asm!` above
        // and the distance to its end label, both in the same `.rodata`
        // section that lives as long as the program and is never written.
        unsafe { std::slice::from_raw_parts(self.start, len) }
    }

    /// The bytes to load: with `vmcall` instead of `vmmcall` if `vmx`.
    pub fn code(&self, vmx: bool) -> Vec<u8> {
        let mut code = self.bytes().to_vec();
        if vmx {
            for at in hypercall_sites(&code) {
                code[at..at + 3].copy_from_slice(&VMCALL);
            }
        }
        code
    }
}

/// Offsets of the `vmmcall` instructions in `code`.
pub fn hypercall_sites(code: &[u8]) -> Vec<usize> {
    code.windows(3)
        .enumerate()
        .filter(|(_, w)| *w == VMMCALL)
        .map(|(i, _)| i)
        .collect()
}

/// One page of guest memory, as words the host reads and writes
/// atomically while the guest runs.
#[repr(C, align(4096))]
pub struct Page([AtomicU32; 1024]);

/// The guest's memory: ordinary, page-aligned process memory that the VM
/// maps at guest physical address 0.
pub struct GuestMem {
    pages: Box<[Page]>,
}

impl GuestMem {
    /// `MEM_SIZE` bytes of zeroes.
    pub fn new() -> Self {
        let pages = (0..MEM_SIZE / 4096)
            .map(|_| Page(std::array::from_fn(|_| AtomicU32::new(0))))
            .collect();
        GuestMem { pages }
    }

    /// Host virtual address of guest physical address 0.
    pub fn host_addr(&self) -> u64 {
        self.pages.as_ptr() as u64
    }

    fn word(&self, gpa: usize) -> &AtomicU32 {
        assert!(gpa % 4 == 0 && gpa < MEM_SIZE, "bad guest word {gpa:#x}");
        &self.pages[gpa / 4096].0[gpa % 4096 / 4]
    }

    /// Reads the u32 at `gpa` (4-byte aligned).
    pub fn read(&self, gpa: usize) -> u32 {
        self.word(gpa).load(Ordering::SeqCst)
    }

    /// Writes the u32 at `gpa` (4-byte aligned).
    pub fn write(&self, gpa: usize, value: u32) {
        self.word(gpa).store(value, Ordering::SeqCst)
    }

    /// Copies `bytes` to `gpa` (4-byte aligned); the bytes after them up to
    /// the next word boundary become 0.
    pub fn load(&self, gpa: usize, bytes: &[u8]) {
        for (i, chunk) in bytes.chunks(4).enumerate() {
            let mut w = [0u8; 4];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write(gpa + 4 * i, u32::from_le_bytes(w));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The last two bytes of `code` are a short `jmp` to offset `to`.
    fn ends_with_jmp_to(code: &[u8], to: usize) -> bool {
        let n = code.len();
        n >= 2 && code[n - 2] == 0xeb && (n as isize + code[n - 1] as i8 as isize) == to as isize
    }

    #[test]
    fn blobs_fit_and_loop() {
        for blob in [&KICKER, &TARGET] {
            let b = blob.bytes();
            assert!(!b.is_empty(), "{} is empty", blob.name);
            assert!(b.len() <= SNIPPET_MAX, "{} is too big", blob.name);
        }
        // Each snippet ends by jumping back: the kicker to its start, the
        // target to its round after the `cli`.
        assert!(ends_with_jmp_to(KICKER.bytes(), 0));
        assert!(ends_with_jmp_to(TARGET.bytes(), 1));
        assert_eq!(TARGET.bytes()[0], 0xfa, "target starts with cli");
    }

    #[test]
    fn kicker_reads_the_command_block() {
        let k = KICKER.bytes();
        // 66 8b 3e 14 05: movl 0x514, %edi (the count), 32-bit operand
        // size prefix, 16-bit absolute address.
        assert_eq!(&k[..5], &[0x66, 0x8b, 0x3e, 0x14, 0x05]);
        // 66 83 3e 20 05 01: cmpl $1, 0x520 (the operation).
        assert_eq!(&k[5..11], &[0x66, 0x83, 0x3e, 0x20, 0x05, 0x01]);
        // 66 e7 e0: outl %eax, $0xe0 just before the final jmp.
        assert_eq!(&k[k.len() - 5..k.len() - 2], &[0x66, 0xe7, 0xe0]);
    }

    #[test]
    fn hypercall_sites_are_patched() {
        assert_eq!(hypercall_sites(KICKER.bytes()).len(), 1);
        assert_eq!(hypercall_sites(TARGET.bytes()).len(), 1);
        for blob in [&KICKER, &TARGET] {
            assert_eq!(blob.code(false), blob.bytes());
            let intel = blob.code(true);
            assert!(hypercall_sites(&intel).is_empty());
            assert_eq!(intel.windows(3).filter(|w| *w == VMCALL).count(), 1);
            assert_eq!(intel.len(), blob.bytes().len());
        }
    }

    #[test]
    fn target_halts_once_and_kicker_has_cpuid() {
        assert_eq!(TARGET.bytes().iter().filter(|&&b| b == 0xf4).count(), 1);
        let k = KICKER.bytes();
        assert_eq!(k.windows(2).filter(|w| *w == [0x0f, 0xa2]).count(), 1);
        assert!(!TARGET.bytes().windows(2).any(|w| w == [0x0f, 0xa2]));
    }

    #[test]
    fn target_makes_the_hypercall_of_its_block() {
        let t = TARGET.bytes();
        // 66 a1 14 06: movl 0x614 (TGT_NR), %eax, right before the
        // arguments are loaded and the hypercall made.
        let mov = [0x66, 0xa1, 0x14, 0x06];
        let at = t
            .windows(mov.len())
            .position(|w| w == mov)
            .expect("movl TGT_NR, %eax");
        let call = hypercall_sites(t)[0];
        assert!(
            at < call && call - at < 32,
            "mov at {at}, vmmcall at {call}"
        );
        // ebx = flags (0x608), ecx = token (0x60c), edx = a2 (0x618).
        let args = &t[at..call];
        assert!(args.windows(5).any(|w| w == [0x66, 0x8b, 0x1e, 0x08, 0x06]));
        assert!(args.windows(5).any(|w| w == [0x66, 0x8b, 0x0e, 0x0c, 0x06]));
        assert!(args.windows(5).any(|w| w == [0x66, 0x8b, 0x16, 0x18, 0x06]));
        // 66 a3 10 06: movl %eax, 0x610 (the result) right after it.
        assert_eq!(&t[call + 3..call + 7], &[0x66, 0xa3, 0x10, 0x06]);
    }

    #[test]
    fn guest_memory_round_trips() {
        let mem = GuestMem::new();
        assert_eq!(mem.host_addr() % 4096, 0);
        mem.load(0x1000, &[1, 2, 3, 4, 5]);
        assert_eq!(mem.read(0x1000), 0x0403_0201);
        assert_eq!(mem.read(0x1004), 5);
        mem.write(MEM_SIZE - 4, 7);
        assert_eq!(mem.read(MEM_SIZE - 4), 7);
    }
}

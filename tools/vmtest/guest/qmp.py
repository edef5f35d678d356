# SPDX-License-Identifier: GPL-2.0
"""QMP client of the pvlock harness: asks a silent kernel's QEMU why.

    python3 qmp.py SOCKET nmi    an NMI to every vCPU (inject-nmi)
    python3 qmp.py SOCKET regs   register samples of every vCPU
    python3 qmp.py SOCKET threads  "cpu=N thread=TID" per vCPU

L1's guest library (pvlock.sh) runs it with the host's python3 against the
QMP socket of each L2's QEMU; the harness (tools/vmtest) runs it against
L1's. "regs" needs no help from the guest: a kernel whose every CPU has
interrupts off prints nothing, not even for an NMI, but QEMU still shows
where each vCPU is. It prints, per sample (two, half a second apart) and
vCPU, one line

    sample=S cpu=N rip=HEX rfl=HEX hlt=0|1 cpl=N stack=HEX,...

from HMP's "info registers -a" (hlt is QEMU's view: KVM's halted state for
an L2, whose pvlock lock waits KVM reports as runnable) and the words of the
top of the vCPU's kernel stack that point into kernel or module text (at
most 12 of the first 24). Two more fields, only when not empty, are for a
human deciding a stall; the harness's verdicts do not use them:

    deep=HEX,...                text addresses among the next 40 words of
                                the stack (at most 24): the frames below
                                the top, stale ones among them
    ptrs=REG:ADDR:WORD,...      for each general register that points into
                                the kernel's data (4-byte aligned), the
                                32-bit word there: the lock word, when a
                                vCPU spins or waits on a lock

and one that the harness reads:

    iframes=RET:IP:FLAGS,...    interrupt and exception frames (struct
                                pt_regs) among the first 512 words of the
                                stack, innermost first (at most 6): the
                                return address into the entry code that
                                called the handler, and the interrupted
                                code's RIP and RFLAGS as the CPU saved
                                them. A maskable interrupt's entry with IF
                                clear in its saved RFLAGS is an interrupt
                                the CPU delivered with interrupts disabled.

Errors (QEMU cannot stop a vCPU thread within 10 s, say) end it with a
non-zero status and a message.
"""
import json
import re
import socket
import sys
import time

TEXT_LO, TEXT_HI = 0xFFFFFFFF80000000, 0xFFFFFFFFFF000000
# Kernel data: the direct map, vmalloc, per-CPU areas (below the text).
DATA_LO = 0xFF00000000000000
GPRS = ("RAX", "RBX", "RCX", "RDX", "RSI", "RDI", "RBP",
        "R8", "R9", "R10", "R11", "R12", "R13", "R14", "R15")


def iframes(words):
    """The struct pt_regs frames among stack words, innermost first, as
    "RET:IP:FLAGS": RET (the word before the frame) a text address, the
    entry code's return from its call of the handler; CS the kernel's
    (0x10) with IP in its text and SS 0 or the kernel's (0x18), or the
    user's (0x33, 0x2b); RFLAGS with its always-set bit 1 and nothing
    above bit 21."""
    out = []
    for i in range(1, len(words) - 20):
        ret, ip, cs, fl, sp, ss = (words[i - 1], words[i + 16], words[i + 17],
                                   words[i + 18], words[i + 19], words[i + 20])
        if not TEXT_LO <= ret < TEXT_HI or not fl & 2 or fl >> 22:
            continue
        kernel = cs == 0x10 and ss in (0, 0x18) and TEXT_LO <= ip < TEXT_HI and sp >= DATA_LO
        user = cs == 0x33 and ss == 0x2B and ip < 0x800000000000
        if kernel or user:
            out.append("%x:%x:%x" % (ret, ip, fl))
    return out


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("nmi", "regs", "threads"):
        sys.exit("usage: qmp.py SOCKET nmi|regs|threads")
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(sys.argv[1])
    f = s.makefile("rw")

    def reply():
        while True:
            line = f.readline()
            if not line:
                sys.exit("QMP closed the connection")
            m = json.loads(line)
            if "event" not in m:
                return m

    def cmd(c, args=None):
        f.write(json.dumps({"execute": c, "arguments": args or {}}) + "\n")
        f.flush()
        m = reply()
        if "error" in m:
            sys.exit(c + ": " + m["error"].get("desc", "error"))
        return m["return"]

    def hmp(line, cpu=None):
        a = {"command-line": line}
        if cpu is not None:
            a["cpu-index"] = cpu
        return cmd("human-monitor-command", a)

    reply()
    cmd("qmp_capabilities")
    if sys.argv[2] == "nmi":
        cmd("inject-nmi")
        return
    if sys.argv[2] == "threads":
        # Each vCPU's host thread (L1's thread ID).
        for c in cmd("query-cpus-fast"):
            print("cpu=%d thread=%d" % (c["cpu-index"], c["thread-id"]))
        return
    for sample in (1, 2):
        if sample > 1:
            time.sleep(0.5)
        for block in re.split(r"^CPU#", hmp("info registers -a"), flags=re.M)[1:]:
            cpu = int(block.split(None, 1)[0])

            def reg(k):
                # "R8 =..." has a space before the "=".
                m = re.search(r"\b" + k + r" ?=([0-9a-f]+)", block)
                return m.group(1) if m else "0"

            rsp, cpl = int(reg("RSP"), 16), int(reg("CPL"))
            stack, deep, ptrs, frames = [], [], [], []
            if cpl == 0 and rsp:
                out = hmp("x/512gx 0x%x" % rsp, cpu)
                words = [int(w, 16) for w in re.findall(r" 0x([0-9a-f]{16})", out)]
                text = lambda ws: ["%x" % w for w in ws if TEXT_LO <= w < TEXT_HI]
                stack = text(words[:24])[:12]
                deep = text(words[24:64])[:24]
                frames = iframes(words)[:6]
                for k in GPRS:
                    v = int(reg(k), 16)
                    if DATA_LO <= v < TEXT_LO and v % 4 == 0:
                        m = re.search(r":\s+0x([0-9a-f]+)", hmp("x/1wx 0x%x" % v, cpu))
                        if m:
                            ptrs.append("%s:%x:%s" % (k.lower(), v, m.group(1)))
            extra = "".join(" %s=%s" % (k, ",".join(v))
                            for k, v in (("deep", deep), ("ptrs", ptrs), ("iframes", frames)) if v)
            print("sample=%d cpu=%d rip=%s rfl=%s hlt=%s cpl=%d stack=%s%s"
                  % (sample, cpu, reg("RIP"), reg("RFL"), reg("HLT"), cpl, ",".join(stack), extra))


if __name__ == "__main__":
    main()

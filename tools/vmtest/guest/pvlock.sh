# SPDX-License-Identifier: GPL-2.0
# /lib/pvlock.sh - the step functions the vmtest plans call (busybox sh).
# Every function prints its results as "@@PV <level>.<name> <event> <data>".

LV="L$pv_level.$pv_name"
# An L2's userspace output goes out through its emulated 8250 UART, which
# the kernel feeds from the UART's interrupt handler, interrupts off, for as
# long as the transmit buffer holds characters (up to 513 passes of 16).
# Under nested TCG each character is an exit to L1's QEMU, about 1 ms: a
# burst of lines (pvlock-stat's tables) held the CPU taking that interrupt
# there for over 5 s, and CPUs waiting for its IPIs reported it, with no
# project code loaded (tests/platform/serial-irq-hog.toml). So an L2 waits
# for each line to be sent before it writes the next: stty sets the mode it
# has with TCSETSW, which drains the output first.
PV_TTY_MODE=
if [ "$pv_level" = 2 ]; then
	PV_TTY_MODE=$(stty -F /dev/console -g 2>/dev/null)
fi
mark() {
	echo "@@PV $LV $*"
	[ -z "$PV_TTY_MODE" ] || stty -F /dev/console "$PV_TTY_MODE" 2>/dev/null
}
uptime_s() { cut -d' ' -f1 /proc/uptime; }
elapsed() { awk -v a="$1" -v b="$(uptime_s)" 'BEGIN { printf "%.2f", b - a }'; }
# past T0 SECONDS: more than SECONDS have passed since uptime T0.
past() { awk -v a="$1" -v b="$(uptime_s)" -v t="$2" 'BEGIN { exit !(b - a > t) }'; }

# step ID TIMEOUT FUNCTION ARGS...: run a step, bounded, with begin/end marks.
step() {
	id=$1; to=$2; shift 2
	mark step-begin "$id $*"
	t0=$(uptime_s)
	"$@" &
	pid=$!
	( sleep "$to"; kill -0 $pid 2>/dev/null && { mark step-timeout "$id after ${to}s"; kill -9 $pid; } ) &
	wd=$!
	wait $pid
	rc=$?
	kill $wd 2>/dev/null
	mark step-end "$id rc=$rc secs=$(elapsed "$t0")"
	return 0
}

# Module parameters from the kernel command line, as modprobe applies them:
# "<module>.<param>=<value>" words.
cmdline_params() {
	for w in $(cat /proc/cmdline); do
		case "$w" in "$1".*=*) echo -n "${w#"$1".} " ;; esac
	done
}

# load MODULE [PARAMS...]: insmod with the command line's MODULE.* first.
load() {
	m=$1; shift
	ko=$(find /lib/modules -name "$m.ko" 2>/dev/null | head -1)
	[ -n "$ko" ] || { mark error "no module $m"; return 1; }
	p="$(cmdline_params "$m")$*"
	if out=$(insmod "$ko" $p 2>&1); then
		mark module "$m loaded params=[$p]"
		modmap
	else
		mark module "$m failed params=[$p] error=[$out]"
		dmesg | grep -E "$m|pvlock" | tail -5 | while read -r l; do mark dmesg "$l"; done
		return 1
	fi
	dmesg | grep -E "^(\[[ 0-9.]*\] )?($m|guest_pvlock|host_kvm):" | tail -3 | while read -r l; do mark dmesg "$l"; done
	return 0
}

# modmap: where the loaded modules are ("NAME SIZE ADDRESS" per module, from
# /proc/modules), so that the harness can tell the project's code from other
# modules' in a register sample of a silent kernel (regs).
modmap() {
	mark modmap "$(awk '{ printf "%s%s %s %s", sep, $1, $2, $6; sep = ";" }' /proc/modules)"
}

unload() {
	if rmmod "$1" 2>/dev/null; then mark module "$1 unloaded"; else mark module "$1 unload-failed"; return 1; fi
}

# params MODULE: one line with every sysfs parameter.
params() {
	d=/sys/module/$1/parameters
	[ -d "$d" ] || return 0
	s=""
	for f in "$d"/*; do s="$s $(basename "$f")=$(cat "$f")"; done
	mark params "$1$s"
}

# stat: a pvlock-stat JSON snapshot of every pvlock debugfs directory.
stat() {
	if out=$(pvlock-stat --json 2>&1); then
		mark stat "$out"
	else
		mark stat-error "$out"
	fi
}

# info: the guest module's view of the lock ops.
info() {
	if [ -r /sys/kernel/debug/pvlock/info ]; then
		mark info "$(tr '\n' ';' </sys/kernel/debug/pvlock/info)"
	fi
	dmesg | grep -i -E "PV spinlocks|guest_pvlock:|host_kvm:" | while read -r l; do mark dmesg "$l"; done
}

# locktorture TYPE WRITERS SECONDS [EXTRA...]: one locktorture run, its
# summary lines and verdict. SECONDS "release" (L2): until L1's release
# step says so (an NMI), checked every second, at most 600 times: a run
# that must outlast what L1 does to the guest (snapshots), whatever that
# does to the guest's clock.
locktorture() {
	type=$1; nw=$2; secs=$3; shift 3
	[ "$nw" = 0 ] && nw=$((2 * $(nproc)))
	[ "$secs" = release ] && lt_nmis=$(nmis)
	dmesg -c >/dev/null
	t0=$(uptime_s)
	if ! out=$(modprobe_lt torture_type="$type" nwriters_stress="$nw" stat_interval=0 stutter=0 "$@" 2>&1); then
		mark locktorture "error=[$out]"
		return 1
	fi
	if [ "$secs" = release ]; then
		lt_n=0
		while [ "$(nmis)" -le "$lt_nmis" ]; do
			lt_n=$((lt_n + 1))
			[ "$lt_n" -lt 600 ] || { mark locktorture "error=[no release from L1 in 600 s]"; break; }
			sleep 1
		done
		# Tells L1's release (l2_awaited) that the NMI came.
		mark held "released up=$(uptime_s)"
	else
		sleep "$secs"
	fi
	rmmod locktorture
	secs_run=$(elapsed "$t0")
	rmmod torture 2>/dev/null
	# The kernel prints its own copy of these lines on the console at
	# unload, and may still be printing: give it a moment, as console
	# writes interleave byte by byte.
	sleep 1
	lines=$(dmesg | grep -E "Writes:|Reads:|End of test|lock-torture:.*(FAIL|SUCCESS)")
	echo "$lines" | while read -r l; do [ -n "$l" ] && mark lt "$l"; done
	# The summary once more, in one line of its own: a line that the
	# kernel's console output split is read from the other copy.
	w=$(echo "$lines" | grep "Writes:" | tail -1)
	sum=$(echo "$w" | sed -n 's|.*Total: *\([0-9]*\) *Max/Min: *\([0-9]*\)/\([0-9]*\).*Fail: *\([0-9]*\).*|total=\1 max=\2 min=\3 fail=\4|p')
	case "$w" in *"???"*) sum="$sum suspicious=1" ;; esac
	v=$(echo "$lines" | grep -o "End of test: [A-Z]*" | tail -1)
	[ -n "$v" ] && sum="$sum verdict=${v##* }"
	# The writers' window in the kernel's own clock: from "Start of test"
	# (printed just before the writers are created) to the summary
	# (printed once they have all stopped). Stopping them is in it;
	# finding and loading the module and printing the summary on the
	# serial console are not.
	ts_start=$(dmesg | grep -e "--- Start of test" | tail -1 | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p')
	ts_end=$(echo "$w" | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p')
	window=$(awk -v a="$ts_start" -v b="$ts_end" 'BEGIN { if (a != "" && b != "" && b + 0 > a + 0) printf " window=%.2f", b - a }')
	mark locktorture "type=$type writers=$nw secs=$secs_run$window $sum"
}
# nmis: the NMIs this kernel's CPUs have taken ($PV_PROC/interrupts).
nmis() { awk '$1 == "NMI:" { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) n += $i } END { print n + 0 }' "$PV_PROC/interrupts"; }
modprobe_lt() {
	insmod "$(find /lib/modules -name torture.ko | head -1)" 2>/dev/null
	insmod "$(find /lib/modules -name locktorture.ko | head -1)" "$@"
}

# loadloop N SECONDS: load and unload guest_pvlock N times, SECONDS apart.
loadloop() {
	n=$1; s=$2; i=0; ok=0
	while [ $i -lt "$n" ]; do
		i=$((i + 1))
		load guest_pvlock >/dev/null && modmap && sleep "$s" && unload guest_pvlock >/dev/null && ok=$((ok + 1))
		sleep "$s"
	done
	# Waiters that a switch moved from the bridge to the new slowpath.
	moved=0
	for m in $(dmesg | sed -n 's/.*guest_pvlock: .*; \([0-9]*\) waiters moved from the bridge.*/\1/p'); do
		moved=$((moved + m))
	done
	mark loadloop "cycles=$n ok=$ok bridge_moved=$moved"
}

# warnings: kernel warnings, oopses and lockups seen so far.
warnings() {
	n=$(dmesg | grep -c -E "WARNING:|BUG:|Oops|soft lockup|hard LOCKUP|rcu.*stall|Call Trace")
	mark warnings "count=$n"
	dmesg | grep -E "WARNING:|BUG:|Oops|soft lockup|hard LOCKUP|rcu.*stall" | head -5 | while read -r l; do mark dmesg "$l"; done
}

# sh_step SCRIPT: run SCRIPT with sh, its output as "out" lines; its status.
sh_step() {
	f=$(mktemp) || return 1
	{ sh -c "$1" 2>&1; echo $? >"$f"; } | while read -r l; do mark out "$l"; done
	rc=$(cat "$f")
	rm -f "$f"
	return "${rc:-1}"
}

# cpu_online CPU 0|1: set a CPU's online state; retried while CPU hotplug is
# blocked (a lock-op switch blocks it, EBUSY) for up to 10 s.
cpu_online() {
	# (Shell variables are global: names of its own, not its callers'.)
	co_f=/sys/devices/system/cpu/cpu$1/online
	[ -w "$co_f" ] || return 1
	co_tries=0
	while ! echo "$2" >"$co_f" 2>/dev/null; do
		[ "$(cat "$co_f")" = "$2" ] && return 0
		co_tries=$((co_tries + 1))
		[ $co_tries -ge 100 ] && return 1
		busy=$((busy + 1))
		sleep 0.1
	done
	return 0
}

# online_cpus: bring every present CPU online (after booting with
# maxcpus=1); the number online.
online_cpus() {
	busy=0
	for d in /sys/devices/system/cpu/cpu[0-9]*; do
		c=${d##*cpu}
		[ -e "$d/online" ] && [ "$(cat "$d/online")" = 0 ] && { cpu_online "$c" 1 || mark error "cpu $c did not come online"; }
	done
	mark cpus "online=$(grep -c ^processor /proc/cpuinfo) busy=$busy"
}

# hotplug_loop N: N rounds of taking every CPU but 0 offline and online
# again, one by one.
hotplug_loop() {
	n=$1; i=0; ok=0; busy=0
	while [ $i -lt "$n" ]; do
		i=$((i + 1))
		good=1
		for d in /sys/devices/system/cpu/cpu[1-9]*; do
			c=${d##*cpu}
			cpu_online "$c" 0 || good=0
			cpu_online "$c" 1 || good=0
		done
		[ $good = 1 ] && ok=$((ok + 1))
	done
	mark hotplug "rounds=$n ok=$ok busy=$busy online=$(grep -c ^processor /proc/cpuinfo)"
}

# --- L1 only -----------------------------------------------------------------

# The host's root, read-only over 9p, for its QEMU (run in a chroot);
# /run there is L1's own, for the L2s' QMP sockets. The host's /tmp stays
# visible: the repository, with the kernel and initramfs the L2s boot, may
# be a clone there.
hostroot() {
	[ -d /host/usr ] && return 0
	mkdir -p /host
	mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /host || return 1
	mount -t proc proc /host/proc
	mount -t sysfs sysfs /host/sys
	mount -t devtmpfs devtmpfs /host/dev
	mount -t tmpfs tmpfs /host/run
}

HT=/sys/kernel/tracing/events/kvm/kvm_hypercall
EX=/sys/kernel/tracing/events/kvm/kvm_exit
hist_start() { echo 'hist:keys=nr:vals=hitcount:sort=nr' >"$HT/trigger"; }
hist_stop() {
	s=$(grep -E '^\{ nr:' "$HT/hist" | sed 's/[{}]//g; s/ nr: *\([0-9]*\) *hitcount: *\([0-9]*\)/\1:\2/' | tr '\n' ' ')
	mark hypercalls "$1 $s"
	echo '!hist:keys=nr:vals=hitcount:sort=nr' >"$HT/trigger"
}

# guest_cpus: the command prefix that confines a guest (an L2's QEMU, the
# KVM selftest's vCPU threads) to the L1 CPUs given to guests, as the
# harness's pv_l2_affinity says (L1's CPU 0 runs no guest vCPU; see
# Documentation/pvlock/testing.rst); nothing if it says nothing.
guest_cpus() { [ -z "${pv_l2_affinity:-}" ] || echo "taskset -c $pv_l2_affinity"; }

# --- the lock-wait record -----------------------------------------------------
# L1 keeps its guests' latest lock waits and kicks (the kvm_hypercall events
# of KVM_HC_PVLOCK_WAIT, KVM_HC_PVLOCK_KICK and KVM_HC_KICK_CPU) in a trace
# instance of its own. When a guest reports a stuck CPU (an IPI not
# answered, an RCU stall, a lockup) or goes silent, L1 prints, per vCPU
# thread, its last lock wait and the last kick to it ("waitrec" lines,
# kicked=yes when that kick's token is the wait's or later): a vCPU stuck
# in a wait whose kick came was not woken by the host, one whose kick never
# came was not kicked by its guest.
WI=/sys/kernel/tracing/instances/pvlock
waitrec_start() {
	if ! { mkdir -p "$WI" && echo 4096 >"$WI/buffer_size_kb" &&
		echo 'nr == 0x70760001 || nr == 0x70760003 || nr == 5' >"$WI/events/kvm/kvm_hypercall/filter" &&
		echo 1 >"$WI/events/kvm/kvm_hypercall/enable"; } 2>/dev/null; then
		mark waitrec-off "cannot trace kvm_hypercall in $WI"
	fi
	if ! { echo 1 >"$WI/events/kvm/kvm_apic_accept_irq/enable" &&
		echo 1 >"$WI/events/kvm/kvm_vcpu_wakeup/enable"; } 2>/dev/null; then
		mark irqrec-off "cannot trace kvm_apic_accept_irq and kvm_vcpu_wakeup in $WI"
	fi
}
# waitrec NAME WHY: the record, once per guest NAME (WHY: ipi-wait, rcu-stall,
# lockup, silent).
waitrec() {
	[ -e "$WI/trace" ] && [ ! -e "/tmp/pv-waitrec-$1" ] || return 0
	: >"/tmp/pv-waitrec-$1"
	mark waitrec "$1 why=$2 events=$(grep -c kvm_hypercall: "$WI/trace")"
	# A thread's APIC ID is the one whose kicks carry the tokens of its
	# waits (tokens are per guest CPU, so those of two CPUs can be equal:
	# the most frequent match wins).
	awk -v lv="$LV" -v g="$1" '
	function hex(s,  v, i, c) {
		v = 0; s = tolower(s); sub(/^0x/, "", s)
		for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)); v = v * 16 + c - 1 }
		return v
	}
	/kvm_hypercall:/ {
		th = $1; t = $4; sub(":", "", t); nr = a1 = a2 = ""
		for (i = 1; i < NF; i++) {
			if ($i == "nr") nr = $(i + 1)
			if ($i == "a1") a1 = $(i + 1)
			if ($i == "a2") a2 = $(i + 1)
		}
		if (nr == "0x70760003") { w[th] = a1; wt[th] = t; nw[th]++ }
		else if (nr == "0x70760001") {
			lk[a1] = a2; lkt[a1] = t; nk[a1]++
			for (x in w) if (w[x] == a2) vote[x, a1]++
		} else if (nr == "0x5") { kc[a1] = t; nkc[a1]++ }
	}
	END {
		for (th in w) {
			best = ""; n = 0
			for (a in lk) if (vote[th, a] > n) { n = vote[th, a]; best = a }
			kicked = best == "" ? "?" : (hex(lk[best]) >= hex(w[th]) ? "yes" : "no")
			printf "@@PV %s waitrec %s thread=%s apic=%s waits=%d last_wait=%s at=%s its_last_kick=%s at=%s kicked=%s\n", lv, g, th, best == "" ? "?" : best, nw[th], w[th], wt[th], best == "" ? "-" : lk[best], best == "" ? "-" : lkt[best], kicked
		}
		for (a in kc)
			printf "@@PV %s waitrec %s apic=%s kick_cpu=%d last_at=%s\n", lv, g, a, nkc[a], kc[a]
	}' "$WI/trace"
	irqrec "$1"
}

# l2_threads NAME FILE: L2 NAME's vCPU threads into FILE ("cpu=N thread=TID"
# lines, from QEMU's query-cpus-fast); on failure FILE holds the error.
l2_threads() {
	"$PV_QMP" "$(qmp_sock "$1")" threads >"$2" 2>&1 && grep -q '^cpu=' "$2"
}

# --- the interrupt record -----------------------------------------------------
# irqrec NAME: per vCPU of L2 NAME (its L1 thread, from QEMU's
# query-cpus-fast), the last three interrupts that L1's KVM accepted for its
# APIC in the thread of another vCPU of the same guest (IPIs; its own timer
# is accepted in its own thread, a device's interrupt in whatever thread
# ran, and neither is counted), with their vectors, and its last three
# wake-ups from a halt ("irqrec" lines; times in L1's trace clock, like
# waitrec's), and the IPIs accepted since its last wake-up: how many, and
# the first (time, vector, sender). A CPU that its guest reports waiting
# for an IPI, halted, with an IPI accepted since its last wake-up from
# about when the wait began, was not run by L1 (not woken, or woken and not
# scheduled); one with no such IPI never got it from the sender's side.
irqrec() {
	ir_map=/tmp/pv-irqrec-$1
	if ! l2_threads "$1" "$ir_map"; then
		ir_why=$(tr '\n' ' ' <"$ir_map")
		# The report may reach L1 after its guest has ended (the relay
		# is behind): the threads l2_runq saw at boot, said.
		if ! { [ -s "$PV_TMP/pv-threads-$1" ] && cp "$PV_TMP/pv-threads-$1" "$ir_map"; }; then
			mark irqrec "$1 error=[$ir_why]"
			rm -f "$ir_map"
			return 0
		fi
		mark irqrec "$1 threads-at-boot why=[$ir_why]"
	fi
	awk -v lv="$LV" -v g="$1" '
	function last3(arr, key, n,  k, s) {
		s = ""
		for (k = (n > 3 ? n - 2 : 1); k <= n; k++) s = s (s == "" ? "" : ",") arr[key, k % 3]
		return s == "" ? "-" : s
	}
	FNR == NR { split($1, c, "="); split($2, t, "="); cpu[t[2]] = c[2]; next }
	/kvm_apic_accept_irq:|kvm_vcpu_wakeup:/ {
		th = $1; sub(/.*-/, "", th); at = $4; sub(":", "", at); last = at
		if (!(th in cpu)) next
		if ($5 == "kvm_apic_accept_irq:") {
			# From another vCPU only: the timer of a vCPU is accepted
			# in its own thread.
			a = $7
			if (sprintf("%x", cpu[th]) == a) next
			ni[a]++; irq[a, ni[a] % 3] = at "/" $9
			if (ns[a]++ == 0) first[a] = at "/" $9 "/from" cpu[th]
		} else {
			v = cpu[th]; nw[v]++; wk[v, nw[v] % 3] = at
			a = sprintf("%x", v); ns[a] = 0; first[a] = ""
		}
	}
	END {
		for (th in cpu) {
			v = cpu[th]; a = sprintf("%x", v)
			printf "@@PV %s irqrec %s cpu=%d thread=%s ipis=%d last_ipis=%s wakeups=%d last_wakeups=%s ipis_since_wakeup=%d first_since_wakeup=%s trace_until=%s\n", lv, g, v, th, ni[a], last3(irq, a, ni[a]), nw[v], last3(wk, v, nw[v]), ns[a], first[a] == "" ? "-" : first[a], last == "" ? "-" : last
		}
	}' "$ir_map" "$WI/trace"
	rm -f "$ir_map"
}

# --- the run-queue record -----------------------------------------------------
# l2_runq NAME: while L2 NAME's QEMU runs, every PV_RUNQ_EVERY seconds, how
# long each of its vCPU threads (from QEMU's query-cpus-fast) has waited on
# L1's run queues, runnable but not run: run_delay, the second field of
# /proc/TID/schedstat, which the scheduler adds to when the thread gets a
# CPU. A growth of at least PV_RUNQ_REPORT seconds since the last sample is
# marked ("runq" lines: waited=S seconds in all in the within=S seconds
# since the last sample, so one stretch of at least waited - within seconds
# ended in them). A vCPU halted in a lock wait (or in HLT) sleeps, which
# is not counted: only one that L1 could run and did not. The harness
# tells by it a vCPU that answered an NMI late because L1 did not run it
# from one that the host half kept halted (tools/vmtest/src/platform.rs).
PV_RUNQ_EVERY=${PV_RUNQ_EVERY:-1}
PV_RUNQ_REPORT=${PV_RUNQ_REPORT:-2}
PV_PROC=${PV_PROC:-/proc}
l2_runq() {
	rq_map=/tmp/pv-runq-$1
	i=0
	# QMP answers once QEMU has set the machine up.
	until l2_threads "$1" "$rq_map"; do
		i=$((i + 1))
		if [ $i -ge 30 ]; then
			mark runq-off "$1 error=[$(tr '\n' ' ' <"$rq_map")]"
			rm -f "$rq_map"
			return 0
		fi
		sleep 1
	done
	# For irqrec, after the guest's QEMU is gone.
	cp "$rq_map" "$PV_TMP/pv-threads-$1"
	# Ends when none of the threads is left.
	awk -v lv="$LV" -v g="$1" -v every="$PV_RUNQ_EVERY" -v report="$PV_RUNQ_REPORT" -v proc="$PV_PROC" '
	function now(  f, l, a) { f = proc "/uptime"; l = ""; getline l <f; close(f); split(l, a, " "); return a[1] + 0 }
	function delay(th,  f, l, a, r) {
		f = proc "/" th "/schedstat"; l = ""
		r = (getline l <f); close(f)
		if (r <= 0) return -1
		split(l, a, " "); return a[2] / 1e9
	}
	{ split($1, c, "="); split($2, t, "="); cpu[t[2]] = c[2] }
	END {
		for (th in cpu) { prev[th] = delay(th); n++ }
		printf "@@PV %s runq-on %s threads=%d\n", lv, g, n
		t0 = now()
		for (;;) {
			system("sleep " every)
			t = now(); alive = 0
			for (th in cpu) {
				d = delay(th)
				if (d < 0) continue
				alive = 1
				if (prev[th] >= 0 && d - prev[th] >= report)
					printf "@@PV %s runq %s cpu=%d thread=%s waited=%.2f within=%.2f\n", lv, g, cpu[th], th, d - prev[th], t - t0
				prev[th] = d
			}
			fflush()
			if (!alive) break
			t0 = t
		}
	}' "$rq_map"
	rm -f "$rq_map"
}

# --- silent L2s ---------------------------------------------------------------
# L1 asks an L2 that says nothing (its heartbeat included) for PV_NMI_AFTER
# seconds why, once per silence, through the QMP socket of the L2's QEMU:
# first where each vCPU is (registers and the top of its stack, which need
# nothing of the guest), then an NMI to every vCPU (QEMU's inject-nmi). The
# registers show a vCPU stuck in guest_pvlock, or every vCPU halted with
# interrupts on, waiting for interrupts that never come. An NMI ends a HLT
# and a lock wait whatever the guest waits for, so a guest that waited for a
# lost kick comes back to life; each CPU that takes the NMI says so ("Uhhuh.
# NMI received for unknown reason 00 on CPU 2."), and a CPU that does not
# was not run by L1. The harness judges what follows
# (tools/vmtest/src/platform.rs, regs.rs).
PV_NMI_AFTER=${PV_NMI_AFTER:-60}
PV_WATCH_EVERY=${PV_WATCH_EVERY:-5}
# The host root, and where the QMP sockets are inside it.
PV_HOST=${PV_HOST:-/host}
PV_QMP_DIR=${PV_QMP_DIR:-/run}
# The L2's machine: qboot (QEMU's minimal firmware) loads the kernel at once
# and starts no AP, so an AP's first instruction is the kernel's own
# trampoline; SeaBIOS starts every AP and parks it in a halt loop with
# interrupts off, where, with HLT exits disabled (cpu-pm=on), nested TCG
# once left both of L1's vCPUs halted in the guest for good (CI,
# 2026-12-02). No NIC (and no option ROM to load), no VGA: the guests use
# the serial console only.
PV_L2_MACHINE="-bios /usr/share/qemu/qboot.rom -nic none -vga none"

# The QMP client: pvlock-qmp (tools/pvlock-qmp), static in the initramfs,
# run by L1 itself. QEMU runs in the host root, so L1 finds the socket of
# L2 NAME under it: qmp_sock NAME.
PV_QMP=${PV_QMP:-pvlock-qmp}
qmp_sock() { echo "$PV_HOST$PV_QMP_DIR/qmp-$1.sock"; }
have_qmp() { command -v "$PV_QMP" >/dev/null 2>&1; }

# l2_regs NAME: register samples of L2 NAME through its QMP socket
# (pvlock-qmp regs: where each vCPU is, whether it is halted, the top of its
# stack), each line marked "regs NAME ...", or "regs-failed NAME WHY".
l2_regs() {
	have_qmp || { mark regs-failed "$1 no $PV_QMP in L1 to talk to QMP"; return 1; }
	out=$("$PV_QMP" "$(qmp_sock "$1")" regs 2>&1)
	rc=$?
	if [ "$rc" = 0 ]; then
		echo "$out" | while IFS= read -r l; do mark regs "$1 $l"; done
	else
		mark regs-failed "$1 $(echo "$out" | tail -1)"
	fi
	return "$rc"
}

# l2_nmi NAME: an NMI to every vCPU of L2 NAME through its QMP socket
# (pvlock-qmp nmi); marks "nmi-injected NAME" or "nmi-failed NAME WHY".
l2_nmi() {
	have_qmp || { mark nmi-failed "$1 no $PV_QMP in L1 to talk to QMP"; return 1; }
	out=$("$PV_QMP" "$(qmp_sock "$1")" nmi 2>&1)
	rc=$?
	if [ "$rc" = 0 ]; then
		mark nmi-injected "$1"
	else
		mark nmi-failed "$1 $(echo "$out" | tail -1)"
	fi
	return "$rc"
}

# A kernel's report of an NMI (it took one) is no sign that it runs on.
is_nmi_report() {
	case "$1" in
	*"NMI received for unknown reason"* | *"Dazed and confused"* | *"strange power saving mode"* | *unknown_nmi_error* | *"NMI handler"*"took too long"*) return 0 ;;
	esac
	return 1
}

# l2_relay NAME SEEN: the console of L2 NAME on stdin, relayed with a
# "[NAME] " prefix; from its first heartbeat on (a booting guest is not
# watched), the uptime (s) of its last line, NMI reports aside, in file
# SEEN; an L2 "hcmark LABEL": the hypercalls since the last mark.
l2_relay() {
	armed=
	while IFS= read -r l; do
		echo "[$1] $l"
		case "$l" in "@@HB"*) armed=1 ;; esac
		if [ -n "$armed" ] && ! is_nmi_report "$l"; then
			read -r up _ </proc/uptime
			echo "${up%.*}" >"$2"
		fi
		case "$l" in
		*" step-begin "*) ;;
		*"@@PV L2."*" hcmark "*) [ "${rec:-1}" = 1 ] && { hist_stop "$1:${l##* hcmark }"; hist_start; } ;;
		*"@@PV L2."*" barrier "*) l2_barrier "$1" "${l##* barrier }" ;;
		*"@@PV L2."*" await state="*) l2_awaited "$1" "${l##* await state=}" ;;
		*"@@PV L2."*" held "*) l2_awaited "$1" "${l##* held }" ;;
		*"csd: Detected non-responsive"*) waitrec "$1" ipi-wait ;;
		*"rcu: INFO"*) waitrec "$1" rcu-stall ;;
		*"soft lockup"* | *"hard LOCKUP"*) waitrec "$1" lockup ;;
		esac
	done
}

# l2_awaited NAME "STATE secs=S": L2 NAME's await_lock saw its lock in
# STATE; file $PV_AWAIT_DIR/NAME.STATE tells L1's steps (a scenario that
# must not change the host's load before the guest is where it expects).
PV_AWAIT_DIR=${PV_AWAIT_DIR:-/tmp/pv-await}
# L1's files about its L2s (seen, interleave's counters, the vCPU
# threads at boot); tests set it.
PV_TMP=${PV_TMP:-/tmp}
l2_awaited() {
	mkdir -p "$PV_AWAIT_DIR" && : >"$PV_AWAIT_DIR/$1.${2%% *}"
}

# await_guest NAME STATE SECONDS (L1): waits until L2 NAME's await_lock
# has seen its lock in STATE, or NAME holds at label STATE (hold), at most
# SECONDS (l2_awaited).
await_guest() {
	ag_t0=$(uptime_s)
	awaited "$@" || return 1
	mark out "$1 runs $2 after $(elapsed "$ag_t0") s"
}
awaited() {
	said "$@" || { mark error "await: $1 not $2 after $3 s"; return 1; }
}
# said NAME STATE SECONDS: whether L2 NAME says STATE within SECONDS
# (l2_awaited's file), quietly.
said() {
	sd_t0=$(uptime_s)
	while [ ! -e "$PV_AWAIT_DIR/$1.$2" ]; do
		past "$sd_t0" "$3" && return 1
		sleep 0.05
	done
}

# hold LABEL SECONDS (L2): waits, at most SECONDS, until L1's interleave
# lets this guest run its next window: says "held LABEL" (which L1's relay
# turns into a file, l2_awaited) and reads a line from the barrier port,
# open before the mark as in barrier.
hold() {
	bar_open || { mark error "hold $1: cannot open $PV_BAR_PORT"; return 1; }
	# (A word after the label: the console's line ends in a CR.)
	mark held "$1 up=$(uptime_s)"
	if ! read -r -t "$2" _ <&3; then
		mark error "hold $1: not released in $2 s"
		exec 3<&-
		return 1
	fi
	exec 3<&-
}

# interleave SECONDS WINDOW... (L1, beside the l2 step that booted the
# guests): runs L2 guests' windows one at a time, so that what drifts in
# the platform over minutes falls on every guest alike (pvlock-bench's
# paired shape). A WINDOW names the guests that run it together, joined
# by '+'. Every guest named holds at h0 once booted (hold) and is paused
# there at once (QMP stop); then each guest in turn is resumed and
# released to set itself up until it holds at h1, and paused; then for
# each WINDOW its guests are resumed and released, and paused again once
# each holds at its next label (h2, h3, ...). Boots overlap, nothing else
# does. SECONDS bounds every wait. At the end every guest is resumed and
# released from its last hold.
interleave() {
	il_to=$1; shift
	il_all=$(printf '%s\n' "$@" | tr '+' '\n' | sort -u)
	il_left=$il_all
	il_t0=$(uptime_s)
	while [ -n "$il_left" ]; do
		il_next=
		for n in $il_left; do
			if [ -e "$PV_AWAIT_DIR/$n.h0" ]; then
				il_pause "$n" || { il_abort; return 1; }
				echo 0 >"$PV_TMP/pv-il-$n"
			else
				il_next="$il_next $n"
			fi
		done
		il_left=$il_next
		[ -z "$il_left" ] && break
		if past "$il_t0" "$il_to"; then
			mark error "interleave: not booted after $il_to s:$il_left"
			il_abort
			return 1
		fi
		sleep 0.1
	done
	mark out "interleave: $# windows of $(echo $il_all | wc -w) guests"
	for w in $il_all "$@"; do
		il_window "$w" || { il_abort; return 1; }
	done
	for n in $il_all; do
		il_resume "$n" || { il_abort; return 1; }
		l2_go "$n"
	done
}
# il_window WINDOW: its guests resumed and released, then paused at their
# next hold.
il_window() {
	il_ns=$(echo "$1" | tr '+' ' ')
	for n in $il_ns; do il_resume "$n" || return 1; done
	for n in $il_ns; do l2_go "$n"; done
	for n in $il_ns; do
		il_k=$(($(cat "$PV_TMP/pv-il-$n") + 1))
		echo "$il_k" >"$PV_TMP/pv-il-$n"
		awaited "$n" "h$il_k" "$il_to" || return 1
	done
	for n in $il_ns; do il_pause "$n" || return 1; done
}
# The windows cannot go on: end every guest's QEMU rather than let the
# held ones wait out their bound.
il_abort() {
	for n in $il_all; do
		for p in /proc/[0-9]*; do
			case "$(tr '\0' ' ' 2>/dev/null <"$p/cmdline")" in
			*qemu*"pv_name=$n "*) kill "${p#/proc/}" 2>/dev/null ;;
			esac
		done
		mark error "interleave: ended $n"
	done
}
# "paused NAME" and "resumed NAME" tell the harness's watchdog too.
il_pause() {
	: >"$PV_TMP/pv-seen-$1.held"
	il_out=$("$PV_QMP" "$(qmp_sock "$1")" stop 2>&1) || { mark error "interleave: stop $1: $il_out"; return 1; }
	mark paused "$1"
}
il_resume() {
	il_out=$("$PV_QMP" "$(qmp_sock "$1")" cont 2>&1) || { mark error "interleave: cont $1: $il_out"; return 1; }
	# Its silence counts from now (l2_watch).
	read -r il_up _ </proc/uptime
	echo "${il_up%.*}" >"$PV_TMP/pv-seen-$1"
	rm -f "$PV_TMP/pv-seen-$1.held"
	mark resumed "$1"
}

# l2_go NAME: a line to L2 NAME's second serial port (a FIFO that its QEMU
# reads), which lets on a guest waiting there (barrier, hold).
# Read-write: never blocks, even if that guest's QEMU is gone.
l2_go() { echo go 1<>"$PV_HOST$PV_QMP_DIR/bar-$1"; }

# l2_barrier NAME LABEL: L2 NAME reached barrier LABEL. Once all
# $PV_BAR_N guests of this l2 step have, a line to each one's second serial
# port (a FIFO that its QEMU reads) lets them on. Of the relays that see the
# count complete, the one whose rename of the barrier's directory succeeds
# opens it, so each guest gets one line per barrier, and a later barrier of
# the same name starts afresh.
PV_BAR_DIR=${PV_BAR_DIR:-/tmp/pv-bar}
l2_barrier() {
	b_dir=$PV_BAR_DIR/$(printf %s "$2" | tr -c 'A-Za-z0-9_.-' _)
	mkdir -p "$b_dir" && : >"$b_dir/$1" || return 0
	[ "$(ls "$b_dir" 2>/dev/null | wc -l)" -ge "${PV_BAR_N:-1}" ] || return 0
	b_open=$b_dir.open.$$
	mv "$b_dir" "$b_open" 2>/dev/null || return 0
	for b_g in "$b_open"/*; do
		l2_go "${b_g##*/}"
	done
	mark barrier-open "$2 guests=$(ls "$b_open" | tr '\n' ' ')"
	rm -rf "$b_open"
}

# l2_watch NAME SEEN: until file SEEN.done exists, register samples (l2_regs)
# of L2 NAME and then an NMI (l2_nmi) to it once its last line (file SEEN,
# once it exists) is PV_NMI_AFTER seconds old, once per silence.
l2_watch() {
	asked=
	while [ ! -e "$2.done" ]; do
		sleep "$PV_WATCH_EVERY"
		# Paused by interleave: silent because its vCPUs do not run.
		[ ! -e "$2.held" ] || continue
		read -r last 2>/dev/null <"$2" || continue
		[ -n "$last" ] || continue
		read -r up _ </proc/uptime
		if [ $((${up%.*} - last)) -lt "$PV_NMI_AFTER" ]; then
			asked=
		elif [ "$asked" != "$last" ]; then
			asked=$last
			# Said first: under load the samples can take a minute, and
			# the harness waits for an L1 that is asking.
			mark nmi-asking "$1"
			waitrec "$1" "silent"
			l2_regs "$1"
			l2_nmi "$1"
		fi
	done
}

# kexec_to GROUP (L2, a plan's last step): boots this guest by kexec into
# the kernel and initramfs it booted with (pv_kernel, pv_initrd: paths in
# the host's root, which the group's QEMU must export, -virtfs
# ...,mount_tag=hostroot) with GROUP's plan, as guest GROUP-N (N this
# guest's number): this kernel's plan is done, and the next kernel's steps
# and results are GROUP-N's. Returns only if the kexec failed.
kexec_to() {
	hostroot || { mark error "kexec: cannot mount the host root over 9p"; return 1; }
	k_name=$1-${pv_name##*-}
	k_cmd=$(sed "s/pv_group=[^ ]*/pv_group=$1/; s/pv_name=[^ ]*/pv_name=$k_name/" /proc/cmdline)
	mark kexec "to=$k_name uptime=$(uptime_s)"
	mark step-end "$id rc=0 secs=$(elapsed "$t0")"
	mark done "rc=0 uptime=$(uptime_s)"
	sync
	k_out=$(pvlock-kexec "$PV_HOST$pv_kernel" "$PV_HOST$pv_initrd" "$k_cmd" 2>&1)
	mark error "kexec: $k_out"
	return 1
}

# l2_qemu NAME GROUP CPUS MEM MODEL TIMEOUT QMP [ARGS...]: L2 NAME's QEMU
# (the host's, in its root: pv_qemu, the one that runs L1), on the guest
# CPUs, for at most TIMEOUT seconds, with QMP at $PV_QMP_DIR/QMP and
# ARGS (-incoming URI: the destination of a migration); its console on
# stdout.
l2_qemu() {
	q_name=$1; q_g=$2; q_cpus=$3; q_mem=$4; q_model=$5; q_to=$6; q_qmp=$7
	shift 7
	eval "q_cmd=\${pv_l2cmd_$q_g}"
	eval "q_qx=\${pv_l2qemu_$q_g}"
	# shellcheck disable=SC2046 # guest_cpus: empty, or taskset and its CPU list
	# shellcheck disable=SC2086 # $q_qx: the group's extra QEMU arguments
	timeout "$q_to" chroot /host $(guest_cpus) "${pv_qemu:-qemu-system-x86_64}" -accel kvm -cpu "$q_model" \
		-smp "$q_cpus" -m "$q_mem" -nographic -monitor none -no-reboot $PV_L2_MACHINE $q_qx \
		-serial stdio -serial "pipe:$PV_QMP_DIR/bar-$q_name" \
		-qmp "unix:$PV_QMP_DIR/$q_qmp,server=on,wait=off" \
		-kernel "$pv_kernel" -initrd "$pv_initrd" \
		-append "console=ttyS0 panic=-1 oops=panic quiet no-kvmapf csdlock_debug=1 pv_level=2 pv_group=$q_g pv_name=$q_name pv_kernel=$pv_kernel pv_initrd=$pv_initrd $q_cmd" \
		"$@" </dev/null 2>&1
}

# vmstate_image FILE (L1): a qcow2 image FILE, a path in the host's root
# under /run (L1's own tmpfs), for an L2's snapshots: the group's QEMU
# gets it as a drive (-drive if=none,id=vmstate,file=FILE,format=qcow2).
vmstate_image() {
	hostroot || { mark error "cannot mount the host root over 9p"; return 1; }
	chroot /host qemu-img create -q -f qcow2 "$1" 4G
}

# snapshots NAME ROUNDS [PAUSE] (L1): ROUNDS times, PAUSE seconds apart
# (8 by default), takes a snapshot of running L2 NAME (savevm) and
# restores it PAUSE seconds later (loadvm), each as an "out" line with its
# time (pvlock-qmp); its QEMU needs a qcow2 drive (vmstate_image).
snapshots() {
	s_sock=$(qmp_sock "$1")
	s_i=1
	while [ "$s_i" -le "$2" ]; do
		for s_op in savevm loadvm; do
			sleep "${3:-8}"
			if ! s_out=$("$PV_QMP" "$s_sock" "$s_op" "s$s_i" 2>&1); then
				mark error "snapshots: $1: $s_out"
				return 1
			fi
			mark out "$1: $s_out"
		done
		s_i=$((s_i + 1))
	done
}

# release NAME (L1): ends L2 NAME's "locktorture ... release" run with
# an NMI to its vCPUs (QMP inject-nmi), sent again every PV_RELEASE_EVERY
# seconds (each time said) until the guest says it took one, at most 6
# times. Not a line to its serial port: after three loadvm the guest's
# serial input was lost in 2 of 7 runs (make test and pvlock-snapshot,
# 2026-12-07), where the NMI comes from KVM and no device's restored
# state. (Not l2_nmi: its mark tells the harness of a silent guest.)
PV_RELEASE_EVERY=${PV_RELEASE_EVERY:-10}
release() {
	rl_i=0
	while :; do
		rl_out=$("$PV_QMP" "$(qmp_sock "$1")" nmi 2>&1) || { mark error "release: $1: $rl_out"; return 1; }
		mark out "released $1"
		said "$1" released "$PV_RELEASE_EVERY" && return 0
		rl_i=$((rl_i + 1))
		[ "$rl_i" -lt 6 ] || { mark error "release: $1 said nothing of $rl_i NMIs"; return 1; }
		mark out "release: $1 said nothing in $PV_RELEASE_EVERY s; sending again"
	done
}

# migrate NAME ROUNDS [PAUSE] (L1, in the background beside the l2 step
# that booted NAME): live-migrates running L2 NAME ROUNDS times, every
# PAUSE seconds (8 by default), each time to a new QEMU in this L1 started
# with the same arguments and -incoming on a unix socket; the source
# QEMU quits once QEMU says the migration completed (pvlock-qmp migrate),
# and the new one takes over the guest's QMP socket name (a symbolic link
# to its own, once the source has removed its socket) and the console's
# relay. Returns when the last QEMU exits. NAME must be running (a step
# such as await_guest before it).
migrate() {
	m_name=$1; m_rounds=$2; m_pause=${3:-8}
	{ read -r m_g; read -r m_cpus; read -r m_mem; read -r m_model; read -r m_to; } <"/tmp/pv-l2-$m_name" ||
		{ mark error "migrate: $m_name: no such guest"; return 1; }
	m_dir=$PV_HOST$PV_QMP_DIR
	m_sock=$(qmp_sock "$m_name")
	# The socket of the QEMU that runs the guest now.
	m_cur=$m_sock
	m_i=1
	while [ "$m_i" -le "$m_rounds" ]; do
		sleep "$m_pause"
		m_new=qmp-$m_name.r$m_i.sock
		m_uri=unix:$PV_QMP_DIR/mig-$m_name.sock
		rm -f "$m_dir/$m_new" "$m_dir/mig-$m_name.sock"
		(
			l2_qemu "$m_name" "$m_g" "$m_cpus" "$m_mem" "$m_model" "$m_to" "$m_new" -incoming "$m_uri"
			echo "@@PV $LV l2-exit $m_name rc=$?"
		) | l2_relay "$m_name" "$PV_TMP/pv-seen-$m_name" &
		m_n=0
		while [ ! -S "$m_dir/mig-$m_name.sock" ]; do
			[ $m_n -lt 600 ] || { mark error "migrate: $m_name round=$m_i: the destination did not start"; return 1; }
			sleep 0.1; m_n=$((m_n + 1))
		done
		if ! m_out=$("$PV_QMP" "$m_sock" migrate "$m_uri" 2>&1); then
			mark error "migrate: $m_name round=$m_i: $m_out"
			return 1
		fi
		# The source removes its socket when it exits.
		m_n=0
		while [ -S "$m_cur" ] && [ $m_n -lt 300 ]; do sleep 0.1; m_n=$((m_n + 1)); done
		ln -sfn "$m_new" "$m_sock"
		m_cur=$m_dir/$m_new
		mark out "migrated $m_name round=$m_i ${m_out#migrate }"
		m_i=$((m_i + 1))
	done
	wait
}

# l2 TIMEOUT SPEC...: boot L2 guests, all specs at once, and wait for them.
# SPEC is GROUP:COUNT:CPUS:MEM:CPUMODEL; $pv_l2cmd_GROUP holds the group's
# extra kernel command line. Each guest runs /plan/L2-GROUP.sh and its
# console lines are relayed with a "[GROUP-I] " prefix (l2_relay); a guest
# that goes silent is asked why (l2_watch).
l2() {
	to=$1; shift
	hostroot || { mark error "cannot mount the host root over 9p"; return 1; }
	# pv_record=0 (the benchmark): no trace event and no recorder while
	# the guests run.
	rec=${pv_record:-1}
	if [ "$rec" = 1 ]; then
		hist_start
		waitrec_start
		# A guest that resets (triple fault) leaves QEMU with status 0 and
		# no message: trace KVM's shutdown exits (SVM exit code 0x7f) to
		# name them.
		echo 'exit_reason == 127' >"$EX/filter" 2>/dev/null && echo 1 >"$EX/enable"
	fi
	# Barriers count every guest of this step (l2_barrier).
	PV_BAR_N=0
	for spec in "$@"; do
		r=${spec#*:}
		PV_BAR_N=$((PV_BAR_N + ${r%%:*}))
	done
	export PV_BAR_N
	rm -rf "$PV_BAR_DIR"
	mkdir -p "$PV_BAR_DIR"
	for spec in "$@"; do
		g=${spec%%:*}; r=${spec#*:}
		n=${r%%:*}; r=${r#*:}
		cpus=${r%%:*}; r=${r#*:}
		mem=${r%%:*}; model=${r#*:}
		i=1
		while [ $i -le "$n" ]; do
			name=$g-$i
			seen=$PV_TMP/pv-seen-$name
			rm -f "$PV_HOST$PV_QMP_DIR/qmp-$name.sock" "$PV_HOST$PV_QMP_DIR/bar-$name" "$seen" "$seen.done" "$PV_TMP/pv-threads-$name"
			# The guest's second serial port: barriers (l2_barrier).
			mkfifo "$PV_HOST$PV_QMP_DIR/bar-$name"
			(
				l2_watch "$name" "$seen" &
				w=$!
				rq=
				if [ "$rec" = 1 ]; then
					l2_runq "$name" &
					rq=$!
				fi
				# What a migration (migrate) starts the guest's next
				# QEMU with.
				printf '%s\n' "$g" "$cpus" "$mem" "$model" "$to" >"/tmp/pv-l2-$name"
				(
					l2_qemu "$name" "$g" "$cpus" "$mem" "$model" "$to" "qmp-$name.sock"
					echo "@@PV $LV l2-exit $name rc=$?"
				) | l2_relay "$name" "$seen"
				: >"$seen.done"
				kill "$w" $rq 2>/dev/null
				rm -f "$seen"
			) &
			i=$((i + 1))
		done
	done
	wait
	[ "$rec" = 1 ] || return 0
	hist_stop "all"
	grep -v '^#' /sys/kernel/tracing/trace 2>/dev/null | while IFS= read -r l; do mark l2-shutdown-exit "$l"; done
	echo 0 >"$EX/enable" 2>/dev/null
	echo >/sys/kernel/tracing/trace 2>/dev/null
	# The guests' own failures are theirs to report.
	return 0
}

# hcmark LABEL (L2): L1 reports the hypercalls since the previous mark (or
# since the guests started) under "<instance>:LABEL".
hcmark() { mark hcmark "$1"; sleep 1; }

# kvmtest ARGS...: pvlock-kvmtest, its output as "kvmtest" lines; its status.
kvmtest() {
	f=$(mktemp) || return 1
	# shellcheck disable=SC2046 # guest_cpus: taskset and its CPU list, or nothing
	{ $(guest_cpus) pvlock-kvmtest "$@" 2>&1; echo $? >"$f"; } | while IFS= read -r l; do mark kvmtest "$l"; done
	rc=$(cat "$f")
	rm -f "$f"
	return "${rc:-1}"
}

# hackbench GROUPS LOOPS [TIMEOUT]: rt-tests' hackbench (process mode,
# messages over socketpairs between GROUPS groups of 20 senders and 20
# receivers, LOOPS messages per sender), bounded by TIMEOUT seconds; its
# "Time:" seconds. The program and its libraries come in the initramfs as
# extra files (vmtest --extra, pvlock-bench).
hackbench() {
	g=$1; l=$2; to=${3:-300}
	hb=/usr/bin/hackbench
	[ -e "$hb" ] || { mark hackbench "groups=$g loops=$l error=missing"; return 1; }
	# Extra files outside bin/ arrive mode 0644; the kernel runs the ELF
	# interpreter only if it is executable.
	for ld in /lib64/ld-linux-x86-64.so.2; do
		[ -f "$ld" ] && [ ! -x "$ld" ] && chmod 755 "$ld"
	done
	t0=$(uptime_s)
	out=$(timeout -k 10 "$to" "$hb" -g "$g" -l "$l" 2>&1)
	rc=$?
	secs=$(elapsed "$t0")
	t=$(echo "$out" | sed -n 's/^Time: *\([0-9.]*\).*/\1/p' | tail -1)
	# Stopped by the timeout: hackbench still prints a Time: line.
	if echo "$out" | grep -q "to terminate"; then
		mark hackbench "groups=$g loops=$l rc=$rc secs=$secs error=timeout"
		return 1
	fi
	if [ "$rc" != 0 ] || [ -z "$t" ]; then
		mark hackbench "groups=$g loops=$l rc=$rc secs=$secs error=[$(echo "$out" | tail -2 | tr '\n' ' ')]"
		return 1
	fi
	mark hackbench "groups=$g loops=$l rc=0 secs=$secs time=$t"
}

# barrier NAME [SECONDS] (L2): waits until every guest that L1 booted in
# the same l2 step reached barrier NAME, at most SECONDS (120 by default),
# so that the guests' measurements run at the same time (a guest whose plan
# runs ahead measures with the others' vCPUs idle). L1 counts the guests'
# "barrier" marks and then writes a line to each one's second serial port
# (l2_barrier). The port is open before the mark, so the line cannot come
# before anyone reads it.
PV_BAR_PORT=${PV_BAR_PORT:-/dev/ttyS1}
# bar_open: the port as fd 3, raw (barrier, hold).
bar_open() {
	exec 3<>"$PV_BAR_PORT" || return 1
	stty raw -echo <&3 2>/dev/null
	return 0
}
barrier() {
	[ -e "$PV_BAR_PORT" ] || { mark barrier-error "$1 no port $PV_BAR_PORT"; return 1; }
	bar_open || { mark barrier-error "$1 cannot open $PV_BAR_PORT"; return 1; }
	b_t0=$(uptime_s)
	mark barrier "$1"
	if read -r -t "${2:-120}" _ <&3; then
		mark barrier-passed "$1 waited=$(elapsed "$b_t0")"
		exec 3<&-
		return 0
	fi
	mark barrier-error "$1 timeout=${2:-120}"
	exec 3<&-
	return 1
}

# await_lock STATE SECONDS: waits until guest_pvlock runs the lock STATE
# says (native or pvlock, its info's adaptive_state), at most SECONDS; the
# time that took, and the reason guest_pvlock gives then.
await_lock() {
	al_t0=$(uptime_s)
	al_f=/sys/kernel/debug/pvlock/info
	while :; do
		al_s=$(sed -n 's/^adaptive_state: //p' "$al_f" 2>/dev/null)
		if [ "$al_s" = "$1" ]; then
			mark await "state=$1 secs=$(elapsed "$al_t0")"
			mark dmesg "adaptive_reason: $(sed -n 's/^adaptive_reason: //p' "$al_f")"
			return 0
		fi
		if awk -v e="$(elapsed "$al_t0")" -v t="$2" 'BEGIN { exit !(e + 0 >= t + 0) }'; then
			mark await-error "state=$1 timeout=$2 now=${al_s:-none}"
			mark dmesg "adaptive_reason: $(sed -n 's/^adaptive_reason: //p' "$al_f")"
			return 1
		fi
		sleep 0.1
	done
}

# burn N SECONDS: N busy loops for SECONDS, competition for the vCPUs of
# the guests that share this one's CPUs.
burn() {
	bn_i=0
	while [ $bn_i -lt "$1" ]; do
		timeout "$2" sh -c 'while :; do :; done' &
		bn_i=$((bn_i + 1))
	done
	wait
	mark burn "n=$1 secs=$2"
}

# mmbench THREADS SECONDS [CHUNK_KIB]: pvlock-mmbench (tools/), an
# ebizzy-like load whose lock contention comes from the kernel's memory
# paths (page faults, munmap, the page allocator); chunks per second.
mmbench() {
	mb_out=$(pvlock-mmbench "$@" 2>&1)
	mb_rc=$?
	if [ "$mb_rc" != 0 ]; then
		mark mmbench "threads=$1 secs=$2 rc=$mb_rc error=[$(echo "$mb_out" | tail -1)]"
		return 1
	fi
	mark mmbench "rc=0 $mb_out"
}

# stressng STRESSORS INSTANCES SECONDS [TIMEOUT]: stress-ng's STRESSORS
# (comma-separated, e.g. futex,sigq,eventfd) all at once, INSTANCES of
# each, for SECONDS, bounded by TIMEOUT seconds; the geometric mean of their
# bogo ops/s (real time) from --metrics-brief, and each one's rate. The
# program and its libraries come in the initramfs as extra files
# (pvlock-bench).
stressng() {
	sn_list=$1; sn_n=$2; sn_secs=$3; sn_to=${4:-300}
	sn_bin=/usr/bin/stress-ng
	sn_head="stressors=$sn_list instances=$sn_n duration=$sn_secs"
	[ -e "$sn_bin" ] || { mark stressng "$sn_head error=missing"; return 1; }
	# Extra files outside bin/ arrive mode 0644; the kernel runs the ELF
	# interpreter only if it is executable.
	for ld in /lib64/ld-linux-x86-64.so.2; do
		[ -f "$ld" ] && [ ! -x "$ld" ] && chmod 755 "$ld"
	done
	sn_args=""
	for sn_s in $(echo "$sn_list" | tr ',' ' '); do sn_args="$sn_args --$sn_s $sn_n"; done
	sn_t0=$(uptime_s)
	# (In /tmp: stress-ng may make its temporary directory where it runs.)
	# shellcheck disable=SC2086
	sn_out=$(cd /tmp && timeout -k 10 "$sn_to" "$sn_bin" $sn_args --timeout "${sn_secs}s" --metrics-brief 2>&1)
	sn_rc=$?
	sn_wall=$(elapsed "$sn_t0")
	# Stopped by the timeout: stress-ng catches SIGTERM, prints its metrics
	# and may even exit 0, so the wall time tells.
	if awk -v s="$sn_wall" -v t="$sn_to" 'BEGIN { exit !(s + 0.5 >= t) }'; then
		mark stressng "$sn_head rc=$sn_rc secs=$sn_wall error=timeout"
		return 1
	fi
	if [ "$sn_rc" != 0 ]; then
		mark stressng "$sn_head rc=$sn_rc secs=$sn_wall error=[$(echo "$sn_out" | tail -2 | tr '\n' ' ')]"
		return 1
	fi
	# "stress-ng: metrc: [pid] futex 53487 3.00 0.23 2.42 17817.95 20168.90":
	# the rate is the fifth number after the name. The geometric mean by
	# Newton's method (busybox awk has no log, exp or sqrt), of the rates
	# over their arithmetic mean, from above.
	sn_res=$(echo "$sn_out" | awk -v list="$sn_list" '
		BEGIN { n = split(list, want, ","); for (i = 1; i <= n; i++) ok[want[i]] = 1 }
		/metrc:/ { for (i = 1; i + 5 <= NF; i++) if (($i in ok) && $(i + 1) ~ /^[0-9]/) { r[$i] = $(i + 5); break } }
		END {
			for (i = 1; i <= n; i++) {
				if (!(want[i] in r) || r[want[i]] + 0 <= 0) { printf "error=no-rate-%s", want[i]; exit }
				am += r[want[i]] / n
				rates = rates sep want[i] ":" r[want[i]]; sep = ","
			}
			p = 1
			for (i = 1; i <= n; i++) p *= r[want[i]] / am
			x = 1
			for (it = 0; it < 200; it++) {
				xn1 = 1
				for (k = 1; k < n; k++) xn1 *= x
				nx = ((n - 1) * x + p / xn1) / n
				if (x - nx <= x * 1e-12) { x = nx; break }
				x = nx
			}
			printf "ops_per_sec=%.2f rates=%s", x * am, rates
		}')
	case "$sn_res" in
	error=*)
		mark stressng "$sn_head rc=0 secs=$sn_wall $sn_res"
		return 1
		;;
	esac
	mark stressng "$sn_head rc=0 secs=$sn_wall $sn_res"
}

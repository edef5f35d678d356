# SPDX-License-Identifier: GPL-2.0
# /lib/pvlock.sh - the step functions the vmtest plans call (busybox sh).
# Every function prints its results as "@@PV <level>.<name> <event> <data>".

LV="L$pv_level.$pv_name"
mark() { echo "@@PV $LV $*"; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }
elapsed() { awk -v a="$1" -v b="$(uptime_s)" 'BEGIN { printf "%.2f", b - a }'; }

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
	ko=$(find /lib/modules -name "$m.ko" | head -1)
	[ -n "$ko" ] || { mark error "no module $m"; return 1; }
	p="$(cmdline_params "$m")$*"
	if out=$(insmod "$ko" $p 2>&1); then
		mark module "$m loaded params=[$p]"
	else
		mark module "$m failed params=[$p] error=[$out]"
		dmesg | grep -E "$m|pvlock" | tail -5 | while read -r l; do mark dmesg "$l"; done
		return 1
	fi
	dmesg | grep -E "^(\[[ 0-9.]*\] )?($m|guest_pvlock|host_kvm):" | tail -3 | while read -r l; do mark dmesg "$l"; done
	return 0
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
# summary lines and verdict.
locktorture() {
	type=$1; nw=$2; secs=$3; shift 3
	[ "$nw" = 0 ] && nw=$((2 * $(nproc)))
	dmesg -c >/dev/null
	t0=$(uptime_s)
	if ! out=$(modprobe_lt torture_type="$type" nwriters_stress="$nw" stat_interval=0 stutter=0 "$@" 2>&1); then
		mark locktorture "error=[$out]"
		return 1
	fi
	sleep "$secs"
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
	mark locktorture "type=$type writers=$nw secs=$secs_run $sum"
}
modprobe_lt() {
	insmod "$(find /lib/modules -name torture.ko | head -1)" 2>/dev/null
	insmod "$(find /lib/modules -name locktorture.ko | head -1)" "$@"
}

# loadloop N SECONDS: load and unload guest_pvlock N times, SECONDS apart.
loadloop() {
	n=$1; s=$2; i=0; ok=0
	while [ $i -lt "$n" ]; do
		i=$((i + 1))
		load guest_pvlock >/dev/null && sleep "$s" && unload guest_pvlock >/dev/null && ok=$((ok + 1))
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

sh_step() { sh -c "$1" 2>&1 | while read -r l; do mark out "$l"; done; }

# --- L1 only -----------------------------------------------------------------

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

# l2 TIMEOUT SPEC...: boot L2 guests, all specs at once, and wait for them.
# SPEC is GROUP:COUNT:CPUS:MEM:CPUMODEL; $pv_l2cmd_GROUP holds the group's
# extra kernel command line. Each guest runs /plan/L2-GROUP.sh and its
# console lines are relayed with a "[GROUP-I] " prefix.
l2() {
	to=$1; shift
	hostroot || { mark error "cannot mount the host root over 9p"; return 1; }
	hist_start
	# A guest that resets (triple fault) leaves QEMU with status 0 and no
	# message: trace KVM's shutdown exits (SVM exit code 0x7f) to name them.
	echo 'exit_reason == 127' >"$EX/filter" 2>/dev/null && echo 1 >"$EX/enable"
	for spec in "$@"; do
		g=${spec%%:*}; r=${spec#*:}
		n=${r%%:*}; r=${r#*:}
		cpus=${r%%:*}; r=${r#*:}
		mem=${r%%:*}; model=${r#*:}
		eval "cmd=\${pv_l2cmd_$g}"
		i=1
		while [ $i -le "$n" ]; do
			(
				timeout "$to" chroot /host qemu-system-x86_64 -accel kvm -cpu "$model" \
					-smp "$cpus" -m "$mem" -nographic -monitor none -no-reboot \
					-kernel "$pv_kernel" -initrd "$pv_initrd" \
					-append "console=ttyS0 panic=-1 oops=panic quiet no-kvmapf csdlock_debug=1 pv_level=2 pv_group=$g pv_name=$g-$i $cmd" \
					</dev/null 2>&1
				echo "@@PV $LV l2-exit $g-$i rc=$?"
			) | while IFS= read -r l; do
				echo "[$g-$i] $l"
				# An L2 "hcmark LABEL": count the hypercalls since the last mark.
				case "$l" in
				*" step-begin "*) ;;
				*"@@PV L2."*" hcmark "*) hist_stop "$g-$i:${l##* hcmark }"; hist_start ;;
				esac
			done &
			i=$((i + 1))
		done
	done
	wait
	hist_stop "all"
	grep -v '^#' /sys/kernel/tracing/trace 2>/dev/null | while IFS= read -r l; do mark l2-shutdown-exit "$l"; done
	echo 0 >"$EX/enable" 2>/dev/null
	echo >/sys/kernel/tracing/trace 2>/dev/null
}

# hcmark LABEL (L2): L1 reports the hypercalls since the previous mark (or
# since the guests started) under "<instance>:LABEL".
hcmark() { mark hcmark "$1"; sleep 1; }

kvmtest() { pvlock-kvmtest "$@" 2>&1 | while IFS= read -r l; do mark kvmtest "$l"; done; }

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

# SPDX-License-Identifier: GPL-2.0
# lib.sh - settings and helpers shared by the pvlock build scripts.
KVER=${KVER:-7.3}
KPKGVER=${KPKGVER:-7.3.4-1~bpo13+1}
LLVMV=${LLVMV:-19}
BINDGEN_VER=${BINDGEN_VER:-0.72.1}
export LIBCLANG_PATH=${LIBCLANG_PATH:-/usr/lib/llvm-$LLVMV/lib}
export PATH=$HOME/.cargo/bin:$PATH
PVLOCK_CACHE=${PVLOCK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pvlock}

log() { printf '==> %s\n' "$*" >&2; }
warn() { printf 'pvlock: warning: %s\n' "$*" >&2; }
die() { printf 'pvlock: error: %s\n' "$*" >&2; exit 1; }
# The project's QEMU (scripts/qemu.sh): Debian's source of the packaged one.
QVER=${QVER:-10.0.2}
QPKGVER=${QPKGVER:-1:10.0.2+ds-2+deb13u1~bpo12+1}

# A cached tree with a patch series (scripts/kernel.sh, scripts/qemu.sh):
# STATE/applied holds a copy of every patch applied to it, in order, and
# STATE/applied/series their names.

# read_series DIR LABEL: the patches DIR/series lists (comments and blank
# lines aside), each checked to exist in DIR, in the array "series".
read_series() {
	local p
	[ -f "$1/series" ] || die "$2: $1/series missing"
	series=()
	while read -r p; do
		p=${p%%#*}; p=${p//[[:space:]]/}
		[ -n "$p" ] && series+=("$p")
	done <"$1/series"
	for p in "${series[@]}"; do
		[ -f "$1/$p" ] || die "$2: patch '$p' listed in ${1#"$top"/}/series does not exist"
	done
}

# series_kept STATE DIR: the patches applied (array "applied") and how many
# of them, from the first, are the first of "series" unchanged ("keep").
series_kept() {
	mapfile -t applied <"$1/applied/series"
	keep=0
	while [ $keep -lt ${#applied[@]} ] && [ $keep -lt ${#series[@]} ] &&
		[ "${applied[$keep]}" = "${series[$keep]}" ] &&
		cmp -s "$1/applied/${applied[$keep]}" "$2/${series[$keep]}"; do
		keep=$((keep + 1))
	done
}

# series_revert TREE STATE LABEL HINT: reverts the applied patches after
# the first $keep, the last first; HINT says what to do if one cannot be.
series_revert() {
	local i p
	for ((i = ${#applied[@]} - 1; i >= keep; i--)); do
		p=${applied[$i]}
		log "$3: reverting $p"
		if ! patch -d "$1" -p1 -R -s --dry-run <"$2/applied/$p" >/dev/null 2>&1; then
			die "$3: cannot revert $p in $1; $4"
		fi
		patch -d "$1" -p1 -R -s <"$2/applied/$p" >/dev/null
		rm -f "$2/applied/$p"
		sed -i '$d' "$2/applied/series"
	done
}

# series_apply TREE STATE DIR LABEL WHAT: applies the patches of "series"
# from the $keep-th on, each checked first; WHAT names the tree's source.
series_apply() {
	local i p out
	for ((i = keep; i < ${#series[@]}; i++)); do
		p=${series[$i]}
		log "$4: applying $p"
		if ! out=$(patch -d "$1" -p1 -N -s --dry-run <"$3/$p" 2>&1); then
			printf '%s\n' "$out" | head -5 >&2
			die "$4: patch $p does not apply to $5"
		fi
		patch -d "$1" -p1 -N -s <"$3/$p" >/dev/null
		cp "$3/$p" "$2/applied/$p"
		echo "$p" >>"$2/applied/series"
	done
}

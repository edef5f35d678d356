# SPDX-License-Identifier: GPL-2.0
# pvlock: paravirtual spinlocks for KVM, in Rust.
#
#   make demo       set everything up, boot a host and a guest, show PV locks
#                   working with their statistics
#   make test       every test: unit, model check, build, lint, VM scenarios
#
#   make deps       install what this machine lacks (idempotent)
#   make kernel     the patched Linux 7.3, cached outside the repository
#                   (CONFIG=distro: the variant with KVM as modules and
#                   NR_CPUS=8192, in a tree of its own)
#   make qemu       the project's QEMU (qemu/patches), cached likewise
#   make print-kdir the built kernel tree
#   make [modules]  guest_pvlock.ko and host_kvm.ko (KDIR=... to build
#                   against another patched 7.3 tree)
#   make tools      the userspace tools (tools/)
#   make check      rustfmt and clippy, kernel modules and tools
#   make vmtest SCENARIO="name ..."   run VM scenarios (default: the fast set)
#   make bench [QUICK=1]              the benchmark (tools/pvlock-bench)
#   make test-distro                  the distro kernel variant: build it,
#                                     the modules for it, one scenario
#   make test-debug                   the debug kernel variant (lockdep,
#                                     sleep-in-atomic, KFENCE): build it,
#                                     the modules for it, five scenarios
#   make test-kasan                   the same on the debug variant with
#                                     KASAN
#   make clean / kernel-clean

SHELL := /bin/bash
LLVM_SUFFIX := -19
export PATH := $(HOME)/.cargo/bin:$(PATH)
export LIBCLANG_PATH ?= /usr/lib/llvm-19/lib

# CONFIG=distro (or debug, kasan) selects the kernel variant of
# kernel/distro.config (or kernel/debug.config, kernel/kasan.config).
CONFIG ?=
export PVLOCK_KCONFIG := $(CONFIG)
KDIR ?= $(shell PVLOCK_KCONFIG=$(CONFIG) scripts/kernel.sh --print-kdir)
# Modules for a variant kernel are built apart, from a copy of their
# sources in build/modules-<variant>, so that those of the default kernel
# stay where the tests take them.
# TEST_HOOKS=y builds the harness's modules, with fault injection
# (guest_pvlock/faults.rs, host_kvm's inject_ignore_kicks), apart in
# build/modules-test: the modules users install (make) have none.
TEST_HOOKS ?=
MODVARIANT = $(CONFIG)$(if $(TEST_HOOKS),$(if $(CONFIG),-)test)
MODOUT = $(if $(MODVARIANT),$(CURDIR)/build/modules-$(MODVARIANT),$(CURDIR))
KMAKE = $(MAKE) -C $(KDIR) M=$(MODOUT) LLVM=$(LLVM_SUFFIX) \
	$(if $(TEST_HOOKS),PVLOCK_TEST_HOOKS=y) $(if $(CLIPPY),CLIPPY=1)
CARGO = cargo
TOOLS = tools
STATIC_TARGET = x86_64-unknown-linux-gnu
STATIC_BIN = $(TOOLS)/target/$(STATIC_TARGET)/release
HOST_BIN = $(TOOLS)/target/release
# The project's QEMU (scripts/qemu.sh, make qemu), for L1 and its guests.
QEMU_BIN = $(shell scripts/qemu.sh --print-binary)
VMTEST = $(HOST_BIN)/vmtest --kdir $(KDIR) --repo $(CURDIR) --tools-bin $(STATIC_BIN) --qemu $(QEMU_BIN)
# The tests run the harness's modules: those with the test hooks.
VMTEST_HOOKS = $(VMTEST) --modules $(CURDIR)/build/modules-test
RS_MODULE_FILES = $(wildcard guest_pvlock/*.rs host_kvm/*.rs)
RS_KERNEL_FILES = $(shell find rust -name '*.rs')

.PHONY: all modules deps kernel qemu print-kdir tools static-tools host-tools check \
	check-modules check-tools test test-unit model vmtest demo bench clean \
	kernel-clean check-kdir test-distro test-debug test-kasan modules-test \
	check-modules-test

all: modules

deps:
	@scripts/deps.sh

kernel:
	@scripts/kernel.sh

qemu:
	@scripts/qemu.sh

print-kdir:
	@echo $(KDIR)

check-kdir:
	@if [ ! -f "$(KDIR)/Makefile" ]; then \
		echo "pvlock: error: KDIR=$(KDIR) is not a kernel tree (run 'make kernel', or point KDIR at a patched Linux 7.3 build)" >&2; exit 1; fi
	@if [ ! -f "$(KDIR)/include/config/kernel.release" ] || [ ! -f "$(KDIR)/Module.symvers" ]; then \
		echo "pvlock: error: KDIR=$(KDIR) is not built (run 'make kernel')" >&2; exit 1; fi
	@if ! grep -q '^CONFIG_RUST=y' "$(KDIR)/.config"; then \
		echo "pvlock: error: KDIR=$(KDIR) is built without CONFIG_RUST" >&2; exit 1; fi
	@if [ ! -f "$(KDIR)/include/linux/kvm_pvlock.h" ] || [ ! -f "$(KDIR)/rust/kernel/pvlock.rs" ]; then \
		echo "pvlock: error: KDIR=$(KDIR) lacks the pvlock patches (kernel/patches); build it with 'make kernel'" >&2; exit 1; fi

modules: check-kdir
	@if [ -n "$(MODVARIANT)" ]; then \
		mkdir -p $(MODOUT)/guest_pvlock $(MODOUT)/host_kvm && cp -p Kbuild $(MODOUT)/ && \
		cp -p guest_pvlock/Kbuild guest_pvlock/*.rs guest_pvlock/*.c $(MODOUT)/guest_pvlock/ && \
		cp -p host_kvm/Kbuild host_kvm/*.rs $(MODOUT)/host_kvm/; fi
	@log=$$(mktemp); \
	if ! $(KMAKE) modules >$$log 2>&1; then \
		grep -E '^(error|warning)|error:' -A6 $$log | head -60 >&2; \
		echo "pvlock: error: module build failed (make -C $(KDIR) M=$(MODOUT) LLVM=$(LLVM_SUFFIX) modules)" >&2; \
		rm -f $$log; exit 1; fi; \
	if grep -E '^warning|warning:' $$log >&2; then \
		rm -f $(MODOUT)/guest_pvlock/*.ko $(MODOUT)/host_kvm/*.ko $(MODOUT)/guest_pvlock/*.o $(MODOUT)/host_kvm/*.o; \
		echo "pvlock: error: the module build warned (see above)" >&2; rm -f $$log; exit 1; fi; \
	rm -f $$log; ls -1 $(MODOUT)/guest_pvlock/guest_pvlock.ko $(MODOUT)/host_kvm/host_kvm.ko

# The harness's modules, with the test hooks, in build/modules-test.
modules-test:
	@$(MAKE) --no-print-directory modules TEST_HOOKS=y

REV ?=
NAME ?=
static-tools:
	@command -v $(CARGO) >/dev/null || { echo "pvlock: error: cargo not found (run 'make deps')" >&2; exit 1; }
	RUSTFLAGS="-C target-feature=+crt-static" $(CARGO) build --quiet --release \
		--manifest-path $(TOOLS)/Cargo.toml --target $(STATIC_TARGET) \
		-p pvlock-stat -p pvlock-kvmtest -p pvlock-qmp -p pvlock-mmbench -p pvlock-kexec

host-tools:
	$(CARGO) build --quiet --release --manifest-path $(TOOLS)/Cargo.toml -p vmtest -p pvlock-bench

tools: static-tools host-tools

check: check-modules check-modules-test check-tools

check-modules: check-kdir
	@rustfmt --edition 2021 --check --config-path $(KDIR)/.rustfmt.toml \
		$(RS_MODULE_FILES) $(RS_KERNEL_FILES) || \
		{ echo "pvlock: error: rustfmt would change the files above" >&2; exit 1; }
	@log=$$(mktemp); touch $(RS_MODULE_FILES); \
	if ! $(KMAKE) CLIPPY=1 modules >$$log 2>&1 || grep -qE '^(warning|error)' $$log; then \
		grep -E '^(warning|error)' -A8 $$log | head -80 >&2; \
		echo "pvlock: error: clippy (CLIPPY=1) is not clean" >&2; rm -f $$log; exit 1; fi; \
	rm -f $$log; echo "modules: rustfmt and clippy clean"
	@log=$$(mktemp); touch $(addprefix $(KDIR)/,$(RS_KERNEL_FILES)); \
	if ! $(MAKE) -C $(KDIR) LLVM=$(LLVM_SUFFIX) CLIPPY=1 rust/kernel.o >$$log 2>&1 || grep -qE '^(warning|error)' $$log; then \
		grep -E '^(warning|error)' -A8 $$log | head -80 >&2; \
		echo "pvlock: error: clippy (CLIPPY=1) is not clean on the kernel crate's pvlock code" >&2; rm -f $$log; exit 1; fi; \
	rm -f $$log; echo "kernel crate (rust/): clippy clean"

# Clippy on the harness's build too: the test hooks are code as well.
check-modules-test: modules
	@rm -f build/modules-test/guest_pvlock/*.o build/modules-test/host_kvm/*.o
	@$(MAKE) --no-print-directory modules TEST_HOOKS=y CLIPPY=1 >/dev/null
	@echo "modules with the test hooks: clippy clean"
	@for m in guest_pvlock/guest_pvlock.ko host_kvm/host_kvm.ko; do \
		if /sbin/modinfo -F parm $$m | grep -q '^inject_'; then \
			echo "pvlock: error: $$m (the build users install) has test hooks" >&2; exit 1; fi; \
		if ! /sbin/modinfo -F parm build/modules-test/$$m | grep -q '^inject_'; then \
			echo "pvlock: error: build/modules-test/$$m has no test hooks" >&2; exit 1; fi; \
	done; echo "test hooks: only in build/modules-test"

check-tools:
	$(CARGO) fmt --manifest-path $(TOOLS)/Cargo.toml --all --check
	$(CARGO) clippy --quiet --manifest-path $(TOOLS)/Cargo.toml --workspace --all-targets -- -D warnings
	@echo "tools: rustfmt and clippy clean"

test-unit:
	$(CARGO) test --quiet --manifest-path $(TOOLS)/Cargo.toml --workspace

model:
	RUSTFLAGS="--cfg loom" $(CARGO) test --quiet --release --manifest-path $(TOOLS)/Cargo.toml \
		-p pvlock-model --target-dir $(TOOLS)/target/loom

SCENARIO ?=
vmtest: qemu modules-test tools
	$(VMTEST_HOOKS) run $(if $(SCENARIO),$(SCENARIO),--fast)

test: deps kernel qemu
	$(MAKE) modules modules-test tools
	$(MAKE) check
	$(MAKE) test-unit
	$(MAKE) model
	$(VMTEST_HOOKS) run --all

# $(call vmtest-variant,VARIANT): vmtest on kernel variant VARIANT
# (kernel/VARIANT.config, built by make kernel CONFIG=VARIANT) with its
# modules (make modules CONFIG=VARIANT), results in build/vmtest-VARIANT.
vmtest-variant = $(HOST_BIN)/vmtest --kdir $$(PVLOCK_KCONFIG=$(1) scripts/kernel.sh --print-kdir) \
	--qemu $(QEMU_BIN) --repo $(CURDIR) --tools-bin $(STATIC_BIN) --modules $(CURDIR)/build/modules-$(1) \
	--out build/vmtest-$(1)

# The distro variant (KVM as modules, NR_CPUS=8192): its own cached tree,
# modules in build/modules-distro, tests/distro/kvm-modules.toml.
test-distro: deps qemu
	$(MAKE) kernel CONFIG=distro
	$(MAKE) modules CONFIG=distro
	$(MAKE) tools
	$(call vmtest-variant,distro) run tests/distro/kvm-modules.toml

# The debug variant (lockdep, sleep-in-atomic and preemption checks,
# KFENCE): its own cached tree, modules in build/modules-debug; the
# scenarios that exercise the lock, its switching, CPU hotplug and the host
# module going, each judged as usual (any WARNING or BUG fails it).
DEBUG_SCENARIOS = pvlock-locktorture pvlock-hotplug pvlock-loadloop host-unload tests/debug/lockdep-on.toml
test-debug: deps qemu
	$(MAKE) kernel CONFIG=debug
	$(MAKE) modules CONFIG=debug
	$(MAKE) tools
	$(call vmtest-variant,debug) run $(DEBUG_SCENARIOS)

# The KASAN variant: the debug variant plus the generic KASAN (every memory
# access checked, Rust included), its own cached tree, modules in
# build/modules-kasan, the debug variant's scenarios.
test-kasan: deps qemu
	$(MAKE) kernel CONFIG=kasan
	$(MAKE) modules CONFIG=kasan
	$(MAKE) tools
	$(call vmtest-variant,kasan) run $(DEBUG_SCENARIOS)

demo: deps kernel qemu
	$(MAKE) modules tools
	$(VMTEST) run demo --summary

# BENCH="--levels 2x --mech early_halt=1 ..." passes options to pvlock-bench.
QUICK ?=
BENCH ?=
bench: qemu modules tools
	$(HOST_BIN)/pvlock-bench --kdir $(KDIR) --qemu $(QEMU_BIN) --repo $(CURDIR) --tools-bin $(STATIC_BIN) $(if $(QUICK),--quick) $(BENCH)

clean:
	-$(KMAKE) clean >/dev/null 2>&1
	rm -rf build

kernel-clean:
	rm -rf "$(KDIR)"

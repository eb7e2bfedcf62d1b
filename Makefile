# SPDX-License-Identifier: GPL-2.0
#
# rrds top-level make targets.
#
#   make [KDIR=<kernel build dir>] build rrds.ko against that kernel (default: the running one's)
#                                  (RRDS_TEST_HOOKS=1: with the selftests' debugfs hooks)
#   make modules_install           install it (INSTALL_MOD_PATH, INSTALL_MOD_DIR as for any module)
#   make tools-install             the rrds command, its man pages and shell completions
#                                  (DESTDIR, PREFIX=/usr/local)
#   make check                     set up, build, lint and run the selftests in a VM
#   make demo                      boot the VM, load rrds on rxe and siw, show what it sees
#   make bench                     rrds against the in-tree rds module over loopback, in a VM
#   make bench-ib                  the same over IB (an rxe pair), with perftest as the ceiling
#   make bench-rdma                RDMA WRITE/READ through RDS against ib_write_bw/ib_read_bw
#   make bench-register            GET_MR + FREE_MR cycles against in-tree's RDMA_MAP + FREE_MR
#   make interop                   rrds in one VM against in-tree RDS/IB in another (also in check)
#   make fuzz                      the fuzzer for RRDS_FUZZ_SECONDS (default 1800) in the VM
#   make distro-module             rrds.ko for Debian's stock kernel, in the cache (scripts/distro-kernel)
#   make check-distro              that rrds.ko on Debian's stock kernel in the VM, with the selftests
#
# KDIR defaults to the running kernel's build tree, as for any out-of-tree
# module; scripts/kdir-check says what it lacks. The developer targets (check,
# demo, bench*, fuzz, interop) use the project's test kernel, which
# scripts/kernel-dir builds on first use: make KDIR=$(scripts/kernel-dir).

include $(dir $(lastword $(MAKEFILE_LIST)))scripts/toolchain.env

# The toolchain scripts/setup installs; harmless when building with your own.
RRDS_CACHE ?= /var/cache/rrds
export PATH := $(RRDS_CACHE)/bin:/usr/lib/llvm-$(RRDS_LLVM_VERSION)/bin:$(HOME)/.cargo/bin:$(PATH)
export LIBCLANG_PATH ?= /usr/lib/llvm-$(RRDS_LLVM_VERSION)/lib
export RUSTUP_TOOLCHAIN ?= $(RRDS_RUST_VERSION)

KDIR ?=
kdir = $(if $(KDIR),$(KDIR),/lib/modules/$(shell uname -r)/build)
# The test kernel, evaluated by the shell in the recipes that need it.
test_kdir = $(if $(KDIR),$(KDIR),$$($(CURDIR)/scripts/kernel-dir))
# As the kernel was built: LLVM=1 for a clang-built kernel, gcc otherwise (Debian's).
LLVM ?= $(if $(shell grep -sx CONFIG_CC_IS_CLANG=y $(kdir)/.config),1,)
RRDS_WERROR ?= 1
export RRDS_WERROR
# The selftests' debugfs hooks (rust/hooks.rs) are built in only with
# RRDS_TEST_HOOKS=1, which the targets that run the selftests pass.
RRDS_TEST_HOOKS ?= 0
export RRDS_TEST_HOOKS

SHELL := /bin/bash
rust_sources = $(filter-out rust/bindings_generated.rs,$(wildcard rust/*.rs rust/*/*.rs rust/*/*/*.rs))
kmake = $(CURDIR)/scripts/kdir-check $(kdir) && $(MAKE) -C $(kdir) M=$(CURDIR) LLVM=$(LLVM)

.PHONY: all modules clean clippy rustfmt rustfmt-check selftests check demo bench bench-ib bench-rdma bench-register bench-xrc bench-scale interop setup fuzz \
	distro-module check-distro modules_install tools-install

all: modules

modules:
	$(kmake) modules

# Into $(INSTALL_MOD_PATH)/lib/modules/<release>/$(INSTALL_MOD_DIR) (kbuild's
# default directory for external modules: updates), then depmod.
modules_install:
	$(kmake) modules_install

PREFIX ?= /usr/local
tools_bin = tools/target/release/rrds

# The rrds command, rrds(1) and rrds-SUBCOMMAND(1), and completions for
# bash, zsh and fish, generated from the command's own definition.
tools-install:
	cd tools && cargo build --release --locked -p rrds-cli
	install -D -m 0755 $(tools_bin) $(DESTDIR)$(PREFIX)/bin/rrds
	$(tools_bin) manpages $(DESTDIR)$(PREFIX)/share/man/man1
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions \
		$(DESTDIR)$(PREFIX)/share/zsh/site-functions \
		$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	$(tools_bin) completions bash >$(DESTDIR)$(PREFIX)/share/bash-completion/completions/rrds
	$(tools_bin) completions zsh >$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_rrds
	$(tools_bin) completions fish >$(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/rrds.fish

clippy:
	$(kmake) CLIPPY=1 modules

rustfmt:
	rustfmt --edition 2021 $(rust_sources)

rustfmt-check:
	rustfmt --check --edition 2021 $(rust_sources)

selftests:
	$(MAKE) -C selftests KDIR=$(test_kdir)

clean:
	rm -f rrds.ko rrds.o rrds.mod rrds.mod.c rrds.mod.o modules.order Module.symvers .*.cmd rust/*.o rust/.*.cmd rust/.*.d
	rm -f rust/bindings_generated.rs rust/.bindings_generated.rs.cmd rust/.bindings_generated.rs.d
	$(MAKE) -C selftests clean

setup:
	scripts/setup

# Built from a copy of the sources with the toolchain of Debian's kernel; the
# checkout's rrds.ko stays the test kernel's. Prints the module's path.
distro-module:
	scripts/distro-kernel module

check-distro:
	scripts/check-distro

check:
	scripts/check

demo:
	scripts/demo

fuzz:
	scripts/fuzz

bench:
	scripts/bench

bench-ib:
	scripts/bench-ib

bench-rdma:
	RRDS_PERFTEST_TESTS="write_bw read_bw" scripts/bench-ib --mode rdma --size 64k --size 1m \
		--depth 8 --duration 20 --timeout 60 --runs 3 --verify

# No raw-verbs counterpart: perftest does not run.
bench-register:
	RRDS_PERFTEST_RUNS=0 scripts/bench-ib --mode register --size 4k --size 64k --size 1m \
		--duration 5 --timeout 60 --runs 3

bench-xrc:
	scripts/bench-xrc

bench-scale:
	scripts/bench-scale

interop:
	$(MAKE) modules selftests KDIR=$(test_kdir)
	scripts/interop

# Shared settings for the rrds scripts. Sourced, never run.
# shellcheck shell=bash

RRDS_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Everything expensive lives outside the repository, so a fresh clone reuses it.
RRDS_CACHE=${RRDS_CACHE:-/var/cache/rrds}

# Toolchain and kernel pins, shared with the Makefile.
. "$RRDS_TOP/scripts/toolchain.env"

export RUSTUP_TOOLCHAIN=$RRDS_RUST_VERSION
export LIBCLANG_PATH=/usr/lib/llvm-$RRDS_LLVM_VERSION/lib
export PATH=$RRDS_CACHE/bin:/usr/lib/llvm-$RRDS_LLVM_VERSION/bin:$HOME/.cargo/bin:$PATH

die() {
	echo "rrds: error: $*" >&2
	exit 1
}

# The calling script's header: its comment block after the shebang.
rrds_usage() {
	awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
}

# A mistake on the command line: what is wrong and the usage on stderr, exit
# status 2. Scripts check their arguments before they start their work.
usage_error() {
	echo "${0##*/}: $*" >&2
	rrds_usage >&2
	exit 2
}

# no_options ARG...: refuse any argument that looks like an option, for a
# script whose arguments are operands (program names, counts).
no_options() {
	local a
	for a; do
		case $a in -*) usage_error "unknown option $a" ;; esac
	done
}

# no_arguments ARG...: refuse any argument, for a script that takes none.
no_arguments() {
	no_options "$@"
	[ $# = 0 ] || usage_error "unexpected argument $1 (it takes none)"
}

# -h/--help as the first argument prints the header and does nothing else,
# before the script starts its work (common.sh is sourced at the top).
case "${1:-}" in
-h | --help)
	rrds_usage
	exit 0
	;;
esac

note() {
	echo "rrds: $*" >&2
}

# Kernel log lines that are splats (scripts/vm-run fails a run on any), and
# the lines that match but are not.
RRDS_SPLAT_RE='WARNING:|(^|[^A-Z_])BUG[: ]|Oops|Kernel panic|general protection fault|'
RRDS_SPLAT_RE+='possible (recursive|circular|irq lock inversion)|inconsistent lock state|lockdep is turned off|'
RRDS_SPLAT_RE+='trying to register non-static key|DEBUG_LOCKS_WARN_ON|bad unlock balance|held lock freed|'
RRDS_SPLAT_RE+='suspicious RCU usage|'
RRDS_SPLAT_RE+='rcu: INFO|detected stall|sleeping function called from invalid context|'
RRDS_SPLAT_RE+='blocked for more than|KASAN|UBSAN|ODEBUG|list_(add|del) corruption|'
RRDS_SPLAT_RE+='unreferenced object|refcount_t:|rust_kernel: panicked'
RRDS_SPLAT_NOT_RE='KernelAddressSanitizer initialized|kmemleak: Kernel memory leak detector'

# check_bench_options GUEST_OPTION... -- ARG...: ARG, the `rrds bench`
# options scripts/bench and scripts/bench-ib hand to the guest, checked
# before any work (else a mistake shows only after a kernel build and a
# boot). Each must be an option of `rrds bench`
# (tools/rrds-cli/src/cmd/bench/mod.rs, long or rds-stress's short form),
# given once (but --size and --rdma-size) and with
# its value, as --opt VALUE or --opt=VALUE; --mode, --transport and --size
# values are checked too. Refused: the guest's own options (GUEST_OPTION...,
# which it always gives) and --server, --port and --connect (the guest runs
# both ends).
check_bench_options() {
	local own=" " seen=" " arg name value
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		own+="$1 "
		shift
	done
	shift
	while [ $# -gt 0 ]; do
		arg=$1
		shift
		case $arg in
		-h | --help) usage_error "$arg goes first" ;;
		--*=*) name=${arg%%=*} value=${arg#*=} ;;
		--*) name=$arg value= ;;
		# rds-stress's short forms, as rrds bench takes them (-q8k: value attached).
		-[rqDaTdtv]*)
			case ${arg:1:1} in
			r) name=--addr ;; q) name=--size ;; D) name=--rdma-size ;; a) name=--ack-size ;;
			T) name=--duration ;; d) name=--depth ;; t) name=--tasks ;; v) name=--verify ;;
			esac
			value=${arg:2}
			[ -z "$value" ] || arg=$name=$value
			[ -n "$value" ] || arg=$name
			;;
		-*) usage_error "unknown option $arg" ;;
		*) usage_error "unexpected argument $arg (rrds bench options only)" ;;
		esac
		case $own in *" $name "*) usage_error "$name: the guest gives it itself" ;; esac
		case $name in --server | --port | --connect) usage_error "$name: the guest runs both ends" ;; esac
		case $name in
		--verify | --histogram | --json)
			[ "$arg" = "$name" ] || usage_error "$name takes no value"
			;;
		--addr | --peer-addr | --peer-netns | --transport | --size | --rdma-size | --ack-size | \
			--duration | --runs | --mode | --depth | --tasks | --seed | --timeout | --plot | --interval)
			if [ "$arg" = "$name" ]; then
				[ $# -gt 0 ] && [[ $1 != -* ]] || usage_error "$name needs a value"
				value=$1
				shift
			fi
			;;
		*) usage_error "unknown option $name" ;;
		esac
		case $name=$value in
		--mode=rate | --mode=latency | --mode=both | --mode=rdma-write | --mode=rdma-read | \
			--mode=rdma | --mode=register) ;;
		--mode=*) usage_error "--mode $value: want rate, latency, both, rdma-write, rdma-read, rdma or register" ;;
		--transport=ib | --transport=loop | --transport=default) ;;
		--transport=*) usage_error "--transport $value: want ib, loop or default" ;;
		--size=* | --rdma-size=* | --ack-size=*)
			[[ $value =~ ^\+?[0-9]+[kKmM]?$ ]] || usage_error "$name $value: not a size (e.g. 64, 8k, 1m)"
			;;
		esac
		case $seen in *" $name "*) [ "$name" = --size ] || [ "$name" = --rdma-size ] ||
			usage_error "$name given twice" ;; esac
		seen+="$name "
	done
}

# bench_module OUT: pick the kernel a benchmark boots and build rrds.ko for
# it. That is the benchmark kernel unless RRDS_KERNEL says otherwise
# (exported, so vm-run boots the same one). Sets bench_kdir (its build
# directory) and bench_ko (the module). rrds.ko in the checkout stays the
# test kernel's: the benchmark kernel's build is made from a copy of the
# module's sources (committed or not) in OUT/module.
# It also exports RRDS_VM_ICOUNT (vm-run): by default the guest's clock
# counts its instructions, one per ns, so that figures from one boot are
# those of the next (host-time runs moved ratios by 2x between boots);
# RRDS_VM_ICOUNT= (empty) runs in host time.
bench_module() {
	local out=$1 dst
	export RRDS_KERNEL=${RRDS_KERNEL:-bench}
	export RRDS_VM_ICOUNT=${RRDS_VM_ICOUNT-shift=0,sleep=off}
	bench_kdir=$("$RRDS_TOP/scripts/kernel-dir")
	if [ "$RRDS_KERNEL" = test ]; then
		make --no-print-directory -C "$RRDS_TOP" modules KDIR="$bench_kdir" >/dev/null
		bench_ko=$RRDS_TOP/rrds.ko
		return
	fi
	dst=$out/module
	mkdir -p "$dst"
	(cd "$RRDS_TOP" && git ls-files -z --cached --others --exclude-standard -- \
		Makefile Kbuild rust include scripts/toolchain.env scripts/kdir-check |
		tar --null -T - -cf -) | tar -xf - -C "$dst"
	make --no-print-directory -C "$dst" modules KDIR="$bench_kdir" >/dev/null
	bench_ko=$dst/rrds.ko
}

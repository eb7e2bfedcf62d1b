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
RRDS_SPLAT_RE+='unreferenced object|refcount_t:|rust_kernel: panicked|'
# A KUnit case of the module failed as it loaded.
RRDS_SPLAT_RE+='(ASSERTION|EXPECTATION) FAILED at'
RRDS_SPLAT_NOT_RE='KernelAddressSanitizer initialized|kmemleak: Kernel memory leak detector'

# without_known_driver_reports LOG KNOWN: LOG (a kernel log) without two
# reports of drivers' own defects, not rrds's (Documentation/testing.rst,
# "Kernel log"); each dropped report's first line is added to KNOWN.
#
# siw's lock order: a lockdep "SOFTIRQ-safe -> SOFTIRQ-unsafe" report, up
# to its stack backtrace, when the unsafe acquisition is one of siw's socket
# callbacks (siw_qp_llp_data_ready, siw_cm_llp_data_ready,
# siw_cm_llp_state_change) taking sk_callback_lock with a plain read_lock,
# softirqs on. Lockdep turns itself off after that report, so once one is
# dropped, so is the "INFO: lockdep is turned off." that a later lock dump
# (sysrq d) prints: any other lockdep report had to come before it, and is
# counted.
#
# rxe's receive race: the WARNING in rxe_sched_task (rxe_task.c) that a
# QP's count is 0, up to its end-of-trace line, when the trace is rxe's
# packet receive path (rxe_udp_encap_recv, rxe_loopback): a packet for a QP
# being destroyed. On the test kernel KASAN still reports any use of the
# freed QP.
without_known_driver_reports() {
	awk -v known="$2" '
	function keep(dropped_it) {
		if (!dropped_it) for (i = 1; i <= n; i++) print buf[i]
		else print FILENAME ": " buf[1] >>known
	}
	/WARNING: SOFTIRQ-safe -> SOFTIRQ-unsafe lock order detected/ { inblk = 1; n = 0; siw = 0 }
	inblk == 1 {
		buf[++n] = $0
		if ($0 ~ /siw_(qp_llp_data_ready|cm_llp_data_ready|cm_llp_state_change)/) siw = 1
		if ($0 ~ /stack backtrace:/) {
			keep(siw)
			dropped = dropped || siw
			inblk = 0
		}
		next
	}
	/WARNING: drivers\/infiniband\/sw\/rxe\/rxe_task\.c:[0-9]+ at rxe_sched_task/ { inblk = 2; n = 0; rx = 0 }
	inblk == 2 {
		buf[++n] = $0
		if ($0 ~ /rxe_udp_encap_recv|rxe_loopback/) rx = 1
		if ($0 ~ /---\[ end trace/ || n > 120) {
			keep(rx && n <= 120)
			inblk = 0
		}
		next
	}
	dropped && /INFO: lockdep is turned off\./ { next }
	{ print }
	END { if (inblk) for (i = 1; i <= n; i++) print buf[i] }' "$1"
}

# check_bench_options GUEST_OPTION... -- ARG...: ARG, the `rrds bench`
# options scripts/bench and scripts/bench-ib hand to the guest, checked
# before any work (else a mistake shows only after a kernel build and a
# boot). The options are those scripts/bench-options.txt lists, written
# from rrds bench's own definition by a unit test that fails when they
# differ: each given as its long or rds-stress's short form, once (but
# those listed `many`), with its value as --opt VALUE, --opt=VALUE or
# -oVALUE, one of the listed values where the option has a list. Refused:
# the guest's own options (GUEST_OPTION..., which it always gives) and
# --server, --port, --connect and --dry-run (the guest runs both ends).
# What needs the program (a size's format, options that cannot go
# together) bench_dry_run checks once the tools are built.
check_bench_options() {
	local own=" " seen=" " arg name value long short kind times values
	local -A short_of kind_of times_of values_of long_of
	while read -r long short kind times values; do
		[[ $long == --* ]] || continue
		kind_of[$long]=$kind times_of[$long]=$times values_of[$long]=$values
		[ "$short" = - ] || long_of[$short]=$long
	done <"$RRDS_TOP/scripts/bench-options.txt"
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
		-?*)
			# A short form, its value attached or not (-q8k, -q 8k).
			name=${long_of[${arg:0:2}]:-}
			[ -n "$name" ] || usage_error "unknown option $arg"
			value=${arg:2}
			if [ -n "$value" ]; then arg=$name=$value; else arg=$name; fi
			;;
		*) usage_error "unexpected argument $arg (rrds bench options only)" ;;
		esac
		[ -n "${kind_of[$name]:-}" ] || usage_error "unknown option $name"
		case $own in *" $name "*) usage_error "$name: the guest gives it itself" ;; esac
		case $name in --server | --port | --connect | --dry-run)
			usage_error "$name: the guest runs both ends" ;;
		esac
		if [ "${kind_of[$name]}" = flag ]; then
			[ "$arg" = "$name" ] || usage_error "$name takes no value"
		elif [ "$arg" = "$name" ]; then
			[ $# -gt 0 ] && [[ $1 != -* ]] || usage_error "$name needs a value"
			value=$1
			shift
		fi
		values=${values_of[$name]}
		if [ -n "$values" ] && [[ " $values " != *" $value "* ]]; then
			usage_error "$name $value: want one of ${values// /, }"
		fi
		if [ "${times_of[$name]}" = once ] && [[ $seen == *" $name "* ]]; then
			usage_error "$name given twice"
		fi
		seen+="$name "
	done
}

# bench_dry_run GUEST_OPTION... -- ARG...: the rest of the check, by
# `rrds bench --dry-run` itself with the guest's options added (tools
# built): a bad size, options that do not go together. Exit 2 with its
# message and the usage.
bench_dry_run() {
	local guest=() out
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		guest+=("$1")
		shift
	done
	shift
	out=$("$RRDS_TOP/tools/target/release/rrds" bench --dry-run "${guest[@]}" "$@" 2>&1 >/dev/null) ||
		usage_error "rrds bench refuses the options: ${out#rrds: }"
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

# plot_bench OUT: rrds's and in-tree RDS's first round (OUT/rrds-1.json,
# OUT/rds-1.json) in one chart, OUT/plot.svg, by `rrds plot`; the legend
# names the files. Documentation/bench-ib.svg is this chart of the boot
# testing.rst's figures come from.
plot_bench() {
	local out=$1 files=() impl
	for impl in rrds rds; do
		[ ! -s "$out/$impl-1.json" ] || files+=("$impl-1.json")
	done
	[ ${#files[@]} -gt 0 ] || return 0
	(cd "$out" && "$RRDS_TOP/tools/target/release/rrds" plot -o plot.svg "${files[@]}") ||
		note "no plot: rrds plot failed"
}

# --- for the benchmarks' guest scripts (scripts/guest/bench-*-guest) ---

# loaded MODULE: whether MODULE is loaded.
loaded() {
	[ -d "/sys/module/$1" ]
}

# unload MODULE...: rmmod each, retried for about 10 s: a module stays busy
# until the connections of its last sockets are torn down.
unload() {
	local module i
	for module in "$@"; do
		loaded "$module" || continue
		for i in $(seq 1 50); do
			rmmod "$module" 2>/dev/null && break
			sleep 0.2
		done
		loaded "$module" && rmmod "$module"
	done
	return 0
}

# wait_port_active DEV: waits (10 s at most) for port 1 of DEV to be ACTIVE.
wait_port_active() {
	local i
	for i in $(seq 1 100); do
		rdma link show "$1/1" 2>/dev/null | grep -q "state ACTIVE" && return 0
		sleep 0.1
	done
	echo "${0##*/}: $1 port did not become ACTIVE" >&2
	rdma link show >&2
	return 1
}

# gid_index DEV ADDR: the index of DEV's GID for IPv4 ADDR (::ffff:ADDR).
# perftest would take index 0, the MAC-derived IPv6 link-local GID; the IPv4
# one routes like RDS's traffic. ib_core fills the table from the netdev's
# addresses in a work item, so it may lag behind ACTIVE.
gid_index() {
	local dev=$1 o1 o2 o3 o4 want i f gid
	IFS=. read -r o1 o2 o3 o4 <<<"$2"
	printf -v want '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$o1" "$o2" "$o3" "$o4"
	for i in $(seq 1 100); do
		for f in /sys/class/infiniband/"$dev"/ports/1/gids/*; do
			read -r gid <"$f" 2>/dev/null || continue
			if [ "$gid" = "$want" ]; then
				echo "${f##*/}"
				return 0
			fi
		done
		sleep 0.1
	done
	echo "${0##*/}: $dev has no GID for $2" >&2
	return 1
}

# listening PORT: whether a TCP socket listens on PORT (perftest's
# handshake). Read from /proc: a test connection would be taken for the
# client.
listening() {
	local hex f local_addr rest st
	printf -v hex ':%04X' "$1"
	for f in /proc/net/tcp /proc/net/tcp6; do
		[ -r "$f" ] || continue
		# sl local_address rem_address st ...; st 0A is LISTEN.
		while read -r _ local_addr rest; do
			st=${rest#* }
			st=${st%% *}
			if [ "$st" = 0A ] && [ "${local_addr: -5}" = "$hex" ]; then
				return 0
			fi
		done <"$f"
	done
	return 1
}

# perf_profile_reports DATA OUT: where the CPU went in perf record -g's DATA,
# symbols from this kernel's kallsyms: OUT.perf.txt (time in each function),
# OUT.perf-comm.txt (in each task and function, so idle stays apart),
# OUT.perf-children.txt (time with callees) and OUT.perf-callers.txt (the
# call chains of the functions above 5 %).
perf_profile_reports() {
	perf report -i "$1" --kallsyms /proc/kallsyms --no-children --sort sym \
		--percent-limit 5 --stdio -g caller,1,callee,function,percent >"$2.perf-callers.txt" 2>&1
	perf report -i "$1" --kallsyms /proc/kallsyms --no-children --sort sym \
		--percent-limit 0.5 --stdio -g none >"$2.perf.txt" 2>&1
	perf report -i "$1" --kallsyms /proc/kallsyms --no-children --sort comm,sym \
		--percent-limit 0.1 --stdio -g none >"$2.perf-comm.txt" 2>&1
	perf report -i "$1" --kallsyms /proc/kallsyms --children --sort sym \
		--percent-limit 2 --stdio -g none >"$2.perf-children.txt" 2>&1
}

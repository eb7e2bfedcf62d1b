#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Run the rrds selftests; meant for the test VM (scripts/vm-run), never the host:
# the tests load and unload modules and create RDMA devices.
#
#   run_tests.sh [TEST...]      default: every program in build/ but those
#                               named in $RRDS_SKIP_TESTS (space-separated)
#
# $RRDS_SKIP_CASES (space-separated PROGRAM:CASE, CASE a test's name without
# fixture or variant) leaves those cases out: make check's second pass on
# four vCPUs skips the soaks that its first pass already ran.
#
# Prints each program's TAP output and, last, "N passed, N failed". Per-case
# counts are also written to $RRDS_RESULTS (one "name result" line per case,
# each name after $RRDS_RESULT_PREFIX: a second pass on more vCPUs).
# A program gets $RRDS_PROGRAM_TIMEOUT seconds (default 1500) before it is
# stopped; make fuzz raises it for its long runs.
#
# $RRDS_DEADLINE (seconds since the epoch) with $RRDS_ESTIMATES
# ("PROGRAM:SECONDS ...", each program's time in a reference run) leaves out
# a program that would not end by then: its estimate, scaled by how long the
# programs before it took against theirs (never below 1), is compared with
# the time left. It is reported skipped, as PROGRAM(left-out-for-time):
# make check must end within CI's limit on a slower host too.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)

if [ "${RRDS_IN_VM:-}" != 1 ] && [ "${1:-}" != --force ]; then
	echo "run_tests.sh: refusing to run outside the test VM (use scripts/vm-run or --force)" >&2
	exit 2
fi
[ "${1:-}" != --force ] || shift

# RRDS_KO: the module under test (make check-distro names the stock kernel's).
export RRDS_KO=${RRDS_KO:-$top/rrds.ko} RRDS_SELFTESTS=$here
results=${RRDS_RESULTS:-/dev/null}
prefix=${RRDS_RESULT_PREFIX:-}
[ -f "$RRDS_KO" ] || { echo "run_tests.sh: $RRDS_KO not built" >&2; exit 2; }

# Whether a program's source brings up an RDMA device pair.
uses_devices() {
	grep -qE '(fixture|pair_up_loaded)\(' "$here/$1.c" 2>/dev/null
}

# By default every program in build/, those that use no RDMA device first:
# the device pairs, once up, stay up from one program to the next (fixtures.sh
# tidy), and loading rrds with devices present costs seconds per device.
tests=("$@")
if [ ${#tests[@]} = 0 ]; then
	with_devices=()
	for t in "$here"/build/*_test; do
		t=$(basename "$t")
		case " ${RRDS_SKIP_TESTS:-} " in *" $t "*) continue ;; esac
		if uses_devices "$t"; then with_devices+=("$t"); else tests+=("$t"); fi
	done
	tests+=("${with_devices[@]}")
fi

# Seconds since $1 (an $EPOCHREALTIME), to a tenth, by shell arithmetic: bc
# would be a process per case.
seconds_since() {
	local tenths=$(((${EPOCHREALTIME/./} - ${1/./}) / 100000))
	echo "$((tenths / 10)).$((tenths % 10))"
}

# Copies the program's output to FILE and, indented, to stdout, adding after
# each case's TAP line how long the case took ("# time PROGRAM.CASE SECONDS"):
# the suite has to fit CI's time limit, and these lines show where it goes.
timed_cases() { # program file
	local line case_start=$EPOCHREALTIME
	while IFS= read -r line; do
		printf '%s\n' "$line" >>"$2"
		printf '# %s\n' "$line"
		case $line in
		"#  RUN "*)
			case_start=$EPOCHREALTIME
			# For vm-run: the case a later splat in the kernel log came from.
			local started=${line#\#  RUN }
			started=${started#"${started%%[! ]*}"}
			echo "rrds-selftests: start $1.${started%% *}" 2>/dev/null >/dev/kmsg
			;;
		"ok "* | "not ok "*)
			local name=${line#not }
			name=${name#ok * }
			name=${name%% *}
			printf '# time %s.%s %s\n' "$1" "$name" "$(seconds_since "$case_start")"
			;;
		esac
	done
}

# The reference seconds of program $1 in $RRDS_ESTIMATES, or nothing.
estimate_of() {
	local e
	for e in ${RRDS_ESTIMATES:-}; do
		[ "${e%%:*}" != "$1" ] || { echo "${e#*:}"; return; }
	done
}

# Whether program $1, estimated at $2 seconds (may be empty), fits before
# $RRDS_DEADLINE; says why not.
fits_deadline() {
	local est=$2 need left scale=100
	[ -n "${RRDS_DEADLINE:-}" ] && [ -n "$est" ] || return 0
	[ "$reference_done" = 0 ] || scale=$((spent_done * 100 / reference_done))
	[ "$scale" -ge 100 ] || scale=100
	need=$((est * scale / 100))
	left=$((RRDS_DEADLINE - $(date +%s)))
	[ "$need" -gt "$left" ] || return 0
	echo "# $1 left out: about $need s needed, $left s left before the deadline"
	return 1
}

passed=0
failed=0
skipped=0
program_failed=0
reference_done=0
spent_done=0
echo "TAP version 13"
echo "1..${#tests[@]}"
n=0
for t in "${tests[@]}"; do
	n=$((n + 1))
	estimate=$(estimate_of "$t")
	if ! fits_deadline "$t" "$estimate"; then
		echo "$prefix$t(left-out-for-time) skip" >>"$results"
		skipped=$((skipped + 1))
		echo "ok $n selftests: rrds: $t # SKIP left out for time"
		continue
	fi
	out=$(mktemp)
	start=$EPOCHREALTIME
	excluded=()
	for c in ${RRDS_SKIP_CASES:-}; do
		[ "${c%%:*}" != "$t" ] || excluded+=(-T "${c#*:}")
	done
	(cd "$here" && timeout "${RRDS_PROGRAM_TIMEOUT:-1500}" "$here/build/$t" "${excluded[@]}") 2>&1 |
		timed_cases "$t" "$out"
	rc=${PIPESTATUS[0]}
	secs=$(seconds_since "$start")
	if [ -n "$estimate" ]; then
		reference_done=$((reference_done + estimate))
		spent_done=$((spent_done + ${secs%.*}))
	fi
	# Per-case results from the harness's own TAP lines.
	awk '/^(not )?ok [0-9]+ / {
		verdict = ($1 == "not") ? "not_ok" : (/# SKIP/ ? "skip" : "ok")
		print verdict, ($1 == "not") ? $4 : $3 }' "$out" >"$out.cases"
	while read -r verdict name; do
		echo "$prefix$t.$name $verdict" >>"$results"
		case $verdict in
		ok) passed=$((passed + 1)) ;;
		skip) skipped=$((skipped + 1)) ;;
		*) failed=$((failed + 1)) ;;
		esac
	done <"$out.cases"
	# A failed case's own lines, for the summary's end (CI keeps only the tail
	# of the output): the harness's failed checks with the line after each
	# (the case's reason), which diagnostics printed later would push out,
	# then its last 40 lines.
	awk -v prog="$prefix$t" '/^#  RUN / { n = 0; nwhy = 0; after = 0 }
		after { why[nwhy++] = $0; after = 0 }
		/:Expected / && nwhy < 12 { why[nwhy++] = $0; after = 1 }
		{ buf[n++ % 40] = $0 }
		/^not ok [0-9]+ / {
			print "== " prog "." $4
			for (i = 0; i < nwhy; i++) print "  why: " why[i]
			for (i = (n > 40 ? n - 40 : 0); i < n; i++) print "  " buf[i % 40]
		}' "$out" >>"${RRDS_FAILURES:-/dev/null}"
	if [ ! -s "$out.cases" ] || ! grep -qE '^# Totals: ' "$out"; then
		# Crashed or hung before the harness could report.
		echo "$prefix$t.harness not_ok" >>"$results"
		failed=$((failed + 1))
		rc=1
	fi
	if [ "$rc" = 0 ]; then
		echo "ok $n selftests: rrds: $t # ${secs%.*} s"
	else
		echo "not ok $n selftests: rrds: $t # exit=$rc"
		program_failed=1
	fi
	rm -f "$out" "$out.cases"
	# The VM caches the work tree: the results reach the host now, not at
	# the end of a run that may be stopped.
	sync
	# The next program starts without rrds, and with at most the device pairs.
	rmmod rrds 2>/dev/null
	"$here/fixtures.sh" tidy
done
"$here/fixtures.sh" all-down
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ] && [ "$program_failed" = 0 ]

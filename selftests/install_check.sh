#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rrds installed as a real module, checked in the VM on the kernel it was
# installed for (make check-distro boots Debian's with the module tree that
# `make modules_install` and depmod produced bound at /lib/modules):
#
#   1. modprobe rrds loads the installed module, with ib_core and rdma_cm,
#      and modprobe -r removes it;
#   2. with packaging/modprobe-rrds.conf in /etc/modprobe.d, opening an
#      AF_RDS socket autoloads rrds and not the in-tree rds module.
#
# Prints TAP; one "NAME ok|not_ok" line per check goes to $RRDS_RESULTS.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
results=${RRDS_RESULTS:-/dev/null}
prefix=${RRDS_RESULT_PREFIX:-}

if [ "${RRDS_IN_VM:-}" != 1 ]; then
	echo "install_check.sh: refusing to run outside the test VM" >&2
	exit 2
fi

failed=0
n=0
echo "TAP version 13"
echo "1..2"
verdict() { # name rc
	n=$((n + 1))
	if [ "$2" = 0 ]; then
		echo "ok $n $1"
		echo "${prefix}install.$1 ok" >>"$results"
	else
		echo "not ok $n $1"
		echo "${prefix}install.$1 not_ok" >>"$results"
		failed=$((failed + 1))
	fi
}
loaded() { [ -d "/sys/module/$1" ]; }

modprobe_loads_installed_module() {
	local path
	path=$(modinfo -n rrds) || { echo "# modinfo finds no rrds"; return 1; }
	echo "# modinfo -n rrds: $path"
	case $path in */updates/*) ;; *) echo "# not where modules_install puts it"; return 1 ;; esac
	loaded rrds && { echo "# rrds loaded already"; return 1; }
	modprobe rrds || return 1
	loaded rrds && loaded rdma_cm || { echo "# rrds or rdma_cm not loaded"; return 1; }
	[ -d /sys/kernel/debug/rrds ] || { echo "# no debugfs directory"; return 1; }
	modprobe -r rrds && ! loaded rrds
}

af_rds_autoloads_rrds() {
	local conf=/etc/modprobe.d rc=0
	# /etc is the host's, read-only: the configuration on a tmpfs over it.
	mkdir -p /tmp/modprobe.d
	cp -a "$conf"/. /tmp/modprobe.d/ 2>/dev/null
	cp "$top/packaging/modprobe-rrds.conf" /tmp/modprobe.d/rrds.conf
	mount --bind /tmp/modprobe.d "$conf" || return 1
	rmmod rds_rdma rds_tcp rds 2>/dev/null
	if python3 -c 'import socket; socket.socket(socket.AF_RDS, socket.SOCK_SEQPACKET).close()'; then
		loaded rrds || { echo "# the socket opened but rrds is not loaded"; rc=1; }
		loaded rds && { echo "# the in-tree rds module was loaded"; rc=1; }
	else
		echo "# socket(AF_RDS) failed"
		rc=1
	fi
	umount "$conf"
	rmmod rrds 2>/dev/null
	return $rc
}

modprobe_loads_installed_module
verdict modprobe_loads_installed_module $?
af_rds_autoloads_rrds
verdict af_rds_autoloads_rrds $?
echo "# $((n - failed)) passed, $failed failed"
[ $failed = 0 ]

#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Test fixtures shared by every rrds selftest (run inside the VM as root).
#
#   fixtures.sh rxe-up | rxe-down | siw-up | siw-down | all-down | tidy
#
# Both pairs join two network namespaces over veth: one end per namespace.
#
#   namespace rrds-a                      namespace rrds-b
#   rxe_a on veth rxa  10.254.1.1/24  <->  rxe_b on veth rxb  10.254.1.2/24
#   siw_a on veth swa  10.254.2.1/24  <->  siw_b on veth swb  10.254.2.2/24
#
# The addresses exist only inside the test VM, which has no network card.
set -eu

NS_A=rrds-a
NS_B=rrds-b

ns_up() {
	mkdir -p /run/netns
	for ns in $NS_A $NS_B; do
		[ -e /run/netns/$ns ] || ip netns add $ns
		ip -n $ns link set lo up
	done
}

ns_down_if_unused() {
	for ns in $NS_A $NS_B; do
		[ -e /run/netns/$ns ] || continue
		if [ -z "$(ip -n $ns -o link show type veth 2>/dev/null)" ]; then
			ip netns del $ns
		fi
	done
}

# pair_up KIND MODULE PREFIX SUBNET
pair_up() {
	local kind=$1 module=$2 veth=$3 subnet=$4
	# Fast path (every command costs ~0.5 s in the test VM): both ends up already.
	if [ "$(rdma link show 2>/dev/null | grep -cE "^link ${kind}_[ab]/1 state ACTIVE")" = 2 ]; then
		return 0
	fi
	modprobe "$module"
	ns_up
	if ! ip -n $NS_A link show ${veth}a >/dev/null 2>&1; then
		ip link add ${veth}a netns $NS_A type veth peer name ${veth}b netns $NS_B
	fi
	ip -n $NS_A addr replace "$subnet.1/24" dev ${veth}a
	ip -n $NS_B addr replace "$subnet.2/24" dev ${veth}b
	ip -n $NS_A link set ${veth}a up
	ip -n $NS_B link set ${veth}b up
	for end in a b; do
		local ns=$NS_A
		[ $end = a ] || ns=$NS_B
		if ! rdma link show "${kind}_$end/1" >/dev/null 2>&1; then
			ip netns exec $ns rdma link add "${kind}_$end" type "$kind" netdev "$veth$end"
		fi
	done
	wait_port_active "${kind}_a" && wait_port_active "${kind}_b"
}

pair_down() {
	local kind=$1 veth=$2
	for end in a b; do
		if rdma link show "${kind}_$end/1" >/dev/null 2>&1; then
			rdma link del "${kind}_$end"
		fi
	done
	ip -n $NS_A link del ${veth}a 2>/dev/null || true
	ns_down_if_unused
}

wait_port_active() {
	local i
	for i in $(seq 1 100); do
		rdma link show "$1/1" 2>/dev/null | grep -q "state ACTIVE" && return 0
		sleep 0.1
	done
	echo "fixtures: $1 port did not become ACTIVE" >&2
	rdma link show >&2
	return 1
}

# The names of every RDMA device.
rdma_devices() {
	rdma -j link show 2>/dev/null | grep -o '"ifname":"[^"]*"' | cut -d'"' -f4 | sort -u
}

# Between test programs: the pairs stay (creating one costs about 11 s in the
# test VM, removing both about 14 s), anything else a program left goes: other
# RDMA devices, netem on the pairs' veths, allocation-failure injection.
tidy() {
	local dev ns veth attr
	# Allocation failures a killed test left on (rrds_test.h).
	for attr in failslab fail_page_alloc; do
		if [ -w /sys/kernel/debug/$attr/probability ]; then
			echo 0 >/sys/kernel/debug/$attr/probability
		fi
	done
	for dev in $(rdma_devices); do
		case $dev in
		rxe_a | rxe_b | siw_a | siw_b) ;;
		*) rdma link del "$dev" 2>/dev/null || true ;;
		esac
	done
	for ns in $NS_A $NS_B; do
		[ -e /run/netns/$ns ] || continue
		for veth in $(ip netns exec $ns tc qdisc show 2>/dev/null | awk '$2 == "netem" { print $5 }'); do
			ip netns exec $ns tc qdisc del dev "$veth" root 2>/dev/null || true
		done
	done
}

case "${1:-}" in
tidy) tidy ;;
rxe-up) pair_up rxe rdma_rxe rx 10.254.1 ;;
rxe-down) pair_down rxe rx ;;
siw-up) pair_up siw siw sw 10.254.2 ;;
siw-down) pair_down siw sw ;;
all-down)
	# Fast path: nothing left.
	[ -n "$(rdma link show 2>/dev/null)" ] || [ -n "$(ip netns list 2>/dev/null)" ] || exit 0
	pair_down rxe rx
	pair_down siw sw
	# Any other soft device a failed test left behind.
	for dev in $(rdma_devices); do
		rdma link del "$dev" 2>/dev/null || true
	done
	;;
*)
	echo "usage: $0 rxe-up|rxe-down|siw-up|siw-down|all-down|tidy" >&2
	exit 2
	;;
esac

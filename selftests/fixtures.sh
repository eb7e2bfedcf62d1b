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
#
#   fixtures.sh shared-up | shared-down
#
# rxe_a in two namespaces: VLAN 100 of rxa moved to namespace rrds-c
# (10.254.3.1), VLAN 100 of rxb in rrds-b (10.254.3.2). rxe takes frames of a
# VLAN of its netdev as its own, and receives through its UDP tunnel socket of
# the VLAN's namespace: rxe_c, on a veth inside rrds-c, keeps one there.
set -eu

NS_A=rrds-a
NS_B=rrds-b
NS_C=rrds-c

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
	# The shared-device namespace a killed test left (shared-up).
	[ ! -e /run/netns/$NS_C ] || shared_down
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

shared_up() {
	pair_up rxe rdma_rxe rx 10.254.1
	[ -e /run/netns/$NS_C ] || ip netns add $NS_C
	ip -n $NS_C link set lo up
	if ! ip -n $NS_C link show rxa.100 >/dev/null 2>&1; then
		ip -n $NS_A link add link rxa name rxa.100 type vlan id 100
		ip -n $NS_A link set rxa.100 netns $NS_C
	fi
	if ! ip -n $NS_B link show rxb.100 >/dev/null 2>&1; then
		ip -n $NS_B link add link rxb name rxb.100 type vlan id 100
	fi
	ip -n $NS_C addr replace 10.254.3.1/24 dev rxa.100
	ip -n $NS_B addr replace 10.254.3.2/24 dev rxb.100
	ip -n $NS_C link set rxa.100 up
	ip -n $NS_B link set rxb.100 up
	if ! ip -n $NS_C link show rxc >/dev/null 2>&1; then
		ip -n $NS_C link add rxc type veth peer name rxd
	fi
	ip -n $NS_C link set rxc up
	ip -n $NS_C link set rxd up
	if ! rdma link show rxe_c/1 >/dev/null 2>&1; then
		ip netns exec $NS_C rdma link add rxe_c type rxe netdev rxc
	fi
	wait_port_active rxe_c
}

shared_down() {
	if rdma link show rxe_c/1 >/dev/null 2>&1; then
		rdma link del rxe_c
	fi
	ip -n $NS_B link del rxb.100 2>/dev/null || true
	[ ! -e /run/netns/$NS_C ] || ip netns del $NS_C
}

case "${1:-}" in
tidy) tidy ;;
shared-up) shared_up ;;
shared-down) shared_down ;;
rxe-up) pair_up rxe rdma_rxe rx 10.254.1 ;;
rxe-down) pair_down rxe rx ;;
siw-up) pair_up siw siw sw 10.254.2 ;;
siw-down) pair_down siw sw ;;
all-down)
	# Fast path: nothing left.
	[ -n "$(rdma link show 2>/dev/null)" ] || [ -n "$(ip netns list 2>/dev/null)" ] || exit 0
	shared_down
	pair_down rxe rx
	pair_down siw sw
	# Any other soft device a failed test left behind.
	for dev in $(rdma_devices); do
		rdma link del "$dev" 2>/dev/null || true
	done
	;;
*)
	echo "usage: $0 rxe-up|rxe-down|siw-up|siw-down|shared-up|shared-down|all-down|tidy" >&2
	exit 2
	;;
esac

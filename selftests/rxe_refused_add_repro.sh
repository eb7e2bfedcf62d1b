#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# rxe on its own, no rrds: an `rdma link add` that rxe refuses after
# rxe_net_init() keeps a reference on the namespace's RoCE UDP tunnel
# sockets, so they outlive the namespace's last rxe device and, once two
# such references pile up, the namespace itself (Documentation/testing.rst).
# Run on demand as root in the test VM, with rrds unloaded or not:
#
#   rxe_refused_add_repro.sh [ROUNDS]
#
# Each round makes a namespace with two veths, adds rxe_repro on the first
# (which creates the tunnel sockets), asks twice for another rxe_repro on
# the second (refused: the name is taken), deletes rxe_repro, and then
# looks for a socket on UDP port 4791 in the namespace: with no rxe device
# left there must be none. Exits 1 if one is left.
set -u
rounds=${1:-3}
ns=rxe-repro
roce_port=12B7 # 4791, as /proc/net/udp prints it

# The reference counts of the namespace's sockets on port 4791, if any.
tunnel_refs() {
	ip netns exec $ns cat /proc/net/udp /proc/net/udp6 |
		awk -v port=":$roce_port" 'index($2, port) { printf "%s ", $(NF - 2) }'
}

modprobe rdma_rxe || exit 2
left=0
for r in $(seq 1 "$rounds"); do
	ip netns add $ns || exit 2
	for i in 0 1; do
		ip -n $ns link add v$i type veth peer name w$i || exit 2
		ip -n $ns link set v$i up
	done
	ip netns exec $ns rdma link add rxe_repro type rxe netdev v0 || exit 2
	before=$(tunnel_refs)
	for _ in 1 2; do
		if ip netns exec $ns rdma link add rxe_repro type rxe netdev v1 2>/dev/null; then
			echo "round $r: a second rxe_repro was added" >&2
			exit 2
		fi
	done
	refused=$(tunnel_refs)
	rdma link del rxe_repro || exit 2
	after=$(tunnel_refs)
	echo "round $r: tunnel socket references: one device ${before:-none}," \
		"after two refused adds ${refused:-none}, no device ${after:-none}"
	[ -z "$after" ] || left=$((left + 1))
	ip netns del $ns
done
echo "rounds $rounds: $left left a tunnel socket behind"
[ "$left" = 0 ]

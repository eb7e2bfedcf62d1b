#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The in-tree side of the interop test, run in its own VM by scripts/interop:
# in-tree RDS/IB over an rxe device on eth0, answering interop_check (in the
# rrds VM) until STOP_FILE exists.
#
#   interop_peer.sh STOP_FILE
set -eu
here=$(cd "$(dirname "$0")" && pwd)
modprobe rdma_rxe
modprobe rds_rdma
ip link set lo up
ip link set eth0 mtu 1500 up
ip addr add 10.99.0.1/24 dev eth0
ip addr add fd00:99::1/64 dev eth0 nodad
rdma link add rxe0 type rxe netdev eth0
rc=0
timeout 800 "$here/build/interop_peer" "$1" || rc=$?
# Retries and sequence errors of the link: packets lost between the VMs.
rdma statistic show link rxe0/1 | tr ' ' '\n' | paste -sd' ' | sed 's/^/interop-peer: rxe0 /'
exit $rc

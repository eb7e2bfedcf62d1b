#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# siw on its own, no rrds: an endpoint that siw accepted for a new TCP
# connection is never freed if the connection closes, or its MPA timer
# fires, before an MPA request arrived: the reference it was created with
# is dropped only by an IWCM accept or reject, and no IWCM id exists yet
# (Documentation/testing.rst). Any TCP client can do this to a siw
# listener, one endpoint and three work items (1.3 KiB) per connection.
# Run on demand as root in the test VM after `fixtures.sh siw-up`:
#
#   siw_mpa_close_repro.sh [CONNECTIONS]
#
# Listens with rping in rrds-a, then from rrds-b opens CONNECTIONS plain
# TCP connections to it, each closed 0.3 s after connect() (siw has
# accepted it by then), and CONNECTIONS more left open until siw's MPA
# timer (5 s) releases them. Counts siw's endpoints as kmalloc-512 objects
# in use before and after, with the listener gone; exits 1 if at least
# half of the connections left an object behind, 2 if a connection failed.
set -u
conns=${1:-100}
addr=10.254.2.1
port=7179

# Shrinking the cache flushes its per-CPU slabs and KASAN's quarantine of
# it, so that every object counted as in use is in use.
slab_in_use() {
	echo 1 >/sys/kernel/slab/kmalloc-512/shrink
	awk '$1 == "kmalloc-512" { print $2 }' /proc/slabinfo
}

# A TCP connection from rrds-b, closed after $1 seconds.
tcp_touch() {
	ip netns exec rrds-b bash -c "exec 3<>/dev/tcp/$addr/$port && sleep $1 && exec 3>&-" \
		2>/dev/null
}

[ -e /run/netns/rrds-a ] || { echo "run fixtures.sh siw-up first" >&2; exit 2; }
before=$(slab_in_use)
ip netns exec rrds-a rping -s -a $addr -p $port >/dev/null 2>&1 &
server=$!
sleep 1
refused=0
for _ in $(seq 1 "$conns"); do
	tcp_touch 0.3 || refused=$((refused + 1))
done
idle=()
for _ in $(seq 1 "$conns"); do
	tcp_touch 8 &
	idle+=($!)
done
for pid in "${idle[@]}"; do
	wait "$pid" || refused=$((refused + 1))
done
sleep 8
kill $server
wait $server 2>/dev/null
sleep 2
after=$(slab_in_use)
left=$((after - before))
echo "kmalloc-512 in use: $before before, $after after; $((2 * conns)) connections"
# A connection that never reached siw cannot leak: no verdict without them.
if [ "$refused" != 0 ]; then
	echo "$refused of $((2 * conns)) connections failed: is the listener up?" >&2
	exit 2
fi
if [ "$left" -ge "$conns" ]; then
	echo "siw endpoints leaked: about $left" >&2
	exit 1
fi
exit 0

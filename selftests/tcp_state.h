/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The TCP state of an iWARP connection's socket, for the user-space RDMA
 * programs (hostile_peer, siw_close_repro): siw's sockets are the kernel's,
 * but /proc/net/tcp of the namespace lists them.
 */
#ifndef RRDS_SELFTEST_TCP_STATE_H
#define RRDS_SELFTEST_TCP_STATE_H

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#define TCP_STATE_CLOSE_WAIT	0x08

/* The state (/proc/net/tcp's hex code) of the socket bound to @local, or -1. */
static inline int tcp_state_of(const struct sockaddr_in *local)
{
	char line[256], want[32];
	int state = -1;
	FILE *f;

	/* "sl local rem st ...", addresses as %08X:%04X, the address as stored. */
	snprintf(want, sizeof(want), "%08X:%04X", local->sin_addr.s_addr, ntohs(local->sin_port));
	f = fopen("/proc/net/tcp", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char addr[32];
		unsigned int st;

		if (sscanf(line, " %*s %31s %*s %x", addr, &st) == 2 && !strcmp(addr, want))
			state = st;
	}
	fclose(f);
	return state;
}

#endif

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Socket helpers shared by the rrds selftests that speak PF_RDS: addresses,
 * bound sockets, and ERR() to turn a failed call into -errno.
 */
#ifndef RDS_SOCKET_H
#define RDS_SOCKET_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <linux/rds.h>

static inline struct sockaddr_in sin4(const char *ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };

	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static inline struct sockaddr_in6 sin6(const char *ip, int port, unsigned int scope)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons(port),
				  .sin6_scope_id = scope };

	inet_pton(AF_INET6, ip, &a.sin6_addr);
	return a;
}

static inline int rds_socket(void)
{
	return socket(AF_RDS, SOCK_SEQPACKET, 0);
}

/* -errno of a call that returned -1, or the call's value. */
#define ERR(call) ({ int __r = (call); __r < 0 ? -errno : __r; })

static inline int bound_socket(const char *ip, int port)
{
	struct sockaddr_in a = sin4(ip, port);
	int fd = rds_socket();

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a))) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static inline int local_port(int fd)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);

	if (getsockname(fd, (struct sockaddr *)&a, &len))
		return -1;
	return ntohs(a.sin_port);
}

#define RDS_COUNTERS_MAX	128

/* Every global counter (RDS_INFO_COUNTERS) into @c; how many, or -1. */
static inline int rds_counters(struct rds_info_counter c[RDS_COUNTERS_MAX])
{
	socklen_t len = RDS_COUNTERS_MAX * sizeof(c[0]);
	int fd = rds_socket(), each;

	if (fd < 0)
		return -1;
	each = getsockopt(fd, SOL_RDS, RDS_INFO_COUNTERS, c, &len);
	close(fd);
	return each == sizeof(c[0]) ? (int)(len / sizeof(c[0])) : -1;
}

/* A global counter by name (RDS_INFO_COUNTERS); -1 if missing. */
static inline long long rds_counter(const char *name)
{
	struct rds_info_counter c[RDS_COUNTERS_MAX];
	int n = rds_counters(c);
	long long value = -1;

	for (int i = 0; i < n; i++)
		if (!strncmp((char *)c[i].name, name, sizeof(c[i].name)))
			value = c[i].value;
	return value;
}

#endif /* RDS_SOCKET_H */

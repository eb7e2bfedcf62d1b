// SPDX-License-Identifier: GPL-2.0
/*
 * Connection-scale benchmark (scripts/bench-scale runs it in the VM, against
 * rrds and then the in-tree rds, with the same arguments).
 *
 *   scale_bench FIRST_LOCAL FIRST_PEER CONNECTIONS TASKS SIZE SECONDS
 *
 * Connection c (0 <= c < CONNECTIONS) is the pair of the c-th consecutive
 * IPv4 addresses from FIRST_LOCAL and from FIRST_PEER, as between two
 * hosts' worth of peers. There are S = max(CONNECTIONS, TASKS) pairs of
 * sockets: sending socket i is bound to local address i % CONNECTIONS and
 * sends to receiving socket i, bound to peer address i % CONNECTIONS, port
 * 4000 + i / CONNECTIONS; so several tasks can share one connection. Task t
 * (of TASKS) owns the socket pairs i = t, t + TASKS, ...: one thread sends
 * over them in turn, another receives on them (epoll). It measures:
 *   - up_ms: from the first send until a message from every sending socket
 *     has arrived (all connections set up);
 *   - kib_per_conn, slab_kib_per_conn: kernel memory per connection once up
 *     and idle (both ends count: they live in this one kernel): the growth of
 *     memory in use (MemTotal - MemFree - Buffers - Cached - AnonPages), and of
 *     Slab, over the set-up, divided by CONNECTIONS. The sockets exist before
 *     the first measure, so only the connections count;
 *   - msgs_per_s, mb_per_s: TASKS threads send SIZE-byte messages, each over
 *     its share of the sending sockets in turn (round robin), to its own
 *     receiving socket, whose thread counts them; the rate is what arrived in
 *     SECONDS after a short warm-up;
 *   - busy_pct, sender_pct: over those SECONDS, the share of all CPUs' time
 *     not idle (/proc/stat), and of the sending threads' time on a CPU
 *     (their CPU clocks): a rate with CPUs idle is bound by a wait, not work.
 * With RRDS_SCALE_PERF_CTL naming perf record's control fifo (--control
 * fifo:, started with -D -1), it enables perf over those SECONDS alone.
 * Prints one line of key=value pairs; progress goes to standard error
 * (sockets bound, first sends made, arrivals every 10 s while connections
 * come up), so a slow or stuck set-up shows where it is.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "rds_socket.h"

#define PORT 4000
#define MAX_TASKS 64
#define MAX_SIZE (1 << 20)
/* Each socket may hold this much queued (both implementations cap it). */
#define SOCKET_BUFFER (4 << 20)

struct task {
	pthread_t sender, receiver;
	int index;
	int epoll;			/* its connections' receiving sockets */
	uint64_t received, bytes;	/* counted by the receiver */
	uint64_t errors;		/* sends that failed other than by time-out */
};

static int connections, tasks, sockets, size;
static int *tx, *rx;		/* the sending and the receiving sockets */
static struct sockaddr_in *to;	/* where each sending socket sends */
static volatile bool stop;
static struct task task[MAX_TASKS];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void __attribute__((noreturn)) die(const char *what)
{
	fprintf(stderr, "scale_bench: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* A /proc/meminfo field in KiB; -1 if missing. */
static long long meminfo(const char *field)
{
	char line[256];
	size_t len = strlen(field);
	long long value = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, len) && line[len] == ':') {
			value = atoll(line + len + 1);
			break;
		}
	fclose(f);
	return value;
}

/* Kernel memory in use, KiB: what is neither free nor page cache nor anonymous. */
static long long kernel_kib(void)
{
	return meminfo("MemTotal") - meminfo("MemFree") - meminfo("Buffers") -
	       meminfo("Cached") - meminfo("AnonPages");
}

static void set_timeout(int fd, int option, double seconds)
{
	struct timeval tv = { .tv_sec = (time_t)seconds,
			      .tv_usec = (suseconds_t)((seconds - (time_t)seconds) * 1e6) };

	if (setsockopt(fd, SOL_SOCKET, option, &tv, sizeof(tv)))
		die("SO_RCVTIMEO/SO_SNDTIMEO");
}

static void set_buffer(int fd, int option)
{
	int bytes = SOCKET_BUFFER;

	if (setsockopt(fd, SOL_SOCKET, option, &bytes, sizeof(bytes)))
		die("SO_SNDBUF/SO_RCVBUF");
}

static void *receiver(void *arg)
{
	static char buf[MAX_SIZE];
	struct task *t = arg;
	struct epoll_event ready[64];

	while (!stop) {
		int n = epoll_wait(t->epoll, ready, 64, 200);

		for (int i = 0; i < n; i++) {
			ssize_t got;

			while ((got = recv(ready[i].data.fd, buf, sizeof(buf), MSG_DONTWAIT)) >= 0) {
				__atomic_fetch_add(&t->received, 1, __ATOMIC_RELAXED);
				__atomic_fetch_add(&t->bytes, got, __ATOMIC_RELAXED);
			}
		}
	}
	return NULL;
}

static void *sender(void *arg)
{
	static char buf[MAX_SIZE];
	struct task *t = arg;

	while (!stop) {
		for (int i = t->index; i < sockets && !stop; i += tasks) {
			/* A full send buffer or congested port costs the turn only. */
			if (sendto(tx[i], buf, size, 0, (struct sockaddr *)&to[i], sizeof(to[i])) < 0 &&
			    errno != EAGAIN && errno != ETIMEDOUT && errno != ENOBUFS &&
			    errno != EINTR && !t->errors++)
				fprintf(stderr, "scale_bench: send on socket %d: %s\n", i,
					strerror(errno));
		}
	}
	return NULL;
}

/* All CPUs' time so far, and of it the time idle, in ticks (/proc/stat). */
static void cpu_ticks(uint64_t *total, uint64_t *idle)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");

	if (!f || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
			 &v[3], &v[4], &v[5], &v[6], &v[7]) != 8)
		die("/proc/stat");
	fclose(f);
	*total = 0;
	for (int i = 0; i < 8; i++)
		*total += v[i];
	*idle = v[3] + v[4];
}

/* The sending threads' time on a CPU so far, in ns. */
static uint64_t senders_ns(void)
{
	uint64_t ns = 0;

	for (int t = 0; t < tasks; t++) {
		struct timespec on_cpu;
		clockid_t clock;

		if (pthread_getcpuclockid(task[t].sender, &clock) ||
		    clock_gettime(clock, &on_cpu))
			die("sender's CPU clock");
		ns += (uint64_t)on_cpu.tv_sec * 1000000000 + (uint64_t)on_cpu.tv_nsec;
	}
	return ns;
}

/* Sends @command to perf record's control fifo, if there is one. */
static void perf_control(const char *command)
{
	const char *fifo = getenv("RRDS_SCALE_PERF_CTL");
	int fd;

	if (!fifo)
		return;
	fd = open(fifo, O_WRONLY);
	if (fd < 0 || write(fd, command, strlen(command)) != (ssize_t)strlen(command))
		die(fifo);
	close(fd);
}

/* What every task's receiver counted: messages, or with @bytes their bytes. */
static uint64_t counted(bool bytes)
{
	uint64_t n = 0;

	for (int i = 0; i < tasks; i++)
		n += __atomic_load_n(bytes ? &task[i].bytes : &task[i].received, __ATOMIC_RELAXED);
	return n;
}

/* Sends one message from every sending socket; the seconds until all arrived. */
static double bring_up(void)
{
	static char buf[64];
	uint64_t before = counted(false);
	double start = now_s(), give_up;

	double report = start + 10;
	uint64_t arrived;

	for (int i = 0; i < sockets; i++)
		while (sendto(tx[i], buf, sizeof(buf), 0, (struct sockaddr *)&to[i], sizeof(to[i])) < 0)
			if (errno != ENOBUFS && errno != EAGAIN && errno != ETIMEDOUT && errno != EINTR)
				die("first send");
	fprintf(stderr, "scale_bench: %d first sends made in %.1f s\n", sockets, now_s() - start);
	give_up = now_s() + 600;
	while ((arrived = counted(false) - before) < (uint64_t)sockets) {
		if (now_s() > give_up) {
			errno = ETIMEDOUT;
			die("connections coming up");
		}
		if (now_s() > report) {
			fprintf(stderr, "scale_bench: %llu of %d arrived after %.0f s\n",
				(unsigned long long)arrived, sockets, now_s() - start);
			report += 10;
		}
		usleep(1000);
	}
	return now_s() - start;
}

/* The @i-th address from @first, as text in @ip. */
static void nth_address(struct in_addr first, int i, char ip[INET_ADDRSTRLEN])
{
	struct in_addr a = { .s_addr = htonl(ntohl(first.s_addr) + i) };

	inet_ntop(AF_INET, &a, ip, INET_ADDRSTRLEN);
}

int main(int argc, char **argv)
{
	struct in_addr first_local, first_peer;
	struct rlimit files;
	long long kib0, slab0, kib1, slab1;
	double seconds, up, start, end;
	uint64_t n0, b0, n1, b1, errors = 0;
	uint64_t total0, idle0, total1, idle1, sender0, sender1;

	if (argc != 7 || inet_pton(AF_INET, argv[1], &first_local) != 1 ||
	    inet_pton(AF_INET, argv[2], &first_peer) != 1) {
		fprintf(stderr, "usage: scale_bench FIRST_LOCAL FIRST_PEER CONNECTIONS TASKS "
			"SIZE SECONDS\n");
		return 2;
	}
	connections = atoi(argv[3]);
	tasks = atoi(argv[4]);
	size = atoi(argv[5]);
	seconds = atof(argv[6]);
	if (connections < 1 || tasks < 1 || tasks > MAX_TASKS || size < 0 || size > MAX_SIZE ||
	    seconds <= 0) {
		fprintf(stderr, "scale_bench: CONNECTIONS >= 1, 1 <= TASKS <= %d, "
			"0 <= SIZE <= %d, SECONDS > 0\n", MAX_TASKS, MAX_SIZE);
		return 2;
	}
	sockets = connections > tasks ? connections : tasks;
	files.rlim_cur = files.rlim_max = 2 * sockets + tasks + 64;
	if (setrlimit(RLIMIT_NOFILE, &files))
		die("RLIMIT_NOFILE");

	tx = calloc(sockets, sizeof(*tx));
	rx = calloc(sockets, sizeof(*rx));
	to = calloc(sockets, sizeof(*to));
	if (!tx || !rx || !to)
		die("calloc");
	for (int t = 0; t < tasks; t++) {
		task[t].index = t;
		task[t].epoll = epoll_create1(0);
		if (task[t].epoll < 0)
			die("epoll_create1");
	}
	start = now_s();
	for (int i = 0; i < sockets; i++) {
		struct epoll_event e = { .events = EPOLLIN };
		char ip[INET_ADDRSTRLEN];

		if (now_s() > start + 10) {
			fprintf(stderr, "scale_bench: %d of %d socket pairs bound\n", i, sockets);
			start = now_s();
		}

		nth_address(first_local, i % connections, ip);
		tx[i] = bound_socket(ip, 0);
		if (tx[i] < 0)
			die(ip);
		set_buffer(tx[i], SO_SNDBUF);
		set_timeout(tx[i], SO_SNDTIMEO, 0.2);
		nth_address(first_peer, i % connections, ip);
		rx[i] = bound_socket(ip, PORT + i / connections);
		if (rx[i] < 0)
			die(ip);
		set_buffer(rx[i], SO_RCVBUF);
		to[i] = sin4(ip, PORT + i / connections);
		e.data.fd = rx[i];
		if (epoll_ctl(task[i % tasks].epoll, EPOLL_CTL_ADD, rx[i], &e))
			die("epoll_ctl");
	}
	for (int t = 0; t < tasks; t++)
		if (pthread_create(&task[t].receiver, NULL, receiver, &task[t]))
			die("pthread_create");

	fprintf(stderr, "scale_bench: %d socket pairs bound\n", sockets);
	sleep(1);
	kib0 = kernel_kib();
	slab0 = meminfo("Slab");
	up = bring_up();
	/* Let completions, acknowledgements and refills settle. */
	sleep(2);
	kib1 = kernel_kib();
	slab1 = meminfo("Slab");

	for (int t = 0; t < tasks; t++)
		if (pthread_create(&task[t].sender, NULL, sender, &task[t]))
			die("pthread_create");
	usleep(500 * 1000);
	n0 = counted(false);
	b0 = counted(true);
	perf_control("enable\n");
	cpu_ticks(&total0, &idle0);
	sender0 = senders_ns();
	start = now_s();
	usleep((useconds_t)(seconds * 1e6));
	n1 = counted(false);
	b1 = counted(true);
	end = now_s();
	cpu_ticks(&total1, &idle1);
	sender1 = senders_ns();
	perf_control("disable\n");
	stop = true;
	for (int t = 0; t < tasks; t++) {
		pthread_join(task[t].sender, NULL);
		pthread_join(task[t].receiver, NULL);
		errors += task[t].errors;
	}

	printf("connections=%d tasks=%d size=%d up_ms=%.1f kib_per_conn=%.1f "
	       "slab_kib_per_conn=%.1f msgs_per_s=%.1f mb_per_s=%.3f busy_pct=%.1f "
	       "sender_pct=%.1f send_errors=%llu\n",
	       connections, tasks, size, up * 1e3, (double)(kib1 - kib0) / connections,
	       (double)(slab1 - slab0) / connections, (n1 - n0) / (end - start),
	       (b1 - b0) / (end - start) / 1e6,
	       100.0 * (double)((total1 - total0) - (idle1 - idle0)) / (double)(total1 - total0),
	       100.0 * (double)(sender1 - sender0) / 1e9 / (end - start) / tasks,
	       (unsigned long long)errors);
	return errors ? 1 : 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * Flow control over the loopback transport: per-port congestion when a
 * receiver holds more than half its SO_RCVBUF, ENOBUFS for non-blocking
 * senders, bounded blocking sends (SO_SNDTIMEO -> ETIMEDOUT, signals ->
 * EINTR), poll, and RDS_CONG_MONITOR notifications.
 *
 * The receivers below use SO_RCVBUF 65536: the kernel doubles it to 131072,
 * the port is congested above 65536 queued bytes (half of that) and clear
 * again below 32768 (a quarter), as upstream's rds_recv_rcvbuf_delta.
 */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>

#include "kselftest_harness.h"
#include "rrds_test.h"
#include "rds_socket.h"

#define MSG 8192
#define RCVBUF 65536
/* 8 x 8 KiB = 65536 is not over the threshold; the 9th message is. */
#define FILL 9

FIXTURE(flow) {
	int rx, tx;
	struct sockaddr_in to;
};

FIXTURE_SETUP(flow)
{
	int v = RCVBUF;

	if (!rrds_loaded())
		ASSERT_EQ(0, rrds_load());
	self->rx = bound_socket("127.0.0.1", 0);
	self->tx = bound_socket("127.0.0.1", 0);
	ASSERT_LE(0, self->rx);
	ASSERT_LE(0, self->tx);
	ASSERT_EQ(0, setsockopt(self->rx, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)));
	self->to = sin4("127.0.0.1", local_port(self->rx));
}

FIXTURE_TEARDOWN(flow)
{
	close(self->rx);
	close(self->tx);
}

static int send_nb(int fd, const struct sockaddr_in *to, size_t len)
{
	static char buf[MSG];

	return ERR(sendto(fd, buf, len, MSG_DONTWAIT, (const struct sockaddr *)to, sizeof(*to)));
}

static int recv_nb(int fd)
{
	static char buf[MSG];

	return ERR(recv(fd, buf, sizeof(buf), MSG_DONTWAIT));
}

/* Fills the receiver to just over its threshold. */
static int congest(int tx, const struct sockaddr_in *to)
{
	for (int i = 0; i < FILL; i++)
		if (send_nb(tx, to, MSG) != MSG)
			return -1;
	return 0;
}

TEST_F(flow, congested_port_gets_enobufs_when_nonblocking)
{
	int other = bound_socket("127.0.0.1", 0);
	struct sockaddr_in to2 = sin4("127.0.0.1", local_port(other));

	for (int i = 0; i < 8; i++)
		ASSERT_EQ(MSG, send_nb(self->tx, &self->to, MSG));
	/* 65536 queued: at, not over, the threshold. */
	ASSERT_EQ(MSG, send_nb(self->tx, &self->to, MSG));
	EXPECT_EQ(-ENOBUFS, send_nb(self->tx, &self->to, MSG));
	EXPECT_EQ(-ENOBUFS, send_nb(self->tx, &self->to, 0));
	/* Other ports of the same address are not congested. */
	EXPECT_EQ(MSG, send_nb(self->tx, &to2, MSG));
	close(other);
}

TEST_F(flow, draining_below_a_quarter_uncongests)
{
	ASSERT_EQ(0, congest(self->tx, &self->to));
	ASSERT_EQ(-ENOBUFS, send_nb(self->tx, &self->to, MSG));
	/* 9 -> 5 queued (40960 bytes): still over a quarter, still congested. */
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(MSG, recv_nb(self->rx));
	EXPECT_EQ(-ENOBUFS, send_nb(self->tx, &self->to, MSG));
	/* 4 queued = 32768: not below a quarter yet. */
	ASSERT_EQ(MSG, recv_nb(self->rx));
	EXPECT_EQ(-ENOBUFS, send_nb(self->tx, &self->to, MSG));
	/* 3 queued = 24576 < 32768: clear. */
	ASSERT_EQ(MSG, recv_nb(self->rx));
	EXPECT_EQ(MSG, send_nb(self->tx, &self->to, MSG));
}

TEST_F(flow, blocking_send_to_congested_port_times_out_with_etimedout)
{
	struct timeval tv = { .tv_usec = 300000 };
	static char buf[MSG];
	double start, elapsed;

	ASSERT_EQ(0, congest(self->tx, &self->to));
	ASSERT_EQ(0, setsockopt(self->tx, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)));
	start = now();
	EXPECT_EQ(-ETIMEDOUT, ERR(sendto(self->tx, buf, MSG, 0, (struct sockaddr *)&self->to,
					 sizeof(self->to))));
	elapsed = now() - start;
	TH_LOG("ETIMEDOUT after %.3f s", elapsed);
	/*
	 * The wait counts jiffies (4 ms at HZ=250) and under TCG the tick can run
	 * ahead of the TSC clock measured here: one run saw 0.289 s. What matters
	 * is that the send waited about the timeout, neither none nor forever.
	 */
	EXPECT_LE(0.25, elapsed);
	EXPECT_GE(5.0, elapsed);
}

static void on_alarm(int sig)
{
	(void)sig;
}

TEST_F(flow, blocking_send_interrupted_by_signal_is_eintr)
{
	struct sigaction sa = { .sa_handler = on_alarm }; /* no SA_RESTART */
	struct itimerval it = { .it_value = { .tv_usec = 200000 } };
	static char buf[MSG];

	ASSERT_EQ(0, congest(self->tx, &self->to));
	ASSERT_EQ(0, sigaction(SIGALRM, &sa, NULL));
	ASSERT_EQ(0, setitimer(ITIMER_REAL, &it, NULL));
	EXPECT_EQ(-EINTR, ERR(sendto(self->tx, buf, MSG, 0, (struct sockaddr *)&self->to,
				     sizeof(self->to))));
	signal(SIGALRM, SIG_DFL);
}

struct drain {
	int fd;
	int count;
};

static void *drain_later(void *arg)
{
	struct drain *d = arg;

	usleep(200000);
	for (int i = 0; i < d->count; i++)
		if (recv_nb(d->fd) != MSG)
			return (void *)1;
	return NULL;
}

TEST_F(flow, blocked_send_proceeds_when_receiver_drains)
{
	struct drain d = { .fd = self->rx, .count = 6 };
	static char buf[MSG];
	pthread_t t;
	void *ret;

	ASSERT_EQ(0, congest(self->tx, &self->to));
	ASSERT_EQ(0, pthread_create(&t, NULL, drain_later, &d));
	EXPECT_EQ(MSG, ERR(sendto(self->tx, buf, MSG, 0, (struct sockaddr *)&self->to,
				  sizeof(self->to))));
	ASSERT_EQ(0, pthread_join(t, &ret));
	EXPECT_EQ(NULL, ret);
	/* 3 left + the one just sent. */
	for (int i = 0; i < 4; i++)
		EXPECT_EQ(MSG, recv_nb(self->rx));
	EXPECT_EQ(-EAGAIN, recv_nb(self->rx));
}

TEST_F(flow, poll_withholds_pollout_until_refused_port_clears)
{
	struct pollfd p = { .fd = self->tx, .events = POLLOUT };

	ASSERT_EQ(1, poll(&p, 1, 0));
	ASSERT_EQ(0, congest(self->tx, &self->to));
	ASSERT_EQ(-ENOBUFS, send_nb(self->tx, &self->to, MSG));
	EXPECT_EQ(0, poll(&p, 1, 100));
	for (int i = 0; i < 6; i++)
		ASSERT_EQ(MSG, recv_nb(self->rx));
	EXPECT_EQ(1, poll(&p, 1, 1000));
	EXPECT_EQ(POLLOUT, p.revents & POLLOUT);
}

TEST_F(flow, cong_monitor_reports_refused_ports_as_cmsg)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(uint64_t))];
	} control;
	struct msghdr m = { .msg_control = &control, .msg_controllen = sizeof(control) };
	struct pollfd p = { .fd = self->tx, .events = POLLIN };
	int on = 1, port = ntohs(self->to.sin_port);
	struct cmsghdr *c;
	uint64_t mask;

	EXPECT_EQ(-EINVAL, ERR(setsockopt(self->tx, SOL_RDS, RDS_CONG_MONITOR, &on, 2)));
	ASSERT_EQ(0, setsockopt(self->tx, SOL_RDS, RDS_CONG_MONITOR, &on, sizeof(on)));
	ASSERT_EQ(0, congest(self->tx, &self->to));
	ASSERT_EQ(-ENOBUFS, send_nb(self->tx, &self->to, MSG));
	EXPECT_EQ(0, poll(&p, 1, 0));
	for (int i = 0; i < 6; i++)
		ASSERT_EQ(MSG, recv_nb(self->rx));
	ASSERT_EQ(1, poll(&p, 1, 1000));
	EXPECT_EQ(POLLIN, p.revents & POLLIN);
	/* The notification: recvmsg returns 0 with RDS_CMSG_CONG_UPDATE. */
	ASSERT_EQ(0, recvmsg(self->tx, &m, MSG_DONTWAIT));
	c = CMSG_FIRSTHDR(&m);
	ASSERT_NE(NULL, c);
	EXPECT_EQ(SOL_RDS, c->cmsg_level);
	EXPECT_EQ(RDS_CMSG_CONG_UPDATE, c->cmsg_type);
	EXPECT_EQ(CMSG_LEN(sizeof(mask)), c->cmsg_len);
	memcpy(&mask, CMSG_DATA(c), sizeof(mask));
	EXPECT_EQ(1ULL << (port % 64), mask);
	/* Read once: nothing more to report. */
	EXPECT_EQ(0, poll(&p, 1, 0));
	EXPECT_EQ(-EAGAIN, ERR(recvmsg(self->tx, &m, MSG_DONTWAIT)));
	on = 0;
	EXPECT_EQ(0, setsockopt(self->tx, SOL_RDS, RDS_CONG_MONITOR, &on, sizeof(on)));
}

TEST_F(flow, closing_a_congested_receiver_uncongests_its_port)
{
	int port = ntohs(self->to.sin_port);

	ASSERT_EQ(0, congest(self->tx, &self->to));
	ASSERT_EQ(-ENOBUFS, send_nb(self->tx, &self->to, MSG));
	close(self->rx);
	self->rx = bound_socket("127.0.0.1", port);
	ASSERT_LE(0, self->rx);
	EXPECT_EQ(MSG, send_nb(self->tx, &self->to, MSG));
}

TEST_F(flow, large_messages_need_a_larger_sndbuf)
{
	int v = 4 << 20, len = 1 << 20;
	static char buf[1 << 20];

	/* Default SO_SNDBUF is wmem_default, 212992: at most 106496 bytes a message. */
	EXPECT_EQ(-EMSGSIZE, ERR(sendto(self->tx, buf, 106497, MSG_DONTWAIT,
					(struct sockaddr *)&self->to, sizeof(self->to))));
	ASSERT_EQ(0, setsockopt(self->tx, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)));
	ASSERT_EQ(0, setsockopt(self->rx, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)));
	EXPECT_EQ(len, ERR(sendto(self->tx, buf, len, MSG_DONTWAIT, (struct sockaddr *)&self->to,
				  sizeof(self->to))));
	EXPECT_EQ(-EMSGSIZE, ERR(sendto(self->tx, buf, len + 1, MSG_DONTWAIT,
					(struct sockaddr *)&self->to, sizeof(self->to))));
	EXPECT_EQ(len, ERR(recv(self->rx, buf, sizeof(buf), MSG_DONTWAIT)));
}

/*
 * Held loopback: debugfs rrds/loopback_hold keeps messages queued unsent, as
 * a slow link would, so the send buffer fills and queued messages can be
 * cancelled or dropped by close.
 */
static int hold(int on)
{
	int fd = open(RRDS_DEBUGFS "/loopback_hold", O_WRONLY);
	int n;

	/*
	 * Written directly, not through a shell: a shell's exit would signal
	 * this process, and a waiter the signal interrupts finds room on its
	 * own when it restarts, whether or not rrds woke it.
	 */
	if (fd < 0)
		return -1;
	n = write(fd, on ? "1" : "0", 1);
	close(fd);
	return n == 1 ? 0 : -1;
}

FIXTURE(held) {
	int rx, rx2, tx;
	struct sockaddr_in to, to2;
};

FIXTURE_SETUP(held)
{
	if (!rrds_loaded())
		ASSERT_EQ(0, rrds_load());
	self->rx = bound_socket("127.0.0.1", 0);
	self->rx2 = bound_socket("127.0.0.1", 0);
	self->tx = bound_socket("127.0.0.1", 0);
	ASSERT_LE(0, self->rx);
	ASSERT_LE(0, self->rx2);
	ASSERT_LE(0, self->tx);
	self->to = sin4("127.0.0.1", local_port(self->rx));
	self->to2 = sin4("127.0.0.1", local_port(self->rx2));
	ASSERT_EQ(0, hold(1));
}

FIXTURE_TEARDOWN(held)
{
	hold(0);
	close(self->rx);
	close(self->rx2);
	close(self->tx);
}

/* Default SO_SNDBUF 212992: sndbuf 106496 = 13 x 8 KiB. */
#define FITS 13

TEST_F(held, full_send_buffer_is_eagain_and_withholds_pollout)
{
	struct pollfd p = { .fd = self->tx, .events = POLLOUT };

	for (int i = 0; i < FITS; i++)
		ASSERT_EQ(MSG, send_nb(self->tx, &self->to, MSG));
	EXPECT_EQ(-EAGAIN, send_nb(self->tx, &self->to, MSG));
	EXPECT_EQ(0, poll(&p, 1, 0));
	/* Nothing arrived while held; everything does once released, in order. */
	EXPECT_EQ(-EAGAIN, recv_nb(self->rx));
	ASSERT_EQ(0, hold(0));
	for (int i = 0; i < FITS; i++)
		EXPECT_EQ(MSG, recv_nb(self->rx));
	EXPECT_EQ(-EAGAIN, recv_nb(self->rx));
	EXPECT_EQ(1, poll(&p, 1, 0));
	EXPECT_EQ(MSG, send_nb(self->tx, &self->to, MSG));
}

TEST_F(held, admission_compares_the_bytes_before_the_message)
{
	int v = 4 << 20;
	static char big[100000];

	/* 106496 - 1 queued admits one more message, which goes past sndbuf. */
	ASSERT_EQ(0, setsockopt(self->rx, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)));
	ASSERT_EQ(100000, ERR(sendto(self->tx, big, 100000, MSG_DONTWAIT,
				     (struct sockaddr *)&self->to, sizeof(self->to))));
	ASSERT_EQ(6495, send_nb(self->tx, &self->to, 6495));
	EXPECT_EQ(MSG, send_nb(self->tx, &self->to, MSG));
	EXPECT_EQ(-EAGAIN, send_nb(self->tx, &self->to, 0));
}

/*
 * Messages that pass congestion while held, and then find the receive
 * queue at its limit (4 MiB here: four times SO_RCVBUF, at least 4 MiB),
 * wait on their connection: they are counted as delayed retries, and the
 * watchdog (once a second) delivers them once the reader has made room. None
 * is lost or duplicated.
 */
TEST_F(held, messages_past_the_receive_limit_wait_for_the_reader)
{
	long long recv_retries0 = rds_counter("recv_delayed_retry");
	long long send_retries0 = rds_counter("send_delayed_retry");
	int v = 16 << 20, len = 1 << 20, first;
	static unsigned char buf[(1 << 20) + 1];
	struct pollfd p = { .fd = self->rx, .events = POLLIN };

	ASSERT_LE(0, recv_retries0);
	ASSERT_EQ(0, setsockopt(self->tx, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)));
	for (int i = 0; i < 6; i++) {
		memset(buf, 'a' + i, len);
		ASSERT_EQ(len, ERR(sendto(self->tx, buf, len, MSG_DONTWAIT,
					  (struct sockaddr *)&self->to, sizeof(self->to))));
	}
	ASSERT_EQ(0, hold(0));
	/* Four fill the 4 MiB; the fifth waits. */
	for (first = 0; first < 4; first++) {
		ASSERT_EQ(len, ERR(recv(self->rx, buf, sizeof(buf), MSG_DONTWAIT)));
		EXPECT_EQ('a' + first, buf[0]);
		EXPECT_EQ('a' + first, buf[len - 1]);
	}
	EXPECT_LT(recv_retries0, rds_counter("recv_delayed_retry"));
	EXPECT_LT(send_retries0, rds_counter("send_delayed_retry"));
	for (int i = first; i < 6; i++) {
		ASSERT_EQ(1, poll(&p, 1, 3000)) TH_LOG("message %d never came", i);
		ASSERT_EQ(len, ERR(recv(self->rx, buf, sizeof(buf), MSG_DONTWAIT)));
		EXPECT_EQ('a' + i, buf[0]);
		EXPECT_EQ('a' + i, buf[len - 1]);
	}
	EXPECT_EQ(-EAGAIN, recv_nb(self->rx));
}

TEST_F(held, blocking_send_on_full_buffer_times_out_with_etimedout)
{
	struct timeval tv = { .tv_usec = 200000 };
	static char buf[MSG];

	for (int i = 0; i < FITS; i++)
		ASSERT_EQ(MSG, send_nb(self->tx, &self->to, MSG));
	ASSERT_EQ(0, setsockopt(self->tx, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)));
	EXPECT_EQ(-ETIMEDOUT, ERR(sendto(self->tx, buf, MSG, 0, (struct sockaddr *)&self->to,
					 sizeof(self->to))));
}

static void *release_later(void *arg)
{
	(void)arg;
	usleep(200000);
	return hold(0) ? (void *)1 : NULL;
}

/*
 * Acknowledgements wake the socket only once something found the buffer
 * full: a poll for POLLOUT that did must still be woken when it drains
 * (not merely find room when its timeout, much later, has it look again).
 */
TEST_F(held, poll_for_pollout_is_woken_when_the_buffer_drains)
{
	struct pollfd p = { .fd = self->tx, .events = POLLOUT };
	pthread_t t;
	double start;
	void *ret;

	for (int i = 0; i < FITS; i++)
		ASSERT_EQ(MSG, send_nb(self->tx, &self->to, MSG));
	ASSERT_EQ(0, pthread_create(&t, NULL, release_later, NULL));
	start = now();
	EXPECT_EQ(1, poll(&p, 1, 10000));
	EXPECT_GT(5.0, now() - start);
	EXPECT_EQ(POLLOUT, p.revents & POLLOUT);
	ASSERT_EQ(0, pthread_join(t, &ret));
	EXPECT_EQ(NULL, ret);
	for (int i = 0; i < FITS; i++)
		EXPECT_EQ(MSG, recv_nb(self->rx));
}

/* ...and so must a sender blocked on it. */
TEST_F(held, blocked_send_is_woken_when_the_buffer_drains)
{
	struct timeval tv = { .tv_sec = 10 };
	static char buf[MSG];
	pthread_t t;
	double start;
	void *ret;

	for (int i = 0; i < FITS; i++)
		ASSERT_EQ(MSG, send_nb(self->tx, &self->to, MSG));
	ASSERT_EQ(0, setsockopt(self->tx, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)));
	ASSERT_EQ(0, pthread_create(&t, NULL, release_later, NULL));
	start = now();
	EXPECT_EQ(MSG, ERR(sendto(self->tx, buf, MSG, 0, (struct sockaddr *)&self->to,
				  sizeof(self->to))));
	EXPECT_GT(5.0, now() - start);
	ASSERT_EQ(0, pthread_join(t, &ret));
	EXPECT_EQ(NULL, ret);
	for (int i = 0; i < FITS + 1; i++)
		EXPECT_EQ(MSG, recv_nb(self->rx));
}

TEST_F(held, info_lists_held_messages_as_send_queue)
{
	struct rds_info_message m[8];
	socklen_t len = sizeof(m);
	int found = 0;

	for (int i = 0; i < 3; i++)
		ASSERT_EQ(100 + i, send_nb(self->tx, &self->to, 100 + i));
	ASSERT_EQ(26, ERR(getsockopt(self->tx, SOL_RDS, RDS_INFO_SEND_MESSAGES, m, &len)));
	for (size_t i = 0; i < len / sizeof(m[0]); i++) {
		if (m[i].fport != self->to.sin_port)
			continue;
		EXPECT_EQ(100U + found, m[i].len);
		EXPECT_EQ(htons(local_port(self->tx)), m[i].lport);
		if (found)
			EXPECT_EQ(m[i - 1].seq + 1, m[i].seq);
		found++;
	}
	EXPECT_EQ(3, found);
	len = 0;
	EXPECT_EQ(26, ERR(getsockopt(self->tx, SOL_RDS, RDS_INFO_RETRANS_MESSAGES, NULL, &len)));
	EXPECT_EQ(0U, len);
}

TEST_F(held, cancel_sent_to_drops_only_that_destination)
{
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(MSG, send_nb(self->tx, &self->to, MSG));
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(MSG, send_nb(self->tx, &self->to2, MSG));
	ASSERT_EQ(0, setsockopt(self->tx, SOL_RDS, RDS_CANCEL_SENT_TO, &self->to,
				sizeof(self->to)));
	/* The cancelled bytes are credited: the buffer holds FITS - 2 more. */
	for (int i = 0; i < FITS - 2; i++)
		ASSERT_EQ(MSG, send_nb(self->tx, &self->to2, MSG));
	EXPECT_EQ(-EAGAIN, send_nb(self->tx, &self->to2, MSG));
	ASSERT_EQ(0, hold(0));
	EXPECT_EQ(-EAGAIN, recv_nb(self->rx));
	for (int i = 0; i < FITS; i++)
		EXPECT_EQ(MSG, recv_nb(self->rx2));
	EXPECT_EQ(-EAGAIN, recv_nb(self->rx2));
}

TEST_F(held, close_drops_unsent_messages)
{
	for (int i = 0; i < 5; i++)
		ASSERT_EQ(MSG, send_nb(self->tx, &self->to, MSG));
	close(self->tx);
	self->tx = bound_socket("127.0.0.1", 0);
	ASSERT_EQ(0, hold(0));
	EXPECT_EQ(-EAGAIN, recv_nb(self->rx));
}

TEST_HARNESS_MAIN

// SPDX-License-Identifier: GPL-2.0
/*
 * The userspace tools (tools/, the `rrds` command) against the loaded
 * module, and the same commands against the in-tree rds module: they speak
 * only the RDS ABI, so both must answer alike.
 */
#include <sched.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <linux/rds.h>

#include "kselftest_harness.h"
#include "rrds_test.h"
#include "rds_socket.h"

/* The rrds command, built by `make check` before the VM starts. */
static const char *rrds_cmd(void)
{
	static char path[512];

	snprintf(path, sizeof(path), "%s/../tools/target/release/rrds", selftests_dir());
	return path;
}

#define BENCH_SERVER_LOG "/tmp/rrds-bench-server.log"

/*
 * Starts `rrds bench --server` on @addr port 4000 (in namespace @netns
 * unless NULL) and waits until it serves.
 */
static int bench_server_start(const char *netns, const char *addr, const char *transport)
{
	return sh("%s%s %s bench --server --addr %s --transport %s >" BENCH_SERVER_LOG " 2>&1 & "
		  "for i in $(seq 100); do grep -q 'serving on' " BENCH_SERVER_LOG " && exit 0; "
		  "sleep 0.1; done; exit 1",
		  netns ? "ip netns exec " : "", netns ? netns : "", rrds_cmd(), addr, transport);
}

/* Stops the server (the pattern does not match this shell's own command line). */
static void bench_server_stop(void)
{
	sh("pkill -f 'bench [-]-server'; for i in $(seq 50); do "
	   "pgrep -f 'bench [-]-server' >/dev/null || exit 0; sleep 0.1; done; exit 1");
}

/* The server's log, for TH_LOG and checks. */
static const char *bench_server_log(void)
{
	static char log[8192];

	if (read_file(BENCH_SERVER_LOG, log, sizeof(log)) < 0)
		log[0] = 0;
	return log;
}

/*
 * The JSON of an `rrds bench` run: a summary of @tasks tasks, every run and
 * median with 0 errors and every rate measured.
 */
static void expect_clean_bench(struct __test_metadata *_metadata, const char *out, int tasks)
{
	char want[32];

	snprintf(want, sizeof(want), "\"tasks\":%d,", tasks);
	EXPECT_NE(NULL, strstr(out, "\"type\":\"summary\""));
	EXPECT_NE(NULL, strstr(out, want));
	EXPECT_NE(NULL, strstr(out, "\"errors\":0"));
	for (const char *e = strstr(out, "\"errors\":"); e; e = strstr(e + 1, "\"errors\":"))
		EXPECT_EQ('0', e[9]);
	EXPECT_EQ(NULL, strstr(out, "\"msgs_per_sec\":null"));
}

FIXTURE(impl) {
	int unused;
};

FIXTURE_VARIANT(impl) {
	/* Load the in-tree rds module instead of rrds. */
	int in_tree;
};

FIXTURE_VARIANT_ADD(impl, rrds) {
	.in_tree = 0,
};

FIXTURE_VARIANT_ADD(impl, in_tree_rds) {
	.in_tree = 1,
};

FIXTURE_SETUP(impl)
{
	struct stat st;

	if (stat(rrds_cmd(), &st))
		SKIP(return, "%s not built", rrds_cmd());
	ASSERT_EQ(0, rrds_ensure_unloaded());
	unload_module("rds_rdma");
	unload_module("rds");
	if (variant->in_tree) {
		ASSERT_EQ(0, sh("modprobe rds"));
	} else {
		ASSERT_EQ(0, rrds_load());
	}
}

FIXTURE_TEARDOWN(impl)
{
	bench_server_stop();
	if (variant->in_tree)
		unload_module("rds");
	else
		rrds_ensure_unloaded();
}

/*
 * A case about the command's own behaviour (flags, signals, output), which
 * is the same over either implementation: it runs over rrds only.
 */
#define COMMAND_ONLY()							\
	do {								\
		if (variant->in_tree)					\
			SKIP(return, "the command's own behaviour: checked over rrds"); \
	} while (0)

TEST_F(impl, ping_gets_every_pong)
{
	char out[4096];

	ASSERT_EQ(0, sh_out(out, sizeof(out), "%s ping -c 3 -i 0.1 127.0.0.1 2>&1", rrds_cmd()));
	TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "3 pings sent, 3 pongs received"));
}

TEST_F(impl, info_counters_show_the_pings)
{
	char out[16384];

	ASSERT_EQ(0, sh("%s ping -c 2 -i 0.05 127.0.0.1 >/dev/null 2>&1", rrds_cmd()));
	ASSERT_EQ(0, sh_out(out, sizeof(out), "%s info counters 2>&1", rrds_cmd()));
	/* Each ping is counted by the answering side under upstream's name. */
	EXPECT_NE(NULL, strstr(out, "recv_ping"));
	EXPECT_NE(NULL, strstr(out, "send_pong"));
}

/*
 * rrds info with no table prints every table under its name; a table the
 * implementation lacks (in-tree: XRC targets, IB connections without
 * rds_rdma) says so in its place, and the command still succeeds.
 */
TEST_F(impl, info_without_a_table_prints_every_table)
{
	static const char *const names[] = {
		"counters:", "sockets:", "connections:", "send-messages:",
		"retrans-messages:", "recv-messages:", "ib-connections:", "xrc-targets:",
	};
	char out[65536];

	ASSERT_EQ(0, sh_out(out, sizeof(out), "%s info 2>&1", rrds_cmd())) TH_LOG("%s", out);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *name = names[i];

		EXPECT_NE(NULL, strstr(out, name)) TH_LOG("no %s in:\n%s", name, out);
	}
	EXPECT_NE(NULL, strstr(out, "recv_ping"));
	if (variant->in_tree)
		EXPECT_NE(NULL, strstr(out, "(not available"));
}

/*
 * --json on every command that prints: JSON Lines, each record with a type,
 * the first the run's meta record naming the command and the loaded
 * implementation (json_lines.py checks both). Commands that are rrds
 * extensions exit 3 on the in-tree module, with nothing on standard output
 * but the meta record.
 */
TEST_F(impl, every_command_writes_json_lines)
{
	const char *impl = variant->in_tree ? "rds" : "rrds";
	const char *check = "python3 %s/json_lines.py";
	char cmd[768], out[65536];

	snprintf(cmd, sizeof(cmd), "%s ping --json -c 2 -i 0.05 127.0.0.1 | %s ping %s "
		 "ping_start pong=2 ping_summary=1", rrds_cmd(), check, impl);
	EXPECT_EQ(0, sh_out(out, sizeof(out), cmd, selftests_dir())) TH_LOG("%s", out);
	/* In-tree without rds_rdma has no IB table: an unavailable record. */
	snprintf(cmd, sizeof(cmd), "%s info --json | %s info %s counter %s", rrds_cmd(), check,
		 impl, variant->in_tree ? "unavailable" : "");
	EXPECT_EQ(0, sh_out(out, sizeof(out), cmd, selftests_dir())) TH_LOG("%s", out);
	snprintf(cmd, sizeof(cmd), "%s info counters --json | %s info %s counter unavailable=0",
		 rrds_cmd(), check, impl);
	EXPECT_EQ(0, sh_out(out, sizeof(out), cmd, selftests_dir())) TH_LOG("%s", out);
	snprintf(cmd, sizeof(cmd), "%s bench --json --duration 0.5 --runs 1 --size 64 --mode rate "
		 "| %s bench %s run=1 summary=1", rrds_cmd(), check, impl);
	EXPECT_EQ(0, sh_out(out, sizeof(out), cmd, selftests_dir())) TH_LOG("%s", out);
	for (int i = 0; i < 2; i++) {
		const char *sub = i ? "xrc" : "watch";
		const char *args = i ? "xrc list --json" : "watch --json -d 1";

		snprintf(cmd, sizeof(cmd), "%s %s 2>/dev/null; echo \"exit=$?\"",
			 rrds_cmd(), args);
		ASSERT_EQ(0, sh_out(out, sizeof(out), "%s", cmd));
		TH_LOG("%s: %s", args, out);
		EXPECT_NE(NULL, strstr(out, variant->in_tree ? "exit=3" : "exit=0"));
		snprintf(cmd, sizeof(cmd), "%s %s 2>/dev/null | %s %s %s", rrds_cmd(), args,
			 check, sub, impl);
		EXPECT_EQ(0, sh_out(out, sizeof(out), cmd, selftests_dir())) TH_LOG("%s", out);
	}
}

/*
 * The exit status tells apart a check that failed (1: no pong), a bad
 * command line (2) and a system call's error (4: an address not on this
 * host), as --help documents.
 */
TEST_F(impl, exit_status_says_what_failed)
{
	char out[4096];

	/* No pong makes its round trip in a microsecond. */
	EXPECT_EQ(1, sh_out(out, sizeof(out), "%s ping -c 1 -W 0.000001 127.0.0.1 2>&1",
			    rrds_cmd())) TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "0 pongs received")) TH_LOG("%s", out);
	EXPECT_EQ(2, sh_out(out, sizeof(out), "%s ping --no-such-flag 127.0.0.1 2>&1",
			    rrds_cmd()));
	EXPECT_EQ(4, sh_out(out, sizeof(out), "%s ping -c 1 -I 192.0.2.1 127.0.0.1 2>&1",
			    rrds_cmd())) TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "bind 192.0.2.1")) TH_LOG("%s", out);
	EXPECT_EQ(0, sh_out(out, sizeof(out), "%s --help", rrds_cmd()));
	EXPECT_NE(NULL, strstr(out, "Exit status:")) TH_LOG("%s", out);
}

/*
 * ping's habits: a host name, no count (until Ctrl-C), and the summary on
 * SIGINT with the round trips' min/avg/max/mdev; exit 0 as pongs came.
 */
TEST_F(impl, ping_by_name_until_interrupted_prints_the_summary)
{
	char out[8192];

	COMMAND_ONLY();
	/* SIGINT once the first pong is in (a fixed delay raced a slow start). */
	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "%s ping -i 0.2 -I 127.0.0.1 localhost >/tmp/rrds-ping.out 2>&1 & p=$!; "
			    "for i in $(seq 300); do grep -q '^pong' /tmp/rrds-ping.out && break; "
			    "sleep 0.1; done; sleep 0.3; kill -INT $p; wait $p; rc=$?; "
			    "cat /tmp/rrds-ping.out; exit $rc", rrds_cmd())) TH_LOG("%s", out);
	TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "PING localhost (127.0.0.1)"));
	EXPECT_NE(NULL, strstr(out, "pings sent"));
	EXPECT_NE(NULL, strstr(out, "rtt min/avg/max/mdev = "));
	EXPECT_EQ(NULL, strstr(out, " 0 pongs received"));
}

/* bench --histogram prints the round trips' percentile distribution. */
TEST_F(impl, bench_histogram_shows_the_distribution)
{
	char out[16384];

	COMMAND_ONLY();
	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "%s bench --addr 127.0.0.1 --size 64 --duration 1 --runs 1 "
			    "--mode latency --histogram 2>&1", rrds_cmd())) TH_LOG("%s", out);
	TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "99.9"));
	EXPECT_NE(NULL, strstr(out, "99.999"));
}

TEST_F(impl, bench_runs_with_payload_verification)
{
	static char svg[1 << 20];
	char out[16384];

	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "%s bench --addr 127.0.0.1 --size 64 --size 65536 --duration 2 --runs 1 "
			    "--mode both --verify --json --plot /tmp/rrds-bench.svg 2>&1", rrds_cmd()));
	TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "\"type\":\"summary\""));
	EXPECT_NE(NULL, strstr(out, "\"errors\":0"));
	EXPECT_NE(NULL, strstr(out, variant->in_tree ? "\"impl\":\"rds\"" : "\"impl\":\"rrds\""));
	/* --plot: an SVG with a rate line and a latency line over the two sizes. */
	ASSERT_LT(0, read_file("/tmp/rrds-bench.svg", svg, sizeof(svg)));
	EXPECT_EQ(0, strncmp(svg, "<svg", 4));
	EXPECT_NE(NULL, strstr(svg, "</svg>"));
	EXPECT_NE(NULL, strstr(svg, "<polyline"));
	EXPECT_NE(NULL, strstr(svg, variant->in_tree ? "impl=rds" : "impl=rrds"));
	unlink("/tmp/rrds-bench.svg");
}

/*
 * rds-stress's habits: its flags (-r -q -d -t -v), -T 0 (until Ctrl-C)
 * with a line a second, and on SIGINT the run's row, its median and the
 * summary with the CPU use; exit 0 as no run counted an error.
 */
TEST_F(impl, bench_rds_stress_flags_until_interrupted)
{
	char out[16384];

	COMMAND_ONLY();
	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "timeout --preserve-status -s INT 5 %s bench -r 127.0.0.1 -q 1024 -d 8 "
			    "-t 2 -T 0 -v --mode rate --interval 1 2>&1", rrds_cmd())) TH_LOG("%s", out);
	TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "duration=0s runs=1 depth=8 tasks=2 verify=on"));
	EXPECT_NE(NULL, strstr(out, "interval rate 1024 B run 1 0.0-"));
	EXPECT_NE(NULL, strstr(out, " MB/s cpu "));
	EXPECT_NE(NULL, strstr(out, " 1024 median "));
	EXPECT_NE(NULL, strstr(out, "rrds bench: interrupted"));
	EXPECT_NE(NULL, strstr(out, " errors=0 cpu="));
	EXPECT_EQ(NULL, strstr(out, "cpu=-"));
	/* Ctrl-C ends the benchmark: -T 0 is one run of one measurement. */
	EXPECT_NE(0, sh_out(out, sizeof(out), "%s bench -T 0 --mode both -q 64 2>&1", rrds_cmd()));
	EXPECT_NE(NULL, strstr(out, "--duration 0 measures one run until Ctrl-C")) TH_LOG("%s", out);
}

/* -a (rds-stress's ack size): 16-byte echoes of 8 KiB messages, verified. */
TEST_F(impl, bench_ack_size_sizes_the_echo)
{
	char out[16384];

	COMMAND_ONLY();
	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "%s bench --addr 127.0.0.1 -q 8k -a 16 -T 1 --runs 1 --mode latency "
			    "-v --json 2>&1", rrds_cmd())) TH_LOG("%s", out);
	TH_LOG("%s", out);
	expect_clean_bench(_metadata, out, 1);
	EXPECT_NE(NULL, strstr(out, "\"mode\":\"latency\",\"size\":8192,\"msgs_per_sec\":"));
	EXPECT_NE(NULL, strstr(out, "\"ack_size\":16,"));
}

/*
 * rrds plot: two results of rrds bench --json in one chart, a colour each,
 * named by their files; a line per result and measure (both: message
 * rate, throughput, p50, p99; rate: message rate, throughput).
 */
TEST_F(impl, plot_draws_two_results_in_one_chart)
{
	static char svg[1 << 20], json[16384];
	char out[16384];
	int lines = 0;

	COMMAND_ONLY();
	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "%s bench --addr 127.0.0.1 --size 64 --size 8192 --duration 1 --runs 1 "
			    "--mode both --json >/tmp/rrds-plot-a.json", rrds_cmd())) TH_LOG("%s", out);
	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "%s bench --addr 127.0.0.1 --size 64 --size 8192 --duration 1 --runs 1 "
			    "--mode rate --json >/tmp/rrds-plot-b.json", rrds_cmd())) TH_LOG("%s", out);
	ASSERT_LT(0, read_file("/tmp/rrds-plot-a.json", json, sizeof(json)));
	TH_LOG("%s", json);
	expect_clean_bench(_metadata, json, 1);
	ASSERT_LT(0, read_file("/tmp/rrds-plot-b.json", json, sizeof(json)));
	TH_LOG("%s", json);
	expect_clean_bench(_metadata, json, 1);
	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "%s plot /tmp/rrds-plot-a.json /tmp/rrds-plot-b.json -o /tmp/rrds-plot.svg "
			    "2>&1", rrds_cmd())) TH_LOG("%s", out);
	ASSERT_LT(0, read_file("/tmp/rrds-plot.svg", svg, sizeof(svg)));
	EXPECT_EQ(0, strncmp(svg, "<svg", 4));
	EXPECT_NE(NULL, strstr(svg, "</svg>"));
	EXPECT_NE(NULL, strstr(svg, "rrds bench: 2 results"));
	EXPECT_NE(NULL, strstr(svg, variant->in_tree ? "/tmp/rrds-plot-a.json: impl=rds " :
						      "/tmp/rrds-plot-a.json: impl=rrds "));
	EXPECT_NE(NULL, strstr(svg, "/tmp/rrds-plot-b.json: impl="));
	EXPECT_NE(NULL, strstr(svg, ">Throughput<"));
	EXPECT_NE(NULL, strstr(svg, "stroke=\"#d62728\""));
	for (const char *l = strstr(svg, "<polyline"); l; l = strstr(l + 1, "<polyline"))
		lines++;
	EXPECT_EQ(6, lines) TH_LOG("%s", svg);
	/* The table is not JSON: refused, naming the file and line. */
	EXPECT_NE(0, sh_out(out, sizeof(out),
			    "%s bench --addr 127.0.0.1 --size 64 --duration 1 --runs 1 --mode rate "
			    ">/tmp/rrds-plot-a.json && %s plot /tmp/rrds-plot-a.json 2>&1",
			    rrds_cmd(), rrds_cmd()));
	EXPECT_NE(NULL, strstr(out, "/tmp/rrds-plot-a.json:1: not a line of")) TH_LOG("%s", out);
	unlink("/tmp/rrds-plot-a.json");
	unlink("/tmp/rrds-plot-b.json");
	unlink("/tmp/rrds-plot.svg");
}

/* What the counters, links, their ids and QPs look like after a stall. */
static void log_stall(void)
{
	fflush(stdout);
	sh("%s info counters 2>&1 | grep -E 'reset|drop|established|restart' | sed 's/^/# /'",
	   rrds_cmd());
	log_ib_links();
}

/*
 * rrds bench split in client and server (rds-stress's way), over loopback:
 * the server runs the receiving ends, the client the sending ends of two
 * tasks; rate and latency verified, against rrds and in-tree RDS alike.
 */
TEST_F(impl, bench_client_and_server)
{
	char out[16384];

	ASSERT_EQ(0, bench_server_start(NULL, "127.0.0.1", "default")) TH_LOG("%s", bench_server_log());
	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "%s bench --connect 127.0.0.1:4000 --addr 127.0.0.1 --size 64 "
			    "--size 65536 --duration 2 --runs 1 --mode both --tasks 2 --verify "
			    "--json 2>&1", rrds_cmd())) TH_LOG("%s\n%s", out, bench_server_log());
	TH_LOG("%s", out);
	expect_clean_bench(_metadata, out, 2);
	/* A rate and a latency median per size. */
	EXPECT_NE(NULL, strstr(out, "\"mode\":\"rate\",\"size\":65536,\"msgs_per_sec\":"));
	EXPECT_NE(NULL, strstr(out, "\"mode\":\"latency\",\"size\":64,\"msgs_per_sec\":"));
	bench_server_stop();
	/* One line per run served. */
	EXPECT_NE(NULL, strstr(bench_server_log(), "served rate 65536 B x 2 for 127.0.0.1:"));
	EXPECT_NE(NULL, strstr(bench_server_log(), "served latency 64 B x 2 for 127.0.0.1:"));
	/* No server: the client says so instead of hanging. */
	EXPECT_NE(0, sh_out(out, sizeof(out),
			    "%s bench --connect 127.0.0.1:4000 --addr 127.0.0.1 --size 64 "
			    "--duration 1 --runs 1 --mode rate --timeout 1 2>&1", rrds_cmd()));
	EXPECT_NE(NULL, strstr(out, "no answer from the server at 127.0.0.1:4000")) TH_LOG("%s", out);
}

/* The C example of the user guide (examples/rds_datagram.c). */
TEST_F(impl, c_example_datagram)
{
	char out[1024];

	ASSERT_EQ(0, sh_out(out, sizeof(out), "%s/build/rds_datagram 2>&1", selftests_dir()))
		TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "reply \"pong from b\""));
}

/* The tools over IB: rrds only (in-tree RDS/IB knows no namespaces nor iWARP). */
FIXTURE(ib_tools) {
	int unused;
};

FIXTURE_VARIANT(ib_tools) {
	const char *kind;	/* fixtures.sh <kind>-up */
	const char *local;	/* rrds-a's address */
	const char *remote;	/* rrds-b's address */
	bool atomics;		/* the device has (plain) atomics */
};

FIXTURE_VARIANT_ADD(ib_tools, rxe) {
	.kind = "rxe", .local = "10.254.1.1", .remote = "10.254.1.2", .atomics = true,
};

FIXTURE_VARIANT_ADD(ib_tools, siw) {
	.kind = "siw", .local = "10.254.2.1", .remote = "10.254.2.2", .atomics = false,
};

FIXTURE_SETUP(ib_tools)
{
	struct stat st;

	if (stat(rrds_cmd(), &st))
		SKIP(return, "%s not built", rrds_cmd());
	unload_module("rds_rdma");
	unload_module("rds");
	SKIP_WITHOUT_DRIVER(variant->kind);
	ASSERT_EQ(0, pair_up_loaded(variant->kind));
	/* The test and the commands it runs live in rrds-a. */
	ASSERT_EQ(0, enter_ns("rrds-a"));
}

/*
 * rrds listens in a namespace while a socket there is bound to an RDMA
 * address: binds one to @remote from rrds-b (where its listener must live)
 * and returns to rrds-a. The socket, or -1.
 */
static int listen_in_rrds_b(const char *remote)
{
	int fd;

	if (enter_ns("rrds-b"))
		return -1;
	fd = bound_socket(remote, 0);
	if (enter_ns("rrds-a")) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* The host pair of host_answers_pings_with_nothing_bound, per kind. */
#define HOST_SH_INIT	"nsenter --net=/proc/1/ns/net "

static void host_pair_down(const char *kind)
{
	char dev[64], veth[64];

	/* Only the case that made it has one: no processes for the others. */
	snprintf(dev, sizeof(dev), "/sys/class/infiniband/%s_h", kind);
	snprintf(veth, sizeof(veth), "/sys/class/net/%sh0", kind);
	if (access(dev, F_OK) && access(veth, F_OK))
		return;
	sh("rdma link del %s_h 2>/dev/null; rdma link del %s_g 2>/dev/null; "
	   HOST_SH_INIT "ip link del %sh0 2>/dev/null; true", kind, kind, kind);
}

FIXTURE_TEARDOWN(ib_tools)
{
	bench_server_stop();
	host_pair_down(variant->kind);
}

/*
 * The build users load (make modules: no test hooks) is the one clippy
 * checks and no other case loads; make check keeps it for this case as
 * RRDS_PRODUCTION_KO. In place of the test build, it carries a verified
 * bench in both modes between the namespaces, answers pings, and unloads.
 */
TEST_F(ib_tools, production_build_carries_verified_traffic)
{
	const char *ko = getenv("RRDS_PRODUCTION_KO");
	char out[16384];
	int i, peer;

	if (!ko || access(ko, R_OK))
		SKIP(return, "no production build here (make check passes RRDS_PRODUCTION_KO)");
	ASSERT_EQ(0, rrds_unload());
	ASSERT_EQ(0, sh("insmod %s", ko));
	/* It is the production build: no debugfs hooks. */
	EXPECT_EQ(0, access(RRDS_DEBUGFS, F_OK));
	EXPECT_NE(0, access(RRDS_DEBUGFS "/xmit_hold", F_OK));
	EXPECT_EQ(0, sh_out(out, sizeof(out),
			    "%s bench --addr %s --peer-addr %s --peer-netns rrds-b --transport ib "
			    "--size 64 --size 8192 --duration 2 --runs 1 --mode both --verify "
			    "--json 2>&1",
			    rrds_cmd(), variant->local, variant->remote)) TH_LOG("%s", out);
	expect_clean_bench(_metadata, out, 1);
	/* rrds-b's stack answers while a socket there is bound (it listens). */
	peer = listen_in_rrds_b(variant->remote);
	ASSERT_LE(0, peer);
	EXPECT_EQ(0, sh_out(out, sizeof(out), "%s ping -c 3 -i 0.1 -W 20 -I %s %s 2>&1",
			    rrds_cmd(), variant->local, variant->remote)) TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "3 pings sent, 3 pongs received")) TH_LOG("%s", out);
	close(peer);
	/* The links close in the background: unloading may wait for them. */
	for (i = 0; i < 100 && rrds_unload(); i++)
		usleep(100 * 1000);
	EXPECT_EQ(0, rrds_loaded());
	ASSERT_EQ(0, rrds_load());
}

/*
 * rrds bench between the two namespaces, payloads verified; three pairs of
 * sockets at once (--tasks) share the one connection.
 */
TEST_F(ib_tools, bench_across_namespaces_verified)
{
	char out[16384];

	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "%s bench --addr %s --peer-addr %s --peer-netns rrds-b --transport ib "
			    "--size 8192 --duration 5 --runs 1 --mode both --tasks 3 --verify "
			    "--json 2>&1",
			    rrds_cmd(), variant->local, variant->remote)) TH_LOG("%s", out);
	TH_LOG("%s", out);
	expect_clean_bench(_metadata, out, 3);
	EXPECT_NE(NULL, strstr(out, "\"transport\":\"ib\""));
}

/*
 * rrds bench --mode register: GET_MR + FREE_MR cycles of 4 KiB and 1 MiB in
 * rrds-b (two tasks), timed, nothing left pinned after.
 */
TEST_F(ib_tools, bench_register_cycles)
{
	char out[16384];

	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "%s bench --addr %s --peer-addr %s --peer-netns rrds-b --transport ib "
			    "--size 4096 --size 1m --duration 2 --runs 1 --mode register --tasks 2 "
			    "--json 2>&1",
			    rrds_cmd(), variant->local, variant->remote)) TH_LOG("%s", out);
	TH_LOG("%s", out);
	expect_clean_bench(_metadata, out, 2);
	EXPECT_NE(NULL, strstr(out, "\"mode\":\"register\",\"size\":4096,\"msgs_per_sec\":"));
	EXPECT_NE(NULL, strstr(out, "\"mode\":\"register\",\"size\":1048576,\"msgs_per_sec\":"));
	EXPECT_EQ(NULL, strstr(out, "\"lat_p50_us\":null"));
	/*
	 * Every cycle freed what it registered: nothing pinned is left once the
	 * last invalidations complete (the cycles' FREE_MR waits for them, with
	 * RDS_RDMA_INVALIDATE; the probes' too).
	 */
	EXPECT_EQ(0, sh("for i in $(seq 50); do %s info counters | "
			"awk '$1 == \"mr_pages_pinned\" { p = $2 } "
			"$1 == \"mr_pages_unpinned\" { u = $2 } END { exit !(p > 0 && p == u) }' "
			"&& exit 0; sleep 0.2; done; exit 1", rrds_cmd()));
}

/*
 * --plot charts the RDMA and register modes too (they drew "no data"):
 * throughput and operation rate with a line per direction, registration
 * latency; -D (rds-stress's RDMA size) sizes the operations and regions.
 */
TEST_F(ib_tools, bench_plot_charts_rdma_and_register)
{
	static char svg[1 << 20];
	char out[16384];

	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "%s bench -r %s --peer-addr %s --peer-netns rrds-b --transport ib "
			    "-D 64k -d 8 -T 2 --timeout 60 --runs 1 --mode rdma -v --json "
			    "--plot /tmp/rrds-rdma.svg 2>&1",
			    rrds_cmd(), variant->local, variant->remote)) {
		TH_LOG("%s", out);
		log_stall();
	}
	TH_LOG("%s", out);
	expect_clean_bench(_metadata, out, 1);
	EXPECT_NE(NULL, strstr(out, "\"mode\":\"rdma_write\",\"size\":65536,"));
	EXPECT_NE(NULL, strstr(out, "\"mode\":\"rdma_read\",\"size\":65536,"));
	ASSERT_LT(0, read_file("/tmp/rrds-rdma.svg", svg, sizeof(svg)));
	EXPECT_NE(NULL, strstr(svg, ">Throughput<"));
	EXPECT_NE(NULL, strstr(svg, ">RDMA operation rate<"));
	EXPECT_NE(NULL, strstr(svg, ">RDMA write<"));
	EXPECT_NE(NULL, strstr(svg, ">RDMA read<"));
	EXPECT_NE(NULL, strstr(svg, "<polyline"));
	EXPECT_EQ(NULL, strstr(svg, "no data")) TH_LOG("%s", svg);
	unlink("/tmp/rrds-rdma.svg");

	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "%s bench --addr %s --peer-addr %s --peer-netns rrds-b --transport ib "
			    "-D 4k -T 1 --runs 1 --mode register --json "
			    "--plot /tmp/rrds-register.svg 2>&1",
			    rrds_cmd(), variant->local, variant->remote)) TH_LOG("%s", out);
	TH_LOG("%s", out);
	expect_clean_bench(_metadata, out, 1);
	ASSERT_LT(0, read_file("/tmp/rrds-register.svg", svg, sizeof(svg)));
	EXPECT_NE(NULL, strstr(svg, ">Registration latency<"));
	EXPECT_NE(NULL, strstr(svg, "<polyline"));
	EXPECT_EQ(NULL, strstr(svg, "no data")) TH_LOG("%s", svg);
	unlink("/tmp/rrds-register.svg");
}

/*
 * rrds bench split in client and server across the namespaces: the server
 * in rrds-b runs the receiving ends (and, in RDMA modes, registers the
 * regions and hands their cookies over), the client here the sending ends
 * of two tasks; every mode verified.
 */
TEST_F(ib_tools, bench_client_and_server)
{
	static const char *const runs[] = {
		"--mode both --size 8192",
		"--mode rdma --size 64k --depth 8 --timeout 60",
	};
	char out[16384];

	ASSERT_EQ(0, bench_server_start("rrds-b", variant->remote, "ib"))
		TH_LOG("%s", bench_server_log());
	for (unsigned int i = 0; i < 2; i++) {
		ASSERT_EQ(0, sh_out(out, sizeof(out),
				    "%s bench --connect %s:4000 --addr %s --transport ib %s "
				    "--duration 2 --runs 1 --tasks 2 --verify --json 2>&1",
				    rrds_cmd(), variant->remote, variant->local, runs[i])) {
			TH_LOG("%s\n%s", out, bench_server_log());
			log_stall();
		}
		TH_LOG("%s", out);
		expect_clean_bench(_metadata, out, 2);
	}
	bench_server_stop();
	TH_LOG("%s", bench_server_log());
	EXPECT_NE(NULL, strstr(bench_server_log(), "served rate 8192 B x 2"));
	EXPECT_NE(NULL, strstr(bench_server_log(), "served latency 8192 B x 2"));
	EXPECT_NE(NULL, strstr(bench_server_log(), "served rdma_write 65536 B x 2"));
	EXPECT_NE(NULL, strstr(bench_server_log(), "served rdma_read 65536 B x 2"));
}

/*
 * The user guide's RDMA example (examples/rds_rdma_write.c): a receiver in
 * rrds-b registers a page, the sender here writes it with an RDMA WRITE
 * and gets the outcome notification, the receiver finds the bytes.
 */
TEST_F(ib_tools, c_example_rdma_write)
{
	char out[2048];

	ASSERT_EQ(0, sh_out(out, sizeof(out), "%s/build/rds_rdma_write %s %s rrds-b 2>&1",
			    selftests_dir(), variant->local, variant->remote)) TH_LOG("%s", out);
	TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "sender: RDMA WRITE token 42 status 0 (success)"));
	EXPECT_NE(NULL, strstr(out, "receiver: message \"written\", 4096 bytes written"));
}

/*
 * rrds bench's RDMA modes between the namespaces: WRITEs into and READs
 * from regions the receiver registered, every operation's bytes verified
 * and every outcome a success.
 */
TEST_F(ib_tools, bench_rdma_write_and_read_verified)
{
	static const char *const modes[] = { "rdma-write", "rdma-read" };
	/*
	 * 256 KiB x 8 and 1 MiB x 2 are 512 page-sized work requests in
	 * flight, twice the send ring: an operation that finds the ring full
	 * must wait for room, not be reported DROPPED with its message
	 * delivered and the memory never written. At 256 KiB two tasks
	 * (socket pairs) share the connection. siw READs run well under
	 * 1 MB/s under TCG: a generous idle timeout.
	 */
	static const char *const shapes[] = { "--size 64k --depth 8",
					       "--size 256k --depth 8 --tasks 2",
					       "--size 1m --depth 2" };
	char out[16384];

	for (unsigned int i = 0; i < 6; i++) {
		ASSERT_EQ(0, sh_out(out, sizeof(out),
				    "%s bench --addr %s --peer-addr %s --peer-netns rrds-b "
				    "--transport ib %s --duration 2 --timeout 60 "
				    "--runs 1 --mode %s --verify --json 2>&1",
				    rrds_cmd(), variant->local, variant->remote, shapes[i / 2],
				    modes[i % 2])) {
			TH_LOG("%s", out);
			/* Logged here: the failed assertion ends the test after this block. */
			log_stall();
		}
		TH_LOG("%s", out);
		expect_clean_bench(_metadata, out, strstr(shapes[i / 2], "--tasks 2") ? 2 : 1);
		EXPECT_NE(NULL, strstr(out, i % 2 ? "\"mode\":\"rdma_read\"" : "\"mode\":\"rdma_write\""));
	}
}

/*
 * rrds mr: the crate's MemoryRegion registers and frees, a new key each
 * time: a pooled MR's key byte is random (never the one before), so 50
 * registrations take about 45 distinct keys, and fewer than 35 would mean
 * the keys repeat.
 */
TEST_F(ib_tools, mr_registers_and_frees)
{
	char out[4096], *distinct;

	ASSERT_EQ(0, sh_out(out, sizeof(out), "%s mr -c 50 -s 65536 --invalidate --json %s 2>&1",
			    rrds_cmd(), variant->local)) TH_LOG("%s", out);
	TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "\"count\":50,"));
	distinct = strstr(out, "\"distinct_keys\":");
	ASSERT_NE(NULL, distinct);
	EXPECT_LE(35, atoi(distinct + strlen("\"distinct_keys\":")));
	/* Unbound to an RDMA address: the kernel's errno comes through. */
	EXPECT_NE(0, sh_out(out, sizeof(out), "%s mr -c 1 127.0.0.1 2>&1", rrds_cmd()));
	EXPECT_NE(NULL, strstr(out, "RDS_GET_MR #1")) TH_LOG("%s", out);
}

/*
 * The crate's own integration tests (tools/rrds/tests/kernel.rs, ignored
 * by a plain cargo test), built by make check's cargo test: memory mapped
 * in a send reaches the peer in rrds-b as its cookie, bad mappings fail
 * with the kernel's errno, atomics change the peer's memory, a dropped
 * region's cookie no longer reaches its memory, the receive path's
 * latency comes in the spans asked for (SO_RDS_MSG_RXPATH_LATENCY), and
 * vectored and batched sends and receives carry whole datagrams.
 */
TEST_F(ib_tools, crate_integration_tests)
{
	char out[8192];

	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "bin=$(ls -t %s/../tools/target/release/deps/kernel-* | grep -v '[.]d$' | head -1) && "
			    "RRDS_TEST_LOCAL=%s RRDS_TEST_REMOTE=%s RRDS_TEST_PEER_NETNS=rrds-b "
			    "RRDS_TEST_DEVICE=%s RRDS_TEST_ATOMICS=%d $bin --ignored "
			    "--test-threads=1 2>&1",
			    selftests_dir(), variant->local, variant->remote, variant->kind,
			    variant->atomics))
		TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "test result: ok. 7 passed; 0 failed")) TH_LOG("%s", out);
	/*
	 * AsyncRdsSocket (tools/rrds/tests/kernel_async.rs, built by make
	 * check's cargo test --features tokio), over loopback: two async
	 * sockets ping-pong, and a send to a congested port waits until the
	 * receiver drains, then goes.
	 */
	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "bin=$(ls -t %s/../tools/target/release/deps/kernel_async-* | grep -v '[.]d$' | head -1) && "
			    "$bin --ignored --test-threads=1 2>&1",
			    selftests_dir()))
		TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "test result: ok. 2 passed; 0 failed")) TH_LOG("%s", out);
}

/* rrds ping gets pongs from the other namespace; rrds info shows the connection. */
TEST_F(ib_tools, ping_and_info_show_the_connection)
{
	char out[8192], want[64];
	int peer;

	peer = listen_in_rrds_b(variant->remote);
	ASSERT_LE(0, peer);
	ASSERT_EQ(0, sh_out(out, sizeof(out), "%s ping -c 3 -i 0.1 -W 20 -I %s %s 2>&1",
			    rrds_cmd(), variant->local, variant->remote)) TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "3 pings sent, 3 pongs received")) TH_LOG("%s", out);
	/* A socket kept open keeps the connection (and the namespace listening). */
	{
		int fd = bound_socket(variant->local, 0);
		struct sockaddr_in to = sin4(variant->remote, 0);

		ASSERT_LE(0, fd);
		/* Port 0: a ping, answered by rrds-b's stack; sets the connection up. */
		ASSERT_EQ(0, ERR(sendto(fd, "", 0, 0, (struct sockaddr *)&to, sizeof(to))));
		/* -Q: the pings go on a connection of their own TOS. */
		ASSERT_EQ(0, sh_out(out, sizeof(out), "%s ping -c 1 -Q 3 -W 20 -I %s %s 2>&1",
				    rrds_cmd(), variant->local, variant->remote)) TH_LOG("%s", out);
		ASSERT_EQ(0, sh_out(out, sizeof(out), "sleep 1; %s info connections 2>&1",
				    rrds_cmd()));
		TH_LOG("%s", out);
		snprintf(want, sizeof(want), "%s", variant->remote);
		EXPECT_NE(NULL, strstr(out, want));
		EXPECT_NE(NULL, strstr(out, "infiniband"));
		EXPECT_NE(NULL, strstr(out, "  3 infiniband"));
		ASSERT_EQ(0, sh_out(out, sizeof(out), "%s info ib-connections 2>&1", rrds_cmd()));
		TH_LOG("%s", out);
		EXPECT_NE(NULL, strstr(out, variant->remote));
		close(fd);
	}
	close(peer);
}

/*
 * rrds watch prints the namespace's connection events: started in rrds-a
 * (its socket bound there), it shows the link to rrds-b coming up with a
 * message, and going idle once net.rrds.idle_timeout_secs is 2.
 */
TEST_F(ib_tools, watch_prints_link_up_and_idle_down)
{
	char out[4096], want[96];
	struct sockaddr_in to = sin4(variant->remote, 4100);
	int peer, fd;

	ASSERT_EQ(0, enter_ns("rrds-b"));
	peer = bound_socket(variant->remote, 4100);
	ASSERT_EQ(0, enter_ns("rrds-a"));
	ASSERT_LE(0, peer);
	ASSERT_EQ(0, sh("rm -f /tmp/rrds-watch.out; %s watch -I %s -c 2 -d 60 >/tmp/rrds-watch.out 2>&1 & "
			"for i in $(seq 100); do grep -q watching /tmp/rrds-watch.out && exit 0; "
			"sleep 0.1; done; exit 1", rrds_cmd(), variant->local));
	fd = bound_socket(variant->local, 0);
	ASSERT_LE(0, fd);
	ASSERT_EQ(1, ERR(sendto(fd, "x", 1, 0, (struct sockaddr *)&to, sizeof(to))));
	ASSERT_EQ(0, sh("echo 2 > /proc/sys/net/rrds/idle_timeout_secs"));
	ASSERT_EQ(0, sh("for i in $(seq 300); do [ $(grep -c tos /tmp/rrds-watch.out) -ge 2 ] && exit 0; "
			"sleep 0.1; done; exit 1"));
	ASSERT_EQ(0, sh_out(out, sizeof(out), "cat /tmp/rrds-watch.out"));
	TH_LOG("%s", out);
	snprintf(want, sizeof(want), "%s -> %s tos 0: up\n", variant->local, variant->remote);
	EXPECT_NE(NULL, strstr(out, want));
	snprintf(want, sizeof(want), "%s -> %s tos 0: down (idle)\n", variant->local, variant->remote);
	EXPECT_NE(NULL, strstr(out, want));
	sh("echo 300 > /proc/sys/net/rrds/idle_timeout_secs");
	close(fd);
	close(peer);
}

/*
 * A host answers rds-ping as soon as rrds is loaded, as upstream does: the
 * initial namespace listens on each of its RDMA addresses with no socket
 * bound. A pair of its own joins it to rrds-a: <kind>_h on veth <kind>h0
 * (10.254.5.1 and fd00:254:5::1 for rxe, .6 for siw) in the initial
 * namespace, <kind>_g on <kind>h1 (.2, ::2) in rrds-a. rrds ping from
 * rrds-a gets every pong over IPv4 and IPv6, and the initial namespace
 * lists the connection it accepted.
 * (Other namespaces listen only while a socket is bound: an rdma_cm id
 * would pin the namespace; see the admin guide.)
 */
TEST_F(ib_tools, host_answers_pings_with_nothing_bound)
{
	const int subnet = strcmp(variant->kind, "rxe") ? 6 : 5;
	const char *k = variant->kind;
	char out[8192], host[32], peer[32];

	snprintf(host, sizeof(host), "10.254.%d.1", subnet);
	snprintf(peer, sizeof(peer), "10.254.%d.2", subnet);
	host_pair_down(k);
	ASSERT_EQ(0, sh(HOST_SH_INIT "ip link add %sh0 type veth peer name %sh1 netns rrds-a && "
			HOST_SH_INIT "ip addr add %s/24 dev %sh0 && "
			HOST_SH_INIT "ip addr add fd00:254:%d::1/64 dev %sh0 nodad && "
			HOST_SH_INIT "ip link set %sh0 up && "
			"ip addr add %s/24 dev %sh1 && ip addr add fd00:254:%d::2/64 dev %sh1 nodad && "
			"ip link set %sh1 up && "
			HOST_SH_INIT "rdma link add %s_h type %s netdev %sh0 && "
			"rdma link add %s_g type %s netdev %sh1",
			k, k, host, k, subnet, k, k, peer, k, subnet, k, k, k, k, k, k, k, k));
	ASSERT_EQ(0, sh("for i in $(seq 100); do rdma link show %s_h/1 | grep -q ACTIVE && "
			"rdma link show %s_g/1 | grep -q ACTIVE && exit 0; sleep 0.1; done; exit 1",
			k, k));
	ASSERT_EQ(0, sh_out(out, sizeof(out), "%s ping -c 3 -i 0.1 -W 20 -I %s %s 2>&1",
			    rrds_cmd(), peer, host)) TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "3 pings sent, 3 pongs received")) TH_LOG("%s", out);
	/* And its IPv6 address (port 16385). */
	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "%s ping -c 3 -i 0.1 -W 20 -I fd00:254:%d::2 fd00:254:%d::1 2>&1",
			    rrds_cmd(), subnet, subnet)) TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "3 pings sent, 3 pongs received")) TH_LOG("%s", out);
	/* The host's side: a connection from its address, and no socket of its own. */
	ASSERT_EQ(0, sh_out(out, sizeof(out), HOST_SH_INIT "%s info connections 2>&1",
			    rrds_cmd()));
	EXPECT_NE(NULL, strstr(out, host)) TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "infiniband")) TH_LOG("%s", out);
	ASSERT_EQ(0, sh_out(out, sizeof(out), HOST_SH_INIT "%s info sockets 2>&1", rrds_cmd()));
	EXPECT_EQ(NULL, strstr(out, host)) TH_LOG("%s", out);
	host_pair_down(k);
}

TEST_HARNESS_MAIN

// SPDX-License-Identifier: GPL-2.0
/*
 * The userspace tools (tools/, the `rrds` command) against the loaded
 * module, and the same commands against the in-tree rds module: they speak
 * only the RDS ABI, so both must answer alike.
 */
#include "kselftest_harness.h"
#include "rrds_test.h"

/* The rrds command, built by `make check` before the VM starts. */
static const char *rrds_cmd(void)
{
	static char path[512];

	snprintf(path, sizeof(path), "%s/../tools/target/release/rrds", selftests_dir());
	return path;
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
	sh("rmmod rds_rdma rds 2>/dev/null");
	if (variant->in_tree) {
		ASSERT_EQ(0, sh("modprobe rds"));
	} else {
		ASSERT_EQ(0, rrds_load());
	}
}

FIXTURE_TEARDOWN(impl)
{
	if (variant->in_tree)
		sh("rmmod rds");
	else
		rrds_ensure_unloaded();
}

TEST_F(impl, ping_gets_every_pong)
{
	char out[4096];

	ASSERT_EQ(0, sh_out(out, sizeof(out), "%s ping -c 3 -i 100 127.0.0.1 2>&1", rrds_cmd()));
	TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "3 pings sent, 3 pongs received"));
}

TEST_F(impl, info_counters_show_the_pings)
{
	char out[16384];

	ASSERT_EQ(0, sh("%s ping -c 2 -i 50 127.0.0.1 >/dev/null 2>&1", rrds_cmd()));
	ASSERT_EQ(0, sh_out(out, sizeof(out), "%s info counters 2>&1", rrds_cmd()));
	/* Each ping is counted by the answering side under upstream's name. */
	EXPECT_NE(NULL, strstr(out, "recv_ping"));
	EXPECT_NE(NULL, strstr(out, "send_pong"));
}

TEST_F(impl, bench_runs_with_payload_verification)
{
	char out[16384];

	ASSERT_EQ(0, sh_out(out, sizeof(out),
			    "%s bench --addr 127.0.0.1 --size 64 --size 65536 --duration 2 --runs 1 "
			    "--mode both --verify --json 2>&1", rrds_cmd()));
	TH_LOG("%s", out);
	EXPECT_NE(NULL, strstr(out, "\"type\":\"summary\""));
	EXPECT_NE(NULL, strstr(out, "\"errors\":0"));
	EXPECT_NE(NULL, strstr(out, variant->in_tree ? "\"impl\":\"rds\"" : "\"impl\":\"rrds\""));
}

TEST_HARNESS_MAIN

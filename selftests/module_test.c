// SPDX-License-Identifier: GPL-2.0
/*
 * rrds module lifecycle: load and unload with and without RDMA devices,
 * device hot add/remove/rename while loaded, and the debugfs device records
 * checked against what the device itself reports (sysfs, ibv_devinfo, the
 * driver's source).
 */
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <linux/rds.h>

#include "kselftest_harness.h"
#include "rrds_test.h"
#include "rds_rdma.h"

#define DEVICES_FILE RRDS_DEBUGFS "/devices"

/* The value of column @col in the row of device @dev of rrds/devices. */
static int device_field(const char *dev, const char *col, char *val, size_t size)
{
	return sh_out(val, size,
		      "awk -v dev=%s -v col=%s 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }"
		      " $1 == dev { found = 1; printf \"%%s\", $c } END { exit !(found && c) }' " DEVICES_FILE,
		      dev, col);
}

/* The protection domains rrds/devices counts for @dev (its pds column), or -1. */
static int device_pds(const char *dev)
{
	char val[32];

	return device_field(dev, "pds", val, sizeof(val)) ? -1 : atoi(val);
}

static int device_listed(const char *dev)
{
	char val[64];

	return device_field(dev, "name", val, sizeof(val)) == 0;
}

static int device_rows(void)
{
	char out[16];

	if (sh_out(out, sizeof(out), "tail -n +2 " DEVICES_FILE " | wc -l"))
		return -1;
	return atoi(out);
}

/* One value from `ibv_devinfo -v -d @dev`, e.g. "max_qp" or "atomic_cap". */
static int devinfo(const char *dev, const char *key, char *val, size_t size)
{
	return sh_out(val, size,
		      "ibv_devinfo -v -d %s | awk -F: '$1 ~ /^[ \\t]*%s$/ { sub(/^[ \\t]+/, \"\", $2); printf \"%%s\", $2; exit }'",
		      dev, key);
}

/* A #define or enum value from the kernel source the test kernel was built from. */
static long source_constant(const char *file, const char *name)
{
	char out[64];

	if (sh_out(out, sizeof(out),
		   "grep -hE '^[[:space:]]*(#define[[:space:]]+)?%s[[:space:]=]' \"$RRDS_KDIR/source/%s\" | grep -oE '[0-9]+' | head -n1",
		   name, file))
		return -1;
	return out[0] ? strtol(out, NULL, 0) : -1;
}

/* The device rows rrds lists with every pair up: two per pair (no siw on Debian's kernel). */
static int pair_rows(void)
{
	return rdma_driver_present("siw") ? 4 : 2;
}

/*
 * Tests with the rxe and siw pairs present (rxe alone on a kernel without
 * siw, such as Debian's). They come first: the pairs are created once (about
 * 20 s in the test VM) and kept between these tests.
 */
FIXTURE(devices) {
	bool siw;
	int rows;	/* devices rrds must list: two per pair */
};

FIXTURE_SETUP(devices)
{
	self->siw = rdma_driver_present("siw");
	self->rows = pair_rows();
	ASSERT_EQ(0, rrds_ensure_unloaded());
	ASSERT_EQ(0, pair_up("rxe"));
	if (self->siw)
		ASSERT_EQ(0, pair_up("siw"));
	ASSERT_EQ(0, rrds_load());
}

FIXTURE_TEARDOWN(devices)
{
	EXPECT_EQ(0, rrds_ensure_unloaded());
}

TEST_F(devices, debugfs_lists_rxe_and_siw)
{
	EXPECT_TRUE(device_listed("rxe_a"));
	EXPECT_TRUE(device_listed("rxe_b"));
	EXPECT_EQ(self->siw, device_listed("siw_a"));
	EXPECT_EQ(self->siw, device_listed("siw_b"));
	EXPECT_EQ(self->rows, device_rows());
}

/*
 * What a device's debugfs record must say, and where the truth comes from:
 * sysfs, ibv_devinfo and the driver's source.
 */
struct expected_record {
	const char *dev;
	const char *sysfs_node_type, *node_type;
	const char *devinfo_transport, *transport;
	const char *frwr_file, *frwr_constant;
	const char *devinfo_atomic, *atomic;
};

static void check_record(struct __test_metadata *_metadata, const struct expected_record *e)
{
	char path[128], val[64], want[64];
	long frwr = source_constant(e->frwr_file, e->frwr_constant);
	static const char *const same_as_devinfo[] = { "max_qp", "max_qp_wr", "max_sge_rd" };
	size_t i;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/node_type", e->dev);
	ASSERT_LT(0, read_file(path, val, sizeof(val)));
	ASSERT_STREQ(e->sysfs_node_type, val);
	ASSERT_EQ(0, device_field(e->dev, "node_type", val, sizeof(val)));
	EXPECT_STREQ(e->node_type, val);

	ASSERT_EQ(0, devinfo(e->dev, "transport", want, sizeof(want)));
	ASSERT_STREQ(e->devinfo_transport, want);
	ASSERT_EQ(0, device_field(e->dev, "transport", val, sizeof(val)));
	EXPECT_STREQ(e->transport, val);

	ASSERT_LT(0, frwr);
	ASSERT_EQ(0, device_field(e->dev, "max_fast_reg_page_list_len", val, sizeof(val)));
	EXPECT_EQ(frwr, strtol(val, NULL, 10));

	ASSERT_EQ(0, devinfo(e->dev, "atomic_cap", want, sizeof(want)));
	ASSERT_STREQ(e->devinfo_atomic, want);
	ASSERT_EQ(0, device_field(e->dev, "atomic", val, sizeof(val)));
	EXPECT_STREQ(e->atomic, val);

	for (i = 0; i < sizeof(same_as_devinfo) / sizeof(same_as_devinfo[0]); i++) {
		ASSERT_EQ(0, devinfo(e->dev, same_as_devinfo[i], want, sizeof(want)));
		ASSERT_EQ(0, device_field(e->dev, same_as_devinfo[i], val, sizeof(val)));
		EXPECT_STREQ(want, val);
	}

	/* Neither soft device has XRC: ibv_devinfo's capability list must agree. */
	EXPECT_NE(0, sh("ibv_devinfo -v -d %s | grep -qw XRC", e->dev));
	ASSERT_EQ(0, device_field(e->dev, "xrc", val, sizeof(val)));
	EXPECT_STREQ("no", val);
	ASSERT_EQ(0, device_field(e->dev, "mem_mgt_ext", val, sizeof(val)));
	EXPECT_STREQ("yes", val);
}

TEST_F(devices, rxe_record_matches_device)
{
	static const struct expected_record rxe = {
		.dev = "rxe_a",
		.sysfs_node_type = "1: CA\n", .node_type = "ca",
		.devinfo_transport = "InfiniBand (0)", .transport = "roce",
		.frwr_file = "drivers/infiniband/sw/rxe/rxe_param.h",
		.frwr_constant = "RXE_MAX_FMR_PAGE_LIST_LEN",
		.devinfo_atomic = "ATOMIC_HCA (1)", .atomic = "hca",
	};
	char link_layer[32];

	ASSERT_EQ(0, devinfo("rxe_a", "link_layer", link_layer, sizeof(link_layer)));
	ASSERT_STREQ("Ethernet", link_layer);
	check_record(_metadata, &rxe);
}

TEST_F(devices, siw_record_matches_device)
{
	static const struct expected_record siw = {
		.dev = "siw_b",
		.sysfs_node_type = "4: RNIC\n", .node_type = "rnic",
		.devinfo_transport = "iWARP (1)", .transport = "iwarp",
		.frwr_file = "drivers/infiniband/sw/siw/siw.h",
		.frwr_constant = "SIW_MAX_SGE_PBL",
		.devinfo_atomic = "ATOMIC_NONE (0)", .atomic = "none",
	};

	if (!self->siw)
		SKIP(return, "this kernel has no siw driver");
	check_record(_metadata, &siw);
}

TEST_F(devices, rename_follows_device)
{
	ASSERT_EQ(0, sh("rdma dev set rxe_a name rxe_z"));
	EXPECT_TRUE(device_listed("rxe_z"));
	EXPECT_FALSE(device_listed("rxe_a"));
	ASSERT_EQ(0, sh("rdma dev set rxe_z name rxe_a"));
	EXPECT_TRUE(device_listed("rxe_a"));
	EXPECT_FALSE(device_listed("rxe_z"));
}

TEST_F(devices, unload_with_devices_present)
{
	struct stat st;

	ASSERT_EQ(0, rrds_unload());
	ASSERT_EQ(-1, stat(RRDS_DEBUGFS, &st));
	/* The devices outlive rrds. */
	ASSERT_EQ(0, sh("rdma link show rxe_a/1 >/dev/null"));
	if (self->siw)
		ASSERT_EQ(0, sh("rdma link show siw_a/1 >/dev/null"));
	ASSERT_EQ(0, rrds_load());
	EXPECT_EQ(self->rows, device_rows());
}

TEST_F(devices, reload_cycles_with_devices)
{
	int i;

	for (i = 0; i < 10; i++) {
		ASSERT_EQ(0, rrds_unload());
		ASSERT_EQ(0, rrds_load());
		ASSERT_EQ(self->rows, device_rows());
	}
}

/*
 * kmemleak's suspects whose allocation backtrace has a frame in [@start,
 * @end) (rrds's text while it was loaded), after two scans; -1 on error.
 * Suspects must be over 5 s old, and rrds's frames are bare addresses once
 * it is unloaded.
 */
static int leaks_from(unsigned long start, unsigned long end)
{
	char line[256];
	int leaks = 0;
	bool counted = false;
	FILE *f;

	sleep(6);
	if (sh("echo scan > /sys/kernel/debug/kmemleak && echo scan > /sys/kernel/debug/kmemleak"))
		return -1;
	f = fopen("/sys/kernel/debug/kmemleak", "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long addr;

		if (!strncmp(line, "unreferenced object", 19))
			counted = false;
		else if (!counted && sscanf(line, " %lx", &addr) == 1 && addr >= start &&
			 addr < end) {
			leaks++;
			counted = true;
			printf("# leaked: %s", line);
		}
	}
	fclose(f);
	return leaks;
}

/*
 * Unloading frees everything rrds allocated, the buffers of its global
 * tables too (statics, which are never dropped): sockets, bindings,
 * congestion maps and monitors, connections, listeners and devices.
 */
TEST_F(devices, unload_leaves_nothing_allocated)
{
	unsigned long start, end, start2, end2;
	struct sockaddr_in to;
	int rx, tx, ib, on = 1;
	char buf[8];

	if (access("/sys/kernel/debug/kmemleak", W_OK))
		SKIP(return, "this kernel has no kmemleak");
	rx = bound_socket("127.0.0.1", 0);
	tx = bound_socket("127.0.0.1", 0);
	ASSERT_EQ(0, rrds_text_range(&start, &end));
	ASSERT_EQ(0, sh("echo clear > /sys/kernel/debug/kmemleak"));
	ASSERT_LE(0, rx);
	ASSERT_LE(0, tx);
	ASSERT_EQ(0, setsockopt(rx, SOL_RDS, RDS_CONG_MONITOR, &on, sizeof(on)));
	to = sin4("127.0.0.1", local_port(rx));
	ASSERT_EQ(1, sendto(tx, "x", 1, 0, (struct sockaddr *)&to, sizeof(to)));
	ASSERT_EQ(1, recv(rx, buf, sizeof(buf), 0));
	/* An address of rxe_a: its namespace gets a listener. */
	ASSERT_EQ(0, enter_ns("rrds-a"));
	ib = bound_socket("10.254.1.1", 0);
	ASSERT_LE(0, ib);
	close(ib);
	close(rx);
	close(tx);
	ASSERT_TRUE(WAIT_FOR(10, rrds_unload() == 0));
	/*
	 * The freed module memory may still hold pointers to what leaked until
	 * it is reused: the next load overwrites it.
	 */
	ASSERT_EQ(0, rrds_load());
	ASSERT_EQ(0, rrds_text_range(&start2, &end2));
	ASSERT_EQ(0, rrds_unload());
	EXPECT_EQ(0, leaks_from(start < start2 ? start : start2, end > end2 ? end : end2));
}

/*
 * RDS_GET_MR of one page on a socket bound to @ip in namespace @ns; the
 * socket (-1 on failure), which keeps the MR. Back in rrds-a after.
 */
static int socket_with_mr(const char *ns, const char *ip, void *page)
{
	uint64_t cookie;
	int fd;

	if (enter_ns(ns))
		return -1;
	fd = bound_socket(ip, 0);
	if (fd >= 0 && get_mr(fd, page, 4096, 0, &cookie)) {
		close(fd);
		fd = -1;
	}
	if (enter_ns("rrds-a")) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A namespace gets its own protection domain on a device when it first
 * uses it (here by registering memory), none before; unloading frees them.
 */
TEST_F(devices, protection_domains_come_with_use_and_go_on_unload)
{
	char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int a, b, siw = -1;

	ASSERT_NE(MAP_FAILED, page);
	EXPECT_EQ(0, rrds_pds(NULL));
	a = socket_with_mr("rrds-a", "10.254.1.1", page);
	ASSERT_LE(0, a);
	EXPECT_EQ(1, rrds_pds("rxe_a"));
	EXPECT_EQ(0, rrds_pds("rxe_b"));
	/* A second user in the same namespace shares the domain. */
	b = socket_with_mr("rrds-a", "10.254.1.1", page);
	ASSERT_LE(0, b);
	EXPECT_EQ(1, rrds_pds("rxe_a"));
	/* debugfs counts what rdma(8) lists. */
	EXPECT_EQ(1, device_pds("rxe_a"));
	EXPECT_EQ(0, device_pds("rxe_b"));
	if (self->siw) {
		siw = socket_with_mr("rrds-b", "10.254.2.2", page);
		ASSERT_LE(0, siw);
		EXPECT_EQ(0, rrds_pds("siw_a"));
		EXPECT_EQ(1, rrds_pds("siw_b"));
	}
	close(a);
	close(b);
	if (siw >= 0)
		close(siw);
	ASSERT_EQ(0, rrds_unload());
	EXPECT_EQ(0, rrds_pds(NULL));
	munmap(page, 4096);
}

/* Last of the device tests: it removes the rxe pair. */
TEST_F(devices, netdev_removal_removes_device)
{
	char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int user;

	ASSERT_NE(MAP_FAILED, page);
	ASSERT_EQ(self->rows, device_rows());
	/* rrds-a's domain on rxe_a, in use by an MR the socket keeps. */
	user = socket_with_mr("rrds-a", "10.254.1.1", page);
	ASSERT_LE(0, user);
	EXPECT_EQ(1, rrds_pds("rxe_a"));
	/* Deleting the veth pair unregisters both rxe devices on it. */
	ASSERT_EQ(0, sh("ip -n rrds-a link del rxa"));
	/* rxe unregisters from a workqueue: wait for both ends. */
	ASSERT_EQ(0, sh("for i in $(seq 100); do rdma link show rxe_a/1 || rdma link show rxe_b/1 || exit 0; sleep 0.1; done >/dev/null 2>&1; exit 1"));
	EXPECT_FALSE(device_listed("rxe_a"));
	EXPECT_FALSE(device_listed("rxe_b"));
	EXPECT_EQ(self->rows - 2, device_rows());
	/* Its protection domain went with it, though the socket still has the MR. */
	EXPECT_EQ(0, rrds_pds("rxe_a"));
	close(user);
	munmap(page, 4096);
}

/* Tests that start with no RDMA device at all and rrds not loaded. */
FIXTURE(bare) {
	int unused;
};

FIXTURE_SETUP(bare)
{
	ASSERT_EQ(0, rrds_ensure_unloaded());
	ASSERT_EQ(0, fixture("all-down"));
}

FIXTURE_TEARDOWN(bare)
{
	EXPECT_EQ(0, rrds_ensure_unloaded());
}

TEST_F(bare, load_unload_without_devices)
{
	struct stat st;
	char buf[4096];

	ASSERT_EQ(0, rrds_load());
	ASSERT_TRUE(rrds_loaded());
	/* Header only. */
	ASSERT_LT(0, read_file(DEVICES_FILE, buf, sizeof(buf)));
	ASSERT_EQ(0, strncmp(buf, "name node_type transport ", 25));
	ASSERT_EQ(0, device_rows());
	ASSERT_EQ(0, rrds_unload());
	ASSERT_FALSE(rrds_loaded());
	ASSERT_EQ(-1, stat(RRDS_DEBUGFS, &st));
	ASSERT_EQ(ENOENT, errno);
}

/*
 * The module's KUnit suites (the wire format, connect private data, packed
 * frames, the congestion bitmap, socket addresses) ran when it loaded, with
 * every case they have, and passed: /sys/kernel/debug/kunit/<suite>/results.
 */
TEST_F(bare, kunit_suites_pass)
{
	static const struct {
		const char *name;
		int cases;
	} suites[] = {
		{ "rrds_wire", 3 },
		{ "rrds_connect_private", 4 },
		{ "rrds_packed_frames", 2 },
		{ "rrds_cong_bitmap", 1 },
		{ "rrds_addr", 4 },
		{ "rrds_send_settling", 2 },
		{ "rrds_tables", 1 },
	};
	char path[128], want[128], results[16384];
	struct stat st;

	/* Debian's stock kernel has KUnit as a module (=m): rrds carries no suites there. */
	if (stat("/sys/kernel/debug/kunit", &st))
		SKIP(return, "no built-in KUnit in this kernel (the test kernel has CONFIG_KUNIT=y)");
	ASSERT_EQ(0, rrds_load());
	for (size_t i = 0; i < sizeof(suites) / sizeof(suites[0]); i++) {
		snprintf(path, sizeof(path), "/sys/kernel/debug/kunit/%s/results", suites[i].name);
		ASSERT_LT(0, read_file(path, results, sizeof(results)))
			TH_LOG("%s: no KUnit results (CONFIG_KUNIT in the test kernel?)", suites[i].name);
		EXPECT_EQ(NULL, strstr(results, "not ok")) TH_LOG("%s", results);
		EXPECT_EQ(NULL, strstr(results, "# SKIP")) TH_LOG("%s", results);
		snprintf(want, sizeof(want), "# Subtest: %s\n    1..%d\n", suites[i].name, suites[i].cases);
		EXPECT_NE(NULL, strstr(results, want)) TH_LOG("want \"%s\" in:\n%s", want, results);
		snprintf(want, sizeof(want), "\nok 1 %s\n", suites[i].name);
		EXPECT_NE(NULL, strstr(results, want)) TH_LOG("%s", results);
	}
	ASSERT_EQ(0, rrds_unload());
}

TEST_F(bare, second_load_fails_with_eexist)
{
	ASSERT_EQ(0, rrds_load());
	ASSERT_EQ(-EEXIST, rrds_load());
	ASSERT_EQ(0, rrds_unload());
	ASSERT_EQ(-ENOENT, rrds_unload());
}

TEST_F(bare, modinfo_shows_description_license_author_version)
{
	char out[256];

	ASSERT_EQ(0, sh_out(out, sizeof(out), "modinfo -F name %s", rrds_ko()));
	ASSERT_STREQ("rrds\n", out);
	ASSERT_EQ(0, sh_out(out, sizeof(out), "modinfo -F description %s", rrds_ko()));
	ASSERT_STREQ("Reliable Datagram Sockets over RDMA (Rust)\n", out);
	ASSERT_EQ(0, sh_out(out, sizeof(out), "modinfo -F license %s", rrds_ko()));
	ASSERT_STREQ("GPL\n", out);
	ASSERT_EQ(0, sh_out(out, sizeof(out), "modinfo -F author %s", rrds_ko()));
	ASSERT_STREQ("The rrds developers\n", out);
	ASSERT_EQ(0, sh_out(out, sizeof(out), "modinfo -F version %s", rrds_ko()));
	ASSERT_STREQ("0.1.0\n", out);
}

TEST_F(bare, hot_add_remove_while_loaded)
{
	bool siw = rdma_driver_present("siw");
	int rows = pair_rows();

	ASSERT_EQ(0, rrds_load());
	ASSERT_EQ(0, device_rows());

	ASSERT_EQ(0, pair_up("rxe"));
	EXPECT_TRUE(device_listed("rxe_a"));
	EXPECT_TRUE(device_listed("rxe_b"));
	if (siw) {
		ASSERT_EQ(0, pair_up("siw"));
		EXPECT_TRUE(device_listed("siw_a"));
		EXPECT_TRUE(device_listed("siw_b"));
	}
	EXPECT_EQ(rows, device_rows());

	/* One device goes, its peer stays. */
	ASSERT_EQ(0, sh("rdma link del rxe_a"));
	EXPECT_FALSE(device_listed("rxe_a"));
	EXPECT_TRUE(device_listed("rxe_b"));
	EXPECT_EQ(rows - 1, device_rows());

	/* Re-adding it shows it again. */
	ASSERT_EQ(0, pair_up("rxe"));
	EXPECT_TRUE(device_listed("rxe_a"));
	EXPECT_EQ(rows, device_rows());
}

/*
 * rrds's workers wait between ticks in interruptible sleeps: a worker in
 * uninterruptible sleep (D) counts towards the load average, so a watchdog
 * that napped in msleep() showed an idle host with rrds loaded at a load of
 * 1.0 or more. Sampled 20 times over 2 s with an RDMA pair up (the
 * watchdog ticks every second, the host's listeners are on the devices).
 */
TEST_F(bare, idle_module_adds_nothing_to_the_load_average)
{
	int samples_with_d = 0, d;

	ASSERT_EQ(0, pair_up("rxe"));
	ASSERT_EQ(0, rrds_load());
	sleep(2);
	for (int i = 0; i < 20; i++) {
		d = rrds_busy_workers(true);
		ASSERT_LE(0, d);
		if (d) {
			samples_with_d++;
			sh("ps -eo stat=,pid=,wchan:32=,comm= | awk '$1 ~ /^D/ && $NF ~ /[+]rrds$/' | "
			   "sed 's/^/# in uninterruptible sleep: /' >&2");
		}
		usleep(100 * 1000);
	}
	EXPECT_GE(2, samples_with_d);
}

TEST_HARNESS_MAIN

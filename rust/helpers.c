// SPDX-License-Identifier: GPL-2.0
/*
 * The only C in rrds: wrappers for static inline functions and macros that
 * Rust cannot call, and the module's version string. No logic lives here.
 */
#include <linux/module.h>
#include "rrds_bindings.h"

MODULE_VERSION("0.1.0");

bool rrds_rdma_protocol_roce(const struct ib_device *device, u32 port)
{
	return rdma_protocol_roce(device, port);
}

bool rrds_rdma_protocol_iwarp(const struct ib_device *device, u32 port)
{
	return rdma_protocol_iwarp(device, port);
}

bool rrds_rdma_protocol_ib(const struct ib_device *device, u32 port)
{
	return rdma_protocol_ib(device, port);
}

u32 rrds_rdma_start_port(const struct ib_device *device)
{
	return rdma_start_port(device);
}

u32 rrds_rdma_end_port(const struct ib_device *device)
{
	return rdma_end_port(device);
}

void rrds_dev_put(struct net_device *dev)
{
	dev_put(dev);
}

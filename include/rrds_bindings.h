/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Input of the module's bindgen run (see Kbuild and rust/ffi/allowlist):
 * the kernel headers rrds uses and the prototypes of the C glue in
 * rust/helpers.c. Nothing here holds logic.
 */
#ifndef RRDS_BINDINGS_H
#define RRDS_BINDINGS_H

#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>

/* rust/helpers.c: one-line wrappers over static inline functions. */
bool rrds_rdma_protocol_roce(const struct ib_device *device, u32 port);
bool rrds_rdma_protocol_iwarp(const struct ib_device *device, u32 port);
bool rrds_rdma_protocol_ib(const struct ib_device *device, u32 port);
u32 rrds_rdma_start_port(const struct ib_device *device);
u32 rrds_rdma_end_port(const struct ib_device *device);
void rrds_dev_put(struct net_device *dev);

#endif /* RRDS_BINDINGS_H */

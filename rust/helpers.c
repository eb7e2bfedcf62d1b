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

/* Checked against bindgen's view at module load (rust/ffi/net.rs). */
size_t rrds_sizeof_rrds_sock(void)
{
	return sizeof(struct rrds_sock);
}

int rrds_sk_sndbuf(const struct sock *sk)
{
	return READ_ONCE(sk->sk_sndbuf);
}

long rrds_sk_rcvtimeo(const struct sock *sk)
{
	return READ_ONCE(sk->sk_rcvtimeo);
}

struct net *rrds_sock_net(const struct sock *sk)
{
	return sock_net(sk);
}

void rrds_sock_hold(struct sock *sk)
{
	sock_hold(sk);
}

void rrds_sock_put(struct sock *sk)
{
	sock_put(sk);
}

void rrds_sock_orphan(struct sock *sk)
{
	sock_orphan(sk);
}

void rrds_lock_sock(struct sock *sk)
{
	lock_sock(sk);
}

int rrds_copy_from_sockptr(void *dst, sockptr_t src, size_t size)
{
	return copy_from_sockptr(dst, src, size);
}

int rrds_sk_rcvbuf(const struct sock *sk)
{
	return READ_ONCE(sk->sk_rcvbuf);
}

long rrds_sk_sndtimeo(const struct sock *sk)
{
	return READ_ONCE(sk->sk_sndtimeo);
}

bool rrds_sock_flag(const struct sock *sk, int flag)
{
	return sock_flag(sk, flag);
}

void rrds_sock_set_flag(struct sock *sk, int flag, bool on)
{
	sock_valbool_flag(sk, flag, on);
}

u64 rrds_sock_i_ino(const struct sock *sk)
{
	return sock_i_ino(sk);
}

u64 rrds_ktime_get_real_ns(void)
{
	return ktime_get_real_ns();
}

u64 rrds_ktime_get_ns(void)
{
	return ktime_get_ns();
}

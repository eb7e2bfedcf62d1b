/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Input of the module's bindgen run (see Kbuild and rust/ffi/allowlist):
 * the kernel headers rrds uses and the prototypes of the C glue in
 * rust/helpers.c. Nothing here holds logic.
 */
#ifndef RRDS_BINDINGS_H
#define RRDS_BINDINGS_H

#include <linux/in.h>
#include <linux/in6.h>
#include <linux/inetdevice.h>
#include <net/addrconf.h>
#include <net/if_inet6.h>
#include <linux/netdevice.h>
#include <linux/rds.h>
#include <linux/skbuff.h>
#include <linux/socket.h>
#include <linux/sockptr.h>
#include <linux/sysctl.h>
#include <net/net_namespace.h>
#include <net/sock.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_addr.h>
#include <rdma/rdma_cm.h>
#include <linux/task_work.h>
#include <linux/pid.h>
#include <linux/wait.h>
#include <linux/spinlock.h>
#include <linux/capability.h>
#include <linux/mm.h>
#include <linux/scatterlist.h>
#include <linux/sched/mm.h>
#include <linux/nsproxy.h>
#include <uapi/linux/rrds.h>

/*
 * The sock of an rrds socket: the generic struct sock, then a pointer to the
 * socket's Rust state (an Arc, see rust/ffi/net.rs). Layout glue only.
 */
struct rrds_sock {
	struct sock sk;
	void *state;
};

/* rust/helpers.c: one-line wrappers over static inline functions. */
bool rrds_rdma_protocol_roce(const struct ib_device *device, u32 port);
bool rrds_rdma_protocol_iwarp(const struct ib_device *device, u32 port);
bool rrds_rdma_protocol_ib(const struct ib_device *device, u32 port);
u32 rrds_rdma_start_port(const struct ib_device *device);
u32 rrds_rdma_end_port(const struct ib_device *device);
void rrds_dev_put(struct net_device *dev);
struct net_device *rrds_rdma_vlan_dev_real_dev(const struct net_device *dev);
struct net *rrds_init_net(void);
struct net_device *rrds_first_netdev_rcu(struct net *net);
struct net_device *rrds_next_netdev_rcu(struct net_device *dev);
const struct in_ifaddr *rrds_first_ifa_rcu(const struct net_device *dev);
const struct in_ifaddr *rrds_next_ifa_rcu(const struct in_ifaddr *ifa);
struct inet6_ifaddr *rrds_first_ifa6_rcu(struct net_device *dev);
struct inet6_ifaddr *rrds_next_ifa6_rcu(struct net_device *dev, struct inet6_ifaddr *ifa);
size_t rrds_sizeof_rrds_sock(void);
int rrds_sk_sndbuf(const struct sock *sk);
long rrds_sk_rcvtimeo(const struct sock *sk);
unsigned int rrds_sk_busy_poll_usec(const struct sock *sk);
bool rrds_poll_busy_loop(poll_table *table);
struct net *rrds_sock_net(const struct sock *sk);
void rrds_sock_hold(struct sock *sk);
void rrds_sock_put(struct sock *sk);
void rrds_sock_orphan(struct sock *sk);
void rrds_lock_sock(struct sock *sk);
int rrds_copy_from_sockptr(void *dst, sockptr_t src, size_t size);
int rrds_sk_rcvbuf(const struct sock *sk);
long rrds_sk_sndtimeo(const struct sock *sk);
bool rrds_sock_flag(const struct sock *sk, int flag);
void rrds_sock_set_flag(struct sock *sk, int flag, bool on);
u64 rrds_sock_i_ino(const struct sock *sk);
u64 rrds_ktime_get_real_ns(void);
u64 rrds_ktime_get_ns(void);
size_t rrds_msg_data_left(struct msghdr *msg);
bool rrds_wq_has_sleeper(struct wait_queue_head *wq_head);
struct rdma_cm_id *rrds_rdma_create_id(struct net *net, rdma_cm_event_handler handler,
				       void *context, enum rdma_ucm_port_space ps,
				       enum ib_qp_type qp_type);
struct ib_cq *rrds_ib_alloc_cq(struct ib_device *dev, void *private, int nr_cqe,
			       enum ib_poll_context poll_ctx);
struct ib_cq *rrds_ib_create_cq(struct ib_device *dev, ib_comp_handler handler,
				void *context, int nr_cqe);
int rrds_ib_req_notify_cq(struct ib_cq *cq);
unsigned int rrds_jiffies_to_usecs(unsigned long j);
bool rrds_need_resched(void);
void rrds_cpu_relax(void);
int rrds_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
		      const struct ib_send_wr **bad_wr);
int rrds_ib_post_srq_recv(struct ib_srq *srq, const struct ib_recv_wr *wr,
			  const struct ib_recv_wr **bad_wr);
int rrds_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
		      const struct ib_recv_wr **bad_wr);
u64 rrds_ib_dma_map_page(struct ib_device *dev, struct page *page, unsigned long offset,
			 size_t size, enum dma_data_direction direction);
void rrds_ib_dma_unmap_page(struct ib_device *dev, u64 addr, size_t size,
			    enum dma_data_direction direction);
int rrds_ib_dma_mapping_error(struct ib_device *dev, u64 dma_addr);
bool rrds_ib_uses_virt_dma(struct ib_device *dev);
void rrds_ib_dma_sync_single_for_cpu(struct ib_device *dev, u64 addr, size_t size,
				     enum dma_data_direction dir);
void rrds_ib_dma_sync_single_for_device(struct ib_device *dev, u64 addr, size_t size,
					enum dma_data_direction dir);
struct workqueue_struct *rrds_alloc_workqueue(void);
struct workqueue_struct *rrds_alloc_cq_workqueue(void);
bool rrds_task_exiting(struct task_struct *task);
bool rrds_task_user_in_net(struct task_struct *task, const struct net *net);
struct ib_qp *rrds_ib_create_qp(struct ib_pd *pd, struct ib_qp_init_attr *attr);
int rrds_ib_destroy_qp(struct ib_qp *qp);
struct ib_srq *rrds_ib_create_srq(struct ib_pd *pd, struct ib_srq_init_attr *attr);
void rrds_ib_destroy_srq(struct ib_srq *srq);
void rrds_spin_lock_init(spinlock_t *lock, const char *name, struct lock_class_key *key);
unsigned long rrds_spin_lock_irqsave(spinlock_t *lock);
void rrds_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags);
bool rrds_spin_trylock_irqsave(spinlock_t *lock, unsigned long *flags);
void rrds_spin_assert_is_held(spinlock_t *lock);
struct pid *rrds_get_current_tgid(void);
wait_queue_head_t *rrds_pid_exit_waitqueue(struct pid *pid);
bool rrds_thread_group_exited(struct pid *pid);
void rrds_init_waitqueue_func_entry(struct wait_queue_entry *entry, wait_queue_func_t func);
bool rrds_capable_net_admin(void);
u32 rrds_current_euid(void);
bool rrds_module_get(void);
int rrds_ib_dma_map_sg(struct ib_device *dev, struct scatterlist *sg, int nents,
		       enum dma_data_direction direction);
void rrds_ib_dma_unmap_sg(struct ib_device *dev, struct scatterlist *sg, int nents,
			  enum dma_data_direction direction);
void rrds_sg_set_page(struct scatterlist *sg, struct page *page, unsigned int len,
		      unsigned int offset);
struct mm_struct *rrds_current_mm_grab(void);
void rrds_mmdrop(struct mm_struct *mm);
s64 rrds_mm_pinned_add(struct mm_struct *mm, s64 pages);
u64 rrds_rlimit_memlock(void);
void rrds_module_put(void);

#endif /* RRDS_BINDINGS_H */

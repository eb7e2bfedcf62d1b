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

struct net_device *rrds_rdma_vlan_dev_real_dev(const struct net_device *dev)
{
	return rdma_vlan_dev_real_dev(dev);
}

struct net *rrds_init_net(void)
{
	return &init_net;
}

/* The first netdev of @net, under rcu_read_lock (for_each_netdev_rcu). */
struct net_device *rrds_first_netdev_rcu(struct net *net)
{
	return list_first_or_null_rcu(&net->dev_base_head, struct net_device, dev_list);
}

struct net_device *rrds_next_netdev_rcu(struct net_device *dev)
{
	return next_net_device_rcu(dev);
}

/* @dev's first IPv4 address, under rcu_read_lock (in_dev_for_each_ifa_rcu). */
const struct in_ifaddr *rrds_first_ifa_rcu(const struct net_device *dev)
{
	const struct in_device *in_dev = __in_dev_get_rcu(dev);

	return in_dev ? rcu_dereference(in_dev->ifa_list) : NULL;
}

const struct in_ifaddr *rrds_next_ifa_rcu(const struct in_ifaddr *ifa)
{
	return rcu_dereference(ifa->ifa_next);
}

/* @dev's first IPv6 address, under rcu_read_lock (as addrconf walks them). */
struct inet6_ifaddr *rrds_first_ifa6_rcu(struct net_device *dev)
{
	struct inet6_dev *idev = __in6_dev_get(dev);

	return idev ? list_first_or_null_rcu(&idev->addr_list, struct inet6_ifaddr, if_list) :
		      NULL;
}

struct inet6_ifaddr *rrds_next_ifa6_rcu(struct net_device *dev, struct inet6_ifaddr *ifa)
{
	struct inet6_dev *idev = __in6_dev_get(dev);

	return list_next_or_null_rcu(&idev->addr_list, &ifa->if_list, struct inet6_ifaddr,
				     if_list);
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

/* poll() and select() spin on the socket (net.core.busy_poll) this call. */
bool rrds_poll_busy_loop(poll_table *table)
{
	return poll_requested_events(table) & POLL_BUSY_LOOP;
}

/* SO_BUSY_POLL in microseconds (net.core.busy_read's value by default). */
unsigned int rrds_sk_busy_poll_usec(const struct sock *sk)
{
#ifdef CONFIG_NET_RX_BUSY_POLL
	return READ_ONCE(sk->sk_ll_usec);
#else
	return 0;
#endif
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

size_t rrds_msg_data_left(struct msghdr *msg)
{
	return msg_data_left(msg);
}

bool rrds_wq_has_sleeper(struct wait_queue_head *wq_head)
{
	return wq_has_sleeper(wq_head);
}

struct rdma_cm_id *rrds_rdma_create_id(struct net *net, rdma_cm_event_handler handler,
				       void *context, enum rdma_ucm_port_space ps,
				       enum ib_qp_type qp_type)
{
	return rdma_create_id(net, handler, context, ps, qp_type);
}

struct ib_cq *rrds_ib_alloc_cq(struct ib_device *dev, void *private, int nr_cqe,
			       enum ib_poll_context poll_ctx)
{
	return ib_alloc_cq_any(dev, private, nr_cqe, poll_ctx);
}

/* A CQ whose completions rrds polls itself (busy polling, ffi/ib_cq.rs). */
struct ib_cq *rrds_ib_create_cq(struct ib_device *dev, ib_comp_handler handler,
				void *context, int nr_cqe)
{
	struct ib_cq_init_attr attr = { .cqe = nr_cqe };

	return ib_create_cq(dev, handler, NULL, context, &attr);
}

int rrds_ib_req_notify_cq(struct ib_cq *cq)
{
	return ib_req_notify_cq(cq, IB_CQ_NEXT_COMP | IB_CQ_REPORT_MISSED_EVENTS);
}

unsigned int rrds_jiffies_to_usecs(unsigned long j)
{
	return jiffies_to_usecs(j);
}

/* Also a lazy request: a woken fair task (a kworker) waits for it. */
bool rrds_need_resched(void)
{
	return need_resched() || test_thread_flag(TIF_NEED_RESCHED_LAZY);
}

void rrds_cpu_relax(void)
{
	cpu_relax();
}

int rrds_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *wr,
		      const struct ib_send_wr **bad_wr)
{
	return ib_post_send(qp, wr, bad_wr);
}

int rrds_ib_post_srq_recv(struct ib_srq *srq, const struct ib_recv_wr *wr,
			  const struct ib_recv_wr **bad_wr)
{
	return ib_post_srq_recv(srq, wr, bad_wr);
}

int rrds_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr,
		      const struct ib_recv_wr **bad_wr)
{
	return ib_post_recv(qp, wr, bad_wr);
}

u64 rrds_ib_dma_map_page(struct ib_device *dev, struct page *page, unsigned long offset,
			 size_t size, enum dma_data_direction direction)
{
	return ib_dma_map_page(dev, page, offset, size, direction);
}

void rrds_ib_dma_unmap_page(struct ib_device *dev, u64 addr, size_t size,
			    enum dma_data_direction direction)
{
	ib_dma_unmap_page(dev, addr, size, direction);
}

int rrds_ib_dma_mapping_error(struct ib_device *dev, u64 dma_addr)
{
	return ib_dma_mapping_error(dev, dma_addr);
}

bool rrds_ib_uses_virt_dma(struct ib_device *dev)
{
	return ib_uses_virt_dma(dev);
}

void rrds_ib_dma_sync_single_for_cpu(struct ib_device *dev, u64 addr, size_t size,
				     enum dma_data_direction dir)
{
	ib_dma_sync_single_for_cpu(dev, addr, size, dir);
}

void rrds_ib_dma_sync_single_for_device(struct ib_device *dev, u64 addr, size_t size,
					enum dma_data_direction dir)
{
	ib_dma_sync_single_for_device(dev, addr, size, dir);
}

struct workqueue_struct *rrds_alloc_workqueue(void)
{
	return alloc_workqueue("rrds", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
}

/* Polls the CQs rrds polls itself; per CPU and high priority, as ib_comp_wq. */
struct workqueue_struct *rrds_alloc_cq_workqueue(void)
{
	return alloc_workqueue("rrds_cq", WQ_HIGHPRI | WQ_MEM_RECLAIM | WQ_PERCPU, 0);
}

/* PF_EXITING: task work then runs after the task's namespaces are gone. */
bool rrds_task_exiting(struct task_struct *task)
{
	return READ_ONCE(task->flags) & PF_EXITING;
}

/* Whether @task is a live user task in @net: iWARP connects run in such a task. */
bool rrds_task_user_in_net(struct task_struct *task, const struct net *net)
{
	bool in;

	task_lock(task);
	in = task->mm && !(task->flags & PF_EXITING) && task->nsproxy &&
	     net_eq(task->nsproxy->net_ns, net);
	task_unlock(task);
	return in;
}

bool rrds_module_get(void)
{
	return try_module_get(THIS_MODULE);
}

void rrds_module_put(void)
{
	module_put(THIS_MODULE);
}

struct ib_qp *rrds_ib_create_qp(struct ib_pd *pd, struct ib_qp_init_attr *attr)
{
	return ib_create_qp(pd, attr);
}

int rrds_ib_destroy_qp(struct ib_qp *qp)
{
	return ib_destroy_qp(qp);
}

struct ib_srq *rrds_ib_create_srq(struct ib_pd *pd, struct ib_srq_init_attr *attr)
{
	return ib_create_srq(pd, attr);
}

void rrds_ib_destroy_srq(struct ib_srq *srq)
{
	ib_destroy_srq(srq);
}

/* As rust/helpers/spinlock.c, which an out-of-tree module cannot call. */
void rrds_spin_lock_init(spinlock_t *lock, const char *name, struct lock_class_key *key)
{
#if defined(CONFIG_DEBUG_SPINLOCK) && !defined(CONFIG_PREEMPT_RT)
	__raw_spin_lock_init(spinlock_check(lock), name, key, LD_WAIT_CONFIG);
#else
	spin_lock_init(lock);
#endif
}

unsigned long rrds_spin_lock_irqsave(spinlock_t *lock)
{
	unsigned long flags;

	spin_lock_irqsave(lock, flags);
	return flags;
}

void rrds_spin_unlock_irqrestore(spinlock_t *lock, unsigned long flags)
{
	spin_unlock_irqrestore(lock, flags);
}

bool rrds_spin_trylock_irqsave(spinlock_t *lock, unsigned long *flags)
{
	return spin_trylock_irqsave(lock, *flags);
}

void rrds_spin_assert_is_held(spinlock_t *lock)
{
	lockdep_assert_held(lock);
}

struct pid *rrds_get_current_tgid(void)
{
	return get_pid(task_tgid(current));
}

/* Woken when the thread group exits (do_notify_pidfd): the pidfd's queue. */
wait_queue_head_t *rrds_pid_exit_waitqueue(struct pid *pid)
{
	return &pid->wait_pidfd;
}

/* pidfd_poll's test: the thread group of @pid has exited. */
bool rrds_thread_group_exited(struct pid *pid)
{
	struct task_struct *task;
	bool exited;

	rcu_read_lock();
	task = pid_task(pid, PIDTYPE_PID);
	exited = !task || (READ_ONCE(task->exit_state) && !delay_group_leader(task));
	rcu_read_unlock();
	return exited;
}

void rrds_init_waitqueue_func_entry(struct wait_queue_entry *entry, wait_queue_func_t func)
{
	init_waitqueue_func_entry(entry, func);
}

bool rrds_capable_net_admin(void)
{
	return capable(CAP_NET_ADMIN);
}

u32 rrds_current_euid(void)
{
	return from_kuid(&init_user_ns, current_euid());
}

int rrds_ib_dma_map_sg(struct ib_device *dev, struct scatterlist *sg, int nents,
		       enum dma_data_direction direction)
{
	return ib_dma_map_sg(dev, sg, nents, direction);
}

void rrds_ib_dma_unmap_sg(struct ib_device *dev, struct scatterlist *sg, int nents,
			  enum dma_data_direction direction)
{
	ib_dma_unmap_sg(dev, sg, nents, direction);
}

void rrds_sg_set_page(struct scatterlist *sg, struct page *page, unsigned int len,
		      unsigned int offset)
{
	sg_set_page(sg, page, len, offset);
}

/* The caller's mm, counted (mmgrab), or NULL for a kernel thread. */
struct mm_struct *rrds_current_mm_grab(void)
{
	struct mm_struct *mm = current->mm;

	if (mm)
		mmgrab(mm);
	return mm;
}

void rrds_mmdrop(struct mm_struct *mm)
{
	mmdrop(mm);
}

/* Long-term pinned pages are charged to mm->pinned_vm, as ib_umem does. */
s64 rrds_mm_pinned_add(struct mm_struct *mm, s64 pages)
{
	return atomic64_add_return(pages, &mm->pinned_vm);
}

u64 rrds_rlimit_memlock(void)
{
	return rlimit(RLIMIT_MEMLOCK);
}

// SPDX-License-Identifier: GPL-2.0

//! A socket's MRs: its table of keys, the `RDS_RDMA_USE_ONCE` keys the
//! receive path marks used, and its use of its namespace's registration QP.

use kernel::{
    new_condvar, new_mutex, new_spinlock,
    page::PAGE_SIZE,
    prelude::*,
    rbtree::{
        RBTree,
        RBTreeNode,
        RBTreeNodeReservation, //
    },
    sync::{
        Arc,
        SpinLock, //
    },
    time::{
        msecs_to_jiffies,
        Instant, //
    },
};

use super::{
    cookie_key,
    make_cookie,
    of,
    pages_in,
    regqp::RegQp,
    Access,
    Mapping,
    Mr,
    MrDevice,
    MrRequest,
    Owner,
    Pinned,
    QpSlot,
    Sink,
    TakenQp,
    COMPLETION_TIMEOUT_MS,
    CONNECT_HOLD_DOWN_MS, //
};
use crate::{
    addr::Endpoint,
    device::{
        DomainUser,
        RdmaDevice, //
    },
    ffi::{
        bindings,
        ib_mr::{
            MappedSg,
            SgDirection, //
        },
        net::NetRef,
    },
    stats::{
        self,
        Stat, //
    },
    wait::wait_until,
};

/// The keys of a socket's `RDS_RDMA_USE_ONCE` MRs, live and used.
///
/// The receive path learns that a peer's RDMA to one of them is done (the
/// RDMA extension of its message) and must not wait for [`SocketMrs`]'s
/// lock, which is held across device waits (a registration QP's connect,
/// `RDS_FREE_MR`'s invalidation): it only
/// moves the key from `live` to `used` here, under a spinlock, and whoever
/// holds the `SocketMrs` lock next frees the MR ([`SocketMrs::free_used`]).
/// Nothing is allocated on the receive path: the node moves between trees.
#[derive(Default)]
struct UseOnceKeys {
    live: RBTree<u32, ()>,
    used: RBTree<u32, ()>,
}

/// See [`UseOnceKeys`].
#[pin_data]
pub(crate) struct UseOnce {
    #[pin]
    keys: SpinLock<UseOnceKeys>,
}

impl UseOnce {
    /// The receive path: the peer's RDMA to `rkey` completed. Returns
    /// whether a USE_ONCE MR now waits to be freed. Any context.
    pub(crate) fn mark_used(&self, rkey: u32) -> bool {
        let mut keys = self.keys.lock();
        if let Some(node) = keys.live.remove_node(&rkey) {
            keys.used.insert(node);
        }
        !keys.used.is_empty()
    }

    /// Whether a used key waits for [`SocketMrs::free_used`].
    pub(crate) fn has_used(&self) -> bool {
        !self.keys.lock().used.is_empty()
    }

    fn take_used(&self) -> Option<u32> {
        let mut keys = self.keys.lock();
        let key = *keys.used.cursor_front()?.current().0;
        let node = keys.used.remove_node(&key);
        drop(keys);
        drop(node);
        Some(key)
    }

    /// `rkey`'s MR is gone: forget it, live or used.
    fn forget(&self, rkey: u32) {
        let mut keys = self.keys.lock();
        let nodes = (keys.live.remove_node(&rkey), keys.used.remove_node(&rkey));
        drop(keys);
        drop(nodes);
    }

    fn add(&self, node: RBTreeNode<u32, ()>) {
        let old = self.keys.lock().live.insert(node);
        drop(old);
    }
}

/// The QP a socket finds in its namespace's slot (`SocketMrs::join_slot`).
enum SlotQp<'a> {
    /// The slot's QP, up.
    Up(Arc<RegQp>),
    /// None is up: the caller connects one. Holds the failed QP taken out of
    /// the slot, if there was one, to shut down with the device lock dropped.
    Down(Option<TakenQp<'a>>),
}

/// The MRs of one socket, by rkey, and the registration QP they use.
pub(crate) struct SocketMrs {
    /// What the socket's MRs tell when they are invalid and released;
    /// made by the first registration (most sockets never register).
    owner: Option<Arc<Owner>>,
    keys: RBTree<u32, Arc<Mr>>,
    /// The keys of `keys`'s USE_ONCE MRs, shared with the receive path.
    use_once: Arc<UseOnce>,
    /// The device and namespace whose registration QP this socket holds a use of.
    user: Option<(Arc<MrDevice>, NetRef)>,
}

impl SocketMrs {
    pub(crate) fn new() -> Result<Self> {
        let use_once = Arc::pin_init(
            pin_init!(UseOnce {
                keys <- new_spinlock!(UseOnceKeys::default()),
            }),
            GFP_KERNEL,
        )?;
        Ok(Self {
            owner: None,
            keys: RBTree::new(),
            use_once,
            user: None,
        })
    }

    /// The USE_ONCE keys, for the receive path to mark used without this lock.
    pub(crate) fn use_once(&self) -> Arc<UseOnce> {
        self.use_once.clone()
    }

    /// Frees the USE_ONCE MRs the receive path marked used.
    pub(crate) fn free_used(&mut self) {
        while let Some(rkey) = self.use_once.take_used() {
            self.used(rkey);
        }
    }

    /// Takes `rkey`'s MR out of the socket's table.
    fn remove(&mut self, rkey: u32) -> Option<Arc<Mr>> {
        let mr = self.keys.remove(&rkey)?;
        self.use_once.forget(rkey);
        Some(mr)
    }

    /// Puts `mr`, registered and its cookie handed out, in the table under
    /// its key (`node`), and among the USE_ONCE keys with `once_node`.
    fn insert(
        &mut self,
        node: RBTreeNodeReservation<u32, Arc<Mr>>,
        once_node: Option<RBTreeNodeReservation<u32, ()>>,
        mr: Arc<Mr>,
    ) {
        // Keys of live MRs are distinct; a stale one with this key goes.
        let rkey = mr.rkey;
        if let Some(old) = self.remove(rkey) {
            Mr::free(&old);
        }
        self.keys.insert(node.into_node(rkey, mr));
        if let Some(once_node) = once_node {
            self.use_once.add(once_node.into_node(rkey, ()));
        }
    }

    /// `RDS_FREE_MR` of `cookie` (non-zero): EINVAL for an unknown one. With
    /// `invalidate` (or an MR registered with `RDS_RDMA_INVALIDATE`), returns
    /// once every MR the socket freed is invalid.
    pub(crate) fn free(&mut self, cookie: u64, invalidate: bool) -> Result {
        let mr = self.remove(cookie_key(cookie)).ok_or(EINVAL)?;
        Mr::free(&mr);
        if invalidate || mr.invalidate {
            self.wait_invalid()?;
        }
        Ok(())
    }

    /// `RDS_FREE_MR` of cookie 0: waits until every MR the socket freed is
    /// invalid, and releases the free MRs pooled on the socket's device.
    pub(crate) fn flush(&mut self) -> Result {
        self.wait_invalid()?;
        if let Some((device, _)) = &self.user {
            let mut d = device.state.lock();
            for class in d.pool.iter_mut() {
                class.clear();
            }
        }
        Ok(())
    }

    /// The peer's RDMA to `rkey` completed (its message arrived): an MR
    /// registered with `RDS_RDMA_USE_ONCE` is freed now, as upstream's
    /// `rds_rdma_unuse`.
    pub(crate) fn used(&mut self, rkey: u32) {
        if self.keys.get(&rkey).is_some_and(|mr| mr.use_once) {
            self.discard(rkey);
        }
    }

    /// Whether the socket has a live MR with `rkey` (`RDS_CMSG_RDMA_DEST`).
    pub(crate) fn contains(&self, rkey: u32) -> bool {
        self.keys.get(&rkey).is_some()
    }

    /// Frees the MR with `rkey`, if any, without waiting for it to be
    /// invalid: a send that registered it failed.
    pub(crate) fn discard(&mut self, rkey: u32) {
        if let Some(mr) = self.remove(rkey) {
            Mr::free(&mr);
        }
    }

    fn wait_invalid(&self) -> Result {
        // No owner: nothing was ever registered, so nothing is pending.
        let Some(owner) = &self.owner else {
            return Ok(());
        };
        let mut timeo = msecs_to_jiffies(COMPLETION_TIMEOUT_MS) as isize;
        let mut pending = owner.pending.lock();
        wait_until(&owner.changed, &mut pending, &mut timeo, |p| *p == 0)
    }

    /// The socket's [`Owner`], made on first use.
    fn owner(&mut self) -> Result<Arc<Owner>> {
        if let Some(owner) = &self.owner {
            return Ok(owner.clone());
        }
        let owner = Arc::pin_init(
            pin_init!(Owner {
                pending <- new_mutex!(0),
                changed <- new_condvar!("rrds_mr_owner"),
            }),
            GFP_KERNEL,
        )?;
        self.owner = Some(owner.clone());
        Ok(owner)
    }

    /// The registration QP of `device` in `net`, connected if needed; the
    /// socket holds a use of it until it closes.
    fn registration_qp(
        &mut self,
        net: NetRef,
        device: &Arc<MrDevice>,
        addr: &Endpoint,
    ) -> Result<Arc<RegQp>> {
        if let Some((used, _)) = &self.user {
            if !Arc::ptr_eq(used, device) {
                // The bound address moved to another device: leave the old one.
                self.leave();
            }
        }
        let failed = match self.join_slot(net, device)? {
            SlotQp::Up(qp) => return Ok(qp),
            SlotQp::Down(failed) => failed,
        };
        // Connect (or reconnect after a failure) with the device lock dropped:
        // the connection's handlers take it. Sockets racing here may each
        // connect; the first to finish is kept.
        if let Some(failed) = failed {
            stats::inc(Stat::MrQpRecreated);
            failed.shut_down();
        }
        let (listed, connected) = if crate::hooks::REGQP_CONNECT_FAIL.take() {
            (None, Err(ETIMEDOUT))
        } else {
            match Self::list_connecting(net, device) {
                Ok(qp) => {
                    let connected = qp.connect(addr).map(|()| qp.clone());
                    (Some(qp), connected)
                }
                Err(e) => (None, Err(e)),
            }
        };
        Self::keep_connected(net, device, listed.as_ref(), connected)
    }

    /// A new registration QP in `net`'s PD on `device`, listed on the device
    /// as connecting until [`Self::keep_connected`] takes it off, so that the
    /// device's removal fails its set-up and waits for it to end before the
    /// PD goes (`mr::device_removed`). ENODEV if the device is being removed.
    fn list_connecting(net: NetRef, device: &Arc<MrDevice>) -> Result<Arc<RegQp>> {
        let qp = RegQp::new(net, device.device.domain(net, DomainUser::RegQp)?)?;
        let mut d = device.state.lock();
        if d.gone {
            return Err(ENODEV);
        }
        d.connecting.push(qp.clone(), GFP_KERNEL)?;
        Ok(qp)
    }

    /// Joins `device`'s slot for `net` (made if missing), unless the socket
    /// already uses it, and looks at the slot's QP, under the device lock.
    ///
    /// Returns [`SlotQp::Up`] with the slot's QP if it is up, else
    /// [`SlotQp::Down`] with the failed QP it took out of the slot, if any,
    /// for the caller to shut down. Errors: `ENODEV` if the device is gone,
    /// `ENOMEM`, or the error of the last connect while it is held down.
    fn join_slot<'a>(&mut self, net: NetRef, device: &'a Arc<MrDevice>) -> Result<SlotQp<'a>> {
        let joined = self.user.is_some();
        let mut d = device.state.lock();
        if d.gone {
            return Err(ENODEV);
        }
        let i = match d.qps.iter().position(|s| s.net == net) {
            Some(i) => i,
            None => {
                d.qps.push(
                    QpSlot {
                        net,
                        users: 0,
                        qp: None,
                        connect_failed: None,
                    },
                    GFP_KERNEL,
                )?;
                d.qps.len() - 1
            }
        };
        if !joined {
            d.qps[i].users += 1;
            self.user = Some((device.clone(), net));
        }
        if let Some(qp) = d.qps[i].qp.as_ref().filter(|qp| qp.is_up()) {
            return Ok(SlotQp::Up(qp.clone()));
        }
        if let Some((e, at)) = d.qps[i].connect_failed {
            if at.elapsed().as_millis() < CONNECT_HOLD_DOWN_MS {
                stats::inc(Stat::MrQpConnectHeldDown);
                return Err(e);
            }
        }
        let failed = d.qps[i]
            .qp
            .take()
            .map(|qp| TakenQp::new(device, &mut d, qp));
        drop(d);
        Ok(SlotQp::Down(failed))
    }

    /// Records the outcome of a socket's `connected` attempt in `device`'s
    /// slot for `net`, under the device lock: a failure not cut short by a
    /// signal holds further connects down; a new QP is kept unless another
    /// socket's, connected first, is up.
    ///
    /// Returns the QP the slot keeps. Errors: the connect's own, or `ENODEV`
    /// if the device or the slot went meanwhile (the new QP is shut down).
    fn keep_connected(
        net: NetRef,
        device: &Arc<MrDevice>,
        listed: Option<&Arc<RegQp>>,
        connected: Result<Arc<RegQp>>,
    ) -> Result<Arc<RegQp>> {
        let mut d = device.state.lock();
        // Off the connecting list and into the slot (or shut down) under one
        // hold of the lock: a removal either took it from the list (and shut
        // it down) or finds it in the slot.
        if let Some(qp) = listed {
            if let Some(i) = d.connecting.iter().position(|c| Arc::ptr_eq(c, qp)) {
                let _ = d.connecting.remove(i);
            }
        }
        let gone = d.gone;
        let slot = d.qps.iter_mut().find(|s| s.net == net);
        let qp = match connected {
            Ok(qp) => qp,
            Err(e) => {
                // A connect cut short by a signal says nothing of the device,
                // and its error is for the interrupted caller alone.
                if let Some(slot) = slot.filter(|_| e != ERESTARTSYS && e != EINTR) {
                    slot.connect_failed = Some((e, Instant::now()));
                }
                return Err(e);
            }
        };
        // One lookup for both outcomes; a QP that has no slot to go to is
        // shut down too.
        let Some(slot) = slot.filter(|_| !gone) else {
            let taken = TakenQp::new(device, &mut d, qp);
            drop(d);
            taken.shut_down();
            return Err(ENODEV);
        };
        slot.connect_failed = None;
        if let Some(other) = slot.qp.as_ref().filter(|q| q.is_up()) {
            let other = other.clone();
            let taken = TakenQp::new(device, &mut d, qp);
            drop(d);
            taken.shut_down();
            return Ok(other);
        }
        let stale = slot.qp.replace(qp.clone());
        let stale = stale.map(|stale| TakenQp::new(device, &mut d, stale));
        drop(d);
        if let Some(stale) = stale {
            stale.shut_down();
        }
        Ok(qp)
    }

    /// Gives up the socket's use of its registration QP; the last user of a
    /// namespace's QP shuts it down.
    fn leave(&mut self) {
        let Some((device, net)) = self.user.take() else {
            return;
        };
        let mut d = device.state.lock();
        let Some(i) = d.qps.iter().position(|s| s.net == net) else {
            return;
        };
        d.qps[i].users -= 1;
        if d.qps[i].users > 0 {
            return;
        }
        let Ok(slot) = d.qps.remove(i) else {
            return;
        };
        let taken = slot.qp.map(|qp| TakenQp::new(&device, &mut d, qp));
        drop(d);
        if let Some(taken) = taken {
            taken.shut_down();
        }
    }

    /// The socket closes: frees every MR, waits (bounded) for their
    /// invalidation, then leaves the registration QP.
    pub(crate) fn release(&mut self) {
        while let Some(key) = self.keys.cursor_front().map(|c| *c.current().0) {
            if let Some(mr) = self.remove(key) {
                Mr::free(&mr);
            }
        }
        let _ = self.wait_invalid();
        self.leave();
    }
}

/// A socket's MR table behind its lock, as the socket layer keeps it.
pub(crate) trait MrTable {
    /// Runs `f` on the table, locked. `EAGAIN` if another call holds it and
    /// this one must not wait (a non-blocking send).
    fn locked<R>(&self, f: impl FnOnce(&mut SocketMrs) -> R) -> Result<R>;
}

/// Where a socket's registrations go: its MR `table`, its namespace `net`,
/// and the `device` its bound address `addr` is on. The table is locked to
/// find (and, if need be, connect) the registration QP and to insert a
/// key, never across a registration's waits or a cookie write: the
/// socket's other calls, a non-blocking send above all, do not wait for
/// either.
pub(crate) struct Registrar<'a, T: MrTable> {
    pub(crate) table: &'a T,
    pub(crate) net: NetRef,
    pub(crate) device: &'a Arc<RdmaDevice>,
    pub(crate) addr: &'a Endpoint,
}

impl<T: MrTable> Registrar<'_, T> {
    /// `RDS_GET_MR`: registers `req` and returns the cookie, which
    /// `publish` hands to the user before the MR goes into the table
    /// (upstream's order: if that fails, the MR is freed again).
    pub(crate) fn get_mr(
        &self,
        req: &MrRequest,
        publish: impl FnOnce(u64) -> Result,
    ) -> Result<u64> {
        // Allocated first: once the MR is registered, only a fault in
        // `publish` can fail the call, and its pages stay pinned until the
        // invalidation (and on iWARP the fence round) completes.
        let node = RBTreeNodeReservation::new(GFP_KERNEL)?;
        let once_node = if req.flags & u64::from(bindings::RDS_RDMA_USE_ONCE) != 0 {
            Some(RBTreeNodeReservation::new(GFP_KERNEL)?)
        } else {
            None
        };
        let mr = self.register(req.addr, req.bytes, Access::Peer(req.flags))?;
        let cookie = make_cookie(mr.rkey, mr.offset);
        if let Err(e) = publish(cookie) {
            Mr::free(&mr);
            return Err(e);
        }
        let inserted = mr.clone();
        self.table
            .locked(|t| t.insert(node, once_node, inserted))
            .inspect_err(|_| Mr::free(&mr))?;
        Ok(cookie)
    }

    /// Registers the local sink of an RDMA READ (`start`, `bytes`) on an
    /// iWARP device, whose READ responses are placed like WRITEs: only an
    /// STag with remote write access may receive them. The MR is the
    /// operation's, never the user's (no cookie, not in the table);
    /// dropping the `Sink` invalidates it.
    pub(crate) fn register_sink(&self, start: u64, bytes: u64) -> Result<Sink> {
        let mr = self.register(start, bytes, Access::ReadSink)?;
        stats::inc(Stat::RdmaReadSinks);
        Ok(Sink { mr })
    }

    /// Registers the `start`, `bytes` range of user memory through the
    /// socket's registration QP; the registration waits with the table
    /// free. Retries once on a new QP when the one it was posted on failed
    /// meanwhile (a flushed REG_MR is not the caller's fault).
    fn register(&self, start: u64, bytes: u64, access: Access) -> Result<Arc<Mr>> {
        let pages = pages_in(start, bytes)?;
        if pages > self.device.caps().max_fast_reg_page_list_len as usize {
            return Err(EMSGSIZE);
        }
        let offset = (start as usize) % PAGE_SIZE;
        let mrs = of(self.device)?;
        let mut retried = false;
        loop {
            let (qp, owner) = self.table.locked(|t| {
                Ok::<_, Error>((t.registration_qp(self.net, &mrs, self.addr)?, t.owner()?))
            })??;
            let pinned = Pinned::pin(start - offset as u64, pages, true)?;
            let sg = MappedSg::map(
                self.device.handle(),
                &pinned.0,
                offset,
                bytes as usize,
                SgDirection::Bidirectional,
            )?;
            let mapping = Mapping { sg, pages: pinned };
            match Mr::register(&mrs, &owner, qp.clone(), mapping, offset, access) {
                Err(_) if !retried && !qp.is_up() => retried = true,
                other => return other,
            }
        }
    }
}

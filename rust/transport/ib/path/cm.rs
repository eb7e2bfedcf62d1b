// SPDX-License-Identifier: GPL-2.0

//! An IB path's connection manager side: building a link's QP and
//! rings, connecting and accepting, and the rdma_cm event handler.

// The rest of `IbPath`: path.rs's types and imports.
use super::*;

/// Gives `id`'s QP the ACK timeout of module parameter `ib_ack_timeout`,
/// if set: rdma_cm's RoCE default (0.5 s) recovers a lost packet soon but is
/// shorter than rxe's acks take on a loaded host (admin guide). On iWARP,
/// TCP times retransmissions and this is moot.
fn set_ack_timeout(id: &CmIdRef<Cm>) {
    if let Some(exponent) = crate::limits::ib_ack_timeout() {
        // Only an RC id is refused (EINVAL): every id here is RC.
        let _ = id.set_ack_timeout(exponent);
    }
}

impl IbPath {
    /// Applies the peer's connect data to the connection (no path lock
    /// held): if it `restarted`, what was handed to its earlier incarnation
    /// went with that incarnation's sockets, so it is dropped (as upstream
    /// does when a peer's generation number changes) rather than delivered to
    /// a new socket; otherwise what it acknowledged in `ack_seq` is dropped
    /// before retransmission.
    fn peer_connected(&self, restarted: bool, ack_seq: u64) {
        if let Some(conn) = self.conn() {
            if restarted {
                conn.peer_restarted();
            } else {
                conn.drop_acked(ack_seq);
            }
        }
    }

    /// Creates the CQs, QP and rings of `link` and posts every receive. On
    /// an error the caller retires the link: what was built goes with it.
    fn build(&self, link: &mut Link) -> Result {
        let raw = link.cm_id.device().ok_or(ENODEV)?;
        let device = device::find(raw).ok_or(ENODEV)?;
        let send_cq = CompletionQueue::alloc(raw, (SEND_SLOTS + 3) as u32)?;
        // Polled by rrds, so that a socket can busy-poll it (`IbPath::busy_poller`).
        let recv_cq = CompletionQueue::alloc_busy_pollable(raw, (RECV_SLOTS + 1) as u32)?;
        let rdma_sges = RdmaSges::for_device(device.caps());
        let caps = QpCaps {
            // Data slots, the ack, an MR fence marker and the drain marker.
            send_wr: (SEND_SLOTS + 3) as u32,
            recv_wr: (RECV_SLOTS + 1) as u32,
            send_sge: rdma_sges.qp_send_sges(),
            // A header and `FRAME_PAGES` pages.
            recv_sge: 1 + FRAME_PAGES as u32,
        };
        let domain = device.domain(self.key.net, DomainUser::Link)?;
        let lkey = domain.with_pd(|pd| {
            link.cm_id.create_qp(pd, &send_cq, &recv_cq, caps)?;
            Ok(pd.local_dma_lkey())
        })?;
        let busy_poller = recv_cq.poller().cloned();
        link.cqs = Some((send_cq, recv_cq));
        let domain = link.domain.insert(domain);
        // SAFETY: The QP was just created on `id`, which `link` owns; the rings are
        // dropped before the link (teardown order).
        let qp = unsafe { QpRef::from_raw(link.cm_id.qp()) }.ok_or(ENOMEM)?;
        let mut rings = Rings::new(qp, raw, lkey, rdma_sges)?;
        rings.busy_poller = busy_poller;
        *self.generation.lock() += 1;
        // Kept even if a post fails part way: the receives posted so far
        // own their buffers until the link's teardown has drained the QP.
        let posted = rings.post_all_receives(self);
        *self.rings.lock() = Some(rings);
        posted?;
        // Before the peer can send READs: MR fences wait for the QP (iWARP).
        link.fence = crate::mr::fence_qp_added(domain, qp)?;
        Ok(())
    }

    pub(super) fn private_data(&self, buf: &mut PrivateBuf) -> usize {
        // What we received in order so far: the peer drops it before retransmitting.
        let ack_seq = self
            .conn()
            .map_or(0, |c| c.snapshot().next_rx_seq.saturating_sub(1));
        let p = ConnectPrivate::new(
            self.key.laddr,
            self.key.faddr,
            self.key.tos,
            ack_seq,
            initial_receives() as u32,
            self.incarnation.load(Relaxed),
            FEATURE_PACKED | FEATURE_LARGE_FRAMES,
        );
        p.encode(buf)
    }

    /// The parameters of a connect (`request`: None) or of the accept of a
    /// request offering `(responder_resources, initiator_depth)`: as many
    /// RDMA READs and atomics at a time as the device of `id` allows, up to
    /// [`RD_ATOMIC_MAX`], and on accept no more than the peer offered (as
    /// upstream's `rds_ib_cm_fill_conn_param`).
    pub(super) fn conn_param<'a>(
        &self,
        private: &'a [u8],
        id: &CmIdRef<Cm>,
        request: Option<(u8, u8)>,
    ) -> ConnParam<'a> {
        let clamp = |n: i32| n.clamp(1, i32::from(RD_ATOMIC_MAX)) as u8;
        let (mut responder, mut initiator) =
            id.device().and_then(device::find).map_or((1, 1), |d| {
                (
                    clamp(d.caps().max_qp_rd_atom),
                    clamp(d.caps().max_qp_init_rd_atom),
                )
            });
        if let Some((their_responder, their_initiator)) = request {
            responder = responder.min(their_initiator);
            initiator = initiator.min(their_responder);
        }
        ConnParam {
            private_data: private,
            responder_resources: responder,
            initiator_depth: initiator,
            retry_count: RETRY_COUNT,
            rnr_retry_count: RNR_RETRY_COUNT,
            ..Default::default()
        }
    }

    /// Starts an active connect. Called by the work item with `ctl` held.
    ///
    /// An id whose address resolution failed is handed back with the error:
    /// the caller destroys it after unlocking `ctl`, which handlers take under
    /// rdma_cm's handler mutex (`rdma_destroy_id` takes that mutex).
    pub(super) fn connect_locked(
        self: &Arc<Self>,
        c: &mut Control,
    ) -> core::result::Result<(), (Error, Option<CmId<Cm>>)> {
        stats::inc(Stat::IbConnectAttempts);
        // Room to retire the link (`Control::retiring`).
        c.retiring
            .reserve(1, GFP_KERNEL)
            .map_err(|e| (e.into(), None))?;
        let id = CmId::<Cm>::create(self.key.net, Some(self)).map_err(|e| (e, None))?;
        let v4 = Endpoint {
            addr: self.key.laddr,
            ..Endpoint::default()
        }
        .is_v4();
        let port = if v4 { PORT_V4 } else { PORT_V6 };
        let src = sockaddr(self.key.laddr, 0, self.key.scope);
        let dst = sockaddr(self.key.faddr, port, self.key.scope);
        if let Err(e) = id.resolve_addr(&src, &dst, ADDR_TIMEOUT_MS) {
            return Err((e, Some(id)));
        }
        c.link = Some(Link {
            cm_id: id,
            cqs: None,
            domain: None,
            fence: None,
            active: true,
        });
        c.state = State::Connecting;
        (c.link_events, c.last_link_event) = (0, 0);
        c.step(Trail::Connecting);
        Ok(())
    }

    /// A peer asks to connect (passive side, in the listener's handler).
    /// Keeps `id` or gives it back to be rejected and destroyed.
    pub(in crate::transport::ib) fn accept(
        self: &Arc<Self>,
        id: CmId<Cm>,
        peer: &ConnectPrivate,
        rd_atomic: (u8, u8),
    ) -> core::result::Result<(), CmId<Cm>> {
        let c = self.ctl.lock();
        let Some(mut c) = self.make_way_for_request(c, &id) else {
            return Err(id);
        };
        // Room to retire the link we make (`Control::retiring`).
        if c.retiring.reserve(1, GFP_KERNEL).is_err() {
            id.reject(&REJECT_RETRY);
            return Err(id);
        }
        id.set_context(self);
        set_ack_timeout(&id);
        let mut link = Link {
            cm_id: id,
            cqs: None,
            domain: None,
            fence: None,
            active: false,
        };
        let mut buf: PrivateBuf = [0; 56];
        let len = self.private_data(&mut buf);
        let built = self.build(&mut link).and_then(|()| {
            link.cm_id
                .accept(&self.conn_param(&buf[..len], &link.cm_id, Some(rd_atomic)))
        });
        c.peer_request = *peer;
        c.link = Some(link);
        c.state = State::Connecting;
        (c.link_events, c.last_link_event) = (0, 0);
        c.step(Trail::Accepted);
        let mut overflow = None;
        if built.is_err() {
            if let Some(link) = &c.link {
                link.cm_id.reject(&REJECT_RETRY);
            }
            overflow = self.retire_locked(&mut c, DownReason::LinkError);
        }
        drop(c);
        if let Some(r) = overflow {
            self.tear_down_now(r);
        }
        self.enqueue();
        Ok(())
    }

    /// A connect request came while the path is in `c`'s state: refuses
    /// it (rejecting `id`, and returning `None`) if the path is dead, up
    /// (the peer lost the link we still think is up: ours goes, it retries)
    /// or connecting itself with the right of way; else clears the way for
    /// it and returns the lock.
    fn make_way_for_request<'a>(
        self: &'a Arc<Self>,
        mut c: MutexGuard<'a, Control>,
        id: &CmId<Cm>,
    ) -> Option<MutexGuard<'a, Control>> {
        if c.dead {
            id.reject(&REJECT_RETRY);
            return None;
        }
        match c.state {
            State::Up => {
                // The peer lost the link we still think is up: drop ours; it retries.
                c.step(Trail::RefusedUp);
                let overflow = self.retire_locked(&mut c, DownReason::PeerClosed);
                drop(c);
                if let Some(r) = overflow {
                    self.tear_down_now(r);
                }
                self.enqueue();
                id.reject(&REJECT_RETRY);
                return None;
            }
            State::Connecting => {
                let ours_active = c.link.as_ref().is_some_and(|l| l.active);
                // Simultaneous connects: the side with the higher address gives up its
                // own attempt, so exactly one connection is made (upstream rejects
                // both and relies on random backoff).
                if ours_active && self.key.laddr < self.key.faddr {
                    c.step(Trail::RefusedRace);
                    id.reject(&REJECT_RETRY);
                    return None;
                }
                // A passive attempt still connecting was abandoned by the peer, which
                // sends a new request only once its earlier one failed (ib_cm absorbs
                // retransmitted ones): replace it. Rejecting would refuse the peer for
                // as long as the stale attempt lasts, which is forever when its RTU was
                // lost (rxe raises no COMM_EST to establish it otherwise).
                if let Some(r) = self.retire_locked(&mut c, DownReason::LinkError) {
                    // Our own attempt: its handler does not wait for `ctl` while we
                    // are in the listener's handler of another id.
                    drop(c);
                    self.tear_down_now(r);
                    c = self.ctl.lock();
                }
                c.connect_wanted = false;
            }
            State::Down => {}
        }
        Some(c)
    }

    /// An rdma_cm event of one of this path's ids.
    pub(in crate::transport::ib) fn cm_event(
        self: &Arc<Self>,
        id: &CmIdRef<Cm>,
        event: &CmEvent<'_>,
    ) {
        self.count_event(id, event);
        let kind = event.kind();
        match kind {
            CmEventKind::AddrResolved => self.addr_resolved(id),
            CmEventKind::RouteResolved => self.route_resolved(id),
            CmEventKind::Established => self.established(id, event),
            CmEventKind::Failed
            | CmEventKind::Disconnected
            | CmEventKind::DeviceRemoval
            | CmEventKind::AddrChange => {
                pr_debug!(
                    "rdma_cm event {} status {}\n",
                    event.number(),
                    event.status()
                );
                let reason = match kind {
                    CmEventKind::Disconnected => DownReason::PeerClosed,
                    CmEventKind::DeviceRemoval => DownReason::DeviceRemoved,
                    CmEventKind::AddrChange => DownReason::AddrChange,
                    _ => DownReason::LinkError,
                };
                self.fail(Some(id), reason, "rdma_cm event");
            }
            _ => {}
        }
    }

    /// Counts `event` of `id` for diagnosis (debugfs `ib_links`).
    fn count_event(&self, id: &CmIdRef<Cm>, event: &CmEvent<'_>) {
        let mut c = self.ctl.lock();
        let live_link = c.link.as_ref().is_some_and(|l| l.is(id));
        if live_link {
            // Diagnostics counters: they wrap rather than overflow.
            c.link_events = c.link_events.wrapping_add(1);
            c.last_link_event = event.number();
        } else {
            c.other_events = c.other_events.wrapping_add(1);
        }
        c.step_event(event.number(), live_link);
    }

    /// The live link's address is resolved: resolve its route.
    fn addr_resolved(self: &Arc<Self>, id: &CmIdRef<Cm>) {
        let c = self.ctl.lock();
        if !c.link.as_ref().is_some_and(|l| l.is(id)) {
            return;
        }
        // The connection's TOS becomes the traffic class (RoCE), the
        // service level (IB) or the TCP TOS (iWARP), as upstream.
        id.set_service_type(self.key.tos);
        set_ack_timeout(id);
        if id.resolve_route(ROUTE_TIMEOUT_MS).is_err() {
            drop(c);
            self.fail(Some(id), DownReason::LinkError, "route resolution");
        }
    }

    /// The live link's route is resolved: build it and connect.
    fn route_resolved(self: &Arc<Self>, id: &CmIdRef<Cm>) {
        let mut c = self.ctl.lock();
        let Some(mut link) = c.link.take_if(|l| l.is(id)) else {
            return;
        };
        let mut buf: PrivateBuf = [0; 56];
        let len = self.private_data(&mut buf);
        let result = self.build(&mut link).and_then(|()| {
            if link.is_iwarp() {
                // siw opens its TCP socket in the calling task's namespace.
                let task = self.connect_from_task(id)?;
                c.task_connect = Some((id.key(), task, 0));
                Ok(())
            } else if id.port_down() {
                // The connect request would go out on the port's GSI QP,
                // which rxe moves to error for good when a send fails on a
                // netdev without carrier: no connection could be made on the
                // device again. The reconnect backoff tries again.
                stats::inc(Stat::IbConnectPortDown);
                Err(crate::errno::enetdown())
            } else {
                id.connect(&self.conn_param(&buf[..len], id, None))
            }
        });
        c.link = Some(link);
        if let Err(e) = result {
            drop(c);
            pr_debug!("connect: {:?}\n", e);
            self.fail(Some(id), DownReason::LinkError, "connect");
        }
    }

    /// The live link is established (rdma_cm's ESTABLISHED): it comes up,
    /// unless it is up already or is an iWARP responder's, which waits.
    fn established(self: &Arc<Self>, id: &CmIdRef<Cm>, event: &CmEvent<'_>) {
        let mut c = self.ctl.lock();
        let Some(active) = c.link.as_ref().filter(|l| l.is(id)).map(|l| l.active) else {
            return;
        };
        if c.state == State::Up {
            // Established already by its first receive (`receive_before_established`).
            return;
        }
        if !active && c.link.as_ref().is_some_and(Link::is_iwarp) {
            // The responder speaks second: its first receive, or the
            // watchdog, starts it (`IWARP_RESPONDER_WAIT_TICKS`).
            c.responder_waiting = Some(0);
            c.step(Trail::ResponderWaits);
            return;
        }
        let peer = if active {
            let v6 = !Endpoint {
                addr: self.key.laddr,
                ..Endpoint::default()
            }
            .is_v4();
            ConnectPrivate::decode(event.private_data(), v6)
                .filter(|p| p.major != 0)
                .unwrap_or_default()
        } else {
            c.peer_request
        };
        self.link_up(c, peer);
    }

    /// The live link is established, `peer` what the peer's connect data
    /// said: start the rings, retransmit what the peer lacks, send.
    pub(super) fn link_up(self: &Arc<Self>, mut c: MutexGuard<'_, Control>, peer: ConnectPrivate) {
        if let Some(rings) = Option::as_mut(&mut *self.rings.lock()) {
            rings.start(
                peer.credit,
                peer.features & FEATURE_PACKED != 0,
                peer.features & FEATURE_LARGE_FRAMES != 0,
            );
        }
        // The whole ring at once for a peer without flow control (`start`).
        self.grow_receives();
        c.state = State::Up;
        c.responder_waiting = None;
        c.backoff_ms = 0;
        c.connect_wanted = false;
        let restarted = peer_restarted(&mut c, &peer);
        drop(c);
        self.peer_connected(restarted, peer.ack_seq);
        if let Some(conn) = self.conn() {
            conn.link_changed(LinkChange::Up);
            // Our congestion map first, as upstream does on a new connection.
            if let Some(wire) = conn.local_cong_message() {
                self.send_cong_map(wire);
            }
            conn.xmit();
        }
    }
}

// SPDX-License-Identifier: GPL-2.0

//! The PF_RDS socket operations (upstream's af_rds.c): create, release,
//! bind, connect, getname, poll, ioctl, the socket options, sendmsg and
//! recvmsg, each handing over to its own file where it is more than glue.

// The rest of the socket: mod.rs's types and imports.
use super::*;

impl SocketFamily for RdsFamily {
    type State = RdsSock;

    fn tables() -> &'static FamilyTables<Self> {
        &TABLES
    }

    fn create(net: NetRef, sock_type: i32, protocol: i32) -> Result<Arc<RdsSock>> {
        if sock_type != bindings::sock_type_SOCK_SEQPACKET as i32 || protocol != 0 {
            return Err(errno::esocktnosupport());
        }
        let mrs = SocketMrs::new()?;
        let use_once = mrs.use_once();
        let id = {
            let mut guard = SOCKETS.lock();
            let table = guard.get_or_insert_with(|| SocketTable {
                sockets: RBTree::new(),
                next_id: 0,
            });
            table.next_id += 1;
            table.next_id
        };
        let poll = PollQueue::new(
            kernel::c_str!("rrds_sock_poll"),
            kernel::static_lock_class!(),
        )?;
        let sock = Arc::pin_init(
            try_pin_init!(RdsSock {
                net,
                state <- new_mutex!(SockState::default()),
                rx <- new_spinlock!(RecvQueue::default()),
                tx <- new_spinlock!(TxState::default()),
                wait <- kernel::new_condvar!("rrds_sock_wait"),
                poll,
                xrc <- new_mutex!(KVec::new()),
                xrc_pending: Atomic::new(0),
                xrc_initiators <- new_mutex!(KVec::new()),
                mrs <- new_mutex!(mrs),
                use_once,
                last_sender <- TaskSlot::new(),
                id,
            }),
            GFP_KERNEL,
        )?;
        let node = RBTreeNode::new(id, sock.clone(), GFP_KERNEL)?;
        let old = SOCKETS
            .lock()
            .get_or_insert_with(|| SocketTable {
                sockets: RBTree::new(),
                next_id: 0,
            })
            .sockets
            .insert(node);
        // Unreachable: numbers are never reused.
        drop(old);
        Ok(sock)
    }

    fn abandon(state: Arc<RdsSock>) {
        forget_socket(&state);
    }

    fn attach(state: &RdsSock, sk: SockPtr) {
        // INVARIANT: `sk` is the socket's sock, valid until release clears it.
        state.rx.lock().sk = Some(sk);
    }

    fn release(state: Arc<RdsSock>, _sk: &Sock) {
        forget_socket(&state);
        cong::remove_monitor(&*state);
        conn::remove_monitor(&*state);
        // XRC registrations made through the socket end with it.
        let registrations = core::mem::take(&mut *state.xrc.lock());
        for r in registrations.iter() {
            r.detach();
            r.discard();
        }
        drop(registrations);
        // So do its initiators: a disconnect for each target.
        xrc_options::release_initiators(&state);
        // Every MR is freed and invalidated; the last socket of the namespace
        // on a device takes its registration QP down.
        state.with_mrs(|mrs| mrs.release());
        let refused = state.tx.lock().cong_refused.take();
        drop(refused);
        let (bound, conns, route, ib_net) = {
            let mut s = state.state.lock();
            (
                s.bound.take(),
                core::mem::take(&mut s.conns),
                s.route.take(),
                core::mem::take(&mut s.ib_net),
            )
        };
        drop(route);
        // Unbind: no new deliveries after this.
        if let Some(ep) = bound {
            bind::remove(state.net, &ep);
        }
        // Messages still queued for sending are dropped, as upstream's rds_release does.
        for (_, conn) in conns.iter() {
            conn.cancel(Some(&*state), |_| true);
        }
        let mut conns = conns;
        while let Some(key) = conns.cursor_front().map(|c| *c.current().0) {
            let Some(conn) = conns.remove(&key) else {
                break;
            };
            conn::put(conn);
        }
        if let (true, Some(ep)) = (ib_net, bound) {
            ib::net_put(state.net, &ep);
        }
        let (queued, map, cleared) = {
            let mut rx = state.rx.lock();
            // INVARIANT: from here on nothing reaches the sock through the state.
            rx.sk = None;
            let cleared = core::mem::take(&mut rx.congested);
            if cleared {
                if let Some((map, port)) = &rx.map {
                    map.set_congested(*port, false);
                }
            }
            (core::mem::take(&mut rx.messages), rx.map.take(), cleared)
        };
        // Only a port that was congested has anything to tell monitors.
        if cleared {
            cong::local_port_cleared(state.net);
        }
        if let Some((map, _)) = map {
            cong::put(map);
        }
        drop(queued);
        // The state's last reference usually goes here; its poll queue's
        // memory waits for epoll a grace period longer (`PollQueue`).
        drop(state);
    }

    fn bind(state: ArcBorrow<'_, RdsSock>, _sk: &Sock, raw: &[u8]) -> Result {
        let mut ep = Endpoint::parse(raw, Purpose::Bind)?;
        let mut s = state.state.lock();
        if s.bound.is_some() {
            return Err(EINVAL);
        }
        // Loopback addresses use the loopback transport, unless IB is pinned
        // (then, as upstream, an address IB cannot serve is ENOPROTOOPT).
        let use_ib = s.pinned_ib || !ep.is_loopback();
        if use_ib && !ib::is_rdma_address(state.net, &ep)? {
            return Err(if s.pinned_ib {
                errno::enoprotoopt()
            } else {
                errno::eaddrnotavail()
            });
        }
        let map = cong::get(state.net, ep.addr, cong::Side::Local)?;
        ep.port = match bind::add(state, ep) {
            Ok(port) => port,
            Err(e) => {
                cong::put(map);
                return Err(e);
            }
        };
        if use_ib {
            if let Err(e) = ib::net_get(state.net, &ep) {
                bind::remove(state.net, &ep);
                cong::put(map);
                return Err(e);
            }
            s.ib_net = true;
            s.transport = Some(&ib::IB);
        } else {
            s.transport = Some(&LOOPBACK);
        }
        s.bound = Some(ep);
        let mut rx = state.rx.lock();
        rx.map = Some((map, ep.port));
        rx.bound_scope = ep.scope;
        Ok(())
    }

    fn connect(state: &RdsSock, _sk: &Sock, raw: &[u8]) -> Result {
        let ep = Endpoint::parse(raw, Purpose::Connect)?;
        state.state.lock().peer = Some(ep);
        Ok(())
    }

    fn getname(state: &RdsSock, _sk: &Sock, peer: bool, out: &mut [u8; 28]) -> Result<usize> {
        let s = state.state.lock();
        if peer {
            return Ok(s.peer.ok_or_else(errno::enotconn)?.write_sockaddr(out));
        }
        Ok(match (s.bound, s.peer) {
            (Some(ep), _) => ep.write_sockaddr(out),
            // Unbound: an all-zero address of the peer's family, as upstream.
            (None, Some(peer)) => {
                let len = peer.write_sockaddr(out);
                out[2..].fill(0);
                len
            }
            (None, None) => {
                *out = [0; 28];
                16
            }
        })
    }

    fn poll(state: &RdsSock, sk: &Sock, req: &PollRequest<'_>) -> u32 {
        state.poll.wait_on(req);
        if req.busy_loop() {
            recv::busy_poll_for_poll(state, sk);
        }
        let mut mask = 0;
        if state.readable(&state.rx.lock()) {
            mask |= poll_bits::IN | poll_bits::RDNORM;
        }
        // A socket refused for congestion also waits for the port to clear.
        // Queued on the map's wait queue with no lock held: epoll's queueing
        // callback allocates, and may sleep.
        let refused = state.tx.lock().cong_refused.clone();
        let mut refused_clear = match &refused {
            Some((map, port)) => {
                req.wait_on(map.wait_queue());
                !map.is_congested(*port)
            }
            None => true,
        };
        let mut tx = state.tx.lock();
        // A send refused for another port meanwhile: not cleared yet.
        let same = match (&tx.cong_refused, &refused) {
            (Some((now, p)), Some((then, q))) => Arc::ptr_eq(now, then) && p == q,
            (now, _) => now.is_none(),
        };
        refused_clear &= same;
        let cleared = if refused_clear {
            tx.cong_refused.take()
        } else {
            None
        };
        if tx.bytes >= sk.sndbuf() / 2 {
            tx.space_wanted = true;
        } else if refused_clear {
            mask |= poll_bits::OUT | poll_bits::WRNORM;
        }
        drop(tx);
        drop(cleared);
        drop(refused);
        mask
    }

    fn ioctl(state: &RdsSock, _sk: &Sock, cmd: u32, arg: usize) -> Result<i32> {
        match cmd {
            bindings::SIOCRDSGETTOS => {
                let tos = state.state.lock().tos;
                UserSlice::new(UserPtr::from_addr(arg), 1)
                    .writer()
                    .write(&tos)?;
                Ok(0)
            }
            bindings::SIOCRDSSETTOS => {
                let mut tos = 0u8;
                UserSlice::new(UserPtr::from_addr(arg), 1)
                    .reader()
                    .read_slice(core::slice::from_mut(&mut tos))?;
                let mut s = state.state.lock();
                // Only IB maps a TOS (1:1, as upstream); loopback and unbound
                // sockets answer ENOIOCTLCMD (ENOTTY to the caller), as upstream.
                if s.transport.is_none_or(|t| t.kind() != ib::TRANS_IB) {
                    return Err(ENOIOCTLCMD);
                }
                // Once set, or once the socket has sent, the TOS is fixed.
                if s.tos != 0 || s.route.is_some() {
                    return Err(EINVAL);
                }
                s.tos = tos;
                Ok(0)
            }
            _ => Err(ENOIOCTLCMD),
        }
    }

    fn setsockopt(
        state: ArcBorrow<'_, RdsSock>,
        sk: &Sock,
        level: i32,
        name: i32,
        value: SockOptValue,
    ) -> Result {
        if level != SOL_RDS {
            return Err(errno::enoprotoopt());
        }
        let name = name as u32;
        // The MR options wait on user memory and devices, and the socket's MR
        // table serialises them: without the socket lock (as upstream), one
        // call's stalled cookie write holds up none of the socket's others.
        if matches!(
            name,
            bindings::RDS_GET_MR | bindings::RDS_GET_MR_FOR_DEST | bindings::RDS_FREE_MR
        ) {
            return options::set_option(state, sk, name, value);
        }
        sk.locked(|| options::set_option(state, sk, name, value))
    }

    fn getsockopt(
        state: ArcBorrow<'_, RdsSock>,
        _sk: &Sock,
        level: i32,
        name: i32,
        value: UserSlice,
        len: usize,
    ) -> Result<GetOptResult> {
        if level != SOL_RDS {
            return Err(errno::enoprotoopt());
        }
        let name = name as u32;
        if (bindings::RDS_INFO_FIRST..=bindings::RDS_INFO_LAST).contains(&name) {
            return info::get(state.net, name, value, len);
        }
        match name {
            bindings::RRDS_XRC_CREATE => return xrc_options::create(state, value, len),
            bindings::RRDS_INFO_XRC_TARGETS => return info::get(state.net, name, value, len),
            _ => {}
        }
        let v: i32 = match name {
            bindings::RDS_RECVERR => i32::from(state.state.lock().recverr),
            bindings::RRDS_CONN_MONITOR => state.rx.lock().conn_monitor as i32,
            bindings::SO_RDS_TRANSPORT => state
                .state
                .lock()
                .transport
                .map_or(TRANS_NONE, |t| t.kind()),
            _ => return Err(errno::enoprotoopt()),
        };
        if len < 4 {
            return Err(EINVAL);
        }
        value.writer().write(&v)?;
        Ok(GetOptResult { ret: 0, len: 4 })
    }

    fn sendmsg(
        state: ArcBorrow<'_, RdsSock>,
        sk: &Sock,
        msg: &mut MsgHdr,
        len: usize,
    ) -> Result<usize> {
        send::sendmsg(state, sk, msg, len)
    }

    fn recvmsg(
        state: &RdsSock,
        sk: &Sock,
        msg: &mut MsgHdr,
        len: usize,
        flags: i32,
    ) -> Result<usize> {
        recv::recvmsg(state, sk, msg, len, flags as u32)
    }
}

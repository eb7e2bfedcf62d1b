// SPDX-License-Identifier: GPL-2.0

//! An IB path's watchdog tick, and iWARP connects run in a user task of
//! the connection's namespace.

// The rest of `IbPath`: path.rs's types and imports.
use super::*;

/// Watchdog ticks (seconds) a connector task has to run an iWARP connect
/// handed to it (see `IbPath::check_task_connect`).
const TASK_CONNECT_TICKS: u32 = 5;

/// How long, in watchdog ticks (seconds), an accepted iWARP link waits for
/// the peer's first frame before it sends anyway.
///
/// MPA has a responder receive the initiator's first FPDU before it sends
/// one (RFC 5044; MPA v2's "ready to receive" frame, which siw does not
/// offer, is for initiators that do not send first). siw's initiator mishandles
/// data that arrives before it has moved its socket out of the MPA exchange:
/// each TCP segment queues a CM work item from a pool of four, and the extra
/// items later run its receive path from a work queue without the socket
/// lock, racing the softirq receive path (a KASAN use-after-free in
/// `skb_copy_bits` under `siw_cm_work_handler`), and a close that finds the
/// pool empty is never reported (Documentation/testing.rst). rrds's
/// initiator sends its congestion map as soon as it is up, so the wait
/// normally ends within a round trip.
const IWARP_RESPONDER_WAIT_TICKS: u32 = 2;

/// An iWARP connect to run in a user task of the connection's namespace.
struct IwarpConnect {
    path: Arc<IbPath>,
    /// The id to connect (it may be gone by then).
    id: CmIdKey,
}

impl TaskWork for IwarpConnect {
    fn run(self) {
        let path = self.path;
        // Links are torn down only with `teardown` held: the id stays alive below.
        let teardowns = path.teardown.lock();
        let current = {
            let mut c = path.ctl.lock();
            if c.task_connect.is_some_and(|(id, _, _)| id == self.id) {
                c.task_connect = None;
            }
            !c.dead
                && c.state == State::Connecting
                && c.link.as_ref().is_some_and(|l| l.cm_id.key() == self.id)
        };
        if !current {
            return;
        }
        // It may have changed namespace since it sent (`setns`).
        if !task_work::user_task_in(&**kernel::current!(), path.key.net) {
            drop(teardowns);
            path.fail_id(
                self.id,
                DownReason::LinkError,
                "connecting task left the namespace",
            );
            return;
        }
        // SAFETY: `self.id` is the current link's id, which cannot be destroyed while
        // `teardowns` is held (every teardown takes it).
        let id = unsafe { self.id.id::<Cm>() };
        let mut buf: PrivateBuf = [0; 56];
        let len = path.private_data(&mut buf);
        // Not under `ctl`: rdma_connect takes the id's handler lock, and the
        // handler may be waiting for `ctl`.
        let result = id.connect_unlocked(&path.conn_param(&buf[..len], id, None));
        drop(teardowns);
        if let Err(e) = result {
            pr_debug!("iWARP connect: {:?}\n", e);
            path.fail_id(self.id, DownReason::LinkError, "iWARP connect");
        }
    }

    fn cancel(self) {
        // Retried, from the next task that sends.
        self.path
            .fail_id(self.id, DownReason::LinkError, "connecting task exited");
    }
}

impl IbPath {
    /// A watchdog tick (once a second): a link whose sends make no progress
    /// for `ticks` is reset, in case a device loses an RC connection without
    /// a completion or an event.
    pub(crate) fn watchdog_tick(self: &Arc<Self>, ticks: u32) {
        self.check_task_connect();
        self.check_responder_wait();
        // A pack whose post failed (no memory) and that no completion retried.
        let (stalled, ack_failed, blocked) =
            Option::as_mut(&mut *self.rings.lock()).map_or((false, false, false), |r| {
                r.post_pack(self);
                let stalled = r.watchdog_tick() >= ticks;
                // The ack the tick may have asked for.
                let ack_failed = r.send_ack(self).is_err();
                // Sends wait: for credits or a slot (harmless to retry), or
                // after a post that failed for want of memory, which nothing
                // retries if no completion is to come.
                (stalled, ack_failed, core::mem::take(&mut r.blocked))
            });
        if stalled {
            stats::inc(Stat::IbLinkStalled);
            self.fail(None, DownReason::LinkError, "no send progress");
        } else if ack_failed {
            self.fail(None, DownReason::LinkError, "explicit ack not posted");
        } else if blocked {
            if let Some(conn) = self.conn() {
                self.resume(&*conn);
            }
        }
        // Retired links deferred while their port is down (`tear_down_retiring`).
        if !self.ctl.lock().retiring.is_empty() {
            self.enqueue();
        }
        self.check_idle(crate::knobs::idle_timeout_secs(self.key.net));
    }

    /// Takes the up link down once the connection has carried nothing, with
    /// nothing queued or unacknowledged, for `timeout` ticks (0: never).
    /// The connection keeps its sequence numbers: the next send on either
    /// side brings a link back, and a message the peer sent as this one went
    /// is retransmitted there and taken once.
    fn check_idle(self: &Arc<Self>, timeout: u32) {
        let Some(conn) = self.conn() else {
            return;
        };
        let mark = conn.sequences();
        // A peer waiting for our ack of its last messages would reconnect at
        // once to retransmit them: settle that first.
        let owed = Option::as_mut(&mut *self.rings.lock()).is_some_and(|r| r.settle_acks(self));
        let busy = owed || conn.has_queued();
        let mut c = self.ctl.lock();
        if timeout == 0 || c.state != State::Up || busy || mark != c.idle_mark {
            c.idle_mark = mark;
            c.idle_ticks = 0;
            return;
        }
        c.idle_ticks = c.idle_ticks.saturating_add(1);
        if c.idle_ticks < timeout {
            return;
        }
        c.step(Trail::IdleReaped);
        c.idle_reaped = c.idle_reaped.wrapping_add(1);
        stats::inc(Stat::IbIdleReaped);
        let overflow = self.retire_quietly(&mut c, DownReason::Idle);
        drop(c);
        if let Some(r) = overflow {
            self.tear_down_now(r);
        }
        self.enqueue();
    }

    /// An accepted iWARP link whose peer has sent nothing within
    /// `IWARP_RESPONDER_WAIT_TICKS` of its establishment starts sending.
    fn check_responder_wait(self: &Arc<Self>) {
        let mut c = self.ctl.lock();
        let Some(waited) = c.responder_waiting.as_mut() else {
            return;
        };
        *waited += 1;
        if *waited < IWARP_RESPONDER_WAIT_TICKS || c.state != State::Connecting {
            return;
        }
        c.step(Trail::ResponderWaitOver);
        let peer = c.peer_request;
        self.link_up(c, peer);
    }

    /// An iWARP connect its task has not run within `TASK_CONNECT_TICKS`
    /// (the task is stopped, or stuck in the kernel) fails, and the task
    /// stops being the connector: the next attempt runs in the next task
    /// that sends, instead of everyone's connection waiting for that one.
    fn check_task_connect(self: &Arc<Self>) {
        let overdue = {
            let mut c = self.ctl.lock();
            match c.task_connect.as_mut() {
                Some((id, task, waited)) => {
                    *waited += 1;
                    let overdue = (*id, *task);
                    if *waited >= TASK_CONNECT_TICKS {
                        c.task_connect = None;
                        Some(overdue)
                    } else {
                        None
                    }
                }
                None => None,
            }
        };
        let Some((id, task)) = overdue else {
            return;
        };
        stats::inc(Stat::IbTaskConnectsOverdue);
        // Unless another task sent meanwhile and is the connector already.
        self.connector.clear_if(task);
        self.fail_id(
            id,
            DownReason::LinkError,
            "connecting task did not run its connect",
        );
    }

    /// Hands the connect of `id` to the connector task (iWARP); returns
    /// the task's address. The connector is the task that last sent on the
    /// connection; if it has exited or left the namespace (a process that
    /// sent last and went), a task that sent a message still queued takes
    /// its place: else nobody would reconnect for those messages until
    /// someone sent again.
    pub(super) fn connect_from_task(self: &Arc<Self>, id: &CmIdRef<Cm>) -> Result<usize> {
        let net = self.key.net;
        let usable = |task: &Task| task_work::user_task_in(task, net);
        let task = match self.connector.get().filter(|task| usable(task)) {
            Some(task) => task,
            None => {
                let task = self
                    .conn()
                    .and_then(|conn| conn.queued_sender(&usable))
                    .ok_or_else(crate::errno::enotconn)?;
                stats::inc(Stat::IbConnectorFromQueue);
                self.connector.set(task.clone());
                task
            }
        };
        let address = task.as_ptr() as usize;
        run_in_task(
            &task,
            IwarpConnect {
                path: self.clone(),
                id: id.key(),
            },
        )?;
        Ok(address)
    }
}

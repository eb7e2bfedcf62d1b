// SPDX-License-Identifier: GPL-2.0

//! What the layers below reach a socket by: the traits they define
//! (`conn::SendOwner`, `rdma::RdmaStatusSink`, `cong::CongMonitor`,
//! `conn::ConnMonitor`, `xrc::EventSink`), implemented for `RdsSock`.

// The rest of the socket: mod.rs's types and imports.
use super::*;

impl conn::SendOwner for RdsSock {
    /// `len` bytes of this socket's are acknowledged or dropped: its send
    /// buffer has room for them again.
    fn send_completed(&self, len: usize) {
        let mut tx = self.tx.lock();
        let was = tx.bytes;
        tx.bytes = tx.bytes.saturating_sub(len);
        if was != 0 && tx.bytes == 0 {
            crate::stats::inc(crate::stats::Stat::SendQueueEmpty);
        }
        let wake = core::mem::take(&mut tx.space_wanted);
        drop(tx);
        if wake {
            self.wake_all();
        }
    }

    fn sender(&self) -> Option<ARef<Task>> {
        self.last_sender.get()
    }
}

impl crate::rdma::RdmaStatusSink for RdsSock {
    /// Queues the note for recvmsg. Lost only if no memory can be had for
    /// the queue, which is counted.
    fn rdma_status(&self, token: u64, status: i32) {
        let queued = self
            .rx
            .lock()
            .rdma_notes
            .push_back((token, status), GFP_ATOMIC);
        if queued.is_err() {
            crate::stats::inc(crate::stats::Stat::RdmaNotifyLost);
        }
        self.wake_all();
    }
}

impl cong::CongMonitor for RdsSock {
    fn net(&self) -> NetRef {
        self.net
    }

    /// `RDS_CONG_MONITOR`: reports every port this socket was refused for.
    fn cong_notify_all_refused(&self) {
        let mut rx = self.rx.lock();
        if rx.cong_mask == 0 {
            return;
        }
        rx.cong_notify |= rx.cong_mask;
        rx.cong_mask = 0;
        drop(rx);
        self.wake_all();
    }
}

impl conn::ConnMonitor for RdsSock {
    fn net(&self) -> NetRef {
        self.net
    }

    /// Queues the change as an `rrds_conn_event` if the socket asked for
    /// it: all of the namespace's, or those of connections it sent on.
    fn link_changed(&self, key: &ConnKey, change: LinkChange) {
        let mode = self.rx.lock().conn_monitor;
        if mode == bindings::RRDS_CONN_MONITOR_OFF
            || (mode == bindings::RRDS_CONN_MONITOR_USED
                && self.state.lock().conns.get(key).is_none())
        {
            return;
        }
        let (event, reason) = match change {
            LinkChange::Up => (bindings::RRDS_CONN_EV_UP, 0),
            LinkChange::Down { reason, retransmit } => (
                if retransmit {
                    bindings::RRDS_CONN_EV_RESET
                } else {
                    bindings::RRDS_CONN_EV_DOWN
                },
                reason as u32,
            ),
        };
        let mut record = bindings::rrds_conn_event {
            laddr: key.laddr,
            faddr: key.faddr,
            event,
            reason,
            flags: 0,
            lost: 0,
            tos: key.tos,
            pad: [0; 7],
        };
        let mut rx = self.rx.lock();
        if rx.conn_monitor == bindings::RRDS_CONN_MONITOR_OFF {
            return;
        }
        if rx.conn_events.len() >= bindings::RRDS_CONN_EVENT_QUEUE_LEN as usize
            || !rx.conn_events.has_room()
        {
            rx.conn_events_lost = rx.conn_events_lost.saturating_add(1);
            crate::stats::inc(crate::stats::Stat::ConnEventsLost);
            return;
        }
        record.lost = core::mem::take(&mut rx.conn_events_lost);
        if record.lost > 0 {
            record.flags |= bindings::RRDS_CONN_EVENT_OVERFLOW;
        }
        // There is room: nothing is allocated.
        let _ = rx.conn_events.push_back(record, GFP_ATOMIC);
        drop(rx);
        self.wake_all();
    }

    fn changes_lost(&self, n: u32) {
        let mut rx = self.rx.lock();
        if rx.conn_monitor != bindings::RRDS_CONN_MONITOR_OFF {
            rx.conn_events_lost = rx.conn_events_lost.saturating_add(n);
        }
    }
}

impl xrc::EventSink for RdsSock {
    fn net(&self) -> NetRef {
        self.net
    }

    fn event_queued(&self) {
        self.xrc_pending.add(1, Relaxed);
        self.wake_all();
    }

    fn events_taken(&self, n: usize) {
        self.xrc_pending.fetch_sub(n as u32, Relaxed);
    }

    fn adopt(&self, registration: &Arc<xrc::Registration>) -> Result {
        self.xrc.lock().push(registration.clone(), GFP_KERNEL)?;
        Ok(())
    }

    fn forget(&self, registration: &Arc<xrc::Registration>) {
        // Empty first: the pending count never covers a registration that
        // recvmsg cannot find on the list.
        registration.discard();
        let gone = {
            let mut list = self.xrc.lock();
            list.iter()
                .position(|r| Arc::ptr_eq(r, registration))
                .and_then(|i| list.remove(i).ok())
        };
        drop(gone);
    }
}

// SPDX-License-Identifier: GPL-2.0

//! Global counters, reported by `RDS_INFO_COUNTERS` under upstream's names
//! (net/rds/stats.c) so that rds-info and scripts written for it read them.
//!
//! Counters of mechanisms rrds does not have exist for the record layout's
//! sake and stay 0: `recv_immediate_retry` (no receive path retries at
//! once: IB completions are polled from a workqueue, a loopback receiver that
//! cannot take a message leaves it for the watchdog), `send_stuck_rm` (a
//! transport takes a message whole or not at all, so none is stuck half
//! sent), `page_remainder_hit`/`_miss` (messages own their pages; small
//! ones share frames, see `ib_tx_packed_messages`) and
//! `mprds_catchup_tx0_retries` (no multipath).

use kernel::sync::atomic::{
    Atomic,
    Relaxed, //
};

macro_rules! counters {
    ($($id:ident => $name:literal),* $(,)?) => {
        /// A counter's index.
        #[allow(non_camel_case_types, dead_code)]
        #[derive(Clone, Copy)]
        pub(crate) enum Stat { $($id),* }

        /// Counter names, NUL-padded, in `Stat` order.
        pub(crate) const NAMES: &[&str] = &[$($name),*];
    };
}

counters! {
    ConnReset => "conn_reset",
    RecvDropBadChecksum => "recv_drop_bad_checksum",
    RecvDropOldSeq => "recv_drop_old_seq",
    RecvDropNoSock => "recv_drop_no_sock",
    RecvDropDeadSock => "recv_drop_dead_sock",
    RecvDeliverRaced => "recv_deliver_raced",
    RecvDelivered => "recv_delivered",
    RecvQueued => "recv_queued",
    RecvImmediateRetry => "recv_immediate_retry",
    RecvDelayedRetry => "recv_delayed_retry",
    RecvAckRequired => "recv_ack_required",
    RecvRdmaBytes => "recv_rdma_bytes",
    RecvPing => "recv_ping",
    SendQueueEmpty => "send_queue_empty",
    SendQueueFull => "send_queue_full",
    SendLockContention => "send_lock_contention",
    SendLockQueueRaced => "send_lock_queue_raced",
    SendImmediateRetry => "send_immediate_retry",
    SendDelayedRetry => "send_delayed_retry",
    SendDropAcked => "send_drop_acked",
    SendAckRequired => "send_ack_required",
    SendQueued => "send_queued",
    SendRdma => "send_rdma",
    SendRdmaBytes => "send_rdma_bytes",
    SendPong => "send_pong",
    PageRemainderHit => "page_remainder_hit",
    PageRemainderMiss => "page_remainder_miss",
    CopyToUser => "copy_to_user",
    CopyFromUser => "copy_from_user",
    CongUpdateQueued => "cong_update_queued",
    CongUpdateReceived => "cong_update_received",
    CongSendError => "cong_send_error",
    CongSendBlocked => "cong_send_blocked",
    RecvBytesAddedToSock => "recv_bytes_added_to_sock",
    RecvBytesFreedFromSock => "recv_bytes_freed_fromsock",
    SendStuckRm => "send_stuck_rm",
    MprdsCatchupTx0Retries => "mprds_catchup_tx0_retries",
    // rrds's own, after upstream's (whose IB transport appends its own the
    // same way): messages dropped because the peer lost its connection
    // state (a new incarnation) after they were handed to the old one.
    IbPeerRestartDrops => "ib_peer_restart_drops",
    // Memory registration (rust/mr): REG_MRs and LOCAL_INVs completed, pool
    // hits and misses, MRs deregistered because a REG or INV failed or
    // their device went, pages pinned and unpinned (the difference is what
    // is pinned now), registration QPs re-created after a failure.
    MrRegistered => "mr_registered",
    MrInvalidated => "mr_invalidated",
    MrPoolHit => "mr_pool_hit",
    MrPoolMiss => "mr_pool_miss",
    MrStale => "mr_stale",
    MrPagesPinned => "mr_pages_pinned",
    MrPagesUnpinned => "mr_pages_unpinned",
    MrQpRecreated => "mr_qp_recreated",
    // Registrations refused at once because their namespace's
    // registration QP failed to connect moments before (see
    // `CONNECT_HOLD_DOWN_MS`).
    MrQpConnectHeldDown => "mr_qp_connect_held_down",
    // Connect requests to a registration QP's listener without its token.
    MrQpForeignConnects => "mr_qp_foreign_connects",
    // Fence rounds on iWARP devices: pages of invalidated MRs wait for
    // every data QP to finish the READ response it was sending.
    MrTxFences => "mr_tx_fences",
    // RDMA READ sinks registered (iWARP: the READ responses need an STag
    // with remote write access).
    RdmaReadSinks => "rdma_read_sinks_registered",
    // RDMA operations (rust/rdma.rs): status notifications lost for want
    // of memory.
    RdmaNotifyLost => "rdma_notify_lost",
    // IB links: passive links established by their first receive because
    // their ESTABLISHED event had not come (a lost RTU).
    IbEstablishedByReceive => "ib_established_by_receive",
    // IB links whose peer came with a new incarnation: it lost its
    // connection state (see `ib_peer_restart_drops`).
    IbPeerRestarts => "ib_peer_restarts",
    // Packed frames sent to rrds peers, and the messages they carried.
    IbTxPackedFrames => "ib_tx_packed_frames",
    IbTxPackedMessages => "ib_tx_packed_messages",
    // Messages that arrived in packed frames.
    IbRxPackedMessages => "ib_rx_packed_messages",
    // Frames of messages with more than one page of payload
    // (`FEATURE_LARGE_FRAMES`), sent and received.
    IbTxLargeFrames => "ib_tx_large_frames",
    IbRxLargeFrames => "ib_rx_large_frames",
    // IB links' receive rings doubled: their peer filled them within a
    // second (`ib_recv_ring_start`).
    IbRxRingGrown => "ib_rx_ring_grown",
    // rdma_cm events of ids that belong to no path: listeners' and
    // address probes' (a device removal), or a link's whose context was
    // lost (a bug).
    IbCmEventsUnowned => "ib_cm_events_unowned",
    // Messages a socket's full receive queue could not take: from a peer
    // that ignores our congestion map, dropped; over loopback, left queued
    // on the sender's connection for the next attempt.
    RecvDropQueueFull => "recv_drop_queue_full",
    // Connections refused by `max_conns_per_net` or `max_conns_per_peer`.
    ConnLimitRefused => "conn_limit_refused",
    // iWARP connects their task had not run within 5 s: failed, and
    // retried from the next task that sends.
    IbTaskConnectsOverdue => "ib_task_connects_overdue",
    // Pings left unanswered because their connection already held
    // `MAX_QUEUED_PONGS` unacknowledged pongs (a pinger that never acks).
    SendPongDropped => "send_pong_dropped",
    // iWARP fence markers whose QP left the device's list before they
    // completed (the round stops waiting for them), and those of them whose
    // completion still came; siw may never deliver the rest.
    MrFenceMarkersAbandoned => "mr_fence_markers_abandoned",
    MrFenceMarkersLate => "mr_fence_markers_late",
    // Listeners closed by the watchdog because their device had gone from
    // rrds: made while it was being removed, which would otherwise wait
    // for them for ever.
    IbStrayListenersClosed => "ib_stray_listeners_closed",
    // IB links taken down because their connection carried nothing for
    // `idle_timeout_secs` (the next send brings them back).
    IbIdleReaped => "ib_idle_reaped",
    // Connection events a monitoring socket's full queue could not take
    // (`RRDS_CONN_MONITOR`; the next one queued is flagged).
    ConnEventsLost => "conn_events_lost",
    // Connect attempts of IB connections: first ones and reconnects.
    IbConnectAttempts => "ib_connect_attempts",
    // IB connect attempts stopped before sending the request because the
    // local port was down (the reconnect backoff tries again).
    IbConnectPortDown => "ib_connect_port_down",
    // Local addresses whose RDMA device only an rdma_cm bind could find
    // (an interface with no device of its own and not a VLAN); every other
    // lookup goes through the interface.
    IbAddressProbes => "ib_address_probes",
    // IB links the watchdog reset because sends were outstanding and none
    // completed for 8 s: a peer that stopped taking frames (RNR retries
    // forever), or a device that lost the connection without telling.
    IbLinkStalled => "ib_link_stalled",
    // Messages a transmitting thread had taken from the queue before its
    // link failed, refused by the next link: they go again, in order, after
    // those sent before them.
    IbXmitAfterReset => "ib_xmit_after_reset",
    // iWARP connects whose connector (the task that sent last) had exited
    // or left the namespace, handed instead to a task that sent a message
    // still queued on the connection.
    IbConnectorFromQueue => "ib_connector_from_queue",
    // Busy polls of a receive CQ (`SO_BUSY_POLL`: the spin of a recvmsg,
    // or of a busy-looping poll() or select()), and the completions they
    // took from it themselves.
    RecvBusyPolls => "recv_busy_polls",
    RecvBusyPolled => "recv_busy_polled",
}

const COUNT: usize = NAMES.len();

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: Atomic<u64> = Atomic::new(0);
static VALUES: [Atomic<u64>; COUNT] = [ZERO; COUNT];

/// Adds `n` to counter `s`.
pub(crate) fn add(s: Stat, n: u64) {
    VALUES[s as usize].add(n, Relaxed);
}

/// Adds one to counter `s`.
pub(crate) fn inc(s: Stat) {
    add(s, 1);
}

/// Every counter's name and value, in upstream's order, rrds's own last.
pub(crate) fn snapshot() -> impl Iterator<Item = (&'static str, u64)> {
    NAMES
        .iter()
        .zip(VALUES.iter())
        .map(|(n, v)| (*n, v.load(Relaxed)))
}

// SPDX-License-Identifier: GPL-2.0

//! The receive path: a message that arrived on a connection is checked,
//! answered if it is a ping, and queued on the socket bound to its
//! destination (upstream's recv.c, `rds_recv_incoming`). Transports call
//! [`arrived`]; the socket layer plugs its bind table in at module init
//! ([`set_bind_table`]), so this layer never names a socket type.

use kernel::{
    prelude::*,
    sync::{
        Arc,
        SetOnce, //
    },
};

use crate::{
    addr::Endpoint,
    conn::{
        self,
        ConnKey,
        Connection, //
    },
    ffi::{
        net::NetRef,
        time, //
    },
    message::{
        Extension,
        Header,
        Message, //
    },
    stats::{
        self,
        Stat, //
    },
};

/// A socket the receive path queues messages on (the socket layer's `RdsSock`).
pub(crate) trait Receiver: Send + Sync {
    /// A peer's RDMA to this socket's MR `rkey` is done (RC ordering): a
    /// USE_ONCE MR goes.
    fn mr_used(&self, rkey: u32);

    /// Queues `message` from `from`, first seen at `seen_ns` (trace clock),
    /// which came over `path` (what a busy-polling socket polls next).
    /// Fails as [`arrived`] says; the message is then not taken.
    fn deliver(
        &self,
        header: Header,
        from: Endpoint,
        message: Arc<Message>,
        seen_ns: u64,
        dir: Direction,
        path: &Path,
    ) -> Result;
}

/// Where the receive path finds the socket bound to an address: the socket
/// layer's bind table.
pub(crate) trait BindTable: Sync {
    /// The socket bound to `to` in `net`, if any.
    fn find(&self, net: NetRef, to: &Endpoint) -> Option<Arc<dyn Receiver>>;
}

static BIND_TABLE: SetOnce<&'static dyn BindTable> = SetOnce::new();

/// Plugs the socket layer's bind table in. Call once, in module init, before
/// any transport can receive.
pub(crate) fn set_bind_table(table: &'static dyn BindTable) {
    BIND_TABLE.populate(table);
}

/// Messages to port 0 are pings, answered by the RDS stack itself.
const PING_PORT: u16 = 0;

/// Receive-path trace stamps: monotonic ns (upstream uses `local_clock()`,
/// whose resolution can be a jiffy where the TSC is not trusted).
pub(crate) fn trace_clock() -> u64 {
    time::monotonic_ns()
}

pub(crate) use crate::transport::{
    Direction,
    Path, //
};

/// A message arrived on `conn`: check it, answer pings, queue it on the bound
/// socket (upstream's `rds_recv_incoming`). Process context (IB completions
/// run on ib_core's workqueue).
///
/// Fails if the socket's receive queue could not grow (`ENOMEM`), or for a
/// loopback message, is full (`ENOBUFS`, see `RdsSock::deliver`): the
/// message is then not received, and the transport must offer it again (IB
/// resets the link, whose peer retransmits what was not acknowledged;
/// loopback keeps it queued for the watchdog's retry).
pub(crate) fn arrived(
    conn: &Connection,
    dir: Direction,
    header: Header,
    message: Arc<Message>,
) -> Result {
    let seen_ns = trace_clock();
    if header.len as usize != message.len() || !conn.wants_sequence(&header) {
        return Ok(());
    }
    let key = conn.key;
    let (local, remote) = match dir {
        Direction::Loopback => (key.faddr, key.laddr),
        Direction::FromPeer => (key.laddr, key.faddr),
    };
    if header.dport == PING_PORT {
        conn.received_sequence(&header);
        if header.sport != PING_PORT {
            stats::inc(Stat::RecvPing);
            match dir {
                Direction::Loopback => send_pong(conn, header.sport),
                // The answer goes back on the connection it came in on.
                Direction::FromPeer => queue_pong(conn, header.sport),
            }
        }
        return Ok(());
    }
    let to = Endpoint {
        addr: local,
        port: header.dport,
        scope: key.scope,
    };
    let Some(sock) = BIND_TABLE
        .as_ref()
        .and_then(|table| table.find(key.net, &to))
    else {
        conn.received_sequence(&header);
        stats::inc(Stat::RecvDropNoSock);
        return Ok(());
    };
    let from = Endpoint {
        addr: remote,
        port: header.sport,
        scope: 0,
    };
    for ext in header.extensions() {
        match ext {
            // The sender's RDMA to our MR is done (RC ordering): a USE_ONCE MR goes.
            Extension::Rdma { rkey } => sock.mr_used(rkey),
            Extension::RdmaBytes { bytes, .. } => stats::add(Stat::RecvRdmaBytes, bytes.into()),
            _ => {}
        }
    }
    sock.deliver(header, from, message, seen_ns, dir, &conn.path)?;
    conn.received_sequence(&header);
    Ok(())
}

/// Answers a ping with an empty message from port 0, on the connection back
/// to the pinger (upstream's `rds_send_pong`; unlike upstream's loopback, the
/// pong reaches the pinger whatever address it pinged). A congested pinger
/// port loses the pong, as upstream.
fn send_pong(conn: &Connection, dport: u16) {
    let key = ConnKey {
        laddr: conn.key.faddr,
        faddr: conn.key.laddr,
        ..conn.key
    };
    let back = match conn::get(key, conn.transport) {
        Ok(back) => back,
        Err(_) => {
            pr_debug!("pong to port {} not sent\n", dport);
            return;
        }
    };
    queue_pong(&back, dport);
    conn::put(back);
}

/// Queues a pong to `dport` on `conn` and transmits it.
fn queue_pong(conn: &Connection, dport: u16) {
    let sent = (|| -> Result {
        if conn.fcong.is_congested(dport) {
            return Ok(());
        }
        let message = Message::empty()?;
        let header = Header {
            dport,
            ..Header::default()
        };
        conn.queue(header, message, None)?;
        stats::inc(Stat::SendPong);
        conn.xmit();
        Ok(())
    })();
    if sent.is_err() {
        pr_debug!("pong to port {} not sent\n", dport);
    }
}

// SPDX-License-Identifier: GPL-2.0

//! The bind table: which socket owns (namespace, address, port, scope).

use kernel::{
    prelude::*,
    sync::{
        Arc,
        ArcBorrow, //
    },
};

use super::{
    addr::Endpoint,
    RdsSock, //
};
use crate::{
    errno,
    ffi::{
        bindings,
        net::NetRef, //
    },
};

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    // A spinlock: every received message looks its socket up here, and the IB
    // transport's receive path runs in atomic context.
    unsafe(uninit) static BOUND: SpinLock<KVec<(NetRef, Endpoint, Arc<RdsSock>)>> = KVec::new();
}

/// Initialises the table. Call once, in module init, before registering PF_RDS.
pub(crate) fn init() {
    // SAFETY: Module init calls this exactly once, before any other use of `BOUND`.
    unsafe { BOUND.init() };
}

/// Frees the table's buffer. Call once, at unload, after the last socket.
pub(crate) fn release_table() {
    crate::free_table(&mut BOUND.lock());
}

/// Port 1 is reserved (upstream's `RDS_FLAG_PROBE_PORT`); 0 asks for a free one.
const PROBE_PORT: u16 = 1;

/// Binds `sock` to `ep`; a port of 0 picks a free port. Returns the port.
pub(crate) fn add(sock: ArcBorrow<'_, RdsSock>, ep: Endpoint) -> Result<u16> {
    let me: Arc<RdsSock> = sock.into();
    let mut table = BOUND.lock();
    let taken = |t: &KVec<(NetRef, Endpoint, Arc<RdsSock>)>, port: u16| {
        let key = Endpoint { port, ..ep };
        t.iter().any(|(n, e, _)| *n == sock.net && *e == key)
    };
    let port = match ep.port {
        PROBE_PORT => return Err(EINVAL),
        0 => {
            // Start at a random port so that sockets do not all get the same one.
            // SAFETY: `get_random_u16` has no preconditions.
            let start = unsafe { bindings::get_random_u16() }.max(2);
            Iterator::chain(start..=u16::MAX, 2..start)
                .find(|&p| !taken(&table, p))
                .ok_or_else(errno::eaddrinuse)?
        }
        p if taken(&table, p) => return Err(errno::eaddrinuse()),
        p => p,
    };
    table.push((sock.net, Endpoint { port, ..ep }, me), GFP_ATOMIC)?;
    Ok(port)
}

/// Unbinds `ep` in `net`.
pub(crate) fn remove(net: NetRef, ep: &Endpoint) {
    let removed = {
        let mut table = BOUND.lock();
        match table.iter().position(|(n, e, _)| *n == net && e == ep) {
            Some(i) => table.remove(i).ok(),
            None => None,
        }
    };
    // Outside the spinlock: a socket reference may sleep when it goes.
    drop(removed);
}

/// The socket bound to `ep` in `net`, if any.
pub(crate) fn find(net: NetRef, ep: &Endpoint) -> Option<Arc<RdsSock>> {
    BOUND
        .lock()
        .iter()
        // The whole key, scope id included, as upstream's rds_find_bound.
        .find(|(n, e, _)| *n == net && e == ep)
        .map(|(_, _, s)| s.clone())
}

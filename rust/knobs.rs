// SPDX-License-Identifier: GPL-2.0

//! Each network namespace's own knobs, `/proc/sys/net/rrds/*`: made with
//! the namespace (or when rrds loads) from the module parameters' values
//! (`crate::limits`), then set by the namespace's administrator.

use kernel::prelude::*;

use crate::ffi::net::{
    NetRef,
    NetUintSysctl, //
};

/// Per-namespace knobs: `/proc/sys/net/rrds/*` of each namespace, made
/// when the namespace is (or when rrds loads) from the module parameters.
struct NetKnobs {
    net: NetRef,
    idle_timeout_secs: Pin<KBox<NetUintSysctl>>,
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before the pernet
    // operations are registered.
    unsafe(uninit) static NET_KNOBS: Mutex<KVec<NetKnobs>> = KVec::new();
}

/// Initialises the table of namespaces' knobs. Call once, in module init.
pub(crate) fn init(m: &crate::ffi::global::ModuleInit) {
    m.init_lock(&NET_KNOBS);
}

/// Frees the table's buffer. Call once, at unload, after the pernet operations.
pub(crate) fn release_table() {
    crate::tables::free_table(&mut NET_KNOBS.lock());
}

/// `net` was created: its sysctls, from the module parameters.
pub(crate) fn net_init(net: NetRef) -> Result {
    let idle_timeout_secs = NetUintSysctl::register(
        net,
        c"net/rrds",
        c"idle_timeout_secs",
        crate::limits::idle_timeout_secs_default(),
    )?;
    NET_KNOBS.lock().push(
        NetKnobs {
            net,
            idle_timeout_secs,
        },
        GFP_KERNEL,
    )?;
    Ok(())
}

/// `net` is going: its sysctls go (unregistered outside the table's lock).
pub(crate) fn net_exit(net: NetRef) {
    let gone = {
        let mut knobs = NET_KNOBS.lock();
        knobs
            .iter()
            .position(|k| k.net == net)
            .and_then(|i| knobs.remove(i).ok())
    };
    drop(gone);
}

/// Seconds an IB link of `net` may carry nothing, with nothing queued or
/// unacknowledged, before it is taken down; 0: never. Sysctl
/// `net.rrds.idle_timeout_secs`, which starts at the module parameter.
pub(crate) fn idle_timeout_secs(net: NetRef) -> u32 {
    NET_KNOBS
        .lock()
        .iter()
        .find(|k| k.net == net)
        .map_or(crate::limits::idle_timeout_secs_default(), |k| {
            k.idle_timeout_secs.get()
        })
}

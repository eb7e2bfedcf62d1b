// SPDX-License-Identifier: GPL-2.0

//! Each network namespace's own knobs, `/proc/sys/net/rrds/*`: made with
//! the namespace (or when rrds loads) from the module parameters' values
//! (`crate::limits`), then set by the namespace's administrator.

use kernel::{
    prelude::*,
    rbtree::RBTree, //
};

use crate::ffi::net::{
    NetRef,
    NetUintSysctl, //
};

/// Per-namespace knobs: `/proc/sys/net/rrds/*` of each namespace, made
/// when the namespace is (or when rrds loads) from the module parameters.
struct NetKnobs {
    idle_timeout_secs: Pin<KBox<NetUintSysctl>>,
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before the pernet
    // operations are registered.
    // By namespace (each link's watchdog tick reads its own); `None` until
    // the first (`RBTree::new` is not const).
    unsafe(uninit) static NET_KNOBS: Mutex<Option<RBTree<NetRef, NetKnobs>>> = None;
}

/// Initialises the table of namespaces' knobs. Call once, in module init.
pub(crate) fn init(m: &crate::ffi::global::ModuleInit) {
    m.init_lock(&NET_KNOBS);
}

/// Frees the table's buffer. Call once, at unload, after the pernet operations.
pub(crate) fn release_table() {
    let knobs = NET_KNOBS.lock().take();
    drop(knobs);
}

/// `net` was created: its sysctls, from the module parameters.
pub(crate) fn net_init(net: NetRef) -> Result {
    let idle_timeout_secs = NetUintSysctl::register(
        net,
        c"net/rrds",
        c"idle_timeout_secs",
        crate::limits::idle_timeout_secs_default(),
    )?;
    NET_KNOBS
        .lock()
        .get_or_insert_with(RBTree::new)
        .try_create_and_insert(net, NetKnobs { idle_timeout_secs }, GFP_KERNEL)?;
    Ok(())
}

/// `net` is going: its sysctls go (unregistered outside the table's lock).
pub(crate) fn net_exit(net: NetRef) {
    let gone = NET_KNOBS
        .lock()
        .as_mut()
        .and_then(|knobs| knobs.remove(&net));
    drop(gone);
}

/// Seconds an IB link of `net` may carry nothing, with nothing queued or
/// unacknowledged, before it is taken down; 0: never. Sysctl
/// `net.rrds.idle_timeout_secs`, which starts at the module parameter.
pub(crate) fn idle_timeout_secs(net: NetRef) -> u32 {
    NET_KNOBS
        .lock()
        .as_ref()
        .and_then(|knobs| knobs.get(&net))
        .map_or(crate::limits::idle_timeout_secs_default(), |k| {
            k.idle_timeout_secs.get()
        })
}

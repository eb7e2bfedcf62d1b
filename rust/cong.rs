// SPDX-License-Identifier: GPL-2.0

//! Congestion maps: one bit per port of an address, set while the socket
//! bound there holds more than half its receive buffer (net/rds/cong.c).
//!
//! Senders check the destination's bit before queueing: a congested port
//! gets `ENOBUFS` (non-blocking) or makes the sender wait. rrds keeps one map
//! per (namespace, address); upstream's maps are global across namespaces.

use kernel::{
    new_spinlock,
    prelude::*,
    sync::{
        poll::PollCondVar,
        Arc,
        SpinLock, //
    },
};

use crate::{
    ffi::net::NetRef,
    socket::RdsSock,
    stats::{
        self,
        Stat, //
    },
    wait::wait_until,
};

const PORT_WORDS: usize = 65536 / 64;

/// The congestion bits of the ports of one address.
#[pin_data]
pub(crate) struct CongMap {
    net: NetRef,
    addr: [u8; 16],
    #[pin]
    bits: SpinLock<KVec<u64>>,
    /// Senders waiting for a port to clear, and pollers refused by one.
    #[pin]
    wait: PollCondVar,
}

/// A map and the number of its users (bound sockets and connections): a map
/// nobody uses is freed, so sends to ever new addresses cannot pile maps up.
struct MapEntry {
    map: Arc<CongMap>,
    users: usize,
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    unsafe(uninit) static MAPS: Mutex<KVec<MapEntry>> = KVec::new();
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    unsafe(uninit) static MONITORS: SpinLock<KVec<Arc<RdsSock>>> = KVec::new();
}

/// Initialises the tables. Call once, in module init.
pub(crate) fn init() {
    // SAFETY: Module init calls this exactly once, before any other use of the tables.
    unsafe {
        MAPS.init();
        MONITORS.init();
    }
}

/// The map of `addr` in `net`, created on first use; the caller is a user
/// until it calls [`put`].
pub(crate) fn get(net: NetRef, addr: [u8; 16]) -> Result<Arc<CongMap>> {
    let mut maps = MAPS.lock();
    if let Some(e) = maps
        .iter_mut()
        .find(|e| e.map.net == net && e.map.addr == addr)
    {
        e.users += 1;
        return Ok(e.map.clone());
    }
    let mut bits = KVec::with_capacity(PORT_WORDS, GFP_KERNEL)?;
    bits.resize(PORT_WORDS, 0, GFP_KERNEL)?;
    let map = Arc::pin_init(
        try_pin_init!(CongMap {
            net,
            addr,
            bits <- new_spinlock!(bits),
            wait <- kernel::new_poll_condvar!("rrds_cong_wait"),
        }),
        GFP_KERNEL,
    )?;
    maps.push(
        MapEntry {
            map: map.clone(),
            users: 1,
        },
        GFP_KERNEL,
    )?;
    Ok(map)
}

/// Ends a use of `map` begun by [`get`]; the last one frees it. Process context.
pub(crate) fn put(map: Arc<CongMap>) {
    let removed = {
        let mut maps = MAPS.lock();
        match maps.iter().position(|e| Arc::ptr_eq(&e.map, &map)) {
            Some(i) if maps[i].users <= 1 => maps.remove(i).ok(),
            Some(i) => {
                maps[i].users -= 1;
                None
            }
            None => None,
        }
    };
    // Dropped here, outside the lock: a PollCondVar's drop may sleep.
    drop((removed, map));
}

/// Forgets the maps of `net`, which is exiting.
pub(crate) fn forget_net(net: NetRef) {
    loop {
        let entry = {
            let mut maps = MAPS.lock();
            match maps.iter().position(|e| e.map.net == net) {
                Some(i) => maps.remove(i).ok(),
                None => None,
            }
        };
        if entry.is_none() {
            break;
        }
    }
}

/// How many maps exist (debugfs, tests).
pub(crate) fn count() -> usize {
    MAPS.lock().len()
}

fn bit(port: u16) -> (usize, u64) {
    (usize::from(port) / 64, 1u64 << (port % 64))
}

impl CongMap {
    pub(crate) fn is_congested(&self, port: u16) -> bool {
        let (word, mask) = bit(port);
        self.bits.lock()[word] & mask != 0
    }

    /// Sets or clears the bit of `port`. Any context. Clearing wakes the
    /// senders waiting on the map; the caller then calls [`notify_monitors`]
    /// outside its own locks.
    pub(crate) fn set_congested(&self, port: u16, congested: bool) {
        let (word, mask) = bit(port);
        let mut bits = self.bits.lock();
        if congested {
            bits[word] |= mask;
        } else {
            bits[word] &= !mask;
        }
        drop(bits);
        stats::inc(Stat::CongUpdateQueued);
        if !congested {
            self.wait.notify_all();
        }
    }

    /// The wait queue pollers refused for congestion register with.
    pub(crate) fn wait_queue(&self) -> &PollCondVar {
        &self.wait
    }

    /// Waits until `port` is not congested, for at most `timeo` jiffies
    /// (0: don't wait, `ENOBUFS`). Process context.
    pub(crate) fn wait_uncongested(&self, port: u16, timeo: &mut isize) -> Result {
        let (word, mask) = bit(port);
        let mut bits = self.bits.lock();
        if bits[word] & mask == 0 {
            return Ok(());
        }
        if *timeo == 0 {
            stats::inc(Stat::CongSendError);
            return Err(crate::errno::enobufs());
        }
        stats::inc(Stat::CongSendBlocked);
        wait_until(&self.wait, &mut bits, timeo, |b| b[word] & mask == 0)
    }
}

/// Adds `sock` to the sockets told about congestion updates (`RDS_CONG_MONITOR`).
pub(crate) fn add_monitor(sock: Arc<RdsSock>) -> Result {
    let mut monitors = MONITORS.lock();
    if monitors.iter().any(|s| core::ptr::eq(&**s, &*sock)) {
        return Ok(());
    }
    monitors.push(sock, GFP_ATOMIC)?;
    Ok(())
}

/// Removes `sock` from the monitors. Process context.
pub(crate) fn remove_monitor(sock: &RdsSock) {
    let removed = {
        let mut monitors = MONITORS.lock();
        match monitors.iter().position(|s| core::ptr::eq(&**s, sock)) {
            Some(i) => monitors.remove(i).ok(),
            None => None,
        }
    };
    // The reference goes outside the spinlock.
    drop(removed);
}

/// A port of `net` has uncongested: every monitoring socket of `net` gets the
/// ports it was refused for as a notification (upstream passes an all-ones
/// port mask to `rds_cong_map_updated`, so every refused port is reported).
pub(crate) fn notify_monitors(net: NetRef) {
    stats::inc(Stat::CongUpdateReceived);
    for sock in MONITORS.lock().iter().filter(|s| s.net() == net) {
        sock.cong_notify_all_refused();
    }
}

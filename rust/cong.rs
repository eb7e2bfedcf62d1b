// SPDX-License-Identifier: GPL-2.0

//! Congestion maps: one bit per port of an address, set while the socket
//! bound there holds more than half its receive buffer (net/rds/cong.c).
//!
//! Senders check the destination's bit before queueing: a congested port
//! gets `ENOBUFS` (non-blocking) or makes the sender wait. rrds keeps one map
//! per (namespace, address, side); upstream's maps are global across
//! namespaces, and one per address whichever side set it.
//!
//! The side keeps what we say apart from what peers say: a [`Side::Local`]
//! map holds the bits of our own sockets (set by the receive path, sent to
//! IB peers, read by loopback senders); a [`Side::Remote`] map holds the
//! bits an IB peer sent. A peer that claims one of our addresses as its own
//! can then only describe itself, never congest our ports.

use kernel::{
    impl_has_work, new_spinlock, new_work,
    prelude::*,
    rbtree::RBTree,
    sync::{
        poll::PollCondVar,
        Arc,
        SpinLock, //
    },
    workqueue::{
        Work,
        WorkItem, //
    },
};

use crate::{
    ffi::{net::NetRef, workqueue},
    message::Message,
    stats::{
        self,
        Stat, //
    },
    wait::wait_until,
};

const PORT_WORDS: usize = 65536 / 64;
/// A map on the wire (`RDS_CONG_MAP_BYTES`): bit p is byte p / 8, bit p % 8.
pub(crate) const WIRE_BYTES: usize = 65536 / 8;

/// Whose ports a map describes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Side {
    /// An address of ours: the bits of the sockets bound to it.
    Local,
    /// A peer's address, as the peer's own map over IB says.
    Remote,
}

/// The congestion bits of the ports of one address; `get` makes them, in
/// an `Arc`.
#[pin_data]
pub(crate) struct CongMap {
    pub(crate) net: NetRef,
    pub(crate) addr: [u8; 16],
    pub(crate) side: Side,
    #[pin]
    bits: SpinLock<KVec<u64>>,
    /// Senders waiting for a port to clear, and pollers refused by one.
    #[pin]
    wait: PollCondVar,
    /// Sends the map to the peers of IB connections from this address after
    /// a change (process context).
    #[pin]
    changed: Work<CongMap>,
}

impl_has_work! {
    impl HasWork<Self> for CongMap { self.changed }
}

impl WorkItem for CongMap {
    type Pointer = Arc<CongMap>;

    fn run(this: Arc<CongMap>) {
        // Only our own sockets' bits are ours to tell.
        if this.side == Side::Local {
            this.send_to_peers();
        }
    }
}

impl CongMap {
    /// Sends this local map, encoded once and only if one needs it, to the
    /// peer of every connection from its address that has a link (through
    /// the connection's transport `Path`). Process context (the work item).
    fn send_to_peers(&self) {
        let Some(connections) = crate::transport::connections() else {
            return;
        };
        let mut wire = None;
        for c in connections.snapshot() {
            let key = c.key();
            if !c.path().has_link() || key.net != self.net || key.laddr != self.addr {
                continue;
            }
            if wire.is_none() {
                wire = self.to_message().ok();
            }
            if let Some(w) = &wire {
                c.path().send_cong_map(w.clone());
            }
        }
    }
}

/// A map and the number of its users (bound sockets and connections): a map
/// nobody uses is freed, so sends to ever new addresses cannot pile maps up.
struct MapEntry {
    map: Arc<CongMap>,
    users: usize,
}

/// What identifies a map, in the table's order: by namespace first, so that
/// a namespace's maps are neighbours.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct MapKey {
    net: NetRef,
    addr: [u8; 16],
    side: Side,
}

impl MapKey {
    fn of(map: &CongMap) -> Self {
        Self {
            net: map.net,
            addr: map.addr,
            side: map.side,
        }
    }
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    // Every map by key: lookups cost O(log n) however many there are. `None`
    // until the first map (a tree cannot be built in a constant).
    unsafe(uninit) static MAPS: Mutex<Option<RBTree<MapKey, MapEntry>>> = None;
}

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    unsafe(uninit) static MONITORS: SpinLock<KVec<Arc<dyn CongMonitor>>> = KVec::new();
}

/// Initialises the tables. Call once, in module init.
pub(crate) fn init(m: &crate::ffi::global::ModuleInit) {
    m.init_lock(&MAPS);
    m.init_lock(&MONITORS);
}

/// Frees the tables' buffers. Call once, at unload, after the last socket and map.
pub(crate) fn release_tables() {
    let maps = MAPS.lock().take();
    drop(maps);
    crate::tables::free_table(&mut MONITORS.lock());
}

/// The `side` map of `addr` in `net`, created on first use; the caller is a
/// user until it calls [`put`].
pub(crate) fn get(net: NetRef, addr: [u8; 16], side: Side) -> Result<Arc<CongMap>> {
    let key = MapKey { net, addr, side };
    let mut guard = MAPS.lock();
    let maps = guard.get_or_insert_with(RBTree::new);
    if let Some(e) = maps.get_mut(&key) {
        e.users += 1;
        return Ok(e.map.clone());
    }
    let mut bits = KVec::with_capacity(PORT_WORDS, GFP_KERNEL)?;
    bits.resize(PORT_WORDS, 0, GFP_KERNEL)?;
    let map = Arc::pin_init(
        try_pin_init!(CongMap {
            net,
            addr,
            side,
            bits <- new_spinlock!(bits),
            wait <- kernel::new_poll_condvar!("rrds_cong_wait"),
            changed <- new_work!("rrds_cong_changed"),
        }),
        GFP_KERNEL,
    )?;
    maps.try_create_and_insert(
        key,
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
    let key = MapKey::of(&map);
    let removed = {
        let mut guard = MAPS.lock();
        let maps = guard.as_mut();
        match maps.and_then(|m| m.find_mut(&key)) {
            Some(mut e) if Arc::ptr_eq(&e.get().map, &map) => {
                if e.get().users <= 1 {
                    Some(e.remove_node())
                } else {
                    e.get_mut().users -= 1;
                    None
                }
            }
            _ => None,
        }
    };
    // Dropped here, outside the lock: a PollCondVar's drop may sleep.
    drop((removed, map));
}

/// Forgets the maps of `net`, which is exiting.
pub(crate) fn forget_net(net: NetRef) {
    let first = MapKey {
        net,
        addr: [0; 16],
        side: Side::Local,
    };
    loop {
        // One at a time, each dropped outside the lock (see `put`).
        let entry = {
            let mut guard = MAPS.lock();
            let Some(maps) = guard.as_mut() else {
                break;
            };
            let key = maps
                .cursor_lower_bound(&first)
                .map(|c| *c.current().0)
                .filter(|k| k.net == net);
            key.and_then(|k| maps.remove_node(&k))
        };
        if entry.is_none() {
            break;
        }
    }
}

/// The `side` map of `addr` in `net` if one exists (no use is taken).
pub(crate) fn find(net: NetRef, addr: &[u8; 16], side: Side) -> Option<Arc<CongMap>> {
    let key = MapKey {
        net,
        addr: *addr,
        side,
    };
    MAPS.lock()
        .as_ref()
        .and_then(|maps| maps.get(&key))
        .map(|e| e.map.clone())
}

/// How many maps exist (debugfs, tests).
pub(crate) fn count() -> usize {
    MAPS.lock().as_ref().map_or(0, |maps| maps.iter().count())
}

fn bit(port: u16) -> (usize, u64) {
    (usize::from(port) / 64, 1u64 << (port % 64))
}

/// Ports' words in wire form: little-endian words put port p at byte p / 8,
/// bit p % 8 (upstream's `__set_bit_le` on its map pages).
fn words_to_wire(words: &[u64], out: &mut [u8; WIRE_BYTES]) {
    for (i, word) in words.iter().enumerate().take(PORT_WORDS) {
        out[i * 8..i * 8 + 8].copy_from_slice(&word.to_le_bytes());
    }
}

/// Word `i` of a map in wire form.
fn wire_word(wire: &[u8; WIRE_BYTES], i: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&wire[i * 8..i * 8 + 8]);
    u64::from_le_bytes(b)
}

impl CongMap {
    pub(crate) fn is_congested(&self, port: u16) -> bool {
        let (word, mask) = bit(port);
        self.bits.lock()[word] & mask != 0
    }

    /// Sets or clears the bit of `port`. Any context. Clearing wakes the
    /// senders waiting on the map; the caller then calls [`notify_monitors`]
    /// outside its own locks. IB peers are told from a work item.
    pub(crate) fn set_congested(self: &Arc<Self>, port: u16, congested: bool) {
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
        // Already queued: that run sends the latest bits.
        let _ = workqueue::queue().enqueue(self.clone());
    }

    /// The map in wire form.
    pub(crate) fn to_wire(&self, out: &mut [u8; WIRE_BYTES]) {
        words_to_wire(&self.bits.lock(), out);
    }

    /// The map as a congestion-map message (8 KiB), as IB sends it to a peer.
    /// Process context.
    pub(crate) fn to_message(&self) -> Result<Arc<Message>> {
        let mut wire = KVec::with_capacity(WIRE_BYTES, GFP_KERNEL)?;
        wire.resize(WIRE_BYTES, 0, GFP_KERNEL)?;
        let buf: &mut [u8; WIRE_BYTES] = wire.as_mut_slice().try_into().map_err(|_| EINVAL)?;
        self.to_wire(buf);
        Message::from_kernel(&wire)
    }

    /// Takes a peer's congestion-map message as this map's bits, as
    /// [`CongMap::apply_wire`]; a message of another size is ignored (as
    /// upstream does) and changes nothing.
    pub(crate) fn apply_message(&self, message: &Message) -> Result<bool> {
        if message.len() != WIRE_BYTES {
            return Ok(false);
        }
        let mut wire = KVec::with_capacity(WIRE_BYTES, GFP_KERNEL)?;
        wire.resize(WIRE_BYTES, 0, GFP_KERNEL)?;
        message.copy_to_kernel(&mut wire)?;
        let wire: &[u8; WIRE_BYTES] = wire.as_slice().try_into().map_err(|_| EINVAL)?;
        Ok(self.apply_wire(wire))
    }

    /// Takes a peer's map in wire form as this map's bits (the map of a
    /// remote address); returns whether a port cleared, after waking the
    /// senders waiting on it.
    pub(crate) fn apply_wire(&self, wire: &[u8; WIRE_BYTES]) -> bool {
        let mut cleared = false;
        let mut bits = self.bits.lock();
        for (i, word) in bits.iter_mut().enumerate() {
            let new = wire_word(wire, i);
            cleared |= *word & !new != 0;
            *word = new;
        }
        drop(bits);
        if cleared {
            self.wait.notify_all();
        }
        cleared
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

/// A socket told about congestion updates (`RDS_CONG_MONITOR`).
pub(crate) trait CongMonitor: Send + Sync {
    /// The namespace whose updates it hears.
    fn net(&self) -> NetRef;
    /// A port of its namespace may have uncongested. Called with the monitor
    /// list (a spinlock) held.
    fn cong_notify_all_refused(&self);
}

/// Adds `sock` to the sockets told about congestion updates (`RDS_CONG_MONITOR`).
pub(crate) fn add_monitor(sock: Arc<dyn CongMonitor>) -> Result {
    let mut monitors = MONITORS.lock();
    if monitors.iter().any(|s| core::ptr::addr_eq(&**s, &*sock)) {
        return Ok(());
    }
    monitors.push(sock, GFP_ATOMIC)?;
    Ok(())
}

/// Removes `sock` from the monitors. Process context.
pub(crate) fn remove_monitor(sock: &dyn CongMonitor) {
    let removed = {
        let mut monitors = MONITORS.lock();
        match monitors.iter().position(|s| core::ptr::addr_eq(&**s, sock)) {
            Some(i) => monitors.remove(i).ok(),
            None => None,
        }
    };
    // The reference goes outside the spinlock.
    drop(removed);
}

/// A local port of `net` has uncongested (its socket read or closed): an
/// update as upstream counts one for loopback, and the monitors are told.
pub(crate) fn local_port_cleared(net: NetRef) {
    stats::inc(Stat::CongUpdateReceived);
    notify_monitors(net);
}

/// A port of `net` has uncongested: every monitoring socket of `net` gets the
/// ports it was refused for as a notification (upstream passes an all-ones
/// port mask to `rds_cong_map_updated`, so every refused port is reported).
pub(crate) fn notify_monitors(net: NetRef) {
    for sock in MONITORS.lock().iter().filter(|s| s.net() == net) {
        sock.cong_notify_all_refused();
    }
}

#[kunit_tests(rrds_cong_bitmap)]
mod tests {
    use super::*;

    #[test]
    fn port_p_is_byte_p_over_8_bit_p_mod_8_on_the_wire() -> Result {
        let mut words = KVec::new();
        words.resize(PORT_WORDS, 0u64, GFP_KERNEL)?;
        for port in [0u16, 9, 4000, 65535] {
            let (word, mask) = bit(port);
            words[word] |= mask;
        }
        let mut wire = KVec::new();
        wire.resize(WIRE_BYTES, 0u8, GFP_KERNEL)?;
        let wire: &mut [u8; WIRE_BYTES] = wire.as_mut_slice().try_into().map_err(|_| EINVAL)?;
        words_to_wire(&words, wire);
        assert_eq!(wire[0], 0x01);
        assert_eq!(wire[1], 0x02);
        assert_eq!(wire[500], 0x01);
        assert_eq!(wire[WIRE_BYTES - 1], 0x80);
        assert_eq!(wire.iter().filter(|&&b| b != 0).count(), 4);
        for (i, word) in words.iter().enumerate() {
            assert_eq!(wire_word(wire, i), *word);
        }
        Ok(())
    }
}

// SPDX-License-Identifier: GPL-2.0

//! A process's registration with a target: its event ring, its exit watch,
//! and its end (the last registration of a target retires it).

// The rest of the XRC manager: mod.rs's types and imports.
use super::*;

/// The events of one registration, oldest first.
struct EventRing {
    slots: [bindings::rrds_xrc_event; QUEUE_LEN],
    head: usize,
    len: usize,
}

/// One process's registration with a target, made through one socket.
///
/// # Invariants
///
/// The exit watch is armed with this registration as its owner while the
/// registration is in its target's `fanout` list; `detach` disarms it.
#[pin_data]
pub(crate) struct Registration {
    pub(super) target: Arc<Target>,
    pub(super) process: ProcessRef,
    /// The socket events are read from; the socket's release detaches this.
    pub(super) sink: Arc<dyn EventSink>,
    #[pin]
    ring: IrqSpinLock<EventRing>,
    #[pin]
    pub(super) exit_watch: ExitWatch,
    /// Checks, in process context, that the watched process really exited.
    #[pin]
    reap: Work<Registration>,
}

impl_has_work! {
    impl HasWork<Self> for Registration { self.reap }
}

impl WorkItem for Registration {
    type Pointer = Arc<Registration>;

    fn run(this: Arc<Registration>) {
        if this.process.exited() && this.detach() {
            // Nobody is left to read what was queued.
            this.sink.forget(&this);
        }
    }
}

// SAFETY: `exit_watch` is a field of the registration, pinned in its `Arc`, armed
// (`watch_exit`) with the registration's own `process` only while the registration
// is in its target's list, which holds an `Arc`, and disarmed (`detach`) as it
// leaves the list, so before either can go; disarming waits for a running callback.
unsafe impl ExitHandler for Registration {
    fn process_exited(this: ArcBorrow<'_, Self>) {
        let _ = workqueue::queue().enqueue(Arc::<Registration>::from(this));
    }
}

impl Registration {
    pub(super) fn new(target: Arc<Target>, sink: Arc<dyn EventSink>) -> Result<Arc<Self>> {
        let process = ProcessRef::current()?;
        Arc::pin_init(
            pin_init!(Self {
                target,
                process,
                sink,
                ring <- new_irq_spinlock!(EventRing {
                    slots: [bindings::rrds_xrc_event::default(); QUEUE_LEN],
                    head: 0,
                    len: 0,
                }),
                exit_watch <- ExitWatch::new(),
                reap <- new_work!("rrds_xrc_reap"),
            }),
            GFP_KERNEL,
        )
    }

    /// Queues an event; false if the queue was full (the newest queued event
    /// then carries the loss).
    pub(super) fn push(&self, qp_num: u32, event: u32, flags: u32) -> bool {
        let mut ring = self.ring.lock();
        if ring.len == QUEUE_LEN {
            let newest = (ring.head + QUEUE_LEN - 1) % QUEUE_LEN;
            let slot = &mut ring.slots[newest];
            slot.flags |= FLAG_OVERFLOW;
            slot.lost = slot.lost.saturating_add(1);
            return false;
        }
        let tail = (ring.head + ring.len) % QUEUE_LEN;
        ring.slots[tail] = bindings::rrds_xrc_event {
            qp_num,
            event,
            flags,
            lost: 0,
        };
        ring.len += 1;
        self.sink.event_queued();
        drop(ring);
        true
    }

    /// The oldest event, removed unless `peek`.
    pub(crate) fn pop(&self, peek: bool) -> Option<bindings::rrds_xrc_event> {
        let mut ring = self.ring.lock();
        if ring.len == 0 {
            return None;
        }
        let event = ring.slots[ring.head];
        if !peek {
            ring.head = (ring.head + 1) % QUEUE_LEN;
            ring.len -= 1;
            self.sink.events_taken(1);
        }
        Some(event)
    }

    /// Drops every queued event.
    pub(crate) fn discard(&self) {
        let mut ring = self.ring.lock();
        let n = core::mem::take(&mut ring.len);
        self.sink.events_taken(n);
    }

    /// Ends the registration at its target; retires the target if it was the
    /// last. False if it had already ended.
    pub(crate) fn detach(self: &Arc<Self>) -> bool {
        let target = &self.target;
        let mut fanout = target.fanout.lock();
        let Some(i) = fanout
            .registrations
            .iter()
            .position(|r| Arc::ptr_eq(r, self))
        else {
            return false;
        };
        let ours = fanout.registrations.remove(i).ok();
        let last = fanout.registrations.is_empty() && !fanout.closed;
        if last {
            fanout.closed = true;
        }
        drop(fanout);
        // Not the last reference: the caller holds one.
        drop(ours);
        self.exit_watch.disarm();
        if last {
            target.clone().retire();
        }
        true
    }

    pub(crate) fn target(&self) -> &Arc<Target> {
        &self.target
    }

    /// The socket the registration delivers to.
    pub(crate) fn sink(&self) -> &dyn EventSink {
        &*self.sink
    }
}

/// Arms the exit watch of a registration just added to its target's list.
pub(super) fn watch_exit(registration: &Arc<Registration>) {
    registration
        .exit_watch
        .arm(&registration.process, registration);
}

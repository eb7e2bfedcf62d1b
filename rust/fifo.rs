// SPDX-License-Identifier: GPL-2.0

//! A first-in first-out queue on a growable ring buffer.
//!
//! Send, retransmit and receive queues need O(1) push at the back and pop at
//! the front, in-order iteration (RDS_INFO snapshots) and, rarely, removal from
//! the middle (`RDS_CANCEL_SENT_TO`). `KVec` alone makes every pop O(n).
//! The ring is a `KVVec`: a long queue's buffer comes from vmalloc rather
//! than from a multi-megabyte kmalloc that the page allocator warns about.

use kernel::{
    alloc::{
        Flags,
        KVVec, //
    },
    prelude::*, //
};

/// A FIFO of `T`.
///
/// # Invariants
///
/// `slots[(head + i) % slots.len()]` is `Some` for `i < len` and `None` otherwise.
pub(crate) struct Fifo<T> {
    slots: KVVec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T> Default for Fifo<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Fifo<T> {
    /// An empty queue with no buffer (for statics).
    pub(crate) const fn new() -> Self {
        Self {
            slots: KVVec::new(),
            head: 0,
            len: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The buffer index of the `i`-th element (no division by zero when empty).
    fn slot(&self, i: usize) -> usize {
        self.head
            .wrapping_add(i)
            .checked_rem(self.slots.len())
            .unwrap_or(0)
    }

    /// Whether one more element fits without allocating.
    pub(crate) fn has_room(&self) -> bool {
        self.len < self.slots.len()
    }

    pub(crate) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// An empty buffer of `capacity` slots for [`Self::grow_into`], so that a
    /// queue under a spinlock can grow with an allocation made outside it.
    pub(crate) fn new_slots(capacity: usize, flags: Flags) -> Result<KVVec<Option<T>>> {
        let mut slots = KVVec::with_capacity(capacity, flags)?;
        for _ in 0..capacity {
            slots.push(None, flags)?;
        }
        Ok(slots)
    }

    /// Moves the elements into `slots` if it is larger than the current buffer.
    pub(crate) fn grow_into(&mut self, mut slots: KVVec<Option<T>>) {
        if slots.len() <= self.slots.len() || slots.iter().any(Option::is_some) {
            return;
        }
        for (i, slot) in slots.iter_mut().enumerate().take(self.len) {
            let at = self.slot(i);
            *slot = self.slots[at].take();
        }
        // INVARIANT: the `len` elements moved to the front in order; the rest are `None`.
        self.slots = slots;
        self.head = 0;
    }

    /// Makes room for one more element, allocating with `flags` if full.
    pub(crate) fn reserve_one(&mut self, flags: Flags) -> Result {
        if self.has_room() {
            return Ok(());
        }
        let slots = Self::new_slots((self.slots.len() * 2).max(8), flags)?;
        self.grow_into(slots);
        Ok(())
    }

    /// Appends `value`; fails (handing `value` back) if there is no room and
    /// allocating with `flags` fails.
    pub(crate) fn push_back(&mut self, value: T, flags: Flags) -> Result<(), T> {
        if self.reserve_one(flags).is_err() {
            return Err(value);
        }
        let at = self.slot(self.len);
        self.slots[at] = Some(value);
        self.len += 1;
        Ok(())
    }

    pub(crate) fn front(&self) -> Option<&T> {
        self.get(0)
    }

    pub(crate) fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let value = self.slots[self.head].take();
        self.head = self.slot(1);
        self.len -= 1;
        value
    }

    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len {
            return None;
        }
        self.slots[self.slot(i)].as_ref()
    }

    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        if i >= self.len {
            return None;
        }
        let at = self.slot(i);
        self.slots[at].as_mut()
    }

    /// Removes and returns the element at position `i`, keeping the order of the rest.
    pub(crate) fn remove(&mut self, i: usize) -> Option<T> {
        if i >= self.len {
            return None;
        }
        let at = self.slot(i);
        let value = self.slots[at].take();
        for j in i..self.len - 1 {
            let (to, from) = (self.slot(j), self.slot(j + 1));
            self.slots[to] = self.slots[from].take();
        }
        self.len -= 1;
        value
    }

    /// The position of the first element for which `f` holds.
    pub(crate) fn position(&self, f: impl FnMut(&T) -> bool) -> Option<usize> {
        self.iter().position(f)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        (0..self.len).filter_map(move |i| self.get(i))
    }
}

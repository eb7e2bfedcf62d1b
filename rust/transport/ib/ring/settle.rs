// SPDX-License-Identifier: GPL-2.0

//! Completed sends kept until rxe cannot read them again.
//!
//! rxe's requester, when its retransmit timer fires, rewinds to the oldest
//! request not yet completed and resends from there, in order, without
//! looking at completions again; its completer meanwhile completes requests
//! as the acks of their first transmission come in. So a request can be
//! reported complete while that pass has still to resend it, or is resending
//! it, and rxe reads its buffers after the completion. Any later rewind
//! starts past it. A request posted after the completion is sent by a pass
//! that is past it, so once such a request completes, the completed slots
//! can go. Completions group slots into generations, at most two pending: a
//! completion releases the older one if it qualifies, and starts a new one
//! or adds its slots to the newer (delaying those, never hastening them).

use super::*;

/// What completed: the send at a ring position, or explicit ack number `n`.
#[derive(Clone, Copy)]
pub(in crate::transport::ib) enum Completed {
    Send(usize),
    Ack(usize),
}

/// Completed send slots below `upto`, kept until a request posted after
/// their completion completes: the send at ring position `send_after` or a
/// later one, or explicit ack `ack_after` or a later one.
#[derive(Clone, Copy)]
pub(super) struct Generation {
    upto: usize,
    send_after: usize,
    ack_after: usize,
}

impl Generation {
    fn released_by(&self, completed: Completed) -> bool {
        match completed {
            Completed::Send(position) => position >= self.send_after,
            Completed::Ack(n) => n >= self.ack_after,
        }
    }
}

/// The held slots' generations, oldest first.
#[derive(Default)]
pub(super) struct Generations([Option<Generation>; 2]);

impl Generations {
    /// `completed` came in, with slots below `released` free, below `done`
    /// complete, `posted` sends and `acks` explicit acks posted so far.
    /// Returns the slot below which all can be freed now (`released` if
    /// none), and holds the newly completed ones.
    fn complete(
        &mut self,
        completed: Completed,
        released: usize,
        done: usize,
        posted: usize,
        acks: usize,
    ) -> usize {
        let mut upto = released;
        while let Some(oldest) = self.0[0] {
            if !oldest.released_by(completed) {
                break;
            }
            upto = oldest.upto;
            self.0 = [self.0[1].take(), None];
        }
        let held_upto = match self.0 {
            [_, Some(g)] | [Some(g), None] => g.upto,
            [None, None] => upto,
        };
        if done != held_upto {
            let new = Some(Generation {
                upto: done,
                send_after: posted,
                ack_after: acks,
            });
            match &mut self.0 {
                [first @ None, _] => *first = new,
                [Some(_), second] => *second = new,
            }
        }
        upto
    }
}

impl Rings {
    /// Slots completed and not yet released.
    pub(super) fn settling(&self) -> usize {
        self.send_done - self.send_released
    }

    /// `completed` came in and slots up to `send_done` are complete: releases
    /// the generations it qualifies, then holds the newly completed slots.
    pub(super) fn settle(&mut self, completed: Completed) {
        let upto = self.generations.complete(
            completed,
            self.send_released,
            self.send_done,
            self.send_posted,
            self.acks_posted,
        );
        self.release_upto(upto);
    }
    /// Frees the slots below `upto`. A message with an RDMA operation goes
    /// to `released`, to be dropped outside the lock (its last reference
    /// may take the socket's notification sink with it); others hold only
    /// pages and go here.
    fn release_upto(&mut self, upto: usize) {
        while self.send_released < upto {
            let i = self.send_released % SEND_SLOTS;
            self.send_released += 1;
            let Some(message) = core::mem::take(&mut self.send_slots[i]).release() else {
                continue;
            };
            if message.rdma().is_some() {
                // Within the capacity reserved at set-up; if that is out with
                // the caller (`take_released`), dropped here after all.
                let _ = self.released.push_within_capacity(message);
            }
        }
    }

    /// The messages released since the last call, to drop once the lock is
    /// gone; the emptied vector comes back through `restore_released`.
    pub(in crate::transport::ib) fn take_released(&mut self) -> KVec<Arc<Message>> {
        if self.released.is_empty() {
            return KVec::new();
        }
        core::mem::take(&mut self.released)
    }

    /// Gives back the vector `take_released` lent, emptied, so that
    /// releasing never allocates.
    pub(in crate::transport::ib) fn restore_released(&mut self, lent: KVec<Arc<Message>>) {
        if lent.capacity() > self.released.capacity() && self.released.is_empty() {
            self.released = lent;
        }
    }
}

#[kunit_tests(rrds_send_settling)]
mod tests {
    use super::*;

    #[test]
    fn slots_wait_for_a_send_posted_after_their_completion() {
        let mut g = Generations::default();
        // Sends 0, 1 and 2 posted; each completes before anything more is.
        assert_eq!(g.complete(Completed::Send(0), 0, 1, 3, 0), 0);
        assert_eq!(g.complete(Completed::Send(1), 0, 2, 3, 0), 0);
        assert_eq!(g.complete(Completed::Send(2), 0, 3, 3, 0), 0);
        // Send 3, posted after all three completed, completes: they go.
        assert_eq!(g.complete(Completed::Send(3), 0, 4, 4, 0), 3);
        // It is held in turn, for send 4.
        assert_eq!(g.complete(Completed::Send(4), 3, 5, 5, 0), 4);
    }

    #[test]
    fn only_an_ack_posted_after_the_completion_releases() {
        let mut g = Generations::default();
        // Ack 0 is in flight when send 0 completes: its completion is too early.
        assert_eq!(g.complete(Completed::Send(0), 0, 1, 1, 1), 0);
        assert_eq!(g.complete(Completed::Ack(0), 0, 1, 1, 1), 0);
        // Ack 1, posted after, releases slot 0.
        assert_eq!(g.complete(Completed::Ack(1), 0, 1, 1, 2), 1);
        assert_eq!(g.complete(Completed::Ack(2), 1, 1, 1, 3), 1);
    }
}

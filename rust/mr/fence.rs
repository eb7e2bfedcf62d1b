// SPDX-License-Identifier: GPL-2.0

//! READ-response fences on iWARP devices (Documentation/design.rst, "An MR
//! freed under a peer's READ").
//!
//! siw checks an STag once, when a READ response starts, and then sends the
//! response from the MR's pages: a LOCAL_INV that completes meanwhile does
//! not stop it. Its transmit engine serves a QP's READ responses and its
//! send queue one work request at a time, so a marker posted on a data QP
//! after the key became invalid completes only once the response being sent
//! then is done. An MR whose key is invalid therefore waits for a round: one
//! marker (a LOCAL_INV of a key never registered) on every data QP of the
//! device. When every marker of the round has completed, successfully or
//! flushed, the MRs it covers are unmapped, unpinned and pooled.

use kernel::{
    prelude::*,
    sync::Arc,
    time::{
        delay::fsleep,
        Delta, //
    },
    workqueue::WorkItem,
};

use super::{
    release,
    DeviceMrs,
    Mr, //
};
use crate::{
    device::RdmaDevice,
    ffi::{
        ib_cq::{
            CompletionHandler,
            QpRef,
            WorkCompletion, //
        },
        ib_device::Transport,
        ib_mr::FastRegMr,
        ib_qp::QPS_RTS,
        workqueue,
    },
    stats::{
        self,
        Stat, //
    },
};

/// How long a round waits before it is posted again after a QP that may be
/// sending refused its marker.
const RETRY_MS: i64 = 10;

/// The fence state of one device, in its MR record.
#[derive(Default)]
pub(crate) struct TxFence {
    /// The device's data QPs (iWARP only).
    ///
    /// Invariant: every QP listed is live; a link removes its QP (after
    /// moving it to the error state) before draining and destroying it.
    qps: KVec<QpRef>,
    /// MRs whose key is invalid, and whether the current round covers them.
    /// Has room for every MR of the device (`reserve`), so adding one never
    /// allocates.
    waiting: KVec<(Arc<Mr>, bool)>,
    /// Markers of the current round not yet completed, plus one while the
    /// round is being posted.
    outstanding: u32,
    /// A QP that may be sending refused its marker: the round repeats.
    retry: bool,
    /// What the markers invalidate: an MR of the device's PD, never registered.
    key: Option<FastRegMr>,
}

/// Whether MRs of `device` wait for a fence before their pages go.
pub(super) fn needed(device: &RdmaDevice) -> bool {
    device.caps().transport == Transport::Iwarp
}

/// Whether MRs of `device` are deregistered before their pages go, and
/// replaced in the pool: software RoCE (rxe) checks the key per READ
/// response packet but copies after the check with only a reference on the
/// MR, which deregistration waits for. iWARP has the markers instead.
pub(super) fn deregisters(device: &RdmaDevice) -> bool {
    device.caps().software && !needed(device)
}

/// Makes room in the waiting list for one more MR of the device (before it
/// is added to `live`), so that `defer` never allocates.
pub(super) fn reserve(d: &mut DeviceMrs) -> Result {
    let wanted = (d.live.len() + 1).saturating_sub(d.fence.waiting.len());
    d.fence.waiting.reserve(wanted, GFP_KERNEL)?;
    Ok(())
}

/// The data QP `qp` of `device` is up: READ responses may come from it.
/// Called while the link is built, before any peer can reach it.
pub(crate) fn qp_added(device: &RdmaDevice, qp: QpRef) -> Result {
    if !needed(device) {
        return Ok(());
    }
    device.mrs().lock().fence.qps.push(qp, GFP_KERNEL)?;
    Ok(())
}

/// The data QP `qp` of `device` is in the error state and about to be
/// drained: it sends nothing more, and no marker may be posted on it after
/// this (its drain must see every completion before its CQ goes).
pub(crate) fn qp_removed(device: &RdmaDevice, qp: QpRef) {
    let mut d = device.mrs().lock();
    d.fence.qps.retain(|q| q.as_raw() != qp.as_raw());
}

/// Releases `mr`, whose key is invalid (or was never registered), once no
/// READ response can still be sending from its pages. Process context.
pub(super) fn release_after_fence(mr: Arc<Mr>) {
    if !needed(&mr.device) {
        release(mr);
        return;
    }
    // A key left valid by a failed LOCAL_INV is deregistered now: the round
    // must start after no new response can look the key up.
    mr.drop_key_unless_released();
    let device = mr.device.clone();
    {
        let mut d = device.mrs().lock();
        // `reserve` made room; should it not have, keeping the pages pinned is
        // the safe side.
        if d.fence.waiting.reserve(1, GFP_KERNEL).is_err() {
            pr_warn!("MR kept pinned: no memory to queue it for a fence\n");
            core::mem::forget(mr);
        } else if let Err(e) = d.fence.waiting.push_within_capacity((mr, false)) {
            core::mem::forget(e);
        }
    }
    let _ = workqueue::queue().enqueue(device);
}

/// The device's fence work: releases what a finished round covered, and
/// starts the next round while MRs wait. Process context.
fn run(device: Arc<RdmaDevice>) {
    loop {
        // Release what the finished round covered (one at a time: release
        // takes the lock).
        loop {
            let covered = {
                let mut d = device.mrs().lock();
                if d.fence.outstanding > 0 {
                    // The round's last marker queues the work again.
                    return;
                }
                if d.fence.retry {
                    break;
                }
                match d.fence.waiting.iter().position(|(_, covered)| *covered) {
                    Some(i) => d.fence.waiting.remove(i).ok(),
                    None => break,
                }
            };
            if let Some((mr, _)) = covered {
                release(mr);
            }
        }
        let retry = core::mem::take(&mut device.mrs().lock().fence.retry);
        if retry {
            fsleep(Delta::from_millis(RETRY_MS));
        }
        match post_round(&device) {
            Round::Idle | Round::Posted => return,
            Round::Finished => {}
        }
    }
}

/// What `post_round` did.
enum Round {
    /// Nothing waits.
    Idle,
    /// Markers are outstanding: the last one's completion queues the work.
    Posted,
    /// The round needs no marker (or must be repeated): release or retry now.
    Finished,
}

/// Starts a round covering every waiting MR.
fn post_round(device: &Arc<RdmaDevice>) -> Round {
    let mut d = device.mrs().lock();
    if d.fence.waiting.is_empty() {
        return Round::Idle;
    }
    for entry in d.fence.waiting.iter_mut() {
        entry.1 = true;
    }
    stats::inc(Stat::MrTxFences);
    if d.fence.qps.is_empty() {
        return Round::Finished;
    }
    if d.fence.key.is_none() {
        match device.with_pd(|pd| FastRegMr::alloc(pd, 1)) {
            Ok(key) => d.fence.key = Some(key),
            Err(_) => {
                // The device is going: its links drop their QPs from the list.
                d.fence.retry = true;
                return Round::Finished;
            }
        }
    }
    let d = &mut *d;
    let Some(rkey) = d.fence.key.as_ref().map(FastRegMr::rkey) else {
        return Round::Finished;
    };
    d.fence.outstanding = 1;
    for qp in d.fence.qps.iter() {
        let leaked = Arc::into_raw(device.clone());
        if qp.post_local_inv(device.fence_cqe(), rkey).is_ok() {
            d.fence.outstanding += 1;
            continue;
        }
        // SAFETY: Leaked just above for a marker that was not posted.
        drop(unsafe { Arc::from_raw(leaked) });
        // siw refuses posts only outside RTS, where it does not transmit.
        if qp.state().map_or(true, |s| s == QPS_RTS) {
            d.fence.retry = true;
        }
    }
    d.fence.outstanding -= 1;
    if d.fence.outstanding > 0 {
        Round::Posted
    } else {
        Round::Finished
    }
}

/// The device is going: the marker key goes before the PD.
pub(super) fn device_removed(d: &mut DeviceMrs) {
    d.fence.key = None;
}

impl CompletionHandler for RdmaDevice {
    /// A marker completed: successfully, or flushed (its QP stopped
    /// transmitting when it entered the error state).
    fn completed(&self, _tag: u32, _wc: &WorkCompletion<'_>) {
        // SAFETY: `post_round` leaked one reference per marker posted; `self`
        // is that Arc's value.
        let device = unsafe { Arc::from_raw(self) };
        let done = {
            let mut d = device.mrs().lock();
            d.fence.outstanding = d.fence.outstanding.saturating_sub(1);
            d.fence.outstanding == 0
        };
        if done {
            let _ = workqueue::queue().enqueue(device);
        }
    }
}

impl WorkItem for RdmaDevice {
    type Pointer = Arc<RdmaDevice>;

    fn run(this: Arc<RdmaDevice>) {
        run(this);
    }
}

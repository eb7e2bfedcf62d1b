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
//! flushed, or its QP has left the list in the error state (which sends
//! nothing more), the MRs it covers are unmapped, unpinned and pooled.
//!
//! A marker's completion is not waited for once its QP has left: siw may
//! never deliver it. Moving a QP to the error state defers flushing its send
//! queue to its transmit path, and `ib_drain_qp`'s own request completes at
//! once on a QP in that state (`siw_sq_flush_wr`), so the QP can be drained
//! and destroyed with the marker still queued, and the round would wait for
//! ever, with every MR freed after it pinned.

use kernel::{
    prelude::*,
    sync::{
        Arc,
        ArcBorrow, //
    },
    time::{
        delay::fsleep,
        Delta, //
    },
    workqueue::WorkItem,
};

use super::{
    release,
    DeviceMrs,
    Mr,
    MrDevice, //
};
use crate::{
    device::{
        DomainUse,
        DomainUser,
        RdmaDevice, //
    },
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

/// A data QP of the device, whether a marker of the current round is
/// outstanding on it, and the PD (its namespace's) it is in.
struct FencedQp {
    qp: QpRef,
    marker: bool,
    domain: DomainUse,
}

/// What the markers on the QPs of one PD invalidate: an MR of that PD (siw
/// fails a LOCAL_INV of another PD's key), never registered. Field order is
/// drop order: the MR before its PD.
struct MarkerKey {
    key: FastRegMr,
    domain: DomainUse,
}

/// The fence state of one device, in its MR record.
#[derive(Default)]
pub(crate) struct TxFence {
    /// The device's data QPs (iWARP only).
    ///
    /// Invariant: every QP listed is live; a link removes its QP (after
    /// moving it to the error state) before draining and destroying it.
    qps: KVec<FencedQp>,
    /// MRs whose key is invalid, and whether the current round covers them.
    /// Has room for every MR of the device (`reserve`), so adding one never
    /// allocates.
    waiting: KVec<(Arc<Mr>, bool)>,
    /// QPs still listed whose marker of the current round has not completed,
    /// plus one while the round is being posted.
    outstanding: u32,
    /// A QP that may be sending refused its marker: the round repeats.
    retry: bool,
    /// What the markers invalidate: one key per PD with listed QPs.
    keys: KVec<MarkerKey>,
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
/// Called while the link is built, before any peer can reach it. Returns
/// the device's MR state where its MRs wait for fences (iWARP): the link
/// holds it until its QP and CQs are gone, and hands it to [`qp_removed`].
pub(crate) fn qp_added(domain: &DomainUse, qp: QpRef) -> Result<Option<Arc<MrDevice>>> {
    if !needed(domain.device()) {
        return Ok(None);
    }
    let mrs = super::of(domain.device())?;
    let qp = FencedQp {
        qp,
        marker: false,
        domain: domain.share(DomainUser::FenceQp),
    };
    mrs.state.lock().fence.qps.push(qp, GFP_KERNEL)?;
    Ok(Some(mrs))
}

/// The data QP `qp` of `device` is in the error state and about to be
/// drained: it sends nothing more, so the round stops waiting for its
/// marker, and no marker is posted on it after this.
pub(crate) fn qp_removed(device: &Arc<MrDevice>, qp: QpRef) {
    let round_done = {
        let mut d = device.state.lock();
        let fence = &mut d.fence;
        let Some(i) = fence.qps.iter().position(|q| q.qp.key() == qp.key()) else {
            return;
        };
        let done = match fence.qps.remove(i) {
            Ok(FencedQp { marker: true, .. }) => {
                stats::inc(Stat::MrFenceMarkersAbandoned);
                fence.outstanding = fence.outstanding.saturating_sub(1);
                fence.outstanding == 0
            }
            _ => false,
        };
        drop_unused_keys(&mut d);
        done
    };
    if round_done {
        let _ = workqueue::queue().enqueue(device.clone());
    }
}

/// Releases `mr`, whose key is invalid (or was never registered), once no
/// READ response can still be sending from its pages. Process context.
pub(super) fn release_after_fence(mr: Arc<Mr>) {
    if !needed(&mr.device.device) {
        release(mr);
        return;
    }
    // A key left valid by a failed LOCAL_INV is deregistered now: the round
    // must start after no new response can look the key up.
    mr.drop_key_unless_released();
    let device = mr.device.clone();
    {
        let mut d = device.state.lock();
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
fn run(device: Arc<MrDevice>) {
    loop {
        // Release what the finished round covered (one at a time: release
        // takes the lock).
        loop {
            let covered = {
                let mut d = device.state.lock();
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
        let retry = core::mem::take(&mut device.state.lock().fence.retry);
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
fn post_round(device: &MrDevice) -> Round {
    let mut d = device.state.lock();
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
    drop_unused_keys(&mut d);
    if add_missing_keys(&mut d.fence).is_err() {
        // The device is going (its links drop their QPs from the list), or
        // no memory: the round is tried again.
        d.fence.retry = true;
        return Round::Finished;
    }
    let fence = &mut d.fence;
    fence.outstanding = 1;
    for q in fence.qps.iter_mut() {
        let Some(rkey) = fence
            .keys
            .iter()
            .find(|k| k.domain.same_as(&q.domain))
            .map(|k| k.key.rkey())
        else {
            continue;
        };
        // The record outlives the marker: the link that listed the QP holds it
        // until the QP and its CQs are gone.
        if q.qp.post_local_inv(&device.fence_cqe, rkey).is_ok() {
            q.marker = true;
            fence.outstanding += 1;
            continue;
        }
        // siw refuses posts only outside RTS, where it does not transmit.
        if q.qp.state().map_or(true, |s| s == QPS_RTS) {
            fence.retry = true;
        }
    }
    fence.outstanding -= 1;
    if fence.outstanding > 0 {
        Round::Posted
    } else {
        Round::Finished
    }
}

/// Gives every PD with listed QPs its marker key.
fn add_missing_keys(fence: &mut TxFence) -> Result {
    for q in fence.qps.iter() {
        if fence.keys.iter().any(|k| k.domain.same_as(&q.domain)) {
            continue;
        }
        let domain = q.domain.share(DomainUser::FenceKey);
        let key = domain.with_pd(|pd| FastRegMr::alloc(pd, 1))?;
        fence.keys.push(MarkerKey { key, domain }, GFP_KERNEL)?;
    }
    Ok(())
}

/// Drops the marker keys of PDs with no QP listed, so that a namespace's PD
/// can go with its last link. Only between rounds: no marker names them.
pub(super) fn drop_unused_keys(d: &mut DeviceMrs) {
    let fence = &mut d.fence;
    if fence.outstanding > 0 {
        return;
    }
    let qps = &fence.qps;
    fence
        .keys
        .retain(|k| qps.iter().any(|q| q.domain.same_as(&k.domain)));
}

/// The device is going: the marker keys go before the PDs.
pub(super) fn device_removed(d: &mut DeviceMrs) {
    d.fence.keys.clear();
}

// SAFETY: `device_added` builds `fence_cqe` in the record it initialises in an
// `Arc`; a link whose QP is on the fence list holds the record until its QP and
// CQs are gone (type invariant), so it outlives the markers posted there.
unsafe impl CompletionHandler for MrDevice {
    /// A marker completed: successfully, or flushed (its QP stopped
    /// transmitting when it entered the error state). One whose QP already
    /// left the list was counted then.
    fn completed(this: ArcBorrow<'_, Self>, _tag: u32, wc: &WorkCompletion<'_>) {
        let round_done = {
            let mut d = this.state.lock();
            let fence = &mut d.fence;
            let listed = fence
                .qps
                .iter_mut()
                .find(|q| q.marker && q.qp.key() == wc.qp())
                .map(|q| q.marker = false)
                .is_some();
            if listed {
                fence.outstanding = fence.outstanding.saturating_sub(1);
            } else {
                stats::inc(Stat::MrFenceMarkersLate);
            }
            listed && fence.outstanding == 0
        };
        if round_done {
            let _ = workqueue::queue().enqueue(Arc::<MrDevice>::from(this));
        }
    }
}

impl WorkItem for MrDevice {
    type Pointer = Arc<MrDevice>;

    fn run(this: Arc<MrDevice>) {
        run(this);
    }
}

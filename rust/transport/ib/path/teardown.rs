// SPDX-License-Identifier: GPL-2.0

//! How an IB path's links go: retired on failure, torn down once their
//! flushes are in (or their port is back), and for good when the
//! connection is forgotten or its device removed.

// The rest of `IbPath`: path.rs's types and imports.
use super::*;

/// A link on its way out, with the rings it fed.
pub(super) struct Retired {
    pub(super) link: Link,
    pub(super) rings: Option<Rings>,
}

/// Moves a retired link to error, waits for its flushes, and frees it.
/// Process context, no path lock held, never from the link's own handlers.
pub(super) fn tear_down(retired: Retired) {
    let Retired { link, rings } = retired;
    link.cm_id.disconnect();
    // SAFETY: The QP, if any, lives until `link` drops below.
    if let Some(qp) = unsafe { QpRef::from_raw(link.cm_id.qp()) } {
        if let Some(fence) = &link.fence {
            // Stopped sending READ responses before MR fences stop waiting for
            // it, and taken off their list before the drain (no marker after).
            let _ = qp.force_error();
            crate::mr::fence_qp_removed(fence, qp);
        }
        qp.drain();
    }
    drop(rings);
    drop(link);
}

impl IbPath {
    /// The connection left its table: tear everything down, for good.
    /// Process context. Returns whether links remain whose port is down:
    /// destroying their ids now would send a disconnect request the port
    /// cannot carry (see `tear_down_retiring`), so the caller keeps the path
    /// as an orphan until `tear_down_retired` or device removal takes them.
    pub(crate) fn kill(&self) -> bool {
        let current = {
            let mut c = self.ctl.lock();
            c.dead = true;
            c.state = State::Down;
            c.link.take().map(|link| Retired {
                link,
                rings: self.rings.lock().take(),
            })
        };
        if let Some(r) = current {
            // Room was reserved with the link (`Control::retiring`); bound first, so
            // that `ctl` is not held while an overflow is torn down.
            let overflow = self.ctl.lock().retiring.push_within_capacity(r).err();
            if let Some(full) = overflow {
                self.tear_down_now(full.0);
            }
        }
        let waiting = self.tear_down_retired(true);
        let conn = self.conn.lock().take();
        drop(conn);
        waiting
    }

    /// Tears down the retired links (with `wait_for_port`, those whose port
    /// is up only); returns whether any still wait. Process context, for a
    /// killed path (an orphan, see `kill`).
    pub(crate) fn tear_down_retired(&self, wait_for_port: bool) -> bool {
        let _teardowns = self.teardown.lock();
        let (_, deferred) = self.tear_down_retiring(wait_for_port);
        deferred > 0
    }

    /// The device `raw` is going away: tear the link down now if it uses it,
    /// and wait for teardowns in progress (the PD goes next). Messages that
    /// wait reconnect, over another device if the route allows.
    pub(crate) fn device_removed(self: &Arc<Self>, device: DeviceRef) {
        let overflow = {
            let mut c = self.ctl.lock();
            if c.link.as_ref().is_some_and(|l| l.on_device(device)) {
                self.retire_locked(&mut c, DownReason::DeviceRemoved)
            } else {
                None
            }
        };
        let teardowns = self.teardown.lock();
        if let Some(r) = overflow {
            tear_down(r);
        }
        // The device goes: nothing waits for its port.
        self.tear_down_retiring(false);
        drop(teardowns);
        {
            // A path with no link may connect next, possibly over the device
            // rdma_cm has not let go of yet.
            let mut c = self.ctl.lock();
            if c.state == State::Down {
                c.removed_at = Some(Instant::now());
            }
        }
        self.enqueue();
    }

    /// Tears down every retired link, keeping the list's room (see
    /// `Control::retiring`). The caller holds `teardown`, not `ctl`.
    ///
    /// With `defer_while_port_down`, a link whose port is down (on a device
    /// rrds still has) stays on the list (at its front) for a later pass: destroying a connected id sends
    /// a DREQ, and rxe moves the port's GSI QP to the error state for good
    /// when a send fails while its netdev is down, after which no connection
    /// can be made on that device. Returns whether anything was torn down,
    /// and how many links were deferred.
    pub(super) fn tear_down_retiring(&self, defer_while_port_down: bool) -> (bool, usize) {
        let mut any = false;
        let mut deferred = 0;
        loop {
            let next = {
                let mut c = self.ctl.lock();
                if c.retiring.len() > deferred {
                    c.retiring.pop()
                } else {
                    None
                }
            };
            let Some(r) = next else {
                return (any, deferred);
            };
            // A device being removed, or one rrds no longer has, will not bring
            // its port back, and its removal waits for the id.
            if defer_while_port_down
                && r.link.cm_id.port_down()
                && r.link.cm_id.device().is_some_and(crate::device::is_open)
            {
                let mut c = self.ctl.lock();
                // It was just taken out, so there is room, unless a link retired
                // meanwhile took it: then it goes now.
                match c.retiring.push_within_capacity(r) {
                    Ok(()) => {
                        let last = c.retiring.len() - 1;
                        c.retiring.swap(deferred, last);
                        deferred += 1;
                        continue;
                    }
                    Err(full) => {
                        drop(c);
                        any = true;
                        tear_down(full.0);
                        continue;
                    }
                }
            }
            any = true;
            tear_down(r);
        }
    }

    /// Takes the current link and rings out, onto the retiring list, and puts
    /// everything sent but unacknowledged back for retransmission. Returns the
    /// link if the list had no room, which its invariant rules out: the
    /// caller then tears it down once it has dropped `ctl`.
    pub(super) fn retire_locked(&self, c: &mut Control, reason: DownReason) -> Option<Retired> {
        stats::inc(Stat::ConnReset);
        self.retire_quietly(c, reason)
    }

    /// [`Self::retire_locked`] without counting a reset (an idle link). An
    /// up link's going is reported to the connection's monitors, as going
    /// for `reason`.
    pub(super) fn retire_quietly(&self, c: &mut Control, reason: DownReason) -> Option<Retired> {
        let link = c.link.take()?;
        let rings = self.rings.lock().take();
        let was_up = c.state == State::Up;
        c.state = State::Down;
        c.responder_waiting = None;
        if let Some(conn) = self.conn() {
            // A message `kick` posted after `xmit` gave it back is not in the
            // connection's sent count, but the peer may have it too.
            conn.reset_for_retransmit(rings.as_ref().and_then(Rings::handed_over));
            let waiting = conn.has_queued();
            c.connect_wanted |= waiting;
            if was_up {
                conn.link_changed(LinkChange::Down {
                    reason,
                    retransmit: waiting,
                });
            }
        }
        c.idle_ticks = 0;
        c.retiring
            .push_within_capacity(Retired { link, rings })
            .err()
            .map(|e| e.0)
    }

    /// The link of `id` failed (or the peer left): retire it and let the work
    /// item tear it down and reconnect if messages wait.
    pub(super) fn fail(self: &Arc<Self>, id: Option<&CmIdRef<Cm>>, reason: DownReason, why: &str) {
        let mut c = self.ctl.lock();
        let matches = match (&c.link, id) {
            (Some(link), Some(id)) => link.is(id),
            (Some(_), None) => true,
            (None, _) => false,
        };
        if !matches {
            c.step(Trail::FailIgnored);
            return;
        }
        c.step(Trail::Failed);
        pr_debug!("connection down: {}\n", why);
        let overflow = self.retire_locked(&mut c, reason);
        drop(c);
        if let Some(r) = overflow {
            self.tear_down_now(r);
        }
        self.enqueue();
    }

    /// Whether every link still waiting to be torn down is on a device whose
    /// removal has not begun.
    pub(crate) fn waits_on_open_devices(&self) -> bool {
        self.ctl
            .lock()
            .retiring
            .iter()
            .all(|r| r.link.cm_id.device().is_some_and(crate::device::is_open))
    }

    /// Tears `r` down here and now (no path lock held by the caller).
    pub(super) fn tear_down_now(&self, r: Retired) {
        let _teardowns = self.teardown.lock();
        tear_down(r);
    }

    /// Like `fail`, for an id known by address only.
    pub(super) fn fail_id(self: &Arc<Self>, id: CmIdKey, reason: DownReason, why: &str) {
        let matches = self
            .ctl
            .lock()
            .link
            .as_ref()
            .is_some_and(|l| l.cm_id.key() == id);
        if matches {
            self.fail(None, reason, why);
        }
    }

    /// The link whose QP is `qp` failed (a completion error).
    pub(super) fn fail_qp(self: &Arc<Self>, qp: QpKey) {
        let mine = self.rings.lock().as_ref().is_some_and(|r| r.qp.key() == qp);
        if mine {
            self.fail(None, DownReason::LinkError, "completion error");
        }
    }
}

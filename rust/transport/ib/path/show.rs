// SPDX-License-Identifier: GPL-2.0

//! What an IB path shows: its RDS_INFO record and its debugfs `ib_links`
//! line.

// The rest of `IbPath`: path.rs's types and imports.
use super::*;
use crate::transport::LinkState;

/// `task_connect` in debugfs `ib_links`: ticks waited, or `-`.
struct TaskConnectWait(Option<u32>);

impl core::fmt::Display for TaskConnectWait {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        match self.0 {
            Some(ticks) => write!(f, "{}", ticks),
            None => f.write_str("-"),
        }
    }
}

impl IbPath {
    /// What RDS_INFO_IB_CONNECTIONS reports of an up connection: `None`
    /// while it is not up (upstream then reports only the addresses).
    pub(crate) fn info(&self) -> Option<IbInfo> {
        let c = self.ctl.lock();
        if c.state != State::Up {
            return None;
        }
        let link = c.link.as_ref()?;
        let (src_gid, dst_gid) = link.cm_id.gids();
        let (mr_max, mr_pages) = link.device().map_or((0, 0), |d| crate::mr::pool_shape(d));
        Some(IbInfo {
            src_gid,
            dst_gid,
            sl: link.cm_id.service_level(),
            max_send_wr: SEND_SLOTS as u32 + 1,
            max_recv_wr: RECV_SLOTS as u32,
            max_send_sge: link
                .device()
                .map_or(0, |d| u32::try_from(d.caps().max_send_sge).unwrap_or(0)),
            mr_max,
            mr_pages,
        })
    }

    /// Where the link is, for RDS_INFO's connection flags.
    pub(crate) fn link_state(&self) -> LinkState {
        match self.ctl.lock().state {
            State::Down => LinkState::Down,
            State::Connecting => LinkState::Connecting,
            State::Up => LinkState::Up,
        }
    }

    /// debugfs `rrds/ib_links`: the control state and ring counters.
    pub(crate) fn show(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let c = self.ctl.lock();
        let state = match c.state {
            State::Down => "down",
            State::Connecting => "connecting",
            State::Up => "up",
        };
        write!(
            f,
            " state {} side {} ctx {} retiring {} backoff_ms {} cm_events {} last {} other {} trail {:#x} task_connect {} idle {} reaped {}",
            state,
            match &c.link {
                Some(l) if l.active => "active",
                Some(_) => "passive",
                None => "-",
            },
            // Whether the live link's events reach this path.
            match c.link.as_ref().map(|l| &l.cm_id) {
                Some(id) if id.context_is(self) => "ok",
                Some(id) if !id.has_context() => "null",
                Some(_) => "other",
                None => "-",
            },
            c.retiring.len(),
            c.backoff_ms,
            c.link_events,
            c.last_link_event,
            c.other_events,
            c.trail,
            // Seconds an iWARP connect has waited for its task to run it (-: none).
            TaskConnectWait(c.task_connect.map(|(_, _, waited)| waited)),
            // Seconds the up link has carried nothing, and links taken down idle.
            c.idle_ticks,
            c.idle_reaped,
        )?;
        // The name's mutex is not taken under the rings' spinlock.
        let device = c.link.as_ref().and_then(|l| l.device()).map(|d| d.name());
        match Option::as_ref(&*self.rings.lock()) {
            Some(rings) => {
                // The QP as `rdma resource show qp` names it (link and lqpn).
                if let Some(name) = device {
                    f.write_fmt(fmt!(" qp {}/{}", name, rings.qp.qp_num()))?;
                }
                rings.show(f)
            }
            None => Ok(()),
        }
    }
}

// SPDX-License-Identifier: GPL-2.0

//! rrds's limits: the protocol's fixed ones, and those an administrator sets
//! as module parameters, read at use (Documentation/admin-guide.rst, "Limits
//! and threat model").

use crate::module_parameters;

/// Largest message payload (upstream's `RDS_MAX_MSG_SIZE`).
pub(crate) const MAX_MSG_SIZE: usize = 1 << 20;

pub(crate) fn xrc_max_targets_per_user() -> u64 {
    u64::from(*module_parameters::xrc_max_targets_per_user.value())
}

pub(crate) fn xrc_max_targets_per_net() -> u64 {
    u64::from(*module_parameters::xrc_max_targets_per_net.value())
}

pub(crate) fn xrc_max_initiators_per_user() -> u64 {
    u64::from(*module_parameters::xrc_max_initiators_per_user.value())
}

pub(crate) fn max_conns_per_net() -> usize {
    *module_parameters::max_conns_per_net.value() as usize
}

pub(crate) fn max_conns_per_peer() -> usize {
    *module_parameters::max_conns_per_peer.value() as usize
}

/// The default of each namespace's `net.rrds.idle_timeout_secs`
/// (`crate::knobs`).
pub(crate) fn idle_timeout_secs_default() -> u32 {
    *module_parameters::idle_timeout_secs.value()
}

/// Receive buffers an IB link posts at set-up: module parameter
/// `ib_recv_ring_start`, within `min..=max`.
pub(crate) fn ib_recv_ring_start(min: usize, max: usize) -> usize {
    (*module_parameters::ib_recv_ring_start.value() as usize).clamp(min, max)
}

/// The exponent of IB links' RC ACK timeout (4.096 us x 2^N), at most 31;
/// `None` for rdma_cm's default.
pub(crate) fn ib_ack_timeout() -> Option<u8> {
    match *module_parameters::ib_ack_timeout.value() {
        0 => None,
        n => Some(n.min(31) as u8),
    }
}

// SPDX-License-Identifier: GPL-2.0

//! The socket's memory registration glue: `RDS_GET_MR`, the MRs a send
//! registers (`RDS_CMSG_RDMA_MAP`, iWARP READ sinks) and the bound device.

use kernel::{
    prelude::*,
    sync::Arc,
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

use super::RdsSock;
use crate::{
    addr::Endpoint,
    errno,
    ffi::{
        bindings,
        ib_device::Transport as DeviceTransport,
        net::{
            ne_u64,
            SockOptValue, //
        },
    },
    mr::{
        self,
        MrRequest, //
    },
    transport::ib,
};

/// `RDS_GET_MR` / `RDS_GET_MR_FOR_DEST` (upstream's `rds_get_mr*`: the
/// destination of the latter is not used).
pub(super) fn get_mr(state: &RdsSock, name: u32, value: &SockOptValue) -> Result {
    const GET_MR_LEN: usize = core::mem::size_of::<bindings::rds_get_mr_args>();
    const FOR_DEST_LEN: usize = core::mem::size_of::<bindings::rds_get_mr_for_dest_args>();
    let want = if name == bindings::RDS_GET_MR {
        GET_MR_LEN
    } else {
        FOR_DEST_LEN
    };
    if value.len() != want {
        return Err(EINVAL);
    }
    let raw = if name == bindings::RDS_GET_MR {
        // The same fields without the leading destination. A fault is
        // EFAULT for either layout, never a reason to try the other.
        let short = value.read::<GET_MR_LEN>()?;
        let mut raw = [0u8; FOR_DEST_LEN];
        raw[FOR_DEST_LEN - GET_MR_LEN..].copy_from_slice(&short);
        raw
    } else {
        value.read::<FOR_DEST_LEN>()?
    };
    let field = |i: usize| ne_u64(&raw, FOR_DEST_LEN - GET_MR_LEN + 8 * i);
    let req = MrRequest {
        addr: field(0),
        bytes: field(1),
        flags: field(3),
    };
    register_mr(state, &req, field(2)).map(|_| ())
}

/// The socket's MR table as `mr`'s registrations lock it: with `nonblock`,
/// a table another call holds is `EAGAIN` rather than a wait.
struct Table<'a> {
    sock: &'a RdsSock,
    nonblock: bool,
}

impl mr::MrTable for Table<'_> {
    fn locked<R>(&self, f: impl FnOnce(&mut mr::SocketMrs) -> R) -> Result<R> {
        if self.nonblock {
            self.sock.try_with_mrs(f).ok_or(EAGAIN)
        } else {
            Ok(self.sock.with_mrs(f))
        }
    }
}

/// Registers `req` on the device of the socket's bound address and returns
/// its cookie, written to `cookie_addr` first unless that is 0
/// (`RDS_GET_MR`, `RDS_CMSG_RDMA_MAP`).
pub(super) fn register_mr(state: &RdsSock, req: &MrRequest, cookie_addr: u64) -> Result<u64> {
    let ep = state.endpoint().ok_or_else(errno::enotconn)?;
    let (device, _) = bound_device(state)?;
    let table = Table {
        sock: state,
        nonblock: false,
    };
    let registrar = mr::Registrar {
        table: &table,
        net: state.net,
        device: &device,
        addr: &ep,
    };
    registrar.get_mr(req, |cookie| {
        if cookie_addr == 0 {
            return Ok(());
        }
        UserSlice::new(UserPtr::from_addr(cookie_addr as usize), 8)
            .writer()
            .write_slice(&cookie.to_ne_bytes())
    })
}

/// The device of the socket's bound address and the address, if RDMA
/// READs into local memory need their sinks registered there (iWARP: the
/// READ responses are placed like WRITEs, so only an STag with remote write
/// access may receive them); `None` where the PD's DMA lkey will do or there
/// is no RDMA device.
pub(super) fn read_sink_device(
    state: &RdsSock,
) -> Option<(Arc<crate::device::RdmaDevice>, Endpoint)> {
    let (device, _) = bound_device(state).ok()?;
    if device.caps().transport != DeviceTransport::Iwarp {
        return None;
    }
    Some((device, state.endpoint()?))
}

/// Registers `bytes` of local memory from `start` as a READ sink on `device`
/// (see `read_sink_device`). A device gone meanwhile is EAGAIN, as for
/// `RDS_CMSG_RDMA_MAP`; so is, for a `nonblock` send, an MR table another
/// call of the socket holds (while it connects the registration QP).
pub(super) fn register_read_sink(
    state: &RdsSock,
    (device, ep): &(Arc<crate::device::RdmaDevice>, Endpoint),
    start: u64,
    bytes: u64,
    nonblock: bool,
) -> Result<mr::Sink> {
    let table = Table {
        sock: state,
        nonblock,
    };
    let registrar = mr::Registrar {
        table: &table,
        net: state.net,
        device,
        addr: ep,
    };
    let registered = registrar.register_sink(start, bytes);
    match registered {
        Err(e) if e == ENODEV => Err(EAGAIN),
        other => other,
    }
}

/// The RDMA device (and port) of the socket's bound address: ENOTCONN when
/// unbound (as upstream's `RDS_GET_MR`), EOPNOTSUPP on a loopback socket.
pub(super) fn bound_device(state: &RdsSock) -> Result<(Arc<crate::device::RdmaDevice>, u32)> {
    let (ep, transport, cached) = {
        let s = state.state.lock();
        (s.bound, s.transport, s.rdma_device.clone())
    };
    let ep = ep.ok_or_else(errno::enotconn)?;
    if transport.is_none_or(|t| t.kind() != ib::TRANS_IB) {
        return Err(errno::eopnotsupp());
    }
    if let Some(cached) = cached.filter(|(device, _)| device.is_present()) {
        return Ok(cached);
    }
    let found = ib::device_of(state.net, &ep)?;
    state.state.lock().rdma_device = Some(found.clone());
    Ok(found)
}

// SPDX-License-Identifier: GPL-2.0

//! `struct rdma_cm_id`: rdma_cm connection identifiers (RC, `RDMA_PS_TCP`).
//!
//! rdma_cm calls one event handler per id, serialised per id and in process
//! context (it may sleep). An id must never be destroyed from its own
//! handler: rdma_cm destroys it when the handler returns non-zero, which the
//! trampoline below does only for a connect request rrds did not take.

use core::{
    marker::PhantomData,
    ptr::{
        self,
        NonNull, //
    },
};
use kernel::{
    error::{
        from_err_ptr,
        to_result, //
    },
    prelude::*,
    sync::{
        Arc,
        ArcBorrow, //
    },
    types::Opaque,
};

use super::{
    bindings,
    ib_cq::{
        CompletionHandler,
        CompletionQueue,
        Cqe,
        QpRef, //
    },
    ib_device::DeviceRef,
    ib_pd::ProtectionDomain,
    net::NetRef, //
};
use crate::addr::{
    Endpoint,
    Purpose, //
};

/// `IB_CM_REJ_CONSUMER_DEFINED` (ib_cm.h): the reason rdma_reject reports.
const REJECT_CONSUMER_DEFINED: u8 = 28;

/// A socket address for rdma_cm calls: large enough for `sockaddr_in6` and
/// aligned for every `sockaddr_*` (rdma_cm reads by the family's size).
#[repr(C, align(8))]
pub(crate) struct SockAddr([u8; 128]);

impl SockAddr {
    /// An address from its wire form (`sockaddr_in` or `sockaddr_in6` bytes).
    pub(crate) fn new(raw: &[u8]) -> Self {
        let mut out = Self([0; 128]);
        let n = raw.len().min(out.0.len());
        out.0[..n].copy_from_slice(&raw[..n]);
        out
    }

    fn as_ptr(&self) -> *mut bindings::sockaddr {
        self.0.as_ptr().cast_mut().cast()
    }
}

/// The rdma_cm events rrds distinguishes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum CmEventKind {
    AddrResolved,
    RouteResolved,
    ConnectRequest,
    Established,
    /// The peer refused (`REJECTED`), or address/route/connect failed.
    Failed,
    Disconnected,
    DeviceRemoval,
    AddrChange,
    TimewaitExit,
    Other(u32),
}

/// One rdma_cm event, borrowed for the duration of the handler.
pub(crate) struct CmEvent<'a> {
    raw: &'a bindings::rdma_cm_event,
}

impl CmEvent<'_> {
    pub(crate) fn kind(&self) -> CmEventKind {
        match self.raw.event {
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_RESOLVED => CmEventKind::AddrResolved,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_ROUTE_RESOLVED => CmEventKind::RouteResolved,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_CONNECT_REQUEST => {
                CmEventKind::ConnectRequest
            }
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_ESTABLISHED => CmEventKind::Established,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_ERROR
            | bindings::rdma_cm_event_type_RDMA_CM_EVENT_ROUTE_ERROR
            | bindings::rdma_cm_event_type_RDMA_CM_EVENT_CONNECT_ERROR
            | bindings::rdma_cm_event_type_RDMA_CM_EVENT_UNREACHABLE
            | bindings::rdma_cm_event_type_RDMA_CM_EVENT_REJECTED => CmEventKind::Failed,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_DISCONNECTED => CmEventKind::Disconnected,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_DEVICE_REMOVAL => CmEventKind::DeviceRemoval,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_ADDR_CHANGE => CmEventKind::AddrChange,
            bindings::rdma_cm_event_type_RDMA_CM_EVENT_TIMEWAIT_EXIT => CmEventKind::TimewaitExit,
            other => CmEventKind::Other(other),
        }
    }

    /// The raw event number, for log lines.
    pub(crate) fn number(&self) -> u32 {
        self.raw.event
    }

    pub(crate) fn status(&self) -> i32 {
        self.raw.status
    }

    /// Whether the peer refused the connection (`REJECTED`, one kind of
    /// [`CmEventKind::Failed`]): its private data says why.
    pub(crate) fn is_reject(&self) -> bool {
        self.raw.event == bindings::rdma_cm_event_type_RDMA_CM_EVENT_REJECTED
    }

    /// The `(responder_resources, initiator_depth)` a connect request
    /// offers: how many RDMA READs and atomics the requester accepts and
    /// issues at a time.
    pub(crate) fn rd_atomic(&self) -> (u8, u8) {
        // SAFETY: `conn` is the union member rdma_cm fills for RC connection events.
        let conn = unsafe { &self.raw.param.conn };
        (conn.responder_resources, conn.initiator_depth)
    }

    /// The connection private data of a connect request or response.
    pub(crate) fn private_data(&self) -> &[u8] {
        // SAFETY: `conn` is the union member rdma_cm fills for RC connection events;
        // for other events `private_data` is null or points to `private_data_len` bytes.
        let conn = unsafe { &self.raw.param.conn };
        if conn.private_data.is_null() {
            return &[];
        }
        // SAFETY: rdma_cm keeps the private data valid for the duration of the event.
        unsafe {
            core::slice::from_raw_parts(
                conn.private_data.cast::<u8>(),
                usize::from(conn.private_data_len),
            )
        }
    }
}

/// Connection parameters for [`CmIdRef::connect`] and [`CmIdRef::accept`].
#[derive(Default)]
pub(crate) struct ConnParam<'a> {
    pub(crate) private_data: &'a [u8],
    pub(crate) responder_resources: u8,
    pub(crate) initiator_depth: u8,
    pub(crate) retry_count: u8,
    pub(crate) rnr_retry_count: u8,
    pub(crate) flow_control: u8,
    /// Accepting onto a QP rrds made itself, not the id's: its number...
    pub(crate) qp_num: u32,
    /// ...and whether it receives from an SRQ.
    pub(crate) srq: bool,
}

impl ConnParam<'_> {
    fn to_raw(&self) -> bindings::rdma_conn_param {
        bindings::rdma_conn_param {
            private_data: self.private_data.as_ptr().cast(),
            private_data_len: self.private_data.len().min(255) as u8,
            responder_resources: self.responder_resources,
            initiator_depth: self.initiator_depth,
            flow_control: self.flow_control,
            retry_count: self.retry_count,
            rnr_retry_count: self.rnr_retry_count,
            qp_num: self.qp_num,
            srq: u8::from(self.srq),
            ..Default::default()
        }
    }
}

/// What rrds does with the rdma_cm events of one kind of id: the IB
/// transport's, the registration QPs'. An id's context, when it has one,
/// is the `Arc<Self::Context>` that owns it.
///
/// # Safety
///
/// Every `Self::Context` set on an id of this kind ([`CmId::create`],
/// [`CmIdRef::set_context`]) outlives the id.
pub(crate) unsafe trait CmHandler: Sized + 'static {
    /// What the ids' contexts are.
    type Context: Send + Sync + 'static;

    /// A peer asks to connect to a listener; `context` is the listener's,
    /// which the new `id` inherits. Keep `id` (store it and return `Ok`) or
    /// give it back (`Err(id)`), and rdma_cm destroys it. Never drop it here:
    /// that would destroy an id from its own handler.
    fn connect_request(
        context: Option<ArcBorrow<'_, Self::Context>>,
        id: CmId<Self>,
        event: &CmEvent<'_>,
    ) -> core::result::Result<(), CmId<Self>>;

    /// Any other event of `id`, whose context is `context`. Process
    /// context; must not destroy `id` (defer that to a work item).
    fn event(
        context: Option<ArcBorrow<'_, Self::Context>>,
        id: &CmIdRef<Self>,
        event: &CmEvent<'_>,
    );
}

/// An rdma_cm id of kind `H`, borrowed (inside its event handler, or from a
/// [`CmId`]).
///
/// rdma_cm writes the id's fields (state, route, QP) from its own threads
/// while rrds holds a reference, so they are read through `Opaque`, never
/// as a Rust reference to the C struct.
#[repr(transparent)]
pub(crate) struct CmIdRef<H: CmHandler>(Opaque<bindings::rdma_cm_id>, PhantomData<fn() -> H>);

/// An rdma_cm id of kind `H` that rrds owns: destroyed (with its QP, if
/// any) on drop.
///
/// # Invariants
///
/// `self.0` is a live id created by rdma_cm for rrds, whose events go to
/// `H` and whose context is null or an `H::Context` (`CmHandler`'s safety
/// requirement), and destroyed only by `drop`, which never runs inside the
/// id's own event handler.
pub(crate) struct CmId<H: CmHandler> {
    id: NonNull<bindings::rdma_cm_id>,
    _handler: PhantomData<fn() -> H>,
}

// SAFETY: rdma_cm ids may be used and destroyed from any process-context thread.
unsafe impl<H: CmHandler> Send for CmId<H> {}
// SAFETY: rdma_cm serialises operations on an id internally.
unsafe impl<H: CmHandler> Sync for CmId<H> {}

impl<H: CmHandler> CmId<H> {
    /// A new RC id in `net`, whose events go to `H` with `context`.
    pub(crate) fn create(net: NetRef, context: Option<&Arc<H::Context>>) -> Result<Self> {
        let context = context.map_or(ptr::null(), Arc::as_ptr);
        // SAFETY: `net` is a live namespace (the caller holds a socket of it); the
        // handler is a valid function for the whole module lifetime, and every id is
        // destroyed before the module unloads.
        let id = unsafe {
            bindings::rrds_rdma_create_id(
                net.as_ptr(),
                Some(event_trampoline::<H>),
                context.cast_mut().cast(),
                bindings::rdma_ucm_port_space_RDMA_PS_TCP,
                bindings::ib_qp_type_IB_QPT_RC,
            )
        };
        let id = from_err_ptr(id)?;
        // INVARIANT: just created, for `H`, with an `H::Context` or none.
        NonNull::new(id)
            .map(|id| Self {
                id,
                _handler: PhantomData,
            })
            .ok_or(ENOMEM)
    }
}

impl<H: CmHandler> CmId<H> {
    /// The QP created on the id. It lives as long as the id, which only
    /// `drop` destroys: the `QpRef` may be used while `self` is borrowed.
    fn own_qp(&self) -> Option<QpRef> {
        // SAFETY: A QP created on the live id, destroyed with it (see above);
        // the callers below use it only for the borrow of `self`.
        unsafe { QpRef::from_raw(self.qp()) }
    }

    /// Posts one signalled SEND of `sges` on the id's QP, completing to
    /// `cqe`; `ENOTCONN` if the id has no QP.
    pub(crate) fn post_send<T: CompletionHandler>(
        &self,
        cqe: &Cqe<T>,
        sges: &mut [bindings::ib_sge],
    ) -> Result {
        let qp = self
            .own_qp()
            .ok_or_else(|| Error::from_errno(-(bindings::ENOTCONN as i32)))?;
        qp.post_send(cqe, sges, false)
    }

    /// Moves the id's QP, if it has one, to error and waits until every
    /// request posted on it has completed (`QpRef::drain`).
    pub(crate) fn drain_qp(&self) {
        if let Some(qp) = self.own_qp() {
            qp.drain();
        }
    }
}

impl<H: CmHandler> core::ops::Deref for CmId<H> {
    type Target = CmIdRef<H>;

    fn deref(&self) -> &CmIdRef<H> {
        // SAFETY: The id is live (type invariant); `CmIdRef` is a transparent wrapper.
        unsafe { &*self.id.as_ptr().cast::<CmIdRef<H>>() }
    }
}

impl<H: CmHandler> Drop for CmId<H> {
    fn drop(&mut self) {
        let id = self.id.as_ptr();
        // SAFETY: The id is live and not in its own handler (type invariant). A QP
        // created on it goes first, as rdma_destroy_id requires; rdma_destroy_id waits
        // for a running handler of the id to return.
        unsafe {
            if !(*id).qp.is_null() {
                bindings::rdma_destroy_qp(id);
            }
            bindings::rdma_destroy_id(id);
        }
    }
}

/// The address of `storage` (an IPv4 or IPv6 sockaddr) in 16-byte form.
fn rds_addr(storage: &bindings::__kernel_sockaddr_storage) -> Option<[u8; 16]> {
    // SAFETY: A sockaddr_storage is plain bytes, `size_of` of them from its start.
    let raw = unsafe {
        core::slice::from_raw_parts(
            core::ptr::from_ref(storage).cast::<u8>(),
            core::mem::size_of_val(storage),
        )
    };
    Endpoint::parse(raw, Purpose::Bind).ok().map(|ep| ep.addr)
}

/// The queues of an RC QP an id creates: work requests and scatter
/// entries per request, each way.
#[derive(Clone, Copy)]
pub(crate) struct QpCaps {
    pub(crate) send_wr: u32,
    pub(crate) recv_wr: u32,
    pub(crate) send_sge: u32,
    pub(crate) recv_sge: u32,
}

/// An rdma_cm id's identity, to recognise the id later. The id may be gone
/// by then, so a key is compared, never followed (but see [`Self::id`]).
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CmIdKey(usize);

impl CmIdKey {
    /// The id this key was taken from.
    ///
    /// # Safety
    ///
    /// That id must be an id of kind `H`, live for `'a`.
    pub(crate) unsafe fn id<'a, H: CmHandler>(self) -> &'a CmIdRef<H> {
        // SAFETY: The key is the address of a `CmIdRef<H>` (`CmIdRef::key`), live for
        // `'a` (the caller's guarantee).
        unsafe { &*(self.0 as *const CmIdRef<H>) }
    }
}

impl<H: CmHandler> CmIdRef<H> {
    fn raw(&self) -> *mut bindings::rdma_cm_id {
        self.0.get()
    }

    /// The id's identity.
    pub(crate) fn key(&self) -> CmIdKey {
        CmIdKey(core::ptr::from_ref(self) as usize)
    }

    fn context_ptr(&self) -> *const H::Context {
        // SAFETY: `raw()` is a live id; only `create` and `set_context` write
        // `context`, under the rules `set_context`'s doc comment gives.
        unsafe { (*self.raw()).context.cast_const().cast() }
    }

    /// The context events carry, borrowed for as long as the id.
    fn context(&self) -> Option<ArcBorrow<'_, H::Context>> {
        let context = self.context_ptr();
        // SAFETY: A non-null context is an `H::Context` inside its `Arc` that
        // outlives the id (`CmHandler`'s safety requirement), so the borrow of `self`.
        (!context.is_null()).then(|| unsafe { ArcBorrow::from_raw(context) })
    }

    /// Whether events reach `context`.
    pub(crate) fn context_is(&self, context: &H::Context) -> bool {
        ptr::eq(self.context_ptr(), context)
    }

    /// Whether the id has a context.
    pub(crate) fn has_context(&self) -> bool {
        !self.context_ptr().is_null()
    }

    /// Sets the context later events carry. Only before the id can raise
    /// events the new context cannot handle: at creation, or inside the
    /// handler of a connect request (rdma_cm holds the new id's handler lock).
    pub(crate) fn set_context(&self, context: &Arc<H::Context>) {
        let context = Arc::as_ptr(context);
        // SAFETY: `raw()` is a live id and the field is behind `Opaque`; see the doc
        // comment for why no event reads `context` concurrently.
        unsafe { (*self.raw()).context = context.cast_mut().cast() };
    }

    /// The device the id is bound to, once its address is resolved.
    pub(crate) fn device(&self) -> Option<DeviceRef> {
        // SAFETY: `raw()` is a live id; rdma_cm sets `device` once, when it binds the id,
        // before the calls of rrds that read it (after address resolution or a request),
        // and a device stays registered while an id is bound to it.
        unsafe { DeviceRef::from_raw((*self.raw()).device) }
    }

    /// The port the id is bound to (0 when unbound).
    pub(crate) fn port(&self) -> u32 {
        // SAFETY: As for `device`, which `port_num` is set with.
        unsafe { (*self.raw()).port_num }
    }

    /// Whether the port the id is bound to is known to be down (not
    /// ACTIVE). `false` when unbound or when the port cannot be queried.
    /// May sleep.
    pub(crate) fn port_down(&self) -> bool {
        let Some(device) = self.device() else {
            return false;
        };
        let mut attr = bindings::ib_port_attr::default();
        // SAFETY: `device` is the registered device the live id is bound to (it
        // stays registered while the id exists); `attr` is valid for writes.
        let ret = unsafe { bindings::ib_query_port(device.as_ptr(), self.port(), &mut attr) };
        ret == 0 && attr.state != bindings::ib_port_state_IB_PORT_ACTIVE
    }

    /// The id's address block, which rdma_cm fills when it binds or
    /// resolves the id and does not change while rrds reads it.
    fn addr(&self) -> &bindings::rdma_addr {
        // SAFETY: `raw()` is a live id; rrds reads the address only once it is bound
        // (created for a request, or after resolution), when rdma_cm no longer writes it.
        unsafe { &(*self.raw()).route.addr }
    }

    /// The namespace the id lives in.
    pub(crate) fn net(&self) -> NetRef {
        NetRef::from_ptr(self.addr().dev_addr.net)
    }

    /// Whether the id's local address is IPv4 (a connect request on the
    /// IPv4 listener carries IPv4 private data).
    pub(crate) fn src_is_v4(&self) -> bool {
        // SAFETY: Every sockaddr starts with its 16-bit family; the storage is
        // part of the live id.
        let family = unsafe { *ptr::addr_of!(self.addr().src_addr).cast::<u16>() };
        u32::from(family) == bindings::AF_INET
    }

    /// The id's local and remote addresses as RDS keeps them (IPv4 mapped),
    /// `None` for a family other than IPv4 and IPv6.
    pub(crate) fn addrs(&self) -> Option<([u8; 16], [u8; 16])> {
        let addr = self.addr();
        Some((rds_addr(&addr.src_addr)?, rds_addr(&addr.dst_addr)?))
    }

    /// The local port of a bound id (the one rdma_cm chose for port 0).
    pub(crate) fn src_port(&self) -> u16 {
        // SAFETY: `sockaddr_in` and `sockaddr_in6` both keep the big-endian port at
        // bytes 2..4; the storage is part of the live id.
        let port = unsafe {
            ptr::addr_of!(self.addr().src_addr)
                .cast::<u8>()
                .add(2)
                .cast::<[u8; 2]>()
                .read()
        };
        u16::from_be_bytes(port)
    }

    /// The QP created on the id, or null.
    pub(crate) fn qp(&self) -> *mut bindings::ib_qp {
        // SAFETY: `raw()` is a live id; only rrds creates and destroys its QP.
        unsafe { (*self.raw()).qp }
    }

    pub(crate) fn bind(&self, addr: &SockAddr) -> Result {
        // SAFETY: A live id and a valid address buffer.
        to_result(unsafe { bindings::rdma_bind_addr(self.raw(), addr.as_ptr()) })
    }

    pub(crate) fn listen(&self, backlog: i32) -> Result {
        // SAFETY: A live, bound id.
        to_result(unsafe { bindings::rdma_listen(self.raw(), backlog) })
    }

    /// Binds a new id to `src`, then resolves `dst` from it.
    ///
    /// Bound here first, not by `rdma_resolve_addr`: there a device removal
    /// that changes the id's state between its internal bind and its check
    /// of the state WARNs (7.2 `resolve_prepare_src`; the fuzzer met it with
    /// a device deleted as a path connected). Bound first, the same removal
    /// makes `rdma_resolve_addr` fail with `EINVAL`, which the caller handles
    /// as any failed connect.
    pub(crate) fn resolve_addr(&self, src: &SockAddr, dst: &SockAddr, timeout_ms: u32) -> Result {
        self.bind(src)?;
        // SAFETY: A live id; both addresses are valid buffers rdma_cm copies.
        to_result(unsafe {
            bindings::rdma_resolve_addr(
                self.raw(),
                src.as_ptr(),
                dst.as_ptr(),
                timeout_ms as c_ulong,
            )
        })
    }

    /// The source and destination GIDs of a connected id (`rdma_read_gids`).
    pub(crate) fn gids(&self) -> ([u8; 16], [u8; 16]) {
        let mut sgid = bindings::ib_gid::default();
        let mut dgid = bindings::ib_gid::default();
        // SAFETY: A live id; both outputs are valid `ib_gid`s it writes.
        unsafe { bindings::rdma_read_gids(self.raw(), &mut sgid, &mut dgid) };
        // SAFETY: Every bit pattern of the union is a valid `raw` array.
        unsafe { (sgid.raw, dgid.raw) }
    }

    /// The service level of the id's path (0 before route resolution).
    pub(crate) fn service_level(&self) -> u8 {
        // SAFETY: `raw()` is a live id; `path_rec` is set by route resolution, before
        // rrds connects it.
        let path = unsafe { (*self.raw()).route.path_rec };
        if path.is_null() {
            return 0;
        }
        // SAFETY: A non-null `path_rec` of a live id is its resolved path record,
        // freed only with the id.
        unsafe { (*path).sl }
    }

    /// The type of service of the connection (`rdma_set_service_type`), before
    /// route resolution: RoCE maps it to the IP TOS, IB to a service level.
    pub(crate) fn set_service_type(&self, tos: u8) {
        // SAFETY: A live id.
        unsafe { bindings::rdma_set_service_type(self.raw(), i32::from(tos)) };
    }

    /// The RC QP's local ACK timeout (`rdma_set_ack_timeout`): 4.096 us
    /// times 2^`exponent` before a request unacknowledged is retransmitted.
    /// Before the QP is connected (active) or accepted (passive).
    pub(crate) fn set_ack_timeout(&self, exponent: u8) -> Result {
        // SAFETY: A live id.
        to_result(unsafe { bindings::rdma_set_ack_timeout(self.raw(), exponent) })
    }

    pub(crate) fn resolve_route(&self, timeout_ms: u32) -> Result {
        // SAFETY: A live id with a resolved address.
        to_result(unsafe { bindings::rdma_resolve_route(self.raw(), timeout_ms as c_ulong) })
    }

    /// Creates the id's RC QP on `pd`, completing to `send_cq` and
    /// `recv_cq`, every send signalled unless its request says otherwise.
    /// The QP is destroyed with the id, which the caller destroys before
    /// the CQs.
    pub(crate) fn create_qp(
        &self,
        pd: &ProtectionDomain,
        send_cq: &CompletionQueue,
        recv_cq: &CompletionQueue,
        caps: QpCaps,
    ) -> Result {
        let mut attr = bindings::ib_qp_init_attr {
            send_cq: send_cq.as_raw(),
            recv_cq: recv_cq.as_raw(),
            cap: bindings::ib_qp_cap {
                max_send_wr: caps.send_wr,
                max_recv_wr: caps.recv_wr,
                max_send_sge: caps.send_sge,
                max_recv_sge: caps.recv_sge,
                ..Default::default()
            },
            sq_sig_type: bindings::ib_sig_type_IB_SIGNAL_REQ_WR,
            qp_type: bindings::ib_qp_type_IB_QPT_RC,
            ..Default::default()
        };
        // SAFETY: A live id bound to `pd`'s device; `attr` is a valid attribute block
        // whose CQs live until the QP is destroyed (the caller destroys the id first).
        to_result(unsafe { bindings::rdma_create_qp(self.raw(), pd.as_raw(), &mut attr) })
    }

    /// Connects; only from the id's own event handler (`ROUTE_RESOLVED`),
    /// which holds the handler lock `rdma_connect` would take.
    pub(crate) fn connect(&self, param: &ConnParam<'_>) -> Result {
        let mut raw = param.to_raw();
        // SAFETY: A live id with a route and a QP, inside its handler; rdma_cm copies
        // the parameters.
        to_result(unsafe { bindings::rdma_connect_locked(self.raw(), &mut raw) })
    }

    /// Connects from outside the id's handler (after `ROUTE_RESOLVED`).
    pub(crate) fn connect_unlocked(&self, param: &ConnParam<'_>) -> Result {
        let mut raw = param.to_raw();
        // SAFETY: A live id with a route and a QP, not inside its handler (rdma_connect
        // takes the handler lock); rdma_cm copies the parameters.
        to_result(unsafe { bindings::rdma_connect(self.raw(), &mut raw) })
    }

    /// The attributes that move a QP of this connection to `state`, and
    /// their mask (`rdma_init_qp_attr`), for a QP the id does not own.
    pub(super) fn qp_attr(&self, state: u32) -> Result<(bindings::ib_qp_attr, c_int)> {
        let mut attr = bindings::ib_qp_attr {
            qp_state: state,
            ..Default::default()
        };
        let mut mask: c_int = 0;
        // SAFETY: A live id with a connect request (or a resolved route); both outputs
        // are valid for writes.
        to_result(unsafe { bindings::rdma_init_qp_attr(self.raw(), &mut attr, &mut mask) })?;
        Ok((attr, mask))
    }

    pub(crate) fn accept(&self, param: &ConnParam<'_>) -> Result {
        let mut raw = param.to_raw();
        // SAFETY: A live id from a connect request, with a QP; rdma_cm copies the
        // parameters.
        to_result(unsafe { bindings::rdma_accept(self.raw(), &mut raw) })
    }

    /// Refuses a connect request with `private_data` as the reason.
    pub(crate) fn reject(&self, private_data: &[u8]) {
        // SAFETY: A live id from a connect request; rdma_cm copies the data.
        let ret = unsafe {
            bindings::rdma_reject(
                self.raw(),
                private_data.as_ptr().cast(),
                private_data.len().min(255) as u8,
                REJECT_CONSUMER_DEFINED,
            )
        };
        if ret != 0 {
            pr_debug!("rdma_reject: {}\n", ret);
        }
    }

    /// Starts tearing the connection down; `DISCONNECTED` follows.
    pub(crate) fn disconnect(&self) {
        // SAFETY: A live id; disconnecting an unconnected id is harmless.
        let _ = unsafe { bindings::rdma_disconnect(self.raw()) };
    }
}

/// # Safety
///
/// Called by rdma_cm only, with a live id and event, in process context.
unsafe extern "C" fn event_trampoline<H: CmHandler>(
    id: *mut bindings::rdma_cm_id,
    event: *mut bindings::rdma_cm_event,
) -> c_int {
    let event = CmEvent {
        // SAFETY: rdma_cm passes a valid event for the duration of the call.
        raw: unsafe { &*event },
    };
    let Some(id) = NonNull::new(id) else {
        return 0;
    };
    // SAFETY: `id` is live for the duration of the handler; `CmIdRef` is transparent.
    let borrowed = unsafe { &*id.as_ptr().cast::<CmIdRef<H>>() };
    if event.kind() != CmEventKind::ConnectRequest {
        H::event(borrowed.context(), borrowed, &event);
        return 0;
    }
    let context = borrowed.context_ptr();
    // SAFETY: The new id inherits its listener's context, an `H::Context` that
    // outlives the listener (`CmHandler`'s safety requirement), and the listener
    // outlives this call (rdma_destroy_id waits for it).
    let context = (!context.is_null()).then(|| unsafe { ArcBorrow::from_raw(context) });
    // INVARIANT: a new id of kind `H`, owned by whoever keeps it; if given back,
    // rdma_cm destroys it when we return 1, and it is forgotten here.
    let owned = CmId {
        id,
        _handler: PhantomData,
    };
    match H::connect_request(context, owned, &event) {
        Ok(()) => 0,
        Err(back) => {
            core::mem::forget(back);
            1
        }
    }
}

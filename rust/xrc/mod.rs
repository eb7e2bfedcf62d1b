// SPDX-License-Identifier: GPL-2.0

//! The XRC target-QP manager (Documentation/design.rst, "XRC target QPs").
//!
//! A [`Target`] is a QP that belongs to no process. Processes hold
//! [`Registration`]s on it, one per process, each made through a socket; the
//! QP's async events are copied to every registration's preallocated queue
//! and read from its socket. The last registration to end retires the target:
//! its QP is moved to error, drained and destroyed on the module workqueue.
//!
//! Lock order: `TARGETS`, then a target's `resources`, then its `fanout`, then
//! a registration's `ring`. `fanout` and `ring` disable interrupts: the QP
//! event handler takes them in whatever context the driver raises events.

mod inband;
mod initiator;
mod registration;
mod target;

use inband::{
    Inband,
    Receiver,
    CM_MAGIC,
    CM_VERSION,
    REAP_WORK,
    RECV_CQ_ENTRIES, //
};
pub(crate) use initiator::{
    connect,
    Initiator,
    MAX_PER_SOCKET as MAX_INITIATORS_PER_SOCKET,
    SEND_MAX, //
};
use registration::watch_exit;
pub(crate) use registration::Registration;
pub(crate) use target::Target;

use kernel::{
    impl_has_work, new_condvar, new_mutex, new_work,
    page::{
        Page,
        PAGE_SIZE, //
    },
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
        ArcBorrow,
        Completion,
        CondVar,
        Mutex, //
    },
    time::msecs_to_jiffies,
    transmute::AsBytes,
    workqueue::{
        Work,
        WorkItem, //
    },
};

use crate::{
    addr::Endpoint,
    device::{
        DomainUse,
        DomainUser,
        RdmaDevice, //
    },
    errno,
    ffi::{
        bindings,
        ib_cq::{
            sge,
            CompletionHandler,
            CompletionQueue,
            Cqe,
            DmaDirection,
            DmaPage,
            WorkCompletion, //
        },
        ib_device::DeviceRef,
        ib_pd::ProtectionDomain,
        ib_qp::{
            OwnedQp,
            QpEventHandler,
            SharedReceiveQueue,
            TargetKind,
            XrcDomain,
            QPS_ERR,
            QPS_INIT,
            QPS_RESET,
            QPS_RTR, //
        },
        irq_lock::IrqSpinLock,
        net::NetRef,
        process::{
            self,
            ExitHandler,
            ExitWatch,
            ProcessRef, //
        },
        rdma_cm::{
            CmEvent,
            CmEventKind,
            CmHandler,
            CmId,
            CmIdKey,
            CmIdRef,
            ConnParam,
            QpCaps,
            SockAddr, //
        },
        workqueue,
    },
    new_irq_spinlock,
    wait::wait_until,
};

/// Where a registration's events are read: the socket the process
/// registered through (the socket layer's `RdsSock`).
pub(crate) trait EventSink: Send + Sync {
    /// The namespace the socket lives in.
    fn net(&self) -> NetRef;
    /// An event was queued on one of the socket's registrations. Any context.
    fn event_queued(&self);
    /// `n` events were read or dropped.
    fn events_taken(&self, n: usize);
    /// Takes a new registration made through the socket, before it is
    /// attached to its target.
    fn adopt(&self, registration: &Arc<Registration>) -> Result;
    /// Forgets a registration that ended without a final event (its process
    /// exited, or it unregistered); what it queued is dropped.
    fn forget(&self, registration: &Arc<Registration>);
}

/// Events a registration holds before it overflows.
const QUEUE_LEN: usize = bindings::RRDS_XRC_EVENT_QUEUE_LEN as usize;

const EV_LAST_WQE_REACHED: u32 = bindings::RRDS_XRC_EV_QP_LAST_WQE_REACHED;
const EV_SRQ_ERR: u32 = bindings::RRDS_XRC_EV_SRQ_ERR;
const EV_SRQ_LIMIT_REACHED: u32 = bindings::RRDS_XRC_EV_SRQ_LIMIT_REACHED;
const EV_TARGET_GONE: u32 = bindings::RRDS_XRC_EV_TARGET_GONE;
const FLAG_SYNTHESIZED: u32 = bindings::RRDS_XRC_EVENT_SYNTHESIZED;
const FLAG_FINAL: u32 = bindings::RRDS_XRC_EVENT_FINAL;
const FLAG_OVERFLOW: u32 = bindings::RRDS_XRC_EVENT_OVERFLOW;

// The uapi event numbers are ib_core's.
const _: () = {
    assert!(bindings::RRDS_XRC_EV_QP_FATAL == bindings::ib_event_type_IB_EVENT_QP_FATAL);
    assert!(bindings::RRDS_XRC_EV_QP_REQ_ERR == bindings::ib_event_type_IB_EVENT_QP_REQ_ERR);
    assert!(bindings::RRDS_XRC_EV_QP_ACCESS_ERR == bindings::ib_event_type_IB_EVENT_QP_ACCESS_ERR);
    assert!(bindings::RRDS_XRC_EV_COMM_EST == bindings::ib_event_type_IB_EVENT_COMM_EST);
    assert!(bindings::RRDS_XRC_EV_SQ_DRAINED == bindings::ib_event_type_IB_EVENT_SQ_DRAINED);
    assert!(bindings::RRDS_XRC_EV_PATH_MIG == bindings::ib_event_type_IB_EVENT_PATH_MIG);
    assert!(bindings::RRDS_XRC_EV_PATH_MIG_ERR == bindings::ib_event_type_IB_EVENT_PATH_MIG_ERR);
    assert!(EV_LAST_WQE_REACHED == bindings::ib_event_type_IB_EVENT_QP_LAST_WQE_REACHED);
    assert!(EV_SRQ_ERR == bindings::ib_event_type_IB_EVENT_SRQ_ERR);
    assert!(EV_SRQ_LIMIT_REACHED == bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED);
    assert!(core::mem::size_of::<bindings::rrds_xrc_event>() == 16);
    assert!(core::mem::size_of::<bindings::rrds_info_xrc_target>() == 112);
    assert!(core::mem::size_of::<bindings::rrds_xrc_connect_private>() == 12);
    assert!(core::mem::size_of::<bindings::rrds_xrc_reject_private>() == 8);
};

kernel::sync::global_lock! {
    // SAFETY: Initialised by `init()` in module init, before PF_RDS is registered.
    unsafe(uninit) static TARGETS: Mutex<KVec<Arc<Target>>> = KVec::new();
}

/// Initialises the target table. Call once, in module init.
pub(crate) fn init(m: &crate::ffi::global::ModuleInit) {
    m.init_lock(&TARGETS);
    inband::init(m);
    initiator::init(m);
}

/// Frees the tables' buffers. Call once, at unload, after the last target.
pub(crate) fn release_table() {
    crate::tables::free_table(&mut TARGETS.lock());
    inband::release_table();
    initiator::release_table();
}

/// How targets are implemented on a device.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    /// `IB_QPT_XRC_TGT` in an XRC domain.
    Xrc,
    /// An RC QP on an SRQ: for devices without XRC (rxe, siw).
    Emulated,
}

impl Backend {
    /// The backend of `device`, fixed when the device is added.
    fn of(device: &RdmaDevice) -> Self {
        if device.caps().xrc {
            Self::Xrc
        } else {
            Self::Emulated
        }
    }

    pub(crate) fn uapi(self) -> u32 {
        match self {
            Self::Xrc => bindings::RRDS_XRC_BACKEND_XRC,
            Self::Emulated => bindings::RRDS_XRC_BACKEND_EMULATED,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Xrc => "xrc",
            Self::Emulated => "emulated",
        }
    }
}

/// Whether `uid` may create another target in `net`: at most
/// `xrc_max_targets_per_user` live targets per user (all namespaces; the
/// device's QPs are the host's) and `xrc_max_targets_per_net` per
/// namespace. `EDQUOT` for the user's limit, `ENOSPC` for the namespace's.
fn check_limits(targets: &KVec<Arc<Target>>, net: NetRef, uid: u32) -> Result {
    let live = targets.iter().filter(|t| !t.fanout.lock().closed);
    let (mut of_user, mut of_net) = (0u64, 0u64);
    for t in live {
        of_user += u64::from(t.owner_uid == uid);
        of_net += u64::from(t.net == net);
    }
    if of_user >= crate::limits::xrc_max_targets_per_user() {
        return Err(errno::edquot());
    }
    if of_net >= crate::limits::xrc_max_targets_per_net() {
        return Err(errno::enospc());
    }
    Ok(())
}

/// The target with `qp_num` on `device` in `net`, unless retired.
fn find(net: NetRef, device: &RdmaDevice, qp_num: u32) -> Result<Arc<Target>> {
    TARGETS
        .lock()
        .iter()
        .find(|t| {
            t.net == net
                && core::ptr::eq(&*t.device, device)
                && t.qp_num() == qp_num
                && !t.fanout.lock().closed
        })
        .cloned()
        .ok_or(ENOENT)
}

/// Creates a target on `device` (port `port`), reachable in band through
/// `addr` (the socket's), and registers the calling process through `sink`.
/// Returns the registration.
pub(crate) fn create(
    sink: Arc<dyn EventSink>,
    device: Arc<RdmaDevice>,
    port: u32,
    addr: &Endpoint,
) -> Result<Arc<Registration>> {
    let backend = Backend::of(&device);
    let net = sink.net();
    let owner_uid = process::current_euid();
    // Refused before any device resource is spent; checked again, for
    // good, when the target joins the table.
    check_limits(&TARGETS.lock(), net, owner_uid)?;
    let domain = device.domain(net, DomainUser::XrcTarget)?;
    let target = Target::new(net, owner_uid, device.clone(), backend, port)?;
    // Given back when the target goes (or here, on the errors below).
    let listener = inband::listen(net, addr)?;
    target.inband.lock().listener = Some(listener);
    let registration = Registration::new(target.clone(), sink)?;
    // On the socket before any event can reach it (see `register`).
    registration.sink.adopt(&registration)?;
    let mut first = KVec::with_capacity(1, GFP_KERNEL)?;
    first.push(registration.clone(), GFP_KERNEL)?;
    // Under the PD lock: device removal (which closes the PDs first) either
    // finds the target in the table or keeps it from being created.
    let mut kept = Some(domain.share(DomainUser::XrcTarget));
    domain
        .with_pd(|pd| {
            target.create_qp(pd, &mut kept)?;
            target.publish(first, &registration)
        })
        .inspect_err(|_| {
            // Not in the table: destroy whatever was built, here.
            target.fanout.lock().closed = true;
            registration.exit_watch.disarm();
            target.destroy();
            registration.sink.forget(&registration);
        })?;
    Ok(registration)
}

/// Registers the calling process with the target `qp_num`.
pub(crate) fn register(
    sink: Arc<dyn EventSink>,
    device: &RdmaDevice,
    qp_num: u32,
) -> Result<Arc<Registration>> {
    let target = find(sink.net(), device, qp_num)?;
    // Another user's target is not ours to keep alive or to listen to.
    if target.owner_uid != process::current_euid() && !process::capable_net_admin() {
        return Err(EPERM);
    }
    let registration = Registration::new(target.clone(), sink)?;
    // On the socket before any event can reach it: what poll and recvmsg
    // count is always there to read.
    registration.sink.adopt(&registration)?;
    let attached = (|| {
        let mut fanout = target.fanout.lock();
        if fanout.closed {
            return Err(ENOENT);
        }
        if fanout
            .registrations
            .iter()
            .any(|r| r.process.same(&registration.process))
        {
            return Err(errno::ealready());
        }
        fanout
            .registrations
            .push(registration.clone(), GFP_ATOMIC)?;
        watch_exit(&registration);
        Ok(())
    })();
    if let Err(e) = attached {
        registration.sink.forget(&registration);
        return Err(e);
    }
    Ok(registration)
}

/// Ends the calling process's registration with the target `qp_num`, and
/// waits for the target's QP to be destroyed if it was the last.
pub(crate) fn unregister(
    net: NetRef,
    device: &RdmaDevice,
    qp_num: u32,
) -> Result<Arc<Registration>> {
    let target = find(net, device, qp_num)?;
    let me = ProcessRef::current()?;
    let registration = target
        .fanout
        .lock()
        .registrations
        .iter()
        .find(|r| r.process.same(&me))
        .cloned()
        .ok_or(ENOENT)?;
    if !registration.detach() {
        return Err(ENOENT);
    }
    if target.fanout.lock().closed {
        target.destroyed.wait_for_completion();
    }
    Ok(registration)
}

/// Test hook (`RRDS_XRC_INJECT`): drive the QP into error, or synthesize an event.
pub(crate) fn inject(net: NetRef, device: &RdmaDevice, args: &bindings::rrds_xrc_inject) -> Result {
    if args.reserved != 0 {
        return Err(EINVAL);
    }
    let target = find(net, device, args.qp_num)?;
    match args.action {
        bindings::RRDS_XRC_INJECT_QP_ERROR => {
            let resources = target.resources.lock();
            let qp = resources.as_ref().ok_or(ENOENT)?.qp();
            if target.raises_last_wqe() {
                // Only a transition raises the event: from error, start over.
                if qp.query_state()? == QPS_ERR {
                    qp.modify_state(QPS_RESET, 0)?;
                    qp.modify_state(QPS_INIT, target.port)?;
                }
                qp.modify_state(QPS_ERR, 0)?;
            } else {
                qp.modify_state(QPS_ERR, 0)?;
                drop(resources);
                // iWARP drivers raise nothing for a QP entering error: say what an SRQ
                // QP would, and that rrds said it.
                target.fan_out(EV_LAST_WQE_REACHED, FLAG_SYNTHESIZED);
            }
            Ok(())
        }
        bindings::RRDS_XRC_INJECT_EVENT => {
            let known = matches!(
                args.event,
                bindings::RRDS_XRC_EV_QP_FATAL
                    ..=bindings::RRDS_XRC_EV_PATH_MIG_ERR
                        | EV_SRQ_ERR
                        | EV_SRQ_LIMIT_REACHED
                        | EV_LAST_WQE_REACHED
            );
            if !known {
                return Err(EINVAL);
            }
            target.fan_out(args.event, FLAG_SYNTHESIZED);
            Ok(())
        }
        _ => Err(EINVAL),
    }
}

/// `device` is going away: its initiators are shut down, every registration
/// on its targets gets a final event, and the QPs are destroyed before this
/// returns.
pub(crate) fn device_removed(device: DeviceRef) {
    initiator::device_removed(device);
    // One at a time, each leaving the table as it goes: nothing to allocate.
    loop {
        let found = TARGETS.lock().iter().find(|t| t.device.is(device)).cloned();
        let Some(target) = found else {
            break;
        };
        let ended = {
            let mut fanout = target.fanout.lock();
            fanout.closed = true;
            core::mem::take(&mut fanout.registrations)
        };
        for registration in ended.iter() {
            registration.exit_watch.disarm();
            registration.push(
                target.qp_num(),
                EV_TARGET_GONE,
                FLAG_SYNTHESIZED | FLAG_FINAL,
            );
        }
        drop(ended);
        target.destroy();
        TARGETS.lock().retain(|t| !Arc::ptr_eq(t, &target));
    }
}

/// `RRDS_INFO_XRC_TARGETS` records of `net`'s live targets.
pub(crate) fn info(net: NetRef, out: &mut KVVec<u8>) -> Result {
    let targets = TARGETS.lock();
    for t in targets.iter().filter(|t| t.net == net) {
        let registrations = {
            let fanout = t.fanout.lock();
            if fanout.closed {
                continue;
            }
            fanout.registrations.len() as u32
        };
        let (qp_state, bytes_received) = match t.resources.lock().as_ref() {
            Some(r) => (r.qp().query_state().unwrap_or(QPS_ERR), r.bytes_received()),
            None => continue,
        };
        let (connections, accepted) = {
            let inband = t.inband.lock();
            (u32::from(inband.is_connected()), inband.accepted)
        };
        let mut record = bindings::rrds_info_xrc_target {
            qp_num: t.qp_num(),
            backend: t.backend.uapi(),
            qp_state,
            registrations,
            events: t.events.load(Relaxed),
            overflows: t.overflows.load(Relaxed),
            bytes_received,
            connections,
            accepted,
            ..Default::default()
        };
        let name = t.device.name();
        let name = name.as_bytes();
        let n = name.len().min(record.device.len() - 1);
        record.device[..n].copy_from_slice(&name[..n]);
        out.extend_from_slice(record.as_bytes(), GFP_KERNEL)?;
    }
    Ok(())
}

/// debugfs `rrds/xrc_targets`: one line per target.
pub(crate) fn show(f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
    f.write_fmt(fmt!(
        "qp_num device backend closed registrations events overflows\n"
    ))?;
    for t in TARGETS.lock().iter() {
        let (closed, registrations) = {
            let fanout = t.fanout.lock();
            (fanout.closed, fanout.registrations.len())
        };
        f.write_fmt(fmt!(
            "{} {} {} {} {} {} {}\n",
            t.qp_num(),
            t.device.name(),
            t.backend.name(),
            u8::from(closed),
            registrations,
            t.events.load(Relaxed),
            t.overflows.load(Relaxed),
        ))?;
    }
    Ok(())
}

/// How many targets exist, retired ones included (debugfs `rrds/objects`).
pub(crate) fn count() -> usize {
    TARGETS.lock().len()
}

/// How many kernel-side initiators exist (debugfs `rrds/objects`).
pub(crate) fn initiator_count() -> usize {
    initiator::count()
}

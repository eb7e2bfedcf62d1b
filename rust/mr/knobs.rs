// SPDX-License-Identifier: GPL-2.0

//! The selftests' debugfs knobs of memory registration: registration QPs
//! forced to fail, a connect that fails, a listener held open.

use kernel::{
    fmt,
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc,
    },
    uaccess::UserSliceReader,
};

use super::{
    MrDevice,
    MR_DEVICES, //
};
use crate::hooks::Hold;

/// The next registration-QP connect fails with `ETIMEDOUT`, as one whose
/// connection manager is gone would (debugfs `rrds/regqp_connect_fail`).
pub(super) static FAIL_NEXT_CONNECT: Atomic<bool> = Atomic::new(false);

/// The next registration QP holds its listener open before connecting to
/// it, until this is cleared or 10 s pass (debugfs
/// `rrds/regqp_listen_hold`), so that a test can connect to it first.
static LISTEN_HOLD: Hold = Hold::new(10_000);
/// A registration QP taken off its device's books waits before it is shut
/// down, until this is cleared or 30 s pass (debugfs
/// `rrds/regqp_shut_down_hold`), so that a test can remove the device meanwhile.
pub(crate) static SHUT_DOWN_HOLD: Hold = Hold::new(30_000);
/// The port of the listener being held, 0 when none is.
static HELD_PORT: Atomic<u32> = Atomic::new(0);

/// Every device's MR state now.
fn all() -> Result<KVec<Arc<MrDevice>>> {
    let devices = MR_DEVICES.lock();
    let mut out = KVec::with_capacity(devices.len(), GFP_KERNEL)?;
    for d in devices.iter() {
        out.push(d.clone(), GFP_KERNEL)?;
    }
    Ok(out)
}

/// debugfs `rrds/regqp_fail` (write): moves every registration QP to the
/// error state, as a device fault would.
pub(crate) fn store_regqp_fail(reader: &mut UserSliceReader) -> Result {
    // Only "1": there is nothing to switch off.
    if !crate::hooks::read_knob(reader)? {
        return Err(EINVAL);
    }
    for device in all()?.iter() {
        let qps = {
            let d = device.state.lock();
            let mut qps = KVec::with_capacity(d.qps.len(), GFP_KERNEL)?;
            for qp in d.qps.iter().filter_map(|s| s.qp.clone()) {
                qps.push(qp, GFP_KERNEL)?;
            }
            qps
        };
        for qp in qps.iter() {
            qp.force_error()?;
        }
    }
    Ok(())
}

/// debugfs `rrds/regqp_connect_fail` (write): `1` makes the next
/// registration-QP connect fail, `0` takes that back.
pub(crate) fn store_connect_fail(reader: &mut UserSliceReader) -> Result {
    FAIL_NEXT_CONNECT.store(crate::hooks::read_knob(reader)?, Relaxed);
    Ok(())
}

/// Holds a registration QP's listener on `port` open while
/// `rrds/regqp_listen_hold` asks for it (at most 10 s), then disarms the
/// knob. In the connecting user task.
pub(super) fn hold_listener(port: u16) {
    if !LISTEN_HOLD.is_armed() {
        return;
    }
    HELD_PORT.store(u32::from(port), Relaxed);
    LISTEN_HOLD.pause();
    HELD_PORT.store(0, Relaxed);
}

/// debugfs `rrds/regqp_listen_hold` (write): `1` holds the next
/// registration QP's listener open, `0` lets it go on.
pub(crate) fn store_listen_hold(reader: &mut UserSliceReader) -> Result {
    LISTEN_HOLD.store(reader)
}

/// debugfs `rrds/regqp_listen_hold` (read): the knob, and the port of the
/// listener held open (0 while none is).
pub(crate) fn show_listen_hold(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_fmt(fmt!(
        "{} {}\n",
        u8::from(LISTEN_HOLD.is_armed()),
        HELD_PORT.load(Relaxed)
    ))
}

/// debugfs `rrds/regqp_connect_fail` (read): whether the next connect fails.
pub(crate) fn show_connect_fail(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_fmt(fmt!("{}\n", u8::from(FAIL_NEXT_CONNECT.load(Relaxed))))
}

/// debugfs `rrds/regqp_fail` (read): registration QPs that can post, per
/// device and in all.
pub(crate) fn show_regqps(f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let Ok(devices) = all() else {
        return Ok(());
    };
    for device in devices.iter() {
        let d = device.state.lock();
        let up = d
            .qps
            .iter()
            .filter(|s| s.qp.as_ref().is_some_and(|q| q.is_up()))
            .count();
        f.write_fmt(fmt!("{} {}\n", device.device.name(), up))?;
    }
    Ok(())
}

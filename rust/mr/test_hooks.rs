// SPDX-License-Identifier: GPL-2.0

//! What memory registration's test hooks do (`crate::hooks`): registration
//! QPs forced to fail, and shown.

use kernel::{
    fmt,
    prelude::*,
    sync::Arc, //
};

use super::{
    MrDevice,
    MR_DEVICES, //
};

/// Every device's MR state now.
fn all() -> Result<KVec<Arc<MrDevice>>> {
    let devices = MR_DEVICES.lock();
    let mut out = KVec::with_capacity(devices.len(), GFP_KERNEL)?;
    for d in devices.iter() {
        out.push(d.clone(), GFP_KERNEL)?;
    }
    Ok(out)
}

/// Test hook `rrds/regqp_fail` (write): moves every registration QP to the
/// error state, as a device fault would.
pub(crate) fn fail_regqps() -> Result {
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

/// Test hook `rrds/regqp_fail` (read): registration QPs that can post, per
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

// SPDX-License-Identifier: GPL-2.0

//! The C objects rrds uses, each wrapped once.
//!
//! `bindings` is the raw, generated layer; everything outside `ffi/` goes
//! through the safe wrappers next to it.

pub(crate) mod bindings;
pub(crate) mod global;
pub(crate) mod ib_client;
pub(crate) mod ib_cq;
pub(crate) mod ib_device;
pub(crate) mod ib_mr;
pub(crate) mod ib_pd;
pub(crate) mod ib_qp;
pub(crate) mod irq_lock;
pub(crate) mod net;
pub(crate) mod page;
pub(crate) mod poll;
pub(crate) mod process;
pub(crate) mod random;
pub(crate) mod rdma_cm;
pub(crate) mod task_work;
pub(crate) mod time;
pub(crate) mod uapi;
pub(crate) mod workqueue;

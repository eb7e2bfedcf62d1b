// SPDX-License-Identifier: GPL-2.0

//! The per-device pools of free fast-reg MRs, by size class and protection
//! domain: taken by a registration, given back by a clean release, refilled
//! off the owner's path, emptied of a namespace's MRs when it goes.

// The rest of memory registration: mod.rs's types and imports.
use super::*;

/// A free MR of `domain` in the pool that fits `pages`, if there is one:
/// of the first class that large (`get` refused more pages than the device
/// maps, so the clamped class still holds them).
pub(super) fn take_pooled(d: &mut DeviceMrs, pages: usize, domain: &DomainUse) -> Option<Pooled> {
    let class = CLASSES.iter().position(|&c| c >= pages)?;
    let pool = &mut d.pool[class];
    let i = pool.iter().rposition(|p| p.domain.same_as(domain))?;
    pool.remove(i).ok()
}

/// The page count MRs of the class holding `pages` are allocated with.
pub(super) fn class_pages(device: &RdmaDevice, pages: usize) -> u32 {
    let class = CLASSES
        .iter()
        .copied()
        .find(|&c| c >= pages)
        .unwrap_or(MAX_PAGES);
    class.min(device.caps().max_fast_reg_page_list_len as usize) as u32
}

/// What RDS_INFO_IB_CONNECTIONS reports of `device`'s pool (upstream's
/// `rdma_mr_max` and `rdma_mr_size`, of its largest pool): how many free MRs
/// of the largest class it keeps, and how many pages each maps.
pub(crate) fn pool_shape(device: &RdmaDevice) -> (u32, u32) {
    (POOL_KEEP as u32, class_pages(device, MAX_PAGES))
}

/// Releases a finished MR: unmaps it, returns its fast-reg MR to the pool if
/// it was invalidated cleanly (deregisters it otherwise), unpins the pages
/// and tells the owner. Process context.
///
/// Where a READ response may still copy from the pages after the key is
/// invalid (rxe, `fence::deregisters`), the MR is deregistered first, and a
/// fresh one takes its place in the pool: before the owner is told if the
/// pool is empty, after it otherwise (off the path of the owner's FREE_MR).
pub(super) fn release(mr: Arc<Mr>) {
    let (state, hw, pages, teardown) = {
        let mut d = mr.device.state.lock();
        let (state, hw, pages) = {
            let mut inner = mr.inner.lock();
            inner.qp = None;
            (inner.state, inner.hw.take(), inner.pages.take())
        };
        if let Some(i) = d.live.iter().position(|m| m.serial == mr.serial) {
            let _ = d.live.remove(i);
        }
        // Off the books: the device's removal waits until it is deregistered.
        let teardown = hw.is_some().then(|| Teardown::begin(&mr.device, &mut d));
        (state, hw, pages, teardown)
    };
    // The pool class and size of a fresh MR to add once the owner has been told.
    let mut replace = None;
    if let Some(Hw {
        mr: fast,
        sg,
        domain,
    }) = hw
    {
        let pages = fast.as_ref().map(FastRegMr::max_pages);
        let class = pages.and_then(|p| CLASSES.iter().position(|&c| c as u32 >= p));
        // A key not invalidated cleanly may still be valid: it is
        // deregistered before its pages are unmapped, never after.
        let fast = if fence::deregisters(&mr.device.device) || state != State::Released {
            // Waits for copies the device has in progress from the pages.
            drop(fast);
            None
        } else {
            fast
        };
        drop(sg);
        if let (Some(c), Some(p), State::Released) = (class, pages, state) {
            match fast {
                Some(fast) => pool_put(&mut mr.device.state.lock(), c, Pooled { fast, domain }),
                // An empty pool is refilled before the owner hears back, so its
                // next GET_MR finds one; a fuller one after, off its path.
                None if mr.device.state.lock().pool[c].is_empty() => {
                    refill(&mr.device, c, p, domain)
                }
                None => replace = Some((c, p, domain)),
            }
        }
    }
    drop(teardown);
    if matches!(state, State::Stale | State::Failed) {
        stats::inc(Stat::MrStale);
    }
    drop(pages);
    {
        let mut pending = mr.owner.pending.lock();
        if matches!(state, State::Released | State::Stale) {
            *pending = pending.saturating_sub(1);
        }
        // Under the lock waiters check their condition with: no lost wake-up.
        mr.owner.changed.notify_all();
    }
    if let Some((c, p, domain)) = replace {
        refill(&mr.device, c, p, domain);
    }
}

/// Puts a fresh fast-reg MR of `pages` in `domain` into `device`'s pool
/// `class`, in place of one deregistered, unless the pool is full or the
/// device or the domain's namespace is going.
pub(super) fn refill(device: &MrDevice, class: usize, pages: u32, domain: DomainUse) {
    let mut d = device.state.lock();
    if !d.gone && d.pool[class].len() < POOL_KEEP && domain.is_current() {
        // Under the lock: `device_removed` cannot free the PD meanwhile.
        if let Ok(fast) = domain.with_pd(|pd| FastRegMr::alloc(pd, pages)) {
            pool_put(&mut d, class, Pooled { fast, domain });
        }
    }
}

/// Keeps `pooled` in pool `class` unless the pool is full or the device or
/// the namespace is going; otherwise it is deregistered here, under the
/// lock (it may sleep).
pub(super) fn pool_put(d: &mut DeviceMrs, class: usize, pooled: Pooled) {
    if !d.gone && d.pool[class].len() < POOL_KEEP && pooled.domain.is_current() {
        // Nothing to do if the pool cannot grow: the MR is deregistered.
        let _ = d.pool[class].push(pooled, GFP_KERNEL);
    }
}

/// A namespace is gone (after `device::net_exit`): the pools drop its free
/// MRs, and the fences its marker keys, so that its PDs can go.
pub(crate) fn net_exit() {
    for device in MR_DEVICES.lock().iter() {
        let mut d = device.state.lock();
        for class in d.pool.iter_mut() {
            class.retain(|p| p.domain.is_current());
        }
        fence::drop_unused_keys(&mut d);
    }
}

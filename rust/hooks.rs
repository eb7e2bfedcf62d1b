// SPDX-License-Identifier: GPL-2.0

//! Test hooks: the debugfs files with which the selftests hold a path or
//! make it fail (`rrds/loopback_hold`, `xmit_hold`, `regqp_fail`, ...).
//!
//! Every hook lives here. They are built in only with `RRDS_TEST_HOOKS=1`
//! (Kbuild's `--cfg rrds_test_hooks`, which the selftests need). Without it,
//! as for a production build, no hook file exists, every hook reads as
//! unarmed and the compiler drops the code behind it.

#[cfg(rrds_test_hooks)]
use kernel::{
    debugfs, fmt,
    prelude::*,
    sync::atomic::{
        Atomic,
        AtomicFlag,
        Relaxed, //
    },
    uaccess::UserSliceReader,
};

/// The loopback transport sends nothing while set: messages stay queued, as
/// on a slow or disconnected link (`loopback_hold`; clearing it sends them).
pub(crate) static LOOPBACK_HOLD: Knob = Knob::new();
/// The next transmit attempt the transport refuses waits until another
/// `xmit` call finds it (`xmit_hold`, one shot).
pub(crate) static XMIT_HOLD: Knob = Knob::new();
/// An emulated XRC target keeps the receive buffers that complete instead
/// of posting them again, as a target whose CPU lags behind its initiator
/// would; the next completion after clearing it posts them all
/// (`xrc_repost_hold`).
pub(crate) static XRC_REPOST_HOLD: Knob = Knob::new();
/// The next registration-QP connect fails with `ETIMEDOUT`, as one whose
/// connection manager is gone would (`regqp_connect_fail`, one shot).
pub(crate) static REGQP_CONNECT_FAIL: Knob = Knob::new();
/// The next registration QP holds its listener open before connecting to it,
/// so that a test can connect to it first (`regqp_listen_hold`, which also
/// shows the listener's port).
pub(crate) static REGQP_LISTEN_HOLD: Hold = Hold::new(10_000);
/// A registration QP taken off its device's books waits before it is shut
/// down, so that a test can remove the device meanwhile (`regqp_shut_down_hold`).
pub(crate) static REGQP_SHUT_DOWN_HOLD: Hold = Hold::new(30_000);
/// A device's removal waits after its connections' links are down and before
/// its PDs go, so that a test can close sockets in between (`device_remove_hold`).
pub(crate) static DEVICE_REMOVE_HOLD: Hold = Hold::new(30_000);
/// A transmitting thread waits after taking a message from its connection's
/// queue and before handing it to the transport, so that a test can reset
/// the link in between (`xmit_post_hold`).
pub(crate) static XMIT_POST_HOLD: Hold = Hold::new(60_000);
/// A forgotten connection's path waits, out of the connection table and not
/// yet torn down, so that a test can remove its device in between (`forget_hold`).
pub(crate) static FORGET_HOLD: Hold = Hold::new(30_000);

/// A knob a test sets (`1`) or clears (`0`), read as `0` or `1`.
pub(crate) struct Knob {
    #[cfg(rrds_test_hooks)]
    set: AtomicFlag,
}

impl Knob {
    const fn new() -> Self {
        Self {
            #[cfg(rrds_test_hooks)]
            set: AtomicFlag::new(false),
        }
    }

    /// Whether the knob is set.
    #[inline]
    pub(crate) fn is_set(&self) -> bool {
        #[cfg(rrds_test_hooks)]
        return self.set.load(Relaxed);
        #[cfg(not(rrds_test_hooks))]
        false
    }

    /// Whether the knob was set, clearing it: for one-shot knobs.
    #[inline]
    pub(crate) fn take(&self) -> bool {
        #[cfg(rrds_test_hooks)]
        return self.set.xchg(false, Relaxed);
        #[cfg(not(rrds_test_hooks))]
        false
    }

    #[cfg(rrds_test_hooks)]
    fn store(&self, reader: &mut UserSliceReader) -> Result<bool> {
        let set = read_knob(reader)?;
        self.set.store(set, Relaxed);
        Ok(set)
    }

    #[cfg(rrds_test_hooks)]
    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_fmt(fmt!("{}\n", u8::from(self.is_set())))
    }
}

/// A point where a test can make the code pause (`1` to arm, `0` to let it
/// go on): the next task to reach it waits there until the knob is cleared,
/// at most `max_ms`, and reads of the knob say whether one is waiting.
pub(crate) struct Hold {
    #[cfg(rrds_test_hooks)]
    armed: AtomicFlag,
    #[cfg(rrds_test_hooks)]
    holding: AtomicFlag,
    /// What the waiting task shows besides (the listener's port), 0 when none.
    #[cfg(rrds_test_hooks)]
    detail: Atomic<u32>,
    #[cfg(rrds_test_hooks)]
    max_ms: u32,
}

impl Hold {
    const fn new(max_ms: u32) -> Self {
        #[cfg(not(rrds_test_hooks))]
        let _ = max_ms;
        Self {
            #[cfg(rrds_test_hooks)]
            armed: AtomicFlag::new(false),
            #[cfg(rrds_test_hooks)]
            holding: AtomicFlag::new(false),
            #[cfg(rrds_test_hooks)]
            detail: Atomic::new(0),
            #[cfg(rrds_test_hooks)]
            max_ms,
        }
    }

    /// Waits here while the knob is set. Process context.
    #[inline]
    pub(crate) fn pause(&self) {
        self.pause_showing(0);
    }

    /// As [`Self::pause`], with reads of the knob showing `detail` meanwhile.
    #[inline]
    pub(crate) fn pause_showing(&self, detail: u32) {
        #[cfg(rrds_test_hooks)]
        if self.armed.load(Relaxed) {
            self.wait(detail);
        }
        #[cfg(not(rrds_test_hooks))]
        let _ = detail;
    }

    #[cfg(rrds_test_hooks)]
    fn wait(&self, detail: u32) {
        self.detail.store(detail, Relaxed);
        self.holding.store(true, Relaxed);
        let armed = || self.armed.load(Relaxed);
        crate::wait::poll_until(self.max_ms, || !armed());
        self.armed.store(false, Relaxed);
        self.holding.store(false, Relaxed);
        self.detail.store(0, Relaxed);
    }

    #[cfg(rrds_test_hooks)]
    fn store(&self, reader: &mut UserSliceReader) -> Result {
        self.armed.store(read_knob(reader)?, Relaxed);
        Ok(())
    }

    /// Whether the hold is armed, and whether a task waits in it.
    #[cfg(rrds_test_hooks)]
    fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_fmt(fmt!(
            "{} {}\n",
            u8::from(self.armed.load(Relaxed)),
            u8::from(self.holding.load(Relaxed))
        ))
    }

    /// Whether the hold is armed, and the waiting task's detail.
    #[cfg(rrds_test_hooks)]
    fn show_detail(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_fmt(fmt!(
            "{} {}\n",
            u8::from(self.armed.load(Relaxed)),
            self.detail.load(Relaxed)
        ))
    }
}

/// Reads a hook file's `0` or `1` (surrounding whitespace allowed);
/// anything else is EINVAL.
#[cfg(rrds_test_hooks)]
fn read_knob(reader: &mut UserSliceReader) -> Result<bool> {
    let mut buf = [0u8; 4];
    let n = reader.len().min(buf.len());
    reader.read_slice(&mut buf[..n])?;
    match buf[..n].trim_ascii() {
        b"1" => Ok(true),
        b"0" => Ok(false),
        _ => Err(EINVAL),
    }
}

/// What hook files do beyond setting a knob, in the layers that own the
/// state. The module root passes them in: this module imports no layer.
#[cfg(rrds_test_hooks)]
pub(crate) struct Actions {
    /// `loopback_hold` cleared: sends what the hold kept queued.
    pub(crate) release_loopback: fn(),
    /// `regqp_fail` written: moves every registration QP to the error state,
    /// as a device fault would.
    pub(crate) fail_regqps: fn() -> Result,
    /// `regqp_fail` read: registration QPs that can post, per device.
    pub(crate) show_regqps: fn(&mut fmt::Formatter<'_>) -> fmt::Result,
}

/// The hook files, in the module's debugfs directory (`rrds/`).
#[cfg(rrds_test_hooks)]
#[pin_data]
pub(crate) struct Files {
    #[pin]
    loopback_hold: debugfs::File<fn()>,
    #[pin]
    xmit_hold: debugfs::File<&'static Knob>,
    #[pin]
    regqp_fail: debugfs::File<Actions>,
    #[pin]
    regqp_connect_fail: debugfs::File<&'static Knob>,
    #[pin]
    regqp_listen_hold: debugfs::File<&'static Hold>,
    #[pin]
    regqp_shut_down_hold: debugfs::File<&'static Hold>,
    #[pin]
    device_remove_hold: debugfs::File<&'static Hold>,
    #[pin]
    forget_hold: debugfs::File<&'static Hold>,
    #[pin]
    xmit_post_hold: debugfs::File<&'static Hold>,
    #[pin]
    xrc_repost_hold: debugfs::File<&'static Knob>,
}

#[cfg(rrds_test_hooks)]
impl Files {
    pub(crate) fn new(dir: &debugfs::Dir, actions: Actions) -> impl PinInit<Self, Error> + '_ {
        let knob_show = &|k: &&'static Knob, f: &mut fmt::Formatter<'_>| k.show(f);
        let knob_store = &|k: &&'static Knob, r: &mut UserSliceReader| k.store(r).map(|_| ());
        let hold_show = &|h: &&'static Hold, f: &mut fmt::Formatter<'_>| h.show(f);
        let hold_store = &|h: &&'static Hold, r: &mut UserSliceReader| h.store(r);
        let release_loopback = actions.release_loopback;
        try_pin_init!(Self {
            loopback_hold <- dir.read_write_callback_file(
                c"loopback_hold",
                release_loopback,
                &|_: &fn(), f| LOOPBACK_HOLD.show(f),
                &|release: &fn(), r| {
                    if !LOOPBACK_HOLD.store(r)? {
                        release();
                    }
                    Ok(())
                },
            ),
            xmit_hold <- dir.read_write_callback_file(c"xmit_hold", &XMIT_HOLD, knob_show, knob_store),
            regqp_fail <- dir.read_write_callback_file(
                c"regqp_fail",
                actions,
                &|a: &Actions, f| (a.show_regqps)(f),
                &|a: &Actions, r| {
                    // Only "1": there is nothing to switch off.
                    if !read_knob(r)? {
                        return Err(EINVAL);
                    }
                    (a.fail_regqps)()
                },
            ),
            regqp_connect_fail <- dir.read_write_callback_file(
                c"regqp_connect_fail",
                &REGQP_CONNECT_FAIL,
                knob_show,
                knob_store,
            ),
            regqp_listen_hold <- dir.read_write_callback_file(
                c"regqp_listen_hold",
                &REGQP_LISTEN_HOLD,
                &|h: &&'static Hold, f| h.show_detail(f),
                hold_store,
            ),
            regqp_shut_down_hold <- dir.read_write_callback_file(
                c"regqp_shut_down_hold",
                &REGQP_SHUT_DOWN_HOLD,
                hold_show,
                hold_store,
            ),
            device_remove_hold <- dir.read_write_callback_file(
                c"device_remove_hold",
                &DEVICE_REMOVE_HOLD,
                hold_show,
                hold_store,
            ),
            forget_hold <- dir.read_write_callback_file(
                c"forget_hold",
                &FORGET_HOLD,
                hold_show,
                hold_store,
            ),
            xmit_post_hold <- dir.read_write_callback_file(
                c"xmit_post_hold",
                &XMIT_POST_HOLD,
                hold_show,
                hold_store,
            ),
            xrc_repost_hold <- dir.read_write_callback_file(
                c"xrc_repost_hold",
                &XRC_REPOST_HOLD,
                knob_show,
                knob_store,
            ),
        }? Error)
    }
}

/// No hook files in a build without test hooks.
#[cfg(not(rrds_test_hooks))]
pub(crate) struct Files;

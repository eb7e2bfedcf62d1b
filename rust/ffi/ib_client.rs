// SPDX-License-Identifier: GPL-2.0

//! `struct ib_client`: how rrds learns of RDMA devices coming and going.

use core::marker::PhantomData;
use kernel::{
    error::to_result,
    prelude::*,
    types::Opaque, //
};

use super::{
    bindings,
    ib_device::IbDevice, //
};

/// What a client does as ib_core adds, removes and renames RDMA devices.
///
/// ib_core calls these in process context, one device at a time, with the
/// device's registration lock held: they may sleep, and must not call back
/// into ib_core's client registration.
pub(crate) trait IbClientOps: 'static {
    /// A device appeared, or the client was just registered and the device was
    /// already there. An error makes ib_core skip the device for this client.
    fn add(device: &IbDevice) -> Result;

    /// The device is going away, or the client is being unregistered. When this
    /// returns, the client must not touch the device any more.
    fn remove(device: &IbDevice);

    /// The device was renamed.
    fn rename(device: &IbDevice);
}

/// An `ib_client` registered with ib_core for the operations `T`.
///
/// # Invariants
///
/// `client` is registered with ib_core from the end of [`Self::register`] until
/// `drop`, which unregisters it.
#[pin_data(PinnedDrop)]
pub(crate) struct IbClientRegistration<T: IbClientOps> {
    #[pin]
    client: Opaque<bindings::ib_client>,
    _ops: PhantomData<T>,
}

// SAFETY: ib_core serialises its use of the client internally; rrds never touches
// `client` after registering it.
unsafe impl<T: IbClientOps> Sync for IbClientRegistration<T> {}
// SAFETY: See `Sync`; the registration is not tied to the registering thread.
unsafe impl<T: IbClientOps> Send for IbClientRegistration<T> {}

impl<T: IbClientOps> IbClientRegistration<T> {
    /// Registers a client named `name`; `T::add` runs for every present device
    /// before this returns.
    pub(crate) fn register(name: &'static CStr) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            client <- Opaque::try_ffi_init(move |slot: *mut bindings::ib_client| {
                // SAFETY: `slot` is valid for writes and pinned; every field ib_core does
                // not initialise itself gets a value here.
                unsafe {
                    slot.write(bindings::ib_client {
                        name: name.as_char_ptr(),
                        add: Some(add_callback::<T>),
                        remove: Some(remove_callback::<T>),
                        rename: Some(rename_callback::<T>),
                        ..pin_init::zeroed()
                    })
                };
                // SAFETY: `slot` is a fully initialised client at a pinned address that
                // stays valid until `drop` unregisters it.
                to_result(unsafe { bindings::ib_register_client(slot) })
            }),
            _ops: PhantomData,
        })
    }
}

#[pinned_drop]
impl<T: IbClientOps> PinnedDrop for IbClientRegistration<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariant the client is registered. ib_core calls
        // `remove` for every device and waits for all callbacks before returning.
        unsafe { bindings::ib_unregister_client(self.client.get()) };
    }
}

/// # Safety
///
/// Called by ib_core only, with a registered device.
unsafe extern "C" fn add_callback<T: IbClientOps>(device: *mut bindings::ib_device) -> c_int {
    // SAFETY: ib_core keeps `device` registered at least until `remove_callback` returns.
    let device = unsafe { IbDevice::from_raw(device) };
    match T::add(device) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Called by ib_core only, with a device that was passed to `add_callback`.
unsafe extern "C" fn remove_callback<T: IbClientOps>(
    device: *mut bindings::ib_device,
    _client_data: *mut c_void,
) {
    // SAFETY: The device stays registered until this callback returns.
    T::remove(unsafe { IbDevice::from_raw(device) });
}

/// # Safety
///
/// Called by ib_core only, with a registered device.
unsafe extern "C" fn rename_callback<T: IbClientOps>(
    device: *mut bindings::ib_device,
    _client_data: *mut c_void,
) {
    // SAFETY: ib_core holds the device registered during the callback.
    T::rename(unsafe { IbDevice::from_raw(device) });
}

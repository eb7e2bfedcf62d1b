// SPDX-License-Identifier: GPL-2.0

//! The uapi records rrds copies to user space byte for byte: each is
//! [`AsBytes`] once it is shown to have no padding.

use kernel::transmute::AsBytes;

use super::bindings;

/// The size of the field `field` reads (the closure is never called).
// Used only in `const _` items, which rustc 1.85 (Debian's kernel) does not
// count as uses.
#[allow(dead_code)]
const fn field_size<S, F>(_field: fn(&S) -> &F) -> usize {
    core::mem::size_of::<F>()
}

/// Asserts at compile time that the struct `$ty` has no padding: it lists
/// every field once (a pattern without `..` must), and the struct's size is
/// the sum of theirs.
macro_rules! assert_no_padding {
    ($ty:path { $($field:ident),+ $(,)? }) => {
        const _: () = {
            fn _every_field_once(value: &$ty) {
                let $ty { $($field: _),+ } = value;
            }
            assert!(core::mem::size_of::<$ty>() == 0 $(+ field_size(|s: &$ty| &s.$field))+);
        };
    };
}

assert_no_padding!(bindings::rrds_xrc_event {
    qp_num,
    event,
    flags,
    lost,
});

// SAFETY: Four `u32`s with no padding (asserted above): every byte of a value is
// initialised, and plain integers have no interior mutability.
unsafe impl AsBytes for bindings::rrds_xrc_event {}

assert_no_padding!(bindings::rrds_info_xrc_target {
    qp_num,
    backend,
    qp_state,
    registrations,
    events,
    overflows,
    device,
});

// SAFETY: Integers and a byte array with no padding (asserted above): every byte of
// a value is initialised, and none of it has interior mutability.
unsafe impl AsBytes for bindings::rrds_info_xrc_target {}

assert_no_padding!(bindings::rrds_conn_event {
    laddr,
    faddr,
    event,
    reason,
    flags,
    lost,
    tos,
    pad,
});

// SAFETY: Byte arrays and integers with no padding (asserted above): every byte of
// a value is initialised, and none of it has interior mutability.
unsafe impl AsBytes for bindings::rrds_conn_event {}

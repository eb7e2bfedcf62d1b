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
    bytes_received,
    connections,
    accepted,
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

/// Asserts at compile time that the struct `$ty` is packed: alignment 1, so
/// no padding anywhere in it.
macro_rules! assert_packed {
    ($($ty:path),+ $(,)?) => {
        $(const _: () = assert!(core::mem::align_of::<$ty>() == 1);)+
    };
}

assert_packed!(
    bindings::rds_info_counter,
    bindings::rds_info_connection,
    bindings::rds6_info_connection,
    bindings::rds_info_message,
    bindings::rds6_info_message,
    bindings::rds_info_socket,
    bindings::rds6_info_socket,
);

const _: () = assert!(core::mem::size_of::<bindings::in6_addr>() == 16);

// SAFETY: A union whose every variant is 16 bytes of integers (size asserted
// above): whichever was written, every byte is initialised; no interior
// mutability.
unsafe impl AsBytes for bindings::in6_addr {}

// SAFETY: For each: packed (asserted above), so no padding; its fields are
// integers, byte arrays and `in6_addr`s, all `AsBytes`; no interior mutability.
unsafe impl AsBytes for bindings::rds_info_counter {}
// SAFETY: As above.
unsafe impl AsBytes for bindings::rds_info_connection {}
// SAFETY: As above.
unsafe impl AsBytes for bindings::rds6_info_connection {}
// SAFETY: As above.
unsafe impl AsBytes for bindings::rds_info_message {}
// SAFETY: As above.
unsafe impl AsBytes for bindings::rds6_info_message {}
// SAFETY: As above.
unsafe impl AsBytes for bindings::rds_info_socket {}
// SAFETY: As above.
unsafe impl AsBytes for bindings::rds6_info_socket {}

// SPDX-License-Identifier: GPL-2.0

//! Error codes rrds returns that `kernel::error::code` does not define.
//!
//! `kernel::error::Error` can only be built from an errno at run time outside
//! the kernel crate, so these are functions; the rest of rrds uses them like
//! the constants of `kernel::error::code`.

use kernel::error::Error;

use crate::ffi::bindings;

macro_rules! errno_fns {
    ($($fn_name:ident => $errno:ident),* $(,)?) => {
        $(
            #[doc = concat!("`-", stringify!($errno), "`.")]
            #[inline]
            pub(crate) fn $fn_name() -> Error {
                Error::from_errno(-(bindings::$errno as i32))
            }
        )*
    };
}

errno_fns! {
    eaddrinuse => EADDRINUSE,
    ealready => EALREADY,
    econnrefused => ECONNREFUSED,
    econnreset => ECONNRESET,
    eaddrnotavail => EADDRNOTAVAIL,
    eafnosupport => EAFNOSUPPORT,
    edestaddrreq => EDESTADDRREQ,
    edquot => EDQUOT,
    ehostunreach => EHOSTUNREACH,
    eisconn => EISCONN,
    enetdown => ENETDOWN,
    enobufs => ENOBUFS,
    enoprotoopt => ENOPROTOOPT,
    enospc => ENOSPC,
    enotconn => ENOTCONN,
    eopnotsupp => EOPNOTSUPP,
    eproto => EPROTO,
    eprototype => EPROTOTYPE,
    esocktnosupport => ESOCKTNOSUPPORT,
}

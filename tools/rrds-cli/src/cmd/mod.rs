// SPDX-License-Identifier: GPL-2.0-only
//! The `rrds` subcommands and what they share.

pub mod bench;
pub mod info;
pub mod interrupt;
pub mod json;
pub mod mr;
pub mod ping;
pub mod plot;
pub mod stats;
pub mod watch;
pub mod xrc;

use std::fmt::Display;
use std::io;
use std::time::Duration;

use rrds::RdsSocket;

/// An error with what was being done: prints as `what: error`, and
/// keeps the error (its errno) as its source.
#[derive(Debug)]
struct Context {
    what: String,
    source: io::Error,
}

impl Display for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.source)
    }
}

impl std::error::Error for Context {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Prefixes `err` with what was being done, keeping its kind and, for
/// [`errno`], its errno.
pub fn context(err: io::Error, what: impl Display) -> io::Error {
    io::Error::new(
        err.kind(),
        Context {
            what: what.to_string(),
            source: err,
        },
    )
}

/// The errno of `err`, under any number of [`context`]s.
pub fn errno(err: &io::Error) -> Option<i32> {
    err.raw_os_error().or_else(|| {
        let inner = err.get_ref()?.downcast_ref::<Context>()?;
        errno(&inner.source)
    })
}

/// Parses a number of seconds, fractions allowed, up to a day: above 0,
/// or from 0 with `zero_ok` (a clap value parser's core).
pub fn parse_seconds(text: &str, zero_ok: bool) -> Result<Duration, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    let low_ok = if zero_ok { secs >= 0.0 } else { secs > 0.0 };
    if !(low_ok && secs <= 86400.0) {
        let low = if zero_ok { "from 0" } else { "above 0" };
        return Err(format!("{text} is not {low} up to 86400 seconds"));
    }
    Duration::try_from_secs_f64(secs).map_err(|err| err.to_string())
}

/// Creates an RDS socket, explaining the usual reason it fails.
pub fn new_socket() -> io::Result<RdsSocket> {
    RdsSocket::new().map_err(|err| {
        if err.raw_os_error() == Some(libc::EAFNOSUPPORT) {
            context(
                err,
                "socket(AF_RDS): no RDS implementation is loaded (insmod rrds.ko, or modprobe rds)",
            )
        } else {
            context(err, "socket(AF_RDS)")
        }
    })
}

/// A send or receive that may succeed if retried: the socket would block,
/// a signal interrupted it, or the destination port is congested
/// (`ENOBUFS`).
pub fn is_transient(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    ) || err.raw_os_error() == Some(libc::ENOBUFS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_keeps_the_kind() {
        let err = context(io::Error::from_raw_os_error(libc::EINVAL), "bind");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().starts_with("bind: "));
        assert_eq!(errno(&err), Some(libc::EINVAL));
        let err = context(context(err, "inner"), "outer");
        assert_eq!(
            err.to_string(),
            format!(
                "outer: inner: bind: {}",
                io::Error::from_raw_os_error(libc::EINVAL)
            )
        );
        assert_eq!(errno(&err), Some(libc::EINVAL));
        assert_eq!(errno(&io::Error::other("no errno")), None);
    }

    #[test]
    fn transient_errors() {
        assert!(is_transient(&io::Error::from_raw_os_error(libc::EAGAIN)));
        assert!(is_transient(&io::Error::from_raw_os_error(libc::ENOBUFS)));
        assert!(is_transient(&io::Error::from_raw_os_error(libc::EINTR)));
        assert!(!is_transient(&io::Error::from_raw_os_error(libc::EMSGSIZE)));
        assert!(!is_transient(&io::Error::from_raw_os_error(
            libc::ETIMEDOUT
        )));
    }
}

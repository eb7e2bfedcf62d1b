//! The `rrds` subcommands and what they share.

pub mod bench;
pub mod info;
pub mod json;
pub mod mr;
pub mod ping;
pub mod stats;
pub mod watch;
pub mod xrc;

use std::fmt::Display;
use std::io;

use rrds::RdsSocket;

/// Prefixes `err` with what was being done, keeping its kind.
pub fn context(err: io::Error, what: impl Display) -> io::Error {
    io::Error::new(err.kind(), format!("{what}: {err}"))
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

//! `rrds info`: print an `RDS_INFO_*` table, like rds-info.

use std::io;
use std::io::Write;

use clap::Args;
use clap::ValueEnum;

use super::context;
use super::new_socket;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Table {
    /// RDS_INFO_COUNTERS: global and transport counters.
    Counters,
    /// RDS_INFO_SOCKETS: sockets bound to IPv4 addresses.
    Sockets,
}

#[derive(Args, Debug)]
pub struct InfoArgs {
    /// Which table to print.
    #[arg(value_enum)]
    pub table: Table,
}

/// Prints the table.
pub fn run(args: &InfoArgs) -> io::Result<bool> {
    let sock = new_socket()?;
    let mut out = io::stdout().lock();
    match args.table {
        Table::Counters => {
            let counters = sock
                .counters()
                .map_err(|err| context(err, "getsockopt(RDS_INFO_COUNTERS)"))?;
            for counter in counters {
                writeln!(out, "{:<32} {}", counter.name, counter.value)?;
            }
        }
        Table::Sockets => {
            let sockets = sock
                .sockets()
                .map_err(|err| context(err, "getsockopt(RDS_INFO_SOCKETS)"))?;
            writeln!(
                out,
                "{:<21} {:<21} {:>10} {:>10} {:>10}",
                "bound", "connected", "sndbuf", "rcvbuf", "inode"
            )?;
            for s in sockets {
                writeln!(
                    out,
                    "{:<21} {:<21} {:>10} {:>10} {:>10}",
                    s.bound.to_string(),
                    s.connected.to_string(),
                    s.sndbuf,
                    s.rcvbuf,
                    s.inode
                )?;
            }
        }
    }
    Ok(true)
}

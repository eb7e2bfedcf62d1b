// SPDX-License-Identifier: GPL-2.0-only
//! `rrds info`: print an `RDS_INFO_*` table, or all of them, like
//! rds-info.

use std::io;
use std::io::Write;
use std::net::Ipv6Addr;

use clap::Args;
use clap::ValueEnum;
use rrds::MessageInfo;
use serde::Serialize;

use super::context;
use super::errno;
use super::json::write_record;
use super::new_socket;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Table {
    /// RDS_INFO_COUNTERS: global and transport counters.
    Counters,
    /// RDS_INFO_SOCKETS: sockets bound to IPv4 addresses.
    Sockets,
    /// RDS_INFO_CONNECTIONS and RDS6_INFO_CONNECTIONS: connections, with
    /// flags s (sending), c (connecting), C (connected).
    Connections,
    /// RDS_INFO_SEND_MESSAGES (and RDS6_): messages not yet sent.
    SendMessages,
    /// RDS_INFO_RETRANS_MESSAGES (and RDS6_): messages sent, not yet acked.
    RetransMessages,
    /// RDS_INFO_RECV_MESSAGES (and RDS6_): messages not yet read.
    RecvMessages,
    /// RDS_INFO_IB_CONNECTIONS (and RDS6_): connections over IB.
    IbConnections,
    /// RRDS_INFO_XRC_TARGETS: XRC target QPs (rrds only).
    XrcTargets,
}

#[derive(Args, Debug)]
pub struct InfoArgs {
    /// Which table to print. Default: all of them, each under its name.
    #[arg(value_enum)]
    pub table: Option<Table>,
    /// JSON Lines: a `meta` record, then a record per row, its type the
    /// row's kind (`counter`, `socket`, `connection`, `send_message`,
    /// `retrans_message`, `recv_message`, `ib_connection`, `xrc_target`);
    /// a table the implementation lacks is an `unavailable` record.
    #[arg(long)]
    pub json: bool,
}

impl Table {
    /// The name on the command line.
    fn name(self) -> String {
        self.to_possible_value()
            .map_or_else(String::new, |v| v.get_name().to_string())
    }

    /// Whether the table may be missing from a working implementation:
    /// IB connections without an IB transport (in-tree without
    /// `rds_rdma`), XRC targets in-tree. They answer `ENOPROTOOPT`.
    fn optional(self) -> bool {
        matches!(self, Self::IbConnections | Self::XrcTargets)
    }

    /// The `type` of the table's rows in JSON.
    fn row_kind(self) -> &'static str {
        match self {
            Self::Counters => "counter",
            Self::Sockets => "socket",
            Self::Connections => "connection",
            Self::SendMessages => "send_message",
            Self::RetransMessages => "retrans_message",
            Self::RecvMessages => "recv_message",
            Self::IbConnections => "ib_connection",
            Self::XrcTargets => "xrc_target",
        }
    }
}

/// How a column's cells are padded.
#[derive(Clone, Copy)]
enum Align {
    Left,
    Right,
}

/// Writes a header line and `rows`, each column as wide as its widest cell
/// (addresses vary from `0.0.0.0` to full IPv6), one space apart.
fn write_table(
    out: &mut impl Write,
    columns: &[(&str, Align)],
    rows: &[Vec<String>],
) -> io::Result<()> {
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            rows.iter()
                .filter_map(|row| row.get(i))
                .map(String::len)
                .fold(name.len(), usize::max)
        })
        .collect();
    let header: Vec<String> = columns.iter().map(|(name, _)| name.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, ((_, align), cell)) in columns.iter().zip(row).enumerate() {
            if i > 0 {
                line.push(' ');
            }
            let width = widths[i];
            match align {
                Align::Left => line.push_str(&format!("{cell:<width$}")),
                Align::Right => line.push_str(&format!("{cell:>width$}")),
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// A queue's messages as rds-info prints them. (Their flags are always 0.)
fn write_messages(out: &mut impl Write, messages: &[MessageInfo]) -> io::Result<()> {
    let rows: Vec<Vec<String>> = messages
        .iter()
        .map(|m| {
            vec![
                m.local().to_string(),
                m.foreign().to_string(),
                m.tos.to_string(),
                m.seq.to_string(),
                m.len.to_string(),
            ]
        })
        .collect();
    write_table(
        out,
        &[
            ("local", Align::Left),
            ("remote", Align::Left),
            ("tos", Align::Right),
            ("seq", Align::Right),
            ("bytes", Align::Right),
        ],
        &rows,
    )
}

/// Prints the table, or every table.
pub fn run(args: &InfoArgs) -> io::Result<bool> {
    let sock = new_socket()?;
    let mut out = io::stdout().lock();
    let json = args.json;
    let print = |table, out: &mut Vec<u8>| print_table(&sock, table, out, json);
    match args.table {
        Some(table) => {
            let mut text = Vec::new();
            print(table, &mut text)?;
            out.write_all(&text)?;
            Ok(true)
        }
        None => print_all(&mut out, json, print),
    }
}

/// Prints every table under a `NAME:` line, a blank line between them.
/// A table the implementation lacks ([`Table::optional`], `ENOPROTOOPT`)
/// says so in its place; any other failure goes to standard error, the
/// other tables are printed all the same, and the result is `false`.
/// In JSON the names and blank lines are left out, and a missing table is
/// an `unavailable` record.
fn print_all<W: Write>(
    out: &mut W,
    json: bool,
    mut print: impl FnMut(Table, &mut Vec<u8>) -> io::Result<()>,
) -> io::Result<bool> {
    let mut all_ok = true;
    for (i, &table) in Table::value_variants().iter().enumerate() {
        if !json {
            let gap = if i > 0 { "\n" } else { "" };
            writeln!(out, "{gap}{}:", table.name())?;
        }
        // Buffered, so a table that fails halfway prints nothing.
        let mut text = Vec::new();
        match print(table, &mut text) {
            Ok(()) => out.write_all(&text)?,
            Err(err) if table.optional() && errno(&err) == Some(libc::ENOPROTOOPT) => {
                if json {
                    let record = serde_json::json!({
                        "table": table.name(),
                        "error": err.to_string(),
                    });
                    write_record(out, "unavailable", &record)?;
                } else {
                    writeln!(out, "(not available: {err})")?;
                }
            }
            Err(err) => {
                // What came so far goes out first, in order.
                out.flush()?;
                eprintln!("rrds: info {}: {err}", table.name());
                all_ok = false;
            }
        }
    }
    Ok(all_ok)
}

/// Writes `rows` as records of `table`'s row kind.
fn write_rows<T: Serialize>(out: &mut impl Write, table: Table, rows: &[T]) -> io::Result<()> {
    rows.iter()
        .try_for_each(|row| write_record(out, table.row_kind(), row))
}

/// Prints one table, as text or JSON records.
fn print_table(
    sock: &rrds::RdsSocket,
    table: Table,
    out: &mut impl Write,
    json: bool,
) -> io::Result<()> {
    let mut out = out;
    match table {
        Table::Counters => {
            let counters = sock
                .counters()
                .map_err(|err| context(err, "getsockopt(RDS_INFO_COUNTERS)"))?;
            if json {
                return write_rows(out, table, &counters);
            }
            for counter in counters {
                writeln!(out, "{:<32} {}", counter.name, counter.value)?;
            }
        }
        Table::Sockets => {
            let sockets = sock
                .sockets()
                .map_err(|err| context(err, "getsockopt(RDS_INFO_SOCKETS)"))?;
            if json {
                return write_rows(out, table, &sockets);
            }
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
        Table::Connections => {
            let conns = sock
                .connections()
                .map_err(|err| context(err, "getsockopt(RDS[6]_INFO_CONNECTIONS)"))?;
            if json {
                return write_rows(out, table, &conns);
            }
            let rows: Vec<Vec<String>> = conns
                .iter()
                .map(|c| {
                    vec![
                        c.laddr.to_string(),
                        c.faddr.to_string(),
                        // RDS6_INFO_CONNECTIONS has no tos.
                        c.tos.map_or_else(|| "-".to_string(), |tos| tos.to_string()),
                        c.transport.clone(),
                        c.next_tx_seq.to_string(),
                        c.next_rx_seq.to_string(),
                        c.flag_letters(),
                    ]
                })
                .collect();
            write_table(
                &mut out,
                &[
                    ("local", Align::Left),
                    ("remote", Align::Left),
                    ("tos", Align::Right),
                    ("transport", Align::Left),
                    ("next_tx", Align::Right),
                    ("next_rx", Align::Right),
                    ("flags", Align::Left),
                ],
                &rows,
            )?;
        }
        Table::SendMessages => {
            let messages = sock
                .send_messages()
                .map_err(|err| context(err, "getsockopt(RDS[6]_INFO_SEND_MESSAGES)"))?;
            if json {
                return write_rows(out, table, &messages);
            }
            write_messages(&mut out, &messages)?;
        }
        Table::RetransMessages => {
            let messages = sock
                .retrans_messages()
                .map_err(|err| context(err, "getsockopt(RDS[6]_INFO_RETRANS_MESSAGES)"))?;
            if json {
                return write_rows(out, table, &messages);
            }
            write_messages(&mut out, &messages)?;
        }
        Table::RecvMessages => {
            let messages = sock
                .recv_messages()
                .map_err(|err| context(err, "getsockopt(RDS[6]_INFO_RECV_MESSAGES)"))?;
            if json {
                return write_rows(out, table, &messages);
            }
            write_messages(&mut out, &messages)?;
        }
        Table::IbConnections => {
            let conns = sock.ib_connections().map_err(|err| {
                if err.raw_os_error() == Some(libc::ENOPROTOOPT) {
                    context(
                        err,
                        "getsockopt(RDS[6]_INFO_IB_CONNECTIONS) (no IB transport? in-tree: modprobe rds_rdma)",
                    )
                } else {
                    context(err, "getsockopt(RDS[6]_INFO_IB_CONNECTIONS)")
                }
            })?;
            if json {
                return write_rows(out, table, &conns);
            }
            let rows: Vec<Vec<String>> = conns
                .iter()
                .map(|c| {
                    vec![
                        c.src_addr.to_string(),
                        c.dst_addr.to_string(),
                        c.tos.to_string(),
                        c.sl.to_string(),
                        // GIDs print as IPv6 addresses, as rds-info does.
                        Ipv6Addr::from(c.src_gid).to_string(),
                        Ipv6Addr::from(c.dst_gid).to_string(),
                        c.max_send_wr.to_string(),
                        c.max_recv_wr.to_string(),
                        c.max_send_sge.to_string(),
                        c.rdma_mr_max.to_string(),
                        c.rdma_mr_size.to_string(),
                        c.cache_allocs.to_string(),
                    ]
                })
                .collect();
            write_table(
                &mut out,
                &[
                    ("local", Align::Left),
                    ("remote", Align::Left),
                    ("tos", Align::Right),
                    ("sl", Align::Right),
                    ("local_gid", Align::Left),
                    ("remote_gid", Align::Left),
                    ("send_wr", Align::Right),
                    ("recv_wr", Align::Right),
                    ("send_sge", Align::Right),
                    ("mr_max", Align::Right),
                    ("mr_size", Align::Right),
                    ("cache_allocs", Align::Right),
                ],
                &rows,
            )?;
        }
        Table::XrcTargets => super::xrc::list_targets(&mut out, json)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_tables_print_under_their_names() {
        let mut out = Vec::new();
        let ok = print_all(&mut out, false, |table, out| {
            writeln!(out, "rows of {}", table.name())
        })
        .unwrap();
        assert!(ok);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("counters:\nrows of counters\n\nsockets:\n"),
            "{text}"
        );
        assert!(
            text.ends_with("\nxrc-targets:\nrows of xrc-targets\n"),
            "{text}"
        );
        assert_eq!(text.matches(":\n").count(), Table::value_variants().len());
    }

    #[test]
    fn missing_optional_tables_are_noted_and_other_errors_fail() {
        let enoprotoopt = || io::Error::from_raw_os_error(libc::ENOPROTOOPT);
        let mut out = Vec::new();
        let ok = print_all(&mut out, false, |table, out| match table {
            Table::IbConnections => Err(context(enoprotoopt(), "getsockopt")),
            Table::XrcTargets => Err(enoprotoopt()),
            _ => writeln!(out, "ok"),
        })
        .unwrap();
        assert!(ok);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("ib-connections:\n(not available: getsockopt: "),
            "{text}"
        );
        assert!(text.contains("xrc-targets:\n(not available: "), "{text}");
        // ENOPROTOOPT from a table every implementation has is an error,
        // and a failing table prints nothing of itself.
        let mut out = Vec::new();
        let ok = print_all(&mut out, false, |table, out| {
            write!(out, "half")?;
            match table {
                Table::Sockets => Err(enoprotoopt()),
                _ => writeln!(out, " and half"),
            }
        })
        .unwrap();
        assert!(!ok);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("sockets:\n\nconnections:\nhalf and half\n"),
            "{text}"
        );
    }

    #[test]
    fn json_has_records_only_and_marks_missing_tables() {
        let mut out = Vec::new();
        let ok = print_all(&mut out, true, |table, out| match table {
            Table::IbConnections => Err(io::Error::from_raw_os_error(libc::ENOPROTOOPT)),
            Table::Counters => write_rows(
                out,
                table,
                &[serde_json::json!({"name": "conn_reset", "value": 3})],
            ),
            _ => Ok(()),
        })
        .unwrap();
        assert!(ok);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["type"], "counter");
        assert_eq!(lines[0]["value"], 3);
        assert_eq!(lines[1]["type"], "unavailable");
        assert_eq!(lines[1]["table"], "ib-connections");
    }

    #[test]
    fn table_columns_fit_the_widest_cell() {
        let mut out = Vec::new();
        let rows = vec![
            vec!["127.0.0.1".to_string(), "5".to_string(), "--C".to_string()],
            vec![
                "fd00::1".to_string(),
                "123456".to_string(),
                "s-C".to_string(),
            ],
        ];
        write_table(
            &mut out,
            &[
                ("local", Align::Left),
                ("seq", Align::Right),
                ("flags", Align::Left),
            ],
            &rows,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "local        seq flags\n\
             127.0.0.1      5 --C\n\
             fd00::1   123456 s-C\n"
        );
    }

    #[test]
    fn message_table_shows_socket_addresses() {
        let mut out = Vec::new();
        let message = MessageInfo::new(
            "[::1]:4000".parse().unwrap(),
            "[::1]:4001".parse().unwrap(),
            3,
            64,
        );
        write_messages(&mut out, &[message]).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(
            out.lines().nth(1),
            Some("[::1]:4000 [::1]:4001   0   3    64")
        );
    }
}

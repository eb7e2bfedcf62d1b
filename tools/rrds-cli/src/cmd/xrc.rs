// SPDX-License-Identifier: GPL-2.0-only
//! `rrds xrc`: rrds's XRC target-QP manager from the command line.
//!
//! Registrations belong to processes, so the commands that make one
//! (`create`, `watch`) keep it for as long as they run, print the target's
//! events, and unregister as they end (or the kernel ends the registration
//! when the process is killed).

use std::fmt;
use std::io;
use std::io::Write;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::time::Duration;
use std::time::Instant;

use clap::Args;
use clap::Subcommand;
use rrds::xrc::EventKind;
use rrds::xrc::Inject;
use rrds::xrc::TargetInfo;
use rrds::RdsSocket;
use rrds::XrcRegistration;
use serde::Serialize;

use super::context;
use super::json::write_record;
use super::new_socket;

#[derive(Args, Debug)]
pub struct XrcArgs {
    #[command(subcommand)]
    pub command: XrcCommand,
    /// JSON Lines: a `meta` record, then one per target (`xrc_target`),
    /// event (`xrc_event`) or step (`created`, `registered`, `injected`,
    /// `unregistered`, `gone`).
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum XrcCommand {
    /// List the target QPs of this network namespace.
    List,
    /// Create a target QP on the device of LOCAL_ADDR, then print its events
    /// until --count events, --duration seconds or a final event; unregister
    /// at the end (the QP goes with the last registration).
    Create(HoldArgs),
    /// Register with target QP_NUM, then print its events as `create` does.
    Watch {
        #[command(flatten)]
        hold: HoldArgs,
        /// The target's QP number.
        qp_num: u32,
    },
    /// Drive target QP_NUM into error, or deliver a synthesized event (for
    /// tests; needs CAP_NET_ADMIN).
    Inject {
        /// An address of the target's device.
        #[arg(short = 'I', long = "local", value_name = "LOCAL_ADDR")]
        local: IpAddr,
        /// The target's QP number.
        qp_num: u32,
        /// Event to synthesize (qp_fatal, qp_req_err, qp_access_err,
        /// comm_est, sq_drained, path_mig, path_mig_err, srq_err,
        /// srq_limit_reached, last_wqe_reached);
        /// without it, the QP is moved to the error state.
        #[arg(long, value_parser = parse_event)]
        event: Option<EventKind>,
    },
    /// Connect a kernel-side initiator from LOCAL_ADDR to target QP_NUM at
    /// TARGET_ADDR, send --count messages of --size bytes (each returns once
    /// the target has it), and disconnect.
    Send {
        /// An address of the RDMA device to connect from.
        #[arg(short = 'I', long = "local", value_name = "LOCAL_ADDR")]
        local: IpAddr,
        /// The address the target was created through.
        target: IpAddr,
        /// The target's QP number.
        qp_num: u32,
        /// Messages to send.
        #[arg(short = 'c', long, default_value_t = 1)]
        count: u64,
        /// Bytes per message (at most 4096, a target's receive buffer).
        #[arg(short = 's', long, default_value_t = 1000)]
        size: usize,
    },
}

#[derive(Args, Debug)]
pub struct HoldArgs {
    /// An address of the RDMA device to use.
    #[arg(short = 'I', long = "local", value_name = "LOCAL_ADDR")]
    pub local: IpAddr,
    /// Stop after this many events (default: no limit).
    #[arg(short = 'c', long)]
    pub count: Option<u64>,
    /// Stop after this many seconds (default: no limit).
    #[arg(short = 'd', long)]
    pub duration: Option<u64>,
}

fn parse_event(name: &str) -> Result<EventKind, String> {
    EventKind::from_name(name)
        .filter(|k| *k != EventKind::TargetGone)
        .ok_or_else(|| {
            let names: Vec<_> = EventKind::names().filter(|n| *n != "target_gone").collect();
            format!("unknown event {name:?}; one of {}", names.join(", "))
        })
}

fn bound_socket(local: IpAddr) -> io::Result<RdsSocket> {
    let sock = new_socket()?;
    sock.bind(SocketAddr::new(local, 0))
        .map_err(|err| context(err, format_args!("bind {local}")))?;
    Ok(sock)
}

/// Prefixes `err` with `what`; an `ENOPROTOOPT` (the in-tree `rds`, which
/// has no XRC options) says so.
fn extension(err: io::Error, what: &str) -> io::Error {
    if err.raw_os_error() == Some(libc::ENOPROTOOPT) {
        context(
            err,
            format_args!("{what} (not rrds? XRC targets are an rrds extension)"),
        )
    } else {
        context(err, what)
    }
}

/// A target with its QP state's name.
#[derive(Serialize)]
struct TargetRow<'a> {
    #[serde(flatten)]
    target: &'a TargetInfo,
    state: &'static str,
}

/// Lists this namespace's target QPs as a table (`rrds xrc list`, `rrds
/// info xrc-targets`).
pub fn list_targets(out: &mut impl Write, json: bool) -> io::Result<()> {
    let sock = new_socket()?;
    let targets = sock
        .xrc_targets()
        .map_err(|err| extension(err, "getsockopt(RRDS_INFO_XRC_TARGETS)"))?;
    if json {
        for target in &targets {
            let row = TargetRow {
                target,
                state: target.state_name(),
            };
            write_record(out, "xrc_target", &row)?;
        }
        return Ok(());
    }
    writeln!(
        out,
        "{:>8} {:<12} {:<9} {:<6} {:>13} {:>10} {:>10} {:>11} {:>8} {:>14}",
        "qp_num",
        "device",
        "backend",
        "state",
        "registrations",
        "events",
        "overflows",
        "connections",
        "accepted",
        "bytes_received"
    )?;
    for t in targets {
        writeln!(
            out,
            "{:>8} {:<12} {:<9} {:<6} {:>13} {:>10} {:>10} {:>11} {:>8} {:>14}",
            t.qp_num,
            t.device,
            t.backend.to_string(),
            t.state_name(),
            t.registrations,
            t.events,
            t.overflows,
            t.connections,
            t.accepted,
            t.bytes_received
        )?;
    }
    Ok(())
}

/// Runs the subcommand.
pub fn run(args: &XrcArgs) -> io::Result<bool> {
    let mut out = io::stdout().lock();
    let json = args.json;
    match &args.command {
        XrcCommand::List => {
            list_targets(&mut out, json)?;
            Ok(true)
        }
        XrcCommand::Create(hold) => {
            let sock = bound_socket(hold.local)?;
            let (registration, backend) = sock
                .xrc_create()
                .map_err(|err| extension(err, "getsockopt(RRDS_XRC_CREATE)"))?;
            let qp_num = registration.qp_num();
            step(
                &mut out,
                json,
                "created",
                serde_json::json!({ "qp_num": qp_num, "backend": backend }),
                format_args!("created qp_num={qp_num} backend={backend}"),
            )?;
            hold_and_watch(&sock, registration, hold, &mut out, json)
        }
        XrcCommand::Watch { hold, qp_num } => {
            let sock = bound_socket(hold.local)?;
            let registration = sock
                .xrc_register(*qp_num)
                .map_err(|err| extension(err, "setsockopt(RRDS_XRC_REGISTER)"))?;
            step(
                &mut out,
                json,
                "registered",
                serde_json::json!({ "qp_num": qp_num }),
                format_args!("registered qp_num={qp_num}"),
            )?;
            hold_and_watch(&sock, registration, hold, &mut out, json)
        }
        XrcCommand::Inject {
            local,
            qp_num,
            event,
        } => {
            let sock = bound_socket(*local)?;
            let what = event.map_or(Inject::QpError, Inject::Event);
            sock.xrc_inject(*qp_num, what)
                .map_err(|err| extension(err, "setsockopt(RRDS_XRC_INJECT)"))?;
            if json {
                let event = event.map_or_else(|| "qp_error".to_string(), |e| e.to_string());
                let record = serde_json::json!({ "qp_num": qp_num, "event": event });
                write_record(&mut out, "injected", &record)?;
            }
            Ok(true)
        }
        XrcCommand::Send {
            local,
            target,
            qp_num,
            count,
            size,
        } => {
            let sock = bound_socket(*local)?;
            let initiator = sock.xrc_connect(*target, *qp_num).map_err(|err| {
                extension(
                    err,
                    &format!("setsockopt(RRDS_XRC_CONNECT) to {target} qp_num={qp_num}"),
                )
            })?;
            let record = serde_json::json!({ "qp_num": qp_num, "target": target });
            step(
                &mut out,
                json,
                "connected",
                record,
                format_args!("connected qp_num={qp_num} target={target}"),
            )?;
            let payload = vec![0x5a_u8; *size];
            let mut bytes = 0u64;
            for i in 0..*count {
                let sent = initiator
                    .send(&payload)
                    .map_err(|err| context(err, format_args!("send {} of {count}", i + 1)))?;
                bytes += sent as u64;
            }
            initiator
                .disconnect()
                .map_err(|err| context(err, "setsockopt(RRDS_XRC_DISCONNECT)"))?;
            let record = serde_json::json!({ "qp_num": qp_num, "messages": count, "bytes": bytes });
            step(
                &mut out,
                json,
                "sent",
                record,
                format_args!("sent qp_num={qp_num} messages={count} bytes={bytes}"),
            )?;
            Ok(true)
        }
    }
}

/// Prints events until the count, the duration or a final event; then
/// unregisters, unless the target is already gone.
fn hold_and_watch(
    sock: &RdsSocket,
    registration: XrcRegistration<'_>,
    hold: &HoldArgs,
    out: &mut impl Write,
    json: bool,
) -> io::Result<bool> {
    let end = hold
        .duration
        .map(|s| Instant::now() + Duration::from_secs(s));
    let mut seen = 0u64;
    let mut gone = false;
    while hold.count.is_none_or(|c| seen < c) && !gone {
        let left = match end {
            Some(end) => match end.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left,
                _ => break,
            },
            None => Duration::from_secs(3600),
        };
        if let Some(event) = sock.recv_xrc_event(left.min(Duration::from_secs(1)))? {
            step(out, json, "xrc_event", event, format_args!("event {event}"))?;
            seen += 1;
            gone = event.last;
        }
    }
    let qp_num = registration.qp_num();
    if gone {
        // The registration ended with the target.
        registration.keep();
        let record = serde_json::json!({ "qp_num": qp_num });
        step(
            out,
            json,
            "gone",
            record,
            format_args!("target qp_num={qp_num} gone"),
        )?;
        return Ok(true);
    }
    registration
        .unregister()
        .map_err(|err| context(err, format_args!("unregister qp_num={qp_num}")))?;
    let record = serde_json::json!({ "qp_num": qp_num });
    step(
        out,
        json,
        "unregistered",
        record,
        format_args!("unregistered qp_num={qp_num}"),
    )?;
    Ok(true)
}

/// Prints one step of a command as it happens: `record` as a `kind`
/// record in JSON, else `text`.
fn step(
    out: &mut impl Write,
    json: bool,
    kind: &str,
    record: impl Serialize,
    text: fmt::Arguments<'_>,
) -> io::Result<()> {
    if json {
        write_record(out, kind, &record)?;
    } else {
        writeln!(out, "{text}")?;
    }
    out.flush()
}

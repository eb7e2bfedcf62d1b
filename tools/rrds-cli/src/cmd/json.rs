// SPDX-License-Identifier: GPL-2.0-only
//! `--json` output: JSON Lines, one object per line, each with a `type`.
//!
//! Every subcommand's first line is its [`Meta`] record (what ran, where,
//! when); every record that follows is a struct derived with `Serialize`
//! (the crate's own, or the command's), written by [`write_record`] with its
//! `type` first and its fields in declaration order. Reading back
//! (`rrds plot`) is `serde_json`'s too.

use std::io;
use std::io::Write;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use serde::Serialize;
use serde::Serializer;

/// Serializes a measured number rounded to three decimals, `null` when
/// absent or not finite (JSON has no NaN or infinity).
pub fn three_decimals<S: Serializer>(value: &Option<f64>, out: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) if v.is_finite() => out.serialize_f64((v * 1000.0).round() / 1000.0),
        _ => out.serialize_none(),
    }
}

/// [`three_decimals`] for a number that is always there.
pub fn three_decimals_always<S: Serializer>(value: &f64, out: S) -> Result<S::Ok, S::Error> {
    three_decimals(&Some(*value), out)
}

/// What ran, where and when: the first line of every `--json` output.
#[derive(Debug, Serialize)]
pub struct Meta {
    /// The subcommand: `ping`, `info`, `bench`, ...
    pub command: &'static str,
    /// The command line, program name first.
    pub argv: Vec<String>,
    /// This program's version.
    pub version: &'static str,
    /// The loaded RDS implementation: `rrds`, `rds` or `none`.
    pub implementation: &'static str,
    /// The kernel release (`uname -r`).
    pub kernel: String,
    /// The host name.
    pub host: String,
    /// When the command started, in seconds since the Unix epoch.
    pub start_unix_s: f64,
}

impl Meta {
    /// The record for `command`, now.
    pub fn new(command: &'static str) -> Self {
        let (kernel, host) = uname();
        Self {
            command,
            argv: std::env::args().collect(),
            version: env!("CARGO_PKG_VERSION"),
            implementation: rrds::loaded_implementation().unwrap_or("none"),
            kernel,
            host,
            start_unix_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        }
    }

    /// Writes the record as the output's first line.
    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        write_record(out, "meta", self)
    }
}

/// The kernel release and the host name, empty if `uname` fails.
fn uname() -> (String, String) {
    // SAFETY: utsname is plain arrays of C chars; all zeroes is valid.
    let mut name: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `name` is a valid, writable utsname.
    if unsafe { libc::uname(&mut name) } != 0 {
        return (String::new(), String::new());
    }
    let text = |field: &[libc::c_char]| {
        let bytes: Vec<u8> = field
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (text(&name.release), text(&name.nodename))
}

/// A record with its `type` first.
#[derive(Serialize)]
struct Tagged<'a, T> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(flatten)]
    record: &'a T,
}

/// Writes `record`, a struct, as one line `{"type":kind,...its fields}`.
pub fn write_record<T: Serialize>(out: &mut impl Write, kind: &str, record: &T) -> io::Result<()> {
    serde_json::to_writer(&mut *out, &Tagged { kind, record })?;
    writeln!(out)
}

/// [`write_record`]'s line, without its newline.
pub fn record_line<T: Serialize>(kind: &str, record: &T) -> io::Result<String> {
    Ok(serde_json::to_string(&Tagged { kind, record })?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Measured {
        #[serde(serialize_with = "three_decimals")]
        rate: Option<f64>,
        #[serde(serialize_with = "three_decimals")]
        absent: Option<f64>,
        #[serde(serialize_with = "three_decimals")]
        nan: Option<f64>,
        #[serde(serialize_with = "three_decimals_always")]
        seconds: f64,
    }

    #[test]
    fn numbers_are_rounded_and_non_finite_ones_null() {
        let line = record_line(
            "run",
            &Measured {
                rate: Some(812_345.678_9),
                absent: None,
                nan: Some(f64::NAN),
                seconds: f64::INFINITY,
            },
        )
        .unwrap();
        assert_eq!(
            line,
            r#"{"type":"run","rate":812345.679,"absent":null,"nan":null,"seconds":null}"#
        );
        let value: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["rate"].as_f64(), Some(812_345.679));
    }

    #[derive(Serialize)]
    struct Pong {
        seq: u64,
        from: std::net::IpAddr,
        rtt_ms: Option<f64>,
    }

    #[test]
    fn records_are_one_line_with_their_type_first() {
        let mut out = Vec::new();
        let pong = Pong {
            seq: 3,
            from: "fd00::2".parse().unwrap(),
            rtt_ms: None,
        };
        write_record(&mut out, "pong", &pong).unwrap();
        write_record(&mut out, "pong", &pong).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"type\":\"pong\",\"seq\":3,\"from\":\"fd00::2\",\"rtt_ms\":null}\n".repeat(2)
        );
    }

    #[test]
    fn meta_says_what_ran_where() {
        let mut out = Vec::new();
        Meta::new("info").write(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 1);
        let meta: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(meta["type"], "meta");
        assert_eq!(meta["command"], "info");
        assert_eq!(meta["version"], env!("CARGO_PKG_VERSION"));
        assert!(!meta["kernel"].as_str().unwrap().is_empty());
        assert!(meta["argv"].as_array().is_some_and(|a| !a.is_empty()));
        assert!(meta["start_unix_s"].as_f64().unwrap() > 1.7e9);
    }
}

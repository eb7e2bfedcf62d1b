// SPDX-License-Identifier: GPL-2.0-only
//! `--json` output: JSON Lines, one object per line, each with a `type`.
//!
//! Every subcommand's first line is its [`Meta`] record (what ran, where,
//! when); the records that follow are the crate's own (serde, through
//! [`write_record`]) or, for `rrds bench`'s flat rows, built key by key with
//! [`Object`]. Reading back (`rrds plot`) is `serde_json`'s.

use std::fmt::Write as _;
use std::io;
use std::io::Write;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use serde::Serialize;

/// Builds one JSON object, key by key, in insertion order.
pub struct Object {
    text: String,
}

impl Default for Object {
    fn default() -> Self {
        Self::new()
    }
}

impl Object {
    /// An object with no keys yet.
    pub fn new() -> Self {
        Self {
            text: String::from("{"),
        }
    }

    fn key(&mut self, key: &str) {
        if self.text.len() > 1 {
            self.text.push(',');
        }
        push_string(&mut self.text, key);
        self.text.push(':');
    }

    /// A string value.
    pub fn string(mut self, key: &str, value: &str) -> Self {
        self.key(key);
        push_string(&mut self.text, value);
        self
    }

    /// An unsigned integer value.
    pub fn uint(mut self, key: &str, value: u64) -> Self {
        self.key(key);
        // Writing to a String cannot fail.
        let _ = write!(self.text, "{value}");
        self
    }

    /// A boolean value.
    pub fn boolean(mut self, key: &str, value: bool) -> Self {
        self.key(key);
        self.text.push_str(if value { "true" } else { "false" });
        self
    }

    /// A number with three decimals; `null` when absent or not finite
    /// (JSON has no NaN or infinity).
    pub fn number(mut self, key: &str, value: Option<f64>) -> Self {
        self.key(key);
        match value {
            Some(v) if v.is_finite() => {
                let _ = write!(self.text, "{v:.3}");
            }
            _ => self.text.push_str("null"),
        }
        self
    }

    /// A value that is already JSON (a nested object or an array).
    pub fn raw(mut self, key: &str, json: &str) -> Self {
        self.key(key);
        self.text.push_str(json);
        self
    }

    /// The object's text.
    pub fn finish(mut self) -> String {
        self.text.push('}');
        self.text
    }
}

/// A JSON array of already-encoded values.
pub fn array(items: &[String]) -> String {
    format!("[{}]", items.join(","))
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

/// Appends `s` as a quoted JSON string.
fn push_string(out: &mut String, s: &str) {
    // A string always serializes.
    out.push_str(&serde_json::Value::from(s).to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_object() {
        assert_eq!(Object::new().finish(), "{}");
    }

    #[test]
    fn fields_in_order_with_commas() {
        let json = Object::new()
            .string("mode", "rate")
            .uint("size", 64)
            .boolean("verify", true)
            .number("mb_per_sec", Some(1.5))
            .number("lat_p50_us", None)
            .finish();
        assert_eq!(
            json,
            r#"{"mode":"rate","size":64,"verify":true,"mb_per_sec":1.500,"lat_p50_us":null}"#
        );
    }

    #[test]
    fn non_finite_numbers_are_null() {
        let json = Object::new()
            .number("a", Some(f64::NAN))
            .number("b", Some(f64::INFINITY))
            .finish();
        assert_eq!(json, r#"{"a":null,"b":null}"#);
    }

    #[test]
    fn strings_are_escaped() {
        let json = Object::new().string("k", "a\"b\\c\nd\u{1}").finish();
        assert_eq!(json, r#"{"k":"a\"b\\c\nd\u0001"}"#);
    }

    #[test]
    fn nested_values_are_embedded() {
        let inner = Object::new().uint("x", 1).finish();
        let json = Object::new()
            .raw("items", &array(&[inner.clone(), inner]))
            .finish();
        assert_eq!(json, r#"{"items":[{"x":1},{"x":1}]}"#);
    }

    #[test]
    fn reads_back_as_json() {
        let inner = Object::new()
            .string("mode", "rate")
            .uint("size", 64)
            .number("lat_p50_us", None)
            .number("mb_per_sec", Some(1.5))
            .finish();
        let text = Object::new()
            .string("type", "summary")
            .boolean("verify", true)
            .string("odd", "a\"b\\c\nd\u{1}é")
            .raw("medians", &array(&[inner]))
            .finish();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["type"], "summary");
        assert_eq!(value["verify"], true);
        assert_eq!(value["odd"], "a\"b\\c\nd\u{1}é");
        let medians = value["medians"].as_array().unwrap();
        assert_eq!(medians.len(), 1);
        assert_eq!(medians[0]["size"].as_u64(), Some(64));
        assert!(medians[0]["lat_p50_us"].is_null());
        assert_eq!(medians[0]["mb_per_sec"].as_f64(), Some(1.5));
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

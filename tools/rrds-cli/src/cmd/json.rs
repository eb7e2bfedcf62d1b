// SPDX-License-Identifier: GPL-2.0-only
//! Minimal JSON for one-line records, no dependency needed: an object
//! writer for flat objects of strings and numbers, and a reader of any
//! JSON value (`rrds plot` reads what `rrds bench --json` wrote).

use std::fmt::Write as _;

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

/// Appends `s` as a quoted JSON string.
fn push_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A JSON value as [`parse`] reads it. Objects keep their keys in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

impl Value {
    /// An object's value for `key` (the first, if repeated).
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }

    /// A number that is a whole, non-negative one.
    pub fn as_u64(&self) -> Option<u64> {
        let n = self.as_f64()?;
        (n >= 0.0 && n.fract() == 0.0 && n <= u64::MAX as f64).then_some(n as u64)
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }
}

/// Deepest nesting [`parse`] follows (what rrds writes nests 3 deep).
const MAX_DEPTH: usize = 64;

/// Reads one JSON value that is all of `text` (white space around it
/// allowed); the error says what is wrong and at which byte.
pub fn parse(text: &str) -> Result<Value, String> {
    let mut reader = Reader {
        text: text.as_bytes(),
        at: 0,
    };
    let value = reader.value(0)?;
    reader.space();
    if reader.at != reader.text.len() {
        return Err(reader.error("text after the value"));
    }
    Ok(value)
}

struct Reader<'a> {
    text: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn error(&self, what: &str) -> String {
        format!("{what} at byte {}", self.at)
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// Takes `word` (`true`, `false`, `null`) if it is next.
    fn word(&mut self, word: &str, value: Value) -> Result<Value, String> {
        if self.text[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(value)
        } else {
            Err(self.error("not a JSON value"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deep"));
        }
        self.space();
        match self.peek() {
            None => Err(self.error("unexpected end")),
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => self.string().map(Value::String),
            Some(b't') => self.word("true", Value::Bool(true)),
            Some(b'f') => self.word("false", Value::Bool(false)),
            Some(b'n') => self.word("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error("not a JSON value")),
        }
    }

    /// Takes `byte` after optional white space.
    fn expect(&mut self, byte: u8) -> Result<(), String> {
        self.space();
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.error(&format!("expected `{}`", char::from(byte))))
        }
    }

    /// Whether the list goes on after an item (`,`) or ends (`close`).
    fn more(&mut self, close: u8) -> Result<bool, String> {
        self.space();
        match self.peek() {
            Some(b',') => {
                self.at += 1;
                Ok(true)
            }
            Some(c) if c == close => {
                self.at += 1;
                Ok(false)
            }
            _ => Err(self.error(&format!("expected `,` or `{}`", char::from(close)))),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, String> {
        self.at += 1;
        let mut fields = Vec::new();
        self.space();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Value::Object(fields));
        }
        loop {
            self.space();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a key"));
            }
            let key = self.string()?;
            self.expect(b':')?;
            fields.push((key, self.value(depth + 1)?));
            if !self.more(b'}')? {
                return Ok(Value::Object(fields));
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, String> {
        self.at += 1;
        let mut items = Vec::new();
        self.space();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            if !self.more(b']')? {
                return Ok(Value::Array(items));
            }
        }
    }

    /// Four hex digits of a `\u` escape.
    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .text
            .get(self.at..self.at + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| self.error("bad \\u escape"))?;
        self.at += 4;
        u32::from_str_radix(digits, 16).map_err(|_| self.error("bad \\u escape"))
    }

    fn string(&mut self) -> Result<String, String> {
        self.at += 1;
        let mut out = String::new();
        loop {
            // The text is UTF-8: copy up to the next quote or escape whole.
            let rest = &self.text[self.at..];
            let run = rest
                .iter()
                .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                .ok_or_else(|| self.error("unterminated string"))?;
            out.push_str(std::str::from_utf8(&rest[..run]).map_err(|_| self.error("not UTF-8"))?);
            self.at += run;
            match self.text[self.at] {
                b'"' => {
                    self.at += 1;
                    return Ok(out);
                }
                b'\\' => {
                    self.at += 1;
                    let escape = self
                        .peek()
                        .ok_or_else(|| self.error("unterminated string"))?;
                    self.at += 1;
                    let c = match escape {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let high = self.hex4()?;
                            let code = if (0xd800..0xdc00).contains(&high)
                                && self.text[self.at..].starts_with(b"\\u")
                            {
                                self.at += 2;
                                let low = self.hex4()?;
                                if !(0xdc00..0xe000).contains(&low) {
                                    return Err(self.error("bad surrogate pair"));
                                }
                                0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00)
                            } else {
                                high
                            };
                            char::from_u32(code).ok_or_else(|| self.error("bad \\u escape"))?
                        }
                        _ => return Err(self.error("bad escape")),
                    };
                    out.push(c);
                }
                _ => return Err(self.error("control character in a string")),
            }
        }
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.at;
        let digits = |r: &mut Self| {
            let from = r.at;
            while matches!(r.peek(), Some(b'0'..=b'9')) {
                r.at += 1;
            }
            r.at > from
        };
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        // One digit, or several not starting with 0.
        let int_start = self.at;
        if !digits(self) || (self.text[int_start] == b'0' && self.at - int_start > 1) {
            return Err(self.error("bad number"));
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if !digits(self) {
                return Err(self.error("bad number"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if !digits(self) {
                return Err(self.error("bad number"));
            }
        }
        // The grammar above is a subset of what f64's parser takes.
        let text = std::str::from_utf8(&self.text[start..self.at])
            .map_err(|_| self.error("bad number"))?;
        text.parse()
            .map(Value::Number)
            .map_err(|_| self.error("bad number"))
    }
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
    fn reads_what_it_writes() {
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
        let value = parse(&text).unwrap();
        assert_eq!(value.get("type").and_then(Value::as_str), Some("summary"));
        assert_eq!(value.get("verify"), Some(&Value::Bool(true)));
        assert_eq!(
            value.get("odd").and_then(Value::as_str),
            Some("a\"b\\c\nd\u{1}é")
        );
        let medians = value.get("medians").and_then(Value::as_array).unwrap();
        assert_eq!(medians.len(), 1);
        assert_eq!(medians[0].get("size").and_then(Value::as_u64), Some(64));
        assert_eq!(medians[0].get("lat_p50_us"), Some(&Value::Null));
        assert_eq!(
            medians[0].get("mb_per_sec").and_then(Value::as_f64),
            Some(1.5)
        );
        assert_eq!(medians[0].get("missing"), None);
    }

    #[test]
    fn reads_any_json() {
        let value =
            parse(" [1, -0.5e2, 0, true, false, null, {}, [], \"\\u00e9\\ud83d\\ude00\\/\"] ")
                .unwrap();
        assert_eq!(
            value,
            Value::Array(vec![
                Value::Number(1.0),
                Value::Number(-50.0),
                Value::Number(0.0),
                Value::Bool(true),
                Value::Bool(false),
                Value::Null,
                Value::Object(Vec::new()),
                Value::Array(Vec::new()),
                Value::String("é😀/".to_string()),
            ])
        );
        assert_eq!(Value::Number(3.5).as_u64(), None);
        assert_eq!(Value::Number(-1.0).as_u64(), None);
        assert_eq!(Value::Number(7.0).as_u64(), Some(7));
    }

    #[test]
    fn refuses_what_is_not_json() {
        for bad in [
            "",
            "{",
            "{\"a\":}",
            "{\"a\" 1}",
            "{a:1}",
            "[1,]",
            "[1 2]",
            "01",
            "-",
            "1.",
            "1e",
            ".5",
            "nul",
            "\"abc",
            "\"\\x\"",
            "\"\\u12\"",
            "\"\\ud800\\u0041\"",
            "\"a\tb\"",
            "{} {}",
            "NaN",
            "rate 64 1 1000.0",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let deep = "[".repeat(100) + &"]".repeat(100);
        assert!(parse(&deep).unwrap_err().contains("too deep"));
        let err = parse("{\"a\":1,}").unwrap_err();
        assert_eq!(err, "expected a key at byte 7");
    }
}

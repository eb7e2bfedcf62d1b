// SPDX-License-Identifier: GPL-2.0-only
//! A minimal JSON object writer for one-line records (no dependency needed
//! for flat objects of strings and numbers).

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
}

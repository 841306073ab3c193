//! A response read once, by the tokenizer, without holding it as a
//! `serde_json::Value`: a `Value` of a page costs about ten times its
//! text (a 16 MB page took 224 MB), the tokenizer's tape about one and a
//! half. What Request needs of the page is small: the records' text as the
//! vendor wrote it (forwarded), how many there are, the last one (for
//! `last_record` paging), the highest cursor value, and the rest of the
//! body (the *envelope*: next links, cursors, totals), which is read as a
//! `Value` with the records array cut out.

use serde_json::Value;
use tributary_core::json::tape::{self, Tape, Tok};
use tributary_core::ports::BoxError;

/// A JSON response body and its tokens.
pub struct Doc<'a> {
    text: &'a str,
    tape: Tape,
}

/// Why a body is not one JSON document: serde_json's message (line and
/// column) for text it refuses too, else the tokenizer's (or the UTF-8
/// check's); then that error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotJson(pub String, #[source] pub BoxError);

/// Why a pointer does not lead to an array of records.
#[derive(Debug, PartialEq, Eq)]
pub enum NotRecords {
    /// Nothing is at the pointer.
    Missing,
    /// `null` is: many APIs send it for an empty list (the caller decides
    /// whether it is one, [`Doc::null_as_empty`]).
    Null,
    /// Something else is: `"an object"`, `"a string"`, …
    Other(&'static str),
}

/// The records of a page and what the rest of Request reads of them.
pub struct Records {
    /// Where their JSON text is in the body (`None`: no body).
    pub range: Option<std::ops::Range<usize>>,
    /// How many.
    pub count: usize,
    /// The last one (numbers beyond `f64` as [`parse_value`] reads them).
    pub last: Option<Value>,
    /// The highest non-null value at the cursor pointer, if asked
    /// ([`tributary_core::state::max_of`]'s order).
    pub cursor_max: Option<Value>,
    /// The lowest non-null value at the cursor pointer (same order), so the
    /// run's completion can tell pages in ascending cursor order.
    pub cursor_min: Option<Value>,
}

impl Records {
    /// A page without a body: no records.
    pub const NONE: Records = Records { range: None, count: 0, last: None, cursor_max: None, cursor_min: None };
}

impl<'a> Doc<'a> {
    /// Tokenizes `body`.
    ///
    /// # Errors
    /// [`NotJson`] when `body` is not UTF-8 or not one JSON document.
    pub fn parse(body: &'a [u8]) -> Result<Doc<'a>, NotJson> {
        let refused = |tokenizer: BoxError| {
            // serde_json's wording, for the same errors as before; it reads
            // without building anything.
            let source = match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
                Err(err) => err.into(),
                Ok(_) => tokenizer,
            };
            NotJson(source.to_string(), source)
        };
        let text = std::str::from_utf8(body).map_err(|err| refused(err.into()))?;
        let mut tape = Tape::default();
        tape.parse(text).map_err(|err| refused(err.into()))?;
        Ok(Doc { text, tape })
    }

    /// The value at RFC 6901 `pointer`, `None` when nothing is there.
    pub fn value_at(&self, pointer: &str) -> Option<Value> {
        let idx = self.tape.find(self.text, pointer)?;
        Some(parse_value(self.slice(idx)))
    }

    /// The body as a `Value` with the array at `pointer` replaced by `[]`:
    /// what paging, totals and drift checks read, small whatever the page.
    ///
    /// # Errors
    /// [`NotRecords`] as [`Doc::records`].
    pub fn envelope(&self, pointer: &str) -> Result<Value, NotRecords> {
        let Array { from, to, .. } = self.array_at(pointer)?;
        let mut text = String::with_capacity(self.text.len() - (to - from) + 2);
        text.push_str(&self.text[..from]);
        text.push_str("[]");
        text.push_str(&self.text[to..]);
        Ok(parse_value(&text))
    }

    /// The body as a `Value` with the `null` at `pointer` replaced by `[]`
    /// (the envelope of a page whose records are `null`, see
    /// [`NotRecords::Null`]).
    pub fn null_as_empty(&self, pointer: &str) -> Value {
        let mut body = parse_value(self.text);
        if let Some(slot) = body.pointer_mut(pointer) {
            *slot = Value::Array(Vec::new());
        }
        body
    }

    /// The array of records at `pointer`.
    ///
    /// # Errors
    /// [`NotRecords`] when nothing, or not an array, is there.
    pub fn records(&self, pointer: &str, cursor: Option<&str>) -> Result<Records, NotRecords> {
        let Array { idx, end, from, to } = self.array_at(pointer)?;
        let (mut count, mut last_idx, mut cursor_max, mut cursor_min) = (0usize, None, None::<Value>, None::<Value>);
        let mut i = idx + 1;
        while i < end {
            if let Some(pointer) = cursor {
                // One record at a time: parsed, read, dropped.
                let record = parse_value(self.slice(i));
                if let Some(value) = record.pointer(pointer).filter(|v| !v.is_null()) {
                    let higher = cursor_max
                        .as_ref()
                        .is_none_or(|max| tributary_core::state::compare(value, max) == std::cmp::Ordering::Greater);
                    if higher {
                        cursor_max = Some(value.clone());
                    }
                    let lower = cursor_min
                        .as_ref()
                        .is_none_or(|min| tributary_core::state::compare(value, min) == std::cmp::Ordering::Less);
                    if lower {
                        cursor_min = Some(value.clone());
                    }
                }
            }
            last_idx = Some(i);
            count += 1;
            i = self.tape.skip(i);
        }
        let last = last_idx.map(|i| parse_value(self.slice(i)));
        Ok(Records { range: Some(from..to), count, last, cursor_max, cursor_min })
    }

    fn array_at(&self, pointer: &str) -> Result<Array, NotRecords> {
        let idx = self.tape.find(self.text, pointer).ok_or(NotRecords::Missing)?;
        match self.tape.toks[idx] {
            Tok::Arr { end, from, to } => Ok(Array { idx, end: end as usize, from: from as usize, to: to as usize }),
            // A number is named as a `Value` would be (`kind_of`).
            Tok::Num { .. } => Err(NotRecords::Other("a number")),
            Tok::Null => Err(NotRecords::Null),
            tok => Err(NotRecords::Other(tape::kind_name(&tok))),
        }
    }

    /// The text of the value at token `idx`, as the document wrote it.
    fn slice(&self, idx: usize) -> &'a str {
        match self.tape.toks[idx] {
            Tok::Null => "null",
            Tok::Bool(true) => "true",
            Tok::Bool(false) => "false",
            Tok::Obj { from, to, .. } | Tok::Arr { from, to, .. } => &self.text[from as usize..to as usize],
            Tok::Num { start, end, .. } => &self.text[start as usize..end as usize],
            Tok::Str { start, end, .. } => &self.text[start as usize - 1..end as usize + 1],
        }
    }
}

/// An array on the tape: its token, the token after it, its byte range.
struct Array {
    idx: usize,
    end: usize,
    from: usize,
    to: usize,
}

/// `text` (one JSON value) as a `Value`; what a `Value` cannot hold reads
/// as [`tape::without_unrepresentable`] makes it: `1e400`, a string with a
/// lone surrogate and a container nested deeper than serde_json's 127
/// levels as `null`, a key with a lone surrogate with U+FFFD in its place.
/// Text the tokenizer took is always read (`Null` at worst).
pub fn parse_value(text: &str) -> Value {
    match serde_json::from_str(text) {
        Ok(value) => value,
        Err(_) => tape::without_unrepresentable(text)
            .ok()
            .flatten()
            .and_then(|cleaned| serde_json::from_str(&cleaned).ok())
            .unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_envelope_is_the_body_without_its_records() {
        let body = br#"{"meta":{"next":"abc","total":3},"items":[{"id":1},{"id":3,"at":"2026-01-02"},{"id":2}]}"#;
        let doc = Doc::parse(body).expect("json");
        assert_eq!(doc.envelope("/items").expect("array"), json!({"meta": {"next": "abc", "total": 3}, "items": []}));
        let records = doc.records("/items", Some("/id")).expect("array");
        assert_eq!(records.count, 3);
        assert_eq!(records.last, Some(json!({"id": 2})));
        assert_eq!(records.cursor_max, Some(json!(3)));
        assert_eq!(records.cursor_min, Some(json!(1)));
        let range = records.range.expect("a body");
        assert_eq!(&body[range], br#"[{"id":1},{"id":3,"at":"2026-01-02"},{"id":2}]"#);
        assert_eq!(doc.value_at("/meta/total"), Some(json!(3)));
        assert_eq!(doc.value_at("/meta/none"), None);
    }

    #[test]
    fn a_pointer_to_nothing_or_to_no_array_is_named() {
        let doc = Doc::parse(br#"{"items":{"a":1},"n":12.5,"s":"x"}"#).expect("json");
        assert!(matches!(doc.records("/missing", None), Err(NotRecords::Missing)));
        assert!(matches!(doc.records("/items", None), Err(NotRecords::Other("an object"))));
        assert!(matches!(doc.records("/n", None), Err(NotRecords::Other("a number"))));
        assert!(matches!(doc.records("/s", None), Err(NotRecords::Other("a string"))));
    }

    #[test]
    fn a_body_that_is_not_json_says_so_in_serde_jsons_words() {
        let err = Doc::parse(b"<html>Service maintenance</html>").err().expect("not JSON");
        assert!(err.0.contains("line 1 column 1"), "{}", err.0);
        assert!(Doc::parse(b"{\"a\":\xff}").is_err());
    }

    #[test]
    fn values_serde_json_cannot_hold_read_as_null_and_the_records_stay_text() {
        let body = br#"{"next":1e400,"items":[{"id":1,"big":1e400}]}"#;
        let doc = Doc::parse(body).expect("the tokenizer takes it");
        assert_eq!(doc.envelope("/items").expect("array"), json!({"next": null, "items": []}));
        let records = doc.records("", None).err();
        assert!(matches!(records, Some(NotRecords::Other("an object"))));
        let records = doc.records("/items", None).expect("array");
        assert_eq!(records.last, Some(json!({"id": 1, "big": null})));
        assert_eq!(&body[records.range.expect("a body")], br#"[{"id":1,"big":1e400}]"#);
    }
}

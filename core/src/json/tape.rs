//! A small JSON tokenizer: one document's text -> a flat tape of tokens.
//!
//! Persist reads every page twice (once to infer the schema over all
//! records, once to build Arrow arrays), so a record is never materialised
//! as a `serde_json::Value`: it is tokenized into a reusable [`Tape`] whose
//! strings and numbers are byte ranges of the record's text. Numbers keep
//! their text, so an integer beyond `i64` is seen as such (and written as a
//! decimal or text), never rounded through `f64` as a DOM parser would.
//!
//! Grammar: RFC 8259. Objects and arrays record the index of the token after
//! their last child (`end`), so a value is skipped in O(1).

use std::fmt;

/// Deepest nesting the tokenizer follows before refusing the record (the
/// parser recurses per level). Persist quarantines records nested deeper
/// than `MAX_NESTING_DEPTH` (32) anyway; this only bounds the stack.
pub const MAX_PARSE_DEPTH: usize = 512;

/// One token. Offsets are byte offsets into the record's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tok {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number: its text is `text[start..end]`; `int` when it has no
    /// fraction and no exponent.
    Num {
        /// First byte.
        start: u32,
        /// One past the last byte.
        end: u32,
        /// Integer literal.
        int: bool,
    },
    /// A string: its raw content (between the quotes) is `text[start..end]`;
    /// `escaped` when it contains a backslash escape.
    Str {
        /// First byte after the opening quote.
        start: u32,
        /// The closing quote's offset.
        end: u32,
        /// Contains `\` escapes.
        escaped: bool,
    },
    /// An object: children are key (`Str`), value pairs; the token after the
    /// last child is at index `end`. `bytes` is its text's range.
    Obj {
        /// Index of the first token after the object.
        end: u32,
        /// First byte (`{`).
        from: u32,
        /// One past `}`.
        to: u32,
    },
    /// An array: items follow; the token after the last item is at `end`.
    Arr {
        /// Index of the first token after the array.
        end: u32,
        /// First byte (`[`).
        from: u32,
        /// One past `]`.
        to: u32,
    },
}

/// A record's tokens, reused across records.
#[derive(Debug, Default)]
pub struct Tape {
    /// The tokens, in document order.
    pub toks: Vec<Tok>,
    /// Deepest nesting seen (a scalar is 0, `{}` is 1).
    pub depth: usize,
}

/// Invalid JSON text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    /// Byte offset in the record's text.
    pub offset: usize,
    /// What was expected or found.
    pub message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.message, self.offset)
    }
}

impl std::error::Error for SyntaxError {}

impl Tape {
    /// Tokenizes `text`, which must hold exactly one JSON value (surrounding
    /// whitespace allowed).
    ///
    /// # Errors
    /// [`SyntaxError`] with the byte offset, for anything RFC 8259 refuses
    /// (including control characters in strings and nesting beyond
    /// [`MAX_PARSE_DEPTH`]).
    pub fn parse(&mut self, text: &str) -> Result<(), SyntaxError> {
        self.toks.clear();
        self.depth = 0;
        let mut parser = Parser { bytes: text.as_bytes(), pos: 0, tape: self };
        parser.skip_ws();
        parser.value(0)?;
        parser.skip_ws();
        if parser.pos != parser.bytes.len() {
            return Err(parser.error("unexpected text after the value"));
        }
        Ok(())
    }

    /// Index of the value at RFC 6901 `pointer` (object keys and array
    /// indexes) in this tape of `text`; `Ok(None)` when nothing is there.
    ///
    /// # Errors
    /// [`SyntaxError`] for a key with an invalid `\u` escape.
    pub fn find(&self, text: &str, pointer: &str) -> Result<Option<usize>, SyntaxError> {
        let mut idx = 0;
        if pointer.is_empty() {
            return Ok(Some(idx));
        }
        let Some(rest) = pointer.strip_prefix('/') else { return Ok(None) };
        let mut scratch = String::new();
        for segment in rest.split('/') {
            let segment = segment.replace("~1", "/").replace("~0", "~");
            let mut i = idx + 1;
            match self.toks[idx] {
                Tok::Obj { end, .. } => loop {
                    if i >= end as usize {
                        return Ok(None);
                    }
                    let Tok::Str { start, end: key_end, escaped } = self.toks[i] else { return Ok(None) };
                    if unescape(text, start, key_end, escaped, &mut scratch)? == segment {
                        idx = i + 1;
                        break;
                    }
                    i = self.skip(i + 1);
                },
                Tok::Arr { end, .. } => {
                    let Ok(wanted) = segment.parse::<usize>() else { return Ok(None) };
                    for _ in 0..wanted {
                        if i >= end as usize {
                            break;
                        }
                        i = self.skip(i);
                    }
                    if i >= end as usize {
                        return Ok(None);
                    }
                    idx = i;
                }
                _ => return Ok(None),
            }
        }
        Ok(Some(idx))
    }

    /// Index of the token after the value at `idx`.
    #[inline]
    pub fn skip(&self, idx: usize) -> usize {
        match self.toks[idx] {
            Tok::Obj { end, .. } | Tok::Arr { end, .. } => end as usize,
            _ => idx + 1,
        }
    }
}

struct Parser<'a, 't> {
    bytes: &'a [u8],
    pos: usize,
    tape: &'t mut Tape,
}

impl Parser<'_, '_> {
    fn error(&self, message: &str) -> SyntaxError {
        let found = match self.bytes.get(self.pos) {
            Some(b) if b.is_ascii_graphic() => format!(", found `{}`", *b as char),
            Some(b) => format!(", found byte 0x{b:02x}"),
            None => ", found the end of the text".to_string(),
        };
        SyntaxError { offset: self.pos, message: format!("{message}{found}") }
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<(), SyntaxError> {
        match self.bytes.get(self.pos) {
            Some(b'{') => self.container::<true>(depth + 1),
            Some(b'[') => self.container::<false>(depth + 1),
            Some(b'"') => self.string(),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal(b"true", Tok::Bool(true)),
            Some(b'f') => self.literal(b"false", Tok::Bool(false)),
            Some(b'n') => self.literal(b"null", Tok::Null),
            _ => Err(self.error("expected a JSON value")),
        }
    }

    fn literal(&mut self, word: &[u8], tok: Tok) -> Result<(), SyntaxError> {
        // Fixed-size compares (one integer load each), not a memcmp call.
        let matches = match word.len() {
            4 => {
                self.bytes.get(self.pos..self.pos + 4).and_then(|b| <[u8; 4]>::try_from(b).ok())
                    == <[u8; 4]>::try_from(word).ok()
            }
            _ => {
                self.bytes.get(self.pos..self.pos + 5).and_then(|b| <[u8; 5]>::try_from(b).ok())
                    == <[u8; 5]>::try_from(word).ok()
            }
        };
        if matches {
            self.pos += word.len();
            self.tape.toks.push(tok);
            Ok(())
        } else {
            Err(self.error("expected true, false or null"))
        }
    }

    fn enter(&mut self, depth: usize) -> Result<usize, SyntaxError> {
        if depth > MAX_PARSE_DEPTH {
            return Err(self.error(&format!("nested deeper than {MAX_PARSE_DEPTH} levels")));
        }
        self.tape.depth = self.tape.depth.max(depth);
        let at = self.tape.toks.len();
        // Placeholder, completed when the container closes.
        self.tape.toks.push(Tok::Null);
        Ok(at)
    }

    /// An object (`OBJECT`) or an array at `pos`: its placeholder token,
    /// then its children (key and value pairs, or items), then the token
    /// completed with the index after its last child. A const parameter, so
    /// each kind compiles to its own branch-free loop.
    fn container<const OBJECT: bool>(&mut self, depth: usize) -> Result<(), SyntaxError> {
        let object = OBJECT;
        let (close, what) = if object { (b'}', "`,` or `}` in the object") } else { (b']', "`,` or `]` in the array") };
        let at = self.enter(depth)?;
        let from = self.pos as u32;
        self.pos += 1;
        self.skip_ws();
        if self.bytes.get(self.pos) == Some(&close) {
            self.pos += 1;
        } else {
            loop {
                if object {
                    if self.bytes.get(self.pos) != Some(&b'"') {
                        return Err(self.error("expected a string key"));
                    }
                    self.string()?;
                    self.skip_ws();
                    if self.bytes.get(self.pos) != Some(&b':') {
                        return Err(self.error("expected `:` after the key"));
                    }
                    self.pos += 1;
                    self.skip_ws();
                }
                self.value(depth)?;
                self.skip_ws();
                match self.bytes.get(self.pos) {
                    Some(b',') => {
                        self.pos += 1;
                        self.skip_ws();
                    }
                    Some(b) if *b == close => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.error(&format!("expected {what}"))),
                }
            }
        }
        let (end, to) = (self.tape.toks.len() as u32, self.pos as u32);
        self.tape.toks[at] = if object { Tok::Obj { end, from, to } } else { Tok::Arr { end, from, to } };
        Ok(())
    }

    /// Pushes the string token at `pos` (its opening quote). Inlined, and
    /// pushing rather than returning the token: a `Result<Tok, _>` came
    /// back through the stack and stalled every string on a store forward.
    #[inline(always)]
    fn string(&mut self) -> Result<(), SyntaxError> {
        self.pos += 1;
        let start = self.pos;
        let bytes = self.bytes;
        let mut escaped = false;
        loop {
            // Eight bytes at a time up to the first quote, backslash or raw
            // control character (RFC 8259 §7 refuses the latter): keys and
            // values are mostly short, where a memchr call costs more than
            // the scan itself.
            self.pos = string_run_end(bytes, self.pos);
            match bytes.get(self.pos) {
                None => return Err(self.error("unterminated string")),
                Some(b'"') => break,
                Some(b'\\') => {
                    escaped = true;
                    match bytes.get(self.pos + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.pos += 2,
                        Some(b'u') => {
                            let hex = bytes.get(self.pos + 2..self.pos + 6);
                            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                                return Err(self.error("invalid \\u escape"));
                            }
                            self.pos += 6;
                        }
                        _ => return Err(self.error("invalid escape")),
                    }
                }
                Some(b) if *b < 0x20 => return Err(self.error("control character in a string")),
                Some(_) => self.pos += 1,
            }
        }
        let end = self.pos;
        self.pos += 1;
        self.tape.toks.push(Tok::Str { start: start as u32, end: end as u32, escaped });
        Ok(())
    }

    fn number(&mut self) -> Result<(), SyntaxError> {
        let start = self.pos;
        let bytes = self.bytes;
        let mut pos = self.pos;
        if bytes[pos] == b'-' {
            pos += 1;
        }
        let digits = |pos: &mut usize| {
            let from = *pos;
            while bytes.get(*pos).is_some_and(u8::is_ascii_digit) {
                *pos += 1;
            }
            *pos - from
        };
        let int_start = pos;
        let n = digits(&mut pos);
        if n == 0 || (n > 1 && bytes[int_start] == b'0') {
            self.pos = int_start;
            return Err(self.error("invalid number"));
        }
        let mut int = true;
        if bytes.get(pos) == Some(&b'.') {
            pos += 1;
            int = false;
            if digits(&mut pos) == 0 {
                self.pos = pos;
                return Err(self.error("expected digits after the decimal point"));
            }
        }
        if let Some(b'e' | b'E') = bytes.get(pos) {
            pos += 1;
            int = false;
            if let Some(b'+' | b'-') = bytes.get(pos) {
                pos += 1;
            }
            if digits(&mut pos) == 0 {
                self.pos = pos;
                return Err(self.error("expected digits in the exponent"));
            }
        }
        self.pos = pos;
        self.tape.toks.push(Tok::Num { start: start as u32, end: pos as u32, int });
        Ok(())
    }
}

/// The offset of the first `"`, `\\` or byte below 0x20 at or after `from`
/// in `bytes` (`bytes.len()` when there is none): where a run of plain
/// string content ends. Eight bytes at a time, then byte by byte.
#[inline]
pub fn string_run_end(bytes: &[u8], from: usize) -> usize {
    let mut pos = from;
    while let Some(word) = bytes.get(pos..pos + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()) {
        let special = special_bytes(u64::from_le_bytes(word));
        if special != 0 {
            return pos + (special.trailing_zeros() / 8) as usize;
        }
        pos += 8;
    }
    while let Some(&b) = bytes.get(pos) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            break;
        }
        pos += 1;
    }
    pos
}

/// A word whose lowest flagged byte (bit 7 of that byte set) is the first
/// `"`, `\\` or byte below 0x20 of the eight little-endian bytes in `x`, or 0
/// when there is none. Bytes above the first flagged one may be flagged
/// falsely (a borrow carries upward), so only the lowest flag is meaningful.
#[inline]
fn special_bytes(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    let quote = zero_byte(x ^ (ONES * u64::from(b'"')));
    let backslash = zero_byte(x ^ (ONES * u64::from(b'\\')));
    let control = x.wrapping_sub(ONES * 0x20) & !x & HIGHS;
    quote | backslash | control
}

/// The content of a string token, with escapes resolved (into `scratch`
/// when needed).
///
/// # Errors
/// A [`SyntaxError`] for a lone UTF-16 surrogate in a `\u` escape.
#[inline]
pub fn unescape<'a>(
    text: &'a str,
    start: u32,
    end: u32,
    escaped: bool,
    scratch: &'a mut String,
) -> Result<&'a str, SyntaxError> {
    let raw = &text[start as usize..end as usize];
    if !escaped {
        return Ok(raw);
    }
    resolve_escapes(raw, start, scratch)
}

/// [`unescape`] of a string that has escapes (kept out of line: most
/// strings have none).
fn resolve_escapes<'a>(raw: &str, start: u32, scratch: &'a mut String) -> Result<&'a str, SyntaxError> {
    scratch.clear();
    let bytes = raw.as_bytes();
    let mut i = 0;
    let mut run = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            i += 1;
            continue;
        }
        scratch.push_str(&raw[run..i]);
        let code = bytes[i + 1];
        i += 2;
        match code {
            b'"' => scratch.push('"'),
            b'\\' => scratch.push('\\'),
            b'/' => scratch.push('/'),
            b'b' => scratch.push('\u{8}'),
            b'f' => scratch.push('\u{c}'),
            b'n' => scratch.push('\n'),
            b'r' => scratch.push('\r'),
            b't' => scratch.push('\t'),
            _ => {
                let unit = |at: usize| u32::from_str_radix(&raw[at..at + 4], 16).unwrap_or(0xFFFF_FFFF);
                let high = unit(i);
                i += 4;
                let c = if (0xD800..0xDC00).contains(&high) {
                    if raw.as_bytes().get(i..i + 2) == Some(b"\\u") && i + 6 <= raw.len() {
                        let low = unit(i + 2);
                        i += 6;
                        if (0xDC00..0xE000).contains(&low) {
                            char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
                        } else {
                            None
                        }
                    } else {
                        None
                    }
                } else {
                    char::from_u32(high)
                };
                match c {
                    Some(c) => scratch.push(c),
                    None => {
                        return Err(SyntaxError {
                            offset: start as usize + i,
                            message: "invalid UTF-16 surrogate in a \\u escape".into(),
                        });
                    }
                }
            }
        }
        run = i;
    }
    scratch.push_str(&raw[run..]);
    Ok(scratch.as_str())
}

/// The text of the value at RFC 6901 `pointer` in the document `text`
/// (object keys and array indexes), as the document wrote it: numbers keep
/// their digits, duplicate keys stay. `Ok(None)` when nothing is there.
///
/// # Errors
/// [`SyntaxError`] when `text` is not one JSON document.
pub fn raw_at_pointer<'a>(text: &'a str, pointer: &str) -> Result<Option<(&'a str, Tok, usize)>, SyntaxError> {
    let mut tape = Tape::default();
    tape.parse(text)?;
    let Some(idx) = tape.find(text, pointer)? else { return Ok(None) };
    let tok = tape.toks[idx];
    let (from, to) = match tok {
        Tok::Obj { from, to, .. } | Tok::Arr { from, to, .. } => (from as usize, to as usize),
        Tok::Num { start, end, .. } => (start as usize, end as usize),
        Tok::Str { start, end, .. } => (start as usize - 1, end as usize + 1),
        Tok::Null => return Ok(Some(("null", tok, 0))),
        Tok::Bool(true) => return Ok(Some(("true", tok, 0))),
        Tok::Bool(false) => return Ok(Some(("false", tok, 0))),
    };
    let items = match tok {
        Tok::Arr { end, .. } => {
            let mut i = idx + 1;
            let mut n = 0;
            while i < end as usize {
                i = tape.skip(i);
                n += 1;
            }
            n
        }
        _ => 0,
    };
    Ok(Some((&text[from..to], tok, items)))
}

/// The document `text` with every value a `serde_json::Value` cannot hold
/// — a number beyond `f64`'s range (`1e400`), a string with a lone UTF-16
/// surrogate — replaced by `null`; `None` when there is none. For reading
/// the rest of a document (pointers, totals, cursors) whose records are
/// forwarded as they are.
///
/// # Errors
/// [`SyntaxError`] when `text` is not one JSON document.
pub fn without_unrepresentable(text: &str) -> Result<Option<String>, SyntaxError> {
    let mut tape = Tape::default();
    tape.parse(text)?;
    let mut scratch = String::new();
    let mut spans = Vec::new();
    for tok in &tape.toks {
        match *tok {
            Tok::Num { start, end, int: false }
                if !text[start as usize..end as usize].parse::<f64>().is_ok_and(f64::is_finite) =>
            {
                spans.push((start as usize, end as usize));
            }
            Tok::Num { start, end, int: true } => {
                let digits = &text[start as usize..end as usize];
                if digits.parse::<i64>().is_err()
                    && digits.parse::<u64>().is_err()
                    && !digits.parse::<f64>().is_ok_and(f64::is_finite)
                {
                    spans.push((start as usize, end as usize));
                }
            }
            Tok::Str { start, end, escaped: true } if unescape(text, start, end, true, &mut scratch).is_err() => {
                spans.push((start as usize - 1, end as usize + 1));
            }
            _ => {}
        }
    }
    if spans.is_empty() {
        return Ok(None);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (from, to) in spans {
        out.push_str(&text[at..from]);
        out.push_str("null");
        at = to;
    }
    out.push_str(&text[at..]);
    Ok(Some(out))
}

/// Describes the kind of the token for error messages: `a string`, `an
/// integer`, `a number`, `a boolean`, `null`, `an object`, `an array`.
pub fn kind_name(tok: &Tok) -> &'static str {
    match tok {
        Tok::Null => "null",
        Tok::Bool(_) => "a boolean",
        Tok::Num { int: true, .. } => "an integer",
        Tok::Num { .. } => "a number",
        Tok::Str { .. } => "a string",
        Tok::Obj { .. } => "an object",
        Tok::Arr { .. } => "an array",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tape(text: &str) -> Tape {
        let mut tape = Tape::default();
        tape.parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        tape
    }

    #[test]
    fn tokens_keep_number_text_and_container_ends() {
        let text = r#" {"a": [1, -2.5e3, 18446744073709551616], "b": {"c": null}, "d": "x\"y", "e": true} "#;
        let t = tape(text);
        assert_eq!(t.depth, 2);
        let Tok::Obj { end, .. } = t.toks[0] else { panic!("object") };
        assert_eq!(end as usize, t.toks.len());
        let numbers: Vec<_> = t
            .toks
            .iter()
            .filter_map(|tok| match tok {
                Tok::Num { start, end, int } => Some((&text[*start as usize..*end as usize], *int)),
                _ => None,
            })
            .collect();
        assert_eq!(numbers, [("1", true), ("-2.5e3", false), ("18446744073709551616", true)]);
        let mut scratch = String::new();
        let Tok::Str { start, end, escaped } = t.toks[t.toks.len() - 3] else { panic!("string") };
        assert_eq!(unescape(text, start, end, escaped, &mut scratch).expect("valid"), "x\"y");
    }

    #[test]
    fn escapes_and_surrogate_pairs_resolve() {
        let text = r#""a\n\u00e9\ud83d\ude00\/""#;
        let t = tape(text);
        let Tok::Str { start, end, escaped } = t.toks[0] else { panic!("string") };
        let mut scratch = String::new();
        assert_eq!(unescape(text, start, end, escaped, &mut scratch).expect("valid"), "a\né😀/");
        let text = r#""\ud83d x""#;
        let t = tape(text);
        let Tok::Str { start, end, escaped } = t.toks[0] else { panic!("string") };
        assert!(unescape(text, start, end, escaped, &mut scratch).is_err());
    }

    #[test]
    fn invalid_json_is_refused_with_the_offset() {
        for (text, needle) in [
            ("{\"a\": 1,}", "expected a string key"),
            ("[1 2]", "expected `,` or `]`"),
            ("\"abc", "unterminated string"),
            ("01", "invalid number"),
            ("1.", "expected digits after the decimal point"),
            ("{\"a\": tru}", "expected true, false or null"),
            ("\"a\tb\"", "control character"),
            ("{} x", "unexpected text after the value"),
            ("", "expected a JSON value"),
        ] {
            let err = Tape::default().parse(text).expect_err(text);
            assert!(err.to_string().contains(needle), "{text}: {err}");
        }
        let deep = "[".repeat(MAX_PARSE_DEPTH + 1) + &"]".repeat(MAX_PARSE_DEPTH + 1);
        assert!(Tape::default().parse(&deep).expect_err("too deep").to_string().contains("nested deeper"));
    }

    #[test]
    fn raw_at_pointer_keeps_the_text_and_counts_items() {
        let text = r#"{"meta": {"n": 1}, "data": {"items": [{"v": 123456789012345678901234567890, "p": 12.50, "a": 1, "a": 2}, 3]}}"#;
        let (raw, tok, items) = raw_at_pointer(text, "/data/items").expect("valid").expect("found");
        assert!(matches!(tok, Tok::Arr { .. }));
        assert_eq!(items, 2);
        assert_eq!(raw, r#"[{"v": 123456789012345678901234567890, "p": 12.50, "a": 1, "a": 2}, 3]"#);
        assert_eq!(raw_at_pointer(text, "/data/items/1").expect("valid").map(|(r, ..)| r), Some("3"));
        assert_eq!(raw_at_pointer(text, "/data/none").expect("valid"), None);
        assert_eq!(raw_at_pointer("[1]", "").expect("valid").map(|(r, _, n)| (r, n)), Some(("[1]", 1)));
        assert!(raw_at_pointer("[1", "").is_err());
    }

    #[test]
    fn unrepresentable_values_become_null_for_value_readers() {
        let text = r#"{"items": [{"f": 1e400, "s": "\ud800", "ok": 1.5, "big": 123456789012345678901234567890}], "next": "t2"}"#;
        let cleaned = without_unrepresentable(text).expect("valid").expect("something replaced");
        let value: serde_json::Value = serde_json::from_str(&cleaned).expect("serde_json reads it now");
        assert_eq!(value["next"], "t2");
        assert_eq!(value["items"][0]["f"], serde_json::Value::Null);
        assert_eq!(value["items"][0]["s"], serde_json::Value::Null);
        assert_eq!(value["items"][0]["ok"], 1.5);
        assert_eq!(without_unrepresentable(r#"{"a": 1}"#).expect("valid"), None);
    }

    #[test]
    fn agrees_with_serde_json_on_what_is_valid() {
        for text in ["[]", "{}", "0", "-0", "1e5", "[{\"a\":[[]]}]", "\"\\u0000\"", "[1,[2,[3]]]", "{\"\":\"\"}"] {
            assert!(serde_json::from_str::<serde_json::Value>(text).is_ok());
            tape(text);
        }
    }

    /// The word-at-a-time string scan: a quote, backslash or control
    /// character at every offset of strings of 0 to 24 bytes (so before,
    /// inside and after the eight-byte words, and in the byte-wise tail)
    /// ends or refuses the string exactly where serde_json does.
    #[test]
    fn string_scan_stops_at_the_first_special_byte_at_any_offset() {
        for len in 0..24 {
            for at in 0..=len {
                for special in ["\"", "\\n", "\u{1}", "\u{1f}", "\\u00e9", "é"] {
                    let mut body = "x".repeat(len);
                    body.insert_str(at, special);
                    let text = format!("\"{body}\"");
                    let ours = Tape::default().parse(&text);
                    let theirs = serde_json::from_str::<String>(&text);
                    assert_eq!(ours.is_ok(), theirs.is_ok(), "{text:?}: ours {ours:?}, serde_json {theirs:?}");
                    if let (Err(err), "\u{1}" | "\u{1f}") = (&ours, special) {
                        assert_eq!(err.offset, 1 + at, "{text:?}: {err}");
                    }
                }
            }
        }
        let mut tape = Tape::default();
        tape.parse("\"abcdefgh\\\"ijklmnop\"").expect("an escaped quote after a full word");
        assert_eq!(tape.toks, vec![Tok::Str { start: 1, end: 19, escaped: true }]);
    }
}

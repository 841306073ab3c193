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
    /// Whether some string (key or value) holds a `\u` escape: only such
    /// an escape can spell a lone UTF-16 surrogate, so a record without one
    /// needs no look at its keys' Unicode.
    pub unicode_escapes: bool,
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
        self.unicode_escapes = false;
        let mut parser = Parser { bytes: text.as_bytes(), pos: 0, tape: self };
        parser.skip_ws();
        parser.value(0).map_err(|err| *err)?;
        parser.skip_ws();
        if parser.pos != parser.bytes.len() {
            return Err(*parser.error("unexpected text after the value"));
        }
        Ok(())
    }

    /// Index of the value at RFC 6901 `pointer` (object keys and array
    /// indexes) in this tape of `text`; `Ok(None)` when nothing is there.
    /// Keys with a lone UTF-16 surrogate are passed over (no pointer
    /// segment can name one), so a record holding one does not hide the
    /// rest of the document.
    pub fn find(&self, text: &str, pointer: &str) -> Option<usize> {
        let mut idx = 0;
        if pointer.is_empty() {
            return Some(idx);
        }
        let rest = pointer.strip_prefix('/')?;
        let mut scratch = String::new();
        for segment in rest.split('/') {
            let segment = segment.replace("~1", "/").replace("~0", "~");
            let mut i = idx + 1;
            match self.toks[idx] {
                Tok::Obj { end, .. } => loop {
                    if i >= end as usize {
                        return None;
                    }
                    let Tok::Str { start, end: key_end, escaped } = self.toks[i] else { return None };
                    // A key with a lone surrogate matches no segment (a
                    // pointer is Rust text): passed over, as a record of
                    // the array may hold one.
                    if unescape(text, start, key_end, escaped, &mut scratch).is_ok_and(|key| key == segment) {
                        idx = i + 1;
                        break;
                    }
                    i = self.skip(i + 1);
                },
                Tok::Arr { end, .. } => {
                    let wanted = segment.parse::<usize>().ok()?;
                    for _ in 0..wanted {
                        if i >= end as usize {
                            break;
                        }
                        i = self.skip(i);
                    }
                    if i >= end as usize {
                        return None;
                    }
                    idx = i;
                }
                _ => return None,
            }
        }
        Some(idx)
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
    /// Boxed: the parser's calls return `Result<(), Box<_>>` in a
    /// register; a 32-byte error made every token's return go through
    /// memory.
    #[cold]
    fn error(&self, message: &str) -> Box<SyntaxError> {
        let found = match self.bytes.get(self.pos) {
            Some(b) if b.is_ascii_graphic() => format!(", found `{}`", *b as char),
            Some(b) => format!(", found byte 0x{b:02x}"),
            None => ", found the end of the text".to_string(),
        };
        Box::new(SyntaxError { offset: self.pos, message: format!("{message}{found}") })
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn value(&mut self, depth: usize) -> Result<(), Box<SyntaxError>> {
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

    fn literal(&mut self, word: &[u8], tok: Tok) -> Result<(), Box<SyntaxError>> {
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

    fn enter(&mut self, depth: usize) -> Result<usize, Box<SyntaxError>> {
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
    fn container<const OBJECT: bool>(&mut self, depth: usize) -> Result<(), Box<SyntaxError>> {
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
    fn string(&mut self) -> Result<(), Box<SyntaxError>> {
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
                    match escape_len(bytes, self.pos) {
                        Ok(len) => {
                            self.tape.unicode_escapes |= len == UNICODE_ESCAPE_LEN;
                            self.pos += len;
                        }
                        Err(message) => return Err(self.error(message)),
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

    fn number(&mut self) -> Result<(), Box<SyntaxError>> {
        let start = self.pos;
        match number_end(self.bytes, start) {
            Ok((end, int)) => {
                self.pos = end;
                self.tape.toks.push(Tok::Num { start: start as u32, end: end as u32, int });
                Ok(())
            }
            Err((at, message)) => {
                self.pos = at;
                Err(self.error(message))
            }
        }
    }
}

/// The JSON number (RFC 8259 §6) starting at `start` in `bytes` (a `-` or
/// a digit): the offset one past its last byte, and whether it is an
/// integer literal (no fraction, no exponent). Or, when the text there is
/// not a number, the offset where it goes wrong and what was expected.
#[inline]
pub fn number_end(bytes: &[u8], start: usize) -> Result<(usize, bool), (usize, &'static str)> {
    let mut pos = start + usize::from(bytes.get(start) == Some(&b'-'));
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
        return Err((int_start, "invalid number"));
    }
    let mut int = true;
    if bytes.get(pos) == Some(&b'.') {
        pos += 1;
        int = false;
        if digits(&mut pos) == 0 {
            return Err((pos, "expected digits after the decimal point"));
        }
    }
    if let Some(b'e' | b'E') = bytes.get(pos) {
        pos += 1;
        int = false;
        if let Some(b'+' | b'-') = bytes.get(pos) {
            pos += 1;
        }
        if digits(&mut pos) == 0 {
            return Err((pos, "expected digits in the exponent"));
        }
    }
    Ok((pos, int))
}

/// The length in bytes of a `\\uXXXX` escape.
pub const UNICODE_ESCAPE_LEN: usize = 6;

/// The escape whose backslash is at `at` in `bytes` (RFC 8259 §7): its
/// length in bytes (2, or [`UNICODE_ESCAPE_LEN`] for `\\u` and four hex
/// digits), or what is wrong with it.
#[inline]
pub fn escape_len(bytes: &[u8], at: usize) -> Result<usize, &'static str> {
    match bytes.get(at + 1) {
        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(2),
        Some(b'u') if bytes.get(at + 2..at + 6).is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) => {
            Ok(UNICODE_ESCAPE_LEN)
        }
        Some(b'u') => Err("invalid \\u escape"),
        _ => Err("invalid escape"),
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
                        return Err(SyntaxError { offset: start as usize + i, message: lone_surrogate(high) });
                    }
                }
            }
        }
        run = i;
    }
    scratch.push_str(&raw[run..]);
    Ok(scratch.as_str())
}

/// Why the `\\u` escape of code unit `unit` is refused: a lone UTF-16
/// surrogate; for U+DC80..=U+DCFF also the byte it stands for when a reader
/// wrote a byte that is not UTF-8 so ([`super::utf8::escape_invalid_utf8`]).
fn lone_surrogate(unit: u32) -> String {
    let base = super::utf8::ESCAPED_BYTE_BASE;
    if (base + 0x80..=base + 0xFF).contains(&unit) {
        format!(
            "lone UTF-16 surrogate \\u{unit:04x} in a \\u escape (the vendor's byte 0x{:02x}, not UTF-8, escaped by \
             Request)",
            unit - base
        )
    } else {
        format!("lone UTF-16 surrogate \\u{unit:04x} in a \\u escape")
    }
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
    let Some(idx) = tape.find(text, pointer) else { return Ok(None) };
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

/// Deepest nesting a `serde_json::Value` is read to: serde_json's default
/// recursion limit of 128 refuses the 128th level.
pub const SERDE_JSON_DEPTH: usize = 127;

/// What [`without_unrepresentable`] writes in place of a byte range.
enum Replacement {
    /// `null`, for a value.
    Null,
    /// A key's content (between its quotes) with each lone surrogate
    /// escape turned into `\ufffd`.
    Key(String),
}

/// The document `text` with everything a `serde_json::Value` cannot hold
/// replaced, `None` when there is none: a number beyond `f64`'s range
/// (`1e400`) and a string with a lone UTF-16 surrogate become `null`; an
/// object or array nested deeper than [`SERDE_JSON_DEPTH`] levels becomes
/// `null`; a key with a lone surrogate keeps its other characters and gets
/// U+FFFD for each lone surrogate (`"a\ud800"` -> `"a\ufffd"`; a key
/// cannot be `null`). For reading the rest of a document (pointers,
/// totals, cursors) whose records are forwarded as they are. One pass over
/// the tokens: linear in `text`.
///
/// # Errors
/// [`SyntaxError`] when `text` is not one JSON document (or nests deeper
/// than [`MAX_PARSE_DEPTH`]).
pub fn without_unrepresentable(text: &str) -> Result<Option<String>, SyntaxError> {
    let mut tape = Tape::default();
    tape.parse(text)?;
    let mut scratch = String::new();
    let mut spans: Vec<(usize, usize, Replacement)> = Vec::new();
    // The open containers: the index after their last child, and for an
    // object whether its next child is a key.
    let mut open: Vec<(usize, Option<bool>)> = Vec::new();
    let mut i = 0;
    while i < tape.toks.len() {
        while open.last().is_some_and(|&(end, _)| end == i) {
            open.pop();
        }
        let is_key = match open.last_mut() {
            Some((_, Some(next_is_key))) => std::mem::replace(next_is_key, !*next_is_key),
            _ => false,
        };
        match tape.toks[i] {
            Tok::Obj { end, from, to } | Tok::Arr { end, from, to } => {
                if open.len() >= SERDE_JSON_DEPTH {
                    spans.push((from as usize, to as usize, Replacement::Null));
                    i = end as usize;
                } else {
                    open.push((end as usize, matches!(tape.toks[i], Tok::Obj { .. }).then_some(true)));
                    i += 1;
                }
                continue;
            }
            Tok::Num { start, end, int } if !representable_number(&text[start as usize..end as usize], int) => {
                spans.push((start as usize, end as usize, Replacement::Null));
            }
            Tok::Str { start, end, escaped: true } if unescape(text, start, end, true, &mut scratch).is_err() => {
                let (start, end) = (start as usize, end as usize);
                spans.push(if is_key {
                    (start, end, Replacement::Key(lone_surrogates_replaced(&text[start..end])))
                } else {
                    (start - 1, end + 1, Replacement::Null)
                });
            }
            _ => {}
        }
        i += 1;
    }
    if spans.is_empty() {
        return Ok(None);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (from, to, replacement) in spans {
        out.push_str(&text[at..from]);
        match replacement {
            Replacement::Null => out.push_str("null"),
            Replacement::Key(key) => out.push_str(&key),
        }
        at = to;
    }
    out.push_str(&text[at..]);
    Ok(Some(out))
}

/// Whether serde_json reads the number `digits` (an integer literal when
/// `int`) into a `Value`: within `i64`, `u64` or a finite `f64`.
fn representable_number(digits: &str, int: bool) -> bool {
    (int && (digits.parse::<i64>().is_ok() || digits.parse::<u64>().is_ok()))
        || digits.parse::<f64>().is_ok_and(f64::is_finite)
}

/// A string's raw content (escapes as written) with each `\u` escape of a
/// lone UTF-16 surrogate replaced by `\ufffd`; pairs and every other
/// escape kept as written.
fn lone_surrogates_replaced(raw: &str) -> String {
    let unit = |at: usize| raw.get(at..at + 4).and_then(|hex| u32::from_str_radix(hex, 16).ok());
    let is_escape = |at: usize| raw.as_bytes().get(at..at + 2) == Some(b"\\u".as_slice());
    let mut out = String::with_capacity(raw.len());
    let (mut i, mut run) = (0, 0);
    while let Some(found) = raw.get(i..).and_then(|rest| rest.find('\\')) {
        let at = i + found;
        if !is_escape(at) {
            // `\"`, `\\`, `\n`…: two bytes, kept.
            i = at + 2;
            continue;
        }
        let high = unit(at + 2);
        let paired =
            matches!(high, Some(0xD800..=0xDBFF)) && is_escape(at + 6) && matches!(unit(at + 8), Some(0xDC00..=0xDFFF));
        if paired {
            i = at + 12;
        } else if matches!(high, Some(0xD800..=0xDFFF)) {
            out.push_str(&raw[run..at]);
            out.push_str("\\ufffd");
            i = at + 6;
            run = i;
        } else {
            i = at + 6;
        }
    }
    out.push_str(raw.get(run..).unwrap_or_default());
    out
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
    fn containers_deeper_than_serde_json_reads_become_null_and_the_rest_reads() {
        // A record nested 300 levels (within the tape's 512), beside a
        // shallow one and a cursor after the array.
        let deep = "[".repeat(300) + &"]".repeat(300);
        let text = format!(r#"{{"data": [{{"id": 1, "deep": {deep}}}, {{"id": 2}}], "next": "c2"}}"#);
        assert!(serde_json::from_str::<serde_json::Value>(&text).is_err(), "beyond serde_json's recursion limit");
        let cleaned = without_unrepresentable(&text).expect("valid").expect("something replaced");
        let value: serde_json::Value = serde_json::from_str(&cleaned).expect("serde_json reads it now");
        assert_eq!(value["next"], "c2");
        assert_eq!(value["data"].as_array().map(Vec::len), Some(2), "both records are still there");
        assert_eq!(value["data"][1]["id"], 2);
        // The document is level 1, `data` 2, the record 3 and `deep` 4:
        // levels 4..=127 stay arrays, the 128th is null.
        let mut inner = &value["data"][0]["deep"];
        for _ in 4..=SERDE_JSON_DEPTH {
            assert!(inner.is_array());
            inner = &inner[0];
        }
        assert_eq!(*inner, serde_json::Value::Null);
        // Exactly at serde_json's limit nothing is replaced.
        let at_limit = "[".repeat(SERDE_JSON_DEPTH) + &"]".repeat(SERDE_JSON_DEPTH);
        assert_eq!(without_unrepresentable(&at_limit).expect("valid"), None);
        assert!(serde_json::from_str::<serde_json::Value>(&at_limit).is_ok());
    }

    #[test]
    fn keys_with_lone_surrogates_keep_their_other_characters() {
        let text = r#"{"items": [{"a\ud800b": 1, "\udcff": {"x": 2}, "pair\ud83d\ude00": 3, "q\"\\u": 4}], "n": 5}"#;
        let cleaned = without_unrepresentable(text).expect("valid").expect("something replaced");
        let value: serde_json::Value = serde_json::from_str(&cleaned).expect("serde_json reads it now");
        let record = &value["items"][0];
        assert_eq!(record["a\u{fffd}b"], 1);
        assert_eq!(record["\u{fffd}"]["x"], 2, "the value under a replaced key is kept");
        assert_eq!(record["pair\u{1f600}"], 3, "a surrogate pair is not lone");
        assert_eq!(record["q\"\\u"], 4, "an escaped backslash before `u` is no escape");
        assert_eq!(value["n"], 5);
        // A pointer passes over such a key.
        let found = raw_at_pointer(text, "/n").expect("valid").map(|(raw, ..)| raw);
        assert_eq!(found, Some("5"));
        let found = raw_at_pointer(r#"{"\ud800": 1, "a": [2]}"#, "/a").expect("valid").map(|(raw, ..)| raw);
        assert_eq!(found, Some("[2]"));
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

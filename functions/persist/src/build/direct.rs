//! The direct walk: a record's text read once, straight into its columns'
//! builders, with no tape.
//!
//! The steady state of a daily pipeline is a page whose every record fits
//! the dataset's schema as it is: its keys are the columns', unescaped,
//! each value of its column's own kind. For such a record the tape that
//! [`crate::json::Tape::parse`] builds is read once by
//! [`Col::append_checked`] and thrown away; here the same bytes are
//! tokenized and appended in one pass (the profile in docs/persist-bench.md
//! had the tokenizer at a sixth of a page).
//!
//! The direct walk takes only what it can decide from the bytes at hand,
//! exactly as [`Col::append_checked`] decides it: anything else (an escape,
//! an unknown or repeated key, a value its column does not take, a declared
//! or required column, a JSON error) returns `None` with the builders
//! holding part of the record, and the caller builds the chunk again with
//! the one walk, which routes, quarantines and fails exactly. The tests in
//! `convert::tests` compare the three walks' files byte for byte.

use contracts::TimeUnit;

use super::{Col, Named, readable};
use crate::convert::MAX_NESTING_DEPTH;
use crate::infer::{Ty, Variant, timestamp_micros};
use crate::json::{escape_len, number_end, string_run_end, unescape};

/// Integers of at most this many digits fit every integer and float column
/// (`Kinds::INT`, see `takes_token`); longer ones are the one walk's.
const PLAIN_DIGITS: usize = 15;

/// A record's text, the read position (a byte offset), and a buffer for
/// strings with escapes.
struct Cursor<'a, 's> {
    text: &'a str,
    pos: usize,
    scratch: &'s mut String,
}

impl<'a> Cursor<'a, '_> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    /// Skips RFC 8259 whitespace.
    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.peek() {
            self.pos += 1;
        }
    }

    /// The string at `pos` (its opening quote), escapes checked as the
    /// tokenizer checks them: its content's byte range and whether it has
    /// an escape; the position moves past its closing quote. `None` for a
    /// control character, an invalid escape or no closing quote.
    #[inline(always)]
    fn span(&mut self) -> Option<(usize, usize, bool)> {
        let bytes = self.text.as_bytes();
        let start = self.pos + 1;
        let mut pos = start;
        let mut escaped = false;
        loop {
            pos = string_run_end(bytes, pos);
            match bytes.get(pos)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    pos += escape_len(bytes, pos).ok()?;
                }
                _ => return None,
            }
        }
        self.pos = pos + 1;
        Some((start, pos, escaped))
    }

    /// The string at `pos` when it has no escape (a key: an escaped one is
    /// the one walk's).
    #[inline]
    fn string(&mut self) -> Option<&'a str> {
        let (start, end, escaped) = self.span()?;
        // Both ends are next to an ASCII quote: character boundaries.
        if escaped { None } else { self.text.get(start..end) }
    }

    /// The string at `pos` as a text value: its content (escapes resolved)
    /// and whether it had escapes. `None` also for a lone UTF-16 surrogate,
    /// which no text column holds (the one walk quarantines it).
    #[inline]
    fn text_value(&mut self) -> Option<(&str, bool)> {
        let (start, end, escaped) = self.span()?;
        let value = unescape(self.text, start as u32, end as u32, escaped, self.scratch).ok()?;
        Some((value, escaped))
    }

    /// The number at `pos` (RFC 8259 §6, as the tokenizer reads it): its
    /// text, and whether it is an integer literal (no fraction, no exponent).
    #[inline]
    fn number(&mut self) -> Option<(&'a str, bool)> {
        let start = self.pos;
        let (end, int) = number_end(self.text.as_bytes(), start).ok()?;
        self.pos = end;
        Some((&self.text[start..end], int))
    }

    /// `true`, `false` or `null` at `pos`: `Some(Some(bool))`, `Some(None)`
    /// for null.
    #[inline]
    fn literal(&mut self) -> Option<Option<bool>> {
        let rest = &self.text.as_bytes()[self.pos..];
        let (value, len) = if rest.starts_with(b"null") {
            (None, 4)
        } else if rest.starts_with(b"true") {
            (Some(true), 4)
        } else if rest.starts_with(b"false") {
            (Some(false), 5)
        } else {
            return None;
        };
        self.pos += len;
        Some(value)
    }

    /// Steps into the object or array at `pos` (its opening bracket) and
    /// the whitespace after it: `false`, and past its `close`, when it is
    /// empty.
    #[inline]
    fn open(&mut self, close: u8) -> bool {
        self.pos += 1;
        self.ws();
        let empty = self.peek() == Some(close);
        self.pos += usize::from(empty);
        !empty
    }

    /// After a member or item: `,` (then whitespace) gives `true`, the
    /// container's `close` gives `false`; anything else is not JSON.
    #[inline]
    fn next_member(&mut self, close: u8) -> Option<bool> {
        self.ws();
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                self.ws();
                Some(true)
            }
            Some(b) if b == close => {
                self.pos += 1;
                Some(false)
            }
            _ => None,
        }
    }
}

/// The value of an integer literal of at most [`PLAIN_DIGITS`] digits
/// (what `str::parse::<i64>` gives for it).
#[inline]
fn small_int(text: &str) -> i64 {
    let (negative, digits) = match text.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        all => (false, all),
    };
    let value = digits.iter().fold(0_i64, |n, d| n * 10 + i64::from(d - b'0'));
    if negative { -value } else { value }
}

/// The value of a number literal (RFC 8259 grammar, already checked) with
/// no exponent and at most [`PLAIN_DIGITS`] digits, `None` for any other:
/// its digits as an integer `m` (below 2^53, so exact in an `f64`) divided
/// by `10^f` for its `f` fraction digits (exact too, `f` <= 22): IEEE
/// division rounds the quotient of two exact values correctly, which is
/// the correctly rounded value of the decimal, what `str::parse::<f64>`
/// gives (Clinger's fast path, which the standard parser also takes first,
/// after its general parse of the text). Prices and amounts are such
/// numbers; the profile of a page of them had the standard parser at 3 %.
#[inline]
fn plain_f64(text: &str) -> Option<f64> {
    let (negative, digits) = match text.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        all => (false, all),
    };
    if digits.len() > PLAIN_DIGITS + 1 {
        return None;
    }
    let (mut mantissa, mut fraction, mut point) = (0_u64, 0_usize, false);
    for &d in digits {
        match d {
            b'0'..=b'9' => {
                mantissa = mantissa * 10 + u64::from(d - b'0');
                fraction += usize::from(point);
            }
            b'.' => point = true,
            _ => return None,
        }
    }
    if digits.len() - usize::from(point) > PLAIN_DIGITS {
        return None;
    }
    let value = mantissa as f64 / POWERS_OF_TEN[fraction];
    Some(if negative { -value } else { value })
}

/// `10^k` for `k` up to [`PLAIN_DIGITS`], each exact in an `f64`.
const POWERS_OF_TEN: [f64; PLAIN_DIGITS + 1] =
    [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];

/// Whether an integer literal has at most [`PLAIN_DIGITS`] digits.
#[inline]
fn plain_int(text: &str) -> bool {
    text.len() - usize::from(text.starts_with('-')) <= PLAIN_DIGITS
}

impl Col {
    /// Appends the record `text`, one JSON object, to this struct column in
    /// one pass over its bytes, when every key is one of the column's,
    /// unescaped and named once, and every value is of its column's own
    /// kind; `None` otherwise (see the module docs: the caller throws the
    /// chunk's builders away and builds it with the one walk).
    pub fn append_direct(&mut self, text: &str, scratch: &mut String) -> Option<()> {
        let mut at = Cursor { text, pos: 0, scratch };
        at.ws();
        if at.peek() != Some(b'{') {
            return None;
        }
        self.direct_struct(&mut at, 1)?;
        at.ws();
        (at.pos == text.len()).then_some(())
    }

    /// The object at the cursor (its `{`), `depth` levels deep (the record
    /// is 1), into this struct column: [`Col::append_checked`]'s struct
    /// branch for a record it takes without routing.
    fn direct_struct(&mut self, cur: &mut Cursor<'_, '_>, depth: usize) -> Option<()> {
        let Col::Struct { names, children, variants, required, declared, stamps, order, exact, nulls, rows, pending } =
            self
        else {
            return None;
        };
        super::settle(children, pending);
        if depth > MAX_NESTING_DEPTH {
            return None;
        }
        let exact = *exact;
        let stamp = *rows + 1;
        let mut prev = 0;
        let mut named = Named::default();
        // Children given a value (or a null) by this object: when all
        // were, none is left to null.
        let mut filled = 0;
        let mut more = cur.open(b'}');
        while more {
            if cur.peek() != Some(b'"') {
                return None;
            }
            // The key the previous record had here, matched on the bytes;
            // else the key read, and looked up.
            let hint = order[prev];
            let at = match names.key_at(cur.text.as_bytes(), cur.pos, hint) {
                Some(after) => {
                    cur.pos = after;
                    hint
                }
                None => {
                    let at = names.position(cur.string()?, hint)?;
                    if at != hint {
                        order[prev] = at;
                    }
                    at
                }
            };
            cur.ws();
            if cur.peek() != Some(b':') {
                return None;
            }
            cur.pos += 1;
            cur.ws();
            prev = at + 1;
            let first = cur.peek()?;
            // A declared column's checks are the one walk's.
            if declared[at] || named.repeated(at, names.list.len(), first != b'n') {
                return None;
            }
            let ty = &names.list[at].ty;
            let companion = variants[at][Variant::Text.slot()];
            stamps[at] = stamp;
            filled += 1;
            match (first, ty, &mut children[at]) {
                // An inferred timestamp column's RFC 3339 text, and its
                // `__text` companion when sent with an offset.
                (b'"', Ty::Timestamp, Col::Timestamp(b, TimeUnit::Microsecond, _)) => {
                    let text = cur.string()?;
                    let (micros, zoned) = timestamp_micros(text)?;
                    b.append_value(readable(micros, TimeUnit::Microsecond)?);
                    match companion {
                        Some(to) if zoned => {
                            let Col::Text(b, _) = &mut children[to] else { return None };
                            b.append_value(text);
                            stamps[to] = stamp;
                            filled += 1;
                        }
                        // An offset without the companion: the text as
                        // sent needs a column this table does not have
                        // yet (inference adds it), or it would be lost.
                        None if zoned => return None,
                        _ => {}
                    }
                }
                // A text column's zoned timestamps go to its companion too:
                // the one walk's.
                (b'"', Ty::Text, _) if companion.is_some() => return None,
                (_, _, child) => child.direct_value(ty, exact, cur, depth)?,
            }
            more = cur.next_member(b'}')?;
        }
        // A required column is declared: its checks are the one walk's.
        if !required.is_empty() {
            return None;
        }
        if filled < children.len() {
            for (child, stamp_of) in children.iter_mut().zip(stamps.iter_mut()) {
                if *stamp_of != stamp {
                    child.append_null();
                    *stamp_of = stamp;
                }
            }
        }
        nulls.append_non_null();
        *rows += 1;
        Some(())
    }

    /// The array at the cursor (its `[`) into this list column of an
    /// inferred item type: [`Col::append_checked`]'s list branch for a list
    /// whose every item its column takes.
    fn direct_list(&mut self, cur: &mut Cursor<'_, '_>, depth: usize) -> Option<()> {
        let Col::List { offsets, nulls, item, item_ty: Some(item_ty), exact } = self else { return None };
        if depth > MAX_NESTING_DEPTH {
            return None;
        }
        let mut count = 0;
        let mut more = cur.open(b']');
        while more {
            item.direct_value(item_ty, *exact, cur, depth)?;
            count += 1;
            more = cur.next_member(b']')?;
        }
        let last = *offsets.last().unwrap_or(&0);
        offsets.push(last + count);
        nulls.append_non_null();
        Some(())
    }

    /// One value at the cursor into this column of inferred type `ty`: a
    /// list's item, or a struct's field other than a timestamp (which has
    /// its `__text` companion); `exact` as the list's or the struct's. A
    /// string is taken by a text column unless, with `exact` (a first
    /// page), it is a timestamp as sent, which would type the column
    /// otherwise.
    fn direct_value(&mut self, ty: &Ty, exact: bool, cur: &mut Cursor<'_, '_>, depth: usize) -> Option<()> {
        match (cur.peek()?, ty, self) {
            (b'n' | b't' | b'f', _, col) => match (cur.literal()?, col) {
                (None, col) => col.append_null(),
                (Some(value), Col::Bool(b)) if matches!(ty, Ty::Bool) => b.append_value(value),
                _ => return None,
            },
            (b'"', Ty::Timestamp, Col::Timestamp(b, TimeUnit::Microsecond, _)) => {
                let (micros, zoned) = timestamp_micros(cur.string()?)?;
                if zoned && exact {
                    return None;
                }
                b.append_value(readable(micros, TimeUnit::Microsecond)?);
            }
            (b'"', Ty::Text, Col::Text(b, _)) => {
                let (text, escaped) = cur.text_value()?;
                if exact && !escaped && timestamp_micros(text).is_some() {
                    return None;
                }
                b.append_value(text);
            }
            (b'-' | b'0'..=b'9', _, col) => cur.direct_number(ty, col)?,
            (b'{', Ty::Struct { .. }, col) => col.direct_struct(cur, depth + 1)?,
            (b'[', Ty::List { .. }, col) => col.direct_list(cur, depth + 1)?,
            _ => return None,
        }
        Some(())
    }
}

impl Cursor<'_, '_> {
    /// The number at the cursor into `col` of inferred type `ty`: an
    /// integer column takes an integer literal of at most
    /// [`PLAIN_DIGITS`] digits, a float column that or any other number
    /// whose value is finite.
    #[inline]
    fn direct_number(&mut self, ty: &Ty, col: &mut Col) -> Option<()> {
        let (text, int) = self.number()?;
        match (ty, col) {
            (Ty::Int, Col::Int64(b)) if int && plain_int(text) => b.append_value(small_int(text)),
            (Ty::Float, Col::Float64(b)) if !int || plain_int(text) => b.append_value(match plain_f64(text) {
                Some(value) => value,
                None => super::faithful_f64(text)?,
            }),
            _ => return None,
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_integers_read_as_the_standard_parser_reads_them() {
        for text in ["0", "-0", "7", "-7", "123456789012345", "-123456789012345", "100", "-9"] {
            assert!(plain_int(text), "{text}");
            assert_eq!(small_int(text), text.parse::<i64>().expect("an integer"), "{text}");
        }
        assert!(!plain_int("1234567890123456"));
        assert!(plain_int("-123456789012345"));
    }

    #[test]
    fn plain_decimals_read_as_the_standard_parser_reads_them() {
        let mut texts: Vec<String> =
            ["0", "-0", "0.0", "-0.0", "0.05", "284.05", "-1039.24", "999999999999999", "0.000000000000001", "1.5"]
                .map(String::from)
                .to_vec();
        // Every split of pseudo-random digit strings of 1 to 15 digits
        // into integer and fraction parts, both signs.
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 15 + 1) as usize;
            let digits: String = (0..len).map(|i| char::from(b'0' + ((state >> (i * 4)) % 10) as u8)).collect();
            let at = (state >> 60) as usize % len;
            let int = digits[..at].trim_start_matches('0');
            let int = if int.is_empty() { "0" } else { int };
            let text = if at == 0 { format!("{int}.{digits}") } else { format!("{int}.{}", &digits[at..]) };
            texts.push(text.clone());
            texts.push(format!("-{text}"));
        }
        for text in &texts {
            let expected: f64 = text.parse().expect("a number");
            match plain_f64(text) {
                Some(value) => assert_eq!(value.to_bits(), expected.to_bits(), "{text}"),
                None => assert!(text.trim_start_matches('-').len() > PLAIN_DIGITS, "{text} left to the parser"),
            }
        }
        for other in ["1e5", "1.5E-3", "1234567890123456", "0.1234567890123456"] {
            assert_eq!(plain_f64(other), None, "{other}");
        }
    }

    #[test]
    fn numbers_are_read_by_rfc_8259_grammar() {
        let read = |text: &str| {
            Cursor { text, pos: 0, scratch: &mut String::new() }.number().map(|(t, int)| (t.to_string(), int))
        };
        assert_eq!(read("12,"), Some(("12".into(), true)));
        assert_eq!(read("-0.5e+3}"), Some(("-0.5e+3".into(), false)));
        assert_eq!(read("1E2"), Some(("1E2".into(), false)));
        for bad in ["01", "-", "1.", "1.e2", "1e", "1e+", "-a"] {
            assert_eq!(read(bad), None, "{bad}");
        }
    }

    #[test]
    fn strings_are_read_as_the_tokenizer_reads_them() {
        let mut scratch = String::new();
        let mut value = |text: &str| {
            Cursor { text, pos: 0, scratch: &mut scratch }.text_value().map(|(v, escaped)| (v.to_string(), escaped))
        };
        assert_eq!(value(r#""Nguyễn","#), Some(("Nguyễn".into(), false)));
        assert_eq!(value(r#""""#), Some((String::new(), false)));
        assert_eq!(value(r#""a\"b\\\/\u00e9\ud83d\ude00\n""#), Some(("a\"b\\/é😀\n".into(), true)));
        for bad in ["\"a\tb\"", r#""open"#, r#""\x""#, r#""\u12g4""#, r#""\u12"#, r#""\ud800""#] {
            assert_eq!(value(bad), None, "{bad}");
        }
        let key = |text: &str| Cursor { text, pos: 0, scratch: &mut String::new() }.string().map(str::to_string);
        assert_eq!(key(r#""id":"#), Some("id".into()));
        assert_eq!(key(r#""i\u0064""#), None, "an escaped key is the one walk's");
    }
}

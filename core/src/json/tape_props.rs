//! Property tests of the [`tape`](super::tape) tokenizer against
//! serde_json: on generated JSON (nested containers, strings with every
//! escape form and surrogate pairs, numbers of every form, whitespace, NDJSON
//! lines) the values the tape yields are the ones serde_json reads; on
//! arbitrary or corrupted text it never panics, refuses what serde_json
//! refuses and accepts what serde_json accepts (apart from the two
//! documented differences: it keeps numbers beyond `f64` and lone UTF-16
//! surrogates for [`without_unrepresentable`] to null out, and it nests
//! deeper than serde_json's 128 levels).

use proptest::prelude::*;
use serde_json::{Map, Value};

use super::tape::{MAX_PARSE_DEPTH, SERDE_JSON_DEPTH, Tape, Tok, raw_at_pointer, unescape, without_unrepresentable};

/// Why the tape's value is not one a `serde_json::Value` can hold.
#[derive(Debug)]
enum Unrepresentable {
    /// A string whose `\u` escapes hold a lone UTF-16 surrogate.
    Surrogate,
    /// A number beyond `f64`'s range.
    Number,
}

/// What to make of the values a `serde_json::Value` cannot hold: refuse
/// them, or read them as `null` (what [`without_unrepresentable`] promises).
#[derive(Clone, Copy)]
enum Lenient {
    Refuse,
    Null,
}

/// The value at `idx` of `tape` rebuilt as a `serde_json::Value`, from the
/// tokens alone (keys and strings through [`unescape`], numbers through
/// their text), and the index after it. Asserts the tokens' invariants on
/// the way: container ends, byte ranges, the `int` flag.
fn value_at(
    text: &str,
    tape: &Tape,
    idx: usize,
    lenient: Lenient,
    scratch: &mut String,
) -> Result<(Value, usize), Unrepresentable> {
    let tok = tape.toks[idx];
    match tok {
        Tok::Null => Ok((Value::Null, idx + 1)),
        Tok::Bool(b) => Ok((Value::Bool(b), idx + 1)),
        Tok::Num { start, end, int } => {
            let digits = &text[start as usize..end as usize];
            assert_eq!(int, !digits.contains(['.', 'e', 'E']), "{digits}: int flag");
            match serde_json::from_str::<Value>(digits) {
                Ok(value @ Value::Number(_)) => Ok((value, idx + 1)),
                Ok(other) => panic!("{digits}: a number token read as {other}"),
                Err(_) => match lenient {
                    Lenient::Refuse => Err(Unrepresentable::Number),
                    Lenient::Null => Ok((Value::Null, idx + 1)),
                },
            }
        }
        Tok::Str { start, end, escaped } => {
            assert_eq!(text.as_bytes()[start as usize - 1], b'"');
            assert_eq!(text.as_bytes()[end as usize], b'"');
            assert_eq!(escaped, text[start as usize..end as usize].contains('\\'));
            match (unescape(text, start, end, escaped, scratch), lenient) {
                (Ok(s), _) => Ok((Value::String(s.to_string()), idx + 1)),
                (Err(_), Lenient::Refuse) => Err(Unrepresentable::Surrogate),
                (Err(_), Lenient::Null) => Ok((Value::Null, idx + 1)),
            }
        }
        Tok::Arr { end, from, to } => {
            assert_eq!((text.as_bytes()[from as usize], text.as_bytes()[to as usize - 1]), (b'[', b']'));
            let mut items = Vec::new();
            let mut i = idx + 1;
            while i < end as usize {
                let (item, next) = value_at(text, tape, i, lenient, scratch)?;
                items.push(item);
                i = next;
            }
            assert_eq!(i, end as usize, "the last item ends where the array says");
            assert_eq!(tape.skip(idx), i);
            Ok((Value::Array(items), i))
        }
        Tok::Obj { end, from, to } => {
            assert_eq!((text.as_bytes()[from as usize], text.as_bytes()[to as usize - 1]), (b'{', b'}'));
            let mut map = Map::new();
            let mut i = idx + 1;
            while i < end as usize {
                let Tok::Str { start, end: key_end, escaped } = tape.toks[i] else {
                    panic!("a key that is not a string")
                };
                // Generated keys hold no lone surrogate (for such a key
                // `without_unrepresentable` writes U+FFFD: its unit tests).
                let key = unescape(text, start, key_end, escaped, scratch)
                    .map_err(|_| Unrepresentable::Surrogate)?
                    .to_string();
                let (value, next) = value_at(text, tape, i + 1, lenient, scratch)?;
                // serde_json keeps a repeated key's last value.
                map.insert(key, value);
                i = next;
            }
            assert_eq!(i, end as usize, "the last value ends where the object says");
            assert_eq!(tape.skip(idx), i);
            Ok((Value::Object(map), i))
        }
    }
}

/// The whole document `text` as the tape reads it.
fn tape_value(text: &str, lenient: Lenient) -> Result<Result<Value, Unrepresentable>, super::tape::SyntaxError> {
    let mut tape = Tape::default();
    tape.parse(text)?;
    let mut scratch = String::new();
    Ok(value_at(text, &tape, 0, lenient, &mut scratch).map(|(value, next)| {
        assert_eq!(next, tape.toks.len(), "one value fills the tape");
        value
    }))
}

/// Deepest bracket nesting of `text` outside strings, by a scan that knows
/// nothing of the tape: the oracle for [`Tape::depth`] and for serde_json's
/// recursion limit.
fn bracket_depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escape) = (0usize, 0, false, false);
    for b in text.bytes() {
        match (in_string, escape, b) {
            (true, true, _) => escape = false,
            (true, false, b'\\') => escape = true,
            (true, false, b'"') => in_string = false,
            (true, false, _) => {}
            (false, _, b'"') => in_string = true,
            (false, _, b'[' | b'{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (false, _, b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// JSON whitespace, possibly none.
fn ws() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(vec![' ', '\t', '\n', '\r']), 0..3)
        .prop_map(|chars| chars.into_iter().collect())
}

/// A number of any RFC 8259 form: sign, zero or digits (beyond `u64` too),
/// fraction, exponent with either letter, sign and leading zeros; within
/// `f64`'s range.
fn number() -> impl Strategy<Value = String> {
    "-?(0|[1-9][0-9]{0,24})(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,2})?"
}

/// A character to put in a string: any Unicode scalar, with the ones that
/// need care (quotes, backslashes, controls, non-BMP) made likely.
fn string_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => any::<char>(),
        2 => prop::sample::select(vec!['"', '\\', '/', '\u{0}', '\u{8}', '\t', '\n', '\u{c}', '\r', '\u{1f}', '\u{7f}']),
        2 => prop::sample::select(vec!['é', '\u{ffff}', '\u{d7ff}', '\u{e000}', '\u{10000}', '😀', '\u{10ffff}']),
        3 => prop::char::range('a', 'z'),
    ]
}

/// `c` as JSON string content, written in the form `how` picks: as it is
/// (where allowed), as its short escape, or as `\uXXXX` (a surrogate pair
/// beyond the BMP; hex digits in either case).
fn render_char(c: char, how: u8, out: &mut String) {
    let short = match c {
        '"' => Some("\\\""),
        '\\' => Some("\\\\"),
        '/' => Some("\\/"),
        '\u{8}' => Some("\\b"),
        '\u{c}' => Some("\\f"),
        '\n' => Some("\\n"),
        '\r' => Some("\\r"),
        '\t' => Some("\\t"),
        _ => None,
    };
    let must_escape = matches!(c, '"' | '\\') || (c as u32) < 0x20;
    let mut units = [0u16; 2];
    let hex = |out: &mut String, units: &[u16]| {
        for unit in units {
            if how & 4 == 0 {
                out.push_str(&format!("\\u{unit:04x}"));
            } else {
                out.push_str(&format!("\\u{unit:04X}"));
            }
        }
    };
    match (how % 3, short) {
        (0, _) if !must_escape => out.push(c),
        (1, Some(short)) | (0, Some(short)) => out.push_str(short),
        (2, Some(_)) | (1, None) => hex(out, c.encode_utf16(&mut units)),
        _ if must_escape => hex(out, c.encode_utf16(&mut units)),
        _ => out.push(c),
    }
}

/// A JSON string literal, quotes included.
fn string() -> impl Strategy<Value = String> {
    prop::collection::vec((string_char(), any::<u8>()), 0..12).prop_map(|chars| {
        let mut out = String::from('"');
        for (c, how) in chars {
            render_char(c, how, &mut out);
        }
        out.push('"');
        out
    })
}

/// A value beyond what a `serde_json::Value` holds: a lone or unpaired
/// UTF-16 surrogate, or a number beyond `f64`'s range.
fn unrepresentable() -> impl Strategy<Value = String> {
    prop_oneof![
        "\"[a-z]{0,3}\\\\u[dD][89abAB][0-9a-f]{2}[a-z]{0,3}\"",
        "\"\\\\u[dD][c-fC-F][0-9a-f]{2}\"",
        "\"\\\\ud83d\\\\u00e9\"",
        "-?[1-9](\\.[0-9]{1,3})?[eE]\\+?(3[1-9][0-9]|[4-9][0-9]{2}|[1-9][0-9]{3})",
        "-?1[0-9]{310,330}",
    ]
}

/// A JSON document: scalars, arrays and objects (keys distinct once
/// unescaped, so serde_json's last-wins and the tape's first-wins pointer
/// lookups mean the same) nested a few levels, with whitespace anywhere it
/// is allowed. With `bad`, some leaves are [`unrepresentable`].
fn document(bad: bool) -> impl Strategy<Value = String> {
    let scalar = prop_oneof![
        1 => Just("null".to_string()),
        1 => Just("true".to_string()),
        1 => Just("false".to_string()),
        3 => number(),
        3 => string(),
    ];
    let leaf = if bad { prop_oneof![4 => scalar, 1 => unrepresentable()].boxed() } else { scalar.boxed() };
    let value = leaf.prop_recursive(5, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec((ws(), inner.clone(), ws()), 0..5).prop_map(|items| {
                let items: Vec<String> = items.into_iter().map(|(a, v, b)| format!("{a}{v}{b}")).collect();
                format!("[{}]", items.join(","))
            }),
            prop::collection::vec((ws(), string(), ws(), ws(), inner, ws()), 0..5).prop_map(|members| {
                let mut keys = std::collections::HashSet::new();
                let members: Vec<String> = members
                    .into_iter()
                    .filter(|(_, key, ..)| keys.insert(serde_json::from_str::<String>(key).ok()))
                    .map(|(a, key, b, c, v, d)| format!("{a}{key}{b}:{c}{v}{d}"))
                    .collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    });
    (ws(), value, ws()).prop_map(|(a, v, b)| format!("{a}{v}{b}"))
}

/// Every RFC 6901 pointer into `value`, the root (`""`) first.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                pointers(item, format!("{at}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                pointers(item, format!("{at}/{}", key.replace('~', "~0").replace('/', "~1")), out);
            }
        }
        _ => {}
    }
}

/// `text` read by both: whatever serde_json accepts the tape reads as the
/// same value; whatever the tape refuses serde_json refuses; what only the
/// tape accepts is one of the documented differences. Never panics.
fn agrees_on(text: &str) -> Result<(), TestCaseError> {
    let theirs = serde_json::from_str::<Value>(text);
    match (tape_value(text, Lenient::Refuse), theirs) {
        (Err(err), Ok(theirs)) => {
            return Err(TestCaseError::fail(format!(
                "{text:?}: the tape refuses ({err}) what serde_json reads as {theirs}"
            )));
        }
        (Err(err), Err(_)) => prop_assert!(err.offset <= text.len(), "{text:?}: offset {} past the end", err.offset),
        (Ok(Ok(ours)), Ok(theirs)) => prop_assert_eq!(ours, theirs, "{:?}", text),
        (Ok(Err(why)), Ok(theirs)) => {
            return Err(TestCaseError::fail(format!(
                "{text:?}: the tape's {why:?} value is one serde_json reads as {theirs}"
            )));
        }
        // Both refuse the value: a lone surrogate or a number beyond f64.
        (Ok(Err(_)), Err(_)) => {}
        (Ok(Ok(ours)), Err(err)) => {
            prop_assert!(
                bracket_depth(text) > SERDE_JSON_DEPTH,
                "{text:?}: the tape reads {ours}, serde_json refuses it ({err})"
            )
        }
    }
    Ok(())
}

/// Edits a document the way corruption does: a character deleted,
/// replaced or inserted (from JSON's own punctuation, mostly), or the text
/// cut short.
fn corrupted() -> impl Strategy<Value = String> {
    let edit = (any::<prop::sample::Index>(), 0u8..4, prop::sample::select(b"{}[]:,\"\\-+.eE0 1tfnu\x01x".to_vec()));
    (document(false), prop::collection::vec(edit, 1..4)).prop_map(|(text, edits)| {
        let mut chars: Vec<char> = text.chars().collect();
        for (at, how, byte) in edits {
            if chars.is_empty() {
                chars.push(char::from(byte));
                continue;
            }
            let at = at.index(chars.len());
            match how {
                0 => {
                    chars.remove(at);
                }
                1 => chars[at] = char::from(byte),
                2 => chars.insert(at, char::from(byte)),
                _ => chars.truncate(at),
            }
        }
        chars.into_iter().collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Valid documents: the tape accepts them and yields serde_json's
    /// value, every token's invariants hold, and its depth is the
    /// document's bracket depth.
    #[test]
    fn valid_documents_read_as_serde_json_reads_them(text in document(false)) {
        let theirs: Value = serde_json::from_str(&text).map_err(|e| TestCaseError::fail(format!("generator: {text:?}: {e}")))?;
        let mut tape = Tape::default();
        let parsed = tape.parse(&text);
        prop_assert!(parsed.is_ok(), "{:?}: {:?}", text, parsed);
        prop_assert_eq!(tape.depth, bracket_depth(&text));
        let ours = tape_value(&text, Lenient::Refuse).expect("parsed above");
        prop_assert_eq!(ours.ok(), Some(theirs));
    }

    /// RFC 6901 pointers: the text `raw_at_pointer` finds at every place of
    /// the document is that place's value to serde_json, and an array's
    /// item count is its length; a key that is not there finds nothing.
    #[test]
    fn every_pointer_finds_the_text_of_its_value(text in document(false)) {
        let theirs: Value = serde_json::from_str(&text).expect("valid");
        let mut all = Vec::new();
        pointers(&theirs, String::new(), &mut all);
        for pointer in all {
            let expected = theirs.pointer(&pointer).expect("a pointer into the value");
            let found = raw_at_pointer(&text, &pointer).expect("valid");
            let Some((raw, tok, items)) = found else {
                return Err(TestCaseError::fail(format!("{text:?}: nothing at {pointer:?}")));
            };
            prop_assert_eq!(&serde_json::from_str::<Value>(raw).expect("a value's text"), expected, "{:?} at {:?}", text, pointer);
            prop_assert_eq!(items, if let Tok::Arr { .. } = tok { expected.as_array().map_or(0, Vec::len) } else { 0 });
            prop_assert_eq!(raw_at_pointer(&text, &format!("{pointer}/\u{1}absent")).expect("valid"), None);
        }
        prop_assert_eq!(without_unrepresentable(&text).expect("valid"), None, "nothing to replace in {:?}", text);
    }

    /// NDJSON: each line of a page of documents (no newline inside a
    /// document, `\n` or `\r\n` between them) tokenizes to the value
    /// serde_json's stream reader yields for it, in order.
    #[test]
    fn ndjson_lines_read_as_serde_json_streams_them(
        docs in prop::collection::vec(document(false), 1..6),
        crlf in any::<bool>(),
    ) {
        let lines: Vec<String> = docs.iter().map(|d| d.replace('\n', " ")).collect();
        let text = lines.join(if crlf { "\r\n" } else { "\n" }) + "\n";
        let theirs: Vec<Value> = serde_json::Deserializer::from_str(&text)
            .into_iter::<Value>()
            .collect::<Result<_, _>>()
            .expect("valid NDJSON");
        let ours: Vec<Value> = text
            .split('\n')
            .filter(|line| !line.trim().is_empty())
            .map(|line| tape_value(line, Lenient::Refuse).expect("valid line").expect("representable"))
            .collect();
        prop_assert_eq!(ours, theirs);
    }

    /// Values serde_json cannot hold: the tape reads the document (serde_json
    /// refuses it), and `without_unrepresentable` turns it into one
    /// serde_json reads as the tape's values with those replaced by `null`.
    #[test]
    fn unrepresentable_values_become_null_and_the_rest_agrees(text in document(true)) {
        let lenient = tape_value(&text, Lenient::Null).expect("valid JSON").expect("keys are never unrepresentable here");
        let cleaned = without_unrepresentable(&text).expect("valid JSON");
        let read = serde_json::from_str::<Value>(cleaned.as_deref().unwrap_or(&text));
        prop_assert_eq!(read.ok(), Some(lenient), "{:?} cleaned to {:?}", text, cleaned);
        prop_assert_eq!(cleaned.is_none(), serde_json::from_str::<Value>(&text).is_ok());
    }

    /// Corrupted documents: both accept or both refuse, agreeing on the
    /// value when they accept; the tape never panics.
    #[test]
    fn corrupted_documents_are_refused_as_serde_json_refuses_them(text in corrupted()) {
        agrees_on(&text)?;
    }

    /// Arbitrary bytes (as the lossy UTF-8 text a reader would hand over),
    /// and arbitrary text over JSON's alphabet: no panic, the same verdict.
    #[test]
    fn arbitrary_text_never_panics_and_agrees(
        bytes in prop::collection::vec(any::<u8>(), 0..64),
        jsonish in "[\\[\\]{}:,\" \\\\ntrufalse0-9eE.+-]{0,40}",
    ) {
        agrees_on(&String::from_utf8_lossy(&bytes))?;
        agrees_on(&jsonish)?;
    }
}

/// The one case generated documents cannot reach: nesting between
/// serde_json's limit and the tape's, where only the tape reads on.
#[test]
fn nesting_beyond_serde_json_s_limit_is_the_one_extra_acceptance() {
    for depth in [SERDE_JSON_DEPTH, SERDE_JSON_DEPTH + 1, MAX_PARSE_DEPTH, MAX_PARSE_DEPTH + 1] {
        let text = "[".repeat(depth) + &"]".repeat(depth);
        agrees_on(&text).unwrap_or_else(|e| panic!("depth {depth}: {e}"));
        assert_eq!(Tape::default().parse(&text).is_ok(), depth <= MAX_PARSE_DEPTH, "depth {depth}");
    }
}

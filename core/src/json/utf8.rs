//! Bytes that are not UTF-8 inside a JSON document's strings, made text a
//! JSON reader takes: each such byte `0xNN` becomes the escape `\udcNN`, a
//! lone UTF-16 surrogate (PEP 383's "surrogateescape": the byte can be told
//! back from it). A reader that refuses lone surrogates (Persist
//! quarantines a record holding one, naming it) then refuses that record
//! alone instead of the whole document being unreadable.
//!
//! A byte that is not UTF-8 outside a string (between tokens, in a number)
//! is left to fail the document: there is no value to hold it.

use std::borrow::Cow;

/// A byte that is not UTF-8 where no string holds it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("byte {offset} (0x{byte:02x}) is not UTF-8 and is not inside a JSON string")]
pub struct NotUtf8 {
    /// Its offset in the document, in bytes.
    pub offset: usize,
    /// The byte.
    pub byte: u8,
}

/// First code unit of the escapes [`escape_invalid_utf8`] writes: byte
/// `0xNN` (0x80..=0xFF) becomes `\udcNN`, U+DC80..=U+DCFF.
pub const ESCAPED_BYTE_BASE: u32 = 0xDC00;

/// `document` as text: itself when it is UTF-8 (borrowed, no copy),
/// otherwise a copy in which each byte that is not part of a UTF-8
/// character and sits inside a JSON string becomes the six characters
/// `\udcNN` (`NN` its value in lowercase hex). Also returns how many bytes
/// were escaped. One pass, linear in `document`'s length.
///
/// Strings are told by their quotes, a backslash escaping the next
/// character; a raw line feed ends a string (JSON forbids one inside, and
/// NDJSON lines stay independent).
///
/// # Errors
/// [`NotUtf8`] for the first such byte outside a string, or right after a
/// backslash (no escape starts with it).
pub fn escape_invalid_utf8(document: &[u8]) -> Result<(Cow<'_, str>, usize), NotUtf8> {
    if let Ok(text) = std::str::from_utf8(document) {
        return Ok((Cow::Borrowed(text), 0));
    }
    let mut out = String::with_capacity(document.len() + 64);
    let (mut in_string, mut after_backslash, mut offset, mut escaped) = (false, false, 0, 0);
    for chunk in document.utf8_chunks() {
        let valid = chunk.valid();
        for &b in valid.as_bytes() {
            match (in_string, after_backslash, b) {
                (_, _, b'\n') => (in_string, after_backslash) = (false, false),
                (true, true, _) => after_backslash = false,
                (true, false, b'\\') => after_backslash = true,
                (true, false, b'"') => in_string = false,
                (false, _, b'"') => in_string = true,
                _ => {}
            }
        }
        out.push_str(valid);
        offset += valid.len();
        for &byte in chunk.invalid() {
            if !in_string || after_backslash {
                return Err(NotUtf8 { offset, byte });
            }
            out.push_str(&format!("\\u{:04x}", ESCAPED_BYTE_BASE + u32::from(byte)));
            offset += 1;
            escaped += 1;
        }
    }
    Ok((Cow::Owned(out), escaped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf8_documents_are_borrowed_unchanged() {
        let text = "{\"name\": \"Jos\u{e9}\", \"emoji\": \"\u{1f600}\"}";
        let (out, escaped) = escape_invalid_utf8(text.as_bytes()).expect("UTF-8");
        assert!(matches!(out, Cow::Borrowed(_)));
        assert_eq!((out.as_ref(), escaped), (text, 0));
    }

    #[test]
    fn bytes_inside_strings_become_surrogate_escapes_and_serde_json_refuses_them_as_lone_surrogates() {
        // A Latin-1 `é` (0xe9) in a value, a cut 3-byte character (0xe2 0x82)
        // in a key, a quote and a backslash escape before them in the strings.
        let document = b"[{\"name\": \"Jos\xe9 \\\"Z\\\"\", \"a\xe2\x82b\": 1}, {\"ok\": \"\xc3\xa9\"}]";
        let (out, escaped) = escape_invalid_utf8(document).expect("every bad byte is in a string");
        assert_eq!(out, "[{\"name\": \"Jos\\udce9 \\\"Z\\\"\", \"a\\udce2\\udc82b\": 1}, {\"ok\": \"\u{e9}\"}]");
        assert_eq!(escaped, 3);
        // Still one JSON document of two records; the surrogates are lone.
        let mut tape = crate::json::tape::Tape::default();
        tape.parse(&out).expect("valid JSON");
        assert!(serde_json::from_str::<serde_json::Value>(&out).is_err(), "a lone surrogate is refused");
    }

    #[test]
    fn a_bad_byte_outside_a_string_or_after_a_backslash_is_refused_with_its_offset() {
        assert_eq!(escape_invalid_utf8(b"[1, \xff]"), Err(NotUtf8 { offset: 4, byte: 0xff }));
        assert_eq!(escape_invalid_utf8(b"[\"a\\\xff\"]"), Err(NotUtf8 { offset: 4, byte: 0xff }));
        // A string closed before the byte: outside again.
        assert_eq!(escape_invalid_utf8(b"[\"a\", \x80]"), Err(NotUtf8 { offset: 6, byte: 0x80 }));
    }

    #[test]
    fn ndjson_lines_are_read_independently() {
        // The first line's string is cut by a raw line feed (invalid JSON
        // there); the second line's bad byte still counts as in its string.
        let document = b"{\"a\": \"x\n{\"b\": \"\xff\"}\n";
        let (out, escaped) = escape_invalid_utf8(document).expect("in a string");
        assert_eq!((out.as_ref(), escaped), ("{\"a\": \"x\n{\"b\": \"\\udcff\"}\n", 1));
    }
}

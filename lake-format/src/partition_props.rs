//! Property tests of partition values as key segments: what [`escape`]
//! writes, [`unescape`] reads back.

use crate::partition::{DEFAULT_PARTITION, escape, unescape};
use proptest::prelude::*;

/// Longest escaped value kept whole (bytes); longer ones are cut and end
/// with `~` and 16 hex digits of a digest.
const MAX_KEPT: usize = 128;

/// `~` and 16 lowercase hex digits.
const DIGEST_LEN: usize = 17;

/// A character of a partition value: any Unicode scalar, with the ones the
/// escaping is about (path separators, Hive's escaped set, controls, dots,
/// `%` and hex digits that could pass for an escape, `~`) made likely.
fn value_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => any::<char>(),
        3 => prop::sample::select("/\\\"#%'*:=?{[]^\u{0}\u{1f}\u{7f}".chars().collect::<Vec<_>>()),
        3 => prop::sample::select(".%~2Fe ".chars().collect::<Vec<_>>()),
        1 => prop::sample::select(vec!['ã', '😀', '\u{80}', '\u{2028}']),
        3 => prop::char::range('a', 'z'),
    ]
}

/// Values of up to `max_chars` characters.
fn values(max_chars: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(value_char(), 0..=max_chars).prop_map(|chars| chars.into_iter().collect()),
        // Dots alone, the values S3 and readers take for path steps (few,
        // and as many as the cut's 128 bytes hold once escaped).
        "\\.{1,4}",
        "\\.{40,140}",
    ]
}

/// The output's key-segment guarantees, cut or not.
fn is_a_safe_segment(value: &str, out: &str) -> Result<(), TestCaseError> {
    prop_assert!(!out.is_empty(), "{:?} -> an empty segment", value);
    prop_assert!(!out.contains('/'), "{:?} -> {:?} holds a /", value, out);
    prop_assert!(out != "." && out != "..", "{:?} -> {:?}", value, out);
    prop_assert!(!out.chars().any(|c| c.is_ascii_control()), "{:?} -> {:?} holds a control character", value, out);
    // A value of dots alone is escaped before the cut too (found by this
    // property: 43 dots once became 129 bytes).
    prop_assert!(out.len() <= MAX_KEPT + DIGEST_LEN, "{:?} -> {} bytes", value, out.len());
    Ok(())
}

/// `out` is `value` cut: a whole-character, whole-escape prefix of it, then
/// `~` and the digest.
fn is_cut(value: &str, out: &str) -> Result<(), TestCaseError> {
    prop_assert!(out.len() > DIGEST_LEN, "{:?} -> {:?}", value, out);
    let (kept, digest) = out.split_at(out.len() - DIGEST_LEN);
    prop_assert!(kept.len() <= MAX_KEPT);
    prop_assert!(digest.starts_with('~'), "{:?} -> {:?}", value, out);
    prop_assert!(digest[1..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{:?}", digest);
    prop_assert!(value.starts_with(&unescape(kept)), "{:?} -> {:?}: not a prefix", value, kept);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Up to 42 bytes (at most 126 once every byte is escaped as `%XX`),
    /// nothing is cut: reading the segment back gives the value; the empty
    /// value is Hive's default partition, which reads back as that folder
    /// name (readers take it for null).
    #[test]
    fn short_values_read_back_as_they_were(value in values(42)) {
        let value: String = value.chars().scan(0, |bytes, c| {
            *bytes += c.len_utf8();
            (*bytes <= 42).then_some(c)
        }).collect();
        let out = escape(&value);
        is_a_safe_segment(&value, &out)?;
        if value.is_empty() {
            prop_assert_eq!(&out, DEFAULT_PARTITION);
            prop_assert_eq!(unescape(&out), DEFAULT_PARTITION);
        } else {
            prop_assert_eq!(unescape(&out), value);
        }
    }

    /// At any length the segment is safe, and it either reads back as the
    /// value or is the value cut with a digest; from 129 characters (each
    /// writes at least one byte) it is always cut.
    #[test]
    fn long_values_read_back_or_are_cut_on_a_boundary(value in values(300)) {
        let out = escape(&value);
        is_a_safe_segment(&value, &out)?;
        let must_cut = value.chars().count() > MAX_KEPT;
        if must_cut || (!value.is_empty() && unescape(&out) != value) {
            is_cut(&value, &out)?;
        }
    }

    /// Values that share their first 129 characters (so both are cut at the
    /// same place) still get two folders: the digest is of the whole value.
    #[test]
    fn cut_values_sharing_a_prefix_stay_apart(
        prefix in prop::collection::vec(value_char(), 129..160),
        (a, b) in (values(8), values(8)).prop_filter("two values", |(a, b)| a != b),
    ) {
        let prefix: String = prefix.into_iter().collect();
        let (a, b) = (format!("{prefix}{a}"), format!("{prefix}{b}"));
        prop_assert_ne!(escape(&a), escape(&b));
    }
}

//! Hive partitions: which partition columns a target has, how a value
//! becomes one folder name (`country=BR%2FSP`) and back, and the default
//! partition.
//!
//! The escaping is Hive's (and Spark's, which reads it back): every reader
//! of the lake (Athena, Spark, DuckDB, pyarrow, `lakequery`, the Iceberg
//! committer) undoes it with [`unescape`].

use contracts::{Granularity, Partitioning};
use serde::{Deserialize, Serialize};

/// Hive's folder value for a null or empty partition value; readers show
/// it as null.
pub const DEFAULT_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// Bytes of an escaped value past which it is cut and suffixed with a
/// digest (so two long values sharing a prefix never share a folder).
pub const MAX_VALUE_BYTES: usize = 128;

/// What a partition column holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartitionKind {
    /// `YYYY-MM-DD` days (the run date, or a record field's day).
    Day,
    /// Two-digit hours (`00`..`23`).
    Hour,
    /// A record field's value, escaped by [`escape`].
    Value,
}

impl PartitionKind {
    /// The kind as [`crate::meta::META_PARTITION_KIND`] holds it: `day`,
    /// `hour` or `value`.
    pub fn as_str(self) -> &'static str {
        match self {
            PartitionKind::Day => "day",
            PartitionKind::Hour => "hour",
            PartitionKind::Value => "value",
        }
    }

    /// The kind of a [`crate::meta::META_PARTITION_KIND`] value; `None`
    /// for another text.
    pub fn parse(text: &str) -> Option<PartitionKind> {
        match text {
            "day" => Some(PartitionKind::Day),
            "hour" => Some(PartitionKind::Hour),
            "value" => Some(PartitionKind::Value),
            _ => None,
        }
    }
}

/// The partition columns `partitioning` makes, outermost first, with their
/// kinds: `dt` (day) for the run date; the target's column (day), then
/// `hour` (hour), for an hourly field; the column (value) for a value.
pub fn layout(partitioning: &Partitioning) -> Vec<(String, PartitionKind)> {
    match partitioning {
        Partitioning::RunDate => vec![("dt".into(), PartitionKind::Day)],
        Partitioning::Field { column, granularity, .. } => match granularity {
            Granularity::Day => vec![(column.clone(), PartitionKind::Day)],
            Granularity::Hour => vec![(column.clone(), PartitionKind::Day), ("hour".into(), PartitionKind::Hour)],
            Granularity::Value => vec![(column.clone(), PartitionKind::Value)],
        },
    }
}

/// The names of [`layout`]'s columns, outermost first.
pub fn partition_columns(partitioning: &Partitioning) -> Vec<String> {
    layout(partitioning).into_iter().map(|(name, _)| name).collect()
}

/// A partition value made safe as one S3 key segment, the way Hive (and
/// Spark, which reads it back) escapes path names: control characters and
/// `" # % ' * / : = ? \ { [ ] ^` and DEL become `%XX`; every other
/// character stays as it is, UTF-8 included (`São Paulo` stays `São
/// Paulo`: Spark decodes each `%XX` as one character, so percent-encoded
/// UTF-8 would read as mojibake). `.` and `..` alone are encoded, an empty
/// value is Hive's default partition, and values longer than
/// [`MAX_VALUE_BYTES`] are cut and end with `~` and a 64-bit FNV-1a digest
/// of the whole value (so values sharing a long prefix never share a
/// folder).
pub fn escape(value: &str) -> String {
    if value.is_empty() {
        return DEFAULT_PARTITION.into();
    }
    // `.` and `..` are path segments of their own: a value of dots alone
    // has every dot escaped (before the cut, so it is bounded too).
    let dots_only = value.chars().all(|c| c == '.');
    let escaped = |c: char| dots_only || c.is_ascii_control() || "\"#%'*/:=?\\{[]^".contains(c);
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        let before = out.len();
        if escaped(c) {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
        if out.len() > MAX_VALUE_BYTES {
            // Cut before this character, with a digest of the whole value
            // so that two long values sharing a prefix stay apart.
            out.truncate(before);
            out.push('~');
            out.push_str(&contracts::digest::fnv1a_hex(value.as_bytes()));
            break;
        }
    }
    out
}

/// Undoes Hive's path escaping of a partition folder's value: `%XX` (two
/// hex digits) is the byte `XX` (`a%2Fb` is `a/b`); bytes that do not form
/// UTF-8 are replaced (U+FFFD). The default partition is not special here:
/// see [`value_of`].
pub fn unescape(value: &str) -> String {
    if !value.contains('%') {
        return value.to_string();
    }
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) =
                (bytes.get(i + 1).and_then(|b| hex(*b)), bytes.get(i + 2).and_then(|b| hex(*b)))
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|err| String::from_utf8_lossy(err.as_bytes()).into_owned())
}

/// The value a value partition's folder stands for, as Spark, DuckDB and
/// pyarrow read it: `None` for [`DEFAULT_PARTITION`], else [`unescape`]d.
pub fn value_of(folder_value: &str) -> Option<String> {
    (folder_value != DEFAULT_PARTITION).then(|| unescape(folder_value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_values_are_safe_key_segments() {
        assert_eq!(escape("BR/SP"), "BR%2FSP");
        assert_eq!(escape(".."), "%2E%2E");
        assert_eq!(escape("a b=\u{7}"), "a b%3D%07");
        assert_eq!(escape("São Paulo"), "São Paulo", "UTF-8 stays as it is");
        assert_eq!(escape("007"), "007");
        let long_utf8 = escape(&"ã".repeat(100));
        assert!(long_utf8.len() <= 128 + 17 && long_utf8.starts_with("ãã"), "cut on a character boundary");
        assert_eq!(escape(""), DEFAULT_PARTITION);
        let long = escape(&"x".repeat(500));
        assert!(long.len() <= 128 + 17, "{long}");
        assert_ne!(long, escape(&format!("{}y", "x".repeat(499))), "a digest keeps them apart");
        assert!(!escape(&"/".repeat(100)).contains("%~"), "never cut inside an escape");
        assert!(escape(&".".repeat(43)).len() <= 128 + 17, "dots alone are bounded too");
    }

    #[test]
    fn folder_values_read_back() {
        assert_eq!(unescape("BR%2FSP"), "BR/SP");
        assert_eq!(value_of(DEFAULT_PARTITION), None);
        assert_eq!(value_of("S%C3%A3o"), Some("São".into()));
        assert_eq!(unescape("100%"), "100%", "a lone % stays");
    }

    #[test]
    fn layouts_name_their_columns_outermost_first() {
        let hourly = Partitioning::Field { field: "/ts".into(), granularity: Granularity::Hour, column: "day".into() };
        assert_eq!(layout(&hourly), [("day".into(), PartitionKind::Day), ("hour".into(), PartitionKind::Hour)]);
        assert_eq!(partition_columns(&Partitioning::RunDate), ["dt"]);
        for kind in [PartitionKind::Day, PartitionKind::Hour, PartitionKind::Value] {
            assert_eq!(PartitionKind::parse(kind.as_str()), Some(kind));
        }
    }
}

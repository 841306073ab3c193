//! What a page's records hold ([`Seen`]), and the dataset's table schema
//! ([`Ty`]) that only moves in ways every reader follows.
//!
//! **Inference** walks every record of the page (never a sample) and notes,
//! per field, which kinds of value it holds ([`Kinds`]: booleans, four
//! sizes of integer, floats, strings, objects with the union of their keys,
//! arrays with the merge of their items).
//!
//! **The table schema** gives each field one column with a type fixed once
//! and for all. The values of the page that first holds the field decide
//! it ([`Ty::from_seen`]), by majority, whatever their order: of the
//! groups objects -> `struct`, arrays -> `list`, text -> `string` (or
//! `timestamp(us, UTC)` when at least half of it is RFC 3339 UTC text),
//! numbers -> `float64` when any has a fraction (integers up to 2^53 fit
//! it exactly), else `decimal(38, 0)` when any is beyond `i64`, else
//! `int64`, and booleans -> `bool`, the group holding the most values
//! wins (ties in that order), and the others go to variant columns. So one
//! stray string among a page of integers is a `__string` variant, not the
//! column. An Iceberg dataset then decides a column new to the table from
//! the whole run at its commit (`tributary-iceberg`). A field seen only as `null`, `{}` or `[]`
//! gets no column until a value decides it; the schema keeps the empty
//! containers' shape meanwhile, so the deciding value's page adds the
//! `__json` variant they need (whatever the pages' order, and a replayed
//! page adds nothing). A field seen as both `{}` and `[]` and nothing else
//! is a JSON-text column.
//!
//! A value of another kind than its column's never changes the column:
//! it goes to a **variant column** beside it, named `<column>__<kind>`
//! ([`Variant`]: `__bool`, `__int64`, `__decimal`, `__float64`,
//! `__string`, `__json`), typed once and for all; objects, arrays whose
//! items do not fit the list's item type, and integers beyond 38 digits go
//! to `__json` as their JSON text (a field holding only such integers is a
//! JSON-text column itself). Nothing is rounded (an integer beyond 2^53 never goes into a
//! `float64` column), truncated or dropped. The only changes of an
//! existing column are the ones every reader follows: a struct gains
//! nullable fields, a list's struct items gain fields, and a column with
//! no type yet gets one.
//!
//! Column names are the fields' keys in lowercase snake_case by default
//! ([`column_name`]); the key is kept as the field's `source`.

use std::collections::{HashMap, HashSet};

use contracts::{FieldType, NamePolicy};
use serde::{Deserialize, Serialize};

use crate::json::{Tape, Tok};

/// Kinds of JSON value seen at one place of the records, as a bit set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Kinds(pub u16);

impl Kinds {
    /// `true` / `false`.
    pub const BOOL: u16 = 1;
    /// Integers within ±2^53: exact in an `f64` too.
    pub const INT: u16 = 1 << 1;
    /// Integers within `i64` beyond ±2^53.
    pub const INT64: u16 = 1 << 2;
    /// Integers beyond `i64`, at most 38 digits.
    pub const DECIMAL: u16 = 1 << 3;
    /// Integers beyond 38 digits.
    pub const HUGE: u16 = 1 << 4;
    /// Numbers with a fraction or an exponent.
    pub const FLOAT: u16 = 1 << 5;
    /// Strings.
    pub const STRING: u16 = 1 << 6;
    /// Objects.
    pub const OBJECT: u16 = 1 << 7;
    /// Arrays.
    pub const ARRAY: u16 = 1 << 8;
    /// Strings that are RFC 3339 UTC timestamps written with `Z` ([`timestamp_micros`]): a
    /// string everywhere a string goes, a `timestamp(us, UTC)` column's
    /// value where timestamps are detected.
    pub const TIMESTAMP: u16 = 1 << 9;
    /// Strings that are RFC 3339 timestamps with an offset other than `Z`
    /// ([`timestamp_micros`]): as [`Kinds::TIMESTAMP`], and a
    /// `timestamp(us, UTC)` column keeps their text in its `__text`
    /// variant (the offset is not in the instant).
    pub const ZONED: u16 = 1 << 10;
    /// Every kind, lowest bit first.
    pub const ALL: [u16; 11] = [
        Self::BOOL,
        Self::INT,
        Self::INT64,
        Self::DECIMAL,
        Self::HUGE,
        Self::FLOAT,
        Self::STRING,
        Self::OBJECT,
        Self::ARRAY,
        Self::TIMESTAMP,
        Self::ZONED,
    ];

    /// Whether `kind` is in the set.
    pub fn has(self, kind: u16) -> bool {
        self.0 & kind != 0
    }
}

/// The kind of one integer literal (sign included).
pub fn int_kind(text: &str) -> u16 {
    let digits = text.trim_start_matches('-').len();
    // 10^15 < 2^53: up to 15 digits is exact as a float without a parse.
    if digits <= 15 {
        return Kinds::INT;
    }
    match text.parse::<i64>() {
        Ok(n) if n.unsigned_abs() <= 1 << 53 => Kinds::INT,
        Ok(_) => Kinds::INT64,
        Err(_) if digits <= 38 => Kinds::DECIMAL,
        Err(_) => Kinds::HUGE,
    }
}

/// The kind of the value at `idx` (0 for `null`).
pub fn kind_of(text: &str, tape: &Tape, idx: usize) -> u16 {
    match tape.toks[idx] {
        Tok::Null => 0,
        Tok::Bool(_) => Kinds::BOOL,
        Tok::Num { start, end, int: true } => int_kind(&text[start as usize..end as usize]),
        Tok::Num { .. } => Kinds::FLOAT,
        Tok::Str { start, end, escaped: false } => match timestamp_micros(&text[start as usize..end as usize]) {
            Some((_, false)) => Kinds::TIMESTAMP,
            Some((_, true)) => Kinds::ZONED,
            None => Kinds::STRING,
        },
        Tok::Str { .. } => Kinds::STRING,
        Tok::Obj { .. } => Kinds::OBJECT,
        Tok::Arr { .. } => Kinds::ARRAY,
    }
}

/// `text` as the instant it stands for, in microseconds since the epoch,
/// and whether it was written with an offset rather than `Z`, when it is
/// an RFC 3339 timestamp that a `timestamp(us, UTC)` column holds exactly:
/// `YYYY-MM-DDTHH:MM:SS`, an optional fraction of 1 to 6 digits, then `Z`
/// or an offset `+HH:MM` / `-HH:MM` (hours to 23, minutes to 59), a valid
/// date (chrono's calendar) from year 0001. More than 6 fraction digits
/// (nanoseconds would be rounded), a leap second, a date alone, a
/// date-time without a zone, lowercase `t`/`z`: `None`. An offset's text
/// is not in the instant: the converter keeps it in the `__text` variant.
/// Read at fixed positions, no allocation: every string value of a page is
/// asked.
pub fn timestamp_micros(text: &str) -> Option<(i64, bool)> {
    let b = text.as_bytes();
    // The shape first: most strings fail on their length or first bytes.
    if !(20..=32).contains(&b.len()) || b[4] != b'-' {
        return None;
    }
    #[inline(always)]
    fn digits(b: &[u8], at: usize, len: usize) -> Option<u32> {
        let mut n = 0_u32;
        for &d in b.get(at..at + len)? {
            let digit = d.wrapping_sub(b'0');
            if digit > 9 {
                return None;
            }
            n = n * 10 + u32::from(digit);
        }
        Some(n)
    }
    let num = |at: usize, len: usize| digits(b, at, len);
    let (body, offset_seconds, zoned) = match b[b.len() - 1] {
        b'Z' => (b.len() - 1, 0_i64, false),
        _ if b.len() >= 25 && matches!(b[b.len() - 6], b'+' | b'-') && b[b.len() - 3] == b':' => {
            let at = b.len() - 6;
            let (hours, minutes) = (num(at + 1, 2)?, num(at + 4, 2)?);
            if hours > 23 || minutes > 59 {
                return None;
            }
            let seconds = i64::from(hours * 3600 + minutes * 60);
            (at, if b[at] == b'-' { -seconds } else { seconds }, true)
        }
        _ => return None,
    };
    if !(19..=26).contains(&body) || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let micros = match body {
        19 => 0,
        _ if b[19] == b'.' && body >= 21 => {
            let digits = body - 20;
            num(20, digits)? * 10_u32.pow(6 - digits as u32)
        }
        _ => return None,
    };
    let days = days_from_civil(num(0, 4)?, num(5, 2)?, num(8, 2)?)?;
    let (hours, minutes, seconds) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if hours > 23 || minutes > 59 || seconds > 59 {
        return None;
    }
    let local_seconds = days * 86_400 + i64::from(hours * 3600 + minutes * 60 + seconds);
    Some(((local_seconds - offset_seconds) * 1_000_000 + i64::from(micros), zoned))
}

/// Days from 1970-01-01 to the date `year`-`month`-`day` of the proleptic
/// Gregorian calendar (chrono's), years 1 to 9999; `None` for a date that
/// does not exist (month 13, February 30, February 29 of a common year).
/// Howard Hinnant's `days_from_civil` ("chrono-Compatible Low-Level Date
/// Algorithms"): no table, no allocation, where chrono's `NaiveDate`
/// was a hundredth of a page's conversion.
fn days_from_civil(year: u32, month: u32, day: u32) -> Option<i64> {
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let month_days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if !(1..=9999).contains(&year) || day == 0 || day > month_days {
        return None;
    }
    // Years start in March, so that February's leap day is the last.
    let year = i64::from(year) - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = i64::from((month + 9) % 12);
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    Some(era * 146_097 + day_of_era - 719_468)
}

/// How many non-null values one place held, per group of kinds that one
/// column type takes together: the majority group decides a new column,
/// whatever the values' order ([`Ty::from_seen`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// `true` / `false`.
    pub bools: u32,
    /// Integers of every size and floats (one numeric column takes them).
    pub numbers: u32,
    /// Strings that are not [`Kinds::TIMESTAMP`].
    pub strings: u32,
    /// [`Kinds::TIMESTAMP`] and [`Kinds::ZONED`] strings.
    pub timestamps: u32,
    /// Objects (`{}` included).
    pub objects: u32,
    /// Arrays (`[]` included).
    pub arrays: u32,
}

impl Counts {
    /// Counts one value of `kind` (`0`, null, counts nothing).
    pub fn note(&mut self, kind: u16) {
        match kind {
            Kinds::BOOL => self.bools += 1,
            Kinds::INT | Kinds::INT64 | Kinds::DECIMAL | Kinds::HUGE | Kinds::FLOAT => self.numbers += 1,
            Kinds::STRING => self.strings += 1,
            Kinds::TIMESTAMP | Kinds::ZONED => self.timestamps += 1,
            Kinds::OBJECT => self.objects += 1,
            Kinds::ARRAY => self.arrays += 1,
            _ => {}
        }
    }

    /// Adds another part's counts (saturating: a page holds far fewer).
    pub fn add(&mut self, other: Counts) {
        self.bools = self.bools.saturating_add(other.bools);
        self.numbers = self.numbers.saturating_add(other.numbers);
        self.strings = self.strings.saturating_add(other.strings);
        self.timestamps = self.timestamps.saturating_add(other.timestamps);
        self.objects = self.objects.saturating_add(other.objects);
        self.arrays = self.arrays.saturating_add(other.arrays);
    }
}

/// What one place of a page's records (a field, or a list's items) held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// Kinds of the non-null values.
    pub kinds: Kinds,
    /// How many non-null values of each kind group: the majority decides a
    /// new column ([`Ty::from_seen`]).
    pub counts: Counts,
    /// The objects' keys, in first-seen order, and what each held.
    pub fields: Vec<(String, Seen)>,
    index: HashMap<String, usize>,
    /// What the arrays' items held.
    pub item: Option<Box<Seen>>,
}

impl Seen {
    /// Whether any value was more than `null`, `{}`, `[]` or containers of
    /// those: only then does the place need a column.
    pub fn has_values(&self) -> bool {
        let others = self.kinds.0 & !(Kinds::OBJECT | Kinds::ARRAY);
        others != 0
            || self.fields.iter().any(|(_, seen)| seen.has_values())
            || self.item.as_ref().is_some_and(|item| item.has_values())
    }

    fn field(&mut self, key: &str, hint: usize) -> usize {
        match self.fields.get(hint) {
            Some((name, _)) if same_key(name, key) => return hint,
            _ => {}
        }
        if let Some(at) = self.index.get(key) {
            return *at;
        }
        self.index.insert(key.to_string(), self.fields.len());
        self.fields.push((key.to_string(), Seen::default()));
        self.fields.len() - 1
    }

    /// Notes the value at `idx` of `tape` (whose text is `text`); returns
    /// the index after it.
    pub fn absorb(&mut self, text: &str, tape: &Tape, idx: usize, scratch: &mut String) -> usize {
        match tape.toks[idx] {
            Tok::Obj { end, .. } => {
                self.kinds.0 |= Kinds::OBJECT;
                self.counts.objects += 1;
                let mut i = idx + 1;
                let mut hint = 0;
                while i < end as usize {
                    let Tok::Str { start, end: key_end, escaped } = tape.toks[i] else { break };
                    let key = crate::json::unescape(text, start, key_end, escaped, scratch).unwrap_or("\u{FFFD}");
                    let at = self.field(key, hint);
                    hint = at + 1;
                    i = self.fields[at].1.absorb(text, tape, i + 1, scratch);
                }
                end as usize
            }
            Tok::Arr { end, .. } => {
                self.kinds.0 |= Kinds::ARRAY;
                self.counts.arrays += 1;
                let item = self.item.get_or_insert_with(Box::default);
                let mut i = idx + 1;
                while i < end as usize {
                    i = item.absorb(text, tape, i, scratch);
                }
                end as usize
            }
            Tok::Null => idx + 1,
            // Up to 15 digits is the common integer: no parse.
            Tok::Num { start, end, int: true } if end - start <= 15 => {
                self.kinds.0 |= Kinds::INT;
                self.counts.numbers += 1;
                idx + 1
            }
            _ => {
                let kind = kind_of(text, tape, idx);
                self.kinds.0 |= kind;
                self.counts.note(kind);
                idx + 1
            }
        }
    }

    /// Merges what another part of the page held into this (fields in
    /// this part's order first).
    pub fn join(&mut self, other: Seen) {
        self.kinds.0 |= other.kinds.0;
        self.counts.add(other.counts);
        for (key, seen) in other.fields {
            let at = self.field(&key, usize::MAX);
            self.fields[at].1.join(seen);
        }
        match (&mut self.item, other.item) {
            (Some(mine), Some(theirs)) => mine.join(*theirs),
            (None, Some(theirs)) => self.item = Some(theirs),
            _ => {}
        }
    }
}

/// A variant column: where values of one kind go when their field's column
/// has another type. Its name is `<column>__<suffix>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// Booleans: `bool`.
    Bool,
    /// Integers within `i64`: `int64`.
    Int64,
    /// Integers beyond `i64`, at most 38 digits: `decimal(38, 0)`.
    Decimal,
    /// Floats: `float64`.
    Float64,
    /// Strings: `string`.
    String,
    /// Objects, arrays and integers beyond 38 digits as their JSON text:
    /// `string`.
    Json,
    /// A timestamp column's companion: the text of each timestamp sent
    /// with an offset other than `Z` (`Kinds::ZONED`), whose instant is
    /// in the column: `string`. Not a variant of another kind: the row's
    /// value is in the column too.
    Text,
}

impl Variant {
    /// Every variant.
    pub const ALL: [Variant; 7] = [
        Variant::Bool,
        Variant::Int64,
        Variant::Decimal,
        Variant::Float64,
        Variant::String,
        Variant::Json,
        Variant::Text,
    ];

    /// The variant that takes values of `kind`.
    pub fn for_kind(kind: u16) -> Variant {
        match kind {
            Kinds::BOOL => Variant::Bool,
            Kinds::INT | Kinds::INT64 => Variant::Int64,
            Kinds::DECIMAL => Variant::Decimal,
            Kinds::FLOAT => Variant::Float64,
            Kinds::STRING | Kinds::TIMESTAMP | Kinds::ZONED => Variant::String,
            _ => Variant::Json,
        }
    }

    /// The column name's suffix (after `__`).
    pub fn suffix(self) -> &'static str {
        match self {
            Variant::Bool => lake_format::variant::BOOL,
            Variant::Int64 => lake_format::variant::INT64,
            Variant::Decimal => lake_format::variant::DECIMAL,
            Variant::Float64 => lake_format::variant::FLOAT64,
            Variant::String => lake_format::variant::STRING,
            Variant::Json => lake_format::variant::JSON,
            Variant::Text => lake_format::variant::TEXT,
        }
    }

    /// The variant column's type.
    pub fn ty(self) -> Ty {
        match self {
            Variant::Bool => Ty::Bool,
            Variant::Int64 => Ty::Int,
            Variant::Decimal => Ty::BigInt { digits: 38 },
            Variant::Float64 => Ty::Float,
            Variant::String => Ty::Text,
            Variant::Json => Ty::Json,
            Variant::Text => Ty::Text,
        }
    }

    /// Its position in [`Variant::ALL`].
    pub fn slot(self) -> usize {
        self as usize
    }
}

/// A column type of the table schema (or a declared one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Ty {
    /// No value yet (only `null`, `{}` or `[]`): no column in the files.
    Null,
    /// `bool`.
    Bool,
    /// `int64`.
    Int,
    /// `decimal(38, 0)` (`digits` beyond 38: `string` of the digits).
    BigInt {
        /// Most digits seen.
        digits: u8,
    },
    /// `float64`.
    Float,
    /// `string`.
    Text,
    /// `timestamp(us, UTC)`: RFC 3339 UTC text with `Z` (`timestamp_micros`),
    /// where `target.timestamps` detects them.
    Timestamp,
    /// `string` holding each value's JSON text (variant columns).
    Json,
    /// A list.
    List {
        /// The items' type.
        item: Box<Ty>,
    },
    /// A struct (the record itself is one).
    Struct {
        /// Fields in the order they were added.
        fields: Fields,
    },
    /// A declared column type, enforced rather than inferred.
    Declared {
        /// The declared type.
        declared: FieldType,
        /// Whether a value is required.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        required: bool,
    },
}

/// One field of a struct in the table schema.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    /// The column's name in the files (see [`column_name`]).
    pub name: String,
    /// The records' key it holds.
    pub source: String,
    /// Its type.
    pub ty: Ty,
    /// For a variant column, which kind of value it takes (its base column
    /// is the field of the same `source` without a variant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<Variant>,
}

/// A struct's fields in the order they were added, with hashed indexes of
/// the records' keys and of the names taken, so that every lookup and every
/// added field costs O(1) expected, whatever the number of fields (a record
/// of 200,000 keys is typed in time linear in its keys).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(from = "Vec<FieldRepr>", into = "Vec<Field>")]
pub struct Fields {
    /// The fields: base columns and variant columns. Add only through
    /// `Fields`' own methods (the indexes follow them); a field's `ty` may
    /// be changed in place.
    pub list: Vec<Field>,
    /// Source key -> position of its base field.
    index: HashMap<String, usize>,
    /// Per field: whether its key is written in JSON as itself (no `"`,
    /// `\\` or control character, which a string must escape), so that a
    /// record's raw bytes can be matched against it ([`Fields::key_at`]).
    plain: Vec<bool>,
    /// The indexes read only when a field is added or a writer built
    /// (boxed, so that `Fields`, held by every struct's builder, stays
    /// small; key lookups do not go through the box).
    more: Box<MoreIndexes>,
}

/// [`Fields`]' indexes beyond the key's.
#[derive(Clone, Debug, Default)]
struct MoreIndexes {
    /// (source key, variant) -> position of that variant column.
    variants: HashMap<(String, Variant), usize>,
    /// Every field's name in ASCII lowercase (names are unique that way).
    taken: HashSet<String>,
    /// Name wanted -> the first `_<n>` suffix not yet tried for it: the
    /// suffixes below were taken when it was last asked for, and names are
    /// never removed.
    next_suffix: HashMap<String, usize>,
}

/// A field as stored: this version's, or `[name, type]` as schemas were
/// kept before variant columns (the name is then also the source).
#[derive(Deserialize)]
#[serde(untagged)]
enum FieldRepr {
    Full(Field),
    Pair(String, Ty),
}

impl PartialEq for Fields {
    fn eq(&self, other: &Self) -> bool {
        self.list == other.list
    }
}

impl Eq for Fields {}

impl From<Vec<FieldRepr>> for Fields {
    fn from(list: Vec<FieldRepr>) -> Self {
        let list = list
            .into_iter()
            .map(|repr| match repr {
                FieldRepr::Full(field) => field,
                FieldRepr::Pair(name, ty) => Field { source: name.clone(), name, ty, variant: None },
            })
            .collect();
        Fields::from_list(list)
    }
}

impl From<Fields> for Vec<Field> {
    fn from(fields: Fields) -> Self {
        fields.list
    }
}

impl Fields {
    /// Fields from a list (the indexes are rebuilt). Where a list holds a
    /// key's base field twice, lookups find the last; a variant twice, the
    /// first (as the scans before the indexes did).
    pub fn from_list(list: Vec<Field>) -> Fields {
        let mut fields = Fields { list: Vec::with_capacity(list.len()), ..Fields::default() };
        for field in list {
            fields.push(field);
        }
        fields
    }

    /// Appends `field` and indexes it; returns its position.
    fn push(&mut self, field: Field) -> usize {
        let at = self.list.len();
        match field.variant {
            None => {
                self.index.insert(field.source.clone(), at);
            }
            Some(variant) => {
                self.more.variants.entry((field.source.clone(), variant)).or_insert(at);
            }
        }
        self.more.taken.insert(field.name.to_ascii_lowercase());
        self.plain.push(plain_key(&field.source));
        self.list.push(field);
        at
    }

    /// Whether the record text `bytes` has, at `at` (a key's opening
    /// quote), the key of the base field `hint` as sent, unescaped, with
    /// its closing quote: the offset after that quote. What
    /// [`Fields::position`] finds for the key read there, without reading
    /// it first: a key whose JSON text is itself (`plain`) and whose bytes
    /// follow the quote, then a quote, is that string. `None` when not (the
    /// key may still be another field's, or escaped).
    #[inline(always)]
    pub fn key_at(&self, bytes: &[u8], at: usize, hint: usize) -> Option<usize> {
        let field = self.list.get(hint)?;
        if field.variant.is_some() || !self.plain[hint] {
            return None;
        }
        let key = field.source.as_bytes();
        let end = at + 1 + key.len();
        let sent = bytes.get(at + 1..end)?;
        (bytes.get(end) == Some(&b'"') && same_bytes(sent, key)).then_some(end + 1)
    }

    /// Position of the base field of key `source`, checking `hint` first
    /// (records usually list their keys in the same order).
    #[inline(always)]
    pub fn position(&self, source: &str, hint: usize) -> Option<usize> {
        match self.list.get(hint) {
            Some(f) if f.variant.is_none() && same_key(&f.source, source) => Some(hint),
            _ => self.index.get(source).copied(),
        }
    }

    /// Position of the variant column of `source` for `variant`.
    pub fn variant_position(&self, source: &str, variant: Variant) -> Option<usize> {
        // A borrowed tuple key cannot be looked up without an owned one;
        // variant lookups are per column (building a writer), not per value.
        self.more.variants.get(&(source.to_string(), variant)).copied()
    }

    /// A name for a new column, `wanted` unless taken (here or in
    /// `reserved`, case-insensitively: Athena and Spark fold case), else
    /// `wanted_2`, `wanted_3`, … (the first free one).
    fn unique(&mut self, wanted: String, reserved: &[String]) -> String {
        let taken = &self.more.taken;
        let free = |name: &str| {
            !taken.contains(&name.to_ascii_lowercase()) && !reserved.iter().any(|r| r.eq_ignore_ascii_case(name))
        };
        if free(&wanted) {
            return wanted;
        }
        let first = self.more.next_suffix.get(&wanted).copied().unwrap_or(2);
        let Some((n, name)) = (first..).map(|n| (n, format!("{wanted}_{n}"))).find(|(_, name)| free(name)) else {
            return wanted;
        };
        self.more.next_suffix.insert(wanted, n + 1);
        name
    }

    /// Adds a base field for key `source`; returns its position.
    fn add(&mut self, source: &str, ty: Ty, names: Naming<'_>) -> usize {
        let name = self.unique(column_name(source, names.policy), names.reserved);
        self.push(Field { name, source: source.to_string(), ty, variant: None })
    }

    /// The declared field that record key `key` fills although the spec
    /// declared it by its column name, not by the key as sent (`created_at`
    /// for `createdAt`): a base field of a declared type whose name is
    /// `key`'s column name and whose source is still that name (no key
    /// took it yet), when `exact_key_present` says no key of that very
    /// name is in the page (then that key fills it, as declared).
    fn declared_for(&self, key: &str, names: Naming<'_>, exact_key_present: impl Fn(&str) -> bool) -> Option<usize> {
        let wanted = column_name(key, names.policy);
        self.list.iter().position(|f| {
            f.variant.is_none()
                && matches!(f.ty, Ty::Declared { .. })
                && f.name == wanted
                && f.source == f.name
                && f.source != key
                && !exact_key_present(&f.source)
        })
    }

    /// Makes record key `key` the source of the field at `at` (a declared
    /// field found by [`Fields::declared_for`]).
    fn take_source(&mut self, at: usize, key: &str) {
        let before = std::mem::replace(&mut self.list[at].source, key.to_string());
        self.plain[at] = plain_key(key);
        if self.index.get(&before) == Some(&at) {
            self.index.remove(&before);
        }
        self.index.insert(key.to_string(), at);
    }

    /// Position of the declared base field named `name` as a column.
    fn declared_named(&self, name: &str) -> Option<usize> {
        self.list.iter().position(|f| f.variant.is_none() && matches!(f.ty, Ty::Declared { .. }) && f.name == name)
    }

    /// Adds the variant column of the field at `base` unless it exists.
    fn add_variant(&mut self, base: usize, variant: Variant, names: Naming<'_>) {
        let source = self.list[base].source.clone();
        if self.variant_position(&source, variant).is_some() {
            return;
        }
        let name = self.unique(format!("{}__{}", self.list[base].name, variant.suffix()), names.reserved);
        self.push(Field { name, source, ty: variant.ty(), variant: Some(variant) });
    }
}

/// How new columns are named: the policy, and names already taken at this
/// level (the root's lineage and partition columns).
#[derive(Clone, Copy, Debug)]
pub struct Naming<'a> {
    /// snake_case or verbatim.
    pub policy: NamePolicy,
    /// Names no field may take here.
    pub reserved: &'a [String],
    /// Whether RFC 3339 UTC text decides a `timestamp(us, UTC)` column
    /// (`target.timestamps: detect`).
    pub timestamps: bool,
}

impl Naming<'_> {
    fn nested(self) -> Naming<'static> {
        Naming { policy: self.policy, reserved: &[], timestamps: self.timestamps }
    }
}

/// Longest column name kept whole; longer names are cut and end with a
/// digest. Glue's `Column.Name` takes at most 255 characters (AWS Glue API,
/// `Column` structure).
pub const MAX_COLUMN_NAME: usize = 128;

/// The column name for a record key under `policy`.
///
/// snake_case: Latin letters lose their accents (`preço` -> `preco`), a
/// word boundary in camelCase or PascalCase becomes `_` (`createdAt` ->
/// `created_at`, `HTTPStatus` -> `http_status`), every run of other
/// characters becomes one `_` (`unit price ($)` -> `unit_price`), the
/// result is lowercase, without `_` at either end, starts with `_` when it
/// would start with a digit, and is `_` when nothing is left. Athena, Glue,
/// Spark and DuckDB all take such names without quoting. Verbatim: the key
/// as sent. Either way, a name longer than [`MAX_COLUMN_NAME`] bytes is cut
/// and ends with `_` and 8 hex digits of a digest of the whole key.
pub fn column_name(key: &str, policy: NamePolicy) -> String {
    let name = match policy {
        NamePolicy::Verbatim => key.to_string(),
        NamePolicy::SnakeCase => snake_case(key),
    };
    if name.len() <= MAX_COLUMN_NAME {
        return name;
    }
    let digest = key.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    let mut cut = MAX_COLUMN_NAME - 9;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}_{digest:08x}", &name[..cut])
}

fn snake_case(key: &str) -> String {
    let chars: Vec<char> = key.chars().map(fold_accent).collect();
    let mut out = String::with_capacity(key.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_alphanumeric() {
            if c.is_ascii_uppercase() && i > 0 {
                let prev = chars[i - 1];
                let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
                if prev.is_ascii_lowercase() || prev.is_ascii_digit() || (prev.is_ascii_uppercase() && next_lower) {
                    out.push('_');
                }
            }
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let trimmed = out.trim_matches('_');
    if trimmed.is_empty() {
        return "_".into();
    }
    let mut name = trimmed.replace("__", "_");
    while name.contains("__") {
        name = name.replace("__", "_");
    }
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    name
}

/// A Latin letter without its accent (Latin-1 Supplement and Latin
/// Extended-A), other characters as they are.
fn fold_accent(c: char) -> char {
    const FROM: &str = "ÀÁÂÃÄÅàáâãäåÇçÈÉÊËèéêëÌÍÎÏìíîïÑñÒÓÔÕÖØòóôõöøÙÚÛÜùúûüÝýÿĀāĂăĄąĆćĈĉĊċČčĎďĒēĔĕĖėĘęĚěĜĝĞğĠġĢģĤĥĨĩĪīĬĭĮįİıĴĵĶķĹĺĻļĽľŁłŃńŅņŇňŌōŎŏŐőŔŕŖŗŘřŚśŜŝŞşŠšŢţŤťŨũŪūŬŭŮůŰűŲųŴŵŶŷŸŹźŻżŽž";
    const TO: &str = "AAAAAAaaaaaaCcEEEEeeeeIIIIiiiiNnOOOOOOooooooUUUUuuuuYyyAaAaAaCcCcCcCcDdEeEeEeEeEeGgGgGgGgHhIiIiIiIiIiJjKkLlLlLlLlNnNnNnOoOoOoRrRrRrSsSsSsSsTtTtUuUuUuUuUuUuWwYyYZzZzZz";
    if c.is_ascii() {
        return c;
    }
    FROM.chars().position(|f| f == c).and_then(|at| TO.chars().nth(at)).unwrap_or(c)
}

/// `a == b` for field names, without a `memcmp` call: names are short, and
/// a call per field per record (in inference, check and build) was a tenth
/// of the converter's time on the bench pages.
#[inline]
fn same_key(a: &str, b: &str) -> bool {
    same_bytes(a.as_bytes(), b.as_bytes())
}

/// [`same_key`] of byte strings.
#[inline(always)]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let word =
        |s: &[u8], at: usize| s.get(at..at + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()).map(u64::from_le_bytes);
    match a.len() {
        // Two overlapping words cover 8 to 16 bytes.
        8..=16 => word(a, 0) == word(b, 0) && word(a, a.len() - 8) == word(b, b.len() - 8),
        0..8 => a.iter().zip(b).all(|(x, y)| x == y),
        _ => a == b,
    }
}

/// Whether `key` is written in JSON as itself: no `"`, `\\` or byte below
/// 0x20, which RFC 8259 §7 has a string escape.
fn plain_key(key: &str) -> bool {
    crate::json::string_run_end(key.as_bytes(), 0) == key.len()
}

impl Ty {
    /// The type a place with no column yet gets from what it held (see the
    /// module docs for the order); `Ty::Null` while it held nothing but
    /// `null`. A place that held only empty containers keeps their shape
    /// without a column (an empty struct for `{}`, a list of no typed item
    /// for `[]`), so that the value that later decides it knows a container
    /// was there (a `__json` variant takes it). Both `{}` and `[]` and no
    /// other value: a JSON-text column, which keeps each as sent.
    pub fn from_seen(seen: &Seen, names: Naming<'_>) -> Ty {
        Ty::decide(seen, 0, names)
    }

    /// [`Ty::from_seen`] for a place that also held values of the kinds
    /// `held` before (a place with no column yet held empty containers).
    fn decide(seen: &Seen, held: u16, names: Naming<'_>) -> Ty {
        let kinds = Kinds(seen.kinds.0 | held);
        let c = seen.counts;
        // The group most values fit, ties to the earlier one: objects,
        // arrays, text, numbers, booleans (a place held once as an empty
        // container, and values now, counts the container as held).
        let mut groups = [
            (c.objects, Kinds::OBJECT),
            (c.arrays, Kinds::ARRAY),
            (c.strings + c.timestamps, Kinds::STRING | Kinds::TIMESTAMP | Kinds::ZONED),
            (c.numbers, Kinds::INT | Kinds::INT64 | Kinds::DECIMAL | Kinds::HUGE | Kinds::FLOAT),
            (c.bools, Kinds::BOOL),
        ];
        groups.sort_by_key(|(count, _)| std::cmp::Reverse(*count));
        for (_, group) in groups {
            if !kinds.has(group) {
                continue;
            }
            match group {
                Kinds::OBJECT => {
                    if seen.fields.iter().any(|(_, s)| s.has_values()) {
                        let mut ty = Ty::Struct { fields: Fields::default() };
                        ty.evolve(seen, names);
                        return ty;
                    }
                }
                Kinds::ARRAY => {
                    if let Some(item) = seen.item.as_deref().filter(|item| item.has_values()) {
                        return Ty::List { item: Box::new(Ty::from_seen(item, names.nested())) };
                    }
                }
                Kinds::BOOL => return Ty::Bool,
                _ if group & Kinds::STRING != 0 => {
                    let stamps =
                        kinds.has(Kinds::TIMESTAMP | Kinds::ZONED) && names.timestamps && c.timestamps >= c.strings;
                    return if stamps { Ty::Timestamp } else { Ty::Text };
                }
                _ => {
                    if kinds.has(Kinds::FLOAT) {
                        return Ty::Float;
                    } else if kinds.has(Kinds::DECIMAL) {
                        return Ty::BigInt { digits: 38 };
                    } else if kinds.has(Kinds::INT | Kinds::INT64) {
                        return Ty::Int;
                    } else if kinds.has(Kinds::HUGE) {
                        return Ty::Json;
                    }
                }
            }
        }
        if kinds.has(Kinds::OBJECT) && kinds.has(Kinds::ARRAY) {
            Ty::Json
        } else if kinds.has(Kinds::OBJECT) {
            let mut ty = Ty::Struct { fields: Fields::default() };
            ty.evolve(seen, names);
            ty
        } else if kinds.has(Kinds::ARRAY) {
            let item = seen.item.as_deref().map_or(Ty::Null, |item| Ty::from_seen(item, names.nested()));
            Ty::List { item: Box::new(item) }
        } else {
            Ty::Null
        }
    }

    /// Whether the type has a column in the files: it is decided, and a
    /// struct has at least one such field.
    pub fn is_physical(&self) -> bool {
        match self {
            Ty::Null => false,
            Ty::Struct { fields } => fields.list.iter().any(|f| f.ty.is_physical()),
            Ty::List { item } => item.is_physical(),
            _ => true,
        }
    }

    /// Whether a value of `kind` goes into a column of this type as it is
    /// (objects into a struct and arrays into a list, their contents
    /// checked further). A declared column takes every kind here; its own
    /// rules quarantine what it cannot hold.
    pub fn takes(&self, kind: u16) -> bool {
        match self {
            Ty::Null => false,
            Ty::Bool => kind == Kinds::BOOL,
            Ty::Int => matches!(kind, Kinds::INT | Kinds::INT64),
            Ty::BigInt { digits } if *digits <= 38 => matches!(kind, Kinds::INT | Kinds::INT64 | Kinds::DECIMAL),
            Ty::BigInt { .. } => matches!(kind, Kinds::INT | Kinds::INT64 | Kinds::DECIMAL | Kinds::HUGE),
            Ty::Float => matches!(kind, Kinds::INT | Kinds::FLOAT),
            Ty::Text => matches!(kind, Kinds::STRING | Kinds::TIMESTAMP | Kinds::ZONED),
            Ty::Timestamp => matches!(kind, Kinds::TIMESTAMP | Kinds::ZONED),
            Ty::Json | Ty::Declared { .. } => true,
            Ty::List { .. } => kind == Kinds::ARRAY,
            Ty::Struct { .. } => kind == Kinds::OBJECT,
        }
    }

    /// Moves this (a struct's field, or the root) to take what `seen`
    /// held, in the ways readers follow: a type for a place that had none,
    /// new nullable struct fields, and variant columns for values of other
    /// kinds. Returns the variants this place itself needs (its parent
    /// struct adds them as sibling columns).
    pub fn evolve(&mut self, seen: &Seen, names: Naming<'_>) -> Vec<Variant> {
        if !self.is_physical() && !matches!(self, Ty::Struct { .. } | Ty::List { .. }) {
            *self = Ty::from_seen(seen, names);
            if !self.is_physical() {
                return Vec::new();
            }
        }
        let mut needed = Vec::new();
        match self {
            Ty::Declared { .. } => return needed,
            Ty::Struct { fields } => {
                let in_page = |key: &str| seen.index.contains_key(key);
                for (key, field_seen) in &seen.fields {
                    let at = match fields.position(key, usize::MAX) {
                        Some(at) => at,
                        None => match fields.declared_for(key, names, in_page) {
                            Some(at) => {
                                fields.take_source(at, key);
                                at
                            }
                            None => fields.add(key, Ty::Null, names),
                        },
                    };
                    let variants = fields.list[at].ty.evolve(field_seen, names.nested());
                    for variant in variants {
                        fields.add_variant(at, variant, names);
                    }
                }
            }
            Ty::List { item } => {
                if let Some(item_seen) = seen.item.as_deref() {
                    // Items of another kind cannot sit beside the items: the
                    // whole list goes to the `__json` variant.
                    if !item.evolve(item_seen, names.nested()).is_empty() {
                        needed.push(Variant::Json);
                    }
                }
            }
            _ => {}
        }
        let mut kinds = seen.kinds.0;
        if !self.is_physical() {
            // A place with no column yet that held an empty container, and
            // values of other kinds now: the values decide it, and the
            // container held before goes to the variant of its kind.
            let held = match self {
                Ty::Struct { .. } => Kinds::OBJECT,
                Ty::List { .. } => Kinds::ARRAY,
                _ => 0,
            };
            if held != 0 && (seen.kinds.0 & !held != 0 || seen.has_values()) {
                let decided = Ty::decide(seen, held, names);
                if decided.is_physical() {
                    *self = decided;
                    kinds |= held;
                }
            }
        }
        for kind in Kinds::ALL {
            if kinds & kind != 0 && !self.takes(kind) && self.is_physical() {
                let variant = Variant::for_kind(kind);
                if !needed.contains(&variant) {
                    needed.push(variant);
                }
            }
        }
        if kinds & Kinds::ZONED != 0 && matches!(self, Ty::Timestamp) {
            // The instant goes to the column, the text as sent beside it.
            needed.push(Variant::Text);
        }
        needed
    }

    /// Columns this type holds, as `MAX_COLUMNS` counts them: every field
    /// of a struct at any depth, variant columns and fields with no type
    /// yet included (the table schema keeps each one), plus the fields of a
    /// list's struct items. A field with no column yet counts one, whatever
    /// empty containers it held (the value that decides it may replace
    /// them). Scalars hold none themselves; the record (the root struct)
    /// holds the dataset's columns.
    pub fn columns(&self) -> usize {
        match self {
            Ty::Struct { fields } => {
                fields.list.iter().map(|f| 1 + if f.ty.is_physical() { f.ty.columns() } else { 0 }).sum()
            }
            Ty::List { item } => item.columns(),
            _ => 0,
        }
    }

    /// Whether every field has a type: then a page can be written in one
    /// pass without inference.
    pub fn is_settled(&self) -> bool {
        matches!(self, Ty::Struct { fields } if fields.list.iter().any(|f| f.ty.is_physical()))
    }

    /// Applies the declared columns: a new declared column is added; a
    /// declared column whose type the spec changed keeps the dataset's type
    /// and the change is pushed to `conflicts` (the files already have
    /// it); a new `required` applies at once.
    pub fn declare(&mut self, declared: &[contracts::DeclaredField], names: Naming<'_>, conflicts: &mut Vec<String>) {
        let Ty::Struct { fields } = self else { return };
        for column in declared {
            let now = Ty::Declared { declared: column.data_type.clone(), required: column.required };
            // By the key as sent, else the declared field a key took by its
            // column name in an earlier page (`Fields::declared_for`).
            let at = fields
                .position(&column.name, usize::MAX)
                .or_else(|| fields.declared_named(&column_name(&column.name, names.policy)));
            match at {
                None => {
                    fields.add(&column.name, now, names);
                }
                Some(at) => match &fields.list[at].ty {
                    Ty::Declared { declared: was, .. } if *was != column.data_type => conflicts.push(format!(
                        "/{}: the dataset declares {was}, the spec now declares {} (the dataset keeps {was}; write \
                         to a new dataset to change a column's type)",
                        column.name, column.data_type
                    )),
                    Ty::Declared { .. } => fields.list[at].ty = now,
                    ty if !ty.is_physical() => fields.list[at].ty = now,
                    ty => conflicts.push(format!(
                        "/{}: the dataset has {}, the spec now declares {} (the dataset keeps {}; write to a new \
                         dataset to change a column's type)",
                        column.name,
                        ty.name(),
                        column.data_type,
                        ty.name()
                    )),
                },
            }
        }
    }

    /// Short name for messages: `int64`, `struct`, `list<string>`…
    pub fn name(&self) -> String {
        match self {
            Ty::Null => "null".into(),
            Ty::Bool => "bool".into(),
            Ty::Int => "int64".into(),
            Ty::BigInt { digits } if *digits <= 38 => "decimal(38, 0)".into(),
            Ty::BigInt { .. } => "string (integers beyond 38 digits)".into(),
            Ty::Float => "float64".into(),
            Ty::Text => "string".into(),
            Ty::Timestamp => "timestamp(us, UTC)".into(),
            Ty::Json => "json".into(),
            Ty::List { item } => format!("list<{}>", item.name()),
            Ty::Struct { .. } => "struct".into(),
            Ty::Declared { declared, .. } => declared.to_string(),
        }
    }
}

/// How `after` changes `before`'s columns, one line per change, in the
/// order the columns were added: a new column (`added column email
/// (string) for /email`, nested ones by their dotted path), a variant
/// column (`added variant column contact_id__string (string): /contact_id
/// held values that are not int64`), and a column that had no type yet
/// and has one now (`typed column note as string`). Empty when nothing a
/// reader sees changes.
pub fn schema_changes(before: &Ty, after: &Ty) -> Vec<String> {
    let mut changes = Vec::new();
    struct_changes("", "", before, after, &mut changes);
    changes
}

fn struct_changes(path: &str, pointer: &str, before: &Ty, after: &Ty, out: &mut Vec<String>) {
    let (before, after) = match (before, after) {
        (Ty::Struct { fields: b }, Ty::Struct { fields: a }) => (b, a),
        (Ty::List { item: b }, Ty::List { item: a }) => return struct_changes(path, pointer, b, a, out),
        _ => return,
    };
    let escape = |key: &str| key.replace('~', "~0").replace('/', "~1");
    for field in &after.list {
        let column = format!("{path}{}", field.name);
        let place = format!("{pointer}/{}", escape(&field.source));
        let was = before.list.iter().find(|f| f.name == field.name);
        match (was, field.variant) {
            (None, Some(Variant::Text)) => {
                // Not a variant of another kind: the values are in the
                // timestamp column too (a trial read "values that are not
                // timestamp" as the timestamps lost).
                out.push(format!(
                    "added column {column} (string): the text of {place}'s timestamps sent with an offset other \
                     than Z, whose instants are in its timestamp column"
                ));
            }
            (None, Some(_)) => {
                let base = after.list.iter().find(|f| f.variant.is_none() && f.source == field.source);
                let base_ty = base.map_or_else(|| "its column".to_string(), |b| b.ty.name());
                out.push(format!(
                    "added variant column {column} ({}): {place} held values that are not {base_ty}",
                    field.ty.name()
                ));
            }
            (None, None) if field.ty.is_physical() => {
                out.push(format!("added column {column} ({}) for {place}", field.ty.name()));
            }
            (None, None) => {}
            (Some(was), _) if !was.ty.is_physical() && field.ty.is_physical() => {
                out.push(format!("typed column {column} as {}", field.ty.name()));
            }
            (Some(was), _) => struct_changes(&format!("{column}."), &place, &was.ty, &field.ty, out),
        }
    }
}

/// An empty table schema: the record's struct, no fields.
pub fn empty_table() -> Ty {
    Ty::Struct { fields: Fields::default() }
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_from_civil_is_chronos_calendar_from_year_1_to_9999() {
        let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).expect("epoch");
        for year in (1..=9999).step_by(3).chain([1, 4, 100, 400, 1900, 2000, 2024, 2100, 9999]) {
            for month in 0..=13 {
                for day in 0..=32 {
                    let expected =
                        chrono::NaiveDate::from_ymd_opt(year as i32, month, day).map(|date| (date - epoch).num_days());
                    assert_eq!(days_from_civil(year, month, day), expected, "{year}-{month}-{day}");
                }
            }
        }
        assert_eq!(days_from_civil(0, 1, 1), None);
        assert_eq!(days_from_civil(10_000, 1, 1), None);
    }

    #[test]
    fn timestamps_are_chronos_instants() {
        for text in [
            "2024-02-29T23:59:59.999999Z",
            "2023-02-29T00:00:00Z",
            "2026-11-29T24:00:00Z",
            "2026-11-29T06:60:00Z",
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59-23:59",
            "1969-12-31T23:59:59.5Z",
            "1900-03-01T12:00:00Z",
            "2000-02-29T00:00:00.000001+05:45",
        ] {
            let chrono = chrono::DateTime::parse_from_rfc3339(text).ok().map(|t| t.timestamp_micros());
            assert_eq!(timestamp_micros(text).map(|(micros, _)| micros), chrono, "{text}");
        }
        // A leap second, which chrono reads as the next second: refused.
        assert_eq!(timestamp_micros("2026-11-29T06:00:60Z"), None);
    }

    /// The instant of RFC 3339 text written with `Z`.
    fn utc_timestamp_micros(text: &str) -> Option<i64> {
        match timestamp_micros(text) {
            Some((micros, false)) => Some(micros),
            _ => None,
        }
    }

    #[test]
    fn utc_timestamps_are_told_from_other_text() {
        let is_utc_timestamp = |text: &str| utc_timestamp_micros(text).is_some();
        for yes in
            ["2026-11-29T06:00:00Z", "2026-11-29T06:00:00.1Z", "2026-11-29T06:00:00.123456Z", "0001-01-01T00:00:00Z"]
        {
            assert!(is_utc_timestamp(yes), "{yes}");
        }
        for no in [
            "2026-11-29T06:00:00+02:00",
            "2026-11-29T06:00:00+00:00",
            "2026-11-29T06:00:00.1234567Z",
            "2026-11-29T06:00:00.Z",
            "2026-11-29",
            "2026-11-29T06:00:00",
            "2026-11-29 06:00:00Z",
            "2026-13-29T06:00:00Z",
            "0000-01-01T00:00:00Z",
            "soon",
            "",
        ] {
            assert!(!is_utc_timestamp(no), "{no}");
        }
    }

    #[test]
    fn offsets_are_the_same_instants_and_said_to_be_zoned() {
        let utc = utc_timestamp_micros("2026-11-29T06:00:00.5Z").expect("utc");
        for (text, zoned) in [
            ("2026-11-29T06:00:00.5Z", false),
            ("2026-11-29T08:00:00.5+02:00", true),
            ("2026-11-29T00:30:00.500-05:30", true),
            ("2026-11-29T06:00:00.500000+00:00", true),
        ] {
            assert_eq!(timestamp_micros(text), Some((utc, zoned)), "{text}");
        }
        for no in [
            "2026-11-29T06:00:00+24:00",
            "2026-11-29T06:00:00+02:60",
            "2026-11-29T06:00:00+0200",
            "2026-11-29T06:00:00 +02:00",
            "2026-11-29T06:00:00.1234567+02:00",
            "2026-11-29T06:00:00.+02:00",
            "2026-11-29T06:00:00+02",
            "0001-01-01T00:00:00+01:00x",
        ] {
            assert_eq!(timestamp_micros(no), None, "{no}");
        }
        let before_year_one = timestamp_micros("0001-01-01T00:30:00+01:00").expect("parses");
        assert!(before_year_one.0 < utc_timestamp_micros("0001-01-01T00:00:00Z").expect("utc"));
    }

    #[test]
    fn timestamp_text_decides_a_timestamp_column_by_majority_unless_turned_off() {
        let ty = |records: &[&str], timestamps: bool| {
            let names = Naming { policy: NamePolicy::SnakeCase, reserved: &[], timestamps };
            let mut ty = Ty::Struct { fields: Fields::default() };
            ty.evolve(&seen(records), names);
            let Ty::Struct { fields } = ty else { panic!("struct") };
            fields.list.iter().map(|f| (f.name.clone(), f.ty.name())).collect::<Vec<_>>()
        };
        let two_to_one = [r#"{"t": "2026-11-29T06:00:00Z"}"#, r#"{"t": "2026-11-30T06:00:00Z"}"#, r#"{"t": "n/a"}"#];
        assert_eq!(
            ty(&two_to_one, true),
            [("t".to_string(), "timestamp(us, UTC)".to_string()), ("t__string".to_string(), "string".to_string())]
        );
        assert_eq!(ty(&two_to_one, false), [("t".to_string(), "string".to_string())]);
        let one_to_two = [r#"{"t": "2026-11-29T06:00:00Z"}"#, r#"{"t": "n/a"}"#, r#"{"t": "later"}"#];
        assert_eq!(ty(&one_to_two, true), [("t".to_string(), "string".to_string())], "text wins, timestamps fit it");
    }

    #[test]
    fn the_group_holding_most_values_takes_a_new_column() {
        let names = Naming { policy: NamePolicy::SnakeCase, reserved: &[], timestamps: true };
        let columns = |records: &[&str]| {
            let mut ty = Ty::Struct { fields: Fields::default() };
            ty.evolve(&seen(records), names);
            let Ty::Struct { fields } = ty else { panic!("struct") };
            fields.list.iter().map(|f| format!("{} {}", f.name, f.ty.name())).collect::<Vec<_>>()
        };
        let stray_string_first = [r#"{"id": "n/a"}"#, r#"{"id": 1}"#, r#"{"id": 2}"#];
        assert_eq!(columns(&stray_string_first), ["id int64", "id__string string"]);
        let stray_int = [r#"{"id": "a"}"#, r#"{"id": 1}"#, r#"{"id": "b"}"#];
        assert_eq!(columns(&stray_int), ["id string", "id__int64 int64"]);
        let one_each = [r#"{"id": 1}"#, r#"{"id": "a"}"#];
        assert_eq!(columns(&one_each), ["id string", "id__int64 int64"], "ties: text before numbers");
        let mostly_objects = [r#"{"o": "x"}"#, r#"{"o": {"k": 1}}"#, r#"{"o": {"k": 2}}"#];
        assert_eq!(columns(&mostly_objects), ["o struct", "o__string string"]);
        let mostly_text = [r#"{"o": "x"}"#, r#"{"o": {"k": 1}}"#, r#"{"o": "y"}"#];
        assert_eq!(columns(&mostly_text), ["o string", "o__json json"]);
        let nulls_count_nothing =
            [r#"{"b": null}"#, r#"{"b": null}"#, r#"{"b": true}"#, r#"{"b": 1.5}"#, r#"{"b": true}"#];
        assert_eq!(columns(&nulls_count_nothing), ["b bool", "b__float64 float64"]);
    }

    #[test]
    fn a_key_is_matched_on_the_bytes_only_where_its_json_text_is_itself() {
        let field = |source: &str| Field { name: "c".into(), source: source.into(), ty: Ty::Int, variant: None };
        let fields = Fields::from_list(vec![field("qty"), field("a\"b"), field("tab\there"), field("back\\slash")]);
        let at = |text: &str, hint: usize| fields.key_at(text.as_bytes(), 0, hint);
        // The key, whole, then its closing quote: the offset after it.
        assert_eq!(at(r#""qty":1"#, 0), Some(5));
        // A longer or shorter key, another field's, an escape: not matched.
        for other in [r#""qtyx":1"#, r#""qt":1"#, r#""q\u0074y":1"#, r#""qty"#] {
            assert_eq!(at(other, 0), None, "{other}");
        }
        // A key a JSON string must escape is never matched on the bytes:
        // the raw bytes `"a"b"` are not the key `a"b` (nor JSON), nor does
        // `"back\slash"` hold a backslash (it is an escape).
        assert_eq!(at("\"a\"b\":1", 1), None);
        assert_eq!(at("\"tab\there\":1", 2), None);
        assert_eq!(at("\"back\\slash\":1", 3), None);
        // A renamed source (a declared field taken by a key) is judged anew.
        let mut renamed = fields.clone();
        renamed.take_source(0, "q\"ty");
        assert_eq!(renamed.key_at(b"\"q\"ty\":1", 0, 0), None);
        renamed.take_source(1, "plain");
        assert_eq!(renamed.key_at(br#""plain":1"#, 0, 1), Some(7));
    }

    #[test]
    fn same_key_is_string_equality_at_every_length_and_position() {
        for len in 0..40 {
            let key: String = (0..len).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
            assert!(same_key(&key, &key.clone()), "{key}");
            for at in 0..len {
                let mut other = key.clone().into_bytes();
                other[at] = b'Z';
                let other = String::from_utf8(other).expect("ascii");
                assert!(!same_key(&key, &other), "{key} vs {other}");
            }
            assert!(!same_key(&key, &format!("{key}a")), "{key} is a prefix");
        }
    }

    fn seen(records: &[&str]) -> Seen {
        let mut root = Seen::default();
        let mut tape = Tape::default();
        let mut scratch = String::new();
        for text in records {
            tape.parse(text).expect("valid JSON");
            root.absorb(text, &tape, 0, &mut scratch);
        }
        root
    }

    const SNAKE: Naming<'static> = Naming { policy: NamePolicy::SnakeCase, reserved: &[], timestamps: true };

    fn table(records: &[&str]) -> Ty {
        let mut ty = empty_table();
        ty.evolve(&seen(records), SNAKE);
        ty
    }

    /// `(name, type name, variant suffix)` of every field.
    fn columns(ty: &Ty) -> Vec<(String, String)> {
        let Ty::Struct { fields } = ty else { panic!("struct expected, got {ty:?}") };
        fields.list.iter().map(|f| (f.name.clone(), f.ty.name())).collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    #[test]
    fn integer_kinds_by_size() {
        assert_eq!(int_kind("9007199254740992"), Kinds::INT);
        assert_eq!(int_kind("-9007199254740992"), Kinds::INT);
        assert_eq!(int_kind("9007199254740993"), Kinds::INT64);
        assert_eq!(int_kind("9223372036854775807"), Kinds::INT64);
        assert_eq!(int_kind("9223372036854775808"), Kinds::DECIMAL);
        assert_eq!(int_kind(&"9".repeat(38)), Kinds::DECIMAL);
        assert_eq!(int_kind(&"9".repeat(39)), Kinds::HUGE);
    }

    #[test]
    fn a_page_decides_each_new_column_by_the_kinds_it_holds() {
        let ty = table(&[
            r#"{"i": 1, "f": 1, "big": 1, "mix": "a", "nul": null, "e": {}, "l": [], "o": {"a": 1}, "s": [1]}"#,
            r#"{"i": 2, "f": 2.5, "big": 18446744073709551616, "mix": 3, "e": {}, "l": [], "o": "text", "s": 2}"#,
            r#"{"mix": true, "bf": 1.5, "late": "x"}"#,
            r#"{"bf": 9007199254740993}"#,
        ]);
        assert_eq!(
            columns(&ty),
            pairs(&[
                ("i", "int64"),
                ("f", "float64"),
                ("big", "decimal(38, 0)"),
                ("mix", "string"),
                ("mix__bool", "bool"),
                ("mix__int64", "int64"),
                ("nul", "null"),
                ("e", "struct"),
                ("l", "list<null>"),
                ("o", "struct"),
                ("o__string", "string"),
                ("s", "list<int64>"),
                ("s__int64", "int64"),
                ("bf", "float64"),
                ("bf__int64", "int64"),
                ("late", "string"),
            ])
        );
        assert!(ty.is_settled());
        let Ty::Struct { fields } = &ty else { panic!() };
        for at in [6, 7, 8] {
            assert!(!fields.list[at].ty.is_physical(), "{}: null, {{}} or [] only: no column", fields.list[at].name);
        }
    }

    #[test]
    fn an_empty_container_seen_before_a_value_decides_the_place_gets_its_variant() {
        // Page order must not matter: `[]` then a scalar, and a scalar then `[]`.
        for (first, second) in [
            (r#"{"at": []}"#, r#"{"at": 5}"#),
            (r#"{"at": 5}"#, r#"{"at": []}"#),
            (r#"{"at": {}}"#, r#"{"at": [1]}"#),
            (r#"{"at": {"x": []}}"#, r#"{"at": {"x": "s"}}"#),
        ] {
            let mut ty = table(&[first]);
            ty.evolve(&seen(&[second]), SNAKE);
            let settled = ty.clone();
            // Replayed, either page changes nothing.
            for page in [first, second] {
                assert!(ty.evolve(&seen(&[page]), SNAKE).is_empty());
                assert_eq!(ty, settled, "{first} then {second}, then {page} again");
            }
            let text = serde_json::to_string(&ty).expect("serialises");
            assert!(text.contains("__json"), "{first} then {second}: the container goes to a `__json` variant: {text}");
        }
        // Only `{}` and `[]` at one place: a JSON-text column keeps each as sent.
        assert_eq!(columns(&table(&[r#"{"at": {}}"#, r#"{"at": []}"#])), pairs(&[("at", "json")]));
    }

    #[test]
    fn a_later_value_decides_a_column_with_no_type_and_conflicts_become_variants() {
        let mut ty = table(&[r#"{"n": 1, "who": null, "tags": [], "meta": {}}"#]);
        let page = seen(&[r#"{"n": 1.5, "who": {"login": "a"}, "tags": ["x"], "meta": {"k": true}, "new": 7}"#]);
        assert!(ty.evolve(&page, SNAKE).is_empty());
        assert_eq!(
            columns(&ty),
            pairs(&[
                ("n", "int64"),
                ("who", "struct"),
                ("tags", "list<string>"),
                ("meta", "struct"),
                ("n__float64", "float64"),
                ("new", "int64"),
            ])
        );
        // The same page again changes nothing.
        let before = ty.clone();
        ty.evolve(&page, SNAKE);
        assert_eq!(ty, before);
        // A struct then a scalar, a list then an object, a list of other items.
        ty.evolve(&seen(&[r#"{"who": "anon", "tags": [1], "meta": [1]}"#]), SNAKE);
        let names: Vec<String> = columns(&ty).into_iter().map(|(n, _)| n).collect();
        assert_eq!(&names[6..], ["who__string", "tags__json", "meta__json"]);
        let text = serde_json::to_string(&ty).expect("serialises");
        assert_eq!(serde_json::from_str::<Ty>(&text).expect("reads back"), ty);
    }

    #[test]
    fn names_become_snake_case_and_collisions_get_a_number() {
        for (key, name) in [
            ("createdAt", "created_at"),
            ("HTTPStatus", "http_status"),
            ("ID", "id"),
            ("unit price ($)", "unit_price"),
            ("preço", "preco"),
            ("São Paulo", "sao_paulo"),
            ("1st", "_1st"),
            ("$", "_"),
            ("a.b", "a_b"),
            ("already_snake", "already_snake"),
        ] {
            assert_eq!(column_name(key, NamePolicy::SnakeCase), name, "{key}");
        }
        assert_eq!(column_name("Mixed Case", NamePolicy::Verbatim), "Mixed Case");
        let long = column_name(&"x".repeat(300), NamePolicy::SnakeCase);
        assert_eq!(long.len(), MAX_COLUMN_NAME);
        assert_ne!(long, column_name(&format!("{}y", "x".repeat(299)), NamePolicy::SnakeCase));

        let ty = table(&[r#"{"id": 1, "ID": 2, "Id": 3, "id_2": 4}"#]);
        let Ty::Struct { fields } = &ty else { panic!() };
        let got: Vec<_> = fields.list.iter().map(|f| (f.name.as_str(), f.source.as_str())).collect();
        assert_eq!(got, [("id", "id"), ("id_2", "ID"), ("id_3", "Id"), ("id_2_2", "id_2")]);
        let reserved = ["dt".to_string()];
        let mut ty = empty_table();
        ty.evolve(
            &seen(&[r#"{"dt": "x"}"#]),
            Naming { policy: NamePolicy::SnakeCase, reserved: &reserved, timestamps: true },
        );
        assert_eq!(columns(&ty), pairs(&[("dt_2", "string")]), "a partition column's name is taken");
    }

    #[test]
    fn a_column_declared_by_its_lake_name_takes_the_vendors_key() {
        let declared: Vec<contracts::DeclaredField> =
            serde_json::from_str(r#"[{"name": "created_at", "type": "timestamp(ms, UTC)"}]"#).expect("declared");
        let sources = |ty: &Ty| -> Vec<(String, String)> {
            let Ty::Struct { fields } = ty else { panic!("struct") };
            fields.list.iter().map(|f| (f.name.clone(), f.source.clone())).collect()
        };
        let mut ty = empty_table();
        ty.declare(&declared, SNAKE, &mut Vec::new());
        ty.evolve(&seen(&[r#"{"id": 1, "createdAt": "2026-12-01T10:00:00Z"}"#]), SNAKE);
        // One column, declared, filled from `createdAt`: no all-null
        // `created_at` beside a `created_at_2` holding the data.
        assert_eq!(sources(&ty), [("created_at".into(), "createdAt".into()), ("id".into(), "id".into())]);
        assert_eq!(columns(&ty)[0], ("created_at".to_string(), "timestamp(ms, UTC)".to_string()));
        // The next run declares it again: the same column, nothing added.
        let mut conflicts = Vec::new();
        let before = ty.clone();
        ty.declare(&declared, SNAKE, &mut conflicts);
        assert_eq!((ty.clone(), conflicts), (before, Vec::new()));

        // A key of exactly the declared name, in the same page, fills it as
        // declared; the other key is a column of its own.
        let mut ty = empty_table();
        ty.declare(&declared, SNAKE, &mut Vec::new());
        ty.evolve(&seen(&[r#"{"createdAt": "x", "created_at": "2026-12-01T10:00:00Z"}"#]), SNAKE);
        assert_eq!(
            sources(&ty),
            [("created_at".into(), "created_at".into()), ("created_at_2".into(), "createdAt".into())]
        );
    }

    #[test]
    fn schemas_kept_before_variants_still_read() {
        let old = r#"{"type":"struct","fields":[["id",{"type":"int"}],["name",{"type":"text"}]]}"#;
        let ty: Ty = serde_json::from_str(old).expect("reads");
        assert_eq!(columns(&ty), pairs(&[("id", "int64"), ("name", "string")]));
    }
}

//! Schema inference over every record of a page, and the coercion rules.
//!
//! Each field's type is the merge of the kinds seen in all records (never a
//! sample). The rules, in order:
//!
//! | seen | column |
//! |---|---|
//! | only `null` (or never a value) | `string`, nullable — the documented default |
//! | integers that fit `i64` | `int64` |
//! | integers, some beyond `i64` (≤ 38 digits) | `decimal(38, 0)`, exact |
//! | integers beyond 38 digits | `string` holding the digits, exact |
//! | integers and floats | `float64` (a beyond-`i64` integer among floats makes it `string`, never rounded) |
//! | two or more of string, number, boolean | `string`, non-strings as their JSON text (`12.50`, `true`) |
//! | objects | `struct` of the union of their keys, in first-seen order |
//! | `{}` only | `string` holding `{}` (Parquet cannot store a struct without fields) |
//! | arrays | `list` of the merge of all items |
//! | `[]` only | `list<string>` of empty lists |
//! | a scalar or object in some records, an array in others | `list`, the lone value wrapped as a one-item list |
//! | an object in some records, a scalar in others | `string`, objects as their JSON text |
//!
//! Across pages (the dataset's schema in the lake, see [`Ty::evolve`]),
//! a column may gain nullable fields and widen `int64` -> `float64`,
//! `int64` -> `decimal(38, 0)`, any scalar -> `string`, `string` absorbing
//! objects as text; turning a scalar into a list or a struct into a scalar
//! would make the dataset unreadable as one table, so those records are
//! quarantined instead.

use std::collections::HashMap;

use contracts::FieldType;
use serde::{Deserialize, Serialize};

use crate::json::{Tape, Tok};

/// An inferred (or declared) column type: a point of the coercion lattice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Ty {
    /// Only nulls so far.
    Null,
    /// Booleans.
    Bool,
    /// Integers within `i64`.
    Int,
    /// Integers, some beyond `i64`, at most `digits` digits.
    BigInt {
        /// Most digits seen.
        digits: u8,
    },
    /// Numbers with a fraction or exponent (and integers).
    Float,
    /// Text: strings as they are, other values as their JSON text.
    Text,
    /// Arrays (or values wrapped as one-item lists).
    List {
        /// The items' type.
        item: Box<Ty>,
    },
    /// Objects.
    Struct {
        /// Fields in first-seen order.
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

/// A struct's fields, in first-seen order, with a name index.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(from = "Vec<(String, Ty)>", into = "Vec<(String, Ty)>")]
pub struct Fields {
    /// `(name, type)` pairs.
    pub list: Vec<(String, Ty)>,
    index: HashMap<String, usize>,
    /// A struct of the dataset's schema: a scalar or array seen where it is
    /// does not turn it into text or a list while inferring (those records
    /// are quarantined instead).
    pinned: bool,
}

impl PartialEq for Fields {
    fn eq(&self, other: &Self) -> bool {
        self.list == other.list
    }
}

impl Eq for Fields {}

impl From<Vec<(String, Ty)>> for Fields {
    fn from(list: Vec<(String, Ty)>) -> Self {
        let index = list.iter().enumerate().map(|(i, (name, _))| (name.clone(), i)).collect();
        Fields { list, index, pinned: false }
    }
}

impl From<Fields> for Vec<(String, Ty)> {
    fn from(fields: Fields) -> Self {
        fields.list
    }
}

impl Fields {
    /// Position of `name`, checking `hint` first (records usually list
    /// their keys in the same order).
    #[inline]
    pub fn position(&self, name: &str, hint: usize) -> Option<usize> {
        match self.list.get(hint) {
            Some((n, _)) if same_key(n, name) => Some(hint),
            _ => self.index.get(name).copied(),
        }
    }

    /// The field `name`, added as `Ty::Null` when new.
    pub fn entry(&mut self, name: &str, hint: usize) -> usize {
        if let Some(i) = self.position(name, hint) {
            return i;
        }
        self.index.insert(name.to_string(), self.list.len());
        self.list.push((name.to_string(), Ty::Null));
        self.list.len() - 1
    }
}

/// `a == b` for field names, without a `memcmp` call: names are short, and
/// a call per field per record (in inference, check and build) was a tenth
/// of the converter's time on the bench pages.
#[inline]
fn same_key(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
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

/// Digits of an integer literal, sign excluded.
fn digits(text: &str) -> usize {
    text.trim_start_matches('-').len()
}

/// The type of one integer literal.
pub fn int_type(text: &str) -> Ty {
    // Up to 18 digits always fits an i64: no parse.
    if digits(text) <= 18 || text.parse::<i64>().is_ok() {
        Ty::Int
    } else {
        Ty::BigInt { digits: digits(text).min(u8::MAX as usize) as u8 }
    }
}

impl Ty {
    /// The type of the value at `idx` of `tape` (whose text is `text`),
    /// merged into `self`. Returns the index after the value.
    pub fn absorb(&mut self, text: &str, tape: &Tape, idx: usize, scratch: &mut String) -> usize {
        let tok = tape.toks[idx];
        match tok {
            Tok::Obj { end, .. } => {
                match self {
                    Ty::Struct { .. } => {}
                    Ty::Null => *self = Ty::Struct { fields: Fields::default() },
                    Ty::List { item } => return item.absorb(text, tape, idx, scratch),
                    Ty::Declared { .. } | Ty::Text => return end as usize,
                    _ => {
                        *self = Ty::Text;
                        return end as usize;
                    }
                }
                let Ty::Struct { fields } = self else { return end as usize };
                let mut i = idx + 1;
                let mut hint = 0;
                while i < end as usize {
                    let Tok::Str { start, end: key_end, escaped } = tape.toks[i] else { break };
                    let key = crate::json::unescape(text, start, key_end, escaped, scratch).unwrap_or("\u{FFFD}");
                    let at = fields.entry(key, hint);
                    hint = at + 1;
                    i = fields.list[at].1.absorb(text, tape, i + 1, scratch);
                }
                end as usize
            }
            Tok::Arr { end, .. } => {
                match self {
                    Ty::List { .. } | Ty::Declared { .. } => {}
                    Ty::Struct { fields } if fields.pinned => return end as usize,
                    _ => {
                        let lone = std::mem::replace(self, Ty::Null);
                        *self = Ty::List { item: Box::new(lone) };
                    }
                }
                if let Ty::List { item } = self {
                    let mut i = idx + 1;
                    while i < end as usize {
                        i = item.absorb(text, tape, i, scratch);
                    }
                }
                end as usize
            }
            Tok::Null => idx + 1,
            scalar => {
                // Most values repeat their field's type: leave it as it is
                // without building the value's type to merge.
                let unchanged = match (&*self, scalar) {
                    (Ty::Text | Ty::Declared { .. }, _)
                    | (Ty::Bool, Tok::Bool(_))
                    | (Ty::Float, Tok::Num { int: false, .. }) => true,
                    // Up to 18 characters is an integer that fits i64.
                    (Ty::Int | Ty::Float, Tok::Num { start, end, int: true }) => end - start <= 18,
                    _ => false,
                };
                if unchanged {
                    return idx + 1;
                }
                let seen = match scalar {
                    Tok::Bool(_) => Ty::Bool,
                    Tok::Num { start, end, int: true } => int_type(&text[start as usize..end as usize]),
                    Tok::Num { .. } => Ty::Float,
                    _ => Ty::Text,
                };
                self.merge_scalar(seen);
                idx + 1
            }
        }
    }

    fn merge_scalar(&mut self, seen: Ty) {
        let merged = match (&*self, &seen) {
            (Ty::Declared { .. }, _) => return,
            (Ty::Struct { fields }, _) if fields.pinned => return,
            (Ty::List { .. }, _) => {
                if let Ty::List { item } = self {
                    item.merge_scalar(seen);
                }
                return;
            }
            (Ty::Null, _) => seen,
            (a, b) if a == b => return,
            (Ty::Int, Ty::Float) | (Ty::Float, Ty::Int) => Ty::Float,
            (Ty::Int, Ty::BigInt { digits }) | (Ty::BigInt { digits }, Ty::Int) => Ty::BigInt { digits: *digits },
            (Ty::BigInt { digits: a }, Ty::BigInt { digits: b }) => Ty::BigInt { digits: (*a).max(*b) },
            _ => Ty::Text,
        };
        *self = merged;
    }

    /// Merges two inferred types with the page rules (the lattice join).
    pub fn join(self, other: Ty) -> Ty {
        match (self, other) {
            (Ty::Null, t) | (t, Ty::Null) => t,
            (d @ Ty::Declared { .. }, _) | (_, d @ Ty::Declared { .. }) => d,
            (Ty::Struct { fields }, other) | (other, Ty::Struct { fields })
                if fields.pinned && !matches!(other, Ty::Struct { .. }) =>
            {
                Ty::Struct { fields }
            }
            (Ty::List { item: a }, Ty::List { item: b }) => Ty::List { item: Box::new(a.join(*b)) },
            (Ty::List { item }, t) => Ty::List { item: Box::new(item.join(t)) },
            (t, Ty::List { item }) => Ty::List { item: Box::new(t.join(*item)) },
            (Ty::Struct { fields: a }, Ty::Struct { fields: b }) => Ty::Struct { fields: join_fields(a, b) },
            (Ty::Struct { .. }, _) | (_, Ty::Struct { .. }) => Ty::Text,
            (a, b) => {
                let mut a = a;
                a.merge_scalar(b);
                a
            }
        }
    }

    /// The dataset's type after a page of type `page` is written under the
    /// dataset's current type `self` (see the module docs): the widened
    /// type; where the page's type cannot be followed, the dataset keeps its
    /// own (the page's records that do not fit it are quarantined).
    ///
    /// Conflicts are pushed to `conflicts` as `<path>: the dataset has
    /// struct, this page has string`.
    pub fn evolve(&self, page: &Ty, path: &str, conflicts: &mut Vec<String>) -> Ty {
        match (self, page) {
            (Ty::Null, t) => t.clone(),
            (t, Ty::Null) => t.clone(),
            // A declaration changed in the spec: a new `required` applies
            // (it only checks records); a new type cannot (the dataset's
            // files have the old one), so the dataset keeps its type and
            // the change is reported.
            (Ty::Declared { declared: was, .. }, Ty::Declared { declared: now, .. }) => {
                if was == now {
                    page.clone()
                } else {
                    conflicts.push(format!(
                        "{path}: the dataset declares {was}, the spec now declares {now} (the dataset keeps {was}; \
                         write to a new dataset to change a column's type)"
                    ));
                    self.clone()
                }
            }
            (Ty::Declared { .. }, _) => self.clone(),
            (_, Ty::Declared { .. }) => page.clone(),
            (Ty::Text, _) => Ty::Text,
            (Ty::Struct { fields: lake }, Ty::Struct { fields: new }) => {
                let mut fields = lake.clone();
                for (name, ty) in &new.list {
                    let at = fields.entry(name, usize::MAX);
                    let evolved = fields.list[at].1.evolve(ty, &format!("{path}/{name}"), conflicts);
                    fields.list[at].1 = evolved;
                }
                Ty::Struct { fields }
            }
            (Ty::List { item: lake }, Ty::List { item: new }) => {
                Ty::List { item: Box::new(lake.evolve(new, &format!("{path}/[]"), conflicts)) }
            }
            (Ty::List { item: lake }, scalar) => {
                Ty::List { item: Box::new(lake.evolve(scalar, &format!("{path}/[]"), conflicts)) }
            }
            (lake, new) if lake.is_scalar() && new.is_scalar() => lake.clone().join(new.clone()),
            (lake, new) => {
                conflicts.push(format!("{path}: the dataset has {}, this page has {}", lake.name(), new.name()));
                lake.clone()
            }
        }
    }

    fn is_scalar(&self) -> bool {
        matches!(self, Ty::Bool | Ty::Int | Ty::BigInt { .. } | Ty::Float | Ty::Text)
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
            Ty::List { item } => format!("list<{}>", item.name()),
            Ty::Struct { .. } => "struct".into(),
            Ty::Declared { declared, .. } => declared.to_string(),
        }
    }
}

fn join_fields(a: Fields, b: Fields) -> Fields {
    let mut out = a;
    for (name, ty) in b.list {
        let at = out.entry(&name, usize::MAX);
        let current = std::mem::replace(&mut out.list[at].1, Ty::Null);
        out.list[at].1 = current.join(ty);
    }
    out
}

/// Marks every struct of `ty` as the dataset's (see [`Fields`]'s `pinned`).
pub fn pin(ty: &mut Ty) {
    match ty {
        Ty::Struct { fields } => {
            fields.pinned = true;
            fields.list.iter_mut().for_each(|(_, t)| pin(t));
        }
        Ty::List { item } => pin(item),
        _ => {}
    }
}

/// The root type of a page: a struct seeded with the declared columns.
pub fn root_with_declared(declared: &[contracts::DeclaredField]) -> Ty {
    let list = declared
        .iter()
        .map(|f| (f.name.clone(), Ty::Declared { declared: f.data_type.clone(), required: f.required }))
        .collect::<Vec<_>>();
    Ty::Struct { fields: Fields::from(list) }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn infer(records: &[&str]) -> Ty {
        let mut root = Ty::Null;
        let mut tape = Tape::default();
        let mut scratch = String::new();
        for text in records {
            tape.parse(text).expect("valid JSON");
            root.absorb(text, &tape, 0, &mut scratch);
        }
        root
    }

    fn field(ty: &Ty, name: &str) -> Ty {
        let Ty::Struct { fields } = ty else { panic!("struct expected, got {ty:?}") };
        fields.list.iter().find(|(n, _)| n == name).map(|(_, t)| t.clone()).unwrap_or_else(|| panic!("no {name}"))
    }

    #[test]
    fn each_coercion_rule() {
        let ty = infer(&[
            r#"{"i": 1, "f": 1, "big": 1, "huge": 1, "mix": "a", "sl": 1, "nul": null, "e": {}, "l": [], "os": {"a": 1}}"#,
            r#"{"i": 2, "f": 2.5, "big": 18446744073709551616, "huge": 1234567890123456789012345678901234567890, "mix": 3, "sl": [2, 3], "e": {}, "l": [], "os": "text"}"#,
            r#"{"mix": true, "bigf": 1.5, "late": "x"}"#,
            r#"{"bigf": 99999999999999999999}"#,
        ]);
        assert_eq!(field(&ty, "i"), Ty::Int);
        assert_eq!(field(&ty, "f"), Ty::Float);
        assert_eq!(field(&ty, "big"), Ty::BigInt { digits: 20 });
        assert_eq!(field(&ty, "huge").name(), "string (integers beyond 38 digits)");
        assert_eq!(field(&ty, "bigf"), Ty::Text, "a big integer among floats is never rounded");
        assert_eq!(field(&ty, "mix"), Ty::Text);
        assert_eq!(field(&ty, "sl"), Ty::List { item: Box::new(Ty::Int) });
        assert_eq!(field(&ty, "nul"), Ty::Null);
        assert_eq!(field(&ty, "e"), Ty::Struct { fields: Fields::default() });
        assert_eq!(field(&ty, "l"), Ty::List { item: Box::new(Ty::Null) });
        assert_eq!(field(&ty, "os"), Ty::Text);
        assert_eq!(field(&ty, "late"), Ty::Text);
        let Ty::Struct { fields } = &ty else { panic!() };
        let names: Vec<_> = fields.list.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["i", "f", "big", "huge", "mix", "sl", "nul", "e", "l", "os", "bigf", "late"]);
    }

    #[test]
    fn object_then_list_of_objects_becomes_list_of_structs() {
        let ty = infer(&[r#"{"a": {"x": 1}}"#, r#"{"a": [{"y": "s"}]}"#]);
        let Ty::List { item } = field(&ty, "a") else { panic!("list") };
        assert_eq!(field(&item, "x"), Ty::Int);
        assert_eq!(field(&item, "y"), Ty::Text);
    }

    #[test]
    fn evolution_widens_or_names_the_conflict() {
        let lake = infer(&[r#"{"n": 1, "s": {"a": 1}, "k": 1}"#]);
        let page = infer(&[r#"{"n": 1.5, "s": "flat", "k": [1], "new": true}"#]);
        let mut conflicts = Vec::new();
        let evolved = lake.evolve(&page, "", &mut conflicts);
        assert_eq!(field(&evolved, "n"), Ty::Float);
        assert_eq!(field(&evolved, "new"), Ty::Bool);
        assert!(matches!(field(&evolved, "s"), Ty::Struct { .. }), "the dataset keeps its struct");
        assert_eq!(
            conflicts,
            [
                "/s: the dataset has struct, this page has string",
                "/k: the dataset has int64, this page has list<int64>"
            ]
        );
        let text = serde_json::to_string(&evolved).expect("serialises");
        assert_eq!(serde_json::from_str::<Ty>(&text).expect("reads back"), evolved);
    }
}

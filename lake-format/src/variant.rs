//! Variant columns: a field's values of another kind than its column's sit
//! beside it in `<column>__<suffix>` (Persist's `infer::Variant`), a
//! *family* of columns holding one field. What the committer needs to map
//! a file's columns onto a table whose family members were named from the
//! whole run ([`table_name`]).

use arrow_schema::{DataType, Field};

use crate::meta::{META_JSON, META_VARIANT_OF};

/// `bool` variants: `Boolean`.
pub const BOOL: &str = "bool";
/// `int64` variants: `Int64`.
pub const INT64: &str = "int64";
/// `decimal(38, 0)` variants: `Decimal128(38, 0)`.
pub const DECIMAL: &str = "decimal";
/// `float64` variants: `Float64`.
pub const FLOAT64: &str = "float64";
/// `string` variants: `Utf8`.
pub const STRING: &str = "string";
/// JSON-text variants (`Utf8` with [`META_JSON`]).
pub const JSON: &str = "json";
/// A timestamp column's companion holding the text of the values sent
/// with an offset other than `Z` (`Utf8`): the row's instant is in the
/// column, so it is no member a file's value moves to.
pub const TEXT: &str = "text";

/// Every suffix, as Persist names variant columns.
pub const SUFFIXES: [&str; 7] = [BOOL, INT64, DECIMAL, FLOAT64, STRING, JSON, TEXT];

/// The suffix of a scalar column of `data_type` when it is a variant, for
/// the types a family's base can swap with a variant: `None` for JSON
/// text (marked [`META_JSON`], or a variant named `<base>__json`), a
/// timestamp's `__text` companion, timestamps, structs, lists and every
/// other type (they keep their names).
pub fn scalar_suffix(field: &Field) -> Option<&'static str> {
    if field.metadata().contains_key(META_JSON) {
        return None;
    }
    // A `__json` or `__text` variant is `Utf8` as a `__string` one is, and
    // Persist's schemas carry no `META_JSON`: its name says what it is. Taken
    // for a string, a file's `name__json` went to the table's `name` and
    // the value was lost (a trial's product name sent as an object).
    if field.metadata().contains_key(META_VARIANT_OF)
        && field.name().rsplit_once("__").is_some_and(|(_, suffix)| suffix == JSON || suffix == TEXT)
    {
        return None;
    }
    match field.data_type() {
        DataType::Boolean => Some(BOOL),
        DataType::Int64 => Some(INT64),
        DataType::Decimal128(38, 0) => Some(DECIMAL),
        DataType::Float64 => Some(FLOAT64),
        DataType::Utf8 => Some(STRING),
        _ => None,
    }
}

/// The family (base column name) of `field`: its [`META_VARIANT_OF`]
/// metadata, else a `<base>__<suffix>` name's base, else its own name.
pub fn family(field: &Field) -> &str {
    if let Some(base) = field.metadata().get(META_VARIANT_OF) {
        return base;
    }
    family_of_name(field.name())
}

/// The base of a `<base>__<suffix>` name (a [`SUFFIXES`] suffix), else the
/// name itself.
pub fn family_of_name(name: &str) -> &str {
    match name.rsplit_once("__") {
        Some((base, suffix)) if !base.is_empty() && SUFFIXES.contains(&suffix) => base,
        _ => name,
    }
}

/// The name in `table` (its top-level fields) that a file's top-level
/// column `field` goes to: the same name with the same type; else the
/// member of its family with its type (the table may have decided the
/// family from a whole run, `ts` an `int64` where the file's `ts` is text
/// and its `ts__int64` the integers); else, when the same name holds
/// another scalar type, `<family>__<suffix>` (a column the table lacks
/// yet); else the same name (a column the table lacks, or one the
/// lossless casts of [`crate::align`] read, such as a struct that gained
/// fields). `same_type` compares a file's type with a table's.
pub fn table_name(field: &Field, table: &[&Field], same_type: impl Fn(&DataType, &DataType) -> bool) -> String {
    let name = field.name();
    let by_name = table.iter().find(|t| t.name() == name);
    if by_name.is_some_and(|t| same_type(field.data_type(), t.data_type())) {
        return name.clone();
    }
    let Some(suffix) = scalar_suffix(field) else { return name.clone() };
    let base = family(field);
    // The base itself, or the member named for its own type (never a
    // `__json` or `__text` column, though they are `Utf8` too).
    let member = table.iter().find(|t| {
        let own_name = scalar_suffix(t).is_some_and(|s| t.name() == base || *t.name() == format!("{base}__{s}"));
        own_name && same_type(field.data_type(), t.data_type())
    });
    if let Some(member) = member {
        return member.name().clone();
    }
    match by_name {
        Some(other) if scalar_suffix(other).is_some() => format!("{base}__{suffix}"),
        _ => name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn field(name: &str, data_type: DataType) -> Field {
        Field::new(name, data_type, true)
    }

    fn variant(name: &str, data_type: DataType, base: &str) -> Field {
        field(name, data_type).with_metadata(HashMap::from([(META_VARIANT_OF.to_string(), base.to_string())]))
    }

    #[test]
    fn a_files_columns_find_their_family_members_by_type() {
        let table = [
            field("ts", DataType::Int64),
            field("ts__json", DataType::Utf8),
            field("ts__text", DataType::Utf8),
            field("ts__string", DataType::Utf8),
            field("n", DataType::Float64),
        ];
        let table: Vec<&Field> = table.iter().collect();
        let name = |f: &Field| table_name(f, &table, |a, b| a == b);
        assert_eq!(name(&field("ts", DataType::Utf8)), "ts__string", "the text base to the text member");
        assert_eq!(name(&variant("ts__int64", DataType::Int64, "ts")), "ts", "the integers to the base");
        assert_eq!(name(&field("ts", DataType::Int64)), "ts");
        assert_eq!(name(&variant("ts__bool", DataType::Boolean, "ts")), "ts__bool", "a new member keeps its name");
        assert_eq!(name(&field("n", DataType::Utf8)), "n__string", "the name taken by another type");
        assert_eq!(name(&field("new", DataType::Utf8)), "new");
        let json =
            field("ts", DataType::Utf8).with_metadata(HashMap::from([(META_JSON.to_string(), "true".to_string())]));
        assert_eq!(name(&json), "ts", "JSON text keeps its name");
        // Persist's `__json` and `__text` variants carry no META_JSON: their
        // names keep them out of a string base (a trial lost a name sent
        // as an object to the table's text `name`).
        let table = [field("name", DataType::Utf8)];
        let table: Vec<&Field> = table.iter().collect();
        let name = |f: &Field| table_name(f, &table, |a, b| a == b);
        assert_eq!(name(&variant("name__json", DataType::Utf8, "name")), "name__json");
        assert_eq!(name(&variant("name__text", DataType::Utf8, "name")), "name__text");
        assert_eq!(name(&variant("name__string", DataType::Utf8, "name")), "name", "a string to the string base");
    }

    #[test]
    fn a_family_is_the_metadata_or_a_known_suffix() {
        assert_eq!(family_of_name("a__int64"), "a");
        assert_eq!(family_of_name("a__other"), "a__other");
        assert_eq!(family_of_name("__string"), "__string");
        assert_eq!(family(&variant("x", DataType::Utf8, "base")), "base");
    }
}

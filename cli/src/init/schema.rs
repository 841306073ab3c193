//! The table a spec's records make, as Persist infers it: Persist's own
//! inference ([`persist::infer_page`]) over the pages init fetched, shown
//! as columns (names after normalisation, types, variant columns).

use serde_json::Value;

use contracts::PersistTarget;
use persist::{PageSource, Ty};

/// One column of the inferred table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// Its name in the files (`address.city` for a struct's field).
    pub name: String,
    /// Its type (`int64`, `string`, `timestamp(us, UTC)`, `struct`, …).
    pub ty: String,
    /// Where its values come from, when not plain: the vendor's key under
    /// another name, or the column a variant column stands beside.
    pub note: Option<String>,
}

/// The columns Persist makes of `pages`' records for `target`, the pages
/// taken in order as one run's.
///
/// # Errors
/// Persist's, naming the record (a record it cannot read).
pub fn infer(pages: &[&[Value]], target: &PersistTarget) -> Result<Vec<Column>, persist::ConvertError> {
    let mut table: Option<Ty> = None;
    for records in pages {
        let text = serde_json::to_vec(records).unwrap_or_default();
        let source = PageSource::Bytes(bytes::Bytes::from(text));
        table = Some(persist::infer_page(&source, &contracts::PayloadFormat::default(), target, table.as_ref())?);
    }
    let mut columns = Vec::new();
    if let Some(table) = &table {
        walk(table, "", &mut columns);
    }
    Ok(columns)
}

/// The columns of `ty`'s fields, a struct's fields after it.
fn walk(ty: &Ty, prefix: &str, out: &mut Vec<Column>) {
    let Ty::Struct { fields } = ty else { return };
    for field in &fields.list {
        let name = format!("{prefix}{}", field.name);
        let note = match field.variant {
            // Not a variant: the companion of a timestamp column (a trial
            // read "values that are not timestamp" for it).
            Some(persist::Variant::Text) => Some(format!(
                "the text of key {:?} as sent, for values with an offset other than Z (their instant is in the \
                 timestamp column too)",
                field.source
            )),
            Some(_) => {
                let base = fields.list.iter().find(|f| f.source == field.source && f.variant.is_none());
                Some(format!(
                    "variant column: values of key {:?} that are not {}",
                    field.source,
                    base.map_or_else(|| "its column's type".to_string(), |base| base.ty.name())
                ))
            }
            None if field.name != field.source => Some(format!("from key {:?}", field.source)),
            None => None,
        };
        let ty = match &field.ty {
            Ty::Null => "no type yet (only null, {} or [] seen)".to_string(),
            other => other.name(),
        };
        out.push(Column { name: name.clone(), ty, note });
        match &field.ty {
            Ty::Struct { .. } => walk(&field.ty, &format!("{name}."), out),
            Ty::List { item } => walk(item, &format!("{name}[]."), out),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn columns_are_named_as_persist_names_them_with_variants_beside() {
        let page1 = [json!({"id": 1, "createdAt": "2026-01-01T00:00:00Z", "address": {"City": "Porto"}})];
        let page2 = [json!({"id": "x-2", "createdAt": "2026-01-02T00:00:00Z"})];
        let columns = infer(&[&page1, &page2], &PersistTarget::new("d")).expect("infer");
        let find =
            |name: &str| columns.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("{name}: {columns:?}"));
        assert_eq!(find("id").ty, "int64");
        assert_eq!(find("created_at").note.as_deref(), Some("from key \"createdAt\""));
        assert_eq!(find("created_at").ty, "timestamp(us, UTC)");
        assert_eq!(find("address").ty, "struct");
        assert_eq!(find("address.city").ty, "string");
        let variant = find("id__string");
        assert_eq!(variant.ty, "string");
        assert!(variant.note.as_deref().is_some_and(|note| note.contains("not int64")), "{variant:?}");
    }

    /// A trial finding: a timestamp's `__text` companion was shown as a
    /// variant of the values that are not timestamps; it holds the text of
    /// the values sent with an offset, whose instant is in the column.
    #[test]
    fn a_timestamps_text_companion_is_not_called_a_variant() {
        let page = [json!({"createdAt": "2026-01-01T00:00:00+02:00"}), json!({"createdAt": "2026-01-01T00:00:00Z"})];
        let columns = infer(&[&page], &PersistTarget::new("d")).expect("infer");
        let text = columns.iter().find(|c| c.name == "created_at__text").unwrap_or_else(|| panic!("{columns:?}"));
        let note = text.note.as_deref().unwrap_or_default();
        assert!(note.contains("offset other than Z") && !note.contains("variant"), "{note}");
    }
}

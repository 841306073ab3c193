//! Property tests of schema evolution: pages of random records (a few
//! keys; integers of every size, floats, strings, booleans, nulls, nested
//! objects and arrays) inferred page by page and evolved onto a table
//! schema in random orders.
//!
//! What holds in every order: the schema only grows (no column lost,
//! renamed or retyped, a record it took it still takes), it takes every
//! record of every page, it is a fixpoint of its pages, it reads back from
//! its stored JSON, and the pages' [`Seen`]s join to the same result in any
//! order (in page order, exactly one sequential pass). Within one page the
//! records' order changes nothing: the majority decides a new column. What
//! does *not* hold here, by design, is the same schema in every order of
//! *pages*: the first page holding a field decides its column and later
//! kinds go to variant columns (see the module docs of [`crate::infer`] and
//! [`the_first_page_decides_a_column_so_order_changes_types_not_coverage`]);
//! an Iceberg dataset decides a new column from the whole run at its
//! commit instead.

use std::collections::BTreeMap;

use contracts::NamePolicy;
use proptest::prelude::*;

use super::{Naming, Seen, Ty, empty_table};
use crate::build::{Col, Rec};
use crate::json::Tape;

const SNAKE: Naming<'static> = Naming { policy: NamePolicy::SnakeCase, reserved: &[], timestamps: true };

/// Keys the records draw from: few, so pages share fields, with two that
/// differ only in case (`id`, `ID`: two columns, `id` and `id_2`) and one
/// that snake_case renames.
const KEYS: [&str; 6] = ["a", "b", "id", "ID", "createdAt", "x y"];

/// A JSON value of any kind, as text.
fn value() -> impl Strategy<Value = String> {
    let scalar = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        // Integers of each kind: within 2^53, i64 beyond 2^53, beyond i64
        // up to 38 digits, beyond 38 digits.
        "-?(0|[1-9][0-9]{0,3})",
        "[1-9][0-9]{16,17}",
        "-?[1-9][0-9]{19,37}",
        "[1-9][0-9]{38,42}",
        "-?(0|[1-9][0-9]{0,2})\\.[0-9]{1,3}",
        "[1-9]e[0-9]",
        "\"[a-z]{0,3}\"",
        "\"2026-11-2[0-9]T0[0-9]:00:00(Z|[+-]0[0-9]:00)\"",
    ];
    scalar.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(|items| format!("[{}]", items.join(","))),
            object(inner),
        ]
    })
}

/// An object of distinct keys from [`KEYS`] with values from `values`.
fn object(values: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    prop::collection::btree_map(prop::sample::select(KEYS.to_vec()), values, 0..4).prop_map(|members| {
        let members: Vec<String> = members.into_iter().map(|(key, value)| format!("{key:?}:{value}")).collect();
        format!("{{{}}}", members.join(","))
    })
}

/// One to four pages of one to four records, and an order to evolve the
/// table by them in.
fn pages_in_an_order() -> impl Strategy<Value = (Vec<Vec<String>>, Vec<usize>)> {
    prop::collection::vec(prop::collection::vec(object(value()), 1..5), 1..5).prop_flat_map(|pages| {
        let order = Just((0..pages.len()).collect::<Vec<_>>()).prop_shuffle();
        (Just(pages), order)
    })
}

/// What the records held, in one pass.
fn seen(records: &[String]) -> Seen {
    let mut root = Seen::default();
    let mut tape = Tape::default();
    let mut scratch = String::new();
    for text in records {
        tape.parse(text).expect("generated JSON");
        root.absorb(text, &tape, 0, &mut scratch);
    }
    root
}

/// Whether `record` holds, somewhere, an object or array of no value
/// (`[]`, `{}`, `[[null]]`…). A place with no column yet takes such a value
/// without a column only because the page holding it evolves the schema
/// before it is written (and records the container's kind then); a schema
/// evolved by other pages alone may type the place another way. So
/// "taken before, taken after" holds for the other records; the final
/// schema takes every record (`in_any_order_the_schema_takes_every_record`).
fn holds_an_empty_container(record: &str) -> bool {
    fn valueless(seen: &Seen) -> bool {
        (seen.kinds.0 != 0 && !seen.has_values())
            || seen.fields.iter().any(|(_, field)| valueless(field))
            || seen.item.as_deref().is_some_and(valueless)
    }
    let root = seen(&[record.to_string()]);
    root.fields.iter().any(|(_, field)| valueless(field))
}

/// The table schema after evolving an empty table by each page in turn
/// (what successive `convert_page` calls do), and the schema after each.
fn evolve_in_order(pages: &[Vec<String>], order: &[usize]) -> Vec<Ty> {
    let mut table = empty_table();
    let mut steps = vec![table.clone()];
    for &page in order {
        table.evolve(&seen(&pages[page]), SNAKE);
        steps.push(table.clone());
    }
    steps
}

/// Whether the write schema `ty` takes `record` as it is (the check
/// `convert_page`'s write pass runs before it appends a record).
fn takes(ty: &Ty, record: &str) -> Result<(), String> {
    let mut tape = Tape::default();
    tape.parse(record).expect("generated JSON");
    Col::new(ty)
        .check(Rec { text: record, tape: &tape }, 0, &mut String::new(), &mut crate::build::Plan::default())
        .map(|_| ())
        .map_err(|violation| violation.to_string())
}

/// Whether `new` keeps everything of `old`: every field at its position
/// with its name, source and variant, each type as it was or moved only
/// the ways readers follow (a type for a place that had none, new struct
/// fields, a list's items extended the same way).
fn extends(old: &Ty, new: &Ty, path: &str) -> Result<(), String> {
    match (old, new) {
        (Ty::Struct { fields: was }, Ty::Struct { fields: now }) => {
            for (at, field) in was.list.iter().enumerate() {
                let Some(kept) = now.list.get(at) else { return Err(format!("{path}: lost field {at}")) };
                if (&kept.name, &kept.source, kept.variant) != (&field.name, &field.source, field.variant) {
                    return Err(format!("{path}: field {at} was {field:?}, now {kept:?}"));
                }
                extends(&field.ty, &kept.ty, &format!("{path}/{}", field.name))?;
            }
            Ok(())
        }
        (Ty::List { item: was }, Ty::List { item: now }) => extends(was, now, &format!("{path}[]")),
        // No column in the files yet: the values decide it.
        (old, _) if !old.is_physical() => Ok(()),
        (old, new) if old == new => Ok(()),
        (old, new) => Err(format!("{path}: {} became {}", old.name(), new.name())),
    }
}

/// Every struct's key index finds each base field where it is.
fn index_is_consistent(ty: &Ty) -> bool {
    match ty {
        Ty::Struct { fields } => fields.list.iter().enumerate().all(|(at, field)| {
            (field.variant.is_some() || fields.position(&field.source, usize::MAX) == Some(at))
                && index_is_consistent(&field.ty)
        }),
        Ty::List { item } => index_is_consistent(item),
        _ => true,
    }
}

/// `Seen` without the order its fields were first seen in.
#[derive(Debug, PartialEq, Eq)]
struct Unordered {
    kinds: u16,
    fields: BTreeMap<String, Unordered>,
    item: Option<Box<Unordered>>,
}

fn unordered(seen: &Seen) -> Unordered {
    Unordered {
        kinds: seen.kinds.0,
        fields: seen.fields.iter().map(|(key, seen)| (key.clone(), unordered(seen))).collect(),
        item: seen.item.as_deref().map(|item| Box::new(unordered(item))),
    }
}

/// The root's base columns, by source key.
fn root_sources(ty: &Ty) -> Vec<String> {
    let Ty::Struct { fields } = ty else { panic!("the record is a struct") };
    let mut sources: Vec<String> =
        fields.list.iter().filter(|f| f.variant.is_none()).map(|f| f.source.clone()).collect();
    sources.sort();
    sources
}

/// One page of records `{"v": <scalar>}` (every scalar kind, timestamps
/// included) and an order of them.
fn one_field_page_in_an_order() -> impl Strategy<Value = (Vec<String>, Vec<usize>)> {
    let scalar = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        "-?(0|[1-9][0-9]{0,3})",
        "[1-9][0-9]{16,17}",
        "-?[1-9][0-9]{19,37}",
        "-?(0|[1-9][0-9]{0,2})\\.[0-9]{1,3}",
        "\"[a-z]{0,3}\"",
        "\"2026-1[0-2]-[12][0-9]T0[0-9]:00:00Z\"",
        "\"2026-1[0-2]-[12][0-9]T0[0-9]:00:00[+-]0[0-9]:[03]0\"",
        Just("{\"k\": 1}".to_string()),
        Just("[1]".to_string()),
    ];
    prop::collection::vec(scalar.prop_map(|v| format!("{{\"v\": {v}}}")), 1..12).prop_flat_map(|page| {
        let order = Just((0..page.len()).collect::<Vec<_>>()).prop_shuffle();
        (Just(page), order)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Within a page, the records' order decides nothing: the same column
    /// and the same variants.
    #[test]
    fn a_pages_record_order_changes_no_column((page, order) in one_field_page_in_an_order()) {
        let decide = |records: &[String]| {
            let mut table = empty_table();
            table.evolve(&seen(records), SNAKE);
            table
        };
        let shuffled: Vec<String> = order.iter().map(|&i| page[i].clone()).collect();
        let table = decide(&page);
        prop_assert_eq!(&decide(&shuffled), &table, "page {:?}", page);
    }

    /// Monotone: each page only extends the schema (no field lost, renamed
    /// or narrowed; the column count never falls), and every record of any
    /// page that the schema took before, it still takes after.
    #[test]
    fn evolution_never_loses_a_column_or_narrows_a_type((pages, order) in pages_in_an_order()) {
        let steps = evolve_in_order(&pages, &order);
        let records: Vec<&String> = pages.iter().flatten().collect();
        for pair in steps.windows(2) {
            let (before, after) = (&pair[0], &pair[1]);
            if let Err(why) = extends(before, after, "") {
                return Err(TestCaseError::fail(format!("{why}\npages {pages:?} in order {order:?}")));
            }
            prop_assert!(after.columns() >= before.columns());
            // The empty table (no column yet) takes any record of only
            // `null`, `{}` and `[]`, new keys included; once it has a column,
            // new keys need the page that brings them.
            for record in records.iter().filter(|r| before.is_physical() && !holds_an_empty_container(r)) {
                if takes(before, record).is_ok() {
                    prop_assert_eq!(takes(after, record), Ok(()), "{} was taken before {:?}", record, after);
                }
            }
        }
    }

    /// In any order, the final schema takes every record of every page (a
    /// column or a variant column for each value), keeps its key index
    /// right, and reads back from the JSON the lake stores it as.
    #[test]
    fn in_any_order_the_schema_takes_every_record((pages, order) in pages_in_an_order()) {
        let table = evolve_in_order(&pages, &order).pop().expect("the final schema");
        for record in pages.iter().flatten() {
            if let Err(why) = takes(&table, record) {
                return Err(TestCaseError::fail(format!("{record}: {why}\npages {pages:?} in order {order:?}\n{table:?}")));
            }
        }
        prop_assert!(index_is_consistent(&table));
        let stored = serde_json::to_string(&table).expect("serialises");
        let read: Ty = serde_json::from_str(&stored).expect("reads back");
        prop_assert!(index_is_consistent(&read));
        prop_assert_eq!(read, table);
    }

    /// Fixpoint: once every page has evolved the schema, none changes it
    /// again (a replayed page adds no column).
    ///
    /// Found by this property once: `[]` at a place with no type yet left
    /// no trace, so a page typing the place later and then the first page
    /// again added `__json`. Empty containers now keep their shape.
    #[test]
    fn no_page_changes_the_final_schema_again((pages, order) in pages_in_an_order()) {
        let table = evolve_in_order(&pages, &order).pop().expect("the final schema");
        for page in &pages {
            let mut again = table.clone();
            prop_assert!(again.evolve(&seen(page), SNAKE).is_empty());
            prop_assert_eq!(&again, &table, "page {:?} changed the schema again", page);
        }
    }

    /// Order independence where the design has it: the pages' `Seen`s
    /// joined in any order hold the same kinds and keys at every place; in
    /// page order they are exactly one sequential pass (what
    /// `seen_in_page` relies on to infer chunks on two threads); and the
    /// record's columns are the same keys whatever the order.
    #[test]
    fn page_order_changes_no_kind_key_or_root_column((pages, order) in pages_in_an_order()) {
        let all: Vec<String> = pages.iter().flatten().cloned().collect();
        let one_pass = seen(&all);
        let mut in_page_order = Seen::default();
        for page in &pages {
            in_page_order.join(seen(page));
        }
        prop_assert_eq!(&in_page_order, &one_pass);
        let mut shuffled = Seen::default();
        for &page in &order {
            shuffled.join(seen(&pages[page]));
        }
        prop_assert_eq!(unordered(&shuffled), unordered(&one_pass));
        let in_order = evolve_in_order(&pages, &(0..pages.len()).collect::<Vec<_>>()).pop().expect("final");
        let reordered = evolve_in_order(&pages, &order).pop().expect("final");
        prop_assert_eq!(root_sources(&in_order), root_sources(&reordered));
    }
}

/// Why the properties above stop short of "the same schema in every
/// order": the first page decides a column's type; a later kind goes to a
/// variant column rather than retyping a column files already have. Both
/// orders take both records.
#[test]
fn the_first_page_decides_a_column_so_order_changes_types_not_coverage() {
    let pages = vec![vec![r#"{"a": 1}"#.to_string()], vec![r#"{"a": "x"}"#.to_string()]];
    let columns = |order: &[usize]| {
        let table = evolve_in_order(&pages, order).pop().expect("final");
        for record in pages.iter().flatten() {
            takes(&table, record).unwrap_or_else(|why| panic!("{record}: {why}"));
        }
        let Ty::Struct { fields } = table else { panic!("struct") };
        fields.list.into_iter().map(|f| (f.name, f.ty.name())).collect::<Vec<_>>()
    };
    let pairs = |list: &[(&str, &str)]| list.iter().map(|(n, t)| (n.to_string(), t.to_string())).collect::<Vec<_>>();
    assert_eq!(columns(&[0, 1]), pairs(&[("a", "int64"), ("a__string", "string")]));
    assert_eq!(columns(&[1, 0]), pairs(&[("a", "string"), ("a__int64", "int64")]));
}

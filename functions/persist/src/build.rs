//! Arrow column builders driven by the tape: check a record against the
//! write schema, then append it.
//!
//! [`Col::check`] walks a value without writing anything and says why it
//! does not fit (field path, expected and found type); only records that
//! pass are appended, so a quarantined record never leaves half a row in
//! the builders.

use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder, Int32Builder, Int64Builder,
    StringBuilder,
};
use arrow_array::{Array, ArrayRef, ListArray, StructArray};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, Fields as ArrowFields, TimeUnit as ArrowUnit};
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use contracts::{FieldType, TimeUnit};

use crate::infer::{Fields, Kinds, Ty, Variant, kind_of};
use crate::json::{Tape, Tok, kind_name, unescape};

use lake_format::meta::{META_SOURCE, META_VARIANT_OF};

mod direct;

/// Why a value does not fit its column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// JSON pointer of the value, e.g. `/address/zip`.
    pub path: String,
    /// The column's type.
    pub expected: String,
    /// What was found.
    pub found: String,
    /// Whether the column's type stands: the column is declared (its rule
    /// at work), or the value fits no type at all (`1e400`, a lone UTF-16
    /// surrogate). Otherwise the violation is the page asking for a change
    /// of the dataset's types.
    pub type_stands: bool,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "field {}: expected {}, found {}", self.path, self.expected, self.found)
    }
}

/// Text of a record with its tape.
#[derive(Clone, Copy)]
pub struct Rec<'a> {
    /// The record's JSON text.
    pub text: &'a str,
    /// Its tokens.
    pub tape: &'a Tape,
}

impl Rec<'_> {
    fn raw(&self, idx: usize) -> &str {
        match self.tape.toks[idx] {
            Tok::Obj { from, to, .. } | Tok::Arr { from, to, .. } => &self.text[from as usize..to as usize],
            Tok::Num { start, end, .. } => &self.text[start as usize..end as usize],
            Tok::Str { start, end, .. } => &self.text[start as usize - 1..end as usize + 1],
            Tok::Bool(true) => "true",
            Tok::Bool(false) => "false",
            Tok::Null => "null",
        }
    }
}

/// The columns [`Col::check`] chose for one record's fields, for
/// [`Col::append`] to follow: one step per object key, in the order both
/// walk the record (pre-order: a field, then the fields inside its value).
/// Check decides each field's column (its position among the struct's
/// names, its route to a variant column, a re-check against the base
/// column); append then takes it from here instead of deciding again (the
/// profile in docs/persist-bench.md had the two walks' key lookups and
/// routing at about a tenth of a page). Reused from record to record: no
/// allocation once it has grown to a record's fields.
#[derive(Debug, Default)]
pub struct Plan {
    /// Per key: the child it goes to, with [`Plan::COMPANION`] set when its
    /// text also goes to the field's `__text` companion.
    steps: Vec<u32>,
    /// The next step [`Col::append`] takes.
    next: usize,
}

impl Plan {
    /// Set on a step whose value (a timestamp sent with an offset) also
    /// goes, as text, to its field's `__text` variant column.
    const COMPANION: u32 = 1 << 31;

    /// Forgets the last record's steps: call before [`Col::check`] of the
    /// next record.
    pub fn clear(&mut self) {
        self.steps.clear();
        self.next = 0;
    }

    /// The next step: the child to append to, and whether the value goes
    /// to the `__text` companion too.
    fn take(&mut self) -> (usize, bool) {
        let step = self.steps[self.next];
        self.next += 1;
        ((step & !Self::COMPANION) as usize, step & Self::COMPANION != 0)
    }
}

/// A column being built.
pub enum Col {
    /// A field with no type yet: no column in the files; only `null`,
    /// `{}`, `[]` (and containers of those) fit it.
    Absent,
    /// `bool`.
    Bool(BooleanBuilder),
    /// `int32` (declared).
    Int32(Int32Builder),
    /// `int64`.
    Int64(Int64Builder),
    /// `float32` (declared).
    Float32(Float32Builder),
    /// `float64`.
    Float64(Float64Builder),
    /// `decimal(p, s)`; inferred beyond-`i64` integers are `decimal(38, 0)`.
    Decimal(Decimal128Builder, u8, u8),
    /// Text: strings as they are, other values as JSON text.
    Text(StringBuilder, &'static str),
    /// Declared `json`: every value as its JSON text.
    Json(StringBuilder),
    /// `date`.
    Date(Date32Builder),
    /// `timestamp(unit[, tz])`, stored as epoch values in the unit.
    Timestamp(Int64Builder, TimeUnit, Option<String>),
    /// A list.
    List {
        /// End offsets, starting with 0.
        offsets: Vec<i32>,
        /// Validity.
        nulls: NullBufferBuilder,
        /// Items.
        item: Box<Col>,
        /// The items' inferred type (`None` when declared): an item of a
        /// kind it does not take makes the list not fit.
        item_ty: Option<Box<Ty>>,
        /// Refuse what the items' type takes but an inference over every
        /// record would type otherwise ([`Col::check_kinds_exactly`]).
        exact: bool,
    },
    /// A struct (the record itself is one).
    Struct {
        /// Names and index.
        names: Fields,
        /// Children, in `names` order ([`Col::Absent`] for fields with no
        /// type yet).
        children: Vec<Col>,
        /// Per field, the positions of its variant columns by
        /// [`Variant::slot`].
        variants: Vec<[Option<usize>; 7]>,
        /// Which children are required (declared `required: true`); empty
        /// when none is, so that a record of a struct without one (nearly
        /// every struct) is checked for them in one comparison.
        required: Vec<bool>,
        /// Which children are declared columns.
        declared: Vec<bool>,
        /// Row stamp per child: `rows + 1` once set in the current row.
        stamps: Vec<usize>,
        /// The keys' order in the last record [`Col::append_checked`]
        /// took: `order[0]` is the position of its first key, `order[at +
        /// 1]` that of the key after the field at `at`. Records of a page
        /// come with their keys in one order, rarely the columns' (sorted
        /// by name), so the next key is looked for there first, before
        /// the names' hash index (the profile in docs/persist-bench.md had
        /// those lookups at 2 % of a page).
        order: Vec<usize>,
        /// Refuse what a field's type takes but an inference over every
        /// record would type otherwise ([`Col::check_kinds_exactly`]).
        exact: bool,
        /// Validity.
        nulls: NullBufferBuilder,
        /// Rows appended.
        rows: usize,
        /// Null rows of the struct whose children have not had their
        /// nulls yet: given in one call per child ([`Col::append_nulls`])
        /// before the next value reaches a child, and at finish. A page
        /// whose records mostly lack an object (a `metadata` of eight
        /// fields) paid eight null appends per record.
        pending: usize,
    },
}

const CAPACITY: usize = 1024;

impl Col {
    /// The builder for a column of type `ty`.
    pub fn new(ty: &Ty) -> Col {
        match ty {
            Ty::Null => Col::Absent,
            _ if !ty.is_physical() => Col::Absent,
            Ty::Text => Col::Text(StringBuilder::new(), "string"),
            // `+00:00`, not `UTC`: what Parquet's UTC-adjusted timestamps
            // and Iceberg's `timestamptz` read back as, and what Arrow
            // formats without its chrono-tz feature.
            Ty::Timestamp => Col::Timestamp(Int64Builder::new(), TimeUnit::Microsecond, Some("+00:00".into())),
            Ty::Json => Col::Json(StringBuilder::new()),
            Ty::Bool => Col::Bool(BooleanBuilder::new()),
            Ty::Int => Col::Int64(Int64Builder::new()),
            Ty::BigInt { digits } if *digits <= 38 => Col::Decimal(decimal_builder(38, 0), 38, 0),
            Ty::BigInt { .. } => Col::Text(StringBuilder::new(), "string (integers beyond 38 digits)"),
            Ty::Float => Col::Float64(Float64Builder::new()),
            Ty::List { item } => Col::List {
                offsets: vec![0],
                nulls: NullBufferBuilder::new(CAPACITY),
                item: Box::new(Col::new(item)),
                item_ty: Some(item.clone()),
                exact: false,
            },
            Ty::Struct { fields } => Col::Struct {
                names: fields.clone(),
                children: fields.list.iter().map(|f| Col::new(&f.ty)).collect(),
                variants: fields
                    .list
                    .iter()
                    .map(|f| {
                        let mut slots = [None; 7];
                        if f.variant.is_none() {
                            for variant in Variant::ALL {
                                slots[variant.slot()] = fields.variant_position(&f.source, variant);
                            }
                        }
                        slots
                    })
                    .collect(),
                required: {
                    let required: Vec<bool> =
                        fields.list.iter().map(|f| matches!(f.ty, Ty::Declared { required: true, .. })).collect();
                    if required.contains(&true) { required } else { Vec::new() }
                },
                declared: fields.list.iter().map(|f| matches!(f.ty, Ty::Declared { .. })).collect(),
                stamps: vec![0; fields.list.len()],
                order: (0..=fields.list.len()).collect(),
                exact: false,
                nulls: NullBufferBuilder::new(CAPACITY),
                rows: 0,
                pending: 0,
            },
            Ty::Declared { declared, .. } => Col::declared(declared),
        }
    }

    /// Sizes a column just made ([`Col::new`]) for `rows` values: its
    /// builders, and a struct's children's, hold that many without
    /// growing (a string's bytes, 16 a value, may still grow; a list's
    /// items are not counted). A chunk's builders grew from 1,024 values
    /// by doubling, each step a copy: about 1 % of a page's instructions.
    pub fn reserve_rows(&mut self, rows: usize) {
        match self {
            Col::Absent => {}
            Col::Bool(b) => *b = BooleanBuilder::with_capacity(rows),
            Col::Int32(b) => *b = Int32Builder::with_capacity(rows),
            Col::Int64(b) | Col::Timestamp(b, ..) => *b = Int64Builder::with_capacity(rows),
            Col::Float32(b) => *b = Float32Builder::with_capacity(rows),
            Col::Float64(b) => *b = Float64Builder::with_capacity(rows),
            Col::Date(b) => *b = Date32Builder::with_capacity(rows),
            Col::Decimal(b, precision, scale) => {
                *b = Decimal128Builder::with_capacity(rows)
                    .with_precision_and_scale(*precision, *scale as i8)
                    .unwrap_or_else(|_| decimal_builder(*precision, *scale));
            }
            Col::Text(b, _) | Col::Json(b) => *b = StringBuilder::with_capacity(rows, rows * 16),
            Col::List { offsets, .. } => offsets.reserve(rows),
            Col::Struct { children, .. } => children.iter_mut().for_each(|child| child.reserve_rows(rows)),
        }
    }

    fn declared(ty: &FieldType) -> Col {
        match ty {
            FieldType::Bool => Col::Bool(BooleanBuilder::new()),
            FieldType::Int32 => Col::Int32(Int32Builder::new()),
            FieldType::Int64 => Col::Int64(Int64Builder::new()),
            FieldType::Float32 => Col::Float32(Float32Builder::new()),
            FieldType::Float64 => Col::Float64(Float64Builder::new()),
            FieldType::String => Col::Text(StringBuilder::new(), "string"),
            FieldType::Json => Col::Json(StringBuilder::new()),
            FieldType::Date => Col::Date(Date32Builder::new()),
            FieldType::Timestamp { unit, tz } => Col::Timestamp(Int64Builder::new(), *unit, tz.clone()),
            FieldType::Decimal { precision, scale } => {
                Col::Decimal(decimal_builder(*precision, *scale), *precision, *scale)
            }
            FieldType::List(item) => Col::List {
                offsets: vec![0],
                nulls: NullBufferBuilder::new(CAPACITY),
                item: Box::new(Col::declared(item)),
                item_ty: None,
                exact: false,
            },
        }
    }

    /// The Arrow type this column writes.
    pub fn data_type(&self) -> DataType {
        match self {
            Col::Absent => DataType::Null,
            Col::Bool(_) => DataType::Boolean,
            Col::Int32(_) => DataType::Int32,
            Col::Int64(_) => DataType::Int64,
            Col::Float32(_) => DataType::Float32,
            Col::Float64(_) => DataType::Float64,
            Col::Decimal(_, p, s) => DataType::Decimal128(*p, *s as i8),
            Col::Text(..) | Col::Json(_) => DataType::Utf8,
            Col::Date(_) => DataType::Date32,
            Col::Timestamp(_, unit, tz) => DataType::Timestamp(arrow_unit(*unit), tz.as_deref().map(Arc::from)),

            Col::List { item, .. } => DataType::List(Arc::new(Field::new_list_field(item.data_type(), true))),
            Col::Struct { .. } => DataType::Struct(self.arrow_fields()),
        }
    }

    /// A struct column's Arrow fields (empty for other columns).
    pub fn arrow_fields(&self) -> ArrowFields {
        match self {
            Col::Struct { names, children, .. } => names
                .list
                .iter()
                .zip(children)
                .filter(|(_, child)| !matches!(child, Col::Absent))
                .map(|(field, child)| {
                    let mut metadata =
                        std::collections::HashMap::from([(META_SOURCE.to_string(), field.source.clone())]);
                    if field.variant.is_some()
                        && let Some(base) = names.position(&field.source, usize::MAX)
                    {
                        metadata.insert(META_VARIANT_OF.to_string(), names.list[base].name.clone());
                    }
                    Field::new(&field.name, child.data_type(), true).with_metadata(metadata)
                })
                .collect(),
            _ => ArrowFields::empty(),
        }
    }

    fn expected(&self) -> String {
        match self {
            Col::Absent => "no value yet (a column with no type)".into(),
            Col::Text(_, name) => (*name).to_string(),
            Col::Json(_) => "json".into(),
            Col::Decimal(_, p, s) => format!("decimal({p}, {s})"),
            Col::Timestamp(_, unit, tz) => FieldType::Timestamp { unit: *unit, tz: tz.clone() }.to_string(),
            Col::List { item, .. } => format!("list<{}>", item.expected()),
            Col::Struct { .. } => "struct".into(),
            other => match other.data_type() {
                DataType::Boolean => "bool".into(),
                DataType::Int32 => "int32".into(),
                DataType::Int64 => "int64".into(),
                DataType::Float32 => "float32".into(),
                DataType::Float64 => "float64".into(),
                DataType::Date32 => "date".into(),
                DataType::Timestamp(..) => "timestamp".into(),
                other => other.to_string(),
            },
        }
    }

    /// Whether the value at `idx` fits; returns the index after it. Nothing
    /// is allocated unless it does not fit. Records in `plan` the column
    /// each field goes to, for [`Col::append`] (clear it before each
    /// record; after an error its steps are not to be appended).
    ///
    /// # Errors
    /// The first [`Violation`], its path relative to this value (the
    /// caller prefixes its own segment).
    pub fn check(
        &self,
        rec: Rec<'_>,
        idx: usize,
        scratch: &mut String,
        plan: &mut Plan,
    ) -> Result<usize, Box<Violation>> {
        let tok = rec.tape.toks[idx];
        let next = rec.tape.skip(idx);
        let violation = |found: String| {
            Box::new(Violation { path: String::new(), expected: self.expected(), found, type_stands: false })
        };
        // No column type could hold the value: widening would not help.
        let unrepresentable = |found: String| Box::new(Violation { type_stands: true, ..*violation(found) });
        if tok == Tok::Null {
            return Ok(next);
        }
        match self {
            Col::Absent if is_empty_value(rec.tape, idx) => Ok(next),
            Col::Absent => Err(violation(found(rec, idx))),
            Col::Text(..) | Col::Json(_) => match tok {
                // A lone UTF-16 surrogate cannot become text; set aside
                // rather than replaced.
                Tok::Str { start, end, escaped: true } => match unescape(rec.text, start, end, true, scratch) {
                    Ok(_) => Ok(next),
                    Err(err) => Err(unrepresentable(format!("a string that is not valid Unicode ({})", err.message))),
                },
                _ => Ok(next),
            },
            Col::Bool(_) => match tok {
                Tok::Bool(_) => Ok(next),
                _ => Err(violation(found(rec, idx))),
            },
            Col::Int64(_) | Col::Int32(_) => {
                let ok = match tok {
                    // Up to 18 digits (and a sign) always fits an i64.
                    Tok::Num { start, end, int: true } if end - start <= 19 && matches!(self, Col::Int64(_)) => {
                        end - start <= 18 || rec.raw(idx).parse::<i64>().is_ok()
                    }
                    Tok::Num { int: true, .. } => match self {
                        Col::Int32(_) => rec.raw(idx).parse::<i32>().is_ok(),
                        _ => rec.raw(idx).parse::<i64>().is_ok(),
                    },
                    _ => false,
                };
                if ok { Ok(next) } else { Err(violation(found(rec, idx))) }
            }
            Col::Float64(_) => match tok {
                Tok::Num { int: true, .. } => Ok(next),
                // Without an exponent, fewer than 309 digits stay below
                // f64::MAX (1.8e308): finite without parsing.
                Tok::Num { start, end, .. } if end - start < 300 && !rec.raw(idx).contains(['e', 'E']) => Ok(next),
                Tok::Num { .. } if faithful_f64(rec.raw(idx)).is_some() => Ok(next),
                Tok::Num { .. } => Err(unrepresentable(found(rec, idx))),
                _ => Err(violation(found(rec, idx))),
            },
            Col::Float32(_) => match tok {
                Tok::Num { .. } if faithful_f32(rec.raw(idx)).is_some() => Ok(next),
                _ => Err(violation(found(rec, idx))),
            },
            Col::Decimal(_, p, s) => match decimal_text(rec, idx, scratch) {
                Some(text) => parse_decimal(text, *p, *s).map(|_| next).map_err(|err| violation(err.to_string())),
                None => Err(violation(found(rec, idx))),
            },
            Col::Date(_) => match string_of(rec, idx, scratch) {
                Some(text) if parse_date(text).is_some() => Ok(next),
                _ => Err(violation(found(rec, idx))),
            },
            Col::Timestamp(_, unit, _) => match timestamp_of(rec, idx, *unit, scratch) {
                Some(_) => Ok(next),
                None if matches!(tok, Tok::Num { int: true, .. }) && rec.raw(idx).parse::<i64>().is_ok() => {
                    Err(violation(format!("{}, outside the years 1 to 9999 that readers can show", found(rec, idx))))
                }
                None => Err(violation(found(rec, idx))),
            },
            Col::List { item, item_ty, exact, .. } => match tok {
                Tok::Arr { end, .. } => {
                    Self::check_items(item, item_ty.as_deref(), *exact, rec, (idx, end as usize), scratch, plan)
                }
                _ if item_ty.is_some() => Err(violation(found(rec, idx))),
                _ => item.check(rec, idx, scratch, plan),
            },
            Col::Struct { .. } => match tok {
                Tok::Obj { end, .. } => self.check_fields(rec, idx, end as usize, scratch, plan),
                _ => Err(violation(found(rec, idx))),
            },
        }
    }

    /// Makes this checker (a column built from a schema inferred from a
    /// page's first records only) also refuse, as needing a wider schema,
    /// the strings its columns take but an inference over every record
    /// could type otherwise: a timestamp in a text column (timestamps
    /// outnumbering text would make the column a timestamp), a timestamp
    /// with an offset in a timestamp column without its `__text`
    /// companion, in fields and in list items. Every other value a column
    /// takes is one [`Ty::from_seen`] gives the same type with
    /// (`convert::one_kind_each` keeps out the places it decides by counts).
    /// Only with timestamps detected (`target.timestamps: detect`).
    pub fn check_kinds_exactly(&mut self) {
        match self {
            Col::List { item, item_ty, exact, .. } => {
                *exact = item_ty.is_some();
                item.check_kinds_exactly();
            }
            Col::Struct { children, exact, .. } => {
                *exact = true;
                children.iter_mut().for_each(Col::check_kinds_exactly);
            }
            _ => {}
        }
    }

    /// Whether [`Col::check_kinds_exactly`] was called on this (struct)
    /// column.
    pub fn checks_kinds_exactly(&self) -> bool {
        matches!(self, Col::Struct { exact: true, .. })
    }

    /// [`Col::check`] of a list's items, `idx` its `[`, `end` past its `]`.
    fn check_items(
        item: &Col,
        item_ty: Option<&Ty>,
        exact: bool,
        rec: Rec<'_>,
        (idx, end): (usize, usize),
        scratch: &mut String,
        plan: &mut Plan,
    ) -> Result<usize, Box<Violation>> {
        let mut i = idx + 1;
        let mut n = 0;
        while i < end {
            let kind = kind_of(rec.text, rec.tape, i);
            if kind != 0 && item_ty.is_some_and(|ty| !ty.takes(kind) || (exact && !takes_exactly(ty, kind, false))) {
                return Err(Box::new(Violation {
                    path: format!("/{n}"),
                    expected: item.expected(),
                    found: found(rec, i),
                    type_stands: false,
                }));
            }
            i = item.check(rec, i, scratch, plan).map_err(|mut v| {
                v.path = format!("/{n}{}", v.path);
                v
            })?;
            n += 1;
        }
        Ok(rec.tape.skip(idx))
    }

    /// [`Col::check`] of an object against this struct, `idx` its `{`,
    /// `end` past its `}`: every key a field of it, none repeated, each
    /// value fitting its field (or its kind's variant column), every
    /// required field present.
    fn check_fields(
        &self,
        rec: Rec<'_>,
        idx: usize,
        end: usize,
        scratch: &mut String,
        plan: &mut Plan,
    ) -> Result<usize, Box<Violation>> {
        let Col::Struct { names, children, required, .. } = self else { return Ok(rec.tape.skip(idx)) };
        let mut i = idx + 1;
        let mut hint = 0;
        let mut named = Named::default();
        while i < end {
            let Tok::Str { start, end: key_end, escaped } = rec.tape.toks[i] else { break };
            let value = i + 1;
            let at = if escaped {
                let key = unescape(rec.text, start, key_end, escaped, scratch).unwrap_or("\u{FFFD}");
                names.position(key, hint)
            } else {
                names.position(&rec.text[start as usize..key_end as usize], hint)
            };
            let key_of = |scratch: &mut String| {
                let key = unescape(rec.text, start, key_end, escaped, scratch).unwrap_or("\u{FFFD}");
                key.replace('~', "~0").replace('/', "~1")
            };
            let Some(at) = at else {
                return Err(Box::new(Violation {
                    path: format!("/{}", key_of(scratch)),
                    expected: "a field of the dataset".into(),
                    found: "an undeclared field".into(),
                    type_stands: false,
                }));
            };
            hint = at + 1;
            if named.repeated(at, names.list.len(), rec.tape.toks[value] != Tok::Null) {
                // JSON leaves a repeated key's meaning open (RFC 8259
                // §4): readers keep the first or the last. One column
                // cannot hold both, so the record is set aside whole.
                return Err(Box::new(Violation {
                    path: format!("/{}", key_of(scratch)),
                    expected: "one value per key".into(),
                    found: "the key repeated in the same object".into(),
                    type_stands: true,
                }));
            }
            if let Err(mut v) = self.check_field(at, rec, value, scratch, plan) {
                v.path = format!("/{}{}", key_of(scratch), v.path);
                return Err(v);
            }
            i = rec.tape.skip(value);
        }
        if let Some(at) = named.missing(required, names, rec, idx, scratch) {
            return Err(Box::new(Violation {
                path: format!("/{}", names.list[at].source),
                expected: format!("{} (required)", children[at].expected()),
                found: "no value".into(),
                type_stands: true,
            }));
        }
        Ok(rec.tape.skip(idx))
    }

    /// [`Col::check`] of the value at `value` against this struct's field
    /// `at`: its own column, or the variant column of its kind (routed
    /// there, or when it does not fit the base column); a declared field's
    /// violation stands. The column chosen is `plan`'s next step.
    fn check_field(
        &self,
        at: usize,
        rec: Rec<'_>,
        value: usize,
        scratch: &mut String,
        plan: &mut Plan,
    ) -> Result<usize, Box<Violation>> {
        let Col::Struct { names, children, variants, declared, exact, .. } = self else {
            return Ok(rec.tape.skip(value));
        };
        // This field's step, then the steps inside its value.
        let step = plan.steps.len();
        plan.steps.push(0);
        let ty = &names.list[at].ty;
        if *exact && !declared[at] && matches!(rec.tape.toks[value], Tok::Str { .. }) {
            let kind = kind_of(rec.text, rec.tape, value);
            if !takes_exactly(ty, kind, variants[at][Variant::Text.slot()].is_some()) {
                return Err(Box::new(Violation {
                    path: String::new(),
                    expected: format!("{} (as the page's first records had it)", children[at].expected()),
                    found: found(rec, value),
                    type_stands: false,
                }));
            }
        }
        // A timestamp sent with an offset keeps its text in the `__text`
        // companion: without one, the value does not fit the table as it
        // is (a known table's one pass stops, and inference adds it; a
        // frozen table quarantines it), rather than lose the offset.
        if !declared[at]
            && matches!(ty, Ty::Timestamp)
            && variants[at][Variant::Text.slot()].is_none()
            && matches!(rec.tape.toks[value], Tok::Str { .. })
            && kind_of(rec.text, rec.tape, value) == Kinds::ZONED
        {
            return Err(Box::new(Violation {
                path: String::new(),
                expected: format!(
                    "{} (with a `__text` column for the offset it was sent with)",
                    children[at].expected()
                ),
                found: found(rec, value),
                type_stands: false,
            }));
        }
        let (to, checked) = match route(ty, declared[at], &variants[at], rec, value) {
            Route::Base => (at, children[at].check(rec, value, scratch, plan)),
            Route::Variant(to) => (to, children[to].check(rec, value, scratch, plan)),
            Route::Missing(kind) => (
                at,
                Err(Box::new(Violation {
                    path: String::new(),
                    expected: format!("{} (or a `__{}` variant column)", children[at].expected(), kind.suffix()),
                    found: found(rec, value),
                    type_stands: false,
                })),
            ),
        };
        // A value that does not fit the base column goes to its kind's
        // variant column.
        let (to, checked) = match checked {
            Err(v) if !v.type_stands && !declared[at] => {
                match variants[at][Variant::for_kind(kind_of(rec.text, rec.tape, value)).slot()] {
                    Some(to) => {
                        // The base column's attempt leaves no steps.
                        plan.steps.truncate(step + 1);
                        (to, children[to].check(rec, value, scratch, plan))
                    }
                    None => (to, Err(v)),
                }
            }
            other => (to, other),
        };
        // A timestamp sent with an offset: its text beside the instant
        // (the `__text` companion).
        let companion = to == at
            && variants[at][Variant::Text.slot()].is_some()
            && kind_of(rec.text, rec.tape, value) == Kinds::ZONED;
        // A child index is below the column cap (MAX_COLUMNS), far below
        // the companion bit.
        plan.steps[step] = u32::try_from(to).unwrap_or(!Plan::COMPANION) | if companion { Plan::COMPANION } else { 0 };
        checked.map_err(|mut v| {
            v.type_stands |= declared[at];
            v
        })
    }

    /// [`Col::check`] and [`Col::append`] in one walk, for the common case:
    /// appends the value at `idx` and returns the index after it, or `None`
    /// without saying why as soon as the value is anything but plainly
    /// taken (a violation, an escaped or repeated key, a value that goes to
    /// a variant column because its own column refused it, ...).
    ///
    /// On `None` the builders hold part of the value: the caller throws the
    /// chunk's builders away and builds the chunk again with check, then
    /// append (which quarantine and route exactly). Whatever this takes, it
    /// appends exactly what check, then append, would: the columns, values
    /// and nulls (the tests in `convert::tests` compare the files byte for
    /// byte). The steady state of a daily pipeline, every record fitting
    /// the dataset's schema, walks each record once instead of twice (the
    /// profile in docs/persist-bench.md had the two walks at a fifth of a
    /// page).
    pub fn append_checked(&mut self, rec: Rec<'_>, idx: usize, scratch: &mut String, plan: &mut Plan) -> Option<usize> {
        let tok = rec.tape.toks[idx];
        let next = rec.tape.skip(idx);
        if tok == Tok::Null {
            self.append_null();
            return Some(next);
        }
        match self {
            Col::Text(b, _) => match tok {
                Tok::Str { start, end, escaped } => {
                    b.append_value(unescape(rec.text, start, end, escaped, scratch).ok()?)
                }
                _ => b.append_value(rec.raw(idx)),
            },
            Col::Bool(b) => match tok {
                Tok::Bool(value) => b.append_value(value),
                _ => return None,
            },
            Col::Int64(b) => match tok {
                Tok::Num { int: true, .. } => b.append_value(rec.raw(idx).parse::<i64>().ok()?),
                _ => return None,
            },
            Col::Float64(b) => match tok {
                Tok::Num { .. } => b.append_value(faithful_f64(rec.raw(idx))?),
                _ => return None,
            },
            Col::Timestamp(b, unit, _) => {
                let unit = *unit;
                let value = timestamp_of(rec, idx, unit, scratch)?;
                // Seconds are stored as milliseconds (see `arrow_unit`).
                b.append_value(if unit == TimeUnit::Second { value * 1000 } else { value });
            }
            Col::List { offsets, nulls, item, item_ty, exact } => {
                let Tok::Arr { end, .. } = tok else {
                    // A declared list takes a single value as its one item.
                    if item_ty.is_some() {
                        return None;
                    }
                    item.append_checked(rec, idx, scratch, plan)?;
                    let last = *offsets.last().unwrap_or(&0);
                    offsets.push(last + 1);
                    nulls.append_non_null();
                    return Some(next);
                };
                if let Some(ty) = item_ty.as_deref()
                    && !items_fit(ty, *exact, rec, idx)
                {
                    return None;
                }
                let mut i = idx + 1;
                let mut count = 0;
                while i < end as usize {
                    i = item.append_checked(rec, i, scratch, plan)?;
                    count += 1;
                }
                let last = *offsets.last().unwrap_or(&0);
                offsets.push(last + count);
                nulls.append_non_null();
            }
            Col::Struct {
                names,
                children,
                variants,
                required,
                declared,
                stamps,
                order,
                exact,
                nulls,
                rows,
                pending,
            } => {
                let Tok::Obj { end, .. } = tok else { return None };
                settle(children, pending);
                let stamp = *rows + 1;
                let mut i = idx + 1;
                let mut prev = 0;
                // A repeated key, or a required field without a value, is
                // check's to refuse.
                let mut named = Named::default();
                while i < end as usize {
                    let Tok::Str { start, end: key_end, escaped: false } = rec.tape.toks[i] else { return None };
                    let value = i + 1;
                    let hint = order[prev];
                    let at = names.position(&rec.text[start as usize..key_end as usize], hint)?;
                    if at != hint {
                        order[prev] = at;
                    }
                    prev = at + 1;
                    let value_tok = rec.tape.toks[value];
                    if named.repeated(at, names.list.len(), value_tok != Tok::Null) {
                        return None;
                    }
                    let ty = &names.list[at].ty;
                    let companion = variants[at][Variant::Text.slot()];
                    if *exact
                        && !declared[at]
                        && matches!(value_tok, Tok::Str { .. })
                        && !exactly_taken(ty, rec, value, companion.is_some())
                    {
                        return None;
                    }
                    // An inferred timestamp column's RFC 3339 text: read
                    // once, into the instant (and its `__text` companion
                    // when sent with an offset), where route, check and
                    // append would each read it.
                    if let (Ty::Timestamp, Tok::Str { start, end: text_end, escaped: false }) = (ty, value_tok)
                        && !declared[at]
                        && let Col::Timestamp(b, TimeUnit::Microsecond, _) = &mut children[at]
                        && let Some((micros, zoned)) =
                            crate::infer::timestamp_micros(&rec.text[start as usize..text_end as usize])
                        && let Some(micros) = readable(micros, TimeUnit::Microsecond)
                    {
                        if zoned && companion.is_none() {
                            // The text as sent needs the `__text` column:
                            // check decides (see `check_field`).
                            return None;
                        }
                        b.append_value(micros);
                        stamps[at] = stamp;
                        if zoned && let Some(text) = companion {
                            stamps[text] = stamp;
                            children[text].append_checked(rec, value, scratch, plan)?;
                        }
                        i = rec.tape.skip(value);
                        continue;
                    }
                    let to = match route(ty, declared[at], &variants[at], rec, value) {
                        // A list whose items its column does not take goes
                        // to the field's `__json` column, as check decides:
                        // unless an item before the first such one does not
                        // fit with a violation that stands (`1e400`, a lone
                        // surrogate), which quarantines the record.
                        Route::Base
                            if let Col::List { item_ty: Some(item_ty), exact, .. } = &children[at]
                                && matches!(value_tok, Tok::Arr { .. })
                                && !items_fit(item_ty, *exact, rec, value) =>
                        {
                            match children[at].check(rec, value, scratch, plan) {
                                Err(violation) if !violation.type_stands && !declared[at] => {
                                    variants[at][Variant::for_kind(Kinds::ARRAY).slot()]?
                                }
                                _ => return None,
                            }
                        }
                        Route::Base => at,
                        Route::Variant(to) => to,
                        Route::Missing(_) => return None,
                    };
                    stamps[to] = stamp;
                    children[to].append_checked(rec, value, scratch, plan)?;
                    if to == at
                        && let Some(text) = companion
                        && kind_of(rec.text, rec.tape, value) == Kinds::ZONED
                    {
                        stamps[text] = stamp;
                        children[text].append_checked(rec, value, scratch, plan)?;
                    }
                    i = rec.tape.skip(value);
                }
                if named.missing(required, names, rec, idx, scratch).is_some() {
                    return None;
                }
                for (child, stamp_of) in children.iter_mut().zip(stamps.iter_mut()) {
                    if *stamp_of != stamp {
                        child.append_null();
                        *stamp_of = stamp;
                    }
                }
                nulls.append_non_null();
                *rows += 1;
            }
            // The other columns (declared types, decimals, dates, no type
            // yet): check, then append, on the one value.
            _ => {
                self.check(rec, idx, scratch, plan).ok()?;
                self.append(rec, idx, scratch, plan);
            }
        }
        Some(next)
    }

    /// Appends the value at `idx`, which [`Col::check`] accepted, following
    /// the `plan` that check recorded for it; returns the index after it.
    ///
    /// # Panics
    /// When `plan` is not what [`Col::check`] of this same value, against
    /// a column of the same type, recorded.
    pub fn append(&mut self, rec: Rec<'_>, idx: usize, scratch: &mut String, plan: &mut Plan) -> usize {
        let tok = rec.tape.toks[idx];
        let next = rec.tape.skip(idx);
        if tok == Tok::Null {
            self.append_null();
            return next;
        }
        match self {
            Col::Absent => {}
            Col::Text(b, _) => match tok {
                Tok::Str { start, end, escaped } => {
                    b.append_value(unescape(rec.text, start, end, escaped, scratch).unwrap_or("\u{FFFD}"))
                }
                _ => b.append_value(rec.raw(idx)),
            },
            Col::Json(b) => b.append_value(rec.raw(idx)),
            Col::Bool(b) => b.append_value(tok == Tok::Bool(true)),
            Col::Int64(b) => b.append_option(rec.raw(idx).parse::<i64>().ok()),
            Col::Int32(b) => b.append_option(rec.raw(idx).parse::<i32>().ok()),
            Col::Float64(b) => b.append_option(rec.raw(idx).parse::<f64>().ok()),
            Col::Float32(b) => b.append_option(rec.raw(idx).parse::<f32>().ok()),
            Col::Decimal(b, p, s) => {
                let value = decimal_text(rec, idx, scratch).and_then(|t| parse_decimal(t, *p, *s).ok());
                b.append_option(value)
            }
            Col::Date(b) => {
                let value = string_of(rec, idx, scratch).and_then(parse_date);
                b.append_option(value)
            }
            // Seconds are stored as milliseconds (see `arrow_unit`).
            Col::Timestamp(b, unit, _) => b.append_option(
                timestamp_of(rec, idx, *unit, scratch).map(|v| if *unit == TimeUnit::Second { v * 1000 } else { v }),
            ),
            Col::List { offsets, nulls, item, .. } => {
                let mut count = 0;
                if let Tok::Arr { end, .. } = tok {
                    let mut i = idx + 1;
                    while i < end as usize {
                        i = item.append(rec, i, scratch, plan);
                        count += 1;
                    }
                } else {
                    item.append(rec, idx, scratch, plan);
                    count = 1;
                }
                let last = *offsets.last().unwrap_or(&0);
                offsets.push(last + count);
                nulls.append_non_null();
            }
            Col::Struct { children, variants, stamps, nulls, rows, pending, .. } => {
                settle(children, pending);
                let stamp = *rows + 1;
                let mut i = idx + 1;
                let end = next;
                // Every key is a field of the struct, none repeated, each
                // going where check decided (`plan`).
                while i < end {
                    let value = i + 1;
                    let (to, companion) = plan.take();
                    stamps[to] = stamp;
                    children[to].append(rec, value, scratch, plan);
                    if companion && let Some(text) = variants.get(to).and_then(|v| v[Variant::Text.slot()]) {
                        stamps[text] = stamp;
                        children[text].append(rec, value, scratch, plan);
                    }
                    i = rec.tape.skip(value);
                }
                for (child, stamp_of) in children.iter_mut().zip(stamps.iter_mut()) {
                    if *stamp_of != stamp {
                        child.append_null();
                        *stamp_of = stamp;
                    }
                }
                nulls.append_non_null();
                *rows += 1;
            }
        }
        next
    }

    /// Appends a null.
    pub fn append_null(&mut self) {
        match self {
            Col::Absent => {}
            Col::Text(b, _) | Col::Json(b) => b.append_null(),
            Col::Bool(b) => b.append_null(),
            Col::Int64(b) | Col::Timestamp(b, ..) => b.append_null(),
            Col::Int32(b) => b.append_null(),
            Col::Float64(b) => b.append_null(),
            Col::Float32(b) => b.append_null(),
            Col::Decimal(b, ..) => b.append_null(),
            Col::Date(b) => b.append_null(),
            Col::List { offsets, nulls, .. } => {
                let last = *offsets.last().unwrap_or(&0);
                offsets.push(last);
                nulls.append_null();
            }
            // Stamps need no reset: every one is below the next row's.
            Col::Struct { nulls, rows, pending, .. } => {
                *rows += 1;
                *pending += 1;
                nulls.append_null();
            }
        }
    }

    /// Appends `n` nulls (a struct's children owed them, [`settle`]).
    fn append_nulls(&mut self, n: usize) {
        match self {
            Col::Absent => {}
            Col::Text(b, _) | Col::Json(b) => b.append_nulls(n),
            Col::Bool(b) => b.append_nulls(n),
            Col::Int64(b) | Col::Timestamp(b, ..) => b.append_nulls(n),
            Col::Int32(b) => b.append_nulls(n),
            Col::Float64(b) => b.append_nulls(n),
            Col::Float32(b) => b.append_nulls(n),
            Col::Decimal(b, ..) => b.append_nulls(n),
            Col::Date(b) => b.append_nulls(n),
            Col::List { offsets, nulls, .. } => {
                let last = *offsets.last().unwrap_or(&0);
                offsets.resize(offsets.len() + n, last);
                nulls.append_n_nulls(n);
            }
            Col::Struct { nulls, rows, pending, .. } => {
                *rows += n;
                *pending += n;
                nulls.append_n_nulls(n);
            }
        }
    }

    /// The values appended since the last finish, as an Arrow array.
    pub fn finish(&mut self) -> ArrayRef {
        match self {
            Col::Absent => Arc::new(arrow_array::NullArray::new(0)),
            Col::Text(b, _) | Col::Json(b) => Arc::new(b.finish()),
            Col::Bool(b) => Arc::new(b.finish()),
            Col::Int64(b) => Arc::new(b.finish()),
            Col::Int32(b) => Arc::new(b.finish()),
            Col::Float64(b) => Arc::new(b.finish()),
            Col::Float32(b) => Arc::new(b.finish()),
            Col::Decimal(b, p, s) => {
                let (p, s) = (*p, *s);
                let array = b.finish();
                Arc::new(array.with_precision_and_scale(p, s as i8).unwrap_or_else(|_| decimal_builder(p, s).finish()))
            }
            Col::Date(b) => Arc::new(b.finish()),
            Col::Timestamp(b, unit, tz) => {
                let values = b.finish();
                let tz: Option<Arc<str>> = tz.as_deref().map(Arc::from);
                let (_, buffer, nulls) = values.into_parts();
                match unit {
                    TimeUnit::Second | TimeUnit::Millisecond => {
                        Arc::new(arrow_array::TimestampMillisecondArray::new(buffer, nulls).with_timezone_opt(tz))
                    }
                    TimeUnit::Microsecond => {
                        Arc::new(arrow_array::TimestampMicrosecondArray::new(buffer, nulls).with_timezone_opt(tz))
                    }
                    TimeUnit::Nanosecond => {
                        Arc::new(arrow_array::TimestampNanosecondArray::new(buffer, nulls).with_timezone_opt(tz))
                    }
                }
            }
            Col::List { offsets, nulls, item, .. } => {
                let values = item.finish();
                let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
                let offsets = OffsetBuffer::new(ScalarBuffer::from(std::mem::replace(offsets, vec![0])));
                Arc::new(ListArray::new(field, offsets, values, nulls.finish()))
            }
            Col::Struct { .. } => Arc::new(self.finish_struct()),
        }
    }

    /// A struct column's values as a [`StructArray`].
    pub fn finish_struct(&mut self) -> StructArray {
        let fields = self.arrow_fields();
        match self {
            Col::Struct { children, nulls, rows, stamps, pending, .. } => {
                settle(children, pending);
                let arrays: Vec<ArrayRef> =
                    children.iter_mut().filter(|c| !matches!(c, Col::Absent)).map(Col::finish).collect();
                let len = std::mem::take(rows);
                stamps.iter_mut().for_each(|s| *s = 0);
                if arrays.is_empty() {
                    return StructArray::new_empty_fields(len, nulls.finish());
                }
                StructArray::new(fields, arrays, nulls.finish())
            }
            _ => StructArray::new_empty_fields(0, None),
        }
    }
}

/// Gives a struct's `children` the nulls it still owes them (`pending`,
/// see [`Col::Struct`]), before a value reaches one, or at finish.
#[inline]
fn settle(children: &mut [Col], pending: &mut usize) {
    if *pending > 0 {
        for child in children.iter_mut() {
            child.append_nulls(*pending);
        }
        *pending = 0;
    }
}

/// Whether every item of the array at `idx` is of a kind its list's
/// inferred `item_ty` takes (exactly, with `exact`): [`Col::check`]'s
/// first look at a list, before its items' own checks.
/// A JSON number's text as the `f64` it stands for, when that is faithful:
/// finite (not beyond `f64::MAX`, about 1.8e308) and not a non-zero number
/// rounded to zero (below the smallest subnormal, about 4.9e-324: `1e-400`).
/// `None` otherwise, and the record is quarantined, as for any value its
/// column cannot hold unaltered.
pub(crate) fn faithful_f64(text: &str) -> Option<f64> {
    let value = text.parse::<f64>().ok().filter(|v| v.is_finite())?;
    (value != 0.0 || !has_nonzero_digit(text)).then_some(value)
}

/// [`faithful_f64`] for a declared `float32` column (`f32::MAX`, about
/// 3.4e38; the smallest subnormal, about 1.4e-45).
fn faithful_f32(text: &str) -> Option<f32> {
    let value = text.parse::<f32>().ok().filter(|v| v.is_finite())?;
    (value != 0.0 || !has_nonzero_digit(text)).then_some(value)
}

/// Whether a number's digits before its exponent hold one that is not 0.
fn has_nonzero_digit(text: &str) -> bool {
    text.split(['e', 'E']).next().unwrap_or(text).bytes().any(|b| matches!(b, b'1'..=b'9'))
}

fn items_fit(item_ty: &Ty, exact: bool, rec: Rec<'_>, idx: usize) -> bool {
    let end = rec.tape.skip(idx);
    let mut i = idx + 1;
    while i < end {
        let tok = rec.tape.toks[i];
        // `takes_token` answers the common case without the item's exact
        // kind (what it takes, `ty.takes(kind)` does); `exact` asks about
        // strings.
        if !takes_token(item_ty, rec.text, tok) {
            let kind = kind_of(rec.text, rec.tape, i);
            if kind != 0 && (!item_ty.takes(kind) || (exact && !takes_exactly(item_ty, kind, false))) {
                return false;
            }
        } else if exact && matches!(tok, Tok::Str { .. }) && !exactly_taken(item_ty, rec, i, false) {
            return false;
        }
        i = rec.tape.skip(i);
    }
    true
}

/// Where a struct field's value goes.
enum Route {
    /// The field's own column.
    Base,
    /// The variant column at this position.
    Variant(usize),
    /// A variant column the table schema does not have yet.
    Missing(Variant),
}

/// The column a value of a field of type `ty` goes to: its own when the
/// column takes the value's kind (or is declared, or the value is null),
/// else the variant column of the value's kind.
fn route(ty: &Ty, declared: bool, variants: &[Option<usize>; 7], rec: Rec<'_>, value: usize) -> Route {
    if declared || takes_token(ty, rec.text, rec.tape.toks[value]) {
        return Route::Base;
    }
    let kind = kind_of(rec.text, rec.tape, value);
    if kind == 0 || ty.takes(kind) || !ty.is_physical() {
        return Route::Base;
    }
    let variant = Variant::for_kind(kind);
    match variants[variant.slot()] {
        Some(to) => Route::Variant(to),
        None => Route::Missing(variant),
    }
}

/// Whether a column of type `ty` surely takes the value `tok` as it is,
/// seen from the token alone: the common case of [`route`], decided
/// without the value's exact kind (no number parsed, no text tried as a
/// timestamp; the profile in docs/persist-bench.md had [`kind_of`] at 7 %
/// of a page). `false` means "ask [`kind_of`]", not "does not take it".
/// Each `true` here is a case where `ty.takes(kind_of(tok))` holds.
fn takes_token(ty: &Ty, text: &str, tok: Tok) -> bool {
    match (ty, tok) {
        (_, Tok::Null) | (Ty::Json | Ty::Declared { .. }, _) => true,
        // Text takes every string kind (plain, timestamp, zoned).
        (Ty::Text, Tok::Str { .. }) => true,
        (Ty::Bool, Tok::Bool(_)) | (Ty::Struct { .. }, Tok::Obj { .. }) | (Ty::List { .. }, Tok::Arr { .. }) => true,
        (Ty::Float, Tok::Num { int: false, .. }) => true,
        // Up to 15 digits is `Kinds::INT` (see `int_kind`), which integer,
        // big-integer and float columns all take.
        (Ty::Int | Ty::BigInt { .. } | Ty::Float, Tok::Num { start, end, int: true }) => {
            let digits = &text.as_bytes()[start as usize..end as usize];
            digits.len() - usize::from(digits.first() == Some(&b'-')) <= 15
        }
        _ => false,
    }
}

/// Whether a column of inferred type `ty` takes a value of `kind` as
/// [`Ty::from_seen`] would type a place that held both (for
/// [`Col::check_kinds_exactly`]): text takes no timestamp, and a timestamp
/// column takes a timestamp with an offset only beside its `__text`
/// companion (`companion`). Only strings differ; other kinds are taken.
fn takes_exactly(ty: &Ty, kind: u16, companion: bool) -> bool {
    match ty {
        Ty::Text => !matches!(kind, Kinds::TIMESTAMP | Kinds::ZONED),
        Ty::Timestamp => kind != Kinds::ZONED || companion,
        _ => true,
    }
}

/// [`takes_exactly`] of the string at `idx` for a column of inferred type
/// `ty`, asking for the string's kind only where the answer depends on it:
/// a text column (is it a timestamp?), a timestamp column without its
/// `__text` companion (is it one with an offset? Not when it ends in `Z`).
fn exactly_taken(ty: &Ty, rec: Rec<'_>, idx: usize, companion: bool) -> bool {
    match (ty, rec.tape.toks[idx]) {
        (Ty::Text, _) => takes_exactly(ty, kind_of(rec.text, rec.tape, idx), companion),
        (Ty::Timestamp, _) if companion => true,
        (Ty::Timestamp, Tok::Str { end, .. }) if rec.text.as_bytes().get(end as usize - 1) == Some(&b'Z') => true,
        (Ty::Timestamp, _) => takes_exactly(ty, kind_of(rec.text, rec.tape, idx), companion),
        _ => true,
    }
}

/// Whether the value at `idx` is `null`, `{}`, `[]` or a container of
/// only such values: no value for a column with no type yet.
fn is_empty_value(tape: &Tape, idx: usize) -> bool {
    match tape.toks[idx] {
        Tok::Null => true,
        Tok::Obj { end, .. } => {
            let mut i = idx + 1;
            while i < end as usize {
                if !is_empty_value(tape, i + 1) {
                    return false;
                }
                i = tape.skip(i + 1);
            }
            true
        }
        Tok::Arr { end, .. } => {
            let mut i = idx + 1;
            while i < end as usize {
                if !is_empty_value(tape, i) {
                    return false;
                }
                i = tape.skip(i);
            }
            true
        }
        _ => false,
    }
}

/// The fields an object has named so far, for [`Col::check_fields`] and
/// [`Col::append_checked`]: a repeated key is refused, and a required field
/// must have a non-null value. Bitmasks for the first 64 fields; beyond
/// them, a vector allocated at the first such field, and a look-up by name.
#[derive(Default)]
struct Named {
    /// Fields `0..64` named.
    seen: u64,
    /// Fields `0..64` named with a non-null value.
    valued: u64,
    /// Fields from 64 on named (empty until one is).
    seen_high: Vec<bool>,
}

impl Named {
    /// Marks field `at` of a struct of `fields` fields as named (with a
    /// non-null value when `valued`); true when this object named it
    /// before: a repeated key.
    #[inline(always)]
    fn repeated(&mut self, at: usize, fields: usize, valued: bool) -> bool {
        if at < 64 {
            let bit = 1u64 << at;
            let repeated = self.seen & bit != 0;
            self.seen |= bit;
            self.valued |= u64::from(valued) << at;
            repeated
        } else {
            if self.seen_high.is_empty() {
                self.seen_high = vec![false; fields];
            }
            std::mem::replace(&mut self.seen_high[at], true)
        }
    }

    /// The first of the `required` fields that the object at `idx` has no
    /// non-null value for, once all its keys are marked.
    #[inline]
    fn missing(
        &self,
        required: &[bool],
        names: &Fields,
        rec: Rec<'_>,
        idx: usize,
        scratch: &mut String,
    ) -> Option<usize> {
        required.iter().enumerate().filter(|(_, r)| **r).map(|(at, _)| at).find(|&at| {
            if at < 64 { self.valued & (1 << at) == 0 } else { !has_value(rec, idx, &names.list[at].source, scratch) }
        })
    }
}

/// Whether the object at `idx` has a non-null value for `name`.
fn has_value(rec: Rec<'_>, idx: usize, name: &str, scratch: &mut String) -> bool {
    let Tok::Obj { end, .. } = rec.tape.toks[idx] else { return false };
    let mut i = idx + 1;
    while i < end as usize {
        let Tok::Str { start, end: key_end, escaped } = rec.tape.toks[i] else { return false };
        if unescape(rec.text, start, key_end, escaped, scratch).is_ok_and(|k| k == name) {
            return rec.tape.toks[i + 1] != Tok::Null;
        }
        i = rec.tape.skip(i + 1);
    }
    false
}

fn found(rec: Rec<'_>, idx: usize) -> String {
    let tok = rec.tape.toks[idx];
    let raw = rec.raw(idx);
    match tok {
        Tok::Obj { .. } | Tok::Arr { .. } => kind_name(&tok).to_string(),
        _ if raw.len() > 40 => format!("{} {}…", kind_name(&tok), &raw[..raw.floor_char_boundary(40)]),
        _ => format!("{} {raw}", kind_name(&tok)),
    }
}

fn decimal_builder(precision: u8, scale: u8) -> Decimal128Builder {
    Decimal128Builder::new()
        .with_precision_and_scale(precision, scale as i8)
        .unwrap_or_else(|_| Decimal128Builder::new())
}

/// The unit a declared timestamp is stored in: its own, except seconds as
/// milliseconds (Parquet's TIMESTAMP logical type has no seconds unit, so
/// arrow-rs would write plain INT64 that readers show as a number).
fn arrow_unit(unit: TimeUnit) -> ArrowUnit {
    match unit {
        TimeUnit::Second | TimeUnit::Millisecond => ArrowUnit::Millisecond,
        TimeUnit::Microsecond => ArrowUnit::Microsecond,
        TimeUnit::Nanosecond => ArrowUnit::Nanosecond,
    }
}

fn string_of<'a>(rec: Rec<'a>, idx: usize, scratch: &'a mut String) -> Option<&'a str> {
    match rec.tape.toks[idx] {
        Tok::Str { start, end, escaped } => unescape(rec.text, start, end, escaped, scratch).ok(),
        _ => None,
    }
}

/// A number's text, or a string holding a number (vendors often quote decimals).
fn decimal_text<'a>(rec: Rec<'a>, idx: usize, scratch: &'a mut String) -> Option<&'a str> {
    match rec.tape.toks[idx] {
        Tok::Num { start, end, .. } => Some(&rec.text[start as usize..end as usize]),
        Tok::Str { .. } => string_of(rec, idx, scratch).map(str::trim),
        _ => None,
    }
}

/// Decimal text that does not fit a `decimal(precision, scale)` column
/// exactly, with the text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecimalError {
    /// Not a plain decimal number (`[+-]digits[.digits]`; exponents are
    /// refused).
    #[error("{text:?}, not a plain decimal number")]
    NotPlain {
        /// The text.
        text: String,
    },
    /// More significant fraction digits than the scale: it would be rounded.
    #[error("{text} with {digits} fraction digits (it would be rounded)")]
    Rounded {
        /// The text.
        text: String,
        /// Its fraction digits, trailing zeros left out.
        digits: usize,
        /// The column's scale.
        scale: u8,
    },
    /// More integer digits than `precision - scale`.
    #[error("{text}, more than {max_digits} integer digits")]
    TooManyDigits {
        /// The text.
        text: String,
        /// `precision - scale`.
        max_digits: u8,
    },
    /// The unscaled value does not fit an `i128`.
    #[error("{text}: too many digits")]
    Overflow {
        /// The text.
        text: String,
    },
}

/// Parses decimal text exactly into an unscaled `i128`.
///
/// # Errors
/// [`DecimalError`] with the text when it is not a plain decimal number
/// (exponents are refused), has more fraction digits than `scale` (it would
/// be rounded) or more digits than `precision`.
pub fn parse_decimal(text: &str, precision: u8, scale: u8) -> Result<i128, DecimalError> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return Err(DecimalError::NotPlain { text: text.to_string() });
    }
    let frac_trimmed = frac.trim_end_matches('0');
    if frac_trimmed.len() > scale as usize {
        return Err(DecimalError::Rounded { text: text.to_string(), digits: frac_trimmed.len(), scale });
    }
    let int = int.trim_start_matches('0');
    if int.len() + scale as usize > precision as usize {
        return Err(DecimalError::TooManyDigits {
            text: text.to_string(),
            max_digits: precision.saturating_sub(scale),
        });
    }
    let mut digits = String::with_capacity(int.len() + scale as usize);
    digits.push_str(int);
    digits.push_str(frac_trimmed);
    for _ in frac_trimmed.len()..scale as usize {
        digits.push('0');
    }
    let value: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| DecimalError::Overflow { text: text.to_string() })?
    };
    Ok(if negative { -value } else { value })
}

fn parse_date(text: &str) -> Option<i32> {
    let date = NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
    i32::try_from((date - epoch).num_days()).ok()
}

/// A timestamp in UTC: RFC 3339 text, a naive `YYYY-MM-DD[T ]HH:MM:SS[.f]`
/// (taken as UTC) or a date.
pub fn parse_timestamp(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Some(t.with_timezone(&Utc));
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, format) {
            return Some(t.and_utc());
        }
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d").ok().and_then(|d| d.and_hms_opt(0, 0, 0)).map(|t| t.and_utc())
}

/// 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z in seconds since the
/// epoch: the instants readers can show (Athena/Trino and Spark timestamps,
/// and Arrow's casts to text, stop at four-digit years).
const READABLE_SECONDS: std::ops::RangeInclusive<i64> = -62_135_596_800..=253_402_300_799;

/// The value at `idx` in `unit` since the epoch: an integer as it is, or
/// text by [`parse_timestamp`]; `None` when it is neither, or falls outside
/// [`READABLE_SECONDS`].
fn timestamp_of(rec: Rec<'_>, idx: usize, unit: TimeUnit, scratch: &mut String) -> Option<i64> {
    let value = match rec.tape.toks[idx] {
        Tok::Num { int: true, .. } => rec.raw(idx).parse::<i64>().ok()?,
        // The common case, RFC 3339 text (`Z` or an offset) into
        // microseconds, without chrono's general parser.
        Tok::Str { start, end, escaped: false }
            if unit == TimeUnit::Microsecond
                && let Some((micros, _)) = crate::infer::timestamp_micros(&rec.text[start as usize..end as usize]) =>
        {
            micros
        }
        Tok::Str { .. } => {
            let t = parse_timestamp(string_of(rec, idx, scratch)?)?;
            match unit {
                TimeUnit::Second => t.timestamp(),
                TimeUnit::Millisecond => t.timestamp_millis(),
                TimeUnit::Microsecond => t.timestamp_micros(),
                TimeUnit::Nanosecond => t.timestamp_nanos_opt()?,
            }
        }
        _ => return None,
    };
    readable(value, unit)
}

/// `value` (in `unit` since the epoch) when it is within
/// [`READABLE_SECONDS`].
fn readable(value: i64, unit: TimeUnit) -> Option<i64> {
    let per_second = match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        // Every i64 of nanoseconds is within 1677..2262.
        TimeUnit::Nanosecond => return Some(value),
    };
    let (first, last) = (READABLE_SECONDS.start() * per_second, (READABLE_SECONDS.end() + 1) * per_second - 1);
    (first..=last).contains(&value).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_taken_at_sight_is_a_kind_the_column_takes() {
        let values = [
            "null",
            "true",
            "0",
            "-7",
            "123456789012345",
            "-123456789012345",
            "1234567890123456",
            "9223372036854775807",
            "-9223372036854775809",
            "123456789012345678901234567890",
            "1.5",
            "1e400",
            "\"text\"",
            "\"2026-12-05T10:00:00Z\"",
            "\"2026-12-05T10:00:00+01:00\"",
            "\"a\\u00e9\"",
            "{}",
            "{\"a\": 1}",
            "[]",
            "[1]",
        ];
        let types = [
            Ty::Null,
            Ty::Bool,
            Ty::Int,
            Ty::BigInt { digits: 30 },
            Ty::BigInt { digits: 40 },
            Ty::Float,
            Ty::Text,
            Ty::Timestamp,
            Ty::Json,
            Ty::List { item: Box::new(Ty::Int) },
            Ty::Struct { fields: Fields::default() },
        ];
        let mut tape = Tape::default();
        for value in values {
            tape.parse(value).expect("valid JSON");
            let (tok, kind) = (tape.toks[0], kind_of(value, &tape, 0));
            for ty in &types {
                if takes_token(ty, value, tok) {
                    assert!(kind == 0 || ty.takes(kind), "{ty:?} takes {value} at sight but not by its kind {kind}");
                }
            }
        }
    }

    #[test]
    fn a_struct_owes_its_children_their_nulls_until_a_value_or_the_finish() {
        let field =
            |name: &str, ty: Ty| crate::infer::Field { name: name.into(), source: name.into(), ty, variant: None };
        let inner = Ty::Struct { fields: Fields::from_list(vec![field("c", Ty::Text)]) };
        let meta = Ty::Struct {
            fields: Fields::from_list(vec![
                field("a", Ty::Int),
                field("b", inner),
                field("l", Ty::List { item: Box::new(Ty::Int) }),
            ]),
        };
        let record = Ty::Struct { fields: Fields::from_list(vec![field("id", Ty::Int), field("meta", meta)]) };
        let mut col = Col::new(&record);
        let mut scratch = String::new();
        let mut lines = |col: &mut Col, records: &[&str]| -> Vec<String> {
            for text in records {
                assert!(col.append_direct(text, &mut scratch).is_some(), "{text}");
            }
            let batch = arrow_array::RecordBatch::from(col.finish_struct());
            let mut out = arrow_json::LineDelimitedWriter::new(Vec::new());
            out.write(&batch).expect("json");
            out.finish().expect("json");
            String::from_utf8(out.into_inner()).expect("utf-8").lines().map(String::from).collect()
        };
        // Nulls owed at a value (meta after two records without it; b
        // after one), and at the finish (meta's last, b's nested ones).
        let first = [
            r#"{"id":1}"#,
            r#"{"id":2}"#,
            r#"{"id":3,"meta":{"a":1,"b":{"c":"x"},"l":[1,2]}}"#,
            r#"{"id":4,"meta":{"a":2}}"#,
            r#"{"id":5,"meta":null}"#,
            r#"{"id":6}"#,
        ];
        assert_eq!(
            lines(&mut col, &first),
            [
                r#"{"id":1}"#,
                r#"{"id":2}"#,
                r#"{"id":3,"meta":{"a":1,"b":{"c":"x"},"l":[1,2]}}"#,
                r#"{"id":4,"meta":{"a":2}}"#,
                r#"{"id":5}"#,
                r#"{"id":6}"#,
            ]
        );
        // The builders go on after a finish with nothing owed.
        let second = [r#"{"id":7,"meta":{"b":{"c":"y"}}}"#, r#"{"id":8}"#, r#"{"id":9,"meta":{"b":null,"l":[]}}"#];
        assert_eq!(
            lines(&mut col, &second),
            [r#"{"id":7,"meta":{"b":{"c":"y"}}}"#, r#"{"id":8}"#, r#"{"id":9,"meta":{"l":[]}}"#]
        );
    }

    #[test]
    fn decimals_parse_exactly_or_say_why() {
        assert_eq!(parse_decimal("12.5", 10, 2), Ok(1250));
        assert_eq!(parse_decimal("-0.10", 10, 2), Ok(-10));
        assert_eq!(parse_decimal("123456789012345678901234567890", 38, 0), Ok(123_456_789_012_345_678_901_234_567_890));
        assert!(parse_decimal("1.234", 10, 2).expect_err("rounding").to_string().contains("would be rounded"));
        assert!(parse_decimal("1e5", 10, 2).expect_err("exponent").to_string().contains("not a plain decimal"));
        assert!(
            parse_decimal("123456789", 10, 2).expect_err("too big").to_string().contains("more than 8 integer digits")
        );
    }

    #[test]
    fn timestamps_accept_rfc3339_naive_and_dates() {
        let t = parse_timestamp("2026-11-29T06:00:00+02:00").expect("rfc3339");
        assert_eq!(t.to_rfc3339(), "2026-11-29T04:00:00+00:00");
        assert!(parse_timestamp("2026-11-29 06:00:00.250").is_some());
        assert!(parse_timestamp("2026-11-29").is_some());
        assert!(parse_timestamp("yesterday").is_none());
    }
}

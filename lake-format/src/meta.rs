//! Arrow metadata names the lake's files and published schema carry.
//!
//! Persist writes them; the committer and the readers read them. Every
//! value is text (Arrow metadata is a string map).

/// Field metadata: the record key a column holds (the column's name may
/// differ: sanitised, numbered, or a variant).
pub const META_SOURCE: &str = "tributary.source";

/// Field metadata set to `true` on columns holding each value's JSON text
/// (`__json` variants, declared `json` columns).
pub const META_JSON: &str = "tributary.json";

/// Field metadata: on a variant column, the name of its base column.
pub const META_VARIANT_OF: &str = "tributary.variant_of";

/// Field metadata set to `true` on the lineage columns
/// ([`crate::lineage`]).
pub const META_LINEAGE: &str = "tributary.lineage";

/// Field metadata set to `true` on the Hive partition columns of the
/// published schema.
pub const META_PARTITION: &str = "tributary.partition";

/// Field metadata of a published partition column: how its values are
/// made, [`crate::partition::PartitionKind::as_str`] (`day`, `hour` or `value`).
pub const META_PARTITION_KIND: &str = "tributary.partition_kind";

/// Schema metadata of the published schema: the table schema's version
/// (1 for the first schema, one more at every change).
pub const META_VERSION: &str = "tributary.version";

/// Schema metadata of the published schema: an Iceberg dataset's
/// `target.partition_by` as written (`day(/created_at),hour(/seen)`),
/// which the committer turns into partition transforms of the table.
pub const META_PARTITION_BY: &str = "tributary.partition_by";

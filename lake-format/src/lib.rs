//! The lake's vocabulary, in one place: what the writer (Persist), the
//! committer (`tributary-iceberg`) and the readers (`lakequery`, and the
//! independent readers the tests use) must agree on.
//!
//! | module | what |
//! |---|---|
//! | [`meta`] | Arrow field and schema metadata names (`tributary.*`) |
//! | [`lineage`] | the lineage columns every row ends with |
//! | [`partition`] | Hive partition columns, escaping and the default partition |
//! | [`codec`] | the published schema (`_schema/<dataset>.arrow`) as an Arrow IPC stream |
//! | [`align`] | a file's batch read as the table's schema |
//! | [`variant`] | variant columns' suffixes and families |
//!
//! Arrow only: no Parquet, no DataFusion, no Iceberg, so every layer that
//! touches the lake can depend on it.

pub mod align;
pub mod codec;
pub mod lineage;
pub mod meta;
pub mod partition;
#[cfg(test)]
mod partition_props;
pub mod variant;

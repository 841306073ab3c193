//! Persist: a page of records -> Arrow -> Parquet in the lake.
//!
//! A short pipeline of functions you can test alone:
//! load (inline or claim check) -> split (JSON objects vs records to
//! quarantine) -> infer the schema over *all* records of the page -> decode
//! to Arrow record batches -> write Parquet (zstd) -> put at the page's
//! deterministic key. The raw page (the `PersistMessage` with its records
//! inline) is written first under `raw/`, so history can be replayed through
//! the same code; a page receipt with the counts is written last.
//!
//! Keys (see `tributary_core::keys`): `<dataset>/dt=<run_date>/<pipeline>-<run_id>-<page>.parquet`
//! — a redelivered message overwrites the same objects.
//!
//! The Lambda binary's settings come from its environment through
//! [`LambdaConfig::from_env`].
//!
//! The rooms: `main.rs` (the Lambda's wiring), this face, `deps.rs` (the
//! settings and ports the handler is given), `config.rs` (the environment
//! variables), `error.rs`, `handler.rs` (the per-message function as named
//! steps), `table.rs` (the dataset's table schema in the lake), and the
//! converter: `source.rs` (framing), `infer.rs` (schema inference and
//! evolution), `build.rs` (Arrow builders), `convert.rs` (the two passes),
//! `dictionary.rs` (which columns of a file get a Parquet dictionary),
//! `publish.rs` (the published schema and catalog table), `coalesce.rs`
//! (run completion), `page.rs` (whole-page conversion for tools).

mod build;
pub mod coalesce;
mod config;
mod convert;
mod deps;
mod dictionary;
mod error;
mod handler;
mod infer;
use tributary_core::json::tape as json;
pub mod page;
pub mod publish;
mod source;
pub mod stream;
pub mod stream_replay;
mod table;
mod tenancy;

pub use config::{LambdaConfig, TableOptimizers};
pub use convert::{
    ConvertError, DEFAULT_MAX_COLUMNS, DEFAULT_MAX_PAGE_BYTES, DEFAULT_MAX_PAGE_RECORDS, DICTIONARY_PAGE_BYTES,
    MAX_WORKERS, NO_COLUMN_YET, PageLimits, PageOutput, PageSettings, WriterConfig, convert_page, infer_page,
};
pub use deps::{Deps, PersistConfig};
pub use error::PersistError;
pub use handler::{finish_run, handle_sqs, persist_page};
pub use infer::{Ty, Variant};
pub use page::{convert_to_file, convert_with_schema, records_to_parquet};
pub use source::PageSource;
pub use table::{SCHEMA_WRITE_ATTEMPTS, read_schema};

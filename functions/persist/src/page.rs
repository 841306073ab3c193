//! Whole-page conversion to one stream: a payload (bytes or a file) in, one
//! Parquet file out. Used by the benchmark and by tools; Persist's handler
//! uses [`crate::convert_page`] directly, with partitioning, rotation,
//! quarantine files and the lake's schema.

use std::io::Write;

use chrono::NaiveDate;
use contracts::{PayloadFormat, PersistTarget};

use crate::convert::{ConvertError, PageLimits, PageSettings, WriterConfig, convert_page};
pub use crate::source::PageSource;

/// What a conversion did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConvertStats {
    /// Records found in the payload.
    pub records_in: u64,
    /// Rows written to Parquet.
    pub rows_written: u64,
    /// Records set aside (not objects, or violating the schema).
    pub quarantined: u64,
    /// Payload bytes read (after decompression).
    pub input_bytes: u64,
}

/// Converts a payload to one Parquet stream written to `writer` (the
/// target's partitioning is ignored: every record goes to one file;
/// quarantined records are only counted), within Persist's default
/// [`PageLimits`].
///
/// # Errors
/// [`ConvertError`] for unreadable payloads and writer failures.
pub fn convert_to_writer<W: Write + Send>(
    source: &PageSource,
    format: &PayloadFormat,
    target: &PersistTarget,
    writer: W,
) -> Result<ConvertStats, ConvertError> {
    convert_with_schema(source, format, target, None, writer)
}

/// As [`convert_to_writer`], for a dataset whose schema is `lake` (a page
/// that fits it is written in one pass; see [`crate::convert_page`]).
///
/// # Errors
/// As [`convert_to_writer`].
pub fn convert_with_schema<W: Write + Send>(
    source: &PageSource,
    format: &PayloadFormat,
    target: &PersistTarget,
    lake: Option<&crate::Ty>,
    mut writer: W,
) -> Result<ConvertStats, ConvertError> {
    let target = PersistTarget { partition: Default::default(), ..target.clone() };
    let files = contracts::FileSettings { max_rows: None, max_bytes: None, ..target.files.clone() };
    let target = PersistTarget { files, ..target };
    let temp_dir = tempfile::tempdir()?;
    let config = WriterConfig::default();
    let settings = PageSettings {
        target: &target,
        lineage: None,
        lake_schema: lake,
        run_date: NaiveDate::default(),
        writer: &config,
        limits: PageLimits::default(),
        temp_dir: temp_dir.path(),
    };
    let output = convert_page(source, format, settings)?;
    for file in &output.files {
        std::io::copy(&mut std::fs::File::open(&file.path)?, &mut writer)?;
    }
    Ok(ConvertStats {
        records_in: output.records_in,
        rows_written: output.rows_written,
        quarantined: output.quarantined(),
        input_bytes: output.input_bytes,
    })
}

/// Converts JSON records to one Parquet file in memory, every column
/// inferred, zstd (a convenience for tests and tools; Persist streams).
///
/// # Errors
/// As [`convert_to_writer`].
pub fn records_to_parquet(records: &[serde_json::Value], config: &WriterConfig) -> Result<Vec<u8>, ConvertError> {
    let bytes = serde_json::to_vec(records).map_err(std::io::Error::other)?;
    let mut out = Vec::new();
    let _ = config;
    convert_to_writer(
        &PageSource::Bytes(bytes::Bytes::from(bytes)),
        &PayloadFormat::default(),
        &PersistTarget::new("records"),
        &mut out,
    )?;
    Ok(out)
}

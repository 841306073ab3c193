//! Whole-page conversion to one stream: a payload (bytes or a file) in, one
//! Parquet file out. Used by the benchmark and by tools; Persist's handler
//! uses [`crate::convert_page`] directly, with partitioning, rotation,
//! quarantine files and the lake's schema.

use std::io::Write;
use std::path::Path;

use chrono::NaiveDate;
use contracts::{PayloadFormat, PersistTarget};

use crate::convert::{ConvertError, PageLimits, PageOutput, PageSettings, WriterConfig, convert_page};
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
    let temp_dir = tempfile::tempdir()?;
    let output = convert_in(source, format, target, lake, temp_dir.path())?;
    for file in &output.files {
        std::io::copy(&mut std::fs::File::open(&file.path)?, &mut writer)?;
    }
    Ok(stats(&output))
}

/// As [`convert_with_schema`], to the Parquet file at `path` (replaced
/// when there): the file is written in a temporary directory beside
/// `path` and renamed into place, not copied, as a tool writing one file
/// would. An empty file when no record became a row.
///
/// # Errors
/// As [`convert_to_writer`]; also when no directory can be made beside
/// `path`.
pub fn convert_to_file(
    source: &PageSource,
    format: &PayloadFormat,
    target: &PersistTarget,
    lake: Option<&crate::Ty>,
    path: &Path,
) -> Result<ConvertStats, ConvertError> {
    let beside = path.parent().filter(|dir| !dir.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let temp_dir = tempfile::tempdir_in(beside)?;
    let output = convert_in(source, format, target, lake, temp_dir.path())?;
    match output.files.as_slice() {
        [one] => std::fs::rename(&one.path, path)?,
        files => {
            let mut writer = std::fs::File::create(path)?;
            for file in files {
                std::io::copy(&mut std::fs::File::open(&file.path)?, &mut writer)?;
            }
        }
    }
    Ok(stats(&output))
}

/// Converts a page into files in `temp_dir`, ignoring the target's
/// partitioning and file limits (one file, or none without rows).
fn convert_in(
    source: &PageSource,
    format: &PayloadFormat,
    target: &PersistTarget,
    lake: Option<&crate::Ty>,
    temp_dir: &Path,
) -> Result<PageOutput, ConvertError> {
    let target = PersistTarget { partition: Default::default(), ..target.clone() };
    let files = contracts::FileSettings { max_rows: None, max_bytes: None, ..target.files.clone() };
    let target = PersistTarget { files, ..target };
    let config = WriterConfig::default();
    let settings = PageSettings {
        target: &target,
        lineage: None,
        lake_schema: lake,
        run_date: NaiveDate::default(),
        writer: &config,
        limits: PageLimits::default(),
        temp_dir,
    };
    convert_page(source, format, settings)
}

fn stats(output: &PageOutput) -> ConvertStats {
    ConvertStats {
        records_in: output.records_in,
        rows_written: output.rows_written,
        quarantined: output.quarantined(),
        input_bytes: output.input_bytes,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_converted_to_a_file_is_renamed_into_place_with_nothing_left_beside_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("out.parquet");
        std::fs::write(&path, b"an older file, replaced").expect("write");
        let page = PageSource::Bytes(bytes::Bytes::from_static(b"[{\"a\": 1}, {\"a\": 2}"));
        let err = convert_to_file(&page, &PayloadFormat::default(), &PersistTarget::new("t"), None, &path);
        assert!(err.is_err(), "an array not closed fails the page");
        assert_eq!(std::fs::read(&path).expect("read"), b"an older file, replaced", "a failed page replaces nothing");
        let page = PageSource::Bytes(bytes::Bytes::from_static(b"{\"a\": 1}\n{\"a\": 2, \"b\": \"x\"}\n"));
        let stats = convert_to_file(&page, &PayloadFormat::default(), &PersistTarget::new("t"), None, &path)
            .expect("converted");
        assert_eq!((stats.records_in, stats.rows_written, stats.quarantined), (2, 2, 0));
        let file = std::fs::File::open(&path).expect("the file is there");
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
            .expect("a Parquet file")
            .build()
            .expect("reader");
        let batches: Vec<_> = reader.collect::<Result<_, _>>().expect("batches");
        assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
        assert_eq!(batches[0].schema().fields().len(), 2, "columns a and b");
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("dir").map(|e| e.expect("entry").file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from("out.parquet")], "no temporary directory left beside it");
    }
}

//! Reading the lake back: Parquet files to Arrow, and a printable preview.

use std::path::Path;

use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tributary_core::ports::BoxError;

/// A Parquet file that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct ReadError {
    /// File.
    pub path: String,
    /// The I/O, Parquet or Arrow error.
    pub source: BoxError,
}

/// All record batches of one Parquet file.
///
/// # Errors
/// [`ReadError`] when the file cannot be opened or decoded.
pub fn read_parquet(path: &Path) -> Result<Vec<RecordBatch>, ReadError> {
    let error = |source: BoxError| ReadError { path: path.display().to_string(), source };
    let file = std::fs::File::open(path).map_err(|e| error(e.into()))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| error(e.into()))?
        .build()
        .map_err(|e| error(e.into()))?;
    reader.collect::<Result<Vec<_>, _>>().map_err(|e| error(e.into()))
}

/// The first `rows` rows of the Parquet files `keys` (under `lake`, or
/// `file://` locations: an Iceberg table's data files), as a
/// text table, with the total row count.
///
/// # Errors
/// [`ReadError`] for an unreadable file.
pub fn preview(lake: &Path, keys: &[String], rows: usize) -> Result<(String, usize), ReadError> {
    let mut batches = Vec::new();
    let mut total = 0;
    let mut kept = 0;
    for key in keys {
        // An Iceberg table's data files are listed as `file://` locations.
        let path = key.strip_prefix("file://").map_or_else(|| lake.join(key), std::path::PathBuf::from);
        for batch in read_parquet(&path)? {
            total += batch.num_rows();
            if kept < rows {
                let take = (rows - kept).min(batch.num_rows());
                batches.push(batch.slice(0, take));
                kept += take;
            }
        }
    }
    let table = arrow_cast::pretty::pretty_format_batches(&batches)
        .map_err(|e| ReadError { path: lake.display().to_string(), source: e.into() })?;
    Ok((table.to_string(), total))
}

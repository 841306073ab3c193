//! The lake read back for assertions: every row of a dataset's Parquet files
//! as JSON objects, read with parquet's Arrow reader and written by
//! arrow-json's `ArrayWriter` (nulls omitted, as arrow-json writes them), so
//! values are checked as the files hold them, independently of the CLI.

use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use parquet::file::reader::ChunkReader;
use serde_json::Value;

/// Every row of every Parquet file under `<lake>/<dataset>/` (recursively,
/// files in path order), as JSON objects; none when the directory is missing.
///
/// # Panics
/// On an unreadable file.
pub fn read_dataset(lake: &Path, dataset: &str) -> Vec<Value> {
    let mut files = Vec::new();
    collect_parquet(&lake.join(dataset), &mut files);
    files.sort();
    files
        .iter()
        .flat_map(|file| {
            let opened = std::fs::File::open(file).unwrap_or_else(|err| panic!("{}: {err}", file.display()));
            parquet_rows(opened)
        })
        .collect()
}

/// Every row of one Parquet file (a `File`, or `Bytes` as an object store
/// returns them), as JSON objects.
///
/// # Panics
/// When the input is not a readable Parquet file.
pub fn parquet_rows<R: ChunkReader + 'static>(file: R) -> Vec<Value> {
    parquet_batches(file).iter().flat_map(batch_rows).collect()
}

/// Every record batch of one Parquet file (a `File` or `Bytes`).
///
/// # Panics
/// When the input is not a readable Parquet file.
pub fn parquet_batches<R: ChunkReader + 'static>(file: R) -> Vec<RecordBatch> {
    parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("a Parquet file")
        .build()
        .expect("a Parquet reader")
        .collect::<Result<_, _>>()
        .expect("readable record batches")
}

/// Rows of a record batch as JSON objects, as arrow-json's `ArrayWriter`
/// writes them (nulls omitted).
///
/// # Panics
/// When a column type has no JSON form.
pub fn batch_rows(batch: &RecordBatch) -> Vec<Value> {
    let mut writer = arrow_json::ArrayWriter::new(Vec::new());
    writer.write(batch).expect("batch to JSON");
    writer.finish().expect("batch to JSON");
    let bytes = writer.into_inner();
    if bytes.is_empty() {
        return Vec::new();
    }
    serde_json::from_slice(&bytes).expect("arrow-json writes JSON")
}

fn collect_parquet(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_parquet(&path, out);
        } else if path.extension().is_some_and(|e| e == "parquet") {
            out.push(path);
        }
    }
}

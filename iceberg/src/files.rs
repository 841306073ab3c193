//! A table's data files, shared by the run commit ([`crate::commit`]) and
//! compaction ([`crate::compact`]): the live files of the current snapshot,
//! a data file read back as rows of the table's schema, and the writers
//! that put new data files into the Hive folder their rows came from.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use iceberg::arrow::RecordBatchPartitionSplitter;
use iceberg::spec::{DataFile, DataFileFormat, ManifestContentType, PartitionKey};
use iceberg::table::Table;
use iceberg::writer::base_writer::data_file_writer::DataFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::file_writer::location_generator::{DefaultFileNameGenerator, LocationGenerator};
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use tributary_core::ports::PortError;

use crate::commit::{port_error, table_batch};

/// The live data files of `table`'s current snapshot.
pub(crate) async fn live_files(table: &Table) -> iceberg::Result<Vec<DataFile>> {
    Ok(live_files_by_spec(table).await?.into_iter().map(|(_, file)| file).collect())
}

/// The live data files of `table`'s current snapshot, each with the id of
/// the partition spec it was written with (its manifest's).
pub(crate) async fn live_files_by_spec(table: &Table) -> iceberg::Result<Vec<(i32, DataFile)>> {
    let Some(snapshot) = table.metadata().current_snapshot() else { return Ok(Vec::new()) };
    let list = table.manifest_list_reader(snapshot).load().await?;
    let mut files = Vec::new();
    for manifest in list.entries().iter().filter(|m| m.content == ManifestContentType::Data) {
        let spec = manifest.partition_spec_id;
        let manifest = manifest.load_manifest(table.file_io()).await?;
        files.extend(manifest.entries().iter().filter(|e| e.is_alive()).map(|e| (spec, e.data_file().clone())));
    }
    Ok(files)
}

/// A table data file's rows as one batch of the table's current schema
/// (columns added since it was written are null).
pub(crate) async fn read_data_file(
    table: &Table,
    file: &DataFile,
    arrow: &SchemaRef,
) -> Result<RecordBatch, PortError> {
    let path = file.file_path();
    let io = |e: iceberg::Error| crate::commit::port_error("read a table data file", path, e);
    let bytes = table.file_io().new_input(path).map_err(io)?.read().await.map_err(io)?;
    let failed = |message: String| PortError::transient_msg("read a table data file", path, message);
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)
        .and_then(|b| b.build())
        .map_err(|e| PortError::transient("read a table data file", path, e))?;
    let mut batches = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| failed(e.to_string()))?;
        batches.push(table_batch(&batch, arrow, &[]).map_err(failed)?);
    }
    arrow_select::concat::concat_batches(arrow, &batches).map_err(|e| failed(e.to_string()))
}

/// The Hive folder of a table data file (`<table>/data/<folder>/<file>`).
pub(crate) fn data_folder(table: &Table, path: &str) -> String {
    let data = format!("{}/data/", table.metadata().location().trim_end_matches('/'));
    path.strip_prefix(&data)
        .and_then(|inside| inside.rsplit_once('/'))
        .map(|(folder, _)| folder.to_string())
        .unwrap_or_default()
}

/// Deletes data files written for a commit that did not happen (best
/// effort: a file left is an orphan no snapshot names; Glue's orphan-file
/// deletion removes it on AWS, snapshot expiry does not, as no snapshot
/// reaches it).
pub(crate) async fn delete_files(table: &Table, paths: &[String]) {
    for path in paths {
        if let Err(err) = table.file_io().delete(path).await {
            tracing::warn!(path, error = %err, "could not delete a data file of a commit that did not happen");
        }
    }
}

/// The data file writers of one commit: one open writer per partition, so
/// a partition's rows (a run's pages, a rewritten file's rows) become one
/// data file (rolled at iceberg's default target size), zstd level 1.
pub(crate) struct TableWriter {
    target: String,
    splitter: RecordBatchPartitionSplitter,
    locations: FolderLocations,
    builder: DataFileWriterBuilder<ParquetWriterBuilder, FolderLocations, DefaultFileNameGenerator>,
    open: Vec<
        iceberg::writer::base_writer::data_file_writer::DataFileWriter<
            ParquetWriterBuilder,
            FolderLocations,
            DefaultFileNameGenerator,
        >,
    >,
    by_partition: HashMap<String, usize>,
}

impl TableWriter {
    /// Writers for `table`, files named `<prefix>-<n>.parquet`.
    pub(crate) fn new(table: &Table, prefix: &str) -> iceberg::Result<Self> {
        let metadata = table.metadata();
        let schema = metadata.current_schema().clone();
        let splitter = RecordBatchPartitionSplitter::try_new_with_computed_values(
            schema.clone(),
            metadata.default_partition_spec().clone(),
        )?;
        // zstd level 1, as Persist's own files (WriterProperties' default
        // is uncompressed).
        let zstd = ZstdLevel::try_new(1).unwrap_or_default();
        let properties = WriterProperties::builder().set_compression(Compression::ZSTD(zstd)).build();
        let parquet = ParquetWriterBuilder::new(properties, schema);
        let locations = FolderLocations::new(metadata.location());
        let rolling = RollingFileWriterBuilder::new_with_default_file_size(
            parquet,
            table.file_io().clone(),
            locations.clone(),
            DefaultFileNameGenerator::new(prefix.to_string(), None, DataFileFormat::Parquet),
        );
        Ok(Self {
            target: table.identifier().to_string(),
            splitter,
            locations,
            builder: DataFileWriterBuilder::new(rolling),
            open: Vec::new(),
            by_partition: HashMap::new(),
        })
    }

    /// Writes `batch` (of the table's schema, partition columns filled),
    /// whose rows belong in the Hive folder `folder`.
    pub(crate) async fn write(&mut self, batch: &RecordBatch, folder: &str) -> Result<(), PortError> {
        let target = self.target.as_str();
        let err = |operation: &'static str| move |err: iceberg::Error| port_error(operation, target, err);
        for (partition, rows) in self.splitter.split(batch).map_err(err("split partitions"))? {
            let path = partition.to_path();
            let index = match self.by_partition.get(&path) {
                Some(index) => *index,
                None => {
                    self.locations.place(&path, folder);
                    self.open.push(self.builder.build(Some(partition)).await.map_err(err("open a data file"))?);
                    self.by_partition.insert(path, self.open.len() - 1);
                    self.open.len() - 1
                }
            };
            self.open[index].write(rows).await.map_err(err("write a data file"))?;
        }
        Ok(())
    }

    /// Closes every file: the data files written.
    pub(crate) async fn close(self) -> Result<Vec<DataFile>, PortError> {
        let mut files = Vec::new();
        for mut writer in self.open {
            files.extend(writer.close().await.map_err(|err| port_error("close a data file", &self.target, err))?);
        }
        Ok(files)
    }
}

/// Where the data files go: `<table>/data/<the staged file's Hive folder>/`,
/// the folder exactly as Persist wrote it (values escaped as Hive does:
/// `/`, `%`, `=`, … as `%XX`, `.` and `..` alone encoded, long values cut
/// with a digest). Not iceberg's `DefaultLocationGenerator`, which puts
/// the partition value in the path unescaped, so a record's `../..` value
/// would place a file outside the table (and `a/b` would nest folders).
#[derive(Clone)]
struct FolderLocations {
    data: String,
    /// Iceberg's partition path (`PartitionKey::to_path`) -> the folder.
    folders: Arc<std::sync::Mutex<HashMap<String, String>>>,
}

impl FolderLocations {
    fn new(table_location: &str) -> Self {
        Self { data: format!("{}/data", table_location.trim_end_matches('/')), folders: Arc::default() }
    }

    /// Files of the partition whose iceberg path is `path` go to `folder`.
    fn place(&self, path: &str, folder: &str) {
        if let Ok(mut folders) = self.folders.lock() {
            folders.entry(path.to_string()).or_insert_with(|| folder.to_string());
        }
    }
}

impl LocationGenerator for FolderLocations {
    fn generate_location(&self, partition_key: Option<&PartitionKey>, file_name: &str) -> String {
        let folder = partition_key
            .filter(|key| !PartitionKey::is_effectively_none(Some(key)))
            .and_then(|key| self.folders.lock().ok()?.get(&key.to_path()).cloned());
        match folder {
            Some(folder) => format!("{}/{folder}/{file_name}", self.data),
            // Unpartitioned (or a partition never placed, which `write`
            // does not make): the data folder itself, never a raw value.
            None => format!("{}/{file_name}", self.data),
        }
    }
}

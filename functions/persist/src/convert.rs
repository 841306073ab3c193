//! A page's payload -> Parquet files, in two streaming passes, or one
//! where the schema is known before the page is read:
//! - a later page of a dataset whose schema is settled is written with it
//!   in one pass, which stops at the first record that needs more;
//! - a dataset's first page is typed from its first records (about 1 MiB)
//!   and written in one pass when every other record fits exactly that
//!   schema (`first_page_in_one_pass`); a page no longer than that is
//!   inferred once.
//!
//! Either way the files are the bytes the two passes write: a record that
//! does not fit stops the one pass (its work is lost, at worst one pass
//! more), and the page goes through the two passes below.
//!
//! The reading thread frames records into chunks (about 1 MiB of text, at
//! most `batch_rows` records); chunk `i` goes to worker `i % n`.
//!
//! 1. **Infer**: the workers tokenize every record and merge its types into
//!    their chunk's schema (all records, never a sample — see
//!    [`crate::infer`]); the chunks' schemas are joined in order, which is
//!    the schema one sequential pass would find (fields in first-seen
//!    order). It is then evolved onto the dataset's schema from the lake,
//!    with the declared columns enforced.
//! 2. **Write**: the workers tokenize every record again, check it against
//!    that schema (a record that does not fit is quarantined with the field
//!    path, expected and found type), route it to its partition and append
//!    it to Arrow builders: one record batch per partition per chunk. A
//!    writer thread takes the batches in chunk order and encodes them into
//!    the partition's Parquet file, flushing row groups at `row_group_rows`,
//!    closing a file and starting the next part at `max_rows` rows or about
//!    `max_bytes` bytes. Chunk order makes the files the same bytes whatever
//!    the threads' scheduling.
//!
//! Memory: [`crate::source::CHUNK_BYTES`] of input, up to eight chunks in
//! flight (two queued and one being handled per worker, two built waiting
//! for the writer), and per open partition the Parquet row group in
//! progress. It does not grow with the payload: files go to a temporary
//! directory, not to memory.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::{Schema, SchemaRef};
use chrono::NaiveDate;
use contracts::{Compression, Granularity, Partitioning, PayloadFormat, PersistTarget};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression as ParquetCompression, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::WriterProperties;
use tempfile::TempPath;

use lake_format::lineage::{LINEAGE_COLUMNS, Lineage, lineage_fields};
use lake_format::partition::{self, DEFAULT_PARTITION, partition_columns};

use crate::build::{Col, Plan, Rec, Violation};
use crate::infer::{Naming, Seen, Ty, empty_table, schema_changes};
use crate::json::{Tape, Tok, unescape};
use crate::source::{DecodeError, Framer, Lines, LinesUntil, PageSource};

/// Deepest nesting of objects and arrays a record may have (the record
/// itself is level 1). Deeper records are quarantined: Athena's Hive DDL
/// cannot describe such types, and readers recurse per level.
pub const MAX_NESTING_DEPTH: usize = 32;

/// Partitions one page may write at once; each holds a batch of builders
/// and a row group in memory. More is an error rather than unbounded memory.
pub const MAX_OPEN_PARTITIONS: usize = 256;

/// Parquet writer settings that are Persist's (the rest is the target's
/// `files`).
#[derive(Clone, Debug, PartialEq)]
pub struct WriterConfig {
    /// zstd level, 1..=22 (default 1: fast, and most of the size gain).
    pub zstd_level: i32,
    /// Records per chunk at most (default 8192); a chunk also ends at about
    /// 1 MiB of text. Each chunk becomes one Arrow batch per partition.
    pub batch_rows: usize,
    /// Rows per Parquet row group when the target leaves `row_group_rows`
    /// at its default (default 131072, `ROW_GROUP_ROWS`).
    pub row_group_rows: usize,
    /// Threads that infer and build chunks (`CONVERT_WORKERS`), at most
    /// [`MAX_WORKERS`]: 0 (the default) takes one per core the process may
    /// use (`std::thread::available_parallelism`: the affinity mask and a
    /// cgroup CPU quota); 1 starts no thread, and the caller's thread
    /// frames, builds and writes each chunk in turn.
    pub workers: usize,
}

impl Default for WriterConfig {
    fn default() -> Self {
        Self { zstd_level: 1, batch_rows: 8192, row_group_rows: 131_072, workers: 0 }
    }
}

/// Persist's memory (`MemorySize` in MB, `tributary_core::topology`, the
/// template's value), from which [`DEFAULT_MAX_PAGE_BYTES`] is derived.
const PERSIST_MEMORY_MB: u64 =
    tributary_core::topology::FUNCTIONS[tributary_core::topology::Function::Persist as usize].memory_mb as u64;

/// Default [`PageLimits::max_page_bytes`] (`MAX_PAGE_BYTES`): a quarter of
/// Persist's Lambda memory, 256 MiB at its 1024 MB. A page streams, but one
/// record is held whole: in the framer's buffer, then in a chunk, then in
/// Arrow builders, so a record as large as the bound still fits four times.
/// Twice the 130 MB of the largest bench page, four times Request's default
/// `MAX_RESPONSE_BYTES` (64 MiB).
pub const DEFAULT_MAX_PAGE_BYTES: u64 = PERSIST_MEMORY_MB * 1024 * 1024 / 4;

/// Default [`PageLimits::max_page_records`]: 1,000,000 records, ten times
/// the largest page Request asks for (`contracts::spec::MAX_PAGE_SIZE`,
/// 100,000) and twice the largest bench page. Without a bound, a page of 30
/// million tiny records took 4 GB.
pub const DEFAULT_MAX_PAGE_RECORDS: u64 = 1_000_000;

/// Default [`PageLimits::max_columns`] (`MAX_COLUMNS`): 1,000 columns per
/// dataset. This is our own limit, not a reader's: wide tables are slow
/// and memory-hungry in Parquet readers (one column chunk per column per
/// row group) and in Athena, and Persist keeps builders for every column
/// (a page of 20,000 distinct keys took 905 MB and widened its dataset's
/// schema for good).
pub const DEFAULT_MAX_COLUMNS: usize = 1_000;

/// The most a page may hold, so that no payload can take Persist past its
/// memory or its dataset past a readable width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageLimits {
    /// Bytes of payload read, after decompression (`MAX_PAGE_BYTES`;
    /// default [`DEFAULT_MAX_PAGE_BYTES`]). More fails the page, permanently.
    pub max_page_bytes: u64,
    /// Records of one page (default [`DEFAULT_MAX_PAGE_RECORDS`]). More
    /// fails the page, permanently.
    pub max_page_records: u64,
    /// Columns of a dataset (`MAX_COLUMNS`; default [`DEFAULT_MAX_COLUMNS`]),
    /// counted as [`Ty::columns`] does: every field of the table schema at
    /// any depth. A record that would take the dataset past it is
    /// quarantined; the rest of the page is persisted.
    pub max_columns: usize,
}

impl Default for PageLimits {
    fn default() -> Self {
        Self {
            max_page_bytes: DEFAULT_MAX_PAGE_BYTES,
            max_page_records: DEFAULT_MAX_PAGE_RECORDS,
            max_columns: DEFAULT_MAX_COLUMNS,
        }
    }
}

/// A page that could not be converted.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The payload cannot be read as records.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The Parquet writer refused the data or its settings.
    #[error("Arrow to Parquet: {0}")]
    Parquet(#[from] ParquetError),
    /// A temporary file could not be written.
    #[error("temporary file: {0}")]
    Io(#[from] std::io::Error),
    /// The page spans more partitions than `MAX_OPEN_PARTITIONS`.
    #[error("the page spans more than {MAX_OPEN_PARTITIONS} partitions of `{field}`; use a coarser granularity")]
    TooManyPartitions {
        /// The partition field.
        field: String,
    },
    /// The page holds more records than [`PageLimits::max_page_records`].
    #[error("the page holds more than {max} records, the most Persist takes in one page; split it into smaller pages")]
    TooManyRecords {
        /// The bound (`max_page_records`).
        max: u64,
    },
}

/// The column names a record field may not take at the top level: the
/// lineage columns and the target's partition columns (Glue refuses a
/// partition key named like a column, and Hive readers would show the
/// folder's value in the field's place). A field of such a name gets a
/// numbered name (`dt_2`), its key kept as its source.
pub fn reserved_names(target: &PersistTarget) -> Vec<String> {
    let mut names: Vec<String> = LINEAGE_COLUMNS.map(String::from).to_vec();
    names.extend(partition_columns(&target.partition));
    names
}

/// What the conversion needs besides the payload.
#[derive(Clone, Copy, Debug)]
pub struct PageSettings<'a> {
    /// Dataset, declared columns, partitioning, files.
    pub target: &'a PersistTarget,
    /// The lineage columns' values (`None`: files without them, for tools
    /// and tests that convert records alone).
    pub lineage: Option<&'a Lineage>,
    /// The dataset's schema in the lake, if any.
    pub lake_schema: Option<&'a Ty>,
    /// The run's date (the default partition).
    pub run_date: NaiveDate,
    /// Writer settings.
    pub writer: &'a WriterConfig,
    /// Bounds on the page's bytes, records and the dataset's columns.
    pub limits: PageLimits,
    /// Where the Parquet and quarantine files are written.
    pub temp_dir: &'a Path,
}

/// One Parquet file written.
#[derive(Debug)]
pub struct OutputFile {
    /// Hive partition path, e.g. `dt=2026-11-29` or `dt=2026-11-29/hour=06`.
    pub partition: String,
    /// Part number within the partition, from 0.
    pub part: u32,
    /// The file (deleted when dropped).
    pub path: TempPath,
    /// Rows in it.
    pub rows: u64,
    /// Its size in bytes.
    pub bytes: u64,
}

/// The records set aside, as JSON lines `{"index", "reason", "record"}`.
#[derive(Debug)]
pub struct QuarantineFile {
    /// The file (deleted when dropped).
    pub path: TempPath,
    /// How many records.
    pub records: u64,
    /// Up to five distinct reasons, for logs and alerts.
    pub sample_reasons: Vec<String>,
}

/// The result of converting a page.
#[derive(Debug)]
pub struct PageOutput {
    /// Parquet files, by partition and part.
    pub files: Vec<OutputFile>,
    /// Quarantined records, if any.
    pub quarantine: Option<QuarantineFile>,
    /// Records in the payload.
    pub records_in: u64,
    /// The records told apart from another page's: 16 hex digits of
    /// FNV-1a over their count, the first record's text and the last one's
    /// length and first 96 bytes (`source::Framer::fingerprint`); `None`
    /// for a page of no records.
    pub records_fingerprint: Option<String>,
    /// Rows written to Parquet.
    pub rows_written: u64,
    /// Payload bytes read (after decompression).
    pub input_bytes: u64,
    /// The dataset's schema after this page (to keep in the lake).
    pub schema: Ty,
    /// The Arrow schema of the files written.
    pub arrow_schema: SchemaRef,
    /// Changes of the dataset's schema this page could not make (its
    /// records that needed them are quarantined).
    pub conflicts: Vec<String>,
    /// How this page changed the dataset's columns (`schema_changes`),
    /// or, under `target.on_schema_change: freeze`, would have (its records
    /// that needed them are quarantined). Empty for a dataset's first page,
    /// which makes the table.
    pub schema_changes: Vec<String>,
}

impl PageOutput {
    /// Records quarantined.
    pub fn quarantined(&self) -> u64 {
        self.quarantine.as_ref().map_or(0, |q| q.records)
    }
}

fn syntax(framer_index: u64, offset: u64, err: crate::json::SyntaxError) -> ConvertError {
    ConvertError::Decode(DecodeError::Record {
        index: framer_index,
        offset: offset + err.offset as u64,
        message: format!("invalid JSON: {}", err.message),
    })
}

/// The dataset's table schema after this page: `lake` (or an empty table)
/// with the target's declared columns, evolved by what the page's records
/// hold (pass 1 over all of them; see `crate::infer`), read within the
/// default [`PageLimits`] (for tools and tests: the column cap is not
/// applied here; [`convert_page`] applies it).
///
/// # Errors
/// [`ConvertError::Decode`] for unreadable payloads and invalid JSON;
/// [`ConvertError::TooManyRecords`].
pub fn infer_page(
    source: &PageSource,
    format: &PayloadFormat,
    target: &PersistTarget,
    lake: Option<&Ty>,
) -> Result<Ty, ConvertError> {
    let reserved = reserved_names(target);
    let names = Naming {
        policy: target.names,
        reserved: &reserved,
        timestamps: target.timestamps == contracts::Timestamps::Detect,
    };
    let mut table = lake.cloned().unwrap_or_else(empty_table);
    table.declare(&target.schema, names, &mut Vec::new());
    table.evolve(&seen_in_page(source, format, PageLimits::default(), 0)?, names);
    Ok(table)
}

/// What the page's records hold (pass 1), records set aside whole (see
/// [`screen`]) left out; `workers` threads infer ([`WriterConfig::workers`]:
/// 0 for one per core).
///
/// # Errors
/// [`ConvertError::Decode`] for unreadable payloads, invalid JSON and a
/// payload past `limits.max_page_bytes`; [`ConvertError::TooManyRecords`]
/// past `limits.max_page_records`.
pub fn seen_in_page(
    source: &PageSource,
    format: &PayloadFormat,
    limits: PageLimits,
    workers: usize,
) -> Result<Seen, ConvertError> {
    let mut framer = Framer::open(source, format, limits.max_page_bytes)?;
    let lines = framer.lines_are_records();
    let workers = worker_count(workers);
    if workers == 1 {
        // One core: framing and inference take turns on this thread, a
        // chunk at a time (see `write_pass`).
        let mut root = Seen::default();
        let mut work = (Tape::default(), String::new());
        let mut failed = None;
        frame_chunks(&mut framer, usize::MAX, limits.max_page_records, |chunk| {
            match infer_chunk(&chunk, lines, &mut work) {
                Ok(seen) => root.join(seen),
                Err((_, err)) => failed = Some(err),
            }
            failed.is_none()
        })?;
        return failed.map_or(Ok(root), Err);
    }
    // This thread frames records into chunks; the workers tokenize and
    // infer chunk i on worker i % n; the chunks' kinds are joined in order,
    // which gives the same fields (in first-seen order) as one pass.
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..workers)
            .map(|_| {
                let (sender, receiver) = std::sync::mpsc::sync_channel::<Chunk>(2);
                (sender, scope.spawn(move || infer_chunks(receiver, lines)))
            })
            .collect();
        let senders: Vec<_> = workers.iter().map(|(sender, _)| sender.clone()).collect();
        let framed = frame_chunks(&mut framer, usize::MAX, limits.max_page_records, to_workers(&senders));
        drop(senders);
        let mut typed = Vec::new();
        let mut first_error: Option<(u64, ConvertError)> = None;
        for (sender, worker) in workers {
            drop(sender);
            match worker.join() {
                Ok(Ok(chunks)) => typed.extend(chunks),
                Ok(Err((index, err))) => {
                    if first_error.as_ref().is_none_or(|(first, _)| index < *first) {
                        first_error = Some((index, err));
                    }
                }
                Err(_) => return Err(ConvertError::Io(std::io::Error::other("schema inference thread panicked"))),
            }
        }
        framed?;
        if let Some((_, err)) = first_error {
            return Err(err);
        }
        typed.sort_by_key(|(seq, _)| *seq);
        let mut root = Seen::default();
        for (_, seen) in typed {
            root.join(seen);
        }
        Ok(root)
    })
}

/// Threads that tokenize, infer (pass 1) and build (pass 2): `workers`
/// when it is not 0 (at most [`MAX_WORKERS`]), else one per core
/// this process may run on (`std::thread::available_parallelism`, which
/// reads the CPU affinity mask and the cgroup's CPU quota), from 1 to
/// [`MAX_WORKERS`]. Lambda gives 1 vCPU at 1,769 MB and up to 6 at
/// 10,240 MB (AWS Lambda Developer Guide, "Configuring Lambda function
/// memory"); the framing thread and the Parquet writer run beside them.
/// The output is the same bytes whatever the count: chunks are joined and
/// written in their order.
///
/// With one, no thread is started: the caller's thread frames, builds
/// and writes each chunk in turn.
fn worker_count(workers: usize) -> usize {
    #[cfg(test)]
    if let Some(workers) = tests::WORKERS.with(std::cell::Cell::get) {
        return workers;
    }
    if workers > 0 {
        return workers.min(MAX_WORKERS);
    }
    std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get).clamp(1, MAX_WORKERS)
}

/// At most this many build workers (`CONVERT_WORKERS`): each holds a chunk
/// of about 1 MiB of records with its tape and column builders (a few MB),
/// and past four the single framing thread and Parquet writer are the
/// limit.
pub const MAX_WORKERS: usize = 4;

/// Bytes of records per chunk handed to a worker.
const CHUNK_TEXT_BYTES: usize = 1 << 20;

/// Frames records into chunks of about [`CHUNK_TEXT_BYTES`] (and at most
/// `max_records`), numbered from 0 in order, handing each to `take`; stops
/// early when `take` returns `false` (a worker or the writer has stopped:
/// its error is reported by the caller).
///
/// # Errors
/// [`ConvertError::Decode`] from the framer; [`ConvertError::TooManyRecords`]
/// at record `max_page_records + 1`.
fn frame_chunks<R: std::io::Read>(
    framer: &mut Framer<R>,
    max_records: usize,
    max_page_records: u64,
    mut take: impl FnMut(Chunk) -> bool,
) -> Result<(), ConvertError> {
    let mut chunk = Chunk::new(0);
    let mut sent = 0;
    loop {
        // NDJSON in bulk ([`Framer::next_lines`]), a JSON array record by
        // record; either way a chunk closes after the record that takes
        // its records' bytes to [`CHUNK_TEXT_BYTES`] or their count to
        // `max_records`, so chunks are the same whichever frames them.
        let more = if framer.lines_are_records() {
            let until = LinesUntil { bytes: CHUNK_TEXT_BYTES, records: max_records, index: max_page_records };
            let mut lines = Lines { text: &mut chunk.text, records: &mut chunk.records, held: &mut chunk.held };
            let more = framer.next_lines(&mut lines, until)?;
            if more && framer.records_read() >= max_page_records {
                // Stopped before record `max_page_records`: one more is one too many.
                if framer.next_record()?.is_some() {
                    return Err(ConvertError::TooManyRecords { max: max_page_records });
                }
                false
            } else {
                more
            }
        } else {
            let (index, offset) = (framer.records_read(), framer.bytes_read());
            match framer.next_record()? {
                Some(_) if index >= max_page_records => {
                    return Err(ConvertError::TooManyRecords { max: max_page_records });
                }
                Some(text) => {
                    let from = chunk.text.len();
                    chunk.text.push_str(text);
                    chunk.records.push((from, chunk.text.len(), index, offset));
                    chunk.held += text.len();
                    true
                }
                None => false,
            }
        };
        if !more {
            break;
        }
        if chunk.held >= CHUNK_TEXT_BYTES || chunk.records.len() >= max_records {
            let full = std::mem::replace(&mut chunk, Chunk::new(sent + 1));
            if !take(full) {
                return Ok(());
            }
            sent += 1;
        }
    }
    if !chunk.records.is_empty() {
        take(chunk);
    }
    Ok(())
}

/// [`frame_chunks`]'s `take` for workers fed by channels: chunk `i` goes to
/// `workers[i % n]`; `false` once that worker has stopped.
fn to_workers(workers: &[std::sync::mpsc::SyncSender<Chunk>]) -> impl FnMut(Chunk) -> bool + '_ {
    |chunk| workers[chunk.seq % workers.len()].send(chunk).is_ok()
}

/// Records' texts, with (start, end, index, payload offset) of each into
/// `text` (which also holds the newlines and whitespace between NDJSON
/// records, framed in bulk), and `held`, the bytes of the records alone.
struct Chunk {
    seq: usize,
    text: String,
    records: Vec<(usize, usize, u64, u64)>,
    held: usize,
}

impl Chunk {
    /// An empty chunk with room for [`CHUNK_TEXT_BYTES`] of text and what
    /// frames it, and for the records' positions: grown by doubling, every
    /// chunk was copied about once more.
    fn new(seq: usize) -> Self {
        Chunk {
            seq,
            // The records' bytes, the newlines between them (one in 250 of a
            // typical page) and the record that crosses the bound.
            text: String::with_capacity(CHUNK_TEXT_BYTES + CHUNK_TEXT_BYTES / 64),
            // Room for records of 128 bytes on average (a page of 250-byte
            // records outgrew 256 and copied its list once a chunk).
            records: Vec::with_capacity(CHUNK_TEXT_BYTES / 128),
            held: 0,
        }
    }
}

/// What each chunk's records hold; an error carries its record index.
/// `lines`: the records are NDJSON lines ([`screen`]).
fn infer_chunks(
    receiver: std::sync::mpsc::Receiver<Chunk>,
    lines: bool,
) -> Result<Vec<(usize, Seen)>, (u64, ConvertError)> {
    let mut work = (Tape::default(), String::new());
    receiver.into_iter().map(|chunk| Ok((chunk.seq, infer_chunk(&chunk, lines, &mut work)?))).collect()
}

/// What one chunk's records hold, records set aside whole left out; `work`
/// is the tape and scratch text reused from chunk to chunk.
fn infer_chunk(chunk: &Chunk, lines: bool, (tape, scratch): &mut (Tape, String)) -> Result<Seen, (u64, ConvertError)> {
    let mut ty = Seen::default();
    for &(from, to, index, offset) in &chunk.records {
        let text = &chunk.text[from..to];
        // A record set aside whole widens nothing.
        if screen(index, offset, text, lines, tape, scratch).map_err(|e| (index, e))?.is_none() {
            ty.absorb(text, tape, 0, scratch);
        }
    }
    Ok(ty)
}

/// Converts a page: infers, evolves, checks, partitions and writes.
///
/// Pass 2 runs on one thread per core (`worker_count`): this thread frames records into
/// chunks; each worker checks and builds its chunks into Arrow batches
/// (one per partition per chunk); a writer thread takes the batches in
/// chunk order and encodes them into Parquet, so the output is the same
/// bytes whatever the scheduling. On one core this thread does all three
/// in turn, a chunk at a time: the same bytes again.
///
/// A page that would take the dataset past [`PageLimits::max_columns`] is
/// typed record by record instead (see `cap_columns`): the records that
/// would widen it past the cap are quarantined, naming the cap and the
/// count, and widen nothing.
///
/// # Errors
/// [`ConvertError`]: unreadable payload or invalid JSON (the page fails as
/// a whole, permanently), a payload past `max_page_bytes` or
/// `max_page_records`, too many partitions, writer or disk failures.
pub fn convert_page(
    source: &PageSource,
    format: &PayloadFormat,
    settings: PageSettings<'_>,
) -> Result<PageOutput, ConvertError> {
    // Fast path: a dataset whose schema is settled (every column typed)
    // is written in one pass with that schema; the first record that does
    // not fit it as it is (a new field, a wider type) abandons the attempt
    // for the two passes below, which would find the same schema otherwise.
    // A declared type the spec changed after the dataset was created is
    // reported with the page's conflicts (the dataset keeps its type).
    let reserved = reserved_names(settings.target);
    let names = Naming {
        policy: settings.target.names,
        reserved: &reserved,
        timestamps: settings.target.timestamps == contracts::Timestamps::Detect,
    };
    let mut conflicts = Vec::new();
    let mut schema = settings.lake_schema.cloned().unwrap_or_else(empty_table);
    schema.declare(&settings.target.schema, names, &mut conflicts);
    if let Some(lake) = settings.lake_schema
        && lake.is_settled()
        && *lake == schema
        && let Some(output) =
            write_pass(source, format, settings, lake.clone(), conflicts.clone(), &HashMap::new(), Fit::Stop)?
    {
        return Ok(output);
    }
    // A dataset's first page: typed from its first records, written in one
    // pass when the rest fits exactly that (see `first_records`).
    if settings.lake_schema.is_none()
        && let Some(output) = first_page_in_one_pass(source, format, settings, &schema, names, &conflicts)?
    {
        return Ok(output);
    }
    let seen = seen_in_page(source, format, settings.limits, settings.writer.workers)?;
    let mut evolved = schema.clone();
    evolved.evolve(&seen, names);
    // A dataset's first page makes its table; later pages change it.
    let changes = if settings.lake_schema.is_some() { schema_changes(&schema, &evolved) } else { Vec::new() };
    if !changes.is_empty() && settings.target.on_schema_change == contracts::SchemaChange::Freeze {
        // Frozen: the table as it is; a record that would change it is
        // quarantined with the violation, and the refused changes reported.
        tracing::warn!(changes = ?changes, "target.on_schema_change: freeze: records that would change the dataset are quarantined");
        let declared_conflicts = conflicts.clone();
        let output = write_pass(source, format, settings, schema, conflicts, &HashMap::new(), Fit::Quarantine)?;
        let mut output =
            output.ok_or_else(|| ConvertError::Io(std::io::Error::other("the write pass stopped without a reason")))?;
        // The records refused are quarantined, as asked: not a conflict that
        // fails the page (only a declared type the spec changed is one).
        output.conflicts = declared_conflicts;
        output.schema_changes =
            changes.into_iter().map(|change| format!("refused (on_schema_change: freeze): {change}")).collect();
        return Ok(output);
    }
    // Kept only when there are changes, to say which the write makes.
    let unchanged = (!changes.is_empty()).then(|| schema.clone());
    let (columns, before) = (evolved.columns(), schema.columns());
    let (schema, over_cap) = if columns <= settings.limits.max_columns || columns <= before {
        (evolved, HashMap::new())
    } else {
        tracing::warn!(
            columns,
            max_columns = settings.limits.max_columns,
            "the page would widen its dataset past MAX_COLUMNS"
        );
        cap_columns(source, format, settings, schema, names)?
    };
    // What the page really changes (the column cap may have kept some out).
    let changes = unchanged.map_or(changes, |unchanged| schema_changes(&unchanged, &schema));
    if !changes.is_empty() {
        tracing::warn!(changes = ?changes, "the page changes its dataset's columns");
    }
    let output = write_pass(source, format, settings, schema, conflicts, &over_cap, Fit::Quarantine)?;
    let mut output =
        output.ok_or_else(|| ConvertError::Io(std::io::Error::other("the write pass stopped without a reason")))?;
    output.schema_changes = changes;
    Ok(output)
}

/// Text of a page's first records read to type its first page
/// ([`first_page_in_one_pass`]): one chunk, about 4,000 records of the
/// bench pages; a page no longer than this is read whole.
const FIRST_RECORDS_BYTES: usize = CHUNK_TEXT_BYTES;

/// A dataset's first page in one pass, when it can be: the page's first
/// records ([`FIRST_RECORDS_BYTES`]) are typed (`schema` evolved with what
/// they hold), then the write pass checks every record against that
/// schema ([`Fit::StopInexact`]). `Ok(None)` sends the page to the two
/// passes, which type it from every record:
/// - a record needs more than the first records did (a new field, a
///   wider number, a timestamp among text, ...): the write pass stops
///   there, and the work done is lost (at worst one more pass);
/// - a place of the first records held values of two kinds (numbers and
///   text, text and timestamps, ...), where the type is the majority's
///   over the page ([`one_kind_each`]), or a JSON-text column: not tried;
/// - past `max_columns`: the two passes cap it.
///
/// The output is the two passes' output, byte for byte: when every record
/// fits, an inference over every record finds the same schema.
///
/// # Errors
/// As [`convert_page`].
fn first_page_in_one_pass(
    source: &PageSource,
    format: &PayloadFormat,
    settings: PageSettings<'_>,
    schema: &Ty,
    names: Naming<'_>,
    conflicts: &[String],
) -> Result<Option<PageOutput>, ConvertError> {
    let (seen, whole) = first_records(source, format, settings.limits)?;
    let mut typed = schema.clone();
    typed.evolve(&seen, names);
    if typed.columns() > settings.limits.max_columns {
        return Ok(None);
    }
    let fit = if whole {
        // The first records are the page: its inference is done.
        Fit::Quarantine
    } else if typed.is_settled() && one_kind_each(&seen, names.timestamps) && !has_json(&typed) {
        Fit::StopInexact
    } else {
        return Ok(None);
    };
    write_pass(source, format, settings, typed, conflicts.to_vec(), &HashMap::new(), fit)
}

/// What a page's first records hold (about [`FIRST_RECORDS_BYTES`] of
/// them, records set aside whole left out, as in [`seen_in_page`]), and
/// whether they are the whole page.
///
/// # Errors
/// As [`seen_in_page`], for those records.
fn first_records(
    source: &PageSource,
    format: &PayloadFormat,
    limits: PageLimits,
) -> Result<(Seen, bool), ConvertError> {
    let mut framer = Framer::open(source, format, limits.max_page_bytes)?;
    let lines = framer.lines_are_records();
    let (mut tape, mut scratch, mut seen) = (Tape::default(), String::new(), Seen::default());
    let mut read = 0;
    while read < FIRST_RECORDS_BYTES {
        let (index, offset) = (framer.records_read(), framer.bytes_read());
        let Some(text) = framer.next_record()? else { return Ok((seen, true)) };
        if index >= limits.max_page_records {
            return Err(ConvertError::TooManyRecords { max: limits.max_page_records });
        }
        read += text.len();
        if screen(index, offset, text, lines, &mut tape, &mut scratch)?.is_none() {
            seen.absorb(text, &tape, 0, &mut scratch);
        }
    }
    Ok((seen, framer.next_record()?.is_none()))
}

/// Whether every place of `seen` held values of one kind group only (as
/// [`Ty::from_seen`] groups them; text and timestamps apart when
/// `timestamps` are detected): then its type does not depend on how many
/// values of each kind the page holds, only on which kinds, and a value
/// of another kind later does not fit it.
fn one_kind_each(seen: &Seen, timestamps: bool) -> bool {
    let c = seen.counts;
    let (text, stamps) = if timestamps { (c.strings, c.timestamps) } else { (c.strings + c.timestamps, 0) };
    [c.objects, c.arrays, text, stamps, c.numbers, c.bools].iter().filter(|n| **n > 0).count() <= 1
        && seen.fields.iter().all(|(_, field)| one_kind_each(field, timestamps))
        && seen.item.as_deref().is_none_or(|item| one_kind_each(item, timestamps))
}

/// Whether `ty` has an inferred JSON-text column at any depth (it takes
/// every value, so the first records cannot settle it).
fn has_json(ty: &Ty) -> bool {
    match ty {
        Ty::Json => true,
        Ty::List { item } => has_json(item),
        Ty::Struct { fields } => fields.list.iter().any(|field| has_json(&field.ty)),
        _ => false,
    }
}

/// Why a record is set aside whole before its values are looked at, or
/// `Ok(None)` when it is an object the schema's checks can take (then
/// `tape` holds its tokens): not an object; nested deeper than
/// [`MAX_NESTING_DEPTH`] (also beyond the tokenizer's
/// `MAX_PARSE_DEPTH`, where it stops, so that such a record does not fail
/// its page); a key that is not valid Unicode (a lone UTF-16 surrogate,
/// `{"\ud800": 1}`), which no column can be named after; an NDJSON line
/// (`lines`) that is not JSON, which spoils no other line.
///
/// # Errors
/// [`ConvertError::Decode`] for invalid JSON in a JSON document (not
/// NDJSON): the page fails as a whole.
fn screen(
    index: u64,
    offset: u64,
    text: &str,
    lines: bool,
    tape: &mut Tape,
    scratch: &mut String,
) -> Result<Option<String>, ConvertError> {
    let too_deep =
        |depth: usize| format!("record {index} is nested {depth} levels deep, more than {MAX_NESTING_DEPTH}");
    if let Err(err) = tape.parse(text) {
        let depth = nesting_depth(text);
        if depth > MAX_NESTING_DEPTH {
            return Ok(Some(too_deep(depth)));
        }
        if lines {
            return Ok(Some(format!(
                "record {index} is not valid JSON: {} at byte {} of its line (an NDJSON line is a record of its own: \
                 the page's other lines are kept)",
                err.message, err.offset
            )));
        }
        return Err(syntax(index, offset, err));
    }
    if !matches!(tape.toks[0], Tok::Obj { .. }) {
        let kind = crate::json::kind_name(&tape.toks[0]);
        return Ok(Some(format!("record {index} is {kind}, not a JSON object")));
    }
    if tape.depth > MAX_NESTING_DEPTH {
        return Ok(Some(too_deep(tape.depth)));
    }
    // Only a `\u` escape can spell a surrogate; the path is only worked out
    // for a record that has such a key.
    if tape.unicode_escapes
        && has_invalid_key(text, tape, scratch)
        && let Some((path, key, message)) = invalid_key(text, tape, 0, &mut String::new(), scratch)
    {
        return Ok(Some(format!(
            "record {index}: the key \"{key}\" at {path} is not valid Unicode ({message}); no column can be named after it"
        )));
    }
    Ok(None)
}

/// Deepest nesting of objects and arrays in `text`, strings skipped
/// (without recursion: `text` may be nested beyond what the tokenizer
/// follows).
fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escape) = (0usize, 0usize, false, false);
    for &b in text.as_bytes() {
        if in_string {
            match (escape, b) {
                (true, _) => escape = false,
                (false, b'\\') => escape = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Whether any key of the record on `tape` is not valid Unicode (one look
/// at each escaped key, nothing allocated).
fn has_invalid_key(text: &str, tape: &Tape, scratch: &mut String) -> bool {
    tape.toks.iter().enumerate().any(|(at, tok)| {
        let Tok::Obj { end, .. } = *tok else { return false };
        let mut i = at + 1;
        while i < end as usize {
            let Tok::Str { start, end: key_end, escaped } = tape.toks[i] else { break };
            if escaped && unescape(text, start, key_end, true, scratch).is_err() {
                return true;
            }
            i = tape.skip(i + 1);
        }
        false
    })
}

/// The first key in the value at `idx` that is not valid Unicode: the JSON
/// pointer of the object holding it (`/` for the record), the key as
/// written (cut at 64 bytes) and why. `path` is the pointer of the value.
fn invalid_key(
    text: &str,
    tape: &Tape,
    idx: usize,
    path: &mut String,
    scratch: &mut String,
) -> Option<(String, String, String)> {
    match tape.toks[idx] {
        Tok::Obj { end, .. } => {
            let mut i = idx + 1;
            while i < end as usize {
                let Tok::Str { start, end: key_end, escaped } = tape.toks[i] else { break };
                let segment = match unescape(text, start, key_end, escaped, scratch) {
                    Ok(key) => key.replace('~', "~0").replace('/', "~1"),
                    Err(err) => {
                        let raw = &text[start as usize..key_end as usize];
                        let raw = &raw[..raw.floor_char_boundary(64)];
                        let at = if path.is_empty() { "/".to_string() } else { path.clone() };
                        return Some((at, raw.to_string(), err.message));
                    }
                };
                let len = path.len();
                path.push('/');
                path.push_str(&segment);
                if let Some(found) = invalid_key(text, tape, i + 1, path, scratch) {
                    return Some(found);
                }
                path.truncate(len);
                i = tape.skip(i + 1);
            }
            None
        }
        Tok::Arr { end, .. } => {
            let (mut i, mut n) = (idx + 1, 0);
            while i < end as usize {
                let len = path.len();
                path.push_str(&format!("/{n}"));
                if let Some(found) = invalid_key(text, tape, i, path, scratch) {
                    return Some(found);
                }
                path.truncate(len);
                i = tape.skip(i);
                n += 1;
            }
            None
        }
        _ => None,
    }
}

/// Types a page that would take its dataset past `max_columns`, record by
/// record in page order, as if each were a page of its own: a record that
/// fits the schema so far changes nothing; one that needs more widens it
/// if the schema then still has at most `max_columns` columns (or no more
/// than before), and is otherwise left out, with the reason naming the cap
/// and the count it would have reached. Returns the schema and the left-out
/// records by index; the write pass quarantines those that do not fit the
/// final schema.
///
/// One sequential read of the payload, on top of the two passes; only
/// pages past the cap take it.
///
/// # Errors
/// As [`seen_in_page`].
fn cap_columns(
    source: &PageSource,
    format: &PayloadFormat,
    settings: PageSettings<'_>,
    mut schema: Ty,
    names: Naming<'_>,
) -> Result<(Ty, HashMap<u64, String>), ConvertError> {
    let max = settings.limits.max_columns;
    let mut framer = Framer::open(source, format, settings.limits.max_page_bytes)?;
    let lines = framer.lines_are_records();
    let mut count = schema.columns();
    let mut checker = Col::new(&schema);
    let mut over_cap = HashMap::new();
    let (mut tape, mut scratch, mut plan) = (Tape::default(), String::new(), Plan::default());
    let reason = |index: u64, at_least: &str, columns: usize| {
        format!(
            "record {index} would take the dataset to {at_least}{columns} columns, more than MAX_COLUMNS ({max}); \
             it is quarantined and the schema is not widened"
        )
    };
    loop {
        let (index, offset) = (framer.records_read(), framer.bytes_read());
        let Some(text) = framer.next_record()? else { break };
        if index >= settings.limits.max_page_records {
            return Err(ConvertError::TooManyRecords { max: settings.limits.max_page_records });
        }
        if screen(index, offset, text, lines, &mut tape, &mut scratch)?.is_some() {
            continue;
        }
        let rec = Rec { text, tape: &tape };
        plan.clear();
        match checker.check(rec, 0, &mut scratch, &mut plan) {
            // Fits, or is quarantined for its own reason whatever the schema.
            Ok(_) => continue,
            Err(violation) if violation.type_stands => continue,
            Err(_) => {}
        }
        // Each new key of an object the schema has is a new field: when
        // those alone pass the cap, the record is left out without trying.
        let new_keys = new_keys(&schema, rec, 0, &mut scratch);
        if new_keys > 0 && count + new_keys > max {
            over_cap.insert(index, reason(index, "at least ", count + new_keys));
            continue;
        }
        let mut seen = Seen::default();
        seen.absorb(text, &tape, 0, &mut scratch);
        let mut widened = schema.clone();
        widened.evolve(&seen, names);
        let columns = widened.columns();
        if columns > max && columns > count {
            over_cap.insert(index, reason(index, "", columns));
        } else if widened != schema {
            (schema, count) = (widened, columns);
            checker = Col::new(&schema);
        }
    }
    Ok((schema, over_cap))
}

/// How many keys of the value at `idx` are not fields of `ty` where `ty`
/// is a struct (or a list of structs), each counted once: a lower bound of
/// the fields that evolving `ty` by the value adds.
fn new_keys(ty: &Ty, rec: Rec<'_>, idx: usize, scratch: &mut String) -> usize {
    match (ty, rec.tape.toks[idx]) {
        (Ty::Struct { fields }, Tok::Obj { end, .. }) => {
            // Hashed: a record may hold 200,000 keys.
            let mut new: HashSet<String> = HashSet::new();
            let mut nested = 0;
            let mut i = idx + 1;
            while i < end as usize {
                let Tok::Str { start, end: key_end, escaped } = rec.tape.toks[i] else { break };
                // Keys are valid: the record was screened.
                let key = unescape(rec.text, start, key_end, escaped, scratch).unwrap_or_default();
                match fields.position(key, usize::MAX) {
                    Some(at) => nested += new_keys(&fields.list[at].ty, rec, i + 1, scratch),
                    None if !new.contains(key) => {
                        new.insert(key.to_string());
                    }
                    None => {}
                }
                i = rec.tape.skip(i + 1);
            }
            new.len() + nested
        }
        (Ty::List { item }, Tok::Arr { end, .. }) => {
            // Items may repeat each other's keys: the widest item bounds them.
            let (mut i, mut most) = (idx + 1, 0);
            while i < end as usize {
                most = most.max(new_keys(item, rec, i, scratch));
                i = rec.tape.skip(i);
            }
            most
        }
        _ => 0,
    }
}

/// What the write pass does with a record that does not fit `schema`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fit {
    /// Quarantine it with the violation: `schema` took every record of the
    /// page into account (or is frozen).
    Quarantine,
    /// Stop (`Ok(None)`) at the first record that needs a wider inferred
    /// column: `schema` is the dataset's, and the page needs two passes.
    Stop,
    /// As [`Fit::Stop`], and also at a value an inference over every
    /// record could type otherwise ([`Col::check_kinds_exactly`]):
    /// `schema` was inferred from the page's first records only.
    StopInexact,
}

/// Pass 2 with `schema`. Unless `fit` is [`Fit::Quarantine`], returns
/// `Ok(None)` as soon as a record does not fit an inferred column (the
/// schema must widen first).
fn write_pass(
    source: &PageSource,
    format: &PayloadFormat,
    settings: PageSettings<'_>,
    schema: Ty,
    conflicts: Vec<String>,
    over_cap: &HashMap<u64, String>,
    fit: Fit,
) -> Result<Option<PageOutput>, ConvertError> {
    let mut checker = Col::new(&schema);
    // Timestamps kept as text: no column's type depends on which strings
    // are timestamps.
    if fit == Fit::StopInexact && settings.target.timestamps == contracts::Timestamps::Detect {
        checker.check_kinds_exactly();
    }
    let strict = fit != Fit::Quarantine;
    let data_fields = checker.arrow_fields();
    let no_columns = data_fields.is_empty();
    let mut fields: Vec<arrow_schema::FieldRef> = data_fields.iter().cloned().collect();
    if settings.lineage.is_some() {
        fields.extend(lineage_fields().into_iter().map(Arc::new));
    }
    let arrow_schema = Arc::new(Schema::new(fields));
    let files = &settings.target.files;
    let sink = FileSink {
        temp_dir: settings.temp_dir,
        schema: arrow_schema.clone(),
        properties: writer_properties(settings)?,
        max_rows: files.max_rows,
        max_bytes: files.max_bytes,
        partition_field: match &settings.target.partition {
            Partitioning::Field { field, .. } => field.clone(),
            Partitioning::RunDate => "run date".into(),
        },
        by_name: HashMap::new(),
        open: Vec::new(),
        done: Vec::new(),
        quarantine: Quarantine::new(settings.temp_dir)?,
        conflicts,
        rows: 0,
    };
    let mut framer = Framer::open(source, format, settings.limits.max_page_bytes)?;
    let lines = framer.lines_are_records();
    let batch_rows = settings.writer.batch_rows.max(1);
    // Read here, on the caller's thread (tests set it per thread). The
    // direct walk writes every record to one partition, the run date's.
    let eligible = if matches!(settings.target.partition, Partitioning::RunDate) && !no_columns {
        Walk::Direct
    } else {
        Walk::One
    };
    let walk = eligible.max(walk_limit());
    let checks = Checks { checker: &checker, over_cap, no_columns, strict, lines, walk };
    let max_page_records = settings.limits.max_page_records;
    let (framed, built, written) = match worker_count(settings.writer.workers) {
        1 => {
            // One core: framing, building and writing take turns on this
            // thread, a chunk at a time, so each chunk's text and columns
            // are still in the core's cache when the next step reads them
            // (three threads handing chunks over queues on one core were
            // 5-9 % slower and held the queued chunks: docs/persist-bench.md,
            // "One core, one thread").
            let mut builder = ChunkBuilder::new(settings, (&schema, &arrow_schema), checks);
            let mut sink = sink;
            let (mut built, mut sunk) = (Ok(()), Ok(()));
            let framed = frame_chunks(&mut framer, batch_rows, max_page_records, |chunk| {
                match builder.build(&chunk) {
                    Ok(chunk) => sunk = sink.take(chunk),
                    Err(stop) => built = Err(stop),
                }
                built.is_ok() && sunk.is_ok()
            });
            let written = sunk.and_then(|()| sink.finish());
            (framed, built, written)
        }
        workers => std::thread::scope(|scope| {
            let mut inputs = Vec::new();
            let mut outputs = Vec::new();
            let mut threads = Vec::new();
            for _ in 0..workers {
                let (input, chunks) = std::sync::mpsc::sync_channel::<Chunk>(2);
                let (output, results) = std::sync::mpsc::sync_channel::<Built>(2);
                let schemas = (&schema, &arrow_schema);
                threads.push(scope.spawn(move || build_chunks(chunks, output, settings, schemas, checks)));
                inputs.push(input);
                outputs.push(results);
            }
            let writer = scope.spawn(move || sink.run(outputs));
            let framed = frame_chunks(&mut framer, batch_rows, max_page_records, to_workers(&inputs));
            drop(inputs);
            let mut built: Result<(), (u64, Stop)> = Ok(());
            for thread in threads {
                let result = thread.join().unwrap_or_else(|_| Err((0, Stop::Failed(thread_panicked("build")))));
                if let Err((index, stop)) = result
                    && built.as_ref().err().is_none_or(|(first, _)| index < *first)
                {
                    built = Err((index, stop));
                }
            }
            let written = writer.join().unwrap_or_else(|_| Err(thread_panicked("Parquet writer")));
            (framed, built, written)
        }),
    };
    match built {
        Err((_, Stop::Failed(err))) => return Err(err),
        Err((_, Stop::Widen)) => return Ok(None),
        Ok(()) => {}
    }
    framed?;
    let mut sunk = written?;
    sunk.files.sort_by(|a, b| (a.partition.as_str(), a.part).cmp(&(b.partition.as_str(), b.part)));
    Ok(Some(PageOutput {
        files: sunk.files,
        quarantine: sunk.quarantine,
        records_in: framer.records_read(),
        records_fingerprint: framer.fingerprint(),
        rows_written: sunk.rows,
        input_bytes: framer.bytes_read(),
        schema,
        arrow_schema,
        conflicts: sunk.conflicts,
        schema_changes: Vec::new(),
    }))
}

/// Why a build worker stopped early.
enum Stop {
    /// The page cannot be converted.
    Failed(ConvertError),
    /// (Fast path) a record needs a wider schema: infer first.
    Widen,
}

fn thread_panicked(which: &str) -> ConvertError {
    ConvertError::Io(std::io::Error::other(format!("the {which} thread panicked")))
}

/// A chunk checked and built: batches per partition (first-seen order),
/// records set aside, schema conflicts, rows accepted.
struct Built {
    parts: Vec<(String, RecordBatch)>,
    quarantined: Vec<(u64, String, String)>,
    conflicts: Vec<(String, String)>,
    rows: u64,
}

/// Why a record is quarantined when neither its dataset nor its page has
/// a column: it holds no value (only `null`, `{}` or `[]`, at any depth).
pub const NO_COLUMN_YET: &str = "no field with a value (only null, {} or []) and the dataset has no column yet: \
                                 a row of no column is not written; a later page's values make the columns";

/// How pass 2 checks records.
#[derive(Clone, Copy)]
struct Checks<'a> {
    /// The write schema's checker.
    checker: &'a Col,
    /// Records left out of the schema by the column cap, with the reason.
    over_cap: &'a HashMap<u64, String>,
    /// Whether the schema has no column (only `{}` records so far).
    no_columns: bool,
    /// Fast path: stop at the first record that needs a wider schema.
    strict: bool,
    /// The records are NDJSON lines ([`screen`]).
    lines: bool,
    /// The walk each chunk is built with first.
    walk: Walk,
}

/// How pass 2 builds a chunk's records into columns, fastest first; a
/// chunk a walk does not take is built again with the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Walk {
    /// Each record's text straight into the builders, no tape
    /// ([`Col::append_direct`]): records whose keys and values are all
    /// their columns' own, every record in the run date's partition.
    Direct,
    /// Each record tokenized, then checked and appended in one walk of its
    /// tape ([`Col::append_checked`]).
    One,
    /// Each record checked ([`Col::check`]: quarantined with its reason
    /// when it does not fit), then appended: takes every record.
    Two,
}

/// Pass 2's worker: builds each chunk it receives ([`ChunkBuilder`]) and
/// sends it on, in order; an error carries its record index.
fn build_chunks(
    chunks: std::sync::mpsc::Receiver<Chunk>,
    output: std::sync::mpsc::SyncSender<Built>,
    settings: PageSettings<'_>,
    schemas: (&Ty, &SchemaRef),
    checks: Checks<'_>,
) -> Result<(), (u64, Stop)> {
    let mut builder = ChunkBuilder::new(settings, schemas, checks);
    for chunk in chunks {
        if output.send(builder.build(&chunk)?).is_err() {
            break;
        }
    }
    Ok(())
}

/// Pass 2's building, chunk after chunk: checks each record, quarantines
/// what does not fit, builds the rest per partition.
///
/// Each chunk is first built with the fastest [`Walk`] the page allows; a
/// record that walk does not take plainly sends the chunk back to be
/// built again with the next (check, then append, last: it quarantines and
/// routes exactly), and the builder keeps to that walk for its later
/// chunks: a page whose records need it pays for one chunk twice or three
/// times.
struct ChunkBuilder<'a> {
    settings: PageSettings<'a>,
    schema: &'a Ty,
    arrow_schema: &'a SchemaRef,
    checks: Checks<'a>,
    work: Work,
    walk: Walk,
    /// By run date, the whole page is one partition: its name is made
    /// once, not per record (formatting the date was a twentieth of the
    /// work).
    run_date_partition: Option<String>,
}

impl<'a> ChunkBuilder<'a> {
    fn new(settings: PageSettings<'a>, (schema, arrow_schema): (&'a Ty, &'a SchemaRef), checks: Checks<'a>) -> Self {
        ChunkBuilder {
            settings,
            schema,
            arrow_schema,
            checks,
            work: Work { tape: Tape::default(), scratch: String::new(), plan: Plan::default() },
            walk: checks.walk,
            run_date_partition: match settings.target.partition {
                Partitioning::RunDate => Some(format!("dt={}", settings.run_date)),
                Partitioning::Field { .. } => None,
            },
        }
    }

    /// `chunk` checked and built into batches.
    ///
    /// # Errors
    /// The first record's index that stops the page, with why: a
    /// [`ConvertError`], or (fast path) a record that needs a wider schema.
    fn build(&mut self, chunk: &Chunk) -> Result<Built, (u64, Stop)> {
        let (mut built, cols) = loop {
            let partition = self.run_date_partition.as_deref();
            match build_chunk(chunk, self.walk, self.settings, self.schema, self.checks, partition, &mut self.work)? {
                Some(built) => break built,
                None => {
                    self.walk = match self.walk {
                        Walk::Direct => Walk::One,
                        Walk::One => Walk::Two,
                        // Check, then append, takes every record.
                        Walk::Two => return Err((0, Stop::Failed(thread_panicked("build")))),
                    }
                }
            }
        };
        #[cfg(test)]
        tests::CHUNKS_BY_WALK[self.walk as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        built.parts = finish_parts(cols, self.settings.lineage, self.arrow_schema)?;
        Ok(built)
    }
}

/// The fastest walk pass 2 may take (tests compare the walks); never
/// limited in the function.
#[cfg(not(test))]
fn walk_limit() -> Walk {
    Walk::Direct
}

#[cfg(test)]
fn walk_limit() -> Walk {
    tests::WALK_LIMIT.with(std::cell::Cell::get)
}

/// A chunk built: its records' outcome, and its partitions' columns.
type BuiltChunk = (Built, Vec<(String, Col)>);

/// A build worker's buffers, reused from record to record.
struct Work {
    tape: Tape,
    scratch: String,
    plan: Plan,
}

/// Builds one chunk: each record screened, checked (quarantined when it
/// does not fit), partitioned and appended to its partition's columns.
/// `Ok(None)` says a record needs a slower [`Walk`] than `walk`: the chunk
/// is to be built again with the next.
fn build_chunk(
    chunk: &Chunk,
    walk: Walk,
    settings: PageSettings<'_>,
    schema: &Ty,
    Checks { checker, over_cap, no_columns, strict, lines, .. }: Checks<'_>,
    run_date_partition: Option<&str>,
    Work { tape, scratch, plan }: &mut Work,
) -> Result<Option<BuiltChunk>, (u64, Stop)> {
    let mut built = Built { parts: Vec::new(), quarantined: Vec::new(), conflicts: Vec::new(), rows: 0 };
    let mut cols: Vec<(String, Col)> = Vec::new();
    let mut index_of: HashMap<String, usize> = HashMap::new();
    // The columns appended to follow the checker's rules (`exact` on a
    // first page in one pass), as the one walk checks against them.
    let new_col = || {
        let mut col = Col::new(schema);
        if checker.checks_kinds_exactly() {
            col.check_kinds_exactly();
        }
        col
    };
    let one_walk = walk == Walk::One;
    for &(from, to, index, offset) in &chunk.records {
        let text = &chunk.text[from..to];
        if walk == Walk::Direct {
            // Not tokenized: a record the direct walk takes is valid JSON,
            // an object, as deep as the schema, with valid keys.
            let Some(name) = run_date_partition else { return Ok(None) };
            if cols.is_empty() {
                // One partition (the run date's) takes every record of
                // the chunk: sized for them up front.
                let mut col = new_col();
                col.reserve_rows(chunk.records.len());
                cols.push((name.to_string(), col));
            }
            if cols[0].1.append_direct(text, scratch).is_none() {
                return Ok(None);
            }
            built.rows += 1;
            continue;
        }
        let screened = screen(index, offset, text, lines, tape, scratch).map_err(|e| (index, Stop::Failed(e)))?;
        if let Some(reason) = screened {
            built.quarantined.push((index, reason, text.into()));
            continue;
        }
        let rec = Rec { text, tape };
        plan.clear();
        if !one_walk && let Err(violation) = checker.check(rec, 0, scratch, plan) {
            if strict && !violation.type_stands {
                return Err((index, Stop::Widen));
            }
            built.set_aside(index, text, *violation, over_cap, settings.limits.max_columns);
            continue;
        }
        let partition = match run_date_partition {
            Some(_) => None,
            None => match partition_of(&settings.target.partition, rec, settings.run_date, scratch) {
                Ok(partition) => Some(partition),
                // Check's reason comes first for a record that also does
                // not fit: the chunk is built again with check.
                Err(_) if one_walk => return Ok(None),
                Err(reason) => {
                    built.quarantined.push((index, format!("record {index}: {reason}"), text.into()));
                    continue;
                }
            },
        };
        if no_columns {
            // The dataset has no column yet, and the page's records no
            // value to give it one (only `{}`, `null`, `[]`): a row of no
            // column is no row a reader can see, so the record is set
            // aside with the reason rather than counted as written. A later
            // page's first value makes the dataset's first column; the
            // raw page stays replayable.
            if one_walk && checker.check(rec, 0, scratch, plan).is_err() {
                return Ok(None);
            }
            built.quarantined.push((index, format!("record {index}: {NO_COLUMN_YET}"), text.into()));
            continue;
        }
        let at = match (run_date_partition, partition) {
            (Some(name), _) => {
                if cols.is_empty() {
                    cols.push((name.to_string(), new_col()));
                }
                0
            }
            (None, partition) => {
                let partition = partition.unwrap_or_default();
                match index_of.get(&partition) {
                    Some(at) => *at,
                    None => {
                        index_of.insert(partition.clone(), cols.len());
                        cols.push((partition, new_col()));
                        cols.len() - 1
                    }
                }
            }
        };
        if one_walk {
            if cols[at].1.append_checked(rec, 0, scratch, plan).is_none() {
                return Ok(None);
            }
        } else {
            cols[at].1.append(rec, 0, scratch, plan);
        }
        built.rows += 1;
    }
    Ok(Some((built, cols)))
}

impl Built {
    /// Quarantines the record at `index` that did not fit, with its
    /// reason; a record the column cap left out (in `over_cap`) gets its
    /// own reason and one `MAX_COLUMNS` alert for the page. A violation of
    /// an inferred column is also a conflict to alert: the dataset's schema
    /// refusing a change.
    fn set_aside(
        &mut self,
        index: u64,
        text: &str,
        mut violation: Violation,
        over_cap: &HashMap<u64, String>,
        max_columns: usize,
    ) {
        if let Some(reason) = over_cap.get(&index) {
            self.quarantined.push((index, reason.clone(), text.into()));
            let prefix = "MAX_COLUMNS: ".to_string();
            let conflict = format!(
                "{prefix}the dataset would have more than {max_columns} columns; records that needed more are quarantined"
            );
            self.conflicts.push((prefix, conflict));
            return;
        }
        if violation.path.is_empty() {
            violation.path = "/".into();
        }
        self.quarantined.push((index, format!("record {index}: {violation}"), text.into()));
        // Inferred columns take every value of the page, so a violation
        // there is the dataset's schema refusing a change.
        if !violation.type_stands {
            let prefix = format!("{}: ", violation.path);
            let conflict = format!("{prefix}the dataset has {}, this page has {}", violation.expected, violation.found);
            self.conflicts.push((prefix, conflict));
        }
    }
}

/// The chunk's batches, one per partition: each built column finished,
/// with the lineage columns.
///
/// # Errors
/// Arrow's refusal of the batch (record index 0: the chunk's).
fn finish_parts(
    cols: Vec<(String, Col)>,
    lineage: Option<&Lineage>,
    arrow_schema: &SchemaRef,
) -> Result<Vec<(String, RecordBatch)>, (u64, Stop)> {
    let mut parts = Vec::with_capacity(cols.len());
    for (name, mut col) in cols {
        let data = col.finish_struct();
        let rows = arrow_array::Array::len(&data);
        let mut columns = data.into_parts().1;
        if let Some(lineage) = lineage {
            columns.extend(lineage.columns(rows));
        }
        let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(rows));
        let batch = RecordBatch::try_new_with_options(arrow_schema.clone(), columns, &options)
            .map_err(|err| (0, Stop::Failed(ConvertError::Parquet(ParquetError::from(err)))))?;
        parts.push((name, batch));
    }
    Ok(parts)
}

/// What the writer thread produced.
struct Sunk {
    files: Vec<OutputFile>,
    quarantine: Option<QuarantineFile>,
    conflicts: Vec<String>,
    rows: u64,
}

/// Pass 2's writing side: takes built chunks in order, one Parquet file
/// open per partition, and the quarantine file.
struct FileSink<'a> {
    temp_dir: &'a Path,
    schema: SchemaRef,
    properties: WriterProperties,
    max_rows: Option<u64>,
    max_bytes: Option<u64>,
    partition_field: String,
    by_name: HashMap<String, usize>,
    open: Vec<OpenPartition>,
    done: Vec<OutputFile>,
    quarantine: Quarantine<'a>,
    conflicts: Vec<String>,
    rows: u64,
}

struct OpenPartition {
    name: String,
    file: Option<(ArrowWriter<File>, TempPath)>,
    part: u32,
    rows: u64,
}

impl FileSink<'_> {
    /// Takes the built chunks from `results` (chunk `i` from
    /// `results[i % n]`) until they end, then closes the files.
    fn run(mut self, results: Vec<std::sync::mpsc::Receiver<Built>>) -> Result<Sunk, ConvertError> {
        let mut seq = 0;
        while let Ok(built) = results[seq % results.len()].recv() {
            seq += 1;
            self.take(built)?;
        }
        self.finish()
    }

    /// Writes the next chunk's batches and sets its quarantined records
    /// aside.
    fn take(&mut self, built: Built) -> Result<(), ConvertError> {
        for (index, reason, text) in &built.quarantined {
            self.quarantine.add(*index, reason, text)?;
        }
        for (prefix, conflict) in built.conflicts {
            if self.conflicts.len() < 10 && !self.conflicts.iter().any(|c| c.starts_with(&prefix)) {
                self.conflicts.push(conflict);
            }
        }
        self.rows += built.rows;
        for (name, batch) in built.parts {
            let at = self.partition(name)?;
            self.write_rows(at, batch)?;
        }
        Ok(())
    }

    /// Closes every open file.
    fn finish(mut self) -> Result<Sunk, ConvertError> {
        for at in 0..self.open.len() {
            self.close(at)?;
        }
        Ok(Sunk { files: self.done, quarantine: self.quarantine.finish()?, conflicts: self.conflicts, rows: self.rows })
    }

    fn partition(&mut self, name: String) -> Result<usize, ConvertError> {
        if let Some(at) = self.by_name.get(&name) {
            return Ok(*at);
        }
        if self.open.len() >= MAX_OPEN_PARTITIONS {
            return Err(ConvertError::TooManyPartitions { field: self.partition_field.clone() });
        }
        self.by_name.insert(name.clone(), self.open.len());
        self.open.push(OpenPartition { name, file: None, part: 0, rows: 0 });
        Ok(self.open.len() - 1)
    }

    /// Writes `batch`, cutting it where a file reaches `max_rows`.
    fn write_rows(&mut self, at: usize, mut batch: RecordBatch) -> Result<(), ConvertError> {
        while batch.num_rows() > 0 {
            let in_file = self.open[at].rows;
            let room = self.max_rows.map_or(usize::MAX, |max| max.saturating_sub(in_file).max(1) as usize);
            let take = room.min(batch.num_rows());
            let full = self.max_rows.is_some_and(|max| in_file + take as u64 >= max);
            self.write(at, &batch.slice(0, take), full)?;
            batch = batch.slice(take, batch.num_rows() - take);
        }
        Ok(())
    }

    fn write(&mut self, at: usize, batch: &RecordBatch, close: bool) -> Result<(), ConvertError> {
        let partition = &mut self.open[at];
        if partition.file.is_none() {
            let (file, path) = tempfile::NamedTempFile::new_in(self.temp_dir)?.into_parts();
            // The dictionary per column, from the file's first batch.
            let properties = crate::dictionary::for_first_batch(&self.properties, batch, DICTIONARY_PAGE_BYTES);
            partition.file = Some((ArrowWriter::try_new(file, self.schema.clone(), Some(properties))?, path));
        }
        let Some((writer, _)) = partition.file.as_mut() else { return Ok(()) };
        writer.write(batch)?;
        partition.rows += batch.num_rows() as u64;
        let full_bytes =
            self.max_bytes.is_some_and(|max| (writer.bytes_written() + writer.in_progress_size()) as u64 >= max);
        if close || full_bytes {
            self.close(at)?;
        }
        Ok(())
    }

    fn close(&mut self, at: usize) -> Result<(), ConvertError> {
        let partition = &mut self.open[at];
        if let Some((writer, path)) = partition.file.take() {
            writer.close()?;
            let bytes = std::fs::metadata(&path)?.len();
            self.done.push(OutputFile {
                partition: partition.name.clone(),
                part: partition.part,
                path,
                rows: partition.rows,
                bytes,
            });
            partition.part += 1;
            partition.rows = 0;
        }
        Ok(())
    }
}

/// Bytes of distinct values a column chunk's dictionary may hold before the
/// column falls back to plain encoding for the rest of the row group
/// (parquet's default is 1 MiB). A column that has more distinct values
/// than this — ids, e-mails, names — gains nothing from a dictionary, and
/// interning every value until 1 MiB cost the writer a tenth of its time.
/// A column whose sampled values say it would pass this is written plain
/// from the start (`dictionary.rs`), so the limit decides which columns
/// get one: at 512 KiB a page's SKUs (20,000 distinct in a row group) do,
/// and zstd compresses a third of their bytes: against 128 KiB, 1.4 % fewer
/// instructions in the conversion of the clean transactions page and a
/// file 4.6 % smaller (docs/persist-bench.md, "The dictionary limit at
/// 512 KiB"), while customer ids and prices (100,000 distinct) stay plain.
pub const DICTIONARY_PAGE_BYTES: usize = 512 * 1024;

fn writer_properties(settings: PageSettings<'_>) -> Result<WriterProperties, ConvertError> {
    let compression = match settings.target.files.compression {
        Compression::Zstd => ParquetCompression::ZSTD(ZstdLevel::try_new(settings.writer.zstd_level)?),
        Compression::Snappy => ParquetCompression::SNAPPY,
    };
    // The target's setting, unless it is the default: then the function's
    // (`ROW_GROUP_ROWS`).
    let declared = settings.target.files.row_group_rows;
    let row_group_rows = if declared == contracts::FileSettings::default().row_group_rows {
        settings.writer.row_group_rows
    } else {
        declared as usize
    };
    let row_group_rows = row_group_rows.max(1);
    Ok(WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(Some(row_group_rows))
        .set_dictionary_page_size_limit(DICTIONARY_PAGE_BYTES)
        .build())
}

struct Quarantine<'a> {
    dir: &'a Path,
    file: Option<(BufWriter<File>, TempPath)>,
    records: u64,
    sample_reasons: Vec<String>,
}

impl<'a> Quarantine<'a> {
    fn new(dir: &'a Path) -> Result<Self, ConvertError> {
        Ok(Quarantine { dir, file: None, records: 0, sample_reasons: Vec::new() })
    }

    fn add(&mut self, index: u64, reason: &str, record: &str) -> Result<(), ConvertError> {
        if self.file.is_none() {
            let (file, path) = tempfile::NamedTempFile::new_in(self.dir)?.into_parts();
            self.file = Some((BufWriter::new(file), path));
        }
        let Some((out, _)) = self.file.as_mut() else { return Ok(()) };
        let reason_json = serde_json::to_string(reason).unwrap_or_else(|_| "\"?\"".into());
        writeln!(out, "{{\"index\":{index},\"reason\":{reason_json},\"record\":{}}}", record.trim())?;
        self.records += 1;
        if self.sample_reasons.len() < 5 {
            self.sample_reasons.push(reason.to_string());
        }
        Ok(())
    }

    fn finish(self) -> Result<Option<QuarantineFile>, ConvertError> {
        let Some((mut out, path)) = self.file else { return Ok(None) };
        out.flush()?;
        Ok(Some(QuarantineFile { path, records: self.records, sample_reasons: self.sample_reasons }))
    }
}

/// The Hive partition path of a record.
///
/// # Errors
/// For `day` and `hour` partitions, why the record has no usable time at
/// `field` (absent, null, or a value that is no date or time): such a
/// record is quarantined, since a default-partition folder among the days
/// is beyond what Athena's date projection reaches.
pub fn partition_of(
    partitioning: &Partitioning,
    rec: Rec<'_>,
    run_date: NaiveDate,
    scratch: &mut String,
) -> Result<String, String> {
    let Partitioning::Field { field, granularity, column } = partitioning else {
        return Ok(format!("dt={run_date}"));
    };
    let value = lookup(rec, field);
    let timestamp = |value: &Tok, scratch: &mut String| -> Option<chrono::DateTime<chrono::Utc>> {
        match *value {
            Tok::Str { start, end, escaped } => {
                crate::build::parse_timestamp(unescape(rec.text, start, end, escaped, scratch).ok()?)
            }
            Tok::Num { start, end, .. } => {
                let n: f64 = rec.text[start as usize..end as usize].parse().ok()?;
                // Epoch seconds, or milliseconds when the number is too large for seconds.
                let millis = if n.abs() < 1e11 { n * 1000.0 } else { n };
                chrono::DateTime::from_timestamp_millis(millis as i64)
            }
            _ => None,
        }
    };
    let no_time = |found: String| {
        Err(format!(
            "partition field {field} is {found}, not a date or time: a table partitioned by {} needs one \
             (granularity: value partitions by the value as sent)",
            if matches!(granularity, Granularity::Hour) { "hour" } else { "day" }
        ))
    };
    Ok(match (granularity, value) {
        (Granularity::Day | Granularity::Hour, None) => return no_time("absent or null".into()),
        (Granularity::Day | Granularity::Hour, Some(tok)) => match timestamp(&tok, scratch) {
            Some(t) if matches!(granularity, Granularity::Day) => format!("{column}={}", t.format("%Y-%m-%d")),
            Some(t) => format!("{column}={}/hour={}", t.format("%Y-%m-%d"), t.format("%H")),
            None => {
                let found = match tok {
                    Tok::Str { start, end, escaped } => {
                        let text = unescape(rec.text, start, end, escaped, scratch).unwrap_or("");
                        let shown: String = text.chars().take(64).collect();
                        format!("{shown:?}")
                    }
                    Tok::Num { start, end, .. } => rec.text[start as usize..end as usize].to_string(),
                    other => crate::json::kind_name(&other).to_string(),
                };
                return no_time(found);
            }
        },
        (Granularity::Value, Some(Tok::Str { start, end, escaped })) => {
            let text = unescape(rec.text, start, end, escaped, scratch).unwrap_or("").to_string();
            format!("{column}={}", partition::escape(&text))
        }
        (Granularity::Value, Some(tok @ (Tok::Num { .. } | Tok::Bool(_)))) => {
            let raw = match tok {
                Tok::Num { start, end, .. } => rec.text[start as usize..end as usize].to_string(),
                Tok::Bool(b) => b.to_string(),
                _ => String::new(),
            };
            format!("{column}={}", partition::escape(&raw))
        }
        _ => format!("{column}={DEFAULT_PARTITION}"),
    })
}

fn lookup(rec: Rec<'_>, pointer: &str) -> Option<Tok> {
    match rec.tape.find(rec.text, pointer).map(|idx| rec.tape.toks[idx]) {
        Some(Tok::Null) | None => None,
        tok => tok,
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use serde_json::{Value, json};

    use super::*;

    thread_local! {
        /// The fastest walk pass 2 may take on this thread.
        pub(super) static WALK_LIMIT: std::cell::Cell<Walk> = const { std::cell::Cell::new(Walk::Direct) };
    }

    thread_local! {
        /// Build workers on this thread's conversions, when set.
        pub(super) static WORKERS: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
    }

    /// Chunks built with each [`Walk`] (by its `as usize`), in this process.
    pub(super) static CHUNKS_BY_WALK: [std::sync::atomic::AtomicUsize; 3] =
        [const { std::sync::atomic::AtomicUsize::new(0) }; 3];

    fn chunks_by(walk: Walk) -> usize {
        CHUNKS_BY_WALK[walk as usize].load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A record of one of nine shapes: plain, or with values its columns
    /// route to variant columns (`__text`, `__json`, ...), a timestamp
    /// with an offset (its `__text` companion), nulls, escaped strings,
    /// big integers, lists with nulls and of two kinds, empty objects.
    fn mixed(i: usize) -> Value {
        match i % 9 {
            0 | 7 => json!({"id": i, "name": format!("n{i}"), "at": "2026-01-01T00:00:00Z", "tags": ["a", "b"],
                "addr": {"city": "Recife", "zip": i % 100}, "amount": i as f64 / 4.0, "ok": i.is_multiple_of(2)}),
            1 => json!({"id": format!("x{i}"), "name": null, "at": "2026-01-01T00:00:00+02:00", "tags": [],
                "addr": null, "amount": 3}),
            2 => {
                json!({"id": i, "name": "é \"q\" \u{1F600}\\", "at": "soon", "tags": ["b", null], "addr": {"city": null}})
            }
            3 => json!({"id": 1.5, "tags": "solo", "addr": "somewhere", "extra": {"k": [1, 2]}, "ok": "yes"}),
            4 => json!({"id": 12_345_678_901_234_567_890_u64, "amount": "12.5", "tags": [1, "a"]}),
            5 => json!({}),
            6 => json!({"id": i, "at": 1_764_388_800, "addr": {"city": ["x"], "zip": "01000-000"}}),
            _ => json!({"id": -(i as i64), "at": "2026-01-01T00:00:00.123456Z", "extra": {"k": []}}),
        }
    }

    fn ndjson(lines: impl IntoIterator<Item = String>) -> PageSource {
        let mut text = String::new();
        for line in lines {
            text.push_str(&line);
            text.push('\n');
        }
        PageSource::Bytes(Bytes::from(text))
    }

    /// Everything a page's conversion gives: files, quarantine, counts,
    /// schema and conflicts.
    fn outcome(output: &PageOutput) -> (Vec<Vec<u8>>, Option<Vec<u8>>, u64, String, Ty) {
        let quarantine = output.quarantine.as_ref().map(|q| std::fs::read(&q.path).expect("quarantine"));
        let files: Vec<_> = output.files.iter().map(|f| (f.partition.clone(), f.rows)).collect();
        let summary = format!("{:?} {:?} {files:?}", output.conflicts, output.schema_changes);
        (bytes(output), quarantine, output.rows_written, summary, output.schema.clone())
    }

    /// `source` converted with each [`Walk`] as the fastest allowed: the
    /// same outcome. Returns whether it converted.
    fn same_every_way(case: &str, source: &PageSource, settings: PageSettings<'_>) -> bool {
        let mut outcomes = Vec::new();
        for walk in [Walk::Direct, Walk::One, Walk::Two] {
            WALK_LIMIT.with(|limit| limit.set(walk));
            outcomes.push((walk, convert_page(source, &PayloadFormat::default(), settings)));
        }
        WALK_LIMIT.with(|limit| limit.set(Walk::Direct));
        let (_, two) = outcomes.pop().expect("three");
        let mut converted = true;
        for (walk, one) in outcomes {
            converted &= same_outcome(&format!("{case}, {walk:?} against two walks"), &one, &two);
        }
        converted
    }

    /// Asserts that two conversions of one page had the same outcome (or
    /// the same error); returns whether they converted.
    fn same_outcome(
        case: &str,
        one: &Result<PageOutput, ConvertError>,
        two: &Result<PageOutput, ConvertError>,
    ) -> bool {
        match (one, two) {
            (Ok(one), Ok(two)) => {
                let (one, two) = (outcome(one), outcome(two));
                assert!(one.4 == two.4, "{case}: the schemas differ");
                assert_eq!(one.3, two.3, "{case}: conflicts, files");
                assert_eq!(one.2, two.2, "{case}: rows written");
                assert_eq!(one.1.map(String::from_utf8), two.1.map(String::from_utf8), "{case}: quarantine");
                assert!(one.0 == two.0, "{case}: the files' bytes differ");
                true
            }
            (one, two) => {
                let error = |result: &Result<PageOutput, ConvertError>| result.as_ref().err().map(|e| e.to_string());
                assert_eq!(error(one), error(two), "{case}: one converted and the other did not");
                false
            }
        }
    }

    #[test]
    fn one_walk_per_record_writes_what_check_then_append_writes() {
        // Each case's records follow 13,000 mixed ones (more than a chunk),
        // converted as a first page and against the table the mixed
        // records make (variant columns and a `__text` companion).
        let base: Vec<String> = (0..13_000).map(|i| mixed(i).to_string()).collect();
        let wide = {
            let mut record = serde_json::Map::new();
            for k in 0..80 {
                record.insert(format!("f{k}"), json!(k));
            }
            Value::Object(record).to_string()
        };
        let cases: Vec<(&str, Vec<String>)> = vec![
            ("nothing more", vec![]),
            ("an escaped key", vec![r#"{"na\u006de": "x", "id": 1}"#.into()]),
            ("a repeated key", vec![r#"{"id": 1, "name": "a", "id": 2}"#.into()]),
            ("a key that is a lone surrogate", vec![r#"{"\ud800": 1}"#.into()]),
            ("a new field", vec![r#"{"id": 1, "late": true}"#.into()]),
            ("a new nested field", vec![r#"{"id": 1, "addr": {"street": "x"}}"#.into()]),
            ("a value no variant takes yet", vec![r#"{"id": 1, "ok": 2.5}"#.into()]),
            ("an integer beyond every column", vec![r#"{"id": 1e400}"#.into()]),
            ("a string that is not Unicode", vec![r#"{"name": "\udc00"}"#.into()]),
            // Items of a list its `__json` column would take, after one
            // that fits no column: quarantined, not sent to `__json`.
            ("a list with an unrepresentable item", vec![r#"{"tags": ["\ud800", 1]}"#.into()]),
            ("a record of 80 fields", vec![wide.clone(), wide]),
            ("not an object, and not JSON", vec!["[1]".into(), "{".into()]),
        ];
        let before = chunks_by(Walk::One);
        for (case, late) in &cases {
            let lines = || base.iter().cloned().chain(late.iter().cloned());
            with(|settings, _| {
                let source = ndjson(lines());
                assert!(same_every_way(&format!("{case}, a first page"), &source, settings));
                let lake = convert_page(&ndjson(base.iter().take(900).cloned()), &PayloadFormat::default(), settings)
                    .expect("the table")
                    .schema;
                let known = PageSettings { lake_schema: Some(&lake), ..settings };
                assert!(same_every_way(&format!("{case}, the table known"), &source, known));
            });
        }
        // Declared columns (with a required one) and a field partition.
        let mut target = PersistTarget::new("t");
        for (name, ty, required) in [
            ("id", "string", true),
            ("amount", "decimal(12, 2)", false),
            ("at", "timestamp(ms)", false),
            ("tags", "list<string>", false),
            ("addr", "json", false),
            ("ok", "bool", false),
        ] {
            target.schema.push(contracts::DeclaredField {
                name: name.into(),
                data_type: ty.parse().expect("type"),
                required,
            });
        }
        target.partition =
            Partitioning::Field { field: "/addr/city".into(), granularity: Granularity::Value, column: "city".into() };
        with_target(target, |settings, _| {
            let late =
                [r#"{"amount": 1.005, "addr": {"city": "../x"}}"#, r#"{"id": null}"#, r#"{"id": 5, "at": "1 May"}"#];
            let source = ndjson(base.iter().cloned().chain(late.iter().map(|l| l.to_string())));
            assert!(same_every_way("declared columns, partitioned by a field", &source, settings));
        });
        assert!(chunks_by(Walk::One) > before, "some chunks took the one walk");
    }

    /// A record the direct walk takes against the table such records make:
    /// keys in two orders, some missing, nulls, empty lists and objects,
    /// lists of structs and of timestamps, timestamps with an offset (their
    /// `__text` companion), integers in a float column, text beyond ASCII,
    /// whitespace between tokens.
    fn plain(i: usize) -> String {
        let at = if i.is_multiple_of(5) { "2026-01-01T00:00:00+02:00" } else { "2026-01-01T00:00:00.5Z" };
        let amount = if i.is_multiple_of(3) { json!(i) } else { json!(i as f64 / 4.0) };
        let record = match i % 4 {
            0 => json!({"id": i, "name": format!("Nguyễn {i}"), "at": at, "tags": ["a", "b"], "amount": amount,
                "addr": {"city": "Recife", "zip": i % 100}, "ok": true,
                "items": [{"sku": "s1", "qty": 2}, {"sku": null, "qty": -3}], "seen": ["2026-02-01T00:00:00Z"]}),
            1 => json!({"ok": false, "addr": {"zip": 7, "city": null}, "tags": [], "name": "", "id": -(i as i64),
                "items": [], "seen": [null]}),
            2 => json!({"id": i, "addr": null, "tags": ["x", null], "amount": amount, "items": [{}], "ok": null}),
            _ => json!({"id": 0, "addr": {}, "name": "n", "at": at}),
        };
        if i.is_multiple_of(7) {
            // Whitespace wherever JSON allows it.
            record
                .to_string()
                .replace("\":", "\" :\t")
                .replace(",\"", " ,\r\t \"")
                .replace('{', "{ ")
                .replace(']', " ]")
        } else {
            record.to_string()
        }
    }

    #[test]
    fn the_direct_walk_writes_what_check_then_append_writes() {
        // 13,000 records the direct walk takes (more than a chunk), then
        // each case's: converted as a first page and against the table the
        // first records make.
        let base: Vec<String> = (0..13_000).map(plain).collect();
        let cases: Vec<(&str, Vec<String>)> = vec![
            ("nothing more", vec![]),
            ("an escaped string", vec![r#"{"id": 1, "name": "a\"b"}"#.into()]),
            ("an escaped key", vec![r#"{"na\u006de": "x", "id": 1}"#.into()]),
            ("a repeated key", vec![r#"{"id": 1, "name": "a", "id": 2}"#.into()]),
            ("a new field", vec![r#"{"id": 1, "late": true}"#.into()]),
            ("a value of another kind", vec![r#"{"id": "one"}"#.into(), r#"{"ok": 1}"#.into()]),
            ("an integer of 16 digits", vec![r#"{"id": 1234567890123456}"#.into()]),
            ("a float beyond f64", vec![r#"{"amount": 1e400}"#.into()]),
            ("a float rounded to zero", vec![r#"{"amount": 1e-400}"#.into(), r#"{"amount": 0.0e-400}"#.into()]),
            ("a timestamp in the text column", vec![r#"{"name": "2026-01-01T00:00:00Z"}"#.into()]),
            ("a timestamp among a list's text", vec![r#"{"tags": ["a", "2026-01-01T00:00:00Z"]}"#.into()]),
            ("an escaped timestamp in the text column", vec![r#"{"name": "2026-01-01T00:00:00\u005a"}"#.into()]),
            ("text in a timestamp list", vec![r#"{"seen": ["soon"]}"#.into()]),
            ("a control character", vec!["{\"name\": \"a\u{1}b\"}".into()]),
            ("not JSON", vec![r#"{"id": 1,}"#.into(), r#"{"id": 01}"#.into(), r#"{"id": 1} x"#.into()]),
            ("not an object", vec!["[1]".into(), "7".into()]),
            ("nested too deep", vec![format!("{{\"addr\": {}1{}}}", "[".repeat(40), "]".repeat(40))]),
        ];
        let before = chunks_by(Walk::Direct);
        for (case, late) in &cases {
            let lines = || base.iter().cloned().chain(late.iter().cloned());
            with(|settings, _| {
                let source = ndjson(lines());
                same_every_way(&format!("{case}, a first page"), &source, settings);
                let lake = convert_page(&ndjson(base.iter().take(900).cloned()), &PayloadFormat::default(), settings)
                    .expect("the table")
                    .schema;
                let known = PageSettings { lake_schema: Some(&lake), ..settings };
                same_every_way(&format!("{case}, the table known"), &source, known);
            });
        }
        assert!(chunks_by(Walk::Direct) > before, "some chunks took the direct walk");
    }

    /// `source` converted by one worker (on the caller's thread, chunk by
    /// chunk) and by three (threads and queues): the same outcome, or the
    /// same error.
    fn same_on_one_core(case: &str, source: &PageSource, settings: PageSettings<'_>) {
        let mut outcomes = Vec::new();
        for workers in [1, 3] {
            WORKERS.with(|count| count.set(Some(workers)));
            outcomes.push(convert_page(source, &PayloadFormat::default(), settings));
        }
        WORKERS.with(|count| count.set(None));
        let (three, one) = (outcomes.pop().expect("two"), outcomes.pop().expect("two"));
        same_outcome(case, &one, &three);
    }

    #[test]
    fn one_core_converts_on_the_callers_thread_what_three_workers_convert() {
        // More than a chunk (1 MiB) of records, so each path hands over
        // several: clean ones (one pass, the direct walk), mixed ones (two
        // passes, quarantine), each as a first page and against a table.
        let clean: Vec<String> = (0..12_000)
            .map(|i| {
                json!({"id": i, "name": format!("name {i}"), "tags": ["a", "b"], "pad": "x".repeat(80)}).to_string()
            })
            .collect();
        let mixed: Vec<String> = (0..13_000).map(|i| mixed(i).to_string()).collect();
        let cases: Vec<(&str, Vec<String>)> = vec![
            ("clean", clean.clone()),
            ("clean, then a new field", clean.iter().cloned().chain([r#"{"id": 1, "late": 2}"#.into()]).collect()),
            ("mixed, with records to quarantine", mixed.iter().cloned().chain(["[1]".into(), "{".into()]).collect()),
        ];
        for (case, lines) in &cases {
            with(|settings, _| {
                let source = ndjson(lines.iter().cloned());
                same_on_one_core(&format!("{case}, a first page"), &source, settings);
                let lake = convert_page(&ndjson(lines.iter().take(900).cloned()), &PayloadFormat::default(), settings)
                    .expect("the table")
                    .schema;
                same_on_one_core(
                    &format!("{case}, the table known"),
                    &source,
                    PageSettings { lake_schema: Some(&lake), ..settings },
                );
                // A page past its record bound stops with the same error.
                let limits = PageLimits { max_page_records: 5_000, ..settings.limits };
                same_on_one_core(&format!("{case}, too many records"), &source, PageSettings { limits, ..settings });
            });
        }
        // Files cut at 5,000 rows: the writer's parts across chunks.
        let mut target = PersistTarget::new("t");
        target.files.max_rows = Some(5_000);
        with_target(target, |settings, _| {
            same_on_one_core("clean, files of 5,000 rows", &ndjson(clean.iter().cloned()), settings);
        });
    }

    /// `records` then `late`, as NDJSON.
    fn page(records: usize, late: &[Value]) -> PageSource {
        let mut text = String::new();
        for i in 0..records {
            let record = json!({"id": i, "name": format!("name {i}"), "at": "2026-01-01T00:00:00Z",
                "tags": ["a", "b"], "addr": {"city": "Recife"}});
            text.push_str(&record.to_string());
            text.push('\n');
        }
        for record in late {
            text.push_str(&record.to_string());
            text.push('\n');
        }
        PageSource::Bytes(Bytes::from(text))
    }

    /// Clean records past [`FIRST_RECORDS_BYTES`] (about 110 bytes each).
    const CLEAN: usize = 12_000;

    fn with<T>(run: impl FnOnce(PageSettings<'_>, Naming<'_>) -> T) -> T {
        with_target(PersistTarget::new("t"), run)
    }

    fn with_target<T>(target: PersistTarget, run: impl FnOnce(PageSettings<'_>, Naming<'_>) -> T) -> T {
        let writer = WriterConfig::default();
        let dir = tempfile::tempdir().expect("tempdir");
        let settings = PageSettings {
            target: &target,
            lineage: None,
            lake_schema: None,
            run_date: NaiveDate::from_ymd_opt(2026, 12, 6).expect("date"),
            writer: &writer,
            limits: PageLimits::default(),
            temp_dir: dir.path(),
        };
        let names = Naming {
            policy: target.names,
            reserved: &[],
            timestamps: target.timestamps == contracts::Timestamps::Detect,
        };
        run(settings, names)
    }

    /// The page in two passes: inferred from every record, then written.
    fn two_passes(source: &PageSource, settings: PageSettings<'_>, names: Naming<'_>) -> PageOutput {
        let seen = seen_in_page(source, &PayloadFormat::default(), settings.limits, 0).expect("inference");
        let mut schema = empty_table();
        schema.evolve(&seen, names);
        write_pass(source, &PayloadFormat::default(), settings, schema, Vec::new(), &HashMap::new(), Fit::Quarantine)
            .expect("write")
            .expect("written")
    }

    fn one_pass(source: &PageSource, settings: PageSettings<'_>, names: Naming<'_>) -> Option<PageOutput> {
        first_page_in_one_pass(source, &PayloadFormat::default(), settings, &empty_table(), names, &[])
            .expect("one pass")
    }

    fn bytes(output: &PageOutput) -> Vec<Vec<u8>> {
        output.files.iter().map(|file| std::fs::read(&file.path).expect("read")).collect()
    }

    #[test]
    fn a_first_page_that_fits_its_first_records_is_written_in_one_pass_the_same_bytes_as_in_two() {
        with(|settings, names| {
            let source = page(CLEAN, &[json!({"id": 1, "name": null, "tags": [], "addr": {}})]);
            let one = one_pass(&source, settings, names).expect("written in one pass");
            let two = two_passes(&source, settings, names);
            assert_eq!(one.schema, two.schema);
            assert_eq!(one.rows_written, CLEAN as u64 + 1);
            assert_eq!(bytes(&one), bytes(&two));
        });
    }

    #[test]
    fn a_first_page_whose_later_records_type_otherwise_is_typed_from_every_record() {
        let timestamps = |field: &str, n: usize| -> Vec<Value> {
            (0..n).map(|i| json!({"id": i, field: "2026-01-02T00:00:00Z"})).collect()
        };
        let listed = (0..CLEAN + 1).map(|i| json!({"id": i, "tags": ["2026-01-02T00:00:00Z"]})).collect();
        let cases: Vec<(&str, Vec<Value>)> = vec![
            ("a new field", vec![json!({"id": 1, "late": true})]),
            ("a float among integers", vec![json!({"id": 1.5})]),
            (
                "an integer beyond int64",
                vec![json!({"id": 18446744073709551616_u128.to_string().parse::<Value>().unwrap()})],
            ),
            ("timestamps outnumbering text", timestamps("name", CLEAN + 1)),
            ("one timestamp among text", timestamps("name", 1)),
            ("a timestamp with an offset", vec![json!({"id": 1, "at": "2026-01-02T00:00:00+02:00"})]),
            ("text among timestamps", vec![json!({"id": 1, "at": "soon"})]),
            ("timestamps outnumbering text in a list", listed),
            ("a new field in a nested object", vec![json!({"id": 1, "addr": {"zip": 5}})]),
        ];
        for (case, late) in cases {
            with(|settings, names| {
                let source = page(CLEAN, &late);
                assert!(one_pass(&source, settings, names).is_none(), "{case}: not in one pass");
                let converted = convert_page(&source, &PayloadFormat::default(), settings).expect("convert");
                let two = two_passes(&source, settings, names);
                assert_eq!(converted.schema, two.schema, "{case}");
                assert_eq!(converted.rows_written, (CLEAN + late.len()) as u64, "{case}");
                assert_eq!(bytes(&converted), bytes(&two), "{case}");
            });
        }
    }

    #[test]
    fn a_first_page_whose_first_records_mix_kinds_is_not_tried_in_one_pass() {
        with(|settings, names| {
            // The column's type is the majority's over the page: text here,
            // though the first records hold more numbers.
            let mut late: Vec<Value> =
                (0..CLEAN * 2).map(|i| json!({"id": i, "n": format!("v{i} {}", "x".repeat(80))})).collect();
            let mut records: Vec<Value> = (0..100).map(|i| json!({"id": i, "n": i})).collect();
            records.push(json!({"id": 100, "n": "x"}));
            records.append(&mut late);
            let text: String = records.iter().map(|r| format!("{r}\n")).collect();
            let source = PageSource::Bytes(Bytes::from(text));
            assert!(one_pass(&source, settings, names).is_none());
            let converted = convert_page(&source, &PayloadFormat::default(), settings).expect("convert");
            assert_eq!(converted.schema, two_passes(&source, settings, names).schema);
            assert!(
                converted
                    .arrow_schema
                    .field_with_name("n")
                    .is_ok_and(|f| f.data_type() == &arrow_schema::DataType::Utf8)
            );
        });
    }

    #[test]
    fn with_timestamps_kept_as_text_a_timestamp_among_text_is_text_in_one_pass() {
        let mut target = PersistTarget::new("t");
        target.timestamps = contracts::Timestamps::Text;
        with_target(target, |settings, names| {
            let late: Vec<Value> = (0..CLEAN + 1).map(|i| json!({"id": i, "name": "2026-01-02T00:00:00Z"})).collect();
            let source = page(CLEAN, &late);
            let one = one_pass(&source, settings, names).expect("written in one pass");
            let two = two_passes(&source, settings, names);
            assert_eq!(one.schema, two.schema);
            assert!(
                one.arrow_schema.field_with_name("name").is_ok_and(|f| f.data_type() == &arrow_schema::DataType::Utf8)
            );
            assert_eq!(bytes(&one), bytes(&two));
        });
    }

    #[test]
    fn a_first_page_within_its_first_records_is_inferred_once() {
        with(|settings, names| {
            let source = page(50, &[json!({"id": 1.5, "name": 3})]);
            let one = one_pass(&source, settings, names).expect("the page is its first records");
            let two = two_passes(&source, settings, names);
            assert_eq!(one.schema, two.schema);
            assert_eq!(bytes(&one), bytes(&two));
        });
    }
}

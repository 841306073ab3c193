//! The stream port: reading a Kinesis data stream's shards or a Kafka
//! topic's partitions from a position, for the local runtime's poller (on
//! AWS the Lambda event source mapping reads the stream and hands batches
//! to Persist).
//!
//! Two implementations (`adapters`): Kinesis through the AWS SDK
//! (`GetShardIterator` / `GetRecords`, feature `kinesis`), and a file of
//! records for Kafka where no broker runs.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::ports::PortError;

/// One record of a stream, whatever the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamRecord {
    /// Kinesis shard id (`shardId-000000000001`) or Kafka `<topic>-<partition>`.
    pub partition: String,
    /// Kinesis sequence number or Kafka offset, as decimal digits.
    pub sequence: String,
    /// The record's data, base64-decoded; `None` for a Kafka tombstone (no value).
    pub data: Option<Vec<u8>>,
    /// When the stream took the record (Kinesis `ApproximateArrivalTimestamp`,
    /// Kafka `timestamp`), UTC.
    pub arrival: DateTime<Utc>,
}

/// The last millisecond a record's arrival may be: 9999-12-31T23:59:59.999Z,
/// the last instant Athena, Spark and Arrow's date casts show (a `dt=`
/// partition beyond it, or before the year 1, breaks readers: pyarrow fails
/// the whole dataset with "date value out of range").
pub const LAST_ARRIVAL_MILLIS: i64 = 253_402_300_799_999;

impl StreamRecord {
    /// A Kafka record timestamp (milliseconds since the epoch) as the
    /// record's arrival. Kafka's timestamps are never negative but for
    /// `-1`, "no timestamp" (KIP-32), and a producer sets `CreateTime` as it
    /// likes: one before the epoch or after [`LAST_ARRIVAL_MILLIS`] is taken
    /// as the epoch, 1970-01-01T00:00:00Z, the same on every read (a replay
    /// must write the record where the first read did; the time of reading
    /// would move it), and readable by every reader.
    pub fn kafka_arrival(millis: i64) -> DateTime<Utc> {
        (0..=LAST_ARRIVAL_MILLIS)
            .contains(&millis)
            .then(|| DateTime::<Utc>::from_timestamp_millis(millis))
            .flatten()
            .unwrap_or_default()
    }
}

/// Where a read starts (the Kinesis `ShardIteratorType`s, and a
/// continuation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamPosition {
    /// The oldest record retained.
    TrimHorizon,
    /// After the newest record (only what is written from now on).
    Latest,
    /// The first record at or after the instant.
    AtTimestamp(DateTime<Utc>),
    /// The record with this sequence number.
    AtSequence(String),
    /// The record after this sequence number.
    AfterSequence(String),
    /// Where the previous read stopped ([`StreamRead::next`]).
    Continue(String),
}

/// What one read returned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamRead {
    /// The records, in order.
    pub records: Vec<StreamRecord>,
    /// Where the next read continues; `None`: the shard is closed and read
    /// to its end.
    pub next: Option<String>,
    /// How far behind the stream's tip the read is, in milliseconds
    /// (Kinesis `MillisBehindLatest`); `None` when the source does not say.
    pub millis_behind_latest: Option<u64>,
    /// How many records of the partition follow the read's last record (or
    /// its start, when it read none): records behind, exactly, where the
    /// source can count them (a file of records); `None` when it cannot
    /// (Kinesis tells time behind, not records).
    pub records_behind: Option<u64>,
}

/// Reads a stream's partitions.
#[async_trait]
pub trait StreamReader: Send + Sync {
    /// The stream's shards (or the topic's partitions), in order.
    ///
    /// # Errors
    /// [`PortError`]: the stream does not exist (permanent), throttling
    /// (transient).
    async fn partitions(&self, stream: &str) -> Result<Vec<String>, PortError>;

    /// Up to `limit` records of `partition` from `from`.
    ///
    /// # Errors
    /// [`PortError`] as [`StreamReader::partitions`]; an expired
    /// continuation is transient (read again from a sequence number).
    async fn read(
        &self,
        stream: &str,
        partition: &str,
        from: &StreamPosition,
        limit: u32,
    ) -> Result<StreamRead, PortError>;
}

/// Compares two decimal sequence numbers (no leading zeros, as Kinesis and
/// Kafka write them): by length, then digits.
pub fn sequence_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

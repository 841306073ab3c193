//! [`StreamReader`] over a file of records: the local stand-in for a Kafka
//! topic where no broker runs (and for replaying an exported topic).
//!
//! The file is JSON lines, one record each, in the shape of a record of the
//! Lambda MSK event (Lambda developer guide, "Using Lambda with Amazon
//! MSK"): `{"topic", "partition", "offset", "timestamp" (epoch ms),
//! "value" (base64, or null for a tombstone)}`. Partitions are named
//! `<topic>-<partition>` as the event's `records` keys are.
//!
//! The file is checked whole whenever it changed since the last read (its
//! length or modification time; the parsed records are kept between
//! reads, so a poll of n records in batches reads the file once, not once
//! a batch: a trial's 160k records had taken 6 minutes), as a broker would
//! never serve it otherwise: every record is of the stream's topic, and has an
//! `offset`, a non-negative integer, greater than the offset of the line
//! before it in its partition (Kafka offsets strictly increase within a
//! partition). A missing offset is not guessed: taken as 0 or as the
//! line's index it would clash with a real record's offset, and the
//! checkpoint would then skip that record as in the lake.
//!
//! A file read without [`FileStream::following`] is a closed shard: read to
//! its end, it has no continuation. A followed file is an open one (`tail
//! -f`): at its end a read returns a continuation, and lines appended later
//! are read from it; a last line without its newline yet is left for a
//! later read (the writer may be midway through it).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use base64::Engine;

use tributary_core::ports::PortError;
use tributary_core::streams::{StreamPosition, StreamRead, StreamReader, StreamRecord, sequence_cmp};

/// A topic read from a JSON-lines file.
#[derive(Clone, Debug)]
pub struct FileStream {
    path: PathBuf,
    follow: bool,
    /// The records last parsed, and the file they were parsed from.
    parsed: Arc<Mutex<Option<Parsed>>>,
}

/// A file's records as parsed, with what tells whether the file changed.
#[derive(Debug)]
struct Parsed {
    topic: String,
    len: u64,
    modified: Option<std::time::SystemTime>,
    partitions: Arc<BTreeMap<String, Vec<StreamRecord>>>,
}

impl FileStream {
    /// The records in `path`, a closed shard per partition.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into(), follow: false, parsed: Arc::default() }
    }

    /// The same file followed (`tributary run --follow`): at its end a
    /// partition is at its tip, not closed, and lines appended later are
    /// read (see the module documentation).
    #[must_use]
    pub fn following(mut self, follow: bool) -> Self {
        self.follow = follow;
        self
    }

    /// Every record of `topic` by partition, in offset order.
    ///
    /// # Errors
    /// [`PortError::Permanent`] naming the file and line of a record that is
    /// not in the documented shape (naming the field), of another topic
    /// (naming both), or whose offset does not follow the one before it in
    /// its partition (naming the partition and both offsets).
    pub fn records(&self, topic: &str) -> Result<BTreeMap<String, Vec<StreamRecord>>, PortError> {
        Ok(self.parsed(topic)?.as_ref().clone())
    }

    /// [`FileStream::records`], parsed again only when the file changed.
    fn parsed(&self, topic: &str) -> Result<Arc<BTreeMap<String, Vec<StreamRecord>>>, PortError> {
        let target = self.path.display().to_string();
        let meta = std::fs::metadata(&self.path).map_err(|err| PortError::permanent("read", &target, err))?;
        let (len, modified) = (meta.len(), meta.modified().ok());
        let mut cached = self.parsed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(parsed) = cached.as_ref()
            && parsed.topic == topic
            && parsed.len == len
            && parsed.modified == modified
        {
            return Ok(parsed.partitions.clone());
        }
        let partitions = Arc::new(self.parse(topic)?);
        *cached = Some(Parsed { topic: topic.to_string(), len, modified, partitions: partitions.clone() });
        Ok(partitions)
    }

    /// Reads and checks the whole file.
    fn parse(&self, topic: &str) -> Result<BTreeMap<String, Vec<StreamRecord>>, PortError> {
        let target = self.path.display().to_string();
        let bytes = std::fs::read(&self.path).map_err(|err| PortError::permanent("read", &target, err))?;
        let mut text = String::from_utf8(bytes).map_err(|err| {
            // Name the line: a file of records is JSON lines, UTF-8.
            let at = err.utf8_error().valid_up_to();
            let line = err.as_bytes()[..at].iter().filter(|&&b| b == b'\n').count() + 1;
            PortError::permanent_msg(
                "read",
                format!("{target}:{line}"),
                format!("byte {} of the file is not UTF-8: a file of records is JSON lines, in UTF-8", at + 1),
            )
        })?;
        if self.follow {
            // A line being appended is read once its newline is written.
            text.truncate(text.rfind('\n').map_or(0, |end| end + 1));
        }
        let mut partitions: BTreeMap<String, Vec<StreamRecord>> = BTreeMap::new();
        for (number, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
            let bad = |problem: String| PortError::permanent_msg("read", format!("{target}:{}", number + 1), problem);
            let record = parse_record(line, topic).map_err(bad)?;
            let list = partitions.entry(record.partition.clone()).or_default();
            if let Some(before) = list.last()
                && sequence_cmp(&record.sequence, &before.sequence).is_le()
            {
                return Err(bad(format!(
                    "offset {} of partition {} does not follow offset {} before it: Kafka offsets strictly increase within a partition (a record twice, or the file out of order)",
                    record.sequence, record.partition, before.sequence
                )));
            }
            list.push(record);
        }
        Ok(partitions)
    }
}

/// What a line of the file holds, as the refusals name it.
const RECORD_SHAPE: &str = "the MSK event's record shape (topic, partition, offset, timestamp, base64 value)";

/// One line of the file as a record of `topic`, or what is wrong with it.
fn parse_record(line: &str, topic: &str) -> Result<StreamRecord, String> {
    let value: serde_json::Value = serde_json::from_str(line)
        .map_err(|err| format!("the line is not JSON ({err}): each line is one JSON object in {RECORD_SHAPE}"))?;
    if !value.is_object() {
        return Err(format!(
            "the line is {}, not a record: each line is one object in {RECORD_SHAPE}",
            tributary_core::json::kind_of(&value)
        ));
    }
    let of = value["topic"].as_str().ok_or("`topic` must be a string")?;
    if of != topic {
        return Err(format!("`topic` is {of:?}, not the spec's topic {topic:?}"));
    }
    let partition = match &value["partition"] {
        serde_json::Value::Null => return Err("`partition` is missing: every record needs its Kafka partition".into()),
        other => other.as_i64().ok_or("`partition` must be an integer")?,
    };
    if !(0..=i64::from(i32::MAX)).contains(&partition) {
        return Err(format!("`partition` must be 0 to 2147483647 (Kafka's int32 partitions), not {partition}"));
    }
    let offset = match &value["offset"] {
        serde_json::Value::Null => return Err("`offset` is missing: every record needs its Kafka offset".into()),
        other => {
            other.as_i64().ok_or("`offset` must be an integer from 0 to 9223372036854775807 (Kafka's int64 offsets)")?
        }
    };
    if offset < 0 {
        return Err(format!("`offset` must be 0 or more, not {offset}"));
    }
    let data = match &value["value"] {
        serde_json::Value::Null => None,
        serde_json::Value::String(b64) => {
            Some(base64::engine::general_purpose::STANDARD.decode(b64).map_err(|err| {
                format!(
                    "`value` is not base64 ({err}): it holds the record's bytes in base64, as the MSK event \
                         does; bytes that are not JSON are base64 too, and are quarantined when read"
                )
            })?)
        }
        _ => return Err("`value` must be base64 text or null".into()),
    };
    // The MSK event's `timestamp`: milliseconds since the epoch; none is
    // Kafka's -1, "no timestamp" (see `StreamRecord::kafka_arrival`).
    let arrival = match &value["timestamp"] {
        serde_json::Value::Null => StreamRecord::kafka_arrival(-1),
        other => StreamRecord::kafka_arrival(
            other.as_i64().ok_or("`timestamp` must be an integer: the Kafka timestamp in ms since the epoch")?,
        ),
    };
    Ok(StreamRecord { partition: format!("{of}-{partition}"), sequence: offset.to_string(), data, arrival })
}

#[async_trait]
impl StreamReader for FileStream {
    async fn partitions(&self, stream: &str) -> Result<Vec<String>, PortError> {
        Ok(self.parsed(stream)?.keys().cloned().collect())
    }

    async fn read(
        &self,
        stream: &str,
        partition: &str,
        from: &StreamPosition,
        limit: u32,
    ) -> Result<StreamRead, PortError> {
        let parsed = self.parsed(stream)?;
        let all: &[StreamRecord] = parsed.get(partition).map_or(&[], Vec::as_slice);
        let start = match from {
            StreamPosition::TrimHorizon => 0,
            StreamPosition::Latest => all.len(),
            StreamPosition::AtTimestamp(at) => all.iter().position(|r| r.arrival >= *at).unwrap_or(all.len()),
            StreamPosition::AtSequence(s) => {
                all.iter().position(|r| sequence_cmp(&r.sequence, s).is_ge()).unwrap_or(all.len())
            }
            StreamPosition::AfterSequence(s) | StreamPosition::Continue(s) => {
                all.iter().position(|r| sequence_cmp(&r.sequence, s).is_gt()).unwrap_or(all.len())
            }
        };
        let records: Vec<StreamRecord> = all.iter().skip(start).take(limit as usize).cloned().collect();
        let behind = all.len().saturating_sub(start + records.len());
        let caught_up = behind == 0;
        let next = records.last().map(|r| r.sequence.clone()).or_else(|| match from {
            StreamPosition::Continue(s) | StreamPosition::AfterSequence(s) => Some(s.clone()),
            // Followed, at the end: on after the partition's last record.
            _ if self.follow => all.last().map(|r| r.sequence.clone()),
            _ => None,
        });
        Ok(StreamRead {
            // A file read to its end is a closed shard, unless followed.
            next: if caught_up && records.is_empty() && !self.follow { None } else { next },
            records,
            millis_behind_latest: caught_up.then_some(0),
            records_behind: Some(behind as u64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Partition 0 has five records, partition 1 one.
    fn topic(dir: &std::path::Path) -> FileStream {
        let path = dir.join("topic.jsonl");
        let lines: Vec<String> = (0..6)
            .map(|i| {
                let (partition, offset) = if i == 5 { (1, 0) } else { (0, i) };
                format!(
                    r#"{{"topic": "t", "partition": {partition}, "offset": {offset}, "timestamp": 0, "value": "e30="}}"#
                )
            })
            .collect();
        std::fs::write(&path, lines.join("\n")).expect("write topic");
        FileStream::new(path)
    }

    #[tokio::test]
    async fn a_read_counts_the_records_after_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let topic = topic(dir.path());
        let first = topic.read("t", "t-0", &StreamPosition::TrimHorizon, 2).await.expect("read");
        assert_eq!((first.records.len(), first.records_behind, first.millis_behind_latest), (2, Some(3), None));
        let rest = topic.read("t", "t-0", &StreamPosition::AfterSequence("1".into()), 10).await.expect("read");
        assert_eq!((rest.records.len(), rest.records_behind, rest.millis_behind_latest), (3, Some(0), Some(0)));
        let tip = topic.read("t", "t-0", &StreamPosition::Continue("4".into()), 10).await.expect("read");
        assert_eq!((tip.records.len(), tip.records_behind), (0, Some(0)));
        let other = topic.read("t", "t-1", &StreamPosition::Latest, 10).await.expect("read");
        assert_eq!(other.records_behind, Some(0));
        let unknown = topic.read("t", "t-9", &StreamPosition::TrimHorizon, 10).await.expect("read");
        assert_eq!(unknown.records_behind, Some(0));
    }

    /// The error of reading a file of `lines` as topic `t`.
    fn refusal(lines: &[&str]) -> String {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("topic.jsonl");
        std::fs::write(&path, lines.join("\n")).expect("write topic");
        let err = FileStream::new(&path).records("t").expect_err("refused");
        let text = err.to_string();
        assert!(text.contains(&format!("{}:", path.display())), "names the file: {text}");
        text
    }

    const OK: &str = r#"{"topic": "t", "partition": 0, "offset": 0, "value": "e30="}"#;

    #[test]
    fn a_record_without_an_offset_is_refused_not_taken_as_zero() {
        let text = refusal(&[r#"{"topic": "t", "partition": 0, "value": "e30="}"#, OK]);
        assert!(text.contains("topic.jsonl:1") && text.contains("`offset` is missing"), "{text}");
    }

    #[test]
    fn an_offset_that_is_not_a_non_negative_integer_is_refused() {
        let text = refusal(&[OK, r#"{"topic": "t", "partition": 0, "offset": "7", "value": "e30="}"#]);
        assert!(text.contains("topic.jsonl:2") && text.contains("`offset` must be an integer"), "{text}");
        let text = refusal(&[r#"{"topic": "t", "partition": 0, "offset": 1.5, "value": "e30="}"#]);
        assert!(text.contains("`offset` must be an integer"), "{text}");
        let text = refusal(&[r#"{"topic": "t", "partition": 0, "offset": -3, "value": "e30="}"#]);
        assert!(text.contains("topic.jsonl:1") && text.contains("`offset` must be 0 or more, not -3"), "{text}");
    }

    #[test]
    fn a_timestamp_is_an_integer_and_one_out_of_range_is_the_epoch() {
        // A trial finding: an ISO text was taken as no timestamp, and
        // -99999999999999 made a dt=-1199-02-15 partition pyarrow cannot read.
        let text = refusal(&[r#"{"topic": "t", "partition": 0, "offset": 0, "timestamp": "2026-12-01T00:00:00Z"}"#]);
        assert!(text.contains("topic.jsonl:1") && text.contains("`timestamp` must be an integer"), "{text}");
        let text = refusal(&[r#"{"topic": "t", "partition": -1, "offset": 0}"#]);
        assert!(text.contains("`partition` must be 0 to 2147483647"), "{text}");
        let text = refusal(&[r#"{"topic": "t", "offset": 0}"#]);
        assert!(text.contains("`partition` is missing"), "{text}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("topic.jsonl");
        let lines: Vec<String> = [-99_999_999_999_999_i64, -1, 99_999_999_999_999_999, 1_764_583_200_000]
            .iter()
            .enumerate()
            .map(|(offset, at)| {
                format!(r#"{{"topic": "t", "partition": 0, "offset": {offset}, "timestamp": {at}, "value": "e30="}}"#)
            })
            .collect();
        std::fs::write(&path, lines.join("\n")).expect("write topic");
        let records = FileStream::new(&path).records("t").expect("read");
        let arrivals: Vec<String> = records["t-0"].iter().map(|r| r.arrival.to_rfc3339()).collect();
        assert_eq!(
            arrivals,
            [
                "1970-01-01T00:00:00+00:00",
                "1970-01-01T00:00:00+00:00",
                "1970-01-01T00:00:00+00:00",
                "2025-12-01T10:00:00+00:00"
            ]
        );
    }

    #[test]
    fn a_line_that_is_not_an_object_and_a_file_that_is_not_utf8_are_refused_naming_the_line() {
        let err = refusal(&["[1, 2, 3]"]);
        assert!(err.contains(":1") && err.contains("an array, not a record"), "{err}");
        // A trial read only "expected ident at line 1 column 2" for these.
        let err = refusal(&[OK, "not json"]);
        assert!(err.contains(":2") && err.contains("the line is not JSON (expected ident"), "{err}");
        let err = refusal(&[r#"{"topic": "t", "partition": 0, "offset": 0, "value": "!!"}"#]);
        assert!(err.contains(":1") && err.contains("`value` is not base64 (") && err.contains("quarantined"), "{err}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("records.jsonl");
        let good = r#"{"topic": "orders", "partition": 0, "offset": 0, "timestamp": 0, "value": "e30="}"#;
        std::fs::write(&path, [good.as_bytes(), b"\n", b"\xff\xfe"].concat()).expect("write");
        let err = FileStream::new(&path).records("orders").expect_err("not UTF-8").to_string();
        assert!(err.contains("records.jsonl:2") && err.contains("not UTF-8"), "{err}");
    }

    #[test]
    fn a_record_of_another_topic_is_refused_naming_both() {
        let text = refusal(&[OK, r#"{"topic": "other", "partition": 0, "offset": 1, "value": "e30="}"#]);
        assert!(text.contains("topic.jsonl:2") && text.contains(r#""other", not the spec's topic "t""#), "{text}");
    }

    #[test]
    fn offsets_must_increase_within_a_partition() {
        let again = r#"{"topic": "t", "partition": 0, "offset": 0, "value": "eyJhIjoxfQ=="}"#;
        let text = refusal(&[OK, again]);
        assert!(
            text.contains("topic.jsonl:2") && text.contains("offset 0 of partition t-0 does not follow offset 0"),
            "{text}"
        );
        let five = r#"{"topic": "t", "partition": 0, "offset": 5, "value": "e30="}"#;
        let other = r#"{"topic": "t", "partition": 1, "offset": 2, "value": "e30="}"#;
        let text = refusal(&[five, other, OK]);
        assert!(
            text.contains("topic.jsonl:3") && text.contains("offset 0 of partition t-0 does not follow offset 5"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_followed_file_is_read_on_as_lines_are_appended() {
        use std::io::Write;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("topic.jsonl");
        std::fs::write(&path, format!("{OK}\n")).expect("write topic");
        let closed = FileStream::new(&path).read("t", "t-0", &StreamPosition::Continue("0".into()), 10).await;
        assert_eq!(closed.expect("read").next, None, "a file not followed is closed at its end");
        let topic = FileStream::new(&path).following(true);
        let tip = topic.read("t", "t-0", &StreamPosition::Latest, 10).await.expect("read");
        assert_eq!((tip.records.len(), tip.next.as_deref(), tip.millis_behind_latest), (0, Some("0"), Some(0)));
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).expect("open");
        // A line whose newline is not written yet waits.
        write!(file, r#"{{"topic": "t", "partition": 0, "offset": 1, "value": "e30="}}"#).expect("append");
        let partial = topic.read("t", "t-0", &StreamPosition::Continue("0".into()), 10).await.expect("read");
        assert_eq!((partial.records.len(), partial.next.as_deref()), (0, Some("0")));
        writeln!(file).expect("append");
        let more = topic.read("t", "t-0", &StreamPosition::Continue("0".into()), 10).await.expect("read");
        let offsets: Vec<&str> = more.records.iter().map(|r| r.sequence.as_str()).collect();
        assert_eq!((offsets, more.next.as_deref()), (vec!["1"], Some("1")));
    }
}

//! [`StreamReader`] over a file of records: the local stand-in for a Kafka
//! topic where no broker runs (and for replaying an exported topic).
//!
//! The file is JSON lines, one record each, in the shape of a record of the
//! Lambda MSK event (Lambda developer guide, "Using Lambda with Amazon
//! MSK"): `{"topic", "partition", "offset", "timestamp" (epoch ms),
//! "value" (base64, or null for a tombstone)}`; a record without `offset`
//! takes its line's index within its partition. Partitions are named
//! `<topic>-<partition>` as the event's `records` keys are.

use std::collections::BTreeMap;
use std::path::PathBuf;

use async_trait::async_trait;
use base64::Engine;
use chrono::{DateTime, Utc};

use tributary_core::ports::PortError;
use tributary_core::streams::{StreamPosition, StreamRead, StreamReader, StreamRecord, sequence_cmp};

/// A topic read from a JSON-lines file.
#[derive(Clone, Debug)]
pub struct FileStream {
    path: PathBuf,
}

impl FileStream {
    /// The records in `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// Every record by partition, in offset order.
    ///
    /// # Errors
    /// [`PortError::Permanent`] naming the file and line of a record that is
    /// not in the documented shape.
    pub fn records(&self) -> Result<BTreeMap<String, Vec<StreamRecord>>, PortError> {
        let target = self.path.display().to_string();
        let text = std::fs::read_to_string(&self.path).map_err(|err| PortError::permanent("read", &target, err))?;
        let mut partitions: BTreeMap<String, Vec<StreamRecord>> = BTreeMap::new();
        for (number, line) in text.lines().enumerate().filter(|(_, line)| !line.trim().is_empty()) {
            let bad = |problem: String| PortError::permanent_msg("read", format!("{target}:{}", number + 1), problem);
            let value: serde_json::Value = serde_json::from_str(line).map_err(|err| bad(err.to_string()))?;
            let topic = value["topic"].as_str().ok_or_else(|| bad("`topic` must be a string".into()))?;
            let partition = value["partition"].as_i64().ok_or_else(|| bad("`partition` must be an integer".into()))?;
            let key = format!("{topic}-{partition}");
            let list = partitions.entry(key.clone()).or_default();
            let offset = match &value["offset"] {
                serde_json::Value::Null => list.len() as i64,
                other => other.as_i64().ok_or_else(|| bad("`offset` must be an integer".into()))?,
            };
            let data = match &value["value"] {
                serde_json::Value::Null => None,
                serde_json::Value::String(b64) => Some(
                    base64::engine::general_purpose::STANDARD
                        .decode(b64)
                        .map_err(|err| bad(format!("`value` is not base64: {err}")))?,
                ),
                _ => return Err(bad("`value` must be base64 text or null".into())),
            };
            let arrival =
                value["timestamp"].as_i64().and_then(DateTime::<Utc>::from_timestamp_millis).unwrap_or_default();
            list.push(StreamRecord { partition: key, sequence: offset.to_string(), data, arrival });
        }
        for list in partitions.values_mut() {
            list.sort_by(|a, b| sequence_cmp(&a.sequence, &b.sequence));
        }
        Ok(partitions)
    }
}

#[async_trait]
impl StreamReader for FileStream {
    async fn partitions(&self, _stream: &str) -> Result<Vec<String>, PortError> {
        Ok(self.records()?.into_keys().collect())
    }

    async fn read(
        &self,
        _stream: &str,
        partition: &str,
        from: &StreamPosition,
        limit: u32,
    ) -> Result<StreamRead, PortError> {
        let all = self.records()?.remove(partition).unwrap_or_default();
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
            _ => None,
        });
        Ok(StreamRead {
            // A file read to its end is a closed shard: nothing comes after.
            next: if caught_up && records.is_empty() { None } else { next },
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
                let partition = u8::from(i == 5);
                format!(r#"{{"topic": "t", "partition": {partition}, "timestamp": 0, "value": "e30="}}"#)
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
}

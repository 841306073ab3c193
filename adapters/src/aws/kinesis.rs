//! [`StreamReader`] over Amazon Kinesis Data Streams: `ListShards`,
//! `GetShardIterator` and `GetRecords` through the AWS SDK, for the local
//! runtime's poller (on AWS the Lambda event source mapping reads the
//! stream).
//!
//! A read at a position asks for a shard iterator first (`GetShardIterator`,
//! 5 calls per second per shard: Kinesis quota); a continuation
//! ([`StreamPosition::Continue`]) uses the previous read's
//! `NextShardIterator` (valid 5 minutes), so a poller that keeps reading
//! calls `GetRecords` alone (5 calls per second per shard, up to 10,000
//! records or 10 MiB each: Kinesis API reference, `GetRecords`).

use async_trait::async_trait;
use aws_sdk_kinesis::types::ShardIteratorType;
use chrono::{DateTime, Utc};

use tributary_core::ports::PortError;
use tributary_core::streams::{StreamPosition, StreamRead, StreamReader, StreamRecord};

use super::error::{build_error, port_error};

/// Largest `GetRecords` `Limit` (Kinesis API reference).
pub const MAX_GET_RECORDS: u32 = 10_000;

/// Reads Kinesis data streams.
#[derive(Clone, Debug)]
pub struct KinesisReader {
    client: aws_sdk_kinesis::Client,
}

impl KinesisReader {
    /// A reader over `config` (endpoint, region and credentials from the
    /// usual AWS environment; `AWS_ENDPOINT_URL` for an emulator).
    pub fn new(config: &aws_config::SdkConfig) -> Self {
        Self { client: aws_sdk_kinesis::Client::new(config) }
    }

    /// The SDK client, for tests that create streams and put records.
    pub fn client(&self) -> &aws_sdk_kinesis::Client {
        &self.client
    }

    async fn iterator(&self, stream: &str, shard: &str, from: &StreamPosition) -> Result<String, PortError> {
        let target = format!("{stream}/{shard}");
        let request = self.client.get_shard_iterator().stream_name(stream).shard_id(shard);
        let request = match from {
            StreamPosition::Continue(iterator) => return Ok(iterator.clone()),
            StreamPosition::TrimHorizon => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
            StreamPosition::Latest => request.shard_iterator_type(ShardIteratorType::Latest),
            StreamPosition::AtTimestamp(at) => request
                .shard_iterator_type(ShardIteratorType::AtTimestamp)
                .timestamp(aws_sdk_kinesis::primitives::DateTime::from_millis(at.timestamp_millis())),
            StreamPosition::AtSequence(sequence) => {
                request.shard_iterator_type(ShardIteratorType::AtSequenceNumber).starting_sequence_number(sequence)
            }
            StreamPosition::AfterSequence(sequence) => {
                request.shard_iterator_type(ShardIteratorType::AfterSequenceNumber).starting_sequence_number(sequence)
            }
        };
        let answer = request.send().await.map_err(|err| port_error("GetShardIterator", &target, err))?;
        answer.shard_iterator.ok_or_else(|| build_error("GetShardIterator", &target, "the answer has no ShardIterator"))
    }
}

#[async_trait]
impl StreamReader for KinesisReader {
    async fn partitions(&self, stream: &str) -> Result<Vec<String>, PortError> {
        let mut shards = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let request = match &token {
                Some(token) => self.client.list_shards().next_token(token),
                None => self.client.list_shards().stream_name(stream),
            };
            let answer = request.send().await.map_err(|err| port_error("ListShards", stream, err))?;
            shards.extend(answer.shards().iter().map(|shard| shard.shard_id().to_string()));
            token = answer.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        shards.sort();
        Ok(shards)
    }

    async fn read(
        &self,
        stream: &str,
        partition: &str,
        from: &StreamPosition,
        limit: u32,
    ) -> Result<StreamRead, PortError> {
        let iterator = self.iterator(stream, partition, from).await?;
        let target = format!("{stream}/{partition}");
        let limit = i32::try_from(limit.clamp(1, MAX_GET_RECORDS)).unwrap_or(10_000);
        let answer = self
            .client
            .get_records()
            .shard_iterator(iterator)
            .limit(limit)
            .send()
            .await
            .map_err(|err| port_error("GetRecords", &target, err))?;
        let records = answer
            .records()
            .iter()
            .map(|record| StreamRecord {
                partition: partition.to_string(),
                sequence: record.sequence_number().to_string(),
                data: Some(record.data().as_ref().to_vec()),
                arrival: record
                    .approximate_arrival_timestamp()
                    .and_then(|at| DateTime::<Utc>::from_timestamp_millis(at.to_millis().ok()?))
                    .unwrap_or_else(Utc::now),
            })
            .collect();
        Ok(StreamRead {
            records,
            next: answer.next_shard_iterator().map(str::to_string),
            millis_behind_latest: answer.millis_behind_latest().and_then(|ms| u64::try_from(ms).ok()),
            // Kinesis publishes no count of the records after an iterator.
            records_behind: None,
        })
    }
}

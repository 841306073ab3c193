//! Stream specs in a lake: where the Persist Lambda finds the spec of the
//! stream a batch came from (`_streams/_specs/<stream or topic>.json`,
//! [`persist::stream::spec_key`]). `tributary run` keeps it in a local
//! lake; `tributary deploy-stream SPEC --stack S` uploads it to a stack's
//! lake bucket ([`upload_spec`]), as `deploy-schedules` deploys REST specs.

use bytes::Bytes;
use contracts::stream::StreamSpec;
use tributary_core::ports::{ObjectStore, PortError};

/// What [`upload_spec`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Uploaded {
    /// No spec was there for this stream: written.
    Created,
    /// This pipeline's spec for the stream was there and differed: replaced.
    Updated,
    /// The same spec was there: nothing written.
    Unchanged,
    /// Another pipeline's spec for the stream was there, and `replace` was
    /// given: replaced (its batches now land in this spec's dataset).
    Replaced {
        /// The pipeline whose spec it was.
        previous: String,
    },
}

/// Why [`upload_spec`] refused or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UploadError {
    /// The stream already feeds another pipeline: one stream has one spec
    /// (Persist reads one per stream), and replacing it moves every later
    /// batch to the other pipeline's dataset, so it takes `--replace`.
    #[error(
        "stream `{stream}` already feeds pipeline `{existing}` ({key} in the lake); a stream has one spec, so pipeline `{pipeline}` would take its batches over: pass --replace to do so"
    )]
    OwnedByAnother {
        /// The stream or topic.
        stream: String,
        /// The spec's key.
        key: String,
        /// The pipeline already there.
        existing: String,
        /// The pipeline being uploaded.
        pipeline: String,
    },
    /// The lake could not be read or written.
    #[error(transparent)]
    Port(#[from] PortError),
}

/// The spec's lake form: its JSON, as Persist reads it.
///
/// # Errors
/// [`PortError`] (permanent) if the spec cannot be encoded (it always can).
pub fn spec_bytes(spec: &StreamSpec) -> Result<Bytes, PortError> {
    serde_json::to_vec(spec)
        .map(Bytes::from)
        .map_err(|err| PortError::permanent("encode stream spec", spec.pipeline.clone(), err))
}

/// Writes `spec` at its key in `store` (`_streams/_specs/<stream>.json`),
/// unless the same spec is there. A spec of another pipeline for the same
/// stream is replaced only with `replace`. An unreadable spec there (not
/// JSON, or no `pipeline`) is replaced: Persist could not use it either.
///
/// # Errors
/// [`UploadError::OwnedByAnother`] without `replace`; [`UploadError::Port`]
/// when the lake fails.
pub async fn upload_spec(spec: &StreamSpec, store: &dyn ObjectStore, replace: bool) -> Result<Uploaded, UploadError> {
    let key = persist::stream::spec_key(spec.source_name());
    let bytes = spec_bytes(spec)?;
    let existing = match store.get(&key).await {
        Ok(existing) => Some(existing),
        Err(PortError::NotFound { .. }) => None,
        Err(err) => return Err(err.into()),
    };
    let outcome = match existing {
        None => Uploaded::Created,
        Some(existing) if existing == bytes => return Ok(Uploaded::Unchanged),
        Some(existing) => {
            let owner = serde_json::from_slice::<serde_json::Value>(&existing)
                .ok()
                .and_then(|v| v.get("pipeline").and_then(|p| p.as_str()).map(str::to_string));
            match owner {
                Some(owner) if owner != spec.pipeline && !replace => {
                    return Err(UploadError::OwnedByAnother {
                        stream: spec.source_name().to_string(),
                        key,
                        existing: owner,
                        pipeline: spec.pipeline.clone(),
                    });
                }
                Some(owner) if owner != spec.pipeline => Uploaded::Replaced { previous: owner },
                _ => Uploaded::Updated,
            }
        }
    };
    store.put(&key, bytes).await?;
    Ok(outcome)
}

impl std::fmt::Display for Uploaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Created => f.write_str("created"),
            Self::Updated => f.write_str("updated"),
            Self::Unchanged => f.write_str("unchanged"),
            Self::Replaced { previous } => write!(f, "replaced (it fed pipeline {previous})"),
        }
    }
}

/// Begins a Kappa replay of `spec`'s stream in the lake `store` at `now`
/// ([`persist::stream_replay::begin`]) and says what to do next: the
/// text names the replay's token and what it replaces, and the event source
/// mapping to create.
///
/// # Errors
/// As [`persist::stream_replay::begin`]: `target.write` not `append` for
/// an Iceberg dataset, a batch in flight (the live mapping still running),
/// store failures.
pub async fn begin_replay(
    spec: &StreamSpec,
    store: &dyn ObjectStore,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<String, persist::PersistError> {
    let replay = persist::stream_replay::begin(spec, store, now).await?;
    let next = "now create a new event source mapping on Persist at TRIM_HORIZON (or AT_TIMESTAMP) with the \
                 stack's settings; it is the live mapping once it reaches the tip";
    Ok(match replay {
        Some(replay) => format!(
            "replay {} of pipeline {} begun: {} original windows of {} shard(s) to replace, one overwrite snapshot \
             per replayed window; {next}\n",
            replay.token,
            spec.pipeline,
            replay.replaced.len(),
            replay.through.len()
        ),
        None => format!(
            "replay of pipeline {} begun: its Parquet files and checkpoints are removed, readers see the rows \
             replayed so far; {next}\n",
            spec.pipeline
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pipeline: &str, batch_size: u32) -> StreamSpec {
        StreamSpec::from_yaml(&format!(
            "version: 1\npipeline: {pipeline}\nsource: {{ kind: kafka, topic: orders }}\nbatching: {{ batch_size: {batch_size} }}\ntarget: {{ dataset: orders }}\n"
        ))
        .expect("valid spec")
    }

    #[tokio::test]
    async fn created_then_unchanged_then_updated_and_another_pipeline_needs_replace() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = adapters::local::DirStore::new(dir.path());
        assert_eq!(upload_spec(&spec("orders", 100), &store, false).await.expect("upload"), Uploaded::Created);
        assert_eq!(upload_spec(&spec("orders", 100), &store, false).await.expect("upload"), Uploaded::Unchanged);
        assert_eq!(upload_spec(&spec("orders", 200), &store, false).await.expect("upload"), Uploaded::Updated);
        let err = upload_spec(&spec("orders-v2", 200), &store, false).await.expect_err("owned by another");
        let text = err.to_string();
        assert!(text.contains("`orders` already feeds pipeline `orders`") && text.contains("--replace"), "{text}");
        assert_eq!(
            upload_spec(&spec("orders-v2", 200), &store, true).await.expect("replace"),
            Uploaded::Replaced { previous: "orders".into() }
        );
        let kept: serde_json::Value =
            serde_json::from_slice(&store.get("_streams/_specs/orders.json").await.expect("spec")).expect("json");
        assert_eq!(kept["pipeline"], "orders-v2");
    }

    #[tokio::test]
    async fn a_replay_begins_in_the_lake_and_says_which_mapping_to_create() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = adapters::local::DirStore::new(dir.path());
        let iceberg = StreamSpec::from_yaml(
            "version: 1\npipeline: orders\nsource: { kind: kafka, topic: orders }\ntarget: { dataset: orders, table_format: iceberg }\n",
        )
        .expect("valid spec");
        let now = chrono::DateTime::from_timestamp(1_764_583_200, 0).expect("time");
        let text = begin_replay(&iceberg, &store, now).await.expect("begun");
        assert!(
            text.starts_with("replay kappa-20251201T100000Z of pipeline orders begun: 0 original windows"),
            "{text}"
        );
        assert!(text.contains("new event source mapping"), "{text}");
        let record = persist::stream_replay::replay_key("orders", "orders");
        assert!(store.get(&record).await.is_ok(), "the replay is recorded at {record}");
        let text = begin_replay(&spec("orders", 100), &store, now).await.expect("begun");
        assert!(text.contains("Parquet files and checkpoints are removed"), "{text}");
    }
}

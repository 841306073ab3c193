//! The dead-letter archive: every dead letter kept whole in the lake, so
//! nothing is lost when Notify consumes a DLQ, and so an operator can read
//! it and send it back (`tributary dlq list|show|redrive`).
//!
//! Notify archives each dead letter *before* it alerts: body, message
//! attributes, system attributes, the reason the function gave, the work
//! queue it failed on and the DLQ it came from, at
//! `_dead_letters/<dlq>/<sent time>-<message id>.json`
//! ([`crate::keys::dead_letter_key`]). The key derives from the message
//! (its `SentTimestamp` and id), so a redelivered dead letter rewrites its
//! own entry. A redrive re-sends the body (with its own attributes, not
//! tributary's failure attributes) to the source queue and records it in
//! [`DeadLetter::redriven`]. A letter whose run recovered (a redrive or a
//! re-run completed it) or that an operator settled is marked
//! [`DeadLetter::resolved`]: it stays in the archive, and `tributary
//! status` counts it apart from the open ones.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ports::{ObjectStore, PortError, QueueMessage};

/// One archived dead letter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// The DLQ it was read from (queue name).
    pub dlq: String,
    /// The work queue it failed on (queue name: `request`, or
    /// `<stack>-request` on AWS); empty when unknown.
    pub source_queue: String,
    /// The function that gave up on it (`request`, `persist`, …, or
    /// `scheduler` / `unknown`).
    pub function: String,
    /// SQS message id in the DLQ.
    pub message_id: String,
    /// Pipeline named by the body, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<String>,
    /// Run named by the body, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Page (or row) index named by the body, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// Why it failed, as the function (or the async invocation record) said;
    /// `None` when a redrive policy moved it without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Receives on the work queue before it was given up.
    pub receive_count: u32,
    /// When it was first sent to the DLQ (RFC 3339), from `SentTimestamp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<String>,
    /// When Notify archived it (RFC 3339).
    pub archived_at: String,
    /// The message body, whole.
    pub body: String,
    /// The message's string attributes, tributary's failure attributes
    /// (`tributary-*`) included.
    #[serde(default)]
    pub message_attributes: BTreeMap<String, String>,
    /// SQS system attributes (`SentTimestamp`, `ApproximateReceiveCount`,
    /// `DeadLetterQueueSourceArn`, …).
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    /// Each time it was sent back, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redriven: Vec<Redrive>,
    /// How and when it was resolved; `None` while it is open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<Resolution>,
}

impl DeadLetter {
    /// Whether the function that gave up on it said its error was
    /// permanent (`tributary-permanent: true`, [`crate::batch::ATTR_PERMANENT`]):
    /// the message itself, or the spec or vendor answer it carries, is at
    /// fault, so a redrive of the same body fails the same way.
    pub fn is_permanent(&self) -> bool {
        self.message_attributes.get(crate::batch::ATTR_PERMANENT).is_some_and(|value| value == "true")
    }
}

/// How a dead letter was resolved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    /// When (RFC 3339).
    pub at: String,
    /// What resolved it.
    pub by: ResolvedBy,
    /// The operator's note (`tributary dlq resolve --note`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What resolved a dead letter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolvedBy {
    /// A redrive (`tributary dlq redrive`) after which its run completed
    /// with no new dead letter.
    Redrive,
    /// A later attempt of the same run (`tributary run --scheduled-at`)
    /// completed the run.
    Rerun,
    /// An operator marked it (`tributary dlq resolve`).
    Operator,
}

impl std::fmt::Display for ResolvedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ResolvedBy::Redrive => "dlq redrive",
            ResolvedBy::Rerun => "re-run",
            ResolvedBy::Operator => "by hand",
        })
    }
}

/// One redrive of a dead letter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redrive {
    /// When (RFC 3339).
    pub at: String,
    /// The queue it was sent to (URL on AWS, name locally).
    pub queue: String,
}

/// Prefix of message attributes tributary adds when it dead-letters a
/// record (`tributary-error`, …; see [`crate::batch::ATTR_ERROR`]): not
/// sent back on a redrive.
pub const FAILURE_ATTRIBUTE_PREFIX: &str = "tributary-";

impl DeadLetter {
    /// The message a redrive sends to the source queue: the body, with the
    /// message's own attributes and without tributary's failure attributes.
    pub fn redrive_message(&self) -> QueueMessage {
        let attributes = self
            .message_attributes
            .iter()
            .filter(|(name, _)| !name.starts_with(FAILURE_ATTRIBUTE_PREFIX))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        QueueMessage { body: self.body.clone(), attributes }
    }

    /// The logical work queue it failed on (`persist`, …): the source
    /// queue's name without a stack prefix, `None` when unknown.
    pub fn source_queue_logical(&self) -> Option<&'static str> {
        crate::topology::QUEUES
            .iter()
            .filter(|decl| decl.consumer.is_some_and(|f| f != crate::topology::Function::Notify))
            .map(|decl| decl.name)
            .find(|name| self.source_queue == *name || self.source_queue.ends_with(&format!("-{name}")))
    }

    /// Whether it has been sent back at least once.
    pub fn is_redriven(&self) -> bool {
        !self.redriven.is_empty()
    }

    /// Whether it is resolved ([`DeadLetter::resolved`]).
    pub fn is_resolved(&self) -> bool {
        self.resolved.is_some()
    }

    /// Whether it names run `run_id` of `pipeline`.
    pub fn is_of_run(&self, pipeline: &str, run_id: &str) -> bool {
        self.pipeline.as_deref() == Some(pipeline) && self.run_id.as_deref() == Some(run_id)
    }
}

/// Marks the entry at `key` resolved by `by` now (it is rewritten whole);
/// an entry already resolved keeps its first resolution.
///
/// # Errors
/// [`PortError`] from the store.
pub async fn resolve(
    store: &dyn ObjectStore,
    key: &str,
    letter: &mut DeadLetter,
    by: ResolvedBy,
    note: Option<String>,
) -> Result<(), PortError> {
    if letter.is_resolved() {
        return Ok(());
    }
    let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    letter.resolved = Some(Resolution { at, by, note });
    let body = serde_json::to_vec_pretty(letter)
        .map_err(|err| PortError::permanent("encode dead letter", key.to_string(), err))?;
    store.put(key, body.into()).await
}

/// Writes `letter` at its key; returns the key.
///
/// # Errors
/// [`PortError`] from the store.
pub async fn archive(store: &dyn ObjectStore, letter: &DeadLetter) -> Result<String, PortError> {
    let key = crate::keys::dead_letter_key(&letter.dlq, letter.sent_at.as_deref(), &letter.message_id);
    let body = serde_json::to_vec_pretty(letter)
        .map_err(|err| PortError::permanent("encode dead letter", key.clone(), err))?;
    store.put(&key, body.into()).await?;
    Ok(key)
}

/// Reads the entry at `key`.
///
/// # Errors
/// [`PortError::NotFound`]; [`PortError::Permanent`] naming the key for an
/// entry that is not a [`DeadLetter`].
pub async fn read(store: &dyn ObjectStore, key: &str) -> Result<DeadLetter, PortError> {
    let bytes = store.get(key).await?;
    serde_json::from_slice(&bytes).map_err(|err| PortError::permanent("read dead letter", key.to_string(), err))
}

/// Keys of the archived dead letters, oldest first within each DLQ (the
/// key starts with the sent time), of DLQ `dlq` only when given.
///
/// # Errors
/// [`PortError`] from the store.
pub async fn list(store: &dyn ObjectStore, dlq: Option<&str>) -> Result<Vec<String>, PortError> {
    let prefix = match dlq {
        Some(dlq) => format!("{}{dlq}/", crate::keys::DEAD_LETTERS_PREFIX),
        None => crate::keys::DEAD_LETTERS_PREFIX.to_string(),
    };
    let mut keys: Vec<String> = store.list(&prefix).await?.into_iter().filter(|k| k.ends_with(".json")).collect();
    keys.sort();
    Ok(keys)
}

/// The entry whose key or message id is `id` (a key, a file name, or the
/// message id alone).
///
/// # Errors
/// [`PortError::NotFound`] naming `id`; [`PortError::Permanent`] when it
/// matches more than one entry, listing them.
pub async fn find(store: &dyn ObjectStore, id: &str) -> Result<(String, DeadLetter), PortError> {
    let matches: Vec<String> = list(store, None)
        .await?
        .into_iter()
        .filter(|key| {
            key == id
                || key.rsplit('/').next().is_some_and(|name| name == id || name.strip_suffix(".json") == Some(id))
                || key.strip_suffix(".json").is_some_and(|stem| stem.ends_with(&format!("-{id}")))
        })
        .collect();
    match matches.as_slice() {
        [key] => Ok((key.clone(), read(store, key).await?)),
        [] => Err(PortError::NotFound { what: "dead letter", target: id.to_string() }),
        many => Err(PortError::permanent_msg(
            "find dead letter",
            id.to_string(),
            format!("matches {} entries: {}", many.len(), many.join(", ")),
        )),
    }
}

/// The archive time of a dead letter sent at `sent_ms` (epoch ms), as the
/// key's sortable prefix `YYYYMMDDTHHMMSS.mmmZ`.
pub fn key_time(sent_at: &chrono::DateTime<chrono::Utc>) -> String {
    sent_at.format("%Y%m%dT%H%M%S%.3fZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redrive_sends_the_body_without_the_failure_attributes() {
        let letter = DeadLetter {
            body: r#"{"pipeline":"p"}"#.into(),
            message_attributes: [
                ("tributary-error".to_string(), "boom".to_string()),
                ("trace".to_string(), "abc".to_string()),
            ]
            .into(),
            ..DeadLetter::default()
        };
        let message = letter.redrive_message();
        assert_eq!(message.body, letter.body);
        assert_eq!(message.attributes, [("trace".to_string(), "abc".to_string())].into());
    }

    #[test]
    fn the_source_queue_is_read_with_or_without_a_stack_prefix() {
        let letter = |q: &str| DeadLetter { source_queue: q.into(), ..DeadLetter::default() };
        assert_eq!(letter("persist").source_queue_logical(), Some("persist"));
        assert_eq!(letter("tributary-prod-request").source_queue_logical(), Some("request"));
        assert_eq!(letter("persist-dlq").source_queue_logical(), None);
        assert_eq!(letter("").source_queue_logical(), None);
    }
}

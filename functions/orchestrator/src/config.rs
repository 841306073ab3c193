//! The Orchestrator Lambda's settings, read from its environment once at
//! cold start ([`LambdaConfig::from_env`]) and checked there, so a bad value
//! stops the cold start naming the variable instead of failing every
//! message. `main.rs` only wires what this returns.

use tributary_core::env::{EnvError, LambdaEnv, SQS_MESSAGE_BYTES_RANGE, dead_letter_target};

use crate::OrchestratorConfig;

/// Everything the Orchestrator binary reads from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LambdaConfig {
    /// The handler's settings: `REQUEST_QUEUE_URL`, `PERSIST_QUEUE_URL`,
    /// `ORCHESTRATOR_QUEUE_URL`, `ATHENA_QUEUE_URL`,
    /// `QUERY_RESULTS_TOPIC_ARN` (all required) and the dead-letter target
    /// (`DLQ_URL`, `MAX_RECEIVE_COUNT`).
    pub handler: OrchestratorConfig,
    /// The lake bucket, for the run ledger's expected page counts
    /// (`LAKE_BUCKET`, required).
    pub lake_bucket: String,
    /// The run-events topic ARN announcing completed runs
    /// (`RUN_EVENTS_TOPIC_ARN`; unset: none).
    pub run_events_topic: Option<String>,
    /// Most bytes of one `SendMessageBatch` call, all entries together
    /// (`MAX_BATCH_BYTES`, 1024..=1048576 as
    /// [`SQS_MESSAGE_BYTES_RANGE`]; unset: the SQS adapter's default,
    /// 262144).
    pub max_batch_bytes: Option<usize>,
}

impl LambdaConfig {
    /// Reads and checks the Orchestrator's variables.
    ///
    /// # Errors
    /// [`EnvError`] naming the variable: a required one unset, a number that
    /// is not one, `MAX_BATCH_BYTES` outside 1024..=1048576 (SQS's 1 MiB
    /// batch payload), `MAX_RECEIVE_COUNT` outside 1..=1000 (the redrive
    /// policy's range).
    pub fn from_env(env: &LambdaEnv) -> Result<Self, EnvError> {
        let handler = OrchestratorConfig {
            request_queue: env.required("REQUEST_QUEUE_URL")?,
            persist_queue: env.required("PERSIST_QUEUE_URL")?,
            orchestrator_queue: env.required("ORCHESTRATOR_QUEUE_URL")?,
            athena_queue: env.required("ATHENA_QUEUE_URL")?,
            query_results_topic: env.required("QUERY_RESULTS_TOPIC_ARN")?,
            dead_letter: dead_letter_target(env)?,
        };
        let max_batch_bytes = env
            .optional("MAX_BATCH_BYTES")?
            .map(|_| env.usize_in("MAX_BATCH_BYTES", 0, SQS_MESSAGE_BYTES_RANGE, "SQS SendMessageBatch payload"))
            .transpose()?;
        Ok(Self {
            handler,
            lake_bucket: env.required("LAKE_BUCKET")?,
            run_events_topic: env.optional("RUN_EVENTS_TOPIC_ARN")?,
            max_batch_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQUIRED: [(&str, &str); 6] = [
        ("REQUEST_QUEUE_URL", "https://sqs/request"),
        ("PERSIST_QUEUE_URL", "https://sqs/persist"),
        ("ORCHESTRATOR_QUEUE_URL", "https://sqs/orchestrator"),
        ("ATHENA_QUEUE_URL", "https://sqs/athena"),
        ("QUERY_RESULTS_TOPIC_ARN", "arn:aws:sns:us-east-1:1:query-results"),
        ("LAKE_BUCKET", "lake"),
    ];

    fn env(extra: &[(&str, &str)]) -> LambdaEnv {
        LambdaEnv::from_pairs(REQUIRED.iter().chain(extra).copied())
    }

    #[test]
    fn defaults_need_only_the_required_variables() {
        let config = LambdaConfig::from_env(&env(&[])).expect("defaults");
        assert_eq!(config.handler.request_queue, "https://sqs/request");
        assert_eq!(config.handler.query_results_topic, "arn:aws:sns:us-east-1:1:query-results");
        assert_eq!(config.handler.dead_letter, None);
        assert_eq!(
            (config.lake_bucket.as_str(), config.run_events_topic, config.max_batch_bytes),
            ("lake", None, None)
        );
        for (name, _) in REQUIRED {
            let without = LambdaEnv::from_pairs(REQUIRED.iter().filter(|(n, _)| *n != name).copied());
            assert_eq!(LambdaConfig::from_env(&without).expect_err(name).name(), name);
        }
    }

    #[test]
    fn overrides_are_read() {
        let config = LambdaConfig::from_env(&env(&[
            ("MAX_BATCH_BYTES", "1048576"),
            ("RUN_EVENTS_TOPIC_ARN", "arn:aws:sns:us-east-1:1:run-events"),
            ("DLQ_URL", "https://sqs/orchestrator-dlq"),
            ("MAX_RECEIVE_COUNT", "3"),
        ]))
        .expect("overrides");
        assert_eq!(config.max_batch_bytes, Some(1_048_576));
        assert_eq!(config.run_events_topic.as_deref(), Some("arn:aws:sns:us-east-1:1:run-events"));
        let dead_letter = config.handler.dead_letter.expect("a DLQ");
        assert_eq!((dead_letter.dlq.as_str(), dead_letter.max_receive_count), ("https://sqs/orchestrator-dlq", 3));
    }

    #[test]
    fn bad_values_are_refused_naming_the_variable() {
        for (name, value) in [
            ("MAX_BATCH_BYTES", "1023"),
            ("MAX_BATCH_BYTES", "1048577"),
            ("MAX_BATCH_BYTES", "lots"),
            ("MAX_RECEIVE_COUNT", "0"),
            ("MAX_RECEIVE_COUNT", "1001"),
        ] {
            let err = LambdaConfig::from_env(&env(&[("DLQ_URL", "https://sqs/dlq"), (name, value)]))
                .expect_err(&format!("{name}={value}"));
            assert_eq!(err.name(), name, "{err}");
            assert!(err.to_string().contains(&format!("{name}={value:?}")), "{err}");
        }
    }
}

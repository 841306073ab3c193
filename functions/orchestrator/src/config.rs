//! The Orchestrator Lambda's settings, read from its environment once at
//! cold start ([`LambdaConfig::from_env`]) and checked there, so a bad value
//! stops the cold start naming the variable instead of failing every
//! message. [`LambdaConfig::ENV`] is the table of those variables; `main.rs`
//! only wires what this returns.

use tributary_core::env::{self, Allowed, EnvError, EnvVar, LambdaEnv, SQS_MESSAGE_BYTES_RANGE, dead_letter_target};

use crate::OrchestratorConfig;

const REQUEST_QUEUE_URL: EnvVar = EnvVar::required("REQUEST_QUEUE_URL", "the request queue");
const PERSIST_QUEUE_URL: EnvVar =
    EnvVar::required("PERSIST_QUEUE_URL", "the persist queue: `reply_to` of record requests");
const ORCHESTRATOR_QUEUE_URL: EnvVar =
    EnvVar::required("ORCHESTRATOR_QUEUE_URL", "its own queue: `reply_to` of probes");
const ATHENA_QUEUE_URL: EnvVar =
    EnvVar::required("ATHENA_QUEUE_URL", "the athena queue: the athena strategy's queries");
const QUERY_RESULTS_TOPIC_ARN: EnvVar =
    EnvVar::required("QUERY_RESULTS_TOPIC_ARN", "the query-results topic: `reply_to` of queries");
const LAKE_BUCKET: EnvVar =
    EnvVar { doc: "the lake bucket: the run ledger's expected page counts", ..env::LAKE_BUCKET };
const MAX_BATCH_BYTES: EnvVar = EnvVar {
    name: "MAX_BATCH_BYTES",
    default: env::Unset::Means("the SQS adapter's 262144"),
    range: Some(Allowed::of_usize(SQS_MESSAGE_BYTES_RANGE, "SQS SendMessageBatch payload")),
    doc: "most bytes of one `SendMessageBatch` call, all entries together",
};

impl LambdaConfig {
    /// The Orchestrator's environment: every variable [`LambdaConfig::from_env`]
    /// reads, as `infra/template.yaml` sets them (a test checks both).
    pub const ENV: &'static [EnvVar] = &[
        REQUEST_QUEUE_URL,
        PERSIST_QUEUE_URL,
        ORCHESTRATOR_QUEUE_URL,
        ATHENA_QUEUE_URL,
        LAKE_BUCKET,
        env::RUN_EVENTS_TOPIC_ARN,
        QUERY_RESULTS_TOPIC_ARN,
        MAX_BATCH_BYTES,
        env::DLQ_URL,
        env::MAX_RECEIVE_COUNT,
    ];
}

/// Everything the Orchestrator binary reads from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LambdaConfig {
    /// The handler's settings: the queues and topic it sends to (all
    /// required) and the dead-letter target ([`dead_letter_target`]).
    pub handler: OrchestratorConfig,
    /// The lake bucket, for the run ledger's expected page counts
    /// (`LAKE_BUCKET`, required).
    pub lake_bucket: String,
    /// The run-events topic ARN announcing completed runs
    /// (`RUN_EVENTS_TOPIC_ARN`; unset: none).
    pub run_events_topic: Option<String>,
    /// Most bytes of one `SendMessageBatch` call, all entries together
    /// (`MAX_BATCH_BYTES`, within [`SQS_MESSAGE_BYTES_RANGE`]; unset: the
    /// SQS adapter's default, 262144).
    pub max_batch_bytes: Option<usize>,
}

impl LambdaConfig {
    /// Reads and checks the Orchestrator's variables ([`LambdaConfig::ENV`]).
    ///
    /// # Errors
    /// [`EnvError`] naming the variable and value: a required one unset, or
    /// a value its entry refuses (a number that is not one, or outside its
    /// range).
    pub fn from_env(env: &LambdaEnv) -> Result<Self, EnvError> {
        let handler = OrchestratorConfig {
            request_queue: env.text(&REQUEST_QUEUE_URL)?,
            persist_queue: env.text(&PERSIST_QUEUE_URL)?,
            orchestrator_queue: env.text(&ORCHESTRATOR_QUEUE_URL)?,
            athena_queue: env.text(&ATHENA_QUEUE_URL)?,
            query_results_topic: env.text(&QUERY_RESULTS_TOPIC_ARN)?,
            dead_letter: dead_letter_target(env)?,
            fanout: crate::Fanout::default(),
        };
        // Within a usize range.
        let max_batch_bytes = env.optional_u64(&MAX_BATCH_BYTES)?.map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        Ok(Self {
            handler,
            lake_bucket: env.text(&LAKE_BUCKET)?,
            run_events_topic: env.optional(&env::RUN_EVENTS_TOPIC_ARN)?,
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
    fn from_env_reads_exactly_its_table() {
        let env = env(&[("DLQ_URL", "https://sqs/dlq")]);
        test_support::env::assert_reads_exactly(LambdaConfig::from_env, &env, LambdaConfig::ENV, &[]);
    }

    #[test]
    fn bad_values_are_refused_naming_the_variable() {
        test_support::env::assert_refused(
            LambdaConfig::from_env,
            |case| env(&[("DLQ_URL", "https://sqs/dlq"), case]),
            &[
                ("MAX_BATCH_BYTES", "1023"),
                ("MAX_BATCH_BYTES", "1048577"),
                ("MAX_BATCH_BYTES", "lots"),
                ("MAX_RECEIVE_COUNT", "0"),
                ("MAX_RECEIVE_COUNT", "1001"),
            ],
        );
    }
}

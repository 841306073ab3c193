//! The Athena Lambda's settings, read from its environment once at cold
//! start ([`LambdaConfig::from_env`]) and checked there, so a bad value
//! stops the cold start naming the variable instead of failing every query.
//! [`LambdaConfig::ENV`] is the table of those variables; `main.rs` only
//! wires what this returns.

use tributary_core::env::{self, Allowed, EnvError, EnvVar, LambdaEnv, dead_letter_target};

use crate::AthenaConfig;

const ATHENA_QUEUE_URL: EnvVar = EnvVar::required("ATHENA_QUEUE_URL", "its own queue: continuations of long results");
const MAX_ROWS_PER_INVOCATION: EnvVar = EnvVar::number(
    "MAX_ROWS_PER_INVOCATION",
    100_000,
    Allowed::new(1..=u64::MAX, "at least one row per invocation"),
    "rows one invocation publishes before it continues through its own queue",
);
const LAKE_BUCKET: EnvVar = EnvVar { doc: "the lake bucket: the run ledger", ..env::LAKE_BUCKET };
const ATHENA_WORKGROUP: EnvVar = EnvVar::optional(
    "ATHENA_WORKGROUP",
    "the account's `primary`",
    "workgroup of queries that name none: a workgroup name (`[a-zA-Z0-9._-]{1,128}`)",
);
const ATHENA_OUTPUT_LOCATION: EnvVar = EnvVar::optional(
    "ATHENA_OUTPUT_LOCATION",
    "the workgroup's",
    "result location of queries that name none: an `s3://bucket/…` URI (ignored while the workgroup enforces its own)",
);

impl LambdaConfig {
    /// The Athena function's environment: every variable
    /// [`LambdaConfig::from_env`] reads, as `infra/template.yaml` sets them
    /// (a test checks both).
    pub const ENV: &'static [EnvVar] = &[
        ATHENA_QUEUE_URL,
        MAX_ROWS_PER_INVOCATION,
        LAKE_BUCKET,
        env::RUN_EVENTS_TOPIC_ARN,
        ATHENA_WORKGROUP,
        ATHENA_OUTPUT_LOCATION,
        env::DLQ_URL,
        env::MAX_RECEIVE_COUNT,
    ];
}

/// Everything the Athena binary reads from its environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LambdaConfig {
    /// The handler's settings: its own queue for continuations
    /// (`ATHENA_QUEUE_URL`, required), `MAX_ROWS_PER_INVOCATION`, the
    /// dead-letter target ([`dead_letter_target`]); the rest as
    /// [`AthenaConfig::new`].
    pub handler: AthenaConfig,
    /// The lake bucket, for the run ledger (`LAKE_BUCKET`, required).
    pub lake_bucket: String,
    /// The run-events topic ARN announcing completed runs
    /// (`RUN_EVENTS_TOPIC_ARN`; unset: none).
    pub run_events_topic: Option<String>,
    /// Workgroup of queries that name none (`ATHENA_WORKGROUP`; unset: the
    /// account's `primary`). A workgroup name: 1 to 128 of `A-Z a-z 0-9 . _ -`
    /// (Athena API reference, `StartQueryExecution.WorkGroup`).
    pub workgroup: Option<String>,
    /// Result location of queries that name none
    /// (`ATHENA_OUTPUT_LOCATION`, an `s3://bucket/prefix/` URI, Athena's
    /// `ResultConfiguration.OutputLocation`; unset: the workgroup's).
    pub output_location: Option<String>,
}

impl LambdaConfig {
    /// Reads and checks the Athena function's variables
    /// ([`LambdaConfig::ENV`]).
    ///
    /// # Errors
    /// [`EnvError`] naming the variable and value: a required one unset,
    /// `MAX_ROWS_PER_INVOCATION` not a number or 0, `ATHENA_WORKGROUP` not a
    /// workgroup name, `ATHENA_OUTPUT_LOCATION` not an `s3://` URI naming a
    /// bucket, `MAX_RECEIVE_COUNT` outside 1..=1000 (the redrive policy's
    /// range).
    pub fn from_env(env: &LambdaEnv) -> Result<Self, EnvError> {
        let mut handler = AthenaConfig::new(env.text(&ATHENA_QUEUE_URL)?);
        handler.max_rows_per_invocation = env.u64(&MAX_ROWS_PER_INVOCATION)?;
        handler.dead_letter = dead_letter_target(env)?;
        let workgroup = env.optional(&ATHENA_WORKGROUP)?;
        if let Some(value) = workgroup.as_ref().filter(|name| !is_workgroup_name(name)) {
            return Err(EnvError::Malformed {
                name: ATHENA_WORKGROUP.name.into(),
                value: value.clone(),
                expected: "an Athena workgroup name (1 to 128 of A-Z a-z 0-9 . _ -)",
            });
        }
        let output_location = env.optional(&ATHENA_OUTPUT_LOCATION)?;
        if let Some(value) = output_location.as_ref().filter(|location| !is_s3_uri(location)) {
            return Err(EnvError::Malformed {
                name: ATHENA_OUTPUT_LOCATION.name.into(),
                value: value.clone(),
                expected: "an s3://bucket/prefix/ URI (Athena's ResultConfiguration.OutputLocation)",
            });
        }
        Ok(Self {
            handler,
            lake_bucket: env.text(&LAKE_BUCKET)?,
            run_events_topic: env.optional(&env::RUN_EVENTS_TOPIC_ARN)?,
            workgroup,
            output_location,
        })
    }
}

/// `[a-zA-Z0-9._-]{1,128}`, the pattern of Athena's workgroup names.
fn is_workgroup_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `s3://` followed by a bucket name (anything up to the next `/`).
fn is_s3_uri(location: &str) -> bool {
    location.strip_prefix("s3://").and_then(|rest| rest.split('/').next()).is_some_and(|bucket| !bucket.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const REQUIRED: [(&str, &str); 2] = [("ATHENA_QUEUE_URL", "https://sqs/athena"), ("LAKE_BUCKET", "lake")];

    fn env(extra: &[(&str, &str)]) -> LambdaEnv {
        LambdaEnv::from_pairs(REQUIRED.iter().chain(extra).copied())
    }

    #[test]
    fn defaults_need_only_the_required_variables() {
        let config = LambdaConfig::from_env(&env(&[])).expect("defaults");
        assert_eq!(
            config,
            LambdaConfig {
                handler: AthenaConfig::new("https://sqs/athena"),
                lake_bucket: "lake".into(),
                run_events_topic: None,
                workgroup: None,
                output_location: None,
            }
        );
        assert_eq!(config.handler.max_rows_per_invocation, 100_000);
        for (name, _) in REQUIRED {
            let without = LambdaEnv::from_pairs(REQUIRED.iter().filter(|(n, _)| *n != name).copied());
            assert_eq!(LambdaConfig::from_env(&without).expect_err(name).name(), name);
        }
    }

    #[test]
    fn overrides_are_read() {
        let config = LambdaConfig::from_env(&env(&[
            ("MAX_ROWS_PER_INVOCATION", "1"),
            ("RUN_EVENTS_TOPIC_ARN", "arn:aws:sns:us-east-1:1:run-events"),
            ("ATHENA_WORKGROUP", "tributary-prod_1.x"),
            ("ATHENA_OUTPUT_LOCATION", "s3://lake/athena-results/"),
            ("DLQ_URL", "https://sqs/athena-dlq"),
            ("MAX_RECEIVE_COUNT", "2"),
        ]))
        .expect("overrides");
        assert_eq!(config.handler.max_rows_per_invocation, 1);
        assert_eq!(config.run_events_topic.as_deref(), Some("arn:aws:sns:us-east-1:1:run-events"));
        assert_eq!(config.workgroup.as_deref(), Some("tributary-prod_1.x"));
        assert_eq!(config.output_location.as_deref(), Some("s3://lake/athena-results/"));
        assert_eq!(config.handler.dead_letter.map(|d| d.max_receive_count), Some(2));
    }

    #[test]
    fn from_env_reads_exactly_its_table() {
        let env = env(&[("DLQ_URL", "https://sqs/dlq")]);
        test_support::env::assert_reads_exactly(LambdaConfig::from_env, &env, LambdaConfig::ENV, &[]);
    }

    #[test]
    fn bad_values_are_refused_naming_the_variable() {
        let long = "w".repeat(129);
        test_support::env::assert_refused(
            LambdaConfig::from_env,
            |case| env(&[("DLQ_URL", "https://sqs/dlq"), case]),
            &[
                ("MAX_ROWS_PER_INVOCATION", "0"),
                ("MAX_ROWS_PER_INVOCATION", "1e5"),
                ("ATHENA_WORKGROUP", "my workgroup"),
                ("ATHENA_WORKGROUP", long.as_str()),
                ("ATHENA_OUTPUT_LOCATION", "lake/athena-results/"),
                ("ATHENA_OUTPUT_LOCATION", "s3:///athena-results/"),
                ("MAX_RECEIVE_COUNT", "0"),
            ],
        );
    }
}

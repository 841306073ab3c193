//! Notify: turns dead letters into alerts on the alerts SNS topic.
//!
//! Triggered by the DLQs of the work queues (batches of up to 100 gathered
//! over a 30 s window). It reads each dead letter — pipeline, run and page
//! when the body is readable; the function, receive count and reason from
//! the message attributes the failing function set (or from the queue names
//! after a plain redrive) — and groups them by (pipeline, run, function): a
//! burst of a thousand dead letters is one alert with the count and the
//! first examples, not a thousand e-mails.
//!
//! Each alert is published with `MessageStructure=json`: a short `sms` text
//! (at most 140 characters), a full `email`/`default` text (pipeline,
//! function, run, count, first failures with reasons and truncated bodies,
//! first-seen time and a CloudWatch Logs Insights query for the run's log
//! lines), and the [`Alert`](contracts::Alert) JSON for machine subscribers (`sqs`, `lambda`,
//! `http(s)`, `email-json`). Message attributes `pipeline`, `function` and
//! `severity` let subscriptions filter.
//!
//! Notify never fails on a body: unparseable, empty or huge bodies still
//! give one clear alert. Only a failure to publish fails the group's records,
//! so SQS retries them (and after `maxReceiveCount` moves them to
//! `notify-dlq`, which operators alarm on).
//!
//! The Lambda binary's settings come from its environment through
//! [`LambdaConfig::from_env`].

mod config;
mod deps;
mod error;
mod handler;
pub mod stream;

pub use config::LambdaConfig;

pub use deps::{Deps, FreshnessDeps, NotifyConfig};
pub use error::EventError;
pub use handler::{
    EXAMPLE_BYTES, EXAMPLES, EXCERPT_BYTES, FailedInvocation, FreshnessCheck, NAME_BYTES, NotifyEvent, REASON_BYTES,
    SMS_MAX_CHARS, TRUNCATED_FUNCTION, alert_for, check_freshness, dead_letter_of, email_text, failed_invocation,
    handle_sqs, parse_event, publish, redacted_body, sms_text, truncate, truncated_alert,
};

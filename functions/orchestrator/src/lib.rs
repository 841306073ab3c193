//! Orchestrator: reads a trigger, picks the pipeline's `CallStrategy`, and
//! enqueues the planned `RequestMessage`s. It never calls a vendor API.
//!
//! Triggers ([`parse_trigger`]):
//! - an EventBridge Scheduler event (`source` = `aws.scheduler`) whose
//!   `detail` is the pipeline spec, as a JSON object or a JSON string; the
//!   run id derives from the event's `time` (the scheduled time), so a
//!   redelivered event plans the same run and its outputs overwrite;
//! - the bare spec as the whole event (EventBridge constant input); the run
//!   id derives from the invocation time;
//! - an SQS batch from the orchestrator queue ([`Inbox`]): count-first probe
//!   replies (and their continuations: the same reply, sent again by this
//!   function when its time ran out, [`fanout`]), Athena query rows, and scheduler-shaped run triggers (the
//!   scheduler event above as a message body, with `time` required), each
//!   record handled alone with `batchItemFailures`.
//!
//! Who may start a run: whoever may invoke this function (EventBridge
//! Scheduler through `SchedulerRole`) and whoever may `sqs:SendMessage` to
//! the orchestrator queue (`tributary trigger`, run by an operator whose IAM
//! identity has that permission; the queue's policy lets the query-results
//! topic in, nothing else outside the account). The queue's access policy
//! and IAM are the boundary: a run trigger on the queue is as trusted as an
//! invocation. What a run may then do is still bounded by the deployment,
//! not the spec: Request's SSRF guard, `SECRET_GRANTS` and
//! `REPLY_DESTINATIONS` (docs/request.md, "Trust model"). Probe replies and
//! query rows, by contrast, plan calls only for a probe or query this
//! function itself sent (their digest in the run ledger).
//!
//! The planning itself is pure and lives in [`strategy`], one module per
//! `CallStrategy` variant; how a count-first run's pages are sent within an
//! invocation's time, checkpointed and continued, is [`fanout`]. The Lambda binary's settings come from its
//! environment through [`LambdaConfig::from_env`].

mod config;
mod deps;
mod error;
pub mod fanout;
mod handler;
pub mod strategy;

pub use config::LambdaConfig;

pub use deps::{Deps, OrchestratorConfig};
pub use error::OrchestratorError;
pub use fanout::Fanout;
pub use handler::{
    Inbox, Trigger, begin_run, handle, handle_sqs, no_atomic_replace, on_probe_reply, on_query_row, parse_trigger,
    run_context, start_run, with_incremental_start,
};

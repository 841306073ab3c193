//! Tracing set-up: JSON lines in Lambda (CloudWatch Logs Insights reads the
//! fields), readable text on a terminal.

use tracing_subscriber::EnvFilter;

/// JSON logs for Lambda: one object per line with the event's fields
/// flattened in and every enclosing span's fields in `spans` — the record's
/// `message_id` and `receive_count`, the handler's `pipeline`, `run_id` and
/// `page` — so CloudWatch Logs Insights can filter any line by run. Level
/// from `RUST_LOG` (default `info`). Call once, at cold start.
pub fn init_lambda() {
    use tracing_subscriber::util::SubscriberInitExt;
    let _ = lambda_subscriber(std::io::stdout).try_init();
}

/// The subscriber [`init_lambda`] installs, writing to `writer` (tests
/// capture a run's log lines with it).
pub fn lambda_subscriber<W>(writer: W) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_current_span(true)
        .with_span_list(true)
        .flatten_event(true)
        .with_target(false)
        .without_time()
        .with_ansi(false)
        .with_writer(writer)
        .finish()
}

/// Text logs on stderr for the CLI, at `default_level` unless `RUST_LOG`
/// says otherwise; coloured only when stderr is a terminal (a log file or
/// a CI capture gets plain text).
pub fn init_cli(default_level: &str) {
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level)))
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

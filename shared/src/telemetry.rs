//! Tracing set-up: JSON lines in Lambda (CloudWatch Logs Insights reads the
//! fields), readable text on a terminal.

use tracing_subscriber::EnvFilter;

/// JSON logs for Lambda: one object per line with the span fields
/// (pipeline, run_id, page, message_id) flattened in. Level from `RUST_LOG`
/// (default `info`). Call once, at cold start.
pub fn init_lambda() {
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")))
        .with_current_span(true)
        .with_span_list(false)
        .flatten_event(true)
        .with_target(false)
        .without_time()
        .with_ansi(false)
        .try_init();
}

/// Text logs on stderr for the CLI, at `default_level` unless `RUST_LOG`
/// says otherwise.
pub fn init_cli(default_level: &str) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level)))
        .with_target(false)
        .with_writer(std::io::stderr)
        .try_init();
}

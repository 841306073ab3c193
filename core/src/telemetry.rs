//! Tracing set-up: JSON lines in Lambda (CloudWatch Logs Insights reads the
//! fields), readable text on a terminal.

use tracing_subscriber::EnvFilter;

/// JSON logs for Lambda: one object per line with the event's fields
/// flattened in and every enclosing span's fields in `spans` — the record's
/// `message_id` and `receive_count`, the handler's `pipeline`, `run_id` and
/// `page` — so CloudWatch Logs Insights can filter any line by run. Level:
/// `RUST_LOG` when set, else the function's `ApplicationLogLevel`, which
/// Lambda passes as `AWS_LAMBDA_LOG_LEVEL` when its log format is JSON
/// (the stack's `LogLevel` parameter; see [`lambda_filter`]), else `info`.
/// Each line's `level` (`"INFO"`, …) is the field Lambda filters by too.
/// Call once, at cold start.
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
    let filter =
        lambda_filter(std::env::var("RUST_LOG").ok().as_deref(), std::env::var("AWS_LAMBDA_LOG_LEVEL").ok().as_deref());
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(true)
        .with_span_list(true)
        .flatten_event(true)
        .with_target(false)
        .without_time()
        .with_ansi(false)
        .with_writer(writer)
        .finish()
}

/// The filter of Lambda's logs: `rust_log` (`RUST_LOG`'s directives) when
/// it parses, else Lambda's application log level `lambda_level`
/// (`AWS_LAMBDA_LOG_LEVEL`: `TRACE`, `DEBUG`, `INFO`, `WARN`, `ERROR` or
/// `FATAL`; tracing has no fatal, so `FATAL` keeps errors), else `info`.
/// Lambda drops the lines below its level anyway; filtering here at the
/// same level spares writing them, and lets `DEBUG` in the stack's
/// parameter reach the debug lines an `info` default would never write.
pub fn lambda_filter(rust_log: Option<&str>, lambda_level: Option<&str>) -> EnvFilter {
    if let Some(filter) = rust_log.filter(|d| !d.trim().is_empty()).and_then(|d| EnvFilter::try_new(d).ok()) {
        return filter;
    }
    let level = match lambda_level.map(|l| l.trim().to_ascii_uppercase()).as_deref() {
        Some("TRACE") => "trace",
        Some("DEBUG") => "debug",
        Some("WARN") => "warn",
        Some("ERROR" | "FATAL") => "error",
        _ => "info",
    };
    EnvFilter::new(level)
}

/// Text logs on stderr for the CLI, filtered by `default_level` (a level,
/// or `EnvFilter` directives such as `off,tributary=warn`) unless
/// `RUST_LOG` says otherwise; coloured only when stderr is a terminal (a
/// log file or a CI capture gets plain text).
pub fn init_cli(default_level: &str) {
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level)))
        .with_target(false)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        // A failed write of a log line (stderr's reader gone: `2>&1 | head`)
        // is not reported with `eprintln!`, which would panic on the same
        // closed stderr (exit 101).
        .log_internal_errors(false)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lambda_level_applies_unless_rust_log_says_otherwise() {
        let level = |rust_log, lambda| lambda_filter(rust_log, lambda).max_level_hint();
        use tracing::level_filters::LevelFilter;
        assert_eq!(level(None, None), Some(LevelFilter::INFO));
        assert_eq!(level(None, Some("DEBUG")), Some(LevelFilter::DEBUG));
        assert_eq!(level(None, Some("TRACE")), Some(LevelFilter::TRACE));
        assert_eq!(level(None, Some("WARN")), Some(LevelFilter::WARN));
        assert_eq!(level(None, Some("FATAL")), Some(LevelFilter::ERROR));
        assert_eq!(level(None, Some("nonsense")), Some(LevelFilter::INFO));
        assert_eq!(level(Some("warn"), Some("DEBUG")), Some(LevelFilter::WARN), "RUST_LOG wins");
        assert_eq!(level(Some(""), Some("ERROR")), Some(LevelFilter::ERROR), "an empty RUST_LOG is unset");
    }

    #[test]
    fn json_lines_carry_the_level_lambda_filters_by() {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Sink {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().expect("sink").extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let sink = Sink::default();
        let writer = sink.clone();
        tracing::subscriber::with_default(lambda_subscriber(move || writer.clone()), || {
            tracing::warn!(pipeline = "p", "careful");
        });
        let text = String::from_utf8(sink.0.lock().expect("sink").clone()).expect("utf-8");
        let line: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON line");
        assert_eq!(line["level"], "WARN", "{text}");
        assert_eq!(line["pipeline"], "p", "{text}");
    }
}

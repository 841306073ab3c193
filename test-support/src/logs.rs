//! Log lines captured in memory ([`LogBuffer`]), in the Lambda functions'
//! own format (`tributary_core::telemetry::lambda_subscriber`: one JSON
//! object per line, span fields included), so a test can assert what a
//! handler logged — or that a secret never reached a line.

use std::io::Write;
use std::sync::{Arc, Mutex};

/// A shared, growing buffer of log output; clones write to the same bytes.
#[derive(Clone, Debug, Default)]
pub struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl LogBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the Lambda functions' JSON subscriber, writing here, the
    /// default of the current thread until the guard drops. Under a
    /// current-thread runtime (`#[tokio::test]`'s default) every task of
    /// the test logs through it; tasks on other threads do not.
    pub fn capture(&self) -> tracing::subscriber::DefaultGuard {
        tracing::subscriber::set_default(tributary_core::telemetry::lambda_subscriber(self.clone()))
    }

    /// Everything written so far, as text (invalid UTF-8 replaced).
    ///
    /// # Panics
    /// When a writer panicked holding the lock.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log buffer")).into_owned()
    }

    /// Every line written so far that parses as JSON (all of them, with
    /// the Lambda subscriber).
    pub fn lines(&self) -> Vec<serde_json::Value> {
        self.text().lines().filter_map(|line| serde_json::from_str(line).ok()).collect()
    }
}

impl Write for LogBuffer {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_err(|_| std::io::Error::other("log buffer poisoned"))?.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'w> tracing_subscriber::fmt::MakeWriter<'w> for LogBuffer {
    type Writer = LogBuffer;

    fn make_writer(&'w self) -> Self::Writer {
        self.clone()
    }
}

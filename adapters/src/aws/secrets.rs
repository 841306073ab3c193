//! [`SecretStore`] over AWS Secrets Manager `GetSecretValue`, with a cache.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::error::port_error;
use tributary_core::ports::{PortError, Secret, SecretStore};

/// How long a secret read is reused by default: 300 s, so a warm Lambda
/// calls `GetSecretValue` at most every five minutes per secret (the API
/// allows 10,000 requests per second, but each call costs latency and
/// money), and a rotated secret is picked up within five minutes.
pub const DEFAULT_SECRET_TTL: Duration = Duration::from_secs(300);

/// Secrets by id (name or ARN) from Secrets Manager, cached in memory for a
/// TTL.
///
/// Build once at cold start: the cache then lives across warm invocations.
/// The value is `SecretString`, or `SecretBinary` when it is UTF-8. API
/// reference:
/// <https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html>.
#[derive(Debug)]
pub struct SecretsManagerStore {
    client: aws_sdk_secretsmanager::Client,
    ttl: Duration,
    cache: Mutex<HashMap<String, (Instant, Secret)>>,
}

impl SecretsManagerStore {
    /// A store caching for [`DEFAULT_SECRET_TTL`].
    pub fn new(client: aws_sdk_secretsmanager::Client) -> Self {
        Self { client, ttl: DEFAULT_SECRET_TTL, cache: Mutex::new(HashMap::new()) }
    }

    /// Reuses a read value for `ttl` (zero: never cache).
    pub fn with_ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    fn cached(&self, id: &str) -> Option<Secret> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        cache.get(id).filter(|(read_at, _)| read_at.elapsed() < self.ttl).map(|(_, secret)| secret.clone())
    }
}

#[async_trait]
impl SecretStore for SecretsManagerStore {
    /// # Errors
    /// [`PortError::NotFound`] for `ResourceNotFoundException` (permanent);
    /// [`PortError::Permanent`] for a binary secret that is not UTF-8, an
    /// access denial or a decryption failure; [`PortError::Transient`] for
    /// throttling and service errors. The error never contains the value.
    async fn get(&self, id: &str) -> Result<Secret, PortError> {
        if let Some(secret) = self.cached(id) {
            return Ok(secret);
        }
        let output = self.client.get_secret_value().secret_id(id).send().await.map_err(|err| {
            if err.as_service_error().is_some_and(|e| e.is_resource_not_found_exception()) {
                PortError::NotFound { what: "secret", target: id.to_string() }
            } else {
                port_error("GetSecretValue", id, err)
            }
        })?;
        let value = match (output.secret_string(), output.secret_binary()) {
            (Some(text), _) => text.to_string(),
            // The UTF-8 error holds the secret's bytes: it is not kept as a source.
            (None, Some(blob)) => String::from_utf8(blob.as_ref().to_vec()).map_err(|_| {
                PortError::permanent_msg("GetSecretValue", id.to_string(), "SecretBinary is not UTF-8 text")
            })?,
            (None, None) => {
                return Err(PortError::permanent_msg(
                    "GetSecretValue",
                    id.to_string(),
                    "the secret has neither SecretString nor SecretBinary",
                ));
            }
        };
        let secret = Secret::new(value);
        if !self.ttl.is_zero() {
            self.cache
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id.to_string(), (Instant::now(), secret.clone()));
        }
        Ok(secret)
    }
}

//! [`SecretStore`] for the local runtime: environment first, then a file.

use std::path::PathBuf;

use async_trait::async_trait;

use tributary_core::ports::{PortError, Secret, SecretStore};

/// Secrets by id from `TRIBUTARY_SECRET_<ID>` (the id upper-cased, every
/// character outside `A-Z0-9` replaced by `_`), else from a JSON object file
/// (`{"<id>": "<value>"}`, by default `<lake>/_secrets.json`). A value may
/// also be a JSON object, a key/value secret as Secrets Manager keeps them
/// (`{"<id>": {"user": "…", "password": "…"}}`): its JSON text is the
/// secret, from which a `<id>#<key>` reference takes one key.
#[derive(Clone, Debug)]
pub struct FileSecrets {
    file: PathBuf,
}

impl FileSecrets {
    /// Secrets read from `file` (which may not exist).
    pub fn new(file: impl Into<PathBuf>) -> Self {
        Self { file: file.into() }
    }

    /// The environment variable that holds secret `id`.
    pub fn env_var(id: &str) -> String {
        let id: String =
            id.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
        format!("TRIBUTARY_SECRET_{id}")
    }
}

#[async_trait]
impl SecretStore for FileSecrets {
    async fn get(&self, id: &str) -> Result<Secret, PortError> {
        if let Ok(value) = std::env::var(Self::env_var(id)) {
            return Ok(Secret::new(value));
        }
        // Says where it looked, so a missing local secret names its fix.
        let not_found = || PortError::NotFound {
            what: "secret",
            target: format!("{id} (set {} or add it to {})", Self::env_var(id), self.file.display()),
        };
        let text = match tokio::fs::read_to_string(&self.file).await {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Err(not_found()),
            Err(err) => {
                return Err(PortError::permanent("read secrets file", self.file.display().to_string(), err));
            }
        };
        let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text).map_err(|err| {
            // serde_json's message gives line and column, not the content.
            let message = format!("not a JSON object of strings: {err}");
            PortError::permanent("parse secrets file", self.file.display().to_string(), err).with_message(message)
        })?;
        match map.get(id) {
            Some(serde_json::Value::String(value)) => Ok(Secret::new(value.clone())),
            Some(object @ serde_json::Value::Object(_)) => Ok(Secret::new(object.to_string())),
            Some(_) => Err(PortError::permanent_msg(
                "read secret",
                id,
                "the secrets file holds neither a string nor a JSON object for this id",
            )),
            None => Err(not_found()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_from_file_and_reports_missing_ids() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("_secrets.json");
        std::fs::write(&file, r#"{"vendor/api-key": "s3cr3t", "vendor/login": {"password": "pw"}, "n": 7}"#)
            .expect("write");
        let secrets = FileSecrets::new(&file);
        let secret = secrets.get("vendor/api-key").await.expect("secret");
        assert_eq!(secret.expose(), "s3cr3t");
        // A key/value secret is its JSON text, as Secrets Manager's SecretString.
        assert_eq!(secrets.get("vendor/login").await.expect("object").expose(), r#"{"password":"pw"}"#);
        let Err(err) = secrets.get("n").await else { panic!("a number is no secret") };
        assert!(err.to_string().contains("neither a string nor a JSON object"), "{err}");
        assert_eq!(format!("{secret:?} {secret}"), "Secret(<redacted>) <redacted>");
        let Err(PortError::NotFound { target, .. }) = secrets.get("other/id").await else { panic!("not found") };
        assert!(target.contains("TRIBUTARY_SECRET_OTHER_ID") && target.contains("_secrets.json"), "{target}");
        assert_eq!(FileSecrets::env_var("vendor/api-key"), "TRIBUTARY_SECRET_VENDOR_API_KEY");
    }
}

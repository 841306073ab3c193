//! Secret references: how a spec's or message's `policy.auth.secret_id`
//! names a secret of the deployment that reads it, so one spec moves from a
//! dev stack to a prod stack unchanged.
//!
//! A reference is `<name>` or `<name>#<key>`. Request reads it under its
//! [`SecretPrefix`] (`SECRET_PREFIX`: `<stack name>/` on AWS, where the
//! stack's role may read only secrets named so; empty locally):
//!
//! 1. `arn:…` is a secret's ARN and is read as written; under a non-empty
//!    prefix, the ARN's secret name must start with the prefix (anything
//!    else is another stack's, refused before any call);
//! 2. a name that already starts with the prefix is read as written (a full
//!    id: `tributary-prod/vendor-key` in the stack `tributary-prod`);
//! 3. any other name is read as `<prefix><name>` (`vendor-key` is
//!    `tributary-dev/vendor-key` in `tributary-dev` and
//!    `tributary-prod/vendor-key` in `tributary-prod`).
//!
//! `#<key>` selects a string of a JSON-object secret (a Secrets Manager
//! key/value secret: `vendor-login#password`). Without it the secret must
//! be plain text; a JSON object is refused naming its keys, since sending
//! `{"api_key": …}` as the credential would only earn a 401. `#` cannot
//! appear in a Secrets Manager name (letters, digits and `/_+=.@-`) nor in an
//! ARN, so the split is never ambiguous.
//!
//! `SECRET_GRANTS` keys are references too, resolved by the same rule: a
//! grant of `vendor-key` and one of `tributary-prod/vendor-key` are the
//! same grant in that stack, and a call is checked against the grant of its
//! resolved reference ([`SecretRef::canonical`]).

use tributary_core::ports::Secret;

/// Characters of a Secrets Manager secret name (Secrets Manager API
/// Reference, `CreateSecret`, `Name`): a prefix may use no others.
const NAME_CHARS: &str = "/_+=.@-";

/// The prefix relative secret ids are read under (`SECRET_PREFIX`): the
/// stack's `<stack name>/` on AWS, empty locally (ids read as written).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecretPrefix(String);

impl SecretPrefix {
    /// A prefix: empty, or Secrets Manager name characters (letters,
    /// digits, `/_+=.@-`), not starting with `arn:`.
    ///
    /// # Errors
    /// What `prefix` should be, to follow "`SECRET_PREFIX`=… is not".
    pub fn new(prefix: &str) -> Result<Self, &'static str> {
        if prefix.starts_with("arn:") {
            return Err("a secret name prefix (an ARN is not one)");
        }
        if !prefix.chars().all(|c| c.is_ascii_alphanumeric() || NAME_CHARS.contains(c)) {
            return Err(
                "made of Secrets Manager's name characters only (letters, digits, /_+=.@-), e.g. `tributary-prod/`",
            );
        }
        Ok(Self(prefix.to_string()))
    }

    /// The prefix's text (empty: none).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The secret `reference` names here.
    ///
    /// # Errors
    /// [`SecretRefError`]: an empty name or key, an ARN that is not a
    /// Secrets Manager secret's, or one outside the prefix.
    pub fn resolve(&self, reference: &str) -> Result<SecretRef, SecretRefError> {
        let (name, key) = match reference.split_once('#') {
            Some((_, "")) => return Err(SecretRefError::EmptyKey),
            Some((name, key)) => (name, Some(key.to_string())),
            None => (reference, None),
        };
        if name.trim().is_empty() {
            return Err(SecretRefError::EmptyName);
        }
        let id = if name.starts_with("arn:") {
            let secret_name = arn_secret_name(name).ok_or(SecretRefError::NotASecretArn)?;
            if !secret_name.starts_with(&self.0) {
                return Err(SecretRefError::OutsidePrefix { prefix: self.0.clone() });
            }
            name.to_string()
        } else if name.starts_with(&self.0) {
            name.to_string()
        } else {
            format!("{}{name}", self.0)
        };
        Ok(SecretRef { id, key })
    }
}

/// `<name>-<6 characters>` of `arn:<partition>:secretsmanager:<region>:<account>:secret:<name>-<6 characters>`.
fn arn_secret_name(arn: &str) -> Option<&str> {
    let parts: Vec<&str> = arn.splitn(7, ':').collect();
    match parts.as_slice() {
        ["arn", _, "secretsmanager", _, _, "secret", name] if !name.is_empty() => Some(name),
        _ => None,
    }
}

/// A reference resolved by a [`SecretPrefix`]: the secret to read and the
/// JSON key of the credential in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretRef {
    /// The secret id given to the store (a Secrets Manager name or ARN).
    pub id: String,
    /// The key of a JSON-object secret whose string value is the
    /// credential; `None`: the secret is the credential, as plain text.
    pub key: Option<String>,
}

impl SecretRef {
    /// `<id>` or `<id>#<key>`: what grants are keyed by.
    pub fn canonical(&self) -> String {
        match &self.key {
            Some(key) => format!("{}#{key}", self.id),
            None => self.id.clone(),
        }
    }

    /// The credential in `value`, the secret as read: the value itself, or
    /// its string under [`SecretRef::key`].
    ///
    /// # Errors
    /// [`SecretValueError`] (never holding the value): a key on a secret
    /// that is not a JSON object, a key the object lacks or whose value is
    /// not a string, no key on a JSON-object secret.
    pub fn credential(&self, value: Secret) -> Result<Secret, SecretValueError> {
        // serde_json's own errors may quote the text: only `.ok()` is kept.
        let object = if value.expose().trim_start().starts_with('{') {
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(value.expose()).ok()
        } else {
            None
        };
        let keys = |object: &serde_json::Map<String, serde_json::Value>| {
            let mut keys: Vec<String> = object.keys().cloned().collect();
            keys.sort();
            keys
        };
        match (&self.key, object) {
            (None, None) => Ok(value),
            (None, Some(object)) => Err(SecretValueError::KeyNeeded { keys: keys(&object) }),
            (Some(_), None) => Err(SecretValueError::NotAnObject),
            (Some(key), Some(object)) => match object.get(key) {
                Some(serde_json::Value::String(text)) => Ok(Secret::new(text.clone())),
                Some(_) => Err(SecretValueError::NotText { key: key.clone() }),
                None => Err(SecretValueError::NoSuchKey { key: key.clone(), keys: keys(&object) }),
            },
        }
    }
}

/// A reference that names no secret of this deployment.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretRefError {
    /// Nothing before `#`, or an empty reference.
    #[error("names no secret (write `<name>` or `<name>#<json key>`)")]
    EmptyName,
    /// Nothing after `#`.
    #[error("has an empty JSON key after `#` (write `<name>#<json key>`, or drop `#` for a plain-text secret)")]
    EmptyKey,
    /// `arn:…` but not `arn:<partition>:secretsmanager:<region>:<account>:secret:<name>`.
    #[error("is not a Secrets Manager secret ARN (arn:<partition>:secretsmanager:<region>:<account>:secret:<name>)")]
    NotASecretArn,
    /// The ARN of a secret whose name does not start with the prefix.
    #[error(
        "is the ARN of a secret outside this deployment's (SECRET_PREFIX {prefix:?}: Request reads only secrets named so; write the name relative to it instead)"
    )]
    OutsidePrefix {
        /// The deployment's prefix.
        prefix: String,
    },
}

/// A secret whose value does not hold the credential its reference asks
/// for. Never holds the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretValueError {
    /// A JSON-object secret named without `#<key>`.
    #[error(
        "the secret holds a JSON object (a key/value secret), not the credential as plain text: name its key, `<secret id>#<key>` (its keys: {})",
        keys_text(keys)
    )]
    KeyNeeded {
        /// The object's keys.
        keys: Vec<String>,
    },
    /// `#<key>` on a secret that is not a JSON object.
    #[error("the secret is plain text, not a JSON object: drop `#<key>` from the reference")]
    NotAnObject,
    /// `#<key>` naming a key the object lacks.
    #[error("the secret's JSON object has no key {key:?} (its keys: {})", keys_text(keys))]
    NoSuchKey {
        /// The key asked for.
        key: String,
        /// The object's keys.
        keys: Vec<String>,
    },
    /// `#<key>` naming a value that is not a string.
    #[error("the secret's JSON value under {key:?} is not a string")]
    NotText {
        /// The key asked for.
        key: String,
    },
}

/// At most 10 keys, quoted: keys are the secret's field names, never its values.
fn keys_text(keys: &[String]) -> String {
    if keys.is_empty() {
        return "none".into();
    }
    let shown: Vec<String> = keys.iter().take(10).map(|key| format!("{key:?}")).collect();
    let more = keys.len().saturating_sub(10);
    if more > 0 { format!("{}, and {more} more", shown.join(", ")) } else { shown.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARN: &str = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:tributary-prod/vendor-key-AbC123";

    fn prefix(text: &str) -> SecretPrefix {
        SecretPrefix::new(text).expect("prefix")
    }

    fn id(prefix: &SecretPrefix, reference: &str) -> String {
        prefix.resolve(reference).map(|r| r.canonical()).unwrap_or_else(|err| panic!("{reference}: {err}"))
    }

    #[test]
    fn one_spec_names_the_same_secret_in_every_stack() {
        let (dev, prod, local) = (prefix("tributary-dev/"), prefix("tributary-prod/"), SecretPrefix::default());
        assert_eq!(id(&dev, "vendor-key"), "tributary-dev/vendor-key");
        assert_eq!(id(&prod, "vendor-key"), "tributary-prod/vendor-key");
        assert_eq!(id(&local, "vendor-key"), "vendor-key");
        // Full ids keep working where they belong ...
        assert_eq!(id(&prod, "tributary-prod/vendor-key"), "tributary-prod/vendor-key");
        // ... and elsewhere stay inside the stack's own secrets.
        assert_eq!(id(&dev, "tributary-prod/vendor-key"), "tributary-dev/tributary-prod/vendor-key");
        assert_eq!(id(&prefix("tributary/"), "tributary-prod/k"), "tributary/tributary-prod/k");
        assert_eq!(id(&prod, "crm/login#password"), "tributary-prod/crm/login#password");
        let resolved = prod.resolve("crm/login#password").expect("ref");
        assert_eq!((resolved.id.as_str(), resolved.key.as_deref()), ("tributary-prod/crm/login", Some("password")));
    }

    #[test]
    fn arns_are_read_as_written_inside_the_prefix_only() {
        assert_eq!(id(&prefix("tributary-prod/"), ARN), ARN);
        assert_eq!(id(&SecretPrefix::default(), ARN), ARN);
        assert_eq!(id(&prefix("tributary-prod/"), &format!("{ARN}#token")), format!("{ARN}#token"));
        let err = prefix("tributary-dev/").resolve(ARN).expect_err("another stack's");
        assert_eq!(err, SecretRefError::OutsidePrefix { prefix: "tributary-dev/".into() });
        assert!(err.to_string().contains("SECRET_PREFIX \"tributary-dev/\""), "{err}");
        for not_a_secret in ["arn:aws:s3:::bucket/key", "arn:aws:secretsmanager:eu-west-1:1:secret:", "arn:"] {
            assert_eq!(SecretPrefix::default().resolve(not_a_secret), Err(SecretRefError::NotASecretArn));
        }
    }

    #[test]
    fn malformed_references_and_prefixes_are_refused() {
        let prod = prefix("tributary-prod/");
        assert_eq!(prod.resolve(""), Err(SecretRefError::EmptyName));
        assert_eq!(prod.resolve("#password"), Err(SecretRefError::EmptyName));
        assert_eq!(prod.resolve("crm/login#"), Err(SecretRefError::EmptyKey));
        assert!(SecretPrefix::new("arn:aws:secretsmanager:x").is_err());
        assert!(SecretPrefix::new("stack#").is_err());
        assert!(SecretPrefix::new("my stack/").is_err());
        assert_eq!(prefix("Tributary-Prod_2/").as_str(), "Tributary-Prod_2/");
    }

    #[test]
    fn a_json_secret_gives_the_string_under_its_key_and_never_shows_a_value() {
        let login = SecretRef { id: "crm/login".into(), key: Some("password".into()) };
        let plain = SecretRef { id: "crm/token".into(), key: None };
        let object = || Secret::new(r#"{"username": "ana-user-77", "password": "pa55-w0rd", "port": 5432}"#);
        assert_eq!(login.credential(object()).expect("password").expose(), "pa55-w0rd");
        assert_eq!(plain.credential(Secret::new("t0ken")).expect("plain").expose(), "t0ken");
        // A plain-text secret that happens to start with a brace is still plain.
        assert_eq!(plain.credential(Secret::new("{not json")).expect("plain").expose(), "{not json");
        let errors = [
            plain.credential(object()).expect_err("needs a key"),
            login.credential(Secret::new("pa55-w0rd")).expect_err("not an object"),
            SecretRef { key: Some("pass".into()), ..login.clone() }.credential(object()).expect_err("no such key"),
            SecretRef { key: Some("port".into()), ..login.clone() }.credential(object()).expect_err("a number"),
        ];
        assert_eq!(
            errors[0],
            SecretValueError::KeyNeeded { keys: vec!["password".into(), "port".into(), "username".into()] }
        );
        assert!(errors[0].to_string().contains(r#"its keys: "password", "port", "username""#), "{}", errors[0]);
        assert_eq!(errors[1], SecretValueError::NotAnObject);
        assert!(matches!(&errors[2], SecretValueError::NoSuchKey { key, .. } if key == "pass"));
        assert_eq!(errors[3], SecretValueError::NotText { key: "port".into() });
        for err in errors {
            let text = err.to_string();
            assert!(!text.contains("pa55-w0rd") && !text.contains("ana-user-77") && !text.contains("5432"), "{text}");
        }
        let many: Vec<String> = (0..12).map(|n| format!("k{n:02}")).collect();
        assert!(keys_text(&many).ends_with("\"k09\", and 2 more"), "{}", keys_text(&many));
    }
}

//! Credentials of a call, read by secret id and never logged. A secret id is
//! a reference resolved by the deployment ([`crate::secret_ref`]): relative to
//! the stack's `SECRET_PREFIX`, optionally a key of a JSON-object secret.
//!
//! | `kind` | secret holds | sent as |
//! |---|---|---|
//! | `api_key` | the key | header `header`, or query parameter `query_param` |
//! | `bearer` | the token | `Authorization: Bearer <token>` (RFC 6750), or `<scheme> <token>` (`Token` for Django REST Framework) |
//! | `basic` | `user:password` | `Authorization: Basic <base64>` (RFC 7617) |
//! | `oauth2_client_credentials` | the client secret | a token from `token_url` (RFC 6749 §4.4) as a bearer token |
//!
//! OAuth tokens are cached in [`TokenCache`] (it lives across warm
//! invocations) until `expires_in` less [`TOKEN_MARGIN`]; the caller asks
//! for a fresh one once when the API answers 401.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use serde_json::Value;
use tokio::time::Instant;

use contracts::{Auth, HttpMethod};
use tributary_core::ports::{BoxError, HttpRequest, PortError, Secret};

use crate::scrub::Scrubber;
use crate::{Deps, RequestError};

/// A cached token is dropped this long before it expires: 60 s, so a call
/// never starts with a token about to lapse.
pub const TOKEN_MARGIN: Duration = Duration::from_secs(60);
/// Lifetime assumed when a token response has no `expires_in`: 300 s.
pub const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(300);

/// OAuth access tokens by (token URL, client id, scope).
#[derive(Default)]
pub struct TokenCache {
    tokens: Mutex<HashMap<String, (Secret, Instant)>>,
}

impl std::fmt::Debug for TokenCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenCache(<redacted>)")
    }
}

impl TokenCache {
    fn get(&self, key: &str) -> Option<Secret> {
        let tokens = self.tokens.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        tokens.get(key).filter(|(_, until)| Instant::now() < *until).map(|(token, _)| token.clone())
    }

    fn put(&self, key: String, token: Secret, until: Instant) {
        self.tokens.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key, (token, until));
    }
}

/// Where the credential goes on the request.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    /// A header and its value.
    pub header: Option<(String, Secret)>,
    /// A query parameter and its value.
    pub query: Option<(String, Secret)>,
    /// Further texts never to show: the secret as stored (a basic
    /// `user:password`, its password alone, an OAuth client secret).
    pub hidden: Vec<Secret>,
    /// [`Credentials::scrubber`], once built.
    scrubber: OnceLock<Arc<Scrubber>>,
}

impl Credentials {
    /// `text` with every credential value replaced by `<redacted>`: the
    /// header or parameter value, an `Authorization` token without its
    /// scheme, the stored secret ([`Credentials::hidden`]), and their
    /// base64 forms, each in every spelling a vendor or we may give it
    /// (JSON-escaped, `{:?}`-escaped, percent-encoded, stacked; see
    /// [`crate::scrub`]). A vendor that echoes the request in a body, an
    /// error page or a next link must not put it in our errors, logs,
    /// dead letters or messages. Values shorter than 4 bytes are left
    /// (they would redact ordinary words).
    pub fn scrub(&self, text: String) -> String {
        self.scrubber().scrub(&text)
    }

    /// The [`Scrubber`] of these credentials, built on first use and kept
    /// (it precomputes every spelling of every credential).
    pub fn scrubber(&self) -> &Scrubber {
        self.scrubber.get_or_init(|| Arc::new(Scrubber::new(self.texts())))
    }

    /// Every credential text, longest first (so a token is replaced before
    /// a part of it).
    fn texts(&self) -> Vec<&str> {
        let mut texts: Vec<&str> = Vec::new();
        for (_, value) in self.header.iter().chain(self.query.iter()) {
            let value = value.expose();
            texts.push(value);
            if let Some((_, token)) = value.split_once(' ') {
                texts.push(token);
            }
        }
        texts.extend(self.hidden.iter().map(Secret::expose));
        texts.sort_by_key(|t| std::cmp::Reverse(t.len()));
        texts
    }

    /// Whether `value` is one of the credential texts.
    pub fn is_credential(&self, value: &str) -> bool {
        value.len() >= 4 && self.texts().contains(&value)
    }

    /// Adds the credential to `request`.
    ///
    /// The credential replaces whatever the message put under the same
    /// header name (in any case) or query parameter, so the vendor reads the
    /// granted value and not one of the sender's choosing beside it.
    pub fn apply(&self, request: &mut HttpRequest) {
        if let Some((name, value)) = &self.header {
            request.headers.retain(|other, _| !other.eq_ignore_ascii_case(name));
            request.headers.insert(name.clone(), value.expose().to_string());
        }
        if let Some((name, value)) = &self.query {
            if request.url.query_pairs().any(|(other, _)| other == name.as_str()) {
                let kept: Vec<(String, String)> = request
                    .url
                    .query_pairs()
                    .filter(|(other, _)| other != name.as_str())
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect();
                request.url.query_pairs_mut().clear().extend_pairs(kept);
            }
            request.url.query_pairs_mut().append_pair(name, value.expose());
        }
    }
}

/// A failure of the secret store reading `reference` (as written in the
/// message), naming where it looked.
fn secret_error(reference: &str, err: PortError) -> RequestError {
    let permanent = !err.is_retryable();
    let (problem, source) = match err {
        // The local store names where it looked; Secrets Manager's target
        // is the id read, which SECRET_PREFIX may have prefixed.
        PortError::NotFound { target, .. } if target != reference => (format!("no such secret: {target}"), None),
        PortError::NotFound { .. } => ("no such secret".to_string(), None),
        other => (other.to_string(), Some(other.into())),
    };
    RequestError::Auth { field: "policy.auth.secret_id", value: reference.to_string(), problem, permanent, source }
}

/// The credential `auth`'s secret reference names: resolved under the
/// deployment's `SECRET_PREFIX` ([`crate::secret_ref`]), read, and taken
/// whole or from its JSON key.
async fn read_secret(auth: &Auth, deps: Deps<'_>) -> Result<Secret, RequestError> {
    let reference = auth.secret_id();
    let refused = |problem: String| RequestError::Auth {
        field: "policy.auth.secret_id",
        value: reference.to_string(),
        problem,
        permanent: true,
        source: None,
    };
    let resolved = deps.config.trust.secret_prefix.resolve(reference).map_err(|err| refused(err.to_string()))?;
    let stored = deps.secrets.get(&resolved.id).await.map_err(|err| secret_error(reference, err))?;
    resolved.credential(stored).map_err(|err| refused(format!("secret {:?}: {err}", resolved.id)))
}

/// The credentials of `auth`; with `refresh`, an OAuth token is fetched
/// anew even if one is cached.
///
/// # Errors
/// [`RequestError::Auth`] naming the field: a missing secret, a reference
/// outside the deployment's secrets or a JSON key the secret does not hold
/// (permanent), a token endpoint that refuses the client (permanent) or fails (retryable).
pub async fn credentials(
    auth: &Auth,
    deps: Deps<'_>,
    access: HttpRequest,
    refresh: bool,
) -> Result<Credentials, RequestError> {
    let secret = read_secret(auth, deps).await?;
    Ok(match auth {
        Auth::ApiKey { header: Some(header), .. } => Credentials {
            header: Some((header.clone(), secret)),
            query: None,
            hidden: Vec::new(),
            scrubber: OnceLock::new(),
        },
        Auth::ApiKey { query_param: Some(param), .. } => Credentials {
            header: None,
            query: Some((param.clone(), secret)),
            hidden: Vec::new(),
            scrubber: OnceLock::new(),
        },
        Auth::ApiKey { .. } => {
            return Err(RequestError::Auth {
                field: "policy.auth",
                value: "api_key".into(),
                problem: "needs exactly one of `header` and `query_param`".into(),
                permanent: true,
                source: None,
            });
        }
        Auth::Bearer { scheme, .. } => bearer(scheme.as_deref().unwrap_or(BEARER), &secret, Vec::new()),
        Auth::Basic { .. } => {
            let encoded = base64::engine::general_purpose::STANDARD.encode(secret.expose());
            let mut hidden = Vec::new();
            if let Some((_, password)) = secret.expose().split_once(':') {
                hidden.push(Secret::new(password));
            }
            hidden.push(secret);
            Credentials {
                header: Some(("authorization".into(), Secret::new(format!("Basic {encoded}")))),
                query: None,
                hidden,
                scrubber: OnceLock::new(),
            }
        }
        Auth::OAuth2ClientCredentials { token_url, client_id, scope, secret_id } => {
            let key = format!("{token_url}|{client_id}|{secret_id}|{}", scope.as_deref().unwrap_or(""));
            if !refresh && let Some(token) = deps.warm.tokens.get(&key) {
                return Ok(bearer(BEARER, &token, vec![secret]));
            }
            let (token, lifetime) = fetch_token(token_url, client_id, &secret, scope.as_deref(), deps, access).await?;
            if lifetime > TOKEN_MARGIN {
                deps.warm.tokens.put(key, token.clone(), Instant::now() + lifetime - TOKEN_MARGIN);
            }
            bearer(BEARER, &token, vec![secret])
        }
        // A kind newer than this build (the enum is non-exhaustive for other
        // teams' sake): refused, naming it.
        other => {
            return Err(RequestError::Auth {
                field: "policy.auth.kind",
                value: serde_json::to_value(other)
                    .ok()
                    .and_then(|v| Some(v.get("kind")?.as_str()?.to_owned()))
                    .unwrap_or_default(),
                problem: "is not an auth kind this build knows".into(),
                permanent: true,
                source: None,
            });
        }
    })
}

/// The scheme of a bearer token unless the spec names another (RFC 6750).
const BEARER: &str = "Bearer";

/// `Authorization: <scheme> <token>`; the token alone is a credential text
/// too ([`Credentials::texts`]), so it is scrubbed whatever the scheme.
fn bearer(scheme: &str, token: &Secret, hidden: Vec<Secret>) -> Credentials {
    Credentials {
        header: Some(("authorization".into(), Secret::new(format!("{scheme} {}", token.expose())))),
        query: None,
        hidden,
        scrubber: OnceLock::new(),
    }
}

/// POSTs the client credentials grant (client authenticated with HTTP Basic,
/// RFC 6749 §2.3.1) and reads `access_token` and `expires_in`.
async fn fetch_token(
    token_url: &url::Url,
    client_id: &str,
    client_secret: &Secret,
    scope: Option<&str>,
    deps: Deps<'_>,
    template: HttpRequest,
) -> Result<(Secret, Duration), RequestError> {
    let failed = |problem: String, permanent: bool, source: Option<BoxError>| RequestError::Auth {
        field: "policy.auth.token_url",
        value: contracts::redacted_url(token_url),
        problem,
        permanent,
        source,
    };
    // The serializer is not `Send`: finish it before any await.
    let form = {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "client_credentials");
        if let Some(scope) = scope {
            form.append_pair("scope", scope);
        }
        form.finish()
    };
    let client = base64::engine::general_purpose::STANDARD.encode(format!("{client_id}:{}", client_secret.expose()));
    let request = HttpRequest {
        method: HttpMethod::Post,
        url: token_url.clone(),
        headers: [
            ("authorization".to_string(), format!("Basic {client}")),
            ("content-type".to_string(), "application/x-www-form-urlencoded".to_string()),
            ("accept".to_string(), "application/json".to_string()),
        ]
        .into(),
        body: Some(Bytes::from(form)),
        max_body_bytes: Some(64 * 1024),
        ..template
    };
    let response = deps.http.send(request).await.map_err(|err| {
        let permanent = !err.is_retryable();
        failed(err.to_string(), permanent, Some(err.into()))
    })?;
    if !(200..300).contains(&response.status) {
        // 4xx: the provider refuses these credentials; retrying cannot help.
        let permanent = (400..500).contains(&response.status) && !matches!(response.status, 408 | 429);
        return Err(failed(format!("the token endpoint answered HTTP {}", response.status), permanent, None));
    }
    let body: Value = serde_json::from_slice(&response.body)
        .map_err(|err| failed(format!("the token response is not JSON: {err}"), false, Some(err.into())))?;
    let token = body
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| failed("the token response has no `access_token`".into(), false, None))?;
    let lifetime = body.get("expires_in").and_then(Value::as_u64).map_or(DEFAULT_TOKEN_LIFETIME, Duration::from_secs);
    Ok((Secret::new(token), lifetime))
}

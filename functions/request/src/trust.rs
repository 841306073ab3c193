//! What a message may make Request do, set by whoever deployed Request and
//! never by the message alone: the confused-deputy guard.
//!
//! Request holds credentials and network reach its senders do not have.
//! Anyone allowed to send to its queue could otherwise name any secret, any
//! URL, open loopback and private ranges, and pick where the answer goes.
//! So the deployment says ([`Trust`]):
//! - which secrets messages may name, and for each the whole call it may
//!   ride on ([`SecretGrant`]): scheme (https unless granted), host, port,
//!   method, path prefix, where the secret goes (the header or query
//!   parameter of an API key, the exact OAuth `token_url`), and optionally
//!   which pipelines may use it;
//! - the most `policy.allow.loopback` / `policy.allow.private` may open
//!   (on AWS both are off unless the stack says so);
//! - the queues and topics `reply_to` and a cursor run's `next.queue` may
//!   name (the stack's own).
//!
//! A message asking for more is refused before any call, naming the field
//! and the deployment setting to change (a permanent failure: it goes to
//! the DLQ with its reason). A redirect that leaves the grant (another
//! origin, or a path outside its prefixes) is followed without the
//! credentials. See docs/request.md, "Trust model".

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use contracts::{Auth, Destination, HttpMethod, RequestMessage, RequestMode};
use tributary_core::ports::NetworkAccess;

use crate::secret_ref::SecretPrefix;

/// Where a grant lets an API key go: fixed by the deployment, never by the
/// message (`{"header": "x-api-key"}` or `{"query_param": "api_key"}`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum KeyPlacement {
    /// The request header carrying the key (compared case-insensitively).
    Header(String),
    /// The query parameter carrying the key (compared exactly).
    QueryParam(String),
}

impl KeyPlacement {
    /// The placement an `api_key` auth asks for, if it is an API key.
    fn of(auth: &Auth) -> Option<KeyPlacement> {
        match auth {
            Auth::ApiKey { header: Some(header), .. } => Some(KeyPlacement::Header(header.clone())),
            Auth::ApiKey { query_param: Some(param), .. } => Some(KeyPlacement::QueryParam(param.clone())),
            _ => None,
        }
    }

    fn matches(&self, asked: &KeyPlacement) -> bool {
        match (self, asked) {
            (KeyPlacement::Header(granted), KeyPlacement::Header(asked)) => granted.eq_ignore_ascii_case(asked),
            (KeyPlacement::QueryParam(granted), KeyPlacement::QueryParam(asked)) => granted == asked,
            _ => false,
        }
    }

    fn field(&self) -> &'static str {
        match self {
            KeyPlacement::Header(_) => "policy.auth.header",
            KeyPlacement::QueryParam(_) => "policy.auth.query_param",
        }
    }
}

impl std::fmt::Display for KeyPlacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyPlacement::Header(name) => write!(f, "header {name:?}"),
            KeyPlacement::QueryParam(name) => write!(f, "query parameter {name:?}"),
        }
    }
}

/// The whole call one secret may ride on (`SECRET_GRANTS.<secret id>`).
///
/// A call uses the secret only when every part matches: its pipeline, its
/// URL's scheme, host, port and path, its method, and where the secret
/// goes. Defaults are the narrow ones: `https` on port 443, `GET`, any
/// path, any pipeline.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretGrant {
    /// Hosts the secret may be sent to: exact names, or `*.example.com` for
    /// any subdomain (not the domain itself); names compare
    /// case-insensitively.
    pub hosts: Vec<String>,
    /// Pipelines whose messages may name it; empty: any pipeline.
    #[serde(default)]
    pub pipelines: Vec<String>,
    /// URL schemes the secret may travel over; default `["https"]`. Plain
    /// `http` only where the grant lists it (a vendor on loopback or
    /// inside a VPC), since anyone on the path reads it there.
    #[serde(default = "SecretGrant::https_only")]
    pub schemes: Vec<String>,
    /// Ports; empty (the default): each scheme's own (443, 80).
    #[serde(default)]
    pub ports: Vec<u16>,
    /// Methods; default `["GET"]`.
    #[serde(default = "SecretGrant::get_only")]
    pub methods: Vec<HttpMethod>,
    /// Path prefixes the call's path must start with, on a `/` boundary
    /// (`/v2/reports` admits `/v2/reports` and `/v2/reports/daily`, not
    /// `/v2/reports-admin`); default `["/"]`: any path. A path with an
    /// encoded `/`, `\` or `.` (`%2F`, `%5C`, `%2E`) is refused under a
    /// narrower prefix, since a server may decode it into another path.
    #[serde(default = "SecretGrant::any_path")]
    pub path_prefixes: Vec<String>,
    /// For an `api_key` secret: the header or query parameter the key goes
    /// in. Required for such a secret: a message may not choose it (a
    /// `referer` header or a `q` parameter would hand the key to logs and
    /// analytics of the vendor and of everything in between).
    #[serde(default)]
    pub api_key: Option<KeyPlacement>,
    /// For an `oauth2_client_credentials` secret: the exact token endpoint
    /// the client secret may be sent to. Required for such a secret. A
    /// secret granted with `api_key` or `token_url` is used only as that
    /// kind: never sent raw as a bearer token or basic password.
    #[serde(default)]
    pub token_url: Option<url::Url>,
    /// For an OAuth secret: the client id the message must name (unset:
    /// any).
    #[serde(default)]
    pub client_id: Option<String>,
    /// For an OAuth secret: the scopes a message may ask for (each of its
    /// space-separated `scope` tokens must be listed); empty (the
    /// default): it may ask for none, so the provider's default applies.
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl Default for SecretGrant {
    /// No host; `https` on its default port, `GET`, any path, any pipeline.
    fn default() -> Self {
        Self {
            hosts: Vec::new(),
            pipelines: Vec::new(),
            schemes: Self::https_only(),
            ports: Vec::new(),
            methods: Self::get_only(),
            path_prefixes: Self::any_path(),
            api_key: None,
            token_url: None,
            client_id: None,
            scopes: Vec::new(),
        }
    }
}

/// One call as a grant sees it: a message's, or a redirect hop of it.
#[derive(Clone, Copy, Debug)]
pub struct Call<'a> {
    /// The message's pipeline.
    pub pipeline: &'a str,
    /// The method of this hop.
    pub method: HttpMethod,
    /// The URL of this hop (query included).
    pub url: &'a url::Url,
    /// The message's auth.
    pub auth: &'a Auth,
}

impl SecretGrant {
    fn https_only() -> Vec<String> {
        vec!["https".into()]
    }

    fn get_only() -> Vec<HttpMethod> {
        vec![HttpMethod::Get]
    }

    fn any_path() -> Vec<String> {
        vec!["/".into()]
    }

    /// A grant of `url`'s origin (its scheme, host and port), any path,
    /// `GET`: the shape of a local or test grant for a vendor on loopback.
    pub fn origin_of(url: &url::Url) -> Self {
        Self {
            hosts: url.host_str().map(String::from).into_iter().collect(),
            schemes: vec![url.scheme().to_string()],
            ports: url.port_or_known_default().into_iter().collect(),
            ..Self::default()
        }
    }

    fn allows_host(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.hosts.iter().any(|allowed| {
            let allowed = allowed.trim_end_matches('.').to_ascii_lowercase();
            match allowed.strip_prefix("*.") {
                Some(domain) => host.ends_with(&format!(".{domain}")),
                None => host == allowed,
            }
        })
    }

    fn allows_port(&self, url: &url::Url) -> bool {
        let port = url.port_or_known_default();
        if self.ports.is_empty() {
            let default = match url.scheme() {
                "https" => 443,
                "http" => 80,
                _ => return false,
            };
            return port == Some(default);
        }
        port.is_some_and(|port| self.ports.contains(&port))
    }

    fn allows_path(&self, path: &str) -> bool {
        self.path_prefixes.iter().any(|prefix| {
            if prefix == "/" {
                return true;
            }
            // Under a narrower prefix the path must be plain: a server may
            // decode an escape (`%2e%2e`, `%252e`, `%u002e`, `%c0%ae`), a
            // `;` parameter (`..;/`) or a `\` into another path.
            if path.contains(['%', ';', '\\']) {
                return false;
            }
            let prefix = prefix.trim_end_matches('/');
            path == prefix || path.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('/'))
        })
    }

    /// Why `call` may not use this grant of `secret_id`, naming the first
    /// field that asks for more, with how far the call matched (0: not its
    /// pipeline .. 6: all but where the secret goes); `None`: it may.
    fn refusal(&self, secret_id: &str, call: &Call<'_>) -> Option<(u8, Untrusted)> {
        let refuse = |stage: u8, field: &'static str, value: String, what: String| {
            Some((stage, Untrusted { field, value, reason: format!("secret {secret_id:?} {what} (SECRET_GRANTS)") }))
        };
        let url = call.url;
        if !self.pipelines.is_empty() && !self.pipelines.iter().any(|p| p == call.pipeline) {
            let only = self.pipelines.join(", ");
            return Some((
                0,
                Untrusted {
                    field: "pipeline",
                    value: format!("{:?}", call.pipeline),
                    reason: format!("may not use secret {secret_id:?}: SECRET_GRANTS gives it to {only} only"),
                },
            ));
        }
        if !self.schemes.iter().any(|s| s.eq_ignore_ascii_case(url.scheme())) {
            let what = format!(
                "may travel over {} only (`schemes`; plain http only where the grant lists it)",
                self.schemes.join(", ")
            );
            return refuse(1, "http.url", format!("{}:", url.scheme()), what);
        }
        let host = url.host_str().unwrap_or_default();
        if !self.allows_host(host) {
            return refuse(2, "http.url", host.to_string(), format!("may be sent only to {}", hosts_list(&self.hosts)));
        }
        if !self.allows_port(url) {
            let port = url.port_or_known_default().map_or_else(|| "none".into(), |p| p.to_string());
            let ports = if self.ports.is_empty() {
                "the scheme's default port".to_string()
            } else {
                self.ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
            };
            return refuse(
                3,
                "http.url",
                format!("port {port}"),
                format!("may be sent to port {ports} only (`ports`)"),
            );
        }
        if !self.methods.contains(&call.method) {
            let methods = self.methods.iter().map(HttpMethod::to_string).collect::<Vec<_>>().join(", ");
            return refuse(
                4,
                "http.method",
                call.method.to_string(),
                format!("may ride on {methods} only (`methods`)"),
            );
        }
        if !self.allows_path(url.path()) {
            let what = format!("may be sent under {} only (`path_prefixes`)", self.path_prefixes.join(", "));
            return refuse(5, "http.url", format!("path {:?}", url.path()), what);
        }
        self.placement_refusal(secret_id, call.auth).map(|untrusted| (6, untrusted))
    }

    /// An API key's header or parameter, an OAuth token endpoint, client
    /// id and scopes, and the kind of auth itself: the grant's, never the
    /// message's choice.
    fn placement_refusal(&self, secret_id: &str, auth: &Auth) -> Option<Untrusted> {
        let refuse = |field: &'static str, value: String, what: String| {
            Some(Untrusted { field, value, reason: format!("secret {secret_id:?} {what} (SECRET_GRANTS)") })
        };
        match auth {
            Auth::ApiKey { .. } => {
                let asked = KeyPlacement::of(auth)?;
                match &self.api_key {
                    Some(granted) if granted.matches(&asked) => None,
                    Some(granted) => refuse(asked.field(), asked.to_string(), format!("may go in {granted} only")),
                    None => refuse(
                        asked.field(),
                        asked.to_string(),
                        "may go nowhere as an API key: the grant names no `api_key` placement ({\"header\": …} or {\"query_param\": …})".into(),
                    ),
                }
            }
            Auth::OAuth2ClientCredentials { token_url, client_id, scope, .. } => {
                let Some(granted) = &self.token_url else {
                    return refuse(
                        "policy.auth.token_url",
                        contracts::redacted_url(token_url),
                        "is no OAuth client secret: the grant names no `token_url`".into(),
                    );
                };
                if granted != token_url {
                    let what = format!("may be sent to {} only", contracts::redacted_url(granted));
                    return refuse("policy.auth.token_url", contracts::redacted_url(token_url), what);
                }
                if let Some(granted) = self.client_id.as_ref().filter(|granted| *granted != client_id) {
                    return refuse(
                        "policy.auth.client_id",
                        format!("{client_id:?}"),
                        format!("is for client {granted:?} only"),
                    );
                }
                let asked = scope.as_deref().unwrap_or_default().split_whitespace();
                if let Some(extra) = asked.into_iter().find(|s| !self.scopes.iter().any(|granted| granted == s)) {
                    let listed = if self.scopes.is_empty() { "none".to_string() } else { self.scopes.join(" ") };
                    return refuse(
                        "policy.auth.scope",
                        format!("{extra:?}"),
                        format!("may be asked for scopes {listed} only (`scopes`)"),
                    );
                }
                None
            }
            Auth::Bearer { .. } | Auth::Basic { .. } => {
                let granted_as = match (&self.api_key, &self.token_url) {
                    (Some(_), _) => "an API key",
                    (None, Some(_)) => "an OAuth client secret",
                    (None, None) => return None,
                };
                let kind = if matches!(auth, Auth::Bearer { .. }) { "bearer" } else { "basic" };
                refuse(
                    "policy.auth.kind",
                    kind.into(),
                    format!("is granted as {granted_as}: it is never sent as a {kind} credential"),
                )
            }
            // A kind newer than this build (the enum is non-exhaustive):
            // no grant can name how it would be sent, so it is refused.
            _ => refuse("policy.auth.kind", String::new(), "is an auth kind this build cannot grant".into()),
        }
    }
}

/// What messages may use, from the deployment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trust {
    /// Secrets messages may name, by resolved reference
    /// ([`crate::secret_ref::SecretRef::canonical`]: add them with
    /// [`Trust::grant`]), each with the calls it may ride on
    /// (`SECRET_GRANTS`, a JSON object `{"<secret id>": grant}` or
    /// `{"<secret id>": [grant, ..]}`: a call may use the secret when one
    /// of its grants admits it). `None`: any secret on any call, for a
    /// deployment with a single sender (the local runtime grants each
    /// spec's own secrets instead).
    pub secrets: Option<BTreeMap<String, Vec<SecretGrant>>>,
    /// The most a message's `policy.allow` may open (`ALLOW_LOOPBACK`,
    /// `ALLOW_PRIVATE_NETWORKS`, both default false).
    pub networks: NetworkAccess,
    /// Queue URLs / names and topic ARNs / names `reply_to` and
    /// `mode.next.queue` may name (`REPLY_DESTINATIONS`, comma-separated).
    /// `None`: any.
    pub destinations: Option<BTreeSet<String>>,
    /// The prefix relative secret ids are read under (`SECRET_PREFIX`:
    /// `<stack>/` on AWS; empty, the default, locally): messages' secret ids
    /// and the keys of `secrets` are resolved by it
    /// ([`crate::secret_ref`]). Set it before granting.
    pub secret_prefix: SecretPrefix,
}

impl Default for Trust {
    /// Nothing granted: no secret, no loopback or private address, no
    /// destination. Every message is refused until the deployment says
    /// where answers may go.
    fn default() -> Self {
        Self {
            secrets: Some(BTreeMap::new()),
            networks: NetworkAccess::default(),
            destinations: Some(BTreeSet::new()),
            secret_prefix: SecretPrefix::default(),
        }
    }
}

/// A message asks for more than the deployment grants.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{field}` = {value}: {reason}")]
pub struct Untrusted {
    /// The message's field, e.g. `policy.auth.secret_id`.
    pub field: &'static str,
    /// Its value (a secret id, host or destination; never a secret).
    pub value: String,
    /// What the deployment allows instead, naming its setting.
    pub reason: String,
}

impl Trust {
    /// Everything allowed: any secret anywhere, loopback and private
    /// addresses, any destination. For tests and single-sender setups.
    pub fn unrestricted() -> Self {
        Self {
            secrets: None,
            networks: NetworkAccess { loopback: true, private: true },
            destinations: None,
            secret_prefix: SecretPrefix::default(),
        }
    }

    /// Adds `grant` to the calls `secret_id` may ride on (an earlier grant
    /// of the same secret stays: either admits a call). `secret_id` is a
    /// reference, resolved by [`Trust::secret_prefix`]: `vendor-key` and
    /// `<prefix>vendor-key` are one secret. One that does not resolve is
    /// kept as written, where no call's resolved id can match it.
    pub fn grant(&mut self, secret_id: &str, grant: SecretGrant) {
        let key = self.secret_prefix.resolve(secret_id).map_or_else(|_| secret_id.to_string(), |r| r.canonical());
        if let Some(secrets) = &mut self.secrets {
            let grants = secrets.entry(key).or_default();
            if !grants.contains(&grant) {
                grants.push(grant);
            }
        }
    }

    /// Grants `spec`'s own secret to `spec`'s own calls, for `spec`'s
    /// pipeline only: its URL's origin (scheme, host, port), any path on
    /// it (a next link may change the path), its method, its API key's
    /// placement or its exact OAuth `token_url`. How the local runtime,
    /// where whoever runs the specs is the deployment, builds its grants.
    pub fn grant_spec(&mut self, spec: &contracts::spec::PipelineSpec) {
        let Some(auth) = &spec.request.policy.auth else { return };
        let grant = SecretGrant {
            pipelines: vec![spec.pipeline.clone()],
            methods: vec![spec.request.method],
            api_key: KeyPlacement::of(auth),
            token_url: match auth {
                Auth::OAuth2ClientCredentials { token_url, .. } => Some(token_url.clone()),
                _ => None,
            },
            client_id: match auth {
                Auth::OAuth2ClientCredentials { client_id, .. } => Some(client_id.clone()),
                _ => None,
            },
            scopes: match auth {
                Auth::OAuth2ClientCredentials { scope: Some(scope), .. } => {
                    scope.split_whitespace().map(String::from).collect()
                }
                _ => Vec::new(),
            },
            ..SecretGrant::origin_of(&spec.request.url)
        };
        self.grant(auth.secret_id(), grant);
    }

    /// Checks what `message` asks for against the grants.
    ///
    /// # Errors
    /// [`Untrusted`] naming the first field that asks for more: a
    /// `reply_to` or `next.queue` not among the destinations, an allowance
    /// past `networks`, a secret not granted, or granted to other
    /// pipelines, schemes, hosts, ports, methods, paths, key placements or
    /// token endpoints than the message's.
    pub fn check(&self, message: &RequestMessage) -> Result<(), Untrusted> {
        self.check_destination("reply_to", &message.reply_to)?;
        if let RequestMode::Records { next: Some(next), .. } = &message.mode {
            let queue = Destination::Queue { queue: next.queue.clone() };
            self.check_destination("mode.next.queue", &queue)?;
        }
        let allow = &message.policy.allow;
        for (asked, granted, field, setting) in [
            (allow.loopback, self.networks.loopback, "policy.allow.loopback", "ALLOW_LOOPBACK"),
            (allow.private, self.networks.private, "policy.allow.private", "ALLOW_PRIVATE_NETWORKS"),
        ] {
            if asked && !granted {
                return Err(Untrusted {
                    field,
                    value: "true".into(),
                    reason: format!(
                        "this deployment does not let messages open these addresses ({setting}=false); a vendor there needs the stack's {setting}=true"
                    ),
                });
            }
        }
        let Some(auth) = &message.policy.auth else { return Ok(()) };
        let call = Call { pipeline: &message.pipeline, method: message.http.method, url: &message.http.url, auth };
        self.check_call(&call)
    }

    /// Whether the credentials may go on `call`: a redirect hop of a
    /// message already [`check`](Self::check)ed. A hop outside every grant
    /// of the secret (another path prefix, method or origin) is made
    /// without them.
    pub fn admits(&self, call: &Call<'_>) -> bool {
        self.check_call(call).is_ok()
    }

    fn check_call(&self, call: &Call<'_>) -> Result<(), Untrusted> {
        let Some(secrets) = &self.secrets else { return Ok(()) };
        let secret_id = call.auth.secret_id();
        let resolved = self.secret_prefix.resolve(secret_id).map_err(|err| Untrusted {
            field: "policy.auth.secret_id",
            value: format!("{secret_id:?}"),
            reason: err.to_string(),
        })?;
        let key = resolved.canonical();
        let grants = secrets.get(&key).map(Vec::as_slice).unwrap_or_default();
        let mut refusals = Vec::with_capacity(grants.len());
        for grant in grants {
            match grant.refusal(secret_id, call) {
                None => return Ok(()),
                Some(refusal) => refusals.push(refusal),
            }
        }
        // No grant admits it: explain by the grant the call came closest to
        // (the first of those).
        let explained = refusals.into_iter().rev().max_by_key(|(stage, _)| *stage).map(|(_, untrusted)| untrusted);
        let read_as = if key == secret_id { String::new() } else { format!(" (read as {key:?}, SECRET_PREFIX)") };
        Err(explained.unwrap_or_else(|| Untrusted {
            field: "policy.auth.secret_id",
            value: format!("{secret_id:?}"),
            reason: format!("is not granted to messages by this deployment{read_as} (SECRET_GRANTS lists the secrets messages may use and the calls each may ride on)"),
        }))
    }

    fn check_destination(&self, field: &'static str, destination: &Destination) -> Result<(), Untrusted> {
        let Some(allowed) = &self.destinations else { return Ok(()) };
        let name = match destination {
            Destination::Queue { queue } => queue,
            Destination::Topic { topic } => topic,
            // A kind newer than this build (the enum is non-exhaustive).
            other => {
                return Err(Untrusted {
                    field,
                    value: other.to_string(),
                    reason: "is a kind of destination this build cannot answer to".into(),
                });
            }
        };
        if allowed.contains(name) {
            return Ok(());
        }
        Err(Untrusted {
            field,
            value: destination.to_string(),
            reason: "is not one of this stack's queues or topics for answers (REPLY_DESTINATIONS)".into(),
        })
    }
}

fn hosts_list(hosts: &[String]) -> String {
    if hosts.is_empty() { "no host".into() } else { hosts.join(", ") }
}

/// Parses `SECRET_GRANTS`: a JSON object from secret id to a grant
/// ([`SecretGrant`]) or an array of grants.
///
/// # Errors
/// The parser's message naming the secret id (line, column, the unknown
/// field) when it is not such an object; a grant whose `schemes` are not
/// `http`/`https`, whose `path_prefixes` do not start with `/`, or whose
/// `api_key` header is one Request never takes from a grant
/// ([`contracts::spec::refused_header`]).
pub fn parse_grants(text: &str) -> Result<BTreeMap<String, Vec<SecretGrant>>, String> {
    let raw: BTreeMap<String, serde_json::Value> = serde_json::from_str(text).map_err(|err| err.to_string())?;
    raw.into_iter()
        .map(|(id, value)| {
            let grants = match value {
                serde_json::Value::Array(items) => items.into_iter().map(serde_json::from_value).collect(),
                single => serde_json::from_value(single).map(|grant| vec![grant]),
            };
            let grants: Vec<SecretGrant> = grants.map_err(|err| format!("{id:?}: {err}"))?;
            grants.iter().try_for_each(check_grant).map_err(|problem| format!("{id:?}: {problem}"))?;
            Ok((id, grants))
        })
        .collect()
}

fn check_grant(grant: &SecretGrant) -> Result<(), String> {
    if let Some(scheme) = grant.schemes.iter().find(|s| !matches!(s.as_str(), "http" | "https")) {
        return Err(format!("`schemes` holds {scheme:?}: only \"https\" and \"http\""));
    }
    if let Some(prefix) = grant.path_prefixes.iter().find(|p| !p.starts_with('/')) {
        return Err(format!("`path_prefixes` holds {prefix:?}: a prefix starts with /"));
    }
    if let Some(KeyPlacement::Header(name)) = &grant.api_key
        && let Some(why) = contracts::spec::refused_header(name)
    {
        return Err(format!("`api_key.header` is {name:?}: {why}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(extra: serde_json::Value) -> RequestMessage {
        let mut base = json!({
            "version": 1,
            "pipeline": "team-a",
            "run_id": "20261129T060000Z",
            "run_date": "2026-11-29",
            "http": {"url": "https://api.vendor-a.com/v1/items"},
            "mode": {"kind": "records", "target": {"dataset": "items"}},
            "reply_to": {"kind": "queue", "queue": "persist"},
        });
        if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
            base.extend(extra.clone());
        }
        contracts::decode(base).expect("a message")
    }

    fn trust() -> Trust {
        let mut trust = Trust { destinations: Some(["persist".to_string()].into()), ..Trust::default() };
        trust.grant(
            "tributary/team-a",
            SecretGrant { hosts: vec!["api.vendor-a.com".into()], ..SecretGrant::default() },
        );
        trust.grant(
            "tributary/team-b",
            SecretGrant {
                hosts: vec!["api.vendor-b.com".into()],
                pipelines: vec!["team-b".into()],
                ..SecretGrant::default()
            },
        );
        trust
    }

    fn refused(trust: &Trust, message: serde_json::Value) -> Untrusted {
        trust.check(&self::message(message)).expect_err("refused")
    }

    fn bearer(id: &str) -> serde_json::Value {
        json!({"policy": {"auth": {"kind": "bearer", "secret_id": id}}})
    }

    fn at(mut message: serde_json::Value, method: &str, url: &str) -> serde_json::Value {
        message["http"] = json!({"method": method, "url": url});
        message
    }

    #[test]
    fn granted_secrets_go_to_their_hosts_only() {
        let trust = trust();
        trust.check(&message(bearer("tributary/team-a"))).expect("granted");
        let err = refused(&trust, at(bearer("tributary/team-a"), "GET", "https://attacker.example/collect"));
        assert_eq!((err.field, err.value.as_str()), ("http.url", "attacker.example"));
        assert!(err.reason.contains("api.vendor-a.com") && err.reason.contains("SECRET_GRANTS"), "{err}");
        let err = refused(&trust, bearer("tributary/other"));
        assert_eq!(err.field, "policy.auth.secret_id");
        assert!(err.to_string().contains(r#""tributary/other""#), "{err}");
        // Granted to team-b only.
        let mut foreign = at(bearer("tributary/team-b"), "GET", "https://api.vendor-b.com/x");
        assert_eq!(refused(&trust, foreign.clone()).field, "pipeline");
        foreign["pipeline"] = json!("team-b");
        trust.check(&message(foreign)).expect("team-b's own");
    }

    #[test]
    fn a_grant_binds_scheme_port_method_and_path() {
        let mut trust = trust();
        let narrow = SecretGrant {
            hosts: vec!["api.vendor-c.com".into()],
            methods: vec![HttpMethod::Get, HttpMethod::Post],
            path_prefixes: vec!["/v1/items/".into(), "/v1/reports".into()],
            ..SecretGrant::default()
        };
        trust.grant("tributary/team-c", narrow);
        let call = |method: &str, url: &str| at(bearer("tributary/team-c"), method, url);
        for admitted in [
            call("GET", "https://api.vendor-c.com/v1/items"),
            call("GET", "https://api.vendor-c.com/v1/items/7?page=2"),
            call("POST", "https://api.vendor-c.com/v1/reports/daily"),
            call("GET", "https://API.vendor-c.com:443/v1/reports"),
        ] {
            trust.check(&message(admitted.clone())).unwrap_or_else(|err| panic!("{admitted}: {err}"));
        }
        for (refused_call, field, value) in [
            // Plain http, or another port, would hand the token to anyone on the path.
            (call("GET", "http://api.vendor-c.com/v1/items"), "http.url", "http:"),
            (call("GET", "https://api.vendor-c.com:8443/v1/items"), "http.url", "port 8443"),
            // Outside the prefixes, on a / boundary, whatever the spelling.
            (call("GET", "https://api.vendor-c.com/v1/items-admin"), "http.url", "path \"/v1/items-admin\""),
            (
                call("POST", "https://api.vendor-c.com/admin/delete-everything"),
                "http.url",
                "path \"/admin/delete-everything\"",
            ),
            (call("GET", "https://api.vendor-c.com/v1/items/../admin"), "http.url", "path \"/v1/admin\""),
            (call("GET", "https://api.vendor-c.com/v1/items/%2e%2e/admin"), "http.url", "path \"/v1/admin\""),
            (call("GET", "https://api.vendor-c.com/v1/items/..%2Fadmin"), "http.url", "path \"/v1/items/..%2Fadmin\""),
            // Forms a server may decode past the prefix: the path must be plain.
            (call("GET", "https://api.vendor-c.com/v1/items/..;/admin"), "http.url", "path \"/v1/items/..;/admin\""),
            (
                call("GET", "https://api.vendor-c.com/v1/items/%252e%252e/admin"),
                "http.url",
                "path \"/v1/items/%252e%252e/admin\"",
            ),
            (
                call("GET", "https://api.vendor-c.com/v1/items/%u002e%u002e/admin"),
                "http.url",
                "path \"/v1/items/%u002e%u002e/admin\"",
            ),
            (
                call("GET", "https://api.vendor-c.com/v1/items/%c0%ae%c0%ae/admin"),
                "http.url",
                "path \"/v1/items/%c0%ae%c0%ae/admin\"",
            ),
            (
                call("GET", "https://api.vendor-c.com/v1/items/..%00/admin"),
                "http.url",
                "path \"/v1/items/..%00/admin\"",
            ),
        ] {
            let err = refused(&trust, refused_call.clone());
            assert_eq!((err.field, err.value.as_str()), (field, value), "{refused_call}: {err}");
            assert!(err.reason.contains("SECRET_GRANTS"), "{err}");
        }
        // The default grant is GET only.
        let err = refused(&trust, at(bearer("tributary/team-a"), "POST", "https://api.vendor-a.com/v1/items"));
        assert_eq!((err.field, err.value.as_str()), ("http.method", "POST"));
        assert!(err.reason.contains("`methods`"), "{err}");
    }

    #[test]
    fn the_grant_says_where_an_api_key_goes() {
        let mut trust = trust();
        let grant = SecretGrant {
            hosts: vec!["api.vendor-a.com".into()],
            api_key: Some(KeyPlacement::Header("x-api-key".into())),
            ..SecretGrant::default()
        };
        trust.grant("tributary/key", grant);
        trust.grant(
            "tributary/ungranted-key",
            SecretGrant { hosts: vec!["api.vendor-a.com".into()], ..SecretGrant::default() },
        );
        let key = |id: &str, (name, value): (&str, &str)| json!({"policy": {"auth": {"kind": "api_key", "secret_id": id, name: value}}});
        trust.check(&message(key("tributary/key", ("header", "X-API-Key")))).expect("the granted header");
        let err = refused(&trust, key("tributary/key", ("header", "referer")));
        assert_eq!((err.field, err.value.as_str()), ("policy.auth.header", "header \"referer\""));
        assert!(err.reason.contains("header \"x-api-key\""), "{err}");
        let err = refused(&trust, key("tributary/key", ("query_param", "q")));
        assert_eq!(err.field, "policy.auth.query_param");
        let err = refused(&trust, key("tributary/ungranted-key", ("header", "x-api-key")));
        assert!(err.reason.contains("names no `api_key` placement"), "{err}");
    }

    #[test]
    fn an_oauth_token_url_must_be_the_granted_one() {
        let mut trust = trust();
        let token_url = url::Url::parse("https://login.vendor-a.com/oauth/token").expect("url");
        trust.grant(
            "tributary/oauth",
            SecretGrant {
                hosts: vec!["api.vendor-a.com".into()],
                token_url: Some(token_url),
                ..SecretGrant::default()
            },
        );
        let oauth = |token_url: &str| json!({"policy": {"auth": {"kind": "oauth2_client_credentials", "token_url": token_url, "client_id": "c", "secret_id": "tributary/oauth"}}});
        trust.check(&message(oauth("https://login.vendor-a.com/oauth/token"))).expect("the granted endpoint");
        for elsewhere in [
            "http://127.0.0.1:9001/2018-06-01/runtime/invocation/next",
            "https://login.vendor-a.com/oauth/echo",
            "http://login.vendor-a.com/oauth/token",
        ] {
            let err = refused(&trust, oauth(elsewhere));
            assert_eq!(err.field, "policy.auth.token_url", "{elsewhere}: {err}");
            assert!(err.reason.contains("https://login.vendor-a.com/oauth/token"), "{err}");
        }
    }

    #[test]
    fn a_secret_granted_as_a_key_or_a_client_secret_is_never_sent_raw() {
        let mut trust = trust();
        let key = SecretGrant {
            hosts: vec!["api.vendor-a.com".into()],
            api_key: Some(KeyPlacement::QueryParam("key".into())),
            ..SecretGrant::default()
        };
        trust.grant("tributary/key", key);
        let token_url = url::Url::parse("https://api.vendor-a.com/oauth/token").expect("url");
        let client = SecretGrant {
            hosts: vec!["api.vendor-a.com".into()],
            token_url: Some(token_url),
            ..SecretGrant::default()
        };
        trust.grant("tributary/client", client);
        for (id, kind, granted_as) in [
            ("tributary/key", "bearer", "an API key"),
            ("tributary/key", "basic", "an API key"),
            ("tributary/client", "bearer", "an OAuth client secret"),
            ("tributary/client", "basic", "an OAuth client secret"),
        ] {
            let err = refused(&trust, json!({"policy": {"auth": {"kind": kind, "secret_id": id}}}));
            assert_eq!((err.field, err.value.as_str()), ("policy.auth.kind", kind), "{err}");
            assert!(err.reason.contains(granted_as), "{err}");
        }
    }

    #[test]
    fn an_oauth_grant_binds_the_client_and_the_scopes() {
        let mut trust = trust();
        let token_url = url::Url::parse("https://login.vendor-a.com/token").expect("url");
        let grant = SecretGrant {
            hosts: vec!["api.vendor-a.com".into()],
            token_url: Some(token_url),
            client_id: Some("team-a-client".into()),
            scopes: vec!["read:contacts".into(), "read:deals".into()],
            ..SecretGrant::default()
        };
        trust.grant("tributary/oauth", grant);
        let oauth = |client: &str, scope: Option<&str>| {
            let mut auth = json!({"kind": "oauth2_client_credentials", "token_url": "https://login.vendor-a.com/token",
                "client_id": client, "secret_id": "tributary/oauth"});
            if let Some(scope) = scope {
                auth["scope"] = json!(scope);
            }
            json!({"policy": {"auth": auth}})
        };
        trust.check(&message(oauth("team-a-client", None))).expect("the provider's default scope");
        trust.check(&message(oauth("team-a-client", Some("read:deals read:contacts")))).expect("granted scopes");
        let err = refused(&trust, oauth("team-a-client", Some("read:deals admin billing:write")));
        assert_eq!((err.field, err.value.as_str()), ("policy.auth.scope", "\"admin\""), "{err}");
        let err = refused(&trust, oauth("other-client", None));
        assert_eq!(err.field, "policy.auth.client_id", "{err}");
    }

    #[test]
    fn any_grant_of_a_secret_may_admit_a_call_and_redirect_hops_are_checked_alike() {
        let mut trust = trust();
        let reports = SecretGrant {
            hosts: vec!["reports.vendor-a.com".into()],
            path_prefixes: vec!["/export".into()],
            ..SecretGrant::default()
        };
        trust.grant("tributary/team-a", reports);
        trust
            .check(&message(at(bearer("tributary/team-a"), "GET", "https://reports.vendor-a.com/export/1")))
            .expect("second grant");
        let err = refused(&trust, at(bearer("tributary/team-a"), "GET", "https://reports.vendor-a.com/admin"));
        assert_eq!(err.value, "path \"/admin\"", "{err}");
        let auth = Auth::Bearer { secret_id: "tributary/team-a".into(), scheme: None };
        let hop = |url: &str| url::Url::parse(url).expect("url");
        let admitted =
            |url: &url::Url| trust.admits(&Call { pipeline: "team-a", method: HttpMethod::Get, url, auth: &auth });
        assert!(admitted(&hop("https://reports.vendor-a.com/export/2?part=1")));
        assert!(!admitted(&hop("https://reports.vendor-a.com/login?next=/export")));
        assert!(Trust::unrestricted().admits(&Call {
            pipeline: "x",
            method: HttpMethod::Post,
            url: &hop("http://a/b"),
            auth: &auth
        }));
    }

    #[test]
    fn allowances_and_destinations_come_from_the_deployment() {
        let trust = trust();
        let err = refused(&trust, json!({"policy": {"allow": {"loopback": true}}}));
        assert_eq!(err.field, "policy.allow.loopback");
        assert!(err.reason.contains("ALLOW_LOOPBACK"), "{err}");
        assert_eq!(refused(&trust, json!({"policy": {"allow": {"private": true}}})).field, "policy.allow.private");
        let err = refused(&trust, json!({"reply_to": {"kind": "queue", "queue": "https://sqs/attacker"}}));
        assert_eq!(err.field, "reply_to");
        assert!(err.to_string().contains("REPLY_DESTINATIONS"), "{err}");
        let next = json!({"mode": {"kind": "records", "target": {"dataset": "items"},
            "next": {"paging": {"kind": "link_header"}, "queue": "elsewhere", "max_pages": 5}}});
        assert_eq!(refused(&trust, next).field, "mode.next.queue");
        let open = Trust::unrestricted();
        open.check(&message(json!({"policy": {"allow": {"loopback": true, "private": true}}}))).expect("open");
        // Nothing granted by default.
        assert_eq!(Trust::default().check(&message(json!({}))).expect_err("default").field, "reply_to");
    }

    #[test]
    fn grants_parse_from_json_naming_mistakes() {
        let grants = parse_grants(
            r#"{"tributary/a": {"hosts": ["api.a.com"], "pipelines": ["a"]},
                "tributary/b": [{"hosts": ["api.b.com"], "schemes": ["http"], "ports": [8080], "methods": ["GET", "POST"],
                                 "path_prefixes": ["/v2"], "api_key": {"query_param": "key"}},
                                {"hosts": ["files.b.com"]}]}"#,
        )
        .expect("grants");
        assert_eq!(grants["tributary/a"][0].hosts, ["api.a.com"]);
        assert_eq!(
            (grants["tributary/a"][0].schemes.clone(), grants["tributary/a"][0].methods.clone()),
            (vec!["https".to_string()], vec![HttpMethod::Get])
        );
        let b = &grants["tributary/b"];
        assert_eq!(
            (b.len(), b[0].ports.clone(), b[0].api_key.clone()),
            (2, vec![8080], Some(KeyPlacement::QueryParam("key".into())))
        );
        for (text, named) in [
            (r#"{"tributary/a": {"host": ["api.a.com"]}}"#, "host"),
            (r#"{"tributary/a": {"hosts": [], "schemes": ["ftp"]}}"#, "ftp"),
            (r#"{"tributary/a": {"hosts": [], "path_prefixes": ["v1"]}}"#, "path_prefixes"),
            (r#"{"tributary/a": {"hosts": [], "api_key": {"header": "Host"}}}"#, "api_key.header"),
            (r#"{"tributary/a": {"hosts": [], "methods": ["DELETE"]}}"#, "DELETE"),
        ] {
            let err = parse_grants(text).expect_err(text);
            assert!(err.contains(named) && err.contains("tributary/a"), "{text}: {err}");
        }
    }
}

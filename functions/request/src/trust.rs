//! What a message may make Request do, set by whoever deployed Request and
//! never by the message alone: the confused-deputy guard.
//!
//! Request holds credentials and network reach its senders do not have.
//! Anyone allowed to send to its queue could otherwise name any secret, any
//! URL, open loopback and private ranges, and pick where the answer goes.
//! So the deployment says ([`Trust`]):
//! - which secrets messages may name, which hosts each may be sent to
//!   (the call's host and the OAuth `token_url`'s host), and optionally
//!   which pipelines may use it ([`SecretGrant`]);
//! - the most `policy.allow.loopback` / `policy.allow.private` may open
//!   (on AWS both are off unless the stack says so);
//! - the queues and topics `reply_to` and a cursor run's `next.queue` may
//!   name (the stack's own).
//!
//! A message asking for more is refused before any call, naming the field
//! and the deployment setting to change (a permanent failure: it goes to
//! the DLQ with its reason). See docs/request.md, "Trust model".

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use contracts::{Auth, Destination, RequestMessage, RequestMode};
use tributary_core::ports::NetworkAccess;

/// Where one secret may be used.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretGrant {
    /// Hosts the secret may be sent to: exact names, or `*.example.com` for
    /// any subdomain (not the domain itself); names compare
    /// case-insensitively. Holds the OAuth `token_url`'s host too.
    pub hosts: Vec<String>,
    /// Pipelines whose messages may name it; empty: any pipeline.
    #[serde(default)]
    pub pipelines: Vec<String>,
}

impl SecretGrant {
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
}

/// What messages may use, from the deployment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trust {
    /// Secrets messages may name, by secret id (`SECRET_GRANTS`, a JSON
    /// object `{"<secret id>": {"hosts": [..], "pipelines": [..]}}`).
    /// `None`: any secret to any host, for a deployment with a single
    /// sender (the local runtime grants each spec's own secrets instead).
    pub secrets: Option<BTreeMap<String, SecretGrant>>,
    /// The most a message's `policy.allow` may open (`ALLOW_LOOPBACK`,
    /// `ALLOW_PRIVATE_NETWORKS`, both default false).
    pub networks: NetworkAccess,
    /// Queue URLs / names and topic ARNs / names `reply_to` and
    /// `mode.next.queue` may name (`REPLY_DESTINATIONS`, comma-separated).
    /// `None`: any.
    pub destinations: Option<BTreeSet<String>>,
}

impl Default for Trust {
    /// Nothing granted: no secret, no loopback or private address, no
    /// destination. Every message is refused until the deployment says
    /// where answers may go.
    fn default() -> Self {
        Self { secrets: Some(BTreeMap::new()), networks: NetworkAccess::default(), destinations: Some(BTreeSet::new()) }
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
        Self { secrets: None, networks: NetworkAccess { loopback: true, private: true }, destinations: None }
    }

    /// Grants `secret_id` to `grant`'s hosts (merging with an earlier grant
    /// of the same secret).
    pub fn grant(&mut self, secret_id: &str, grant: SecretGrant) {
        if let Some(secrets) = &mut self.secrets {
            let entry = secrets.entry(secret_id.to_string()).or_default();
            for host in grant.hosts {
                if !entry.hosts.contains(&host) {
                    entry.hosts.push(host);
                }
            }
            for pipeline in grant.pipelines {
                if !entry.pipelines.contains(&pipeline) {
                    entry.pipelines.push(pipeline);
                }
            }
        }
    }

    /// Grants `spec`'s own secret to `spec`'s own hosts (its URL's host and
    /// an OAuth `token_url`'s host) for `spec`'s pipeline only: how the
    /// local runtime, where whoever runs the specs is the deployment, builds
    /// its grants.
    pub fn grant_spec(&mut self, spec: &contracts::spec::PipelineSpec) {
        let Some(auth) = &spec.request.policy.auth else { return };
        let mut hosts: Vec<String> = spec.request.url.host_str().map(String::from).into_iter().collect();
        if let Auth::OAuth2ClientCredentials { token_url, .. } = auth {
            hosts.extend(token_url.host_str().map(String::from));
        }
        self.grant(auth.secret_id(), SecretGrant { hosts, pipelines: vec![spec.pipeline.clone()] });
    }

    /// Checks what `message` asks for against the grants.
    ///
    /// # Errors
    /// [`Untrusted`] naming the first field that asks for more: a
    /// `reply_to` or `next.queue` not among the destinations, an allowance
    /// past `networks`, a secret not granted, granted to other pipelines,
    /// or not to the call's (or `token_url`'s) host.
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
        let (Some(auth), Some(secrets)) = (&message.policy.auth, &self.secrets) else { return Ok(()) };
        let secret_id = auth.secret_id();
        let Some(grant) = secrets.get(secret_id) else {
            return Err(Untrusted {
                field: "policy.auth.secret_id",
                value: format!("{secret_id:?}"),
                reason: "is not granted to messages by this deployment (SECRET_GRANTS lists the secrets messages may use and the hosts each may go to)".into(),
            });
        };
        if !grant.pipelines.is_empty() && !grant.pipelines.iter().any(|p| p == &message.pipeline) {
            return Err(Untrusted {
                field: "pipeline",
                value: format!("{:?}", message.pipeline),
                reason: format!(
                    "may not use secret {secret_id:?}: SECRET_GRANTS gives it to {} only",
                    grant.pipelines.join(", ")
                ),
            });
        }
        let mut hosts = vec![("http.url", message.http.url.host_str().unwrap_or_default())];
        if let Auth::OAuth2ClientCredentials { token_url, .. } = auth {
            hosts.push(("policy.auth.token_url", token_url.host_str().unwrap_or_default()));
        }
        if let Some((field, host)) = hosts.into_iter().find(|(_, host)| !grant.allows_host(host)) {
            return Err(Untrusted {
                field,
                value: host.to_string(),
                reason: format!(
                    "secret {secret_id:?} may be sent only to {} (SECRET_GRANTS)",
                    hosts_list(&grant.hosts)
                ),
            });
        }
        Ok(())
    }

    fn check_destination(&self, field: &'static str, destination: &Destination) -> Result<(), Untrusted> {
        let Some(allowed) = &self.destinations else { return Ok(()) };
        let name = match destination {
            Destination::Queue { queue } => queue,
            Destination::Topic { topic } => topic,
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

/// Parses `SECRET_GRANTS`: a JSON object from secret id to
/// `{"hosts": [..], "pipelines": [..]}`.
///
/// # Errors
/// The parser's message (line, column, the unknown field) when it is not
/// such an object.
pub fn parse_grants(text: &str) -> Result<BTreeMap<String, SecretGrant>, String> {
    serde_json::from_str(text).map_err(|err| err.to_string())
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
            SecretGrant { hosts: vec!["api.vendor-a.com".into(), "*.auth.vendor-a.com".into()], pipelines: vec![] },
        );
        trust.grant(
            "tributary/team-b",
            SecretGrant { hosts: vec!["api.vendor-b.com".into()], pipelines: vec!["team-b".into()] },
        );
        trust
    }

    fn refused(trust: &Trust, message: serde_json::Value) -> Untrusted {
        trust.check(&self::message(message)).expect_err("refused")
    }

    #[test]
    fn granted_secrets_go_to_their_hosts_only() {
        let trust = trust();
        let bearer = |id: &str| json!({"policy": {"auth": {"kind": "bearer", "secret_id": id}}});
        trust.check(&message(bearer("tributary/team-a"))).expect("granted");
        let mut elsewhere = bearer("tributary/team-a");
        elsewhere["http"] = json!({"url": "https://attacker.example/collect"});
        let err = refused(&trust, elsewhere);
        assert_eq!((err.field, err.value.as_str()), ("http.url", "attacker.example"));
        assert!(err.reason.contains("api.vendor-a.com") && err.reason.contains("SECRET_GRANTS"), "{err}");
        let err = refused(&trust, bearer("tributary/other"));
        assert_eq!(err.field, "policy.auth.secret_id");
        assert!(err.to_string().contains(r#""tributary/other""#), "{err}");
        // Granted to team-b only.
        let mut foreign = bearer("tributary/team-b");
        foreign["http"] = json!({"url": "https://api.vendor-b.com/x"});
        assert_eq!(refused(&trust, foreign.clone()).field, "pipeline");
        foreign["pipeline"] = json!("team-b");
        trust.check(&message(foreign)).expect("team-b's own");
    }

    #[test]
    fn an_oauth_token_url_must_be_a_granted_host() {
        let trust = trust();
        let oauth = |token_url: &str| json!({"policy": {"auth": {"kind": "oauth2_client_credentials", "token_url": token_url, "client_id": "c", "secret_id": "tributary/team-a"}}});
        trust.check(&message(oauth("https://login.auth.vendor-a.com/token"))).expect("granted subdomain");
        let err = refused(&trust, oauth("http://127.0.0.1:9001/2018-06-01/runtime/invocation/next"));
        assert_eq!((err.field, err.value.as_str()), ("policy.auth.token_url", "127.0.0.1"));
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
        let grants = parse_grants(r#"{"tributary/a": {"hosts": ["api.a.com"], "pipelines": ["a"]}}"#).expect("grants");
        assert_eq!(grants["tributary/a"].hosts, ["api.a.com"]);
        let err = parse_grants(r#"{"tributary/a": {"host": ["api.a.com"]}}"#).expect_err("typo");
        assert!(err.contains("host"), "{err}");
    }
}

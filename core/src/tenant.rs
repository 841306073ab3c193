//! Who sent a message, from what AWS vouches for, and what that sender owns.
//!
//! Request and Persist are shared: several teams may send to their queues.
//! A message's `pipeline` is a field anyone can write, so it is not an
//! identity. A message's *tenant* comes from what AWS itself puts on the
//! record ([`Tenants::authenticate`]):
//! - the queue it arrived on (`eventSourceARN`): a queue per team, whose
//!   queue policy lets only that team's role send, is the strongest form;
//! - otherwise the SQS `SenderId` system attribute: the IAM unique id of the
//!   principal that called `SendMessage` (`AROA…:<session>` for an assumed
//!   role, such as a Lambda function's, `AIDA…` for an IAM user, the
//!   account id for the root user; SQS API Reference, `ReceiveMessage`,
//!   `MessageSystemAttributeName`).
//!
//! The deployment maps each tenant to what it owns ([`TenantGrant`]:
//! pipelines, datasets, whether it may start runs itself), in `TENANTS`; the
//! stack's own functions are the tenant [`STACK`], recognised by
//! `STACK_SENDERS` (their roles' unique ids). A message from a tenant must
//! name one of its own pipelines; a message from the stack acts for the
//! pipeline's owner ([`Tenants::acting_for`]), so a team's pipeline cannot
//! write another team's table even through Request. With neither variable
//! set the deployment has one team ([`Tenants::Single`]): every sender the
//! queue's policy admits acts as the stack, as before tenants existed.
//!
//! Locally the runtime gives each spec its own tenant (named after its
//! pipeline, sending as `local:<pipeline>`) and sends as `local:stack`
//! itself; see docs/request.md, "Trust model".

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::env::{EnvError, EnvVar, LambdaEnv};

/// The stack's own functions as a tenant: they act for a pipeline's owner.
pub const STACK: &str = "stack";

/// The SQS system attribute naming the sender's IAM unique id.
pub const SENDER_ID_ATTRIBUTE: &str = "SenderId";

/// The `SenderId` the local runtime's own functions send as.
pub const LOCAL_STACK_SENDER: &str = "local:stack";

/// The `SenderId` the local runtime gives messages of `pipeline`'s tenant.
pub fn local_sender(pipeline: &str) -> String {
    format!("local:{pipeline}")
}

/// `TENANTS`: who else may send, and what each owns.
pub const TENANTS: EnvVar = EnvVar::optional(
    "TENANTS",
    "no tenant besides the stack (with STACK_SENDERS unset too: one team, every sender acts as the stack)",
    "JSON: the teams that may send, by name: {\"senders\": [SenderId, ..], \"queues\": [queue ARN, ..], \"pipelines\": [..], \"datasets\": [..], \"opens_runs\": bool} (docs/request.md, Trust model)",
);

/// `STACK_SENDERS`: the stack's own functions' `SenderId`s.
pub const STACK_SENDERS: EnvVar = EnvVar::optional(
    "STACK_SENDERS",
    "none (with TENANTS unset too: one team)",
    "the SenderIds of the stack's own functions, comma-separated (`<role unique id>:*`)",
);

/// What one tenant may do, from `TENANTS`.
///
/// Patterns are exact names or a prefix ending in `*` (`team-a-*`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantGrant {
    /// `SenderId` patterns of the tenant's principals (`AROA…:*`: any
    /// session of a role).
    #[serde(default)]
    pub senders: Vec<String>,
    /// ARNs of queues only this tenant sends to (its queue policy says
    /// so): a message arriving on one is the tenant's, whoever sent it.
    #[serde(default)]
    pub queues: Vec<String>,
    /// Pipelines the tenant owns (names or `prefix*`).
    pub pipelines: Vec<String>,
    /// Datasets its pages may write (names or `prefix*`); none: it writes no
    /// table.
    #[serde(default)]
    pub datasets: Vec<String>,
    /// Whether Persist takes pages of its runs that no Orchestrator planned
    /// (a team that sends its own messages to Request or Persist); without
    /// it, a page of a run with no plan record is refused.
    #[serde(default)]
    pub opens_runs: bool,
}

/// Who may send, from the deployment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tenants {
    /// One team: `TENANTS` and `STACK_SENDERS` unset. Every sender acts as
    /// the stack, owns every pipeline and dataset and may start runs (the
    /// queues' IAM policies are the only gate). Tests and single-team
    /// deployments.
    Single,
    /// Senders authenticated: the stack's own and the listed tenants; any
    /// other sender is refused.
    Listed {
        /// `SenderId` patterns of the stack's functions.
        stack_senders: Vec<String>,
        /// The tenants by name.
        tenants: BTreeMap<String, TenantGrant>,
    },
}

impl Default for Tenants {
    /// [`Tenants::Single`].
    fn default() -> Self {
        Tenants::Single
    }
}

/// The authenticated sender of one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sender {
    /// The stack's own functions (or anyone, with [`Tenants::Single`]).
    Stack,
    /// A listed tenant, by name.
    Tenant(String),
}

/// Whom a message acts for, once its sender and pipeline are known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acting<'a> {
    /// The tenant, `None` for the stack itself (a pipeline no tenant owns,
    /// or [`Tenants::Single`]).
    pub tenant: Option<&'a str>,
    grant: Option<&'a TenantGrant>,
}

impl Acting<'_> {
    /// The stack itself: owns every dataset and may start runs.
    pub const STACK: Acting<'static> = Acting { tenant: None, grant: None };

    /// Whether the message may write `dataset`: its tenant is one of the
    /// dataset's owners ([`Tenants::dataset_owners`]: the tenants whose
    /// pattern for it is the most specific), so no other tenant's pages,
    /// nor the stack's own pipelines', can widen it; the stack itself
    /// writes the datasets no tenant owns. Two tenants listing the same
    /// dataset by its exact name share it.
    pub fn owns_dataset(&self, tenants: &Tenants, dataset: &str) -> bool {
        let owners = tenants.dataset_owners(dataset);
        match self.tenant {
            None => owners.is_empty(),
            Some(tenant) => owners.contains(&tenant),
        }
    }

    /// Whether a page of a run no Orchestrator planned is taken: a
    /// tenant's only with [`TenantGrant::opens_runs`]; the stack itself
    /// (its own pipelines, its operators' replays and backfills) always.
    pub fn opens_runs(&self) -> bool {
        self.grant.is_none_or(|grant| grant.opens_runs)
    }

    /// The tenant's name, or [`STACK`].
    pub fn name(&self) -> &str {
        self.tenant.unwrap_or(STACK)
    }
}

/// A message its sender may not send.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TenantError {
    /// No tenant is known by the record's queue or `SenderId`.
    #[error(
        "sender not authenticated: SenderId {sender_id} on queue {queue} is neither in STACK_SENDERS nor a tenant's `senders` or `queues` (TENANTS; docs/request.md, Trust model)"
    )]
    Unknown {
        /// The `SenderId` attribute, `-` when absent.
        sender_id: String,
        /// The `eventSourceARN`, `-` when absent.
        queue: String,
    },
    /// The tenant does not own what the message names.
    #[error("`{field}` = {value}: tenant {tenant} does not own it ({setting}; docs/request.md, Trust model)")]
    NotOwned {
        /// The tenant.
        tenant: String,
        /// The message's field, e.g. `pipeline`, `target.dataset`.
        field: &'static str,
        /// Its value.
        value: String,
        /// The setting that would grant it.
        setting: &'static str,
    },
}

/// `TENANTS` or `STACK_SENDERS` cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {problem}")]
pub struct TenantsInvalid {
    /// The variable.
    pub setting: &'static str,
    /// What is wrong, naming the tenant and field.
    pub problem: String,
}

/// Whether `value` matches `pattern`: equal, or `pattern` ends in `*` and
/// `value` starts with what comes before it.
pub fn matches(pattern: &str, value: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => value.starts_with(prefix),
        None => pattern == value,
    }
}

/// How specific a match is: exact beats any prefix, a longer prefix beats a
/// shorter one; `None` when `pattern` does not match.
fn specificity(pattern: &str, value: &str) -> Option<usize> {
    match pattern.strip_suffix('*') {
        Some(prefix) => value.starts_with(prefix).then_some(prefix.len()),
        None => (pattern == value).then_some(usize::MAX),
    }
}

impl Tenants {
    /// Reads `TENANTS` and `STACK_SENDERS`; both unset: [`Tenants::Single`].
    ///
    /// # Errors
    /// [`EnvError::Malformed`] naming the variable when `TENANTS` is not a
    /// JSON object of [`TenantGrant`]s or a grant is unusable (see
    /// [`Tenants::parse`]).
    pub fn from_env(env: &LambdaEnv) -> Result<Self, EnvError> {
        let tenants = env.optional(&TENANTS)?;
        let senders = env.optional(&STACK_SENDERS)?;
        if tenants.is_none() && senders.is_none() {
            return Ok(Tenants::Single);
        }
        let text = tenants.unwrap_or_else(|| "{}".into());
        Self::parse(&text, senders.as_deref().unwrap_or("")).map_err(|err| EnvError::Malformed {
            name: err.setting.into(),
            value: err.problem,
            expected: "TENANTS: a JSON object of tenant name to {\"senders\": [..], \"queues\": [..], \"pipelines\": [..], \"datasets\": [..]}; STACK_SENDERS: SenderIds, comma-separated",
        })
    }

    /// [`Tenants::Listed`] from `TENANTS`' JSON text and `STACK_SENDERS`'
    /// comma-separated patterns.
    ///
    /// # Errors
    /// [`TenantsInvalid`]: not a JSON object of grants; a tenant named
    /// [`STACK`]; a tenant with neither `senders` nor `queues`, or without
    /// `pipelines`; an empty pattern; a queue or sender listed for two
    /// tenants.
    pub fn parse(tenants: &str, stack_senders: &str) -> Result<Self, TenantsInvalid> {
        let invalid = |problem: String| TenantsInvalid { setting: "TENANTS", problem };
        let tenants: BTreeMap<String, TenantGrant> =
            serde_json::from_str(tenants).map_err(|err| invalid(format!("not a JSON object of grants: {err}")))?;
        let stack_senders: Vec<String> =
            stack_senders.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
        let mut seen: BTreeMap<&str, &str> = stack_senders.iter().map(|s| (s.as_str(), STACK)).collect();
        for (name, grant) in &tenants {
            if name == STACK || name.is_empty() {
                return Err(invalid(format!("tenant name {name:?} is reserved or empty")));
            }
            if grant.senders.is_empty() && grant.queues.is_empty() {
                return Err(invalid(format!("tenant {name}: needs `senders` or `queues` to be recognised by")));
            }
            if grant.pipelines.is_empty() {
                return Err(invalid(format!("tenant {name}: `pipelines` is empty")));
            }
            let mut patterns = grant.senders.iter().chain(&grant.queues).chain(&grant.pipelines).chain(&grant.datasets);
            if patterns.any(String::is_empty) {
                return Err(invalid(format!("tenant {name}: an empty name in its lists")));
            }
            for id in grant.senders.iter().chain(&grant.queues) {
                if let Some(other) = seen.insert(id, name) {
                    return Err(invalid(format!("{id} is listed for both {other} and {name}")));
                }
            }
        }
        Ok(Tenants::Listed { stack_senders, tenants })
    }

    /// Who sent a record that came on `queue_arn` with `sender_id`: the
    /// tenant whose `queues` holds the queue, else the stack or the tenant
    /// whose `senders` match the `SenderId`.
    ///
    /// # Errors
    /// [`TenantError::Unknown`] when neither names anyone.
    pub fn authenticate(&self, sender_id: Option<&str>, queue_arn: Option<&str>) -> Result<Sender, TenantError> {
        let Tenants::Listed { stack_senders, tenants } = self else { return Ok(Sender::Stack) };
        if let Some(queue) = queue_arn
            && let Some((name, _)) = tenants.iter().find(|(_, grant)| grant.queues.iter().any(|q| q == queue))
        {
            return Ok(Sender::Tenant(name.clone()));
        }
        if let Some(sender) = sender_id {
            if stack_senders.iter().any(|pattern| matches(pattern, sender)) {
                return Ok(Sender::Stack);
            }
            if let Some((name, _)) =
                tenants.iter().find(|(_, grant)| grant.senders.iter().any(|pattern| matches(pattern, sender)))
            {
                return Ok(Sender::Tenant(name.clone()));
            }
        }
        Err(TenantError::Unknown {
            sender_id: sender_id.unwrap_or("-").to_string(),
            queue: queue_arn.unwrap_or("-").to_string(),
        })
    }

    /// The tenant owning `pipeline`: of the tenants with a matching pattern,
    /// the one whose pattern is the most specific (exact, then the longest
    /// prefix; a tie goes to the first name in order). `None`: the stack's
    /// own pipeline.
    pub fn owner_of(&self, pipeline: &str) -> Option<&str> {
        self.most_specific(pipeline, |grant| &grant.pipelines)
    }

    /// The tenants owning `dataset`: those whose `datasets` pattern for it
    /// is the most specific (several only when tied, as two exact names);
    /// empty: no tenant's, the stack's.
    pub fn dataset_owners(&self, dataset: &str) -> Vec<&str> {
        let (_, owners) = self.most_specific_all(dataset, |grant| &grant.datasets);
        owners
    }

    fn most_specific(&self, value: &str, patterns: fn(&TenantGrant) -> &Vec<String>) -> Option<&str> {
        self.most_specific_all(value, patterns).1.first().copied()
    }

    /// The best score for `value` among the tenants' `patterns`, and the
    /// tenants reaching it, in name order.
    fn most_specific_all(&self, value: &str, patterns: fn(&TenantGrant) -> &Vec<String>) -> (usize, Vec<&str>) {
        let Tenants::Listed { tenants, .. } = self else { return (0, Vec::new()) };
        let mut best: (usize, Vec<&str>) = (0, Vec::new());
        for (name, grant) in tenants {
            let Some(score) = patterns(grant).iter().filter_map(|p| specificity(p, value)).max() else { continue };
            if best.1.is_empty() || score > best.0 {
                best = (score, vec![name]);
            } else if score == best.0 {
                best.1.push(name);
            }
        }
        best
    }

    /// Whom a message of `pipeline` from `sender` acts for: the stack acts
    /// for the pipeline's owner (or itself), a tenant for itself.
    ///
    /// # Errors
    /// [`TenantError::NotOwned`] when a tenant names a pipeline it does not
    /// own: none of its patterns matches, or another tenant's pattern is
    /// more specific ([`Tenants::owner_of`]).
    pub fn acting_for(&self, sender: &Sender, pipeline: &str) -> Result<Acting<'_>, TenantError> {
        let Tenants::Listed { tenants, .. } = self else { return Ok(Acting::STACK) };
        let name = match sender {
            Sender::Stack => match self.owner_of(pipeline) {
                Some(owner) => owner,
                None => return Ok(Acting::STACK),
            },
            Sender::Tenant(name) => name.as_str(),
        };
        let Some((name, grant)) = tenants.get_key_value(name) else {
            return Err(TenantError::NotOwned {
                tenant: name.to_string(),
                field: "pipeline",
                value: pipeline.to_string(),
                setting: "TENANTS",
            });
        };
        // Matching one of its patterns is not enough: a wider pattern
        // (`crm-*`) must not reach a pipeline another tenant owns by a more
        // specific one (`crm-eu-contacts`), nor the secrets granted to it.
        let (_, owners) = self.most_specific_all(pipeline, |grant| &grant.pipelines);
        if !grant.pipelines.iter().any(|pattern| matches(pattern, pipeline)) || !owners.contains(&name.as_str()) {
            return Err(TenantError::NotOwned {
                tenant: name.clone(),
                field: "pipeline",
                value: pipeline.to_string(),
                setting: "TENANTS.<tenant>.pipelines: a pipeline belongs to the tenant whose pattern is the most specific",
            });
        }
        Ok(Acting { tenant: Some(name), grant: Some(grant) })
    }

    /// [`Tenants::authenticate`] then [`Tenants::acting_for`].
    ///
    /// # Errors
    /// As those.
    pub fn check(
        &self,
        sender_id: Option<&str>,
        queue_arn: Option<&str>,
        pipeline: &str,
    ) -> Result<Acting<'_>, TenantError> {
        let sender = self.authenticate(sender_id, queue_arn)?;
        self.acting_for(&sender, pipeline)
    }

    /// Adds (or widens) tenant `name`: how the local runtime gives each spec
    /// its own tenant. Turns [`Tenants::Single`] into [`Tenants::Listed`]
    /// with no stack sender.
    pub fn grant(&mut self, name: &str, grant: TenantGrant) {
        if let Tenants::Single = self {
            *self = Tenants::Listed { stack_senders: Vec::new(), tenants: BTreeMap::new() };
        }
        let Tenants::Listed { tenants, .. } = self else { return };
        let entry = tenants.entry(name.to_string()).or_default();
        for (into, from) in [
            (&mut entry.senders, grant.senders),
            (&mut entry.queues, grant.queues),
            (&mut entry.pipelines, grant.pipelines),
            (&mut entry.datasets, grant.datasets),
        ] {
            for item in from {
                if !into.contains(&item) {
                    into.push(item);
                }
            }
        }
        entry.opens_runs |= grant.opens_runs;
    }

    /// [`Tenants::Listed`] with only the stack, sending as `stack_senders`.
    pub fn stack_only(stack_senders: &[&str]) -> Self {
        Tenants::Listed {
            stack_senders: stack_senders.iter().map(|s| s.to_string()).collect(),
            tenants: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_teams() -> Tenants {
        Tenants::parse(
            r#"{
                "team-a": {"senders": ["AROAAAAA:*"], "pipelines": ["team-a", "team-a-*"], "datasets": ["team_a_*"]},
                "team-b": {"queues": ["arn:aws:sqs:eu-west-1:1:team-b"], "senders": ["AIDABBBB"],
                           "pipelines": ["team-b"], "datasets": ["team_b"], "opens_runs": true}
            }"#,
            "AROASTACK:*",
        )
        .unwrap()
    }

    #[test]
    fn senders_are_known_by_sender_id_or_queue() {
        let tenants = two_teams();
        assert_eq!(tenants.authenticate(Some("AROAAAAA:alice"), None), Ok(Sender::Tenant("team-a".into())));
        assert_eq!(tenants.authenticate(Some("AROASTACK:tributary-request"), None), Ok(Sender::Stack));
        // The queue wins over the SenderId: the queue policy is the gate.
        assert_eq!(
            tenants.authenticate(Some("AROASTACK:x"), Some("arn:aws:sqs:eu-west-1:1:team-b")),
            Ok(Sender::Tenant("team-b".into()))
        );
        let err = tenants.authenticate(Some("AROAEVIL:mallory"), Some("arn:aws:sqs:eu-west-1:1:shared")).unwrap_err();
        assert!(err.to_string().contains("AROAEVIL:mallory"), "{err}");
        assert!(matches!(tenants.authenticate(None, None), Err(TenantError::Unknown { .. })));
    }

    #[test]
    fn a_tenant_names_only_its_own_pipelines() {
        let tenants = two_teams();
        let b = Sender::Tenant("team-b".into());
        let err = tenants.acting_for(&b, "team-a").unwrap_err();
        assert!(
            matches!(&err, TenantError::NotOwned { tenant, field: "pipeline", value, .. } if tenant == "team-b" && value == "team-a")
        );
        let a = tenants.acting_for(&Sender::Tenant("team-a".into()), "team-a-orders").unwrap();
        assert_eq!(a.tenant, Some("team-a"));
        assert!(a.owns_dataset(&tenants, "team_a_orders"));
        assert!(!a.owns_dataset(&tenants, "team_b"));
        assert!(!a.opens_runs());
    }

    #[test]
    fn the_stack_acts_for_the_owner() {
        let tenants = two_teams();
        let acting = tenants.acting_for(&Sender::Stack, "team-b").unwrap();
        assert_eq!(acting.name(), "team-b");
        assert!(acting.owns_dataset(&tenants, "team_b"));
        assert!(
            !acting.owns_dataset(&tenants, "team_a_orders"),
            "the stack relaying team B's page cannot write team A's table"
        );
        assert!(acting.opens_runs());
        let own = tenants.acting_for(&Sender::Stack, "billing").unwrap();
        assert_eq!(own, Acting::STACK);
        assert!(own.owns_dataset(&tenants, "billing_events"));
        assert!(!own.owns_dataset(&tenants, "team_b"), "the stack's own pipelines cannot widen a tenant's table");
        assert!(own.opens_runs(), "the stack's own pipelines, replays and backfills");
    }

    #[test]
    fn the_most_specific_pattern_owns_a_pipeline() {
        let tenants = Tenants::parse(
            r#"{"wide": {"senders": ["a"], "pipelines": ["crm-*"]}, "narrow": {"senders": ["b"], "pipelines": ["crm-eu-*"]},
                "exact": {"senders": ["c"], "pipelines": ["crm-eu-contacts"]}}"#,
            "",
        )
        .unwrap();
        assert_eq!(tenants.owner_of("crm-us"), Some("wide"));
        assert_eq!(tenants.owner_of("crm-eu-deals"), Some("narrow"));
        assert_eq!(tenants.owner_of("crm-eu-contacts"), Some("exact"));
        assert_eq!(tenants.owner_of("erp"), None);
        // A wider pattern does not reach what a more specific one owns.
        let err = tenants.check(Some("a"), None, "crm-eu-contacts").expect_err("exact's pipeline");
        assert!(err.to_string().contains("most specific"), "{err}");
        assert!(tenants.check(Some("b"), None, "crm-eu-contacts").is_err());
        assert_eq!(tenants.check(Some("c"), None, "crm-eu-contacts").expect("its own").tenant, Some("exact"));
        assert_eq!(tenants.check(Some("a"), None, "crm-us").expect("its own").tenant, Some("wide"));
    }

    #[test]
    fn single_team_deployments_trust_every_sender() {
        let tenants = Tenants::Single;
        let acting = tenants.check(None, None, "anything").unwrap();
        assert!(acting.owns_dataset(&tenants, "any") && acting.opens_runs());
    }

    #[test]
    fn unusable_settings_name_the_tenant() {
        for (text, needle) in [
            (r#"{"stack": {"senders": ["a"], "pipelines": ["p"]}}"#, "reserved"),
            (r#"{"t": {"pipelines": ["p"]}}"#, "tenant t: needs `senders` or `queues`"),
            (r#"{"t": {"senders": ["a"], "pipelines": []}}"#, "tenant t: `pipelines` is empty"),
            (r#"{"t": {"senders": [""], "pipelines": ["p"]}}"#, "an empty name"),
            (
                r#"{"t": {"senders": ["a"], "pipelines": ["p"]}, "u": {"senders": ["a"], "pipelines": ["q"]}}"#,
                "both t and u",
            ),
            (r#"{"t": {"senders": ["a"], "pipelines": ["p"], "owner": "x"}}"#, "unknown field"),
            ("[1]", "not a JSON object"),
        ] {
            let err = Tenants::parse(text, "").unwrap_err();
            assert!(err.problem.contains(needle), "{text}: {err}");
        }
        let env = LambdaEnv::from_pairs([("TENANTS", "nope")]);
        let err = Tenants::from_env(&env).unwrap_err();
        assert!(err.to_string().contains("TENANTS"), "{err}");
        assert_eq!(Tenants::from_env(&LambdaEnv::from_pairs(Vec::<(&str, &str)>::new())).unwrap(), Tenants::Single);
        let stack = Tenants::from_env(&LambdaEnv::from_pairs([("STACK_SENDERS", "AROAS:*, AROAT:*")])).unwrap();
        assert_eq!(stack, Tenants::stack_only(&["AROAS:*", "AROAT:*"]));
    }
}

//! What the handler is given: its settings ([`NotifyConfig`]) and its ports ([`Deps`],
//! [`FreshnessDeps`]). The Lambda's `main.rs` and the CLI's local runtime build them.

use tributary_core::ports::TopicPublisher;

/// Notify's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotifyConfig {
    /// Alerts topic (`ALERTS_TOPIC_ARN` on AWS).
    pub alerts_topic: String,
    /// Where the EMF `dead_letters` count of each alert goes.
    pub metrics: tributary_core::metrics::MetricsTarget,
}

/// The ports and settings the handler uses.
#[derive(Clone, Copy)]
pub struct Deps<'a> {
    /// Publishes alerts.
    pub topics: &'a dyn TopicPublisher,
    /// Settings.
    pub config: &'a NotifyConfig,
    /// The lake, where each dead letter is archived whole before its alert
    /// (`_dead_letters/…`, see [`tributary_core::dead_letters`]). `None`
    /// only where something else keeps the letters (unit tests of the
    /// alert texts); the Lambda and the local runtime always set it.
    pub store: Option<&'a dyn tributary_core::ports::ObjectStore>,
}

/// What the freshness check needs: the lake (to find completed runs) and
/// the alerts topic.
#[derive(Clone, Copy)]
pub struct FreshnessDeps<'a> {
    /// The lake bucket.
    pub store: &'a dyn tributary_core::ports::ObjectStore,
    /// Publishes the alert.
    pub topics: &'a dyn TopicPublisher,
    /// Settings (the alerts topic).
    pub config: &'a NotifyConfig,
}

//! The CLI against a deployed stack (feature `aws`): the stack's
//! CloudFormation outputs give the lake bucket, the queues and the Athena
//! workgroup; the AWS adapters do the rest.
//!
//! Credentials, region and endpoint come from the usual AWS environment
//! (`AWS_PROFILE`, `AWS_REGION`, `AWS_ENDPOINT_URL` for an emulator, with
//! `TRIBUTARY_S3_FORCE_PATH_STYLE=true` for moto).

use adapters::aws::stack::output;
use adapters::aws::{AthenaEngine, S3Store, SqsSender, StackOutputs};
use aws_credential_types::provider::ProvideCredentials;
use aws_credential_types::provider::error::CredentialsError;
use tributary_core::ports::PortError;

/// Why the CLI cannot reach AWS or the stack: each with the one next step,
/// said before (or instead of) the SDK's own account of it.
#[derive(Debug, thiserror::Error)]
pub enum AwsError {
    /// No credential source is set up, and none was found on the machine.
    #[error("no AWS credentials: set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run aws configure")]
    NoCredentials,
    /// `AWS_PROFILE` names a profile that gives no credentials (none of
    /// that name, or one without credentials).
    #[error(
        "no AWS credentials in profile {profile} (AWS_PROFILE): check its name in ~/.aws/config, \
         or run aws configure --profile {profile}"
    )]
    NoProfile {
        /// The profile named.
        profile: String,
    },
    /// A credential source is set up but failed to give credentials (an
    /// expired session, a key without its secret, …).
    #[error("no AWS credentials from {from} ({reason}); check them with aws sts get-caller-identity")]
    Credentials {
        /// The source set up: `AWS_PROFILE=dev`, `AWS_ACCESS_KEY_ID`, …
        from: String,
        /// Why it gave none, in the SDK's words (no debug dump).
        reason: String,
    },
    /// Neither `AWS_REGION` nor the profile names a region.
    #[error("no AWS region: set AWS_REGION (for example AWS_REGION=us-east-1) or a region in your AWS profile")]
    NoRegion,
    /// No stack of that name in the region.
    #[error(
        "stack {stack} does not exist in {region}: check the name and AWS_REGION \
         (aws cloudformation describe-stacks --stack-name {stack}), or deploy it (infra/README.md, \"Deploy\")"
    )]
    NoStack {
        /// The stack name given.
        stack: String,
        /// The region asked.
        region: String,
    },
    /// CloudFormation failed otherwise.
    #[error("stack {stack}: {source}")]
    Stack {
        /// The stack name given.
        stack: String,
        /// What failed.
        source: PortError,
    },
    /// The S3 client could not be configured.
    #[error(transparent)]
    Port(#[from] PortError),
}

/// The SDK configuration from the environment (`AWS_PROFILE`, `AWS_REGION`,
/// `AWS_ENDPOINT_URL`, …), once its credentials have loaded and it has a
/// region, so that a missing one is said in a line ([`AwsError`]) rather
/// than in the SDK's provider chain on the first call.
///
/// # Errors
/// [`AwsError::NoCredentials`], [`AwsError::Credentials`] or
/// [`AwsError::NoRegion`].
pub async fn sdk_config() -> Result<aws_config::SdkConfig, AwsError> {
    let sdk = adapters::aws::sdk_config().await;
    let provider = sdk.credentials_provider().ok_or(AwsError::NoCredentials)?;
    if let Err(err) = provider.provide_credentials().await {
        return Err(credentials_error(&err, credential_source()));
    }
    if sdk.region().is_none() {
        return Err(AwsError::NoRegion);
    }
    Ok(sdk)
}

/// What a failed credential load means, given the source set up (`from`,
/// see [`credential_source`]). Nothing set up (the chain found nothing, or
/// only the EC2 instance metadata service tried and failed, as off EC2) is
/// [`AwsError::NoCredentials`]; so is a source that was not enabled (no
/// credentials found), unless `AWS_PROFILE` named a profile:
/// [`AwsError::NoProfile`]. A source that failed says why, in one line.
fn credentials_error(err: &CredentialsError, from: Option<String>) -> AwsError {
    let profile = std::env::var("AWS_PROFILE").ok().filter(|p| !p.trim().is_empty());
    match (err, from) {
        (_, None) => AwsError::NoCredentials,
        (CredentialsError::CredentialsNotLoaded(_), _) => match profile {
            Some(profile) => AwsError::NoProfile { profile },
            None => AwsError::NoCredentials,
        },
        (_, Some(from)) => AwsError::Credentials { from, reason: error_text(err) },
    }
}

/// `err` and its causes joined by `: `, each text once and on one line
/// (the SDK's `DisplayErrorContext` adds a debug dump after them).
fn error_text(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(next) = cause {
        let said = next.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = next.source();
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The credential source set up in the environment or the shared files,
/// named as the user would know it; `None` when there is none (the SDK then
/// tries the container and instance metadata endpoints only).
fn credential_source() -> Option<String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    if var("AWS_ACCESS_KEY_ID").is_some() {
        return Some("AWS_ACCESS_KEY_ID".into());
    }
    if let Some(profile) = var("AWS_PROFILE") {
        return Some(format!("AWS_PROFILE={profile}"));
    }
    for name in
        ["AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"]
    {
        if var(name).is_some() {
            return Some(name.into());
        }
    }
    let home = var("HOME").map(std::path::PathBuf::from);
    for (variable, file) in [("AWS_SHARED_CREDENTIALS_FILE", "credentials"), ("AWS_CONFIG_FILE", "config")] {
        let path =
            var(variable).map(std::path::PathBuf::from).or_else(|| home.as_ref().map(|h| h.join(".aws").join(file)));
        if let Some(path) = path.filter(|p| p.is_file()) {
            return Some(format!("the default profile of {}", path.display()));
        }
    }
    None
}

/// A deployed stack, connected.
pub struct Stack {
    /// Its outputs.
    pub outputs: StackOutputs,
    /// The SDK configuration every client is built from.
    pub sdk: aws_config::SdkConfig,
}

impl Stack {
    /// Reads stack `name`'s outputs.
    ///
    /// # Errors
    /// [`AwsError`]: no credentials or region ([`sdk_config`]), no such
    /// stack ([`AwsError::NoStack`]), or CloudFormation failing.
    pub async fn connect(name: &str) -> Result<Self, AwsError> {
        let sdk = sdk_config().await?;
        let outputs = StackOutputs::describe(&sdk, name).await.map_err(|err| match err {
            PortError::NotFound { .. } => AwsError::NoStack {
                stack: name.to_string(),
                region: sdk.region().map_or_else(|| "the default region".to_string(), ToString::to_string),
            },
            source => AwsError::Stack { stack: name.to_string(), source },
        })?;
        Ok(Self { outputs, sdk })
    }

    /// The lake bucket's name (`LakeBucketName`).
    ///
    /// # Errors
    /// [`PortError::NotFound`] naming the missing output.
    pub fn lake_bucket(&self) -> Result<&str, PortError> {
        self.outputs.get(output::LAKE_BUCKET)
    }

    /// The console URL of the stack's CloudWatch dashboard
    /// (`DashboardUrl`); `None` for a stack deployed from a template
    /// without it.
    pub fn dashboard_url(&self) -> Option<&str> {
        self.outputs.get(output::DASHBOARD_URL).ok()
    }

    /// A sender to the stack's queues.
    pub fn queues(&self) -> SqsSender {
        SqsSender::new(aws_sdk_sqs::Client::new(&self.sdk))
    }

    /// The URL of logical work queue `queue` (`persist`, …).
    ///
    /// # Errors
    /// A sentence naming the queue or the missing output.
    pub fn queue_url(&self, queue: &str) -> Result<String, String> {
        let key =
            output::queue_url_key(queue).ok_or_else(|| format!("{queue} is not one of the stack's work queues"))?;
        self.outputs.get(key).map(str::to_string).map_err(|err| err.to_string())
    }

    /// The persist queue's URL (`PersistQueueUrl`).
    ///
    /// # Errors
    /// [`PortError::NotFound`] naming the missing output.
    pub fn persist_queue(&self) -> Result<String, PortError> {
        self.outputs.get(output::PERSIST_QUEUE).map(str::to_string)
    }

    /// The subscriptions of the stack's operations and alerts topics
    /// (outputs `OperationsTopicArn`, `AlertsTopicArn`), for `status`.
    ///
    /// # Errors
    /// [`PortError::NotFound`] naming a missing output or topic; others
    /// from SNS.
    pub async fn topic_subscriptions(&self) -> Result<Vec<(String, Vec<crate::status::Subscription>)>, PortError> {
        let mut topics = Vec::new();
        for (topic, key) in [("operations", output::OPERATIONS_TOPIC), ("alerts", output::ALERTS_TOPIC)] {
            let arn = self.outputs.get(key)?;
            let subscriptions = adapters::aws::list_topic_subscriptions(&self.sdk, arn)
                .await?
                .into_iter()
                .map(|s| crate::status::Subscription {
                    protocol: s.protocol,
                    endpoint: s.endpoint,
                    subscription_arn: s.subscription_arn,
                })
                .collect();
            topics.push((topic.to_string(), subscriptions));
        }
        Ok(topics)
    }

    /// Athena in the stack's workgroup (`AthenaWorkGroupName`), which sets
    /// the result location and the bytes-scanned cut-off.
    ///
    /// # Errors
    /// [`PortError::NotFound`] naming the missing output.
    pub fn athena(&self) -> Result<(AthenaEngine, String), PortError> {
        let workgroup = self.outputs.get(output::ATHENA_WORKGROUP)?;
        let database = self.outputs.get(output::LAKE_DATABASE)?.to_string();
        Ok((AthenaEngine::new(aws_sdk_athena::Client::new(&self.sdk)).with_workgroup(workgroup), database))
    }

    /// The stack's Iceberg tables as Persist's committer sees them: the Glue
    /// database `LakeDatabaseName`, tables under
    /// `s3://<LakeBucketName>/_iceberg/warehouse/`, and the identifier of
    /// `dataset`'s table in it.
    ///
    /// # Errors
    /// [`PortError::NotFound`] naming a missing output;
    /// [`PortError::Permanent`] when `TRIBUTARY_S3_FORCE_PATH_STYLE` is not
    /// a boolean or the catalog cannot be opened.
    pub async fn iceberg_table(
        &self,
        dataset: &str,
    ) -> Result<(Box<dyn iceberg::Catalog>, iceberg::TableIdent), PortError> {
        let database = self.outputs.get(output::LAKE_DATABASE)?.to_string();
        let path_style = tributary_core::env::LambdaEnv::from_env()
            .flag(&tributary_core::env::S3_FORCE_PATH_STYLE)
            .map_err(|err| PortError::permanent("read the environment", "TRIBUTARY_S3_FORCE_PATH_STYLE", err))?;
        let settings = tributary_iceberg::glue::GlueSettings {
            database: database.clone(),
            bucket: self.lake_bucket()?.to_string(),
            region: self.sdk.region().map(ToString::to_string),
            endpoint: self.sdk.endpoint_url().map(ToString::to_string),
            path_style,
        };
        let catalog = tributary_iceberg::glue::glue_catalog(&settings)
            .await
            .map_err(|err| PortError::permanent("open the stack's Glue catalog", database.clone(), err))?;
        let ident = iceberg::TableIdent::new(iceberg::NamespaceIdent::new(database), dataset.to_string());
        Ok((Box::new(catalog), ident))
    }
}

/// The lake at `s3://bucket/prefix` through the environment's credentials.
///
/// # Errors
/// [`AwsError`] from [`sdk_config`]; [`AwsError::Port`] when
/// `TRIBUTARY_S3_FORCE_PATH_STYLE` is not a boolean.
pub async fn s3_store(bucket: &str, prefix: &str) -> Result<S3Store, AwsError> {
    let sdk = sdk_config().await?;
    let client =
        adapters::aws::s3_client(&sdk).map_err(|err| PortError::permanent("configure S3", bucket.to_string(), err))?;
    let store = S3Store::new(client, bucket);
    Ok(if prefix.is_empty() { store } else { store.with_prefix(prefix) })
}

//! The CLI against a deployed stack (feature `aws`): the stack's
//! CloudFormation outputs give the lake bucket, the queues and the Athena
//! workgroup; the AWS adapters do the rest.
//!
//! Credentials, region and endpoint come from the usual AWS environment
//! (`AWS_PROFILE`, `AWS_REGION`, `AWS_ENDPOINT_URL` for an emulator, with
//! `TRIBUTARY_S3_FORCE_PATH_STYLE=true` for moto).

use adapters::aws::stack::output;
use adapters::aws::{AthenaEngine, S3Store, SqsSender, StackOutputs};
use tributary_core::ports::PortError;

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
    /// [`PortError::NotFound`] for a stack that does not exist; others from
    /// CloudFormation.
    pub async fn connect(name: &str) -> Result<Self, PortError> {
        let sdk = adapters::aws::sdk_config().await;
        let outputs = StackOutputs::describe(&sdk, name).await?;
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
/// [`PortError::Permanent`] when `TRIBUTARY_S3_FORCE_PATH_STYLE` is not a
/// boolean.
pub async fn s3_store(bucket: &str, prefix: &str) -> Result<S3Store, PortError> {
    let sdk = adapters::aws::sdk_config().await;
    let client =
        adapters::aws::s3_client(&sdk).map_err(|err| PortError::permanent("configure S3", bucket.to_string(), err))?;
    let store = S3Store::new(client, bucket);
    Ok(if prefix.is_empty() { store } else { store.with_prefix(prefix) })
}

//! [`Catalog`] over the AWS Glue Data Catalog: `GetTable`, then `CreateTable`
//! for a new table or `UpdateTable` for a changed one.

use std::collections::HashMap;

use async_trait::async_trait;
use aws_sdk_glue::error::BuildError;
use aws_sdk_glue::types::{Column, SerDeInfo, StorageDescriptor, Table, TableInput};

use super::error::{build_error, port_error};
use tributary_core::catalog::{
    Catalog, EXTERNAL_TABLE, PARQUET_INPUT_FORMAT, PARQUET_OUTPUT_FORMAT, PARQUET_SERDE, PARTITION_KEY_TYPE, TableDef,
    VERSION_PARAMETER,
};
use tributary_core::ports::PortError;

/// The tables of one Glue database, over the files of one lake bucket.
///
/// [`Catalog::upsert_table`] reads the table (`GetTable`) and then:
/// - creates it (`CreateTable`) when Glue answers `EntityNotFoundException`;
///   an `AlreadyExistsException` there means another writer created it
///   meanwhile, so the table is read again and handled as below;
/// - updates it (`UpdateTable`) only when what Glue has differs from the
///   [`TableDef`]: its description, table type, columns (name, type,
///   comment), partition keys, location, Parquet formats and SerDe, or one
///   of the parameters the definition sets ([`TableDef::parameters`]). A
///   page that changes nothing costs one `GetTable`;
/// - leaves it when Glue's table has a higher `tributary.schema_version`
///   than the definition ([`TableDef::yields_to`]): a slow writer never
///   undoes a newer schema. The update carries the `VersionId` it read
///   (optimistic concurrency), so two writers racing make Glue answer
///   `ConcurrentModificationException` to one, which is retried and then
///   sees the other's version.
///
/// Parameters that someone else set on the table (not `classification`,
/// `EXTERNAL`, `projection.*` or `storage.location.template`) are kept by an
/// update; a `projection.*` key the definition no longer has (a removed
/// partition key) is dropped. Names and types compare as in Hive, ignoring
/// ASCII case (Glue folds table names to lower case).
///
/// Each `UpdateTable` keeps the previous definition as a table version (no
/// `SkipArchive`): Glue allows 100,000 versions per table and 1,000,000 per
/// account, far more than schema changes, since nothing is written when
/// nothing changed.
///
/// The caller needs `glue:GetTable`, `glue:CreateTable` and
/// `glue:UpdateTable` on the catalog, the database and its tables.
/// API reference: <https://docs.aws.amazon.com/glue/latest/webapi/API_CreateTable.html>,
/// <https://docs.aws.amazon.com/glue/latest/webapi/API_UpdateTable.html>.
#[derive(Clone, Debug)]
pub struct GlueCatalog {
    client: aws_sdk_glue::Client,
    database: String,
    bucket: String,
}

impl GlueCatalog {
    /// A catalog on database `database` (Glue: 1 to 255 characters, lower
    /// case for Hive) whose tables' files are in lake bucket `bucket`, with
    /// a Glue client from the shared SDK configuration
    /// ([`super::sdk_config`]).
    pub fn new(config: &aws_config::SdkConfig, database: impl Into<String>, bucket: impl Into<String>) -> Self {
        Self::with_client(aws_sdk_glue::Client::new(config), database, bucket)
    }

    /// The same on a client built by the caller (interceptors, other
    /// settings).
    pub fn with_client(client: aws_sdk_glue::Client, database: impl Into<String>, bucket: impl Into<String>) -> Self {
        Self { client, database: database.into(), bucket: bucket.into() }
    }

    /// The Glue database.
    pub fn database(&self) -> &str {
        &self.database
    }

    /// The lake bucket the tables' locations point into.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    fn target(&self, table: &str) -> String {
        format!("table {}.{table}", self.database)
    }

    /// `GetTable`; `EntityNotFoundException` (no such table, or no such
    /// database: `CreateTable` then says which) is `None`.
    async fn get(&self, name: &str) -> Result<Option<Table>, PortError> {
        match self.client.get_table().database_name(&self.database).name(name).send().await {
            Ok(output) => Ok(output.table),
            Err(err) if err.as_service_error().is_some_and(|e| e.is_entity_not_found_exception()) => Ok(None),
            Err(err) => Err(port_error("GetTable", &self.target(name), err)),
        }
    }

    /// `CreateTable`; `false` when the table already exists.
    async fn create(&self, input: TableInput) -> Result<bool, PortError> {
        let target = self.target(&input.name);
        match self.client.create_table().database_name(&self.database).table_input(input).send().await {
            Ok(_) => Ok(true),
            Err(err) if err.as_service_error().is_some_and(|e| e.is_already_exists_exception()) => Ok(false),
            Err(err) => Err(port_error("CreateTable", &target, err)),
        }
    }
}

#[async_trait]
impl Catalog for GlueCatalog {
    /// # Errors
    /// [`PortError::Transient`] for throttling, Glue's
    /// `InternalServiceException`, `OperationTimeoutException`,
    /// `ConcurrentModificationException` (another writer updating the same
    /// table), 5xx and connection failures; [`PortError::Permanent`] for a
    /// refused definition (`InvalidInputException`: a name over 255
    /// characters, a malformed type), a missing database
    /// (`EntityNotFoundException` on `CreateTable`), `AccessDeniedException`,
    /// `ResourceNumberLimitExceededException` and the rest. Every error names
    /// `table <database>.<table>`.
    async fn upsert_table(&self, table: &TableDef) -> Result<(), PortError> {
        let target = self.target(&table.name);
        let wanted = table_input(table, &self.bucket).map_err(|err| build_error("CreateTable", &target, err))?;
        let existing = match self.get(&table.name).await? {
            Some(existing) => existing,
            None => {
                if self.create(wanted.clone()).await? {
                    tracing::info!(database = %self.database, table = %table.name, "Glue table created");
                    return Ok(());
                }
                // Another writer created it between our GetTable and CreateTable.
                self.get(&table.name).await?.ok_or_else(|| {
                    PortError::transient_msg(
                        "GetTable",
                        target.clone(),
                        "CreateTable said the table exists, GetTable that it does not",
                    )
                })?
            }
        };
        let stored_version = existing.parameters().and_then(|p| p.get(VERSION_PARAMETER)).map(String::as_str);
        if table.yields_to(stored_version) {
            tracing::debug!(database = %self.database, table = %table.name, stored_version, version = table.version,
                "Glue has a newer table schema; kept");
            return Ok(());
        }
        let Some(input) = update_for(&existing, wanted) else {
            tracing::debug!(database = %self.database, table = %table.name, "Glue table unchanged");
            return Ok(());
        };
        self.client
            .update_table()
            .database_name(&self.database)
            .table_input(input)
            .set_version_id(existing.version_id().map(str::to_string))
            .send()
            .await
            .map_err(|err| port_error("UpdateTable", &target, err))?;
        tracing::info!(database = %self.database, table = %table.name, "Glue table updated");
        Ok(())
    }
}

/// The SDK's `TableInput` of `table` in lake bucket `bucket`: what
/// [`TableDef::glue_table_input`] renders as JSON, except that an empty
/// column comment is left out.
fn table_input(table: &TableDef, bucket: &str) -> Result<TableInput, BuildError> {
    let location = table.location(bucket);
    let columns =
        table.columns.iter().map(|c| column(&c.name, &c.hive_type, c.glue_comment())).collect::<Result<Vec<_>, _>>()?;
    // Athena needs `PartitionKeys`, if only `[]` (Glue API, `TableInput`).
    let partition_keys =
        table.partition_keys.iter().map(|k| column(&k.name, PARTITION_KEY_TYPE, "")).collect::<Result<Vec<_>, _>>()?;
    let storage = StorageDescriptor::builder()
        .set_columns(Some(columns))
        .location(&location)
        .input_format(PARQUET_INPUT_FORMAT)
        .output_format(PARQUET_OUTPUT_FORMAT)
        .serde_info(SerDeInfo::builder().serialization_library(PARQUET_SERDE).build())
        .build();
    TableInput::builder()
        .name(&table.name)
        .description(&table.description)
        .table_type(EXTERNAL_TABLE)
        .set_parameters(Some(table.parameters(&location).into_iter().collect()))
        .set_partition_keys(Some(partition_keys))
        .storage_descriptor(storage)
        .build()
}

fn column(name: &str, hive_type: &str, comment: &str) -> Result<Column, BuildError> {
    Column::builder()
        .name(name)
        .r#type(hive_type)
        .set_comment((!comment.is_empty()).then(|| comment.to_string()))
        .build()
}

/// Parameters the definition owns even when it does not set them: a
/// leftover `projection.<key>.*` would describe a key that is gone.
fn owned(key: &str) -> bool {
    key.starts_with("projection.") || key == "storage.location.template"
}

/// What an update compares besides the parameters: one form for what Glue
/// has (`Table`) and what we want (`TableInput`).
#[derive(Debug)]
struct Shape<'a> {
    description: &'a str,
    table_type: &'a str,
    columns: Vec<[&'a str; 3]>,
    partition_keys: Vec<[&'a str; 3]>,
    location: &'a str,
    formats: [&'a str; 3],
}

impl<'a> Shape<'a> {
    fn new(
        description: Option<&'a str>,
        table_type: Option<&'a str>,
        storage: Option<&'a StorageDescriptor>,
        partition_keys: &'a [Column],
    ) -> Self {
        let columns = |columns: &'a [Column]| {
            columns
                .iter()
                .map(|c| [c.name(), c.r#type().unwrap_or_default(), c.comment().unwrap_or_default()])
                .collect::<Vec<_>>()
        };
        Self {
            description: description.unwrap_or_default(),
            table_type: table_type.unwrap_or_default(),
            columns: storage.map(|s| columns(s.columns())).unwrap_or_default(),
            partition_keys: columns(partition_keys),
            location: storage.and_then(StorageDescriptor::location).unwrap_or_default(),
            formats: [
                storage.and_then(StorageDescriptor::input_format).unwrap_or_default(),
                storage.and_then(StorageDescriptor::output_format).unwrap_or_default(),
                storage
                    .and_then(StorageDescriptor::serde_info)
                    .and_then(SerDeInfo::serialization_library)
                    .unwrap_or_default(),
            ],
        }
    }

    /// Equal as Hive sees it: names and types in any ASCII case.
    fn same_as(&self, other: &Shape<'_>) -> bool {
        let same_columns = |a: &[[&str; 3]], b: &[[&str; 3]]| {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|(a, b)| a[0].eq_ignore_ascii_case(b[0]) && a[1].eq_ignore_ascii_case(b[1]) && a[2] == b[2])
        };
        self.description == other.description
            && self.table_type.eq_ignore_ascii_case(other.table_type)
            && same_columns(&self.columns, &other.columns)
            && same_columns(&self.partition_keys, &other.partition_keys)
            && self.location == other.location
            && self.formats == other.formats
    }
}

/// The `UpdateTable` input that makes `existing` what `wanted` says, or
/// `None` when it already is. The input carries `wanted`'s parameters plus
/// those of `existing` that the definition does not own.
fn update_for(existing: &Table, mut wanted: TableInput) -> Option<TableInput> {
    let empty = HashMap::new();
    let have = existing.parameters().unwrap_or(&empty);
    let want = wanted.parameters().unwrap_or(&empty);
    let parameters_match = want.iter().all(|(key, value)| have.get(key) == Some(value))
        && have.keys().all(|key| !owned(key) || want.contains_key(key));
    let have_shape = Shape::new(
        existing.description(),
        existing.table_type(),
        existing.storage_descriptor(),
        existing.partition_keys(),
    );
    let want_shape =
        Shape::new(wanted.description(), wanted.table_type(), wanted.storage_descriptor(), wanted.partition_keys());
    if parameters_match && have_shape.same_as(&want_shape) {
        return None;
    }
    let kept: Vec<(String, String)> = have
        .iter()
        .filter(|(key, _)| !owned(key) && !want.contains_key(*key))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    wanted.parameters.get_or_insert_with(HashMap::new).extend(kept);
    Some(wanted)
}

#[cfg(test)]
mod tests {
    use tributary_core::catalog::{ColumnDef, PartitionKey, Projection};

    use super::*;

    fn table() -> TableDef {
        TableDef {
            name: "web_events".into(),
            prefix: "web-events/".into(),
            columns: vec![
                ColumnDef { name: "id".into(), hive_type: "bigint".into(), comment: "from `id`".into() },
                ColumnDef { name: "tags".into(), hive_type: "array<string>".into(), comment: String::new() },
            ],
            partition_keys: vec![
                PartitionKey {
                    name: "dt".into(),
                    projection: Projection::Date { first: "2026-01-01".into(), last: None },
                },
                PartitionKey { name: "hour".into(), projection: Projection::Hour },
            ],
            description: "web events".into(),
            version: 1,
        }
    }

    /// What Glue would hold after `CreateTable` of `input`.
    fn stored(input: &TableInput) -> Table {
        Table::builder()
            .name(input.name())
            .set_description(input.description.clone())
            .set_table_type(input.table_type.clone())
            .set_storage_descriptor(input.storage_descriptor.clone())
            .set_partition_keys(input.partition_keys.clone())
            .set_parameters(input.parameters.clone())
            .build()
            .expect("name set")
    }

    #[test]
    fn the_sdk_input_says_what_the_json_input_says() {
        let table = table();
        let input = table_input(&table, "lake").expect("valid");
        let json = table.glue_table_input("lake");
        assert_eq!(input.name(), json["Name"]);
        assert_eq!(input.table_type(), json["TableType"].as_str());
        let parameters: HashMap<String, String> = serde_json::from_value(json["Parameters"].clone()).expect("map");
        assert_eq!(input.parameters(), Some(&parameters));
        let storage = input.storage_descriptor().expect("storage descriptor");
        assert_eq!(storage.location(), json["StorageDescriptor"]["Location"].as_str());
        assert_eq!(storage.input_format(), json["StorageDescriptor"]["InputFormat"].as_str());
        assert_eq!(storage.output_format(), json["StorageDescriptor"]["OutputFormat"].as_str());
        let serde = storage.serde_info().and_then(SerDeInfo::serialization_library);
        assert_eq!(serde, json["StorageDescriptor"]["SerdeInfo"]["SerializationLibrary"].as_str());
        let columns: Vec<_> = storage.columns().iter().map(|c| (c.name(), c.r#type(), c.comment())).collect();
        assert_eq!(columns, [("id", Some("bigint"), Some("from `id`")), ("tags", Some("array<string>"), None)]);
        let keys: Vec<_> = input.partition_keys().iter().map(|k| (k.name(), k.r#type())).collect();
        assert_eq!(keys, [("dt", Some("string")), ("hour", Some("string"))]);
        let no_keys = TableDef { partition_keys: Vec::new(), ..table };
        assert_eq!(table_input(&no_keys, "lake").expect("valid").partition_keys, Some(Vec::new()));
    }

    #[test]
    fn an_unchanged_table_needs_no_update_whatever_the_case_of_its_names() {
        let input = table_input(&table(), "lake").expect("valid");
        assert!(update_for(&stored(&input), input.clone()).is_none());
        let mut upper = table();
        upper.name = "WEB_EVENTS".into();
        upper.columns[0].name = "ID".into();
        upper.columns[1].hive_type = "ARRAY<STRING>".into();
        let upper = table_input(&upper, "lake").expect("valid");
        assert!(update_for(&stored(&upper), input).is_none());
    }

    #[test]
    fn a_new_column_a_comment_or_a_parameter_is_an_update() {
        let before = stored(&table_input(&table(), "lake").expect("valid"));
        let mut column = table();
        column.columns.push(ColumnDef { name: "email".into(), hive_type: "string".into(), comment: String::new() });
        let mut comment = table();
        comment.columns[0].comment = "from `id`, the event id".into();
        let mut projection = table();
        projection.partition_keys[0].projection = Projection::Date { first: "2025-06-01".into(), last: None };
        let mut location = table();
        location.prefix = "events/".into();
        for changed in [column, comment, projection, location] {
            let input = table_input(&changed, "lake").expect("valid");
            assert!(update_for(&before, input).is_some(), "{changed:?}");
        }
    }

    #[test]
    fn foreign_parameters_are_kept_and_a_removed_keys_projection_dropped() {
        let mut before = stored(&table_input(&table(), "lake").expect("valid"));
        before.parameters.as_mut().expect("parameters").insert("owner_team".into(), "growth".into());
        let wanted = table_input(&table(), "lake").expect("valid");
        assert!(update_for(&before, wanted).is_none(), "a parameter set by someone else is no change");

        let mut fewer = table();
        fewer.partition_keys.pop();
        let update = update_for(&before, table_input(&fewer, "lake").expect("valid")).expect("hour removed");
        let parameters = update.parameters().expect("parameters");
        assert_eq!(parameters.get("owner_team").map(String::as_str), Some("growth"));
        assert!(parameters.keys().all(|key| !key.starts_with("projection.hour.")), "{parameters:?}");
        assert_eq!(parameters["storage.location.template"], "s3://lake/web-events/dt=${dt}");
    }
}

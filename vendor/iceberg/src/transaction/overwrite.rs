// Licensed to the Apache Software Foundation (ASF) under one
// or more contributor license agreements.  See the NOTICE file
// distributed with this work for additional information
// regarding copyright ownership.  The ASF licenses this file
// to you under the Apache License, Version 2.0 (the
// "License"); you may not use this file except in compliance
// with the License.  You may obtain a copy of the License at
//
//   http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing,
// software distributed under the License is distributed on an
// "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
// KIND, either express or implied.  See the License for the
// specific language governing permissions and limitations
// under the License.

// tributary: this whole file. An action that removes data files and adds
// others in one snapshot: `overwrite` (copy-on-write merge, replace of a
// run), `replace` (compaction: same rows) or `delete`. Upstream has no such
// action in 0.10.1 (apache/iceberg-rust #2269, PR #2185, PR #3046).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use uuid::Uuid;

use crate::error::Result;
use crate::spec::{DataFile, ManifestEntry, ManifestFile, Operation};
use crate::table::Table;
use crate::transaction::snapshot::{
    DefaultManifestProcess, SnapshotProduceOperation, SnapshotProducer,
};
use crate::transaction::{ActionCommit, TransactionAction};
use crate::{Error, ErrorKind};

/// Removes data files from the table and adds others, in one snapshot.
///
/// The new snapshot's manifests (Iceberg table spec, "Snapshots",
/// "Manifests"): the current snapshot's manifests that hold none of the
/// removed files, unchanged; those that hold some, rewritten with them as
/// `DELETED` entries and the rest as `EXISTING` (sequence numbers kept);
/// one new manifest of `ADDED` entries. The summary counts the added and
/// removed files, records and bytes.
///
/// Conflict validation: built with [`OverwriteFilesAction::validate_from_snapshot`],
/// the action refuses to commit on a table whose current snapshot is not
/// that one (another writer committed since the caller read the table:
/// the rows it chose to rewrite may have changed), with
/// [`ErrorKind::CatalogCommitConflicts`], not retryable, so the caller
/// reads the table again and plans anew. Each removed file must be live
/// in the current snapshot ([`ErrorKind::DataInvalid`] otherwise).
pub struct OverwriteFilesAction {
    operation: Operation,
    commit_uuid: Option<Uuid>,
    snapshot_properties: HashMap<String, String>,
    added_data_files: Vec<DataFile>,
    removed_paths: HashSet<String>,
    base_snapshot: Option<Option<i64>>,
}

impl OverwriteFilesAction {
    pub(crate) fn new() -> Self {
        Self {
            operation: Operation::Overwrite,
            commit_uuid: None,
            snapshot_properties: HashMap::default(),
            added_data_files: vec![],
            removed_paths: HashSet::new(),
            base_snapshot: None,
        }
    }

    /// The snapshot's operation: [`Operation::Overwrite`] (the default: rows
    /// changed), [`Operation::Replace`] (the same rows in other files:
    /// compaction), [`Operation::Delete`] (files removed, none added) or
    /// [`Operation::Append`] (files added, none removed, validated against
    /// the snapshot read like the others).
    pub fn set_operation(mut self, operation: Operation) -> Self {
        self.operation = operation;
        self
    }

    /// Adds data files to the snapshot.
    pub fn add_data_files(mut self, data_files: impl IntoIterator<Item = DataFile>) -> Self {
        self.added_data_files.extend(data_files);
        self
    }

    /// Removes the data files at these paths (as the manifests hold them).
    pub fn delete_files(mut self, paths: impl IntoIterator<Item = String>) -> Self {
        self.removed_paths.extend(paths);
        self
    }

    /// Commits only on the table as it was at `snapshot_id` (`None`: a table
    /// with no snapshot yet).
    pub fn validate_from_snapshot(mut self, snapshot_id: Option<i64>) -> Self {
        self.base_snapshot = Some(snapshot_id);
        self
    }

    /// Sets the commit UUID (the manifests' and manifest list's names).
    pub fn set_commit_uuid(mut self, commit_uuid: Uuid) -> Self {
        self.commit_uuid = Some(commit_uuid);
        self
    }

    /// Sets snapshot summary properties.
    pub fn set_snapshot_properties(mut self, snapshot_properties: HashMap<String, String>) -> Self {
        self.snapshot_properties = snapshot_properties;
        self
    }
}

#[async_trait]
impl TransactionAction for OverwriteFilesAction {
    async fn commit(self: Arc<Self>, table: &Table) -> Result<ActionCommit> {
        if let Some(base) = self.base_snapshot {
            let current = table.metadata().current_snapshot_id();
            if current != base {
                return Err(Error::new(
                    ErrorKind::CatalogCommitConflicts,
                    format!(
                        "the table changed since it was read (snapshot {base:?} then, {current:?} now); \
                         read it again and plan the overwrite anew"
                    ),
                )
                .with_retryable(false));
            }
        }
        if self.operation == Operation::Append && !self.removed_paths.is_empty() {
            return Err(Error::new(
                ErrorKind::DataInvalid,
                "an append removes no files: use overwrite, replace or delete",
            ));
        }
        if self.operation == Operation::Delete && !self.added_data_files.is_empty() {
            return Err(Error::new(
                ErrorKind::DataInvalid,
                "a delete snapshot adds no data files",
            ));
        }
        let snapshot_producer = SnapshotProducer::new(
            table,
            self.commit_uuid.unwrap_or_else(Uuid::now_v7),
            self.snapshot_properties.clone(),
            self.added_data_files.clone(),
        )
        .with_removed_files(self.removed_paths.iter().cloned());
        snapshot_producer.validate_added_data_files()?;
        snapshot_producer.validate_duplicate_files().await?;
        snapshot_producer
            .commit(
                OverwriteOperation {
                    operation: self.operation.clone(),
                },
                DefaultManifestProcess,
            )
            .await
    }
}

struct OverwriteOperation {
    operation: Operation,
}

impl SnapshotProduceOperation for OverwriteOperation {
    fn operation(&self) -> Operation {
        self.operation.clone()
    }

    async fn delete_entries(
        &self,
        _snapshot_produce: &SnapshotProducer<'_>,
    ) -> Result<Vec<ManifestEntry>> {
        Ok(vec![])
    }

    /// Every manifest of the current snapshot with a file in it (the
    /// producer rewrites those holding removed files).
    async fn existing_manifest(
        &self,
        snapshot_produce: &SnapshotProducer<'_>,
    ) -> Result<Vec<ManifestFile>> {
        let Some(snapshot) = snapshot_produce.table.metadata().current_snapshot() else {
            return Ok(vec![]);
        };
        let manifest_list = snapshot_produce
            .table
            .manifest_list_reader(snapshot)
            .load()
            .await?;
        Ok(manifest_list
            .entries()
            .iter()
            .filter(|entry| {
                entry.has_added_files() || entry.has_existing_files() || entry.has_deleted_files()
            })
            .cloned()
            .collect())
    }
}

//! Whom a page acts for, checked before anything is read or written
//! ([`authorize`]): the sender authenticated, the pipeline its own, the
//! dataset its own, and the run planned.
//!
//! See [`tributary_core::tenant`] for the model. A page names a pipeline, a
//! dataset and a claim-check key; on a shared Persist any of them could be
//! another team's:
//! - the pipeline: a sender may only name its own (a page relayed by the
//!   stack's Request acts for the pipeline's owner), so no one writes
//!   receipts into another team's run ledger or reads its claim checks
//!   (those are read only under the message's own pipeline's `_claims/`);
//! - the dataset: only its owner's pipelines write (and so widen) it;
//! - the run: with tenants, a page of a run the Orchestrator did not plan
//!   ([`ledger::is_planned`]) is refused unless its tenant may open runs
//!   itself, so no one completes a run before its vendor is called.

use contracts::PersistMessage;
use tributary_core::batch::RecordMeta;
use tributary_core::ledger;
use tributary_core::tenant::{TenantError, Tenants};

use crate::deps::Deps;
use crate::error::PersistError;

/// Checks that the page's sender may write it.
///
/// # Errors
/// [`PersistError::Tenant`] (permanent): an unknown sender, a pipeline or
/// dataset it does not own; [`PersistError::Unplanned`] (permanent): a run
/// no Orchestrator planned; store failures (transient).
pub(crate) async fn authorize(message: &PersistMessage, meta: &RecordMeta, deps: Deps<'_>) -> Result<(), PersistError> {
    let tenants: &Tenants = &deps.config.tenants;
    let acting = meta.acting_for(tenants, &message.pipeline)?;
    let dataset = &message.target.dataset;
    if !acting.owns_dataset(tenants, dataset) {
        return Err(TenantError::NotOwned {
            tenant: acting.name().to_string(),
            field: "target.dataset",
            value: dataset.clone(),
            setting: "TENANTS.<tenant>.datasets: a dataset belongs to the tenant whose pattern is the most specific",
        }
        .into());
    }
    if !acting.opens_runs() && !ledger::is_planned(deps.store, &message.pipeline, &message.run_id).await? {
        return Err(PersistError::Unplanned {
            pipeline: message.pipeline.clone(),
            run_id: message.run_id.to_string(),
            tenant: acting.name().to_string(),
        });
    }
    Ok(())
}

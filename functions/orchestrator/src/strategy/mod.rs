//! Call strategies: how a run's vendor calls are planned.
//!
//! Planning is pure: a strategy takes the spec, the run and (for count-first)
//! the probe's reply, and returns the [`RequestMessage`]s to enqueue. The
//! Orchestrator's handler does the sending. One module per variant; the one
//! `match` in [`strategy_for`] turns the spec's tagged enum into a strategy.

pub mod athena;
pub mod bind;
mod cursor;
mod paged;
pub mod run_values;
mod simple;

pub use athena::Athena;
pub use cursor::Cursor;
pub use paged::Paged;
pub use simple::Simple;

use chrono::NaiveDate;

use contracts::spec::{PipelineSpec, StrategySpec};
use contracts::{
    Destination, HttpCall, PageRef, ProbeReply, QueryMessage, QueryRow, RequestMessage, RequestMode, RunId, V1,
};

/// The run being planned and where its messages go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunContext {
    /// Run id (deterministic: from the scheduled time).
    pub run_id: RunId,
    /// Run date, the default `dt=` partition.
    pub run_date: NaiveDate,
    /// Queue address Request replies with records to (the persist queue).
    pub persist_queue: String,
    /// Queue address of Request itself: the `cursor` strategy's pages send
    /// their continuation there.
    pub request_queue: String,
    /// Queue address probe replies come back to (the orchestrator queue).
    pub orchestrator_queue: String,
    /// Queue address of the Athena function (queries go there).
    pub athena_queue: String,
    /// Topic address query rows are published to (it fans out to the
    /// orchestrator queue).
    pub query_results_topic: String,
}

/// Page requests made when they are sent, [`PageSeries::CHUNK`] at a time,
/// not held all at once: a count-first run of `max_pages` (up to 100,000)
/// pages costs the memory of one chunk, not of every message (a total of
/// 10^8 once made the Orchestrator allocate 79 GB).
#[derive(Clone)]
pub struct PageSeries {
    /// Pages in the series: indexes `0..count`.
    pub count: u32,
    make: std::sync::Arc<dyn Fn(u32) -> RequestMessage + Send + Sync>,
}

impl PageSeries {
    /// Messages built, encoded and sent together: 1,000 (100 SQS
    /// `SendMessageBatch` calls of 10).
    pub const CHUNK: u32 = 1_000;

    /// A series of `count` pages, page `index` made by `make(index)`.
    pub fn new(count: u32, make: impl Fn(u32) -> RequestMessage + Send + Sync + 'static) -> Self {
        Self { count, make: std::sync::Arc::new(make) }
    }

    /// The same series with `count` pages, page `index`'s request
    /// unchanged: a re-run keeps its first plan's page count whatever
    /// total the vendor counts now.
    pub fn with_count(&self, count: u32) -> Self {
        Self { count, make: self.make.clone() }
    }

    /// The request of page `index`.
    pub fn get(&self, index: u32) -> RequestMessage {
        (self.make)(index)
    }

    /// Every page's request, in order, each made when reached.
    pub fn iter(&self) -> impl Iterator<Item = RequestMessage> + '_ {
        (0..self.count).map(|index| self.get(index))
    }
}

impl std::fmt::Debug for PageSeries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageSeries").field("count", &self.count).finish_non_exhaustive()
    }
}

impl PartialEq for PageSeries {
    /// Same count and the same request for every page.
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count && self.iter().eq(other.iter())
    }
}

/// What a strategy wants sent: vendor calls for Request, queries for Athena.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Messages for the request queue.
    pub requests: Vec<RequestMessage>,
    /// Page requests for the request queue, made as they are sent (a
    /// count-first run's pages).
    pub pages: Option<PageSeries>,
    /// Messages for the Athena function's queue.
    pub queries: Vec<QueryMessage>,
    /// Pages the run will have, when this plan settles it (simple: 1; paged:
    /// at the probe reply). The Orchestrator records it in the run ledger.
    pub expected_pages: Option<u64>,
    /// Records the vendor announced (paged: the probe's total), recorded
    /// with the pages: a run whose pages hold fewer completes truncated
    /// (`tributary_core::ledger::Expected::records`).
    pub expected_records: Option<u64>,
}

impl Plan {
    /// Messages in the plan.
    pub fn len(&self) -> usize {
        self.requests.len() + self.queries.len() + self.pages.as_ref().map_or(0, |p| p.count as usize)
    }

    /// Every request of the plan, `requests` then `pages`, each page made
    /// when reached.
    pub fn all_requests(&self) -> impl Iterator<Item = RequestMessage> + '_ {
        self.requests.iter().cloned().chain(self.pages.iter().flat_map(PageSeries::iter))
    }

    /// Whether the plan sends nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A plan that cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The probe's total needs more pages than the spec allows.
    #[error(
        "pipeline {pipeline}: total {total} with strategy.page_size {page_size} needs {pages} pages, more than strategy.max_pages {max_pages}"
    )]
    TooManyPages {
        /// Pipeline name.
        pipeline: String,
        /// Total reported by the probe.
        total: u64,
        /// Spec's page size.
        page_size: u32,
        /// Pages needed.
        pages: u64,
        /// Spec's cap.
        max_pages: u32,
    },
    /// A query row cannot become a request (a placeholder without a value).
    #[error("pipeline {pipeline}: query row {row_index}: {problem}")]
    Row {
        /// Pipeline name.
        pipeline: String,
        /// The row's index in the result.
        row_index: u64,
        /// What is wrong, naming the template field and placeholder.
        #[source]
        problem: athena::BindError,
    },
    /// The run's values cannot be bound into the request template.
    #[error("pipeline {pipeline}: the run's values: {problem}")]
    RunValues {
        /// Pipeline name.
        pipeline: String,
        /// What is wrong, naming the template field.
        #[source]
        problem: athena::BindError,
    },
    /// A query row's index does not fit a page index (`u32`).
    #[error("pipeline {pipeline}: query row {row_index}: row index beyond 4294967295")]
    RowIndex {
        /// Pipeline name.
        pipeline: String,
        /// The row's index in the result.
        row_index: u64,
    },
    /// A message arrived that this strategy does not expect.
    #[error("pipeline {pipeline}: strategy `{strategy}` does not expect {what}")]
    Unexpected {
        /// Pipeline name.
        pipeline: String,
        /// Strategy kind.
        strategy: &'static str,
        /// What arrived.
        what: &'static str,
    },
}

/// Plans the vendor calls of a run.
pub trait CallStrategy: Send + Sync {
    /// The spec's `kind` of this strategy.
    fn kind(&self) -> &'static str;

    /// Messages to enqueue when the run starts.
    ///
    /// # Errors
    /// [`PlanError`] when the spec cannot be planned.
    fn start(&self, spec: &PipelineSpec, run: &RunContext) -> Result<Plan, PlanError>;

    /// Messages to enqueue when a count-first probe reply arrives. Only
    /// count-first strategies expect one.
    ///
    /// # Errors
    /// [`PlanError::Unexpected`] by default; strategy-specific errors otherwise.
    fn on_probe_reply(&self, spec: &PipelineSpec, _run: &RunContext, _reply: &ProbeReply) -> Result<Plan, PlanError> {
        Err(PlanError::Unexpected { pipeline: spec.pipeline.clone(), strategy: self.kind(), what: "a probe reply" })
    }

    /// Messages to enqueue when a query row arrives. Only query-driven
    /// strategies expect one.
    ///
    /// # Errors
    /// [`PlanError::Unexpected`] by default; [`PlanError::Row`] when the row
    /// cannot be bound into the template.
    fn on_row(&self, spec: &PipelineSpec, _run: &RunContext, _row: &QueryRow) -> Result<Plan, PlanError> {
        Err(PlanError::Unexpected { pipeline: spec.pipeline.clone(), strategy: self.kind(), what: "a query row" })
    }
}

/// The strategy the spec declares.
pub fn strategy_for(spec: &StrategySpec) -> Box<dyn CallStrategy + '_> {
    match spec {
        StrategySpec::Simple {} => Box::new(Simple),
        StrategySpec::Paged(paged) => Box::new(Paged(paged)),
        StrategySpec::Athena(athena) => Box::new(Athena(athena)),
        StrategySpec::Cursor(cursor) => Box::new(Cursor(cursor)),
        // A kind newer than this build (the enum is non-exhaustive for other
        // teams' sake; the spec's parser knows only the kinds above).
        _ => Box::new(Unsupported),
    }
}

/// The strategy of a spec kind this build does not know: plans nothing,
/// saying so.
struct Unsupported;

impl CallStrategy for Unsupported {
    fn kind(&self) -> &'static str {
        "unsupported"
    }

    fn start(&self, spec: &PipelineSpec, _run: &RunContext) -> Result<Plan, PlanError> {
        Err(PlanError::Unexpected {
            pipeline: spec.pipeline.clone(),
            strategy: self.kind(),
            what: "a run (this build does not know the spec's strategy kind)",
        })
    }
}

/// Incremental loading's parameter, when the spec names one:
/// `incremental.param` = `incremental.start`
/// (the Orchestrator sets `start` to the pipeline's cursor when a run
/// starts, so the value travels with the spec through probes and queries).
pub(crate) fn incremental_param(spec: &PipelineSpec) -> Option<(String, String)> {
    spec.incremental.as_ref().and_then(|i| Some((i.param.clone()?, i.start.clone())))
}

/// The template's call, with extra query parameters (and the incremental
/// start value).
pub(crate) fn call_from_template(spec: &PipelineSpec, extra: &[(String, String)]) -> HttpCall {
    let template = &spec.request;
    let mut query = template.query.clone();
    query.extend(incremental_param(spec));
    for (name, value) in extra {
        query.insert(name.clone(), value.clone());
    }
    HttpCall {
        method: template.method,
        url: template.url.clone(),
        query,
        headers: template.headers.clone(),
        body: template.body.clone(),
    }
}

/// A request whose records go to Persist.
pub(crate) fn records_request(spec: &PipelineSpec, run: &RunContext, page: PageRef, http: HttpCall) -> RequestMessage {
    RequestMessage {
        version: V1,
        pipeline: spec.pipeline.clone(),
        run_id: run.run_id.clone(),
        run_date: run.run_date,
        page: Some(page),
        http,
        policy: spec.request.policy.clone(),
        mode: RequestMode::Records {
            records_pointer: spec.request.records_pointer.clone(),
            target: spec.target.clone(),
            next: None,
            planned_total: None,
            cursor_field: spec.incremental.as_ref().map(|i| i.cursor_field.clone()),
        },
        reply_to: Destination::Queue { queue: run.persist_queue.clone() },
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    pub fn run() -> RunContext {
        RunContext {
            run_id: RunId::new("20261129T060000Z").expect("valid"),
            run_date: NaiveDate::from_ymd_opt(2026, 11, 29).expect("valid"),
            persist_queue: "persist".into(),
            request_queue: "request".into(),
            orchestrator_queue: "orchestrator".into(),
            athena_queue: "athena".into(),
            query_results_topic: "query-results".into(),
        }
    }
}

//! `cursor`: pagination without a total up front.
//!
//! The continuation lives in Request, not in the Orchestrator: `start` sends
//! page 0 (the template's call, with the first offset or page number when
//! the paging is numeric) whose `mode.next` says where the next page is
//! (`NextPage`), the page cap and the request queue. Request fetches a page,
//! forwards its records to Persist, and sends page `index + 1` to the request
//! queue itself; on the last page (no cursor, no next URL or link, or a short
//! page) it writes the run's page count to the ledger, so the run completes
//! when Persist has every page. Reaching `max_pages` ends the run there, with
//! a warning. The Orchestrator never calls the vendor and never sees the
//! pages.

use super::{CallStrategy, Plan, PlanError, RunContext, call_from_template, records_request};
use contracts::spec::{CursorSpec, PipelineSpec};
use contracts::{Continuation, NextPage, PageRef, RequestMode};

/// Continuation paging over the spec's `CursorSpec`.
#[derive(Clone, Copy, Debug)]
pub struct Cursor<'a>(pub &'a CursorSpec);

impl CallStrategy for Cursor<'_> {
    fn kind(&self) -> &'static str {
        "cursor"
    }

    fn start(&self, spec: &PipelineSpec, run: &RunContext) -> Result<Plan, PlanError> {
        // Numbered paging addresses page 0 too; the other kinds' first page
        // is the template's call.
        let first = match &self.0.next {
            NextPage::Numbered { params, size } => params.page_query(*size, 0),
            NextPage::BodyToken { .. }
            | NextPage::BodyUrl { .. }
            | NextPage::LastRecord { .. }
            | NextPage::LinkHeader {} => Vec::new(),
            // A newer kind (the enum is non-exhaustive): its first page is
            // the template's call, as for every kind but numbered pages;
            // Request refuses a kind it does not know.
            _ => Vec::new(),
        };
        let http = call_from_template(spec, &first);
        // Page 0 of a count unknown up front (0), as for Athena-driven runs.
        let mut request = records_request(spec, run, PageRef { index: 0, count: 0 }, http);
        if let RequestMode::Records { next, .. } = &mut request.mode {
            *next = Some(Box::new(Continuation {
                paging: self.0.next.clone(),
                max_pages: self.0.max_pages,
                queue: run.request_queue.clone(),
                previous_page: None,
                followed: Vec::new(),
            }));
        }
        // The page count is written by Request when it reaches the last page.
        Ok(Plan {
            requests: vec![request],
            queries: Vec::new(),
            expected_pages: None,
            pages: None,
            expected_records: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::strategy_for;
    use crate::strategy::test_support::run;
    use contracts::PageParams;

    fn spec(next: &str) -> PipelineSpec {
        PipelineSpec::from_yaml(&format!(
            "version: 1\npipeline: events\nstrategy: {{kind: cursor, next: {next}, max_pages: 7}}\nrequest: {{url: 'http://h/e', records_pointer: /items}}\ntarget: {{dataset: events}}\n"
        ))
        .expect("valid")
    }

    #[test]
    fn first_page_carries_the_continuation() {
        let spec = spec("{kind: body_token, pointer: /next, param: cursor}");
        let plan = strategy_for(&spec.strategy).start(&spec, &run()).expect("plan");
        assert_eq!(plan.expected_pages, None, "unknown until the last page");
        let [request] = plan.requests.as_slice() else { panic!("one request: {plan:?}") };
        assert_eq!(request.page, Some(PageRef { index: 0, count: 0 }));
        assert!(request.http.query.is_empty(), "the first cursor page is the template's call");
        let RequestMode::Records { next: Some(next), .. } = &request.mode else { panic!("continuation") };
        assert_eq!(next.max_pages, 7);
        assert_eq!(next.queue, "request");
        assert_eq!(
            next.paging,
            NextPage::BodyToken { pointer: "/next".into(), param: "cursor".into(), has_more: None }
        );
    }

    #[test]
    fn numeric_paging_starts_at_the_first_offset_or_page() {
        let offset = spec("{kind: offset, limit: 25}");
        let plan = strategy_for(&offset.strategy).start(&offset, &run()).expect("plan");
        let query = &plan.requests[0].http.query;
        assert_eq!((query["offset"].as_str(), query["limit"].as_str()), ("0", "25"));
        let numbered = spec("{kind: page_number, size: 10, size_param: per_page, first_page: 0}");
        let plan = strategy_for(&numbered.strategy).start(&numbered, &run()).expect("plan");
        let query = &plan.requests[0].http.query;
        assert_eq!((query["page"].as_str(), query["per_page"].as_str()), ("0", "10"));
        let params = PageParams::PageNumber { page_param: "p".into(), size_param: None, first_page: 1 };
        assert_eq!(params.page_query(10, 2), [("p".to_string(), "3".to_string())]);
    }

    #[test]
    fn bad_cursor_settings_name_the_field() {
        let err = PipelineSpec::from_yaml(
            "version: 1\npipeline: e\nstrategy: {kind: cursor, next: {kind: offset, limit: 0}}\nrequest: {url: 'http://h/e'}\ntarget: {dataset: e}\n",
        )
        .expect_err("limit 0");
        assert!(err.to_string().contains("strategy.next.limit"), "{err}");
        let err = PipelineSpec::from_yaml(
            "version: 1\npipeline: e\nstrategy: {kind: cursor, next: {kind: sideways}}\nrequest: {url: 'http://h/e'}\ntarget: {dataset: e}\n",
        )
        .expect_err("unknown kind");
        assert!(err.to_string().contains("next") && err.to_string().contains("sideways"), "{err}");
    }
}

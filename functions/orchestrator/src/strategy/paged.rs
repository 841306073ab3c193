//! `paged`: the seed's count-first strategy.
//!
//! 1. `start` sends one probe: the first page's call, in `probe` mode, whose
//!    reply goes to the orchestrator queue carrying the spec as context.
//! 2. Request reads the total at `total_pointer` and replies with a
//!    `ProbeReply`.
//! 3. `on_probe_reply` plans `ceil(total / page_size)` page requests, page
//!    `i` addressed by the spec's `params` (`PageParams::page_query`: offset
//!    `i*page_size`, or page number `first_page+i`).
//!    A total of 0 plans nothing: a successful, empty run.
//!
//! Each page carries the probe's total (`planned_total`): a vendor total
//! that drifts before a page is fetched (records added or removed) is
//! logged and counted by Request, and the plan stands: every page of the
//! probe's total is requested once, none twice; a short or empty last page
//! is fine; records past the probe's total are the next run's.
//!
//! The Orchestrator never calls the vendor itself.

use super::{CallStrategy, PageSeries, Plan, PlanError, RunContext, call_from_template, records_request};
use contracts::spec::{PagedSpec, PipelineSpec};
use contracts::{Destination, PageRef, PlannedTotal, ProbeReply, RequestMessage, RequestMode, V1};

/// Count-first paging over the spec's `PagedSpec`.
#[derive(Clone, Copy, Debug)]
pub struct Paged<'a>(pub &'a PagedSpec);

impl CallStrategy for Paged<'_> {
    fn kind(&self) -> &'static str {
        "paged"
    }

    fn start(&self, spec: &PipelineSpec, run: &RunContext) -> Result<Plan, PlanError> {
        let context = serde_json::to_value(spec).unwrap_or_default();
        let probe = RequestMessage {
            version: V1,
            pipeline: spec.pipeline.clone(),
            run_id: run.run_id.clone(),
            run_date: run.run_date,
            page: None,
            http: call_from_template(spec, &self.0.params.page_query(self.0.page_size, 0)),
            policy: spec.request.policy.clone(),
            mode: RequestMode::Probe {
                total_pointer: self.0.total_pointer.clone(),
                total_header: self.0.total_header.clone(),
                context,
                // The probe asks for page 0: its records must be there.
                records_pointer: Some(spec.request.records_pointer.clone().unwrap_or_default()),
            },
            reply_to: Destination::Queue { queue: run.orchestrator_queue.clone() },
        };
        Ok(Plan { requests: vec![probe], ..Plan::default() })
    }

    fn on_probe_reply(&self, spec: &PipelineSpec, run: &RunContext, reply: &ProbeReply) -> Result<Plan, PlanError> {
        let size = u64::from(self.0.page_size);
        let pages = reply.total.div_ceil(size);
        if pages > u64::from(self.0.max_pages) {
            return Err(PlanError::TooManyPages {
                pipeline: spec.pipeline.clone(),
                total: reply.total,
                page_size: self.0.page_size,
                pages,
                max_pages: self.0.max_pages,
            });
        }
        // pages <= max_pages: u32, so the conversion cannot fail.
        let count = u32::try_from(pages).unwrap_or(u32::MAX);
        let (paged, spec, run, total) = (self.0.clone(), spec.clone(), run.clone(), reply.total);
        let pages = PageSeries::new(count, move |index| {
            let http = call_from_template(&spec, &paged.params.page_query(paged.page_size, index));
            let mut request = records_request(&spec, &run, PageRef { index, count }, http);
            if let RequestMode::Records { planned_total, .. } = &mut request.mode {
                *planned_total = Some(PlannedTotal {
                    total_pointer: paged.total_pointer.clone(),
                    total_header: paged.total_header.clone(),
                    total,
                });
            }
            request
        });
        Ok(Plan {
            pages: Some(pages),
            expected_pages: Some(u64::from(count)),
            expected_records: Some(reply.total),
            ..Plan::default()
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::strategy::strategy_for;
    use crate::strategy::test_support::run;
    use contracts::RunId;

    pub fn reply(total: u64) -> ProbeReply {
        ProbeReply {
            version: V1,
            pipeline: "customers".into(),
            run_id: RunId::new("20261129T060000Z").expect("valid"),
            run_date: run().run_date,
            total,
            context: serde_json::Value::Null,
        }
    }

    fn spec(params: &str) -> PipelineSpec {
        PipelineSpec::from_yaml(&format!(
            "version: 1\npipeline: customers\nstrategy: {{kind: paged, page_size: 50, total_pointer: /total, max_pages: 4{params}}}\nrequest: {{url: 'http://h/c', records_pointer: /items}}\ntarget: {{dataset: customers}}\n"
        ))
        .expect("valid")
    }

    #[test]
    fn probe_goes_back_to_the_orchestrator_with_the_spec() {
        let spec = spec("");
        let plan = strategy_for(&spec.strategy).start(&spec, &run()).expect("plan").requests;
        assert_eq!(plan.len(), 1);
        let probe = &plan[0];
        assert_eq!(probe.page, None);
        assert_eq!(probe.reply_to, Destination::Queue { queue: "orchestrator".into() });
        let RequestMode::Probe { total_pointer, context, .. } = &probe.mode else { panic!("probe mode") };
        assert_eq!(total_pointer, "/total");
        assert_eq!(PipelineSpec::from_value(context.clone()).expect("spec in context"), spec);
        assert_eq!(probe.http.query.get("offset").map(String::as_str), Some("0"));
    }

    #[test]
    fn plans_one_request_per_page_with_offsets() {
        let spec = spec("");
        let strategy = strategy_for(&spec.strategy);
        let plan: Vec<_> = strategy.on_probe_reply(&spec, &run(), &reply(101)).expect("plan").all_requests().collect();
        assert_eq!(plan.len(), 3);
        let offsets: Vec<_> = plan.iter().map(|m| m.http.query["offset"].clone()).collect();
        assert_eq!(offsets, ["0", "50", "100"]);
        assert!(plan.iter().all(|m| m.http.query["limit"] == "50"));
        let pages: Vec<_> = plan.iter().map(|m| m.page.expect("page")).collect();
        assert_eq!(pages, [0, 1, 2].map(|index| PageRef { index, count: 3 }));
        assert!(plan.iter().all(|m| m.reply_to == Destination::Queue { queue: "persist".into() }));
    }

    #[test]
    fn exact_multiple_and_zero_totals() {
        let spec = spec("");
        let strategy = strategy_for(&spec.strategy);
        assert_eq!(strategy.on_probe_reply(&spec, &run(), &reply(100)).expect("plan").len(), 2);
        assert!(strategy.on_probe_reply(&spec, &run(), &reply(0)).expect("plan").is_empty());
    }

    #[test]
    fn page_number_params() {
        let spec = spec(", params: {style: page_number, page_param: p, size_param: n, first_page: 0}");
        let plan: Vec<_> = strategy_for(&spec.strategy)
            .on_probe_reply(&spec, &run(), &reply(120))
            .expect("plan")
            .all_requests()
            .collect();
        let pages: Vec<_> = plan.iter().map(|m| (m.http.query["p"].clone(), m.http.query["n"].clone())).collect();
        assert_eq!(pages, [("0", "50"), ("1", "50"), ("2", "50")].map(|(a, b)| (a.to_string(), b.to_string())));
    }

    #[test]
    fn a_plan_of_100k_pages_is_made_page_by_page_as_it_is_sent() {
        let spec = PipelineSpec::from_yaml(
            "version: 1\npipeline: customers\nstrategy: {kind: paged, page_size: 100, total_pointer: /total, max_pages: 100000}\nrequest: {url: 'http://h/c', records_pointer: /items}\ntarget: {dataset: customers}\n",
        )
        .expect("valid");
        let plan = strategy_for(&spec.strategy).on_probe_reply(&spec, &run(), &reply(10_000_000)).expect("plan");
        assert_eq!((plan.len(), plan.expected_pages), (100_000, Some(100_000)));
        assert!(plan.requests.is_empty(), "no page is held in the plan");
        let last = plan.pages.as_ref().expect("a series").get(99_999);
        assert_eq!(last.page, Some(PageRef { index: 99_999, count: 100_000 }));
        assert_eq!(last.http.query["offset"], "9999900");
    }

    #[test]
    fn too_many_pages_is_a_clear_error() {
        let spec = spec("");
        let err = strategy_for(&spec.strategy).on_probe_reply(&spec, &run(), &reply(201)).expect_err("over cap");
        let text = err.to_string();
        assert!(text.contains("needs 5 pages") && text.contains("strategy.max_pages 4"), "{text}");
    }
}

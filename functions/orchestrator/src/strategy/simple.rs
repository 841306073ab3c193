//! `simple`: one call, one page.

use super::{CallStrategy, Plan, PlanError, RunContext, call_from_template, records_request};
use contracts::PageRef;
use contracts::spec::PipelineSpec;

/// One `RequestMessage` for the template's call, as page 0 of 1.
#[derive(Clone, Copy, Debug)]
pub struct Simple;

impl CallStrategy for Simple {
    fn kind(&self) -> &'static str {
        "simple"
    }

    fn start(&self, spec: &PipelineSpec, run: &RunContext) -> Result<Plan, PlanError> {
        let request = records_request(spec, run, PageRef::SINGLE, call_from_template(spec, &[]));
        Ok(Plan { requests: vec![request], expected_pages: Some(1), ..Plan::default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::test_support::run;
    use contracts::{Destination, RequestMode};

    #[test]
    fn plans_one_request_to_persist() {
        let spec = PipelineSpec::from_yaml(
            "version: 1\npipeline: fx\nstrategy: {kind: simple}\nrequest: {url: 'http://h/rates?x=1', query: {base: EUR}, records_pointer: /rates}\ntarget: {dataset: fx}\n",
        )
        .expect("valid");
        let plan = Simple.start(&spec, &run()).expect("plan").requests;
        assert_eq!(plan.len(), 1);
        let msg = &plan[0];
        assert_eq!(msg.page, Some(PageRef { index: 0, count: 1 }));
        assert_eq!(msg.http.query.get("base").map(String::as_str), Some("EUR"));
        assert_eq!(msg.reply_to, Destination::Queue { queue: "persist".into() });
        assert!(matches!(&msg.mode, RequestMode::Records { records_pointer: Some(p), .. } if p == "/rates"));
        assert!(Simple.on_probe_reply(&spec, &run(), &crate::strategy::paged::tests::reply(3)).is_err());
    }
}

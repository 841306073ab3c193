//! A candidate spec proved as a run would use it: the Orchestrator's own
//! strategy plans the run, Request's own handler fetches the first two
//! pages (a count-first probe first), and the records it forwards are
//! compared: page 2 must hold records page 1 does not.

use serde_json::Value;

use contracts::spec::{PipelineSpec, StrategySpec};
use contracts::{Payload, PersistMessage, ProbeReply, RequestMessage, RequestMode, RunId};
use orchestrator::strategy::{RunContext, strategy_for};
use tributary_core::topology;

use super::call::Caller;

/// One page a proof fetched.
#[derive(Clone, Debug)]
pub struct Page {
    /// Its call, as logs show it (query kept, credentials masked).
    pub call: String,
    /// Its records.
    pub records: Vec<Value>,
}

/// What proving a spec showed.
#[derive(Clone, Debug)]
pub enum Verdict {
    /// Page 2 holds records page 1 does not.
    Proven,
    /// Nothing contradicts the spec, but there was no page 2 to fetch.
    Unproven(String),
    /// Page 2 holds page 1's records again.
    Repeats(String),
    /// The spec does not work, and why.
    Failed(String),
}

/// A spec's proof: its pages, the count-first total, the verdict.
#[derive(Clone, Debug)]
pub struct Proof {
    /// Pages fetched (at most two).
    pub pages: Vec<Page>,
    /// The total a count-first probe read.
    pub total: Option<u64>,
    /// What they show.
    pub verdict: Verdict,
}

/// Fetches the first two pages of `spec` as a run would.
/// `more_expected`: page 1 said more pages follow, so a run that ends
/// after one page is a failure, not a single page.
pub async fn prove(caller: &Caller, spec: &PipelineSpec, more_expected: bool) -> Proof {
    let mut proof = Proof { pages: Vec::new(), total: None, verdict: Verdict::Proven };
    if let Err(reason) = fetch_pages(caller, spec, &mut proof).await {
        proof.verdict = Verdict::Failed(reason);
        return proof;
    }
    proof.verdict = match judge(&proof.pages, more_expected) {
        // One call by design: nothing says whether the vendor has more.
        Verdict::Unproven(_) if matches!(spec.strategy, contracts::spec::StrategySpec::Simple {}) => {
            Verdict::Unproven("a simple run makes one call, so there is no page 2 to compare".into())
        }
        verdict => verdict,
    };
    proof
}

/// The run a proof plans: now, with the local topology's queues.
fn run_context() -> RunContext {
    let now = chrono::Utc::now();
    RunContext {
        run_id: RunId::from_time(now),
        run_date: now.date_naive(),
        persist_queue: topology::PERSIST_QUEUE.into(),
        request_queue: topology::REQUEST_QUEUE.into(),
        orchestrator_queue: topology::ORCHESTRATOR_QUEUE.into(),
        athena_queue: topology::ATHENA_QUEUE.into(),
        query_results_topic: topology::QUERY_RESULTS_TOPIC.into(),
    }
}

/// Plans the run and fetches its first two pages into `proof`.
async fn fetch_pages(caller: &Caller, spec: &PipelineSpec, proof: &mut Proof) -> Result<(), String> {
    caller.clear();
    let run = run_context();
    let strategy = strategy_for(&spec.strategy);
    let plan = strategy.start(spec, &run).map_err(|err| err.to_string())?;
    let first = plan.requests.into_iter().next().ok_or("the strategy planned no call")?;
    match &spec.strategy {
        StrategySpec::Paged(_) => {
            handle(caller, first).await?;
            let reply =
                caller.take(topology::ORCHESTRATOR_QUEUE).into_iter().next().ok_or("the probe sent no reply")?;
            let reply: ProbeReply = contracts::decode_str(&reply).map_err(|err| err.to_string())?;
            proof.total = Some(reply.total);
            let plan = strategy.on_probe_reply(spec, &run, &reply).map_err(|err| err.to_string())?;
            for index in 0..plan.pages.as_ref().map_or(0, |pages| pages.count.min(2)) {
                let Some(message) = plan.pages.as_ref().map(|pages| pages.get(index)) else { break };
                proof.pages.push(page(caller, message).await?);
            }
        }
        StrategySpec::Cursor(_) => {
            let mut next = Some(first);
            while let Some(message) = next.take().filter(|_| proof.pages.len() < 2) {
                proof.pages.push(page(caller, message).await?);
                next =
                    caller.take(topology::REQUEST_QUEUE).into_iter().next().map(|body| following(&body)).transpose()?;
            }
        }
        _ => proof.pages.push(page(caller, first).await?),
    }
    Ok(())
}

/// The next page's message a cursor page sent. Its digest of the page
/// before is dropped, so a vendor that serves page 1 again is seen to
/// (Request would end the run there quietly).
fn following(body: &str) -> Result<RequestMessage, String> {
    let mut message: RequestMessage = contracts::decode_str(body).map_err(|err| err.to_string())?;
    if let RequestMode::Records { next: Some(next), .. } = &mut message.mode {
        next.previous_page = None;
    }
    Ok(message)
}

/// Handles `message`; its error's text, on one line.
async fn handle(caller: &Caller, message: RequestMessage) -> Result<(), String> {
    caller.handle(message).await.map(|_| ()).map_err(|err| one_line(&err.to_string()))
}

/// Handles a page's message and reads the records it forwarded.
async fn page(caller: &Caller, message: RequestMessage) -> Result<Page, String> {
    let mut url = message.http.url.clone();
    if !message.http.query.is_empty() {
        url.query_pairs_mut().extend_pairs(&message.http.query);
    }
    let call = format!("{} {}", message.http.method, contracts::redacted_url(&url));
    handle(caller, message).await?;
    let mut records = Vec::new();
    for body in caller.take(topology::PERSIST_QUEUE) {
        let persisted: PersistMessage = contracts::decode_str(&body).map_err(|err| err.to_string())?;
        let text = match persisted.payload {
            Payload::Inline { records } => records.as_str().to_string(),
            Payload::Object { key, .. } => {
                let bytes = caller.object(&key).await.map_err(|err| err.to_string())?;
                String::from_utf8_lossy(&bytes).into_owned()
            }
        };
        let page: Vec<Value> = serde_json::from_str(&text)
            .or_else(|err| {
                super::representable(text.as_bytes()).and_then(|value| serde_json::from_value(value).ok()).ok_or(err)
            })
            .map_err(|err| err.to_string())?;
        records.extend(page);
    }
    Ok(Page { call, records })
}

/// What the pages show of the spec.
fn judge(pages: &[Page], more_expected: bool) -> Verdict {
    let Some(first) = pages.first() else { return Verdict::Failed("no page was fetched".into()) };
    if first.records.is_empty() {
        return Verdict::Failed(format!("its first page ({}) holds no records", first.call));
    }
    let Some(second) = pages.get(1).filter(|page| !page.records.is_empty()) else {
        return match (more_expected, pages.get(1)) {
            (true, Some(second)) => {
                Verdict::Failed(format!("page 2 ({}) is empty although page 1 says more follow", second.call))
            }
            (true, None) => Verdict::Failed("a run ends after page 1 with it, although page 1 says more follow".into()),
            (false, _) => Verdict::Unproven("the vendor has one page now, so there was no page 2 to fetch".into()),
        };
    };
    if second.records == first.records {
        return Verdict::Repeats(format!("page 2 ({}) repeats page 1", second.call));
    }
    let again = second.records.iter().filter(|record| first.records.contains(record)).count();
    if again > 0 {
        return Verdict::Failed(format!(
            "page 2 ({}) holds {again} of page 1's {} records again: its pages overlap",
            second.call,
            first.records.len()
        ));
    }
    Verdict::Proven
}

/// `text` on one line.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn page(ids: &[u32]) -> Page {
        Page { call: "GET http://v.test/x".into(), records: ids.iter().map(|id| json!({"id": id})).collect() }
    }

    #[test]
    fn page_two_must_hold_other_records() {
        assert!(matches!(judge(&[page(&[1, 2]), page(&[3, 4])], true), Verdict::Proven));
        assert!(matches!(judge(&[page(&[1, 2]), page(&[1, 2])], true), Verdict::Repeats(_)));
        assert!(
            matches!(judge(&[page(&[1, 2]), page(&[2, 3])], true), Verdict::Failed(why) if why.contains("1 of page 1's 2"))
        );
        assert!(matches!(judge(&[page(&[1, 2]), page(&[])], true), Verdict::Failed(_)));
        assert!(matches!(judge(&[page(&[1, 2])], true), Verdict::Failed(_)));
        assert!(matches!(judge(&[page(&[1, 2])], false), Verdict::Unproven(_)));
        assert!(matches!(judge(&[page(&[])], false), Verdict::Failed(_)));
    }
}

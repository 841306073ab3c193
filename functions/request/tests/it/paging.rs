//! Every pagination kind of the `cursor` strategy, end to end through
//! Request: each page's records go to Persist, the next page's message goes
//! to the request queue (Request sends it itself), and the last page writes
//! the run's page count to the ledger. The server counts every call.

use crate::common;

use common::{Harness, Log, PERSIST_QUEUE, REQUEST_QUEUE, reply};
use contracts::{self, PageRef, Payload, PersistMessage, RequestMessage, RunId};
use serde_json::{Value, json};
use tributary_core::ports::ObjectStore;

/// Records 0..TOTAL, served three per page by every kind.
const TOTAL: u32 = 7;
const SIZE: u32 = 3;

fn records(from: u32) -> Vec<Value> {
    records_n(from, SIZE)
}

fn records_n(from: u32, n: u32) -> Vec<Value> {
    (from..from.saturating_add(n).min(TOTAL)).map(|id| json!({"id": id})).collect()
}

async fn vendor() -> (std::net::SocketAddr, Log) {
    common::recorder(|_, seen| {
        let number = |name: &str| seen.query(name).and_then(|v| v.parse::<u32>().ok());
        let path = seen.uri.split('?').next().unwrap_or_default();
        match path {
            "/token" => {
                let from = seen.query("cursor").map_or(0, |c| c.trim_start_matches('c').parse().unwrap_or(0));
                let next = (from + SIZE < TOTAL).then(|| format!("c{}", from + SIZE));
                reply(200, &[], json!({"items": records(from), "meta": {"next_cursor": next}}))
            }
            "/url" => {
                let from = number("after").unwrap_or(0);
                let next = (from + SIZE < TOTAL).then(|| format!("/url?after={}", from + SIZE));
                reply(200, &[], json!({"items": records(from), "links": {"next": next}}))
            }
            "/link" => {
                let from = number("start").unwrap_or(0);
                let next = format!("</link?start={}>; rel=\"next\", </link?start=0>; rel=\"first\"", from + SIZE);
                let headers: Vec<(&str, &str)> =
                    if from + SIZE < TOTAL { vec![("link", next.as_str())] } else { vec![] };
                reply(200, &headers, json!({"items": records(from)}))
            }
            "/offset" => {
                let items = records_n(number("offset").unwrap_or(0), number("limit").unwrap_or(SIZE));
                reply(200, &[], json!({"items": items}))
            }
            "/pages" => reply(200, &[], json!({"items": records((number("page").unwrap_or(1) - 1) * SIZE)})),
            // 25 records, served at most 10 a page whatever the limit asks
            // (`/capped`), or 40 records served as asked (`/forty`).
            "/capped" | "/forty" => {
                let (total, cap) = if path == "/capped" { (25, 10) } else { (40, u32::MAX) };
                let (offset, limit) = (number("offset").unwrap_or(0), number("limit").unwrap_or(SIZE));
                let items: Vec<Value> =
                    (offset..offset.saturating_add(limit.min(cap)).min(total)).map(|id| json!({"id": id})).collect();
                reply(200, &[], json!({"items": items}))
            }
            // Stripe: `starting_after` the last record's id, `has_more`.
            "/stripe" => {
                let from = number("starting_after").map_or(0, |id| id + 1);
                reply(200, &[], json!({"items": records(from), "has_more": from + SIZE < TOTAL}))
            }
            // `has_more: true` with the token under another key than the spec says.
            "/more_no_token" => reply(200, &[], json!({"items": records(0), "has_more": true, "next_page": "c3"})),
            // json-server 1.0: past the end, the last page again, in full.
            "/repeats" => {
                let page = number("page").unwrap_or(1).min(2);
                reply(200, &[], json!({"items": records_n((page - 1) * SIZE, SIZE)}))
            }
            // An offset API whose parameter is not `offset`: page 0 on every call.
            "/ignores_offset" => reply(200, &[], json!({"items": records(0)})),
            // json-server 1.0 with 20 records: pages of `limit`, and past the
            // last page the last page again.
            "/json_server" => {
                let (limit, offset) = (number("limit").unwrap_or(SIZE).max(1), number("offset").unwrap_or(0));
                let last = 19 / limit * limit;
                let from = offset.min(last);
                let items: Vec<Value> = (from..(from + limit).min(20)).map(|id| json!({"id": id})).collect();
                reply(200, &[], json!({"items": items}))
            }
            // A cursor API that ignores the cursor `c3`: page 0's records
            // again, with a next page still offered.
            "/ignores_cursor" => {
                let from = seen.query("cursor").map_or(0, |c| c.trim_start_matches('c').parse().unwrap_or(0));
                let next = (from + SIZE < TOTAL).then(|| format!("c{}", from + SIZE));
                reply(
                    200,
                    &[],
                    json!({"items": records(if from == 3 { 0 } else { from }), "meta": {"next_cursor": next}}),
                )
            }
            // A cursor that cycles: after the last page, back to `back_to`;
            // with `empty`, every page is empty.
            "/cycle" => {
                let from = seen.query("cursor").map_or(0, |c| c.trim_start_matches('c').parse().unwrap_or(0));
                let back_to = seen.query("back_to").unwrap_or_else(|| "c3".into());
                let next = if from + SIZE < TOTAL { format!("c{}", from + SIZE) } else { back_to };
                let items = if seen.query("empty").is_some() { Vec::new() } else { records(from) };
                reply(200, &[], json!({"items": items, "meta": {"next_cursor": next}}))
            }
            // A `body_url` API whose page 1 links to itself while pages
            // remain past it.
            "/self_url" => {
                let from = number("after").unwrap_or(0);
                let next = if from == SIZE {
                    format!("/self_url?after={SIZE}")
                } else {
                    format!("/self_url?after={}", from + SIZE)
                };
                reply(200, &[], json!({"items": records(from), "links": {"next": next}}))
            }
            // A cursor API that ends with `"items": null` (an empty list
            // sent as null), and one whose null comes with `errors`
            // (GraphQL's failure shape).
            "/null_end" => {
                let from = seen.query("cursor").map_or(0, |c| c.trim_start_matches('c').parse().unwrap_or(0));
                let items = if from < TOTAL { json!(records(from)) } else { Value::Null };
                let next = (from < TOTAL).then(|| format!("c{}", from + SIZE));
                reply(200, &[], json!({"items": items, "meta": {"next_cursor": next}}))
            }
            "/null_errors" => reply(200, &[], json!({"items": null, "errors": [{"message": "rate limit"}]})),
            "/error_body" => reply(200, &[], json!({"error": "internal vendor error, try later"})),
            _ => reply(404, &[], json!({})),
        }
    })
    .await
}

/// Page 0 of a cursor run over `path` with `next`, as the Orchestrator plans it.
fn first_page(addr: std::net::SocketAddr, path: &str, query: Value, next: Value, max_pages: u32) -> RequestMessage {
    contracts::decode(json!({
        "version": 1, "pipeline": "events", "run_id": "20261129T060000Z", "run_date": "2026-11-29",
        "page": {"index": 0, "count": 0},
        "http": {"url": format!("http://{addr}{path}"), "query": query},
        "policy": {"allow": {"loopback": true}},
        "mode": {"kind": "records", "records_pointer": "/items", "target": {"dataset": "events"},
                 "next": {"paging": next, "max_pages": max_pages, "queue": REQUEST_QUEUE}},
        "reply_to": {"kind": "queue", "queue": PERSIST_QUEUE},
    }))
    .expect("valid RequestMessage")
}

/// Handles `first`, then every continuation Request sends, like the
/// request queue's event source; returns the pages Persist got (index,
/// record ids) and the ledger's expected page count.
async fn run(harness: &Harness, first: RequestMessage) -> (Vec<(u32, Vec<u64>)>, u64) {
    let mut next = Some(first);
    while let Some(message) = next.take() {
        request::handle_message(message, harness.deps()).await.expect("page handled");
        let mut sent = harness.drain(REQUEST_QUEUE);
        assert!(sent.len() <= 1, "one continuation per page");
        next = sent.pop().map(|v| contracts::decode(v).expect("continuation"));
    }
    let pages = harness
        .drain(PERSIST_QUEUE)
        .into_iter()
        .map(|v| {
            let persist: PersistMessage = contracts::decode(v).expect("PersistMessage");
            let Payload::Inline { records } = persist.payload else { panic!("inline") };
            let records = records.to_values().expect("records");
            assert_eq!(persist.page.count, 0, "count unknown up front");
            (persist.page.index, records.iter().map(|r| r["id"].as_u64().expect("id")).collect())
        })
        .collect();
    let run_id = RunId::new("20261129T060000Z").expect("run id");
    let expected =
        harness.store.get(&tributary_core::keys::expected_key("events", &run_id)).await.expect("expected.json");
    let expected: Value = serde_json::from_slice(&expected).expect("json");
    (pages, expected["pages"].as_u64().expect("pages"))
}

fn all_pages() -> Vec<(u32, Vec<u64>)> {
    vec![(0, vec![0, 1, 2]), (1, vec![3, 4, 5]), (2, vec![6])]
}

fn uris(log: &Log) -> Vec<String> {
    log.lock().expect("log").iter().map(|s| s.uri.clone()).collect()
}

#[tokio::test]
async fn body_token_cursor() {
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let next = json!({"kind": "body_token", "pointer": "/meta/next_cursor", "param": "cursor"});
    let (pages, expected) = run(&harness, first_page(addr, "/token", json!({}), next, 100)).await;
    assert_eq!((pages, expected), (all_pages(), 3));
    assert_eq!(uris(&log), ["/token", "/token?cursor=c3", "/token?cursor=c6"]);
}

#[tokio::test]
async fn next_url_in_the_body() {
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let next = json!({"kind": "body_url", "pointer": "/links/next"});
    let (pages, expected) = run(&harness, first_page(addr, "/url", json!({}), next, 100)).await;
    assert_eq!((pages, expected), (all_pages(), 3));
    assert_eq!(uris(&log), ["/url", "/url?after=3", "/url?after=6"]);
}

#[tokio::test]
async fn link_header_rel_next() {
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let (pages, expected) =
        run(&harness, first_page(addr, "/link", json!({}), json!({"kind": "link_header"}), 100)).await;
    assert_eq!((pages, expected), (all_pages(), 3));
    assert_eq!(uris(&log), ["/link", "/link?start=3", "/link?start=6"]);
}

#[tokio::test]
async fn stripe_style_starting_after_the_last_record_while_has_more() {
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let next = json!({"kind": "last_record", "pointer": "/id", "param": "starting_after", "has_more": "/has_more"});
    let (pages, expected) = run(&harness, first_page(addr, "/stripe", json!({"limit": "3"}), next, 100)).await;
    assert_eq!((pages, expected), (all_pages(), 3));
    assert_eq!(uris(&log), ["/stripe?limit=3", "/stripe?limit=3&starting_after=2", "/stripe?limit=3&starting_after=5"]);
}

#[tokio::test]
async fn has_more_true_without_a_token_fails_naming_the_pointers() {
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let next = json!({"kind": "body_token", "pointer": "/next_cursor", "param": "cursor", "has_more": "/has_more"});
    let err = request::handle_message(first_page(addr, "/more_no_token", json!({}), next, 100), harness.deps())
        .await
        .expect_err("has_more without a token");
    let text = err.to_string();
    assert!(text.contains("strategy.next.has_more") && text.contains("/next_cursor"), "{text}");
    assert!(tributary_core::batch::RecordError::is_permanent(&err));
    assert!(harness.drain(PERSIST_QUEUE).is_empty(), "nothing persisted as if the run were complete");
    assert_eq!(uris(&log).len(), 1);
}

#[tokio::test]
async fn offset_limit_stops_on_a_short_page() {
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let next = json!({"kind": "offset", "limit": SIZE});
    let query = json!({"offset": "0", "limit": "3"});
    let (pages, expected) = run(&harness, first_page(addr, "/offset", query, next, 100)).await;
    assert_eq!((pages, expected), (all_pages(), 3));
    assert_eq!(uris(&log), ["/offset?limit=3&offset=0", "/offset?limit=3&offset=3", "/offset?limit=3&offset=6"]);
}

#[tokio::test]
async fn page_number_stops_on_a_short_page() {
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let next = json!({"kind": "page_number", "page_param": "page", "size": SIZE});
    let (pages, expected) = run(&harness, first_page(addr, "/pages", json!({"page": "1"}), next, 100)).await;
    assert_eq!((pages, expected), (all_pages(), 3));
    assert_eq!(uris(&log), ["/pages?page=1", "/pages?page=2", "/pages?page=3"]);
}

/// A vendor that caps its pages below the page size asked: its first page
/// is short, and "a short page ends it" would have ended the run there as
/// a success with 10 of 25 records (a trial). A short first page of a
/// count vendors cap at is followed by one call with that count as the
/// size, and the run pages on by it.
#[tokio::test]
async fn a_vendor_that_caps_its_pages_is_paged_by_its_cap() {
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let next = json!({"kind": "offset", "limit": 50});
    let (pages, expected) =
        run(&harness, first_page(addr, "/capped", json!({"offset": "0", "limit": "50"}), next, 100)).await;
    let ids: Vec<u64> = pages.iter().flat_map(|(_, ids)| ids.clone()).collect();
    assert_eq!(ids, (0..25).collect::<Vec<u64>>(), "every record once");
    assert_eq!(expected, 3);
    assert_eq!(uris(&log), ["/capped?limit=50&offset=0", "/capped?limit=10&offset=10", "/capped?limit=10&offset=20"]);

    // 40 records for a size of 100: one probe more, empty, and the run
    // ends with its 40.
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let next = json!({"kind": "offset", "limit": 100});
    let (pages, expected) =
        run(&harness, first_page(addr, "/forty", json!({"offset": "0", "limit": "100"}), next, 100)).await;
    let ids: Vec<u64> = pages.iter().flat_map(|(_, ids)| ids.clone()).collect();
    assert_eq!((ids, expected), ((0..40).collect::<Vec<u64>>(), 2));
    assert_eq!(uris(&log), ["/forty?limit=100&offset=0", "/forty?limit=40&offset=40"]);
}

#[tokio::test]
async fn a_full_last_page_needs_one_empty_page_to_end() {
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    // 7 records, pages of 7: page 0 is full, page 1 comes back empty.
    let next = json!({"kind": "offset", "limit": 7});
    let (pages, expected) =
        run(&harness, first_page(addr, "/offset", json!({"offset": "0", "limit": "7"}), next, 100)).await;
    let ids: Vec<u32> = pages.iter().map(|(index, _)| *index).collect();
    assert_eq!((ids, expected), (vec![0, 1], 2), "the empty page is persisted as an empty page");
    assert_eq!(uris(&log), ["/offset?limit=7&offset=0", "/offset?limit=7&offset=7"]);
}

#[tokio::test]
async fn the_page_cap_ends_the_run() {
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let next = json!({"kind": "body_token", "pointer": "/meta/next_cursor", "param": "cursor"});
    let (pages, expected) = run(&harness, first_page(addr, "/token", json!({}), next, 2)).await;
    assert_eq!(pages, all_pages()[..2].to_vec());
    assert_eq!(expected, 2, "the run completes with the pages it had");
    assert_eq!(uris(&log).len(), 2);
}

#[tokio::test]
async fn a_paged_page_whose_total_drifted_is_still_fetched_once() {
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let message: RequestMessage = contracts::decode(json!({
        "version": 1, "pipeline": "events", "run_id": "20261129T060000Z", "run_date": "2026-11-29",
        "page": {"index": 2, "count": 3},
        "http": {"url": format!("http://{addr}/offset"), "query": {"offset": "6", "limit": "3"}},
        "policy": {"allow": {"loopback": true}},
        "mode": {"kind": "records", "records_pointer": "/items", "target": {"dataset": "events"},
                 "planned_total": {"total_pointer": "/total", "total": 9}},
        "reply_to": {"kind": "queue", "queue": PERSIST_QUEUE},
    }))
    .expect("message");
    let outcome = request::handle_message(message, harness.deps()).await.expect("short last page is fine");
    assert_eq!(outcome, request::Outcome::Records { count: 1, claim_check: false });
    assert_eq!(uris(&log).len(), 1);
    assert!(harness.drain(REQUEST_QUEUE).is_empty(), "a count-first page sends no continuation");
    let persist: PersistMessage = contracts::decode(harness.drain(PERSIST_QUEUE).remove(0)).expect("persist");
    assert_eq!(persist.page, PageRef { index: 2, count: 3 });
}

#[tokio::test]
async fn a_page_that_repeats_the_page_before_ends_the_run_as_an_empty_last_page() {
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    // Full pages forever: pages 1 and 2, then page 2 again for 3, 4, …
    let next = json!({"kind": "page_number", "size": SIZE});
    let (pages, expected) = run(&harness, first_page(addr, "/repeats", json!({"page": "1"}), next, 1000)).await;
    // The repeat's records are not persisted: it goes to Persist empty, as
    // the run's last page, so Persist's receipt of it completes the run.
    assert_eq!(pages, [(0, vec![0, 1, 2]), (1, vec![3, 4, 5]), (2, vec![])]);
    assert_eq!(expected, 3, "the two distinct pages and the empty last one");
    assert_eq!(
        uris(&log),
        ["/repeats?page=1", "/repeats?page=2", "/repeats?page=3"],
        "one call past the end, not 1,000"
    );
    // Page numbers past the end: the vendor's way of saying so, not a truncation.
    assert_eq!(expected_record(&harness).await["truncated"], Value::Null);
}

/// A trial: a cursor vendor answered page 1 with page 0's records and a
/// next page still offered; the run ended there as a success. It ends
/// there truncated, saying why (records past it were not fetched).
#[tokio::test]
async fn a_repeated_page_with_a_next_page_still_offered_ends_the_run_truncated() {
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let next = json!({"kind": "body_token", "pointer": "/meta/next_cursor", "param": "cursor"});
    let (pages, expected) = run(&harness, first_page(addr, "/ignores_cursor", json!({}), next, 1000)).await;
    assert_eq!(pages, [(0, vec![0, 1, 2]), (1, vec![])]);
    assert_eq!((expected, uris(&log).len()), (2, 2));
    let reason = expected_record(&harness).await["truncated"].as_str().expect("truncated").to_string();
    assert!(
        reason
            .contains("page 1 (the 2nd) holds exactly the records of page 0 while the vendor still offers a next page")
            && reason.contains("records past them were not fetched"),
        "{reason}"
    );
}

/// A trial: a vendor whose offset parameter has another name serves page 0
/// on every call; the run ended complete with 10 of 50 records. Page 1
/// repeating a full page 0 ends the run truncated, saying why.
#[tokio::test]
async fn offsets_the_vendor_ignores_end_the_run_truncated() {
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let next = json!({"kind": "offset", "limit": SIZE});
    let query = json!({"offset": "0", "limit": "3"});
    let (pages, expected) = run(&harness, first_page(addr, "/ignores_offset", query, next, 100)).await;
    assert_eq!(pages, [(0, vec![0, 1, 2]), (1, vec![])]);
    assert_eq!((expected, uris(&log).len()), (2, 2));
    let reason = expected_record(&harness).await["truncated"].as_str().expect("truncated").to_string();
    assert!(
        reason.contains("page 1 holds exactly the records of page 0: the vendor ignored the offset or page number"),
        "{reason}"
    );
}

/// With the cap check: a json-server of 20 records asked for 50 serves a
/// short page 0 (20, a count vendors cap at), the check asks for page 1
/// with 20, and json-server serves its last page again. That is the end of
/// its data, not an ignored offset: the run is complete, not truncated.
#[tokio::test]
async fn a_repeat_of_a_short_page_0_after_the_cap_check_ends_the_run_complete() {
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let next = json!({"kind": "offset", "limit": 50});
    let query = json!({"offset": "0", "limit": "50"});
    let (pages, expected) = run(&harness, first_page(addr, "/json_server", query, next, 100)).await;
    assert_eq!(pages, [(0, (0..20).collect::<Vec<u64>>()), (1, vec![])]);
    assert_eq!(uris(&log), ["/json_server?limit=50&offset=0", "/json_server?limit=20&offset=20"]);
    assert_eq!((expected, expected_record(&harness).await.get("truncated")), (2, None), "complete, not truncated");
}

/// The ledger's `expected.json` of the test run.
async fn expected_record(harness: &Harness) -> Value {
    let run_id = RunId::new("20261129T060000Z").expect("run id");
    let bytes = harness.store.get(&tributary_core::keys::expected_key("events", &run_id)).await.expect("expected.json");
    serde_json::from_slice(&bytes).expect("json")
}

#[tokio::test]
async fn a_cursor_that_cycles_ends_the_run_truncated_where_a_call_would_repeat() {
    let next = || json!({"kind": "body_token", "pointer": "/meta/next_cursor", "param": "cursor"});
    let reason_of = |expected: &Value| expected["truncated"].as_str().expect("truncated, with the reason").to_string();
    // Page 2's next cursor is page 1's: the run ends at page 2, each page
    // fetched once, nothing landed twice.
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let (pages, count) = run(&harness, first_page(addr, "/cycle", json!({}), next(), 1000)).await;
    assert_eq!((pages, count), (all_pages(), 3));
    assert_eq!(uris(&log), ["/cycle", "/cycle?cursor=c3", "/cycle?cursor=c6"], "one call per page, not 1,000");
    let reason = reason_of(&expected_record(&harness).await);
    assert!(reason.contains("cursor cycled: page 2's next page is page 1 again"), "{reason}");
    // A cycle of empty pages is caught the same way (their records have
    // nothing to compare).
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let (pages, count) = run(&harness, first_page(addr, "/cycle", json!({"empty": "1"}), next(), 1000)).await;
    assert_eq!((pages.len(), count), (3, 3));
    assert_eq!(uris(&log).len(), 3);
    assert!(reason_of(&expected_record(&harness).await).contains("page 2's next page is page 1 again"));
    // Back to page 0's records by another call (`cursor=c0`, where page 0
    // had none): that page is fetched, its records again (the run's
    // completion reports them as duplicated), and the cycle is caught at
    // the next call, page 1's.
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let (pages, count) = run(&harness, first_page(addr, "/cycle", json!({"back_to": "c0"}), next(), 1000)).await;
    assert_eq!(pages, [all_pages(), vec![(3, vec![0, 1, 2])]].concat());
    assert_eq!((count, uris(&log).len()), (4, 4));
    assert!(reason_of(&expected_record(&harness).await).contains("page 3's next page is page 1 again"));
}

/// A trial: a `body_url` next link naming the page it is on, while pages
/// remain, ended the run as complete (two thirds of the records, exit 0).
/// It is a cycle of one page: the run ends there truncated, saying why.
#[tokio::test]
async fn a_next_link_to_its_own_page_ends_the_run_truncated() {
    let (addr, log) = vendor().await;
    let harness = Harness::new();
    let next = json!({"kind": "body_url", "pointer": "/links/next"});
    let (pages, count) = run(&harness, first_page(addr, "/self_url", json!({}), next, 1000)).await;
    assert_eq!(pages, [(0, vec![0, 1, 2]), (1, vec![3, 4, 5])]);
    assert_eq!((count, uris(&log).len()), (2, 2), "page 1 fetched once");
    let reason = expected_record(&harness).await["truncated"].as_str().expect("truncated").to_string();
    assert!(reason.contains("cursor cycled: page 1's next page is page 1 again"), "{reason}");
}

#[tokio::test]
async fn a_cursor_page_delivered_twice_is_not_taken_for_a_cycle() {
    let (addr, _log) = vendor().await;
    let harness = Harness::new();
    let next = json!({"kind": "body_token", "pointer": "/meta/next_cursor", "param": "cursor"});
    request::handle_message(first_page(addr, "/token", json!({}), next, 100), harness.deps()).await.expect("page 0");
    let second: RequestMessage = contracts::decode(harness.drain(REQUEST_QUEUE).remove(0)).expect("page 1");
    for delivery in 0..2 {
        request::handle_message(second.clone(), harness.deps()).await.expect("page 1");
        let sent = harness.drain(REQUEST_QUEUE);
        assert_eq!(sent.len(), 1, "delivery {delivery} of page 1 sends page 2 on");
    }
    let run_id = RunId::new("20261129T060000Z").expect("run id");
    let ended = harness.store.get(&tributary_core::keys::expected_key("events", &run_id)).await;
    assert!(ended.is_err(), "the run goes on: no page count yet");
    let persisted: Vec<u32> = harness
        .drain(PERSIST_QUEUE)
        .into_iter()
        .map(|v| contracts::decode::<PersistMessage>(v).expect("persist").page.index)
        .collect();
    assert_eq!(persisted, [0, 1, 1], "page 1's records both times (Persist's receipt dedupes)");
}

/// A trial finding: `"items": null` on the last page failed the run after
/// every record was in; it is an empty page. Beside `errors` it is the
/// vendor's failure, and refused.
#[tokio::test]
async fn records_sent_as_null_are_an_empty_page_unless_the_body_reports_errors() {
    let (addr, _log) = vendor().await;
    let harness = Harness::new();
    let next = json!({"kind": "body_token", "pointer": "/meta/next_cursor", "param": "cursor"});
    let (mut pages, expected) = run(&harness, first_page(addr, "/null_end", json!({}), next.clone(), 100)).await;
    assert_eq!(pages.pop(), Some((3, vec![])), "the null page is an empty page");
    assert_eq!((pages, expected), (all_pages(), 4));

    let message = first_page(addr, "/null_errors", json!({}), next, 100);
    let err = request::handle_message(message, harness.deps()).await.expect_err("refused");
    let text = err.to_string();
    assert!(text.contains("leads to null beside the body's `errors`/`error` member"), "{text}");
    assert!(text.contains("rate limit") && !text.contains("did you mean"), "the vendor's own words: {text}");

    // A 200 whose body is only an error member (a trial): the missing
    // pointer is named, and so is what the vendor said.
    let next = json!({"kind": "body_token", "pointer": "/meta/next_cursor", "param": "cursor"});
    let message = first_page(addr, "/error_body", json!({}), next, 100);
    let text = request::handle_message(message, harness.deps()).await.expect_err("refused").to_string();
    assert!(
        text.contains("is not in the response")
            && text.contains(r#"the vendor's `error`: "internal vendor error, try later""#),
        "{text}"
    );
}

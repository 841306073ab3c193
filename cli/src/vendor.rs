//! The demo vendor API: a small, deterministic REST API on 127.0.0.1 with
//! the kind of JSON vendors send — nested objects, arrays, nulls and a
//! numeric field that is an integer in some records and a float in others.
//!
//! | endpoint | shape |
//! |---|---|
//! | `GET /customers?offset=&limit=` | `{"total": N, "offset", "limit", "items": [customer…]}` (limit 1..=1000, default 50) |
//! | `GET /transactions` | `{"count": N, "data": [transaction…]}` — every transaction at once |
//! | `GET /customers/{id}/transactions` | `{"customer_id", "data": [transaction…]}` |
//! | `GET /events?cursor=&limit=&updated_since=` | no total: `{"data": [event…], "next_cursor", "links": {"next"}}` and a `Link: <…>; rel="next"` header — every continuation kind at once (limit 1..=1000, default 25) |
//! | `GET /secure/events?…` | as `/events`, only with `x-api-key: demo-key` or a bearer token from `/oauth/token` |
//! | `POST /oauth/token` | client credentials grant (HTTP Basic `demo:demo-secret`): `{"access_token", "token_type", "expires_in"}` |
//!
//! Data is a pure function of the index, so tests can check every value.

use std::net::SocketAddr;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Size of the demo data set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DemoData {
    /// Customers (ids 1..=customers).
    pub customers: u32,
    /// Transactions per customer.
    pub transactions_per_customer: u32,
    /// Events (ids 1..=events), one every 10 minutes from 2026-11-01.
    pub events: u32,
}

impl Default for DemoData {
    fn default() -> Self {
        Self { customers: 230, transactions_per_customer: 3, events: 120 }
    }
}

/// The demo API's key for `/secure/*` (`x-api-key`).
pub const DEMO_API_KEY: &str = "demo-key";
/// The demo API's OAuth client id and secret for `/oauth/token`.
pub const DEMO_CLIENT: (&str, &str) = ("demo", "demo-secret");
/// The bearer token `/oauth/token` issues.
const DEMO_TOKEN: &str = "demo-access-token";

/// Event `id` (1-based): its `updated_at` grows with the id.
pub fn event(id: u32) -> Value {
    let at = chrono::DateTime::<chrono::Utc>::from_timestamp(1_793_491_200 + i64::from(id) * 600, 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    let kind = ["signup", "login", "purchase"][(id % 3) as usize];
    json!({"id": id, "kind": kind, "customer_id": 1 + id % 230, "updated_at": at})
}

const CITIES: [&str; 5] = ["Recife", "São Paulo", "Porto Alegre", "Belém", "Curitiba"];
const TIERS: [&str; 3] = ["bronze", "silver", "gold"];

/// Customer `id` (1-based).
///
/// `/customers` serves the same record through `Customer`, written
/// without building a `Value` first.
pub fn customer(id: u32) -> Value {
    let city = CITIES[(id as usize) % CITIES.len()];
    // An integer for most customers, a float for every third: mixed numbers.
    let credit_limit = if id.is_multiple_of(3) { json!(f64::from(id) * 10.5) } else { json!(u64::from(id) * 100) };
    let tags: Vec<&str> = TIERS.iter().take((id % 4) as usize).copied().collect();
    json!({
        "id": id,
        "name": format!("Customer {id}"),
        "email": if id.is_multiple_of(7) { Value::Null } else { json!(format!("customer{id}@example.com")) },
        "active": !id.is_multiple_of(5),
        "credit_limit": credit_limit,
        "address": {"city": city, "zip": format!("{:05}-000", 50_000 + id), "geo": {"lat": -8.05 - f64::from(id) / 1000.0, "lon": -34.9}},
        "tags": tags,
        "created_at": format!("2026-{:02}-{:02}T12:00:00Z", 1 + id % 12, 1 + id % 28),
    })
}

/// [`customer`] as a struct, its fields in the order `Value`'s sorted map
/// writes them, so its JSON is byte for byte the same: building 1,000
/// `Value`s and their maps per page cost 4.3 ms of the vendor's CPU, this
/// costs 0.7 ms (release build), and a benchmark's baseline should measure
/// HTTP, not the demo's own JSON building.
#[derive(Debug, Serialize)]
struct Customer {
    active: bool,
    address: Address,
    created_at: String,
    credit_limit: CreditLimit,
    email: Option<String>,
    id: u32,
    name: String,
    tags: &'static [&'static str],
}

#[derive(Debug, Serialize)]
struct Address {
    city: &'static str,
    geo: Geo,
    zip: String,
}

#[derive(Debug, Serialize)]
struct Geo {
    lat: f64,
    lon: f64,
}

/// An integer for most customers, a float for every third.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum CreditLimit {
    Integer(u64),
    Float(f64),
}

impl Customer {
    fn new(id: u32) -> Self {
        Self {
            active: !id.is_multiple_of(5),
            address: Address {
                city: CITIES[(id as usize) % CITIES.len()],
                geo: Geo { lat: -8.05 - f64::from(id) / 1000.0, lon: -34.9 },
                zip: format!("{:05}-000", 50_000 + id),
            },
            created_at: format!("2026-{:02}-{:02}T12:00:00Z", 1 + id % 12, 1 + id % 28),
            credit_limit: if id.is_multiple_of(3) {
                CreditLimit::Float(f64::from(id) * 10.5)
            } else {
                CreditLimit::Integer(u64::from(id) * 100)
            },
            email: (!id.is_multiple_of(7)).then(|| format!("customer{id}@example.com")),
            id,
            name: format!("Customer {id}"),
            tags: &TIERS[..(id % 4) as usize],
        }
    }
}

/// A `/customers` page, fields in sorted order as [`Customer`]'s.
#[derive(Debug, Serialize)]
struct CustomersPage {
    items: Vec<Customer>,
    limit: u32,
    offset: u32,
    total: u32,
}

/// Transaction `n` (0-based) of customer `customer_id`.
pub fn transaction(customer_id: u32, n: u32, per_customer: u32) -> Value {
    let id = (customer_id - 1) * per_customer + n + 1;
    let amount = if id.is_multiple_of(2) { json!(id * 3) } else { json!(f64::from(id) * 3.25) };
    json!({
        "id": id,
        "customer_id": customer_id,
        "amount": amount,
        "currency": if id.is_multiple_of(4) { "USD" } else { "BRL" },
        "items": (0..1 + id % 3).map(|k| json!({"sku": format!("SKU-{}", (id + k) % 17), "qty": 1 + k})).collect::<Vec<_>>(),
        "card": if id.is_multiple_of(5) { Value::Null } else { json!({"brand": "visa", "last4": format!("{:04}", id % 10_000)}) },
        "at": format!("2026-11-{:02}T{:02}:00:00Z", 1 + id % 28, id % 24),
    })
}

#[derive(Debug, Deserialize)]
struct Page {
    offset: Option<String>,
    limit: Option<String>,
}

fn bad_request(message: String) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": message}))).into_response()
}

async fn customers(State(data): State<DemoData>, Query(page): Query<Page>) -> Response {
    let offset = match page.offset.as_deref().map(str::parse::<u32>).transpose() {
        Ok(offset) => offset.unwrap_or(0),
        Err(_) => return bad_request(format!("offset {:?} is not a non-negative integer", page.offset)),
    };
    let limit = match page.limit.as_deref().map(str::parse::<u32>).transpose() {
        Ok(limit) => limit.unwrap_or(50),
        Err(_) => return bad_request(format!("limit {:?} is not a non-negative integer", page.limit)),
    };
    if !(1..=1000).contains(&limit) {
        return bad_request(format!("limit {limit} must be between 1 and 1000"));
    }
    let items = (offset.saturating_add(1)..=data.customers).take(limit as usize).map(Customer::new).collect();
    Json(CustomersPage { items, limit, offset, total: data.customers }).into_response()
}

async fn transactions(State(data): State<DemoData>) -> Json<Value> {
    let per = data.transactions_per_customer;
    let all: Vec<Value> = (1..=data.customers).flat_map(|c| (0..per).map(move |n| transaction(c, n, per))).collect();
    Json(json!({"count": all.len(), "data": all}))
}

async fn customer_transactions(State(data): State<DemoData>, Path(id): Path<String>) -> Response {
    match id.parse::<u32>() {
        Ok(id) if (1..=data.customers).contains(&id) => {
            let per = data.transactions_per_customer;
            let rows: Vec<Value> = (0..per).map(|n| transaction(id, n, per)).collect();
            Json(json!({"customer_id": id, "data": rows})).into_response()
        }
        _ => (StatusCode::NOT_FOUND, Json(json!({"error": format!("no customer {id:?}")}))).into_response(),
    }
}

#[derive(Debug, Deserialize)]
struct EventsPage {
    cursor: Option<String>,
    limit: Option<u32>,
    updated_since: Option<String>,
}

async fn events(State(data): State<DemoData>, uri: axum::http::Uri, Query(page): Query<EventsPage>) -> Response {
    let after = match page.cursor.as_deref().map(|c| c.trim_start_matches('e').parse::<u32>()) {
        None => 0,
        Some(Ok(after)) => after,
        Some(Err(_)) => return bad_request(format!("cursor {:?} is not one this API gave", page.cursor)),
    };
    let limit = page.limit.unwrap_or(25);
    if !(1..=1000).contains(&limit) {
        return bad_request(format!("limit {limit} must be between 1 and 1000"));
    }
    let since = page.updated_since.unwrap_or_default();
    let rows: Vec<Value> = (after.saturating_add(1)..=data.events)
        .map(event)
        .filter(|e| e["updated_at"].as_str().is_some_and(|at| at > since.as_str()))
        .take(limit as usize)
        .collect();
    let last = rows.last().and_then(|e| e["id"].as_u64()).unwrap_or(0);
    let more = rows.len() == limit as usize && last < u64::from(data.events);
    let next_cursor = more.then(|| format!("e{last}"));
    let next_url = next_cursor.as_ref().map(|cursor| {
        let mut url = url::Url::parse(&format!("http://vendor{uri}")).expect("request URI");
        let kept: Vec<(String, String)> =
            url.query_pairs().filter(|(k, _)| k != "cursor").map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
        url.query_pairs_mut().clear().extend_pairs(kept).append_pair("cursor", cursor);
        format!("{}?{}", url.path(), url.query().unwrap_or_default())
    });
    let mut response =
        Json(json!({"data": rows, "next_cursor": next_cursor, "links": {"next": next_url}})).into_response();
    if let Some(link) =
        next_url.and_then(|next| axum::http::HeaderValue::from_str(&format!("<{next}>; rel=\"next\"")).ok())
    {
        response.headers_mut().insert("link", link);
    }
    response
}

async fn secure_events(
    state: State<DemoData>,
    headers: axum::http::HeaderMap,
    uri: axum::http::Uri,
    query: Query<EventsPage>,
) -> Response {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    if header("x-api-key") != DEMO_API_KEY && header("authorization") != format!("Bearer {DEMO_TOKEN}") {
        return (StatusCode::UNAUTHORIZED, Json(json!({"error": "missing or wrong credentials"}))).into_response();
    }
    events(state, uri, query).await
}

async fn token(headers: axum::http::HeaderMap, body: String) -> Response {
    use base64::Engine;
    let expected = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", DEMO_CLIENT.0, DEMO_CLIENT.1));
    let basic = headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default();
    if basic != format!("Basic {expected}") || !body.contains("grant_type=client_credentials") {
        return (StatusCode::UNAUTHORIZED, Json(json!({"error": "invalid_client"}))).into_response();
    }
    Json(json!({"access_token": DEMO_TOKEN, "token_type": "bearer", "expires_in": 3600})).into_response()
}

/// The demo API's routes.
pub fn router(data: DemoData) -> Router {
    Router::new()
        .route("/customers", get(customers))
        .route("/transactions", get(transactions))
        .route("/customers/{id}/transactions", get(customer_transactions))
        .route("/events", get(events))
        .route("/secure/events", get(secure_events))
        .route("/oauth/token", axum::routing::post(token))
        .with_state(data)
}

/// Serves the demo API on `addr` (port 0 picks a free port) in a background
/// task; returns the bound address.
///
/// # Errors
/// The bind failure (address in use, permission).
pub async fn spawn(addr: SocketAddr, data: DemoData) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, router(data)).await {
            tracing::error!(error = %err, "demo vendor API stopped");
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn customers_are_served_byte_for_byte_as_their_values() {
        // Every residue of the moduli the fields use (3, 4, 5, 7, 12, 28),
        // and floats of every size up to 100,000.
        for id in (1..=2_000).chain((99_000..=100_000).step_by(7)) {
            let fast = serde_json::to_string(&Customer::new(id)).expect("JSON");
            assert_eq!(fast, customer(id).to_string(), "customer {id}");
        }
        let page = CustomersPage { items: vec![Customer::new(1), Customer::new(2)], limit: 2, offset: 0, total: 230 };
        let value = json!({"total": 230, "offset": 0, "limit": 2, "items": [customer(1), customer(2)]});
        assert_eq!(serde_json::to_string(&page).expect("JSON"), value.to_string());
    }
}

//! The demo vendor API: a small, deterministic REST API on 127.0.0.1 with
//! the kind of JSON vendors send — nested objects, arrays, nulls and a
//! numeric field that is an integer in some records and a float in others.
//!
//! | endpoint | shape |
//! |---|---|
//! | `GET /customers?offset=&limit=` | `{"total": N, "offset", "limit", "items": [customer…]}` (limit 1..=1000, default 50) |
//! | `GET /transactions` | `{"count": N, "data": [transaction…]}` — every transaction at once |
//! | `GET /customers/{id}/transactions` | `{"customer_id", "data": [transaction…]}` |
//!
//! Data is a pure function of the index, so tests can check every value.

use std::net::SocketAddr;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

/// Size of the demo data set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DemoData {
    /// Customers (ids 1..=customers).
    pub customers: u32,
    /// Transactions per customer.
    pub transactions_per_customer: u32,
}

impl Default for DemoData {
    fn default() -> Self {
        Self { customers: 230, transactions_per_customer: 3 }
    }
}

const CITIES: [&str; 5] = ["Recife", "São Paulo", "Porto Alegre", "Belém", "Curitiba"];
const TIERS: [&str; 3] = ["bronze", "silver", "gold"];

/// Customer `id` (1-based).
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
    let items: Vec<Value> = (offset.saturating_add(1)..=data.customers).take(limit as usize).map(customer).collect();
    Json(json!({"total": data.customers, "offset": offset, "limit": limit, "items": items})).into_response()
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

/// The demo API's routes.
pub fn router(data: DemoData) -> Router {
    Router::new()
        .route("/customers", get(customers))
        .route("/transactions", get(transactions))
        .route("/customers/{id}/transactions", get(customer_transactions))
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

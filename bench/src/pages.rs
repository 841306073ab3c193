//! Deterministic benchmark pages: two realistic shapes (customers,
//! transactions), clean or messy, written as NDJSON and as a JSON array.
//!
//! Records are written as JSON text directly (not through
//! `serde_json::Value`) so the messy pages can hold integers beyond `u64`,
//! and so a 500k-record page is generated without holding it in memory.
//! The same seed always gives the same bytes.

use std::fmt::{self, Write as _};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;

/// The record shapes of the benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// id, name, email, nested address, tags list, created_at, score, active.
    Customers,
    /// id, customer_id, amount, currency, created_at, line_items (list of
    /// structs), metadata object in about 5% of records with varying keys.
    Transactions,
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Shape::Customers => "customers",
            Shape::Transactions => "transactions",
        })
    }
}

/// Clean pages are what every peer accepts; messy pages hold what every
/// pyarrow path rejects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// One JSON type per field.
    Clean,
    /// Int/float and int/string mixes, an always-null column, `{}` and `[]`,
    /// a scalar in some records and a list in others, integers beyond i64,
    /// keys that appear only in the last records.
    Messy,
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Variant::Clean => "clean",
            Variant::Messy => "messy",
        })
    }
}

/// One benchmark page: a shape, a variant and a record count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageSpec {
    /// Record shape.
    pub shape: Shape,
    /// Clean or messy.
    pub variant: Variant,
    /// Records in the page.
    pub records: u64,
}

/// The two files of a generated page.
#[derive(Clone, Debug)]
pub struct PageFiles {
    /// One record per line.
    pub ndjson: PathBuf,
    /// The same records as one JSON array.
    pub array: PathBuf,
}

impl PageSpec {
    /// File stem, e.g. `customers-messy-50000`.
    pub fn stem(&self) -> String {
        format!("{}-{}-{}", self.shape, self.variant, self.records)
    }

    /// Writes the page as `<stem>.ndjson` and `<stem>.json` (an array) in
    /// `dir`.
    ///
    /// # Errors
    /// When a file cannot be created or written (the error names it).
    pub fn write(&self, dir: &Path, seed: u64) -> anyhow::Result<PageFiles> {
        let files = PageFiles {
            ndjson: dir.join(format!("{}.ndjson", self.stem())),
            array: dir.join(format!("{}.json", self.stem())),
        };
        let create = |path: &Path| -> anyhow::Result<BufWriter<File>> {
            Ok(BufWriter::with_capacity(
                1 << 20,
                File::create(path).with_context(|| format!("creating {}", path.display()))?,
            ))
        };
        let mut ndjson = create(&files.ndjson)?;
        let mut array = create(&files.array)?;
        let mut rng = XorShift::new(seed ^ self.records ^ ((self.shape as u64) << 32) ^ ((self.variant as u64) << 40));
        let mut line = String::with_capacity(1024);
        let write_err = |path: &Path| format!("writing {}", path.display());
        array.write_all(b"[\n").with_context(|| write_err(&files.array))?;
        for i in 0..self.records {
            line.clear();
            let record = Record { index: i, total: self.records, variant: self.variant };
            match self.shape {
                Shape::Customers => record.customer(&mut rng, &mut line),
                Shape::Transactions => record.transaction(&mut rng, &mut line),
            }
            ndjson.write_all(line.as_bytes()).with_context(|| write_err(&files.ndjson))?;
            ndjson.write_all(b"\n").with_context(|| write_err(&files.ndjson))?;
            let separator: &[u8] = if i + 1 == self.records { b"\n" } else { b",\n" };
            array.write_all(line.as_bytes()).with_context(|| write_err(&files.array))?;
            array.write_all(separator).with_context(|| write_err(&files.array))?;
        }
        array.write_all(b"]\n").with_context(|| write_err(&files.array))?;
        ndjson.flush().with_context(|| write_err(&files.ndjson))?;
        array.flush().with_context(|| write_err(&files.array))?;
        Ok(files)
    }
}

/// xorshift64: small, fast, deterministic; plenty for test data.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        // Zero is xorshift's only fixed point.
        Self(seed.max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform-enough integer in `0..n` (`n` > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        // `below` is less than `items.len()`, which fits usize.
        items[usize::try_from(self.below(items.len() as u64)).unwrap_or(0)]
    }
}

const FIRST: &[&str] = &["Ana", "José", "Zoë", "Li", "Fatima", "Oliver", "Nguyễn", "Marie-Claire", "Kwame", "Sofía"];
const LAST: &[&str] = &["Silva", "O'Brien", "Müller", "Chen", "Okafor", "Dubois", "Tanaka", "Smith \"Jr\"", "Kowalski"];
const STREETS: &[&str] = &["Rua Augusta", "Main St", "Baker Street", "Avenida Paulista", "Rue de Rivoli", "Elm Ave"];
const CITIES: &[&str] = &["São Paulo", "Lisbon", "London", "Paris", "New York", "Tokyo", "Lagos", "Berlin"];
const COUNTRIES: &[&str] = &["BR", "PT", "GB", "FR", "US", "JP", "NG", "DE"];
const TAGS: &[&str] = &["vip", "newsletter", "churn-risk", "b2b", "early-adopter", "support-priority"];
const CURRENCIES: &[&str] = &["USD", "EUR", "BRL", "GBP", "JPY"];
const METADATA_KEYS: &[&str] =
    &["channel", "coupon", "device", "campaign", "referrer", "gift_note", "store", "ab_test"];
const HUGE_INTEGERS: &[&str] = &["18446744073709551616", "123456789012345678901234567890", "-99999999999999999999"];

/// One record being written.
struct Record {
    index: u64,
    total: u64,
    variant: Variant,
}

impl Record {
    fn messy(&self) -> bool {
        self.variant == Variant::Messy
    }

    /// Messy pages: true for the last 0.5% of records (at least one).
    fn is_late(&self) -> bool {
        self.messy() && self.index >= self.total - (self.total / 200).max(1)
    }

    fn every(&self, n: u64) -> bool {
        self.index % n == n - 1
    }

    fn customer(&self, rng: &mut XorShift, out: &mut String) {
        let i = self.index;
        out.push_str("{\"id\":");
        push_u64(out, i + 1);
        out.push_str(",\"name\":");
        push_str(out, &format!("{} {}", rng.pick(FIRST), rng.pick(LAST)));
        out.push_str(",\"email\":");
        push_str(out, &format!("customer{}@example.com", i + 1));
        out.push_str(",\"address\":{\"street\":");
        push_str(out, &format!("{} {}", 1 + rng.below(2000), rng.pick(STREETS)));
        out.push_str(",\"city\":");
        push_str(out, rng.pick(CITIES));
        out.push_str(",\"zip\":");
        push_str(out, &format!("{:05}", rng.below(100_000)));
        out.push_str(",\"country\":");
        push_str(out, rng.pick(COUNTRIES));
        out.push_str("},\"tags\":");
        if self.messy() && self.every(11) {
            // A scalar where other records have a list.
            push_str(out, rng.pick(TAGS));
        } else {
            let count = if self.messy() && self.every(13) { 0 } else { 1 + rng.below(3) };
            push_list(out, (0..count).map(|_| rng.pick(TAGS)));
        }
        out.push_str(",\"created_at\":");
        push_time(out, i, rng);
        out.push_str(",\"score\":");
        let cents = rng.below(100_000);
        if self.messy() && self.every(10) {
            // An integer where other records have a float.
            push_u64(out, cents / 100);
        } else {
            let _ = write!(out, "{}.{:02}", cents / 100, cents % 100);
        }
        out.push_str(",\"active\":");
        out.push_str(if rng.below(4) == 0 { "false" } else { "true" });
        if self.messy() {
            // An integer in most records, a string in some.
            out.push_str(",\"loyalty_points\":");
            let points = rng.below(50_000);
            if self.every(17) {
                push_str(out, &points.to_string())
            } else {
                push_u64(out, points)
            }
            out.push_str(",\"legacy_code\":null,\"preferences\":{},\"aliases\":[],\"external_ref\":");
            push_big_integer(out, self, rng);
            if self.is_late() {
                out.push_str(",\"churn_score\":");
                let _ = write!(out, "0.{:03}", rng.below(1000));
            }
        }
        out.push('}');
    }

    fn transaction(&self, rng: &mut XorShift, out: &mut String) {
        let i = self.index;
        out.push_str("{\"id\":");
        push_str(out, &format!("txn-{:09}", i + 1));
        out.push_str(",\"customer_id\":");
        push_u64(out, 1 + rng.below(100_000));
        out.push_str(",\"amount\":");
        let cents = 100 + rng.below(500_000);
        if self.messy() && self.every(9) {
            push_u64(out, cents / 100);
        } else {
            let _ = write!(out, "{}.{:02}", cents / 100, cents % 100);
        }
        out.push_str(",\"currency\":");
        push_str(out, rng.pick(CURRENCIES));
        out.push_str(",\"created_at\":");
        push_time(out, i, rng);
        out.push_str(",\"line_items\":[");
        let items = if self.messy() && self.every(23) { 0 } else { 1 + rng.below(4) };
        for item in 0..items {
            if item > 0 {
                out.push(',');
            }
            out.push_str("{\"sku\":");
            push_str(out, &format!("SKU-{:05}", rng.below(20_000)));
            out.push_str(",\"qty\":");
            let qty = 1 + rng.below(9);
            if self.messy() && self.every(19) {
                push_str(out, &qty.to_string())
            } else {
                push_u64(out, qty)
            }
            out.push_str(",\"unit_price\":");
            let price = 50 + rng.below(100_000);
            let _ = write!(out, "{}.{:02}", price / 100, price % 100);
            out.push('}');
        }
        out.push(']');
        if rng.below(20) == 0 {
            // Sparse metadata: about 5% of records, 1-3 keys of 8.
            out.push_str(",\"metadata\":{");
            let keys = 1 + rng.below(3);
            for k in 0..keys {
                if k > 0 {
                    out.push(',');
                }
                let key = METADATA_KEYS[usize::try_from((i + k * 3) % METADATA_KEYS.len() as u64).unwrap_or(0)];
                push_str(out, key);
                out.push(':');
                push_str(out, &format!("{key}-{}", rng.below(1000)));
            }
            out.push('}');
        } else if self.messy() && self.every(29) {
            out.push_str(",\"metadata\":{}");
        }
        if self.messy() {
            out.push_str(",\"coupon\":");
            if self.every(7) {
                push_list(out, [rng.pick(METADATA_KEYS), "SPRING"].into_iter());
            } else {
                push_str(out, "WELCOME10");
            }
            out.push_str(",\"refund_of\":null,\"ledger_id\":");
            push_big_integer(out, self, rng);
            if self.is_late() {
                out.push_str(",\"settled_at\":");
                push_time(out, i + 1, rng);
            }
        }
        out.push('}');
    }
}

fn push_u64(out: &mut String, value: u64) {
    let _ = write!(out, "{value}");
}

fn push_str(out: &mut String, value: &str) {
    // A `&str` always serialises; the fallback keeps this total anyway.
    out.push_str(&serde_json::to_string(value).unwrap_or_else(|_| "null".into()));
}

fn push_list<'a>(out: &mut String, items: impl Iterator<Item = &'a str>) {
    out.push('[');
    for (n, item) in items.enumerate() {
        if n > 0 {
            out.push(',');
        }
        push_str(out, item);
    }
    out.push(']');
}

/// An RFC 3339 UTC time, a few minutes apart per record from 2026-01-01.
fn push_time(out: &mut String, index: u64, rng: &mut XorShift) {
    let base = 1_767_225_600_i64; // 2026-01-01T00:00:00Z
    let offset = i64::try_from(index * 97 + rng.below(60)).unwrap_or(0);
    match chrono::DateTime::from_timestamp(base + offset, 0) {
        Some(time) => push_str(out, &time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        None => out.push_str("null"),
    }
}

/// Mostly an i64, every 31st record an integer beyond i64.
fn push_big_integer(out: &mut String, record: &Record, rng: &mut XorShift) {
    if record.every(31) {
        out.push_str(rng.pick(HUGE_INTEGERS));
    } else {
        push_u64(out, rng.next() >> 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generate(spec: PageSpec) -> (String, String) {
        let dir = tempfile::tempdir().expect("tempdir");
        let files = spec.write(dir.path(), 7).expect("write");
        (std::fs::read_to_string(files.ndjson).expect("ndjson"), std::fs::read_to_string(files.array).expect("array"))
    }

    #[test]
    fn pages_are_deterministic_valid_json_and_both_layouts_hold_the_same_records() {
        for shape in [Shape::Customers, Shape::Transactions] {
            for variant in [Variant::Clean, Variant::Messy] {
                let spec = PageSpec { shape, variant, records: 300 };
                let (ndjson, array) = generate(spec);
                assert_eq!(generate(spec), (ndjson.clone(), array.clone()), "{} is deterministic", spec.stem());
                let lines: Vec<serde_json::Value> =
                    ndjson.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
                let parsed: Vec<serde_json::Value> = serde_json::from_str(&array).expect("a JSON array");
                assert_eq!(lines.len(), 300);
                assert_eq!(lines, parsed);
                assert!(lines.iter().all(serde_json::Value::is_object));
            }
        }
    }

    #[test]
    fn messy_pages_hold_every_kind_of_mess() {
        let (ndjson, _) = generate(PageSpec { shape: Shape::Customers, variant: Variant::Messy, records: 1000 });
        for needle in [
            "\"preferences\":{}",
            "\"aliases\":[]",
            "\"legacy_code\":null",
            "18446744073709551616",
            "123456789012345678901234567890",
            "\"tags\":\"",
            "\"loyalty_points\":\"",
        ] {
            assert!(ndjson.contains(needle), "{needle} is in the messy page");
        }
        let lines: Vec<&str> = ndjson.lines().collect();
        assert!(!lines[0].contains("churn_score") && lines[999].contains("churn_score"), "a late key");
        let (transactions, _) =
            generate(PageSpec { shape: Shape::Transactions, variant: Variant::Messy, records: 1000 });
        for needle in ["\"metadata\":{}", "\"line_items\":[]", "\"coupon\":[", "\"qty\":\"", "settled_at"] {
            assert!(transactions.contains(needle), "{needle} is in the messy transactions");
        }
    }
}

//! [`HttpClient`] over reqwest (rustls), one connection pool per process
//! and network allowance, behind the SSRF guard of [`crate::ssrf`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::ssrf::{self, GuardedResolver, Lookup, NetworkAccess, SystemLookup};
use contracts::{HttpMethod, redacted_url};
use tributary_core::ports::{HttpClient, HttpRequest, HttpResponse, LargeBodyTurn, PortError};

/// Default time to establish a TCP (and TLS) connection: 10 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Default size past which a response body is large: 1 MiB. A large body
/// is read only with the process's [`LargeBodyTurn`], one at a time.
pub const DEFAULT_LARGE_BODY_BYTES: u64 = 1 << 20;

/// Settings of a [`ReqwestClient`].
#[derive(Clone)]
pub struct HttpOptions {
    /// Time to establish a connection (`HTTP_CONNECT_TIMEOUT_SECS`); each
    /// call's total time-out bounds it too.
    pub connect_timeout: Duration,
    /// Name resolution (the system resolver; tests give a table).
    pub lookup: Arc<dyn Lookup>,
    /// Bytes past which a body is large ([`DEFAULT_LARGE_BODY_BYTES`]):
    /// a call whose body grows past it (or whose `Content-Length` says so)
    /// waits for the client's one large-body turn before reading on, and
    /// its response holds the turn until dropped. With a batch handled 5
    /// at once, Request's peak memory is then one large page plus four
    /// small ones (infra/README.md, Request memory).
    pub large_body_bytes: u64,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            lookup: Arc::new(SystemLookup),
            large_body_bytes: DEFAULT_LARGE_BODY_BYTES,
        }
    }
}

/// reqwest-backed client. Build once at cold start and share.
#[derive(Clone, Debug)]
pub struct ReqwestClient {
    /// One client per allowance (none, loopback, private, both), each with
    /// a resolver that enforces it.
    clients: [reqwest::Client; 4],
    /// The one large-body turn of this client (and its clones).
    turn: Arc<tokio::sync::Mutex<()>>,
    /// See [`HttpOptions::large_body_bytes`].
    large_body_bytes: u64,
}

impl ReqwestClient {
    /// [`ReqwestClient::with_options`] with the defaults.
    ///
    /// # Errors
    /// As [`ReqwestClient::with_options`].
    pub fn new() -> Result<Self, PortError> {
        Self::with_options(HttpOptions::default())
    }

    /// A client that does not follow redirects (a redirect is returned as
    /// the 3xx response, so callers can re-check the target host), uses no
    /// proxy (a proxy would resolve names past the guard), and sends
    /// `User-Agent: tributary/<version>`.
    ///
    /// # Errors
    /// [`PortError::Permanent`] if the TLS backend cannot be initialised.
    pub fn with_options(options: HttpOptions) -> Result<Self, PortError> {
        let build = |index: usize| {
            let access = access_of(index);
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .no_proxy()
                .connect_timeout(options.connect_timeout)
                .dns_resolver(GuardedResolver { lookup: options.lookup.clone(), access })
                .user_agent(concat!("tributary/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|err| PortError::permanent("build HTTP client", "reqwest", err))
        };
        Ok(Self {
            clients: [build(0)?, build(1)?, build(2)?, build(3)?],
            turn: Arc::new(tokio::sync::Mutex::new(())),
            large_body_bytes: options.large_body_bytes,
        })
    }

    /// Waits for the large-body turn, at most `wait` (the call's time-out:
    /// a response kept alive while its own message calls again cannot
    /// block that call forever).
    async fn large_body_turn(&self, wait: Duration, target: &str) -> Result<LargeBodyTurn, PortError> {
        match tokio::time::timeout(wait, self.turn.clone().lock_owned()).await {
            Ok(guard) => Ok(LargeBodyTurn(Arc::new(guard))),
            Err(_) => Err(PortError::transient_msg(
                "HTTP read body",
                target.to_string(),
                format!("waited {wait:?} for the turn to read a large body (another large page was being handled)"),
            )),
        }
    }

    fn client(&self, access: NetworkAccess) -> &reqwest::Client {
        &self.clients[usize::from(access.loopback) + 2 * usize::from(access.private)]
    }
}

fn access_of(index: usize) -> NetworkAccess {
    NetworkAccess { loopback: index & 1 == 1, private: index & 2 == 2 }
}

fn refused(err: &ssrf::Refused) -> PortError {
    PortError::permanent("SSRF guard", err.host.clone(), err.clone())
}

#[async_trait]
impl HttpClient for ReqwestClient {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, PortError> {
        let method = match request.method {
            HttpMethod::Get => reqwest::Method::GET,
            HttpMethod::Post => reqwest::Method::POST,
        };
        // The URL is logged and reported without its query string, which may
        // carry API keys.
        let target = format!("{} {}", request.method, redacted_url(&request.url));
        // reqwest resolves no name for an address literal: check it here.
        let literal = match request.url.host() {
            Some(url::Host::Ipv4(ip)) => Some(std::net::IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => Some(std::net::IpAddr::V6(ip)),
            _ => None,
        };
        if let Some(ip) = literal {
            let host = request.url.host_str().unwrap_or_default();
            ssrf::check_ip(host, ip, request.access).map_err(|err| refused(&err))?;
        }
        let client = self.client(request.access);
        let mut builder = client.request(method, request.url.clone()).timeout(request.timeout);
        let has_content_type = request.headers.keys().any(|name| name.eq_ignore_ascii_case("content-type"));
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        if let Some(body) = request.body {
            if !has_content_type {
                builder = builder.header("content-type", "application/json");
            }
            builder = builder.body(body);
        }
        let mut response = builder.send().await.map_err(|err| {
            if let Some(refusal) = ssrf::find_refusal(&err) {
                return refused(refusal);
            }
            // A request that cannot even be built (an invalid header value,
            // say) fails the same way on every retry.
            let message = describe(&err);
            let target = target.clone();
            // reqwest's Display names the URL with its query (a credential,
            // maybe): the source is kept without it.
            let port_error = if err.is_builder() {
                PortError::permanent("HTTP call", target, err.without_url())
            } else {
                PortError::transient("HTTP call", target, err.without_url())
            };
            port_error.with_message(message)
        })?;
        let status = response.status().as_u16();
        let mut headers = header_map(response.headers());
        let limit = request.max_body_bytes.unwrap_or(u64::MAX);
        let too_large = |bytes: u64| PortError::TooLarge {
            what: "response body",
            target: target.clone(),
            bytes: usize::try_from(bytes).unwrap_or(usize::MAX),
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
        };
        if let Some(length) = response.content_length().filter(|length| *length > limit) {
            return Err(too_large(length));
        }
        // A large body is read only with the turn (one at a time).
        let mut turn = None;
        if response.content_length().is_some_and(|length| length > self.large_body_bytes) {
            turn = Some(self.large_body_turn(request.timeout, &target).await?);
        }
        // Stream the body and stop reading past the cap, so a huge (or
        // endless) body never fills the function's memory.
        let mut body = Vec::new();
        loop {
            let chunk = response.chunk().await.map_err(|err| {
                let message = describe(&err);
                PortError::transient("HTTP read body", target.clone(), err.without_url()).with_message(message)
            })?;
            let Some(chunk) = chunk else { break };
            body.extend_from_slice(&chunk);
            if body.len() as u64 > limit {
                return Err(too_large(body.len() as u64));
            }
            if turn.is_none() && body.len() as u64 > self.large_body_bytes {
                turn = Some(self.large_body_turn(request.timeout, &target).await?);
            }
        }
        let body = match gunzipped(&mut headers, &body, limit) {
            Ok(Some(decoded)) => decoded,
            Ok(None) => body,
            Err(Gunzip::TooLarge) => return Err(too_large(limit.saturating_add(1))),
            Err(Gunzip::Corrupt(err)) => {
                return Err(PortError::permanent_msg(
                    "HTTP read body",
                    target.clone(),
                    format!("the body is gzip (its first bytes are 1f 8b) but does not decompress: {err}"),
                ));
            }
        };
        Ok(HttpResponse { status, headers, body: bytes::Bytes::from(body), turn })
    }
}

/// Why a gzip body was not decompressed.
#[derive(Debug)]
enum Gunzip {
    /// It decompresses past the response size limit (a zip bomb or a
    /// page too large for the function).
    TooLarge,
    /// It is not valid gzip.
    Corrupt(std::io::Error),
}

/// `body` decompressed when it is gzip: said so (`Content-Encoding: gzip`
/// or `x-gzip`), or not said but starting with gzip's magic bytes `1f 8b`
/// (no JSON text starts with them: some vendors and file hosts send
/// `.json.gz` objects as they are). The header is then removed, as the
/// body no longer has that encoding. `None`: not gzip, the body as it is.
/// Decompressed bytes past `limit` are [`Gunzip::TooLarge`], read no
/// further.
/// A response's headers by lower-case name. A field sent on several lines
/// (`Link: <…?page=1>; rel="first"`, then `Link: <…?page=2>; rel="next"`)
/// is their values joined with `, `, as RFC 9110 §5.3 combines them: taking
/// one line kept only the last, and a `rel="next"` on an earlier line was
/// lost (a run ended after page 1, "complete"). A value that is not visible
/// ASCII (RFC 9110 §5.5 obs-text) is left out.
fn header_map(headers: &reqwest::header::HeaderMap) -> BTreeMap<String, String> {
    let mut map: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let Ok(value) = value.to_str() else { continue };
        map.entry(name.as_str().to_ascii_lowercase())
            .and_modify(|joined| {
                joined.push_str(", ");
                joined.push_str(value);
            })
            .or_insert_with(|| value.to_string());
    }
    map
}

fn gunzipped(headers: &mut BTreeMap<String, String>, body: &[u8], limit: u64) -> Result<Option<Vec<u8>>, Gunzip> {
    use std::io::Read;
    let declared = headers
        .get("content-encoding")
        .is_some_and(|e| e.eq_ignore_ascii_case("gzip") || e.eq_ignore_ascii_case("x-gzip"));
    if !declared && !body.starts_with(&[0x1f, 0x8b]) {
        return Ok(None);
    }
    let mut decoded = Vec::new();
    flate2::read::MultiGzDecoder::new(body)
        .take(limit.saturating_add(1))
        .read_to_end(&mut decoded)
        .map_err(Gunzip::Corrupt)?;
    if decoded.len() as u64 > limit {
        return Err(Gunzip::TooLarge);
    }
    if !declared {
        tracing::warn!(
            compressed = body.len(),
            decompressed = decoded.len(),
            "the vendor sent a gzip body without Content-Encoding: decompressed"
        );
    }
    headers.remove("content-encoding");
    Ok(Some(decoded))
}

fn describe(err: &reqwest::Error) -> String {
    let kind = if err.is_builder() {
        "invalid request (a header name or value, or the URL)"
    } else if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    // reqwest's Display includes the URL with its query; strip it. The
    // source chain says what happened (reset, refused, DNS).
    let text = err.to_string();
    let mut detail = text.split(" for url (").next().unwrap_or(&text).to_string();
    let mut source = std::error::Error::source(err);
    while let Some(inner) = source {
        detail.push_str(&format!(": {inner}"));
        source = inner.source();
    }
    format!("{kind}: {detail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).expect("gzip");
        encoder.finish().expect("gzip")
    }

    /// A trial finding: a gzip body the vendor sent unasked (no
    /// Content-Encoding) was reported as "not JSON".
    #[test]
    fn a_gzip_body_is_decompressed_said_or_not_within_the_limit() {
        let json = br#"{"items": [{"id": 1}]}"#;
        let mut unsaid = BTreeMap::new();
        assert_eq!(gunzipped(&mut unsaid, &gzip(json), 1_000).expect("gzip").as_deref(), Some(&json[..]));
        let mut said = BTreeMap::from([("content-encoding".to_string(), "gzip".to_string())]);
        assert_eq!(gunzipped(&mut said, &gzip(json), 1_000).expect("gzip").as_deref(), Some(&json[..]));
        assert!(!said.contains_key("content-encoding"), "the body is no longer gzip");
        assert!(gunzipped(&mut BTreeMap::new(), json, 1_000).expect("plain").is_none(), "JSON is left as it is");
        let bomb = gzip(&vec![b' '; 100_000]);
        assert!(matches!(gunzipped(&mut BTreeMap::new(), &bomb, 10_000), Err(Gunzip::TooLarge)));
        let mut cut = gzip(json);
        cut.truncate(cut.len() / 2);
        assert!(matches!(gunzipped(&mut BTreeMap::new(), &cut, 1_000), Err(Gunzip::Corrupt(_))));
    }

    #[test]
    fn a_field_sent_on_several_lines_is_their_values_joined_and_its_next_link_found() {
        use reqwest::header::{HeaderMap, HeaderValue};
        let mut headers = HeaderMap::new();
        for line in [
            r#"<https://api.example.com/items?page=1>; rel="first""#,
            r#"<https://api.example.com/items?page=2>; rel="next""#,
            r#"<https://api.example.com/items?page=4>; rel="last""#,
        ] {
            headers.append("Link", HeaderValue::from_static(line));
        }
        headers.insert("X-Total-Count", HeaderValue::from_static("120"));
        let map = header_map(&headers);
        assert_eq!(map["x-total-count"], "120");
        let link = &map["link"];
        assert!(link.starts_with(r#"<https://api.example.com/items?page=1>; rel="first", <"#), "{link}");
        assert_eq!(
            crate::paging::link_next(link).as_deref(),
            Some("https://api.example.com/items?page=2"),
            "the next page, from the middle line"
        );
    }

    #[test]
    fn one_client_per_allowance() {
        for index in 0..4 {
            let access = access_of(index);
            assert_eq!(usize::from(access.loopback) + 2 * usize::from(access.private), index);
        }
    }
}

//! [`HttpClient`] over reqwest (rustls), one connection pool per process.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::contracts::HttpMethod;
use crate::ports::{HttpClient, HttpRequest, HttpResponse, PortError};

/// reqwest-backed client. Build once at cold start and share.
#[derive(Clone, Debug)]
pub struct ReqwestClient {
    client: reqwest::Client,
}

impl ReqwestClient {
    /// A client that does not follow redirects (a redirect is returned as
    /// the 3xx response, so callers can re-check the target host) and sends
    /// `User-Agent: tributary/<version>`.
    ///
    /// # Errors
    /// [`PortError::Permanent`] if the TLS backend cannot be initialised.
    pub fn new() -> Result<Self, PortError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("tributary/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|err| PortError::Permanent {
                operation: "build HTTP client",
                target: "reqwest".into(),
                message: err.to_string(),
            })?;
        Ok(Self { client })
    }
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
        let mut builder = self.client.request(method, request.url.clone()).timeout(request.timeout);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        if let Some(body) = request.body {
            builder = builder.header("content-type", "application/json").body(body);
        }
        let response = builder.send().await.map_err(|err| {
            // A request that cannot even be built (an invalid header value,
            // say) fails the same way on every retry.
            let message = describe(&err);
            let target = target.clone();
            if err.is_builder() {
                PortError::Permanent { operation: "HTTP call", target, message }
            } else {
                PortError::Transient { operation: "HTTP call", target, message }
            }
        })?;
        let status = response.status().as_u16();
        let headers: BTreeMap<String, String> = response
            .headers()
            .iter()
            .filter_map(|(name, value)| Some((name.as_str().to_ascii_lowercase(), value.to_str().ok()?.to_string())))
            .collect();
        let body = response.bytes().await.map_err(|err| PortError::Transient {
            operation: "HTTP read body",
            target,
            message: describe(&err),
        })?;
        Ok(HttpResponse { status, headers, body })
    }
}

/// The URL without query string or user info, safe to log.
pub fn redacted_url(url: &url::Url) -> String {
    let mut url = url.clone();
    let had_query = url.query().is_some();
    url.set_query(None);
    let _ = url.set_password(None);
    let _ = url.set_username("");
    if had_query { format!("{url}?…") } else { url.to_string() }
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
    // reqwest's Display includes the URL with its query; strip it.
    let err = err.to_string();
    let detail = err.split(" for url (").next().unwrap_or(&err);
    format!("{kind}: {detail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacted_url_drops_query_and_credentials() {
        let url = url::Url::parse("https://user:pw@api.example.com/v1/x?api_key=SECRET&a=1").expect("url");
        let shown = redacted_url(&url);
        assert_eq!(shown, "https://api.example.com/v1/x?…");
        assert!(!shown.contains("SECRET") && !shown.contains("pw"));
    }
}

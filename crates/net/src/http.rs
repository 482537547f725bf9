//! What both services share on the wire: error responses, and posting an envelope.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use pog_signed::{Envelope, WireError};

/// An HTTP error with a JSON body `{"error": "..."}`, logged when it is made.
#[derive(Debug)]
pub struct ApiError {
    /// The response status.
    pub status: StatusCode,
    /// Why the request was refused, sent as the body's `error`.
    pub message: String,
}

impl ApiError {
    /// An error answered with `status` and `message`; logs the refusal.
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        let message = message.into();
        tracing::info!(%status, %message, "refused a request");
        ApiError { status, message }
    }
}

/// The status a signed message refused on the wire is answered with: 413 for one too large,
/// 403 for a refused signature, 400 for anything else.
pub fn wire_status(e: &WireError) -> StatusCode {
    match e {
        WireError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        WireError::Signature(_) => StatusCode::FORBIDDEN,
        _ => StatusCode::BAD_REQUEST,
    }
}

impl From<WireError> for ApiError {
    fn from(e: WireError) -> Self {
        ApiError::new(wire_status(&e), e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            axum::Json(serde_json::json!({ "error": self.message })),
        )
            .into_response()
    }
}

/// A signed envelope as an HTTP 200 response.
pub fn envelope_response(envelope: Envelope) -> Response {
    axum::Json(envelope).into_response()
}

/// Why posting to a peer failed. Callers decide (retry? give up?) by the variant.
#[derive(Debug, thiserror::Error)]
pub enum PostError {
    /// Nothing listens there (connection refused, no route, DNS failure): the peer is down.
    #[error("POST {url}: cannot connect: {source}")]
    Unreachable {
        /// The URL posted to.
        url: String,
        /// The client's error.
        source: reqwest::Error,
    },
    /// The peer did not answer in time.
    #[error("POST {url}: no answer within {timeout:?}")]
    Timeout {
        /// The URL posted to.
        url: String,
        /// How long the answer was waited for.
        timeout: std::time::Duration,
    },
    /// The connection broke part-way.
    #[error("POST {url}: {source}")]
    Transport {
        /// The URL posted to.
        url: String,
        /// The client's error.
        source: reqwest::Error,
    },
    /// The answer was larger than this kind of answer may be.
    #[error("POST {url}: the answer exceeds {limit} bytes")]
    TooLarge {
        /// The URL posted to.
        url: String,
        /// The most bytes the answer may have.
        limit: usize,
    },
    /// The peer answered with an error status; `reason` is its `error` text, cut to 300
    /// characters.
    #[error("POST {url}: {status}: {reason}")]
    Refused {
        /// The URL posted to.
        url: String,
        /// The peer's HTTP status.
        status: reqwest::StatusCode,
        /// The peer's `error` text, at most 300 characters.
        reason: String,
    },
    /// The envelope could not be encoded as JSON: nothing was sent.
    #[error("POST {url}: cannot encode the message: {source}")]
    Encode {
        /// The URL it was for.
        url: String,
        /// The encoder's error.
        source: serde_json::Error,
    },
}

impl PostError {
    /// The peer could not be reached at all (waiting for it to start may help).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, PostError::Unreachable { .. })
    }

    /// A failure of the transport rather than an answer from the peer.
    fn transport(url: &str, timeout: std::time::Duration, source: reqwest::Error) -> PostError {
        let url = url.to_string();
        if source.is_timeout() {
            PostError::Timeout { url, timeout }
        } else if source.is_connect() {
            PostError::Unreachable { url, source }
        } else {
            PostError::Transport { url, source }
        }
    }
}

/// Posts an envelope and returns the bytes sent and the response body, or the peer's error.
/// The answer must come within `timeout` and stay under `max_answer` bytes, or it is dropped;
/// a peer's error is reduced to its `error` text (at most 300 characters).
pub async fn post_counted(
    client: &reqwest::Client,
    url: &str,
    envelope: &Envelope,
    timeout: std::time::Duration,
    max_answer: usize,
) -> Result<(usize, Vec<u8>), PostError> {
    let body = serde_json::to_vec(envelope).map_err(|source| PostError::Encode {
        url: url.to_string(),
        source,
    })?;
    let sent = body.len();
    let mut response = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| PostError::transport(url, timeout, e))?;
    let status = response.status();
    let mut answer = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| PostError::transport(url, timeout, e))?
    {
        if answer.len() + chunk.len() > max_answer {
            return Err(PostError::TooLarge {
                url: url.to_string(),
                limit: max_answer,
            });
        }
        answer.extend_from_slice(&chunk);
    }
    if status.is_success() {
        Ok((sent, answer))
    } else {
        let reason = serde_json::from_slice::<serde_json::Value>(&answer)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
            .unwrap_or_else(|| "no error text".into());
        Err(PostError::Refused {
            url: url.to_string(),
            status,
            reason: reason.chars().take(300).collect(),
        })
    }
}

/// Posts an envelope and returns the response body, or the peer's error.
pub async fn post(
    client: &reqwest::Client,
    url: &str,
    envelope: &Envelope,
    timeout: std::time::Duration,
) -> Result<Vec<u8>, PostError> {
    post_counted(
        client,
        url,
        envelope,
        timeout,
        pog_signed::MAX_MESSAGE_BYTES,
    )
    .await
    .map(|(_, body)| body)
}

/// Serves a router on `listener` under `limits` until the process ends (tests and simple
/// embeddings; the services use [`crate::serve::serve`] with a stop signal).
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    limits: crate::serve::Limits,
) -> std::io::Result<()> {
    crate::serve::serve(
        listener,
        router,
        limits,
        std::future::pending(),
        std::time::Duration::ZERO,
    )
    .await
}

/// Why an HTTP client could not be built. A service refuses to start without it: reqwest's
/// default client would follow redirects, use proxies from the environment and reach private
/// addresses, and the defences the hardened one carries would be silently gone.
#[derive(Debug, thiserror::Error)]
#[error("building the {purpose} HTTP client: {source}")]
pub struct BuildClientError {
    /// What the client was for ("challenge", "witness", …).
    pub purpose: &'static str,
    /// The client builder's error.
    pub source: reqwest::Error,
}

/// How an outgoing HTTP client is built. Every one of them refuses redirects: a peer must not
/// send a signed message, or the validator's requests, somewhere else.
#[derive(Clone)]
pub struct ClientSettings {
    /// What the client is for, for the error if it cannot be built.
    pub purpose: &'static str,
    /// The longest a whole request may take (none: each call sets its own).
    pub timeout: Option<std::time::Duration>,
    /// The longest connecting may take.
    pub connect_timeout: Option<std::time::Duration>,
    /// Whether a proxy from the environment (`HTTPS_PROXY`, …) may carry the requests. Off
    /// for clients whose resolver vets the addresses they reach: the proxy would be vetted in
    /// the peer's place.
    pub proxy_from_env: bool,
    /// Vets every address a name resolves to, at every connection (DNS rebinding).
    pub resolver: Option<crate::endpoint::PublicResolver>,
}

impl ClientSettings {
    /// Settings for `purpose`: no timeouts, proxies from the environment allowed, the system's
    /// resolver; redirects refused.
    pub fn new(purpose: &'static str) -> ClientSettings {
        ClientSettings {
            purpose,
            timeout: None,
            connect_timeout: None,
            proxy_from_env: true,
            resolver: None,
        }
    }

    /// The client, or why it could not be built (never a fallback to reqwest's defaults).
    pub fn build(self) -> Result<reqwest::Client, BuildClientError> {
        let mut builder = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
        if let Some(timeout) = self.timeout {
            builder = builder.timeout(timeout);
        }
        if let Some(timeout) = self.connect_timeout {
            builder = builder.connect_timeout(timeout);
        }
        if !self.proxy_from_env {
            builder = builder.no_proxy();
        }
        if let Some(resolver) = self.resolver {
            builder = builder.dns_resolver(std::sync::Arc::new(resolver));
        }
        builder.build().map_err(|source| BuildClientError {
            purpose: self.purpose,
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Every client built here refuses a redirect: a signed message posted to a peer that
    /// answers 307 is not re-posted where it points.
    #[tokio::test]
    async fn clients_refuse_redirects() {
        let reached = Arc::new(AtomicUsize::new(0));
        let counted = reached.clone();
        let target = axum::Router::new().route(
            "/elsewhere",
            axum::routing::post(move || {
                counted.fetch_add(1, Ordering::Relaxed);
                async { "reached" }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let elsewhere = format!("http://{}/elsewhere", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, target).await });
        let redirect = axum::Router::new().route(
            "/v1/register",
            axum::routing::post(move || {
                let to = elsewhere.clone();
                async move { axum::response::Redirect::temporary(&to) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/register", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, redirect).await });
        for settings in [
            ClientSettings::new("registration"),
            ClientSettings {
                proxy_from_env: false,
                resolver: Some(crate::endpoint::PublicResolver {
                    allow_private: true,
                }),
                ..ClientSettings::new("challenge")
            },
        ] {
            let client = settings.build().unwrap();
            let answer = client.post(&url).body("signed").send().await.unwrap();
            assert_eq!(answer.status(), StatusCode::TEMPORARY_REDIRECT);
        }
        assert_eq!(
            reached.load(Ordering::Relaxed),
            0,
            "a redirect was followed"
        );
    }
}

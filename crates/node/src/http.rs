//! What both services share on the wire: error responses, and posting an envelope.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pog_proof::wire::{self, Envelope, WireError};

/// An HTTP error with a JSON body `{"error": "..."}`, logged when it is made.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        let message = message.into();
        eprintln!("pog: refused a request ({status}): {message}");
        ApiError { status, message }
    }
}

impl From<WireError> for ApiError {
    fn from(e: WireError) -> Self {
        let status = match e {
            WireError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            WireError::Signature(_) => StatusCode::FORBIDDEN,
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, e.to_string())
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

/// Posts an envelope and returns the bytes sent and the response body, or the peer's error.
/// The answer must come within `timeout` and stay under the message size limit, or it is
/// dropped; a peer's error is reduced to its `error` text (at most 300 characters).
pub async fn post_counted(
    client: &reqwest::Client,
    url: &str,
    envelope: &Envelope,
    timeout: std::time::Duration,
) -> Result<(usize, Vec<u8>), String> {
    let body = serde_json::to_vec(envelope).map_err(|e| format!("encoding for {url}: {e}"))?;
    let sent = body.len();
    let mut response = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| format!("POST {url}: {e}"))?;
    let status = response.status();
    let mut answer = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("POST {url}: reading the answer: {e}"))?
    {
        if answer.len() + chunk.len() > wire::MAX_MESSAGE_BYTES {
            return Err(format!(
                "POST {url}: the answer exceeds {} bytes",
                wire::MAX_MESSAGE_BYTES
            ));
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
        Err(format!(
            "POST {url}: {status}: {}",
            reason.chars().take(300).collect::<String>()
        ))
    }
}

/// Posts an envelope and returns the response body, or the peer's error.
pub async fn post(
    client: &reqwest::Client,
    url: &str,
    envelope: &Envelope,
    timeout: std::time::Duration,
) -> Result<Vec<u8>, String> {
    post_counted(client, url, envelope, timeout)
        .await
        .map(|(_, body)| body)
}

/// Serves a router on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, router: axum::Router) -> std::io::Result<()> {
    axum::serve(listener, router).await
}

//! Alert delivery to a webhook: each alert's JSON POSTed in order from a bounded queue, failures
//! retried with backoff, so that a receiver that is slow or down holds up neither the sampling
//! loop nor its stop ([`Webhook::drain`] gives queued alerts a bounded time).

use std::time::Duration;
use tokio::sync::mpsc;

/// Alerts waiting for the webhook; past this, new ones are dropped (and logged).
pub const QUEUE: usize = 1024;
/// One delivery attempt's limit.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts per alert.
pub const ATTEMPTS: u32 = 6;
/// The first retry's wait; each next one doubles, up to 30 s.
pub const BACKOFF: Duration = Duration::from_millis(500);
/// How long a stopping monitor waits for queued alerts to go out.
pub const DRAIN: Duration = Duration::from_secs(5);

/// Why a webhook cannot be started.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The URL is neither http nor https.
    #[error("{0:?} is not an http or https URL")]
    Scheme(String),
    /// The HTTP client could not be built (no TLS backend, …): no fallback client is used.
    #[error("building the webhook client: {0}")]
    Client(#[source] reqwest::Error),
}

/// A running webhook: the queue of alerts and the task that posts them.
pub struct Webhook {
    queue: mpsc::Sender<serde_json::Value>,
    worker: tokio::task::JoinHandle<()>,
    runtime: tokio::runtime::Handle,
}

impl Webhook {
    /// Parses `url` (an http or https URL) for [`Webhook::start`].
    pub fn parse_url(url: &str) -> Result<reqwest::Url, WebhookError> {
        reqwest::Url::parse(url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| WebhookError::Scheme(url.to_string()))
    }

    /// Starts posting queued alerts to `url` on `runtime`. The client follows no redirect: a
    /// 307/308 would re-post the alert wherever the receiver points.
    pub fn start(
        url: reqwest::Url,
        runtime: tokio::runtime::Handle,
    ) -> Result<Webhook, WebhookError> {
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(WebhookError::Client)?;
        let (queue, pending) = mpsc::channel(QUEUE);
        let worker = runtime.spawn(deliver(client, url, pending));
        Ok(Webhook {
            queue,
            worker,
            runtime,
        })
    }

    /// Queues one alert; when [`QUEUE`] alerts already wait, it is dropped and logged.
    pub fn send(&self, alert: serde_json::Value) {
        if self.queue.try_send(alert).is_err() {
            tracing::warn!("webhook: {QUEUE} alerts already waiting: this one is dropped");
        }
    }

    /// Closes the queue and waits up to `within` for the alerts still queued to go out (a
    /// webhook that is down does not keep the monitor from stopping); `false`, and a warning,
    /// when some were dropped. Blocking: call it outside the runtime's workers.
    pub fn drain(self, within: Duration) -> bool {
        let Webhook {
            queue,
            worker,
            runtime,
        } = self;
        drop(queue);
        let drained = runtime
            .block_on(async { tokio::time::timeout(within, worker).await })
            .is_ok();
        if !drained {
            tracing::warn!("webhook: alerts still undelivered after {within:?}: dropped");
        }
        drained
    }
}

/// The receiver as logs name it: scheme, host and port only (a webhook URL often carries a
/// secret token in its path or query).
fn shown(url: &reqwest::Url) -> String {
    format!(
        "{}://{}{}",
        url.scheme(),
        url.host_str().unwrap_or("?"),
        url.port().map(|p| format!(":{p}")).unwrap_or_default()
    )
}

/// Posts each queued alert to the webhook, in order, retrying failures with backoff. A
/// client error other than 429 is not retried (the receiver refuses the alert itself).
async fn deliver(
    client: reqwest::Client,
    url: reqwest::Url,
    mut pending: mpsc::Receiver<serde_json::Value>,
) {
    let shown = shown(&url);
    while let Some(alert) = pending.recv().await {
        let mut wait = BACKOFF;
        for attempt in 1..=ATTEMPTS {
            let why = match client.post(url.clone()).json(&alert).send().await {
                Ok(response) if response.status().is_success() => break,
                Ok(response)
                    if response.status().is_client_error()
                        && response.status() != reqwest::StatusCode::TOO_MANY_REQUESTS =>
                {
                    tracing::warn!(
                        "webhook {shown}: answered {}: alert not delivered, not retried",
                        response.status()
                    );
                    break;
                }
                Ok(response) => format!("answered {}", response.status()),
                Err(e) => {
                    // reqwest's own words (without the URL), then the causes it wraps
                    // (refused, timed out, …).
                    let e = e.without_url();
                    let mut why = e.to_string();
                    let mut cause = std::error::Error::source(&e);
                    while let Some(c) = cause {
                        why.push_str(&format!(": {c}"));
                        cause = c.source();
                    }
                    why
                }
            };
            if attempt == ATTEMPTS {
                tracing::warn!("webhook {shown}: {why}: gave up after {attempt} attempts");
            } else {
                tracing::warn!(
                    "webhook {shown}: {why}: retrying in {:.1} s",
                    wait.as_secs_f64()
                );
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(30));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_http_and_https_urls_are_taken_and_logs_hide_the_secret() {
        assert!(Webhook::parse_url("ftp://x/").is_err());
        assert!(Webhook::parse_url("not a url").is_err());
        let url = Webhook::parse_url("https://hooks.example:8443/t/s3cret?token=x").unwrap();
        assert_eq!(shown(&url), "https://hooks.example:8443");
    }

    #[test]
    fn a_webhook_that_is_down_is_drained_within_its_limit() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        // A port nobody listens on.
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let url = Webhook::parse_url(&format!("http://{closed}/hook")).unwrap();
        let webhook = Webhook::start(url, rt.handle().clone()).unwrap();
        webhook.send(serde_json::json!({"kind": "xid"}));
        let started = std::time::Instant::now();
        assert!(!webhook.drain(Duration::from_millis(300)));
        assert!(started.elapsed() < Duration::from_secs(3));
    }
}

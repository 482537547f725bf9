//! Serving a router to the open internet without letting peers exhaust the service: a cap on
//! open connections, a deadline for the request head and another for the body, a global cap on
//! request-body bytes held in memory at once, and a graceful stop. Both services run on it.
//!
//! Every request body is read here, under its deadline and its share of the byte budget,
//! before a handler sees it; a handler then gets it whole, and the peer's address as
//! `ConnectInfo<SocketAddr>`.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tower::ServiceExt;

/// What one server lets its peers hold.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections open at once; more are closed as soon as they are accepted.
    pub max_connections: usize,
    /// Connections open at once from one source address, so that one peer cannot take all
    /// of `max_connections`.
    pub max_connections_per_source: usize,
    /// Time for a request's head (request line and headers) to arrive, on a new connection
    /// and between requests on a kept-alive one.
    pub header_timeout: Duration,
    /// Time for a request's body to arrive once its head has.
    pub body_timeout: Duration,
    /// The largest body one request may carry.
    pub max_body_bytes: usize,
    /// Request-body bytes held in memory across all requests at once; a request that does
    /// not fit is refused with 503 rather than queued.
    pub max_inflight_body_bytes: usize,
}

impl Limits {
    /// Defaults for a service whose requests are small (the validator: registrations).
    pub fn small_requests() -> Limits {
        Limits {
            max_connections: 1024,
            max_connections_per_source: 64,
            header_timeout: Duration::from_secs(5),
            body_timeout: Duration::from_secs(10),
            max_body_bytes: 256 << 10,
            max_inflight_body_bytes: 32 << 20,
        }
    }

    /// Defaults for a service that takes full protocol messages (the agent).
    pub fn protocol_messages() -> Limits {
        Limits {
            max_connections: 256,
            max_connections_per_source: 64,
            header_timeout: Duration::from_secs(5),
            body_timeout: Duration::from_secs(30),
            max_body_bytes: pog_proof::wire::MAX_MESSAGE_BYTES,
            max_inflight_body_bytes: 4 * pog_proof::wire::MAX_MESSAGE_BYTES,
        }
    }
}

/// Serves `router` on `listener` under `limits` until `shutdown` completes; then stops
/// accepting and waits (up to `drain`) for the requests in progress to finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) -> std::io::Result<()> {
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let per_source = Arc::new(std::sync::Mutex::new(PerSource::default()));
    let body_bytes = Arc::new(Semaphore::new(limits.max_inflight_body_bytes));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors or a connection reset before it was taken:
                    // wait a moment rather than spin.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(source) =
            PerSource::enter(&per_source, peer.ip(), limits.max_connections_per_source)
        else {
            tracing::warn!(%peer, limit = limits.max_connections_per_source, "per-source connection limit reached: closed");
            drop(stream);
            continue;
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            tracing::warn!(%peer, limit = limits.max_connections, "connection limit reached: closed");
            drop(stream);
            continue;
        };
        let router = router.clone();
        let (limits, body_bytes, mut stopped) =
            (limits.clone(), body_bytes.clone(), stopped.clone());
        let header_timeout = limits.header_timeout;
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let (router, limits, body_bytes) =
                        (router.clone(), limits.clone(), body_bytes.clone());
                    async move {
                        let response = match buffer_body(request, &limits, &body_bytes).await {
                            Ok((mut request, _held)) => {
                                request.extensions_mut().insert(ConnectInfo(peer));
                                router.oneshot(request).await.into_response()
                            }
                            Err(refused) => refused,
                        };
                        Ok::<_, std::convert::Infallible>(response)
                    }
                });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = stopped.changed() => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            drop((permit, source));
        });
    }
    let _ = stop.send(true);
    // Requests in progress finish (each holds a connection permit) or are cut off at `drain`.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(drain, connections.acquire_many(all)).await;
    Ok(())
}

/// Open connections per source address.
#[derive(Default)]
struct PerSource(std::collections::HashMap<std::net::IpAddr, usize>);

/// One open connection counted against its source; uncounted when dropped.
struct SourceGuard {
    table: Arc<std::sync::Mutex<PerSource>>,
    ip: std::net::IpAddr,
}

impl PerSource {
    /// Counts a new connection from `ip`, unless it already has `limit` open.
    fn enter(
        table: &Arc<std::sync::Mutex<PerSource>>,
        ip: std::net::IpAddr,
        limit: usize,
    ) -> Option<SourceGuard> {
        let mut counts = table.lock().expect("lock");
        let open = counts.0.entry(ip).or_insert(0);
        if *open >= limit {
            return None;
        }
        *open += 1;
        Some(SourceGuard {
            table: table.clone(),
            ip,
        })
    }
}

impl Drop for SourceGuard {
    fn drop(&mut self) {
        let mut counts = self.table.lock().expect("lock");
        if let Some(open) = counts.0.get_mut(&self.ip) {
            *open -= 1;
            if *open == 0 {
                counts.0.remove(&self.ip);
            }
        }
    }
}

/// Reads a request's whole body within the limits; returns the request with the body in
/// memory and the byte permits it holds, or the refusal to send.
async fn buffer_body(
    request: Request<hyper::body::Incoming>,
    limits: &Limits,
    budget: &Arc<Semaphore>,
) -> Result<(Request<Body>, tokio::sync::OwnedSemaphorePermit), Response> {
    let refuse = |status: StatusCode, message: String| {
        (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
    };
    let (parts, body) = request.into_parts();
    // The body's size as declared; a body without a length is read up to the per-request
    // limit, and takes that much of the budget while it is read.
    let declared = parts
        .headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limits.max_body_bytes) {
        return Err(refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "a request body may be at most {} bytes",
                limits.max_body_bytes
            ),
        ));
    }
    let reserve = declared.unwrap_or(limits.max_body_bytes).max(1);
    let permits = u32::try_from(reserve).unwrap_or(u32::MAX);
    let held = budget
        .clone()
        .try_acquire_many_owned(permits)
        .map_err(|_| {
            refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many request bytes in flight: retry shortly".into(),
            )
        })?;
    let limited = Body::new(body);
    let read = axum::body::to_bytes(limited, limits.max_body_bytes);
    let bytes = match tokio::time::timeout(limits.body_timeout, read).await {
        Err(_) => {
            return Err(refuse(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {:?}",
                    limits.body_timeout
                ),
            ))
        }
        Ok(Err(e)) => {
            return Err(refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("reading the request body: {e}"),
            ))
        }
        Ok(Ok(bytes)) => bytes,
    };
    Ok((Request::from_parts(parts, Body::from(bytes)), held))
}

/// Installs the handlers for SIGTERM and SIGINT now (call it inside a Tokio runtime, before
/// the service announces itself, so that no signal can arrive unhandled), and returns a future
/// that resolves when either arrives.
pub fn stop_signal() -> std::io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}

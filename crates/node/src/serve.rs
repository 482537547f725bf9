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
    /// The longest a connection stays open, however busy: after it, the connection finishes
    /// its request in progress and closes (a peer that sends requests and never reads the
    /// answers cannot hold a connection forever).
    pub max_connection_age: Duration,
    /// The largest body one request may carry.
    pub max_body_bytes: usize,
    /// Request-body bytes one source address may hold in memory at once, so that one peer
    /// cannot take the whole of `max_inflight_body_bytes`.
    pub max_inflight_body_bytes_per_source: usize,
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
            max_connection_age: Duration::from_secs(60),
            max_body_bytes: 256 << 10,
            max_inflight_body_bytes_per_source: 1 << 20,
            max_inflight_body_bytes: 32 << 20,
        }
    }

    /// Defaults for the agent: what it is sent (challenges, open requests) is a few KiB; the
    /// large messages (openings) travel in its answers, not in its requests.
    pub fn protocol_messages() -> Limits {
        Limits {
            max_connections: 256,
            max_connections_per_source: 64,
            header_timeout: Duration::from_secs(5),
            body_timeout: Duration::from_secs(30),
            max_connection_age: Duration::from_secs(600),
            max_body_bytes: 1 << 20,
            max_inflight_body_bytes_per_source: 2 << 20,
            max_inflight_body_bytes: 16 << 20,
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
        let Some(source) = PerSource::enter(&per_source, source_key(peer.ip()), &limits) else {
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
        let (header_timeout, max_age) = (limits.header_timeout, limits.max_connection_age);
        let source_bytes = source.bytes.clone();
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let (router, limits, body_bytes, source_bytes) = (
                        router.clone(),
                        limits.clone(),
                        body_bytes.clone(),
                        source_bytes.clone(),
                    );
                    async move {
                        let budgets = [&body_bytes, &source_bytes];
                        let response = match buffer_body(request, &limits, budgets).await {
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
                () = tokio::time::sleep(max_age) => {
                    // Finish the request in progress (within the header deadline), then go.
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(header_timeout, connection).await;
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

/// The unit a per-source limit counts: an IPv4 address, or an IPv6 /64 (one host commonly
/// holds a whole /64, so counting single IPv6 addresses would give it unlimited sources).
pub fn source_key(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip {
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => std::net::IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                std::net::IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
        v4 => v4,
    }
}

/// What each source address holds: open connections, and its share of the body-byte budget.
#[derive(Default)]
struct PerSource(std::collections::HashMap<std::net::IpAddr, (usize, Arc<Semaphore>)>);

/// One open connection counted against its source; uncounted when dropped.
struct SourceGuard {
    table: Arc<std::sync::Mutex<PerSource>>,
    ip: std::net::IpAddr,
    /// The source's body-byte budget, shared by all its connections.
    bytes: Arc<Semaphore>,
}

impl PerSource {
    /// Counts a new connection from `ip`, unless it already has as many open as `limits`
    /// allow.
    fn enter(
        table: &Arc<std::sync::Mutex<PerSource>>,
        ip: std::net::IpAddr,
        limits: &Limits,
    ) -> Option<SourceGuard> {
        let mut held = table.lock().expect("lock");
        let (open, bytes) = held.0.entry(ip).or_insert_with(|| {
            (
                0,
                Arc::new(Semaphore::new(limits.max_inflight_body_bytes_per_source)),
            )
        });
        if *open >= limits.max_connections_per_source {
            return None;
        }
        *open += 1;
        Some(SourceGuard {
            table: table.clone(),
            ip,
            bytes: bytes.clone(),
        })
    }
}

impl Drop for SourceGuard {
    fn drop(&mut self) {
        let mut held = self.table.lock().expect("lock");
        if let Some((open, _)) = held.0.get_mut(&self.ip) {
            *open -= 1;
            if *open == 0 {
                held.0.remove(&self.ip);
            }
        }
    }
}

/// Reads a request's whole body within the limits, its bytes counted against each of
/// `budgets` (the server's and its source's) while it is read and handled; returns the request
/// with the body in memory and the permits it holds, or the refusal to send.
async fn buffer_body(
    request: Request<hyper::body::Incoming>,
    limits: &Limits,
    budgets: [&Arc<Semaphore>; 2],
) -> Result<(Request<Body>, Vec<tokio::sync::OwnedSemaphorePermit>), Response> {
    let refuse = |status: StatusCode, message: String| {
        (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
    };
    let (parts, body) = request.into_parts();
    // The body's size as declared. A chunked body (no length) is read up to the per-request
    // limit and takes that much of the budgets; a request with neither has no body (HTTP/1.1).
    let declared = parts
        .headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    let chunked = parts
        .headers
        .contains_key(axum::http::header::TRANSFER_ENCODING);
    if declared.is_some_and(|n| n > limits.max_body_bytes) {
        return Err(refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "a request body may be at most {} bytes",
                limits.max_body_bytes
            ),
        ));
    }
    let reserve = match (declared, chunked) {
        (Some(n), _) => n,
        (None, true) => limits.max_body_bytes,
        (None, false) => 0,
    };
    let mut held = Vec::with_capacity(2);
    if reserve > 0 {
        let permits = u32::try_from(reserve).unwrap_or(u32::MAX);
        for budget in budgets {
            let permit = budget
                .clone()
                .try_acquire_many_owned(permits)
                .map_err(|_| {
                    refuse(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "too many request bytes in flight: retry shortly".into(),
                    )
                })?;
            held.push(permit);
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_64_is_one_source() {
        let a: std::net::IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: std::net::IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: std::net::IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(source_key(a), source_key(b));
        assert_ne!(source_key(a), source_key(c));
        let mapped: std::net::IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(
            source_key(mapped),
            "192.0.2.7".parse::<std::net::IpAddr>().unwrap()
        );
    }
}

//! Serving a router to the open internet without letting peers exhaust the service: a cap on
//! open connections, a deadline for the request head and another for the body, global caps on
//! the request-body bytes and on the response bytes held in memory at once, peers that stop
//! reading disconnected, and a graceful stop. Both services run on it.
//!
//! Every request body is read here, under its deadline and its share of the byte budget,
//! before a handler sees it; a handler then gets it whole, and the peer's address as
//! `ConnectInfo<SocketAddr>`. Every response body larger than [`PIECE_BYTES`] holds its share
//! of the response budget until it is sent or its connection is gone: a body already in memory
//! its length, a body read as it is sent (marked [`Streamed`]) one piece of [`PIECE_BYTES`].
//! Smaller answers (registrations, reports, orders, health checks) are never refused for the
//! budget, so peers holding it with large pages cannot shut the API; they are bounded by the
//! connections, one answer each.
//!
//! What serving holds in memory is then at most the two budgets, one small answer per open
//! connection, plus, per open connection,
//! hyper's buffers: a read buffer of [`BUFFER_BYTES`] and a write queue under
//! [`BUFFER_BYTES`] + [`PIECE_BYTES`] (hyper takes a new piece only while less than
//! [`BUFFER_BYTES`] waits, and every piece it is given is a fresh allocation of at most
//! [`PIECE_BYTES`]): under 96 KiB a connection. The kernel's socket buffers are the kernel's
//! (`net.ipv4.tcp_wmem`, `tcp_mem`).

use crate::locked::Locked;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{header, HeaderValue, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper::body::{Body as HttpBody, Bytes, Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

/// The size of hyper's buffers on each connection: its read buffer, and the response bytes it
/// queues before it takes another piece. A request head larger than this is refused (431).
pub const BUFFER_BYTES: usize = 16 << 10;

/// The most bytes of a response body handed to hyper at once (larger frames are copied out
/// in pieces of this size), what a [`Streamed`] body reads at a time, and what a peer whose
/// socket is full must take within [`Limits::drain_timeout`]. (Smaller pieces cost throughput:
/// 200 readers of a 10 MiB bundle took twice as long with 16 KiB pieces.)
pub const PIECE_BYTES: usize = 64 << 10;

/// Marks a response whose body is read as it is sent, at most [`PIECE_BYTES`] at a time (a
/// log tile read from disk): it holds one piece of the response budget, not its length, and
/// may wait up to [`Limits::response_wait`] for it. Set it in the response's extensions.
#[derive(Debug, Clone, Copy)]
pub struct Streamed;

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
    /// Response-body bytes held in memory across all connections at once, from when the
    /// handler answers until the body is sent or its connection is gone. A body in memory
    /// that does not fit is dropped and answered 503 at once; a [`Streamed`] one waits up to
    /// `response_wait` for its piece, then gets 503.
    pub max_inflight_response_bytes: usize,
    /// Response-body bytes one source address may hold at once, so that one peer cannot take
    /// the whole of `max_inflight_response_bytes`.
    pub max_inflight_response_bytes_per_source: usize,
    /// How long a [`Streamed`] response waits for its share of the response budgets.
    pub response_wait: Duration,
    /// Once the peer stops taking a response (its socket's buffer is full), the time it has
    /// to take [`PIECE_BYTES`] more; a peer that does not is disconnected and what its
    /// response held is freed. (A peer that requests and never reads would otherwise hold its
    /// response until the connection's maximum age.)
    pub drain_timeout: Duration,
}

impl Limits {
    /// Defaults for a service whose requests are small (the validator: registrations). A
    /// source address may hold an eighth of the response budget: two of the largest record
    /// pages (4 MiB each) at a time.
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
            max_inflight_response_bytes: 64 << 20,
            max_inflight_response_bytes_per_source: 8 << 20,
            response_wait: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(10),
        }
    }

    /// Defaults for the agent: what it is sent (challenges, open requests) is a few KiB; the
    /// large messages (openings) travel in its answers, not in its requests. Its header
    /// timeout is also its wait for an exchange's next request on a kept-alive connection
    /// (the openings after the commitment, a proof's next step), which a validator on a
    /// loaded host sends seconds after the answer before it: at 5 s, 715 and 760 of 2,000
    /// simulated GPUs' exchanges broke on it in one overloaded round, at 30 s none
    /// (docs/protocol.md, "Load"). A slow head holds a connection that long; the connection
    /// limits bound how many.
    pub fn protocol_messages() -> Limits {
        Limits {
            max_connections: 256,
            max_connections_per_source: 64,
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            max_connection_age: Duration::from_secs(600),
            max_body_bytes: 1 << 20,
            max_inflight_body_bytes_per_source: 2 << 20,
            max_inflight_body_bytes: 16 << 20,
            // Its answers (openings) may be as large as a message (32 MiB), and its peers are
            // the few validators it trusts: one may take the whole budget
            // ([`Limits::serving_gpus`] sizes it for the GPUs served).
            max_inflight_response_bytes: 128 << 20,
            max_inflight_response_bytes_per_source: 128 << 20,
            response_wait: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(10),
        }
    }
}

impl Limits {
    /// These limits for an agent serving `gpus` GPUs: a validator challenges all of them at
    /// once, so their openings (up to about 10 MiB each at the default leaves, at most a
    /// message each) must fit together, twice over, or the later ones would be refused and
    /// recorded as the agent's failure.
    pub fn serving_gpus(self, gpus: usize) -> Limits {
        let needed = gpus
            .saturating_mul(2)
            .saturating_mul(pog_signed::MAX_MESSAGE_BYTES);
        let budget = self.max_inflight_response_bytes.max(needed);
        Limits {
            max_inflight_response_bytes: budget,
            max_inflight_response_bytes_per_source: budget,
            ..self
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
    let response_bytes = Arc::new(Semaphore::new(limits.max_inflight_response_bytes));
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
        let (limits, body_bytes, response_bytes, mut stopped) = (
            limits.clone(),
            body_bytes.clone(),
            response_bytes.clone(),
            stopped.clone(),
        );
        let (header_timeout, max_age) = (limits.header_timeout, limits.max_connection_age);
        let drain_timeout = limits.drain_timeout;
        let (source_bytes, source_responses) = (source.bytes.clone(), source.responses.clone());
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                    let (router, limits) = (router.clone(), limits.clone());
                    let (body_bytes, source_bytes) = (body_bytes.clone(), source_bytes.clone());
                    let (response_bytes, source_responses) =
                        (response_bytes.clone(), source_responses.clone());
                    async move {
                        let budgets = [&body_bytes, &source_bytes];
                        let response = match buffer_body(request, &limits, budgets).await {
                            Ok((mut request, _held)) => {
                                request.extensions_mut().insert(ConnectInfo(peer));
                                router.oneshot(request).await.into_response()
                            }
                            Err(refused) => refused,
                        };
                        let budgets = [&source_responses, &response_bytes];
                        let response = hold_response(response, budgets, limits.response_wait);
                        Ok::<_, std::convert::Infallible>(response.await)
                    }
                });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .max_buf_size(BUFFER_BYTES)
                .serve_connection(TokioIo::new(Draining::new(stream, drain_timeout)), service);
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

/// What one source address holds: open connections, and its shares of the request-body and
/// response byte budgets (shared by all its connections).
struct Source {
    open: usize,
    bytes: Arc<Semaphore>,
    responses: Arc<Semaphore>,
}

/// Each source address with a connection open.
#[derive(Default)]
struct PerSource(std::collections::HashMap<std::net::IpAddr, Source>);

/// One open connection counted against its source; uncounted when dropped.
struct SourceGuard {
    table: Arc<std::sync::Mutex<PerSource>>,
    ip: std::net::IpAddr,
    /// The source's request-body byte budget.
    bytes: Arc<Semaphore>,
    /// The source's response byte budget.
    responses: Arc<Semaphore>,
}

impl PerSource {
    /// Counts a new connection from `ip`, unless it already has as many open as `limits`
    /// allow.
    fn enter(
        table: &Arc<std::sync::Mutex<PerSource>>,
        ip: std::net::IpAddr,
        limits: &Limits,
    ) -> Option<SourceGuard> {
        let mut held = table.locked();
        let source = held.0.entry(ip).or_insert_with(|| Source {
            open: 0,
            bytes: Arc::new(Semaphore::new(limits.max_inflight_body_bytes_per_source)),
            responses: Arc::new(Semaphore::new(
                limits.max_inflight_response_bytes_per_source,
            )),
        });
        if source.open >= limits.max_connections_per_source {
            return None;
        }
        source.open += 1;
        Some(SourceGuard {
            table: table.clone(),
            ip,
            bytes: source.bytes.clone(),
            responses: source.responses.clone(),
        })
    }
}

impl Drop for SourceGuard {
    fn drop(&mut self) {
        let mut held = self.table.locked();
        if let Some(source) = held.0.get_mut(&self.ip) {
            source.open -= 1;
            if source.open == 0 {
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

/// Gives a response its share of `budgets` (its source's, then the server's) for as long as
/// its body is held, or the 503 to send instead. A body already in memory takes its length,
/// at once or never (waiting would hold it outside the budget); a [`Streamed`] one has read
/// nothing yet, takes one piece and may wait up to `wait` for it.
async fn hold_response(
    response: Response,
    budgets: [&Arc<Semaphore>; 2],
    wait: Duration,
) -> Response {
    let (parts, body) = response.into_parts();
    let hint = body.size_hint();
    let size = hint.upper().unwrap_or(hint.lower());
    let streamed = parts.extensions.get::<Streamed>().is_some();
    let need = if streamed {
        size.min(PIECE_BYTES as u64)
    } else {
        size
    };
    // A small answer is bounded by the connections (one each) and is never refused: the
    // budget is for the large ones, which a few peers could otherwise hold to shut the API.
    if need == 0 || (!streamed && size <= PIECE_BYTES as u64) {
        return Response::from_parts(parts, body);
    }
    let deadline = tokio::time::Instant::now() + wait;
    let mut permits = Vec::with_capacity(budgets.len());
    for budget in budgets {
        let permit = match u32::try_from(need) {
            Err(_) => None,
            Ok(n) if streamed => {
                tokio::time::timeout_at(deadline, budget.clone().acquire_many_owned(n))
                    .await
                    .ok()
                    .and_then(Result::ok)
            }
            Ok(n) => budget.clone().try_acquire_many_owned(n).ok(),
        };
        let Some(permit) = permit else {
            let mut busy = (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(serde_json::json!({
                    "error": "the service holds as many response bytes as it allows: retry"
                })),
            )
                .into_response();
            busy.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return busy;
        };
        permits.push(permit);
    }
    let held = Held {
        body,
        rest: Bytes::new(),
        _permits: permits,
    };
    Response::from_parts(parts, Body::new(held))
}

/// A response body holding its share of the response budgets until it is dropped (sent, or
/// its connection gone). It hands hyper fresh pieces of at most [`PIECE_BYTES`]: what hyper
/// still queues once the body has ended is then a connection's buffer, never a slice keeping
/// a whole large body alive after its budget was given back.
struct Held {
    body: Body,
    /// The part not handed over yet of a data frame larger than a piece.
    rest: Bytes,
    _permits: Vec<OwnedSemaphorePermit>,
}

impl HttpBody for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        if this.rest.is_empty() {
            match std::task::ready!(Pin::new(&mut this.body).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if data.len() > PIECE_BYTES => this.rest = data,
                    Ok(data) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                    Err(trailers) => return Poll::Ready(Some(Ok(trailers))),
                },
                end_or_error => return Poll::Ready(end_or_error),
            }
        }
        let n = this.rest.len().min(PIECE_BYTES);
        let piece = Bytes::copy_from_slice(&this.rest[..n]);
        // The last piece copied out drops the frame's allocation (an empty slice is a new
        // empty `Bytes`).
        this.rest = this.rest.slice(n..);
        Poll::Ready(Some(Ok(Frame::data(piece))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let inner = self.body.size_hint();
        let rest = self.rest.len() as u64;
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower() + rest);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + rest);
        }
        hint
    }
}

/// A connection's socket that gives up on a peer which stops reading: once a write finds the
/// socket's buffer full, the peer has `timeout` to take [`PIECE_BYTES`] more (or everything
/// queued, whichever is less), or the write fails and hyper closes the connection, dropping
/// the response and its share of the budgets.
struct Draining<T> {
    io: T,
    timeout: Duration,
    /// Since the socket was last found full: the deadline, and the bytes the peer took since.
    stall: Option<(Pin<Box<tokio::time::Sleep>>, usize)>,
}

impl<T> Draining<T> {
    fn new(io: T, timeout: Duration) -> Draining<T> {
        Draining {
            io,
            timeout,
            stall: None,
        }
    }

    /// Accounts for a write's outcome: progress counts toward the bytes the peer must take;
    /// a full socket starts (or keeps) the deadline, whose passing fails the write.
    fn written(
        &mut self,
        cx: &mut Context<'_>,
        outcome: Poll<std::io::Result<usize>>,
    ) -> Poll<std::io::Result<usize>> {
        match outcome {
            Poll::Ready(Ok(n)) => {
                if let Some((_, taken)) = &mut self.stall {
                    *taken += n;
                    if *taken >= PIECE_BYTES {
                        self.stall = None;
                    }
                }
                Poll::Ready(Ok(n))
            }
            Poll::Pending => {
                let timeout = self.timeout;
                let (deadline, _) = self
                    .stall
                    .get_or_insert_with(|| (Box::pin(tokio::time::sleep(timeout)), 0));
                match deadline.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("the peer took no response bytes for {timeout:?}"),
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
            failed => failed,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Draining<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Draining<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.io).poll_write(cx, buf);
        this.written(cx, outcome)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let outcome = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.written(cx, outcome)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // hyper flushes once everything it queued is written: the peer took it all.
        let this = self.get_mut();
        this.stall = None;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
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

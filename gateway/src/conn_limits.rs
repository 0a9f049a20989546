//! Limits on connections, applied by every listener (the API's and the S3 door's, plain and
//! TLS) around hyper: how many connections are open at once, how long one may sit without a
//! request in progress, and how long a peer may stop reading what it asked for. hyper bounds
//! the rest (header sizes, HTTP/1 header-read time, HTTP/2 streams: see `server.rs`).
//!
//! hyper has no idle timeout of its own for HTTP/2, nor for a connection that never finishes
//! its first bytes (the HTTP/1-or-2 detection waits for them without a clock), so it lives here:
//! the acceptor wraps each connection's I/O ([`Watched`]) and its service ([`Tracked`]). The
//! service counts the requests in progress (a request ends when its response body is done or
//! dropped); while none is, a pending read also waits on the idle clock, which started when
//! the last request ended (or the connection opened), and ends the connection with an error
//! when it runs out. Bytes that trickle in do not reset it, so a slow sender of headers is
//! cut too. A long download or a long poll is a request in progress, never idle.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::HttpBody;
use axum::http::{Request, Response};
use futures::future::BoxFuture;
use futures::task::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// The limits shared by every listener of one gateway.
#[derive(Clone)]
pub struct Limits {
    /// A connection with no request in progress for this long is closed; so is one whose
    /// peer accepts nothing we send for this long.
    pub idle_timeout: Duration,
    /// Open connections, all listeners together.
    slots: Arc<Semaphore>,
    max_connections: usize,
}

impl Limits {
    pub fn new(idle_timeout: Duration, max_connections: usize) -> Limits {
        Limits { idle_timeout, slots: Arc::new(Semaphore::new(max_connections)), max_connections }
    }

    /// Wraps a listener's acceptor (plain, or TLS over plain).
    pub fn acceptor<A>(&self, inner: A) -> LimitAcceptor<A> {
        LimitAcceptor { inner, limits: self.clone() }
    }
}

/// Milliseconds of the last "connection refused: too many" warning (one a minute at most).
static LAST_FULL_WARNING: AtomicU64 = AtomicU64::new(0);

fn warn_full(max: usize) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let last = LAST_FULL_WARNING.load(Ordering::Relaxed);
    if now.saturating_sub(last) >= 60_000
        && LAST_FULL_WARNING.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    {
        tracing::warn!(max_connections = max, "connection limit reached: closing new connections (--max-connections)");
    }
}

/// An `axum_server` acceptor that takes a connection slot before the inner acceptor (the TLS
/// handshake) runs, and watches the connection it yields.
#[derive(Clone)]
pub struct LimitAcceptor<A> {
    inner: A,
    limits: Limits,
}

impl<A, I, S> axum_server::accept::Accept<I, S> for LimitAcceptor<A>
where
    A: axum_server::accept::Accept<I, S>,
    A::Future: Send + 'static,
    A::Stream: Send + 'static,
    A::Service: Send + 'static,
{
    type Stream = Watched<A::Stream>;
    type Service = Tracked<A::Service>;
    type Future = BoxFuture<'static, io::Result<(Self::Stream, Self::Service)>>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        let slot = self.limits.slots.clone().try_acquire_owned();
        let max = self.limits.max_connections;
        let idle = self.limits.idle_timeout;
        // Not polled (no handshake) unless a slot was free.
        let inner = self.inner.accept(stream, service);
        Box::pin(async move {
            let Ok(slot) = slot else {
                warn_full(max);
                return Err(io::Error::other("too many connections"));
            };
            let (stream, service) = inner.await?;
            let conn = Arc::new(Conn::default());
            Ok((Watched::new(stream, conn.clone(), idle, slot), Tracked { inner: service, conn }))
        })
    }
}

/// What the I/O and the service of one connection share.
#[derive(Default)]
struct Conn {
    in_flight: AtomicUsize,
    /// When the last request ended (None: since the connection opened).
    idle_since: Mutex<Option<Instant>>,
    /// The task reading the connection: woken when the last request ends, so its pending
    /// read starts the idle clock.
    reader: AtomicWaker,
}

/// One request in progress; ends when dropped (with the response body, or earlier).
struct InFlight(Arc<Conn>);

impl InFlight {
    fn start(conn: Arc<Conn>) -> InFlight {
        conn.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(conn)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            *self.0.idle_since.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
            self.0.reader.wake();
        }
    }
}

/// A connection's service: counts its requests in progress.
#[derive(Clone)]
pub struct Tracked<S> {
    inner: S,
    conn: Arc<Conn>,
}

impl<S, B, RB> tower::Service<Request<B>> for Tracked<S>
where
    S: tower::Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = Response<TrackedBody<RB>>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Self::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let guard = InFlight::start(self.conn.clone());
        let fut = self.inner.call(req);
        Box::pin(async move {
            let resp = fut.await?;
            Ok(resp.map(|body| TrackedBody { inner: body, _guard: guard }))
        })
    }
}

/// A response body that keeps its request in progress until it is done or dropped.
pub struct TrackedBody<B> {
    inner: B,
    _guard: InFlight,
}

impl<B: HttpBody + Unpin> HttpBody for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A connection's I/O under the idle clock and the send clock.
pub struct Watched<S> {
    inner: S,
    conn: Arc<Conn>,
    idle_timeout: Duration,
    opened: Instant,
    idle: Pin<Box<Sleep>>,
    /// The deadline `idle` is set to.
    idle_deadline: Instant,
    /// Running while a write cannot proceed (the peer reads nothing).
    stalled: Option<Pin<Box<Sleep>>>,
    _slot: OwnedSemaphorePermit,
}

impl<S> Watched<S> {
    fn new(inner: S, conn: Arc<Conn>, idle_timeout: Duration, slot: OwnedSemaphorePermit) -> Watched<S> {
        let opened = Instant::now();
        let deadline = opened + idle_timeout;
        Watched {
            inner,
            conn,
            idle_timeout,
            opened,
            idle: Box::pin(tokio::time::sleep_until(deadline)),
            idle_deadline: deadline,
            stalled: None,
            _slot: slot,
        }
    }

    /// With no request in progress: has the idle clock run out? (Registers the wake-up.)
    fn idle_expired(&mut self, cx: &mut Context<'_>) -> bool {
        self.conn.reader.register(cx.waker());
        if self.conn.in_flight.load(Ordering::Acquire) > 0 {
            return false;
        }
        let since = self.conn.idle_since.lock().unwrap_or_else(|p| p.into_inner()).unwrap_or(self.opened);
        let deadline = since + self.idle_timeout;
        if deadline != self.idle_deadline {
            self.idle.as_mut().reset(deadline);
            self.idle_deadline = deadline;
        }
        self.idle.as_mut().poll(cx).is_ready()
    }

    /// A write that cannot proceed: has it been stuck for the idle timeout?
    fn stall_expired(&mut self, cx: &mut Context<'_>) -> bool {
        let timeout = self.idle_timeout;
        let stalled = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        stalled.as_mut().poll(cx).is_ready()
    }

    fn on_write<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match r {
            Poll::Pending if self.stall_expired(cx) => {
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the peer stopped reading")))
            }
            Poll::Pending => Poll::Pending,
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Pending if self.idle_expired(cx) => {
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "idle connection closed")))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.on_write(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.on_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.on_write(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.on_write(cx, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn watched(
        idle: Duration,
    ) -> (Watched<tokio::io::DuplexStream>, tokio::io::DuplexStream, Arc<Conn>, Arc<Semaphore>) {
        let (ours, theirs) = tokio::io::duplex(64);
        let slots = Arc::new(Semaphore::new(1));
        let slot = slots.clone().try_acquire_owned().expect("a free slot");
        let conn = Arc::new(Conn::default());
        (Watched::new(ours, conn.clone(), idle, slot), theirs, conn, slots)
    }

    #[tokio::test]
    async fn an_idle_connection_times_out_but_not_while_a_request_runs() {
        let idle = Duration::from_millis(300);
        let (mut w, mut peer, conn, slots) = watched(idle);
        assert_eq!(slots.available_permits(), 0, "the connection holds its slot");
        // A request in progress: reads wait as long as they like (here 3 idle timeouts).
        let req = InFlight::start(conn.clone());
        let mut buf = [0u8; 8];
        assert!(tokio::time::timeout(idle * 3, w.read(&mut buf)).await.is_err());
        // It ends: the clock starts then, and bytes that trickle in do not reset it.
        drop(req);
        let started = Instant::now();
        peer.write_all(b"x").await.expect("write");
        assert_eq!(w.read(&mut buf).await.expect("a byte"), 1);
        let e = tokio::time::timeout(Duration::from_secs(10), w.read(&mut buf))
            .await
            .expect("closed by the idle clock")
            .expect_err("idle");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= idle, "not before the timeout");
        drop(w);
        assert_eq!(slots.available_permits(), 1, "the slot is free again");
    }

    #[tokio::test]
    async fn a_peer_that_stops_reading_is_cut() {
        let (mut w, peer, _conn, _slots) = watched(Duration::from_millis(300));
        // The duplex buffer (64 bytes) fills and nobody reads it.
        let e = tokio::time::timeout(Duration::from_secs(10), w.write_all(&[0u8; 1024]))
            .await
            .expect("cut by the send clock")
            .expect_err("stalled");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        drop(peer);
    }
}

//! The admission port's handshake: a connection passes from the handshake pool
//! ([`crate::handshakes`]) to the established connections' caps ([`crate::established`]), and
//! the defaults of both.
//!
//! A connection takes an established place only once its TLS handshake is done: until then it
//! holds a place in the handshake pool, which a newcomer can always enter. So connections that
//! never finish a handshake hold no established place, and with `--client-ca`, where a client
//! without a certificate the CA signed never finishes one, every established place is an
//! authenticated client's: no number of unauthenticated clients keeps the API server out. A
//! connection is checked against the caps before its handshake too, so one sure to be shed
//! costs no TLS work.
//!
//! The global cap alone let one polite client (1,024 kept-alive connections from one address,
//! each sending a request every few seconds) hold every place, and the API server's next
//! connection was shed: every restore pod refused. So each source address also has a cap of
//! its own ([`DEFAULT_MAX_CONNECTIONS_PER_SOURCE`]), at the cap an address holding fewer takes
//! a place from the one holding the most, and the connection's age is bounded (`http1`,
//! [`DEFAULT_MAX_CONNECTION_AGE`]), so no place is held for good.

use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

pub use crate::established::{ConnectionGate, Retirement, Slot};
use crate::handshakes::HandshakePool;
pub use crate::log_gate::FAILURE_LOG_EVERY;
use crate::log_gate::LogGate;
use crate::metrics::ReasonLabel;

/// The default cap on open admission connections per replica.
///
/// Derived from the Deployment's 256 MiB memory limit: about 30 MiB for the process and its
/// watch caches, 32 MiB for request bodies ([`crate::body::DEFAULT_BODY_BUDGET_BYTES`]), and
/// the rest for connections at a generous 128 KiB each (TLS records and hyper's buffers at
/// their bounds; a connection reading a request holds about 20 KiB).
pub const DEFAULT_MAX_CONNECTIONS: usize = miggate_wire::webhook::MAX_CONNECTIONS;

/// The default cap on admission connections open at once from one source address.
///
/// The API server opens one HTTP/1.1 connection per call in flight, and its calls here take
/// milliseconds: even 1,000 calls a second at 50 ms each is 50 connections, so 128 leaves it
/// more than twice that. It is an eighth of [`DEFAULT_MAX_CONNECTIONS`]: a client must hold
/// eight addresses to fill the global cap, where one filled it before.
pub const DEFAULT_MAX_CONNECTIONS_PER_SOURCE: usize = miggate_wire::webhook::MAX_CONNECTIONS_PER_SOURCE;

/// The default age at which a connection is closed at its next idle moment (the request in
/// flight answered, with `connection: close`).
///
/// A connection lives this long only by sending a request within every request deadline
/// (4 s), as the API server under load does, or a client holding its place does. Five minutes
/// makes both reconnect, and pass the caps again, about every five minutes; the API server's
/// cost is one TLS handshake per connection per five minutes.
pub const DEFAULT_MAX_CONNECTION_AGE: Duration = miggate_wire::webhook::MAX_CONNECTION_AGE;

/// Failed TLS handshakes: counted by reason, logged through a [`LogGate`]. A failure is the
/// only trace of an API server that cannot call the webhook (a `caBundle` that does not match
/// the serving certificate, a client certificate refused by `--client-ca`).
#[derive(Debug)]
struct HandshakeFailures {
    counted: Family<ReasonLabel, Counter>,
    log: LogGate,
}

impl HandshakeFailures {
    fn failed(&self, source: Option<IpAddr>, error: &io::Error) {
        let reason = if error.kind() == io::ErrorKind::TimedOut {
            "timeout"
        } else {
            "error"
        };
        self.counted.get_or_create(&ReasonLabel { reason }).inc();
        if let Some(failed) = self.log.record(Instant::now()) {
            let source = source.map_or_else(|| "unknown".to_string(), |ip| ip.to_string());
            tracing::warn!(%source, reason, %error, failed, "admission TLS handshake failed ({failed} since the last such line; miggate_tls_handshake_failures_total counts them all)");
        }
    }
}

/// The default time a TLS handshake may take before the connection is closed
/// (`--handshake-timeout`).
///
/// The API server's handshake is one or two round trips inside the cluster and one signature:
/// milliseconds, so a second leaves room for a node starved of CPU. It is not what keeps a
/// flood of handshakes from keeping the API server out (the pool's rule is,
/// [`crate::handshakes`]); it bounds how long a connection that says nothing holds its place
/// while the pool has room.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = miggate_wire::webhook::HANDSHAKE_TIMEOUT;

/// The admission port's handshake: the caps checked first (a connection sure to be shed is
/// closed before any TLS work is done for it), then a place in the handshake pool while rustls
/// runs under the handshake timeout, with the serving configuration of the moment (so a
/// reloaded certificate serves the next connection), then a [`Slot`] under the caps.
#[derive(Debug, Clone)]
pub struct CappedTls {
    tls: crate::tls::Reloader,
    gate: ConnectionGate,
    handshakes: HandshakePool,
    timeout: Duration,
    failures: Option<Arc<HandshakeFailures>>,
}

/// How a handshake ended, when it did not complete.
enum Unfinished {
    /// Its place in the handshake pool went to a newcomer (counted by the pool).
    Dropped,
    /// It failed or timed out.
    Failed(io::Error),
}

impl CappedTls {
    /// TLS as `tls` serves it, each connection in `handshakes` until its handshake is done and
    /// behind `gate` after, under [`DEFAULT_HANDSHAKE_TIMEOUT`].
    pub fn new(tls: crate::tls::Reloader, gate: ConnectionGate, handshakes: HandshakePool) -> Self {
        CappedTls {
            tls,
            gate,
            handshakes,
            timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            failures: None,
        }
    }

    /// This handshake with `timeout` to complete in.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// This handshake with each failure counted in `counted` by reason and logged (at most
    /// once per [`FAILURE_LOG_EVERY`]).
    #[must_use]
    pub fn counting_failures(mut self, counted: Family<ReasonLabel, Counter>) -> Self {
        self.failures = Some(Arc::new(HandshakeFailures {
            counted,
            log: LogGate::new(FAILURE_LOG_EVERY),
        }));
        self
    }

    /// The connection's slot and TLS stream, or the reason it was refused (counted: shed at a
    /// cap, dropped from the handshake pool, or a failed handshake).
    ///
    /// The source is read from the socket (`getpeername`, once per connection: nothing beside
    /// the TLS handshake that follows); a socket already reset has none and is closed by the
    /// handshake's failure.
    pub async fn accept(&self, tcp: TcpStream) -> io::Result<Counted<TlsStream<TcpStream>>> {
        let source = tcp.peer_addr().ok().map(|a| a.ip().to_canonical());
        if !self.gate.admits(source) {
            // Dropping the stream closes the socket before any TLS work is done for it.
            drop(tcp);
            return Err(shed());
        }
        let mut place = self.handshakes.enter(source);
        let acceptor = TlsAcceptor::from(self.tls.current());
        let handshake = tokio::select! {
            biased;
            () = place.dropped() => Err(Unfinished::Dropped),
            done = tokio::time::timeout(self.timeout, acceptor.accept(tcp)) => match done {
                Ok(Ok(tls)) => Ok(tls),
                Ok(Err(e)) => Err(Unfinished::Failed(e)),
                Err(_) => Err(Unfinished::Failed(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("TLS handshake not complete within {} ms", self.timeout.as_millis()),
                ))),
            },
        };
        // The place is given back however the handshake ended.
        drop(place);
        let inner = match handshake {
            Ok(inner) => inner,
            Err(Unfinished::Dropped) => {
                return Err(io::Error::other(
                    "admission TLS handshake dropped to make room in the full handshake pool",
                ));
            }
            Err(Unfinished::Failed(e)) => {
                if let Some(failures) = &self.failures {
                    failures.failed(source, &e);
                }
                return Err(e);
            }
        };
        match self.gate.enter(source) {
            Some(slot) => Ok(Counted { inner, slot }),
            // The established connection is closed as it is dropped.
            None => Err(shed()),
        }
    }
}

fn shed() -> io::Error {
    io::Error::other("admission connection cap reached; connection shed")
}

impl crate::http1::Handshake for CappedTls {
    type Stream = Counted<TlsStream<TcpStream>>;

    fn handshake(&self, tcp: TcpStream) -> impl std::future::Future<Output = Option<Self::Stream>> + Send {
        let this = self.clone();
        async move { this.accept(tcp).await.ok() }
    }

    fn retirement(stream: &mut Self::Stream) -> Option<Retirement> {
        stream.retirement()
    }
}

/// A stream that holds its connection's [`Slot`] for as long as it lives.
#[derive(Debug)]
pub struct Counted<T> {
    inner: T,
    slot: Slot,
}

impl<T> Counted<T> {
    /// What tells the connection its place went to a newcomer ([`Slot::retirement`]).
    pub fn retirement(&mut self) -> Option<Retirement> {
        self.slot.retirement()
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Counted<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

//! Caps on the admission port's established connections, so memory stays bounded whatever
//! the pod network sends, and one client cannot take every place; and the admission port's
//! handshake, which passes a connection from the handshake pool ([`crate::handshakes`]) to
//! these caps.
//!
//! Every open connection holds a task, TLS state and read buffers (about 20 KiB while a
//! request is read). The port is reachable from every pod, so without a cap a client that
//! opens connections faster than the deadlines close them grows the webhook until it is
//! OOM-killed, and with failure policy `Fail` no restore pod can be created anywhere. The cap
//! sheds the newest: a connection that would be over it is closed, and the connections already
//! open (requests in flight among them) carry on.
//!
//! A connection takes its place here only once its TLS handshake is done: until then it holds
//! a place in the handshake pool, which a newcomer can always enter. So connections that never
//! finish a handshake hold no place here, and with `--client-ca`, where a client without a
//! certificate the CA signed never finishes one, every place here is an authenticated
//! client's: no number of unauthenticated clients keeps the API server out. A connection is
//! checked against the caps before its handshake too, so one that would be shed costs no TLS
//! work.
//!
//! The global cap alone let one polite client (1,024 kept-alive connections from one address,
//! each sending a request every few seconds) hold every place, and the API server's next
//! connection was shed: every restore pod refused. So each source address also has a cap of
//! its own ([`DEFAULT_MAX_CONNECTIONS_PER_SOURCE`]), and the connection's age is bounded
//! (`http1`, [`DEFAULT_MAX_CONNECTION_AGE`]), so no place is held for good.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

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

/// Counts established connections against the caps; shared by the acceptor and the metrics.
#[derive(Debug, Clone)]
pub struct ConnectionGate {
    max: usize,
    open: Gauge,
    shed: Counter,
    per_source: Option<PerSource>,
    log: Arc<LogGate>,
}

/// Open connections per source address, an entry only while it has one (so at most the
/// global cap's worth of entries).
type Counts = Arc<Mutex<HashMap<IpAddr, usize>>>;

/// The per-source cap.
#[derive(Debug, Clone)]
struct PerSource {
    max: usize,
    shed: Counter,
    counts: Counts,
}

/// Which cap shed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cap {
    Global,
    PerSource,
}

impl ConnectionGate {
    /// A gate admitting at most `max` connections, counting into `open` and `shed`.
    pub fn new(max: usize, open: Gauge, shed: Counter) -> Self {
        ConnectionGate {
            max,
            open,
            shed,
            per_source: None,
            log: Arc::new(LogGate::new(FAILURE_LOG_EVERY)),
        }
    }

    /// The gate with at most `max` connections from any one source address too, those shed
    /// for it counted in `shed` (not in the global cap's counter).
    #[must_use]
    pub fn per_source(mut self, max: usize, shed: Counter) -> Self {
        self.per_source = Some(PerSource {
            max,
            shed,
            counts: Arc::default(),
        });
        self
    }

    /// A slot for one more connection from `source`, or `None` (and one more shed) at either
    /// cap. A connection whose source is not known counts against the global cap only.
    pub fn enter(&self, source: Option<IpAddr>) -> Option<Slot> {
        let (Some(per), Some(ip)) = (&self.per_source, source) else {
            return match self.enter_global() {
                Some(open) => Some(Slot { open, source: None }),
                None => self.shed(Cap::Global, source),
            };
        };
        // IPv4 clients of a dual-stack listener arrive as `::ffff:a.b.c.d`: one address, one count.
        let ip = ip.to_canonical();
        let mut counts = per.counts.lock().unwrap_or_else(|p| p.into_inner());
        if counts.get(&ip).is_some_and(|n| *n >= per.max) {
            drop(counts);
            return self.shed(Cap::PerSource, source);
        }
        let Some(open) = self.enter_global() else {
            drop(counts);
            return self.shed(Cap::Global, source);
        };
        *counts.entry(ip).or_insert(0) += 1;
        Some(Slot {
            open,
            source: Some((ip, per.counts.clone())),
        })
    }

    /// Whether [`ConnectionGate::enter`] would give `source` a slot now, checked before its
    /// TLS handshake so that a connection sure to be shed costs no TLS work; `false` counts
    /// one more shed, as `enter` would. Nothing is held: the slot is taken after the
    /// handshake, and may be refused then.
    pub fn admits(&self, source: Option<IpAddr>) -> bool {
        if let (Some(per), Some(ip)) = (&self.per_source, source) {
            let counts = per.counts.lock().unwrap_or_else(|p| p.into_inner());
            if counts.get(&ip.to_canonical()).is_some_and(|n| *n >= per.max) {
                drop(counts);
                self.shed(Cap::PerSource, source);
                return false;
            }
        }
        if usize::try_from(self.open.get()).unwrap_or(usize::MAX) >= self.max {
            self.shed(Cap::Global, source);
            return false;
        }
        true
    }

    /// One more open connection under the global cap, or `None`.
    fn enter_global(&self) -> Option<Gauge> {
        let before = self.open.inc();
        if usize::try_from(before).unwrap_or(usize::MAX) >= self.max {
            self.open.dec();
            return None;
        }
        Some(self.open.clone())
    }

    /// Counts (and maybe logs) one connection shed at `cap`; `None`, the slot refused.
    fn shed(&self, cap: Cap, source: Option<IpAddr>) -> Option<Slot> {
        let (cap, metric) = match (cap, &self.per_source) {
            (Cap::PerSource, Some(per)) => {
                per.shed.inc();
                (
                    "its source address's cap (--max-connections-per-source)",
                    "miggate_connections_shed_per_source_total",
                )
            }
            _ => {
                self.shed.inc();
                ("the cap (--max-connections)", "miggate_connections_shed_total")
            }
        };
        if let Some(shed) = self.log.record(Instant::now()) {
            let source = source.map_or_else(|| "unknown".to_string(), |ip| ip.to_canonical().to_string());
            tracing::warn!(%source, shed, "admission connection closed at {cap} ({shed} since the last such line; {metric} counts them all)");
        }
        None
    }

    /// Source addresses with a connection open now.
    pub fn sources(&self) -> usize {
        self.per_source
            .as_ref()
            .map_or(0, |p| p.counts.lock().unwrap_or_else(|e| e.into_inner()).len())
    }
}

/// One open connection's place under the caps, given back when the connection is dropped.
#[derive(Debug)]
pub struct Slot {
    open: Gauge,
    source: Option<(IpAddr, Counts)>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some((ip, counts)) = &self.source {
            let mut counts = counts.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(n) = counts.get_mut(ip) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    counts.remove(ip);
                }
            }
        }
        self.open.dec();
    }
}

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
            Some(slot) => Ok(Counted { inner, _slot: slot }),
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
}

/// A stream that holds its connection's [`Slot`] for as long as it lives.
#[derive(Debug)]
pub struct Counted<T> {
    inner: T,
    _slot: Slot,
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {

    use super::*;

    use rstest::rstest;

    const A: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1)));
    const B: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2)));

    #[test]
    fn the_gate_sheds_the_newest_at_the_cap_and_reopens_when_one_closes() {
        let gate = ConnectionGate::new(2, Gauge::default(), Counter::default());
        let a = gate.enter(A).unwrap();
        let _b = gate.enter(A).unwrap();
        assert!(gate.enter(B).is_none());
        assert!(gate.enter(None).is_none());
        assert_eq!((gate.open.get(), gate.shed.get()), (2, 2));
        drop(a);
        assert_eq!(gate.open.get(), 1);
        assert!(gate.enter(A).is_some());
        assert_eq!(gate.shed.get(), 2);
    }

    /// `(source, admitted)` in order, against a global cap of 4 and 2 per source.
    #[rstest]
    #[case::one_source_holds_its_share(&[(A, true), (A, true), (A, false), (B, true)], (1, 0))]
    #[case::two_sources_fill_the_global_cap(&[(A, true), (A, true), (B, true), (B, true), (None, false)], (0, 1))]
    #[case::at_both_caps_the_source_s_is_counted(&[(A, true), (A, true), (B, true), (B, true), (A, false)], (1, 0))]
    #[case::unknown_sources_count_globally_only(&[(None, true), (None, true), (None, true), (A, true), (A, false)], (0, 1))]
    fn each_source_has_a_share_of_the_global_cap(
        #[case] arrivals: &[(Option<IpAddr>, bool)],
        #[case] shed: (u64, u64),
    ) {
        let per_source_shed = Counter::default();
        let gate = ConnectionGate::new(4, Gauge::default(), Counter::default())
            .per_source(2, per_source_shed.clone());
        let mut held = Vec::new();
        for (i, (source, admitted)) in arrivals.iter().enumerate() {
            let slot = gate.enter(*source);
            assert_eq!(slot.is_some(), *admitted, "arrival {i} from {source:?}");
            held.extend(slot);
        }
        assert_eq!((per_source_shed.get(), gate.shed.get()), shed);
        drop(held);
        assert_eq!(
            (gate.open.get(), gate.sources()),
            (0, 0),
            "entries removed at zero"
        );
    }

    /// Slots held (by source) before a newcomer from `source` is checked, against a global cap
    /// of 3 and 2 per source: whether it is let on to its handshake, and what is counted shed
    /// `(per source, global)`.
    #[rstest]
    #[case::room(&[A], A, true, (0, 0))]
    #[case::its_source_at_its_cap(&[A, A], A, false, (1, 0))]
    #[case::another_source_at_its_cap(&[A, A], B, true, (0, 0))]
    #[case::the_global_cap(&[A, A, B], B, false, (0, 1))]
    #[case::unknown_source_at_the_global_cap(&[A, B, B], None, false, (0, 1))]
    #[case::unknown_source_with_room(&[A, A], None, true, (0, 0))]
    fn the_check_before_a_handshake_says_what_enter_would(
        #[case] held: &[Option<IpAddr>],
        #[case] source: Option<IpAddr>,
        #[case] admitted: bool,
        #[case] shed: (u64, u64),
    ) {
        let per_source_shed = Counter::default();
        let gate = ConnectionGate::new(3, Gauge::default(), Counter::default())
            .per_source(2, per_source_shed.clone());
        let _held: Vec<Slot> = held.iter().map(|s| gate.enter(*s).unwrap()).collect();
        assert_eq!(gate.admits(source), admitted);
        assert_eq!((per_source_shed.get(), gate.shed.get()), shed);
        let entered = gate.enter(source);
        assert_eq!(entered.is_some(), admitted, "enter agrees");
        assert_eq!(
            gate.open.get(),
            i64::try_from(held.len()).unwrap() + i64::from(admitted)
        );
    }

    #[test]
    fn an_ipv4_client_of_a_dual_stack_listener_is_one_source() {
        let gate =
            ConnectionGate::new(8, Gauge::default(), Counter::default()).per_source(1, Counter::default());
        let mapped = "::ffff:10.0.0.1".parse::<IpAddr>().ok();
        let _a = gate.enter(A).unwrap();
        assert!(gate.enter(mapped).is_none());
        assert_eq!(gate.sources(), 1);
    }
}

//! A cap on the admission port's open connections, so memory stays bounded whatever the pod
//! network sends.
//!
//! Every open connection holds a task, TLS state and read buffers (about 20 KiB while a
//! request is read). The port is reachable from every pod, so without a cap a client that
//! opens connections faster than the deadlines close them grows the webhook until it is
//! OOM-killed, and with failure policy `Fail` no restore pod can be created anywhere. The cap
//! sheds the newest: a connection accepted at the cap is closed at once, before its TLS
//! handshake, and the connections already open (requests in flight among them) carry on.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum_server::accept::Accept;
use futures::future::BoxFuture;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The default cap on open admission connections per replica.
///
/// Derived from the Deployment's 256 MiB memory limit: about 30 MiB for the process and its
/// watch caches, 32 MiB for request bodies ([`crate::body::DEFAULT_BODY_BUDGET_BYTES`]), and
/// the rest for connections at a generous 128 KiB each (TLS records and hyper's buffers at
/// their bounds; a connection reading a request holds about 20 KiB).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// Counts open connections against the cap; shared by the acceptor and the metrics.
#[derive(Debug, Clone)]
pub struct ConnectionGate {
    max: usize,
    open: Gauge,
    shed: Counter,
}

impl ConnectionGate {
    /// A gate admitting at most `max` connections, counting into `open` and `shed`.
    pub fn new(max: usize, open: Gauge, shed: Counter) -> Self {
        ConnectionGate { max, open, shed }
    }

    /// A slot for one more connection, or `None` (and one more shed) at the cap.
    pub fn enter(&self) -> Option<Slot> {
        let before = self.open.inc();
        if usize::try_from(before).unwrap_or(usize::MAX) >= self.max {
            self.open.dec();
            self.shed.inc();
            return None;
        }
        Some(Slot {
            open: self.open.clone(),
        })
    }
}

/// One open connection's place under the cap, given back when the connection is dropped.
#[derive(Debug)]
pub struct Slot {
    open: Gauge,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.dec();
    }
}

/// An acceptor that takes a [`Slot`] before running `inner` (the TLS handshake), and refuses
/// the connection at the cap.
#[derive(Debug, Clone)]
pub struct CappedAcceptor<A> {
    inner: A,
    gate: ConnectionGate,
}

impl<A> CappedAcceptor<A> {
    /// `inner` behind `gate`.
    pub fn new(inner: A, gate: ConnectionGate) -> Self {
        CappedAcceptor { inner, gate }
    }
}

impl<I, S, A> Accept<I, S> for CappedAcceptor<A>
where
    A: Accept<I, S>,
    A::Future: Send + 'static,
    A::Stream: Send + 'static,
    A::Service: Send + 'static,
    I: Send + 'static,
{
    type Stream = Counted<A::Stream>;
    type Service = A::Service;
    type Future = BoxFuture<'static, io::Result<(Self::Stream, Self::Service)>>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        let Some(slot) = self.gate.enter() else {
            // Dropping the stream closes the socket before any TLS work is done for it.
            drop(stream);
            return Box::pin(std::future::ready(Err(io::Error::other(
                "admission connection cap reached; connection shed",
            ))));
        };
        let accepting = self.inner.accept(stream, service);
        Box::pin(async move {
            let (inner, service) = accepting.await?;
            Ok((Counted { inner, _slot: slot }, service))
        })
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

    #[test]
    fn the_gate_sheds_the_newest_at_the_cap_and_reopens_when_one_closes() {
        let gate = ConnectionGate::new(2, Gauge::default(), Counter::default());
        let a = gate.enter().unwrap();
        let _b = gate.enter().unwrap();
        assert!(gate.enter().is_none());
        assert!(gate.enter().is_none());
        assert_eq!((gate.open.get(), gate.shed.get()), (2, 2));
        drop(a);
        assert_eq!(gate.open.get(), 1);
        assert!(gate.enter().is_some());
        assert_eq!(gate.shed.get(), 2);
    }
}

//! Serving HTTP/1.1 connections on hyper's own connection builder: the accept loop, each
//! connection's handshake, deadlines and age, and the two-stage stop (stop accepting and finish
//! what is in flight; then, past the drain, close).
//!
//! Each part is a maintained one; this module only wires them together:
//!
//! - **The head deadline** is hyper's header-read timeout (run by hyper-util's tokio timer):
//!   it starts when hyper begins reading a head (after the handshake, and again each time a
//!   kept-alive connection goes idle after an answer) and closes the connection if the whole
//!   head has not arrived in time. It does not run while a request is being answered, so a
//!   slow decision is not cut; the request's own deadline bounds that (`server.rs`).
//! - **A client that does not read its answers** is cut by a write timeout of the same length
//!   (`tokio-io-timeout`): a write that cannot make progress for a deadline ends the
//!   connection, so a peer cannot pin an answer's buffers by never reading them.
//! - **The age bound, the stop, and a place given to a newcomer** call hyper's
//!   `Connection::graceful_shutdown`: the request in flight is answered (with
//!   `connection: close`), an idle connection closes at once. The age bound makes a client
//!   reconnect and pass the connection caps again ([`crate::connections`]); at the cap, the
//!   gate takes a place from the address holding the most for one holding fewer
//!   ([`crate::established`]). hyper-util's `GracefulShutdown` is not used because it can only
//!   stop every connection together, and the age bound retires one.
//! - **The handshake** (TLS and the connection caps on the admission port, nothing on the
//!   health port) is a [`Handshake`]; a connection still in it when the stop comes is dropped.
//! - **Failed accepts** (no file descriptors left, most often) are counted, logged at most once
//!   per [`FAILURE_LOG_EVERY`](crate::log_gate::FAILURE_LOG_EVERY), and retried after a
//!   short wait, so a failing listener is not a busy loop.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::http;
use hyper::body::{Body, Incoming};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio_io_timeout::TimeoutStream;
use tokio_util::sync::CancellationToken;

/// How long the accept loop waits after a failed accept before it tries again.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// A server's stop: asked once, seen by the accept loop and by every connection.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stop {
    token: CancellationToken,
}

impl Stop {
    /// A stop not yet asked.
    pub(crate) fn new() -> Self {
        Stop::default()
    }

    /// Asks the server to stop: no more connections are accepted, and each open one closes
    /// once its request in flight is answered (at once when it has none).
    pub(crate) fn ask(&self) {
        self.token.cancel();
    }
}

/// What turns an accepted TCP connection into the stream HTTP is read from: a TLS handshake
/// under the connection caps on the admission port, nothing on the health port.
pub(crate) trait Handshake: Clone + Send + Sync + 'static {
    /// The stream served.
    type Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static;

    /// The stream, or `None` when the connection is refused (at a cap, or a failed or slow
    /// handshake, which the implementation counts); the refused connection is closed by the
    /// drop.
    fn handshake(&self, tcp: TcpStream) -> impl Future<Output = Option<Self::Stream>> + Send;

    /// What tells a served connection that its place went to a newcomer, so it closes at its
    /// next idle moment as the age bound closes one; `None`: nothing does.
    fn retirement(_stream: &mut Self::Stream) -> Option<crate::established::Retirement> {
        None
    }
}

/// No handshake: the TCP stream is served as it is (the health port).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Plain;

impl Handshake for Plain {
    type Stream = TcpStream;

    fn handshake(&self, tcp: TcpStream) -> impl Future<Output = Option<TcpStream>> + Send {
        std::future::ready(Some(tcp))
    }
}

/// What every connection of one server is served with.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// hyper's HTTP/1.1 settings: buffer size and the header-read timeout (the head deadline).
    http: http1::Builder,
    /// How long a write may stall (the client not reading) before the connection is cut.
    write_timeout: Duration,
    /// How long, once the stop is asked, requests in flight may take before their
    /// connections are closed regardless.
    drain: Duration,
    /// The age past which a connection finishes its request in flight and closes, and what
    /// counts each one so closed; `None`: no bound.
    max_age: Option<(Duration, Counter)>,
    /// What counts failed accepts, and says which to log; `None`: neither.
    accept_errors: Option<(Counter, Arc<crate::log_gate::LogGate>)>,
}

impl Options {
    /// HTTP/1.1 with hyper's buffer held to `max_buf_size`, a head deadline and a drain.
    pub(crate) fn new(head_deadline: Duration, drain: Duration, max_buf_size: usize) -> Self {
        let mut http = http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(head_deadline)
            .max_buf_size(max_buf_size);
        Options {
            http,
            write_timeout: head_deadline,
            drain,
            max_age: None,
            accept_errors: None,
        }
    }

    /// These options with each failed accept counted in `counted` and logged (at most once
    /// per [`FAILURE_LOG_EVERY`](crate::log_gate::FAILURE_LOG_EVERY)).
    pub(crate) fn accept_errors(mut self, counted: Counter) -> Self {
        let gate = crate::log_gate::LogGate::new(crate::log_gate::FAILURE_LOG_EVERY);
        self.accept_errors = Some((counted, Arc::new(gate)));
        self
    }

    /// These options with connections retired at `age`, each counted in `retired`.
    pub(crate) fn max_age(mut self, age: Duration, retired: Counter) -> Self {
        self.max_age = Some((age, retired));
        self
    }
}

/// A tower service hyper can serve: what `server.rs`'s routers are.
pub(crate) trait Served<B>:
    tower::Service<
        http::Request<Incoming>,
        Response = http::Response<B>,
        Future: Send,
        Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    > + Clone
    + Send
    + 'static
{
}

impl<T, B> Served<B> for T where
    T: tower::Service<
            http::Request<Incoming>,
            Response = http::Response<B>,
            Future: Send,
            Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        > + Clone
        + Send
        + 'static
{
}

/// An answer body hyper can write.
pub(crate) trait AnswerBody:
    Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

impl<T> AnswerBody for T where
    T: Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

/// Serves `listener` until `stop` is asked: each connection through `handshake`, then
/// `service` per request. Once asked, the listener is closed, idle connections close, and
/// requests in flight get `options.drain` to be answered before their connections are cut.
pub(crate) async fn serve<H, S, B>(
    listener: std::net::TcpListener,
    handshake: H,
    service: S,
    options: Options,
    stop: Stop,
) -> io::Result<()>
where
    H: Handshake,
    S: Served<B>,
    B: AnswerBody,
{
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let options = Arc::new(options);
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            biased;
            () = stop.token.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((tcp, _)) => {
                connections.spawn(connection(
                    tcp,
                    handshake.clone(),
                    service.clone(),
                    options.clone(),
                    stop.clone(),
                ));
            }
            Err(error) => {
                if let Some((counted, log)) = &options.accept_errors {
                    counted.inc();
                    if let Some(failed) = log.record(std::time::Instant::now()) {
                        tracing::warn!(%error, failed, "accepting an admission connection failed; retrying ({failed} since the last such line)");
                    }
                }
                tokio::time::sleep(ACCEPT_RETRY).await;
            }
        }
        // Finished connections are reaped as new ones come, so the set holds open ones only.
        while connections.try_join_next().is_some() {}
    }
    // Closing the listener refuses new connections at once rather than leaving them queued.
    drop(listener);
    let drained = tokio::time::timeout(options.drain, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        connections.shutdown().await;
    }
    Ok(())
}

/// One connection: its handshake, then hyper until the client is done, a deadline passes, or
/// the age bound, the stop, or a newcomer given its place retires it.
async fn connection<H, S, B>(tcp: TcpStream, handshake: H, service: S, options: Arc<Options>, stop: Stop)
where
    H: Handshake,
    S: Served<B>,
    B: AnswerBody,
{
    // The connection's own token, cancelled with the server's: it is polled on every wake of
    // the connection, and a token of its own keeps those polls off the lock every connection
    // would otherwise share.
    let stopping = stop.token.child_token();
    // A connection still in its handshake when the stop comes is dropped: it has no request.
    let stream = tokio::select! {
        biased;
        () = stopping.cancelled() => return,
        stream = handshake.handshake(tcp) => stream,
    };
    let Some(mut stream) = stream else {
        return;
    };
    let retirement = H::retirement(&mut stream);
    let mut stream = TimeoutStream::new(stream);
    stream.set_write_timeout(Some(options.write_timeout));
    let conn = options
        .http
        .serve_connection(TokioIo::new(Box::pin(stream)), TowerToHyperService::new(service));
    tokio::pin!(conn);
    let (age, aged_count) = match &options.max_age {
        Some((age, retired)) => (Some(*age), Some(retired)),
        None => (None, None),
    };
    let aged = async {
        match age {
            Some(age) => tokio::time::sleep(age).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(aged);
    let retired = async {
        match retirement {
            Some(retirement) => retirement.told().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(retired);
    let stopped = stopping.cancelled();
    tokio::pin!(stopped);
    let mut closing = false;
    loop {
        tokio::select! {
            biased;
            // Served to the end, or failed (a reset, a deadline, a bad head answered 400).
            _ = conn.as_mut() => return,
            () = &mut stopped, if !closing => {}
            () = &mut aged, if !closing => {
                if let Some(counted) = aged_count {
                    counted.inc();
                }
            }
            // Counted by the gate that gave the place away.
            () = &mut retired, if !closing => {}
        }
        // The stop, the age, or the place given to a newcomer: the request in flight is
        // answered (with `connection: close`), an idle connection closes; hyper acts on it
        // when the connection is next polled.
        closing = true;
        conn.as_mut().graceful_shutdown();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A plain server on a loopback port whose `/slow/MS` answers after MS milliseconds.
    async fn server(
        head_deadline: Duration,
        drain: Duration,
    ) -> (
        std::net::SocketAddr,
        Stop,
        tokio::task::JoinHandle<io::Result<()>>,
    ) {
        server_with(Options::new(head_deadline, drain, 64 * 1024)).await
    }

    async fn server_with(
        options: Options,
    ) -> (
        std::net::SocketAddr,
        Stop,
        tokio::task::JoinHandle<io::Result<()>>,
    ) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let service = tower::service_fn(|req: http::Request<Incoming>| async move {
            if let Some(ms) = req.uri().path().strip_prefix("/slow/") {
                tokio::time::sleep(Duration::from_millis(ms.parse().unwrap())).await;
            }
            let body = if req.uri().path() == "/big" {
                "x".repeat(BIG)
            } else {
                String::from("done")
            };
            Ok::<_, std::convert::Infallible>(http::Response::new(body))
        });
        let stop = Stop::new();
        let served = tokio::spawn(serve(listener, Plain, service, options, stop.clone()));
        (addr, stop, served)
    }

    /// The size of `/big`'s answer: more than loopback's socket buffers hold.
    const BIG: usize = 64 * 1024 * 1024;

    async fn get(tcp: &mut TcpStream, path: &str) {
        use tokio::io::AsyncWriteExt;
        tcp.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .unwrap();
    }

    /// What the server sent until it closed the connection, or `None` if it was still open
    /// after `within`.
    async fn until_closed(tcp: &mut TcpStream, within: Duration) -> Option<String> {
        use tokio::io::AsyncReadExt;
        let mut out = Vec::new();
        tokio::time::timeout(within, tcp.read_to_end(&mut out))
            .await
            .ok()
            .map(|_| String::from_utf8_lossy(&out).into_owned())
    }

    #[tokio::test]
    async fn an_idle_or_trickling_connection_is_closed_at_the_head_deadline_and_a_slow_answer_is_not() {
        use tokio::io::AsyncWriteExt;
        let deadline = Duration::from_millis(300);
        let (addr, _stop, _served) = server(deadline, Duration::from_secs(1)).await;
        let started = std::time::Instant::now();
        let mut idle = TcpStream::connect(addr).await.unwrap();
        let mut trickling = TcpStream::connect(addr).await.unwrap();
        trickling.write_all(b"GET / HT").await.unwrap();
        // A request answered after three head deadlines, then the connection idles.
        let mut slow = TcpStream::connect(addr).await.unwrap();
        get(&mut slow, "/slow/900").await;
        assert_eq!(
            until_closed(&mut idle, Duration::from_secs(2)).await.as_deref(),
            Some("")
        );
        assert_eq!(
            until_closed(&mut trickling, Duration::from_secs(2))
                .await
                .as_deref(),
            Some("")
        );
        assert!(started.elapsed() >= deadline, "{:?}", started.elapsed());
        let answered = until_closed(&mut slow, Duration::from_secs(3)).await.unwrap();
        assert!(
            answered.starts_with("HTTP/1.1 200 OK") && answered.ends_with("done"),
            "{answered}"
        );
        // Closed a head deadline after its answer, not before it.
        assert!(
            started.elapsed() >= Duration::from_millis(1200),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn a_client_that_does_not_read_its_answer_is_cut_a_deadline_after_it() {
        use tokio::io::AsyncReadExt;
        let deadline = Duration::from_millis(300);
        let (addr, _stop, _served) = server(deadline, Duration::from_secs(1)).await;
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        get(&mut tcp, "/big").await;
        tokio::time::sleep(deadline * 4).await;
        // What the buffers held arrives; then the end, or a reset, well short of the answer.
        let mut got = 0;
        let mut buf = vec![0_u8; 1 << 20];
        let ended = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match tcp.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
            }
        })
        .await;
        assert!(ended.is_ok(), "the connection was held open");
        assert!(got < BIG, "the whole answer arrived: {got} bytes");
    }

    #[tokio::test]
    async fn a_kept_alive_connection_serves_request_after_request_within_the_deadline() {
        use tokio::io::AsyncReadExt;
        let deadline = Duration::from_millis(400);
        let (addr, _stop, _served) = server(deadline, Duration::from_secs(1)).await;
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        // Six requests 200 ms apart: 1.2 s in all, three deadlines, each head in time.
        for _ in 0..6 {
            get(&mut tcp, "/").await;
            let mut buf = [0_u8; 512];
            let n = tcp.read(&mut buf).await.unwrap();
            assert!(
                buf[..n].starts_with(b"HTTP/1.1 200 OK"),
                "{}",
                String::from_utf8_lossy(&buf[..n])
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    #[tokio::test]
    async fn a_stop_refuses_new_connections_closes_idle_ones_and_lets_answers_finish() {
        let (addr, stop, served) = server(Duration::from_secs(10), Duration::from_secs(5)).await;
        let mut idle = TcpStream::connect(addr).await.unwrap();
        let mut busy = TcpStream::connect(addr).await.unwrap();
        get(&mut busy, "/slow/500").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        stop.ask();
        assert_eq!(
            until_closed(&mut idle, Duration::from_secs(2)).await.as_deref(),
            Some("")
        );
        let answered = until_closed(&mut busy, Duration::from_secs(3)).await.unwrap();
        assert!(
            answered.starts_with("HTTP/1.1 200 OK") && answered.ends_with("done"),
            "{answered}"
        );
        tokio::time::timeout(Duration::from_secs(2), served)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "the listener is still open"
        );
    }

    #[tokio::test]
    async fn past_the_drain_a_request_still_running_is_cut() {
        let (addr, stop, served) = server(Duration::from_secs(10), Duration::from_millis(300)).await;
        let mut busy = TcpStream::connect(addr).await.unwrap();
        get(&mut busy, "/slow/60000").await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let asked = std::time::Instant::now();
        stop.ask();
        tokio::time::timeout(Duration::from_secs(3), served)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(
            asked.elapsed() >= Duration::from_millis(300),
            "{:?}",
            asked.elapsed()
        );
        assert_eq!(
            until_closed(&mut busy, Duration::from_secs(2)).await.as_deref(),
            Some("")
        );
    }

    #[tokio::test]
    async fn past_its_age_a_connection_answers_its_request_in_flight_and_closes() {
        let age = Duration::from_millis(300);
        let retired = Counter::default();
        let options = Options::new(Duration::from_secs(10), Duration::from_secs(1), 64 * 1024)
            .max_age(age, retired.clone());
        let (addr, _stop, _served) = server_with(options).await;
        let started = std::time::Instant::now();
        let mut idle = TcpStream::connect(addr).await.unwrap();
        let mut busy = TcpStream::connect(addr).await.unwrap();
        get(&mut busy, "/slow/800").await;
        // Idle at its age: closed then, long before the 10 s head deadline.
        assert_eq!(
            until_closed(&mut idle, Duration::from_secs(3)).await.as_deref(),
            Some("")
        );
        assert!(started.elapsed() >= age, "{:?}", started.elapsed());
        // Busy at its age: answered in full, told to close, and closed.
        let answered = until_closed(&mut busy, Duration::from_secs(3)).await.unwrap();
        assert!(
            answered.starts_with("HTTP/1.1 200 OK")
                && answered.to_ascii_lowercase().contains("connection: close")
                && answered.ends_with("done"),
            "{answered}"
        );
        assert_eq!(retired.get(), 2);
    }

    #[tokio::test]
    async fn without_an_age_bound_a_kept_alive_connection_stays_open() {
        use tokio::io::AsyncReadExt;
        let (addr, _stop, _served) = server(Duration::from_secs(10), Duration::from_secs(1)).await;
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        get(&mut tcp, "/slow/500").await;
        let mut buf = [0_u8; 512];
        let n = tcp.read(&mut buf).await.unwrap();
        let text = String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase();
        assert!(!text.contains("connection: close"), "{text}");
        assert_eq!(until_closed(&mut tcp, Duration::from_millis(500)).await, None);
    }

    #[test]
    fn a_stop_is_seen_by_every_clone_once_asked() {
        let stop = Stop::new();
        let seen = stop.clone();
        assert!(!seen.token.is_cancelled());
        stop.ask();
        assert!(seen.token.is_cancelled());
    }
}

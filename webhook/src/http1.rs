//! Serving HTTP/1.1 connections: the accept loop, each connection's head deadline, and the
//! two-stage stop (stop accepting and finish what is in flight; then, past the drain, close).
//!
//! axum-server's serve loop did this before, at a cost paid on every request rather than on
//! every connection: each wake of each connection polled three shutdown notifiers (two of them
//! shared by every connection, so both executor threads contended for their locks), each
//! request got a connection handle inserted into its extensions (a map allocated per request),
//! and hyper's header-read timeout boxed a fresh timer per request and put it into and out of
//! the runtime's timer wheel under its lock. On the webhook's two-core node that was a tenth
//! of the time spent outside the decision (`perf` under `../shared/anchors/webhook-echo/run.sh`,
//! docs/webhook.md). Here:
//!
//! - **The head deadline** is one timer per connection, checked only when it fires. A request
//!   marks its connection busy when hyper hands over its head and idle again, with a clock
//!   reading, when its answer is built ([`Activity`]). When the timer fires on an idle
//!   connection whose deadline has passed, the connection is closed; otherwise the timer is
//!   moved to the next moment that could end it. A head (the first after the handshake, or the
//!   next on a kept-alive connection) must so arrive whole within the deadline of the previous
//!   answer, as with hyper's own timeout; a client that never reads its answers is cut as well.
//! - **The age bound** shares that timer: once a connection is older than its maximum age,
//!   hyper is told to finish its request in flight and close (as at the stop), so a client
//!   reconnects and passes the connection caps again ([`crate::connections`]).
//! - **The stop** is a flag read on each wake (one load of a line that is only written once)
//!   and a cancellation token, polled once to register and again only once the flag is set.
//!   The timer too is polled again only once it has fired: a poll would only store the same
//!   waker again.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::http;
use axum_server::accept::Accept;
use hyper::body::{Body, Incoming};
use hyper::server::conn::http1;
use hyper::service::{HttpService, Service};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use prometheus_client::metrics::counter::Counter;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// How long the accept loop waits after a failed accept (no file descriptors left, say)
/// before it tries again, so a failing listener is not a busy loop.
const ACCEPT_RETRY: Duration = Duration::from_millis(50);

/// A server's stop: asked once, seen by the accept loop and by every connection.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stop {
    asked: Arc<AtomicBool>,
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
        self.asked.store(true, Ordering::Release);
        self.token.cancel();
    }

    fn is_asked(&self) -> bool {
        self.asked.load(Ordering::Acquire)
    }
}

/// What every connection of one server is served with.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// hyper's HTTP/1.1 settings (buffer size and the like; its own header timer is unused).
    pub(crate) http: http1::Builder,
    /// How long a connection may wait for a whole request head after its handshake or after
    /// its previous answer.
    pub(crate) head_deadline: Duration,
    /// How long, once the stop is asked, requests in flight may take before their
    /// connections are closed regardless.
    pub(crate) drain: Duration,
    /// The age past which a connection finishes its request in flight and closes, and what
    /// counts each one so closed; `None`: no bound.
    pub(crate) max_age: Option<(Duration, Counter)>,
    /// What counts failed accepts, and says which to log; `None`: neither.
    pub(crate) accept_errors: Option<(Counter, Arc<crate::connections::LogGate>)>,
}

impl Options {
    /// HTTP/1.1 with hyper's buffer held to `max_buf_size`, a head deadline and a drain.
    pub(crate) fn new(head_deadline: Duration, drain: Duration, max_buf_size: usize) -> Self {
        let mut http = http1::Builder::new();
        // The head deadline is kept here, per connection: hyper's would arm a timer per
        // request (and needs a timer it is not given).
        http.header_read_timeout(None).max_buf_size(max_buf_size);
        Options {
            http,
            head_deadline,
            drain,
            max_age: None,
            accept_errors: None,
        }
    }

    /// These options with each failed accept counted in `counted` and logged (at most once
    /// per [`FAILURE_LOG_EVERY`](crate::connections::FAILURE_LOG_EVERY)).
    pub(crate) fn accept_errors(mut self, counted: Counter) -> Self {
        let gate = crate::connections::LogGate::new(crate::connections::FAILURE_LOG_EVERY);
        self.accept_errors = Some((counted, Arc::new(gate)));
        self
    }

    /// These options with connections closed at their next idle moment once older than
    /// `age`, each counted in `retired`.
    pub(crate) fn max_age(mut self, age: Duration, retired: Counter) -> Self {
        self.max_age = Some((age, retired));
        self
    }
}

/// A service a connection is served with: tower's, over hyper's request bodies, answering
/// with `B`, cloned per connection.
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

/// An answer's body, as hyper writes it from any task.
pub(crate) trait AnswerBody:
    Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

impl<T> AnswerBody for T where
    T: Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

/// Serves `listener` until `stop` is asked: each accepted connection goes through `acceptor`
/// (the cap and TLS for admission) in a task of its own, and is served by a clone of
/// `service`. Once asked, the listener is closed, open connections finish their requests in
/// flight for up to `options.drain`, and those still open then are closed.
pub(crate) async fn serve<A, S, B>(
    listener: std::net::TcpListener,
    acceptor: A,
    service: S,
    options: Options,
    stop: Stop,
) -> io::Result<()>
where
    A: Accept<TcpStream, S> + Clone + Send + Sync + 'static,
    A::Future: Send,
    A::Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    A::Service: Served<B>,
    S: Clone + Send + 'static,
    B: AnswerBody,
{
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let options = Arc::new(options);
    let mut connections = JoinSet::new();
    let stopped = stop.token.clone().cancelled_owned();
    tokio::pin!(stopped);
    loop {
        let accepted = tokio::select! {
            biased;
            () = &mut stopped => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((tcp, _)) => {
                connections.spawn(connection(
                    tcp,
                    acceptor.clone(),
                    service.clone(),
                    options.clone(),
                    stop.clone(),
                ));
            }
            Err(error) => {
                // Out of file descriptors, most often: the listener stays, the retry waits.
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

/// One connection: the acceptor's work (shedding at the cap, the TLS handshake), then HTTP/1.1
/// under the head deadline and the stop.
async fn connection<A, S, B>(tcp: TcpStream, acceptor: A, service: S, options: Arc<Options>, stop: Stop)
where
    A: Accept<TcpStream, S>,
    A::Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    A::Service: Served<B>,
    B: AnswerBody,
{
    // A connection still in its handshake when the stop comes is dropped: it has no request.
    let accepted = tokio::select! {
        biased;
        () = stop.token.cancelled() => return,
        accepted = acceptor.accept(tcp, service) => accepted,
    };
    // A refused connection (at the cap, or a failed or slow handshake) is closed by the drop.
    let Ok((stream, service)) = accepted else {
        return;
    };
    let activity = Arc::new(Activity::new());
    let service = Watched {
        inner: TowerToHyperService::new(service),
        activity: activity.clone(),
    };
    let conn = options.http.serve_connection(TokioIo::new(stream), service);
    let now = Instant::now();
    let retire = options.max_age.as_ref().map(|(age, retired)| Retire {
        at: now + *age,
        counted: retired.clone(),
    });
    let first_check = now + options.head_deadline;
    Supervised {
        conn: Box::pin(conn),
        activity,
        head_deadline: options.head_deadline,
        timer: Box::pin(tokio::time::sleep_until(
            retire.as_ref().map_or(first_check, |r| r.at.min(first_check)),
        )),
        stopped: Box::pin(stop.token.clone().cancelled_owned()),
        stop,
        woken_by: None,
        graceful: false,
        retire,
    }
    .await;
}

/// Whether a connection is serving a request, and if not since when it has been waiting for
/// the next head. Written by its requests, read when its timer fires; both happen in the
/// connection's own task, so relaxed atomics suffice (they are here for `Send`).
#[derive(Debug)]
struct Activity {
    /// The origin of `idle_since`.
    base: Instant,
    /// Nanoseconds from `base` to when the connection last went idle; [`Activity::BUSY`]
    /// while a request is served.
    idle_since: AtomicU64,
}

impl Activity {
    const BUSY: u64 = u64::MAX;

    /// A connection that has just finished its handshake: idle from now.
    fn new() -> Self {
        Activity {
            base: Instant::now(),
            idle_since: AtomicU64::new(0),
        }
    }

    fn busy(&self) {
        self.idle_since.store(Self::BUSY, Ordering::Relaxed);
    }

    fn idle(&self) {
        let since = u64::try_from(self.base.elapsed().as_nanos()).unwrap_or(Self::BUSY - 1);
        self.idle_since.store(since, Ordering::Relaxed);
    }

    /// When the head deadline next needs checking, seen at `now`; `None` when it has passed:
    /// the connection has waited `deadline` or more for a head.
    fn next_check(&self, now: Instant, deadline: Duration) -> Option<Instant> {
        match self.idle_since.load(Ordering::Relaxed) {
            // A request in flight is bounded by its own deadline; look again one later.
            Self::BUSY => Some(now + deadline),
            since => {
                let ends = self.base + Duration::from_nanos(since) + deadline;
                (ends > now).then_some(ends)
            }
        }
    }
}

/// A connection's service, marking the connection busy from a request's head to its answer.
#[derive(Debug, Clone)]
struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Service<http::Request<Incoming>> for Watched<S>
where
    S: Service<http::Request<Incoming>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Answering<S::Future>;

    fn call(&self, req: http::Request<Incoming>) -> Self::Future {
        self.activity.busy();
        Answering {
            inner: self.inner.call(req),
            activity: self.activity.clone(),
        }
    }
}

pin_project_lite::pin_project! {
    /// A request's answer being built; the connection goes idle when it is.
    struct Answering<F> {
        #[pin]
        inner: F,
        activity: Arc<Activity>,
    }
}

impl<F: Future> Future for Answering<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let answered = this.inner.poll(cx);
        if answered.is_ready() {
            this.activity.idle();
        }
        answered
    }
}

/// A served connection under its head deadline and the server's stop.
struct Supervised<I, S>
where
    S: HttpService<Incoming>,
{
    conn: Pin<Box<http1::Connection<I, S>>>,
    activity: Arc<Activity>,
    head_deadline: Duration,
    timer: Pin<Box<Sleep>>,
    stop: Stop,
    stopped: Pin<Box<WaitForCancellationFutureOwned>>,
    /// The waker `stopped` and `timer` were last polled with: the one they will wake.
    woken_by: Option<Waker>,
    /// Whether hyper has been told to finish its request in flight and close.
    graceful: bool,
    /// When the connection is old enough to be closed at its next idle moment; `None` once
    /// it has been (or with no age bound).
    retire: Option<Retire>,
}

/// A connection's age bound: when it falls due, and what counts the connections it closes.
struct Retire {
    at: Instant,
    counted: Counter,
}

impl<I, S> Future for Supervised<I, S>
where
    S: HttpService<Incoming>,
    S::ResBody: 'static,
    <S::ResBody as Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + 'static,
{
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        // The stop and the timer hold the waker of the poll that registered them, and keep it
        // until they fire; they are polled again only when that is no longer this task's
        // waker, or when they may have fired (the flag is set, the timer has elapsed).
        let rewake = !this.woken_by.as_ref().is_some_and(|w| w.will_wake(cx.waker()));
        if rewake {
            this.woken_by = Some(cx.waker().clone());
        }
        if !this.graceful && (rewake || this.stop.is_asked()) && this.stopped.as_mut().poll(cx).is_ready() {
            this.graceful = true;
            this.conn.as_mut().graceful_shutdown();
        }
        // Served to the end, or failed (a reset, a bad head answered 400): either way done.
        if this.conn.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        if rewake || this.timer.is_elapsed() {
            while this.timer.as_mut().poll(cx).is_ready() {
                let now = Instant::now();
                if let Some(retire) = this.retire.take_if(|r| now >= r.at)
                    && !this.graceful
                {
                    // As at the stop: the request in flight is answered (with `connection:
                    // close`), an idle connection closes. hyper acts on it when the
                    // connection is next polled: now.
                    retire.counted.inc();
                    this.graceful = true;
                    this.conn.as_mut().graceful_shutdown();
                    cx.waker().wake_by_ref();
                }
                match this.activity.next_check(now, this.head_deadline) {
                    Some(at) => {
                        let at = this.retire.as_ref().map_or(at, |r| r.at.min(at));
                        this.timer.as_mut().reset(at);
                    }
                    // Dropping the connection closes it: no head came in time.
                    None => return Poll::Ready(()),
                }
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_is_due_a_deadline_after_it_went_idle() {
        let deadline = Duration::from_secs(4);
        let activity = Activity::new();
        let start = activity.base;
        assert_eq!(activity.next_check(start, deadline), Some(start + deadline));
        tokio::time::advance(Duration::from_secs(3)).await;
        // A request: while it is served the deadline does not run.
        activity.busy();
        let now = Instant::now();
        assert_eq!(
            activity.next_check(now + deadline * 3, deadline),
            Some(now + deadline * 4)
        );
        // Answered at 3 s: the next head is due by 7 s.
        activity.idle();
        assert_eq!(
            activity.next_check(start + Duration::from_secs(4), deadline),
            Some(start + Duration::from_secs(7))
        );
        assert_eq!(
            activity.next_check(start + Duration::from_secs(7), deadline),
            None
        );
        assert_eq!(
            activity.next_check(start + Duration::from_secs(9), deadline),
            None
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_connection_must_send_its_first_head_within_the_deadline() {
        let deadline = Duration::from_secs(2);
        let activity = Activity::new();
        let start = activity.base;
        assert!(
            activity
                .next_check(start + Duration::from_millis(1999), deadline)
                .is_some()
        );
        assert_eq!(activity.next_check(start + deadline, deadline), None);
    }

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
        let served = tokio::spawn(serve(
            listener,
            axum_server::accept::DefaultAcceptor,
            service,
            options,
            stop.clone(),
        ));
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
        assert!(!seen.is_asked() && !seen.token.is_cancelled());
        stop.ask();
        assert!(seen.is_asked() && seen.token.is_cancelled());
    }
}

//! How far behind the API server each watch cache may be, so that `/readyz` and admission
//! answer from the caches through a short outage and stop only once what they hold may be
//! too old to decide on.
//!
//! A cache is *current* while its watch is open, and *behind* from its first failure (a
//! refused connection, a broken stream, an `ERROR` event) until it is known to have caught
//! up: an event or a completed list arrives, or a watch the server accepted after the last
//! failure has stayed open for [`SETTLE`]. The last matters for a quiet kind: a resumed watch
//! that the server accepts sends nothing until something changes, and kube-runtime's watcher
//! reports nothing either, so the accepted watch is seen on the wire instead, by
//! [`WatchStartLayer`] in the client's service stack.
//!
//! The settling time is there because a server that no longer has the version asked for
//! (every kube-apiserver right after a restart: its watch cache starts at the restart)
//! accepts the watch with `200` and sends `ERROR 410 Expired` at once; the cache then
//! re-lists and stays behind until the list completes.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Request, Response, Uri};

/// How long a watch accepted after a failure must stay open without an error before the
/// cache counts as caught up. Measured on kube-apiserver v1.36.2: the `410` of an expired
/// version follows the `200` within milliseconds.
pub const SETTLE: Duration = Duration::from_secs(1);

/// The default of `--max-staleness`: how long a cache may be behind before the webhook
/// reports not ready and stops deciding restores on it. A minute covers an API server
/// restart or a control-plane upgrade's rolling restart, during which the caches' contents
/// are what the cluster held a moment before; a node reconfigured in that minute is caught
/// again at binding, once the caches are current.
pub const DEFAULT_MAX_STALENESS: Duration = miggate_wire::webhook::MAX_STALENESS;

/// Watch streams the API server accepted, by resource plural (`pods`, `gpunodes`): the
/// last time each was answered with a success status.
#[derive(Debug, Default)]
pub struct WatchStarts {
    last: Mutex<HashMap<String, Instant>>,
}

impl WatchStarts {
    pub(crate) fn record(&self, plural: &str, at: Instant) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        match last.get_mut(plural) {
            Some(t) => *t = at,
            None => {
                last.insert(plural.to_string(), at);
            }
        }
    }

    /// When a watch of `plural` was last accepted.
    pub(crate) fn last(&self, plural: &str) -> Option<Instant> {
        self.last
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(plural)
            .copied()
    }
}

/// The resource plural a request watches (`GET .../pods?watch=true`), or `None` for any
/// other request. The plural is the path's last segment: kube-runtime watches collections.
///
/// A streaming list (`sendInitialEvents=true`) is a list, not a watch that has caught up:
/// the server accepts it at once and then sends every object, which takes as long as a
/// list does; the cache is current when its end arrives, not a second after it opens.
fn watched_plural(uri: &Uri) -> Option<&str> {
    let query = uri.query()?;
    let mut pairs = query.split('&');
    let watch = pairs
        .clone()
        .any(|pair| pair == "watch=true" || pair == "watch=1");
    let streaming_list = pairs.any(|pair| pair == "sendInitialEvents=true");
    if !watch || streaming_list {
        return None;
    }
    uri.path().rsplit('/').next().filter(|p| !p.is_empty())
}

/// A layer for the Kubernetes client's service stack that records each watch the server
/// accepts into [`WatchStarts`]. It reads the request line and the response status only.
#[derive(Debug, Clone, Default)]
pub struct WatchStartLayer {
    starts: Arc<WatchStarts>,
}

impl WatchStartLayer {
    /// A layer recording into a new [`WatchStarts`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Where the accepted watches are recorded.
    pub fn starts(&self) -> Arc<WatchStarts> {
        self.starts.clone()
    }
}

impl<S> tower::Layer<S> for WatchStartLayer {
    type Service = WatchStartService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WatchStartService {
            inner,
            starts: self.starts.clone(),
        }
    }
}

/// The service [`WatchStartLayer`] wraps around the client's.
#[derive(Debug, Clone)]
pub struct WatchStartService<S> {
    inner: S,
    starts: Arc<WatchStarts>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, B, R> tower::Service<Request<B>> for WatchStartService<S>
where
    S: tower::Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<R>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let plural = watched_plural(request.uri()).map(str::to_string);
        let response = self.inner.call(request);
        let starts = self.starts.clone();
        Box::pin(async move {
            let response = response.await?;
            if let Some(plural) = plural
                && response.status().is_success()
            {
                starts.record(&plural, Instant::now());
            }
            Ok(response)
        })
    }
}

/// One cache's freshness: since when it may be missing changes.
#[derive(Debug, Default)]
pub(crate) struct Freshness {
    state: Mutex<State>,
}

#[derive(Debug, Default, Clone, Copy)]
struct State {
    /// The first failure of the current run; `None` while current.
    behind_since: Option<Instant>,
    /// The last failure.
    last_error: Option<Instant>,
}

impl State {
    fn behind(self, now: Instant, accepted: Option<Instant>) -> Option<Instant> {
        let since = self.behind_since?;
        let caught_up = match (accepted, self.last_error) {
            (Some(accepted), Some(error)) => {
                accepted > error && now.saturating_duration_since(accepted) >= SETTLE
            }
            _ => false,
        };
        (!caught_up).then_some(since)
    }
}

impl Freshness {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Something arrived from the server (an event, a bookmark-free list's end): current.
    pub(crate) fn current(&self) {
        self.state().behind_since = None;
    }

    /// A watch or list failed at `now`. `accepted`: when the server last accepted a watch of
    /// this kind. A failure while current starts a new run; one while behind extends it.
    pub(crate) fn failed(&self, now: Instant, accepted: Option<Instant>) {
        let mut state = self.state();
        if state.behind(now, accepted).is_none() {
            state.behind_since = Some(now);
        }
        state.last_error = Some(now);
    }

    /// Since when the cache may be missing changes; `None` while current.
    pub(crate) fn behind(&self, now: Instant, accepted: Option<Instant>) -> Option<Instant> {
        self.state().behind(now, accepted)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::collection_watch("/api/v1/pods?watch=true&resourceVersion=5", Some("pods"))]
    #[case::watch_1(
        "/apis/miggate.io/v1alpha1/gpunodes?allowWatchBookmarks=true&watch=1",
        Some("gpunodes")
    )]
    #[case::namespaced("/api/v1/namespaces/ml/pods?watch=true", Some("pods"))]
    #[case::list("/api/v1/pods?limit=100", None)]
    #[case::no_query("/api/v1/pods", None)]
    #[case::watch_false("/api/v1/pods?watch=false", None)]
    #[case::lookalike("/api/v1/pods?xwatch=true", None)]
    #[case::streaming_list(
        "/api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0",
        None
    )]
    #[case::resumed_after_a_streaming_list("/api/v1/pods?watch=true&sendInitialEvents=false", Some("pods"))]
    fn only_watch_requests_name_a_plural(#[case] uri: &str, #[case] want: Option<&str>) {
        let uri: Uri = uri.parse().unwrap();
        assert_eq!(watched_plural(&uri), want);
    }

    fn secs(base: Instant, s: u64) -> Instant {
        base + Duration::from_secs(s)
    }

    #[test]
    fn behind_from_the_first_failure_until_an_event() {
        let t = Instant::now();
        let f = Freshness::default();
        assert_eq!(f.behind(t, None), None, "current before any failure");
        f.failed(secs(t, 1), None);
        f.failed(secs(t, 3), None);
        assert_eq!(
            f.behind(secs(t, 10), None),
            Some(secs(t, 1)),
            "from the first failure"
        );
        f.current();
        assert_eq!(f.behind(secs(t, 10), None), None);
        f.failed(secs(t, 20), None);
        assert_eq!(f.behind(secs(t, 21), None), Some(secs(t, 20)), "a new run");
    }

    #[test]
    fn an_accepted_watch_catches_up_only_once_it_has_settled_after_the_last_failure() {
        let t = Instant::now();
        let f = Freshness::default();
        // Accepted before the failures: says nothing.
        f.failed(secs(t, 1), Some(t));
        f.failed(secs(t, 4), Some(t));
        assert_eq!(f.behind(secs(t, 9), Some(t)), Some(secs(t, 1)));
        // Accepted after it: behind until it has stayed open SETTLE, then current.
        let accepted = secs(t, 5);
        assert_eq!(f.behind(accepted, Some(accepted)), Some(secs(t, 1)));
        assert_eq!(f.behind(accepted + SETTLE, Some(accepted)), None);
        // An expired version's 410 right after the 200: still behind, from the first failure.
        f.failed(accepted + Duration::from_millis(5), Some(accepted));
        assert_eq!(f.behind(secs(t, 30), Some(accepted)), Some(secs(t, 1)));
    }

    #[test]
    fn a_failure_after_a_settled_watch_starts_a_new_run() {
        let t = Instant::now();
        let f = Freshness::default();
        f.failed(secs(t, 1), None);
        let accepted = secs(t, 2);
        // Settled at 3 s; the watch breaks at 50 s: behind from 50 s, not from 1 s.
        f.failed(secs(t, 50), Some(accepted));
        assert_eq!(f.behind(secs(t, 51), Some(accepted)), Some(secs(t, 50)));
    }
}

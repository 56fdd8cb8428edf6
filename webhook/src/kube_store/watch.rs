//! Feeding a cache from a watch: the watcher's events applied in order, and the retry
//! backoff, reset once the server accepts a watch of the kind.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use super::cache::{Cache, Entry};
use super::convert::key_of;
use crate::freshness::WatchStarts;

/// The cap on the wait between two tries of a failed watch, before jitter adds up to as much
/// again (so every wait is under twice this, 5 s). kube-runtime's default caps at 30 s (up to
/// 60 s with its jitter) and resets only after 120 s without an error: a webhook then stays
/// unready for half a minute after the API server is back, and a kind whose CRD is installed
/// after the webhook started (the Go peer's) goes unseen as long. A list every few seconds per
/// failing kind is nothing to an API server, and the jitter keeps replicas out of step.
pub const WATCH_RETRY_MAX: Duration = Duration::from_millis(2500);
/// The first wait after a watch fails, doubled at each failure in a row.
pub(super) const WATCH_RETRY_MIN: Duration = Duration::from_millis(800);

/// The watches' backoff: exponential from [`WATCH_RETRY_MIN`] to [`WATCH_RETRY_MAX`], each
/// wait lengthened by a random share of itself (below 100%), never giving up. It starts over
/// when kube-runtime's `StreamBackoff` resets it (the watch yielded an event) and when the
/// server has accepted a watch of the kind since the last wait: after an outage, the first
/// accepted watch of a restarted server is answered `410` at once, and the re-list that
/// follows then waits the shortest time, not the capped one the outage built up.
pub(crate) struct WatchBackoff {
    builder: backon::ExponentialBuilder,
    current: backon::ExponentialBackoff,
    starts: Arc<WatchStarts>,
    plural: String,
    /// The accepted watch last seen, to tell a new one.
    seen: Option<Instant>,
}

impl WatchBackoff {
    pub(crate) fn new(starts: Arc<WatchStarts>, plural: String) -> Self {
        use backon::BackoffBuilder;
        let builder = backon::ExponentialBuilder::default()
            .with_min_delay(WATCH_RETRY_MIN)
            .with_max_delay(WATCH_RETRY_MAX)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times();
        let seen = starts.last(&plural);
        WatchBackoff {
            current: builder.build(),
            builder,
            starts,
            plural,
            seen,
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        use backon::BackoffBuilder;
        let accepted = self.starts.last(&self.plural);
        if accepted.is_some() && accepted != self.seen {
            self.seen = accepted;
            self.current = self.builder.build();
        }
        self.current.next()
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        use backon::BackoffBuilder;
        self.current = self.builder.build();
    }
}

/// Feeds `cache` from a watcher over `api` until the task is aborted.
pub(super) async fn feed<K, V>(
    api: Api<K>,
    config: watcher::Config,
    cache: Arc<Cache<V>>,
    convert: fn(K) -> Option<V>,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    V: Entry,
{
    let backoff = WatchBackoff::new(cache.starts.clone(), cache.plural.clone());
    let stream = watcher::watcher(api, config).backoff(backoff);
    let mut stream = std::pin::pin!(stream);
    while let Some(item) = stream.next().await {
        match item {
            Ok(Event::Init) => cache.begin(),
            Ok(Event::InitApply(obj)) => cache.buffer(key_of(&obj), convert(obj)),
            Ok(Event::InitDone) => cache.done(),
            Ok(Event::Apply(obj)) => cache.upsert(key_of(&obj), convert(obj)),
            Ok(Event::Delete(obj)) => cache.remove(&key_of(&obj)),
            Err(e) => {
                if matches!(&e, watcher::Error::InitialListFailed(kube::Error::Api(s)) if s.code == 404) {
                    cache.not_served();
                }
                cache.error();
                tracing::warn!(kind = %cache.kind, error = %e, "watch failed; retrying after a backoff");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_watch_retries_within_seconds_forever_and_starts_over_after_a_reset() {
        use kube::runtime::utils::Backoff;
        let starts = Arc::new(WatchStarts::default());
        let mut backoff = WatchBackoff::new(starts.clone(), "gpunodes".into());
        let waits: Vec<Duration> = backoff.by_ref().take(200).collect();
        assert_eq!(waits.len(), 200, "never gives up");
        assert!(
            waits[0] >= WATCH_RETRY_MIN && waits[0] < WATCH_RETRY_MIN * 2,
            "{waits:?}"
        );
        assert!(waits.iter().all(|w| *w < WATCH_RETRY_MAX * 2), "{waits:?}");
        assert!(
            waits[10..].iter().all(|w| *w >= WATCH_RETRY_MAX),
            "capped, not shrinking: {waits:?}"
        );
        // Jitter: the capped waits are not all alike, so replicas do not retry in step.
        assert!(waits[10..].iter().any(|w| *w != waits[10]), "{waits:?}");
        backoff.reset();
        let first = backoff.next().unwrap();
        assert!(first < WATCH_RETRY_MIN * 2, "{first:?}");
        // Capped again, then the server accepts a watch of the kind (of another kind: nothing).
        let _: Vec<Duration> = backoff.by_ref().take(10).collect();
        starts.record("pods", Instant::now());
        assert!(backoff.next().unwrap() >= WATCH_RETRY_MAX);
        starts.record("gpunodes", Instant::now());
        let after = backoff.next().unwrap();
        assert!(
            after < WATCH_RETRY_MIN * 2,
            "starts over after an accepted watch: {after:?}"
        );
        assert!(backoff.next().unwrap() >= WATCH_RETRY_MIN * 2, "once");
    }
}

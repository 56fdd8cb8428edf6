//! How long the watch caches wait before trying again, and whether a kind's lists are
//! streamed: the retry backoff, reset once the server accepts a watch of the kind, and the
//! list mode chosen from the server's refusals to stream. Shared by the streaming feed
//! ([`super::watch`]) and the whole lists ([`super::whole`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cache_status::ListMode;
use crate::freshness::WatchStarts;

/// The cap on the wait between two tries of a failed watch, before jitter adds up to as much
/// again (so every wait is under twice this, 2 s). It bounds how long after an API server is
/// back a cache notices: with a 2.5 s cap (every wait under 5 s) that delay alone exceeded the
/// time the server takes to hand over 40,000 pods. kube-runtime's default caps at 30 s (up to
/// 60 s with its jitter) and resets only after 120 s without an error: a webhook then stays
/// unready for half a minute after the API server is back, and a kind whose CRD is installed
/// after the webhook started (the Go peer's) goes unseen as long. A refused connection or a
/// failed list per second or two per failing kind is nothing to an API server, and the
/// jitter keeps replicas out of step.
pub const WATCH_RETRY_MAX: Duration = Duration::from_millis(1000);
/// The first wait after a watch fails, doubled at each failure in a row: also the wait before
/// the re-list that a restarted server's `410` asks for (the backoff starts over at the
/// accepted watch), so at most 0.5 s with its jitter.
pub(super) const WATCH_RETRY_MIN: Duration = Duration::from_millis(250);

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

/// After the server refused to stream a kind's list, how long its re-lists are read whole
/// before one tries streaming again: an API server upgraded, or one whose etcd gained
/// progress notifications, streams again within this, and a server that keeps refusing
/// costs one refused watch per re-list at most this often.
pub const STREAMING_RETRY_AFTER: Duration = Duration::from_secs(600);

/// Whether a kind's lists are streamed or listed whole, from the refusals seen.
#[derive(Debug, Default)]
pub(crate) struct ListChoice {
    refused_at: Option<Instant>,
    /// Whether a refusal was logged (once per kind; later ones go to the metric).
    logged: bool,
}

impl ListChoice {
    /// How the next list is to be read.
    pub(crate) fn mode(&self, now: Instant) -> ListMode {
        match self.refused_at {
            Some(at) if now.saturating_duration_since(at) < STREAMING_RETRY_AFTER => ListMode::Listed,
            _ => ListMode::Streamed,
        }
    }

    /// The server refused to stream a list at `now`. Returns whether this is the first
    /// refusal (to be logged).
    pub(crate) fn refused(&mut self, now: Instant) -> bool {
        self.refused_at = Some(now);
        !std::mem::replace(&mut self.logged, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_lists_the_kind_whole_until_the_retry_time_and_is_logged_once() {
        let t = Instant::now();
        let mut choice = ListChoice::default();
        assert_eq!(choice.mode(t), ListMode::Streamed, "streamed until refused");
        assert!(choice.refused(t), "the first refusal is logged");
        assert_eq!(choice.mode(t), ListMode::Listed);
        assert_eq!(
            choice.mode(t + STREAMING_RETRY_AFTER - Duration::from_secs(1)),
            ListMode::Listed
        );
        let later = t + STREAMING_RETRY_AFTER;
        assert_eq!(
            choice.mode(later),
            ListMode::Streamed,
            "tried again after the wait"
        );
        assert!(!choice.refused(later), "a second refusal is not logged again");
        assert_eq!(
            choice.mode(later),
            ListMode::Listed,
            "and lists whole for another wait"
        );
    }

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

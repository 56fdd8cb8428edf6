//! Feeding a cache from a streaming watch: the watcher's events applied in order, and a
//! refusal to stream turned into lists read whole ([`super::whole`]).

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::backoff::{ListChoice, STREAMING_RETRY_AFTER, WatchBackoff};
use super::cache::{Cache, Entry};
use super::convert::key_of;
use super::whole::list_then_watch;
use crate::cache_status::ListMode;

/// Whether `error`, met while a streaming list was being opened or read, says the server
/// will not stream this list, so it is to be listed whole now, without a backoff.
///
/// Three answers are seen from kube-apiserver: `422 Invalid` when its `WatchList` feature
/// gate is off (the default before 1.34), `400` from older validation, and, with the gate on
/// over an etcd without progress notifications (etcd 3.4), a `200` whose first event is an
/// `ERROR` 500 ("the required storage feature RequestWatchProgress is disabled"). Any error
/// event before the list's end but `410 Gone` (the version expired: re-list, streaming again)
/// counts: falling back on a transient one costs one plain list. Any other failure to open
/// the watch (401, 403, 404, 429, a `500` or `503` of a server in trouble) is one a plain
/// list would meet too: retried after the backoff, streaming again.
pub(crate) fn refuses_streaming(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::WatchStartFailed(kube::Error::Api(s)) => matches!(s.code, 400 | 422),
        watcher::Error::WatchError(s) => s.code != 410,
        _ => false,
    }
}

/// Where the feed is in a streaming list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    /// Not listing: watching, or before the first list.
    No,
    /// A streaming list was opened and has sent nothing yet: the server may still refuse it
    /// (an `ERROR` event first), and a refused one is not counted as a list.
    Opened,
    /// The list has begun in the cache.
    Begun,
}

/// What the feed does after an item of the watch stream.
enum Next {
    Continue,
    /// Drop this watcher: the server refused to stream, and the kind is listed whole.
    Restart,
    /// Drop this watcher and start another after a wait of the backoff: a streaming list
    /// ended before its end.
    RestartAfterBackoff,
}

/// Feeds `cache` with `K` from the API server `client` reaches until the task is aborted.
///
/// Lists are streamed (`sendInitialEvents=true`): the server sends every object from its own
/// watch cache, one event at a time, so the client holds one object at a time whatever the
/// kind's size. Where the server refuses to stream ([`refuses_streaming`]) the kind is listed
/// at once in one request from the server's watch cache, decoded as it arrives, and watched
/// from there ([`list_then_watch`]): said once in the log, counted in
/// `miggate_watch_list_fallbacks_total`, and so for [`STREAMING_RETRY_AFTER`].
pub(super) async fn feed<K, V>(
    client: Client,
    config: watcher::Config,
    cache: Arc<Cache<V>>,
    convert: fn(K) -> Option<V>,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + 'static,
    V: Entry,
{
    let mut choice = ListChoice::default();
    // Waits after streaming lists that ended early, which kube-runtime's watcher takes for a
    // watch's normal end and re-lists at once: without them, a server or proxy that cuts
    // every stream before its end (one shorter than the list) would be asked again and again.
    let mut early_ends = WatchBackoff::new(cache.starts.clone(), cache.plural.clone());
    loop {
        if choice.mode(Instant::now()) == ListMode::Listed {
            list_then_watch(&client, &config, &cache, convert, &choice).await;
            continue;
        }
        let backoff = WatchBackoff::new(cache.starts.clone(), cache.plural.clone());
        let api = Api::<K>::all(client.clone());
        let stream = watcher::watcher(api, config.clone().streaming_lists()).backoff(backoff);
        let mut stream = std::pin::pin!(stream);
        let mut listing = Listing::No;
        while let Some(item) = stream.next().await {
            let next = match item {
                Ok(event) => {
                    let completes = matches!(event, Event::InitDone);
                    let next = apply(&cache, event, &mut listing, convert);
                    if completes {
                        kube::runtime::utils::Backoff::reset(&mut early_ends);
                    }
                    next
                }
                Err(e) => {
                    let next = failed(&cache, &e, listing != Listing::No, &mut choice);
                    // The watcher waits out its own backoff and lists again from the start.
                    listing = Listing::No;
                    next
                }
            };
            match next {
                Next::Continue => {}
                Next::Restart => break,
                Next::RestartAfterBackoff => {
                    if let Some(wait) = early_ends.next() {
                        tokio::time::sleep(wait).await;
                    }
                    break;
                }
            }
        }
    }
}

/// One event of the streaming watch into `cache`.
fn apply<K, V>(cache: &Cache<V>, event: Event<K>, listing: &mut Listing, convert: fn(K) -> Option<V>) -> Next
where
    K: Resource,
    V: Entry,
{
    match event {
        Event::Init if *listing != Listing::No => {
            cache.error();
            tracing::warn!(kind = %cache.kind, "the streaming list ended before its end; listing again after a backoff");
            return Next::RestartAfterBackoff;
        }
        Event::Init => *listing = Listing::Opened,
        Event::InitApply(obj) => {
            begin_once(cache, listing);
            cache.buffer(key_of(&obj), convert(obj));
        }
        Event::InitDone => {
            begin_once(cache, listing);
            *listing = Listing::No;
            cache.done(ListMode::Streamed);
        }
        Event::Apply(obj) => cache.upsert(key_of(&obj), convert(obj)),
        Event::Delete(obj) => cache.remove(&key_of(&obj)),
    }
    Next::Continue
}

/// Begins the list in `cache` at its first object (or its end, when empty).
fn begin_once<V: Entry>(cache: &Cache<V>, listing: &mut Listing) {
    if *listing != Listing::Begun {
        cache.begin();
        *listing = Listing::Begun;
    }
}

/// One error of the streaming watch: a refusal to stream lists the kind whole from now on;
/// anything else is counted, and the watcher retries after its backoff.
fn failed<V: Entry>(cache: &Cache<V>, e: &watcher::Error, listing: bool, choice: &mut ListChoice) -> Next {
    let opening = matches!(e, watcher::Error::WatchStartFailed(_));
    if (listing || opening) && refuses_streaming(e) {
        cache.list_fell_back();
        if choice.refused(Instant::now()) {
            tracing::warn!(kind = %cache.kind, error = %e, retry_after_seconds = STREAMING_RETRY_AFTER.as_secs(),
                "the API server does not stream this kind's lists; reading each list whole from its watch cache instead");
        } else {
            tracing::debug!(kind = %cache.kind, error = %e, "streaming list refused again; listed whole");
        }
        return Next::Restart;
    }
    // A streaming list or a watch answered `404`: the kind's API is not served. An
    // optional kind says so once (`not_served`); its retries are not worth a line each.
    let not_found = matches!(e,
        watcher::Error::InitialListFailed(kube::Error::Api(s)) | watcher::Error::WatchStartFailed(kube::Error::Api(s))
            if s.code == 404);
    cache.failed("watch", e, not_found);
    Next::Continue
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;
    use rstest::rstest;

    fn status(code: u16) -> Box<Status> {
        Box::new(Status::failure("refused", "Test").with_code(code))
    }

    #[rstest]
    #[case::feature_gate_off(watcher::Error::WatchStartFailed(kube::Error::Api(status(422))), true)]
    #[case::older_validation(watcher::Error::WatchStartFailed(kube::Error::Api(status(400))), true)]
    #[case::storage_without_progress_notify(watcher::Error::WatchError(status(500)), true)]
    #[case::any_error_event_but_gone(watcher::Error::WatchError(status(429)), true)]
    #[case::expired_version(watcher::Error::WatchError(status(410)), false)]
    #[case::forbidden(watcher::Error::WatchStartFailed(kube::Error::Api(status(403))), false)]
    #[case::not_served(watcher::Error::WatchStartFailed(kube::Error::Api(status(404))), false)]
    #[case::server_in_trouble(watcher::Error::WatchStartFailed(kube::Error::Api(status(500))), false)]
    #[case::overloaded(watcher::Error::WatchStartFailed(kube::Error::Api(status(429))), false)]
    #[case::paged_list_failed(watcher::Error::InitialListFailed(kube::Error::Api(status(422))), false)]
    #[case::no_version(watcher::Error::NoResourceVersion, false)]
    fn what_refuses_a_streaming_list(#[case] error: watcher::Error, #[case] refuses: bool) {
        assert_eq!(refuses_streaming(&error), refuses, "{error}");
    }
}

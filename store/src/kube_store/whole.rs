//! Where the API server will not stream a kind's list: one list request read whole from the
//! server's watch cache (`resourceVersion=0`, no `limit`), decoded one object at a time as its
//! body arrives, then a watch from the list's `resourceVersion`. This is what client-go's
//! reflector asks for where streaming lists are off, and what the server hands out fastest:
//! one response from memory, where paging through a kind of 200,000 pods costs 2,000 requests.
//!
//! The body is never held: a blocking task decodes it through serde's visitor from a reader
//! bridged to the response stream, and each item goes to the cache's list buffer as soon as it
//! is decoded (most are dropped at once: a pod that is not a restore pod), so a list of any
//! size costs one object and the read buffer. A list cut before its end is not swapped in.

use std::fmt;
use std::io::BufReader;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kube::api::{ListParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use serde::Deserialize;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use tokio_util::compat::FuturesAsyncReadCompatExt;
use tokio_util::io::SyncIoBridge;

use super::backoff::{ListChoice, WatchBackoff};
use super::cache::{Cache, Entry};
use super::convert::key_of;
use crate::cache_status::ListMode;

/// The read buffer between the response stream and the decoder: what a list costs beside the
/// object being decoded.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Why a whole list was not read.
#[derive(Debug, thiserror::Error)]
pub(super) enum ListError {
    #[error("{0}")]
    Request(#[from] kube::Error),
    #[error("could not build the list request: {0}")]
    Build(#[from] kube::core::request::Error),
    /// The body ended early, broke off or was not a list of this kind.
    #[error("the list's body could not be read: {0}")]
    Body(#[from] serde_json::Error),
    #[error(
        "the server paged a list asked for whole (a continue token came back); its first page is not the list"
    )]
    Paged,
    #[error("the list has no metadata.resourceVersion to watch from")]
    NoVersion,
    #[error("the list's reader stopped: {0}")]
    Reader(#[from] tokio::task::JoinError),
}

impl ListError {
    /// The API server answered that it does not serve the kind.
    fn not_found(&self) -> bool {
        matches!(self, ListError::Request(kube::Error::Api(s)) if s.code == 404)
    }
}

/// Lists and watches `K` into `cache` this way until a re-list finds that streaming is to be
/// tried again ([`ListChoice::mode`]). Failures are counted in the cache and retried after
/// `WatchBackoff`'s wait; a watch answered `410 Gone` lists again after the same wait.
pub(super) async fn list_then_watch<K, V>(
    client: &Client,
    config: &watcher::Config,
    cache: &Arc<Cache<V>>,
    convert: fn(K) -> Option<V>,
    choice: &ListChoice,
) where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + fmt::Debug + Send + 'static,
    V: Entry,
{
    let api = Api::<K>::all(client.clone());
    let mut backoff = WatchBackoff::new(cache.starts.clone(), cache.plural.clone());
    loop {
        match list_whole(client, config, cache, convert).await {
            Ok(version) => {
                kube::runtime::utils::Backoff::reset(&mut backoff);
                watch_from(&api, config, version, cache, convert, &mut backoff).await;
            }
            Err(e) => {
                cache.failed("list", &e, e.not_found());
            }
        }
        wait(&mut backoff).await;
        if choice.mode(Instant::now()) == ListMode::Streamed {
            return;
        }
    }
}

/// One list of `K` read whole into `cache`'s buffer and swapped in at its end. Returns the
/// list's `resourceVersion`.
async fn list_whole<K, V>(
    client: &Client,
    config: &watcher::Config,
    cache: &Arc<Cache<V>>,
    convert: fn(K) -> Option<V>,
) -> Result<String, ListError>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Send + 'static,
    V: Entry,
{
    let params = ListParams {
        label_selector: config.label_selector.clone(),
        field_selector: config.field_selector.clone(),
        ..ListParams::default()
    }
    .match_any();
    let request = kube::core::Request::new(K::url_path(&(), None)).list(&params)?;
    let body = client.request_stream(request).await?;
    cache.begin();
    let buffer = Arc::clone(cache);
    let end = tokio::task::spawn_blocking(move || {
        let reader = BufReader::with_capacity(READ_BUFFER_BYTES, SyncIoBridge::new(body.compat()));
        read_list(reader, &buffer, convert)
    })
    .await??;
    if end.paged {
        return Err(ListError::Paged);
    }
    let version = end.version.ok_or(ListError::NoVersion)?;
    cache.done(ListMode::Listed);
    Ok(version)
}

/// What a list's body said beside its items.
#[derive(Debug, Default)]
struct ListEnd {
    version: Option<String>,
    /// A `continue` token: the server paged it.
    paged: bool,
}

/// Decodes a list of `K` from `reader`, each item into `cache`'s buffer as it is read.
fn read_list<K, V, R>(
    reader: R,
    cache: &Cache<V>,
    convert: fn(K) -> Option<V>,
) -> Result<ListEnd, serde_json::Error>
where
    K: Resource + DeserializeOwned,
    V: Entry,
    R: std::io::Read,
{
    let mut de = serde_json::Deserializer::from_reader(reader);
    let end = ListSeed { cache, convert }.deserialize(&mut de)?;
    de.end()?;
    Ok(end)
}

/// A list's top level: `metadata` kept, `items` fed to the cache, anything else skipped.
struct ListSeed<'a, K, V> {
    cache: &'a Cache<V>,
    convert: fn(K) -> Option<V>,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum ListField {
    Metadata,
    Items,
    #[serde(other)]
    Other,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ListMeta {
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

impl<'de, K, V> DeserializeSeed<'de> for ListSeed<'_, K, V>
where
    K: Resource + DeserializeOwned,
    V: Entry,
{
    type Value = ListEnd;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<ListEnd, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, K, V> Visitor<'de> for ListSeed<'_, K, V>
where
    K: Resource + DeserializeOwned,
    V: Entry,
{
    type Value = ListEnd;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Kubernetes list")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ListEnd, A::Error> {
        let mut end = ListEnd::default();
        while let Some(field) = map.next_key::<ListField>()? {
            match field {
                ListField::Metadata => {
                    let meta: Option<ListMeta> = map.next_value()?;
                    let meta = meta.unwrap_or_default();
                    end.version = meta.resource_version.filter(|v| !v.is_empty());
                    end.paged = meta.continue_token.is_some_and(|c| !c.is_empty());
                }
                ListField::Items => map.next_value_seed(Items {
                    cache: self.cache,
                    convert: self.convert,
                })?,
                ListField::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(end)
    }
}

/// A list's `items`, each decoded and handed to the cache's buffer before the next is read.
struct Items<'a, K, V> {
    cache: &'a Cache<V>,
    convert: fn(K) -> Option<V>,
}

impl<'de, K, V> DeserializeSeed<'de> for Items<'_, K, V>
where
    K: Resource + DeserializeOwned,
    V: Entry,
{
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, K, V> Visitor<'de> for Items<'_, K, V>
where
    K: Resource + DeserializeOwned,
    V: Entry,
{
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list's items")
    }

    /// `"items": null`, as Go writes an empty list it never filled.
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(object) = seq.next_element::<K>()? {
            self.cache.buffer(key_of(&object), (self.convert)(object));
        }
        Ok(())
    }
}

/// Watches `K` from `version` into `cache` until the server says the version is gone (`410`),
/// resuming from the last version seen when a watch ends or fails.
async fn watch_from<K, V>(
    api: &Api<K>,
    config: &watcher::Config,
    mut version: String,
    cache: &Cache<V>,
    convert: fn(K) -> Option<V>,
    backoff: &mut WatchBackoff,
) where
    K: Resource + DeserializeOwned + Clone + fmt::Debug + Send + 'static,
    V: Entry,
{
    let params = WatchParams {
        label_selector: config.label_selector.clone(),
        field_selector: config.field_selector.clone(),
        timeout: config.timeout,
        ..WatchParams::default()
    };
    loop {
        let stream = match api.watch(&params, &version).await {
            Ok(stream) => stream,
            Err(kube::Error::Api(s)) if s.code == 410 => {
                cache.failed("watch", &s, false);
                return;
            }
            Err(e) => {
                cache.failed("watch", &e, false);
                wait(backoff).await;
                continue;
            }
        };
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            let object = match event {
                Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => {
                    let (key, at) = (key_of(&o), o.meta().resource_version.clone());
                    cache.upsert(key, convert(o));
                    at
                }
                Ok(WatchEvent::Deleted(o)) => {
                    cache.remove(&key_of(&o));
                    o.meta().resource_version.clone()
                }
                Ok(WatchEvent::Bookmark(b)) => Some(b.metadata.resource_version),
                Ok(WatchEvent::Error(s)) if s.code == 410 => {
                    cache.failed("watch", &s, false);
                    return;
                }
                Ok(WatchEvent::Error(s)) => {
                    cache.failed("watch", &s, false);
                    wait(backoff).await;
                    break;
                }
                Err(e) => {
                    cache.failed("watch", &e, false);
                    wait(backoff).await;
                    break;
                }
            };
            if let Some(at) = object.filter(|v| !v.is_empty()) {
                version = at;
            }
            kube::runtime::utils::Backoff::reset(backoff);
        }
    }
}

async fn wait(backoff: &mut WatchBackoff) {
    if let Some(wait) = backoff.next() {
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube_store::WatchCounters;
    use crate::kube_store::cache::Tracking;
    use crate::kube_store::lean::WatchedGpuNode;
    use serde_json::json;

    impl Entry for String {}

    fn cache() -> Arc<Cache<String>> {
        Cache::of::<miggate_crds::GpuNode>(&Tracking::for_tests(), &WatchCounters::default())
    }

    fn name_of(n: WatchedGpuNode) -> Option<String> {
        n.metadata.name.filter(|name| !name.starts_with("skip"))
    }

    fn node(name: &str) -> serde_json::Value {
        json!({"metadata": {"name": name, "resourceVersion": "5", "annotations": {"a": "b".repeat(4096)}}})
    }

    fn read(body: &serde_json::Value, cache: &Cache<String>) -> Result<ListEnd, serde_json::Error> {
        cache.begin();
        let bytes = serde_json::to_vec(body).unwrap();
        read_list(BufReader::new(&bytes[..]), cache, name_of)
    }

    #[test]
    fn a_list_is_read_item_by_item_whatever_order_its_fields_come_in() {
        let cache = cache();
        // The version after the items, and fields this reader does not know.
        let body = json!({"kind": "GpuNodeList", "apiVersion": "miggate.io/v1alpha1", "extra": {"x": [1]},
            "items": [node("a"), node("skip-b"), node("c")], "metadata": {"resourceVersion": "77"}});
        let end = read(&body, &cache).unwrap();
        assert_eq!(end.version.as_deref(), Some("77"));
        assert!(!end.paged);
        cache.done(ListMode::Listed);
        let c = cache.read();
        let mut names: Vec<_> = c.items.keys().cloned().collect();
        names.sort();
        assert_eq!(names, ["a", "c"], "each item converted, the dropped one not kept");
    }

    #[rstest::rstest]
    #[case::null_items(json!({"metadata": {"resourceVersion": "3"}, "items": null}), Some("3"), false)]
    #[case::no_items(json!({"metadata": {"resourceVersion": "3"}}), Some("3"), false)]
    #[case::paged(json!({"metadata": {"resourceVersion": "3", "continue": "abc"}, "items": []}), Some("3"), true)]
    #[case::empty_version(json!({"metadata": {"resourceVersion": ""}, "items": []}), None, false)]
    #[case::no_metadata(json!({"items": []}), None, false)]
    fn what_a_list_says_beside_its_items(
        #[case] body: serde_json::Value,
        #[case] version: Option<&str>,
        #[case] paged: bool,
    ) {
        let end = read(&body, &cache()).unwrap();
        assert_eq!(end.version.as_deref(), version);
        assert_eq!(end.paged, paged);
    }

    #[rstest::rstest]
    #[case::cut_mid_item(b"{\"metadata\":{\"resourceVersion\":\"9\"},\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"meta".to_vec())]
    #[case::cut_after_items(b"{\"metadata\":{\"resourceVersion\":\"9\"},\"items\":[]".to_vec())]
    #[case::not_a_list(b"[1,2]".to_vec())]
    #[case::trailing_garbage(b"{\"items\":[]} x".to_vec())]
    #[case::item_not_an_object(b"{\"items\":[7]}".to_vec())]
    fn a_body_that_is_not_a_whole_list_is_an_error(#[case] body: Vec<u8>) {
        let cache = cache();
        cache.begin();
        let e = read_list(BufReader::new(&body[..]), &cache, name_of).unwrap_err();
        assert!(!e.to_string().is_empty());
        assert!(cache.read().items.is_empty(), "nothing swapped in");
    }

    /// The decoder holds one object and the read buffer, not the list: a reader that yields
    /// the body a few bytes at a time, as a slow connection does, is decoded all the same.
    #[test]
    fn a_body_read_in_small_pieces_is_decoded_as_one() {
        struct Trickle<'a>(&'a [u8]);
        impl std::io::Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                let n = self.0.len().min(buf.len()).min(7);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let items: Vec<_> = (0..500).map(|i| node(&format!("n{i:03}"))).collect();
        let body =
            serde_json::to_vec(&json!({"metadata": {"resourceVersion": "12"}, "items": items})).unwrap();
        let cache = cache();
        cache.begin();
        let end = read_list(Trickle(&body), &cache, name_of).unwrap();
        assert_eq!(end.version.as_deref(), Some("12"));
        cache.done(ListMode::Listed);
        assert_eq!(cache.read().items.len(), 500);
    }
}

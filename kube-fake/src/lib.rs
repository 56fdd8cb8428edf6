//! An in-process Kubernetes API server for tests, so the webhook's watch caches and the
//! publisher are tested against the real wire protocol rather than a mocked client call.
//!
//! It speaks what `kube::Client` and kube-runtime's `watcher` speak: collection lists with a
//! `resourceVersion`, watches as chunked streams of newline-delimited `WatchEvent`s (`ADDED`,
//! `MODIFIED`, `DELETED`, `BOOKMARK` when `allowWatchBookmarks` is asked, `ERROR` with a 410
//! `Status` when the asked version is too old), label and field selectors (equality forms),
//! single-object GETs, server-side apply (`PATCH` with `application/apply-patch+yaml`) on
//! objects and their `status` subresource, and the other writes as the real server answers
//! them: `POST` (`409 AlreadyExists`), `PUT` at a `resourceVersion` (`409 Conflict` when it is
//! stale), JSON patches (`application/json-patch+json`; a failed `test` refuses the patch with
//! `422`) and `DELETE` (`409 Conflict` when its `preconditions` name another UID or version).
//! A Secret is validated on update as the real server validates it: its `type` never changes,
//! and once `immutable` is set neither it nor `data` does (`422 Invalid`). A `SelfSubjectReview`
//! is answered with the user a test set (the `access` module). Plain HTTP on `127.0.0.1:0`.
//!
//! The test drives it: [`FakeApiServer::apply`] and [`FakeApiServer::delete`] change objects
//! (and notify watches), [`FakeApiServer::drop_watches`] ends open watch streams,
//! [`FakeApiServer::expire`] answers open and future watches of older versions with
//! `410 Gone`, and [`FakeApiServer::requests`] returns every request received.
//!
//! # Faults
//!
//! What a client of a real cluster meets, so its recovery is tested rather than assumed:
//!
//! - [`FakeApiServer::fail_next`]: the next request of a plural is answered with an error
//!   `Status` (with the reason the real server gives that code: `403` `Forbidden`, …);
//!   [`FakeApiServer::refuse`]: every request of one verb of a plural, as RBAC refuses it;
//!   [`FakeApiServer::race_next_create`]: another client's create lands first;
//!   [`FakeApiServer::fail_next_watch`]: the same for its next watch only;
//!   [`FakeApiServer::serve`]: a plural is not served at all (`404`).
//! - [`FakeApiServer::stop`], [`FakeApiServer::start_again`] and [`FakeApiServer::restart`]:
//!   the API server process killed and started again with etcd intact. Stopping closes the
//!   listener (connects are refused) and resets every open connection where it is: a watch
//!   stream is cut, not ended cleanly, so its client sees a transport error (a reset, since
//!   kube-client takes a plain HTTP/1.1 stream closed early as a watch's normal end). Started
//!   again,
//!   it listens on the same port (the [`url`](FakeApiServer::url) and
//!   [`kubeconfig`](FakeApiServer::kubeconfig) stay valid) with the same objects and versions,
//!   and its watch window starts after every version issued before the restart: a watch from
//!   any of them is answered `200` with one `ERROR` event carrying a `410` `Status`, reason
//!   `Expired`, message `too old resource version: {asked} ({oldest})`, so clients re-list.
//!   Lists work at once, and versions keep increasing from where they were.
//! - [`FakeApiServer::delay_lists`]: every list of a plural is answered only after a delay, as
//!   by a loaded server; [`FakeApiServer::break_next_list`]: the next list of a plural sends its
//!   status and part of its body, then the connection is cut, as a list in flight when the
//!   server goes down (the client must see an error, never a short list).
//!
//! # What was checked against a real API server
//!
//! The restart behaviour above was measured on kube-apiserver v1.36.2 with etcd 3.4: the
//! server killed and started again, open watches ended with a transport error, connects
//! refused while it was down, then a watch from a version issued before the restart answered
//! `200` with the single `ERROR` event `{"type":"ERROR","object":{"kind":"Status",
//! "apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 272
//! (283)","reason":"Expired","code":410}}`, lists served at once, and versions continuing from
//! where they were. The fake reproduces those; its message's second number is the first
//! version of its window (the real server's restart also wrote, so its window started past the
//! last version a client had seen; the fake's restart takes one version for the same effect).
//! Also measured there: with etcd stopped under a running API server, open watches stayed
//! open and delivered the change made once etcd was back, while a list with
//! `resourceVersion` unset waited more than 20 s ([`FakeApiServer::delay_lists`] is that
//! wait); and right after its restart the API server answered a service account's watch
//! `403` `Forbidden` for a moment while its authorizer loaded the RBAC objects
//! ([`FakeApiServer::fail_next_watch`] with `403`). A broken list is modelled on what a
//! client can meet, not measured: a real server cut mid-list may stop at any byte. The rest of the protocol follows the API
//! server's documented behaviour and kube-client's expectations.
//!
//! It is a test double, not an API server: no admission, no validation beyond what apply
//! needs. An apply merges objects key by key and replaces lists, except the lists a CRD's
//! schema marks `x-kubernetes-list-type: map` once [`FakeApiServer::learn_crd`] has read it:
//! those merge by key per field manager, as the real server's do (the `apply` module says what
//! was checked against one).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::{JoinHandle, JoinSet};

mod access;
mod apply;
mod collections;
mod kinds;
mod write;

use kinds::{json_response, kind_of, not_found, plural_of, reason_of, status};

/// One request as the fake received it, for assertions.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// `GET`, `PATCH`, ...
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The query parameters.
    pub query: BTreeMap<String, String>,
    /// The `Content-Type` header, when sent.
    pub content_type: Option<String>,
    /// The body, parsed as JSON when it is JSON, else as a string; `None` when empty.
    pub body: Option<Value>,
}

impl Recorded {
    /// Whether this asks for a watch (`watch=true`), a streaming list included.
    fn watches(&self) -> bool {
        matches!(self.query.get("watch").map(String::as_str), Some("true" | "1"))
    }

    /// Whether this is a streaming list: a watch asking for every object first
    /// (`sendInitialEvents=true`), ended by a bookmark (KEP-3157).
    pub fn is_streaming_list(&self) -> bool {
        self.watches() && self.query.get("sendInitialEvents").is_some_and(|v| v == "true")
    }

    /// Whether this is a watch request that is not a streaming list: one that resumes from a
    /// version or starts now.
    pub fn is_watch(&self) -> bool {
        self.watches() && !self.is_streaming_list()
    }

    /// Whether this is a list of the collection `plural`: a GET without `watch` (paged or
    /// not), or a streaming list.
    pub fn is_list(&self, plural: &str) -> bool {
        self.method == "GET"
            && (!self.watches() || self.is_streaming_list())
            && self.path.ends_with(&format!("/{plural}"))
    }
}

/// How the fake answers a streaming list (`sendInitialEvents=true`), as kube-apiserver v1.36.2
/// was seen to answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamingLists {
    /// Every object as an `ADDED` event, then a bookmark annotated
    /// `k8s.io/initial-events-end`, then the changes (the `WatchList` gate on, over etcd 3.5).
    #[default]
    Served,
    /// `422 Invalid`, as with `--feature-gates=WatchList=false`.
    Invalid,
    /// `200`, then one `ERROR` event with a `500` Status and the end of the stream, as with the
    /// gate on over etcd 3.4 ("the required storage feature RequestWatchProgress is disabled").
    StorageUnsupported,
}

/// What open watches are told.
#[derive(Debug, Clone)]
enum Notice {
    Event {
        plural: String,
        kind: &'static str,
        object: Value,
    },
    Drop(String),
    Gone(String),
}

#[derive(Debug, Default)]
struct Inner {
    /// The last resource version handed out.
    rv: u64,
    /// Objects by plural, then `namespace/name` (`/name` for cluster-scoped ones).
    objects: BTreeMap<String, BTreeMap<String, Value>>,
    /// Every change, for watches that resume from a version.
    history: Vec<(u64, String, &'static str, Value)>,
    /// Watches from a version below this get `410 Gone`, per plural.
    compacted: BTreeMap<String, u64>,
    /// Status codes to answer the next requests of a plural with, instead of serving them.
    fail_next: BTreeMap<String, Vec<u16>>,
    /// Like `fail_next`, for watch requests only.
    fail_next_watch: BTreeMap<String, Vec<u16>>,
    /// Plurals answered `404 NotFound` on every request, as a server that does not serve
    /// their API (an older Kubernetes, a CRD not installed).
    unserved: std::collections::BTreeSet<String>,
    /// How long every list of a plural waits before it is answered.
    list_delays: BTreeMap<String, Duration>,
    /// How many of the next lists of a plural are cut mid-body.
    broken_lists: BTreeMap<String, usize>,
    /// How streaming lists are answered.
    streaming: StreamingLists,
    /// The first version of the watch window after the last restart: a watch from any
    /// version below it gets `410 Gone`, of every plural. 0 before any restart.
    window: u64,
    /// The lists merged by key on apply, by plural ([`FakeApiServer::learn_crd`]).
    list_maps: BTreeMap<String, Vec<apply::ListMap>>,
    /// What each field manager applied to each object's list-maps, by
    /// `(plural, object key, manager)`.
    owned: BTreeMap<(String, String, String), apply::Owned>,
    /// The user requests are made as (`None`: the default), by [`FakeApiServer::set_user`].
    user: Option<Value>,
    /// Status codes answering a verb on a plural, by `(verb, plural)` ([`FakeApiServer::refuse`]).
    refused: BTreeMap<(String, String), u16>,
    /// Objects created just before the next create of their plural.
    races: BTreeMap<String, Vec<Value>>,
}

#[derive(Debug)]
struct Shared {
    inner: Mutex<Inner>,
    notices: broadcast::Sender<Notice>,
    requests: Mutex<Vec<Recorded>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        match self.inner.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}

/// A running fake API server. Dropping it stops the server, and every connection to it.
#[derive(Debug)]
pub struct FakeApiServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    /// The accept loop while serving; `None` while stopped.
    serving: Mutex<Option<Serving>>,
}

/// The accept loop, and how to end it.
#[derive(Debug)]
struct Serving {
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        // The accept loop closes the port and resets every connection on its own; the test
        // that dropped the fake need not wait for it.
        if let Some(serving) = self.serving_slot().take() {
            let _ = serving.shutdown.send(());
        }
    }
}

/// Accepts connections on `listener` until `shutdown`, each served on its own task. At
/// shutdown the listener is closed (connects are refused) and every connection is reset
/// where it is, a response mid-body included, as when the API server process dies.
///
/// Reset, not closed: kube-client takes a chunked HTTP/1.1 stream that ends early as the
/// normal end of a watch (it logs `eof in poll` and resumes), while the real server's clients,
/// on HTTP/2 over TLS, saw a transport error when it was killed. A reset (`SO_LINGER` 0, set
/// only at shutdown so an ordinary close still delivers what was sent) gives that error.
async fn accept_loop(listener: tokio::net::TcpListener, app: Router, mut shutdown: oneshot::Receiver<()>) {
    let (kill, killed) = tokio::sync::watch::channel(false);
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
            // Reap finished connections, so a long test does not hold them all.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let Ok((stream, _)) = accepted else {
            // Out of file descriptors and the like: try again shortly, as hyper's own loop does.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        // A second descriptor of the socket, to reset it at shutdown once hyper owns it.
        let Ok(socket) = std::os::fd::AsFd::as_fd(&stream).try_clone_to_owned() else {
            continue;
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let mut killed = killed.clone();
        connections.spawn(async move {
            let io = hyper_util::rt::TokioIo::new(stream);
            let served = hyper::server::conn::http1::Builder::new().serve_connection(io, service);
            tokio::select! {
                _ = served => {}
                _ = killed.wait_for(|k| *k) => {
                    let _ = socket2::SockRef::from(&socket).set_linger(Some(Duration::ZERO));
                }
            }
            // Both descriptors close here; the last one to close resets the connection.
        });
    }
    drop(listener);
    let _ = kill.send(true);
    while connections.join_next().await.is_some() {}
}

/// Binds `addr`, retrying while it is in use: the port a stopped fake held may be taken a
/// moment by an outgoing connection's local end. Tokio's bind sets `SO_REUSEADDR` on Unix, so
/// the stopped fake's own closed connections (in `TIME_WAIT`) never block it.
async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match tokio::net::TcpListener::bind(addr).await {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => return other,
        }
    }
}

fn key(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{name}", namespace.unwrap_or(""))
}

fn object_key(obj: &Value) -> Option<String> {
    let name = obj.pointer("/metadata/name")?.as_str()?;
    Some(key(
        obj.pointer("/metadata/namespace").and_then(Value::as_str),
        name,
    ))
}

impl FakeApiServer {
    /// Starts a server on `127.0.0.1:0`, within the current tokio runtime.
    pub async fn start() -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (notices, _) = broadcast::channel(1024);
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner::default()),
            notices,
            requests: Mutex::new(Vec::new()),
        });
        let fake = FakeApiServer {
            addr,
            shared,
            serving: Mutex::new(None),
        };
        fake.serve_on(listener);
        Ok(fake)
    }

    fn serving_slot(&self) -> MutexGuard<'_, Option<Serving>> {
        match self.serving.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn serve_on(&self, listener: tokio::net::TcpListener) {
        let app = Router::new().fallback(handle).with_state(self.shared.clone());
        let (shutdown, stopped) = oneshot::channel();
        let task = tokio::spawn(accept_loop(listener, app, stopped));
        *self.serving_slot() = Some(Serving { shutdown, task });
    }

    /// Stops the server as a killed API server process stops: the listener is closed, so
    /// connects are refused, and every open connection is cut where it is (a watch stream
    /// mid-body included: its client sees a transport error, not a clean end). Objects and
    /// versions are kept, and [`apply`](Self::apply) and [`delete`](Self::delete) still work
    /// (a write through another API server, or while this one is down, as a test needs).
    /// Returns once nothing is served any more. Stopping a stopped server does nothing.
    pub async fn stop(&self) {
        let Some(serving) = self.serving_slot().take() else {
            return;
        };
        let _ = serving.shutdown.send(());
        let _ = serving.task.await;
    }

    /// Starts a stopped server again on the same port, with the same objects and versions, as
    /// an API server restarted with etcd intact: its watch window starts after every version
    /// issued so far, so a watch from any of them is answered with a `410` `Expired` `ERROR`
    /// event and its client re-lists (one version is taken, as the real server's own writes
    /// at startup take some). Starting a running server does nothing.
    ///
    /// Fails only when the port cannot be bound again within 5 seconds.
    pub async fn start_again(&self) -> std::io::Result<()> {
        if self.is_running() {
            return Ok(());
        }
        let listener = bind(self.addr).await?;
        {
            let mut inner = self.shared.lock();
            inner.rv += 1;
            inner.window = inner.rv;
        }
        self.serve_on(listener);
        Ok(())
    }

    /// [`stop`](Self::stop), `down_for` with connects refused, then
    /// [`start_again`](Self::start_again): an API server restart as a test usually wants it.
    /// Objects changed while it is down need [`stop`](Self::stop) and
    /// [`start_again`](Self::start_again) called apart instead.
    pub async fn restart(&self, down_for: Duration) -> std::io::Result<()> {
        self.stop().await;
        tokio::time::sleep(down_for).await;
        self.start_again().await
    }

    /// Whether the server is serving (started, and not stopped since).
    pub fn is_running(&self) -> bool {
        self.serving_slot().is_some()
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A client talking to this server, default namespace `default`.
    pub fn client(&self) -> Result<kube::Client, kube::Error> {
        let url = self
            .url()
            .parse()
            .map_err(|e: axum::http::uri::InvalidUri| kube::Error::Service(Box::new(e)))?;
        kube::Client::try_from(kube::Config::new(url))
    }

    /// A kubeconfig that points at this server, for a spawned binary (`KUBECONFIG=`).
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster: {{server: \"{}\"}}\ncontexts:\n- name: fake\n  context: {{cluster: fake, user: fake, namespace: default}}\ncurrent-context: fake\nusers:\n- name: fake\n  user: {{}}\n",
            self.url()
        )
    }

    /// Reads a CustomResourceDefinition's schemas (a k8s-openapi `CustomResourceDefinition`,
    /// or the same as JSON) so that server-side applies to its plural merge each list the
    /// schema marks `x-kubernetes-list-type: map` by its keys, as the real server does, rather
    /// than replace it. Returns the plural and how many such lists were found.
    pub fn learn_crd(&self, crd: impl serde::Serialize) -> (String, usize) {
        let Ok(crd) = serde_json::to_value(crd) else {
            return (String::new(), 0);
        };
        let (plural, maps) = apply::list_maps(&crd);
        let found = maps.len();
        self.shared.lock().list_maps.insert(plural.clone(), maps);
        (plural, found)
    }

    /// Creates or replaces an object (anything with `apiVersion`, `kind` and
    /// `metadata.name`, e.g. a serialized k8s-openapi or kube-derived type), notifying
    /// watches with `ADDED` or `MODIFIED`. Returns the stored object with its new
    /// `resourceVersion`.
    pub fn apply(&self, object: impl serde::Serialize) -> Value {
        let object = match serde_json::to_value(object) {
            Ok(v) => v,
            Err(e) => return json!({"error": e.to_string()}),
        };
        let Some(plural) = object.get("kind").and_then(Value::as_str).and_then(plural_of) else {
            return json!({"error": "unknown kind"});
        };
        let mut inner = self.shared.lock();
        store(&self.shared, &mut inner, plural, object)
    }

    /// Deletes an object, notifying watches with `DELETED`. Returns whether it existed.
    pub fn delete(&self, plural: &str, namespace: Option<&str>, name: &str) -> bool {
        let mut inner = self.shared.lock();
        let k = key(namespace, name);
        let Some(mut obj) = inner.objects.get_mut(plural).and_then(|m| m.remove(&k)) else {
            return false;
        };
        // A new object of the same name starts with nothing applied.
        inner.owned.retain(|(p, o, _), _| !(p == plural && *o == k));
        inner.rv += 1;
        let rv = inner.rv;
        set_rv(&mut obj, rv);
        notify(&self.shared, &mut inner, plural, "DELETED", obj);
        true
    }

    /// The stored object, when present.
    pub fn get(&self, plural: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        self.shared
            .lock()
            .objects
            .get(plural)
            .and_then(|m| m.get(&key(namespace, name)))
            .cloned()
    }

    /// Ends every open watch stream of `plural` cleanly, as an apiserver does at its watch
    /// timeout or when it restarts: clients resume from their last version.
    pub fn drop_watches(&self, plural: &str) {
        let _ = self.shared.notices.send(Notice::Drop(plural.to_string()));
    }

    /// Forgets the history of `plural`: open watches get an `ERROR` event carrying a
    /// `410 Gone` Status and end, and a watch from any version up to now gets the same, as an
    /// apiserver answers a version compacted out of etcd. Clients must re-list.
    pub fn expire(&self, plural: &str) {
        let mut inner = self.shared.lock();
        let rv = inner.rv;
        inner.compacted.insert(plural.to_string(), rv);
        let _ = self.shared.notices.send(Notice::Gone(plural.to_string()));
    }

    /// Answers the next request touching `plural` with an error `Status` of `code`, once per
    /// entry (e.g. `500` to break a list).
    pub fn fail_next(&self, plural: &str, code: u16) {
        self.shared
            .lock()
            .fail_next
            .entry(plural.to_string())
            .or_default()
            .push(code);
    }

    /// Answers the next watch of `plural` with an error `Status` of `code`, once per entry;
    /// lists and single-object requests are not touched (e.g. `403`, as a restarted API
    /// server answers while its authorizer loads, for a client whose other requests must go
    /// through).
    pub fn fail_next_watch(&self, plural: &str, code: u16) {
        self.shared
            .lock()
            .fail_next_watch
            .entry(plural.to_string())
            .or_default()
            .push(code);
    }

    /// Stops (`false`) or resumes (`true`) serving `plural`: while stopped, every request
    /// touching it is answered `404 NotFound`, as by a server without its API.
    pub fn serve(&self, plural: &str, served: bool) {
        let mut inner = self.shared.lock();
        if served {
            inner.unserved.remove(plural);
        } else {
            inner.unserved.insert(plural.to_string());
        }
    }

    /// Makes every list of `plural` (a GET of its collection without `watch`) wait `delay`
    /// before it is answered, as a loaded API server does; the answer is the state after the
    /// wait. `Duration::ZERO` turns it off. Watches and single-object GETs are not delayed.
    pub fn delay_lists(&self, plural: &str, delay: Duration) {
        let mut inner = self.shared.lock();
        if delay.is_zero() {
            inner.list_delays.remove(plural);
        } else {
            inner.list_delays.insert(plural.to_string(), delay);
        }
    }

    /// Cuts the next list of `plural`: it is answered `200` with part of its body, then the
    /// connection is closed without ending the body, as a list in flight when the API server
    /// goes down. A client must see an error, never a short list. Once per call.
    pub fn break_next_list(&self, plural: &str) {
        *self
            .shared
            .lock()
            .broken_lists
            .entry(plural.to_string())
            .or_default() += 1;
    }

    /// Sets how streaming lists (`sendInitialEvents=true`) are answered from now on.
    pub fn streaming_lists(&self, how: StreamingLists) {
        self.shared.lock().streaming = how;
    }

    /// The current resource version.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().rv
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        match self.shared.requests.lock() {
            Ok(r) => r.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Forgets the recorded requests.
    pub fn clear_requests(&self) {
        match self.shared.requests.lock() {
            Ok(mut r) => r.clear(),
            Err(p) => p.into_inner().clear(),
        }
    }
}

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

/// Stores `object` under `plural`, bumping the version and notifying watches.
fn store(shared: &Shared, inner: &mut Inner, plural: &str, mut object: Value) -> Value {
    let Some(k) = object_key(&object) else {
        return json!({"error": "no metadata.name"});
    };
    inner.rv += 1;
    let rv = inner.rv;
    let existed = inner.objects.get(plural).and_then(|m| m.get(&k)).cloned();
    let spec_changed = existed.as_ref().and_then(|o| o.get("spec")) != object.get("spec");
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        let old_meta = existed.as_ref().and_then(|o| o.get("metadata"));
        let uid = old_meta
            .and_then(|m| m.get("uid"))
            .cloned()
            .unwrap_or_else(|| Value::String(format!("uid-{rv}")));
        meta.insert("uid".into(), uid);
        let created = old_meta
            .and_then(|m| m.get("creationTimestamp"))
            .cloned()
            .unwrap_or_else(|| Value::String("2026-11-30T00:00:00Z".into()));
        meta.insert("creationTimestamp".into(), created);
        let generation = old_meta
            .and_then(|m| m.get("generation"))
            .and_then(Value::as_i64)
            .unwrap_or(0);
        let generation = if spec_changed { generation + 1 } else { generation };
        meta.insert("generation".into(), json!(generation.max(1)));
    }
    inner
        .objects
        .entry(plural.to_string())
        .or_default()
        .insert(k, object.clone());
    let kind = if existed.is_some() { "MODIFIED" } else { "ADDED" };
    notify(shared, inner, plural, kind, object.clone());
    object
}

fn notify(shared: &Shared, inner: &mut Inner, plural: &str, kind: &'static str, object: Value) {
    inner
        .history
        .push((inner.rv, plural.to_string(), kind, object.clone()));
    let _ = shared.notices.send(Notice::Event {
        plural: plural.to_string(),
        kind,
        object,
    });
}

/// Where a request points.
#[derive(Debug, Default)]
struct Target {
    api_version: String,
    namespace: Option<String>,
    plural: String,
    name: Option<String>,
    subresource: Option<String>,
}

fn parse_path(path: &str) -> Option<Target> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (api_version, rest) = match parts.as_slice() {
        ["api", v, rest @ ..] => ((*v).to_string(), rest),
        ["apis", g, v, rest @ ..] => (format!("{g}/{v}"), rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some((*ns).to_string()), rest),
        _ => (None, rest),
    };
    let (plural, name, subresource) = match rest {
        [p] => (*p, None, None),
        [p, n] => (*p, Some((*n).to_string()), None),
        [p, n, s] => (*p, Some((*n).to_string()), Some((*s).to_string())),
        _ => return None,
    };
    Some(Target {
        api_version,
        namespace,
        plural: plural.to_string(),
        name,
        subresource,
    })
}

/// The faults asked for the next list of `plural`: its delay, and whether it is cut (the cut
/// counted off).
fn list_faults(shared: &Shared, plural: &str) -> (Option<Duration>, bool) {
    let mut inner = shared.lock();
    let delay = inner.list_delays.get(plural).copied();
    let broken = match inner.broken_lists.get_mut(plural) {
        Some(n) if *n > 0 => {
            *n -= 1;
            true
        }
        _ => false,
    };
    (delay, broken)
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    Query(query): Query<BTreeMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let recorded = record(&shared, &method, &uri, query, &headers, &body);
    let Some(target) = parse_path(uri.path()) else {
        return not_found();
    };
    if let Some(refused) = injected(&shared, &target, &recorded) {
        return refused;
    }
    match (method, &target.name) {
        (Method::POST, None) if target.plural == "selfsubjectreviews" => access::self_subject_review(&shared),
        (Method::GET, None) if recorded.is_watch() => collections::watch(&shared, &target, &recorded.query),
        (Method::GET, None) if recorded.is_streaming_list() => {
            streaming_list(&shared, &target, &recorded).await
        }
        (Method::GET, None) => list(&shared, &target, &recorded).await,
        (Method::GET, Some(name)) => get(&shared, &target, name),
        (Method::PATCH, Some(name))
            if recorded.content_type.as_deref() == Some("application/json-patch+json") =>
        {
            write::json_patch(&shared, &target, name, &recorded)
        }
        (Method::PATCH, Some(name)) => apply::patch(&shared, &target, name, &recorded),
        (Method::POST, None) => write::create(&shared, &target, &recorded),
        (Method::PUT, Some(name)) => write::replace(&shared, &target, name, &recorded),
        (Method::DELETE, Some(name)) => write::delete(&shared, &target, name, &recorded),
        _ => status(405, "MethodNotAllowed", "not supported by the fake"),
    }
}

/// The request as the fake records it (its body read as JSON where it is), recorded.
fn record(
    shared: &Shared,
    method: &Method,
    uri: &Uri,
    query: BTreeMap<String, String>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Recorded {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let parsed_body = if body.is_empty() {
        None
    } else {
        Some(
            serde_json::from_slice(body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned())),
        )
    };
    let recorded = Recorded {
        method: method.to_string(),
        path: uri.path().to_string(),
        query,
        content_type,
        body: parsed_body,
    };
    match shared.requests.lock() {
        Ok(mut r) => r.push(recorded.clone()),
        Err(p) => p.into_inner().push(recorded.clone()),
    }
    recorded
}

/// The answer a test set up for this request instead of the real one: `404` for a kind the
/// server does not serve, a verb refused, or the next injected failure (a watch's own first).
fn injected(shared: &Shared, target: &Target, recorded: &Recorded) -> Option<Response> {
    let mut inner = shared.lock();
    if inner.unserved.contains(&target.plural) {
        return Some(not_found());
    }
    if let Some(refused) = access::refused(&inner, target, recorded) {
        return Some(refused);
    }
    let watch_failure = if recorded.is_watch() {
        inner
            .fail_next_watch
            .get_mut(&target.plural)
            .and_then(|v| (!v.is_empty()).then(|| v.remove(0)))
    } else {
        None
    };
    let code = watch_failure.or_else(|| {
        inner
            .fail_next
            .get_mut(&target.plural)
            .and_then(|v| (!v.is_empty()).then(|| v.remove(0)))
    })?;
    Some(status(code, reason_of(code), "injected failure"))
}

/// A streaming list (`sendInitialEvents`), or the refusal the fake was set to give, after any
/// delay asked for.
async fn streaming_list(shared: &Arc<Shared>, target: &Target, recorded: &Recorded) -> Response {
    let refusal = shared.lock().streaming;
    match refusal {
        StreamingLists::Invalid => return collections::streaming_invalid(),
        StreamingLists::StorageUnsupported => return collections::streaming_unsupported(),
        StreamingLists::Served => {}
    }
    let (delay, broken) = list_faults(shared, &target.plural);
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    collections::streaming_list(shared, target, &recorded.query, broken)
}

/// A plain (possibly paged) list, after any delay asked for, and cut when asked.
async fn list(shared: &Shared, target: &Target, recorded: &Recorded) -> Response {
    let (delay, broken) = list_faults(shared, &target.plural);
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    let answer = collections::list(shared, target, &recorded.query);
    if broken {
        collections::cut(answer).await
    } else {
        answer
    }
}

/// One object by name.
fn get(shared: &Shared, target: &Target, name: &str) -> Response {
    let found = shared
        .lock()
        .objects
        .get(&target.plural)
        .and_then(|m| m.get(&key(target.namespace.as_deref(), name)))
        .cloned();
    match found {
        Some(obj) => json_response(StatusCode::OK, &obj),
        None => status(
            404,
            "NotFound",
            &format!("{} \"{name}\" not found", target.plural),
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse() {
        let t = parse_path("/apis/miggate.io/v1alpha1/gpunodes/n1/status").unwrap();
        assert_eq!(
            (
                t.api_version.as_str(),
                t.plural.as_str(),
                t.name.as_deref(),
                t.subresource.as_deref()
            ),
            ("miggate.io/v1alpha1", "gpunodes", Some("n1"), Some("status"))
        );
        let t = parse_path("/api/v1/namespaces/ml/pods").unwrap();
        assert_eq!((t.namespace.as_deref(), t.plural.as_str()), (Some("ml"), "pods"));
        assert!(parse_path("/healthz").is_none());
    }
}

//! The fake's faults against a real `kube::Client` and kube-runtime's `watcher`: an API server
//! restart (watches cut with a transport error, connects refused while down, versions from
//! before it answered `410 Expired`, a watcher re-listing across it), a list cut mid-body, a
//! slow list, and a dropped fake stopping everything.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube_fake::FakeApiServer;
use serde_json::json;

fn node(name: &str, pool: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"pool": pool}}})
}

/// Whether a plain TCP connect to `addr` is refused.
async fn refused(addr: std::net::SocketAddr) -> bool {
    matches!(
        tokio::net::TcpStream::connect(addr).await,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

/// One HTTP/1.1 GET on a fresh connection: every byte read until the server ends it.
async fn raw_get(addr: std::net::SocketAddr, path: &str) -> Vec<u8> {
    use std::io::{Read, Write};
    let request = format!("GET {path} HTTP/1.1\r\nHost: fake\r\nConnection: close\r\n\r\n");
    tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        let mut raw = Vec::new();
        let _ = stream.read_to_end(&mut raw);
        raw
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn a_restart_cuts_watches_refuses_connects_and_expires_every_older_version() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.apply(node("a", "gpu"));
    let url = fake.url();
    let api: Api<Node> = Api::all(fake.client().unwrap());
    let listed = api.list(&ListParams::default()).await.unwrap();
    let before = listed.metadata.resource_version.unwrap();
    let mut open = api
        .watch(&WatchParams::default().disable_bookmarks(), &before)
        .await
        .unwrap()
        .boxed();

    fake.stop().await;
    assert!(!fake.is_running());
    // The open watch is cut: an error, not a clean end of the stream.
    let cut = tokio::time::timeout(Duration::from_secs(10), open.try_next())
        .await
        .expect("the open watch noticed the stop");
    assert!(cut.is_err(), "a clean end instead of a transport error: {cut:?}");
    assert!(refused(fake.addr()).await, "connects are refused while stopped");
    let err = api.list(&ListParams::default()).await.unwrap_err();
    assert!(!matches!(err, kube::Error::Api(_)), "not an answer: {err:?}");

    // Written while the server is down (etcd is intact); versions keep increasing.
    fake.apply(node("a", "cpu"));
    fake.apply(node("b", "gpu"));
    let last_before_restart = fake.resource_version();
    fake.stop().await; // stopping a stopped server does nothing

    fake.start_again().await.unwrap();
    fake.start_again().await.unwrap(); // nor starting a started one
    assert!(fake.is_running());
    assert_eq!(fake.url(), url, "the same port");
    let listed = api.list(&ListParams::default()).await.unwrap();
    let after: u64 = listed.metadata.resource_version.unwrap().parse().unwrap();
    assert!(after > last_before_restart, "{after} > {last_before_restart}");
    let pools: BTreeMap<_, _> = listed
        .items
        .iter()
        .map(|n| {
            let labels = n.metadata.labels.clone().unwrap_or_default();
            (n.metadata.name.clone().unwrap(), labels["pool"].clone())
        })
        .collect();
    assert_eq!(
        pools,
        BTreeMap::from([("a".into(), "cpu".into()), ("b".into(), "gpu".into())])
    );

    // Every version issued before the restart is gone: one ERROR event, then the end.
    for old in [before.clone(), last_before_restart.to_string()] {
        let mut stream = api
            .watch(&WatchParams::default().disable_bookmarks(), &old)
            .await
            .unwrap()
            .boxed();
        match stream.try_next().await.unwrap() {
            Some(WatchEvent::Error(status)) => {
                assert_eq!(status.code, 410);
                assert_eq!(status.reason, "Expired");
                assert!(status.is_failure());
                assert_eq!(
                    status.message,
                    format!("too old resource version: {old} ({after})")
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(stream.next().await.is_none(), "the expired watch ends");
    }
    // From the version the list gave, it is served.
    let mut fresh = api
        .watch(&WatchParams::default().disable_bookmarks(), &after.to_string())
        .await
        .unwrap()
        .boxed();
    fake.delete("nodes", None, "b");
    assert!(matches!(
        fresh.try_next().await.unwrap(),
        Some(WatchEvent::Deleted(_))
    ));
}

/// kube-runtime's watcher across a restart: its watch is cut, it retries while connects are
/// refused, its resumed watch is answered `410`, and it re-lists (a new `Init`) to find what
/// changed while the server was down.
#[tokio::test]
async fn a_watcher_relists_across_a_restart_and_sees_what_changed_meanwhile() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.apply(node("a", "gpu"));
    fake.apply(node("b", "gpu"));
    let api: Api<Node> = Api::all(fake.client().unwrap());
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .expect("the watcher moved on")
            .expect("the watcher never ends")
    };
    let mut inits = 0;
    let mut seen = BTreeMap::new();
    loop {
        match next().await {
            Ok(Event::Init) => inits += 1,
            Ok(Event::InitApply(n)) => {
                seen.insert(n.metadata.name.clone().unwrap(), n);
            }
            Ok(Event::InitDone) => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((inits, seen.len()), (1, 2));
    let old_version = fake.resource_version();

    fake.stop().await;
    fake.apply(node("a", "cpu"));
    assert!(fake.delete("nodes", None, "b"));
    fake.apply(node("c", "gpu"));
    let restarted = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        fake.start_again().await.unwrap();
    };
    let relisted = async {
        let mut errors = 0;
        let mut listed = BTreeMap::new();
        loop {
            match next().await {
                Err(_) => errors += 1,
                Ok(Event::Init) => listed.clear(),
                Ok(Event::InitApply(n)) => {
                    let pool = n.metadata.labels.clone().unwrap_or_default()["pool"].clone();
                    listed.insert(n.metadata.name.clone().unwrap(), pool);
                }
                Ok(Event::InitDone) => return (errors, listed),
                Ok(other) => panic!("a change before the re-list: {other:?}"),
            }
        }
    };
    let ((), (errors, listed)) = tokio::join!(restarted, relisted);
    assert!(errors >= 1, "the cut watch surfaced as an error");
    assert_eq!(
        listed,
        BTreeMap::from([("a".into(), "cpu".into()), ("c".into(), "gpu".into())])
    );
    // It tried to resume from its old version first, and was told to re-list.
    let resumed = fake
        .requests()
        .into_iter()
        .any(|r| r.is_watch() && r.query.get("resourceVersion") == Some(&old_version.to_string()));
    assert!(resumed, "{:#?}", fake.requests());
}

#[tokio::test]
async fn restart_is_stop_then_start_again() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.apply(node("a", "gpu"));
    let rv = fake.resource_version();
    let api: Api<Node> = Api::all(fake.client().unwrap());
    let down = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        refused(fake.addr()).await
    };
    let (restarted, was_refused) = tokio::join!(fake.restart(Duration::from_secs(1)), down);
    restarted.unwrap();
    assert!(was_refused, "connects are refused while down");
    assert_eq!(api.list(&ListParams::default()).await.unwrap().items.len(), 1);
    assert_eq!(fake.resource_version(), rv + 1, "the restart takes one version");
}

/// A list cut mid-body is an error to the client, never a short list; the next list is whole,
/// so a watcher's retry gets everything.
#[tokio::test]
async fn a_broken_list_is_an_error_and_the_retry_succeeds() {
    let fake = FakeApiServer::start().await.unwrap();
    for i in 0..20 {
        fake.apply(node(&format!("n{i}"), "gpu"));
    }
    let api: Api<Node> = Api::all(fake.client().unwrap());
    fake.break_next_list("nodes");
    let err = api.list(&ListParams::default()).await.unwrap_err();
    assert!(!matches!(err, kube::Error::Api(_)), "not an answer: {err:?}");
    assert_eq!(api.list(&ListParams::default()).await.unwrap().items.len(), 20);
    // On the wire: the status and part of the body, then the connection ends without the
    // chunked body's last chunk.
    fake.break_next_list("nodes");
    let raw = raw_get(fake.addr(), "/api/v1/nodes").await;
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains(r#""kind":"NodeList""#), "{text}");
    // Items are listed by name: n9 is the last one, and never sent.
    assert!(text.contains(r#""name":"n0""#), "{text}");
    assert!(!text.contains(r#""name":"n9""#), "the body was cut: {text}");
    assert!(!text.ends_with("0\r\n\r\n"), "{text}");
    // Other plurals, watches and single-object GETs are not cut.
    fake.break_next_list("nodes");
    assert!(api.get_opt("n0").await.unwrap().is_some());
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::all(fake.client().unwrap());
    assert!(pods.list(&ListParams::default()).await.is_ok());

    // The pending cut meets the watcher's first list: `Init`, then the list's error.
    let mut events = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(20), events.next())
            .await
            .unwrap()
            .unwrap()
    };
    assert!(matches!(next().await, Ok(Event::Init)));
    let failed = next().await;
    assert!(
        matches!(failed, Err(watcher::Error::InitialListFailed(_))),
        "{failed:?}"
    );
    let mut listed = 0;
    loop {
        match next().await.unwrap() {
            Event::Init => listed = 0,
            Event::InitApply(_) => listed += 1,
            Event::InitDone => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(listed, 20);
}

#[tokio::test]
async fn a_delayed_list_is_answered_after_the_delay_with_the_state_then() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.apply(node("a", "gpu"));
    let api: Api<Node> = Api::all(fake.client().unwrap());
    fake.delay_lists("nodes", Duration::from_millis(800));
    let started = Instant::now();
    let list = async { api.list(&ListParams::default()).await.unwrap() };
    let meanwhile = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        fake.apply(node("b", "gpu"));
    };
    let (list, ()) = tokio::join!(list, meanwhile);
    assert!(started.elapsed() >= Duration::from_millis(800));
    assert_eq!(list.items.len(), 2, "answered with the state after the wait");
    assert_eq!(fake.requests().iter().filter(|r| r.is_list("nodes")).count(), 1);
    fake.delay_lists("nodes", Duration::ZERO);
    assert_eq!(api.list(&ListParams::default()).await.unwrap().items.len(), 2);
}

/// Dropping the fake ends its open watches and closes its port, as stopping it does.
#[tokio::test]
async fn dropping_the_fake_stops_everything() {
    let fake = FakeApiServer::start().await.unwrap();
    let addr = fake.addr();
    let api: Api<Node> = Api::all(fake.client().unwrap());
    let mut open = api
        .watch(&WatchParams::default().disable_bookmarks(), "0")
        .await
        .unwrap()
        .boxed();
    drop(fake);
    let end = tokio::time::timeout(Duration::from_secs(10), open.try_next())
        .await
        .expect("the open watch noticed the drop");
    assert!(end.is_err(), "{end:?}");
    assert!(refused(addr).await);
}

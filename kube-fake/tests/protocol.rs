//! The fake speaks the protocol kube's client reads: lists carry a resourceVersion, watches
//! replay changes after a version then stream live ones, bookmarks when asked, `410 Gone` as
//! an ERROR event for a compacted version, and server-side apply needs a field manager.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use kube_fake::FakeApiServer;
use serde_json::json;

fn node(name: &str, label: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"pool": label}}})
}

#[tokio::test]
async fn list_watch_bookmarks_and_gone() {
    let fake = FakeApiServer::start().await.unwrap();
    fake.apply(node("a", "gpu"));
    fake.apply(node("b", "cpu"));
    let api: Api<Node> = Api::all(fake.client().unwrap());

    let list = api.list(&ListParams::default().labels("pool=gpu")).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let rv = list.metadata.resource_version.clone().unwrap();
    assert_eq!(rv, "2");

    // A change after the list, then a watch from the list's version: the change is replayed,
    // a bookmark follows, then live events.
    fake.apply(node("a", "gpu"));
    let mut events = api.watch(&WatchParams::default(), &rv).await.unwrap().boxed();
    match events.try_next().await.unwrap().unwrap() {
        WatchEvent::Modified(n) => assert_eq!(n.metadata.resource_version.as_deref(), Some("3")),
        other => panic!("{other:?}"),
    }
    match events.try_next().await.unwrap().unwrap() {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, "3"),
        other => panic!("{other:?}"),
    }
    fake.delete("nodes", None, "a");
    assert!(matches!(
        events.try_next().await.unwrap().unwrap(),
        WatchEvent::Deleted(_)
    ));
    fake.drop_watches("nodes");
    assert!(
        events.try_next().await.unwrap().is_none(),
        "a dropped watch ends cleanly"
    );

    // Compacted: a watch from an old version gets ERROR 410 and ends.
    fake.expire("nodes");
    let mut old = api
        .watch(&WatchParams::default().disable_bookmarks(), &rv)
        .await
        .unwrap()
        .boxed();
    match old.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(status) => assert_eq!(status.code, 410),
        other => panic!("{other:?}"),
    }
    assert!(old.next().await.is_none());
    // From the current version it is served.
    let now = fake.resource_version().to_string();
    let mut fresh = api
        .watch(&WatchParams::default().disable_bookmarks(), &now)
        .await
        .unwrap()
        .boxed();
    fake.apply(node("c", "gpu"));
    assert!(matches!(
        fresh.try_next().await.unwrap().unwrap(),
        WatchEvent::Added(_)
    ));
}

#[tokio::test]
async fn server_side_apply_needs_a_field_manager_and_a_whole_object() {
    let fake = FakeApiServer::start().await.unwrap();
    let api: Api<Node> = Api::all(fake.client().unwrap());
    let body = node("a", "gpu");
    let applied = api
        .patch("a", &PatchParams::apply("t").force(), &Patch::Apply(&body))
        .await
        .unwrap();
    assert_eq!(applied.metadata.resource_version.as_deref(), Some("1"));
    let err = api
        .patch("a", &PatchParams::default(), &Patch::Apply(&body))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("fieldManager"), "{err}");
    let nameless = json!({"apiVersion": "v1", "kind": "Node", "metadata": {}});
    let err = api
        .patch("a", &PatchParams::apply("t"), &Patch::Apply(&nameless))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("metadata.name"), "{err}");
    let recorded = fake.requests();
    assert_eq!(recorded.len(), 3);
    assert_eq!(
        recorded[0].content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
}

#[tokio::test]
async fn lists_are_paged_with_continue_tokens() {
    let fake = FakeApiServer::start().await.unwrap();
    for i in 0..5 {
        fake.apply(node(&format!("n{i}"), if i % 2 == 0 { "gpu" } else { "cpu" }));
    }
    let api: Api<Node> = Api::all(fake.client().unwrap());
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let token = first.metadata.continue_.clone().unwrap();
    let second = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    let third = api
        .list(
            &ListParams::default()
                .limit(2)
                .continue_token(second.metadata.continue_.as_deref().unwrap()),
        )
        .await
        .unwrap();
    let names: Vec<_> = [first, second, third.clone()]
        .iter()
        .flat_map(|l| l.items.iter().map(|n| n.metadata.name.clone().unwrap()))
        .collect();
    assert_eq!(names, ["n0", "n1", "n2", "n3", "n4"]);
    assert!(third.metadata.continue_.is_none());
    let gpus = api
        .list(&ListParams::default().labels("pool=gpu").limit(2))
        .await
        .unwrap();
    assert_eq!(gpus.items.len(), 2);
    assert!(gpus.metadata.continue_.is_some());
}

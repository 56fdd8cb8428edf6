//! Collections: lists (paged, selected, delayed or cut as a fault asks) and watches (from a
//! version, with bookmarks, `410 Expired` below the window).

use super::*;

/// Whether `obj` matches the request's namespace and selectors.
pub(crate) fn selected(obj: &Value, target: &Target, query: &BTreeMap<String, String>) -> bool {
    if let Some(ns) = &target.namespace
        && obj.pointer("/metadata/namespace").and_then(Value::as_str) != Some(ns.as_str())
    {
        return false;
    }
    if let Some(sel) = query.get("labelSelector").filter(|s| !s.is_empty()) {
        let labels = obj.pointer("/metadata/labels");
        let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        for term in sel.split(',').map(str::trim) {
            let ok = if let Some((k, v)) = term.split_once("!=") {
                label(k.trim()) != Some(v.trim())
            } else if let Some((k, v)) = term.split_once('=') {
                label(k.trim()) == Some(v.trim_start_matches('=').trim())
            } else if let Some(k) = term.strip_prefix('!') {
                label(k).is_none()
            } else {
                label(term).is_some()
            };
            if !ok {
                return false;
            }
        }
    }
    if let Some(sel) = query.get("fieldSelector").filter(|s| !s.is_empty()) {
        for term in sel.split(',').map(str::trim) {
            let (path, want, negate) = match term.split_once("!=") {
                Some((p, v)) => (p, v, true),
                None => match term.split_once('=') {
                    Some((p, v)) => (p, v.trim_start_matches('='), false),
                    None => return false,
                },
            };
            let pointer = format!("/{}", path.trim().replace('.', "/"));
            let have = obj.pointer(&pointer).and_then(Value::as_str).unwrap_or("");
            if (have == want.trim()) == negate {
                return false;
            }
        }
    }
    true
}

/// A list, paged as the apiserver pages it: at most `limit` items, and a `continue` token
/// (here the key of the last item served) when more remain.
pub(crate) fn list(shared: &Shared, target: &Target, query: &BTreeMap<String, String>) -> Response {
    let inner = shared.lock();
    let limit = query
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let start = match query.get("continue").filter(|c| !c.is_empty()) {
        Some(after) => Bound::Excluded(after.clone()),
        None => Bound::Unbounded,
    };
    let mut items = Vec::new();
    let mut last = None;
    let mut more = false;
    if let Some(objects) = inner.objects.get(&target.plural) {
        for (k, o) in objects.range((start, Bound::Unbounded)) {
            if !selected(o, target, query) {
                continue;
            }
            if items.len() == limit {
                more = true;
                break;
            }
            items.push(o.clone());
            last = Some(k.clone());
        }
    }
    let mut metadata = json!({"resourceVersion": inner.rv.to_string()});
    if let (true, Some(token)) = (more, last) {
        metadata["continue"] = Value::String(token);
    }
    let body = json!({
        "apiVersion": target.api_version,
        "kind": format!("{}List", kind_of(&target.plural)),
        "metadata": metadata,
        "items": items,
    });
    json_response(StatusCode::OK, &body)
}
/// The same answer with its body cut in half, then failed: hyper closes the connection
/// without the chunked body's end, so the client's read fails. The failure comes a moment
/// after the half, once hyper has flushed it (it flushes when the body has nothing ready), so
/// the client does receive the status and part of the body.
pub(crate) async fn cut(answer: Response) -> Response {
    let (mut parts, body) = answer.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap_or_default();
    let half = bytes.slice(..bytes.len() / 2);
    parts.headers.remove(header::CONTENT_LENGTH);
    let failure = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "list cut by kube-fake",
        ))
    };
    let chunks =
        futures::stream::once(async { Ok::<_, std::io::Error>(half) }).chain(futures::stream::once(failure));
    Response::from_parts(parts, Body::from_stream(chunks))
}

pub(crate) fn line(value: &Value) -> Bytes {
    let mut text = value.to_string();
    text.push('\n');
    Bytes::from(text)
}

/// The `ERROR` event an API server sends a watch from `from` when its window starts at
/// `oldest`, worded as kube-apiserver v1.36.2 words it.
pub(crate) fn gone(from: u64, oldest: u64) -> Value {
    json!({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("too old resource version: {from} ({oldest})"), "reason": "Expired", "code": 410,
    }})
}

pub(crate) fn watch(shared: &Arc<Shared>, target: &Target, query: &BTreeMap<String, String>) -> Response {
    let from: u64 = query
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let bookmarks = query.get("allowWatchBookmarks").is_some_and(|v| v == "true");
    let inner = shared.lock();
    // Subscribed under the lock: no change can fall between the backlog and the live feed.
    let notices = shared.notices.subscribe();
    let compacted = inner.compacted.get(&target.plural).copied().unwrap_or(0);
    // The oldest version this watch may start from: after an `expire` of the plural, or after
    // a restart of the server, whichever is later.
    let oldest = compacted.max(inner.window);
    let expired = from != 0 && from < oldest;
    let mut backlog = Vec::new();
    if expired {
        backlog.push(gone(from, oldest));
    } else {
        for (rv, plural, kind, obj) in &inner.history {
            if *rv > from && *plural == target.plural && selected(obj, target, query) {
                backlog.push(json!({"type": kind, "object": obj}));
            }
        }
        if bookmarks {
            backlog.push(bookmark(target, inner.rv, false));
        }
    }
    drop(inner);
    let feed = Feed {
        backlog,
        live: !expired,
        cut: false,
        from,
    };
    stream(shared, target, query, notices, feed)
}

/// A streaming list: every object now selected as an `ADDED` event, then a bookmark
/// annotated `k8s.io/initial-events-end` at the current version, then the changes, as a
/// watch from that version. `cut`: half the objects (at least one, when there are any), then
/// the connection fails, as a list cut mid-body.
pub(crate) fn streaming_list(
    shared: &Arc<Shared>,
    target: &Target,
    query: &BTreeMap<String, String>,
    cut: bool,
) -> Response {
    let inner = shared.lock();
    let notices = shared.notices.subscribe();
    let mut backlog: Vec<Value> = inner
        .objects
        .get(&target.plural)
        .into_iter()
        .flat_map(|objects| objects.values())
        .filter(|o| selected(o, target, query))
        .map(|o| json!({"type": "ADDED", "object": o}))
        .collect();
    if cut {
        backlog.truncate(backlog.len().div_ceil(2));
    } else {
        backlog.push(bookmark(target, inner.rv, true));
    }
    let from = inner.rv;
    drop(inner);
    let feed = Feed {
        backlog,
        live: !cut,
        cut,
        from,
    };
    stream(shared, target, query, notices, feed)
}

/// A streaming list refused as with `--feature-gates=WatchList=false` (kube-apiserver v1.36.2).
pub(crate) fn streaming_invalid() -> Response {
    status(
        422,
        "Invalid",
        "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
    )
}

/// A streaming list refused as kube-apiserver v1.36.2 refuses it over etcd 3.4: `200`, one
/// `ERROR` event, the end.
pub(crate) fn streaming_unsupported() -> Response {
    let event = json!({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "a watch stream was requested by the client but the required storage feature RequestWatchProgress is disabled",
        "reason": "InternalError", "code": 500}});
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(line(&event)),
    )
        .into_response()
}

fn bookmark(target: &Target, rv: u64, initial_end: bool) -> Value {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"type": "BOOKMARK", "object": {
        "kind": kind_of(&target.plural), "apiVersion": target.api_version, "metadata": metadata,
    }})
}

/// What a watch stream sends: its backlog, then (when `live`) the changes after `from`, or,
/// when `cut`, an error after the backlog.
struct Feed {
    backlog: Vec<Value>,
    live: bool,
    cut: bool,
    from: u64,
}

fn stream(
    shared: &Arc<Shared>,
    target: &Target,
    query: &BTreeMap<String, String>,
    mut notices: broadcast::Receiver<Notice>,
    feed: Feed,
) -> Response {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(256);
    let target = Target {
        api_version: target.api_version.clone(),
        namespace: target.namespace.clone(),
        plural: target.plural.clone(),
        name: None,
        subresource: None,
    };
    let query = query.clone();
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        for event in &feed.backlog {
            if tx.send(Ok(line(event))).await.is_err() {
                return;
            }
        }
        if feed.cut {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = tx
                .send(Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "list cut by kube-fake",
                )))
                .await;
            return;
        }
        if !feed.live {
            return;
        }
        loop {
            let notice = tokio::select! {
                n = notices.recv() => n,
                () = tx.closed() => return,
            };
            match notice {
                Ok(Notice::Event { plural, kind, object }) => {
                    if plural == target.plural && selected(&object, &target, &query) {
                        let event = json!({"type": kind, "object": object});
                        if tx.send(Ok(line(&event))).await.is_err() {
                            return;
                        }
                    }
                }
                Ok(Notice::Drop(plural)) if plural == target.plural => return,
                Ok(Notice::Gone(plural)) if plural == target.plural => {
                    let oldest = shared.lock().compacted.get(&plural).copied().unwrap_or(0);
                    let _ = tx.send(Ok(line(&gone(feed.from, oldest)))).await;
                    return;
                }
                Ok(_) => {}
                // A watcher too slow for the feed: end it, as an apiserver does.
                Err(_) => return,
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(stream),
    )
        .into_response()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn selectors() {
        let obj =
            json!({"metadata": {"name": "a", "labels": {"app": "x"}}, "spec": {"driver": "gpu.nvidia.com"}});
        let t = Target::default();
        let q = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
        assert!(selected(&obj, &t, &q("labelSelector", "app=x")));
        assert!(!selected(&obj, &t, &q("labelSelector", "app=y")));
        assert!(selected(&obj, &t, &q("labelSelector", "app,!other")));
        assert!(selected(
            &obj,
            &t,
            &q("fieldSelector", "spec.driver=gpu.nvidia.com")
        ));
        assert!(!selected(
            &obj,
            &t,
            &q("fieldSelector", "spec.driver!=gpu.nvidia.com")
        ));
    }
}

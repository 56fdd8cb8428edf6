//! Hostile clients against the real `miggate webhook` binary, on loopback only: bodies that
//! never end, thousands of them at once, and connections beyond the cap. Every loop is bounded
//! in count and time. Times are asserted only as "closed within the deadline plus a generous
//! slack", never as speeds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

mod support;

use support::{SLACK, Webhook, plain, testdata};

/// Reads until the server closes, at most `within`: the text and how long it took, or `None`
/// when the connection was still open then.
async fn until_closed(tls: &mut TlsStream<TcpStream>, within: Duration) -> Option<(String, Duration)> {
    let started = Instant::now();
    let mut out = Vec::new();
    match tokio::time::timeout(within, tls.read_to_end(&mut out)).await {
        // A reset after the answer is as closed as a FIN.
        Ok(_) => Some((String::from_utf8_lossy(&out).into_owned(), started.elapsed())),
        Err(_) => None,
    }
}

/// Raises this process's open-file limit (the child inherits it) towards `want`; returns what
/// it is now.
fn raise_nofile(want: u64) -> u64 {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let hard = limit.maximum.unwrap_or(u64::MAX);
    let soft = limit.current.unwrap_or(u64::MAX);
    if soft >= want {
        return soft;
    }
    let target = want.min(hard);
    let raised = setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(target),
            maximum: limit.maximum,
        },
    );
    if raised.is_ok() { target } else { soft }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_ends_is_answered_408_and_closed() {
    // Defaults: 4 s deadline, 16 KiB/s minimum rate after the first second.
    let webhook = Webhook::start(&[]).await;
    // Timed from before the head is sent, so the server's clock cannot start earlier.
    let before_head = Instant::now();
    let mut stalled = webhook.partial(1_000_000, b"{").await.unwrap();
    let (text, _) = until_closed(&mut stalled, Duration::from_secs(4) + SLACK)
        .await
        .unwrap_or_else(|| panic!("a stalled body held its connection open; {}", webhook.log()));
    assert!(text.starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{text}");
    assert!(text.contains("connection: close\r\n"), "{text}");
    assert!(
        text.contains("\r\n\r\nAdmissionReview body arriving slower than 16384 bytes/s (1 bytes in "),
        "{text}"
    );
    let took = before_head.elapsed();
    assert!(took >= Duration::from_secs(1), "cut before the grace: {took:?}");

    // Without a rate, a body that keeps trickling is cut by the deadline itself.
    let webhook = Webhook::start(&["--min-body-rate=0", "--request-deadline=2"]).await;
    let started = Instant::now();
    let mut trickle = webhook.partial(1_000_000, b"{").await.unwrap();
    let mut answer = Vec::new();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(2) + SLACK,
            "a trickling body held its connection open; {}",
            webhook.log()
        );
        tokio::select! {
            read = trickle.read_buf(&mut answer) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
            () = tokio::time::sleep(Duration::from_millis(100)) => {
                // One byte every 100 ms: progress, but never the end.
                let _ = trickle.write_all(b" ").await;
                let _ = trickle.flush().await;
            }
        }
    }
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 408 Request Timeout\r\n"), "{text}");
    assert!(
        text.contains("not complete within the 2000 ms request deadline"),
        "{text}"
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(2) + SLACK,
        "{took:?}"
    );
    assert_eq!(
        webhook
            .metric("miggate_admission_decisions_total{outcome=\"body-timeout\"}")
            .await,
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_endless_bodies_leave_reviews_answered_and_memory_bounded() {
    const WANT: usize = 2_000;
    let nofile = raise_nofile(3 * WANT as u64 + 256);
    // Both ends of each connection live on this machine: size below the limit if it is low.
    let n = WANT.min(usize::try_from(nofile.saturating_sub(256) / 2).unwrap_or(WANT));
    assert!(n >= 500, "the open-file limit {nofile} is too low for this test");
    // A long deadline and no rate, so that all of them are held at once: the worst case a
    // client meeting the minimum rate could also reach.
    let webhook = Webhook::start(&[
        "--min-body-rate=0",
        "--request-deadline=29",
        "--max-connections=4096",
        // Every connection here comes from 127.0.0.1: this test is of the total, not the
        // per-source cap (webhook/tests/connections.rs).
        "--max-connections-per-source=4096",
    ])
    .await;
    let deadline = Duration::from_secs(29);
    let (status, body) = webhook.review().await;
    assert_eq!(status, 200, "{body}");
    let rss_before = webhook.rss_kib();

    let webhook = Arc::new(webhook);
    let (opened_tx, mut opened_rx) = tokio::sync::mpsc::channel::<bool>(n);
    let handshakes = Arc::new(tokio::sync::Semaphore::new(16));
    let mut attackers = tokio::task::JoinSet::new();
    for _ in 0..n {
        let (webhook, opened_tx, handshakes) = (webhook.clone(), opened_tx.clone(), handshakes.clone());
        attackers.spawn(async move {
            let permit = handshakes.acquire_owned().await.unwrap();
            let stream = webhook.partial(1_000_000, b"{").await;
            drop(permit);
            let _ = opened_tx.send(stream.is_ok()).await;
            drop(opened_tx);
            let mut stream = stream.ok()?;
            until_closed(&mut stream, deadline + SLACK).await
        });
    }
    drop(opened_tx);
    let opening = Instant::now();
    let mut opened = 0;
    for _ in 0..n {
        opened += usize::from(opened_rx.recv().await.unwrap());
    }
    let time_to_open = opening.elapsed();
    assert_eq!(opened, n, "every connection under the cap is served");
    let open_now = webhook.metric("miggate_connections_open").await;
    let rss_held = webhook.rss_kib();

    // A real review is still answered while they are all held.
    let asked = Instant::now();
    let (status, body) = webhook.review().await;
    let answered_in = asked.elapsed();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"allowed\":true"), "{body}");

    // Bounded: the Deployment's limit is 256 MiB.
    assert!(
        rss_held < 160 * 1024,
        "{n} held bodies took the webhook from {rss_before} KiB to {rss_held} KiB"
    );

    let mut answered_408 = 0;
    let mut longest = Duration::ZERO;
    while let Some(done) = attackers.join_next().await {
        let (text, took) = done
            .unwrap()
            .unwrap_or_else(|| panic!("a held body outlived deadline and slack; {}", webhook.log()));
        answered_408 += usize::from(text.starts_with("HTTP/1.1 408 "));
        longest = longest.max(took);
    }
    assert_eq!(answered_408, n, "every one answered 408 at the deadline");
    let rss_after = webhook.rss_kib();
    eprintln!(
        "{n} endless bodies: opened in {time_to_open:?}, {open_now} open at once; RSS {rss_before} KiB before, \
         {rss_held} KiB while held, {rss_after} KiB after; a review answered in {answered_in:?} meanwhile; \
         all closed with 408, the last {longest:?} after its head was read"
    );
    assert!(webhook.metric("miggate_connections_open").await <= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_are_shed_and_those_in_flight_finish() {
    const CAP: usize = 32;
    let webhook = Webhook::start(&[
        "--max-connections=32",
        "--request-deadline=29",
        "--min-body-rate=0",
    ])
    .await;
    let review = std::fs::read(testdata("admission/pod-create-restore-allowed.json")).unwrap();
    let (first, rest) = review.split_at(review.len() / 2);

    // In flight: a real review, half sent.
    let mut in_flight = webhook.partial(review.len(), first).await.unwrap();
    // The rest of the cap: bodies that never end.
    let mut held = Vec::new();
    for _ in 1..CAP {
        held.push(webhook.partial(1_000_000, b"{").await.unwrap());
    }
    let until = Instant::now() + SLACK;
    while webhook.metric("miggate_connections_open").await < CAP as i64 {
        assert!(Instant::now() < until, "the cap never filled: {}", webhook.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Beyond the cap: every new connection is closed before its TLS handshake completes.
    for _ in 0..200 {
        let shed = tokio::time::timeout(SLACK, webhook.tls()).await;
        assert!(
            matches!(shed, Ok(Err(_))),
            "a connection beyond the cap was served"
        );
    }
    assert_eq!(webhook.metric("miggate_connections_shed_total").await, 200);
    assert_eq!(webhook.metric("miggate_connections_open").await, CAP as i64);

    // The request in flight finishes as if nothing happened.
    in_flight.write_all(rest).await.unwrap();
    in_flight.flush().await.unwrap();
    let mut answer = vec![0u8; 64 * 1024];
    let mut got = 0;
    let until = Instant::now() + SLACK;
    while !String::from_utf8_lossy(&answer[..got]).contains("\"allowed\":true") {
        assert!(Instant::now() < until, "no answer to the request in flight");
        let n = tokio::time::timeout(SLACK, in_flight.read(&mut answer[got..]))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&answer[..got]));
        got += n;
    }
    let text = String::from_utf8_lossy(&answer[..got]);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");

    // Once the held ones go, the slots come back.
    drop(held);
    drop(in_flight);
    let until = Instant::now() + SLACK;
    while webhook.metric("miggate_connections_open").await > 0 {
        assert!(Instant::now() < until, "slots never came back: {}", webhook.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, body) = webhook.review().await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_that_idles_or_trickles_its_next_head_is_closed() {
    let webhook = Webhook::start(&["--request-deadline=2"]).await;
    for (what, next) in [
        ("idles", &b""[..]),
        ("trickles its next head", b"POST /validate HTTP/1.1\r\nHo"),
    ] {
        let mut tls = webhook.tls().await.unwrap();
        // One whole request first (405: /validate takes POST), so only the next head is waited for.
        tls.write_all(b"GET /validate HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        tls.flush().await.unwrap();
        let mut answer = Vec::new();
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = tokio::time::timeout(SLACK, tls.read_buf(&mut answer))
                .await
                .unwrap()
                .unwrap();
            assert!(n > 0, "closed before answering");
        }
        assert!(
            answer.starts_with(b"HTTP/1.1 405 "),
            "{}",
            String::from_utf8_lossy(&answer)
        );
        tls.write_all(next).await.unwrap();
        tls.flush().await.unwrap();
        let closed = until_closed(&mut tls, Duration::from_secs(2) + SLACK).await;
        assert!(
            closed.is_some(),
            "a connection that {what} after one request was held open; {}",
            webhook.log()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_port_closes_idle_and_trickling_clients_too() {
    let webhook = Webhook::start(&["--request-deadline=2"]).await;
    for (what, sent) in [("idles", &b""[..]), ("trickles a head", b"GET /heal")] {
        let mut tcp = TcpStream::connect(webhook.health).await.unwrap();
        tcp.write_all(sent).await.unwrap();
        let mut out = Vec::new();
        let closed = tokio::time::timeout(Duration::from_secs(2) + SLACK, tcp.read_to_end(&mut out)).await;
        assert!(
            closed.is_ok(),
            "a health client that {what} was held open; {}",
            webhook.log()
        );
    }
    // The probes themselves still answer.
    let r = plain()
        .get(format!("http://{}/healthz", webhook.health))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

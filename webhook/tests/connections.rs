//! The admission port's connection limits over real TLS (a CA made here): one source address
//! at its cap leaves room for another, a connection past its age is closed after its answer,
//! and with a client CA only a client holding a certificate it signed is answered.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use miggate_store::StoreConfig;
use miggate_webhook::tls::CertPaths;
use miggate_webhook::{Bound, Config};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use support::{testdata, testdata_path};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod support;

/// Slack on every wait: the machine may be slow and loaded.
const SLACK: Duration = Duration::from_secs(20);

fn review() -> String {
    testdata("admission/pod-create-restore-allowed.json")
}

/// A CA and what it signs.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf for `name` signed by this CA: (certificate PEM, key PEM).
    fn leaf(&self, name: &str) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// The webhook served in this process over the recorded file store; stopped when dropped.
struct Server {
    bound: Bound,
    ca: Ca,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Server {
    /// Serves with `tweak` applied to the configuration; `client_ca`, when given, is the PEM
    /// bundle clients' certificates must chain to.
    async fn start(client_ca: Option<&str>, tweak: impl FnOnce(&mut Config)) -> Server {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = Ca::new("miggate test CA");
        let (cert, key) = ca.leaf("127.0.0.1");
        let dir = tempfile::tempdir().unwrap();
        let paths = CertPaths {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
            client_ca: client_ca.map(|_| dir.path().join("client-ca.crt")),
        };
        std::fs::write(&paths.cert, cert).unwrap();
        std::fs::write(&paths.key, key).unwrap();
        if let (Some(path), Some(pem)) = (&paths.client_ca, client_ca) {
            std::fs::write(path, pem).unwrap();
        }
        let mut config = Config::new(paths, StoreConfig::Dir(testdata_path("webhook-store")));
        config.settings.listen = "127.0.0.1:0".parse().unwrap();
        config.settings.health_listen = "127.0.0.1:0".parse().unwrap();
        // Held connections are not closed by the head deadline while a test runs.
        config.settings.deadline = Duration::from_secs(20);
        config.settings.min_body_rate = 0;
        tweak(&mut config);
        let (bound_tx, bound_rx) = tokio::sync::oneshot::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let served = miggate_webhook::serve(
                config,
                move |b| {
                    let _ = bound_tx.send(b);
                },
                async move {
                    let _ = stopped.await;
                },
            )
            .await;
            if let Err(e) = served {
                panic!("the webhook failed: {e}");
            }
        });
        let bound = tokio::time::timeout(SLACK, bound_rx).await.unwrap().unwrap();
        Server {
            bound,
            ca,
            stop: Some(stop),
            _dir: dir,
        }
    }

    /// A client of the admission port trusting the server's CA, connecting from `from`,
    /// presenting `identity` (certificate and key PEM) when given.
    fn client(&self, from: IpAddr, identity: Option<&(String, String)>) -> reqwest::Client {
        let mut builder = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(self.ca.pem.as_bytes()).unwrap()])
            .no_proxy()
            .local_address(from)
            .timeout(SLACK);
        if let Some((cert, key)) = identity {
            builder =
                builder.identity(reqwest::Identity::from_pem(format!("{cert}{key}").as_bytes()).unwrap());
        }
        builder.build().unwrap()
    }

    /// Posts the recorded allowed review: its answer's status and body, or the error.
    async fn post(&self, client: &reqwest::Client) -> Result<(u16, String), reqwest::Error> {
        let resp = client
            .post(format!("https://{}/validate", self.bound.admission))
            .header("content-type", "application/json")
            .body(review())
            .send()
            .await?;
        let status = resp.status().as_u16();
        Ok((status, resp.text().await?))
    }

    /// A metric's value from the health port's `/metrics`.
    async fn metric(&self, name: &str) -> i64 {
        let text = reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .get(format!("http://{}/metrics", self.bound.health))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} not in\n{text}"))
    }

    /// A raw TLS connection to the admission port.
    async fn tls(&self) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(self.ca.pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(self.bound.admission)
            .await
            .unwrap();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .unwrap()
    }
}

const HERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1));
/// Another source address: Linux routes all of 127.0.0.0/8 to the loopback interface.
const THERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_at_its_cap_leaves_room_for_another_source() {
    let server = Server::start(None, |c| {
        c.settings.max_connections = 6;
        c.settings.max_connections_per_source = 3;
    })
    .await;
    // One source asks for the whole global cap, each connection kept alive after its answer.
    let mut held = Vec::new();
    let mut answered = 0;
    for _ in 0..6 {
        let client = server.client(HERE, None);
        if let Ok((200, _)) = server.post(&client).await {
            answered += 1;
        }
        held.push(client);
    }
    assert_eq!(answered, 3, "the source got more than its share");
    assert_eq!(server.metric("miggate_connections_open").await, 3);
    assert_eq!(
        server.metric("miggate_connections_shed_per_source_total").await,
        3
    );

    // Another source (the API server) is still answered.
    let (status, body) = server.post(&server.client(THERE, None)).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"allowed\":true"), "{body}");
    assert_eq!(server.metric("miggate_connections_shed_total").await, 0);

    // The source's places come back as its connections close.
    drop(held);
    let until = Instant::now() + SLACK;
    while server.metric("miggate_connections_open").await > 0 {
        assert!(Instant::now() < until, "places never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, _) = server.post(&server.client(HERE, None)).await.unwrap();
    assert_eq!(status, 200);
}

/// What the server sends until it closes the connection, or `None` if it is still open
/// after `within`.
async fn until_closed<S: tokio::io::AsyncRead + Unpin>(stream: &mut S, within: Duration) -> Option<String> {
    let mut out = Vec::new();
    tokio::time::timeout(within, async {
        let mut buf = [0_u8; 16 * 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .ok()
    .map(|()| String::from_utf8_lossy(&out).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_past_its_age_is_closed_after_its_answer() {
    let age = Duration::from_millis(500);
    let server = Server::start(None, |c| c.settings.max_connection_age = age).await;
    let body = review();
    let (first, rest) = body.split_at(body.len() / 2);
    let started = Instant::now();
    let mut idle = server.tls().await;
    // A request in flight when the age passes: half its body now, the rest after.
    let mut busy = server.tls().await;
    busy.write_all(
        format!(
            "POST /validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{first}",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    busy.flush().await.unwrap();

    // Idle past its age: closed then, long before the 20 s head deadline.
    assert_eq!(
        until_closed(&mut idle, Duration::from_secs(10)).await.as_deref(),
        Some("")
    );
    assert!(started.elapsed() >= age, "{:?}", started.elapsed());

    tokio::time::sleep(age).await;
    busy.write_all(rest.as_bytes()).await.unwrap();
    busy.flush().await.unwrap();
    let answer = until_closed(&mut busy, SLACK)
        .await
        .expect("the connection was kept open past its age");
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.contains("\"allowed\":true"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("\r\nconnection: close\r\n"),
        "{answer}"
    );
    assert_eq!(server.metric("miggate_connections_retired_total").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_client_ca_only_a_client_with_a_certificate_it_signed_is_answered() {
    let clients = Ca::new("API server clients");
    let server = Server::start(Some(&clients.pem), |_| {}).await;
    let apiserver = clients.leaf("miggate-webhook.miggate-system.svc");
    let stranger = Ca::new("someone else").leaf("miggate-webhook.miggate-system.svc");

    let (status, body) = server.post(&server.client(HERE, Some(&apiserver))).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"allowed\":true"), "{body}");
    for (who, identity) in [("no certificate", None), ("another CA's", Some(&stranger))] {
        let answer = server.post(&server.client(HERE, identity)).await;
        assert!(answer.is_err(), "{who}: answered {answer:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_client_ca_no_certificate_is_asked_for() {
    let server = Server::start(None, |_| {}).await;
    let (status, _) = server.post(&server.client(HERE, None)).await.unwrap();
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_handshakes_are_counted_by_reason() {
    let clients = Ca::new("API server clients");
    let server = Server::start(Some(&clients.pem), |_| {}).await;
    let errors = "miggate_tls_handshake_failures_total{reason=\"error\"}";
    let timeouts = "miggate_tls_handshake_failures_total{reason=\"timeout\"}";

    // Plain HTTP on the TLS port, and a client without the certificate --client-ca asks for.
    let mut plain = tokio::net::TcpStream::connect(server.bound.admission)
        .await
        .unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut sink = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), plain.read_to_end(&mut sink)).await;
    assert!(server.post(&server.client(HERE, None)).await.is_err());
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.metric(errors).await < 2 {
        assert!(Instant::now() < deadline, "not counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(server.metric(errors).await, 2);

    // Silent: no ClientHello within the handshake timeout.
    let _silent = tokio::net::TcpStream::connect(server.bound.admission)
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let text = reqwest::get(format!("http://{}/metrics", server.bound.health))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if text.contains(&format!("{timeouts} 1")) {
            break;
        }
        assert!(Instant::now() < deadline, "timeout not counted:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A client the server accepts adds nothing.
    let apiserver = clients.leaf("miggate-webhook.miggate-system.svc");
    let (status, _) = server.post(&server.client(HERE, Some(&apiserver))).await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(server.metric(errors).await, 2);
}

/// The first bytes of a TLS record carrying a ClientHello, the rest never sent: the server's
/// handshake waits on it.
const PARTIAL_CLIENT_HELLO: &[u8] = &[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03];

/// Keeps `each` connections open from every address of `sources` to `to`, each sending a
/// partial ClientHello and nothing more, reopened as soon as the server closes it, until
/// the returned sender is dropped. Counts every connection opened.
fn hold_unfinished_handshakes(
    to: std::net::SocketAddr,
    sources: &[IpAddr],
    each: usize,
) -> (tokio::sync::watch::Sender<()>, Arc<std::sync::atomic::AtomicU64>) {
    let (stop, stopped) = tokio::sync::watch::channel(());
    let opened = Arc::new(std::sync::atomic::AtomicU64::new(0));
    for &source in sources {
        for _ in 0..each {
            let (mut stopped, opened) = (stopped.clone(), opened.clone());
            tokio::spawn(async move {
                loop {
                    let socket = tokio::net::TcpSocket::new_v4().unwrap();
                    socket.bind(std::net::SocketAddr::new(source, 0)).unwrap();
                    let held = async {
                        let mut tcp = socket.connect(to).await?;
                        opened.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        tcp.write_all(PARTIAL_CLIENT_HELLO).await?;
                        let mut buf = [0_u8; 1024];
                        while tcp.read(&mut buf).await? > 0 {}
                        std::io::Result::Ok(())
                    };
                    tokio::select! {
                        _ = stopped.changed() => return,
                        _ = held => {}
                    }
                }
            });
        }
    }
    (stop, opened)
}

/// 127.0.0.10, 127.0.0.11, ...: `n` source addresses on loopback.
fn flood_sources(n: u8) -> Vec<IpAddr> {
    (0..n)
        .map(|i| IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 10 + i)))
        .collect()
}

/// Handshakes dropped from the full pool, whoever's they were.
async fn dropped(server: &Server) -> i64 {
    let text = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("http://{}/metrics", server.bound.health))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with("miggate_connections_handshakes_dropped_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<i64>().ok())
        .sum()
}

/// Waits until `metric` reaches at least `at_least`.
async fn until_metric(server: &Server, metric: &str, at_least: i64) {
    let until = Instant::now() + SLACK;
    loop {
        let now = server.metric(metric).await;
        if now >= at_least {
            return;
        }
        assert!(
            Instant::now() < until,
            "{metric} stayed at {now}, under {at_least}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unfinished_handshakes_from_many_addresses_do_not_keep_an_authenticated_client_out() {
    let clients = Ca::new("API server clients");
    let server = Server::start(Some(&clients.pem), |c| {
        // Caps the flood would fill many times over had it places among the established
        // connections: 8 addresses x 32 connections, against 64 in all and 16 per address.
        c.settings.max_connections = 64;
        c.settings.max_connections_per_source = 16;
        c.settings.max_handshakes = 32;
        // Only the pool's rule frees a place: no held handshake times out while the test runs.
        c.settings.handshake_timeout = Duration::from_secs(30);
    })
    .await;
    let (stop, opened) = hold_unfinished_handshakes(server.bound.admission, &flood_sources(8), 32);
    until_metric(&server, "miggate_connections_handshaking", 32).await;
    let until = Instant::now() + SLACK;
    while dropped(&server).await == 0 {
        assert!(Instant::now() < until, "the flood never filled the pool");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The API server: every call on a connection of its own, each through a full pool.
    let apiserver = clients.leaf("miggate-webhook.miggate-system.svc");
    for call in 0..20 {
        let client = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(server.ca.pem.as_bytes()).unwrap()])
            .identity(
                reqwest::Identity::from_pem(format!("{}{}", apiserver.0, apiserver.1).as_bytes()).unwrap(),
            )
            .no_proxy()
            .local_address(HERE)
            .pool_max_idle_per_host(0)
            .timeout(SLACK)
            .build()
            .unwrap();
        let (status, body) = server
            .post(&client)
            .await
            .unwrap_or_else(|e| panic!("call {call} failed during the flood: {e:?}"));
        assert_eq!(status, 200, "call {call}: {body}");
        assert!(body.contains("\"allowed\":true"), "call {call}: {body}");
    }
    // A client without a certificate still gets nothing, flood or not.
    assert!(server.post(&server.client(HERE, None)).await.is_err());

    // The flood held handshake places throughout and never an established one.
    assert!(server.metric("miggate_connections_handshaking").await <= 32);
    assert!(server.metric("miggate_connections_open").await <= 1);
    assert_eq!(server.metric("miggate_connections_shed_total").await, 0);
    assert_eq!(
        server.metric("miggate_connections_shed_per_source_total").await,
        0
    );
    let dropped = dropped(&server).await;
    let opened = opened.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("the flood opened {opened} connections; {dropped} handshakes dropped");
    assert!(dropped > 0, "the pool never filled");
    drop(stop);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_client_ca_unfinished_handshakes_do_not_keep_a_client_out_either() {
    let server = Server::start(None, |c| {
        c.settings.max_connections = 64;
        c.settings.max_connections_per_source = 16;
        c.settings.max_handshakes = 32;
        c.settings.handshake_timeout = Duration::from_secs(30);
    })
    .await;
    let (stop, _) = hold_unfinished_handshakes(server.bound.admission, &flood_sources(4), 32);
    until_metric(&server, "miggate_connections_handshaking", 32).await;
    for call in 0..10 {
        let client = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(server.ca.pem.as_bytes()).unwrap()])
            .no_proxy()
            .local_address(HERE)
            .pool_max_idle_per_host(0)
            .timeout(SLACK)
            .build()
            .unwrap();
        let (status, _) = server
            .post(&client)
            .await
            .unwrap_or_else(|e| panic!("call {call} failed during the flood: {e:?}"));
        assert_eq!(status, 200, "call {call}");
    }
    drop(stop);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_not_done_within_the_timeout_is_closed() {
    let server = Server::start(None, |c| {
        c.settings.handshake_timeout = Duration::from_millis(300)
    })
    .await;
    let mut tcp = tokio::net::TcpStream::connect(server.bound.admission)
        .await
        .unwrap();
    tcp.write_all(PARTIAL_CLIENT_HELLO).await.unwrap();
    let mut sink = Vec::new();
    let closed = tokio::time::timeout(SLACK, tcp.read_to_end(&mut sink)).await;
    assert!(closed.is_ok(), "held open past the handshake timeout");
    until_metric(
        &server,
        "miggate_tls_handshake_failures_total{reason=\"timeout\"}",
        1,
    )
    .await;
    assert_eq!(server.metric("miggate_connections_handshaking").await, 0);
}

impl Server {
    /// A raw TLS connection to the admission port from `from`, without a client certificate.
    async fn tls_from(
        &self,
        from: IpAddr,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(self.ca.pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(std::net::SocketAddr::new(from, 0)).unwrap();
        let tcp = socket.connect(self.bound.admission).await?;
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_a_client_holding_none_takes_a_place_from_the_address_holding_most() {
    let server = Server::start(None, |c| {
        c.settings.max_connections = 6;
        c.settings.max_connections_per_source = 4;
    })
    .await;
    // Every place held: four idle connections from one address, two from another.
    let [many, few] = [flood_sources(2)[0], flood_sources(2)[1]];
    let mut held = Vec::new();
    for from in [many, many, many, many, few, few] {
        held.push(server.tls_from(from).await.unwrap());
    }
    until_metric(&server, "miggate_connections_open", 6).await;

    // The API server, holding none, is answered, and keeps its connection.
    let apiserver = server.client(HERE, None);
    let (status, body) = server.post(&apiserver).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(server.metric("miggate_connections_evicted_total").await, 1);
    assert_eq!(server.metric("miggate_connections_shed_total").await, 0);

    // The oldest connection of the address holding the most was closed for it, and only it.
    let closed: Vec<bool> = which_closed(&mut held).await;
    assert_eq!(closed, [true, false, false, false, false, false]);

    // The address that lost a place cannot take it back from one holding fewer: it is
    // closed before its handshake.
    assert!(
        server.tls_from(many).await.is_err(),
        "a connection from the address holding the most was served at the cap"
    );
    assert_eq!(server.metric("miggate_connections_evicted_total").await, 1);
    assert_eq!(server.metric("miggate_connections_shed_total").await, 1);
}

/// Which of `held` the server has closed (each read for a moment).
async fn which_closed(held: &mut [tokio_rustls::client::TlsStream<tokio::net::TcpStream>]) -> Vec<bool> {
    let mut closed = Vec::new();
    for (i, stream) in held.iter_mut().enumerate() {
        // The one told to close is closed at once; give it the slack, the others a moment.
        let within = if i == 0 { SLACK } else { Duration::from_millis(300) };
        closed.push(until_closed(stream, within).await.is_some());
    }
    closed
}

//! The webhook's defaults are `miggate_wire::webhook`'s: `miggate webhook`'s flags and
//! `miggate deploy`'s Deployment read them there. The constants this crate still spells itself
//! (in `connections.rs`, `server.rs` and `Config::new`) are held to them here until they read
//! the wire's too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use miggate_webhook::tls::CertPaths;
use miggate_webhook::{Config, StoreConfig, body, connections, freshness, server};
use miggate_wire::webhook as wire;

#[test]
fn the_library_defaults_are_the_wires() {
    assert_eq!(connections::DEFAULT_MAX_CONNECTIONS, wire::MAX_CONNECTIONS);
    assert_eq!(
        connections::DEFAULT_MAX_CONNECTIONS_PER_SOURCE,
        wire::MAX_CONNECTIONS_PER_SOURCE
    );
    assert_eq!(connections::DEFAULT_MAX_CONNECTION_AGE, wire::MAX_CONNECTION_AGE);
    assert_eq!(server::DEFAULT_DEADLINE, wire::REQUEST_DEADLINE);
    assert_eq!(body::DEFAULT_MIN_BODY_RATE, wire::MIN_BODY_RATE);
    assert_eq!(freshness::DEFAULT_MAX_STALENESS, wire::MAX_STALENESS);

    let tls = CertPaths {
        cert: PathBuf::from("tls.crt"),
        key: PathBuf::from("tls.key"),
        client_ca: None,
    };
    let config = Config::new(tls, StoreConfig::Dir(PathBuf::from("store")));
    assert_eq!(config.listen, wire::LISTEN);
    assert_eq!(config.health_listen, wire::HEALTH_LISTEN);
    assert_eq!(config.poll_interval, wire::POLL_INTERVAL);
    assert_eq!(config.deadline, wire::REQUEST_DEADLINE);
    assert_eq!(config.drain, wire::DRAIN);
    assert_eq!(config.max_connections, wire::MAX_CONNECTIONS);
    assert_eq!(
        config.max_connections_per_source,
        wire::MAX_CONNECTIONS_PER_SOURCE
    );
    assert_eq!(config.max_connection_age, wire::MAX_CONNECTION_AGE);
    assert_eq!(config.min_body_rate, wire::MIN_BODY_RATE);
}

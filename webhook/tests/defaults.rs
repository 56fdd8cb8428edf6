//! The webhook's defaults are `miggate_wire::webhook`'s: `miggate webhook`'s flags
//! and this crate's constants read them there, and the chart's Deployment is held to them. What is held here
//! is that a library caller's `Config::new` puts each one in its own field.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use miggate_store::StoreConfig;
use miggate_webhook::Config;
use miggate_webhook::tls::CertPaths;
use miggate_wire::webhook as wire;

#[test]
fn a_library_config_takes_each_default_in_its_field() {
    let tls = CertPaths {
        cert: PathBuf::from("tls.crt"),
        key: PathBuf::from("tls.key"),
        client_ca: None,
    };
    let config = Config::new(tls, StoreConfig::Dir(PathBuf::from("store")));
    assert_eq!(config.settings.listen, wire::LISTEN);
    assert_eq!(config.settings.health_listen, wire::HEALTH_LISTEN);
    assert_eq!(config.settings.poll_interval, wire::POLL_INTERVAL);
    assert_eq!(config.settings.deadline, wire::REQUEST_DEADLINE);
    assert_eq!(config.settings.drain, wire::DRAIN);
    assert_eq!(config.settings.max_connections, wire::MAX_CONNECTIONS);
    assert_eq!(
        config.settings.max_connections_per_source,
        wire::MAX_CONNECTIONS_PER_SOURCE
    );
    assert_eq!(config.settings.max_connection_age, wire::MAX_CONNECTION_AGE);
    assert_eq!(config.settings.max_handshakes, wire::MAX_HANDSHAKES);
    assert_eq!(config.settings.handshake_timeout, wire::HANDSHAKE_TIMEOUT);
    assert_eq!(config.settings.min_body_rate, wire::MIN_BODY_RATE);
}

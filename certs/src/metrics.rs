//! What the certificates export: the serving certificate's and the CA's not-after, rotations
//! by what and why (a Secret deleted and created again among them), `caBundle` injections,
//! failed steps, and whether renewal is overdue.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

/// A rotation: `ca` or `serving` and why (the [`Why`](crate::Why) label), `bundle`
/// (`overlap`), or `secret`: the Secret deleted and created again because it could not be
/// updated in place (`immutable`, `wrong-type`, `invalid`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RotationLabel {
    /// `ca`, `serving`, `bundle` or `secret`.
    pub what: &'static str,
    /// Why.
    pub reason: &'static str,
}

/// A failed step.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepLabel {
    /// `identity`, `read`, `write`, `inject` or `serve`.
    pub step: &'static str,
}

/// The certificates' metrics, registered in the webhook's registry.
#[derive(Debug, Clone, Default)]
pub struct CertMetrics {
    /// Unix seconds of the served certificate's not-after (0 before one is served).
    pub not_after: Gauge,
    /// Unix seconds of the CA's not-after.
    pub ca_not_after: Gauge,
    /// Changes this replica wrote to the Secret, by what and why.
    pub rotations: Family<RotationLabel, Counter>,
    /// `caBundle` patches this replica made.
    pub injections: Counter,
    /// Certificates this replica started serving after the first.
    pub switches: Counter,
    /// Failed steps, by step.
    pub errors: Family<StepLabel, Counter>,
    /// 1 while the API server can verify what this replica serves (and its renewal is not
    /// overdue).
    pub verified: Gauge,
    /// 1 while the served certificate is past its renewal point and renewal fails (as last
    /// seen by a round: rounds retry at least every 30 s).
    pub renewal_overdue: Gauge,
}

impl CertMetrics {
    /// Registers each metric under `registry`'s prefix.
    pub fn register(&self, registry: &mut Registry) {
        registry.register_with_unit(
            "certificate_not_after",
            "Unix time of the served certificate's not-after",
            Unit::Seconds,
            self.not_after.clone(),
        );
        registry.register_with_unit(
            "ca_not_after",
            "Unix time of the webhook CA's not-after",
            Unit::Seconds,
            self.ca_not_after.clone(),
        );
        registry.register(
            "certificate_rotations",
            "Changes this replica wrote to the certificate Secret, by what (ca, serving, bundle, secret) and reason",
            self.rotations.clone(),
        );
        registry.register(
            "ca_bundle_injections",
            "caBundle patches of webhook configurations this replica made",
            self.injections.clone(),
        );
        registry.register(
            "certificate_switches",
            "Serving certificates this replica switched to after its first",
            self.switches.clone(),
        );
        registry.register(
            "certificate_errors",
            "Failed certificate steps, by step (identity, read, write, inject, serve)",
            self.errors.clone(),
        );
        registry.register(
            "certificate_verified",
            "1 while every webhook configuration's caBundle trusts the served certificate and its renewal is not overdue",
            self.verified.clone(),
        );
        registry.register(
            "certificate_renewal_overdue",
            "1 while the served certificate is past its renewal point (two thirds of its life) and renewal fails",
            self.renewal_overdue.clone(),
        );
    }
}

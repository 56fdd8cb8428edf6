//! `caBundle` injection: every webhook of each named configuration gets the bundle in
//! `clientConfig.caBundle` and nothing else is touched. The patch is a JSON patch that tests
//! each webhook's name at its index before it writes there, so a configuration re-ordered
//! between the read and the write is refused rather than patched at the wrong webhook.

use std::fmt;
use std::str::FromStr;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::error::Error;

/// Which kind of webhook configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A `ValidatingWebhookConfiguration`.
    Validating,
    /// A `MutatingWebhookConfiguration`.
    Mutating,
}

/// A webhook configuration by kind and name (`validating/miggate`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConfigurationRef {
    /// Its kind.
    pub kind: Kind,
    /// Its name.
    pub name: String,
}

impl FromStr for ConfigurationRef {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        let bad = || Error::ConfigurationRef {
            text: text.to_string(),
        };
        let (kind, name) = text.split_once('/').ok_or_else(bad)?;
        let kind = match kind {
            "validating" | "validatingwebhookconfiguration" => Kind::Validating,
            "mutating" | "mutatingwebhookconfiguration" => Kind::Mutating,
            _ => return Err(bad()),
        };
        if !miggate_wire::dns::is_dns_subdomain(name) {
            return Err(bad());
        }
        Ok(ConfigurationRef {
            kind,
            name: name.to_string(),
        })
    }
}

impl fmt::Display for ConfigurationRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            Kind::Validating => "validating",
            Kind::Mutating => "mutating",
        };
        write!(f, "{kind}/{}", self.name)
    }
}

/// One webhook of a configuration as read: its name and the `caBundle` it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// `webhooks[i].name`.
    pub name: String,
    /// `webhooks[i].clientConfig.caBundle`, decoded.
    pub ca_bundle: Option<Vec<u8>>,
}

/// Reads a configuration's webhooks from its JSON (either kind).
pub fn webhooks(config: &Value) -> Vec<Webhook> {
    let Some(items) = config.get("webhooks").and_then(Value::as_array) else {
        return Vec::new();
    };
    items
        .iter()
        .map(|w| Webhook {
            name: w
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            ca_bundle: w
                .get("clientConfig")
                .cloned()
                .and_then(|c| serde_json::from_value::<WebhookClientConfig>(c).ok())
                .and_then(|c| c.ca_bundle)
                .map(|b| b.0),
        })
        .collect()
}

/// The JSON patch that sets `bundle` on every webhook of `read` that lacks it, each write
/// guarded by a test of the webhook's name; `None` when every webhook carries it already.
pub fn patch_for(read: &[Webhook], bundle: &[u8]) -> Option<json_patch::Patch> {
    let encoded = serde_json::to_value(ByteString(bundle.to_vec())).ok()?;
    let mut ops = Vec::new();
    for (i, w) in read.iter().enumerate() {
        if w.ca_bundle.as_deref() == Some(bundle) {
            continue;
        }
        ops.push(json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": w.name}));
        ops.push(
            json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": encoded}),
        );
    }
    if ops.is_empty() {
        return None;
    }
    serde_json::from_value(Value::Array(ops)).ok()
}

/// Reads and patches the configurations of one kind.
#[derive(Clone)]
pub(crate) struct Configurations {
    validating: Api<ValidatingWebhookConfiguration>,
    mutating: Api<MutatingWebhookConfiguration>,
}

impl Configurations {
    pub(crate) fn new(client: kube::Client) -> Self {
        Configurations {
            validating: Api::all(client.clone()),
            mutating: Api::all(client),
        }
    }

    pub(crate) fn validating(&self) -> Api<ValidatingWebhookConfiguration> {
        self.validating.clone()
    }

    pub(crate) fn mutating(&self) -> Api<MutatingWebhookConfiguration> {
        self.mutating.clone()
    }

    /// The configuration's webhooks, or `None` when it does not exist.
    pub(crate) async fn read(&self, at: &ConfigurationRef) -> Result<Option<Vec<Webhook>>, Error> {
        let got = match at.kind {
            Kind::Validating => self
                .validating
                .get_opt(&at.name)
                .await
                .map(|o| o.and_then(|o| serde_json::to_value(o).ok())),
            Kind::Mutating => self
                .mutating
                .get_opt(&at.name)
                .await
                .map(|o| o.and_then(|o| serde_json::to_value(o).ok())),
        };
        let got = got.map_err(|source| Error::Api {
            what: format!("read {at}"),
            source: Box::new(source),
        })?;
        Ok(got.map(|v| webhooks(&v)))
    }

    /// Applies `patch` to the configuration.
    pub(crate) async fn patch(&self, at: &ConfigurationRef, patch: json_patch::Patch) -> Result<(), Error> {
        let params = PatchParams::default();
        let done = match at.kind {
            Kind::Validating => self
                .validating
                .patch(&at.name, &params, &Patch::<()>::Json(patch))
                .await
                .map(|_| ()),
            Kind::Mutating => self
                .mutating
                .patch(&at.name, &params, &Patch::<()>::Json(patch))
                .await
                .map(|_| ()),
        };
        done.map_err(|source| Error::Api {
            what: format!("inject the CA into {at}"),
            source: Box::new(source),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::validating("validating/miggate", Some((Kind::Validating, "miggate")))]
    #[case::long_kind("mutatingwebhookconfiguration/miggate-steer", Some((Kind::Mutating, "miggate-steer")))]
    #[case::no_kind("miggate", None)]
    #[case::other_kind("secret/miggate", None)]
    #[case::upper("validating/Miggate", None)]
    #[case::slash("validating/a/b", None)]
    #[case::empty("validating/", None)]
    fn configuration_refs(#[case] text: &str, #[case] want: Option<(Kind, &str)>) {
        let got = text.parse::<ConfigurationRef>().ok().map(|r| (r.kind, r.name));
        assert_eq!(got, want.map(|(k, n)| (k, n.to_string())));
    }

    #[test]
    fn the_patch_tests_each_name_and_sets_only_the_bundle() {
        let read = vec![
            Webhook {
                name: "a".into(),
                ca_bundle: Some(b"X".to_vec()),
            },
            Webhook {
                name: "b".into(),
                ca_bundle: None,
            },
        ];
        let patch = serde_json::to_value(patch_for(&read, b"X").unwrap()).unwrap();
        assert_eq!(
            patch,
            json!([
                {"op": "test", "path": "/webhooks/1/name", "value": "b"},
                {"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": "WA=="},
            ])
        );
        let all = vec![Webhook {
            name: "a".into(),
            ca_bundle: Some(b"X".to_vec()),
        }];
        assert!(patch_for(&all, b"X").is_none());
    }
}

//! The Kubernetes install, generated: every object of `deploy/` built as its typed kind
//! (k8s-openapi, or [`cert_manager`]'s for cert-manager's), so a field the API server would not
//! know fails the tests instead of being silently pruned on `kubectl apply`.
//!
//! `miggate deploy` prints them as one YAML stream, or writes the files of `deploy/` with a
//! `kustomization.yaml` (`kubectl apply -k deploy/`). What each object is for:
//! - the webhook: a `Deployment` (2 replicas spread over nodes, a `PodDisruptionBudget`,
//!   non-root, read-only root, no capabilities), its `Service`, and a
//!   `ValidatingWebhookConfiguration` for restore pods (failure policy Fail) and bindings
//!   (Ignore); its certificates made, rotated and injected by the webhook itself from the
//!   Secret [`CERT_SECRET`] (or by cert-manager, or brought by the user: [`Certificates`]);
//! - RBAC: the webhook reads (get/list/watch) checkpoints, node inventories, pods, nodes and
//!   ResourceSlices, nothing else; the publisher writes GpuNodes, and a
//!   `ValidatingAdmissionPolicy` holds it to its own node's; only the checkpoint agent's
//!   service account writes GpuCheckpoints, and it writes and deletes only its own node's,
//!   enforced by another policy;
//! - the tenant policies ([`policies`]): restore annotations fixed at creation, Bindings that
//!   cannot smuggle them, the node namespace held to the publisher's pods, and (opt-in)
//!   waivers under RBAC, judged against the writer of the pod or of its workload's template
//!   ([`waivers`]);
//! - a `NetworkPolicy` ([`network_policy`]) keeping the webhook's health and metrics port to
//!   the kubelet and the monitoring namespace, and its admission port to the API server's
//!   addresses where the admin names them;
//! - the publisher `DaemonSet` (`miggate publish --node $(NODE_NAME)`) on GPU nodes;
//! - the CRDs.

pub mod cert_manager;
mod names;
pub mod network_policy;
mod objects;
pub mod policies;
pub mod waivers;
pub mod webhook_account;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{DeployProblem, Error, ObjectName};

pub use names::{
    CERT_MANAGER_SECRET, CERT_SECRET, MUTATING_CONFIGURATIONS, NAMESPACE, NODE_NAMESPACE, PUBLISHER,
    VALIDATING_CONFIGURATION, WEBHOOK,
};
pub use objects::{
    BINDING_MATCH, CHECKPOINT_AGENT_RULE, CHECKPOINT_NODE_FIXED_RULE, CHECKPOINT_NODE_RULE,
    PUBLISHER_NODE_RULE, RESTORE_MATCH, STEER_MATCH,
};

/// The image repository `image/build.sh` tags its image in when no other is named: local to the
/// machine that built it, as buildah and podman name such images. A cluster pulls from a
/// registry: push the image there and pass its reference to `miggate deploy --image`.
pub const DEFAULT_IMAGE_REPOSITORY: &str = "localhost/miggate";

/// What the generated install can be told. The checked-in `deploy/` uses the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The container image of `miggate` (webhook and publisher).
    pub image: String,
    /// The namespace of the checkpoint agent's service account (created by the install; the
    /// namespace must exist). By default the node namespace, where its pods are DaemonSets'
    /// held to the restricted profile plus the read-only recovery state (`miggate-node-pods`);
    /// an agent that runs CRIU itself, with host access, needs a namespace of its own.
    pub checkpoint_agent_namespace: String,
    /// The name of the checkpoint agent's service account: the only writer of GpuCheckpoints.
    pub checkpoint_agent_name: String,
    /// The identities that may bind a pod with the device map (the schedulers' user names):
    /// miggate's device-map webhook writes it into their Bindings, and the binding policy
    /// refuses it from anyone else.
    pub binders: Vec<String>,
    /// Whether a waiver (`miggate.io/skip-checks`, the peer's skip) needs an RBAC permission of
    /// its writer, or of the workload template it was made from ([`waivers`]). Off by default:
    /// any pod author may waive.
    pub waivers_need_permission: bool,
    /// Where the webhook's serving certificate comes from.
    pub certificates: Certificates,
    /// The addresses the API server's calls to the webhook come from, when the admin knows
    /// them: the NetworkPolicy then admits only these to the admission port
    /// ([`network_policy`]). Empty by default: the port is open to every source.
    pub api_server_cidrs: Vec<network_policy::Cidr>,
}

/// Where the webhook's serving certificate comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Certificates {
    /// The webhook makes and rotates its own CA and certificate, kept in the Secret
    /// [`CERT_SECRET`], and injects the CA into every configuration (the default: nothing
    /// else to install, nothing done by hand).
    #[default]
    SelfManaged,
    /// cert-manager issues them (`certificates.yaml`) and its cainjector injects the CA.
    CertManager,
    /// A Secret the user brings (`tls.crt`, `tls.key`), and the CA bundle (PEM) to put in every
    /// configuration's `caBundle`, when given (else the user patches it in).
    Provided {
        /// The Secret's name, in the webhook's namespace.
        secret: String,
        /// The CA bundle, PEM.
        ca_bundle: Option<String>,
    },
}

impl Default for Config {
    fn default() -> Self {
        Config {
            image: format!("{DEFAULT_IMAGE_REPOSITORY}:{}", env!("CARGO_PKG_VERSION")),
            checkpoint_agent_namespace: NODE_NAMESPACE.to_string(),
            checkpoint_agent_name: "miggate-checkpoint-agent".to_string(),
            binders: vec![policies::DEFAULT_BINDER.to_string()],
            waivers_need_permission: false,
            certificates: Certificates::default(),
            api_server_cidrs: Vec::new(),
        }
    }
}

/// One generated object: which file of `deploy/` it goes to, and its JSON as its typed kind
/// serializes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    /// The file under `deploy/` (`webhook.yaml`).
    pub file: &'static str,
    /// The object, as its typed kind serialized it.
    pub value: Value,
}

impl Object {
    /// `apiVersion` and `kind`, for readers and tests.
    pub fn kind(&self) -> (&str, &str) {
        let text = |k: &str| self.value.get(k).and_then(Value::as_str).unwrap_or_default();
        (text("apiVersion"), text("kind"))
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
}

/// Reads `value` as kind `K` and writes it back: the object as the API types know it.
pub(crate) fn typed<K: Serialize + DeserializeOwned>(
    file: &'static str,
    value: Value,
) -> Result<Object, Error> {
    let object = || ObjectName {
        kind: value.get("kind").and_then(Value::as_str).map(str::to_string),
        name: value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    let not_of_kind = |error| DeployProblem::Typed {
        object: object(),
        error,
    };
    let read: K = serde_json::from_value(value.clone()).map_err(not_of_kind)?;
    let written = serde_json::to_value(&read).map_err(not_of_kind)?;
    // A field the kind does not have is dropped when read: refuse rather than ship an object
    // that says less than was written.
    if written != value {
        return Err(DeployProblem::FieldsDropped { object: object() }.into());
    }
    Ok(Object { file, value: written })
}

/// Every object of the install, in the order they are applied: namespace, CRDs, RBAC and
/// policies, certificates, workloads, and the webhook configuration last (so the webhook it
/// names exists before any pod is sent to it).
pub fn objects(config: &Config) -> Result<Vec<Object>, Error> {
    objects::all(config)
}

/// The files of `deploy/`, in order, each with its content: the objects grouped by file, and
/// `kustomization.yaml` listing them.
pub fn files(config: &Config) -> Result<Vec<(&'static str, String)>, Error> {
    let objects = objects(config)?;
    let mut order: Vec<&'static str> = Vec::new();
    for o in &objects {
        if !order.contains(&o.file) {
            order.push(o.file);
        }
    }
    let mut out = Vec::new();
    for file in &order {
        let docs = objects
            .iter()
            .filter(|o| o.file == *file)
            .map(|o| yaml(&o.value))
            .collect::<Result<Vec<_>, _>>()?;
        out.push((*file, format!("{HEADER}{}", docs.join("---\n"))));
    }
    let kustomization = serde_json::json!({
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": order,
    });
    out.push(("kustomization.yaml", format!("{HEADER}{}", yaml(&kustomization)?)));
    Ok(out)
}

/// Every object as one multi-document YAML stream (`miggate deploy | kubectl apply -f -`).
pub fn stream(config: &Config) -> Result<String, Error> {
    let docs = objects(config)?
        .iter()
        .map(|o| yaml(&o.value))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(format!("{HEADER}{}", docs.join("---\n")))
}

const HEADER: &str = "# Generated by `miggate deploy`; do not edit (see docs/deploy.md).\n";

fn yaml(value: &Value) -> Result<String, Error> {
    Ok(serde_saphyr::to_string(value).map_err(DeployProblem::Yaml)?)
}

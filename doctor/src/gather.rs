//! The one pass of reads (and the dry-run probe) [`crate::checks`] judges: every object the
//! checks look at, fetched once, each read's error kept in words for the finding it becomes.
//! The reads run one after another: a doctor is run by hand, and its load on the API server
//! should be a kubectl user's.

use std::time::{Duration, SystemTime};

use http_body_util::BodyExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, Namespace, Node, Pod, PodSpec, Secret};
use k8s_openapi::api::resource::v1::ResourceSlice;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::{Api, Client};
use miggate_crds::GpuNode;
use miggate_wire::install as names;

use crate::install::{PROBE_CHECKPOINT, PROBE_POD, restore_webhook};

/// A read: the value, or why it could not be read, in words.
pub type Got<T> = Result<T, String>;

/// How the doctor was asked to look.
#[derive(Debug, Clone)]
pub struct Options {
    /// The webhook's namespace; `None`: the one the restore webhook's Service names, else
    /// miggate's default.
    pub namespace: Option<String>,
    /// Where the dry-run probe pod is created (never stored).
    pub probe_namespace: String,
    /// Whether to run the probe at all.
    pub probe: bool,
}

/// One replica of the webhook, and what its `/readyz` says.
#[derive(Debug, Clone)]
pub struct Replica {
    /// The pod's name.
    pub name: String,
    /// Its `Ready` condition.
    pub ready: bool,
    /// The body of its `/readyz`, read through the API server's pod proxy.
    pub readyz: Got<serde_json::Value>,
}

/// The Secret the replicas serve their certificate from.
#[derive(Debug, Clone)]
pub struct Serving {
    /// `namespace/name`.
    pub secret: String,
    /// Its `tls.crt`, when it has one.
    pub cert_pem: Option<Vec<u8>>,
}

/// The probe's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Not run, and why.
    NotRun(String),
    /// The API server refused the pod: the message it gave.
    Refused(String),
    /// The dry run passed: nothing refused a restore of a checkpoint that does not exist.
    Allowed,
}

/// Everything the checks read.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// When it was read.
    pub now: SystemTime,
    /// The server's version, or why it cannot be reached.
    pub version: Got<String>,
    /// Each CRD this binary expects, with the cluster's of that name.
    pub crds: Vec<(CustomResourceDefinition, Got<Option<CustomResourceDefinition>>)>,
    /// `ValidatingWebhookConfiguration` miggate.
    pub validating: Got<Option<ValidatingWebhookConfiguration>>,
    /// Each `MutatingWebhookConfiguration` of miggate's, by name.
    pub mutating: Vec<(String, Got<Option<MutatingWebhookConfiguration>>)>,
    /// The webhook's namespace.
    pub namespace: String,
    /// Its Deployment.
    pub deployment: Got<Option<Deployment>>,
    /// Its pods.
    pub replicas: Got<Vec<Replica>>,
    /// The certificate Secret the Deployment names; `Ok(None)` when it names none.
    pub serving: Got<Option<Serving>>,
    /// Every Node.
    pub nodes: Got<Vec<Node>>,
    /// Every GpuNode.
    pub gpu_nodes: Got<Vec<GpuNode>>,
    /// Every ResourceSlice (empty where the API is not served).
    pub slices: Got<Vec<ResourceSlice>>,
    /// miggate's ValidatingAdmissionPolicies.
    pub policies: Got<Vec<ValidatingAdmissionPolicy>>,
    /// Every ValidatingAdmissionPolicyBinding (a binding of a miggate policy may be anyone's).
    pub bindings: Got<Vec<ValidatingAdmissionPolicyBinding>>,
    /// Every Namespace.
    pub namespaces: Got<Vec<Namespace>>,
    /// The namespace the probe ran in, when it ran.
    pub probe_namespace: Option<String>,
    /// The probe.
    pub probe: Probe,
}

#[cfg(test)]
impl Cluster {
    /// A cluster with nothing in it, read now, for the checks' tests to fill in.
    pub(crate) fn bare() -> Self {
        Cluster {
            now: SystemTime::now(),
            version: Ok("v1.36.3".into()),
            crds: Vec::new(),
            validating: Ok(None),
            mutating: Vec::new(),
            namespace: names::NAMESPACE.to_string(),
            deployment: Ok(None),
            replicas: Ok(Vec::new()),
            serving: Ok(None),
            nodes: Ok(Vec::new()),
            gpu_nodes: Ok(Vec::new()),
            slices: Ok(Vec::new()),
            policies: Ok(Vec::new()),
            bindings: Ok(Vec::new()),
            namespaces: Ok(Vec::new()),
            probe_namespace: None,
            probe: Probe::NotRun("test".into()),
        }
    }
}

/// The label every object of miggate's install carries.
const PART_OF: &str = "app.kubernetes.io/part-of=miggate";

/// How long one pod's `/readyz` may take through the proxy.
const READYZ_TIMEOUT: Duration = Duration::from_secs(5);

/// Reads the cluster for the checks, and runs the probe.
pub async fn gather(client: &Client, options: &Options) -> Cluster {
    let version = client
        .apiserver_version()
        .await
        .map(|v| v.git_version)
        .map_err(|e| words(&e));
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crds = Vec::new();
    for expected in miggate_crds::crds() {
        let name = expected.metadata.name.clone().unwrap_or_default();
        let live = crd_api.get_opt(&name).await.map_err(|e| words(&e));
        crds.push((expected, live));
    }
    let validating: Got<Option<ValidatingWebhookConfiguration>> = Api::all(client.clone())
        .get_opt(names::VALIDATING_CONFIGURATION)
        .await
        .map_err(|e| words(&e));
    let mut mutating = Vec::new();
    for name in names::MUTATING_CONFIGURATIONS {
        let got = Api::<MutatingWebhookConfiguration>::all(client.clone())
            .get_opt(name)
            .await
            .map_err(|e| words(&e));
        mutating.push((name.to_string(), got));
    }
    let namespace = options
        .namespace
        .clone()
        .or_else(|| {
            let config = validating.as_ref().ok()?.as_ref()?;
            restore_webhook(config)?
                .client_config
                .service
                .as_ref()
                .map(|s| s.namespace.clone())
        })
        .unwrap_or_else(|| names::NAMESPACE.to_string());
    let deployment: Got<Option<Deployment>> = Api::namespaced(client.clone(), &namespace)
        .get_opt(names::WEBHOOK)
        .await
        .map_err(|e| words(&e));
    let replicas = replicas(client, &namespace, &deployment).await;
    let serving = serving(client, &namespace, &deployment).await;
    let nodes = list::<Node>(client, None).await;
    let gpu_nodes = list::<GpuNode>(client, None).await;
    let slices = match list::<ResourceSlice>(client, None).await {
        Err(e) if e.contains("404") => Ok(Vec::new()),
        other => other,
    };
    let policies = list::<ValidatingAdmissionPolicy>(client, Some(PART_OF)).await;
    let bindings = list::<ValidatingAdmissionPolicyBinding>(client, None).await;
    let namespaces = list::<Namespace>(client, None).await;
    let probe = if options.probe {
        probe(client, &options.probe_namespace, &validating).await
    } else {
        Probe::NotRun("--no-probe".to_string())
    };
    Cluster {
        now: SystemTime::now(),
        version,
        crds,
        validating,
        mutating,
        namespace,
        deployment,
        replicas,
        serving,
        nodes,
        gpu_nodes,
        slices,
        policies,
        bindings,
        namespaces,
        probe_namespace: options.probe.then(|| options.probe_namespace.clone()),
        probe,
    }
}

/// Every object of a cluster-scoped kind, optionally by label.
async fn list<K>(client: &Client, labels: Option<&str>) -> Got<Vec<K>>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let mut params = ListParams::default();
    if let Some(labels) = labels {
        params = params.labels(labels);
    }
    Api::<K>::all(client.clone())
        .list(&params)
        .await
        .map(|l| l.items)
        .map_err(|e| words(&e))
}

/// The Deployment's pods (by its selector's labels), each with its `/readyz`.
async fn replicas(
    client: &Client,
    namespace: &str,
    deployment: &Got<Option<Deployment>>,
) -> Got<Vec<Replica>> {
    let Ok(Some(deployment)) = deployment else {
        return Ok(Vec::new());
    };
    let selector = deployment
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.as_ref())
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let listed = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| words(&e))?;
    let mut out = Vec::new();
    for pod in listed.items {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let ready = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        let readyz = if running {
            readyz(client, namespace, &name).await
        } else {
            Err("not running".to_string())
        };
        out.push(Replica { name, ready, readyz });
    }
    Ok(out)
}

/// A pod's `/readyz` (either status: a replica not ready says why in the body).
async fn readyz(client: &Client, namespace: &str, pod: &str) -> Got<serde_json::Value> {
    let path = format!(
        "/api/v1/namespaces/{namespace}/pods/{pod}:{}/proxy/readyz",
        miggate_wire::webhook::HEALTH_PORT
    );
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    let send = async {
        let response = client
            .send(request.map(kube::client::Body::from))
            .await
            .map_err(|e| words(&e))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        serde_json::from_slice(&body).map_err(|_| {
            format!(
                "HTTP {status}: {}",
                crate::quoted(&String::from_utf8_lossy(&body[..body.len().min(512)]))
            )
        })
    };
    tokio::time::timeout(READYZ_TIMEOUT, send)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {}s", READYZ_TIMEOUT.as_secs())))
}

/// The certificate Secret the Deployment serves from: `--tls-secret=NS/NAME`, else the
/// Secret of its volume `tls`.
async fn serving(
    client: &Client,
    namespace: &str,
    deployment: &Got<Option<Deployment>>,
) -> Got<Option<Serving>> {
    let Ok(Some(deployment)) = deployment else {
        return Ok(None);
    };
    let spec = deployment.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    let Some((ns, name)) = spec.and_then(|spec| secret_of(spec, namespace)) else {
        return Ok(None);
    };
    let secret: Option<Secret> = Api::namespaced(client.clone(), &ns)
        .get_opt(&name)
        .await
        .map_err(|e| words(&e))?;
    Ok(Some(Serving {
        secret: format!("{ns}/{name}"),
        cert_pem: secret
            .and_then(|s| s.data)
            .and_then(|mut d| d.remove(miggate_certs::material::TLS_CRT))
            .map(|b| b.0),
    }))
}

/// `(namespace, name)` of the Secret a webhook pod spec serves from.
fn secret_of(spec: &PodSpec, namespace: &str) -> Option<(String, String)> {
    let args = spec
        .containers
        .iter()
        .flat_map(|c: &Container| c.args.iter().flatten());
    for arg in args {
        if let Some((ns, name)) = arg.strip_prefix("--tls-secret=").and_then(|v| v.split_once('/')) {
            return Some((ns.to_string(), name.to_string()));
        }
    }
    spec.volumes
        .iter()
        .flatten()
        .filter(|v| v.name == "tls")
        .find_map(|v| v.secret.as_ref()?.secret_name.clone())
        .map(|name| (namespace.to_string(), name))
}

/// A server-side dry run of a restore pod of a checkpoint that does not exist, in `namespace`,
/// carrying the labels the restore webhook's objectSelector asks for: the API server must call
/// the webhook, which must refuse it.
async fn probe(
    client: &Client,
    namespace: &str,
    validating: &Got<Option<ValidatingWebhookConfiguration>>,
) -> Probe {
    let selected = validating
        .as_ref()
        .ok()
        .and_then(Option::as_ref)
        .and_then(restore_webhook)
        .and_then(|w| w.object_selector.as_ref())
        .and_then(|s| s.match_labels.clone());
    let pod = probe_pod(namespace, selected);
    let params = PostParams {
        dry_run: true,
        field_manager: Some("miggate-doctor".to_string()),
    };
    match Api::<Pod>::namespaced(client.clone(), namespace)
        .create(&params, &pod)
        .await
    {
        Ok(_) => Probe::Allowed,
        Err(kube::Error::Api(status)) => Probe::Refused(status.message),
        Err(e) => Probe::NotRun(words(&e)),
    }
}

/// The probe pod: Pod Security's restricted profile, so a namespace that enforces it does not
/// refuse it before the webhook is asked.
pub fn probe_pod(namespace: &str, labels: Option<std::collections::BTreeMap<String, String>>) -> Pod {
    let pod = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {
            "containers": [{
                "name": "probe",
                "image": "registry.k8s.io/pause:3.10",
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]},
                    "runAsNonRoot": true,
                    "runAsUser": 65534,
                    "seccompProfile": {"type": "RuntimeDefault"}
                }
            }]
        }
    });
    let mut pod: Pod = serde_json::from_value(pod).unwrap_or_default();
    pod.metadata = ObjectMeta {
        name: Some(PROBE_POD.to_string()),
        namespace: Some(namespace.to_string()),
        labels,
        annotations: Some(
            [(
                miggate_wire::annotations::RESTORE_FROM.to_string(),
                PROBE_CHECKPOINT.to_string(),
            )]
            .into(),
        ),
        ..ObjectMeta::default()
    };
    pod
}

/// A client error in words: the API server's message and code, or the transport's.
fn words(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
        other => other.to_string(),
    }
}

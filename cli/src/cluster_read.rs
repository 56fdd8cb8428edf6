//! `where`, `check` and `claim` reading the cluster, as a kubectl user would ask them to
//! (`miggate where -n team-a ckpt-1`, `miggate check -n team-a podsnapshot/snap-1 --node
//! gpu-node-7`): a `GpuCheckpoint`, or the Go peer's `PodSnapshot`, by namespace and name, and node inventories through the same sources, in the
//! same order, as the webhook (`miggate_inventory::best_or_why` over the node's `GpuNode`,
//! the DRA driver's `ResourceSlice`s and the `Node` with its GFD labels).
//!
//! A checkpoint is followed by the webhook's own [`resolve`] over what was read, so a
//! `PodSnapshot` here is held to its content's back-pointer exactly as at admission.
//!
//! Each command reads once (list or get), on a small runtime of its own, and needs only `get`
//! and `list` on those kinds (and on `podsnapshots` and `podsnapshotcontents` for the peer's):
//! the webhook's ClusterRole grants them.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, ListParams};
use miggate_admission::lookup::{
    Checkpoint, Content, Inventory, Lookup, NoInventory, RestorePod, SnapshotLookup,
};
use miggate_admission::resolve::{Kind, Reference, Resolved, Unresolved, resolve};
use miggate_compat::GpuManifest;
use miggate_compat::escape::{escape, escape_within};
use miggate_crds::peer::{PodSnapshot, PodSnapshotContent, SnapshotContent, SnapshotRef};
use miggate_crds::{GpuCheckpoint, GpuNode};
use miggate_inventory::best_or_why;
use serde::de::DeserializeOwned;

use crate::flags::cluster::ClusterFlags;

/// How long the whole reading may take: a cluster that does not answer is an error, not a hang.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Objects per list page, and the most pages read of one kind (a bound, far above any cluster's
/// GPU nodes).
const PAGE: u32 = 500;
const MAX_PAGES: usize = 200;

/// A node's inventory as the webhook would read it, or why there is none.
pub type NodeFacts = (String, Result<Inventory, NoInventory>);

/// A node's facts and, for a node with NVIDIA DRA slices, each device's slice name by UUID
/// (`pool/device`), so `where` can say which devices a claim would take.
pub type NodeView = (
    String,
    Result<Inventory, NoInventory>,
    std::collections::HashMap<String, String>,
);

/// A checkpoint in the cluster, as a kubectl user names one: `NAME` (a `GpuCheckpoint`, as
/// before the peer's kinds were read) or kubectl's `TYPE/NAME`, with the type's plural,
/// singular or short name and, optionally, its API group (`podsnapshots.nvidia.com/snap-1`),
/// in any case. The name is a DNS-1123 subdomain, as both kinds' names are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointRef {
    /// The kind named: the webhook's own, so the CLI and a restore pod's annotation name
    /// the same two kinds.
    pub kind: Kind,
    /// The object's name.
    pub name: String,
}

/// The type names each kind answers to, as kubectl takes them: (names, API group).
const KIND_NAMES: [(Kind, &[&str], &str); 2] = [
    (
        Kind::GpuCheckpoint,
        &["gpucheckpoint", "gpucheckpoints", "gpuckpt"],
        miggate_wire::GROUP,
    ),
    (
        Kind::PodSnapshot,
        &["podsnapshot", "podsnapshots", "podsnap"],
        miggate_wire::peer::GROUP,
    ),
];

impl std::str::FromStr for CheckpointRef {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let shown = || escape_within(text, 256).into_owned();
        let (kind, name) = match text.split_once('/') {
            None => (Kind::GpuCheckpoint, text),
            Some((kind, name)) => {
                let kind = kind.to_ascii_lowercase();
                let found = KIND_NAMES.iter().find(|(_, names, group)| {
                    let bare = kind
                        .strip_suffix(group)
                        .and_then(|k| k.strip_suffix('.'))
                        .unwrap_or(&kind);
                    names.contains(&bare)
                });
                match found {
                    Some((kind, _, _)) => (*kind, name),
                    None => {
                        return Err(format!(
                            "{} names no checkpoint kind: name a GpuCheckpoint as NAME or gpucheckpoint/NAME, \
                             a PodSnapshot as podsnapshot/NAME",
                            shown()
                        ));
                    }
                }
            }
        };
        if !miggate_crds::is_dns_subdomain(name) {
            return Err(format!(
                "{} is not an object name: lowercase letters, digits, '-' and '.', at most 253 characters",
                shown()
            ));
        }
        Ok(CheckpointRef {
            kind,
            name: name.to_string(),
        })
    }
}

impl CheckpointRef {
    /// `Kind namespace/name`, how a report's header names the checkpoint.
    pub fn display(&self, namespace: &str) -> String {
        format!("{} {}/{}", self.kind.as_str(), escape(namespace), self.name)
    }
}

/// The checkpoint named `text` (a [`CheckpointRef`]) in `namespace`, read from the cluster,
/// and how a report names it.
pub fn named_checkpoint(
    flags: &ClusterFlags,
    namespace: &str,
    text: &str,
) -> anyhow::Result<(GpuManifest, String)> {
    let reference: CheckpointRef = text.parse().map_err(|why: String| anyhow!(why))?;
    let manifest = checkpoint(flags, namespace, &reference)?;
    Ok((manifest, reference.display(namespace)))
}

/// The checkpoint `reference` names in `namespace`, read from the cluster and followed as the
/// webhook follows it ([`resolve`]): a `GpuCheckpoint`'s manifest, or the checkpoint a
/// `PodSnapshot`'s content records, held to point back to the snapshot. Unlike the webhook,
/// which admits a restore it cannot compare (the peer's agent still gates it), a question
/// asked here about a snapshot with nothing to compare is an error that says what is missing.
pub fn checkpoint(
    flags: &ClusterFlags,
    namespace: &str,
    reference: &CheckpointRef,
) -> anyhow::Result<GpuManifest> {
    let read = run(flags, |client| async move {
        match reference.kind {
            Kind::GpuCheckpoint => gpu_checkpoint(client, namespace, &reference.name).await,
            Kind::PodSnapshot => pod_snapshot(client, namespace, &reference.name).await,
        }
    })?;
    let followed = Reference {
        kind: reference.kind,
        name: Cow::Borrowed(&reference.name),
    };
    let (ns, name) = (escape(namespace), escape(&reference.name));
    match resolve(&read, namespace, &followed) {
        Resolved::Found { checkpoint } => Ok(checkpoint.manifest.clone()),
        Resolved::Missing => Err(anyhow!("no {} {name} in namespace {ns}", reference.kind.as_str())),
        Resolved::Unchecked(Unresolved::NotServed { .. }) => Err(anyhow!(
            "the cluster does not serve {} PodSnapshots (is NVIDIA Snapshot installed?)",
            miggate_wire::peer::API_VERSION
        )),
        Resolved::Unchecked(Unresolved::Unbound { .. }) => Err(anyhow!(
            "PodSnapshot {ns}/{name} is not bound to a PodSnapshotContent yet (no status.boundSnapshotContentName): \
             nothing records what it was captured on"
        )),
        Resolved::Unchecked(Unresolved::ContentMissing { content, .. }) => Err(anyhow!(
            "PodSnapshot {ns}/{name} is bound to PodSnapshotContent {content}, which does not exist"
        )),
        Resolved::Unchecked(Unresolved::NoSource { content, why, .. }) => Err(anyhow!(
            "PodSnapshotContent {content} of PodSnapshot {ns}/{name} {why}: nothing to compare"
        )),
        Resolved::Foreign(foreign) => Err(anyhow!(
            "PodSnapshot {ns}/{name} is bound to PodSnapshotContent {}, whose spec.snapshotRef names {}, not it: \
             a PodSnapshot restores only its own content",
            foreign.content,
            names_back(foreign.back.as_ref())
        )),
    }
}

/// What a content's `spec.snapshotRef` names, for the CLI's message.
fn names_back(back: Option<&SnapshotRef>) -> String {
    let Some(r) = back else {
        return "no PodSnapshot (it has no spec.snapshotRef)".to_string();
    };
    let uid = r
        .uid
        .as_deref()
        .filter(|u| !u.is_empty())
        .map(|u| format!(" of uid {}", escape(u)))
        .unwrap_or_default();
    format!(
        "PodSnapshot {}/{}{uid}",
        escape(r.namespace.as_deref().unwrap_or("(none)")),
        escape(r.name.as_deref().unwrap_or("(none)"))
    )
}

/// What was read of one checkpoint, held as the webhook's store holds it, so [`resolve`]
/// follows it as the webhook does.
#[derive(Debug)]
struct Read {
    /// The `GpuCheckpoint`, when one was asked for and exists.
    checkpoint: Option<Arc<Checkpoint>>,
    /// The `PodSnapshot` and its content, when one was asked for.
    snapshot: SnapshotLookup,
}

impl Read {
    fn snapshot(snapshot: SnapshotLookup) -> Self {
        Read {
            checkpoint: None,
            snapshot,
        }
    }
}

impl Lookup for Read {
    fn checkpoint(&self, _namespace: &str, _name: &str) -> Option<Arc<Checkpoint>> {
        self.checkpoint.clone()
    }

    fn inventory(&self, _node: &str) -> Result<Inventory, NoInventory> {
        Err(NoInventory::default())
    }

    fn snapshot(&self, _namespace: &str, _name: &str) -> SnapshotLookup {
        self.snapshot.clone()
    }

    fn restore_pod(&self, _namespace: &str, _name: &str) -> Option<Arc<RestorePod>> {
        None
    }
}

async fn gpu_checkpoint(client: kube::Client, namespace: &str, name: &str) -> anyhow::Result<Read> {
    let api: Api<GpuCheckpoint> = Api::namespaced(client, namespace);
    match api.get_opt(name).await {
        Ok(found) => Ok(Read {
            checkpoint: found.map(|c| {
                Arc::new(Checkpoint {
                    manifest: c.spec.manifest,
                    container_name: c.spec.container_name,
                    origin: format!("GpuCheckpoint {namespace}/{name}"),
                })
            }),
            snapshot: SnapshotLookup::NotServed,
        }),
        Err(e) => Err(anyhow!(
            "cannot read GpuCheckpoint {}/{}: {}",
            escape(namespace),
            escape(name),
            words(&e)
        )),
    }
}

/// A `PodSnapshot` and, when it is bound, the `PodSnapshotContent`
/// `status.boundSnapshotContentName` names, as the webhook's caches would hold them.
async fn pod_snapshot(client: kube::Client, namespace: &str, name: &str) -> anyhow::Result<Read> {
    let snap = format!("{}/{}", escape(namespace), escape(name));
    let snapshots: Api<PodSnapshot> = Api::namespaced(client.clone(), namespace);
    let snapshot = match snapshots.get_opt(name).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            // A 404 is both "no such object" and "no such kind": a list tells them apart.
            return Ok(Read::snapshot(
                match snapshots.list(&ListParams::default().limit(1)).await {
                    Err(kube::Error::Api(s)) if s.code == 404 => SnapshotLookup::NotServed,
                    _ => SnapshotLookup::Missing,
                },
            ));
        }
        Err(e) => return Err(anyhow!("cannot read PodSnapshot {snap}: {}", words(&e))),
    };
    let Some(content_name) = snapshot.bound_content() else {
        return Ok(Read::snapshot(SnapshotLookup::Unbound));
    };
    let contents: Api<PodSnapshotContent> = Api::all(client);
    let content = match contents.get_opt(content_name).await {
        Ok(Some(c)) => c,
        Ok(None) => {
            return Ok(Read::snapshot(SnapshotLookup::ContentMissing(
                content_name.to_string(),
            )));
        }
        Err(e) => {
            return Err(anyhow!(
                "cannot read PodSnapshotContent {}: {}",
                escape(content_name),
                words(&e)
            ));
        }
    };
    Ok(Read::snapshot(SnapshotLookup::Bound {
        content: Arc::new(Content::from(SnapshotContent::read(&content))),
        snapshot_uid: snapshot.metadata.uid.clone(),
    }))
}

/// Every node the cluster knows (a `Node` or a `GpuNode`), with its inventory, by name.
pub fn nodes(flags: &ClusterFlags) -> anyhow::Result<Vec<NodeView>> {
    run(flags, |client| async move {
        let gpu_nodes: Vec<GpuNode> = list(Api::all(client.clone()), "GpuNode", true).await?;
        let nodes: Vec<Node> = list(Api::all(client.clone()), "Node", true).await?;
        // A cluster without DRA (Kubernetes before 1.34) serves no ResourceSlices: none, then.
        let slices: Vec<ResourceSlice> = list(Api::all(client), "ResourceSlice", false).await?;
        Ok(inventories(gpu_nodes, nodes, slices))
    })
}

/// One node's inventory.
pub fn node(flags: &ClusterFlags, name: &str) -> anyhow::Result<NodeFacts> {
    run(flags, |client| async move {
        let gpu_node = get::<GpuNode>(Api::all(client.clone()), "GpuNode", name).await?;
        let node = get::<Node>(Api::all(client.clone()), "Node", name).await?;
        let slices: Vec<ResourceSlice> = list_with(
            Api::all(client),
            "ResourceSlice",
            false,
            ListParams::default().fields(&format!("spec.nodeName={name}")),
        )
        .await?;
        if gpu_node.is_none() && node.is_none() && slices.is_empty() {
            return Err(anyhow!(
                "no node {} in the cluster (no Node, GpuNode or ResourceSlice of that name)",
                escape(name)
            ));
        }
        let (inventory, _) = read_node(name, gpu_node.as_ref(), node.as_ref(), &slices);
        Ok((name.to_string(), inventory))
    })
}

/// What the cluster holds of one node: its GpuNode, its Node, its DRA slices.
type Sources = (Option<GpuNode>, Option<Node>, Vec<ResourceSlice>);

/// The inventories of every node named by a `Node` or a `GpuNode`, in name order.
fn inventories(gpu_nodes: Vec<GpuNode>, nodes: Vec<Node>, slices: Vec<ResourceSlice>) -> Vec<NodeView> {
    let mut by_name: BTreeMap<String, Sources> = BTreeMap::new();
    for g in gpu_nodes {
        if let Some(name) = g.metadata.name.clone() {
            by_name.entry(name).or_default().0 = Some(g);
        }
    }
    for n in nodes {
        if let Some(name) = n.metadata.name.clone() {
            by_name.entry(name).or_default().1 = Some(n);
        }
    }
    for s in slices {
        if let Some(name) = s.spec.node_name.clone()
            && let Some(entry) = by_name.get_mut(&name)
        {
            entry.2.push(s);
        }
    }
    by_name
        .into_iter()
        .map(|(name, (g, n, s))| {
            let (inventory, names) = read_node(&name, g.as_ref(), n.as_ref(), &s);
            (name, inventory, names)
        })
        .collect()
}

/// One node's inventory from what the cluster holds of it, as the webhook reads it
/// ([`best_or_why`]), and each DRA device's slice name by UUID.
fn read_node(
    name: &str,
    gpu_node: Option<&GpuNode>,
    node: Option<&Node>,
    slices: &[ResourceSlice],
) -> (
    Result<Inventory, NoInventory>,
    std::collections::HashMap<String, String>,
) {
    let refs: Vec<&ResourceSlice> = slices.iter().collect();
    let inventory = best_or_why(&miggate_inventory::NodeObjects {
        gpu_node,
        node,
        slices: &refs,
    });
    (inventory, miggate_inventory::device_names(name, &refs))
}

async fn get<K>(api: Api<K>, kind: &str, name: &str) -> anyhow::Result<Option<K>>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name)
        .await
        .map_err(|e| anyhow!("cannot read {kind} {}: {}", escape(name), words(&e)))
}

async fn list<K>(api: Api<K>, kind: &str, required: bool) -> anyhow::Result<Vec<K>>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    list_with(api, kind, required, ListParams::default()).await
}

/// Every object of a kind, page by page. A kind the cluster does not serve is an error when
/// `required`, else none.
async fn list_with<K>(api: Api<K>, kind: &str, required: bool, params: ListParams) -> anyhow::Result<Vec<K>>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut out = Vec::new();
    let mut params = params.limit(PAGE);
    for _ in 0..MAX_PAGES {
        let page = match api.list(&params).await {
            Ok(page) => page,
            Err(kube::Error::Api(s)) if s.code == 404 && !required => return Ok(out),
            Err(e) => return Err(anyhow!("cannot list {kind}s: {}", words(&e))),
        };
        out.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(out),
        }
    }
    Err(anyhow!(
        "more than {} {kind}s: not read in part",
        PAGE as usize * MAX_PAGES
    ))
}

/// A client error in words: the API server's message, or what failed to connect.
fn words(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 403 => format!("forbidden: {}", escape(&s.message)),
        kube::Error::Api(s) if s.code == 404 => {
            "the cluster does not serve this kind (are miggate's CRDs installed?)".to_string()
        }
        kube::Error::Api(s) => escape(&s.message).into_owned(),
        other => escape(&other.to_string()).into_owned(),
    }
}

/// Runs `read` with a client for `flags`, on a runtime of its own, within [`TIMEOUT`].
fn run<T, F, Fut>(flags: &ClusterFlags, read: F) -> anyhow::Result<T>
where
    F: FnOnce(kube::Client) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the client's runtime")?;
    runtime.block_on(async {
        let client = miggate_store::cluster::client(flags.args()).await?;
        match tokio::time::timeout(TIMEOUT, read(client)).await {
            Ok(result) => result,
            Err(_) => Err(anyhow!(
                "the cluster did not answer within {} s",
                TIMEOUT.as_secs()
            )),
        }
    })
}

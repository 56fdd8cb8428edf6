//! `where` and `check` reading the cluster, as a kubectl user would ask them to
//! (`miggate where -n team-a ckpt-1`, `miggate check -n team-a ckpt-1 --node gpu-node-7`): a
//! `GpuCheckpoint` by namespace and name, and node inventories through the same sources, in the
//! same order, as the webhook (`miggate_crds::inventory::best_or_why` over the node's `GpuNode`,
//! the DRA driver's `ResourceSlice`s and the `Node` with its GFD labels).
//!
//! Each command reads once (list or get), on a small runtime of its own, and needs only `get`
//! and `list` on those kinds: the webhook's ClusterRole grants them.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, anyhow};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, ListParams};
use miggate_compat::GpuManifest;
use miggate_compat::escape::escape;
use miggate_crds::inventory::{Inventory, NoInventory, best_or_why};
use miggate_crds::{GpuCheckpoint, GpuNode};
use serde::de::DeserializeOwned;

use crate::service::ClusterFlags;

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

/// The checkpoint `namespace/name` from the cluster.
pub fn checkpoint(flags: &ClusterFlags, namespace: &str, name: &str) -> anyhow::Result<GpuManifest> {
    run(flags, |client| async move {
        let api: Api<GpuCheckpoint> = Api::namespaced(client, namespace);
        match api.get_opt(name).await {
            Ok(Some(c)) => Ok(c.spec.manifest),
            Ok(None) => Err(anyhow!(
                "no GpuCheckpoint {} in namespace {}",
                escape(name),
                escape(namespace)
            )),
            Err(e) => Err(anyhow!(
                "cannot read GpuCheckpoint {}/{}: {}",
                escape(namespace),
                escape(name),
                words(&e)
            )),
        }
    })
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
        let refs: Vec<&ResourceSlice> = slices.iter().collect();
        Ok((
            name.to_string(),
            best_or_why(gpu_node.as_ref(), node.as_ref(), &refs),
        ))
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
            let refs: Vec<&ResourceSlice> = s.iter().collect();
            let inventory = best_or_why(g.as_ref(), n.as_ref(), &refs);
            let names = miggate_crds::inventory::device_names(&name, &refs);
            (name, inventory, names)
        })
        .collect()
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
        let client = miggate_webhook::cluster::client(flags.args()).await?;
        match tokio::time::timeout(TIMEOUT, read(client)).await {
            Ok(result) => result,
            Err(_) => Err(anyhow!(
                "the cluster did not answer within {} s",
                TIMEOUT.as_secs()
            )),
        }
    })
}

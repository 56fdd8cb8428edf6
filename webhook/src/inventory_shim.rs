//! SHIM, to be replaced at merge by `miggate_crds::inventory` (written on another branch).
//!
//! Same signature as the real module: `Source`, `Inventory`, `best`. This stand-in reads only
//! the first source (a node's `GpuNode`) and returns `None` otherwise; the real one also reads
//! NVIDIA DRA `ResourceSlice`s and GPU Feature Discovery labels. The webhook calls only
//! [`best`], so swapping the module changes no caller.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use miggate_compat::GpuManifest;
use miggate_crds::GpuNode;

/// Where a node inventory came from, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// The node's `GpuNode`, written by `miggate publish`.
    GpuNode,
    /// The NVIDIA DRA driver's `ResourceSlice`s, with the Node's `nodeInfo`.
    ResourceSlice,
    /// GPU Feature Discovery's node labels (counts only).
    GfdLabels,
}

impl Source {
    /// The name used in messages, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::GpuNode => "GpuNode",
            Source::ResourceSlice => "ResourceSlice",
            Source::GfdLabels => "GFD labels",
        }
    }
}

/// A node's inventory and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Inventory {
    /// The inventory as a manifest body (host and GPU facts).
    pub manifest: GpuManifest,
    /// Which source gave it.
    pub source: Source,
    /// What the source could not say (for warnings).
    pub notes: Vec<String>,
}

/// The best inventory the sources give for one node. SHIM: only the `GpuNode` source.
pub fn best(gpu_node: Option<&GpuNode>, node: Option<&Node>, slices: &[&ResourceSlice]) -> Option<Inventory> {
    let _ = (node, slices);
    gpu_node.map(|g| Inventory {
        manifest: g.spec.manifest.clone(),
        source: Source::GpuNode,
        notes: Vec::new(),
    })
}

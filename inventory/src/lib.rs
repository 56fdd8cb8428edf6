//! A node's GPU inventory, read from whichever source the cluster has, best first:
//!
//! 1. the node's [`GpuNode`] (what `miggate publish` captured: UUIDs, kernel, every fact);
//! 2. the NVIDIA DRA driver's `ResourceSlice`s for the node (driver `gpu.nvidia.com`), with
//!    kernel and architecture from `Node.status.nodeInfo`: static MIG as the slices that
//!    exist, DynamicMIG as what each GPU's shared counters can supply ([`Supply`]);
//! 3. GPU Feature Discovery labels on the `Node`: counts per MIG profile (exact: judged with
//!    [`Inventory::target`], so what the labels cannot tell never masks a shortfall they
//!    state) and whole GPUs, no UUIDs, product names mapped back from GFD's rewritten form.
//!
//! Whichever source is read, a node mig-manager is reconfiguring (`nvidia.com/mig.config.state`
//! other than `success`) keeps only its name: nothing read from it may refuse. A MIG strategy
//! the source does not carry comes from GFD's `nvidia.com/mig.strategy` label.
//!
//! Each gives a node inventory as compat's [`GpuManifest`] (host and nvidia facts, no pod), so
//! the same checks run whatever the source. What a source cannot tell stays absent, which the
//! checks read as *unknown* (admit with a warning), never as a guess that could refuse. A better
//! source that is present but unreadable falls back to the next, with a note saying why, and
//! every [`Inventory`] names its [`Source`] so a decision can say which one it used.
//!
//! A pod's DRA allocation is matched to its node's devices by [`allocated`], and the node's
//! inventory narrowed to them by [`restricted`] (the exact check at binding). Why a source or an
//! allocation cannot be read is an [`Error`], its causes typed in [`error`].
//!
//! Pure: no client, no clock. The webhook hands in what its watch caches hold.

mod allocation;
pub mod error;
mod gfd;
mod gpu_node;
mod note;
mod partitions;
mod product;
mod slices;

use std::borrow::Cow;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use miggate_compat::{GpuManifest, Host, MigStrategy, Target, VersionText};
use miggate_crds::GpuNode;

use crate::error::Unreadable;

pub use allocation::{Allocated, AllocatedDevice, MAX_RESULTS, allocated, device_names, restricted};
pub use error::Error;
pub use gfd::{MAX_GFD_LABELS, from_gfd_labels, is_gpu_node};

pub use gpu_node::from_gpu_node;
pub use note::{MigOff, Note, PassedOver};
pub use partitions::{MAX_COUNTERS, SEARCH_BUDGET, Supply};
pub use product::{gfd_product_name, known_product};
pub use slices::from_resource_slices;

/// Where a node inventory came from, so a decision (and an operator reading it) can tell a
/// captured inventory from one inferred from a driver's slices or a labeller's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// The node's `GpuNode`, written by `miggate publish`: every fact, UUIDs included.
    GpuNode,
    /// The NVIDIA DRA driver's `ResourceSlice`s (static MIG), plus `Node.status.nodeInfo`.
    ResourceSlice,
    /// GPU Feature Discovery's node labels: counts only, no UUIDs.
    GfdLabels,
}

impl Source {
    /// The source as decisions and notes name it: `GpuNode`, `ResourceSlice`, `GFD labels`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::GpuNode => "GpuNode",
            Source::ResourceSlice => "ResourceSlice",
            Source::GfdLabels => "GFD labels",
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node's inventory, the source it came from, and what an operator should know about it
/// (what the source could not tell; why a better source was passed over).
#[derive(Debug, Clone, PartialEq)]
pub struct Inventory {
    /// The inventory as a node manifest: host and nvidia facts, no pod. Shared, so a cache
    /// that keeps an inventory hands it to every decision without a copy.
    pub manifest: Arc<GpuManifest>,
    /// Which source it was read from.
    pub source: Source,
    /// What warnings and logs say of it, each naming the source. The reasons in
    /// `passed_over` come first ([`Note::PassedOver`]).
    pub notes: Vec<Note>,
    /// Why each better source present was passed over (an unreadable `GpuNode`, a DRA pool
    /// mid-update), as the source's error says it: a refusal message names them, since a
    /// decision read from a worse source than the operator expects must say why.
    pub passed_over: Vec<PassedOver>,
    /// Whether the devices list every MIG slice the node has, even where a device's kind is
    /// unknown (GFD's exact counts per profile, over GPUs that have no UUID): judge it with
    /// [`Inventory::target`] so what the source cannot tell never masks a shortfall it states
    /// for certain.
    pub slices_listed: bool,
    /// Under the DRA driver's DynamicMIG: what the node's GPUs can supply on demand. The
    /// manifest then lists no devices; [`Inventory::manifest_for`] gives those a checkpoint
    /// can have.
    pub supply: Option<Arc<Supply>>,
}

impl Inventory {
    /// The inventory to judge `source` against: the manifest, or under DynamicMIG the
    /// manifest with the devices of `source`'s shape the node's counters can hold together
    /// (all of them when it fits). Unknown devices stay unknown.
    pub fn manifest_for(&self, source: &GpuManifest) -> Cow<'_, GpuManifest> {
        let Some(devices) = self.supply.as_deref().and_then(|s| s.devices_for(source)) else {
            return Cow::Borrowed(&*self.manifest);
        };
        let mut m = GpuManifest::clone(&self.manifest);
        if let Some(nvidia) = m.nvidia.as_mut() {
            nvidia.devices = Some(devices);
        }
        Cow::Owned(m)
    }

    /// The inventory as a restore target for compat: a node, with what its source states for
    /// certain ([`Target::with_slices_listed`]). Under DynamicMIG, judge
    /// [`Inventory::manifest_for`] instead: this manifest lists no devices.
    pub fn target(&self) -> Target<'_> {
        Target::node(&self.manifest).with_slices_listed(self.slices_listed)
    }
}

/// Why a node has no inventory: each source that was present but unreadable, with why.
/// Empty when no source says anything about the node's GPUs. An operator told "no
/// inventory" while a `GpuNode` exists would look in the wrong place.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NoInventory {
    /// Each source passed over, best first; each names the source and node when shown.
    pub passed_over: Vec<PassedOver>,
}

impl std::fmt::Display for NoInventory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.passed_over.is_empty() {
            return write!(f, "no GPU inventory ({NO_SOURCE})");
        }
        f.write_str("no usable GPU inventory: ")?;
        for (i, why) in self.passed_over.iter().enumerate() {
            f.write_str(if i == 0 { "" } else { "; " })?;
            why.fmt(f)?;
        }
        Ok(())
    }
}

/// The sources a missing inventory was looked for in, as messages say it.
pub const NO_SOURCE: &str = "no GpuNode, DRA ResourceSlices or GFD labels";

/// The NVIDIA DRA driver's name, in `spec.driver` and as the attributes' domain.
pub use miggate_wire::dra::DRIVER as DRA_DRIVER;
/// The most slices read for one node: the driver writes one per GPU at most (plus one for
/// counters); a pool past this is refused, not read in part.
pub const MAX_SLICES: usize = 64;
/// The most devices read for one node: far above any real node (8 GPUs × 7 slices).
pub const MAX_DEVICES: usize = 1024;

/// How many notes an inventory carries: each is a line in an admission warning or a log.
pub const MAX_NOTES: usize = 8;

/// The objects a node's inventory is read from, one field per kind. A source that reads a new
/// kind adds a field here; a caller that does not watch that kind leaves it at its default,
/// and the source is then simply absent, as for a node without it.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeObjects<'a> {
    /// The node's `GpuNode`, written by `miggate publish`.
    pub gpu_node: Option<&'a GpuNode>,
    /// The node's `Node` object (its name, `status.nodeInfo` and labels).
    pub node: Option<&'a Node>,
    /// `ResourceSlice`s: any may be given; those of other drivers and other nodes are ignored.
    pub slices: &'a [&'a ResourceSlice],
}

impl NodeObjects<'_> {
    /// The node's name: its `Node`'s, else its `GpuNode`'s.
    fn name(&self) -> Option<&str> {
        self.node
            .and_then(|n| n.metadata.name.as_deref())
            .or_else(|| self.gpu_node.and_then(|g| g.metadata.name.as_deref()))
    }
}

/// The inventory of one node from the best source present and readable: its `GpuNode`, else
/// the DRA driver's `ResourceSlice`s for it, else its GFD labels. `None` when no source says
/// anything about the node's GPUs.
///
/// A source that is present but unreadable is passed over with a note on the inventory finally
/// used; when none is left, [`best_or_why`] says why.
pub fn best(objects: &NodeObjects<'_>) -> Option<Inventory> {
    best_or_why(objects).ok()
}

/// [`best`], and when no source is usable, the reasons the sources present were passed over,
/// so a decision can tell "no source at all" from "a `GpuNode` that cannot be read".
pub fn best_or_why(objects: &NodeObjects<'_>) -> Result<Inventory, NoInventory> {
    let mut passed_over: Vec<PassedOver> = Vec::new();
    match best_source(objects, &mut passed_over) {
        Some(inv) => Ok(settle(inv, objects.node)),
        None => {
            passed_over.truncate(MAX_NOTES);
            Err(NoInventory { passed_over })
        }
    }
}

/// The first source present and readable, best first; each one passed over says why.
fn best_source(objects: &NodeObjects<'_>, passed_over: &mut Vec<PassedOver>) -> Option<Inventory> {
    let NodeObjects {
        gpu_node,
        node,
        slices,
    } = *objects;
    if let Some(g) = gpu_node {
        match from_gpu_node(g) {
            Ok(Some(inv)) => return Some(inv),
            Ok(None) => {}
            Err(e) => passed_over.push(PassedOver::Unreadable(Arc::new(e))),
        }
    }
    if let Some(name) = objects.name() {
        match from_resource_slices(name, node, slices) {
            Ok(Some(inv)) => return Some(with_notes(inv, std::mem::take(passed_over))),
            Ok(None) => {}
            Err(e) => passed_over.push(PassedOver::Unreadable(Arc::new(e))),
        }
    }
    if let Some(n) = node {
        match from_gfd_labels(n) {
            Ok(Some(inv)) => return Some(with_notes(inv, std::mem::take(passed_over))),
            Ok(None) => {}
            Err(e) => passed_over.push(PassedOver::Unreadable(Arc::new(e))),
        }
    }
    None
}

/// What the `Node` says about any inventory of it, whichever source gave it:
/// - a node mig-manager is reconfiguring has GPU facts in flux: none of them may refuse
///   ([`reconfiguring`]);
/// - the MIG strategy the cluster publishes (GFD's `nvidia.com/mig.strategy`) fills in one a
///   source does not carry (a `GpuNode` from `miggate publish` run without `--mig-strategy`).
fn settle(inv: Inventory, node: Option<&Node>) -> Inventory {
    let Some(node) = node else {
        return inv;
    };
    if let Some(state) = reconfiguring(node) {
        return in_flux(inv, state);
    }
    let mut inv = inv;
    if let Some(strategy) = label_strategy(node)
        && inv
            .manifest
            .nvidia
            .as_ref()
            .is_some_and(|n| n.mig_strategy.is_none())
        && let Some(nvidia) = Arc::make_mut(&mut inv.manifest).nvidia.as_mut()
    {
        nvidia.mig_strategy = Some(strategy);
    }
    inv
}

/// mig-manager's `nvidia.com/mig.config.state` when it is present and not `success`: the
/// node's MIG layout is being changed (`pending`, `rebooting`) or failed to apply (`failed`),
/// so whatever a source read of its GPUs may no longer, or not yet, be the node's.
pub fn reconfiguring(node: &Node) -> Option<&str> {
    node.metadata
        .labels
        .as_ref()?
        .get(MIG_CONFIG_STATE)
        .map(|s| s.trim())
        .filter(|s| *s != "success")
}

/// mig-manager's label for where it stands.
pub use miggate_wire::nvidia::MIG_CONFIG_STATE;

/// The device plugin's MIG strategy as GFD labels it, when it is one of the three (read as
/// the GFD source reads it).
fn label_strategy(node: &Node) -> Option<MigStrategy> {
    node.metadata
        .labels
        .as_ref()?
        .get(miggate_wire::nvidia::MIG_STRATEGY)?
        .trim()
        .parse()
        .ok()
}

/// An inventory of a node being reconfigured: its node name and nothing else, so every check
/// that reads the node is unknown (a warning) and none refuses; the note says why.
pub(crate) fn in_flux(mut inv: Inventory, state: &str) -> Inventory {
    let node = inv.manifest.host.as_ref().and_then(|h| h.node_name.clone());
    let note = Note::Reconfiguring {
        source: inv.source,
        node: node.clone(),
        state: state.to_string(),
    };
    inv.manifest = Arc::new(GpuManifest {
        host: Some(Host {
            node_name: node,
            ..Host::default()
        }),
        ..GpuManifest::default()
    });
    inv.slices_listed = false;
    inv.supply = None;
    if !inv.notes.contains(&note) {
        inv.notes.insert(0, note);
    }
    inv.notes.truncate(MAX_NOTES);
    inv
}

/// Puts the reasons better sources were passed over first: they matter more than what the
/// chosen source could not tell.
fn with_notes(mut inv: Inventory, passed_over: Vec<PassedOver>) -> Inventory {
    let mut notes: Vec<Note> = passed_over
        .iter()
        .map(|why| Note::PassedOver {
            why: why.clone(),
            used: inv.source,
        })
        .collect();
    notes.append(&mut inv.notes);
    notes.truncate(MAX_NOTES);
    inv.notes = notes;
    inv.passed_over = passed_over;
    inv
}

/// Kernel and architecture from `Node.status.nodeInfo` (the kubelet's `uname -r` and Go
/// architecture, already in Kubernetes naming). Blank values stay unknown.
fn host_from_node(name: &str, node: Option<&Node>) -> Host {
    let info = node
        .and_then(|n| n.status.as_ref())
        .and_then(|s| s.node_info.as_ref());
    let text = |s: Option<&String>| {
        s.map(|s| s.trim())
            .filter(|s| !s.is_empty() && s.len() <= MAX_TEXT_BYTES)
            .map(str::to_string)
    };
    Host {
        node_name: Some(name.to_string()),
        kernel_version: text(info.map(|i| &i.kernel_version)).map(VersionText::new),
        cpu_arch: text(info.map(|i| &i.architecture)),
        ..Host::default()
    }
}

/// The longest text value (a product name, a version, a label value) read from a source;
/// real ones are a few dozen bytes.
pub(crate) const MAX_TEXT_BYTES: usize = 256;

/// The error for a source present but unreadable.
pub(crate) fn unreadable(source: Source, node: &str, why: impl Into<Unreadable>) -> Error {
    Error::Inventory {
        origin: source.as_str(),
        node: node.to_string(),
        why: Box::new(why.into()),
    }
}

/// Outside text quoted in a note or error: escaped and cut (the errors' rule, shared).
pub(crate) use crate::error::quote;

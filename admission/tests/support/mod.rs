//! What several test files of this crate read (`mod support;`): the recorded files under the
//! workspace's `testdata/`, and [`Fake`], the one [`Lookup`] these tests decide over.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionReview};
use miggate_admission::lookup::{
    Checkpoint, ClaimAllocation, Inventory, Lookup, NoInventory, PassedOver, RestorePod, SnapshotLookup,
    Source,
};
use miggate_compat::GpuManifest;
use miggate_inventory::{NodeObjects, best_or_why};
#[allow(unused_imports)] // Not every test binary that includes this module reads testdata.
pub use miggate_testkit::{testdata, testdata_path};

/// The manifest of the stored object (a manifest, a `GpuCheckpoint` or a `GpuNode`) in `rel`.
pub fn manifest(rel: &str) -> GpuManifest {
    miggate_crds::read_stored(&testdata(rel)).unwrap().manifest
}

/// Why node `node`'s `GpuNode` is passed over when it holds the inventory of `captured_on`.
pub fn gpu_node_of(node: &str, captured_on: &str) -> PassedOver {
    let problem = miggate_inventory::error::GpuNodeProblem::OtherNode {
        name: node.to_string(),
        captured_on: captured_on.to_string(),
    };
    PassedOver::Unreadable(Arc::new(miggate_inventory::Error::Inventory {
        origin: Source::GpuNode.as_str(),
        node: node.to_string(),
        why: Box::new(problem.into()),
    }))
}

/// The recorded `pods/binding` review of pod `ml/<pod>` to `node`.
pub fn binding(pod: &str, node: &str) -> AdmissionRequest<DynamicObject> {
    let mut review: serde_json::Value =
        serde_json::from_str(&testdata("admission/binding-create.json")).unwrap();
    review["request"]["name"] = pod.into();
    review["request"]["object"]["metadata"]["name"] = pod.into();
    review["request"]["object"]["target"]["name"] = node.into();
    let review: AdmissionReview<DynamicObject> = serde_json::from_value(review).unwrap();
    review.try_into().unwrap()
}

/// An inventory of `manifest` as `source` gives it, with no notes.
pub fn inventory(manifest: GpuManifest, source: Source) -> Inventory {
    Inventory {
        manifest: Arc::new(manifest),
        source,
        notes: Vec::new(),
        passed_over: Vec::new(),
        slices_listed: false,
        supply: None,
    }
}

/// A store held in maps, keyed `namespace/name` (nodes by name): every fact a decision reads,
/// set by the test that needs it. A node's inventory is the one given in `inventories`, else
/// what its `Node` object and `slices` give through crds' real sources, else none, with the
/// reasons in `unusable`. Snapshots are not served unless `snapshots` is set.
#[derive(Default)]
pub struct Fake {
    /// Whether the store is still listing (not synced).
    pub listing: bool,
    pub checkpoints: HashMap<String, Arc<Checkpoint>>,
    pub inventories: HashMap<String, Inventory>,
    /// `Node` objects, read with the node's `slices` as the kube store reads them.
    pub nodes: HashMap<String, Node>,
    pub slices: HashMap<String, Vec<Arc<ResourceSlice>>>,
    /// Nodes whose sources are present but unreadable, with why.
    pub unusable: HashMap<String, Vec<PassedOver>>,
    pub pods: HashMap<String, Arc<RestorePod>>,
    /// `None`: the store keeps no PodSnapshots; `Some`: a name not in it is missing.
    pub snapshots: Option<HashMap<String, SnapshotLookup>>,
    pub claims: HashMap<String, Arc<ClaimAllocation>>,
    pub keeps_claims: bool,
}

impl Fake {
    /// The checkpoint `ns/name` of `manifest`, taken from `container` when it names one.
    pub fn with_checkpoint(mut self, key: &str, manifest: GpuManifest, container: Option<&str>) -> Self {
        self.checkpoints.insert(
            key.into(),
            Arc::new(Checkpoint {
                manifest,
                container_name: container.map(str::to_string),
                origin: "test".into(),
            }),
        );
        self
    }

    /// Node `name`'s inventory.
    pub fn with_inventory(mut self, name: &str, inventory: Inventory) -> Self {
        self.inventories.insert(name.into(), inventory);
        self
    }

    /// A `Node` object and the DRA driver's slices of it, named by the object.
    pub fn with_node(mut self, node: Node, slices: Vec<ResourceSlice>) -> Self {
        let name = node.metadata.name.clone().unwrap();
        self.slices
            .insert(name.clone(), slices.into_iter().map(Arc::new).collect());
        self.nodes.insert(name, node);
        self
    }

    /// The restore pod `ns/name`.
    pub fn with_pod(mut self, key: &str, pod: RestorePod) -> Self {
        self.pods.insert(key.into(), Arc::new(pod));
        self
    }

    /// The PodSnapshot `ns/name` as a lookup finds it; the store serves PodSnapshots from now.
    pub fn with_snapshot(mut self, key: &str, found: SnapshotLookup) -> Self {
        self.snapshots
            .get_or_insert_with(HashMap::new)
            .insert(key.into(), found);
        self
    }
}

impl Lookup for Fake {
    fn synced(&self) -> bool {
        !self.listing
    }
    fn checkpoint(&self, ns: &str, name: &str) -> Option<Arc<Checkpoint>> {
        self.checkpoints.get(&format!("{ns}/{name}")).cloned()
    }
    fn inventory(&self, node: &str) -> Result<Inventory, NoInventory> {
        if let Some(inventory) = self.inventories.get(node) {
            return Ok(inventory.clone());
        }
        if let Some(object) = self.nodes.get(node) {
            let held = self.slices(node);
            let slices: Vec<&ResourceSlice> = held.iter().map(|s| &**s).collect();
            return best_or_why(&NodeObjects {
                gpu_node: None,
                node: Some(object),
                slices: &slices,
            });
        }
        Err(NoInventory {
            passed_over: self.unusable.get(node).cloned().unwrap_or_default(),
        })
    }
    fn snapshot(&self, ns: &str, name: &str) -> SnapshotLookup {
        match &self.snapshots {
            None => SnapshotLookup::NotServed,
            Some(all) => all
                .get(&format!("{ns}/{name}"))
                .cloned()
                .unwrap_or(SnapshotLookup::Missing),
        }
    }
    fn restore_pod(&self, ns: &str, name: &str) -> Option<Arc<RestorePod>> {
        self.pods.get(&format!("{ns}/{name}")).cloned()
    }
    fn claim(&self, ns: &str, name: &str) -> Option<Arc<ClaimAllocation>> {
        self.claims.get(&format!("{ns}/{name}")).cloned()
    }
    fn keeps_claims(&self) -> bool {
        self.keeps_claims
    }
    fn slices(&self, node: &str) -> Vec<Arc<ResourceSlice>> {
        self.slices.get(node).cloned().unwrap_or_default()
    }
}

//! Every kind the kube store watches (but pods, [`WatchedPod`]) as its watch reads it:
//! only the fields a decision judges, so what the webhook holds, and allocates while it lists,
//! is bounded by those fields and not by what an object's writers add beside them.
//!
//! Each type below reads the same JSON as the Kubernetes type it stands for and names only the
//! fields kept; serde skips every other field unread ([`IgnoredAny`]: no value is built, a
//! string is scanned, not copied). Metadata keeps the name, namespace, UID and
//! `resourceVersion` (the watch resumes from it); annotations, `managedFields` and owner
//! references are skipped, and labels too, but for a `Node`'s `nvidia.com/` ones, which GPU
//! Feature Discovery writes and the inventory reads (`NvidiaOnly`).
//!
//! A `ResourceClaim` or a `PodSnapshot` is any tenant's to write: 256 KiB of annotations and a
//! large spec each, by the hundred, cost a list's passing page here, never a cache entry. What
//! each kind keeps:
//!
//! | kind | kept |
//! |---|---|
//! | `GpuCheckpoint` | `spec.manifest`, `spec.containerName` |
//! | `GpuNode` | `spec`, `status` (its `Recovered` condition) |
//! | `Node` | `nvidia.com/` labels, `nvidia.com/` capacity and allocatable, `nodeInfo` kernel and architecture |
//! | `ResourceSlice` | `spec` (the driver's devices) |
//! | `ResourceClaim` | `status.allocation.devices.results` (request, driver, pool, device) |
//! | `PodSnapshot` | `status.boundSnapshotContentName` |
//! | `PodSnapshotContent` | `spec.snapshotRef`, `spec.source`, `status.source` |

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::api::core::v1::{Node, NodeStatus, NodeSystemInfo};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice, ResourceSliceSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use miggate_compat::GpuManifest;
use miggate_crds::peer::{
    PodSnapshot, PodSnapshotContent, PodSnapshotContentSpec, PodSnapshotContentStatus, PodSnapshotStatus,
};
use miggate_crds::{GpuCheckpoint, GpuNode, GpuNodeSpec, GpuNodeStatus};
use miggate_inventory::{MAX_GFD_LABELS, MIG_CONFIG_STATE};
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};

/// A pod as the pod watch reads it (its own module: what a restore pod's binding reads).
pub use crate::kube_store::watched_pod::WatchedPod;

/// The metadata every kind is keyed and resumed by.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
}

impl From<WireMeta> for ObjectMeta {
    fn from(m: WireMeta) -> Self {
        ObjectMeta {
            name: m.name,
            namespace: m.namespace,
            uid: m.uid,
            resource_version: m.resource_version,
            ..ObjectMeta::default()
        }
    }
}

/// `metadata` read lean: `null` or absent is empty, as k8s-openapi reads it.
fn lean_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    Ok(Option::<WireMeta>::deserialize(d)?.unwrap_or_default().into())
}

/// Each lean type is its kind on the wire: kind, group, version, plural and scope are the
/// real type's, so the watch asks for the same URL.
macro_rules! on_the_wire_as {
    ($lean:ty, $real:ty) => {
        impl Resource for $lean {
            type DynamicType = ();
            type Scope = <$real as Resource>::Scope;

            fn kind(dt: &()) -> Cow<'_, str> {
                <$real as Resource>::kind(dt)
            }
            fn group(dt: &()) -> Cow<'_, str> {
                <$real as Resource>::group(dt)
            }
            fn version(dt: &()) -> Cow<'_, str> {
                <$real as Resource>::version(dt)
            }
            fn plural(dt: &()) -> Cow<'_, str> {
                <$real as Resource>::plural(dt)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

/// A `GpuCheckpoint`: its manifest and the container it was taken from.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct WatchedCheckpoint {
    /// Name, namespace, UID, `resourceVersion`.
    #[serde(default, deserialize_with = "lean_meta")]
    pub metadata: ObjectMeta,
    /// `spec.manifest` and `spec.containerName`; `None` when the object has no spec.
    #[serde(default)]
    pub spec: Option<CheckpointSpec>,
}
on_the_wire_as!(WatchedCheckpoint, GpuCheckpoint);
// A pod is read as `WatchedPod` (`crate::kube_store::watched_pod`), on the wire a `Pod`.
on_the_wire_as!(WatchedPod, k8s_openapi::api::core::v1::Pod);

/// What a `GpuCheckpoint`'s spec gives a decision (its `summary` is for `kubectl get`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointSpec {
    /// `spec.manifest`.
    pub manifest: GpuManifest,
    /// `spec.containerName`.
    #[serde(default)]
    pub container_name: Option<String>,
}

/// A `GpuNode`: its spec (the manifest) and status (boot recovery's condition).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct WatchedGpuNode {
    /// Name, UID, `resourceVersion`.
    #[serde(default, deserialize_with = "lean_meta")]
    pub metadata: ObjectMeta,
    /// `spec`; `None` when the object has none.
    #[serde(default)]
    pub spec: Option<GpuNodeSpec>,
    /// `status`.
    #[serde(default)]
    pub status: Option<GpuNodeStatus>,
}
on_the_wire_as!(WatchedGpuNode, GpuNode);

impl WatchedGpuNode {
    /// The `GpuNode` the inventory reads; `None` without a spec.
    pub fn into_gpu_node(self) -> Option<GpuNode> {
        Some(GpuNode {
            metadata: self.metadata,
            spec: self.spec?,
            status: self.status,
        })
    }
}

/// A `Node`: what GPU Feature Discovery and the kubelet say of its GPUs and host.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WatchedNode {
    /// Name, UID, `resourceVersion`, and its `nvidia.com/` labels.
    pub metadata: ObjectMeta,
    /// `nodeInfo` (kernel, architecture), `nvidia.com/` capacity and allocatable.
    pub status: Option<NodeStatus>,
}
on_the_wire_as!(WatchedNode, Node);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireNodeMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    labels: NvidiaOnly<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireNodeStatus {
    #[serde(default)]
    node_info: Option<WireNodeInfo>,
    #[serde(default)]
    capacity: NvidiaOnly<Quantity>,
    #[serde(default)]
    allocatable: NvidiaOnly<Quantity>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireNodeInfo {
    #[serde(default)]
    kernel_version: String,
    #[serde(default)]
    architecture: String,
}

#[derive(Deserialize)]
struct WireNode {
    #[serde(default)]
    metadata: Option<WireNodeMeta>,
    #[serde(default)]
    status: Option<WireNodeStatus>,
}

impl<'de> Deserialize<'de> for WatchedNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let wire = WireNode::deserialize(d)?;
        let metadata = wire.metadata.map_or_else(ObjectMeta::default, |m| ObjectMeta {
            name: m.name,
            uid: m.uid,
            resource_version: m.resource_version,
            labels: m.labels.into_map(),
            ..ObjectMeta::default()
        });
        let status = wire.status.map(|s| NodeStatus {
            node_info: s.node_info.map(|i| NodeSystemInfo {
                kernel_version: i.kernel_version,
                architecture: i.architecture,
                ..NodeSystemInfo::default()
            }),
            capacity: s.capacity.into_map(),
            allocatable: s.allocatable.into_map(),
            ..NodeStatus::default()
        });
        Ok(WatchedNode { metadata, status })
    }
}

impl WatchedNode {
    /// The `Node` the inventory reads.
    pub fn into_node(self) -> Node {
        Node {
            metadata: self.metadata,
            spec: None,
            status: self.status,
        }
    }
}

/// The prefix of the keys [`NvidiaOnly`] keeps.
const NVIDIA: &str = "nvidia.com/";

/// Keys kept past the bound: the inventory reads them on every source, not only GFD's.
const ALWAYS_KEPT: [&str; 2] = [MIG_CONFIG_STATE, miggate_wire::nvidia::MIG_STRATEGY];

/// A map of which only the `nvidia.com/` keys are kept, at most [`MAX_GFD_LABELS`] + 1 of them
/// (enough for the GFD reader to refuse a node past its bound, as it would the whole map),
/// with [`ALWAYS_KEPT`] kept past that; every other key is compared in place and its value
/// skipped unread. `null` is an empty map.
#[derive(Debug)]
struct NvidiaOnly<V>(BTreeMap<String, V>);

impl<V> Default for NvidiaOnly<V> {
    fn default() -> Self {
        NvidiaOnly(BTreeMap::new())
    }
}

impl<V> NvidiaOnly<V> {
    /// The kept entries, `None` when there are none (as a map absent reads).
    fn into_map(self) -> Option<BTreeMap<String, V>> {
        (!self.0.is_empty()).then_some(self.0)
    }
}

/// A map key, allocated only when it is one to keep.
struct NvidiaKey(Option<String>);

impl<'de> Deserialize<'de> for NvidiaKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = NvidiaKey;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }

            fn visit_str<E: de::Error>(self, key: &str) -> Result<NvidiaKey, E> {
                Ok(NvidiaKey(key.starts_with(NVIDIA).then(|| key.to_owned())))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for NvidiaOnly<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct MapVisitor<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for MapVisitor<V> {
            type Value = NvidiaOnly<V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NvidiaOnly<V>, A::Error> {
                let mut kept = BTreeMap::new();
                while let Some(NvidiaKey(key)) = map.next_key()? {
                    match key {
                        Some(key) if kept.len() <= MAX_GFD_LABELS || ALWAYS_KEPT.contains(&key.as_str()) => {
                            let value = map.next_value::<V>()?;
                            kept.insert(key, value);
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(NvidiaOnly(kept))
            }

            fn visit_unit<E: de::Error>(self) -> Result<NvidiaOnly<V>, E> {
                Ok(NvidiaOnly::default())
            }

            fn visit_none<E: de::Error>(self) -> Result<NvidiaOnly<V>, E> {
                Ok(NvidiaOnly::default())
            }

            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<NvidiaOnly<V>, D::Error> {
                d.deserialize_map(self)
            }
        }
        d.deserialize_option(MapVisitor(PhantomData))
    }
}

/// A `ResourceSlice` of the NVIDIA DRA driver: its spec, the devices the inventory reads.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct WatchedSlice {
    /// Name, UID, `resourceVersion`.
    #[serde(default, deserialize_with = "lean_meta")]
    pub metadata: ObjectMeta,
    /// `spec`.
    #[serde(default)]
    pub spec: ResourceSliceSpec,
}
on_the_wire_as!(WatchedSlice, ResourceSlice);

impl WatchedSlice {
    /// The `ResourceSlice` the inventory reads.
    pub fn into_slice(self) -> ResourceSlice {
        ResourceSlice {
            metadata: self.metadata,
            spec: self.spec,
        }
    }
}

/// A `ResourceClaim`: the devices it was allocated, nothing of its spec.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct WatchedClaim {
    /// Name, namespace, UID, `resourceVersion`.
    #[serde(default, deserialize_with = "lean_meta")]
    pub metadata: ObjectMeta,
    /// `status.allocation`, when the scheduler allocated the claim.
    #[serde(default)]
    pub status: Option<ClaimStatus>,
}
on_the_wire_as!(WatchedClaim, ResourceClaim);

/// `ResourceClaim.status`: its allocation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ClaimStatus {
    /// `allocation`.
    #[serde(default)]
    pub allocation: Option<ClaimAllocated>,
}

/// `status.allocation`: its devices.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ClaimAllocated {
    /// `devices`.
    #[serde(default)]
    pub devices: Option<ClaimDevices>,
}

/// `status.allocation.devices`: one result per device allocated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ClaimDevices {
    /// `results`.
    #[serde(default)]
    pub results: Option<Vec<ClaimResult>>,
}

/// One device allocated: the request it serves and the device, by driver, pool and name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ClaimResult {
    /// `request`.
    #[serde(default)]
    pub request: String,
    /// `driver`.
    #[serde(default)]
    pub driver: String,
    /// `pool`.
    #[serde(default)]
    pub pool: String,
    /// `device`.
    #[serde(default)]
    pub device: String,
}

/// A `PodSnapshot`: the content it is bound to, and its UID (which the content's back-pointer
/// records).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct WatchedSnapshot {
    /// Name, namespace, UID, `resourceVersion`.
    #[serde(default, deserialize_with = "lean_meta")]
    pub metadata: ObjectMeta,
    /// `status.boundSnapshotContentName`.
    #[serde(default)]
    pub status: Option<PodSnapshotStatus>,
}
on_the_wire_as!(WatchedSnapshot, PodSnapshot);

/// A `PodSnapshotContent`: its back-pointer, its source's captured container and its
/// `status.source` (the checkpoint's facts).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct WatchedContent {
    /// Name, UID, `resourceVersion`.
    #[serde(default, deserialize_with = "lean_meta")]
    pub metadata: ObjectMeta,
    /// `spec.snapshotRef` and `spec.source`.
    #[serde(default)]
    pub spec: Option<PodSnapshotContentSpec>,
    /// `status.source`.
    #[serde(default)]
    pub status: Option<PodSnapshotContentStatus>,
}
on_the_wire_as!(WatchedContent, PodSnapshotContent);

impl WatchedContent {
    /// The `PodSnapshotContent` the peer's reader reads.
    pub fn into_content(self) -> PodSnapshotContent {
        PodSnapshotContent {
            metadata: self.metadata,
            spec: self.spec,
            status: self.status,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    /// `thin` with what a tenant or another writer adds beside the fields judged: 256 KiB of
    /// annotations in 64 keys, foreign labels, managed fields, owner references, and a big
    /// unrelated field in the spec and the status.
    fn fatten(mut thin: Value) -> Value {
        let meta = thin["metadata"].as_object_mut().unwrap();
        let annotations: serde_json::Map<String, Value> = (0..64)
            .map(|i| {
                (
                    format!("tenant.example/blob-{i}"),
                    json!("x".repeat(4 * 1024 - 32)),
                )
            })
            .collect();
        let kept = meta.entry("annotations").or_insert_with(|| json!({}));
        kept.as_object_mut().unwrap().extend(annotations);
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        for i in 0..200 {
            labels[format!("tenant.example/l-{i}")] = json!("v".repeat(63));
        }
        meta.insert(
            "managedFields".into(),
            json!([{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:annotations": {"f:x": {}}}, "f:blob": "m".repeat(64 * 1024)}}]),
        );
        meta.insert(
            "ownerReferences".into(),
            json!([{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}]),
        );
        meta.insert("finalizers".into(), json!(["tenant.example/keep"]));
        for part in ["spec", "status"] {
            let object = thin.as_object_mut().unwrap();
            let section = object.entry(part).or_insert_with(|| json!({}));
            section["tenantBlob"] = json!({"nested": ["s".repeat(128 * 1024), {"deep": [1, null, true]}]});
        }
        thin
    }

    fn same_when_fat<T: DeserializeOwned + PartialEq + std::fmt::Debug>(thin: Value) -> T {
        let fat = fatten(thin.clone());
        let fat_text = fat.to_string();
        assert!(fat_text.len() > 400 * 1024, "{}", fat_text.len());
        let lean_thin: T = serde_json::from_value(thin).unwrap();
        let lean_fat: T = serde_json::from_str(&fat_text).unwrap();
        assert_eq!(lean_fat, lean_thin);
        // What is kept is the fields judged, a few hundred bytes of a 400 KiB object.
        assert!(format!("{lean_fat:?}").len() < 2048, "{lean_fat:?}");
        lean_fat
    }

    fn meta(name: &str, namespace: Option<&str>) -> Value {
        let mut m = json!({"name": name, "uid": format!("uid-{name}"), "resourceVersion": "42"});
        if let Some(ns) = namespace {
            m["namespace"] = json!(ns);
        }
        m
    }

    #[test]
    fn a_fat_claim_reads_as_a_thin_one() {
        let claim: WatchedClaim = same_when_fat(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta("c", Some("ml")),
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "mig.nvidia.com"}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0-mig-1"}]}},
                "reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}}));
        assert_eq!(claim.metadata.uid.as_deref(), Some("uid-c"));
        assert_eq!(claim.metadata.resource_version.as_deref(), Some("42"));
        let results = claim
            .status
            .unwrap()
            .allocation
            .unwrap()
            .devices
            .unwrap()
            .results
            .unwrap();
        assert_eq!(results[0].device, "gpu-0-mig-1");
    }

    #[test]
    fn a_fat_snapshot_reads_as_a_thin_one() {
        let snapshot: WatchedSnapshot = same_when_fat(json!({
            "apiVersion": "nvidia.com/v1alpha1", "kind": "PodSnapshot", "metadata": meta("s", Some("ml")),
            "spec": {"source": {"podRef": {"name": "p", "containers": ["engine"]}}},
            "status": {"boundSnapshotContentName": "c-1", "conditions": [{"type": "Ready", "status": "True"}]}}));
        assert_eq!(snapshot.metadata.uid.as_deref(), Some("uid-s"));
        assert_eq!(snapshot.status.unwrap().bound_content(), Some("c-1"));
    }

    #[test]
    fn a_fat_content_reads_as_a_thin_one() {
        let content: WatchedContent = same_when_fat(json!({
            "apiVersion": "nvidia.com/v1alpha1", "kind": "PodSnapshotContent", "metadata": meta("c-1", None),
            "spec": {"snapshotRef": {"namespace": "ml", "name": "s", "uid": "uid-s"},
                "source": {"nodeName": "n1", "podRef": {"name": "p", "uid": "pu", "containers": ["engine"]}}},
            "status": {"source": {"node": {"name": "n1"}}, "conditions": [{"type": "Ready", "status": "True"}]}}));
        let back = content.spec.unwrap().snapshot_ref.unwrap();
        assert_eq!(back.uid.as_deref(), Some("uid-s"));
    }

    #[test]
    fn a_fat_checkpoint_reads_as_a_thin_one() {
        let checkpoint: WatchedCheckpoint = same_when_fat(json!({
            "apiVersion": "miggate.io/v1alpha1", "kind": "GpuCheckpoint", "metadata": meta("ck", Some("ml")),
            "spec": {"containerName": "vllm", "manifest": {"host": {"cpuArch": "amd64"}},
                "summary": {"gpus": "1x H100"}}}));
        assert_eq!(checkpoint.spec.unwrap().container_name.as_deref(), Some("vllm"));
    }

    #[test]
    fn a_fat_gpu_node_reads_as_a_thin_one() {
        let gpu_node: WatchedGpuNode = same_when_fat(json!({
            "apiVersion": "miggate.io/v1alpha1", "kind": "GpuNode", "metadata": meta("n1", None),
            "spec": {"observedAt": "2026-01-01T00:00:00Z", "manifest": {"host": {"nodeName": "n1"}}},
            "status": {"conditions": [{"type": "Recovered", "status": "True", "reason": "Ready",
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}));
        assert!(gpu_node.into_gpu_node().is_some());
    }

    #[test]
    fn a_fat_slice_reads_as_a_thin_one() {
        let slice: WatchedSlice = same_when_fat(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": meta("n1-gpu", None),
            "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}]}}));
        assert_eq!(slice.spec.node_name.as_deref(), Some("n1"));
    }

    #[test]
    fn a_fat_node_reads_as_a_thin_one_with_its_nvidia_labels() {
        let node: WatchedNode = same_when_fat(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "resourceVersion": "7",
                "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/mig.strategy": "mixed",
                    "kubernetes.io/hostname": "n1"}},
            "status": {"nodeInfo": {"kernelVersion": "6.8.0", "architecture": "amd64", "machineID": "m", "osImage": "x"},
                "capacity": {"cpu": "64", "nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "8", "memory": "1Ti"},
                "images": [{"names": ["registry.example/big:1"], "sizeBytes": 1}]}}));
        let node = node.into_node();
        let labels = node.metadata.labels.unwrap();
        assert_eq!(
            labels.keys().collect::<Vec<_>>(),
            ["nvidia.com/gpu.product", "nvidia.com/mig.strategy"]
        );
        let status = node.status.unwrap();
        assert_eq!(status.node_info.unwrap().kernel_version, "6.8.0");
        assert_eq!(
            status.capacity.unwrap().keys().collect::<Vec<_>>(),
            ["nvidia.com/gpu"]
        );
        assert_eq!(
            status.allocatable.unwrap().keys().collect::<Vec<_>>(),
            ["nvidia.com/gpu"]
        );
    }

    /// A node's `nvidia.com/` labels are kept to one past the GFD reader's bound (so it still
    /// refuses such a node), and mig-manager's state and the MIG strategy past that.
    #[rstest]
    #[case::within(MAX_GFD_LABELS, MAX_GFD_LABELS + 2)]
    #[case::past(MAX_GFD_LABELS + 100, MAX_GFD_LABELS + 1 + 2)]
    fn a_node_s_nvidia_labels_are_bounded(#[case] many: usize, #[case] kept: usize) {
        // The two last, whether the map keeps its keys in order or as inserted.
        let mut labels = serde_json::Map::new();
        for i in 0..many {
            labels.insert(format!("nvidia.com/a-{i:05}"), json!("1"));
        }
        labels.insert(MIG_CONFIG_STATE.into(), json!("pending"));
        labels.insert("nvidia.com/mig.strategy".into(), json!("single"));
        let node: WatchedNode =
            serde_json::from_value(json!({"metadata": {"name": "n1", "labels": labels}})).unwrap();
        let labels = node.metadata.labels.unwrap();
        assert_eq!(labels.len(), kept);
        assert_eq!(labels.get(MIG_CONFIG_STATE).map(String::as_str), Some("pending"));
        assert_eq!(
            labels.get("nvidia.com/mig.strategy").map(String::as_str),
            Some("single")
        );
    }

    #[rstest]
    #[case::null_metadata(json!({"metadata": null, "status": null}))]
    #[case::no_metadata(json!({}))]
    #[case::null_maps(json!({"metadata": {"name": "n1", "labels": null, "annotations": null},
        "status": {"capacity": null, "nodeInfo": null}}))]
    fn absent_and_null_read_as_k8s_openapi_reads_them(#[case] node: Value) {
        let lean: WatchedNode = serde_json::from_value(node.clone()).unwrap();
        let full: Node = serde_json::from_value(node).unwrap();
        assert_eq!(lean.metadata.name, full.metadata.name);
        assert_eq!(lean.metadata.labels, None);
        assert_eq!(lean.status.and_then(|s| s.capacity), None);
    }

    #[test]
    fn each_is_its_kind_on_the_wire() {
        fn same<L: Resource<DynamicType = ()>, R: Resource<DynamicType = ()>>() {
            assert_eq!(L::url_path(&(), Some("ml")), R::url_path(&(), Some("ml")));
            assert_eq!(L::kind(&()), R::kind(&()));
            assert_eq!(L::api_version(&()), R::api_version(&()));
        }
        same::<WatchedCheckpoint, GpuCheckpoint>();
        same::<WatchedGpuNode, GpuNode>();
        same::<WatchedNode, Node>();
        same::<WatchedSlice, ResourceSlice>();
        same::<WatchedClaim, ResourceClaim>();
        same::<WatchedSnapshot, PodSnapshot>();
        same::<WatchedContent, PodSnapshotContent>();
    }
}

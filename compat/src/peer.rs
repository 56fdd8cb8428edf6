//! The Go peer's artifacts (ai-dynamo/snapshot) read as manifests: its checkpoint
//! `manifest.yaml` and its `PodSnapshotContent.status.source`.
//!
//! Checkpoints taken by the peer's agent carry no miggate manifest, only these. Reading them
//! where a manifest is read lets a cluster that moves to miggate keep restoring, and gate, the
//! checkpoints it already has. The translation is field by field (`docs/interop.md`): what the
//! peer did not record stays absent (unknown), nothing is guessed, and a warning in the
//! manifest names the translation so nobody mistakes it for a capture of miggate's.
//!
//! Pure: the reader ([`crate::from_str`]) parses the text into the types here, by shape, and
//! this module turns them into a [`GpuManifest`].

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};

use crate::Error;
use crate::checks::reduce_digest;
use crate::manifest::{API_VERSION, Device, GpuManifest, Host, Nvidia, Pod};
use crate::profile::MigProfile;
use crate::quantity::Quantity;
use crate::text::VersionText;
use crate::uuid::{DeviceUuid, UuidForm};
use crate::warning::Warning;

/// Which of the peer's artifacts a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// The checkpoint `manifest.yaml` the peer's agent writes beside a checkpoint.
    Manifest,
    /// A whole `PodSnapshotContent` object (`kubectl get -o yaml`).
    SnapshotContent,
    /// A `PodSnapshotContent`'s `status.source` alone (`-o jsonpath='{.status.source}'`).
    Source,
}

// Top-level keys, as bits.
const CREATED_AT: u16 = 1;
const K8S: u16 = 1 << 1;
const CRIU_DUMP: u16 = 1 << 2;
const CUDA_RESTORE: u16 = 1 << 3;
const ARTIFACT: u16 = 1 << 4;
const NODE: u16 = 1 << 5;
const DEVICES: u16 = 1 << 6;
const POD: u16 = 1 << 7;
const HOST: u16 = 1 << 8;
/// Keys only a miggate manifest has: a document with one of them is not the peer's.
const MIGGATE_ONLY: u16 = 1 << 9;
const OTHER: u16 = 1 << 10;
/// `nvidia`: miggate's manifest has it, and so has the peer's vendor-keyed `status.source`.
const NVIDIA: u16 = 1 << 11;
/// `type`: the peer's vendor-keyed `status.source` names its vendor with it.
const TYPE: u16 = 1 << 12;

fn bit(key: &str) -> u16 {
    match key {
        "createdAt" => CREATED_AT,
        "k8s" => K8S,
        "criuDump" => CRIU_DUMP,
        "cudaRestore" => CUDA_RESTORE,
        "artifact" => ARTIFACT,
        "node" => NODE,
        "devices" => DEVICES,
        "pod" => POD,
        "host" => HOST,
        "capturedAt" | "capturedBy" | "warnings" => MIGGATE_ONLY,
        "nvidia" => NVIDIA,
        "type" => TYPE,
        // The peer's manifest has more top-level keys that no check needs.
        "overlay" | "cudaTools" | "cuinterpose" => ARTIFACT,
        _ => OTHER,
    }
}

/// A document's top-level keys and envelope, read without reading the values, to tell its
/// shape. Any failure (not a mapping, a non-text `kind`) means "not the peer's".
#[derive(Debug, Default)]
pub(crate) struct Keys {
    api_version: Option<String>,
    kind: Option<String>,
    keys: u16,
}

impl<'de> Deserialize<'de> for Keys {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Keys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let mut out = Keys::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "apiVersion" => out.api_version = Some(map.next_value()?),
                        "kind" => out.kind = Some(map.next_value()?),
                        other => {
                            out.keys |= bit(other);
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

impl Keys {
    /// The peer artifact the document is, by shape; `None` for anything else (a miggate
    /// manifest, a Pod, `{}`), which the manifest reader then reports as it always has.
    pub(crate) fn shape(&self) -> Option<Shape> {
        let has = |bits: u16| self.keys & bits != 0;
        match (self.api_version.as_deref(), self.kind.as_deref()) {
            (Some(API_VERSION), _) => None,
            (_, Some("PodSnapshotContent")) => Some(Shape::SnapshotContent),
            (None, None)
                if has(CREATED_AT | K8S | CRIU_DUMP | CUDA_RESTORE) && !has(MIGGATE_ONLY | NVIDIA) =>
            {
                Some(Shape::Manifest)
            }
            (None, None) if has(NODE | DEVICES) && !has(!(NODE | DEVICES | POD)) => Some(Shape::Source),
            (None, None) if has(TYPE) && !has(!(TYPE | NVIDIA)) => Some(Shape::Source),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The peer's checkpoint manifest.yaml (`agent/internal/types/manifest.go`)

/// The fields of the peer's `manifest.yaml` that carry restore facts; the rest are skipped.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct PeerManifest {
    created_at: Option<String>,
    host: Option<PeerHost>,
    k8s: Option<K8s>,
    criu_dump: Option<CriuDump>,
    cuda_restore: Option<CudaRestore>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct PeerHost {
    kernel_version: Option<VersionText>,
    cpu_arch: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct K8s {
    source_node: Option<String>,
    image: Option<String>,
    image_id: Option<String>,
    cpu_limit: Option<Quantity>,
    memory_limit: Option<Quantity>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct CriuDump {
    ext_mnt: Option<BTreeMap<String, IgnoredAny>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct CudaRestore {
    source_gpu_uuids: Option<Vec<DeviceUuid>>,
    source_gpus: Option<Vec<SourceGpu>>,
    source_driver_version: Option<VersionText>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct SourceGpu {
    uuid: Option<DeviceUuid>,
    product_name: Option<String>,
    mig_profile: Option<MigProfile>,
}

/// Text that is blank is not recorded (Go writes empty strings for unknowns).
fn present(text: Option<String>) -> Option<String> {
    text.filter(|t| !t.trim().is_empty())
}

/// A device from a UUID the peer recorded: a legacy `MIG-GPU-<parent>/<gi>/<ci>` UUID says
/// its parent and instance ids, which are kept; nothing else is guessed.
fn device(uuid: Option<DeviceUuid>, product_name: Option<String>, mig_profile: Option<MigProfile>) -> Device {
    let mut d = Device {
        product_name: present(product_name),
        mig_profile,
        ..Device::default()
    };
    if let Some(u) = &uuid
        && let UuidForm::LegacyMig {
            gpu_instance,
            compute_instance,
        } = u.form()
    {
        d.parent_uuid = u.legacy_gpu_instance().and_then(|(p, _)| p.parse().ok());
        d.gpu_instance_id = Some(gpu_instance);
        d.compute_instance_id = Some(compute_instance);
    }
    d.uuid = uuid;
    d
}

/// The peer's checkpoint `manifest.yaml` as a miggate manifest (`docs/interop.md` has the
/// mapping). Infallible: every value was validated as it was read (UUIDs above all).
pub(crate) fn from_manifest(p: PeerManifest) -> GpuManifest {
    let mut warnings = vec![Warning::PeerManifest];
    let k8s = p.k8s.unwrap_or_default();
    let source_node = present(k8s.source_node);
    let host = match p.host {
        Some(h) => Some(Host {
            node_name: source_node,
            kernel_version: h.kernel_version,
            cpu_arch: present(h.cpu_arch),
            ..Host::default()
        }),
        None => source_node.map(|n| Host {
            node_name: Some(n),
            ..Host::default()
        }),
    };
    let image_digest = present(k8s.image_id).map(|id| match reduce_digest(&id) {
        Some(digest) => digest,
        None => {
            warnings.push(Warning::PeerImageIdWithoutDigest { image_id: id.clone() });
            id
        }
    });
    // The peer's dump always records criuDump; Go leaves an empty extMnt out, so a dump without
    // one externalized no mount.
    let mounts = p
        .criu_dump
        .map(|c| c.ext_mnt.unwrap_or_default().into_keys().collect::<Vec<_>>());
    let any_pod = k8s.image.is_some()
        || image_digest.is_some()
        || k8s.cpu_limit.is_some()
        || k8s.memory_limit.is_some()
        || mounts.is_some();
    let pod = any_pod.then(|| Pod {
        image: present(k8s.image),
        image_digest,
        cpu_limit: k8s.cpu_limit,
        memory_limit: k8s.memory_limit,
        mounts,
        ..Pod::default()
    });
    // No cudaRestore: the peer restores no CUDA state, so the checkpoint used no GPU.
    let cuda = p.cuda_restore.unwrap_or_default();
    let devices: Vec<Device> = match (cuda.source_gpus, cuda.source_gpu_uuids) {
        (Some(gpus), _) if !gpus.is_empty() => gpus
            .into_iter()
            .map(|g| device(g.uuid, g.product_name, g.mig_profile))
            .collect(),
        (_, Some(uuids)) if !uuids.is_empty() => {
            warnings.push(Warning::PeerGpuUuidsOnly);
            uuids.into_iter().map(|u| device(Some(u), None, None)).collect()
        }
        _ => Vec::new(),
    };
    GpuManifest {
        captured_at: present(p.created_at),
        warnings,
        host,
        pod,
        nvidia: Some(Nvidia {
            driver_version: cuda.source_driver_version,
            devices: Some(devices),
            ..Nvidia::default()
        }),
        ..GpuManifest::default()
    }
}

// ---------------------------------------------------------------------------------------------
// PodSnapshotContent.status.source (`api/v1alpha1/checkpoint_source_types.go`)

/// A whole PodSnapshotContent object: only `status.source` is read.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct SnapshotContent {
    status: Option<Status>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Status {
    source: Option<Source>,
}

/// `status.source`: what the peer's agent shows of a checkpoint, without UUIDs by design.
/// The peer has published three shapes of it, all read here: `node`, `pod` and `devices`
/// (its types with the DRA driver's device fields); `node` alone (the CRD of a later `main`,
/// which prunes the rest); and a vendor-keyed one, `type: Nvidia` with `nvidia {node,
/// hardware {gpuCount, gpus[].uuid}, declaredVolumes}`. A content without any is not a
/// source at all ([`from_object`]).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Source {
    node: Option<SourceNode>,
    pod: Option<SourcePod>,
    devices: Option<SourceDevices>,
    /// The vendor-keyed shape's discriminator (`Nvidia`).
    #[serde(rename = "type")]
    vendor: Option<String>,
    /// The vendor-keyed shape's NVIDIA facts.
    nvidia: Option<HardwareSource>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct SourceNode {
    name: Option<String>,
    architecture: Option<String>,
    kernel_version: Option<VersionText>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct SourcePod {
    image: Option<String>,
    image_digest: Option<String>,
    memory: Option<Quantity>,
    cpu: Option<Quantity>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct SourceDevices {
    nvidia: Option<SourceNvidia>,
    /// Other vendors' blocks (the field preserves unknown fields): not compared, said so.
    #[serde(flatten)]
    other: BTreeMap<String, IgnoredAny>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct SourceNvidia {
    driver_version: Option<VersionText>,
    instances: Option<Vec<Instance>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Instance {
    product_name: Option<String>,
    mig_profile: Option<MigProfile>,
}

/// The vendor-keyed shape's `nvidia`: the node's name and the GPUs by UUID.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct HardwareSource {
    node: Option<String>,
    hardware: Option<Hardware>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Hardware {
    gpu_count: Option<u32>,
    gpus: Option<Vec<HardwareGpu>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct HardwareGpu {
    uuid: Option<DeviceUuid>,
}

/// The most devices a `gpuCount` without a list makes: no node has more, and a count is
/// input (a `u32`), so it must not size an allocation by itself.
const MAX_COUNTED_GPUS: u32 = 1024;

/// A PodSnapshotContent object as a miggate manifest; an error when it has no
/// `status.source` (the peer writes it when the content is Ready).
pub(crate) fn from_object(c: SnapshotContent) -> Result<GpuManifest, Error> {
    let source = c.status.and_then(|s| s.source).ok_or(Error::Peer {
        what: "PodSnapshotContent",
        why: "it has no status.source: the peer's agent writes it when the content is Ready",
    })?;
    Ok(from_source(source))
}

/// What a `status.source` leaves unrecorded, by the parts it lacks, for a warning: the peer's
/// newer CRDs prune what an older one does not describe, so absent parts are unknown.
fn unrecorded_warning(missing: Vec<&'static str>) -> Option<Warning> {
    (!missing.is_empty()).then_some(Warning::PeerUnrecorded { missing })
}

/// `status.source` as a miggate manifest (`docs/interop.md` has the mapping).
pub(crate) fn from_source(s: Source) -> GpuManifest {
    if s.vendor.is_some() || s.nvidia.is_some() {
        return from_hardware(s);
    }
    let mut warnings = vec![Warning::PeerSource];
    let recorded_pod = s.pod.is_some();
    let mut missing = Vec::new();
    if s.node.is_none() {
        missing.push("node (kernel, architecture)");
    }
    if !recorded_pod {
        missing.push("pod (image, digest, limits)");
    }
    let host = s.node.map(|n| Host {
        node_name: present(n.name),
        kernel_version: n.kernel_version,
        cpu_arch: present(n.architecture),
        ..Host::default()
    });
    let pod = s.pod.map(|p| {
        warnings.push(Warning::PeerSourceWithoutMounts);
        Pod {
            image: present(p.image),
            image_digest: present(p.image_digest),
            cpu_limit: p.cpu,
            memory_limit: p.memory,
            ..Pod::default()
        }
    });
    // The peer leaves `devices` out for a capture without GPUs, in the release that records
    // `pod` beside it. Without `pod` either (the node-only CRD prunes both), no devices is
    // not known to be none: the GPUs are unknown.
    let nvidia = match s.devices {
        None if !recorded_pod => {
            missing.push("devices (GPUs)");
            None
        }
        devices => Some(source_devices(devices.unwrap_or_default(), &mut warnings)),
    };
    warnings.extend(unrecorded_warning(missing));
    GpuManifest {
        warnings,
        host,
        pod,
        nvidia,
        ..GpuManifest::default()
    }
}

/// `devices`: the NVIDIA instances, classed by profile; other vendors named and skipped.
fn source_devices(devices: SourceDevices, warnings: &mut Vec<Warning>) -> Nvidia {
    for vendor in devices.other.keys() {
        warnings.push(Warning::PeerOtherVendorDevices {
            vendor: vendor.clone(),
        });
    }
    let nvidia = devices.nvidia.unwrap_or_default();
    let list: Vec<Device> = nvidia
        .instances
        .unwrap_or_default()
        .into_iter()
        .map(|i| device(None, i.product_name, i.mig_profile))
        .collect();
    if !list.is_empty() {
        warnings.push(Warning::PeerDevicesWithoutUuids);
    }
    Nvidia {
        driver_version: nvidia.driver_version,
        devices: Some(list),
        ..Nvidia::default()
    }
}

/// The vendor-keyed shape: `nvidia.node` is the node's name, `nvidia.hardware.gpus` its GPUs
/// by UUID (a `MIG-` UUID is a slice of unknown profile), `gpuCount` their number when the
/// list is absent. It records no kernel, architecture, pod or driver.
fn from_hardware(s: Source) -> GpuManifest {
    let mut warnings = vec![Warning::PeerHardwareSource];
    let mut missing = vec!["pod (image, digest, limits)", "kernel or architecture", "driver"];
    if let Some(v) = s.vendor.as_deref().filter(|v| *v != "Nvidia") {
        warnings.push(Warning::PeerOtherVendorType {
            vendor: v.to_string(),
        });
    }
    let hw = s.nvidia.unwrap_or_default();
    let host = present(hw.node).map(|name| Host {
        node_name: Some(name),
        ..Host::default()
    });
    let devices = hw.hardware.and_then(|h| match (h.gpus, h.gpu_count) {
        (Some(gpus), _) if !gpus.is_empty() => Some(
            gpus.into_iter()
                .map(|g| device(g.uuid, None, None))
                .collect::<Vec<_>>(),
        ),
        (_, Some(n)) if n <= MAX_COUNTED_GPUS => Some((0..n).map(|_| Device::default()).collect()),
        (Some(_), None) => Some(Vec::new()),
        _ => None,
    });
    match &devices {
        None => missing.push("GPUs"),
        Some(list) if !list.is_empty() => warnings.push(Warning::PeerGpusByUuidOnly),
        Some(_) => {}
    }
    warnings.extend(unrecorded_warning(missing));
    GpuManifest {
        warnings,
        host,
        nvidia: devices.map(|list| Nvidia {
            devices: Some(list),
            ..Nvidia::default()
        }),
        ..GpuManifest::default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn shape(json: &str) -> Option<Shape> {
        serde_json::from_str::<Keys>(json).unwrap().shape()
    }

    #[test]
    fn shapes_are_told_by_their_keys() {
        assert_eq!(shape(r#"{"createdAt": "x", "k8s": {}}"#), Some(Shape::Manifest));
        assert_eq!(shape(r#"{"cudaRestore": {}, "host": {}}"#), Some(Shape::Manifest));
        assert_eq!(
            shape(r#"{"apiVersion": "x/v1", "kind": "PodSnapshotContent"}"#),
            Some(Shape::SnapshotContent)
        );
        assert_eq!(shape(r#"{"node": {}, "pod": {}}"#), Some(Shape::Source));
        assert_eq!(shape(r#"{"devices": {}}"#), Some(Shape::Source));
        assert_eq!(shape(r#"{"type": "Nvidia", "nvidia": {}}"#), Some(Shape::Source));
        assert_eq!(shape(r#"{"type": "Nvidia", "nvidia": {}, "k8s": {}}"#), None);
        assert_eq!(shape(r#"{"nvidia": {}}"#), None);
        // Not the peer's: miggate's own, a body without its envelope, anything else.
        assert_eq!(shape(r#"{"apiVersion": "miggate.io/v1alpha1", "k8s": 1}"#), None);
        assert_eq!(shape(r#"{"createdAt": "x", "nvidia": {}}"#), None);
        assert_eq!(shape(r#"{"pod": {}}"#), None);
        assert_eq!(shape(r#"{"node": {}, "spec": {}}"#), None);
        assert_eq!(shape(r#"{"apiVersion": "v1", "kind": "Pod"}"#), None);
        assert_eq!(shape("{}"), None);
    }
}

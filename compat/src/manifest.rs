//! The manifest: what a checkpoint was captured on, or what a target offers.
//!
//! The field names and meanings are a wire contract shared with checkpoint agents and the
//! Kubernetes side (see `docs/manifest.md`). Every fact is optional because an absent fact is
//! *unknown* and must stay distinguishable from an empty list, which is *known to be none*.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::device_kind::DeviceKind;
use crate::field_path::PathSegment;
use crate::profile::MigProfile;
use crate::quantity::Quantity;
use crate::text::VersionText;
use crate::uuid::{DeviceUuid, GpuUuid};
use crate::warning::Warning;

/// The only `apiVersion` this crate reads (its one home is `miggate-wire`); anything else (a
/// Pod's `v1`) is refused outright so a wrong file cannot pass as a manifest with every fact
/// unknown.
pub use miggate_wire::API_VERSION;
/// The only `kind` this crate reads.
pub const KIND: &str = "GpuManifest";

/// A GPU manifest's facts: what one side of a restore is compared on.
///
/// This is the manifest *body*: everything but the `apiVersion`/`kind` envelope, which only the
/// document carries ([`from_str`](crate::from_str) requires it, [`GpuManifest::to_json`] and
/// [`GpuManifest::to_yaml`] write it). So the same type is a Kubernetes resource's
/// `spec.manifest` without an envelope nested inside. Plain serde reads it too: an envelope,
/// when present, must be miggate's, and every field no type knows is kept (see
/// [`GpuManifest::unknown_fields`]) and written back out by any serializer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    title = "GpuManifest",
    description = "What a GPU checkpoint was captured on, or what a restore target offers (miggate.io/v1alpha1).",
    extend("x-kubernetes-preserve-unknown-fields" = true)
)]
pub struct GpuManifest {
    /// When the capture ran (RFC 3339), for people reading the manifest; no check reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_at: Option<String>,
    /// Which tool, version and backend wrote it, so a wrong fact can be traced to its reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_by: Option<CapturedBy>,
    // Written as words and read back as words (`Warning::Recorded`). Its doc comment is the
    // schema's description (here, in the CRDs, in docs/manifest.md): keep it word for word.
    /// What the capture could not read cleanly; carried along so nobody mistakes a guess for a fact.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
    /// Host facts (kernel, CPU architecture).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<Host>,
    /// The container's facts; absent on a node inventory, which makes the pod checks not applicable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Pod>,
    /// The NVIDIA driver and the GPUs and devices visible to the process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvidia: Option<Nvidia>,
    /// Fields of this level that this version does not know, kept so that re-writing a
    /// manifest loses nothing and a typo is reported instead of silently becoming unknown.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: UnknownFields,
}

impl GpuManifest {
    /// An empty manifest: every fact unknown. Capture and tests fill it in.
    pub fn new() -> Self {
        GpuManifest::default()
    }

    /// The devices a workload is given, or `None` when the capture could not tell.
    pub fn devices(&self) -> Option<&[Device]> {
        self.nvidia.as_ref()?.devices.as_deref()
    }

    /// Every field no type knows, anywhere in the manifest, with its path from the root, in
    /// the order of the fields that hold them.
    pub fn unknown_fields(&self) -> Vec<UnknownField> {
        let mut out = Vec::new();
        let key = |k: &str| PathSegment::Key(k.to_string());
        // Paths are built only for mappings that hold unknown fields: most hold none.
        if !self.unknown.is_empty() {
            self.unknown.collect(&[], &mut out);
        }
        if let Some(c) = self.captured_by.as_ref().filter(|c| !c.unknown.is_empty()) {
            c.unknown.collect(&[key("capturedBy")], &mut out);
        }
        if let Some(h) = self.host.as_ref().filter(|h| !h.unknown.is_empty()) {
            h.unknown.collect(&[key("host")], &mut out);
        }
        if let Some(p) = self.pod.as_ref().filter(|p| !p.unknown.is_empty()) {
            p.unknown.collect(&[key("pod")], &mut out);
        }
        if let Some(n) = &self.nvidia {
            if !n.unknown.is_empty() {
                n.unknown.collect(&[key("nvidia")], &mut out);
            }
            for (i, g) in n.gpus.iter().flatten().enumerate() {
                if !g.unknown.is_empty() {
                    g.unknown
                        .collect(&[key("nvidia"), key("gpus"), PathSegment::Index(i)], &mut out);
                }
            }
            for (i, d) in n.devices.iter().flatten().enumerate() {
                if !d.unknown.is_empty() {
                    d.unknown
                        .collect(&[key("nvidia"), key("devices"), PathSegment::Index(i)], &mut out);
                }
            }
        }
        out
    }
}

/// The fields of one mapping that no type knows, in the order they were read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct UnknownFields(serde_json::Map<String, serde_json::Value>);

impl UnknownFields {
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The fields, keyed by name, in the order they were read.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &serde_json::Value)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Keeps a field; a name already kept is an error, as YAML and the known fields have it.
    pub fn insert<E: serde::de::Error>(&mut self, key: String, value: serde_json::Value) -> Result<(), E> {
        if self.0.contains_key(&key) {
            return Err(E::custom(format_args!(
                "duplicate field `{}`",
                crate::escape::escape(&key)
            )));
        }
        self.0.insert(key, value);
        Ok(())
    }

    fn collect(&self, at: &[PathSegment], out: &mut Vec<UnknownField>) {
        for (k, v) in &self.0 {
            let mut path = at.to_vec();
            path.push(PathSegment::Key(k.clone()));
            out.push(UnknownField {
                path,
                value: v.clone(),
            });
        }
    }
}

/// A field the reader did not recognise, with where it stood.
#[derive(Debug, Clone, PartialEq)]
pub struct UnknownField {
    /// Map keys and list indexes from the document root down to the field.
    pub path: Vec<PathSegment>,
    /// The field's value, as read.
    pub value: serde_json::Value,
}

/// The manifest's `apiVersion`; a single value so anything else fails at read time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "String", into = "String")]
#[schemars(with = "ApiVersionSchema")]
pub enum ApiVersion {
    /// `miggate.io/v1alpha1`.
    V1alpha1,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
enum ApiVersionSchema {
    #[serde(rename = "miggate.io/v1alpha1")]
    V1alpha1,
}

impl TryFrom<String> for ApiVersion {
    type Error = String;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        if value == API_VERSION {
            Ok(ApiVersion::V1alpha1)
        } else {
            Err(format!(
                "apiVersion is `{value}`, expected `{API_VERSION}`: this is not a miggate GpuManifest"
            ))
        }
    }
}

impl From<ApiVersion> for String {
    fn from(_: ApiVersion) -> String {
        API_VERSION.to_string()
    }
}

/// The manifest's `kind`; a single value so a Pod or a CRD cannot be read as a manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "String", into = "String")]
#[schemars(with = "KindSchema")]
pub enum Kind {
    /// `GpuManifest`.
    GpuManifest,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
enum KindSchema {
    GpuManifest,
}

impl TryFrom<String> for Kind {
    type Error = String;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        if value == KIND {
            Ok(Kind::GpuManifest)
        } else {
            Err(format!(
                "kind is `{value}`, expected `{KIND}`: this is not a miggate GpuManifest"
            ))
        }
    }
}

impl From<Kind> for String {
    fn from(_: Kind) -> String {
        KIND.to_string()
    }
}

/// Who wrote a manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct CapturedBy {
    /// The tool's name (`miggate`, or a checkpoint agent's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The tool's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Which reader produced the GPU facts (`nvml`, `nvidia-smi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// Fields of this mapping that this version does not know, kept and reported.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: UnknownFields,
}

/// Host facts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct Host {
    /// The Kubernetes node name, for people; no check reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The full kernel release (`uname -r`), compared whole because CRIU restores are
    /// sensitive to the exact build.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_version: Option<VersionText>,
    /// CPU architecture in Kubernetes naming (`amd64`, `arm64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_arch: Option<String>,
    /// Fields of this mapping that this version does not know, kept and reported.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: UnknownFields,
}

/// The restored (or checkpointed) container's facts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct Pod {
    /// The image reference, for people; the digest is what is compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The runtime image ID; reduced to a content digest before comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_digest: Option<String>,
    /// The container's CPU limit as a Kubernetes quantity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_limit: Option<Quantity>,
    /// The container's memory limit as a Kubernetes quantity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<Quantity>,
    /// Externalized mount paths (source) or paths that exist (target). `[]` means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mounts: Option<Vec<String>>,
    /// The container's GPU resource limits (`nvidia.com/mig-3g.40gb: 2`), keyed by resource name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_requests: Option<BTreeMap<String, Quantity>>,
    /// Names of the container's resource claims; GPUs allocated through DRA make the
    /// device-plugin request check not applicable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_claims: Option<Vec<String>>,
    /// Fields of this mapping that this version does not know, kept and reported.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: UnknownFields,
}

/// The NVIDIA side of a manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct Nvidia {
    /// The kernel driver version (`580.82.07`), kept as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<VersionText>,
    /// The CUDA version the driver supports (`13.0`), kept as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_driver_version: Option<VersionText>,
    /// The device plugin's MIG strategy on the node, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_strategy: Option<MigStrategy>,
    /// Physical GPUs visible to the capturing process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<Vec<Gpu>>,
    /// What a workload is given, in visible order: whole GPUs or MIG slices. Absent when the
    /// capture could not tell; `[]` when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<Vec<Device>>,
    /// Kinds of device ([`Device::kind`]) whose number the facts' source does not know: each
    /// device of such a kind in `devices` names a class (model, profile) the node may have, in
    /// a number not known, possibly none. A node inventory read from GPU Feature Discovery
    /// labels without `nvidia.com/gpu.count` says this of what the labels do not count; a
    /// capture never does. Held in memory only: never written to or read from a manifest.
    #[serde(skip)]
    #[schemars(skip)]
    pub uncounted: Vec<DeviceKind>,
    /// Fields of this mapping that this version does not know, kept and reported.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: UnknownFields,
}

/// The NVIDIA device plugin's MIG strategy, which decides what `nvidia.com/gpu` hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MigStrategy {
    /// MIG is not exposed; `nvidia.com/gpu` is a whole GPU.
    None,
    /// Every GPU is cut the same way; `nvidia.com/gpu` is one slice.
    Single,
    /// Slices are advertised per profile as `nvidia.com/mig-<profile>`.
    Mixed,
}

/// A label value that is not one of the device plugin's MIG strategies.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a MIG strategy (none, single or mixed)")]
pub struct UnknownMigStrategy;

/// GFD's `nvidia.com/mig.strategy` (`miggate_wire::nvidia::MIG_STRATEGY`) read, exactly: the
/// one reader of the label, so every source of it agrees on what a value means.
impl std::str::FromStr for MigStrategy {
    type Err = UnknownMigStrategy;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "none" => Ok(MigStrategy::None),
            "single" => Ok(MigStrategy::Single),
            "mixed" => Ok(MigStrategy::Mixed),
            _ => Err(UnknownMigStrategy),
        }
    }
}

/// A physical GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct Gpu {
    /// The index nvidia-smi shows for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u32>,
    /// `GPU-…` UUID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<GpuUuid>,
    /// The product name nvidia-smi prints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_name: Option<String>,
    /// PCI bus id (`00000000:18:00.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    /// Total memory in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "memoryMiB")]
    pub memory_mib: Option<u64>,
    /// CUDA compute capability (`9.0`), as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_capability: Option<VersionText>,
    /// MIG mode, current with a pending change folded in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_mode: Option<MigMode>,
    /// Fields of this mapping that this version does not know, kept and reported.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: UnknownFields,
}

/// A GPU's MIG mode. A pending change only takes effect after a GPU reset, so it is kept apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum MigMode {
    /// MIG on, no change pending.
    Enabled,
    /// MIG off, no change pending.
    Disabled,
    /// MIG off now, on after the next reset.
    PendingEnable,
    /// MIG on now, off after the next reset.
    PendingDisable,
}

impl MigMode {
    /// Folds `mig.mode.current` and `mig.mode.pending` into one value.
    pub fn from_current_pending(current: bool, pending: Option<bool>) -> MigMode {
        match (current, pending) {
            (true, Some(false)) => MigMode::PendingDisable,
            (false, Some(true)) => MigMode::PendingEnable,
            (true, _) => MigMode::Enabled,
            (false, _) => MigMode::Disabled,
        }
    }

    /// Whether MIG is on right now (the GPU is cut, or must be to run).
    pub fn is_active(self) -> bool {
        matches!(self, MigMode::Enabled | MigMode::PendingDisable)
    }
}

/// A device a workload is given: a whole GPU or a MIG slice.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct Device {
    /// `GPU-…` for a whole GPU, `MIG-…` (or legacy `MIG-GPU-…/gi/ci`) for a slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<DeviceUuid>,
    /// The parent GPU's UUID, for a slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_uuid: Option<GpuUuid>,
    /// The product name; a slice carries its parent card's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_name: Option<String>,
    /// The slice's profile exactly as nvidia-smi prints it; absent on a slice means unknown shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_profile: Option<MigProfile>,
    /// The GPU instance id of a slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_instance_id: Option<u32>,
    /// The compute instance id of a slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_instance_id: Option<u32>,
    /// Memory in MiB.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "memoryMiB")]
    pub memory_mib: Option<u64>,
    /// Fields of this mapping that this version does not know, kept and reported.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown: UnknownFields,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// GFD's label values are the manifest's own spelling of the strategy, read exactly: no
    /// other case, no padding.
    #[test]
    fn the_strategy_label_reads_as_the_manifest_writes_it() {
        for text in miggate_wire::nvidia::MIG_STRATEGIES {
            let strategy: MigStrategy = text.parse().unwrap();
            assert_eq!(serde_json::to_value(strategy).unwrap(), text);
        }
        for bad in ["Mixed", " mixed", "", "mixed,single"] {
            assert_eq!(bad.parse::<MigStrategy>(), Err(UnknownMigStrategy), "{bad:?}");
        }
    }
}

//! The layout file: what a node's GPUs looked like when the checkpoints were captured there.
//!
//! One YAML document, versioned (`apiVersion` + `kind`), camelCase, unknown fields refused (a
//! typo such as `numvfs` must not quietly mean "no VFs"). GPUs are keyed by PCI bus id; the UUID
//! is a cross-check that the same board sits in that slot. Written atomically.
//!
//! ```yaml
//! apiVersion: miggate.io/v1alpha1
//! kind: RecoveryLayout
//! recordedAt: "2026-11-30T12:00:00Z"
//! fabricMode: 2                      # absent: no fabric manager to wait for
//! gpus:
//! - bus: "0000:18:00.0"
//!   uuid: GPU-5f3c…
//!   migMode: enabled
//!   gpuInstances:                    # in placement order
//!   - {profileId: 19, profile: 1g.18gb, placement: "0:1", computeInstances: [{profileId: 0}]}
//!   sriovNumVfs: 16                  # absent: not an SR-IOV GPU
//!   vfs:                             # by VF index (virtfnN), only those carrying a vGPU
//!   - {index: 0, vgpuTypeId: 1414, vgpuTypeName: NVIDIA H200X-1-18C}
//! ```

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::bdf::Bdf;
use crate::error::{Error, Result};
use crate::files;

/// The `apiVersion` a layout carries (its one home is `miggate-wire`).
pub use miggate_wire::API_VERSION;
/// The `kind` a layout carries.
pub const KIND: &str = "RecoveryLayout";

/// A node's recorded layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Layout {
    /// Always [`miggate_wire::API_VERSION`]; another version is refused rather than misread.
    pub api_version: String,
    /// Always `RecoveryLayout`.
    pub kind: String,
    /// When it was recorded (RFC 3339), for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_at: Option<String>,
    /// The fabric manager's `FABRIC_MODE` when it ran at record time; recovery waits for the
    /// fabric manager in that mode. Absent: no fabric manager (not an NVSwitch node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric_mode: Option<u32>,
    /// Who creates the node's MIG instances when it is not recovery: `dra-dynamic-mig`, the
    /// NVIDIA DRA driver's DynamicMIG, which creates a partition when a claim is allocated and
    /// destroys partitions it did not create. Then recovery sets MIG mode, VFs and vGPU types
    /// but never creates or destroys instances, and verify does not compare them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_managed_by: Option<MigManager>,
    /// The GPUs, in bus order.
    pub gpus: Vec<GpuLayout>,
    /// What capture saw at record time (a manifest body). When present, verify also runs the
    /// compat checks in exact mode of a fresh capture against it: the layout can be back while a
    /// driver or kernel change still keeps the node's checkpoints from restoring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<miggate_compat::GpuManifest>,
}

/// What manages a node's MIG instances instead of recovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MigManager {
    /// The NVIDIA DRA driver under its `DynamicMIG` gate.
    #[serde(rename = "dra-dynamic-mig")]
    DraDynamicMig,
}

/// One physical GPU (a PF).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuLayout {
    /// The PCI bus id: the key.
    pub bus: Bdf,
    /// The GPU UUID, to notice a different board in the same slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// MIG mode.
    pub mig_mode: MigSetting,
    /// The GPU instances with their placements, in placement order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_instances: Vec<GpuInstanceLayout>,
    /// `sriov_numvfs`; absent for a GPU without SR-IOV.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sriov_num_vfs: Option<u32>,
    /// VFs carrying a vGPU, by VF index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vfs: Vec<VfLayout>,
}

/// The MIG mode a layout records for a GPU: on or off. (compat's `MigMode` also has the
/// pending states nvidia-smi reports; a layout only ever asks for one of these two.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MigSetting {
    /// MIG off.
    Disabled,
    /// MIG on.
    Enabled,
}

impl fmt::Display for MigSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MigSetting::Disabled => "disabled",
            MigSetting::Enabled => "enabled",
        })
    }
}

/// Where an instance sits in a GPU's memory slices, written `start:size` as nvidia-smi does:
/// the one type smi's MIG tables read and a layout records.
pub use miggate_smi::mig_table::Placement;

/// A GPU instance: profile and placement, and the compute instances inside it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuInstanceLayout {
    /// Where it sits (first, so that sorting instances sorts them by slot).
    pub placement: Placement,
    /// The GPU instance profile id (`-lgip` ID).
    pub profile_id: u32,
    /// The profile name as nvidia-smi prints it (`1g.18gb`), for people; not compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Its compute instances, by compute instance profile id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compute_instances: Vec<ComputeInstanceLayout>,
}

/// A compute instance.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ComputeInstanceLayout {
    /// The compute instance profile id (`-lcip` ID).
    pub profile_id: u32,
    /// The profile name as printed, for people; not compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

/// A VF with a vGPU on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VfLayout {
    /// The `N` of `virtfnN`: stable across boots, unlike nothing else about a VF.
    pub index: u32,
    /// The vGPU type id written to `current_vgpu_type`.
    pub vgpu_type_id: u32,
    /// The type's name from `creatable_vgpu_types`, for people; not compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vgpu_type_name: Option<String>,
}

impl Layout {
    /// Reads a layout from YAML text; `path` names it in errors.
    pub fn from_yaml(text: &str, path: &Path) -> Result<Layout> {
        let err = |message: String| Error::Layout {
            path: path.to_path_buf(),
            message,
        };
        let layout: Layout = serde_saphyr::from_str(text).map_err(|e| err(e.to_string()))?;
        if layout.api_version != API_VERSION || layout.kind != KIND {
            return Err(err(format!(
                "apiVersion {:?} kind {:?}: expected {API_VERSION} {KIND}",
                layout.api_version, layout.kind
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        for gpu in &layout.gpus {
            if !seen.insert(&gpu.bus) {
                return Err(err(format!("GPU {} is listed twice", gpu.bus)));
            }
            if gpu.mig_mode == MigSetting::Disabled && !gpu.gpu_instances.is_empty() {
                return Err(err(format!("GPU {}: GPU instances with MIG disabled", gpu.bus)));
            }
            let mut vf_seen = std::collections::BTreeSet::new();
            for vf in &gpu.vfs {
                if !vf_seen.insert(vf.index) {
                    return Err(err(format!(
                        "GPU {}: VF index {} is listed twice",
                        gpu.bus, vf.index
                    )));
                }
                if gpu.sriov_num_vfs.is_none_or(|n| vf.index >= n) {
                    return Err(err(format!(
                        "GPU {}: VF index {} is past sriovNumVfs {}",
                        gpu.bus,
                        vf.index,
                        gpu.sriov_num_vfs
                            .map_or("(absent)".to_string(), |n| n.to_string())
                    )));
                }
                if vf.vgpu_type_id == 0 {
                    return Err(err(format!(
                        "GPU {}: VF {}: vgpuTypeId 0 means no vGPU; leave the VF out",
                        gpu.bus, vf.index
                    )));
                }
            }
        }
        Ok(layout)
    }

    /// Reads a layout file (at most 4 MiB).
    pub fn read(path: &Path) -> Result<Layout> {
        let text = files::read_bounded(path, files::MAX_FILE_BYTES)?.ok_or_else(|| Error::Layout {
            path: path.to_path_buf(),
            message: "no such file".to_string(),
        })?;
        Layout::from_yaml(&text, path)
    }

    /// The YAML text.
    pub fn to_yaml(&self) -> Result<String> {
        serde_saphyr::to_string(self).map_err(|e| Error::Layout {
            path: "<memory>".into(),
            message: e.to_string(),
        })
    }

    /// Writes the layout atomically.
    pub fn write(&self, path: &Path) -> Result<()> {
        files::write_atomic(path, self.to_yaml()?.as_bytes())
    }

    /// Puts GPUs, instances and VFs in their canonical order, so that equal layouts compare
    /// and print equal.
    pub fn normalise(&mut self) {
        self.gpus.sort_by(|a, b| a.bus.cmp(&b.bus));
        for gpu in &mut self.gpus {
            gpu.normalise();
        }
    }
}

impl GpuLayout {
    /// Sorts instances by slot and VFs by index.
    pub fn normalise(&mut self) {
        for gi in &mut self.gpu_instances {
            gi.compute_instances.sort();
        }
        self.gpu_instances.sort();
        self.vfs.sort_by_key(|v| v.index);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const TEXT: &str = r#"apiVersion: miggate.io/v1alpha1
kind: RecoveryLayout
fabricMode: 2
gpus:
- bus: "00000000:18:00.0"
  uuid: GPU-1
  migMode: enabled
  gpuInstances:
  - {profileId: 19, profile: 1g.18gb, placement: "0:1", computeInstances: [{profileId: 0}]}
  sriovNumVfs: 16
  vfs:
  - {index: 0, vgpuTypeId: 1414, vgpuTypeName: NVIDIA H200X-1-18C}
"#;

    #[test]
    fn reads_and_round_trips() {
        let layout = Layout::from_yaml(TEXT, Path::new("l.yaml")).unwrap();
        assert_eq!(layout.gpus[0].bus.as_str(), "0000:18:00.0");
        assert_eq!(
            layout.gpus[0].gpu_instances[0].placement,
            Placement { start: 0, size: 1 }
        );
        let again = Layout::from_yaml(&layout.to_yaml().unwrap(), Path::new("x")).unwrap();
        assert_eq!(again, layout);
    }

    #[rstest::rstest]
    #[case("numvfs: 3", "unknown field")]
    #[case("placement: \"0-1\"", "expected start:size")]
    #[case("vfs: [{index: 16, vgpuTypeId: 1}]", "past sriovNumVfs")]
    fn bad_layouts_say_what_and_where(#[case] change: &str, #[case] want: &str) {
        let text = match change.split_once(':').unwrap().0 {
            "numvfs" => TEXT.replace("sriovNumVfs: 16", "sriovNumVfs: 16\n  numvfs: 3"),
            "placement" => TEXT.replace("placement: \"0:1\"", change),
            _ => TEXT.replace(
                "  vfs:\n  - {index: 0, vgpuTypeId: 1414, vgpuTypeName: NVIDIA H200X-1-18C}\n",
                &format!("  {change}\n"),
            ),
        };
        let err = Layout::from_yaml(&text, Path::new("l.yaml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(want) && err.contains("l.yaml"), "{err}");
    }

    #[rstest::rstest]
    #[case::duplicate_gpu(TEXT.replace("gpus:\n", "gpus:\n- {bus: \"18:00.0\", migMode: disabled}\n"), "GPU 0000:18:00.0 is listed twice")]
    #[case::instances_without_mig(TEXT.replace("migMode: enabled", "migMode: disabled"), "GPU instances with MIG disabled")]
    #[case::type_zero(TEXT.replace("vgpuTypeId: 1414", "vgpuTypeId: 0"), "vgpuTypeId 0 means no vGPU")]
    #[case::duplicate_vf(TEXT.replace("  - {index: 0,", "  - {index: 0, vgpuTypeId: 1}\n  - {index: 0,"), "VF index 0 is listed twice")]
    #[case::bad_bus(TEXT.replace("00000000:18:00.0", "18:00"), "not a PCI address")]
    #[case::zero_size(TEXT.replace("\"0:1\"", "\"0:0\""), "expected start:size")]
    fn inconsistent_layouts_are_refused(#[case] text: String, #[case] want: &str) {
        let err = Layout::from_yaml(&text, Path::new("l.yaml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(want) && err.contains("l.yaml"), "{err}");
    }

    #[test]
    fn another_version_is_refused() {
        let err = Layout::from_yaml(&TEXT.replace("v1alpha1", "v9"), Path::new("l")).unwrap_err();
        assert!(err.to_string().contains("expected miggate.io/v1alpha1"), "{err}");
    }
}

//! `GpuCheckpoint`: what a checkpoint was captured on, kept in the cluster so admission can
//! compare a restore pod's target with it before the restore starts.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use miggate_compat::GpuManifest;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::schema;
use crate::summary::Summary;

/// A GPU checkpoint's facts: the manifest it was captured on, and which container restores it.
///
/// A restore pod names its checkpoint with the annotation `miggate.io/restore-from`; admission
/// reads this resource's `spec.manifest` as the source side of every check.
// Each `printcolumn(..)` repeats `type_ = "string"`, which clippy takes for a duplicate.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "miggate.io",
    version = "v1alpha1",
    kind = "GpuCheckpoint",
    plural = "gpucheckpoints",
    shortname = "gpuckpt",
    category = "miggate",
    namespaced,
    status = "GpuCheckpointStatus",
    derive = "PartialEq",
    doc = "A GPU checkpoint's manifest: what it was captured on, compared with a restore target at admission.",
    printcolumn(
        name = "Model",
        type_ = "string",
        json_path = ".spec.manifest.nvidia.devices[0].productName",
        description = "The first device's GPU product name (a slice carries its parent's)"
    ),
    printcolumn(
        name = "Devices",
        type_ = "string",
        json_path = ".spec.summary.profiles",
        description = "Devices by MIG profile, then whole GPUs"
    ),
    printcolumn(
        name = "Driver",
        type_ = "string",
        json_path = ".spec.manifest.nvidia.driverVersion",
        description = "NVIDIA driver version"
    ),
    printcolumn(
        name = "Container",
        type_ = "string",
        json_path = ".spec.containerName",
        description = "The restore container",
        priority = 1
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct GpuCheckpointSpec {
    /// The manifest body the checkpoint was captured on (no apiVersion/kind): what every
    /// check compares a restore target with. Its CRD schema keeps no unknown field, so the API
    /// server refuses a typo under strict field validation.
    #[schemars(schema_with = "schema::manifest")]
    pub manifest: GpuManifest,
    /// The name of the container that restores this checkpoint. Absent: the only container
    /// asking for GPUs, else unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = schema::DNS_LABEL_MAX), pattern(schema::DNS_LABEL_PATTERN))]
    pub container_name: Option<String>,
    /// The manifest in three short texts for `kubectl get`, derived from it: miggate's library
    /// writes it, and the webhook's summary mutation writes it for any other writer. Optional
    /// (a cluster without the webhook shows an empty column). For people only: no check reads
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
}

impl GpuCheckpointSpec {
    /// A spec for `manifest`, its summary computed, no container named.
    pub fn new(manifest: GpuManifest) -> Self {
        let summary = Some(Summary::of(&manifest));
        GpuCheckpointSpec {
            manifest,
            container_name: None,
            summary,
        }
    }

    /// Names the restore container; refused when Kubernetes could never give a container
    /// that name, since the checkpoint would then never match its restore pod.
    pub fn with_container_name(mut self, name: impl Into<String>) -> Result<Self, Error> {
        let name = name.into();
        if !schema::is_dns_label(&name) {
            return Err(Error::ContainerName(name));
        }
        self.container_name = Some(name);
        Ok(self)
    }
}

impl GpuCheckpoint {
    /// A checkpoint resource named `name` for `manifest`, its summary filled in. The namespace
    /// is the caller's to set (`metadata.namespace`), or the API client's default.
    pub fn from_manifest(name: &str, manifest: GpuManifest) -> Self {
        GpuCheckpoint::new(name, GpuCheckpointSpec::new(manifest))
    }
}

/// What has been concluded about a checkpoint, and for which generation of its spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GpuCheckpointStatus {
    /// The `metadata.generation` this status was computed from; older means stale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Standard conditions, one per `type`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
}

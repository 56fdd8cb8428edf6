//! `GpuNode`: a node's current GPU inventory, named after the node, so admission can ask
//! whether a checkpoint fits a node without reaching the node.

use std::fmt;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use kube::CustomResource;
use miggate_compat::GpuManifest;
use miggate_wire::recovery::Phase;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::schema;
use crate::summary::Summary;

/// The CEL rule that ties a `GpuNode` to its node: a manifest that says which node it was
/// captured on must be stored under that node's name, or admission would judge one node by
/// another's GPUs. Public so tests and docs quote the rule the CRD carries.
pub const NODE_NAME_RULE: &str = "!has(self.spec.manifest.host) || !has(self.spec.manifest.host.nodeName) || self.spec.manifest.host.nodeName == self.metadata.name";

/// The message the API server returns when [`NODE_NAME_RULE`] refuses an object.
pub const NODE_NAME_MESSAGE: &str =
    "a GpuNode is named after its node: metadata.name must equal spec.manifest.host.nodeName";

/// A node's GPU inventory as `miggate publish` observed it, and whether boot recovery has
/// rebuilt the node's MIG layout.
///
/// Admission reads `spec.manifest` as the target side of the node checks (offer mode) when a
/// restore pod is bound to this node.
// Each `printcolumn(..)` repeats `type_ = "string"`, which clippy takes for a duplicate.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "miggate.io",
    version = "v1alpha1",
    kind = "GpuNode",
    plural = "gpunodes",
    shortname = "gpunode",
    category = "miggate",
    status = "GpuNodeStatus",
    derive = "PartialEq",
    doc = "A node's GPU inventory, named after the node: the target side of admission's node checks.",
    validation = kube::core::Rule::new(NODE_NAME_RULE).message(NODE_NAME_MESSAGE),
    printcolumn(name = "Model", type_ = "string", json_path = ".spec.manifest.nvidia.devices[0].productName", description = "The first device's GPU product name (a slice carries its parent's)"),
    printcolumn(name = "Devices", type_ = "string", json_path = ".spec.summary.profiles", description = "Devices by MIG profile, then whole GPUs"),
    printcolumn(name = "Driver", type_ = "string", json_path = ".spec.manifest.nvidia.driverVersion", description = "NVIDIA driver version"),
    printcolumn(name = "Recovered", type_ = "string", json_path = ".status.conditions[?(@.type==\"Recovered\")].reason", description = "Boot recovery: Pending, Recovering, Ready or Failed"),
    printcolumn(name = "Observed", type_ = "date", json_path = ".spec.observedAt", description = "When the inventory was observed"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct GpuNodeSpec {
    /// The node's inventory as a manifest body (no apiVersion/kind), without pod facts.
    /// Its CRD schema keeps no unknown field, so the API server refuses a typo under strict
    /// field validation.
    #[schemars(schema_with = "schema::manifest")]
    pub manifest: GpuManifest,
    /// When the inventory was observed (RFC 3339), written by the publisher, so a reader can
    /// tell a fresh inventory from one left by a publisher that stopped.
    pub observed_at: Time,
    /// The manifest in three short texts for `kubectl get`, derived from it: miggate's library
    /// writes it, and the webhook's summary mutation writes it for any other writer. Optional
    /// (a cluster without the webhook shows an empty column). For people only: no check reads
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
}

impl GpuNodeSpec {
    /// A spec for `manifest` observed at `observed_at`, its summary computed. The time is
    /// passed in so that this stays pure and testable.
    pub fn new(manifest: GpuManifest, observed_at: Time) -> Self {
        let summary = Some(Summary::of(&manifest));
        GpuNodeSpec {
            manifest,
            observed_at,
            summary,
        }
    }
}

impl GpuNode {
    /// The inventory resource of node `node`, named after it as [`NODE_NAME_RULE`] requires.
    pub fn from_manifest(node: &str, manifest: GpuManifest, observed_at: Time) -> Self {
        GpuNode::new(node, GpuNodeSpec::new(manifest, observed_at))
    }

    /// The reason of the `Recovered` condition, when there is one this version knows.
    pub fn recovered(&self) -> Option<RecoveredReason> {
        self.status.as_ref()?.recovered()
    }
}

/// A node's state as its writers report it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GpuNodeStatus {
    /// Standard conditions, one per `type`; boot recovery writes `Recovered`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Vec<Condition>,
}

/// The `type` of the condition boot recovery writes.
pub const RECOVERED: &str = "Recovered";

impl GpuNodeStatus {
    /// The `Recovered` condition's reason, when present and one this version knows.
    pub fn recovered(&self) -> Option<RecoveredReason> {
        let condition = self.conditions.iter().find(|c| c.type_ == RECOVERED)?;
        condition.reason.parse().ok()
    }

    /// Sets the `Recovered` condition. Its `lastTransitionTime` moves to `now` only when its
    /// status changes, as Kubernetes' conventions ask, so the column and watchers see when the
    /// node last became (un)recovered rather than when it was last reported.
    pub fn set_recovered(
        &mut self,
        reason: RecoveredReason,
        message: impl Into<String>,
        observed_generation: Option<i64>,
        now: Time,
    ) {
        let status = reason.status().to_string();
        let mut condition = Condition {
            last_transition_time: now,
            message: message.into(),
            observed_generation,
            reason: reason.as_str().to_string(),
            status,
            type_: RECOVERED.to_string(),
        };
        match self.conditions.iter_mut().find(|c| c.type_ == RECOVERED) {
            Some(old) => {
                if old.status == condition.status {
                    condition.last_transition_time = old.last_transition_time.clone();
                }
                *old = condition;
            }
            None => self.conditions.push(condition),
        }
    }
}

/// A server-side apply of a `GpuNode`'s status that holds only its `Recovered` condition:
/// what `miggate publish` sends to the status subresource. `conditions` is a map list keyed
/// by `type`, so the server merges it and the conditions other writers own are kept.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecoveredApply {
    api_version: std::borrow::Cow<'static, str>,
    kind: std::borrow::Cow<'static, str>,
    metadata: ObjectMeta,
    status: GpuNodeStatus,
}

impl RecoveredApply {
    /// The apply for node `name` of `status`'s `Recovered` condition (none when it has none).
    pub fn new(name: &str, status: &GpuNodeStatus) -> RecoveredApply {
        use kube::Resource;
        RecoveredApply {
            api_version: GpuNode::api_version(&()),
            kind: GpuNode::kind(&()),
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                ..ObjectMeta::default()
            },
            status: GpuNodeStatus {
                conditions: status
                    .conditions
                    .iter()
                    .filter(|c| c.type_ == RECOVERED)
                    .cloned()
                    .collect(),
            },
        }
    }
}

/// Why a node's `Recovered` condition says what it says: boot recovery's stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecoveredReason {
    /// The node booted and recovery has not started: its MIG layout may not be the recorded one.
    Pending,
    /// Recovery is rebuilding the MIG layout.
    Recovering,
    /// The layout is rebuilt and the inventory republished: the node can take restores.
    Ready,
    /// Recovery gave up; the message says why. The node's inventory is what it is.
    Failed,
}

impl RecoveredReason {
    /// Every reason, in the order recovery goes through them.
    pub const ALL: [RecoveredReason; 4] = [
        RecoveredReason::Pending,
        RecoveredReason::Recovering,
        RecoveredReason::Ready,
        RecoveredReason::Failed,
    ];

    /// The condition's `reason` text.
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveredReason::Pending => "Pending",
            RecoveredReason::Recovering => "Recovering",
            RecoveredReason::Ready => "Ready",
            RecoveredReason::Failed => "Failed",
        }
    }

    /// The condition's `status`: `True` only once recovery is done; a node still pending or
    /// recovering is known not to be recovered yet, so `False` rather than `Unknown`.
    pub fn status(self) -> &'static str {
        match self {
            RecoveredReason::Ready => "True",
            RecoveredReason::Pending | RecoveredReason::Recovering | RecoveredReason::Failed => "False",
        }
    }
}

/// The one place a recovery phase (the state file `miggate recover` writes, see
/// `miggate_wire::recovery`) becomes the condition's reason: one reason per phase, so a phase
/// added there fails to build here until it is given one.
impl From<Phase> for RecoveredReason {
    fn from(phase: Phase) -> RecoveredReason {
        match phase {
            Phase::Pending => RecoveredReason::Pending,
            Phase::Recovering => RecoveredReason::Recovering,
            Phase::Ready => RecoveredReason::Ready,
            Phase::Failed => RecoveredReason::Failed,
        }
    }
}

impl fmt::Display for RecoveredReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RecoveredReason {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RecoveredReason::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| Error::UnknownReason(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    /// The status apply names the object and carries the `Recovered` condition alone: a
    /// condition another writer owns is not sent, so the server keeps it as that writer's.
    #[test]
    fn the_recovered_apply_carries_only_the_recovered_condition() {
        let mut status = GpuNodeStatus::default();
        status.conditions.push(Condition {
            last_transition_time: at(5),
            message: "theirs".into(),
            observed_generation: None,
            reason: "Other".into(),
            status: "True".into(),
            type_: "Healthy".into(),
        });
        status.set_recovered(RecoveredReason::Ready, "rebuilt", Some(3), at(7));
        let body = serde_json::to_value(RecoveredApply::new("n1", &status)).unwrap();
        assert_eq!(
            body,
            serde_json::json!({
                "apiVersion": "miggate.io/v1alpha1",
                "kind": "GpuNode",
                "metadata": {"name": "n1"},
                "status": {"conditions": [{
                    "lastTransitionTime": "1970-01-01T00:00:07Z",
                    "message": "rebuilt",
                    "observedGeneration": 3,
                    "reason": "Ready",
                    "status": "True",
                    "type": "Recovered",
                }]},
            })
        );
        let none = serde_json::to_value(RecoveredApply::new("n1", &GpuNodeStatus::default())).unwrap();
        assert_eq!(none["status"], serde_json::json!({}));
    }

    /// Every phase has its own reason, in the same order, and every reason stands for a
    /// phase: the condition can say everything the state file can.
    #[test]
    fn every_recovery_phase_maps_to_its_own_reason() {
        let mapped: Vec<RecoveredReason> = Phase::ALL.into_iter().map(RecoveredReason::from).collect();
        assert_eq!(mapped, RecoveredReason::ALL);
    }

    #[test]
    fn reasons_read_back_and_unknown_ones_are_refused() {
        for r in RecoveredReason::ALL {
            assert_eq!(r.as_str().parse::<RecoveredReason>().unwrap(), r);
            assert_eq!(r.to_string(), r.as_str());
        }
        let err = "ready".parse::<RecoveredReason>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown Recovered reason `ready`; known: Pending, Recovering, Ready, Failed"
        );
        assert_eq!(RecoveredReason::Ready.status(), "True");
        assert_eq!(RecoveredReason::Recovering.status(), "False");
    }

    #[test]
    fn the_transition_time_moves_only_when_the_status_changes() {
        let mut status = GpuNodeStatus::default();
        assert_eq!(status.recovered(), None);
        status.set_recovered(RecoveredReason::Pending, "booted", Some(1), at(10));
        status.set_recovered(RecoveredReason::Recovering, "rebuilding", Some(1), at(20));
        assert_eq!(status.conditions.len(), 1);
        let c = &status.conditions[0];
        assert_eq!((c.reason.as_str(), c.status.as_str()), ("Recovering", "False"));
        assert_eq!(c.last_transition_time, at(10), "False to False is no transition");
        assert_eq!(c.message, "rebuilding");

        status.set_recovered(RecoveredReason::Ready, "2 GPU instances rebuilt", Some(2), at(30));
        let c = &status.conditions[0];
        assert_eq!((c.status.as_str(), c.observed_generation), ("True", Some(2)));
        assert_eq!(c.last_transition_time, at(30));
        assert_eq!(status.recovered(), Some(RecoveredReason::Ready));
    }

    #[test]
    fn other_conditions_are_left_alone_and_a_foreign_reason_reads_as_none() {
        let other = Condition {
            last_transition_time: at(1),
            message: String::new(),
            observed_generation: None,
            reason: "Fine".into(),
            status: "True".into(),
            type_: "Published".into(),
        };
        let mut status = GpuNodeStatus {
            conditions: vec![other.clone()],
        };
        status.set_recovered(RecoveredReason::Failed, "nvidia-smi mig -cgi failed", None, at(5));
        assert_eq!(status.conditions[0], other);
        assert_eq!(status.recovered(), Some(RecoveredReason::Failed));
        status.conditions[1].reason = "Rebooting".into();
        assert_eq!(status.recovered(), None);
    }
}

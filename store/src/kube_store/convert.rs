//! Each watched object turned into what a decision reads of it (and `None` for what no
//! decision reads), so a cache holds no more than it needs.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::Resource;
use miggate_crds::GpuNode;

use super::cache::SnapshotEntry;
use super::lean::{
    WatchedCheckpoint, WatchedClaim, WatchedContent, WatchedGpuNode, WatchedNode, WatchedSlice,
    WatchedSnapshot,
};
use crate::kube_store::watched_pod::{Kept, WatchedContainer, WatchedPod};
use miggate_admission::lookup::Checkpoint;
use miggate_admission::lookup::{ClaimAllocation, Content, GpuAsk, RestorePod};
use miggate_crds::peer::SnapshotContent;

pub(super) fn key_of<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    let name = meta.name.as_deref().unwrap_or("");
    match meta.namespace.as_deref() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

pub(super) fn checkpoint_of(c: WatchedCheckpoint) -> Option<Checkpoint> {
    let origin = format!(
        "GpuCheckpoint {}/{}",
        c.metadata.namespace.as_deref().unwrap_or_default(),
        c.metadata.name.as_deref().unwrap_or_default()
    );
    let spec = c.spec?;
    Some(Checkpoint {
        manifest: spec.manifest,
        container_name: spec.container_name,
        origin,
    })
}

pub(super) fn gpu_node_of(n: WatchedGpuNode) -> Option<GpuNode> {
    n.into_gpu_node()
}

/// What a Node contributes to an inventory: its name, `nvidia.com/` labels (GPU Feature
/// Discovery's), capacity and allocatable (extended resources) and `nodeInfo` (kernel,
/// architecture), all that [`WatchedNode`] reads.
pub(super) fn node_of(n: WatchedNode) -> Option<Node> {
    Some(n.into_node())
}

/// What a restore pod contributes (see [`RestorePod`]); `None` for a pod without
/// `miggate.io/restore-from` or `nvidia.com/restore-from`. An annotation value past
/// [`MAX_KEPT_ANNOTATION_BYTES`] is its marker ([`Kept::into_value`]), so the pod is still
/// a restore pod and its binding refused, never passed unchecked.
pub(super) fn restore_pod_of(p: WatchedPod) -> Option<RestorePod> {
    if !p.annotations.is_restore() {
        return None;
    }
    // A claim named in the spec, or made from a template (its name in the status).
    let named = p
        .spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
        .filter_map(|c| c.resource_claim_name.clone());
    let made = p
        .status
        .iter()
        .flat_map(|s| s.resource_claim_statuses.iter().flatten())
        .filter_map(|c| c.resource_claim_name.clone());
    let mut claims: Vec<String> = Vec::new();
    for name in named.chain(made) {
        if claims.len() >= miggate_admission::allocation::MAX_CLAIMS {
            break;
        }
        if !claims.contains(&name) {
            claims.push(name);
        }
    }
    Some(RestorePod {
        uid: p.metadata.uid,
        annotations: p.annotations.map(Kept::into_value),
        claims,
        gpu_asks: p
            .spec
            .as_ref()
            .and_then(|s| s.containers.as_deref())
            .map(gpu_asks)
            .unwrap_or_default(),
    })
}

/// The GPU asks of a restore pod's containers (see [`GpuAsk`]); none when the pod has more
/// containers asking, or a container more resources, than [`GpuAsk::MAX`]: the binding then
/// leaves `gpu-request` to the creation's check rather than judge part of the pod.
pub(super) fn gpu_asks(containers: &[WatchedContainer]) -> Vec<GpuAsk> {
    let mut asks = Vec::new();
    for c in containers {
        let resources = c.resources.as_ref();
        let mut requests = BTreeMap::new();
        // Extended resources are limits; a request alone stands for an equal limit.
        for map in [
            resources.and_then(|r| r.requests.as_ref()),
            resources.and_then(|r| r.limits.as_ref()),
        ]
        .into_iter()
        .flatten()
        {
            for (k, v) in map
                .iter()
                .filter(|(k, _)| k.starts_with(miggate_wire::NVIDIA_RESOURCE_PREFIX))
            {
                requests.insert(k.clone(), miggate_compat::Quantity::new(v.0.as_str()));
            }
        }
        let claims: Vec<String> = resources
            .and_then(|r| r.claims.as_ref())
            .map(|cs| cs.iter().map(|c| c.name.clone()).collect())
            .unwrap_or_default();
        if requests.is_empty() && claims.is_empty() {
            continue;
        }
        if asks.len() >= GpuAsk::MAX || requests.len() > GpuAsk::MAX || claims.len() > GpuAsk::MAX {
            return Vec::new();
        }
        asks.push(GpuAsk {
            container: c.name.clone(),
            requests,
            claims,
        });
    }
    asks
}

/// What a claim contributes: its allocation's devices (request, driver, pool, device), at
/// most [`MAX_RESULTS`](miggate_inventory::MAX_RESULTS) + 1 of them (more is refused when
/// matched).
pub(super) fn claim_of(c: WatchedClaim) -> Option<ClaimAllocation> {
    let devices = c
        .status
        .and_then(|s| s.allocation)
        .and_then(|a| a.devices)
        .map(|d| {
            d.results
                .into_iter()
                .flatten()
                .take(miggate_inventory::MAX_RESULTS + 1)
                .map(|r| miggate_inventory::AllocatedDevice {
                    request: r.request,
                    driver: r.driver,
                    pool: r.pool,
                    device: r.device,
                })
                .collect()
        });
    Some(ClaimAllocation { devices })
}

/// What a `PodSnapshot` contributes: the content it is bound to, and its UID.
pub(super) fn snapshot_of(s: WatchedSnapshot) -> Option<SnapshotEntry> {
    Some(SnapshotEntry {
        bound: s
            .status
            .as_ref()
            .and_then(|s| s.bound_content())
            .map(str::to_string),
        uid: s.metadata.uid,
    })
}

/// What a `PodSnapshotContent` contributes: its `status.source` translated once, here.
pub(super) fn content_of(c: WatchedContent) -> Option<Content> {
    Some(Content::from(SnapshotContent::read(&c.into_content())))
}

pub(super) fn slice_of(s: WatchedSlice) -> Option<ResourceSlice> {
    Some(s.into_slice())
}

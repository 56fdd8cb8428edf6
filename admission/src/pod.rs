//! A pod spec's facts as a restore target: the restore container's limits, GPU requests,
//! mounts and image.

use std::collections::BTreeMap;

use miggate_compat::{Pod, Quantity};

use crate::text::Text;

use miggate_wire::NVIDIA_RESOURCE_PREFIX as NVIDIA_PREFIX;

/// What a decision reads of a pod's spec: its containers' names, images, resources and
/// mounts, and the node it names. Decoded in place from the review (strings borrowed where
/// they carry no escapes); every other field is skipped unread. Required fields are those the
/// API's types require (`containers`, a container's `name`, a mount's `name` and `mountPath`).
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec<'a> {
    /// The pod's containers.
    #[serde(borrow)]
    pub containers: Vec<Container<'a>>,
    /// `spec.nodeName`: set when the pod is created bound to a node.
    #[serde(borrow, default)]
    pub node_name: Option<Text<'a>>,
}

/// A container as a decision reads it.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container<'a> {
    /// The container's name, which a checkpoint records.
    #[serde(borrow)]
    pub name: Text<'a>,
    #[serde(borrow, default)]
    image: Option<Text<'a>>,
    #[serde(borrow, default)]
    resources: Option<Resources<'a>>,
    #[serde(borrow, default)]
    volume_mounts: Option<Vec<VolumeMount<'a>>>,
}

/// Quantities by resource name (the API's `map[ResourceName]Quantity`).
type Quantities<'a> = BTreeMap<Text<'a>, Text<'a>>;

#[derive(Debug, Clone, serde::Deserialize)]
struct Resources<'a> {
    #[serde(borrow, default)]
    limits: Option<Quantities<'a>>,
    #[serde(borrow, default)]
    requests: Option<Quantities<'a>>,
    #[serde(borrow, default)]
    claims: Option<Vec<ClaimRef<'a>>>,
}

#[derive(Debug, Clone, serde::Deserialize)]
struct ClaimRef<'a> {
    #[serde(borrow)]
    name: Text<'a>,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct VolumeMount<'a> {
    // Required by the API's types; not read.
    #[serde(borrow, rename = "name")]
    _name: Text<'a>,
    #[serde(borrow)]
    mount_path: Text<'a>,
}

/// Which container of the pod is the restore target.
#[derive(Debug)]
pub(crate) enum Choice<'a, 's> {
    /// Found.
    Container(&'s Container<'a>),
    /// The checkpoint names a container the pod does not have.
    Missing(&'s str),
    /// No name, and not exactly one container asks for GPUs.
    Unknown(usize),
}

/// Whether a container asks for GPUs: NVIDIA extended resources or a resource claim (DRA).
fn asks_for_gpus(c: &Container<'_>) -> bool {
    let Some(r) = c.resources.as_ref() else {
        return false;
    };
    let nvidia = |m: &Option<Quantities<'_>>| {
        m.as_ref()
            .is_some_and(|m| m.keys().any(|k| k.starts_with(NVIDIA_PREFIX)))
    };
    nvidia(&r.limits) || nvidia(&r.requests) || r.claims.as_ref().is_some_and(|c| !c.is_empty())
}

/// The restore container: the one the checkpoint names, else the only one asking for GPUs.
pub(crate) fn choose<'a, 's>(spec: &'s Spec<'a>, named: Option<&'s str>) -> Choice<'a, 's> {
    if let Some(name) = named {
        return spec
            .containers
            .iter()
            .find(|c| c.name == name)
            .map_or(Choice::Missing(name), Choice::Container);
    }
    let mut gpu = spec.containers.iter().filter(|c| asks_for_gpus(c));
    match (gpu.next(), gpu.next()) {
        (Some(c), None) => Choice::Container(c),
        (None, _) => Choice::Unknown(0),
        (Some(_), Some(_)) => Choice::Unknown(2 + gpu.count()),
    }
}

/// The image's digest when the reference pins one (`repo@sha256:…`); a tag names no content.
pub(crate) fn image_digest(image: &str) -> Option<&str> {
    let (_, digest) = image.rsplit_once('@')?;
    digest.starts_with("sha256:").then_some(digest)
}

/// The container's facts. Lists the spec leaves out are known to be empty: no mounts, no GPU
/// limits and no claims are facts, not unknowns.
pub(crate) fn facts(c: &Container<'_>) -> Pod {
    let resources = c.resources.as_ref();
    let limits = resources.and_then(|r| r.limits.as_ref());
    let requests = resources.and_then(|r| r.requests.as_ref());
    let limit = |name: &str| {
        limits
            .and_then(|l| l.get(name))
            .map(|q| Quantity::new(q.as_ref()))
    };
    let mut gpu_requests = BTreeMap::new();
    // Extended resources are limits; a request alone stands for an equal limit.
    for map in [requests, limits].into_iter().flatten() {
        for (k, v) in map.iter().filter(|(k, _)| k.starts_with(NVIDIA_PREFIX)) {
            gpu_requests.insert(k.to_string(), Quantity::new(v.as_ref()));
        }
    }
    let claims = resources
        .and_then(|r| r.claims.as_ref())
        .map(|cs| cs.iter().map(|c| c.name.to_string()).collect())
        .unwrap_or_default();
    let mounts = c
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.to_string())
        .collect();
    let image = c.image.as_deref();
    Pod {
        image_digest: image.and_then(image_digest).map(str::to_string),
        image: image.map(str::to_string),
        cpu_limit: limit("cpu"),
        memory_limit: limit("memory"),
        mounts: Some(mounts),
        gpu_requests: Some(gpu_requests),
        resource_claims: Some(claims),
        ..Pod::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_only_from_pinned_references() {
        assert_eq!(image_digest("nvcr.io/x/y:1"), None);
        assert_eq!(image_digest("nvcr.io/x/y@sha256:abc"), Some("sha256:abc"));
        assert_eq!(image_digest("nvcr.io/x/y:1@sha256:abc"), Some("sha256:abc"));
        assert_eq!(image_digest("localhost:5000/y"), None);
    }
}

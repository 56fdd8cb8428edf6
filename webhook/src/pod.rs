//! A pod spec's facts as a restore target: the restore container's limits, GPU requests,
//! mounts and image.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use miggate_compat::{Pod, Quantity};

/// The resource-name prefix of NVIDIA's device plugin (`nvidia.com/gpu`, `nvidia.com/mig-…`).
const NVIDIA_PREFIX: &str = "nvidia.com/";

/// A pod object's spec, read from the review's object in place (no copy of the rest).
pub(crate) fn spec_of(obj: &kube::core::DynamicObject) -> Result<Option<PodSpec>, serde_json::Error> {
    #[derive(serde::Deserialize)]
    struct PodObject {
        #[serde(default)]
        spec: Option<PodSpec>,
    }
    use serde::Deserialize as _;
    PodObject::deserialize(&obj.data).map(|p| p.spec)
}

/// Which container of the pod is the restore target.
#[derive(Debug)]
pub(crate) enum Choice<'a> {
    /// Found.
    Container(&'a Container),
    /// The checkpoint names a container the pod does not have.
    Missing(&'a str),
    /// No name, and not exactly one container asks for GPUs.
    Unknown(usize),
}

/// Whether a container asks for GPUs: NVIDIA extended resources or a resource claim (DRA).
fn asks_for_gpus(c: &Container) -> bool {
    let Some(r) = c.resources.as_ref() else {
        return false;
    };
    let nvidia = |m: &Option<BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>| {
        m.as_ref()
            .is_some_and(|m| m.keys().any(|k| k.starts_with(NVIDIA_PREFIX)))
    };
    nvidia(&r.limits) || nvidia(&r.requests) || r.claims.as_ref().is_some_and(|c| !c.is_empty())
}

/// The restore container: the one the checkpoint names, else the only one asking for GPUs.
pub(crate) fn choose<'a>(spec: &'a PodSpec, named: Option<&'a str>) -> Choice<'a> {
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
pub(crate) fn facts(c: &Container) -> Pod {
    let resources = c.resources.as_ref();
    let limits = resources.and_then(|r| r.limits.as_ref());
    let requests = resources.and_then(|r| r.requests.as_ref());
    let limit = |name: &str| {
        limits
            .and_then(|l| l.get(name))
            .map(|q| Quantity::new(q.0.as_str()))
    };
    let mut gpu_requests = BTreeMap::new();
    // Extended resources are limits; a request alone stands for an equal limit.
    for map in [requests, limits].into_iter().flatten() {
        for (k, v) in map.iter().filter(|(k, _)| k.starts_with(NVIDIA_PREFIX)) {
            gpu_requests.insert(k.clone(), Quantity::new(v.0.as_str()));
        }
    }
    let claims = resources
        .and_then(|r| r.claims.as_ref())
        .map(|cs| cs.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    let mounts = c
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| m.mount_path.clone())
        .collect();
    let image = c.image.clone();
    Pod {
        image_digest: image.as_deref().and_then(image_digest).map(str::to_string),
        image,
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

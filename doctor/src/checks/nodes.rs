//! GPU nodes and where their inventory is read from, by the same reader the webhook uses
//! (`miggate_inventory::best_or_why`): a GpuNode, the DRA driver's ResourceSlices, or GFD's
//! labels, with the notes a partial source gives. A node with GPUs (its labels or capacity) and
//! no readable source is a failure: restores bound there pass unchecked.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use miggate_crds::GpuNode;
use miggate_inventory::{NodeObjects, Source, best_or_why, is_gpu_node};

use super::unreadable;
use crate::{Area, Cluster, Finding, quoted};

const PUBLISH: &str = "run miggate's publisher there (publisher.enabled, and publisher.nodeSelector selecting the node), or GFD or the NVIDIA DRA driver";

pub(super) fn check(cluster: &Cluster, out: &mut Vec<Finding>) {
    let (nodes, gpu_nodes, slices) = match (&cluster.nodes, &cluster.gpu_nodes, &cluster.slices) {
        (Err(e), _, _) => return out.push(unreadable(Area::Nodes, "Nodes", e)),
        (_, Err(e), _) => return out.push(unreadable(Area::Nodes, "GpuNodes", e)),
        (_, _, Err(e)) => return out.push(unreadable(Area::Nodes, "ResourceSlices", e)),
        (Ok(n), Ok(g), Ok(s)) => (n, g, s),
    };
    judge(nodes, gpu_nodes, slices, out);
}

/// Every GPU node's source: passes counted by source, each problem on its own line.
pub(super) fn judge(nodes: &[Node], gpu_nodes: &[GpuNode], slices: &[ResourceSlice], out: &mut Vec<Finding>) {
    let by_name: HashMap<&str, &GpuNode> = gpu_nodes
        .iter()
        .filter_map(|g| Some((g.metadata.name.as_deref()?, g)))
        .collect();
    let mut slices_of: HashMap<&str, Vec<&ResourceSlice>> = HashMap::new();
    for slice in slices {
        if let Some(node) = slice.spec.node_name.as_deref() {
            slices_of.entry(node).or_default().push(slice);
        }
    }
    let mut clean: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut gpu = 0;
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let gpu_node = by_name.get(name).copied();
        let its_slices = slices_of.get(name).cloned().unwrap_or_default();
        if !is_gpu_node(node) && gpu_node.is_none() && its_slices.is_empty() {
            continue;
        }
        gpu += 1;
        let objects = NodeObjects {
            gpu_node,
            node: Some(node),
            slices: &its_slices,
        };
        let shown = quoted(name);
        match best_or_why(&objects) {
            Err(missing) => {
                let why = if missing.passed_over.is_empty() {
                    "no GpuNode, GFD labels or ResourceSlices".to_string()
                } else {
                    missing
                        .passed_over
                        .iter()
                        .map(|p| quoted(&p.to_string()))
                        .collect::<Vec<_>>()
                        .join("; ")
                };
                out.push(Finding::fail(
                    Area::Nodes,
                    format!("node {shown} has GPUs but no usable inventory ({why}): restores bound there pass unchecked"),
                    PUBLISH,
                ));
            }
            Ok(inventory) if inventory.source == Source::GpuNode && inventory.notes.is_empty() => {
                *clean.entry(inventory.source.as_str()).or_default() += 1;
            }
            Ok(inventory) => {
                let mut said: Vec<String> = inventory.notes.iter().map(|n| quoted(&n.to_string())).collect();
                if inventory.source != Source::GpuNode {
                    said.insert(
                        0,
                        "no GpuNode: facts its source does not publish are unknown".to_string(),
                    );
                }
                out.push(Finding::warn(
                    Area::Nodes,
                    format!(
                        "node {shown}: inventory from {}: {}",
                        inventory.source.as_str(),
                        said.join("; ")
                    ),
                    if inventory.source == Source::GpuNode {
                        format!("kubectl get gpunode {shown} -o yaml (its conditions say more)")
                    } else {
                        PUBLISH.to_string()
                    },
                ));
            }
        }
    }
    if gpu == 0 {
        out.push(Finding::warn(
            Area::Nodes,
            "no GPU node: no Node has nvidia.com/gpu.present, GFD's labels, GPU capacity, a GpuNode or ResourceSlices",
            "label the GPU nodes (the GPU Operator does) so the publisher runs there",
        ));
    }
    for (source, count) in clean {
        out.push(Finding::pass(
            Area::Nodes,
            format!("{count} GPU node(s) read from their {source}, complete"),
        ));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::Status;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        n
    }

    #[test]
    fn a_gpu_node_without_a_source_fails_and_a_cpu_node_is_not_one() {
        let mut out = Vec::new();
        judge(
            &[
                node("gpu-1", &[("nvidia.com/gpu.present", "true")]),
                node("cpu-1", &[("kubernetes.io/os", "linux")]),
            ],
            &[],
            &[],
            &mut out,
        );
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].status, Status::Fail);
        insta::assert_snapshot!(out[0].message, @"node gpu-1 has GPUs but no usable inventory (no GpuNode, GFD labels or ResourceSlices): restores bound there pass unchecked");
    }

    #[test]
    fn no_gpu_node_at_all_is_a_warning() {
        let mut out = Vec::new();
        judge(&[node("cpu-1", &[])], &[], &[], &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].status, Status::Warn);
    }

    #[test]
    fn gfd_labels_are_a_partial_source() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testdata/inventory/gfd-mixed-gpu-node-7.yaml"
        ))
        .unwrap();
        let n: Node = serde_saphyr::from_str(&text).unwrap();
        let mut out = Vec::new();
        judge(&[n], &[], &[], &mut out);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].status, Status::Warn, "{out:?}");
        assert!(out[0].message.contains("inventory from GFD labels"), "{out:?}");
    }
}

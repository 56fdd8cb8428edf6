//! Which nodes can take a checkpoint: the checkpoint compared in offer mode with every node's
//! inventory, best fit first (`miggate where`).
//!
//! Before a restore is scheduled, an operator wants to know where it could go and, for the
//! nodes where it cannot, why not, without trying each node. Offer mode already answers one
//! node; this ranks many, so the answer is the same as `miggate check --mode offer` per node.

use crate::checks::{Devices, Options, Target, evaluate_target};
use crate::manifest::GpuManifest;
use crate::report::{CheckResult, Report};
use crate::vocab::Mode;

/// One node's answer for a checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFit<'a> {
    /// The node's name, as the caller gave it.
    pub node: &'a str,
    /// The offer-mode report for this node.
    pub report: Report,
    /// How many of the node's devices in the checkpoint's classes (kind, model, profile) would
    /// be left over: the best fit leaves fewest, keeping bigger nodes for bigger checkpoints.
    /// `None` where either side's devices are not recorded.
    pub spare: Option<usize>,
    /// The node's devices the checkpoint would be restored onto, from the report's device map,
    /// in the checkpoint's device order; `None` when there is no map (a refusal, or devices
    /// without UUIDs such as a PodSnapshotContent's).
    pub devices: Option<Vec<String>>,
}

impl NodeFit<'_> {
    /// Whether the checkpoint fits this node.
    pub fn fits(&self) -> bool {
        self.report.compatible
    }

    /// The first refusing check, in report order.
    pub fn first_refusal(&self) -> Option<&CheckResult> {
        self.report.refusals().next()
    }
}

/// Evaluates `source` in offer mode against every node (whatever `options.mode` says) and
/// sorts the answers: fitting nodes first, fewest spare devices first (unknown last), then
/// by name; refused nodes after, by name.
pub fn rank_nodes<'a>(
    source: &GpuManifest,
    nodes: impl IntoIterator<Item = (&'a str, &'a GpuManifest)>,
    options: &Options,
) -> Vec<NodeFit<'a>> {
    rank_nodes_listed(
        source,
        nodes.into_iter().map(|(node, m)| (node, m, false)),
        options,
    )
}

/// [`rank_nodes`], with each node saying whether its inventory lists every slice exactly (see
/// [`Target::with_slices_listed`]): a node judged from GPU Feature Discovery's counts, where a
/// shortfall is certain though some devices' kind is unknown.
pub fn rank_nodes_listed<'a>(
    source: &GpuManifest,
    nodes: impl IntoIterator<Item = (&'a str, &'a GpuManifest, bool)>,
    options: &Options,
) -> Vec<NodeFit<'a>> {
    let options = Options {
        mode: Mode::Offer,
        ..options.clone()
    };
    let wanted = source.devices().map(Devices::read);
    let mut out: Vec<NodeFit<'a>> = nodes
        .into_iter()
        .map(|(node, inventory, listed)| {
            let target = Target::node(inventory).with_slices_listed(listed);
            let report = evaluate_target(source, target, &options);
            let spare = match (&wanted, inventory.devices()) {
                // A node that does not know how many devices of a class it has has no spare
                // count to rank by.
                (Some(w), Some(list))
                    if report.compatible
                        && inventory.nvidia.as_ref().is_none_or(|n| n.uncounted.is_empty()) =>
                {
                    Some(spare(w, &Devices::read(list)))
                }
                _ => None,
            };
            let devices = report
                .device_map
                .as_deref()
                .filter(|_| report.compatible)
                .map(|map| targets(map, source));
            NodeFit {
                node,
                report,
                spare,
                devices,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.fits()
            .cmp(&a.fits())
            .then_with(|| {
                if a.fits() {
                    a.spare.unwrap_or(usize::MAX).cmp(&b.spare.unwrap_or(usize::MAX))
                } else {
                    std::cmp::Ordering::Equal
                }
            })
            .then_with(|| a.node.cmp(b.node))
    });
    out
}

/// The node's devices in the checkpoint's classes, less those the checkpoint takes.
fn spare(wanted: &Devices<'_>, node: &Devices<'_>) -> usize {
    wanted
        .tallies
        .iter()
        .map(|w| {
            let have: usize = node
                .tallies
                .iter()
                // What the checkpoint did not record (a model, a profile) admits any, as the
                // checks' unknowns do.
                .filter(|t| {
                    t.kind == w.kind
                        && w.model.is_none_or(|m| t.model == Some(m))
                        && w.profile.is_none_or(|p| t.profile == Some(p))
                })
                .map(|t| t.count)
                .sum();
            have.saturating_sub(w.count)
        })
        .sum()
}

/// The target side of a device map (`src=dst,…`); an empty map means every device stays
/// itself, so the checkpoint's own UUIDs. UUIDs hold neither `,` nor `=`, so splitting is exact.
fn targets(map: &str, source: &GpuManifest) -> Vec<String> {
    if map.is_empty() {
        return source
            .devices()
            .unwrap_or_default()
            .iter()
            .filter_map(|d| d.mappable_uuid().map(str::to_string))
            .collect();
    }
    map.split(',')
        .filter_map(|pair| pair.split_once('=').map(|(_, dst)| dst.to_string()))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::manifest::{Device, Nvidia};

    fn with(devices: &[(&str, Option<&str>, Option<&str>)]) -> GpuManifest {
        GpuManifest {
            nvidia: Some(Nvidia {
                devices: Some(
                    devices
                        .iter()
                        .map(|(uuid, model, profile)| Device {
                            uuid: Some(uuid.parse().unwrap()),
                            product_name: model.map(str::to_string),
                            mig_profile: profile.map(|p| p.parse().unwrap()),
                            ..Device::default()
                        })
                        .collect(),
                ),
                ..Nvidia::default()
            }),
            ..GpuManifest::default()
        }
    }

    #[test]
    fn best_fit_first_then_refusals_by_name() {
        const H: Option<&str> = Some("NVIDIA H100 80GB HBM3");
        // A whole GPU whose model was not recorded (the peer's oldest artifacts).
        let source = with(&[("GPU-src", None, None)]);
        let big = with(&[("GPU-b1", H, None), ("GPU-b2", H, None), ("GPU-b3", H, None)]);
        let small = with(&[("GPU-s1", H, None)]);
        let cut = with(&[("MIG-c1", H, Some("1g.10gb"))]);
        let none = with(&[]);
        let nodes = [
            ("z-big", &big),
            ("y-cut", &cut),
            ("x-small", &small),
            ("w-none", &none),
        ];
        let answer = rank_nodes(&source, nodes, &Options::default());
        let order: Vec<(&str, bool, Option<usize>)> =
            answer.iter().map(|p| (p.node, p.fits(), p.spare)).collect();
        assert_eq!(
            order,
            [
                ("x-small", true, Some(0)),
                ("z-big", true, Some(2)),
                ("w-none", false, None),
                ("y-cut", false, None)
            ]
        );
        assert_eq!(answer[0].devices.as_deref(), Some(&["GPU-s1".to_string()][..]));
        assert_eq!(answer[2].first_refusal().unwrap().check.as_str(), "gpu-count");
    }

    #[test]
    fn an_identity_map_uses_the_checkpoints_own_devices() {
        let node = with(&[("GPU-a", Some("L4"), None)]);
        let answer = rank_nodes(&node, [("self", &node)], &Options::default());
        assert_eq!(answer[0].report.device_map.as_deref(), Some(""));
        assert_eq!(answer[0].devices.as_deref(), Some(&["GPU-a".to_string()][..]));
    }
}

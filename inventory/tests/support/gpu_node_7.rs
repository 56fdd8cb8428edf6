//! gpu-node-7 as each source describes it (its `GpuNode`, the DRA driver's slices of two
//! releases, GFD labels), the checkpoints judged against it, and how a verdict is read
//! (`sources.rs`, `what_sources_tell.rs`). Fixtures: `testdata/inventory/`.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use miggate_compat::{Gpu, GpuManifest, Mode, Options, Outcome, Report, evaluate_target};
use miggate_crds::GpuNode;
use miggate_inventory::{self as inventory, Inventory};
use serde::Deserialize;

use super::testdata;

pub fn fixture(file: &str) -> String {
    testdata(&format!("inventory/{file}"))
}

#[derive(Deserialize)]
pub struct List<T> {
    pub items: Vec<T>,
}

pub fn gpu_node() -> GpuNode {
    serde_saphyr::from_str(&fixture("gpunode-gpu-node-7.yaml")).unwrap()
}
pub fn node(file: &str) -> Node {
    serde_saphyr::from_str(&fixture(file)).unwrap()
}
pub fn slices_v25_12() -> Vec<ResourceSlice> {
    vec![serde_saphyr::from_str(&fixture("dra-v25.12-gpu-node-7.yaml")).unwrap()]
}
pub fn slices_v25_3() -> Vec<ResourceSlice> {
    serde_saphyr::from_str::<List<ResourceSlice>>(&fixture("dra-v25.3-gpu-node-7.yaml"))
        .unwrap()
        .items
}
pub fn without_node_info(mut n: Node) -> Node {
    n.status.as_mut().unwrap().node_info = None;
    n
}

/// Each way the cluster can describe gpu-node-7.
#[derive(Debug, Clone, Copy)]
pub enum From {
    GpuNode,
    DraV25_12,
    DraV25_3,
    GfdMixed,
    GfdMixedNoNodeInfo,
}

pub fn read(from: From) -> Inventory {
    let inv = match from {
        From::GpuNode => inventory::best(&inventory::NodeObjects {
            gpu_node: Some(&gpu_node()),
            node: None,
            slices: &[],
        }),
        From::DraV25_12 => {
            let slices = slices_v25_12();
            let refs: Vec<&ResourceSlice> = slices.iter().collect();
            inventory::best(&inventory::NodeObjects {
                gpu_node: None,
                node: Some(&node("node-gpu-node-7.yaml")),
                slices: &refs,
            })
        }
        From::DraV25_3 => {
            let slices = slices_v25_3();
            let refs: Vec<&ResourceSlice> = slices.iter().collect();
            inventory::best(&inventory::NodeObjects {
                gpu_node: None,
                node: Some(&node("node-gpu-node-7.yaml")),
                slices: &refs,
            })
        }
        From::GfdMixed => inventory::best(&inventory::NodeObjects {
            gpu_node: None,
            node: Some(&node("gfd-mixed-gpu-node-7.yaml")),
            slices: &[],
        }),
        From::GfdMixedNoNodeInfo => inventory::best(&inventory::NodeObjects {
            node: Some(&without_node_info(node("gfd-mixed-gpu-node-7.yaml"))),
            ..Default::default()
        }),
    };
    inv.unwrap_or_else(|| panic!("{from:?} gives no inventory"))
}

pub const KERNEL: &str = "5.15.0-1071-aws";

pub fn checkpoint(kernel: &str, driver: &str, gpus: Vec<miggate_compat::GpuBuilder>) -> GpuManifest {
    let mut b = GpuManifest::builder()
        .kernel(kernel)
        .cpu_arch("amd64")
        .driver(driver);
    for g in gpus {
        b = b.gpu(g);
    }
    b.build().unwrap()
}

/// Checkpoints taken elsewhere, to be judged against gpu-node-7.
#[derive(Debug, Clone, Copy)]
pub enum Ckpt {
    /// Two 3g.40gb slices: fits (the node has exactly two).
    Two3g,
    /// One 3g.40gb slice: fits.
    One3g,
    /// Three 3g.40gb slices: the node has two.
    Three3g,
    /// One whole H100: fits (GPU 1).
    WholeH100,
    /// Two 3g.40gb on another kernel.
    OtherKernel,
    /// Two 3g.40gb on another driver.
    OtherDriver,
    /// Two A100 1g.5gb slices: another model and shape.
    A100Slices,
}

pub fn ckpt(c: Ckpt) -> GpuManifest {
    match c {
        Ckpt::Two3g => checkpoint(KERNEL, "580.82.07", vec![Gpu::h100().cut(["3g.40gb", "3g.40gb"])]),
        Ckpt::One3g => checkpoint(KERNEL, "580.82.07", vec![Gpu::h100().cut(["3g.40gb"])]),
        Ckpt::Three3g => checkpoint(
            KERNEL,
            "580.82.07",
            vec![
                Gpu::h100().cut(["3g.40gb", "3g.40gb"]),
                Gpu::h100().cut(["3g.40gb"]),
            ],
        ),
        Ckpt::WholeH100 => checkpoint(KERNEL, "580.82.07", vec![Gpu::h100()]),
        Ckpt::OtherKernel => checkpoint(
            "6.8.0-1015-nvidia",
            "580.82.07",
            vec![Gpu::h100().cut(["3g.40gb", "3g.40gb"])],
        ),
        Ckpt::OtherDriver => checkpoint(KERNEL, "580.65.06", vec![Gpu::h100().cut(["3g.40gb", "3g.40gb"])]),
        Ckpt::A100Slices => checkpoint(
            KERNEL,
            "580.82.07",
            vec![Gpu::a100_40gb().cut(["1g.5gb", "1g.5gb"])],
        ),
    }
}

pub fn judge(c: Ckpt, inv: &Inventory) -> Report {
    evaluate_target(&ckpt(c), inv.target(), &Options::mode(Mode::Offer))
}

/// A verdict as admission acts on it: admitted or not, and which checks refused.
pub fn verdict(r: &Report) -> (bool, Vec<&'static str>) {
    (r.compatible, r.refusals().map(|x| x.check.as_str()).collect())
}

pub fn unknowns(r: &Report) -> Vec<&'static str> {
    r.results
        .iter()
        .filter(|x| x.outcome == Outcome::Unknown)
        .map(|x| x.check.as_str())
        .collect()
}

/// A report's rows, one line each, for a failing assertion's message.
pub fn table(r: &Report) -> String {
    r.results
        .iter()
        .map(|x| {
            format!(
                "{:18} {:15?} {} | {}",
                x.check.as_str(),
                x.outcome,
                x.source,
                x.target
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub fn with_labels(mut n: Node, labels: &[(&str, &str)]) -> Node {
    let map = n.metadata.labels.as_mut().unwrap();
    for (k, v) in labels {
        if v.is_empty() {
            map.remove(*k);
        } else {
            map.insert((*k).into(), (*v).into());
        }
    }
    n
}

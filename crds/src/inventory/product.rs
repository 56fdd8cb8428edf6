//! GPU product names as GPU Feature Discovery rewrites them, and back.
//!
//! GFD drops characters outside `[A-Za-z0-9-_. ]` and turns runs of white space into `-`
//! (`k8s-device-plugin`, `internal/lm/resource.go: sanitise`), so `NVIDIA H100 80GB HBM3`
//! becomes `NVIDIA-H100-80GB-HBM3`. The rewrite is not reversible in general
//! (`NVIDIA A100-SXM4-40GB` keeps its own dashes), so the way back is a list of the names
//! NVIDIA's tools print, each rewritten the same way and matched exactly. A label that matches
//! none leaves the model unknown rather than guessed: `gpu-model` then admits with a warning.

/// Product names `nvidia-smi` and NVML print (`../shared/reference/mig-profiles.md`, the GFD
/// and DRA driver docs), MIG-capable parts first. Extend when a new part ships.
const KNOWN_PRODUCTS: &[&str] = &[
    "NVIDIA H100 80GB HBM3",
    "NVIDIA H100 PCIe",
    "NVIDIA H100 NVL",
    "NVIDIA H100",
    "NVIDIA H200",
    "NVIDIA H200 NVL",
    "NVIDIA H20",
    "NVIDIA GH200 480GB",
    "NVIDIA B200",
    "NVIDIA GB200",
    "NVIDIA A100-SXM4-40GB",
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA A100-PCIE-40GB",
    "NVIDIA A100 80GB PCIe",
    "NVIDIA A100 40GB PCIe",
    "A100-SXM4-40GB",
    "A100-PCIE-40GB",
    "NVIDIA A30",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
    "NVIDIA L4",
    "NVIDIA L40S",
    "NVIDIA L40",
    "NVIDIA A10G",
    "NVIDIA A10",
    "Tesla T4",
    "Tesla V100-SXM2-16GB",
    "Tesla V100-SXM2-32GB",
];

/// A product name as GFD writes it in `nvidia.com/gpu.product`.
pub fn gfd_product_name(name: &str) -> String {
    let kept: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ' '))
        .collect();
    kept.split_whitespace().collect::<Vec<_>>().join("-")
}

/// The product name NVIDIA's tools print for a GFD product label, when it is one of the
/// known names; `None` for a name this version cannot map back.
pub fn known_product(label: &str) -> Option<&'static str> {
    KNOWN_PRODUCTS
        .iter()
        .copied()
        .find(|known| gfd_product_name(known) == label)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3")]
    #[case("NVIDIA A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB")]
    #[case("Tesla T4", "Tesla-T4")]
    #[case("NVIDIA  RTX (PRO)  6000", "NVIDIA-RTX-PRO-6000")]
    fn names_are_rewritten_as_gfd_does(#[case] name: &str, #[case] label: &str) {
        assert_eq!(gfd_product_name(name), label);
    }

    #[test]
    fn every_known_name_maps_back_to_itself_and_no_two_collide() {
        let mut labels = std::collections::BTreeSet::new();
        for name in KNOWN_PRODUCTS {
            let label = gfd_product_name(name);
            assert!(labels.insert(label.clone()), "{name} collides as {label}");
            assert_eq!(known_product(&label), Some(*name));
        }
        assert_eq!(known_product("NVIDIA-Z9000"), None);
        assert_eq!(
            known_product("NVIDIA H100 80GB HBM3"),
            None,
            "labels have no spaces"
        );
    }
}

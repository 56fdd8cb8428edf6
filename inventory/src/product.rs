//! GPU product names as GPU Feature Discovery rewrites them, and back.
//!
//! GFD drops characters outside `[A-Za-z0-9-_. ]` and turns runs of white space into `-`
//! (`k8s-device-plugin`, `internal/lm/resource.go: sanitise`), so `NVIDIA H100 80GB HBM3`
//! becomes `NVIDIA-H100-80GB-HBM3`. The rewrite is not reversible in general
//! (`NVIDIA A100-SXM4-40GB` keeps its own dashes), so the way back is a list of the names
//! NVIDIA's tools print, each rewritten the same way and matched exactly. A label that matches
//! none leaves the model unknown rather than guessed: `gpu-model` then admits with a warning.

/// Product names `nvidia-smi` and NVML print (NVIDIA's MIG User Guide, "Supported MIG
/// Profiles", and the GFD and DRA driver docs), MIG-capable parts first. Extend when a new part ships.
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

/// The known products that cannot run MIG (NVIDIA's MIG user guide lists the parts that can:
/// A100, A30, H100, H200, H20, GH200, B200, GB200 and the RTX PRO Blackwell server cards).
const NOT_MIG_CAPABLE: &[&str] = &[
    "NVIDIA L4",
    "NVIDIA L40S",
    "NVIDIA L40",
    "NVIDIA A10G",
    "NVIDIA A10",
    "Tesla T4",
    "Tesla V100-SXM2-16GB",
    "Tesla V100-SXM2-32GB",
];

/// Whether a product NVIDIA's tools name `name` can run MIG: `Some(false)` for a known part
/// that cannot (its GPUs are always whole), `Some(true)` for a known MIG-capable part, `None`
/// for a name this version does not know.
pub fn mig_capable(name: &str) -> Option<bool> {
    if NOT_MIG_CAPABLE.contains(&name) {
        Some(false)
    } else {
        KNOWN_PRODUCTS.contains(&name).then_some(true)
    }
}

/// A product name as GFD writes it in `nvidia.com/gpu.product`.
pub fn gfd_product_name(name: &str) -> String {
    let kept: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ' '))
        .collect();
    kept.split_whitespace().collect::<Vec<_>>().join("-")
}

/// The product name NVIDIA's tools print for a GFD product label, when it is one of the
/// known names; `None` for a name this version cannot map back. Time-slicing's `-SHARED`
/// product (`Tesla-T4-SHARED`, GFD's label of a GPU shared between replicas) is the same GPU.
pub fn known_product(label: &str) -> Option<&'static str> {
    let label = label.strip_suffix("-SHARED").unwrap_or(label);
    KNOWN_PRODUCTS
        .iter()
        .copied()
        .find(|known| gfd_product_name(known) == label)
}

/// A vGPU guest's product, read from its GFD label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VgpuProduct<'a> {
    /// The name `nvidia-smi` and NVML print in the guest (`GRID A100-40C`, `NVIDIA A16-4Q`),
    /// what a checkpoint taken there records as its product.
    pub product: String,
    /// The vGPU profile: a framebuffer size in GB and a series letter (`40C`, `4Q`).
    pub profile: &'a str,
}

/// A vGPU guest's product label (`GRID-A100-40C`, `NVIDIA-A16-4Q`, `GRID-A100-3-20C`): a
/// vendor part, the physical GPU's model and the vGPU profile, joined by `-` where the name
/// `nvidia-smi` prints in the guest has one space after the vendor. The profile is the last
/// part, digits and one series letter (`A`, `B`, `C` or `Q`), which no physical product's
/// last part is (`40GB`, `HBM3`, `PCIe`). `None` for any other label.
pub fn vgpu_product(label: &str) -> Option<VgpuProduct<'_>> {
    let label = label.strip_suffix("-SHARED").unwrap_or(label);
    let (vendor, rest) = label.split_once('-')?;
    if !matches!(vendor, "GRID" | "NVIDIA") {
        return None;
    }
    let (model, profile) = rest.rsplit_once('-')?;
    let (size, series) = profile.split_at(profile.len().checked_sub(1)?);
    let ok = !model.is_empty()
        && model.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !size.is_empty()
        && size.bytes().all(|b| b.is_ascii_digit())
        && matches!(series, "A" | "B" | "C" | "Q");
    ok.then(|| VgpuProduct {
        product: format!("{vendor} {rest}"),
        profile,
    })
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

    /// vGPU labels as GFD writes them, read back as the guest's `nvidia-smi` names them; a
    /// physical product is never one.
    #[rstest]
    #[case("GRID-A100-40C", Some(("GRID A100-40C", "40C")))]
    #[case("GRID-A100-8C", Some(("GRID A100-8C", "8C")))]
    #[case("NVIDIA-A16-4Q", Some(("NVIDIA A16-4Q", "4Q")))]
    #[case("GRID-A100-3-20C", Some(("GRID A100-3-20C", "20C")))]
    #[case("NVIDIA-L40S-48Q", Some(("NVIDIA L40S-48Q", "48Q")))]
    #[case("NVIDIA-A100-SXM4-40GB", None)]
    #[case("NVIDIA-H100-80GB-HBM3", None)]
    #[case("NVIDIA-A10", None)]
    #[case("NVIDIA-H100-PCIe", None)]
    #[case("GRID-A100-40X", None)]
    #[case("GRID-40C", None)]
    #[case("GRID--40C", None)]
    #[case("GRID-A100-C", None)]
    #[case("Tesla-T4", None)]
    #[case("NVIDIA-A16-4Q-SHARED", Some(("NVIDIA A16-4Q", "4Q")))]
    #[case("", None)]
    fn vgpu_labels_are_read_as_the_guest_names_them(#[case] label: &str, #[case] read: Option<(&str, &str)>) {
        let got = vgpu_product(label);
        assert_eq!(
            got.as_ref().map(|v| (v.product.as_str(), v.profile)),
            read,
            "{label}"
        );
    }

    #[test]
    fn parts_that_cannot_run_mig_are_known_products() {
        for name in NOT_MIG_CAPABLE {
            assert!(KNOWN_PRODUCTS.contains(name), "{name}");
            assert_eq!(mig_capable(name), Some(false));
        }
        assert_eq!(mig_capable("NVIDIA H100 80GB HBM3"), Some(true));
        assert_eq!(mig_capable("GRID A100-40C"), None);
    }

    #[test]
    fn no_known_product_reads_as_a_vgpu() {
        for name in KNOWN_PRODUCTS {
            assert_eq!(vgpu_product(&gfd_product_name(name)), None, "{name}");
        }
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
        assert_eq!(known_product("Tesla-T4-SHARED"), Some("Tesla T4"));
        assert_eq!(
            known_product("NVIDIA H100 80GB HBM3"),
            None,
            "labels have no spaces"
        );
    }
}

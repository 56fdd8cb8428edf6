//! Source 3: GPU Feature Discovery's labels on the `Node`: node-wide counts.
//!
//! GFD (`NVIDIA/k8s-device-plugin`, `internal/lm`) labels a node with its GPU product, count
//! and memory, and per MIG strategy:
//! - `mixed`: `nvidia.com/mig-<profile>.count` (and `.memory`, `.product`) per profile, with
//!   `+` in a profile written as `.` (`1g.10gb+me` as `mig-1g.10gb.me`); `nvidia.com/gpu.*`
//!   keeps describing the physical GPUs, MIG-enabled ones counted in `gpu.count` with
//!   `gpu.replicas=0` when every GPU of that product is cut;
//! - `single`: `nvidia.com/gpu.product=<model>-MIG-<profile>` and `gpu.count` = slices
//!   (`<model>-MIG-INVALID` when the node breaks the strategy's rules);
//! - `none`: whole GPUs only.
//!
//! Labels carry no UUIDs, no parent GPU and no placement, and lag the node by GFD's sleep
//! interval. While mig-manager reports `nvidia.com/mig.config.state` other than `success` the
//! node is in flux and nothing here is read; a node without that label (MIG made by hand, no
//! mig-manager) is read as GFD counted it. `nvidia.com/mig.capable=false`, or mig-manager's
//! `all-disabled` applied, makes MIG certainly off: the GPUs counted are whole. A vGPU guest's
//! product (`GRID-A100-40C`, `NVIDIA-A16-4Q`) is read as the name its `nvidia-smi` prints.
//! Kernel and architecture come from `Node.status.nodeInfo` (the kubelet's, not GFD's).
//! Where MIG may be on, whole GPUs come out without a UUID, which compat classes as devices
//! of unknown kind: the GPU checks then answer unknown, never refuse on a guess.

use k8s_openapi::api::core::v1::Node;
use miggate_compat::{Device, GpuManifest, MigProfile, MigStrategy, Nvidia, VersionText};

use super::product::known_product;
use super::slices::MAX_DEVICES;
use super::{Inventory, MAX_TEXT_BYTES, Source, host_from_node, quote, unreadable};
use crate::error::Error;

/// The most `nvidia.com/` labels read from one node; GFD writes a few dozen (about twelve per
/// MIG profile). A node past this is refused as a source, not read in part.
pub const MAX_GFD_LABELS: usize = 512;

const PREFIX: &str = "nvidia.com/";

/// The inventory GFD's labels on `node` describe: devices counted per profile and whole GPUs,
/// product names mapped back, the driver version, the MIG strategy; kernel and architecture
/// from `status.nodeInfo`.
///
/// `Ok(None)` when the node has no GFD labels. An error when the labels cannot be trusted: a
/// MIG layout not settled (`nvidia.com/mig.config.state` other than `success`), the single
/// strategy's `INVALID` product, a count that is not a number.
pub fn from_gfd_labels(node: &Node) -> Result<Option<Inventory>, Error> {
    let labels = GfdLabels::read(node)?;
    // mig-manager changing the layout (or failed to): the labels are not the node's. An
    // inventory that knows nothing, with a note that names the state, so nothing read here
    // refuses. Before the test for GFD's own labels: the GPU Operator removes
    // `nvidia.com/gpu.product` while a change is pending, and the state still says why.
    if let Some(state) = super::reconfiguring(node) {
        return Ok(Some(super::in_flux(unknown_inventory(labels.node), state)));
    }
    if !labels.written_by_gfd() {
        return Ok(None);
    }
    let mig = MigFacts::read(&labels)?;
    let mut notes =
        vec!["GFD labels: counts per node only; device UUIDs and parent GPUs unknown".to_string()];
    if mig.has_mig() && labels.get("mig.config.state").is_none() {
        // No mig-manager on the node (MIG made by hand, `nvidia-smi mig` or mig-parted run on
        // the host): nothing is in flux, the counts are GFD's reading of the device plugin's.
        notes.push(
            "GFD labels: no mig-manager state (nvidia.com/mig.config.state): the MIG layout is read as GFD counted it".into(),
        );
    }
    let devices = count_devices(node, &labels, &mig, &mut notes)?;
    let devices_known = devices.is_some();
    if devices.is_none() {
        notes.push(
            "GFD labels: no nvidia.com/gpu.count: how many GPUs the node has is unknown, so the GPU checks are unknown".into(),
        );
    }
    let host = host_from_node(labels.node, Some(node));
    if host.kernel_version.is_none() {
        notes.push("GFD labels: no Node.status.nodeInfo kernelVersion; kernel checks are unknown".into());
    }
    notes.truncate(super::MAX_NOTES);
    let manifest = GpuManifest {
        host: Some(host),
        nvidia: Some(Nvidia {
            driver_version: version_text(driver_version(&labels)),
            cuda_driver_version: version_text(cuda_version(&labels)),
            mig_strategy: mig.strategy,
            devices: devices.map(|d| d.list),
            ..Nvidia::default()
        }),
        ..GpuManifest::default()
    };
    Ok(Some(Inventory {
        manifest: std::sync::Arc::new(manifest),
        source: Source::GfdLabels,
        notes,
        passed_over: Vec::new(),
        slices_listed: devices_known && mig.slices_listed(),
        supply: None,
    }))
}

/// A node's `nvidia.com/` labels with the prefix cut off, and the node's name for the errors
/// they cause: every later stage reads the labels through this, never the node's whole map.
struct GfdLabels<'a> {
    /// The node's name, as the errors and the host name it.
    node: &'a str,
    /// `(key without nvidia.com/, value)`, in key order, at most [`MAX_GFD_LABELS`].
    labels: Vec<(&'a str, &'a str)>,
}

impl<'a> GfdLabels<'a> {
    /// Reads the `nvidia.com/` keys by range, so a node's other labels are never walked, and
    /// refuses a node with more than [`MAX_GFD_LABELS`] of them rather than reading it in part.
    fn read(node: &'a Node) -> Result<Self, Error> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let labels: Vec<(&str, &str)> = match node.metadata.labels.as_ref() {
            Some(all) => all
                .range::<str, _>((std::ops::Bound::Included(PREFIX), std::ops::Bound::Unbounded))
                .take_while(|(k, _)| k.starts_with(PREFIX))
                .take(MAX_GFD_LABELS + 1)
                .map(|(k, v)| (&k[PREFIX.len()..], v.as_str()))
                .collect(),
            None => Vec::new(),
        };
        let read = Self { node: name, labels };
        if read.labels.len() > MAX_GFD_LABELS {
            return Err(read.bad(format!("more than {MAX_GFD_LABELS} nvidia.com/ labels")));
        }
        Ok(read)
    }

    /// The labels' error, naming this source and node.
    fn bad(&self, why: String) -> Error {
        unreadable(Source::GfdLabels, self.node, why)
    }

    /// A label's value, trimmed. The keys are in order (a map's range with one prefix cut
    /// off), so a lookup is a binary search, not a walk of up to [`MAX_GFD_LABELS`].
    fn get(&self, key: &str) -> Option<&'a str> {
        self.labels
            .binary_search_by(|(k, _)| (*k).cmp(key))
            .ok()
            .map(|i| self.labels[i].1.trim())
    }

    /// A label that must be a device count: an error when it is not a number or exceeds
    /// [`MAX_DEVICES`], so a wrong count never passes as zero.
    fn count(&self, key: &str) -> Result<Option<usize>, Error> {
        self.get(key).map(|v| self.count_of(key, v)).transpose()
    }

    /// [`GfdLabels::count`] of a value already at hand.
    fn count_of(&self, key: &str, value: &str) -> Result<usize, Error> {
        let value = value.trim();
        value
            .parse::<usize>()
            .ok()
            .filter(|n| *n <= MAX_DEVICES)
            .ok_or_else(|| self.bad(format!("nvidia.com/{key}={} is not a device count", quote(value))))
    }

    /// A memory label in MiB; one that is not a number leaves the memory unknown.
    fn memory_mib(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(|m| m.parse().ok())
    }

    /// GFD always writes one of these: without them the node is not a GFD source at all.
    fn written_by_gfd(&self) -> bool {
        self.get("gpu.product").is_some()
            || self.get("gpu.count").is_some()
            || self.get("gfd.timestamp").is_some()
            || self.get("mig.strategy").is_some()
            || self
                .labels
                .iter()
                .any(|(k, _)| k.starts_with("mig-") && k.ends_with(".count"))
    }
}

/// One `nvidia.com/mig-<profile>.count` label (mixed strategy).
struct ProfileCount<'a> {
    /// The profile as the label writes it (`+` as `.`).
    label: &'a str,
    /// Its count.
    count: usize,
}

/// What the labels say about MIG, read and checked before anything is built, so the errors
/// come in one fixed order whatever the node holds.
struct MigFacts<'a> {
    /// `nvidia.com/mig.strategy`, when labelled.
    strategy: Option<MigStrategy>,
    /// `nvidia.com/gpu.product`, trimmed.
    product_label: Option<&'a str>,
    /// The single strategy's `<model>-MIG-<profile>` product, split.
    single_mig: Option<(&'a str, &'a str)>,
    /// The mixed strategy's counts per profile, in label order.
    profiles: Vec<ProfileCount<'a>>,
    /// MIG is certainly off on every GPU: GFD says the GPUs cannot do MIG
    /// (`nvidia.com/mig.capable=false`: a T4, an L4, a vGPU guest), the product is a known
    /// part that cannot, or mig-manager applied `all-disabled`. Then the GPUs counted are
    /// whole, and a slice is certainly missing.
    off: bool,
}

impl<'a> MigFacts<'a> {
    /// The strategy, the product and the counts per profile; an unknown strategy or a count
    /// that is not one is an error.
    fn read(labels: &GfdLabels<'a>) -> Result<Self, Error> {
        let strategy = match labels.get("mig.strategy") {
            None => None,
            Some("none") => Some(MigStrategy::None),
            Some("single") => Some(MigStrategy::Single),
            Some("mixed") => Some(MigStrategy::Mixed),
            Some(other) => {
                return Err(labels.bad(format!("unknown nvidia.com/mig.strategy {}", quote(other))));
            }
        };
        let product_label = labels.get("gpu.product");
        let single_mig = product_label.and_then(|p| p.rsplit_once("-MIG-"));
        let mut profiles = Vec::new();
        for (key, value) in &labels.labels {
            if let Some(profile) = key.strip_prefix("mig-").and_then(|k| k.strip_suffix(".count")) {
                let count = labels.count_of(key, value)?;
                profiles.push(ProfileCount {
                    label: profile,
                    count,
                });
            }
        }
        // A known product that cannot run MIG (`Tesla-T4`, or time-slicing's `Tesla-T4-SHARED`).
        let whole_only_part = product_label
            .and_then(known_product)
            .and_then(super::product::mig_capable)
            == Some(false);
        let off = whole_only_part
            || labels.get("mig.capable") == Some("false")
            || (labels.get("mig.config") == Some("all-disabled")
                && labels.get("mig.config.state") == Some("success"));
        Ok(Self {
            strategy,
            product_label,
            single_mig,
            profiles,
            off,
        })
    }

    /// Whether any GPU is counted as cut: a slice labelled, or the single strategy's product.
    fn has_mig(&self) -> bool {
        self.any_slices() || self.single_mig.is_some()
    }

    /// Whether a profile counts at least one slice.
    fn any_slices(&self) -> bool {
        self.profiles.iter().any(|p| p.count > 0)
    }

    /// With the layout applied, the counts per profile are exact: every slice is listed, and
    /// the GPUs counted (no UUID, so of unknown kind) are whole ones or the slices' parents.
    /// With MIG certainly off there are no slices at all, which is as exact.
    fn slices_listed(&self) -> bool {
        self.has_mig() || !self.profiles.is_empty() || (self.off && self.single_mig.is_none())
    }
}

/// The inventory of a node whose MIG layout is changing: only the host's name is known.
fn unknown_inventory(name: &str) -> Inventory {
    Inventory {
        manifest: std::sync::Arc::new(GpuManifest {
            host: Some(host_from_node(name, None)),
            ..GpuManifest::default()
        }),
        source: Source::GfdLabels,
        notes: Vec::new(),
        passed_over: Vec::new(),
        slices_listed: false,
        supply: None,
    }
}

/// The devices counted so far. Labels say how many, not which, so a node could otherwise
/// make one inventory list any number: the total is capped at [`MAX_DEVICES`].
#[derive(Default)]
struct Counted {
    /// The devices, one entry per device counted.
    list: Vec<Device>,
    /// How many were counted, saturating.
    total: usize,
}

impl Counted {
    /// Adds `n` copies of `device`, or refuses the labels once the total passes the cap.
    fn push(&mut self, labels: &GfdLabels<'_>, n: usize, device: Device) -> Result<(), Error> {
        self.total = self.total.saturating_add(n);
        if self.total > MAX_DEVICES {
            return Err(labels.bad(format!("more than {MAX_DEVICES} devices counted")));
        }
        self.list.extend(std::iter::repeat_n(device, n));
        Ok(())
    }
}

/// The devices per the strategy: the single strategy's slices, or the mixed strategy's
/// slices per profile and then the whole GPUs.
///
/// `None` when `nvidia.com/gpu.count` is absent: GFD always writes it, so its absence is a
/// fact missing, never a count of 0 (which would refuse every GPU checkpoint for certain).
fn count_devices(
    node: &Node,
    labels: &GfdLabels<'_>,
    mig: &MigFacts<'_>,
    notes: &mut Vec<String>,
) -> Result<Option<Counted>, Error> {
    let Some(gpus) = labels.count("gpu.count")? else {
        return Ok(None);
    };
    let mut counted = Counted::default();
    if let Some((model, profile)) = mig.single_mig {
        single_strategy_slices(labels, model, profile, gpus, &mut counted, notes)?;
    } else {
        profile_slices(labels, mig, &mut counted, notes)?;
        whole_gpus(node, labels, mig, gpus, &mut counted, notes)?;
    }
    Ok(Some(counted))
}

/// Single strategy: `gpu.count` slices, all of the one profile the product label names.
/// `INVALID` there means GFD found the node breaking the strategy's rules: nothing counts.
fn single_strategy_slices(
    labels: &GfdLabels<'_>,
    model: &str,
    profile: &str,
    n: usize,
    counted: &mut Counted,
    notes: &mut Vec<String>,
) -> Result<(), Error> {
    if profile == "INVALID" {
        return Err(labels.bad(
            "nvidia.com/gpu.product ends in -MIG-INVALID: the node breaks the single strategy's rules".into(),
        ));
    }
    let device = Device {
        product_name: model_of(model, notes),
        mig_profile: mig_profile(profile, notes),
        memory_mib: labels.memory_mib("gpu.memory"),
        ..Device::default()
    };
    counted.push(labels, n, device)
}

/// Mixed strategy: the slices of each profile, their product from the profile's own label
/// (its model part) or else the node's product.
fn profile_slices(
    labels: &GfdLabels<'_>,
    mig: &MigFacts<'_>,
    counted: &mut Counted,
    notes: &mut Vec<String>,
) -> Result<(), Error> {
    for p in &mig.profiles {
        let product = labels
            .get(&format!("mig-{}.product", p.label))
            .and_then(|text| text.rsplit_once("-MIG-").map(|(m, _)| m))
            .or(mig.product_label);
        let device = Device {
            product_name: product.and_then(|m| model_of(m, notes)),
            mig_profile: mig_profile(&unmangle(p.label), notes),
            memory_mib: labels.memory_mib(&format!("mig-{}.memory", p.label)),
            ..Device::default()
        };
        counted.push(labels, p.count, device)?;
    }
    Ok(())
}

/// The GPUs offered whole. `gpu.count` counts cut GPUs too, so with slices present the whole
/// ones come from the device plugin's capacity, or else an upper bound with a note that says so.
fn whole_gpus(
    node: &Node,
    labels: &GfdLabels<'_>,
    mig: &MigFacts<'_>,
    gpus: usize,
    counted: &mut Counted,
    notes: &mut Vec<String>,
) -> Result<(), Error> {
    let replicas = labels.get("gpu.replicas");
    let whole = if replicas == Some("0") {
        // Every GPU of the product is MIG-enabled: none is offered whole.
        Some(0)
    } else if !mig.any_slices() {
        Some(gpus)
    } else {
        // Cut and uncut GPUs of one product share `gpu.count`; the device plugin's
        // `nvidia.com/gpu` capacity counts the uncut ones (times their replicas).
        whole_from_capacity(node, replicas)
    };
    // Without `gpu.product`, the model a profile's own product label names.
    let product = mig.product_label.or_else(|| {
        mig.profiles.iter().find_map(|p| {
            labels
                .get(&format!("mig-{}.product", p.label))
                .and_then(|text| text.rsplit_once("-MIG-").map(|(m, _)| m))
        })
    });
    let device = Device {
        product_name: product.and_then(|p| model_of(p, notes)),
        memory_mib: labels.memory_mib("gpu.memory"),
        ..Device::default()
    };
    match whole {
        Some(n) => counted.push(labels, n, device),
        None => {
            // At least one counted GPU is cut (slices exist): at most the others are
            // whole. Listed as devices of unknown kind, an upper bound that never
            // refuses a whole-GPU checkpoint, while the slices counted stay certain.
            let most = gpus.saturating_sub(1);
            counted.push(labels, most, device)?;
            notes.push(format!(
                "GFD labels: cut and whole GPUs share nvidia.com/gpu.count and the node's nvidia.com/gpu capacity does not say how many are whole; at most {most} counted"
            ));
            Ok(())
        }
    }
}

/// The driver version: GFD's full label, or else its major, minor and revision labels joined.
fn driver_version(labels: &GfdLabels<'_>) -> Option<String> {
    labels
        .get("cuda.driver-version.full")
        .map(str::to_string)
        .or_else(|| {
            match (
                labels.get("cuda.driver.major"),
                labels.get("cuda.driver.minor"),
                labels.get("cuda.driver.rev"),
            ) {
                (Some(a), Some(b), Some(c)) => Some(format!("{a}.{b}.{c}")),
                _ => None,
            }
        })
}

/// The CUDA version the driver supports: the full label, or else major and minor joined.
fn cuda_version(labels: &GfdLabels<'_>) -> Option<String> {
    labels
        .get("cuda.runtime-version.full")
        .map(str::to_string)
        .or_else(
            || match (labels.get("cuda.runtime.major"), labels.get("cuda.runtime.minor")) {
                (Some(a), Some(b)) => Some(format!("{a}.{b}")),
                _ => None,
            },
        )
}

/// A version as the manifest holds it; an empty or oversized label is left out, not kept.
fn version_text(v: Option<String>) -> Option<VersionText> {
    v.filter(|v| !v.is_empty() && v.len() <= MAX_TEXT_BYTES)
        .map(VersionText::new)
}

/// The product name a GFD label stands for, or unknown (with one note per label) when it is
/// not a name this version can map back.
fn model_of(label: &str, notes: &mut Vec<String>) -> Option<String> {
    if let Some(known) = known_product(label) {
        return Some(known.to_string());
    }
    if let Some(vgpu) = super::product::vgpu_product(label) {
        let note = format!(
            "GFD labels: {} is a vGPU ({} of the {} profile); it is compared by that name, so only a checkpoint taken on the same vGPU profile fits",
            quote(label),
            quote(&vgpu.product),
            quote(vgpu.profile)
        );
        if !notes.contains(&note) {
            notes.push(note);
        }
        return Some(vgpu.product);
    }
    let note = format!(
        "GFD labels: product {} is not a name miggate can map back; GPU model unknown",
        quote(label)
    );
    if !notes.contains(&note) {
        notes.push(note);
    }
    None
}

/// A profile from a label, where GFD wrote its `+` as `.`: the first `.` after the memory
/// size was a `+` (`1g.10gb.me` was `1g.10gb+me`, `1g.24gb.me.all` was `1g.24gb+me.all`).
fn unmangle(profile: &str) -> String {
    match profile.find("gb.") {
        Some(i) => format!("{}+{}", &profile[..i + 2], &profile[i + 3..]),
        None => profile.to_string(),
    }
}

/// The profile as nvidia-smi prints it, or unknown (with a note) when the label's text is not
/// one: a slice of unknown shape, never a whole GPU.
fn mig_profile(text: &str, notes: &mut Vec<String>) -> Option<MigProfile> {
    match text.parse() {
        Ok(p) => Some(p),
        Err(_) => {
            notes.push(format!(
                "GFD labels: MIG profile {} is not one miggate reads; its shape is unknown",
                quote(text)
            ));
            None
        }
    }
}

/// Whole GPUs from the node's `nvidia.com/gpu` capacity (what the device plugin advertises
/// under the mixed strategy: uncut GPUs times their replicas), when it divides evenly.
fn whole_from_capacity(node: &Node, replicas: Option<&str>) -> Option<usize> {
    let capacity = node.status.as_ref()?.capacity.as_ref()?.get("nvidia.com/gpu")?;
    let advertised: usize = capacity.0.trim().parse().ok()?;
    let replicas: usize = replicas.unwrap_or("1").parse().ok().filter(|r| *r > 0)?;
    advertised
        .is_multiple_of(replicas)
        .then_some(advertised / replicas)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("1g.10gb", "1g.10gb")]
    #[case("1g.10gb.me", "1g.10gb+me")]
    #[case("1g.24gb.me.all", "1g.24gb+me.all")]
    #[case("4g.48gb.gfx", "4g.48gb+gfx")]
    #[case("7g.80gb", "7g.80gb")]
    fn profiles_get_their_plus_back(#[case] label: &str, #[case] profile: &str) {
        assert_eq!(unmangle(label), profile);
    }
}

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
//!
//! GFD always writes `nvidia.com/gpu.count`; a label set without it is partial (cut from a
//! listing, lost). It is still read for every fact the other labels give, and only those
//! ([`without_gpu_count`]): the single strategy's product says every GPU is cut into its one
//! profile, the mixed strategy's counts give the slices exactly, MIG certainly off says the
//! GPUs are whole, a product alone gives the model. Where the labels name a class of devices
//! but not how many, the kind is uncounted ([`Nvidia::uncounted`]): a checkpoint that needs a
//! number of it is unknown, one that needs a class the labels rule out is refused. Each
//! reading's note names the labels it came from.

use k8s_openapi::api::core::v1::Node;
use miggate_compat::{Device, DeviceKind, GpuManifest, MigProfile, MigStrategy, Nvidia, VersionText};
use miggate_wire::nvidia::{self, PREFIX};

use super::product::known_product;
use super::{Inventory, MAX_DEVICES, MAX_TEXT_BYTES, MigOff, Note, Source, host_from_node, unreadable};
use crate::error::{Error, LabelProblem};

/// The most `nvidia.com/` labels read from one node; GFD writes a few dozen (about twelve per
/// MIG profile). A node past this is refused as a source, not read in part.
pub const MAX_GFD_LABELS: usize = 512;

/// Labels (without `nvidia.com/`) only GFD writes, any of which marks a node GFD labelled:
/// a listing cut short may have lost the product and the count and kept these.
const GFD_OWN: [&str; 11] = [
    "gpu.product",
    "gpu.count",
    "gfd.timestamp",
    "mig.strategy",
    "mig.capable",
    "gpu.family",
    "gpu.machine",
    "gpu.memory",
    "gpu.replicas",
    "gpu.compute.major",
    "cuda.driver-version.full",
];

/// Whether `node` has NVIDIA GPUs by what it says of itself: the GPU Operator's
/// `nvidia.com/gpu.present=true`, a label only GFD writes, or device-plugin capacity of
/// `nvidia.com/gpu` or a `nvidia.com/mig-<profile>` slice. Such a node should have an
/// inventory source; one without is what `miggate doctor` and the
/// `miggate_gpu_nodes_without_inventory` gauge name.
pub fn is_gpu_node(node: &Node) -> bool {
    let labels = node.metadata.labels.iter().flatten();
    let labelled = labels
        .filter_map(|(k, v)| Some((k.strip_prefix(PREFIX)?, v)))
        .any(|(k, v)| {
            (Some(k) == nvidia::GPU_PRESENT.strip_prefix(PREFIX) && v == "true")
                || GFD_OWN.contains(&k)
                || (k.starts_with("mig-") && k.ends_with(".count"))
        });
    let capacity = node
        .status
        .iter()
        .flat_map(|s| s.capacity.iter().flatten())
        .filter_map(|(k, v)| Some((k.strip_prefix(PREFIX)?, v)))
        .any(|(k, v)| (k == "gpu" || k.starts_with("mig-")) && v.0.trim() != "0");
    labelled || capacity
}

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
    let mut notes = vec![Note::CountsOnly];
    if mig.has_mig() && labels.label(nvidia::MIG_CONFIG_STATE).is_none() {
        // No mig-manager on the node (MIG made by hand, `nvidia-smi mig` or mig-parted run on
        // the host): nothing is in flux, the counts are GFD's reading of the device plugin's.
        notes.push(Note::NoMigManager);
    }
    model_from_profiles_note(&labels, &mig, &mut notes);
    // The one reading of MIG off that no label states outright (it follows from a product
    // without `-MIG-`): named, so a slice refused there says which labels ruled it out.
    if mig.off == Some(MigOff::Uncut) && labels.label(nvidia::GPU_COUNT).is_some() {
        notes.push(Note::WholeOff { off: MigOff::Uncut });
    }
    let shown = read_devices(node, &labels, &mig, &mut notes)?;
    if shown.is_none() {
        notes.push(Note::NoGpuCount);
    }
    let host = host_from_node(labels.node, Some(node));
    if host.kernel_version.is_none() {
        notes.push(Note::NoKernel(Source::GfdLabels));
    }
    notes.truncate(super::MAX_NOTES);
    let (devices, uncounted, slices_listed) = match shown {
        Some(s) => (Some(s.counted.list), s.uncounted, s.slices_listed),
        None => (None, Vec::new(), false),
    };
    let manifest = GpuManifest {
        host: Some(host),
        nvidia: Some(Nvidia {
            driver_version: version_text(driver_version(&labels)),
            cuda_driver_version: version_text(cuda_version(&labels)),
            mig_strategy: mig.strategy,
            devices,
            uncounted,
            ..Nvidia::default()
        }),
        ..GpuManifest::default()
    };
    Ok(Some(Inventory {
        manifest: std::sync::Arc::new(manifest),
        source: Source::GfdLabels,
        notes,
        passed_over: Vec::new(),
        slices_listed,
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
            return Err(read.bad(LabelProblem::TooManyLabels {
                limit: MAX_GFD_LABELS,
            }));
        }
        Ok(read)
    }

    /// The labels' error, naming this source and node.
    fn bad(&self, why: LabelProblem) -> Error {
        unreadable(Source::GfdLabels, self.node, why)
    }

    /// A label's value, trimmed. The keys are in order (a map's range with one prefix cut
    /// off), so a lookup is a binary search, not a walk of up to [`MAX_GFD_LABELS`].
    /// A label by its full name (`miggate_wire::nvidia`'s).
    fn label(&self, name: &str) -> Option<&'a str> {
        self.get(name.strip_prefix(PREFIX).unwrap_or(name))
    }

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
            .ok_or_else(|| {
                self.bad(LabelProblem::NotACount {
                    key: key.to_string(),
                    value: value.to_string(),
                })
            })
    }

    /// A memory label in MiB; one that is not a number leaves the memory unknown.
    fn memory_mib(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(|m| m.parse().ok())
    }

    /// Whether GFD labelled the node: one of the labels only GFD writes, about the GPUs or
    /// itself (not the GPU Operator's `gpu.present` or `gpu.deploy.*`, which a node carries
    /// before GFD ever ran). Without one the node is not a GFD source at all.
    fn written_by_gfd(&self) -> bool {
        GFD_OWN.iter().any(|key| self.get(key).is_some())
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
    /// MIG is certainly off on every GPU, and why: GFD says the GPUs cannot do MIG
    /// (`nvidia.com/mig.capable=false`: a T4, an L4, a vGPU guest), the product is a known
    /// part that cannot, or mig-manager applied `all-disabled`. Then the GPUs counted are
    /// whole, and a slice is certainly missing.
    off: Option<MigOff>,
}

impl<'a> MigFacts<'a> {
    /// The strategy, the product and the counts per profile; an unknown strategy or a count
    /// that is not one is an error.
    fn read(labels: &GfdLabels<'a>) -> Result<Self, Error> {
        let strategy = match labels.label(nvidia::MIG_STRATEGY) {
            None => None,
            Some(value) => Some(value.parse::<MigStrategy>().map_err(|_| {
                labels.bad(LabelProblem::UnknownStrategy {
                    value: value.to_string(),
                })
            })?),
        };
        let product_label = labels.label(nvidia::GPU_PRODUCT);
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
        let off = if whole_only_part {
            Some(MigOff::Part)
        } else if labels.label(nvidia::MIG_CAPABLE) == Some("false") {
            Some(MigOff::NotCapable)
        } else if labels.label(nvidia::MIG_CONFIG) == Some("all-disabled")
            && labels.label(nvidia::MIG_CONFIG_STATE) == Some("success")
        {
            Some(MigOff::Disabled)
        } else if strategy == Some(MigStrategy::Single)
            && labels.label(nvidia::MIG_CAPABLE) == Some("true")
            && product_label.is_some()
            && single_mig.is_none()
            && profiles.is_empty()
            && labels.label(nvidia::MIG_CONFIG).is_none()
            && labels.label(nvidia::MIG_CONFIG_STATE).is_none()
        {
            // GFD names a cut GPU `<model>-MIG-<profile>` under the single strategy; a plain
            // product with no layout asked of mig-manager is a GPU no one has cut.
            Some(MigOff::Uncut)
        } else {
            None
        };
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
        self.has_mig() || !self.profiles.is_empty() || (self.off.is_some() && self.single_mig.is_none())
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
            return Err(labels.bad(LabelProblem::TooManyDevices { limit: MAX_DEVICES }));
        }
        self.list.extend(std::iter::repeat_n(device, n));
        Ok(())
    }
}

/// The devices the labels show, and how a restore target reads them.
struct Shown {
    /// One device per device counted; for an uncounted kind, one per class the labels name.
    counted: Counted,
    /// Kinds whose number the labels do not give ([`Nvidia::uncounted`]).
    uncounted: Vec<DeviceKind>,
    /// Whether every slice the node has is listed (see [`Inventory::slices_listed`]).
    slices_listed: bool,
}

impl Shown {
    /// Counted devices, with every slice listed as the MIG facts say.
    fn counted(counted: Counted, slices_listed: bool) -> Self {
        Shown {
            counted,
            uncounted: Vec::new(),
            slices_listed,
        }
    }
}

/// The devices per the labels: counted with `nvidia.com/gpu.count`, else what the labels show
/// without it. `None` when they show nothing of the node's GPUs.
fn read_devices(
    node: &Node,
    labels: &GfdLabels<'_>,
    mig: &MigFacts<'_>,
    notes: &mut Vec<Note>,
) -> Result<Option<Shown>, Error> {
    match labels.count("gpu.count")? {
        Some(gpus) => {
            let counted = count_devices(node, labels, mig, gpus, notes)?;
            Ok(Some(Shown::counted(counted, mig.slices_listed())))
        }
        None => without_gpu_count(node, labels, mig, notes),
    }
}

/// The devices per the strategy: the single strategy's slices, or the mixed strategy's
/// slices per profile and then the whole GPUs, `gpus` being `nvidia.com/gpu.count`.
fn count_devices(
    node: &Node,
    labels: &GfdLabels<'_>,
    mig: &MigFacts<'_>,
    gpus: usize,
    notes: &mut Vec<Note>,
) -> Result<Counted, Error> {
    let mut counted = Counted::default();
    if let Some((model, profile)) = mig.single_mig {
        single_strategy_slices(labels, model, profile, gpus, &mut counted, notes)?;
    } else {
        profile_slices(labels, mig, &mut counted, notes)?;
        whole_gpus(node, labels, mig, gpus, &mut counted, notes)?;
    }
    Ok(counted)
}

/// Without `nvidia.com/gpu.count` (GFD always writes it, so a label set without it is partial:
/// cut from a listing, or lost while an operator restarted): every fact the other labels give,
/// and none they do not. A count is never made up; where the labels say which devices the node
/// has but not how many, the kind is uncounted ([`Nvidia::uncounted`]). In order:
/// - the single strategy's `<model>-MIG-<profile>` product: every GPU is cut into that profile;
/// - the mixed strategy's `nvidia.com/mig-<profile>.count`: the slices, exactly;
/// - MIG certainly off: whole GPUs;
/// - a product alone: the model, the kind and number unknown.
///
/// For the single strategy's slices and for whole GPUs under MIG off, the device plugin's
/// `nvidia.com/gpu` capacity on the node's status gives the number the labels do not (over
/// `nvidia.com/gpu.replicas`, as [`whole_from_capacity`] reads it).
fn without_gpu_count(
    node: &Node,
    labels: &GfdLabels<'_>,
    mig: &MigFacts<'_>,
    notes: &mut Vec<Note>,
) -> Result<Option<Shown>, Error> {
    if let Some((model, profile)) = mig.single_mig {
        return single_without_count(node, labels, (model, profile), notes).map(Some);
    }
    if !mig.profiles.is_empty() {
        return mixed_without_count(labels, mig, notes).map(Some);
    }
    if let Some(off) = mig.off {
        return whole_without_count(node, labels, mig, off, notes).map(Some);
    }
    Ok(model_without_count(labels, mig, notes))
}

/// The number of devices the device plugin advertises as `nvidia.com/gpu` on the node's
/// status, when it is not zero (a device plugin not running advertises none, which says
/// nothing against the labels).
fn advertised(node: &Node, labels: &GfdLabels<'_>) -> Option<usize> {
    whole_from_capacity(node, labels.get("gpu.replicas")).filter(|n| (1..=MAX_DEVICES).contains(n))
}

/// Single strategy without a count: every GPU is cut into the one profile the product names,
/// so a checkpoint on another profile, another model or a whole GPU cannot fit, however many
/// slices there are.
fn single_without_count(
    node: &Node,
    labels: &GfdLabels<'_>,
    (model, profile): (&str, &str),
    notes: &mut Vec<Note>,
) -> Result<Shown, Error> {
    let mut counted = Counted::default();
    let product = labels.label(nvidia::GPU_PRODUCT).unwrap_or_default();
    if let Some(n) = advertised(node, labels) {
        single_strategy_slices(labels, model, profile, n, &mut counted, notes)?;
        notes.push(Note::SingleCounted {
            count: n,
            profile: profile.to_string(),
            product: product.to_string(),
        });
        return Ok(Shown::counted(counted, true));
    }
    single_strategy_slices(labels, model, profile, 1, &mut counted, notes)?;
    notes.push(Note::SingleUncounted {
        profile: profile.to_string(),
        product: product.to_string(),
    });
    Ok(Shown {
        counted,
        uncounted: vec![DeviceKind::Slice],
        slices_listed: true,
    })
}

/// Mixed strategy without `nvidia.com/gpu.count`: GFD labels each profile's count, so the
/// slices are exact. The whole GPUs: none where `nvidia.com/gpu.replicas=0` (GFD writes 0 only
/// when every GPU of the product is cut), or else a number not known, possibly none. The
/// device plugin's capacity is not read for them: without `gpu.count` it would count GPUs
/// of no certain kind, which would leave a checkpoint on the counted slices unknown where the
/// labels settle it.
fn mixed_without_count(
    labels: &GfdLabels<'_>,
    mig: &MigFacts<'_>,
    notes: &mut Vec<Note>,
) -> Result<Shown, Error> {
    let mut counted = Counted::default();
    profile_slices(labels, mig, &mut counted, notes)?;
    let replicas = labels.get("gpu.replicas");
    if replicas == Some("0") {
        notes.push(Note::SlicesNoneWhole);
        return Ok(Shown::counted(counted, true));
    }
    let device = Device {
        product_name: node_product(labels, mig).and_then(|p| model_of(p, notes)),
        memory_mib: labels.memory_mib("gpu.memory"),
        ..Device::default()
    };
    counted.push(labels, 1, device)?;
    notes.push(Note::SlicesWholeUnknown);
    Ok(Shown {
        counted,
        uncounted: vec![DeviceKind::Unknown],
        slices_listed: true,
    })
}

/// MIG certainly off without a count: the GPUs are whole, of the product's model; how many,
/// the device plugin's capacity says or nothing does.
fn whole_without_count(
    node: &Node,
    labels: &GfdLabels<'_>,
    mig: &MigFacts<'_>,
    off: MigOff,
    notes: &mut Vec<Note>,
) -> Result<Shown, Error> {
    let device = Device {
        product_name: mig.product_label.and_then(|p| model_of(p, notes)),
        memory_mib: labels.memory_mib("gpu.memory"),
        ..Device::default()
    };
    let mut counted = Counted::default();
    if let Some(n) = advertised(node, labels) {
        counted.push(labels, n, device)?;
        notes.push(Note::WholeCounted { off, count: n });
        return Ok(Shown::counted(counted, true));
    }
    counted.push(labels, 1, device)?;
    notes.push(Note::WholeUncounted { off });
    Ok(Shown {
        counted,
        uncounted: vec![DeviceKind::Unknown],
        slices_listed: true,
    })
}

/// Neither a count nor a MIG fact: the product's model, GPUs of a kind and number not known
/// (a MIG-capable part before any layout, or a listing cut short). `None` without a product.
fn model_without_count(labels: &GfdLabels<'_>, mig: &MigFacts<'_>, notes: &mut Vec<Note>) -> Option<Shown> {
    let product = mig.product_label?;
    let device = Device {
        product_name: model_of(product, notes),
        memory_mib: labels.memory_mib("gpu.memory"),
        ..Device::default()
    };
    notes.push(Note::ModelOnly {
        product: product.to_string(),
    });
    Some(Shown {
        counted: Counted {
            list: vec![device],
            total: 1,
        },
        uncounted: vec![DeviceKind::Unknown],
        slices_listed: false,
    })
}

/// The node's product as labelled: `nvidia.com/gpu.product`, or else the model part of a
/// profile's own `nvidia.com/mig-<profile>.product`.
fn node_product<'a>(labels: &GfdLabels<'a>, mig: &MigFacts<'a>) -> Option<&'a str> {
    mig.product_label.or_else(|| {
        mig.profiles.iter().find_map(|p| {
            labels
                .get(&format!("mig-{}.product", p.label))
                .and_then(|text| text.rsplit_once("-MIG-").map(|(m, _)| m))
        })
    })
}

/// Says where the model comes from when `nvidia.com/gpu.product` is absent and a profile's own
/// product label names it.
fn model_from_profiles_note(labels: &GfdLabels<'_>, mig: &MigFacts<'_>, notes: &mut Vec<Note>) {
    if mig.product_label.is_some() {
        return;
    }
    let from = mig.profiles.iter().find_map(|p| {
        let key = format!("mig-{}.product", p.label);
        labels
            .get(&key)
            .filter(|text| text.contains("-MIG-"))
            .map(|_| key)
    });
    if let Some(key) = from {
        notes.push(Note::ModelFromProfile { key });
    }
}

/// Single strategy: `gpu.count` slices, all of the one profile the product label names.
/// `INVALID` there means GFD found the node breaking the strategy's rules: nothing counts.
fn single_strategy_slices(
    labels: &GfdLabels<'_>,
    model: &str,
    profile: &str,
    n: usize,
    counted: &mut Counted,
    notes: &mut Vec<Note>,
) -> Result<(), Error> {
    if profile == "INVALID" {
        return Err(labels.bad(LabelProblem::InvalidSingleStrategy));
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
    notes: &mut Vec<Note>,
) -> Result<(), Error> {
    for p in &mig.profiles {
        // Without the profile's own product label, the node's: `gpu.product`, or else what
        // another profile's product label names (GFD labels one product per node).
        let product = labels
            .get(&format!("mig-{}.product", p.label))
            .and_then(|text| text.rsplit_once("-MIG-").map(|(m, _)| m))
            .or_else(|| node_product(labels, mig));
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
    notes: &mut Vec<Note>,
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
    let device = Device {
        product_name: node_product(labels, mig).and_then(|p| model_of(p, notes)),
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
            notes.push(Note::WholeAtMost(most));
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
fn model_of(label: &str, notes: &mut Vec<Note>) -> Option<String> {
    if let Some(known) = known_product(label) {
        return Some(known.to_string());
    }
    if let Some(vgpu) = super::product::vgpu_product(label) {
        push_once(
            notes,
            Note::Vgpu {
                label: label.to_string(),
                product: vgpu.product.clone(),
                profile: vgpu.profile.to_string(),
            },
        );
        return Some(vgpu.product);
    }
    push_once(
        notes,
        Note::UnknownProduct {
            label: label.to_string(),
        },
    );
    None
}

/// A note a label gives each time it is read, once.
fn push_once(notes: &mut Vec<Note>, note: Note) {
    if !notes.contains(&note) {
        notes.push(note);
    }
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
fn mig_profile(text: &str, notes: &mut Vec<Note>) -> Option<MigProfile> {
    match text.parse() {
        Ok(p) => Some(p),
        Err(_) => {
            notes.push(Note::UnknownProfile {
                text: text.to_string(),
            });
            None
        }
    }
}

/// Whole GPUs from the node's `nvidia.com/gpu` capacity (what the device plugin advertises
/// under the mixed strategy: uncut GPUs times their replicas), when it divides evenly.
fn whole_from_capacity(node: &Node, replicas: Option<&str>) -> Option<usize> {
    let capacity = node
        .status
        .as_ref()?
        .capacity
        .as_ref()?
        .get(nvidia::GPU_RESOURCE)?;
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

    /// A node is a GPU node by its labels or its capacity, never by a label that merely
    /// mentions NVIDIA.
    #[rstest]
    #[case::operator_label(&[("nvidia.com/gpu.present", "true")], &[], true)]
    #[case::operator_label_false(&[("nvidia.com/gpu.present", "false")], &[], false)]
    #[case::gfd_product(&[("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3")], &[], true)]
    #[case::gfd_slice_count(&[("nvidia.com/mig-1g.10gb.count", "7")], &[], true)]
    #[case::deploy_only(&[("nvidia.com/gpu.deploy.driver", "true")], &[], false)]
    #[case::capacity(&[], &[("nvidia.com/gpu", "8")], true)]
    #[case::slice_capacity(&[], &[("nvidia.com/mig-1g.10gb", "7")], true)]
    #[case::zero_capacity(&[], &[("nvidia.com/gpu", "0")], false)]
    #[case::cpu_only(&[("kubernetes.io/os", "linux")], &[("cpu", "8")], false)]
    fn gpu_nodes_by_labels_or_capacity(
        #[case] labels: &[(&str, &str)],
        #[case] capacity: &[(&str, &str)],
        #[case] gpu: bool,
    ) {
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        let mut node = Node::default();
        node.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        node.status = Some(k8s_openapi::api::core::v1::NodeStatus {
            capacity: Some(
                capacity
                    .iter()
                    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                    .collect(),
            ),
            ..Default::default()
        });
        assert_eq!(is_gpu_node(&node), gpu);
    }
}

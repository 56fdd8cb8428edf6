//! Builders for manifests that read like the hardware they describe.
//!
//! A checkpoint agent fills a manifest from a capture; a test or a node agent's dry run wants
//! one written by hand: "a node of eight H200s, GPU 0 cut into `3g.71gb` twice, driver
//! 580.82.07". Writing [`GpuManifest`]'s fields directly makes every test repeat UUIDs, parent
//! links and instance ids, and makes it easy to build a shape no capture could produce (a slice
//! with a `GPU-` UUID, a profile nvidia-smi never prints). The builders here say the shape, fill
//! in the rest the way a capture would, and refuse what reading a manifest would refuse (and a
//! little more: a MIG cut of a GPU without MIG, one UUID on two devices, a limit that is not a
//! quantity), so a built manifest is always one [`from_str`](crate::from_str) reads back equal.
//!
//! ```
//! use miggate_compat::{Gpu, GpuManifest, Pod};
//!
//! let checkpoint = GpuManifest::builder()
//!     .node("gpu-node-3")
//!     .kernel("5.15.0-1071-aws")
//!     .cpu_arch("amd64")
//!     .driver("580.82.07")
//!     .gpu(Gpu::h100().cut(["3g.40gb", "3g.40gb"]))
//!     .pod(Pod::builder().memory_limit("64Gi").gpu_request("nvidia.com/mig-3g.40gb", 2))
//!     .build()?;
//! let devices = checkpoint.devices().unwrap_or_default();
//! assert_eq!(devices.len(), 2);
//! assert_eq!(devices[0].mig_profile.as_ref().map(|p| p.as_str()), Some("3g.40gb"));
//! assert!(devices[0].uuid.as_ref().is_some_and(|u| u.starts_with("MIG-")));
//! # Ok::<(), miggate_compat::Error>(())
//! ```

/// The product name nvidia-smi and NVML give an H100 SXM 80 GB: [`Gpu::h100`]'s model, and the
/// one name every test that speaks of an H100 takes.
pub const H100_NAME: &str = "NVIDIA H100 80GB HBM3";

use std::collections::{BTreeMap, BTreeSet};

use crate::Error;
use crate::escape::escape;
use crate::manifest::{CapturedBy, Device, Gpu, GpuManifest, Host, MigMode, MigStrategy, Nvidia, Pod};
use crate::profile::MigProfile;
use crate::quantity::Quantity;
use crate::text::VersionText;
use crate::uuid::{DeviceUuid, GpuUuid};

impl GpuManifest {
    /// Starts a manifest with every fact unknown; each call states one fact.
    ///
    /// ```
    /// use miggate_compat::{Gpu, GpuManifest};
    ///
    /// // A node inventory: eight whole H200s, no pod.
    /// let node = GpuManifest::builder().driver("580.82.07").gpus(8, Gpu::h200()).build()?;
    /// assert_eq!(node.devices().map(<[_]>::len), Some(8));
    /// assert!(node.pod.is_none());
    /// # Ok::<(), miggate_compat::Error>(())
    /// ```
    pub fn builder() -> ManifestBuilder {
        ManifestBuilder::default()
    }
}

/// A manifest being described; [`ManifestBuilder::build`] checks it and assigns what was left
/// out (UUIDs, indexes, instance ids) deterministically, so the same calls build the same
/// manifest on every run and every machine.
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct ManifestBuilder {
    node: Option<String>,
    kernel: Option<String>,
    cpu_arch: Option<String>,
    driver: Option<String>,
    cuda: Option<String>,
    mig_strategy: Option<MigStrategy>,
    gpus: Option<Vec<GpuBuilder>>,
    pod: Option<PodBuilder>,
    captured_by: Option<(String, String)>,
    captured_at: Option<String>,
}

impl ManifestBuilder {
    /// The Kubernetes node name. It also seeds generated UUIDs, so two nodes built alike get
    /// different devices, as two real nodes do.
    pub fn node(mut self, name: impl Into<String>) -> Self {
        self.node = Some(name.into());
        self
    }

    /// The kernel release (`uname -r`), compared whole by `kernel-version`.
    pub fn kernel(mut self, release: impl Into<String>) -> Self {
        self.kernel = Some(release.into());
        self
    }

    /// The CPU architecture in Kubernetes naming (`amd64`, `arm64`).
    pub fn cpu_arch(mut self, arch: impl Into<String>) -> Self {
        self.cpu_arch = Some(arch.into());
        self
    }

    /// The NVIDIA kernel driver version (`580.82.07`).
    pub fn driver(mut self, version: impl Into<String>) -> Self {
        self.driver = Some(version.into());
        self
    }

    /// The CUDA version the driver supports (`13.0`).
    pub fn cuda(mut self, version: impl Into<String>) -> Self {
        self.cuda = Some(version.into());
        self
    }

    /// The device plugin's MIG strategy on the node.
    pub fn mig_strategy(mut self, strategy: MigStrategy) -> Self {
        self.mig_strategy = Some(strategy);
        self
    }

    /// Adds a physical GPU, with the devices it gives: itself when whole, its slices when cut.
    /// GPUs are indexed in the order they are added.
    pub fn gpu(mut self, gpu: GpuBuilder) -> Self {
        self.gpus.get_or_insert_with(Vec::new).push(gpu);
        self
    }

    /// Adds `count` GPUs alike (each gets its own UUIDs unless `gpu` names them, which makes
    /// the build fail on the repeated UUID).
    pub fn gpus(mut self, count: usize, gpu: GpuBuilder) -> Self {
        let list = self.gpus.get_or_insert_with(Vec::new);
        list.extend(std::iter::repeat_n(gpu, count));
        self
    }

    /// States that the process sees no GPU at all (`devices: []`), which differs from not
    /// knowing (no call at all).
    pub fn no_gpus(mut self) -> Self {
        self.gpus.get_or_insert_with(Vec::new);
        self
    }

    /// The container's facts. Without a pod the manifest is a node inventory, against which the
    /// pod checks do not apply.
    pub fn pod(mut self, pod: PodBuilder) -> Self {
        self.pod = Some(pod);
        self
    }

    /// Which tool and version wrote the manifest (`backend` is left out: nothing was read).
    pub fn captured_by(mut self, tool: impl Into<String>, version: impl Into<String>) -> Self {
        self.captured_by = Some((tool.into(), version.into()));
        self
    }

    /// When the facts were taken (RFC 3339). A builder reads no clock: give it to record one.
    pub fn captured_at(mut self, time: impl Into<String>) -> Self {
        self.captured_at = Some(time.into());
        self
    }

    /// Checks every fact and builds the manifest.
    ///
    /// Fails, naming the value, on a UUID or MIG profile in no form nvidia-smi prints, a slice
    /// UUID that is not a `MIG-` one, a cut of a GPU without MIG, a UUID given twice, a number of
    /// slice UUIDs that differs from the number of slices, or a pod limit that is not a
    /// Kubernetes quantity.
    pub fn build(self) -> Result<GpuManifest, Error> {
        let seed = self.node.clone().unwrap_or_default();
        let host = (self.node.is_some() || self.kernel.is_some() || self.cpu_arch.is_some()).then(|| Host {
            node_name: self.node,
            kernel_version: self.kernel.map(VersionText::new),
            cpu_arch: self.cpu_arch,
            unknown: Default::default(),
        });
        let mut seen = BTreeSet::new();
        let (gpus, devices) = match self.gpus {
            None => (None, None),
            Some(list) => {
                let mut gpus = Vec::with_capacity(list.len());
                let mut devices = Vec::new();
                for (index, g) in list.into_iter().enumerate() {
                    let (gpu, given) = g.build(&seed, index, &mut seen)?;
                    gpus.push(gpu);
                    devices.extend(given);
                }
                (Some(gpus), Some(devices))
            }
        };
        let has_nvidia =
            self.driver.is_some() || self.cuda.is_some() || self.mig_strategy.is_some() || gpus.is_some();
        let nvidia = has_nvidia.then(|| Nvidia {
            driver_version: self.driver.map(VersionText::new),
            cuda_driver_version: self.cuda.map(VersionText::new),
            mig_strategy: self.mig_strategy,
            gpus,
            devices,
            uncounted: Vec::new(),
            unknown: Default::default(),
        });
        Ok(GpuManifest {
            captured_at: self.captured_at,
            captured_by: self.captured_by.map(|(tool, version)| CapturedBy {
                tool: Some(tool),
                version: Some(version),
                backend: None,
                unknown: Default::default(),
            }),
            warnings: Vec::new(),
            host,
            pod: self.pod.map(PodBuilder::build).transpose()?,
            nvidia,
            unknown: Default::default(),
        })
    }
}

/// A physical GPU being described: its model, and whether it is whole or cut into MIG slices.
///
/// Start from a model ([`Gpu::h100`], [`Gpu::h200`], [`Gpu::a100_40gb`], [`Gpu::l4`]) or from
/// any product name with [`Gpu::builder`].
///
/// ```
/// use miggate_compat::{DeviceKind, Gpu, GpuManifest};
///
/// // GPU 0 cut into one 4g.71gb and three 1g.18gb; GPU 1 whole, with the UUID a test pins.
/// let node = GpuManifest::builder()
///     .gpu(Gpu::h200().cut(["4g.71gb", "1g.18gb", "1g.18gb", "1g.18gb"]))
///     .gpu(Gpu::h200().uuid("GPU-2b1a0f9e-8d7c-4b64-99b2-a83d2c1b0a9f"))
///     .build()?;
/// let kinds: Vec<DeviceKind> = node.devices().unwrap_or_default().iter().map(|d| d.kind()).collect();
/// assert_eq!(kinds, [DeviceKind::Slice, DeviceKind::Slice, DeviceKind::Slice, DeviceKind::Slice, DeviceKind::Whole]);
///
/// // An L4 has no MIG: cutting one is refused, as no capture could show it cut.
/// let err = GpuManifest::builder().gpu(Gpu::l4().cut(["1g.6gb"])).build().unwrap_err();
/// assert_eq!(err.to_string(), "cannot build manifest: a cut of NVIDIA L4: this model has no MIG");
/// # Ok::<(), miggate_compat::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use = "a GPU builder does nothing until it is added to a manifest"]
pub struct GpuBuilder {
    product_name: String,
    memory_mib: Option<u64>,
    compute_capability: Option<String>,
    /// Whether the model has MIG at all; `None` when the builder was not told.
    mig_capable: Option<bool>,
    uuid: Option<String>,
    pci_bus_id: Option<String>,
    /// `None`: whole, MIG off. `Some`: MIG on, these slices in order.
    slices: Option<Vec<String>>,
    slice_uuids: Option<Vec<String>>,
    legacy_uuids: bool,
}

impl Gpu {
    /// Describes a GPU by the product name nvidia-smi prints; nothing else is known about it.
    pub fn builder(product_name: impl Into<String>) -> GpuBuilder {
        GpuBuilder {
            product_name: product_name.into(),
            memory_mib: None,
            compute_capability: None,
            mig_capable: None,
            uuid: None,
            pci_bus_id: None,
            slices: None,
            slice_uuids: None,
            legacy_uuids: false,
        }
    }

    fn model(name: &str, memory_mib: u64, compute_capability: &str, mig: bool) -> GpuBuilder {
        Gpu::builder(name)
            .memory_mib(memory_mib)
            .compute_capability(compute_capability)
            .mig(mig)
    }

    /// An H100 SXM 80 GB ([`H100_NAME`]), whole until cut.
    pub fn h100() -> GpuBuilder {
        Gpu::model(H100_NAME, 81559, "9.0", true)
    }

    /// An H200 141 GB (`NVIDIA H200`), whole until cut.
    pub fn h200() -> GpuBuilder {
        Gpu::model("NVIDIA H200", 143771, "9.0", true)
    }

    /// An A100 SXM4 40 GB (`NVIDIA A100-SXM4-40GB`), whole until cut.
    pub fn a100_40gb() -> GpuBuilder {
        Gpu::model("NVIDIA A100-SXM4-40GB", 40960, "8.0", true)
    }

    /// An L4 (`NVIDIA L4`): no MIG, so it cannot be cut.
    pub fn l4() -> GpuBuilder {
        Gpu::model("NVIDIA L4", 23034, "8.9", false)
    }
}

impl GpuBuilder {
    /// Total memory in MiB, as nvidia-smi reports it.
    pub fn memory_mib(mut self, mib: u64) -> Self {
        self.memory_mib = Some(mib);
        self
    }

    /// CUDA compute capability (`9.0`).
    pub fn compute_capability(mut self, cc: impl Into<String>) -> Self {
        self.compute_capability = Some(cc.into());
        self
    }

    /// Whether the model has MIG; a model without it cannot be [`cut`](Self::cut) and records
    /// no MIG mode, as nvidia-smi prints `[N/A]` for it.
    pub fn mig(mut self, capable: bool) -> Self {
        self.mig_capable = Some(capable);
        self
    }

    /// The GPU's UUID (`GPU-…`); generated from the node name and index when not given.
    pub fn uuid(mut self, uuid: impl Into<String>) -> Self {
        self.uuid = Some(uuid.into());
        self
    }

    /// The PCI bus id (`00000000:18:00.0`).
    pub fn pci_bus_id(mut self, id: impl Into<String>) -> Self {
        self.pci_bus_id = Some(id.into());
        self
    }

    /// Turns MIG on and cuts the GPU into these profiles, exactly as nvidia-smi prints them
    /// (`3g.40gb`, `1g.10gb+me`, `1c.3g.40gb`). Each becomes one device; consecutive
    /// compute-instance profiles (`1c.3g.40gb`) share one GPU instance as far as it has room.
    /// An empty list is MIG on with no instance: a GPU that gives no device.
    pub fn cut<I, S>(mut self, profiles: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.slices = Some(profiles.into_iter().map(Into::into).collect());
        self
    }

    /// The slices' UUIDs (`MIG-…`), one per profile of [`cut`](Self::cut), in order; generated
    /// when not given.
    pub fn slice_uuids<I, S>(mut self, uuids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.slice_uuids = Some(uuids.into_iter().map(Into::into).collect());
        self
    }

    /// Names generated slices in the form drivers before R470 print
    /// (`MIG-GPU-<id>/<gi>/<ci>`), which cuda-checkpoint does not take in a device map.
    pub fn legacy_uuids(mut self) -> Self {
        self.legacy_uuids = true;
        self
    }

    /// The physical GPU and the devices it gives, checked.
    fn build(
        mut self,
        seed: &str,
        index: usize,
        seen: &mut BTreeSet<String>,
    ) -> Result<(Gpu, Vec<Device>), Error> {
        let uuid: GpuUuid = match &self.uuid {
            Some(text) => text.parse()?,
            None => generated("GPU", &format!("{seed}/{index}")).parse()?,
        };
        claim(seen, uuid.as_str())?;
        let index_u32 = u32::try_from(index).map_err(|_| Error::Build {
            what: format!("GPU {index}"),
            why: "more GPUs than any node has",
        })?;
        if self.slices.is_some() && self.mig_capable == Some(false) {
            return Err(Error::Build {
                what: format!("a cut of {}", escape(&self.product_name)),
                why: "this model has no MIG",
            });
        }
        let mig_mode = match (&self.slices, self.mig_capable) {
            (Some(_), _) => Some(MigMode::Enabled),
            (None, Some(true)) => Some(MigMode::Disabled),
            (None, _) => None,
        };
        let gpu = Gpu {
            index: Some(index_u32),
            uuid: Some(uuid.clone()),
            product_name: Some(self.product_name.clone()),
            pci_bus_id: self.pci_bus_id.take(),
            memory_mib: self.memory_mib,
            compute_capability: self.compute_capability.take().map(VersionText::new),
            mig_mode,
            unknown: Default::default(),
        };
        let Some(profiles) = self.slices.as_deref() else {
            let whole = Device {
                uuid: Some(uuid.as_str().parse()?),
                product_name: Some(self.product_name),
                memory_mib: self.memory_mib,
                ..Device::default()
            };
            return Ok((gpu, vec![whole]));
        };
        let devices = self.slice_devices(profiles, &uuid, &format!("{seed}/{index}"), seen)?;
        Ok((gpu, devices))
    }

    /// The slices of GPU `uuid` cut as `profiles`, in order, with their instance ids and
    /// UUIDs (given, legacy-form or generated from `seed`).
    fn slice_devices(
        &self,
        profiles: &[String],
        uuid: &GpuUuid,
        seed: &str,
        seen: &mut BTreeSet<String>,
    ) -> Result<Vec<Device>, Error> {
        if let Some(given) = &self.slice_uuids
            && given.len() != profiles.len()
        {
            return Err(Error::Build {
                what: format!("{} slice UUIDs for {} slices", given.len(), profiles.len()),
                why: "give one UUID per slice, in order, or none",
            });
        }
        let mut devices = Vec::with_capacity(profiles.len());
        let mut ids = InstanceIds::default();
        for (i, text) in profiles.iter().enumerate() {
            let profile: MigProfile = text.parse()?;
            let (gi, ci) = ids.next(&profile);
            let device_uuid: DeviceUuid = match (&self.slice_uuids, self.legacy_uuids) {
                (Some(given), _) => given.get(i).map(String::as_str).unwrap_or_default().parse()?,
                (None, true) => format!("MIG-{uuid}/{gi}/{ci}").parse()?,
                (None, false) => generated("MIG", &format!("{seed}/{i}")).parse()?,
            };
            if !device_uuid.is_mig() {
                return Err(Error::Build {
                    what: format!("slice UUID `{}`", escape(device_uuid.as_str())),
                    why: "a MIG slice's UUID starts with `MIG-`",
                });
            }
            claim(seen, device_uuid.as_str())?;
            devices.push(Device {
                uuid: Some(device_uuid),
                parent_uuid: Some(uuid.clone()),
                product_name: Some(self.product_name.clone()),
                mig_profile: Some(profile),
                gpu_instance_id: Some(gi),
                compute_instance_id: Some(ci),
                memory_mib: None,
                unknown: Default::default(),
            });
        }
        Ok(devices)
    }
}

/// GPU- and compute-instance ids as a driver hands them out when slices are made in order: a
/// compute-instance slice joins the open GPU instance of its profile while that has room,
/// anything else opens the next GPU instance.
#[derive(Default)]
struct InstanceIds {
    /// (GPU-instance profile, slices it has, compute slices used) of the open GPU instance.
    open: Option<(String, u16, u16)>,
    gi: u32,
    ci: u32,
}

impl InstanceIds {
    /// The (GPU instance, compute instance) ids of the next slice, of `profile`.
    fn next(&mut self, profile: &MigProfile) -> (u32, u32) {
        let slices = gpu_slices(profile.gpu_instance_profile());
        let compute = compute_slices(profile.as_str());
        let shares = match (&self.open, compute) {
            (Some((gip, size, used)), Some(c)) => {
                gip == profile.gpu_instance_profile() && used.saturating_add(c) <= *size
            }
            _ => false,
        };
        if shares {
            self.ci += 1;
            if let (Some((_, _, used)), Some(c)) = (self.open.as_mut(), compute) {
                *used += c;
            }
        } else {
            self.gi += 1;
            self.ci = 0;
            self.open = compute.map(|c| (profile.gpu_instance_profile().to_string(), slices, c));
        }
        (self.gi, self.ci)
    }
}

/// The GPU slices of a GPU-instance profile (`3` for `3g.40gb`); 1 for an opaque one.
fn gpu_slices(gpu_instance_profile: &str) -> u16 {
    gpu_instance_profile
        .split_once("g.")
        .and_then(|(n, _)| n.parse().ok())
        .unwrap_or(1)
}

/// The compute slices of a compute-instance profile (`1` for `1c.3g.40gb`).
fn compute_slices(profile: &str) -> Option<u16> {
    let (head, _) = profile.split_once('.')?;
    head.strip_suffix('c')?.parse().ok()
}

/// Records a UUID as used; a second use is an error.
fn claim(seen: &mut BTreeSet<String>, uuid: &str) -> Result<(), Error> {
    if seen.insert(uuid.to_string()) {
        Ok(())
    } else {
        Err(Error::Build {
            what: format!("UUID `{}`", escape(uuid)),
            why: "it names two devices",
        })
    }
}

/// A well-formed UUID (`<prefix>-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`) derived from `key` by
/// FNV-1a: deterministic, so snapshots and device maps of built manifests are stable.
fn generated(prefix: &str, key: &str) -> String {
    let hash = |basis: u64| {
        key.bytes().fold(basis, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    // FNV-1a alone changes few bits between `node/0` and `node/1`; splitmix64's finaliser
    // spreads them, so neighbouring devices do not read alike.
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let (a, b) = (mix(hash(0xcbf2_9ce4_8422_2325)), mix(hash(0x6c62_272e_07bb_0142)));
    format!(
        "{prefix}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

/// A container's facts being described: what the pod spec and the runtime say.
#[derive(Debug, Clone, Default)]
#[must_use = "a pod builder does nothing until it is added to a manifest"]
pub struct PodBuilder {
    image: Option<String>,
    image_digest: Option<String>,
    cpu_limit: Option<String>,
    memory_limit: Option<String>,
    mounts: Option<Vec<String>>,
    gpu_requests: Option<BTreeMap<String, u64>>,
    resource_claims: Option<Vec<String>>,
}

impl Pod {
    /// Starts a pod with every fact unknown.
    ///
    /// ```
    /// use miggate_compat::Pod;
    ///
    /// let pod = Pod::builder().cpu_limit("8").memory_limit("64Gi").mount("/model-cache").build()?;
    /// assert_eq!(pod.mounts, Some(vec!["/model-cache".to_string()]));
    /// // A limit that is not a Kubernetes quantity is refused, not kept as an unknown.
    /// assert!(Pod::builder().memory_limit("64 GiB").build().is_err());
    /// # Ok::<(), miggate_compat::Error>(())
    /// ```
    pub fn builder() -> PodBuilder {
        PodBuilder::default()
    }
}

impl PodBuilder {
    /// The image reference, for people.
    pub fn image(mut self, image: impl Into<String>) -> Self {
        self.image = Some(image.into());
        self
    }

    /// The runtime's image ID (`docker-pullable://…@sha256:…` or a bare digest).
    pub fn image_digest(mut self, digest: impl Into<String>) -> Self {
        self.image_digest = Some(digest.into());
        self
    }

    /// The CPU limit as a Kubernetes quantity (`8`, `8000m`).
    pub fn cpu_limit(mut self, quantity: impl Into<String>) -> Self {
        self.cpu_limit = Some(quantity.into());
        self
    }

    /// The memory limit as a Kubernetes quantity (`64Gi`).
    pub fn memory_limit(mut self, quantity: impl Into<String>) -> Self {
        self.memory_limit = Some(quantity.into());
        self
    }

    /// Adds a mount path: externalized on a source, existing on a target.
    pub fn mount(mut self, path: impl Into<String>) -> Self {
        self.mounts.get_or_insert_with(Vec::new).push(path.into());
        self
    }

    /// States that there are no mounts (`[]`), which differs from not knowing.
    pub fn no_mounts(mut self) -> Self {
        self.mounts.get_or_insert_with(Vec::new);
        self
    }

    /// Adds a GPU resource limit (`nvidia.com/mig-3g.40gb`, 2).
    pub fn gpu_request(mut self, resource: impl Into<String>, count: u64) -> Self {
        self.gpu_requests
            .get_or_insert_with(BTreeMap::new)
            .insert(resource.into(), count);
        self
    }

    /// Adds a resource claim (GPUs through DRA).
    pub fn resource_claim(mut self, name: impl Into<String>) -> Self {
        self.resource_claims
            .get_or_insert_with(Vec::new)
            .push(name.into());
        self
    }

    /// States that the container has no resource claims (`[]`).
    pub fn no_resource_claims(mut self) -> Self {
        self.resource_claims.get_or_insert_with(Vec::new);
        self
    }

    /// Checks the pod's facts: each limit must be a Kubernetes quantity and each GPU resource
    /// name non-empty.
    pub fn build(self) -> Result<Pod, Error> {
        let quantity = |what: &'static str, text: Option<String>| -> Result<Option<Quantity>, Error> {
            text.map(|t| {
                let q = Quantity::new(t);
                match q.nanos() {
                    Some(_) => Ok(q),
                    None => Err(Error::Build {
                        what: format!("{what} `{}`", escape(q.as_str())),
                        why: "not a Kubernetes quantity (such as `8`, `500m`, `64Gi`)",
                    }),
                }
            })
            .transpose()
        };
        let gpu_requests = match self.gpu_requests {
            None => None,
            Some(map) => Some(
                map.into_iter()
                    .map(|(name, n)| {
                        if name.trim().is_empty() {
                            return Err(Error::Build {
                                what: "a GPU request".to_string(),
                                why: "its resource name is empty",
                            });
                        }
                        Ok((name, Quantity::new(n.to_string())))
                    })
                    .collect::<Result<BTreeMap<_, _>, Error>>()?,
            ),
        };
        Ok(Pod {
            image: self.image,
            image_digest: self.image_digest,
            cpu_limit: quantity("CPU limit", self.cpu_limit)?,
            memory_limit: quantity("memory limit", self.memory_limit)?,
            mounts: self.mounts,
            gpu_requests,
            resource_claims: self.resource_claims,
            unknown: Default::default(),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn round_trips(m: &GpuManifest) {
        let back = crate::from_str(&m.to_json().unwrap()).unwrap();
        assert_eq!(&back, m);
        let back = crate::from_str(&m.to_yaml().unwrap()).unwrap();
        assert_eq!(&back, m);
    }

    #[test]
    fn a_cut_h100_reads_like_a_capture() {
        let m = GpuManifest::builder()
            .node("n1")
            .driver("580.82.07")
            .gpu(Gpu::h100().cut(["1c.3g.40gb", "1c.3g.40gb", "1c.3g.40gb", "1g.10gb", "1g.10gb"]))
            .gpu(Gpu::h100())
            .build()
            .unwrap();
        let d = m.devices().unwrap();
        let ids: Vec<_> = d
            .iter()
            .map(|d| (d.gpu_instance_id, d.compute_instance_id))
            .collect();
        assert_eq!(
            ids,
            [
                (Some(1), Some(0)),
                (Some(1), Some(1)),
                (Some(1), Some(2)),
                (Some(2), Some(0)),
                (Some(3), Some(0)),
                (None, None)
            ]
        );
        assert_eq!(d[5].kind(), crate::DeviceKind::Whole);
        assert_eq!(
            d[0].parent_uuid,
            m.nvidia.as_ref().unwrap().gpus.as_ref().unwrap()[0].uuid
        );
        round_trips(&m);
    }

    #[test]
    fn generated_uuids_are_stable_and_differ_by_node() {
        let a = GpuManifest::builder()
            .node("a")
            .gpus(2, Gpu::h200())
            .build()
            .unwrap();
        let again = GpuManifest::builder()
            .node("a")
            .gpus(2, Gpu::h200())
            .build()
            .unwrap();
        let b = GpuManifest::builder()
            .node("b")
            .gpus(2, Gpu::h200())
            .build()
            .unwrap();
        assert_eq!(a, again);
        assert_ne!(a.devices().unwrap()[0].uuid, b.devices().unwrap()[0].uuid);
        assert_ne!(a.devices().unwrap()[0].uuid, a.devices().unwrap()[1].uuid);
        round_trips(&a);
    }

    #[test]
    fn legacy_uuids_name_parent_and_instances() {
        let m = GpuManifest::builder()
            .gpu(
                Gpu::a100_40gb()
                    .uuid("GPU-5c89852c")
                    .cut(["1g.5gb", "1g.5gb"])
                    .legacy_uuids(),
            )
            .build()
            .unwrap();
        let uuids: Vec<_> = m
            .devices()
            .unwrap()
            .iter()
            .map(|d| d.uuid.clone().unwrap())
            .collect();
        assert_eq!(uuids[0].as_str(), "MIG-GPU-5c89852c/1/0");
        assert_eq!(uuids[1].as_str(), "MIG-GPU-5c89852c/2/0");
        round_trips(&m);
    }

    #[test]
    fn what_no_capture_could_produce_is_refused() {
        let err = |b: ManifestBuilder| b.build().unwrap_err().to_string();
        let m = GpuManifest::builder;
        assert!(err(m().gpu(Gpu::l4().cut(["1g.6gb"]))).contains("has no MIG"));
        assert!(err(m().gpu(Gpu::h100().cut(["3g 40gb"]))).contains("not a MIG profile"));
        assert!(err(m().gpu(Gpu::h100().uuid("MIG-1"))).contains("starts with `GPU-`"));
        assert!(err(m().gpu(Gpu::h100().cut(["1g.10gb"]).slice_uuids(["GPU-9"]))).contains("`MIG-`"));
        assert!(
            err(m().gpu(Gpu::h100().cut(["1g.10gb"]).slice_uuids(["MIG-1", "MIG-2"])))
                .contains("one UUID per slice")
        );
        assert!(err(m().gpus(2, Gpu::h100().uuid("GPU-1"))).contains("names two devices"));
        assert!(err(m().gpu(Gpu::h100().uuid("GPU-1,GPU-2=x"))).contains("only ASCII"));
        assert!(err(m().pod(Pod::builder().cpu_limit("lots"))).contains("not a Kubernetes quantity"));
        assert!(err(m().pod(Pod::builder().gpu_request(" ", 1))).contains("resource name is empty"));
    }

    #[test]
    fn absent_stays_unknown_and_empty_stays_none() {
        let m = GpuManifest::builder().build().unwrap();
        assert_eq!(m, GpuManifest::new());
        let m = GpuManifest::builder()
            .no_gpus()
            .pod(Pod::builder().no_mounts())
            .build()
            .unwrap();
        assert_eq!(m.devices(), Some(&[][..]));
        assert_eq!(m.pod.unwrap().mounts, Some(vec![]));
    }
}

//! Source 2: the NVIDIA DRA driver's `ResourceSlice`s for a node (static MIG).
//!
//! The driver (`kubernetes-sigs/dra-driver-nvidia-gpu`, driver name `gpu.nvidia.com`) publishes
//! one pool per node, named after it, possibly over several slices. A GPU with MIG enabled is
//! published as its slices (`type: mig`, with `uuid`, `parentUUID`, `profile`), a GPU without
//! as itself (`type: gpu`, `uuid`); both carry `productName`, `driverVersion` and
//! `cudaDriverVersion` (versions semver-normalised: `580.65.06` becomes `580.65.6`, which compat
//! compares per number). Attribute names that changed across releases are read in every form:
//! `index`/`minor` (up to v25.3.x), `pcieBusID` (up to v25.8.x) and
//! `resource.kubernetes.io/pciBusID` (v25.12.0 on). Device names are never parsed: their form
//! changed three times.
//!
//! Under the `DynamicMIG` gate the slices list every *possible* partition, consuming shared
//! counters, not the node's layout: such a pool is read as what its GPUs can supply
//! ([`partitions`](super::partitions)), never as slices that exist.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{Device as DraDevice, DeviceAttribute, ResourceSlice};
use miggate_compat::{
    Device, DeviceUuid, Gpu, GpuManifest, GpuUuid, MigMode, MigProfile, Nvidia, Quantity, VersionText,
};

use super::partitions::{CounterSets, Supply};
use super::{
    DRA_DRIVER, Inventory, MAX_DEVICES, MAX_SLICES, MAX_TEXT_BYTES, Note, Source, host_from_node, unreadable,
};
use crate::error::{AttributeProblem, DeviceProblem, Error, PoolProblem, Unmatched};

/// The inventory of node `node_name` from the DRA driver's slices, with kernel and
/// architecture from `node`'s `status.nodeInfo` when given.
///
/// `Ok(None)` when no slice of driver `gpu.nvidia.com` is for this node (the driver does not
/// run there). An error when the pool cannot be trusted: incomplete at its newest generation,
/// DynamicMIG, too large, or a device attribute of the wrong type or form.
pub fn from_resource_slices(
    node_name: &str,
    node: Option<&Node>,
    slices: &[&ResourceSlice],
) -> Result<Option<Inventory>, Error> {
    let bad = |why: PoolProblem| unreadable(Source::ResourceSlice, node_name, why);
    let Some(pool) = Pool::current(node_name, slices).map_err(bad)? else {
        return Ok(None);
    };
    // DynamicMIG: the slices list possible partitions over shared counters, not the layout.
    let dynamic = pool
        .slices
        .iter()
        .any(|s| s.spec.shared_counters.as_ref().is_some_and(|c| !c.is_empty()));
    let sets = if dynamic {
        Some(CounterSets::read(&pool.slices).map_err(|why| bad(PoolProblem::CounterSets(why)))?)
    } else {
        None
    };
    let mut supply = sets.as_ref().map(Supply::new);
    let read = read_pool(&pool, sets.as_ref().zip(supply.as_mut())).map_err(bad)?;

    let host = host_from_node(node_name, node);
    let notes = pool_notes(node_name, &pool, supply.as_ref().map(|(s, _)| s), &read, &host);
    let mut nvidia = read.nvidia();
    if supply.is_some() {
        // What exists is decided per claim: no device list, and MIG mode is the driver's.
        nvidia.devices = None;
        for gpu in nvidia.gpus.iter_mut().flatten() {
            gpu.mig_mode = None;
        }
    }
    let manifest = GpuManifest {
        host: Some(host),
        nvidia: Some(nvidia),
        ..GpuManifest::default()
    };
    Ok(Some(Inventory {
        manifest: std::sync::Arc::new(manifest),
        source: Source::ResourceSlice,
        notes,
        passed_over: Vec::new(),
        slices_listed: false,
        supply: supply.map(|(s, _)| std::sync::Arc::new(s)),
    }))
}

/// A node's pool of the driver at its newest generation, as the scheduler reads it.
pub(super) struct Pool<'s> {
    pub(super) slices: Vec<&'s ResourceSlice>,
    pub(super) name: &'s str,
    generation: i64,
    /// How many slices the pool says it has (`resourceSliceCount`).
    expected: i64,
}

impl<'s> Pool<'s> {
    /// The driver's slices for `node_name` at their newest generation; `None` when there are
    /// none, an error when they are too many or name two pools.
    pub(super) fn newest(
        node_name: &str,
        slices: &[&'s ResourceSlice],
    ) -> Result<Option<Pool<'s>>, PoolProblem> {
        let ours: Vec<&ResourceSlice> = slices
            .iter()
            .copied()
            .filter(|s| s.spec.driver == DRA_DRIVER && s.spec.node_name.as_deref() == Some(node_name))
            .take(MAX_SLICES + 1)
            .collect();
        if ours.len() > MAX_SLICES {
            return Err(PoolProblem::TooManySlices { limit: MAX_SLICES });
        }
        let Some(generation) = ours.iter().map(|s| s.spec.pool.generation).max() else {
            return Ok(None);
        };
        let current: Vec<&ResourceSlice> = ours
            .into_iter()
            .filter(|s| s.spec.pool.generation == generation)
            .collect();
        let Some(pool) = current.first().map(|s| &s.spec.pool) else {
            return Ok(None);
        };
        if current.iter().any(|s| s.spec.pool.name != pool.name) {
            return Err(PoolProblem::SeveralPools);
        }
        Ok(Some(Pool {
            name: &pool.name,
            expected: pool.resource_slice_count,
            slices: current,
            generation,
        }))
    }

    /// [`Pool::newest`], refused unless every slice of it has been published: a pool being
    /// updated is not yet a description of the node.
    fn current(node_name: &str, slices: &[&'s ResourceSlice]) -> Result<Option<Pool<'s>>, PoolProblem> {
        let Some(pool) = Pool::newest(node_name, slices)? else {
            return Ok(None);
        };
        if usize::try_from(pool.expected).unwrap_or(usize::MAX) != pool.slices.len() {
            return Err(PoolProblem::Updating {
                pool: pool.name.to_string(),
                generation: pool.generation,
                present: pool.slices.len(),
                expected: pool.expected,
            });
        }
        Ok(Some(pool))
    }
}

/// A DynamicMIG pool being read: its counter sets, and the supply with its GPUs by name.
type Supplying<'a> = (&'a CounterSets, &'a mut (Supply, BTreeMap<String, usize>));

/// Every device of `pool`, at most [`MAX_DEVICES`]; under DynamicMIG each possible partition
/// goes to the GPU's `supply` instead of the device list. An error names the slice and device.
fn read_pool(pool: &Pool<'_>, mut supply: Option<Supplying<'_>>) -> Result<Read, PoolProblem> {
    let mut read = Read::default();
    let mut count = 0usize;
    for slice in &pool.slices {
        let slice_name = slice.metadata.name.as_deref().unwrap_or("(unnamed)");
        for device in slice.spec.devices.iter().flatten() {
            count += 1;
            if count > MAX_DEVICES {
                return Err(PoolProblem::TooManyDevices { limit: MAX_DEVICES });
            }
            let at = |problem: DeviceProblem| PoolProblem::Device {
                slice: slice_name.to_string(),
                device: device.name.clone(),
                problem,
            };
            let before = read.devices.len();
            read.device(device, supply.is_some()).map_err(at)?;
            if let Some((sets, (supply, index))) = supply.as_mut()
                && read.devices.len() > before
                && let Some(d) = read.devices.pop()
            {
                supply.add(sets, index, device, d).map_err(at)?;
            }
        }
    }
    Ok(read)
}

/// What the inventory says of where it came from and what it left out.
fn pool_notes(
    node_name: &str,
    pool: &Pool<'_>,
    supply: Option<&Supply>,
    read: &Read,
    host: &miggate_compat::Host,
) -> Vec<Note> {
    let mut notes = Vec::new();
    if let Some(supply) = supply {
        notes.push(Note::DynamicMig {
            node: node_name.to_string(),
            offered: supply.offered(),
        });
    }
    notes.push(Note::Pool {
        slices: pool.slices.len(),
        pool: pool.name.to_string(),
        generation: pool.generation,
    });
    if host.kernel_version.is_none() {
        notes.push(Note::NoKernel(Source::ResourceSlice));
    }
    if read.skipped > 0 {
        notes.push(Note::NotGpus(read.skipped));
    }
    notes
}

/// Each of `devices` as an inventory device, in the order given (the allocation's), read as
/// [`from_resource_slices`] reads them; possible partitions of a DynamicMIG pool are read as
/// slices of their profile without a UUID. An error names the device that cannot be read.
pub(super) fn read_devices(devices: &[&DraDevice]) -> Result<Vec<Device>, Unmatched> {
    let mut read = Read::default();
    for device in devices {
        let before = read.devices.len();
        read.device(device, true).map_err(|problem| Unmatched::Device {
            device: device.name.clone(),
            problem,
        })?;
        if read.devices.len() == before {
            return Err(Unmatched::NotAGpu {
                device: device.name.clone(),
            });
        }
    }
    Ok(read.devices)
}

/// What the devices say, gathered in one pass.
#[derive(Default)]
struct Read {
    devices: Vec<Device>,
    /// Physical GPUs by UUID: whole ones and MIG parents.
    gpus: BTreeMap<String, Gpu>,
    driver: Option<String>,
    cuda: Option<String>,
    skipped: usize,
}

impl Read {
    /// Reads one device into the list. `dynamic`: a DynamicMIG pool, whose devices consume
    /// shared counters (possible partitions, taken apart by the caller).
    fn device(&mut self, device: &DraDevice, dynamic: bool) -> Result<(), DeviceProblem> {
        if !dynamic && device.consumes_counters.as_ref().is_some_and(|c| !c.is_empty()) {
            return Err(DeviceProblem::PossiblePartition);
        }
        let empty = BTreeMap::new();
        let attrs = Attrs(device.attributes.as_ref().unwrap_or(&empty));
        let kind = attrs.string("type")?.ok_or(DeviceProblem::NoType)?;
        let product = attrs.string("productName")?;
        self.versions(&attrs)?;
        let memory_mib = device
            .capacity
            .as_ref()
            .and_then(|c| c.get("memory"))
            .and_then(|c| mib(&c.value.0));
        match kind.as_str() {
            "gpu" => self.whole_gpu(&attrs, product, memory_mib),
            "mig" => self.mig_slice(&attrs, product, memory_mib),
            _ => {
                self.skipped += 1;
                Ok(())
            }
        }
    }

    /// The driver and CUDA versions a device states. Every device of a node runs the same
    /// driver; a pool that says otherwise is not one node's snapshot.
    fn versions(&mut self, attrs: &Attrs<'_>) -> Result<(), DeviceProblem> {
        if let Some(v) = attrs.version("driverVersion")? {
            match &self.driver {
                Some(seen) if *seen != v => {
                    return Err(DeviceProblem::DriverDiffers {
                        version: v,
                        seen: seen.clone(),
                    });
                }
                Some(_) => {}
                None => self.driver = Some(v),
            }
        }
        if let Some(v) = attrs.version("cudaDriverVersion")? {
            self.cuda.get_or_insert(v);
        }
        Ok(())
    }

    /// A GPU without MIG (`type: gpu`): a GPU and a device of its own.
    fn whole_gpu(
        &mut self,
        attrs: &Attrs<'_>,
        product: Option<String>,
        memory_mib: Option<u64>,
    ) -> Result<(), DeviceProblem> {
        let uuid = attrs.string("uuid")?.ok_or(DeviceProblem::GpuWithoutUuid)?;
        let unparsable = |error| AttributeProblem::Unparsable {
            name: "uuid",
            error: Box::new(error),
        };
        let parsed: GpuUuid = uuid.parse().map_err(unparsable)?;
        let device_uuid: DeviceUuid = uuid.parse().map_err(unparsable)?;
        self.gpus.insert(
            uuid.clone(),
            Gpu {
                index: attrs.index()?,
                uuid: Some(parsed),
                product_name: product.clone(),
                pci_bus_id: attrs.pci_bus_id()?,
                memory_mib,
                compute_capability: attrs.compute_capability()?,
                mig_mode: Some(MigMode::Disabled),
                ..Gpu::default()
            },
        );
        self.devices.push(Device {
            uuid: Some(device_uuid),
            product_name: product,
            memory_mib,
            ..Device::default()
        });
        Ok(())
    }

    /// A MIG slice (`type: mig`), and its parent GPU the first time one of its slices is seen.
    /// DynamicMIG slices have no uuid; static ones always do. Without one the device is still
    /// a slice (by its profile), its identity unknown.
    fn mig_slice(
        &mut self,
        attrs: &Attrs<'_>,
        product: Option<String>,
        memory_mib: Option<u64>,
    ) -> Result<(), DeviceProblem> {
        let uuid = attrs.parsed::<DeviceUuid>("uuid")?;
        let parent = attrs.parsed::<GpuUuid>("parentUUID")?;
        let profile = attrs.parsed::<MigProfile>("profile")?;
        if let Some(parent) = &parent
            && !self.gpus.contains_key(parent.as_str())
        {
            // A slice inherits its parent's product, bus id and capability.
            let gpu = Gpu {
                uuid: Some(parent.clone()),
                product_name: product.clone(),
                pci_bus_id: attrs.pci_bus_id()?,
                compute_capability: attrs.compute_capability()?,
                mig_mode: Some(MigMode::Enabled),
                ..Gpu::default()
            };
            self.gpus.insert(parent.as_str().to_string(), gpu);
        }
        self.devices.push(Device {
            uuid,
            parent_uuid: parent,
            product_name: product,
            mig_profile: profile,
            memory_mib,
            ..Device::default()
        });
        Ok(())
    }

    fn nvidia(mut self) -> Nvidia {
        // Visible order is unknown (the driver stopped publishing indices); parent UUID, then
        // profile, then UUID gives the same order on every read.
        self.devices.sort_by(|a, b| {
            let key = |d: &Device| {
                (
                    d.parent_uuid
                        .as_ref()
                        .map(|p| p.as_str().to_string())
                        .or_else(|| d.uuid.as_ref().map(|u| u.as_str().to_string())),
                    d.mig_profile.as_ref().map(|p| p.as_str().to_string()),
                    d.uuid.as_ref().map(|u| u.as_str().to_string()),
                )
            };
            key(a).cmp(&key(b))
        });
        Nvidia {
            driver_version: self.driver.map(VersionText::new),
            cuda_driver_version: self.cuda.map(VersionText::new),
            gpus: Some(self.gpus.into_values().collect()),
            devices: Some(self.devices),
            ..Nvidia::default()
        }
    }
}

/// A device's attributes, read by kind with the type each must have.
struct Attrs<'a>(&'a BTreeMap<String, DeviceAttribute>);

impl Attrs<'_> {
    /// A string attribute, `None` when absent; an error when it has another type or an
    /// unreasonable size.
    fn string(&self, name: &'static str) -> Result<Option<String>, AttributeProblem> {
        match self.0.get(name) {
            None => Ok(None),
            Some(DeviceAttribute { string: Some(s), .. }) => text(name, s).map(Some),
            Some(_) => Err(AttributeProblem::WrongType { name, kind: "string" }),
        }
    }

    /// A version attribute; a string is accepted too (older releases and hand-written slices).
    /// A string attribute read as `T`, `None` when absent; an error names the attribute.
    fn parsed<T>(&self, name: &'static str) -> Result<Option<T>, AttributeProblem>
    where
        T: std::str::FromStr<Err = miggate_compat::Error>,
    {
        self.string(name)?
            .map(|s| {
                s.parse::<T>().map_err(|error| AttributeProblem::Unparsable {
                    name,
                    error: Box::new(error),
                })
            })
            .transpose()
    }

    fn version(&self, name: &'static str) -> Result<Option<String>, AttributeProblem> {
        match self.0.get(name) {
            None => Ok(None),
            Some(DeviceAttribute { version: Some(s), .. } | DeviceAttribute { string: Some(s), .. }) => {
                text(name, s).map(Some)
            }
            Some(_) => Err(AttributeProblem::WrongType {
                name,
                kind: "version",
            }),
        }
    }

    fn int(&self, name: &'static str) -> Result<Option<i64>, AttributeProblem> {
        match self.0.get(name) {
            None => Ok(None),
            Some(DeviceAttribute { int: Some(i), .. }) => Ok(Some(*i)),
            Some(_) => Err(AttributeProblem::WrongType { name, kind: "int" }),
        }
    }

    /// `index` (v25.3.x), else `minor` (v25.3.x, the same number for a GPU).
    fn index(&self) -> Result<Option<u32>, AttributeProblem> {
        let value = match self.int("index")? {
            Some(i) => Some(i),
            None => self.int("minor")?,
        };
        Ok(value.and_then(|i| u32::try_from(i).ok()))
    }

    /// `resource.kubernetes.io/pciBusID` (v25.12.0 on), else `pcieBusID` (up to v25.8.x), in
    /// nvidia-smi's 8-digit-domain form.
    fn pci_bus_id(&self) -> Result<Option<String>, AttributeProblem> {
        let id = match self.string("resource.kubernetes.io/pciBusID")? {
            Some(id) => Some(id),
            None => self.string("pcieBusID")?,
        };
        Ok(id.map(|id| match id.split_once(':') {
            Some((domain, rest)) if domain.len() < 8 => format!("{domain:0>8}:{rest}"),
            _ => id,
        }))
    }

    /// `cudaComputeCapability` (`8.0.0`) as nvidia-smi prints it (`8.0`).
    fn compute_capability(&self) -> Result<Option<VersionText>, AttributeProblem> {
        Ok(self.version("cudaComputeCapability")?.map(|v| {
            let mut parts = v.split('.');
            match (parts.next(), parts.next()) {
                (Some(major), Some(minor)) => VersionText::new(format!("{major}.{minor}")),
                _ => VersionText::new(v.clone()),
            }
        }))
    }
}

fn text(name: &'static str, s: &str) -> Result<String, AttributeProblem> {
    let s = s.trim();
    if s.is_empty() {
        return Err(AttributeProblem::Empty { name });
    }
    if s.len() > MAX_TEXT_BYTES || s.chars().any(miggate_compat::escape::is_hazard) {
        return Err(AttributeProblem::Implausible {
            name,
            value: s.to_string(),
        });
    }
    Ok(s.to_string())
}

/// A memory quantity (`4864Mi`, `40Gi`) in MiB, when it is a whole number of them.
fn mib(quantity: &str) -> Option<u64> {
    let nanos = Quantity::new(quantity).nanos()?;
    let per_mib: u128 = 1_000_000_000 * 1024 * 1024;
    nanos
        .is_multiple_of(per_mib)
        .then(|| u64::try_from(nanos / per_mib).ok())?
}

//! The devices a pod's DRA claims were allocated, as the node's inventory describes them.
//!
//! The scheduler's DRA plugin writes each claim's allocation (`status.allocation.devices.results`:
//! request, driver, pool, device) before it binds the pod, so at the binding the webhook knows
//! which of the node's devices the restore will get. Judged in exact mode against just those
//! devices, the checkpoint's node checks say what the node agent will find, and the device map
//! cuda-checkpoint needs is known before the pod starts.
//!
//! Matching is by name only: the allocation's driver, pool and device name against the node's
//! `ResourceSlice`s at the pool's newest generation. Device names are never parsed.
//!
//! Pure: no client, no clock.

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::resource::v1::{Device as DraDevice, ResourceSlice};
use miggate_compat::{Device, GpuManifest, Nvidia};

use super::slices::{Pool, read_devices};
use super::{DRA_DRIVER, MAX_DEVICES};
use crate::error::{Error, PoolProblem, Unmatched};

/// The most allocation results read for one pod: far above any real restore (8 GPUs × 7
/// slices); more is refused, not read in part.
pub const MAX_RESULTS: usize = 256;

/// One device an allocation names, as the scheduler wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AllocatedDevice {
    /// The claim's request it serves (`mig-3g-40gb`).
    pub request: String,
    /// The DRA driver (`gpu.nvidia.com`).
    pub driver: String,
    /// The pool: the NVIDIA driver names it after the node.
    pub pool: String,
    /// The device's name in the pool's slices (`gpu-0-mig-3g40gb-9-0`).
    pub device: String,
}

impl AllocatedDevice {
    /// The device as `pool/device`, how `kubectl get resourceclaim` output and messages name it.
    pub fn name(&self) -> String {
        format!("{}/{}", self.pool, self.device)
    }
}

/// The NVIDIA devices a pod's claims were allocated on one node.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocated {
    /// Each device as its slice describes it, in the allocation's order.
    pub devices: Vec<Device>,
    /// Each device's allocation entry, in the same order.
    pub names: Vec<AllocatedDevice>,
    /// Devices of other drivers in the allocation (a NIC, a storage claim): not GPUs, left out.
    pub other_drivers: usize,
}

impl Allocated {
    /// The devices as `pool/device`, comma separated: what messages and `where` print.
    pub fn describe(&self) -> String {
        self.names
            .iter()
            .map(AllocatedDevice::name)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The NVIDIA devices among `results` (a pod's claims' allocation results, every claim's
/// together), each read from node `node_name`'s slices of driver `gpu.nvidia.com`.
///
/// An error when a device cannot be matched: allocated from another pool (not this node's),
/// named by no device of the pool's newest generation (the slices changed since), named
/// twice, or unreadable; or when the results or slices are past their bounds. A caller then
/// has no exact view of the allocation and keeps its judgement of the whole node.
pub fn allocated(
    node_name: &str,
    slices: &[&ResourceSlice],
    results: &[AllocatedDevice],
) -> Result<Allocated, Error> {
    let bad = |why: Unmatched| Error::Allocation {
        node: node_name.to_string(),
        why: Box::new(why),
    };
    if results.len() > MAX_RESULTS {
        return Err(bad(Unmatched::TooMany { limit: MAX_RESULTS }));
    }
    let ours: Vec<&AllocatedDevice> = results.iter().filter(|r| r.driver == DRA_DRIVER).collect();
    let other_drivers = results.len() - ours.len();
    if ours.is_empty() {
        return Ok(Allocated {
            devices: Vec::new(),
            names: Vec::new(),
            other_drivers,
        });
    }
    let pool = pool_devices(node_name, slices).map_err(|why| bad(Unmatched::Pool(why)))?;
    let mut seen: HashSet<(&str, &str)> = HashSet::with_capacity(ours.len());
    let mut picked: Vec<&DraDevice> = Vec::with_capacity(ours.len());
    for r in &ours {
        if !seen.insert((r.pool.as_str(), r.device.as_str())) {
            return Err(bad(Unmatched::Twice {
                pool: r.pool.clone(),
                device: r.device.clone(),
            }));
        }
        let Some((name, devices)) = pool.as_ref() else {
            return Err(bad(Unmatched::NoSlices {
                pool: r.pool.clone(),
                device: r.device.clone(),
            }));
        };
        if r.pool != *name {
            return Err(bad(Unmatched::OtherPool {
                device: r.device.clone(),
                pool: r.pool.clone(),
                node_pool: name.clone(),
            }));
        }
        let Some(device) = devices.get(r.device.as_str()) else {
            return Err(bad(Unmatched::Missing {
                device: r.device.clone(),
                pool: name.clone(),
            }));
        };
        picked.push(device);
    }
    let devices = read_devices(&picked).map_err(bad)?;
    Ok(Allocated {
        devices,
        names: ours.into_iter().cloned().collect(),
        other_drivers,
    })
}

/// A pool's name and its devices by name.
type PoolDevices<'a> = (String, HashMap<&'a str, &'a DraDevice>);

/// The node's pool of driver `gpu.nvidia.com` at its newest generation ([`Pool::newest`]): its
/// name and its devices by name. `None` when the node has no slice of the driver.
fn pool_devices<'a>(
    node_name: &str,
    slices: &[&'a ResourceSlice],
) -> Result<Option<PoolDevices<'a>>, PoolProblem> {
    let Some(pool) = Pool::newest(node_name, slices)? else {
        return Ok(None);
    };
    let mut devices = HashMap::new();
    for device in pool.slices.iter().flat_map(|s| s.spec.devices.iter().flatten()) {
        if devices.len() >= MAX_DEVICES {
            return Err(PoolProblem::TooManyDevices { limit: MAX_DEVICES });
        }
        devices.insert(device.name.as_str(), device);
    }
    Ok(Some((pool.name.to_string(), devices)))
}

/// `manifest` (a node's inventory, from whichever source) with its devices replaced by the
/// allocated ones: what exact mode judges at the binding. Host and driver facts stay the
/// inventory's. Where every allocated device has a UUID the inventory lists, the inventory's
/// own description of it is used (a `GpuNode` knows more than a slice); otherwise the slices'.
pub fn restricted(manifest: &GpuManifest, allocated: &Allocated) -> GpuManifest {
    let mut m = manifest.clone();
    let own: Option<Vec<Device>> = manifest
        .nvidia
        .as_ref()
        .and_then(|n| n.devices.as_ref())
        .and_then(|listed| {
            let by_uuid: HashMap<&str, &Device> = listed
                .iter()
                .filter_map(|d| d.uuid.as_ref().map(|u| (u.as_str(), d)))
                .collect();
            allocated
                .devices
                .iter()
                .map(|d| {
                    d.uuid
                        .as_ref()
                        .and_then(|u| by_uuid.get(u.as_str()))
                        .map(|d| (*d).clone())
                })
                .collect()
        });
    let devices = own.unwrap_or_else(|| allocated.devices.clone());
    m.nvidia.get_or_insert_with(Nvidia::default).devices = Some(devices);
    m
}

/// Each device of node `node_name`'s pool of driver `gpu.nvidia.com` by UUID, named as the
/// slices name it (`pool/device`): how `miggate where` says which devices a claim would take.
/// Devices without a UUID (DynamicMIG's possible partitions) have no entry; an unreadable pool
/// gives none.
pub fn device_names(node_name: &str, slices: &[&ResourceSlice]) -> HashMap<String, String> {
    let Ok(Some((pool, devices))) = pool_devices(node_name, slices) else {
        return HashMap::new();
    };
    devices
        .into_iter()
        .filter_map(|(name, d)| {
            let uuid = d.attributes.as_ref()?.get("uuid")?.string.clone()?;
            Some((uuid, format!("{pool}/{name}")))
        })
        .collect()
}

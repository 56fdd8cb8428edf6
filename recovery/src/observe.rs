//! Reading the node through the seams into the layout's terms.

use crate::bdf::Bdf;
use crate::error::Result;
use crate::layout::{GpuInstanceLayout, GpuLayout, Layout, MigSetting, VfLayout};
use crate::seams::{GpuInfo, Host, MigModeState, SriovState, VfVgpu};

/// What the node looks like now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedNode {
    /// Physical GPUs, in bus order.
    pub gpus: Vec<ObservedGpu>,
}

/// One physical GPU now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedGpu {
    /// Bus id.
    pub bus: Bdf,
    /// UUID.
    pub uuid: String,
    /// MIG mode; `None` when not MIG-capable.
    pub mig: Option<MigModeState>,
    /// GPU instances with compute instances, in placement order (empty unless MIG is on).
    pub instances: Vec<GpuInstanceLayout>,
    /// SR-IOV counters; `None` without SR-IOV.
    pub sriov: Option<SriovState>,
    /// VFs in `virtfnN` order.
    pub vfs: Vec<ObservedVf>,
}

/// One VF now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedVf {
    /// The `N` of `virtfnN`.
    pub index: u32,
    /// Its address.
    pub bdf: Bdf,
    /// Its `nvidia/` directory; `None` while not populated.
    pub vgpu: Option<VfVgpu>,
}

impl ObservedGpu {
    /// `sriov_numvfs` (0 without SR-IOV).
    pub fn num_vfs(&self) -> u32 {
        self.sriov.map_or(0, |s| s.num)
    }

    /// VFs carrying a vGPU now: a tenant's, which recovery must never destroy.
    pub fn active_vgpus(&self) -> impl Iterator<Item = &ObservedVf> {
        self.vfs
            .iter()
            .filter(|v| v.vgpu.as_ref().is_some_and(|g| g.current != 0))
    }

    /// The VF with index `index`.
    pub fn vf(&self, index: u32) -> Option<&ObservedVf> {
        self.vfs.iter().find(|v| v.index == index)
    }
}

impl ObservedNode {
    /// The GPU at `bus`.
    pub fn gpu(&self, bus: &Bdf) -> Option<&ObservedGpu> {
        self.gpus.iter().find(|g| &g.bus == bus)
    }
}

/// The physical GPUs the driver lists, in bus order: VFs (which some tools list too) left out.
pub fn physical_gpus(host: &Host<'_>) -> Result<Vec<GpuInfo>> {
    let mut listed = Vec::new();
    for gpu in host.gpu.gpus()? {
        if !host.sysfs.is_vf(&gpu.bus)? {
            listed.push(gpu);
        }
    }
    listed.sort_by(|a, b| a.bus.cmp(&b.bus));
    Ok(listed)
}

/// Reads every physical GPU: mode, instances, SR-IOV, VFs and their vGPU types.
pub fn observe(host: &Host<'_>) -> Result<ObservedNode> {
    let mut gpus = Vec::new();
    let listed = physical_gpus(host)?;
    for info in listed {
        gpus.push(observe_gpu(host, info)?);
    }
    Ok(ObservedNode { gpus })
}

fn observe_gpu(host: &Host<'_>, info: GpuInfo) -> Result<ObservedGpu> {
    let instances = match info.mig {
        Some(m) if m.current == MigSetting::Enabled => {
            let mut gis = host.gpu.instances(&info.bus)?;
            for gi in &mut gis {
                gi.compute_instances.sort();
            }
            gis.sort();
            gis
        }
        _ => Vec::new(),
    };
    let sriov = host.sysfs.sriov(&info.bus)?;
    let mut vfs = Vec::new();
    if sriov.is_some_and(|s| s.num > 0) {
        for (index, bdf) in host.sysfs.vfs(&info.bus)? {
            let vgpu = host.sysfs.vf_vgpu(&bdf)?;
            vfs.push(ObservedVf { index, bdf, vgpu });
        }
    }
    Ok(ObservedGpu {
        bus: info.bus,
        uuid: info.uuid,
        mig: info.mig,
        instances,
        sriov,
        vfs,
    })
}

impl ObservedNode {
    /// The node as a layout, for `recover record`. The vGPU type name comes from the VF's own
    /// `creatable_vgpu_types` when it lists the id, else from a sibling's; on a fully carved
    /// card no list may name it, and the name is left out (it is never compared).
    pub fn to_layout(&self, recorded_at: Option<String>, fabric_mode: Option<u32>) -> Layout {
        let gpus = self
            .gpus
            .iter()
            .map(|g| {
                // id -> name, the first VF's name winning: one pass, not a scan per VF.
                let mut names = std::collections::BTreeMap::new();
                for t in g
                    .vfs
                    .iter()
                    .filter_map(|v| v.vgpu.as_ref())
                    .flat_map(|v| v.creatable.iter())
                {
                    names.entry(t.id).or_insert(&t.name);
                }
                let vfs = g
                    .active_vgpus()
                    .filter_map(|v| {
                        let id = v.vgpu.as_ref()?.current;
                        Some(VfLayout {
                            index: v.index,
                            vgpu_type_id: id,
                            vgpu_type_name: names.get(&id).map(|n| (*n).clone()),
                        })
                    })
                    .collect();
                let mut gpu = GpuLayout {
                    bus: g.bus.clone(),
                    uuid: Some(g.uuid.clone()),
                    mig_mode: g.mig.map_or(MigSetting::Disabled, |m| m.current),
                    gpu_instances: g.instances.clone(),
                    sriov_num_vfs: g.sriov.map(|s| s.num),
                    vfs,
                };
                gpu.normalise();
                gpu
            })
            .collect();
        Layout {
            api_version: crate::layout::API_VERSION.to_string(),
            kind: crate::layout::KIND.to_string(),
            recorded_at,
            fabric_mode,
            mig_managed_by: None,
            gpus,
            manifest: None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::{Duration, Instant};

    use super::*;
    use crate::seams::VgpuType;

    /// A GPU with 4096 VFs, each listing 32 creatable types and carrying one: the names are
    /// looked up once per type, not by scanning every VF's list for every VF.
    #[test]
    fn recording_4096_vfs_with_long_creatable_lists_is_near_linear() {
        let types: Vec<VgpuType> = (0..32)
            .map(|i| VgpuType {
                id: 1000 + i,
                name: format!("NVIDIA T-{i}"),
            })
            .collect();
        let vfs: Vec<ObservedVf> = (0..4096_u32)
            .map(|n| ObservedVf {
                index: n,
                bdf: Bdf::parse(&format!(
                    "0000:{:02x}:{:02x}.{}",
                    0x20 + n / 256,
                    (n / 8) % 32,
                    n % 8
                ))
                .unwrap(),
                vgpu: Some(VfVgpu {
                    // A fully carved card: no list names the type, so a scan walks every list.
                    current: 2000,
                    creatable: types.clone(),
                }),
            })
            .collect();
        let node = ObservedNode {
            gpus: vec![ObservedGpu {
                bus: Bdf::parse("0000:18:00.0").unwrap(),
                uuid: "GPU-1".into(),
                mig: None,
                instances: Vec::new(),
                sriov: Some(SriovState {
                    total: 4096,
                    num: 4096,
                }),
                vfs,
            }],
        };
        let started = Instant::now();
        let layout = node.to_layout(None, None);
        let took = started.elapsed();
        assert_eq!(layout.gpus[0].vfs.len(), 4096);
        assert_eq!(layout.gpus[0].vfs[4095].vgpu_type_name, None);
        assert!(took < Duration::from_secs(2), "took {took:?}");
    }
}

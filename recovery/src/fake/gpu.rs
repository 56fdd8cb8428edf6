//! The fake `nvidia-smi`: MIG mode, resets and their refusals, persistence, GPU and compute
//! instances, on the shared model.

use super::{FakeGi, FakeNode, NodeState, PROFILES, cmd_err};
use crate::bdf::Bdf;
use crate::error::{Error, ResetFailure, Result};
use crate::layout::{GpuInstanceLayout, MigSetting, Placement};
use crate::seams::{GpuControl, GpuInfo, MigModeState};

impl GpuControl for FakeNode {
    fn gpus(&self) -> Result<Vec<GpuInfo>> {
        let mut s = self.lock();
        s.alive()?;
        if s.driver_after > 0 || !s.modules.iter().any(|m| m == "nvidia") {
            s.driver_after = s.driver_after.saturating_sub(1);
            return Err(cmd_err(
                "nvidia-smi --query-gpu".into(),
                "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
            ));
        }
        let mut listed: Vec<GpuInfo> = s
            .gpus
            .iter()
            .map(|g| GpuInfo {
                bus: g.bus.clone(),
                uuid: g.uuid.clone(),
                mig: g.mig_capable.then_some(MigModeState {
                    current: g.current,
                    pending: g.pending,
                }),
            })
            .collect();
        if s.lists_vfs {
            for (n, vf) in s.gpus.iter().flat_map(|g| g.vfs.iter()).enumerate() {
                listed.push(GpuInfo {
                    bus: vf.bdf.clone(),
                    uuid: format!("GPU-vf-{n}"),
                    mig: None,
                });
            }
        }
        Ok(listed)
    }

    fn set_mig_mode(&self, gpu: &Bdf, mode: MigSetting) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!(
            "nvidia-smi -i {gpu} -mig {}",
            u8::from(mode == MigSetting::Enabled)
        ))?;
        let auto = s.auto_activate;
        let g = s.gpu(gpu)?.clone();
        if !g.vfs.is_empty() {
            s.failed("In use by another client");
            return Err(cmd_err(
                format!("nvidia-smi -i {gpu} -mig"),
                "Unable to set MIG mode: In use by another client",
            ));
        }
        let held = s.held(&g);
        let g = s.gpu(gpu)?;
        g.pending = mode;
        if auto && !held && g.current != mode {
            g.current = mode;
            g.gis.clear();
        }
        Ok(())
    }

    fn reset(&self, gpus: &[Bdf]) -> Result<()> {
        let mut s = self.lock();
        let list = gpus.iter().map(Bdf::as_str).collect::<Vec<_>>().join(",");
        s.mutate(format!("nvidia-smi -r -i {list}"))?;
        let fail = |s: &mut NodeState, kind: ResetFailure, output: &str| {
            s.failed(&kind.to_string());
            Err(Error::Reset {
                gpus: gpus.to_vec(),
                kind,
                output: output.to_string(),
            })
        };
        if !s.reset_supported {
            return fail(
                &mut s,
                ResetFailure::NotSupported,
                "Resetting GPU is not supported.",
            );
        }
        if s.nvlink_group && gpus.len() < s.gpus.len() {
            return fail(
                &mut s,
                ResetFailure::NvlinkGroup,
                "GPUs connected by NVLink must be reset together",
            );
        }
        if s.board_refuses_partial_reset && gpus.len() < s.gpus.len() {
            let bus = gpus.first().map_or("", Bdf::as_str).to_string();
            return fail(
                &mut s,
                ResetFailure::InUse,
                &format!("The following GPUs could not be reset:\n  GPU {bus}: In use by another client"),
            );
        }
        for bus in gpus {
            let g = s.gpu(bus)?.clone();
            if !g.vfs.is_empty() || s.held(&g) {
                return fail(
                    &mut s,
                    ResetFailure::InUse,
                    &format!("The following GPUs could not be reset:\n  GPU {bus}: In use by another client"),
                );
            }
        }
        for bus in gpus {
            let g = s.gpu(bus)?;
            g.current = g.pending;
            g.gis.clear();
        }
        Ok(())
    }

    fn set_persistence(&self, gpu: &Bdf, on: bool) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!("nvidia-smi -i {gpu} -pm {}", u8::from(on)))?;
        s.gpu(gpu)?.persistence = on;
        Ok(())
    }

    fn instances(&self, gpu: &Bdf) -> Result<Vec<GpuInstanceLayout>> {
        let mut s = self.lock();
        s.alive()?;
        Ok(s.gpu(gpu)?.instances())
    }

    fn gpu_instance_profiles(&self, gpu: &Bdf) -> Result<Vec<(u32, String)>> {
        let mut s = self.lock();
        s.alive()?;
        s.gpu(gpu)?;
        Ok(PROFILES
            .iter()
            .map(|(id, name, _, _)| (*id, name.to_string()))
            .collect())
    }

    fn offered_placements(&self, gpu: &Bdf) -> Result<Vec<(u32, Vec<Placement>)>> {
        let mut s = self.lock();
        s.alive()?;
        s.gpu(gpu)?;
        Ok(PROFILES
            .iter()
            .map(|(id, _, starts, size)| {
                (
                    *id,
                    starts
                        .iter()
                        .map(|st| Placement {
                            start: *st,
                            size: *size,
                        })
                        .collect(),
                )
            })
            .collect())
    }

    fn create_gpu_instance(&self, gpu: &Bdf, profile_id: u32, placement: Placement) -> Result<u32> {
        let mut s = self.lock();
        s.mutate(format!(
            "nvidia-smi mig -i {gpu} -cgi {profile_id}:{}",
            placement.start
        ))?;
        let g = s.gpu(gpu)?;
        let overlaps = g.gis.iter().any(|gi| {
            gi.placement.start < placement.start + placement.size
                && placement.start < gi.placement.start + gi.placement.size
        });
        if g.current != MigSetting::Enabled || overlaps {
            s.failed("Insufficient Resources");
            return Err(cmd_err(
                format!("nvidia-smi mig -cgi {profile_id}:{}", placement.start),
                "Unable to create a GPU instance: Insufficient Resources",
            ));
        }
        let id = g.next_gi;
        g.next_gi += 1;
        g.gis.push(FakeGi {
            id,
            profile_id,
            placement,
            cis: Vec::new(),
        });
        Ok(id)
    }

    fn create_compute_instance(&self, gpu: &Bdf, gpu_instance: u32, profile_id: u32) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!(
            "nvidia-smi mig -i {gpu} -gi {gpu_instance} -cci {profile_id}"
        ))?;
        let g = s.gpu(gpu)?;
        match g.gis.iter_mut().find(|gi| gi.id == gpu_instance) {
            Some(gi) => {
                gi.cis.push(profile_id);
                Ok(())
            }
            None => {
                s.failed("Not Found");
                Err(cmd_err(
                    "nvidia-smi mig -cci".into(),
                    "Failed to create compute instances: Not Found",
                ))
            }
        }
    }

    fn destroy_instances(&self, gpu: &Bdf) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!("nvidia-smi mig -i {gpu} -dci -dgi"))?;
        let g = s.gpu(gpu)?;
        if g.vfs.iter().any(|v| v.current != 0) {
            s.failed("In use");
            return Err(cmd_err(
                "nvidia-smi mig -dgi".into(),
                "Unable to destroy GPU instance: In use by another client",
            ));
        }
        g.gis.clear();
        Ok(())
    }
}

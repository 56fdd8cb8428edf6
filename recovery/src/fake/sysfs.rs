//! The fake sysfs and `sriov-manage`: SR-IOV state and VFs, each VF's `nvidia/` directory and
//! vGPU type, loaded modules, the boot id, persistenced's socket, the fabric manager's mode,
//! NVSwitches.

use super::{FakeNode, NodeState, cmd_err, vf};
use crate::bdf::Bdf;
use crate::error::{Error, Result};
use crate::layout::MigSetting;
use crate::seams::{SriovManage, SriovState, Sysfs, VfVgpu};

impl Sysfs for FakeNode {
    fn sriov(&self, pf: &Bdf) -> Result<Option<SriovState>> {
        let mut s = self.lock();
        s.alive()?;
        let g = s.gpu(pf)?;
        Ok(g.total_vfs.map(|total| SriovState {
            total,
            num: g.vfs.len() as u32,
        }))
    }

    fn vfs(&self, pf: &Bdf) -> Result<Vec<(u32, Bdf)>> {
        let mut s = self.lock();
        s.alive()?;
        Ok(s.gpu(pf)?
            .vfs
            .iter()
            .enumerate()
            .map(|(n, v)| (n as u32, v.bdf.clone()))
            .collect())
    }

    fn vf_vgpu(&self, vf: &Bdf) -> Result<Option<VfVgpu>> {
        let s = self.lock();
        s.alive()?;
        let Some((gi, vi)) = s
            .gpus
            .iter()
            .enumerate()
            .find_map(|(gi, g)| g.vfs.iter().position(|v| &v.bdf == vf).map(|vi| (gi, vi)))
        else {
            return Ok(None);
        };
        if s.now < s.gpus[gi].vfs[vi].dir_at {
            return Ok(None);
        }
        let (g, v) = (&s.gpus[gi], &s.gpus[gi].vfs[vi]);
        Ok(Some(VfVgpu {
            current: v.current,
            creatable: s.creatable(g, v),
        }))
    }

    fn write_vgpu_type(&self, vf: &Bdf, type_id: u32) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!("echo {type_id} > {vf}/nvidia/current_vgpu_type"))?;
        let found = s
            .gpus
            .iter()
            .enumerate()
            .find_map(|(gi, g)| g.vfs.iter().position(|v| &v.bdf == vf).map(|vi| (gi, vi)));
        let err = |s: &mut NodeState, reason: &str| {
            s.failed(reason);
            Err(Error::VgpuWrite {
                vf: vf.clone(),
                type_id,
                reason: reason.to_string(),
            })
        };
        let Some((gi, vi)) = found else {
            return err(&mut s, "ENOENT");
        };
        if type_id == 0 {
            let v = &mut s.gpus[gi].vfs[vi];
            v.current = 0;
            v.gi = None;
            return Ok(());
        }
        let g = s.gpus[gi].clone();
        let v = g.vfs[vi].clone();
        if v.current != 0 {
            return err(&mut s, "EBUSY");
        }
        let Some(t) = s.vgpu_types.iter().find(|t| t.id == type_id).cloned() else {
            return err(&mut s, "EINVAL");
        };
        let Some(backing) = s
            .free_gi(&g, t.gi_profile)
            .filter(|_| g.current == MigSetting::Enabled)
        else {
            // dmesg: NVRM: Failed to add vgpu create request: 0x38
            return err(&mut s, "EIO (Input/output error)");
        };
        if !s.creatable(&g, &v).iter().any(|c| c.id == type_id) {
            return err(&mut s, "EINVAL");
        }
        let v = &mut s.gpus[gi].vfs[vi];
        v.current = type_id;
        v.gi = Some(backing);
        Ok(())
    }

    fn is_vf(&self, dev: &Bdf) -> Result<bool> {
        let s = self.lock();
        s.alive()?;
        Ok(s.gpus.iter().any(|g| g.vfs.iter().any(|v| &v.bdf == dev)))
    }

    fn module_loaded(&self, name: &str) -> Result<bool> {
        let s = self.lock();
        s.alive()?;
        Ok(s.modules.iter().any(|m| m == name))
    }

    fn boot_id(&self) -> Result<Option<String>> {
        let s = self.lock();
        s.alive()?;
        Ok(Some(format!("fake-boot-{}", s.boots)))
    }

    fn persistenced_reachable(&self) -> Result<bool> {
        let s = self.lock();
        s.alive()?;
        Ok(s.persistenced_reachable)
    }

    fn fabric_mode(&self) -> Result<Option<u32>> {
        let s = self.lock();
        s.alive()?;
        Ok(s.fabric_mode)
    }

    fn nvswitches(&self) -> Result<u32> {
        let s = self.lock();
        s.alive()?;
        Ok(s.nvswitches)
    }
}

impl SriovManage for FakeNode {
    fn enable(&self, pf: &Bdf) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!("sriov-manage -e {pf}"))?;
        let delay = s.now.saturating_add(s.vf_dir_delay);
        let g = s.gpu(pf)?.clone();
        if !g.pids.is_empty() {
            s.failed("Cannot obtain unbindLock");
            return Err(cmd_err(
                format!("sriov-manage -e {pf}"),
                "Cannot obtain unbindLock",
            ));
        }
        if s.sriov_transient_failures > 0 {
            s.sriov_transient_failures -= 1;
            s.failed("vgpu_mgr timeout");
            return Err(cmd_err(
                format!("sriov-manage -e {pf}"),
                "NVRM: Timeout occurred in event processing by vgpu_mgr daemon",
            ));
        }
        if s.sriov_silent_noops > 0 {
            s.sriov_silent_noops -= 1;
            s.failed("exit 0, no VFs");
            return Ok(());
        }
        let g = s.gpu(pf)?;
        if !g.vfs.is_empty() {
            return Ok(()); // "already has VFs enabled"
        }
        let Some(total) = g.total_vfs else { return Ok(()) };
        // The PF rebind wipes every GPU instance.
        g.gis.clear();
        let base = pf
            .as_str()
            .rsplit_once(':')
            .map_or("0000:00", |(b, _)| b)
            .to_string();
        g.vfs = (0..total).filter_map(|n| vf(&base, n, delay)).collect();
        Ok(())
    }

    fn disable(&self, pf: &Bdf) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!("sriov-manage -d {pf}"))?;
        let g = s.gpu(pf)?;
        if g.vfs.iter().any(|v| v.current != 0) {
            s.failed("VF in use");
            return Err(cmd_err(format!("sriov-manage -d {pf}"), "VF in use"));
        }
        g.vfs.clear();
        Ok(())
    }
}

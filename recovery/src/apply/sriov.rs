//! SR-IOV around the MIG mode change: the VFs are disabled before it (a mode change needs
//! them gone) and enabled again after, waiting for every VF's `nvidia/` directory.

use super::{Flow, NotReady, Run};
use crate::bdf::Bdf;
use crate::plan::Step;
use crate::steps::StepName;

impl Run<'_, '_> {
    pub(super) fn sriov_off(&mut self) -> Flow<()> {
        let p = self.replan()?;
        for step in p.steps {
            let Step::SriovDisable { pf, .. } = &step else {
                continue;
            };
            let t = self.begin(StepName::SriovDisable, &step.to_string())?;
            self.changed = true;
            let ran = self.host.sriov.disable(pf);
            let num = self.vf_count(pf)?;
            if num != 0 {
                let why = ran.err().map_or(String::new(), |e| format!(" ({e})"));
                return Err(self.fail(format!(
                    "{pf}: sriov_numvfs is still {num} after sriov-manage -d{why}"
                )));
            }
            self.end(t, "sriov_numvfs 0");
        }
        Ok(())
    }

    pub(super) fn sriov_on(&mut self) -> Flow<()> {
        let p = self.replan()?;
        for step in &p.steps {
            let Step::SriovEnable { pf, num_vfs } = step else {
                continue;
            };
            let t = self.begin(StepName::SriovEnable, &step.to_string())?;
            self.changed = true;
            self.enable_vfs(pf, *num_vfs)?;
            self.end(t, &format!("sriov_numvfs {num_vfs}"));
        }
        for gpu in &self.layout.gpus {
            if gpu.sriov_num_vfs.unwrap_or(0) == 0 {
                continue;
            }
            let t = self.begin(
                StepName::VfSysfs,
                &format!("{}: waiting for every VF's nvidia/ directory", gpu.bus),
            )?;
            let limit = self.options.vf_dir_timeout;
            let pf = gpu.bus.clone();
            self.wait(limit, |run| {
                for (n, vf) in run.host.sysfs.vfs(&pf)? {
                    if run.host.sysfs.vf_vgpu(&vf)?.is_none() {
                        return Err(NotReady::VfWithoutDirectory { vf, n });
                    }
                }
                Ok(())
            })
            .map_err(|why| {
                self.fail(format!(
                    "{why} has no nvidia/ directory after {}s: is the vGPU manager (nvidia-vgpu-mgr) running?",
                    limit.as_secs()
                ))
            })?;
            self.end(t, "ok");
        }
        Ok(())
    }

    /// How many VFs `pf` has enabled now, as sysfs says (0 when it has no SR-IOV).
    fn vf_count(&self, pf: &Bdf) -> Flow<u32> {
        Ok(self
            .host
            .sysfs
            .sriov(pf)
            .map_err(self.err("reading sriov_numvfs"))?
            .map_or(0, |s| s.num))
    }

    fn enable_vfs(&mut self, pf: &Bdf, want: u32) -> Flow<()> {
        let attempts = self.options.sriov_attempts.max(1);
        let mut last = String::new();
        for attempt in 1..=attempts {
            let ran = self.host.sriov.enable(pf);
            let num = self.vf_count(pf)?;
            if num == want {
                return Ok(());
            }
            last = match ran {
                Ok(()) => format!("sriov-manage -e exited 0 but sriov_numvfs is {num}"),
                Err(e) => format!("{e}; sriov_numvfs is {num}"),
            };
            if attempt < attempts {
                self.say(&format!("attempt {attempt}/{attempts}: {last}; retrying"));
                self.host.clock.sleep(self.options.sriov_retry_delay);
            }
        }
        Err(self.fail(format!(
            "{pf}: VFs not enabled after {attempts} attempts (expected sriov_numvfs {want}): {last}"
        )))
    }
}

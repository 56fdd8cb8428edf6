//! vGPU types: each VF's `current_vgpu_type` written as the layout says, checked against what
//! the VF offers now and read back.

use super::{Flow, Run};
use crate::bdf::Bdf;
use crate::plan::Step;
use crate::steps::StepName;

impl Run<'_, '_> {
    pub(super) fn vgpus(&mut self) -> Flow<()> {
        let p = self.replan()?;
        // Each PF's VFs are listed once for the phase (the VFs do not change in it), not once
        // per VF written: a listing reads every `virtfnN` link.
        let mut listed: std::collections::BTreeMap<Bdf, std::collections::BTreeMap<u32, Bdf>> =
            std::collections::BTreeMap::new();
        for step in &p.steps {
            let Step::WriteVgpuType {
                pf,
                vf_index,
                type_id,
            } = step
            else {
                continue;
            };
            let t = self.begin(StepName::VgpuType, &step.to_string())?;
            self.changed = true;
            if !listed.contains_key(pf) {
                let vfs = self.host.sysfs.vfs(pf).map_err(self.err("listing VFs"))?;
                listed.insert(pf.clone(), vfs.into_iter().collect());
            }
            let vf = listed
                .get(pf)
                .and_then(|vfs| vfs.get(vf_index))
                .cloned()
                .ok_or_else(|| self.fail(format!("{pf}: no virtfn{vf_index}")))?;
            // Re-read per VF: the list shrinks as siblings take capacity.
            let now = self
                .host
                .sysfs
                .vf_vgpu(&vf)
                .map_err(self.err("reading the VF's nvidia/ directory"))?
                .ok_or_else(|| self.fail(format!("VF {vf} has no nvidia/ directory")))?;
            if !now.creatable.iter().any(|t| t.id == *type_id) {
                let list: Vec<String> = now
                    .creatable
                    .iter()
                    .map(|t| format!("{} ({})", t.id, miggate_compat::escape::escape(&t.name)))
                    .collect();
                return Err(self.fail(format!(
                    "VF {vf} (virtfn{vf_index}): vGPU type {type_id} is not creatable now (creatable: {}); are the GPU \
                     instances for it there?",
                    if list.is_empty() { "none".to_string() } else { list.join(", ") }
                )));
            }
            self.host
                .sysfs
                .write_vgpu_type(&vf, *type_id)
                .map_err(self.err("writing the vGPU type"))?;
            let back = self
                .host
                .sysfs
                .vf_vgpu(&vf)
                .map_err(self.err("reading the VF back"))?
                .map_or(0, |v| v.current);
            if back != *type_id {
                return Err(self.fail(format!(
                    "VF {vf}: current_vgpu_type reads {back} after writing {type_id}"
                )));
            }
            self.end(t, "ok");
        }
        Ok(())
    }
}

//! MIG instances: the GPU instances a layout lists are destroyed and created again, after
//! checking that this GPU offers the same profiles at the same placements.

use super::{Flow, Run};
use crate::bdf::Bdf;
use crate::layout::GpuInstanceLayout;
use crate::plan::Step;
use crate::steps::StepName;

impl Run<'_, '_> {
    pub(super) fn instances(&mut self) -> Flow<()> {
        let p = self.replan()?;
        for step in &p.steps {
            match step {
                Step::DestroyInstances { gpu } => {
                    let t = self.begin(StepName::DestroyInstances, &step.to_string())?;
                    self.changed = true;
                    self.host
                        .gpu
                        .destroy_instances(gpu)
                        .map_err(self.err("destroying instances"))?;
                    self.end(t, "ok");
                }
                Step::CreateInstances { gpu, instances } => {
                    let t = self.begin(StepName::CreateInstances, &step.to_string())?;
                    self.changed = true;
                    self.create(gpu, instances)?;
                    self.end(t, &format!("{} GPU instances", instances.len()));
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn create(&mut self, gpu: &Bdf, instances: &[GpuInstanceLayout]) -> Flow<()> {
        let profiles = self
            .host
            .gpu
            .gpu_instance_profiles(gpu)
            .map_err(self.err("reading the GPU instance profiles"))?;
        for gi in instances {
            let Some(want) = &gi.profile else { continue };
            match profiles.iter().find(|(id, _)| *id == gi.profile_id) {
                Some((_, have)) if have == want => {}
                found => {
                    return Err(self.fail(format!(
                        "{gpu}: GPU instance profile {} is {} on this GPU but {} in the layout (nvidia-smi mig -lgip): \
                         the layout was recorded on another GPU model",
                        gi.profile_id,
                        found.map_or("not offered".to_string(), |(_, n)| miggate_compat::escape::escape(n).into_owned()),
                        miggate_compat::escape::escape(want)
                    )));
                }
            }
        }
        let offered = self
            .host
            .gpu
            .offered_placements(gpu)
            .map_err(self.err("reading offered placements"))?;
        for gi in instances {
            let ok = offered
                .iter()
                .any(|(id, places)| *id == gi.profile_id && places.contains(&gi.placement));
            if !ok {
                return Err(self.fail(format!(
                    "{gpu}: GPU instance profile {} at {} is not offered by this GPU (nvidia-smi mig -lgipp); the layout \
                     was recorded on another GPU model or driver",
                    gi.profile_id, gi.placement
                )));
            }
        }
        for gi in instances {
            let id = self
                .host
                .gpu
                .create_gpu_instance(gpu, gi.profile_id, gi.placement)
                .map_err(self.err("creating a GPU instance"))?;
            for ci in &gi.compute_instances {
                self.host
                    .gpu
                    .create_compute_instance(gpu, id, ci.profile_id)
                    .map_err(self.err("creating a compute instance"))?;
            }
        }
        Ok(())
    }
}

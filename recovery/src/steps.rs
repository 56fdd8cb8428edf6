//! The one table of a run's steps: a row per step gives its constant, its stable name (in the
//! state file, the journal, progress lines and `docs/recovery.md`'s runbook) and the phase the
//! state file reports while it runs. Names, the phase and the list all follow from it, so a
//! step is never told by the shape of its name. Row order is the order a run goes through them;
//! a released name never changes (an interrupted run's journal holds it).

use std::fmt;

use miggate_wire::recovery::Phase;

macro_rules! steps {
    ($($konst:ident = $name:literal, $phase:ident, $doc:literal;)*) => {
        /// A step of a run. Displays as its stable name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum StepName {
            $(
                #[doc = concat!("`", $name, "`: ", $doc)]
                $konst,
            )*
        }

        impl StepName {
            /// Every step, in the order a run goes through them.
            pub const ALL: &[StepName] = &[$(StepName::$konst),*];

            /// The name in the state file, journal and progress lines; never changed once released.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(StepName::$konst => $name,)*
                }
            }

            /// What the state file says while this step runs.
            pub fn phase(self) -> Phase {
                match self {
                    $(StepName::$konst => Phase::$phase,)*
                }
            }
        }
    };
}

steps! {
    Start = "start", Pending,
        "closes the gate, reads the journal and undoes what an interrupted run left stopped.";
    WaitDriver = "wait-driver", Pending,
        "waits for the driver to list every GPU of the layout.";
    WaitUnits = "wait-units", Pending,
        "waits for the units the options name (the vGPU host daemons).";
    WaitFabric = "wait-fabric", Pending,
        "waits for the fabric manager where the node has one.";
    WaitPersistenced = "wait-persistenced", Pending,
        "waits for nvidia-persistenced's socket, going on without it at the limit.";
    Plan = "plan", Recovering,
        "reads the node and compares it with the layout.";
    SriovDisable = "sriov-disable", Recovering,
        "disables a PF's VFs so its MIG mode can change.";
    MigSetting = "mig-mode", Recovering,
        "sets a GPU's MIG mode.";
    Reset = "reset", Recovering,
        "resets the GPUs whose MIG mode stayed pending, escalating.";
    Reboot = "reboot", Recovering,
        "requests the one guarded reboot when a reset is not supported.";
    SriovEnable = "sriov-enable", Recovering,
        "enables a PF's VFs (`sriov-manage -e`).";
    VfSysfs = "vf-sysfs", Recovering,
        "waits for each VF's `nvidia/` directory.";
    DestroyInstances = "destroy-instances", Recovering,
        "destroys a GPU's instances that do not match the layout.";
    CreateInstances = "create-instances", Recovering,
        "creates a GPU's GPU and compute instances at their placements.";
    VgpuType = "vgpu-type", Recovering,
        "writes a VF's vGPU type.";
    Verify = "verify", Recovering,
        "compares the node with the layout once more.";
    OpenGate = "open-gate", Recovering,
        "creates the readiness file and reports ready.";
}

impl fmt::Display for StepName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A step compares equal to its stable name, as the state file and the journal spell it.
impl PartialEq<&str> for StepName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// Names are unique and in the runbook's spelling; only the steps before the plan leave the
    /// node unchanged, so only they report `pending`.
    #[test]
    fn the_table_names_each_step_once_and_pending_ends_at_the_plan() {
        let names: HashSet<&str> = StepName::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(names.len(), StepName::ALL.len());
        assert!(
            names
                .iter()
                .all(|n| n.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'))
        );
        let plan = StepName::ALL
            .iter()
            .position(|s| *s == StepName::Plan)
            .unwrap_or(0);
        for (at, step) in StepName::ALL.iter().enumerate() {
            let want = if at < plan {
                Phase::Pending
            } else {
                Phase::Recovering
            };
            assert_eq!(step.phase(), want, "{step}");
        }
    }
}

//! The one table of checks: a row per check gives its constant, stable name, scope, function
//! and one-line doc, and the list, names, parsing, scope and dispatch all follow from it.
//! Adding a check is one file with its function and test table, one row here, and its section
//! in docs/checks.md (`tests/checks_doc.rs` fails until it is written). Row order is report
//! order, and a released name never changes.

use super::{Ctx, driver, gpu, host, pod, request};
use crate::report::CheckResult;
use crate::vocab::{CheckName, Scope};

/// One check as the engine runs it.
pub(crate) struct Check {
    pub name: &'static str,
    pub scope: Scope,
    pub run: fn(&Ctx<'_>) -> CheckResult,
    pub doc: &'static str,
}

macro_rules! registry {
    ($($konst:ident = $name:literal, $scope:ident, $run:path, $doc:literal;)*) => {
        /// Positions in the table, so each constant's index is written once, by the compiler.
        #[allow(non_camel_case_types, clippy::upper_case_acronyms, dead_code)]
        #[repr(u8)]
        enum Slot { $($konst),* }

        impl CheckName {
            $(
                #[doc = concat!("`", $name, "`: ", $doc)]
                pub const $konst: CheckName = CheckName(Slot::$konst as u8);
            )*
            /// Every check, in report order.
            pub const ALL: [CheckName; [$(Slot::$konst),*].len()] = [$(CheckName::$konst),*];
        }

        static CHECKS: [Check; CheckName::ALL.len()] = [
            $(Check { name: $name, scope: Scope::$scope, run: $run, doc: $doc }),*
        ];
    };
}

registry! {
    CPU_ARCH = "cpu-arch", Host, host::cpu_arch,
        "`host.cpuArch` equal: CRIU restores machine code as is.";
    KERNEL_VERSION = "kernel-version", Host, host::kernel_version,
        "`host.kernelVersion` equal (full release): kernels of one major.minor still differ in what CRIU restores.";
    KERNEL_MINIMUM = "kernel-minimum", Host, host::kernel_minimum,
        "the target kernel is at least the minimum (CRIU needs rseq support, 5.13).";
    IMAGE_DIGEST = "image-digest", Pod, pod::image_digest,
        "`pod.imageDigest` equal after reduction to a content digest.";
    MEMORY_LIMIT = "memory-limit", Pod, pod::memory_limit,
        "the target's memory limit is at least the source's.";
    CPU_LIMIT = "cpu-limit", Pod, pod::cpu_limit,
        "the target's CPU limit is at least the source's.";
    MOUNT = "mount", Pod, pod::mount,
        "every externalized source mount exists on the target.";
    GPU_MODEL = "gpu-model", Gpu, gpu::gpu_model,
        "the devices' product names, counted.";
    GPU_COUNT = "gpu-count", Gpu, gpu::gpu_count,
        "the number of devices.";
    MIG_PARTITIONING = "mig-partitioning", Gpu, gpu::mig_partitioning,
        "the kinds of device present (whole GPU, MIG slice).";
    MIG_PROFILE = "mig-profile", Gpu, gpu::mig_profile,
        "the slice shapes, counted per (model, profile).";
    DRIVER_VERSION = "driver-version", Gpu, driver::driver_version,
        "`nvidia.driverVersion` equal per numeric component.";
    DRIVER_MINIMUM = "driver-minimum", Gpu, driver::driver_minimum,
        "the target driver's major version is at least the minimum.";
    GPU_REQUEST = "gpu-request", Pod, request::gpu_request,
        "the restore container's GPU resource limits would give the source's devices.";
}

impl CheckName {
    fn row(self) -> &'static Check {
        // Every `CheckName` is one of the constants above, so its index is in the table.
        &CHECKS[usize::from(self.0)]
    }

    /// The stable name (`mig-profile`).
    pub fn as_str(self) -> &'static str {
        self.row().name
    }

    /// Which facts the check reads; a target without them makes it not applicable.
    pub fn scope(self) -> Scope {
        self.row().scope
    }

    /// What the check compares and why, in a sentence.
    pub fn doc(self) -> &'static str {
        self.row().doc
    }

    pub(crate) fn run(self, ctx: &Ctx<'_>) -> CheckResult {
        (self.row().run)(ctx)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let names: BTreeSet<&str> = CheckName::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), CheckName::ALL.len());
        for (i, c) in CheckName::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(c.0), i, "{c}: constants follow the table");
            assert_eq!(c.as_str().parse::<CheckName>().unwrap(), c);
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
            assert_eq!(serde_json::from_value::<CheckName>(c.as_str().into()).unwrap(), c);
            assert!(!c.doc().is_empty());
        }
    }

    /// A released name never changes; where a check stands is the table's row, free to move,
    /// so this is the set that was released, not every check and not their order.
    #[test]
    fn released_checks_keep_their_names() {
        let released = [
            "cpu-arch",
            "kernel-version",
            "kernel-minimum",
            "image-digest",
            "memory-limit",
            "cpu-limit",
            "mount",
            "gpu-model",
            "gpu-count",
            "mig-partitioning",
            "mig-profile",
            "driver-version",
            "driver-minimum",
            "gpu-request",
        ];
        let names: BTreeSet<&str> = CheckName::ALL.iter().map(|c| c.as_str()).collect();
        for name in released {
            assert!(names.contains(name), "released check `{name}` is gone or renamed");
        }
    }
}

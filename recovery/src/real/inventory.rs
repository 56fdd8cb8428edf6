//! The node's manifest through capture (the nvidia-smi backend, the same binary recovery runs).

use std::path::{Path, PathBuf};
use std::time::Duration;

use miggate_capture::{Backend, Options, capture};
use miggate_compat::{GpuManifest, VersionText};

use crate::error::{Error, Result};
use crate::files::read_bounded;
use crate::seams::Inventory;

/// The kernel release file, under the root.
const OSRELEASE: &str = "proc/sys/kernel/osrelease";

/// Capture with nvidia-smi at a path, the host facts read under a root.
#[derive(Debug, Clone)]
pub struct CaptureInventory {
    nvidia_smi: PathBuf,
    root: PathBuf,
    timeout: Duration,
}

impl CaptureInventory {
    /// Capture through `nvidia_smi`, within `timeout`; the kernel release is read under `root`
    /// (capture itself reads `/proc` of the process, which is not the node's under `--root`).
    pub fn new(nvidia_smi: PathBuf, root: &Path, timeout: Duration) -> CaptureInventory {
        CaptureInventory {
            nvidia_smi,
            root: root.to_path_buf(),
            timeout,
        }
    }
}

impl Inventory for CaptureInventory {
    fn capture(&self) -> Result<GpuManifest> {
        let options = Options {
            backend: Backend::NvidiaSmi,
            nvidia_smi: Some(self.nvidia_smi.clone()),
            nvml_library: None,
            node_name: None,
            timeout: Some(self.timeout),
        };
        let mut manifest = capture(&options).map_err(Error::Capture)?;
        // `--root` prefixes every host path: the kernel release is the root's, unknown when the
        // root has no procfs.
        let release = read_bounded(&self.root.join(OSRELEASE), 4096)?
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        if let Some(host) = manifest.host.as_mut() {
            host.kernel_version = release.map(VersionText::new);
        }
        Ok(manifest)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    /// Capture's error is kept whole: boot recovery's caller can tell a node without
    /// nvidia-smi from one whose nvidia-smi hung.
    #[test]
    fn a_missing_nvidia_smi_is_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let inventory = CaptureInventory::new(
            dir.path().join("no-nvidia-smi"),
            dir.path(),
            Duration::from_secs(5),
        );
        let err = inventory.capture().unwrap_err();
        let Error::Capture(capture) = &err else {
            panic!("not a capture error: {err:?}");
        };
        assert!(capture.is_not_found() && !capture.is_timeout(), "{err}");
        assert!(
            err.to_string().starts_with("capturing the node's manifest: "),
            "{err}"
        );
    }
}

//! PCI sysfs and host files under a root (`/` on a host; a temp tree in tests).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::bdf::Bdf;
use crate::error::{Error, Result};
use crate::files::read_bounded;
use crate::seams::{SriovState, Sysfs, VfVgpu, VgpuType};

/// The most a sysfs attribute is read (`creatable_vgpu_types` lists a few dozen lines).
const MAX_ATTR_BYTES: u64 = 64 * 1024;

/// sysfs and host files under `root`.
#[derive(Debug, Clone)]
pub struct RootedSysfs {
    root: PathBuf,
}

impl RootedSysfs {
    /// Files under `root`.
    pub fn new(root: &Path) -> RootedSysfs {
        RootedSysfs {
            root: root.to_path_buf(),
        }
    }

    fn device(&self, dev: &Bdf) -> PathBuf {
        self.root.join("sys/bus/pci/devices").join(dev.as_str())
    }

    fn read(&self, path: &Path) -> Result<Option<String>> {
        read_bounded(path, MAX_ATTR_BYTES)
    }

    fn number(&self, path: &Path) -> Result<Option<u32>> {
        let Some(text) = self.read(path)? else {
            return Ok(None);
        };
        let t = text.trim();
        if t.is_empty() {
            return Ok(Some(0));
        }
        t.parse().map(Some).map_err(|_| Error::Sysfs {
            path: path.to_path_buf(),
            content: t.to_string(),
        })
    }
}

/// Reads `creatable_vgpu_types`: `ID : NAME` lines (also `ID NAME`); a header or any line not
/// starting with a number is skipped.
pub fn parse_creatable(text: &str) -> Vec<VgpuType> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let end = line.find(|c: char| !c.is_ascii_digit()).unwrap_or(line.len());
            let id: u32 = line.get(..end)?.parse().ok()?;
            let name = line.get(end..)?.trim_start().trim_start_matches(':').trim();
            Some(VgpuType {
                id,
                name: name.to_string(),
            })
        })
        .collect()
}

impl Sysfs for RootedSysfs {
    fn sriov(&self, pf: &Bdf) -> Result<Option<SriovState>> {
        let dev = self.device(pf);
        let Some(total) = self.number(&dev.join("sriov_totalvfs"))? else {
            return Ok(None);
        };
        let num = self.number(&dev.join("sriov_numvfs"))?.unwrap_or(0);
        Ok(Some(SriovState { total, num }))
    }

    fn vfs(&self, pf: &Bdf) -> Result<Vec<(u32, Bdf)>> {
        let dev = self.device(pf);
        let entries = match fs::read_dir(&dev) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(Error::Io {
                    path: dev,
                    what: "listing",
                    source,
                });
            }
        };
        let mut vfs = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| Error::Io {
                path: dev.clone(),
                what: "listing",
                source,
            })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(n) = name.strip_prefix("virtfn").and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let link = fs::read_link(entry.path()).map_err(|source| Error::Io {
                path: entry.path(),
                what: "reading the link",
                source,
            })?;
            let target = link
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            vfs.push((n, Bdf::parse(&target)?));
        }
        // Numerically: virtfn10 after virtfn9.
        vfs.sort_by_key(|(n, _)| *n);
        Ok(vfs)
    }

    fn vf_vgpu(&self, vf: &Bdf) -> Result<Option<VfVgpu>> {
        let dir = self.device(vf).join("nvidia");
        let Some(current) = self.number(&dir.join("current_vgpu_type"))? else {
            return Ok(None);
        };
        let creatable = self
            .read(&dir.join("creatable_vgpu_types"))?
            .map_or_else(Vec::new, |t| parse_creatable(&t));
        Ok(Some(VfVgpu { current, creatable }))
    }

    fn write_vgpu_type(&self, vf: &Bdf, type_id: u32) -> Result<()> {
        let path = self.device(vf).join("nvidia/current_vgpu_type");
        let result = fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("{type_id}\n").as_bytes()));
        result.map_err(|e| Error::VgpuWrite {
            vf: vf.clone(),
            type_id,
            reason: e.to_string(),
        })
    }

    fn module_loaded(&self, name: &str) -> Result<bool> {
        if let Some(modules) = read_bounded(&self.root.join("proc/modules"), 1024 * 1024)? {
            return Ok(modules.lines().any(|l| l.split_whitespace().next() == Some(name)));
        }
        Ok(self.root.join("sys/module").join(name).exists())
    }

    fn persistenced_reachable(&self) -> Result<bool> {
        Ok([
            "var/run/nvidia-persistenced/socket",
            "run/nvidia-persistenced/socket",
        ]
        .iter()
        .any(|p| self.root.join(p).exists()))
    }

    fn fabric_mode(&self) -> Result<Option<u32>> {
        let path = self.root.join("usr/share/nvidia/nvswitch/fabricmanager.cfg");
        let Some(text) = read_bounded(&path, 1024 * 1024)? else {
            return Ok(None);
        };
        for line in text.lines() {
            if let Some(v) = line.trim().strip_prefix("FABRIC_MODE=") {
                return v.trim().parse().map(Some).map_err(|_| Error::Sysfs {
                    path: path.clone(),
                    content: line.to_string(),
                });
            }
        }
        Ok(None)
    }

    fn mdev_present(&self) -> Result<bool> {
        Ok(fs::read_dir(self.root.join("sys/class/mdev_bus")).is_ok_and(|mut d| d.next().is_some()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn creatable_lines_in_both_forms() {
        let got =
            parse_creatable("ID    : vGPU Name\n1414 : NVIDIA H200X-1-18C\n1415 NVIDIA H200X-2-35C\n\n");
        assert_eq!(
            got.iter().map(|t| (t.id, t.name.as_str())).collect::<Vec<_>>(),
            [(1414, "NVIDIA H200X-1-18C"), (1415, "NVIDIA H200X-2-35C")]
        );
    }

    #[cfg(unix)]
    #[test]
    fn virtfn_links_sort_numerically_and_audio_functions_are_not_vfs() {
        let dir = tempfile::tempdir().unwrap();
        let devs = dir.path().join("sys/bus/pci/devices");
        let pf = devs.join("0000:18:00.0");
        fs::create_dir_all(&pf).unwrap();
        fs::write(pf.join("sriov_totalvfs"), "16\n").unwrap();
        fs::write(pf.join("sriov_numvfs"), "11\n").unwrap();
        for n in 0..11_u32 {
            let vf = format!("0000:18:{:02x}.{}", (4 + n) / 8, (4 + n) % 8);
            fs::create_dir_all(devs.join(&vf)).unwrap();
            std::os::unix::fs::symlink(format!("../{vf}"), pf.join(format!("virtfn{n}"))).unwrap();
        }
        fs::create_dir_all(devs.join("0000:18:00.1")).unwrap();
        let sysfs = RootedSysfs::new(dir.path());
        let vfs = sysfs.vfs(&Bdf::parse("18:00.0").unwrap()).unwrap();
        assert_eq!(
            vfs.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            (0..11).collect::<Vec<_>>()
        );
        assert_eq!(vfs[10].1.as_str(), "0000:18:01.6");
        assert_eq!(
            sysfs.sriov(&Bdf::parse("18:00.0").unwrap()).unwrap(),
            Some(SriovState { total: 16, num: 11 })
        );
        assert!(sysfs.vf_vgpu(&vfs[0].1).unwrap().is_none());
    }
}

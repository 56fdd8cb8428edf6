//! PCI sysfs and host files under a root (`/` on a host; a temp tree in tests).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::bdf::Bdf;
use crate::error::{Error, Result};
use crate::files::read_bounded;
use crate::seams::{SriovState, Sysfs, VfVgpu, VgpuType};

/// The most PCI functions read when looking for NVSwitches.
const MAX_PCI_FUNCTIONS: usize = 4096;

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

/// A VF's mdev types directory (hosts with the mdev framework: vGPU before the vendor-specific
/// VFIO framework).
const MDEV_TYPES: &str = "mdev_supported_types";

/// The UUID of the mdev device recovery creates on a VF: derived from the VF's address, so the
/// same VF gets the same device across boots (a VM definition can name it).
pub fn mdev_uuid(vf: &Bdf) -> String {
    let digits: String = vf.as_str().chars().filter(char::is_ascii_hexdigit).collect();
    let n = u64::from_str_radix(&digits, 16).unwrap_or(0);
    format!("6d676761-7465-4000-8000-{:012x}", n & 0xffff_ffff_ffff)
}

/// The error of listing `dir`, for `map_err`.
fn listing(dir: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: dir.to_path_buf(),
        what: "listing",
        source,
    }
}

/// The number a sysfs name carries after `prefix` (`virtfn12`, `nvidia-1415`).
fn numbered(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.parse().ok()
}

/// The file name a link points at (a device address, an mdev type), empty when it has none.
fn link_name(link: &Path) -> String {
    link.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default()
}

impl RootedSysfs {
    /// A VF's vGPU state through mdev: the types with `available_instances` > 0 are creatable
    /// (named by their `name` file), and a device under the VF (a UUID directory with an
    /// `mdev_type` link to `nvidia-<id>`) is the current type. `None` without mdev types.
    fn mdev_vgpu(&self, vf: &Bdf) -> Result<Option<VfVgpu>> {
        let dev = self.device(vf);
        let types_dir = dev.join(MDEV_TYPES);
        let Ok(types) = fs::read_dir(&types_dir) else {
            return Ok(None);
        };
        let mut creatable = Vec::new();
        for entry in types {
            let entry = entry.map_err(listing(&types_dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(id) = numbered(&name, "nvidia-") else {
                continue;
            };
            if self
                .number(&entry.path().join("available_instances"))?
                .unwrap_or(0)
                == 0
            {
                continue;
            }
            let title = self
                .read(&entry.path().join("name"))?
                .unwrap_or_default()
                .trim()
                .to_string();
            creatable.push(VgpuType { id, name: title });
        }
        creatable.sort_by_key(|t| t.id);
        let mut current = 0;
        let entries = fs::read_dir(&dev).map_err(listing(&dev))?;
        for entry in entries {
            let entry = entry.map_err(listing(&dev))?;
            if entry.file_name().len() != 36 {
                continue;
            }
            let Ok(link) = fs::read_link(entry.path().join("mdev_type")) else {
                continue;
            };
            let target = link_name(&link);
            if let Some(id) = numbered(&target, "nvidia-") {
                current = id;
            }
        }
        Ok(Some(VfVgpu { current, creatable }))
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
            Err(source) => return Err(listing(&dev)(source)),
        };
        let mut vfs = Vec::new();
        for entry in entries {
            let entry = entry.map_err(listing(&dev))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(n) = numbered(&name, "virtfn") else {
                continue;
            };
            let link = fs::read_link(entry.path()).map_err(|source| Error::Io {
                path: entry.path(),
                what: "reading the link",
                source,
            })?;
            let target = link_name(&link);
            vfs.push((n, Bdf::parse(&target)?));
        }
        // Numerically: virtfn10 after virtfn9.
        vfs.sort_by_key(|(n, _)| *n);
        Ok(vfs)
    }

    fn vf_vgpu(&self, vf: &Bdf) -> Result<Option<VfVgpu>> {
        let dir = self.device(vf).join("nvidia");
        let Some(current) = self.number(&dir.join("current_vgpu_type"))? else {
            return self.mdev_vgpu(vf);
        };
        let creatable = self
            .read(&dir.join("creatable_vgpu_types"))?
            .map_or_else(Vec::new, |t| parse_creatable(&t));
        Ok(Some(VfVgpu { current, creatable }))
    }

    fn write_vgpu_type(&self, vf: &Bdf, type_id: u32) -> Result<()> {
        let mut path = self.device(vf).join("nvidia/current_vgpu_type");
        let mut text = format!("{type_id}\n");
        if !path.exists() && self.device(vf).join(MDEV_TYPES).exists() {
            path = self
                .device(vf)
                .join(MDEV_TYPES)
                .join(format!("nvidia-{type_id}/create"));
            text = format!("{}\n", mdev_uuid(vf));
        }
        let result = fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()));
        result.map_err(|e| Error::VgpuWrite {
            vf: vf.clone(),
            type_id,
            reason: e.to_string(),
        })
    }

    fn is_vf(&self, dev: &Bdf) -> Result<bool> {
        Ok(fs::symlink_metadata(self.device(dev).join("physfn")).is_ok())
    }

    fn module_loaded(&self, name: &str) -> Result<bool> {
        if let Some(modules) = read_bounded(&self.root.join("proc/modules"), 1024 * 1024)? {
            return Ok(modules.lines().any(|l| l.split_whitespace().next() == Some(name)));
        }
        Ok(self.root.join("sys/module").join(name).exists())
    }

    fn boot_id(&self) -> Result<Option<String>> {
        let id = read_bounded(&self.root.join("proc/sys/kernel/random/boot_id"), 4096)?;
        Ok(id.map(|id| id.trim().to_string()).filter(|id| !id.is_empty()))
    }

    fn persistenced_reachable(&self) -> Result<bool> {
        Ok([
            "var/run/nvidia-persistenced/socket",
            "run/nvidia-persistenced/socket",
        ]
        .iter()
        .any(|p| self.root.join(p).exists()))
    }

    fn nvswitches(&self) -> Result<u32> {
        let dir = self.root.join("sys/bus/pci/devices");
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(listing(&dir)(e)),
        };
        let mut found = 0u32;
        // A host has a few hundred PCI functions; a listing past this is not read further.
        for entry in entries.take(MAX_PCI_FUNCTIONS) {
            let entry = entry.map_err(listing(&dir))?;
            let dev = entry.path();
            let vendor = self.read(&dev.join("vendor"))?;
            let class = self.read(&dev.join("class"))?;
            let nvidia = vendor.as_deref().is_some_and(|v| v.trim() == "0x10de");
            let bridge = class.as_deref().is_some_and(|c| c.trim().starts_with("0x0680"));
            if nvidia && bridge {
                found = found.saturating_add(1);
            }
        }
        Ok(found)
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

    #[test]
    fn nvswitches_are_nvidia_bridges_on_the_pci_bus() {
        let dir = tempfile::tempdir().unwrap();
        let sysfs = RootedSysfs::new(dir.path());
        assert_eq!(sysfs.nvswitches().unwrap(), 0, "no sysfs tree: none");
        let devs = dir.path().join("sys/bus/pci/devices");
        for (bdf, vendor, class) in [
            ("0000:05:00.0", "0x10de", "0x068000"), // NVSwitch
            ("0000:06:00.0", "0x10de", "0x068000"), // NVSwitch
            ("0000:18:00.0", "0x10de", "0x030200"), // a GPU
            ("0000:19:00.0", "0x8086", "0x068000"), // another vendor's bridge
        ] {
            let d = devs.join(bdf);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("vendor"), format!("{vendor}\n")).unwrap();
            fs::write(d.join("class"), format!("{class}\n")).unwrap();
        }
        assert_eq!(sysfs.nvswitches().unwrap(), 2);
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
        std::os::unix::fs::symlink("../0000:18:00.0", devs.join("0000:18:00.4/physfn")).unwrap();
        let sysfs = RootedSysfs::new(dir.path());
        assert!(sysfs.is_vf(&Bdf::parse("0000:18:00.4").unwrap()).unwrap());
        assert!(!sysfs.is_vf(&Bdf::parse("0000:18:00.0").unwrap()).unwrap());
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

    #[cfg(unix)]
    #[test]
    fn mdev_vfs_list_available_types_show_their_device_and_create_by_writing_a_uuid() {
        let dir = tempfile::tempdir().unwrap();
        let vf = Bdf::parse("0000:41:00.4").unwrap();
        let dev = dir.path().join("sys/bus/pci/devices").join(vf.as_str());
        for (id, name, available) in [(558, "GRID A100-1-5C", 1), (559, "GRID A100-2-10C", 0)] {
            let t = dev.join(MDEV_TYPES).join(format!("nvidia-{id}"));
            fs::create_dir_all(&t).unwrap();
            fs::write(t.join("name"), format!("{name}\n")).unwrap();
            fs::write(t.join("available_instances"), format!("{available}\n")).unwrap();
            fs::write(t.join("create"), "").unwrap();
        }
        let sysfs = RootedSysfs::new(dir.path());
        let seen = sysfs.vf_vgpu(&vf).unwrap().unwrap();
        assert_eq!(seen.current, 0);
        assert_eq!(
            seen.creatable,
            [VgpuType {
                id: 558,
                name: "GRID A100-1-5C".into()
            }]
        );
        sysfs.write_vgpu_type(&vf, 558).unwrap();
        let uuid = mdev_uuid(&vf);
        assert_eq!(
            fs::read_to_string(dev.join(MDEV_TYPES).join("nvidia-558/create")).unwrap(),
            format!("{uuid}\n")
        );
        assert_eq!(uuid.len(), 36);
        // The kernel would now show the device under the VF.
        fs::create_dir_all(dev.join(&uuid)).unwrap();
        std::os::unix::fs::symlink(
            "../mdev_supported_types/nvidia-558",
            dev.join(&uuid).join("mdev_type"),
        )
        .unwrap();
        assert_eq!(sysfs.vf_vgpu(&vf).unwrap().unwrap().current, 558);
    }
}

//! The NVML backend: reads the driver, the GPUs and the devices a workload is given straight
//! from `libnvidia-ml.so.1`, without parsing `nvidia-smi` text.
//!
//! NVML is loaded at run time (nvml-wrapper `dlopen`s it), so this module builds and its tests
//! run on a machine without a GPU: the tests load a fake library instead. When the library
//! cannot be loaded or initialised the caller gets [`Error::NvmlUnavailable`], which is the
//! signal for `--backend auto` to fall back to `nvidia-smi`.
//!
//! What it records follows the manifest contract:
//! - a MIG-enabled GPU contributes its slices as devices, never itself; MIG devices are found by
//!   walking `nvmlDeviceGetMigDeviceHandleByIndex` over `0..nvmlDeviceGetMaxMigDeviceCount`
//!   (the count is the maximum, empty positions are skipped);
//! - a slice's profile is the text nvidia-smi prints, taken from the MIG device's name after its
//!   parent's name (`NVIDIA H100 80GB HBM3 MIG 1g.10gb+me` → `1g.10gb+me`), never rebuilt from
//!   its memory size; when the name cannot be read the profile is left unknown with a warning;
//! - a fact that cannot be read is left absent and explained in `warnings`; only a failing GPU
//!   count or GPU handle fails the whole read. When one GPU's slices cannot be read the device
//!   list is absent (unknown), never a partial list.

use std::ffi::c_uint;
use std::path::Path;

use miggate_compat::escape::escape;
use miggate_compat::{Device, DeviceUuid, Gpu, GpuUuid, MigMode, MigProfile, VersionText};
use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::PciInfo;

use crate::error::Error;
use crate::facts::NvidiaFacts;
use crate::warning::{NvmlSubject, Warning};

/// The library loaded when no path is given: the name the NVIDIA driver installs, found by the
/// dynamic loader's search path (the NVIDIA container toolkit mounts it into containers).
pub(crate) const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";

const MIB: u64 = 1024 * 1024;
/// `NVML_DEVICE_MIG_ENABLE`: the value `nvmlDeviceGetMigMode` reports for "on".
const MIG_ENABLE: u32 = 1;

/// Reads the driver, GPUs and devices from NVML loaded from `lib_path` (default
/// `libnvidia-ml.so.1`, found by the dynamic loader's search path).
///
/// # Errors
/// - [`Error::NvmlUnavailable`] when the library cannot be loaded or `nvmlInit_v2` fails (no
///   driver, no GPU access): the caller may fall back to nvidia-smi.
/// - [`Error::Nvml`] when the GPU count or a GPU handle cannot be read: without them there is
///   no inventory at all.
/// - [`Error::InvalidUuid`] when NVML gives a UUID outside the forms nvidia-smi prints (a NUL,
///   a U+FFFD, a separator): it is never recorded, and a driver that gives one cannot be
///   trusted for the rest.
///
/// Every other failure only leaves its fact absent, with a warning.
pub fn read(lib_path: Option<&Path>) -> Result<NvidiaFacts, Error> {
    let nvml = open(lib_path)?;
    let mut warnings = Vec::new();

    let driver_version = fact(
        nvml.sys_driver_version(),
        "nvmlSystemGetDriverVersion",
        "the driver version",
        &NvmlSubject::Library,
        &mut warnings,
    )
    .map(VersionText::new);
    let cuda_driver_version = fact(
        nvml.sys_cuda_driver_version(),
        "nvmlSystemGetCudaDriverVersion_v2",
        "the CUDA driver version",
        &NvmlSubject::Library,
        &mut warnings,
    )
    .map(cuda_version_text);

    let count = nvml.device_count().map_err(|e| Error::Nvml {
        call: "nvmlDeviceGetCount_v2",
        message: describe(&e),
    })?;

    let mut gpus = Vec::new();
    let mut devices = Some(Vec::new());
    for index in 0..count {
        let handle = nvml.device_by_index(index).map_err(|e| Error::Nvml {
            call: "nvmlDeviceGetHandleByIndex_v2",
            message: format!("GPU {index}: {}", describe(&e)),
        })?;
        let (gpu, gpu_devices) = read_gpu(&nvml, index, &handle, &mut warnings)?;
        gpus.push(gpu);
        match (devices.as_mut(), gpu_devices) {
            (Some(all), Some(mine)) => all.extend(mine),
            _ => devices = None,
        }
    }

    Ok(NvidiaFacts {
        driver_version,
        cuda_driver_version,
        gpus,
        devices,
        warnings,
    })
}

fn open(lib_path: Option<&Path>) -> Result<Nvml, Error> {
    let shown = lib_path.map_or_else(
        || DEFAULT_LIBRARY.to_string(),
        |p| escape(&p.display().to_string()).into_owned(),
    );
    let result = match lib_path {
        Some(path) => Nvml::builder().lib_path(path.as_os_str()).init(),
        None => Nvml::init(),
    };
    result.map_err(|e| Error::NvmlUnavailable {
        message: format!("cannot load or initialise {shown}: {}", describe(&e)),
    })
}

/// A UUID NVML gave, read as one of the forms nvidia-smi prints; anything else is an
/// [`Error::InvalidUuid`] naming the device (its message quotes the text escaped).
fn checked_uuid<U: std::str::FromStr<Err = miggate_compat::Error>>(
    uuid: Option<String>,
    at: &NvmlSubject,
) -> Result<Option<U>, Error> {
    uuid.map(|u| u.parse::<U>())
        .transpose()
        .map_err(|error| Error::InvalidUuid {
            at: format!("NVML nvmlDeviceGetUUID, {at}"),
            error,
        })
}

/// One physical GPU, and the devices it offers (`None` when they cannot be told).
fn read_gpu(
    nvml: &Nvml,
    index: u32,
    handle: &nvml_wrapper::Device<'_>,
    warnings: &mut Vec<Warning>,
) -> Result<(Gpu, Option<Vec<Device>>), Error> {
    let at = NvmlSubject::Gpu { index, uuid: None };
    let uuid = checked_uuid::<GpuUuid>(
        fact(handle.uuid(), "nvmlDeviceGetUUID", "the UUID", &at, warnings),
        &at,
    )?;
    let at = NvmlSubject::Gpu {
        index,
        uuid: uuid.clone(),
    };
    let product_name = fact(
        handle.name(),
        "nvmlDeviceGetName",
        "the product name",
        &at,
        warnings,
    );
    let pci_bus_id = fact(
        handle.pci_info(),
        "nvmlDeviceGetPciInfo_v3",
        "the PCI bus id",
        &at,
        warnings,
    )
    .map(|p| pci_bus_id(&p));
    let memory_mib = fact(
        handle.memory_info(),
        "nvmlDeviceGetMemoryInfo_v2",
        "the memory size",
        &at,
        warnings,
    )
    .map(|m| m.total / MIB);
    let compute_capability = fact(
        handle.cuda_compute_capability(),
        "nvmlDeviceGetCudaComputeCapability",
        "the compute capability",
        &at,
        warnings,
    )
    .map(|c| VersionText::new(format!("{}.{}", c.major, c.minor)));

    let mig_mode = read_mig_mode(handle, &at, warnings);
    let gpu = Gpu {
        unknown: Default::default(),
        index: Some(index),
        uuid: uuid.clone(),
        product_name: product_name.clone(),
        pci_bus_id,
        memory_mib,
        compute_capability,
        mig_mode: mig_mode.ok().flatten(),
    };
    let devices = match mig_mode {
        Ok(Some(mode)) if mode.is_active() => {
            let parent = Parent {
                index,
                at: &at,
                uuid: uuid.as_ref(),
                name: product_name.as_deref(),
            };
            read_slices(nvml, &parent, handle, warnings)?
        }
        Ok(_) => Some(vec![Device {
            uuid: uuid.as_ref().and_then(|u| u.as_str().parse().ok()),
            product_name,
            memory_mib,
            ..Device::default()
        }]),
        Err(()) => None,
    };
    Ok((gpu, devices))
}

/// The GPU's MIG mode: `Ok(None)` when it is not MIG-capable (a whole GPU, and "MIG mode"
/// is not a fact it has); `Err(())`, with a warning, when the mode could not be read, so
/// neither can the devices this GPU offers.
fn read_mig_mode(
    handle: &nvml_wrapper::Device<'_>,
    at: &NvmlSubject,
    warnings: &mut Vec<Warning>,
) -> Result<Option<MigMode>, ()> {
    match handle.mig_mode() {
        Ok(m) => Ok(Some(MigMode::from_current_pending(
            m.current == MIG_ENABLE,
            Some(m.pending == MIG_ENABLE),
        ))),
        Err(NvmlError::NotSupported) => Ok(None),
        Err(e) => {
            warnings.push(Warning::NvmlMigModeUnreadable {
                at: at.clone(),
                why: describe(&e),
            });
            Err(())
        }
    }
}

/// What a slice inherits from, or is described by, its parent GPU.
struct Parent<'a> {
    index: u32,
    at: &'a NvmlSubject,
    uuid: Option<&'a GpuUuid>,
    name: Option<&'a str>,
}

/// The MIG devices of a MIG-enabled GPU, in MIG device index order; `None` when the walk fails.
fn read_slices(
    nvml: &Nvml,
    parent: &Parent<'_>,
    handle: &nvml_wrapper::Device<'_>,
    warnings: &mut Vec<Warning>,
) -> Result<Option<Vec<Device>>, Error> {
    // The maximum number of MIG devices, not how many exist: positions may be empty.
    let max = match handle.mig_device_count() {
        Ok(n) => n,
        Err(e) => {
            warnings.push(Warning::NvmlMigCountUnreadable {
                at: parent.at.clone(),
                why: describe(&e),
            });
            return Ok(None);
        }
    };
    let mut slices = Vec::new();
    for position in 0..max {
        let mig = match handle.mig_device_by_index(position) {
            Ok(mig) => mig,
            // No MIG device at this position.
            Err(NvmlError::NotFound | NvmlError::InvalidArg) => continue,
            // A slice this process may not use (another container's): not a device it is given.
            Err(NvmlError::NoPermission) => {
                warnings.push(Warning::NvmlMigDeviceDenied {
                    at: parent.at.clone(),
                    position,
                });
                continue;
            }
            Err(e) => {
                warnings.push(Warning::NvmlMigDeviceUnreadable {
                    at: parent.at.clone(),
                    position,
                    why: describe(&e),
                });
                return Ok(None);
            }
        };
        slices.push(read_slice(nvml, parent, position, &mig, warnings)?);
    }
    Ok(Some(slices))
}

fn read_slice(
    nvml: &Nvml,
    parent: &Parent<'_>,
    position: u32,
    mig: &nvml_wrapper::Device<'_>,
    warnings: &mut Vec<Warning>,
) -> Result<Device, Error> {
    let at = NvmlSubject::MigDevice {
        gpu: parent.index,
        position,
        uuid: None,
    };
    let uuid = checked_uuid::<DeviceUuid>(
        fact(mig.uuid(), "nvmlDeviceGetUUID", "the UUID", &at, warnings),
        &at,
    )?;
    let at = NvmlSubject::MigDevice {
        gpu: parent.index,
        position,
        uuid: uuid.clone(),
    };
    let mig_profile = match mig.name() {
        Ok(name) => {
            let text = profile_text(&name, parent.name);
            match text.parse::<MigProfile>() {
                Ok(profile) => Some(profile),
                Err(e) => {
                    let (profile, why) = match e {
                        miggate_compat::Error::InvalidProfile { profile, why } => (profile, why),
                        // The profile reader has no other error today; were it to have one,
                        // the text is quoted with the error's words.
                        other => (text.to_string(), other.to_string()),
                    };
                    warnings.push(Warning::NvmlProfileNotInName {
                        at: at.clone(),
                        name: name.clone(),
                        profile,
                        why,
                    });
                    None
                }
            }
        }
        Err(e) => {
            warnings.push(Warning::NvmlNameUnreadable {
                at: at.clone(),
                why: describe(&e),
            });
            None
        }
    };
    let gpu_instance_id = fact(
        instance_id(nvml, mig, InstanceKind::Gpu),
        "nvmlDeviceGetGpuInstanceId",
        "the GPU instance id",
        &at,
        warnings,
    );
    let compute_instance_id = fact(
        instance_id(nvml, mig, InstanceKind::Compute),
        "nvmlDeviceGetComputeInstanceId",
        "the compute instance id",
        &at,
        warnings,
    );
    let memory_mib = fact(
        mig.memory_info(),
        "nvmlDeviceGetMemoryInfo_v2",
        "the memory size",
        &at,
        warnings,
    )
    .map(|m| m.total / MIB);
    Ok(Device {
        unknown: Default::default(),
        uuid,
        parent_uuid: parent.uuid.cloned(),
        product_name: parent.name.map(String::from),
        mig_profile,
        gpu_instance_id,
        compute_instance_id,
        memory_mib,
    })
}

#[derive(Clone, Copy)]
enum InstanceKind {
    Gpu,
    Compute,
}

/// `nvmlDeviceGetGpuInstanceId` / `nvmlDeviceGetComputeInstanceId` on a MIG device handle.
/// nvml-wrapper 0.13 does not wrap them, so they are called through its raw bindings; the
/// symbol is looked up from the field (never `NvmlLib`'s method, which panics when missing).
#[allow(unsafe_code)]
fn instance_id(nvml: &Nvml, mig: &nvml_wrapper::Device<'_>, kind: InstanceKind) -> Result<u32, NvmlError> {
    let lib = nvml.lib();
    let symbol = match kind {
        InstanceKind::Gpu => lib.nvmlDeviceGetGpuInstanceId.as_ref(),
        InstanceKind::Compute => lib.nvmlDeviceGetComputeInstanceId.as_ref(),
    }
    .map_err(|e| NvmlError::FailedToLoadSymbol(e.to_string()))?;
    let mut id: c_uint = 0;
    // SAFETY: both functions have the C signature `nvmlReturn_t (nvmlDevice_t, unsigned int *)`
    // (nvml.h; bindings.rs declares them so). The handle comes from a live `Device` borrowed from
    // `nvml`, so the library it belongs to is initialised and loaded for this call, and `id` is
    // a valid, writable `unsigned int` for its duration. NVML reads nothing else.
    let code = unsafe { symbol(mig.handle(), &mut id) };
    if code == 0 {
        Ok(id)
    } else {
        Err(NvmlError::from(code))
    }
}

/// Keeps a fact or, on failure, records why it is absent. A function the library does not
/// export fails the same way on every device, so that is said once, not once per device.
fn fact<T>(
    result: Result<T, NvmlError>,
    call: &'static str,
    what: &'static str,
    at: &NvmlSubject,
    warnings: &mut Vec<Warning>,
) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(NvmlError::FailedToLoadSymbol(_)) => {
            let said = warnings.iter().any(|said| {
                matches!(said, Warning::NvmlNotExported { what: w, call: c } if *w == what && *c == call)
            });
            if !said {
                warnings.push(Warning::NvmlNotExported { what, call });
            }
            None
        }
        Err(e) => {
            warnings.push(Warning::NvmlUnreadable {
                at: at.clone(),
                what,
                call,
                why: describe(&e),
            });
            None
        }
    }
}

/// NVML's error as a sentence, escaped (a loader's message quotes a path). A missing symbol is
/// reported without the loader's text, which repeats the library path and says less than "not
/// exported" does.
fn describe(e: &NvmlError) -> String {
    match e {
        NvmlError::FailedToLoadSymbol(_) => {
            "this NVML library does not export it (driver too old?)".to_string()
        }
        // The loader's own words (`…: cannot open shared object file: No such file or
        // directory`), without nvml-wrapper's "a libloading error occurred" before them.
        NvmlError::LibloadingError(inner) => escape(&inner.to_string()).into_owned(),
        other => escape(&other.to_string()).into_owned(),
    }
}

/// `13000` → `13.0`, `12020` → `12.2`: the form nvidia-smi prints as "CUDA Version".
fn cuda_version_text(version: i32) -> VersionText {
    VersionText::new(format!(
        "{}.{}",
        nvml_wrapper::cuda_driver_version_major(version),
        nvml_wrapper::cuda_driver_version_minor(version)
    ))
}

/// The PCI bus id in nvidia-smi's form, `00000000:18:00.0`: an 8-digit domain and upper-case
/// hex. NVML's `busId` already has that form; a legacy 4-digit domain is widened, and an empty
/// or malformed one is rebuilt from the numeric fields.
fn pci_bus_id(info: &PciInfo) -> String {
    let text = info.bus_id.trim();
    let is_hex = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit());
    if let Some((domain, rest)) = text.split_once(':')
        && domain.len() <= 8
        && is_hex(domain)
        && let Some((bus, rest)) = rest.split_once(':')
        && is_hex(bus)
        && let Some((device, function)) = rest.split_once('.')
        && is_hex(device)
        && is_hex(function)
    {
        return format!("{domain:0>8}:{bus}:{device}.{function}").to_ascii_uppercase();
    }
    format!("{:08X}:{:02X}:{:02X}.0", info.domain, info.bus, info.device)
}

/// The profile part of a MIG device's name. NVML names a MIG device after its parent with the
/// profile appended (`NVIDIA H100 80GB HBM3 MIG 1g.10gb`); this takes what follows the parent's
/// name, or the last ` MIG `, drops a leading `MIG `, and otherwise falls back to the last word.
/// The result is only a candidate: [`MigProfile`]'s parser decides whether it is a profile.
fn profile_text<'a>(mig_name: &'a str, parent_name: Option<&str>) -> &'a str {
    let name = mig_name.trim();
    let after_parent = parent_name
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .and_then(|p| name.strip_prefix(p))
        .filter(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace));
    let rest = if let Some(rest) = after_parent {
        rest.trim()
    } else if let Some((_, rest)) = name.rsplit_once(" MIG ") {
        rest.trim()
    } else if let Some(rest) = name.strip_prefix("MIG ") {
        rest.trim()
    } else {
        // Neither the parent's name nor a `MIG` marker: the profile, if any, is the last word.
        return name.rsplit(char::is_whitespace).next().unwrap_or(name);
    };
    rest.strip_prefix("MIG ").map_or(rest, str::trim)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    use miggate_compat::H100_NAME as H100;

    #[test]
    fn profile_follows_the_parent_name() {
        assert_eq!(
            profile_text("NVIDIA H100 80GB HBM3 MIG 1g.10gb", Some(H100)),
            "1g.10gb"
        );
        assert_eq!(
            profile_text("NVIDIA H100 80GB HBM3 MIG 1g.10gb+me", Some(H100)),
            "1g.10gb+me"
        );
        assert_eq!(
            profile_text("NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb", Some(H100)),
            "1c.3g.40gb"
        );
        assert_eq!(
            profile_text("NVIDIA H100 80GB HBM3 1g.10gb", Some(H100)),
            "1g.10gb"
        );
        assert_eq!(
            profile_text("  NVIDIA H100 80GB HBM3 MIG   2g.20gb ", Some(H100)),
            "2g.20gb"
        );
    }

    #[test]
    fn profile_without_the_parent_name() {
        assert_eq!(profile_text("MIG 1g.10gb", Some(H100)), "1g.10gb");
        assert_eq!(profile_text("1g.10gb", Some(H100)), "1g.10gb");
        assert_eq!(profile_text("NVIDIA H100 80GB HBM3 MIG 3g.40gb", None), "3g.40gb");
        assert_eq!(profile_text("MIG 1g.24gb+me.all", None), "1g.24gb+me.all");
        assert_eq!(profile_text("NVIDIA H100 80GB HBM3 1g.10gb", None), "1g.10gb");
        // A longer parent name is not a prefix of a different card's name.
        assert_eq!(
            profile_text("NVIDIA H100 MIG 1g.10gb", Some("NVIDIA H100 80GB HBM3")),
            "1g.10gb"
        );
        assert_eq!(
            profile_text("NVIDIA H100NVL 1g.10gb", Some("NVIDIA H100")),
            "1g.10gb"
        );
    }

    #[test]
    fn a_name_without_profile_does_not_parse() {
        for (name, parent) in [
            ("NVIDIA H100 80GB HBM3", Some(H100)),
            ("NVIDIA H100 80GB HBM3", None),
            ("NVIDIA H100 80GB HBM3 MIG mystery", Some(H100)),
            ("NVIDIA GH200 480GB", None),
            ("", None),
        ] {
            let text = profile_text(name, parent);
            assert!(text.parse::<MigProfile>().is_err(), "{name:?} gave {text:?}");
        }
    }

    #[test]
    fn cuda_versions_read_like_nvidia_smi() {
        assert_eq!(cuda_version_text(13000).as_str(), "13.0");
        assert_eq!(cuda_version_text(12020).as_str(), "12.2");
        assert_eq!(cuda_version_text(11080).as_str(), "11.8");
    }

    fn pci(bus_id: &str) -> PciInfo {
        PciInfo {
            bus: 0x18,
            bus_id: bus_id.to_string(),
            device: 0,
            domain: 0,
            pci_device_id: 0x2330_10de,
            pci_sub_system_id: None,
        }
    }

    #[test]
    fn pci_bus_ids_take_nvidia_smi_form() {
        assert_eq!(pci_bus_id(&pci("00000000:18:00.0")), "00000000:18:00.0");
        assert_eq!(pci_bus_id(&pci("0000:9a:00.0")), "00000000:9A:00.0");
        assert_eq!(pci_bus_id(&pci("")), "00000000:18:00.0");
        assert_eq!(pci_bus_id(&pci("garbage")), "00000000:18:00.0");
    }
}

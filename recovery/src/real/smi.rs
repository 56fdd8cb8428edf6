//! GPU control through nvidia-smi. MIG listings are read with `miggate-smi`'s parsers (`mig -lgi`,
//! `-lci`, `-lgipp`) and failures told by its one classifier, so recovery and capture agree on
//! every layout and failure message nvidia-smi prints.

use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Duration;

use miggate_smi::Failure;
use miggate_smi::mig_table::{
    MigTable, parse_compute_instances, parse_gpu_instance_profiles, parse_gpu_instances, parse_placements,
};
use regex::Regex;

use super::command::{exec, exec_ok, failed};
use crate::bdf::Bdf;
use crate::error::{Error, ResetFailure, Result};
use crate::layout::{ComputeInstanceLayout, GpuInstanceLayout, MigSetting, Placement};
use crate::seams::{GpuControl, GpuInfo, MigModeState};

/// nvidia-smi at a path.
#[derive(Debug, Clone)]
pub struct NvidiaSmi {
    path: PathBuf,
    timeout: Duration,
    reset_timeout: Duration,
}

impl NvidiaSmi {
    /// nvidia-smi at `path`; each command may take `timeout`, a reset `reset_timeout`.
    pub fn new(path: PathBuf, timeout: Duration, reset_timeout: Duration) -> NvidiaSmi {
        NvidiaSmi {
            path,
            timeout,
            reset_timeout,
        }
    }

    fn ok(&self, args: &[&str]) -> Result<String> {
        Ok(exec_ok(&self.path, args, self.timeout)?.stdout)
    }

    /// Runs a MIG listing: its text whatever the exit status (`No … found` exits non-zero),
    /// for the parser to read or refuse.
    fn listing(&self, args: &[&str]) -> Result<(String, String)> {
        let out = exec(&self.path, args, self.timeout)?;
        Ok((out.command.clone(), out.combined()))
    }
}

fn table<T>(command: String, parsed: std::result::Result<MigTable<T>, miggate_smi::Error>) -> Result<Vec<T>> {
    parsed
        .map(|t| t.rows)
        .map_err(|source| Error::Listing { command, source })
}

fn mode(text: &str) -> Option<MigSetting> {
    match text.trim() {
        "Enabled" => Some(MigSetting::Enabled),
        "Disabled" => Some(MigSetting::Disabled),
        _ => None,
    }
}

static GI_CREATED: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"created GPU instance ID\s+(\d+)").ok());

impl GpuControl for NvidiaSmi {
    fn gpus(&self) -> Result<Vec<GpuInfo>> {
        let args = [
            "--query-gpu=pci.bus_id,uuid,mig.mode.current,mig.mode.pending",
            "--format=csv,noheader",
        ];
        let text = self.ok(&args)?;
        let mut gpus = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let [bus, uuid, current, pending] = fields[..] else {
                return Err(Error::Output {
                    command: format!("nvidia-smi {}", args.join(" ")),
                    message: format!("expected 4 fields in {line:?}"),
                });
            };
            let mig = match (mode(current), mode(pending)) {
                (Some(current), Some(pending)) => Some(MigModeState { current, pending }),
                _ => None,
            };
            gpus.push(GpuInfo {
                bus: Bdf::parse(bus)?,
                uuid: uuid.to_string(),
                mig,
            });
        }
        Ok(gpus)
    }

    fn set_mig_mode(&self, gpu: &Bdf, mode: MigSetting) -> Result<()> {
        let flag = if mode == MigSetting::Enabled { "1" } else { "0" };
        self.ok(&["-i", gpu.as_str(), "-mig", flag]).map(drop)
    }

    fn reset(&self, gpus: &[Bdf]) -> Result<()> {
        let list = gpus.iter().map(Bdf::as_str).collect::<Vec<_>>().join(",");
        let out = exec(&self.path, &["-r", "-i", &list], self.reset_timeout)?;
        if out.status.success() {
            return Ok(());
        }
        let text = out.combined();
        let kind = match Failure::of(&text) {
            Some(Failure::NotSupported) => ResetFailure::NotSupported,
            Some(Failure::InUseByAnotherClient) => ResetFailure::InUse,
            _ => ResetFailure::Other,
        };
        Err(Error::Reset {
            gpus: gpus.to_vec(),
            kind,
            output: text,
        })
    }

    fn set_persistence(&self, gpu: &Bdf, on: bool) -> Result<()> {
        self.ok(&["-i", gpu.as_str(), "-pm", if on { "1" } else { "0" }])
            .map(drop)
    }

    fn instances(&self, gpu: &Bdf) -> Result<Vec<GpuInstanceLayout>> {
        let (cmd, text) = self.listing(&["mig", "-lgi", "-i", gpu.as_str()])?;
        let gis = table(cmd, parse_gpu_instances(&text))?;
        let (cmd, text) = self.listing(&["mig", "-lci", "-i", gpu.as_str()])?;
        let cis = table(cmd.clone(), parse_compute_instances(&text))?;
        let mut out = Vec::with_capacity(gis.len());
        for gi in gis {
            let placement = gi.placement.ok_or_else(|| Error::Output {
                command: cmd.replace("-lci", "-lgi"),
                message: format!("GPU instance {} has no placement column", gi.instance_id),
            })?;
            out.push(GpuInstanceLayout {
                placement,
                profile_id: gi.profile_id,
                profile: Some(gi.name.clone()),
                compute_instances: cis
                    .iter()
                    .filter(|ci| ci.gpu_instance_id == gi.instance_id)
                    .map(|ci| ComputeInstanceLayout {
                        profile_id: ci.profile_id,
                        profile: Some(ci.name.clone()),
                    })
                    .collect(),
            });
        }
        Ok(out)
    }

    fn gpu_instance_profiles(&self, gpu: &Bdf) -> Result<Vec<(u32, String)>> {
        let (cmd, text) = self.listing(&["mig", "-lgip", "-i", gpu.as_str()])?;
        Ok(table(cmd, parse_gpu_instance_profiles(&text))?
            .into_iter()
            .map(|p| (p.id, p.name))
            .collect())
    }

    fn offered_placements(&self, gpu: &Bdf) -> Result<Vec<(u32, Vec<Placement>)>> {
        let (cmd, text) = self.listing(&["mig", "-lgipp", "-i", gpu.as_str()])?;
        Ok(table(cmd, parse_placements(&text))?
            .into_iter()
            .map(|p| (p.profile_id, p.placements))
            .collect())
    }

    fn create_gpu_instance(&self, gpu: &Bdf, profile_id: u32, placement: Placement) -> Result<u32> {
        let spec = format!("{profile_id}:{}", placement.start);
        let out = exec_ok(
            &self.path,
            &["mig", "-i", gpu.as_str(), "-cgi", &spec],
            self.timeout,
        )?;
        GI_CREATED
            .as_ref()
            .and_then(|re| re.captures(&out.stdout))
            .and_then(|c| c.get(1)?.as_str().parse().ok())
            .ok_or_else(|| Error::Output {
                command: out.command.clone(),
                message: format!("no \"created GPU instance ID\" in {:?}", out.stdout.trim()),
            })
    }

    fn create_compute_instance(&self, gpu: &Bdf, gpu_instance: u32, profile_id: u32) -> Result<()> {
        let gi = gpu_instance.to_string();
        let ci = profile_id.to_string();
        self.ok(&["mig", "-i", gpu.as_str(), "-gi", &gi, "-cci", &ci])
            .map(drop)
    }

    fn destroy_instances(&self, gpu: &Bdf) -> Result<()> {
        for flag in ["-dci", "-dgi"] {
            let out = exec(&self.path, &["mig", "-i", gpu.as_str(), flag], self.timeout)?;
            // `… : Not Found`: no instances of that kind, so nothing to destroy.
            if !out.status.success() && Failure::of(&out.combined()) != Some(Failure::NotFound) {
                return Err(failed(&out));
            }
        }
        Ok(())
    }
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    use super::*;

    /// An nvidia-smi that prints a recorded output and exits with `code`.
    fn replaying(dir: &Path, recorded: &str, code: i32) -> NvidiaSmi {
        let file = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../testdata/nvidia-smi")
            .join(recorded);
        let script = dir.join("nvidia-smi");
        std::fs::write(
            &script,
            format!("#!/bin/sh\ncat '{}'\nexit {code}\n", file.display()),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        NvidiaSmi::new(script, Duration::from_secs(30), Duration::from_secs(30))
    }

    /// An nvidia-smi that prints `text` and exits with `code`.
    fn printing(dir: &Path, text: &str, code: i32) -> NvidiaSmi {
        let script = dir.join("nvidia-smi");
        std::fs::write(
            &script,
            format!("#!/bin/sh\nprintf '%s\\n' '{text}'\nexit {code}\n"),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        NvidiaSmi::new(script, Duration::from_secs(30), Duration::from_secs(30))
    }

    /// Recovery asks the one classifier capture asks, which reads lower-cased text: a holder
    /// of the GPU is told however a release capitalises the message.
    #[test]
    fn a_reset_in_use_is_told_whatever_the_capitalisation() {
        let dir = tempfile::tempdir().unwrap();
        let smi = printing(
            dir.path(),
            "Unable to reset GPU 00000000:01:00.0: in use by another client",
            255,
        );
        let err = smi.reset(&[Bdf::parse("0000:01:00.0").unwrap()]).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Reset {
                    kind: ResetFailure::InUse,
                    ..
                }
            ),
            "{err}"
        );
    }

    /// `Not Found` destroying instances that are not there is nothing to destroy; any other
    /// failure is one.
    #[rstest::rstest]
    #[case(
        "Unable to destroy compute instance ID  0 from GPU  0 GPU instance ID  1: Not Found",
        true
    )]
    #[case(
        "Unable to destroy GPU instance ID  1 from GPU  0: In use by another client",
        false
    )]
    fn destroying_no_instances_is_not_a_failure(#[case] text: &str, #[case] ok: bool) {
        let dir = tempfile::tempdir().unwrap();
        let smi = printing(dir.path(), text, 6);
        let result = smi.destroy_instances(&Bdf::parse("0000:01:00.0").unwrap());
        assert_eq!(result.is_ok(), ok, "{result:?}");
    }

    #[rstest::rstest]
    #[case(
        "errors/gpu-reset-not-supported-vm-nvidia-mig-guide.txt",
        ResetFailure::NotSupported
    )]
    #[case(
        "errors/gpu-reset-could-not-be-reset-4gpu-in-use-mig-parted-181.txt",
        ResetFailure::InUse
    )]
    #[case(
        "errors/gpu-reset-in-use-by-another-process-a100-gpu-operator-118.txt",
        ResetFailure::InUse
    )]
    #[case("errors/nvidia-smi-failed-communicate-driver.txt", ResetFailure::Other)]
    fn recorded_reset_failures_are_classified(#[case] recorded: &str, #[case] want: ResetFailure) {
        let dir = tempfile::tempdir().unwrap();
        let smi = replaying(dir.path(), recorded, 255);
        let err = smi.reset(&[Bdf::parse("0000:01:00.0").unwrap()]).unwrap_err();
        assert!(matches!(err, Error::Reset { kind, .. } if kind == want), "{err}");
    }

    #[test]
    fn recorded_instance_listings_read_through_capture_parsers() {
        let dir = tempfile::tempdir().unwrap();
        let gpu = Bdf::parse("0000:01:00.0").unwrap();
        let gis = replaying(dir.path(), "mig-lgi/h100-nvl-4gi-opennebula.txt", 0).instances(&gpu);
        // -lci is the same script: the -lgi table is no -lci table, so it is refused, not misread.
        assert!(gis.is_err());
        let placements = replaying(dir.path(), "mig-lgipp/h100-pcie-80gb-r525-scaleway.txt", 0)
            .offered_placements(&gpu)
            .unwrap();
        assert_eq!(
            placements[0],
            (19, (0..7).map(|s| Placement { start: s, size: 1 }).collect())
        );
        let profiles = replaying(dir.path(), "mig-lgip/h100-pcie-80gb-r525-scaleway.txt", 0)
            .gpu_instance_profiles(&gpu)
            .unwrap();
        assert_eq!(profiles[0], (19, "1g.10gb".to_string()));
        let none = replaying(dir.path(), "mig-lgi/a30-none-not-found.txt", 6);
        assert!(none.listing(&["mig", "-lgi"]).is_ok());
    }
}

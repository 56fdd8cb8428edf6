//! The nvidia-smi backend: runs the commands, parses them, joins them.
//!
//! Only `-L` and `--query-gpu` are needed. Everything else (`--version` for the CUDA version,
//! `mig -lci` for instance ids) is optional: a failure there, such as "Insufficient
//! Permissions" in an unprivileged container, costs only the facts it would add, with a warning.

use std::path::Path;
use std::thread;
use std::time::Duration;

use miggate_compat::{Device, Nvidia, VersionText};

use crate::Error;
use crate::assemble::assemble;
use crate::parse::mig_table::{ComputeInstance, parse_compute_instances};
use crate::parse::{failure, list, query};
use crate::run::{Output, run};

/// What the nvidia-smi backend read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SmiFacts {
    /// The manifest's `nvidia` section.
    pub nvidia: Nvidia,
    /// What could not be read cleanly.
    pub warnings: Vec<String>,
}

/// Runs nvidia-smi at `program` and reads the facts. A failed GPU query fails the capture with
/// its typed error; a failed `-L` leaves the slices of MIG-enabled GPUs unknown.
pub fn read(program: &Path, timeout: Duration) -> Result<SmiFacts, Error> {
    let (listed, queried, version) = thread::scope(|s| {
        let listed = s.spawn(|| run(program, &["-L"], timeout));
        let version = s.spawn(|| run(program, &["--version"], timeout));
        let queried = query_gpus(program, timeout);
        (join(listed), queried, join(version))
    });
    let table = queried?;
    let mut warnings = Vec::new();
    let listing = match listed {
        Ok(out) if out.status.success() => match list::parse(&out.stdout) {
            Ok(listing) => Some(listing),
            Err(e) => {
                warnings.push(format!("{}: {e}", list::COMMAND));
                None
            }
        },
        Ok(out) => {
            warnings.push(format!("{} failed: {}", list::COMMAND, failure_text(&out)));
            None
        }
        Err(e) => {
            warnings.push(format!("{}: {e}", list::COMMAND));
            None
        }
    };
    let facts = assemble(listing.as_ref(), &table);
    let mig_on = facts
        .gpus
        .iter()
        .any(|g| g.mig_mode.is_some_and(|m| m.is_active()));
    let (mut nvidia, assembled_warnings) = facts.into_nvidia();
    warnings.extend(assembled_warnings);
    match version {
        Ok(out) if out.status.success() => nvidia.cuda_driver_version = cuda_version(&out.stdout),
        Ok(out) => warnings.push(format!("nvidia-smi --version failed: {}", failure_text(&out))),
        Err(e) => warnings.push(format!("nvidia-smi --version: {e}")),
    }
    if mig_on && let (Some(gpus), Some(devices)) = (nvidia.gpus.as_deref(), nvidia.devices.as_mut()) {
        add_instance_ids(program, timeout, gpus, devices, &mut warnings);
    }
    Ok(SmiFacts { nvidia, warnings })
}

fn join(h: thread::ScopedJoinHandle<'_, Result<Output, Error>>) -> Result<Output, Error> {
    h.join().unwrap_or_else(|_| {
        Err(Error::Failed {
            command: "nvidia-smi".into(),
            status: "reader thread panicked".into(),
            output: String::new(),
        })
    })
}

fn failure_text(out: &Output) -> String {
    let text = out.combined();
    let text = text.trim();
    if text.is_empty() {
        format!("exit {}", out.status)
    } else {
        text.to_string()
    }
}

/// Runs `--query-gpu`, asking again without a field an old driver does not know.
fn query_gpus(program: &Path, timeout: Duration) -> Result<query::QueryTable, Error> {
    let mut fields: Vec<&str> = query::FIELDS.to_vec();
    loop {
        let arg = format!("--query-gpu={}", fields.join(","));
        let out = run(program, &[&arg, "--format=csv,noheader,nounits"], timeout)?;
        if let Some(field) = query::rejected_field(&out.combined()) {
            let before = fields.len();
            fields.retain(|f| !f.eq_ignore_ascii_case(&field));
            if fields.len() < before && fields.contains(&"uuid") {
                continue;
            }
        }
        if !out.status.success() {
            let text = out.combined();
            return Err(failure::classify(&text).unwrap_or(Error::Failed {
                command: out.command,
                status: out.status.to_string(),
                output: text,
            }));
        }
        // A rejected field was dealt with above (the parser finds it the same way), so what is
        // left to map is a failure text that only stderr carried.
        return query::parse(&out.stdout, &fields)
            .map_err(|e| failure::classify(&out.combined()).unwrap_or(e));
    }
}

/// The CUDA version from `nvidia-smi --version` (`CUDA Version : 13.0`).
pub fn cuda_version(text: &str) -> Option<VersionText> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        let value = value.trim();
        (key.trim().eq_ignore_ascii_case("CUDA Version") && !value.is_empty())
            .then(|| VersionText::new(value))
    })
}

/// Fills in GPU and compute instance ids from `nvidia-smi mig -lci`. `-L` numbers a GPU's MIG
/// devices in ascending (GPU instance, compute instance) order, so the two lists line up when
/// they hold the same profiles; anything else is left alone with a warning.
fn add_instance_ids(
    program: &Path,
    timeout: Duration,
    gpus: &[miggate_compat::Gpu],
    devices: &mut [Device],
    warnings: &mut Vec<String>,
) {
    let table = match run(program, &["mig", "-lci"], timeout) {
        Ok(out) if out.status.success() => parse_compute_instances(&out.stdout),
        Ok(out) => {
            warnings.push(format!(
                "nvidia-smi mig -lci: instance ids not read: {}",
                failure_text(&out)
            ));
            return;
        }
        Err(e) => {
            warnings.push(format!("nvidia-smi mig -lci: instance ids not read: {e}"));
            return;
        }
    };
    let cis = match table {
        Ok(t) => t.rows,
        Err(e) => {
            warnings.push(format!("instance ids not read: {e}"));
            return;
        }
    };
    for gpu in gpus {
        let (Some(index), Some(uuid)) = (gpu.index, gpu.uuid.as_deref()) else {
            continue;
        };
        let mut mine: Vec<&ComputeInstance> = cis.iter().filter(|c| c.gpu == index).collect();
        mine.sort_by_key(|c| (c.gpu_instance_id, c.instance_id));
        let slots: Vec<&mut Device> = devices
            .iter_mut()
            .filter(|d| d.parent_uuid.as_deref() == Some(uuid) && d.gpu_instance_id.is_none())
            .collect();
        if slots.is_empty() {
            continue;
        }
        let aligned = slots.len() == mine.len()
            && slots.iter().zip(&mine).all(|(d, c)| {
                d.mig_profile
                    .as_ref()
                    .is_some_and(|p| Some(p) == c.profile.as_ref())
            });
        if !aligned {
            warnings.push(format!(
                "GPU {index}: `mig -lci` lists {} compute instances that do not line up with the {} MIG devices of `-L`; instance ids left unknown",
                mine.len(),
                slots.len()
            ));
            continue;
        }
        for (d, c) in slots.into_iter().zip(mine) {
            d.gpu_instance_id = Some(c.gpu_instance_id);
            d.compute_instance_id = Some(c.instance_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An old driver that does not know `compute_cap`: the query is asked again without it.
    #[test]
    fn a_rejected_query_field_is_dropped_and_the_query_asked_again() {
        let dir = tempfile::tempdir().unwrap();
        let smi = dir.path().join("nvidia-smi");
        let script = r#"#!/bin/sh
case "$*" in
  *compute_cap*) echo 'Field "compute_cap" is not a valid field to query.'; exit 2 ;;
  --query-gpu=*) echo '0, GPU-1, Tesla T4, 00000000:18:00.0, 15360, 470.57.02, [N/A], [N/A]' ;;
  -L) echo 'GPU 0: Tesla T4 (UUID: GPU-1)' ;;
  *) exit 2 ;;
esac
"#;
        std::fs::write(&smi, script).unwrap();
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(&smi)
            .status()
            .unwrap();
        let facts = read(&smi, Duration::from_secs(10)).unwrap();
        let gpus = facts.nvidia.gpus.unwrap();
        assert_eq!(gpus.len(), 1);
        assert_eq!(gpus[0].product_name.as_deref(), Some("Tesla T4"));
        assert_eq!(gpus[0].compute_capability, None);
        assert_eq!(facts.nvidia.devices.unwrap().len(), 1);
    }

    #[test]
    fn reads_the_cuda_version() {
        let text = "NVIDIA-SMI version  : 580.82.07\nNVML version        : 580.82\nDRIVER version      : 580.82.07\nCUDA Version        : 13.0\n";
        assert_eq!(cuda_version(text).map(|v| v.to_string()).as_deref(), Some("13.0"));
        assert_eq!(cuda_version("nvidia-smi: unrecognized option"), None);
    }
}

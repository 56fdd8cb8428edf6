//! The nvidia-smi backend: runs the commands, parses them, joins them.
//!
//! Only `-L` and `--query-gpu` are needed. Everything else (`--version` for the CUDA version,
//! `mig -lci` for instance ids) is optional: a failure there, such as "Insufficient
//! Permissions" in an unprivileged container, costs only the facts it would add, with a warning.
//!
//! Every command, retries of the query included, runs under the capture's one [`Deadline`].

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::thread;

use miggate_compat::{Device, Gpu, GpuUuid};

use miggate_smi::mig_table::{ComputeInstance, parse_compute_instances};
use miggate_smi::{Deadline, Output, cuda_version, failure, list, query, run};

use crate::assemble::assemble;
use crate::error::{Error, RunError};
use crate::facts::NvidiaFacts;
use crate::warning::{CommandFailure, Warning};

/// Runs nvidia-smi at `program` and reads the facts, all before `deadline`.
///
/// A failed GPU query fails the capture with its typed error. A failed `-L` leaves the slices
/// of MIG-enabled GPUs unknown, except where it printed what cannot be trusted at all: output
/// over the bound, or a UUID outside the forms nvidia-smi prints, fail the capture too.
pub(crate) fn read(program: &Path, deadline: &Deadline) -> Result<NvidiaFacts, Error> {
    let (listed, queried, version) = thread::scope(|s| {
        let listed = s.spawn(|| run(program, &["-L"], deadline));
        let version = s.spawn(|| run(program, &["--version"], deadline));
        let queried = query_gpus(program, deadline);
        (join(listed), queried, join(version))
    });
    let mut warnings = Vec::new();
    let table = queried?;
    warnings.extend(table.held_open);
    let listing = match listed {
        Ok(out) => {
            held_open(&out, &mut warnings);
            if out.status.success() {
                match list::parse(&out.stdout) {
                    Ok(listing) => Some(listing),
                    Err(e @ miggate_smi::Error::InvalidUuid { .. }) => return Err(e.into()),
                    Err(e) => {
                        warnings.push(Warning::ListingUnreadable(Arc::new(e)));
                        None
                    }
                }
            } else {
                warnings.push(Warning::ListingFailed(failure(out)));
                None
            }
        }
        Err(e @ RunError::OutputTooLarge { .. }) => return Err(e.into()),
        Err(e) => {
            warnings.push(Warning::ListingNotRun(Arc::new(e)));
            None
        }
    };
    let mut facts = assemble(listing.as_ref(), &table.table);
    warnings.append(&mut facts.warnings);
    facts.warnings = warnings;
    match version {
        Ok(out) => {
            held_open(&out, &mut facts.warnings);
            if out.status.success() {
                facts.cuda_driver_version = cuda_version(&out.stdout);
            } else {
                facts.warnings.push(Warning::VersionFailed(failure(out)));
            }
        }
        Err(e) => facts.warnings.push(Warning::VersionNotRun(Arc::new(e))),
    }
    let mig_on = facts
        .gpus
        .iter()
        .any(|g| g.mig_mode.is_some_and(|m| m.is_active()));
    if mig_on && let Some(devices) = facts.devices.as_mut() {
        add_instance_ids(program, deadline, &facts.gpus, devices, &mut facts.warnings);
    }
    Ok(facts)
}

fn join(h: thread::ScopedJoinHandle<'_, Result<Output, RunError>>) -> Result<Output, RunError> {
    h.join().unwrap_or_else(|_| {
        Err(RunError::Wait {
            command: "nvidia-smi".into(),
            error: std::io::Error::other("the thread running it panicked"),
        })
    })
}

/// What a failed command said, and how it exited, for a warning.
fn failure(out: Output) -> CommandFailure {
    CommandFailure {
        output: out.combined(),
        status: out.status,
    }
}

/// Warns that a stream was still held open after its command exited: a process the command
/// started left its process group and kept the pipe. What was read within the grace is used
/// (whole lines only), which is worth knowing when the listing looks short.
fn held_open(out: &Output, warnings: &mut Vec<Warning>) {
    for held in &out.held_open {
        warnings.push(Warning::HeldOpen {
            command: out.command.clone(),
            stream: held.stream,
            dropped: held.dropped,
        });
    }
}

/// The GPU query's table, and the warnings its run gave.
struct Queried {
    table: query::QueryTable,
    held_open: Vec<Warning>,
}

/// Runs `--query-gpu`, asking again without a field an old driver does not know. Every try
/// runs before the one deadline: retries never extend it.
fn query_gpus(program: &Path, deadline: &Deadline) -> Result<Queried, Error> {
    let mut fields: Vec<&str> = query::FIELDS.to_vec();
    loop {
        let arg = format!("--query-gpu={}", fields.join(","));
        let out = run(program, &[&arg, "--format=csv,noheader,nounits"], deadline)?;
        if let Some(field) = query::rejected_field(&out.combined()) {
            let before = fields.len();
            fields.retain(|f| !f.eq_ignore_ascii_case(&field));
            if fields.len() < before && fields.contains(&"uuid") {
                continue;
            }
        }
        if !out.status.success() {
            let text = out.combined();
            return Err(match failure::classify(&text) {
                Some(known) => known.into(),
                None => Error::Failed {
                    command: out.command,
                    status: out.status.to_string(),
                    output: text,
                },
            });
        }
        let mut held = Vec::new();
        held_open(&out, &mut held);
        // A rejected field was dealt with above (the parser finds it the same way), so what is
        // left to map is a failure text that only stderr carried.
        let table = query::parse(&out.stdout, &fields).map_err(|e| match e {
            miggate_smi::Error::InvalidUuid { .. } => e,
            e => failure::classify(&out.combined()).unwrap_or(e),
        })?;
        return Ok(Queried {
            table,
            held_open: held,
        });
    }
}

/// Fills in GPU and compute instance ids from `nvidia-smi mig -lci`. `-L` numbers a GPU's MIG
/// devices in ascending (GPU instance, compute instance) order, so the two lists line up when
/// they hold the same profiles; anything else is left alone with a warning.
///
/// Linear: compute instances are grouped by GPU index and devices by parent UUID once.
fn add_instance_ids(
    program: &Path,
    deadline: &Deadline,
    gpus: &[Gpu],
    devices: &mut [Device],
    warnings: &mut Vec<Warning>,
) {
    let table = match run(program, &["mig", "-lci"], deadline) {
        Ok(out) if out.status.success() => {
            held_open(&out, warnings);
            parse_compute_instances(&out.stdout)
        }
        Ok(out) => {
            warnings.push(Warning::InstanceIdsFailed(failure(out)));
            return;
        }
        Err(e) => {
            warnings.push(Warning::InstanceIdsNotRun(Arc::new(e)));
            return;
        }
    };
    let cis = match table {
        Ok(t) => t.rows,
        Err(e) => {
            warnings.push(Warning::InstanceIdsUnreadable(Arc::new(e)));
            return;
        }
    };
    let mut by_gpu: HashMap<u32, Vec<&ComputeInstance>> = HashMap::new();
    for c in &cis {
        by_gpu.entry(c.gpu).or_default().push(c);
    }
    // Positions of the slices still without instance ids, by parent.
    let mut by_parent: HashMap<GpuUuid, Vec<usize>> = HashMap::new();
    for (at, d) in devices.iter().enumerate() {
        if d.gpu_instance_id.is_none()
            && let Some(parent) = &d.parent_uuid
        {
            by_parent.entry(parent.clone()).or_default().push(at);
        }
    }
    for gpu in gpus {
        let (Some(index), Some(uuid)) = (gpu.index, gpu.uuid.as_ref()) else {
            continue;
        };
        // Taken out, so a GPU listed twice cannot fill the same slots again.
        let Some(slots) = by_parent.remove(uuid) else {
            continue;
        };
        let mut mine = by_gpu.remove(&index).unwrap_or_default();
        mine.sort_by_key(|c| (c.gpu_instance_id, c.instance_id));
        let aligned = slots.len() == mine.len()
            && slots.iter().zip(&mine).all(|(at, c)| {
                devices
                    .get(*at)
                    .and_then(|d| d.mig_profile.as_ref())
                    .is_some_and(|p| Some(p) == c.profile.as_ref())
            });
        if !aligned {
            warnings.push(Warning::InstancesMisaligned {
                index,
                instances: mine.len(),
                devices: slots.len(),
            });
            continue;
        }
        for (at, c) in slots.into_iter().zip(mine) {
            if let Some(d) = devices.get_mut(at) {
                d.gpu_instance_id = Some(c.gpu_instance_id);
                d.compute_instance_id = Some(c.instance_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::time::Duration;

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
        let facts = read(&smi, &Deadline::after(Duration::from_secs(10))).unwrap();
        let gpus = facts.gpus;
        assert_eq!(gpus.len(), 1);
        assert_eq!(gpus[0].product_name.as_deref(), Some("Tesla T4"));
        assert_eq!(gpus[0].compute_capability, None);
        assert_eq!(facts.devices.unwrap().len(), 1);
    }
}

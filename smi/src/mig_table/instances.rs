//! `nvidia-smi mig -lgi` and `-lci`: the GPU and compute instances that exist now.

use miggate_compat::MigProfile;
use serde::Serialize;

use super::row_error::RowError;
use super::table::{BoxRow, MigTable, Placement, build, need, profile};
use crate::error::Error;

/// The `-lgi` command, as named in errors and warnings.
pub const LGI: &str = "nvidia-smi mig -lgi";
/// The `-lci` command, as named in errors and warnings.
pub const LCI: &str = "nvidia-smi mig -lci";

/// A GPU instance (`-lgi` row): the unit boot recovery recreates, with its placement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuInstance {
    /// The GPU index.
    pub gpu: u32,
    /// The profile name as printed (`1g.10gb`).
    pub name: String,
    /// The name read as a profile; `None` when it is not of the form nvidia-smi prints.
    pub profile: Option<MigProfile>,
    /// The GPU instance profile id (`-lgip` ID, `19` for the smallest 1g).
    pub profile_id: u32,
    /// The GPU instance id.
    pub instance_id: u32,
    /// `Start:Size`; `None` in layouts without the column.
    pub placement: Option<Placement>,
}

/// A compute instance (`-lci` row).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComputeInstance {
    /// The GPU index.
    pub gpu: u32,
    /// The GPU instance it lives in.
    pub gpu_instance_id: u32,
    /// The profile name as printed (`1c.3g.20gb`, or the GI's name for a full-GI CI).
    pub name: String,
    /// The name read as a profile; `None` when it is not of the form nvidia-smi prints.
    pub profile: Option<MigProfile>,
    /// The compute instance profile id (`-lcip` ID).
    pub profile_id: u32,
    /// The compute instance id.
    pub instance_id: u32,
    /// `Start:Size` within the GPU instance; `None` in the older layout without it.
    pub placement: Option<Placement>,
}

/// Reads `nvidia-smi mig -lgi`. `No GPU instances found: Not Found` is an empty table.
pub fn parse_gpu_instances(text: &str) -> Result<MigTable<GpuInstance>, Error> {
    build(
        text,
        LGI,
        "`GPU  MIG <name>  <profile id>  <instance id>  <start:size>` rows",
        gpu_instance,
    )
}

/// Reads `nvidia-smi mig -lci`. `No compute instances found: Not Found` is an empty table.
pub fn parse_compute_instances(text: &str) -> Result<MigTable<ComputeInstance>, Error> {
    build(
        text,
        LCI,
        "`GPU  GI  MIG <name>  <profile id>  <instance id>  [start:size]` rows",
        compute_instance,
    )
}

fn gpu_instance(row: &BoxRow<'_>) -> Result<GpuInstance, RowError> {
    let named = row.named().ok_or(RowError::NoProfileName)?;
    let gpu = need(&named.before, 0, "GPU index")?;
    Ok(GpuInstance {
        gpu,
        name: named.name.to_string(),
        profile: profile(named.name),
        profile_id: need(&named.after, 0, "profile id")?,
        instance_id: need(&named.after, 1, "instance id")?,
        placement: placement(&named.after, 2)?,
    })
}

fn compute_instance(row: &BoxRow<'_>) -> Result<ComputeInstance, RowError> {
    let named = row.named().ok_or(RowError::NoProfileName)?;
    Ok(ComputeInstance {
        gpu: need(&named.before, 0, "GPU index")?,
        gpu_instance_id: need(&named.before, 1, "GPU instance id")?,
        name: named.name.to_string(),
        profile: profile(named.name),
        profile_id: need(&named.after, 0, "profile id")?,
        instance_id: need(&named.after, 1, "instance id")?,
        placement: placement(&named.after, 2)?,
    })
}

/// An optional `start:size` column: absent is `None`, present and unreadable is an error.
fn placement(tokens: &[&str], at: usize) -> Result<Option<Placement>, RowError> {
    match tokens.get(at) {
        None => Ok(None),
        Some(t) => Placement::parse(t)
            .map(Some)
            .ok_or_else(|| RowError::NotPlacement { token: t.to_string() }),
    }
}

//! `nvidia-smi mig -lgip` and `-lcip`: the instance profiles a GPU (or GPU instance) offers.
//!
//! Profile ids differ between GPU families (A30 and RTX PRO use other ids for the same shapes)
//! and the `Memory GiB` column changes between driver releases, so both are kept as printed
//! and never derived from the name.

use miggate_compat::MigProfile;
use serde::Serialize;

use super::row_error::RowError;
use super::table::{BoxRow, MigTable, build, free_total, maybe, need, profile};
use crate::error::Error;
use crate::text::number;

/// The `-lgip` command, as named in errors and warnings.
pub const LGIP: &str = "nvidia-smi mig -lgip";
/// The `-lcip` command, as named in errors and warnings.
pub const LCIP: &str = "nvidia-smi mig -lcip";

/// A GPU instance profile (`-lgip` row, both physical lines).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuInstanceProfile {
    /// The GPU index (multi-GPU hosts repeat the list per GPU).
    pub gpu: u32,
    /// The profile name as printed (`1g.24gb+me.all`).
    pub name: String,
    /// The name read as a profile; `None` when it is not of the form nvidia-smi prints.
    pub profile: Option<MigProfile>,
    /// The profile id `-cgi` takes.
    pub id: u32,
    /// Instances that can still be created.
    pub instances_free: u32,
    /// Instances the GPU can hold at most.
    pub instances_total: u32,
    /// `Memory GiB` as printed (`9.62`): it varies by driver, so it stays text.
    pub memory_gib: String,
    /// `P2P` (`No`/`Yes`), when the layout has the column.
    pub p2p: Option<String>,
    /// Streaming multiprocessors.
    pub sm: Option<u32>,
    /// Video decoders.
    pub dec: Option<u32>,
    /// Video encoders.
    pub enc: Option<u32>,
    /// Copy engines (second line).
    pub ce: Option<u32>,
    /// JPEG decoders (second line).
    pub jpeg: Option<u32>,
    /// Optical flow accelerators (second line).
    pub ofa: Option<u32>,
}

/// A compute instance profile (`-lcip` row, both physical lines).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComputeInstanceProfile {
    /// The GPU index.
    pub gpu: u32,
    /// The GPU instance the profile applies to.
    pub gpu_instance_id: u32,
    /// The profile name as printed (`1c.2g.12gb`).
    pub name: String,
    /// The name read as a profile; `None` when it is not of the form nvidia-smi prints.
    pub profile: Option<MigProfile>,
    /// The profile id `-cci` takes.
    pub id: u32,
    /// Whether nvidia-smi marks it as the GPU instance's default (`1*`).
    pub default: bool,
    /// Instances that can still be created.
    pub instances_free: u32,
    /// Instances the GPU instance can hold at most.
    pub instances_total: u32,
    /// Exclusive streaming multiprocessors.
    pub sm: Option<u32>,
    /// Shared video decoders.
    pub dec: Option<u32>,
    /// Shared video encoders.
    pub enc: Option<u32>,
    /// Shared optical flow accelerators.
    pub ofa: Option<u32>,
    /// Shared copy engines (second line).
    pub ce: Option<u32>,
    /// Shared JPEG decoders (second line).
    pub jpeg: Option<u32>,
}

/// Reads `nvidia-smi mig -lgip`.
pub fn parse_gpu_instance_profiles(text: &str) -> Result<MigTable<GpuInstanceProfile>, Error> {
    build(
        text,
        LGIP,
        "`GPU  MIG <name>  <id>  <free>/<total>  <GiB> …` rows",
        gpu_instance_profile,
    )
}

/// Reads `nvidia-smi mig -lcip`.
pub fn parse_compute_instance_profiles(text: &str) -> Result<MigTable<ComputeInstanceProfile>, Error> {
    build(
        text,
        LCIP,
        "`GPU  GI  MIG <name>  <id>  <free>/<total> …` rows",
        compute_instance_profile,
    )
}

fn gpu_instance_profile(row: &BoxRow<'_>) -> Result<GpuInstanceProfile, RowError> {
    let named = row.named().ok_or(RowError::NoProfileName)?;
    let after = &named.after;
    let (instances_free, instances_total) = free_total(after.get(1))?;
    let memory_gib = after
        .get(2)
        .ok_or(RowError::Missing { column: "Memory GiB" })?
        .to_string();
    // P2P is a word (`No`); older layouts may lack it, so the counts start after it if present.
    let (p2p, counts) = match after.get(3) {
        Some(t) if number(t).is_none() => (Some(t.to_string()), after.get(4..).unwrap_or(&[])),
        _ => (None, after.get(3..).unwrap_or(&[])),
    };
    Ok(GpuInstanceProfile {
        gpu: need(&named.before, 0, "GPU index")?,
        name: named.name.to_string(),
        profile: profile(named.name),
        id: need(after, 0, "profile id")?,
        instances_free,
        instances_total,
        memory_gib,
        p2p,
        sm: maybe(counts, 0),
        dec: maybe(counts, 1),
        enc: maybe(counts, 2),
        ce: maybe(&row.more, 0),
        jpeg: maybe(&row.more, 1),
        ofa: maybe(&row.more, 2),
    })
}

fn compute_instance_profile(row: &BoxRow<'_>) -> Result<ComputeInstanceProfile, RowError> {
    let named = row.named().ok_or(RowError::NoProfileName)?;
    let after = &named.after;
    let id_token = after.first().ok_or(RowError::Missing { column: "profile id" })?;
    let default = id_token.ends_with('*');
    let id = number(id_token.trim_end_matches('*')).ok_or_else(|| RowError::NotANumber {
        column: "profile id",
        token: id_token.to_string(),
    })?;
    let (instances_free, instances_total) = free_total(after.get(1))?;
    Ok(ComputeInstanceProfile {
        gpu: need(&named.before, 0, "GPU index")?,
        gpu_instance_id: need(&named.before, 1, "GPU instance id")?,
        name: named.name.to_string(),
        profile: profile(named.name),
        id,
        default,
        instances_free,
        instances_total,
        sm: maybe(after, 2),
        dec: maybe(after, 3),
        enc: maybe(after, 4),
        ofa: maybe(after, 5),
        ce: maybe(&row.more, 0),
        jpeg: maybe(&row.more, 1),
    })
}

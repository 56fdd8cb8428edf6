//! Joins a parsed `nvidia-smi -L` listing with `--query-gpu` rows into the manifest's NVIDIA
//! facts: the physical GPUs, and the devices a workload is given.
//!
//! Neither command alone can say what a process was given. `--query-gpu` lists physical GPUs
//! only, so inside a container holding a slice it shows the parent card; `-L` shows the slices
//! but cannot tell a MIG-enabled GPU with no slices from a whole one. The rules (DESIGN.md,
//! "Kind of a device"):
//! - a GPU with MIG lines under it offers those slices, never itself;
//! - a MIG-enabled GPU with no MIG lines offers nothing;
//! - any other GPU is a whole device;
//! - when the slices of a MIG-enabled GPU cannot be read (no `-L`), `devices` is unknown
//!   (`None`), never a guess.
//!
//! This is a pure function of parsed text, so every rule is tested on recorded output.

use miggate_compat::{Device, Gpu, MigMode, Nvidia, VersionText};

use crate::parse::list::{self, ListedGpu, ListedSlice, Listing};
use crate::parse::query::{self, QueryRow, QueryTable};

/// The NVIDIA facts one capture yields, before they are placed in a manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NvidiaFacts {
    /// Physical GPUs, by index: every query row, plus GPUs only `-L` listed.
    pub gpus: Vec<Gpu>,
    /// Devices in visible order (GPU index, then `-L` order); `None` when they cannot be told.
    pub devices: Option<Vec<Device>>,
    /// The driver version the query rows report.
    pub driver_version: Option<VersionText>,
    /// What could not be read cleanly: the parsers' warnings, then the join's.
    pub warnings: Vec<String>,
}

impl NvidiaFacts {
    /// The manifest's `nvidia` section, and the warnings the manifest should carry.
    pub fn into_nvidia(self) -> (Nvidia, Vec<String>) {
        let nvidia = Nvidia {
            driver_version: self.driver_version,
            gpus: Some(self.gpus),
            devices: self.devices,
            ..Nvidia::default()
        };
        (nvidia, self.warnings)
    }
}

/// One physical GPU as both commands saw it.
struct Joined<'a> {
    row: Option<&'a QueryRow>,
    listed: Option<&'a ListedGpu>,
}

impl Joined<'_> {
    fn index(&self) -> Option<u32> {
        self.row.and_then(|r| r.index).or(self.listed.map(|g| g.index))
    }
    fn uuid(&self) -> Option<&str> {
        let from_row = self.row.and_then(|r| r.uuid.as_deref());
        from_row.or(self.listed.and_then(|g| g.uuid.as_deref()))
    }
    fn name(&self) -> Option<&str> {
        let from_row = self.row.and_then(|r| r.name.as_deref());
        from_row.or(self.listed.and_then(|g| g.name.as_deref()))
    }
    /// Whether the GPU is older than MIG (compute capability below 8.0), so an unknown MIG
    /// mode cannot hide slices.
    fn predates_mig(&self) -> bool {
        let cc = self.row.and_then(|r| r.compute_cap.as_deref());
        cc.and_then(|c| c.split('.').next()?.trim().parse::<u32>().ok())
            .is_some_and(|major| major < 8)
    }

    fn mig_mode(&self) -> Option<MigMode> {
        let row = self.row?;
        Some(MigMode::from_current_pending(
            row.mig_mode_current?,
            row.mig_mode_pending,
        ))
    }
    /// How warnings name this GPU.
    fn label(&self) -> String {
        let index = self.index().map_or("?".to_string(), |i| i.to_string());
        format!("GPU {index} ({})", self.uuid().unwrap_or("UUID unknown"))
    }
}

/// Joins `listing` (`None` when `nvidia-smi -L` failed) with the `--query-gpu` table.
///
/// `-L` GPUs are joined to query rows by UUID, and by index where either side's UUID is
/// unknown. A GPU only `-L` lists still yields its devices (whole, unless MIG lines are under
/// it), with a warning that its MIG mode is unknown. MIG lines with no GPU above them become
/// slices with an unknown parent (or the parent a legacy UUID names).
pub fn assemble(listing: Option<&Listing>, query: &QueryTable) -> NvidiaFacts {
    let mut warnings = Vec::new();
    if let Some(l) = listing {
        warnings.extend(l.warnings.iter().cloned());
    }
    warnings.extend(query.warnings.iter().cloned());

    let rows = distinct_rows(&query.rows, &mut warnings);
    let joined = join(listing, &rows);
    let gpus = joined.iter().map(gpu).collect();
    let driver_version = driver_version(&rows, &mut warnings);

    // MIG lines with no GPU line above them: adopted by the GPU a legacy UUID names, if any.
    let orphans = listing.map_or(&[][..], |l| &l.orphans[..]);
    let owner: Vec<Option<usize>> = orphans
        .iter()
        .map(|s| {
            let parent = s.legacy_parent.as_deref()?;
            joined.iter().position(|j| j.uuid() == Some(parent))
        })
        .collect();

    let mut devices = Vec::new();
    let mut unknown = false;
    for (at, j) in joined.iter().enumerate() {
        let adopted = orphans
            .iter()
            .zip(&owner)
            .filter(|(_, o)| **o == Some(at))
            .map(|(s, _)| s);
        let listed = j.listed.map_or(&[][..], |g| &g.slices[..]);
        let slices: Vec<&ListedSlice> = listed.iter().chain(adopted).collect();
        match offer(j, listing.is_some(), !slices.is_empty(), &mut warnings) {
            Offer::Whole => devices.push(whole(j)),
            Offer::Slices => devices.extend(slices.into_iter().map(|s| slice(s, Some(j)))),
            Offer::Nothing => {}
            Offer::Unknown => unknown = true,
        }
    }
    for (s, _) in orphans.iter().zip(&owner).filter(|(_, o)| o.is_none()) {
        devices.push(slice(s, None));
    }
    if listing.is_none() && rows.is_empty() {
        warnings.push(format!(
            "neither {} nor {} listed a GPU: the devices are unknown",
            list::COMMAND,
            query::COMMAND
        ));
        unknown = true;
    }
    NvidiaFacts {
        gpus,
        devices: (!unknown).then_some(devices),
        driver_version,
        warnings,
    }
}

/// What one physical GPU gives a workload.
enum Offer {
    /// Itself, whole.
    Whole,
    /// The MIG slices listed under it.
    Slices,
    /// Nothing: MIG is on and no slice exists.
    Nothing,
    /// Cannot be told: MIG is on and its slices could not be read.
    Unknown,
}

/// Applies the rules of this module's header to one GPU, warning where a fact was missing.
fn offer(j: &Joined<'_>, listing_read: bool, has_slices: bool, warnings: &mut Vec<String>) -> Offer {
    let mode = j.mig_mode();
    let active = mode.is_some_and(MigMode::is_active);
    if j.row.is_none() {
        warnings.push(format!(
            "{} is listed by {} but has no {} row: its MIG mode is unknown",
            j.label(),
            list::COMMAND,
            query::COMMAND
        ));
    }
    if !listing_read {
        if mode.is_none() && !j.predates_mig() {
            warnings.push(format!(
                "{} has an unknown MIG mode and {} could not be read: its slices, and so the devices, are unknown",
                j.label(),
                list::COMMAND
            ));
            return Offer::Unknown;
        }
        if !active {
            return Offer::Whole;
        }
        warnings.push(format!(
            "{} has MIG enabled and {} could not be read: its slices, and so the devices, are unknown",
            j.label(),
            list::COMMAND
        ));
        return Offer::Unknown;
    }
    if has_slices {
        if mode.is_some_and(|m| !m.is_active()) {
            warnings.push(format!(
                "{} reports MIG off but {} lists MIG devices under it; kept as slices",
                j.label(),
                list::COMMAND
            ));
        }
        return Offer::Slices;
    }
    match (j.listed.is_some(), active) {
        (true, true) => Offer::Nothing,
        (true, false) => Offer::Whole,
        (false, true) => {
            warnings.push(format!(
                "{} has MIG enabled but is not in {}: its slices, and so the devices, are unknown",
                j.label(),
                list::COMMAND
            ));
            Offer::Unknown
        }
        (false, false) if mode.is_none() && !j.predates_mig() => {
            warnings.push(format!(
                "{} is not in {} and its MIG mode is unknown: the devices are unknown",
                j.label(),
                list::COMMAND
            ));
            Offer::Unknown
        }
        (false, false) => {
            warnings.push(format!(
                "{} is not in {}; taken as a whole GPU",
                j.label(),
                list::COMMAND
            ));
            Offer::Whole
        }
    }
}

/// Pairs `-L` GPUs with query rows (UUID first, index where a UUID is unknown), adds rows no
/// `-L` GPU claimed, and orders the result by GPU index (stable, unknown index last).
fn join<'a>(listing: Option<&'a Listing>, rows: &[&'a QueryRow]) -> Vec<Joined<'a>> {
    let mut used = vec![false; rows.len()];
    let mut joined = Vec::new();
    for g in listing.map_or(&[][..], |l| &l.gpus[..]) {
        let by_uuid = g.uuid.as_ref().and_then(|u| {
            rows.iter()
                .enumerate()
                .position(|(i, r)| !used[i] && r.uuid.as_ref() == Some(u))
        });
        let by_index = || {
            rows.iter().enumerate().position(|(i, r)| {
                !used[i] && r.index == Some(g.index) && (g.uuid.is_none() || r.uuid.is_none())
            })
        };
        let at = by_uuid.or_else(by_index);
        if let Some(i) = at {
            used[i] = true;
        }
        joined.push(Joined {
            row: at.and_then(|i| rows.get(i).copied()),
            listed: Some(g),
        });
    }
    for (row, used) in rows.iter().zip(used) {
        if !used {
            joined.push(Joined {
                row: Some(*row),
                listed: None,
            });
        }
    }
    joined.sort_by_key(|j| (j.index().is_none(), j.index()));
    joined
}

/// The query rows with a repeated GPU UUID (concatenated outputs) dropped, with a warning.
fn distinct_rows<'a>(rows: &'a [QueryRow], warnings: &mut Vec<String>) -> Vec<&'a QueryRow> {
    let mut kept: Vec<&QueryRow> = Vec::new();
    for row in rows {
        let repeat = row.uuid.is_some() && kept.iter().any(|k| k.uuid == row.uuid);
        if repeat {
            warnings.push(format!(
                "{} line {}: GPU {} listed again; dropped",
                query::COMMAND,
                row.line,
                row.uuid.as_deref().unwrap_or_default()
            ));
        } else {
            kept.push(row);
        }
    }
    kept
}

/// The manifest's entry for one physical GPU.
fn gpu(j: &Joined<'_>) -> Gpu {
    let row = j.row;
    Gpu {
        unknown: Default::default(),
        index: j.index(),
        uuid: j.uuid().and_then(|u| u.parse().ok()),
        product_name: j.name().map(String::from),
        pci_bus_id: row.and_then(|r| r.pci_bus_id.clone()),
        memory_mib: row.and_then(|r| r.memory_total_mib),
        compute_capability: row.and_then(|r| r.compute_cap.as_deref()).map(VersionText::new),
        mig_mode: j.mig_mode(),
    }
}

/// A whole-GPU device.
fn whole(j: &Joined<'_>) -> Device {
    Device {
        uuid: j.uuid().and_then(|u| u.parse().ok()),
        product_name: j.name().map(String::from),
        memory_mib: j.row.and_then(|r| r.memory_total_mib),
        ..Device::default()
    }
}

/// A slice device under `parent` (unknown for an orphan MIG line).
fn slice(s: &ListedSlice, parent: Option<&Joined<'_>>) -> Device {
    let parent_uuid = parent.and_then(Joined::uuid).or(s.legacy_parent.as_deref());
    Device {
        unknown: Default::default(),
        uuid: s.uuid.as_deref().and_then(|u| u.parse().ok()),
        parent_uuid: parent_uuid.and_then(|u| u.parse().ok()),
        product_name: parent.and_then(Joined::name).map(String::from),
        mig_profile: s.profile.clone(),
        gpu_instance_id: s.gpu_instance_id,
        compute_instance_id: s.compute_instance_id,
        memory_mib: None,
    }
}

/// The driver version the rows agree on; a disagreement is warned about and the first kept.
fn driver_version(rows: &[&QueryRow], warnings: &mut Vec<String>) -> Option<VersionText> {
    let mut versions = rows.iter().filter_map(|r| r.driver_version.as_deref());
    let first = versions.next()?;
    if let Some(other) = versions.find(|v| *v != first) {
        warnings.push(format!(
            "{} reports driver versions {first} and {other}; recorded {first}",
            query::COMMAND
        ));
    }
    Some(VersionText::new(first))
}

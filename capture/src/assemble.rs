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

use std::collections::{HashMap, HashSet};

use miggate_compat::{Device, Gpu, GpuUuid, MigMode, VersionText};

use crate::facts::NvidiaFacts;
use crate::warning::{SmiGpu, Warning};
use miggate_smi::list::{ListedGpu, ListedSlice, Listing};
use miggate_smi::query::{QueryRow, QueryTable};

/// One physical GPU as both commands saw it.
struct Joined<'a> {
    row: Option<&'a QueryRow>,
    listed: Option<&'a ListedGpu>,
}

impl Joined<'_> {
    fn index(&self) -> Option<u32> {
        self.row.and_then(|r| r.index).or(self.listed.map(|g| g.index))
    }
    fn uuid(&self) -> Option<&GpuUuid> {
        let from_row = self.row.and_then(|r| r.uuid.as_ref());
        from_row.or(self.listed.and_then(|g| g.uuid.as_ref()))
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
    fn label(&self) -> SmiGpu {
        SmiGpu {
            index: self.index(),
            uuid: self.uuid().cloned(),
        }
    }
}

/// Joins `listing` (`None` when `nvidia-smi -L` failed) with the `--query-gpu` table.
///
/// `-L` GPUs are joined to query rows by UUID, and by index where either side's UUID is
/// unknown. A GPU only `-L` lists still yields its devices (whole, unless MIG lines are under
/// it), with a warning that its MIG mode is unknown. MIG lines with no GPU above them become
/// slices with an unknown parent (or the parent a legacy UUID names).
///
/// Near-linear in the number of GPUs and slices: every lookup goes through a hash map, and the
/// only sort is the final one by GPU index.
pub fn assemble(listing: Option<&Listing>, query: &QueryTable) -> NvidiaFacts {
    let mut warnings = Vec::new();
    if let Some(l) = listing {
        warnings.extend(l.warnings.iter().cloned().map(Warning::Smi));
    }
    warnings.extend(query.warnings.iter().cloned().map(Warning::Smi));

    let rows = distinct_rows(&query.rows, &mut warnings);
    let joined = join(listing, &rows);
    let gpus = joined.iter().map(gpu).collect();
    let driver_version = driver_version(&rows, &mut warnings);

    // MIG lines with no GPU line above them: adopted by the GPU a legacy UUID names, if any.
    let orphans = listing.map_or(&[][..], |l| &l.orphans[..]);
    let mut position: HashMap<&GpuUuid, usize> = HashMap::with_capacity(joined.len());
    for (at, j) in joined.iter().enumerate() {
        if let Some(uuid) = j.uuid() {
            position.entry(uuid).or_insert(at);
        }
    }
    let mut adopted: Vec<Vec<&ListedSlice>> = vec![Vec::new(); joined.len()];
    let mut unowned: Vec<&ListedSlice> = Vec::new();
    for s in orphans {
        let owner = s.legacy_parent.as_ref().and_then(|p| position.get(p).copied());
        match owner.and_then(|at| adopted.get_mut(at)) {
            Some(list) => list.push(s),
            None => unowned.push(s),
        }
    }

    let mut devices = Vec::new();
    let mut unknown = false;
    for (j, adopted) in joined.iter().zip(adopted) {
        let listed = j.listed.map_or(&[][..], |g| &g.slices[..]);
        let has_slices = !listed.is_empty() || !adopted.is_empty();
        match offer(j, listing.is_some(), has_slices, &mut warnings) {
            Offer::Whole => devices.push(whole(j)),
            Offer::Slices => devices.extend(listed.iter().chain(adopted).map(|s| slice(s, Some(j)))),
            Offer::Nothing => {}
            Offer::Unknown => unknown = true,
        }
    }
    devices.extend(unowned.into_iter().map(|s| slice(s, None)));
    if listing.is_none() && rows.is_empty() {
        warnings.push(Warning::NoGpuListed);
        unknown = true;
    }
    NvidiaFacts {
        driver_version,
        cuda_driver_version: None,
        gpus,
        devices: (!unknown).then_some(devices),
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
fn offer(j: &Joined<'_>, listing_read: bool, has_slices: bool, warnings: &mut Vec<Warning>) -> Offer {
    let mode = j.mig_mode();
    let active = mode.is_some_and(MigMode::is_active);
    if j.row.is_none() {
        warnings.push(Warning::WithoutQueryRow(j.label()));
    }
    if !listing_read {
        if mode.is_none() && !j.predates_mig() {
            warnings.push(Warning::MigModeUnknownWithoutListing(j.label()));
            return Offer::Unknown;
        }
        if !active {
            return Offer::Whole;
        }
        warnings.push(Warning::MigOnWithoutListing(j.label()));
        return Offer::Unknown;
    }
    if has_slices {
        if mode.is_some_and(|m| !m.is_active()) {
            warnings.push(Warning::MigOffWithSlices(j.label()));
        }
        return Offer::Slices;
    }
    match (j.listed.is_some(), active) {
        (true, true) => Offer::Nothing,
        (true, false) => Offer::Whole,
        (false, true) => {
            warnings.push(Warning::MigOnNotListed(j.label()));
            Offer::Unknown
        }
        (false, false) if mode.is_none() && !j.predates_mig() => {
            warnings.push(Warning::MigModeUnknownNotListed(j.label()));
            Offer::Unknown
        }
        (false, false) => {
            warnings.push(Warning::NotListedTakenWhole(j.label()));
            Offer::Whole
        }
    }
}

/// Pairs `-L` GPUs with query rows (UUID first, index where a UUID is unknown), adds rows no
/// `-L` GPU claimed, and orders the result by GPU index (stable, unknown index last).
///
/// Each lookup takes the first unused row that fits, in printed order, as a scan would; the
/// queues below hold the candidates in that order and only ever move forward past used rows,
/// so the whole join is linear.
fn join<'a>(listing: Option<&'a Listing>, rows: &[&'a QueryRow]) -> Vec<Joined<'a>> {
    let mut used = vec![false; rows.len()];
    // Rows are distinct by UUID (see `distinct_rows`), so each UUID names at most one row.
    let mut by_uuid: HashMap<&GpuUuid, usize> = HashMap::with_capacity(rows.len());
    // Rows by index: all of them, and those without a UUID.
    let mut by_index: HashMap<u32, Candidates> = HashMap::new();
    let mut by_index_without_uuid: HashMap<u32, Candidates> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        if let Some(u) = &r.uuid {
            by_uuid.insert(u, i);
        }
        if let Some(index) = r.index {
            by_index.entry(index).or_default().rows.push(i);
            if r.uuid.is_none() {
                by_index_without_uuid.entry(index).or_default().rows.push(i);
            }
        }
    }
    let mut joined = Vec::with_capacity(rows.len());
    for g in listing.map_or(&[][..], |l| &l.gpus[..]) {
        let by_uuid = g
            .uuid
            .as_ref()
            .and_then(|u| by_uuid.get(u).copied())
            .filter(|i| !used.get(*i).copied().unwrap_or(true));
        let at = by_uuid.or_else(|| {
            // A GPU without UUID takes any row of its index; one with a UUID only a row without.
            let candidates = if g.uuid.is_none() {
                by_index.get_mut(&g.index)
            } else {
                by_index_without_uuid.get_mut(&g.index)
            };
            candidates.and_then(|c| c.first_unused(&used))
        });
        if let Some(flag) = at.and_then(|i| used.get_mut(i)) {
            *flag = true;
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

/// Row positions in printed order, with a cursor past those already known to be used.
#[derive(Default)]
struct Candidates {
    rows: Vec<usize>,
    next: usize,
}

impl Candidates {
    /// The first row not yet used. Used rows never become unused, so the cursor only moves on.
    fn first_unused(&mut self, used: &[bool]) -> Option<usize> {
        while let Some(&i) = self.rows.get(self.next) {
            if !used.get(i).copied().unwrap_or(true) {
                return Some(i);
            }
            self.next += 1;
        }
        None
    }
}

/// The query rows with a repeated GPU UUID (concatenated outputs) dropped, with a warning.
fn distinct_rows<'a>(rows: &'a [QueryRow], warnings: &mut Vec<Warning>) -> Vec<&'a QueryRow> {
    let mut seen: HashSet<&GpuUuid> = HashSet::with_capacity(rows.len());
    let mut kept: Vec<&QueryRow> = Vec::with_capacity(rows.len());
    for row in rows {
        match &row.uuid {
            Some(uuid) if !seen.insert(uuid) => warnings.push(Warning::QueryGpuAgain {
                line: row.line,
                uuid: uuid.clone(),
            }),
            _ => kept.push(row),
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
        uuid: j.uuid().cloned(),
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
        uuid: j.uuid().and_then(|u| u.as_str().parse().ok()),
        product_name: j.name().map(String::from),
        memory_mib: j.row.and_then(|r| r.memory_total_mib),
        ..Device::default()
    }
}

/// A slice device under `parent` (unknown for an orphan MIG line).
fn slice(s: &ListedSlice, parent: Option<&Joined<'_>>) -> Device {
    let parent_uuid = parent.and_then(Joined::uuid).or(s.legacy_parent.as_ref());
    Device {
        unknown: Default::default(),
        uuid: s.uuid.clone(),
        parent_uuid: parent_uuid.cloned(),
        product_name: parent.and_then(Joined::name).map(String::from),
        mig_profile: s.profile.clone(),
        gpu_instance_id: s.gpu_instance_id,
        compute_instance_id: s.compute_instance_id,
        memory_mib: None,
    }
}

/// The driver version the rows agree on; a disagreement is warned about and the first kept.
fn driver_version(rows: &[&QueryRow], warnings: &mut Vec<Warning>) -> Option<VersionText> {
    let mut versions = rows.iter().filter_map(|r| r.driver_version.as_deref());
    let first = versions.next()?;
    if let Some(other) = versions.find(|v| *v != first) {
        warnings.push(Warning::DriverVersionsDiffer {
            first: first.to_string(),
            other: other.to_string(),
        });
    }
    Some(VersionText::new(first))
}

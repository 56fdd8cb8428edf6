//! Pairing source devices with target devices for cuda-checkpoint's `--device-map`.
//!
//! Positional pairing turns a GPU difference into a device-map error that names neither GPU.
//! Here a source device is paired with a target device of the same class (kind, model,
//! profile), in visible order, and with itself where the UUID is the same on both sides.

use std::collections::BTreeSet;

use crate::checks::CheckName;
use crate::device::parse_legacy_mig_uuid;
use crate::manifest::{Device, GpuManifest};

/// Whether two devices can stand for each other; dimensions unknown on either side, or waived
/// by a skipped check, are left out.
fn same_class(a: &Device, b: &Device, skip: &BTreeSet<CheckName>) -> bool {
    let kind = skip.contains(&CheckName::MigPartitioning) || a.kind() == b.kind();
    let model = skip.contains(&CheckName::GpuModel)
        || match (a.model(), b.model()) {
            (Some(x), Some(y)) => x == y,
            _ => true,
        };
    let profile = skip.contains(&CheckName::MigProfile)
        || match (&a.mig_profile, &b.mig_profile) {
            (Some(x), Some(y)) => x == y,
            _ => true,
        };
    kind && model && profile
}

fn uuid(d: &Device) -> Option<&str> {
    d.uuid.as_deref().map(str::trim).filter(|u| !u.is_empty())
}

/// Builds the map: `Ok(Some(""))` when every device maps to itself, `Ok(Some("a=b,…"))`
/// otherwise, `Ok(None)` when there are no devices to map, and `Err(why)` when a pairing or an
/// id cuda-checkpoint accepts cannot be found.
pub fn build(source: &GpuManifest, target: &GpuManifest, skip: &BTreeSet<CheckName>) -> Result<Option<String>, String> {
    let (Some(src), Some(tgt)) = (source.devices(), target.devices()) else {
        return Err("devices not recorded on both sides".into());
    };
    if src.is_empty() {
        return Ok(Some(String::new()));
    }
    let mut used = vec![false; tgt.len()];
    let mut pairs: Vec<Option<usize>> = vec![None; src.len()];
    // Identity first: a device present on both sides stays where it is.
    for (i, s) in src.iter().enumerate() {
        let Some(u) = uuid(s) else { continue };
        if let Some(j) = (0..tgt.len()).find(|&j| !used[j] && uuid(&tgt[j]) == Some(u) && same_class(s, &tgt[j], skip)) {
            used[j] = true;
            pairs[i] = Some(j);
        }
    }
    for (i, s) in src.iter().enumerate() {
        if pairs[i].is_some() {
            continue;
        }
        let j = (0..tgt.len())
            .find(|&j| !used[j] && same_class(s, &tgt[j], skip))
            .ok_or_else(|| format!("no target device of the same class for source device {}", label(s, i)))?;
        used[j] = true;
        pairs[i] = Some(j);
    }
    let mut rendered = Vec::with_capacity(src.len());
    let mut all_identity = true;
    for (i, s) in src.iter().enumerate() {
        let Some(j) = pairs[i] else {
            return Err(format!("source device {} was not paired", label(s, i)));
        };
        let t = &tgt[j];
        let (su, tu) = (mappable(s, i)?, mappable(t, j)?);
        all_identity &= su == tu;
        rendered.push(format!("{su}={tu}"));
    }
    Ok(Some(if all_identity { String::new() } else { rendered.join(",") }))
}

fn label(d: &Device, i: usize) -> String {
    uuid(d).map_or_else(|| format!("#{i}"), str::to_string)
}

fn mappable(d: &Device, i: usize) -> Result<&str, String> {
    match uuid(d) {
        Some(u) if parse_legacy_mig_uuid(u).is_some() => Err(format!(
            "device {u} has a legacy MIG-GPU-… id, which cuda-checkpoint does not accept"
        )),
        Some(u) => Ok(u),
        None => Err(format!("device #{i} has no UUID")),
    }
}

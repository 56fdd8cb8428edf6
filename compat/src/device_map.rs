//! Pairing source devices with target devices for cuda-checkpoint's `--device-map`.
//!
//! Positional pairing turns a GPU difference into a device-map error that names neither GPU.
//! Here a source device is paired with a target device of the same class (kind, model,
//! profile), in visible order, and with itself where the UUID is the same on both sides.

use std::collections::BTreeSet;

use crate::checks::CheckName;
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
    d.uuid.as_ref().map(|u| u.as_str())
}

/// Builds the map: `Ok(Some(""))` when every device maps to itself (or the source has none),
/// `Ok(Some("a=b,…"))` otherwise, and `Err(why)` when a pairing or an id cuda-checkpoint
/// accepts cannot be found.
pub fn build(
    source: &GpuManifest,
    target: &GpuManifest,
    skip: &BTreeSet<CheckName>,
) -> Result<Option<String>, String> {
    let (Some(src), Some(tgt)) = (source.devices(), target.devices()) else {
        return Err("devices not recorded on both sides".into());
    };
    if src.is_empty() {
        return Ok(Some(String::new()));
    }
    // Pair only with targets cuda-checkpoint can be given (a UUID, not a legacy id) where that
    // is possible, so which of a node's interchangeable devices comes first does not decide
    // whether there is a map; otherwise pair with any, and let the id check below say why not.
    let usable: Vec<bool> = tgt
        .iter()
        .enumerate()
        .map(|(j, t)| mappable(t, j).is_ok())
        .collect();
    let pairs = match pair_up(src, tgt, skip, &usable) {
        Ok(p) => p,
        Err(_) => pair_up(src, tgt, skip, &vec![true; tgt.len()]).map_err(|i| {
            format!(
                "no target device of the same class for source device {}",
                label(&src[i], i)
            )
        })?,
    };
    let mut rendered = Vec::with_capacity(src.len());
    let mut all_identity = true;
    for (i, s) in src.iter().enumerate() {
        let t = &tgt[pairs[i]];
        let j = pairs[i];
        let (su, tu) = (mappable(s, i)?, mappable(t, j)?);
        all_identity &= su == tu;
        rendered.push(format!("{su}={tu}"));
    }
    Ok(Some(if all_identity {
        String::new()
    } else {
        rendered.join(",")
    }))
}

/// Pairs every source device with a distinct target device of its class among `allowed` ones:
/// identity first, then the first free target in visible order, then an augmenting path when a
/// dimension unknown on some device made an earlier pairing take the only target this one fits.
/// `Err(i)` names a source device that cannot be paired.
fn pair_up(
    src: &[Device],
    tgt: &[Device],
    skip: &BTreeSet<CheckName>,
    allowed: &[bool],
) -> Result<Vec<usize>, usize> {
    // owner[j]: the source device target j is paired with.
    let mut owner: Vec<Option<usize>> = vec![None; tgt.len()];
    // Identity first: a device present on both sides stays where it is.
    for (i, s) in src.iter().enumerate() {
        let Some(u) = uuid(s) else { continue };
        if let Some(j) = (0..tgt.len()).find(|&j| {
            allowed[j] && owner[j].is_none() && uuid(&tgt[j]) == Some(u) && same_class(s, &tgt[j], skip)
        }) {
            owner[j] = Some(i);
        }
    }
    // Identity pairs and targets not allowed are never (re)assigned.
    let locked: Vec<bool> = owner
        .iter()
        .zip(allowed)
        .map(|(o, a)| o.is_some() || !a)
        .collect();
    for (i, s) in src.iter().enumerate() {
        if owner.contains(&Some(i)) {
            continue;
        }
        if let Some(j) =
            (0..tgt.len()).find(|&j| !locked[j] && owner[j].is_none() && same_class(s, &tgt[j], skip))
        {
            owner[j] = Some(i);
            continue;
        }
        let mut seen = locked.clone();
        if !augment(i, src, tgt, skip, &mut owner, &mut seen) {
            return Err(i);
        }
    }
    let mut pairs = vec![0; src.len()];
    for (j, o) in owner.iter().enumerate() {
        if let Some(i) = o {
            pairs[*i] = j;
        }
    }
    Ok(pairs)
}

/// Kuhn's augmenting path: finds source `i` a target, re-pairing earlier sources where needed.
/// `seen` starts with the locked targets marked, so those are never taken or moved.
fn augment(
    i: usize,
    src: &[Device],
    tgt: &[Device],
    skip: &BTreeSet<CheckName>,
    owner: &mut [Option<usize>],
    seen: &mut [bool],
) -> bool {
    for j in 0..tgt.len() {
        if seen[j] || !same_class(&src[i], &tgt[j], skip) {
            continue;
        }
        seen[j] = true;
        let free = match owner[j] {
            None => true,
            Some(k) => augment(k, src, tgt, skip, owner, seen),
        };
        if free {
            owner[j] = Some(i);
            return true;
        }
    }
    false
}

fn label(d: &Device, i: usize) -> String {
    uuid(d).map_or_else(|| format!("#{i}"), str::to_string)
}

fn mappable(d: &Device, i: usize) -> Result<&str, String> {
    d.mappable_uuid().ok_or_else(|| match uuid(d) {
        Some(u) if d.uuid.as_ref().is_none_or(|x| x.mappable().is_none()) => {
            format!("device {u} has a legacy MIG-GPU-… id, which cuda-checkpoint does not accept")
        }
        Some(u) => format!("device {u} has no GPU-… or MIG-… UUID, which is all cuda-checkpoint accepts"),
        None => format!("device #{i} has no UUID"),
    })
}

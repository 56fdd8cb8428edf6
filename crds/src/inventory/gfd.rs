//! Source 3: GPU Feature Discovery's labels on the `Node`: node-wide counts.
//!
//! GFD (`NVIDIA/k8s-device-plugin`, `internal/lm`) labels a node with its GPU product, count
//! and memory, and per MIG strategy:
//! - `mixed`: `nvidia.com/mig-<profile>.count` (and `.memory`, `.product`) per profile, with
//!   `+` in a profile written as `.` (`1g.10gb+me` as `mig-1g.10gb.me`); `nvidia.com/gpu.*`
//!   keeps describing the physical GPUs, MIG-enabled ones counted in `gpu.count` with
//!   `gpu.replicas=0` when every GPU of that product is cut;
//! - `single`: `nvidia.com/gpu.product=<model>-MIG-<profile>` and `gpu.count` = slices
//!   (`<model>-MIG-INVALID` when the node breaks the strategy's rules);
//! - `none`: whole GPUs only.
//!
//! Labels carry no UUIDs, no parent GPU and no placement, and lag the node by GFD's sleep
//! interval; MIG counts are read only while mig-manager reports `nvidia.com/mig.config.state`
//! `success`. Kernel and architecture come from `Node.status.nodeInfo` (the kubelet's, not
//! GFD's). Whole GPUs come out without a UUID, which compat classes as devices of unknown kind:
//! the GPU checks then answer unknown, never refuse on a guess.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use miggate_compat::{Device, GpuManifest, MigProfile, MigStrategy, Nvidia, VersionText};

use super::product::known_product;
use super::slices::MAX_DEVICES;
use super::{Inventory, MAX_TEXT_BYTES, Source, host_from_node, quote, unreadable};
use crate::error::Error;

/// The most `nvidia.com/` labels read from one node; GFD writes a few dozen (about twelve per
/// MIG profile). A node past this is refused as a source, not read in part.
pub const MAX_GFD_LABELS: usize = 512;

const PREFIX: &str = "nvidia.com/";

/// The inventory GFD's labels on `node` describe: devices counted per profile and whole GPUs,
/// product names mapped back, the driver version, the MIG strategy; kernel and architecture
/// from `status.nodeInfo`.
///
/// `Ok(None)` when the node has no GFD labels. An error when the labels cannot be trusted: a
/// MIG layout not settled (`nvidia.com/mig.config.state` other than `success`), the single
/// strategy's `INVALID` product, a count that is not a number.
pub fn from_gfd_labels(node: &Node) -> Result<Option<Inventory>, Error> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let bad = |why: String| unreadable(Source::GfdLabels, name, why);
    let empty = BTreeMap::new();
    let all = node.metadata.labels.as_ref().unwrap_or(&empty);
    // Only `nvidia.com/…` keys, found by range: a node's other labels are never walked.
    let labels: Vec<(&str, &str)> = all
        .range::<str, _>((std::ops::Bound::Included(PREFIX), std::ops::Bound::Unbounded))
        .take_while(|(k, _)| k.starts_with(PREFIX))
        .take(MAX_GFD_LABELS + 1)
        .map(|(k, v)| (&k[PREFIX.len()..], v.as_str()))
        .collect();
    if labels.len() > MAX_GFD_LABELS {
        return Err(bad(format!("more than {MAX_GFD_LABELS} nvidia.com/ labels")));
    }
    let get = |key: &str| labels.iter().find(|(k, _)| *k == key).map(|(_, v)| v.trim());
    if get("gpu.product").is_none() && get("gpu.count").is_none() && get("gfd.timestamp").is_none() {
        return Ok(None);
    }
    let count = |key: &str| -> Result<Option<usize>, Error> {
        get(key)
            .map(|v| {
                v.parse::<usize>()
                    .ok()
                    .filter(|n| *n <= MAX_DEVICES)
                    .ok_or_else(|| bad(format!("nvidia.com/{key}={} is not a device count", quote(v))))
            })
            .transpose()
    };

    let strategy = match get("mig.strategy") {
        None => None,
        Some("none") => Some(MigStrategy::None),
        Some("single") => Some(MigStrategy::Single),
        Some("mixed") => Some(MigStrategy::Mixed),
        Some(other) => return Err(bad(format!("unknown nvidia.com/mig.strategy {}", quote(other)))),
    };
    let product_label = get("gpu.product");
    let single_mig = product_label.and_then(|p| p.rsplit_once("-MIG-"));
    let mut profiles: Vec<(&str, usize)> = Vec::new();
    for (key, _) in &labels {
        if let Some(profile) = key.strip_prefix("mig-").and_then(|k| k.strip_suffix(".count")) {
            let n = count(key)?.unwrap_or_default();
            profiles.push((profile, n));
        }
    }
    let has_mig = profiles.iter().any(|(_, n)| *n > 0) || single_mig.is_some();
    // mig-manager changing the layout (or failed to): the labels are not the node's. An
    // inventory that knows nothing, with a note that says so, so nothing read here refuses.
    if let Some(state) = super::reconfiguring(node) {
        let inv = Inventory {
            manifest: GpuManifest {
                host: Some(host_from_node(name, None)),
                ..GpuManifest::default()
            },
            source: Source::GfdLabels,
            notes: Vec::new(),
            passed_over: Vec::new(),
            slices_listed: false,
            supply: None,
        };
        return Ok(Some(super::in_flux(inv, state)));
    }
    // With the layout applied, the counts per profile are exact: every slice is listed, and
    // the GPUs counted (no UUID, so of unknown kind) are whole ones or the slices' parents.
    let slices_listed = has_mig || !profiles.is_empty();
    if has_mig && get("mig.config.state") != Some("success") {
        return Err(bad(format!(
            "nvidia.com/mig.config.state is {}, not success: the MIG layout is not known to be applied",
            get("mig.config.state").map_or_else(|| "absent".to_string(), quote)
        )));
    }

    let mut notes =
        vec!["GFD labels: counts per node only; device UUIDs and parent GPUs unknown".to_string()];
    let mut devices: Option<Vec<Device>> = Some(Vec::new());
    let mut total = 0usize;
    let mut push = |devices: &mut Option<Vec<Device>>, n: usize, device: Device| -> Result<(), Error> {
        total = total.saturating_add(n);
        if total > MAX_DEVICES {
            return Err(bad(format!("more than {MAX_DEVICES} devices counted")));
        }
        if let Some(list) = devices {
            list.extend(std::iter::repeat_n(device, n));
        }
        Ok(())
    };

    if let Some((model, profile)) = single_mig {
        if profile == "INVALID" {
            return Err(bad(
                "nvidia.com/gpu.product ends in -MIG-INVALID: the node breaks the single strategy's rules"
                    .into(),
            ));
        }
        let n = count("gpu.count")?.unwrap_or_default();
        let device = Device {
            product_name: model_of(model, &mut notes),
            mig_profile: mig_profile(profile, &mut notes),
            memory_mib: get("gpu.memory").and_then(|m| m.parse().ok()),
            ..Device::default()
        };
        push(&mut devices, n, device)?;
    } else {
        for (profile, n) in &profiles {
            let product = get(&format!("mig-{profile}.product"))
                .and_then(|p| p.rsplit_once("-MIG-").map(|(m, _)| m))
                .or(product_label);
            let device = Device {
                product_name: product.and_then(|p| model_of(p, &mut notes)),
                mig_profile: mig_profile(&unmangle(profile), &mut notes),
                memory_mib: get(&format!("mig-{profile}.memory")).and_then(|m| m.parse().ok()),
                ..Device::default()
            };
            push(&mut devices, *n, device)?;
        }
        let gpus = count("gpu.count")?.unwrap_or_default();
        let replicas = get("gpu.replicas");
        let slices = profiles.iter().any(|(_, n)| *n > 0);
        let whole = if replicas == Some("0") {
            // Every GPU of the product is MIG-enabled: none is offered whole.
            Some(0)
        } else if !slices {
            Some(gpus)
        } else {
            // Cut and uncut GPUs of one product share `gpu.count`; the device plugin's
            // `nvidia.com/gpu` capacity counts the uncut ones (times their replicas).
            whole_from_capacity(node, replicas)
        };
        match whole {
            Some(n) => {
                let device = Device {
                    product_name: product_label.and_then(|p| model_of(p, &mut notes)),
                    memory_mib: get("gpu.memory").and_then(|m| m.parse().ok()),
                    ..Device::default()
                };
                push(&mut devices, n, device)?;
            }
            None => {
                // At least one counted GPU is cut (slices exist): at most the others are
                // whole. Listed as devices of unknown kind, an upper bound that never
                // refuses a whole-GPU checkpoint, while the slices counted stay certain.
                let most = gpus.saturating_sub(1);
                let device = Device {
                    product_name: product_label.and_then(|p| model_of(p, &mut notes)),
                    memory_mib: get("gpu.memory").and_then(|m| m.parse().ok()),
                    ..Device::default()
                };
                push(&mut devices, most, device)?;
                notes.push(format!(
                    "GFD labels: cut and whole GPUs share nvidia.com/gpu.count and the node's nvidia.com/gpu capacity does not say how many are whole; at most {most} counted"
                ));
            }
        }
    }

    let host = host_from_node(name, Some(node));
    if host.kernel_version.is_none() {
        notes.push("GFD labels: no Node.status.nodeInfo kernelVersion; kernel checks are unknown".into());
    }
    let driver = get("cuda.driver-version.full").map(str::to_string).or_else(|| {
        match (
            get("cuda.driver.major"),
            get("cuda.driver.minor"),
            get("cuda.driver.rev"),
        ) {
            (Some(a), Some(b), Some(c)) => Some(format!("{a}.{b}.{c}")),
            _ => None,
        }
    });
    let cuda = get("cuda.runtime-version.full").map(str::to_string).or_else(|| {
        match (get("cuda.runtime.major"), get("cuda.runtime.minor")) {
            (Some(a), Some(b)) => Some(format!("{a}.{b}")),
            _ => None,
        }
    });
    let version = |v: Option<String>| {
        v.filter(|v| !v.is_empty() && v.len() <= MAX_TEXT_BYTES)
            .map(VersionText::new)
    };
    notes.truncate(super::MAX_NOTES);
    let manifest = GpuManifest {
        host: Some(host),
        nvidia: Some(Nvidia {
            driver_version: version(driver),
            cuda_driver_version: version(cuda),
            mig_strategy: strategy,
            devices,
            ..Nvidia::default()
        }),
        ..GpuManifest::default()
    };
    Ok(Some(Inventory {
        manifest,
        source: Source::GfdLabels,
        notes,
        passed_over: Vec::new(),
        slices_listed,
        supply: None,
    }))
}

/// The product name a GFD label stands for, or unknown (with one note per label) when it is
/// not a name this version can map back.
fn model_of(label: &str, notes: &mut Vec<String>) -> Option<String> {
    let known = known_product(label);
    if known.is_none() {
        let note = format!(
            "GFD labels: product {} is not a name miggate can map back; GPU model unknown",
            quote(label)
        );
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    known.map(str::to_string)
}

/// A profile from a label, where GFD wrote its `+` as `.`: the first `.` after the memory
/// size was a `+` (`1g.10gb.me` was `1g.10gb+me`, `1g.24gb.me.all` was `1g.24gb+me.all`).
fn unmangle(profile: &str) -> String {
    match profile.find("gb.") {
        Some(i) => format!("{}+{}", &profile[..i + 2], &profile[i + 3..]),
        None => profile.to_string(),
    }
}

/// The profile as nvidia-smi prints it, or unknown (with a note) when the label's text is not
/// one: a slice of unknown shape, never a whole GPU.
fn mig_profile(text: &str, notes: &mut Vec<String>) -> Option<MigProfile> {
    match text.parse() {
        Ok(p) => Some(p),
        Err(_) => {
            notes.push(format!(
                "GFD labels: MIG profile {} is not one miggate reads; its shape is unknown",
                quote(text)
            ));
            None
        }
    }
}

/// Whole GPUs from the node's `nvidia.com/gpu` capacity (what the device plugin advertises
/// under the mixed strategy: uncut GPUs times their replicas), when it divides evenly.
fn whole_from_capacity(node: &Node, replicas: Option<&str>) -> Option<usize> {
    let capacity = node.status.as_ref()?.capacity.as_ref()?.get("nvidia.com/gpu")?;
    let advertised: usize = capacity.0.trim().parse().ok()?;
    let replicas: usize = replicas.unwrap_or("1").parse().ok().filter(|r| *r > 0)?;
    advertised
        .is_multiple_of(replicas)
        .then_some(advertised / replicas)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("1g.10gb", "1g.10gb")]
    #[case("1g.10gb.me", "1g.10gb+me")]
    #[case("1g.24gb.me.all", "1g.24gb+me.all")]
    #[case("4g.48gb.gfx", "4g.48gb+gfx")]
    #[case("7g.80gb", "7g.80gb")]
    fn profiles_get_their_plus_back(#[case] label: &str, #[case] profile: &str) {
        assert_eq!(unmangle(label), profile);
    }
}

//! Structured pairs of device lists → `evaluate` in both modes, with and without skips: the
//! pairing behind the device map and offer mode. Each device is a few bytes choosing its kind,
//! model, profile, UUID and GPU instance from small pools, so inputs crowd into few classes and
//! collide on UUIDs, the shapes that once made pairing recursive and quadratic. Run it with a
//! large `-max_len` (a megabyte is about 200,000 devices).
//!
//! Checked: no panic or abort; a compatible report with a map pairs every source device with a
//! distinct target device, only with UUIDs the manifests hold.
#![no_main]

use std::collections::{BTreeMap, BTreeSet};

use libfuzzer_sys::fuzz_target;
use miggate_compat::{CheckName, Device, GpuManifest, Mode, Nvidia, Options, evaluate};

const MODELS: [&str; 4] = ["NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-40GB", "M0"];
const PROFILES: [&str; 6] = ["1g.10gb", "3g.40gb", "1g.10gb+me", "1c.3g.40gb", "2c.3g.40gb", "7g.80gb"];

/// One device from five bytes.
fn device(b: &[u8; 5]) -> Device {
    let [kind, model, profile, uuid, gi] = *b;
    let mut d = Device::default();
    let slice = kind & 1 == 1;
    if kind & 2 == 0 {
        let id = u32::from(uuid) | (u32::from(kind >> 4) << 8);
        let text = if slice { format!("MIG-{id:x}") } else { format!("GPU-{id:x}") };
        d.uuid = text.parse().ok();
    }
    if kind & 4 == 0 {
        d.product_name = Some(MODELS[usize::from(model) % MODELS.len()].to_string());
    }
    if slice {
        if kind & 8 == 0 {
            d.mig_profile = PROFILES[usize::from(profile) % PROFILES.len()].parse().ok();
        }
        d.parent_uuid = format!("GPU-p{}", gi % 4).parse().ok();
        d.gpu_instance_id = Some(u32::from(gi % 16));
    }
    d
}

fn side(bytes: &[u8]) -> GpuManifest {
    let devices = bytes
        .chunks_exact(5)
        .map(|c| device(&[c[0], c[1], c[2], c[3], c[4]]))
        .collect();
    GpuManifest {
        nvidia: Some(Nvidia {
            devices: Some(devices),
            ..Nvidia::default()
        }),
        ..GpuManifest::default()
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    // Split at a multiple of five bytes chosen by the first byte.
    let at = (rest.len() * usize::from(split) / 255) / 5 * 5;
    let (source, target) = (side(&rest[..at]), side(&rest[at..]));
    let skips: [BTreeSet<CheckName>; 2] = [
        BTreeSet::new(),
        [CheckName::GPU_MODEL, CheckName::MIG_PROFILE].into_iter().collect(),
    ];
    for mode in [Mode::Exact, Mode::Offer] {
        for skip in &skips {
            let options = Options {
                mode,
                skip: skip.clone(),
                ..Options::default()
            };
            let report = evaluate(&source, &target, &options);
            let Some(map) = report.device_map.filter(|m| !m.is_empty()) else {
                continue;
            };
            // How often each UUID stands on the target: a pairing takes one device each time,
            // so no UUID can be handed out more often than that.
            let mut held: BTreeMap<&str, usize> = BTreeMap::new();
            for u in target.devices().into_iter().flatten().filter_map(|d| d.uuid.as_deref()) {
                *held.entry(u).or_default() += 1;
            }
            let pairs: Vec<&str> = map.split(',').collect();
            assert_eq!(pairs.len(), source.devices().map_or(0, <[Device]>::len), "{map}");
            for pair in pairs {
                let (_, dst) = pair.split_once('=').expect("a pair is src=dst");
                let left = held.get_mut(dst).expect("only target UUIDs are handed out");
                assert!(*left > 0, "{dst} handed out more often than the target holds it");
                *left -= 1;
            }
        }
    }
});

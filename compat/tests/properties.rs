#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Properties of the checks over generated manifests (bounded case counts: seconds, not minutes).
//!
//! Generated devices follow the manifest contract the way captures write it: a whole GPU has a
//! `GPU-` UUID and no MIG fields, a slice a `MIG-` UUID; any field may be absent.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{A100_80, H100, L4, table};
use miggate_compat::{
    Device, DeviceKind, GpuManifest, Host, MigProfile, MigStrategy, Mode, Nvidia, Options, Outcome, Pod,
    Quantity, Report, VersionText, evaluate,
};
use proptest::prelude::*;
use proptest::sample::select;

/// Cases per property; `PROPTEST_CASES` raises it for a longer hunt.
const CASES: u32 = 256;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(CASES),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Generators

const MODELS: [&str; 3] = [H100, A100_80, L4];
const PROFILES: [&str; 6] = [
    "1g.10gb",
    "1g.10gb+me",
    "3g.40gb",
    "2g.20gb",
    "1c.3g.40gb",
    "2c.3g.40gb",
];
const PARENTS: [&str; 3] = ["GPU-p0", "GPU-p1", "GPU-p2"];

/// A device without its UUID (assigned later, so UUIDs are unique per manifest).
#[derive(Debug, Clone)]
struct Proto {
    slice: bool,
    model: Option<&'static str>,
    profile: Option<&'static str>,
    parent: Option<&'static str>,
    gi: Option<u32>,
    ci: Option<u32>,
    has_uuid: bool,
}

fn proto() -> impl Strategy<Value = Proto> {
    (
        any::<bool>(),
        proptest::option::weighted(0.9, select(&MODELS[..])),
        proptest::option::weighted(0.85, select(&PROFILES[..])),
        proptest::option::weighted(0.8, select(&PARENTS[..])),
        proptest::option::weighted(0.8, 1u32..4),
        proptest::option::weighted(0.8, 0u32..2),
        proptest::bool::weighted(0.95),
    )
        .prop_map(|(slice, model, profile, parent, gi, ci, has_uuid)| Proto {
            slice,
            model,
            profile,
            parent,
            gi,
            ci,
            has_uuid,
        })
}

fn device(p: &Proto, uuid: &str) -> Device {
    let whole = !p.slice;
    Device {
        unknown: Default::default(),
        uuid: p.has_uuid.then(|| uuid.parse().unwrap()),
        parent_uuid: if whole {
            None
        } else {
            p.parent.map(|x| x.parse().unwrap())
        },
        product_name: p.model.map(String::from),
        mig_profile: if whole {
            None
        } else {
            p.profile.map(|x| x.parse().unwrap())
        },
        gpu_instance_id: if whole { None } else { p.gi },
        compute_instance_id: if whole { None } else { p.ci },
        memory_mib: None,
    }
}

/// Turns protos into devices with UUIDs unique within the manifest (`tag` keeps the two sides'
/// UUIDs apart where wanted).
fn devices(protos: &[Proto], tag: &str) -> Vec<Device> {
    protos
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let uuid = if p.slice {
                format!("MIG-{tag}{i}")
            } else {
                format!("GPU-{tag}{i}")
            };
            device(p, &uuid)
        })
        .collect()
}

#[derive(Debug, Clone)]
struct Facts {
    arch: Option<&'static str>,
    kernel: Option<&'static str>,
    driver: Option<&'static str>,
    strategy: Option<MigStrategy>,
    pod: Option<PodFacts>,
    devices: Option<Vec<Proto>>,
}

#[derive(Debug, Clone)]
struct PodFacts {
    digest: Option<&'static str>,
    cpu: Option<&'static str>,
    mem: Option<&'static str>,
    mounts: Option<Vec<&'static str>>,
    /// None: no gpuRequests; Some(true): requests derived from the devices; Some(false): `{}`.
    requests: Option<bool>,
    claims: Option<bool>,
}

const DIGESTS: [&str; 2] = [
    "sha256:1111111111111111111111111111111111111111111111111111111111111111",
    "sha256:2222222222222222222222222222222222222222222222222222222222222222",
];

fn pod_facts() -> impl Strategy<Value = PodFacts> {
    (
        proptest::option::of(select(&DIGESTS[..])),
        proptest::option::of(select(&["4", "8", "4000m", "500m"][..])),
        proptest::option::of(select(&["32Gi", "64Gi", "34359738368"][..])),
        proptest::option::of(proptest::sample::subsequence(
            vec!["/model-cache", "/data", "/dev/shm", "/"],
            0..=4,
        )),
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(|(digest, cpu, mem, mounts, requests, claims)| PodFacts {
            digest,
            cpu,
            mem,
            mounts,
            requests,
            claims,
        })
}

fn facts(meets_minimums: bool) -> impl Strategy<Value = Facts> {
    let kernels: &'static [&'static str] = if meets_minimums {
        &["5.13.0-52-generic", "5.15.0-1071-aws", "6.8.0-45-generic"]
    } else {
        &[
            "5.15.0-1071-aws",
            "6.8.0-45-generic",
            "5.4.0-150-generic",
            "custom-build",
        ]
    };
    let drivers: &'static [&'static str] = if meets_minimums {
        &["580.82.07", "585.10.01"]
    } else {
        &["580.82.07", "580.65.06", "560.35.03"]
    };
    (
        proptest::option::of(select(&["amd64", "arm64"][..])),
        proptest::option::of(select(kernels)),
        proptest::option::of(select(drivers)),
        proptest::option::of(select(
            &[MigStrategy::None, MigStrategy::Single, MigStrategy::Mixed][..],
        )),
        proptest::option::of(pod_facts()),
        proptest::option::weighted(0.9, proptest::collection::vec(proto(), 0..6)),
    )
        .prop_map(|(arch, kernel, driver, strategy, pod, devices)| Facts {
            arch,
            kernel,
            driver,
            strategy,
            pod,
            devices,
        })
}

/// The device-plugin requests that would give these devices, when there are such.
fn derived_requests(devs: &[Device]) -> BTreeMap<String, Quantity> {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for d in devs {
        let name = match (d.kind(), &d.mig_profile) {
            (DeviceKind::Whole, _) => "nvidia.com/gpu".to_string(),
            (DeviceKind::Slice, Some(p)) => match p.device_plugin_resource() {
                Some(r) => r,
                None => continue,
            },
            _ => continue,
        };
        *counts.entry(name).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(k, v)| (k, Quantity::new(v.to_string())))
        .collect()
}

fn manifest(f: &Facts, tag: &str) -> GpuManifest {
    let devs = f.devices.as_ref().map(|p| devices(p, tag));
    let mut m = GpuManifest::new();
    if f.arch.is_some() || f.kernel.is_some() {
        m.host = Some(Host {
            unknown: Default::default(),
            node_name: None,
            kernel_version: f.kernel.map(VersionText::new),
            cpu_arch: f.arch.map(String::from),
        });
    }
    if let Some(p) = &f.pod {
        let requests = match (p.requests, &devs) {
            (Some(true), Some(d)) => Some(derived_requests(d)),
            (Some(_), _) => Some(BTreeMap::new()),
            (None, _) => None,
        };
        // A pod whose GPUs come through claims does not also ask the device plugin for some.
        let claims = p.claims.map(|c| {
            if c && requests.as_ref().is_none_or(BTreeMap::is_empty) {
                vec!["gpu".to_string()]
            } else {
                vec![]
            }
        });
        m.pod = Some(Pod {
            unknown: Default::default(),
            image: None,
            image_digest: p.digest.map(String::from),
            cpu_limit: p.cpu.map(Quantity::new),
            memory_limit: p.mem.map(Quantity::new),
            mounts: p
                .mounts
                .as_ref()
                .map(|v| v.iter().map(|s| s.to_string()).collect()),
            gpu_requests: requests,
            resource_claims: claims,
        });
    }
    if f.driver.is_some() || f.strategy.is_some() || devs.is_some() {
        m.nvidia = Some(Nvidia {
            unknown: Default::default(),
            driver_version: f.driver.map(VersionText::new),
            cuda_driver_version: None,
            mig_strategy: f.strategy,
            gpus: None,
            devices: devs,
            uncounted: Vec::new(),
        });
    }
    m
}

/// A source and a target: either independent, or the target made from the source (other
/// UUIDs, maybe no pod) so that compatible pairs are common.
fn pair() -> impl Strategy<Value = (GpuManifest, GpuManifest)> {
    (facts(false), facts(false), 0u8..4).prop_map(|(s, t, how)| {
        let source = manifest(&s, "s");
        let target = match how {
            0 => manifest(&t, "t"),
            1 => manifest(&s, "t"),
            2 => manifest(&s, "s"),
            _ => {
                let mut x = manifest(&s, "t");
                x.pod = None;
                x
            }
        };
        (source, target)
    })
}

fn modes() -> impl Strategy<Value = Options> {
    select(&[Mode::Exact, Mode::Offer][..]).prop_map(|mode| Options {
        mode,
        ..Options::default()
    })
}

/// A permutation of `0..n` from sort keys.
fn permute<T: Clone>(v: &[T], keys: &[u32]) -> Vec<T> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by_key(|&i| (keys.get(i).copied().unwrap_or(0), i));
    idx.into_iter().map(|i| v[i].clone()).collect()
}

fn reorder(m: &GpuManifest, keys: &[u32]) -> GpuManifest {
    let mut m = m.clone();
    if let Some(d) = m.nvidia.as_mut().and_then(|n| n.devices.as_mut()) {
        *d = permute(d, keys);
    }
    m
}

fn rows(r: &Report) -> Vec<(Outcome, String, String)> {
    r.results
        .iter()
        .map(|c| (c.outcome, c.source.to_string(), c.target.to_string()))
        .collect()
}

/// Every way of removing one field (or block) from a manifest, named for failure messages.
fn removals(m: &GpuManifest) -> Vec<(String, GpuManifest)> {
    let mut out = Vec::new();
    let mut push = |name: String, f: &dyn Fn(&mut GpuManifest)| {
        let mut x = m.clone();
        f(&mut x);
        if &x != m {
            out.push((name, x));
        }
    };
    push("host".into(), &|x| x.host = None);
    push("host.kernelVersion".into(), &|x| {
        if let Some(h) = x.host.as_mut() {
            h.kernel_version = None
        }
    });
    push("host.cpuArch".into(), &|x| {
        if let Some(h) = x.host.as_mut() {
            h.cpu_arch = None
        }
    });
    push("pod".into(), &|x| x.pod = None);
    type PodField = (&'static str, fn(&mut Pod));
    let pod_fields: [PodField; 6] = [
        ("pod.imageDigest", |p| p.image_digest = None),
        ("pod.cpuLimit", |p| p.cpu_limit = None),
        ("pod.memoryLimit", |p| p.memory_limit = None),
        ("pod.mounts", |p| p.mounts = None),
        ("pod.gpuRequests", |p| p.gpu_requests = None),
        ("pod.resourceClaims", |p| p.resource_claims = None),
    ];
    for (name, f) in pod_fields {
        push(name.into(), &|x| {
            if let Some(p) = x.pod.as_mut() {
                f(p)
            }
        });
    }
    push("nvidia".into(), &|x| x.nvidia = None);
    type NvField = (&'static str, fn(&mut Nvidia));
    let nv_fields: [NvField; 3] = [
        ("nvidia.driverVersion", |n| n.driver_version = None),
        ("nvidia.migStrategy", |n| n.mig_strategy = None),
        ("nvidia.devices", |n| n.devices = None),
    ];
    for (name, f) in nv_fields {
        push(name.into(), &|x| {
            if let Some(n) = x.nvidia.as_mut() {
                f(n)
            }
        });
    }
    let n = m.devices().map_or(0, <[Device]>::len);
    type DevField = (&'static str, fn(&mut Device));
    let dev_fields: [DevField; 6] = [
        ("uuid", |d| d.uuid = None),
        ("parentUuid", |d| d.parent_uuid = None),
        ("productName", |d| d.product_name = None),
        ("migProfile", |d| d.mig_profile = None),
        ("gpuInstanceId", |d| d.gpu_instance_id = None),
        ("computeInstanceId", |d| d.compute_instance_id = None),
    ];
    for i in 0..n {
        for (name, f) in dev_fields {
            push(format!("nvidia.devices[{i}].{name}"), &|x| {
                if let Some(d) = x.nvidia.as_mut().and_then(|n| n.devices.as_mut()) {
                    f(&mut d[i])
                }
            });
        }
    }
    out
}

/// `src=dst,…` → pairs of UUIDs.
fn parse_map(map: &str) -> Vec<(String, String)> {
    map.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (a, b) = p.split_once('=').unwrap();
            (a.to_string(), b.to_string())
        })
        .collect()
}

fn find<'a>(m: &'a GpuManifest, uuid: &str) -> &'a Device {
    m.devices()
        .unwrap()
        .iter()
        .find(|d| d.uuid.as_deref() == Some(uuid))
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// Properties

proptest! {
    #![proptest_config(config())]

    /// Device order is visible order, not a fact the checks compare.
    #[test]
    fn reordering_devices_changes_no_outcome(
        (source, target) in pair(),
        o in modes(),
        ks in proptest::collection::vec(any::<u32>(), 6),
        kt in proptest::collection::vec(any::<u32>(), 6),
    ) {
        let base = evaluate(&source, &target, &o);
        let moved = evaluate(&reorder(&source, &ks), &reorder(&target, &kt), &o);
        prop_assert_eq!(base.compatible, moved.compatible, "\n{}\n---\n{}", table(&base), table(&moved));
        prop_assert_eq!(rows(&base), rows(&moved), "\n{}\n---\n{}", table(&base), table(&moved));
        prop_assert_eq!(&base.reason, &moved.reason);
        // Which of several interchangeable devices comes first never decides whether there is
        // a map.
        prop_assert_eq!(
            base.device_map.is_some(),
            moved.device_map.is_some(),
            "\n{}\n---\n{}",
            table(&base),
            table(&moved)
        );
    }

    /// A manifest that meets the minimums and has mappable UUIDs restores onto itself.
    #[test]
    fn a_manifest_passes_against_itself(f in facts(true)) {
        let mut f = f;
        f.devices.get_or_insert_with(Vec::new);
        // Requests that match the devices: derived from them, under the mixed strategy, and no
        // compute-instance slice (which the device plugin cannot give; gpu-request refuses it).
        if let Some(p) = f.pod.as_mut() {
            p.requests = p.requests.map(|_| true);
            if p.requests.is_some() {
                f.strategy = Some(MigStrategy::Mixed);
            }
        }
        for p in f.devices.iter_mut().flatten() {
            p.has_uuid = true;
            if p.profile.is_some_and(|x| x.contains("c.")) && f.pod.as_ref().is_some_and(|p| p.requests.is_some()) {
                p.profile = Some("3g.40gb");
            }
        }
        let m = manifest(&f, "x");
        for mode in [Mode::Exact, Mode::Offer] {
            let o = Options { mode, ..Options::default() };
            let r = evaluate(&m, &m, &o);
            prop_assert!(r.compatible, "{}", table(&r));
            prop_assert!(r.results.iter().all(|c| c.outcome != Outcome::Refuse));
            prop_assert_eq!(r.device_map.as_deref(), Some(""), "{}", table(&r));
        }
    }

    /// An absent fact is unknown and admits: removing any one field from either side never turns
    /// a compatible verdict into a refusal (outside strict mode).
    #[test]
    fn removing_a_field_never_refuses((source, target) in pair(), o in modes()) {
        let base = evaluate(&source, &target, &o);
        if base.compatible {
            for (name, s) in removals(&source) {
                let r = evaluate(&s, &target, &o);
                prop_assert!(r.compatible, "removing source {} refused: {}\n{}", name, r.reason, table(&r));
            }
            for (name, t) in removals(&target) {
                let r = evaluate(&source, &t, &o);
                prop_assert!(r.compatible, "removing target {} refused: {}\n{}", name, r.reason, table(&r));
            }
        }
    }

    /// The device map pairs only devices of one class: same kind, and model and profile equal
    /// wherever both sides record them; every source device once, every target device at most once.
    #[test]
    fn the_device_map_pairs_within_a_class((source, target) in pair(), o in modes()) {
        let r = evaluate(&source, &target, &o);
        if let Some(map) = r.device_map.as_deref() {
            prop_assert!(r.compatible);
            let pairs = parse_map(map);
            let src = source.devices().unwrap();
            if !map.is_empty() {
                prop_assert_eq!(pairs.len(), src.len());
            }
            let used: BTreeSet<&str> = pairs.iter().map(|(_, t)| t.as_str()).collect();
            prop_assert_eq!(used.len(), pairs.len(), "a target device used twice: {}", map);
            for (s, t) in &pairs {
                prop_assert!(!s.starts_with("MIG-GPU-") && !t.starts_with("MIG-GPU-"));
                let (a, b) = (find(&source, s), find(&target, t));
                prop_assert_eq!(a.kind(), b.kind(), "{}", map);
                if let (Some(x), Some(y)) = (a.model(), b.model()) {
                    prop_assert_eq!(x, y, "{}", map);
                }
                if let (Some(x), Some(y)) = (&a.mig_profile, &b.mig_profile) {
                    prop_assert_eq!(x, y, "{}", map);
                }
            }
        }
    }

    /// A node offering more devices can still offer a matching set: more GPUs, and more compute
    /// instances in a GPU instance it already has.
    #[test]
    fn offer_mode_is_monotone(
        (source, target) in pair(),
        extra in proptest::collection::vec(proto(), 1..4),
        joins in proptest::collection::vec(proptest::option::weighted(0.6, any::<usize>()), 4),
        at in proptest::collection::vec(any::<u32>(), 10),
    ) {
        let o = Options { mode: Mode::Offer, ..Options::default() };
        if target.devices().is_none() {
            // Adding devices to an unrecorded list would make it known, not bigger.
            return Ok(());
        }
        let base = evaluate(&source, &target, &o);
        if base.compatible {
            let mut bigger = target.clone();
            let devs = bigger.nvidia.as_mut().unwrap().devices.as_mut().unwrap();
            // The target's compute instances with a known GPU instance: an added compute
            // instance may join one of those GPU instances.
            let instances: Vec<Device> = devs
                .iter()
                .filter(|d| d.mig_profile.as_ref().is_some_and(|p| p.is_compute_instance()))
                .filter(|d| d.gpu_instance().is_some())
                .cloned()
                .collect();
            for (i, p) in extra.iter().enumerate() {
                let mut d = device(p, &format!("{}-added{i}", if p.slice { "MIG" } else { "GPU" }));
                match joins[i] {
                    Some(k) if p.slice && !instances.is_empty() => {
                        // Another compute instance in an existing GPU instance: same parent, GPU
                        // instance and model, and a compute-instance profile of that GPU
                        // instance's profile (as a real GPU instance would have).
                        let member = &instances[k % instances.len()];
                        let (parent, gi) = member.gpu_instance().unwrap();
                        let gi_profile = member.mig_profile.as_ref().unwrap().gpu_instance_profile();
                        let fits: Vec<MigProfile> = PROFILES
                            .iter()
                            .map(|x| x.parse::<MigProfile>().unwrap())
                            .filter(|x| x.is_compute_instance() && x.gpu_instance_profile() == gi_profile)
                            .collect();
                        d.mig_profile = Some(fits[(k / instances.len()) % fits.len()].clone());
                        d.parent_uuid = Some(parent.parse().unwrap());
                        d.gpu_instance_id = Some(gi);
                        d.product_name = member.product_name.clone();
                    }
                    // A fresh GPU: new UUIDs and parents, so the slice joins no GPU instance.
                    _ => {
                        if d.parent_uuid.is_some() {
                            d.parent_uuid = Some(format!("GPU-added{i}").parse().unwrap());
                        }
                    }
                }
                devs.push(d);
            }
            let bigger = reorder(&bigger, &at);
            let r = evaluate(&source, &bigger, &o);
            prop_assert!(r.compatible, "adding devices refused: {}\n{}\n---\n{}", r.reason, table(&base), table(&r));
        }
    }
}

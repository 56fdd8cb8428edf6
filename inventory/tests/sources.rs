//! Node inventories from three sources: the same node described by its `GpuNode`, by the DRA
//! driver's `ResourceSlice`s (two releases' attribute names) and by GFD labels gives the same
//! admission verdicts (compat, offer mode) wherever the source can tell, and *unknown*, never a
//! refusal, where it cannot. Fixtures: `testdata/inventory/` (provenance in its README).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use miggate_compat::{CheckName, Gpu, GpuManifest, Mode, Options, Outcome, Report, Target, evaluate_target};
use miggate_crds::GpuNode;
use miggate_crds::inventory::{self, Inventory, Source};
use rstest::rstest;
use serde::Deserialize;
use support::testdata;

mod support;

fn fixture(file: &str) -> String {
    testdata(&format!("inventory/{file}"))
}

#[derive(Deserialize)]
struct List<T> {
    items: Vec<T>,
}

fn gpu_node() -> GpuNode {
    serde_saphyr::from_str(&fixture("gpunode-gpu-node-7.yaml")).unwrap()
}
fn node(file: &str) -> Node {
    serde_saphyr::from_str(&fixture(file)).unwrap()
}
fn slices_v25_12() -> Vec<ResourceSlice> {
    vec![serde_saphyr::from_str(&fixture("dra-v25.12-gpu-node-7.yaml")).unwrap()]
}
fn slices_v25_3() -> Vec<ResourceSlice> {
    serde_saphyr::from_str::<List<ResourceSlice>>(&fixture("dra-v25.3-gpu-node-7.yaml"))
        .unwrap()
        .items
}
fn without_node_info(mut n: Node) -> Node {
    n.status.as_mut().unwrap().node_info = None;
    n
}

/// Each way the cluster can describe gpu-node-7.
#[derive(Debug, Clone, Copy)]
enum From {
    GpuNode,
    DraV25_12,
    DraV25_3,
    GfdMixed,
    GfdMixedNoNodeInfo,
}

fn read(from: From) -> Inventory {
    let inv = match from {
        From::GpuNode => inventory::best(&inventory::NodeObjects {
            gpu_node: Some(&gpu_node()),
            node: None,
            slices: &[],
        }),
        From::DraV25_12 => {
            let slices = slices_v25_12();
            let refs: Vec<&ResourceSlice> = slices.iter().collect();
            inventory::best(&inventory::NodeObjects {
                gpu_node: None,
                node: Some(&node("node-gpu-node-7.yaml")),
                slices: &refs,
            })
        }
        From::DraV25_3 => {
            let slices = slices_v25_3();
            let refs: Vec<&ResourceSlice> = slices.iter().collect();
            inventory::best(&inventory::NodeObjects {
                gpu_node: None,
                node: Some(&node("node-gpu-node-7.yaml")),
                slices: &refs,
            })
        }
        From::GfdMixed => inventory::best(&inventory::NodeObjects {
            gpu_node: None,
            node: Some(&node("gfd-mixed-gpu-node-7.yaml")),
            slices: &[],
        }),
        From::GfdMixedNoNodeInfo => inventory::best(&inventory::NodeObjects {
            node: Some(&without_node_info(node("gfd-mixed-gpu-node-7.yaml"))),
            ..Default::default()
        }),
    };
    inv.unwrap_or_else(|| panic!("{from:?} gives no inventory"))
}

const KERNEL: &str = "5.15.0-1071-aws";

fn checkpoint(kernel: &str, driver: &str, gpus: Vec<miggate_compat::GpuBuilder>) -> GpuManifest {
    let mut b = GpuManifest::builder()
        .kernel(kernel)
        .cpu_arch("amd64")
        .driver(driver);
    for g in gpus {
        b = b.gpu(g);
    }
    b.build().unwrap()
}

/// Checkpoints taken elsewhere, to be judged against gpu-node-7.
#[derive(Debug, Clone, Copy)]
enum Ckpt {
    /// Two 3g.40gb slices: fits (the node has exactly two).
    Two3g,
    /// One 3g.40gb slice: fits.
    One3g,
    /// Three 3g.40gb slices: the node has two.
    Three3g,
    /// One whole H100: fits (GPU 1).
    WholeH100,
    /// Two 3g.40gb on another kernel.
    OtherKernel,
    /// Two 3g.40gb on another driver.
    OtherDriver,
    /// Two A100 1g.5gb slices: another model and shape.
    A100Slices,
}

fn ckpt(c: Ckpt) -> GpuManifest {
    match c {
        Ckpt::Two3g => checkpoint(KERNEL, "580.82.07", vec![Gpu::h100().cut(["3g.40gb", "3g.40gb"])]),
        Ckpt::One3g => checkpoint(KERNEL, "580.82.07", vec![Gpu::h100().cut(["3g.40gb"])]),
        Ckpt::Three3g => checkpoint(
            KERNEL,
            "580.82.07",
            vec![
                Gpu::h100().cut(["3g.40gb", "3g.40gb"]),
                Gpu::h100().cut(["3g.40gb"]),
            ],
        ),
        Ckpt::WholeH100 => checkpoint(KERNEL, "580.82.07", vec![Gpu::h100()]),
        Ckpt::OtherKernel => checkpoint(
            "6.8.0-1015-nvidia",
            "580.82.07",
            vec![Gpu::h100().cut(["3g.40gb", "3g.40gb"])],
        ),
        Ckpt::OtherDriver => checkpoint(KERNEL, "580.65.06", vec![Gpu::h100().cut(["3g.40gb", "3g.40gb"])]),
        Ckpt::A100Slices => checkpoint(
            KERNEL,
            "580.82.07",
            vec![Gpu::a100_40gb().cut(["1g.5gb", "1g.5gb"])],
        ),
    }
}

fn judge(c: Ckpt, inv: &Inventory) -> Report {
    evaluate_target(&ckpt(c), inv.target(), &Options::mode(Mode::Offer))
}

/// A verdict as admission acts on it: admitted or not, and which checks refused.
fn verdict(r: &Report) -> (bool, Vec<&'static str>) {
    (r.compatible, r.refusals().map(|x| x.check.as_str()).collect())
}

fn unknowns(r: &Report) -> Vec<&'static str> {
    r.results
        .iter()
        .filter(|x| x.outcome == Outcome::Unknown)
        .map(|x| x.check.as_str())
        .collect()
}

/// What a source should give compared with the node's `GpuNode`.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// The same verdict (admitted or refused, by the same checks).
    Same,
    /// The GpuNode refuses with these checks; this source cannot tell them, so it admits with
    /// each of them unknown (a warning), and refuses nothing else.
    UnknownNotRefuse(&'static [&'static str]),
}

#[rstest]
fn the_same_node_gives_the_same_verdict_from_every_source(
    #[values(
        Ckpt::Two3g,
        Ckpt::One3g,
        Ckpt::Three3g,
        Ckpt::WholeH100,
        Ckpt::OtherKernel,
        Ckpt::OtherDriver,
        Ckpt::A100Slices
    )]
    c: Ckpt,
    #[values(From::DraV25_12, From::DraV25_3, From::GfdMixed, From::GfdMixedNoNodeInfo)] from: From,
) {
    let reference = judge(c, &read(From::GpuNode));
    let inv = read(from);
    let report = judge(c, &inv);
    let expect = match (from, c) {
        // Labels have no kernel; without the kubelet's nodeInfo nobody has it.
        (From::GfdMixedNoNodeInfo, Ckpt::OtherKernel) => Expect::UnknownNotRefuse(&["kernel-version"]),
        // GFD's whole GPU has no UUID (a device of unknown kind), but its counts per profile
        // are exact: what it cannot tell never masks the shortfall the GpuNode refuses.
        _ => Expect::Same,
    };
    match expect {
        Expect::Same => assert_eq!(
            verdict(&report),
            verdict(&reference),
            "{c:?} from {from:?}\n{}\nGpuNode:\n{}",
            table(&report),
            table(&reference)
        ),
        Expect::UnknownNotRefuse(checks) => {
            // Never refuses more than the GpuNode; what it does not refuse of the GpuNode's
            // refusals is exactly `checks`, each unknown here.
            let (_, theirs) = verdict(&reference);
            let (_, ours) = verdict(&report);
            assert!(
                ours.iter().all(|c| theirs.contains(c)),
                "{ours:?} not within {theirs:?}"
            );
            let missing: Vec<&str> = theirs.iter().copied().filter(|c| !ours.contains(c)).collect();
            assert_eq!(
                missing,
                checks.to_vec(),
                "{c:?} from {from:?}\n{}",
                table(&report)
            );
            for check in checks {
                assert!(unknowns(&report).contains(check), "{check}\n{}", table(&report));
            }
            assert_eq!(report.compatible, ours.is_empty());
        }
    }
}

fn table(r: &Report) -> String {
    r.results
        .iter()
        .map(|x| {
            format!(
                "{:18} {:15?} {} | {}",
                x.check.as_str(),
                x.outcome,
                x.source,
                x.target
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Where a source cannot tell, the checks that need it answer unknown and the verdict admits:
/// GFD has no UUIDs (so no device map), and no kernel without the kubelet's nodeInfo.
#[rstest]
#[case::gfd_has_no_uuids_so_no_device_map(From::GfdMixed, Ckpt::Two3g)]
#[case::gfd_without_node_info_has_no_kernel(From::GfdMixedNoNodeInfo, Ckpt::Two3g)]
fn what_gfd_cannot_tell_is_unknown_not_refused(#[case] from: From, #[case] c: Ckpt) {
    let inv = read(from);
    let report = judge(c, &inv);
    assert!(report.compatible, "{}", table(&report));
    let devices = inv.manifest.devices().unwrap();
    assert!(devices.iter().all(|d| d.uuid.is_none()), "GFD invents no UUID");
    assert!(devices.iter().all(|d| d.parent_uuid.is_none()));
    if matches!(from, From::GfdMixedNoNodeInfo) {
        assert_eq!(inv.manifest.host.as_ref().unwrap().kernel_version, None);
        let kernel = report.result(CheckName::KERNEL_VERSION).unwrap();
        assert_eq!(kernel.outcome, Outcome::Unknown);
        assert!(
            inv.notes
                .iter()
                .any(|n| matches!(n, inventory::Note::NoKernel(_))),
            "{:?}",
            inv.notes
        );
    }
    // The device plugin's own reference knows the UUIDs; GFD's inventory cannot pair devices.
    let reference = judge(c, &read(From::GpuNode));
    assert!(reference.device_map.is_some());
}

#[rstest]
#[case::gpu_node(From::GpuNode, Source::GpuNode, "GpuNode")]
#[case::dra_v25_12(From::DraV25_12, Source::ResourceSlice, "ResourceSlice")]
#[case::dra_v25_3(From::DraV25_3, Source::ResourceSlice, "ResourceSlice")]
#[case::gfd(From::GfdMixed, Source::GfdLabels, "GFD labels")]
fn every_inventory_names_its_source(#[case] from: From, #[case] source: Source, #[case] text: &str) {
    let inv = read(from);
    assert_eq!(inv.source, source);
    assert_eq!(inv.source.as_str(), text);
    assert!(inv.manifest.pod.is_none(), "a node inventory has no pod");
}

#[test]
fn both_dra_releases_read_the_same_devices() {
    let a = read(From::DraV25_12).manifest;
    let b = read(From::DraV25_3).manifest;
    assert_eq!(a.devices(), b.devices());
    let gpus = |m: &GpuManifest| m.nvidia.clone().unwrap().gpus.unwrap();
    // v25.3 also had indices; the rest is equal.
    let mut b_gpus = gpus(&b);
    assert_eq!(
        b_gpus.iter().map(|g| g.index).collect::<Vec<_>>(),
        [None, Some(1)]
    );
    for g in &mut b_gpus {
        g.index = None;
    }
    assert_eq!(gpus(&a), b_gpus);
}

#[test]
fn a_better_source_present_but_unreadable_falls_back_with_a_note() {
    // A GpuNode holding another node's inventory, a DRA pool caught mid-update, then GFD.
    let mut wrong = gpu_node();
    wrong.spec.manifest.host.as_mut().unwrap().node_name = Some("gpu-node-1".into());
    let mut slices = slices_v25_3();
    slices.remove(1); // one of the two slices at generation 3
    let refs: Vec<&ResourceSlice> = slices.iter().collect();
    let n = node("gfd-mixed-gpu-node-7.yaml");
    let inv = inventory::best(&inventory::NodeObjects {
        gpu_node: Some(&wrong),
        node: Some(&n),
        slices: &refs,
    })
    .unwrap();
    assert_eq!(inv.source, Source::GfdLabels);
    insta::assert_yaml_snapshot!("fallback_notes", inv.notes);

    // MIG counts with no mig-manager state (MIG made by hand): read as GFD counted them,
    // with a note, not refused as unreadable (absence of mig-manager is not a change in flux).
    let mut by_hand = node("gfd-mixed-gpu-node-7.yaml");
    by_hand
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .remove("nvidia.com/mig.config.state");
    let read = inventory::best(&inventory::NodeObjects {
        gpu_node: None,
        node: Some(&by_hand),
        slices: &[],
    })
    .unwrap();
    assert_eq!(read.source, Source::GfdLabels);
    assert!(read.slices_listed);
    assert!(
        read.notes.contains(&inventory::Note::NoMigManager),
        "{:?}",
        read.notes
    );
    // GFD labels that cannot be trusted (the single strategy's INVALID product): unreadable,
    // and why, with the refused GpuNode first: "no inventory" alone would send the operator
    // looking for a GpuNode that exists.
    let unsettled = with_labels(
        node("gfd-mixed-gpu-node-7.yaml"),
        &[("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3-MIG-INVALID")],
    );
    assert_eq!(
        inventory::best(&inventory::NodeObjects {
            gpu_node: None,
            node: Some(&unsettled),
            slices: &[]
        }),
        None
    );
    let why = inventory::best_or_why(&inventory::NodeObjects {
        gpu_node: Some(&wrong),
        node: Some(&unsettled),
        slices: &[],
    })
    .unwrap_err();
    assert_eq!(why.passed_over.len(), 2, "{why:?}");
    assert!(why.passed_over[0].to_string().starts_with("GpuNode inventory of node `gpu-node-7` cannot be read: GpuNode gpu-node-7 holds the inventory of node gpu-node-1"), "{why:?}");
    assert!(
        why.passed_over[1]
            .to_string()
            .starts_with("GFD labels inventory of node `gpu-node-7` cannot be read"),
        "{why:?}"
    );
    assert_eq!(
        inventory::best_or_why(&inventory::NodeObjects {
            gpu_node: None,
            node: None,
            slices: &[]
        }),
        Err(inventory::NoInventory::default())
    );
    // A fallback keeps the reasons apart from the notes, for a refusal message.
    let inv = inventory::best(&inventory::NodeObjects {
        gpu_node: Some(&wrong),
        node: Some(&n),
        slices: &refs,
    })
    .unwrap();
    assert_eq!(inv.passed_over.len(), 2);
    let err = inventory::from_gfd_labels(&unsettled).unwrap_err();
    assert_eq!(
        err.to_string(),
        "GFD labels inventory of node `gpu-node-7` cannot be read: nvidia.com/gpu.product ends in -MIG-INVALID: the node breaks the single strategy's rules"
    );
}

#[test]
fn no_source_gives_no_inventory() {
    assert_eq!(
        inventory::best(&inventory::NodeObjects {
            gpu_node: None,
            node: None,
            slices: &[]
        }),
        None
    );
    let plain = without_node_info(node("node-gpu-node-7.yaml"));
    assert_eq!(
        inventory::best(&inventory::NodeObjects {
            gpu_node: None,
            node: Some(&plain),
            slices: &[]
        }),
        None
    );
    // The NVIDIA driver's slices of another node, and another driver's slices, are not this node's.
    let slices = slices_v25_3();
    let foreign: Vec<&ResourceSlice> = slices[3..].iter().collect();
    assert_eq!(
        inventory::from_resource_slices("gpu-node-7", None, &foreign).unwrap(),
        None
    );
}

#[rstest]
#[case::dynamic_mig_counters("sharedCounters")]
#[case::wrong_attribute_type("uuid-int")]
#[case::bad_uuid("uuid-text")]
#[case::bad_profile("profile")]
#[case::two_drivers("driver")]
#[case::no_type("no-type")]
fn malformed_slices_are_errors_not_panics(#[case] how: &str) {
    let mut slices = slices_v25_12();
    let spec = &mut slices[0].spec;
    let device = &mut spec.devices.as_mut().unwrap()[0];
    let attrs = device.attributes.as_mut().unwrap();
    let attr = |s: &str| k8s_openapi::api::resource::v1::DeviceAttribute {
        string: Some(s.into()),
        ..Default::default()
    };
    match how {
        "sharedCounters" => {
            // DynamicMIG, with a device consuming from a counter set nobody declares.
            spec.shared_counters = Some(vec![k8s_openapi::api::resource::v1::CounterSet {
                name: "gpu-0-counter-set".into(),
                counters: Default::default(),
            }]);
            device.consumes_counters = Some(vec![k8s_openapi::api::resource::v1::DeviceCounterConsumption {
                counter_set: "gpu-9-counter-set".into(),
                counters: Default::default(),
            }]);
        }
        "uuid-int" => {
            attrs.insert(
                "uuid".into(),
                k8s_openapi::api::resource::v1::DeviceAttribute {
                    int: Some(7),
                    ..Default::default()
                },
            );
        }
        "uuid-text" => {
            attrs.insert("uuid".into(), attr("MIG-x,GPU-y=z"));
        }
        "profile" => {
            attrs.insert("profile".into(), attr("3 g"));
        }
        "driver" => {
            attrs.insert(
                "driverVersion".into(),
                k8s_openapi::api::resource::v1::DeviceAttribute {
                    version: Some("570.124.6".into()),
                    ..Default::default()
                },
            );
        }
        "no-type" => {
            attrs.remove("type");
        }
        _ => unreachable!(),
    }
    let refs: Vec<&ResourceSlice> = slices.iter().collect();
    let err = inventory::from_resource_slices("gpu-node-7", None, &refs).unwrap_err();
    insta::assert_snapshot!(format!("malformed_{how}"), err.to_string());
}

#[test]
fn too_many_devices_are_refused_not_read() {
    let mut slices = slices_v25_12();
    let first = slices[0].spec.devices.as_ref().unwrap()[2].clone();
    slices[0].spec.devices = Some(vec![first; inventory::MAX_DEVICES + 1]);
    let refs: Vec<&ResourceSlice> = slices.iter().collect();
    let err = inventory::from_resource_slices("gpu-node-7", None, &refs).unwrap_err();
    assert!(err.to_string().contains("more than 1024 devices"), "{err}");
}

#[test]
fn single_strategy_labels_give_slices_of_the_one_profile() {
    let inv = inventory::from_gfd_labels(&node("gfd-single-gpu-node-5.yaml"))
        .unwrap()
        .unwrap();
    insta::assert_yaml_snapshot!("gfd_single", (&*inv.manifest, &inv.notes));
    let devices = inv.manifest.devices().unwrap();
    assert_eq!(devices.len(), 7);
    assert!(
        devices
            .iter()
            .all(|d| d.mig_profile.as_ref().unwrap().as_str() == "1g.10gb")
    );
    assert!(
        devices
            .iter()
            .all(|d| d.product_name.as_deref() == Some("NVIDIA H100 80GB HBM3"))
    );
}

#[rstest]
#[case::gpu_node(From::GpuNode)]
#[case::dra_v25_12(From::DraV25_12)]
#[case::dra_v25_3(From::DraV25_3)]
#[case::gfd_mixed(From::GfdMixed)]
#[case::gfd_mixed_no_node_info(From::GfdMixedNoNodeInfo)]
fn inventories(#[case] from: From) {
    let inv = read(from);
    insta::assert_yaml_snapshot!(
        format!("inventory_{from:?}"),
        (inv.source.as_str(), &*inv.manifest, &inv.notes)
    );
}

/// Hostile label values: an absurd count, a negative one, text, an escape sequence. Each
/// makes the GFD source unreadable with a quoted, escaped reason; none panics or allocates
/// by the number it claims.
#[rstest]
#[case::huge_count(
    "nvidia.com/mig-3g.40gb.count",
    "99999999999999999999",
    "is not a device count"
)]
#[case::over_the_cap("nvidia.com/mig-3g.40gb.count", "1000000", "is not a device count")]
#[case::negative_count("nvidia.com/gpu.count", "-1", "is not a device count")]
#[case::text_count("nvidia.com/mig-3g.40gb.count", "seven", "is not a device count")]
#[case::escape_in_a_value(
    "nvidia.com/mig.strategy",
    "mixed\u{1b}]0;owned\u{7}",
    "\\u{1b}]0;owned\\u{7}"
)]
fn hostile_gfd_label_values_are_refused_with_an_escaped_reason(
    #[case] key: &str,
    #[case] value: &str,
    #[case] says: &str,
) {
    let mut n = node("gfd-mixed-gpu-node-7.yaml");
    n.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert(key.into(), value.into());
    let err = inventory::from_gfd_labels(&n).unwrap_err().to_string();
    assert!(err.contains(says), "{err}");
    assert!(!err.contains('\u{1b}'), "{err:?}");
    let why = inventory::best_or_why(&inventory::NodeObjects {
        gpu_node: None,
        node: Some(&n),
        slices: &[],
    })
    .unwrap_err();
    assert!(why.passed_over[0].to_string().contains(says), "{why:?}");
}

/// A device attribute carrying a terminal escape or a newline is refused, and the reason
/// quotes it escaped.
#[rstest]
#[case::escape("NVIDIA H100\u{1b}[2J")]
#[case::newline("NVIDIA H100\nInjected: line")]
#[case::bidi_override("NVIDIA H100\u{202e}MBH")]
fn hostile_slice_attribute_text_is_refused_escaped(#[case] value: &str) {
    let mut slices = slices_v25_12();
    let device = &mut slices[0].spec.devices.as_mut().unwrap()[0];
    device.attributes.as_mut().unwrap().insert(
        "productName".into(),
        k8s_openapi::api::resource::v1::DeviceAttribute {
            string: Some(value.into()),
            ..Default::default()
        },
    );
    let refs: Vec<&ResourceSlice> = slices.iter().collect();
    let err = inventory::from_resource_slices("gpu-node-7", None, &refs)
        .unwrap_err()
        .to_string();
    assert!(err.contains("`productName` is not a plausible value"), "{err}");
    assert!(!err.chars().any(miggate_compat::escape::is_hazard), "{err:?}");
}

// ---------------------------------------------------------------------------------------------
// What each source can and cannot tell.

/// A checkpoint on two 3g.40gb and one 1g.10gb slice.
fn two_3g_one_1g() -> GpuManifest {
    checkpoint(
        KERNEL,
        "580.82.07",
        vec![Gpu::h100().cut(["3g.40gb", "3g.40gb", "1g.10gb"])],
    )
}

fn with_labels(mut n: Node, labels: &[(&str, &str)]) -> Node {
    let map = n.metadata.labels.as_mut().unwrap();
    for (k, v) in labels {
        if v.is_empty() {
            map.remove(*k);
        } else {
            map.insert((*k).into(), (*v).into());
        }
    }
    n
}

/// Rule: an unknown in one part of an inventory never masks a shortfall certain in another.
/// GFD says exactly how many 1g.10gb slices the node has (none); that its GPUs have no UUID
/// (so whether each is whole is unknown) cannot make one appear. With the node's
/// `nvidia.com/gpu` capacity (whole GPUs known) and without it (an upper bound).
#[rstest]
#[case::whole_count_from_capacity(true)]
#[case::whole_count_unknown(false)]
fn a_gfd_count_of_zero_is_a_certain_shortfall(#[case] capacity: bool) {
    let mut n = with_labels(
        node("gfd-mixed-gpu-node-7.yaml"),
        &[("nvidia.com/mig-1g.10gb.count", "0")],
    );
    if !capacity {
        n.status
            .as_mut()
            .unwrap()
            .capacity
            .as_mut()
            .unwrap()
            .remove("nvidia.com/gpu");
    }
    let inv = inventory::best(&inventory::NodeObjects {
        gpu_node: None,
        node: Some(&n),
        slices: &[],
    })
    .unwrap();
    assert_eq!(inv.source, Source::GfdLabels);
    assert!(inv.slices_listed);
    let report = evaluate_target(&two_3g_one_1g(), inv.target(), &Options::mode(Mode::Offer));
    assert!(!report.compatible, "{}", table(&report));
    let profile = report.result(CheckName::MIG_PROFILE).unwrap();
    assert_eq!(profile.outcome, Outcome::Refuse, "{}", table(&report));
    assert_eq!(profile.source.to_string(), "1g.10gb x1, 3g.40gb x2");
    assert_eq!(profile.target.to_string(), "3g.40gb x2");
    assert!(
        report
            .reason
            .contains("mig-profile: source 1g.10gb x1, 3g.40gb x2, target 3g.40gb x2"),
        "{}",
        report.reason
    );
    // The whole-GPU checkpoint still fits what the labels may hold, as a warning.
    let whole = evaluate_target(&ckpt(Ckpt::WholeH100), inv.target(), &Options::mode(Mode::Offer));
    assert!(whole.compatible, "{}", table(&whole));
}

/// Rule: labels in flux never decide. mig-manager mid-way (or failed) makes every fact the
/// node's labels give unknown, so no checkpoint is refused from them, whatever the labels
/// say (MIG counts or, as in the refusal this replaced, only `gpu.count`), and the note
/// says the node is being reconfigured.
#[rstest]
fn labels_in_flux_never_refuse(
    #[values("pending", "rebooting", "failed")] state: &str,
    #[values(
        Ckpt::Two3g,
        Ckpt::Three3g,
        Ckpt::WholeH100,
        Ckpt::OtherKernel,
        Ckpt::OtherDriver,
        Ckpt::A100Slices
    )]
    c: Ckpt,
    #[values("mig-counts", "gpu-count-only", "with-gpu-node")] labels: &str,
) {
    let base = match labels {
        "mig-counts" => node("gfd-pending-gpu-node-7.yaml"),
        _ => with_labels(
            node("gfd-pending-gpu-node-7.yaml"),
            &[
                ("nvidia.com/mig-3g.40gb.count", ""),
                ("nvidia.com/gpu.count", "1"),
            ],
        ),
    };
    let n = with_labels(base, &[("nvidia.com/mig.config.state", state)]);
    let g = gpu_node();
    let inv = inventory::best(&inventory::NodeObjects {
        gpu_node: (labels == "with-gpu-node").then_some(&g),
        node: Some(&n),
        slices: &[],
    })
    .unwrap();
    for source in [ckpt(c), two_3g_one_1g()] {
        let report = evaluate_target(&source, inv.target(), &Options::mode(Mode::Offer));
        assert!(report.compatible, "{state} {c:?} {labels}\n{}", table(&report));
    }
    let said = if state == "failed" {
        "mig-manager did not apply its MIG layout"
    } else {
        "is being reconfigured"
    };
    assert!(
        matches!(&inv.notes[0], inventory::Note::Reconfiguring { state: s, .. } if s == state),
        "{:?}",
        inv.notes
    );
    let note = inv.notes[0].to_string();
    assert!(note.contains(said), "{note}");
    assert!(
        note.contains(&format!("nvidia.com/mig.config.state={state}")),
        "{note}"
    );
}

#[test]
fn labels_in_flux_wording() {
    let inv = inventory::best(&inventory::NodeObjects {
        gpu_node: None,
        node: Some(&node("gfd-pending-gpu-node-7.yaml")),
        slices: &[],
    })
    .unwrap();
    insta::assert_yaml_snapshot!("in_flux", (inv.source.as_str(), &*inv.manifest, &inv.notes));
}

/// Rule: the MIG strategy is a node fact the cluster publishes. A `GpuNode` without one (a
/// capture leaves it unknown) takes GFD's `nvidia.com/mig.strategy` label; one that carries
/// it (`miggate publish --mig-strategy`) keeps its own.
#[rstest]
#[case::published(
    Some(miggate_compat::MigStrategy::Single),
    None,
    Some(miggate_compat::MigStrategy::Single)
)]
#[case::published_wins_over_label(
    Some(miggate_compat::MigStrategy::Mixed),
    Some("single"),
    Some(miggate_compat::MigStrategy::Mixed)
)]
#[case::from_label(None, Some("mixed"), Some(miggate_compat::MigStrategy::Mixed))]
#[case::unknown(None, None, None)]
#[case::label_not_a_strategy(None, Some("bogus"), None)]
fn the_strategy_reaches_the_inventory(
    #[case] published: Option<miggate_compat::MigStrategy>,
    #[case] label: Option<&str>,
    #[case] want: Option<miggate_compat::MigStrategy>,
) {
    let mut g = gpu_node();
    g.spec.manifest.nvidia.as_mut().unwrap().mig_strategy = published;
    let n = with_labels(
        node("node-gpu-node-7.yaml"),
        &[("nvidia.com/mig.strategy", label.unwrap_or(""))],
    );
    let inv = inventory::best(&inventory::NodeObjects {
        gpu_node: Some(&g),
        node: Some(&n),
        slices: &[],
    })
    .unwrap();
    assert_eq!(inv.source, Source::GpuNode);
    assert_eq!(inv.manifest.nvidia.as_ref().unwrap().mig_strategy, want);
}

// ---------------------------------------------------------------------------------------------
// DynamicMIG: slices that list what a GPU *can* supply.

fn dynamic() -> Inventory {
    let slices = serde_saphyr::from_str::<List<ResourceSlice>>(&fixture("dra-dynmig-gpu-node-8.yaml"))
        .unwrap()
        .items;
    let refs: Vec<&ResourceSlice> = slices.iter().collect();
    inventory::from_resource_slices("gpu-node-8", None, &refs)
        .unwrap()
        .unwrap()
}

#[test]
fn a_dynamic_mig_pool_is_read_as_possible_supply() {
    let inv = dynamic();
    assert_eq!(inv.source, Source::ResourceSlice);
    let supply = inv.supply.as_ref().expect("a DynamicMIG pool has a supply");
    // Per GPU: the full GPU and 7 + 3 + 2 + 1 possible partitions.
    assert_eq!(supply.offered(), 2 * 14);
    assert_eq!(
        inv.manifest.devices(),
        None,
        "no device exists until a claim is allocated"
    );
    assert!(
        matches!(inv.notes[0], inventory::Note::DynamicMig { .. }),
        "{:?}",
        inv.notes
    );
    insta::assert_yaml_snapshot!("dynamic_mig", (&*inv.manifest, &inv.notes));
}

/// Two H100s partitioned on demand, with 8 memory slices each: what fits their counters is
/// admitted; a shape whose profiles exist one by one but not together is refused, naming
/// the shape's check with both values.
#[rstest]
#[case::two_3g_and_a_1g_over_two_gpus(vec![Gpu::h100().cut(["3g.40gb", "3g.40gb", "1g.10gb"])], &[])]
#[case::seven_1g_and_a_3g(
    vec![Gpu::h100().cut(["1g.10gb"; 7]), Gpu::h100().cut(["3g.40gb"])],
    &[]
)]
#[case::a_whole_gpu_and_a_3g(vec![Gpu::h100(), Gpu::h100().cut(["3g.40gb"])], &[])]
#[case::a_3g_a_2g_and_a_1g_on_one_gpu(vec![Gpu::h100().cut(["3g.40gb", "2g.20gb", "1g.10gb"])], &[])]
#[case::four_3g_and_a_1g(
    vec![Gpu::h100().cut(["3g.40gb"; 4]), Gpu::h100().cut(["1g.10gb"])],
    &["gpu-model", "gpu-count", "mig-profile"]
)]
#[case::two_whole_gpus_and_a_3g(
    vec![Gpu::h100(), Gpu::h100(), Gpu::h100().cut(["3g.40gb"])],
    &["gpu-model", "gpu-count"]
)]
#[case::fifteen_1g(
    vec![Gpu::h100().cut(["1g.10gb"; 7]), Gpu::h100().cut(["1g.10gb"; 7]), Gpu::h100().cut(["1g.10gb"])],
    &["gpu-model", "gpu-count", "mig-profile"]
)]
fn dynamic_mig_supply_decides_by_counters(
    #[case] gpus: Vec<miggate_compat::GpuBuilder>,
    #[case] refused: &[&str],
) {
    let inv = dynamic();
    let source = checkpoint(KERNEL, "580.82.07", gpus);
    let judged = inv.manifest_for(&source);
    let report = evaluate_target(&source, Target::node(&judged), &Options::mode(Mode::Offer));
    let (_, by) = verdict(&report);
    assert_eq!(by, refused.to_vec(), "{}", table(&report));
    if refused.contains(&"mig-profile") {
        let row = report.result(CheckName::MIG_PROFILE).unwrap();
        assert!(row.message.to_string().contains("short of"), "{}", table(&report));
    }
    // The devices judged are possible ones: slices without a UUID, so no device map.
    assert!(
        judged
            .devices()
            .unwrap()
            .iter()
            .filter(|d| d.mig_profile.is_some())
            .all(|d| d.uuid.is_none())
    );
}

#[test]
fn dynamic_mig_shortfall_wording() {
    let inv = dynamic();
    let source = checkpoint(
        KERNEL,
        "580.82.07",
        vec![Gpu::h100().cut(["3g.40gb"; 4]), Gpu::h100().cut(["1g.10gb"])],
    );
    let judged = inv.manifest_for(&source);
    let report = evaluate_target(&source, Target::node(&judged), &Options::mode(Mode::Offer));
    insta::assert_snapshot!("dynamic_mig_shortfall", report.reason);
}

/// A checkpoint whose devices are not known well enough to place stays unknown, never a
/// refusal on a guess.
#[test]
fn dynamic_mig_with_an_unknown_source_shape_is_unknown() {
    let inv = dynamic();
    let mut source = checkpoint(KERNEL, "580.82.07", vec![Gpu::h100().cut(["3g.40gb"])]);
    source.nvidia.as_mut().unwrap().devices.as_mut().unwrap()[0].mig_profile = None;
    let judged = inv.manifest_for(&source);
    assert_eq!(judged.devices(), None);
    let report = evaluate_target(&source, Target::node(&judged), &Options::mode(Mode::Offer));
    assert!(report.compatible, "{}", table(&report));
}

/// A hostile pool: a thousand possible partitions of one profile on one GPU, counters to hold
/// them all. The search stops at its budget and the GPU checks stay unknown: no refusal on a
/// guess, no unbounded work.
#[test]
fn a_dynamic_pool_past_the_search_budget_is_unknown() {
    let slices = serde_saphyr::from_str::<List<ResourceSlice>>(&fixture("dra-dynmig-gpu-node-8.yaml"))
        .unwrap()
        .items;
    let mut slices: Vec<ResourceSlice> = slices;
    for set in slices[0].spec.shared_counters.as_mut().unwrap() {
        for counter in set.counters.values_mut() {
            counter.value = k8s_openapi::apimachinery::pkg::api::resource::Quantity("1000Ti".into());
        }
    }
    let one = slices[1].spec.devices.as_ref().unwrap()[1].clone();
    let mut many = vec![slices[1].spec.devices.as_ref().unwrap()[0].clone()];
    for i in 0..1000 {
        let mut d = one.clone();
        d.name = format!("gpu-0-mig-1g10gb-19-{i}");
        many.push(d);
    }
    slices[1].spec.devices = Some(many);
    let refs: Vec<&ResourceSlice> = slices.iter().collect();
    let inv = inventory::from_resource_slices("gpu-node-8", None, &refs)
        .unwrap()
        .unwrap();
    let source = checkpoint(KERNEL, "580.82.07", vec![Gpu::h100().cut(["1g.10gb"; 7])]);
    assert_eq!(inv.manifest_for(&source).devices(), None);
    // A shape the budget allows is still placed.
    let small = checkpoint(KERNEL, "580.82.07", vec![Gpu::h100().cut(["1g.10gb"])]);
    assert_eq!(inv.manifest_for(&small).devices().map(<[_]>::len), Some(1));
}

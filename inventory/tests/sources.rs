//! Node inventories from three sources: the same node described by its `GpuNode`, by the DRA
//! driver's `ResourceSlice`s (two releases' attribute names) and by GFD labels gives the same
//! admission verdicts (compat, offer mode) wherever the source can tell, and *unknown*, never a
//! refusal, where it cannot. Fixtures: `testdata/inventory/` (provenance in its README).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use k8s_openapi::api::resource::v1::ResourceSlice;
use miggate_compat::{CheckName, GpuManifest, Outcome};
use miggate_inventory::{self as inventory, Source};
use rstest::rstest;
use support::gpu_node_7::{
    Ckpt, From, gpu_node, judge, node, read, slices_v25_3, slices_v25_12, table, unknowns, verdict,
    with_labels, without_node_info,
};

mod support;

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

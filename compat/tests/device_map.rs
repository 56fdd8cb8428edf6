#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The device map handed to cuda-checkpoint (`src=dst,…`): paired by class (kind, model,
//! profile), in visible order, identity where the UUID is the same; none on a refusal; never a
//! legacy `MIG-GPU-…` id.

mod common;

use common::*;
use miggate_compat::{Device, Options};
use rstest::rstest;

fn map(s: Vec<Device>, t: Vec<Device>, o: &Options) -> (Option<String>, Vec<String>) {
    let r = check_with(full(s), full(t), o);
    assert_rows(&r);
    (r.device_map, r.warnings.iter().map(ToString::to_string).collect())
}

// The peer's TestBuildDeviceMap, where it applies.
#[rstest]
#[case::single(gpus(&[L4]), vec![whole("GPU-bbb", L4)], Some("GPU-a=GPU-bbb"))]
#[case::identity(gpus(&[L4]), gpus(&[L4]), Some(""))]
#[case::multiple(
    vec![whole("GPU-aaa", L4), whole("GPU-bbb", L4)],
    vec![whole("GPU-ccc", L4), whole("GPU-ddd", L4)],
    Some("GPU-aaa=GPU-ccc,GPU-bbb=GPU-ddd")
)]
#[case::multi_identity_reordered(
    vec![whole("GPU-aaa", L4), whole("GPU-bbb", L4)],
    vec![whole("GPU-bbb", L4), whole("GPU-aaa", L4)],
    Some("")
)]
// Lengths differ: a refusal (gpu-count), so no map.
#[case::mismatched_lengths(gpus(&[L4, L4]), gpus(&[L4]), None)]
// The peer errors on empty lists; here a checkpoint with no GPU needs no map.
#[case::both_empty(vec![], vec![], Some(""))]
fn peer_device_maps(#[case] s: Vec<Device>, #[case] t: Vec<Device>, #[case] want: Option<&str>) {
    assert_eq!(map(s, t, &exact()).0.as_deref(), want);
}

#[test]
fn identity_is_empty() {
    let devs = vec![s3g("MIG-a"), s1g("MIG-b"), whole("GPU-c", H100)];
    let (m, w) = map(devs.clone(), devs, &exact());
    assert_eq!(m.as_deref(), Some(""));
    assert!(w.is_empty(), "{w:?}");
}

#[rstest]
#[case::exact(exact())]
#[case::offer(offer())]
fn pairs_by_class_not_position(#[case] o: Options) {
    let s = vec![s3g("MIG-s3g"), s1g("MIG-s1g")];
    let t = vec![s1g("MIG-t1g"), s3g("MIG-t3g")];
    assert_eq!(
        map(s, t, &o).0.as_deref(),
        Some("MIG-s3g=MIG-t3g,MIG-s1g=MIG-t1g")
    );
}

#[test]
fn whole_gpus_and_slices_of_one_model_are_different_classes() {
    let s = vec![whole("GPU-s", H100), s3g("MIG-s")];
    let t = vec![s3g("MIG-t"), whole("GPU-t", H100)];
    assert_eq!(map(s, t, &exact()).0.as_deref(), Some("GPU-s=GPU-t,MIG-s=MIG-t"));
}

#[test]
fn identity_pairs_stay_and_the_rest_pair_in_visible_order() {
    let s = vec![whole("GPU-a", H100), whole("GPU-b", H100), whole("GPU-c", H100)];
    let t = vec![whole("GPU-x", H100), whole("GPU-b", H100), whole("GPU-y", H100)];
    // Not all identity: every pair is listed, since cuda-checkpoint needs every GPU mapped.
    assert_eq!(
        map(s, t, &exact()).0.as_deref(),
        Some("GPU-a=GPU-x,GPU-b=GPU-b,GPU-c=GPU-y")
    );
}

#[test]
fn offer_mode_pairs_into_part_of_the_node() {
    let s = vec![s3g("MIG-s1"), s3g("MIG-s2")];
    let n = vec![
        whole("GPU-n", H100),
        s1g("MIG-n1"),
        s3g("MIG-n2"),
        s1g("MIG-n3"),
        s3g("MIG-n4"),
    ];
    let r = check_with(full(s), node(n), &offer());
    assert!(r.compatible, "{}", r.reason);
    assert_eq!(r.device_map.as_deref(), Some("MIG-s1=MIG-n2,MIG-s2=MIG-n4"));
}

#[test]
fn a_refusal_has_no_map() {
    let (m, w) = map(vec![s3g("MIG-s")], vec![s1g("MIG-t")], &exact());
    assert_eq!(m, None);
    assert!(w.is_empty(), "a refusal is not a pairing failure: {w:?}");
}

#[rstest]
#[case::legacy_source(
    vec![s3g("MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/7/0")],
    vec![s3g("MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde")]
)]
#[case::legacy_target(
    vec![s3g("MIG-7089d0f3-293f-58c9-8f8c-5ea666eedbde")],
    vec![s3g("MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/7/0")]
)]
#[case::legacy_on_both_sides(
    vec![s3g("MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/7/0")],
    vec![s3g("MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/7/0")]
)]
fn a_legacy_id_gives_no_map_and_a_warning(#[case] s: Vec<Device>, #[case] t: Vec<Device>) {
    let (m, w) = map(s, t, &exact());
    assert_eq!(m, None);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].starts_with("no device map: "), "{w:?}");
    assert!(
        w[0].contains("MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/7/0"),
        "{w:?}"
    );
    assert!(w[0].contains("legacy"), "{w:?}");
}

#[test]
fn a_device_without_uuid_gives_no_map_and_a_warning() {
    let nameless = Device {
        uuid: None,
        ..s3g("MIG-x")
    };
    let (m, w) = map(vec![nameless], vec![s3g("MIG-t")], &exact());
    assert_eq!(m, None);
    assert!(w.iter().any(|w| w.contains("no UUID")), "{w:?}");
}

#[test]
fn devices_not_recorded_give_no_map_and_a_warning() {
    let r = check(full(vec![s3g("MIG-s")]), m().arch("amd64"));
    assert!(r.compatible);
    assert_eq!(r.device_map, None);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.to_string().contains("devices not recorded")),
        "{:?}",
        r.warnings
    );
}

#[rstest]
#[case::model(
    "gpu-model",
    vec![whole("GPU-s", H100)],
    vec![whole("GPU-t", A100_80)],
    "GPU-s=GPU-t"
)]
#[case::profile(
    "mig-profile",
    vec![s3g("MIG-s1"), s1g("MIG-s2")],
    vec![s1g("MIG-t1"), s1g("MIG-t2")],
    "MIG-s1=MIG-t1,MIG-s2=MIG-t2"
)]
#[case::kind("mig-partitioning", vec![whole("GPU-s", H100)], vec![s3g("MIG-t")], "GPU-s=MIG-t")]
fn skipped_dimensions_are_left_out_of_the_class(
    #[case] skip: &str,
    #[case] s: Vec<Device>,
    #[case] t: Vec<Device>,
    #[case] want: &str,
) {
    // Refused without the skip; with it the waived dimension does not split classes.
    assert_eq!(map(s.clone(), t.clone(), &exact()).0, None);
    let (m, w) = map(s, t, &skipping(exact(), skip));
    assert_eq!(m.as_deref(), Some(want), "{w:?}");
}

#[test]
fn a_dimension_unknown_on_one_device_does_not_block_a_pairing_that_exists() {
    // The node's first slice has no recorded profile, so it could stand for either source
    // slice; taking it for the first source slice would leave the 1g.10gb nowhere to go.
    let unshaped = Device {
        mig_profile: None,
        ..s3g("MIG-t1")
    };
    let s = vec![s3g("MIG-s3g"), s1g("MIG-s1g")];
    let t = vec![unshaped, s3g("MIG-t2")];
    let (m, w) = map(s.clone(), t.clone(), &exact());
    assert_eq!(m.as_deref(), Some("MIG-s3g=MIG-t2,MIG-s1g=MIG-t1"), "{w:?}");
    // Same with an unknown model.
    let s = vec![bare("GPU-s1"), whole("GPU-s2", H100)];
    let t = vec![whole("GPU-t1", H100), whole("GPU-t2", A100_80)];
    let (m, w) = map(s, t, &exact());
    assert_eq!(m.as_deref(), Some("GPU-s1=GPU-t2,GPU-s2=GPU-t1"), "{w:?}");
}

#[test]
fn a_node_device_without_uuid_is_passed_over_when_another_fits() {
    // Which of a node's interchangeable slices comes first must not decide whether there is a
    // map: the one cuda-checkpoint can be given is chosen.
    let nameless = Device {
        uuid: None,
        ..s3g("MIG-n1")
    };
    for t in [
        vec![nameless.clone(), s3g("MIG-n2")],
        vec![s3g("MIG-n2"), nameless],
    ] {
        let r = check_with(full(vec![s3g("MIG-s1")]), node(t), &offer());
        assert!(r.compatible, "{}", r.reason);
        assert_eq!(r.device_map.as_deref(), Some("MIG-s1=MIG-n2"), "{:?}", r.warnings);
    }
    // The same with a legacy id on the node.
    let legacy = s3g("MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/1/0");
    let r = check_with(
        full(vec![s3g("MIG-s1")]),
        node(vec![legacy, s3g("MIG-n2")]),
        &offer(),
    );
    assert_eq!(r.device_map.as_deref(), Some("MIG-s1=MIG-n2"), "{:?}", r.warnings);
}

#[test]
fn ids_cuda_checkpoint_does_not_accept_cannot_be_read() {
    // A UUID outside the printed forms never reaches a map: reading the manifest fails and
    // names the field.
    for uuid in ["0000:18:00.0", "GPU-2,GPU-9=GPU-7", "GPU-1 "] {
        let text = format!(
            "{{\"apiVersion\": \"miggate.io/v1alpha1\", \"kind\": \"GpuManifest\", \"nvidia\": {{\"devices\": [{{\"uuid\": {uuid:?}}}]}}}}"
        );
        let err = miggate_compat::from_str(&text).unwrap_err().to_string();
        assert!(err.contains("at nvidia.devices[0].uuid"), "{err}");
        assert!(err.contains("is not a GPU or MIG UUID"), "{err}");
    }
}

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The Go peer's artifacts (`testdata/peer/`) read as manifests: what each translates to
//! (snapshots), and the verdicts they get against miggate manifests.

mod common;

use common::{assert_refusing, testdata_text};
use miggate_compat::{GpuManifest, Mode, Options, evaluate, from_str};
use rstest::rstest;

fn read(path: &str) -> GpuManifest {
    from_str(&testdata_text(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[rstest]
#[case::legacy_gpu_uuids("manifest-legacy-gpu-uuids.yaml")]
#[case::h100_mig("manifest-h100-mig.yaml")]
#[case::legacy_mig_uuid("manifest-legacy-mig-uuid.yaml")]
#[case::snapshot_content("podsnapshotcontent-h100-mig.yaml")]
#[case::source_alone("source-h100-mig.json")]
fn translations(#[case] file: &str) {
    let m = read(&format!("peer/{file}"));
    insta::assert_snapshot!(format!("peer__{file}"), m.to_yaml().unwrap());
    // What was translated reads back as itself: the translation is a plain miggate manifest.
    assert_eq!(from_str(&m.to_yaml().unwrap()).unwrap(), m);
}

#[test]
fn the_manifest_and_its_source_say_the_same_but_uuids() {
    let object = read("peer/podsnapshotcontent-h100-mig.yaml");
    assert_eq!(object, read("peer/source-h100-mig.json"));
    let manifest = read("peer/manifest-h100-mig.yaml");
    let profiles = |m: &GpuManifest| -> Vec<String> {
        m.devices()
            .unwrap()
            .iter()
            .map(|d| {
                format!(
                    "{:?} {:?}",
                    d.product_name,
                    d.mig_profile.as_ref().map(|p| p.as_str())
                )
            })
            .collect()
    };
    assert_eq!(profiles(&object), profiles(&manifest));
    assert!(object.devices().unwrap().iter().all(|d| d.uuid.is_none()));
}

/// Verdicts of the peer's artifacts (sources) against miggate manifests (targets).
#[rstest]
// The peer's own old artifact: one whole GPU by UUID, nothing else about it.
#[case::legacy_on_a_whole_h100_container(
    "peer/manifest-legacy-gpu-uuids.yaml",
    "manifests/restore-h100-whole.yaml",
    Mode::Exact,
    "mount, gpu-count, gpu-request"
)]
#[case::legacy_offered_a_node_with_whole_gpus(
    "peer/manifest-legacy-gpu-uuids.yaml",
    "manifests/node-h100-8gpu-mixed.yaml",
    Mode::Offer,
    ""
)]
#[case::legacy_offered_a_node_of_slices_only(
    "peer/manifest-legacy-gpu-uuids.yaml",
    "manifests/node-a100-sxm4-40gb-7x1g5gb.yaml",
    Mode::Offer,
    "gpu-count, mig-partitioning"
)]
// A current artifact on two 3g.40gb slices.
#[case::mig_on_the_same_slices(
    "peer/manifest-h100-mig.yaml",
    "manifests/restore-h100-3g40gb-x2.yaml",
    Mode::Exact,
    ""
)]
#[case::mig_on_whole_gpus(
    "peer/manifest-h100-mig.yaml",
    "manifests/restore-h100-whole.yaml",
    Mode::Exact,
    "mig-partitioning, gpu-request"
)]
#[case::mig_offered_a_mixed_node(
    "peer/manifest-h100-mig.yaml",
    "manifests/node-h100-8gpu-mixed.yaml",
    Mode::Offer,
    ""
)]
#[case::mig_offered_an_a100_node(
    "peer/manifest-h100-mig.yaml",
    "manifests/node-a100-sxm4-40gb-7x1g5gb.yaml",
    Mode::Offer,
    "kernel-version, gpu-model, mig-profile, driver-version"
)]
// The same checkpoint as status.source: no UUIDs, same verdicts.
#[case::source_on_the_same_slices(
    "peer/podsnapshotcontent-h100-mig.yaml",
    "manifests/restore-h100-3g40gb-x2.yaml",
    Mode::Exact,
    ""
)]
#[case::source_on_whole_gpus(
    "peer/source-h100-mig.json",
    "manifests/restore-h100-whole.yaml",
    Mode::Exact,
    "mig-partitioning, gpu-request"
)]
// A pre-R470 slice on today's A100 node: the slice shape fits, the driver does not.
#[case::legacy_mig_uuid_offered_an_a100_node(
    "peer/manifest-legacy-mig-uuid.yaml",
    "manifests/node-a100-sxm4-40gb-7x1g5gb.yaml",
    Mode::Offer,
    "driver-version"
)]
// And a miggate checkpoint restored where the peer's artifact describes the target.
#[case::miggate_checkpoint_on_the_peers_container(
    "manifests/checkpoint-h100-3g40gb-x2.yaml",
    "peer/manifest-h100-mig.yaml",
    Mode::Exact,
    ""
)]
fn verdicts(#[case] source: &str, #[case] target: &str, #[case] mode: Mode, #[case] refused: &str) {
    let report = evaluate(&read(source), &read(target), &Options::mode(mode));
    assert_refusing(&report, refused);
}

#[test]
fn a_status_source_gives_no_device_map_and_says_why() {
    let report = evaluate(
        &read("peer/source-h100-mig.json"),
        &read("manifests/restore-h100-3g40gb-x2.yaml"),
        &Options::default(),
    );
    assert!(report.compatible, "{}", report.reason);
    assert_eq!(report.device_map, None);
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.to_string().contains("no device map")),
        "{:#?}",
        report.warnings
    );
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.to_string().contains("no device UUIDs")),
        "{:#?}",
        report.warnings
    );
}

#[rstest]
#[case::bad_uuid_in_the_old_list(
    "createdAt: x\ncudaRestore: {sourceGpuUuids: [GPU-aaa, 'GPU-a,b=c']}\n",
    "cudaRestore.sourceGpuUuids[1]"
)]
#[case::bad_uuid_in_source_gpus(
    "k8s: {}\ncudaRestore: {sourceGpus: [{uuid: 'NVIDIA-1'}]}\n",
    "cudaRestore.sourceGpus[0].uuid"
)]
#[case::bad_uuid_json(
    r#"{"cudaRestore": {"sourceGpus": [{"uuid": "GPU-\u001b[2J"}]}}"#,
    "cudaRestore.sourceGpus[0].uuid"
)]
#[case::wrong_type("criuDump: {extMnt: [a]}\n", "criuDump.extMnt")]
#[case::snapshot_content_not_ready(
    "apiVersion: x/v1\nkind: PodSnapshotContent\nstatus: {}\n",
    "no status.source"
)]
fn bad_artifacts_name_the_field(#[case] text: &str, #[case] want: &str) {
    let err = from_str(text).unwrap_err().to_string();
    assert!(err.contains(want), "{err}");
    // Line breaks are the YAML error's own layout; nothing else a terminal acts on gets through.
    assert!(
        !err.chars()
            .any(|c| c != '\n' && miggate_compat::escape::is_hazard(c)),
        "{err:?}"
    );
}

#[rstest]
#[case::a_pod("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n")]
#[case::nothing_known("{}")]
#[case::a_body_without_envelope("pod: {cpuLimit: 4}\n")]
#[case::miggate_keys_with_a_peer_key("createdAt: x\nnvidia: {}\n")]
fn what_is_neither_is_refused_as_before(#[case] text: &str) {
    let err = from_str(text).unwrap_err().to_string();
    assert!(err.contains("not a miggate GpuManifest"), "{err}");
}

#[test]
fn hostile_artifacts_do_not_overflow() {
    // Deep nesting under a key the translation skips: skipped without recursion (JSON) or
    // refused at YAML's depth limit, never a stack overflow.
    let deep_json = format!(
        r#"{{"createdAt": "x", "overlay": {}1{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let _ = from_str(&deep_json);
    let deep_yaml = format!(
        "createdAt: x\noverlay: {}1{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(from_str(&deep_yaml).is_err());
    // A deep value where a translated field is read is an error naming it.
    let deep = format!(
        r#"{{"createdAt": "x", "k8s": {{"image": {}1{}}}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(from_str(&deep).is_err());
    // Many mounts are linear.
    let mut many = String::from("createdAt: x\ncriuDump:\n  extMnt:\n");
    for i in 0..50_000 {
        many.push_str(&format!("    /m{i}: /m{i}\n"));
    }
    let m = from_str(&many).unwrap();
    assert_eq!(m.pod.unwrap().mounts.unwrap().len(), 50_000);
}

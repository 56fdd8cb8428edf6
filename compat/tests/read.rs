#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Reading manifests from JSON and YAML: identity, unknown fields, scalars kept as text,
//! quantities, size limit, absent vs empty, error positions; and the checked-in JSON Schema.

mod common;

use miggate_compat::{
    Error, GpuManifest, MAX_MANIFEST_BYTES, MigMode, MigStrategy, from_slice, from_str, manifest_schema,
};
use rstest::rstest;

const HEAD_JSON: &str = r#""apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest""#;
const HEAD_YAML: &str = "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\n";

fn json(body: &str) -> String {
    if body.is_empty() {
        format!("{{{HEAD_JSON}}}")
    } else {
        format!("{{{HEAD_JSON}, {body}}}")
    }
}

fn yaml(body: &str) -> String {
    format!("{HEAD_YAML}{body}")
}

fn err(text: &str) -> Error {
    from_str(text).expect_err("should not read")
}

// ---------------------------------------------------------------------------------------------
// JSON and YAML

const FULL_YAML: &str = r#"apiVersion: miggate.io/v1alpha1
kind: GpuManifest
capturedAt: "2026-11-29T18:00:00Z"
capturedBy: {tool: miggate, version: 0.1.0, backend: nvidia-smi}
warnings: ["MIG line with no GPU header above it: parent unknown"]
host: {nodeName: gpu-node-3, kernelVersion: 5.15.0-1071-aws, cpuArch: amd64}
pod:
  image: nvcr.io/x/y:1
  imageDigest: "sha256:9f2c4be5a0e7f4b1c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0"
  cpuLimit: "4"
  memoryLimit: 32Gi
  mounts: [/model-cache]
  gpuRequests: {nvidia.com/mig-3g.40gb: 2}
nvidia:
  driverVersion: "580.82.07"
  cudaDriverVersion: "13.0"
  migStrategy: mixed
  gpus:
  - {index: 0, uuid: GPU-1, productName: NVIDIA H100 80GB HBM3, pciBusId: "00000000:18:00.0",
     memoryMiB: 81559, computeCapability: "9.0", migMode: enabled}
  devices:
  - {uuid: MIG-1, parentUuid: GPU-1, productName: NVIDIA H100 80GB HBM3, migProfile: 3g.40gb,
     gpuInstanceId: 2, computeInstanceId: 0, memoryMiB: 40192}
  - {uuid: GPU-2, productName: NVIDIA H100 80GB HBM3, memoryMiB: 81559}
"#;

#[test]
fn the_design_example_reads_as_yaml_and_round_trips_through_json() {
    let m = from_str(FULL_YAML).unwrap();
    assert!(m.read_warnings().is_empty(), "{:?}", m.read_warnings());
    assert_eq!(
        m.host.as_ref().unwrap().kernel_version.as_ref().unwrap().as_str(),
        "5.15.0-1071-aws"
    );
    let pod = m.pod.as_ref().unwrap();
    assert_eq!(pod.cpu_limit.as_ref().unwrap().as_str(), "4");
    assert_eq!(
        pod.gpu_requests.as_ref().unwrap()["nvidia.com/mig-3g.40gb"].whole(),
        Some(2)
    );
    let nv = m.nvidia.as_ref().unwrap();
    assert_eq!(nv.mig_strategy, Some(MigStrategy::Mixed));
    assert_eq!(nv.gpus.as_ref().unwrap()[0].memory_mib, Some(81559));
    assert_eq!(nv.gpus.as_ref().unwrap()[0].mig_mode, Some(MigMode::Enabled));
    let devs = m.devices().unwrap();
    assert_eq!(devs.len(), 2);
    assert_eq!(devs[0].mig_profile.as_ref().unwrap().as_str(), "3g.40gb");
    assert_eq!(devs[0].gpu_instance_id, Some(2));
    assert_eq!(devs[1].mig_profile, None);

    let back = from_str(&m.to_json().unwrap()).unwrap();
    assert_eq!(back, m);
    let again = from_str(&m.to_yaml().unwrap()).unwrap();
    assert_eq!(again, m);
}

#[test]
fn json_and_yaml_read_the_same() {
    let j = from_str(&json(
        r#""host": {"cpuArch": "arm64"}, "nvidia": {"driverVersion": "580.80", "devices": [{"uuid": "GPU-1"}]}"#,
    ))
    .unwrap();
    let y = from_str(&yaml(
        "host: {cpuArch: arm64}\nnvidia:\n  driverVersion: 580.80\n  devices:\n  - uuid: GPU-1\n",
    ))
    .unwrap();
    assert_eq!(j, y);
}

#[test]
fn json_output_is_camel_case() {
    let m = from_str(FULL_YAML).unwrap();
    let text = m.to_json().unwrap();
    for key in [
        "\"apiVersion\"",
        "\"capturedAt\"",
        "\"kernelVersion\"",
        "\"imageDigest\"",
        "\"gpuRequests\"",
        "\"cudaDriverVersion\"",
        "\"migStrategy\"",
        "\"memoryMiB\"",
        "\"parentUuid\"",
        "\"gpuInstanceId\"",
        "\"pciBusId\"",
        "\"migMode\"",
    ] {
        assert!(text.contains(key), "{key} in {text}");
    }
    assert!(!text.contains('_'), "no snake_case keys: {text}");
}

// ---------------------------------------------------------------------------------------------
// Identity: apiVersion and kind are required, with exactly these values.

#[rstest]
#[case::empty_object("{}", "apiVersion")]
#[case::a_pod_in_yaml("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n", "`v1`")]
#[case::a_pod_in_json(r#"{"apiVersion": "v1", "kind": "Pod"}"#, "`v1`")]
#[case::wrong_kind("apiVersion: miggate.io/v1alpha1\nkind: GpuCheckpoint\n", "`GpuCheckpoint`")]
#[case::missing_kind("apiVersion: miggate.io/v1alpha1\n", "kind")]
#[case::missing_api_version("kind: GpuManifest\n", "apiVersion")]
#[case::older_version("apiVersion: miggate.io/v1\nkind: GpuManifest\n", "`miggate.io/v1`")]
fn identity_is_required(#[case] text: &str, #[case] names: &str) {
    let e = err(text);
    let msg = e.to_string();
    assert!(msg.contains(names), "{msg}");
}

#[rstest]
#[case::empty("")]
#[case::blank("  \n\t\n")]
fn empty_input_is_an_error(#[case] text: &str) {
    assert!(matches!(err(text), Error::Empty));
}

// ---------------------------------------------------------------------------------------------
// Unknown fields: kept, written back, reported with their path.

#[test]
fn unknown_fields_are_kept_and_reported_by_path() {
    let text = json(
        r#""nvidia": {"driverversion": "580.82.07", "devices": [{"uuid": "MIG-1", "migprofile": "3g.40gb"}]},
           "extra": {"nested": [1, 2]}"#,
    );
    let m = from_str(&text).unwrap();
    let w: Vec<String> = m.read_warnings().iter().map(ToString::to_string).collect();
    assert_eq!(w.len(), 3, "{w:?}");
    assert!(w.iter().any(|x| x.contains("`nvidia.driverversion`")), "{w:?}");
    assert!(
        w.iter().any(|x| x.contains("`nvidia.devices[0].migprofile`")),
        "{w:?}"
    );
    assert!(w.iter().any(|x| x.contains("`extra`")), "{w:?}");
    // The typo is not silently read as the field: the driver stays unknown.
    assert_eq!(m.nvidia.as_ref().unwrap().driver_version, None);

    let out: serde_json::Value = serde_json::from_str(&m.to_json().unwrap()).unwrap();
    assert_eq!(out["nvidia"]["driverversion"], "580.82.07");
    assert_eq!(out["nvidia"]["devices"][0]["migprofile"], "3g.40gb");
    assert_eq!(out["extra"]["nested"], serde_json::json!([1, 2]));
    // And reading the written form keeps them again (written keys are in byte order, so the
    // warnings come back in that order).
    let again = from_str(&m.to_json().unwrap()).unwrap();
    let again_said: Vec<String> = again.read_warnings().iter().map(ToString::to_string).collect();
    let (mut a, mut b) = (again_said, w.clone());
    a.sort();
    b.sort();
    assert_eq!(a, b);
    assert_eq!(again.to_json().unwrap(), m.to_json().unwrap());
}

#[test]
fn unknown_fields_in_yaml_are_kept_too() {
    let m = from_str(&yaml(
        "host:\n  kernelversion: 6.8.0\nnvidia:\n  driverVersion: \"580.82.07\"\n",
    ))
    .unwrap();
    assert_eq!(m.read_warnings().len(), 1);
    assert!(m.read_warnings()[0].to_string().contains("`host.kernelversion`"));
    let out: serde_json::Value = serde_json::from_str(&m.to_json().unwrap()).unwrap();
    assert_eq!(out["host"]["kernelversion"], "6.8.0");
}

#[test]
fn unknown_fields_show_up_as_report_warnings() {
    let s = from_str(&json(r#""host": {"cpuarch": "amd64"}"#)).unwrap();
    let r = miggate_compat::evaluate(&s, &GpuManifest::new(), &Default::default());
    assert!(
        r.warnings
            .iter()
            .map(ToString::to_string)
            .any(|w| w.starts_with("source: ") && w.contains("host.cpuarch")),
        "{:?}",
        r.warnings
    );
}

// ---------------------------------------------------------------------------------------------
// Scalars: versions stay text; quantities are numbers or strings.

#[test]
fn yaml_versions_that_look_like_floats_stay_text() {
    let m = from_str(&yaml(
        "host: {kernelVersion: 6.8}\nnvidia:\n  driverVersion: 580.80\n  cudaDriverVersion: 13.0\n  gpus: [{computeCapability: 9.0}]\n",
    ))
    .unwrap();
    let nv = m.nvidia.as_ref().unwrap();
    assert_eq!(nv.driver_version.as_ref().unwrap().as_str(), "580.80");
    assert_eq!(nv.cuda_driver_version.as_ref().unwrap().as_str(), "13.0");
    assert_eq!(
        nv.gpus.as_ref().unwrap()[0]
            .compute_capability
            .as_ref()
            .unwrap()
            .as_str(),
        "9.0"
    );
    assert_eq!(
        m.host.as_ref().unwrap().kernel_version.as_ref().unwrap().as_str(),
        "6.8"
    );
    // And they are written back as strings, not numbers.
    let out: serde_json::Value = serde_json::from_str(&m.to_json().unwrap()).unwrap();
    assert_eq!(out["nvidia"]["driverVersion"], "580.80");
    assert_eq!(out["nvidia"]["cudaDriverVersion"], "13.0");
}

#[rstest]
#[case::driver(r#""nvidia": {"driverVersion": 580.80}"#)]
#[case::cuda(r#""nvidia": {"cudaDriverVersion": 13.0}"#)]
#[case::kernel(r#""host": {"kernelVersion": 6.8}"#)]
fn a_json_number_for_a_version_is_an_error(#[case] body: &str) {
    let msg = err(&json(body)).to_string();
    assert!(msg.contains("version written as text"), "{msg}");
    assert!(msg.contains("line 1 column"), "{msg}");
}

#[rstest]
#[case::json_number(json(r#""pod": {"cpuLimit": 4, "memoryLimit": 34359738368}"#))]
#[case::json_string(json(r#""pod": {"cpuLimit": "4000m", "memoryLimit": "32Gi"}"#))]
#[case::json_fraction(json(r#""pod": {"cpuLimit": 4.0, "memoryLimit": "32Gi"}"#))]
#[case::yaml_number(yaml("pod: {cpuLimit: 4, memoryLimit: 34359738368}\n"))]
#[case::yaml_string(yaml("pod: {cpuLimit: \"4\", memoryLimit: 32Gi}\n"))]
fn quantities_read_as_numbers_or_strings(#[case] text: String) {
    let m = from_str(&text).unwrap();
    let pod = m.pod.as_ref().unwrap();
    assert_eq!(pod.cpu_limit.as_ref().unwrap().nanos(), Some(4_000_000_000));
    assert_eq!(
        pod.memory_limit.as_ref().unwrap().nanos(),
        Some(34_359_738_368_000_000_000)
    );
}

#[test]
fn gpu_request_counts_read_as_numbers_or_strings() {
    let m = from_str(&json(
        r#""pod": {"gpuRequests": {"nvidia.com/gpu": 2, "nvidia.com/mig-1g.10gb": "1"}}"#,
    ))
    .unwrap();
    let r = m.pod.as_ref().unwrap().gpu_requests.as_ref().unwrap();
    assert_eq!(r["nvidia.com/gpu"].whole(), Some(2));
    assert_eq!(r["nvidia.com/mig-1g.10gb"].whole(), Some(1));
}

// ---------------------------------------------------------------------------------------------
// Size limit

#[test]
fn input_over_sixteen_mib_is_refused_before_parsing() {
    let mut text = json("");
    text.push_str(&" ".repeat(MAX_MANIFEST_BYTES + 1 - text.len()));
    assert!(
        matches!(from_str(&text), Err(Error::TooLarge { size, limit }) if size == MAX_MANIFEST_BYTES + 1 && limit == MAX_MANIFEST_BYTES)
    );
    assert!(matches!(from_slice(text.as_bytes()), Err(Error::TooLarge { .. })));
    // Exactly at the limit is read.
    text.pop();
    assert_eq!(text.len(), MAX_MANIFEST_BYTES);
    from_str(&text).unwrap();
}

#[test]
fn bytes_that_are_not_utf8_are_an_error() {
    let mut bytes = json("").into_bytes();
    bytes.insert(1, 0xff);
    let err = from_slice(&bytes).unwrap_err();
    assert!(matches!(err, Error::NotUtf8 { line: 1, column: 2 }), "{err}");
    assert!(err.to_string().contains("line 1 column 2"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Absent vs empty

#[test]
fn absent_devices_are_unknown_and_empty_devices_are_none() {
    let absent = from_str(&yaml("nvidia: {driverVersion: \"580.82.07\"}\n")).unwrap();
    assert_eq!(absent.devices(), None);
    let empty = from_str(&yaml("nvidia: {devices: []}\n")).unwrap();
    assert_eq!(empty.devices(), Some(&[][..]));
    let null = from_str(&json(r#""nvidia": {"devices": null}"#)).unwrap();
    assert_eq!(null.devices(), None);
    // Written back, the difference survives.
    assert!(!absent.to_json().unwrap().contains("devices"));
    assert!(empty.to_json().unwrap().contains("\"devices\": []"));
    // And the checks see it: a checkpoint on one GPU against a target with none refuses, against
    // a target that did not record its devices it does not.
    let source = from_str(&yaml(
        "nvidia: {devices: [{uuid: GPU-1, productName: NVIDIA L4}]}\n",
    ))
    .unwrap();
    let opts = Default::default();
    assert!(!miggate_compat::evaluate(&source, &empty, &opts).compatible);
    assert!(miggate_compat::evaluate(&source, &absent, &opts).compatible);
}

#[test]
fn absent_and_empty_mounts_differ_too() {
    let absent = from_str(&yaml("pod: {cpuLimit: 4}\n")).unwrap();
    let empty = from_str(&yaml("pod: {mounts: []}\n")).unwrap();
    assert_eq!(absent.pod.as_ref().unwrap().mounts, None);
    assert_eq!(empty.pod.as_ref().unwrap().mounts, Some(vec![]));
}

// ---------------------------------------------------------------------------------------------
// Errors carry a position, and wrong types are errors, never panics.

#[test]
fn json_errors_carry_line_and_column() {
    let text =
        format!("{{\n  {HEAD_JSON},\n  \"nvidia\": {{\"devices\": [{{\"gpuInstanceId\": \"two\"}}]}}\n}}");
    let e = err(&text);
    let Error::Json { path, error } = &e else {
        panic!("a JSON error: {e:?}");
    };
    assert_eq!(error.line(), 3, "{e}");
    assert!(error.column() > 0);
    assert_eq!(
        miggate_compat::render_path(path),
        "nvidia.devices[0].gpuInstanceId"
    );
    assert!(e.to_string().contains("line 3"), "{e}");
}

#[test]
fn yaml_errors_carry_line_and_column() {
    let text =
        yaml("host:\n  cpuArch: amd64\nnvidia:\n  devices:\n  - uuid: GPU-1\n    gpuInstanceId: two\n");
    let e = err(&text);
    let Error::Yaml { path, error } = &e else {
        panic!("a YAML error: {e:?}");
    };
    assert_eq!(
        miggate_compat::render_path(path),
        "nvidia.devices[0].gpuInstanceId"
    );
    let at = error.location().expect("a YAML error has a location");
    assert_eq!(at.line(), 8, "{e}");
    assert!(at.column() > 0, "{e}");
    let msg = e.to_string();
    assert!(msg.contains('8'), "the message names the line: {msg}");
}

#[rstest]
#[case::devices_is_a_map(json(r#""nvidia": {"devices": {}}"#))]
#[case::devices_is_a_string(yaml("nvidia: {devices: none}\n"))]
#[case::negative_index(json(r#""nvidia": {"gpus": [{"index": -1}]}"#))]
#[case::memory_as_text(json(r#""nvidia": {"gpus": [{"memoryMiB": "lots"}]}"#))]
#[case::instance_id_too_large(json(r#""nvidia": {"devices": [{"gpuInstanceId": 99999999999}]}"#))]
#[case::profile_with_white_space(yaml("nvidia: {devices: [{uuid: MIG-1, migProfile: \"3g .40gb\"}]}\n"))]
#[case::empty_profile(json(r#""nvidia": {"devices": [{"migProfile": ""}]}"#))]
#[case::profile_is_a_number(json(r#""nvidia": {"devices": [{"migProfile": 3}]}"#))]
#[case::unknown_strategy(yaml("nvidia: {migStrategy: always}\n"))]
#[case::unknown_mig_mode(yaml("nvidia: {gpus: [{migMode: on}]}\n"))]
#[case::host_is_a_list(yaml("host: [a, b]\n"))]
#[case::pod_is_a_string(json(r#""pod": "restore""#))]
#[case::mounts_is_a_string(yaml("pod: {mounts: /data}\n"))]
#[case::quantity_is_a_list(yaml("pod: {cpuLimit: [4]}\n"))]
#[case::quantity_is_a_bool(json(r#""pod": {"memoryLimit": true}"#))]
#[case::requests_is_a_list(yaml("pod: {gpuRequests: [nvidia.com/gpu]}\n"))]
#[case::warnings_is_a_string(yaml("warnings: none\n"))]
#[case::trailing_json(format!("{} {{}}", json("")))]
#[case::not_a_mapping("- a\n- b\n")]
#[case::a_scalar("42\n")]
#[case::unclosed_json("{\"apiVersion\": ")]
#[case::bad_yaml_indent(yaml("host:\n  cpuArch: amd64\n   kernelVersion: x\n"))]
fn wrong_shapes_are_errors_not_panics(#[case] text: String) {
    let result = std::panic::catch_unwind(|| from_str(&text));
    let result = result.expect("reading never panics");
    let e = result.expect_err("should not read");
    assert!(!e.to_string().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Error paths: a read error names the field, as well as the line and column.

#[test]
fn a_json_type_error_names_the_field_path() {
    let text = format!("{{{HEAD_JSON},\n\"nvidia\": {{\"devices\": [{{\"memoryMiB\": \"x\"}}]}}}}");
    assert_eq!(
        err(&text).to_string(),
        "invalid manifest JSON at nvidia.devices[0].memoryMiB: invalid type: string \"x\", expected u64 at line 2 column 40"
    );
}

#[test]
fn a_yaml_type_error_names_the_field_path() {
    let text = yaml("nvidia:\n  devices:\n  - uuid: GPU-1\n  - uuid: GPU-2\n    gpuInstanceId: two\n");
    let msg = err(&text).to_string();
    assert!(
        msg.starts_with("invalid manifest YAML at nvidia.devices[1].gpuInstanceId: "),
        "{msg}"
    );
    assert!(msg.contains("line 7 column 20"), "{msg}");
}

#[rstest]
#[case::a_key_with_dots(
    json(r#""pod": {"gpuRequests": {"nvidia.com/gpu": true}}"#),
    "invalid manifest JSON at pod.gpuRequests[\"nvidia.com/gpu\"]: "
)]
#[case::an_enum_value(
    yaml("nvidia: {migStrategy: always}\n"),
    "invalid manifest YAML at nvidia.migStrategy: "
)]
#[case::identity(
    "apiVersion: v1\nkind: Pod\n".to_string(),
    "invalid manifest YAML at apiVersion: "
)]
#[case::a_missing_field_is_at_its_mapping(
    "{}".to_string(),
    "invalid manifest JSON: missing field `apiVersion`"
)]
#[case::trailing_text_has_no_path(format!("{} {{}}", json("")), "invalid manifest JSON: trailing characters")]
fn error_paths(#[case] text: String, #[case] starts: &str) {
    let msg = err(&text).to_string();
    assert!(msg.starts_with(starts), "{msg}");
}

#[rstest]
#[case::an_array("[1, 2]", 1)]
#[case::a_manifest_written_as_an_array(r#"["miggate.io/v1alpha1", "GpuManifest"]"#, 1)]
#[case::after_a_byte_order_mark_and_blank_lines("\u{feff}\n  [\"a\"]", 2)]
fn a_document_starting_with_a_bracket_is_json_and_not_a_manifest(#[case] text: &str, #[case] line: usize) {
    let msg = err(text).to_string();
    assert!(msg.starts_with("invalid manifest JSON: "), "{msg}");
    assert!(msg.contains(&format!("at line {line} column")), "{msg}");
}

#[test]
fn read_errors_carry_no_source_that_repeats_them() {
    for text in [
        json(r#""nvidia": {"gpus": [{"memoryMiB": "lots"}]}"#),
        yaml("nvidia: {devices: 3}\n"),
        "[1]".to_string(),
    ] {
        let e = err(&text);
        assert!(std::error::Error::source(&e).is_none(), "{e}");
    }
}

// ---------------------------------------------------------------------------------------------
// MIG profiles today's nvidia-smi does not print: read as text, with a warning.

#[rstest]
#[case::yaml(yaml(
    "nvidia:\n  devices:\n  - {uuid: MIG-0, migProfile: 1g.10gb}\n  - {uuid: MIG-1, migProfile: 1g.10gb+me}\n  - {uuid: MIG-2, migProfile: 1c.3g.40gb}\n  - {uuid: MIG-3, migProfile: 1g.10GB}\n"
))]
#[case::json(json(
    r#""nvidia": {"devices": [{"uuid": "MIG-0", "migProfile": "1g.10gb"}, {"uuid": "MIG-1", "migProfile": "1g.10gb+me"},
       {"uuid": "MIG-2", "migProfile": "1c.3g.40gb"}, {"uuid": "MIG-3", "migProfile": "1g.10GB"}]}"#
))]
fn an_unrecognised_profile_reads_as_text_with_a_warning(#[case] text: String) {
    let m = from_str(&text).unwrap();
    assert_eq!(
        m.read_warnings(),
        [
            "nvidia.devices[3].migProfile: `1g.10GB` is not a MIG profile nvidia-smi is known to print; compared as text"
        ]
    );
    let p = m.devices().unwrap()[3].mig_profile.as_ref().unwrap();
    assert_eq!(p.as_str(), "1g.10GB");
    assert_eq!(
        p.device_plugin_resource().as_deref(),
        Some("nvidia.com/mig-1g.10GB")
    );
    // Written back as it was, and read back the same.
    let back = from_str(&m.to_json().unwrap()).unwrap();
    assert_eq!(back, m);
    assert!(m.to_yaml().unwrap().contains("1g.10GB"));
}

#[test]
fn an_unrecognised_profile_is_compared_as_text() {
    let side = |profile: &str| {
        from_str(&yaml(&format!(
            "nvidia: {{migStrategy: mixed, devices: [{{uuid: MIG-1, productName: NVIDIA H100 80GB HBM3, migProfile: {profile}}}]}}\n"
        )))
        .unwrap()
    };
    let opts = Default::default();
    let r = miggate_compat::evaluate(&side("1g.12gb-xy"), &side("1g.12gb-xy"), &opts);
    assert!(r.compatible, "{}", r.reason);
    let r = miggate_compat::evaluate(&side("7g.80GB"), &side("7g.80GB"), &opts);
    assert!(r.compatible, "{}", r.reason);
    assert!(
        r.warnings.iter().any(|w| w
            == "source: nvidia.devices[0].migProfile: `7g.80GB` is not a MIG profile nvidia-smi is known to print; compared as text"),
        "{:?}",
        r.warnings
    );
    let r = miggate_compat::evaluate(&side("7g.80GB"), &side("7g.80gb"), &opts);
    assert_eq!(r.reason, "mig-profile: source 7g.80GB x1, target 7g.80gb x1");
}

#[rstest]
#[case::a_space("MIG 1g.10gb")]
#[case::a_tab("1g.10gb\tx")]
#[case::a_line_break("1g.10gb\n")]
#[case::a_no_break_space("1g.10gb\u{a0}")]
#[case::a_control_character("1g.10gb\u{7}")]
#[case::a_byte_order_mark("\u{feff}1g.10gb")]
#[case::empty("")]
fn a_profile_with_white_space_or_control_characters_is_an_error(#[case] profile: &str) {
    let quoted = serde_json::to_string(profile).unwrap();
    let msg = err(&json(&format!(
        r#""nvidia": {{"devices": [{{"migProfile": {quoted}}}]}}"#
    )))
    .to_string();
    assert!(
        msg.starts_with("invalid manifest JSON at nvidia.devices[0].migProfile: "),
        "{msg}"
    );
    assert!(msg.contains("is not a MIG profile"), "{msg}");
}

#[test]
fn arbitrary_prefixes_of_a_manifest_never_panic() {
    // Every truncation of a real manifest is an error or a manifest, never a panic.
    for cut in 0..FULL_YAML.len() {
        if !FULL_YAML.is_char_boundary(cut) {
            continue;
        }
        let _ = from_str(&FULL_YAML[..cut]);
    }
    let j = from_str(FULL_YAML).unwrap().to_json().unwrap();
    for cut in 0..j.len() {
        let _ = from_str(&j[..cut]);
    }
}

// ---------------------------------------------------------------------------------------------
// The checked-in JSON Schema

#[test]
fn the_checked_in_schema_is_the_generated_one() {
    let path = format!("{}/schema/gpu-manifest.schema.json", env!("CARGO_MANIFEST_DIR"));
    let generated = manifest_schema();
    if std::env::var_os("UPDATE_SCHEMA").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(format!("{}/schema", env!("CARGO_MANIFEST_DIR"))).unwrap();
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let checked_in =
        std::fs::read_to_string(&path).expect("the checked-in schema; UPDATE_SCHEMA=1 writes it");
    assert!(
        checked_in == generated,
        "{path} is stale; run `UPDATE_SCHEMA=1 cargo test -p miggate-compat --test read` and commit it"
    );
}

#[test]
fn the_schema_names_the_contract() {
    let schema: serde_json::Value = serde_json::from_str(&manifest_schema()).unwrap();
    let text = schema.to_string();
    assert_eq!(schema["title"], "GpuManifest");
    let required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(required, ["apiVersion", "kind"]);
    for key in [
        "memoryMiB",
        "cudaDriverVersion",
        "gpuRequests",
        "parentUuid",
        "migProfile",
        "imageDigest",
    ] {
        assert!(text.contains(&format!("\"{key}\"")), "{key}");
    }
    for value in [
        "miggate.io/v1alpha1",
        "GpuManifest",
        "pending-enable",
        "pending-disable",
        "single",
        "mixed",
    ] {
        assert!(text.contains(&format!("\"{value}\"")), "{value}");
    }
    assert!(
        !text.contains("memory_mib") && !text.contains("unknown_fields"),
        "{text}"
    );
}

/// Found by the `manifest` fuzz target: a long number read from YAML, written as JSON and read
/// back must be the same number, or JSON and YAML readings of one manifest drift apart.
#[test]
fn long_numbers_survive_a_json_round_trip() {
    let yaml = "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nx: 1344444444444444444444444444444444444444444444444444444444444444444444444444444444444444444\n";
    let m = miggate_compat::from_str(yaml).unwrap();
    let again = miggate_compat::from_str(&m.to_json().unwrap()).unwrap();
    assert_eq!(m.unknown_fields(), again.unknown_fields());
}

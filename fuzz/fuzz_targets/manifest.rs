//! Manifest bytes → `from_slice`. When a manifest reads: `evaluate` it against itself in both
//! modes, strict off and on (one row per check, no panic), and write it as JSON and as YAML;
//! each must read back to the same manifest, and the JSON written must be a fixed point.
//!
//! Unknown fields are compared as a set: the writer appends each one at the end of the object
//! it stood in, so a second read can list them in another order (documented in
//! `compat/tests/read.rs`, `unknown_fields_are_kept_and_reported_by_path`), and a key repeated
//! in the input is written once. Numbers must come back exactly (the workspace enables
//! serde_json's `float_roundtrip`; this target found the drift that made it necessary).
#![no_main]

use libfuzzer_sys::fuzz_target;
use miggate_compat::{CheckName, GpuManifest, Mode, Options, evaluate, from_slice, from_str, render_path};
use serde_json::Value;

/// The manifest with its unknown fields in path order, each path once.
fn normalised(m: &GpuManifest) -> GpuManifest {
    let mut m = m.clone();
    m.unknown_fields.sort_by_cached_key(|f| render_path(&f.path));
    m.unknown_fields.dedup_by(|a, b| a.path == b.path);
    m
}

/// Equal JSON values, object keys in the same order.
fn same_value(a: &Value, b: &Value) -> bool {
    a == b
}

/// Asserts that `back` (read from what `manifest` wrote as `how`) is the same manifest.
fn assert_same(back: &GpuManifest, manifest: &GpuManifest, how: &str, text: &str) {
    let (mut back, mut want) = (normalised(back), normalised(manifest));
    let values_agree = back.unknown_fields.len() == want.unknown_fields.len()
        && back
            .unknown_fields
            .iter()
            .zip(&want.unknown_fields)
            .all(|(a, b)| a.path == b.path && same_value(&a.value, &b.value));
    assert!(
        values_agree,
        "{how} round trip changed the unknown fields\n{:?}\n{:?}\n{text}",
        back.unknown_fields, want.unknown_fields
    );
    for f in back
        .unknown_fields
        .iter_mut()
        .chain(want.unknown_fields.iter_mut())
    {
        f.value = Value::Null;
    }
    assert_eq!(back, want, "{how} round trip changed the manifest\n{text}");
}

fuzz_target!(|data: &[u8]| {
    let Ok(manifest) = from_slice(data) else {
        return;
    };
    for mode in [Mode::Exact, Mode::Offer] {
        for strict in [false, true] {
            let options = Options {
                mode,
                strict,
                ..Options::default()
            };
            let report = evaluate(&manifest, &manifest, &options);
            assert_eq!(report.results.len(), CheckName::ALL.len());
        }
    }
    let _ = manifest.read_warnings();

    let json = manifest
        .to_json()
        .expect("a manifest that read must write as JSON");
    let back = from_str(&json).unwrap_or_else(|e| panic!("JSON written does not read back: {e}\n{json}"));
    assert_same(&back, &manifest, "JSON", &json);
    // Written again, the same document: same keys in the same order, same values.
    let again = back.to_json().expect("a manifest read back must write as JSON");
    let (first, second): (Value, Value) = (
        serde_json::from_str(&json).expect("written JSON is JSON"),
        serde_json::from_str(&again).expect("written JSON is JSON"),
    );
    assert!(
        same_value(&first, &second),
        "JSON written is not a fixed point\n{json}\n{again}"
    );

    let yaml = manifest
        .to_yaml()
        .expect("a manifest that read must write as YAML");
    let back = from_str(&yaml).unwrap_or_else(|e| panic!("YAML written does not read back: {e}\n{yaml}"));
    assert_same(&back, &manifest, "YAML", &yaml);
});

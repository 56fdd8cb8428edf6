//! Manifest bytes → `from_slice`. When a manifest reads: `evaluate` it against itself in both
//! modes, strict off and on (one row per check, no panic), and write it as JSON and as YAML;
//! each must read back to the same manifest, and the JSON written must be a fixed point.
//!
//! Unknown fields are kept per mapping, in read order, and a repeated key is an error, so a
//! round trip is exact. Numbers must come back exactly (the workspace enables serde_json's
//! `float_roundtrip`; this target found the drift that made it necessary).
#![no_main]

use libfuzzer_sys::fuzz_target;
use miggate_compat::{CheckName, GpuManifest, Mode, Options, evaluate, from_slice, from_str};
use serde_json::Value;

/// Asserts that `back` (read from what `manifest` wrote as `how`) is the same manifest: every
/// mapping keeps its unknown fields in read order and writes them back after its known ones,
/// so a round trip changes nothing.
fn assert_same(back: &GpuManifest, manifest: &GpuManifest, how: &str, text: &str) {
    assert_eq!(back, manifest, "{how} round trip changed the manifest\n{text}");
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
    // What plain serde reads (kube's path) is the same manifest.
    let body: GpuManifest = serde_json::from_value(manifest.to_value().expect("writes"))
        .expect("a manifest that read reads through plain serde too");
    assert_eq!(body, manifest);

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
        first == second,
        "JSON written is not a fixed point\n{json}\n{again}"
    );

    let yaml = manifest
        .to_yaml()
        .expect("a manifest that read must write as YAML");
    let back = from_str(&yaml).unwrap_or_else(|e| panic!("YAML written does not read back: {e}\n{yaml}"));
    assert_same(&back, &manifest, "YAML", &yaml);
});

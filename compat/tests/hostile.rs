#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Inputs an attacker would send, at the sizes that break quadratic or recursive code: each
//! test builds its input and pins the contract (an answer or a clear error, never an abort,
//! a stall or a smuggled device pair). Sizes are those of the findings; the bounds on time are
//! generous (60 s for what a release build does in well under a second: debug builds on a busy
//! 2-core machine) and only catch a return to quadratic cost or a stall.

use std::time::{Duration, Instant};

use miggate_compat::{
    CheckName, Error, GpuManifest, MAX_MANIFEST_BYTES, Mode, Options, Outcome, evaluate, from_slice,
    from_str, parse_min_kernel,
};
use serde_json::{Value, json};

fn doc(devices: Vec<Value>) -> String {
    json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest", "nvidia": {"devices": devices}})
        .to_string()
}

fn within<T>(limit: Duration, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    assert!(took < limit, "took {took:?}, limit {limit:?}");
    out
}

/// Finding 1: a long chain of re-pairings overflowed the recursive augmenting path.
#[test]
fn a_long_pairing_chain_neither_aborts_nor_stalls() {
    let n = 60_000;
    let parent = "GPU-00000000-0000-0000-0000-000000000001";
    let mut src: Vec<Value> = (0..n - 1)
        .map(|i| json!({"uuid": format!("MIG-s{i}"), "parentUuid": parent}))
        .collect();
    src.push(json!({"uuid": "MIG-last", "parentUuid": parent, "productName": "M0"}));
    let tgt: Vec<Value> = (0..n)
        .map(|i| json!({"uuid": format!("MIG-t{i}"), "parentUuid": parent, "productName": format!("M{i}")}))
        .collect();
    let (s, t) = (from_str(&doc(src)).unwrap(), from_str(&doc(tgt)).unwrap());
    let r = within(Duration::from_secs(60), || evaluate(&s, &t, &Options::default()));
    assert!(r.compatible, "{}", r.reason);
    let map = r.device_map.expect("a map");
    assert_eq!(map.split(',').count(), n);
    // The one source device that needs M0 gets it.
    assert!(map.contains("MIG-last=MIG-t0"), "{}", &map[map.len() - 200..]);
}

/// Finding 2: pairing crowds of devices with other UUIDs was quadratic.
#[test]
fn crowds_of_alike_devices_pair_in_linear_time() {
    let n = 40_000;
    let side = |tag: &str| {
        let devices = (0..n)
            .map(|i| json!({"uuid": format!("GPU-{tag}{i}"), "productName": "NVIDIA H100 80GB HBM3"}))
            .collect();
        from_str(&doc(devices)).unwrap()
    };
    let (s, t) = (side("a"), side("b"));
    for mode in [Mode::Exact, Mode::Offer] {
        let r = within(Duration::from_secs(60), || evaluate(&s, &t, &Options::mode(mode)));
        assert!(r.compatible, "{}", r.reason);
        let map = r.device_map.unwrap();
        assert!(map.starts_with("GPU-a0=GPU-b0,GPU-a1=GPU-b1,"), "{}", &map[..60]);
    }
}

/// Finding 2 at the size limit: a 16 MiB manifest against itself.
#[test]
fn a_manifest_at_the_size_limit_against_itself() {
    let device = |i: usize| {
        json!({"uuid": format!("MIG-{i:08x}"), "parentUuid": format!("GPU-{:06x}", i / 7),
            "productName": "NVIDIA H100 80GB HBM3", "migProfile": "1g.10gb", "gpuInstanceId": i % 7})
    };
    let per = device(0).to_string().len() + 1;
    let n = (MAX_MANIFEST_BYTES - 200) / per;
    let text = doc((0..n).map(device).collect());
    assert!(text.len() <= MAX_MANIFEST_BYTES && text.len() > MAX_MANIFEST_BYTES - 4 * per);
    let m = within(Duration::from_secs(60), || from_str(&text).unwrap());
    let r = within(Duration::from_secs(60), || evaluate(&m, &m, &Options::default()));
    assert!(r.compatible, "{}", r.reason);
    assert_eq!(r.device_map.as_deref(), Some(""), "identity");
}

/// Finding 3: a UUID carrying the map's separators added a pair of its own.
#[test]
fn a_uuid_cannot_smuggle_a_device_pair() {
    for bad in [
        "GPU-2,GPU-9=GPU-7",
        "GPU-2\u{0}",
        "GPU-\u{fffd}",
        "GPU-2 ",
        "MIG-GPU-1/1/0,GPU-9",
    ] {
        let text = doc(vec![json!({"uuid": bad, "productName": "NVIDIA L4"})]);
        let err = from_str(&text).unwrap_err().to_string();
        assert!(err.contains("at nvidia.devices[0].uuid"), "{bad:?}: {err}");
        assert!(!err.contains('\0'), "{err:?}");
        let parent = doc(vec![json!({"uuid": "MIG-1", "parentUuid": bad})]);
        let err = from_str(&parent).unwrap_err().to_string();
        assert!(err.contains("at nvidia.devices[0].parentUuid"), "{bad:?}: {err}");
    }
}

/// Finding 9: a 40k-device YAML inventory hit serde-saphyr's default node budget while its
/// JSON twin was read.
#[test]
fn yaml_reads_what_json_reads() {
    let devices: Vec<Value> = (0..40_000)
        .map(|i| {
            json!({"uuid": format!("MIG-{i}"), "parentUuid": "GPU-1", "productName": "NVIDIA H100 80GB HBM3",
            "migProfile": "1g.10gb", "gpuInstanceId": i, "computeInstanceId": 0})
        })
        .collect();
    let json_text = doc(devices);
    let value: Value = serde_json::from_str(&json_text).unwrap();
    let yaml_text = serde_saphyr::to_string(&value).unwrap();
    let a = from_str(&json_text).unwrap();
    let b = from_str(&yaml_text).unwrap();
    assert_eq!(a, b);
}

/// Finding 9: the limits that remain are said in words.
#[test]
fn yaml_limits_are_said_in_words() {
    let deep = format!(
        "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nx: {}1{}\n",
        "[".repeat(200),
        "]".repeat(200)
    );
    let err = from_str(&deep).unwrap_err().to_string();
    assert!(err.contains("nests deeper than 32 levels"), "{err}");
    assert!(!err.contains("budget breached"), "{err}");
    let bomb = "apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
        .to_string()
        + &(0..40)
            .map(|i| {
                format!(
                    "b{i}: &b{i} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n",
                    p = if i == 0 {
                        "a".to_string()
                    } else {
                        format!("b{}", i - 1)
                    }
                )
            })
            .collect::<String>();
    let err = within(Duration::from_secs(60), || {
        from_str(&bomb).unwrap_err().to_string()
    });
    assert!(err.contains("aliases") || err.contains("nodes"), "{err}");
    assert!(!err.contains("budget breached"), "{err}");
}

/// Finding 10: a non-UTF-8 error gives line and column, not a byte index.
#[test]
fn non_utf8_input_names_line_and_column() {
    let mut bytes = b"apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nhost: {cpuArch: am".to_vec();
    bytes.push(0xff);
    let err = from_slice(&bytes).unwrap_err();
    assert!(matches!(err, Error::NotUtf8 { line: 3, column: 19 }), "{err}");
}

/// Finding 10: duplicate keys are refused in JSON as in YAML, known or not.
#[test]
fn duplicate_keys_are_refused_in_json_too() {
    for body in [r#""odd": 1, "odd": 2"#, r#""host": {}, "host": {}"#] {
        let text = format!(r#"{{"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest", {body}}}"#);
        let err = from_str(&text).unwrap_err().to_string();
        assert!(err.contains("duplicate field"), "{err}");
    }
}

/// Finding 10: `--min-kernel +5.+13` was accepted.
#[test]
fn signed_or_spaced_kernel_floors_are_refused() {
    for bad in ["+5.+13", "+5.13", "5.+13", " 5.13", "5.13\n"] {
        assert!(parse_min_kernel(bad).is_err(), "{bad:?}");
    }
}

/// Finding 6: manifest values quoted in messages are escaped.
#[test]
fn quoted_manifest_values_are_escaped() {
    let text = doc(vec![
        json!({"uuid": "MIG-1", "migProfile": "1g.10gb\u{1b}]0;owned\u{7}"}),
    ]);
    let err = from_str(&text).unwrap_err().to_string();
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
    let typo = json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest", "host": {"\u{202e}cpuArch": "amd64"}});
    let m = from_str(&typo.to_string()).unwrap();
    let w = m
        .read_warnings()
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!w.contains('\u{202e}'), "{w:?}");
    let r = evaluate(&m, &GpuManifest::new(), &Options::default());
    assert!(
        r.warnings.iter().all(|w| !w.to_string().contains('\u{202e}')),
        "{:?}",
        r.warnings
    );
    assert_eq!(r.result(CheckName::CPU_ARCH).unwrap().outcome, Outcome::Unknown);
}

/// A UUID repeated on every device of both sides pairs in linear time, by identity.
#[test]
fn a_uuid_repeated_everywhere_pairs_in_linear_time() {
    let n = 50_000;
    let side = || {
        let devices = (0..n)
            .map(|_| json!({"uuid": "GPU-1", "productName": "NVIDIA H100 80GB HBM3"}))
            .collect();
        from_str(&doc(devices)).unwrap()
    };
    let (s, t) = (side(), side());
    let r = within(Duration::from_secs(60), || evaluate(&s, &t, &Options::default()));
    assert!(r.compatible, "{}", r.reason);
    assert_eq!(r.device_map.as_deref(), Some(""));
}

/// Finding 9: JSON and YAML accept the same documents, nesting included: a value under an
/// unknown field may nest 32 levels in either, and one level more is refused in both.
#[test]
fn json_and_yaml_nest_alike() {
    let nested = |levels: usize| {
        let mut v = json!(1);
        for _ in 0..levels {
            v = json!([v]);
        }
        json!({"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest", "host": {"extra": v}})
    };
    for (levels, ok) in [(32, true), (33, false), (120, false)] {
        let value = nested(levels);
        let json_text = value.to_string();
        let yaml_text = serde_saphyr::to_string(&value).unwrap();
        let (j, y) = (from_str(&json_text), from_str(&yaml_text));
        assert_eq!(j.is_ok(), ok, "JSON at {levels}: {j:?}");
        assert_eq!(y.is_ok(), ok, "YAML at {levels}: {y:?}");
        if !ok {
            for e in [j.unwrap_err(), y.unwrap_err()] {
                assert!(e.to_string().contains("nests deeper than 32 levels"), "{e}");
            }
        }
    }
}

/// A strict reading refuses an unknown key of any size at the 16 MiB limit in linear time, and
/// its message stays bounded: the key is quoted escaped and cut, no suggestion is computed
/// for a key no known name is near, and the search for the key's line cannot go quadratic on
/// a document full of near-misses of it.
#[test]
fn a_strict_refusal_of_a_huge_key_is_bounded() {
    use miggate_compat::{ReadOptions, from_str_with};
    // YAML caps an implicit key at 1024 characters; JSON takes any.
    let long_key = "a".repeat(MAX_MANIFEST_BYTES / 4);
    let yaml_key = "a".repeat(1000);
    // Near-misses first: the key's prefix many times over, none followed by `:`.
    let filler = format!(
        "# {}\n",
        format!("{} ", &yaml_key[..999]).repeat(MAX_MANIFEST_BYTES / 2000)
    );
    for yaml in [true, false] {
        let key = if yaml { &yaml_key } else { &long_key };
        let text = if yaml {
            format!("apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\n{filler}host:\n  {key}: 1\n")
        } else {
            format!(
                r#"{{"apiVersion": "miggate.io/v1alpha1", "kind": "GpuManifest", "host": {{"{key}": 1}}}}"#
            )
        };
        assert!(text.len() <= MAX_MANIFEST_BYTES);
        let err = within(Duration::from_secs(60), || {
            from_str_with(&text, ReadOptions::strict())
        })
        .unwrap_err();
        assert!(
            matches!(err, Error::UnknownField { suggestion: None, .. }),
            "{err:.200}"
        );
        let message = err.to_string();
        assert!(message.len() < 8 * 1024, "{} bytes", message.len());
        assert!(message.starts_with("unknown field `host.aaaa"), "{message:.80}");
        if yaml {
            assert!(
                message.contains("at line 5 column 3"),
                "{}",
                &message[message.len() - 40..]
            );
        }
    }
}

//! Two manifests from one input → `evaluate` in both modes and strict or not. The input is split
//! at its first NUL byte (none: the second manifest is the first), so the fuzzer grows two
//! documents at once; run with a large `-max_len` to reach sizes that stress pairing and
//! reading (the reader refuses input over 16 MiB).
//!
//! Checked: no panic or abort, one row per check, and a refusal never carries a device map.
#![no_main]

use libfuzzer_sys::fuzz_target;
use miggate_compat::{CheckName, Mode, Options, evaluate, from_slice};

fuzz_target!(|data: &[u8]| {
    let (a, b) = match data.iter().position(|&x| x == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, data),
    };
    let (Ok(source), Ok(target)) = (from_slice(a), from_slice(b)) else {
        return;
    };
    for mode in [Mode::Exact, Mode::Offer] {
        for strict in [false, true] {
            let options = Options {
                mode,
                strict,
                ..Options::default()
            };
            let report = evaluate(&source, &target, &options);
            assert_eq!(report.results.len(), CheckName::ALL.len());
            if !report.compatible {
                assert!(report.device_map.is_none());
            }
        }
    }
});

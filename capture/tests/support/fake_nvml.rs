//! The fake `libnvidia-ml.so.1` (`capture/tests/fake_nvml/libnvidia_ml.rs`), compiled with
//! `rustc` once per scenario per test process. Shared by the capture and CLI tests through
//! `#[path]`, so both exercise the same fake.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

/// Per scenario, the path of its compiled library, filled by the first test that needs it.
type Built = Mutex<HashMap<&'static str, Arc<OnceLock<PathBuf>>>>;

/// The fake library for `scenario`, compiled on first use in this process.
pub fn fake(scenario: &'static str) -> PathBuf {
    static BUILT: OnceLock<Built> = OnceLock::new();
    let cell = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(scenario)
        .or_default()
        .clone();
    cell.get_or_init(|| compile(scenario)).clone()
}

fn compile(scenario: &str) -> PathBuf {
    // Both crates that use this live one level below the workspace root.
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../capture/tests/fake_nvml/libnvidia_ml.rs");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("fake-nvml")
        .join(scenario);
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("libnvidia-ml.so.1");
    // Built under a name of this process's own, then renamed: another test run compiling the same
    // scenario at the same time never loads a half-written file.
    let partial = dir.join(format!("libnvidia-ml.so.1.{}.partial", std::process::id()));
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = Command::new(&rustc)
        .args([
            "--crate-type",
            "cdylib",
            "-O",
            "--edition",
            "2021",
            "--crate-name",
            "nvidia_ml",
        ])
        .arg("--cfg")
        .arg(format!("scenario=\"{scenario}\""))
        .arg(&source)
        .arg("-o")
        .arg(&partial)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {rustc:?}: {e}"));
    assert!(
        out.status.success(),
        "compiling the fake NVML for {scenario} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&partial, &lib).unwrap();
    lib
}

//! `miggate check` fed hostile text: file names, flag values and manifest values holding
//! terminal escapes (ESC, BEL), bidi overrides (U+202E) or megabytes. Whatever reaches the
//! terminal is escaped and bounded, the exit status keeps its contract, nothing panics.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use miggate_compat::escape::is_hazard;

/// An OSC title set ended by BEL, a clear screen, and a right-to-left override.
const NASTY: &str = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{202e}";
/// [`NASTY`] as `escape` writes it.
const NASTY_ESCAPED: &str = "\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\u{202e}";

fn manifests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("testdata/manifests")
}

fn good() -> PathBuf {
    manifests().join("restore-h100-whole.yaml")
}

fn miggate<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// Fails when `bytes` hold a character a terminal would act on (line breaks aside).
fn assert_clean(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let bad: Vec<char> = text.chars().filter(|&c| c != '\n' && is_hazard(c)).collect();
    assert!(bad.is_empty(), "{what} holds {bad:?}:\n{text}");
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_missing_file_with_escapes_in_its_name_is_quoted_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("gone{NASTY}.yaml"));
    let out = miggate([OsStr::new("check"), path.as_os_str(), good().as_os_str()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_clean("stderr", &out.stderr);
    let err = stderr(&out);
    assert!(err.contains("cannot open source manifest"), "{err}");
    assert!(err.contains(&format!("gone{NASTY_ESCAPED}.yaml")), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_manifest_with_escapes_in_its_name_is_escaped_in_the_report_header() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("m{NASTY}.yaml"));
    std::fs::copy(good(), &path).unwrap();
    let out = miggate([OsStr::new("check"), path.as_os_str(), path.as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_clean("stdout", &out.stdout);
    assert_clean("stderr", &out.stderr);
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(report.contains(&format!("m{NASTY_ESCAPED}.yaml")), "{report}");
}

#[test]
fn a_file_name_that_is_not_utf8_is_shown_and_the_check_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(OsStr::from_bytes(b"m\xff\x1b.yaml"));
    std::fs::copy(good(), &path).unwrap();
    let out = miggate([OsStr::new("check"), path.as_os_str(), good().as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_clean("stdout", &out.stdout);
}

/// The whole-GPU restore manifest with one product name replaced by `name` (a YAML
/// double-quoted string, escapes and all).
fn with_product_name(dir: &Path, name: &str) -> PathBuf {
    let body = std::fs::read_to_string(good()).unwrap().replacen(
        "productName: NVIDIA H100 80GB HBM3",
        &format!("productName: \"{name}\""),
        1,
    );
    let path = dir.join("target.yaml");
    std::fs::write(&path, body).unwrap();
    path
}

#[test]
fn a_product_name_with_escapes_and_a_bidi_override_is_escaped_in_the_text_report() {
    let dir = tempfile::tempdir().unwrap();
    let target = with_product_name(dir.path(), r"NVIDIA H100\u202E\e]0;owned\a");
    let out = miggate([OsStr::new("check"), good().as_os_str(), target.as_os_str()]);
    // gpu-model compares product names: the target's differs.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_clean("stdout", &out.stdout);
    let report = String::from_utf8(out.stdout).unwrap();
    let shown = "NVIDIA H100\\u{202e}\\u{1b}]0;owned\\u{7}";
    // The table cell (cut to the column), and whole in the reason.
    assert!(report.contains("NVIDIA H100\\u{202e}\\u{1b}]0;own"), "{report}");
    assert!(
        report
            .lines()
            .any(|l| l.starts_with("reason:") && l.contains(shown)),
        "{report}"
    );
}

#[test]
fn a_product_name_with_escapes_stays_exact_in_json_but_escaped_on_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let target = with_product_name(dir.path(), r"NVIDIA H100\u202E\e]0;owned\a\x7F\u009Bz");
    let out = miggate([
        OsStr::new("check"),
        good().as_os_str(),
        target.as_os_str(),
        OsStr::new("-o"),
        OsStr::new("json"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_clean("stdout", &out.stdout);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(r"NVIDIA H100\u202e\u001b]0;owned\u0007\u007f\u009bz"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let gpu_model = json["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["check"] == "gpu-model")
        .unwrap();
    let target_value = gpu_model["target"].as_str().unwrap();
    assert!(
        target_value.contains("NVIDIA H100\u{202e}\u{1b}]0;owned\u{7}\u{7f}\u{9b}z"),
        "{target_value:?}"
    );
}

#[test]
fn a_manifest_value_quoted_in_a_parse_error_is_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pod.yaml");
    std::fs::write(&path, "apiVersion: \"v1\\e]0;owned\\a\\u202E\"\nkind: Pod\n").unwrap();
    let out = miggate([OsStr::new("check"), path.as_os_str(), good().as_os_str()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_clean("stderr", &out.stderr);
    assert!(stderr(&out).contains("pod.yaml"), "{}", stderr(&out));
}

#[test]
fn an_unknown_flag_with_escapes_is_quoted_escaped() {
    let out = miggate([
        OsString::from("check"),
        good().into_os_string(),
        good().into_os_string(),
        OsString::from(format!("--x{NASTY}")),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_clean("stderr", &out.stderr);
    assert!(stderr(&out).contains(NASTY_ESCAPED), "{}", stderr(&out));
}

#[test]
fn a_bad_mode_with_escapes_is_quoted_escaped() {
    let out = miggate([
        OsString::from("check"),
        good().into_os_string(),
        good().into_os_string(),
        OsString::from("--mode"),
        OsString::from(NASTY),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_clean("stderr", &out.stderr);
    assert!(stderr(&out).contains(NASTY_ESCAPED), "{}", stderr(&out));
}

//! `miggate check` fed hostile text: file names, flag values and manifest values holding
//! terminal escapes (ESC, BEL), bidi overrides (U+202E) or megabytes. Whatever reaches the
//! terminal is escaped and bounded, the exit status keeps its contract, nothing panics.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use miggate_compat::escape::is_hazard;
use support::workspace_root;

/// An OSC title set ended by BEL, a clear screen, and a right-to-left override.
const NASTY: &str = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{202e}";
/// [`NASTY`] as `escape` writes it.
const NASTY_ESCAPED: &str = "\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\u{202e}";

fn manifests() -> PathBuf {
    workspace_root().join("testdata/manifests")
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

/// `miggate check GOOD GOOD <flags…>`.
fn check_with(flags: &[&OsStr]) -> Output {
    let good = good();
    let mut args = vec![OsStr::new("check"), good.as_os_str(), good.as_os_str()];
    args.extend_from_slice(flags);
    miggate(args)
}

#[test]
fn a_skip_value_with_escapes_is_quoted_escaped() {
    let value = format!("gpu-count,bad{NASTY}");
    let out = check_with(&[OsStr::new("--skip"), OsStr::new(&value)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_clean("stderr", &out.stderr);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("unknown check `bad{NASTY_ESCAPED}`")),
        "{err}"
    );
    assert!(err.contains("--skip"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_min_kernel_value_with_escapes_is_quoted_escaped() {
    let value = format!("5.{NASTY}");
    let out = check_with(&[OsStr::new("--min-kernel"), OsStr::new(&value)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_clean("stderr", &out.stderr);
    let err = stderr(&out);
    assert!(err.contains(&format!("'5.{NASTY_ESCAPED}'")), "{err}");
    assert!(err.contains("--min-kernel"), "{err}");
}

#[test]
fn a_min_driver_value_with_escapes_is_quoted_escaped() {
    let out = check_with(&[OsStr::new("--min-driver"), OsStr::new(NASTY)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_clean("stderr", &out.stderr);
    assert!(stderr(&out).contains(NASTY_ESCAPED), "{}", stderr(&out));
}

#[test]
fn a_skip_value_that_is_not_utf8_is_an_error_not_a_panic() {
    let out = check_with(&[OsStr::new("--skip"), OsStr::from_bytes(b"mount,\xff\x1b[2J")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_clean("stderr", &out.stderr);
    assert!(stderr(&out).contains("not UTF-8"), "{}", stderr(&out));
}

/// The longest single argument Linux passes to a program is 128 KiB (`MAX_ARG_STRLEN`), so a
/// value just under it stands for "huge".
const HUGE: usize = 120_000;

#[test]
fn a_huge_skip_value_gives_a_bounded_message() {
    let value = "a".repeat(HUGE);
    let out = check_with(&[OsStr::new("--skip"), OsStr::new(&value)]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.len() < 5 * 1024, "{} bytes", err.len());
    assert!(err.contains("more bytes cut]"), "{err}");
    // What failed is still said: the flag, and what the names could have been.
    assert!(
        err.contains("--skip") && err.contains("known checks: cpu-arch"),
        "{err}"
    );
}

#[test]
fn a_huge_min_kernel_value_of_escapes_gives_a_bounded_message() {
    let value = "\u{1b}".repeat(HUGE);
    let out = check_with(&[OsStr::new("--min-kernel"), OsStr::new(&value)]);
    assert_eq!(out.status.code(), Some(2));
    assert_clean("stderr", &out.stderr);
    let err = stderr(&out);
    assert!(err.len() < 5 * 1024, "{} bytes", err.len());
    assert!(err.contains("--min-kernel"), "{err}");
}

#[test]
fn a_huge_unknown_flag_gives_a_bounded_message() {
    let flag = format!("--{}", "\u{202e}".repeat(HUGE / 3));
    let out = check_with(&[OsStr::new(&flag)]);
    assert_eq!(out.status.code(), Some(2));
    assert_clean("stderr", &out.stderr);
    // clap quotes the flag on two lines (the error and a tip); each line is bounded.
    assert!(stderr(&out).len() < 9 * 1024, "{} bytes", stderr(&out).len());
}

#[test]
fn flags_read_into_their_values_still_work() {
    let out = check_with(&[
        OsStr::new("--skip"),
        OsStr::new(" mount , gpu-count "),
        OsStr::new("--min-kernel"),
        OsStr::new("6.1"),
        OsStr::new("--min-driver"),
        OsStr::new("590"),
        OsStr::new("-o"),
        OsStr::new("json"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let outcome = |check: &str| {
        json["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["check"] == check)
            .unwrap()["outcome"]
            .clone()
    };
    assert_eq!(outcome("mount"), "skipped");
    assert_eq!(outcome("gpu-count"), "skipped");
    assert_eq!(outcome("kernel-minimum"), "refuse");
    assert_eq!(outcome("driver-minimum"), "refuse");
    // The defaults are compat's.
    let out = check_with(&[OsStr::new("-o"), OsStr::new("json")]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (major, minor) = miggate_compat::DEFAULT_MIN_KERNEL;
    let floor = json["results"][2]["source"].as_str().unwrap().to_string();
    assert_eq!(floor, format!("{major}.{minor} or newer"));
}

#[test]
fn a_closed_standard_output_exits_2_saying_so() {
    let good = good();
    // `Stdio::null()` would hand over /dev/null, which is open; the shell closes fd 1.
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#""$0" check "$1" "$1" >&-"#)
        .arg(env!("CARGO_BIN_EXE_miggate"))
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("standard output is closed"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn output_sent_to_dev_null_is_not_a_closed_output() {
    let good = good();
    // `>/dev/null` (write-only) and a read-write /dev/null, as Python's subprocess.DEVNULL and
    // Node's 'ignore' hand over: both mean "discard it", and the verdict stands.
    for read in [false, true] {
        let null = std::fs::OpenOptions::new()
            .read(read)
            .write(true)
            .open("/dev/null")
            .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_miggate"))
            .args([OsStr::new("check"), good.as_os_str(), good.as_os_str()])
            .stdout(null)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "read {read}: {}", stderr(&out));
        assert!(out.stderr.is_empty(), "{}", stderr(&out));
    }
}

#[test]
fn a_reader_that_stops_early_is_not_a_failure() {
    let good = good();
    let mut child = Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args([OsStr::new("check"), good.as_os_str(), good.as_os_str()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // `| head -c0`: the reader goes before (or after) the report is written.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(out.stderr.is_empty(), "{}", stderr(&out));
}

#[test]
fn a_manifest_that_is_not_utf8_is_located_by_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latin1.yaml");
    std::fs::write(
        &path,
        b"apiVersion: miggate.io/v1alpha1\nkind: GpuManifest\nhost: {nodeName: n\xe9ud}\n",
    )
    .unwrap();
    let out = miggate([OsStr::new("check"), path.as_os_str(), good().as_os_str()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("latin1.yaml"), "{err}");
    assert!(err.contains("line") && err.contains("column"), "{err}");
}

//! `miggate doctor` as a user runs it, where no cluster answers: the one failing line names the
//! API server and the fix, exit status 1 (a finding, not bad input), and `-o json` says the
//! same. The real cluster's checks are e2e/tests/60-doctor.sh.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::{Command, Output};

mod support;

fn doctor(args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let kc = support::unreachable_kubeconfig(dir.path());
    Command::new(env!("CARGO_BIN_EXE_miggate"))
        .arg("doctor")
        .arg("--kubeconfig")
        .arg(&kc)
        .args(args)
        .env("MIGGATE_LOG", "off")
        .output()
        .unwrap()
}

#[test]
fn an_unreachable_cluster_is_one_failing_line() {
    let out = doctor(&[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with("✖ cluster  cannot reach the API server: "),
        "{text}"
    );
    assert_eq!(
        lines[1].trim(),
        "hint: check --kubeconfig and --context (kubectl version says the same)"
    );
    assert_eq!(lines[2], "0 passed, 0 at risk, 1 failed");
}

#[test]
fn json_says_the_same() {
    let out = doctor(&["-o", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["failed"], 1);
    assert_eq!(report["passed"], 0);
    assert_eq!(report["findings"][0]["area"], "cluster");
    assert_eq!(report["findings"][0]["status"], "fail");
    assert!(
        report["findings"][0]["hint"]
            .as_str()
            .unwrap()
            .contains("--kubeconfig")
    );
}

#[test]
fn a_typo_in_the_output_format_is_bad_input() {
    assert_eq!(doctor(&["-o", "jsno"]).status.code(), Some(2));
}

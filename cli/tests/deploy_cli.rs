//! The retired `miggate deploy` as a script written for it runs it: with or without its old
//! flags, it fails with exit status 2 and says where the install went, once, on stderr.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;

use rstest::rstest;
use support::workspace_root;

#[rstest]
#[case::bare(&["deploy"])]
#[case::old_flags(&["deploy", "--image", "registry.example.com/miggate:0.1.0", "--out", "my-deploy"])]
#[case::help_word(&["deploy", "--help"])]
fn deploy_says_where_the_install_went(#[case] args: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_miggate"))
        .args(args)
        .current_dir(workspace_root())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "nothing on stdout for a pipe to apply");
    let stderr = String::from_utf8(out.stderr).unwrap();
    insta::assert_snapshot!("deploy_retired", stderr);
    assert!(!workspace_root().join("my-deploy").exists(), "no files written");
}

#[test]
fn deploy_is_not_listed_in_help() {
    let out = Command::new(env!("CARGO_BIN_EXE_miggate"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("doctor"), "{help}");
    assert!(!help.contains("deploy"), "{help}");
}

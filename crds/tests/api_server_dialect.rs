//! What the Kubernetes API server, not a Rust reader, makes of the install's (`deploy/`, the
//! chart rendered with its defaults) schemas and rules: every regular expression compiled by
//! Go's own `regexp` (the API server compiles a CRD's `pattern` and CEL's `matches()` with it),
//! and every `format` one the server knows.
//!
//! Rust's `regex` accepts escapes RE2 does not, so a CRD every Rust-side test passes can still
//! be refused by the API server (`invalid escape sequence: \u`), and a format it does not know
//! is warned on at every apply (`unrecognized format "uint32"`). The expressions are sent to
//! `tests/go/regexp_check.go`, which uses only Go's standard library. Without a `go` on PATH
//! the check says so and passes, except under CI (`CI` set), where `.ci/run` installs Debian's
//! golang-go and a missing Go fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use regex::Regex;
use serde_json::{Value, json};
use support::deploy_docs;

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every string in `doc` under a key named `key`, with its JSON pointer. Walked with a stack.
fn strings_under<'a>(doc: &'a Value, keys: &[&str]) -> Vec<(String, &'a str)> {
    let mut out = Vec::new();
    let mut stack: Vec<(&Value, String)> = vec![(doc, String::new())];
    while let Some((node, at)) = stack.pop() {
        match node {
            Value::Object(map) => {
                for (k, v) in map {
                    let here = format!("{at}/{k}");
                    match v {
                        Value::String(s) if keys.contains(&k.as_str()) => out.push((here, s.as_str())),
                        _ => stack.push((v, here)),
                    }
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    stack.push((v, format!("{at}/{i}")));
                }
            }
            _ => {}
        }
    }
    out.sort();
    out
}

/// The regular expressions of a CEL expression: the string literal given to `matches`,
/// `find` or `findAll`, single- or double-quoted.
fn cel_regexes(expression: &str) -> Vec<String> {
    let call =
        Regex::new(r#"\.(?:matches|find|findAll)\(\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")"#).unwrap();
    call.captures_iter(expression)
        .map(|c| {
            let literal = c.get(1).or_else(|| c.get(2)).unwrap().as_str();
            // CEL unescapes `\\` to `\` in a plain string literal.
            literal.replace(r"\\", r"\")
        })
        .collect()
}

/// Every regular expression of the install: each schema `pattern` and each CEL regex in a CRD
/// rule, a policy, or a webhook's match conditions.
fn install_regexes() -> Vec<Value> {
    let mut out = Vec::new();
    for (file, doc) in deploy_docs() {
        let what = format!(
            "{file}: {} {}",
            doc["kind"].as_str().unwrap_or("?"),
            doc["metadata"]["name"].as_str().unwrap_or("?")
        );
        for (at, pattern) in strings_under(&doc, &["pattern"]) {
            out.push(json!({"at": format!("{what} {at}"), "pattern": pattern}));
        }
        for (at, expression) in strings_under(&doc, &["rule", "expression", "messageExpression"]) {
            for pattern in cel_regexes(expression) {
                out.push(json!({"at": format!("{what} {at}"), "pattern": pattern}));
            }
        }
    }
    out
}

/// Go's verdict on `entries`: `None` when no `go` can be run here (outside CI), else the exit
/// code and what the checker printed.
fn go_compile(entries: &[Value]) -> Option<(i32, String)> {
    let scratch = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go");
    std::fs::create_dir_all(&scratch).unwrap();
    let spawned = Command::new("go")
        .arg("run")
        .arg(manifest_dir().join("tests/go/regexp_check.go"))
        .env("GOCACHE", scratch.join("cache"))
        .env("GOPATH", scratch.join("path"))
        .env("GOFLAGS", "")
        .env("GO111MODULE", "on")
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .current_dir(&scratch)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && std::env::var_os("CI").is_none() => {
            eprintln!(
                "SKIPPED: no `go` on PATH, so the install's regular expressions were not compiled by Go's regexp \
                 (`apt-get install golang-go`; under CI this fails)"
            );
            return None;
        }
        Err(e) => panic!("cannot run `go` (install Debian's golang-go): {e}"),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::to_string(entries).unwrap().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    assert!(
        code == 0 || code == 1,
        "the checker failed to run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some((code, String::from_utf8_lossy(&out.stdout).into_owned()))
}

#[test]
fn every_regular_expression_of_the_install_compiles_in_gos_regexp() {
    let entries = install_regexes();
    // The CRDs' UUID and profile patterns at the least, in both CRDs.
    assert!(entries.len() >= 8, "{entries:#?}");
    if let Some((code, out)) = go_compile(&entries) {
        assert_eq!(code, 0, "Go's regexp refuses what the API server would:\n{out}");
        assert!(
            out.ends_with(&format!("{} compiled, 0 refused\n", entries.len())),
            "{out}"
        );
    }
}

#[test]
fn the_checker_refuses_what_go_refuses() {
    // The escape the API server refused in the CRDs once, lookaround, and a bad class: all
    // accepted by at least one of Rust's regex or ECMA-262, all refused by RE2.
    let bad = [r"^[^\s\u0000-\u001f]+$", r"^(?=a)b$", r"[z-a]"];
    let mut entries: Vec<Value> = bad
        .iter()
        .enumerate()
        .map(|(i, p)| json!({"at": format!("bad {i}"), "pattern": p}))
        .collect();
    entries.push(json!({"at": "good", "pattern": r"^[^\s\x00-\x1f\x7f-\x9f]+$"}));
    if let Some((code, out)) = go_compile(&entries) {
        assert_eq!(code, 1, "{out}");
        for i in 0..bad.len() {
            assert!(out.contains(&format!("bad {i}: error parsing regexp")), "{out}");
        }
        assert!(!out.contains("good:"), "{out}");
        assert!(out.ends_with("1 compiled, 3 refused\n"), "{out}");
    }
}

#[test]
fn cel_regexes_are_found_in_both_quotings() {
    assert_eq!(
        cel_regexes(r#"self.matches('^a\\d$') && x.find("b+") == '' && y.size() > 0"#),
        [r"^a\d$", "b+"]
    );
    assert_eq!(cel_regexes("self.name == 'matches'"), Vec::<String>::new());
}

/// The formats the API server knows, by type (apiextensions-apiserver's supported formats;
/// any other is dropped with a warning on every apply). Strings compare with `-` removed, as
/// the server normalises them (`date-time` is `datetime`).
fn known_format(kind: &str, format: &str) -> bool {
    const STRING: [&str; 26] = [
        "bsonobjectid",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
        "uuid3",
        "uuid4",
        "uuid5",
        "isbn",
        "isbn10",
        "isbn13",
        "creditcard",
        "ssn",
        "hexcolor",
        "rgbcolor",
        "byte",
        "password",
        "date",
        "duration",
        "datetime",
        "k8s-short-name",
        "k8s-long-name",
    ];
    match kind {
        "string" | "" => {
            let normalised = format.replace('-', "");
            STRING.iter().any(|f| f.replace('-', "") == normalised)
        }
        "integer" => ["int32", "int64"].contains(&format),
        "number" => ["float", "double"].contains(&format),
        _ => false,
    }
}

/// Every `format` in a CRD schema with the `type` beside it, walked with a stack.
fn formats(schema: &Value) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut stack: Vec<(&Value, String)> = vec![(schema, String::new())];
    while let Some((node, at)) = stack.pop() {
        let Some(map) = node.as_object() else { continue };
        if let Some(Value::String(format)) = map.get("format") {
            let kind = map.get("type").and_then(Value::as_str).unwrap_or_default();
            out.push((at.clone(), kind.to_string(), format.clone()));
        }
        if let Some(Value::Object(props)) = map.get("properties") {
            for (k, v) in props {
                stack.push((v, format!("{at}.{k}")));
            }
        }
        for (key, mark) in [("items", "[]"), ("additionalProperties", "{}")] {
            if let Some(child @ Value::Object(_)) = map.get(key) {
                stack.push((child, format!("{at}{mark}")));
            }
        }
    }
    out
}

#[test]
fn every_schema_format_is_one_the_api_server_knows() {
    let mut seen = 0;
    for (file, doc) in deploy_docs() {
        if doc["kind"] != "CustomResourceDefinition" {
            continue;
        }
        for version in doc["spec"]["versions"].as_array().unwrap() {
            let schema = &version["schema"]["openAPIV3Schema"];
            for (at, kind, format) in formats(schema) {
                seen += 1;
                assert!(
                    known_format(&kind, &format),
                    "{file}: {} {at}: format `{format}` on type `{kind}` is unknown to the API server",
                    doc["metadata"]["name"]
                );
            }
        }
    }
    assert!(seen > 0, "the CRDs carry date-time and int64 formats");
}

#[rstest::rstest]
#[case("string", "date-time", true)]
#[case("string", "datetime", true)]
#[case("integer", "int64", true)]
#[case("integer", "uint32", false)]
#[case("integer", "uint64", false)]
#[case("number", "double", true)]
#[case("string", "int64", false)]
#[case("boolean", "byte", false)]
fn known_formats_are_the_servers(#[case] kind: &str, #[case] format: &str, #[case] known: bool) {
    assert_eq!(known_format(kind, format), known);
}

#[test]
fn unsigned_fields_keep_their_bounds() {
    let crd = miggate_crds::crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "GpuNode")
        .unwrap();
    let schema = serde_json::to_value(crd.spec.versions[0].schema.as_ref().unwrap()).unwrap();
    let devices = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["manifest"]["properties"]["nvidia"]
        ["properties"]["devices"]["items"]["properties"];
    let gi = &devices["gpuInstanceId"];
    assert_eq!(gi["format"], "int64");
    assert_eq!(gi["minimum"].as_f64(), Some(0.0));
    assert_eq!(gi["maximum"].as_f64(), Some(f64::from(u32::MAX)));
    let memory = &devices["memoryMiB"];
    assert_eq!(memory["format"], "int64");
    assert_eq!(memory["minimum"].as_f64(), Some(0.0));
}

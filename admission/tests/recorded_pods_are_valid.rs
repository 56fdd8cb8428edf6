//! The pods of the recorded AdmissionReviews are pods a real API server would admit to the
//! webhook at all: it validates a pod before any validating webhook sees it, so a fixture the
//! server would refuse tests a request that can never arrive.
//!
//! Four fixtures asked for 64Gi of memory under a 16Gi limit, which the API server refuses
//! (`must be less than or equal to memory limit`) and the tests never noticed. These are the
//! server's resource rules for the fields the fixtures use.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::cmp::Ordering;

use miggate_compat::Quantity;
use serde_json::Value;
use support::testdata_path;

mod support;

/// What the API server's pod validation says of one container's resources, one line per rule
/// broken: a request above its limit, and an extended resource (any name with a domain other
/// than `kubernetes.io`, such as `nvidia.com/gpu`) whose request differs from its limit or
/// that has a request and no limit.
fn resource_problems(container: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let name = container["name"].as_str().unwrap_or("?");
    let limits = container["resources"]["limits"].as_object();
    let requests = container["resources"]["requests"].as_object();
    let quantity = |v: &Value| Quantity::new(v.as_str().map_or_else(|| v.to_string(), str::to_string));
    for (resource, request) in requests.into_iter().flatten() {
        let limit = limits.and_then(|l| l.get(resource));
        let extended = resource.contains('/') && !resource.contains("kubernetes.io/");
        match limit {
            Some(limit) => match quantity(request).compare(&quantity(limit)) {
                Some(Ordering::Greater) => out.push(format!(
                    "{name}: {resource} request {request} over its limit {limit}"
                )),
                Some(Ordering::Less) if extended => out.push(format!(
                    "{name}: {resource} request {request} differs from its limit {limit}"
                )),
                None => out.push(format!(
                    "{name}: {resource} request {request} or limit {limit} is not a quantity"
                )),
                _ => {}
            },
            None if extended => out.push(format!("{name}: {resource} requested without a limit")),
            None => {}
        }
    }
    out
}

fn recorded_pods() -> Vec<(String, Value)> {
    let dir = testdata_path("admission");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let Ok(review) = serde_json::from_str::<Value>(&std::fs::read_to_string(&path).unwrap()) else {
            continue; // malformed.json is malformed on purpose
        };
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        for key in ["object", "oldObject"] {
            let object = &review["request"][key];
            if object["kind"] == "Pod" {
                out.push((format!("{file} {key}"), object.clone()));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn every_recorded_pod_meets_the_api_servers_resource_rules() {
    let pods = recorded_pods();
    assert!(pods.len() >= 15, "{}", pods.len());
    for (what, pod) in pods {
        for container in pod["spec"]["containers"].as_array().unwrap() {
            let problems = resource_problems(container);
            assert!(problems.is_empty(), "{what}: {problems:?}");
        }
    }
}

#[rstest::rstest]
#[case::fits(
    r#"{"name": "c", "resources": {"limits": {"memory": "16Gi"}, "requests": {"memory": "8Gi"}}}"#,
    0
)]
#[case::over(
    r#"{"name": "c", "resources": {"limits": {"memory": "16Gi"}, "requests": {"memory": "64Gi"}}}"#,
    1
)]
#[case::gpu_equal(
    r#"{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "2"}}}"#,
    0
)]
#[case::gpu_under(
    r#"{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "1"}}}"#,
    1
)]
#[case::gpu_without_limit(r#"{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}"#, 1)]
#[case::cpu_without_limit(r#"{"name": "c", "resources": {"requests": {"cpu": "1"}}}"#, 0)]
fn the_rules_refuse_what_the_server_refuses(#[case] container: &str, #[case] problems: usize) {
    let container: Value = serde_json::from_str(container).unwrap();
    assert_eq!(resource_problems(&container).len(), problems, "{container}");
}

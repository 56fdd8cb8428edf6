//! The few facts a person wants from `kubectl get`: the GPU model, the devices by MIG profile,
//! the driver. `kubectl`'s printer columns are JSONPath into the object and cannot count or
//! join, so the text is computed from the manifest and stored beside it: by miggate's own
//! library when it writes an object, and by the webhook's summary mutation
//! (`miggate_webhook::summary`) for every other writer. The CRDs do not require it: a derived
//! field is not a writer's to compute.

use std::collections::{BTreeMap, BTreeSet};

use miggate_compat::escape::{escape_within, is_hazard};
use miggate_compat::{DeviceKind, GpuManifest, SliceShape};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How many distinct entries a summary field lists before it says how many more there are:
/// enough for any real node, and a bound on what a crafted manifest can put in a column.
pub const MAX_SUMMARY_ENTRIES: usize = 8;

/// How many bytes one listed name keeps: a column is for a glance, not for the whole text.
const MAX_NAME_BYTES: usize = 64;

/// A manifest in three short texts, for `kubectl get` columns. For people only: every decision
/// reads `spec.manifest`, never this, so a stale or hand-edited summary misleads nobody's check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// The GPU product names, distinct, in the order the devices list them
    /// (`NVIDIA H100 80GB HBM3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The devices a workload can be given, counted by MIG profile, then whole GPUs
    /// (`1g.10gb x7, 3g.40gb x1, whole x2`); `none` when the manifest lists no device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profiles: Option<String>,
    /// The NVIDIA driver version (`580.82.07`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
}

impl Summary {
    /// Computes the summary of a manifest. Pure: the same manifest always gives the same text,
    /// so a publisher that rewrites an unchanged inventory writes an unchanged object.
    ///
    /// Absent facts stay absent (an empty column), so unknown never reads as none.
    pub fn of(manifest: &GpuManifest) -> Summary {
        let nvidia = manifest.nvidia.as_ref();
        let devices = nvidia.and_then(|n| n.devices.as_deref());
        let gpus = nvidia.and_then(|n| n.gpus.as_deref());

        // Devices name what a workload is given; a slice carries its parent card's name.
        // Without a named device, the physical GPUs are the next best source of the model.
        let device_models: Vec<&str> = devices.into_iter().flatten().filter_map(|d| d.model()).collect();
        let names: Vec<&str> = if device_models.is_empty() {
            gpus.into_iter()
                .flatten()
                .filter_map(|g| g.product_name.as_deref().map(str::trim).filter(|n| !n.is_empty()))
                .collect()
        } else {
            device_models
        };
        // A set for the test, so a crowd of distinct names stays linear-logarithmic.
        let mut seen = BTreeSet::new();
        let models: Vec<&str> = names.into_iter().filter(|n| seen.insert(*n)).collect();
        let model = (!models.is_empty()).then(|| list(models.into_iter().map(clean).collect()));

        let profiles = devices.map(|devices| {
            // Slices by profile (sorted by name, so the text is stable), then the other kinds.
            let mut slices: BTreeMap<&str, usize> = BTreeMap::new();
            let (mut whole, mut unshaped, mut unknown) = (0usize, 0usize, 0usize);
            for d in devices {
                match (d.kind(), d.slice_shape()) {
                    (DeviceKind::Slice, Some(SliceShape::Known(p))) => {
                        *slices.entry(p.as_str()).or_default() += 1
                    }
                    (DeviceKind::Slice, _) => unshaped += 1,
                    (DeviceKind::Whole, _) => whole += 1,
                    (DeviceKind::Unknown, _) => unknown += 1,
                }
            }
            let mut entries: Vec<String> = slices
                .into_iter()
                .map(|(p, n)| format!("{} x{n}", clean(p)))
                .collect();
            for (word, n) in [("whole", whole), ("slice", unshaped), ("unknown", unknown)] {
                if n > 0 {
                    entries.push(format!("{word} x{n}"));
                }
            }
            if entries.is_empty() {
                "none".to_string()
            } else {
                list(entries)
            }
        });

        let driver = nvidia
            .and_then(|n| n.driver_version.as_ref())
            .map(|v| clean(v.as_str()))
            .filter(|v| !v.is_empty());

        Summary {
            model,
            profiles,
            driver,
        }
    }
}

/// A name as a column shows it: hazards (controls, bidi overrides) escaped, length bounded.
fn clean(text: &str) -> String {
    if text.len() <= MAX_NAME_BYTES && !text.chars().any(is_hazard) {
        return text.to_string();
    }
    escape_within(text, MAX_NAME_BYTES).into_owned()
}

/// Entries joined with `, `, at most [`MAX_SUMMARY_ENTRIES`] of them, then `+N more`.
fn list(mut entries: Vec<String>) -> String {
    let total = entries.len();
    if total > MAX_SUMMARY_ENTRIES {
        entries.truncate(MAX_SUMMARY_ENTRIES);
        entries.push(format!("+{} more", total - MAX_SUMMARY_ENTRIES));
    }
    entries.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn summary(nvidia: serde_json::Value) -> Summary {
        let manifest: GpuManifest = serde_json::from_value(json!({ "nvidia": nvidia })).unwrap();
        Summary::of(&manifest)
    }

    #[test]
    fn nothing_known_gives_empty_columns() {
        assert_eq!(Summary::of(&GpuManifest::new()), Summary::default());
        assert_eq!(summary(json!({})), Summary::default());
    }

    #[rstest]
    #[case::no_device(json!([]), None, "none")]
    #[case::whole_and_slices(
        json!([
            {"uuid": "GPU-a", "productName": "NVIDIA A100-SXM4-40GB"},
            {"uuid": "MIG-1", "migProfile": "3g.20gb", "productName": "NVIDIA A100-SXM4-40GB"},
            {"uuid": "MIG-2", "migProfile": "1g.5gb", "productName": "NVIDIA A100-SXM4-40GB"},
            {"uuid": "MIG-3", "migProfile": "1g.5gb", "productName": "NVIDIA A100-SXM4-40GB"},
        ]),
        Some("NVIDIA A100-SXM4-40GB"),
        "1g.5gb x2, 3g.20gb x1, whole x1"
    )]
    #[case::slice_without_profile_and_unknown_kind(
        json!([{"uuid": "MIG-GPU-a/1/0"}, {"productName": "NVIDIA L4"}]),
        Some("NVIDIA L4"),
        "slice x1, unknown x1"
    )]
    #[case::two_models_in_order(
        json!([{"uuid": "GPU-b", "productName": "NVIDIA L4"}, {"uuid": "GPU-a", "productName": " NVIDIA H100 "}, {"uuid": "GPU-c", "productName": "NVIDIA L4"}]),
        Some("NVIDIA L4, NVIDIA H100"),
        "whole x3"
    )]
    fn devices_are_counted_by_profile(
        #[case] devices: serde_json::Value,
        #[case] model: Option<&str>,
        #[case] profiles: &str,
    ) {
        let s = summary(json!({"driverVersion": "580.82.07", "devices": devices}));
        assert_eq!(s.model.as_deref(), model);
        assert_eq!(s.profiles.as_deref(), Some(profiles));
        assert_eq!(s.driver.as_deref(), Some("580.82.07"));
    }

    #[test]
    fn without_named_devices_the_gpus_name_the_model() {
        let s = summary(json!({"gpus": [{"productName": "NVIDIA H200"}, {"productName": "NVIDIA H200"}]}));
        assert_eq!(s.model.as_deref(), Some("NVIDIA H200"));
        assert_eq!(s.profiles, None, "devices unknown stays unknown");
    }

    #[test]
    fn crafted_names_are_escaped_and_bounded() {
        let long = "A".repeat(10_000);
        let s = summary(json!({
            "driverVersion": "580\u{1b}]0;pwned\u{7}",
            "devices": [{"uuid": "GPU-a", "productName": "NVIDIA \u{202e}4L"}, {"uuid": "GPU-b", "productName": long}],
        }));
        let model = s.model.unwrap();
        assert!(model.starts_with("NVIDIA \\u{202e}4L, AAAA"), "{model}");
        assert!(model.len() < 2 * MAX_NAME_BYTES + 64, "{model}");
        assert_eq!(s.driver.as_deref(), Some("580\\u{1b}]0;pwned\\u{7}"));
    }

    #[test]
    fn a_crowd_of_distinct_names_is_cut() {
        let devices: Vec<_> = (0..20_000)
            .map(|i| json!({"uuid": format!("MIG-{i}"), "productName": format!("GPU {i}"), "migProfile": format!("{i}g.{i}gb")}))
            .collect();
        let s = summary(json!({"devices": devices}));
        let model = s.model.unwrap();
        assert!(model.ends_with(", +19992 more"), "{model}");
        assert_eq!(model.matches(", ").count(), MAX_SUMMARY_ENTRIES);
        let profiles = s.profiles.unwrap();
        assert_eq!(profiles.matches(" x1").count(), MAX_SUMMARY_ENTRIES, "{profiles}");
        assert!(profiles.ends_with(", +19992 more"), "{profiles}");
    }
}

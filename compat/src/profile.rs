//! MIG profile names (`1g.10gb`, `1g.10gb+me`, `1c.3g.40gb`), parsed once.
//!
//! The profile is the exact string nvidia-smi prints, and equality is on that text: `1g.10gb+me`
//! and `1g.10gb` are different shapes. Parsing adds what checks need to know about the shape
//! (is it a compute instance inside a larger GPU instance? what does the device plugin call it?)
//! without ever rebuilding a name from numbers.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::Error;

/// A MIG profile name as nvidia-smi prints it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MigProfile {
    text: String,
    /// `Some(c)` for a compute instance using `c` of its GPU instance's slices (`1c.3g.40gb`).
    compute_slices: Option<u16>,
    /// Where the GPU instance part (`3g.40gb…`) starts in `text`.
    gi_start: usize,
}

impl MigProfile {
    /// The profile text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether this is a compute instance sharing a GPU instance (`1c.3g.40gb`); such slices
    /// share their GPU instance's memory with its other compute instances.
    pub fn is_compute_instance(&self) -> bool {
        self.compute_slices.is_some()
    }

    /// The GPU-instance profile this slice lives in (`3g.40gb` for `1c.3g.40gb`).
    pub fn gpu_instance_profile(&self) -> &str {
        &self.text[self.gi_start..]
    }

    /// The NVIDIA device plugin's resource name for this shape (`nvidia.com/mig-1g.10gb.me`),
    /// or `None` for a compute-instance profile, which the device plugin never advertises.
    pub fn device_plugin_resource(&self) -> Option<String> {
        if self.is_compute_instance() {
            return None;
        }
        Some(format!("nvidia.com/mig-{}", self.text.replace('+', ".")))
    }
}

impl FromStr for MigProfile {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = |why: &str| Error::InvalidProfile {
            profile: s.to_string(),
            why: why.to_string(),
        };
        let (compute_slices, gi_start, gi) = match s.split_once('.') {
            Some((head, rest)) if head.ends_with('c') => {
                let c =
                    count(&head[..head.len() - 1]).ok_or_else(|| bad("compute slices are not a number"))?;
                (Some(c), head.len() + 1, rest)
            }
            _ => (None, 0, s),
        };
        let (slices, rest) = gi
            .split_once("g.")
            .ok_or_else(|| bad("expected `<n>g.<memory>gb`"))?;
        count(slices).ok_or_else(|| bad("GPU slices are not a number"))?;
        let mem_digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if mem_digits == 0 || !rest[mem_digits..].starts_with("gb") {
            return Err(bad("expected the memory size as `<n>gb`"));
        }
        let suffix = &rest[mem_digits + 2..];
        let suffix_ok = suffix.is_empty()
            || (suffix.starts_with(['+', '-'])
                && suffix.len() > 1
                && suffix[1..].bytes().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'+' | b'-')
                }));
        if !suffix_ok {
            return Err(bad("unexpected text after the memory size"));
        }
        Ok(MigProfile {
            text: s.to_string(),
            compute_slices,
            gi_start,
        })
    }
}

fn count(s: &str) -> Option<u16> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|n| *n > 0)
}

impl TryFrom<String> for MigProfile {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        s.parse()
    }
}

impl From<MigProfile> for String {
    fn from(p: MigProfile) -> String {
        p.text
    }
}

impl fmt::Display for MigProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl JsonSchema for MigProfile {
    fn schema_name() -> Cow<'static, str> {
        "MigProfile".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": "^([1-9][0-9]*c\\.)?[1-9][0-9]*g\\.[0-9]+gb([+-][a-z0-9.+-]+)?$",
            "description": "A MIG profile exactly as nvidia-smi prints it: 1g.10gb, 1g.10gb+me, 1c.3g.40gb."
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("1g.10gb", false, "1g.10gb", Some("nvidia.com/mig-1g.10gb"))]
    #[case("1g.10gb+me", false, "1g.10gb+me", Some("nvidia.com/mig-1g.10gb.me"))]
    #[case(
        "1g.24gb+me.all",
        false,
        "1g.24gb+me.all",
        Some("nvidia.com/mig-1g.24gb.me.all")
    )]
    #[case("1g.24gb-me", false, "1g.24gb-me", Some("nvidia.com/mig-1g.24gb-me"))]
    #[case("2g.48gb+gfx", false, "2g.48gb+gfx", Some("nvidia.com/mig-2g.48gb.gfx"))]
    #[case("1c.3g.40gb", true, "3g.40gb", None)]
    #[case("3c.7g.141gb", true, "7g.141gb", None)]
    #[case("7g.141gb", false, "7g.141gb", Some("nvidia.com/mig-7g.141gb"))]
    fn profiles_parse(
        #[case] text: &str,
        #[case] ci: bool,
        #[case] gi: &str,
        #[case] resource: Option<&str>,
    ) {
        let p: MigProfile = text.parse().unwrap();
        assert_eq!(p.as_str(), text);
        assert_eq!(p.is_compute_instance(), ci);
        assert_eq!(p.gpu_instance_profile(), gi);
        assert_eq!(p.device_plugin_resource().as_deref(), resource);
    }

    #[rstest]
    #[case("")]
    #[case("MIG 1g.10gb")]
    #[case("1g")]
    #[case("1g.gb")]
    #[case("g.10gb")]
    #[case("0g.10gb")]
    #[case("1g.10GB")]
    #[case("1g.10gb+")]
    #[case("1g.10gb me")]
    #[case("c.3g.40gb")]
    #[case("1x.3g.40gb")]
    fn malformed_profiles_are_errors(#[case] text: &str) {
        assert!(text.parse::<MigProfile>().is_err(), "{text}");
    }
}

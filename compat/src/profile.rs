//! MIG profile names (`1g.10gb`, `1g.10gb+me`, `1c.3g.40gb`), parsed once.
//!
//! The profile is the exact string nvidia-smi prints, and equality is on that text: `1g.10gb+me`
//! and `1g.10gb` are different shapes. Parsing adds what checks need to know about the shape
//! (is it a compute instance inside a larger GPU instance? what does the device plugin call it?)
//! without ever rebuilding a name from numbers.
//!
//! [`FromStr`] is strict: the capture parsers rely on it to tell a profile from other text.
//! Reading a manifest is lenient: a name a newer nvidia-smi prints that today's grammar does not
//! know must not make a checkpoint unreadable, so such text becomes an *opaque* profile,
//! compared as text and reported by [`GpuManifest::read_warnings`](crate::GpuManifest::read_warnings).

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de;
use serde::{Deserialize, Deserializer, Serialize};

use crate::Error;
use crate::text::all_ascii_digits;

/// A MIG profile name as nvidia-smi prints it.
///
/// Every field follows from `text`, so the derived comparisons compare the text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(into = "String")]
pub struct MigProfile {
    text: String,
    /// `Some(c)` for a compute instance using `c` of its GPU instance's slices (`1c.3g.40gb`).
    compute_slices: Option<u16>,
    /// Where the GPU instance part (`3g.40gb…`) starts in `text`.
    gi_start: usize,
    /// Whether `text` follows the grammar nvidia-smi is known to print; an opaque profile
    /// (read from a manifest) does not.
    recognised: bool,
}

impl MigProfile {
    /// The profile as nvidia-smi prints it (`3g.40gb`, `1g.10gb+me`), which is how checks and
    /// device classes name it.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the text follows the grammar nvidia-smi is known to print
    /// (`[<c>c.]<g>g.<mem>gb[<+|-><suffix>]`). A profile read from a manifest that does not is
    /// *opaque*: compared by its text, never a compute instance, its own GPU-instance profile.
    pub fn is_recognised(&self) -> bool {
        self.recognised
    }

    /// Whether this is a compute instance sharing a GPU instance (`1c.3g.40gb`); such slices
    /// share their GPU instance's memory with its other compute instances.
    pub fn is_compute_instance(&self) -> bool {
        self.compute_slices.is_some()
    }

    /// The GPU-instance profile this slice lives in (`3g.40gb` for `1c.3g.40gb`; the whole text
    /// of an opaque profile).
    pub fn gpu_instance_profile(&self) -> &str {
        &self.text[self.gi_start..]
    }

    /// Reads a profile from a manifest: the grammar's profile where the text follows it, an
    /// opaque one where it does not but could still be a profile name (not empty, no white
    /// space, no control characters). Anything else is an error.
    fn read(text: String) -> Result<Self, Error> {
        if let Ok(p) = text.parse() {
            return Ok(p);
        }
        let why = if text.is_empty() {
            "it is empty"
        } else if text
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '\u{feff}')
        {
            "it contains white space or control characters"
        } else {
            return Ok(MigProfile {
                text,
                compute_slices: None,
                gi_start: 0,
                recognised: false,
            });
        };
        Err(Error::InvalidProfile {
            profile: text.escape_debug().to_string(),
            why: why.to_string(),
        })
    }

    /// The NVIDIA device plugin's resource name for this shape (`nvidia.com/mig-1g.10gb.me`),
    /// or `None` for a compute-instance profile, which the device plugin never advertises.
    pub fn device_plugin_resource(&self) -> Option<String> {
        if self.is_compute_instance() {
            return None;
        }
        Some(format!(
            "{}{}",
            miggate_wire::nvidia::MIG_RESOURCE_PREFIX,
            self.text.replace('+', ".")
        ))
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
            recognised: true,
        })
    }
}

fn count(s: &str) -> Option<u16> {
    if s.is_empty() || !all_ascii_digits(s) {
        return None;
    }
    s.parse().ok().filter(|n| *n > 0)
}

impl TryFrom<String> for MigProfile {
    type Error = Error;
    /// Strict, as [`FromStr`].
    fn try_from(s: String) -> Result<Self, Error> {
        s.parse()
    }
}

impl<'de> Deserialize<'de> for MigProfile {
    /// Lenient: text the grammar does not know becomes an opaque profile (see [`MigProfile::is_recognised`]).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        MigProfile::read(String::deserialize(d)?).map_err(de::Error::custom)
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

/// The schema's pattern for a profile: no white space, no C0 or C1 control character.
///
/// Written in the dialect every reader of the schema shares: the Kubernetes API server compiles
/// a CRD's `pattern` with Go's `regexp` (RE2 syntax), which has no `\uXXXX` escape, so code
/// points are written `\xHH` (Go, Rust's `regex` and ECMA-262 all read that the same way).
/// Go's `\s` is ASCII white space only; the reader itself refuses the rest.
pub(crate) const PROFILE_PATTERN: &str = r"^[^\s\x00-\x1f\x7f-\x9f]+$";

impl JsonSchema for MigProfile {
    fn schema_name() -> Cow<'static, str> {
        "MigProfile".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": PROFILE_PATTERN,
            "description": "A MIG profile exactly as nvidia-smi prints it: 1g.10gb, 1g.10gb+me, 1c.3g.40gb. Text of another form (no white space or control characters) is read as an opaque profile, compared as text, with a warning."
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

    #[rstest]
    #[case("1g.10GB", "nvidia.com/mig-1g.10GB")]
    #[case("1g", "nvidia.com/mig-1g")]
    #[case("1x.3g.40gb+me", "nvidia.com/mig-1x.3g.40gb.me")]
    #[case("c.3g.40gb", "nvidia.com/mig-c.3g.40gb")]
    fn unrecognised_profiles_read_as_opaque_text(#[case] text: &str, #[case] resource: &str) {
        let p: MigProfile = serde_json::from_value(serde_json::Value::String(text.into())).unwrap();
        assert!(!p.is_recognised());
        assert_eq!(p.as_str(), text);
        assert!(!p.is_compute_instance());
        assert_eq!(p.gpu_instance_profile(), text);
        assert_eq!(p.device_plugin_resource().as_deref(), Some(resource));
        assert_eq!(p.to_string(), text);
        assert_eq!(serde_json::to_value(&p).unwrap(), text);
        // Strict parsing still refuses it.
        assert!(text.parse::<MigProfile>().is_err());
        assert!(MigProfile::try_from(text.to_string()).is_err());
    }

    #[test]
    fn recognised_profiles_read_the_same_leniently_and_strictly() {
        for text in ["1g.10gb", "1g.10gb+me", "1c.3g.40gb"] {
            let read: MigProfile = serde_json::from_value(serde_json::Value::String(text.into())).unwrap();
            assert!(read.is_recognised());
            assert_eq!(read, text.parse::<MigProfile>().unwrap());
        }
    }

    #[rstest]
    #[case("", "`` is not a MIG profile: it is empty")]
    #[case(
        "MIG 1g.10gb",
        "`MIG 1g.10gb` is not a MIG profile: it contains white space or control characters"
    )]
    #[case(
        "1g.10gb\n",
        "`1g.10gb\\n` is not a MIG profile: it contains white space or control characters"
    )]
    #[case(
        "1g\u{1b}[31m",
        "`1g\\u{1b}[31m` is not a MIG profile: it contains white space or control characters"
    )]
    fn white_space_and_control_characters_are_read_errors(#[case] text: &str, #[case] msg: &str) {
        let err = serde_json::from_value::<MigProfile>(serde_json::Value::String(text.into())).unwrap_err();
        assert_eq!(err.to_string(), msg);
    }
}

//! Version strings kept as the text that was written.
//!
//! `580.80` read as a YAML float would come back as `580.8`, and a kernel release like `6.8`
//! would lose nothing visible but still pass through a lossy type. Versions are therefore read
//! from the scalar's source text and never through a number.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A version (driver, CUDA, kernel, compute capability) exactly as written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VersionText(String);

impl VersionText {
    /// Wraps text as a version; surrounding white space is dropped.
    pub fn new(text: impl Into<String>) -> Self {
        VersionText(text.into().trim().to_string())
    }

    /// The version as written, less surrounding white space: `580.80` stays `580.80`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for VersionText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for VersionText {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for VersionText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = VersionText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a version written as text (quote it in JSON: \"580.82.07\")")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<VersionText, E> {
                Ok(VersionText::new(v))
            }
            // Integers carry no hidden digits, so they are safe to accept (`kernelVersion: 6`).
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<VersionText, E> {
                Ok(VersionText(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<VersionText, E> {
                Ok(VersionText(v.to_string()))
            }
        }
        // `deserialize_string` makes YAML hand over the scalar's text (`580.80` stays `580.80`);
        // JSON numbers are refused with a message saying to quote them.
        d.deserialize_string(V)
    }
}

impl JsonSchema for VersionText {
    fn schema_name() -> Cow<'static, str> {
        "VersionText".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "description": "A version kept as text, never read through a number (580.80 stays 580.80)."
        })
    }
}

/// Compares driver versions per dot-separated component: numerically where both components
/// are digits (`06` = `6`), as text elsewhere. Equal only with the same number of components.
pub fn versions_equal(a: &str, b: &str) -> bool {
    let a: Vec<&str> = a.trim().split('.').collect();
    let b: Vec<&str> = b.trim().split('.').collect();
    a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| component_eq(x, y))
}

fn component_eq(a: &str, b: &str) -> bool {
    let numeric = |s: &str| !s.is_empty() && all_ascii_digits(s);
    if numeric(a) && numeric(b) {
        a.trim_start_matches('0') == b.trim_start_matches('0')
    } else {
        a == b
    }
}

/// Whether every character is an ASCII digit (`true` for the empty string: callers that need
/// a digit check for emptiness themselves).
pub(crate) fn all_ascii_digits(s: &str) -> bool {
    s.bytes().all(|c| c.is_ascii_digit())
}

/// The leading run of ASCII digits as a number; `None` when there is none or it overflows.
pub fn leading_number(s: &str) -> Option<u64> {
    let digits: &str = &s[..s.bytes().take_while(u8::is_ascii_digit).count()];
    digits.parse().ok()
}

/// A kernel release's `major.minor` (`5.15.0-1071-aws` → `(5, 15)`); `None` when unreadable.
pub fn kernel_major_minor(release: &str) -> Option<(u64, u64)> {
    let mut parts = release.trim().splitn(3, '.');
    let major = leading_number(parts.next()?)?;
    let minor = leading_number(parts.next()?)?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("580.65.06", "580.65.6", true)]
    #[case("580.65.06", "580.65.06", true)]
    #[case("580.65.06", "580.65.08", false)]
    #[case("580.65", "580.65.0", false)]
    #[case("580.65.06-beta", "580.65.06-beta", true)]
    #[case("580.65.06-beta", "580.65.6-beta", false)]
    #[case("0580.0", "580.00", true)]
    fn driver_versions_compare_per_component(#[case] a: &str, #[case] b: &str, #[case] eq: bool) {
        assert_eq!(versions_equal(a, b), eq);
        assert_eq!(versions_equal(b, a), eq);
    }

    #[rstest]
    #[case("5.15.0-1071-aws", Some((5, 15)))]
    #[case("6.8.0-45-generic", Some((6, 8)))]
    #[case("5.13", Some((5, 13)))]
    #[case("custom-build", None)]
    #[case("6", None)]
    #[case("", None)]
    fn kernel_releases_read_major_minor(#[case] s: &str, #[case] want: Option<(u64, u64)>) {
        assert_eq!(kernel_major_minor(s), want);
    }

    #[test]
    fn yaml_float_versions_keep_their_text() {
        #[derive(Deserialize)]
        struct T {
            v: VersionText,
        }
        let t: T = serde_saphyr::from_str("v: 580.80\n").unwrap();
        assert_eq!(t.v.as_str(), "580.80");
        let t: T = serde_saphyr::from_str("v: 13.0\n").unwrap();
        assert_eq!(t.v.as_str(), "13.0");
    }

    #[test]
    fn json_number_versions_are_refused_not_rounded() {
        #[derive(Debug, Deserialize)]
        struct T {
            #[allow(dead_code)]
            v: VersionText,
        }
        let err = serde_json::from_str::<T>(r#"{"v": 580.80}"#).unwrap_err();
        assert!(err.to_string().contains("version written as text"), "{err}");
    }
}

//! The words every part of a comparison shares: which check, how the target is read, what a
//! check concluded, and which facts it reads. A leaf: it imports nothing of the crate, so the
//! checks, the report and the device map can all use it without importing each other.
//!
//! A check's name, scope and doc come from the registry (`checks/registry.rs`), one row per
//! check; the methods that read them live there.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A check, by its stable name (`mig-profile`). Names are protocol: they appear in reasons,
/// events and skip lists, so a name never changes once released. The constants
/// (`CheckName::MIG_PROFILE`) and [`CheckName::ALL`], in report order, come from the registry.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CheckName(pub(crate) u8);

impl fmt::Debug for CheckName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for CheckName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for CheckName {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for CheckName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = CheckName;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a check name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CheckName, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

impl JsonSchema for CheckName {
    fn schema_name() -> Cow<'static, str> {
        "CheckName".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = CheckName::ALL.iter().map(|c| c.as_str()).collect();
        json_schema!({
            "type": "string",
            "enum": names,
            "description": "A check's stable name."
        })
    }
}

/// Defines a small closed vocabulary: serde and schema as kebab-case text, `as_str`, the lookup
/// `from_name` that `FromStr` (in `parse_words.rs`, with an error listing the values) uses, and
/// `Display`.
macro_rules! words {
    ($(#[$meta:meta])* $ty:ident, $what:literal, { $($(#[doc = $doc:literal])* $variant:ident = $text:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum $ty {
            $($(#[doc = $doc])* #[serde(rename = $text)] $variant),*
        }

        impl $ty {
            /// The name used in reports and on the command line.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $text),*
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl $ty {
            /// What the word names, for the error of text that is none of them.
            pub(crate) const WHAT: &'static str = $what;
            /// The values, for the same error.
            pub(crate) const EXPECTED: &'static str = concat!("expected one of: ", $("`", $text, "` "),*);

            /// The word spelled `s`, if any. `FromStr` (in `parse_words.rs`) adds the error.
            pub(crate) fn from_name(s: &str) -> Option<Self> {
                match s {
                    $($text => Some($ty::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

words!(
    /// How the target is read.
    Mode, "mode", {
        /// The target is the device set a restore container actually got: equal.
        Exact = "exact",
        /// The target is a node's whole inventory: it must be able to offer a matching set.
        Offer = "offer",
    }
);

#[allow(clippy::derivable_impls)] // the enum comes from `words!`, which derives no Default
impl Default for Mode {
    fn default() -> Self {
        Mode::Exact
    }
}

words!(
    /// What one check concluded.
    Outcome, "outcome", {
        /// The target agrees with the checkpoint on what this check compares.
        Pass = "pass",
        /// The target does not match; the restore is refused.
        Refuse = "refuse",
        /// A fact is missing on either side; admits unless strict.
        Unknown = "unknown",
        /// The check's inputs do not exist for this kind of target; never refuses.
        NotApplicable = "not-applicable",
        /// Waived by the caller.
        Skipped = "skipped",
    }
);

words!(
    /// Which facts a check reads: a target that lacks them (a pod not yet bound has no host or
    /// GPU facts; a node inventory has no pod) makes the check not applicable.
    Scope, "check scope", {
        /// The host: kernel, CPU architecture.
        Host = "host",
        /// The restore container: image, limits, mounts, GPU requests.
        Pod = "pod",
        /// The GPUs and the driver.
        Gpu = "gpu",
    }
);

words!(
    /// Which facts a target has, so checks outside them are not applicable rather than unknown
    /// (and never refused in strict mode).
    TargetScope, "target scope", {
        /// A pod not yet bound to a node: pod facts only.
        Pod = "pod",
        /// A node's inventory: host and GPU facts, no pod.
        Node = "node",
        /// A restore container on its node: every fact.
        All = "all",
    }
);

impl TargetScope {
    /// Whether a target of this scope has the facts a check of `scope` reads.
    pub fn covers(self, scope: Scope) -> bool {
        match self {
            TargetScope::All => true,
            TargetScope::Pod => scope == Scope::Pod,
            TargetScope::Node => scope != Scope::Pod,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        for m in [Mode::Exact, Mode::Offer] {
            assert_eq!(m.as_str().parse::<Mode>().unwrap(), m);
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
            assert_eq!(serde_json::from_value::<Mode>(m.as_str().into()).unwrap(), m);
        }
        let err = "Exact".parse::<Mode>().unwrap_err().to_string();
        assert!(err.contains("expected one of: `exact` `offer`"), "{err}");
        assert_eq!(
            serde_json::to_value(Outcome::NotApplicable).unwrap(),
            "not-applicable"
        );
    }

    #[test]
    fn scopes_cover_their_facts() {
        assert!(TargetScope::Pod.covers(Scope::Pod));
        assert!(!TargetScope::Pod.covers(Scope::Host));
        assert!(!TargetScope::Node.covers(Scope::Pod));
        assert!(TargetScope::Node.covers(Scope::Gpu));
        assert!(TargetScope::All.covers(Scope::Host));
    }
}

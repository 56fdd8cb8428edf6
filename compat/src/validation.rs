//! How a reading treats a field no manifest mapping knows: refuse it (`strict`, what kubectl
//! does by default), keep it and warn (`warn`, this library's default), or drop it (`ignore`).
//!
//! A typo such as `devcies:` must not turn a refusal into a pass: read leniently, the devices
//! become *unknown* and unknown admits. So a reader that people feed by hand (the CLI) reads
//! strictly, and a reader that must never lose an object over a field a newer writer added (the
//! webhook's watch cache) keeps the lenient reading.
//!
//! The mapping `Deserialize` impls in `fields.rs` are plain serde impls (kube and
//! `serde_json::from_value` call them), and serde passes no context down a deserialization. So
//! the policy of one reading reaches them through a thread-local set for exactly the span of
//! that (synchronous) reading by [`Scope`], and restored when it ends, panic or not.

use std::cell::{Cell, RefCell};

/// What to do with a field a manifest mapping does not know (kubectl's `--validate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// An unknown field is an error naming its path, its line and the nearest known name.
    Strict,
    /// An unknown field is kept, written back and reported as a warning.
    #[default]
    Warn,
    /// An unknown field is dropped without a word.
    Ignore,
}

impl FieldValidation {
    /// The name kubectl gives the policy (`strict`, `warn`, `ignore`).
    pub fn as_str(self) -> &'static str {
        match self {
            FieldValidation::Strict => "strict",
            FieldValidation::Warn => "warn",
            FieldValidation::Ignore => "ignore",
        }
    }
}

/// How a manifest is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReadOptions {
    /// What an unknown field does.
    pub fields: FieldValidation,
}

impl ReadOptions {
    /// Options that refuse unknown fields.
    pub fn strict() -> ReadOptions {
        ReadOptions {
            fields: FieldValidation::Strict,
        }
    }
}

/// The first unknown field a strict reading met: its key and the known name it is nearest to.
/// The path and the position come from the reader, which knows where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub key: String,
    pub suggestion: Option<&'static str>,
}

thread_local! {
    static POLICY: Cell<FieldValidation> = const { Cell::new(FieldValidation::Warn) };
    static REFUSED: RefCell<Option<Refused>> = const { RefCell::new(None) };
}

/// The policy of the reading in progress on this thread (`warn` outside any reading).
pub(crate) fn current() -> FieldValidation {
    POLICY.with(Cell::get)
}

/// Notes the unknown field a strict reading refuses, for the reader's error.
pub(crate) fn refuse(key: &str, known: &[&'static str]) {
    let refused = Refused {
        key: key.to_string(),
        suggestion: nearest(key, known),
    };
    REFUSED.with(|r| *r.borrow_mut() = Some(refused));
}

/// The unknown field the last strict reading on this thread refused, taken.
pub(crate) fn take_refused() -> Option<Refused> {
    REFUSED.with(|r| r.borrow_mut().take())
}

/// The policy in force until this value is dropped; the one before is restored then.
pub(crate) struct Scope(FieldValidation);

impl Scope {
    pub(crate) fn enter(policy: FieldValidation) -> Scope {
        REFUSED.with(|r| *r.borrow_mut() = None);
        Scope(POLICY.with(|p| p.replace(policy)))
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        POLICY.with(|p| p.set(self.0));
    }
}

/// Keys longer than this get no suggestion: no known name is near them, and the distance's cost
/// grows with the key's length.
const MAX_SUGGESTED_KEY_CHARS: usize = 64;

/// The known name nearest to `key`, when it is near enough to be what was meant: equal but for
/// case, or within a third of its length in edits (at least one), a swap of two neighbours
/// counting as one edit (`devcies` → `devices`).
pub(crate) fn nearest(key: &str, known: &[&'static str]) -> Option<&'static str> {
    let typed: Vec<char> = key.chars().flat_map(char::to_lowercase).collect();
    if typed.is_empty() || typed.len() > MAX_SUGGESTED_KEY_CHARS {
        return None;
    }
    let bound = (typed.len() / 3).max(1);
    known
        .iter()
        .map(|k| {
            let name: Vec<char> = k.chars().flat_map(char::to_lowercase).collect();
            (distance(&typed, &name), *k)
        })
        .filter(|(d, _)| *d <= bound)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
/// neighbours, each one edit. Three rows, so memory is linear in the shorter input.
fn distance(a: &[char], b: &[char]) -> usize {
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut last: Vec<usize> = (0..=b.len()).collect();
    let mut row: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        row[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (last[j] + 1).min(row[j - 1] + 1).min(last[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            row[j] = d;
        }
        std::mem::swap(&mut before, &mut last);
        std::mem::swap(&mut last, &mut row);
    }
    last[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    const NVIDIA: &[&str] = &[
        "driverVersion",
        "cudaDriverVersion",
        "migStrategy",
        "gpus",
        "devices",
    ];

    #[rstest]
    #[case::swapped_letters("devcies", Some("devices"))]
    #[case::case_only("driverversion", Some("driverVersion"))]
    #[case::one_missing("gpu", Some("gpus"))]
    #[case::one_extra("devicess", Some("devices"))]
    #[case::far_from_all("colour", None)]
    #[case::empty("", None)]
    #[case::very_long("d".repeat(65).leak(), None)]
    fn the_nearest_known_name_is_suggested(#[case] key: &str, #[case] expected: Option<&str>) {
        assert_eq!(nearest(key, NVIDIA), expected);
    }

    #[test]
    fn distance_counts_a_swap_as_one_edit() {
        let chars = |s: &str| s.chars().collect::<Vec<_>>();
        assert_eq!(distance(&chars("devcies"), &chars("devices")), 1);
        assert_eq!(distance(&chars("abc"), &chars("")), 3);
        assert_eq!(distance(&chars(""), &chars("abc")), 3);
        assert_eq!(distance(&chars("kitten"), &chars("sitting")), 3);
    }

    #[test]
    fn a_scope_restores_the_policy_before_it() {
        assert_eq!(current(), FieldValidation::Warn);
        {
            let _outer = Scope::enter(FieldValidation::Strict);
            assert_eq!(current(), FieldValidation::Strict);
            {
                let _inner = Scope::enter(FieldValidation::Ignore);
                assert_eq!(current(), FieldValidation::Ignore);
            }
            assert_eq!(current(), FieldValidation::Strict);
        }
        assert_eq!(current(), FieldValidation::Warn);
    }
}

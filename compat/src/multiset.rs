//! Counted sets rendered the peer's way: `NVIDIA L4 x1, Tesla T4 x1`, keys in byte order.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A multiset of display keys, borrowed from the manifests where they can be. The map orders
/// keys by bytes, which is the order the reason format promises.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Multiset<'a>(BTreeMap<Cow<'a, str>, usize>);

impl<'a> Multiset<'a> {
    /// An empty multiset.
    pub fn new() -> Self {
        Multiset::default()
    }

    /// Adds one of `key`.
    pub fn add(&mut self, key: impl Into<Cow<'a, str>>) {
        self.add_n(key, 1);
    }

    /// Adds `n` of `key`; a count past `usize::MAX` stays at `usize::MAX`.
    pub fn add_n(&mut self, key: impl Into<Cow<'a, str>>, n: usize) {
        if n > 0 {
            let count = self.0.entry(key.into()).or_default();
            *count = count.saturating_add(n);
        }
    }

    /// How many of `key`.
    pub fn count(&self, key: &str) -> usize {
        self.0.get(key).copied().unwrap_or(0)
    }

    /// The total count; a total past `usize::MAX` stays at `usize::MAX`.
    pub fn total(&self) -> usize {
        self.0.values().fold(0, |sum, n| sum.saturating_add(*n))
    }

    /// Whether there is nothing in it.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Keys with their counts, in byte order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, usize)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), *v))
    }

    /// Whether `other` holds at least as many of every key as `self`.
    pub fn is_covered_by(&self, other: &Multiset<'_>) -> bool {
        self.iter().all(|(k, n)| other.count(k) >= n)
    }

    /// The keys `other` holds fewer of than `self`, for messages.
    pub fn shortfall(&self, other: &Multiset<'_>) -> Vec<String> {
        self.iter()
            .filter(|(k, n)| other.count(k) < *n)
            .map(|(k, n)| format!("{k} (needs {n}, has {})", other.count(k)))
            .collect()
    }

    /// `key xN, …`, or `none` when empty.
    pub fn render(&self) -> Cow<'static, str> {
        if self.0.is_empty() {
            return Cow::Borrowed("none");
        }
        let mut out = String::with_capacity(self.0.keys().map(|k| k.len() + 8).sum());
        for (k, n) in self.iter() {
            if !out.is_empty() {
                out.push_str(", ");
            }
            out.push_str(k);
            out.push_str(" x");
            let _ = write!(out, "{n}");
        }
        Cow::Owned(out)
    }
}

impl<'a, S: Into<Cow<'a, str>>> FromIterator<S> for Multiset<'a> {
    /// Counts runs of equal keys before touching the map: devices come grouped (a node's slices
    /// share a model and often a profile), so most keys cost one comparison, not a map lookup.
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut m = Multiset::new();
        let mut run: Option<(Cow<'a, str>, usize)> = None;
        for k in iter {
            let k = k.into();
            match &mut run {
                Some((last, n)) if *last == k => *n += 1,
                _ => {
                    if let Some((last, n)) = run.replace((k, 1)) {
                        m.add_n(last, n);
                    }
                }
            }
        }
        if let Some((last, n)) = run {
            m.add_n(last, n);
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_in_byte_order_with_counts() {
        let m: Multiset = ["Tesla T4", "NVIDIA L4", "NVIDIA L4"].into_iter().collect();
        assert_eq!(m.render(), "NVIDIA L4 x2, Tesla T4 x1");
        assert_eq!(Multiset::new().render(), "none");
    }

    #[test]
    fn counts_saturate_instead_of_overflowing() {
        let mut m = Multiset::new();
        m.add_n("a", usize::MAX);
        m.add_n("b", usize::MAX);
        assert_eq!(m.total(), usize::MAX);
        m.add_n("a", usize::MAX);
        m.add("a");
        assert_eq!(m.count("a"), usize::MAX);
        m.add_n("c", 0);
        assert_eq!(m.count("c"), 0);
        assert!(!m.render().contains('c'));
    }

    #[test]
    fn coverage_counts_every_key() {
        let need: Multiset = ["a", "a", "b"].into_iter().collect();
        let have: Multiset = ["a", "a", "a", "b"].into_iter().collect();
        assert!(need.is_covered_by(&have));
        assert!(!have.is_covered_by(&need));
        assert_eq!(have.shortfall(&need), vec!["a (needs 3, has 2)".to_string()]);
    }
}

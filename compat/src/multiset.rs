//! Counted sets rendered the peer's way: `NVIDIA L4 x1, Tesla T4 x1`, keys in byte order.

use std::collections::BTreeMap;

/// A multiset of display keys. `BTreeMap<String, _>` orders keys by bytes, which is the order
/// the reason format promises.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Multiset(BTreeMap<String, usize>);

impl Multiset {
    /// An empty multiset.
    pub fn new() -> Self {
        Multiset::default()
    }

    /// Adds one of `key`.
    pub fn add(&mut self, key: impl Into<String>) {
        self.add_n(key, 1);
    }

    /// Adds `n` of `key`; a count past `usize::MAX` stays at `usize::MAX`.
    pub fn add_n(&mut self, key: impl Into<String>, n: usize) {
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
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// Whether `other` holds at least as many of every key as `self`.
    pub fn is_covered_by(&self, other: &Multiset) -> bool {
        self.iter().all(|(k, n)| other.count(k) >= n)
    }

    /// The keys `other` holds fewer of than `self`, for messages.
    pub fn shortfall(&self, other: &Multiset) -> Vec<String> {
        self.iter()
            .filter(|(k, n)| other.count(k) < *n)
            .map(|(k, n)| format!("{k} (needs {n}, has {})", other.count(k)))
            .collect()
    }

    /// `key xN, …`, or `none` when empty.
    pub fn render(&self) -> String {
        if self.0.is_empty() {
            return "none".to_string();
        }
        self.iter()
            .map(|(k, n)| format!("{k} x{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl<S: Into<String>> FromIterator<S> for Multiset {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut m = Multiset::new();
        for k in iter {
            m.add(k);
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

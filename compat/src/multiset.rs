//! Counted sets rendered the peer's way: `NVIDIA L4 x1, Tesla T4 x1`, keys in byte order.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::report::Text;

/// Up to this many keys are kept in a sorted inline array; beyond, in a map, so a multiset of
/// many distinct keys (a hostile manifest's) stays `O(n log n)` to build.
const SMALL: usize = 4;

/// An unused inline entry: a borrowed empty key costs nothing to make or drop.
const VACANT: (Cow<'static, str>, usize) = (Cow::Borrowed(""), 0);

/// A multiset of display keys, borrowed from the manifests where they can be, iterated in byte
/// order, which is the order the reason format promises.
///
/// Nearly every multiset a check builds holds one or two keys (one model, one profile), so
/// those live inline: building, comparing and dropping one allocates nothing.
#[derive(Debug, Clone)]
pub(crate) struct Multiset<'a>(Repr<'a>);

#[derive(Debug, Clone)]
enum Repr<'a> {
    /// The first `len` entries are used: sorted by key, keys distinct, counts above zero.
    /// A plain array (not a small-vector type) keeps the multiset covariant in `'a`.
    Small {
        len: usize,
        items: [(Cow<'a, str>, usize); SMALL],
    },
    /// Counts above zero.
    Large(BTreeMap<Cow<'a, str>, usize>),
}

impl Default for Multiset<'_> {
    fn default() -> Self {
        Multiset(Repr::Small {
            len: 0,
            items: [VACANT; SMALL],
        })
    }
}

impl PartialEq<Multiset<'_>> for Multiset<'_> {
    fn eq(&self, other: &Multiset<'_>) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Multiset<'_> {}

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
        if n == 0 {
            return;
        }
        let key = key.into();
        match &mut self.0 {
            Repr::Small { len, items } => match items[..*len].binary_search_by(|(k, _)| k.as_ref().cmp(&key))
            {
                Ok(i) => items[i].1 = items[i].1.saturating_add(n),
                Err(i) if *len < SMALL => {
                    // The vacant entry at `len` rotates down to `i` and is replaced.
                    items[i..=*len].rotate_right(1);
                    items[i] = (key, n);
                    *len += 1;
                }
                Err(_) => {
                    let mut map: BTreeMap<_, _> =
                        std::mem::replace(items, [VACANT; SMALL]).into_iter().collect();
                    map.insert(key, n);
                    self.0 = Repr::Large(map);
                }
            },
            Repr::Large(map) => {
                let count = map.entry(key).or_default();
                *count = count.saturating_add(n);
            }
        }
    }

    /// How many distinct keys.
    fn len(&self) -> usize {
        match &self.0 {
            Repr::Small { len, .. } => *len,
            Repr::Large(map) => map.len(),
        }
    }

    /// How many of `key`.
    pub fn count(&self, key: &str) -> usize {
        match &self.0 {
            Repr::Small { len, items } => items[..*len]
                .binary_search_by(|(k, _)| k.as_ref().cmp(key))
                .map_or(0, |i| items[i].1),
            Repr::Large(map) => map.get(key).copied().unwrap_or(0),
        }
    }

    /// The total count; a total past `usize::MAX` stays at `usize::MAX`.
    pub fn total(&self) -> usize {
        self.iter().fold(0, |sum, (_, n)| sum.saturating_add(n))
    }

    /// Whether there is nothing in it.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keys with their counts, in byte order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, usize)> {
        let (small, large) = match &self.0 {
            Repr::Small { len, items } => (Some(items[..*len].iter().map(|(k, n)| (k.as_ref(), *n))), None),
            Repr::Large(map) => (None, Some(map.iter().map(|(k, n)| (k.as_ref(), *n)))),
        };
        small.into_iter().flatten().chain(large.into_iter().flatten())
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
    pub fn render(&self) -> Text {
        if self.is_empty() {
            return Text::fixed("none");
        }
        let mut out = compact_str::CompactString::with_capacity(self.iter().map(|(k, _)| k.len() + 8).sum());
        for (k, n) in self.iter() {
            if !out.is_empty() {
                out.push_str(", ");
            }
            out.push_str(k);
            out.push_str(" x");
            let _ = write!(out, "{n}");
        }
        Text::from_compact(out)
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
    fn many_keys_move_to_a_map_and_stay_ordered_and_equal() {
        // Built in opposite orders, one side crosses into the map at a different key.
        let keys: Vec<String> = (0..3 * SMALL).map(|i| format!("k{i:03}")).collect();
        let up: Multiset = keys.iter().map(String::as_str).collect();
        let mut down = Multiset::new();
        for k in keys.iter().rev() {
            down.add_n(k.as_str(), 1);
        }
        let mut small = Multiset::new();
        small.add("k000");
        assert_eq!(up, down);
        assert_ne!(up, small);
        assert_eq!(up.total(), 3 * SMALL);
        assert_eq!(up.count("k007"), 1);
        let scrambled: Multiset = ["c", "a", "d", "b", "a"].into_iter().collect();
        assert_eq!(scrambled.render(), "a x2, b x1, c x1, d x1");
        let order: Vec<&str> = up.iter().map(|(k, _)| k).collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]));
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

//! One side's devices, read once per evaluation: each device's class (kind, model, profile)
//! and the classes counted. The GPU checks, `gpu-request` and the device map all read these
//! counts instead of walking and re-classifying every device for themselves.

use std::borrow::Cow;

use foldhash::{HashMap, HashMapExt};

use crate::device::DeviceKind;
use crate::manifest::Device;
use crate::multiset::Multiset;
use crate::profile::MigProfile;

/// A class of alike devices and how many there are.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tally<'a> {
    pub kind: DeviceKind,
    /// The product name, trimmed; `None` when not recorded.
    pub model: Option<&'a str>,
    pub profile: Option<&'a MigProfile>,
    pub count: usize,
}

impl Tally<'_> {
    fn same(&self, kind: DeviceKind, model: Option<&str>, profile: Option<&MigProfile>) -> bool {
        let same_text = |a: Option<&str>, b: Option<&str>| match (a, b) {
            (Some(a), Some(b)) => short_eq(a.as_bytes(), b.as_bytes()),
            (a, b) => a.is_none() && b.is_none(),
        };
        self.kind == kind
            && same_text(self.model, model)
            && same_text(
                self.profile.map(MigProfile::as_str),
                profile.map(MigProfile::as_str),
            )
    }
}

/// Byte equality for the short texts every device is classed by (a product name, a profile),
/// compared in 8-byte words inline: this runs twice per device per evaluation, where a call
/// into `memcmp` cost more than the comparison.
fn short_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if !(8..=64).contains(&n) {
        return a == b;
    }
    let word = |s: &[u8], at: usize| {
        s.get(at..at + 8)
            .and_then(|w| w.try_into().ok())
            .map(u64::from_ne_bytes)
    };
    // Whole words from the start, then the last eight bytes (overlapping the previous word).
    (0..n / 8).all(|k| word(a, 8 * k) == word(b, 8 * k)) && word(a, n - 8) == word(b, n - 8)
}

/// A side's devices with their classes.
pub(crate) struct Devices<'a> {
    pub list: &'a [Device],
    /// Distinct classes in the order they first appear.
    pub tallies: Vec<Tally<'a>>,
    /// Each device's class, an index into `tallies`.
    pub class_of: Vec<u32>,
}

/// Up to this many classes are found by a scan; beyond, through a map, so a side of many
/// distinct classes stays linear.
const SCAN: usize = 8;

type Key<'a> = (DeviceKind, Option<&'a str>, Option<&'a str>);

impl<'a> Devices<'a> {
    pub fn read(list: &'a [Device]) -> Self {
        Devices::read_as(list, false)
    }

    /// A target's devices, where `slices_listed` says the target lists every slice it has
    /// ([`crate::Target::with_slices_listed`]). One that then lists no slice at all has none:
    /// its devices of unknown kind are whole GPUs, not merely "GPUs or parents of slices"
    /// (GFD's labels of a node whose MIG is certainly off, or whose GPUs are all uncut).
    pub fn read_target(list: &'a [Device], slices_listed: bool) -> Self {
        let unknown_is_whole = slices_listed && !list.iter().any(|d| d.kind() == DeviceKind::Slice);
        Devices::read_as(list, unknown_is_whole)
    }

    fn read_as(list: &'a [Device], unknown_is_whole: bool) -> Self {
        let mut tallies: Vec<Tally<'a>> = Vec::new();
        let mut class_of = Vec::with_capacity(list.len());
        let mut index: HashMap<Key<'a>, u32> = HashMap::new();
        let mut last: Option<u32> = None;
        for d in list {
            let kind = match d.kind() {
                DeviceKind::Unknown if unknown_is_whole => DeviceKind::Whole,
                kind => kind,
            };
            let (model, profile) = (d.model(), d.mig_profile.as_ref());
            // Devices come grouped (a node's slices are alike): most match the previous one.
            let found = last
                .filter(|&c| tallies[c as usize].same(kind, model, profile))
                .or_else(|| {
                    if tallies.len() <= SCAN {
                        tallies
                            .iter()
                            .position(|t| t.same(kind, model, profile))
                            .map(|c| c as u32)
                    } else {
                        index
                            .get(&(kind, model, profile.map(MigProfile::as_str)))
                            .copied()
                    }
                });
            let c = match found {
                Some(c) => c,
                None => {
                    let c = tallies.len() as u32;
                    tallies.push(Tally {
                        kind,
                        model,
                        profile,
                        count: 0,
                    });
                    if tallies.len() == SCAN + 1 {
                        for (i, t) in tallies.iter().enumerate() {
                            index.insert((t.kind, t.model, t.profile.map(MigProfile::as_str)), i as u32);
                        }
                    } else if tallies.len() > SCAN + 1 {
                        index.insert((kind, model, profile.map(MigProfile::as_str)), c);
                    }
                    c
                }
            };
            tallies[c as usize].count += 1;
            class_of.push(c);
            last = Some(c);
        }
        Devices {
            list,
            tallies,
            class_of,
        }
    }

    /// How many devices.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Whether any class satisfies `f`.
    pub fn any(&self, f: impl Fn(&Tally<'a>) -> bool) -> bool {
        self.tallies.iter().any(f)
    }

    /// The MIG slice classes, in the order they first appear, each with its count.
    pub fn slices(&self) -> impl Iterator<Item = &Tally<'a>> {
        self.tallies.iter().filter(|t| t.kind == DeviceKind::Slice)
    }

    /// Product names counted (`unknown` where not recorded).
    pub fn models(&self) -> Multiset<'a> {
        let mut m = Multiset::new();
        for t in &self.tallies {
            m.add_n(t.model.unwrap_or("unknown"), t.count);
        }
        m
    }

    /// Kinds counted.
    pub fn kinds(&self) -> Multiset<'static> {
        let mut m = Multiset::new();
        for t in &self.tallies {
            m.add_n(t.kind.as_str(), t.count);
        }
        m
    }

    /// Devices counted per (model, kind), the kind shown only for slices.
    pub fn models_and_kinds(&self) -> Multiset<'a> {
        let mut m = Multiset::new();
        for t in &self.tallies {
            let model = t.model.unwrap_or("unknown");
            if t.kind == DeviceKind::Slice {
                m.add_n(Cow::Owned(format!("{model} (MIG slice)")), t.count);
            } else {
                m.add_n(model, t.count);
            }
        }
        m
    }

    /// The slice devices themselves, for what needs more than their class (GPU instances).
    pub fn slice_devices(&self) -> Vec<&'a Device> {
        self.list
            .iter()
            .zip(&self.class_of)
            .filter(|(_, c)| self.tallies[**c as usize].kind == DeviceKind::Slice)
            .map(|(d, _)| d)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::short_eq;

    #[test]
    fn short_eq_is_byte_equality_at_every_length() {
        let text = "NVIDIA H100 80GB HBM3 MIG 1g.10gb NVIDIA H200 141GB HBM3e and then some more bytes";
        for n in 0..text.len() {
            let a = &text.as_bytes()[..n];
            assert!(short_eq(a, a), "length {n}");
            for at in 0..n {
                let mut b = a.to_vec();
                b[at] ^= 1;
                assert!(!short_eq(a, &b), "length {n}, byte {at}");
            }
            assert!(!short_eq(a, &text.as_bytes()[..n + 1]));
        }
    }
}

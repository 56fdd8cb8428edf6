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
    /// How many devices of the class are listed. For an uncounted class, only that the class
    /// is named: how many the target has is not known, possibly none.
    pub count: usize,
    /// Whether the target's source does not know how many devices of this class it has
    /// ([`crate::Nvidia::uncounted`]).
    pub uncounted: bool,
}

impl Tally<'_> {
    fn same(&self, class: Class, model: Option<&str>, profile: Option<&MigProfile>) -> bool {
        let same_text = |a: Option<&str>, b: Option<&str>| match (a, b) {
            (Some(a), Some(b)) => short_eq(a.as_bytes(), b.as_bytes()),
            (a, b) => a.is_none() && b.is_none(),
        };
        self.kind == class.kind
            && self.uncounted == class.uncounted
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

type Key<'a> = (Class, Option<&'a str>, Option<&'a str>);

/// A device's kind as a side reads it, and whether its number is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Class {
    kind: DeviceKind,
    uncounted: bool,
}

/// How a side's devices are read: as they are, or as a target's.
#[derive(Default)]
struct Reading<'r> {
    /// Every slice is listed and none is: a device of unknown kind is a whole GPU.
    unknown_is_whole: bool,
    /// Every slice is listed ([`crate::Target::with_slices_listed`]).
    slices_listed: bool,
    /// The kinds whose number is not known ([`crate::Nvidia::uncounted`]).
    uncounted: &'r [DeviceKind],
}

impl Reading<'_> {
    /// The class `d` is read as. A device of unknown kind whose number is not known, on a
    /// target that lists every slice, names the node's whole GPUs of its model (possibly none):
    /// counted, such a device is a whole GPU or a cut GPU's parent, an upper bound on whole
    /// GPUs; uncounted, it bounds nothing and names only the class of whole GPUs.
    fn class(&self, d: &Device) -> Class {
        let own = d.kind();
        let uncounted = self.uncounted.contains(&own);
        let kind = match own {
            DeviceKind::Unknown if self.unknown_is_whole || (uncounted && self.slices_listed) => {
                DeviceKind::Whole
            }
            kind => kind,
        };
        Class { kind, uncounted }
    }
}

impl<'a> Devices<'a> {
    pub fn read(list: &'a [Device]) -> Self {
        Devices::read_as(list, &Reading::default())
    }

    /// A target's devices, where `slices_listed` says the target lists every slice it has
    /// ([`crate::Target::with_slices_listed`]). One that then lists no slice at all has none:
    /// its devices of unknown kind are whole GPUs, not merely "GPUs or parents of slices"
    /// (GFD's labels of a node whose MIG is certainly off, or whose GPUs are all uncut).
    /// `uncounted` names the kinds whose number the target's source does not know
    /// ([`crate::Nvidia::uncounted`]): their classes are marked [`Tally::uncounted`].
    pub fn read_target(list: &'a [Device], slices_listed: bool, uncounted: &[DeviceKind]) -> Self {
        let unknown_is_whole = slices_listed && !list.iter().any(|d| d.kind() == DeviceKind::Slice);
        Devices::read_as(
            list,
            &Reading {
                unknown_is_whole,
                slices_listed,
                uncounted,
            },
        )
    }

    fn read_as(list: &'a [Device], reading: &Reading<'_>) -> Self {
        let mut tallies: Vec<Tally<'a>> = Vec::new();
        let mut class_of = Vec::with_capacity(list.len());
        let mut index: HashMap<Key<'a>, u32> = HashMap::new();
        let mut last: Option<u32> = None;
        for d in list {
            let class = reading.class(d);
            let (model, profile) = (d.model(), d.mig_profile.as_ref());
            // Devices come grouped (a node's slices are alike): most match the previous one.
            let found = last
                .filter(|&c| tallies[c as usize].same(class, model, profile))
                .or_else(|| {
                    if tallies.len() <= SCAN {
                        tallies
                            .iter()
                            .position(|t| t.same(class, model, profile))
                            .map(|c| c as u32)
                    } else {
                        index
                            .get(&(class, model, profile.map(MigProfile::as_str)))
                            .copied()
                    }
                });
            let c = match found {
                Some(c) => c,
                None => {
                    let c = tallies.len() as u32;
                    tallies.push(Tally {
                        kind: class.kind,
                        model,
                        profile,
                        count: 0,
                        uncounted: class.uncounted,
                    });
                    if tallies.len() == SCAN + 1 {
                        for (i, t) in tallies.iter().enumerate() {
                            let class = Class {
                                kind: t.kind,
                                uncounted: t.uncounted,
                            };
                            index.insert((class, t.model, t.profile.map(MigProfile::as_str)), i as u32);
                        }
                    } else if tallies.len() > SCAN + 1 {
                        index.insert((class, model, profile.map(MigProfile::as_str)), c);
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

    /// Product names counted (`unknown` where not recorded), of the counted classes.
    pub fn models(&self) -> Multiset<'a> {
        self.models_of(false)
    }

    /// Product names of the classes whose number is not known ([`Tally::uncounted`]), each
    /// once.
    pub fn uncounted_models(&self) -> Multiset<'a> {
        self.models_of(true)
    }

    fn models_of(&self, uncounted: bool) -> Multiset<'a> {
        let mut m = Multiset::new();
        for t in self.tallies.iter().filter(|t| t.uncounted == uncounted) {
            m.add_n(t.model.unwrap_or("unknown"), if uncounted { 1 } else { t.count });
        }
        m
    }

    /// Kinds counted, of the counted classes.
    pub fn kinds(&self) -> Multiset<'static> {
        self.kinds_of(false)
    }

    /// Kinds of the classes whose number is not known, each once.
    pub fn uncounted_kinds(&self) -> Multiset<'static> {
        self.kinds_of(true)
    }

    fn kinds_of(&self, uncounted: bool) -> Multiset<'static> {
        let mut m = Multiset::new();
        for t in self.tallies.iter().filter(|t| t.uncounted == uncounted) {
            m.add_n(t.kind.as_str(), if uncounted { 1 } else { t.count });
        }
        m
    }

    /// Devices counted per (model, kind), the kind shown only for slices, of the counted
    /// classes.
    pub fn models_and_kinds(&self) -> Multiset<'a> {
        self.models_and_kinds_of(false)
    }

    /// [`Devices::models_and_kinds`] of the classes whose number is not known, each once.
    pub fn uncounted_models_and_kinds(&self) -> Multiset<'a> {
        self.models_and_kinds_of(true)
    }

    fn models_and_kinds_of(&self, uncounted: bool) -> Multiset<'a> {
        let mut m = Multiset::new();
        for t in self.tallies.iter().filter(|t| t.uncounted == uncounted) {
            let model = t.model.unwrap_or("unknown");
            let n = if uncounted { 1 } else { t.count };
            if t.kind == DeviceKind::Slice {
                m.add_n(Cow::Owned(format!("{model} (MIG slice)")), n);
            } else {
                m.add_n(model, n);
            }
        }
        m
    }

    /// Whether any class's number is not known.
    pub fn any_uncounted(&self) -> bool {
        self.any(|t| t.uncounted)
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

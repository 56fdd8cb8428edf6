//! Pairing source devices with target devices for cuda-checkpoint's `--device-map`.
//!
//! Positional pairing turns a GPU difference into a device-map error that names neither GPU.
//! Here a source device is paired with a target device of the same class (kind, model,
//! profile), in visible order, and with itself where the UUID is the same on both sides.
//!
//! Cost stays near-linear whatever the input: identity pairs are found through a hash map,
//! devices are grouped into classes, and the classes are placed by the one matcher
//! ([`crate::matching`]) with each class's candidates found through an index, never by
//! comparing every device with every other.

use std::collections::BTreeSet;

use std::collections::HashMap as StdMap;
use std::hash::BuildHasher;

use foldhash::{HashMap, HashMapExt};

use crate::checks::devices::{Devices, Tally};
use crate::device::DeviceKind;
use crate::manifest::Device;
use crate::matching::{Problem, TooVaried, assign};
use crate::no_device_map::{NoDeviceMap, TooVariedToPair};
use crate::vocab::CheckName;

/// A device's class: each dimension `None` where it is unknown or waived, and then it fits any
/// value. The kind is always compared (unknown is a kind of its own) unless waived.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Class<'a> {
    kind: Option<DeviceKind>,
    model: Option<&'a str>,
    profile: Option<&'a str>,
}

impl<'a> Class<'a> {
    fn of(t: &Tally<'a>, skip: &BTreeSet<CheckName>) -> Self {
        Class {
            kind: (!skip.contains(&CheckName::MIG_PARTITIONING)).then_some(t.kind),
            model: t.model.filter(|_| !skip.contains(&CheckName::GPU_MODEL)),
            profile: t
                .profile
                .map(|p| p.as_str())
                .filter(|_| !skip.contains(&CheckName::MIG_PROFILE)),
        }
    }

    /// Which dimensions are known, as bits: kind 1, model 2, profile 4.
    fn mask(&self) -> u8 {
        u8::from(self.kind.is_some())
            | u8::from(self.model.is_some()) << 1
            | u8::from(self.profile.is_some()) << 2
    }

    /// The class with only the dimensions in `mask` kept.
    fn project(&self, mask: u8) -> Class<'a> {
        Class {
            kind: self.kind.filter(|_| mask & 1 != 0),
            model: self.model.filter(|_| mask & 2 != 0),
            profile: self.profile.filter(|_| mask & 4 != 0),
        }
    }

    fn fits(&self, other: &Class<'_>) -> bool {
        let m = self.mask() & other.mask();
        self.project(m) == other.project(m)
    }

    /// How many dimensions are known: the more, the fewer devices the class fits.
    fn known(&self) -> u32 {
        self.mask().count_ones()
    }
}

/// A bit per fingerprint, 256 bits per target: a clear bit proves a fingerprint absent, a set
/// one is a false positive for under 0.4% of sources.
struct Sketch(Vec<u64>);

impl Sketch {
    fn of(prints: impl Iterator<Item = u64>, n: usize) -> Self {
        let words = n.saturating_mul(4).next_power_of_two().clamp(1, 1 << 20);
        let mut bits = vec![0u64; words];
        for p in prints {
            let b = Self::bit(p, words);
            bits[b / 64] |= 1 << (b % 64);
        }
        Sketch(bits)
    }

    fn bit(print: u64, words: usize) -> usize {
        (print as usize) & (words * 64 - 1)
    }

    fn may_hold(&self, print: u64) -> bool {
        let b = Self::bit(print, self.0.len());
        self.0[b / 64] & (1 << (b % 64)) != 0
    }
}

/// Hashes a fingerprint by passing it through: it is already a seeded hash.
#[derive(Clone, Copy, Default)]
struct Prints;

impl std::hash::BuildHasher for Prints {
    type Hasher = Print;
    fn build_hasher(&self) -> Print {
        Print(0)
    }
}

#[derive(Default)]
struct Print(u64);

impl std::hash::Hasher for Print {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is ever called (the key is a `u64`); fold anything else in anyway.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Every dimension known.
const FULL: u8 = 0b111;

/// Up to this many classes are matched by scanning; beyond, through indexes.
const FEW: usize = 8;

/// One side's devices by class: the distinct classes (after waived dimensions are dropped) in
/// the order they first appear, and each device's class as an index.
struct Classed<'a> {
    list: &'a [Device],
    classes: Vec<Class<'a>>,
    /// How many devices each class has.
    sizes: Vec<usize>,
    /// Each device's tally (its class before waived dimensions are dropped).
    tally_of: &'a [u32],
    /// Each tally's class; `None` when they are one to one (nothing waived merged two).
    merged: Option<Vec<usize>>,
}

impl<'a> Classed<'a> {
    /// Built from the side's tallies, so each device costs an index, not a comparison.
    fn of(devices: &'a Devices<'a>, skip: &BTreeSet<CheckName>) -> Self {
        let mut classes: Vec<Class<'a>> = Vec::with_capacity(devices.tallies.len());
        let mut sizes: Vec<usize> = Vec::with_capacity(devices.tallies.len());
        let mut index: HashMap<Class<'a>, usize> = HashMap::new();
        let few = devices.tallies.len() <= 8;
        let canon: Vec<usize> = devices
            .tallies
            .iter()
            .map(|t| {
                let c = Class::of(t, skip);
                // Few classes (the usual case) are found by a scan; many through the map.
                let found = if few {
                    classes.iter().position(|x| *x == c)
                } else {
                    index.get(&c).copied()
                };
                let at = found.unwrap_or_else(|| {
                    classes.push(c);
                    sizes.push(0);
                    if !few {
                        index.insert(c, classes.len() - 1);
                    }
                    classes.len() - 1
                });
                sizes[at] += t.count;
                at
            })
            .collect();
        let one_to_one = classes.len() == devices.tallies.len();
        Classed {
            list: devices.list,
            classes,
            sizes,
            tally_of: &devices.class_of,
            merged: (!one_to_one).then_some(canon),
        }
    }

    /// Device `i`'s class, as an index.
    fn key(&self, i: usize) -> usize {
        let t = self.tally_of[i] as usize;
        self.merged.as_ref().map_or(t, |m| m[t])
    }

    fn class(&self, i: usize) -> &Class<'a> {
        &self.classes[self.key(i)]
    }

    /// The classes with members `keep` admits, each with its members in visible order.
    fn group(&self, keep: impl Fn(usize) -> bool) -> Vec<(Class<'a>, Vec<usize>)> {
        let mut members: Vec<Vec<usize>> = self.sizes.iter().map(|n| Vec::with_capacity(*n)).collect();
        for i in 0..self.list.len() {
            if keep(i) {
                members[self.key(i)].push(i);
            }
        }
        self.classes
            .iter()
            .zip(members)
            .filter(|(_, m)| !m.is_empty())
            .map(|(c, m)| (*c, m))
            .collect()
    }
}

/// Builds the map: `Ok("")` when every device maps to itself (or the source has none),
/// `Ok("a=b,…")` otherwise, and `Err` when a pairing or an id cuda-checkpoint accepts cannot
/// be found.
pub(crate) fn build(
    source: Option<&Devices<'_>>,
    target: Option<&Devices<'_>>,
    skip: &BTreeSet<CheckName>,
) -> Result<String, NoDeviceMap> {
    let (Some(source), Some(target)) = (source, target) else {
        return Err(NoDeviceMap::NotRecorded);
    };
    if source.is_empty() {
        return Ok(String::new());
    }
    let (src, tgt) = (source.list, target.list);
    let (sc, tc) = (Classed::of(source, skip), Classed::of(target, skip));
    // Pair only with targets cuda-checkpoint can be given (a UUID, not a legacy id) where that
    // is possible, so which of a node's interchangeable devices comes first does not decide
    // whether there is a map; otherwise pair with any, and let the id check below say why not.
    let usable: Vec<bool> = tgt.iter().map(|t| t.mappable_uuid().is_some()).collect();
    let pairs = match pair_up(&sc, &tc, &usable)? {
        Pairing::Paired(p) => p,
        Pairing::Unpaired(_) => match pair_up(&sc, &tc, &vec![true; tgt.len()])? {
            Pairing::Paired(p) => p,
            Pairing::Unpaired(i) => {
                return Err(NoDeviceMap::Unpaired {
                    index: i,
                    uuid: src[i].uuid.clone(),
                });
            }
        },
    };
    let mut map = String::with_capacity(src.len() * 84);
    // Only identity pairs keep a device where it is: when every pair is one, the map is empty.
    let all_identity = pairs.identical == src.len();
    let pairs = pairs.pairs;
    for (i, s) in src.iter().enumerate() {
        let j = pairs[i];
        let (su, tu) = (mappable(s, i)?, mappable(&tgt[j], j)?);
        if !map.is_empty() {
            map.push(',');
        }
        map.push_str(su);
        map.push('=');
        map.push_str(tu);
    }
    Ok(if all_identity { String::new() } else { map })
}

/// Each source device's target, and how many of the pairs are identity pairs.
struct Paired {
    pairs: Vec<usize>,
    identical: usize,
}

/// The outcome of [`pair_up`]: every source device paired, or one that cannot be.
enum Pairing {
    /// Every source device has a distinct target.
    Paired(Paired),
    /// This source device has no free target of its class.
    Unpaired(usize),
}

/// No target yet.
const NONE: usize = usize::MAX;

/// Pairs every source device with a distinct target device of its class among `allowed` ones:
/// identity first, then class by class in visible order.
fn pair_up(sc: &Classed<'_>, tc: &Classed<'_>, allowed: &[bool]) -> Result<Pairing, TooVariedToPair> {
    let mut partial = pair_identical(sc, tc, allowed);
    let outcome = if sc.classes.len() <= FEW
        && tc.classes.len() <= FEW
        && sc.classes.iter().chain(&tc.classes).all(|c| c.mask() == FULL)
    {
        pair_few_known(sc, tc, allowed, &mut partial)
    } else {
        pair_by_class(sc, tc, allowed, &mut partial)?
    };
    Ok(match outcome {
        Some(i) => Pairing::Unpaired(i),
        None => Pairing::Paired(Paired {
            pairs: partial.pairs,
            identical: partial.identical,
        }),
    })
}

/// Pairs made so far: each source's target ([`NONE`] for none), the targets taken, and how
/// many pairs keep a device where it is.
struct Partial {
    pairs: Vec<usize>,
    taken: Vec<bool>,
    identical: usize,
}

/// Identity first: a device present on both sides stays where it is. UUIDs are compared by a
/// fingerprint (a randomly seeded 64-bit hash, so no input can force collisions) and confirmed
/// by their text. A restore on another node shares no UUID with its checkpoint, so a bit per
/// target fingerprint rules out nearly every source before any map is built.
fn pair_identical(sc: &Classed<'_>, tc: &Classed<'_>, allowed: &[bool]) -> Partial {
    let (src, tgt) = (sc.list, tc.list);
    let mut p = Partial {
        pairs: vec![NONE; src.len()],
        taken: vec![false; tgt.len()],
        identical: 0,
    };
    let seed = foldhash::fast::RandomState::default();
    let prints: Vec<Option<u64>> = tgt
        .iter()
        .zip(allowed)
        .map(|(t, a)| t.uuid.as_ref().filter(|_| *a).map(|u| seed.hash_one(u.as_str())))
        .collect();
    let sketch = Sketch::of(prints.iter().flatten().copied(), tgt.len());
    let candidates: Vec<(usize, u64)> = src
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i, seed.hash_one(s.uuid.as_ref()?.as_str()))))
        .filter(|(_, p)| sketch.may_hold(*p))
        .collect();
    let take = |i: usize, at: usize, p: &mut Partial| {
        if sc.class(i).fits(tc.class(at)) {
            p.identical += 1;
            p.pairs[i] = at;
            p.taken[at] = true;
            true
        } else {
            false
        }
    };
    let same = |i: usize, j: usize| tgt[j].uuid.is_some() && tgt[j].uuid == src[i].uuid;
    if candidates.len() <= 8 {
        // A few (false positives, or a restore sharing a device or two): scan the targets.
        for &(i, print) in &candidates {
            if let Some(j) = (0..tgt.len()).find(|&j| !p.taken[j] && prints[j] == Some(print) && same(i, j)) {
                take(i, j, &mut p);
            }
        }
        return p;
    }
    // Many: a map from fingerprint to its first untaken target in visible order; `later[j]`
    // is the next target after `j` with the same fingerprint, and a taken head is unlinked,
    // so a UUID repeated on many devices costs O(1) per pair.
    let mut first: StdMap<u64, usize, Prints> = StdMap::with_capacity_and_hasher(tgt.len(), Prints);
    let mut later = vec![NONE; tgt.len()];
    for (j, print) in prints.iter().enumerate().rev() {
        if let Some(print) = print
            && let Some(old) = first.insert(*print, j)
        {
            later[j] = old;
        }
    }
    for &(i, print) in &candidates {
        let Some(head) = first.get_mut(&print) else {
            continue;
        };
        // Skip targets already taken or whose text differs (a collision no input can arrange).
        let mut at = *head;
        while at != NONE && (p.taken[at] || !same(i, at)) {
            at = later[at];
        }
        if at != NONE && take(i, at, &mut p) && *head == at {
            *head = later[at];
        }
    }
    p
}

/// Few classes, every one fully known (the usual case): a class fits only its equal, so each
/// left class walks its members in visible order and hands each the next free target of the
/// equal right class. Each class costs a pass over both lists and nothing is built. Returns
/// a source device left without a target.
fn pair_few_known(sc: &Classed<'_>, tc: &Classed<'_>, allowed: &[bool], p: &mut Partial) -> Option<usize> {
    let tgt = tc.list;
    for (l, class) in sc.classes.iter().enumerate() {
        let r = tc.classes.iter().position(|x| x == class);
        let mut j = 0;
        for (i, pair) in p.pairs.iter_mut().enumerate() {
            if *pair != NONE || sc.key(i) != l {
                continue;
            }
            let free = |j: usize| allowed[j] && !p.taken[j] && r == Some(tc.key(j));
            while j < tgt.len() && !free(j) {
                j += 1;
            }
            if j == tgt.len() {
                return Some(i);
            }
            *pair = j;
            j += 1;
        }
    }
    None
}

/// The rest by class, members in visible order: by equality when every class is fully known,
/// through the matcher otherwise. Returns a source device left without a target.
fn pair_by_class(
    sc: &Classed<'_>,
    tc: &Classed<'_>,
    allowed: &[bool],
    p: &mut Partial,
) -> Result<Option<usize>, TooVariedToPair> {
    let lefts = sc.group(|i| p.pairs[i] == NONE);
    if lefts.is_empty() {
        return Ok(None);
    }
    let rights = tc.group(|j| allowed[j] && !p.taken[j]);
    if lefts.iter().chain(&rights).all(|(c, _)| c.mask() == FULL) {
        return Ok(pair_equal_classes(&lefts, &rights, &mut p.pairs));
    }
    pair_matched(&lefts, &rights, &mut p.pairs)
}

/// A class of devices with its members, in visible order.
type Group<'a> = (Class<'a>, Vec<usize>);

/// Every class fully known: a class fits only its equal, so each left class takes from the one
/// right class equal to it, and no matcher is needed.
fn pair_equal_classes(lefts: &[Group<'_>], rights: &[Group<'_>], pairs: &mut [usize]) -> Option<usize> {
    let index: HashMap<Class<'_>, usize> = if rights.len() > 8 {
        rights.iter().enumerate().map(|(r, (c, _))| (*c, r)).collect()
    } else {
        HashMap::new()
    };
    for (c, members) in lefts {
        let r = if rights.len() > 8 {
            index.get(c).copied()
        } else {
            rights.iter().position(|(x, _)| x == c)
        };
        let got = r.map_or(&[][..], |r| rights[r].1.as_slice());
        for (k, &i) in members.iter().enumerate() {
            let Some(&j) = got.get(k) else {
                return Some(i);
            };
            pairs[i] = j;
        }
    }
    None
}

/// Classes with unknown dimensions: the matcher finds how many of each left class each right
/// class takes, then targets are handed out in visible order.
fn pair_matched(
    lefts: &[Group<'_>],
    rights: &[Group<'_>],
    pairs: &mut [usize],
) -> Result<Option<usize>, TooVariedToPair> {
    let assignment = assign(problem(lefts, rights)).map_err(|TooVaried| TooVariedToPair {
        sources: lefts.len(),
        targets: rights.len(),
    })?;
    if let Some(l) = assignment.unplaced.iter().position(|n| *n > 0) {
        // Which device is left over: the last of its class in visible order.
        let members = &lefts[l].1;
        return Ok(Some(members[members.len() - assignment.unplaced[l]]));
    }
    // Hand out the targets: each left class's right classes in the order their first target
    // shows, each right class's targets in visible order.
    let mut next = vec![0usize; rights.len()];
    for (l, (_, members)) in lefts.iter().enumerate() {
        let mut flows = assignment.flows[l].clone();
        flows.sort_by_key(|(r, _)| rights[*r].1[0]);
        let mut slots = flows.iter().flat_map(|&(r, n)| std::iter::repeat_n(r, n));
        for &i in members {
            let Some(r) = slots.next() else {
                return Ok(Some(i));
            };
            pairs[i] = rights[r].1[next[r]];
            next[r] += 1;
        }
    }
    Ok(None)
}

/// The matcher's problem. Buckets: the right classes of one known-mask, grouped by their
/// values on the dimensions a left class's mask shares with it. A left class fits exactly the
/// right classes of the bucket its own values name, for each right mask: at most eight buckets
/// per left class.
fn problem(lefts: &[Group<'_>], rights: &[Group<'_>]) -> Problem {
    let left_masks: BTreeSet<u8> = lefts.iter().map(|(c, _)| c.mask()).collect();
    let right_masks: BTreeSet<u8> = rights.iter().map(|(c, _)| c.mask()).collect();
    let mut bucket_of: HashMap<(u8, Class<'_>), usize> = HashMap::new();
    let mut buckets: Vec<Vec<usize>> = Vec::new();
    for (r, (c, _)) in rights.iter().enumerate() {
        let shared: BTreeSet<u8> = left_masks.iter().map(|m| m & c.mask()).collect();
        for m in shared {
            let b = *bucket_of.entry((c.mask(), c.project(m))).or_insert_with(|| {
                buckets.push(Vec::new());
                buckets.len() - 1
            });
            buckets[b].push(r);
        }
    }
    let links: Vec<Vec<usize>> = lefts
        .iter()
        .map(|(c, _)| {
            right_masks
                .iter()
                .filter_map(|&rm| bucket_of.get(&(rm, c.project(c.mask() & rm))).copied())
                .collect()
        })
        .collect();
    let mut order: Vec<usize> = (0..lefts.len()).collect();
    order.sort_by_key(|&l| std::cmp::Reverse(lefts[l].0.known()));
    Problem {
        need: lefts.iter().map(|(_, m)| m.len()).collect(),
        room: rights.iter().map(|(_, m)| m.len()).collect(),
        buckets,
        links,
        order,
    }
}

fn mappable(d: &Device, i: usize) -> Result<&str, NoDeviceMap> {
    d.mappable_uuid().ok_or_else(|| match &d.uuid {
        Some(u) => NoDeviceMap::LegacyId { uuid: u.clone() },
        None => NoDeviceMap::NoUuid { index: i },
    })
}

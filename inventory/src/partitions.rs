//! Source 2 under the DRA driver's `DynamicMIG` gate: GPUs that are partitioned on demand.
//!
//! With `DynamicMIG` (`kubernetes-sigs/dra-driver-nvidia-gpu` v25.12.0 on, KEP-4815
//! partitionable devices) the driver publishes, per GPU, one shared `CounterSet`
//! (`gpu-<minor>-counter-set`: one counter per capacity, `multiprocessors`, `copy-engines`,
//! `memory`, …, plus `memory-slice-<i>` of 1 per memory slice), the full GPU (`gpu-<minor>`,
//! with its `uuid`) consuming every counter, and every *possible* partition
//! (`gpu-<minor>-mig-<profile without dots>-<giProfileId>-<placementStart>`, no `uuid`)
//! consuming its capacities and the memory slices of its placement. A slice exists only once a
//! claim is allocated, and the driver destroys partitions it did not create.
//!
//! So the slices do not say which devices exist; they say which *combinations* a GPU can
//! supply. [`Supply`] keeps each GPU's counters and candidate devices, and
//! [`Supply::devices_for`] answers for one checkpoint: the devices of the checkpoint's
//! classes the node's counters can hold together (all of them when the shape fits), found by a
//! bounded search. Device names are never parsed: the counters carry the placement.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{Device as DraDevice, ResourceSlice};
use miggate_compat::{Device, DeviceKind, GpuManifest, MigProfile, Quantity};

use crate::error::{CounterSetProblem, DeviceProblem};

/// The most counters one counter set may declare; the driver writes about fifteen.
pub const MAX_COUNTERS: usize = 64;
/// The most search steps one checkpoint may cost against one node: placing on one GPU visits
/// at most this many packings, and the combination over GPUs at most this many states.
pub const SEARCH_BUDGET: usize = 200_000;

/// What a dynamic-MIG node can supply: per shared counter set (one per GPU), its capacity and
/// the devices that consume from it, plus devices that consume no counters (GPUs the driver
/// does not partition).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Supply {
    groups: Vec<Group>,
}

#[derive(Debug, Clone, PartialEq)]
struct Group {
    /// Remaining capacity per counter, in the counter set's order.
    capacity: Vec<u128>,
    candidates: Vec<Candidate>,
}

/// A device the driver offers: the full GPU or one possible partition.
#[derive(Debug, Clone, PartialEq)]
struct Candidate {
    device: Device,
    /// (counter index, amount), for the group's counters.
    consumes: Vec<(usize, u128)>,
}

/// How a candidate's counters are read from the pool.
pub(super) struct CounterSets {
    sets: BTreeMap<String, (Vec<String>, Vec<u128>)>,
}

impl CounterSets {
    /// The pool's shared counter sets; an error for a duplicate set, too many counters or a
    /// value that is not a quantity.
    pub(super) fn read(slices: &[&ResourceSlice]) -> Result<Self, CounterSetProblem> {
        let mut sets = BTreeMap::new();
        for set in slices
            .iter()
            .flat_map(|s| s.spec.shared_counters.iter().flatten())
        {
            if set.counters.len() > MAX_COUNTERS {
                return Err(CounterSetProblem::TooManyCounters {
                    set: set.name.clone(),
                    limit: MAX_COUNTERS,
                });
            }
            let mut names = Vec::with_capacity(set.counters.len());
            let mut values = Vec::with_capacity(set.counters.len());
            for (name, counter) in &set.counters {
                names.push(name.clone());
                values.push(
                    amount(&counter.value.0).ok_or_else(|| CounterSetProblem::NotAQuantity {
                        set: set.name.clone(),
                        counter: name.clone(),
                        value: counter.value.0.clone(),
                    })?,
                );
            }
            if sets.insert(set.name.clone(), (names, values)).is_some() {
                return Err(CounterSetProblem::Twice {
                    set: set.name.clone(),
                });
            }
            if sets.len() > super::MAX_SLICES * 8 {
                return Err(CounterSetProblem::TooManySets);
            }
        }
        Ok(CounterSets { sets })
    }
}

/// A counter's value in nano-units (quantities compare exactly this way).
fn amount(text: &str) -> Option<u128> {
    Quantity::new(text).nanos()
}

impl Supply {
    /// An empty supply with a group per counter set.
    pub(super) fn new(sets: &CounterSets) -> (Self, BTreeMap<String, usize>) {
        let mut index = BTreeMap::new();
        let groups = sets
            .sets
            .iter()
            .enumerate()
            .map(|(i, (name, (_, values)))| {
                index.insert(name.clone(), i);
                Group {
                    capacity: values.clone(),
                    candidates: Vec::new(),
                }
            })
            .collect();
        (Supply { groups }, index)
    }

    /// Adds a device the driver offers: `device` as compat reads it, consuming `dra`'s
    /// counters. A device without counters stands alone (a GPU the driver does not
    /// partition); one consuming from more than one set, or a counter its set does not
    /// declare, is an error.
    pub(super) fn add(
        &mut self,
        sets: &CounterSets,
        index: &BTreeMap<String, usize>,
        dra: &DraDevice,
        device: Device,
    ) -> Result<(), DeviceProblem> {
        let consumption = dra.consumes_counters.as_deref().unwrap_or_default();
        let [one] = consumption else {
            if consumption.is_empty() {
                self.groups.push(Group {
                    capacity: Vec::new(),
                    candidates: vec![Candidate {
                        device,
                        consumes: Vec::new(),
                    }],
                });
                return Ok(());
            }
            return Err(DeviceProblem::SeveralCounterSets);
        };
        let (Some(&g), Some((names, _))) = (index.get(&one.counter_set), sets.sets.get(&one.counter_set))
        else {
            return Err(DeviceProblem::UndeclaredSet {
                set: one.counter_set.clone(),
            });
        };
        let mut consumes = Vec::with_capacity(one.counters.len());
        for (name, counter) in &one.counters {
            let Some(i) = names.iter().position(|n| n == name) else {
                return Err(DeviceProblem::UndeclaredCounter {
                    counter: name.clone(),
                    set: one.counter_set.clone(),
                });
            };
            let value = amount(&counter.value.0).ok_or_else(|| DeviceProblem::NotAQuantity {
                counter: name.clone(),
                value: counter.value.0.clone(),
            })?;
            consumes.push((i, value));
        }
        self.groups[g].candidates.push(Candidate { device, consumes });
        Ok(())
    }

    /// How many possible devices the node offers (for notes).
    pub fn offered(&self) -> usize {
        self.groups.iter().map(|g| g.candidates.len()).sum()
    }

    /// The devices of `source`'s classes this node's counters can hold at once: all of them
    /// when the checkpoint's shape fits, else the largest part that does (so the checks show
    /// what is short). `None` when the source's devices are not known well enough to place
    /// (absent, a device of unknown kind, a slice without a profile), or when the search
    /// would pass its budget: the GPU checks then stay unknown.
    pub fn devices_for(&self, source: &GpuManifest) -> Option<Vec<Device>> {
        let wanted = demand(source.devices()?)?;
        let limits: Vec<u16> = wanted.iter().map(|(_, n)| *n).collect();
        let mut budget = SEARCH_BUDGET;
        // Per group: each distinct coverage (devices per class, capped) and one packing.
        let mut options: Vec<Vec<(Vec<u16>, Vec<usize>)>> = Vec::with_capacity(self.groups.len());
        for g in &self.groups {
            options.push(g.packings(&wanted, &limits, &mut budget)?);
        }
        // Combine group by group, keeping each reachable total once (capped by the demand),
        // with how it was reached.
        let mut layers: Vec<Reached> = Vec::with_capacity(options.len());
        let mut states: Reached = BTreeMap::new();
        states.insert(vec![0; limits.len()], (Vec::new(), 0));
        for group in &options {
            let mut next: Reached = BTreeMap::new();
            for state in states.keys() {
                for (k, (cover, _)) in group.iter().enumerate() {
                    budget = budget.checked_sub(1)?;
                    let total: Vec<u16> = state
                        .iter()
                        .zip(cover)
                        .zip(&limits)
                        .map(|((a, b), l)| a.saturating_add(*b).min(*l))
                        .collect();
                    next.entry(total).or_insert_with(|| (state.clone(), k));
                }
            }
            layers.push(std::mem::take(&mut states));
            states = next;
        }
        // The best total: everything, else the most devices placed (the first such in order).
        let covered = |s: &Vec<u16>| s.iter().map(|n| usize::from(*n)).sum::<usize>();
        let mut best = states.keys().next()?.clone();
        for s in states.keys() {
            if covered(s) > covered(&best) {
                best = s.clone();
            }
        }
        // Walk back through the layers to the packing chosen on each group.
        let mut chosen = vec![0usize; options.len()];
        let mut at = best;
        let mut last = states;
        for (g, layer) in layers.into_iter().enumerate().rev() {
            let (prev, k) = last.get(&at)?.clone();
            chosen[g] = k;
            at = prev;
            last = layer;
        }
        let mut devices = Vec::new();
        for ((g, group), k) in self.groups.iter().enumerate().zip(chosen) {
            let (_, packing) = options.get(g)?.get(k)?;
            devices.extend(packing.iter().map(|&c| group.candidates[c].device.clone()));
        }
        Some(devices)
    }
}

/// Totals reached after some GPUs (devices per wanted class), each with the total it came
/// from and the packing of the last GPU that reached it.
type Reached = BTreeMap<Vec<u16>, (Vec<u16>, usize)>;

/// A class of the source's devices (kind, model, profile) and how many it has.
type Wanted<'a> = Vec<((DeviceKind, Option<&'a str>, Option<&'a str>), u16)>;

/// The source's devices counted per class, or `None` when one cannot be placed by its class.
fn demand(devices: &[Device]) -> Option<Wanted<'_>> {
    let mut wanted: Wanted<'_> = Vec::new();
    for d in devices {
        let key = match d.kind() {
            DeviceKind::Whole => (DeviceKind::Whole, d.model(), None),
            DeviceKind::Slice => (
                DeviceKind::Slice,
                d.model(),
                Some(d.mig_profile.as_ref().map(MigProfile::as_str)?),
            ),
            DeviceKind::Unknown => return None,
        };
        match wanted.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n = n.checked_add(1)?,
            None => {
                if wanted.len() >= 64 {
                    return None;
                }
                wanted.push((key, 1));
            }
        }
    }
    Some(wanted)
}

/// Which class a candidate device serves, if any the source wants. A model known on either
/// side must be the same.
fn class_of(device: &Device, wanted: &Wanted<'_>) -> Option<usize> {
    let (kind, model) = (device.kind(), device.model());
    let profile = device.mig_profile.as_ref().map(MigProfile::as_str);
    wanted.iter().position(|((k, m, p), _)| {
        *k == kind
            && (m.is_none() || model.is_none() || *m == model)
            && (kind != DeviceKind::Slice || *p == profile)
    })
}

impl Group {
    /// Every distinct coverage this GPU can give the wanted classes, with one packing (the
    /// candidates chosen) for each: a depth-first walk over the candidates that serve a
    /// wanted class, on an explicit stack, each step taking a candidate whose counters still
    /// fit. `None` past the budget.
    fn packings(
        &self,
        wanted: &Wanted<'_>,
        limits: &[u16],
        budget: &mut usize,
    ) -> Option<Vec<(Vec<u16>, Vec<usize>)>> {
        let useful: Vec<(usize, usize)> = self
            .candidates
            .iter()
            .enumerate()
            .filter_map(|(i, c)| class_of(&c.device, wanted).map(|k| (i, k)))
            .collect();
        let mut found: BTreeMap<Vec<u16>, Vec<usize>> = BTreeMap::new();
        // (next candidate to consider, remaining counters, coverage, chosen candidates)
        let mut stack = vec![(
            0usize,
            self.capacity.clone(),
            vec![0u16; limits.len()],
            Vec::new(),
        )];
        while let Some((from, left, cover, chosen)) = stack.pop() {
            *budget = budget.checked_sub(1)?;
            found.entry(cover.clone()).or_insert_with(|| chosen.clone());
            if cover.iter().zip(limits).all(|(c, l)| c >= l) {
                // Every wanted device placed: nothing further can help.
                continue;
            }
            for (j, &(c, k)) in useful.iter().enumerate().skip(from) {
                *budget = budget.checked_sub(1)?;
                if cover[k] >= limits[k] {
                    continue;
                }
                let candidate = &self.candidates[c];
                let fits = candidate
                    .consumes
                    .iter()
                    .all(|(i, v)| left.get(*i).is_some_and(|l| l >= v));
                if !fits {
                    continue;
                }
                let mut left = left.clone();
                for (i, v) in &candidate.consumes {
                    left[*i] -= v;
                }
                let mut cover = cover.clone();
                cover[k] += 1;
                let mut chosen = chosen.clone();
                chosen.push(c);
                stack.push((j + 1, left, cover, chosen));
            }
        }
        Some(found.into_iter().collect())
    }
}

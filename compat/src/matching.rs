//! The one matcher: places counted items of left classes into counted room of right classes,
//! as many as can be placed. Offer mode's GPU-instance placement and the device map both ask
//! this question, of classes of alike GPU instances and of alike devices.
//!
//! Working on classes with counts keeps a node of a thousand alike slices one class, not a
//! thousand nodes. Which right classes a left class may use comes as *buckets*: lists of right
//! classes shared between left classes, so a left class that fits everything costs one bucket,
//! not one link per right class. The search is iterative (no recursion that a long chain could
//! overflow): a greedy pass in the caller's order, then breadth-first augmenting paths for what
//! is left, each bucket and class visited at most once per search, under a work budget that
//! turns a pathological input into an answer ("too varied to pair") instead of a stall.

use std::collections::VecDeque;

use foldhash::{HashMap, HashMapExt};

/// What to place: `need[l]` items of each left class, `room[r]` places in each right class,
/// and for each left class the buckets (lists of right classes) it fits.
pub(crate) struct Problem {
    pub need: Vec<usize>,
    pub room: Vec<usize>,
    pub buckets: Vec<Vec<usize>>,
    pub links: Vec<Vec<usize>>,
    /// The order the greedy pass serves left classes in: the most constrained first makes
    /// augmenting rare.
    pub order: Vec<usize>,
}

/// Where items went: for each left class, (right class, how many), and how many found no place.
pub(crate) struct Assignment {
    pub flows: Vec<Vec<(usize, usize)>>,
    pub unplaced: Vec<usize>,
    /// The work it took, in the budget's units: what the cost tests bound.
    #[cfg(test)]
    pub work: usize,
}

/// The work budget ran out: the input has more distinct classes than a real node or
/// checkpoint could, arranged against the greedy order.
#[derive(Debug)]
pub(crate) struct TooVaried;

/// How many bucket entries and class visits an assignment may cost: far beyond any real input
/// (a 16 MiB manifest holds under 200k devices), small enough to answer in about a second.
pub(crate) const WORK_BUDGET: usize = 40_000_000;

/// Places what can be placed: a greedy pass in the caller's order, then augmenting paths
/// until none is left.
pub(crate) fn assign(problem: Problem) -> Result<Assignment, TooVaried> {
    let Problem {
        need,
        room,
        buckets,
        links,
        order,
    } = problem;
    let fits = Fits { buckets, links };
    let mut matcher = Matcher {
        placed: Placed::new(room.len()),
        need,
        room,
        budget: Budget::default(),
    };
    matcher.greedy(&fits, &order)?;
    matcher.augment(&fits)?;
    Ok(matcher.finish())
}

/// Which right classes each left class fits, apart from what changes while placing: the
/// search reads it while the [`Matcher`] moves items, so the two are borrowed separately.
struct Fits {
    buckets: Vec<Vec<usize>>,
    links: Vec<Vec<usize>>,
}

/// The work spent so far, against [`WORK_BUDGET`]: every step of the search pays for what it
/// touches, so that an input no real node could produce ends in [`TooVaried`], not a stall.
#[derive(Default)]
struct Budget {
    work: usize,
}

impl Budget {
    fn spend(&mut self, n: usize) -> Result<(), TooVaried> {
        self.work = self.work.saturating_add(n);
        if self.work > WORK_BUDGET {
            Err(TooVaried)
        } else {
            Ok(())
        }
    }
}

/// Where items sit. `flow[(l, r)]`: how many of left class l sit in right class r;
/// `users[r]`: the left classes with some in r (possibly stale, with flow 0), so that a search
/// reaching a full right class finds who could move out of it without scanning every class.
struct Placed {
    flow: HashMap<(usize, usize), usize>,
    users: Vec<Vec<usize>>,
}

impl Placed {
    fn new(rights: usize) -> Placed {
        Placed {
            flow: HashMap::new(),
            users: vec![Vec::new(); rights],
        }
    }

    /// How many of left class `l` sit in right class `r`.
    fn get(&self, l: usize, r: usize) -> usize {
        self.flow.get(&(l, r)).copied().unwrap_or(0)
    }

    /// Puts `n` more of left class `l` in right class `r`, listing `l` as a user of `r` the
    /// first time (or again after its flow dropped to 0).
    fn add(&mut self, l: usize, r: usize, n: usize) {
        let f = self.flow.entry((l, r)).or_insert(0);
        if *f == 0 {
            self.users[r].push(l);
        }
        *f += n;
    }

    /// Takes `n` of left class `l` out of right class `r` (an augmenting path moves them on).
    fn take(&mut self, l: usize, r: usize, n: usize) {
        if let Some(f) = self.flow.get_mut(&(l, r)) {
            *f -= n;
        }
    }

    /// The placements per left class, as (right class, how many), in right class order.
    fn into_flows(mut self, lefts: usize) -> Vec<Vec<(usize, usize)>> {
        let mut flows: Vec<Vec<(usize, usize)>> = vec![Vec::new(); lefts];
        for (r, ls) in self.users.iter().enumerate() {
            for &l in ls {
                if let Some(&n) = self.flow.get(&(l, r))
                    && n > 0
                {
                    flows[l].push((r, n));
                    // Each (l, r) is listed once in `users[r]`, but stays there when its flow
                    // drops to 0 and comes back; the removal below keeps it from counting twice.
                    self.flow.remove(&(l, r));
                }
            }
        }
        flows
    }
}

/// The state of an assignment: what each left class still needs, the room each right class
/// has left, where items sit and the work spent.
struct Matcher {
    need: Vec<usize>,
    room: Vec<usize>,
    placed: Placed,
    budget: Budget,
}

/// An augmenting path, kept as back-links from its end: the right class with room it ends at,
/// the left class each right class was reached from, and the right class each left class was
/// (`usize::MAX` for the left class in need it starts at).
struct Path {
    end: usize,
    via_left: Vec<usize>,
    via_right: Vec<usize>,
}

/// One breadth-first search's marks: what was seen, which buckets were expanded (each at most
/// once, so a shared bucket costs once per search), the back-links and the queue.
struct Search {
    seen_left: Vec<bool>,
    seen_right: Vec<bool>,
    expanded: Vec<bool>,
    via_left: Vec<usize>,
    via_right: Vec<usize>,
    queue: VecDeque<usize>,
}

impl Search {
    fn new(lefts: usize, rights: usize, buckets: usize, starts: &[usize]) -> Search {
        let mut search = Search {
            seen_left: vec![false; lefts],
            seen_right: vec![false; rights],
            expanded: vec![false; buckets],
            via_left: vec![usize::MAX; rights],
            via_right: vec![usize::MAX; lefts],
            queue: VecDeque::new(),
        };
        for &l in starts {
            search.seen_left[l] = true;
            search.queue.push_back(l);
        }
        search
    }

    fn into_path(self, end: usize) -> Path {
        Path {
            end,
            via_left: self.via_left,
            via_right: self.via_right,
        }
    }
}

impl Matcher {
    /// Serves left classes in `order`, each as far as room goes. Each bucket's cursor only
    /// moves forward past full right classes, which never get room back in this pass, so the
    /// whole pass is linear in the buckets' sizes.
    fn greedy(&mut self, fits: &Fits, order: &[usize]) -> Result<(), TooVaried> {
        let mut cursor = vec![0usize; fits.buckets.len()];
        for &l in order {
            for &b in &fits.links[l] {
                let bucket = &fits.buckets[b];
                while self.need[l] > 0 && cursor[b] < bucket.len() {
                    self.budget.spend(1)?;
                    let r = bucket[cursor[b]];
                    if self.room[r] == 0 {
                        cursor[b] += 1;
                        continue;
                    }
                    let n = self.need[l].min(self.room[r]);
                    self.need[l] -= n;
                    self.room[r] -= n;
                    self.placed.add(l, r, n);
                }
            }
        }
        Ok(())
    }

    /// Places what the greedy pass left, moving earlier choices aside where that makes room,
    /// one augmenting path at a time until none is found.
    fn augment(&mut self, fits: &Fits) -> Result<(), TooVaried> {
        while let Some(path) = self.search(fits)? {
            let amount = self.capacity(&path);
            self.shift(&path, amount);
        }
        Ok(())
    }

    /// Searches breadth-first from every left class still in need, through right classes to
    /// the left classes placed there (which may move), until a right class with room. Iterative,
    /// so a long chain cannot overflow the stack.
    fn search(&mut self, fits: &Fits) -> Result<Option<Path>, TooVaried> {
        let starts: Vec<usize> = (0..self.need.len()).filter(|&l| self.need[l] > 0).collect();
        if starts.is_empty() {
            return Ok(None);
        }
        self.budget.spend(starts.len())?;
        let mut search = Search::new(self.need.len(), self.room.len(), fits.buckets.len(), &starts);
        while let Some(l) = search.queue.pop_front() {
            for &b in &fits.links[l] {
                if std::mem::replace(&mut search.expanded[b], true) {
                    continue;
                }
                self.budget.spend(fits.buckets[b].len())?;
                for &r in &fits.buckets[b] {
                    if self.reach(&mut search, l, r)? {
                        return Ok(Some(search.into_path(r)));
                    }
                }
            }
        }
        Ok(None)
    }

    /// Reaches right class `r` from left class `l`, if no earlier step did. True when `r` has
    /// room (the path ends there); otherwise the left classes placed in `r` join the search.
    fn reach(&mut self, search: &mut Search, l: usize, r: usize) -> Result<bool, TooVaried> {
        if std::mem::replace(&mut search.seen_right[r], true) {
            return Ok(false);
        }
        search.via_left[r] = l;
        if self.room[r] > 0 {
            return Ok(true);
        }
        self.budget.spend(self.placed.users[r].len())?;
        for &k in &self.placed.users[r] {
            if !search.seen_left[k] && self.placed.get(k, r) > 0 {
                search.seen_left[k] = true;
                search.via_right[k] = r;
                search.queue.push_back(k);
            }
        }
        Ok(false)
    }

    /// How much `path` carries: the room at its end, the flows it moves, the need at its start.
    fn capacity(&self, path: &Path) -> usize {
        let mut amount = self.room[path.end];
        let mut l = path.via_left[path.end];
        loop {
            let back = path.via_right[l];
            if back == usize::MAX {
                return amount.min(self.need[l]);
            }
            amount = amount.min(self.placed.get(l, back));
            l = path.via_left[back];
        }
    }

    /// Moves `amount` along `path`: into the room at its end, each left class on the way one
    /// right class further, out of the need at its start.
    fn shift(&mut self, path: &Path, amount: usize) {
        self.room[path.end] -= amount;
        let (mut r, mut l) = (path.end, path.via_left[path.end]);
        loop {
            self.placed.add(l, r, amount);
            let back = path.via_right[l];
            if back == usize::MAX {
                self.need[l] -= amount;
                return;
            }
            self.placed.take(l, back, amount);
            (r, l) = (back, path.via_left[back]);
        }
    }

    fn finish(self) -> Assignment {
        Assignment {
            flows: self.placed.into_flows(self.need.len()),
            unplaced: self.need,
            #[cfg(test)]
            work: self.budget.work,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A chain of `n` classes: left i fits rights i-1 and i (left 0 only right 0), served in
    /// `order`.
    fn chain(n: usize, order: Vec<usize>) -> Problem {
        Problem {
            need: vec![1; n],
            room: vec![1; n],
            buckets: (0..n)
                .map(|i| if i == 0 { vec![0] } else { vec![i - 1, i] })
                .collect(),
            links: (0..n).map(|i| vec![i]).collect(),
            order,
        }
    }

    /// The size of a problem: classes plus bucket entries.
    fn size(p: &Problem) -> usize {
        p.need.len() + p.room.len() + p.buckets.iter().map(Vec::len).sum::<usize>()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Chains served in any order are placed whole, at a cost near-linear in their size.
        #[test]
        fn chains_cost_near_linear_work(n in 2usize..3000, seed in any::<u64>()) {
            let mut order: Vec<usize> = (0..n).collect();
            // A seeded shuffle: any serving order must stay cheap.
            let mut x = seed | 1;
            for i in (1..n).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                order.swap(i, (x % (i as u64 + 1)) as usize);
            }
            let p = chain(n, order);
            let bound = 8 * size(&p) * (usize::BITS - n.leading_zeros()) as usize;
            let placed = assign(p).unwrap();
            prop_assert_eq!(placed.unplaced.iter().sum::<usize>(), 0);
            prop_assert!(placed.work <= bound, "work {} over {bound} for n {n}", placed.work);
        }

        /// A crowd: many left classes all fitting one shared bucket of many right classes,
        /// with more demand than room. Cost stays near-linear, and exactly the room is placed.
        #[test]
        fn crowds_cost_near_linear_work(lefts in 1usize..2000, rights in 1usize..2000, each in 1usize..4) {
            let p = Problem {
                need: vec![each; lefts],
                room: vec![1; rights],
                buckets: vec![(0..rights).collect()],
                links: vec![vec![0]; lefts],
                order: (0..lefts).collect(),
            };
            let bound = 8 * size(&p) * (usize::BITS - (lefts + rights).leading_zeros()) as usize;
            let placed = assign(p).unwrap();
            let total: usize = placed.flows.iter().flatten().map(|(_, n)| n).sum();
            prop_assert_eq!(total, rights.min(lefts * each));
            prop_assert!(placed.work <= bound, "work {} over {bound}", placed.work);
        }
    }

    fn placed(p: &Assignment) -> usize {
        p.flows.iter().flatten().map(|(_, n)| n).sum()
    }

    #[test]
    fn a_greedy_choice_is_undone_when_a_later_class_needs_its_place() {
        // Left 0 fits rights 0 and 1; left 1 fits right 0 only. Greedy gives left 0 right 0,
        // and the augmenting path moves it to right 1.
        let p = assign(Problem {
            need: vec![1, 1],
            room: vec![1, 1],
            buckets: vec![vec![0, 1], vec![0]],
            links: vec![vec![0], vec![1]],
            order: vec![0, 1],
        })
        .unwrap();
        assert_eq!(p.unplaced, [0, 0]);
        assert_eq!(p.flows[0], [(1, 1)]);
        assert_eq!(p.flows[1], [(0, 1)]);
    }

    #[test]
    fn counts_are_capacities() {
        let p = assign(Problem {
            need: vec![5, 3],
            room: vec![4, 3],
            buckets: vec![vec![0, 1], vec![0]],
            links: vec![vec![0], vec![1]],
            order: vec![0, 1],
        })
        .unwrap();
        assert_eq!(placed(&p), 7);
        assert_eq!(p.unplaced.iter().sum::<usize>(), 1);
    }

    #[test]
    fn a_long_chain_is_placed_without_recursion() {
        // Left i > 0 fits rights i-1 and i, left 0 only right 0. Served last, left 0 takes
        // right 0 back from left 1, which moves to right 1, and so on: one augmenting path
        // through every class, where a recursive search would need a frame per link.
        let n = 200_000;
        let buckets: Vec<Vec<usize>> = (0..n)
            .map(|i| if i == 0 { vec![0] } else { vec![i - 1, i] })
            .collect();
        let p = assign(Problem {
            need: vec![1; n],
            room: vec![1; n],
            buckets,
            links: (0..n).map(|i| vec![i]).collect(),
            order: (1..n).chain([0]).collect(),
        })
        .unwrap();
        assert_eq!(placed(&p), n);
        assert_eq!(p.flows[0], [(0, 1)]);
        assert_eq!(p.flows[n - 1], [(n - 1, 1)]);
    }
}

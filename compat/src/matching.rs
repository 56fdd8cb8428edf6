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

/// Places what can be placed.
pub(crate) fn assign(problem: Problem) -> Result<Assignment, TooVaried> {
    let Problem {
        mut need,
        mut room,
        buckets,
        links,
        order,
    } = problem;
    let mut work = 0usize;
    let mut spend = |n: usize| -> Result<(), TooVaried> {
        work = work.saturating_add(n);
        if work > WORK_BUDGET {
            Err(TooVaried)
        } else {
            Ok(())
        }
    };
    // flow[(l, r)]: how many of left class l sit in right class r; users[r]: the left classes
    // with some in r (possibly stale, with flow 0).
    let mut flow: HashMap<(usize, usize), usize> = HashMap::new();
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); room.len()];
    fn add(
        flow: &mut HashMap<(usize, usize), usize>,
        users: &mut [Vec<usize>],
        l: usize,
        r: usize,
        n: usize,
    ) {
        let f = flow.entry((l, r)).or_insert(0);
        if *f == 0 {
            users[r].push(l);
        }
        *f += n;
    }

    // Greedy: each bucket's cursor only moves forward past full right classes, which never
    // get room back in this pass, so the whole pass is linear in the buckets' sizes.
    let mut cursor = vec![0usize; buckets.len()];
    for &l in &order {
        for &b in &links[l] {
            let bucket = &buckets[b];
            while need[l] > 0 && cursor[b] < bucket.len() {
                spend(1)?;
                let r = bucket[cursor[b]];
                if room[r] == 0 {
                    cursor[b] += 1;
                    continue;
                }
                let n = need[l].min(room[r]);
                need[l] -= n;
                room[r] -= n;
                add(&mut flow, &mut users, l, r, n);
            }
        }
    }

    // Augmenting paths for what is left: from every left class still in need, through right
    // classes to the left classes placed there (which may move), until a right class with room.
    loop {
        let starts: Vec<usize> = (0..need.len()).filter(|&l| need[l] > 0).collect();
        if starts.is_empty() {
            break;
        }
        spend(starts.len())?;
        let mut seen_left = vec![false; need.len()];
        let mut seen_right = vec![false; room.len()];
        let mut expanded = vec![false; buckets.len()];
        // The left class a right class was reached from, and the right class a left class was.
        let mut via_left: Vec<usize> = vec![usize::MAX; room.len()];
        let mut via_right: Vec<usize> = vec![usize::MAX; need.len()];
        let mut queue: VecDeque<usize> = VecDeque::new();
        for &l in &starts {
            seen_left[l] = true;
            queue.push_back(l);
        }
        let mut end = None;
        'search: while let Some(l) = queue.pop_front() {
            for &b in &links[l] {
                if std::mem::replace(&mut expanded[b], true) {
                    continue;
                }
                spend(buckets[b].len())?;
                for &r in &buckets[b] {
                    if std::mem::replace(&mut seen_right[r], true) {
                        continue;
                    }
                    via_left[r] = l;
                    if room[r] > 0 {
                        end = Some(r);
                        break 'search;
                    }
                    spend(users[r].len())?;
                    for &k in &users[r] {
                        if !seen_left[k] && flow.get(&(k, r)).is_some_and(|f| *f > 0) {
                            seen_left[k] = true;
                            via_right[k] = r;
                            queue.push_back(k);
                        }
                    }
                }
            }
        }
        let Some(end) = end else { break };
        // How much the path carries: the room at its end, the flows it moves, the need at its
        // start; then move it.
        let mut amount = room[end];
        let mut l = via_left[end];
        loop {
            let back = via_right[l];
            if back == usize::MAX {
                amount = amount.min(need[l]);
                break;
            }
            amount = amount.min(flow.get(&(l, back)).copied().unwrap_or(0));
            l = via_left[back];
        }
        room[end] -= amount;
        let (mut r, mut l) = (end, via_left[end]);
        loop {
            add(&mut flow, &mut users, l, r, amount);
            let back = via_right[l];
            if back == usize::MAX {
                need[l] -= amount;
                break;
            }
            if let Some(f) = flow.get_mut(&(l, back)) {
                *f -= amount;
            }
            (r, l) = (back, via_left[back]);
        }
    }

    let mut flows: Vec<Vec<(usize, usize)>> = vec![Vec::new(); need.len()];
    for (r, ls) in users.iter().enumerate() {
        for &l in ls {
            if let Some(&n) = flow.get(&(l, r))
                && n > 0
            {
                flows[l].push((r, n));
                // Each (l, r) is listed once in `users[r]`, but stays there when its flow
                // drops to 0 and comes back; the removal below keeps it from counting twice.
                flow.remove(&(l, r));
            }
        }
    }
    Ok(Assignment {
        flows,
        unplaced: need,
        #[cfg(test)]
        work,
    })
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

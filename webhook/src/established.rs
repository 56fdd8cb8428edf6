//! The places of established admission connections (past their TLS handshake): a cap on all
//! of them, a cap per source address, and, at the cap, room made for an address holding fewer
//! places than another.
//!
//! Every open connection holds a task, TLS state and read buffers (about 20 KiB while a
//! request is read). The port is reachable from every pod, so without a cap a client that
//! opens connections faster than the deadlines close them grows the webhook until it is
//! OOM-killed, and with failure policy `Fail` no restore pod can be created anywhere.
//!
//! At the cap, a newcomer from an address holding at least two places fewer than the address
//! holding the most takes a place from it: that address's oldest connection is told to close
//! at its next idle moment (at once when idle; after its answer when a request is in flight),
//! as the age bound closes one. Any other newcomer is shed (closed), and the connections
//! already open carry on. So a client holding every place from a few addresses (kept-alive
//! connections, each sending a request every few seconds) does not keep out the API server,
//! which holds none: each connection it opens takes one of theirs, until it holds as many as
//! they do (a share of the cap per address). A client cannot take them back, nor make two
//! addresses trade places back and forth: it would need to hold two fewer than another.
//! What remains: a client holding places from as many addresses as there are places, one
//! each, leaves the API server nothing to take (docs/webhook.md, the threat model).
//!
//! The connections told to close still hold their memory until they do: at most
//! [`retiring_budget`] of them at once, beyond which a newcomer is shed, so the open
//! connections never exceed the cap by more than that.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::oneshot;

use crate::log_gate::{FAILURE_LOG_EVERY, LogGate};

/// How many connections told to close to make room may still be open at once, for a cap of
/// `max`: an eighth of it (at least one). Each holds its memory until its answer is written,
/// at most a request deadline.
pub const fn retiring_budget(max: usize) -> usize {
    if max / 8 == 0 { 1 } else { max / 8 }
}

/// A source address as the gate counts it: IPv4 clients of a dual-stack listener arrive as
/// `::ffff:a.b.c.d` and count as `a.b.c.d`; a connection whose address could not be read
/// counts under `None`, as one more address (with no cap of its own).
type Source = Option<IpAddr>;

/// Counts established connections against the caps; clones share it.
#[derive(Debug, Clone)]
pub struct ConnectionGate {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    max: usize,
    /// Open connections, those told to close among them.
    open: Gauge,
    shed: Counter,
    per_source: Option<PerSource>,
    /// What counts the connections told to close to make room; `None`: the gate sheds at the
    /// cap and makes no room.
    evicted: Option<Counter>,
    places: Mutex<Places>,
    shed_log: LogGate,
    evicted_log: LogGate,
}

/// The per-source cap.
#[derive(Debug)]
struct PerSource {
    max: usize,
    shed: Counter,
}

/// The places held, by address, each address's oldest first.
#[derive(Debug, Default)]
struct Places {
    /// Each place's number (lower is older) and the sender that tells its connection to
    /// close. An address has an entry only while it holds a place; a connection told to close
    /// holds none.
    by_source: HashMap<Source, BTreeMap<u64, oneshot::Sender<()>>>,
    /// Places held.
    held: usize,
    /// Connections told to close, not closed yet.
    retiring: usize,
    next: u64,
}

impl Places {
    fn held_by(&self, source: Source) -> usize {
        self.by_source.get(&source).map_or(0, BTreeMap::len)
    }

    /// The address holding the most places (the oldest place first among equals), and how
    /// many. Linear in the addresses holding places, at most the cap.
    fn fullest(&self) -> Option<(Source, usize)> {
        self.by_source
            .iter()
            .filter_map(|(source, places)| {
                let (oldest, _) = places.first_key_value()?;
                Some((places.len(), Reverse(*oldest), *source))
            })
            .max()
            .map(|(held, _, source)| (source, held))
    }

    fn give_back(&mut self, source: Source, id: u64) {
        let Some(places) = self.by_source.get_mut(&source) else {
            // Told to close earlier: its place went to another.
            self.retiring = self.retiring.saturating_sub(1);
            return;
        };
        if places.remove(&id).is_none() {
            self.retiring = self.retiring.saturating_sub(1);
            return;
        }
        self.held -= 1;
        if places.is_empty() {
            self.by_source.remove(&source);
        }
    }
}

/// What [`ConnectionGate`] decides for a newcomer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decision {
    Enter,
    /// The oldest place of this address is taken for the newcomer.
    TakeFrom(Source),
    Shed(Cap),
}

/// Which cap shed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cap {
    Global,
    PerSource,
}

impl ConnectionGate {
    /// A gate admitting at most `max` connections, counting open ones in `open` and those
    /// shed at the cap in `shed`; it sheds at the cap, making no room, until
    /// [`ConnectionGate::making_room`].
    pub fn new(max: usize, open: Gauge, shed: Counter) -> Self {
        ConnectionGate {
            shared: Arc::new(Shared {
                max,
                open,
                shed,
                per_source: None,
                evicted: None,
                places: Mutex::default(),
                shed_log: LogGate::new(FAILURE_LOG_EVERY),
                evicted_log: LogGate::new(FAILURE_LOG_EVERY),
            }),
        }
    }

    /// The gate with at most `max` connections from any one source address too, those shed
    /// for it counted in `shed` (not in the global cap's counter). Call it before the gate is
    /// shared.
    #[must_use]
    pub fn per_source(self, max: usize, shed: Counter) -> Self {
        self.with(|s| s.per_source = Some(PerSource { max, shed }))
    }

    /// The gate making room at the cap for an address holding fewer places (see the module's
    /// documentation), each connection told to close for it counted in `evicted`. Call it
    /// before the gate is shared.
    #[must_use]
    pub fn making_room(self, evicted: Counter) -> Self {
        self.with(|s| s.evicted = Some(evicted))
    }

    fn with(self, change: impl FnOnce(&mut Shared)) -> Self {
        match Arc::try_unwrap(self.shared) {
            Ok(mut shared) => {
                change(&mut shared);
                ConnectionGate {
                    shared: Arc::new(shared),
                }
            }
            // Shared already: left as it is (a builder called late is a programming error
            // the tests catch, not something a client can cause).
            Err(shared) => ConnectionGate { shared },
        }
    }

    fn decide(&self, places: &Places, source: Source) -> Decision {
        let shared = &*self.shared;
        let mine = places.held_by(source);
        if let (Some(per), Some(_)) = (&shared.per_source, source)
            && mine >= per.max
        {
            return Decision::Shed(Cap::PerSource);
        }
        if places.held < shared.max {
            return Decision::Enter;
        }
        if shared.evicted.is_none() || places.retiring >= retiring_budget(shared.max) {
            return Decision::Shed(Cap::Global);
        }
        match places.fullest() {
            Some((from, held)) if held > mine + 1 => Decision::TakeFrom(from),
            _ => Decision::Shed(Cap::Global),
        }
    }

    /// A slot for one more connection from `source`, or `None` (and one more shed) at either
    /// cap. At the cap, when the gate makes room, the oldest connection of the address holding
    /// the most is told to close, and the newcomer takes its place.
    pub fn enter(&self, source: Option<IpAddr>) -> Option<Slot> {
        let source = source.map(|ip| ip.to_canonical());
        let shared = &*self.shared;
        let mut places = shared.places.lock().unwrap_or_else(|p| p.into_inner());
        let mut evicted_from = None;
        match self.decide(&places, source) {
            Decision::Enter => {}
            Decision::TakeFrom(from) => {
                if let Some(list) = places.by_source.get_mut(&from)
                    && let Some((_, tell)) = list.pop_first()
                {
                    if list.is_empty() {
                        places.by_source.remove(&from);
                    }
                    places.held -= 1;
                    places.retiring += 1;
                    // Its connection may have ended meanwhile; then the place is free anyway.
                    let _ = tell.send(());
                    evicted_from = Some(from);
                }
            }
            Decision::Shed(cap) => {
                drop(places);
                self.count_shed(cap, source);
                return None;
            }
        }
        let (tell, told) = oneshot::channel();
        let id = places.next;
        places.next += 1;
        places.by_source.entry(source).or_default().insert(id, tell);
        places.held += 1;
        shared.open.set(open_now(&places));
        drop(places);
        if let Some(from) = evicted_from {
            self.count_evicted(from);
        }
        Some(Slot {
            shared: self.shared.clone(),
            source,
            id,
            told: Some(told),
        })
    }

    /// Whether [`ConnectionGate::enter`] would give `source` a slot now, checked before its
    /// TLS handshake so that a connection sure to be shed costs no TLS work; `false` counts
    /// one more shed, as `enter` would. Nothing is held: the slot is taken after the
    /// handshake, and may be refused then.
    pub fn admits(&self, source: Option<IpAddr>) -> bool {
        let source = source.map(|ip| ip.to_canonical());
        let places = self.shared.places.lock().unwrap_or_else(|p| p.into_inner());
        match self.decide(&places, source) {
            Decision::Enter | Decision::TakeFrom(_) => true,
            Decision::Shed(cap) => {
                drop(places);
                self.count_shed(cap, source);
                false
            }
        }
    }

    /// Counts (and maybe logs) one connection shed at `cap`.
    fn count_shed(&self, cap: Cap, source: Source) {
        let shared = &*self.shared;
        let (cap, metric) = match (cap, &shared.per_source) {
            (Cap::PerSource, Some(per)) => {
                per.shed.inc();
                (
                    "its source address's cap (--max-connections-per-source)",
                    "miggate_connections_shed_per_source_total",
                )
            }
            _ => {
                shared.shed.inc();
                ("the cap (--max-connections)", "miggate_connections_shed_total")
            }
        };
        if let Some(shed) = shared.shed_log.record(Instant::now()) {
            let source = source.map_or_else(|| "unknown".to_string(), |ip| ip.to_string());
            tracing::warn!(%source, shed, "admission connection closed at {cap} ({shed} since the last such line; {metric} counts them all)");
        }
    }

    /// Counts (and maybe logs) one connection of `from` told to close to make room.
    fn count_evicted(&self, from: Source) {
        let shared = &*self.shared;
        if let Some(evicted) = &shared.evicted {
            evicted.inc();
        }
        if let Some(evicted) = shared.evicted_log.record(Instant::now()) {
            let source = from.map_or_else(|| "unknown".to_string(), |ip| ip.to_string());
            tracing::warn!(%source, evicted, "admission connection closed at its next idle moment to make room at the cap (--max-connections) for an address holding fewer ({evicted} since the last such line; miggate_connections_evicted_total counts them all)");
        }
    }

    /// Source addresses holding a place now.
    pub fn sources(&self) -> usize {
        self.shared
            .places
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .by_source
            .len()
    }
}

fn open_now(places: &Places) -> i64 {
    i64::try_from(places.held + places.retiring).unwrap_or(i64::MAX)
}

/// One open connection's place under the caps, given back when the connection is dropped.
#[derive(Debug)]
pub struct Slot {
    shared: Arc<Shared>,
    source: Source,
    id: u64,
    told: Option<oneshot::Receiver<()>>,
}

impl Slot {
    /// What resolves when the gate gives this connection's place to a newcomer: the
    /// connection is to close at its next idle moment. Taken once; `None` after.
    pub fn retirement(&mut self) -> Option<Retirement> {
        self.told.take().map(|told| Retirement { told })
    }

    /// Whether the gate has given this connection's place to a newcomer (while
    /// [`Slot::retirement`] has not been taken).
    pub fn is_retired(&mut self) -> bool {
        self.told.as_mut().is_some_and(|told| told.try_recv().is_ok())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut places = self.shared.places.lock().unwrap_or_else(|p| p.into_inner());
        places.give_back(self.source, self.id);
        self.shared.open.set(open_now(&places));
    }
}

/// Resolves when a connection's place went to a newcomer ([`Slot::retirement`]).
#[derive(Debug)]
pub struct Retirement {
    told: oneshot::Receiver<()>,
}

impl Retirement {
    /// Waits until the place is given to a newcomer; never resolves otherwise.
    pub async fn told(self) {
        if self.told.await.is_err() {
            // The gate let go of the sender without telling: the place is not taken.
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    use rstest::rstest;

    const A: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1)));
    const B: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2)));
    const C: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 3)));
    /// The API server's address in the tables.
    const K: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 96, 0, 1)));

    fn open(gate: &ConnectionGate) -> i64 {
        gate.shared.open.get()
    }

    fn shed(gate: &ConnectionGate) -> u64 {
        gate.shared.shed.get()
    }

    #[test]
    fn the_gate_sheds_the_newest_at_the_cap_and_reopens_when_one_closes() {
        let gate = ConnectionGate::new(2, Gauge::default(), Counter::default());
        let a = gate.enter(A).unwrap();
        let _b = gate.enter(A).unwrap();
        assert!(gate.enter(B).is_none());
        assert!(gate.enter(None).is_none());
        assert_eq!((open(&gate), shed(&gate)), (2, 2));
        drop(a);
        assert_eq!(open(&gate), 1);
        assert!(gate.enter(A).is_some());
        assert_eq!(shed(&gate), 2);
    }

    /// `(source, admitted)` in order, against a global cap of 4 and 2 per source.
    #[rstest]
    #[case::one_source_holds_its_share(&[(A, true), (A, true), (A, false), (B, true)], (1, 0))]
    #[case::two_sources_fill_the_global_cap(&[(A, true), (A, true), (B, true), (B, true), (None, false)], (0, 1))]
    #[case::at_both_caps_the_source_s_is_counted(&[(A, true), (A, true), (B, true), (B, true), (A, false)], (1, 0))]
    #[case::unknown_sources_count_globally_only(&[(None, true), (None, true), (None, true), (A, true), (A, false)], (0, 1))]
    fn each_source_has_a_share_of_the_global_cap(
        #[case] arrivals: &[(Option<IpAddr>, bool)],
        #[case] shed: (u64, u64),
    ) {
        let per_source_shed = Counter::default();
        let gate = ConnectionGate::new(4, Gauge::default(), Counter::default())
            .per_source(2, per_source_shed.clone());
        let mut held = Vec::new();
        for (i, (source, admitted)) in arrivals.iter().enumerate() {
            let slot = gate.enter(*source);
            assert_eq!(slot.is_some(), *admitted, "arrival {i} from {source:?}");
            held.extend(slot);
        }
        assert_eq!((per_source_shed.get(), gate.shared.shed.get()), shed);
        drop(held);
        assert_eq!((open(&gate), gate.sources()), (0, 0), "entries removed at zero");
    }

    /// Slots held (by source) before a newcomer from `source` is checked, against a global cap
    /// of 3 and 2 per source: whether it is let on to its handshake, and what is counted shed
    /// `(per source, global)`.
    #[rstest]
    #[case::room(&[A], A, true, (0, 0))]
    #[case::its_source_at_its_cap(&[A, A], A, false, (1, 0))]
    #[case::another_source_at_its_cap(&[A, A], B, true, (0, 0))]
    #[case::the_global_cap(&[A, A, B], B, false, (0, 1))]
    #[case::unknown_source_at_the_global_cap(&[A, B, B], None, false, (0, 1))]
    #[case::unknown_source_with_room(&[A, A], None, true, (0, 0))]
    fn the_check_before_a_handshake_says_what_enter_would(
        #[case] held: &[Option<IpAddr>],
        #[case] source: Option<IpAddr>,
        #[case] admitted: bool,
        #[case] shed: (u64, u64),
    ) {
        let per_source_shed = Counter::default();
        let gate = ConnectionGate::new(3, Gauge::default(), Counter::default())
            .per_source(2, per_source_shed.clone());
        let _held: Vec<Slot> = held.iter().map(|s| gate.enter(*s).unwrap()).collect();
        assert_eq!(gate.admits(source), admitted);
        assert_eq!((per_source_shed.get(), gate.shared.shed.get()), shed);
        let entered = gate.enter(source);
        assert_eq!(entered.is_some(), admitted, "enter agrees");
        assert_eq!(
            open(&gate),
            i64::try_from(held.len()).unwrap() + i64::from(admitted)
        );
    }

    #[test]
    fn an_ipv4_client_of_a_dual_stack_listener_is_one_source() {
        let gate =
            ConnectionGate::new(8, Gauge::default(), Counter::default()).per_source(1, Counter::default());
        let mapped = "::ffff:10.0.0.1".parse::<IpAddr>().ok();
        let _a = gate.enter(A).unwrap();
        assert!(gate.enter(mapped).is_none());
        assert_eq!(gate.sources(), 1);
    }

    /// Arrivals in order against a cap of `max` (16 per source) with room made at the cap,
    /// each connection told to close closing at once: which arrivals were refused, and which
    /// were told to close, by index.
    #[rstest]
    #[case::under_the_cap_nobody_gives_way(4, &[A, A, K], &[], &[])]
    #[case::a_newcomer_with_none_takes_from_the_fullest(4, &[A, A, A, B, K], &[], &[0])]
    #[case::the_fullest_s_oldest_gives_way(4, &[B, A, A, A, K], &[], &[1])]
    #[case::equals_do_not_trade(4, &[A, A, B, B, A, B], &[4, 5], &[])]
    #[case::one_more_than_the_newcomer_is_not_enough(3, &[A, A, K, K], &[3], &[])]
    #[case::it_takes_until_it_holds_a_share(
        4,
        &[A, A, A, A, K, K, K],
        &[6],
        &[0, 1]
    )]
    #[case::a_client_cannot_take_its_places_back(4, &[A, A, A, A, K, A, A], &[5, 6], &[0])]
    #[case::one_place_each_leaves_nothing_to_take(3, &[A, B, C, K], &[3], &[])]
    #[case::an_unknown_source_takes_like_any(2, &[A, A, None], &[], &[0])]
    fn at_the_cap_an_address_holding_fewer_takes_a_place(
        #[case] max: usize,
        #[case] arrivals: &[Option<IpAddr>],
        #[case] refused: &[usize],
        #[case] retired: &[usize],
    ) {
        let evicted = Counter::default();
        let gate = ConnectionGate::new(max, Gauge::default(), Counter::default())
            .per_source(16, Counter::default())
            .making_room(evicted.clone());
        let mut slots: Vec<Option<Slot>> = Vec::new();
        let (mut got_refused, mut got_retired) = (Vec::new(), Vec::new());
        for (i, source) in arrivals.iter().enumerate() {
            let slot = gate.enter(*source);
            if slot.is_none() {
                got_refused.push(i);
            }
            slots.push(slot);
            for (j, held) in slots.iter_mut().enumerate() {
                if held.as_mut().is_some_and(Slot::is_retired) {
                    got_retired.push(j);
                    *held = None;
                }
            }
        }
        assert_eq!(
            (got_refused.as_slice(), got_retired.as_slice()),
            (refused, retired)
        );
        assert_eq!(evicted.get(), retired.len() as u64);
        let open_now = arrivals.len() - refused.len() - retired.len();
        assert_eq!(open(&gate), i64::try_from(open_now).unwrap());
        drop(slots);
        assert_eq!((open(&gate), gate.sources()), (0, 0));
        assert_eq!(gate.shared.places.lock().unwrap().retiring, 0);
    }

    #[test]
    fn connections_still_closing_are_bounded_and_then_newcomers_are_shed() {
        // A cap of 8: one connection may be closing at a time.
        let gate =
            ConnectionGate::new(8, Gauge::default(), Counter::default()).making_room(Counter::default());
        let held: Vec<Slot> = (0..8).map(|_| gate.enter(A).unwrap()).collect();
        let first = gate.enter(B);
        assert!(first.is_some(), "room made");
        assert_eq!(open(&gate), 9, "the one told to close is still open");
        assert!(!gate.admits(K), "the one allowed to be closing is");
        assert!(gate.enter(K).is_none());
        drop(held);
        assert!(gate.enter(K).is_some(), "room again once it closed");
    }

    #[tokio::test]
    async fn a_connection_told_to_close_hears_it() {
        let gate =
            ConnectionGate::new(2, Gauge::default(), Counter::default()).making_room(Counter::default());
        let mut first = gate.enter(A).unwrap();
        let _second = gate.enter(A).unwrap();
        let retirement = first.retirement().unwrap();
        let _third = gate.enter(K).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(10), retirement.told())
            .await
            .unwrap();
        assert_eq!(open(&gate), 3);
        drop(first);
        assert_eq!(open(&gate), 2);
    }
}

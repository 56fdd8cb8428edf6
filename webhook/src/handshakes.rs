//! The places of admission connections still in their TLS handshake, kept apart from the
//! established connections' ([`crate::connections::ConnectionGate`]), so that connections which
//! never finish a handshake cannot keep out one that does.
//!
//! A connection takes a place when it is accepted and gives it back when its handshake ends,
//! however it ends. A full pool never turns a newcomer away: the source address holding the
//! most places gives up its oldest (the newcomer's own address, when that is the one), and the
//! newcomer takes the place. What that guarantees:
//!
//! - **One address flooding drops only its own.** While it holds more places than any other
//!   address, every place made for a newcomer is one of its own.
//! - **Few handshakes are safe.** An address holding `k` places gives one up only when no
//!   address holds more, so only when at least `max / k` addresses share the pool. The API
//!   server holds one or a few at a time: to drop one, a client needs as many addresses as the
//!   pool has places (512 by default), each keeping a handshake open.
//! - **Even then, only a slow handshake is dropped.** Among the addresses holding the most, the
//!   oldest handshake goes first, so one is dropped only after a pool's worth of newer
//!   connections arrived while it was in progress. A handshake with the API server takes
//!   milliseconds; a flood must open hundreds of connections in those milliseconds, faster than
//!   one accept loop takes them.
//! - **Memory is bounded by the pool.** A place holds a socket, a task and rustls' state
//!   before the handshake completes, with at most 64 KiB of a handshake message buffered
//!   (rustls refuses a longer one): about 80 KiB at worst (measured: 512 connections each
//!   holding a 64 KiB partial ClientHello took a debug build from 46 MiB to 88 MiB RSS).
//!
//! A fixed cap per address is not used: it would turn away the API server's own burst (one
//! connection per call in flight, all opened at once after an idle spell) with no flood at
//! all, where the rule above lets a lone address use the whole pool and shares it only under
//! pressure.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::oneshot;

use crate::log_gate::{FAILURE_LOG_EVERY, LogGate};
use crate::metrics::ReasonLabel;

/// The default number of connections that may be in their TLS handshake at once, per replica.
///
/// Large, so that a flood must arrive from this many addresses before the API server's one
/// handshake can be the one to give way, and must open this many connections within that
/// handshake's milliseconds to make it give way; within the Deployment's 256 MiB beside the
/// established connections (about 80 KiB each at worst, 42 MiB in all).
pub const DEFAULT_MAX_HANDSHAKES: usize = miggate_wire::webhook::MAX_HANDSHAKES;

/// Why a handshake gave its place up (the `reason` of
/// `miggate_connections_handshakes_dropped_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The newcomer's own address held the most places: one address flooding, harming only
    /// itself.
    OwnSource,
    /// Another address held the most places.
    OtherSource,
}

impl Dropped {
    /// The metric's label.
    pub fn as_str(self) -> &'static str {
        match self {
            Dropped::OwnSource => "own-source",
            Dropped::OtherSource => "other-source",
        }
    }
}

/// A source address as the pool counts it: IPv4 clients of a dual-stack listener arrive as
/// `::ffff:a.b.c.d` and count as `a.b.c.d`; a connection whose address could not be read
/// counts under `None`, as one more address.
type Source = Option<IpAddr>;

/// The pool of places for connections in their TLS handshake; clones share it.
#[derive(Debug, Clone)]
pub struct HandshakePool {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    max: usize,
    state: Mutex<State>,
    /// Places held now.
    pending: Gauge,
    /// Places given up to make room, by [`Dropped`].
    dropped: Family<ReasonLabel, Counter>,
    log: LogGate,
}

/// The places held, by address, each address's oldest first.
#[derive(Debug, Default)]
struct State {
    /// Each place's number (its age: lower is older) and the sender that tells its
    /// connection it was dropped. An address has an entry only while it holds a place.
    by_source: HashMap<Source, BTreeMap<u64, oneshot::Sender<()>>>,
    held: usize,
    next: u64,
}

impl State {
    /// Frees the place that gives way to a newcomer: the oldest of the address holding the
    /// most. Linear in the addresses holding places, at most the pool's size.
    fn make_room(&mut self) -> Option<(Source, oneshot::Sender<()>)> {
        let (_, _, source) = self
            .by_source
            .iter()
            .filter_map(|(source, places)| {
                let (oldest, _) = places.first_key_value()?;
                Some((places.len(), Reverse(*oldest), *source))
            })
            .max()?;
        let places = self.by_source.get_mut(&source)?;
        let (_, tell) = places.pop_first()?;
        if places.is_empty() {
            self.by_source.remove(&source);
        }
        self.held -= 1;
        Some((source, tell))
    }

    fn give_back(&mut self, source: Source, id: u64) {
        if let Some(places) = self.by_source.get_mut(&source)
            && places.remove(&id).is_some()
        {
            self.held -= 1;
            if places.is_empty() {
                self.by_source.remove(&source);
            }
        }
    }
}

impl HandshakePool {
    /// A pool of `max` places (at least one), its places held counted in `pending` and those
    /// given up in `dropped`.
    pub fn new(max: usize, pending: Gauge, dropped: Family<ReasonLabel, Counter>) -> Self {
        HandshakePool {
            shared: Arc::new(Shared {
                max: max.max(1),
                state: Mutex::default(),
                pending,
                dropped,
                log: LogGate::new(FAILURE_LOG_EVERY),
            }),
        }
    }

    /// A place for a connection from `source`, freeing one first when the pool is full (its
    /// connection told through [`Handshaking::dropped`]). Never refuses.
    pub fn enter(&self, source: Option<IpAddr>) -> Handshaking {
        let source = source.map(|ip| ip.to_canonical());
        let (tell, told) = oneshot::channel();
        let shared = &self.shared;
        let (id, freed) = {
            let mut state = shared.state.lock().unwrap_or_else(|p| p.into_inner());
            let freed = if state.held >= shared.max {
                state.make_room()
            } else {
                None
            };
            let id = state.next;
            state.next += 1;
            state.by_source.entry(source).or_default().insert(id, tell);
            state.held += 1;
            shared.pending.set(i64::try_from(state.held).unwrap_or(i64::MAX));
            (id, freed)
        };
        if let Some((from, tell)) = freed {
            // The connection's task may have finished meanwhile; then there is no one to tell.
            let _ = tell.send(());
            let reason = if from == source {
                Dropped::OwnSource
            } else {
                Dropped::OtherSource
            };
            shared
                .dropped
                .get_or_create(&ReasonLabel {
                    reason: reason.as_str(),
                })
                .inc();
            if let Some(dropped) = shared.log.record(Instant::now()) {
                let from = from.map_or_else(|| "unknown".to_string(), |ip| ip.to_string());
                tracing::warn!(
                    source = %from,
                    reason = reason.as_str(),
                    max_handshakes = shared.max,
                    dropped,
                    "admission TLS handshake dropped to make room: every handshake place was taken ({dropped} since the last such line; miggate_connections_handshakes_dropped_total counts them all)"
                );
            }
        }
        Handshaking {
            shared: shared.clone(),
            source,
            id,
            told,
        }
    }

    /// Places held now.
    pub fn held(&self) -> usize {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner()).held
    }

    /// Addresses holding a place now.
    pub fn sources(&self) -> usize {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .by_source
            .len()
    }
}

/// One connection's place in the handshake pool, given back when dropped.
#[derive(Debug)]
pub struct Handshaking {
    shared: Arc<Shared>,
    source: Source,
    id: u64,
    told: oneshot::Receiver<()>,
}

impl Handshaking {
    /// Resolves once the pool has given this place to a newcomer: the handshake is to stop.
    pub async fn dropped(&mut self) {
        // The sender goes only with the place: either it was given up (and told) or this
        // guard gave it back, after which nothing polls this.
        let _ = (&mut self.told).await;
    }

    /// Whether the pool has given this place to a newcomer.
    pub fn is_dropped(&mut self) -> bool {
        self.told.try_recv().is_ok()
    }
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        state.give_back(self.source, self.id);
        self.shared
            .pending
            .set(i64::try_from(state.held).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    use rstest::rstest;
    use std::net::Ipv4Addr;

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, last)))
    }

    fn pool(max: usize) -> (HandshakePool, Family<ReasonLabel, Counter>) {
        let dropped = Family::default();
        (
            HandshakePool::new(max, Gauge::default(), dropped.clone()),
            dropped,
        )
    }

    fn count(dropped: &Family<ReasonLabel, Counter>, reason: Dropped) -> u64 {
        dropped
            .get_or_create(&ReasonLabel {
                reason: reason.as_str(),
            })
            .get()
    }

    /// Arrivals in order (`0` is the API server's address, others a flood's) into a pool of
    /// `max`, and which arrivals' places were given up, by their index.
    #[rstest]
    #[case::under_the_cap_nothing_is_dropped(3, &[1, 1, 0], &[])]
    #[case::one_address_flooding_drops_its_own_oldest(3, &[0, 1, 1, 1, 1], &[1, 2])]
    #[case::the_address_holding_most_gives_way_not_the_newcomer_s(4, &[1, 1, 1, 0, 2], &[0])]
    #[case::a_lone_handshake_outlives_a_flood_from_fewer_addresses_than_places(
        6,
        &[0, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3],
        &[1, 2, 3, 4, 5, 6, 7]
    )]
    #[case::ties_drop_the_oldest(3, &[1, 2, 3, 4, 5], &[0, 1])]
    #[case::as_many_addresses_as_places_drop_even_a_lone_handshake_once_it_is_oldest(
        3,
        &[1, 0, 2, 3, 4, 5],
        &[0, 1, 2]
    )]
    #[case::a_pool_of_one_turns_over(1, &[0, 1, 2], &[0, 1])]
    fn a_full_pool_makes_room_from_the_address_holding_most(
        #[case] max: usize,
        #[case] arrivals: &[u8],
        #[case] dropped_at: &[usize],
    ) {
        let (pool, _) = pool(max);
        let mut held: Vec<Handshaking> = arrivals.iter().map(|&a| pool.enter(ip(a))).collect();
        let dropped: Vec<usize> = held
            .iter_mut()
            .enumerate()
            .filter_map(|(i, h)| h.is_dropped().then_some(i))
            .collect();
        assert_eq!(dropped, dropped_at);
        assert_eq!(pool.held(), max.min(arrivals.len()));
        drop(held);
        assert_eq!((pool.held(), pool.sources()), (0, 0), "every place given back");
    }

    #[rstest]
    #[case::own(&[1, 1, 1], Dropped::OwnSource)]
    #[case::other(&[1, 1, 2], Dropped::OtherSource)]
    fn a_drop_is_counted_by_whose_place_it_was(#[case] arrivals: &[u8], #[case] reason: Dropped) {
        let (pool, dropped) = pool(2);
        let _held: Vec<Handshaking> = arrivals.iter().map(|&a| pool.enter(ip(a))).collect();
        assert_eq!(count(&dropped, reason), 1);
        let other = match reason {
            Dropped::OwnSource => Dropped::OtherSource,
            Dropped::OtherSource => Dropped::OwnSource,
        };
        assert_eq!(count(&dropped, other), 0);
    }

    #[test]
    fn a_place_given_back_makes_room_without_a_drop() {
        let (pool, dropped) = pool(2);
        let a = pool.enter(ip(1));
        let _b = pool.enter(ip(1));
        drop(a);
        let mut c = pool.enter(ip(2));
        assert!(!c.is_dropped());
        assert_eq!(pool.held(), 2);
        assert_eq!(
            count(&dropped, Dropped::OwnSource) + count(&dropped, Dropped::OtherSource),
            0
        );
    }

    #[test]
    fn an_ipv4_client_of_a_dual_stack_listener_is_one_address() {
        let (pool, _) = pool(8);
        let _a = pool.enter(ip(1));
        let _b = pool.enter("::ffff:10.0.0.1".parse().ok());
        let _unknown = pool.enter(None);
        assert_eq!(pool.sources(), 2);
    }

    #[tokio::test]
    async fn a_dropped_place_wakes_its_connection() {
        let (pool, _) = pool(1);
        let mut first = pool.enter(ip(1));
        let waiting = tokio::spawn(async move {
            first.dropped().await;
            first
        });
        let _second = pool.enter(ip(2));
        let first = tokio::time::timeout(std::time::Duration::from_secs(10), waiting)
            .await
            .unwrap()
            .unwrap();
        drop(first);
        assert_eq!(pool.held(), 1, "a dropped place is not given back twice");
    }
}

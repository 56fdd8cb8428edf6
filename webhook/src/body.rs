//! Reading a review body under the request's deadline, a minimum rate and a memory budget.
//!
//! The admission port is reachable from every pod of the cluster, so a client may declare a
//! megabyte body and send one byte of it. Without a bound the read waits forever and each such
//! connection holds its buffers. Here the read ends at the request's deadline (started when
//! the request head arrived), ends sooner when the body falls below a minimum average rate
//! after a short grace, and every body byte held in memory is taken from one budget shared by
//! all requests, so the sum of buffered bodies stays bounded whatever the connections send.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use futures::{FutureExt as _, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The largest review body accepted: Kubernetes writes up to 3 MiB objects and an UPDATE
/// review carries two of them.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// The default minimum average body rate, in bytes per second, once [`RATE_GRACE`] has passed.
/// The API server writes a review in one go, so only a stalled or trickling client is this
/// slow.
pub const DEFAULT_MIN_BODY_RATE: u64 = miggate_wire::webhook::MIN_BODY_RATE;
/// Bodies up to this size are not drawn from the budget: a review is a few KiB, so a client
/// holding the budget with large bodies cannot make ordinary reviews wait. Their sum is bounded
/// by the connection cap instead ([`crate::connections`]).
pub const SMALL_BODY_BYTES: usize = 64 * 1024;
/// The most of a declared length that is allocated before the bytes arrive.
pub const PREALLOCATED_BYTES: usize = 16 * 1024;
/// How long a body may take before the minimum rate applies.
pub const RATE_GRACE: Duration = Duration::from_secs(1);
/// The default memory budget for the parts of request bodies beyond [`SMALL_BODY_BYTES`],
/// over all connections: four bodies of the largest size.
pub const DEFAULT_BODY_BUDGET_BYTES: usize = 4 * MAX_BODY_BYTES;

/// How a body is read.
#[derive(Debug, Clone)]
pub struct BodyLimits {
    /// The largest body accepted.
    pub max_bytes: usize,
    /// The minimum average rate since the request head, in bytes per second, after
    /// [`RATE_GRACE`]; 0 turns it off (the deadline still holds).
    pub min_rate: u64,
    /// Bytes of bodies that may be held in memory at once, over all requests.
    pub budget: Arc<Semaphore>,
    /// The budget's size, for messages.
    pub budget_bytes: usize,
}

impl BodyLimits {
    /// How far a body over the limit is still read, and thrown away, so that a client still
    /// sending can read the 413 instead of a reset: twice the limit.
    fn drain_limit(&self) -> usize {
        self.max_bytes.saturating_mul(2)
    }

    /// The refusal of a body over the limit.
    fn too_large(&self) -> BodyError {
        BodyError::TooLarge {
            limit: self.max_bytes,
        }
    }

    /// Limits with a budget of `budget_bytes` (at least one largest body).
    pub fn new(min_rate: u64, budget_bytes: usize) -> Self {
        let budget_bytes = budget_bytes.clamp(MAX_BODY_BYTES, Semaphore::MAX_PERMITS);
        BodyLimits {
            max_bytes: MAX_BODY_BYTES,
            min_rate,
            budget: Arc::new(Semaphore::new(budget_bytes)),
            budget_bytes,
        }
    }
}

impl Default for BodyLimits {
    fn default() -> Self {
        BodyLimits::new(DEFAULT_MIN_BODY_RATE, DEFAULT_BODY_BUDGET_BYTES)
    }
}

/// Why a body was not read whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// Declared or sent beyond the limit.
    #[error("AdmissionReview body over the {limit}-byte limit")]
    TooLarge {
        /// The most bytes a body may have ([`BodyLimits::max_bytes`]).
        limit: usize,
    },
    /// Not complete by the request's deadline.
    #[error("AdmissionReview body not complete within the {} ms request deadline ({received} bytes received)", deadline.as_millis())]
    Deadline {
        /// The request's whole deadline, counted from the arrival of its head.
        deadline: Duration,
        /// Bytes received by then.
        received: usize,
    },
    /// Below the minimum rate after the grace.
    #[error("AdmissionReview body arriving slower than {rate} bytes/s ({received} bytes in {} ms)", elapsed.as_millis())]
    TooSlow {
        /// The average rate the body fell below, in bytes per second ([`BodyLimits::min_rate`]).
        rate: u64,
        /// Bytes received.
        received: usize,
        /// Since the request head.
        elapsed: Duration,
    },
    /// The shared budget for bodies in memory is spent by other requests.
    #[error("the webhook is holding {budget} bytes of request bodies already; retry shortly")]
    Busy {
        /// The shared budget's size in bytes ([`BodyLimits::budget_bytes`]).
        budget: usize,
    },
    /// The connection failed mid-body.
    #[error("cannot read AdmissionReview body: {0}")]
    Read(String),
}

/// A body read whole, with its share of the budget, returned when this is dropped.
#[derive(Debug)]
pub struct ReadBody {
    /// The whole body, at most [`BodyLimits::max_bytes`].
    pub bytes: Bytes,
    /// The budget held for them.
    pub reservation: Option<OwnedSemaphorePermit>,
}

/// Reads `body` whole: at most `limits.max_bytes`, finished by `deadline` (the request head
/// arrived at `started`), at least `limits.min_rate` on average after [`RATE_GRACE`], each
/// byte past [`SMALL_BODY_BYTES`] taken from the budget before it is kept. `declared` is the
/// `Content-Length`, if any. A body over the limit is read to its end and thrown away (so the
/// client can read the refusal), unless it is over twice the limit, declared or sent.
pub async fn read_body<B>(
    body: B,
    declared: Option<u64>,
    limits: &BodyLimits,
    started: Instant,
    deadline: Duration,
) -> Result<ReadBody, BodyError>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<axum::BoxError>,
{
    let mut reservation = Reservation::default();
    let mut discarding = discards(declared, limits)?;
    let end = started + deadline;
    // Any body, read in place: the connection's own (hyper's) is not boxed first.
    let mut stream = std::pin::pin!(http_body_util::BodyDataStream::new(body));
    // The declared length sizes the buffer up to [`PREALLOCATED_BYTES`], enough for a review
    // in one allocation; a larger body grows it as its bytes arrive. Declaring costs a client
    // nothing, so it must not cost the webhook more than a small buffer: an allocator may
    // commit what it hands out (mimalloc does), and thousands of connections may each declare
    // megabytes and send a byte.
    let capacity = declared.map_or(0, |d| {
        usize::try_from(d).unwrap_or(usize::MAX).min(PREALLOCATED_BYTES)
    });
    let mut whole = Whole::default();
    let mut received: usize = 0;
    loop {
        // What has arrived is taken without a timer: a small body usually comes with its
        // head, and a timer armed and cancelled per chunk costs more than the chunk.
        let next = match stream.next().now_or_never() {
            Some(item) => Ok(item),
            None => {
                let wake = next_check(started, received, limits.min_rate).min(end);
                tokio::time::timeout_at(wake, stream.next()).await
            }
        };
        match next {
            Ok(None) => break,
            Ok(Some(Ok(chunk))) => {
                received = received.saturating_add(chunk.len());
                if received > limits.drain_limit() {
                    return Err(limits.too_large());
                }
                if received > limits.max_bytes && !discarding {
                    discarding = true;
                    whole = Whole::default();
                    reservation = Reservation::default();
                }
                if !discarding {
                    reservation.grow(received.saturating_sub(SMALL_BODY_BYTES), limits)?;
                    whole.push(chunk, capacity);
                }
            }
            Ok(Some(Err(e))) => return Err(BodyError::Read(e.into().to_string())),
            Err(_) if discarding => return Err(limits.too_large()),
            Err(_) if Instant::now() >= end => {
                return Err(BodyError::Deadline { deadline, received });
            }
            Err(_) => {
                return Err(BodyError::TooSlow {
                    rate: limits.min_rate,
                    received,
                    elapsed: started.elapsed(),
                });
            }
        }
    }
    if discarding {
        return Err(limits.too_large());
    }
    Ok(ReadBody {
        bytes: whole.into_bytes(),
        reservation: reservation.permit,
    })
}

/// A body's chunks joined. A body that came in one chunk, as a review with its head usually
/// does, is kept as that chunk (no copy); a second chunk starts a buffer of `capacity`.
#[derive(Default)]
enum Whole {
    #[default]
    Empty,
    One(Bytes),
    Joined(Vec<u8>),
}

impl Whole {
    fn push(&mut self, chunk: Bytes, capacity: usize) {
        *self = match std::mem::take(self) {
            Whole::Empty => Whole::One(chunk),
            Whole::One(first) => {
                let mut buf = Vec::with_capacity(capacity.max(first.len() + chunk.len()));
                buf.extend_from_slice(&first);
                buf.extend_from_slice(&chunk);
                Whole::Joined(buf)
            }
            Whole::Joined(mut buf) => {
                buf.extend_from_slice(&chunk);
                Whole::Joined(buf)
            }
        };
    }

    fn into_bytes(self) -> Bytes {
        match self {
            Whole::Empty => Bytes::new(),
            Whole::One(chunk) => chunk,
            Whole::Joined(buf) => Bytes::from(buf),
        }
    }
}

/// Whether a body of the `declared` length is read and thrown away (over the limit), or the
/// error when it is refused before any of it is read (declared past
/// [`BodyLimits::drain_limit`]). A declared length reserves nothing: declaring costs a client
/// nothing, sending does.
fn discards(declared: Option<u64>, limits: &BodyLimits) -> Result<bool, BodyError> {
    let Some(len) = declared else {
        return Ok(false);
    };
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    if len > limits.drain_limit() {
        return Err(limits.too_large());
    }
    Ok(len > limits.max_bytes)
}

/// The bytes of the shared body budget one body holds, grown as its bytes arrive.
#[derive(Default)]
struct Reservation {
    permit: Option<OwnedSemaphorePermit>,
    reserved: usize,
}

impl Reservation {
    /// Holds `upto` bytes of the budget; `Busy` when the budget has not that many left.
    fn grow(&mut self, upto: usize, limits: &BodyLimits) -> Result<(), BodyError> {
        if upto <= self.reserved {
            return Ok(());
        }
        let more = u32::try_from(upto - self.reserved).map_err(|_| limits.too_large())?;
        let permit = limits
            .budget
            .clone()
            .try_acquire_many_owned(more)
            .map_err(|_| BodyError::Busy {
                budget: limits.budget_bytes,
            })?;
        match &mut self.permit {
            Some(held) => held.merge(permit),
            None => self.permit = Some(permit),
        }
        self.reserved = upto;
        Ok(())
    }
}

/// When `received` bytes stop meeting `rate` (never before the grace): `received / rate`
/// seconds after the head. With no rate, never.
fn next_check(started: Instant, received: usize, rate: u64) -> Instant {
    if rate == 0 {
        return started + Duration::from_secs(24 * 3600);
    }
    let covered = Duration::from_secs_f64(received as f64 / rate as f64);
    started + covered.max(RATE_GRACE)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn stalled() -> Body {
        Body::from_stream(futures::stream::pending::<Result<Bytes, std::io::Error>>())
    }

    fn trickle(chunks: usize, every: Duration) -> Body {
        Body::from_stream(futures::stream::unfold(0usize, move |n| async move {
            if n == chunks {
                return None;
            }
            tokio::time::sleep(every).await;
            Some((Ok::<_, std::io::Error>(Bytes::from_static(b"x")), n + 1))
        }))
    }

    /// A body comes whole and byte for byte however it is cut: in one chunk (kept as it is),
    /// in two, or in many, with or without a declared length.
    #[rstest::rstest]
    #[case::one_chunk(&[2800], true)]
    #[case::one_chunk_undeclared(&[2800], false)]
    #[case::two_chunks(&[1000, 1800], true)]
    #[case::many_chunks(&[1, 999, 0, 700, 1100], true)]
    #[case::many_undeclared(&[1, 999, 0, 700, 1100], false)]
    #[case::empty(&[], true)]
    #[tokio::test]
    async fn a_body_is_read_whole_however_it_is_cut(#[case] cuts: &[usize], #[case] declare: bool) {
        let total: usize = cuts.iter().sum();
        let text: Vec<u8> = (0..total).map(|i| b'a' + (i % 26) as u8).collect();
        let mut at = 0;
        let chunks: Vec<Result<Bytes, std::io::Error>> = cuts
            .iter()
            .map(|n| {
                let chunk = Bytes::copy_from_slice(&text[at..at + n]);
                at += n;
                Ok(chunk)
            })
            .collect();
        let body = Body::from_stream(futures::stream::iter(chunks));
        let read = read_body(
            body,
            declare.then_some(total as u64),
            &BodyLimits::default(),
            Instant::now(),
            Duration::from_secs(4),
        )
        .await
        .unwrap();
        assert_eq!(read.bytes.as_ref(), text.as_slice());
    }

    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_is_too_slow_after_the_grace() {
        let started = Instant::now();
        let e = read_body(
            stalled(),
            Some(1_000_000),
            &BodyLimits::default(),
            started,
            Duration::from_secs(4),
        )
        .await
        .unwrap_err();
        assert!(matches!(e, BodyError::TooSlow { received: 0, .. }), "{e}");
        assert_eq!(started.elapsed(), RATE_GRACE);
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_rate_a_stalled_body_ends_at_the_deadline() {
        let started = Instant::now();
        let limits = BodyLimits::new(0, DEFAULT_BODY_BUDGET_BYTES);
        let e = read_body(
            trickle(1_000, Duration::from_millis(150)),
            None,
            &limits,
            started,
            Duration::from_secs(4),
        )
        .await
        .unwrap_err();
        assert_eq!(
            e,
            BodyError::Deadline {
                deadline: Duration::from_secs(4),
                received: 26
            }
        );
        assert_eq!(started.elapsed(), Duration::from_secs(4));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_keeps_the_rate_is_read_whole() {
        let started = Instant::now();
        let limits = BodyLimits::new(5, DEFAULT_BODY_BUDGET_BYTES);
        // 10 bytes/s for 2 s: above 5 bytes/s throughout.
        let read = read_body(
            trickle(20, Duration::from_millis(100)),
            None,
            &limits,
            started,
            Duration::from_secs(4),
        )
        .await
        .unwrap();
        assert_eq!(read.bytes.len(), 20);
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_drained_then_refused() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        // The client's view: the refusal comes after all it sent was read, not as a reset.
        let polled = Arc::new(AtomicUsize::new(0));
        let counted = polled.clone();
        let chunks = [MAX_BODY_BYTES, 1, 1000];
        let body = Body::from_stream(futures::stream::iter(chunks).map(move |n| {
            counted.fetch_add(n, Ordering::Relaxed);
            Ok::<_, std::io::Error>(Bytes::from(vec![b' '; n]))
        }));
        let e = read_body(
            body,
            None,
            &BodyLimits::default(),
            Instant::now(),
            Duration::from_secs(4),
        )
        .await
        .unwrap_err();
        assert_eq!(
            e,
            BodyError::TooLarge {
                limit: MAX_BODY_BYTES
            }
        );
        assert_eq!(polled.load(Ordering::Relaxed), MAX_BODY_BYTES + 1001);
    }

    #[tokio::test]
    async fn a_declared_length_over_twice_the_limit_is_refused_before_reading() {
        let e = read_body(
            stalled(),
            Some(2 * MAX_BODY_BYTES as u64 + 1),
            &BodyLimits::default(),
            Instant::now(),
            Duration::from_secs(4),
        )
        .await
        .unwrap_err();
        assert_eq!(
            e,
            BodyError::TooLarge {
                limit: MAX_BODY_BYTES
            }
        );
    }

    #[tokio::test]
    async fn large_bodies_past_the_budget_are_busy_small_ones_are_not() {
        let limits = BodyLimits::new(0, MAX_BODY_BYTES);
        let now = Instant::now;
        let deadline = Duration::from_secs(4);
        let large = |n: usize| Body::from(vec![b'x'; n]);
        let held = read_body(large(MAX_BODY_BYTES), None, &limits, now(), deadline)
            .await
            .unwrap();
        // The first body holds all but SMALL_BODY_BYTES of the budget.
        let e = read_body(large(2 * SMALL_BODY_BYTES + 1), None, &limits, now(), deadline)
            .await
            .unwrap_err();
        assert_eq!(
            e,
            BodyError::Busy {
                budget: MAX_BODY_BYTES
            }
        );
        // A review-sized body does not wait on the budget.
        let small = read_body(large(SMALL_BODY_BYTES), None, &limits, now(), deadline).await;
        assert_eq!(small.unwrap().bytes.len(), SMALL_BODY_BYTES);
        drop(held);
        let again = read_body(large(2 * SMALL_BODY_BYTES + 1), None, &limits, now(), deadline).await;
        assert_eq!(again.unwrap().bytes.len(), 2 * SMALL_BODY_BYTES + 1);
    }
}

//! Rate-limited logging of repeated failures (failed accepts, failed TLS handshakes): the
//! first is logged, then at most one line per period saying how many happened since, while a
//! counter keeps the exact number.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often at most a kind of connection failure is logged: each such line says how many
/// happened since the last, so a flood of them (a scanner, a client with the wrong CA) is one
/// line every few seconds, while the counter keeps the exact number.
pub const FAILURE_LOG_EVERY: Duration = Duration::from_secs(10);

/// Says which of a run of events to log: the first, then at most one per `every`, with how
/// many happened since the last one logged.
#[derive(Debug)]
pub(crate) struct LogGate {
    every: Duration,
    /// When the last logged one happened, and the events since it.
    state: Mutex<(Option<Instant>, u64)>,
}

impl LogGate {
    pub(crate) fn new(every: Duration) -> Self {
        LogGate {
            every,
            state: Mutex::new((None, 0)),
        }
    }

    /// Records one event at `now`; `Some(n)` when it is to be logged, `n` counting it and
    /// those not logged before it.
    pub(crate) fn record(&self, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.1 += 1;
        let due = state
            .0
            .is_none_or(|t| now.saturating_duration_since(t) >= self.every);
        due.then(|| {
            state.0 = Some(now);
            std::mem::take(&mut state.1)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_gate_logs_the_first_then_one_per_period_with_the_count_between() {
        let gate = LogGate::new(Duration::from_secs(10));
        let t = Instant::now();
        assert_eq!(gate.record(t), Some(1));
        assert_eq!(gate.record(t + Duration::from_secs(1)), None);
        assert_eq!(gate.record(t + Duration::from_secs(9)), None);
        assert_eq!(
            gate.record(t + Duration::from_secs(10)),
            Some(3),
            "this one and the two held"
        );
        assert_eq!(gate.record(t + Duration::from_secs(11)), None);
        assert_eq!(gate.record(t + Duration::from_secs(30)), Some(2));
    }
}

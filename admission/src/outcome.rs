//! The `outcome` label of every admission answer, a leaf: the decision, the mutations and the
//! server convert their own outcomes into it (each beside its own type), and the metrics count
//! it, so none of them imports another for a label.

/// How one admission answer ended: the `outcome` label of
/// `miggate_admission_decisions_total`, every value in one place. The decision's
/// [`Verdict`](crate::decide::Verdict) and each mutation's outcome convert into it, and
/// `bad-request` is a review that cannot be read. What ends a request before or past any
/// answer (a body too slow, the body budget spent, the deadline) is the server's own, and the
/// webhook's label adds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Not a restore pod's creation or binding: allowed without a look.
    Ignored,
    /// A restore, compatible, nothing unknown.
    Allowed,
    /// A restore, compatible, with warnings.
    Warned,
    /// A restore refused.
    Refused,
    /// A review that cannot be read, or a body too large (400/413).
    BadRequest,
    /// Steering: node affinity or a claim added.
    Steered,
    /// Steering asked for, the pod left unchanged with a warning.
    NotSteered,
    /// Not a restore pod asking for steering, or one already steered.
    SteerIgnored,
    /// The device map written on a binding.
    Mapped,
    /// The exact check ran but gave no device map; a warning says why.
    NotMapped,
    /// Not a DRA restore pod's binding with an exact view.
    MapIgnored,
    /// A DRA restore pod bound by a binder not listed (`--binder`): no device map written.
    UnlistedBinder,
    /// A Binding that carried `miggate.io/device-map` without the webhook mapping it: the
    /// binder's map removed, since only miggate writes it.
    MapRemoved,
    /// A `spec.summary` written.
    SummaryWritten,
    /// A `spec.summary` that already matched its manifest.
    SummaryKept,
    /// Not a `GpuCheckpoint` or `GpuNode` with a readable manifest.
    SummaryIgnored,
}

impl Outcome {
    /// Every outcome, in the order docs/webhook.md lists them (the server's own between
    /// `bad-request` and `steered`).
    pub const ALL: [Outcome; 16] = [
        Outcome::Ignored,
        Outcome::Allowed,
        Outcome::Warned,
        Outcome::Refused,
        Outcome::BadRequest,
        Outcome::Steered,
        Outcome::NotSteered,
        Outcome::SteerIgnored,
        Outcome::Mapped,
        Outcome::NotMapped,
        Outcome::MapIgnored,
        Outcome::UnlistedBinder,
        Outcome::MapRemoved,
        Outcome::SummaryWritten,
        Outcome::SummaryKept,
        Outcome::SummaryIgnored,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ignored => "ignored",
            Outcome::Allowed => "allowed",
            Outcome::Warned => "warned",
            Outcome::Refused => "refused",
            Outcome::BadRequest => "bad-request",
            Outcome::Steered => "steered",
            Outcome::NotSteered => "not-steered",
            Outcome::SteerIgnored => "steer-ignored",
            Outcome::Mapped => "mapped",
            Outcome::NotMapped => "not-mapped",
            Outcome::MapIgnored => "map-ignored",
            Outcome::UnlistedBinder => "unlisted-binder",
            Outcome::MapRemoved => "map-removed",
            Outcome::SummaryWritten => "summary-written",
            Outcome::SummaryKept => "summary-kept",
            Outcome::SummaryIgnored => "summary-ignored",
        }
    }
}

//! Stage three: a [`Judgement`] as kube's `AdmissionResponse`: the refusal's message (cut to
//! [`MAX_MESSAGE_BYTES`]) with a 403, the warnings escaped and bounded, and the audit
//! annotations: the verdict and what it rests on ([`audit`]), the inventory source and the
//! devices an exact check ran on.

use kube::core::response::Status;
use miggate_compat::escape::escape_within;

use super::audit;
use super::warnings::Warning;
use super::{
    Decision, INVENTORY_SOURCE, Judgement, MAX_MESSAGE_BYTES, MAX_WARNING_BYTES, MAX_WARNINGS, Verdict,
};
use crate::review::Review;

/// Stage three: the judgement as the response to send; `None` for a request not looked at.
pub fn render(review: &Review<'_>, judgement: Option<Judgement>) -> Decision {
    let mut response = review.allowed();
    let Some(judgement) = judgement else {
        return Decision {
            response,
            verdict: Verdict::Ignored,
            refused_by: Vec::new(),
            inventory_source: None,
        };
    };
    response.warnings = bounded(judgement.warnings.iter().map(Warning::to_string).collect());
    let (verdict, refused_by) = match &judgement.refusal {
        Some(refusal) => {
            response.allowed = false;
            response.result = Status::failure(
                &escape_within(&refusal.to_string(), MAX_MESSAGE_BYTES),
                "Forbidden",
            )
            .with_code(403);
            (Verdict::Refused, refusal.refused_by())
        }
        None if response.warnings.is_none() => (Verdict::Allowed, Vec::new()),
        None => (Verdict::Warned, Vec::new()),
    };
    if let Some(src) = judgement.source {
        response
            .audit_annotations
            .insert(INVENTORY_SOURCE.to_string(), src.as_str().to_string());
    }
    crate::allocation::audit(&mut response, judgement.exact_on.as_deref());
    audit::annotate(
        &mut response.audit_annotations,
        verdict,
        &refused_by,
        &judgement.warnings,
        &judgement.subject,
    );
    Decision {
        response,
        verdict,
        refused_by,
        inventory_source: judgement.source,
    }
}

/// At most [`MAX_WARNINGS`] warnings of at most [`MAX_WARNING_BYTES`] each, escaped; the last
/// says how many were left out.
fn bounded(warnings: Vec<String>) -> Option<Vec<String>> {
    if warnings.is_empty() {
        return None;
    }
    let total = warnings.len();
    let keep = if total > MAX_WARNINGS {
        MAX_WARNINGS - 1
    } else {
        total
    };
    let mut out: Vec<String> = warnings
        .iter()
        .take(keep)
        .map(|w| escape_within(w, MAX_WARNING_BYTES).into_owned())
        .collect();
    if total > keep {
        out.push(Warning::MoreNotShown(total - keep).to_string());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_bounded() {
        let many: Vec<String> = (0..30).map(|i| format!("w{i} {}", "x".repeat(400))).collect();
        let out = bounded(many).unwrap_or_default();
        assert_eq!(out.len(), MAX_WARNINGS);
        assert!(out.iter().all(|w| w.len() <= MAX_WARNING_BYTES + 40));
        assert_eq!(out[MAX_WARNINGS - 1], "miggate: 19 more warnings not shown");
        assert!(bounded(Vec::new()).is_none());
    }
}

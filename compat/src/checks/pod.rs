//! `image-digest`, `memory-limit`, `cpu-limit`, `mount`: the container a process is restored into.
//!
//! The caller (`run`) has already made these not applicable when the target has no pod.

use foldhash::HashSet;
use std::cmp::Ordering;

use super::{Ctx, Side, must_match, unknown_sides, words};
use crate::manifest::Pod;
use crate::quantity::Quantity;
use crate::report::CheckResult;
use crate::report::{Text, or_unknown};
use crate::vocab::Outcome;

fn pod(side: Side<'_>) -> Option<&Pod> {
    side.pod
}

/// Reduces an image ID to its content digest: drop a `scheme://` prefix, keep what follows the
/// last `@`, and accept it only as a valid `algorithm:hex` digest. Tags are not content.
pub fn reduce_digest(image_id: &str) -> Option<String> {
    digest_of(image_id).map(str::to_string)
}

/// [`reduce_digest`], borrowed.
fn digest_of(image_id: &str) -> Option<&str> {
    let s = image_id.trim();
    // The first `://`, found by stepping from colon to colon: a substring searcher costs more
    // to set up than this short text takes to scan.
    let mut scheme_end = None;
    let mut from = 0;
    while let Some(at) = s[from..].find(':') {
        if s[from + at..].starts_with("://") {
            scheme_end = Some(from + at + 3);
            break;
        }
        from += at + 1;
    }
    let s = scheme_end.map_or(s, |end| &s[end..]);
    let s = s.rsplit_once('@').map_or(s, |(_, d)| d);
    let (alg, hex) = s.split_once(':')?;
    let len = match alg {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return None,
    };
    // Folded without a short cut, so the check runs over whole words at once.
    let valid = hex.len() == len
        && hex
            .bytes()
            .fold(true, |ok, c| ok & matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    valid.then_some(s)
}

/// A different image restores the checkpoint's memory over files that no longer match it.
pub(super) fn image_digest(ctx: &Ctx<'_>) -> CheckResult {
    let reduce = |m| pod(m).and_then(|p| p.image_digest.as_deref()).and_then(digest_of);
    let (s, t) = (reduce(ctx.source), reduce(ctx.target));
    let mut v = must_match(ctx, s, t, words!("image content digest"), |a, b| a == b);
    if v.outcome == Outcome::Unknown {
        v.message = format!(
            "no content digest on {} (absent or not a valid digest)",
            unknown_sides(s.is_none(), t.is_none())
        )
        .into();
    }
    v
}

/// What a limit comparison is about, with its fixed messages written out at compile time.
struct Limit {
    what: &'static str,
    smaller: &'static str,
    enough: &'static str,
}

const MEMORY: Limit = Limit {
    what: "memory limit",
    smaller: "target memory limit is smaller",
    enough: "target memory limit is at least the source's",
};

const CPU: Limit = Limit {
    what: "CPU limit",
    smaller: "target CPU limit is smaller",
    enough: "target CPU limit is at least the source's",
};

fn at_least_source(
    ctx: &Ctx<'_>,
    source: Option<&Quantity>,
    target: Option<&Quantity>,
    limit: &Limit,
) -> CheckResult {
    let what = limit.what;
    let show = |q: Option<&Quantity>| or_unknown(q.map(Quantity::as_str));
    let (s_txt, t_txt) = (show(source), show(target));
    let (Some(s), Some(t)) = (source, target) else {
        return ctx.row(
            Outcome::Unknown,
            s_txt,
            t_txt,
            format!(
                "{what} not recorded on {}",
                unknown_sides(source.is_none(), target.is_none())
            ),
        );
    };
    match t.compare(s) {
        Some(Ordering::Less) => ctx.row(Outcome::Refuse, s_txt, t_txt, limit.smaller),
        Some(_) => ctx.row(Outcome::Pass, s_txt, t_txt, limit.enough),
        None => ctx.row(
            Outcome::Unknown,
            s_txt,
            t_txt,
            format!(
                "{what} is not a Kubernetes quantity on {}",
                unknown_sides(s.nanos().is_none(), t.nanos().is_none())
            ),
        ),
    }
}

/// A restored process needs the memory it had; a smaller limit gets it OOM-killed mid-restore.
pub(super) fn memory_limit(ctx: &Ctx<'_>) -> CheckResult {
    let q = |m| pod(m).and_then(|p| p.memory_limit.as_ref());
    at_least_source(ctx, q(ctx.source), q(ctx.target), &MEMORY)
}

/// A smaller CPU limit throttles a restored process that was sized for more.
pub(super) fn cpu_limit(ctx: &Ctx<'_>) -> CheckResult {
    let q = |m| pod(m).and_then(|p| p.cpu_limit.as_ref());
    at_least_source(ctx, q(ctx.source), q(ctx.target), &CPU)
}

/// CRIU recreates `/` and `/dev/shm` itself; every other externalized mount must be there.
const EXEMPT_MOUNTS: [&str; 2] = ["/", "/dev/shm"];

fn normalize(path: &str) -> &str {
    let p = path.trim();
    let trimmed = p.trim_end_matches('/');
    if trimmed.is_empty() && p.starts_with('/') {
        "/"
    } else {
        trimmed
    }
}

/// CRIU fails the restore when an externalized mount has nowhere to go.
pub(super) fn mount(ctx: &Ctx<'_>) -> CheckResult {
    let mounts = |m| pod(m).and_then(|p| p.mounts.as_ref());
    let (Some(source), Some(target)) = (mounts(ctx.source), mounts(ctx.target)) else {
        let (s, t) = (mounts(ctx.source), mounts(ctx.target));
        return ctx.row(
            Outcome::Unknown,
            s.map_or("unknown".into(), |m| list(m.iter().map(String::as_str))),
            t.map_or("unknown".into(), |m| list(m.iter().map(String::as_str))),
            format!(
                "mounts not recorded on {}",
                unknown_sides(s.is_none(), t.is_none())
            ),
        );
    };
    let needed = || {
        source
            .iter()
            .map(|m| normalize(m))
            .filter(|m| !m.is_empty() && !EXEMPT_MOUNTS.contains(m))
    };
    let present = || target.iter().map(|m| normalize(m));
    // A few mounts are looked up by a scan; many through a set, so neither side's size can make
    // the check quadratic.
    let set: Option<HashSet<&str>> = (target.len() > 16).then(|| present().collect());
    let has = |m: &str| {
        set.as_ref()
            .map_or_else(|| present().any(|p| p == m), |s| s.contains(m))
    };
    let missing: Vec<&str> = needed().filter(|m| !has(m)).collect();
    let mut v = ctx.row(
        Outcome::Pass,
        list(needed()),
        list(present()),
        "every externalized mount exists on the target",
    );
    if !missing.is_empty() {
        v.outcome = Outcome::Refuse;
        v.message = format!("missing on the target: {}", missing.join(", ")).into();
        v.mismatches = missing
            .iter()
            .map(|m| (m.to_string(), "missing".to_string()))
            .collect();
    }
    v
}

fn list<'a>(items: impl Iterator<Item = &'a str>) -> Text {
    let mut out = String::new();
    for item in items {
        if !out.is_empty() {
            out.push_str(", ");
        }
        out.push_str(item);
    }
    if out.is_empty() {
        Text::fixed("none")
    } else {
        Text::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::reduce_digest;
    use rstest::rstest;

    const A: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";

    #[rstest]
    #[case(A, Some(A))]
    #[case(
        "docker-pullable://nvcr.io/nvidia/tritonserver@sha256:1111111111111111111111111111111111111111111111111111111111111111",
        Some(A)
    )]
    // The scheme ends at the first `://`, wherever the first `:` is.
    #[case(
        "a:b://sha256:1111111111111111111111111111111111111111111111111111111111111111",
        Some(A)
    )]
    #[case("registry.example/source@sha256:index-a", None)]
    #[case("runtime-local-image", None)]
    #[case("sha256:ABCD", None)]
    #[case(
        "  sha256:1111111111111111111111111111111111111111111111111111111111111111  ",
        Some(A)
    )]
    fn image_ids_reduce_to_digests(#[case] id: &str, #[case] want: Option<&str>) {
        assert_eq!(reduce_digest(id).as_deref(), want);
    }
}

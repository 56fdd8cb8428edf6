//! `gpu-model`, `gpu-count`, `mig-partitioning`, `mig-profile`: the devices a process used.
//!
//! nvidia-smi names a slice after its parent card, so model and count alone let a whole H100
//! pass for a `1g.10gb` of one. The MIG checks read the device kind and the slice shape.

use std::collections::BTreeMap;

use super::{Ctx, Mode, Verdict, unknown_sides};
use crate::device::{DeviceKind, SliceShape};
use crate::manifest::Device;
use crate::multiset::Multiset;
use crate::report::Outcome;

/// Both sides' device lists, or the verdict for when either is not recorded.
fn both<'a>(
    ctx: &Ctx<'a>,
    render: impl Fn(&[Device]) -> String,
) -> Result<(&'a [Device], &'a [Device]), Verdict> {
    match (ctx.source.devices(), ctx.target.devices()) {
        (Some(s), Some(t)) => Ok((s, t)),
        (s, t) => Err(Verdict::new(
            Outcome::Unknown,
            s.map_or("unknown".into(), &render),
            t.map_or("unknown".into(), &render),
            format!(
                "devices not recorded on {}",
                unknown_sides(s.is_none(), t.is_none())
            ),
        )),
    }
}

fn models(devs: &[Device]) -> Multiset {
    devs.iter().map(|d| d.model().unwrap_or("unknown")).collect()
}

fn count(devs: &[Device]) -> String {
    devs.len().to_string()
}

fn compare(mode: Mode, source: &Multiset, target: &Multiset) -> bool {
    match mode {
        Mode::Exact => source == target,
        Mode::Offer => source.is_covered_by(target),
    }
}

fn refused(mode: Mode, source: &Multiset, target: &Multiset, what: &str) -> String {
    match mode {
        Mode::Exact => format!("different {what}"),
        Mode::Offer => format!("the target is short of {}", source.shortfall(target).join(", ")),
    }
}

/// cuda-checkpoint restores only onto the same chip type.
pub(super) fn gpu_model(ctx: &Ctx<'_>) -> Verdict {
    let (s, t) = match both(ctx, |d| models(d).render()) {
        Ok(v) => v,
        Err(v) => return v,
    };
    if s.is_empty() {
        return Verdict::new(
            Outcome::Pass,
            "none",
            models(t).render(),
            "the checkpoint used no GPU",
        );
    }
    if t.is_empty() {
        return Verdict::new(
            Outcome::NotApplicable,
            models(s).render(),
            "none",
            "the target has no devices; gpu-count speaks",
        );
    }
    let unnamed = |d: &[Device]| d.iter().any(|x| x.model().is_none());
    if unnamed(s) || unnamed(t) {
        return Verdict::new(
            Outcome::Unknown,
            models(s).render(),
            models(t).render(),
            format!(
                "a device's product name is not recorded on {}",
                unknown_sides(unnamed(s), unnamed(t))
            ),
        );
    }
    let mode = ctx.options.mode;
    let kinds_known = s.iter().chain(t).all(|d| d.kind() != DeviceKind::Unknown);
    // Offer mode compares per (kind, model): a node's whole H100s cannot host a checkpoint
    // taken on H100 slices, nor the other way round.
    let (ms, mt) = if mode == Mode::Offer && kinds_known {
        (classes(s), classes(t))
    } else {
        (models(s), models(t))
    };
    let ok = compare(mode, &ms, &mt);
    let v = |o, m: String| Verdict::new(o, ms.render(), mt.render(), m);
    match (ok, kinds_known || mode == Mode::Exact) {
        (false, _) => v(Outcome::Refuse, refused(mode, &ms, &mt, "GPU models")),
        (true, true) => v(Outcome::Pass, "same GPU models".into()),
        (true, false) => v(
            Outcome::Unknown,
            "models match, but not every device's kind is known".into(),
        ),
    }
}

fn classes(devs: &[Device]) -> Multiset {
    devs.iter()
        .map(|d| {
            let model = d.model().unwrap_or("unknown");
            match d.kind() {
                DeviceKind::Slice => format!("{model} (MIG slice)"),
                _ => model.to_string(),
            }
        })
        .collect()
}

/// A restore must map every checkpointed GPU, and a container given more sees other devices.
pub(super) fn gpu_count(ctx: &Ctx<'_>) -> Verdict {
    let (s, t) = match both(ctx, count) {
        Ok(v) => v,
        Err(v) => return v,
    };
    let n = s.len();
    if n == 0 {
        return Verdict::new(Outcome::Pass, "0", count(t), "the checkpoint used no GPU");
    }
    match ctx.options.mode {
        Mode::Exact if n == t.len() => {
            Verdict::new(Outcome::Pass, count(s), count(t), "same number of devices")
        }
        Mode::Exact => Verdict::new(Outcome::Refuse, count(s), count(t), "different number of devices"),
        Mode::Offer => {
            let any_unknown = s.iter().chain(t).any(|d| d.kind() == DeviceKind::Unknown);
            let wanted: Vec<DeviceKind> = s.iter().map(Device::kind).collect();
            let eligible = t.iter().filter(|d| wanted.contains(&d.kind())).count();
            if any_unknown {
                let o = if t.len() < n {
                    Outcome::Refuse
                } else {
                    Outcome::Unknown
                };
                return Verdict::new(o, count(s), count(t), "not every device's kind is known");
            }
            let o = if eligible >= n {
                Outcome::Pass
            } else {
                Outcome::Refuse
            };
            Verdict::new(
                o,
                count(s),
                eligible.to_string(),
                format!("{eligible} target devices are of the checkpoint's kinds"),
            )
        }
    }
}

fn kinds(devs: &[Device]) -> Multiset {
    devs.iter().map(|d| d.kind().as_str()).collect()
}

/// A process checkpointed on a whole GPU cannot be restored onto a slice, or the other way round.
pub(super) fn mig_partitioning(ctx: &Ctx<'_>) -> Verdict {
    let (s, t) = match both(ctx, |d| kinds(d).render()) {
        Ok(v) => v,
        Err(v) => return v,
    };
    if s.is_empty() {
        return Verdict::new(
            Outcome::Pass,
            "none",
            kinds(t).render(),
            "the checkpoint used no GPU",
        );
    }
    if t.is_empty() {
        return Verdict::new(
            Outcome::NotApplicable,
            kinds(s).render(),
            "none",
            "the target has no devices; gpu-count speaks",
        );
    }
    let (ks, kt) = (kinds(s), kinds(t));
    let unknown = DeviceKind::Unknown.as_str();
    let (su, tu) = (ks.count(unknown) > 0, kt.count(unknown) > 0);
    let known = [DeviceKind::Whole.as_str(), DeviceKind::Slice.as_str()];
    let exact = ctx.options.mode == Mode::Exact;
    // Kinds, not counts: how many devices there are is gpu-count's question (a checkpoint on two
    // whole GPUs against one whole GPU is the same partitioning). A refusal only where no
    // reading of the unknown devices could make the kinds match.
    let short: Vec<String> = known
        .into_iter()
        .filter(|k| ks.count(k) > 0 && kt.count(k) == 0 && !tu)
        .map(|k| format!("the checkpoint ran on {}; the target has none", plural(k)))
        .collect();
    let extra: Vec<String> = known
        .into_iter()
        .filter(|k| exact && kt.count(k) > 0 && ks.count(k) == 0 && !su)
        .map(|k| format!("the target has {}; the checkpoint ran on none", plural(k)))
        .collect();
    let v = |o, m: String| Verdict::new(o, ks.render(), kt.render(), m);
    if !short.is_empty() {
        v(Outcome::Refuse, short.join("; "))
    } else if !extra.is_empty() {
        v(Outcome::Refuse, extra.join("; "))
    } else if su || tu {
        v(
            Outcome::Unknown,
            format!("a device's kind is not known on {}", unknown_sides(su, tu)),
        )
    } else {
        v(Outcome::Pass, "same partitioning".into())
    }
}

fn plural(kind: &str) -> &str {
    if kind == DeviceKind::Whole.as_str() {
        "whole GPUs"
    } else {
        "MIG slices"
    }
}

/// A slice's memory and SM count come from its profile: restoring a `3g.40gb` process onto a
/// `1g.10gb` fails inside CUDA. Shapes are counted per (model, profile).
pub(super) fn mig_profile(ctx: &Ctx<'_>) -> Verdict {
    let slices = |d: &[Device]| -> Vec<Device> {
        d.iter()
            .filter(|x| x.kind() == DeviceKind::Slice)
            .cloned()
            .collect()
    };
    let (all_s, all_t) = match both(ctx, |d| flat(&slices(d), false).render()) {
        Ok(v) => v,
        Err(v) => return v,
    };
    let (s, t) = (slices(all_s), slices(all_t));
    if s.is_empty() && t.is_empty() {
        return Verdict::new(Outcome::Pass, "none", "none", "no MIG slices on either side");
    }
    if s.is_empty() || t.is_empty() {
        return Verdict::new(
            Outcome::NotApplicable,
            flat(&s, false).render(),
            flat(&t, false).render(),
            "slices on one side only; mig-partitioning speaks",
        );
    }
    let all: Vec<&Device> = s.iter().chain(&t).collect();
    let distinct: std::collections::BTreeSet<&str> = all.iter().filter_map(|d| d.model()).collect();
    let with_model = all.iter().all(|d| d.model().is_some()) && distinct.len() > 1;
    let (fs, ft) = (flat(&s, with_model), flat(&t, with_model));
    // A slice without a profile has an unknown shape, and a device of unknown kind may be such a
    // slice: either could make up any difference.
    let no_shape = |d: &[Device]| d.iter().any(|x| x.slice_shape() == Some(SliceShape::Unknown));
    let no_kind = |d: &[Device]| d.iter().any(|x| x.kind() == DeviceKind::Unknown);
    let unknown = |why: String| Verdict::new(Outcome::Unknown, fs.render(), ft.render(), why);
    if no_shape(&s) || no_shape(&t) {
        return unknown(format!(
            "a slice's profile is not recorded on {}",
            unknown_sides(no_shape(&s), no_shape(&t))
        ));
    }
    if no_kind(all_s) || no_kind(all_t) {
        return unknown(format!(
            "a device's kind is not known on {}, and it may be a slice",
            unknown_sides(no_kind(all_s), no_kind(all_t))
        ));
    }
    let mode = ctx.options.mode;
    let has_ci = all
        .iter()
        .any(|d| d.mig_profile.as_ref().is_some_and(|p| p.is_compute_instance()));
    let grouped = has_ci
        && all
            .iter()
            .filter(|d| d.mig_profile.as_ref().is_some_and(|p| p.is_compute_instance()))
            .all(|d| d.gpu_instance().is_some());
    let (ds, dt) = if grouped {
        (by_instance(&s, with_model), by_instance(&t, with_model))
    } else {
        (fs.clone(), ft.clone())
    };
    let v = |o, m: String| Verdict::new(o, ds.render(), dt.render(), m);
    if !compare(mode, &fs, &ft) {
        return v(Outcome::Refuse, refused(mode, &fs, &ft, "slice shapes"));
    }
    if grouped && !compare(mode, &ds, &dt) {
        return v(
            Outcome::Refuse,
            format!(
                "{} (compute instances share their GPU instance's memory)",
                refused(mode, &ds, &dt, "GPU-instance layouts")
            ),
        );
    }
    if has_ci && !grouped {
        return v(
            Outcome::Unknown,
            "compute-instance slices without GPU instance ids: cannot tell how they share memory".into(),
        );
    }
    v(Outcome::Pass, "same slice shapes".into())
}

fn key(d: &Device, with_model: bool, shape: &str) -> String {
    match (with_model, d.model()) {
        (true, Some(m)) => format!("{m} {shape}"),
        _ => shape.to_string(),
    }
}

fn shape(d: &Device) -> &str {
    d.mig_profile.as_ref().map_or("unknown", |p| p.as_str())
}

fn flat(slices: &[Device], with_model: bool) -> Multiset {
    slices.iter().map(|d| key(d, with_model, shape(d))).collect()
}

/// Slices with compute-instance profiles grouped by the GPU instance they share; every other
/// slice stands alone.
fn by_instance(slices: &[Device], with_model: bool) -> Multiset {
    let mut out = Multiset::new();
    let mut groups: BTreeMap<(&str, u32), Vec<&Device>> = BTreeMap::new();
    for d in slices {
        match (
            d.mig_profile.as_ref().is_some_and(|p| p.is_compute_instance()),
            d.gpu_instance(),
        ) {
            (true, Some(gi)) => groups.entry(gi).or_default().push(d),
            _ => out.add(key(d, with_model, shape(d))),
        }
    }
    for members in groups.values() {
        // One model per GPU instance (its parent's) is the rule; should members disagree, each
        // keeps its own, so the key never depends on which member is listed first.
        let models: std::collections::BTreeSet<Option<&str>> = members.iter().map(|d| d.model()).collect();
        let one_model = models.len() == 1;
        let mut names: Vec<String> = members
            .iter()
            .map(|d| {
                if one_model {
                    shape(d).to_string()
                } else {
                    key(d, with_model, shape(d))
                }
            })
            .collect();
        names.sort_unstable();
        out.add(key(
            members[0],
            with_model && one_model,
            &format!("{{{}}}", names.join(", ")),
        ));
    }
    out
}

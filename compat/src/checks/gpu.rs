//! `gpu-model`, `gpu-count`, `mig-partitioning`, `mig-profile`: the devices a process used.
//!
//! nvidia-smi names a slice after its parent card, so model and count alone let a whole H100
//! pass for a `1g.10gb` of one. The MIG checks read the device kind and the slice shape.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use foldhash::{HashMap, HashMapExt};

use super::devices::{Devices, Tally};
use super::{Ctx, unknown_sides};
use crate::device::DeviceKind;
use crate::manifest::Device;
use crate::matching::{Problem, assign};
use crate::multiset::Multiset;
use crate::report::CheckResult;
use crate::report::Text;
use crate::vocab::Mode;
use crate::vocab::Outcome;

/// Both sides' device lists, or the verdict for when either is not recorded.
fn both<'c, 'a>(
    ctx: &'c Ctx<'a>,
    render: impl Fn(&Devices<'a>) -> Text,
) -> Result<(&'c Devices<'a>, &'c Devices<'a>), CheckResult> {
    match ctx.devices() {
        (Some(s), Some(t)) => Ok((s, t)),
        (s, t) => Err(ctx.row(
            Outcome::Unknown,
            s.map_or(Text::fixed("unknown"), &render),
            t.map_or(Text::fixed("unknown"), &render),
            format!(
                "devices not recorded on {}",
                unknown_sides(s.is_none(), t.is_none())
            ),
        )),
    }
}

fn count(devs: &Devices<'_>) -> Text {
    if devs.any_uncounted() {
        Text::fixed("unknown")
    } else {
        Text::number(devs.len())
    }
}

/// `counted` as [`Multiset::render`] shows it, with each key of `uncounted` (classes whose
/// number the target does not know) as `key x?`, or `key xN+` where some are counted too, in
/// byte order.
fn with_uncounted(counted: &Multiset<'_>, uncounted: &Multiset<'_>) -> Text {
    if uncounted.is_empty() {
        return counted.render();
    }
    let mut shown: BTreeMap<&str, String> = counted.iter().map(|(k, n)| (k, format!("{k} x{n}"))).collect();
    for (k, _) in uncounted.iter() {
        shown
            .entry(k)
            .and_modify(|s| s.push('+'))
            .or_insert_with(|| format!("{k} x?"));
    }
    Text::from(shown.into_values().collect::<Vec<_>>().join(", "))
}

/// A source's counts against a target that does not know how many devices of some classes it
/// has (`uncounted`, one of each): what the target certainly lacks (`key (needs n, has m)`),
/// and the keys only an uncounted class could supply.
fn against_uncounted<'s>(
    source: &'s Multiset<'_>,
    counted: &Multiset<'_>,
    uncounted: &Multiset<'_>,
) -> (Vec<String>, Vec<&'s str>) {
    let mut lacking = Vec::new();
    let mut unsure = Vec::new();
    for (k, n) in source.iter() {
        let has = counted.count(k);
        if has >= n {
            continue;
        }
        if uncounted.count(k) > 0 {
            unsure.push(k);
        } else {
            lacking.push(format!("{k} (needs {n}, has {has})"));
        }
    }
    (lacking, unsure)
}

/// Exact mode against a target with uncounted classes: whether the two certainly differ (a
/// source key the target lacks or counts fewer of without an uncounted class of it, or a
/// counted target key the source has fewer of).
fn certainly_differ(source: &Multiset<'_>, counted: &Multiset<'_>, uncounted: &Multiset<'_>) -> bool {
    let (lacking, _) = against_uncounted(source, counted, uncounted);
    !lacking.is_empty() || counted.iter().any(|(k, n)| source.count(k) < n)
}

/// The verdict of a comparison of counts against a target with uncounted classes, or `None`
/// where the counted classes alone decide it (every source key covered by them, offer mode).
fn uncounted_verdict(
    mode: Mode,
    source: &Multiset<'_>,
    counted: &Multiset<'_>,
    uncounted: &Multiset<'_>,
    what: &str,
) -> Option<(Outcome, String)> {
    match mode {
        Mode::Exact if certainly_differ(source, counted, uncounted) => {
            Some((Outcome::Refuse, format!("different {what}")))
        }
        Mode::Exact => Some((
            Outcome::Unknown,
            format!("how many devices of some of its {what} the target has is not known"),
        )),
        Mode::Offer => {
            let (lacking, unsure) = against_uncounted(source, counted, uncounted);
            if !lacking.is_empty() {
                Some((
                    Outcome::Refuse,
                    format!("the target is short of {}", lacking.join(", ")),
                ))
            } else if !unsure.is_empty() {
                Some((
                    Outcome::Unknown,
                    format!("the target has {}, but how many is not known", unsure.join(", ")),
                ))
            } else {
                None
            }
        }
    }
}

fn compare(mode: Mode, source: &Multiset<'_>, target: &Multiset<'_>) -> bool {
    match mode {
        Mode::Exact => source == target,
        Mode::Offer => source.is_covered_by(target),
    }
}

fn refused(mode: Mode, source: &Multiset<'_>, target: &Multiset<'_>, what: &str) -> String {
    match mode {
        Mode::Exact => format!("different {what}"),
        Mode::Offer => format!("the target is short of {}", source.shortfall(target).join(", ")),
    }
}

/// cuda-checkpoint restores only onto the same chip type.
pub(super) fn gpu_model(ctx: &Ctx<'_>) -> CheckResult {
    let models = |d: &Devices<'_>| with_uncounted(&d.models(), &d.uncounted_models());
    let (s, t) = match both(ctx, models) {
        Ok(v) => v,
        Err(v) => return v,
    };
    if s.is_empty() {
        return ctx.row(Outcome::Pass, "none", models(t), "the checkpoint used no GPU");
    }
    if t.is_empty() {
        return ctx.row(
            Outcome::NotApplicable,
            s.models().render(),
            "none",
            "the target has no devices; gpu-count speaks",
        );
    }
    let unnamed = |d: &Devices<'_>| d.any(|x| x.model.is_none());
    let (us, ut) = (unnamed(s), unnamed(t));
    if us || ut {
        return ctx.row(
            Outcome::Unknown,
            s.models().render(),
            models(t),
            format!(
                "a device's product name is not recorded on {}",
                unknown_sides(us, ut)
            ),
        );
    }
    let mode = ctx.options.mode;
    let source_known = !s.any(|d| d.kind == DeviceKind::Unknown);
    let kinds_known = source_known && !t.any(|d| d.kind == DeviceKind::Unknown);
    // Offer mode compares per (kind, model): a node's whole H100s cannot host a checkpoint
    // taken on H100 slices, nor the other way round. Where the target lists every slice, its
    // devices of unknown kind are GPUs (whole or cut), counted as whole: at most what it has.
    let split = source_known && (kinds_known || ctx.target.slices_listed);
    let (ms, mt) = if mode == Mode::Offer && split {
        (s.models_and_kinds(), t.models_and_kinds())
    } else {
        (s.models(), t.models())
    };
    if t.any_uncounted() {
        let open = if mode == Mode::Offer && split {
            t.uncounted_models_and_kinds()
        } else {
            t.uncounted_models()
        };
        let (o, m) = uncounted_verdict(mode, &ms, &mt, &open, "GPU models").unwrap_or(if kinds_known {
            (Outcome::Pass, "same GPU models".to_string())
        } else {
            (
                Outcome::Unknown,
                "models match, but not every device's kind is known".to_string(),
            )
        });
        return ctx.row(o, ms.render(), with_uncounted(&mt, &open), m);
    }
    let ok = compare(mode, &ms, &mt);
    let v = |o, m: Text| ctx.row(o, ms.render(), mt.render(), m);
    match (ok, kinds_known || mode == Mode::Exact) {
        (false, _) => v(Outcome::Refuse, refused(mode, &ms, &mt, "GPU models").into()),
        (true, true) => v(Outcome::Pass, "same GPU models".into()),
        (true, false) => v(
            Outcome::Unknown,
            "models match, but not every device's kind is known".into(),
        ),
    }
}

/// A restore must map every checkpointed GPU, and a container given more sees other devices.
pub(super) fn gpu_count(ctx: &Ctx<'_>) -> CheckResult {
    let (s, t) = match both(ctx, count) {
        Ok(v) => v,
        Err(v) => return v,
    };
    let n = s.len();
    if n == 0 {
        return ctx.row(Outcome::Pass, "0", count(t), "the checkpoint used no GPU");
    }
    if t.any_uncounted() {
        return uncounted_count(ctx, s, t);
    }
    match ctx.options.mode {
        Mode::Exact if n == t.len() => ctx.row(Outcome::Pass, count(s), count(t), "same number of devices"),
        Mode::Exact => ctx.row(Outcome::Refuse, count(s), count(t), "different number of devices"),
        Mode::Offer => {
            let any_unknown =
                s.any(|d| d.kind == DeviceKind::Unknown) || t.any(|d| d.kind == DeviceKind::Unknown);
            let eligible: usize = t
                .tallies
                .iter()
                .filter(|x| s.any(|y| y.kind == x.kind))
                .map(|x| x.count)
                .sum();
            let listed = ctx.target.slices_listed && !s.any(|d| d.kind == DeviceKind::Unknown);
            if any_unknown && listed {
                return listed_count(ctx, s, t);
            }
            if any_unknown {
                let o = if t.len() < n {
                    Outcome::Refuse
                } else {
                    Outcome::Unknown
                };
                return ctx.row(o, count(s), count(t), "not every device's kind is known");
            }
            let o = if eligible >= n {
                Outcome::Pass
            } else {
                Outcome::Refuse
            };
            ctx.row(
                o,
                count(s),
                Text::number(eligible),
                format!("{eligible} target devices are of the checkpoint's kinds"),
            )
        }
    }
}

/// Offer-mode `gpu-count` against a target that lists every slice (see
/// [`Target::with_slices_listed`](crate::Target::with_slices_listed)): its devices of unknown
/// kind can stand for whole GPUs, never for slices, so a slice shortfall is certain.
fn listed_count(ctx: &Ctx<'_>, s: &Devices<'_>, t: &Devices<'_>) -> CheckResult {
    let n = s.len();
    let source_has = |k: DeviceKind| s.any(|y| y.kind == k);
    let whole = source_has(DeviceKind::Whole);
    let eligible: usize = t
        .tallies
        .iter()
        .filter(|x| match x.kind {
            DeviceKind::Unknown => whole,
            k => source_has(k),
        })
        .map(|x| x.count)
        .sum();
    let (o, m) = if eligible < n {
        (
            Outcome::Refuse,
            format!(
                "at most {eligible} target devices can be of the checkpoint's kinds (every slice is listed)"
            ),
        )
    } else if whole {
        (Outcome::Unknown, "not every device's kind is known".to_string())
    } else {
        (
            Outcome::Pass,
            format!("{eligible} target devices are of the checkpoint's kinds"),
        )
    };
    ctx.row(o, count(s), Text::number(eligible), m)
}

/// `gpu-count` against a target that does not know how many devices of some classes it has
/// ([`crate::Nvidia::uncounted`]): the devices of the checkpoint's kinds it counts, and whether
/// an uncounted class of those kinds could add more.
fn uncounted_count(ctx: &Ctx<'_>, s: &Devices<'_>, t: &Devices<'_>) -> CheckResult {
    let n = s.len();
    let listed = ctx.target.slices_listed;
    let source_has = |k: DeviceKind| s.any(|y| y.kind == k);
    let any_kind = source_has(DeviceKind::Unknown);
    // A target class serves the checkpoint when it is of one of the checkpoint's kinds. One of
    // unknown kind may be either, but where every slice is listed only a whole GPU.
    let serves = |x: &Tally<'_>| {
        any_kind
            || match x.kind {
                DeviceKind::Unknown => !listed || source_has(DeviceKind::Whole),
                k => source_has(k),
            }
    };
    let counted: usize = t
        .tallies
        .iter()
        .filter(|x| !x.uncounted && serves(x))
        .map(|x| x.count)
        .sum();
    let open = t.tallies.iter().any(|x| x.uncounted && serves(x));
    let shown = if open {
        Text::from(format!("{counted} counted, more of a number not known"))
    } else {
        Text::number(counted)
    };
    let (o, m) = match ctx.options.mode {
        Mode::Exact => {
            let all: usize = t.tallies.iter().filter(|x| !x.uncounted).map(|x| x.count).sum();
            if all > n {
                (Outcome::Refuse, "different number of devices".to_string())
            } else {
                (
                    Outcome::Unknown,
                    "how many devices the target has is not known".to_string(),
                )
            }
        }
        Mode::Offer if counted >= n => {
            let kinds_unknown = any_kind || t.any(|x| x.kind == DeviceKind::Unknown && serves(x));
            if kinds_unknown {
                (Outcome::Unknown, "not every device's kind is known".to_string())
            } else {
                (
                    Outcome::Pass,
                    format!("{counted} target devices are of the checkpoint's kinds"),
                )
            }
        }
        Mode::Offer if open => (
            Outcome::Unknown,
            format!(
                "{counted} target devices of the checkpoint's kinds are counted; how many more the target has is not known"
            ),
        ),
        Mode::Offer => (
            Outcome::Refuse,
            format!("{counted} target devices are of the checkpoint's kinds"),
        ),
    };
    ctx.row(o, count(s), shown, m)
}

/// A process checkpointed on a whole GPU cannot be restored onto a slice, or the other way round.
pub(super) fn mig_partitioning(ctx: &Ctx<'_>) -> CheckResult {
    let kinds = |d: &Devices<'_>| with_uncounted(&d.kinds(), &d.uncounted_kinds());
    let (s, t) = match both(ctx, kinds) {
        Ok(v) => v,
        Err(v) => return v,
    };
    if s.is_empty() {
        return ctx.row(Outcome::Pass, "none", kinds(t), "the checkpoint used no GPU");
    }
    if t.is_empty() {
        return ctx.row(
            Outcome::NotApplicable,
            s.kinds().render(),
            "none",
            "the target has no devices; gpu-count speaks",
        );
    }
    let (ks, kt) = (s.kinds(), t.kinds());
    // Kinds the target names without knowing how many it has: possibly none.
    let kt_open = t.uncounted_kinds();
    let unknown = DeviceKind::Unknown.as_str();
    let (su, tu) = (
        ks.count(unknown) > 0,
        kt.count(unknown) > 0 || kt_open.count(unknown) > 0,
    );
    let known = [DeviceKind::Whole.as_str(), DeviceKind::Slice.as_str()];
    let exact = ctx.options.mode == Mode::Exact;
    // Kinds, not counts: how many devices there are is gpu-count's question (a checkpoint on two
    // whole GPUs against one whole GPU is the same partitioning). A refusal only where no
    // reading of the unknown devices could make the kinds match.
    // A target that lists every slice has none beyond those listed, whatever its unknown
    // devices are.
    let listed = ctx.target.slices_listed;
    let short: Vec<String> = known
        .into_iter()
        .filter(|k| {
            ks.count(k) > 0
                && kt.count(k) == 0
                && kt_open.count(k) == 0
                && (!tu || (listed && *k == DeviceKind::Slice.as_str()))
        })
        .map(|k| format!("the checkpoint ran on {}; the target has none", plural(k)))
        .collect();
    let extra: Vec<String> = known
        .into_iter()
        .filter(|k| exact && kt.count(k) > 0 && ks.count(k) == 0 && !su)
        .map(|k| format!("the target has {}; the checkpoint ran on none", plural(k)))
        .collect();
    // Kinds the checkpoint ran on (or, in exact mode, it did not) that the target names only in
    // a number not known: it may have none.
    let maybe: Vec<String> = known
        .into_iter()
        .filter(|k| kt.count(k) == 0 && kt_open.count(k) > 0 && (ks.count(k) > 0 || exact))
        .map(|k| {
            format!(
                "how many {} the target has is not known (possibly none)",
                plural(k)
            )
        })
        .collect();
    let v = |o, m: String| ctx.row(o, ks.render(), kinds(t), Cow::<str>::Owned(m));
    if !short.is_empty() {
        v(Outcome::Refuse, short.join("; "))
    } else if !extra.is_empty() {
        v(Outcome::Refuse, extra.join("; "))
    } else if !maybe.is_empty() {
        v(Outcome::Unknown, maybe.join("; "))
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
pub(super) fn mig_profile(ctx: &Ctx<'_>) -> CheckResult {
    let shapes = |d: &Devices<'_>| with_uncounted(&flat(d, false), &flat_uncounted(d, false));
    let (all_s, all_t) = match both(ctx, shapes) {
        Ok(v) => v,
        Err(v) => return v,
    };
    let (ns, nt) = (all_s.slices().count(), all_t.slices().count());
    if ns == 0 && nt == 0 {
        return ctx.row(Outcome::Pass, "none", "none", "no MIG slices on either side");
    }
    if ns == 0 || nt == 0 {
        return ctx.row(
            Outcome::NotApplicable,
            flat(all_s, false).render(),
            shapes(all_t),
            "slices on one side only; mig-partitioning speaks",
        );
    }
    // Models are printed only when every slice names one and they are not all the same.
    let first = all_s.slices().next().and_then(|t| t.model);
    let every = |d: &Devices<'_>| d.slices().all(|t| t.model.is_some());
    let differ = |d: &Devices<'_>| d.slices().any(|t| t.model != first);
    let with_model = every(all_s) && every(all_t) && (differ(all_s) || differ(all_t));
    let (fs, ft) = (flat(all_s, with_model), flat(all_t, with_model));
    if let Some(why) = shape_unknown(all_s, all_t, ctx.target.slices_listed) {
        return ctx.row(
            Outcome::Unknown,
            fs.render(),
            shapes(all_t),
            Cow::<str>::Owned(why),
        );
    }
    if all_t.slices().any(|t| t.uncounted) {
        let open = flat_uncounted(all_t, with_model);
        if let Some((o, m)) = uncounted_verdict(ctx.options.mode, &fs, &ft, &open, "slice shapes") {
            return ctx.row(o, fs.render(), with_uncounted(&ft, &open), m);
        }
    }
    let is_ci = |t: &Tally<'_>| t.profile.is_some_and(|p| p.is_compute_instance());
    let has_ci = all_s.slices().any(is_ci) || all_t.slices().any(is_ci);
    // Compute instances are compared per GPU instance, which needs the devices themselves:
    // only then are they walked again.
    let (s, t) = if has_ci {
        (all_s.slice_devices(), all_t.slice_devices())
    } else {
        (Vec::new(), Vec::new())
    };
    let all: Vec<&Device> = s.iter().chain(&t).copied().collect();
    let mode = ctx.options.mode;
    let grouped = has_ci
        && all
            .iter()
            .filter(|d| d.mig_profile.as_ref().is_some_and(|p| p.is_compute_instance()))
            .all(|d| d.gpu_instance().is_some());
    // Without grouped compute instances every slice stands on its own: the layout is the flat
    // count, and is not built again.
    let (ls, lt) = if grouped {
        (layout(&s, with_model), layout(&t, with_model))
    } else {
        (Layout::default(), Layout::default())
    };
    let (gs, gt) = if grouped {
        (ls.counted(), lt.counted())
    } else {
        (Multiset::new(), Multiset::new())
    };
    // Shown: the GPU-instance layout where compute instances are grouped, else the flat count.
    let (ds, dt) = if grouped { (&gs, &gt) } else { (&fs, &ft) };
    let v = |o, m: Text| ctx.row(o, ds.render(), dt.render(), m);
    if !compare(mode, &fs, &ft) {
        return v(Outcome::Refuse, refused(mode, &fs, &ft, "slice shapes").into());
    }
    if grouped && let Some((outcome, why)) = layouts_differ(mode, (&ls, &lt), (ds, dt)) {
        return v(outcome, why);
    }
    if has_ci && !grouped {
        return v(
            Outcome::Unknown,
            "compute-instance slices without GPU instance ids: cannot tell how they share memory".into(),
        );
    }
    v(Outcome::Pass, "same slice shapes".into())
}

/// Why the slice shapes cannot be compared, if they cannot: a slice without a profile has an
/// unknown shape, and a device of unknown kind may be such a slice; either could make up any
/// difference. A target that lists every slice (GFD's counts per profile, `slices_listed`)
/// has no slice among its devices of unknown kind: they cannot make up a shortfall its counts
/// state for certain.
fn shape_unknown(all_s: &Devices<'_>, all_t: &Devices<'_>, slices_listed: bool) -> Option<String> {
    let no_shape = |d: &Devices<'_>| d.slices().any(|t| t.profile.is_none());
    let no_kind = |d: &Devices<'_>| d.any(|t| t.kind == DeviceKind::Unknown);
    if no_shape(all_s) || no_shape(all_t) {
        return Some(format!(
            "a slice's profile is not recorded on {}",
            unknown_sides(no_shape(all_s), no_shape(all_t))
        ));
    }
    let (ks, kt) = (no_kind(all_s), no_kind(all_t) && !slices_listed);
    (ks || kt).then(|| {
        format!(
            "a device's kind is not known on {}, and it may be a slice",
            unknown_sides(ks, kt)
        )
    })
}

/// The verdict when grouped compute instances do not fit as GPU-instance layouts (`layouts`
/// of source and target, `shown` as their counts), or `None` when they do: in exact mode the
/// layouts must be equal; in offer mode every source GPU instance needs a target one of its
/// profile that holds its compute instances.
fn layouts_differ(
    mode: Mode,
    layouts: (&Layout<'_>, &Layout<'_>),
    shown: (&Multiset<'_>, &Multiset<'_>),
) -> Option<(Outcome, Text)> {
    match mode {
        Mode::Exact if shown.0 != shown.1 => Some((
            Outcome::Refuse,
            "different GPU-instance layouts (compute instances share their GPU instance's memory)".into(),
        )),
        Mode::Exact => None,
        Mode::Offer => match unplaced(&layouts.0.groups, &layouts.1.groups) {
            Some(left) if left.is_empty() => None,
            Some(left) => Some((
                Outcome::Refuse,
                format!(
                    "no GPU instance on the target can hold {} (each needs its own GPU instance of the same profile with at least those compute instances, which share its memory)",
                    left.render()
                )
                .into(),
            )),
            None => Some((
                Outcome::Unknown,
                "the GPU-instance layouts are too varied to place within miggate's work bound".into(),
            )),
        },
    }
}

fn key<'a>(d: &'a Device, with_model: bool, shape: &'a str) -> Cow<'a, str> {
    model_key(d.model(), with_model, shape)
}

fn model_key<'a>(model: Option<&'a str>, with_model: bool, shape: &'a str) -> Cow<'a, str> {
    match (with_model, model) {
        (true, Some(m)) => Cow::Owned(format!("{m} {shape}")),
        _ => Cow::Borrowed(shape),
    }
}

fn shape(d: &Device) -> &str {
    d.mig_profile.as_ref().map_or("unknown", |p| p.as_str())
}

/// A side's slices counted per shape (after the model when models are printed), of its counted
/// classes.
fn flat<'a>(devices: &Devices<'a>, with_model: bool) -> Multiset<'a> {
    let mut m = Multiset::new();
    for t in devices.slices().filter(|t| !t.uncounted) {
        let shape = t.profile.map_or("unknown", |p| p.as_str());
        m.add_n(model_key(t.model, with_model, shape), t.count);
    }
    m
}

/// A target's slice shapes whose number it does not know ([`Tally::uncounted`]), each once.
fn flat_uncounted<'a>(devices: &Devices<'a>, with_model: bool) -> Multiset<'a> {
    let mut m = Multiset::new();
    for t in devices.slices().filter(|t| t.uncounted) {
        let shape = t.profile.map_or("unknown", |p| p.as_str());
        m.add(model_key(t.model, with_model, shape));
    }
    m
}

/// The compute-instance slices of one GPU instance, compared together because they share its
/// memory.
struct Group<'a> {
    /// How it is shown: `{1c.3g.40gb, 1c.3g.40gb}`, after the model when models are printed.
    name: String,
    /// What a GPU instance that holds it must be: its GPU-instance profile (`3g.40gb`), after
    /// the model when models are printed.
    instance: String,
    /// Its compute instances' shapes.
    members: Multiset<'a>,
}

/// A side's slices: compute-instance slices grouped by the GPU instance they share, every other
/// slice on its own.
#[derive(Default)]
struct Layout<'a> {
    singles: Multiset<'a>,
    groups: Vec<Group<'a>>,
}

impl Layout<'_> {
    /// Single slices and GPU instances, counted (`3g.40gb x1, {1c.3g.40gb, 1c.3g.40gb} x1`).
    fn counted(&self) -> Multiset<'_> {
        let mut out = self.singles.clone();
        for g in &self.groups {
            out.add(g.name.as_str());
        }
        out
    }
}

fn layout<'a>(slices: &[&'a Device], with_model: bool) -> Layout<'a> {
    let mut singles = Multiset::new();
    let mut by_gi: BTreeMap<(&str, u32), Vec<&Device>> = BTreeMap::new();
    for d in slices {
        match (
            d.mig_profile.as_ref().is_some_and(|p| p.is_compute_instance()),
            d.gpu_instance(),
        ) {
            (true, Some(gi)) => by_gi.entry(gi).or_default().push(d),
            _ => singles.add(key(d, with_model, shape(d))),
        }
    }
    let mut groups = Vec::with_capacity(by_gi.len());
    for members in by_gi.values() {
        let [first, ..] = members.as_slice() else {
            continue;
        };
        // One model per GPU instance (its parent's) is the rule; should members disagree, each
        // keeps its own, so the key never depends on which member is listed first.
        let models: BTreeSet<Option<&str>> = members.iter().map(|d| d.model()).collect();
        let one_model = models.len() == 1;
        let mut names: Vec<Cow<'a, str>> = members
            .iter()
            .map(|d| {
                if one_model {
                    Cow::Borrowed(shape(d))
                } else {
                    key(d, with_model, shape(d))
                }
            })
            .collect();
        names.sort_unstable();
        let instance: BTreeSet<Cow<'a, str>> = members
            .iter()
            .map(|d| {
                let gi = d
                    .mig_profile
                    .as_ref()
                    .map_or("unknown", |p| p.gpu_instance_profile());
                key(d, with_model, gi)
            })
            .collect();
        groups.push(Group {
            name: key(
                first,
                with_model && one_model,
                &format!("{{{}}}", names.join(", ")),
            )
            .into_owned(),
            instance: instance.into_iter().collect::<Vec<_>>().join(", "),
            members: names.into_iter().collect(),
        });
    }
    Layout { singles, groups }
}

/// The source's GPU instances the target cannot give one of its own, counted; `None` when the
/// layouts are too varied to place within the matcher's work bound. Each source GPU instance
/// needs a distinct target GPU instance of the same profile (and model) holding at least its
/// compute instances: the one matcher places classes of alike GPU instances, so a large
/// inventory of alike GPU instances costs one class, not one node each.
fn unplaced<'a>(source: &'a [Group<'a>], target: &'a [Group<'a>]) -> Option<Multiset<'a>> {
    fn classes<'g>(groups: &'g [Group<'g>]) -> Vec<(&'g Group<'g>, usize)> {
        let mut by_key: BTreeMap<(&str, &str), (&Group<'_>, usize)> = BTreeMap::new();
        for g in groups {
            by_key
                .entry((g.instance.as_str(), g.name.as_str()))
                .or_insert((g, 0))
                .1 += 1;
        }
        by_key.into_values().collect()
    }
    let (sc, tc) = (classes(source), classes(target));
    // Only GPU instances of the same profile can fit: look them up, then test coverage, within
    // the matcher's budget.
    let mut by_instance: HashMap<&str, Vec<usize>> = HashMap::new();
    for (j, (t, _)) in tc.iter().enumerate() {
        by_instance.entry(t.instance.as_str()).or_default().push(j);
    }
    let mut work = 0usize;
    let mut buckets = Vec::with_capacity(sc.len());
    for (s, _) in &sc {
        let same = by_instance
            .get(s.instance.as_str())
            .map_or(&[][..], Vec::as_slice);
        work = work.saturating_add(same.len());
        if work > crate::matching::WORK_BUDGET {
            return None;
        }
        buckets.push(
            same.iter()
                .copied()
                .filter(|&j| s.members.is_covered_by(&tc[j].0.members))
                .collect::<Vec<_>>(),
        );
    }
    let assignment = assign(Problem {
        need: sc.iter().map(|(_, n)| *n).collect(),
        room: tc.iter().map(|(_, n)| *n).collect(),
        links: (0..sc.len()).map(|i| vec![i]).collect(),
        order: (0..sc.len()).collect(),
        buckets,
    })
    .ok()?;
    let mut out = Multiset::new();
    for ((g, _), n) in sc.iter().zip(&assignment.unplaced) {
        out.add_n(g.name.as_str(), *n);
    }
    Some(out)
}

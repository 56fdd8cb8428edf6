//! Small builders shared by the integration tests: manifests are written field by field so a
//! case reads like the fact it is about.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use miggate_compat::{
    CheckName, Device, GpuManifest, Host, MigStrategy, Mode, Nvidia, Options, Outcome, Pod, Quantity, Report,
    VersionText, evaluate,
};

#[allow(unused_imports)] // Not every test file that includes this module names an H100.
pub use miggate_compat::H100_NAME as H100;
pub const A100_80: &str = "NVIDIA A100-SXM4-80GB";
pub const L4: &str = "NVIDIA L4";
pub const T4: &str = "Tesla T4";
pub const A100_40: &str = "NVIDIA A100-SXM4-40GB";

/// A manifest under construction.
#[derive(Clone, Debug, Default)]
pub struct M(pub GpuManifest);

/// An empty manifest: every fact unknown.
pub fn m() -> M {
    M(GpuManifest::new())
}

impl M {
    fn host(&mut self) -> &mut Host {
        self.0.host.get_or_insert_with(Host::default)
    }
    fn pod_mut(&mut self) -> &mut Pod {
        self.0.pod.get_or_insert_with(Pod::default)
    }
    fn nv(&mut self) -> &mut Nvidia {
        self.0.nvidia.get_or_insert_with(Nvidia::default)
    }
    pub fn arch(mut self, a: &str) -> Self {
        self.host().cpu_arch = Some(a.into());
        self
    }
    pub fn kernel(mut self, k: &str) -> Self {
        self.host().kernel_version = Some(VersionText::new(k));
        self
    }
    /// A `pod` with no facts in it (so pod checks apply, and say unknown).
    pub fn pod(mut self) -> Self {
        self.pod_mut();
        self
    }
    pub fn image(mut self, i: &str) -> Self {
        self.pod_mut().image = Some(i.into());
        self
    }
    pub fn digest(mut self, d: &str) -> Self {
        self.pod_mut().image_digest = Some(d.into());
        self
    }
    pub fn cpu(mut self, q: &str) -> Self {
        self.pod_mut().cpu_limit = Some(Quantity::new(q));
        self
    }
    pub fn mem(mut self, q: &str) -> Self {
        self.pod_mut().memory_limit = Some(Quantity::new(q));
        self
    }
    pub fn mounts(mut self, ms: &[&str]) -> Self {
        self.pod_mut().mounts = Some(ms.iter().map(|s| s.to_string()).collect());
        self
    }
    pub fn requests(mut self, rs: &[(&str, &str)]) -> Self {
        let map: BTreeMap<String, Quantity> = rs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity::new(*v)))
            .collect();
        self.pod_mut().gpu_requests = Some(map);
        self
    }
    pub fn claims(mut self, cs: &[&str]) -> Self {
        self.pod_mut().resource_claims = Some(cs.iter().map(|s| s.to_string()).collect());
        self
    }
    pub fn driver(mut self, d: &str) -> Self {
        self.nv().driver_version = Some(VersionText::new(d));
        self
    }
    pub fn strategy(mut self, s: MigStrategy) -> Self {
        self.nv().mig_strategy = Some(s);
        self
    }
    pub fn devices(mut self, ds: Vec<Device>) -> Self {
        self.nv().devices = Some(ds);
        self
    }
    pub fn build(self) -> GpuManifest {
        self.0
    }
}

impl From<M> for GpuManifest {
    fn from(m: M) -> GpuManifest {
        m.0
    }
}

/// A whole GPU.
pub fn whole(uuid: &str, model: &str) -> Device {
    Device {
        uuid: Some(uuid.parse().unwrap()),
        product_name: Some(model.into()),
        ..Device::default()
    }
}

/// A device known only by its UUID (an older capture).
pub fn bare(uuid: &str) -> Device {
    Device {
        uuid: Some(uuid.parse().unwrap()),
        ..Device::default()
    }
}

/// A MIG slice with its profile.
pub fn slice(uuid: &str, model: &str, profile: &str) -> Device {
    Device {
        uuid: Some(uuid.parse().unwrap()),
        product_name: Some(model.into()),
        mig_profile: Some(profile.parse().unwrap()),
        ..Device::default()
    }
}

/// A MIG slice with its place: parent GPU, GPU instance and compute instance.
pub fn slice_in(uuid: &str, model: &str, profile: &str, parent: &str, gi: u32, ci: u32) -> Device {
    Device {
        parent_uuid: Some(parent.parse().unwrap()),
        gpu_instance_id: Some(gi),
        compute_instance_id: Some(ci),
        ..slice(uuid, model, profile)
    }
}

/// An H100 `3g.40gb` slice.
pub fn s3g(uuid: &str) -> Device {
    slice(uuid, H100, "3g.40gb")
}

/// An H100 `1g.10gb` slice.
pub fn s1g(uuid: &str) -> Device {
    slice(uuid, H100, "1g.10gb")
}

/// The peer's `gpus(models...)` helper: UUIDs `GPU-a`, `GPU-b`, … with those models.
pub fn gpus(models: &[&str]) -> Vec<Device> {
    models
        .iter()
        .enumerate()
        .map(|(i, model)| whole(&format!("GPU-{}", (b'a' + i as u8) as char), model))
        .collect()
}

/// `n` devices known only by UUID (`GPU-a`, …).
pub fn uuids(n: usize) -> Vec<Device> {
    (0..n)
        .map(|i| bare(&format!("GPU-{}", (b'a' + i as u8) as char)))
        .collect()
}

pub fn exact() -> Options {
    Options::default()
}

pub fn offer() -> Options {
    Options {
        mode: Mode::Offer,
        ..Options::default()
    }
}

pub fn strict(mut o: Options) -> Options {
    o.strict = true;
    o
}

pub fn skipping(mut o: Options, list: &str) -> Options {
    o.skip = miggate_compat::parse_skip(list).unwrap();
    o
}

/// `o` with every check waived but `kept`, whatever the registry holds.
pub fn skipping_all_but(mut o: Options, kept: CheckName) -> Options {
    o.skip = CheckName::ALL.into_iter().filter(|&c| c != kept).collect();
    o
}

pub fn check(source: impl Into<GpuManifest>, target: impl Into<GpuManifest>) -> Report {
    evaluate(&source.into(), &target.into(), &exact())
}

pub fn check_with(source: impl Into<GpuManifest>, target: impl Into<GpuManifest>, o: &Options) -> Report {
    evaluate(&source.into(), &target.into(), o)
}

/// The names of the refusing checks, in report order.
pub fn refusing(r: &Report) -> Vec<&'static str> {
    r.refusals().map(|c| c.check.as_str()).collect()
}

/// `a,b` → the list of names; `""` → empty.
pub fn names(list: &str) -> Vec<&str> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty()).collect()
}

pub fn outcome(r: &Report, c: CheckName) -> Outcome {
    r.result(c).expect("every check has a row").outcome
}

/// The row of check `c` (every report has one).
pub fn row_of(r: &Report, c: CheckName) -> &miggate_compat::CheckResult {
    r.result(c).unwrap()
}

/// Asserts the structural invariants every report keeps, and the set of refusing checks. The
/// order is the registry's, which [`assert_rows`] holds: a test never pins where a check stands.
pub fn assert_refusing(r: &Report, want: &str) {
    assert_rows(r);
    let got: BTreeSet<&str> = refusing(r).into_iter().collect();
    let want: BTreeSet<&str> = names(want).into_iter().collect();
    assert_eq!(got, want, "reason: {}\nreport: {r:#?}", r.reason);
    assert_eq!(r.compatible, want.is_empty());
}

/// The reason holds exactly `want`'s `check: source …, target …` parts (`; `-separated), in
/// the registry's order ([`assert_rows`]), whatever that order is.
pub fn assert_reason(r: &Report, want: &str) {
    assert_rows(r);
    let parts = |text: &'_ str| -> BTreeSet<String> {
        text.split("; ")
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect()
    };
    assert_eq!(parts(&r.reason), parts(want), "reason: {}", r.reason);
}

/// One row per check, in `CheckName::ALL` order; the reason lists the refusals in that order.
pub fn assert_rows(r: &Report) {
    let order: Vec<CheckName> = r.results.iter().map(|c| c.check).collect();
    assert_eq!(order, CheckName::ALL.to_vec());
    let refused: BTreeSet<&str> = r.refusals().map(|c| c.check.as_str()).collect();
    let mut last = 0;
    for part in r.reason.split("; ").filter(|p| !p.is_empty()) {
        let name = part.split(':').next().unwrap();
        assert!(
            refused.contains(name),
            "reason names `{name}` which did not refuse: {}",
            r.reason
        );
        let pos = CheckName::ALL.iter().position(|c| c.as_str() == name).unwrap();
        assert!(pos >= last, "reason out of report order: {}", r.reason);
        last = pos;
    }
    if r.compatible {
        assert!(r.reason.is_empty());
    } else {
        assert!(r.device_map.is_none(), "a refusal has no device map");
    }
}

/// A manifest where every fact the checks read is known and meets the minimums.
pub fn full(devices: Vec<Device>) -> M {
    m().arch("amd64")
        .kernel("5.15.0-1071-aws")
        .image("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1")
        .digest("sha256:9f2c4be5a0e7f4b1c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0")
        .cpu("8")
        .mem("64Gi")
        .mounts(&["/model-cache"])
        .claims(&[])
        .driver("580.82.07")
        .strategy(MigStrategy::Mixed)
        .devices(devices)
}

/// A node inventory: host and NVIDIA facts, no pod.
pub fn node(devices: Vec<Device>) -> M {
    m().arch("amd64")
        .kernel("5.15.0-1071-aws")
        .driver("580.82.07")
        .strategy(MigStrategy::Mixed)
        .devices(devices)
}

/// One line per row (check, outcome, source | target | message), for snapshots that show
/// every outcome and message of a report at a glance.
pub fn table(r: &Report) -> String {
    let mut out: Vec<String> = r
        .results
        .iter()
        .map(|c| {
            format!(
                "{:<16} {:<14} {} | {} | {}",
                c.check.as_str(),
                c.outcome.as_str(),
                c.source,
                c.target,
                c.message
            )
        })
        .collect();
    out.push(format!("compatible: {}", r.compatible));
    out.push(format!("reason: {}", r.reason));
    out.push(format!("deviceMap: {:?}", r.device_map));
    out.extend(r.warnings.iter().map(|w| format!("warning: {w}")));
    out.join("\n")
}

/// The text of `rel` under the workspace's `testdata/`; a file that cannot be read fails the
/// test, naming it.
pub fn testdata_text(rel: &str) -> String {
    let path = format!("{}/../testdata/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Reads a manifest from `testdata/manifests/`.
pub fn testdata(name: &str) -> GpuManifest {
    miggate_compat::from_str(&testdata_text(&format!("manifests/{name}")))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

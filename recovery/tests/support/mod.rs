//! What the scenario files of this crate share (`mod support;`): the fake node as it boots, the
//! layouts recorded on it, a recovery run with its mutating calls and progress lines, and the
//! final states a run must leave (`scenarios.rs`, `scenarios_vfs.rs`, `scenarios_guards.rs`).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use miggate_recovery::fake::{FakeGpu, FakeNode};
use miggate_recovery::{Bdf, Failure, Layout, Options, Outcome, Phase, apply, observe, plan};

/// The layout's first GPU.
pub const A: &str = "0000:18:00.0";
/// The layout's second GPU.
pub const B: &str = "0000:2a:00.0";
/// A third GPU of the node, which the layout does not name.
pub const C: &str = "0000:3b:00.0";

/// Per GPU: 2g@0:2, 1g@2:1, 1g@3:1, 3g@4:4, one full CI each; 16 VFs; four vGPUs.
pub fn gpu_yaml(bus: &str, uuid: &str) -> String {
    format!(
        r#"- bus: "{bus}"
  uuid: {uuid}
  migMode: enabled
  gpuInstances:
  - {{placement: "0:2", profileId: 14, profile: 2g.35gb, computeInstances: [{{profileId: 1}}]}}
  - {{placement: "2:1", profileId: 19, profile: 1g.18gb, computeInstances: [{{profileId: 0}}]}}
  - {{placement: "3:1", profileId: 19, profile: 1g.18gb, computeInstances: [{{profileId: 0}}]}}
  - {{placement: "4:4", profileId: 9, profile: 3g.71gb, computeInstances: [{{profileId: 2}}]}}
  sriovNumVfs: 16
  vfs:
  - {{index: 0, vgpuTypeId: 1415, vgpuTypeName: NVIDIA H200X-2-35C}}
  - {{index: 1, vgpuTypeId: 1414}}
  - {{index: 2, vgpuTypeId: 1414}}
  - {{index: 3, vgpuTypeId: 1416}}
"#
    )
}

/// A layout of `gpus` (bus, UUID), each as [`gpu_yaml`], with `extra` top-level lines.
pub fn layout_of(gpus: &[(&str, &str)], extra: &str) -> Layout {
    let mut text = format!("apiVersion: miggate.io/v1alpha1\nkind: RecoveryLayout\n{extra}gpus:\n");
    for (bus, uuid) in gpus {
        text.push_str(&gpu_yaml(bus, uuid));
    }
    Layout::from_yaml(&text, Path::new("test.yaml")).unwrap()
}

/// The layout of GPUs A and B.
pub fn two_gpu_layout() -> Layout {
    layout_of(&[(A, "GPU-a"), (B, "GPU-b")], "")
}

/// A node just after a reboot: MIG off, no VFs; a third GPU the layout does not name.
pub fn booted_node() -> FakeNode {
    FakeNode::new(vec![
        FakeGpu::h200(A, "GPU-a"),
        FakeGpu::h200(B, "GPU-b"),
        FakeGpu::h200(C, "GPU-c"),
    ])
}

/// Recovery's options, polling every second.
pub fn options() -> Options {
    Options {
        poll: Duration::from_secs(1),
        ..Options::default()
    }
}

/// What a recovery run returned, the mutating calls it made and its progress lines.
pub struct Ran {
    pub result: Result<Outcome, Failure>,
    pub calls: Vec<String>,
    pub lines: Vec<String>,
}

/// Recovers `node` to `layout` with [`options`].
pub fn run(node: &FakeNode, layout: &Layout) -> Ran {
    run_with(node, layout, &options())
}

/// Recovers `node` to `layout` with `opts`.
pub fn run_with(node: &FakeNode, layout: &Layout, opts: &Options) -> Ran {
    let mut lines = Vec::new();
    let result = apply(layout, node.host(), opts, &mut |p| {
        lines.push(format!(
            "{}: {}{}",
            p.step,
            p.message,
            p.took.map_or("", |_| " (done)")
        ));
    });
    Ran {
        result,
        calls: node.take_calls(),
        lines,
    }
}

/// The node matches the layout, the gate is open and says ready, nothing is left stopped.
pub fn assert_recovered(node: &FakeNode, layout: &Layout) {
    let observed = observe(&node.host()).unwrap();
    let p = plan(layout, &observed);
    assert!(p.is_noop(), "still to do: {:?} {:?}", p.steps, p.blockers);
    let s = node.lock();
    assert!(s.ready, "gate closed");
    assert_eq!(s.state.as_ref().unwrap().state, Phase::Ready);
    assert!(s.units.values().all(|a| *a), "a unit left stopped: {:?}", s.units);
    assert!(s.gpus.iter().all(|g| g.persistence), "persistence left off");
    let j = s.journal.clone().unwrap_or_default();
    assert!(
        j.stopped_units.is_empty() && j.persistence_off.is_empty() && j.step.is_none(),
        "{j:?}"
    );
}

/// The run failed at `step` saying `says`: the gate closed, the state failed there, every unit
/// and persistence restored.
pub fn assert_failed(node: &FakeNode, ran: &Ran, step: &str, says: &str) {
    let failure = ran.result.as_ref().expect_err("recovery should fail");
    assert_eq!(failure.step, step, "{failure}");
    assert!(failure.message.contains(says), "{failure}");
    let s = node.lock();
    assert!(!s.ready, "gate open after a failure");
    let state = s.state.clone().unwrap();
    assert_eq!(state.state, Phase::Failed);
    assert_eq!(state.step.as_deref(), Some(step));
    // Every unit recovery may stop is running again (the fabric manager is never stopped).
    assert!(
        s.units
            .iter()
            .all(|(u, a)| *a || u == "nvidia-fabricmanager.service"),
        "a unit left stopped: {:?}",
        s.units
    );
    assert!(s.gpus.iter().all(|g| g.persistence), "persistence left off");
}

/// The PCI address `s`.
pub fn bdf(s: &str) -> Bdf {
    Bdf::parse(s).unwrap()
}

/// A booted node whose MIG mode change stays pending until a reset, DCGM holding the GPUs.
pub fn ampere_node() -> FakeNode {
    let node = booted_node();
    {
        let mut s = node.lock();
        s.auto_activate = false;
        s.holders = vec!["nvidia-dcgm.service".to_string()];
        s.units.insert("nvidia-dcgm.service".to_string(), true);
    }
    node
}

/// A node recovered from `layout`, then its vGPUs gone and its GPU instances moved: same
/// profiles and counts, different slots (1g at 0 and 1 and 2g at 2:2, where the layout has 2g at
/// 0:2 and 1g at 2 and 3).
pub fn misplaced_node(layout: &Layout) -> FakeNode {
    let node = booted_node();
    assert!(run(&node, layout).result.is_ok());
    {
        let mut s = node.lock();
        let g = &mut s.gpus[0];
        for v in &mut g.vfs {
            v.current = 0;
            v.gi = None;
        }
        for gi in &mut g.gis {
            gi.placement = match (gi.profile_id, gi.placement.start) {
                (14, _) => miggate_recovery::Placement { start: 2, size: 2 },
                (19, 2) => miggate_recovery::Placement { start: 0, size: 1 },
                (19, 3) => miggate_recovery::Placement { start: 1, size: 1 },
                _ => gi.placement,
            };
        }
        s.ready = false;
    }
    node.take_calls();
    node
}

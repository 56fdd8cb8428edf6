//! The recovery state machine: wait for the driver, the fabric manager and persistenced, then
//! per phase re-read the node, re-plan and do that phase's steps, verify, open the gate.
//!
//! Every phase starts from what the node says now, so a run that crashed anywhere resumes by
//! running again: finished phases plan nothing. The journal carries only what the node cannot
//! say (services stopped, persistence turned off, the reboot guard). On any failure the gate
//! stays closed, the state file says where and why, and stopped services are started again.

use std::fmt;
use std::time::Duration;

use crate::bdf::Bdf;
use crate::error::Error;
use crate::journal::Journal;
use crate::layout::{Layout, MigSetting};
use crate::observe::{ObservedNode, observe};
use crate::plan::{Plan, plan};
use crate::seams::Host;
use crate::steps::StepName;
use miggate_wire::recovery::{Phase, RecoveryState};

mod instances;
mod reset;
mod sriov;
mod vgpu;
mod wait;

/// Limits and policies of a run.
#[derive(Debug, Clone)]
pub struct Options {
    /// How long to wait for the driver to list every GPU of the layout.
    pub driver_timeout: Duration,
    /// How long to wait for the fabric manager, and for [`Options::wait_units`].
    pub fabric_timeout: Duration,
    /// Units that must be active before anything is changed, e.g. the vGPU host daemons
    /// (`nvidia-vgpud.service`, `nvidia-vgpu-mgr.service`): `sriov-manage -e` fails while the
    /// vGPU manager is still starting.
    pub wait_units: Vec<String>,
    /// How long to wait for nvidia-persistenced's socket before going on without it (a reset
    /// then needs the `-pm 0` escalation).
    pub persistenced_timeout: Duration,
    /// How long MIG mode may take to show as current after a reset.
    pub mode_timeout: Duration,
    /// How long a VF's `nvidia/` directory may take to appear.
    pub vf_dir_timeout: Duration,
    /// Time between polls.
    pub poll: Duration,
    /// `sriov-manage -e` attempts per PF (the vGPU manager may still be starting).
    pub sriov_attempts: u32,
    /// Time between them.
    pub sriov_retry_delay: Duration,
    /// Units that hold GPUs and are stopped around a reset, if active (never persistenced or
    /// the fabric manager, which the reset needs).
    pub quiesce_units: Vec<String>,
    /// The fabric manager's unit.
    pub fabric_unit: String,
    /// nvidia-persistenced's unit, stopped only as the last reset escalation.
    pub persistenced_unit: String,
    /// Whether one guarded automatic reboot may replace an unsupported reset.
    pub allow_reboot: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            driver_timeout: Duration::from_secs(120),
            fabric_timeout: Duration::from_secs(120),
            wait_units: Vec::new(),
            persistenced_timeout: Duration::from_secs(10),
            mode_timeout: Duration::from_secs(30),
            vf_dir_timeout: Duration::from_secs(30),
            poll: Duration::from_secs(1),
            sriov_attempts: 5,
            sriov_retry_delay: Duration::from_secs(3),
            quiesce_units: ["nvsm.service", "nvidia-dcgm.service", "dcgm-exporter.service"]
                .map(String::from)
                .to_vec(),
            fabric_unit: "nvidia-fabricmanager.service".to_string(),
            persistenced_unit: "nvidia-persistenced.service".to_string(),
            allow_reboot: true,
        }
    }
}

/// One line of progress.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// Time since the run started.
    pub at: Duration,
    /// The step running when the line was written: the one last begun.
    pub step: StepName,
    /// What is happening (outside text already escaped).
    pub message: &'a str,
    /// Set when the step ended: how long it took.
    pub took: Option<Duration>,
}

/// How a run ended when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Verified; the gate is open. `changed` says whether anything on the node was changed.
    Ready {
        /// Whether any step ran.
        changed: bool,
    },
    /// A reboot was requested to make MIG mode effective (reset unsupported); the next boot's
    /// run continues, and fails rather than rebooting again.
    Rebooting,
}

/// Why a run failed: the step and what happened. The gate is closed.
///
/// This is a run's one failure, and [`Error`] the failure of one effect on the host: a step
/// that meets an [`Error`] fails with its message, together with what was being done
/// (`reading the node: …`) and what to do about it, which the error alone cannot say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The step that was running; the state file's `step` names it.
    pub step: StepName,
    /// What happened and what to do.
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {}: {}", self.step, self.message)
    }
}

impl std::error::Error for Failure {}

/// Why a wait's condition does not hold yet: the last one is what a wait that runs out says.
#[derive(Debug, thiserror::Error)]
enum NotReady {
    /// Reading the host failed.
    #[error(transparent)]
    Host(#[from] Error),
    /// A step that reads the host failed, with what it was reading.
    #[error("{}", .0.message)]
    Failed(Failure),
    /// The driver is not loaded yet.
    #[error("the nvidia module is not loaded")]
    ModuleNotLoaded,
    /// The driver lists some of the layout's GPUs, not all.
    #[error(
        "GPU {} of the layout not listed by the driver (it lists {})",
        joined(missing),
        joined(listed)
    )]
    GpusNotListed {
        /// The layout's GPUs the driver does not list.
        missing: Vec<Bdf>,
        /// The GPUs it lists.
        listed: Vec<Bdf>,
    },
    /// A unit that must run is not active.
    #[error("{unit} is not active")]
    UnitInactive {
        /// The unit.
        unit: String,
    },
    /// nvidia-persistenced's socket is absent.
    #[error("not there")]
    SocketAbsent,
    /// A VF without its `nvidia/` directory.
    #[error("VF {vf} (virtfn{n})")]
    VfWithoutDirectory {
        /// The VF.
        vf: Bdf,
        /// Its number under the PF (`virtfnN`).
        n: u32,
    },
    /// GPUs whose MIG mode is not current yet.
    #[error("{}", pending.iter().map(|(b, m)| format!("{b} not yet {m}")).collect::<Vec<_>>().join(", "))]
    ModePending {
        /// Each GPU and the mode it waits for.
        pending: Vec<(Bdf, MigSetting)>,
    },
}

/// Bus ids as a comma-separated list.
fn joined(buses: &[Bdf]) -> String {
    buses
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs recovery to the end: see the module documentation.
pub fn apply(
    layout: &Layout,
    host: Host<'_>,
    options: &Options,
    progress: &mut dyn FnMut(&Progress<'_>),
) -> Result<Outcome, Failure> {
    let mut run = Run {
        layout,
        host,
        options,
        progress,
        journal: Journal::default(),
        journal_read: false,
        step: StepName::Start,
        changed: false,
    };
    match run.go() {
        Ok(outcome) => Ok(outcome),
        Err(failure) => {
            // A journal that could not be read is left as it is: overwriting it would lose the
            // reboot guard and the units to restart, and the next run would go ahead as if
            // nothing had been interrupted.
            if run.journal_read {
                run.unquiesce();
            }
            // The gate must not stay open on a node that failed; when it cannot be closed, the
            // state file says so, for the operator and for `miggate publish`.
            let mut message = failure.message.clone();
            if let Err(e) = run.host.gate.close() {
                message.push_str(&format!(
                    "; the readiness file could not be removed ({e}): remove it by hand before trusting this node"
                ));
            }
            let failure = Failure {
                step: failure.step,
                message,
            };
            let _ = run.host.gate.publish(&RecoveryState {
                state: Phase::Failed,
                step: Some(failure.step.to_string()),
                message: Some(failure.message.clone()),
                updated_at: run.host.clock.utc_now(),
            });
            if run.journal_read {
                run.journal.step = None;
                let _ = run.host.store.save(&run.journal);
            }
            (run.progress)(&Progress {
                at: run.host.clock.elapsed(),
                step: failure.step,
                message: &format!("FAILED: {}", failure.message),
                took: None,
            });
            Err(failure)
        }
    }
}

struct Run<'a, 'p> {
    layout: &'a Layout,
    host: Host<'a>,
    options: &'a Options,
    progress: &'p mut dyn FnMut(&Progress<'_>),
    journal: Journal,
    /// The journal was read (or there was none): only then may it be written back.
    journal_read: bool,
    step: StepName,
    changed: bool,
}

type Flow<T> = Result<T, Failure>;

impl Run<'_, '_> {
    fn fail(&self, message: impl Into<String>) -> Failure {
        Failure {
            step: self.step,
            message: message.into(),
        }
    }

    fn say(&mut self, message: &str) {
        (self.progress)(&Progress {
            at: self.host.clock.elapsed(),
            step: self.step,
            message,
            took: None,
        });
    }

    /// Starts a step: journal, state file, progress line. Gives its start time.
    fn begin(&mut self, step: StepName, message: &str) -> Flow<Duration> {
        self.step = step;
        self.journal.step = Some(step.to_string());
        self.save()?;
        self.host
            .gate
            .publish(&RecoveryState {
                state: step.phase(),
                step: Some(step.to_string()),
                message: Some(message.to_string()),
                updated_at: self.host.clock.utc_now(),
            })
            .map_err(|e| self.fail(format!("writing the state file: {e}")))?;
        self.say(message);
        Ok(self.host.clock.elapsed())
    }

    fn end(&mut self, started: Duration, message: &str) {
        let now = self.host.clock.elapsed();
        (self.progress)(&Progress {
            at: now,
            step: self.step,
            message,
            took: Some(now.saturating_sub(started)),
        });
    }

    fn save(&self) -> Flow<()> {
        self.host
            .store
            .save(&self.journal)
            .map_err(|e| self.fail(format!("saving the journal: {e}")))
    }

    fn err(&self, what: &str) -> impl Fn(Error) -> Failure + '_ {
        let what = what.to_string();
        move |e| self.fail(format!("{what}: {e}"))
    }

    fn observe(&self) -> Flow<ObservedNode> {
        observe(&self.host).map_err(self.err("reading the node"))
    }

    /// Observes and plans; any blocker fails the run.
    fn replan(&self) -> Flow<Plan> {
        let node = self.observe()?;
        let p = plan(self.layout, &node);
        if !p.blockers.is_empty() {
            let list: Vec<String> = p.blockers.iter().map(ToString::to_string).collect();
            return Err(self.fail(list.join("; ")));
        }
        Ok(p)
    }

    /// Polls `ready` until it says yes or `limit` passes; gives the last "why not".
    fn wait(
        &mut self,
        limit: Duration,
        mut ready: impl FnMut(&Self) -> Result<(), NotReady>,
    ) -> Result<(), NotReady> {
        let start = self.host.clock.elapsed();
        loop {
            match ready(self) {
                Ok(()) => return Ok(()),
                Err(why) if self.host.clock.elapsed().saturating_sub(start) >= limit => return Err(why),
                Err(_) => self.host.clock.sleep(self.options.poll),
            }
        }
    }

    /// The run, step by step: nothing is changed before the node is settled and compared with
    /// the layout, and the gate opens only after the result is verified.
    fn go(&mut self) -> Flow<Outcome> {
        self.start()?;
        self.wait_prerequisites()?;
        if self.steps_pending()? {
            if let Some(outcome) = self.apply_steps()? {
                return Ok(outcome);
            }
        } else {
            self.forget_reboot()?;
        }
        self.verify()?;
        self.open_gate()?;
        Ok(Outcome::Ready {
            changed: self.changed,
        })
    }

    /// Closes the gate, reads the journal and restores what an interrupted run left stopped,
    /// so that the rest of the run starts from a node no earlier run is still holding.
    fn start(&mut self) -> Flow<()> {
        // Nothing is changed while the gate says ready: a gate that cannot be closed stops here.
        self.host
            .gate
            .close()
            .map_err(self.err("closing the readiness gate"))?;
        self.journal = self
            .host
            .store
            .load()
            .map_err(self.err("reading the journal"))?
            .unwrap_or_default();
        self.journal_read = true;
        let interrupted = self.journal.step.clone();
        let started = self.begin(StepName::Start, "recovery started")?;
        if let Some(step) = interrupted {
            self.say(&format!(
                "resuming after an interrupted run (it was at step {})",
                miggate_compat::escape::escape(&step)
            ));
        }
        self.restore_interrupted()?;
        self.end(started, "ok");
        Ok(())
    }

    /// An interrupted run may have left services stopped or persistence off; a run that cannot
    /// put them back must not go on as if the node were whole.
    fn restore_interrupted(&mut self) -> Flow<()> {
        if !self.journal.stopped_units.is_empty() || !self.journal.persistence_off.is_empty() {
            self.unquiesce();
            if !self.journal.stopped_units.is_empty() || !self.journal.persistence_off.is_empty() {
                return Err(self.fail("could not restore what the interrupted run stopped"));
            }
        }
        Ok(())
    }

    /// The first comparison of the node with the layout: any blocker fails the run before a
    /// change. Says whether there are steps to take.
    fn steps_pending(&mut self) -> Flow<bool> {
        let t = self.begin(
            StepName::Plan,
            "reading the node and comparing it with the layout",
        )?;
        let first = self.replan()?;
        let summary = if first.steps.is_empty() {
            "nothing to do".to_string()
        } else {
            format!("{} steps pending", first.steps.len())
        };
        self.end(t, &summary);
        Ok(!first.steps.is_empty())
    }

    /// The steps in the hardware's order. A MIG mode change that needs a reboot ends the run
    /// here, with its outcome.
    fn apply_steps(&mut self) -> Flow<Option<Outcome>> {
        self.sriov_off()?;
        if let Some(outcome) = self.mig_mode()? {
            return Ok(Some(outcome));
        }
        self.sriov_on()?;
        self.instances()?;
        self.vgpus()?;
        Ok(None)
    }

    /// The guarded reboot's record is for the mode change it was requested for: once the node
    /// needs no mode change, a later one may reboot again.
    fn forget_reboot(&mut self) -> Flow<()> {
        if self.journal.reboot_attempted {
            self.journal.reboot_attempted = false;
            self.journal.reboot_boot_id = None;
            self.save()?;
        }
        Ok(())
    }

    /// Opens the gate, clears the journal and says ready, in that order: the state file says
    /// ready only once the readiness file exists and no step is left to resume.
    fn open_gate(&mut self) -> Flow<()> {
        let t = self.begin(StepName::OpenGate, "opening the gate")?;
        self.host
            .gate
            .open()
            .map_err(self.err("creating the readiness file"))?;
        self.journal = Journal::default();
        self.save()?;
        self.host
            .gate
            .publish(&RecoveryState {
                state: Phase::Ready,
                step: None,
                message: Some(if self.changed {
                    "recovered and verified".to_string()
                } else {
                    "already matched the layout".to_string()
                }),
                updated_at: self.host.clock.utc_now(),
            })
            .map_err(self.err("writing the state file"))?;
        self.end(t, "ready");
        Ok(())
    }

    fn verify(&mut self) -> Flow<()> {
        let t = self.begin(StepName::Verify, "comparing the node with the layout")?;
        let node = self.observe()?;
        let p = plan(self.layout, &node);
        if !p.is_noop() {
            let mut list: Vec<String> = p.blockers.iter().map(ToString::to_string).collect();
            list.extend(p.steps.iter().map(|s| format!("still to do: {s}")));
            return Err(self.fail(format!("the node does not match the layout: {}", list.join("; "))));
        }
        if let Some(source) = &self.layout.manifest {
            let now = self
                .host
                .inventory
                .capture()
                .map_err(self.err("capturing the node for the compat checks"))?;
            // Under DynamicMIG the slices present are the claims' of the moment: not compared.
            let mut options = miggate_compat::Options::default();
            if self.layout.mig_managed_by.is_some() {
                options.skip.extend([
                    miggate_compat::CheckName::GPU_MODEL,
                    miggate_compat::CheckName::GPU_COUNT,
                    miggate_compat::CheckName::MIG_PARTITIONING,
                    miggate_compat::CheckName::MIG_PROFILE,
                ]);
            }
            let report =
                miggate_compat::evaluate_target(source, miggate_compat::Target::manifest(&now), &options);
            if !report.compatible {
                return Err(self.fail(format!(
                    "the node matches the layout, but checkpoints captured here would not restore (compat checks, \
                     exact mode): {}",
                    miggate_compat::escape::escape(&report.reason)
                )));
            }
            self.end(t, "node matches the layout; compat checks pass (exact mode)");
            return Ok(());
        }
        self.end(t, "node matches the layout");
        Ok(())
    }
}

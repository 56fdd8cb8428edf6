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
use crate::error::{Error, ResetFailure};
use crate::journal::Journal;
use crate::layout::{GpuInstanceLayout, Layout, MigSetting};
use crate::observe::{ObservedNode, observe, physical_gpus};
use crate::plan::{Plan, Step, plan};
use crate::seams::Host;
use crate::steps::StepName;
use miggate_wire::recovery::{Phase, RecoveryState};

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

/// The rungs of a refused reset's escalation already climbed; each is climbed at most once.
#[derive(Debug, Default)]
struct Escalation {
    /// The reset was widened to every GPU.
    widened: bool,
    /// Persistence mode was turned off on the targets.
    persistence_off: bool,
    /// nvidia-persistenced was stopped.
    persistenced_stopped: bool,
}

/// What to try after a refused reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rung {
    /// Reset every GPU together (an NVLink group, or a board whose refusal does not say why).
    Widen {
        /// Widened because the board has NVLink peers, before looking for a holder.
        board: bool,
    },
    /// Turn persistence mode off around the reset.
    PersistenceOff,
    /// Stop nvidia-persistenced for the reset.
    StopPersistenced,
    /// No reset here: the one guarded reboot, or a failure saying why not.
    Reboot,
    /// Nothing left to try.
    GiveUp,
}

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
        mut ready: impl FnMut(&Self) -> Result<(), String>,
    ) -> Result<(), String> {
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

    /// What the node must have before it is read: the driver with every GPU, the units the
    /// options name, the fabric manager and nvidia-persistenced.
    fn wait_prerequisites(&mut self) -> Flow<()> {
        self.wait_driver()?;
        self.wait_units()?;
        self.wait_fabric()?;
        self.wait_persistenced()
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

    fn wait_driver(&mut self) -> Flow<()> {
        let t = self.begin(
            StepName::WaitDriver,
            "waiting for the nvidia module and every GPU of the layout",
        )?;
        let limit = self.options.driver_timeout;
        let wanted: Vec<Bdf> = self.layout.gpus.iter().map(|g| g.bus.clone()).collect();
        self.wait(limit, |run| {
            if !run
                .host
                .sysfs
                .module_loaded("nvidia")
                .map_err(|e| e.to_string())?
            {
                return Err("the nvidia module is not loaded".to_string());
            }
            let listed = physical_gpus(&run.host).map_err(|e| e.to_string())?;
            let missing: Vec<String> = wanted
                .iter()
                .filter(|b| !listed.iter().any(|g| &g.bus == *b))
                .map(ToString::to_string)
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "GPU {} of the layout not listed by the driver (it lists {})",
                    missing.join(", "),
                    listed
                        .iter()
                        .map(|g| g.bus.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        })
        .map_err(|why| self.fail(format!("after {}s: {why}", limit.as_secs())))?;
        self.end(t, "ok");
        Ok(())
    }

    fn wait_units(&mut self) -> Flow<()> {
        if self.options.wait_units.is_empty() {
            return Ok(());
        }
        let units = self.options.wait_units.clone();
        let t = self.begin(StepName::WaitUnits, &format!("waiting for {}", units.join(", ")))?;
        let limit = self.options.fabric_timeout;
        self.wait(limit, |run| {
            for unit in &units {
                if !run.host.services.is_active(unit).map_err(|e| e.to_string())? {
                    return Err(format!("{unit} is not active"));
                }
            }
            Ok(())
        })
        .map_err(|why| self.fail(format!("after {}s: {why}", limit.as_secs())))?;
        self.end(t, "ok");
        Ok(())
    }

    fn wait_fabric(&mut self) -> Flow<()> {
        let Some(mode) = self.layout.fabric_mode else {
            return Ok(());
        };
        let t = self.begin(
            StepName::WaitFabric,
            &format!("waiting for the fabric manager in FABRIC_MODE={mode}"),
        )?;
        let unit = self.options.fabric_unit.clone();
        let limit = self.options.fabric_timeout;
        self.wait(limit, |run| {
            if !run.host.services.is_active(&unit).map_err(|e| e.to_string())? {
                return Err(format!("{unit} is not active"));
            }
            Ok(())
        })
        .map_err(|why| self.fail(format!("after {}s: {why}", limit.as_secs())))?;
        let have = self
            .host
            .sysfs
            .fabric_mode()
            .map_err(self.err("reading the fabric manager's configuration"))?;
        if have != Some(mode) {
            return Err(self.fail(format!(
                "the fabric manager runs with FABRIC_MODE={} but the layout was recorded with {mode}; SR-IOV vGPU needs \
                 the mode it was recorded with (set it in fabricmanager.cfg and restart {unit})",
                have.map_or("(unset)".to_string(), |m| m.to_string())
            )));
        }
        self.end(t, "ok");
        Ok(())
    }

    fn wait_persistenced(&mut self) -> Flow<()> {
        let t = self.begin(
            StepName::WaitPersistenced,
            "waiting for nvidia-persistenced's socket",
        )?;
        let limit = self.options.persistenced_timeout;
        let reached = self.wait(limit, |run| match run.host.sysfs.persistenced_reachable() {
            Ok(true) => Ok(()),
            Ok(false) => Err("not there".to_string()),
            Err(e) => Err(e.to_string()),
        });
        let note = match reached {
            Ok(()) => "ok".to_string(),
            Err(why) => format!("not reachable ({why}); a reset will turn persistence off around itself"),
        };
        self.end(t, &note);
        Ok(())
    }

    fn sriov_off(&mut self) -> Flow<()> {
        let p = self.replan()?;
        for step in p.steps {
            let Step::SriovDisable { pf, .. } = &step else {
                continue;
            };
            let t = self.begin(StepName::SriovDisable, &step.to_string())?;
            self.changed = true;
            let ran = self.host.sriov.disable(pf);
            let num = self
                .host
                .sysfs
                .sriov(pf)
                .map_err(self.err("reading sriov_numvfs"))?
                .map_or(0, |s| s.num);
            if num != 0 {
                let why = ran.err().map_or(String::new(), |e| format!(" ({e})"));
                return Err(self.fail(format!(
                    "{pf}: sriov_numvfs is still {num} after sriov-manage -d{why}"
                )));
            }
            self.end(t, "sriov_numvfs 0");
        }
        Ok(())
    }

    fn mig_mode(&mut self) -> Flow<Option<Outcome>> {
        let p = self.replan()?;
        let mut pending = Vec::new();
        for step in &p.steps {
            let Step::SetMigMode { gpu, mode } = step else {
                continue;
            };
            let t = self.begin(StepName::MigSetting, &step.to_string())?;
            self.changed = true;
            self.host
                .gpu
                .set_mig_mode(gpu, *mode)
                .map_err(self.err("setting MIG mode"))?;
            pending.push((gpu.clone(), *mode));
            self.end(t, "set");
        }
        let still = self.still_pending(&pending)?;
        if !still.is_empty()
            && let Some(outcome) = self.reset(&still)?
        {
            return Ok(Some(outcome));
        }
        self.forget_reboot()?;
        Ok(None)
    }

    /// The GPUs whose mode is not current yet.
    fn still_pending(&self, wanted: &[(Bdf, MigSetting)]) -> Flow<Vec<(Bdf, MigSetting)>> {
        let listed = physical_gpus(&self.host).map_err(self.err("reading MIG mode"))?;
        Ok(wanted
            .iter()
            .filter(|(bus, mode)| {
                listed
                    .iter()
                    .find(|g| &g.bus == bus)
                    .is_none_or(|g| g.mig.is_none_or(|m| m.current != *mode))
            })
            .cloned()
            .collect())
    }

    /// Resets the GPUs whose MIG mode stayed pending, escalating as the reference lists, and
    /// waits for the mode to show as current.
    fn reset(&mut self, pending: &[(Bdf, MigSetting)]) -> Flow<Option<Outcome>> {
        let gpus: Vec<Bdf> = pending.iter().map(|(b, _)| b.clone()).collect();
        let names: Vec<String> = gpus.iter().map(ToString::to_string).collect();
        let t = self.begin(
            StepName::Reset,
            &format!("MIG mode still pending on {}: reset", names.join(",")),
        )?;
        self.refuse_with_nvidia_drm()?;
        let all = self.all_gpus()?;
        self.quiesce()?;
        let peers = self.nvlink_peers()?;
        let outcome = self.reset_escalating(gpus, &all, peers.as_deref())?;
        self.unquiesce();
        if !self.journal.stopped_units.is_empty() || !self.journal.persistence_off.is_empty() {
            return Err(self.fail("the reset succeeded but stopped services could not be started again"));
        }
        if outcome.is_some() {
            return Ok(outcome);
        }
        self.await_mode(pending)?;
        self.end(t, "MIG mode current");
        Ok(None)
    }

    /// `nvidia_drm` holds the GPUs: a reset would only be refused as "in use".
    fn refuse_with_nvidia_drm(&self) -> Flow<()> {
        if self
            .host
            .sysfs
            .module_loaded("nvidia_drm")
            .map_err(self.err("reading /proc/modules"))?
        {
            return Err(self.fail(
                "nvidia_drm is loaded and holds the GPUs, so a reset would fail with \"In use by another client\": \
                 unload it (modprobe -r nvidia_drm) or keep it from loading (blacklist nvidia_drm) and run again",
            ));
        }
        Ok(())
    }

    /// Every physical GPU, in bus order: what a reset widens to.
    fn all_gpus(&self) -> Flow<Vec<Bdf>> {
        let mut all: Vec<Bdf> = physical_gpus(&self.host)
            .map_err(self.err("listing GPUs"))?
            .into_iter()
            .map(|g| g.bus)
            .collect();
        all.sort();
        Ok(all)
    }

    /// Stops the quiesce units that are active (journalled, so they are started again).
    fn quiesce(&mut self) -> Flow<()> {
        for unit in self.options.quiesce_units.clone() {
            if self
                .host
                .services
                .is_active(&unit)
                .map_err(self.err("asking systemd"))?
            {
                self.stop_unit(&unit)?;
            }
        }
        Ok(())
    }

    /// Resets `gpus`, climbing one rung of [`Escalation`] after each refusal: at most one try
    /// per rung, so the loop ends. `Some` when a reboot replaced the reset.
    fn reset_escalating(
        &mut self,
        gpus: Vec<Bdf>,
        all: &[Bdf],
        peers: Option<&str>,
    ) -> Flow<Option<Outcome>> {
        let mut targets = gpus;
        let mut climbed = Escalation::default();
        loop {
            let e = match self.host.gpu.reset(&targets) {
                Ok(()) => return Ok(None),
                Err(e) => e,
            };
            let kind = match &e {
                Error::Reset { kind, .. } => *kind,
                _ => ResetFailure::Other,
            };
            let message = miggate_compat::escape::escape(&e.to_string()).into_owned();
            match self.next_rung(kind, &climbed, targets.len() < all.len(), peers.is_some()) {
                Rung::Reboot => return self.reboot_or_fail(&message).map(Some),
                Rung::Widen { board } => {
                    self.widen(&targets, &message, peers, board)?;
                    targets = all.to_vec();
                    climbed.widened = true;
                }
                Rung::PersistenceOff => {
                    self.persistence_off(&targets, &message)?;
                    climbed.persistence_off = true;
                }
                Rung::StopPersistenced => {
                    let unit = self.options.persistenced_unit.clone();
                    self.say(&format!("{message}; stopping {unit} for the reset"));
                    self.stop_unit(&unit)?;
                    climbed.persistenced_stopped = true;
                }
                Rung::GiveUp => {
                    return Err(self.fail(format!(
                        "{message}. Find what holds the GPU (nvidia-smi --query-compute-apps=pid, DCGM, a device \
                         plugin) and add its unit to the quiesce list, or reboot"
                    )));
                }
            }
        }
    }

    /// The next rung after a refusal of `kind`. The wording of a refusal cannot say why it was
    /// refused: on a board with NVLink peers, a partial reset refused as "in use" is first
    /// tried on every GPU together (`board`).
    fn next_rung(&self, kind: ResetFailure, climbed: &Escalation, partial: bool, peers: bool) -> Rung {
        let board = kind == ResetFailure::InUse && peers;
        let widen = matches!(kind, ResetFailure::NvlinkGroup | ResetFailure::Other) || board;
        match kind {
            ResetFailure::NotSupported => Rung::Reboot,
            _ if widen && !climbed.widened && partial => Rung::Widen { board },
            ResetFailure::InUse if !climbed.persistence_off => Rung::PersistenceOff,
            ResetFailure::InUse
                if !climbed.persistenced_stopped
                    && self
                        .host
                        .services
                        .is_active(&self.options.persistenced_unit)
                        .unwrap_or(false) =>
            {
                Rung::StopPersistenced
            }
            _ => Rung::GiveUp,
        }
    }

    /// Widens a reset to every GPU, unless that would take in a GPU carrying a tenant's vGPU
    /// (its VMs may be running).
    fn widen(&mut self, targets: &[Bdf], message: &str, peers: Option<&str>, board: bool) -> Flow<()> {
        let node = self.observe()?;
        let busy: Vec<String> = node
            .gpus
            .iter()
            .filter(|g| !targets.contains(&g.bus))
            .filter_map(|g| {
                let vfs: Vec<u32> = g.active_vgpus().map(|v| v.index).collect();
                (!vfs.is_empty()).then(|| format!("{} (VFs {vfs:?})", g.bus))
            })
            .collect();
        if !busy.is_empty() {
            return Err(self.fail(format!(
                "{message}. Resetting every GPU together (NVLink group) would take in GPUs carrying active vGPUs: {}; refusing (VMs may be running): stop them first",
                busy.join(", ")
            )));
        }
        match (peers, board) {
            (Some(peers), true) => self.say(&format!(
                "{message}; the node has NVLink peers ({peers}), whose GPUs may only be reset together: resetting every GPU together before looking for a holder"
            )),
            _ => self.say(&format!("{message}; resetting every GPU together (NVLink group)")),
        }
        Ok(())
    }

    /// Turns persistence mode off on `targets` for the reset (journalled, so it is turned back
    /// on).
    fn persistence_off(&mut self, targets: &[Bdf], message: &str) -> Flow<()> {
        self.say(&format!(
            "{message}; turning persistence mode off around the reset"
        ));
        for gpu in targets {
            self.journal.persistence_off.push(gpu.clone());
            self.save()?;
            self.host
                .gpu
                .set_persistence(gpu, false)
                .map_err(self.err("turning persistence off"))?;
        }
        Ok(())
    }

    /// Waits for the MIG mode a reset made effective to show as current.
    fn await_mode(&mut self, pending: &[(Bdf, MigSetting)]) -> Flow<()> {
        let limit = self.options.mode_timeout;
        let left = self.wait(limit, |run| {
            let still = run.still_pending(pending).map_err(|f| f.message)?;
            if still.is_empty() {
                Ok(())
            } else {
                Err(still
                    .iter()
                    .map(|(b, m)| format!("{b} not yet {m}"))
                    .collect::<Vec<_>>()
                    .join(", "))
            }
        });
        left.map_err(|why| {
            self.fail(format!(
                "the reset reported success but MIG mode did not take effect: {why}"
            ))
        })
    }

    /// Whether the GPUs are NVLink peers that may have to be reset together, and how that is
    /// known: NVSwitches on the PCI bus, or a fabric manager configured (here or in the
    /// layout). `None` on a board without either.
    fn nvlink_peers(&self) -> Flow<Option<String>> {
        let switches = self
            .host
            .sysfs
            .nvswitches()
            .map_err(self.err("looking for NVSwitches"))?;
        if switches > 0 {
            return Ok(Some(format!("{switches} NVSwitches")));
        }
        let fabric = self
            .host
            .sysfs
            .fabric_mode()
            .map_err(self.err("reading the fabric manager configuration"))?;
        Ok((fabric.is_some() || self.layout.fabric_mode.is_some())
            .then(|| "a fabric manager configuration".to_string()))
    }

    fn reboot_or_fail(&mut self, message: &str) -> Flow<Outcome> {
        let boot_id = self
            .host
            .sysfs
            .boot_id()
            .map_err(self.err("reading the boot id"))?;
        if self.journal.reboot_attempted && boot_id.is_some() && self.journal.reboot_boot_id == boot_id {
            return Err(self.fail(format!(
                "{message}. The one guarded reboot was requested but the node has not rebooted since \
                 (same boot id): reboot it and recovery goes on from there; it will not request another"
            )));
        }
        if self.journal.reboot_attempted {
            return Err(self.fail(format!(
                "MIG mode change did not take effect after rebooting: {message}. Not rebooting again; set the mode \
                 by hand (nvidia-smi -mig) and reboot, or remove the layout's MIG mode"
            )));
        }
        if !self.options.allow_reboot {
            return Err(self.fail(format!(
                "{message}. Reboot the node to make MIG mode effective (reboots are not allowed to recovery)"
            )));
        }
        self.unquiesce();
        self.journal.reboot_attempted = true;
        self.journal.reboot_boot_id = boot_id;
        self.step = StepName::Reboot;
        self.journal.step = Some(self.step.to_string());
        self.save()?;
        let _ = self.host.gate.publish(&RecoveryState {
            state: self.step.phase(),
            step: Some(self.step.to_string()),
            message: Some(format!("{message}; rebooting once to make MIG mode effective")),
            updated_at: self.host.clock.utc_now(),
        });
        self.say("reset not supported: rebooting once (guarded) to make MIG mode effective");
        self.host
            .services
            .reboot()
            .map_err(self.err("requesting the reboot"))?;
        Ok(Outcome::Rebooting)
    }

    fn stop_unit(&mut self, unit: &str) -> Flow<()> {
        self.journal.stopped_units.push(unit.to_string());
        self.save()?;
        self.say(&format!("stopping {unit}"));
        self.host
            .services
            .stop(unit)
            .map_err(self.err("stopping a service"))
    }

    /// Turns persistence back on and starts stopped units; what fails stays in the journal.
    fn unquiesce(&mut self) {
        for gpu in std::mem::take(&mut self.journal.persistence_off) {
            if self.host.gpu.set_persistence(&gpu, true).is_err() {
                self.journal.persistence_off.push(gpu);
            }
        }
        for unit in std::mem::take(&mut self.journal.stopped_units).into_iter().rev() {
            if self.host.services.start(&unit).is_err() {
                self.journal.stopped_units.push(unit);
            }
        }
        let _ = self.host.store.save(&self.journal);
    }

    fn sriov_on(&mut self) -> Flow<()> {
        let p = self.replan()?;
        for step in &p.steps {
            let Step::SriovEnable { pf, num_vfs } = step else {
                continue;
            };
            let t = self.begin(StepName::SriovEnable, &step.to_string())?;
            self.changed = true;
            self.enable_vfs(pf, *num_vfs)?;
            self.end(t, &format!("sriov_numvfs {num_vfs}"));
        }
        for gpu in &self.layout.gpus {
            if gpu.sriov_num_vfs.unwrap_or(0) == 0 {
                continue;
            }
            let t = self.begin(
                StepName::VfSysfs,
                &format!("{}: waiting for every VF's nvidia/ directory", gpu.bus),
            )?;
            let limit = self.options.vf_dir_timeout;
            let pf = gpu.bus.clone();
            self.wait(limit, |run| {
                for (n, vf) in run.host.sysfs.vfs(&pf).map_err(|e| e.to_string())? {
                    if run.host.sysfs.vf_vgpu(&vf).map_err(|e| e.to_string())?.is_none() {
                        return Err(format!("VF {vf} (virtfn{n})"));
                    }
                }
                Ok(())
            })
            .map_err(|why| {
                self.fail(format!(
                    "{why} has no nvidia/ directory after {}s: is the vGPU manager (nvidia-vgpu-mgr) running?",
                    limit.as_secs()
                ))
            })?;
            self.end(t, "ok");
        }
        Ok(())
    }

    fn enable_vfs(&mut self, pf: &Bdf, want: u32) -> Flow<()> {
        let attempts = self.options.sriov_attempts.max(1);
        let mut last = String::new();
        for attempt in 1..=attempts {
            let ran = self.host.sriov.enable(pf);
            let num = self
                .host
                .sysfs
                .sriov(pf)
                .map_err(self.err("reading sriov_numvfs"))?
                .map_or(0, |s| s.num);
            if num == want {
                return Ok(());
            }
            last = match ran {
                Ok(()) => format!("sriov-manage -e exited 0 but sriov_numvfs is {num}"),
                Err(e) => format!("{e}; sriov_numvfs is {num}"),
            };
            if attempt < attempts {
                self.say(&format!("attempt {attempt}/{attempts}: {last}; retrying"));
                self.host.clock.sleep(self.options.sriov_retry_delay);
            }
        }
        Err(self.fail(format!(
            "{pf}: VFs not enabled after {attempts} attempts (expected sriov_numvfs {want}): {last}"
        )))
    }

    fn instances(&mut self) -> Flow<()> {
        let p = self.replan()?;
        for step in &p.steps {
            match step {
                Step::DestroyInstances { gpu } => {
                    let t = self.begin(StepName::DestroyInstances, &step.to_string())?;
                    self.changed = true;
                    self.host
                        .gpu
                        .destroy_instances(gpu)
                        .map_err(self.err("destroying instances"))?;
                    self.end(t, "ok");
                }
                Step::CreateInstances { gpu, instances } => {
                    let t = self.begin(StepName::CreateInstances, &step.to_string())?;
                    self.changed = true;
                    self.create(gpu, instances)?;
                    self.end(t, &format!("{} GPU instances", instances.len()));
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn create(&mut self, gpu: &Bdf, instances: &[GpuInstanceLayout]) -> Flow<()> {
        let profiles = self
            .host
            .gpu
            .gpu_instance_profiles(gpu)
            .map_err(self.err("reading the GPU instance profiles"))?;
        for gi in instances {
            let Some(want) = &gi.profile else { continue };
            match profiles.iter().find(|(id, _)| *id == gi.profile_id) {
                Some((_, have)) if have == want => {}
                found => {
                    return Err(self.fail(format!(
                        "{gpu}: GPU instance profile {} is {} on this GPU but {} in the layout (nvidia-smi mig -lgip): \
                         the layout was recorded on another GPU model",
                        gi.profile_id,
                        found.map_or("not offered".to_string(), |(_, n)| miggate_compat::escape::escape(n).into_owned()),
                        miggate_compat::escape::escape(want)
                    )));
                }
            }
        }
        let offered = self
            .host
            .gpu
            .offered_placements(gpu)
            .map_err(self.err("reading offered placements"))?;
        for gi in instances {
            let ok = offered
                .iter()
                .any(|(id, places)| *id == gi.profile_id && places.contains(&gi.placement));
            if !ok {
                return Err(self.fail(format!(
                    "{gpu}: GPU instance profile {} at {} is not offered by this GPU (nvidia-smi mig -lgipp); the layout \
                     was recorded on another GPU model or driver",
                    gi.profile_id, gi.placement
                )));
            }
        }
        for gi in instances {
            let id = self
                .host
                .gpu
                .create_gpu_instance(gpu, gi.profile_id, gi.placement)
                .map_err(self.err("creating a GPU instance"))?;
            for ci in &gi.compute_instances {
                self.host
                    .gpu
                    .create_compute_instance(gpu, id, ci.profile_id)
                    .map_err(self.err("creating a compute instance"))?;
            }
        }
        Ok(())
    }

    fn vgpus(&mut self) -> Flow<()> {
        let p = self.replan()?;
        // Each PF's VFs are listed once for the phase (the VFs do not change in it), not once
        // per VF written: a listing reads every `virtfnN` link.
        let mut listed: std::collections::BTreeMap<Bdf, std::collections::BTreeMap<u32, Bdf>> =
            std::collections::BTreeMap::new();
        for step in &p.steps {
            let Step::WriteVgpuType {
                pf,
                vf_index,
                type_id,
            } = step
            else {
                continue;
            };
            let t = self.begin(StepName::VgpuType, &step.to_string())?;
            self.changed = true;
            if !listed.contains_key(pf) {
                let vfs = self.host.sysfs.vfs(pf).map_err(self.err("listing VFs"))?;
                listed.insert(pf.clone(), vfs.into_iter().collect());
            }
            let vf = listed
                .get(pf)
                .and_then(|vfs| vfs.get(vf_index))
                .cloned()
                .ok_or_else(|| self.fail(format!("{pf}: no virtfn{vf_index}")))?;
            // Re-read per VF: the list shrinks as siblings take capacity.
            let now = self
                .host
                .sysfs
                .vf_vgpu(&vf)
                .map_err(self.err("reading the VF's nvidia/ directory"))?
                .ok_or_else(|| self.fail(format!("VF {vf} has no nvidia/ directory")))?;
            if !now.creatable.iter().any(|t| t.id == *type_id) {
                let list: Vec<String> = now
                    .creatable
                    .iter()
                    .map(|t| format!("{} ({})", t.id, miggate_compat::escape::escape(&t.name)))
                    .collect();
                return Err(self.fail(format!(
                    "VF {vf} (virtfn{vf_index}): vGPU type {type_id} is not creatable now (creatable: {}); are the GPU \
                     instances for it there?",
                    if list.is_empty() { "none".to_string() } else { list.join(", ") }
                )));
            }
            self.host
                .sysfs
                .write_vgpu_type(&vf, *type_id)
                .map_err(self.err("writing the vGPU type"))?;
            let back = self
                .host
                .sysfs
                .vf_vgpu(&vf)
                .map_err(self.err("reading the VF back"))?
                .map_or(0, |v| v.current);
            if back != *type_id {
                return Err(self.fail(format!(
                    "VF {vf}: current_vgpu_type reads {back} after writing {type_id}"
                )));
            }
            self.end(t, "ok");
        }
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

//! The MIG mode change and what makes it effective: a GPU reset, escalated rung by rung
//! when refused (widened to every GPU, persistence off, nvidia-persistenced stopped), and the
//! one guarded reboot when no reset is possible. Units stopped and persistence turned off are
//! journalled, so that a run that fails or crashes puts them back.

use super::{Flow, NotReady, Outcome, Run};
use crate::bdf::Bdf;
use crate::error::{Error, ResetFailure};
use crate::layout::MigSetting;
use crate::observe::physical_gpus;
use crate::plan::Step;
use crate::steps::StepName;
use miggate_wire::recovery::RecoveryState;

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
    pub(super) fn mig_mode(&mut self) -> Flow<Option<Outcome>> {
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
            let still = run.still_pending(pending).map_err(NotReady::Failed)?;
            if still.is_empty() {
                Ok(())
            } else {
                Err(NotReady::ModePending { pending: still })
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
    pub(super) fn unquiesce(&mut self) {
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
}

//! The waits before anything is read or changed: the driver with every GPU of the layout,
//! the units the options name, the fabric manager in the layout's mode, nvidia-persistenced.

use super::{Flow, NotReady, Run};
use crate::bdf::Bdf;
use crate::observe::physical_gpus;
use crate::steps::StepName;

impl Run<'_, '_> {
    /// What the node must have before it is read: the driver with every GPU, the units the
    /// options name, the fabric manager and nvidia-persistenced.
    pub(super) fn wait_prerequisites(&mut self) -> Flow<()> {
        self.wait_driver()?;
        self.wait_units()?;
        self.wait_fabric()?;
        self.wait_persistenced()
    }

    fn wait_driver(&mut self) -> Flow<()> {
        let t = self.begin(
            StepName::WaitDriver,
            "waiting for the nvidia module and every GPU of the layout",
        )?;
        let limit = self.options.driver_timeout;
        let wanted: Vec<Bdf> = self.layout.gpus.iter().map(|g| g.bus.clone()).collect();
        self.wait(limit, |run| {
            if !run.host.sysfs.module_loaded("nvidia")? {
                return Err(NotReady::ModuleNotLoaded);
            }
            let listed = physical_gpus(&run.host)?;
            let missing: Vec<Bdf> = wanted
                .iter()
                .filter(|b| !listed.iter().any(|g| &g.bus == *b))
                .cloned()
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(NotReady::GpusNotListed {
                    missing,
                    listed: listed.into_iter().map(|g| g.bus).collect(),
                })
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
                if !run.host.services.is_active(unit)? {
                    return Err(NotReady::UnitInactive { unit: unit.clone() });
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
            if !run.host.services.is_active(&unit)? {
                return Err(NotReady::UnitInactive { unit: unit.clone() });
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
            Ok(false) => Err(NotReady::SocketAbsent),
            Err(e) => Err(NotReady::Host(e)),
        });
        let note = match reached {
            Ok(()) => "ok".to_string(),
            Err(why) => format!("not reachable ({why}); a reset will turn persistence off around itself"),
        };
        self.end(t, &note);
        Ok(())
    }
}

//! The rest of the fake host: systemd units and the reboot, the gate's files, the clock, the
//! journal's store and what capture would see.

use std::time::Duration;

use super::{FakeError, FakeGpu, FakeNode, profile_name};
use crate::error::{Error, Result};
use crate::journal::Journal;
use crate::layout::MigSetting;
use crate::seams::{Clock, Gate, Inventory, Services, StateStore};
use miggate_wire::recovery::RecoveryState;

impl Services for FakeNode {
    fn is_active(&self, unit: &str) -> Result<bool> {
        let s = self.lock();
        s.alive()?;
        Ok(s.units.get(unit).copied().unwrap_or(false))
    }

    fn stop(&self, unit: &str) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!("systemctl stop {unit}"))?;
        s.units.insert(unit.to_string(), false);
        Ok(())
    }

    fn start(&self, unit: &str) -> Result<()> {
        let mut s = self.lock();
        s.mutate(format!("systemctl start {unit}"))?;
        s.units.insert(unit.to_string(), true);
        Ok(())
    }

    fn reboot(&self) -> Result<()> {
        let mut s = self.lock();
        s.mutate("systemctl reboot".to_string())?;
        s.reboots += 1;
        Ok(())
    }
}

impl Gate for FakeNode {
    fn publish(&self, state: &RecoveryState) -> Result<()> {
        let mut s = self.lock();
        s.alive()?;
        if s.published.last() != Some(&state.state) {
            s.published.push(state.state);
        }
        s.state = Some(state.clone());
        Ok(())
    }

    fn open(&self) -> Result<()> {
        let mut s = self.lock();
        s.alive()?;
        s.ready = true;
        Ok(())
    }

    fn close(&self) -> Result<()> {
        let mut s = self.lock();
        s.alive()?;
        if s.gate_stuck_open && s.ready {
            return Err(Error::Io {
                path: "/run/miggate/ready".into(),
                what: "removing",
                source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
            });
        }
        s.ready = false;
        Ok(())
    }
}

impl Clock for FakeNode {
    fn elapsed(&self) -> Duration {
        self.lock().now
    }

    fn sleep(&self, d: Duration) {
        let mut s = self.lock();
        s.now = s.now.saturating_add(d);
    }

    fn utc_now(&self) -> String {
        "2026-11-30T12:00:00Z".to_string()
    }
}

impl StateStore for FakeNode {
    fn load(&self) -> Result<Option<Journal>> {
        let s = self.lock();
        s.alive()?;
        Ok(s.journal.clone())
    }

    fn save(&self, journal: &Journal) -> Result<()> {
        let mut s = self.lock();
        s.alive()?;
        s.journal = Some(journal.clone());
        Ok(())
    }
}

impl Inventory for FakeNode {
    /// What capture would see: H200s in bus order, cut into their GPU instances' profiles in
    /// placement order when MIG is on, and the driver version.
    fn capture(&self) -> Result<miggate_compat::GpuManifest> {
        let s = self.lock();
        s.alive()?;
        let mut builder = miggate_compat::GpuManifest::builder()
            .node("fake-node")
            .kernel("6.8.0-60-generic")
            .cpu_arch("amd64")
            .driver(s.driver_version.clone())
            .cuda("13.0");
        let mut gpus: Vec<&FakeGpu> = s.gpus.iter().collect();
        gpus.sort_by(|a, b| a.bus.cmp(&b.bus));
        for g in gpus {
            let mut gpu = miggate_compat::Gpu::h200().pci_bus_id(format!("0000{}", g.bus));
            if g.current == MigSetting::Enabled {
                let mut gis = g.gis.clone();
                gis.sort_by_key(|gi| gi.placement);
                gpu = gpu.cut(gis.iter().filter_map(|gi| profile_name(gi.profile_id)));
            }
            builder = builder.gpu(gpu);
        }
        builder.build().map_err(|e| FakeError::Manifest(e).into())
    }
}

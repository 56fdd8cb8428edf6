//! `recover record`: the node as a layout, with the manifest capture sees when it can.

use crate::error::Result;
use crate::layout::Layout;
use crate::observe::observe;
use crate::seams::Host;

/// The fabric manager's unit, whose mode is recorded when it is active.
pub const FABRIC_UNIT: &str = "nvidia-fabricmanager.service";

/// Reads the node into a layout. The fabric manager's mode is recorded when it runs. The
/// manifest is recorded when capture succeeds; when it does not, the layout is still written,
/// without one, and the returned warning says why (verify then compares the layout only).
pub fn record(host: &Host<'_>) -> Result<(Layout, Vec<String>)> {
    let node = observe(host)?;
    let fabric_mode = if host.services.is_active(FABRIC_UNIT)? {
        host.sysfs.fabric_mode()?
    } else {
        None
    };
    let mut layout = node.to_layout(Some(host.clock.utc_now()), fabric_mode);
    let mut warnings = Vec::new();
    match host.inventory.capture() {
        Ok(manifest) => layout.manifest = Some(manifest),
        Err(e) => warnings.push(format!(
            "no manifest recorded ({e}): verify will compare the layout only, without the compat checks"
        )),
    }
    Ok((layout, warnings))
}

//! The manifest's JSON Schema, generated from the types so it cannot drift from what is read.

use crate::manifest::GpuManifest;

/// The JSON Schema of [`GpuManifest`], pretty-printed with a trailing newline. The checked-in
/// copy under `compat/schema/` is compared with this in a test.
pub fn manifest_schema() -> String {
    let schema = schemars::schema_for!(GpuManifest);
    let mut text = serde_json::to_string_pretty(&schema).unwrap_or_default();
    text.push('\n');
    text
}

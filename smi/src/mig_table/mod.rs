//! `nvidia-smi mig -lgi`, `-lci`, `-lgip`, `-lcip` (box tables) and `-lgipp` (placement lines).
//!
//! Boot recovery rebuilds a node's MIG layout after a reboot; it needs the GPU instance ids and
//! placements that exist now, and the profiles and placements a GPU offers. These tables have
//! no stable width (54 to 88 characters seen, and the `-lgip` Name column widened inside R570),
//! so rows are read as white-space separated tokens: a data row starts with the GPU index and
//! carries a profile name (`MIG 1g.10gb`); the second physical line of a two-line row holds
//! numbers only. Borders, the header and the `===` rule are recognised by content, never by
//! column.

mod instances;
mod placements;
mod profiles;
mod row_error;
mod table;

pub use instances::{ComputeInstance, GpuInstance, parse_compute_instances, parse_gpu_instances};
pub use placements::{PlacementList, parse_placements};
pub use profiles::{
    ComputeInstanceProfile, GpuInstanceProfile, parse_compute_instance_profiles, parse_gpu_instance_profiles,
};
pub use row_error::RowError;
pub use table::{MigTable, NoneFound, Placement};

//! `nvidia-smi mig -lgi/-lci/-lgip/-lcip/-lgipp` text → all five `mig_table` parsers. None may
//! panic; an `Ok` table either has rows or says why it is empty (or carries warnings).
#![no_main]

use libfuzzer_sys::fuzz_target;
use miggate_smi::mig_table::{
    parse_compute_instance_profiles, parse_compute_instances, parse_gpu_instance_profiles,
    parse_gpu_instances, parse_placements,
};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = parse_gpu_instances(&text);
    let _ = parse_compute_instances(&text);
    let _ = parse_gpu_instance_profiles(&text);
    let _ = parse_compute_instance_profiles(&text);
    let _ = parse_placements(&text);
});

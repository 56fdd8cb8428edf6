//! Every recorded nvidia-smi output in `testdata/nvidia-smi/` through its parser, pinned by an
//! insta snapshot (read and checked by hand against the file), plus counts asserted outright so
//! a snapshot accepted in a hurry cannot hide a wrong instance or profile. The `-L` corpus,
//! which is read through capture's join, is capture's `tests/parsers.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;

use insta::{assert_snapshot, assert_yaml_snapshot, glob};
use miggate_smi::Error;
use miggate_smi::query::{self, QueryRow};
use miggate_smi::{failure, list, mig_table};
use rstest::rstest;
use support::nvidia_smi;

mod support;

/// The field names a recorded query asked for, read off its header as a caller would know them.
fn header_fields(text: &str) -> Vec<String> {
    let first = text.lines().next().unwrap();
    first
        .split(',')
        .map(|c| c.split('[').next().unwrap().trim().to_string())
        .collect()
}

#[test]
fn query_corpus() {
    glob!("../../testdata/nvidia-smi/query-gpu", "*.txt", |path| {
        let text = fs::read_to_string(path).unwrap();
        let fields = header_fields(&text);
        let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
        let table = query::parse(&text, &fields).unwrap();
        assert!(table.header);
        assert_yaml_snapshot!("query", table);

        // The same rows without the header (`--format=csv,noheader`), named by the request.
        let body: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
        let noheader = query::parse(&body, &fields).unwrap();
        assert!(!noheader.header);
        assert_eq!(noheader.fields, table.fields);
        let strip = |rows: &[QueryRow]| {
            rows.iter()
                .map(|r| QueryRow { line: 0, ..r.clone() })
                .collect::<Vec<_>>()
        };
        assert_eq!(strip(&noheader.rows), strip(&table.rows));
    });
}

#[test]
fn mig_lgi_corpus() {
    glob!("../../testdata/nvidia-smi/mig-lgi", "*.txt", |path| {
        let text = fs::read_to_string(path).unwrap();
        assert_yaml_snapshot!("lgi", mig_table::parse_gpu_instances(&text).unwrap());
    });
}

#[test]
fn mig_lci_corpus() {
    glob!("../../testdata/nvidia-smi/mig-lci", "*.txt", |path| {
        let text = fs::read_to_string(path).unwrap();
        assert_yaml_snapshot!("lci", mig_table::parse_compute_instances(&text).unwrap());
    });
}

#[test]
fn mig_lgip_corpus() {
    glob!("../../testdata/nvidia-smi/mig-lgip", "*.txt", |path| {
        let text = fs::read_to_string(path).unwrap();
        assert_yaml_snapshot!("lgip", mig_table::parse_gpu_instance_profiles(&text).unwrap());
    });
}

#[test]
fn mig_lgipp_corpus() {
    glob!("../../testdata/nvidia-smi/mig-lgipp", "*.txt", |path| {
        let text = fs::read_to_string(path).unwrap();
        assert_yaml_snapshot!("lgipp", mig_table::parse_placements(&text).unwrap());
    });
}

#[test]
fn mig_lcip_corpus() {
    glob!("../../testdata/nvidia-smi/mig-lcip", "*.txt", |path| {
        let text = fs::read_to_string(path).unwrap();
        assert_yaml_snapshot!("lcip", mig_table::parse_compute_instance_profiles(&text).unwrap());
    });
}

/// Each recorded failure: what `classify` makes of it, and what the `-L` parser returns for it.
#[test]
fn errors_corpus() {
    glob!("../../testdata/nvidia-smi/errors", "*.txt", |path| {
        let text = fs::read_to_string(path).unwrap();
        let classified = match failure::classify(&text) {
            Some(e) => format!("{e:?}"),
            None => "not a known failure".to_string(),
        };
        let as_list = match list::parse(&text) {
            Ok(l) => format!("Ok({l:?})"),
            Err(e) => format!("Err({e:?})"),
        };
        assert_snapshot!(
            "errors",
            format!("classify: {classified}\nlist::parse: {as_list}\n")
        );
    });
}

#[rstest]
#[case("mig-lgi/a100-40gb-3-2-1-1-nvidia-mig-guide.txt", &[(19, 7, 0, 1), (19, 8, 1, 1), (14, 4, 2, 2), (9, 2, 4, 4)])]
#[case("mig-lgi/h100-nvl-4gi-opennebula.txt", &[(19, 13, 6, 1), (14, 3, 0, 2), (14, 4, 2, 2), (14, 5, 4, 2)])]
#[case("mig-lgi/rtx-pro-6000-2g48gb-2x1g24gb-wide.txt", &[(14, 5, 6, 3), (14, 6, 9, 3), (5, 1, 0, 6)])]
#[case("mig-lgi/a30-none-not-found.txt", &[])]
fn gpu_instance_ids_and_placements(#[case] file: &str, #[case] want: &[(u32, u32, u32, u32)]) {
    let table = mig_table::parse_gpu_instances(&nvidia_smi(file)).unwrap();
    let got: Vec<_> = table
        .rows
        .iter()
        .map(|r| {
            let p = r.placement.unwrap();
            (r.profile_id, r.instance_id, p.start, p.size)
        })
        .collect();
    assert_eq!(got, want);
    assert!(table.warnings.is_empty(), "{:?}", table.warnings);
}

#[rstest]
#[case("mig-lgip/a30-r535.txt", 5)]
#[case("mig-lgip/h100-pcie-80gb-r525-scaleway.txt", 7)]
#[case("mig-lgip/h100-pcie-80gb-r570-wide-table.txt", 7)]
#[case("mig-lgip/rtx-pro-6000-maxq-r580.txt", 11)]
fn gpu_instance_profiles_read_both_lines(#[case] file: &str, #[case] profiles: usize) {
    let table = mig_table::parse_gpu_instance_profiles(&nvidia_smi(file)).unwrap();
    assert_eq!(table.rows.len(), profiles);
    assert!(table.warnings.is_empty(), "{:?}", table.warnings);
    for r in &table.rows {
        assert!(r.profile.is_some(), "{}", r.name);
        assert!(
            r.sm.is_some() && r.enc.is_some() && r.ce.is_some() && r.ofa.is_some(),
            "{r:?}"
        );
    }
}

#[test]
fn lgip_widths_agree_except_for_gib() {
    let narrow =
        mig_table::parse_gpu_instance_profiles(&nvidia_smi("mig-lgip/h100-pcie-80gb-r525-scaleway.txt"))
            .unwrap();
    let wide =
        mig_table::parse_gpu_instance_profiles(&nvidia_smi("mig-lgip/h100-pcie-80gb-r570-wide-table.txt"))
            .unwrap();
    let key = |t: &mig_table::MigTable<mig_table::GpuInstanceProfile>| {
        t.rows
            .iter()
            .map(|r| (r.name.clone(), r.id, r.instances_total, r.sm, r.ce))
            .collect::<Vec<_>>()
    };
    assert_eq!(key(&narrow), key(&wide));
    assert_eq!(narrow.rows[0].memory_gib, "9.62");
    assert_eq!(wide.rows[0].memory_gib, "9.75");
}

#[test]
fn failure_outputs_are_typed_errors_for_every_parser() {
    let text = nvidia_smi("errors/mig-lci-insufficient-permissions.txt");
    assert!(matches!(
        mig_table::parse_compute_instances(&text),
        Err(Error::InsufficientPermissions { output }) if output == text
    ));
    let text = nvidia_smi("errors/no-devices-were-found-rtx5090-open-kernel-862.txt");
    assert!(matches!(list::parse(&text), Err(Error::NoDevices { .. })));
    assert!(matches!(
        query::parse(&text, &query::FIELDS),
        Err(Error::NoDevices { .. })
    ));
    let text = nvidia_smi("errors/nvidia-smi-failed-communicate-driver.txt");
    assert!(matches!(list::parse(&text), Err(Error::DriverUnreachable { .. })));
    assert!(matches!(
        mig_table::parse_gpu_instances(&text),
        Err(Error::DriverUnreachable { .. })
    ));
    assert!(matches!(
        mig_table::parse_placements(&text),
        Err(Error::DriverUnreachable { .. })
    ));
    let text = nvidia_smi("errors/unable-device-handle-space-form-2015.txt");
    assert!(matches!(list::parse(&text), Err(Error::DeviceHandle { .. })));
    let text = nvidia_smi("errors/dgi-in-use-by-another-client-rtx-pro-6000.txt");
    assert!(matches!(
        failure::classify(&text),
        Some(Error::InUseByAnotherClient { .. })
    ));
}

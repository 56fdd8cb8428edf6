//! The tricky cases, each a few lines of inline text: failure messages, `--query-gpu` rows and
//! MIG tables as the corpus showed they can be printed. `-L` and the join are capture's
//! `tests/parsers_cases.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use miggate_smi::failure;
use miggate_smi::list;
use miggate_smi::mig_table::{self, NoneFound, Placement};
use miggate_smi::query::{self, QueryTable};
use miggate_smi::{Error, Warning};
use rstest::rstest;

fn rows(text: &str) -> QueryTable {
    query::parse(text, &query::FIELDS).unwrap()
}

// ---------------------------------------------------------------- failures

#[rstest]
#[case::no_devices_with_period("No devices were found.\n", "NoDevices")]
#[case::no_devices_without_period("No devices were found", "NoDevices")]
#[case::driver(
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n",
    "DriverUnreachable"
)]
#[case::nvml_mismatch(
    "Failed to initialize NVML: Driver/library version mismatch\n",
    "DriverUnreachable"
)]
#[case::nvml_permissions(
    "Failed to initialize NVML: Insufficient Permissions\n",
    "InsufficientPermissions"
)]
#[case::handle(
    "Unable to determine the device handle for gpu 0000:3B:00.0: GPU is lost.  Reboot the system to recover this GPU\n",
    "DeviceHandle"
)]
#[case::handle_among_good_lines(
    "GPU 0: X (UUID: GPU-1)\nUnable to determine the device handle for GPU 0000:0B:00.0: Unknown Error\n",
    "DeviceHandle"
)]
#[case::in_use(
    "Unable to destroy GPU instance ID  3 from GPU  0: In use by another client\n",
    "InUseByAnotherClient"
)]
#[case::permissions(
    "Failed to display GPU instances: Insufficient Permissions\n",
    "InsufficientPermissions"
)]
fn failure_messages_become_typed_errors(#[case] text: &str, #[case] want: &str) {
    let e = failure::classify(text).unwrap();
    assert!(format!("{e:?}").starts_with(want), "{e:?}");
    assert!(
        format!("{e:?}").contains(&format!("{:?}", text)),
        "original text kept: {e:?}"
    );
    let from_list = list::parse(text).unwrap_err();
    assert!(format!("{from_list:?}").starts_with(want));
    let from_lgi = mig_table::parse_gpu_instances(text).unwrap_err();
    assert!(format!("{from_lgi:?}").starts_with(want));
}

#[rstest]
#[case("GPU 0: NVIDIA H100 (UUID: GPU-1)\n")]
#[case("Enabled MIG Mode for GPU 00000000:36:00.0\nAll done.\n")]
#[case("index, mig.mode.current\n0, Enabled\n")]
fn ordinary_output_is_not_a_failure(#[case] text: &str) {
    assert!(failure::classify(text).is_none());
}

// ---------------------------------------------------------------- --query-gpu

#[rstest]
#[case::header_with_units(
    "index, uuid, name, pci.bus_id, memory.total [MiB], compute_cap, driver_version, mig.mode.current, mig.mode.pending\n0, GPU-1, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 81559 MiB, 9.0, 580.82.07, Enabled, Disabled\n",
    true
)]
#[case::noheader(
    "0, GPU-1, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 81559 MiB, 9.0, 580.82.07, Enabled, Disabled\n",
    false
)]
#[case::noheader_nounits_crlf(
    "0, GPU-1, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 81559, 9.0, 580.82.07, Enabled, Disabled\r\n",
    false
)]
#[case::header_nounits(
    "index, uuid, name, pci.bus_id, memory.total [MiB], compute_cap, driver_version, mig.mode.current, mig.mode.pending\n0, GPU-1, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 81559, 9.0, 580.82.07, Enabled, Disabled\n",
    true
)]
fn query_rows_read_with_or_without_header_and_units(#[case] text: &str, #[case] header: bool) {
    let t = rows(text);
    assert_eq!(t.header, header);
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    let r = &t.rows[0];
    assert_eq!(r.index, Some(0));
    assert_eq!(r.uuid.as_deref(), Some("GPU-1"));
    assert_eq!(r.name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(r.pci_bus_id.as_deref(), Some("00000000:18:00.0"));
    assert_eq!(r.memory_total_mib, Some(81559));
    assert_eq!(r.compute_cap.as_deref(), Some("9.0"));
    assert_eq!(r.driver_version.as_deref(), Some("580.82.07"));
    assert_eq!(
        (r.mig_mode_current, r.mig_mode_pending),
        (Some(true), Some(false))
    );
}

#[rstest]
#[case("[N/A]")]
#[case("N/A")]
#[case("[Not Supported]")]
#[case("Not Supported")]
#[case("")]
fn not_available_values_are_unknown_without_warning(#[case] v: &str) {
    let t = rows(&format!(
        "0, GPU-1, Tesla T4, 00000000:18:00.0, {v}, {v}, 535.1, {v}, {v}\n"
    ));
    let r = &t.rows[0];
    assert_eq!((r.memory_total_mib, r.compute_cap.as_deref()), (None, None));
    assert_eq!((r.mig_mode_current, r.mig_mode_pending), (None, None));
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
}

#[test]
fn other_bracketed_values_are_unknown_with_a_warning() {
    let t = rows("0, GPU-1, X, 0:1:0.0, [Unknown Error], 9.0, 580.1, [GPU requires reset], Enabled\n");
    assert_eq!(t.rows[0].memory_total_mib, None);
    assert_eq!(t.rows[0].mig_mode_current, None);
    assert_eq!(t.warnings.len(), 2, "{:?}", t.warnings);
}

#[test]
fn a_header_that_differs_from_the_request_wins_with_a_warning() {
    let t = query::parse(
        "gpu_name, mig.mode.current\nTesla T4, [N/A]\n",
        &["name", "index"],
    )
    .unwrap();
    assert_eq!(t.fields, ["name", "mig.mode.current"]);
    assert_eq!(t.rows[0].name.as_deref(), Some("Tesla T4"));
    assert_eq!(t.warnings.len(), 1);
}

#[test]
fn aliases_name_the_same_fields() {
    let t = query::parse(
        "A100, GPU-1, 0000:3B:00.0\n",
        &["gpu_name", "gpu_uuid", "gpu_bus_id"],
    )
    .unwrap();
    assert_eq!(t.fields, ["name", "uuid", "pci.bus_id"]);
    assert_eq!(t.rows[0].uuid.as_deref(), Some("GPU-1"));
}

#[test]
fn rows_with_the_wrong_number_of_values_are_skipped() {
    let t = rows("0, GPU-1, X, 0:1:0.0, 1 MiB, 9.0, 580.1, Enabled, Enabled\n0, GPU-2, X\n");
    assert_eq!(t.rows.len(), 1);
    assert!(t.warnings[0].to_string().contains("3 values for 9 fields"));
    assert!(
        matches!(
            &t.warnings[0],
            Warning::QueryRowSkipped { line: 2, values: 3, fields: 9, text } if text == "0, GPU-2, X"
        ),
        "{:?}",
        t.warnings
    );
    assert!(matches!(
        query::parse("0, GPU-2, X\n", &query::FIELDS),
        Err(Error::Parse { line: 1, .. })
    ));
}

#[test]
fn no_header_and_no_request_is_an_error() {
    assert!(matches!(
        query::parse("0, Enabled\n", &[]),
        Err(Error::Parse { .. })
    ));
    assert!(matches!(
        query::parse("", &query::FIELDS),
        Err(Error::Parse { .. })
    ));
}

#[rstest]
#[case::compute_cap(
    "Field \"compute_cap\" is not a valid field to query.\n\n",
    Some("compute_cap")
)]
#[case::dotted(
    "Field \"clocks.applications.sm\" is not a valid field to query.",
    Some("clocks.applications.sm")
)]
#[case::curly_quotes(
    "Field “mig.mode.pending” is not a valid field to query.",
    Some("mig.mode.pending")
)]
#[case::no_quotes("field compute_cap is not a valid field to query", Some("compute_cap"))]
#[case::ordinary("index, compute_cap\n0, 9.0\n", None)]
#[case::other_error(
    "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n",
    None
)]
fn a_rejected_query_field_is_named(#[case] text: &str, #[case] want: Option<&str>) {
    assert_eq!(query::rejected_field(text).as_deref(), want);
    if let Some(field) = want {
        match query::parse(text, &query::FIELDS) {
            Err(Error::QueryFieldRejected { field: f, output }) => {
                assert_eq!(f, field);
                assert_eq!(output, text);
            }
            other => panic!("{other:?}"),
        }
    }
}

// ---------------------------------------------------------------- mig tables

#[test]
fn lgi_reads_several_gpus_and_crlf() {
    let text = "+---------------------------------------------------------+\r\n\
| GPU instances:                                          |\r\n\
| GPU   Name               Profile  Instance   Placement  |\r\n\
|                            ID       ID       Start:Size |\r\n\
|=========================================================|\r\n\
|   0  MIG 1g.24gb+me.all    65        5          6:3     |\r\n\
+---------------------------------------------------------+\r\n\
|   1  MIG 7g.80gb            0        0          0:8     |\r\n\
+---------------------------------------------------------+\r\n";
    let t = mig_table::parse_gpu_instances(text).unwrap();
    assert_eq!(t.rows.len(), 2);
    assert_eq!(t.rows[0].name, "1g.24gb+me.all");
    assert_eq!(t.rows[0].placement, Some(Placement { start: 6, size: 3 }));
    assert_eq!(
        (t.rows[1].gpu, t.rows[1].profile_id, t.rows[1].instance_id),
        (1, 0, 0)
    );
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
}

#[rstest]
#[case::lgi_not_found("No GPU instances found: Not Found\n", Some(NoneFound::NotFound))]
#[case::mig_off("No MIG-enabled devices found.\n", Some(NoneFound::NoMigEnabledDevices))]
fn empty_listings_say_why(#[case] text: &str, #[case] want: Option<NoneFound>) {
    let gi = mig_table::parse_gpu_instances(text).unwrap();
    assert_eq!((gi.rows.len(), gi.none_found), (0, want));
    let ci = mig_table::parse_compute_instances(text).unwrap();
    assert_eq!((ci.rows.len(), ci.none_found), (0, want));
    let gip = mig_table::parse_gpu_instance_profiles(text).unwrap();
    assert_eq!((gip.rows.len(), gip.none_found), (0, want));
    let gipp = mig_table::parse_placements(text).unwrap();
    assert_eq!((gipp.rows.len(), gipp.none_found), (0, want));
}

#[test]
fn a_table_whose_rows_cannot_be_read_is_an_error_not_an_empty_list() {
    let text = "+----+\n| GPU instances: |\n|====|\n|   0  MIG 1g.5gb   x   7   0:1 |\n+----+\n";
    match mig_table::parse_gpu_instances(text) {
        Err(Error::Parse { line, .. }) => assert_eq!(line, 4),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        mig_table::parse_gpu_instances("hello\n"),
        Err(Error::Parse { line: 1, .. })
    ));
    assert!(matches!(
        mig_table::parse_placements("hello\n"),
        Err(Error::Parse { line: 1, .. })
    ));
}

#[test]
fn a_bad_row_among_good_ones_is_skipped_with_a_warning() {
    let text = "|   0  MIG 1g.5gb  19  7  0:1 |\n|   0  MIG 1g.5gb  19  8  zero |\n";
    let t = mig_table::parse_gpu_instances(text).unwrap();
    assert_eq!(t.rows.len(), 1);
    assert!(t.warnings[0].to_string().contains("line 2"), "{:?}", t.warnings);
    assert!(
        matches!(
            &t.warnings[0],
            Warning::TableRowSkipped { line: 2, why: mig_table::RowError::NotPlacement { token }, .. } if token == "zero"
        ),
        "{:?}",
        t.warnings
    );
}

#[test]
fn placements_singular_and_compute_instance_forms() {
    let text = "GPU  0 Profile ID  5 Placement : {0}:4\nGPU  1 GI  2 Profile ID  0 Placements: {0,1,2}:1\nGPU  0 Profile ID 19 Placements: {}:1\n";
    let t = mig_table::parse_placements(text).unwrap();
    assert_eq!(t.rows.len(), 3);
    assert_eq!(t.rows[0].placements, [Placement { start: 0, size: 4 }]);
    assert_eq!(
        (
            t.rows[1].gpu,
            t.rows[1].gpu_instance_id,
            t.rows[1].placements.len()
        ),
        (1, Some(2), 3)
    );
    assert!(t.rows[2].placements.is_empty());
}

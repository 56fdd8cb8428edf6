//! The tricky cases, each a few lines of inline text: what the corpus showed `-L` can print, and
//! what the join must make of it. Failure messages, query rows and MIG tables are
//! `miggate-smi`'s `tests/parsers_cases.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use miggate_capture::{NvidiaFacts, assemble};
use miggate_compat::{DeviceKind, MigMode};
use miggate_smi::Error;
use miggate_smi::list::{self, Listing};
use miggate_smi::query::{self, QueryTable};
use rstest::rstest;

const GPU_A: &str = "GPU-932bfb2c-849a-2a22-1e84-9eff6bc02b39";
const GPU_B: &str = "GPU-d8594bd4-0fc3-8595-e355-7c98138f3b95";
const MIG_1: &str = "MIG-0929581a-2be6-5dec-bf34-0954c6c529a6";
const MIG_2: &str = "MIG-3adbed3a-d03d-549f-a016-ba1fd7359f23";

fn listing(text: &str) -> Listing {
    list::parse(text).unwrap()
}

fn rows(text: &str) -> QueryTable {
    query::parse(text, &query::FIELDS).unwrap()
}

fn profiles(l: &Listing) -> Vec<Vec<String>> {
    l.gpus
        .iter()
        .map(|g| {
            g.slices
                .iter()
                .map(|s| s.profile.as_ref().map_or("?".to_string(), ToString::to_string))
                .collect()
        })
        .collect()
}

// ---------------------------------------------------------------- nvidia-smi -L

#[rstest]
#[case::long_profile_overflowing_its_column(
    "GPU 0: NVIDIA RTX PRO 6000 Blackwell Server Edition (UUID: GPU-1)\n  MIG 1g.24gb+me.all Device  0: (UUID: MIG-1)\n",
    &["1g.24gb+me.all"]
)]
#[case::long_profile_running_into_device(
    "GPU 0: NVIDIA RTX PRO 6000 (UUID: GPU-1)\n  MIG 1g.24gb+me.allDevice  0: (UUID: MIG-1)\n",
    &["1g.24gb+me.all"]
)]
#[case::suffixes_and_compute_instances(
    "GPU 0: X (UUID: GPU-1)\n  MIG 1g.24gb-me     Device  0: (UUID: MIG-1)\n  MIG 2g.48gb+gfx    Device  1: (UUID: MIG-2)\n  MIG 1c.3g.40gb  Device  2: (UUID: MIG-3)\n",
    &["1g.24gb-me", "2g.48gb+gfx", "1c.3g.40gb"]
)]
#[case::indent_0_and_4_leading_space_trailing_spaces(
    " GPU 0: X (UUID: GPU-1)   \nMIG 1g.10gb     Device  0: (UUID: MIG-1)  \n    MIG 1g.10gb     Device  1: (UUID: MIG-2)\t\n",
    &["1g.10gb", "1g.10gb"]
)]
#[case::crlf_and_leading_blank_lines(
    "\r\n\r\nGPU 0: X (UUID: GPU-1)\r\n  MIG 3g.40gb     Device  0: (UUID: MIG-1)\r\n\r\n",
    &["3g.40gb"]
)]
#[case::legacy_single_space_layout(
    "GPU 0: A100-SXM4-40GB (UUID: GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f)\n  MIG 1g.5gb Device 0: (UUID: MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/7/0)\n",
    &["1g.5gb"]
)]
fn mig_lines_are_split_on_white_space(#[case] text: &str, #[case] want: &[&str]) {
    let l = listing(text);
    assert_eq!(l.gpus.len(), 1);
    assert_eq!(
        profiles(&l),
        vec![want.iter().map(ToString::to_string).collect::<Vec<_>>()]
    );
    assert!(l.orphans.is_empty());
    assert!(l.warnings.is_empty(), "{:?}", l.warnings);
    for s in &l.gpus[0].slices {
        assert!(s.uuid.as_deref().unwrap().starts_with("MIG-"));
    }
}

#[test]
fn gpu_name_is_everything_up_to_the_last_uuid_part() {
    let l = listing("GPU 3: NVIDIA GH200 480GB (rev a1) (UUID: GPU-1)\n");
    assert_eq!(l.gpus[0].index, 3);
    assert_eq!(l.gpus[0].name.as_deref(), Some("NVIDIA GH200 480GB (rev a1)"));
    assert_eq!(l.gpus[0].uuid.as_deref(), Some("GPU-1"));
}

#[test]
fn concatenated_outputs_are_deduplicated_with_warnings() {
    let text = format!(
        "GPU 0: H (UUID: {GPU_A})\nMIG 1g.10gb     Device  0: (UUID: {MIG_1})\n\
         GPU 0: H (UUID: {GPU_A})\nMIG 1g.10gb     Device  0: (UUID: {MIG_2})\n\
         GPU 0: H (UUID: {GPU_A})\nMIG 1g.10gb     Device  0: (UUID: {MIG_1})\n"
    );
    let l = listing(&text);
    assert_eq!(l.gpus.len(), 1);
    let uuids: Vec<_> = l.gpus[0].slices.iter().map(|s| s.uuid.clone().unwrap()).collect();
    assert_eq!(uuids, [MIG_1, MIG_2]);
    assert_eq!(l.warnings.len(), 3, "{:?}", l.warnings);
    assert!(
        l.warnings[0].to_string().contains("line 3") && l.warnings[0].to_string().contains("listed again")
    );
    assert!(l.warnings[2].to_string().contains(MIG_1) && l.warnings[2].to_string().contains("dropped"));

    let facts = assemble(
        Some(&l),
        &rows(&format!(
            "0, {GPU_A}, H, 00000000:01:00.0, 81559 MiB, 9.0, 525.105.17, Enabled, Enabled\n"
        )),
    );
    assert_eq!(facts.devices.unwrap().len(), 2);
    assert!(
        facts
            .warnings
            .iter()
            .any(|w| w.to_string().contains("listed again"))
    );
}

#[test]
fn same_index_with_different_uuids_keeps_both_and_warns() {
    let l = listing(&format!("GPU 0: H (UUID: {GPU_A})\nGPU 0: H (UUID: {GPU_B})\n"));
    assert_eq!(l.gpus.len(), 2);
    assert!(
        l.warnings[0].to_string().contains("different UUID"),
        "{:?}",
        l.warnings
    );
}

#[test]
fn stripped_uuids_leave_unknowns_not_guesses() {
    let l = listing("GPU 0: NVIDIA H100\nGPU 1: NVIDIA H100\n  MIG 1g.12gb     Device  0:\n");
    assert_eq!(l.gpus.len(), 2);
    assert_eq!(l.gpus[0].uuid, None);
    assert_eq!(l.gpus[0].name.as_deref(), Some("NVIDIA H100"));
    let s = &l.gpus[1].slices[0];
    assert_eq!((s.uuid.as_deref(), s.device), (None, Some(0)));
    assert_eq!(s.profile.as_ref().unwrap().as_str(), "1g.12gb");
    assert_eq!(l.warnings.len(), 3);
}

#[test]
fn legacy_uuid_gives_gpu_and_compute_instance_ids() {
    let l = listing(
        "GPU 0: A100-PCIE-40GB (UUID: GPU-fb8bbc70-d551-45f9-43d4-9734f9cddb2c)\n  MIG 3g.20gb Device 1: (UUID: MIG-GPU-fb8bbc70-d551-45f9-43d4-9734f9cddb2c/2/1)\n",
    );
    let s = &l.gpus[0].slices[0];
    assert_eq!((s.gpu_instance_id, s.compute_instance_id), (Some(2), Some(1)));
    assert_eq!(
        s.legacy_parent.as_deref(),
        Some("GPU-fb8bbc70-d551-45f9-43d4-9734f9cddb2c")
    );

    let facts = assemble(
        Some(&l),
        &rows(
            "0, GPU-fb8bbc70-d551-45f9-43d4-9734f9cddb2c, A100-PCIE-40GB, 00000000:3B:00.0, 40960 MiB, 8.0, 460.32.03, Enabled, Enabled\n",
        ),
    );
    let d = &facts.devices.unwrap()[0];
    assert_eq!((d.gpu_instance_id, d.compute_instance_id), (Some(2), Some(1)));
    assert_eq!(
        d.parent_uuid.as_deref(),
        Some("GPU-fb8bbc70-d551-45f9-43d4-9734f9cddb2c")
    );
    assert_eq!(d.kind(), DeviceKind::Slice);
}

#[test]
fn legacy_uuid_naming_another_parent_is_kept_under_the_gpu_above_with_a_warning() {
    let l = listing("GPU 0: X (UUID: GPU-aaaa)\n  MIG 1g.5gb Device 0: (UUID: MIG-GPU-bbbb/7/0)\n");
    assert_eq!(l.gpus[0].slices.len(), 1);
    assert!(l.warnings[0].to_string().contains("GPU-bbbb"), "{:?}", l.warnings);
}

#[test]
fn hand_edited_uuid_with_a_space_is_repaired_with_a_warning() {
    let l = listing(
        "GPU 0: X (UUID: GPU-1)\n  MIG 1g.5gb Device 0: (UUID: MIG- c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)\n",
    );
    let s = &l.gpus[0].slices[0];
    assert_eq!(
        s.uuid.as_deref(),
        Some("MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f")
    );
    assert_eq!(l.warnings.len(), 1);
}

#[test]
fn orphan_mig_lines_stay_slices_with_unknown_parent() {
    let l = listing(&format!("  MIG 3g.48gb     Device  0: (UUID: {MIG_1})\n"));
    assert!(l.gpus.is_empty());
    assert_eq!(l.orphans.len(), 1);
    assert!(l.warnings[0].to_string().contains("no GPU line above it"));

    let facts = assemble(Some(&l), &QueryTable::default());
    let devices = facts.devices.unwrap();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].kind(), DeviceKind::Slice);
    assert_eq!(
        (
            devices[0].parent_uuid.as_deref(),
            devices[0].product_name.as_deref()
        ),
        (None, None)
    );
    assert!(
        facts
            .warnings
            .iter()
            .any(|w| w.to_string().contains("parent unknown"))
    );
}

#[test]
fn orphan_legacy_slice_finds_its_parent_by_uuid() {
    let parent = "GPU-fb8bbc70-d551-45f9-43d4-9734f9cddb2c";
    let l = listing(&format!("  MIG 3g.20gb Device 0: (UUID: MIG-{parent}/1/0)\n"));
    let facts = assemble(
        Some(&l),
        &rows(&format!(
            "4, {parent}, A100-PCIE-40GB, 0:3B:00.0, 40960 MiB, 8.0, 460.32.03, Enabled, Enabled\n"
        )),
    );
    let devices = facts.devices.unwrap();
    // The parent offers no device of its own (MIG on, no nested slices); the orphan is its slice.
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].parent_uuid.as_deref(), Some(parent));
    assert_eq!(devices[0].product_name.as_deref(), Some("A100-PCIE-40GB"));
    assert_eq!(devices[0].gpu_instance_id, Some(1));
}

#[rstest]
#[case::annotated_line(
    "GPU 0: X (UUID: GPU-1)\nANNOTATED: the next slice was added later\n  MIG 1g.5gb Device 0: (UUID: MIG-1)\n",
    1,
    1
)]
#[case::pci_bus_id_is_not_an_index("GPU 00000000:01:00.0: Reset\nGPU 0: X (UUID: GPU-1)\n", 1, 0)]
#[case::prompt_line("$ nvidia-smi -L\nGPU 0: X (UUID: GPU-1)\n", 1, 0)]
fn unknown_lines_are_skipped_with_a_warning(#[case] text: &str, #[case] gpus: usize, #[case] slices: usize) {
    let l = listing(text);
    assert_eq!(l.gpus.len(), gpus);
    assert_eq!(l.gpus[0].slices.len(), slices);
    assert_eq!(l.warnings.len(), 1);
    assert!(
        l.warnings[0].to_string().contains("neither a GPU nor a MIG line"),
        "{:?}",
        l.warnings
    );
}

#[test]
fn an_invalid_profile_keeps_the_slice_with_unknown_shape() {
    let l = listing(
        "GPU 0: X (UUID: GPU-1)\n  MIG 1g.10GB     Device  0: (UUID: MIG-1)\n  MIG Device  1: (UUID: MIG-2)\n",
    );
    let slices = &l.gpus[0].slices;
    assert_eq!(slices.len(), 2);
    assert_eq!(slices[0].profile, None);
    assert_eq!(slices[0].unreadable_profile.as_deref(), Some("1g.10GB"));
    assert_eq!(slices[1].profile, None);
    assert_eq!(l.warnings.len(), 2, "{:?}", l.warnings);
    let facts = assemble(Some(&l), &QueryTable::default());
    // Without a query row the GPU's MIG mode is unknown, but MIG lines make its devices slices.
    for d in facts.devices.unwrap() {
        assert_eq!(d.kind(), DeviceKind::Slice);
        assert_eq!(d.mig_profile, None);
    }
}

#[rstest]
#[case::nothing_recognisable("ANNOTATED\nsomething else\n", 1, "ANNOTATED")]
#[case::leading_blank_then_garbage("\n\n  hello\n", 3, "  hello")]
#[case::empty("", 1, "")]
#[case::blank("   \n\n", 1, "")]
fn output_with_nothing_parsed_is_a_parse_error(#[case] text: &str, #[case] line: usize, #[case] shown: &str) {
    match list::parse(text) {
        Err(Error::Parse {
            command,
            line: l,
            text: t,
            ..
        }) => {
            assert_eq!(command, list::COMMAND);
            assert_eq!((l, t.as_str()), (line, shown));
        }
        other => panic!("{other:?}"),
    }
}

// ---------------------------------------------------------------- the join

const HOST_ROWS: &str = "0, GPU-932bfb2c-849a-2a22-1e84-9eff6bc02b39, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 81559 MiB, 9.0, 580.82.07, Enabled, Enabled\n\
1, GPU-d8594bd4-0fc3-8595-e355-7c98138f3b95, NVIDIA H100 80GB HBM3, 00000000:2A:00.0, 81559 MiB, 9.0, 580.82.07, Disabled, Disabled\n";

fn kinds(facts: &NvidiaFacts) -> Vec<DeviceKind> {
    facts.devices.as_ref().unwrap().iter().map(|d| d.kind()).collect()
}

#[test]
fn a_container_holding_a_slice_records_the_slice_not_the_parent() {
    // Inside the container: --query-gpu shows the parent, -L shows `GPU 0` with the slice.
    let l = listing(&format!(
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: {GPU_A})\n  MIG 3g.40gb     Device  0: (UUID: {MIG_1})\n"
    ));
    let q = rows(&format!(
        "0, {GPU_A}, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 81559 MiB, 9.0, 580.82.07, Enabled, Enabled\n"
    ));
    let facts = assemble(Some(&l), &q);
    let devices = facts.devices.clone().unwrap();
    assert_eq!(devices.len(), 1);
    let d = &devices[0];
    assert_eq!(d.kind(), DeviceKind::Slice);
    assert_eq!(d.uuid.as_deref(), Some(MIG_1));
    assert_eq!(d.parent_uuid.as_deref(), Some(GPU_A));
    assert_eq!(d.product_name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(d.mig_profile.as_ref().unwrap().as_str(), "3g.40gb");
    assert_eq!(facts.gpus.len(), 1);
    assert_eq!(facts.gpus[0].mig_mode, Some(MigMode::Enabled));
    assert_eq!(facts.gpus[0].memory_mib, Some(81559));
    assert_eq!(facts.driver_version.as_ref().unwrap().as_str(), "580.82.07");
    assert!(facts.warnings.is_empty(), "{:?}", facts.warnings);
}

#[test]
fn mig_enabled_with_no_slices_offers_no_device() {
    let l = listing(&format!(
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: {GPU_A})\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: {GPU_B})\n"
    ));
    let facts = assemble(Some(&l), &rows(HOST_ROWS));
    let devices = facts.devices.unwrap();
    assert_eq!(devices.len(), 1, "only GPU 1 (MIG off) is a device");
    assert_eq!(devices[0].uuid.as_deref(), Some(GPU_B));
    assert_eq!(devices[0].kind(), DeviceKind::Whole);
}

#[test]
fn list_failed_and_mig_enabled_leaves_devices_unknown() {
    let facts = assemble(None, &rows(HOST_ROWS));
    assert_eq!(facts.devices, None);
    assert_eq!(facts.gpus.len(), 2);
    assert!(
        facts
            .warnings
            .iter()
            .any(|w| w.to_string().contains("could not be read")),
        "{:?}",
        facts.warnings
    );
}

#[test]
fn list_failed_and_no_mig_gives_whole_gpus_from_the_rows() {
    let q = rows(&HOST_ROWS.replace("Enabled, Enabled", "Disabled, Disabled"));
    let facts = assemble(None, &q);
    assert_eq!(kinds(&facts), [DeviceKind::Whole, DeviceKind::Whole]);
    let d = &facts.devices.unwrap()[0];
    assert_eq!((d.uuid.as_deref(), d.memory_mib), (Some(GPU_A), Some(81559)));
}

#[test]
fn list_failed_and_not_applicable_mig_mode_gives_whole_gpus() {
    let q = rows("0, GPU-1, Tesla T4, 00000000:18:00.0, 15360 MiB, 7.5, 535.1, [N/A], [N/A]\n");
    let facts = assemble(None, &q);
    assert_eq!(kinds(&facts), [DeviceKind::Whole]);
}

#[rstest]
#[case::a100_mode_not_reported(
    "0, GPU-1, A100-SXM4-40GB, 00000000:18:00.0, 40960 MiB, 8.0, 470.57.02, [N/A], [N/A]\n"
)]
#[case::no_compute_capability(
    "0, GPU-1, A100-SXM4-40GB, 00000000:18:00.0, 40960 MiB, [N/A], 470.57.02, [N/A], [N/A]\n"
)]
fn list_failed_and_unknown_mig_mode_on_a_mig_capable_gpu_is_unknown_not_whole(#[case] row: &str) {
    // The mode could be Enabled with slices nobody read: recording a whole GPU would be a guess.
    let facts = assemble(None, &rows(row));
    assert_eq!(facts.devices, None);
    assert!(
        facts
            .warnings
            .iter()
            .any(|w| w.to_string().contains("unknown MIG mode")),
        "{:?}",
        facts.warnings
    );
}

#[test]
fn a_gpu_missing_from_the_listing_with_unknown_mode_is_unknown() {
    let l = listing(&format!("GPU 0: NVIDIA H100 80GB HBM3 (UUID: {GPU_A})\n"));
    let q = rows(&format!(
        "0, {GPU_A}, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 81559 MiB, 9.0, 580.82.07, Disabled, Disabled\n\
         1, {GPU_B}, NVIDIA H100 80GB HBM3, 00000000:2A:00.0, 81559 MiB, 9.0, 580.82.07, [N/A], [N/A]\n"
    ));
    let facts = assemble(Some(&l), &q);
    assert_eq!(facts.devices, None, "{:?}", facts.warnings);
}

#[test]
fn nothing_listed_anywhere_is_unknown() {
    let facts = assemble(None, &QueryTable::default());
    assert_eq!(facts.devices, None);
    assert_eq!(facts.warnings.len(), 1);
}

#[test]
fn stripped_uuids_are_joined_to_rows_by_index() {
    let l =
        listing("GPU 0: NVIDIA H100 80GB HBM3\n  MIG 1g.10gb     Device  0:\nGPU 1: NVIDIA H100 80GB HBM3\n");
    let facts = assemble(Some(&l), &rows(HOST_ROWS));
    let devices = facts.devices.unwrap();
    assert_eq!(devices.len(), 2);
    assert_eq!(devices[0].kind(), DeviceKind::Slice);
    assert_eq!(
        devices[0].parent_uuid.as_deref(),
        Some(GPU_A),
        "parent UUID from the row"
    );
    assert_eq!(devices[0].uuid, None);
    assert_eq!(
        devices[1].uuid.as_deref(),
        Some(GPU_B),
        "whole GPU UUID from the row"
    );
    assert_eq!(devices[1].kind(), DeviceKind::Whole);
    assert_eq!(facts.gpus[0].uuid.as_deref(), Some(GPU_A));
}

#[test]
fn uuids_that_differ_are_not_joined_by_index() {
    let l = listing("GPU 0: Other (UUID: GPU-ffff)\n");
    let facts = assemble(Some(&l), &rows(HOST_ROWS));
    // GPU-ffff has no row (MIG mode unknown → whole); row 0 (MIG on) is missing from -L.
    assert_eq!(facts.devices, None);
    assert_eq!(facts.gpus.len(), 3);
    assert!(facts.warnings.iter().any(
        |w| w.to_string().contains("GPU-ffff") && w.to_string().contains("no nvidia-smi --query-gpu row")
    ));
}

#[test]
fn a_gpu_only_list_shows_is_still_a_device() {
    let l = listing(&format!(
        "GPU 0: NVIDIA B200 (UUID: {GPU_A})\nGPU 1: NVIDIA B200 (UUID: {GPU_B})\n  MIG 1g.23gb Device 0: (UUID: {MIG_1})\n"
    ));
    let facts = assemble(Some(&l), &QueryTable::default());
    assert_eq!(kinds(&facts), [DeviceKind::Whole, DeviceKind::Slice]);
    assert_eq!(facts.gpus.len(), 2);
    assert_eq!(facts.gpus[0].product_name.as_deref(), Some("NVIDIA B200"));
    assert_eq!(facts.gpus[0].mig_mode, None);
    assert_eq!(facts.warnings.len(), 2, "{:?}", facts.warnings);
}

#[test]
fn a_row_missing_from_the_listing_is_whole_when_mig_is_off() {
    let l = listing(&format!(
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: {GPU_A})\n  MIG 1g.10gb Device 0: (UUID: {MIG_1})\n"
    ));
    let facts = assemble(Some(&l), &rows(HOST_ROWS));
    assert_eq!(kinds(&facts), [DeviceKind::Slice, DeviceKind::Whole]);
    assert!(
        facts
            .warnings
            .iter()
            .any(|w| w.to_string().contains(GPU_B) && w.to_string().contains("not in nvidia-smi -L"))
    );
}

#[test]
fn devices_follow_gpu_index_then_list_order() {
    let l = listing(&format!(
        "GPU 1: H (UUID: {GPU_B})\nGPU 0: H (UUID: {GPU_A})\n  MIG 3g.40gb Device 0: (UUID: {MIG_2})\n  MIG 1g.10gb Device 1: (UUID: {MIG_1})\n"
    ));
    let facts = assemble(Some(&l), &rows(HOST_ROWS));
    let uuids: Vec<_> = facts
        .devices
        .unwrap()
        .into_iter()
        .map(|d| d.uuid.unwrap())
        .collect();
    assert_eq!(uuids, [MIG_2, MIG_1, GPU_B]);
    let indexes: Vec<_> = facts.gpus.iter().map(|g| g.index.unwrap()).collect();
    assert_eq!(indexes, [0, 1]);
}

#[rstest]
#[case::pending_enable("Disabled, Enabled", MigMode::PendingEnable, DeviceKind::Whole)]
#[case::disabled("Disabled, Disabled", MigMode::Disabled, DeviceKind::Whole)]
fn mig_off_now_without_slices_is_whole(#[case] modes: &str, #[case] mode: MigMode, #[case] kind: DeviceKind) {
    let l = listing(&format!("GPU 0: H (UUID: {GPU_A})\n"));
    let q = rows(&format!(
        "0, {GPU_A}, H, 0:18:0.0, 81559 MiB, 9.0, 580.82.07, {modes}\n"
    ));
    let facts = assemble(Some(&l), &q);
    assert_eq!(facts.gpus[0].mig_mode, Some(mode));
    assert_eq!(kinds(&facts), [kind]);
}

#[test]
fn pending_disable_without_slices_offers_nothing() {
    let l = listing(&format!("GPU 0: H (UUID: {GPU_A})\n"));
    let q = rows(&format!(
        "0, {GPU_A}, H, 0:18:0.0, 81559 MiB, 9.0, 580.82.07, Enabled, Disabled\n"
    ));
    let facts = assemble(Some(&l), &q);
    assert_eq!(facts.gpus[0].mig_mode, Some(MigMode::PendingDisable));
    assert_eq!(facts.devices, Some(vec![]));
}

#[test]
fn slices_under_a_gpu_reported_mig_off_stay_slices_with_a_warning() {
    let l = listing(&format!(
        "GPU 1: H (UUID: {GPU_B})\n  MIG 1g.10gb Device 0: (UUID: {MIG_1})\n"
    ));
    let only_b = HOST_ROWS.lines().nth(1).unwrap();
    let facts = assemble(Some(&l), &rows(only_b));
    assert_eq!(kinds(&facts), [DeviceKind::Slice]);
    assert!(
        facts
            .warnings
            .iter()
            .any(|w| w.to_string().contains("reports MIG off"))
    );
}

#[test]
fn driver_versions_that_disagree_are_warned_about() {
    let q = rows(&HOST_ROWS.replacen("580.82.07", "580.65.06", 1));
    let facts = assemble(None, &q);
    assert_eq!(facts.driver_version.unwrap().as_str(), "580.65.06");
    assert!(
        facts
            .warnings
            .iter()
            .any(|w| w.to_string().contains("driver versions"))
    );
}

#[test]
fn into_nvidia_fills_the_manifest_section() {
    let l = listing(&format!(
        "GPU 0: H (UUID: {GPU_A})\n  MIG 1g.10gb Device 0: (UUID: {MIG_1})\nGPU 1: H (UUID: {GPU_B})\n"
    ));
    let (nvidia, warnings) = assemble(Some(&l), &rows(HOST_ROWS)).into_nvidia();
    assert_eq!(nvidia.gpus.unwrap().len(), 2);
    assert_eq!(nvidia.devices.unwrap().len(), 2);
    assert_eq!(nvidia.driver_version.unwrap().as_str(), "580.82.07");
    assert_eq!(warnings.len(), 0);
}

#[test]
fn repeated_query_rows_are_dropped_with_a_warning() {
    let q = rows(&format!("{HOST_ROWS}{HOST_ROWS}"));
    assert_eq!(q.rows.len(), 4);
    let l = listing(&format!(
        "GPU 0: H (UUID: {GPU_A})\n  MIG 1g.10gb Device 0: (UUID: {MIG_1})\nGPU 1: H (UUID: {GPU_B})\n"
    ));
    let facts = assemble(Some(&l), &q);
    assert_eq!(facts.gpus.len(), 2);
    assert_eq!(kinds(&facts), [DeviceKind::Slice, DeviceKind::Whole]);
    assert_eq!(
        facts
            .warnings
            .iter()
            .filter(|w| w.to_string().contains("listed again; dropped"))
            .count(),
        2
    );
}

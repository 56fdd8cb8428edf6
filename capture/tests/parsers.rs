//! Every recorded `nvidia-smi -L` in `testdata/nvidia-smi/list/` through its parser and the join,
//! pinned by an insta snapshot (read and checked by hand against the file), plus counts asserted
//! outright so a snapshot accepted in a hurry cannot hide a wrong GPU or slice count. The other
//! recorded outputs (the query, the MIG tables, the failures) are `miggate-smi`'s
//! `tests/parsers.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;

use insta::{assert_yaml_snapshot, glob};
use miggate_capture::assemble;
use miggate_compat::DeviceKind;
use miggate_smi::list::{self, Listing};
use miggate_smi::query::{self, QueryRow, QueryTable};
use rstest::rstest;
use support::nvidia_smi;

mod support;

/// Query rows as a host would print them for the GPUs of a listing: MIG taken as enabled on
/// exactly the GPUs with MIG lines under them.
fn synthetic_query(listing: &Listing) -> QueryTable {
    QueryTable {
        fields: query::FIELDS.iter().map(|f| f.to_string()).collect(),
        header: false,
        rows: listing
            .gpus
            .iter()
            .enumerate()
            .map(|(i, g)| QueryRow {
                line: i + 1,
                index: Some(g.index),
                uuid: g.uuid.clone(),
                name: g.name.clone(),
                mig_mode_current: Some(!g.slices.is_empty()),
                mig_mode_pending: Some(!g.slices.is_empty()),
                ..QueryRow::default()
            })
            .collect(),
        warnings: Vec::new(),
    }
}

#[test]
fn list_corpus() {
    glob!("../../testdata/nvidia-smi/list", "*.txt", |path| {
        let text = fs::read_to_string(path).unwrap();
        let listing = list::parse(&text).unwrap();
        assert_yaml_snapshot!("list", listing);
        let facts = assemble(Some(&listing), &synthetic_query(&listing));
        assert_yaml_snapshot!("list_assembled", facts);
    });
}

/// Counts per `-L` file, asserted outright: GPUs, slices per GPU, orphan slices, and the
/// devices the join yields (slices, whole GPUs) with MIG taken as on where slices are listed.
#[rstest]
#[case("a100-80gb-pcie-2x3g40gb-lxc-host.txt", &[2], 0, 2, 0, 0)]
#[case("a100-pcie-40gb-6gpu-legacy-uuid-mixed.txt", &[0, 0, 0, 0, 2, 2], 0, 4, 4, 0)]
#[case("a100-sxm4-40gb-7x1g5gb-legacy-uuid-gpuoperator-docs.txt", &[7], 0, 7, 0, 0)]
#[case("a100-sxm4-40gb-8gpu-r470-odd-indent-nvidia-mig-guide.txt", &[7, 3, 2, 1, 6, 1, 3, 3], 0, 26, 0, 0)]
#[case("a100-sxm4-80gb-4gpu-mixed-telegraf.txt", &[4, 0, 0, 0], 0, 4, 3, 0)]
#[case("a30-2g12gb-plus-2x1g6gb-reordered.txt", &[3], 0, 3, 0, 0)]
#[case("b200-2gpu-no-mig-container.txt", &[0, 0], 0, 0, 2, 0)]
#[case("gb200-container-1x1g24gb-dra-test-comment.txt", &[1], 0, 1, 0, 0)]
#[case("gh200-96gb-orphan-mig-lines-no-gpu-header.txt", &[], 3, 3, 0, 0)]
#[case("h100-4gpu-gpu2-7x1g12gb-pytorch-collect-env-uuid-stripped.txt", &[0, 0, 7, 0], 0, 7, 0, 3)]
#[case("h100-80gb-hbm3-3x1c3g40gb-2x1g10gb-nvidia-mig-guide.txt", &[5], 0, 5, 0, 0)]
#[case("h100-80gb-hbm3-container-1x3g40gb-gpustack.txt", &[1], 0, 1, 0, 0)]
#[case("h100-nvl-3x2g24gb-1x1g12gb-opennebula.txt", &[4], 0, 4, 0, 0)]
#[case("h100-pcie-8-pod-logs-concatenated-indent-lost-scaleway.txt", &[7], 0, 7, 0, 0)]
#[case("h20-8gpu-3mig-5whole.txt", &[4, 4, 4, 0, 0, 0, 0, 0], 0, 12, 5, 0)]
#[case("h200-8gpu-gpu0-mig-2g35gb-5x1g18gb.txt", &[6, 0, 0, 0, 0, 0, 0, 0], 0, 6, 7, 0)]
#[case("rtx-pro-6000-server-8gpu-all-4x1g24gb-leading-blank.txt", &[4; 8], 0, 32, 0, 0)]
fn list_counts(
    #[case] file: &str,
    #[case] slices_per_gpu: &[usize],
    #[case] orphans: usize,
    #[case] slice_devices: usize,
    #[case] whole_devices: usize,
    #[case] unknown_devices: usize,
) {
    let listing = list::parse(&nvidia_smi(&format!("list/{file}"))).unwrap();
    let got: Vec<usize> = listing.gpus.iter().map(|g| g.slices.len()).collect();
    assert_eq!(got, slices_per_gpu);
    assert_eq!(listing.orphans.len(), orphans);
    let indexes: Vec<u32> = listing.gpus.iter().map(|g| g.index).collect();
    let want: Vec<u32> = (0..u32::try_from(slices_per_gpu.len()).unwrap()).collect();
    assert_eq!(indexes, want, "GPU indexes in order");

    let facts = assemble(Some(&listing), &synthetic_query(&listing));
    let devices = facts.devices.unwrap();
    let count = |kind| devices.iter().filter(|d| d.kind() == kind).count();
    assert_eq!(count(DeviceKind::Slice), slice_devices);
    assert_eq!(count(DeviceKind::Whole), whole_devices);
    // Stripped UUIDs leave whole GPUs of unknown kind (never a slice's parent taken as whole).
    assert_eq!(count(DeviceKind::Unknown), unknown_devices);
    assert_eq!(slice_devices + whole_devices + unknown_devices, devices.len());
    // A slice is never the parent: no slice shares its parent's UUID, and every slice with a
    // known parent carries the parent's product name.
    for d in devices.iter().filter(|d| d.kind() == DeviceKind::Slice) {
        if d.uuid.is_some() {
            assert_ne!(d.uuid.as_deref(), d.parent_uuid.as_deref());
        }
        if d.parent_uuid.is_some() {
            assert!(d.product_name.is_some(), "{d:?}");
        }
    }
}

#[test]
fn stripped_uuid_listing_has_unknown_whole_gpus_and_unknown_slice_uuids() {
    let listing = list::parse(&nvidia_smi(
        "list/h100-4gpu-gpu2-7x1g12gb-pytorch-collect-env-uuid-stripped.txt",
    ))
    .unwrap();
    assert!(listing.gpus.iter().all(|g| g.uuid.is_none()));
    assert!(listing.gpus[2].slices.iter().all(|s| s.uuid.is_none()));
    let devices = assemble(Some(&listing), &synthetic_query(&listing))
        .devices
        .unwrap();
    // 3 whole GPUs with no UUID (unknown kind, not whole) and 7 slices known by their profile.
    assert_eq!(devices.len(), 10);
    assert_eq!(
        devices.iter().filter(|d| d.kind() == DeviceKind::Unknown).count(),
        3
    );
}

//! No input makes a parser (or the join) panic: arbitrary strings, strings built from
//! nvidia-smi's own tokens, and real recorded output shuffled and mutated line by line. Plus
//! the cosmetic changes recorded output shows (CRLF, indentation, trailing spaces) change
//! nothing in what is read.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::sync::LazyLock;

use miggate_capture::assemble;
use miggate_compat::DeviceKind;
use miggate_smi::query::{self, QueryTable};
use miggate_smi::{failure, list, mig_table};
use proptest::prelude::*;
use support::nvidia_smi_path;

mod support;

/// Every recorded file under `testdata/nvidia-smi/`, as (subdirectory, text).
static CORPUS: LazyLock<Vec<(String, String)>> = LazyLock::new(|| {
    let root = nvidia_smi_path("");
    let mut files = Vec::new();
    for dir in fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let kind = dir.file_name().unwrap().to_string_lossy().to_string();
        for file in fs::read_dir(&dir).unwrap() {
            let path = file.unwrap().path();
            // Replay scenarios (testdata/nvidia-smi/replay/<scenario>/) are folders, not recordings.
            if !path.is_file() {
                continue;
            }
            files.push((kind.clone(), fs::read_to_string(&path).unwrap()));
        }
    }
    files.sort();
    assert!(files.len() > 50, "corpus not found under {}", root.display());
    files
});

/// Runs every parser, and the join on whatever parsed, over `text`. Panics are the failure.
fn run_all(text: &str) {
    let listing = list::parse(text).ok();
    let with_fields = query::parse(text, &query::FIELDS).unwrap_or_default();
    let _ = query::parse(text, &[]);
    let _ = query::parse(text, &["name", "gpu_uuid", "memory.total [MiB]"]);
    let _ = query::rejected_field(text);
    let _ = failure::classify(text);
    let _ = mig_table::parse_gpu_instances(text);
    let _ = mig_table::parse_compute_instances(text);
    let _ = mig_table::parse_gpu_instance_profiles(text);
    let _ = mig_table::parse_compute_instance_profiles(text);
    let _ = mig_table::parse_placements(text);
    let facts = assemble(listing.as_ref(), &with_fields);
    let _ = assemble(None, &with_fields);
    let _ = assemble(listing.as_ref(), &QueryTable::default());
    if let (Some(l), Some(devices)) = (&listing, &facts.devices) {
        // A listed slice is never turned into a whole GPU, and nothing is invented.
        let all_slices = || l.gpus.iter().flat_map(|g| &g.slices).chain(&l.orphans);
        let listed_slices = all_slices().count();
        let slice_devices = devices.iter().filter(|d| d.kind() == DeviceKind::Slice).count();
        assert!(slice_devices <= listed_slices);
        // A GPU with listed slices never also appears as a whole device.
        for g in l.gpus.iter().filter(|g| !g.slices.is_empty()) {
            if let Some(uuid) = &g.uuid {
                assert!(
                    !devices
                        .iter()
                        .any(|d| d.kind() == DeviceKind::Whole && d.uuid.as_deref() == Some(uuid.as_str())),
                    "GPU {uuid} has slices and is also a whole device"
                );
            }
        }
        assert!(devices.len() <= listed_slices + facts.gpus.len());
        for s in all_slices() {
            if let Some(uuid) = &s.uuid {
                let d = devices
                    .iter()
                    .find(|d| d.uuid.as_deref() == Some(uuid.as_str()))
                    .expect("a listed slice is a device");
                assert_eq!(d.kind(), DeviceKind::Slice);
            }
        }
    }
}

/// Text assembled from the tokens nvidia-smi prints, so the parsers' deeper paths are reached.
fn smi_like() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("GPU ".to_string()),
        Just("MIG ".to_string()),
        Just("Device ".to_string()),
        Just("(UUID: ".to_string()),
        Just("GPU-".to_string()),
        Just("MIG-".to_string()),
        Just("MIG-GPU-".to_string()),
        Just(")".to_string()),
        Just(": ".to_string()),
        Just("/".to_string()),
        Just("|".to_string()),
        Just("+----+".to_string()),
        Just("|====|".to_string()),
        Just("\n".to_string()),
        Just("\r\n".to_string()),
        Just(", ".to_string()),
        Just(" ".to_string()),
        Just("1g.10gb".to_string()),
        Just("1c.3g.40gb+me.all".to_string()),
        Just("[N/A]".to_string()),
        Just("Enabled".to_string()),
        Just(" MiB".to_string()),
        Just("No GPU instances found: Not Found".to_string()),
        Just("Placements: {".to_string()),
        Just("Placement : {".to_string()),
        Just("}:".to_string()),
        Just("Profile ID ".to_string()),
        Just("1*".to_string()),
        Just("3/7".to_string()),
        Just("4:4".to_string()),
        Just("é".to_string()),
        Just("\u{feff}".to_string()),
        "[0-9]{1,12}",
        "[a-zA-Z0-9.+-]{0,14}",
    ];
    prop::collection::vec(token, 0..80).prop_map(|v| v.concat())
}

/// One edit applied to a recorded file's lines.
#[derive(Debug, Clone)]
enum Edit {
    Swap(usize, usize),
    Delete(usize),
    Duplicate(usize),
    Truncate(usize, usize),
    Insert(usize, String),
    Indent(usize, usize),
    DropChar(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Swap(a, b)),
        any::<usize>().prop_map(Edit::Delete),
        any::<usize>().prop_map(Edit::Duplicate),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Truncate(a, b)),
        (any::<usize>(), smi_like()).prop_map(|(a, s)| Edit::Insert(a, s)),
        (any::<usize>(), 0usize..6).prop_map(|(a, n)| Edit::Indent(a, n)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::DropChar(a, b)),
    ]
}

/// Cuts `line` at a char boundary at most `at` bytes in.
fn cut(line: &str, at: usize) -> String {
    let mut end = at.min(line.len());
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_string()
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    for e in edits {
        if lines.is_empty() {
            lines.push(String::new());
        }
        let n = lines.len();
        match e {
            Edit::Swap(a, b) => lines.swap(a % n, b % n),
            Edit::Delete(a) => {
                lines.remove(a % n);
            }
            Edit::Duplicate(a) => {
                let l = lines[a % n].clone();
                lines.insert(a % n, l);
            }
            Edit::Truncate(a, at) => {
                let l = &lines[a % n];
                let at = at % (l.len() + 1);
                lines[a % n] = cut(l, at);
            }
            Edit::Insert(a, s) => lines.insert(a % (n + 1), s.clone()),
            Edit::Indent(a, k) => lines[a % n] = format!("{}{}", " ".repeat(*k), lines[a % n]),
            Edit::DropChar(a, at) => {
                let l = &lines[a % n];
                let chars: Vec<char> = l.chars().collect();
                if !chars.is_empty() {
                    let at = at % chars.len();
                    lines[a % n] = chars
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| *i != at)
                        .map(|(_, c)| c)
                        .collect();
                }
            }
        }
    }
    lines.join("\n")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        run_all(&text);
    }

    #[test]
    fn smi_like_text_never_panics(text in smi_like()) {
        run_all(&text);
    }

    #[test]
    fn mutated_corpus_never_panics(file in any::<prop::sample::Index>(), edits in prop::collection::vec(edit(), 0..12)) {
        let (_, text) = file.get(&CORPUS);
        run_all(&apply(text, &edits));
    }

    #[test]
    fn shuffled_corpus_never_panics(file in any::<prop::sample::Index>(), order in prop::collection::vec(any::<usize>(), 0..40)) {
        let (_, text) = file.get(&CORPUS);
        let lines: Vec<&str> = text.lines().collect();
        let shuffled: Vec<&str> = order.iter().map(|i| lines.get(i % lines.len().max(1)).copied().unwrap_or("")).collect();
        run_all(&shuffled.join("\n"));
    }

    /// Indentation, trailing white space and CRLF are cosmetic for `-L`: the listing is the same.
    #[test]
    fn list_reading_ignores_cosmetics(file in any::<prop::sample::Index>(), pads in prop::collection::vec((0usize..5, 0usize..3), 64), crlf in any::<bool>()) {
        let lists: Vec<&String> = CORPUS.iter().filter(|(k, _)| k == "list").map(|(_, t)| t).collect();
        let text = file.get(&lists);
        let want = list::parse(text).unwrap();
        let eol = if crlf { "\r\n" } else { "\n" };
        let changed: String = text
            .lines()
            .enumerate()
            .map(|(i, l)| {
                let (lead, trail) = pads[i % pads.len()];
                format!("{}{l}{}{eol}", " ".repeat(lead), " ".repeat(trail))
            })
            .collect();
        prop_assert_eq!(list::parse(&changed).unwrap(), want);
    }

    /// CRLF line ends are cosmetic for every table.
    #[test]
    fn tables_read_the_same_with_crlf(file in any::<prop::sample::Index>()) {
        let (kind, text) = file.get(&CORPUS);
        let crlf = text.replace('\n', "\r\n");
        match kind.as_str() {
            "mig-lgi" => prop_assert_eq!(mig_table::parse_gpu_instances(&crlf).unwrap(), mig_table::parse_gpu_instances(text).unwrap()),
            "mig-lci" => prop_assert_eq!(mig_table::parse_compute_instances(&crlf).unwrap(), mig_table::parse_compute_instances(text).unwrap()),
            "mig-lgip" => prop_assert_eq!(mig_table::parse_gpu_instance_profiles(&crlf).unwrap(), mig_table::parse_gpu_instance_profiles(text).unwrap()),
            "mig-lcip" => prop_assert_eq!(mig_table::parse_compute_instance_profiles(&crlf).unwrap(), mig_table::parse_compute_instance_profiles(text).unwrap()),
            "mig-lgipp" => prop_assert_eq!(mig_table::parse_placements(&crlf).unwrap(), mig_table::parse_placements(text).unwrap()),
            "query-gpu" => prop_assert_eq!(query::parse(&crlf, &[]).unwrap(), query::parse(text, &[]).unwrap()),
            "list" => prop_assert_eq!(list::parse(&crlf).unwrap(), list::parse(text).unwrap()),
            _ => prop_assert_eq!(format!("{:?}", failure::classify(&crlf).is_some()), format!("{:?}", failure::classify(text).is_some())),
        }
    }
}

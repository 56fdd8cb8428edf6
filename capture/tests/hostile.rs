//! An attacker's review of capture, one test per finding: a broken or hostile nvidia-smi (a
//! shell-script stand-in written to a temporary directory) or NVML (the fake library) must give
//! exit-0-worthy facts or a clear, bounded, escaped error; never a panic, a hang past the
//! deadline, or a GPU that does not exist.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use miggate_capture::{Backend, Error, Options, RunError, Stream, capture};
use miggate_capture::{assemble, read_nvml};
use miggate_smi::{list, query};

mod support;
use support::fake_nvml;

use miggate_compat::H100_NAME as H100;
const GPU_A: &str = "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f";
const ROW_A: &str = "0, GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 81559, 9.0, 580.82.07, Disabled, Disabled";

/// Writes an executable nvidia-smi stand-in whose body is `case "$1" in … esac` arms; `$DIR`
/// is the directory it lives in (for files the test generated).
fn stand_in(dir: &Path, arms: &str) -> PathBuf {
    let path = dir.join("nvidia-smi");
    let script = format!(
        "#!/bin/sh\nDIR='{}'\ncase \"$1\" in\n{arms}\n  *) exit 2 ;;\nesac\n",
        dir.display()
    );
    std::fs::write(&path, script).unwrap();
    let status = std::process::Command::new("chmod")
        .arg("+x")
        .arg(&path)
        .status()
        .unwrap();
    assert!(status.success());
    path
}

fn options(smi: &Path, timeout: Duration) -> Options {
    Options {
        backend: Backend::NvidiaSmi,
        nvidia_smi: Some(smi.to_path_buf()),
        timeout: Some(timeout),
        ..Options::default()
    }
}

/// A message quoting outside text: none of the bytes that drive a terminal or reorder a line.
fn assert_inert(message: &str) {
    for hazard in ['\u{1b}', '\u{7}', '\u{0}', '\u{202e}', '\u{9b}', '\r'] {
        assert!(
            !message.contains(hazard),
            "raw {hazard:?} in the message: {message:?}"
        );
    }
}

/// Finding 1: a listing over the 8 MiB bound used to be cut and parsed as complete, and its
/// last, half-printed GPU line became a GPU that does not exist. Over the bound is an error.
#[test]
fn output_over_the_bound_is_an_error_never_a_phantom_gpu() {
    let dir = tempfile::tempdir().unwrap();
    // Distinct GPU lines until past 8 MiB, the cut falling inside one of them.
    let mut listing = String::new();
    let mut i = 0_u32;
    while listing.len() <= 8 * 1024 * 1024 + 100 {
        writeln!(
            listing,
            "GPU {i}: {H100} (UUID: GPU-{i:08x}-d268-c3f3-1b07-005d5ae1dc3f)"
        )
        .unwrap();
        i += 1;
    }
    std::fs::write(dir.path().join("list.txt"), &listing).unwrap();
    let smi = stand_in(
        dir.path(),
        &format!(
            "  -L) cat \"$DIR/list.txt\" ;;\n  --query-gpu=*) echo '{ROW_A}' ;;\n  --version) echo 'CUDA Version : 13.0' ;;"
        ),
    );
    let err = capture(&options(&smi, Duration::from_secs(60))).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Run(RunError::OutputTooLarge {
                stream: Stream::Stdout,
                ..
            })
        ),
        "{err}"
    );
    let message = err.to_string();
    assert!(message.contains("printed more than 8 MiB on stdout"), "{message}");
    assert!(message.contains("-L"), "{message}");

    // The same for the GPU query, the other required command.
    let smi = stand_in(
        dir.path(),
        "  -L) echo 'GPU 0: X (UUID: GPU-1)' ;;\n  --query-gpu=*) cat \"$DIR/list.txt\" ;;",
    );
    let err = capture(&options(&smi, Duration::from_secs(60))).unwrap_err();
    assert!(
        err.to_string().contains("printed more than 8 MiB on stdout"),
        "{err}"
    );
}

/// Finding 2: a child of nvidia-smi that escapes its process group (`setsid`) and holds stdout
/// open used to cost everything already read ("the output is empty"). What was read within the
/// grace is kept and used, with a warning.
#[test]
fn output_read_before_an_escaped_child_holds_the_pipe_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("escaped.pid");
    let smi = stand_in(
        dir.path(),
        &format!(
            "  -L) echo 'GPU 0: {H100} (UUID: {GPU_A})' ;;\n  --query-gpu=*) echo '{ROW_A}'; setsid sh -c 'echo $$ > \"$0\"; exec sleep 30' \"$DIR/escaped.pid\" & while [ ! -s \"$DIR/escaped.pid\" ]; do sleep 0.01; done ;;\n  --version) echo 'CUDA Version : 13.0' ;;"
        ),
    );
    // The stand-in waits until its child has left the process group (its pid file is written)
    // before it exits, so a loaded machine cannot kill the child before it escapes.
    let start = Instant::now();
    let result = capture(&options(&smi, Duration::from_secs(20)));
    let took = start.elapsed();
    // Ends the escaped process this test started, by its id.
    if let Ok(pid) = std::fs::read_to_string(&pid_file) {
        let _ = std::process::Command::new("kill").arg(pid.trim()).status();
    }
    let manifest = result.unwrap();
    let nvidia = manifest.nvidia.unwrap();
    let gpus = nvidia.gpus.unwrap();
    assert_eq!(gpus.len(), 1);
    assert_eq!(gpus[0].uuid.as_deref(), Some(GPU_A));
    let devices = nvidia.devices.unwrap();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].uuid.as_deref(), Some(GPU_A));
    assert!(
        manifest
            .warnings
            .iter()
            .map(ToString::to_string)
            .any(|w| w.contains("stdout was still held open") && w.contains("--query-gpu")),
        "{:?}",
        manifest.warnings
    );
    // The 2 s grace, not the escaped child's 30 s.
    assert!(took < Duration::from_secs(10), "{took:?}");
}

/// Finding 3: nvidia-smi's output reached the terminal raw through error messages (an OSC title
/// set, clear-screen, BEL, a right-to-left override). Every quoted outside text is escaped.
#[test]
fn terminal_controls_in_quoted_text_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let smi = stand_in(
        dir.path(),
        "  -L) printf 'GPU 0: X (UUID: GPU-1)\\n\\033[2Jjunk\\007 line\\n' ;;\n  --query-gpu=*) printf '\\033]0;owned\\007\\033[2J\\342\\200\\256gnp.exe\\r\\n'; exit 1 ;;",
    );
    let err = capture(&options(&smi, Duration::from_secs(20))).unwrap_err();
    assert!(matches!(err, Error::Failed { .. }), "{err}");
    let message = err.to_string();
    assert_inert(&message);
    assert!(message.contains("\\u{1b}]0;owned\\u{7}"), "{message}");
    assert!(message.contains("\\u{202e}"), "{message}");

    // A warning quoting a junk line of `-L` is escaped too.
    let smi = stand_in(
        dir.path(),
        &format!(
            "  -L) printf 'GPU 0: {H100} (UUID: {GPU_A})\\n\\033[2Jjunk\\007\\n' ;;\n  --query-gpu=*) echo '{ROW_A}' ;;"
        ),
    );
    let manifest = capture(&options(&smi, Duration::from_secs(20))).unwrap();
    let junk = manifest
        .warnings
        .iter()
        .map(ToString::to_string)
        .find(|w| w.contains("junk"))
        .expect("the junk line is warned about");
    assert_inert(&junk);
    assert!(junk.contains("\\u{1b}[2Jjunk\\u{7}"), "{junk}");

    // A path is outside text as well.
    let path = dir.path().join("\u{1b}]0;owned\u{7}nvidia-smi");
    let err = capture(&options(&path, Duration::from_secs(20))).unwrap_err();
    assert!(matches!(err, Error::Run(RunError::NotFound { .. })), "{err}");
    assert_inert(&err.to_string());
}

/// Finding 4: a failing nvidia-smi that floods both streams gave a 16 MiB error. The quoted
/// output is cut, so the message stays a few KiB.
#[test]
fn a_flooding_failure_gives_a_bounded_message() {
    let dir = tempfile::tempdir().unwrap();
    // 7 MB on each stream: under the bound, so the failure itself is reported.
    let smi = stand_in(
        dir.path(),
        "  -L) echo 'GPU 0: X (UUID: GPU-1)' ;;\n  --query-gpu=*) head -c 7000000 /dev/zero | tr '\\0' x; head -c 7000000 /dev/zero | tr '\\0' y >&2; exit 1 ;;",
    );
    let err = capture(&options(&smi, Duration::from_secs(60))).unwrap_err();
    assert!(matches!(err, Error::Failed { .. }), "{err}");
    let message = err.to_string();
    assert!(message.len() < 10 * 1024, "{} bytes", message.len());
    assert!(
        message.contains("more bytes cut]"),
        "{}",
        &message[message.len() - 60..]
    );

    // Past the bound on both streams: the error says so, in a line.
    let smi = stand_in(
        dir.path(),
        "  -L) echo 'GPU 0: X (UUID: GPU-1)' ;;\n  --query-gpu=*) head -c 9000000 /dev/zero; head -c 9000000 /dev/zero >&2; exit 1 ;;",
    );
    let err = capture(&options(&smi, Duration::from_secs(60))).unwrap_err();
    assert!(
        matches!(err, Error::Run(RunError::OutputTooLarge { .. })),
        "{err}"
    );
    assert!(err.to_string().len() < 1024, "{err}");
}

/// Finding 5: `--timeout` bounded each command, so a stand-in that answers each query after
/// 2.5 s by rejecting one more field made a 3 s limit take over 20 s. One deadline now bounds
/// the whole capture, retries included.
#[test]
fn one_deadline_bounds_the_whole_capture_retries_included() {
    let dir = tempfile::tempdir().unwrap();
    let smi = stand_in(
        dir.path(),
        "  --query-gpu=*) sleep 2.5; fields=${1#--query-gpu=}; echo \"Field \\\"${fields##*,}\\\" is not a valid field to query.\"; exit 2 ;;\n  -L) echo 'GPU 0: Tesla T4 (UUID: GPU-1)' ;;\n  --version) echo 'CUDA Version : 12.0' ;;",
    );
    let start = Instant::now();
    let err = capture(&options(&smi, Duration::from_secs(3))).unwrap_err();
    let took = start.elapsed();
    assert!(err.is_timeout(), "{err}");
    assert!(err.to_string().contains("3s deadline"), "{err}");
    assert!(
        !err.to_string().contains("--timeout"),
        "the library names no flag: {err}"
    );
    // The deadline, plus slack for a loaded machine; the old per-command limit took 20 s.
    assert!(took < Duration::from_secs(6), "{took:?}");
}

/// `-L` of `gpus` GPUs with `slices` `1g.10gb` slices each (R470+ format), the matching query
/// rows (MIG on), and the `mig -lci` table for them.
fn big_node(gpus: u32, slices: u32) -> (String, String, String) {
    let mut list = String::new();
    let mut rows = String::new();
    let mut lci = String::from(
        "+--------------------------------------------------------------------+\n\
         | Compute instances:                                                 |\n\
         | GPU     GPU       Name             Profile   Instance   Placement  |\n\
         |       Instance                       ID        ID       Start:Size |\n\
         |         ID                                                         |\n\
         |====================================================================|\n",
    );
    for gpu in 0..gpus {
        let uuid = format!("GPU-{gpu:08x}-9c8b-4c3b-8a29-1f0e9d8c7b6a");
        writeln!(list, "GPU {gpu}: {H100} (UUID: {uuid})").unwrap();
        for slot in 0..slices {
            writeln!(
                list,
                "  MIG 1g.10gb     Device  {slot}: (UUID: MIG-{gpu:08x}-{slot:04x}-5000-8000-000000000000)"
            )
            .unwrap();
            writeln!(
                lci,
                "|   {gpu}      {}       MIG 1g.10gb          0        0          0:1     |",
                slot + 7
            )
            .unwrap();
        }
        writeln!(
            rows,
            "{gpu}, {uuid}, {H100}, 00000000:18:00.0, 81559, 9.0, 580.82.07, Enabled, Enabled"
        )
        .unwrap();
    }
    lci.push_str("+--------------------------------------------------------------------+\n");
    (list, rows, lci)
}

/// Finding 6: 10,000 GPUs with 7 slices each took 38-40 s to read (scans inside loops). Parsing
/// and the join are near-linear now. Timings are measured in `benches/parse.rs`; this only
/// guards against a quadratic blow-up, with bounds generous enough for a debug build on a
/// loaded machine.
#[test]
fn ten_thousand_gpus_with_seven_slices_each_read_in_linear_time() {
    let (list_text, rows, lci) = big_node(10_000, 7);
    let start = Instant::now();
    let listing = list::parse(&list_text).unwrap();
    let table = query::parse(&rows, &query::FIELDS).unwrap();
    let facts = assemble(Some(&listing), &table);
    let took = start.elapsed();
    assert_eq!(facts.devices.as_ref().map(Vec::len), Some(70_000));
    assert!(facts.warnings.is_empty(), "{:?}", &facts.warnings[..3]);
    assert!(took < Duration::from_secs(60), "parse and join took {took:?}");

    // The whole capture, `mig -lci` instance ids included, through a stand-in.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("list.txt"), &list_text).unwrap();
    std::fs::write(dir.path().join("query.csv"), &rows).unwrap();
    std::fs::write(dir.path().join("lci.txt"), &lci).unwrap();
    let smi = stand_in(
        dir.path(),
        "  -L) cat \"$DIR/list.txt\" ;;\n  --query-gpu=*) cat \"$DIR/query.csv\" ;;\n  --version) echo 'CUDA Version : 13.0' ;;\n  mig) cat \"$DIR/lci.txt\" ;;",
    );
    let start = Instant::now();
    let manifest = capture(&options(&smi, Duration::from_secs(120))).unwrap();
    let took = start.elapsed();
    let devices = manifest.nvidia.unwrap().devices.unwrap();
    assert_eq!(devices.len(), 70_000);
    assert_eq!(devices[69_999].gpu_instance_id, Some(13));
    assert!(manifest.warnings.is_empty(), "{:?}", manifest.warnings);
    assert!(took < Duration::from_secs(60), "capture took {took:?}");
}

/// Finding 7: a NUL or U+FFFD inside a UUID was accepted. UUIDs are read into the validated
/// types where they are read; one outside the printed forms is an error naming the command, the
/// line and the escaped text, and never reaches a manifest.
#[test]
fn invalid_uuids_are_errors_naming_where_they_were_read() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        // A NUL in a GPU line's UUID.
        (
            format!(
                "  -L) printf 'GPU 0: {H100} (UUID: GPU-5c89852c\\000d268)\\n' ;;\n  --query-gpu=*) echo '{ROW_A}' ;;"
            ),
            "`nvidia-smi -L` line 1",
            "GPU-5c89852c\\u{0}d268",
        ),
        // A right-to-left override in a MIG line's UUID, on line 2.
        (
            format!(
                "  -L) printf 'GPU 0: {H100} (UUID: {GPU_A})\\n  MIG 1g.10gb Device 0: (UUID: MIG-ab\\342\\200\\256cd)\\n' ;;\n  --query-gpu=*) echo '{ROW_A}' ;;"
            ),
            "`nvidia-smi -L` line 2",
            "MIG-ab\\u{202e}cd",
        ),
        // A U+FFFD in the query's UUID column.
        (
            format!(
                "  -L) echo 'GPU 0: {H100} (UUID: {GPU_A})' ;;\n  --query-gpu=*) printf '0, GPU-5c89852c-\\357\\277\\275, {H100}, 00000000:18:00.0, 81559, 9.0, 580.82.07, Disabled, Disabled\\n' ;;"
            ),
            "`nvidia-smi --query-gpu` line 1",
            "GPU-5c89852c-\u{fffd}",
        ),
        // A MIG UUID where a GPU's belongs: the wrong kind is refused as well.
        (
            format!("  -L) echo 'GPU 0: {H100} (UUID: MIG-1)' ;;\n  --query-gpu=*) echo '{ROW_A}' ;;"),
            "`nvidia-smi -L` line 1",
            "a GPU UUID starts with `GPU-`",
        ),
    ];
    for (arms, at, quoted) in cases {
        let smi = stand_in(dir.path(), &arms);
        let err = capture(&options(&smi, Duration::from_secs(20))).unwrap_err();
        assert!(matches!(err, Error::InvalidUuid { .. }), "{arms}: {err}");
        let message = err.to_string();
        assert!(message.contains(at), "{message}");
        assert!(message.contains(quoted), "{message}");
        assert_inert(&message);
    }

    // The same from NVML.
    for (scenario, at, quoted) in [
        (
            "bad_gpu_uuid",
            "NVML nvmlDeviceGetUUID, GPU 0",
            "GPU-5c89852c-d268-\u{fffd}-1b07",
        ),
        (
            "bad_mig_uuid",
            "NVML nvmlDeviceGetUUID, GPU 0 MIG device 0",
            "MIG-7089d0f3-\\u{202e}293f",
        ),
    ] {
        let err = read_nvml(Some(&fake_nvml::fake(scenario))).unwrap_err();
        assert!(matches!(err, Error::InvalidUuid { .. }), "{scenario}: {err}");
        let message = err.to_string();
        assert!(message.contains(at), "{message}");
        assert!(message.contains(quoted), "{message}");
        assert_inert(&message);
    }
}

/// With findings 3 and 4: a listing of junk lines would give one warning per line; a manifest
/// keeps 200 and says how many more there were.
#[test]
fn a_manifest_carries_a_bounded_number_of_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let smi = stand_in(
        dir.path(),
        &format!(
            "  -L) echo 'GPU 0: {H100} (UUID: {GPU_A})'; i=0; while [ $i -lt 500 ]; do echo \"junk $i\"; i=$((i+1)); done ;;\n  --query-gpu=*) echo '{ROW_A}' ;;\n  --version) echo 'CUDA Version : 13.0' ;;"
        ),
    );
    let manifest = capture(&options(&smi, Duration::from_secs(20))).unwrap();
    assert_eq!(manifest.warnings.len(), 201, "{:?}", manifest.warnings.last());
    assert_eq!(
        manifest.warnings.last().map(ToString::to_string).as_deref(),
        Some("300 more warnings left out")
    );
    assert_eq!(manifest.nvidia.unwrap().devices.unwrap().len(), 1);
}

//! A node agent: the exact check before `cuda-checkpoint --restore`.
//!
//! ```sh
//! cargo run -p miggate-capture --example node_agent -- [--gpu-host | --nvidia-smi PATH] CHECKPOINT_DIR
//! ```
//!
//! It reads the manifest `checkpoint_agent` wrote beside the checkpoint, captures what the
//! restore container was given (by default through the recorded nvidia-smi stand-in, so it runs
//! without a GPU; `--gpu-host` reads NVML or nvidia-smi), adds the restore pod's facts and runs
//! the exact check. When the restore is possible it prints the `--device-map` argument for
//! `cuda-checkpoint` and exits 0; when it is not, it prints the reason and exits 1, before CRIU
//! or the CUDA runtime fail late with an error that names neither side. Bad input exits 2.
//!
//! The exact check is the final gate: the admission webhook and the scheduler compared the
//! checkpoint with a node's offer, but only here are the devices the container got known.

use std::error::Error;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use miggate_capture::{Backend, Options, capture};
use miggate_compat::{Options as CheckOptions, Pod, evaluate, from_str};

/// The manifest's file name inside a checkpoint folder, as `checkpoint_agent` writes it.
const MANIFEST: &str = "gpu-manifest.json";

/// What the command line says.
#[derive(Debug, Default)]
struct Args {
    /// Where the checkpoint and its manifest are.
    checkpoint_dir: PathBuf,
    /// Read the real GPUs instead of the recorded stand-in.
    gpu_host: bool,
    /// An nvidia-smi to run instead of the recorded stand-in.
    nvidia_smi: Option<PathBuf>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut out = Args::default();
    let mut dir = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--gpu-host" => out.gpu_host = true,
            "--nvidia-smi" => out.nvidia_smi = Some(args.next().ok_or("--nvidia-smi needs a path")?.into()),
            flag if flag.starts_with('-') => return Err(format!("unknown flag {flag}")),
            _ if dir.is_none() => dir = Some(PathBuf::from(arg)),
            _ => return Err(format!("unexpected argument {arg}")),
        }
    }
    out.checkpoint_dir = dir.ok_or("usage: node_agent [--gpu-host | --nvidia-smi PATH] CHECKPOINT_DIR")?;
    Ok(out)
}

/// The capture options for `args`: the real GPUs on a GPU host, else the named or recorded
/// nvidia-smi.
fn capture_options(args: &Args) -> Options {
    let (backend, nvidia_smi) = if args.gpu_host {
        (Backend::Auto, args.nvidia_smi.clone())
    } else {
        let replay = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/nvidia-smi/replay/nvidia-smi");
        (
            Backend::NvidiaSmi,
            Some(args.nvidia_smi.clone().unwrap_or(replay)),
        )
    };
    Options {
        backend,
        nvidia_smi,
        ..Options::default()
    }
}

/// The restore container's facts. A real agent reads them from the restore pod's spec and the
/// runtime; these are the example pod's, the same as the checkpointed one's.
fn restore_pod() -> miggate_compat::PodBuilder {
    Pod::builder()
        .image("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1")
        .image_digest("sha256:9f2c4be5a0e7f4b1c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0")
        .cpu_limit("8")
        .memory_limit("64Gi")
        .mount("/model-cache")
        .no_resource_claims()
}

/// What the agent decided.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Restore, with this `--device-map` value (empty when every device maps onto itself).
    Restore(String),
    /// Do not restore.
    Refused,
}

/// Reads the checkpoint's manifest, captures this container's view and runs the exact check;
/// prints the device-map argument or the reason on `out`.
fn run(args: &Args, out: &mut dyn Write) -> Result<Verdict, Box<dyn Error>> {
    let path = args.checkpoint_dir.join(MANIFEST);
    let text = fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let source = from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut target = capture(&capture_options(args))?;
    target.pod = Some(restore_pod().build()?);
    let report = evaluate(&source, &target, &CheckOptions::default());
    for w in &report.warnings {
        writeln!(out, "warning: {w}")?;
    }
    if !report.compatible {
        writeln!(out, "refused: {}", report.reason)?;
        return Ok(Verdict::Refused);
    }
    match report.device_map {
        Some(map) if map.is_empty() => {
            writeln!(
                out,
                "restorable: every device maps onto itself; no --device-map needed"
            )?;
            Ok(Verdict::Restore(map))
        }
        Some(map) => {
            writeln!(out, "restorable: cuda-checkpoint --restore --device-map {map}")?;
            Ok(Verdict::Restore(map))
        }
        // Compatible, yet the devices cannot be paired (legacy MIG UUIDs): cuda-checkpoint
        // would refuse the restore, so the agent does too.
        None => {
            writeln!(out, "refused: no device map (see the warnings)")?;
            Ok(Verdict::Refused)
        }
    }
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("node_agent: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args, &mut std::io::stdout()) {
        Ok(Verdict::Restore(_)) => ExitCode::SUCCESS,
        Ok(Verdict::Refused) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("node_agent: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use miggate_compat::{Gpu, GpuManifest};

    /// A replay scenario's own nvidia-smi stand-in.
    fn scenario(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../testdata/nvidia-smi/replay")
            .join(name)
            .join("nvidia-smi")
    }

    /// A checkpoint folder holding `manifest`, as `checkpoint_agent` leaves it.
    fn checkpoint(manifest: &GpuManifest) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(MANIFEST), manifest.to_json().unwrap()).unwrap();
        dir
    }

    fn agent(dir: &Path, nvidia_smi: Option<PathBuf>) -> (Verdict, String) {
        let args = Args {
            checkpoint_dir: dir.to_path_buf(),
            gpu_host: false,
            nvidia_smi,
        };
        let mut out = Vec::new();
        let verdict = run(&args, &mut out).unwrap();
        (verdict, String::from_utf8(out).unwrap())
    }

    /// A checkpoint taken in this very container view (the default replay) restores onto it.
    #[test]
    fn the_same_view_restores_with_no_map() {
        let mut source = capture(&capture_options(&Args::default())).unwrap();
        source.pod = Some(restore_pod().build().unwrap());
        let dir = checkpoint(&source);
        let (verdict, out) = agent(dir.path(), None);
        assert_eq!(verdict, Verdict::Restore(String::new()));
        insta::assert_snapshot!(out);
    }

    /// A checkpoint of one `3g.40gb` slice on another H100 restores into a container given one
    /// such slice, with the map from the old slice to the new.
    #[test]
    fn another_3g40gb_slice_restores_with_a_map() {
        let here = capture(&capture_options(&Args::default())).unwrap().host.unwrap();
        let mut source = GpuManifest::builder()
            .node("gpu-node-3")
            .driver("580.82.07")
            .gpu(
                Gpu::h100()
                    .cut(["3g.40gb"])
                    .slice_uuids(["MIG-0d6a1f3e-5b2c-5e7d-9a8b-4c3d2e1f0a9b"]),
            )
            .pod(restore_pod())
            .build()
            .unwrap();
        source.host = Some(here);
        let dir = checkpoint(&source);
        let (verdict, out) = agent(dir.path(), Some(scenario("h100-container-3g40gb")));
        assert_eq!(
            verdict,
            Verdict::Restore(
                "MIG-0d6a1f3e-5b2c-5e7d-9a8b-4c3d2e1f0a9b=MIG-b3061c09-2a4c-5026-a575-79f86a5bb12c".into()
            )
        );
        insta::assert_snapshot!(out);
    }

    /// The five devices of the MIG host's checkpoint do not fit a container with one slice.
    #[test]
    fn a_smaller_view_is_refused_with_the_reason() {
        let mut source = capture(&capture_options(&Args::default())).unwrap();
        source.pod = Some(restore_pod().build().unwrap());
        let dir = checkpoint(&source);
        let (verdict, out) = agent(dir.path(), Some(scenario("h100-container-3g40gb")));
        assert_eq!(verdict, Verdict::Refused);
        insta::assert_snapshot!(out);
    }

    #[test]
    fn a_missing_manifest_is_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let args = parse_args([dir.path().display().to_string()].into_iter()).unwrap();
        let err = run(&args, &mut Vec::new()).unwrap_err().to_string();
        assert!(err.starts_with("cannot read "), "{err}");
        assert!(parse_args(std::iter::empty()).is_err());
    }
}

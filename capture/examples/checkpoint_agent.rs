//! A checkpoint agent: records what the container's GPUs are, beside the checkpoint.
//!
//! ```sh
//! cargo run -p miggate-capture --example checkpoint_agent -- [--gpu-host | --nvidia-smi PATH] [CHECKPOINT_DIR]
//! ```
//!
//! It captures what this process sees (by default through the recorded nvidia-smi stand-in
//! `testdata/nvidia-smi/replay/nvidia-smi`, so it runs without a GPU; `--gpu-host` reads NVML,
//! or nvidia-smi when NVML does not load), adds the pod's facts, and writes
//! `CHECKPOINT_DIR/gpu-manifest.json` atomically: a temporary file in the same folder, synced,
//! then renamed, so a restore never reads half a manifest. Without `CHECKPOINT_DIR` it writes
//! into a new temporary folder and prints its path, for `node_agent` to read.
//!
//! A real agent runs this right after `cuda-checkpoint --toggle` and CRIU have written the
//! checkpoint, inside the checkpointed container's view of the GPUs.

use std::error::Error;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use miggate_capture::{Backend, Options, capture};
use miggate_compat::{GpuManifest, Pod};

/// The manifest's file name inside a checkpoint folder; `node_agent` reads the same name.
const MANIFEST: &str = "gpu-manifest.json";

/// What the command line says.
#[derive(Debug, Default)]
struct Args {
    /// Where the checkpoint is; a new temporary folder when absent.
    checkpoint_dir: Option<PathBuf>,
    /// Read the real GPUs instead of the recorded stand-in.
    gpu_host: bool,
    /// An nvidia-smi to run instead of the recorded stand-in.
    nvidia_smi: Option<PathBuf>,
    /// The Kubernetes node name (a real agent gets it from the downward API as `NODE_NAME`).
    node_name: Option<String>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut out = Args::default();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--gpu-host" => out.gpu_host = true,
            "--nvidia-smi" => out.nvidia_smi = Some(args.next().ok_or("--nvidia-smi needs a path")?.into()),
            flag if flag.starts_with('-') => return Err(format!("unknown flag {flag}")),
            _ if out.checkpoint_dir.is_none() => out.checkpoint_dir = Some(arg.into()),
            _ => return Err(format!("unexpected argument {arg}")),
        }
    }
    Ok(out)
}

/// The recorded nvidia-smi stand-in of this repository.
fn replay_nvidia_smi() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/nvidia-smi/replay/nvidia-smi")
}

/// The capture options for `args`: the real GPUs on a GPU host, else the named or recorded
/// nvidia-smi.
fn capture_options(args: &Args) -> Options {
    let (backend, nvidia_smi) = if args.gpu_host {
        (Backend::Auto, args.nvidia_smi.clone())
    } else {
        let smi = args.nvidia_smi.clone().unwrap_or_else(replay_nvidia_smi);
        (Backend::NvidiaSmi, Some(smi))
    };
    Options {
        backend,
        nvidia_smi,
        node_name: args.node_name.clone(),
        ..Options::default()
    }
}

/// The checkpointed container's facts. A real agent reads them from the pod spec (limits,
/// mounts it externalized, GPU resource limits) and the runtime (the image ID); these are the
/// example pod's.
fn pod_facts() -> Result<Pod, miggate_compat::Error> {
    Pod::builder()
        .image("nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.1")
        .image_digest("sha256:9f2c4be5a0e7f4b1c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0")
        .cpu_limit("8")
        .memory_limit("64Gi")
        .mount("/model-cache")
        .no_resource_claims()
        .build()
}

/// Writes `manifest` as `dir/gpu-manifest.json`, atomically: the temporary file is in the same
/// folder (a rename across file systems is a copy), synced before the rename, the folder synced
/// after it, and a failure leaves no temporary file behind.
fn write_atomically(dir: &Path, manifest: &GpuManifest) -> Result<PathBuf, Box<dyn Error>> {
    let path = dir.join(MANIFEST);
    let tmp = dir.join(format!(".{MANIFEST}.tmp-{}", std::process::id()));
    let written = (|| -> std::io::Result<()> {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(manifest.to_json().map_err(std::io::Error::other)?.as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        fs::rename(&tmp, &path)?;
        // The rename is durable once the folder's entry is on disk too.
        fs::File::open(dir)?.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(format!("cannot write {}: {e}", path.display()).into());
    }
    Ok(path)
}

/// Captures, adds the pod's facts and writes the manifest into `dir`; says what it wrote on
/// `out`.
fn run(args: &Args, dir: &Path, out: &mut dyn Write) -> Result<GpuManifest, Box<dyn Error>> {
    let mut manifest = capture(&capture_options(args))?;
    manifest.pod = Some(pod_facts()?);
    let path = write_atomically(dir, &manifest)?;
    writeln!(out, "wrote {}", path.display())?;
    for d in manifest.devices().unwrap_or_default() {
        let uuid = d.uuid.as_ref().map_or("unknown", |u| u.as_str());
        let shape = d.mig_profile.as_ref().map_or("whole", |p| p.as_str());
        let model = d.model().unwrap_or("unknown model");
        writeln!(out, "  {uuid}  {shape}  {model}")?;
    }
    for w in &manifest.warnings {
        writeln!(out, "warning: {w}")?;
    }
    Ok(manifest)
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(mut args) => {
            args.node_name = std::env::var("NODE_NAME").ok();
            args
        }
        Err(e) => {
            eprintln!("checkpoint_agent: {e}");
            return ExitCode::from(2);
        }
    };
    let dir = match &args.checkpoint_dir {
        Some(dir) => dir.clone(),
        // Kept, not deleted on exit: the node agent reads it next.
        None => match tempfile::Builder::new().prefix("checkpoint-").tempdir() {
            Ok(dir) => dir.keep(),
            Err(e) => {
                eprintln!("checkpoint_agent: cannot make a temporary folder: {e}");
                return ExitCode::from(2);
            }
        },
    };
    match run(&args, &dir, &mut std::io::stdout()) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("checkpoint_agent: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn records_the_replayed_h100_beside_the_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let args = parse_args(["--nvidia-smi".to_string(), "x".to_string()].into_iter()).unwrap();
        assert_eq!(args.nvidia_smi.as_deref(), Some(Path::new("x")));
        let args = Args {
            node_name: Some("gpu-node-3".into()),
            ..Args::default()
        };
        let mut out = Vec::new();
        run(&args, dir.path(), &mut out).unwrap();
        let out = String::from_utf8(out)
            .unwrap()
            .replace(&dir.path().display().to_string(), "[dir]");
        insta::assert_snapshot!("stdout", out);
        // What was written is a manifest `from_str` reads, equal to what was captured, and no
        // temporary file is left.
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, [MANIFEST]);
        let text = fs::read_to_string(dir.path().join(MANIFEST)).unwrap();
        let manifest = miggate_compat::from_str(&text).unwrap();
        let value = manifest.to_value().unwrap();
        insta::assert_json_snapshot!("manifest", value, {
            ".capturedAt" => "[time]",
            ".capturedBy.version" => "[version]",
            ".host.kernelVersion" => "[kernel]",
            ".host.cpuArch" => "[arch]",
        });
    }

    #[test]
    fn a_bad_flag_is_refused() {
        assert!(parse_args(["--gpu".to_string()].into_iter()).is_err());
        assert!(parse_args(["a".to_string(), "b".to_string()].into_iter()).is_err());
    }
}

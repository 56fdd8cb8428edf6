//! Host facts: kernel release and CPU architecture, in the forms the checks compare.

use miggate_compat::{Host, VersionText};

/// The running kernel's release (`uname -r`), read from procfs; `None` off Linux or when
/// procfs is not mounted, which the checks treat as unknown.
pub fn kernel_release() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The CPU architecture in Kubernetes naming (`amd64`, `arm64`): the names a node's
/// `kubernetes.io/arch` label and the Go peer's `runtime.GOARCH` use.
pub fn cpu_arch() -> &'static str {
    kubernetes_arch(std::env::consts::ARCH)
}

/// Maps Rust's architecture names onto Kubernetes'.
pub fn kubernetes_arch(rust_arch: &'static str) -> &'static str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "arm" => "arm",
        "powerpc64" if cfg!(target_endian = "little") => "ppc64le",
        "s390x" => "s390x",
        "riscv64" => "riscv64",
        "loongarch64" => "loong64",
        other => other,
    }
}

/// This host's facts, with the node name when one is given.
pub fn host(node_name: Option<&str>) -> Host {
    Host {
        unknown: Default::default(),
        node_name: node_name.map(str::to_string),
        kernel_version: kernel_release().map(VersionText::new),
        cpu_arch: Some(cpu_arch().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures_use_kubernetes_names() {
        assert_eq!(kubernetes_arch("x86_64"), "amd64");
        assert_eq!(kubernetes_arch("aarch64"), "arm64");
        let ppc = if cfg!(target_endian = "little") {
            "ppc64le"
        } else {
            "powerpc64"
        };
        assert_eq!(kubernetes_arch("powerpc64"), ppc);
    }

    #[test]
    fn this_host_reads() {
        let h = host(Some("node-1"));
        assert_eq!(h.node_name.as_deref(), Some("node-1"));
        assert_eq!(
            h.cpu_arch.as_deref(),
            Some(kubernetes_arch(std::env::consts::ARCH))
        );
        if cfg!(target_os = "linux") {
            // The same release `uname -r` prints.
            let uname = std::process::Command::new("uname")
                .arg("-r")
                .output()
                .expect("uname runs");
            let want = String::from_utf8_lossy(&uname.stdout).trim().to_string();
            assert_eq!(h.kernel_version.map(|v| v.to_string()), Some(want));
        }
    }
}

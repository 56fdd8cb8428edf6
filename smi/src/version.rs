//! `nvidia-smi --version`.

use miggate_compat::VersionText;

/// The CUDA version from `nvidia-smi --version` (`CUDA Version : 13.0`); `None` when the text
/// names none (an older nvidia-smi that does not know `--version` says so instead).
pub fn cuda_version(text: &str) -> Option<VersionText> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        let value = value.trim();
        (key.trim().eq_ignore_ascii_case("CUDA Version") && !value.is_empty())
            .then(|| VersionText::new(value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_cuda_version() {
        let text = "NVIDIA-SMI version  : 580.82.07\nNVML version        : 580.82\nDRIVER version      : 580.82.07\nCUDA Version        : 13.0\n";
        assert_eq!(cuda_version(text).map(|v| v.to_string()).as_deref(), Some("13.0"));
        assert_eq!(cuda_version("nvidia-smi: unrecognized option"), None);
    }
}

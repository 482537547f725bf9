//! NVIDIA's `cutlass_profiler`, when it is installed: run with the original SGEMM settings so
//! its figures can be shown beside pog's. pog does not need it; it is a second opinion.

use crate::exec;
use std::path::PathBuf;
use std::time::Duration;

/// The program's name on PATH.
pub const PROGRAM: &str = "cutlass_profiler";

/// Where `cutlass_profiler` is, if it is on PATH.
pub fn find() -> Option<PathBuf> {
    exec::find_program(PROGRAM)
}

/// Runs the SGEMM profile over m, n, k ∈ `sizes` and returns the CSV it wrote.
pub fn run_sgemm(
    binary: &std::path::Path,
    sizes: &[u64],
    timeout: Duration,
) -> Result<String, String> {
    let dir = std::env::temp_dir().join(format!("pog-cutlass-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let list = sizes
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let output = dir.join("sgemm");
    let args = [
        "--operation=Gemm".to_string(),
        "--kernels=sgemm".to_string(),
        format!("--m={list}"),
        format!("--n={list}"),
        format!("--k={list}"),
        "--verification-enabled=false".to_string(),
        format!("--output={}", output.display()),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = exec::run_with_timeout(binary, &args, timeout).and_then(|_| {
        // The profiler appends the operation kind to the file name.
        let csv = dir.join("sgemm.gemm.csv");
        std::fs::read_to_string(&csv)
            .map_err(|e| format!("{PROGRAM} wrote no {}: {e}", csv.display()))
    });
    let _ = std::fs::remove_dir_all(&dir);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn runs_a_profiler_and_returns_its_csv() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join(PROGRAM);
        // Writes a CSV named after --output, as cutlass_profiler does, echoing the sizes asked.
        let script = "#!/bin/sh\nfor a in \"$@\"; do case $a in --output=*) out=${a#--output=};; --m=*) m=${a#--m=};; esac; done\n\
                      printf 'Operation,Status,m\\nsgemm,success,%s\\n' \"$m\" > \"$out.gemm.csv\"\n";
        std::fs::write(&fake, script).unwrap();
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let csv = run_sgemm(&fake, &[8192, 16384], Duration::from_secs(10)).unwrap();
        assert!(csv.contains("sgemm,success,8192,16384"), "{csv}");
        // A profiler that writes nothing is an error, not a panic.
        std::fs::write(&fake, "#!/bin/sh\nexit 0\n").unwrap();
        assert!(run_sgemm(&fake, &[64], Duration::from_secs(10))
            .unwrap_err()
            .contains("wrote no"));
    }
}

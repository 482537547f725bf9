//! NVIDIA's `cutlass_profiler`, when it is installed: run with the original SGEMM settings so
//! its figures can be shown beside pog's. pog does not need it; it is a second opinion.

use crate::exec::{self, ExecError};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The program's name on PATH.
pub const PROGRAM: &str = "cutlass_profiler";

/// Why the profiler gave no CSV.
#[derive(Debug, thiserror::Error)]
pub enum ProfilerError {
    /// The private directory for the profiler's output could not be made.
    #[error(
        "cannot create a directory for {PROGRAM}'s output in {}: {error}; \
         set TMPDIR to a writable directory",
        dir.display()
    )]
    OutputDir {
        /// The temporary directory it was to be made in.
        dir: PathBuf,
        /// Why it could not.
        error: std::io::Error,
    },
    /// The profiler could not be run, or failed.
    #[error(transparent)]
    Run(#[from] ExecError),
    /// The profiler exited cleanly but its CSV is not where `--output` asked for it.
    #[error("{PROGRAM} wrote no {}: {error}", csv.display())]
    NoCsv {
        /// Where the CSV was expected.
        csv: PathBuf,
        /// Why it could not be read.
        error: std::io::Error,
    },
}

/// Where `cutlass_profiler` is, if it is on PATH.
pub fn find() -> Option<PathBuf> {
    exec::find_program(PROGRAM)
}

/// Runs the SGEMM profile over m, n, k ∈ `sizes` and returns the CSV it wrote. The profiler
/// writes into a private temporary directory (random name, mode 0700), removed afterwards.
pub fn run_sgemm(binary: &Path, sizes: &[u64], timeout: Duration) -> Result<String, ProfilerError> {
    let dir = tempfile::Builder::new()
        .prefix("pog-cutlass-")
        .tempdir()
        .map_err(|error| ProfilerError::OutputDir {
            dir: std::env::temp_dir(),
            error,
        })?;
    let list = sizes
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let output = dir.path().join("sgemm");
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
    exec::run_with_timeout(binary, &args, timeout)?;
    // The profiler appends the operation kind to the file name.
    let csv = dir.path().join("sgemm.gemm.csv");
    std::fs::read_to_string(&csv).map_err(|error| ProfilerError::NoCsv { csv, error })
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
        let err = run_sgemm(&fake, &[64], Duration::from_secs(10)).unwrap_err();
        assert!(matches!(err, ProfilerError::NoCsv { .. }), "{err}");
        assert!(
            err.to_string().starts_with("cutlass_profiler wrote no "),
            "{err}"
        );
        // A failing profiler's own words come through once.
        std::fs::write(&fake, "#!/bin/sh\necho 'no GPU' >&2\nexit 1\n").unwrap();
        let err = run_sgemm(&fake, &[64], Duration::from_secs(10)).unwrap_err();
        assert!(
            matches!(err, ProfilerError::Run(ExecError::Failed { .. })),
            "{err}"
        );
        assert_eq!(err.to_string().matches("no GPU").count(), 1, "{err}");
    }
}

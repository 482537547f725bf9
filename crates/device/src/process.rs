//! What sits between pog and the driver inside this process: preloaded libraries, and the
//! NVIDIA library files actually mapped (a shim can answer under the right name from the
//! wrong place).

use crate::facts::{LoadedLibrary, ProcessEnv};
use crate::reading::Reading;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Library file names whose mapped location pog reports.
const WATCHED_LIBRARIES: [&str; 2] = ["libnvidia-ml.so", "libcuda.so"];

/// Reads the process environment. Call it *after* NVML and CUDA were loaded, or the maps
/// will not list them yet.
pub fn read(etc_root: &Path, proc_self: &Path) -> ProcessEnv {
    let preload_file = etc_root.join("ld.so.preload");
    let ld_so_preload = match std::fs::read_to_string(&preload_file) {
        Ok(text) => Reading::Value(parse_ld_so_preload(&text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Reading::Value(Vec::new()),
        Err(e) => Reading::unavailable(format!("{}: {e}", preload_file.display())),
    };
    let maps_file = proc_self.join("maps");
    let nvidia_libraries = match std::fs::read_to_string(&maps_file) {
        Ok(maps) => Reading::Value(
            nvidia_library_paths(&maps)
                .into_iter()
                .map(|path| describe_library(&path))
                .collect(),
        ),
        Err(e) => Reading::unavailable(format!("{}: {e}", maps_file.display())),
    };
    ProcessEnv {
        ld_preload: std::env::var("LD_PRELOAD")
            .ok()
            .filter(|v| !v.trim().is_empty()),
        ld_so_preload,
        nvidia_libraries,
    }
}

/// Entries of `/etc/ld.so.preload`: whitespace-separated paths, `#` comments.
pub fn parse_ld_so_preload(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .flat_map(str::split_whitespace)
        .map(str::to_string)
        .collect()
}

/// The distinct mapped files (sixth column of `/proc/<pid>/maps`) whose name contains one of
/// the watched library names, in first-mapped order.
pub fn nvidia_library_paths(maps: &str) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for line in maps.lines() {
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        let file_name = path.rsplit('/').next().unwrap_or(path);
        if WATCHED_LIBRARIES
            .iter()
            .any(|lib| file_name.starts_with(lib))
            && !paths.iter().any(|p| p == path)
        {
            paths.push(path.to_string());
        }
    }
    paths
}

fn describe_library(path: &str) -> LoadedLibrary {
    let meta = std::fs::metadata(path).map_err(|e| format!("{path}: {e}"));
    LoadedLibrary {
        path: path.to_string(),
        owner_uid: meta.as_ref().map(|m| m.uid()).map_err(Clone::clone).into(),
        mode: meta.map(|m| m.mode() & 0o7777).into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_nvidia_library_once() {
        let maps = "\
7f1c2a000000-7f1c2a100000 r--p 00000000 fd:01 123 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.159.04
7f1c2a100000-7f1c2a200000 r-xp 00100000 fd:01 123 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.159.04
7f1c2b000000-7f1c2b100000 r--p 00000000 fd:01 124 /usr/local/nvidia/lib64/libcuda.so.580.159.04
7f1c2c000000-7f1c2c100000 r--p 00000000 fd:01 125 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
";
        assert_eq!(
            nvidia_library_paths(maps),
            vec![
                "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.159.04",
                "/usr/local/nvidia/lib64/libcuda.so.580.159.04"
            ]
        );
        assert!(nvidia_library_paths("garbage\n\n1 2 3").is_empty());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_maps_and_preload_files_never_panic(text in "(?s).{0,400}") {
            let _ = nvidia_library_paths(&text);
            let _ = parse_ld_so_preload(&text);
        }
    }

    #[test]
    fn preload_file_syntax() {
        assert_eq!(
            parse_ld_so_preload("# comment\n/lib/a.so /lib/b.so\n\n/lib/c.so # trailing\n"),
            vec!["/lib/a.so", "/lib/b.so", "/lib/c.so"]
        );
    }

    #[test]
    fn reads_this_process() {
        let etc = tempfile::tempdir().unwrap();
        std::fs::write(etc.path().join("ld.so.preload"), "/tmp/shim.so\n").unwrap();
        let env = read(etc.path(), Path::new("/proc/self"));
        assert_eq!(
            env.ld_so_preload,
            Reading::Value(vec!["/tmp/shim.so".to_string()])
        );
        // No NVIDIA library is loaded by a unit test.
        assert_eq!(env.nvidia_libraries, Reading::Value(vec![]));
        let gone = read(etc.path(), Path::new("/no/such/proc"));
        assert!(matches!(gone.nvidia_libraries, Reading::Unavailable(_)));
    }
}

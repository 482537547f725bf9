//! Running external programs (nvidia-smi) without ever hanging: a time-out kills the child,
//! and output is drained on a thread so a chatty child cannot block on a full pipe.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

/// Output above this is cut off: no honest report is anywhere near it.
const MAX_OUTPUT_BYTES: u64 = 64 << 20;

/// Finds a program the way a shell would: a path with a slash is taken as is, a bare name is
/// looked up on `PATH`.
pub fn find_program(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Runs `program args…`, returns its standard output if it exits 0 within `timeout`.
/// Errors say what went wrong in words fit for a report.
pub fn run_with_timeout(
    program: &Path,
    args: &[&str],
    timeout: Duration,
) -> Result<String, String> {
    let mut child = spawn_retrying(program, args)?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(pipe) = pipe {
                let _ = pipe.take(MAX_OUTPUT_BYTES).read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let status = match child.wait_timeout(timeout) {
        Ok(Some(status)) => status,
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "{} did not answer within {:.1} s and was killed",
                program.display(),
                timeout.as_secs_f64()
            ));
        }
        Err(e) => return Err(format!("waiting for {}: {e}", program.display())),
    };
    // The child has exited; its pipes close, so the drains finish. A grandchild that kept a
    // pipe open could still hold them, so never wait for those longer than the time-out.
    let out = join_within(stdout, timeout).unwrap_or_default();
    let err = join_within(stderr, timeout).unwrap_or_default();
    if !status.success() {
        let msg = String::from_utf8_lossy(&err);
        return Err(format!(
            "{} exited with {status}: {}",
            program.display(),
            msg.trim().lines().next().unwrap_or("no message")
        ));
    }
    String::from_utf8(out).map_err(|_| format!("{} printed invalid UTF-8", program.display()))
}

/// Linux's ETXTBSY: the executable is open for writing somewhere, typically in a process that
/// forked while a script was being written and has not exec'd yet. It clears by itself.
const TEXT_FILE_BUSY: i32 = 26;

/// Spawns the program, retrying briefly while its file is "busy".
fn spawn_retrying(program: &Path, args: &[&str]) -> Result<std::process::Child, String> {
    let mut attempt = 0;
    loop {
        match Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
        {
            Ok(child) => return Ok(child),
            Err(e) if e.raw_os_error() == Some(TEXT_FILE_BUSY) && attempt < 20 => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(format!("could not start {}: {e}", program.display())),
        }
    }
}

fn join_within(handle: std::thread::JoinHandle<Vec<u8>>, timeout: Duration) -> Option<Vec<u8>> {
    let deadline = std::time::Instant::now() + timeout;
    while !handle.is_finished() {
        if std::time::Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    handle.join().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hanging_program_is_killed_in_time() {
        let started = std::time::Instant::now();
        let err = run_with_timeout(Path::new("/bin/sleep"), &["30"], Duration::from_millis(200))
            .unwrap_err();
        assert!(err.contains("did not answer"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn output_failure_and_absence_are_reported() {
        let sh = Path::new("/bin/sh");
        assert_eq!(
            run_with_timeout(sh, &["-c", "echo hi"], Duration::from_secs(10)).unwrap(),
            "hi\n"
        );
        let err = run_with_timeout(
            sh,
            &["-c", "echo boom >&2; exit 3"],
            Duration::from_secs(10),
        )
        .unwrap_err();
        assert!(err.contains("boom"), "{err}");
        let err =
            run_with_timeout(Path::new("/no/such/prog"), &[], Duration::from_secs(1)).unwrap_err();
        assert!(err.contains("could not start"), "{err}");
        assert!(find_program("sh").is_some());
        assert!(find_program("no-such-program-pog").is_none());
    }
}

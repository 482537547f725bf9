//! Running external programs (nvidia-smi) without ever hanging: a time-out kills the child,
//! and output is drained on a thread so a chatty child cannot block on a full pipe.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

/// Output above this is refused: no honest report is anywhere near it.
const MAX_OUTPUT_BYTES: u64 = 64 << 20;

/// Why an external program gave no output to use. Each message names the program.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// There is no file at the program's path.
    #[error("could not start {}: no such file; install it or give its full path", program.display())]
    NotFound {
        /// The program, as it was given.
        program: PathBuf,
    },
    /// The program exists but could not be started (not executable, out of processes, …).
    #[error("could not start {}: {error}", program.display())]
    Start {
        /// The program, as it was given.
        program: PathBuf,
        /// Why it could not be started.
        error: std::io::Error,
    },
    /// Waiting for the program failed.
    #[error("waiting for {}: {error}", program.display())]
    Wait {
        /// The program, as it was given.
        program: PathBuf,
        /// Why waiting failed.
        error: std::io::Error,
    },
    /// The program did not exit within the time-out and was killed.
    #[error(
        "{} did not answer within {:.1} s and was killed",
        program.display(),
        timeout.as_secs_f64()
    )]
    TimedOut {
        /// The program, as it was given.
        program: PathBuf,
        /// How long it was given.
        timeout: Duration,
    },
    /// The program exited unsuccessfully; `stderr` is the first line it printed there.
    #[error("{} exited with {status}: {stderr}", program.display())]
    Failed {
        /// The program, as it was given.
        program: PathBuf,
        /// How it exited.
        status: ExitStatus,
        /// The first line of its standard error, or "no message".
        stderr: String,
    },
    /// The program printed more than [`MAX_OUTPUT_BYTES`] on its standard output.
    #[error(
        "{} printed more than {} MiB; that is no report",
        program.display(),
        MAX_OUTPUT_BYTES >> 20
    )]
    TooLarge {
        /// The program, as it was given.
        program: PathBuf,
    },
    /// The program's standard output is not UTF-8.
    #[error("{} printed invalid UTF-8", program.display())]
    NotUtf8 {
        /// The program, as it was given.
        program: PathBuf,
    },
}

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
pub fn run_with_timeout(
    program: &Path,
    args: &[&str],
    timeout: Duration,
) -> Result<String, ExecError> {
    let mut child = spawn_retrying(program, args)?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = match child.wait_timeout(timeout) {
        Ok(Some(status)) => status,
        Ok(None) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ExecError::TimedOut {
                program: program.to_path_buf(),
                timeout,
            });
        }
        Err(error) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ExecError::Wait {
                program: program.to_path_buf(),
                error,
            });
        }
    };
    // The child has exited; its pipes close, so the drains finish. A grandchild that kept a
    // pipe open could still hold them, so never wait for those longer than the time-out.
    let (out, out_overflowed) = join_within(stdout, timeout).unwrap_or_default();
    let (err, _) = join_within(stderr, timeout).unwrap_or_default();
    if !status.success() {
        let msg = String::from_utf8_lossy(&err);
        return Err(ExecError::Failed {
            program: program.to_path_buf(),
            status,
            stderr: msg
                .trim()
                .lines()
                .next()
                .unwrap_or("no message")
                .to_string(),
        });
    }
    if out_overflowed {
        return Err(ExecError::TooLarge {
            program: program.to_path_buf(),
        });
    }
    String::from_utf8(out).map_err(|_| ExecError::NotUtf8 {
        program: program.to_path_buf(),
    })
}

/// Reads a pipe to its end on a thread. The first [`MAX_OUTPUT_BYTES`] are kept; the rest is
/// read and dropped, so the child never blocks on a full pipe, and marked as an overflow.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut overflowed = false;
        if let Some(pipe) = pipe {
            let mut head = pipe.take(MAX_OUTPUT_BYTES + 1);
            let _ = head.read_to_end(&mut buf);
            if buf.len() as u64 > MAX_OUTPUT_BYTES {
                buf.truncate(MAX_OUTPUT_BYTES as usize);
                overflowed = true;
                let _ = std::io::copy(&mut head.into_inner(), &mut std::io::sink());
            }
        }
        (buf, overflowed)
    })
}

/// Linux's ETXTBSY: the executable is open for writing somewhere, typically in a process that
/// forked while a script was being written and has not exec'd yet. It clears by itself.
const TEXT_FILE_BUSY: i32 = 26;

/// Spawns the program, retrying briefly while its file is "busy".
fn spawn_retrying(program: &Path, args: &[&str]) -> Result<std::process::Child, ExecError> {
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
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ExecError::NotFound {
                    program: program.to_path_buf(),
                })
            }
            Err(error) => {
                return Err(ExecError::Start {
                    program: program.to_path_buf(),
                    error,
                })
            }
        }
    }
}

fn join_within<T>(handle: std::thread::JoinHandle<T>, timeout: Duration) -> Option<T> {
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
        assert!(matches!(err, ExecError::TimedOut { .. }), "{err}");
        assert!(
            err.to_string()
                .ends_with("did not answer within 0.2 s and was killed"),
            "{err}"
        );
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
        assert!(matches!(err, ExecError::Failed { .. }), "{err}");
        assert_eq!(err.to_string(), "/bin/sh exited with exit status: 3: boom");
        let err =
            run_with_timeout(Path::new("/no/such/prog"), &[], Duration::from_secs(1)).unwrap_err();
        assert!(matches!(err, ExecError::NotFound { .. }), "{err}");
        assert!(
            err.to_string().starts_with("could not start /no/such/prog"),
            "{err}"
        );
        assert!(find_program("sh").is_some());
        assert!(find_program("no-such-program-pog").is_none());
    }

    #[test]
    fn endless_output_is_refused_without_blocking_the_child() {
        let script = format!("head -c {} /dev/zero", MAX_OUTPUT_BYTES + 1);
        let err = run_with_timeout(
            Path::new("/bin/sh"),
            &["-c", &script],
            Duration::from_secs(30),
        )
        .unwrap_err();
        assert!(matches!(err, ExecError::TooLarge { .. }), "{err}");
    }
}

//! Lease delivery (issue 25, item 2): the agent follows its GPUs' leases at its validator
//! (`GET /v1/market/leases`) and runs the operator's hook (`pog agent --lease-hook PATH`) to
//! grant the renter access when a lease starts and to revoke it when it ends.
//!
//! The hook is any program: `PATH grant` or `PATH revoke`, the lease as JSON on its standard
//! input (id, GPU, renter and provider keys, start, end, hours, price). Whatever it does (add
//! the renter's SSH key, start a container) is the operator's; pog holds it to a time limit
//! ([`HOOK_TIMEOUT`]), reads at most [`HOOK_OUTPUT_BYTES`] of what it prints, and counts only
//! its exit status: a hook that fails, hangs or prints garbage marks the lease failed, and the
//! failure is kept (and logged) rather than retried forever.
//!
//! What was done for each lease is kept in a small state file ([`Deliveries`]) so that a
//! restarted agent neither grants twice nor forgets to revoke.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a hook may run before it is killed and the lease marked failed.
pub const HOOK_TIMEOUT: Duration = Duration::from_secs(30);

/// The most of a hook's output (stdout and stderr each) that is read and kept.
pub const HOOK_OUTPUT_BYTES: usize = 16 << 10;

/// What the hook is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookAction {
    /// Give the renter access to the GPU (the lease started).
    Grant,
    /// Take it away (the lease ended).
    Revoke,
}

impl HookAction {
    /// The hook's first argument.
    pub fn name(self) -> &'static str {
        match self {
            HookAction::Grant => "grant",
            HookAction::Revoke => "revoke",
        }
    }
}

/// Why a hook run failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// The hook could not be started.
    #[error("the lease hook {path} could not be started: {why}")]
    Start {
        /// The hook.
        path: String,
        /// The operating system's words.
        why: String,
    },
    /// The hook ran past [`HOOK_TIMEOUT`] and was killed.
    #[error("the lease hook {path} {action} did not finish in {timeout_s} s: killed")]
    Timeout {
        /// The hook.
        path: String,
        /// The action.
        action: &'static str,
        /// The limit, s.
        timeout_s: u64,
    },
    /// The hook exited with a failure.
    #[error("the lease hook {path} {action} failed ({status}): {stderr}")]
    Failed {
        /// The hook.
        path: String,
        /// The action.
        action: &'static str,
        /// Its exit status.
        status: String,
        /// The end of what it printed on stderr (lossy, at most a line's worth).
        stderr: String,
    },
}

/// The operator's lease hook.
#[derive(Debug, Clone)]
pub struct Hook {
    /// The program.
    pub path: PathBuf,
    /// How long a run may take.
    pub timeout: Duration,
}

/// `ETXTBSY`: the executable is open for writing somewhere.
const TEXT_BUSY: i32 = 26;

/// How many times a hook refused as busy (`ETXTBSY`) is started again, 20 ms apart.
const TEXT_BUSY_RETRIES: u32 = 50;

impl Hook {
    /// Runs the hook for `action` with `lease` (JSON) on its standard input; its standard
    /// output (lossy text, at most [`HOOK_OUTPUT_BYTES`]) when it exits 0. Blocks: call it off
    /// the async runtime's workers.
    pub fn run(&self, action: HookAction, lease: &[u8]) -> Result<String, HookError> {
        let path = self.path.display().to_string();
        let spawn = || {
            Command::new(&self.path)
                .arg(action.name())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
        };
        // A hook just written (an operator's deploy, a test) may be held open for writing a
        // moment longer by a process another thread forked meanwhile: Linux refuses to run
        // it then (ETXTBSY), so that case is tried again for a moment.
        let mut started = spawn();
        for _ in 0..TEXT_BUSY_RETRIES {
            match &started {
                Err(e) if e.raw_os_error() == Some(TEXT_BUSY) => {
                    std::thread::sleep(Duration::from_millis(20));
                    started = spawn();
                }
                _ => break,
            }
        }
        let mut child = started.map_err(|e| HookError::Start {
            path: path.clone(),
            why: e.to_string(),
        })?;
        // Input and output on threads of their own: a hook that neither reads nor finishes
        // cannot block the agent, and one that prints without end is read only so far.
        let input = lease.to_vec();
        let mut stdin = child.stdin.take();
        let writer = std::thread::spawn(move || {
            if let Some(stdin) = stdin.as_mut() {
                let _ = stdin.write_all(&input);
            }
        });
        let bounded = |pipe: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut kept = Vec::new();
                if let Some(mut pipe) = pipe {
                    let _ = (&mut pipe)
                        .take(HOOK_OUTPUT_BYTES as u64)
                        .read_to_end(&mut kept);
                    // The rest is drained unread, so the hook never blocks on a full pipe.
                    let _ = std::io::copy(&mut pipe, &mut std::io::sink());
                }
                String::from_utf8_lossy(&kept).into_owned()
            })
        };
        let stdout = bounded(
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let stderr = bounded(
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let started = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if started.elapsed() >= self.timeout => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(HookError::Timeout {
                        path,
                        action: action.name(),
                        timeout_s: self.timeout.as_secs(),
                    });
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => {
                    let _ = child.kill();
                    return Err(HookError::Start {
                        path,
                        why: e.to_string(),
                    });
                }
            }
        };
        let _ = writer.join();
        let out = stdout.join().unwrap_or_default();
        let err = stderr.join().unwrap_or_default();
        if !status.success() {
            let tail: String = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("(nothing on stderr)")
                .chars()
                .filter(|c| !c.is_control())
                .take(200)
                .collect();
            return Err(HookError::Failed {
                path,
                action: action.name(),
                status: status.to_string(),
                stderr: tail,
            });
        }
        Ok(out)
    }
}

/// What the agent did for one lease.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// When access was granted, Unix ms.
    pub granted_ms: Option<u64>,
    /// When it was revoked, Unix ms.
    pub revoked_ms: Option<u64>,
    /// Why delivering it failed (then nothing more is tried).
    pub failed: Option<String>,
    /// When the grant failed, Unix ms: the renter has had no access since.
    #[serde(default)]
    pub failed_ms: Option<u64>,
    /// When the validator took the report that the grant failed, Unix ms (the report goes
    /// again at every round until then).
    #[serde(default)]
    pub reported_ms: Option<u64>,
}

/// What the agent did for each lease of its GPUs, kept in a file (`DATA_DIR/leases.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deliveries {
    /// By lease id.
    pub leases: BTreeMap<String, Delivery>,
}

/// The state file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("the lease state {path}: {why}")]
pub struct DeliveriesError {
    /// The file.
    pub path: String,
    /// What went wrong.
    pub why: String,
}

impl Deliveries {
    /// Reads the state at `path` (empty when there is none yet). A file that is not this
    /// state is an error naming it, never a silent reset (a reset would grant again).
    pub fn load(path: &Path) -> Result<Deliveries, DeliveriesError> {
        let bad = |why: String| DeliveriesError {
            path: path.display().to_string(),
            why,
        };
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Deliveries::default()),
            Err(e) => Err(bad(e.to_string())),
        }
    }

    /// Writes the state to `path`, atomically (a temporary file renamed over it).
    pub fn save(&self, path: &Path) -> Result<(), DeliveriesError> {
        let bad = |why: String| DeliveriesError {
            path: path.display().to_string(),
            why,
        };
        let text = serde_json::to_vec_pretty(self).map_err(|e| bad(e.to_string()))?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(|e| bad(e.to_string()))?;
        std::fs::rename(&tmp, path).map_err(|e| bad(e.to_string()))
    }

    /// What is due for the lease `id`, now in `state` ("pending", "active", "ended" as the
    /// validator says): a grant once it is active, a revoke once it ended if it was granted;
    /// nothing for a failed lease, or one that ended before it was ever granted.
    pub fn due(&self, id: &str, state: &str) -> Option<HookAction> {
        let done = self.leases.get(id);
        if done.is_some_and(|d| d.failed.is_some()) {
            return None;
        }
        let granted = done.is_some_and(|d| d.granted_ms.is_some());
        let revoked = done.is_some_and(|d| d.revoked_ms.is_some());
        match state {
            "active" if !granted => Some(HookAction::Grant),
            "ended" if granted && !revoked => Some(HookAction::Revoke),
            _ => None,
        }
    }

    /// Records what a hook run for lease `id` came to, at `now_ms`.
    pub fn record(
        &mut self,
        id: &str,
        action: HookAction,
        result: &Result<String, HookError>,
        now_ms: u64,
    ) {
        let d = self.leases.entry(id.to_string()).or_default();
        match (action, result) {
            (HookAction::Grant, Ok(_)) => d.granted_ms = Some(now_ms),
            (HookAction::Revoke, Ok(_)) => d.revoked_ms = Some(now_ms),
            (HookAction::Grant, Err(e)) => {
                d.failed = Some(e.to_string());
                d.failed_ms = Some(now_ms);
            }
            // A revoke that failed leaves the renter with access: the provider's loss, nothing
            // to report for the renter's refund.
            (HookAction::Revoke, Err(e)) => d.failed = Some(e.to_string()),
        }
    }

    /// The grants that failed and the validator has not yet taken the report of: (lease id,
    /// since when, why), for the settlement's refund.
    pub fn unreported(&self) -> Vec<(String, u64, String)> {
        self.leases
            .iter()
            .filter(|(_, d)| d.reported_ms.is_none())
            .filter_map(|(id, d)| Some((id.clone(), d.failed_ms?, d.failed.clone()?)))
            .collect()
    }

    /// Marks the report of lease `id`'s failed grant taken at `now_ms`.
    pub fn reported(&mut self, id: &str, now_ms: u64) {
        if let Some(d) = self.leases.get_mut(id) {
            d.reported_ms = Some(now_ms);
        }
    }
}

/// One lease as the validator lists it, as much as delivering it needs.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The lease's id.
    pub id: String,
    /// Its GPU.
    pub gpu: String,
    /// Its provider's key (hex).
    pub provider: String,
    /// Its state at the validator ("pending", "active", "ended").
    pub state: String,
    /// The lease as JSON, for the hook's standard input.
    pub json: Vec<u8>,
}

/// One round of delivery: for each of `listed` (oldest first) that is this agent's
/// (`provider`, one of `gpus`) and due ([`Deliveries::due`]), runs the hook and records the
/// outcome at `now_ms`. Returns what was run: (lease id, action, outcome). Blocks (the hooks
/// run): call it off the async runtime's workers.
pub fn deliver(
    listed: &[Listed],
    provider: &str,
    gpus: &std::collections::BTreeSet<String>,
    hook: &Hook,
    deliveries: &mut Deliveries,
    now_ms: u64,
) -> Vec<(String, HookAction, Result<String, HookError>)> {
    let mut ran = Vec::new();
    for lease in listed {
        if !lease.provider.eq_ignore_ascii_case(provider) || !gpus.contains(&lease.gpu) {
            continue;
        }
        let Some(action) = deliveries.due(&lease.id, &lease.state) else {
            continue;
        };
        let result = hook.run(action, &lease.json);
        deliveries.record(&lease.id, action, &result, now_ms);
        ran.push((lease.id.clone(), action, result));
    }
    ran
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A hook script in `dir` with `body` (sh).
    fn hook(dir: &Path, body: &str, timeout: Duration) -> Hook {
        let path = dir.join("hook.sh");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        Hook { path, timeout }
    }

    #[test]
    fn a_hook_gets_its_action_and_the_lease_and_its_exit_status_decides() {
        let dir = tempfile::tempdir().unwrap();
        let ok = hook(dir.path(), r#"read lease; echo "$1 $lease""#, HOOK_TIMEOUT);
        assert_eq!(
            ok.run(HookAction::Grant, b"{\"id\":\"0.0.0\"}\n").unwrap(),
            "grant {\"id\":\"0.0.0\"}\n"
        );
        let failing = hook(dir.path(), "echo no such user >&2; exit 3", HOOK_TIMEOUT);
        let e = failing.run(HookAction::Revoke, b"{}").unwrap_err();
        assert!(
            matches!(&e, HookError::Failed { action: "revoke", stderr, .. } if stderr == "no such user"),
            "{e}"
        );
        let missing = Hook {
            path: dir.path().join("absent"),
            timeout: HOOK_TIMEOUT,
        };
        assert!(matches!(
            missing.run(HookAction::Grant, b"{}"),
            Err(HookError::Start { .. })
        ));
    }

    #[test]
    fn a_hook_that_hangs_is_killed_and_one_that_prints_without_end_is_read_so_far() {
        let dir = tempfile::tempdir().unwrap();
        let hangs = hook(dir.path(), "sleep 30", Duration::from_millis(300));
        let started = Instant::now();
        assert!(matches!(
            hangs.run(HookAction::Grant, b"{}"),
            Err(HookError::Timeout { .. })
        ));
        assert!(started.elapsed() < Duration::from_secs(5));
        let garbage = hook(
            dir.path(),
            "head -c 1000000 /dev/urandom; exit 0",
            HOOK_TIMEOUT,
        );
        let out = garbage.run(HookAction::Grant, b"{}").unwrap();
        assert!(out.len() <= HOOK_OUTPUT_BYTES * 3, "{}", out.len());
    }

    #[test]
    fn a_round_delivers_only_this_agents_leases_and_each_step_once() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let h = hook(
            dir.path(),
            &format!(r#"read lease; echo "$1 $lease" >> {}"#, log.display()),
            HOOK_TIMEOUT,
        );
        let gpus: std::collections::BTreeSet<String> = ["GPU-1".to_string()].into();
        let listed = |state: &str| {
            vec![
                Listed {
                    id: "0.0.0".into(),
                    gpu: "GPU-1".into(),
                    provider: "AB".into(),
                    state: state.into(),
                    json: b"{\"id\":\"0.0.0\"}\n".to_vec(),
                },
                // Another agent's lease, and a GPU this agent does not serve.
                Listed {
                    id: "0.1.0".into(),
                    gpu: "GPU-1".into(),
                    provider: "cd".into(),
                    state: state.into(),
                    json: b"{}\n".to_vec(),
                },
                Listed {
                    id: "0.2.0".into(),
                    gpu: "GPU-9".into(),
                    provider: "ab".into(),
                    state: state.into(),
                    json: b"{}\n".to_vec(),
                },
            ]
        };
        let mut d = Deliveries::default();
        assert!(deliver(&listed("pending"), "ab", &gpus, &h, &mut d, 1).is_empty());
        let granted = deliver(&listed("active"), "ab", &gpus, &h, &mut d, 2);
        assert_eq!(granted.len(), 1);
        assert_eq!(
            (granted[0].0.as_str(), granted[0].1),
            ("0.0.0", HookAction::Grant)
        );
        assert!(deliver(&listed("active"), "ab", &gpus, &h, &mut d, 3).is_empty());
        let revoked = deliver(&listed("ended"), "ab", &gpus, &h, &mut d, 4);
        assert_eq!(revoked[0].1, HookAction::Revoke);
        assert!(deliver(&listed("ended"), "ab", &gpus, &h, &mut d, 5).is_empty());
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "grant {\"id\":\"0.0.0\"}\nrevoke {\"id\":\"0.0.0\"}\n"
        );
    }

    #[test]
    fn a_lease_is_granted_once_revoked_once_and_a_failure_ends_it() {
        let mut d = Deliveries::default();
        assert_eq!(d.due("1.0.0", "pending"), None);
        assert_eq!(d.due("1.0.0", "active"), Some(HookAction::Grant));
        d.record("1.0.0", HookAction::Grant, &Ok(String::new()), 10);
        assert_eq!(d.due("1.0.0", "active"), None);
        assert_eq!(d.due("1.0.0", "ended"), Some(HookAction::Revoke));
        d.record("1.0.0", HookAction::Revoke, &Ok(String::new()), 20);
        assert_eq!(d.due("1.0.0", "ended"), None);
        // Ended before it was ever granted (the agent was down): nothing to revoke.
        assert_eq!(d.due("2.0.0", "ended"), None);
        let failed = Err(HookError::Timeout {
            path: "h".into(),
            action: "grant",
            timeout_s: 30,
        });
        d.record("3.0.0", HookAction::Grant, &failed, 30);
        assert_eq!(d.due("3.0.0", "active"), None);
        assert_eq!(d.due("3.0.0", "ended"), None);
        // The failed grant is to be reported (for the renter's refund) until the validator
        // takes it; a failed revoke is not (the renter lost nothing).
        d.record("1.0.0", HookAction::Revoke, &failed, 40);
        let unreported = d.unreported();
        assert_eq!(unreported.len(), 1, "{unreported:?}");
        assert_eq!((unreported[0].0.as_str(), unreported[0].1), ("3.0.0", 30));
        assert!(unreported[0].2.contains("30 s"), "{unreported:?}");
        d.reported("3.0.0", 50);
        assert!(d.unreported().is_empty());
        // Kept across restarts; a corrupt file is an error naming it.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("leases.json");
        d.save(&path).unwrap();
        assert_eq!(Deliveries::load(&path).unwrap(), d);
        std::fs::write(&path, "not json").unwrap();
        let e = Deliveries::load(&path).unwrap_err();
        assert!(e.to_string().contains("leases.json"), "{e}");
        assert_eq!(
            Deliveries::load(&dir.path().join("none.json")).unwrap(),
            Deliveries::default()
        );
    }
}

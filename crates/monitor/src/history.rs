//! The embedded history: raw samples (24 h by default), 1-minute aggregates (30 days) and
//! alerts, in one SQLite file. Writes are batched: samples wait in memory until [`History::flush`]
//! (the monitor flushes every few seconds and on stop), so a clean stop loses nothing and a
//! killed process loses at most the batch in progress. The SQL is plain (no SQLite-only
//! types), so that a server database can take its place behind the same interface.

use crate::alert::Alert;
use crate::downsample::{Aggregate, Downsampler};
use crate::sample::{Sample, Signal};
use rusqlite::{params, Connection};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Why the history could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// SQLite refused (a corrupt or locked file, a full disk, …).
    #[error("monitor history {path}: {source}")]
    Sqlite {
        /// The database file.
        path: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
}

/// How long each kind of row is kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Retention {
    /// Raw samples.
    pub raw: Duration,
    /// 1-minute aggregates.
    pub minutes: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            raw: Duration::from_secs(24 * 3600),
            minutes: Duration::from_secs(30 * 24 * 3600),
        }
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS samples (
    gpu TEXT NOT NULL, t_unix REAL NOT NULL,
    temp_gpu REAL, temp_mem REAL, power_w REAL, energy_mj REAL, util_gpu REAL, util_mem REAL,
    mem_used_mib REAL, mem_free_mib REAL, mem_reserved_mib REAL, sm_clock REAL, mem_clock REAL,
    clock_reasons INTEGER, pcie_tx_kbs REAL, pcie_rx_kbs REAL, pcie_replay INTEGER,
    ecc_corr INTEGER, ecc_uncorr INTEGER, ecc_corr_aggregate INTEGER,
    ecc_uncorr_aggregate INTEGER, retired_pages INTEGER, remapped_rows INTEGER, fan_pct REAL,
    processes INTEGER, xid TEXT
);
CREATE INDEX IF NOT EXISTS samples_by_time ON samples (gpu, t_unix);
CREATE TABLE IF NOT EXISTS minutes (
    gpu TEXT NOT NULL, t_start REAL NOT NULL, signal TEXT NOT NULL,
    min REAL NOT NULL, mean REAL NOT NULL, max REAL NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (gpu, t_start, signal)
);
CREATE TABLE IF NOT EXISTS alerts (
    gpu TEXT NOT NULL, t_unix REAL NOT NULL, kind TEXT NOT NULL, severity TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS alerts_by_time ON alerts (gpu, t_unix);
CREATE TABLE IF NOT EXISTS levels (
    gpu TEXT NOT NULL, sensor INTEGER NOT NULL, reference REAL NOT NULL, offset REAL NOT NULL,
    learned_s REAL NOT NULL, t_unix REAL NOT NULL,
    PRIMARY KEY (gpu, sensor)
);
CREATE TABLE IF NOT EXISTS drift (
    gpu TEXT NOT NULL PRIMARY KEY, state TEXT NOT NULL, t_unix REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS response (
    gpu TEXT NOT NULL PRIMARY KEY, state TEXT NOT NULL, t_unix REAL NOT NULL
);
";

/// What a GPU has learned that the history keeps as one JSON text a GPU, each in its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// The slow-degradation watch ([`crate::Monitor::drift_state`]).
    Drift,
    /// The die's learned thermal response ([`crate::Monitor::response_state`]).
    Response,
}

impl Kept {
    /// Its table.
    fn table(self) -> &'static str {
        match self {
            Kept::Drift => "drift",
            Kept::Response => "response",
        }
    }
}

/// Counts of what is stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stored {
    /// Raw sample rows.
    pub samples: u64,
    /// Aggregate rows (one per GPU, minute and signal).
    pub minute_rows: u64,
    /// Alert rows.
    pub alerts: u64,
}

/// The history file, with the batch not yet written.
pub struct History {
    path: String,
    db: Connection,
    retention: Retention,
    pending: Vec<(String, f64, Sample)>,
    pending_alerts: Vec<(String, f64, Alert)>,
    pending_minutes: Vec<(String, Aggregate)>,
    minutes: BTreeMap<String, Downsampler>,
    last_pruned: f64,
}

impl History {
    /// Opens (or creates) the history at `path`.
    pub fn open(path: &Path, retention: Retention) -> Result<History, HistoryError> {
        let name = path.display().to_string();
        let fail = |source| HistoryError::Sqlite {
            path: name.clone(),
            source,
        };
        let db = Connection::open(path).map_err(fail)?;
        // WAL: a reader never blocks the writer; NORMAL: a committed batch survives the
        // process being killed (only a power loss can take the last one).
        db.busy_timeout(Duration::from_secs(2)).map_err(fail)?;
        db.pragma_update(None, "journal_mode", "WAL")
            .map_err(fail)?;
        db.pragma_update(None, "synchronous", "NORMAL")
            .map_err(fail)?;
        db.execute_batch(SCHEMA).map_err(fail)?;
        Ok(History {
            path: name,
            db,
            retention,
            pending: Vec::new(),
            pending_alerts: Vec::new(),
            pending_minutes: Vec::new(),
            minutes: BTreeMap::new(),
            last_pruned: f64::NEG_INFINITY,
        })
    }

    /// Keeps the thermal levels a GPU has learned (GPU die, memory: [`crate::Monitor::levels`]),
    /// so that the next run takes them up instead of learning them afresh.
    pub fn save_levels(
        &mut self,
        gpu: &str,
        levels: &[Option<crate::baseline::Level>; 2],
        t_unix: f64,
    ) -> Result<(), HistoryError> {
        let fail = |source| HistoryError::Sqlite {
            path: self.path.clone(),
            source,
        };
        for (sensor, level) in levels.iter().enumerate() {
            let Some(l) = level else {
                continue;
            };
            self.db
                .execute(
                    "INSERT INTO levels VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT (gpu, sensor) DO UPDATE SET reference = ?3, offset = ?4,
                     learned_s = ?5, t_unix = ?6",
                    params![
                        gpu,
                        sensor as i64,
                        l.reference,
                        l.offset,
                        l.learned_s,
                        t_unix
                    ],
                )
                .map_err(fail)?;
        }
        Ok(())
    }

    /// Keeps a GPU's slow-degradation watch ([`crate::Monitor::drift_state`], JSON), so that
    /// the next run goes on from it: a degradation over days is seen across restarts.
    pub fn save_drift(&mut self, gpu: &str, state: &str, t_unix: f64) -> Result<(), HistoryError> {
        self.save_kept(Kept::Drift, gpu, state, t_unix)
    }

    /// The slow-degradation watch kept for a GPU ([`History::save_drift`]), if any.
    pub fn drift(&self, gpu: &str) -> Result<Option<String>, HistoryError> {
        self.kept(Kept::Drift, gpu)
    }

    /// Keeps a GPU's learned thermal response (its die's time constants,
    /// [`crate::Monitor::response_state`], JSON), so that a restarted monitor does not judge
    /// its die's warm-ups without it until it sees new load steps.
    pub fn save_response(
        &mut self,
        gpu: &str,
        state: &str,
        t_unix: f64,
    ) -> Result<(), HistoryError> {
        self.save_kept(Kept::Response, gpu, state, t_unix)
    }

    /// The thermal response kept for a GPU ([`History::save_response`]), if any.
    pub fn response(&self, gpu: &str) -> Result<Option<String>, HistoryError> {
        self.kept(Kept::Response, gpu)
    }

    /// Writes (or replaces) a GPU's kept state of this kind.
    fn save_kept(
        &mut self,
        kind: Kept,
        gpu: &str,
        state: &str,
        t_unix: f64,
    ) -> Result<(), HistoryError> {
        self.db
            .execute(
                &format!(
                    "INSERT INTO {} VALUES (?1, ?2, ?3)
                     ON CONFLICT (gpu) DO UPDATE SET state = ?2, t_unix = ?3",
                    kind.table()
                ),
                params![gpu, state, t_unix],
            )
            .map_err(|source| self.fail(source))?;
        Ok(())
    }

    /// A GPU's kept state of this kind, if any.
    fn kept(&self, kind: Kept, gpu: &str) -> Result<Option<String>, HistoryError> {
        let mut stmt = self
            .db
            .prepare(&format!(
                "SELECT state FROM {} WHERE gpu = ?1",
                kind.table()
            ))
            .map_err(|e| self.fail(e))?;
        let mut rows = stmt.query(params![gpu]).map_err(|e| self.fail(e))?;
        match rows.next().map_err(|e| self.fail(e))? {
            Some(row) => Ok(Some(row.get(0).map_err(|e| self.fail(e))?)),
            None => Ok(None),
        }
    }

    /// The thermal levels kept for a GPU (GPU die, memory), as [`History::save_levels`] kept
    /// them; none where nothing was kept.
    pub fn levels(&self, gpu: &str) -> Result<[Option<crate::baseline::Level>; 2], HistoryError> {
        let mut levels = [None, None];
        let mut stmt = self
            .db
            .prepare("SELECT sensor, reference, offset, learned_s FROM levels WHERE gpu = ?1")
            .map_err(|source| HistoryError::Sqlite {
                path: self.path.clone(),
                source,
            })?;
        let rows = stmt
            .query_map(params![gpu], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    crate::baseline::Level {
                        reference: r.get(1)?,
                        offset: r.get(2)?,
                        learned_s: r.get(3)?,
                    },
                ))
            })
            .map_err(|source| HistoryError::Sqlite {
                path: self.path.clone(),
                source,
            })?;
        for row in rows {
            let (sensor, level) = row.map_err(|source| HistoryError::Sqlite {
                path: self.path.clone(),
                source,
            })?;
            if let Some(slot) = usize::try_from(sensor).ok().and_then(|s| levels.get_mut(s)) {
                *slot = Some(level);
            }
        }
        Ok(levels)
    }

    /// Opens an existing history to read it (the dashboard) while a monitor writes it: WAL
    /// lets the reader and the writer work at once.
    pub fn open_read_only(path: &Path) -> Result<History, HistoryError> {
        let name = path.display().to_string();
        let db = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .and_then(|db| db.busy_timeout(Duration::from_secs(2)).map(|()| db))
            .map_err(|source| HistoryError::Sqlite {
                path: name.clone(),
                source,
            })?;
        Ok(History {
            path: name,
            db,
            retention: Retention::default(),
            pending: Vec::new(),
            pending_alerts: Vec::new(),
            pending_minutes: Vec::new(),
            minutes: BTreeMap::new(),
            last_pruned: f64::NEG_INFINITY,
        })
    }

    fn fail(&self, source: rusqlite::Error) -> HistoryError {
        HistoryError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Queues a sample of GPU `gpu` taken at `t_unix` (seconds since the Unix epoch).
    pub fn push(&mut self, gpu: &str, t_unix: f64, sample: &Sample) {
        let mut at_unix = sample.clone();
        at_unix.t = t_unix;
        let minutes = self
            .minutes
            .entry(gpu.to_string())
            .or_insert_with(Downsampler::minutes);
        if let Some(done) = minutes.push(&at_unix) {
            self.pending_minutes.push((gpu.to_string(), done));
        }
        self.pending.push((gpu.to_string(), t_unix, sample.clone()));
    }

    /// Queues an alert of GPU `gpu` raised at `t_unix`.
    pub fn push_alert(&mut self, gpu: &str, t_unix: f64, alert: &Alert) {
        self.pending_alerts
            .push((gpu.to_string(), t_unix, alert.clone()));
    }

    /// Samples waiting for the next flush.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Writes the batch in one transaction, then drops rows past their retention (at most
    /// once a minute). On an error the batch is kept for the next try.
    pub fn flush(&mut self, now_unix: f64) -> Result<(), HistoryError> {
        let tx = self.db.transaction().map_err(|e| HistoryError::Sqlite {
            path: self.path.clone(),
            source: e,
        })?;
        let written = (|| -> rusqlite::Result<()> {
            {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO samples VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,
                     ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26)",
                )?;
                for (gpu, t, s) in &self.pending {
                    let n = |v: Option<u64>| v.map(|v| v as i64);
                    let xid = (!s.xid.is_empty()).then(|| {
                        s.xid
                            .iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(";")
                    });
                    insert.execute(params![
                        gpu,
                        t,
                        s.temp_gpu_c,
                        s.temp_mem_c,
                        s.power_w,
                        // A raw row holds what was read at its time (as a trace does).
                        s.read_now(Signal::Energy),
                        s.util_gpu_pct,
                        s.util_mem_pct,
                        s.mem_used_mib,
                        s.mem_free_mib,
                        s.mem_reserved_mib,
                        s.sm_clock_mhz,
                        s.mem_clock_mhz,
                        n(s.clock_reasons),
                        s.read_now(Signal::PcieTx),
                        s.read_now(Signal::PcieRx),
                        n(s.pcie_replay),
                        n(s.ecc_corr),
                        n(s.ecc_uncorr),
                        n(s.ecc_corr_aggregate),
                        n(s.ecc_uncorr_aggregate),
                        n(s.retired_pages),
                        n(s.remapped_rows),
                        s.fan_pct,
                        s.processes,
                        xid,
                    ])?;
                }
                // A minute already stored (the part before a restart within it) is merged
                // with the rest, not replaced.
                let mut minute = tx.prepare_cached(
                    "INSERT INTO minutes VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT (gpu, t_start, signal) DO UPDATE SET
                         min = min(minutes.min, excluded.min),
                         max = max(minutes.max, excluded.max),
                         mean = (minutes.mean * minutes.n + excluded.mean * excluded.n)
                                / (minutes.n + excluded.n),
                         n = minutes.n + excluded.n",
                )?;
                for (gpu, aggregate) in &self.pending_minutes {
                    for (signal, m) in &aggregate.signals {
                        minute.execute(params![
                            gpu,
                            aggregate.t_start,
                            signal.name(),
                            m.min,
                            m.mean,
                            m.max,
                            m.n as i64
                        ])?;
                    }
                }
                let mut alert =
                    tx.prepare_cached("INSERT INTO alerts VALUES (?1, ?2, ?3, ?4, ?5)")?;
                for (gpu, t, a) in &self.pending_alerts {
                    let body = serde_json::to_string(a).unwrap_or_default();
                    alert.execute(params![gpu, t, a.kind.name(), a.severity.name(), body])?;
                }
                if now_unix - self.last_pruned >= 60.0 {
                    // Per GPU, so that each delete walks its (gpu, time) index rather than
                    // the whole table (a day of raw samples is 86,400 rows a GPU).
                    let raw_until = now_unix - self.retention.raw.as_secs_f64();
                    let minutes_until = now_unix - self.retention.minutes.as_secs_f64();
                    for gpu in self.minutes.keys() {
                        tx.execute(
                            "DELETE FROM samples WHERE gpu = ?1 AND t_unix < ?2",
                            params![gpu, raw_until],
                        )?;
                        tx.execute(
                            "DELETE FROM minutes WHERE gpu = ?1 AND t_start < ?2",
                            params![gpu, minutes_until],
                        )?;
                        tx.execute(
                            "DELETE FROM alerts WHERE gpu = ?1 AND t_unix < ?2",
                            params![gpu, minutes_until],
                        )?;
                    }
                }
            }
            Ok(())
        })();
        match written.and_then(|()| tx.commit()) {
            Ok(()) => {
                if now_unix - self.last_pruned >= 60.0 {
                    self.last_pruned = now_unix;
                }
                self.pending.clear();
                self.pending_minutes.clear();
                self.pending_alerts.clear();
                Ok(())
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Writes the batch and each GPU's minute in progress (a clean stop).
    pub fn close(mut self, now_unix: f64) -> Result<(), HistoryError> {
        let partial: Vec<(String, Aggregate)> = std::mem::take(&mut self.minutes)
            .into_iter()
            .filter_map(|(gpu, d)| Some((gpu, d.finish()?)))
            .collect();
        self.pending_minutes.extend(partial);
        self.flush(now_unix)
    }

    /// What is stored now.
    pub fn stored(&self) -> Result<Stored, HistoryError> {
        let count = |table: &str| -> Result<u64, HistoryError> {
            self.db
                .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| {
                    r.get::<_, i64>(0)
                })
                .map(|n| n as u64)
                .map_err(|e| self.fail(e))
        };
        Ok(Stored {
            samples: count("samples")?,
            minute_rows: count("minutes")?,
            alerts: count("alerts")?,
        })
    }

    /// One signal of one GPU's 1-minute aggregates from `since_unix` on: (start, min, mean,
    /// max), oldest first.
    pub fn minutes(
        &self,
        gpu: &str,
        signal: Signal,
        since_unix: f64,
    ) -> Result<Vec<(f64, f64, f64, f64)>, HistoryError> {
        let mut query = self
            .db
            .prepare_cached(
                "SELECT t_start, min, mean, max FROM minutes
                 WHERE gpu = ?1 AND signal = ?2 AND t_start >= ?3 ORDER BY t_start",
            )
            .map_err(|e| self.fail(e))?;
        let rows = query
            .query_map(params![gpu, signal.name(), since_unix], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
            })
            .map_err(|e| self.fail(e))?;
        rows.collect::<Result<_, _>>().map_err(|e| self.fail(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::parse_trace;

    fn healthy() -> Vec<Sample> {
        parse_trace(include_str!("../tests/data/h200-healthy.csv")).unwrap()
    }

    const T0: f64 = 1_796_000_040.0; // a Unix time on a minute boundary

    #[test]
    fn a_gpus_degradation_watch_and_thermal_response_are_kept_replaced_and_read_back_after_reopening(
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sqlite");
        let mut history = History::open(&path, Retention::default()).unwrap();
        assert_eq!(history.drift("GPU-a").unwrap(), None);
        assert_eq!(history.response("GPU-a").unwrap(), None);
        history.save_drift("GPU-a", "{\"first\":1}", T0).unwrap();
        history
            .save_drift("GPU-a", "{\"later\":2}", T0 + 5.0)
            .unwrap();
        history
            .save_response("GPU-a", "{\"taus_s\":[7.0]}", T0)
            .unwrap();
        history
            .save_response("GPU-a", "{\"taus_s\":[7.0,9.0]}", T0 + 5.0)
            .unwrap();
        drop(history);
        let history = History::open(&path, Retention::default()).unwrap();
        assert_eq!(
            history.drift("GPU-a").unwrap().as_deref(),
            Some("{\"later\":2}")
        );
        assert_eq!(
            history.response("GPU-a").unwrap().as_deref(),
            Some("{\"taus_s\":[7.0,9.0]}")
        );
        assert_eq!(history.drift("GPU-b").unwrap(), None);
        assert_eq!(history.response("GPU-b").unwrap(), None);
    }

    #[test]
    fn a_gpus_levels_are_kept_replaced_and_read_back_after_reopening() {
        use crate::baseline::Level;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("monitor.sqlite");
        let mut history = History::open(&path, Retention::default()).unwrap();
        assert_eq!(history.levels("GPU-a").unwrap(), [None, None]);
        let gpu = Level {
            reference: 1.5,
            offset: 2.5,
            learned_s: 20.0,
        };
        history
            .save_levels("GPU-a", &[Some(gpu), None], T0)
            .unwrap();
        let later = Level {
            offset: 2.75,
            learned_s: 320.0,
            ..gpu
        };
        let mem = Level {
            reference: -0.5,
            offset: -1.0,
            learned_s: 30.0,
        };
        history
            .save_levels("GPU-a", &[Some(later), Some(mem)], T0 + 5.0)
            .unwrap();
        drop(history);
        let history = History::open(&path, Retention::default()).unwrap();
        assert_eq!(history.levels("GPU-a").unwrap(), [Some(later), Some(mem)]);
        assert_eq!(history.levels("GPU-b").unwrap(), [None, None]);
    }

    #[test]
    fn samples_minutes_and_alerts_are_stored_in_batches_and_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("monitor.sqlite");
        let samples = healthy();
        let mut history = History::open(&path, Retention::default()).unwrap();
        for s in &samples[..100] {
            history.push("GPU-a", T0 + s.t, s);
        }
        assert_eq!(history.pending(), 100);
        assert_eq!(
            history.stored().unwrap().samples,
            0,
            "nothing before a flush"
        );
        history.flush(T0 + 60.0).unwrap();
        assert_eq!(history.pending(), 0);
        for s in &samples[100..] {
            history.push("GPU-a", T0 + s.t, s);
        }
        let alert = crate::monitor::replay(
            &crate::inject::inject(&samples, &crate::inject::Fault::Xid { code: 79 }, 10.0),
            &crate::Config::default(),
            None,
        )
        .remove(0);
        history.push_alert("GPU-a", T0 + alert.t, &alert);
        history.close(T0 + 240.0).unwrap();

        let history = History::open(&path, Retention::default()).unwrap();
        let stored = history.stored().unwrap();
        assert_eq!(stored.samples, samples.len() as u64);
        assert_eq!(stored.alerts, 1);
        // The trace spans four minutes (0-229 s): every one is stored, the last partial.
        let power = history.minutes("GPU-a", Signal::Power, 0.0).unwrap();
        assert_eq!(power.len(), 4);
        let first_minute: Vec<f64> = samples
            .iter()
            .filter(|s| s.t < 60.0)
            .filter_map(|s| s.power_w)
            .collect();
        let max = first_minute.iter().copied().fold(f64::MIN, f64::max);
        assert_eq!(power[0].0, T0);
        assert_eq!(power[0].3, max);
        assert!(history
            .minutes("GPU-b", Signal::Power, 0.0)
            .unwrap()
            .is_empty());
        let reader = History::open_read_only(&path).unwrap();
        assert_eq!(reader.minutes("GPU-a", Signal::Power, 0.0).unwrap(), power);
    }

    #[test]
    fn a_minute_split_by_a_restart_is_merged_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("monitor.sqlite");
        let samples: Vec<Sample> = healthy().into_iter().filter(|s| s.t < 90.0).collect();
        let (before, after): (Vec<&Sample>, Vec<&Sample>) =
            samples.iter().partition(|s| s.t < 30.0);
        for part in [before, after] {
            let mut history = History::open(&path, Retention::default()).unwrap();
            for s in part {
                history.push("GPU-a", T0 + s.t, s);
            }
            history.close(T0 + 120.0).unwrap();
        }
        let history = History::open(&path, Retention::default()).unwrap();
        let first: Vec<f64> = samples
            .iter()
            .filter(|s| s.t < 60.0)
            .filter_map(|s| s.power_w)
            .collect();
        let n: i64 = history
            .db
            .query_row(
                "SELECT n FROM minutes WHERE gpu = 'GPU-a' AND t_start = ?1 AND signal = 'power_w'",
                params![T0],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, first.len() as i64);
        let power = history.minutes("GPU-a", Signal::Power, 0.0).unwrap();
        let mean = first.iter().sum::<f64>() / first.len() as f64;
        assert!((power[0].2 - mean).abs() < 1e-9, "{power:?}");
        assert_eq!(power[0].3, first.iter().copied().fold(f64::MIN, f64::max));
    }

    #[test]
    fn a_carried_reading_is_stored_as_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut history =
            History::open(&dir.path().join("h.sqlite"), Retention::default()).unwrap();
        let mut s = Sample::at(0.0);
        (s.energy_mj, s.power_w) = (Some(5.0e6), Some(80.0));
        s.carried = vec![Signal::Energy];
        history.push("GPU-a", T0, &s);
        history.flush(T0 + 1.0).unwrap();
        let (energy, power): (Option<f64>, Option<f64>) = history
            .db
            .query_row("SELECT energy_mj, power_w FROM samples", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((energy, power), (None, Some(80.0)));
    }

    #[test]
    fn rows_past_their_retention_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("monitor.sqlite");
        let retention = Retention {
            raw: Duration::from_secs(100),
            minutes: Duration::from_secs(3600),
        };
        let mut history = History::open(&path, retention).unwrap();
        for s in &healthy() {
            history.push("GPU-a", T0 + s.t, s);
        }
        history.flush(T0 + 60.0).unwrap();
        let before = history.stored().unwrap().samples;
        // A minute later: raw rows older than 100 s go.
        history.flush(T0 + 300.0).unwrap();
        let after = history.stored().unwrap().samples;
        assert!(after < before, "{after} of {before}");
        let oldest: f64 = history
            .db
            .query_row("SELECT MIN(t_unix) FROM samples", [], |r| r.get(0))
            .unwrap();
        assert!(oldest >= T0 + 200.0, "{oldest}");
    }

    #[test]
    fn a_file_that_is_not_a_database_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("monitor.sqlite");
        std::fs::write(&path, vec![0x42u8; 8192]).unwrap();
        let err = History::open(&path, Retention::default())
            .err()
            .expect("refused");
        let message = err.to_string();
        assert!(message.contains("monitor.sqlite"), "{message}");
        assert!(message.contains("not a database"), "{message}");
        // The file is left as it was: nothing stored is destroyed.
        assert_eq!(std::fs::read(&path).unwrap(), vec![0x42u8; 8192]);
    }
}

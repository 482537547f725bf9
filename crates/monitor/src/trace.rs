//! The trace CSV: the recorded samples of one GPU, one row per sample.
//!
//! The standard columns are those of the H200 fixture (`tests/data/h200-healthy.csv`):
//! `t,phase,temp_gpu,temp_mem,power_w,energy_mj,util_gpu,util_mem,mem_used_mib,sm_clock,
//! mem_clock,clock_reasons,pcie_tx_kbs,pcie_rx_kbs,pcie_replay,ecc_corr,ecc_uncorr`.
//! The reader also understands the extension columns in [`EXTENSION_COLUMNS`] and ignores
//! any other column. An empty cell means "not read". Only `t` is required; a standard column
//! that is absent is never read. `clock_reasons` is decimal or `0x` hex; `xid` holds the XID
//! codes that arrived since the previous row, separated by `;` or spaces.

use crate::sample::{Sample, Signal};
use std::io::{Read, Write};

/// The standard columns, in order: exactly the H200 fixture's.
pub const STANDARD_COLUMNS: [&str; 17] = [
    "t",
    "phase",
    "temp_gpu",
    "temp_mem",
    "power_w",
    "energy_mj",
    "util_gpu",
    "util_mem",
    "mem_used_mib",
    "sm_clock",
    "mem_clock",
    "clock_reasons",
    "pcie_tx_kbs",
    "pcie_rx_kbs",
    "pcie_replay",
    "ecc_corr",
    "ecc_uncorr",
];

/// Columns beyond the fixture's that the reader understands and the writer can add.
pub const EXTENSION_COLUMNS: [&str; 12] = [
    "mem_free_mib",
    "mem_reserved_mib",
    "ecc_corr_aggregate",
    "ecc_uncorr_aggregate",
    "retired_pages",
    "remapped_rows",
    "fan_pct",
    "processes",
    "xid",
    "bench_tflops",
    "proof_ratio",
    "remapped_rows_uncorrectable",
];

/// Why a trace could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be read or written.
    #[error("reading the trace: {0}")]
    Io(#[from] std::io::Error),
    /// The header has no `t` column.
    #[error("the header has no `t` column (the time in seconds); expected columns: {}", STANDARD_COLUMNS.join(","))]
    MissingTime,
    /// A known column appears twice in the header.
    #[error("column `{column}` appears twice in the header")]
    DuplicateColumn {
        /// The repeated column.
        column: String,
    },
    /// A row is not well-formed CSV, or has a different number of cells than the header.
    #[error("line {line}: {message}")]
    Malformed {
        /// 1-based line number in the file.
        line: u64,
        /// What was wrong.
        message: String,
    },
    /// A cell could not be parsed as its column's type.
    #[error("line {line}, column `{column}`: {value:?} is not {expected}")]
    BadValue {
        /// 1-based line number in the file.
        line: u64,
        /// The column's name.
        column: String,
        /// The cell as written.
        value: String,
        /// What the column holds.
        expected: &'static str,
    },
    /// `t` went backwards.
    #[error("line {line}: t = {t} comes before the previous row's t = {previous}; rows must be in time order")]
    TimeBackwards {
        /// 1-based line number in the file.
        line: u64,
        /// This row's time.
        t: f64,
        /// The previous row's time.
        previous: f64,
    },
    /// The CSV writer failed.
    #[error("writing the trace: {0}")]
    Write(String),
}

/// Reads a whole trace. Rows must be in time order; the first error stops the read.
pub fn read_trace(reader: impl Read) -> Result<Vec<Sample>, TraceError> {
    TraceReader::new(reader)?.collect()
}

/// What a [`TraceReader`] does with a row whose `t` comes before the previous row's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepsBack {
    /// An error naming the row: what is learned from (a healthy history) must be in time
    /// order, or its windows and rates would span the step.
    Refuse,
    /// The row as written: a trace that is only judged goes on past a clock stepped back (a
    /// recorder restarted, files joined), and the detectors say the step once (`sample_gap`)
    /// and restart their windows there, as they do live.
    Keep,
}

/// Reads a trace from a string (tests, fixtures).
pub fn parse_trace(text: &str) -> Result<Vec<Sample>, TraceError> {
    read_trace(text.as_bytes())
}

/// Where each known column sits in a file's header.
#[derive(Debug, Default)]
struct Layout {
    index: Vec<(usize, usize)>, // (cell index, known column id)
}

/// Reads a trace row by row: an iterator of samples, or the first error.
pub struct TraceReader<R: Read> {
    records: csv::StringRecordsIntoIter<R>,
    layout: Layout,
    previous_t: Option<f64>,
    steps_back: StepsBack,
    failed: bool,
}

impl<R: Read> TraceReader<R> {
    /// Reads the header and checks it; rows must then be in time order
    /// ([`TraceReader::steps_back`] to take a clock stepped back).
    pub fn new(reader: R) -> Result<TraceReader<R>, TraceError> {
        let mut csv = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(false)
            .trim(csv::Trim::All)
            .from_reader(reader);
        let header = csv.headers().map_err(|e| csv_error(e, 1))?.clone();
        let mut layout = Layout::default();
        let mut seen = Vec::new();
        for (cell, name) in header.iter().enumerate() {
            let Some(id) = column_id(name) else { continue };
            if seen.contains(&id) {
                return Err(TraceError::DuplicateColumn {
                    column: name.to_string(),
                });
            }
            seen.push(id);
            layout.index.push((cell, id));
        }
        if !seen.contains(&0) {
            return Err(TraceError::MissingTime);
        }
        Ok(TraceReader {
            records: csv.into_records(),
            layout,
            previous_t: None,
            steps_back: StepsBack::Refuse,
            failed: false,
        })
    }

    /// Sets what a row whose `t` steps back does: refused (the default) or kept as written.
    pub fn steps_back(mut self, steps_back: StepsBack) -> TraceReader<R> {
        self.steps_back = steps_back;
        self
    }

    fn parse(&mut self, record: &csv::StringRecord) -> Result<Sample, TraceError> {
        let line = record.position().map_or(0, |p| p.line());
        let mut sample = Sample::default();
        let mut has_t = false;
        for &(cell, id) in &self.layout.index {
            let value = record.get(cell).unwrap_or("");
            if value.is_empty() {
                continue;
            }
            let name = column_name(id);
            let bad = |expected| TraceError::BadValue {
                line,
                column: name.to_string(),
                value: value.to_string(),
                expected,
            };
            let float = || -> Result<f64, TraceError> {
                value
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite())
                    .ok_or_else(|| bad("a finite number"))
            };
            let count = || -> Result<u64, TraceError> {
                value
                    .parse::<u64>()
                    .map_err(|_| bad("a non-negative integer"))
            };
            match name {
                "t" => {
                    sample.t = float()?;
                    has_t = true;
                }
                "phase" => sample.phase = Some(value.to_string()),
                "temp_gpu" => sample.temp_gpu_c = Some(float()?),
                "temp_mem" => sample.temp_mem_c = Some(float()?),
                "power_w" => sample.power_w = Some(float()?),
                "energy_mj" => sample.energy_mj = Some(float()?),
                "util_gpu" => sample.util_gpu_pct = Some(float()?),
                "util_mem" => sample.util_mem_pct = Some(float()?),
                "mem_used_mib" => sample.mem_used_mib = Some(float()?),
                "sm_clock" => sample.sm_clock_mhz = Some(float()?),
                "mem_clock" => sample.mem_clock_mhz = Some(float()?),
                "clock_reasons" => {
                    let parsed = match value
                        .strip_prefix("0x")
                        .or_else(|| value.strip_prefix("0X"))
                    {
                        Some(hex) => u64::from_str_radix(hex, 16).ok(),
                        None => value.parse::<u64>().ok(),
                    };
                    sample.clock_reasons =
                        Some(parsed.ok_or_else(|| bad("a bit mask (decimal or 0x hex)"))?);
                }
                "pcie_tx_kbs" => sample.pcie_tx_kbs = Some(float()?),
                "pcie_rx_kbs" => sample.pcie_rx_kbs = Some(float()?),
                "pcie_replay" => sample.pcie_replay = Some(count()?),
                "ecc_corr" => sample.ecc_corr = Some(count()?),
                "ecc_uncorr" => sample.ecc_uncorr = Some(count()?),
                "mem_free_mib" => sample.mem_free_mib = Some(float()?),
                "mem_reserved_mib" => sample.mem_reserved_mib = Some(float()?),
                "ecc_corr_aggregate" => sample.ecc_corr_aggregate = Some(count()?),
                "ecc_uncorr_aggregate" => sample.ecc_uncorr_aggregate = Some(count()?),
                "retired_pages" => sample.retired_pages = Some(count()?),
                "remapped_rows" => sample.remapped_rows = Some(count()?),
                "remapped_rows_uncorrectable" => {
                    sample.remapped_rows_uncorrectable = Some(count()?)
                }
                "fan_pct" => sample.fan_pct = Some(float()?),
                "processes" => {
                    sample.processes = Some(
                        value
                            .parse::<u32>()
                            .map_err(|_| bad("a non-negative integer"))?,
                    )
                }
                "xid" => {
                    for code in value.split([';', ' ']).filter(|c| !c.is_empty()) {
                        sample.xid.push(
                            code.parse::<u32>()
                                .map_err(|_| bad("XID codes separated by `;`"))?,
                        );
                    }
                }
                "bench_tflops" => sample.bench_tflops = Some(float()?),
                "proof_ratio" => sample.proof_ratio = Some(float()?),
                other => unreachable!("column {other} is known but not parsed"),
            }
        }
        if !has_t {
            return Err(TraceError::BadValue {
                line,
                column: "t".into(),
                value: String::new(),
                expected: "a time in seconds (it is required)",
            });
        }
        if let (Some(previous), StepsBack::Refuse) = (self.previous_t, self.steps_back) {
            if sample.t < previous {
                return Err(TraceError::TimeBackwards {
                    line,
                    t: sample.t,
                    previous,
                });
            }
        }
        self.previous_t = Some(sample.t);
        Ok(sample)
    }
}

impl<R: Read> Iterator for TraceReader<R> {
    type Item = Result<Sample, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let result = match self.records.next()? {
            Ok(record) => self.parse(&record),
            Err(e) => Err(csv_error(e, 0)),
        };
        self.failed = result.is_err();
        Some(result)
    }
}

fn csv_error(error: csv::Error, fallback_line: u64) -> TraceError {
    let line = error.position().map_or(fallback_line, |p| p.line());
    match error.kind() {
        csv::ErrorKind::Io(_) => match error.into_kind() {
            csv::ErrorKind::Io(io) => TraceError::Io(io),
            _ => unreachable!(),
        },
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => TraceError::Malformed {
            line,
            message: format!("{len} cells where the header has {expected_len}"),
        },
        csv::ErrorKind::Utf8 { .. } => TraceError::Malformed {
            line,
            message: "not valid UTF-8".into(),
        },
        _ => TraceError::Malformed {
            line,
            message: error.to_string(),
        },
    }
}

fn column_id(name: &str) -> Option<usize> {
    STANDARD_COLUMNS
        .iter()
        .chain(EXTENSION_COLUMNS.iter())
        .position(|c| *c == name)
}

fn column_name(id: usize) -> &'static str {
    STANDARD_COLUMNS
        .iter()
        .chain(EXTENSION_COLUMNS.iter())
        .nth(id)
        .expect("a known column id")
}

/// Which columns a [`TraceWriter`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Columns {
    /// Exactly the fixture's 17 columns.
    Standard,
    /// The standard columns, then [`EXTENSION_COLUMNS`].
    Extended,
}

/// Writes samples as a trace that [`read_trace`] reads back unchanged.
pub struct TraceWriter<W: Write> {
    csv: csv::Writer<W>,
    columns: Columns,
}

impl<W: Write> TraceWriter<W> {
    /// Writes the header.
    pub fn new(writer: W, columns: Columns) -> Result<TraceWriter<W>, TraceError> {
        let mut csv = csv::WriterBuilder::new().from_writer(writer);
        let mut header: Vec<&str> = STANDARD_COLUMNS.to_vec();
        if columns == Columns::Extended {
            header.extend(EXTENSION_COLUMNS);
        }
        csv.write_record(&header).map_err(write_error)?;
        Ok(TraceWriter { csv, columns })
    }

    /// Writes one sample as a row.
    pub fn write(&mut self, s: &Sample) -> Result<(), TraceError> {
        fn f(v: Option<f64>) -> String {
            v.map_or_else(String::new, |v| v.to_string())
        }
        fn n(v: Option<u64>) -> String {
            v.map_or_else(String::new, |v| v.to_string())
        }
        let mut row = vec![
            s.t.to_string(),
            s.phase.clone().unwrap_or_default(),
            f(s.temp_gpu_c),
            f(s.temp_mem_c),
            f(s.power_w),
            f(s.read_now(Signal::Energy)),
            f(s.util_gpu_pct),
            f(s.util_mem_pct),
            f(s.mem_used_mib),
            f(s.sm_clock_mhz),
            f(s.mem_clock_mhz),
            n(s.clock_reasons),
            f(s.read_now(Signal::PcieTx)),
            f(s.read_now(Signal::PcieRx)),
            n(s.pcie_replay),
            n(s.ecc_corr),
            n(s.ecc_uncorr),
        ];
        if self.columns == Columns::Extended {
            row.extend([
                f(s.mem_free_mib),
                f(s.mem_reserved_mib),
                n(s.ecc_corr_aggregate),
                n(s.ecc_uncorr_aggregate),
                n(s.retired_pages),
                n(s.remapped_rows),
                f(s.fan_pct),
                s.processes.map_or_else(String::new, |p| p.to_string()),
                s.xid
                    .iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(";"),
                f(s.bench_tflops),
                f(s.proof_ratio),
                n(s.remapped_rows_uncorrectable),
            ]);
        }
        self.csv.write_record(&row).map_err(write_error)
    }

    /// Writes out what is buffered, so that the rows written so far survive the process.
    pub fn flush(&mut self) -> Result<(), TraceError> {
        self.csv.flush().map_err(TraceError::Io)
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(self) -> Result<W, TraceError> {
        self.csv
            .into_inner()
            .map_err(|e| TraceError::Write(e.error().to_string()))
    }
}

fn write_error(e: csv::Error) -> TraceError {
    match e.into_kind() {
        csv::ErrorKind::Io(io) => TraceError::Io(io),
        other => TraceError::Write(format!("{other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FIXTURE: &str = include_str!("../tests/data/h200-healthy.csv");

    #[test]
    fn reads_the_h200_fixture() {
        let samples = parse_trace(FIXTURE).unwrap();
        assert_eq!(samples.len(), 417);
        let first = &samples[0];
        assert_eq!(first.t, 0.0);
        assert_eq!(first.phase.as_deref(), Some("idle"));
        assert_eq!(first.temp_gpu_c, Some(40.0));
        assert_eq!(first.power_w, Some(76.475));
        assert_eq!(first.clock_reasons, Some(1));
        assert_eq!(first.pcie_replay, Some(1));
        assert_eq!(first.ecc_uncorr, Some(0));
        assert_eq!(first.fan_pct, None);
    }

    #[test]
    fn round_trips_the_fixture_with_the_same_header() {
        let samples = parse_trace(FIXTURE).unwrap();
        let mut w = TraceWriter::new(Vec::new(), Columns::Standard).unwrap();
        for s in &samples {
            w.write(s).unwrap();
        }
        let text = String::from_utf8(w.finish().unwrap()).unwrap();
        assert_eq!(text.lines().next(), FIXTURE.lines().next());
        assert_eq!(parse_trace(&text).unwrap(), samples);
    }

    #[test]
    fn a_carried_reading_is_written_as_not_read() {
        let mut s = Sample::at(2.0);
        (s.energy_mj, s.pcie_tx_kbs, s.power_w) = (Some(9.0e6), Some(10.0), Some(300.0));
        s.carried = vec![Signal::Energy];
        let mut w = TraceWriter::new(Vec::new(), Columns::Standard).unwrap();
        w.write(&s).unwrap();
        let back = parse_trace(&String::from_utf8(w.finish().unwrap()).unwrap()).unwrap();
        assert_eq!(
            (back[0].energy_mj, back[0].pcie_tx_kbs, back[0].power_w),
            (None, Some(10.0), Some(300.0))
        );
        assert!(back[0].carried.is_empty());
    }

    #[test]
    fn extra_columns_are_ignored_and_empty_cells_are_not_read() {
        let text = "foo,t,temp_gpu,bar,xid,clock_reasons\nx,1.5,,y,79;13,0x24\n";
        let s = parse_trace(text).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].t, 1.5);
        assert_eq!(s[0].temp_gpu_c, None);
        assert_eq!(s[0].xid, vec![79, 13]);
        assert_eq!(s[0].clock_reasons, Some(0x24));
    }

    #[test]
    fn malformed_rows_name_their_line() {
        let err = parse_trace("t,temp_gpu\n0,40\n1,hot\n").unwrap_err();
        assert!(
            matches!(&err, TraceError::BadValue { line: 3, column, .. } if column == "temp_gpu"),
            "{err}"
        );
        assert!(err.to_string().contains("line 3"), "{err}");
        let err = parse_trace("t,temp_gpu\n0,40\n1,41,42\n").unwrap_err();
        assert!(
            matches!(err, TraceError::Malformed { line: 3, .. }),
            "{err}"
        );
        let err = parse_trace("t,temp_gpu\n2,40\n1,41\n").unwrap_err();
        assert!(
            matches!(err, TraceError::TimeBackwards { line: 3, .. }),
            "{err}"
        );
        // Kept as written where asked, with the rows after it.
        let kept: Vec<f64> = TraceReader::new("t,temp_gpu\n2,40\n1,41\n3,42\n".as_bytes())
            .unwrap()
            .steps_back(StepsBack::Keep)
            .map(|s| s.unwrap().t)
            .collect();
        assert_eq!(kept, [2.0, 1.0, 3.0]);
        let err = parse_trace("temp_gpu\n40\n").unwrap_err();
        assert!(matches!(err, TraceError::MissingTime), "{err}");
        let err = parse_trace("t,t\n1,1\n").unwrap_err();
        assert!(matches!(err, TraceError::DuplicateColumn { .. }), "{err}");
        let err = parse_trace("t,power_w\n0,NaN\n").unwrap_err();
        assert!(matches!(err, TraceError::BadValue { line: 2, .. }), "{err}");
        let err = parse_trace("t,ecc_corr\n0,-1\n").unwrap_err();
        assert!(matches!(err, TraceError::BadValue { line: 2, .. }), "{err}");
        let err = parse_trace("t,power_w\n,1\n").unwrap_err();
        assert!(matches!(err, TraceError::BadValue { line: 2, .. }), "{err}");
    }

    fn opt<T: std::fmt::Debug + Clone>(
        s: impl Strategy<Value = T>,
    ) -> impl Strategy<Value = Option<T>> {
        prop_oneof![Just(None), s.prop_map(Some)]
    }

    fn sample() -> impl Strategy<Value = Sample> {
        (
            (
                0u32..1_000_000,
                opt("[a-z0-9 ,\"]{0,8}"),
                opt(-50.0f64..150.0),
                opt(0.0f64..1000.0),
            ),
            (
                opt(0u64..u64::MAX),
                opt(0u64..1 << 20),
                opt(0u64..100),
                proptest::collection::vec(1u32..200, 0..3),
            ),
            (opt(0.0f64..200_000.0), opt(0.0f64..3000.0), opt(0u32..100)),
        )
            .prop_map(
                |((t, phase, temp, power), (reasons, replay, ecc, xid), (mem, clock, procs))| {
                    Sample {
                        t: f64::from(t) / 100.0,
                        // A phase that is only spaces reads back as empty (cells are trimmed).
                        phase: phase
                            .map(|p| p.trim().to_string())
                            .filter(|p| !p.is_empty()),
                        temp_gpu_c: temp,
                        power_w: power,
                        clock_reasons: reasons,
                        pcie_replay: replay,
                        ecc_uncorr: ecc,
                        xid,
                        mem_used_mib: mem,
                        sm_clock_mhz: clock,
                        processes: procs,
                        ..Sample::default()
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn any_written_trace_reads_back(mut samples in proptest::collection::vec(sample(), 0..20)) {
            samples.sort_by(|a, b| a.t.total_cmp(&b.t));
            let mut w = TraceWriter::new(Vec::new(), Columns::Extended).unwrap();
            for s in &samples {
                w.write(s).unwrap();
            }
            let text = String::from_utf8(w.finish().unwrap()).unwrap();
            prop_assert_eq!(parse_trace(&text).unwrap(), samples);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = read_trace(bytes.as_slice());
        }

        #[test]
        fn arbitrary_cells_give_ok_or_a_located_error(
            rows in proptest::collection::vec(proptest::collection::vec("[-0-9a-fx.;eE ]{0,6}", 4), 1..8)
        ) {
            let mut text = String::from("t,temp_gpu,clock_reasons,xid\n");
            for row in &rows {
                text.push_str(&row.join(","));
                text.push('\n');
            }
            match parse_trace(&text) {
                Ok(samples) => prop_assert_eq!(samples.len(), rows.len()),
                Err(TraceError::BadValue { line, .. })
                | Err(TraceError::TimeBackwards { line, .. })
                | Err(TraceError::Malformed { line, .. }) => {
                    prop_assert!(line >= 2 && line as usize <= rows.len() + 1, "line {}", line)
                }
                Err(other) => prop_assert!(false, "unexpected error {}", other),
            }
        }
    }
}

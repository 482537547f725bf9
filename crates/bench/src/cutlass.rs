//! Parses `cutlass_profiler`'s GEMM CSV: the best GFLOP/s per problem size among the kernels
//! that ran successfully.

use serde::{Deserialize, Serialize};

/// CUTLASS's best figure for one problem size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CutlassFigure {
    /// GEMM rows of A and C.
    pub m: u64,
    /// GEMM columns of B and C.
    pub n: u64,
    /// GEMM inner dimension.
    pub k: u64,
    /// The best kernel's throughput, TFLOP/s (the CSV's GFLOPs / 1000).
    pub tflops: f64,
    /// The best kernel's runtime as the profiler reports it, ms.
    pub runtime_ms: f64,
    /// The best kernel's name (the CSV's Operation column).
    pub kernel: String,
}

/// Why `cutlass_profiler`'s CSV gave no figures.
#[derive(Debug, thiserror::Error)]
pub enum CutlassError {
    /// The file has no header line.
    #[error("cutlass_profiler wrote an empty CSV")]
    Empty,
    /// A column the figures need is not in the header.
    #[error("cutlass_profiler's CSV has no {0} column; this profiler version is not supported")]
    MissingColumn(&'static str),
    /// A row ends before one of the needed columns.
    #[error("cutlass_profiler's CSV, line {line}: too few columns for {column}")]
    ShortRow {
        /// The CSV line of the short row.
        line: u64,
        /// The header name of the first missing column.
        column: &'static str,
    },
    /// A needed figure is not a number.
    #[error("cutlass_profiler's CSV, line {line}: {column} is {text:?}, not a number")]
    NotANumber {
        /// The CSV line of the bad cell.
        line: u64,
        /// The column's header name.
        column: &'static str,
        /// The cell's text.
        text: String,
    },
    /// The file is not readable as CSV (invalid UTF-8, broken quoting).
    #[error("cutlass_profiler's CSV is unreadable: {0}")]
    Csv(csv::Error),
}

/// A column the figures need: its header name and its place in this file.
#[derive(Clone, Copy)]
struct Column {
    name: &'static str,
    at: usize,
}

/// Reads the CSV by column name (the profiler's column set varies by version; names match in
/// any case), keeps rows whose Status is `success`, and returns the fastest kernel per
/// (m, n, k).
pub fn parse(csv: &str) -> Result<Vec<CutlassFigure>, CutlassError> {
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(csv.as_bytes());
    let header = reader.headers().map_err(CutlassError::Csv)?;
    if header.iter().all(str::is_empty) {
        return Err(CutlassError::Empty);
    }
    let column = |name: &'static str| {
        header
            .iter()
            .position(|h| h.eq_ignore_ascii_case(name))
            .map(|at| Column { name, at })
            .ok_or(CutlassError::MissingColumn(name))
    };
    let (op, status, m, n, k, runtime, gflops) = (
        column("Operation")?,
        column("Status")?,
        column("m")?,
        column("n")?,
        column("k")?,
        column("Runtime")?,
        column("GFLOPs")?,
    );
    let mut best: Vec<CutlassFigure> = Vec::new();
    for record in reader.records() {
        let record = record.map_err(CutlassError::Csv)?;
        let line = record.position().map_or(0, csv::Position::line);
        let cell = |c: Column| {
            record.get(c.at).ok_or(CutlassError::ShortRow {
                line,
                column: c.name,
            })
        };
        if cell(status)? != "success" {
            continue;
        }
        let number = |c: Column| {
            let text = cell(c)?;
            text.parse::<f64>().map_err(|_| CutlassError::NotANumber {
                line,
                column: c.name,
                text: text.to_string(),
            })
        };
        let figure = CutlassFigure {
            m: number(m)? as u64,
            n: number(n)? as u64,
            k: number(k)? as u64,
            tflops: number(gflops)? / 1e3,
            runtime_ms: number(runtime)?,
            kernel: cell(op)?.to_string(),
        };
        match best
            .iter_mut()
            .find(|b| (b.m, b.n, b.k) == (figure.m, figure.n, figure.k))
        {
            Some(b) if b.tflops >= figure.tflops => {}
            Some(b) => *b = figure,
            None => best.push(figure),
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Written to the profiler's documented CSV shape (not captured: no cutlass_profiler on our
    // H200); the parser only relies on the named columns.
    const CSV: &str = "Problem,Provider,OperationKind,Operation,Disposition,Status,gemm_kind,m,n,k,A,B,C,Runtime,GB/s,GFLOPs
1,CUTLASS,gemm,cutlass_simt_sgemm_128x128_8x2_nn_align1,not_verified,success,universal,8192,8192,8192,f32:column,f32:column,f32:column,22.5,17.9,48867.3
1,CUTLASS,gemm,cutlass_simt_sgemm_256x128_8x5_nn_align1,not_verified,success,universal,8192,8192,8192,f32:column,f32:column,f32:column,21.9,18.4,50206.8
2,CUTLASS,gemm,cutlass_simt_sgemm_128x256_8x4_nn_align1,not_verified,failed,universal,8192,8192,16384,f32:column,f32:column,f32:column,0,0,0
3,CUTLASS,gemm,cutlass_simt_sgemm_128x128_8x2_nn_align1,not_verified,success,universal,16384,16384,16384,f32:column,f32:column,f32:column,176.0,18.3,49979.1
";

    #[test]
    fn keeps_the_fastest_successful_kernel_per_size() {
        let figures = parse(CSV).unwrap();
        assert_eq!(figures.len(), 2);
        assert_eq!(
            figures[0].kernel,
            "cutlass_simt_sgemm_256x128_8x5_nn_align1"
        );
        assert!((figures[0].tflops - 50.2068).abs() < 1e-9);
        assert_eq!((figures[1].m, figures[1].k), (16384, 16384));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_csv_never_panics(text in "(?s).{0,400}") {
            let _ = parse(&text);
            let _ = parse(&format!("Operation,Status,m,n,k,Runtime,GFLOPs\n{text}"));
        }
    }

    #[test]
    fn malformed_csv_is_an_error() {
        assert!(matches!(parse(""), Err(CutlassError::Empty)));
        assert!(parse("a,b,c\n1,2,3")
            .unwrap_err()
            .to_string()
            .contains("no Operation column"));
        let short = "Operation,Status,m,n,k,Runtime,GFLOPs\nx,success,1";
        let err = parse(short).unwrap_err();
        assert!(
            matches!(
                err,
                CutlassError::ShortRow {
                    line: 2,
                    column: "n"
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("too few columns"), "{err}");
        let bad = "Operation,Status,m,n,k,Runtime,GFLOPs\nx,success,1,1,1,fast,2";
        let err = parse(bad).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cutlass_profiler's CSV, line 2: Runtime is \"fast\", not a number"
        );
    }

    #[test]
    fn a_quoted_field_may_hold_a_comma() {
        let csv = "Operation,Disposition,Status,m,n,k,Runtime,GFLOPs
\"sgemm, tuned\",\"not_verified, skipped\",success,64,64,64,0.5,1000
";
        let figures = parse(csv).unwrap();
        assert_eq!(figures.len(), 1);
        assert_eq!(figures[0].kernel, "sgemm, tuned");
        assert_eq!((figures[0].m, figures[0].tflops), (64, 1.0));
    }

    #[test]
    fn a_missing_column_is_named() {
        let csv = CSV.replace(",GFLOPs", "");
        let err = parse(&csv).unwrap_err();
        assert!(
            matches!(err, CutlassError::MissingColumn("GFLOPs")),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            "cutlass_profiler's CSV has no GFLOPs column; this profiler version is not supported"
        );
    }
}

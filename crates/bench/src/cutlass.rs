//! Parses `cutlass_profiler`'s GEMM CSV: the best GFLOP/s per problem size among the kernels
//! that ran successfully.

use serde::{Deserialize, Serialize};

/// CUTLASS's best figure for one problem size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CutlassFigure {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub tflops: f64,
    pub runtime_ms: f64,
    pub kernel: String,
}

/// Reads the CSV by column name (the profiler's column set varies by version), keeps rows
/// whose Status is `success`, and returns the fastest kernel per (m, n, k).
pub fn parse(csv: &str) -> Result<Vec<CutlassFigure>, String> {
    let mut lines = csv.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines
        .next()
        .ok_or("empty CUTLASS CSV")?
        .split(',')
        .map(str::trim)
        .collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| h.eq_ignore_ascii_case(name))
            .ok_or(format!("CUTLASS CSV has no {name} column"))
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
    for (row, line) in lines.enumerate() {
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        let cell = |i: usize| {
            cells
                .get(i)
                .copied()
                .ok_or(format!("CUTLASS CSV row {}: too few columns", row + 2))
        };
        if cell(status)? != "success" {
            continue;
        }
        let number = |i: usize| -> Result<f64, String> {
            let text = cell(i)?;
            text.parse::<f64>()
                .map_err(|_| format!("CUTLASS CSV row {}: {text:?} is not a number", row + 2))
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
        assert!(parse("").is_err());
        assert!(parse("a,b,c\n1,2,3")
            .unwrap_err()
            .contains("no Operation column"));
        let short = "Operation,Status,m,n,k,Runtime,GFLOPs\nx,success,1";
        assert!(parse(short).unwrap_err().contains("too few columns"));
        let bad = "Operation,Status,m,n,k,Runtime,GFLOPs\nx,success,1,1,1,fast,2";
        assert!(parse(bad).unwrap_err().contains("not a number"));
    }
}

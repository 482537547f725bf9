//! The Grafana dashboard (deploy/grafana/pog-gpu.json) against what pog exports: every PromQL
//! expression in it (panels, annotations, template variables) names only metrics that the
//! `/metrics` page of a simulated host carries (rendered by the exporter's own code, so the
//! list cannot drift), the panels outside the pog row name only DCGM's fields (so they work on
//! dcgm-exporter too), and the panels filter by the dashboard's variables.

mod common;

use pog_monitor::prometheus::Format;
use serde_json::Value;
use std::collections::BTreeSet;

const DASHBOARD: &str = include_str!("../../../deploy/grafana/pog-gpu.json");

/// PromQL's functions (Prometheus 2.x and 3.x), and Grafana's variable-query functions.
const FUNCTIONS: &[&str] = &[
    "abs",
    "absent",
    "absent_over_time",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "avg",
    "avg_over_time",
    "bottomk",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "cos",
    "cosh",
    "count",
    "count_over_time",
    "count_values",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "days_in_month",
    "deg",
    "delta",
    "deriv",
    "exp",
    "floor",
    "group",
    "group_over_time",
    "histogram_avg",
    "histogram_count",
    "histogram_fraction",
    "histogram_quantile",
    "histogram_stddev",
    "histogram_stdvar",
    "histogram_sum",
    "holt_winters",
    "hour",
    "idelta",
    "increase",
    "irate",
    "label_join",
    "label_replace",
    "last_over_time",
    "limitk",
    "limit_ratio",
    "ln",
    "log10",
    "log2",
    "mad_over_time",
    "max",
    "max_over_time",
    "min",
    "min_over_time",
    "minute",
    "month",
    "pi",
    "predict_linear",
    "present_over_time",
    "quantile",
    "quantile_over_time",
    "rad",
    "rate",
    "resets",
    "round",
    "scalar",
    "sgn",
    "sin",
    "sinh",
    "sort",
    "sort_by_label",
    "sort_by_label_desc",
    "sort_desc",
    "sqrt",
    "stddev",
    "stddev_over_time",
    "stdvar",
    "stdvar_over_time",
    "sum",
    "sum_over_time",
    "tan",
    "tanh",
    "time",
    "timestamp",
    "topk",
    "vector",
    "year",
    "label_values",
    "query_result",
];

/// PromQL's keywords that stand alone.
const KEYWORDS: &[&str] = &[
    "and", "or", "unless", "bool", "offset", "inf", "nan", "atan2",
];

/// Keywords followed by a list of label names.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Why an expression could not be read.
#[derive(Debug, PartialEq)]
enum ExprError {
    /// A name followed by `(` that is no function.
    UnknownFunction(String),
    /// A bracket or quote left open.
    Unclosed(char),
    /// A metric selected by `__name__`, which this check cannot follow.
    NameMatcher,
}

/// Skips past the closing `close` of a block opened just before `i`, strings inside included;
/// returns the index after it.
fn skip_block(chars: &[char], mut i: usize, close: char) -> Result<usize, ExprError> {
    while i < chars.len() {
        match chars[i] {
            c if c == close => return Ok(i + 1),
            '"' | '\'' | '`' => i = skip_string(chars, i)?,
            _ => i += 1,
        }
    }
    Err(ExprError::Unclosed(close))
}

/// The index after the string literal starting at `i`.
fn skip_string(chars: &[char], i: usize) -> Result<usize, ExprError> {
    let quote = chars[i];
    let mut j = i + 1;
    while j < chars.len() {
        match chars[j] {
            '\\' if quote != '`' => j += 2,
            c if c == quote => return Ok(j + 1),
            _ => j += 1,
        }
    }
    Err(ExprError::Unclosed(quote))
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// The metric names a PromQL expression (or a Grafana variable query) selects: names followed
/// by `{` or standing alone; not functions (followed by `(`), keywords, the label lists after
/// `by`/`on`/…, label matchers, strings, numbers, durations, Grafana's `$variables`, nor the
/// label argument of `label_values(…, label)`.
fn metric_names(expr: &str) -> Result<BTreeSet<String>, ExprError> {
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    // Depth of the parentheses of label_values calls, to drop its label argument.
    let mut label_values_depth: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => i = skip_string(&chars, i)?,
            '{' => {
                let end = skip_block(&chars, i + 1, '}')?;
                let matchers: String = chars[i..end].iter().collect();
                if matchers.contains("__name__") {
                    return Err(ExprError::NameMatcher);
                }
                i = end;
            }
            '[' => i = skip_block(&chars, i + 1, ']')?,
            '$' => {
                i += 1;
                if chars.get(i) == Some(&'{') {
                    i = skip_block(&chars, i + 1, '}')?;
                } else {
                    while i < chars.len() && is_name_char(chars[i]) {
                        i += 1;
                    }
                }
            }
            '(' => {
                depth += 1;
                i += 1;
            }
            ')' => {
                if label_values_depth.last() == Some(&depth) {
                    label_values_depth.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            ',' if label_values_depth.last() == Some(&depth) => {
                // label_values(metric, label): the rest of the call is a label name.
                i = skip_block(&chars, i + 1, ')')? - 1;
            }
            c if c.is_ascii_digit() || c == '.' => {
                // A number or a duration (5m, 1.5e3, 0x1f).
                while i < chars.len() && (is_name_char(chars[i]) || chars[i] == '.') {
                    i += 1;
                }
            }
            c if is_name_start(c) => {
                let start = i;
                while i < chars.len() && is_name_char(chars[i]) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let mut next = i;
                while next < chars.len() && chars[next].is_whitespace() {
                    next += 1;
                }
                let lower = word.to_ascii_lowercase();
                // An aggregation with its grouping first: `sum by (gpu) (…)`.
                let following: String = chars[next..]
                    .iter()
                    .take_while(|c| is_name_char(**c))
                    .collect();
                let grouped = matches!(following.to_ascii_lowercase().as_str(), "by" | "without");
                if grouped && !LABEL_LISTS.contains(&lower.as_str()) {
                    if !FUNCTIONS.contains(&word.as_str()) {
                        return Err(ExprError::UnknownFunction(word));
                    }
                } else if LABEL_LISTS.contains(&lower.as_str()) {
                    if chars.get(next) == Some(&'(') {
                        i = skip_block(&chars, next + 1, ')')?;
                    }
                } else if KEYWORDS.contains(&lower.as_str()) {
                } else if chars.get(next) == Some(&'(') {
                    if !FUNCTIONS.contains(&word.as_str()) {
                        return Err(ExprError::UnknownFunction(word));
                    }
                    if word == "label_values" {
                        label_values_depth.push(depth + 1);
                        // label_values(label) alone names no metric.
                        let end = skip_block(&chars, next + 1, ')')?;
                        let args: String = chars[next + 1..end - 1].iter().collect();
                        if !args.contains(',') {
                            label_values_depth.pop();
                            i = end;
                        }
                    }
                } else {
                    names.insert(word);
                }
            }
            _ => i += 1,
        }
    }
    Ok(names)
}

/// One query of the dashboard: where it is, and the expression.
struct Query {
    /// "panel TITLE", "annotation NAME" or "variable NAME".
    place: String,
    /// The row the panel sits under (`None` outside panels).
    row: Option<String>,
    expr: String,
}

fn text(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Every query of the dashboard.
fn queries(dashboard: &Value) -> Vec<Query> {
    let mut out = Vec::new();
    let mut row = None;
    let mut panels: Vec<(Option<String>, &Value)> = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        if panel["type"] == "row" {
            row = Some(text(panel, "title"));
            // A collapsed row keeps its panels inside it.
            for inner in panel["panels"].as_array().into_iter().flatten() {
                panels.push((row.clone(), inner));
            }
        } else {
            panels.push((row.clone(), panel));
        }
    }
    for (row, panel) in panels {
        for target in panel["targets"].as_array().into_iter().flatten() {
            out.push(Query {
                place: format!("panel {:?}", text(panel, "title")),
                row: row.clone(),
                expr: text(target, "expr"),
            });
        }
    }
    for a in dashboard["annotations"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if a.get("expr").is_some() {
            out.push(Query {
                place: format!("annotation {:?}", text(a, "name")),
                row: None,
                expr: text(a, "expr"),
            });
        }
    }
    for v in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if v["type"] == "query" {
            let expr = match &v["query"] {
                Value::String(q) => q.clone(),
                q => text(q, "query"),
            };
            out.push(Query {
                place: format!("variable {:?}", text(v, "name")),
                row: None,
                expr,
            });
        }
    }
    out
}

/// The sample names of the exporter's page, both formats.
fn exported() -> BTreeSet<String> {
    [Format::Text, Format::OpenMetrics]
        .into_iter()
        .flat_map(|f| {
            common::page(f)
                .lines()
                .filter(|l| !l.starts_with('#') && !l.is_empty())
                .map(|l| l[..l.find(['{', ' ']).unwrap()].to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// DCGM's names (tests/data/dcgm-fields.csv).
fn dcgm() -> BTreeSet<String> {
    include_str!("data/dcgm-fields.csv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(',').next().unwrap().trim().to_string())
        .collect()
}

/// Whether a row holds pog's own panels (the others are for dcgm-exporter too).
fn pog_row(row: &Option<String>) -> bool {
    row.as_deref().is_some_and(|r| r.starts_with("pog"))
}

#[test]
fn every_query_names_only_metrics_pog_exports_and_dcgm_panels_only_dcgm_fields() {
    let dashboard: Value = serde_json::from_str(DASHBOARD).expect("the dashboard is JSON");
    let exported = exported();
    let dcgm = dcgm();
    let queries = queries(&dashboard);
    assert!(queries.len() > 40, "{} queries", queries.len());
    let mut used = BTreeSet::new();
    let mut wrong = Vec::new();
    for q in &queries {
        let names =
            metric_names(&q.expr).unwrap_or_else(|e| panic!("{}: {:?} in {}", q.place, e, q.expr));
        if names.is_empty() {
            wrong.push(format!("{}: names no metric: {}", q.place, q.expr));
        }
        for name in &names {
            if !exported.contains(name) {
                wrong.push(format!("{}: {name} is not exported by pog", q.place));
            }
            if q.row.is_some()
                && !pog_row(&q.row)
                && !(name.starts_with("DCGM_FI_") && dcgm.contains(name))
            {
                wrong.push(format!(
                    "{} (row {:?}): {name} is not DCGM's",
                    q.place, q.row
                ));
            }
        }
        // Panels filter by the dashboard's variables (the sampler's series have no gpu).
        if q.row.is_some() {
            let gpu_series = names.iter().any(|n| !n.starts_with("pog_sampler_"));
            for var in ["$instance", "$gpu", "$Hostname"] {
                if (gpu_series || var == "$instance") && !q.expr.contains(var) {
                    wrong.push(format!("{}: {} does not filter by {var}", q.place, q.expr));
                }
            }
        }
        used.extend(names);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // The panels the dashboard is for.
    for name in [
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_MEMORY_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
        "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
        "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
        "DCGM_FI_PROF_NVLINK_RX_BYTES",
        "pog_anomaly_score",
        "pog_alerts_firing",
        "pog_last_proof_ratio",
        "pog_xid_errors_total",
        "pog_gpu_sampled",
        "pog_sampler_samples_total",
        "pog_sampler_errors_total",
        "pog_sampler_fields_unsupported_total",
    ] {
        assert!(used.contains(name), "no panel shows {name}");
    }
}

#[test]
fn the_dashboard_is_templated_like_nvidias_and_its_panels_are_placed() {
    let dashboard: Value = serde_json::from_str(DASHBOARD).unwrap();
    let variables: Vec<String> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| text(v, "name"))
        .collect();
    assert_eq!(variables, ["datasource", "instance", "Hostname", "gpu"]);
    let mut ids = BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        assert!(ids.insert(panel["id"].as_u64().unwrap()), "id twice");
        let grid = &panel["gridPos"];
        let (x, w) = (grid["x"].as_u64().unwrap(), grid["w"].as_u64().unwrap());
        assert!(x + w <= 24 && grid["h"].as_u64().unwrap() > 0, "{panel}");
        if panel["type"] != "row" {
            assert_eq!(panel["datasource"]["uid"], "${datasource}");
            assert!(!text(panel, "title").is_empty());
        }
    }
}

#[test]
fn the_extractor_reads_names_and_nothing_else() {
    let names = |e: &str| metric_names(e).unwrap().into_iter().collect::<Vec<_>>();
    assert_eq!(names("up"), ["up"]);
    assert_eq!(
        names(
            r#"sum by (gpu, Hostname) (rate(a_total{gpu=~"$gpu", x="b{c}"}[$__rate_interval])) / on(gpu) group_left(modelName) b"#
        ),
        ["a_total", "b"]
    );
    assert_eq!(
        names("sum(x) without (instance) > bool 0.5e3 and y offset 5m unless z or max(w[5m:1m])"),
        ["w", "x", "y", "z"]
    );
    assert_eq!(
        names(r#"label_values(DCGM_FI_DEV_GPU_TEMP{instance=~"$instance"}, Hostname)"#),
        ["DCGM_FI_DEV_GPU_TEMP"]
    );
    assert_eq!(names("label_values(gpu)"), Vec::<String>::new());
    assert_eq!(names(r#"floor(m{a="1"} / 4) % 2 * ${factor} + $x"#), ["m"]);
    assert_eq!(
        names("histogram_quantile(0.9, rate(h_bucket[5m])) + inf - nan + atan2"),
        ["h_bucket"]
    );
    assert_eq!(names("a:recorded:rate5m"), ["a:recorded:rate5m"]);
    assert_eq!(names("max without (gpu) (m) + count by(x)(n)"), ["m", "n"]);
    assert_eq!(
        metric_names("sumx(a)"),
        Err(ExprError::UnknownFunction("sumx".into()))
    );
    assert_eq!(
        metric_names(r#"{__name__="a"}"#),
        Err(ExprError::NameMatcher)
    );
    assert_eq!(metric_names("a{b=\"c\""), Err(ExprError::Unclosed('}')));
}

#[test]
fn every_panel_query_parses_as_promql() {
    let Some(promtool) = common::promtool() else {
        assert!(
            std::env::var_os("POG_REQUIRE_PROMTOOL").is_none(),
            "POG_REQUIRE_PROMTOOL is set and promtool is not found"
        );
        eprintln!("skipped: promtool not found (scripts/promtool.sh installs it)");
        return;
    };
    let dashboard: Value = serde_json::from_str(DASHBOARD).unwrap();
    // Each panel's and annotation's query as a recording rule, Grafana's variables filled in.
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    let promql = queries(&dashboard)
        .into_iter()
        .filter(|q| !q.place.starts_with("variable"));
    for (i, q) in promql.enumerate() {
        let mut expr = q.expr.clone();
        for (var, value) in [
            ("$__rate_interval", "1m"),
            ("$__range", "1h"),
            ("$instance", ".*"),
            ("$Hostname", ".*"),
            ("$gpu", ".*"),
        ] {
            expr = expr.replace(var, value);
        }
        rules += &format!(
            "      - record: dashboard:query{i}\n        expr: {}\n",
            serde_json::to_string(&expr).unwrap()
        );
    }
    let dir = std::env::temp_dir().join(format!("pog-grafana-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rules.yml");
    std::fs::write(&file, &rules).unwrap();
    let output = std::process::Command::new(&promtool)
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let said = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{said}\n{rules}");
    assert!(said.contains("SUCCESS"), "{said}");
}

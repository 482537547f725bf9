//! The `/metrics` page of a simulated host against the rules of the exposition formats, checked
//! two ways: by `promtool check metrics` (Prometheus's own linter, on the text format) where it
//! is installed (`scripts/promtool.sh` installs it; the test says it skipped when it is not),
//! and by the rules below, which need nothing.

mod common;

use pog_monitor::prometheus::Format;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::process::{Command, Stdio};

/// The DCGM names of the reference list (tests/data/dcgm-fields.csv).
fn dcgm_names() -> HashSet<String> {
    include_str!("data/dcgm-fields.csv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(',').next().unwrap().trim().to_string())
        .collect()
}

/// dcgm-exporter's label names that are not snake_case, kept as dcgm-exporter spells them so
/// that its dashboards work.
const DCGM_LABELS: [&str; 1] = ["modelName"];

fn valid_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn valid_label_name(name: &str) -> bool {
    !name.starts_with("__") && !name.contains(':') && valid_metric_name(name)
}

/// A sample line's name, labels (values unescaped) and value.
fn parse_sample(line: &str) -> (String, Vec<(String, String)>, String) {
    let name_end = line
        .find(['{', ' '])
        .expect("a name then labels or a value");
    let name = line[..name_end].to_string();
    let mut labels = Vec::new();
    let mut chars = line[name_end..].chars().peekable();
    if chars.peek() == Some(&'{') {
        chars.next();
        loop {
            let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
            assert_eq!(chars.next(), Some('"'), "a quoted value in {line}");
            let mut value = String::new();
            loop {
                match chars.next() {
                    Some('\\') => match chars.next() {
                        Some('n') => value.push('\n'),
                        Some(c @ ('\\' | '"')) => value.push(c),
                        other => panic!("bad escape {other:?} in {line}"),
                    },
                    Some('"') => break,
                    Some(c) => value.push(c),
                    None => panic!("unterminated label value in {line}"),
                }
            }
            labels.push((key, value));
            match chars.next() {
                Some(',') => continue,
                Some('}') => break,
                other => panic!("{other:?} after a label value in {line}"),
            }
        }
    }
    let value: String = chars.collect();
    (name, labels, value.trim().to_string())
}

/// The problems of a page against the format's rules: each family's HELP and TYPE at most
/// once and before its samples, its samples together, every sample of a family declared
/// before it (`_total` for a counter in OpenMetrics), valid metric and label names, no label
/// twice on a series, no series twice, numbers for values, pog's counters ending in `_total`,
/// and in OpenMetrics the `# EOF` line last.
fn problems(page: &str, format: Format) -> Vec<String> {
    let mut out = Vec::new();
    let mut declared: HashMap<String, (bool, Option<String>)> = HashMap::new();
    let mut finished: HashSet<String> = HashSet::new();
    let mut current: Option<String> = None;
    let mut series = HashSet::new();
    let lines: Vec<&str> = page.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if *line == "# EOF" {
            if format != Format::OpenMetrics || i + 1 != lines.len() {
                out.push(format!("line {}: # EOF where it does not belong", i + 1));
            }
            continue;
        }
        if let Some(meta) = line.strip_prefix("# ") {
            let mut words = meta.splitn(3, ' ');
            let (what, family) = (words.next().unwrap(), words.next().unwrap_or_default());
            let rest = words.next().unwrap_or_default();
            if finished.contains(family) || current.as_deref() == Some(family) {
                if declared[family].0 && what == "HELP"
                    || declared[family].1.is_some() && what == "TYPE"
                {
                    out.push(format!("line {}: {what} of {family} again", i + 1));
                } else if current.as_deref() == Some(family) && !matches!(what, "HELP" | "TYPE") {
                    out.push(format!("line {}: unknown comment {line}", i + 1));
                }
            }
            if let Some(previous) = current.replace(family.to_string()) {
                if previous != family {
                    finished.insert(previous);
                }
            }
            if !valid_metric_name(family) {
                out.push(format!("line {}: bad family name {family:?}", i + 1));
            }
            let entry = declared.entry(family.to_string()).or_default();
            match what {
                "HELP" => entry.0 = true,
                "TYPE" => {
                    let allowed: &[&str] = match format {
                        Format::Text => &["counter", "gauge", "untyped", "histogram", "summary"],
                        Format::OpenMetrics => &["counter", "gauge", "unknown", "info", "stateset"],
                    };
                    if !allowed.contains(&rest) {
                        out.push(format!("line {}: type {rest:?}", i + 1));
                    }
                    entry.1 = Some(rest.to_string());
                }
                _ => out.push(format!("line {}: unknown comment {line}", i + 1)),
            }
            continue;
        }
        let (name, labels, value) = parse_sample(line);
        let Some(family) = current.clone() else {
            out.push(format!("line {}: {name} before any TYPE", i + 1));
            continue;
        };
        let kind = declared[&family].1.clone().unwrap_or_default();
        let expected = match (format, kind.as_str()) {
            (Format::OpenMetrics, "counter") => format!("{family}_total"),
            _ => family.clone(),
        };
        if name != expected {
            out.push(format!(
                "line {}: {name} under family {family} ({kind})",
                i + 1
            ));
        }
        if format == Format::OpenMetrics && kind == "counter" && family.ends_with("_total") {
            out.push(format!(
                "line {}: OpenMetrics counter family {family} ends in _total",
                i + 1
            ));
        }
        if kind == "counter" && name.starts_with("pog_") && !name.ends_with("_total") {
            out.push(format!("line {}: counter {name} without _total", i + 1));
        }
        if !name.starts_with("pog_") && !name.starts_with("DCGM_FI_") {
            out.push(format!(
                "line {}: {name} is neither pog's nor DCGM's",
                i + 1
            ));
        }
        let mut keys = HashSet::new();
        for (key, _) in &labels {
            if !valid_label_name(key) || !keys.insert(key.clone()) {
                out.push(format!("line {}: label {key:?} bad or twice", i + 1));
            }
        }
        let mut sorted = labels.clone();
        sorted.sort();
        if !series.insert((name.clone(), sorted)) {
            out.push(format!("line {}: series {name}{labels:?} twice", i + 1));
        }
        if !matches!(value.as_str(), "NaN" | "+Inf" | "-Inf") && value.parse::<f64>().is_err() {
            out.push(format!("line {}: value {value:?}", i + 1));
        }
    }
    for (family, (help, kind)) in &declared {
        if !help || kind.is_none() {
            out.push(format!("{family}: HELP {help}, TYPE {kind:?}"));
        }
    }
    if format == Format::OpenMetrics && lines.last() != Some(&"# EOF") {
        out.push("no # EOF at the end".into());
    }
    out
}

#[test]
fn both_formats_follow_their_rules() {
    for format in [Format::Text, Format::OpenMetrics] {
        let page = common::page(format);
        assert_eq!(
            problems(&page, format),
            Vec::<String>::new(),
            "{format:?}:\n{page}"
        );
        assert!(page.contains("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_L17{"));
        assert!(page.contains("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{"));
    }
}

#[test]
fn the_rules_catch_what_they_are_for() {
    let text = Format::Text;
    let bad = |page: &str| problems(page, text);
    assert!(bad("# HELP pog_a x\n# TYPE pog_a gauge\npog_a 1\n").is_empty());
    assert_eq!(bad("pog_a 1\n").len(), 1, "a sample before any TYPE");
    assert!(
        !bad("# HELP pog_a x\n# TYPE pog_a gauge\npog_a 1\npog_a 2\n").is_empty(),
        "a series twice"
    );
    assert!(
        !bad("# HELP pog_a x\n# TYPE pog_a gauge\n# HELP pog_b x\n# TYPE pog_b gauge\npog_b 1\n# HELP pog_a x\n")
            .is_empty()
    );
    assert!(!bad("# HELP pog_x x\n# TYPE pog_x counter\npog_x 1\n").is_empty());
    assert!(!bad("# HELP pog_a x\n# TYPE pog_a gauge\npog_a{l=\"1\",l=\"2\"} 1\n").is_empty());
    assert!(!bad("# HELP pog_a x\n# TYPE pog_a gauge\npog_a{__l=\"1\"} 1\n").is_empty());
    assert!(!bad("# HELP pog_a x\n# TYPE pog_a gauge\npog_b 1\n").is_empty());
    assert!(!bad("# HELP pog_a x\n# TYPE pog_a gauge\npog_a one\n").is_empty());
    let om = |page: &str| problems(page, Format::OpenMetrics);
    assert!(om("# HELP pog_c x\n# TYPE pog_c counter\npog_c_total 1\n# EOF").is_empty());
    assert!(!om("# HELP pog_c x\n# TYPE pog_c counter\npog_c 1\n# EOF").is_empty());
    assert!(!om("# HELP pog_c x\n# TYPE pog_c counter\npog_c_total 1\n").is_empty());
    let (name, labels, value) = parse_sample(r#"m{a="x\"y\\z\n",b="2"} 3.5"#);
    assert_eq!(name, "m");
    assert_eq!(
        labels,
        [("a".into(), "x\"y\\z\n".into()), ("b".into(), "2".into())]
    );
    assert_eq!(value, "3.5");
}

#[test]
fn promtool_check_metrics_finds_nothing_but_dcgm_exporters_own_spellings() {
    let Some(promtool) = common::promtool() else {
        assert!(
            std::env::var_os("POG_REQUIRE_PROMTOOL").is_none(),
            "POG_REQUIRE_PROMTOOL is set and promtool is not found"
        );
        eprintln!("skipped: promtool not found (scripts/promtool.sh installs it)");
        return;
    };
    let page = common::page(Format::Text);
    let mut child = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", promtool.display()));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(page.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    eprintln!("{} check metrics: {}", promtool.display(), output.status);
    // promtool's lint lines are "NAME problem"; a parse error is anything else.
    let dcgm = dcgm_names();
    let camel: Vec<&str> = page
        .lines()
        .filter(|l| !l.starts_with('#'))
        .flat_map(|l| parse_sample(l).1)
        .map(|(k, _)| k)
        .filter(|k| {
            k.as_bytes()
                .windows(2)
                .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase())
        })
        .map(|k| {
            if DCGM_LABELS.contains(&k.as_str()) {
                "dcgm"
            } else {
                "other"
            }
        })
        .collect();
    assert!(
        camel.iter().all(|c| *c == "dcgm"),
        "a camelCase label of pog's own"
    );
    let mut unexplained = Vec::new();
    for line in said.lines().filter(|l| !l.trim().is_empty()) {
        let (name, problem) = line.split_once(' ').unwrap_or((line, ""));
        let dcgm_label = problem == "label names should be written in 'snake_case' not 'camelCase'";
        let dcgm_name = dcgm.contains(name)
            && matches!(
                problem,
                "counter metrics should have \"_total\" suffix"
                    | "metric name should not include type 'counter'"
            );
        if !(dcgm_label || dcgm_name) {
            unexplained.push(line.to_string());
        }
    }
    assert!(
        unexplained.is_empty(),
        "promtool says:\n{}",
        unexplained.join("\n")
    );
    // It read the page: a lint of a page it could not parse says so, and exits 1 without names.
    assert!(said.contains("DCGM_FI_DEV_PCIE_REPLAY_COUNTER"), "{said}");
}

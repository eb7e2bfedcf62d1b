// SPDX-License-Identifier: GPL-2.0-only
//! Reading back what `rrds bench --json` wrote, for `rrds plot`: each
//! summary line becomes a result (its set-up and medians); the other lines
//! must be JSON too, and are skipped. Fields that older versions did not
//! write (`peer_addr`, `transport`, `tasks`, the `lat_min_us` family,
//! `ack_size`) get the values those versions had.

use super::plot::Meta;
use super::plot::Source;
use super::Kind;
use super::Summary;
use serde_json::Value;

/// The results in `text`, the output of `rrds bench --json` read from
/// `name`: one per summary line, labelled `name` (`name#2`, ... when there
/// are several). The error says which line is wrong, and why.
pub fn read(name: &str, text: &str) -> Result<Vec<Source>, String> {
    let mut summaries = Vec::new();
    for (at, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(line).map_err(|err| {
            format!(
                "{name}:{}: not a line of `rrds bench --json` ({err})",
                at + 1
            )
        })?;
        if value.get("type").and_then(Value::as_str) == Some("summary") {
            summaries.push((at + 1, value));
        }
    }
    if summaries.is_empty() {
        return Err(format!(
            "{name}: no summary line (`rrds bench --json` writes it last, once the runs are done)"
        ));
    }
    let several = summaries.len() > 1;
    summaries
        .iter()
        .enumerate()
        .map(|(i, (line, value))| {
            let label = if several {
                format!("{name}#{}", i + 1)
            } else {
                name.to_string()
            };
            result(label, value).map_err(|err| format!("{name}:{line}: {err}"))
        })
        .collect()
}

/// A field that must be there.
fn field<'a, T>(
    object: &'a Value,
    key: &str,
    take: impl FnOnce(&'a Value) -> Option<T>,
) -> Result<T, String> {
    object
        .get(key)
        .and_then(take)
        .ok_or_else(|| format!("no \"{key}\" of the right type"))
}

/// A whole number that fits `T`.
fn whole<T: TryFrom<u64>>(value: &Value) -> Option<T> {
    T::try_from(value.as_u64()?).ok()
}

/// A number, or `None` for `null` (not measured) or a missing field.
fn number(object: &Value, key: &str) -> Option<f64> {
    object.get(key).and_then(Value::as_f64)
}

/// One summary object.
fn result(label: String, summary: &Value) -> Result<Source, String> {
    let text = |key| field(summary, key, Value::as_str).map(str::to_string);
    let addr = text("addr")?;
    let meta = Meta {
        implementation: text("impl")?,
        peer_addr: text("peer_addr").unwrap_or_else(|_| addr.clone()),
        addr,
        transport: text("transport").unwrap_or_else(|_| "default".to_string()),
        runs: field(summary, "runs", whole)?,
        duration_s: field(summary, "duration_s", Value::as_f64)?,
        depth: field(summary, "depth", whole)?,
        tasks: field(summary, "tasks", whole).unwrap_or(1),
        ack_size: summary.get("ack_size").and_then(whole),
    };
    let medians = field(summary, "medians", Value::as_array)?;
    let summaries = medians
        .iter()
        .map(median)
        .collect::<Result<Vec<Summary>, String>>()?;
    Ok(Source {
        label: Some(label),
        meta,
        summaries,
    })
}

/// One median of a summary.
fn median(median: &Value) -> Result<Summary, String> {
    let mode = field(median, "mode", Value::as_str)?;
    let kind =
        Kind::parse(mode).ok_or_else(|| format!("a median of an unknown mode, \"{mode}\""))?;
    Ok(Summary {
        kind,
        size: field(median, "size", whole)?,
        runs: field(median, "runs", whole)?,
        msgs_per_sec: number(median, "msgs_per_sec"),
        mb_per_sec: number(median, "mb_per_sec"),
        lat_mean_us: number(median, "lat_mean_us"),
        lat_p50_us: number(median, "lat_p50_us"),
        lat_p99_us: number(median, "lat_p99_us"),
        errors: field(median, "errors", Value::as_u64)?,
        lat_min_us: number(median, "lat_min_us"),
        lat_p999_us: number(median, "lat_p999_us"),
        lat_max_us: number(median, "lat_max_us"),
    })
}

#[cfg(test)]
mod tests {
    use super::super::report::Report;
    use super::super::BenchArgs;
    use super::super::Sample;
    use super::*;

    fn args(extra: &[&str]) -> BenchArgs {
        super::super::parsed_args(extra)
    }

    fn medians() -> Vec<Summary> {
        vec![
            Summary {
                kind: Kind::Rate,
                size: 64,
                runs: 3,
                msgs_per_sec: Some(812_345.5),
                mb_per_sec: Some(51.99),
                lat_mean_us: None,
                lat_p50_us: None,
                lat_p99_us: None,
                errors: 0,
                lat_min_us: None,
                lat_p999_us: None,
                lat_max_us: None,
            },
            Summary {
                kind: Kind::Register,
                size: 1 << 20,
                runs: 3,
                msgs_per_sec: Some(2000.0),
                mb_per_sec: None,
                lat_mean_us: Some(480.25),
                lat_p50_us: Some(470.5),
                lat_p99_us: Some(900.0),
                errors: 2,
                lat_min_us: Some(400.0),
                lat_p999_us: Some(950.0),
                lat_max_us: Some(1000.0),
            },
        ]
    }

    /// What `rrds bench --json` with `argv` writes for [`medians`].
    fn written(argv: &[&str]) -> String {
        let mut buf = Vec::new();
        let mut report = Report::new(&mut buf, true, "rds", &args(argv));
        report.header().unwrap();
        let run = Sample {
            msgs_per_sec: Some(1.0),
            ..Sample::empty(Kind::Rate, 64, 1)
        };
        report.sample(&run).unwrap();
        report.finish(&medians(), Some(99.5)).unwrap();
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn reads_what_bench_writes() {
        let text = written(&[
            "--addr",
            "10.254.9.1",
            "--peer-addr",
            "10.254.9.2",
            "--transport",
            "ib",
            "-T",
            "2",
            "--runs",
            "3",
            "-d",
            "8",
            "-t",
            "2",
            "-a",
            "16",
        ]);
        let results = read("rds.json", &text).unwrap();
        assert_eq!(results.len(), 1);
        let result = &results[0];
        assert_eq!(result.label.as_deref(), Some("rds.json"));
        assert_eq!(
            result.meta,
            Meta {
                implementation: "rds".to_string(),
                addr: "10.254.9.1".to_string(),
                peer_addr: "10.254.9.2".to_string(),
                transport: "ib".to_string(),
                runs: 3,
                duration_s: 2.0,
                depth: 8,
                tasks: 2,
                ack_size: Some(16),
            }
        );
        // Written with three decimals, which these values have at most.
        assert_eq!(result.summaries, medians());
    }

    #[test]
    fn every_summary_is_a_result() {
        let text = written(&[]) + "\n" + &written(&["-T", "0", "--mode", "rate", "-q", "64"]);
        let results = read("all.json", &text).unwrap();
        let labels: Vec<_> = results.iter().map(|r| r.label.as_deref()).collect();
        assert_eq!(labels, [Some("all.json#1"), Some("all.json#2")]);
        assert_eq!(results[1].meta.duration_s, 0.0);
        assert_eq!(results[1].meta.runs, 1);
    }

    #[test]
    fn older_summaries_read_too() {
        // Before peer_addr, transport, tasks and the lat_min_us family.
        let old = "{\"type\":\"summary\",\"impl\":\"rrds\",\"addr\":\"127.0.0.1\",\
                   \"duration_s\":5.000,\"runs\":3,\"depth\":32,\"verify\":false,\
                   \"errors\":0,\"medians\":[{\"runs\":3,\"mode\":\"latency\",\"size\":64,\
                   \"msgs_per_sec\":40000.000,\"mb_per_sec\":null,\"lat_mean_us\":25.000,\
                   \"lat_p50_us\":24.000,\"lat_p99_us\":40.000,\"errors\":0}]}";
        let results = read("old.json", old).unwrap();
        let meta = &results[0].meta;
        assert_eq!(meta.peer_addr, "127.0.0.1");
        assert_eq!(meta.transport, "default");
        assert_eq!((meta.tasks, meta.ack_size), (1, None));
        let median = &results[0].summaries[0];
        assert_eq!(median.kind, Kind::Latency);
        assert_eq!(median.lat_p50_us, Some(24.0));
        assert_eq!(median.lat_max_us, None);
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let err = read("table.txt", "rrds bench: impl=rrds addr=127.0.0.1\n").unwrap_err();
        assert!(
            err.starts_with("table.txt:1: not a line of `rrds bench --json`"),
            "{err}"
        );
        let runs_only = written(&[]).lines().next().unwrap().to_string();
        let err = read("cut.json", &runs_only).unwrap_err();
        assert!(err.starts_with("cut.json: no summary line"), "{err}");
        let err = read("empty.json", "").unwrap_err();
        assert!(err.starts_with("empty.json: no summary line"), "{err}");
        let text = written(&[]).replace("\"mode\":\"register\"", "\"mode\":\"warp\"");
        let err = read("odd.json", &text).unwrap_err();
        assert_eq!(err, "odd.json:2: a median of an unknown mode, \"warp\"");
        let text = written(&[]).replace("\"depth\":32", "\"depth\":-1");
        let err = read("odd.json", &text).unwrap_err();
        assert_eq!(err, "odd.json:2: no \"depth\" of the right type");
    }
}

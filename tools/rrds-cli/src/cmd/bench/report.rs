// SPDX-License-Identifier: GPL-2.0-only
//! Benchmark output: a table for people, or JSON lines for scripts.
//!
//! JSON: one `{"type":"run",...}` object per run as it finishes, then one
//! `{"type":"summary",...}` object with the medians per mode and size.
//! Numbers are `null` where a mode does not measure them. Both kinds carry
//! `addr`, `peer_addr` and `transport` (the `--transport` value), so runs
//! of different set-ups can be told apart once their lines are collected.
//! Fields added later (`lat_min_us`, `lat_p999_us`, `lat_max_us` and, with
//! `--histogram`, a run's `histogram`; the summary's `ack_size` and
//! `cpu_percent`) come after all of those, so every older field keeps its
//! place. With `--interval`, `{"type":"interval",...}` objects come
//! between the runs'.

use std::io;
use std::io::Write;

use super::interval::Tick;
use super::BenchArgs;
use super::Sample;
use super::Summary;
use serde::Serialize;

use crate::cmd::json::record_line;
use crate::cmd::json::three_decimals;
use crate::cmd::json::three_decimals_always;
use crate::cmd::json::write_record;
use crate::cmd::stats::Percentile;

/// Writes the results as they come.
pub struct Report<W: Write> {
    out: W,
    json: bool,
    implementation: &'static str,
    setup: Setup,
    duration_s: f64,
    runs: u32,
    depth: u32,
    tasks: u32,
    verify: bool,
    histogram: bool,
    ack_size: Option<usize>,
}

/// The measured columns of a table row.
struct Row<'a> {
    mode: &'a str,
    size: usize,
    run: String,
    msgs_per_sec: Option<f64>,
    mb_per_sec: Option<f64>,
    lat_mean_us: Option<f64>,
    lat_p50_us: Option<f64>,
    lat_p99_us: Option<f64>,
    errors: u64,
    lat_min_us: Option<f64>,
    lat_p999_us: Option<f64>,
    lat_max_us: Option<f64>,
}

/// A number with `decimals` decimals, or `-` when not measured.
fn cell(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.decimals$}"))
}

impl Row<'_> {
    fn header() -> String {
        format!(
            "{:<10} {:>8} {:<6} {:>12} {:>10} {:>10} {:>10} {:>10} {:>7} {:>10} {:>10} {:>10}",
            "mode",
            "size",
            "run",
            "msgs/s",
            "MB/s",
            "mean_us",
            "p50_us",
            "p99_us",
            "errors",
            "min_us",
            "p99.9_us",
            "max_us"
        )
    }

    fn text(&self) -> String {
        format!(
            "{:<10} {:>8} {:<6} {:>12} {:>10} {:>10} {:>10} {:>10} {:>7} {:>10} {:>10} {:>10}",
            self.mode,
            self.size,
            self.run,
            cell(self.msgs_per_sec, 1),
            cell(self.mb_per_sec, 2),
            cell(self.lat_mean_us, 2),
            cell(self.lat_p50_us, 2),
            cell(self.lat_p99_us, 2),
            self.errors,
            cell(self.lat_min_us, 2),
            cell(self.lat_p999_us, 2),
            cell(self.lat_max_us, 2)
        )
    }

    /// The older measured fields, in their JSON order.
    fn measured(&self) -> Measured<'_> {
        Measured {
            mode: self.mode,
            size: self.size,
            msgs_per_sec: self.msgs_per_sec,
            mb_per_sec: self.mb_per_sec,
            lat_mean_us: self.lat_mean_us,
            lat_p50_us: self.lat_p50_us,
            lat_p99_us: self.lat_p99_us,
            errors: self.errors,
        }
    }

    /// The measured fields added later, for the end of a record.
    fn added(&self) -> Added {
        Added {
            lat_min_us: self.lat_min_us,
            lat_p999_us: self.lat_p999_us,
            lat_max_us: self.lat_max_us,
        }
    }
}

/// A row's measured fields, as every JSON record has had them.
#[derive(Serialize)]
struct Measured<'a> {
    mode: &'a str,
    size: usize,
    #[serde(serialize_with = "three_decimals")]
    msgs_per_sec: Option<f64>,
    #[serde(serialize_with = "three_decimals")]
    mb_per_sec: Option<f64>,
    #[serde(serialize_with = "three_decimals")]
    lat_mean_us: Option<f64>,
    #[serde(serialize_with = "three_decimals")]
    lat_p50_us: Option<f64>,
    #[serde(serialize_with = "three_decimals")]
    lat_p99_us: Option<f64>,
    errors: u64,
}

/// The measured fields added later, after all the older ones.
#[derive(Serialize)]
struct Added {
    #[serde(serialize_with = "three_decimals")]
    lat_min_us: Option<f64>,
    #[serde(serialize_with = "three_decimals")]
    lat_p999_us: Option<f64>,
    #[serde(serialize_with = "three_decimals")]
    lat_max_us: Option<f64>,
}

/// Where a run went: both addresses and the `--transport` value.
#[derive(Serialize)]
struct Setup {
    addr: String,
    peer_addr: String,
    transport: &'static str,
}

/// `{"type":"run",...}`: one run as it finishes.
#[derive(Serialize)]
struct RunRecord<'a> {
    #[serde(rename = "impl")]
    implementation: &'a str,
    run: u32,
    #[serde(flatten)]
    measured: Measured<'a>,
    #[serde(flatten)]
    setup: &'a Setup,
    #[serde(flatten)]
    added: Added,
    #[serde(skip_serializing_if = "Option::is_none")]
    histogram: Option<Vec<PercentileRecord>>,
}

/// One point of a `--histogram` distribution.
#[derive(Serialize)]
struct PercentileRecord {
    #[serde(serialize_with = "three_decimals_always")]
    percentile: f64,
    #[serde(serialize_with = "three_decimals_always")]
    us: f64,
    count: u64,
}

/// One mode and size's medians in the summary.
#[derive(Serialize)]
struct MedianRecord<'a> {
    runs: usize,
    #[serde(flatten)]
    measured: Measured<'a>,
    #[serde(flatten)]
    added: Added,
}

/// `{"type":"summary",...}`: the settings and the medians.
#[derive(Serialize)]
struct SummaryRecord<'a> {
    #[serde(rename = "impl")]
    implementation: &'a str,
    #[serde(flatten)]
    setup: &'a Setup,
    #[serde(serialize_with = "three_decimals_always")]
    duration_s: f64,
    runs: u32,
    depth: u32,
    tasks: u32,
    verify: bool,
    errors: u64,
    medians: Vec<MedianRecord<'a>>,
    ack_size: Option<usize>,
    #[serde(serialize_with = "three_decimals")]
    cpu_percent: Option<f64>,
}

/// `{"type":"interval",...}`: one `--interval` tick.
#[derive(Serialize)]
struct IntervalRecord<'a> {
    #[serde(rename = "impl")]
    implementation: &'a str,
    run: u32,
    mode: &'a str,
    size: usize,
    #[serde(serialize_with = "three_decimals_always")]
    start_s: f64,
    #[serde(serialize_with = "three_decimals_always")]
    end_s: f64,
    #[serde(serialize_with = "three_decimals")]
    msgs_per_sec: Option<f64>,
    #[serde(serialize_with = "three_decimals")]
    mb_per_sec: Option<f64>,
    #[serde(serialize_with = "three_decimals")]
    lat_mean_us: Option<f64>,
    #[serde(serialize_with = "three_decimals")]
    cpu_percent: Option<f64>,
}

impl<'a> From<&'a Sample> for Row<'a> {
    fn from(s: &'a Sample) -> Self {
        Self {
            mode: s.kind.as_str(),
            size: s.size,
            run: s.run.to_string(),
            msgs_per_sec: s.msgs_per_sec,
            mb_per_sec: s.mb_per_sec,
            lat_mean_us: s.lat_mean_us,
            lat_p50_us: s.lat_p50_us,
            lat_p99_us: s.lat_p99_us,
            errors: s.errors,
            lat_min_us: s.lat_min_us,
            lat_p999_us: s.lat_p999_us,
            lat_max_us: s.lat_max_us,
        }
    }
}

impl<'a> From<&'a Summary> for Row<'a> {
    fn from(s: &'a Summary) -> Self {
        Self {
            mode: s.kind.as_str(),
            size: s.size,
            run: "median".to_string(),
            msgs_per_sec: s.msgs_per_sec,
            mb_per_sec: s.mb_per_sec,
            lat_mean_us: s.lat_mean_us,
            lat_p50_us: s.lat_p50_us,
            lat_p99_us: s.lat_p99_us,
            errors: s.errors,
            lat_min_us: s.lat_min_us,
            lat_p999_us: s.lat_p999_us,
            lat_max_us: s.lat_max_us,
        }
    }
}

/// A percentile distribution as JSON records.
fn distribution_records(distribution: &[Percentile]) -> Vec<PercentileRecord> {
    distribution
        .iter()
        .map(|p| PercentileRecord {
            percentile: p.percent,
            us: p.us,
            count: p.count,
        })
        .collect()
}

/// A percentile distribution as indented lines under a table row.
fn distribution_text(distribution: &[Percentile]) -> String {
    let mut text = format!("  {:>10} {:>12} {:>12}\n", "percentile", "us", "count");
    for p in distribution {
        text.push_str(&format!(
            "  {:>10} {:>12.2} {:>12}\n",
            format!("{}", p.percent),
            p.us,
            p.count
        ));
    }
    text
}

impl<W: Write> Report<W> {
    pub fn new(out: W, json: bool, implementation: &'static str, args: &BenchArgs) -> Self {
        Self {
            out,
            json,
            implementation,
            setup: Setup {
                addr: args.addr.to_string(),
                peer_addr: args.peer_addr().to_string(),
                transport: args.transport.as_str(),
            },
            duration_s: args.duration.as_secs_f64(),
            runs: args.runs(),
            depth: args.depth,
            tasks: args.tasks,
            verify: args.verify,
            histogram: args.histogram,
            ack_size: args.ack_size,
        }
    }

    /// The settings and the table header (nothing in JSON mode: every
    /// object carries `impl`, the summary the settings).
    pub fn header(&mut self) -> io::Result<()> {
        if self.json {
            return Ok(());
        }
        write!(
            self.out,
            "rrds bench: impl={} addr={} peer_addr={} transport={} duration={}s runs={} depth={} \
             tasks={} verify={}",
            self.implementation,
            self.setup.addr,
            self.setup.peer_addr,
            self.setup.transport,
            self.duration_s,
            self.runs,
            self.depth,
            self.tasks,
            if self.verify { "on" } else { "off" }
        )?;
        if let Some(ack) = self.ack_size {
            write!(self.out, " ack_size={ack}")?;
        }
        writeln!(self.out)?;
        writeln!(self.out, "{}", Row::header())
    }

    /// One run's result.
    pub fn sample(&mut self, sample: &Sample) -> io::Result<()> {
        let row = Row::from(sample);
        if self.json {
            let record = RunRecord {
                implementation: self.implementation,
                run: sample.run,
                measured: row.measured(),
                setup: &self.setup,
                added: row.added(),
                histogram: (self.histogram && !sample.distribution.is_empty())
                    .then(|| distribution_records(&sample.distribution)),
            };
            write_record(&mut self.out, "run", &record)
        } else {
            writeln!(self.out, "{}", row.text())?;
            if self.histogram && !sample.distribution.is_empty() {
                write!(self.out, "{}", distribution_text(&sample.distribution))?;
            }
            Ok(())
        }
    }

    /// The medians of one mode and size (JSON: kept for the summary).
    pub fn median(&mut self, summary: &Summary) -> io::Result<()> {
        if self.json {
            return Ok(());
        }
        writeln!(self.out, "{}", Row::from(summary).text())
    }

    /// The closing summary, with the process's CPU use over the runs
    /// (percent of the wall time).
    pub fn finish(&mut self, summaries: &[Summary], cpu_percent: Option<f64>) -> io::Result<()> {
        let errors: u64 = summaries.iter().map(|s| s.errors).sum();
        if !self.json {
            return writeln!(
                self.out,
                "impl={} errors={errors} cpu={}",
                self.implementation,
                cpu_percent.map_or_else(|| "-".to_string(), |p| format!("{p:.1}%"))
            );
        }
        let rows: Vec<Row<'_>> = summaries.iter().map(Row::from).collect();
        let medians = summaries
            .iter()
            .zip(&rows)
            .map(|(s, row)| MedianRecord {
                runs: s.runs,
                measured: row.measured(),
                added: row.added(),
            })
            .collect();
        let record = SummaryRecord {
            implementation: self.implementation,
            setup: &self.setup,
            duration_s: self.duration_s,
            runs: self.runs,
            depth: self.depth,
            tasks: self.tasks,
            verify: self.verify,
            errors,
            medians,
            ack_size: self.ack_size,
            cpu_percent,
        };
        write_record(&mut self.out, "summary", &record)
    }
}

/// An `--interval` line: text, or a JSON object of type `interval`.
pub fn interval(json: bool, implementation: &str, tick: &Tick) -> String {
    if json {
        let record = IntervalRecord {
            implementation,
            run: tick.run,
            mode: tick.kind.as_str(),
            size: tick.size,
            start_s: tick.start_s,
            end_s: tick.end_s,
            msgs_per_sec: tick.msgs_per_sec(),
            mb_per_sec: tick.mb_per_sec(),
            lat_mean_us: tick.lat_mean_us(),
            cpu_percent: tick.cpu_percent,
        };
        // Serializing these fields cannot fail.
        return record_line("interval", &record).unwrap_or_default();
    }
    let mut line = format!(
        "interval {} {} B run {} {:.1}-{:.1} s: {} msgs/s",
        tick.kind,
        tick.size,
        tick.run,
        tick.start_s,
        tick.end_s,
        cell(tick.msgs_per_sec(), 1)
    );
    if let Some(mb) = tick.mb_per_sec() {
        line.push_str(&format!(" {mb:.2} MB/s"));
    }
    if let Some(us) = tick.lat_mean_us() {
        line.push_str(&format!(" mean {us:.2} us"));
    }
    line.push_str(&match tick.cpu_percent {
        Some(p) => format!(" cpu {p:.1}%"),
        None => " cpu -".to_string(),
    });
    line
}

#[cfg(test)]
mod tests {
    use super::super::Kind;
    use super::*;
    use crate::cmd::stats::DISTRIBUTION;

    fn args(extra: &[&str]) -> BenchArgs {
        super::super::parsed_args(extra)
    }

    fn rate_sample() -> Sample {
        Sample {
            msgs_per_sec: Some(1000.0),
            mb_per_sec: Some(0.064),
            ..Sample::empty(Kind::Rate, 64, 2)
        }
    }

    fn latency_summary() -> Summary {
        Summary {
            kind: Kind::Latency,
            size: 8192,
            runs: 3,
            msgs_per_sec: Some(50000.0),
            mb_per_sec: None,
            lat_mean_us: Some(20.25),
            lat_p50_us: Some(19.5),
            lat_p99_us: Some(40.0),
            errors: 0,
            lat_min_us: Some(12.0),
            lat_p999_us: Some(80.5),
            lat_max_us: Some(95.0),
        }
    }

    fn output(json: bool, write: impl FnOnce(&mut Report<&mut Vec<u8>>)) -> String {
        let mut buf = Vec::new();
        let mut report = Report::new(&mut buf, json, "rrds", &args(&["--duration", "2"]));
        write(&mut report);
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn run_json_has_every_field() {
        let text = output(true, |r| r.sample(&rate_sample()).unwrap());
        assert_eq!(
            text,
            "{\"type\":\"run\",\"impl\":\"rrds\",\"run\":2,\"mode\":\"rate\",\"size\":64,\
             \"msgs_per_sec\":1000.0,\"mb_per_sec\":0.064,\"lat_mean_us\":null,\
             \"lat_p50_us\":null,\"lat_p99_us\":null,\"errors\":0,\"addr\":\"127.0.0.1\",\
             \"peer_addr\":\"127.0.0.1\",\"transport\":\"default\",\"lat_min_us\":null,\
             \"lat_p999_us\":null,\"lat_max_us\":null}\n"
        );
    }

    fn latency_sample() -> Sample {
        let mut rtt = crate::cmd::stats::Recorder::new();
        (1..=1000).for_each(|us| rtt.record_ns(us * 1000));
        let lat = rtt.latency().unwrap();
        Sample {
            msgs_per_sec: Some(40000.0),
            lat_mean_us: Some(lat.mean_us),
            lat_p50_us: Some(lat.p50_us),
            lat_p99_us: Some(lat.p99_us),
            lat_min_us: Some(lat.min_us),
            lat_p999_us: Some(lat.p999_us),
            lat_max_us: Some(lat.max_us),
            distribution: rtt.distribution(),
            ..Sample::empty(Kind::Latency, 64, 1)
        }
    }

    #[test]
    fn latency_run_json_adds_min_p999_and_max_last() {
        let text = output(true, |r| r.sample(&latency_sample()).unwrap());
        assert!(
            text.starts_with(
                "{\"type\":\"run\",\"impl\":\"rrds\",\"run\":1,\"mode\":\"latency\",\
                 \"size\":64,\"msgs_per_sec\":40000.0,\"mb_per_sec\":null,\
                 \"lat_mean_us\":500.5,\"lat_p50_us\":500."
            ),
            "{text}"
        );
        assert!(
            text.contains(
                ",\"errors\":0,\"addr\":\"127.0.0.1\",\"peer_addr\":\"127.0.0.1\",\
                 \"transport\":\"default\",\"lat_min_us\":1.0,\"lat_p999_us\":999."
            ),
            "{text}"
        );
        assert!(text.ends_with(",\"lat_max_us\":1000.0}\n"), "{text}");
        assert!(!text.contains("histogram"));
    }

    #[test]
    fn histogram_adds_the_distribution() {
        let with = |json| {
            let mut buf = Vec::new();
            let argv = args(&["--histogram"]);
            let mut report = Report::new(&mut buf, json, "rrds", &argv);
            report.sample(&latency_sample()).unwrap();
            // Rate runs have no distribution: nothing is added.
            report.sample(&rate_sample()).unwrap();
            String::from_utf8(buf).unwrap()
        };
        let json = with(true);
        let lines: Vec<&str> = json.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].contains(
                ",\"lat_max_us\":1000.0,\"histogram\":[{\"percentile\":0.0,\"us\":1.0,\
                 \"count\":1},{\"percentile\":10.0,"
            ),
            "{json}"
        );
        assert!(
            lines[0].ends_with("{\"percentile\":100.0,\"us\":1000.0,\"count\":1000}]}"),
            "{json}"
        );
        assert!(!lines[1].contains("histogram"));
        let text = with(false);
        let lines: Vec<&str> = text.lines().collect();
        // The run's row, a header and a line per percentile, the rate row.
        assert_eq!(lines.len(), 1 + 1 + DISTRIBUTION.len() + 1, "{text}");
        assert!(lines[0].starts_with("latency"));
        assert_eq!(lines[1], "  percentile           us        count");
        assert_eq!(lines[2], "           0         1.00            1");
        assert_eq!(
            lines[DISTRIBUTION.len() + 1],
            "         100      1000.00         1000"
        );
        assert!(
            lines.contains(&"      99.999      1000.00         1000"),
            "{text}"
        );
        assert!(lines[DISTRIBUTION.len() + 2].starts_with("rate"));
    }

    #[test]
    fn json_records_both_addresses_and_the_transport() {
        let mut buf = Vec::new();
        let ib = args(&[
            "--addr",
            "10.254.9.1",
            "--peer-addr",
            "10.254.9.2",
            "--transport",
            "ib",
        ]);
        let mut report = Report::new(&mut buf, true, "rds", &ib);
        report.sample(&rate_sample()).unwrap();
        report.finish(&[latency_summary()], None).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].ends_with(
            ",\"addr\":\"10.254.9.1\",\"peer_addr\":\"10.254.9.2\",\"transport\":\"ib\",\
             \"lat_min_us\":null,\"lat_p999_us\":null,\"lat_max_us\":null}"
        ));
        assert!(lines[1].starts_with(
            "{\"type\":\"summary\",\"impl\":\"rds\",\"addr\":\"10.254.9.1\",\
             \"peer_addr\":\"10.254.9.2\",\"transport\":\"ib\",\"duration_s\":5.0,"
        ));
    }

    #[test]
    fn summary_json_lists_medians() {
        let text = output(true, |r| {
            r.header().unwrap();
            r.median(&latency_summary()).unwrap();
            r.finish(&[latency_summary()], Some(12.5)).unwrap();
        });
        assert_eq!(
            text,
            "{\"type\":\"summary\",\"impl\":\"rrds\",\"addr\":\"127.0.0.1\",\
             \"peer_addr\":\"127.0.0.1\",\"transport\":\"default\",\"duration_s\":2.0,\
             \"runs\":3,\"depth\":32,\"tasks\":1,\"verify\":false,\"errors\":0,\"medians\":[{\"runs\":3,\
             \"mode\":\"latency\",\"size\":8192,\"msgs_per_sec\":50000.0,\"mb_per_sec\":null,\
             \"lat_mean_us\":20.25,\"lat_p50_us\":19.5,\"lat_p99_us\":40.0,\"errors\":0,\
             \"lat_min_us\":12.0,\"lat_p999_us\":80.5,\"lat_max_us\":95.0}],\
             \"ack_size\":null,\"cpu_percent\":12.5}\n"
        );
    }

    #[test]
    fn interval_lines() {
        use super::super::interval::Counts;
        let rate = Tick {
            kind: Kind::Rate,
            size: 64,
            run: 2,
            start_s: 1.0,
            end_s: 2.0,
            counts: Counts {
                msgs: 812_345,
                bytes: 812_345 * 64,
                timed: 0,
                time_ns: 0,
            },
            cpu_percent: Some(98.5),
        };
        assert_eq!(
            interval(false, "rrds", &rate),
            "interval rate 64 B run 2 1.0-2.0 s: 812345.0 msgs/s 51.99 MB/s cpu 98.5%"
        );
        assert_eq!(
            interval(true, "rrds", &rate),
            "{\"type\":\"interval\",\"impl\":\"rrds\",\"run\":2,\"mode\":\"rate\",\"size\":64,\
             \"start_s\":1.0,\"end_s\":2.0,\"msgs_per_sec\":812345.0,\
             \"mb_per_sec\":51.99,\"lat_mean_us\":null,\"cpu_percent\":98.5}"
        );
        let latency = Tick {
            kind: Kind::Latency,
            size: 8192,
            start_s: 0.0,
            end_s: 0.5,
            counts: Counts {
                msgs: 10_000,
                bytes: 0,
                timed: 10_000,
                time_ns: 474_100_000,
            },
            cpu_percent: None,
            ..rate
        };
        assert_eq!(
            interval(false, "rds", &latency),
            "interval latency 8192 B run 2 0.0-0.5 s: 20000.0 msgs/s mean 47.41 us cpu -"
        );
        assert!(interval(true, "rds", &latency)
            .ends_with(",\"mb_per_sec\":null,\"lat_mean_us\":47.41,\"cpu_percent\":null}"));
    }

    #[test]
    fn ack_size_is_recorded() {
        let with = |json| {
            let mut buf = Vec::new();
            let mut report = Report::new(&mut buf, json, "rds", &args(&["-a", "8"]));
            report.header().unwrap();
            report.finish(&[latency_summary()], None).unwrap();
            String::from_utf8(buf).unwrap()
        };
        let text = with(false);
        assert!(
            text.lines()
                .next()
                .unwrap()
                .ends_with(" verify=off ack_size=8"),
            "{text}"
        );
        let json = with(true);
        assert!(
            json.ends_with(",\"ack_size\":8,\"cpu_percent\":null}\n"),
            "{json}"
        );
    }

    #[test]
    fn table_rows_line_up_with_the_header() {
        let text = output(false, |r| {
            r.header().unwrap();
            r.sample(&rate_sample()).unwrap();
            r.median(&latency_summary()).unwrap();
            r.finish(&[latency_summary()], Some(12.5)).unwrap();
        });
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "rrds bench: impl=rrds addr=127.0.0.1 peer_addr=127.0.0.1 transport=default \
             duration=2s runs=3 depth=32 tasks=1 verify=off"
        );
        assert_eq!(lines[1].len(), lines[2].len());
        assert_eq!(lines[1].len(), lines[3].len());
        assert!(
            lines[2].starts_with("rate             64 2            1000.0       0.06          -")
        );
        assert!(
            lines[3].starts_with("latency        8192 median      50000.0          -      20.25")
        );
        assert_eq!(lines[4], "impl=rrds errors=0 cpu=12.5%");
        // The added columns come after the older ones.
        assert!(lines[1].ends_with("errors     min_us   p99.9_us     max_us"));
        assert!(lines[2].ends_with("     0          -          -          -"));
        assert!(lines[3].ends_with("     0      12.00      80.50      95.00"));
    }
}

// SPDX-License-Identifier: GPL-2.0-only
//! `--plot` and `rrds plot`: an SVG chart of the medians the report prints,
//! written by hand (no dependency).
//!
//! A panel per measure that a mode of the results has, up to three side
//! by side: message rate (msgs/s, rate), throughput (MB/s: rate, RDMA
//! WRITE, RDMA READ), RDMA operations per second, round-trip latency (p50
//! and p99, µs) and registration latency (p50 and p99 of a register and
//! free cycle, µs), each against the message (operation, region) size on
//! a log2 axis. The y axis is linear from 0, or log10 when all values are
//! positive and span more than [`LOG_RATIO`]. Missing values (a run that
//! measured nothing) leave a gap in the line; nothing that is not a finite
//! number reaches the file.
//!
//! Several results (`rrds plot FILE...`, e.g. rrds against in-tree RDS)
//! share the panels: each has its colour, named in a legend under the
//! title, and a panel's measures (p50, p99; rate, RDMA WRITE, RDMA READ)
//! are told apart by dashes. One result alone is coloured by measure.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::Path;

use super::context;
use super::BenchArgs;
use super::Kind;
use super::Summary;

/// A panel's size, and the plot area within it.
const PANEL_W: f64 = 540.0;
const PANEL_H: f64 = 380.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = PANEL_W - 24.0;
const TOP: f64 = 44.0;
const BOTTOM: f64 = PANEL_H - 58.0;
/// Room for the title lines above the panels (one result).
const HEADER_H: f64 = 66.0;
/// Height of a result's line in the legend of several.
const LEGEND_LINE: f64 = 18.0;
/// Panels side by side before the next row.
const COLUMNS: usize = 3;
/// Space between the plot area's sides and the first and last size.
const X_PAD: f64 = 14.0;
/// The y axis is logarithmic when the largest value is more than this
/// many times the smallest.
const LOG_RATIO: f64 = 20.0;

/// Colours of the series (one result: per measure; several: per result).
const PALETTE: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];
/// Dash patterns of a panel's measures when colours name the results.
const DASHES: [&str; 3] = ["", "7 4", "2 3"];

/// What the title says about a result's set-up.
#[derive(Clone, Debug, PartialEq)]
pub struct Meta {
    pub implementation: String,
    pub addr: String,
    pub peer_addr: String,
    pub transport: String,
    pub runs: u32,
    /// 0: each run went on until Ctrl-C.
    pub duration_s: f64,
    pub depth: u32,
    pub tasks: u32,
    pub ack_size: Option<usize>,
}

impl Meta {
    pub fn new(implementation: &str, args: &BenchArgs) -> Self {
        Self {
            implementation: implementation.to_string(),
            addr: args.addr.to_string(),
            peer_addr: args.peer_addr().to_string(),
            transport: args.transport.as_str().to_string(),
            runs: args.runs(),
            duration_s: args.duration.as_secs_f64(),
            depth: args.depth,
            tasks: args.tasks,
            ack_size: args.ack_size,
        }
    }

    /// `impl=... transport=...`.
    fn title(&self) -> String {
        format!("impl={} transport={}", self.implementation, self.transport)
    }

    fn addresses(&self) -> String {
        format!("addr={} peer_addr={}", self.addr, self.peer_addr)
    }

    /// How each point was measured.
    fn detail(&self) -> String {
        let runs = format!("{} run{}", self.runs, if self.runs == 1 { "" } else { "s" });
        let time = if self.duration_s > 0.0 {
            format!("of {} s", num_label(self.duration_s))
        } else {
            "until Ctrl-C".to_string()
        };
        let mut text = format!("median of {runs} {time} per point, depth {}", self.depth);
        if self.tasks != 1 {
            text.push_str(&format!(", {} tasks", self.tasks));
        }
        if let Some(ack) = self.ack_size {
            text.push_str(&format!(", {ack}-byte echo"));
        }
        text
    }
}

/// One result: the medians of a benchmark and its set-up, with the name
/// the legend gives it (a file's, for `rrds plot`).
#[derive(Clone, Debug)]
pub struct Source {
    pub label: Option<String>,
    pub meta: Meta,
    pub summaries: Vec<Summary>,
}

/// Fails early if `path` cannot be created because its directory does not
/// exist or it is a directory (so a long benchmark does not end in that
/// error). `option` names where the path came from (`--plot`).
pub fn check(path: &Path, option: &str) -> io::Result<()> {
    if path.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::IsADirectory,
            format!("{option} {}: is a directory", path.display()),
        ));
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!(
                "{option} {}: {} is not a directory",
                path.display(),
                dir.display()
            ),
        )),
        Err(err) => Err(context(
            err,
            format_args!("{option} {}: directory {}", path.display(), dir.display()),
        )),
    }
}

/// Writes the chart of `sources` to `path` (named by `option` in errors).
pub fn write(path: &Path, option: &str, sources: &[Source]) -> io::Result<()> {
    fs::write(path, svg(sources))
        .map_err(|err| context(err, format_args!("writing {option} {}", path.display())))
}

/// A measure a panel shows: its name in the legend, the kind of run it
/// comes from, the value it takes from that kind's medians, and its style:
/// the colour (one result) or dashes (several) it has in every panel.
struct Measure {
    name: &'static str,
    kind: Kind,
    value: fn(&Summary) -> Option<f64>,
    style: usize,
}

/// One kind of panel.
struct Panel {
    title: &'static str,
    /// What the sizes are sizes of.
    x_title: &'static str,
    y_title: &'static str,
    unit: &'static str,
    measures: &'static [Measure],
}

const PANELS: [Panel; 5] = [
    Panel {
        title: "Message rate",
        x_title: "message size",
        y_title: "messages/s",
        unit: "msgs/s",
        measures: &[Measure {
            name: "msgs/s",
            kind: Kind::Rate,
            value: |s| s.msgs_per_sec,
            style: 0,
        }],
    },
    Panel {
        title: "Throughput",
        x_title: "message or RDMA size",
        y_title: "MB/s (10⁶ bytes)",
        unit: "MB/s",
        measures: &[
            Measure {
                name: "rate",
                kind: Kind::Rate,
                value: |s| s.mb_per_sec,
                style: 0,
            },
            Measure {
                name: "RDMA write",
                kind: Kind::RdmaWrite,
                value: |s| s.mb_per_sec,
                style: 1,
            },
            Measure {
                name: "RDMA read",
                kind: Kind::RdmaRead,
                value: |s| s.mb_per_sec,
                style: 2,
            },
        ],
    },
    Panel {
        title: "RDMA operation rate",
        x_title: "RDMA size",
        y_title: "operations/s",
        unit: "ops/s",
        measures: &[
            Measure {
                name: "write",
                kind: Kind::RdmaWrite,
                value: |s| s.msgs_per_sec,
                style: 1,
            },
            Measure {
                name: "read",
                kind: Kind::RdmaRead,
                value: |s| s.msgs_per_sec,
                style: 2,
            },
        ],
    },
    Panel {
        title: "Round-trip latency",
        x_title: "message size",
        y_title: "round trip (µs)",
        unit: "µs",
        measures: &[
            Measure {
                name: "p50",
                kind: Kind::Latency,
                value: |s| s.lat_p50_us,
                style: 0,
            },
            Measure {
                name: "p99",
                kind: Kind::Latency,
                value: |s| s.lat_p99_us,
                style: 1,
            },
        ],
    },
    Panel {
        title: "Registration latency",
        x_title: "region size",
        y_title: "register + free (µs)",
        unit: "µs",
        measures: &[
            Measure {
                name: "p50",
                kind: Kind::Register,
                value: |s| s.lat_p50_us,
                style: 0,
            },
            Measure {
                name: "p99",
                kind: Kind::Register,
                value: |s| s.lat_p99_us,
                style: 1,
            },
        ],
    },
];

/// One line of a chart: a value per size (`None`: not measured).
struct Series {
    /// The result's label (several results only) and the measure's name.
    source: Option<String>,
    name: &'static str,
    color: &'static str,
    dash: &'static str,
    points: Vec<(usize, Option<f64>)>,
}

/// An entry of a panel's legend.
struct Key {
    name: &'static str,
    color: &'static str,
    dash: &'static str,
}

/// One panel as drawn.
struct Chart {
    title: &'static str,
    x_title: &'static str,
    y_title: &'static str,
    unit: &'static str,
    keys: Vec<Key>,
    series: Vec<Series>,
}

impl Chart {
    /// `panel` over `sources`, or `None` if no result has a kind it shows.
    fn of(panel: &Panel, sources: &[Source]) -> Option<Self> {
        let several = sources.len() > 1;
        let mut series = Vec::new();
        let mut keys = Vec::new();
        for measure in panel.measures {
            let mut shown = false;
            for (i, source) in sources.iter().enumerate() {
                let points: Vec<(usize, Option<f64>)> = source
                    .summaries
                    .iter()
                    .filter(|s| s.kind == measure.kind)
                    .map(|s| (s.size, (measure.value)(s)))
                    .collect();
                if points.is_empty() {
                    continue;
                }
                shown = true;
                series.push(Series {
                    source: several.then(|| source_name(source, i)),
                    name: measure.name,
                    color: if several {
                        color(i)
                    } else {
                        color(measure.style)
                    },
                    dash: if several { dash(measure.style) } else { "" },
                    points,
                });
            }
            if shown {
                keys.push(Key {
                    name: measure.name,
                    color: if several {
                        "#444"
                    } else {
                        color(measure.style)
                    },
                    dash: if several { dash(measure.style) } else { "" },
                });
            }
        }
        // With several results the colours are theirs (the title's
        // legend); a single measure needs no key of its own.
        if several && keys.len() < 2 {
            keys.clear();
        }
        (!series.is_empty()).then_some(Self {
            title: panel.title,
            x_title: panel.x_title,
            y_title: panel.y_title,
            unit: panel.unit,
            keys,
            series,
        })
    }

    /// Every value that can be drawn.
    fn values(&self) -> Vec<f64> {
        self.series
            .iter()
            .flat_map(|s| s.points.iter().filter_map(|&(_, v)| valid(v)))
            .collect()
    }

    fn sizes(&self) -> Vec<usize> {
        self.series
            .iter()
            .flat_map(|s| s.points.iter().map(|&(size, _)| size))
            .collect()
    }
}

fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

fn dash(i: usize) -> &'static str {
    DASHES[i % DASHES.len()]
}

/// The legend's name of the `i`th result: its label, else its number.
fn source_name(source: &Source, i: usize) -> String {
    source
        .label
        .clone()
        .unwrap_or_else(|| format!("result {}", i + 1))
}

/// A value that can be drawn: finite and not negative.
fn valid(value: Option<f64>) -> Option<f64> {
    value.filter(|v| v.is_finite() && *v >= 0.0)
}

/// A legend sample: a short line in `color`, dashed by `dash`.
fn swatch(out: &mut String, x: f64, y: f64, color: &str, dash: &str) {
    let _ = writeln!(
        out,
        "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{color}\" stroke-width=\"2\"{}/>",
        num(x),
        num(x + 20.0),
        dash_attr(dash),
        y = num(y)
    );
}

fn dash_attr(dash: &str) -> String {
    if dash.is_empty() {
        String::new()
    } else {
        format!(" stroke-dasharray=\"{dash}\"")
    }
}

/// The SVG document for `sources`: a panel per measure present.
pub fn svg(sources: &[Source]) -> String {
    let charts: Vec<Chart> = PANELS
        .iter()
        .filter_map(|panel| Chart::of(panel, sources))
        .collect();
    let columns = charts.len().clamp(1, COLUMNS);
    let rows = charts.len().div_ceil(COLUMNS).max(1);
    let header = if sources.len() > 1 {
        30.0 + LEGEND_LINE * sources.len() as f64 + 8.0
    } else {
        HEADER_H
    };
    let width = PANEL_W * columns as f64;
    let height = header + PANEL_H * rows as f64;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">",
        w = num(width),
        h = num(height)
    );
    out.push_str("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    let bold = "font-size=\"15\" font-weight=\"bold\"";
    match sources {
        [] => text(
            &mut out,
            12.0,
            22.0,
            "start",
            bold,
            "rrds bench: no results",
        ),
        [one] => {
            let mut title = format!("rrds bench: {}", one.meta.title());
            if let Some(label) = &one.label {
                title.push_str(&format!(" ({label})"));
            }
            text(&mut out, 12.0, 22.0, "start", bold, &title);
            text(&mut out, 12.0, 40.0, "start", "", &one.meta.addresses());
            text(
                &mut out,
                12.0,
                56.0,
                "start",
                "fill=\"#555\"",
                &one.meta.detail(),
            );
        }
        several => {
            let title = format!("rrds bench: {} results", several.len());
            text(&mut out, 12.0, 22.0, "start", bold, &title);
            for (i, source) in several.iter().enumerate() {
                let y = 30.0 + LEGEND_LINE * (i as f64 + 0.75);
                swatch(&mut out, 12.0, y - 4.0, color(i), "");
                let meta = &source.meta;
                let line = format!(
                    "{}: {} {}; {}",
                    source_name(source, i),
                    meta.title(),
                    meta.addresses(),
                    meta.detail()
                );
                text(&mut out, 38.0, y, "start", "", &line);
            }
        }
    }
    if charts.is_empty() {
        text(
            &mut out,
            PANEL_W / 2.0,
            header + PANEL_H / 2.0,
            "middle",
            "",
            "no data",
        );
    }
    for (i, chart) in charts.iter().enumerate() {
        let x = PANEL_W * (i % COLUMNS) as f64;
        let y = header + PANEL_H * (i / COLUMNS) as f64;
        panel(&mut out, chart, x, y);
    }
    out.push_str("</svg>\n");
    out
}

/// A coordinate: one decimal, and never NaN (0 instead; callers only pass
/// finite numbers).
fn num(v: f64) -> String {
    if v.is_finite() {
        let s = format!("{v:.1}");
        s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
    } else {
        "0".to_string()
    }
}

/// Escapes text for XML content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            _ => out.push(c),
        }
    }
    out
}

/// A `<text>` element.
fn text(out: &mut String, x: f64, y: f64, anchor: &str, attrs: &str, content: &str) {
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\"{}{attrs}>{}</text>",
        num(x),
        num(y),
        if attrs.is_empty() { "" } else { " " },
        escape(content)
    );
}

/// A value with at most three significant digits and an SI suffix:
/// 1.5M, 250k, 12.5, 0.25.
fn num_label(v: f64) -> String {
    if !v.is_finite() {
        return "-".to_string();
    }
    let (scaled, suffix) = match v.abs() {
        a if a >= 1e9 => (v / 1e9, "G"),
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e3 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    let decimals = if scaled == 0.0 {
        0
    } else {
        (2 - scaled.abs().log10().floor() as i32).clamp(0, 9) as usize
    };
    let mut s = format!("{scaled:.decimals$}");
    if s.contains('.') {
        s = s.trim_end_matches('0').trim_end_matches('.').to_string();
    }
    s + suffix
}

/// A message size in bytes, K and M being 1024 and 1024².
fn size_label(size: usize) -> String {
    if size >= 1 << 20 && size % (1 << 20) == 0 {
        format!("{}M", size >> 20)
    } else if size >= 1 << 10 && size % (1 << 10) == 0 {
        format!("{}K", size >> 10)
    } else {
        size.to_string()
    }
}

/// The x axis: log2 of the size, 0 bytes one tick left of the rest.
struct XAxis {
    lo: f64,
    hi: f64,
    zero_at: f64,
    ticks: Vec<(f64, String)>,
}

impl XAxis {
    fn new(sizes: &[usize]) -> Self {
        let positive: Vec<f64> = sizes
            .iter()
            .filter(|&&s| s > 0)
            .map(|&s| (s as f64).log2())
            .collect();
        let has_zero = sizes.contains(&0);
        if positive.is_empty() {
            return Self {
                lo: -1.0,
                hi: 1.0,
                zero_at: 0.0,
                ticks: vec![(0.0, "0".to_string())],
            };
        }
        let min = positive.iter().copied().fold(f64::INFINITY, f64::min);
        let max = positive.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (first, last) = if max - min < 1.0 {
            // One size (or sizes within an octave): room either side.
            ((min - 1.0).floor() as i32, (max + 1.0).ceil() as i32)
        } else {
            (min.floor() as i32, max.ceil() as i32)
        };
        // At most twelve labels: the powers of two whose exponent is a
        // multiple of `step`.
        let step = ((last - first) as f64 / 12.0).ceil().max(1.0) as i32;
        let mut ticks: Vec<(f64, String)> = (first..=last)
            .filter(|exp| exp.rem_euclid(step) == 0)
            .map(|exp| {
                let label = if (0..63).contains(&exp) {
                    size_label(1usize << exp)
                } else {
                    format!("2^{exp}")
                };
                (f64::from(exp), label)
            })
            .collect();
        let zero_at = f64::from(first - step);
        if has_zero {
            ticks.insert(0, (zero_at, "0".to_string()));
        }
        Self {
            lo: if has_zero { zero_at } else { f64::from(first) },
            hi: f64::from(last),
            zero_at,
            ticks,
        }
    }

    fn pos(&self, size: usize) -> f64 {
        if size == 0 {
            self.zero_at
        } else {
            (size as f64).log2()
        }
    }

    /// The x coordinate of an axis position.
    fn px(&self, at: f64) -> f64 {
        let span = self.hi - self.lo;
        let frac = if span > 0.0 {
            (at - self.lo) / span
        } else {
            0.5
        };
        LEFT + X_PAD + frac * (RIGHT - LEFT - 2.0 * X_PAD)
    }
}

/// The y axis.
enum YAxis {
    /// From 0 to `hi`, ticks every `step`.
    Linear { hi: f64, step: f64 },
    /// From 10^lo to 10^hi.
    Log { lo: i32, hi: i32 },
}

impl YAxis {
    fn new(values: &[f64]) -> Self {
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(0.0, f64::max);
        if values.is_empty() || max <= 0.0 {
            return Self::Linear { hi: 1.0, step: 0.2 };
        }
        if min > 0.0 && max / min > LOG_RATIO {
            let lo = min.log10().floor() as i32;
            let hi = (max.log10().ceil() as i32).max(lo + 1);
            return Self::Log { lo, hi };
        }
        let step = nice_step(max * 1.05 / 5.0);
        let hi = (max * 1.05 / step).ceil() * step;
        if step.is_finite() && step > 0.0 && hi.is_finite() {
            Self::Linear { hi, step }
        } else {
            Self::Linear { hi: 1.0, step: 0.2 }
        }
    }

    /// Where `v` sits, from 0 (bottom) to 1 (top).
    fn frac(&self, v: f64) -> f64 {
        match *self {
            Self::Linear { hi, .. } => v / hi,
            Self::Log { lo, hi } => {
                (v.max(f64::MIN_POSITIVE).log10() - f64::from(lo)) / f64::from(hi - lo)
            }
        }
    }

    fn py(&self, v: f64) -> f64 {
        BOTTOM - self.frac(v) * (BOTTOM - TOP)
    }

    /// Labelled ticks, and whether each gets a full grid line.
    fn ticks(&self) -> Vec<(f64, bool)> {
        match *self {
            Self::Linear { hi, step } => {
                let n = (hi / step).round().clamp(0.0, 50.0) as u32;
                (0..=n).map(|i| (f64::from(i) * step, true)).collect()
            }
            Self::Log { lo, hi } => {
                let decades = hi - lo;
                let step = ((decades as f64) / 6.0).ceil().max(1.0) as i32;
                let mut ticks = Vec::new();
                for exp in lo..=hi {
                    let base = 10f64.powi(exp);
                    if (exp - lo) % step == 0 {
                        ticks.push((base, true));
                    }
                    if decades <= 2 && exp < hi {
                        ticks.push((2.0 * base, false));
                        ticks.push((5.0 * base, false));
                    }
                }
                ticks
            }
        }
    }

    fn is_log(&self) -> bool {
        matches!(self, Self::Log { .. })
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let n = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    n * mag
}

/// One chart, its top left corner at (`x0`, `y0`).
fn panel(out: &mut String, chart: &Chart, x0: f64, y0: f64) {
    let xaxis = XAxis::new(&chart.sizes());
    let values = chart.values();
    let yaxis = YAxis::new(&values);
    let _ = writeln!(out, "<g transform=\"translate({},{})\">", num(x0), num(y0));
    text(
        out,
        LEFT,
        TOP - 16.0,
        "start",
        "font-size=\"14\" font-weight=\"bold\"",
        chart.title,
    );
    // Legend, right-aligned above the plot area.
    let mut x = RIGHT;
    for key in chart.keys.iter().rev() {
        let width = 34.0 + 7.0 * key.name.chars().count() as f64;
        x -= width;
        swatch(out, x, TOP - 20.0, key.color, key.dash);
        text(out, x + 24.0, TOP - 16.0, "start", "", key.name);
    }
    // Grid and y ticks.
    for (v, major) in yaxis.ticks() {
        let y = yaxis.py(v);
        let _ = writeln!(
            out,
            "<line x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"{}\"/>",
            num(LEFT),
            num(RIGHT),
            if major { "#ddd" } else { "#f0f0f0" },
            y = num(y)
        );
        text(
            out,
            LEFT - 6.0,
            y + 4.0,
            "end",
            "font-size=\"11\"",
            &num_label(v),
        );
    }
    // x ticks.
    for (at, label) in &xaxis.ticks {
        let x = xaxis.px(*at);
        let _ = writeln!(
            out,
            "<line x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\" stroke=\"#ddd\"/>",
            num(TOP),
            num(BOTTOM + 4.0),
            x = num(x)
        );
        text(out, x, BOTTOM + 17.0, "middle", "font-size=\"11\"", label);
    }
    let _ = writeln!(
        out,
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>",
        num(LEFT),
        num(TOP),
        num(RIGHT - LEFT),
        num(BOTTOM - TOP)
    );
    text(
        out,
        (LEFT + RIGHT) / 2.0,
        BOTTOM + 40.0,
        "middle",
        "",
        &format!("{} (bytes, log scale; K = 1024, M = 1024²)", chart.x_title),
    );
    let y_title = if yaxis.is_log() {
        match chart.y_title.strip_suffix(')') {
            Some(open) => format!("{open}, log scale)"),
            None => format!("{} (log scale)", chart.y_title),
        }
    } else {
        chart.y_title.to_string()
    };
    let _ = writeln!(
        out,
        "<text transform=\"translate(18,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        num((TOP + BOTTOM) / 2.0),
        escape(&y_title)
    );
    if values.is_empty() {
        text(
            out,
            (LEFT + RIGHT) / 2.0,
            (TOP + BOTTOM) / 2.0,
            "middle",
            "fill=\"#888\"",
            "no data",
        );
    }
    for series in &chart.series {
        line(out, series, chart.unit, &xaxis, &yaxis);
    }
    out.push_str("</g>\n");
}

/// A series: polylines through the runs of drawable values (sorted by
/// size), and a marker with a tooltip on each value.
fn line(out: &mut String, series: &Series, unit: &str, xaxis: &XAxis, yaxis: &YAxis) {
    let mut points = series.points.clone();
    points.sort_by_key(|&(size, _)| size);
    let drawn: Vec<(usize, Option<f64>)> =
        points.iter().map(|&(size, v)| (size, valid(v))).collect();
    for run in drawn.split(|(_, v)| v.is_none()) {
        if run.is_empty() {
            continue;
        }
        let coords: Vec<String> = run
            .iter()
            .filter_map(|&(size, v)| {
                let v = v?;
                Some(format!(
                    "{},{}",
                    num(xaxis.px(xaxis.pos(size))),
                    num(yaxis.py(v))
                ))
            })
            .collect();
        let _ = writeln!(
            out,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" \
             stroke-linejoin=\"round\"{}/>",
            coords.join(" "),
            series.color,
            dash_attr(series.dash)
        );
    }
    for &(size, v) in &drawn {
        let Some(v) = v else { continue };
        let _ = writeln!(
            out,
            "<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\"><title>{}</title></circle>",
            num(xaxis.px(xaxis.pos(size))),
            num(yaxis.py(v)),
            series.color,
            escape(&format!(
                "{}{} bytes: {} {} {}",
                series
                    .source
                    .as_ref()
                    .map_or_else(String::new, |s| format!("{s}: ")),
                size,
                series.name,
                num_label(v),
                unit
            ))
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::Mode;
    use super::*;
    use clap::ValueEnum;

    fn meta() -> Meta {
        Meta {
            implementation: "rrds".to_string(),
            addr: "10.254.9.1".to_string(),
            peer_addr: "10.254.9.2".to_string(),
            transport: "ib".to_string(),
            runs: 3,
            duration_s: 5.0,
            depth: 32,
            tasks: 1,
            ack_size: None,
        }
    }

    /// A median: `rate` per second (and the MB/s it makes), and for
    /// latency and register runs a p50 (p99 2.5 times that).
    fn summary(kind: Kind, size: usize, rate: Option<f64>, p50: Option<f64>) -> Summary {
        let timed = matches!(kind, Kind::Latency | Kind::Register);
        Summary {
            kind,
            size,
            runs: 3,
            msgs_per_sec: rate,
            mb_per_sec: rate.filter(|_| !timed).map(|r| r * size as f64 / 1e6),
            lat_mean_us: p50.filter(|_| timed),
            lat_p50_us: p50.filter(|_| timed),
            lat_p99_us: p50.filter(|_| timed).map(|p| p * 2.5),
            errors: 0,
            lat_min_us: None,
            lat_p999_us: None,
            lat_max_us: None,
        }
    }

    /// Medians of `kind` over `sizes`, values that change with the size.
    fn of_kind(kind: Kind, sizes: &[usize]) -> Vec<Summary> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| {
                let rate = 900_000.0 / (i + 1) as f64;
                summary(kind, size, Some(rate), Some(12.0 + 30.0 * i as f64))
            })
            .collect()
    }

    fn both(sizes: &[usize]) -> Vec<Summary> {
        let mut all = of_kind(Kind::Rate, sizes);
        all.extend(of_kind(Kind::Latency, sizes));
        all
    }

    fn source(label: Option<&str>, summaries: Vec<Summary>) -> Source {
        Source {
            label: label.map(str::to_string),
            meta: meta(),
            summaries,
        }
    }

    /// The chart of one result, as `--plot` draws it.
    fn one(summaries: Vec<Summary>) -> String {
        svg(&[source(None, summaries)])
    }

    /// Checks that every element opened is closed, in order, and returns
    /// the element names seen.
    fn elements(svg: &str) -> Vec<String> {
        let mut stack: Vec<String> = Vec::new();
        let mut seen = Vec::new();
        let mut rest = svg;
        while let Some(open) = rest.find('<') {
            let close = rest[open..].find('>').expect("unterminated tag") + open;
            let tag = &rest[open + 1..close];
            assert!(!tag.contains('<'), "'<' inside a tag: {tag}");
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop().as_deref(), Some(name), "unbalanced </{name}>");
            } else {
                let name = tag
                    .split(|c: char| c.is_whitespace() || c == '/')
                    .next()
                    .unwrap()
                    .to_string();
                seen.push(name.clone());
                if !tag.ends_with('/') {
                    stack.push(name);
                }
            }
            rest = &rest[close + 1..];
        }
        assert!(stack.is_empty(), "unclosed: {stack:?}");
        seen
    }

    fn well_formed(svg: &str) -> Vec<String> {
        assert!(svg.starts_with("<svg "), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"), "{svg}");
        for bad in ["NaN", "nan", "inf"] {
            assert!(!svg.contains(bad), "{bad} in {svg}");
        }
        // No stray ampersands: every one starts an entity.
        for (at, _) in svg.match_indices('&') {
            let entity = &svg[at..svg[at..].find(';').unwrap() + at + 1];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"].contains(&entity),
                "{entity}"
            );
        }
        let seen = elements(svg);
        assert_eq!(seen.iter().filter(|n| *n == "svg").count(), 1);
        seen
    }

    /// The polyline elements, in order.
    fn polyline_tags(svg: &str) -> Vec<&str> {
        svg.lines()
            .filter(|l| l.starts_with("<polyline "))
            .collect()
    }

    /// An attribute's value in a tag.
    fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
        let value = tag.split(&format!(" {name}=\"")).nth(1)?;
        Some(&value[..value.find('"')?])
    }

    /// The point counts of the polylines, in order.
    fn polylines(svg: &str) -> Vec<usize> {
        polyline_tags(svg)
            .iter()
            .map(|l| attr(l, "points").unwrap().split_whitespace().count())
            .collect()
    }

    /// Each panel's title and its polylines' point counts.
    fn panels(svg: &str) -> Vec<(String, Vec<usize>)> {
        svg.split("<g transform=")
            .skip(1)
            .map(|panel| {
                let title = panel.split("font-weight=\"bold\">").nth(1).unwrap();
                let title = title[..title.find('<').unwrap()].to_string();
                (title, polylines(panel))
            })
            .collect()
    }

    #[test]
    fn several_sizes_both_modes() {
        let sizes = [64, 512, 4096, 8192, 65536, 1 << 20];
        let svg = one(both(&sizes));
        let seen = well_formed(&svg);
        // Message rate, throughput, then p50 and p99: each one line through
        // every size.
        assert_eq!(polylines(&svg), vec![6, 6, 6, 6]);
        assert_eq!(seen.iter().filter(|n| *n == "circle").count(), 24);
        for label in [
            "Message rate",
            "Throughput",
            "Round-trip latency",
            "messages/s",
            "MB/s",
            "round trip (µs",
            "message size (bytes",
            "p50",
            "p99",
            ">64<",
            ">1K<",
            ">1M<",
            "impl=rrds transport=ib",
            "addr=10.254.9.1 peer_addr=10.254.9.2",
            "median of 3 runs of 5 s per point, depth 32",
        ] {
            assert!(svg.contains(label), "no {label} in {svg}");
        }
        // Three panels in a row.
        assert!(svg.contains("width=\"1620\""));
        assert!(svg.contains("height=\"446\""));
        // The rate spans 6x: linear; MB/s and latency (12..162 µs): log.
        assert!(!svg.contains("messages/s (log scale)"));
        assert!(svg.contains("MB/s (10⁶ bytes, log scale)"));
        assert!(svg.contains("round trip (µs, log scale)"));
        // One result: colours tell the measures apart, no dashes.
        assert!(!svg.contains("stroke-dasharray"));
        let colours: Vec<&str> = polyline_tags(&svg)
            .iter()
            .map(|l| attr(l, "stroke").unwrap())
            .collect();
        assert_eq!(colours, [PALETTE[0], PALETTE[0], PALETTE[0], PALETTE[1]]);
    }

    #[test]
    fn one_size() {
        let svg = one(both(&[8192]));
        well_formed(&svg);
        assert_eq!(polylines(&svg), vec![1, 1, 1, 1]);
        // The size sits between a tick either side.
        assert!(svg.contains(">4K<") && svg.contains(">8K<") && svg.contains(">16K<"));
    }

    #[test]
    fn rate_only() {
        let svg = one(of_kind(Kind::Rate, &[64, 8192]));
        well_formed(&svg);
        assert_eq!(
            panels(&svg),
            [
                ("Message rate".to_string(), vec![2]),
                ("Throughput".to_string(), vec![2])
            ]
        );
        assert!(!svg.contains("Round-trip latency"));
        assert!(svg.contains("width=\"1080\""));
    }

    #[test]
    fn latency_only() {
        let svg = one(of_kind(Kind::Latency, &[64, 8192, 1 << 20]));
        well_formed(&svg);
        assert_eq!(polylines(&svg), vec![3, 3]);
        assert!(svg.contains("Round-trip latency") && svg.contains("round trip (µs"));
        assert!(!svg.contains("Message rate") && !svg.contains("Throughput"));
        assert!(svg.contains("width=\"540\""));
    }

    /// Every mode's results draw panels with lines in each, and no "no data".
    #[test]
    fn every_mode_yields_panels() {
        let sizes = [4096, 65536, 1 << 20];
        let titles = |mode| -> &[&str] {
            match mode {
                Mode::Rate => &["Message rate", "Throughput"],
                Mode::Latency => &["Round-trip latency"],
                Mode::Both => &["Message rate", "Throughput", "Round-trip latency"],
                Mode::RdmaWrite | Mode::RdmaRead | Mode::Rdma => {
                    &["Throughput", "RDMA operation rate"]
                }
                Mode::Register => &["Registration latency"],
            }
        };
        for &mode in Mode::value_variants() {
            let summaries: Vec<Summary> = mode
                .kinds()
                .iter()
                .flat_map(|&kind| of_kind(kind, &sizes))
                .collect();
            let svg = one(summaries);
            well_formed(&svg);
            assert!(!svg.contains("no data"), "{mode:?}");
            let drawn = panels(&svg);
            let names: Vec<&str> = drawn.iter().map(|(t, _)| t.as_str()).collect();
            assert_eq!(names, titles(mode), "{mode:?}");
            for (title, lines) in &drawn {
                assert!(!lines.is_empty(), "{mode:?}: {title} has no line");
                assert!(lines.iter().all(|&n| n == sizes.len()), "{mode:?}: {title}");
            }
        }
        // Both RDMA directions: a line each in both panels, in the legend.
        let mut rdma = of_kind(Kind::RdmaWrite, &sizes);
        rdma.extend(of_kind(Kind::RdmaRead, &sizes));
        let svg = one(rdma);
        assert_eq!(polylines(&svg), vec![3, 3, 3, 3]);
        // A direction keeps its colour from panel to panel.
        let colours: Vec<&str> = polyline_tags(&svg)
            .iter()
            .map(|l| attr(l, "stroke").unwrap())
            .collect();
        assert_eq!(colours, [PALETTE[1], PALETTE[2], PALETTE[1], PALETTE[2]]);
        for key in [
            ">RDMA write<",
            ">RDMA read<",
            ">write<",
            ">read<",
            "RDMA size (bytes",
        ] {
            assert!(svg.contains(key), "no {key}");
        }
        let register = one(of_kind(Kind::Register, &sizes));
        assert!(register.contains("register + free (µs"));
        assert!(register.contains("region size (bytes"));
    }

    #[test]
    fn missing_and_odd_values_do_not_reach_the_file() {
        let mut summaries = both(&[0, 64, 1000, 8192, 65536]);
        summaries[1].msgs_per_sec = None;
        summaries[2].msgs_per_sec = Some(f64::NAN);
        summaries[3].msgs_per_sec = Some(0.0);
        summaries[4].msgs_per_sec = Some(f64::INFINITY);
        summaries[5].lat_p50_us = Some(0.0);
        summaries[6].lat_p99_us = None;
        summaries[7].lat_p50_us = Some(-1.0);
        let svg = one(summaries);
        well_formed(&svg);
        assert!(svg.contains(">0<"), "size 0 has a tick");
        // Rate: 0 B and 8192 B alone; MB/s untouched; p50: a gap at 1000;
        // p99: at 64.
        assert_eq!(polylines(&svg), vec![1, 1, 5, 2, 2, 1, 3]);
    }

    #[test]
    fn nothing_measured() {
        let none = vec![
            summary(Kind::Rate, 64, None, None),
            summary(Kind::Latency, 64, None, None),
        ];
        let svg = one(none);
        well_formed(&svg);
        assert!(polylines(&svg).is_empty());
        assert_eq!(svg.matches("no data").count(), 3);
        let empty = one(Vec::new());
        well_formed(&empty);
        assert!(empty.contains("no data"));
        let nothing = svg_of_nothing();
        well_formed(&nothing);
        assert!(nothing.contains("no results") && nothing.contains("no data"));
    }

    fn svg_of_nothing() -> String {
        svg(&[])
    }

    /// `rrds plot a.json b.json`: one series per result and measure, in
    /// the result's colour, a panel's measures dashed apart, and a legend
    /// naming each result.
    #[test]
    fn overlay_draws_one_series_per_result() {
        let sizes = [64, 8192, 65536];
        let mut rds = source(Some("rds.json"), both(&sizes));
        rds.meta.implementation = "rds".to_string();
        let rrds = source(Some("rrds.json"), both(&sizes));
        let svg = svg(&[rrds, rds]);
        well_formed(&svg);
        assert_eq!(
            panels(&svg),
            [
                ("Message rate".to_string(), vec![3, 3]),
                ("Throughput".to_string(), vec![3, 3]),
                ("Round-trip latency".to_string(), vec![3, 3, 3, 3]),
            ]
        );
        let tags = polyline_tags(&svg);
        let colours: Vec<&str> = tags.iter().map(|l| attr(l, "stroke").unwrap()).collect();
        let (a, b) = (PALETTE[0], PALETTE[1]);
        assert_eq!(colours, [a, b, a, b, a, b, a, b]);
        // p50 solid, p99 dashed, whichever the result.
        let dashes: Vec<Option<&str>> = tags.iter().map(|l| attr(l, "stroke-dasharray")).collect();
        let p99 = Some(DASHES[1]);
        assert_eq!(dashes, [None, None, None, None, None, None, p99, p99]);
        for label in [
            "rrds bench: 2 results",
            "rrds.json: impl=rrds transport=ib addr=10.254.9.1 peer_addr=10.254.9.2; median of 3",
            "rds.json: impl=rds transport=ib",
            "<title>rds.json: 8192 bytes: p99 ",
            "<title>rrds.json: 64 bytes: msgs/s ",
        ] {
            assert!(svg.contains(label), "no {label} in {svg}");
        }
        // Room for the two legend lines above the panels.
        assert!(svg.contains("height=\"454\""));
        // A third result, of another mode: its panels join.
        let mut write = source(Some("write.json"), of_kind(Kind::RdmaWrite, &sizes));
        write.meta.ack_size = Some(8);
        let rate = source(None, of_kind(Kind::Rate, &sizes));
        let svg = super::svg(&[rate, write]);
        well_formed(&svg);
        assert_eq!(
            panels(&svg),
            [
                ("Message rate".to_string(), vec![3]),
                ("Throughput".to_string(), vec![3, 3]),
                ("RDMA operation rate".to_string(), vec![3]),
            ]
        );
        // Unlabelled results are numbered; the throughput panel keys its
        // two measures, a one-measure panel has no key.
        assert!(svg.contains("result 1: impl=rrds"));
        assert!(svg.contains("write.json: impl=rrds"));
        assert!(svg.contains(", 8-byte echo"));
        assert!(svg.contains(">rate<") && svg.contains(">RDMA write<"));
        assert!(!svg.contains(">msgs/s<"));
    }

    #[test]
    fn text_is_escaped() {
        let mut odd = source(Some("<a&b>.json"), both(&[64]));
        odd.meta.implementation = "a<b>&\"c\"".to_string();
        let svg = svg(&[odd.clone()]);
        well_formed(&svg);
        assert!(svg.contains("impl=a&lt;b&gt;&amp;&quot;c&quot;"));
        assert!(svg.contains("(&lt;a&amp;b&gt;.json)"));
        let svg = super::svg(&[odd.clone(), odd]);
        well_formed(&svg);
        assert!(svg.contains("&lt;a&amp;b&gt;.json: 64 bytes"));
    }

    #[test]
    fn until_interrupted_says_so() {
        let mut result = source(None, of_kind(Kind::Rate, &[64]));
        result.meta.duration_s = 0.0;
        result.meta.runs = 1;
        result.meta.tasks = 4;
        let svg = svg(&[result]);
        assert!(svg.contains("median of 1 run until Ctrl-C per point, depth 32, 4 tasks"));
    }

    #[test]
    fn file_errors_name_the_file() {
        let missing = Path::new("/nonexistent-rrds-dir/bench.svg");
        let err = check(missing, "--plot").unwrap_err();
        assert!(
            err.to_string().contains("/nonexistent-rrds-dir/bench.svg"),
            "{err}"
        );
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        let err = write(missing, "-o", &[source(None, both(&[64]))]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("writing -o /nonexistent-rrds-dir/bench.svg: "),
            "{err}"
        );
        let dir = std::env::temp_dir();
        assert!(check(&dir, "--plot")
            .unwrap_err()
            .to_string()
            .starts_with("--plot "));
        assert!(check(&dir.join("bench.svg"), "--plot").is_ok());
        assert!(check(Path::new("bench.svg"), "--plot").is_ok());
    }

    #[test]
    fn labels() {
        assert_eq!(num_label(0.0), "0");
        assert_eq!(num_label(12.5), "12.5");
        assert_eq!(num_label(0.25), "0.25");
        assert_eq!(num_label(250_000.0), "250k");
        assert_eq!(num_label(1_500_000.0), "1.5M");
        assert_eq!(num_label(1000.0), "1k");
        assert_eq!(num_label(f64::NAN), "-");
        assert_eq!(size_label(64), "64");
        assert_eq!(size_label(1000), "1000");
        assert_eq!(size_label(8192), "8K");
        assert_eq!(size_label(1 << 20), "1M");
        assert_eq!(num(f64::NAN), "0");
        assert_eq!(num(12.0), "12");
        assert_eq!(num(12.34), "12.3");
    }

    #[test]
    fn axes() {
        // Linear from 0 with a nice step.
        let YAxis::Linear { hi, step } = YAxis::new(&[100.0, 430.0]) else {
            panic!("not linear");
        };
        assert_eq!((hi, step), (500.0, 100.0));
        assert!(matches!(
            YAxis::new(&[10.0, 1000.0]),
            YAxis::Log { lo: 1, hi: 3 }
        ));
        // Zero forces linear; all zero or none gives a unit axis.
        assert!(matches!(YAxis::new(&[0.0, 1000.0]), YAxis::Linear { .. }));
        assert!(matches!(
            YAxis::new(&[0.0]),
            YAxis::Linear { hi, .. } if hi == 1.0
        ));
        assert!(matches!(
            YAxis::new(&[]),
            YAxis::Linear { hi, .. } if hi == 1.0
        ));
        // Many sizes: at most twelve x labels.
        let sizes: Vec<usize> = (0..=20).map(|e| 1 << e).collect();
        let x = XAxis::new(&sizes);
        assert!(x.ticks.len() <= 12, "{:?}", x.ticks);
        assert_eq!(x.ticks[0].1, "1");
        assert_eq!(x.ticks.last().unwrap().1, "1M");
        assert!(x.px(x.pos(1)) >= LEFT && x.px(x.pos(1 << 20)) <= RIGHT);
    }

    /// Renders sample charts for a look: cargo test -- --ignored
    /// plot_sample (writes /tmp/rrds-plot-sample*.svg).
    #[test]
    #[ignore]
    fn plot_sample() {
        let sizes = [64, 256, 1024, 4096, 8192, 65536, 1 << 20];
        let results = |speed: f64| -> Vec<Summary> {
            let rate = sizes.iter().map(|&size| {
                let rate = speed * 450_000.0 / (1.0 + size as f64 / 4096.0);
                summary(Kind::Rate, size, Some(rate), None)
            });
            let latency = sizes.iter().map(|&size| {
                let p50 = (14.0 + size as f64 / 2500.0) / speed;
                summary(Kind::Latency, size, Some(1e6 / p50), Some(p50))
            });
            let rdma = sizes.iter().map(|&size| {
                let ops = speed * 300_000.0 / (1.0 + size as f64 / 8192.0);
                summary(Kind::RdmaWrite, size, Some(ops), None)
            });
            rate.chain(latency).chain(rdma).collect()
        };
        write(
            Path::new("/tmp/rrds-plot-sample.svg"),
            "--plot",
            &[source(None, results(1.0))],
        )
        .unwrap();
        let mut rds = source(Some("rds.json"), results(0.6));
        rds.meta.implementation = "rds".to_string();
        let overlay = [source(Some("rrds.json"), results(1.0)), rds];
        write(
            Path::new("/tmp/rrds-plot-sample-overlay.svg"),
            "-o",
            &overlay,
        )
        .unwrap();
        let mut gaps = both(&[0, 64, 1000, 8192, 65536]);
        gaps[1].msgs_per_sec = None;
        gaps[7].lat_p50_us = Some(f64::NAN);
        gaps[8].lat_p99_us = Some(600.0);
        write(
            Path::new("/tmp/rrds-plot-sample-gaps.svg"),
            "--plot",
            &[source(None, gaps)],
        )
        .unwrap();
    }
}

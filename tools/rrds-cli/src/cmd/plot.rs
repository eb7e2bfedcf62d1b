// SPDX-License-Identifier: GPL-2.0-only
//! `rrds plot`: the results of several `rrds bench --json` runs (rrds and
//! in-tree RDS, two builds, two transports) in one SVG chart, as `rrds
//! bench --plot` draws one: a colour per result, named in a legend.

use std::fs;
use std::io;
use std::io::Read;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;

use clap::Args;

use super::bench::plot;
use super::bench::results;
use super::context;

#[derive(Args, Debug)]
pub struct PlotArgs {
    /// Write the chart to this file instead of standard output.
    #[arg(short = 'o', long, value_name = "FILE.svg", value_parser = non_empty_path)]
    pub output: Option<PathBuf>,
    /// What `rrds bench --json` wrote, one file per result (`-`: standard
    /// input). Each summary line in it is a result, named by the file.
    #[arg(value_name = "FILE", required = true, value_parser = non_empty_path)]
    pub files: Vec<PathBuf>,
}

fn non_empty_path(text: &str) -> Result<PathBuf, String> {
    if text.is_empty() {
        Err("a file name cannot be empty".to_string())
    } else {
        Ok(PathBuf::from(text))
    }
}

/// Reads the files and writes the chart; `Ok(true)` once written.
pub fn run(args: &PlotArgs) -> io::Result<bool> {
    if let Some(path) = &args.output {
        // Before reading anything, as --plot checks before the runs.
        plot::check(path, "-o")?;
    }
    let mut sources = Vec::new();
    for path in &args.files {
        let (name, text) = read(path)?;
        let found = results::read(&name, &text)
            .map_err(|msg| io::Error::new(io::ErrorKind::InvalidData, msg))?;
        sources.extend(found);
    }
    match &args.output {
        Some(path) => plot::write(path, "-o", &sources)?,
        None => io::stdout()
            .lock()
            .write_all(plot::svg(&sources).as_bytes())?,
    }
    Ok(true)
}

/// A file's name for the legend and its text; `-` is standard input.
fn read(path: &Path) -> io::Result<(String, String)> {
    if path == Path::new("-") {
        let mut text = String::new();
        io::stdin()
            .lock()
            .read_to_string(&mut text)
            .map_err(|err| context(err, "reading standard input"))?;
        return Ok(("stdin".to_string(), text));
    }
    let text = fs::read_to_string(path).map_err(|err| context(err, path.display()))?;
    Ok((path.display().to_string(), text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_read_and_named() {
        let dir = std::env::temp_dir().join(format!("rrds-plot-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let summary = "{\"type\":\"summary\",\"impl\":\"rds\",\"addr\":\"127.0.0.1\",\
                       \"duration_s\":1.000,\"runs\":1,\"depth\":32,\"errors\":0,\
                       \"medians\":[{\"runs\":1,\"mode\":\"rate\",\"size\":64,\
                       \"msgs_per_sec\":1000.000,\"mb_per_sec\":0.064,\"errors\":0}]}\n";
        let a = dir.join("a.json");
        fs::write(&a, summary).unwrap();
        let (name, text) = read(&a).unwrap();
        assert_eq!(name, a.display().to_string());
        assert_eq!(text, summary);
        let out = dir.join("chart.svg");
        let args = PlotArgs {
            output: Some(out.clone()),
            files: vec![a.clone(), a.clone()],
        };
        assert!(run(&args).unwrap());
        let svg = fs::read_to_string(&out).unwrap();
        assert!(svg.starts_with("<svg ") && svg.contains("rrds bench: 2 results"));
        assert_eq!(svg.matches("<polyline ").count(), 4);
        // A file that is not there, or not of rrds bench --json, is named.
        let missing = dir.join("missing.json");
        let err = run(&PlotArgs {
            output: Some(out.clone()),
            files: vec![a.clone(), missing.clone()],
        })
        .unwrap_err();
        assert!(err
            .to_string()
            .starts_with(&format!("{}: ", missing.display())));
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        let table = dir.join("table.txt");
        fs::write(&table, "rate 64 1 1000.0\n").unwrap();
        let err = run(&PlotArgs {
            output: Some(out.clone()),
            files: vec![table.clone()],
        })
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err
            .to_string()
            .starts_with(&format!("{}:1: ", table.display())));
        // No directory for the chart: refused before reading.
        let err = run(&PlotArgs {
            output: Some(dir.join("no-such-dir/chart.svg")),
            files: vec![missing],
        })
        .unwrap_err();
        assert!(err.to_string().starts_with("-o "), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }
}

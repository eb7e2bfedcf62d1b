// SPDX-License-Identifier: GPL-2.0-only
//! The progress line on standard error: mode, size, run i/N and the
//! seconds the current run has taken, rewritten in place with `\r` a few
//! times a second by a thread of its own (the measurement loops are left
//! alone), and erased before every line of the report.
//!
//! Only for a terminal, and not with `--json`: otherwise [`Progress`] does
//! nothing at all, so captured output never sees it.

use std::io;
use std::io::Write;
use std::sync::mpsc;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::MutexGuard;
use std::sync::PoisonError;
use std::thread;
use std::thread::JoinHandle;
use std::time::Duration;
use std::time::Instant;

use super::Kind;

/// Time between redraws.
const TICK: Duration = Duration::from_millis(250);

/// The run under way.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    pub kind: Kind,
    pub size: usize,
    pub run: u32,
    pub runs: u32,
    /// This run's place among all runs, from 1.
    pub step: usize,
    pub steps: usize,
}

impl Step {
    fn line(&self, elapsed: Duration) -> String {
        format!(
            "rrds bench: {} {} B run {}/{} ({}/{}) {:.1}s",
            self.kind,
            self.size,
            self.run,
            self.runs,
            self.step,
            self.steps,
            elapsed.as_secs_f64()
        )
    }
}

/// What the drawing thread and the benchmark share.
struct Screen {
    out: Box<dyn Write + Send>,
    current: Option<(Step, Instant)>,
    /// Characters of the line on screen (0: none).
    shown: usize,
}

impl Screen {
    fn draw(&mut self) {
        let Some((step, start)) = self.current else {
            return;
        };
        let line = step.line(start.elapsed());
        let len = line.chars().count();
        // Blank out what is left of a longer previous line.
        let pad = self.shown.saturating_sub(len);
        let text = format!("\r{line}{:pad$}", "");
        // Best effort: a progress line that cannot be shown is no error.
        let _ = self.out.write_all(text.as_bytes());
        let _ = self.out.flush();
        self.shown = len;
    }

    fn clear(&mut self) {
        if self.shown > 0 {
            let text = format!("\r{:width$}\r", "", width = self.shown);
            let _ = self.out.write_all(text.as_bytes());
            let _ = self.out.flush();
            self.shown = 0;
        }
    }
}

/// The progress line (or nothing, when disabled).
pub struct Progress {
    inner: Option<Inner>,
}

struct Inner {
    screen: Arc<Mutex<Screen>>,
    /// Dropped to stop the drawing thread.
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

fn lock(screen: &Mutex<Screen>) -> MutexGuard<'_, Screen> {
    screen.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Progress {
    /// A progress line on standard error if `enabled`, else nothing.
    pub fn new(enabled: bool) -> Self {
        if enabled {
            Self::to(Box::new(io::stderr()))
        } else {
            Self { inner: None }
        }
    }

    /// A progress line written to `out`.
    fn to(out: Box<dyn Write + Send>) -> Self {
        let screen = Arc::new(Mutex::new(Screen {
            out,
            current: None,
            shown: 0,
        }));
        let (stop, stopped) = mpsc::channel::<()>();
        let shared = Arc::clone(&screen);
        let thread = thread::Builder::new()
            .name("bench-progress".to_string())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(TICK) {
                    lock(&shared).draw();
                }
            });
        match thread {
            Ok(thread) => Self {
                inner: Some(Inner {
                    screen,
                    stop: Some(stop),
                    thread: Some(thread),
                }),
            },
            // No thread, no progress line; the benchmark does not need it.
            Err(_) => Self { inner: None },
        }
    }

    /// A run begins: shows it.
    pub fn start(&self, step: Step) {
        if let Some(inner) = &self.inner {
            let mut screen = lock(&inner.screen);
            screen.current = Some((step, Instant::now()));
            screen.draw();
        }
    }

    /// The run ended: erases the line, so the report's next line starts
    /// on a clean one.
    pub fn stop(&self) {
        if let Some(inner) = &self.inner {
            let mut screen = lock(&inner.screen);
            screen.current = None;
            screen.clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop();
        if let Some(inner) = &mut self.inner {
            drop(inner.stop.take());
            if let Some(thread) = inner.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer the test can read after the progress line wrote to it.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    fn step(run: u32) -> Step {
        Step {
            kind: Kind::Latency,
            size: 8192,
            run,
            runs: 3,
            step: 4 + run as usize,
            steps: 12,
        }
    }

    #[test]
    fn line_names_mode_size_run_and_seconds() {
        assert_eq!(
            step(2).line(Duration::from_millis(1250)),
            "rrds bench: latency 8192 B run 2/3 (6/12) 1.2s"
        );
    }

    #[test]
    fn shown_in_place_and_erased() {
        let out = Shared::default();
        let progress = Progress::to(Box::new(out.clone()));
        progress.start(step(1));
        thread::sleep(TICK + TICK / 2);
        progress.stop();
        let text = out.text();
        assert!(text.starts_with("\rrrds bench: latency 8192 B run 1/3 (5/12) 0.0s"));
        // Redrawn at least once, never on a new line, and erased at the end.
        assert!(text.matches('\r').count() >= 3, "{text:?}");
        assert!(!text.contains('\n'));
        let width = "rrds bench: latency 8192 B run 1/3 (5/12) 0.0s".len();
        assert!(text.ends_with(&format!("\r{}\r", " ".repeat(width))));
        // Stopped: nothing more.
        thread::sleep(TICK + TICK / 2);
        drop(progress);
        assert_eq!(out.text(), text);
    }

    #[test]
    fn drop_erases_a_line_left_on_screen() {
        let out = Shared::default();
        let progress = Progress::to(Box::new(out.clone()));
        progress.start(step(3));
        drop(progress);
        assert!(out.text().ends_with(" \r"), "{:?}", out.text());
    }

    #[test]
    fn disabled_does_nothing() {
        let progress = Progress::new(false);
        assert!(progress.inner.is_none());
        progress.start(step(1));
        progress.stop();
    }
}

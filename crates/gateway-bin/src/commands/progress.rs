//! Progress of a long command on stderr: a bar on a terminal, a plain line
//! now and then elsewhere.

/// How often progress is written as a plain line when stderr is not a
/// terminal (a log file gets a line, not a redraw per row).
const PLAIN_PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Progress on stderr: an indicatif bar on a terminal; elsewhere (a log
/// file, a pipe) one plain line at most every [`PLAIN_PROGRESS_EVERY`],
/// never a carriage return.
enum Progress {
    Bar { label: &'static str, bar: Option<indicatif::ProgressBar> },
    Lines { label: &'static str, last: std::time::Instant, done: usize, total: usize, written: bool },
}

impl Progress {
    fn new(label: &'static str) -> Self {
        use std::io::IsTerminal as _;
        if std::io::stderr().is_terminal() {
            Self::Bar { label, bar: None }
        } else {
            Self::Lines { label, last: std::time::Instant::now(), done: 0, total: 0, written: false }
        }
    }

    fn update(&mut self, done: usize, total: usize) {
        match self {
            Self::Bar { label, bar } => {
                let bar = bar.get_or_insert_with(|| {
                    let bar = indicatif::ProgressBar::new(total as u64);
                    let style = indicatif::ProgressStyle::with_template("{msg:10} [{bar:30}] {pos}/{len} eta {eta}")
                        .map(|style| style.progress_chars("#>-"))
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
                    bar.set_style(style);
                    bar.set_message(*label);
                    bar
                });
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            }
            Self::Lines { label, last, done: seen, total: of, written } => {
                (*seen, *of) = (done, total);
                if last.elapsed() >= PLAIN_PROGRESS_EVERY {
                    eprintln!("{label}: {done}/{total}");
                    *last = std::time::Instant::now();
                    *written = true;
                }
            }
        }
    }

    fn finish(self) {
        match self {
            Self::Bar { bar: Some(bar), .. } => bar.finish_and_clear(),
            Self::Lines { label, done, total, written: true, .. } => eprintln!("{label}: {done}/{total}"),
            _ => {}
        }
    }
}

/// Runs `work` with a progress callback shown under `label`, and clears
/// or closes the display once it returns, whatever it returns.
pub(crate) fn with_progress<T>(label: &'static str, work: impl FnOnce(&dyn Fn(usize, usize)) -> T) -> T {
    let shown = std::cell::RefCell::new(Progress::new(label));
    let progress = |done: usize, total: usize| shown.borrow_mut().update(done, total);
    let out = work(&progress);
    shown.into_inner().finish();
    out
}

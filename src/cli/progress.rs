//! Progress bars for long work (`fetch`, `cache verify`, `cache push`, `pack fetch`), drawn on
//! standard error only when it is a terminal: piped or redirected output stays clean.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often a bar that follows a counter is redrawn.
const TICK: Duration = Duration::from_millis(100);

/// A bar on standard error, or nothing when standard error is not a terminal.
pub(crate) struct Progress(Option<ProgressBar>);

impl Progress {
    /// A bar over `total` bytes.
    pub(crate) fn bytes(total: u64, message: &str) -> Self {
        Self::styled(
            Some(total),
            "{msg} [{bar:30}] {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec} {eta}",
            message,
        )
    }

    /// A bar over `total` items.
    pub(crate) fn items(total: u64, message: &str) -> Self {
        Self::styled(Some(total), "{msg} [{bar:30}] {pos}/{len} {eta}", message)
    }

    /// A spinner that counts bytes of unknown total.
    pub(crate) fn spinner_bytes(message: &str) -> Self {
        Self::styled(None, "{spinner} {msg} {binary_bytes} {elapsed}", message)
    }

    fn styled(total: Option<u64>, template: &str, message: &str) -> Self {
        if !std::io::stderr().is_terminal() {
            return Self(None);
        }
        let bar = match total {
            Some(n) => ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
            None => ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(message.to_string());
        bar.tick();
        Self(Some(bar))
    }

    /// Moves the bar on by `n`.
    pub(crate) fn inc(&self, n: u64) {
        if let Some(b) = &self.0 {
            b.inc(n);
        }
    }

    /// Removes the bar from the terminal.
    pub(crate) fn finish(&self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }

    /// Follows the bytes this process reads from upstream bodies until the returned guard
    /// is dropped (a one-shot command runs one fetch at a time, so they are its own).
    pub(crate) fn follow_received(&self) -> Follow {
        let Some(bar) = self.0.clone() else {
            return Follow(None);
        };
        let start = crate::fetch::idle::received();
        Follow(Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(TICK).await;
                bar.set_position(crate::fetch::idle::received().saturating_sub(start));
            }
        })))
    }
}

/// Stops following a counter when dropped.
pub(crate) struct Follow(Option<tokio::task::JoinHandle<()>>);

impl Drop for Follow {
    fn drop(&mut self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }
}

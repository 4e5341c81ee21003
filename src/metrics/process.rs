//! The standard `process_*` metrics (CPU seconds, resident and virtual memory, open and
//! maximum file descriptors, start time), read from `/proc/self` at each scrape, as the Go and
//! Python clients export them. `prometheus-client` has no process collector for Linux, and
//! these five files need no crate: the parsers are small and tested on captured text.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Exports the process metrics; nothing when `/proc/self` cannot be read (not Linux).
#[derive(Debug)]
pub(crate) struct ProcessCollector;

/// One reading of the process's state.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Sample {
    /// User plus system CPU time, seconds.
    pub(crate) cpu_seconds: f64,
    /// Resident set size, bytes.
    pub(crate) resident_bytes: u64,
    /// Virtual memory size, bytes.
    pub(crate) virtual_bytes: u64,
    /// Open file descriptors.
    pub(crate) open_fds: u64,
    /// The soft limit on open file descriptors, if limited.
    pub(crate) max_fds: Option<u64>,
    /// Start time since the Unix epoch, seconds.
    pub(crate) start_time_seconds: f64,
}

/// The fields of `/proc/self/stat` this module reads.
#[derive(Debug, PartialEq)]
pub(crate) struct Stat {
    /// `utime + stime`, clock ticks.
    pub(crate) cpu_ticks: u64,
    /// Start time after boot, clock ticks.
    pub(crate) start_ticks: u64,
    /// Virtual memory size, bytes.
    pub(crate) vsize: u64,
    /// Resident set size, pages.
    pub(crate) rss_pages: u64,
}

/// Reads `/proc/self/stat`'s fields from its text. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted from its last `)`.
pub(crate) fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `fields[0]` is field 3 (state): field N is `fields[N - 3]`.
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    Some(Stat {
        cpu_ticks: field(14)?.checked_add(field(15)?)?,
        start_ticks: field(22)?,
        vsize: field(23)?,
        rss_pages: field(24)?,
    })
}

/// The boot time (`btime`, Unix seconds) from `/proc/stat`'s text.
pub(crate) fn parse_boot_time(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// The soft "Max open files" limit from `/proc/self/limits`' text (`None` if unlimited).
pub(crate) fn parse_max_fds(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
}

impl Sample {
    /// Reads `/proc/self` now.
    pub(crate) fn read() -> Option<Self> {
        let stat = parse_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
        let ticks = rustix::param::clock_ticks_per_second() as f64;
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| parse_boot_time(&t))
            .unwrap_or(0);
        let open_fds = std::fs::read_dir("/proc/self/fd")
            .map(|d| d.count() as u64)
            .unwrap_or(0);
        let max_fds = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|t| parse_max_fds(&t));
        Some(Self {
            cpu_seconds: stat.cpu_ticks as f64 / ticks,
            resident_bytes: stat
                .rss_pages
                .saturating_mul(rustix::param::page_size() as u64),
            virtual_bytes: stat.vsize,
            open_fds,
            max_fds,
            start_time_seconds: boot as f64 + stat.start_ticks as f64 / ticks,
        })
    }
}

/// Encodes one gauge.
fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: f64,
) -> Result<(), fmt::Error> {
    let g = ConstGauge::new(value);
    let e = encoder.encode_descriptor(name, help, None, g.metric_type())?;
    g.encode(e)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let Some(s) = Sample::read() else {
            return Ok(());
        };
        let cpu = ConstCounter::new(s.cpu_seconds);
        let e = encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            cpu.metric_type(),
        )?;
        cpu.encode(e)?;
        gauge(
            &mut encoder,
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            s.resident_bytes as f64,
        )?;
        gauge(
            &mut encoder,
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            s.virtual_bytes as f64,
        )?;
        gauge(
            &mut encoder,
            "process_open_fds",
            "Number of open file descriptors",
            s.open_fds as f64,
        )?;
        if let Some(max) = s.max_fds {
            gauge(
                &mut encoder,
                "process_max_fds",
                "Maximum number of open file descriptors",
                max as f64,
            )?;
        }
        gauge(
            &mut encoder,
            "process_start_time_seconds",
            "Start time of the process since the Unix epoch in seconds",
            s.start_time_seconds,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        // A command name with a space and a ')' in it, as a process may name itself.
        let text = "4242 (fetch gate) x) S 1 4242 4242 0 -1 4194560 1200 0 0 0 \
                    250 50 0 0 20 0 9 0 123456 98765432 2048 18446744073709551615 \
                    1 1 0 0 0 0 0 4096 17987 0 0 0 17 1 0 0 0 0 0";
        let stat = parse_stat(text).unwrap();
        assert_eq!(
            stat,
            Stat {
                cpu_ticks: 300,
                start_ticks: 123456,
                vsize: 98765432,
                rss_pages: 2048,
            }
        );
        assert_eq!(parse_stat("4242 (truncated) S 1 2"), None);
        assert_eq!(parse_stat("no parenthesis"), None);
    }

    #[test]
    fn boot_time_and_the_fd_limit_are_read_from_their_lines() {
        assert_eq!(
            parse_boot_time("cpu  1 2 3\nbtime 1764547200\nprocesses 9\n"),
            Some(1_764_547_200)
        );
        assert_eq!(parse_boot_time("cpu 1\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(parse_max_fds(limits), Some(1024));
        let unlimited =
            "Max open files            unlimited            unlimited            files     \n";
        assert_eq!(parse_max_fds(unlimited), None);
    }

    #[test]
    fn this_process_reads_as_running_now() {
        let s = Sample::read().expect("/proc/self on Linux");
        assert!(s.resident_bytes > 0);
        assert!(s.open_fds >= 3, "{s:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(
            s.start_time_seconds > 1.0e9 && s.start_time_seconds <= now + 1.0,
            "{s:?}"
        );
    }
}

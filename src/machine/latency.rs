//! Per-command latency histograms, Redis 7's latency tracking (`latency-tracking yes`, its
//! default): INFO latencystats' percentiles and LATENCY HISTOGRAM's power-of-two buckets.
//! Also Redis's latency monitor (`latency-monitor-threshold`, latency.c): per event
//! (`command`, `fast-command`, `expire-cycle`) the last 160 seconds that had a spike, for
//! LATENCY LATEST, HISTORY, GRAPH, DOCTOR and RESET.
//! Redis keeps an HdrHistogram with 2 significant digits; this is a log-linear histogram of
//! the same kind, 16 linear steps per power of two (about 6 % resolution), in nanoseconds up to
//! 2^31 (2.1 s; longer calls count in the last bucket). Recording is a few instructions; a
//! command's 3.5 KiB of counters exist only once it has run.

/// Values under 16 ns have a bucket each; then 16 per power of two up to 2^31 ns.
const SUB: u32 = 16;
const TOP_OCTAVE: u32 = 30;
const BUCKETS: usize = (SUB + (TOP_OCTAVE - 3) * SUB) as usize;

#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    pub total: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: Box::new([0; BUCKETS]),
            total: 0,
        }
    }
}

fn bucket(ns: u64) -> usize {
    if ns < u64::from(SUB) {
        return ns as usize;
    }
    let octave = (63 - ns.leading_zeros()).min(TOP_OCTAVE);
    if 63 - ns.leading_zeros() > TOP_OCTAVE {
        return BUCKETS - 1;
    }
    let step = ((ns >> (octave - 4)) & u64::from(SUB - 1)) as u32;
    (SUB + (octave - 4) * SUB + step) as usize
}

/// The highest value bucket `i` holds (HdrHistogram's "highest equivalent value").
fn upper(i: usize) -> u64 {
    let i = i as u32;
    if i < SUB {
        return u64::from(i);
    }
    let octave = (i - SUB) / SUB + 4;
    let step = (i - SUB) % SUB;
    ((u64::from(SUB + step) + 1) << (octave - 4)) - 1
}

impl Histogram {
    pub fn record(&mut self, ns: u64) {
        self.counts[bucket(ns)] += 1;
        self.total += 1;
    }

    /// The latency (ns) at or under which `pct` percent of the calls fell.
    pub fn percentile(&self, pct: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let want = ((self.total as f64) * pct / 100.0).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= want {
                return upper(i);
            }
        }
        upper(BUCKETS - 1)
    }

    /// LATENCY HISTOGRAM's buckets, as Redis's log iterator walks them: bounds of 1024 ns
    /// doubling, each named as Redis names it, by the highest value its HDR histogram (2
    /// significant figures) counts as equal to the bound, in whole µs (1, 2, 4, 8, 16, 33, 66,
    /// 132 …), with the calls at or under it, listing only the bounds where that count grew.
    pub fn power_of_two_usec(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut cumulative = 0u64;
        let mut listed = 0u64;
        let mut bound_ns = 1024u64;
        for (i, n) in self.counts.iter().enumerate() {
            if *n == 0 {
                continue;
            }
            // Buckets end on powers of two, so a bucket lies under one bound or past it.
            while upper(i) > bound_ns {
                if cumulative != listed {
                    out.push((redis_bucket_label(bound_ns), cumulative));
                    listed = cumulative;
                }
                bound_ns *= 2;
            }
            cumulative += n;
        }
        if cumulative != listed {
            out.push((redis_bucket_label(bound_ns), cumulative));
        }
        out
    }
}

/// Redis's label for a power-of-two bound of at least 1024 ns: `highest_equivalent_value / 1000`
/// of its HDR histogram with 2 significant figures (256 sub-buckets), where the values equal to
/// a bound `b` span `b / 128` ns.
fn redis_bucket_label(bound_ns: u64) -> u64 {
    (bound_ns + bound_ns / 128 - 1) / 1000
}

/// `latency-tracking-info-percentiles` as INFO prints each: `p50`, `p99.9` (Redis's `%f` with
/// the trailing zeros cut).
pub fn percentile_label(p: f64) -> String {
    let s = format!("{p:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("p{s}")
}

/// Samples kept per event (Redis's LATENCY_TS_LEN).
const TS_LEN: usize = 160;

/// One event's spikes: a ring of (unix seconds, ms) with one sample per second (the highest),
/// and the highest ever seen (latencyTimeSeries).
#[derive(Clone, Debug)]
pub struct Series {
    idx: usize,
    pub max: u64,
    samples: Box<[(i64, u64); TS_LEN]>,
}

impl Series {
    /// Samples oldest first.
    pub fn samples(&self) -> impl Iterator<Item = (i64, u64)> + '_ {
        (0..TS_LEN)
            .map(move |j| self.samples[(self.idx + j) % TS_LEN])
            .filter(|s| s.0 != 0)
    }

    /// The latest sample.
    pub fn last(&self) -> (i64, u64) {
        self.samples[(self.idx + TS_LEN - 1) % TS_LEN]
    }
}

/// Redis's latency monitor: events in the order they first spiked.
#[derive(Clone, Debug, Default)]
pub struct Monitor {
    /// `latency-monitor-threshold` in ms; 0: off (kept here so a command's check is one load).
    pub threshold_ms: u64,
    events: Vec<(String, Series)>,
}

impl Monitor {
    /// latencyAddSampleIfNeeded: records `ms` for `event` when monitoring is on and `ms` reaches
    /// the threshold.
    #[inline]
    pub fn sample_if_needed(&mut self, event: &str, ms: u64, now_unix: impl FnOnce() -> i64) {
        if self.threshold_ms != 0 && ms >= self.threshold_ms {
            self.add(event, ms, now_unix());
        }
    }

    /// latencyAddSample.
    pub fn add(&mut self, event: &str, ms: u64, now: i64) {
        let pos = match self.events.iter().position(|(e, _)| e == event) {
            Some(p) => p,
            None => {
                self.events.push((
                    event.to_owned(),
                    Series {
                        idx: 0,
                        max: 0,
                        samples: Box::new([(0, 0); TS_LEN]),
                    },
                ));
                self.events.len() - 1
            }
        };
        let ts = &mut self.events[pos].1;
        ts.max = ts.max.max(ms);
        let prev = (ts.idx + TS_LEN - 1) % TS_LEN;
        if ts.samples[prev].0 == now {
            ts.samples[prev].1 = ts.samples[prev].1.max(ms);
            return;
        }
        ts.samples[ts.idx] = (now, ms);
        ts.idx = (ts.idx + 1) % TS_LEN;
    }

    /// latencyResetEvent: drops `event` (case-insensitive) or, with None, every event;
    /// returns how many went.
    pub fn reset(&mut self, event: Option<&[u8]>) -> usize {
        let before = self.events.len();
        self.events
            .retain(|(e, _)| event.is_some_and(|x| !e.as_bytes().eq_ignore_ascii_case(x)));
        before - self.events.len()
    }

    pub fn get(&self, event: &[u8]) -> Option<&Series> {
        self.events
            .iter()
            .find(|(e, _)| e.as_bytes() == event)
            .map(|(_, s)| s)
    }

    pub fn events(&self) -> impl Iterator<Item = (&str, &Series)> {
        self.events.iter().map(|(e, s)| (e.as_str(), s))
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

/// What Redis's DOCTOR reads besides the events.
pub struct DoctorInputs {
    pub slowlog_log_slower_than: i64,
    pub hz: u64,
    pub fsync_always: bool,
    /// The process has anonymous huge pages (THPGetAnonHugePagesSize > 0).
    pub anon_huge_pages: bool,
}

/// createLatencyReport, for the events deadbolt records (and Redis's others' advice, should
/// one be recorded).
pub fn doctor(m: &Monitor, now: i64, inp: &DoctorInputs) -> String {
    use std::fmt::Write;
    let mut r = String::new();
    if m.events.is_empty() && m.threshold_ms == 0 {
        r.push_str("I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n");
        return r;
    }
    #[derive(Default)]
    struct Advice {
        slowlog_enabled: bool,
        slowlog_tuning: bool,
        slowlog_inspect: bool,
        scheduler: bool,
        local_disk: bool,
        ssd: bool,
        data_writeback: bool,
        disk_contention: bool,
        no_appendfsync: bool,
        relax_fsync: bool,
        write_load_info: bool,
        hz: bool,
        large_objects: bool,
        mass_eviction: bool,
        disable_thp: bool,
    }
    let mut a = Advice::default();
    let mut advices = 0;
    for (n, (event, ts)) in m.events.iter().enumerate() {
        if n == 0 {
            r.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
        }
        // analyzeLatencyForEvent
        let samples: Vec<(i64, u64)> = ts.samples().collect();
        let count = samples.len() as u64;
        let (mut avg, mut mad, mut period) = (0u64, 0u64, 0i64);
        if let Some(mean) = samples.iter().map(|s| s.1).sum::<u64>().checked_div(count) {
            avg = mean;
            let oldest = samples.iter().map(|s| s.0).min().unwrap_or(now);
            period = now - oldest;
            if period == 0 {
                period = 1;
            }
            let deviation: u64 = samples
                .iter()
                .map(|s| (avg as i64 - s.1 as i64).unsigned_abs())
                .sum();
            mad = deviation / count;
        }
        let _ = write!(
            r,
            "{}. {}: {} latency spikes (average {}ms, mean deviation {}ms, period {:.2} sec). Worst all time event {}ms.",
            n + 1,
            event,
            count,
            avg,
            mad,
            if count > 0 { period as f64 / count as f64 } else { f64::NAN },
            ts.max
        );
        match event.to_ascii_lowercase().as_str() {
            "command" => {
                if inp.slowlog_log_slower_than < 0 {
                    a.slowlog_enabled = true;
                    advices += 1;
                } else if (inp.slowlog_log_slower_than / 1000) as u64 > m.threshold_ms {
                    a.slowlog_tuning = true;
                    advices += 1;
                }
                a.slowlog_inspect = true;
                a.large_objects = true;
                advices += 2;
            }
            "fast-command" => {
                a.scheduler = true;
                advices += 1;
            }
            "aof-write-pending-fsync" => {
                (a.local_disk, a.disk_contention, a.ssd, a.data_writeback) =
                    (true, true, true, true);
                advices += 4;
            }
            "aof-write-active-child" => {
                (a.no_appendfsync, a.data_writeback, a.ssd) = (true, true, true);
                advices += 3;
            }
            "aof-write-alone" => {
                (a.local_disk, a.data_writeback, a.ssd) = (true, true, true);
                advices += 3;
            }
            "aof-fsync-always" => {
                a.relax_fsync = true;
                advices += 1;
            }
            "aof-fstat" | "rdb-unlink-temp-file" => {
                (a.disk_contention, a.local_disk) = (true, true);
                advices += 2;
            }
            "aof-rewrite-diff-write" | "aof-rename" => {
                (a.write_load_info, a.data_writeback, a.ssd, a.local_disk) =
                    (true, true, true, true);
                advices += 4;
            }
            "expire-cycle" => {
                (a.hz, a.large_objects) = (true, true);
                advices += 2;
            }
            "eviction-del" => {
                a.large_objects = true;
                advices += 1;
            }
            "eviction-cycle" => {
                a.mass_eviction = true;
                advices += 1;
            }
            _ => {}
        }
        r.push('\n');
    }
    if inp.anon_huge_pages {
        a.disable_thp = true;
        advices += 1;
    }
    let events = m.events.len();
    if events == 0 && advices == 0 {
        r.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
        return r;
    }
    if events > 0 && advices == 0 {
        r.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
        return r;
    }
    r.push_str("\nI have a few advices for you:\n\n");
    let threshold_us = m.threshold_ms.saturating_mul(1000);
    if a.slowlog_enabled {
        let _ = writeln!(r, "- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {threshold_us}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.");
    }
    if a.slowlog_tuning {
        let _ = writeln!(r, "- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {threshold_us}'.");
    }
    if a.slowlog_inspect {
        r.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
    }
    if a.scheduler {
        r.push_str("- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n");
    }
    if a.local_disk {
        r.push_str("- It is strongly advised to use local disks for persistence, especially if you are using AOF. Remote disks provided by platform-as-a-service providers are known to be slow.\n");
    }
    if a.ssd {
        r.push_str("- SSD disks are able to reduce fsync latency, and total time needed for snapshotting and AOF log rewriting (resulting in smaller memory usage). With extremely high write load SSD disks can be a good option. However Redis should perform reasonably with high load using normal disks. Use this advice as a last resort.\n");
    }
    if a.data_writeback {
        r.push_str("- Mounting ext3/4 filesystems with data=writeback can provide a performance boost compared to data=ordered, however this mode of operation provides less guarantees, and sometimes it can happen that after a hard crash the AOF file will have a half-written command at the end and will require to be repaired before Redis restarts.\n");
    }
    if a.disk_contention {
        r.push_str("- Try to lower the disk contention. This is often caused by other disk intensive processes running in the same computer (including other Redis instances).\n");
    }
    if a.no_appendfsync {
        r.push_str("- Assuming from the point of view of data safety this is viable in your environment, you could try to enable the 'no-appendfsync-on-rewrite' option, so that fsync will not be performed while there is a child rewriting the AOF file or producing an RDB file (the moment where there is high disk contention).\n");
    }
    if a.relax_fsync && inp.fsync_always {
        r.push_str("- Your fsync policy is set to 'always'. It is very hard to get good performances with such a setup, if possible try to relax the fsync policy to 'onesec'.\n");
    }
    if a.write_load_info {
        r.push_str("- Latency during the AOF atomic rename operation or when the final difference is flushed to the AOF file at the end of the rewrite, sometimes is caused by very high write load, causing the AOF buffer to get very large. If possible try to send less commands to accomplish the same work, or use Lua scripts to group multiple operations into a single EVALSHA call.\n");
    }
    if a.hz && inp.hz < 100 {
        r.push_str("- In order to make the Redis keys expiring process more incremental, try to set the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n");
    }
    if a.large_objects {
        r.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
    }
    if a.mass_eviction {
        r.push_str("- Sudden changes to the 'maxmemory' setting via 'CONFIG SET', or allocation of large objects via sets or sorted sets intersections, STORE option of SORT, Redis Cluster large keys migrations (RESTORE command), may create sudden memory pressure forcing the server to block trying to evict keys. \n");
    }
    if a.disable_thp {
        r.push_str("- I detected a non zero amount of anonymous huge pages used by your process. This creates very serious latency events in different conditions, especially when Redis is persisting on disk. To disable THP support use the command 'echo never > /sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into /etc/rc.local so that the command will be executed again after a reboot. Note that even if you have already disabled THP, you still need to restart the Redis process to get rid of the huge pages already created.\n");
    }
    r
}

/// Columns of LATENCY GRAPH (LATENCY_GRAPH_COLS).
const GRAPH_COLS: usize = 80;

/// latencyCommandGenSparkeline: the event's samples as a 4-row filled sparkline, each
/// labelled with how long ago it was.
pub fn graph(event: &str, ts: &Series, now: i64) -> String {
    let mut values = Vec::new();
    let mut labels = Vec::new();
    let (mut min, mut max) = (0u64, 0u64);
    for (i, (time, ms)) in ts.samples().enumerate() {
        if i == 0 {
            (min, max) = (ms, ms);
        } else {
            max = max.max(ms);
            min = min.min(ms);
        }
        let elapsed = now - time;
        labels.push(if elapsed < 60 {
            format!("{elapsed}s")
        } else if elapsed < 3600 {
            format!("{}m", elapsed / 60)
        } else if elapsed < 3600 * 24 {
            format!("{}h", elapsed / 3600)
        } else {
            format!("{}d", elapsed / (3600 * 24))
        });
        values.push(ms as f64);
    }
    let mut out = format!(
        "{event} - high {max} ms, low {min} ms (all time high {} ms)\n",
        ts.max
    );
    out.push_str(&"-".repeat(GRAPH_COLS));
    out.push('\n');
    sparkline(&mut out, &values, &labels, GRAPH_COLS, 4);
    out
}

/// sparklineRender with SPARKLINE_FILL: `columns` samples per block of `rows` rows, labels
/// printed vertically under each sample.
fn sparkline(out: &mut String, values: &[f64], labels: &[String], columns: usize, rows: usize) {
    const CHARSET_FILL: &[u8] = b"_o#";
    const CHARSET_LEN: usize = 3;
    const LABEL_MARGIN_TOP: usize = 1;
    let (min, max) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let has_labels = labels.iter().any(|l| !l.is_empty());
    let mut j = 0;
    while j < values.len() {
        let len = (values.len() - j).min(columns);
        if j != 0 {
            out.push('\n');
        }
        let mut relmax = max - min;
        if relmax == 0.0 {
            relmax = 1.0;
        }
        let steps = (CHARSET_LEN * rows) as i64;
        let mut row = 0usize;
        loop {
            let mut again = false;
            let mut chars = vec![b' '; len];
            for (k, c) in chars.iter_mut().enumerate() {
                let relval = values[j + k] - min;
                // C: (int)(relval*steps) / relmax, truncated to int.
                let mut step = ((relval * steps as f64) as i64 as f64 / relmax) as i64;
                step = step.clamp(0, steps - 1);
                if row < rows {
                    let charidx = step - ((rows - row - 1) * CHARSET_LEN) as i64;
                    again = true;
                    if (0..CHARSET_LEN as i64).contains(&charidx) {
                        *c = CHARSET_FILL[charidx as usize];
                    } else if charidx >= CHARSET_LEN as i64 {
                        *c = b'|';
                    }
                } else {
                    if has_labels && row - rows < LABEL_MARGIN_TOP {
                        again = true;
                        break;
                    }
                    let label = labels[j + k].as_bytes();
                    let at = row - rows - LABEL_MARGIN_TOP;
                    if label.len() > at {
                        again = true;
                        *c = label[at];
                    }
                }
            }
            if !again {
                break;
            }
            row += 1;
            out.push_str(&String::from_utf8_lossy(&chars));
            out.push('\n');
        }
        j += columns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_in_order() {
        let mut last = 0;
        for ns in [
            0u64,
            1,
            15,
            16,
            17,
            31,
            32,
            1000,
            1023,
            1024,
            4096,
            1 << 20,
            (1 << 31) - 1,
        ] {
            let b = bucket(ns);
            assert!(b >= last, "{ns}");
            assert!(upper(b) >= ns, "{ns}: bucket {b} ends at {}", upper(b));
            last = b;
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        // About 6 % resolution.
        let b = bucket(100_000);
        assert!(upper(b) < 100_000 + 100_000 / 15, "{}", upper(b));
    }

    #[test]
    fn percentiles_and_power_of_two_buckets() {
        let mut h = Histogram::default();
        for _ in 0..2 {
            h.record(3_500); // 3.5 µs
        }
        h.record(7_000);
        assert!(
            (3_500..3_800).contains(&h.percentile(50.0)),
            "{}",
            h.percentile(50.0)
        );
        assert!((7_000..7_500).contains(&h.percentile(99.0)));
        // Redis's answer for the same calls: 4 → 2, 8 → 3.
        assert_eq!(h.power_of_two_usec(), vec![(4, 2), (8, 3)]);
        assert_eq!(percentile_label(99.9), "p99.9");
        assert_eq!(percentile_label(50.0), "p50");
    }

    #[test]
    fn monitor_keeps_one_sample_per_second_and_the_max() {
        let mut m = Monitor {
            threshold_ms: 10,
            ..Default::default()
        };
        m.sample_if_needed("command", 9, || 100);
        assert!(m.is_empty(), "under the threshold");
        m.sample_if_needed("command", 20, || 100);
        m.sample_if_needed("command", 15, || 100);
        m.sample_if_needed("command", 30, || 101);
        let ts = m.get(b"command").unwrap();
        assert_eq!(ts.samples().collect::<Vec<_>>(), vec![(100, 20), (101, 30)]);
        assert_eq!((ts.last(), ts.max), ((101, 30), 30));
        // The ring keeps the last 160 seconds that had a spike.
        for t in 0..200 {
            m.add("command", 11, 1000 + t);
        }
        let ts = m.get(b"command").unwrap();
        assert_eq!(ts.samples().count(), TS_LEN);
        assert_eq!(ts.samples().next(), Some((1040, 11)));
        assert_eq!(m.reset(Some(b"COMMAND")), 1);
        assert!(m.is_empty());
    }

    #[test]
    fn graph_is_redis_sparkline() {
        let mut m = Monitor::default();
        m.add("command", 300, 100);
        let g = graph("command", m.get(b"command").unwrap(), 100);
        // As redis-server 7.0.15 drew one 300 ms spike just now.
        let want = format!(
            "command - high 300 ms, low 300 ms (all time high 300 ms)\n{}\n \n \n \n_\n \n0\ns\n",
            "-".repeat(80)
        );
        assert_eq!(g, want);
    }
}

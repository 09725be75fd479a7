//! Counters for INFO stats, commandstats and errorstats.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

#[derive(Debug, Default, Clone)]
pub struct CmdStat {
    pub calls: u64,
    /// Time spent, in nanoseconds: a command called by a script often takes under a
    /// microsecond, and summing whole microseconds per call would count it as 0.
    pub nsec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
    /// Latency of each call (`latency-tracking`), made on its first tracked call.
    pub latency: Option<super::latency::Histogram>,
}

#[derive(Debug)]
pub struct Stats {
    pub commands: Vec<CmdStat>,
    /// Error code → count (INFO errorstats).
    pub errors: BTreeMap<String, u64>,
    pub total_error_replies: u64,
    /// `total_error_replies` when the last command (nested ones included) ended, or when the
    /// running one started: a command that ends above it failed (Redis's
    /// incrCommandStatsOnError and its `prev_err_count`).
    pub error_mark: u64,
    /// The script about to reply with an error whose error was already counted where it
    /// happened (a `redis.call` that failed): Redis's ERR_REPLY_FLAG_NO_STATS_UPDATE.
    pub error_already_counted: bool,
    pub total_commands: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub last_reset: Instant,
    /// `latency-tracking`: calls are recorded in their command's histogram.
    pub latency_tracking: bool,
    /// The latency monitor's events (LATENCY LATEST/HISTORY…); CONFIG RESETSTAT keeps them.
    pub latency_events: super::latency::Monitor,
    /// Unix seconds at start-up (LASTSAVE, rdb_last_save_time).
    pub start_unix: u64,
    /// Heap in use once the server was set up, before any data (MEMORY STATS
    /// `startup.allocated`, Redis's initial_memory_usage).
    pub startup_memory: usize,
    ops_samples: [u64; 16],
    /// Network bytes per second, as `ops_samples` (instantaneous_input/output_kbps).
    input_samples: [u64; 16],
    output_samples: [u64; 16],
    sample_idx: usize,
    last_sample_cmds: u64,
    last_sample_input: u64,
    last_sample_output: u64,
    last_sample_at: Instant,
}

impl Stats {
    pub fn new(ncommands: usize) -> Stats {
        let now = Instant::now();
        Stats {
            commands: vec![CmdStat::default(); ncommands],
            errors: BTreeMap::new(),
            total_error_replies: 0,
            error_mark: 0,
            error_already_counted: false,
            total_commands: 0,
            keyspace_hits: 0,
            keyspace_misses: 0,
            last_reset: now,
            latency_tracking: true,
            latency_events: Default::default(),
            start_unix: super::unix_ms() / 1000,
            startup_memory: crate::alloc::used_memory(),
            ops_samples: [0; 16],
            input_samples: [0; 16],
            output_samples: [0; 16],
            sample_idx: 0,
            last_sample_cmds: 0,
            last_sample_input: 0,
            last_sample_output: 0,
            last_sample_at: now,
        }
    }

    pub fn count_error(&mut self, code: &str) {
        self.total_error_replies += 1;
        match self.errors.get_mut(code) {
            Some(n) => *n += 1,
            None => {
                // Redis caps distinct error codes at 128 to bound memory.
                if self.errors.len() < 128 {
                    self.errors.insert(code.to_string(), 1);
                }
            }
        }
    }

    pub fn reset(&mut self) {
        self.total_commands = 0;
        self.last_sample_cmds = 0;
        for c in self.commands.iter_mut() {
            *c = CmdStat::default();
        }
        self.errors.clear();
        self.total_error_replies = 0;
        self.keyspace_hits = 0;
        self.keyspace_misses = 0;
    }

    /// Called from cron: one sample of commands and of network bytes per second, at most every
    /// 100 ms (Redis's trackInstantaneousMetric: delta * 1000 / elapsed ms).
    pub fn sample_ops(&mut self, shared: &super::shared::Shared) {
        let elapsed = self.last_sample_at.elapsed();
        if elapsed.as_millis() < 100 {
            return;
        }
        let delta = self.total_commands - self.last_sample_cmds;
        let per_sec = (delta as f64 / elapsed.as_secs_f64()) as u64;
        self.ops_samples[self.sample_idx] = per_sec;
        let ms = elapsed.as_millis() as u64;
        let input = shared.net_input_bytes.load(Ordering::Relaxed);
        let output = shared.net_output_bytes.load(Ordering::Relaxed);
        // CONFIG RESETSTAT zeroes the counters: a reading below the last counts from zero.
        let rate = |now: u64, last: u64| now.checked_sub(last).unwrap_or(now) * 1000 / ms;
        self.input_samples[self.sample_idx] = rate(input, self.last_sample_input);
        self.output_samples[self.sample_idx] = rate(output, self.last_sample_output);
        self.last_sample_input = input;
        self.last_sample_output = output;
        self.sample_idx = (self.sample_idx + 1) % self.ops_samples.len();
        self.last_sample_cmds = self.total_commands;
        self.last_sample_at = Instant::now();
    }

    pub fn instantaneous_ops(&self) -> u64 {
        self.ops_samples.iter().sum::<u64>() / self.ops_samples.len() as u64
    }

    /// INFO `instantaneous_input_kbps` / `instantaneous_output_kbps`: the samples' mean / 1024.
    pub fn instantaneous_kbps(&self) -> (f64, f64) {
        let mean = |s: &[u64; 16]| (s.iter().sum::<u64>() / s.len() as u64) as f64 / 1024.0;
        (mean(&self.input_samples), mean(&self.output_samples))
    }
}

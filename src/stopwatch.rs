//! Command durations (INFO commandstats, SLOWLOG) from the CPU's time-stamp counter.
//!
//! Every command is timed, and so is every `redis.call` inside a script: a failed Redisson
//! acquire reads the clock 8 times for that alone. Through the vDSO `clock_gettime` costs about
//! 30 ns a read on our (virtualised) EPYC and was the largest user-space symbol after the Lua
//! interpreter (2.5 % of the executor's CPU under `perf`); `rdtsc` costs about 11 ns. The TSC is
//! used only where the CPU says it ticks at a constant rate in every power state (CPUID
//! 0x8000_0007 EDX bit 8, "invariant TSC"), converted with a rate measured against the
//! monotonic clock at start-up; elsewhere this is `std::time::Instant`.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Nanoseconds per TSC tick, or None where the TSC is not usable.
static NS_PER_TICK: OnceLock<Option<f64>> = OnceLock::new();

/// How long each of start-up's three measurements of the TSC rate takes: 1 ms keeps the error
/// near 30 ns / 1 ms (3e-5), far below what a duration counted in microseconds shows.
const CALIBRATION: Duration = Duration::from_millis(1);

/// Measures the TSC rate; call once at start-up, before the first command (a later first
/// `start` would calibrate then).
pub fn calibrate() {
    NS_PER_TICK.get_or_init(measure);
}

#[derive(Clone, Copy)]
pub enum Stopwatch {
    Ticks(u64, f64),
    Clock(Instant),
}

impl Stopwatch {
    pub fn start() -> Stopwatch {
        match *NS_PER_TICK.get_or_init(measure) {
            Some(rate) => Stopwatch::Ticks(ticks(), rate),
            None => Stopwatch::Clock(Instant::now()),
        }
    }

    /// The tick it started at and the TSC's ns per tick; None where the TSC is not used.
    pub fn tsc(&self) -> Option<(u64, f64)> {
        match *self {
            Stopwatch::Ticks(t0, rate) => Some((t0, rate)),
            Stopwatch::Clock(_) => None,
        }
    }

    pub fn elapsed_ns(&self) -> u64 {
        match *self {
            Stopwatch::Ticks(t0, rate) => (ticks().saturating_sub(t0) as f64 * rate) as u64,
            Stopwatch::Clock(t0) => t0.elapsed().as_nanos() as u64,
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn invariant_tsc() -> bool {
    use std::arch::x86_64::__cpuid;
    // The extended leaf must exist before it is read.
    __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
}

#[cfg(target_arch = "x86_64")]
fn ticks() -> u64 {
    // SAFETY: rdtsc only reads the time-stamp counter; it touches no memory.
    unsafe { std::arch::x86_64::_rdtsc() }
}

#[cfg(target_arch = "x86_64")]
fn measure() -> Option<f64> {
    if !invariant_tsc() {
        return None;
    }
    // The median of three: a preemption inside one measurement skews that one only. The rate
    // also extends the wall clock between reads (clock::unix_ms_at), which checks it again.
    let mut rates = [0.0; 3];
    for r in &mut rates {
        let (c0, t0) = (ticks(), Instant::now());
        let mut t1 = t0;
        while t1.duration_since(t0) < CALIBRATION {
            t1 = Instant::now();
        }
        let c1 = ticks();
        let ns = t1.duration_since(t0).as_nanos() as f64;
        *r = ns / c1.saturating_sub(c0).max(1) as f64;
    }
    rates.sort_by(f64::total_cmp);
    let rate = rates[1];
    // A TSC slower than 10 MHz or faster than 100 GHz is not one to trust.
    (0.01..=100.0).contains(&rate).then_some(rate)
}

#[cfg(not(target_arch = "x86_64"))]
fn ticks() -> u64 {
    0
}

#[cfg(not(target_arch = "x86_64"))]
fn measure() -> Option<f64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_the_monotonic_clock() {
        let sw = Stopwatch::start();
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_millis(20));
        let ours = sw.elapsed_ns() as f64;
        let std = t0.elapsed().as_nanos() as f64;
        // Both measure the same interval give or take the reads themselves.
        assert!(
            (ours - std).abs() < std * 0.02 + 50_000.0,
            "{ours} vs {std}"
        );
    }

    #[test]
    fn never_runs_backwards() {
        let sw = Stopwatch::start();
        let mut last = 0;
        for _ in 0..10_000 {
            let e = sw.elapsed_ns();
            assert!(e >= last);
            last = e;
        }
    }
}

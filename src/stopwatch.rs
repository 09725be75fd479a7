//! Command durations (INFO commandstats, SLOWLOG) from the CPU's time-stamp counter.
//!
//! Every command is timed, and so is every `redis.call` inside a script: a failed Redisson
//! acquire reads the clock 8 times for that alone. Through the vDSO `clock_gettime` costs about
//! 30 ns a read on our (virtualised) EPYC and was the largest user-space symbol after the Lua
//! interpreter (2.5 % of the executor's CPU under `perf`); `rdtsc` costs about 11 ns. The TSC is
//! used only where the CPU says it ticks at a constant rate in every power state (CPUID
//! 0x8000_0007 EDX bit 8, "invariant TSC"), converted with a rate measured against the
//! monotonic clock at start-up; elsewhere this is `std::time::Instant`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Nanoseconds per TSC tick as measured at start-up, or None where the TSC is not usable.
static NS_PER_TICK: OnceLock<Option<f64>> = OnceLock::new();

/// The rate refined over the whole time since start-up (`refine`), as f64 bits; 0 until then.
/// Start-up's 1 ms measurements can be off by a preemption inside one of them (a few µs in a
/// millisecond, so a 250 ms command could read 249 ms); over seconds that error vanishes.
static REFINED: AtomicU64 = AtomicU64::new(0);

/// A tick and the monotonic instant it was read at, taken at start-up: the base `refine`
/// measures the rate from.
static ANCHOR: OnceLock<(u64, Instant)> = OnceLock::new();

/// How close the two clock reads around a tick must be for the pair to count as simultaneous.
const PAIR_SLACK: Duration = Duration::from_micros(20);

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
            Some(rate) => {
                let refined = REFINED.load(Ordering::Relaxed);
                let rate = if refined != 0 {
                    f64::from_bits(refined)
                } else {
                    rate
                };
                Stopwatch::Ticks(ticks(), rate)
            }
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

/// A tick with the monotonic instant half-way between two reads around it, when those reads
/// are within `PAIR_SLACK` of each other (no preemption in between).
fn paired() -> Option<(u64, Instant)> {
    let a = Instant::now();
    let tick = ticks();
    let b = Instant::now();
    let gap = b.duration_since(a);
    (gap <= PAIR_SLACK).then(|| (tick, a + gap / 2))
}

/// Measures the TSC rate again over the time since start-up (called from the cron): the
/// longer the base, the smaller the error a few microseconds of preemption make.
pub fn refine() {
    let Some(&(t0, i0)) = ANCHOR.get() else {
        return;
    };
    let Some((t1, i1)) = paired() else {
        return;
    };
    let ns = i1.duration_since(i0).as_nanos() as f64;
    if ns < 50e6 || t1 <= t0 {
        return;
    }
    let rate = ns / (t1 - t0) as f64;
    if (0.01..=100.0).contains(&rate) {
        REFINED.store(rate.to_bits(), Ordering::Relaxed);
    }
}

#[cfg(target_arch = "x86_64")]
fn measure() -> Option<f64> {
    if !invariant_tsc() {
        return None;
    }
    if let Some(anchor) = (0..100).find_map(|_| paired()) {
        let _ = ANCHOR.set(anchor);
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
    fn the_refined_rate_agrees_with_the_monotonic_clock_closely() {
        calibrate();
        std::thread::sleep(Duration::from_millis(60));
        refine();
        let sw = Stopwatch::start();
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_millis(100));
        let ours = sw.elapsed_ns() as f64;
        let std = t0.elapsed().as_nanos() as f64;
        // The refined rate's error is the reads' slack over the base (≥ 50 ms): well under
        // 0.1 %, where the start-up rate alone may be off by more.
        assert!(
            (ours - std).abs() < std * 0.001 + 50_000.0,
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

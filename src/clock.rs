//! Wall-clock reads. The state machine takes `now` from its caller; these are for the loop that
//! calls it, and for the few replies that report the time itself (TIME, CLIENT LIST ages).
//!
//! Every read adds a process-wide offset, zero unless a test set it with `DEBUG CLOCK-OFFSET`
//! (only reachable with `enable-debug-command`): it makes one node's clock run ahead of or
//! behind another's, which the failover tests need to prove deadlines survive clock skew.
//! Deadlines taken from these reads (keys, blocked clients) move with it; `Instant`-based
//! timers (the cron period, busy-script time) do not.

use std::sync::atomic::{AtomicI64, Ordering};

/// Milliseconds added to every wall-clock read. A relaxed load: nothing else is published
/// through it, and a read racing a change may see either value, as with a clock being set.
static OFFSET_MS: AtomicI64 = AtomicI64::new(0);

/// The largest offset accepted either way (about 100 years): a clock moved that far stays
/// far from 0 and from where `now + ttl` arithmetic could overflow.
pub const MAX_OFFSET_MS: i64 = 100 * 366 * 24 * 3600 * 1000;

/// Sets the offset; false (and unchanged) when it is beyond `MAX_OFFSET_MS`.
pub fn set_offset_ms(ms: i64) -> bool {
    if !(-MAX_OFFSET_MS..=MAX_OFFSET_MS).contains(&ms) {
        return false;
    }
    OFFSET_MS.store(ms, Ordering::Relaxed);
    true
}

pub fn offset_ms() -> i64 {
    OFFSET_MS.load(Ordering::Relaxed)
}

/// `CLOCK_REALTIME` as (seconds, nanoseconds), 0 before 1970. Read directly: every command
/// reads it, and `SystemTime::now().duration_since(UNIX_EPOCH)` with its u128 conversion cost
/// ~90 instructions around the vDSO call (callgrind per pipelined GET).
#[inline]
fn realtime() -> (u64, u64) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given and nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    if rc != 0 || ts.tv_sec < 0 {
        return (0, 0);
    }
    (ts.tv_sec as u64, ts.tv_nsec as u64)
}

pub fn unix_ms() -> u64 {
    let (s, ns) = realtime();
    (s * 1000 + ns / 1_000_000).saturating_add_signed(offset_ms())
}

/// The wall clock at a command's start, from the time-stamp counter its stopwatch already
/// read (`Stopwatch::tsc`: the tick and ns per tick). The realtime clock is read once a
/// millisecond (`REFRESH_NS`) and the ticks since then are added to it: a pipelined GET spent
/// ~3.5 % of the server's CPU in the vDSO's `clock_gettime` (perf); this is a
/// subtraction and a multiply. A step of the system clock shows within that millisecond, as it
/// would in the next read. Deadlines are stamped with this clock, so a TSC rate that is off
/// (a calibration disturbed by preemption) must not move it: each refresh compares the ticks'
/// span with the realtime clock's, and after `MAX_STRIKES` disagreements of more than 1 % the
/// thread reads the realtime clock every time. Where the TSC is not used (None) this is
/// `unix_ms`.
pub fn unix_ms_at(tsc: Option<(u64, f64)>) -> u64 {
    use std::cell::Cell;
    /// How long a reading of the realtime clock is extended with ticks.
    const REFRESH_NS: f64 = 1_000_000.0;
    /// Disagreements (a mis-measured rate, or the system clock being stepped) before the ticks
    /// are no longer trusted on this thread.
    const MAX_STRIKES: u32 = 3;
    thread_local! {
        /// (realtime in ns, the tick it was read at), of the last reading on this thread.
        static BASE: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
        static STRIKES: Cell<u32> = const { Cell::new(0) };
        /// The ticks [from, to) of the last millisecond computed, and that millisecond: most
        /// commands fall in the one before them, and two compares beat the conversion.
        static MS: Cell<(u64, u64, u64)> = const { Cell::new((0, 0, 0)) };
    }
    let Some((tick, ns_per_tick)) = tsc else {
        return unix_ms();
    };
    let (from, to, ms) = MS.get();
    if tick >= from && tick < to {
        return ms.saturating_add_signed(offset_ms());
    }
    let (base_ns, base_tick) = BASE.get();
    let since = tick.wrapping_sub(base_tick) as f64 * ns_per_tick;
    let ns = if base_ns != 0 && tick >= base_tick && since < REFRESH_NS {
        base_ns + since as u64
    } else {
        let (s, ns) = realtime();
        let now_ns = s * 1_000_000_000 + ns;
        if base_ns != 0 && tick >= base_tick {
            let real = now_ns.saturating_sub(base_ns) as f64;
            if (since - real).abs() > real / 100.0 + 50_000.0 {
                STRIKES.set(STRIKES.get().saturating_add(1));
            }
        }
        if STRIKES.get() < MAX_STRIKES {
            BASE.set((now_ns, tick));
        }
        now_ns
    };
    let ms = ns / 1_000_000;
    if STRIKES.get() < MAX_STRIKES && ns_per_tick > 0.0 {
        let into = (ns % 1_000_000) as f64;
        let from = tick.saturating_sub((into / ns_per_tick) as u64);
        let to = tick.saturating_add(((1_000_000.0 - into) / ns_per_tick) as u64);
        MS.set((from, to, ms));
    }
    ms.saturating_add_signed(offset_ms())
}

pub fn unix_us() -> u64 {
    let (s, ns) = realtime();
    (s * 1_000_000 + ns / 1000).saturating_add_signed(offset_ms().saturating_mul(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    // The offset itself is exercised by tests/cluster/clock_offset.rs, in a server process of its
    // own: setting it here would move the clock under the library's other tests, which run
    // in this process at the same time.
    #[test]
    fn reads_agree_with_system_time() {
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let ms = unix_ms();
        let us = unix_us();
        assert!(ms >= before && ms - before < 1000, "{ms} vs {before}");
        assert!(us / 1000 >= ms && us / 1000 - ms < 1000, "{us} vs {ms}");
    }

    /// The TSC-extended clock stays with the realtime clock, within a reading and across the
    /// refreshes, and never reads from before the previous real reading.
    #[test]
    fn the_command_clock_follows_the_realtime_clock() {
        for i in 0..2000 {
            let before = unix_ms();
            let at = unix_ms_at(crate::stopwatch::Stopwatch::start().tsc());
            let after = unix_ms();
            assert!(before <= at + 1 && at <= after + 1, "{before} {at} {after}");
            if i % 200 == 0 {
                // Past the refresh interval: the next read takes a fresh base.
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
    }

    /// A mis-measured TSC rate (here ten times too slow, so a "millisecond" of ticks would
    /// last ten) is caught at the refreshes, and the thread then reads the realtime clock.
    #[test]
    fn a_wrong_tsc_rate_is_caught_and_no_longer_used() {
        let Some((_, rate)) = crate::stopwatch::Stopwatch::start().tsc() else {
            return; // no invariant TSC here: unix_ms_at is unix_ms already
        };
        std::thread::spawn(move || {
            let wrong = || {
                let (tick, _) = crate::stopwatch::Stopwatch::start().tsc().unwrap();
                unix_ms_at(Some((tick, rate / 10.0)))
            };
            for _ in 0..12 {
                wrong();
                std::thread::sleep(std::time::Duration::from_millis(12));
            }
            for _ in 0..200 {
                let before = unix_ms();
                let at = wrong();
                let after = unix_ms();
                assert!(before <= at && at <= after, "{before} {at} {after}");
                std::thread::sleep(std::time::Duration::from_micros(300));
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn offsets_beyond_the_bound_are_refused_and_leave_the_clock() {
        assert!(!set_offset_ms(MAX_OFFSET_MS + 1));
        assert!(!set_offset_ms(-MAX_OFFSET_MS - 1));
        assert!(!set_offset_ms(i64::MIN));
        assert_eq!(offset_ms(), 0);
        // The arithmetic at the bound cannot wrap either way.
        assert_eq!(5u64.saturating_add_signed(-MAX_OFFSET_MS), 0);
        assert!(u64::MAX.saturating_add_signed(MAX_OFFSET_MS.saturating_mul(1000)) == u64::MAX);
    }
}

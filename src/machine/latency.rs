//! Per-command latency histograms, Redis 7's latency tracking (`latency-tracking yes`, its
//! default): INFO latencystats' percentiles and LATENCY HISTOGRAM's power-of-two buckets.
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
    /// doubling, each named by its bound in whole µs (1, 2, 4 … 32, 65, 131 …), with the calls
    /// at or under it, listing only the bounds where that count grew.
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
                    out.push((bound_ns / 1000, cumulative));
                    listed = cumulative;
                }
                bound_ns *= 2;
            }
            cumulative += n;
        }
        if cumulative != listed {
            out.push((bound_ns / 1000, cumulative));
        }
        out
    }
}

/// `latency-tracking-info-percentiles` as INFO prints each: `p50`, `p99.9` (Redis's `%f` with
/// the trailing zeros cut).
pub fn percentile_label(p: f64) -> String {
    let s = format!("{p:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("p{s}")
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
}

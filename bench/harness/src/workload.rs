//! One lock client: take a random hot key, and inside the critical section read the key's fence
//! register and write it one higher; then release. Every call goes into the history.

use crate::history::{now_us, Kind, Op, Res};
use crate::targets::Session;
use std::time::{Duration, Instant};

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        // xorshift64*: plenty for picking keys and sleep lengths.
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

pub struct WorkCfg {
    pub keys: usize,
    pub ttl_ms: u64,
    pub hold_ms: (u64, u64),
    pub backoff_ms: (u64, u64),
    /// Every Nth time a client gets the lock of one of the first `long_hold_keys` keys it holds
    /// it for `long_hold_ms` (0: never). Short holds end long before any lease could expire, so
    /// only long ones can catch a lease that ends early (a new leader whose clock runs ahead).
    /// Only those keys (key 0; one per group on a sharded target): the others stay
    /// free-flowing, so that a stretch without any successful acquire measures the faults.
    pub long_hold_every: u64,
    pub long_hold_keys: usize,
    pub long_hold_ms: u64,
    pub until: Instant,
}

pub fn client_loop(id: usize, mut s: Box<dyn Session>, cfg: &WorkCfg, seed: u64) -> Vec<Op> {
    let mut rng = Rng::new(seed);
    let mut ops = Vec::new();
    let mut seq = 0u64;
    let mut got = vec![0u64; cfg.keys];
    let sleep_in = |rng: &mut Rng, (lo, hi): (u64, u64)| {
        std::thread::sleep(Duration::from_millis(lo + rng.below(hi - lo + 1)))
    };
    while Instant::now() < cfg.until {
        let key = rng.below(cfg.keys as u64) as usize;
        seq += 1;
        let token = (id as u64 + 1) << 32 | seq;
        let op = |kind, start, res, value| Op {
            client: id,
            kind,
            key,
            start,
            end: now_us(),
            res,
            value,
            token,
            ttl_ms: cfg.ttl_ms,
        };
        let t = now_us();
        let r = s.acquire(key, token, cfg.ttl_ms);
        ops.push(op(Kind::Acquire, t, r, 0));
        if r != Res::Ok {
            sleep_in(&mut rng, cfg.backoff_ms);
            continue;
        }
        let t = now_us();
        let (r, v) = s.read(key);
        ops.push(op(Kind::Read, t, r, v));
        if r == Res::Ok {
            let t = now_us();
            let w = s.write(key, v + 1);
            ops.push(op(Kind::Write, t, w, v + 1));
        }
        let long_held = key < cfg.long_hold_keys;
        if long_held {
            got[key] += 1;
        }
        if long_held && cfg.long_hold_every > 0 && got[key].is_multiple_of(cfg.long_hold_every) {
            std::thread::sleep(Duration::from_millis(cfg.long_hold_ms));
        } else {
            sleep_in(&mut rng, cfg.hold_ms);
        }
        let t = now_us();
        let r = s.release(key, token);
        ops.push(op(Kind::Release, t, r, 0));
        sleep_in(&mut rng, cfg.backoff_ms);
    }
    ops
}

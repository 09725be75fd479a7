//! Checkers over the history: double grants, lost acknowledged writes, linearizability of each
//! fence register (todc-utils' Wing-Gong-Lowe checker, with the register model written here),
//! and availability.

use crate::history::{Kind, Op, Res};
use crate::nemesis::FaultEvent;
use std::collections::{HashMap, HashSet};
use std::sync::mpsc;
use std::time::Duration;
use todc_utils::linearizability::history::{Action, History};
use todc_utils::linearizability::WGLChecker;
use todc_utils::specifications::Specification;

/// A client's own view of its lease: from the acquire's reply until it starts releasing, or
/// until `acquire start + ttl - margin`, whichever is first. The server started the lease no
/// earlier than the request was sent, so this window can only be shorter than the real one.
pub struct Hold {
    pub client: usize,
    pub key: usize,
    pub from: u64,
    pub to: u64,
}

pub fn holds(ops: &[Op], margin_us: u64) -> Vec<Hold> {
    let release_start: HashMap<u64, u64> = ops
        .iter()
        .filter(|o| o.kind == Kind::Release)
        .map(|o| (o.token, o.start))
        .collect();
    ops.iter()
        .filter(|o| o.kind == Kind::Acquire && o.res == Res::Ok)
        .map(|o| {
            let lease_end = (o.start + o.ttl_ms * 1000).saturating_sub(margin_us);
            let to = release_start
                .get(&o.token)
                .map_or(lease_end, |&r| r.min(lease_end));
            Hold {
                client: o.client,
                key: o.key,
                from: o.end,
                to,
            }
        })
        .filter(|h| h.to > h.from)
        .collect()
}

/// Pairs of holds of the same key by different clients whose windows overlap.
pub fn double_grants(holds: &[Hold]) -> (usize, Option<String>) {
    let mut by_key: HashMap<usize, Vec<&Hold>> = HashMap::new();
    for h in holds {
        by_key.entry(h.key).or_default().push(h);
    }
    let mut count = 0;
    let mut example = None;
    for (key, mut hs) in by_key {
        hs.sort_by_key(|h| h.from);
        let mut active: Vec<&Hold> = Vec::new();
        for h in hs {
            active.retain(|a| a.to > h.from);
            for a in &active {
                if a.client != h.client {
                    count += 1;
                    example.get_or_insert_with(|| {
                        format!(
                            "key {key}: client {} held [{:.3}, {:.3}] s while client {} held [{:.3}, {:.3}] s",
                            a.client,
                            a.from as f64 / 1e6,
                            a.to as f64 / 1e6,
                            h.client,
                            h.from as f64 / 1e6,
                            h.to as f64 / 1e6
                        )
                    });
                }
            }
            active.push(h);
        }
    }
    (count, example)
}

/// Acknowledged fence writes that a later read (started after the write's ack) saw go back to
/// a lower value: the write vanished or was rolled back.
pub fn lost_writes(ops: &[Op]) -> (usize, Option<String>) {
    let mut count = 0;
    let mut example = None;
    let keys: HashSet<usize> = ops.iter().map(|o| o.key).collect();
    for key in keys {
        let mut reads: Vec<(u64, u64)> = ops
            .iter()
            .filter(|o| o.key == key && o.kind == Kind::Read && o.res == Res::Ok)
            .map(|o| (o.start, o.value))
            .collect();
        reads.sort();
        // suffix_min[i] = (lowest value read by reads i.., when it started)
        let mut suffix_min = vec![(u64::MAX, 0u64); reads.len() + 1];
        for i in (0..reads.len()).rev() {
            suffix_min[i] = if reads[i].1 < suffix_min[i + 1].0 {
                (reads[i].1, reads[i].0)
            } else {
                suffix_min[i + 1]
            };
        }
        for w in ops
            .iter()
            .filter(|o| o.key == key && o.kind == Kind::Write && o.res == Res::Ok)
        {
            let i = reads.partition_point(|r| r.0 <= w.end);
            let (lowest, at) = suffix_min[i];
            if lowest < w.value {
                count += 1;
                example.get_or_insert_with(|| {
                    format!(
                        "key {key}: client {} wrote {} (acked at {:.3} s), a read started at {:.3} s returned {}",
                        w.client,
                        w.value,
                        w.end as f64 / 1e6,
                        at as f64 / 1e6,
                        lowest
                    )
                });
            }
        }
    }
    (count, example)
}

#[derive(Clone, Debug)]
pub enum RegOp {
    Read(u64),
    Write(u64),
}

/// The sequential specification of a fence register: starts at 0 (key absent); a read must
/// return the current value; a write sets it.
pub struct RegisterSpec;

impl Specification for RegisterSpec {
    type State = u64;
    type Operation = RegOp;
    fn init() -> u64 {
        0
    }
    fn apply(op: &RegOp, state: &u64) -> (bool, u64) {
        match op {
            RegOp::Read(v) => (v == state, *state),
            RegOp::Write(v) => (true, *v),
        }
    }
}

/// The register history of one key, as call/response actions in time order.
/// - Failed ops and reads without an answer did nothing observable: left out.
/// - A write with an unknown outcome may take effect at any time after its call: its response
///   goes at the end of the history (as Jepsen and Porcupine treat crashed ops). If no read ever
///   returned its value it is left out: placed last it changes nothing, so the history is
///   linearizable with it exactly when it is without it, and every such write doubles the search.
/// - At equal timestamps calls sort before responses, so ops that touch are taken as concurrent
///   (never a false violation from clock granularity).
pub fn register_actions(ops: &[Op], key: usize) -> Vec<(usize, Action<RegOp>)> {
    let read_values: HashSet<u64> = ops
        .iter()
        .filter(|o| o.key == key && o.kind == Kind::Read && o.res == Res::Ok)
        .map(|o| o.value)
        .collect();
    let mut ev: Vec<(u64, u8, usize, Action<RegOp>)> = Vec::new();
    let end = ops.iter().map(|o| o.end).max().unwrap_or(0) + 1;
    for (pid, o) in ops.iter().filter(|o| o.key == key).enumerate() {
        let (call, resp, at) = match (o.kind, o.res) {
            (Kind::Read, Res::Ok) => (RegOp::Read(o.value), RegOp::Read(o.value), o.end),
            (Kind::Write, Res::Ok) => (RegOp::Write(o.value), RegOp::Write(o.value), o.end),
            (Kind::Write, Res::Unknown) if read_values.contains(&o.value) => {
                (RegOp::Write(o.value), RegOp::Write(o.value), end)
            }
            _ => continue,
        };
        ev.push((o.start, 0, pid, Action::Call(call)));
        ev.push((at, 1, pid, Action::Response(resp)));
    }
    ev.sort_by_key(|e| (e.0, e.1));
    ev.into_iter().map(|(_, _, pid, a)| (pid, a)).collect()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lin {
    Yes,
    No,
    /// The search did not finish within its budget: no verdict.
    TimedOut,
}

/// Linearizability of every key's register, each checked on its own (linearizability is
/// local: the whole history is linearizable iff each object's is).
pub fn linearizable(ops: &[Op], keys: usize, budget: Duration) -> Vec<Lin> {
    (0..keys)
        .map(|key| {
            let actions = register_actions(ops, key);
            if actions.is_empty() {
                return Lin::Yes;
            }
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let ok =
                    WGLChecker::<RegisterSpec>::is_linearizable(History::from_actions(actions));
                let _ = tx.send(ok);
            });
            match rx.recv_timeout(budget) {
                Ok(true) => Lin::Yes,
                Ok(false) => Lin::No,
                Err(_) => Lin::TimedOut,
            }
        })
        .collect()
}

pub struct Availability {
    /// Longest stretch with no successful acquire that began during a fault window or
    /// in the quiet time after it, until the next fault.
    pub longest_after_fault_s: f64,
    /// Failed or unknown operations over all operations (busy locks are not failures).
    pub failed_fraction: f64,
}

pub fn availability(ops: &[Op], faults: &[FaultEvent], run_end: u64) -> Availability {
    let mut ok: Vec<u64> = ops
        .iter()
        .filter(|o| o.kind == Kind::Acquire && o.res == Res::Ok)
        .map(|o| o.end)
        .collect();
    ok.sort();
    let mut longest = 0u64;
    for (i, f) in faults.iter().enumerate() {
        let until = faults.get(i + 1).map_or(run_end, |n| n.start).max(f.start);
        let mut last = f.start;
        for &t in ok
            .iter()
            .filter(|&&t| t > f.start && t <= until)
            .chain(std::iter::once(&until))
        {
            longest = longest.max(t - last);
            last = t;
        }
    }
    let failed = ops
        .iter()
        .filter(|o| matches!(o.res, Res::Fail | Res::Unknown))
        .count();
    Availability {
        longest_after_fault_s: longest as f64 / 1e6,
        failed_fraction: failed as f64 / ops.len().max(1) as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(client: usize, kind: Kind, start: u64, end: u64, res: Res, value: u64, token: u64) -> Op {
        Op {
            client,
            kind,
            key: 0,
            start,
            end,
            res,
            value,
            token,
            ttl_ms: 1000,
        }
    }

    #[test]
    fn overlapping_holds_are_double_grants_and_sequential_ones_are_not() {
        let ops = vec![
            op(0, Kind::Acquire, 0, 10, Res::Ok, 0, 1),
            op(0, Kind::Release, 500, 510, Res::Ok, 0, 1),
            op(1, Kind::Acquire, 520, 530, Res::Ok, 0, 2),
            op(1, Kind::Release, 900, 910, Res::Ok, 0, 2),
        ];
        assert_eq!(double_grants(&holds(&ops, 0)).0, 0);
        let ops = vec![
            op(0, Kind::Acquire, 0, 10, Res::Ok, 0, 1),
            op(1, Kind::Acquire, 100, 110, Res::Ok, 0, 2),
        ];
        assert_eq!(double_grants(&holds(&ops, 0)).0, 1);
        // The first lease ran out (1000 ms) before the second acquire: no overlap.
        let ops = vec![
            op(0, Kind::Acquire, 0, 10, Res::Ok, 0, 1),
            op(1, Kind::Acquire, 1_000_000, 1_000_010, Res::Ok, 0, 2),
        ];
        assert_eq!(double_grants(&holds(&ops, 0)).0, 0);
    }

    #[test]
    fn a_read_below_an_acked_write_is_a_lost_write_and_not_linearizable() {
        let ops = vec![
            op(0, Kind::Write, 0, 10, Res::Ok, 1, 0),
            op(0, Kind::Write, 20, 30, Res::Ok, 2, 0),
            op(1, Kind::Read, 40, 50, Res::Ok, 1, 0),
        ];
        assert_eq!(lost_writes(&ops).0, 1);
        assert_eq!(linearizable(&ops, 1, Duration::from_secs(5)), vec![Lin::No]);
        let ops = vec![
            op(0, Kind::Write, 0, 10, Res::Ok, 1, 0),
            op(1, Kind::Read, 5, 50, Res::Ok, 0, 0),
            op(1, Kind::Read, 60, 70, Res::Ok, 1, 0),
        ];
        assert_eq!(lost_writes(&ops).0, 0);
        assert_eq!(
            linearizable(&ops, 1, Duration::from_secs(5)),
            vec![Lin::Yes]
        );
    }

    #[test]
    fn an_unknown_write_may_land_late_but_not_before_its_call() {
        let ops = vec![
            op(0, Kind::Write, 0, 10, Res::Ok, 1, 0),
            op(2, Kind::Write, 20, 30, Res::Unknown, 5, 0),
            op(1, Kind::Read, 100, 110, Res::Ok, 1, 0),
            op(1, Kind::Read, 200, 210, Res::Ok, 5, 0),
        ];
        assert_eq!(
            linearizable(&ops, 1, Duration::from_secs(5)),
            vec![Lin::Yes]
        );
        let ops = vec![
            op(1, Kind::Read, 0, 10, Res::Ok, 5, 0),
            op(2, Kind::Write, 20, 30, Res::Unknown, 5, 0),
        ];
        assert_eq!(linearizable(&ops, 1, Duration::from_secs(5)), vec![Lin::No]);
    }

    #[test]
    fn an_unknown_write_nobody_read_is_left_out_and_one_somebody_read_is_kept() {
        let ops = vec![
            op(0, Kind::Write, 0, 10, Res::Ok, 1, 0),
            op(2, Kind::Write, 20, 30, Res::Unknown, 7, 0),
            op(3, Kind::Write, 20, 30, Res::Fail, 8, 0),
            op(1, Kind::Read, 40, 50, Res::Ok, 1, 0),
        ];
        assert_eq!(register_actions(&ops, 0).len(), 4);
        let ops = vec![
            op(2, Kind::Write, 20, 30, Res::Unknown, 7, 0),
            op(1, Kind::Read, 40, 50, Res::Ok, 7, 0),
        ];
        let acts = register_actions(&ops, 0);
        assert_eq!(acts.len(), 4);
        // Its response is moved past every other event.
        assert!(matches!(
            acts.last(),
            Some((_, Action::Response(RegOp::Write(7))))
        ));
    }

    #[test]
    fn unavailability_is_the_longest_gap_between_successful_acquires_after_a_fault() {
        let ok = |end| op(0, Kind::Acquire, end - 1, end, Res::Ok, 0, end);
        let ops = vec![ok(5), ok(1_000), ok(4_000), ok(4_500), ok(9_000)];
        let faults = [FaultEvent {
            fault: crate::nemesis::Fault::PauseLeader,
            node: 0,
            start: 900,
            end: 2_000,
            detail: String::new(),
        }];
        let a = availability(&ops, &faults, 10_000);
        // From the fault's start: 900 -> 1000 -> 4000 -> 4500 -> 9000 -> 10000: longest 4500 µs.
        assert_eq!(a.longest_after_fault_s, 0.0045);
        assert_eq!(a.failed_fraction, 0.0);
    }
}

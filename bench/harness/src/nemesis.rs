//! Faults on a schedule: quiet, fault, heal, quiet, ...

use crate::history::now_us;
use crate::netns;
use crate::targets::Target;
use crate::workload::Rng;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Fault {
    /// SIGKILL the leader/primary, restart it after the hold time.
    KillLeader,
    /// SIGKILL a follower/replica, restart it after the hold time.
    KillFollower,
    /// SIGSTOP the leader for longer than the failover timeout, then SIGCONT.
    PauseLeader,
    /// Cut the leader and a third of the clients off from the rest, then heal.
    PartitionLeader,
    /// Move a follower's wall clock by up to the configured bound either way and make it the
    /// leader (it then expires the locks the old leader granted by its own clock); afterwards
    /// hand leadership away again and put the clock back while the node is a follower.
    ClockOffset,
    /// Move the slot range holding a workload key to another group (`RAFT RESHARD` on the
    /// range's leader), or back to the group it started in, and wait until a majority of the
    /// nodes show the new owner.
    Reshard,
    /// The same, and the importing group's leader killed right after the release was
    /// accepted (restarted after the hold): the group's next leader makes the import.
    ReshardKill,
}

impl Fault {
    pub fn parse(s: &str) -> Option<Vec<Fault>> {
        Some(match s {
            "kill" => vec![Fault::KillLeader],
            "kill-follower" => vec![Fault::KillFollower],
            "pause" => vec![Fault::PauseLeader],
            "partition" => vec![Fault::PartitionLeader],
            "clock" => vec![Fault::ClockOffset],
            "reshard" => vec![Fault::Reshard, Fault::ReshardKill],
            "none" => vec![],
            // The clock fault is dropped again for targets that cannot move a node's clock,
            // the reshard faults for those without slots.
            "mixed" => vec![
                Fault::KillLeader,
                Fault::PauseLeader,
                Fault::PartitionLeader,
                Fault::KillFollower,
                Fault::ClockOffset,
                Fault::Reshard,
                Fault::ReshardKill,
            ],
            _ => return None,
        })
    }
    /// How long the fault is held (a reshard: about how long the move takes; it ends once a
    /// majority shows the new owner).
    pub fn hold(self) -> Duration {
        match self {
            Fault::KillLeader | Fault::KillFollower | Fault::ReshardKill => Duration::from_secs(4),
            Fault::PauseLeader | Fault::ClockOffset => Duration::from_secs(4),
            Fault::PartitionLeader => Duration::from_secs(6),
            Fault::Reshard => Duration::from_secs(1),
        }
    }
}

pub struct FaultEvent {
    pub fault: Fault,
    pub node: usize,
    pub start: u64,
    pub end: u64,
    /// What else the fault log should say (the clock offset, who led).
    pub detail: String,
}

pub struct NemesisCfg<'a> {
    pub prefix: &'a str,
    pub clients: usize,
    /// Clients that sit with the leader during a partition.
    pub minority_clients: Vec<usize>,
    pub faults: Vec<Fault>,
    /// Clock offsets are drawn from ±[100, clock_max_ms].
    pub clock_max_ms: u64,
    pub quiet: Duration,
    pub until: Instant,
    /// The workload's keys (each reshard fault moves a random one's slot).
    pub keys: usize,
}

/// The faults injected, and those that could not be (a run with any is a harness error: it
/// would otherwise count a fault that never happened).
pub fn run(target: &mut dyn Target, cfg: &NemesisCfg, seed: u64) -> (Vec<FaultEvent>, Vec<String>) {
    let mut rng = Rng::new(seed ^ 0xfa17);
    let mut events = Vec::new();
    let mut errors = Vec::new();
    let nodes = target.nodes();
    if cfg.faults.is_empty() {
        std::thread::sleep(cfg.until.saturating_duration_since(Instant::now()));
        return (events, errors);
    }
    std::thread::sleep(cfg.quiet);
    let mut round = 0usize;
    loop {
        let fault = cfg.faults[round % cfg.faults.len()];
        // Several groups: each fault aims at one group's leadership, the groups in turn.
        let groups = target.groups();
        let group = round % groups;
        round += 1;
        if Instant::now() + fault.hold() + Duration::from_secs(1) > cfg.until {
            break;
        }
        let Some(leader) = target.group_leader(group) else {
            std::thread::sleep(Duration::from_secs(1));
            continue;
        };
        // The clock fault also picks a follower: moving the leader's own clock would be a jump
        // of the clock its leases run on, which no lease survives; the promise is about clocks
        // that differ between nodes.
        // With several groups every node leads one, so no node's clock may move while it leads
        // (that would be a jump of a leader's own clock): the sharded clock fault takes the
        // node a group's leadership settles on, moves its clock while it is cut off and leads
        // nothing, and lets it win the group back (`sharded_clock`).
        let on_follower = match fault {
            Fault::KillFollower => true,
            Fault::ClockOffset => groups == 1,
            _ => false,
        };
        let preferred = target.preferred_leader(group);
        let mut node = if fault == Fault::ClockOffset && groups > 1 && preferred.is_some() {
            // The node the group's leadership goes back to once it is up.
            preferred.unwrap_or(leader)
        } else if on_follower && nodes > 1 {
            let others: Vec<usize> = (0..nodes).filter(|&n| n != leader).collect();
            others[rng.below(others.len() as u64) as usize]
        } else {
            leader
        };
        let start = now_us();
        let mut detail = if groups > 1 {
            format!("group {group} led by node {leader}; ")
        } else {
            String::new()
        };
        let mut injected = true;
        match fault {
            Fault::Reshard | Fault::ReshardKill => {
                // A random key: one away from its first group goes back there.
                let key = rng.below(cfg.keys as u64) as usize;
                match reshard(target, &mut rng, key, fault == Fault::ReshardKill) {
                    Ok(r) => {
                        node = r.node;
                        detail = r.detail;
                        if let Some(e) = r.problem {
                            errors.push(e);
                        }
                    }
                    Err(e) => {
                        errors.push(format!("reshard: {e}"));
                        injected = false;
                    }
                }
            }
            Fault::KillLeader | Fault::KillFollower => target.kill(node),
            Fault::ClockOffset if groups > 1 => {
                let ms = clock_offset_ms(&mut rng, cfg.clock_max_ms);
                match sharded_clock(target, cfg, node, group, ms) {
                    Ok(d) => detail.push_str(&d),
                    Err(e) => {
                        errors.push(format!("clock offset: {e}"));
                        injected = false;
                    }
                }
            }
            Fault::ClockOffset => {
                let f = node;
                let ms = clock_offset_ms(&mut rng, cfg.clock_max_ms);
                if let Err(e) = target.clock_offset(f, ms) {
                    errors.push(format!("clock offset: {e}"));
                    injected = false;
                } else {
                    // The transfer's reply can be lost when it succeeds: the old leader closes
                    // its clients as it steps down. Who leads afterwards is what counts; a node
                    // that stays a follower still has a clock that is off.
                    let sent = target.transfer(f);
                    let got = poll_leader(target, Duration::from_secs(3), |l| l == f);
                    detail = format!("node {f} clock {ms:+} ms, leader {leader} -> {got:?}");
                    if let Err(e) = sent {
                        detail.push_str(&format!(" (transfer: {e})"));
                    }
                }
            }
            Fault::PauseLeader => target.pause(node),
            Fault::PartitionLeader => {
                if let Err(e) = netns::partition(
                    cfg.prefix,
                    nodes,
                    cfg.clients,
                    &[node],
                    &cfg.minority_clients,
                ) {
                    errors.push(format!("partition: {e}"));
                    injected = false;
                }
            }
        }
        if !matches!(fault, Fault::Reshard | Fault::ReshardKill) {
            // A reshard holds itself: the move ends when a majority shows it.
            std::thread::sleep(fault.hold());
        }
        match fault {
            Fault::Reshard | Fault::ReshardKill => {}
            Fault::KillLeader | Fault::KillFollower => {
                if let Err(e) = target.restart(node) {
                    errors.push(format!("restart of node {node}: {e}"));
                }
            }
            Fault::PauseLeader => target.resume(node),
            Fault::PartitionLeader => netns::heal(cfg.prefix, nodes),
            Fault::ClockOffset if groups > 1 => {
                if injected {
                    detail.push_str(&format!("; {}", sharded_clock_heal(target, cfg, node)));
                }
            }
            Fault::ClockOffset => {
                if let Some(note) = heal_clock(target, node, nodes) {
                    detail.push_str(&format!("; {note}"));
                }
            }
        }
        eprintln!(
            "nemesis: {fault:?} on node {node} ({:.1} s){}{}",
            (now_us() - start) as f64 / 1e6,
            if detail.is_empty() { "" } else { ": " },
            detail.trim_end_matches("; "),
        );
        if injected {
            events.push(FaultEvent {
                fault,
                node,
                start,
                end: now_us(),
                detail: detail.trim_end_matches("; ").to_string(),
            });
        }
        std::thread::sleep(cfg.quiet);
    }
    (events, errors)
}

fn poll_leader(
    target: &dyn Target,
    within: Duration,
    want: impl Fn(usize) -> bool,
) -> Option<usize> {
    let end = Instant::now() + within;
    loop {
        let l = target.leader();
        if l.is_some_and(&want) || Instant::now() >= end {
            return l;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Puts node `f`'s clock back. Only while it follows: resetting a leader's clock would move
/// the clock its own leases run on (a negative offset put back is a jump forward, which ends
/// every lease it granted early), which is outside any lease's promise. If it still leads
/// after a transfer it is killed and restarted, which starts it with a true clock.
fn heal_clock(target: &mut dyn Target, f: usize, nodes: usize) -> Option<String> {
    let mut note = None;
    if poll_leader(target, Duration::from_secs(3), |_| true) == Some(f) {
        let to = (f + 1) % nodes;
        let _ = target.transfer(to);
        if poll_leader(target, Duration::from_secs(3), |l| l != f) == Some(f) {
            target.kill(f);
            let _ = target.restart(f);
            return Some(format!(
                "node {f} still led after a transfer: killed and restarted"
            ));
        }
        note = Some(format!("leadership handed from node {f}"));
    }
    if let Err(e) = target.clock_offset(f, 0) {
        eprintln!("nemesis: clock reset: {e}");
        // A node we cannot reach to reset keeps its offset until it restarts.
        target.kill(f);
        let _ = target.restart(f);
        return Some(format!("clock reset failed ({e}): killed and restarted"));
    }
    note
}

/// A clock offset of ±[100, max] ms (random sign and size).
fn clock_offset_ms(rng: &mut Rng, max: u64) -> i64 {
    let lo = 100.min(max);
    let mag = (lo + rng.below(max - lo + 1)) as i64;
    if rng.below(2) == 0 {
        mag
    } else {
        -mag
    }
}

/// Cuts node `f` off alone (no clients) until, by its own view, it leads no group (a leader
/// cut off from its majority steps down within an election timeout). Ok: it is still cut off,
/// for the caller to heal; Err: it still led after `within`, and the cut is healed.
fn isolate_until_leading_nothing(
    target: &dyn Target,
    cfg: &NemesisCfg,
    f: usize,
    within: Duration,
) -> Result<(), String> {
    let nodes = target.nodes();
    if let Err(e) = netns::partition(cfg.prefix, nodes, cfg.clients, &[f], &[]) {
        netns::heal(cfg.prefix, nodes);
        return Err(e);
    }
    let end = Instant::now() + within;
    loop {
        if target.led_by(f).is_some_and(|g| g.is_empty()) {
            return Ok(());
        }
        if Instant::now() >= end {
            netns::heal(cfg.prefix, nodes);
            return Err(format!(
                "node {f} still led {:?} after {within:?} cut off",
                target.led_by(f)
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The clock fault with several groups: node `f` (group `g`'s preferred leader) is cut off
/// until it leads nothing, its clock is moved while it follows, and once the cut heals it takes
/// group `g` back: it now expires, by a clock `ms` off, the locks that the interim leader
/// granted. A leader hands leadership to the preferred node once per term, so if that try fell
/// while `f` was still cut off, the interim leader is killed (and restarted a second later):
/// the next term's leader, `f` or the node that hands it over, is `f`.
fn sharded_clock(
    target: &mut dyn Target,
    cfg: &NemesisCfg,
    f: usize,
    g: usize,
    ms: i64,
) -> Result<String, String> {
    let t = Instant::now();
    isolate_until_leading_nothing(target, cfg, f, Duration::from_secs(6))?;
    let stepped_down = t.elapsed();
    let set = target.clock_offset(f, ms);
    netns::heal(cfg.prefix, target.nodes());
    set?;
    let healed = Instant::now();
    let mut leaders = vec![];
    let mut killed = String::new();
    while healed.elapsed() < Duration::from_secs(8) {
        leaders = target.group_leaders();
        if leaders.get(g) == Some(&Some(f)) {
            break;
        }
        if killed.is_empty() && healed.elapsed() > Duration::from_secs(2) {
            if let Some(Some(l)) = leaders.get(g).copied().filter(|l| *l != Some(f)) {
                target.kill(l);
                std::thread::sleep(Duration::from_secs(1));
                let _ = target.restart(l);
                killed = format!(" (its interim leader, node {l}, killed and restarted)");
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(format!(
        "cut off {:.1} s until it led nothing, clock {ms:+} ms, then group leaders {leaders:?} after {:.1} s{killed}",
        stepped_down.as_secs_f64(),
        healed.elapsed().as_secs_f64()
    ))
}

/// Puts node `f`'s clock back while it leads nothing (cut off again until it steps down); if
/// that fails, kills and restarts it (a restarted process starts with a true clock).
fn sharded_clock_heal(target: &mut dyn Target, cfg: &NemesisCfg, f: usize) -> String {
    let reset =
        isolate_until_leading_nothing(target, cfg, f, Duration::from_secs(6)).and_then(|()| {
            let r = target.clock_offset(f, 0);
            netns::heal(cfg.prefix, target.nodes());
            r
        });
    match reset {
        Ok(()) => "clock put back while it led nothing".to_string(),
        Err(e) => {
            eprintln!("nemesis: clock reset: {e}");
            target.kill(f);
            let _ = target.restart(f);
            format!("clock reset failed ({e}): killed and restarted")
        }
    }
}

pub struct Reshard {
    /// The node that accepted `RAFT RESHARD` (the source group's leader).
    pub node: usize,
    pub detail: String,
    /// A move that a majority did not show within its bound (the release was logged).
    pub problem: Option<String>,
}

/// How long a majority may take to show a move's new owner.
const RESHARD_BOUND: Duration = Duration::from_secs(15);

/// Moves the slot of workload key `key` (with up to 0, 8 or 200 slots either side that its
/// group owns, never a pinned slot) to another group if it is in the group it started in,
/// else back there; with `kill`, the importing group's leader is SIGKILLed right after the
/// release was accepted and restarted `ReshardKill`'s hold later. Returns once a majority of
/// the nodes shows the new owner (their own table and their CLUSTER SLOTS), or after
/// `RESHARD_BOUND`.
fn reshard(
    target: &mut dyn Target,
    rng: &mut Rng,
    key: usize,
    kill: bool,
) -> Result<Reshard, String> {
    let slot = target.key_slot(key).ok_or("the target has no slots")?;
    let owners = target
        .slot_owners()
        .ok_or("fewer than two nodes answered RAFT STATUS")?;
    let from = owners[usize::from(slot)];
    let home = target.home_group(key);
    let groups = target.groups();
    if from >= groups {
        return Err(format!("no node's table gives slot {slot} a group"));
    }
    let to = if from != home {
        home
    } else {
        let others: Vec<usize> = (0..groups).filter(|&g| g != from).collect();
        others[rng.below(others.len() as u64) as usize]
    };
    let width = [0u16, 8, 200][rng.below(3) as usize];
    let pinned = target.pinned_slots();
    let movable = |s: u16| owners[usize::from(s)] == from && !pinned.contains(&s);
    let (mut first, mut last) = (slot, slot);
    while first > 0 && slot - first < width && movable(first - 1) {
        first -= 1;
    }
    while last < 16383 && last - slot < width && movable(last + 1) {
        last += 1;
    }
    // Asked before the move, so that the kill follows the accepted release at once.
    let importer = if kill { target.group_leader(to) } else { None };
    let (node, sent) = target.reshard(first, last, from, to, Duration::from_secs(10))?;
    let t = Instant::now();
    let mut detail = format!(
        "key {key} (slot {slot}): slots {first}-{last} group {from} -> {to} on node {node}: {sent}"
    );
    let mut killed = None;
    if kill {
        match importer {
            Some(n) => {
                target.kill(n);
                killed = Some(n);
                detail.push_str(&format!("; group {to}'s leader, node {n}, killed"));
            }
            None => detail.push_str(&format!("; group {to} had no leader to kill")),
        }
    }
    let mut shown = target.showing_owner(first, last, to);
    while shown < 2 && t.elapsed() < RESHARD_BOUND {
        std::thread::sleep(Duration::from_millis(100));
        shown = target.showing_owner(first, last, to);
    }
    let took = t.elapsed();
    let problem = if shown >= 2 {
        detail.push_str(&format!(
            "; a majority shows group {to} after {:.1} s",
            took.as_secs_f64()
        ));
        None
    } else {
        detail.push_str(&format!(
            "; NOT shown by a majority after {:.1} s ({shown} node(s))",
            took.as_secs_f64()
        ));
        Some(format!(
            "reshard of slots {first}-{last} to group {to}: a majority did not show it within {RESHARD_BOUND:?}"
        ))
    };
    if let Some(n) = killed {
        std::thread::sleep(Fault::ReshardKill.hold().saturating_sub(t.elapsed()));
        match target.restart(n) {
            Ok(()) => detail.push_str(&format!("; node {n} restarted")),
            Err(e) => detail.push_str(&format!("; restart of node {n}: {e}")),
        }
    }
    Ok(Reshard {
        node,
        detail,
        problem,
    })
}

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
}

impl Fault {
    pub fn parse(s: &str) -> Option<Vec<Fault>> {
        Some(match s {
            "kill" => vec![Fault::KillLeader],
            "kill-follower" => vec![Fault::KillFollower],
            "pause" => vec![Fault::PauseLeader],
            "partition" => vec![Fault::PartitionLeader],
            "none" => vec![],
            "mixed" => vec![
                Fault::KillLeader,
                Fault::PauseLeader,
                Fault::PartitionLeader,
                Fault::KillFollower,
            ],
            _ => return None,
        })
    }
    pub fn hold(self) -> Duration {
        match self {
            Fault::KillLeader | Fault::KillFollower => Duration::from_secs(4),
            Fault::PauseLeader => Duration::from_secs(4),
            Fault::PartitionLeader => Duration::from_secs(6),
        }
    }
}

pub struct FaultEvent {
    pub fault: Fault,
    pub node: usize,
    pub start: u64,
    pub end: u64,
}

pub struct NemesisCfg<'a> {
    pub prefix: &'a str,
    pub clients: usize,
    /// Clients that sit with the leader during a partition.
    pub minority_clients: Vec<usize>,
    pub faults: Vec<Fault>,
    pub quiet: Duration,
    pub until: Instant,
}

pub fn run(target: &mut dyn Target, cfg: &NemesisCfg, seed: u64) -> Vec<FaultEvent> {
    let mut rng = Rng::new(seed ^ 0xfa17);
    let mut events = Vec::new();
    let nodes = target.nodes();
    if cfg.faults.is_empty() {
        std::thread::sleep(cfg.until.saturating_duration_since(Instant::now()));
        return events;
    }
    std::thread::sleep(cfg.quiet);
    let mut round = 0usize;
    loop {
        let fault = cfg.faults[round % cfg.faults.len()];
        round += 1;
        if Instant::now() + fault.hold() + Duration::from_secs(1) > cfg.until {
            break;
        }
        let Some(leader) = target.leader() else {
            std::thread::sleep(Duration::from_secs(1));
            continue;
        };
        let node = if fault == Fault::KillFollower && nodes > 1 {
            let others: Vec<usize> = (0..nodes).filter(|&n| n != leader).collect();
            others[rng.below(others.len() as u64) as usize]
        } else {
            leader
        };
        let start = now_us();
        match fault {
            Fault::KillLeader | Fault::KillFollower => target.kill(node),
            Fault::PauseLeader => target.pause(node),
            Fault::PartitionLeader => {
                if let Err(e) = netns::partition(
                    cfg.prefix,
                    nodes,
                    cfg.clients,
                    &[node],
                    &cfg.minority_clients,
                ) {
                    eprintln!("nemesis: partition failed: {e}");
                }
            }
        }
        std::thread::sleep(fault.hold());
        match fault {
            Fault::KillLeader | Fault::KillFollower => {
                if let Err(e) = target.restart(node) {
                    eprintln!("nemesis: restart failed: {e}");
                }
            }
            Fault::PauseLeader => target.resume(node),
            Fault::PartitionLeader => netns::heal(cfg.prefix, nodes),
        }
        events.push(FaultEvent {
            fault,
            node,
            start,
            end: now_us(),
        });
        eprintln!(
            "nemesis: {fault:?} on node {node} ({:.1} s)",
            (now_us() - start) as f64 / 1e6
        );
        std::thread::sleep(cfg.quiet);
    }
    events
}

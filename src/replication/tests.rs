//! Clusters of `Cluster`s wired through an in-memory bus that can cut links: no sockets, no
//! sleeps. Time is `tick()`; every tick is followed by rounds until no message is in flight.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use raft::eraftpb::{ConfState, Entry, HardState};
use raft::Storage;

use super::*;

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "deadbolt-raft-{}-{name}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Got {
    Snapshot(Vec<u8>),
    Unit(Vec<u8>, bool),
    Extend(u64),
    Conf(Vec<u64>, Vec<u64>),
}

struct Node {
    /// None while the node is down.
    c: Option<Cluster>,
    dir: PathBuf,
    applied: Vec<(u64, Got)>,
    outcomes: Vec<Outcome>,
}

struct Net {
    nodes: BTreeMap<u64, Node>,
    queue: VecDeque<Message>,
    /// Directed links that drop everything.
    cut: BTreeSet<(u64, u64)>,
    peers: Addrs,
    root: TempDir,
}

fn addr(id: u64) -> String {
    format!("127.0.0.1 {} {}", 7000 + id, 17000 + id)
}

impl Net {
    fn new(n: u64) -> Net {
        let peers: Addrs = (1..=n).map(|id| (id, addr(id))).collect();
        let mut net = Net {
            nodes: BTreeMap::new(),
            queue: VecDeque::new(),
            cut: BTreeSet::new(),
            peers: peers.clone(),
            root: TempDir::new("net"),
        };
        for id in 1..=n {
            net.start(id, &peers);
        }
        net
    }

    fn start(&mut self, id: u64, peers: &Addrs) {
        let dir = self.root.0.join(id.to_string());
        let c = Cluster::open(&dir, id, peers).expect("open");
        self.nodes.insert(
            id,
            Node {
                c: Some(c),
                dir,
                applied: Vec::new(),
                outcomes: Vec::new(),
            },
        );
    }

    /// A crash: the process and its memory are gone, the files stay.
    fn crash(&mut self, id: u64) {
        self.nodes.get_mut(&id).expect("node").c = None;
    }

    fn restart(&mut self, id: u64) {
        let peers = self.peers.clone();
        let node = self.nodes.get_mut(&id).expect("node");
        node.c = Some(Cluster::open(&node.dir, id, &peers).expect("reopen"));
        node.applied.clear();
    }

    fn c(&mut self, id: u64) -> &mut Cluster {
        self.nodes
            .get_mut(&id)
            .and_then(|n| n.c.as_mut())
            .expect("node up")
    }

    fn isolate(&mut self, id: u64) {
        for &other in self.nodes.keys() {
            if other != id {
                self.cut.insert((id, other));
                self.cut.insert((other, id));
            }
        }
    }

    fn heal(&mut self) {
        self.cut.clear();
    }

    /// One round on every node, then delivery, until nothing is in flight. A leader's log
    /// writes (made by the writer thread beside the loop) are waited for before each round, so
    /// the rounds see them as the loop would once woken.
    fn settle(&mut self) {
        for _ in 0..50 {
            for node in self.nodes.values_mut() {
                let Some(c) = node.c.as_mut() else { continue };
                c.node.mut_store().drain().expect("drain");
                let queue = &mut self.queue;
                let applied = &mut node.applied;
                let outcome = c
                    .on_round(&mut |m| queue.push_back(m), &mut || {}, &mut |i, a| {
                        applied.push((i, got(a)))
                    })
                    .expect("round");
                if outcome != Outcome::default() {
                    node.outcomes.push(outcome);
                }
                if c.snapshot_wanted() {
                    let at = c.view().applied;
                    c.compact(at, format!("STATE@{at}").into_bytes(), 0, 0)
                        .expect("compact");
                }
            }
            let busy = self.nodes.values().any(|n| {
                n.c.as_ref()
                    .is_some_and(|c| c.node.store().in_flight() || c.node.has_ready())
            });
            if self.queue.is_empty() && !busy {
                return;
            }
            while let Some(m) = self.queue.pop_front() {
                if self.cut.contains(&(m.from, m.to)) {
                    continue;
                }
                if let Some(c) = self.nodes.get_mut(&m.to).and_then(|n| n.c.as_mut()) {
                    let _ = c.step(m);
                }
            }
        }
    }

    /// Ticks until `done` holds; false if it never did within `ticks`.
    fn run(&mut self, ticks: usize, done: impl Fn(&Net) -> bool) -> bool {
        for _ in 0..ticks {
            self.settle();
            if done(self) {
                return true;
            }
            for node in self.nodes.values_mut() {
                if let Some(c) = node.c.as_mut() {
                    c.tick();
                }
            }
        }
        self.settle();
        done(self)
    }

    fn leaders(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.c.as_ref().is_some_and(|c| c.is_leader()))
            .map(|(&id, _)| id)
            .collect()
    }

    fn elect(&mut self) -> u64 {
        assert!(self.run(200, |n| n.leaders().len() == 1), "no leader");
        self.leaders()[0]
    }

    fn units(&self, id: u64) -> Vec<Vec<u8>> {
        self.nodes[&id]
            .applied
            .iter()
            .filter_map(|(_, g)| match g {
                Got::Unit(d, _) => Some(d.clone()),
                _ => None,
            })
            .collect()
    }

    fn has_unit(&self, id: u64, data: &[u8]) -> bool {
        self.units(id).iter().any(|u| u == data)
    }
}

fn got(a: Applied) -> Got {
    match a {
        Applied::Snapshot(d) => Got::Snapshot(d.to_vec()),
        Applied::Unit { data, own } => Got::Unit(data.to_vec(), own),
        Applied::Extend(ms) => Got::Extend(ms),
        Applied::Conf(cs) => Got::Conf(cs.voters.clone(), cs.learners.clone()),
    }
}

fn unit(i: usize) -> Vec<u8> {
    format!(
        "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n{i}\r\n",
        i.to_string().len()
    )
    .into_bytes()
}

fn agree(n: u64) {
    let mut net = Net::new(n);
    let leader = net.elect();
    for i in 0..20 {
        assert_eq!(net.c(leader).propose_unit(unit(i)).map(|_| ()), Ok(()));
    }
    let at = net.c(leader).propose_extend(250).expect("extend");
    let want: Vec<_> = (0..20).map(unit).collect();
    assert!(net.run(50, |net| (1..=n).all(|id| net.units(id) == want)));
    for (&id, node) in &net.nodes {
        let own = node.applied.iter().filter_map(|(_, g)| match g {
            Got::Unit(_, own) => Some(*own),
            _ => None,
        });
        // Only the leader ran the units already; followers must apply them.
        assert!(own.into_iter().all(|o| o == (id == leader)), "node {id}");
        assert!(node.applied.contains(&(at, Got::Extend(250))), "node {id}");
        // Followers refuse proposals (they would run a unit the leader did not).
        if id != leader {
            assert!(node.c.as_ref().is_some_and(|c| !c.is_leader()));
        }
    }
    let follower = (1..=n).find(|&id| id != leader).expect("follower");
    assert!(net.c(follower).propose_unit(unit(99)).is_err());
    let v = net.c(leader).view();
    assert_eq!(
        (v.role, v.leader, v.commit),
        (StateRole::Leader, leader, at)
    );
    assert_eq!(v.members.len() as u64, n);
    assert!(v
        .members
        .iter()
        .all(|m| m.voter && m.matched == at && m.addr == addr(m.id)));
    assert_eq!(net.c(follower).view().leader, leader);
}

#[test]
fn three_nodes_elect_a_leader_and_apply_units_in_the_same_order() {
    agree(3);
}

#[test]
fn five_nodes_elect_a_leader_and_apply_units_in_the_same_order() {
    agree(5);
}

#[test]
fn partitioned_leader_steps_down_and_the_majority_entries_win() {
    let mut net = Net::new(3);
    let old = net.elect();
    net.c(old).propose_unit(unit(1)).expect("first");
    assert!(net.run(20, |net| (1..=3).all(|id| net.units(id).len() == 1)));
    net.isolate(old);
    // Still leader until check_quorum notices: the proposal is accepted, never committed.
    let lost = b"*1\r\n$4\r\nlost\r\n".to_vec();
    let lost_at = net.c(old).propose_unit(lost.clone()).expect("accepted");
    // A second one, so that the old leader's last proposal covers the index the new leader's
    // unit lands on: that entry is someone else's, whatever its index says.
    net.c(old).propose_unit(lost.clone()).expect("accepted");
    let ok = net.run(200, |net| {
        !net.nodes[&old].c.as_ref().is_some_and(|c| c.is_leader())
            && net.leaders().len() == 1
            && net.leaders()[0] != old
    });
    assert!(ok, "old leader kept leading or no new leader");
    assert!(net.nodes[&old].outcomes.iter().any(|o| o.stepped_down));
    assert!(net.c(old).commit() < lost_at);
    let new = net.leaders()[0];
    let won = b"*1\r\n$3\r\nwon\r\n".to_vec();
    net.c(new).propose_unit(won.clone()).expect("new leader");
    assert!(net.run(50, |net| net.has_unit(new, &won)));
    // The old leader, cut off, neither commits nor applies anything.
    assert!(!net.has_unit(old, &lost) && !net.has_unit(old, &won));
    net.heal();
    assert!(net.run(100, |net| net.has_unit(old, &won)));
    assert!(net.nodes[&old]
        .applied
        .iter()
        .any(|(_, g)| *g == Got::Unit(won.clone(), false)));
    for id in 1..=3 {
        assert!(!net.has_unit(id, &lost), "node {id} applied a lost unit");
        assert_eq!(net.units(id), vec![unit(1), won.clone()], "node {id}");
    }
}

#[test]
fn read_index_completes_with_a_quorum_and_not_on_an_isolated_leader() {
    let mut net = Net::new(3);
    let leader = net.elect();
    let seq = net.c(leader).need_read();
    let seq2 = net.c(leader).need_read();
    assert!(!net.c(leader).read_done(seq));
    assert!(net.run(5, |net| net.nodes[&leader]
        .c
        .as_ref()
        .is_some_and(|c| c.read_done(seq2))));
    net.isolate(leader);
    let seq3 = net.c(leader).need_read();
    // Even while it still believes it leads, no quorum confirms it.
    assert!(!net.run(60, |net| net.nodes[&leader]
        .c
        .as_ref()
        .is_some_and(|c| c.read_done(seq3))));
}

#[test]
fn a_followers_read_barrier_covers_what_the_leader_committed() {
    let mut net = Net::new(3);
    let leader = net.elect();
    let f = (1..=3).find(|&id| id != leader).expect("follower");
    // The follower misses an entry the other two commit.
    net.cut.insert((leader, f));
    let at = net.c(leader).propose_unit(unit(7)).expect("propose");
    assert!(net.run(20, |net| net.nodes[&leader]
        .c
        .as_ref()
        .is_some_and(|c| c.commit() >= at)));
    assert!(net.c(f).applied() < at);
    net.heal();
    // The leader's own barrier and the follower's carry the same sequence number: contexts
    // that did not name the node would collide on the leader and one would be dropped.
    let own = net.c(leader).need_read();
    let seq = net.c(f).need_read();
    assert_eq!(own, seq);
    assert!(net.run(20, |net| {
        let done = |id: u64| net.nodes[&id].c.as_ref().is_some_and(|c| c.read_done(seq));
        done(f) && done(leader)
    }));
    // Confirmed only once the follower applied what the leader had committed when asked.
    assert!(net.c(f).applied() >= at);
    // Cut off from every leader, a follower's barrier is never confirmed (asked again or not).
    net.isolate(f);
    let seq2 = net.c(f).need_read();
    for _ in 0..5 {
        net.c(f).reask_reads();
        assert!(!net.run(10, |net| net.nodes[&f]
            .c
            .as_ref()
            .is_some_and(|c| c.read_done(seq2))));
    }
    // Healed, an ask again is answered.
    net.heal();
    net.c(f).reask_reads();
    assert!(net.run(60, |net| net.nodes[&f]
        .c
        .as_ref()
        .is_some_and(|c| c.read_done(seq2))));
}

#[test]
fn restart_from_the_files_keeps_hard_state_and_log() {
    let mut net = Net::new(3);
    let leader = net.elect();
    for i in 0..5 {
        net.c(leader).propose_unit(unit(i)).expect("propose");
    }
    let want: Vec<_> = (0..5).map(unit).collect();
    assert!(net.run(20, |net| (1..=3).all(|id| net.units(id) == want)));
    let f = (1..=3).find(|&id| id != leader).expect("follower");
    let hs = net.c(f).node.store().hard_state();
    let last = net.c(f).node.store().last_index().expect("last");
    net.crash(f);
    // A write the crash cut short: a header that promises more than follows.
    let log = net.nodes[&f].dir.join("raft.log");
    let mut bytes = std::fs::read(&log).expect("log");
    // Written where the records end (zeros follow them, kept ahead of the log).
    let n = bytes.iter().rposition(|&b| b != 0).expect("records") + 1;
    let torn = [200, 0, 0, 0, 1, 2, 3, 4, 9, 9];
    if bytes.len() < n + torn.len() {
        bytes.resize(n + torn.len(), 0);
    }
    bytes[n..n + torn.len()].copy_from_slice(&torn);
    std::fs::write(&log, &bytes).expect("torn tail");
    net.restart(f);
    let store = net.c(f).node.store();
    assert_eq!(
        (store.hard_state().term, store.hard_state().vote),
        (hs.term, hs.vote)
    );
    assert_eq!(store.last_index().expect("last"), last);
    // Cut off, it restores its snapshot alone; the commit index on disk may be behind (it is
    // written with term and vote only), so the units come back once the leader says how far.
    net.isolate(f);
    net.settle();
    assert_eq!(
        net.nodes[&f].applied.first(),
        Some(&(1, Got::Snapshot(Vec::new())))
    );
    net.heal();
    assert!(net.run(20, |net| net.units(f) == want));
    let now = std::fs::read(&log).expect("log");
    assert_ne!(
        &now[n..n + torn.len()],
        &torn,
        "the torn record is still there"
    );
}

#[test]
fn log_replay_overwrites_a_later_term_drops_a_torn_tail_and_refuses_corruption() {
    let dir = TempDir::new("replay");
    let boot: Addrs = [(1, addr(1))].into_iter().collect();
    let entry = |index, term| Entry {
        index,
        term,
        data: format!("{index}@{term}").into_bytes().into(),
        ..Default::default()
    };
    {
        let mut s = LogStore::open(&dir.0, &boot).expect("open");
        s.append(&(2..=6).map(|i| entry(i, 1)).collect::<Vec<_>>())
            .expect("append");
        let hs = HardState {
            term: 2,
            vote: 1,
            commit: 3,
            ..Default::default()
        };
        s.set_hard_state(&hs);
        s.sync().expect("sync");
        // A new leader's entries replace 4..6 of the old term.
        s.append(&[entry(4, 2), entry(5, 2)]).expect("overwrite");
        s.sync().expect("sync");
    }
    let log = dir.0.join("raft.log");
    let mut good = std::fs::read(&log).expect("log");
    // The records, then the zeros kept ahead of them (the last record ends in its data). The
    // zeroing runs beside the writer and may not have reached past the records when the store
    // closed: space past the end reads as zeros all the same, so the test supplies it.
    let n = good.iter().rposition(|&b| b != 0).expect("records") + 1;
    if good.len() < n + 128 {
        good.resize(n + 128, 0);
    }
    let records = &good[..n];
    // A crash in the middle of the next write: part of a record where the zeros were.
    let mut torn = good.clone();
    torn[n..n + 5].copy_from_slice(&good[..5]);
    std::fs::write(&log, &torn).expect("torn");
    let s = LogStore::open(&dir.0, &Addrs::new()).expect("reopen");
    assert_eq!(s.last_index(), Ok(5));
    assert_eq!((s.term(3), s.term(4), s.term(5)), (Ok(1), Ok(2), Ok(2)));
    let hs = s.hard_state();
    assert_eq!((hs.term, hs.vote), (2, 1));
    drop(s);
    let now = std::fs::read(&log).expect("log");
    assert_eq!(&now[..n], records);
    assert!(now[n..].iter().all(|&b| b == 0), "torn tail zeroed");
    // The same torn write at the very end of a file without zeroed space.
    std::fs::write(&log, [records, &good[..5]].concat()).expect("torn at eof");
    let s = LogStore::open(&dir.0, &Addrs::new()).expect("reopen");
    assert_eq!(s.last_index(), Ok(5));
    drop(s);
    // Anything but zeros after the end of the records is damage, not free space.
    let mut after = good.clone();
    after[n + 100] = 1;
    std::fs::write(&log, &after).expect("data after the end");
    assert!(LogStore::open(&dir.0, &Addrs::new()).is_err());
    let good = records.to_vec();
    // One flipped byte in a record that is followed by others: an error, never a guess.
    let mut bad = good.clone();
    bad[10] ^= 0xff;
    std::fs::write(&log, &bad).expect("corrupt");
    assert!(LogStore::open(&dir.0, &Addrs::new()).is_err());
    std::fs::write(dir.0.join("raft.state"), b"nonsense").expect("state");
    std::fs::write(&log, &good).expect("log");
    assert!(LogStore::open(&dir.0, &Addrs::new()).is_err());
}

#[test]
fn compaction_then_a_lagging_node_catches_up_by_snapshot() {
    let mut net = Net::new(3);
    let leader = net.elect();
    let lag = (1..=3).find(|&id| id != leader).expect("follower");
    net.isolate(lag);
    for i in 0..10 {
        net.c(leader).propose_unit(unit(i)).expect("propose");
    }
    assert!(net.run(20, |net| net.units(leader).len() == 10));
    let applied = net.c(leader).view().applied;
    net.c(leader)
        .compact(applied, b"SNAPSHOT".to_vec(), 0, 0)
        .expect("compact");
    assert!(net
        .c(leader)
        .compact(applied + 5, Vec::new(), 0, 0)
        .is_err());
    net.heal();
    net.c(leader).propose_unit(unit(10)).expect("after");
    assert!(net.run(50, |net| net.has_unit(lag, &unit(10))));
    let got = &net.nodes[&lag].applied;
    assert!(got.contains(&(applied, Got::Snapshot(b"SNAPSHOT".to_vec()))));
    // What the snapshot covers is not applied again unit by unit.
    assert_eq!(net.units(lag), vec![unit(10)]);
    // And the installed snapshot survives a restart.
    net.crash(lag);
    net.restart(lag);
    net.isolate(lag);
    net.settle();
    assert_eq!(
        net.nodes[&lag].applied.first(),
        Some(&(applied, Got::Snapshot(b"SNAPSHOT".to_vec())))
    );
    assert!(net
        .c(lag)
        .view()
        .members
        .iter()
        .all(|m| m.addr == addr(m.id)));
    // Installing the snapshot emptied the old log: nothing it covers is replayed again.
    let dir = net.nodes[&lag].dir.clone();
    assert!(store::log_indexes(&dir).iter().all(|&i| i > applied));
}

#[test]
fn compaction_keeps_a_window_for_a_follower_briefly_behind() {
    let mut net = Net::new(3);
    let leader = net.elect();
    let lag = (1..=3).find(|&id| id != leader).expect("follower");
    net.isolate(lag);
    for i in 0..10 {
        net.c(leader).propose_unit(unit(i)).expect("propose");
    }
    assert!(net.run(20, |net| net.units(leader).len() == 10));
    let applied = net.c(leader).view().applied;
    let grown = net.c(leader).log_stats();
    assert!(grown.log_bytes > 0 && grown.oldest.is_some());
    assert!(net
        .c(leader)
        .compact(applied, b"SNAPSHOT".to_vec(), u64::MAX, u64::MAX)
        .expect("compact"));
    // One snapshot is written at a time.
    assert!(!net
        .c(leader)
        .compact(applied, b"OTHER".to_vec(), 0, 0)
        .expect("second"));
    net.c(leader).wait_compaction().expect("written");
    let after = net.c(leader).log_stats();
    assert_eq!(after.snapshot_index, applied);
    assert!(!after.compacting && after.oldest.is_none());
    // The leader's raft.log no longer holds what the snapshot covers.
    let dir = net.nodes[&leader].dir.clone();
    assert!(store::log_indexes(&dir).iter().all(|&i| i > applied));
    net.heal();
    net.c(leader).propose_unit(unit(10)).expect("after");
    assert!(net.run(50, |net| net.has_unit(lag, &unit(10))));
    // Caught up from the entries kept behind the snapshot, not from the snapshot.
    assert!(!net.nodes[&lag]
        .applied
        .iter()
        .any(|(_, g)| matches!(g, Got::Snapshot(d) if d == b"SNAPSHOT")));
    assert_eq!(net.units(lag), (0..=10).map(unit).collect::<Vec<_>>());
}

#[test]
fn add_learner_then_promote_then_remove() {
    let mut net = Net::new(3);
    let leader = net.elect();
    net.c(leader).propose_unit(unit(0)).expect("propose");
    // Node 4 starts empty, with no peers: it only learns the cluster from the leader.
    net.start(4, &Addrs::new());
    net.c(leader).add_learner(4, &addr(4)).expect("add learner");
    assert_eq!(
        net.c(leader).add_learner(5, &addr(5)),
        Err(raft::Error::ProposalDropped),
        "a second change before the first applied"
    );
    // unit(0) was applied before node 4 was known: it arrives inside a fresh snapshot.
    assert!(net
        .run(50, |net| net.nodes[&4].applied.iter().any(
            |(_, g)| matches!(g, Got::Snapshot(d) if d.starts_with(b"STATE@"))
        )));
    net.c(leader).propose_unit(unit(1)).expect("propose");
    assert!(net.run(50, |net| net.has_unit(4, &unit(1))));
    let v = net.c(4).view();
    assert!(v.members.contains(&Member {
        id: 4,
        addr: addr(4),
        voter: false,
        matched: 0,
        active: true,
    }));
    // The bootstrap snapshot told it where the voters are.
    assert!(v
        .members
        .iter()
        .filter(|m| m.voter)
        .all(|m| m.addr == addr(m.id)));
    net.c(leader).promote(4).expect("promote");
    assert!(net.run(50, |net| net.nodes[&4].applied.iter().any(
        |(_, g)| matches!(g, Got::Conf(v, l) if v.contains(&4) && l.is_empty())
    )));
    let removed = (1..=3).find(|&id| id != leader).expect("follower");
    net.c(leader).remove(removed).expect("remove");
    assert!(
        net.run(50, |net| net.nodes[&leader].c.as_ref().is_some_and(|c| c
            .view()
            .members
            .iter()
            .all(|m| m.id != removed)))
    );
    // With 1 gone, the remaining three voters commit without it.
    net.isolate(removed);
    net.c(leader).propose_unit(unit(2)).expect("propose");
    assert!(net.run(50, |net| net.has_unit(4, &unit(2))));
    assert!(!net.has_unit(removed, &unit(2)));
    let v = net.c(leader).view();
    assert_eq!(v.members.len(), 3);
    assert!(v.members.iter().all(|m| m.voter));
}

#[test]
fn transfer_leader_hands_over_to_the_named_voter() {
    let mut net = Net::new(3);
    let old = net.elect();
    net.c(old).propose_unit(unit(0)).expect("propose");
    assert!(net.run(20, |net| (1..=3).all(|id| net.has_unit(id, &unit(0)))));
    let to = (1..=3).find(|&id| id != old).expect("other");
    net.c(old).transfer_leader(to);
    assert!(net.run(30, |net| net.leaders() == vec![to]));
    assert!(net.nodes[&old].outcomes.iter().any(|o| o.stepped_down));
    assert!(net.nodes[&to].outcomes.iter().any(|o| o.became_leader));
    assert_eq!(net.c(old).view().leader, to);
}

#[test]
fn a_crash_between_snapshot_install_and_state_write_keeps_the_snapshot_membership() {
    let dir = TempDir::new("install");
    let boot: Addrs = (1..=3).map(|id| (id, addr(id))).collect();
    let before = {
        let mut s = LogStore::open(&dir.0, &boot).expect("open");
        s.set_hard_state(&HardState {
            term: 1,
            vote: 1,
            commit: 1,
            ..Default::default()
        });
        s.sync().expect("sync");
        std::fs::read(dir.0.join("raft.state")).expect("state")
    };
    {
        let mut s = LogStore::open(&dir.0, &boot).expect("reopen");
        let mut meta = raft::eraftpb::SnapshotMetadata {
            index: 10,
            term: 3,
            ..Default::default()
        };
        meta.set_conf_state(ConfState::from(([1, 2, 3, 4], Vec::<u64>::new())));
        let mut wire = raft::eraftpb::Snapshot {
            data: Vec::new().into(),
            ..Default::default()
        };
        wire.set_metadata(meta);
        // What a leader sends: the member list, then the data.
        let mut members: Addrs = boot.clone();
        members.insert(4, addr(4));
        let text: String = members.iter().map(|(i, a)| format!("{i} {a}\n")).collect();
        let mut data = (text.len() as u32).to_le_bytes().to_vec();
        data.extend_from_slice(text.as_bytes());
        data.extend_from_slice(b"DATA");
        wire.data = data.into();
        s.install_snapshot(&wire).expect("install");
    }
    // The crash fell before raft.state was rewritten.
    std::fs::write(dir.0.join("raft.state"), &before).expect("old state");
    let s = LogStore::open(&dir.0, &Addrs::new()).expect("after crash");
    assert_eq!(s.conf_state().voters, vec![1, 2, 3, 4]);
    assert_eq!(s.addrs.get(&4), Some(&addr(4)));
    assert_eq!((s.snapshot_index(), s.snapshot_data()), (10, &b"DATA"[..]));
    assert_eq!((s.hard_state().commit, s.hard_state().term), (10, 3));
    assert_eq!(s.term(10), Ok(3));
}

#[test]
fn a_single_voter_commits_and_reads_alone() {
    let mut net = Net::new(1);
    assert_eq!(net.elect(), 1);
    let at = net.c(1).propose_unit(unit(0)).expect("propose");
    let seq = net.c(1).need_read();
    net.settle();
    assert_eq!(net.c(1).commit(), at);
    assert_eq!(net.units(1), vec![unit(0)]);
    assert!(net.c(1).read_done(seq));
}

#[test]
fn a_leader_deposed_by_a_stepped_message_refuses_proposals_before_its_round() {
    let mut net = Net::new(3);
    let old = net.elect();
    net.c(old).propose_unit(unit(1)).expect("first");
    assert!(net.run(20, |net| (1..=3).all(|id| net.units(id).len() == 1)));
    let other = (1..=3).find(|&id| id != old).expect("follower");
    let term = net.c(old).term();
    assert_eq!(net.c(old).leading_term(), Some(term));
    // A newer leader's heartbeat, stepped between two rounds (as the loop's `receive` does).
    let mut hb = Message::default();
    hb.set_msg_type(raft::eraftpb::MessageType::MsgHeartbeat);
    hb.from = other;
    hb.to = old;
    hb.term = term + 1;
    net.c(old).step(hb).expect("step");
    // The round has not reported it yet, but nothing may act on the stale role: raft would
    // forward the proposal to the new leader, which would log effects computed here.
    assert!(net.c(old).is_leader());
    assert_eq!(net.c(old).leading_term(), None);
    assert!(net.c(old).propose_unit(unit(2)).is_err());
    assert!(net.c(old).add_learner(9, &addr(9)).is_err());
}

#[test]
fn a_proposal_from_a_peer_is_refused() {
    let mut net = Net::new(3);
    let leader = net.elect();
    let other = (1..=3).find(|&id| id != leader).expect("follower");
    let before = net.c(leader).view();
    let mut m = Message::default();
    m.set_msg_type(raft::eraftpb::MessageType::MsgPropose);
    m.from = other;
    m.to = leader;
    m.set_entries(
        vec![Entry {
            data: unit(7).into(),
            ..Default::default()
        }]
        .into(),
    );
    assert!(net.c(leader).step(m).is_err());
    net.run(5, |_| false);
    assert!(!(1..=3).any(|id| net.has_unit(id, &unit(7))));
    assert_eq!(net.c(leader).view().commit, before.commit);
}

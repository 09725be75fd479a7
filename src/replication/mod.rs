//! Cluster mode's consensus core: a Raft node (tikv's raft-rs, driven by the caller's loop: no
//! thread, no timer, no socket of its own) over the durable log in `store`. The event loop feeds
//! it peers' messages (`step`), time (`tick`), units of work (`propose_unit`) and read barriers
//! (`need_read`); once per round `on_round` persists, sends and applies. What a unit means is not
//! known here: entries are opaque bytes (the AOF form of a change record).

pub mod group;
pub mod log;
mod store;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::io;
use std::path::Path;
use std::time::Instant;

use protobuf::Message as _;
use raft::eraftpb::{
    ConfChange, ConfChangeSingle, ConfChangeType, ConfChangeV2, ConfState, Entry, EntryType,
    MessageType,
};
use raft::{Config, RawNode, ReadOnlyOption};

pub use raft::eraftpb::Message;
pub use raft::StateRole;
pub use store::{Addrs, LogStore};

/// Bytes of entries in one append message.
pub const MAX_MSG: u64 = 256 << 10;
/// Append messages unanswered per follower.
pub const MAX_INFLIGHT: usize = 32;
/// Bytes of committed entries applied per round.
pub const MAX_APPLY: u64 = 4 << 20;

/// `Entry.context` of an EXTEND entry (the clock assumption in docs/cluster.md): every node shifts
/// its deadlines at the same log position. A unit's context is empty.
const EXTEND: &[u8] = b"x";

/// What a committed entry asks the state machine to do, in log order.
pub enum Applied<'a> {
    /// The state is replaced by this snapshot (AOF base format; empty: the empty dataset).
    Snapshot(&'a [u8]),
    /// A unit of work. `own`: this node proposed it as leader and has already applied it when it
    /// ran, so only a follower (or a leader that rebuilt its state) applies it.
    Unit { data: &'a [u8], own: bool },
    /// Shift every deadline by this many milliseconds.
    Extend(u64),
    /// The membership changed to this.
    Conf(&'a ConfState),
}

/// The log's size and age (`Cluster::log_stats`).
#[derive(Debug, Clone, Copy)]
pub struct LogStats {
    /// Memory the log's entries take.
    pub log_bytes: u64,
    /// The last snapshot's state, in bytes.
    pub snapshot_bytes: u64,
    pub snapshot_index: u64,
    /// When the oldest entry after the snapshot was appended (None: there is none).
    pub oldest: Option<std::time::Instant>,
    /// A compaction's snapshot is still being written to disk.
    pub compacting: bool,
}

/// What changed in a round, for the loop's own reactions (hold or drop replies, publish
/// `+switch-master`, open the gate after EXTEND).
#[derive(Debug, Default, PartialEq)]
pub struct Outcome {
    pub became_leader: bool,
    pub stepped_down: bool,
    /// (old, new) leader id, 0 for none.
    pub leader_changed: Option<(u64, u64)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub id: u64,
    /// "host port peerport", from the configuration or the conf change that added it.
    pub addr: String,
    pub voter: bool,
    /// Highest index known replicated on it (on the leader; 0 elsewhere).
    pub matched: u64,
    /// This node heard from it within the last election timeout (itself: always): Sentinel's
    /// view of a reachable instance.
    pub active: bool,
}

impl Member {
    /// `addr` as (host, client port, peer port), each as written ("" or "0" when missing).
    pub fn endpoint(&self) -> (&str, &str, &str) {
        let mut it = self.addr.split_ascii_whitespace();
        let host = it.next().unwrap_or("");
        let port = it.next().unwrap_or("0");
        (host, port, it.next().unwrap_or("0"))
    }
}

/// Plain data for SENTINEL, ROLE, INFO replication, WAIT and RAFT STATUS.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterView {
    pub id: u64,
    pub role: StateRole,
    /// 0 while no leader is known.
    pub leader: u64,
    pub term: u64,
    pub commit: u64,
    pub applied: u64,
    pub members: Vec<Member>,
}

/// A membership or leadership change asked by an operator (RAFT ADDLEARNER/PROMOTE/REMOVE/
/// TRANSFER).
#[derive(Clone, Debug, PartialEq)]
pub enum Admin {
    /// `addr`: "host port peerport".
    AddLearner {
        id: u64,
        addr: String,
    },
    Promote(u64),
    Remove(u64),
    Transfer(u64),
}

pub struct Cluster {
    node: RawNode<LogStore>,
    role: StateRole,
    leader: u64,
    /// Index and term of this node's last proposal: entries up to it in that term are `own`.
    proposed: u64,
    proposed_term: u64,
    /// Read barriers: asked by the loop, sent to raft, confirmed by a quorum and applied.
    read_seq: u64,
    read_asked: u64,
    read_done: u64,
    /// Read states received whose index is not yet applied: (seq, index).
    reads: Vec<(u64, u64)>,
    /// The snapshot found on disk at open, handed to `apply` in the first round.
    restore: Option<u64>,
    /// A follower's messages waiting for the write of their round (its number) to be durable:
    /// each acks or votes for what that write holds. Sent in order, none before an earlier one.
    after_write: VecDeque<(u64, Vec<Message>)>,
}

/// A unit that moves or replaces more than the keys it names (SWAPDB, FUNCTION ...), as the
/// log writes them (RESP bulk strings, upper case). A key or value spelled the same only makes
/// a snapshot start over.
fn not_replayable(data: &[u8]) -> bool {
    const MARKS: [&[u8]; 2] = [b"$6\r\nSWAPDB\r\n", b"$8\r\nFUNCTION\r\n"];
    // A slot range's release or import: a snapshot carries its effect in its claims head,
    // which must not be older than an entry replayed after it.
    data.starts_with(group::RESHARD_MAGIC)
        || MARKS.iter().any(|m| data.windows(m.len()).any(|w| w == *m))
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl Cluster {
    /// Opens the node's files in `dir`. `peers` (id → "host port peerport", this node included)
    /// bootstraps a new cluster when `dir` holds nothing; a node joining a running cluster
    /// passes none and waits for the leader (after `add_learner` there).
    pub fn open(dir: &Path, id: u64, peers: &Addrs) -> io::Result<Cluster> {
        let store = LogStore::open(dir, peers)?;
        let snap = store.snapshot_index();
        let cfg = Config {
            id,
            // With a 50 ms tick: heartbeats every 100 ms, elections after 0.5–1 s of silence.
            election_tick: 10,
            heartbeat_tick: 2,
            // A node cut off and rejoining does not depose a healthy leader with its higher term
            // (pre_vote), and a leader that lost its quorum steps down by itself (check_quorum),
            // so it stops answering within an election timeout.
            pre_vote: true,
            check_quorum: true,
            read_only_option: ReadOnlyOption::Safe,
            // The state machine starts from the snapshot; raft redelivers what follows it.
            applied: snap,
            // Flow control per follower: at most MAX_INFLIGHT appends of MAX_MSG bytes
            // unanswered (8 MiB). One that is far behind is streamed that much at a time and
            // never has more queued for it, so its heartbeats wait behind at most that on the
            // wire, and the leader's memory does not grow with its lag.
            max_size_per_msg: MAX_MSG,
            max_inflight_msgs: MAX_INFLIGHT,
            // Committed entries handed out per round: a follower catching up applies this much
            // and goes back to its loop (peers' messages, ticks, clients) before the rest.
            max_committed_size_per_ready: MAX_APPLY,
            ..Default::default()
        };
        cfg.validate().map_err(other)?;
        let node = RawNode::new(&cfg, store, &log::logger(id)).map_err(other)?;
        Ok(Cluster {
            node,
            role: StateRole::Follower,
            leader: 0,
            proposed: 0,
            proposed_term: 0,
            read_seq: 0,
            read_asked: 0,
            read_done: 0,
            after_write: VecDeque::new(),
            reads: Vec::new(),
            restore: (snap > 0).then_some(snap),
        })
    }

    pub fn id(&self) -> u64 {
        self.node.raft.id
    }

    /// Work is left for another round right away (committed entries beyond one round's share,
    /// `MAX_APPLY`): the loop must not sleep until the next tick.
    pub fn has_ready(&self) -> bool {
        self.node.has_ready()
    }

    /// Leader as of the last round (`on_round` reports changes). Between a round and the next,
    /// stepping a peer's message can depose raft already: what must not act on a stale role
    /// (proposing, releasing replies) asks `leading_term`.
    pub fn is_leader(&self) -> bool {
        self.role == StateRole::Leader
    }

    /// The term raft leads in right now, if it does.
    pub fn leading_term(&self) -> Option<u64> {
        (self.role == StateRole::Leader && self.node.raft.state == StateRole::Leader)
            .then_some(self.node.raft.term)
    }

    pub fn term(&self) -> u64 {
        self.node.raft.term
    }

    /// Elections and heartbeats: called every tick interval (the loop's timer).
    pub fn tick(&mut self) {
        self.persist_if_alone();
        self.node.tick();
    }

    /// raft-rs makes the sole voter leader inside `tick` or `campaign`, and a new leader must
    /// have persisted its whole log (raft-rs asserts it): a follower's writes still with the
    /// writer thread are made durable first. Their messages leave at the next `take_durable`.
    /// A write error is left for that call to report.
    fn persist_if_alone(&mut self) {
        if self.node.raft.state == StateRole::Leader
            || !self.node.store().in_flight()
            || !self.node.raft.prs().is_singleton()
        {
            return;
        }
        if self.node.mut_store().drain().is_ok() {
            let number = self.node.store().submitted();
            self.node.on_persist_ready(number);
        }
    }

    /// A message from a peer. An error (a message for another node, a local-only type) is the
    /// peer's problem: the caller logs it and drops the message.
    pub fn step(&mut self, m: Message) -> raft::Result<()> {
        // No node forwards proposals (`propose` refuses on a follower): a unit's effects were
        // computed on the proposer's state, and a leader must log only what it ran itself.
        if m.get_msg_type() == raft::eraftpb::MessageType::MsgPropose {
            return Err(raft::Error::ProposalDropped);
        }
        self.node.step(m)
    }

    /// The transport could not reach `id`: raft stops pipelining to it until it answers.
    pub fn report_unreachable(&mut self, id: u64) {
        self.node.report_unreachable(id);
    }

    /// A snapshot sent to `id` was lost: raft sends it again (a delivered one is acknowledged
    /// by the follower's append response, no report needed).
    pub fn report_snapshot_failed(&mut self, id: u64) {
        self.node.report_snapshot(id, raft::SnapshotStatus::Failure);
    }

    /// Appends a unit on the leader and returns its index: its replies leave once `commit()`
    /// reaches it. Only a leader proposes (raft would forward to the leader, which would apply
    /// a unit this node already ran).
    pub fn propose_unit(&mut self, data: Vec<u8>) -> raft::Result<u64> {
        self.propose(Vec::new(), data)
    }

    /// Appends an EXTEND entry (a new leader's first act, before it serves).
    pub fn propose_extend(&mut self, ms: u64) -> raft::Result<u64> {
        self.propose(EXTEND.to_vec(), ms.to_be_bytes().to_vec())
    }

    fn propose(&mut self, context: Vec<u8>, data: Vec<u8>) -> raft::Result<u64> {
        // Raft's own state, not the role of the last round: a message stepped since may have
        // deposed it, and a follower's raft forwards a proposal to the new leader, which would
        // log effects computed on this node's stale state.
        if self.leading_term().is_none() {
            return Err(raft::Error::ProposalDropped);
        }
        self.node.propose(context, data)?;
        self.proposed = self.node.raft.raft_log.last_index();
        self.proposed_term = self.node.raft.term;
        Ok(self.proposed)
    }

    /// After the loop threw away its speculative state and rebuilt it from the snapshot and the
    /// log, none of the entries is applied any more.
    pub fn forget_proposals(&mut self) {
        self.proposed = 0;
        self.proposed_term = 0;
    }

    pub fn proposed(&self) -> u64 {
        self.proposed
    }

    pub fn applied(&self) -> u64 {
        self.node.raft.raft_log.applied
    }

    /// A deposed leader's speculative state (units it ran that never committed) must go: this
    /// hands `apply` the stored snapshot and every applied entry after it, so the loop rebuilds
    /// the committed state from scratch; from then on no entry counts as this node's own.
    pub fn replay(&mut self, apply: &mut dyn FnMut(u64, Applied)) -> io::Result<()> {
        use raft::{GetEntriesContext, Storage};
        let store = self.node.store();
        let snap = store.snapshot_index();
        apply(snap, Applied::Snapshot(store.snapshot_data()));
        let applied = self.node.raft.raft_log.applied;
        if applied > snap {
            let entries = store
                .entries(snap + 1, applied + 1, None, GetEntriesContext::empty(false))
                .map_err(other)?;
            for e in entries {
                if e.get_entry_type() != EntryType::EntryNormal || e.data.is_empty() {
                    // Membership is not part of the data; it stays as applied.
                    continue;
                }
                if e.context.as_ref() == EXTEND {
                    let ms = <[u8; 8]>::try_from(e.data.as_ref())
                        .map(u64::from_be_bytes)
                        .map_err(|_| other(format!("EXTEND entry {} is damaged", e.index)))?;
                    apply(e.index, Applied::Extend(ms));
                } else {
                    apply(
                        e.index,
                        Applied::Unit {
                            data: &e.data,
                            own: false,
                        },
                    );
                }
            }
        }
        self.forget_proposals();
        Ok(())
    }

    pub fn commit(&self) -> u64 {
        self.node.raft.raft_log.committed
    }

    /// Asks for a read barrier; reads queued before it may be answered once `read_done(seq)`.
    /// Many calls in one round share one ReadIndex round-trip.
    pub fn need_read(&mut self) -> u64 {
        self.read_seq += 1;
        self.read_seq
    }

    /// True once a quorum confirmed this node was still leader after `seq` was asked (on a
    /// follower: that its leader was), and the state reflects everything committed at that
    /// moment.
    pub fn read_done(&self, seq: u64) -> bool {
        self.read_done >= seq
    }

    /// Asks the barriers not yet confirmed again at the next round: a follower's ask is
    /// dropped without an answer when its leader has not committed in its term yet, is gone,
    /// or the message was lost.
    pub fn reask_reads(&mut self) {
        self.read_asked = self.read_done;
    }

    /// A barrier's context: this node's id and its sequence number. Followers' asks reach the
    /// leader beside its own, and raft-rs ignores an ask whose context equals a pending one.
    fn read_ctx(&self, seq: u64) -> Vec<u8> {
        let mut ctx = Vec::with_capacity(16);
        ctx.extend_from_slice(&self.id().to_be_bytes());
        ctx.extend_from_slice(&seq.to_be_bytes());
        ctx
    }

    fn parse_read_ctx(ctx: &[u8]) -> Option<(u64, u64)> {
        let id = u64::from_be_bytes(ctx.get(..8)?.try_into().ok()?);
        let seq = u64::from_be_bytes(ctx.get(8..16)?.try_into().ok()?);
        (ctx.len() == 16).then_some((id, seq))
    }

    /// Membership: a new node first follows as a learner (catches up without counting toward
    /// quorum), then is promoted; `addr` is "host port peerport".
    pub fn add_learner(&mut self, id: u64, addr: &str) -> raft::Result<()> {
        self.change(ConfChangeType::AddLearnerNode, id, format!("{id} {addr}"))
    }

    pub fn promote(&mut self, id: u64) -> raft::Result<()> {
        self.change(ConfChangeType::AddNode, id, String::new())
    }

    pub fn remove(&mut self, id: u64) -> raft::Result<()> {
        self.change(ConfChangeType::RemoveNode, id, String::new())
    }

    fn change(&mut self, ty: ConfChangeType, id: u64, context: String) -> raft::Result<()> {
        // raft-rs turns a second change proposed before the first applied into an empty entry
        // without an error; refuse it here so the caller learns it did not happen.
        if self.leading_term().is_none() || self.node.raft.has_pending_conf() {
            return Err(raft::Error::ProposalDropped);
        }
        let mut single = ConfChangeSingle::default();
        single.set_change_type(ty);
        single.node_id = id;
        let mut cc = ConfChangeV2::default();
        cc.set_changes(vec![single].into());
        self.node.propose_conf_change(context.into_bytes(), cc)
    }

    /// Carries out an operator's change; Err: why it was refused.
    pub fn admin(&mut self, op: &Admin) -> Result<(), String> {
        if !self.is_leader() {
            return Err("this node is not the leader: send it to the leader (SENTINEL get-master-addr-by-name)".into());
        }
        let known = |id: u64| {
            let cs = self.node.store().conf_state();
            cs.voters.contains(&id) || cs.learners.contains(&id)
        };
        let refused = |e: raft::Error| match e {
            raft::Error::ProposalDropped => {
                "a membership change is already in progress: retry once it is applied".to_string()
            }
            e => e.to_string(),
        };
        match op {
            Admin::AddLearner { id, addr } => {
                if known(*id) {
                    return Err(format!("node {id} is already a member"));
                }
                self.add_learner(*id, addr).map_err(refused)
            }
            Admin::Promote(id) | Admin::Remove(id) | Admin::Transfer(id) if !known(*id) => {
                Err(format!("node {id} is not a member"))
            }
            Admin::Promote(id) => self.promote(*id).map_err(refused),
            Admin::Remove(id) => self.remove(*id).map_err(refused),
            Admin::Transfer(id) => {
                self.transfer_leader(*id);
                Ok(())
            }
        }
    }

    /// Hands leadership to `id` (a caught-up voter); the leader stops taking proposals meanwhile.
    pub fn transfer_leader(&mut self, id: u64) {
        self.node.transfer_leader(id);
    }

    /// A leadership transfer this leader started is under way: raft drops proposals until it
    /// ends (the transferee is elected, or an election timeout passes).
    pub fn transferring(&self) -> bool {
        self.node.raft.lead_transferee.is_some()
    }

    /// Starts an election now (with pre-vote, as raft's own timeout would).
    pub fn campaign(&mut self) {
        self.persist_if_alone();
        if let Err(e) = self.node.campaign() {
            tracing::debug!("Could not campaign: {e}");
        }
    }

    /// Compacts the log up to `index` (≤ applied): `data` is the state after applying it, in
    /// AOF base format. A follower that lags behind what stays of the log (the last entries
    /// up to `index`, at most `retain` bytes and `retain_entries` of them, and everything
    /// after) is then sent this snapshot. The files are written beside the loop
    /// (`LogStore::compact`); false: not started, as a previous snapshot is still being
    /// written.
    pub fn compact(
        &mut self,
        index: u64,
        data: Vec<u8>,
        retain: u64,
        retain_entries: u64,
    ) -> io::Result<bool> {
        let mut wire = self.wire_prefix();
        wire.extend_from_slice(&data);
        self.compact_wire(index, wire, retain, retain_entries)
    }

    /// `compact` with the state already behind `wire_prefix` (no copy of it is made).
    pub fn compact_wire(
        &mut self,
        index: u64,
        wire: Vec<u8>,
        retain: u64,
        retain_entries: u64,
    ) -> io::Result<bool> {
        if index > self.node.raft.raft_log.applied {
            return Err(other(format!("compact to {index} beyond applied")));
        }
        self.node
            .mut_store()
            .compact(index, wire, retain, retain_entries)
    }

    /// What a snapshot's data starts with (see `compact_wire`).
    pub fn wire_prefix(&self) -> Vec<u8> {
        self.node.store().wire_prefix()
    }

    /// Appends to `out` the units of entries `(from, to]` (all applied), in log order, to be
    /// replayed over a dump of the state taken while they were applied: each unit holds its
    /// keys' final states, so replaying it over a key already past it converges on the same
    /// state. False when one of them does not replay so (an EXTEND, SWAPDB, a FUNCTION
    /// command: the dump would count it twice) or the entries are no longer in the log.
    pub fn replayable_units(&self, from: u64, to: u64, out: &mut Vec<u8>) -> io::Result<bool> {
        use raft::{GetEntriesContext, Storage};
        if to <= from {
            return Ok(true);
        }
        let store = self.node.store();
        if from + 1 < store.first_index().map_err(other)? || to > self.applied() {
            return Ok(false);
        }
        let entries = store
            .entries(from + 1, to + 1, None, GetEntriesContext::empty(false))
            .map_err(other)?;
        for e in &entries {
            if e.get_entry_type() != EntryType::EntryNormal || e.data.is_empty() {
                continue;
            }
            if e.context.as_ref() == EXTEND || not_replayable(&e.data) {
                return Ok(false);
            }
            out.extend_from_slice(&e.data);
        }
        Ok(true)
    }

    /// Waits for a compaction's snapshot files and rewrites the log (a loop never waits: its
    /// rounds finish a compaction once the files are written).
    pub fn wait_compaction(&mut self) -> io::Result<()> {
        self.node.mut_store().finish_compaction(true)
    }

    /// What the loop decides compaction by: the log's size and age, the last snapshot's size.
    pub fn log_stats(&self) -> LogStats {
        let store = self.node.store();
        LogStats {
            log_bytes: store.log_bytes(),
            snapshot_bytes: store.snapshot_bytes(),
            snapshot_index: store.snapshot_index(),
            oldest: store.unsnapshotted_since(),
            compacting: store.compacting(),
        }
    }

    /// True when a follower needs a snapshot newer than the stored one (it joined after it was
    /// taken): the loop answers with `compact(applied, state)` and raft sends it on its next try.
    pub fn snapshot_wanted(&mut self) -> bool {
        self.node.store().take_snapshot_wanted()
    }

    pub fn view(&self) -> ClusterView {
        let store = self.node.store();
        let cs = store.conf_state();
        let prs = self.node.raft.prs();
        let leader = self.is_leader();
        let members = cs
            .voters
            .iter()
            .map(|&id| (id, true))
            .chain(cs.learners.iter().map(|&id| (id, false)))
            .map(|(id, voter)| Member {
                id,
                addr: store.addrs.get(&id).cloned().unwrap_or_default(),
                voter,
                matched: if leader {
                    prs.get(id).map_or(0, |p| p.matched)
                } else {
                    0
                },
                // The transport knows who it hears from (the loop fills this in).
                active: true,
            })
            .collect();
        ClusterView {
            id: self.id(),
            role: self.role,
            leader: self.leader,
            term: self.node.raft.term,
            commit: self.commit(),
            applied: self.node.raft.raft_log.applied,
            members,
        }
    }

    /// One round: raft-rs's documented `Ready` steps (raft-rs src/lib.rs, "Processing the Ready
    /// State"). `out` gets every message to send, and `sent` is called after each group of
    /// them so the caller can put them on the wire (the leader's appends before its own fsync,
    /// so that both disks work at once); `apply` gets every committed entry in order. An error
    /// is a failed write to the log or state files, or a corrupt entry: the node must stop
    /// (going on would break the promises its acks made).
    pub fn on_round(
        &mut self,
        out: &mut dyn FnMut(Message),
        sent: &mut dyn FnMut(),
        apply: &mut dyn FnMut(u64, Applied),
    ) -> io::Result<Outcome> {
        let mut outcome = Outcome::default();
        // A leader that stays leader, and a follower that stays follower, write their log beside
        // the loop (store::Writer): a follower's acks leave once their write is durable
        // (`after_write`). Any other round (a role change, a vote, a snapshot) is made durable
        // here, after the writes handed over before it. Several groups on one node each have
        // their own writer, so their fsyncs run side by side and not one after the other on
        // the loop.
        let leading = self.role == StateRole::Leader
            && self.node.raft.state == StateRole::Leader
            && self.restore.is_none();
        let following = self.role == StateRole::Follower
            && self.node.raft.state == StateRole::Follower
            && self.restore.is_none();
        if !leading && !following {
            self.node.mut_store().drain()?;
        }
        self.node.mut_store().finish_compaction(false)?;
        if self.take_durable(out)? {
            sent();
        }
        if let Some(index) = self.restore.take() {
            apply(index, Applied::Snapshot(self.node.store().snapshot_data()));
        }
        // raft-rs drops a ReadIndex asked before the leader committed in its term (raft.rs
        // step_leader), so ask only then; the asks queued meanwhile wait for it. A follower's
        // goes to the leader it knows (raft-rs forwards it) and comes back as a read state.
        let may_ask = match self.node.raft.state {
            StateRole::Leader => self.node.raft.commit_to_current_term(),
            StateRole::Follower => self.node.raft.leader_id != raft::INVALID_ID,
            _ => false,
        };
        if self.read_seq > self.read_asked && may_ask {
            self.node.read_index(self.read_ctx(self.read_seq));
            self.read_asked = self.read_seq;
        }
        if !self.node.has_ready() {
            return Ok(outcome);
        }
        let snapshot_out = |m: &Message| m.get_msg_type() == MessageType::MsgSnapshot;
        if self.node.raft.state == StateRole::Leader && self.node.raft.msgs.iter().any(snapshot_out)
        {
            // The snapshot's receiver reads hundreds of MB before the heartbeats queued behind
            // it on the same connection: it hears one just before, and every follower hears
            // that the leader is alive before the transport starts on the snapshot.
            self.node.raft.bcast_heartbeat();
        }
        let mut rd = self.node.ready();
        if let Some(ss) = rd.ss() {
            let (role, leader) = (ss.raft_state, ss.leader_id);
            if leader != self.leader {
                outcome.leader_changed = Some((self.leader, leader));
            }
            outcome.became_leader = role == StateRole::Leader && self.role != StateRole::Leader;
            outcome.stepped_down = self.role == StateRole::Leader && role != StateRole::Leader;
            if outcome.stepped_down {
                // Barriers asked as leader will never be confirmed.
                self.reads.clear();
            }
            if outcome.stepped_down || outcome.became_leader || outcome.leader_changed.is_some() {
                // Asks in flight to (or on) the old leader are lost: ask again in the new role.
                self.read_asked = self.read_done;
            }
            self.role = role;
            self.leader = leader;
        }
        // 1. Messages a leader may send before its own write (heartbeats, appends), snapshots
        // last: the others are on the wire before the loop spends time on them.
        let mut snapshots = Vec::new();
        for m in rd.take_messages() {
            if snapshot_out(&m) {
                snapshots.push(m);
            } else {
                out(m);
            }
        }
        sent();
        for m in snapshots {
            // Rare and large: what it costs the loop to hand one to the transport.
            let (to, bytes, started) = (m.to, m.get_snapshot().data.len(), Instant::now());
            out(m);
            sent();
            tracing::info!(
                "Cluster: a {bytes} byte snapshot queued for node {to} in {} ms",
                started.elapsed().as_millis()
            );
        }
        // 2. A snapshot from the leader replaces the state.
        if !rd.snapshot().is_empty() {
            let snap = rd.snapshot().clone();
            let index = snap.get_metadata().index;
            self.node.mut_store().install_snapshot(&snap)?;
            apply(index, Applied::Snapshot(self.node.store().snapshot_data()));
        }
        // 4, 5. New entries and hard state, made durable by one write and one fsync.
        self.node.mut_store().append(rd.entries())?;
        if let Some(hs) = rd.hs() {
            self.node.mut_store().set_hard_state(hs);
        }
        let async_write = ((leading && rd.persisted_messages().is_empty())
            || (following && self.role == StateRole::Follower))
            && rd.snapshot().is_empty()
            && (!rd.entries().is_empty() || self.node.store().in_flight());
        if async_write {
            // The leader's appends already left (step 1), so followers write while the writer
            // thread does; raft counts this node's copy once `take_durable` reports it, and
            // commits on whichever majority is durable first. Entries committed here are
            // only those this node persisted (raft-rs), so applying them needs no wait.
            self.apply_entries(rd.take_committed_entries(), apply)?;
            self.take_read_states(&mut rd)?;
            let number = rd.number();
            let msgs = rd.take_persisted_messages();
            if !msgs.is_empty() {
                self.after_write.push_back((number, msgs));
            }
            self.node.advance_append_async(rd);
            self.node.mut_store().submit(number)?;
            self.node.advance_apply();
            self.finish_reads();
            return Ok(outcome);
        }
        self.node.mut_store().sync()?;
        // Every write handed over before is durable now: what waited for them leaves first.
        for (_, msgs) in std::mem::take(&mut self.after_write) {
            for m in msgs {
                out(m);
            }
        }
        // 6. Votes and append acks promise what is now on disk. They leave before anything is
        // applied: a follower's ack is on the leader's commit path, its apply is not.
        for m in rd.take_persisted_messages() {
            out(m);
        }
        sent();
        // 3. Entries committed in earlier rounds (raft-rs hands out only persisted ones, so
        // applying them after this round's write changes nothing they promise).
        self.apply_entries(rd.take_committed_entries(), apply)?;
        self.take_read_states(&mut rd)?;
        // 7. Advance, and what it released.
        let mut light = self.node.advance(rd);
        if let Some(commit) = light.commit_index() {
            self.node.mut_store().set_commit(commit);
        }
        for m in light.take_messages() {
            out(m);
        }
        sent();
        self.apply_entries(light.take_committed_entries(), apply)?;
        self.node.advance_apply();
        self.finish_reads();
        Ok(outcome)
    }

    /// Tells raft which of the writes handed to the writer thread are durable (a leader's own
    /// copy then counts toward commit) and hands `out` the follower messages that waited for
    /// them (`after_write`; the caller flushes when this says some left). Never between
    /// `ready` and its `advance`.
    pub fn take_durable(&mut self, out: &mut dyn FnMut(Message)) -> io::Result<bool> {
        let mut released = false;
        if let Some(number) = self.node.mut_store().take_durable()? {
            while self.after_write.front().is_some_and(|(n, _)| *n <= number) {
                if let Some((_, msgs)) = self.after_write.pop_front() {
                    for m in msgs {
                        out(m);
                        released = true;
                    }
                }
            }
            self.node.on_persist_ready(number);
        }
        Ok(released)
    }

    /// Called from the writer thread when a write is durable: the loop's waker.
    pub fn set_waker(&mut self, wake: Box<dyn Fn() + Send>) {
        self.node.mut_store().set_waker(wake);
    }

    fn take_read_states(&mut self, rd: &mut raft::Ready) -> io::Result<()> {
        for rs in rd.take_read_states() {
            let (id, seq) = Self::parse_read_ctx(&rs.request_ctx)
                .ok_or_else(|| other("read state with a foreign context"))?;
            if id == self.id() {
                self.reads.push((seq, rs.index));
            }
        }
        Ok(())
    }

    /// Barriers whose index is applied are done.
    fn finish_reads(&mut self) {
        let applied = self.node.raft.raft_log.applied;
        let done = &mut self.read_done;
        self.reads.retain(|&(seq, index)| {
            if index <= applied {
                *done = (*done).max(seq);
                false
            } else {
                true
            }
        });
    }

    fn apply_entries(
        &mut self,
        entries: Vec<Entry>,
        apply: &mut dyn FnMut(u64, Applied),
    ) -> io::Result<()> {
        for e in entries {
            match e.get_entry_type() {
                EntryType::EntryNormal if e.context.as_ref() == EXTEND => {
                    let ms = <[u8; 8]>::try_from(e.data.as_ref())
                        .map(u64::from_be_bytes)
                        .map_err(|_| other(format!("EXTEND entry {} is damaged", e.index)))?;
                    apply(e.index, Applied::Extend(ms));
                }
                // A new leader's empty entry commits its term; nothing to apply.
                EntryType::EntryNormal if e.data.is_empty() => {}
                EntryType::EntryNormal => {
                    let own = e.term == self.proposed_term && e.index <= self.proposed;
                    apply(e.index, Applied::Unit { data: &e.data, own });
                }
                EntryType::EntryConfChangeV2 => {
                    let cc = ConfChangeV2::parse_from_bytes(&e.data).map_err(other)?;
                    let cs = self.node.apply_conf_change(&cc).map_err(other)?;
                    self.apply_conf(cs, &cc.changes, &e, apply);
                }
                EntryType::EntryConfChange => {
                    let cc = ConfChange::parse_from_bytes(&e.data).map_err(other)?;
                    let mut single = ConfChangeSingle::default();
                    single.set_change_type(cc.get_change_type());
                    single.node_id = cc.node_id;
                    let cs = self.node.apply_conf_change(&cc).map_err(other)?;
                    self.apply_conf(cs, &[single], &e, apply);
                }
            }
        }
        Ok(())
    }

    /// Records the new membership (and the added node's address) after raft applied it.
    fn apply_conf(
        &mut self,
        cs: ConfState,
        changes: &[ConfChangeSingle],
        e: &Entry,
        apply: &mut dyn FnMut(u64, Applied),
    ) {
        // The context names the added node's address: "id host port peerport".
        let ctx = std::str::from_utf8(&e.context).unwrap_or("");
        let (ctx_id, ctx_addr) = ctx.split_once(' ').unwrap_or(("", ""));
        let store = self.node.mut_store();
        for c in changes {
            match c.get_change_type() {
                ConfChangeType::RemoveNode => store.set_addr(c.node_id, None),
                _ if ctx_id.parse() == Ok(c.node_id) && !ctx_addr.is_empty() => {
                    store.set_addr(c.node_id, Some(ctx_addr.to_string()))
                }
                _ => {}
            }
        }
        store.set_conf_state(cs.clone());
        apply(e.index, Applied::Conf(&cs));
    }
}

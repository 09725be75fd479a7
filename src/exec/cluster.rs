//! Cluster mode's half of the event loop: the consensus core (replication::Cluster) driven by
//! the executor, as the design's "Raft library driven by the loop".
//!
//! - **The leader runs units first and logs their effects**: `end_unit` proposes the change
//!   record (the AOF form, with absolute deadlines and the unit's publishes). Replies wait in
//!   `held` until the entry is committed on a majority; a batch that logged nothing (a read, a
//!   failed SET NX) waits for a read barrier asked after it ran (raft's ReadIndex), so a leader
//!   that was deposed without knowing it answers nothing at all.
//! - **Followers apply committed entries** through the loader's path with `now = 0`, so they
//!   never expire a key by their own clock: they wait for the leader's DEL, as Redis replicas
//!   do. They refuse writes (-READONLY). A batch that reads keys (or runs a script) waits for a
//!   read barrier the leader confirms (raft's ReadIndex, forwarded) and for this node to apply
//!   up to it, so a follower's read is as linearizable as the leader's; a follower that finds
//!   no leader for 2 s answers MASTERDOWN (as a Redis replica whose master link is down)
//!   instead of answering from stale state. Keys count as expired there once their deadline
//!   plus the clock bound passed.
//! - **Sentinel discovery** on a follower that cannot name a live leader waits for the
//!   election (the client parked, like a read), and a follower that finds its leader's process
//!   gone (probe.rs) starts the election without waiting out raft's timeout.
//! - **A new leader first proposes EXTEND** (every deadline of its group's keys moves
//!   `cluster-clock-drift` later, at the same log position on every node) and serves no client
//!   until it is applied: a lock cannot expire earlier than under the leader that granted it,
//!   as long as no two clocks differ by more than the bound.
//! - **A deposed leader** drops its held replies (their outcome is unknown, as after a crash),
//!   closes its clients so they rediscover the leader, and rebuilds its state from the log when
//!   it had run units that never committed.

#[path = "reshard.rs"]
mod reshard;

use super::hold::{Verdict, Watermark};
use super::peer::Peers;
use super::{fatal, Inbox, Server};
use crate::clock::unix_ms;
use crate::config::Config;
use crate::persist::emit;
use crate::replication::group::{self, GroupId, SlotMap};
use crate::replication::{Addrs, Applied, Cluster, ClusterView};
use crate::store::waiters::{Unblock, WaitKind, REPLICAS_KEY};
use bytes::Bytes;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Raft's clock: heartbeats every 2 ticks, elections after 10–20 ticks of silence.
pub const TICK: Duration = Duration::from_millis(50);
/// Ticks made up at once after the loop was late (see `tick_until`).
const MAX_CATCH_UP: u32 = 2;

/// The log is compacted once its entries take more memory than this (or than the last
/// snapshot, whichever is more): see `maybe_compact`.
const LOG_BYTES: u64 = 64 << 20;
/// ... or once an entry the snapshot does not cover is this old.
const LOG_AGE: Duration = Duration::from_secs(600);
/// What stays of the log behind a snapshot, at most: a follower this close behind (a restart,
/// a pause) catches up from entries rather than the whole state.
const LOG_RETAIN: u64 = 8 << 20;
/// Keys a snapshot being built encodes per round (a few ms).
const SLICE_KEYS: usize = 8192;

/// A snapshot built a slice per round while the loop goes on: a dump of the keyspace whose
/// keys may be at any state from `from` on, made exact at `to` by replaying the units of the
/// entries `(from, to]` after it (each holds its keys' final states, so a key dumped at a
/// later state ends at the same one). Dropped when the state is replaced or rebuilt, the
/// leadership or the membership changes.
struct Building {
    /// The index the state was at when the dump started.
    from: u64,
    /// `Cluster::wire_prefix`, the libraries, the keys so far.
    data: Vec<u8>,
    /// The database being dumped, and the SCAN cursor in it (None: not started).
    db: usize,
    cursor: Option<u64>,
    /// The index the state was at when the dump ended: compacted once it is applied.
    to: Option<u64>,
    began: Instant,
}

/// A leader hands its group to the group's preferred voter at most this often (`spread_leadership`).
const SPREAD_RETRY: Duration = Duration::from_secs(2);
/// ... only when a raft message from it arrived within this long (it answers every heartbeat,
/// sent every 2 ticks) ...
const SPREAD_HEARD: Duration = Duration::from_millis(500);
/// ... and its log is at most this many entries behind the commit index.
const SPREAD_MAX_LAG: u64 = 1000;

/// A follower asks its barrier again when no answer came this long (the leader dropped it:
/// not yet committed in its term, gone, or the message was lost).
const READ_REASK: Duration = Duration::from_millis(200);
/// A follower that cannot confirm a read with any leader this long answers it MASTERDOWN (its
/// client then looks for the leader elsewhere) rather than answer from state that may be stale.
const READ_GIVE_UP: Duration = Duration::from_millis(2000);
/// A follower stops trusting its leader when it has not heard from it for this long (it sends
/// a heartbeat every 2 ticks), or at once when the probe finds its process gone.
const LEADER_SUSPECT: Duration = Duration::from_millis(300);
/// The longest a discovery request (SENTINEL get-master-addr-by-name, MASTERS …) waits for a
/// leader this node trusts: past the longest election timeout (20 ticks) with margin. After
/// it, the node answers what it knows (no master, if none).
const DISCOVERY_HOLD: Duration = Duration::from_millis(2000);
/// A client that asks a leader SENTINEL MASTERS again within this long after being told no
/// master is answered (and keeps being answered while it keeps asking that often).
const MASTERS_REASK: Duration = Duration::from_secs(10);
const MASTERS_REFUSED_MAX: usize = 1024;
/// A follower whose leader's process is gone (the probe was refused) and that has not heard
/// from it this long (heartbeats come every 2 ticks) starts the election itself, without
/// waiting out raft's election timeout (10-20 ticks of silence).
const HASTEN_SILENCE: Duration = Duration::from_millis(150);
/// The followers start it one after the other, in the order of their ids, so that one wins
/// at once instead of both splitting the votes.
const HASTEN_STAGGER: Duration = Duration::from_millis(100);
/// A hastened election that produced no leader in this long is started again.
const HASTEN_RETRY: Duration = Duration::from_millis(150);
/// At most this many times: after them raft's own election timeout takes over (a node that
/// cannot win, alone or behind, must not bump the term every few ticks).
const HASTEN_RETRIES: u32 = 3;
/// A follower holding SENTINEL MASTERS requests (redis-py: it is the head of those clients'
/// Sentinel lists) lets the other follower go first: were it elected, those clients would ask
/// it first and, told no master (the leader lists none), go on down their lists, where the
/// dead node may be.
const HASTEN_DEFER: Duration = Duration::from_millis(250);

/// A node's Raft groups and the transport they share: every group this node runs, keyed by
/// its id, and the slot→group table that says which group a key's slot belongs to (every node
/// holds the same; `cluster-groups` / `cluster-slot-groups` at a cluster's creation, see
/// `start_table`). Each group owns its raft node and log, its proposals and held replies (the hold
/// queue's watermarks name their group), its EXTEND gate, read barriers and snapshots.
pub struct Groups {
    /// Ascending by id; the home group first.
    list: Vec<ClusterIo>,
    slots: SlotMap,
    peers: Peers,
    /// The peers the transport links: every other member of any group (`targets_of`).
    linked: Addrs,
    /// The group of the unit that ended last (its logged index is what WAIT counts).
    last: GroupId,
    /// The other groups the last unit was logged in, when it was split by group
    /// (`propose_per_group`): its output waits for each of them too (`note_unit`).
    split_parts: Vec<GroupId>,
    /// The groups (a set of `bit`s) the units since the batch's output was last delivered
    /// went to: its output waits for each one this node leads (`take_watermarks`).
    touched: u64,
    /// The groups whose keys the running unit names (`note_unit_keys`; 0: the home group).
    unit_keys: u64,
    /// The groups the unit that ended last broke (`propose_changes`): a refused proposal, or
    /// a unit spanning groups, undone by their rebuild.
    unit_broke: u64,
}

/// The keys a node's active expiry may delete: those of the Raft groups it serves as leader,
/// whose deletions it logs (`Groups::may_expire`).
pub enum Expirable {
    Nothing,
    All,
    /// The keys of these groups' slots (the node leads some of its groups, not all).
    Groups(Vec<GroupId>),
}

/// A set of groups: bit `i` stands for `Groups::list[i]` (from the 64th on, all share the
/// last bit, so a set naming that bit covers every one of them).
#[inline]
fn bit(i: usize) -> u64 {
    1 << i.min(63)
}

/// One Raft group on this node.
/// A group's parked batches that may run after its round, by client id.
#[derive(Default)]
struct Parked {
    /// Arrived while the gate was shut, now open (or this node no longer leads).
    waiting: Vec<u64>,
    /// A follower's read whose barrier gave up: answered MASTERDOWN.
    reads_given_up: Vec<u64>,
    /// Where-is-the-master asked during an election, now over (or waited long enough).
    discovery_ready: Vec<u64>,
    /// A follower's read whose barrier is confirmed and applied.
    reads_ready: Vec<u64>,
}

pub struct ClusterIo {
    pub group: GroupId,
    /// The voter this group's leadership moves to once elected elsewhere (0: none), so that
    /// several groups' leaders spread over the nodes: group n's is the n-th voter (modulo their
    /// number) in id order. A lone group has none.
    preferred: u64,
    /// When this leader last tried to hand leadership to `preferred`.
    spread_at: Option<Instant>,
    /// This node runs several groups (leaders spread over the voters).
    several: bool,
    /// Stepped down while leading another group: the clients blocked on this group's keys
    /// run their commands again once its new leader is known (`rerun_blocked`).
    redirect_blocked: bool,
    /// The membership changed: the transport follows it after the round (`link_members`).
    relink: bool,
    core: Cluster,
    /// What SENTINEL, ROLE, INFO and WAIT render (refreshed after each round that changed it).
    pub view: ClusterView,
    /// Peer addresses the transport knows (to follow membership changes).
    dialed: Addrs,
    pub next_tick: Instant,
    /// A leader serves clients only once its EXTEND entry is applied.
    gate_open: bool,
    extend_index: u64,
    /// Clients whose batches arrived while the gate was shut, in arrival order.
    pub gate_waiting: Vec<u64>,
    /// A follower's clients whose batches read: (barrier, client, since), in arrival order.
    /// Each runs once the leader confirmed its barrier and this node applied up to it.
    read_parked: Vec<(u64, u64, Instant)>,
    /// The client whose parked batch is being run now (it does not park again).
    pub read_cleared: u64,
    /// Clients whose batch this group's barrier cleared while it still waits for another
    /// group's (`Groups::park_reads`).
    read_confirmed: Vec<u64>,
    read_reask_at: Instant,
    /// Clients whose batches ask where the master is while this node trusts no leader:
    /// (client, since, asks SENTINEL MASTERS), answered once it does (`discovery_ready`) or
    /// after `DISCOVERY_HOLD`.
    discovery_parked: Vec<(u64, Instant, bool)>,
    /// The leader raft follows (the view stops naming one whose process is gone).
    raft_leader: u64,
    /// The term in which this node last started an election early (`hasten_election`), and
    /// when.
    hastened_term: u64,
    hastened_at: Option<Instant>,
    hasten_retries: u32,
    /// The client whose parked discovery batch is being run now (it does not park again).
    pub discovery_cleared: u64,
    /// The client whose batch runs after a read found no leader: its reads answer MASTERDOWN.
    pub masterdown: u64,
    /// PINGs to every other member's client port (Sentinel's view of them).
    probes: super::probe::Probes,
    /// Whether the last unit that ended was logged: a batch ending in a logged unit is covered
    /// by that entry's commit, any other needs a read barrier.
    last_unit_logged: bool,
    /// The unit running asked for a leadership transfer (RAFT TRANSFER).
    transfer_asked: bool,
    /// The last unit that ended did: its OK says only that the transfer was started, and a
    /// read barrier behind it could lose the race with the transfer itself (the reply would be
    /// dropped as the node steps down, so an operator would see the connection close on a
    /// transfer that worked). RAFT TRANSFER is refused inside MULTI, so no read shares the unit.
    last_unit_transfer: bool,
    /// A proposal was refused (leadership was being handed over): the state ran ahead of the
    /// log and is rebuilt at the end of the round.
    broken: bool,
    /// The last leader clients were told about (for +switch-master).
    announced_leader: u64,
    compacted_at: u64,
    building: Option<Building>,
    /// Shutting down as leader: leadership is being handed over until then.
    handing_over: Option<Instant>,
    /// When each peer was last heard from (members' `active`).
    heard: Vec<(u64, Instant)>,
    /// The view is refreshed at least this often (liveness changes without commits).
    view_due: Instant,
    /// When this node started: a member never heard from has been silent since then.
    opened: Instant,
    /// Clients this leader told "no master" in SENTINEL MASTERS, and when (`first_masters_ask`).
    masters_refused: VecDeque<(u64, Instant)>,
    drift: u64,
    snapshot_every: u64,
    buf: Vec<u8>,
}

impl Groups {
    /// Opens the home group (its log in `<dir>/cluster`) and starts the peer transport.
    pub fn open(config: &Config, inbox: Inbox) -> std::io::Result<Groups> {
        let me = config.cluster_node_id;
        let Some(own) = config.cluster_peers.iter().find(|p| p.id == me) else {
            return Err(std::io::Error::other(format!(
                "cluster-node-id {me} is not one of cluster-peers"
            )));
        };
        // Before any group's files exist: a new node records the table it starts with.
        let slots = start_table(config)?;
        let mut home = ClusterIo::open(config, GroupId::HOME)?;
        let targets: Vec<(u64, String)> = home
            .dialed
            .iter()
            .filter_map(|(&id, a)| peer_target(a).map(|t| (id, t)))
            .collect();
        // Peers compare the tables their logs were created with before they talk.
        let table = spell_table(&slots);
        let one_group = table == spell_table(&SlotMap::default());
        let mut peers = Peers::from_config(me, config, own, &targets, (&table, one_group), inbox)?;
        home.core.set_waker(peers.loop_waker());
        let mut list = vec![home];
        for &g in slots.groups().iter().filter(|&&g| g != GroupId::HOME) {
            let mut c = ClusterIo::open(config, g)?;
            c.core.set_waker(peers.loop_waker());
            list.push(c);
        }
        let several = list.len() > 1;
        for c in &mut list {
            c.several = several;
            c.prefer();
        }
        let groups: Vec<GroupId> = list.iter().map(|c| c.group).collect();
        peers.set_groups(&groups);
        // The transport links every member of every group (another group may name a member
        // the home group does not have yet, or no longer has).
        let linked: Addrs = targets_of(&list);
        for (id, addr) in &linked {
            if list[0].dialed.get(id) != Some(addr) {
                peers.set_peer(*id, peer_target(addr));
            }
        }
        tracing::info!(
            "Cluster node {me}: peers on {}, {} members, log in {}",
            peers.listening(),
            list[0].view.members.len(),
            std::path::Path::new(&config.dir).join("cluster").display()
        );
        Ok(Groups {
            list,
            slots,
            peers,
            linked,
            last: GroupId::HOME,
            split_parts: Vec::new(),
            touched: 0,
            unit_keys: 0,
            unit_broke: 0,
        })
    }

    /// The group of what no slot names: the one the Sentinel protocol describes, whose log
    /// carries the function libraries.
    pub fn home(&self) -> &ClusterIo {
        &self.list[0]
    }

    pub fn home_mut(&mut self) -> &mut ClusterIo {
        &mut self.list[0]
    }

    /// The group owning `slot` (`role_for(slot)`: who leads it, its term and commit index).
    pub fn by_slot(&self, slot: u16) -> &ClusterIo {
        self.get(self.slots.group_of(slot)).unwrap_or(&self.list[0])
    }

    /// RAFT ADDLEARNER/PROMOTE/REMOVE/TRANSFER. With `group`, in that group alone, on its
    /// leader. Without: TRANSFER in the home group; a membership change in every group this
    /// node leads (one group: the home group, whose errors are the replies' texts as they
    /// always were), and where that is not every group, the error names each other group's
    /// leader (or what refused the change there) and the groups it was proposed in. Nothing
    /// is forwarded: an operator (scripts/cluster `add`) sends it with `GROUP g` to each
    /// group's leader.
    pub fn admin(
        &mut self,
        op: &crate::replication::Admin,
        group: Option<u32>,
    ) -> Result<(), String> {
        if let Some(g) = group {
            let Some(c) = self.get_mut(GroupId(g)) else {
                return Err(format!("no Raft group {g} on this node"));
            };
            if !c.is_leader() {
                return Err(format!(
                    "this node is not the leader of group {g}: {}",
                    c.leader_named()
                ));
            }
            return c.admin(op);
        }
        if self.list.len() == 1 || matches!(op, crate::replication::Admin::Transfer(_)) {
            return self.home_mut().admin(op);
        }
        let mut done: Vec<String> = Vec::new();
        let mut refused: Vec<String> = Vec::new();
        for c in &mut self.list {
            let g = c.group.0;
            let outcome = if c.is_leader() {
                c.admin(op)
            } else {
                Err(format!(
                    "not the leader, {} (send it there with GROUP {g})",
                    c.leader_named()
                ))
            };
            match outcome {
                Ok(()) => done.push(g.to_string()),
                Err(e) => refused.push(format!("group {g}: {e}")),
            }
        }
        if refused.is_empty() {
            return Ok(());
        }
        let done = if done.is_empty() {
            "no group".to_string()
        } else {
            format!("group(s) {}", done.join(" "))
        };
        Err(format!("{} (proposed in {done})", refused.join("; ")))
    }

    /// The transport follows the groups' memberships: a node any group has is linked, one no
    /// group has any more is forgotten.
    fn link_members(&mut self) {
        let now = targets_of(&self.list);
        for (id, addr) in &now {
            if self.linked.get(id) != Some(addr) {
                self.peers.set_peer(*id, peer_target(addr));
            }
        }
        for id in self.linked.keys() {
            if !now.contains_key(id) {
                self.peers.set_peer(*id, None);
            }
        }
        self.linked = now;
    }

    pub fn get(&self, group: GroupId) -> Option<&ClusterIo> {
        self.list.iter().find(|c| c.group == group)
    }

    pub fn get_mut(&mut self, group: GroupId) -> Option<&mut ClusterIo> {
        self.list.iter_mut().find(|c| c.group == group)
    }

    pub fn slots(&self) -> &SlotMap {
        &self.slots
    }

    /// Each group owning slots, its view and its slot ranges, in group order.
    pub fn shards(&self) -> Vec<(&ClusterView, Vec<(u16, u16)>)> {
        self.list
            .iter()
            .map(|c| (&c.view, self.slots.ranges(c.group)))
            .filter(|(_, r)| !r.is_empty())
            .collect()
    }

    /// Every group, ascending by id: its id, its view and its slot ranges (RAFT STATUS).
    pub fn every(&self) -> Vec<crate::machine::GroupStatus<'_>> {
        self.list
            .iter()
            .map(|c| (c.group.0, &c.view, self.slots.ranges(c.group)))
            .collect()
    }

    /// A group of `set` this node leads whose EXTEND is not applied yet (a batch touching
    /// its keys waits there).
    pub fn gate_shut_mut(&mut self, set: u64) -> Option<&mut ClusterIo> {
        self.list
            .iter_mut()
            .enumerate()
            .find(|(i, c)| set & bit(*i) != 0 && c.gate_shut())
            .map(|(_, c)| c)
    }

    /// Whether any group's gate is shut (`gate_shut_mut` then asks which batches wait).
    pub fn any_gate_shut(&self) -> bool {
        self.list.iter().any(|c| c.gate_shut())
    }

    /// Whether this node runs more than one group (only then are slots computed).
    #[inline]
    pub fn split(&self) -> bool {
        self.list.len() > 1
    }

    fn position(&self, group: GroupId) -> usize {
        self.list.iter().position(|c| c.group == group).unwrap_or(0)
    }

    /// The groups (a set of `bit`s) owning the keys `argv` names, EXEC's those of the commands
    /// `queued` since MULTI; the home group for a request without keys (or unknown).
    pub fn groups_of_request(
        &self,
        argv: &[Bytes],
        queued: Option<&Vec<(crate::machine::CmdId, Vec<Bytes>)>>,
    ) -> u64 {
        if !self.split() {
            return bit(0);
        }
        let table = crate::cmd::registry::table();
        let Ok(id) = crate::cmd::dispatch::resolve(argv) else {
            return bit(0);
        };
        let mut set = 0;
        let every = match self.list.len() {
            n if n >= 64 => u64::MAX,
            n => (1u64 << n) - 1,
        };
        let mut keys_of = |id: crate::machine::CmdId, argv: &[Bytes]| {
            let entry = &table.entries[id];
            let mut keyed = false;
            for k in crate::cmd::keyspec::key_refs(entry, argv).iter() {
                if let Some(key) = argv.get(k.pos) {
                    keyed = true;
                    set |= bit(self.position(self.slots.group_of_key(key)));
                }
            }
            // A read without keys (SCAN, KEYS, RANDOMKEY, DBSIZE) reads every group's keys.
            if !keyed && entry.spec.has(crate::cmd::spec::flags::READONLY) {
                set |= every;
            }
        };
        if table.entries[id].spec.name == "exec" {
            for (qid, qargv) in queued.into_iter().flatten() {
                keys_of(*qid, qargv);
            }
        } else {
            keys_of(id, argv);
        }
        if set == 0 {
            bit(0)
        } else {
            set
        }
    }

    /// Before a client's unit runs: the groups of its keys, which a unit that logs nothing
    /// (a read, a refusal) reads from (`Server::note_write`).
    #[inline]
    pub fn note_unit_keys(
        &mut self,
        argv: &[Bytes],
        queued: Option<&Vec<(crate::machine::CmdId, Vec<Bytes>)>>,
    ) {
        if self.split() {
            self.unit_keys = self.groups_of_request(argv, queued);
        }
    }

    /// The groups the batch's units went to since its output was last delivered, forgotten
    /// here: a nested batch (a blocked client served inside another's) keeps its own, and
    /// `restore_touched` gives the outer one's back.
    pub fn take_touched(&mut self) -> u64 {
        std::mem::take(&mut self.touched)
    }

    pub fn restore_touched(&mut self, touched: u64) {
        self.touched = touched;
    }

    /// What the output of the units since the last delivery waits for: one watermark for each
    /// group they went to that this node leads (none touched, as for output no unit made: the
    /// home group's): the first, and the others (only a batch over several groups
    /// allocates). None: the output waits for no log. The set is emptied.
    #[inline(never)]
    pub fn take_watermarks(&mut self) -> Option<(Watermark, Vec<Watermark>)> {
        let touched = match std::mem::take(&mut self.touched) {
            0 => bit(0),
            t => t,
        };
        let mut held: Option<(Watermark, Vec<Watermark>)> = None;
        for (i, c) in self.list.iter_mut().enumerate() {
            if touched & bit(i) != 0 && c.holds_replies() {
                let wm = c.watermark();
                match held.as_mut() {
                    None => held = Some((wm, Vec::new())),
                    Some((_, rest)) => rest.push(wm),
                }
            }
        }
        held
    }

    /// Parks client `id`'s batch for the read barriers of the groups of `set` this node
    /// follows (all of them at once), unless each one confirmed a barrier for it already: a
    /// group that did keeps that until the batch runs, so a batch waiting for several never
    /// parks again on one that cleared it (until it runs: `forget_confirmed`). True if it
    /// waits. A batch whose barrier gave up in
    /// one group runs at once (its reads answer MASTERDOWN).
    pub fn park_reads(&mut self, id: u64, set: u64) -> bool {
        let follows = |(i, c): &(usize, &mut ClusterIo)| set & bit(*i) != 0 && !c.is_leader();
        if self
            .list
            .iter_mut()
            .enumerate()
            .filter(follows)
            .any(|(_, c)| c.masterdown == id)
        {
            // Nor does it wait elsewhere: a barrier asked for it must not clear a later batch.
            for c in &mut self.list {
                c.read_parked.retain(|p| p.1 != id);
            }
            return false;
        }
        let mut waits = false;
        for (_, c) in self.list.iter_mut().enumerate().filter(follows) {
            if c.read_cleared == id || c.read_confirmed.contains(&id) {
                continue;
            }
            waits = true;
            if !c.read_parked.iter().any(|p| p.1 == id) {
                c.park_read(id);
            }
        }
        if waits {
            for (_, c) in self.list.iter_mut().enumerate().filter(follows) {
                if c.read_cleared == id && !c.read_confirmed.contains(&id) {
                    c.read_confirmed.push(id);
                }
            }
        }
        waits
    }

    /// Whether client `id`'s batch runs because a group cleared it (a barrier confirmed, or
    /// given up): it does not park for discovery then.
    pub fn read_cleared(&self, id: u64) -> bool {
        self.list
            .iter()
            .any(|c| c.read_cleared == id || c.masterdown == id || c.read_confirmed.contains(&id))
    }

    /// Client `id`'s batch runs, or the client is gone: no group keeps a barrier confirmed
    /// for it (`park_reads`), which a later batch of the client must not count.
    #[inline]
    pub fn forget_confirmed(&mut self, id: u64) {
        for c in &mut self.list {
            if !c.read_confirmed.is_empty() {
                c.read_confirmed.retain(|&x| x != id);
            }
            // Nor a barrier asked for it in another group while one group's cleared batch was
            // tried (it parked there again, then ran when that group cleared it too): asked
            // before the client's next batch arrived, it must not clear that one.
            if !c.read_parked.is_empty() {
                c.read_parked.retain(|p| p.1 != id);
            }
        }
    }

    /// Whether this node follows some group (a batch reading its keys waits for a barrier).
    #[inline]
    pub fn follows_any(&self) -> bool {
        self.list.iter().any(|c| !c.is_leader())
    }

    /// Whether a batch running now was let through by a read barrier that gave up (its reads
    /// answer MASTERDOWN).
    pub fn masterdown(&self) -> bool {
        self.list.iter().any(|c| c.masterdown != 0)
    }

    /// The group whose unit ended last (`propose_changes` logs its record there).
    pub fn last_mut(&mut self) -> &mut ClusterIo {
        let last = self.last;
        let i = self.list.iter().position(|c| c.group == last).unwrap_or(0);
        &mut self.list[i]
    }

    /// Whether a reply held for `group`'s log may leave (`ClusterIo::verdict`); a group this
    /// node no longer runs never confirms it.
    pub fn verdict(&self, group: GroupId, index: u64, read: u64, term: u64) -> Verdict {
        match self.get(group) {
            Some(c) => c.verdict(index, read, term),
            None => Verdict::Drop,
        }
    }

    /// Active expiry (deletions the log carries) is each group's serving leader's: a node's
    /// sweep deletes the keys of the groups it serves as leader, and its record is split into
    /// one entry per group (`propose_per_group`). One group: all keys or none, as a lone
    /// leader's.
    pub fn may_expire(&self) -> Expirable {
        if let [only] = &self.list[..] {
            return if only.may_expire() {
                Expirable::All
            } else {
                Expirable::Nothing
            };
        }
        let led: Vec<GroupId> = self
            .list
            .iter()
            .filter(|c| c.may_expire())
            .map(|c| c.group)
            .collect();
        if led.is_empty() {
            Expirable::Nothing
        } else if !self.slots.any_frozen() && self.slots.groups().iter().all(|g| led.contains(g)) {
            Expirable::All
        } else {
            Expirable::Groups(led)
        }
    }

    /// Whether `key`'s slot belongs to one of `groups` and is not being moved to another group
    /// (a slot in transit is written by no log until its import: exec/reshard.rs).
    pub fn key_in(&self, groups: &[GroupId], key: &[u8]) -> bool {
        let slot = group::key_hash_slot(key);
        groups.contains(&self.slots.group_of(slot)) && !self.slots.frozen(slot)
    }

    /// Whether this node serves as leader the group owning `key`'s slot, and the slot is not
    /// being moved (what its FLUSHALL and FLUSHDB empty where it runs several groups).
    pub fn serves_key(&self, key: &[u8]) -> bool {
        let slot = group::key_hash_slot(key);
        !self.slots.frozen(slot)
            && self
                .get(self.slots.group_of(slot))
                .is_some_and(|c| c.may_expire())
    }

    /// The group this node describes itself by (ROLE, INFO replication, HELLO): the first
    /// group owning slots that it leads, else the home group.
    pub fn own_group(&self) -> GroupId {
        if !self.split() {
            return GroupId::HOME;
        }
        self.list
            .iter()
            .find(|c| c.core.is_leader() && self.slots.groups().contains(&c.group))
            .map_or(GroupId::HOME, |c| c.group)
    }

    /// Whether this node serves as leader every group owning slots, and no slot is moving.
    pub fn serves_all(&self) -> bool {
        !self.slots.any_frozen()
            && self
                .list
                .iter()
                .filter(|c| self.slots.groups().contains(&c.group))
                .all(|c| c.may_expire())
    }

    /// Whether this node serves as leader any group owning slots.
    pub fn serves_any(&self) -> bool {
        self.list
            .iter()
            .any(|c| c.may_expire() && self.slots.groups().contains(&c.group))
    }

    /// Whether this node leads no group (its log lines then say `S`).
    fn replica_everywhere(&self) -> bool {
        !self.list.iter().any(|c| c.core.is_leader())
    }

    /// Shutting down: true while some group's leadership is being handed over.
    pub fn hand_over(&mut self, now: Instant) -> bool {
        let mut any = false;
        for c in &mut self.list {
            any |= c.hand_over(now);
        }
        any
    }

    /// The descriptor the loop's epoll watches for peer messages (`receive`).
    pub fn peer_fd(&self) -> std::os::fd::RawFd {
        self.peers.poll_fd()
    }

    /// Steps every message the peers sent since the last call into its group's node: read
    /// here, on the loop's own thread, so an append or an ack costs no thread wake-up between
    /// the socket and raft. True if there was any.
    fn receive(&mut self) -> bool {
        let Groups { peers, list, .. } = self;
        let mut now = None;
        peers.receive(&mut |g, m| {
            let t = *now.get_or_insert_with(Instant::now);
            // The transport delivers only the groups it was told of (`Peers::set_groups`).
            let Some(c) = list.iter_mut().find(|c| c.group == g) else {
                return;
            };
            match c.heard.iter_mut().find(|(id, _)| *id == m.from) {
                Some(h) => h.1 = t,
                None => c.heard.push((m.from, t)),
            }
            if let Err(e) = c.core.step(m) {
                tracing::debug!("Dropped a peer message for {g}: {e}");
            }
        });
        now.is_some()
    }

    /// Before the round: steps what the peers sent, so the replies their acks committed can
    /// be released (`Server::release_held`) and written before the round's fsync of newer
    /// entries (`cluster_round`), which would only add its own latency to theirs (committed
    /// is on a majority's disk already).
    pub fn take_acks(&mut self) {
        self.receive();
        // This node's own log writes (a leader's, made beside the loop) count as an ack too.
        let mut released = false;
        for c in &mut self.list {
            let (peers, group) = (&self.peers, c.group);
            match c.core.take_durable(&mut |m| peers.send(group, m)) {
                Ok(r) => released |= r,
                Err(e) => fatal(&format!("The cluster log of {group} failed: {e}")),
            }
        }
        if released {
            self.peers.flush();
        }
    }

    /// A peer's link is down: every group's raft stops sending it appends until it answers.
    pub fn report_unreachable(&mut self, id: u64) {
        for c in &mut self.list {
            c.core.report_unreachable(id);
        }
    }

    /// When raft's clock next ticks (every group ticks together).
    pub fn next_tick(&self) -> Instant {
        self.list[0].next_tick
    }

    pub fn tick_until(&mut self, now: Instant) {
        for c in &mut self.list {
            c.tick_until(now);
        }
    }
}

/// The file in `<dir>/cluster` that records the slot table the node's logs were created with.
const SLOT_TABLE_FILE: &str = "slot-groups";

/// A table as `cluster-slot-groups` spells it: each range in slot order, `<group>:<a>-<b>`.
fn spell_table(slots: &SlotMap) -> String {
    let mut rows: Vec<(u16, u16, u32)> = slots
        .groups()
        .iter()
        .flat_map(|&g| slots.ranges(g).into_iter().map(move |(a, b)| (a, b, g.0)))
        .collect();
    rows.sort_unstable();
    let rows: Vec<String> = rows
        .iter()
        .map(|(a, b, g)| format!("{g}:{a}-{b}"))
        .collect();
    rows.join(" ")
}

/// The slot→group table this node starts with: `cluster-groups` / `cluster-slot-groups` (the
/// same on every node; `DEADBOLT_CLUSTER_GROUPS`, `<group>:<first>-<last>,…` with the slots it
/// does not name the home group's, stands for them when they are unset). A node's first start
/// records it in `<dir>/cluster/slot-groups`; a later start with another table is refused (the
/// groups' logs hold the keys of the slots they were created with). A directory whose logs
/// predate the record was created with one group.
fn start_table(config: &Config) -> std::io::Result<SlotMap> {
    let configured = config.cluster_groups != 1 || !config.cluster_slot_groups.is_empty();
    let slots = match std::env::var("DEADBOLT_CLUSTER_GROUPS") {
        Ok(spec) if !configured => SlotMap::parse(&spec).map_err(std::io::Error::other)?,
        _ => {
            let mut m = SlotMap::default();
            for r in config.slot_table() {
                m.assign(r.first, r.last, GroupId(r.group))
                    .map_err(std::io::Error::other)?;
            }
            m
        }
    };
    let spelled = spell_table(&slots);
    let dir = std::path::Path::new(&config.dir).join("cluster");
    let path = dir.join(SLOT_TABLE_FILE);
    let recorded = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text.trim().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let has_logs = ["raft.state", "raft.log", "snapshot.meta"]
                .iter()
                .any(|f| dir.join(f).exists());
            has_logs.then(|| spell_table(&SlotMap::default()))
        }
        Err(e) => return Err(e),
    };
    match recorded {
        Some(r) if r == spelled => {}
        Some(r) => {
            return Err(std::io::Error::other(format!(
                "the slot table configured (cluster-groups / cluster-slot-groups: \"{spelled}\") \
                 is not the one this node's cluster logs in {} were created with (\"{r}\"); \
                 start it with cluster-slot-groups \"{r}\", as every node of the cluster \
                 (resharding, not configuration, moves slots between groups)",
                dir.display()
            )))
        }
        None => {
            std::fs::create_dir_all(&dir)?;
            let tmp = dir.join(format!("{SLOT_TABLE_FILE}.tmp"));
            let mut f = std::fs::File::create(&tmp)?;
            std::io::Write::write_all(&mut f, format!("{spelled}\n").as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            std::fs::File::open(&dir)?.sync_all()?;
        }
    }
    if slots.groups().len() > 1 {
        tracing::info!("Cluster slot table: {spelled}");
    }
    Ok(slots)
}

impl ClusterIo {
    /// Opens `group`'s log: the home group's in `<dir>/cluster`, any other's in
    /// `<dir>/cluster/group-<id>`.
    fn open(config: &Config, group: GroupId) -> std::io::Result<ClusterIo> {
        let me = config.cluster_node_id;
        // A joining node starts with no membership and learns it from the leader's snapshot.
        let bootstrap: Addrs = if config.cluster_join {
            Addrs::new()
        } else {
            config
                .cluster_peers
                .iter()
                .map(|p| (p.id, p.addr()))
                .collect()
        };
        let mut dir = std::path::Path::new(&config.dir).join("cluster");
        if group != GroupId::HOME {
            dir.push(format!("group-{}", group.0));
        }
        std::fs::create_dir_all(&dir)?;
        let core = Cluster::open(&dir, me, &bootstrap)?;
        // A node starts as a follower: its log lines say `S` until it leads.
        crate::logging::set_replica(true);
        let view = core.view();
        // The members it knows, and (for a joining node, which knows none yet) the ones the
        // configuration names: it must reach the leader to answer it.
        let mut dialed: Addrs = config
            .cluster_peers
            .iter()
            .filter(|p| p.id != me)
            .map(|p| (p.id, p.addr()))
            .collect();
        dialed.extend(
            view.members
                .iter()
                .filter(|m| m.id != me && !m.addr.is_empty())
                .map(|m| (m.id, m.addr.clone())),
        );
        let mut probes = super::probe::Probes::new();
        for (&id, a) in &dialed {
            probes.set(id, probe_target(a));
        }
        Ok(ClusterIo {
            group,
            preferred: 0,
            spread_at: None,
            several: false,
            redirect_blocked: false,
            relink: false,
            core,
            view,
            dialed,
            next_tick: Instant::now() + TICK,
            gate_open: false,
            extend_index: 0,
            gate_waiting: Vec::new(),
            read_parked: Vec::new(),
            read_cleared: 0,
            read_confirmed: Vec::new(),
            read_reask_at: Instant::now(),
            discovery_parked: Vec::new(),
            raft_leader: 0,
            hastened_term: 0,
            hastened_at: None,
            hasten_retries: 0,
            discovery_cleared: 0,
            masterdown: 0,
            probes,
            last_unit_logged: false,
            transfer_asked: false,
            last_unit_transfer: false,
            broken: false,
            announced_leader: 0,
            compacted_at: 0,
            building: None,
            heard: Vec::new(),
            handing_over: None,
            view_due: Instant::now(),
            opened: Instant::now(),
            masters_refused: VecDeque::new(),
            drift: config.cluster_clock_drift,
            snapshot_every: config.cluster_snapshot_every,
            buf: Vec::new(),
        })
    }

    pub fn is_leader(&self) -> bool {
        self.core.is_leader()
    }

    /// The log index the state reflects: on a leader, its last proposal (it ran its units
    /// before logging them), elsewhere what was applied.
    fn state_index(&self) -> u64 {
        if self.core.is_leader() {
            self.core.proposed().max(self.core.applied())
        } else {
            self.core.applied()
        }
    }

    /// A leader whose EXTEND is not applied yet, or that is handing leadership over (raft
    /// drops proposals meanwhile, which would undo the unit and close its client): client
    /// batches wait, and run once it serves again or has stepped down (then redirected).
    pub fn gate_shut(&self) -> bool {
        self.core.is_leader() && (!self.gate_open || self.core.transferring())
    }

    /// Active expiry (deletions the log carries) is the serving leader's alone.
    pub fn may_expire(&self) -> bool {
        self.core.is_leader() && self.gate_open && !self.core.transferring()
    }

    /// Replies wait for the log only on a leader: a follower's are errors or replica reads.
    pub fn holds_replies(&self) -> bool {
        self.core.is_leader()
    }

    /// Shutting down: true while leadership is being handed to the most caught-up voter (for
    /// at most an election timeout); false once it is gone or there is nobody to hand it to.
    pub fn hand_over(&mut self, now: Instant) -> bool {
        if !self.core.is_leader() {
            return false;
        }
        match self.handing_over {
            Some(deadline) => now < deadline,
            None => {
                let me = self.core.id();
                let best = self
                    .view
                    .members
                    .iter()
                    .filter(|m| m.id != me && m.voter && m.active)
                    .max_by_key(|m| m.matched);
                let Some(to) = best.map(|m| m.id) else {
                    return false;
                };
                tracing::info!("Handing leadership to node {to} before shutting down");
                self.core.transfer_leader(to);
                self.handing_over = Some(now + TICK * 20);
                true
            }
        }
    }

    /// A follower's batch that reads waits for a read barrier confirmed by the leader (see
    /// `cmd::role::replica_read_needs_leader`).
    pub fn park_read(&mut self, client: u64) {
        let now = Instant::now();
        if self.read_parked.is_empty() {
            self.read_reask_at = now + READ_REASK;
        }
        let seq = self.core.need_read();
        self.read_parked.push((seq, client, now));
    }

    /// Whether this node knows a leader it can vouch for: itself, or one it heard from within
    /// `LEADER_SUSPECT` whose process the probe has not found gone. A dead leader is named to
    /// no client once this node can tell (a client sent there would only be refused, and
    /// redis-py then falls through to the next Sentinel in its list: the dead node itself).
    pub fn discovery_ready(&self, now: Instant) -> bool {
        let leader = self.view.leader;
        if leader == 0 {
            return false;
        }
        if leader == self.core.id() {
            return true;
        }
        self.leader_alive(leader, now)
    }

    /// Milliseconds since member `id` was last heard from, through raft or the probe's PINGs
    /// (itself: 0; never: since this node started).
    pub fn idle_ms(&self, id: u64, now: Instant) -> u64 {
        if id == self.core.id() {
            return 0;
        }
        let heard = self.heard.iter().find(|h| h.0 == id).map(|h| h.1);
        let pinged = self.probes.seen(id).last_ok;
        let last = heard.max(pinged).unwrap_or(self.opened);
        now.saturating_duration_since(last).as_millis() as u64
    }

    /// True the first time `client` asks this leader SENTINEL MASTERS (remembered, so it is
    /// told no master); false while it asked within `MASTERS_REASK` (each ask renews that).
    /// At most `MASTERS_REFUSED_MAX` clients are remembered (the oldest go first).
    pub fn first_masters_ask(&mut self, client: u64, now: Instant) -> bool {
        while self
            .masters_refused
            .front()
            .is_some_and(|&(_, t)| now.duration_since(t) >= MASTERS_REASK)
        {
            self.masters_refused.pop_front();
        }
        let again = match self.masters_refused.iter().position(|r| r.0 == client) {
            Some(i) => {
                self.masters_refused.remove(i);
                true
            }
            None => false,
        };
        if self.masters_refused.len() >= MASTERS_REFUSED_MAX {
            self.masters_refused.pop_front();
        }
        self.masters_refused.push_back((client, now));
        !again
    }

    fn leader_alive(&self, leader: u64, now: Instant) -> bool {
        let heard = self
            .heard
            .iter()
            .any(|&(id, t)| id == leader && now.duration_since(t) < LEADER_SUSPECT);
        heard && !self.probes.seen(leader).refused
    }

    /// A batch asking where the master is, on a node that cannot name a live leader yet: it
    /// waits (without blocking the loop) for the election rather than answer "no master",
    /// which sends clients on to the next Sentinel in their list, often the dead leader.
    pub fn park_discovery(&mut self, client: u64, masters: bool) {
        match self.discovery_parked.iter_mut().find(|p| p.0 == client) {
            Some(p) => p.2 |= masters,
            None => self
                .discovery_parked
                .push((client, Instant::now(), masters)),
        }
    }

    /// A follower that knows its leader's process is gone starts the election at once (as
    /// raft's leadership transfer does: no pre-vote, and voters do not wait out their leader
    /// lease) rather than after raft's election timeout. Only when raft has been silent too,
    /// so a leader that is alive but unreachable on its client port is never deposed by it.
    fn hasten_election(&mut self, now: Instant) {
        let leader = self.raft_leader;
        let me = self.core.id();
        let term = self.core.term();
        if let Some(at) = self.hastened_at {
            // Still no leader: a vote was lost (a peer link that pointed at a process since
            // restarted loses what is written to it, and is redialled on the next write), so
            // campaign again rather than wait out raft's election timeout.
            if leader != 0 || self.core.is_leader() || self.hasten_retries >= HASTEN_RETRIES {
                self.hastened_at = None;
            } else if now.duration_since(at) >= HASTEN_RETRY {
                self.hastened_at = Some(now);
                self.hasten_retries += 1;
                self.core.campaign();
            }
            return;
        }
        if leader == 0 || leader == me || self.hastened_term == term || self.core.is_leader() {
            return;
        }
        let seen = self.probes.seen(leader);
        let last_heard = self.heard.iter().find(|h| h.0 == leader).map(|h| h.1);
        let silent_since = match last_heard {
            Some(t) if now.duration_since(t) >= HASTEN_SILENCE => t,
            _ => return,
        };
        if !seen.refused {
            return;
        }
        // Live voters other than the dead leader, by id: the first goes first.
        let Some(rank) = self
            .view
            .members
            .iter()
            .filter(|m| m.voter && m.id != leader && (m.id == me || m.active))
            .position(|m| m.id == me)
        else {
            return; // a learner never campaigns
        };
        let mut delay = HASTEN_SILENCE + HASTEN_STAGGER * rank as u32;
        if self.discovery_parked.iter().any(|p| p.2) {
            delay += HASTEN_DEFER;
        }
        if now.duration_since(silent_since) < delay {
            return;
        }
        self.hastened_term = term;
        self.hastened_at = Some(now);
        self.hasten_retries = 0;
        let mut m = raft::eraftpb::Message::default();
        m.set_msg_type(raft::eraftpb::MessageType::MsgTimeoutNow);
        m.from = leader;
        m.to = me;
        m.term = term;
        tracing::info!(
            "Cluster node {me}: leader {leader} is gone (its port refuses): starting the election"
        );
        if let Err(e) = self.core.step(m) {
            tracing::debug!("Could not start the election: {e}");
        }
    }

    pub fn admin(&mut self, op: &crate::replication::Admin) -> Result<(), String> {
        self.core.admin(op)?;
        // The reply of RAFT (keyless) waits for the home group only: another group's transfer
        // cannot outrun a barrier it is not behind.
        if matches!(op, crate::replication::Admin::Transfer(_)) && self.group == GroupId::HOME {
            self.transfer_asked = true;
        }
        Ok(())
    }

    /// Who leads this group, for an error naming where to send a command: "node N at
    /// host:port leads it", or that none is known yet.
    fn leader_named(&self) -> String {
        let leader = self.view.leader;
        match self.view.members.iter().find(|m| m.id == leader) {
            Some(m) if leader != 0 => {
                let (host, port) = client_addr(&m.addr);
                format!("node {leader} at {host}:{port} leads it")
            }
            _ => "no leader is known yet: retry".to_string(),
        }
    }

    /// With several groups, group n's preferred leader is the n-th of its voters in id order
    /// (modulo their number), recomputed whenever its membership changes, so the groups'
    /// leaders spread over the current voters (a node added leads its share, a node removed
    /// none). A changed preference is acted on at the leader's next round.
    fn prefer(&mut self) {
        if !self.several {
            return;
        }
        let mut voters: Vec<u64> = self
            .view
            .members
            .iter()
            .filter(|m| m.voter)
            .map(|m| m.id)
            .collect();
        voters.sort_unstable();
        let preferred = if voters.is_empty() {
            0
        } else {
            voters[self.group.0 as usize % voters.len()]
        };
        if preferred != self.preferred {
            self.preferred = preferred;
            self.spread_at = None;
        }
    }

    /// Ticks raft for the periods elapsed by `now`, at most `MAX_CATCH_UP` of them. After a
    /// stall of the loop (a slow fsync, a starved CPU) replaying every missed tick at once would
    /// let raft see a whole election timeout pass without stepping a single message that queued
    /// meanwhile: a leader would depose itself (check_quorum finds no follower active) although
    /// its followers are fine, and a follower would campaign against a live leader. Ticks are
    /// raft's only clock, and losing some only lengthens its timeouts for a moment, which is
    /// safe (reads use ReadIndex, never a lease). Seen under load in bench/run's cluster
    /// section: a leader dropped every client after its loop stalled.
    fn tick_until(&mut self, now: Instant) {
        let mut ticked = 0;
        while now >= self.next_tick {
            if ticked < MAX_CATCH_UP {
                self.core.tick();
                ticked += 1;
            }
            self.next_tick += TICK;
        }
    }

    /// What a batch's reply waits for: the commit of the newest proposal, or a read barrier
    /// when the batch's last unit logged nothing.
    pub fn watermark(&mut self) -> Watermark {
        let term = self.core.term();
        if self.last_unit_transfer && !self.last_unit_logged && !self.broken {
            // An earlier write of the batch (pipelined before RAFT TRANSFER) still waits for
            // its commit: its reply must not leave with the transfer's OK.
            let proposed = self.core.proposed();
            let index = if proposed <= self.core.commit() {
                0
            } else {
                proposed
            };
            return Watermark::Committed {
                group: self.group,
                index,
                read: 0,
                term,
            };
        }
        let read = if self.last_unit_logged {
            0
        } else {
            self.core.need_read()
        };
        let index = if self.broken {
            u64::MAX
        } else {
            self.core.proposed()
        };
        Watermark::Committed {
            group: self.group,
            index,
            read,
            term,
        }
    }

    /// Whether a reply held for `Watermark::Committed { index, read, term }` may leave (any
    /// order across clients: the hold queue keeps each client's own order).
    ///
    /// Only while raft still leads in the term the reply was held in: a message stepped since
    /// the last round (`receive`) can depose this node and carry a new leader's commit index,
    /// and its log may hold other entries at the held indexes. A leader never overwrites its
    /// own log within its term, so there `index <= commit` is this node's own entry. A
    /// deposed leader's held replies wait for the round's step-down, which drops them.
    pub fn verdict(&self, index: u64, read: u64, term: u64) -> Verdict {
        // index 0 without a barrier: RAFT TRANSFER's OK, which claims nothing of the log.
        let free = index == 0 && read == 0;
        let core = &self.core;
        let covered =
            Some(term) == core.leading_term() && index <= core.commit() && core.read_done(read);
        if free || covered {
            Verdict::Release
        } else {
            Verdict::Wait
        }
    }

    /// After the round: the parked batches that may go on (their barrier confirmed or given
    /// up, an election over, the gate open), taken out of their lists.
    fn take_parked(&mut self, now: Instant) -> Parked {
        let mut p = Parked::default();
        if !self.read_parked.is_empty() {
            let core = &self.core;
            self.read_parked.retain(|&(seq, id, since)| {
                if core.read_done(seq) {
                    p.reads_ready.push(id);
                    false
                } else if now.duration_since(since) >= READ_GIVE_UP {
                    p.reads_given_up.push(id);
                    false
                } else {
                    true
                }
            });
            if !self.read_parked.is_empty() && now >= self.read_reask_at {
                self.core.reask_reads();
                self.read_reask_at = now + READ_REASK;
            }
        }
        if !self.core.is_leader() {
            self.hasten_election(now);
        } else {
            self.spread_leadership(now);
        }
        if !self.discovery_parked.is_empty() {
            let ready = self.discovery_ready(now);
            self.discovery_parked.retain(|&(id, since, _)| {
                if ready || now.duration_since(since) >= DISCOVERY_HOLD {
                    p.discovery_ready.push(id);
                    false
                } else {
                    true
                }
            });
        }
        let open_now = !self.gate_shut() && !self.gate_waiting.is_empty();
        if open_now || !self.core.is_leader() {
            p.waiting = std::mem::take(&mut self.gate_waiting);
        }
        p
    }

    /// A serving leader of a group with a preferred leader elsewhere hands leadership to it
    /// when it is a voter whose raft answers (heard within `SPREAD_HEARD`, its client port not
    /// refusing) and whose log is
    /// within `SPREAD_MAX_LAG` of the commit (raft sends it the rest first; proposals wait
    /// while a transfer is under way, so none is started towards a node far behind), and
    /// tries again every `SPREAD_RETRY` while it still leads: a node that was down takes its
    /// share back once it has caught up.
    fn spread_leadership(&mut self, now: Instant) {
        let to = self.preferred;
        if to == 0 || to == self.core.id() || !self.gate_open {
            return;
        }
        if self
            .spread_at
            .is_some_and(|t| now.saturating_duration_since(t) < SPREAD_RETRY)
        {
            return;
        }
        // Its client port must not refuse either: a preferred leader just killed was heard
        // moments ago, and a transfer towards it would shut the gate until raft gives the
        // transfer up (an election timeout), right after the failover that replaced it.
        let answers = !self.probes.seen(to).refused
            && self
                .heard
                .iter()
                .any(|&(id, t)| id == to && now.saturating_duration_since(t) < SPREAD_HEARD);
        let commit = self.view.commit;
        if answers
            && self.view.members.iter().any(|m| {
                m.id == to && m.voter && commit.saturating_sub(m.matched) <= SPREAD_MAX_LAG
            })
        {
            self.spread_at = Some(now);
            tracing::info!("Cluster {}: handing leadership to node {to}", self.group);
            self.core.transfer_leader(to);
        }
    }

    fn refresh_view(&mut self, now: Instant) {
        self.view = self.core.view();
        self.raft_leader = self.view.leader;
        let me = self.core.id();
        // Silent for longer than the longest election timeout: down, as Sentinel's s_down.
        // Heard through raft (leader and followers) or answering the probe's PINGs (the only
        // news a follower has of the other followers).
        let window = TICK * 20;
        for m in &mut self.view.members {
            let heard = self
                .heard
                .iter()
                .any(|&(id, t)| id == m.id && now.duration_since(t) < window);
            let seen = self.probes.seen(m.id);
            let pinged = !seen.refused
                && seen
                    .last_ok
                    .is_some_and(|t| now.saturating_duration_since(t) < window);
            m.active = m.id == me || heard || pinged;
        }
        // A leader whose process is gone is no longer named (ROLE, INFO, SENTINEL), though
        // raft keeps it until the election ends.
        if self.view.leader != me && self.view.leader != 0 {
            let leader = self.view.leader;
            if self.probes.seen(leader).refused && !self.leader_alive(leader, now) {
                self.view.leader = 0;
            }
        }
        self.view_due = now + TICK;
    }
}

/// The other members of every group, by id (a member's address as the first group naming it
/// has it: the home group's first).
fn targets_of(list: &[ClusterIo]) -> Addrs {
    let mut all = Addrs::new();
    for c in list {
        for (id, addr) in &c.dialed {
            all.entry(*id).or_insert_with(|| addr.clone());
        }
    }
    all
}

/// "host port peerport" → "host:peerport".
fn peer_target(addr: &str) -> Option<String> {
    let mut w = addr.split(' ');
    let host = w.next()?;
    let _port = w.next()?;
    let peer = w.next()?;
    Some(format!("{host}:{peer}"))
}

/// "host port peerport" → "host:port", the client port the probe PINGs.
fn probe_target(addr: &str) -> Option<String> {
    let mut w = addr.split(' ');
    let host = w.next()?;
    let port = w.next()?;
    if port == "0" {
        return None;
    }
    Some(super::peer::addr_of(host, port.parse().ok()?))
}

/// "host port peerport" → (host, port): where clients reach a member.
fn client_addr(addr: &str) -> (&str, &str) {
    let mut w = addr.split(' ');
    (w.next().unwrap_or(""), w.next().unwrap_or("0"))
}

impl Server {
    /// After a client's unit: the groups it went to join the batch's (its output waits for
    /// each), and its last logged write is remembered for WAIT, with its group. A unit that
    /// logged nothing read from the groups of its keys (`Groups::note_unit_keys`; none: the
    /// home group): each one this node leads covers it with a read barrier. One that spanned
    /// groups was refused and undone in every group this node leads: its output waits for
    /// them all, and is dropped when they rebuild.
    #[inline]
    pub fn note_write(&mut self, client: &mut crate::machine::client::Client) {
        if let Some(gs) = self.io.cluster.as_mut() {
            gs.note_unit(client);
        }
    }
}

impl Groups {
    /// `Server::note_write` in a cluster.
    #[inline(never)]
    fn note_unit(&mut self, client: &mut crate::machine::client::Client) {
        let gs = self;
        let keys = match std::mem::take(&mut gs.unit_keys) {
            0 => bit(0),
            k => k,
        };
        // A unit split by group (`propose_per_group`): its output waits for every part, and
        // is dropped with a part that was undone (its group's watermark is never reached).
        for g in std::mem::take(&mut gs.split_parts) {
            gs.touched |= bit(gs.position(g));
        }
        // The groups this unit broke (a refused proposal, a unit spanning groups): its output
        // is dropped with their rebuild.
        gs.touched |= std::mem::take(&mut gs.unit_broke);
        let last = gs.position(gs.last);
        let c = &gs.list[last];
        if c.last_unit_logged {
            client.repl_index = c.core.proposed();
            client.repl_group = gs.last;
            gs.touched |= bit(last);
            if keys & !bit(last) == 0 {
                return;
            }
        }
        if !gs.split() {
            gs.touched |= bit(0);
            return;
        }
        // The groups of the keys it read; one another unit broke has applied what its log
        // will undo, so a read of its keys waits for a watermark never reached and is dropped.
        let mut set = keys & !bit(last);
        if !c.last_unit_logged {
            set |= keys;
        }
        for (i, c) in gs.list.iter_mut().enumerate() {
            if set & bit(i) != 0 && !c.broken {
                c.last_unit_logged = false;
            }
        }
        gs.touched |= set;
    }
}

impl Server {
    /// End of a unit in cluster mode: its effects become a log entry of the group owning the
    /// slot of the keys it changed (a leader records; a follower's apply records nothing).
    pub(super) fn propose_changes(&mut self) {
        let Some(gs) = self.io.cluster.as_mut() else {
            return;
        };
        let changed = self.state.dbs.take_changes(&mut self.changes);
        gs.split_parts.clear();
        gs.unit_broke = 0;
        let group = if changed {
            match group::group_of_record(&self.changes, &gs.slots) {
                Ok(g) => g,
                Err(_) if self.changes.per_key => {
                    propose_per_group(gs, &self.state.dbs, &self.changes);
                    return;
                }
                Err((a, b)) => {
                    // One entry cannot commit in two logs: the unit is undone, as a refused
                    // proposal is, in every group it may have touched (each one this node
                    // leads is rebuilt from its log at the end of the round).
                    tracing::warn!("A unit changed keys of {a} and {b}: not logged, rebuilding");
                    for (i, c) in gs.list.iter_mut().enumerate() {
                        if c.core.is_leader() {
                            c.broken = true;
                            c.last_unit_logged = false;
                            gs.unit_broke |= bit(i);
                        }
                    }
                    gs.last = GroupId::HOME;
                    return;
                }
            }
        } else {
            GroupId::HOME
        };
        gs.last = group;
        let c = gs.last_mut();
        c.last_unit_transfer = std::mem::take(&mut c.transfer_asked);
        if !changed {
            c.last_unit_logged = false;
            return;
        }
        c.buf.clear();
        // Each entry selects its own database: followers may start from any entry (after a
        // snapshot), so none relies on an earlier one's SELECT.
        emit::unit(&mut c.buf, &mut None, &self.state.dbs, &self.changes);
        emit::publishes(&mut c.buf, &self.changes);
        if c.buf.is_empty() {
            c.last_unit_logged = false;
            return;
        }
        match c.core.propose_unit(c.buf.clone()) {
            Ok(_) => c.last_unit_logged = true,
            Err(e) => {
                tracing::warn!("A unit could not be logged ({e}): rebuilding from the log");
                c.broken = true;
                c.last_unit_logged = false;
                gs.unit_broke |= bit(gs.position(group));
            }
        }
    }

    /// One consensus round, after the round's commands, for every group: persist and send
    /// raft's output, apply what committed, react to leadership changes, release the replies
    /// the log now covers, then run the batches that were parked and may go on.
    pub(super) fn cluster_round(&mut self) {
        let Some(mut gs) = self.io.cluster.take() else {
            return;
        };
        // Usually done by the loop already (`take_acks`, then the replies are written).
        gs.receive();
        let mut role_changed = false;
        for i in 0..gs.list.len() {
            let others_lead = gs
                .list
                .iter()
                .enumerate()
                .any(|(j, c)| j != i && c.core.is_leader());
            let Groups {
                list, slots, peers, ..
            } = &mut gs;
            role_changed |= self.group_round(&mut list[i], peers, slots, others_lead);
        }
        if role_changed {
            crate::logging::set_replica(gs.replica_everywhere());
        }
        if gs.list.iter().any(|c| c.relink) {
            for c in &mut gs.list {
                c.relink = false;
            }
            gs.link_members();
        }
        // What arrived during the round's fsync (a leader's acks, a follower's next appends)
        // is stepped now rather than after the next poll and the client batches it brings:
        // acks commit replies that leave at the end of this turn. The turn after comes at
        // once, as the loop must not sleep on messages stepped but not yet processed (the
        // socket they came from is drained, so epoll would not wake it).
        if gs.receive() || gs.list.iter().any(|c| c.core.has_ready()) {
            gs.peers.wake_loop();
        }
        let now = Instant::now();
        let mut parked = Vec::with_capacity(gs.list.len());
        for i in 0..gs.list.len() {
            let Groups { list, slots, .. } = &mut gs;
            let c = &mut list[i];
            self.release_held_by(c);
            self.maybe_compact(c, slots);
            self.reshard_round(c, slots);
            parked.push((c.group, c.take_parked(now)));
        }
        self.io.cluster = Some(gs);
        if self.state.waiters.has_ready() {
            super::blocking::serve_ready(self);
        }
        for (group, p) in parked {
            self.run_parked(group, p);
        }
    }

    /// Runs the batches a group's round let go on (see `Parked`).
    fn run_parked(&mut self, group: GroupId, p: Parked) {
        let mark = |srv: &mut Server, f: &dyn Fn(&mut ClusterIo)| {
            if let Some(c) = srv.io.cluster.as_mut().and_then(|g| g.get_mut(group)) {
                f(c);
            }
        };
        for id in p.waiting {
            self.run_batch(id, &mut Vec::new());
        }
        for id in p.reads_given_up {
            // Redis's replica with its master link down (replica-serve-stale-data no): the
            // batch runs, and what would read answers MASTERDOWN.
            tracing::debug!("A replica read found no leader to confirm it: MASTERDOWN");
            mark(self, &|c| c.masterdown = id);
            self.run_batch(id, &mut Vec::new());
            mark(self, &|c| c.masterdown = 0);
        }
        for id in p.discovery_ready {
            mark(self, &|c| c.discovery_cleared = id);
            self.run_batch(id, &mut Vec::new());
            mark(self, &|c| c.discovery_cleared = 0);
        }
        for id in p.reads_ready {
            mark(self, &|c| c.read_cleared = id);
            self.run_batch(id, &mut Vec::new());
            mark(self, &|c| c.read_cleared = 0);
        }
    }

    /// One group's part of the round, up to the release of the replies it committed. True if
    /// this node's role in the group changed.
    fn group_round(
        &mut self,
        c: &mut ClusterIo,
        peers: &mut Peers,
        slots: &SlotMap,
        others_lead: bool,
    ) -> bool {
        self.release_held_by(c);
        let mut extend_applied = 0u64;
        let commit_before = c.view.commit;
        let mut conf_changed = false;
        let group = c.group;
        let outcome = {
            let peers = &*peers;
            let mut send = |m| peers.send(group, m);
            let mut sent = || peers.flush();
            let mut apply = |index: u64, a: Applied| match a {
                Applied::Extend(ms) => {
                    shift_group_deadlines(&mut self.state.dbs, slots, group, ms);
                    self.state.dbs.discard_changes();
                    extend_applied = index;
                }
                Applied::Conf(_) => conf_changed = true,
                other => {
                    // A snapshot carries the membership too.
                    conf_changed |= matches!(other, Applied::Snapshot(_));
                    self.apply_entry(group, slots, index, other)
                }
            };
            match c.core.on_round(&mut send, &mut sent, &mut apply) {
                Ok(o) => o,
                Err(e) => fatal(&format!("The cluster log of {group} failed: {e}")),
            }
        };
        if outcome.became_leader {
            tracing::info!("Cluster node {}: elected leader of {group}", c.core.id());
            // The election this node hastened, if any, is over: left set, it would campaign
            // again the moment this node steps down (`hasten_election` retries while no
            // leader is known), deposing the leader it just voted for.
            c.hastened_at = None;
            c.gate_open = false;
            self.state.dbs.record_changes(true);
            self.state.dbs.record_publishes(true);
            match c.core.propose_extend(c.drift) {
                Ok(i) => c.extend_index = i,
                Err(e) => tracing::warn!("EXTEND not proposed: {e}"),
            }
        }
        if extend_applied != 0 && c.core.is_leader() && extend_applied >= c.extend_index {
            c.gate_open = true;
            tracing::info!(
                "Cluster node {}: serving as leader of {group} (deadlines extended by {} ms)",
                c.core.id(),
                c.drift
            );
        }
        if outcome.stepped_down
            || outcome.became_leader
            || outcome.leader_changed.is_some()
            || conf_changed
        {
            // The state was replaced, or what it is made exact by may change.
            c.building = None;
        }
        if outcome.stepped_down || c.broken {
            self.step_down(c, slots, others_lead);
        }
        let now = Instant::now();
        if outcome.became_leader
            || outcome.stepped_down
            || conf_changed
            || c.core.commit() != c.view.commit
            || c.core.applied() != c.view.applied
            || outcome.leader_changed.is_some()
            || now >= c.view_due
        {
            c.refresh_view(now);
        }
        if c.redirect_blocked && c.view.leader != 0 {
            // Redirected only once the group's new leader is known, never to CLUSTERDOWN in
            // the moment between its vote and its first append; not at all if this node
            // leads the group again.
            c.redirect_blocked = false;
            if !c.core.is_leader() {
                self.rerun_blocked(group, slots);
            }
        }
        if conf_changed {
            self.follow_membership(c);
        }
        let commit_moved = c.view.commit != commit_before;
        if commit_moved && c.core.is_leader() {
            // Parked WAITs count again.
            for db in 0..self.state.dbs.len() {
                self.state.waiters.signal(db, REPLICAS_KEY);
            }
        }
        if c.view.leader != 0 && c.view.leader != c.announced_leader {
            self.announce_leader(c);
        }
        outcome.became_leader || outcome.stepped_down
    }

    /// A committed entry of `group` on the state machine: a snapshot replaces that group's
    /// data (the keys of its slots; the home group's, the function libraries too), a unit runs
    /// as the loader's commands at time 0 (nothing expires by this node's clock).
    fn apply_entry(&mut self, group: GroupId, slots: &SlotMap, index: u64, a: Applied) {
        // A home group's snapshot holds the leader's libraries too (build_snapshot); a
        // release or an import (reshard.rs) applies on its leader too.
        match a {
            Applied::Unit { data, own } => {
                self.apply_group_data(group, slots, index, data, own, false)
            }
            Applied::Snapshot(data) => {
                self.apply_group_data(group, slots, index, data, false, true)
            }
            Applied::Extend(_) | Applied::Conf(_) => return,
        }
        // A leader applying an earlier leader's entries records them, but they are logged
        // already.
        self.state.dbs.discard_changes();
        self.state.drain_expired();
    }

    /// No longer leader (or a proposal failed): what was held will never be confirmed, so the
    /// connections waiting on it close (the client learns nothing, as if the node died). Without
    /// `cluster-enabled` every other plain client is closed too so it rediscovers the leader
    /// (Sentinel's CLIENT KILL of a demoted master); a Redis Cluster node keeps them and answers
    /// its blocked clients alone (`unblock_stepped_down`). Units that ran but never
    /// committed are undone by replaying the group's log over the keys of its slots
    /// (`apply_entry`'s snapshot install). A node that still leads another group
    /// (`others_lead`) keeps recording changes.
    fn step_down(&mut self, c: &mut ClusterIo, slots: &SlotMap, others_lead: bool) {
        let group = c.group;
        if !c.core.is_leader() {
            tracing::info!("Cluster node {}: no longer leader of {group}", c.core.id());
            if !others_lead {
                self.state.dbs.record_changes(false);
                self.state.dbs.record_publishes(false);
            }
            c.gate_open = false;
        }
        self.holds.settle(|wm| match *wm {
            Watermark::Committed { group: g, .. } if g == group => Verdict::Drop,
            Watermark::Committed { .. } | Watermark::Fsynced => Verdict::Wait,
            Watermark::Ordered => Verdict::Release,
        });
        if !c.core.is_leader() {
            if self.state.config.compat_value("cluster-enabled") == "yes" {
                self.unblock_stepped_down(group, others_lead);
                c.redirect_blocked = others_lead;
            } else {
                // Sentinel's view of a demoted master: every plain client is closed (CLIENT
                // KILL TYPE normal) so it asks where the master went. Several groups without
                // cluster-enabled (only the DEADBOLT_CLUSTER_GROUPS test hook starts that):
                // another than the home group closes its blocked clients alone.
                let all = group == GroupId::HOME || slots.groups().len() == 1;
                let waiters = &self.state.waiters;
                for client in self.state.clients.values() {
                    let closes = if all {
                        !client.pubsub.subscribed()
                    } else {
                        waiters.is_blocked(client.id)
                    };
                    if closes {
                        client.kill();
                    }
                }
            }
        }
        if c.core.proposed() > c.core.applied() || c.broken {
            let recording = self.state.dbs.records_changes();
            self.state.dbs.record_changes(false);
            let mut apply = |index: u64, a: Applied| match a {
                Applied::Extend(ms) => {
                    shift_group_deadlines(&mut self.state.dbs, slots, group, ms);
                }
                other => self.apply_entry(group, slots, index, other),
            };
            if let Err(e) = c.core.replay(&mut apply) {
                fatal(&format!(
                    "Cannot rebuild the state of {group} from its cluster log: {e}"
                ));
            }
            self.state.dbs.record_changes(recording);
            self.state.dbs.record_publishes(recording);
            tracing::warn!(
                "Cluster node {}: state of {group} rebuilt from its log",
                c.core.id()
            );
        }
        c.broken = false;
        c.last_unit_logged = false;
        c.building = None;
    }

    /// A Redis Cluster node (`cluster-enabled yes`) that stopped leading `group` keeps its
    /// clients, as Redis 7.0 keeps them when a failover demotes a master: their commands on
    /// the group's slots get `-MOVED` to its new leader (EXEC of a transaction queued before:
    /// `-MOVED`, the transaction and its WATCHes discarded, as Redis's processCommand), the
    /// rest is served as before. Only clients blocked in a command are answered:
    /// - leading no group now (a Redis master turned replica, replicationSetMaster's
    ///   disconnectAllBlockedClients), at the next turn of the loop: every blocked client gets
    ///   `-UNBLOCKED force unblock from blocking operation, instance state changed (master ->
    ///   replica?)` and is closed;
    /// - still leading another group (a Redis master that lost some slots): a WAIT counting
    ///   `group`'s followers is answered as above (the count is no longer this node's to
    ///   give); the clients blocked on keys of `group`'s slots are redirected once its leader
    ///   is known (`rerun_blocked`); the others stay blocked.
    ///
    /// A reply held for the group's log was dropped before (`step_down`), closing its
    /// connection: whether its write committed is unknown.
    fn unblock_stepped_down(&mut self, group: GroupId, others_lead: bool) {
        self.answer_blocked(|b, client| {
            let answered =
                !others_lead || (b.kind == WaitKind::Replicas && client.repl_group == group);
            answered.then_some(Unblock::Demoted)
        });
    }

    /// Redis's clusterRedirectBlockedClientIfNeeded for a group this node stopped leading:
    /// each client blocked on keys of its slots runs its command again at the next turn of
    /// the loop, which answers `-MOVED` to the group's leader (a READONLY read blocks again,
    /// on this follower, until the deadline it had).
    fn rerun_blocked(&mut self, group: GroupId, slots: &SlotMap) {
        self.answer_blocked(|b, _| {
            let ours = b.kind != WaitKind::Replicas
                && b.keys.iter().any(|k| slots.group_of_key(k) == group);
            ours.then_some(Unblock::Rerun(0))
        });
    }

    /// Each client blocked in a command (and not already closing) that `how` names an answer
    /// for is answered so at the next turn of the loop (`Waiters::answer_now`).
    fn answer_blocked(
        &mut self,
        how: impl Fn(
            &crate::store::waiters::Blocked,
            &crate::machine::client::Client,
        ) -> Option<Unblock>,
    ) {
        let waiters = &mut self.state.waiters;
        if waiters.is_empty() {
            return;
        }
        for client in self.state.clients.values() {
            if client.out.killed() {
                continue;
            }
            let answer = waiters.blocked(client.id).and_then(|b| how(b, client));
            if let Some(answer) = answer {
                waiters.answer_now(client.id, answer);
            }
        }
    }

    /// The group follows its membership: new members are probed, removed ones forgotten, the
    /// preferred leader recomputed; the transport follows after the round (`link_members`).
    fn follow_membership(&mut self, c: &mut ClusterIo) {
        let me = c.core.id();
        let now: Addrs = c
            .view
            .members
            .iter()
            .filter(|m| m.id != me && !m.addr.is_empty())
            .map(|m| (m.id, m.addr.clone()))
            .collect();
        for (id, addr) in &now {
            if c.dialed.get(id) != Some(addr) {
                c.probes.set(*id, probe_target(addr));
            }
        }
        for id in c.dialed.keys() {
            if !now.contains_key(id) {
                c.probes.set(*id, None);
            }
        }
        c.relink |= c.dialed != now;
        c.dialed = now;
        c.prefer();
    }

    /// Tells this node's Sentinel subscribers the leader moved, as redis-sentinel does on every
    /// Sentinel: `+switch-master <name> <old ip> <old port> <new ip> <new port>`.
    fn announce_leader(&mut self, c: &mut ClusterIo) {
        let addr_of = |id: u64| {
            c.view
                .members
                .iter()
                .find(|m| m.id == id)
                .map(|m| client_addr(&m.addr))
        };
        let new = addr_of(c.view.leader);
        let old = addr_of(c.announced_leader);
        if let (Some((nip, nport)), Some((oip, oport))) = (new, old) {
            let msg = format!(
                "{} {oip} {oport} {nip} {nport}",
                self.state.config.sentinel_master_name
            );
            self.state.publish(b"+switch-master", msg.as_bytes(), false);
        }
        c.announced_leader = c.view.leader;
    }

    /// Compacts the log into a snapshot of the state when it grew past its bounds, or when a
    /// lagging follower needs a newer snapshot. The bounds, any of which starts one:
    /// - size: the log's entries take more memory than `LOG_BYTES` or than the last snapshot
    ///   (so a dataset larger than `LOG_BYTES` costs at most one snapshot per its own size of
    ///   log, and memory stays within the dataset's size twice plus `LOG_BYTES`, however far
    ///   behind a follower is: one that needs what was compacted gets the snapshot);
    /// - age: an entry the snapshot does not cover is older than `LOG_AGE`;
    /// - count: `cluster-snapshot-every` entries, and at least one per key, since the last one.
    ///
    /// The snapshot is encoded `SLICE_KEYS` keys per round (`Building`), so the loop never
    /// stops for the whole dataset: 1 M keys took 0.5-1.5 s in one go, on every node at about
    /// the same time, and the followers elected a new leader.
    fn maybe_compact(&mut self, c: &mut ClusterIo, slots: &SlotMap) {
        if c.building.is_some() {
            self.build_snapshot(c, slots);
            return;
        }
        let applied = c.core.applied();
        let wanted = c.core.snapshot_wanted();
        let stats = c.core.log_stats();
        if stats.compacting || applied <= stats.snapshot_index || applied == 0 {
            if wanted {
                // Asked again next round (take_snapshot_wanted cleared it).
                tracing::debug!("Snapshot wanted while one is being written: deferred");
            }
            return;
        }
        let keys: u64 = self.state.dbs.iter().map(|d| d.len() as u64).sum();
        let by_count = applied >= c.compacted_at + c.snapshot_every.max(keys);
        let by_size = stats.log_bytes > LOG_BYTES.max(stats.snapshot_bytes);
        let by_age = stats
            .oldest
            .is_some_and(|t| t.elapsed() >= LOG_AGE && stats.log_bytes > LOG_RETAIN);
        if !(wanted || by_count || by_size || by_age) {
            return;
        }
        let mut data = c.core.wire_prefix();
        // The home group's: the function libraries first, as exec::snapshot (a change to them
        // while the keys are encoded makes the snapshot start over: see `replayable_units`).
        if c.group == GroupId::HOME {
            for code in crate::script::functions::library_codes(&self.state) {
                emit::command(&mut data, &[b"FUNCTION", b"LOAD", &code]);
            }
        }
        c.building = Some(Building {
            from: c.state_index(),
            data,
            db: 0,
            cursor: None,
            to: None,
            began: Instant::now(),
        });
        self.build_snapshot(c, slots);
    }

    /// One round's share of the snapshot being built, and once the dump is complete and the
    /// entries it may be behind are applied, the compaction itself.
    fn build_snapshot(&mut self, c: &mut ClusterIo, slots: &SlotMap) {
        let state_index = c.state_index();
        // Taken while the dump goes on: put in once it ends.
        let claims = c
            .building
            .as_ref()
            .filter(|b| b.to.is_none())
            .and_then(|_| c.claims_head(slots))
            .map(|h| (c.core.wire_prefix().len(), h));
        let Some(b) = c.building.as_mut() else {
            return;
        };
        let dbs = &self.state.dbs;
        let mut budget = SLICE_KEYS;
        while b.to.is_none() && budget > 0 {
            let Some(db) = dbs.get(b.db) else {
                b.to = Some(state_index);
                break;
            };
            let cursor = match b.cursor {
                Some(cursor) => cursor,
                None if db.is_empty() => {
                    b.db += 1;
                    continue;
                }
                None => {
                    emit::command(
                        &mut b.data,
                        &[b"SELECT", itoa::Buffer::new().format(b.db).as_bytes()],
                    );
                    0
                }
            };
            // At time 0 nothing is expired: every key the log has not deleted.
            let out = &mut b.data;
            let start = if cursor == 0 {
                db.len() as u64
            } else {
                cursor.min(db.len() as u64)
            };
            // The group's keys alone (`group_of_key` asks no slot while one group owns all).
            let group = c.group;
            let next = db.scan(cursor, budget, 0, |k, e| {
                if slots.group_of_key(k) == group {
                    emit::key_state(out, k, Some(e))
                }
            });
            budget -= budget.min(start.saturating_sub(next).max(1) as usize);
            if next == 0 {
                b.db += 1;
                b.cursor = None;
            } else {
                b.cursor = Some(next);
            }
        }
        if let (Some(claims), Some(_)) = (claims, b.to) {
            // The group's claims as of the dump's end, ahead of its keys: the window's entries
            // replayed after them hold no release or import (`replayable_units`).
            let at = claims.0.min(b.data.len());
            b.data.splice(at..at, claims.1);
        }
        let Some(to) = b.to else {
            return;
        };
        if c.core.applied() < to {
            return;
        }
        let Some(mut b) = c.building.take() else {
            return;
        };
        if let Some(now) = c.claims_head(slots) {
            // Unchanged since the dump ended, so exact at `to` whichever side of it they
            // were applied on (a release proposed before the dump began may apply after).
            let at = c.core.wire_prefix().len().min(b.data.len());
            if !b.data[at..].starts_with(&now) {
                tracing::info!("Cluster snapshot started over: the group's slot claims changed");
                return;
            }
        }
        let encoded = b.began.elapsed();
        let started = Instant::now();
        match c.core.replayable_units(b.from, to, &mut b.data) {
            Ok(true) => {}
            Ok(false) => {
                tracing::info!("Cluster snapshot started over: its window holds a unit that does not replay over it");
                return;
            }
            Err(e) => {
                tracing::warn!("Cannot compact the cluster log: {e}");
                return;
            }
        }
        let bytes = b.data.len();
        // The window kept behind the snapshot is also at most a quarter of the entries
        // between two compactions by count.
        let retain_entries = c.snapshot_every / 4;
        match c.core.compact_wire(to, b.data, LOG_RETAIN, retain_entries) {
            Ok(true) => {
                c.compacted_at = to;
                tracing::info!(
                    "Cluster log compacted to {to}: a {bytes} byte snapshot, encoded over {} ms ({} entries replayed), replayed and handed over in {} ms",
                    encoded.as_millis(),
                    to - b.from,
                    started.elapsed().as_millis()
                );
            }
            Ok(false) => {}
            Err(e) => tracing::warn!("Cannot compact the cluster log: {e}"),
        }
    }
}

/// Logs a unit whose key changes are independent of each other (`ChangeRecord::per_key`: an
/// expiry sweep, a flush of the groups this node leads) as one entry per group it touched,
/// each holding that group's keys' final states: every group's log carries its own keys'
/// deletions, in that group's order. A group this node does not lead cannot take its part:
/// the unit is undone there, as a refused proposal is. The unit's reply waits for each
/// entry (`Groups::note_unit`).
fn propose_per_group(gs: &mut Groups, dbs: &crate::store::Dbs, rec: &crate::store::ChangeRecord) {
    let mut parts: Vec<(GroupId, crate::store::ChangeRecord)> = Vec::new();
    for (db, key) in &rec.keys {
        let g = gs.slots.group_of_key(key);
        let i = match parts.iter().position(|p| p.0 == g) {
            Some(i) => i,
            None => {
                parts.push((g, crate::store::ChangeRecord::default()));
                parts.len() - 1
            }
        };
        parts[i].1.keys.push((*db, key.clone()));
    }
    // The unit's publishes go with the home group's part (or the first one's). A database
    // emptied or swapped, or a library change, is the home group's alone and cannot be
    // split: such a unit is undone in every group (it does not come here in practice).
    let home = parts.iter().position(|p| p.0 == GroupId::HOME).unwrap_or(0);
    if let Some(p) = parts.get_mut(home) {
        p.1.published = rec.published.clone();
    }
    let unkeyed = !rec.flushed.is_empty() || !rec.swaps.is_empty() || !rec.functions.is_empty();
    for (g, part) in &parts {
        let Some(c) = gs.get_mut(*g) else {
            continue;
        };
        c.last_unit_transfer = std::mem::take(&mut c.transfer_asked);
        c.buf.clear();
        emit::unit(&mut c.buf, &mut None, dbs, part);
        emit::publishes(&mut c.buf, part);
        let proposed = if unkeyed || !c.core.is_leader() {
            Err("not the leader of every group the unit changed".to_string())
        } else {
            c.core
                .propose_unit(c.buf.clone())
                .map_err(|e| e.to_string())
        };
        match proposed {
            Ok(_) => c.last_unit_logged = true,
            Err(e) => {
                tracing::warn!(
                    "A unit's part in {g} could not be logged ({e}): rebuilding from the log"
                );
                c.broken = true;
                c.last_unit_logged = false;
            }
        }
    }
    // The last part's group holds the reply itself; the others' wait before it.
    gs.split_parts.extend(parts.iter().map(|p| p.0));
    gs.last = gs.split_parts.pop().unwrap_or(GroupId::HOME);
}

/// A group's EXTEND: the deadlines of the keys of its slots move `ms` later (one group: every
/// key's, with no slot computed).
fn shift_group_deadlines(dbs: &mut crate::store::Dbs, slots: &SlotMap, group: GroupId, ms: u64) {
    if slots.owns_all(group) {
        dbs.shift_deadlines(ms);
    } else {
        dbs.shift_deadlines_of(ms, |k| slots.group_of_key(k) == group);
    }
}

/// Follower reads see a key expired only once its deadline plus the clock bound has passed on
/// this node's clock: by then the leader's clock passed it too, so a replica never drops a key
/// earlier than the leader would (it may show it up to the bound longer).
pub fn replica_now(drift: u64) -> u64 {
    unix_ms().saturating_sub(drift)
}

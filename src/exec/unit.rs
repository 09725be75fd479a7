//! The unit of work: a client's batch runs here, one unit at a time (a command, an EXEC, a
//! script), each unit's change record goes to durability (the AOF's pending buffer or a
//! cluster proposal), and the batch's output goes to the client's connection, or behind its
//! gate until the log says it may leave (exec/hold.rs). `drive` says how the batch ended
//! (`UnitEnd`); the loop only hands batches in (`Server::run_batch`).

use super::{blocking, hold, Server};
use crate::cmd::dispatch;
use crate::machine::client::Client;
use crate::persist::emit;
use bytes::{Bytes, BytesMut};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// How a client's batch (or its resumed rest) ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnitEnd {
    /// Parked in a blocking command; the rest of its pipeline waits in `Client::pending`.
    pub blocked: bool,
    /// Held back by CLIENT PAUSE, with the rest of its pipeline.
    pub postponed: bool,
    /// The client is gone (QUIT, CLIENT KILL, output limit, shutdown).
    pub closed: bool,
}

impl Server {
    /// Runs the requests in `cmds` (drained, so the caller can reuse the vector); how the
    /// batch ended. A batch a cluster node parks (a new leader's gate, a follower's read
    /// barrier, discovery waiting for an election) counts as postponed.
    pub fn run_batch(&mut self, id: u64, cmds: &mut Vec<Vec<Bytes>>) -> UnitEnd {
        const PARKED: UnitEnd = UnitEnd {
            blocked: false,
            postponed: true,
            closed: false,
        };
        if self.io.cluster.is_some() && self.park_in_cluster(id, cmds) {
            return PARKED;
        }
        let Some(mut client) = self.clients.remove(&id) else {
            cmds.clear();
            return UnitEnd {
                closed: true,
                ..UnitEnd::default()
            };
        };
        crate::script::busy::apply_busy_marks(&mut self.state, &mut client);
        // A pipelined batch: the cache misses of all its keys overlap instead of coming one
        // request after another (store/keymap.rs `prefetch`); `drive` goes on a window ahead.
        if cmds.len() > 1 {
            if let Some(db) = self.dbs.get(client.db) {
                prefetch_commands(db, cmds.iter());
            }
        }
        client.pending.extend(cmds.drain(..));
        let out = self.out_buf();
        let end = drive(self, client, out);
        if self.ops.pause.ended {
            self.resume_paused();
        }
        end
    }

    /// A cluster node parks a batch before it runs (true: parked, its requests moved to the
    /// client's pending ones). It waits in the gate of each group its keys belong to (a
    /// request without keys: the home group's), for the election on the home group
    /// (discovery) and for the read barrier of each group owning keys it reads that this
    /// node follows. Out of line: a lone server never comes here.
    #[inline(never)]
    fn park_in_cluster(&mut self, id: u64, cmds: &mut Vec<Vec<Bytes>>) -> bool {
        let Some(gs) = self.io.cluster.as_mut() else {
            return false;
        };
        let Some(client) = self.state.clients.get_mut(&id) else {
            gs.forget_confirmed(id);
            return false;
        };
        if gs.any_gate_shut() {
            let set = if gs.split() {
                let queued = client.multi.as_ref();
                cmds.iter()
                    .chain(client.pending.iter())
                    .fold(0, |set, argv| set | gs.groups_of_request(argv, queued))
            } else {
                1
            };
            if let Some(c) = gs.gate_shut_mut(set) {
                // A new leader serves nobody before its EXTEND is applied (exec/cluster.rs).
                client.pending.extend(cmds.drain(..));
                if !c.gate_waiting.contains(&id) {
                    c.gate_waiting.push(id);
                }
                return true;
            }
        }
        let home = gs.home_mut();
        if !home.is_leader() && home.discovery_cleared != id && !gs.read_cleared(id) {
            // Where-is-the-master asked while no live leader is known waits for the election
            // (exec/cluster.rs `park_discovery`).
            let home = gs.home_mut();
            if !home.discovery_ready(Instant::now()) {
                let mut asks = false;
                let mut masters = false;
                for argv in cmds.iter().chain(client.pending.iter()) {
                    if crate::cmd::sentinel::discovery_waits_for_leader(argv) {
                        asks = true;
                        masters |= argv
                            .get(1)
                            .is_some_and(|s| s.eq_ignore_ascii_case(b"masters"));
                    }
                }
                if asks {
                    client.pending.extend(cmds.drain(..));
                    home.park_discovery(id, masters);
                    return true;
                }
            }
        }
        // A follower reads only what a barrier confirmed with the leader covers.
        if gs.follows_any() {
            let in_multi = client.multi.is_some();
            let queued = client.multi.as_ref();
            let reads = cmds
                .iter()
                .chain(client.pending.iter())
                .filter(|argv| crate::cmd::role::replica_read_needs_leader(argv, in_multi))
                .fold(0, |set, argv| set | gs.groups_of_request(argv, queued));
            if reads != 0 && gs.park_reads(id, reads) {
                client.pending.extend(cmds.drain(..));
                return true;
            }
        }
        // It runs: no group keeps a barrier confirmed for it.
        gs.forget_confirmed(id);
        false
    }

    /// The pause ended: run what the held-back clients sent, in the order they were held.
    pub(super) fn resume_paused(&mut self) {
        self.ops.pause.ended = false;
        for id in std::mem::take(&mut self.ops.pause.waiting) {
            self.run_batch(id, &mut Vec::new());
        }
    }

    /// Ends a unit of work (a command, an EXEC, a script, an expiry sweep): the store's record
    /// of what it changed goes to the log as one atomic block holding each changed key's final
    /// state.
    pub fn end_unit(&mut self) {
        if self.stopping || self.shared.script.shutdown.load(Ordering::Acquire) {
            self.stopping = true;
            self.shutting_down = true;
            self.dbs.discard_changes();
            return;
        }
        if self.io.cluster.is_some() {
            self.propose_changes();
            return;
        }
        if !self.state.dbs.take_changes(&mut self.changes) {
            return;
        }
        if let Some(aof) = self.io.aof.as_mut() {
            emit::unit_synced(
                &mut aof.pending,
                &mut aof.selected_db,
                &self.state.dbs,
                &self.changes,
                Some(&mut aof.streams),
            );
            emit::settle(&mut self.state.dbs, &mut aof.streams);
        }
        if self.state.redis_master.active() {
            let st = &mut self.state;
            st.redis_master.feed_unit(&st.dbs, &self.changes);
        }
    }

    /// Appends a batch's output to the client's connection (the only way a reply leaves),
    /// or holds it there until the log is durable (`appendfsync always`) or, in a cluster,
    /// committed: nothing is acknowledged before the log says so. The loop writes it at the
    /// end of the round (`before_sleep`).
    pub fn deliver(&mut self, client: &mut Client, out: BytesMut, batch_done: bool, close: bool) {
        if self.stopping {
            client.big_out.clear();
            // The batch may hold replies to units that were not logged: none may leave. The
            // connection closes as it would when Redis exits.
            client.out.close_now_quietly();
            return;
        }
        // Before the connection can see the batch end and decode or answer the next request.
        client.publish_state();
        // In a cluster: one for each group the batch's units went to since its output was last
        // delivered, that this node leads (exec/cluster.rs `note_write`).
        let held = match self.io.cluster.as_mut() {
            Some(gs) => gs.take_watermarks(),
            None => None,
        };
        let watermark = match held {
            Some(h) => Some(h),
            None if self.output_waits_for_fsync() => Some((hold::Watermark::Fsynced, Vec::new())),
            // Earlier output of the connection is still held (for a group this node leads, the
            // last units went to groups it follows): the close must not overtake it.
            None if close && client.out.is_held() => Some((hold::Watermark::Ordered, Vec::new())),
            None => None,
        };
        let mut back = None;
        match watermark {
            None => {
                // The log reaches the file (write(2)) before the reply can leave: an
                // acknowledged write then survives the process dying at any later point
                // (SIGKILL, the shutdown watchdog), the page cache keeps it. The loop may write
                // this connection before the round ends (a busy script's answers, a partial
                // request read after this batch).
                if let Some(aof) = self.io.aof.as_mut() {
                    if !aof.pending.is_empty() {
                        aof.flush();
                    }
                }
                back = client.out.put_with(out, &mut client.big_out);
                if batch_done || close {
                    client.out.batch_done(close);
                }
            }
            Some((wm, rest)) => {
                let pieces = &mut client.big_out;
                self.holds
                    .hold(&client.out, wm, rest, batch_done, close, |o| {
                        back = o.put_with(out, pieces);
                    })
            }
        }
        if let Some(b) = back {
            self.recycle(b);
        }
    }

    /// Under `appendfsync always` with writes not yet on disk, no reply may reach a client before
    /// the round's fsync (`flush_log`).
    pub fn output_waits_for_fsync(&self) -> bool {
        self.io
            .aof
            .as_ref()
            .is_some_and(|a| a.needs_sync_before_reply())
    }

    /// A batch output buffer, reused when the last one was copied into its connection's
    /// OutBuf (no allocation per request).
    pub fn out_buf(&mut self) -> BytesMut {
        match self.spare_out.take() {
            Some(b) => b,
            None => BytesMut::with_capacity(64),
        }
    }

    fn recycle(&mut self, mut out: BytesMut) {
        if out.capacity() <= crate::machine::output::BLOCK {
            out.clear();
            self.spare_out = Some(out);
        }
    }
}

/// Output of one batch handed to the connection before the batch ends, once this large: it
/// is then referenced by the connection's chain, not copied (machine/output.rs).
const BATCH_OUT_SPLIT: usize = crate::machine::output::BIG;

/// Commands whose keys one prefetch covers (`KeyMap::prefetch` takes up to 32).
const PREFETCH_WINDOW: usize = 32;

/// Starts loading what `cmds` will read: argv[1] is the first key of most commands (for the
/// others the hint is wasted, never wrong), and a removal moves the last entry into its hole
/// and rewrites that entry's slot. `run_batch` calls it for a batch, `drive` for the windows
/// after the first. Inlined: out of line, the name comparisons cost ~50 instructions a
/// command (callgrind, pipelined GET).
#[inline(always)]
pub fn prefetch_commands<'a>(
    db: &crate::store::keyspace::Db,
    cmds: impl Iterator<Item = &'a Vec<bytes::Bytes>> + Clone,
) {
    db.prefetch(cmds.clone().filter_map(|argv| argv.get(1)).map(|k| &k[..]));
    let removals = cmds
        .filter(|argv| {
            argv.first().is_some_and(|name| {
                name.eq_ignore_ascii_case(b"del") || name.eq_ignore_ascii_case(b"unlink")
            })
        })
        .map(|argv| argv.len().saturating_sub(1))
        .sum::<usize>();
    if removals > 0 {
        db.prefetch_removals(removals);
    }
}

/// Runs the client's pending pipeline until it ends, blocks, or the client must close, then
/// hands the output to its connection and puts the client back (or forgets it).
pub fn drive(srv: &mut Server, mut client: Box<Client>, mut out: BytesMut) -> UnitEnd {
    let id = client.id;
    // A waiter served while another client's batch runs: that client's pending self-pushes
    // stay its own.
    let outer_running = std::mem::replace(&mut srv.running, id);
    let outer_pushes = std::mem::take(&mut srv.self_pushes);
    let outer_touched = srv.io.cluster.as_mut().map_or(0, |g| g.take_touched());
    let mut blocked = srv.waiters.is_blocked(id);
    let mut postponed = false;
    let mut ran = 0usize;
    while !blocked {
        // A long pipeline's keys are prefetched a window ahead: `run_batch` covered the first
        // `PREFETCH_WINDOW`, and half-way through each window the next one starts loading
        // (at -P 64 half of a batch's lookups missed the cache without this).
        if ran % PREFETCH_WINDOW == PREFETCH_WINDOW / 2
            && client.pending.len() > PREFETCH_WINDOW / 2
        {
            if let Some(db) = srv.dbs.get(client.db) {
                let window = client.pending.iter().skip(PREFETCH_WINDOW / 2);
                prefetch_commands(db, window.take(PREFETCH_WINDOW));
            }
        }
        ran += 1;
        let Some(argv) = client.pending.pop_front() else {
            break;
        };
        if let Some(gs) = srv.io.cluster.as_mut() {
            gs.note_unit_keys(&argv, client.multi.as_ref());
        }
        let held = dispatch::process(&mut srv.state, &mut srv.io, &mut client, argv, &mut out);
        srv.end_unit();
        srv.note_write(&mut client);
        if client.block_deadline.is_some() {
            // Set by `resume` for the command it re-runs, and for that one only.
            client.block_deadline = None;
            client.block_ready_key = None;
        }
        if !client.big_out.is_empty() && !srv.stopping {
            // Large values referenced by this output go to the connection now, reply by reply
            // (the output buffer holds only their headers and is reused).
            let done = std::mem::take(&mut out);
            srv.deliver(&mut client, done, false, false);
            out = srv.out_buf();
        } else if out.len() >= BATCH_OUT_SPLIT && !srv.stopping {
            // A pipeline of large replies goes to the connection reply by reply instead of
            // doubling one buffer for all of them.
            let fresh = crate::machine::output::spare_buffer()
                .unwrap_or_else(|| BytesMut::with_capacity(crate::machine::output::BLOCK));
            let done = std::mem::replace(&mut out, fresh);
            srv.deliver(&mut client, done, false, false);
        }
        // Clients blocked on keys this command wrote are served before the next command (a
        // unit of their own each, after this one's).
        if srv.waiters.has_ready() {
            blocking::serve_ready(srv);
        }
        if let Some(argv) = held {
            // CLIENT PAUSE: the command waits, with the rest of the pipeline, for the pause to end.
            client.pending.push_front(argv);
            if !srv.ops.pause.waiting.contains(&id) {
                srv.ops.pause.waiting.push(id);
            }
            postponed = true;
            break;
        }
        if client.close_after_reply || srv.shutting_down {
            client.pending.clear();
            break;
        }
        blocked = srv.waiters.is_blocked(id);
    }
    srv.drain_expired();
    srv.flush_self_pushes(client.resp3(), &mut out);
    srv.running = outer_running;
    srv.self_pushes = outer_pushes;
    let close = client.close_after_reply;
    if close && blocked {
        srv.waiters.unblock(id);
        client.blocked = false;
        blocked = false;
    }
    if !out.is_empty() || !(blocked || postponed) {
        srv.deliver(&mut client, out, !(blocked || postponed), close);
    }
    if let Some(gs) = srv.io.cluster.as_mut() {
        gs.restore_touched(outer_touched);
    }
    let end = UnitEnd {
        blocked,
        postponed,
        closed: close,
    };
    if !close && srv.batch_output_over_limit(&mut client) {
        srv.close_client(client);
        return UnitEnd {
            closed: true,
            ..end
        };
    }
    if close {
        srv.forget_client(&mut client);
    } else {
        srv.clients.insert(id, client);
    }
    end
}

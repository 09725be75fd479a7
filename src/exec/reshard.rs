//! Online resharding: a slot range moves from one Raft group to another while both keep
//! serving their other slots. Every group runs on every node, so every node already holds
//! every slot's keys in its one keyspace; a move changes which log writes them.
//!
//! 1. `RAFT RESHARD <first> <last> <group>` on the node leading the range's group A: A's
//!    leader logs a *release* ("R goes to B at epoch e+1", e the newest epoch in R) and from
//!    then on refuses R's keys (-TRYAGAIN) and never writes them (`SlotMap::fence`).
//! 2. Each node applying the release marks R in transit (-TRYAGAIN there too). Its keys then
//!    hold R's state as of the release, on every node that applied it.
//! 3. The node leading B (now or later: "pending" is read from the applied claims, not from
//!    memory) logs an *import* ("R is B's at epoch e+1") carrying every key of R, in every
//!    database, as the loader's commands (`reshard_round`).
//! 4. Each node applying the import makes R B's, replacing R's keys by the import's. B's
//!    leader serves R from then on; CLUSTER SLOTS and -MOVED follow.
//!
//! What makes the two logs' order safe: a group's log applies a command that changes keys
//! only while their slot is that group's in this node's table (`applies`), so a node lagging
//! on A that applies B's import first drops A's older entries for R (the import holds their
//! result), and any order of replaying the logs after a restart gives the same keyspace.
//! Snapshots carry their group's claims (`SlotMap::claims_of`) ahead of its keys.

use super::{fatal, ClusterIo, Groups};
use crate::exec::Server;
use crate::persist::emit;
use crate::persist::load::{LoadError, Loader, Step};
use crate::replication::group::{self, Claim, GroupId, SlotMap, RESHARD_MAGIC, SLOTS};
use bytes::Bytes;

const FENCE: u8 = b'F';
const IMPORT: u8 = b'I';
const CLAIMS: u8 = b'C';

/// Keys one import entry carries at most (unless one slot holds more): about as many as a
/// snapshot encodes per round.
const IMPORT_KEYS: u64 = 8192;

/// A decoded release or import.
#[derive(Debug, PartialEq)]
enum Entry<'a> {
    Release {
        first: u16,
        last: u16,
        to: GroupId,
        epoch: u64,
    },
    Import {
        first: u16,
        last: u16,
        epoch: u64,
        keys: &'a [u8],
    },
}

fn head(kind: u8) -> Vec<u8> {
    let mut out = RESHARD_MAGIC.to_vec();
    out.push(kind);
    out
}

fn encode_release(first: u16, last: u16, to: GroupId, epoch: u64) -> Vec<u8> {
    let mut out = head(FENCE);
    out.extend_from_slice(&first.to_be_bytes());
    out.extend_from_slice(&last.to_be_bytes());
    out.extend_from_slice(&to.0.to_be_bytes());
    out.extend_from_slice(&epoch.to_be_bytes());
    out
}

fn encode_import_head(first: u16, last: u16, epoch: u64) -> Vec<u8> {
    let mut out = head(IMPORT);
    out.extend_from_slice(&first.to_be_bytes());
    out.extend_from_slice(&last.to_be_bytes());
    out.extend_from_slice(&epoch.to_be_bytes());
    out
}

/// Big-endian fields read one after the other.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
    }
}

/// A log entry's release or import; None: an ordinary unit. Err: one that is damaged.
fn decode(data: &[u8]) -> Result<Option<Entry<'_>>, String> {
    let Some(rest) = data.strip_prefix(RESHARD_MAGIC) else {
        return Ok(None);
    };
    let mut f = Fields(rest);
    let bad = || "a damaged resharding entry".to_string();
    let kind = f.take(1).ok_or_else(bad)?[0];
    let (first, last) = (f.u16().ok_or_else(bad)?, f.u16().ok_or_else(bad)?);
    if first > last || last >= SLOTS {
        return Err(bad());
    }
    match kind {
        FENCE => {
            let to = GroupId(f.u32().ok_or_else(bad)?);
            let epoch = f.u64().ok_or_else(bad)?;
            Ok(Some(Entry::Release {
                first,
                last,
                to,
                epoch,
            }))
        }
        IMPORT => {
            let epoch = f.u64().ok_or_else(bad)?;
            Ok(Some(Entry::Import {
                first,
                last,
                epoch,
                keys: f.0,
            }))
        }
        _ => Err(bad()),
    }
}

/// A snapshot's head: the group's claims, ranges of equal claims.
fn encode_claims(claims: &[(u16, u16, Claim)]) -> Vec<u8> {
    let mut out = head(CLAIMS);
    out.extend_from_slice(&(claims.len() as u32).to_be_bytes());
    for &(a, b, c) in claims {
        out.extend_from_slice(&a.to_be_bytes());
        out.extend_from_slice(&b.to_be_bytes());
        let (kind, epoch, to) = match c {
            Claim::None => (0u8, 0, 0),
            Claim::Owned(e) => (1, e, 0),
            Claim::Released { to, epoch } => (2, epoch, to.0),
        };
        out.push(kind);
        out.extend_from_slice(&epoch.to_be_bytes());
        out.extend_from_slice(&to.to_be_bytes());
    }
    out
}

type Claims = Vec<(u16, u16, Claim)>;

/// Splits a snapshot into its claims (None: it carries none, the start-up table's) and the
/// loader's commands after them.
fn decode_claims(data: &[u8]) -> Result<(Option<Claims>, &[u8]), String> {
    let Some(rest) = data.strip_prefix(RESHARD_MAGIC) else {
        return Ok((None, data));
    };
    let bad = || "a damaged claims head in a snapshot".to_string();
    let mut f = Fields(rest);
    if f.take(1) != Some(&[CLAIMS][..]) {
        return Err(bad());
    }
    let n = f.u32().ok_or_else(bad)? as usize;
    let mut claims = Vec::with_capacity(n.min(usize::from(SLOTS)));
    for _ in 0..n {
        let (a, b) = (f.u16().ok_or_else(bad)?, f.u16().ok_or_else(bad)?);
        let kind = f.take(1).ok_or_else(bad)?[0];
        let epoch = f.u64().ok_or_else(bad)?;
        let to = GroupId(f.u32().ok_or_else(bad)?);
        if a > b || b >= SLOTS {
            return Err(bad());
        }
        let c = match kind {
            0 => Claim::None,
            1 => Claim::Owned(epoch),
            2 => Claim::Released { to, epoch },
            _ => return Err(bad()),
        };
        claims.push((a, b, c));
    }
    Ok((Some(claims), f.0))
}

/// Whether `group`'s log applies `argv` on this node: a command changing keys only while
/// their slot is the group's (and, for an entry rather than a snapshot, not in transit: a
/// released slot is written by nobody until its import). Keyless commands pass.
fn applies(slots: &SlotMap, group: GroupId, argv: &[Bytes], snapshot: bool) -> bool {
    let Ok(id) = crate::cmd::dispatch::resolve(argv) else {
        return true; // apply_commands reports it
    };
    let entry = &crate::cmd::registry::table().entries[id];
    if !crate::cmd::keyspec::has_keys(entry) {
        return true;
    }
    crate::cmd::keyspec::key_refs(entry, argv)
        .iter()
        .filter_map(|k| argv.get(k.pos))
        .all(|k| {
            let slot = group::key_hash_slot(k);
            slots.group_of(slot) == group && (snapshot || slots.transit(slot).is_none())
        })
}

impl Server {
    /// A committed entry of `group` or its snapshot, through the loader's path at time 0 (see
    /// `apply_entry`): a release or an import changes the table; a snapshot first replaces the
    /// group's claims, then the keys of its slots; keyed commands run only where `applies`.
    pub(super) fn apply_group_data(
        &mut self,
        group: GroupId,
        slots: &SlotMap,
        index: u64,
        data: &[u8],
        own: bool,
        snapshot: bool,
    ) {
        let mut data = data;
        if snapshot {
            let (claims, rest) = match decode_claims(data) {
                Ok(c) => c,
                Err(e) => fatal(&format!("Snapshot of {group} at {index}: {e}")),
            };
            if !slots.owns_all(group) {
                slots.replace_claims(group, claims.as_deref());
            }
            data = rest;
            slots.keys_replaced();
            let clear = group::clear_commands(&self.state.dbs, slots, group);
            if let Err(e) = self.apply_commands(clear, 0) {
                fatal(&format!(
                    "Cannot install the snapshot of {group} at {index}: {e}"
                ));
            }
        } else {
            match decode(data) {
                Ok(None) if own => return,
                Ok(None) => {}
                Ok(Some(Entry::Release {
                    first,
                    last,
                    to,
                    epoch,
                })) => {
                    if slots.release(group, first, last, to, epoch) {
                        tracing::info!(
                            "Slots {first}-{last} released by {group} to {to} at epoch {epoch} (entry {index})"
                        );
                    }
                    return;
                }
                Ok(Some(Entry::Import {
                    first,
                    last,
                    epoch,
                    keys: _,
                })) if own && slots.import_untouched(group, first, last, epoch) => {
                    // Its leader built it from its own keys, which nobody wrote since (the
                    // range is in transit) and no install replaced: the table changes, the
                    // keys are there already.
                    slots.import(group, first, last, epoch);
                    tracing::info!(
                        "Slots {first}-{last} imported by {group} at epoch {epoch} (entry {index})"
                    );
                    return;
                }
                Ok(Some(Entry::Import {
                    first,
                    last,
                    epoch,
                    keys,
                })) => {
                    self.apply_import(group, slots, index, (first, last, epoch), keys);
                    return;
                }
                Err(e) => fatal(&format!("Cluster entry {index} of {group}: {e}")),
            }
        }
        let filter = !slots.owns_all(group);
        self.load_filtered(index, data, |argv| {
            !filter || applies(slots, group, argv, snapshot)
        });
    }

    /// Runs the loader's commands of `data` that `keep` keeps, at time 0.
    fn load_filtered(&mut self, index: u64, data: &[u8], keep: impl Fn(&[Bytes]) -> bool) {
        let mut loader = Loader::from_bytes(Bytes::copy_from_slice(data))
            .knowing(|a| crate::cmd::dispatch::resolve(a).is_ok());
        loop {
            match loader.next_unit() {
                Ok(Step::Apply(mut cmds)) => {
                    cmds.retain(|argv| keep(argv));
                    if let Err(e) = self.apply_commands(cmds, 0) {
                        fatal(&format!("Bad command in cluster entry {index}: {e}"));
                    }
                }
                Ok(Step::Done) => break,
                Err(LoadError::Fatal(msg)) => fatal(&format!("Cluster entry {index}: {msg}")),
            }
        }
    }

    /// `group` imports `first..=last` at `epoch`: the slots it now owns that were another
    /// group's lose their keys (that group's state, older than or equal to the import's), then
    /// the import's keys of the slots whose claim it still is are loaded.
    fn apply_import(
        &mut self,
        group: GroupId,
        slots: &SlotMap,
        index: u64,
        (first, last, epoch): (u16, u16, u64),
        keys: &[u8],
    ) {
        slots.keys_replaced();
        let before: Vec<GroupId> = (first..=last).map(|s| slots.group_of(s)).collect();
        let current = slots.import(group, first, last, epoch);
        let gained: Vec<bool> = (first..=last)
            .map(|s| before[usize::from(s - first)] != group && slots.group_of(s) == group)
            .collect();
        if gained.iter().any(|&g| g) {
            let in_range = |k: &[u8]| {
                let s = group::key_hash_slot(k);
                (first..=last).contains(&s) && gained[usize::from(s - first)]
            };
            let clear = del_commands(&self.state.dbs, in_range);
            if let Err(e) = self.apply_commands(clear, 0) {
                fatal(&format!("Cannot import slots at entry {index}: {e}"));
            }
            tracing::info!(
                "Slots {first}-{last} imported by {group} at epoch {epoch} (entry {index})"
            );
        }
        self.load_filtered(index, keys, |argv| {
            let Ok(id) = crate::cmd::dispatch::resolve(argv) else {
                return true;
            };
            let entry = &crate::cmd::registry::table().entries[id];
            crate::cmd::keyspec::key_refs(entry, argv)
                .iter()
                .filter_map(|k| argv.get(k.pos))
                .all(|k| {
                    let s = group::key_hash_slot(k);
                    (first..=last).contains(&s)
                        && current[usize::from(s - first)]
                        && slots.group_of(s) == group
                })
        });
        self.state.dbs.discard_changes();
    }

    /// A round's resharding duties for `c`: its fences of other terms are forgotten, and as
    /// its serving leader it logs the import of every range released to it that is still in
    /// transit (once per term: a lost proposal is made again by the next leader).
    pub(super) fn reshard_round(&mut self, c: &mut ClusterIo, slots: &SlotMap) {
        if slots.owns_all(c.group) {
            return;
        }
        slots.prune_fences(c.group, c.core.leading_term());
        if !c.core.is_leader() || !c.gate_open || c.broken || !slots.any_frozen() {
            return;
        }
        let term = c.core.term();
        // The slots released to this group that no import of this term covers yet.
        let pending: Vec<u16> = (0..SLOTS)
            .filter(|&s| {
                slots.transit(s) == Some(c.group)
                    && !slots.import_proposed(c.group, term, s, slots.epoch(s))
            })
            .collect();
        let Some(&start) = pending.first() else {
            return;
        };
        // One import per round, of at most IMPORT_KEYS keys (or of one slot holding more): a
        // whole range at once would stall this loop, and every follower's applying it, past
        // an election timeout.
        let mut count = vec![0u32; usize::from(SLOTS)];
        for db in self.state.dbs.iter() {
            for (k, _) in db.iter() {
                let s = group::key_hash_slot(k);
                if s >= start {
                    count[usize::from(s)] += 1;
                }
            }
        }
        let epoch = slots.epoch(start);
        let (first, mut last, mut n) = (start, start, u64::from(count[usize::from(start)]));
        for &s in &pending[1..] {
            let more = u64::from(count[usize::from(s)]);
            if s != last + 1 || slots.epoch(s) != epoch || n + more > IMPORT_KEYS {
                break;
            }
            last = s;
            n += more;
        }
        if !slots.importing(c.group, term, first, last, epoch) {
            return;
        }
        let mut data = encode_import_head(first, last, epoch);
        let in_range = |k: &[u8]| (first..=last).contains(&group::key_hash_slot(k));
        for (i, db) in self.state.dbs.iter().enumerate() {
            let mut selected = false;
            for (k, e) in db.iter().filter(|(k, _)| in_range(k)) {
                if !selected {
                    emit::command(
                        &mut data,
                        &[b"SELECT", itoa::Buffer::new().format(i).as_bytes()],
                    );
                    selected = true;
                }
                emit::key_state(&mut data, k, Some(e));
            }
        }
        emit::command(&mut data, &[b"SELECT", b"0"]);
        match c.core.propose_unit(data) {
            Ok(i) => tracing::info!(
                "Cluster {}: importing slots {first}-{last} at epoch {epoch} ({n} keys, entry {i})",
                c.group
            ),
            Err(e) => {
                slots.import_failed(c.group, first, last);
                tracing::warn!("Import of slots {first}-{last} not proposed: {e}");
            }
        }
    }
}

/// DELs (by database, selecting each, ending in database 0) of every key `pick` names.
fn del_commands(dbs: &crate::store::Dbs, pick: impl Fn(&[u8]) -> bool) -> Vec<Vec<Bytes>> {
    let mut cmds = Vec::new();
    for (i, db) in dbs.iter().enumerate() {
        let keys: Vec<Bytes> = db
            .iter()
            .filter(|(k, _)| pick(k))
            .map(|(k, _)| Bytes::copy_from_slice(k))
            .collect();
        if keys.is_empty() {
            continue;
        }
        cmds.push(vec![
            Bytes::from_static(b"SELECT"),
            Bytes::from(i.to_string()),
        ]);
        for batch in keys.chunks(1024) {
            let mut del = Vec::with_capacity(batch.len() + 1);
            del.push(Bytes::from_static(b"DEL"));
            del.extend_from_slice(batch);
            cmds.push(del);
        }
    }
    if !cmds.is_empty() {
        cmds.push(vec![
            Bytes::from_static(b"SELECT"),
            Bytes::from_static(b"0"),
        ]);
    }
    cmds
}

impl Groups {
    /// `RAFT RESHARD <first> <last> <group>`: this node, leading the group owning the range,
    /// logs its release to `to`. Err: the error reply's text (a MOVED to that group's leader
    /// when this node does not lead it).
    pub fn reshard(&mut self, first: u16, last: u16, to: u32) -> Result<(), String> {
        if first > last || last >= SLOTS {
            return Err("ERR Invalid or out of range slot".into());
        }
        let to = GroupId(to);
        if self.get(to).is_none() {
            return Err(format!("ERR Unknown group {}", to.0));
        }
        let from = self.slots.group_of(first);
        if let Some(s) = (first..=last).find(|&s| self.slots.group_of(s) != from) {
            return Err(format!(
                "ERR Slots {first}-{last} span several groups (slot {s} is {}'s, slot {first} {}'s)",
                self.slots.group_of(s).0,
                from.0
            ));
        }
        if let Some(s) = (first..=last).find(|&s| self.slots.frozen(s)) {
            return Err(format!("ERR Slot {s} is being moved already"));
        }
        if from == to {
            return Err(format!(
                "ERR Slots {first}-{last} are group {}'s already",
                to.0
            ));
        }
        let epoch = (first..=last)
            .map(|s| self.slots.epoch(s))
            .max()
            .unwrap_or(0)
            + 1;
        let slots = &self.slots;
        let Some(c) = self.list.iter_mut().find(|c| c.group == from) else {
            return Err(format!("ERR Unknown group {}", from.0));
        };
        if !c.core.is_leader() {
            let leader = c.view.members.iter().find(|m| m.id == c.view.leader);
            return match leader {
                Some(m) => {
                    let (host, port, _) = crate::cmd::slots::addr(m);
                    Err(format!("MOVED {first} {host}:{port}"))
                }
                None => Err(crate::cmd::slots::CLUSTERDOWN.into()),
            };
        }
        if !c.gate_open {
            return Err(format!(
                "ERR This node is not serving {from} yet, try again"
            ));
        }
        let term = c.core.term();
        c.core
            .propose_unit(encode_release(first, last, to, epoch))
            .map_err(|e| format!("ERR The release could not be logged: {e}"))?;
        slots.fence(first, last, from, term);
        tracing::info!("Cluster {from}: releasing slots {first}-{last} to {to} at epoch {epoch}");
        Ok(())
    }
}

impl ClusterIo {
    /// The claims head a snapshot of this group starts with (after the wire prefix), when the
    /// table is split at all (one group: none, as before resharding existed).
    pub(super) fn claims_head(&self, slots: &SlotMap) -> Option<Vec<u8>> {
        if slots.owns_all(self.group) {
            return None;
        }
        Some(encode_claims(&slots.claims_of(self.group)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_damage_is_refused() {
        let r = encode_release(10, 20, GroupId(1), 3);
        assert_eq!(
            decode(&r),
            Ok(Some(Entry::Release {
                first: 10,
                last: 20,
                to: GroupId(1),
                epoch: 3
            }))
        );
        let mut i = encode_import_head(0, 5, 2);
        i.extend_from_slice(b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(
            decode(&i),
            Ok(Some(Entry::Import {
                first: 0,
                last: 5,
                epoch: 2,
                keys: b"*1\r\n$4\r\nPING\r\n"
            }))
        );
        assert_eq!(decode(b"*1\r\n$4\r\nPING\r\n"), Ok(None));
        assert!(decode(&r[..r.len() - 1]).is_err());
        assert!(decode(&encode_release(20, 10, GroupId(1), 3)).is_err());
        let claims = vec![
            (0, 99, Claim::Owned(2)),
            (
                100,
                200,
                Claim::Released {
                    to: GroupId(2),
                    epoch: 5,
                },
            ),
        ];
        let mut s = encode_claims(&claims);
        s.extend_from_slice(b"rest");
        assert_eq!(decode_claims(&s), Ok((Some(claims), &b"rest"[..])));
        assert_eq!(decode_claims(b"rest"), Ok((None, &b"rest"[..])));
        assert!(decode_claims(&s[..RESHARD_MAGIC.len() + 3]).is_err());
    }
}

//! Raft groups and the hash slots they own. A cluster node runs one consensus core per group
//! (`Cluster`), each with its own log, leader, proposals, held replies, read barriers and
//! snapshots; a key belongs to the group that owns its Redis Cluster hash slot, through the
//! slot→group table (`SlotMap`): the same start-up table on every node, then moved range by
//! range through the groups' logs (online resharding, `exec/reshard.rs`), each node deriving
//! the same table from the entries it applied. Without a split one group, group 0, owns all
//! 16,384 slots.
//!
//! What is not keyed (the function libraries, and anything a unit changes besides keys: a
//! FLUSHALL, a SWAPDB, its publishes) belongs to the home group, `GroupId::HOME`: its log
//! carries it and its snapshot holds the libraries.

use crate::store::{ChangeRecord, Dbs};
use bytes::Bytes;
use std::fmt;

/// What a resharding entry (a release or an import) and a snapshot's claims head start with:
/// no text of the loader's commands starts with a NUL.
pub const RESHARD_MAGIC: &[u8] = b"\0deadbolt-reshard\n";

/// Redis's CLUSTER_SLOTS.
pub const SLOTS: u16 = 16384;

/// A Raft group's id, the same on every node (it travels in each peer message).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupId(pub u32);

impl GroupId {
    /// The group of what no slot names (see the module's docs).
    pub const HOME: GroupId = GroupId(0);
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "group {}", self.0)
    }
}

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial 0, no reflection), Redis's crc16.c.
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

pub fn crc16(buf: &[u8]) -> u16 {
    buf.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ CRC16_TABLE[usize::from(((crc >> 8) as u8) ^ b)]
    })
}

/// Redis's keyHashSlot: the CRC16 of the key, or of the part between the first `{` and the
/// first `}` after it when that part is not empty, modulo 16,384.
pub fn key_hash_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|s| {
            let rest = &key[s + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .filter(|&e| e > 0)
                .map(|e| &rest[..e])
        })
        .unwrap_or(key);
    crc16(hashed) & (SLOTS - 1)
}

/// What one group's log says about one slot: nothing, that the group owns it from `epoch` on,
/// or that it released it to `to`, which owns it at `epoch` once its log imports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    None,
    Owned(u64),
    Released { to: GroupId, epoch: u64 },
}

impl Claim {
    fn epoch(self) -> Option<u64> {
        match self {
            Claim::None => None,
            Claim::Owned(e) | Claim::Released { epoch: e, .. } => Some(e),
        }
    }
}

/// The table derived from every group's claims (`SlotMap::derive`).
#[derive(Clone, PartialEq, Eq)]
struct Derived {
    /// Each group's claims, by slot, as its log (applied on this node) last set them.
    rows: Vec<(GroupId, Box<[Claim]>)>,
    owner: Box<[GroupId]>,
    /// The slot's newest claim is a release not yet imported: the group it goes to.
    transit: Box<[Option<GroupId>]>,
    /// How many slots are in transit (`any_frozen` asks on every command).
    in_transit: usize,
    epoch: Box<[u64]>,
    /// Ranges this node, leading their owner, fenced and has not seen applied yet: (first,
    /// last, owner, term of the proposal). Refused like slots in transit while it leads in
    /// that term.
    fencing: Vec<(u16, u16, GroupId, u64)>,
    /// Imports this node proposed as the leader of their group: (group, term, first, last,
    /// the count of `replaced` when it was proposed, the epoch of the release it answers: a
    /// range released to the group again in the same term, at a newer epoch, is imported
    /// again).
    importing: Vec<(GroupId, u64, u16, u16, u64, u64)>,
    /// Snapshot installs and imports applied on this node (each may replace keys of any
    /// range a leader is importing).
    replaced: u64,
}

/// The slot→group table: which group owns each of the 16,384 slots, and at which epoch.
/// Every slot has an owner. The start-up table (every slot at epoch 0) is the same on every
/// node; resharding moves slots through the groups' logs (a release in the source's, an
/// import in the target's: `exec/reshard.rs`), so each node derives the table from the logs
/// it applied: a slot belongs to the group with the newest claim on it, an import winning
/// over the release of the same epoch. While the newest is a release, the slot is *in
/// transit*: still its releaser's (whose keys hold its state as of the release), served by
/// nobody. Derived from each group's own claims, the table does not depend on the order in
/// which a node applies the groups' logs.
///
/// Edited while the logs apply through a shared reference (`RefCell`): the apply paths hold
/// the table beside the groups they run, and the table's cells change only there.
#[derive(Clone, PartialEq, Eq)]
pub struct SlotMap {
    /// The start-up table.
    start: Box<[GroupId]>,
    /// The distinct owners of the start-up table, ascending: the groups a node runs.
    groups: Vec<GroupId>,
    derived: std::cell::RefCell<Derived>,
}

impl fmt::Debug for SlotMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for &g in &self.groups {
            m.entry(&g.0, &self.ranges(g));
        }
        m.finish()
    }
}

impl Default for SlotMap {
    fn default() -> Self {
        SlotMap::single(GroupId::HOME)
    }
}

impl SlotMap {
    /// Every slot owned by `group`.
    pub fn single(group: GroupId) -> SlotMap {
        let mut m = SlotMap {
            start: vec![group; usize::from(SLOTS)].into_boxed_slice(),
            groups: vec![group],
            derived: std::cell::RefCell::new(Derived {
                rows: Vec::new(),
                owner: Box::default(),
                transit: Box::default(),
                in_transit: 0,
                epoch: Box::default(),
                fencing: Vec::new(),
                importing: Vec::new(),
                replaced: 0,
            }),
        };
        m.reset();
        m
    }

    /// Every group's claims back to the start-up table's.
    fn reset(&mut self) {
        let d = self.derived.get_mut();
        d.rows = self
            .groups
            .iter()
            .map(|&g| (g, start_row(&self.start, g)))
            .collect();
        d.owner = self.start.clone();
        d.transit = vec![None; usize::from(SLOTS)].into_boxed_slice();
        d.in_transit = 0;
        d.epoch = vec![0; usize::from(SLOTS)].into_boxed_slice();
        d.fencing.clear();
        d.importing.clear();
    }

    /// The group owning `slot` (taken modulo 16,384).
    #[inline]
    pub fn group_of(&self, slot: u16) -> GroupId {
        self.derived.borrow().owner[usize::from(slot & (SLOTS - 1))]
    }

    /// The group owning `key`'s slot.
    pub fn group_of_key(&self, key: &[u8]) -> GroupId {
        if self.groups.len() == 1 {
            return self.groups[0];
        }
        self.group_of(key_hash_slot(key))
    }

    /// Gives the slots `first..=last` to `group` in the start-up table (every claim goes back
    /// to it). Err: a range outside 0..16383 or reversed.
    pub fn assign(&mut self, first: u16, last: u16, group: GroupId) -> Result<(), String> {
        if first > last || last >= SLOTS {
            return Err(format!("invalid slot range {first}-{last}"));
        }
        for o in &mut self.start[usize::from(first)..=usize::from(last)] {
            *o = group;
        }
        let mut groups: Vec<GroupId> = self.start.to_vec();
        groups.sort_unstable();
        groups.dedup();
        self.groups = groups;
        self.reset();
        Ok(())
    }

    /// A table from `<group>:<first>-<last>` items separated by commas or spaces; slots no item
    /// names stay the home group's. Err: a malformed item.
    pub fn parse(spec: &str) -> Result<SlotMap, String> {
        let mut m = SlotMap::default();
        for item in spec.split([',', ' ']).filter(|i| !i.is_empty()) {
            let bad = || format!("bad slot range item '{item}' (want <group>:<first>-<last>)");
            let (g, range) = item.split_once(':').ok_or_else(bad)?;
            let (a, b) = range.split_once('-').ok_or_else(bad)?;
            let g: u32 = g.parse().map_err(|_| bad())?;
            let a: u16 = a.parse().map_err(|_| bad())?;
            let b: u16 = b.parse().map_err(|_| bad())?;
            m.assign(a, b, GroupId(g))?;
        }
        Ok(m)
    }

    /// The groups of the start-up table, ascending: those a node runs (resharding moves slots
    /// between them, never to a group outside it).
    pub fn groups(&self) -> &[GroupId] {
        &self.groups
    }

    /// Whether `group` owns every slot (one group: every key is its, and nothing moves).
    pub fn owns_all(&self, group: GroupId) -> bool {
        self.groups == [group]
    }

    /// `group`'s slots as inclusive ranges, ascending (CLUSTER SLOTS/SHARDS/NODES); slots in
    /// transit stay their releaser's.
    pub fn ranges(&self, group: GroupId) -> Vec<(u16, u16)> {
        let d = self.derived.borrow();
        let mut out: Vec<(u16, u16)> = Vec::new();
        for (slot, &g) in d.owner.iter().enumerate() {
            if g != group {
                continue;
            }
            let slot = slot as u16;
            match out.last_mut() {
                Some(r) if r.1 + 1 == slot => r.1 = slot,
                _ => out.push((slot, slot)),
            }
        }
        out
    }

    /// The epoch of `slot`'s owner.
    pub fn epoch(&self, slot: u16) -> u64 {
        self.derived.borrow().epoch[usize::from(slot & (SLOTS - 1))]
    }

    /// The group `slot` is in transit to (released by its owner, not yet imported).
    pub fn transit(&self, slot: u16) -> Option<GroupId> {
        self.derived.borrow().transit[usize::from(slot & (SLOTS - 1))]
    }

    /// Whether `slot` is served by nobody: in transit, or fenced by this node as the leader of
    /// its owner (`fence`). Its keys get -TRYAGAIN, and its owner never writes them again.
    pub fn frozen(&self, slot: u16) -> bool {
        let d = self.derived.borrow();
        let slot = slot & (SLOTS - 1);
        d.transit[usize::from(slot)].is_some()
            || d.fencing
                .iter()
                .any(|&(a, b, _, _)| (a..=b).contains(&slot))
    }

    /// Forgets the fences `group` proposed in another term than `leading` (None: this node
    /// does not lead it): that leadership is over, and the release either applies (it is in
    /// the log) or never will.
    pub fn prune_fences(&self, group: GroupId, leading: Option<u64>) {
        let mut d = self.derived.borrow_mut();
        if d.fencing
            .iter()
            .any(|f| f.2 == group && Some(f.3) != leading)
        {
            d.fencing.retain(|f| f.2 != group || Some(f.3) == leading);
        }
    }

    /// Whether any slot is in transit or fenced (the cheap test before `frozen`).
    pub fn any_frozen(&self) -> bool {
        let d = self.derived.borrow();
        !d.fencing.is_empty() || d.in_transit > 0
    }

    /// Remembers that this node, leading `group` in `term`, proposed the release of
    /// `first..=last`: refused from now on, before the release applies.
    pub fn fence(&self, first: u16, last: u16, group: GroupId, term: u64) {
        let mut d = self.derived.borrow_mut();
        // Older terms' fences are void: that leadership is over.
        d.fencing.retain(|f| f.2 != group || f.3 == term);
        d.fencing.push((first, last, group, term));
    }

    /// True the first time the leader of `group` in `term` asks to import `first..=last`
    /// released at `epoch` (remembered: it proposes each import once per term and release).
    pub fn importing(&self, group: GroupId, term: u64, first: u16, last: u16, epoch: u64) -> bool {
        let mut d = self.derived.borrow_mut();
        d.importing.retain(|i| i.0 != group || i.1 == term);
        if d.importing
            .iter()
            .any(|i| (i.0, i.1, i.2, i.3, i.5) == (group, term, first, last, epoch))
        {
            return false;
        }
        let replaced = d.replaced;
        d.importing
            .push((group, term, first, last, replaced, epoch));
        true
    }

    /// A snapshot install or an import replaced keys on this node.
    pub fn keys_replaced(&self) {
        self.derived.borrow_mut().replaced += 1;
    }

    /// Whether this node proposed the import of `first..=last` to `group` and no snapshot
    /// install or import replaced keys since: its keys of the range are still the import's.
    pub fn import_untouched(&self, group: GroupId, first: u16, last: u16, epoch: u64) -> bool {
        let d = self.derived.borrow();
        d.importing
            .iter()
            .any(|i| (i.0, i.2, i.3, i.4, i.5) == (group, first, last, d.replaced, epoch))
    }

    /// Whether the leader of `group` in `term` proposed an import covering `slot` released at
    /// `epoch`.
    pub fn import_proposed(&self, group: GroupId, term: u64, slot: u16, epoch: u64) -> bool {
        self.derived
            .borrow()
            .importing
            .iter()
            .any(|i| i.0 == group && i.1 == term && i.5 == epoch && (i.2..=i.3).contains(&slot))
    }

    /// The import of `first..=last` was not proposed after all: asked again next round.
    pub fn import_failed(&self, group: GroupId, first: u16, last: u16) {
        let mut d = self.derived.borrow_mut();
        d.importing
            .retain(|i| !(i.0 == group && i.2 == first && i.3 == last));
    }

    /// `group`'s claim on `slot` as its log set it.
    pub fn claim(&self, group: GroupId, slot: u16) -> Claim {
        let d = self.derived.borrow();
        d.rows
            .iter()
            .find(|r| r.0 == group)
            .map_or(Claim::None, |r| r.1[usize::from(slot & (SLOTS - 1))])
    }

    /// `group`'s log releases `first..=last` to `to` at `epoch`: slots it owns at an older
    /// epoch go in transit (unless `to` imported them already). True if a claim changed.
    pub fn release(&self, group: GroupId, first: u16, last: u16, to: GroupId, epoch: u64) -> bool {
        let mut d = self.derived.borrow_mut();
        let mut changed = false;
        for slot in first..=last.min(SLOTS - 1) {
            let changed_here = d.set(group, slot, |c| match c {
                Claim::Owned(e) if e < epoch => Some(Claim::Released { to, epoch }),
                _ => None,
            });
            changed |= changed_here;
        }
        d.fencing
            .retain(|&(a, b, g, _)| !(g == group && a >= first && b <= last));
        changed
    }

    /// `group`'s log imports `first..=last` at `epoch`. True for each slot whose claim it is
    /// now (not overtaken by a newer one): the slots whose keys the import carries.
    pub fn import(&self, group: GroupId, first: u16, last: u16, epoch: u64) -> Vec<bool> {
        let mut d = self.derived.borrow_mut();
        (first..=last.min(SLOTS - 1))
            .map(|slot| {
                d.set(group, slot, |c| match c.epoch() {
                    Some(e) if e >= epoch => None,
                    _ => Some(Claim::Owned(epoch)),
                });
                d.rows
                    .iter()
                    .find(|r| r.0 == group)
                    .is_some_and(|r| r.1[usize::from(slot)] == Claim::Owned(epoch))
            })
            .collect()
    }

    /// `group`'s claims as a snapshot of its log carries them: ranges of equal claims.
    pub fn claims_of(&self, group: GroupId) -> Vec<(u16, u16, Claim)> {
        let d = self.derived.borrow();
        let Some(row) = d.rows.iter().find(|r| r.0 == group) else {
            return Vec::new();
        };
        let mut out: Vec<(u16, u16, Claim)> = Vec::new();
        for (slot, &c) in row.1.iter().enumerate() {
            let slot = slot as u16;
            if c == Claim::None {
                continue;
            }
            match out.last_mut() {
                Some(r) if r.1 + 1 == slot && r.2 == c => r.1 = slot,
                _ => out.push((slot, slot, c)),
            }
        }
        out
    }

    /// A snapshot of `group` replaces its claims by these (None: the start-up table's, what a
    /// log without a release or import says).
    pub fn replace_claims(&self, group: GroupId, claims: Option<&[(u16, u16, Claim)]>) {
        let mut row = match claims {
            None => start_row(&self.start, group),
            Some(_) => vec![Claim::None; usize::from(SLOTS)].into_boxed_slice(),
        };
        for &(a, b, c) in claims.unwrap_or(&[]) {
            for slot in a..=b.min(SLOTS - 1) {
                row[usize::from(slot)] = c;
            }
        }
        let mut d = self.derived.borrow_mut();
        match d.rows.iter_mut().find(|r| r.0 == group) {
            Some(r) => r.1 = row,
            None => d.rows.push((group, row)),
        }
        for slot in 0..SLOTS {
            d.derive(slot);
        }
    }
}

fn start_claim(owner: GroupId, group: GroupId) -> Claim {
    if owner == group {
        Claim::Owned(0)
    } else {
        Claim::None
    }
}

fn start_row(start: &[GroupId], group: GroupId) -> Box<[Claim]> {
    start.iter().map(|&o| start_claim(o, group)).collect()
}

impl Derived {
    /// Sets `group`'s claim on `slot` to what `f` makes of it (None: unchanged) and derives
    /// the slot again. True if it changed.
    fn set(&mut self, group: GroupId, slot: u16, f: impl Fn(Claim) -> Option<Claim>) -> bool {
        let i = usize::from(slot);
        let Some(row) = self.rows.iter_mut().find(|r| r.0 == group) else {
            return false;
        };
        let Some(new) = f(row.1[i]) else {
            return false;
        };
        row.1[i] = new;
        self.derive(slot);
        true
    }

    /// The slot's owner: the newest claim's group, an import winning over the release of the
    /// same epoch (the release names the importer); in transit while the newest is a release.
    fn derive(&mut self, slot: u16) {
        let i = usize::from(slot);
        let mut best: Option<(u64, bool, GroupId, Option<GroupId>)> = None;
        for (g, row) in &self.rows {
            let cand = match row[i] {
                Claim::None => continue,
                Claim::Owned(e) => (e, true, *g, None),
                Claim::Released { to, epoch } => (epoch, false, *g, Some(to)),
            };
            if best.is_none_or(|b| (cand.0, cand.1) > (b.0, b.1)) {
                best = Some(cand);
            }
        }
        if let Some((e, _, g, to)) = best {
            self.owner[i] = g;
            match (self.transit[i].is_some(), to.is_some()) {
                (false, true) => self.in_transit += 1,
                (true, false) => self.in_transit -= 1,
                _ => {}
            }
            self.transit[i] = to;
            self.epoch[i] = e;
        }
    }
}

/// The keys of `group`'s slots, per database index (databases with none left out): what a
/// snapshot of that group replaces, and what a rebuild of it starts by removing.
pub fn keys_of_group(dbs: &Dbs, slots: &SlotMap, group: GroupId) -> Vec<(usize, Vec<Bytes>)> {
    let all = slots.owns_all(group);
    let mut out = Vec::new();
    for (i, db) in dbs.iter().enumerate() {
        let keys: Vec<Bytes> = db
            .iter()
            .filter(|(k, _)| all || slots.group_of(key_hash_slot(k)) == group)
            .map(|(k, _)| Bytes::copy_from_slice(k))
            .collect();
        if !keys.is_empty() {
            out.push((i, keys));
        }
    }
    out
}

/// Keys per DEL command of `clear_commands`.
const DEL_BATCH: usize = 1024;

/// The commands that remove what a snapshot of `group` replaces before it is loaded: every key
/// of its slots (by database, in DELs of at most `DEL_BATCH` keys), and for the home group the
/// function libraries (its snapshot carries them). What belongs to other groups stays. Ends
/// in database 0 when it selected another.
pub fn clear_commands(dbs: &Dbs, slots: &SlotMap, group: GroupId) -> Vec<Vec<Bytes>> {
    let mut cmds = Vec::new();
    let mut selected = 0;
    for (db, keys) in keys_of_group(dbs, slots, group) {
        if db != selected {
            cmds.push(select(db));
            selected = db;
        }
        for batch in keys.chunks(DEL_BATCH) {
            let mut del = Vec::with_capacity(batch.len() + 1);
            del.push(Bytes::from_static(b"DEL"));
            del.extend_from_slice(batch);
            cmds.push(del);
        }
    }
    if selected != 0 {
        cmds.push(select(0));
    }
    if group == GroupId::HOME {
        cmds.push(vec![
            Bytes::from_static(b"FUNCTION"),
            Bytes::from_static(b"FLUSH"),
        ]);
    }
    cmds
}

fn select(db: usize) -> Vec<Bytes> {
    vec![Bytes::from_static(b"SELECT"), Bytes::from(db.to_string())]
}

/// The group a unit's change record belongs to: its keys' (a command, MULTI or script over
/// keys of one slot, as Redis Cluster requires), or the home group's when it changed no key (a
/// function library, a publish). Err: it changed keys of two groups, or keys beside
/// what only the home group carries (a flush, a swap), which one group's entry cannot hold: the
/// pair of groups found; or it changed a key of a slot in transit (`SlotMap::frozen`): its
/// owner and the group it goes to.
pub fn group_of_record(rec: &ChangeRecord, slots: &SlotMap) -> Result<GroupId, (GroupId, GroupId)> {
    if let [only] = slots.groups() {
        return Ok(*only);
    }
    let mut keys = rec
        .keys
        .iter()
        .map(|(_, k)| slots.group_of(key_hash_slot(k)));
    let Some(first) = keys.next() else {
        return Ok(GroupId::HOME);
    };
    if let Some(other) = keys.find(|&g| g != first) {
        return Err((first, other));
    }
    // A slot released (or being released) is written by no group until its import.
    if slots.any_frozen() {
        if let Some(s) = rec
            .keys
            .iter()
            .map(|(_, k)| key_hash_slot(k))
            .find(|&s| slots.frozen(s))
        {
            return Err((first, slots.transit(s).unwrap_or(first)));
        }
    }
    let unkeyed = !rec.flushed.is_empty() || !rec.swaps.is_empty() || !rec.functions.is_empty();
    if unkeyed && first != GroupId::HOME {
        return Err((first, GroupId::HOME));
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Value;

    #[test]
    fn crc16_is_xmodem() {
        // The check value of CRC-16/XMODEM, and Redis Cluster spec's example.
        assert_eq!(crc16(b"123456789"), 0x31c3);
    }

    #[test]
    fn hash_tags_as_redis() {
        assert_eq!(key_hash_slot(b"foo"), 12182);
        assert_eq!(
            key_hash_slot(b"{user1000}.following"),
            key_hash_slot(b"user1000")
        );
        assert_eq!(key_hash_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 0x3fff);
        assert_eq!(key_hash_slot(b"foo{{bar}}zap"), key_hash_slot(b"{bar"));
        assert_eq!(key_hash_slot(b"foo{bar}{zap}"), key_hash_slot(b"bar"));
        assert_eq!(key_hash_slot(b"{"), crc16(b"{") & 0x3fff);
        assert_eq!(key_hash_slot(b""), 0);
    }

    #[test]
    fn one_group_owns_every_slot() {
        let m = SlotMap::default();
        assert_eq!(m.groups(), &[GroupId::HOME]);
        assert!(m.owns_all(GroupId::HOME));
        assert!(!m.owns_all(GroupId(1)));
        assert_eq!(m.ranges(GroupId::HOME), vec![(0, SLOTS - 1)]);
        assert!(m.ranges(GroupId(1)).is_empty());
        for slot in [0, 1, 5460, 12182, SLOTS - 1] {
            assert_eq!(m.group_of(slot), GroupId::HOME);
        }
        assert_eq!(m.group_of_key(b"foo"), GroupId::HOME);
    }

    #[test]
    fn assigned_ranges_move_slots_and_keys_between_groups() {
        let mut m = SlotMap::default();
        m.assign(5461, 10922, GroupId(1)).unwrap();
        m.assign(10923, SLOTS - 1, GroupId(2)).unwrap();
        assert_eq!(m.groups(), &[GroupId(0), GroupId(1), GroupId(2)]);
        assert_eq!(m.ranges(GroupId(0)), vec![(0, 5460)]);
        assert_eq!(m.ranges(GroupId(1)), vec![(5461, 10922)]);
        assert_eq!(m.ranges(GroupId(2)), vec![(10923, 16383)]);
        assert_eq!(m.group_of(5460), GroupId(0));
        assert_eq!(m.group_of(5461), GroupId(1));
        // "foo" is slot 12182, "bar" 5061; a hash tag decides for the key holding it.
        assert_eq!(m.group_of_key(b"foo"), GroupId(2));
        assert_eq!(m.group_of_key(b"bar"), GroupId(0));
        assert_eq!(m.group_of_key(b"{foo}bar"), GroupId(2));
        // One slot in the middle: three ranges, the owners' list follows.
        m.assign(100, 100, GroupId(1)).unwrap();
        assert_eq!(m.ranges(GroupId(0)), vec![(0, 99), (101, 5460)]);
        assert_eq!(m.ranges(GroupId(1)), vec![(100, 100), (5461, 10922)]);
        m.assign(0, SLOTS - 1, GroupId(2)).unwrap();
        assert_eq!(m.groups(), &[GroupId(2)]);
        assert!(m.owns_all(GroupId(2)));
        // Bad ranges change nothing.
        assert!(m.assign(10, 9, GroupId(0)).is_err());
        assert!(m.assign(0, SLOTS, GroupId(0)).is_err());
        assert!(m.owns_all(GroupId(2)));
        // The textual form.
        let p = SlotMap::parse("1:8192-16383").unwrap();
        assert_eq!(p.ranges(GroupId(0)), vec![(0, 8191)]);
        assert_eq!(p.ranges(GroupId(1)), vec![(8192, 16383)]);
        assert_eq!(SlotMap::parse("").unwrap(), SlotMap::default());
        let q = SlotMap::parse("2:0-9, 1:10-20").unwrap();
        assert_eq!(q.groups(), &[GroupId(0), GroupId(1), GroupId(2)]);
        for bad in ["1", "1:5", "x:1-2", "1:2-1", "1:0-16384", "1:-3-4"] {
            assert!(SlotMap::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn claims_decide_owners_whatever_order_the_logs_apply_in() {
        let start = || SlotMap::parse("1:8192-16383").unwrap();
        let (g0, g1) = (GroupId(0), GroupId(1));
        // Group 1 releases 9000-9009 to group 0 at epoch 1, then group 0 imports them.
        let a = start();
        assert!(!a.any_frozen());
        assert!(a.release(g1, 9000, 9009, g0, 1));
        assert_eq!((a.group_of(9005), a.transit(9005)), (g1, Some(g0)));
        assert!(a.any_frozen() && a.frozen(9000) && a.frozen(9009) && !a.frozen(9010));
        assert!(
            !a.release(g1, 9000, 9009, g0, 1),
            "a replayed release changes nothing"
        );
        assert_eq!(a.import(g0, 9000, 9009, 1), vec![true; 10]);
        assert_eq!(
            (a.group_of(9005), a.transit(9005), a.epoch(9005)),
            (g0, None, 1)
        );
        assert!(!a.any_frozen());
        assert_eq!(a.ranges(g0), vec![(0, 8191), (9000, 9009)]);
        assert_eq!(a.ranges(g1), vec![(8192, 8999), (9010, 16383)]);
        // A node applying the import before the release ends with the same table.
        let b = start();
        assert_eq!(b.import(g0, 9000, 9009, 1), vec![true; 10]);
        assert_eq!(b.group_of(9005), g0);
        assert!(b.release(g1, 9000, 9009, g0, 1));
        assert_eq!(a, b);
        // And back at epoch 2: group 0's older import, replayed after, holds no slot.
        assert!(a.release(g0, 9000, 9009, g1, 2));
        assert_eq!(a.import(g1, 9000, 9009, 2), vec![true; 10]);
        assert_eq!(a.import(g0, 9000, 9009, 1), vec![false; 10]);
        assert_eq!((a.group_of(9000), a.epoch(9000)), (g1, 2));
        // A snapshot carries a group's claims: installed elsewhere, the same table.
        let c = start();
        c.replace_claims(g0, Some(&a.claims_of(g0)));
        c.replace_claims(g1, Some(&a.claims_of(g1)));
        assert_eq!(c, a);
        assert_eq!(
            a.claims_of(g0)[1],
            (9000, 9009, Claim::Released { to: g1, epoch: 2 })
        );
        // A snapshot without claims: the start-up table's.
        c.replace_claims(g0, None);
        c.replace_claims(g1, None);
        assert_eq!(c, start());
        // A fence holds while its leader leads in its term; the release applied ends it.
        let d = start();
        d.fence(100, 200, g0, 7);
        assert!(d.frozen(150) && !d.frozen(201) && d.any_frozen());
        d.prune_fences(g0, Some(7));
        assert!(d.frozen(150));
        d.prune_fences(g0, Some(8));
        assert!(!d.any_frozen());
        d.fence(100, 200, g0, 8);
        assert!(d.release(g0, 100, 200, g1, 1));
        assert!(d.frozen(150), "in transit now");
        assert_eq!(d.import(g1, 100, 200, 1), vec![true; 101]);
        assert!(!d.any_frozen());
        // Each import is proposed once per term.
        assert!(d.importing(g1, 3, 5, 6, 1));
        assert!(!d.importing(g1, 3, 5, 6, 1));
        assert!(d.import_proposed(g1, 3, 6, 1) && !d.import_proposed(g1, 3, 7, 1));
        // The same slots released to the group again in the same term (moved away and back):
        // a new import, not covered by the first.
        assert!(!d.import_proposed(g1, 3, 6, 3));
        assert!(d.importing(g1, 3, 6, 6, 3));
        assert!(d.import_untouched(g1, 5, 6, 1));
        d.keys_replaced();
        assert!(!d.import_untouched(g1, 5, 6, 1));
        assert!(d.importing(g1, 4, 5, 6, 1));
        d.import_failed(g1, 5, 6);
        assert!(d.importing(g1, 4, 5, 6, 1));
    }

    #[test]
    fn a_groups_keys_are_those_of_its_slots_in_every_database() {
        let mut dbs = Dbs::new(2);
        for key in [&b"foo"[..], b"bar", b"{foo}x", b"{bar}y"] {
            dbs[0].set(key, Value::Str(Bytes::from_static(b"v")), 0);
        }
        dbs[1].set(b"foo", Value::Str(Bytes::from_static(b"v")), 0);
        let mut m = SlotMap::default();
        m.assign(8192, SLOTS - 1, GroupId(1)).unwrap();
        let sorted = |mut v: Vec<(usize, Vec<Bytes>)>| {
            for (_, keys) in &mut v {
                keys.sort();
            }
            v
        };
        let b = Bytes::from_static;
        assert_eq!(
            sorted(keys_of_group(&dbs, &m, GroupId(1))),
            vec![(0, vec![b(b"foo"), b(b"{foo}x")]), (1, vec![b(b"foo")])]
        );
        assert_eq!(
            sorted(keys_of_group(&dbs, &m, GroupId(0))),
            vec![(0, vec![b(b"bar"), b(b"{bar}y")])]
        );
        let one = SlotMap::default();
        assert_eq!(keys_of_group(&dbs, &one, GroupId(0)).len(), 2);
        assert!(keys_of_group(&dbs, &one, GroupId(1)).is_empty());
    }

    #[test]
    fn a_change_record_goes_to_the_group_of_its_keys_slot() {
        let b = Bytes::from_static;
        let rec = |keys: &[&'static [u8]]| ChangeRecord {
            keys: keys.iter().map(|k| (0, b(k))).collect(),
            ..Default::default()
        };
        let one = SlotMap::default();
        assert_eq!(
            group_of_record(&rec(&[b"foo", b"bar"]), &one),
            Ok(GroupId::HOME)
        );
        let mut two = SlotMap::default();
        two.assign(8192, SLOTS - 1, GroupId(1)).unwrap();
        assert_eq!(
            group_of_record(&rec(&[b"foo", b"{foo}x"]), &two),
            Ok(GroupId(1))
        );
        assert_eq!(group_of_record(&rec(&[b"bar"]), &two), Ok(GroupId(0)));
        assert_eq!(group_of_record(&rec(&[]), &two), Ok(GroupId::HOME));
        assert_eq!(
            group_of_record(&rec(&[b"foo", b"bar"]), &two),
            Err((GroupId(1), GroupId(0)))
        );
        let mut flush = rec(&[b"foo"]);
        flush.flushed.push(0);
        assert!(group_of_record(&flush, &two).is_err());
        assert_eq!(group_of_record(&flush, &one), Ok(GroupId::HOME));
    }

    #[test]
    fn a_snapshot_install_clears_only_its_groups_keys_and_the_home_group_the_libraries() {
        let mut dbs = Dbs::new(3);
        for key in [&b"foo"[..], b"bar"] {
            dbs[0].set(key, Value::Str(Bytes::from_static(b"v")), 0);
        }
        dbs[2].set(b"foo", Value::Str(Bytes::from_static(b"v")), 0);
        let mut m = SlotMap::default();
        m.assign(8192, SLOTS - 1, GroupId(1)).unwrap();
        let text = |cmds: Vec<Vec<Bytes>>| {
            cmds.iter()
                .map(|c| {
                    let words: Vec<&str> =
                        c.iter().map(|w| std::str::from_utf8(w).unwrap()).collect();
                    words.join(" ")
                })
                .collect::<Vec<_>>()
        };
        // "foo" (slot 12182) is group 1's, "bar" (5061) group 0's.
        assert_eq!(
            text(clear_commands(&dbs, &m, GroupId(1))),
            ["DEL foo", "SELECT 2", "DEL foo", "SELECT 0"]
        );
        assert_eq!(
            text(clear_commands(&dbs, &m, GroupId(0))),
            ["DEL bar", "FUNCTION FLUSH"]
        );
        // One group: every key of every database, by slot, and the libraries.
        let mut all = text(clear_commands(&dbs, &SlotMap::default(), GroupId::HOME));
        all[0] = {
            let mut w: Vec<&str> = all[0].split(' ').collect();
            w[1..].sort_unstable();
            w.join(" ")
        };
        assert_eq!(
            all,
            [
                "DEL bar foo",
                "SELECT 2",
                "DEL foo",
                "SELECT 0",
                "FUNCTION FLUSH"
            ]
        );
        // Nothing of a group that owns no slot.
        assert!(clear_commands(&dbs, &SlotMap::default(), GroupId(1)).is_empty());
        let many = Dbs::new(1);
        let mut many = many;
        for i in 0..2500 {
            many[0].set(
                format!("k{i}").as_bytes(),
                Value::Str(Bytes::from_static(b"v")),
                0,
            );
        }
        let cmds = clear_commands(&many, &SlotMap::default(), GroupId(1));
        assert!(cmds.is_empty());
        let cmds = clear_commands(&many, &SlotMap::default(), GroupId::HOME);
        let dels: Vec<usize> = cmds
            .iter()
            .filter(|c| c[0] == "DEL")
            .map(|c| c.len() - 1)
            .collect();
        assert_eq!(dels, [1024, 1024, 452]);
    }
}

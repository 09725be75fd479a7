//! Raft groups and the hash slots they own. A cluster node runs one consensus core per group
//! (`Cluster`), each with its own log, leader, proposals, held replies, read barriers and
//! snapshots; a key belongs to the group that owns its Redis Cluster hash slot, through one
//! slot→group table every node holds alike (`SlotMap`). Today a cluster has one group, group 0,
//! owning all 16,384 slots; resharding is the table's edit.
//!
//! What is not keyed (the function libraries, and anything a unit changes besides keys: a
//! FLUSHALL, a SWAPDB, its publishes) belongs to the home group, `GroupId::HOME`: its log
//! carries it and its snapshot holds the libraries.

use crate::store::{ChangeRecord, Dbs};
use bytes::Bytes;
use std::fmt;

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

/// The slot→group table: which group owns each of the 16,384 slots. Every slot has an owner.
#[derive(Clone, PartialEq, Eq)]
pub struct SlotMap {
    owner: Box<[GroupId]>,
    /// The distinct owners, ascending.
    groups: Vec<GroupId>,
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
        SlotMap {
            owner: vec![group; usize::from(SLOTS)].into_boxed_slice(),
            groups: vec![group],
        }
    }

    /// The group owning `slot` (taken modulo 16,384).
    #[inline]
    pub fn group_of(&self, slot: u16) -> GroupId {
        self.owner[usize::from(slot & (SLOTS - 1))]
    }

    /// The group owning `key`'s slot.
    pub fn group_of_key(&self, key: &[u8]) -> GroupId {
        if self.groups.len() == 1 {
            return self.groups[0];
        }
        self.group_of(key_hash_slot(key))
    }

    /// Gives the slots `first..=last` to `group`. Err: a range outside 0..16383 or reversed.
    pub fn assign(&mut self, first: u16, last: u16, group: GroupId) -> Result<(), String> {
        if first > last || last >= SLOTS {
            return Err(format!("invalid slot range {first}-{last}"));
        }
        for o in &mut self.owner[usize::from(first)..=usize::from(last)] {
            *o = group;
        }
        let mut groups: Vec<GroupId> = self.owner.to_vec();
        groups.sort_unstable();
        groups.dedup();
        self.groups = groups;
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

    /// The groups owning at least one slot, ascending.
    pub fn groups(&self) -> &[GroupId] {
        &self.groups
    }

    /// Whether `group` owns every slot (one group: every key is its).
    pub fn owns_all(&self, group: GroupId) -> bool {
        self.groups == [group]
    }

    /// `group`'s slots as inclusive ranges, ascending (CLUSTER SLOTS/SHARDS/NODES).
    pub fn ranges(&self, group: GroupId) -> Vec<(u16, u16)> {
        let mut out: Vec<(u16, u16)> = Vec::new();
        for (slot, &g) in self.owner.iter().enumerate() {
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
/// pair of groups found.
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

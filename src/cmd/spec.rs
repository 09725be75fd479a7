//! What a command is: the handler's context, the spec every family declares (arity, flags, key
//! positions and specifications, ACL categories), and the flags. Imports nothing of `cmd/`:
//! every other file of it builds on this one.

use crate::error::CmdResult;
use crate::machine::client::Client;
use crate::machine::{Host, State};
use crate::store::Db;
use bytes::Bytes;

/// Keyspace event classes: configuration defines them (`notify-keyspace-events`).
pub use crate::config::event;

/// What a handler sees: the state machine's data, the calling client, the time of this command
/// (frozen for a whole script or transaction, as in Redis), and the narrow `Host` interface to
/// the event loop running it. Never the loop itself, sockets or the log.
pub struct Ctx<'a> {
    pub srv: &'a mut State,
    pub host: &'a mut dyn Host,
    pub client: &'a mut Client,
    /// Unix time in milliseconds.
    pub now: u64,
    /// Called from a Lua script (blocking commands do not block; NOSCRIPT commands refused).
    pub in_script: bool,
}

impl Ctx<'_> {
    /// The live value at `key` as the type `pick` selects: None if the key is missing,
    /// WRONGTYPE if it holds another type.
    pub fn value_mut<T: ?Sized>(
        &mut self,
        key: &[u8],
        pick: fn(&mut crate::store::Value) -> Option<&mut T>,
    ) -> crate::error::CmdResult<Option<&mut T>> {
        let now = self.now;
        match self.db().get_mut(key, now) {
            None => Ok(None),
            Some(e) => pick(&mut e.value)
                .map(Some)
                .ok_or(crate::error::CmdError::WrongType),
        }
    }

    /// Deletes `key` if its collection became empty (Redis never keeps one), with the `del`
    /// event when `announce` is set.
    pub fn drop_if_empty(&mut self, key: &[u8], announce: bool) {
        let now = self.now;
        if self
            .db()
            .get(key, now)
            .is_some_and(|e| e.value.is_empty_collection())
        {
            self.db().remove(key, now);
            if announce {
                self.notify(event::GENERIC, "del", key);
            }
        }
    }

    pub fn db(&mut self) -> &mut Db {
        &mut self.srv.dbs[self.client.db]
    }
}

impl Ctx<'_> {
    /// A write changed `key` in the client's database: Redis's `signalModifiedKey` (WATCH,
    /// blocked clients) followed by `notifyKeyspaceEvent(class, event, key)`. The log does not
    /// depend on this call: the store records every change itself (store/change.rs).
    pub fn changed(&mut self, class: u32, event: &'static str, key: &[u8]) {
        let db = self.client.db;
        self.srv.signal_modified_key(db, key);
        self.srv.notify_keyspace_event(class, event, key, db);
    }

    /// A keyspace event without a modification signal (e.g. `expire` after `set`).
    pub fn notify(&mut self, class: u32, event: &'static str, key: &[u8]) {
        let db = self.client.db;
        self.srv.notify_keyspace_event(class, event, key, db);
    }
}

pub type Handler = fn(&mut Ctx, &[Bytes]) -> CmdResult;

pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    /// Refused inside Lua scripts.
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const FAST: u32 = 1 << 9;
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1 << 10;
    pub const MAY_REPLICATE: u32 = 1 << 11;
    /// Runs while a script is busy (SCRIPT KILL, SHUTDOWN NOSAVE...).
    pub const ALLOW_BUSY: u32 = 1 << 12;
    /// Cannot be queued in MULTI.
    pub const NO_MULTI: u32 = 1 << 13;
    /// Executed immediately even inside MULTI (EXEC, DISCARD, MULTI, WATCH, QUIT, RESET).
    pub const TX_CONTROL: u32 = 1 << 14;
    /// Allowed in RESP2 subscribed mode.
    pub const PUBSUB_OK: u32 = 1 << 15;
    pub const SKIP_MONITOR: u32 = 1 << 16;
    pub const SKIP_SLOWLOG: u32 = 1 << 17;
    pub const NO_MANDATORY_KEYS: u32 = 1 << 18;
    /// Key positions depend on the arguments (Redis sets this from non-range key specs).
    pub const MOVABLE_KEYS: u32 = 1 << 19;
    /// Refused while a replica loads its data asynchronously (printed only; deadbolt has no
    /// replication).
    pub const NO_ASYNC_LOADING: u32 = 1 << 20;
    /// Exists only in cluster mode, where every node also answers as a Sentinel (Redis's
    /// CMD_ONLY_SENTINEL): a lone server knows no such command, and COMMAND does not list it.
    /// Not printed, as in Redis.
    pub const ONLY_SENTINEL: u32 = 1 << 21;
    /// Refused before any other check unless `enable-debug-command` allows the connection
    /// (Redis's CMD_PROTECTED on DEBUG): the refusal counts as a rejected call. Not printed, as
    /// in Redis.
    pub const PROTECTED: u32 = 1 << 22;

    /// (flag, name COMMAND INFO prints), in Redis's order.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (MOVABLE_KEYS, "movablekeys"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// Key positions as in Redis's legacy (first, last, step) triple; last < 0 counts from the end.
#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    pub first: i32,
    pub last: i32,
    pub step: i32,
}

pub const NO_KEYS: KeySpec = KeySpec {
    first: 0,
    last: 0,
    step: 0,
};
pub const KEY1: KeySpec = KeySpec {
    first: 1,
    last: 1,
    step: 1,
};

/// Two keys, first and second argument (RENAME, LMOVE, SMOVE, GEODIST's source/destination…).
pub const TWO_KEYS: KeySpec = KeySpec {
    first: 1,
    last: 2,
    step: 1,
};
pub const ALL_KEYS: KeySpec = KeySpec {
    first: 1,
    last: -1,
    step: 1,
};

/// One of Redis 7's key specifications, as COMMAND INFO prints it (index begin-search, range
/// find-keys). Families that declare these get them printed instead of the flagless spec
/// derived from `KeySpec`.
#[derive(Debug)]
pub struct KeySpecDoc {
    pub notes: Option<&'static str>,
    /// In Redis's print order: RO RW OW RM access update insert delete ... variable_flags.
    pub flags: &'static [&'static str],
    pub begin_index: i32,
    pub lastkey: i32,
    pub keystep: i32,
    /// A `keynum` find-keys spec instead of `range`: (keynumidx, firstkey, keystep); then
    /// `lastkey` and `keystep` above are unused.
    pub keynum: Option<(i32, i32, i32)>,
    /// A `keyword` begin-search (GEORADIUS's STORE): the keyword, searched from
    /// `begin_index` on, instead of an `index` one.
    pub keyword: Option<&'static str>,
    /// A range find-keys spec's `limit` (XREAD's STREAMS: the keys are the first half of what
    /// follows).
    pub limit: i32,
}

/// `begin_index` of a spec whose begin_search and find_keys are both `unknown` (Redis never
/// begins a key search at index 0, the command name).
pub const SPEC_UNKNOWN: i32 = 0;

impl KeySpecDoc {
    /// Key names that cannot be found from the arguments' positions (SORT's BY/GET/STORE).
    pub const fn unknown(notes: &'static str, flags: &'static [&'static str]) -> Self {
        KeySpecDoc {
            notes: Some(notes),
            flags,
            begin_index: SPEC_UNKNOWN,
            lastkey: 0,
            keystep: 0,
            keynum: None,
            keyword: None,
            limit: 0,
        }
    }

    pub const fn range(flags: &'static [&'static str], begin_index: i32, lastkey: i32) -> Self {
        KeySpecDoc {
            notes: None,
            flags,
            begin_index,
            lastkey,
            keystep: 1,
            keynum: None,
            keyword: None,
            limit: 0,
        }
    }

    /// Keys counted by the argument `keynumidx` after `begin_index` (ZUNION, ZMPOP...).
    pub const fn keynum(
        flags: &'static [&'static str],
        begin_index: i32,
        keynumidx: i32,
        firstkey: i32,
        keystep: i32,
    ) -> Self {
        KeySpecDoc {
            notes: None,
            flags,
            begin_index,
            lastkey: 0,
            keystep: 0,
            keynum: Some((keynumidx, firstkey, keystep)),
            keyword: None,
            limit: 0,
        }
    }

    /// The key after `keyword`, searched for from argument `startfrom` on.
    pub const fn keyword(
        flags: &'static [&'static str],
        keyword: &'static str,
        startfrom: i32,
    ) -> Self {
        KeySpecDoc {
            notes: None,
            flags,
            begin_index: startfrom,
            lastkey: 0,
            keystep: 1,
            keynum: None,
            keyword: Some(keyword),
            limit: 0,
        }
    }

    /// Keys from after `keyword` to `lastkey`, the first 1/`limit` of them (XREAD's STREAMS).
    pub const fn keyword_range(
        flags: &'static [&'static str],
        keyword: &'static str,
        startfrom: i32,
        lastkey: i32,
        limit: i32,
    ) -> Self {
        KeySpecDoc {
            notes: None,
            flags,
            begin_index: startfrom,
            lastkey,
            keystep: 1,
            keynum: None,
            keyword: Some(keyword),
            limit,
        }
    }

    /// The same spec with a note (XADD's).
    pub const fn with_notes(mut self, notes: &'static str) -> Self {
        self.notes = Some(notes);
        self
    }
}

pub struct CommandSpec {
    /// Lower case, as COMMAND prints it.
    pub name: &'static str,
    /// Redis's rule: > 0 exact argc, < 0 at least -arity.
    pub arity: i32,
    pub flags: u32,
    pub keys: KeySpec,
    /// ACL categories as COMMAND INFO prints them (without '@').
    pub acl: &'static [&'static str],
    pub handler: Handler,
    pub subcommands: &'static [CommandSpec],
}

impl CommandSpec {
    /// A command without subcommands (what every family's row helper builds).
    pub const fn leaf(
        name: &'static str,
        arity: i32,
        flags: u32,
        keys: KeySpec,
        acl: &'static [&'static str],
        handler: Handler,
    ) -> CommandSpec {
        CommandSpec {
            name,
            arity,
            flags,
            keys,
            acl,
            handler,
            subcommands: &[],
        }
    }

    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = self.arity as i64;
        if arity > 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }

    /// Positions of the key arguments in `argv`.
    pub fn key_positions(&self, argc: usize) -> impl Iterator<Item = usize> {
        let k = self.keys;
        let (first, step) = (k.first.max(0) as usize, k.step.max(1) as usize);
        let last = if k.first <= 0 {
            0
        } else if k.last < 0 {
            (argc as i64 + k.last as i64).max(0) as usize
        } else {
            (k.last as usize).min(argc.saturating_sub(1))
        };
        (first..=last)
            .step_by(step)
            .filter(move |&i| k.first > 0 && i < argc)
    }
}

/// A command or subcommand's place in the table; stats are indexed by it.
pub use crate::machine::CmdId;

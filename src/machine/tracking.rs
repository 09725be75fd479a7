//! Client-side caching (CLIENT TRACKING), as Redis 7.0's tracking.c: the server remembers which
//! clients read which keys and tells them when a key changes, with a RESP3 push on the same
//! connection or, redirected, a RESP3 push or a `__redis__:invalidate` pub/sub message on
//! another one. In BCAST mode a client names key prefixes instead, and receives every change
//! under them once per event-loop turn.
//!
//! Keys are remembered without their database, as in Redis: a cache holds names, and a FLUSHDB
//! invalidates everything (one null). Nothing here costs anything until a client turns
//! tracking on (`Tracking::active` is one load per key change).

use super::client::Client;
use super::State;
use bytes::{BufMut, Bytes, BytesMut};
use std::collections::{BTreeMap, HashMap};

/// A client's tracking mode (Redis's CLIENT_TRACKING_* flags and redirection).
#[derive(Debug, Default, Clone)]
pub struct ClientTracking {
    /// The client that receives this one's invalidations (0: this one).
    pub redirect: u64,
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    /// CLIENT CACHING yes (OPTIN) / no (OPTOUT) given for the next command.
    pub caching: bool,
    pub noloop: bool,
    pub broken_redirect: bool,
    /// BCAST prefixes, sorted (TRACKINGINFO lists them in Redis's radix-tree order).
    pub prefixes: Vec<Bytes>,
    /// A read-only command ran inside the script this client is running: its declared keys
    /// are remembered when it ends (Redis tracks a script's keys, not its calls').
    pub script_read: bool,
}

impl ClientTracking {
    /// Whether the next read's keys are remembered (OPTIN needs CACHING yes, OPTOUT its no).
    pub fn remembers(&self) -> bool {
        let opted_out = if self.optin {
            !self.caching
        } else {
            self.optout && self.caching
        };
        !self.bcast && !opted_out
    }
}

/// Keys modified under one BCAST prefix since the last broadcast, with the client that last
/// modified each (0: none, as for expiry) for NOLOOP.
#[derive(Default)]
struct Bcast {
    clients: Vec<u64>,
    keys: BTreeMap<Bytes, u64>,
}

/// What an invalidation says: one key, a RESP array of keys (BCAST), or a null (everything).
enum Payload<'a> {
    Key(&'a [u8]),
    Proto(&'a [u8]),
    Null,
}

#[derive(Default)]
pub struct Tracking {
    /// Clients with tracking on (INFO `tracking_clients`).
    pub clients: usize,
    /// key → clients that may cache it.
    table: HashMap<Bytes, Vec<u64>, ahash::RandomState>,
    /// Client ids across all keys (INFO `tracking_total_items`).
    items: usize,
    prefixes: BTreeMap<Bytes, Bcast>,
    /// Prefixes with keys waiting for the next broadcast.
    bcast_pending: bool,
    /// Invalidations for the running client, sent after its reply (None: a flush).
    pub(super) pending_self: Vec<Option<Bytes>>,
    /// The running client (not in `State::clients` while its batch runs), as `begin` saw it.
    running: Running,
    /// Invalidations redirected to the running client, written before its reply (Redis adds
    /// them to its buffer as they happen).
    to_running: BytesMut,
}

#[derive(Default, Clone, Copy)]
struct Running {
    resp3: bool,
    subscribed: bool,
    /// Tracking on, and its invalidations of its own changes wanted (not NOLOOP, not BCAST).
    wants_own: bool,
}

impl Tracking {
    #[inline]
    pub fn active(&self) -> bool {
        self.clients != 0
    }

    pub fn total_keys(&self) -> usize {
        self.table.len()
    }

    pub fn total_items(&self) -> usize {
        self.items
    }

    /// A flush has work to do: clients to tell, or remembered keys to forget (entries stay
    /// after their clients turn tracking off, as in Redis, until a flush or an invalidation).
    pub fn flush_needed(&self) -> bool {
        self.clients != 0 || !self.table.is_empty()
    }

    pub fn total_prefixes(&self) -> usize {
        self.prefixes.len()
    }

    /// Remembers that client `id` may cache `key`.
    pub fn remember(&mut self, id: u64, key: &[u8]) {
        let ids = match self.table.get_mut(key) {
            Some(ids) => ids,
            None => self.table.entry(Bytes::copy_from_slice(key)).or_default(),
        };
        if !ids.contains(&id) {
            ids.push(id);
            self.items += 1;
        }
    }

    /// The prefixes `prefix` would collide with for a client that has `existing` (Redis's
    /// checkPrefixCollisionsOrReply): the error text, if any.
    pub fn prefix_collision(existing: &[Bytes], new: &[Bytes]) -> Option<String> {
        let overlap = |a: &[u8], b: &[u8]| {
            let n = a.len().min(b.len());
            a[..n] == b[..n]
        };
        for (i, p) in new.iter().enumerate() {
            if let Some(e) = existing.iter().find(|e| overlap(e, p)) {
                return Some(format!(
                    "Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(e)
                ));
            }
            if let Some(q) = new[i + 1..].iter().find(|q| overlap(p, q)) {
                return Some(format!(
                    "Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                    String::from_utf8_lossy(p),
                    String::from_utf8_lossy(q)
                ));
            }
        }
        None
    }
}

impl State {
    /// CLIENT TRACKING on: `mode` replaces the client's flags (Redis's enableTracking); BCAST
    /// prefixes add to those it has.
    pub fn enable_tracking(&mut self, client: &mut Client, mut mode: ClientTracking) {
        match client.tracking.take() {
            Some(old) => mode.prefixes = old.prefixes,
            None => self.tracking.clients += 1,
        }
        client.tracking = Some(Box::new(mode));
        self.tracking_begin(client);
    }

    /// Notes the running client's state before one of its commands (tracking on somewhere).
    pub fn tracking_begin(&mut self, client: &Client) {
        self.tracking.running = Running {
            resp3: client.resp3(),
            subscribed: client.pubsub.subscribed(),
            wants_own: client
                .tracking
                .as_deref()
                .is_some_and(|t| !t.noloop && !t.bcast),
        };
    }

    /// Adds BCAST prefixes to a tracking client (the empty prefix when none is named).
    pub fn add_bcast_prefixes(&mut self, client: &mut Client, prefixes: &[Bytes]) {
        let Some(t) = client.tracking.as_deref_mut() else {
            return;
        };
        let empty = [Bytes::new()];
        let prefixes = if prefixes.is_empty() {
            &empty[..]
        } else {
            prefixes
        };
        for p in prefixes {
            let b = self.tracking.prefixes.entry(p.clone()).or_default();
            if !b.clients.contains(&client.id) {
                b.clients.push(client.id);
                if let Err(at) = t.prefixes.binary_search(p) {
                    t.prefixes.insert(at, p.clone());
                }
            }
        }
    }

    /// CLIENT TRACKING off, RESET, disconnect (Redis's disableTracking). Keys it read stay in
    /// the table and are dropped lazily, as in Redis: a client that read many keys would
    /// otherwise cost a sweep of them all.
    pub fn disable_tracking(&mut self, client: &mut Client) {
        let Some(t) = client.tracking.take() else {
            return;
        };
        self.tracking.clients -= 1;
        for p in &t.prefixes {
            if let Some(b) = self.tracking.prefixes.get_mut(p) {
                b.clients.retain(|&id| id != client.id);
                if b.clients.is_empty() {
                    self.tracking.prefixes.remove(p);
                }
            }
        }
    }

    /// A key changed (Redis's trackingInvalidateKey): every client that may cache it is told,
    /// and the key is forgotten; BCAST prefixes covering it collect it for the next broadcast.
    /// `by`: the client that changed it (0: none, e.g. expiry).
    pub(super) fn tracking_invalidate(&mut self, key: &[u8], by: u64, bcast: bool) {
        if bcast && !self.tracking.prefixes.is_empty() {
            for (prefix, b) in self.tracking.prefixes.iter_mut() {
                if key.starts_with(prefix) {
                    b.keys.insert(Bytes::copy_from_slice(key), by);
                    self.tracking.bcast_pending = true;
                }
            }
        }
        let Some(ids) = self.tracking.table.remove(key) else {
            return;
        };
        self.tracking.items -= ids.len();
        for id in ids {
            if id == self.running {
                // After the command's reply (Redis's tracking_pending_keys), and not at all
                // for NOLOOP: the running client made the change itself.
                if self.tracking.running.wants_own {
                    self.tracking
                        .pending_self
                        .push(Some(Bytes::copy_from_slice(key)));
                }
                continue;
            }
            let Some(t) = self.clients.get(&id).and_then(|c| c.tracking.as_deref()) else {
                continue;
            };
            if t.bcast || (t.noloop && id == by) {
                continue;
            }
            self.send_tracking(id, Payload::Key(key));
        }
    }

    /// FLUSHDB / FLUSHALL: one null to every tracking client, and the table is emptied
    /// (Redis's trackingInvalidateKeysOnFlush).
    pub(super) fn tracking_flush(&mut self) {
        let ids: Vec<u64> = self
            .clients
            .values()
            .filter(|c| c.tracking.is_some())
            .map(|c| c.id)
            .collect();
        for id in ids {
            self.send_tracking(id, Payload::Null);
        }
        // `running` describes the running client only while some client tracks (dispatch
        // refreshes it then); with none, no one is owed a null.
        if self.tracking.active() && self.running != 0 && self.tracking.running.wants_own {
            self.tracking.pending_self.push(None);
        }
        self.tracking.table.clear();
        self.tracking.items = 0;
    }

    /// Sends the BCAST invalidations collected since the last call (Redis does it in
    /// beforeSleep, once per event-loop turn).
    pub fn tracking_broadcast(&mut self) {
        if !self.tracking.bcast_pending {
            return;
        }
        self.tracking.bcast_pending = false;
        let prefixes: Vec<Bytes> = self.tracking.prefixes.keys().cloned().collect();
        for p in prefixes {
            let Some(b) = self.tracking.prefixes.get_mut(&p) else {
                continue;
            };
            if b.keys.is_empty() {
                continue;
            }
            let keys = std::mem::take(&mut b.keys);
            let clients = b.clients.clone();
            let all = keys_proto(&keys, 0);
            for id in clients {
                let noloop = self
                    .clients
                    .get(&id)
                    .and_then(|c| c.tracking.as_deref())
                    .is_some_and(|t| t.noloop);
                if noloop {
                    if let Some(own) = keys_proto(&keys, id) {
                        self.send_tracking(id, Payload::Proto(&own));
                    }
                } else if let Some(all) = &all {
                    self.send_tracking(id, Payload::Proto(all));
                }
            }
        }
    }

    /// tracking-table-max-keys: forgets keys (telling their clients, as if they changed) until
    /// the table is within the limit (Redis's trackingLimitUsedSlots, which walks at random;
    /// a hash map's order is as arbitrary).
    pub fn tracking_limit(&mut self, max_keys: usize) {
        if max_keys == 0 || self.tracking.table.len() <= max_keys {
            return;
        }
        let over = self.tracking.table.len() - max_keys;
        let victims: Vec<Bytes> = self.tracking.table.keys().take(over).cloned().collect();
        for key in victims {
            self.tracking_invalidate(&key, 0, false);
        }
    }

    /// Sends one invalidation for tracking client `id` (not the running client), to it or to
    /// its redirection (Redis's sendTrackingMessage).
    fn send_tracking(&mut self, id: u64, payload: Payload) {
        let Some(c) = self.clients.get(&id) else {
            return;
        };
        let own_resp3 = c.resp3();
        let Some(redirect) = c.tracking.as_deref().map(|t| t.redirect) else {
            return;
        };
        let null: &[u8] = if own_resp3 { b"_\r\n" } else { b"$-1\r\n" };
        let tail = match payload {
            Payload::Key(k) => key_array(k),
            Payload::Proto(p) => Bytes::copy_from_slice(p),
            Payload::Null => Bytes::from_static(null),
        };
        if redirect == 0 {
            if own_resp3 {
                self.push_to(id, &invalidate_push(true, false, &tail));
            }
            return;
        }
        let target = if redirect == self.running {
            Some((
                self.tracking.running.resp3,
                self.tracking.running.subscribed,
            ))
        } else {
            self.clients
                .get(&redirect)
                .map(|r| (r.resp3(), r.pubsub.subscribed()))
        };
        match target {
            None => {
                if let Some(t) = self
                    .clients
                    .get_mut(&id)
                    .and_then(|c| c.tracking.as_deref_mut())
                {
                    t.broken_redirect = true;
                }
                if own_resp3 {
                    let mut m = BytesMut::new();
                    m.extend_from_slice(b">2\r\n$21\r\ntracking-redir-broken\r\n:");
                    m.extend_from_slice(itoa::Buffer::new().format(redirect).as_bytes());
                    m.extend_from_slice(b"\r\n");
                    self.push_to(id, &m);
                }
            }
            Some((resp3, subscribed)) if resp3 || subscribed => {
                self.push_to(redirect, &invalidate_push(resp3, true, &tail));
            }
            Some(_) => {}
        }
    }

    /// Queues raw push bytes for a client (or the running one's batch output).
    fn push_to(&mut self, id: u64, bytes: &[u8]) {
        if id == self.running {
            self.tracking.to_running.extend_from_slice(bytes);
            return;
        }
        let Some(c) = self.clients.get_mut(&id) else {
            return;
        };
        c.defer(bytes);
        if super::pubsub::over_output_limit(&self.config, c, &mut 0) {
            if let Some(c) = self.clients.remove(&id) {
                tracing::warn!(
                    "Client id={} scheduled to be closed ASAP for overcoming of output buffer limits.",
                    c.id
                );
                self.close_client(c);
            }
        }
    }
}

/// `*1\r\n$len\r\nkey\r\n`
fn key_array(key: &[u8]) -> Bytes {
    let mut m = BytesMut::with_capacity(key.len() + 16);
    m.extend_from_slice(b"*1\r\n$");
    m.extend_from_slice(itoa::Buffer::new().format(key.len()).as_bytes());
    m.extend_from_slice(b"\r\n");
    m.extend_from_slice(key);
    m.extend_from_slice(b"\r\n");
    m.freeze()
}

/// The invalidation around its value: a RESP3 `invalidate` push, or for a RESP2 connection
/// that receives another's invalidations while subscribed, a `__redis__:invalidate` message.
fn invalidate_push(resp3: bool, redirected: bool, tail: &[u8]) -> BytesMut {
    let mut m = BytesMut::with_capacity(tail.len() + 48);
    if resp3 {
        m.extend_from_slice(b">2\r\n$10\r\ninvalidate\r\n");
    } else {
        debug_assert!(redirected);
        m.extend_from_slice(b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n");
    }
    m.put_slice(tail);
    m
}

/// A BCAST invalidation's array of keys, without those `skip` changed itself (NOLOOP; 0 skips
/// none); None when nothing is left.
fn keys_proto(keys: &BTreeMap<Bytes, u64>, skip: u64) -> Option<Bytes> {
    let n = keys.values().filter(|&&by| skip == 0 || by != skip).count();
    if n == 0 {
        return None;
    }
    let mut num = itoa::Buffer::new();
    let mut m = BytesMut::with_capacity(n * 16);
    m.put_u8(b'*');
    m.extend_from_slice(num.format(n).as_bytes());
    m.extend_from_slice(b"\r\n");
    for (k, &by) in keys {
        if skip != 0 && by == skip {
            continue;
        }
        m.put_u8(b'$');
        m.extend_from_slice(num.format(k.len()).as_bytes());
        m.extend_from_slice(b"\r\n");
        m.extend_from_slice(k);
        m.extend_from_slice(b"\r\n");
    }
    Some(m.freeze())
}

/// Invalidations other clients' redirections sent to the running client, before its reply.
pub fn before_reply(state: &mut State, out: &mut BytesMut) {
    if !state.tracking.to_running.is_empty() {
        out.extend_from_slice(&state.tracking.to_running);
        state.tracking.to_running.clear();
    }
}

/// The running client's own invalidations, after its reply (Redis's
/// trackingHandlePendingKeyInvalidations): to itself, or to its redirection.
pub fn after_reply(state: &mut State, client: &mut Client, out: &mut BytesMut) {
    if state.tracking.pending_self.is_empty() {
        return;
    }
    let pending = std::mem::take(&mut state.tracking.pending_self);
    let Some(t) = client.tracking.as_deref_mut() else {
        return;
    };
    let own_resp3 = client.resp == 3;
    for key in pending {
        let tail = match &key {
            Some(k) => key_array(k),
            None => Bytes::from_static(if own_resp3 { b"_\r\n" } else { b"$-1\r\n" }),
        };
        if t.redirect == 0 || t.redirect == client.id {
            if own_resp3 {
                out.extend_from_slice(&invalidate_push(true, false, &tail));
            } else if t.redirect == client.id && client.pubsub.subscribed() {
                out.extend_from_slice(&invalidate_push(false, true, &tail));
            }
            continue;
        }
        match state
            .clients
            .get(&t.redirect)
            .map(|r| (r.id, r.resp3(), r.pubsub.subscribed()))
        {
            None => {
                t.broken_redirect = true;
                if own_resp3 {
                    out.extend_from_slice(b">2\r\n$21\r\ntracking-redir-broken\r\n:");
                    out.extend_from_slice(itoa::Buffer::new().format(t.redirect).as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
            }
            Some((rid, resp3, subscribed)) if resp3 || subscribed => {
                let m = invalidate_push(resp3, true, &tail);
                state.push_to(rid, &m);
            }
            Some(_) => {}
        }
    }
}

//! The pub/sub registry and message delivery (Redis's pubsub.c), owned by the executor.
//!
//! A message is encoded once per protocol version and the same `Bytes` is queued on every
//! subscriber's output channel, which also carries its replies, so each subscriber sees messages
//! in publish order, interleaved correctly with its own replies. The client whose batch is
//! running is not in `State::clients`: pushes for it (its subscribe confirmations, messages it
//! publishes to itself, keyspace events of its own writes) go to `State::self_pushes`, which
//! the dispatcher writes into the batch output before the command's reply, where Redis puts them.
//!
//! Every push is followed by Redis's `client-output-buffer-limit` check: a subscriber that does
//! not read is disconnected at the limit rather than buffered without bound or skipped.

use super::client::Client;
use super::State;
use crate::config::{Config, ObufClass};
use crate::glob::glob_match;
use crate::protocol::encode::encode;
use crate::protocol::Frame;
use bytes::{BufMut, Bytes, BytesMut};
use indexmap::{IndexMap, IndexSet};

type RandomState = ahash::RandomState;

/// The three kinds of subscription; they live in separate namespaces, as in Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    fn subscribe_name(self) -> &'static str {
        match self {
            Kind::Channel => "subscribe",
            Kind::Pattern => "psubscribe",
            Kind::Shard => "ssubscribe",
        }
    }

    fn unsubscribe_name(self) -> &'static str {
        match self {
            Kind::Channel => "unsubscribe",
            Kind::Pattern => "punsubscribe",
            Kind::Shard => "sunsubscribe",
        }
    }
}

/// One client's subscriptions (unsubscribe-all confirms in this order).
#[derive(Debug, Default)]
pub struct ClientPubSub {
    pub channels: IndexSet<Bytes, RandomState>,
    pub patterns: IndexSet<Bytes, RandomState>,
    pub shard: IndexSet<Bytes, RandomState>,
    /// Unix seconds since the client's pending output went over its soft limit (0: it is not).
    pub soft_limit_since: u64,
}

impl ClientPubSub {
    /// What (P)SUBSCRIBE confirmations count: channels plus patterns.
    pub fn count(&self) -> usize {
        self.channels.len() + self.patterns.len()
    }

    /// Redis's CLIENT_PUBSUB flag: any subscription of any kind.
    pub fn subscribed(&self) -> bool {
        self.count() + self.shard.len() > 0
    }

    fn set(&mut self, kind: Kind) -> &mut IndexSet<Bytes, RandomState> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    /// Patterns keep their order (Redis keeps them in a list); channels are a set in Redis too,
    /// so the O(1) removal may reorder them.
    fn remove(&mut self, kind: Kind, name: &[u8]) -> bool {
        match kind {
            Kind::Pattern => self.patterns.shift_remove(name),
            _ => self.set(kind).swap_remove(name),
        }
    }

    fn confirm_count(&self, kind: Kind) -> i64 {
        match kind {
            Kind::Shard => self.shard.len() as i64,
            _ => self.count() as i64,
        }
    }
}

/// Channel (or pattern) → subscriber ids in subscription order, which is delivery order.
#[derive(Debug, Default)]
pub struct Registry {
    channels: IndexMap<Bytes, Vec<u64>, RandomState>,
    patterns: IndexMap<Bytes, Vec<u64>, RandomState>,
    shard: IndexMap<Bytes, Vec<u64>, RandomState>,
}

impl Registry {
    fn map(&self, kind: Kind) -> &IndexMap<Bytes, Vec<u64>, RandomState> {
        match kind {
            Kind::Channel => &self.channels,
            Kind::Pattern => &self.patterns,
            Kind::Shard => &self.shard,
        }
    }

    fn map_mut(&mut self, kind: Kind) -> &mut IndexMap<Bytes, Vec<u64>, RandomState> {
        match kind {
            Kind::Channel => &mut self.channels,
            Kind::Pattern => &mut self.patterns,
            Kind::Shard => &mut self.shard,
        }
    }

    fn add(&mut self, kind: Kind, name: Bytes, id: u64) {
        self.map_mut(kind).entry(name).or_default().push(id);
    }

    fn remove(&mut self, kind: Kind, name: &[u8], id: u64) {
        let map = self.map_mut(kind);
        if let Some(ids) = map.get_mut(name) {
            if let Some(pos) = ids.iter().position(|&x| x == id) {
                ids.remove(pos);
            }
            if ids.is_empty() {
                map.swap_remove(name);
            }
        }
    }

    /// Active channels (INFO pubsub_channels, PUBSUB CHANNELS).
    pub fn channels(&self, kind: Kind) -> impl Iterator<Item = &Bytes> {
        self.map(kind).keys()
    }

    pub fn len(&self, kind: Kind) -> usize {
        self.map(kind).len()
    }

    /// Subscribers of one channel (PUBSUB NUMSUB / SHARDNUMSUB).
    pub fn subscribers(&self, kind: Kind, name: &[u8]) -> usize {
        self.map(kind).get(name).map_or(0, Vec::len)
    }
}

/// Messages larger than this are queued as one shared buffer instead of copied into each
/// subscriber's deferred output.
const SHARE_ABOVE: usize = 16 << 10;

/// A message encoded once per protocol version, shared by every subscriber.
struct Encoded<'a> {
    parts: [&'a [u8]; 4],
    n: usize,
    resp2: Option<Bytes>,
    resp3: Option<Bytes>,
}

impl<'a> Encoded<'a> {
    fn new(parts: &[&'a [u8]]) -> Encoded<'a> {
        let mut p: [&[u8]; 4] = [b""; 4];
        p[..parts.len()].copy_from_slice(parts);
        Encoded {
            parts: p,
            n: parts.len(),
            resp2: None,
            resp3: None,
        }
    }

    fn shared(&mut self, resp3: bool) -> Bytes {
        self.bytes(resp3);
        let slot = if resp3 { &self.resp3 } else { &self.resp2 };
        slot.clone().unwrap_or_default()
    }

    fn bytes(&mut self, resp3: bool) -> &[u8] {
        let slot = if resp3 {
            &mut self.resp3
        } else {
            &mut self.resp2
        };
        if slot.is_none() {
            let parts = &self.parts[..self.n];
            let mut out =
                BytesMut::with_capacity(parts.iter().map(|p| p.len() + 16).sum::<usize>() + 4);
            out.put_u8(if resp3 { b'>' } else { b'*' });
            let mut num = itoa::Buffer::new();
            out.extend_from_slice(num.format(parts.len()).as_bytes());
            out.extend_from_slice(b"\r\n");
            for p in parts {
                out.put_u8(b'$');
                out.extend_from_slice(num.format(p.len()).as_bytes());
                out.extend_from_slice(b"\r\n");
                out.extend_from_slice(p);
                out.extend_from_slice(b"\r\n");
            }
            *slot = Some(out.freeze());
        }
        slot.as_deref().unwrap_or_default()
    }

    /// Payload bytes (the encoding adds a few dozen).
    fn len(&self) -> usize {
        self.parts[..self.n].iter().map(|p| p.len()).sum()
    }

    fn frame(&self) -> Frame {
        Frame::Push(
            self.parts[..self.n]
                .iter()
                .map(|p| Frame::Bulk(Bytes::copy_from_slice(p)))
                .collect(),
        )
    }
}

/// Redis's `checkClientOutputBufferLimits`: over the hard limit, or over the soft limit for
/// more than its seconds. Tracks when the soft limit was first exceeded. `now_secs` is read
/// from the clock on first need (0: not yet).
pub fn over_output_limit(cfg: &Config, c: &mut Client, now_secs: &mut u64) -> bool {
    let class = if c.pubsub.subscribed() {
        ObufClass::Pubsub
    } else {
        ObufClass::Normal
    };
    let limit = cfg.client_output_buffer_limit[class as usize];
    if limit.hard == 0 && limit.soft == 0 {
        return false;
    }
    let used = c.pending_out() as u64;
    let hard = limit.hard != 0 && used >= limit.hard;
    let mut soft = limit.soft != 0 && used >= limit.soft;
    if soft {
        if *now_secs == 0 {
            *now_secs = super::unix_ms() / 1000;
        }
        let now_secs = *now_secs;
        if c.pubsub.soft_limit_since == 0 {
            c.pubsub.soft_limit_since = now_secs.max(1);
            soft = false;
        } else if now_secs.saturating_sub(c.pubsub.soft_limit_since) <= limit.soft_secs {
            soft = false;
        }
    } else {
        c.pubsub.soft_limit_since = 0;
    }
    hard || soft
}

/// The client's CLIENT LIST line without the newline, as Redis logs it.
fn describe(c: &Client) -> String {
    let mut s = String::new();
    c.info_line(&mut s);
    s.truncate(s.trim_end().len());
    s
}

impl State {
    /// SUBSCRIBE / PSUBSCRIBE / SSUBSCRIBE: one confirmation push per name, repeated names
    /// included (Redis confirms them again with an unchanged count).
    pub fn subscribe(&mut self, client: &mut Client, kind: Kind, names: &[Bytes]) {
        for name in names {
            if !client.pubsub.set(kind).contains(name) {
                let name = crate::store::value::own(name);
                client.pubsub.set(kind).insert(name.clone());
                self.pubsub.add(kind, name, client.id);
            }
            self.self_pushes.push(Frame::Push(vec![
                Frame::bulk_static(kind.subscribe_name()),
                Frame::Bulk(name.clone()),
                Frame::Integer(client.pubsub.confirm_count(kind)),
            ]));
        }
        self.update_pubsub_state(client);
    }

    /// UNSUBSCRIBE / PUNSUBSCRIBE / SUNSUBSCRIBE: the named ones (confirmed even when not
    /// subscribed), or all of this kind; with none to drop, one confirmation with a null name.
    pub fn unsubscribe(&mut self, client: &mut Client, kind: Kind, names: &[Bytes]) {
        let confirm = |srv: &mut State, name: Frame, count: i64| {
            srv.self_pushes.push(Frame::Push(vec![
                Frame::bulk_static(kind.unsubscribe_name()),
                name,
                Frame::Integer(count),
            ]));
        };
        if names.is_empty() {
            let all: Vec<Bytes> = client.pubsub.set(kind).drain(..).collect();
            // Each confirmation counts what is left after it.
            let base = client.pubsub.confirm_count(kind);
            if all.is_empty() {
                confirm(self, Frame::Null, base);
            }
            for (i, name) in all.iter().enumerate() {
                self.pubsub.remove(kind, name, client.id);
                let left = (all.len() - i - 1) as i64;
                confirm(self, Frame::Bulk(name.clone()), base + left);
            }
        } else {
            for name in names {
                if client.pubsub.remove(kind, name) {
                    self.pubsub.remove(kind, name, client.id);
                }
                let count = client.pubsub.confirm_count(kind);
                confirm(self, Frame::Bulk(name.clone()), count);
            }
        }
        self.update_pubsub_state(client);
    }

    /// Drops every subscription without confirmations (RESET, disconnect).
    pub fn unsubscribe_all_silently(&mut self, client: &mut Client) {
        for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
            for name in client.pubsub.set(kind).drain(..) {
                self.pubsub.remove(kind, &name, client.id);
            }
        }
        self.update_pubsub_state(client);
    }

    fn update_pubsub_state(&self, client: &Client) {
        // Subscribers wait for messages, so the idle `timeout` does not apply to them (Redis).
        client.shared.timeout_exempt.set(client.pubsub.subscribed());
    }

    /// PUBLISH / SPUBLISH: queues the message for every subscriber of the channel and, for
    /// PUBLISH, of every matching pattern. Returns the number of deliveries (a client subscribed
    /// to the channel and a matching pattern counts, and receives, twice).
    pub fn publish(&mut self, channel: &[u8], msg: &[u8], shard: bool) -> usize {
        let State {
            pubsub,
            clients,
            self_pushes,
            config,
            running,
            ..
        } = self;
        let mut receivers = 0;
        let mut doomed: Vec<u64> = Vec::new();
        let mut now_secs = 0;
        let mut deliver = |id: u64, enc: &mut Encoded| {
            if id == *running {
                self_pushes.push(enc.frame());
                return;
            }
            let Some(c) = clients.get_mut(&id) else {
                return;
            };
            if enc.len() <= SHARE_ABOVE {
                c.defer(enc.bytes(c.resp3()));
            } else {
                // One copy for all subscribers of a large message, not one each.
                c.push(enc.shared(c.resp3()), false);
            }
            if over_output_limit(config, c, &mut now_secs) {
                doomed.push(id);
            }
        };
        let (kind, head): (Kind, &[u8]) = if shard {
            (Kind::Shard, b"smessage")
        } else {
            (Kind::Channel, b"message")
        };
        if let Some(ids) = pubsub.map(kind).get(channel) {
            let mut enc = Encoded::new(&[head, channel, msg]);
            for &id in ids {
                deliver(id, &mut enc);
            }
            receivers += ids.len();
        }
        if !shard {
            for (pattern, ids) in &pubsub.patterns {
                if !glob_match(pattern, channel, false) {
                    continue;
                }
                let mut enc = Encoded::new(&[b"pmessage", pattern, channel, msg]);
                for &id in ids {
                    deliver(id, &mut enc);
                }
                receivers += ids.len();
            }
        }
        for id in doomed {
            if let Some(c) = self.clients.remove(&id) {
                tracing::warn!(
                    "Client {} scheduled to be closed ASAP for overcoming of output buffer limits.",
                    describe(&c)
                );
                self.close_client(c);
            }
        }
        receivers
    }

    /// Forgets a client that is going away (disconnect, QUIT, CLIENT KILL, output limit) and
    /// tells its connection to close.
    pub fn close_client(&mut self, mut c: Box<Client>) {
        self.forget_client(&mut c);
        c.kill();
    }

    /// Drops what the executor keeps about a client besides the `Client` itself.
    pub fn forget_client(&mut self, c: &mut Client) {
        if c.pubsub.subscribed() {
            self.unsubscribe_all_silently(c);
        }
        self.watches.unwatch_all(c.id);
        self.waiters.unblock(c.id);
        self.disable_tracking(c);
        self.redis_master.forget(c.id);
    }

    /// Writes the pushes addressed to the running client into its batch output.
    #[inline]
    pub fn flush_self_pushes(&mut self, resp3: bool, out: &mut BytesMut) {
        if self.self_pushes.is_empty() {
            return;
        }
        for f in self.self_pushes.drain(..) {
            encode(&f, resp3, out);
        }
    }

    /// Checks the running client's output after its batch (Redis checks every reply); true if
    /// it must be closed.
    pub fn batch_output_over_limit(&self, c: &mut Client) -> bool {
        if over_output_limit(&self.config, c, &mut 0) {
            tracing::warn!(
                "Client {} closed for overcoming of output buffer limits.",
                describe(c)
            );
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_message_matches_the_frame_encoder() {
        let mut e = Encoded::new(&[b"pmessage", b"p*", b"pa", b"hello"]);
        for resp3 in [false, true] {
            let mut out = BytesMut::new();
            encode(&e.frame(), resp3, &mut out);
            assert_eq!(e.bytes(resp3), &out[..]);
        }
    }

    #[test]
    fn soft_limit_needs_more_than_its_seconds_and_resets_below_it() {
        let addr = "127.0.0.1:1".parse().unwrap();
        let out = crate::machine::output::ConnOut::looped(3, Default::default());
        let mut c = Client::new(3, addr, addr, out, Default::default());
        // Output the loop has not written: what the limits count.
        let set_pending = |c: &Client, n: usize| {
            let mut b = c.out.buf.borrow_mut();
            b.clear();
            assert!(b.extend(&vec![b'x'; n]));
        };
        c.pubsub.channels.insert(Bytes::from_static(b"ch"));
        let mut cfg = Config::default();
        cfg.client_output_buffer_limit[ObufClass::Pubsub as usize] = crate::config::ObufLimit {
            hard: 1000,
            soft: 100,
            soft_secs: 2,
        };
        set_pending(&c, 150);
        assert!(!over_output_limit(&cfg, &mut c, &mut 10)); // first seen over soft at t=10
        assert!(!over_output_limit(&cfg, &mut c, &mut 12)); // 2 s: not more than 2 yet
        assert!(over_output_limit(&cfg, &mut c, &mut 13));
        set_pending(&c, 50);
        assert!(!over_output_limit(&cfg, &mut c, &mut 14)); // below: the clock restarts
        set_pending(&c, 150);
        assert!(!over_output_limit(&cfg, &mut c, &mut 15));
        set_pending(&c, 1000);
        assert!(over_output_limit(&cfg, &mut c, &mut 15)); // hard: at once
                                                           // Not subscribed: the normal class, unlimited by default.
        c.pubsub.channels.clear();
        assert!(!over_output_limit(&cfg, &mut c, &mut 100));
    }

    #[test]
    fn registry_keeps_subscription_order_and_drops_empty_channels() {
        let mut r = Registry::default();
        r.add(Kind::Channel, Bytes::from_static(b"a"), 5);
        r.add(Kind::Channel, Bytes::from_static(b"a"), 3);
        r.add(Kind::Channel, Bytes::from_static(b"a"), 9);
        r.remove(Kind::Channel, b"a", 3);
        assert_eq!(r.channels.get(&b"a"[..]), Some(&vec![5, 9]));
        r.remove(Kind::Channel, b"a", 5);
        r.remove(Kind::Channel, b"a", 9);
        assert_eq!(r.len(Kind::Channel), 0);
        assert_eq!(r.subscribers(Kind::Channel, b"a"), 0);
    }
}

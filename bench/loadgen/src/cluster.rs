//! What a cluster-mode client does for `loadgen cycle --cluster`: read the slot table with
//! `CLUSTER SLOTS` from a seed, keep one connection per master, send each command to its key's
//! slot's master, follow `-MOVED` (refreshing the whole table from the node it names, as redis-py,
//! ioredis and Lettuce do), follow `-ASK` once with `ASKING`, and retry `-TRYAGAIN` /
//! `-CLUSTERDOWN` after a short back-off.

use crate::resp::{Conn, Reply};
use std::time::{Duration, Instant};

pub const SLOTS: usize = slot::SLOTS as usize;
const NO_OWNER: u16 = u16::MAX;
/// Back-off before retrying `-TRYAGAIN`, `-CLUSTERDOWN` or an unreachable master (redis-py's
/// cluster client waits 0.25 s at its defaults; a lock client tuned for fast failover ~10-50 ms).
const BACKOFF: Duration = Duration::from_millis(10);
/// How long one command keeps being redirected or retried before it counts as failed.
const GIVE_UP: Duration = Duration::from_secs(5);

#[path = "../../common/slot.rs"]
mod slot;
#[cfg(test)]
use slot::crc16;

/// The key's hash slot, as an index into the slot table.
pub fn key_slot(key: &[u8]) -> usize {
    usize::from(slot::key_slot(key))
}

/// Slot -> master address, as `CLUSTER SLOTS` lists them.
#[derive(Clone)]
pub struct SlotTable {
    owner: Vec<u16>,
    pub addrs: Vec<String>,
}

impl SlotTable {
    fn index_of(&mut self, addr: &str) -> u16 {
        match self.addrs.iter().position(|a| a == addr) {
            Some(i) => i as u16,
            None => {
                self.addrs.push(addr.to_string());
                (self.addrs.len() - 1) as u16
            }
        }
    }

    /// Reads a `CLUSTER SLOTS` reply; `asked` is the node it came from (an empty or `?` host
    /// means "the address you reached me at", as Redis 7 answers without `cluster-announce-ip`).
    /// Keeps the address list's order for masters already known, so indexes stay valid.
    pub fn update(&mut self, reply: &Reply, asked: &str) -> Result<(), String> {
        let Reply::Array(Some(ranges)) = reply else {
            return Err(format!("CLUSTER SLOTS: {reply:?}"));
        };
        let asked_host = asked.rsplit_once(':').map(|(h, _)| h).unwrap_or(asked);
        let mut owner = vec![NO_OWNER; SLOTS];
        for r in ranges {
            let Reply::Array(Some(f)) = r else {
                return Err(format!("CLUSTER SLOTS range: {r:?}"));
            };
            let (Some(Reply::Int(first)), Some(Reply::Int(last)), Some(Reply::Array(Some(m)))) =
                (f.first(), f.get(1), f.get(2))
            else {
                return Err(format!("CLUSTER SLOTS range: {f:?}"));
            };
            let host = match m.first() {
                Some(Reply::Bulk(Some(h))) if !h.is_empty() && h.as_slice() != b"?" => {
                    String::from_utf8_lossy(h).into_owned()
                }
                _ => asked_host.to_string(),
            };
            let Some(Reply::Int(port)) = m.get(1) else {
                return Err(format!("CLUSTER SLOTS master: {m:?}"));
            };
            let (first, last) = (*first as usize, *last as usize);
            if first > last || last >= SLOTS {
                return Err(format!("CLUSTER SLOTS range {first}-{last}"));
            }
            let i = self.index_of(&format!("{host}:{port}"));
            owner[first..=last].fill(i);
        }
        self.owner = owner;
        Ok(())
    }

    pub async fn fetch(seed: &str) -> Result<SlotTable, String> {
        let mut t = SlotTable {
            owner: vec![NO_OWNER; SLOTS],
            addrs: Vec::new(),
        };
        let mut c = Conn::connect(seed)
            .await
            .map_err(|e| format!("{seed}: {e}"))?;
        let r = c
            .cmd(&[b"CLUSTER", b"SLOTS"])
            .await
            .map_err(|e| format!("{seed}: {e}"))?;
        t.update(&r, seed)?;
        Ok(t)
    }

    /// The masters that own at least one slot, by index.
    pub fn masters(&self) -> Vec<usize> {
        let mut m: Vec<usize> = self
            .owner
            .iter()
            .filter(|&&o| o != NO_OWNER)
            .map(|&o| o as usize)
            .collect();
        m.sort_unstable();
        m.dedup();
        m
    }

    pub fn owner(&self, slot: usize) -> Option<usize> {
        let o = self.owner[slot];
        (o != NO_OWNER).then_some(o as usize)
    }
}

/// One client's view of the cluster: its own table and its own connection to each master.
pub struct Router {
    pub table: SlotTable,
    conns: Vec<Option<Conn>>,
    /// Operations sent per address (same indexes as `table.addrs`): shows the spread.
    pub sent: Vec<u64>,
    pub moved: u64,
    pub asked: u64,
    pub retried: u64,
    pub reconnects: u64,
    pub refreshes: u64,
    /// Script bodies by SHA1, for a master that answers `-NOSCRIPT` (e.g. a new leader).
    scripts: Vec<(&'static str, &'static str)>,
}

fn moved_target(e: &str) -> Option<&str> {
    // "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381"
    e.split(' ').nth(2)
}

impl Router {
    pub fn new(table: SlotTable, scripts: Vec<(&'static str, &'static str)>) -> Router {
        Router {
            table,
            conns: Vec::new(),
            sent: Vec::new(),
            moved: 0,
            asked: 0,
            retried: 0,
            reconnects: 0,
            refreshes: 0,
            scripts,
        }
    }

    /// Connects to every master the table names (before the clock starts).
    pub async fn connect_all(&mut self) -> Result<(), String> {
        for i in self.table.masters() {
            self.conn(i).await?;
        }
        Ok(())
    }

    async fn conn(&mut self, i: usize) -> Result<&mut Conn, String> {
        if self.conns.len() < self.table.addrs.len() {
            self.conns.resize_with(self.table.addrs.len(), || None);
            self.sent.resize(self.table.addrs.len(), 0);
        }
        if self.conns[i].is_none() {
            let addr = &self.table.addrs[i];
            let c = Conn::connect(addr)
                .await
                .map_err(|e| format!("{addr}: {e}"))?;
            self.conns[i] = Some(c);
        }
        self.conns[i].as_mut().ok_or_else(|| "no connection".into())
    }

    /// Reads the table again, from `addr` first, then from every other known node.
    async fn refresh(&mut self, addr: Option<&str>) {
        self.refreshes += 1;
        let mut order: Vec<String> = addr.map(str::to_string).into_iter().collect();
        order.extend(self.table.addrs.iter().cloned());
        for a in order {
            let i = self.table.index_of(&a) as usize;
            let r = match self.conn(i).await {
                Ok(c) => c.cmd(&[b"CLUSTER", b"SLOTS"]).await,
                Err(_) => continue,
            };
            match r {
                Ok(r) if self.table.update(&r, &a).is_ok() => return,
                Ok(_) => {}
                Err(_) => self.conns[i] = None,
            }
        }
    }

    /// Sends one command on `key`'s master, with `WAIT n 0` in the same pipeline when `n > 0`,
    /// following redirections; returns the command's reply once WAIT (if any) answered >= n.
    pub async fn write(
        &mut self,
        key: &[u8],
        args: &[&[u8]],
        wait: &[u8],
        n: u32,
    ) -> Result<Reply, String> {
        let slot = key_slot(key);
        let t0 = Instant::now();
        loop {
            if t0.elapsed() > GIVE_UP {
                return Err(format!(
                    "slot {slot}: still redirected or refused after {GIVE_UP:?}"
                ));
            }
            let i = match self.table.owner(slot) {
                Some(i) => i,
                None => {
                    self.retried += 1;
                    tokio::time::sleep(BACKOFF).await;
                    self.refresh(None).await;
                    continue;
                }
            };
            let r = match self.conn(i).await {
                Ok(c) => send(c, false, args, wait, n).await,
                Err(e) => Err(e),
            };
            self.sent[i] += 1;
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    // A closed or refused connection (a node stopping, a leader handing over
                    // and closing its clients): the command may or may not have run, so it is
                    // reported, not retried; the next command finds the new master.
                    self.conns[i] = None;
                    self.reconnects += 1;
                    self.refresh(None).await;
                    return Err(format!("{}: {e}", self.table.addrs[i]));
                }
            };
            match &r.0 {
                Reply::Error(e) if e.starts_with("MOVED ") => {
                    self.moved += 1;
                    let to = moved_target(e).unwrap_or_default().to_string();
                    self.refresh(Some(&to)).await;
                    // The node that sent MOVED knows best for this slot even if the table it
                    // was refreshed from is behind.
                    let j = self.table.index_of(&to);
                    self.table.owner[slot] = j;
                }
                Reply::Error(e) if e.starts_with("ASK ") => {
                    self.asked += 1;
                    let to = moved_target(e).unwrap_or_default().to_string();
                    let j = self.table.index_of(&to) as usize;
                    // One command to the importing node, preceded by ASKING; the table stays.
                    let c = self.conn(j).await?;
                    let r = send(c, true, args, wait, n).await?;
                    return finish(r, n);
                }
                Reply::Error(e) if e.starts_with("TRYAGAIN") || e.starts_with("CLUSTERDOWN") => {
                    self.retried += 1;
                    tokio::time::sleep(BACKOFF).await;
                    if e.starts_with("CLUSTERDOWN") {
                        self.refresh(None).await;
                    }
                }
                Reply::Error(e) if e.starts_with("NOSCRIPT") => {
                    let sha = args.get(1).copied().unwrap_or_default();
                    let src = self
                        .scripts
                        .iter()
                        .find(|(s, _)| s.as_bytes() == sha)
                        .map(|(_, src)| *src)
                        .ok_or_else(|| format!("NOSCRIPT for an unknown script: {e}"))?;
                    let c = self.conn(i).await?;
                    match c.cmd(&[b"SCRIPT", b"LOAD", src.as_bytes()]).await {
                        Ok(Reply::Bulk(Some(_))) => {}
                        other => return Err(format!("SCRIPT LOAD: {other:?}")),
                    }
                }
                _ => return finish(r, n),
            }
        }
    }
}

/// The write's reply and WAIT's (when n > 0).
type Sent = (Reply, Option<Reply>);

async fn send(
    c: &mut Conn,
    asking: bool,
    args: &[&[u8]],
    wait: &[u8],
    n: u32,
) -> Result<Sent, String> {
    if asking {
        c.queue(&[b"ASKING"]);
    }
    c.queue(args);
    if n > 0 {
        c.queue(&[b"WAIT", wait, b"0"]);
    }
    c.flush().await.map_err(|e| e.to_string())?;
    if asking {
        match c.read_reply().await.map_err(|e| e.to_string())? {
            Reply::Simple(s) if s == b"OK" => {}
            other => return Err(format!("ASKING: {other:?}")),
        }
    }
    let r = c.read_reply().await.map_err(|e| e.to_string())?;
    let w = if n > 0 {
        Some(c.read_reply().await.map_err(|e| e.to_string())?)
    } else {
        None
    };
    Ok((r, w))
}

fn finish(r: Sent, n: u32) -> Result<Reply, String> {
    if n > 0 {
        match r.1 {
            Some(Reply::Int(k)) if k >= n as i64 => {}
            other => return Err(format!("WAIT: {other:?}")),
        }
    }
    Ok(r.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from Redis's own CLUSTER KEYSLOT.
        assert_eq!(crc16(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{foo}bar"), 12182);
        assert_eq!(key_slot(b"x{foo}y{bar}"), 12182);
        assert_eq!(key_slot(b"{}foo"), crc16(b"{}foo") as usize & 16383);
        assert_eq!(key_slot(b"foo{"), crc16(b"foo{") as usize & 16383);
    }

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(Some(s.as_bytes().to_vec()))
    }

    #[test]
    fn table_from_cluster_slots() {
        let range = |a: i64, b: i64, host: &str, port: i64| {
            Reply::Array(Some(vec![
                Reply::Int(a),
                Reply::Int(b),
                Reply::Array(Some(vec![bulk(host), Reply::Int(port), bulk("id")])),
            ]))
        };
        let mut t = SlotTable {
            owner: vec![NO_OWNER; SLOTS],
            addrs: vec![],
        };
        let r = Reply::Array(Some(vec![
            range(0, 5460, "127.0.0.1", 7001),
            range(5461, 10922, "", 7002),
            range(10923, 16383, "127.0.0.1", 7003),
        ]));
        t.update(&r, "10.0.0.9:7001").unwrap();
        assert_eq!(
            t.addrs,
            ["127.0.0.1:7001", "10.0.0.9:7002", "127.0.0.1:7003"]
        );
        assert_eq!(t.owner(0), Some(0));
        assert_eq!(t.owner(5461), Some(1));
        assert_eq!(t.owner(16383), Some(2));
        assert_eq!(t.masters(), [0, 1, 2]);
        // A later table keeps known addresses' indexes.
        let r = Reply::Array(Some(vec![range(0, 16383, "127.0.0.1", 7003)]));
        t.update(&r, "127.0.0.1:7003").unwrap();
        assert_eq!(t.owner(0), Some(2));
        assert_eq!(t.masters(), [2]);
        assert!(t.update(&Reply::Int(1), "x:1").is_err());
    }
}

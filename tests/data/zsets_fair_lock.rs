//! A Redisson-style fair lock (RedissonFairLock): the holder in a hash, the waiting queue in a
//! list `redisson_lock_queue:{name}`, each waiter's deadline in a sorted set
//! `redisson_lock_timeout:{name}`. The Lua scripts' steps are sent as commands by several
//! clients (the writes of each step inside MULTI/EXEC, as the script would apply them at once),
//! against deadbolt and redis-server, and the transcripts compared byte for byte.

use crate::common;

use common::{Conn, Server};

const NAME: &str = "fair";
const QUEUE: &str = "redisson_lock_queue:{fair}";
const TIMEOUTS: &str = "redisson_lock_timeout:{fair}";
const LEASE: &str = "30000";
const WAIT: i64 = 5000;

struct Client<'a> {
    c: Conn,
    owner: &'a str,
}

fn bulk(reply: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(reply).ok()?;
    if text.starts_with("$-1") || text.starts_with('_') {
        return None;
    }
    text.split("\r\n").nth(1).map(str::to_string)
}

fn int(reply: &[u8]) -> i64 {
    std::str::from_utf8(&reply[1..reply.len() - 2])
        .unwrap()
        .parse()
        .unwrap()
}

impl Client<'_> {
    fn run(&mut self, log: &mut Vec<String>, args: &[&str]) -> Vec<u8> {
        let r = self.c.cmd(args);
        let shown = if args[0] == "PTTL" {
            // Remaining time depends on the wall clock: keep only its magnitude.
            format!("pttl~{}s", (int(&r) + 500) / 1000)
        } else {
            String::from_utf8_lossy(&r).into_owned()
        };
        log.push(format!("{} {}: {}", self.owner, args.join(" "), shown));
        r
    }

    /// Drops queue heads whose deadline has passed (the loop every fair-lock script starts with).
    fn purge(&mut self, log: &mut Vec<String>, now: i64) {
        while let Some(first) = bulk(&self.run(log, &["LINDEX", QUEUE, "0"])) {
            let timeout = bulk(&self.run(log, &["ZSCORE", TIMEOUTS, &first]));
            match timeout {
                Some(t) if t.parse::<f64>().unwrap() <= now as f64 => {
                    self.run(log, &["MULTI"]);
                    self.run(log, &["ZREM", TIMEOUTS, &first]);
                    self.run(log, &["LPOP", QUEUE]);
                    self.run(log, &["EXEC"]);
                }
                _ => break,
            }
        }
    }

    /// tryLock with wait: None when acquired, else the ms to wait.
    fn try_lock(&mut self, log: &mut Vec<String>, now: i64) -> Option<i64> {
        let owner = self.owner;
        self.purge(log, now);
        let free = int(&self.run(log, &["EXISTS", NAME])) == 0;
        let my_turn = int(&self.run(log, &["EXISTS", QUEUE])) == 0
            || bulk(&self.run(log, &["LINDEX", QUEUE, "0"])).as_deref() == Some(owner);
        if free && my_turn {
            let waiting = self.run(log, &["ZRANGE", TIMEOUTS, "0", "-1"]);
            let n = int(&waiting[..waiting.iter().position(|&b| b == b'\r').unwrap() + 2]);
            let members: Vec<String> = std::str::from_utf8(&waiting)
                .unwrap()
                .split("\r\n")
                .skip(2)
                .step_by(2)
                .take(n as usize)
                .map(str::to_string)
                .collect();
            self.run(log, &["MULTI"]);
            self.run(log, &["LPOP", QUEUE]);
            self.run(log, &["ZREM", TIMEOUTS, owner]);
            for m in &members {
                self.run(log, &["ZINCRBY", TIMEOUTS, &(-WAIT).to_string(), m]);
            }
            self.run(log, &["HSET", NAME, owner, "1"]);
            self.run(log, &["PEXPIRE", NAME, LEASE]);
            self.run(log, &["EXEC"]);
            return None;
        }
        if int(&self.run(log, &["HEXISTS", NAME, owner])) == 1 {
            self.run(log, &["HINCRBY", NAME, owner, "1"]);
            self.run(log, &["PEXPIRE", NAME, LEASE]);
            return None;
        }
        if bulk(&self.run(log, &["ZSCORE", TIMEOUTS, owner])).is_some() {
            return Some(int(&self.run(log, &["PTTL", NAME])).max(0));
        }
        let last = bulk(&self.run(log, &["LINDEX", QUEUE, "-1"]));
        let ttl = match last {
            Some(l) if l != owner => match bulk(&self.run(log, &["ZSCORE", TIMEOUTS, &l])) {
                Some(score) => score.parse::<f64>().unwrap() as i64 - now,
                None => int(&self.run(log, &["PTTL", NAME])),
            },
            _ => int(&self.run(log, &["PTTL", NAME])),
        };
        // Deterministic deadlines: the PTTL part is rounded so both servers get the same score.
        let ttl = (ttl + 500) / 1000 * 1000;
        let timeout = (ttl + WAIT + now).to_string();
        if int(&self.run(log, &["ZADD", TIMEOUTS, &timeout, owner])) == 1 {
            self.run(log, &["RPUSH", QUEUE, owner]);
        }
        Some(ttl)
    }

    /// unlock: Some(next owner to notify) when released.
    fn unlock(&mut self, log: &mut Vec<String>, now: i64) -> Option<Option<String>> {
        self.purge(log, now);
        if int(&self.run(log, &["HEXISTS", NAME, self.owner])) == 0 {
            return None;
        }
        let owner = self.owner;
        let counter = int(&self.run(log, &["HINCRBY", NAME, owner, "-1"]));
        if counter > 0 {
            self.run(log, &["PEXPIRE", NAME, LEASE]);
            return Some(None);
        }
        self.run(log, &["DEL", NAME]);
        Some(bulk(&self.run(log, &["LINDEX", QUEUE, "0"])))
    }

    /// acquireFailed: leaves the queue, shortening the deadlines of those behind.
    fn give_up(&mut self, log: &mut Vec<String>) {
        let queue = self.run(log, &["LRANGE", QUEUE, "0", "-1"]);
        let text = String::from_utf8_lossy(&queue).into_owned();
        let items: Vec<&str> = text.split("\r\n").skip(2).step_by(2).collect();
        let behind: Vec<String> = items
            .iter()
            .skip_while(|m| **m != self.owner)
            .skip(1)
            .filter(|m| !m.is_empty())
            .map(|m| m.to_string())
            .collect();
        self.run(log, &["MULTI"]);
        for m in &behind {
            self.run(log, &["ZINCRBY", TIMEOUTS, &(-WAIT).to_string(), m]);
        }
        self.run(log, &["ZREM", TIMEOUTS, self.owner]);
        self.run(log, &["LREM", QUEUE, "0", self.owner]);
        self.run(log, &["EXEC"]);
    }
}

fn scenario(s: &Server) -> Vec<String> {
    let mut log = Vec::new();
    let mk = |owner| Client { c: s.conn(), owner };
    let (mut a, mut b, mut c, mut d, mut e) = (
        mk("uuid-a:1"),
        mk("uuid-b:1"),
        mk("uuid-c:1"),
        mk("uuid-d:1"),
        mk("uuid-e:1"),
    );
    let now = 1_700_000_000_000i64;
    assert_eq!(a.try_lock(&mut log, now), None);
    assert_eq!(a.try_lock(&mut log, now), None, "reentrant");
    assert!(b.try_lock(&mut log, now + 1).is_some());
    assert!(c.try_lock(&mut log, now + 2).is_some());
    assert!(d.try_lock(&mut log, now + 3).is_some());
    assert!(c.try_lock(&mut log, now + 4).is_some(), "already queued");
    // Not B's turn while A holds the lock.
    assert!(b.try_lock(&mut log, now + 5).is_some());
    assert_eq!(a.unlock(&mut log, now + 6), Some(None), "count 2 -> 1");
    assert_eq!(a.unlock(&mut log, now + 7), Some(Some("uuid-b:1".into())));
    // C cannot jump the queue; B, at its head, gets the lock.
    assert!(c.try_lock(&mut log, now + 8).is_some());
    assert_eq!(b.try_lock(&mut log, now + 9), None);
    c.give_up(&mut log);
    assert_eq!(b.unlock(&mut log, now + 10), Some(Some("uuid-d:1".into())));
    // D never comes back: long after its deadline E purges it and takes the lock.
    assert_eq!(e.try_lock(&mut log, now + 10_000_000), None);
    assert_eq!(e.unlock(&mut log, now + 10_000_001), Some(None));
    let mut f = mk("dump");
    f.run(&mut log, &["LRANGE", QUEUE, "0", "-1"]);
    f.run(&mut log, &["ZRANGE", TIMEOUTS, "0", "-1", "WITHSCORES"]);
    f.run(&mut log, &["EXISTS", NAME]);
    log
}

#[test]
fn fair_lock_queue_in_list_and_zset_matches_redis() {
    let ours = common::deadbolt(&[]);
    let theirs = common::redis_server(&[]);
    let a = scenario(&ours);
    let b = scenario(&theirs);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x, y);
    }
    assert_eq!(a.len(), b.len());
    assert!(a.iter().any(|l| l.contains("ZINCRBY")));
}

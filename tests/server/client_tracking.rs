//! CLIENT TRACKING (client-side caching), CLIENT REPLY and CLIENT UNBLOCK, compared byte for
//! byte with redis-server: each scenario's transcript (replies and pushes, in the order each
//! connection receives them) must be the same on both, with client ids written as `ID`.

use crate::common;

use common::*;
use std::time::Duration;

type Transcript = Vec<Vec<u8>>;

/// Replaces the decimal client ids in a reply with `ID` (ids differ between the servers).
fn scrub(reply: Vec<u8>, ids: &[i64]) -> Vec<u8> {
    let mut text = String::from_utf8_lossy(&reply).into_owned();
    for id in ids {
        for (from, to) in [
            (format!(":{id}\r\n"), ":ID\r\n".to_string()),
            (format!("={id} "), "=ID ".to_string()),
            (format!("redir={id}"), "redir=ID".to_string()),
        ] {
            text = text.replace(&from, &to);
        }
    }
    text.into_bytes()
}

fn id_of(c: &mut Conn) -> i64 {
    let r = c.cmd_str(&["CLIENT", "ID"]);
    r.trim_start_matches(':').trim().parse().unwrap()
}

fn push(c: &mut Conn) -> Vec<u8> {
    c.try_read_reply(Duration::from_secs(5))
        .expect("an invalidation push")
}

/// Nothing more arrives: a PING's reply is the next thing read.
fn nothing_pending(c: &mut Conn) -> Vec<u8> {
    c.cmd(&["PING"])
}

#[test]
fn default_mode_resp3_invalidates_readers_once() {
    both(|s| {
        let mut t: Transcript = Vec::new();
        let mut c = s.conn();
        let mut w = s.conn();
        c.cmd(&["HELLO", "3"]);
        t.push(c.cmd(&["CLIENT", "TRACKING", "on"]));
        t.push(c.cmd(&["GET", "a"]));
        t.push(c.cmd(&["MGET", "b", "c"]));
        t.push(c.cmd(&["SET", "x", "1"])); // a write is not remembered
        t.push(w.cmd(&["SET", "a", "1"]));
        t.push(push(&mut c));
        // Forgotten after one invalidation until read again.
        t.push(w.cmd(&["SET", "a", "2"]));
        t.push(w.cmd(&["MSET", "c", "1", "x", "2"]));
        t.push(push(&mut c));
        t.push(nothing_pending(&mut c));
        // Its own write: the reply first, then the invalidation.
        t.push(c.cmd(&["GET", "b"]));
        t.push(c.cmd(&["SET", "b", "1"]));
        t.push(push(&mut c));
        // A script's declared keys are remembered when it reads.
        t.push(c.cmd(&["EVAL", "return redis.call('get', KEYS[1])", "1", "s"]));
        t.push(w.cmd(&["DEL", "s", "nothing"]));
        t.push(w.cmd(&["SET", "s", "1"]));
        t.push(push(&mut c));
        // FLUSHALL invalidates everything with a null.
        t.push(c.cmd(&["GET", "f"]));
        t.push(w.cmd(&["FLUSHALL"]));
        t.push(push(&mut c));
        let info = w.cmd_str(&["INFO", "clients"]);
        t.push(
            info.lines()
                .filter(|l| l.starts_with("tracking_clients"))
                .collect::<String>()
                .into_bytes(),
        );
        t.push(c.cmd(&["CLIENT", "TRACKINGINFO"]));
        t.push(c.cmd(&["CLIENT", "GETREDIR"]));
        t.push(c.cmd(&["CLIENT", "TRACKING", "off"]));
        t.push(c.cmd(&["GET", "a"]));
        t.push(w.cmd(&["SET", "a", "3"]));
        t.push(nothing_pending(&mut c));
        t.push(c.cmd(&["CLIENT", "TRACKINGINFO"]));
        t.push(c.cmd(&["CLIENT", "GETREDIR"]));
        t
    });
}

#[test]
fn expiry_invalidates_like_a_write() {
    both(|s| {
        let mut t: Transcript = Vec::new();
        let mut c = s.conn();
        let mut w = s.conn();
        c.cmd(&["HELLO", "3"]);
        t.push(w.cmd(&["SET", "e", "1", "PX", "30"]));
        t.push(c.cmd(&["CLIENT", "TRACKING", "on"]));
        t.push(c.cmd(&["GET", "e"]));
        // Active expiry deletes it within a few cron ticks; the push is the event awaited.
        t.push(push(&mut c));
        t
    });
}

#[test]
fn redirect_to_a_resp2_subscriber_and_a_broken_redirect() {
    both(|s| {
        let mut t: Transcript = Vec::new();
        let mut r = s.conn();
        let mut c = s.conn();
        let mut c3 = s.conn();
        let mut w = s.conn();
        let rid = id_of(&mut r);
        let ids = [rid, id_of(&mut c), id_of(&mut c3)];
        t.push(r.cmd(&["SUBSCRIBE", "__redis__:invalidate"]));
        t.push(scrub(
            c.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &rid.to_string()]),
            &ids,
        ));
        t.push(c.cmd(&["GET", "k"]));
        t.push(w.cmd(&["SET", "k", "v"]));
        t.push(push(&mut r));
        t.push(scrub(c.cmd(&["CLIENT", "GETREDIR"]), &ids));
        t.push(scrub(c.cmd(&["CLIENT", "TRACKINGINFO"]), &ids));
        // FLUSHDB: a null for the RESP2 tracking client, as a message to its redirection.
        t.push(c.cmd(&["GET", "k"]));
        t.push(w.cmd(&["FLUSHDB"]));
        t.push(push(&mut r));
        // The redirection goes away: a RESP3 client is told, once per invalidation.
        c3.cmd(&["HELLO", "3"]);
        t.push(scrub(
            c3.cmd(&["CLIENT", "TRACKING", "on", "REDIRECT", &rid.to_string()]),
            &ids,
        ));
        t.push(c3.cmd(&["GET", "k"]));
        t.push(r.cmd(&["QUIT"]));
        assert!(r.is_closed(Duration::from_secs(5)));
        // The redirection is gone only once the server has seen the close.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while w
            .cmd_str(&["CLIENT", "LIST"])
            .contains(&format!("id={rid} "))
        {
            assert!(std::time::Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(5));
        }
        t.push(w.cmd(&["SET", "k", "w"]));
        t.push(scrub(push(&mut c3), &ids));
        t.push(scrub(c3.cmd(&["CLIENT", "TRACKINGINFO"]), &ids));
        let list = c3.cmd_str(&["CLIENT", "INFO"]);
        let flags = list.split(' ').find(|f| f.starts_with("flags=")).unwrap();
        t.push(flags.as_bytes().to_vec());
        t
    });
}

#[test]
fn bcast_prefixes_noloop_optin_optout() {
    both(|s| {
        let mut t: Transcript = Vec::new();
        let mut b = s.conn();
        let mut w = s.conn();
        b.cmd(&["HELLO", "3"]);
        t.push(b.cmd(&[
            "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a:", "PREFIX", "b:",
        ]));
        t.push(b.cmd(&["CLIENT", "TRACKINGINFO"]));
        t.push(w.cmd(&["MSET", "b:2", "x", "a:1", "y", "c:3", "z", "a:0", "q"]));
        t.push(push(&mut b));
        t.push(push(&mut b));
        t.push(nothing_pending(&mut b));
        // Prefix errors.
        t.push(b.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a"]));
        t.push(b.cmd(&[
            "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "z", "PREFIX", "zz",
        ]));
        t.push(b.cmd(&["CLIENT", "TRACKING", "on"]));
        t.push(b.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "d:"]));
        t.push(b.cmd(&["CLIENT", "TRACKINGINFO"]));
        t.push(b.cmd(&["CLIENT", "TRACKING", "off"]));
        // NOLOOP: its own changes are left out of a broadcast.
        t.push(b.cmd(&["CLIENT", "TRACKING", "on", "BCAST", "NOLOOP"]));
        t.push(b.cmd(&["SET", "mine", "1"]));
        t.push(w.cmd(&["SET", "theirs", "1"]));
        t.push(push(&mut b));
        t.push(b.cmd(&["CLIENT", "TRACKING", "off"]));
        // OPTIN: only after CACHING yes; OPTOUT: except after CACHING no.
        t.push(b.cmd(&["CLIENT", "TRACKING", "on", "OPTIN"]));
        t.push(b.cmd(&["GET", "o1"]));
        t.push(b.cmd(&["CLIENT", "CACHING", "yes"]));
        t.push(b.cmd(&["CLIENT", "TRACKINGINFO"]));
        t.push(b.cmd(&["GET", "o2"]));
        t.push(b.cmd(&["CLIENT", "TRACKINGINFO"]));
        t.push(w.cmd(&["MSET", "o1", "1", "o2", "2"]));
        t.push(push(&mut b));
        t.push(nothing_pending(&mut b));
        t.push(b.cmd(&["CLIENT", "CACHING", "no"]));
        t.push(b.cmd(&["CLIENT", "TRACKING", "on", "OPTOUT"]));
        t.push(b.cmd(&["CLIENT", "TRACKING", "off"]));
        t.push(b.cmd(&["CLIENT", "TRACKING", "on", "OPTOUT"]));
        t.push(b.cmd(&["CLIENT", "CACHING", "no"]));
        t.push(b.cmd(&["GET", "p1"]));
        t.push(b.cmd(&["GET", "p2"]));
        t.push(w.cmd(&["MSET", "p1", "1", "p2", "2"]));
        t.push(push(&mut b));
        t.push(nothing_pending(&mut b));
        t.push(b.cmd(&["CLIENT", "CACHING", "yes"]));
        t
    });
}

#[test]
fn tracking_option_errors() {
    both(|s| {
        let mut c = s.conn();
        [
            &["CLIENT", "TRACKING", "on", "PREFIX", "a"][..],
            &["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"],
            &["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"],
            &["CLIENT", "TRACKING", "on", "REDIRECT", "99999999"],
            &["CLIENT", "TRACKING", "on", "REDIRECT", "x"],
            &["CLIENT", "TRACKING", "on", "NOSUCH"],
            &["CLIENT", "TRACKING", "maybe"],
            &["CLIENT", "TRACKING"],
            &["CLIENT", "CACHING", "yes"],
            &["CLIENT", "CACHING", "maybe"],
            &["CLIENT", "TRACKING", "on", "OPTIN"],
            &["CLIENT", "CACHING", "no"],
            &["CLIENT", "CACHING", "maybe"],
            &["CLIENT", "TRACKING", "on", "OPTOUT"],
            &["CLIENT", "TRACKING", "on", "BCAST"],
            &["CLIENT", "GETREDIR"],
            &["CLIENT", "TRACKINGINFO"],
            &["CLIENT", "GETREDIR", "x"],
            &["CLIENT", "HELP"],
            &["CLIENT", "REPLY", "maybe"],
            &["CLIENT", "UNBLOCK", "1", "later"],
            &["CLIENT", "UNBLOCK", "x"],
            &["CLIENT", "UNBLOCK", "1", "timeout", "x"],
            &["CLIENT", "UNBLOCK", "0"],
        ]
        .iter()
        .map(|a| c.cmd(a))
        .collect()
    });
}

#[test]
fn client_reply_off_skip_on() {
    both(|s| {
        let mut t: Transcript = Vec::new();
        let mut c = s.conn();
        let mut cmds = Vec::new();
        for a in [
            &["CLIENT", "REPLY", "OFF"][..],
            &["SET", "a", "1"],
            &["GET", "a"],
            &["CLIENT", "REPLY", "SKIP"], // ignored while OFF
            &["CLIENT", "REPLY", "ON"],
            &["GET", "a"],
            &["CLIENT", "REPLY", "SKIP"],
            &["INCR", "a"],
            &["INCR", "a"],
            &["CLIENT", "REPLY", "SKIP"],
            &["CLIENT", "REPLY", "ON"],
            &["GET", "a"],
        ] {
            cmds.extend(resp_cmd(a));
        }
        c.send_raw(&cmds);
        for _ in 0..5 {
            t.push(c.read_reply());
        }
        t.push(nothing_pending(&mut c));
        // Pushes still arrive with replies off.
        let mut p = s.conn();
        t.push(c.cmd(&["SUBSCRIBE", "ch"]));
        c.send(&["CLIENT", "REPLY", "OFF"]);
        // (RESP2 subscribers may not run CLIENT: the error is silenced too.)
        t.push(p.cmd(&["PUBLISH", "ch", "m"]));
        t.push(push(&mut c));
        t
    });
}

#[test]
fn client_unblock_times_out_or_errors_a_blocked_client() {
    both(|s| {
        let mut t: Transcript = Vec::new();
        let mut a = s.conn();
        let mut b = s.conn();
        let aid = id_of(&mut a).to_string();
        for (cmd, reason) in [
            (&["BLPOP", "l", "0"][..], None),
            (&["BZPOPMIN", "z", "0"], Some("TIMEOUT")),
            (&["BLMOVE", "l", "m", "LEFT", "RIGHT", "0"], Some("error")),
            (&["WAIT", "1", "0"], None),
        ] {
            a.send(cmd);
            wait_blocked(&mut b, 1);
            let mut args = vec!["CLIENT", "UNBLOCK", aid.as_str()];
            args.extend(reason);
            t.push(b.cmd(&args));
            t.push(a.read_reply());
        }
        t.push(b.cmd(&["CLIENT", "UNBLOCK", &aid]));
        t.push(a.cmd(&["PING"]));
        t
    });
}

/// deadbolt's bound (Redis has none): a client naming thousands of BCAST prefixes would make
/// the overlap check, and then every write, compare against all of them.
#[test]
fn bcast_prefixes_are_bounded() {
    let s = deadbolt(&[]);
    let mut c = s.conn();
    c.cmd(&["HELLO", "3"]);
    let names: Vec<String> = (0..1001).map(|i| format!("p{i:05}:")).collect();
    let mut args = vec!["CLIENT", "TRACKING", "on", "BCAST"];
    for n in &names {
        args.extend(["PREFIX", n.as_str()]);
    }
    assert_eq!(
        c.cmd_str(&args),
        "-ERR too many tracking prefixes: at most 1000 per client\r\n"
    );
    args.truncate(4 + 2 * 1000);
    assert_eq!(c.cmd_str(&args), "+OK\r\n");
    assert_eq!(
        c.cmd_str(&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "zz"]),
        "-ERR too many tracking prefixes: at most 1000 per client\r\n"
    );
    // Still serving, and still invalidating.
    let mut w = s.conn();
    w.cmd(&["SET", "p00007:k", "v"]);
    let push = c
        .try_read_reply(Duration::from_secs(5))
        .expect("invalidation");
    assert!(String::from_utf8_lossy(&push).contains("p00007:k"));
}

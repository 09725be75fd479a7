//! The renderings over fabricated views, byte for byte against what redis-server and
//! redis-sentinel 7.0.15 send (docs/cluster.md, "The Sentinel surface clients use", holds the captures).

use super::*;
use crate::cmd::role::{acked, role_frame, timed_out_reply};
use crate::cmd::support::{hello_role, info_section, is_replica, MASTERDOWN, READONLY};
use crate::machine::{Host, State};
use crate::protocol::encode::encode;
use bytes::BytesMut;

fn member(id: u64, port: u16, matched: u64) -> Member {
    Member {
        id,
        addr: format!("127.0.0.1 {port} {}", port + 10000),
        voter: true,
        matched,
        active: true,
    }
}

/// The capture's set-up: a master on 17391 with one replica on 17392 at offset 1936.
fn view(me: u64, role: StateRole, leader: u64) -> ClusterView {
    ClusterView {
        id: me,
        role,
        leader,
        term: 3,
        commit: 1936,
        applied: 1936,
        members: vec![member(1, 17391, 0), member(2, 17392, 1936)],
    }
}

fn bytes(f: &Frame, resp3: bool) -> String {
    let mut out = BytesMut::new();
    encode(f, resp3, &mut out);
    String::from_utf8(out.to_vec()).unwrap()
}

fn err_bytes(r: CmdResult) -> String {
    let e = r.expect_err("an error");
    format!("-{}\r\n", String::from_utf8(e.to_bytes()).unwrap())
}

/// The keys of a flat RESP2 pair array or RESP3 map of bulk strings, and checks that every
/// value is a bulk string.
fn keys(f: &Frame) -> Vec<String> {
    let Frame::Map(pairs) = f else {
        panic!("not a map: {f:?}")
    };
    pairs
        .iter()
        .map(|(k, v)| {
            assert!(matches!(v, Frame::Bulk(_)), "{k:?} is not a bulk string");
            match k {
                Frame::Bulk(b) => String::from_utf8(b.to_vec()).unwrap(),
                other => panic!("key {other:?}"),
            }
        })
        .collect()
}

fn value(f: &Frame, key: &str) -> String {
    let Frame::Map(pairs) = f else {
        panic!("not a map")
    };
    pairs
        .iter()
        .find_map(|(k, v)| match (k, v) {
            (Frame::Bulk(k), Frame::Bulk(v)) if k == key.as_bytes() => {
                Some(String::from_utf8(v.to_vec()).unwrap())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {key}"))
}

#[test]
fn lone_server_answers_as_a_redis_master_without_replicas() {
    assert_eq!(
        bytes(&role_frame(None), false),
        "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"
    );
    assert_eq!(hello_role(None), "master");
    assert!(!is_replica(None));
    let mut out = String::new();
    info_section(None, "aa95ea03281e70e416c889af2050c70f634391dd", &mut out);
    assert_eq!(out, "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_replid:aa95ea03281e70e416c889af2050c70f634391dd\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\nrepl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n");
}

#[test]
fn role_of_leader_and_follower_as_captured() {
    let leader = view(1, StateRole::Leader, 1);
    assert_eq!(
        bytes(&role_frame(Some(&leader)), false),
        "*3\r\n$6\r\nmaster\r\n:1936\r\n*1\r\n*3\r\n$9\r\n127.0.0.1\r\n$5\r\n17392\r\n$4\r\n1936\r\n"
    );
    let follower = view(2, StateRole::Follower, 1);
    assert_eq!(
        bytes(&role_frame(Some(&follower)), false),
        "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:17391\r\n$9\r\nconnected\r\n:1936\r\n"
    );
    let lost = view(2, StateRole::Candidate, 0);
    assert_eq!(
        bytes(&role_frame(Some(&lost)), false),
        "*5\r\n$5\r\nslave\r\n$0\r\n\r\n:0\r\n$10\r\nconnecting\r\n:1936\r\n"
    );
    assert_eq!(hello_role(Some(&leader)), "master");
    assert_eq!(hello_role(Some(&follower)), "replica");
    assert!(is_replica(Some(&lost)) && !is_replica(Some(&leader)));
}

#[test]
fn info_replication_of_leader_and_follower_as_captured() {
    let id = "82cf16f6d0a0b1c2d3e4f5a6b7c8d9e0f1a2914f";
    let mut out = String::new();
    info_section(Some(&view(1, StateRole::Leader, 1)), id, &mut out);
    assert_eq!(out, format!("# Replication\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=127.0.0.1,port=17392,state=online,offset=1936,lag=0\r\nmaster_failover_state:no-failover\r\nmaster_replid:{id}\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:1936\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:1\r\nrepl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:1\r\nrepl_backlog_histlen:1936\r\n"));
    out.clear();
    info_section(Some(&view(2, StateRole::Follower, 1)), id, &mut out);
    assert_eq!(out, format!("# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:17391\r\nmaster_link_status:up\r\nmaster_last_io_seconds_ago:0\r\nmaster_sync_in_progress:0\r\nslave_read_repl_offset:1936\r\nslave_repl_offset:1936\r\nslave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_replid:{id}\r\nmaster_replid2:0000000000000000000000000000000000000000\r\nmaster_repl_offset:1936\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:1\r\nrepl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:1\r\nrepl_backlog_histlen:1936\r\n"));
    // Redis prints the link's down time only while it is down (after the offsets).
    out.clear();
    info_section(Some(&view(2, StateRole::Follower, 0)), id, &mut out);
    assert!(out.contains("master_link_status:down\r\nmaster_last_io_seconds_ago:-1\r\nmaster_sync_in_progress:0\r\nslave_read_repl_offset:1936\r\nslave_repl_offset:1936\r\nmaster_link_down_since_seconds:-1\r\nslave_priority:100\r\n"), "{out}");
}

#[test]
fn get_master_addr_by_name_as_captured() {
    for me in [1, 2] {
        let role = if me == 1 {
            StateRole::Leader
        } else {
            StateRole::Follower
        };
        let v = view(me, role, 1);
        assert_eq!(
            bytes(&get_master_addr(&v, "mymaster", b"mymaster"), false),
            "*2\r\n$9\r\n127.0.0.1\r\n$5\r\n17391\r\n"
        );
        assert_eq!(
            bytes(&get_master_addr(&v, "mymaster", b"nosuch"), false),
            "*-1\r\n"
        );
        assert_eq!(
            bytes(&get_master_addr(&v, "mymaster", b"nosuch"), true),
            "_\r\n"
        );
    }
    // No leader known: no master to name.
    let lost = view(2, StateRole::Candidate, 0);
    assert_eq!(
        bytes(&get_master_addr(&lost, "mymaster", b"mymaster"), false),
        "*-1\r\n"
    );
    assert_eq!(bytes(&masters(&lost, "mymaster"), false), "*0\r\n");
    assert_eq!(
        err_bytes(master(&lost, "mymaster", b"mymaster")),
        "-ERR No such master with that name\r\n"
    );
}

#[test]
fn unknown_master_name_as_captured() {
    let v = view(1, StateRole::Leader, 1);
    let want = "-ERR No such master with that name\r\n";
    assert_eq!(err_bytes(master(&v, "mymaster", b"nosuch")), want);
    assert_eq!(err_bytes(replicas_of(&v, "mymaster", b"nosuch")), want);
    assert_eq!(err_bytes(sentinels_of(&v, "mymaster", b"nosuch")), want);
    assert_eq!(err_bytes(ckquorum(&v, "mymaster", b"nosuch")), want);
    // The configured name is the one asked for, exactly (Sentinel's dict is case sensitive).
    assert_eq!(
        bytes(&get_master_addr(&v, "mymaster", b"MYMASTER"), false),
        "*-1\r\n"
    );
}

#[test]
fn masters_fields_in_sentinels_order_resp2_and_resp3() {
    let v = view(2, StateRole::Follower, 1);
    let f = masters(&v, "mymaster");
    let r2 = bytes(&f, false);
    assert!(r2.starts_with("*1\r\n*40\r\n$4\r\nname\r\n$8\r\nmymaster\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$4\r\nport\r\n$5\r\n17391\r\n"), "{r2}");
    let r3 = bytes(&f, true);
    assert!(
        r3.starts_with("*1\r\n%20\r\n$4\r\nname\r\n$8\r\nmymaster\r\n"),
        "{r3}"
    );
    let Frame::Array(items) = &f else { panic!() };
    assert_eq!(
        keys(&items[0]),
        [
            "name",
            "ip",
            "port",
            "runid",
            "flags",
            "link-pending-commands",
            "link-refcount",
            "last-ping-sent",
            "last-ok-ping-reply",
            "last-ping-reply",
            "down-after-milliseconds",
            "info-refresh",
            "role-reported",
            "role-reported-time",
            "config-epoch",
            "num-slaves",
            "num-other-sentinels",
            "quorum",
            "failover-timeout",
            "parallel-syncs"
        ]
    );
    assert_eq!(value(&items[0], "flags"), "master");
    assert_eq!(value(&items[0], "runid"), run_id(1));
    assert_eq!(value(&items[0], "num-slaves"), "1");
    assert_eq!(value(&items[0], "num-other-sentinels"), "1");
    assert_eq!(value(&items[0], "quorum"), "2");
    assert_eq!(value(&items[0], "config-epoch"), "3");
    assert_eq!(
        master(&v, "mymaster", b"mymaster").unwrap(),
        items[0],
        "SENTINEL master is the entry of SENTINEL masters"
    );
}

#[test]
fn replicas_fields_in_sentinels_order() {
    let v = view(1, StateRole::Leader, 1);
    let f = replicas_of(&v, "mymaster", b"mymaster").unwrap();
    assert!(bytes(&f, false).starts_with("*1\r\n*42\r\n$4\r\nname\r\n$15\r\n127.0.0.1:17392\r\n"));
    assert!(bytes(&f, true).starts_with("*1\r\n%21\r\n"));
    let Frame::Array(items) = &f else { panic!() };
    assert_eq!(
        keys(&items[0]),
        [
            "name",
            "ip",
            "port",
            "runid",
            "flags",
            "link-pending-commands",
            "link-refcount",
            "last-ping-sent",
            "last-ok-ping-reply",
            "last-ping-reply",
            "down-after-milliseconds",
            "info-refresh",
            "role-reported",
            "role-reported-time",
            "master-link-down-time",
            "master-link-status",
            "master-host",
            "master-port",
            "slave-priority",
            "slave-repl-offset",
            "replica-announced"
        ]
    );
    for (k, want) in [
        ("ip", "127.0.0.1"),
        ("port", "17392"),
        ("flags", "slave"),
        ("master-link-status", "ok"),
        ("master-host", "127.0.0.1"),
        ("master-port", "17391"),
        ("slave-repl-offset", "1936"),
    ] {
        assert_eq!(value(&items[0], k), want, "{k}");
    }
}

#[test]
fn sentinels_are_the_other_members() {
    let mut v = view(2, StateRole::Follower, 1);
    v.members.push(member(3, 17393, 0));
    let f = sentinels_of(&v, "mymaster", b"mymaster").unwrap();
    assert!(bytes(&f, false).starts_with("*2\r\n*28\r\n$4\r\nname\r\n$40\r\n"));
    assert!(bytes(&f, true).starts_with("*2\r\n%14\r\n"));
    let Frame::Array(items) = &f else { panic!() };
    assert_eq!(
        keys(&items[0]),
        [
            "name",
            "ip",
            "port",
            "runid",
            "flags",
            "link-pending-commands",
            "link-refcount",
            "last-ping-sent",
            "last-ok-ping-reply",
            "last-ping-reply",
            "down-after-milliseconds",
            "last-hello-message",
            "voted-leader",
            "voted-leader-epoch"
        ]
    );
    let ports: Vec<String> = items.iter().map(|i| value(i, "port")).collect();
    assert_eq!(
        ports,
        ["17391", "17393"],
        "everyone but this node, client ports"
    );
    assert_eq!(value(&items[0], "flags"), "sentinel");
    assert_eq!(value(&items[0], "voted-leader"), "?");
    // Each node names the others as they name themselves.
    assert_eq!(value(&items[1], "runid"), run_id(3));
    assert_eq!(value(&items[1], "name"), run_id(3));
    let myid = Frame::bulk_from(run_id(v.id));
    assert_eq!(
        bytes(&myid, false),
        "$40\r\n0000000000000000000000000000000000000002\r\n"
    );
}

#[test]
fn ckquorum_counts_voters() {
    let v = view(1, StateRole::Leader, 1);
    assert_eq!(
        bytes(&ckquorum(&v, "mymaster", b"mymaster").unwrap(), false),
        "+OK 2 usable Sentinels. Quorum and failover authorization can be reached\r\n"
    );
}

#[test]
fn readonly_text_is_redis_roslaveerr() {
    assert_eq!(
        format!("-{READONLY}\r\n"),
        "-READONLY You can't write against a read only replica.\r\n"
    );
}

#[test]
fn a_wait_that_times_out_answers_the_acks_other_waits_null() {
    struct Lone;
    impl Host for Lone {
        fn apply_change(
            &mut self,
            _: &mut State,
            _: crate::config::Apply,
            _: &crate::config::Config,
            _: &[&str],
        ) -> Result<(), String> {
            Ok(())
        }
        fn start_rewrite(&mut self, _: &State) -> std::io::Result<()> {
            Ok(())
        }
        fn loading(&self) -> bool {
            false
        }
        fn aof(&self) -> Option<&crate::persist::aof::Aof> {
            None
        }
        fn while_busy(&self) {}
        fn cluster(&self) -> Option<&ClusterView> {
            None
        }
        fn cluster_admin(
            &mut self,
            _op: &crate::replication::Admin,
            _group: Option<u32>,
        ) -> Result<(), String> {
            Err("no cluster".into())
        }
    }
    let argv = |a: &[&'static str]| {
        a.iter()
            .map(|s| Bytes::from_static(s.as_bytes()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        timed_out_reply(
            &argv(&["WAIT", "1", "100"]),
            &Lone,
            &Default::default(),
            0,
            Default::default()
        ),
        Frame::Integer(0)
    );
    assert_eq!(
        timed_out_reply(
            &argv(&["blpop", "k", "1"]),
            &Lone,
            &Default::default(),
            0,
            Default::default()
        ),
        Frame::NullArray
    );
    assert_eq!(acked(Some(&view(1, StateRole::Leader, 1)), 1936), 1);
    assert_eq!(acked(Some(&view(1, StateRole::Leader, 1)), 1937), 0);
}

/// A loop stand-in that reports a cluster view, for running commands through the real
/// dispatch pipeline.
struct Node(ClusterView);

impl Host for Node {
    fn apply_change(
        &mut self,
        _: &mut State,
        _: crate::config::Apply,
        _: &crate::config::Config,
        _: &[&str],
    ) -> Result<(), String> {
        Ok(())
    }
    fn start_rewrite(&mut self, _: &State) -> std::io::Result<()> {
        Ok(())
    }
    fn loading(&self) -> bool {
        false
    }
    fn aof(&self) -> Option<&crate::persist::aof::Aof> {
        None
    }
    fn while_busy(&self) {}
    fn cluster(&self) -> Option<&ClusterView> {
        Some(&self.0)
    }
    fn cluster_admin(
        &mut self,
        _op: &crate::replication::Admin,
        _group: Option<u32>,
    ) -> Result<(), String> {
        Err("a fabricated view".into())
    }
}

/// Runs each command (split on spaces) on one client of a node with `view`; the raw replies.
fn run_on(view: ClusterView, cmds: &[&str]) -> Vec<String> {
    use crate::machine::client::Client;
    let cfg = crate::config::Config::default();
    let shared = std::sync::Arc::new(crate::machine::Shared::new());
    let mut state = State::new(cfg, shared, crate::cmd::registry::table().entries.len());
    let mut host = Node(view);
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let addr = "127.0.0.1:1".parse().unwrap();
    let mut client = Client::new(7, addr, addr, tx, Default::default());
    cmds.iter()
        .map(|c| {
            let argv: Vec<Bytes> = c
                .split(' ')
                .map(|a| Bytes::from(a.replace('_', " ").into_bytes()))
                .collect();
            let mut out = BytesMut::new();
            let held =
                crate::cmd::dispatch::process(&mut state, &mut host, &mut client, argv, &mut out);
            assert!(held.is_none());
            String::from_utf8_lossy(&out).into_owned()
        })
        .collect()
}

const RO: &str = "-READONLY You can't write against a read only replica.\r\n";

/// Every expected reply here is what a real redis-server 7.0.15 replica (`replicaof`) sent.
#[test]
fn a_follower_refuses_writes_where_redis_does() {
    let got = run_on(
        view(2, StateRole::Follower, 1),
        &[
            "SET a b",
            "GET a",
            "MULTI",
            "SET a b",
            "GET a",
            "EXEC",
            "MULTI",
            "GET a",
            "EXEC",
            // A script without a shebang fails at its first write, with the script's suffix.
            "EVAL return_redis.call('set','a','b') 0",
            "EVAL return_redis.call('get','a') 0",
            // One with a shebang is a write unless it says no-writes (refused before it runs).
            "EVAL #!lua\nreturn_1 0",
            "EVAL #!lua_flags=no-writes\nreturn_1 0",
            "WAIT 1 0",
            "ROLE",
        ],
    );
    let want = [
        RO,
        "$-1\r\n",
        "+OK\r\n",
        RO,
        "+QUEUED\r\n",
        "-EXECABORT Transaction discarded because of previous errors.\r\n",
        "+OK\r\n",
        "+QUEUED\r\n",
        "*1\r\n$-1\r\n",
        "-READONLY You can't write against a read only replica. script: 8c2ea9ffe7e7d4a5e8bc8d1ee7de0ae5bd4d8c18, on @user_script:1.\r\n",
        "$-1\r\n",
        RO,
        ":1\r\n",
        "-ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.\r\n",
        "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:17391\r\n$9\r\nconnected\r\n:1936\r\n",
    ];
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if i == 9 {
            // The sha is the script's; the text around it is Redis's.
            assert!(
                g.starts_with("-READONLY You can't write against a read only replica. script: ")
                    && g.ends_with(", on @user_script:1.\r\n"),
                "{g}"
            );
            continue;
        }
        assert_eq!(g, w, "command {i}: {}", got.len());
    }
}

#[test]
fn a_leader_writes_and_every_node_answers_sentinel() {
    let got = run_on(
        view(1, StateRole::Leader, 1),
        &[
            "SET a b",
            "WAIT 1 0",
            "WAIT 2 0",
            "SENTINEL get-master-addr-by-name mymaster",
            "sentinel GET-MASTER-ADDR-BY-NAME nosuch",
            "SENTINEL masters x",
            "SENTINEL monitor a b c d",
            "SENTINEL myid",
            "HELLO 3",
            "SENTINEL masters",
            "SENTINEL help",
            "INFO commandstats",
        ],
    );
    assert_eq!(got[0], "+OK\r\n");
    // The follower holds everything committed: one replica acknowledged.
    assert_eq!(got[1], ":1\r\n");
    assert_eq!(got[2], "", "WAIT 2 parks the client (no reply yet)");
    // The parked client's next commands were still run here (the loop would hold them).
    assert_eq!(got[3], "*2\r\n$9\r\n127.0.0.1\r\n$5\r\n17391\r\n");
    assert_eq!(got[4], "*-1\r\n");
    assert_eq!(
        got[5],
        "-ERR wrong number of arguments for 'sentinel|masters' command\r\n"
    );
    assert_eq!(
        got[6],
        "-ERR unknown subcommand 'monitor'. Try SENTINEL HELP.\r\n"
    );
    assert_eq!(
        got[7],
        "$40\r\n0000000000000000000000000000000000000001\r\n"
    );
    assert!(
        got[8].contains("$4\r\nrole\r\n$6\r\nmaster\r\n"),
        "{}",
        got[8]
    );
    assert!(
        got[9].starts_with("*1\r\n%20\r\n$4\r\nname\r\n$8\r\nmymaster\r\n"),
        "{}",
        got[9]
    );
    assert!(
        got[10].starts_with("*19\r\n+SENTINEL <subcommand>"),
        "{}",
        got[10]
    );
    // A wrong arity counts as a rejected call of the subcommand; an unknown subcommand counts
    // nowhere (Redis's lookup finds no command to charge).
    let masters = got[11]
        .split("\r\n")
        .find(|l| l.starts_with("cmdstat_sentinel|masters:"))
        .unwrap_or_default();
    assert!(
        masters.starts_with("cmdstat_sentinel|masters:calls=1,")
            && masters.ends_with(",rejected_calls=1,failed_calls=0"),
        "{}",
        got[11]
    );
    assert!(!got[11].contains("cmdstat_sentinel:"), "{}", got[11]);
}

#[test]
fn an_unreachable_member_is_down_for_sentinel_clients() {
    let mut v = view(1, StateRole::Leader, 1);
    v.members.push(member(3, 17393, 0));
    v.members[2].active = false;
    // Redis lists connected replicas only; clients drop s_down/disconnected entries.
    let mut info = String::new();
    info_section(Some(&v), "x", &mut info);
    assert!(info.contains("connected_slaves:1\r\nslave0:ip=127.0.0.1,port=17392,"));
    assert!(!info.contains("17393"));
    let role = bytes(&role_frame(Some(&v)), false);
    assert!(role.contains("17392") && !role.contains("17393"), "{role}");
    let Frame::Array(reps) = replicas_of(&v, "mymaster", b"mymaster").unwrap() else {
        panic!("replicas")
    };
    assert_eq!(value(&reps[0], "flags"), "slave");
    assert_eq!(value(&reps[1], "flags"), "slave,s_down,disconnected");
    assert_eq!(value(&reps[1], "master-link-status"), "err");
    assert_eq!(
        value(&sentinel_entry(&v.members[2]), "flags"),
        "sentinel,s_down,disconnected"
    );
    assert_eq!(value(&sentinel_entry(&v.members[1]), "flags"), "sentinel");
}

/// Redis's WAIT counts connected replicas only (replicationCountAcksByOffset walks
/// server.slaves): a member that stopped answering is out of connected_slaves, and out of WAIT
/// too, even though it acknowledged everything before it died (a leader killed just after the
/// new one was elected still has matched = the old commit index on the new leader).
#[test]
fn wait_counts_only_connected_replicas() {
    let mut v = view(1, StateRole::Leader, 1);
    v.members.push(member(3, 17393, 1936));
    v.members[2].active = false;
    let got = run_on(v.clone(), &["WAIT 0 0", "WAIT 1 0", "INFO replication"]);
    assert_eq!(got[0], ":1\r\n");
    assert_eq!(got[1], ":1\r\n");
    assert!(got[2].contains("connected_slaves:1\r\n"), "{}", got[2]);
    assert_eq!(
        timed_out_reply(
            &[
                Bytes::from_static(b"WAIT"),
                Bytes::from_static(b"2"),
                Bytes::from_static(b"100")
            ],
            &Node(v),
            &Default::default(),
            0,
            Default::default()
        ),
        Frame::Integer(1)
    );
}

/// The leader may leave itself out of SENTINEL MASTERS while another voter is reachable
/// (clients then learn the master from a follower, which outlives the leader's death), never
/// when it is alone; a follower never does.
#[test]
fn the_leader_abstains_only_while_a_follower_can_answer() {
    let mut v = view(1, StateRole::Leader, 1);
    assert!(leader_may_abstain(&v));
    v.members[1].active = false;
    assert!(!leader_may_abstain(&v));
    // A learner does not count: clients list the voters.
    v.members[1].active = true;
    v.members[1].voter = false;
    assert!(!leader_may_abstain(&v));
    assert!(!leader_may_abstain(&view(2, StateRole::Follower, 1)));
}

#[test]
fn discovery_subcommands_are_the_ones_that_name_the_master() {
    let argv = |s: &str| -> Vec<Bytes> {
        s.split(' ')
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    };
    for yes in [
        "SENTINEL get-master-addr-by-name mymaster",
        "sentinel MASTERS",
        "SENTINEL master mymaster",
        "SENTINEL replicas mymaster",
        "SENTINEL slaves mymaster",
        "SENTINEL sentinels mymaster",
    ] {
        assert!(discovery_waits_for_leader(&argv(yes)), "{yes}");
    }
    for no in [
        "SENTINEL myid",
        "SENTINEL help",
        "PING",
        "GET masters",
        "SENTINEL",
    ] {
        assert!(!discovery_waits_for_leader(&argv(no)), "{no}");
    }
}

#[test]
fn masterdown_text_is_redis_masterdownerr() {
    assert_eq!(
        MASTERDOWN,
        "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
    );
}

/// The ping fields say how long ago this node heard from the member each entry names; an
/// entry whose member it knows nothing about keeps the idle rendering.
#[test]
fn ping_fields_come_from_when_each_member_was_heard() {
    let mut v = view(2, StateRole::Follower, 1);
    v.members.push(member(3, 17393, 0));
    v.members[2].active = false;
    let idle = |id: u64| match id {
        1 => Some(40),
        3 => Some(5300),
        _ => None,
    };
    let mut reps = replicas_of(&v, "mymaster", b"mymaster").unwrap();
    fill_pings(&mut reps, &idle);
    let Frame::Array(items) = &reps else { panic!() };
    // Itself (2): unknown to `idle`, left as rendered.
    assert_eq!(value(&items[0], "last-ok-ping-reply"), "0");
    assert_eq!(value(&items[1], "flags"), "slave,s_down,disconnected");
    assert_eq!(value(&items[1], "last-ok-ping-reply"), "5300");
    assert_eq!(value(&items[1], "last-ping-reply"), "5300");
    assert_eq!(value(&items[1], "last-ping-sent"), "5300");
    let mut m = master(&v, "mymaster", b"mymaster").unwrap();
    fill_pings(&mut m, &idle);
    assert_eq!(value(&m, "last-ok-ping-reply"), "40");
    assert_eq!(
        value(&m, "last-ping-sent"),
        "0",
        "a reply within the probe period"
    );
}

//! Users, AUTH, HELLO AUTH, ACL WHOAMI/LIST/USERS/HELP and requirepass, byte for byte against a
//! real redis-server started with the same users.

use crate::common;

use common::Server;

const USERS: &[&str] = &[
    "--user", "alice", "on", ">pw1", ">pw2", "~*", "+@all", "--user", "bob", "off", ">x", "~*",
    "+@all", "--user", "carol", "on", "nopass", "~*", "&*", "+@all", "--user", "dave", "on", ">d",
    "--user", "erin", "on", "nopass", "+@all",
];

fn pair(extra: &[&str]) -> (Server, Server) {
    (common::deadbolt(extra), common::redis_server(extra))
}

/// HELLO replies carry the client id, which differs between the two servers.
fn mask_id(reply: Vec<u8>) -> Vec<u8> {
    let s = String::from_utf8_lossy(&reply).into_owned();
    match s.find("$2\r\nid\r\n:") {
        Some(at) => {
            let start = at + "$2\r\nid\r\n:".len();
            let end = start + s[start..].find("\r\n").unwrap();
            format!("{}N{}", &s[..start], &s[end..]).into_bytes()
        }
        None => reply,
    }
}

/// Runs each session (a list of commands on one fresh connection) on both servers.
fn same(ours: &Server, redis: &Server, sessions: &[&[&[&str]]]) {
    for session in sessions {
        let (mut a, mut b) = (ours.conn(), redis.conn());
        for cmd in *session {
            let (x, y) = (mask_id(a.cmd(cmd)), mask_id(b.cmd(cmd)));
            assert_eq!(
                String::from_utf8_lossy(&x),
                String::from_utf8_lossy(&y),
                "{cmd:?} in session {session:?}"
            );
        }
    }
}

#[test]
fn users_from_the_config_match_redis() {
    let (ours, redis) = pair(USERS);
    same(
        &ours,
        &redis,
        &[
            &[&["ACL", "LIST"], &["ACL", "USERS"], &["ACL", "WHOAMI"]],
            &[
                &["AUTH", "alice", "pw1"],
                &["ACL", "WHOAMI"],
                &["AUTH", "alice", "pw2"],
            ],
            &[&["AUTH", "alice", "nope"], &["ACL", "WHOAMI"]],
            &[&["AUTH", "bob", "x"], &["ACL", "WHOAMI"]],
            &[
                &["AUTH", "nosuch", "x"],
                &["AUTH", "carol", "anything"],
                &["ACL", "WHOAMI"],
            ],
            // A user without commands: NO_AUTH commands still run, everything else is refused.
            &[
                &["AUTH", "dave", "d"],
                &["GET", "x"],
                &["SET", "x", "y"],
                &["PING"],
                &["ACL", "WHOAMI"],
                &["CLIENT", "ID"],
                &["HELLO", "2"],
                &["AUTH", "alice", "pw1"],
                &["SET", "x", "y"],
            ],
            // A user without keys: keyless commands run, commands with keys are refused.
            &[
                &["AUTH", "erin", "x"],
                &["GET", "x"],
                &["DEL", "a", "b"],
                &["PING"],
                &["KEYS", "*"],
                &["ACL", "WHOAMI"],
                // A script reaches only what its caller may (Redis's scriptVerifyACL).
                &["EVAL", "return redis.call('set', 'x', 'y')", "0"],
                &["EVAL", "return redis.pcall('get', 'x')", "0"],
                &["EVAL", "return redis.call('ping')", "0"],
                &["EVAL", "return redis.call('publish', 'ch', 'm')", "0"],
            ],
            // A user without commands reaches none from a script either (EVAL itself is refused).
            &[
                &["AUTH", "dave", "d"],
                &["EVAL", "return redis.call('ping')", "0"],
            ],
            &[
                &["AUTH", "default"],
                &["AUTH", "x"],
                &["AUTH", "default", "x", "y"],
            ],
            &[&["AUTH", "default", "whatever"], &["ACL", "WHOAMI"]],
            &[
                &["HELLO", "3", "AUTH", "alice", "bad"],
                &["HELLO", "3", "AUTH", "alice", "pw2"],
                &["ACL", "WHOAMI"],
                &["HELLO", "2", "AUTH", "bob", "x"],
            ],
            &[
                &["ACL"],
                &["ACL", "WHOAMI", "extra"],
                &["ACL", "foo"],
                &["ACL", "LIST", "x"],
            ],
        ],
    );
}

#[test]
fn requirepass_matches_redis() {
    let (ours, redis) = pair(&["--requirepass", "sek"]);
    same(
        &ours,
        &redis,
        &[
            &[
                &["PING"],
                &["GET", "x"],
                &["ACL", "WHOAMI"],
                &["HELLO", "3"],
                &["AUTH", "default", "bad"],
                &["AUTH", "bad"],
                &["PING"],
                &["AUTH", "sek"],
                &["PING"],
                &["ACL", "LIST"],
            ],
            &[&["HELLO", "3", "AUTH", "default", "sek"], &["PING"]],
            &[&["AUTH", "default", "sek"], &["RESET"], &["PING"]],
            // CONFIG SET requirepass changes the default user's password; a client that already
            // logged in stays logged in.
            &[
                &["AUTH", "sek"],
                &["CONFIG", "SET", "requirepass", "other"],
                &["PING"],
                &["ACL", "LIST"],
                &["AUTH", "sek"],
                &["AUTH", "other"],
                &["CONFIG", "SET", "requirepass", ""],
                &["ACL", "LIST"],
            ],
            // With no password again, a fresh connection needs no AUTH.
            &[&["PING"], &["AUTH", "x"], &["ACL", "WHOAMI"]],
        ],
    );
}

#[test]
fn a_config_file_with_users_and_quoted_passwords() {
    let dir = std::env::temp_dir().join(format!("deadbolt-ops-auth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("users.conf");
    std::fs::write(
        &path,
        "user default on >\"sp ace\" ~* &* +@all\nuser locker on >lockpw ~* +@all\n",
    )
    .unwrap();
    let s = common::deadbolt_with_file(&path, &[]);
    let mut c = s.conn();
    assert_eq!(c.cmd(&["PING"]), b"-NOAUTH Authentication required.\r\n");
    assert_eq!(c.cmd(&["AUTH", "sp ace"]), b"+OK\r\n");
    let mut c = s.conn();
    assert_eq!(c.cmd(&["AUTH", "locker", "lockpw"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&["SET", "lock", "me", "NX", "PX", "1000"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.cmd(&["ACL", "USERS"]),
        b"*2\r\n$7\r\ndefault\r\n$6\r\nlocker\r\n"
    );
    assert_eq!(c.cmd(&["ACL", "WHOAMI"]), b"$6\r\nlocker\r\n");
    // A user defined twice is refused, as Redis refuses it ("A user can only be defined once").
    std::fs::write(&path, "user locker on >a\nuser locker off\n").unwrap();
    let out = std::process::Command::new(common::deadbolt_bin())
        .arg(&path)
        .arg("--test-config")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("A user can only be defined once"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn acl_help_matches_redis() {
    let (ours, redis) = pair(&[]);
    same(&ours, &redis, &[&[&["ACL", "HELP"], &["ACL", "NOPE"]]]);
}

#[test]
fn passwords_are_never_logged() {
    let s = common::deadbolt(&[
        "--loglevel",
        "debug",
        "--requirepass",
        "top-secret-1",
        "--user",
        "alice",
        "on",
        ">top-secret-2",
        "~*",
        "+@all",
    ]);
    let mut c = s.conn();
    assert_eq!(
        c.cmd(&["AUTH", "alice", "top-secret-3"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(c.cmd(&["AUTH", "alice", "top-secret-2"]), b"+OK\r\n");
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "requirepass", "top-secret-4"]),
        b"+OK\r\n"
    );
    assert_eq!(c.cmd(&["QUIT"]), b"+OK\r\n");
    assert!(c.is_closed(std::time::Duration::from_secs(2)));
    // The main thread logs "Ready" after starting the executor, which may already have served
    // this client: wait for the line rather than race it.
    s.wait_log(
        "Ready to accept connections",
        std::time::Duration::from_secs(10),
    );
    let log = s.log.lock().unwrap().join("\n");
    assert!(!log.contains("top-secret"), "{log}");
    drop(s);
    // A refused user line names the line without its password.
    let out = std::process::Command::new(common::deadbolt_bin())
        .args([
            "--user",
            "bob",
            "on",
            ">top-secret-5",
            "bogus",
            "--test-config",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("user (redacted)"), "{err}");
    assert!(
        err.contains("Error in user declaration 'bogus': Syntax error"),
        "{err}"
    );
    assert!(!err.contains("top-secret"), "{err}");
}

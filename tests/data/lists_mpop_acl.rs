//! LMPOP/BLMPOP take their keys after numkeys (movable keys): a user without key permissions
//! is refused them as on redis-server. (Redis answers `LMPOP 0 k LEFT` with its numkeys error
//! because no key is found; deadbolt's ACL check treats movable keys as always present and
//! answers NOPERM: src/cmd/acl.rs `denied`.)

use crate::common;

#[test]
fn keyless_user_is_refused_lmpop_and_blmpop_like_redis() {
    let users = ["--user", "erin", "on", "nopass", "+@all"];
    for (name, server) in common::deadbolt_and_redis(&users) {
        let mut c = server.conn();
        assert_eq!(c.cmd(&["AUTH", "erin", "x"]), b"+OK\r\n", "{name}");
        let noperm: &[u8] =
            b"-NOPERM this user has no permissions to access one of the keys used as arguments\r\n";
        assert_eq!(c.cmd(&["LMPOP", "1", "k", "LEFT"]), noperm, "{name}");
        assert_eq!(
            c.cmd(&["BLMPOP", "0.01", "2", "k", "j", "LEFT"]),
            noperm,
            "{name}"
        );
        assert_eq!(c.cmd(&["LLEN", "k"]), noperm, "{name}");
        assert_eq!(c.cmd(&["PING"]), b"+PONG\r\n", "{name}");
    }
}

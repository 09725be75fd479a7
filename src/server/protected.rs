//! Protected mode, as Redis 7.0 does it at accept time: while `protected-mode` is on and the
//! default user needs no password, only loopback clients are served; anyone else gets `-DENIED`
//! and is disconnected. (With a loopback-only `bind`, nobody else can connect in the first place,
//! so the rule only bites when the server listens on other addresses.)

use std::net::IpAddr;

/// Redis 7.0.15's reply, byte for byte (typo "a an" included: clients and people grep for it).
pub const DENIED: &[u8] = b"-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// Whether the rule is in force: `protected-mode yes` and a default user without password.
pub fn active(cfg: &crate::config::Config) -> bool {
    cfg.protected_mode_active()
}

/// Redis 7.0's `islocalClient`: the peer address printed by `inet_ntop` is exactly "127.0.0.1"
/// or "::1" (the rest of 127.0.0.0/8 and IPv4-mapped loopback are remote), or a unix socket
/// (deadbolt has none).
pub fn is_local(peer: IpAddr) -> bool {
    match peer {
        IpAddr::V4(a) => a == std::net::Ipv4Addr::LOCALHOST,
        IpAddr::V6(a) => a == std::net::Ipv6Addr::LOCALHOST,
    }
}

/// The accept-time decision.
pub fn refuse(active: bool, peer: IpAddr) -> bool {
    active && !is_local(peer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn decision() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let mut cfg = Config::default();
        assert!(active(&cfg));
        for local in ["127.0.0.1", "::1"] {
            assert!(!refuse(true, ip(local)), "{local}");
        }
        for remote in [
            "127.0.0.2",
            "127.1.2.3",
            "127.255.255.255",
            "192.0.2.2",
            "10.0.0.1",
            "::ffff:127.0.0.1",
            "fd00::2",
            "0.0.0.0",
        ] {
            assert!(refuse(true, ip(remote)), "{remote}");
            assert!(!refuse(false, ip(remote)), "{remote}");
        }
        cfg.set("requirepass", "x").unwrap();
        assert!(!active(&cfg));
        cfg.set("requirepass", "").unwrap();
        assert!(active(&cfg));
        cfg.set("protected-mode", "no").unwrap();
        assert!(!active(&cfg));
        cfg.set("protected-mode", "yes").unwrap();
        // A password on the default user given by a `user` line counts too.
        cfg.users
            .set_user("default", &[">pw"], &Default::default())
            .unwrap();
        assert!(!active(&cfg));
    }
}

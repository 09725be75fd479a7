//! Users, as `user NAME rules…` config lines and `requirepass` define them: the part of the ACL
//! the configuration holds. The ACL command and the permission checks are in `cmd::acl`.
//!
//! deadbolt supports the rules a lock server needs: on/off, passwords (`>pw`, `<pw`, `#sha256`,
//! `!sha256`, `nopass`, `resetpass`), all or no keys (`~*`/`allkeys`, `resetkeys`), all or no
//! channels (`&*`/`allchannels`, `resetchannels`), all or no commands (`+@all`/`allcommands`,
//! `-@all`/`nocommands`) and `reset`. Finer rules (key patterns, single commands) are refused
//! when the config is loaded rather than silently widened.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

pub type PassHash = [u8; 32];

#[derive(Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    pub nopass: bool,
    /// SHA-256 of each password, in the order they were added (Redis keeps only hashes too).
    pub passwords: Vec<PassHash>,
    pub all_keys: bool,
    pub all_channels: bool,
    pub all_commands: bool,
}

// Hashes stay out of debug output (and so out of any log).
impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("name", &self.name)
            .field("enabled", &self.enabled)
            .field("passwords", &self.passwords.len())
            .finish_non_exhaustive()
    }
}

impl User {
    /// A new user as ACL SETUSER creates it: off, no password, no keys, no channels, no commands.
    pub fn new(name: &str) -> User {
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            passwords: Vec::new(),
            all_keys: false,
            all_channels: false,
            all_commands: false,
        }
    }

    /// Redis's default user: `on nopass ~* &* +@all`.
    pub fn default_user() -> User {
        User {
            name: "default".into(),
            enabled: true,
            nopass: true,
            passwords: Vec::new(),
            all_keys: true,
            all_channels: true,
            all_commands: true,
        }
    }

    pub fn perms(&self) -> Perms {
        Perms {
            no_commands: !self.all_commands,
            no_keys: !self.all_keys,
            no_channels: !self.all_channels,
        }
    }

    /// Applies one rule (ACLSetUser); the error says why the rule is refused.
    pub fn apply(&mut self, rule: &str) -> Result<(), String> {
        let lower = rule.to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "~*" | "allkeys" => self.all_keys = true,
            "resetkeys" => self.all_keys = false,
            "&*" | "allchannels" => self.all_channels = true,
            "resetchannels" => self.all_channels = false,
            "+@all" | "allcommands" => self.all_commands = true,
            "-@all" | "nocommands" => self.all_commands = false,
            "reset" => {
                let name = std::mem::take(&mut self.name);
                *self = User::new(&name);
            }
            _ => match rule.as_bytes().first() {
                Some(b'>') => {
                    let h = hash_password(&rule.as_bytes()[1..]);
                    if !self.passwords.contains(&h) {
                        self.passwords.push(h);
                    }
                    self.nopass = false;
                }
                Some(b'#') => {
                    let h = parse_hash(&rule[1..])?;
                    if !self.passwords.contains(&h) {
                        self.passwords.push(h);
                    }
                    self.nopass = false;
                }
                Some(b'<') | Some(b'!') => {
                    let h = if rule.starts_with('<') {
                        hash_password(&rule.as_bytes()[1..])
                    } else {
                        parse_hash(&rule[1..])?
                    };
                    let before = self.passwords.len();
                    self.passwords.retain(|p| *p != h);
                    if self.passwords.len() == before {
                        return Err("no such password".into());
                    }
                }
                _ => {
                    return Err(format!(
                        "unsupported ACL rule '{}' (deadbolt supports on, off, >password, <password, #hash, !hash, nopass, resetpass, ~*, allkeys, resetkeys, &*, allchannels, resetchannels, +@all, allcommands, -@all, nocommands, reset)",
                        if rule.starts_with(['>', '<']) { "<password>" } else { rule }
                    ))
                }
            },
        }
        Ok(())
    }

    /// The user in config-file syntax, as ACL LIST prints it.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "user {} {}",
            self.name,
            if self.enabled { "on" } else { "off" }
        );
        if self.nopass {
            s.push_str(" nopass");
        }
        for p in &self.passwords {
            s.push_str(" #");
            for b in p {
                s.push_str(&format!("{b:02x}"));
            }
        }
        if self.all_keys {
            s.push_str(" ~*");
        }
        s.push_str(if self.all_channels {
            " &*"
        } else {
            " resetchannels"
        });
        s.push_str(if self.all_commands {
            " +@all"
        } else {
            " -@all"
        });
        s
    }

    /// Whether `pass` opens this user (constant time over every stored hash).
    pub fn password_ok(&self, pass: &[u8]) -> bool {
        if self.nopass {
            return true;
        }
        let h = hash_password(pass);
        let mut ok = false;
        for p in &self.passwords {
            ok |= constant_time_eq(p, &h);
        }
        ok
    }
}

pub fn hash_password(pass: &[u8]) -> PassHash {
    Sha256::digest(pass).into()
}

fn parse_hash(hex: &str) -> Result<PassHash, String> {
    let bad = || {
        "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters".to_string()
    };
    if hex.len() != 64 {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, chunk) in hex.as_bytes().chunks(2).enumerate() {
        let digit = |c: u8| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        };
        let (Some(hi), Some(lo)) = (digit(chunk[0]), digit(chunk[1])) else {
            return Err(bad());
        };
        out[i] = hi << 4 | lo;
    }
    Ok(out)
}

/// What a client may do, fixed at authentication. `Default` is the unrestricted default user.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Perms {
    pub no_commands: bool,
    pub no_keys: bool,
    pub no_channels: bool,
}

impl Perms {
    pub fn restricted(self) -> bool {
        self.no_commands || self.no_keys || self.no_channels
    }
}

/// Every user by name (sorted, as ACL LIST and ACL USERS print them). Always has `default`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Users(BTreeMap<String, User>);

impl Default for Users {
    fn default() -> Self {
        let mut m = BTreeMap::new();
        m.insert("default".to_string(), User::default_user());
        Users(m)
    }
}

impl Users {
    pub fn get(&self, name: &[u8]) -> Option<&User> {
        std::str::from_utf8(name).ok().and_then(|n| self.0.get(n))
    }

    pub fn default_user(&self) -> &User {
        self.0
            .get("default")
            .expect("the default user always exists")
    }

    pub fn iter(&self) -> impl Iterator<Item = &User> {
        self.0.values()
    }

    /// Redis's `authRequired`: a new connection must AUTH unless the default user is on and
    /// needs no password.
    pub fn auth_required(&self) -> bool {
        let d = self.default_user();
        !d.nopass || !d.enabled
    }

    /// A `user NAME rule…` config line: creates the user if needed, then applies the rules in
    /// order. All or nothing: a bad rule leaves the user as it was.
    pub fn set_user(&mut self, words: &[String]) -> Result<(), String> {
        let Some((name, rules)) = words.split_first() else {
            return Err("wrong number of arguments".into());
        };
        if name.is_empty() || name.bytes().any(|b| b.is_ascii_whitespace() || b < b'!') {
            return Err("Usernames can't contain spaces or null characters".into());
        }
        let mut u = self.0.get(name).cloned().unwrap_or_else(|| User::new(name));
        for r in rules {
            u.apply(r)
                .map_err(|e| format!("Error in user declaration '{name}': {e}"))?;
        }
        self.0.insert(name.clone(), u);
        Ok(())
    }

    /// `requirepass`: the default user's password is replaced (nopass when empty).
    pub fn set_default_password(&mut self, pass: Option<&str>) {
        let d = self
            .0
            .entry("default".into())
            .or_insert_with(User::default_user);
        d.passwords.clear();
        match pass {
            Some(p) => {
                d.nopass = false;
                d.passwords.push(hash_password(p.as_bytes()));
            }
            None => d.nopass = true,
        }
    }
}

/// Compares without an early exit, so timing does not reveal how much of a password matched.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u8 | ((a.len() ^ b.len()) >> 8) as u8;
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0xff);
        diff |= x ^ y;
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(lines: &[&str]) -> Users {
        let mut u = Users::default();
        for l in lines {
            let words: Vec<String> = l.split_whitespace().map(str::to_string).collect();
            u.set_user(&words).unwrap();
        }
        u
    }

    #[test]
    fn describe_matches_redis() {
        // Lines from a real redis-server 7.0 (ACL LIST) for the same config.
        let u = users(&[
            "alice on >pw1 >pw2 ~* +@all",
            "bob off >x ~* +@all",
            "carol on nopass ~* &* +@all",
            "dave on >d",
        ]);
        let got: Vec<String> = u.iter().map(User::describe).collect();
        assert_eq!(got, vec![
            "user alice on #c592df4a86933b92addc9842402ddf198c638ea9be58916ee6e3734e1e3152f8 #93915a0a4bf8f634cb1856494dd4304472ad46b9827f541f76b6761c49cc55b0 ~* resetchannels +@all",
            "user bob off #2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881 ~* resetchannels +@all",
            "user carol on nopass ~* &* +@all",
            "user dave on #18ac3e7343f016890c510e93f935261169d9e3f565436429830faf0934f4f8e4 resetchannels -@all",
            "user default on nopass ~* &* +@all",
        ]);
    }

    #[test]
    fn rules() {
        let mut u = User::new("x");
        u.apply(">a").unwrap();
        u.apply(">b").unwrap();
        assert!(u.password_ok(b"a") && u.password_ok(b"b") && !u.password_ok(b"c"));
        u.apply("<a").unwrap();
        assert!(!u.password_ok(b"a"));
        assert_eq!(u.apply("<a"), Err("no such password".into()));
        u.apply("nopass").unwrap();
        assert!(u.password_ok(b"anything") && u.passwords.is_empty());
        u.apply("resetpass").unwrap();
        assert!(!u.password_ok(b""));
        let h = "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"; // sha256("a")
        u.apply(&format!("#{h}")).unwrap();
        assert!(u.password_ok(b"a"));
        assert!(u.apply("#ABC").is_err());
        assert!(u.apply(&format!("#{}", h.to_uppercase())).is_err());
        let e = u.apply("~foo*").unwrap_err();
        assert!(e.starts_with("unsupported ACL rule '~foo*'"), "{e}");
        // A refused password rule does not echo the password.
        assert!(!u.apply("+get").unwrap_err().contains("secret"));
        u.apply("on").unwrap();
        u.apply("reset").unwrap();
        assert_eq!(u, User::new("x"));
    }

    #[test]
    fn a_bad_rule_leaves_the_user_unchanged() {
        let mut u = users(&["alice on >pw ~* +@all"]);
        let before = u.clone();
        let words: Vec<String> = ["alice", "off", "~nope"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert!(u.set_user(&words).is_err());
        assert_eq!(u, before);
    }

    #[test]
    fn requirepass_is_the_default_users_password() {
        let mut u = Users::default();
        assert!(!u.auth_required());
        u.set_default_password(Some("sek"));
        assert!(u.auth_required());
        assert!(u.default_user().password_ok(b"sek"));
        assert!(!u.default_user().password_ok(b"bad"));
        u.set_default_password(None);
        assert!(!u.auth_required());
        let words: Vec<String> = ["default", "off"].iter().map(|s| s.to_string()).collect();
        u.set_user(&words).unwrap();
        assert!(u.auth_required());
    }
}

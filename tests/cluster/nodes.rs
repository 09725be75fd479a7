//! Deadbolt cluster nodes on loopback for the Raft-groups tests: three (or a fourth that joins
//! later), laid out as each test names (the test-only `DEADBOLT_CLUSTER_GROUPS` split, or the
//! `cluster-groups` / `cluster-slot-groups` directives), killed, stopped, frozen and started
//! again one by one, and asked what a client asks.
//!
//! A node closes its plain clients when a group's leadership moves off it, and on a loaded
//! machine leadership moves at any time: `ask` opens a fresh connection per command and takes
//! a close or a silence as no answer (its callers poll with a deadline), `answer` asks again
//! until the node answers, and every wait here is a poll with a deadline. Each node's output
//! goes to `n<id>.log` in the cluster's directory; a failing test prints the end of each.

use crate::common;

use common::{cluster_node_args, cluster_ports, reply_len, resp_cmd, TempDir};
use deadbolt::replication::group::key_hash_slot;
use std::cell::Cell;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The peer port's shared secret every node of these clusters proves.
pub const SECRET: &str = "cluster-groups-secret-0123456789abcdef";
/// How long one reply is awaited on one connection.
const REPLY_WAIT: Duration = Duration::from_secs(5);
/// How long `answer` asks a node again that answers nothing, and `ask_until` / `read_until`
/// one that answers something else.
const ANSWER_WAIT: Duration = Duration::from_secs(20);
/// How long a started node has to listen, and a stopped one to exit.
const START_WAIT: Duration = Duration::from_secs(20);

/// How the nodes are started: `Nodes::new(name)`, then the layout, then `start`.
pub struct Layout {
    name: String,
    args: Vec<String>,
    env_groups: Option<String>,
    groups: Option<usize>,
    joiners: usize,
}

impl Layout {
    /// Groups from the test-only environment split (`"1:8192-16383"`: group 1 owns those
    /// slots, the home group the rest).
    pub fn env_groups(mut self, split: &str) -> Layout {
        self.env_groups = Some(split.to_string());
        self
    }

    /// `cluster-groups n`: the slots split as `redis-cli --cluster create` splits them.
    pub fn groups(mut self, n: usize) -> Layout {
        self.groups = Some(n);
        self.args(&["--cluster-groups", &n.to_string()])
    }

    /// `cluster-slot-groups table`.
    pub fn slot_groups(self, table: &str) -> Layout {
        self.args(&["--cluster-slot-groups", table])
    }

    /// Directives every node gets, after the layout's.
    pub fn args(mut self, extra: &[&str]) -> Layout {
        self.args.extend(extra.iter().map(|s| s.to_string()));
        self
    }

    /// A fourth node, not started by `start`: it names the founders and itself, and joins
    /// (`cluster-join yes`) with no membership in any group.
    pub fn joiner(mut self) -> Layout {
        self.joiners += 1;
        self
    }

    /// Starts the three founders and waits until each listens.
    pub fn start(self) -> Nodes {
        let dir = TempDir::new(&self.name);
        let (ports, all) = cluster_ports(3 + self.joiners as u64);
        let founders = all.split(' ').take(3).collect::<Vec<_>>().join(" ");
        let mut args = Vec::new();
        for (i, (port, _)) in ports.iter().enumerate() {
            let id = i as u64 + 1;
            let node_dir = dir.0.join(format!("n{id}"));
            std::fs::create_dir_all(&node_dir).unwrap();
            let peers = if i < 3 { &founders } else { &all };
            let mut a = cluster_node_args(*port, &node_dir, id, peers, SECRET);
            a.extend(["--cluster-enabled".into(), "yes".into()]);
            a.extend(self.args.iter().cloned());
            if i >= 3 {
                a.extend(["--cluster-join".into(), "yes".into()]);
            }
            args.push(a);
        }
        let mut nodes = Nodes {
            ports: ports.iter().map(|p| p.0).collect(),
            peer_ports: ports.iter().map(|p| p.1).collect(),
            children: ports.iter().map(|_| None).collect(),
            args,
            env_groups: self.env_groups,
            groups: self.groups,
            probes: Cell::new(0),
            dir,
        };
        for i in 0..3 {
            nodes.start(i);
        }
        nodes
    }
}

/// The running nodes (index i is node id i + 1); killed when dropped.
pub struct Nodes {
    /// Client ports, in node order.
    pub ports: Vec<u16>,
    /// Raft peer ports, in node order.
    pub peer_ports: Vec<u16>,
    children: Vec<Option<Child>>,
    args: Vec<Vec<String>>,
    env_groups: Option<String>,
    groups: Option<usize>,
    /// Leader probes written so far (each probe round writes a value of its own).
    probes: Cell<u64>,
    dir: TempDir,
}

impl Nodes {
    /// Three nodes with cluster mode on (`cluster-enabled yes`) and one group, until the
    /// layout says otherwise.
    #[allow(clippy::new_ret_no_self)]
    pub fn new(name: &str) -> Layout {
        Layout {
            name: name.to_string(),
            args: Vec::new(),
            env_groups: None,
            groups: None,
            joiners: 0,
        }
    }

    fn command(&self, i: usize, extra: &[&str]) -> Command {
        let mut cmd = Command::new(common::deadbolt_bin());
        // (The I/O threads of scripts/test's second pass.)
        cmd.args(&self.args[i])
            .args(common::io_threads_args())
            .args(extra)
            .stdin(Stdio::null());
        if let Some(split) = &self.env_groups {
            cmd.env("DEADBOLT_CLUSTER_GROUPS", split);
        }
        cmd
    }

    /// Starts node `i` (its output appended to its log) and waits until it listens.
    pub fn start(&mut self, i: usize) {
        assert!(self.children[i].is_none(), "node {} runs already", i + 1);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(i))
            .unwrap();
        let child = self
            .command(i, &[])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn deadbolt");
        self.children[i] = Some(child);
        let deadline = Instant::now() + START_WAIT;
        while TcpStream::connect(("127.0.0.1", self.ports[i])).is_err() {
            assert!(Instant::now() < deadline, "node {} never listened", i + 1);
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts node `i` with `extra` directives after its own, expecting it to refuse: its
    /// exit status and whole output once it exited.
    pub fn start_refused(&self, i: usize, extra: &[&str]) -> (ExitStatus, String) {
        let child = self
            .command(i, extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn deadbolt");
        exit_output(child)
    }

    /// SIGKILL, then waits for the exit (nothing if it is not running).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.children[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills node `i` if it runs, and starts it again.
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.start(i);
    }

    /// SIGTERM, as an operator stops a node, then waits for the exit.
    pub fn stop(&mut self, i: usize) {
        self.signal(i, "-TERM");
        let mut c = self.children[i].take().expect("running");
        let deadline = Instant::now() + START_WAIT;
        while c.try_wait().unwrap().is_none() {
            assert!(
                Instant::now() < deadline,
                "node {} did not exit on SIGTERM",
                i + 1
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `sig` (`-STOP`, `-CONT`, ...) to node `i`.
    pub fn signal(&self, i: usize, sig: &str) {
        let pid = self.pid(i).to_string();
        let ok = Command::new("kill").args([sig, &pid]).status().unwrap();
        assert!(ok.success(), "kill {sig} {pid}");
    }

    pub fn pid(&self, i: usize) -> u32 {
        self.children[i].as_ref().expect("running").id()
    }

    /// The nodes running, in order.
    pub fn live(&self) -> Vec<usize> {
        (0..self.ports.len())
            .filter(|&i| self.children[i].is_some())
            .collect()
    }

    /// The node listening on `port`.
    pub fn index_of(&self, port: u16) -> usize {
        self.ports.iter().position(|&p| p == port).unwrap()
    }

    fn log_path(&self, i: usize) -> std::path::PathBuf {
        self.dir.0.join(format!("n{}.log", i + 1))
    }

    /// What node `i` logged so far, every start of it.
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.log_path(i)).unwrap_or_default()
    }

    /// Node `i`'s reply to `args` on a fresh connection; empty when the node refused the
    /// connection, closed it (a leadership moving off it) or said nothing within 5 s.
    pub fn ask(&self, i: usize, args: &[&str]) -> String {
        exchange(self.ports[i], false, args)
    }

    /// `ask`, again while node `i` answers nothing, for up to 20 s.
    pub fn answer(&self, i: usize, args: &[&str]) -> String {
        self.answered(i, false, args)
    }

    /// `answer` after READONLY on the same connection (a follower answers the read itself,
    /// behind its group's read barrier); a READONLY not accepted counts as no answer.
    pub fn answer_readonly(&self, i: usize, args: &[&str]) -> String {
        self.answered(i, true, args)
    }

    fn answered(&self, i: usize, readonly: bool, args: &[&str]) -> String {
        poll(ANSWER_WAIT, || {
            let r = exchange(self.ports[i], readonly, args);
            if r.is_empty() {
                Err(format!("node {} answers nothing to {args:?}", i + 1))
            } else {
                Ok(r)
            }
        })
    }

    /// `ask`, again until the reply is `want`, for up to 20 s.
    pub fn ask_until(&self, i: usize, args: &[&str], want: &str) {
        self.until(i, false, args, want)
    }

    /// `ask_until` after READONLY on the same connection.
    pub fn read_until(&self, i: usize, args: &[&str], want: &str) {
        self.until(i, true, args, want)
    }

    fn until(&self, i: usize, readonly: bool, args: &[&str], want: &str) {
        poll(ANSWER_WAIT, || {
            let r = exchange(self.ports[i], readonly, args);
            if r == want {
                Ok(())
            } else {
                Err(format!(
                    "{args:?} on node {} answers {r:?}, not {want:?}",
                    i + 1
                ))
            }
        })
    }

    /// DBSIZE on node `i`, a read (after READONLY: confirmed by its leader where it follows).
    pub fn dbsize(&self, i: usize) -> i64 {
        let r = self.answer_readonly(i, &["DBSIZE"]);
        r.strip_prefix(':')
            .and_then(|n| n.trim_end().parse().ok())
            .unwrap_or_else(|| panic!("DBSIZE on node {}: {r:?}", i + 1))
    }

    /// The running node that acknowledges `SET key value` while every other running node
    /// redirects it there (`-MOVED <slot> 127.0.0.1:<its port>`), if there is exactly one.
    pub fn acknowledged_by(&self, key: &str, value: &str) -> Option<usize> {
        let replies: Vec<(usize, String)> = self
            .live()
            .into_iter()
            .map(|i| (i, self.ask(i, &["SET", key, value])))
            .collect();
        let ok: Vec<usize> = replies
            .iter()
            .filter(|r| r.1 == "+OK\r\n")
            .map(|r| r.0)
            .collect();
        let [leader] = ok[..] else {
            return None;
        };
        let slot = key_hash_slot(key.as_bytes());
        let moved = format!("-MOVED {slot} 127.0.0.1:{}\r\n", self.ports[leader]);
        replies
            .iter()
            .all(|(i, r)| *i == leader || *r == moved)
            .then_some(leader)
    }

    /// The node acknowledging writes to `key` (`acknowledged_by`), once one does, within 30 s.
    pub fn leader_of(&self, key: &str) -> usize {
        self.leaders_where(&[key], |_| true)[0]
    }

    /// Each key's leader (`acknowledged_by`), once the key `keys[g]` is led by node g, within
    /// 30 s: with the keys of groups 0, 1, 2 in that order on three voters, each group led by
    /// its preferred voter. Leadership moves there after the first elections, so leaders
    /// found elsewhere would soon hand over, closing the clients of a home group's leader.
    pub fn preferred_leaders(&self, keys: &[&str]) -> Vec<usize> {
        self.leaders_where(keys, |l| l.iter().enumerate().all(|(g, &n)| n == g))
    }

    /// Each key's leader (`acknowledged_by`, in the order of `keys`), once every key has one
    /// and `settled` holds, within 30 s. Each round writes the value `probe_value` then
    /// names.
    pub fn leaders_where(&self, keys: &[&str], settled: impl Fn(&[usize]) -> bool) -> Vec<usize> {
        poll(Duration::from_secs(30), || {
            self.probes.set(self.probes.get() + 1);
            let value = self.probe_value();
            let found: Vec<Option<usize>> = keys
                .iter()
                .map(|k| self.acknowledged_by(k, &value))
                .collect();
            match found.iter().copied().collect::<Option<Vec<usize>>>() {
                Some(l) if settled(&l) => Ok(l),
                _ => Err(format!(
                    "the leaders of {keys:?} never settled: {found:?} on nodes {:?}",
                    self.live()
                )),
            }
        })
    }

    /// The value the last leader probe wrote to its keys.
    pub fn probe_value(&self) -> String {
        format!("v{}", self.probes.get())
    }

    /// Each group's leader by RAFT STATUS, once every node of `live` (the voters, in id order)
    /// names the same leader for it, that node says it leads it, and it is the group's
    /// preferred voter: group g's is the g-th of the voters, modulo their number, so the
    /// leaders are spread and no handover is to come.
    pub fn raft_leaders(&self, live: &[usize], within: Duration) -> Vec<usize> {
        let groups = self.groups.expect("a layout with cluster-groups");
        poll(within, || {
            let statuses: Vec<String> = live
                .iter()
                .map(|&i| self.ask(i, &["RAFT", "STATUS"]))
                .collect();
            let mut out = vec![usize::MAX; groups];
            for (g, slot) in out.iter_mut().enumerate() {
                let leads: Vec<usize> = (0..live.len())
                    .filter(|&k| group_field(&statuses[k], g, "role").as_deref() == Some("leader"))
                    .map(|k| live[k])
                    .collect();
                if let [l] = leads[..] {
                    let id = (l + 1).to_string();
                    if statuses
                        .iter()
                        .all(|s| group_field(s, g, "leader").as_deref() == Some(id.as_str()))
                    {
                        *slot = l;
                    }
                }
            }
            let preferred = (0..groups).all(|g| out[g] == live[g % live.len()]);
            if preferred {
                Ok(out)
            } else {
                Err(format!(
                    "leaders {out:?} (usize::MAX: none agreed), not each group's preferred voter of {live:?}: {statuses:#?}"
                ))
            }
        })
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for i in 0..self.children.len() {
            self.kill(i);
        }
        // A failed test shows the end of what each node logged: a node that exited, closed
        // a client or lost an election says so there.
        if std::thread::panicking() {
            for i in 0..self.children.len() {
                let log = self.log(i);
                let lines: Vec<&str> = log.lines().collect();
                eprintln!("--- node {} log ({} lines) ---", i + 1, lines.len());
                for line in &lines[lines.len().saturating_sub(30)..] {
                    eprintln!("{line}");
                }
            }
        }
    }
}

/// `f` again every 50 ms until it returns Ok, for up to `within`; panics with its last Err.
pub fn poll<T>(within: Duration, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + within;
    loop {
        match f() {
            Ok(t) => return t,
            Err(why) => assert!(Instant::now() < deadline, "{why} (for {within:?})"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One fresh connection to `port`: READONLY first if asked, then `args`; the reply to `args`,
/// or empty if the connection was refused, closed or silent for `REPLY_WAIT`.
fn exchange(port: u16, readonly: bool, args: &[&str]) -> String {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let Ok(mut s) = TcpStream::connect_timeout(&addr, REPLY_WAIT) else {
        return String::new();
    };
    let _ = s.set_nodelay(true);
    let mut req = if readonly {
        resp_cmd(&["READONLY"])
    } else {
        Vec::new()
    };
    req.extend(resp_cmd(args));
    if s.write_all(&req).is_err() {
        return String::new();
    }
    let deadline = Instant::now() + REPLY_WAIT;
    let mut buf = Vec::new();
    let mut replies = Vec::new();
    while replies.len() < 1 + readonly as usize {
        if let Some(n) = reply_len(&buf, 0) {
            replies.push(buf.drain(..n).collect::<Vec<u8>>());
            continue;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || s.set_read_timeout(Some(left)).is_err() {
            return String::new();
        }
        let mut chunk = [0u8; 65536];
        match s.read(&mut chunk) {
            Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            _ => return String::new(),
        }
    }
    if readonly && replies[0] != b"+OK\r\n" {
        return String::new();
    }
    String::from_utf8_lossy(replies.last().unwrap()).into_owned()
}

/// A RAFT STATUS field of a `group<g>:a=…,b=…` line.
pub fn group_field(status: &str, g: usize, name: &str) -> Option<String> {
    let line = status
        .split("\r\n")
        .find_map(|l| l.strip_prefix(&format!("group{g}:")))?;
    line.split(',')
        .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
        .map(str::to_string)
}

/// The `group<g>_member<i>:` lines of a RAFT STATUS, as (id, voter).
pub fn group_members(status: &str, g: usize) -> Vec<(u64, bool)> {
    status
        .split("\r\n")
        .filter_map(|l| l.strip_prefix(&format!("group{g}_member")))
        .filter_map(|l| {
            let (_, rest) = l.split_once(":id=")?;
            let (id, rest) = rest.split_once(',')?;
            Some((id.parse().ok()?, rest.starts_with("voter=1")))
        })
        .collect()
}

/// `<prefix><n>` for n from `from` on, those whose slot is in `slots`.
pub fn keys_in(
    prefix: &str,
    from: u64,
    slots: std::ops::RangeInclusive<u16>,
) -> impl Iterator<Item = String> + '_ {
    (from..)
        .map(move |n| format!("{prefix}{n}"))
        .filter(move |k| slots.contains(&key_hash_slot(k.as_bytes())))
}

/// Waits for the process to exit by itself (killing it after 20 s) and returns its exit
/// status with its stdout then stderr.
pub fn exit_output(mut child: Child) -> (ExitStatus, String) {
    let deadline = Instant::now() + START_WAIT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the node did not refuse to start within {START_WAIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    if let Some(mut p) = child.stdout.take() {
        let _ = p.read_to_string(&mut out);
    }
    if let Some(mut p) = child.stderr.take() {
        let _ = p.read_to_string(&mut out);
    }
    (status, out)
}

/// A cluster started by `scripts/cluster` in its own directory, on `nodes` client ports (and
/// their peer ports) found free outside free_port's range; stopped when dropped.
pub struct ScriptCluster {
    dir: TempDir,
    pub base: u16,
}

impl ScriptCluster {
    pub fn new(name: &str, nodes: u16) -> ScriptCluster {
        let base = (0..200)
            .map(|_| 33_000 + fastrand::u16(..6000))
            .find(|&b| {
                (0..nodes).all(|i| {
                    std::net::TcpListener::bind(("127.0.0.1", b + i)).is_ok()
                        && std::net::TcpListener::bind(("127.0.0.1", b + 10_000 + i)).is_ok()
                })
            })
            .expect("free client and peer ports");
        ScriptCluster {
            dir: TempDir::new(name),
            base,
        }
    }

    pub fn dir_str(&self) -> String {
        self.dir.0.to_str().unwrap().to_string()
    }

    /// `scripts/cluster start DIR --cluster-enabled yes --cluster-groups N`, which must succeed.
    pub fn start_groups(&self, groups: usize) {
        let (dir, n) = (self.dir_str(), groups.to_string());
        let (ok, out) = self.run(&[
            "start",
            &dir,
            "--cluster-enabled",
            "yes",
            "--cluster-groups",
            &n,
        ]);
        assert!(ok, "{out}");
    }

    /// `scripts/cluster ARGS`: (exit status 0, its whole output).
    pub fn run(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new("bash")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/cluster"))
            .args(args)
            .env("DEADBOLT_BIN", common::deadbolt_bin())
            .env("CLUSTER_BASE_PORT", self.base.to_string())
            .output()
            .unwrap();
        (out.status.success(), common::all_output(&out))
    }
}

impl Drop for ScriptCluster {
    fn drop(&mut self) {
        let dir = self.dir_str();
        self.run(&["stop", &dir]);
        // A failed test shows the end of each node's log (scripts/cluster keeps it in
        // DIR/n<i>/deadbolt.log).
        if std::thread::panicking() {
            for i in 1..=9 {
                let path = self.dir.0.join(format!("n{i}")).join("deadbolt.log");
                let Ok(log) = std::fs::read_to_string(&path) else {
                    continue;
                };
                let lines: Vec<&str> = log.lines().collect();
                eprintln!("--- node {i} log ({} lines) ---", lines.len());
                for line in &lines[lines.len().saturating_sub(30)..] {
                    eprintln!("{line}");
                }
            }
        }
    }
}

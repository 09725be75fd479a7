//! A cluster node's own files damaged or its disk full, with three real binaries on loopback:
//! - one byte of a stopped follower's raft.log (headers, lengths, checksums, bodies, the last
//!   record), raft.state, snapshot.meta or snapshot.aof replaced: the node refuses to start
//!   with a log line naming the damage (exit status not 0), or it starts and holds every
//!   acknowledged key once caught up; the other two serve writes throughout;
//! - a follower's disk, then the leader's, filled (each node's dir is its own small tmpfs)
//!   while writes go on: the full node exits with a clear log line or stops acknowledging,
//!   the others (under a new leader) acknowledge on, nothing acknowledged is lost, and once
//!   space is freed the node restarts and catches up.
//!
//! The bounded form samples a few offsets; `scripts/disk-faults-raft` runs every offset.
//! `DISK_FAULTS_RAFT_ALL=N` makes the byte-offset test walk every Nth offset of every file (and
//! every offset of raft.log's last record and the 64 bytes after it).

use crate::common;

use common::{cluster_node_args, cluster_ports, Conn, TempDir};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECRET: &str = "cluster-test-secret-0123456789";

struct Node {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
    args: Vec<String>,
    log: Arc<Mutex<Vec<String>>>,
}

enum Started {
    Listening,
    Exited(std::process::ExitStatus),
}

impl Node {
    /// Starts the node: it listens, or it exits (a refusal) first.
    fn start(&mut self) -> Started {
        self.log.lock().unwrap().clear();
        let mut child = Command::new(common::deadbolt_bin())
            .args(&self.args)
            .args(common::io_threads_args())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn deadbolt");
        let mut readers = Vec::new();
        for s in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let log = self.log.clone();
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(s).lines() {
                    let Ok(line) = line else { break };
                    log.lock().unwrap().push(line);
                }
            }));
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                // Every line it wrote is read once its pipes close.
                for r in readers {
                    let _ = r.join();
                }
                return Started::Exited(status);
            }
            // The port listens before the cluster files are read: ready means read.
            if self.logged("Ready to accept connections")
                && std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
            {
                self.child = Some(child);
                return Started::Listening;
            }
            assert!(Instant::now() < deadline, "node never listened nor exited");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let st = self.child.as_mut()?.try_wait().ok()??;
        self.child = None;
        Some(st)
    }

    fn logged(&self, what: &str) -> bool {
        self.log.lock().unwrap().iter().any(|l| l.contains(what))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            if let Ok(log) = self.log.lock() {
                eprintln!("--- node log ({} lines) ---", log.len());
                for line in log.iter().rev().take(30).rev() {
                    eprintln!("{line}");
                }
            }
        }
    }
}

/// tmpfs mounts, unmounted when dropped (after the nodes: fields drop in order).
struct Mounts(Vec<PathBuf>);

impl Drop for Mounts {
    fn drop(&mut self) {
        for m in &self.0 {
            let _ = Command::new("umount").arg("-l").arg(m).status();
        }
    }
}

struct Cluster {
    nodes: Vec<Node>,
    _mounts: Mounts,
    _dir: TempDir,
}

/// Three nodes; `tmpfs`: each node's dir is its own tmpfs of that size.
fn cluster(name: &str, extra: &[&str], tmpfs: Option<&str>) -> Cluster {
    let dir = TempDir::new(name);
    let mut mounts = Mounts(Vec::new());
    let (ports, peers) = cluster_ports(3);
    let mut nodes = Vec::new();
    for (i, (port, _)) in ports.iter().enumerate() {
        let node_dir = dir.0.join(format!("n{}", i + 1));
        std::fs::create_dir_all(&node_dir).unwrap();
        if let Some(size) = tmpfs {
            let ok = Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
                .arg(&node_dir)
                .status()
                .is_ok_and(|s| s.success());
            assert!(
                ok,
                "mounting a tmpfs on {} failed: this test needs root (mount -t tmpfs)",
                node_dir.display()
            );
            mounts.0.push(node_dir.clone());
        }
        let mut args = cluster_node_args(*port, &node_dir, i as u64 + 1, &peers, SECRET);
        args.extend(extra.iter().map(|s| s.to_string()));
        nodes.push(Node {
            port: *port,
            dir: node_dir,
            child: None,
            args,
            log: Default::default(),
        });
    }
    for n in &mut nodes {
        assert!(matches!(n.start(), Started::Listening));
    }
    Cluster {
        nodes,
        _mounts: mounts,
        _dir: dir,
    }
}

impl Cluster {
    /// The node that accepts a write (polled with fresh connections).
    fn leader(&self, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            for (i, n) in self.nodes.iter().enumerate() {
                if n.child.is_none() {
                    continue;
                }
                if let Some(r) = try_cmd(n.port, &["SET", "__probe", "1"]) {
                    if r == b"+OK\r\n" {
                        return i;
                    }
                }
            }
            assert!(Instant::now() < deadline, "no leader within {timeout:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// One command on a fresh connection; None if refused, closed or unanswered in 3 s.
fn try_cmd(port: u16, args: &[&str]) -> Option<Vec<u8>> {
    let s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    drop(s);
    let mut c = Conn::connect(port);
    c.try_send_raw(&common::resp_cmd(args)).ok()?;
    c.try_read_reply(Duration::from_secs(3))
}

/// The value each acknowledged key was given.
type Acked = Vec<(String, String)>;

/// Writes `n` keys through the leader (a new one after a failover), recording each one
/// acknowledged. A write not answered OK is retried on the leader then found: its outcome
/// is unknown, so only OKs are recorded.
fn write_keys(cl: &Cluster, acked: &mut Acked, prefix: &str, n: usize, size: usize) {
    let mut l = cl.leader(Duration::from_secs(20));
    let mut c = Conn::connect(cl.nodes[l].port);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut i = 0;
    while i < n {
        assert!(Instant::now() < deadline, "writes stalled at {prefix}{i}");
        let key = format!("{prefix}{i}");
        let val = format!("{key}:{}", "v".repeat(size));
        let ok = c
            .try_send_raw(&common::resp_cmd(&["SET", &key, &val]))
            .is_ok()
            && c.try_read_reply(Duration::from_secs(5)).as_deref() == Some(b"+OK\r\n");
        if ok {
            acked.push((key, val));
            i += 1;
        } else {
            l = cl.leader(Duration::from_secs(20));
            c = Conn::connect(cl.nodes[l].port);
        }
    }
}

/// Whether `node` answers every acknowledged key with its value (a linearizable read there).
fn holds_all(node: &Node, acked: &Acked) -> bool {
    if node.child.is_none() {
        return false;
    }
    acked.chunks(200).all(|chunk| {
        let mut args = vec!["MGET"];
        args.extend(chunk.iter().map(|(k, _)| k.as_str()));
        let mut want = format!("*{}\r\n", chunk.len());
        for (_, v) in chunk {
            want.push_str(&format!("${}\r\n{v}\r\n", v.len()));
        }
        try_cmd(node.port, &args).as_deref() == Some(want.as_bytes())
    })
}

fn converges(node: &Node, acked: &Acked, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !holds_all(node, acked) {
        assert!(Instant::now() < deadline, "{what}: never held every key");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The records of a raft.log: (start, length) of each, up to the zeros after them.
fn records(log: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 8 <= log.len() && log[at..at + 8] != [0; 8] {
        let len = u32::from_le_bytes(log[at..at + 4].try_into().unwrap()) as usize;
        // A record cut off by the end of the file (torn by a kill mid-write) is not one.
        if at + 8 + len > log.len() {
            break;
        }
        out.push((at, 8 + len));
        at += 8 + len;
    }
    out
}

fn copy_dir(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Offsets to damage in one of the files in `dir`: every one (`DISK_FAULTS_RAFT_ALL`; for
/// raft.log up to 64 bytes into the zeroed space after the records), else a sample of each
/// kind of field.
fn damage_offsets(dir: &Path, file: &str) -> Vec<usize> {
    let data = std::fs::read(dir.join(file)).unwrap();
    assert!(!data.is_empty(), "{file} is empty");
    let len = data.len();
    let stride: Option<usize> = std::env::var("DISK_FAULTS_RAFT_ALL")
        .ok()
        .map(|v| v.parse().unwrap_or(1).max(1));
    if file != "raft.log" {
        if let Some(stride) = stride {
            // raft.state and snapshot.meta are small: every offset.
            let stride = if len <= 1024 { 1 } else { stride };
            return (0..len).step_by(stride).collect();
        }
        return vec![0, 4, len / 2, len - 1];
    }
    let recs = records(&data);
    // A compaction may have just rewritten the log with no entry left: only its zeros.
    let Some(&(last, last_len)) = recs.last() else {
        return vec![3];
    };
    let end = last + last_len;
    if let Some(stride) = stride {
        // Every `stride`th offset, and every one of the last record and after it (where a
        // torn write and damage must be told apart).
        let mut all: Vec<usize> = (0..last).step_by(stride).collect();
        all.extend(last..len.min(end + 64));
        return all;
    }
    let (first, _) = recs[0];
    let (mid, mid_len) = recs[recs.len() / 2];
    let offsets = vec![
        first + 5,           // a checksum
        mid + 2,             // a length's high byte
        mid + mid_len / 2,   // a body
        last,                // the last record's length
        last + 3,            // its length's high byte
        last + 6,            // its checksum
        last + last_len / 2, // its body
        end - 1,             // its last byte
        end + 3,             // the zeroed space after it
    ];
    // The file may end right after the last record (no zeroed space to damage).
    offsets.into_iter().filter(|&o| o < len).collect()
}

#[test]
fn a_followers_damaged_files_are_refused_or_caught_up() {
    // A compaction every 64 entries: the follower has a snapshot with data and a log after it.
    let mut cl = cluster("raft-damage", &["--cluster-snapshot-every", "64"], None);
    let mut acked = Acked::new();
    write_keys(&cl, &mut acked, "lock:", 300, 8);
    let l = cl.leader(Duration::from_secs(10));
    let f = (l + 1) % 3;
    converges(&cl.nodes[f], &acked, "the follower before the damage");
    cl.nodes[f].kill9();
    let cluster_dir = cl.nodes[f].dir.join("cluster");
    let pristine = cl._dir.0.join("pristine");
    copy_dir(&cluster_dir, &pristine);
    let log = std::fs::read(pristine.join("raft.log")).unwrap();
    assert!(
        records(&log).len() >= 3,
        "the follower's raft.log holds too few records"
    );
    let (mut refused, mut started, mut tried) = (0, 0, 0);
    for file in ["raft.log", "raft.state", "snapshot.meta", "snapshot.aof"] {
        // The offsets are taken from the files as they are now: a node that started went on
        // logging, and its files are the ones damaged next (restoring older files under a
        // node that acknowledged more would be a rollback of acknowledged entries).
        for k in 0.. {
            let offs = damage_offsets(&pristine, file);
            let Some(&at) = offs.get(k) else { break };
            for flip in [0xffu8, 0x01] {
                copy_dir(&pristine, &cluster_dir);
                let path = cluster_dir.join(file);
                let mut data = std::fs::read(&path).unwrap();
                data[at] ^= flip;
                let v = data[at];
                std::fs::write(&path, &data).unwrap();
                let what = format!("{file} byte {at} set to {v:#x}");
                tried += 1;
                match cl.nodes[f].start() {
                    Started::Exited(st) => {
                        assert!(!st.success(), "{what}: exited with {st:?}");
                        assert!(
                            cl.nodes[f].logged(file) || cl.nodes[f].logged("damaged"),
                            "{what}: the refusal names no file: {:?}",
                            cl.nodes[f].log.lock().unwrap()
                        );
                        refused += 1;
                        let log = cl.nodes[f].log.lock().unwrap();
                        let why = log.iter().find(|l| l.contains("Cannot start"));
                        eprintln!("{what}: refused: {}", why.map_or("", |l| l.as_str()));
                    }
                    Started::Listening => {
                        converges(&cl.nodes[f], &acked, &what);
                        cl.nodes[f].kill9();
                        copy_dir(&cluster_dir, &pristine);
                        started += 1;
                        eprintln!("{what}: started, caught up");
                    }
                }
                // The other two serve throughout.
                write_keys(&cl, &mut acked, &format!("{file}{at}v{v}:"), 3, 8);
            }
        }
    }
    eprintln!("{tried} damaged files: {refused} refused, {started} started and caught up");
    copy_dir(&pristine, &cluster_dir);
    assert!(refused > 0, "no damage was refused");
    // The pristine files start and catch up with everything written meanwhile.
    assert!(matches!(cl.nodes[f].start(), Started::Listening));
    converges(&cl.nodes[f], &acked, "the undamaged follower");
}

/// Fills node `i`'s tmpfs with a file until no space is left.
fn fill(dir: &Path) -> PathBuf {
    use std::io::Write;
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![1u8; 64 << 10];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
    path
}

/// Writes until node `i` exits or `n` more writes were acknowledged without it; then checks
/// the node did one of the two allowed things.
fn write_until_full(cl: &mut Cluster, i: usize, acked: &mut Acked, prefix: &str) {
    for round in 0..40 {
        write_keys(cl, acked, &format!("{prefix}{round}:"), 10, 16 << 10);
        if let Some(st) = cl.nodes[i].exited() {
            assert!(!st.success(), "the full node exited with {st:?}");
            let log = cl.nodes[i].log.lock().unwrap().clone();
            eprintln!(
                "node {} exited after {round} rounds: {:?}",
                i + 1,
                log.iter().rev().find(|l| l.contains('#'))
            );
            assert!(
                cl.nodes[i].logged("No space left") || cl.nodes[i].logged("failed"),
                "the full node's exit says nothing of the disk: {:?}",
                cl.nodes[i].log.lock().unwrap()
            );
            return;
        }
    }
    // Still running: it must not be the one acknowledging (a follower whose log cannot grow
    // acks nothing; a leader would have been replaced).
    let l = cl.leader(Duration::from_secs(10));
    assert_ne!(l, i, "the node with a full disk still leads");
}

#[test]
fn a_full_disk_on_a_follower_then_the_leader_loses_nothing_acknowledged() {
    let mut cl = cluster("raft-full", &[], Some("8m"));
    let mut acked = Acked::new();
    write_keys(&cl, &mut acked, "a:", 50, 64);
    let l = cl.leader(Duration::from_secs(10));
    let f = (l + 1) % 3;
    let filler = fill(&cl.nodes[f].dir);
    write_until_full(&mut cl, f, &mut acked, "f");
    cl.nodes[f].kill9();
    std::fs::remove_file(&filler).unwrap();
    assert!(matches!(cl.nodes[f].start(), Started::Listening));
    converges(&cl.nodes[f], &acked, "the follower once space was freed");

    let l = cl.leader(Duration::from_secs(10));
    let filler = fill(&cl.nodes[l].dir);
    write_until_full(&mut cl, l, &mut acked, "l");
    let l2 = cl.leader(Duration::from_secs(20));
    assert_ne!(l2, l, "leadership did not move off the full disk");
    cl.nodes[l].kill9();
    std::fs::remove_file(&filler).unwrap();
    assert!(matches!(cl.nodes[l].start(), Started::Listening));
    write_keys(&cl, &mut acked, "z:", 10, 64);
    for (i, n) in cl.nodes.iter().enumerate() {
        converges(
            n,
            &acked,
            &format!("node {} after both disks filled", i + 1),
        );
    }
}

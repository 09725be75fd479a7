//! One network namespace per node on a bridge, clients on their own addresses in the hub
//! namespace, and partitions as nftables drop rules inside each node's namespace.
//!
//! Layout (all under a prefix unique to the run, e.g. `dbh1234`):
//! - hub namespace `<prefix>`: bridge `br0` with 10.77.0.1 (the harness's observer address)
//!   and 10.77.0.101.. (one per client); the harness itself runs here.
//! - node namespace `<prefix>n<i>`: `eth0` with 10.77.0.(11+i), a veth into the bridge; a node's
//!   data server and (for Redis) its Sentinel run here and share that address.

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

pub const MAX_NODES: usize = 5;
pub const OBSERVER: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);

pub fn node_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 77, 0, 11 + i as u8)
}

pub fn client_ip(j: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 77, 0, 101 + j as u8)
}

pub fn node_ns(prefix: &str, i: usize) -> String {
    format!("{prefix}n{i}")
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Creates the hub and node namespaces. Run from the root namespace by the supervising process.
pub fn setup(prefix: &str, clients: usize) -> Result<(), String> {
    ip(&["netns", "add", prefix])?;
    ip(&["-n", prefix, "link", "set", "lo", "up"])?;
    ip(&["-n", prefix, "link", "add", "br0", "type", "bridge"])?;
    ip(&["-n", prefix, "link", "set", "br0", "up"])?;
    ip(&[
        "-n",
        prefix,
        "addr",
        "add",
        &format!("{OBSERVER}/24"),
        "dev",
        "br0",
    ])?;
    for j in 0..clients {
        ip(&[
            "-n",
            prefix,
            "addr",
            "add",
            &format!("{}/24", client_ip(j)),
            "dev",
            "br0",
        ])?;
    }
    for i in 0..MAX_NODES {
        let ns = node_ns(prefix, i);
        let veth = format!("v{i}");
        ip(&["netns", "add", &ns])?;
        ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        ip(&[
            "-n", prefix, "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns",
            &ns,
        ])?;
        ip(&["-n", prefix, "link", "set", &veth, "master", "br0"])?;
        ip(&["-n", prefix, "link", "set", &veth, "up"])?;
        ip(&[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{}/24", node_ip(i)),
            "dev",
            "eth0",
        ])?;
        ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
    }
    Ok(())
}

/// Kills whatever still runs inside this run's namespaces (only processes the run started can be
/// there) and deletes the namespaces.
pub fn teardown(prefix: &str) {
    let mut names: Vec<String> = (0..MAX_NODES).map(|i| node_ns(prefix, i)).collect();
    names.push(prefix.to_string());
    for ns in &names {
        if let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Ok(pid) = pid.parse::<i32>() {
                    // SAFETY: plain syscalls on a pid that lives in a namespace this run created.
                    unsafe {
                        libc::kill(pid, libc::SIGCONT);
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
            }
        }
    }
    for ns in &names {
        let _ = ip(&["netns", "del", ns]);
    }
}

fn nft(ns: &str, script: &str) -> Result<(), String> {
    use std::io::Write;
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "nft", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("nft: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .map_err(|e| format!("nft: {e}"))?;
    }
    let out = child.wait_with_output().map_err(|e| format!("nft: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "nft in {ns}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Splits the cluster in two: `side_a` nodes and `clients_a` clients can reach each other and
/// nothing else; every other node and client is on side B. The observer address stays
/// connected to everything (it only asks who the leader is and restarts processes).
pub fn partition(
    prefix: &str,
    nodes: usize,
    clients: usize,
    side_a: &[usize],
    clients_a: &[usize],
) -> Result<(), String> {
    let a: Vec<Ipv4Addr> = side_a
        .iter()
        .map(|&i| node_ip(i))
        .chain(clients_a.iter().map(|&j| client_ip(j)))
        .collect();
    let b: Vec<Ipv4Addr> = (0..nodes)
        .filter(|i| !side_a.contains(i))
        .map(node_ip)
        .chain(
            (0..clients)
                .filter(|j| !clients_a.contains(j))
                .map(client_ip),
        )
        .collect();
    for i in 0..nodes {
        let blocked = if side_a.contains(&i) { &b } else { &a };
        if blocked.is_empty() {
            continue;
        }
        let set = blocked
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let script = format!(
            "table inet dbh {{\n chain in {{ type filter hook input priority 0; policy accept; ip saddr {{ {set} }} drop; }}\n chain out {{ type filter hook output priority 0; policy accept; ip daddr {{ {set} }} drop; }}\n}}\n"
        );
        nft(&node_ns(prefix, i), &script)?;
    }
    Ok(())
}

pub fn heal(prefix: &str, nodes: usize) {
    for i in 0..nodes {
        // Absent table (node was not partitioned) is not an error worth reporting.
        let _ = nft(&node_ns(prefix, i), "delete table inet dbh\n");
    }
}

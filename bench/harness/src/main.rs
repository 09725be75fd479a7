//! Failover-safety harness: real servers in network namespaces, lock clients writing
//! a fenced register inside each critical section, a nemesis (kill, pause, partition), and
//! checkers for double grants, lost acknowledged writes, linearizability and availability.
//!
//! The process runs twice: the outer one (root namespace) creates the namespaces, runs the inner
//! one inside the hub namespace, and deletes the namespaces and anything left in them whatever
//! way the inner one ended.

mod check;
mod cluster;
mod history;
mod http;
mod nemesis;
mod netns;
mod procs;
mod resp;
mod targets;
mod workload;

use history::{now_us, Kind, Op, Res};
use nemesis::Fault;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};
use targets::Target;

const USAGE: &str = "usage: harness [--target redis|redis-wait|etcd|deadbolt|deadbolt-cluster|deadbolt-sharded]
               [--faults none|kill|kill-follower|pause|partition|clock|reshard|mixed]
               [--duration SECS] [--clients N] [--keys N] [--seed N] [--out DIR] [--deadbolt-bin PATH]
               [--lock setnx|redisson] [--clock-drift MS] [--clock-offset-max MS] [--long-holds N] [--no-header]";

struct Args {
    target: String,
    faults: String,
    duration: u64,
    clients: usize,
    /// None: the target's default (3; 6 on the sharded target, two per group).
    keys: Option<usize>,
    seed: u64,
    out: PathBuf,
    deadbolt_bin: PathBuf,
    header: bool,
    flavor: targets::Flavor,
    /// deadbolt cluster: its `cluster-clock-drift`.
    clock_drift_ms: u64,
    /// The clock fault's largest offset either way.
    clock_max_ms: u64,
    /// Every Nth lock of key 0 is held for the lease minus 500 ms; None: the target's default.
    long_holds: Option<u64>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        target: "redis".into(),
        faults: "mixed".into(),
        duration: 60,
        clients: 9,
        keys: None,
        seed: now_us() ^ std::process::id() as u64,
        out: PathBuf::from("target/runs"),
        deadbolt_bin: PathBuf::from("../../target/release/deadbolt"),
        header: true,
        flavor: targets::Flavor::SetNx,
        clock_drift_ms: 1000,
        clock_max_ms: 900,
        long_holds: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--no-header" {
            a.header = false;
            continue;
        }
        let v = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let num = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: not a number: {v}"))
        };
        match flag.as_str() {
            "--target" => a.target = v,
            "--faults" => a.faults = v,
            "--duration" => a.duration = num(&v)?,
            "--clients" => a.clients = num(&v)?.clamp(2, 40) as usize,
            "--keys" => a.keys = Some(num(&v)?.clamp(1, 100) as usize),
            "--seed" => a.seed = num(&v)?,
            "--out" => a.out = PathBuf::from(v),
            "--deadbolt-bin" => a.deadbolt_bin = PathBuf::from(v),
            "--clock-drift" => a.clock_drift_ms = num(&v)?,
            "--clock-offset-max" => a.clock_max_ms = num(&v)?.clamp(1, 3_600_000),
            "--long-holds" => a.long_holds = Some(num(&v)?),
            "--lock" => {
                a.flavor = match v.as_str() {
                    "setnx" => targets::Flavor::SetNx,
                    "redisson" => targets::Flavor::Redisson,
                    _ => return Err(format!("--lock: setnx or redisson, not {v}")),
                }
            }
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    if Fault::parse(&a.faults).is_none() {
        return Err(format!("unknown fault mix {}\n{USAGE}", a.faults));
    }
    Ok(a)
}

static FORWARD: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    FORWARD.store(sig, Ordering::SeqCst);
}

fn outer(args: &Args) -> ExitCode {
    let prefix = format!("dbh{}", std::process::id());
    // SAFETY: installs an async-signal-safe handler (one atomic store) so that Ctrl-C or a
    // TERM reaches the inner run and this process stays to delete the namespaces.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    if let Err(e) = netns::setup(&prefix, args.clients) {
        eprintln!("harness: cannot create network namespaces (root and iproute2 needed): {e}");
        netns::teardown(&prefix);
        return ExitCode::from(2);
    }
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("harness: {e}");
            netns::teardown(&prefix);
            return ExitCode::from(2);
        }
    };
    let status = std::process::Command::new("ip")
        .args(["netns", "exec", &prefix])
        .arg(exe)
        .args(std::env::args().skip(1))
        .env("DBH_PREFIX", &prefix)
        .spawn()
        .and_then(|mut c| loop {
            if let Some(s) = c.try_wait()? {
                break Ok(s);
            }
            let sig = FORWARD.swap(0, Ordering::SeqCst);
            if sig != 0 {
                // SAFETY: kill(2) on our own unreaped child.
                unsafe {
                    libc::kill(c.id() as libc::pid_t, sig);
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        });
    netns::teardown(&prefix);
    match status {
        Ok(s) => ExitCode::from(s.code().unwrap_or(2).clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("harness: {e}");
            ExitCode::from(2)
        }
    }
}

fn fault_label(faults: &[Fault]) -> &'static str {
    match faults {
        [] => "none",
        [Fault::KillLeader] => "kill leader",
        [Fault::KillFollower] => "kill follower",
        [Fault::PauseLeader] => "pause leader",
        [Fault::PartitionLeader] => "partition leader",
        [Fault::ClockOffset] => "clock offset",
        [Fault::Reshard, Fault::ReshardKill] => "reshard",
        f if f.contains(&Fault::ClockOffset) && f.contains(&Fault::Reshard) => {
            "mixed + clock + reshard"
        }
        f if f.contains(&Fault::ClockOffset) => "mixed + clock",
        _ => "mixed",
    }
}

fn inner(args: &Args, prefix: &str) -> Result<bool, String> {
    now_us();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let dir = args
        .out
        .join(format!("{}-{}-{stamp}", args.target, args.faults));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let sharded = args.target == "deadbolt-sharded";
    let keys = args.keys.unwrap_or(if sharded { 6 } else { 3 });
    let mut target: Box<dyn Target> = match args.target.as_str() {
        "redis" => Box::new(targets::RedisSentinel::new(
            prefix,
            &dir,
            false,
            args.flavor,
        )),
        "redis-wait" => Box::new(targets::RedisSentinel::new(prefix, &dir, true, args.flavor)),
        "etcd" => Box::new(targets::Etcd::new(prefix, &dir)),
        "deadbolt" => Box::new(targets::DeadboltSingle::new(
            prefix,
            &dir,
            args.deadbolt_bin.clone(),
            args.flavor,
        )),
        "deadbolt-cluster" => Box::new(targets::DeadboltCluster::new(
            prefix,
            &dir,
            args.deadbolt_bin.clone(),
            args.flavor,
            args.clock_drift_ms,
        )),
        "deadbolt-sharded" => Box::new(targets::DeadboltSharded::new(
            prefix,
            &dir,
            args.deadbolt_bin.clone(),
            args.flavor,
            args.clock_drift_ms,
            keys,
        )),
        t => return Err(format!("unknown target {t}\n{USAGE}")),
    };
    let mut faults = Fault::parse(&args.faults).unwrap_or_default();
    if !target.moves_clocks() {
        faults.retain(|f| *f != Fault::ClockOffset);
        if faults.is_empty() && args.faults == "clock" {
            return Err(format!(
                "{} cannot move a node's clock: no clock fault",
                target.name()
            ));
        }
    }
    // The cluster target is where the clock fault runs: long holds are what would notice a
    // lease that a fast-clocked new leader ends early.
    let long_hold_every = args
        .long_holds
        .unwrap_or(if target.moves_clocks() { 4 } else { 0 });
    if !target.reshards() {
        faults.retain(|f| !matches!(f, Fault::Reshard | Fault::ReshardKill));
        if faults.is_empty() && args.faults == "reshard" {
            return Err(format!(
                "{} has no slots to move: no reshard fault",
                target.name()
            ));
        }
    }
    if target.nodes() == 1 {
        // One node has no followers and nothing to partition it from: pause is the fault that
        // still means something (the process stops answering, then resumes with its state).
        faults.retain(|f| *f == Fault::PauseLeader);
        if faults.is_empty() && args.faults != "none" {
            return Err(
                "a single-node target only takes --faults pause (or mixed, which then means pause)"
                    .into(),
            );
        }
    }
    eprintln!("harness: starting {} in {}", target.name(), dir.display());
    target.start()?;
    eprintln!(
        "harness: ready; {} clients on {} keys for {} s, faults: {}",
        args.clients, keys, args.duration, args.faults
    );

    let t0 = now_us();
    let until = Instant::now() + Duration::from_secs(args.duration);
    let cfg = workload::WorkCfg {
        keys,
        ttl_ms: 3000,
        hold_ms: (5, 40),
        backoff_ms: (2, 20),
        long_hold_every,
        // One long-held key per group (keys 0..groups, one in each), the others free-flowing.
        long_hold_keys: target.groups(),
        long_hold_ms: 3000 - 500,
        until,
    };
    let (mut ops, events, nemesis_errors) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..args.clients)
            .map(|j| {
                let session = target.session(netns::client_ip(j));
                let cfg = &cfg;
                let seed = args.seed.wrapping_add(j as u64 * 7919);
                s.spawn(move || workload::client_loop(j, session, cfg, seed))
            })
            .collect();
        let ncfg = nemesis::NemesisCfg {
            prefix,
            clients: args.clients,
            minority_clients: (0..args.clients / 3).collect(),
            faults: faults.clone(),
            clock_max_ms: args.clock_max_ms,
            quiet: Duration::from_secs(3),
            until,
            keys,
        };
        let (events, errors) = nemesis::run(&mut *target, &ncfg, args.seed);
        let ops: Vec<Op> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect();
        (ops, events, errors)
    });
    let run_end = now_us();
    // Stretches without a successful acquire end when the load stops: a fault the nemesis
    // still holds after that (a clock fault takes ~10 s) is not unavailability.
    let load_end = run_end.min(t0 + args.duration * 1_000_000);
    {
        // Settle, then read every register once more from a client that was never cut off:
        // what survived the faults is what the next user of each lock will see.
        netns::heal(prefix, target.nodes());
        std::thread::sleep(Duration::from_secs(3));
        let mut s = target.session(netns::OBSERVER);
        for key in 0..keys {
            let give_up = Instant::now() + Duration::from_secs(20);
            loop {
                let start = now_us();
                let (r, v) = s.read(key);
                ops.push(Op {
                    client: args.clients,
                    kind: Kind::Read,
                    key,
                    start,
                    end: now_us(),
                    res: r,
                    value: v,
                    token: 0,
                    ttl_ms: 0,
                });
                if r == Res::Ok || Instant::now() > give_up {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    let name = target.name();
    let safe = target.promises_safety();
    let target_groups = target.groups();
    drop(target);

    let mut hist = std::fs::File::create(dir.join("history.jsonl")).map_err(|e| e.to_string())?;
    for o in &ops {
        let _ = writeln!(hist, "{}", o.json());
    }
    let mut flog = std::fs::File::create(dir.join("faults.txt")).map_err(|e| e.to_string())?;
    for e in &events {
        let _ = writeln!(
            flog,
            "{:?} node {} from {:.3} s to {:.3} s {}",
            e.fault,
            e.node,
            e.start as f64 / 1e6,
            e.end as f64 / 1e6,
            e.detail
        );
    }
    let holds = check::holds(&ops, 1000);
    let (dg, dg_ex) = check::double_grants(&holds);
    let (lost, lost_ex) = check::lost_writes(&ops);
    let lin = check::linearizable(&ops, keys, Duration::from_secs(60));
    let avail = check::availability(&ops, &events, load_end);
    let ok_acq = ops
        .iter()
        .filter(|o| o.kind == Kind::Acquire && o.res == Res::Ok)
        .count();
    let secs = (run_end - t0) as f64 / 1e6;
    let lin_bad = lin.iter().filter(|l| **l == check::Lin::No).count();
    let lin_unknown = lin.iter().filter(|l| **l == check::Lin::TimedOut).count();
    let lin_s = if lin_bad > 0 {
        format!("NO ({lin_bad}/{} keys)", lin.len())
    } else if lin_unknown > 0 {
        format!("no verdict ({lin_unknown}/{} keys timed out)", lin.len())
    } else {
        "yes".to_string()
    };
    if args.header {
        println!("| target | faults | injected | ops | acquires ok | double grants | lost acked writes | linearizable | longest unavailability | failed ops | acquires/s |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|");
    }
    println!(
        "| {name} | {} | {} | {} | {ok_acq} | {dg} | {lost} | {lin_s} | {:.1} s | {:.1} % | {:.0} |",
        fault_label(&faults),
        events.len(),
        ops.len(),
        avail.longest_after_fault_s,
        avail.failed_fraction * 100.0,
        ok_acq as f64 / secs
    );
    for ex in [dg_ex, lost_ex].into_iter().flatten() {
        eprintln!("harness: example: {ex}");
    }
    let mut kinds: Vec<(String, usize)> = Vec::new();
    for e in &events {
        let k = format!("{:?}", e.fault);
        match kinds.iter_mut().find(|(n, _)| *n == k) {
            Some((_, c)) => *c += 1,
            None => kinds.push((k, 1)),
        }
    }
    let kinds: Vec<String> = kinds.iter().map(|(k, c)| format!("{k} {c}")).collect();
    eprintln!(
        "harness: {} faults injected: {}",
        events.len(),
        kinds.join(", ")
    );
    if sharded {
        eprintln!("harness: cluster clients: {}", cluster::summary());
        // The longest stretch after a fault without a successful acquire of a key that started
        // in group g (a reshard moves a key's slot to another group for a while).
        let groups = target_groups;
        let per_group: Vec<String> = (0..groups)
            .map(|g| {
                let of_group: Vec<Op> = ops
                    .iter()
                    .filter(|o| o.key % groups == g)
                    .cloned()
                    .collect();
                let a = check::availability(&of_group, &events, load_end);
                format!("group {g} {:.1} s", a.longest_after_fault_s)
            })
            .collect();
        eprintln!(
            "harness: longest unavailability per group (keys that started in it): {}",
            per_group.join(", ")
        );
    }
    eprintln!(
        "harness: history in {}",
        dir.join("history.jsonl").display()
    );
    for e in &nemesis_errors {
        eprintln!("harness: nemesis error: {e}");
    }
    let violated = dg > 0 || lost > 0 || lin_bad > 0;
    if !nemesis_errors.is_empty() && !violated {
        return Err(format!(
            "the nemesis failed {} time(s): {}",
            nemesis_errors.len(),
            nemesis_errors.join("; ")
        ));
    }
    if safe && lin_unknown > 0 && !violated {
        return Err(format!(
            "{name}: the linearizability search gave no verdict within its budget"
        ));
    }
    Ok(violated && safe)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match std::env::var("DBH_PREFIX") {
        Err(_) => outer(&args),
        Ok(prefix) => match inner(&args, &prefix) {
            Ok(false) => ExitCode::SUCCESS,
            Ok(true) => {
                eprintln!("harness: VIOLATION on a target that promises safety");
                ExitCode::from(1)
            }
            Err(e) => {
                eprintln!("harness: {e}");
                ExitCode::from(2)
            }
        },
    }
}

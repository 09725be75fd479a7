//! The container's moving parts that can be checked without a container: the entrypoint's
//! redis-server-style argument handling and the `--ping` health probe. (docker/smoke.sh builds
//! and runs the real image; it is too slow for `cargo test`.)

use crate::common;

use std::path::PathBuf;
use std::process::Command;

/// Runs docker/entrypoint.sh with a stand-in `deadbolt` on PATH that prints its arguments.
fn entrypoint(args: &[&str]) -> String {
    entrypoint_with(args, "#!/bin/sh\necho deadbolt \"$@\"\n")
}

/// Runs docker/entrypoint.sh with the real binary as `deadbolt` on PATH, as in the image.
fn entrypoint_real(args: &[&str]) -> String {
    let script = format!("#!/bin/sh\nexec '{}' \"$@\"\n", common::deadbolt_bin());
    entrypoint_with(args, &script)
}

fn entrypoint_with(args: &[&str], fake_deadbolt: &str) -> String {
    let dir = std::env::temp_dir().join(format!(
        "deadbolt-entrypoint-{}-{}-{}",
        std::process::id(),
        fastrand::u32(..),
        args.join("_").replace('/', "")
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let fake = dir.join("deadbolt");
    std::fs::write(&fake, fake_deadbolt).unwrap();
    Command::new("chmod").arg("+x").arg(&fake).status().unwrap();
    let script: PathBuf = [env!("CARGO_MANIFEST_DIR"), "docker", "entrypoint.sh"]
        .iter()
        .collect();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("sh")
        .arg(script)
        .args(args)
        .env("PATH", path)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .trim_end()
        .to_string()
}

#[test]
fn entrypoint_passes_arguments_like_redis_server() {
    let conf = "/etc/deadbolt/deadbolt.conf";
    assert_eq!(entrypoint(&[]), format!("deadbolt {conf}"));
    assert_eq!(
        entrypoint(&["--port", "7000"]),
        format!("deadbolt {conf} --port 7000")
    );
    assert_eq!(
        entrypoint(&["deadbolt", "--port", "7000"]),
        format!("deadbolt {conf} --port 7000")
    );
    assert_eq!(
        entrypoint(&["/etc/deadbolt/my.conf", "--loglevel", "debug"]),
        "deadbolt /etc/deadbolt/my.conf --loglevel debug"
    );
    assert_eq!(entrypoint(&["--version"]), "deadbolt --version");
    assert_eq!(entrypoint(&["-v"]), "deadbolt -v");
    assert_eq!(entrypoint(&["deadbolt", "--version"]), "deadbolt --version");
    assert_eq!(
        entrypoint(&[
            "/etc/deadbolt/my.conf",
            "--port",
            "7000",
            "--requirepass",
            "pw"
        ]),
        "deadbolt /etc/deadbolt/my.conf --port 7000 --requirepass pw"
    );
    assert_eq!(entrypoint(&["--ping"]), format!("deadbolt {conf} --ping"));
    assert_eq!(entrypoint(&["echo", "other", "program"]), "other program");
}

fn ping(args: &[&str]) -> bool {
    Command::new(common::deadbolt_bin())
        .args(args)
        .arg("--ping")
        .status()
        .unwrap()
        .success()
}

#[test]
fn the_health_probe() {
    let s = common::deadbolt(&[]);
    let port = s.port.to_string();
    assert!(ping(&["--port", &port]));
    drop(s);
    assert!(!ping(&["--port", &port]), "nothing listens any more");

    // With a password: passes with it, and without it too (the server answers -NOAUTH, so it is
    // up), which keeps the image's HEALTHCHECK right when the password comes from arguments.
    let s = common::deadbolt(&["--requirepass", "pw"]);
    let port = s.port.to_string();
    assert!(ping(&["--port", &port, "--requirepass", "pw"]));
    assert!(ping(&["--port", &port]));
    assert!(ping(&["--port", &port, "--requirepass", "wrong"]));
}

/// What the entrypoint passes on is what the real binary accepts: the version flags, and the
/// shipped config followed by directives.
#[test]
fn entrypoint_arguments_work_with_the_real_binary() {
    let version = format!("v={} ", env!("CARGO_PKG_VERSION"));
    for flag in ["-v", "--version"] {
        let out = entrypoint_real(&[flag]);
        assert!(out.contains(&version), "{flag}: {out}");
    }
    let conf = repo_file("config/deadbolt.conf");
    let out = entrypoint_real(&[
        &conf,
        "--port",
        "7000",
        "--loglevel",
        "debug",
        "--test-config",
    ]);
    assert!(out.contains("OK"), "{out}");
}

fn repo_file(rel: &str) -> String {
    format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))
}

/// One service of a compose file: its command and volumes, `<<: *anchor` merged in.
#[derive(Clone, Default, Debug)]
struct Service {
    name: String,
    command: Vec<String>,
    volumes: Vec<String>,
    network_mode: Option<String>,
}

/// The services of one of docker/'s compose files. Reads the subset of YAML they use: top-level
/// `x-name: &anchor` blocks and `services:` entries holding `<<: *anchor`, `network_mode:` and
/// one-line-or-more flow sequences of double-quoted strings (`command:`, `volumes:`).
fn compose_services(rel: &str) -> Vec<Service> {
    let text = std::fs::read_to_string(repo_file(rel)).unwrap();
    let mut anchors: Vec<(String, Service)> = Vec::new();
    let mut services = Vec::new();
    let mut current: Option<(Option<String>, Service)> = None; // (anchor name, block)
    let mut in_services = false;
    let mut lines = text.lines().peekable();
    let finish = |cur: Option<(Option<String>, Service)>,
                  anchors: &mut Vec<(String, Service)>,
                  services: &mut Vec<Service>| {
        match cur {
            Some((Some(a), s)) => anchors.push((a, s)),
            Some((None, s)) => services.push(s),
            None => {}
        }
    };
    while let Some(line) = lines.next() {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let t = line.trim();
        if indent == 0 {
            finish(current.take(), &mut anchors, &mut services);
            in_services = t == "services:";
            if let Some((_, anchor)) = t.split_once(": &") {
                current = Some((Some(anchor.to_string()), Service::default()));
            }
            continue;
        }
        if in_services && indent == 2 {
            finish(current.take(), &mut anchors, &mut services);
            let name = t.trim_end_matches(':').to_string();
            current = Some((
                None,
                Service {
                    name,
                    ..Service::default()
                },
            ));
            continue;
        }
        let Some((_, svc)) = current.as_mut() else {
            continue;
        };
        if let Some(anchor) = t.strip_prefix("<<: *") {
            let (_, base) = anchors.iter().find(|(a, _)| a == anchor).unwrap();
            let name = std::mem::take(&mut svc.name);
            *svc = Service {
                name,
                ..base.clone()
            };
        } else if let Some(mode) = t.strip_prefix("network_mode: ") {
            svc.network_mode = Some(mode.to_string());
        } else if let Some((key, rest)) = t.split_once(": [") {
            let mut flow = rest.to_string();
            while !flow.trim_end().ends_with(']') {
                flow.push(' ');
                flow.push_str(lines.next().unwrap().trim());
            }
            let items: Vec<String> = flow
                .split('"')
                .skip(1)
                .step_by(2)
                .map(String::from)
                .collect();
            match key {
                "command" => svc.command = items,
                "volumes" => svc.volumes = items,
                _ => {}
            }
        }
    }
    finish(current.take(), &mut anchors, &mut services);
    services
}

/// `text` with every number of 4 or more digits (a port) replaced by the free port `ports` maps
/// it to, a new free port the first time one is seen.
fn move_ports(text: &str, ports: &mut Vec<(String, String)>) -> String {
    let mut out = String::new();
    let mut digits = String::new();
    let mut flush = |digits: &mut String, out: &mut String| {
        if digits.len() >= 4 {
            if !ports.iter().any(|(p, _)| p == digits) {
                ports.push((digits.clone(), common::free_port().to_string()));
            }
            let (_, to) = ports.iter().find(|(p, _)| p == digits).unwrap();
            out.push_str(to);
        } else {
            out.push_str(digits);
        }
        digits.clear();
    };
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            flush(&mut digits, &mut out);
            out.push(c);
        }
    }
    flush(&mut digits, &mut out);
    out
}

/// `${VAR:?message}` in a compose value, as compose substitutes it.
fn substitute(arg: &str, var: &str, value: &str) -> String {
    match (arg.find(&format!("${{{var}")), arg.find('}')) {
        (Some(a), Some(b)) => format!("{}{value}{}", &arg[..a], &arg[b + 1..]),
        _ => arg.to_string(),
    }
}

fn value_of<'a>(args: &'a [String], directive: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a == directive)?;
    args.get(at + 1).map(String::as_str)
}

/// The Redlock example keeps its locks across a restart: each server's /data is a volume, the
/// append-only log is on, and a start that may have lost grants waits out the longest lease.
/// The arguments are valid for the image's config.
#[test]
fn redlock_compose_keeps_locks_across_restarts() {
    let services = compose_services("docker/compose-redlock.yml");
    assert_eq!(services.len(), 3, "{services:?}");
    let conf = repo_file("config/deadbolt.conf");
    for s in &services {
        assert!(
            s.volumes.iter().any(|v| v.ends_with(":/data")),
            "{}: no volume on /data: {:?}",
            s.name,
            s.volumes
        );
        assert_eq!(value_of(&s.command, "--appendonly"), Some("yes"), "{s:?}");
        let fsync = value_of(&s.command, "--appendfsync").unwrap_or("everysec");
        let delay: u64 = value_of(&s.command, "--lock-restart-delay")
            .unwrap_or("0")
            .parse()
            .unwrap();
        assert!(
            fsync == "always" || delay >= 10_000,
            "{}: appendfsync {fsync} loses the last grants in a crash, and lock-restart-delay \
             {delay} ms does not cover a lock lease",
            s.name
        );
        let mut args = vec![conf.as_str()];
        args.extend(s.command.iter().map(String::as_str));
        args.push("--test-config");
        let out = entrypoint_real(&args);
        assert!(out.contains("OK"), "{}: {out}", s.name);
    }
}

/// compose-cluster.yml's nodes, started as compose would start them (ports moved to free ones):
/// a Sentinel client on the host gets back addresses it can connect to, and the master it is
/// given takes writes.
#[test]
fn cluster_compose_announces_addresses_the_host_can_use() {
    let services = compose_services("docker/compose-cluster.yml");
    assert_eq!(services.len(), 3, "{services:?}");
    let dir = common::TempDir::new("compose-cluster");
    // Every port the file names, mapped to a free one, in the order first seen.
    let mut ports: Vec<(String, String)> = Vec::new();
    let mut nodes = Vec::new();
    for s in &services {
        assert_eq!(s.network_mode.as_deref(), Some("host"), "{s:?}");
        assert!(s.volumes.iter().any(|v| v.ends_with(":/data")), "{s:?}");
        let args: Vec<String> = s
            .command
            .iter()
            .map(|a| {
                let a = substitute(a, "DEADBOLT_CLUSTER_SECRET", "compose-test-secret");
                move_ports(&a, &mut ports)
            })
            .collect();
        let peers = value_of(&args, "--cluster-peers").unwrap().to_string();
        let id = value_of(&args, "--cluster-node-id").unwrap().to_string();
        let port = value_of(&args, "--port").unwrap().to_string();
        let me = peers
            .split(' ')
            .find(|p| p.starts_with(&format!("{id}@")))
            .unwrap();
        assert!(
            me.starts_with(&format!("{id}@127.0.0.1:{port}:")),
            "{}: announces {me}, listens on {port}",
            s.name
        );
        let node_dir = dir.0.join(&s.name);
        std::fs::create_dir_all(&node_dir).unwrap();
        let mut cmd = Command::new(common::deadbolt_bin());
        cmd.arg(repo_file("config/deadbolt.conf"))
            .args(&args)
            .arg("--dir")
            .arg(&node_dir);
        nodes.push((common::start_command(cmd), port));
    }
    let (first, _) = &nodes[0];
    let mut c = first.conn();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let master = loop {
        let reply = c.cmd_str(&["SENTINEL", "get-master-addr-by-name", "mymaster"]);
        let parts: Vec<&str> = reply.split("\r\n").collect();
        if parts.len() >= 5 && parts[0] == "*2" {
            break (parts[2].to_string(), parts[4].to_string());
        }
        assert!(std::time::Instant::now() < deadline, "no master: {reply:?}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(master.0, "127.0.0.1");
    assert!(nodes.iter().any(|(_, p)| *p == master.1), "{master:?}");
    let mut m = common::Conn::connect(master.1.parse().unwrap());
    assert_eq!(
        m.cmd_str(&["SET", "lock", "me", "NX", "PX", "10000"]),
        "+OK\r\n"
    );
    let sentinels = c.cmd_str(&["SENTINEL", "sentinels", "mymaster"]);
    for (_, port) in &nodes[1..] {
        assert!(sentinels.contains(port.as_str()), "{sentinels}");
    }
}

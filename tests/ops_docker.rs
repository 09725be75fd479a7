//! The container's moving parts that can be checked without a container: the entrypoint's
//! redis-server-style argument handling and the `--ping` health probe. (docker/smoke.sh builds
//! and runs the real image; it is too slow for `cargo test`.)

mod common;

use std::path::PathBuf;
use std::process::Command;

/// Runs docker/entrypoint.sh with a stand-in `deadbolt` on PATH that prints its arguments.
fn entrypoint(args: &[&str]) -> String {
    let dir = std::env::temp_dir().join(format!(
        "deadbolt-entrypoint-{}-{}",
        std::process::id(),
        args.join("_").replace('/', "")
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let fake = dir.join("deadbolt");
    std::fs::write(&fake, "#!/bin/sh\necho deadbolt \"$@\"\n").unwrap();
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

//! Servers for the redis-rs suite: a real redis-server 7.0 (the reference) or deadbolt
//! ($DEADBOLT_BIN, default <repo>/target/debug/deadbolt), each on a free port of 127.0.0.1.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Redis,
    Deadbolt,
}

pub struct Server {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(300)));
    let mut buf = [0u8; 16];
    s.write_all(b"PING\r\n").is_ok()
        && s.read(&mut buf)
            .is_ok_and(|n| buf[..n].starts_with(b"+PONG"))
}

fn deadbolt_bin() -> PathBuf {
    std::env::var_os("DEADBOLT_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../target/debug/deadbolt")
        })
}

impl Server {
    pub fn start(kind: Kind) -> Server {
        let dir = std::env::temp_dir().join(format!(
            "clients-rs-{kind:?}-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        for _ in 0..5 {
            let port = free_port();
            let p = port.to_string();
            let d = dir.to_string_lossy().into_owned();
            let mut cmd = match kind {
                Kind::Redis => {
                    let mut c = Command::new("redis-server");
                    c.args([
                        "--port",
                        &p,
                        "--bind",
                        "127.0.0.1",
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                        "--dir",
                        &d,
                    ]);
                    c
                }
                Kind::Deadbolt => {
                    let bin = deadbolt_bin();
                    assert!(
                        bin.exists(),
                        "deadbolt binary not found at {} (cargo build)",
                        bin.display()
                    );
                    let mut c = Command::new(bin);
                    c.args([
                        "--port",
                        &p,
                        "--bind",
                        "127.0.0.1",
                        "--dir",
                        &d,
                        "--appendonly",
                        "no",
                    ]);
                    c
                }
            };
            let log = std::fs::File::create(dir.join("server.log")).expect("log file");
            let mut child = cmd
                .current_dir(&dir)
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .spawn()
                .expect("spawn server (redis-server installed? deadbolt built?)");
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    break;
                }
                if ping(port) {
                    return Server { child, port, dir };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
        panic!("{kind:?} did not start; log:\n{log}");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Defines each test twice, `on_redis::name` and `on_deadbolt::name`, so a run can pick a target
/// with a name filter and a failure says which target it was.
#[macro_export]
macro_rules! both_targets {
    ($(async fn $name:ident($kind:ident: Kind) $body:block)*) => {
        mod on_redis {
            #[allow(unused_imports)]
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(Kind::Redis).await })*
        }
        mod on_deadbolt {
            #[allow(unused_imports)]
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(Kind::Deadbolt).await })*
        }
        $(async fn $name($kind: Kind) $body)*
    };
}

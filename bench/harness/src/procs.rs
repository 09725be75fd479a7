//! Server processes started inside a node's namespace, which the nemesis kills, restarts,
//! pauses and resumes by pid. `ip netns exec` execs the server, so the child's pid is the server's.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

pub struct Proc {
    pub name: String,
    ns: String,
    argv: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
    paused: bool,
}

impl Proc {
    pub fn new(name: &str, ns: &str, argv: Vec<String>, log: PathBuf) -> Proc {
        Proc {
            name: name.to_string(),
            ns: ns.to_string(),
            argv,
            log,
            child: None,
            paused: false,
        }
    }

    pub fn start(&mut self) -> Result<(), String> {
        if self.child.is_some() {
            return Ok(());
        }
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("{}: {e}", self.log.display()))?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns])
            .args(&self.argv)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| format!("start {}: {e}", self.name))?;
        self.child = Some(child);
        self.paused = false;
        Ok(())
    }

    fn signal(&self, sig: libc::c_int) {
        if let Some(c) = &self.child {
            // SAFETY: kill(2) on the pid of our own child, which we have not yet reaped.
            unsafe {
                libc::kill(c.id() as libc::pid_t, sig);
            }
        }
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: kill(2) on our own unreaped child; SIGCONT first so a paused one can die.
            unsafe {
                libc::kill(c.id() as libc::pid_t, libc::SIGKILL);
                libc::kill(c.id() as libc::pid_t, libc::SIGCONT);
            }
            let _ = c.wait();
        }
        self.paused = false;
    }

    pub fn pause(&mut self) {
        self.signal(libc::SIGSTOP);
        self.paused = self.child.is_some();
    }

    pub fn resume(&mut self) {
        self.signal(libc::SIGCONT);
        self.paused = false;
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

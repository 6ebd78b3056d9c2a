//! A private `redis-server` for tests and benchmarks: on a free port of
//! 127.0.0.1 (never another address), in a temporary directory, with AOF and
//! `appendfsync always`; killed when dropped, or when the thread that started
//! it ends (PR_SET_PDEATHSIG), so no server outlives its test run.
//!
//! Where `redis-server` cannot be found, [`available`] prints a loud SKIPPED
//! line and returns false — unless the environment variable `CI` is set,
//! where it panics: CI installs the server, so its absence is a failure.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub fn available() -> bool {
    let found = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        if std::env::var_os("CI").is_some() {
            panic!(
                "redis-server not found, and CI is set: CI must install it (apt-get install -y redis-server)"
            );
        }
        eprintln!("\n*** SKIPPED: redis-server not found; install it (apt-get install -y redis-server) to run the Redis tests ***\n");
    }
    found
}

pub struct RedisServer {
    pub port: u16,
    pub dir: PathBuf,
    child: Mutex<Option<Child>>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))
    else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}

impl RedisServer {
    /// Starts a server in a fresh directory under the system temp dir.
    pub fn start(tag: &str) -> RedisServer {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "delayq-redis-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for _ in 0..5 {
            let port = free_port();
            let server = RedisServer { port, dir: dir.clone(), child: Mutex::new(None) };
            if server.spawn() {
                return server;
            }
        }
        panic!("redis-server did not start; see {}/redis.log", dir.display());
    }

    fn spawn(&self) -> bool {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--protected-mode", "yes"])
            .args(["--dir", self.dir.to_str().unwrap(), "--appendonly", "yes", "--appendfsync", "always"])
            .args(["--save", "", "--daemonize", "no", "--logfile", "redis.log"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: prctl is async-signal-safe; it only sets this child's death signal.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("spawning redis-server");
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if ping(self.port) {
                *self.child.lock().unwrap() = Some(child);
                return true;
            }
            if let Ok(Some(_)) = child.try_wait() {
                return false; // the port was taken meanwhile
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// SIGKILL: no shutdown save, as in a crash.
    pub fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and directory (it reloads its AOF).
    pub fn restart(&self) {
        self.kill();
        assert!(self.spawn(), "redis-server did not restart; see {}", self.dir.join("redis.log").display());
    }

    pub fn aof_dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

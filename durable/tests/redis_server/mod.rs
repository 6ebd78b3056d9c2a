//! A private `redis-server` for tests and benchmarks: on a free port of
//! 127.0.0.1 (never another address), in a temporary directory, with AOF and
//! `appendfsync always`; killed when dropped, or when the thread that started
//! it ends (PR_SET_PDEATHSIG), so no server outlives its test run.
//!
//! The server trusted is our child: a port answers for us only if `INFO
//! server` reports our child's process id (another server that took the port
//! meanwhile is not mistaken for ours). Directories left by test processes
//! that died (a leaked shared server's, a SIGKILLed run's) are removed when
//! the next server starts.
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

/// Starts `start()` on a thread that never ends, and leaks what it returns:
/// for the server (or cluster) that a test binary's cases share. A
/// server's death signal (`PR_SET_PDEATHSIG`) is tied to the thread that
/// spawned it, and test threads come and go.
pub fn start_shared<T: Send + Sync + 'static>(start: impl FnOnce() -> T + Send + 'static) -> &'static T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let shared: &'static T = Box::leak(Box::new(start()));
        tx.send(shared).unwrap();
        loop {
            std::thread::park();
        }
    });
    rx.recv().unwrap()
}

/// A queue name no other case of this run uses: `tag`, the process id and
/// a counter.
pub fn unique(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("{tag}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

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
    /// A cluster node (`--cluster-enabled yes`, its `nodes-<port>.conf` in `dir`).
    cluster: bool,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The process id of the server answering on `port` (`INFO server`), if one
/// answers.
pub fn server_pid(port: u16) -> Option<u32> {
    let mut s =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    s.write_all(b"INFO server\r\n").ok()?;
    // A bulk string: `$<len>\r\n<text>\r\n`.
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") else { continue };
        let len: usize = std::str::from_utf8(buf.strip_prefix(b"$")?.get(..eol - 1)?).ok()?.parse().ok()?;
        if buf.len() >= eol + 2 + len {
            let text = String::from_utf8_lossy(&buf[eol + 2..eol + 2 + len]).into_owned();
            return text
                .lines()
                .find_map(|l| l.strip_prefix("process_id:"))
                .and_then(|p| p.trim().parse().ok());
        }
    }
}

/// Removes `delayq-redis-*-<pid>-<n>` directories whose process is gone.
pub fn remove_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("delayq-redis-") {
            continue;
        }
        let mut parts = name.rsplit('-');
        let (Some(_n), Some(pid)) = (parts.next(), parts.next()) else { continue };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl RedisServer {
    /// Starts a server in a fresh directory under the system temp dir.
    pub fn start(tag: &str) -> RedisServer {
        static N: AtomicUsize = AtomicUsize::new(0);
        remove_stale_dirs();
        let dir = std::env::temp_dir().join(format!(
            "delayq-redis-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for _ in 0..5 {
            if let Some(server) = RedisServer::start_on(free_port(), &dir) {
                return server;
            }
        }
        panic!("redis-server did not start; see {}/redis.log", dir.display());
    }

    /// Starts a server on `port` in `dir`; `None` if it did not come up as
    /// the one answering there (the port was taken, by a server or not).
    pub fn start_on(port: u16, dir: &Path) -> Option<RedisServer> {
        let server = RedisServer { port, dir: dir.to_path_buf(), child: Mutex::new(None), cluster: false };
        if server.spawn() {
            Some(server)
        } else {
            // Not ours to remove on drop.
            std::mem::forget(server);
            None
        }
    }

    fn spawn(&self) -> bool {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--protected-mode", "yes"])
            .args(["--dir", self.dir.to_str().unwrap(), "--appendonly", "yes", "--appendfsync", "always"])
            .args(["--save", "", "--daemonize", "no", "--logfile", "redis.log"]);
        if self.cluster {
            let conf = format!("nodes-{}.conf", self.port);
            cmd.args(["--cluster-enabled", "yes", "--cluster-config-file", &conf])
                .args(["--cluster-node-timeout", "5000"]);
        }
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
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
            if let Ok(Some(_)) = child.try_wait() {
                return false; // the port was taken meanwhile
            }
            // Only our child counts: another server on this port is not ours.
            if server_pid(self.port) == Some(child.id()) {
                *self.child.lock().unwrap() = Some(child);
                return true;
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

/// A Redis Cluster of three masters (no replicas) on free 127.0.0.1 ports,
/// each node a [`RedisServer`] in its own directory (AOF, `appendfsync
/// always`), joined by `redis-cli --cluster create`; killed when dropped.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
    pub dir: PathBuf,
}

impl RedisCluster {
    pub fn start(tag: &str) -> RedisCluster {
        static N: AtomicUsize = AtomicUsize::new(0);
        remove_stale_dirs();
        let dir = std::env::temp_dir().join(format!(
            "delayq-redis-cluster{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let mut nodes = Vec::new();
        while nodes.len() < 3 {
            let port = free_port();
            let node_dir = dir.join(port.to_string());
            std::fs::create_dir_all(&node_dir).unwrap();
            let node = RedisServer { port, dir: node_dir, child: Mutex::new(None), cluster: true };
            if node.spawn() {
                nodes.push(node);
            } else {
                std::mem::forget(node);
            }
        }
        let cluster = RedisCluster { nodes, dir };
        let addrs: Vec<String> = cluster.nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect(
                "running redis-cli --cluster create (redis-cli comes with redis-server, package redis-tools)",
            );
        assert!(out.status.success(), "redis-cli --cluster create: {}", String::from_utf8_lossy(&out.stdout));
        cluster.wait_ready();
        cluster
    }

    /// Waits until every node reports `cluster_state:ok`.
    pub fn wait_ready(&self) {
        let start = Instant::now();
        for node in &self.nodes {
            loop {
                let ok = cluster_info(node.port).is_some_and(|i| i.contains("cluster_state:ok"));
                if ok {
                    break;
                }
                assert!(start.elapsed() < Duration::from_secs(30), "the cluster did not become ready");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for n in &self.nodes {
            n.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `CLUSTER INFO` from the node on `port`, if it answers.
pub fn cluster_info(port: u16) -> Option<String> {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "CLUSTER", "INFO"])
        .stdin(Stdio::null())
        .output()
        .ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

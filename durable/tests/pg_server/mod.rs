//! A private PostgreSQL server for tests and benchmarks: `initdb` into a
//! fresh temporary directory, `postgres` on a free port of 127.0.0.1 (never
//! another address; no Unix socket), `fsync=on`, stopped when dropped, or
//! killed when the thread that started it ends (PR_SET_PDEATHSIG), so no
//! server outlives its test run.
//!
//! PostgreSQL refuses to run as root. Run as root (as CI is), the harness
//! runs `initdb`, `postgres` and `pg_ctl` as the `postgres` user Debian's
//! package creates (as `nobody` where there is none): the child drops its
//! group and user ids before it executes them, then sets its death signal
//! (a change of credentials clears one set before).
//!
//! The server trusted is our child: a port answers for us only if the
//! server there reports our data directory. Directories left by test
//! processes that died (a SIGKILLed run's) are removed, and their server
//! stopped, when the next server starts.
//!
//! The binaries are found under `/usr/lib/postgresql/*/bin` (the newest
//! version), or in `$DELAYQ_PG_BIN`. Where there are none, [`available`]
//! prints a loud SKIPPED line and returns false — unless the environment
//! variable `CI` is set, where it panics: CI installs them (Debian's
//! `postgresql`), so their absence is a failure.

#![allow(dead_code)]

use std::fs::File;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Starts `start()` on a thread that never ends, and leaks what it returns:
/// for the server that a test binary's cases share (its death signal is
/// tied to the thread that spawned it, and test threads come and go).
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

/// The directory of `initdb`, `postgres` and `pg_ctl`: `$DELAYQ_PG_BIN`,
/// or the newest `/usr/lib/postgresql/<version>/bin` that has them.
pub fn bin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("DELAYQ_PG_BIN") {
        return Some(PathBuf::from(dir));
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").exists() && bin.join("postgres").exists()).then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

pub fn available() -> bool {
    let found = bin_dir().is_some();
    if !found {
        if std::env::var_os("CI").is_some() {
            panic!(
                "PostgreSQL's initdb and postgres not found under /usr/lib/postgresql/*/bin, and CI is set: \
                 CI must install them (apt-get install -y postgresql)"
            );
        }
        eprintln!(
            "\n*** SKIPPED: PostgreSQL not found under /usr/lib/postgresql/*/bin; install it \
             (apt-get install -y postgresql) to run the PostgreSQL tests ***\n"
        );
    }
    found
}

/// The user the server runs as: ourselves, unless we are root; then
/// `postgres` (or `nobody`, 65534, where there is no such user).
fn run_as() -> Option<(u32, u32)> {
    // SAFETY: getuid has no preconditions and cannot fail.
    if unsafe { libc::getuid() } != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let ids = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.first() == Some(&"postgres")).then(|| Some((f.get(2)?.parse().ok()?, f.get(3)?.parse().ok()?)))?
    });
    Some(ids.unwrap_or((65534, 65534)))
}

/// A command for one of the server's binaries, run as [`run_as`]'s user;
/// with `death`, killed when the spawning thread ends.
fn command(bin: &str, death: bool) -> Command {
    let mut cmd = Command::new(bin_dir().expect("PostgreSQL binaries").join(bin));
    let user = run_as();
    // SAFETY: setgroups, setgid, setuid and prctl are async-signal-safe
    // system calls; the closure touches no memory of the parent but the
    // copied ids.
    unsafe {
        cmd.pre_exec(move || {
            if let Some((uid, gid)) = user {
                if libc::setgroups(0, std::ptr::null()) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // After the credentials change, which clears a death signal.
            if death {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            }
            Ok(())
        });
    }
    cmd
}

/// Makes `path` the server user's.
fn give(path: &Path) {
    if let Some((uid, gid)) = run_as() {
        std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
    }
}

pub struct PgServer {
    pub port: u16,
    /// The temporary directory: `data/` (the cluster), `postgres.log`.
    pub dir: PathBuf,
    child: Mutex<Option<Child>>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The data directory of the server answering on `port`, if one answers.
pub fn data_directory(port: u16) -> Option<String> {
    let url = format!("host=127.0.0.1 port={port} user=postgres dbname=postgres connect_timeout=1");
    let mut client = postgres::Client::connect(&url, postgres::NoTls).ok()?;
    let row = client.query_one("SHOW data_directory", &[]).ok()?;
    Some(row.get(0))
}

/// Removes `delayq-pg-*-<pid>-<n>` directories whose process is gone,
/// stopping the server each one's `postmaster.pid` names first.
pub fn remove_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with("delayq-pg-") {
            continue;
        }
        let mut parts = name.rsplit('-');
        let (Some(_n), Some(pid)) = (parts.next(), parts.next()) else { continue };
        let Ok(pid) = pid.parse::<u32>() else { continue };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let pidfile = e.path().join("data").join("postmaster.pid");
        if let Some(server) = std::fs::read_to_string(pidfile)
            .ok()
            .and_then(|s| s.lines().next().and_then(|l| l.trim().parse::<i32>().ok()))
        {
            // SAFETY: kill has no memory preconditions. SIGQUIT: immediate shutdown.
            unsafe { libc::kill(server, libc::SIGQUIT) };
        }
        let _ = std::fs::remove_dir_all(e.path());
    }
}

impl PgServer {
    /// `initdb` in a fresh directory under the system temp dir, then the
    /// server on a free port.
    pub fn start(tag: &str) -> PgServer {
        static N: AtomicUsize = AtomicUsize::new(0);
        remove_stale_dirs();
        let dir = std::env::temp_dir().join(format!(
            "delayq-pg-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        give(&dir);
        let out = command("initdb", false)
            .arg("-D")
            .arg(dir.join("data"))
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"])
            .stdin(Stdio::null())
            .output()
            .expect("running initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for _ in 0..5 {
            let server = PgServer { port: free_port(), dir: dir.clone(), child: Mutex::new(None) };
            if server.spawn() {
                return server;
            }
            std::mem::forget(server); // its directory is the next try's
        }
        panic!("postgres did not start; see {}/postgres.log", dir.display());
    }

    /// Starts `postgres` on our port and directory; false if it did not
    /// come up as the one answering there.
    fn spawn(&self) -> bool {
        let log = File::options().create(true).append(true).open(self.dir.join("postgres.log")).unwrap();
        let mut child = command("postgres", true)
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-p", &self.port.to_string()])
            .args(["-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="])
            .args(["-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "max_connections=300"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawning postgres");
        let ours = self.dir.join("data");
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(_)) = child.try_wait() {
                return false; // the port was taken, say
            }
            // Only our server counts: another one on this port is not ours.
            if data_directory(self.port).is_some_and(|d| Path::new(&d) == ours) {
                *self.child.lock().unwrap() = Some(child);
                return true;
            }
            std::thread::sleep(Duration::from_millis(30));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// `postgres://` URL of the `postgres` database as the `postgres` user.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// `pg_ctl stop -m immediate`: every server process quits at once,
    /// without a checkpoint, as in a crash; the next start replays the WAL.
    pub fn stop_immediate(&self) {
        let Some(mut child) = self.child.lock().unwrap().take() else { return };
        let status = command("pg_ctl", false)
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["stop", "-m", "immediate", "-w"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if !status.is_ok_and(|s| s.success()) {
            let _ = child.kill();
        }
        let _ = child.wait();
    }

    /// Starts it again on the same port and directory (it recovers from its WAL).
    pub fn restart(&self) {
        self.stop_immediate();
        assert!(self.spawn(), "postgres did not restart; see {}", self.dir.join("postgres.log").display());
    }

    /// Fast shutdown (SIGINT), waited for.
    fn stop(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            // SAFETY: kill has no memory preconditions; the pid is our live child's.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

//! The sidecar file an application writes next to its database while it
//! serves the dashboard (`PATH.dashboard`): its process id, the dashboard's
//! address and its CSRF token (the file is its owner's alone: mode 0600),
//! so that `delayq-jobs`, refused by the file's lock, reaches the queue
//! through that dashboard's JSON API (`remote.rs`), or says who holds it.

use std::path::{Path, PathBuf};

/// Who holds a database file, as its sidecar says.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Holder {
    /// The process id.
    pub pid: u32,
    /// The dashboard's address (`http://127.0.0.1:PORT/`).
    pub url: String,
    /// The dashboard's CSRF token, for its JSON API's writes (absent: a
    /// read-only dashboard).
    pub token: Option<String>,
}

/// The sidecar's path for a database: `PATH.dashboard`.
pub fn path_for(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".dashboard");
    PathBuf::from(name)
}

/// Writes `db`'s sidecar for this process (`pid=N`, `url=U` and, for a
/// dashboard that takes writes, `token=T`, one a line), readable by its
/// owner only.
pub fn write(db: &Path, url: &str, token: Option<&str>) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = path_for(db);
    let _ = std::fs::remove_file(&path); // a stale one may have other permissions
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
    let token = token.map(|t| format!("token={t}\n")).unwrap_or_default();
    write!(f, "pid={}\nurl={url}\n{token}", std::process::id())
}

/// Removes `db`'s sidecar if it names this process.
pub fn remove(db: &Path) {
    if read(db).is_some_and(|h| h.pid == std::process::id()) {
        let _ = std::fs::remove_file(path_for(db));
    }
}

/// The holder `db`'s sidecar names, if there is one that parses and its
/// process is alive (a sidecar left by a killed process is ignored).
pub fn read(db: &Path) -> Option<Holder> {
    let text = std::fs::read_to_string(path_for(db)).ok()?;
    let field = |name: &str| text.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
    let pid: u32 = field("pid=")?.parse().ok()?;
    let url = field("url=")?.to_string();
    let token = field("token=").map(str::to_string);
    Path::new(&format!("/proc/{pid}")).exists().then_some(Holder { pid, url, token })
}

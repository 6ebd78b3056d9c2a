//! `delayq-jobs`: inspect and repair a delayq-durable queue from the shell,
//! or serve its dashboard. See `delayq-jobs --help`.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use delayq_durable::JobState;
use delayq_jobs::{commands, dashboard, open};

#[derive(Parser)]
#[command(name = "delayq-jobs", version, about = "Inspect and repair a delayq-durable queue")]
struct Cli {
    #[command(flatten)]
    target: Target,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args)]
struct Target {
    /// An embedded queue: the redb file (it must exist; it is never created).
    #[arg(long, global = true, conflicts_with_all = ["redis", "postgres", "name"])]
    db: Option<PathBuf>,
    /// A Redis queue: the server's URL (redis://127.0.0.1:6379); needs --name.
    /// With --cluster: one or more nodes of a Redis Cluster, comma-separated.
    #[arg(long, global = true, requires = "name")]
    redis: Option<String>,
    /// The --redis URLs are nodes of a Redis Cluster.
    #[arg(long, global = true, requires = "redis")]
    cluster: bool,
    /// A PostgreSQL queue: the database's URL
    /// (postgres://user@127.0.0.1:5432/db); needs --name. With --schema if
    /// it is not in the default one (delayq).
    #[arg(long, global = true, requires = "name", conflicts_with = "redis")]
    postgres: Option<String>,
    /// The schema of the --postgres queue.
    #[arg(long, global = true, requires = "postgres", default_value = "delayq")]
    schema: String,
    /// The Redis or PostgreSQL queue's name.
    #[arg(long, global = true)]
    name: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum StateArg {
    Pending,
    #[value(alias = "reserved")]
    Leased,
    Dead,
}

#[derive(Subcommand)]
enum Command {
    /// Counts by state, and how late the oldest pending job is.
    Stats,
    /// Lists the recurring schedules: when each ticks, its next and last run, whether it is paused.
    Schedules,
    /// Lists jobs in one state: id, due, attempt, kind, size, last error, a payload preview.
    List {
        #[arg(long, value_enum)]
        state: StateArg,
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Every field of one job.
    Show { id: u64 },
    /// Moves a dead job (or, with --all-dead, every dead job) back to pending, due now.
    Requeue {
        #[arg(required_unless_present = "all_dead", conflicts_with = "all_dead")]
        id: Option<u64>,
        #[arg(long)]
        all_dead: bool,
    },
    /// Deletes every dead job.
    Purge {
        #[arg(long, required = true)]
        dead: bool,
    },
    /// Deletes a job; a leased one (a worker may be running it) only with --force.
    Cancel {
        id: u64,
        #[arg(long)]
        force: bool,
    },
    /// Serves the web dashboard until interrupted.
    Serve {
        /// HOST:PORT (`localhost:8025` or `127.0.0.1:8025`).
        #[arg(long, default_value = "127.0.0.1:8025")]
        bind: String,
        /// Allow binding an address other than loopback (the dashboard has no login).
        #[arg(long)]
        allow_remote: bool,
        /// Show and accept the requeue and delete buttons.
        #[arg(long)]
        allow_writes: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("delayq-jobs: error: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// The address `bind` names (a name is resolved; `localhost` to its
/// loopback address), refused unless loopback or `allow_remote`.
fn bind_address(bind: &str, allow_remote: bool) -> Result<SocketAddr, String> {
    let addrs: Vec<SocketAddr> =
        bind.to_socket_addrs().map_err(|e| format!("--bind {bind}: {e} (give HOST:PORT)"))?.collect();
    let Some(&first) = addrs.iter().find(|a| a.is_ipv4()).or(addrs.first()) else {
        return Err(format!("--bind {bind}: the name resolves to no address"));
    };
    if !allow_remote && !addrs.iter().all(|a| a.ip().is_loopback()) {
        return Err(format!(
            "{bind} is not a loopback address; the dashboard has no login: pass --allow-remote to serve it there"
        ));
    }
    Ok(first)
}

fn run(cli: Cli) -> Result<(), String> {
    let serving = match &cli.command {
        // Refused before the queue is opened.
        Command::Serve { bind, allow_remote, .. } => Some(bind_address(bind, *allow_remote)?),
        _ => None,
    };
    let queue = match (&cli.target.db, &cli.target.redis, &cli.target.name) {
        (Some(db), _, _) => open::embedded(db)?,
        (None, Some(url), Some(name)) => open::redis(url, name, cli.target.cluster, serving.is_none())?,
        (None, None, Some(name)) if cli.target.postgres.is_some() => {
            let url = cli.target.postgres.as_deref().unwrap_or_default();
            open::postgres(url, &cli.target.schema, name, serving.is_none())?
        }
        _ => {
            return Err(
                "name a queue: --db PATH, --redis URL --name NAME, or --postgres URL --name NAME".into()
            )
        }
    };
    let mut out = std::io::stdout().lock();
    let q = &*queue;
    match cli.command {
        Command::Stats => commands::stats(q, &mut out),
        Command::Schedules => commands::schedules(q, &mut out),
        Command::List { state, limit } => {
            let state = match state {
                StateArg::Pending => JobState::Pending,
                StateArg::Leased => JobState::Leased,
                StateArg::Dead => JobState::Dead,
            };
            commands::list(q, state, limit, &mut out)
        }
        Command::Show { id } => commands::show(q, id, &mut out),
        Command::Requeue { all_dead: true, .. } => commands::requeue_all_dead(q, &mut out),
        Command::Requeue { id, .. } => commands::requeue(q, id.unwrap_or_default(), &mut out),
        Command::Purge { .. } => commands::purge_dead(q, &mut out),
        Command::Cancel { id, force } => commands::cancel(q, id, force, &mut out),
        Command::Serve { bind, allow_writes, .. } => {
            let addr = serving.unwrap_or_else(|| unreachable!("resolved above"));
            let host = bind.rsplit_once(':').map_or(bind.as_str(), |(h, _)| h).to_string();
            let options =
                dashboard::Options { allow_writes, sidecar: cli.target.db.clone(), hosts: vec![host] };
            // Caught from before the address is printed, so a signal sent
            // on seeing it finds the handlers in place.
            let signals = Signals::new()?;
            let server = dashboard::serve(queue.clone(), addr, options)
                .map_err(|e| format!("serving on {addr}: {e}"))?;
            use std::io::Write;
            writeln!(out, "dashboard for {} at {}", queue.describe(), server.url())
                .map_err(|e| e.to_string())?;
            out.flush().map_err(|e| e.to_string())?;
            // Until SIGINT or SIGTERM: the server's thread does the work.
            signals.wait();
            server.shutdown(); // removes the sidecar
            Ok(())
        }
    }
}

/// SIGINT and SIGTERM, caught.
struct Signals {
    runtime: tokio::runtime::Runtime,
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Result<Signals, String> {
        use tokio::signal::unix::{signal, SignalKind};
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .map_err(|e| format!("catching signals: {e}"))?;
        let _entered = runtime.enter();
        let term = signal(SignalKind::terminate()).map_err(|e| format!("catching SIGTERM: {e}"))?;
        let int = signal(SignalKind::interrupt()).map_err(|e| format!("catching SIGINT: {e}"))?;
        drop(_entered);
        Ok(Signals { runtime, term, int })
    }

    /// Blocks until one arrives.
    fn wait(self) {
        let Signals { runtime, mut term, mut int } = self;
        runtime.block_on(std::future::poll_fn(|cx| match (term.poll_recv(cx), int.poll_recv(cx)) {
            (std::task::Poll::Pending, std::task::Poll::Pending) => std::task::Poll::Pending,
            _ => std::task::Poll::Ready(()),
        }));
    }
}

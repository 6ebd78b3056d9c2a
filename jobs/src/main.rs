//! `delayq-jobs`: inspect and repair a delayq-durable queue from the shell,
//! or serve its dashboard. See `delayq-jobs --help`.

use std::net::SocketAddr;
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
    #[arg(long, global = true, conflicts_with_all = ["redis", "name"])]
    db: Option<PathBuf>,
    /// A Redis queue: the server's URL (redis://127.0.0.1:6379); needs --name.
    #[arg(long, global = true, requires = "name")]
    redis: Option<String>,
    /// The Redis queue's name.
    #[arg(long, global = true)]
    name: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum StateArg {
    Pending,
    #[value(alias = "leased")]
    Reserved,
    Dead,
}

#[derive(Subcommand)]
enum Command {
    /// Counts by state, and how late the oldest pending job is.
    Stats,
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
        #[arg(long, default_value = "127.0.0.1:8025")]
        bind: SocketAddr,
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

fn run(cli: Cli) -> Result<(), String> {
    if let Command::Serve { bind, allow_remote, .. } = &cli.command {
        // Refused before the queue is opened (and an embedded file locked).
        if !bind.ip().is_loopback() && !allow_remote {
            return Err(format!(
                "{bind} is not a loopback address; the dashboard has no login: pass --allow-remote to serve it there"
            ));
        }
    }
    let queue = match (&cli.target.db, &cli.target.redis, &cli.target.name) {
        (Some(db), _, _) => open::embedded(db)?,
        (None, Some(url), Some(name)) => open::redis(url, name)?,
        _ => return Err("name a queue: --db PATH, or --redis URL --name NAME".into()),
    };
    let mut out = std::io::stdout().lock();
    let q = &*queue;
    match cli.command {
        Command::Stats => commands::stats(q, &mut out),
        Command::List { state, limit } => {
            let state = match state {
                StateArg::Pending => JobState::Pending,
                StateArg::Reserved => JobState::Leased,
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
            let options = dashboard::Options { allow_writes, sidecar: cli.target.db.clone() };
            let server = dashboard::serve(queue.clone(), bind, options)
                .map_err(|e| format!("serving on {bind}: {e}"))?;
            use std::io::Write;
            writeln!(out, "dashboard for {} at {}", queue.describe(), server.url())
                .map_err(|e| e.to_string())?;
            out.flush().map_err(|e| e.to_string())?;
            // Until the process is stopped: the server's thread does the work.
            loop {
                std::thread::park();
            }
        }
    }
}

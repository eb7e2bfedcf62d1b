// SPDX-License-Identifier: GPL-2.0-only
//! `rrds`: userspace tools for RDS sockets, for rrds and the in-tree `rds`
//! module alike.

mod cmd;

use std::io;
use std::path::Path;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::CommandFactory;
use clap::Parser;
use clap::Subcommand;

/// Userspace tools for RDS sockets (rrds or the in-tree rds module).
#[derive(Parser, Debug)]
#[command(name = "rrds", version, after_long_help = EXIT_STATUS_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Ping an RDS stack (rds-ping): 0-byte messages to port 0, timed pongs,
    /// until -c COUNT or Ctrl-C. Exits 0 if any pong came back.
    Ping(cmd::ping::PingArgs),
    /// Measure throughput and round-trip latency between two sockets
    /// (rds-stress-like). Exits 0 if no run counted an error.
    Bench(cmd::bench::BenchArgs),
    /// Draw the results of `rrds bench --json` runs (rrds against in-tree
    /// RDS, say) in one SVG chart, a colour per file.
    Plot(cmd::plot::PlotArgs),
    /// Print an RDS_INFO table, or all of them (rds-info-like).
    Info(cmd::info::InfoArgs),
    /// rrds's XRC target QPs: list, create, watch events, inject (rrds only).
    Xrc(cmd::xrc::XrcArgs),
    /// Register and free memory regions (RDS_GET_MR / RDS_FREE_MR) through a
    /// socket bound to LOCAL_ADDR, timing each call. Exits 0 if all succeed.
    Mr(cmd::mr::MrArgs),
    /// Print the connections' links of this network namespace coming up and
    /// going down as it happens (RRDS_CONN_MONITOR; rrds only).
    Watch(cmd::watch::WatchArgs),
    /// Print the shell completion script for SHELL on standard output, e.g.
    /// `rrds completions bash > /usr/share/bash-completion/completions/rrds`.
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Write the manual pages, rrds.1 and rrds-SUBCOMMAND.1 for each
    /// subcommand, into DIR (`make tools-install` installs them).
    Manpages {
        /// Where to write the pages (created if missing).
        dir: PathBuf,
    },
}

/// Writes rrds's completion script for `shell` to `out`.
fn write_completions(shell: clap_complete::Shell, out: &mut dyn io::Write) {
    clap_complete::generate(shell, &mut Cli::command(), "rrds", out);
}

/// Writes rrds's manual pages into `dir`, creating it if missing.
fn write_manpages(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    clap_mangen::generate_to(Cli::command(), dir)
}

/// The exit statuses, for `--help` and the manual page.
const EXIT_STATUS_HELP: &str = "Exit status:
  0    success
  1    the command ran and its check failed: no pong came back, a benchmark
       run counted an error, a table or a registration failed
  2    bad command line
  3    RDS is not there: no implementation loaded (EAFNOSUPPORT), or the
       loaded one lacks what was asked, such as an rrds extension on the
       in-tree module (ENOPROTOOPT) or a transport (EPROTONOSUPPORT)
  4    any other system error (bind, permission, resources)
  130  a second Ctrl-C";

/// Exit status 1: the command ran and its check failed.
const EXIT_CHECK_FAILED: u8 = 1;
/// Exit status 3: no RDS implementation, or not the one that has it.
const EXIT_UNSUPPORTED: u8 = 3;
/// Exit status 4: any other system error.
const EXIT_SYSTEM_ERROR: u8 = 4;

/// The exit status for a command that stopped with `err`.
fn exit_status(err: &io::Error) -> u8 {
    match cmd::errno(err) {
        Some(libc::EAFNOSUPPORT | libc::ENOPROTOOPT | libc::EPROTONOSUPPORT) => EXIT_UNSUPPORTED,
        _ => EXIT_SYSTEM_ERROR,
    }
}

/// The subcommand's name if it writes JSON: its `meta` record goes first,
/// before anything can fail, so even a failed run says what ran.
fn json_command(command: &Command) -> Option<&'static str> {
    match command {
        Command::Ping(args) if args.json => Some("ping"),
        Command::Bench(args) if args.json && !args.server && !args.dry_run => Some("bench"),
        Command::Info(args) if args.json => Some("info"),
        Command::Xrc(args) if args.json => Some("xrc"),
        Command::Mr(args) if args.json => Some("mr"),
        Command::Watch(args) if args.json => Some("watch"),
        _ => None,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(command) = json_command(&cli.command) {
        if let Err(err) = cmd::json::Meta::new(command).write(&mut io::stdout()) {
            eprintln!("rrds: {err}");
            return ExitCode::from(EXIT_SYSTEM_ERROR);
        }
    }
    let result = match &cli.command {
        Command::Ping(args) => cmd::ping::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Plot(args) => cmd::plot::run(args),
        Command::Info(args) => cmd::info::run(args),
        Command::Xrc(args) => cmd::xrc::run(args),
        Command::Mr(args) => cmd::mr::run(args),
        Command::Watch(args) => cmd::watch::run(args),
        Command::Completions { shell } => {
            write_completions(*shell, &mut io::stdout());
            Ok(true)
        }
        Command::Manpages { dir } => write_manpages(dir)
            .map(|()| true)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(EXIT_CHECK_FAILED),
        Err(err) => {
            eprintln!("rrds: {err}");
            ExitCode::from(exit_status(&err))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use std::net::IpAddr;
    use std::time::Duration;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(["rrds"].iter().chain(args))
    }

    #[test]
    fn exit_status_tells_missing_rds_from_other_errors() {
        let os = io::Error::from_raw_os_error;
        assert_eq!(exit_status(&os(libc::EAFNOSUPPORT)), 3);
        assert_eq!(exit_status(&cmd::context(os(libc::ENOPROTOOPT), "xrc")), 3);
        assert_eq!(exit_status(&os(libc::EPROTONOSUPPORT)), 3);
        assert_eq!(exit_status(&os(libc::EADDRNOTAVAIL)), 4);
        assert_eq!(exit_status(&io::Error::other("no address")), 4);
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("Exit status:\n  0    success"), "{help}");
    }

    #[test]
    fn meta_goes_first_for_json_runs_only() {
        let name = |argv: &[&str]| json_command(&parse(argv).unwrap().command);
        assert_eq!(name(&["watch", "--json"]), Some("watch"));
        assert_eq!(name(&["xrc", "list", "--json"]), Some("xrc"));
        assert_eq!(name(&["bench", "--json"]), Some("bench"));
        assert_eq!(name(&["watch"]), None);
        // A server prints no results, a dry run a plan.
        assert_eq!(name(&["bench", "--json", "--server"]), None);
        assert_eq!(name(&["bench", "--json", "--dry-run"]), None);
    }

    #[test]
    fn json_is_on_every_command_that_prints() {
        for argv in [
            &["ping", "--json", "127.0.0.1"][..],
            &["info", "--json"],
            &["info", "connections", "--json"],
            &["watch", "--json"],
            &["xrc", "list", "--json"],
            &["xrc", "--json", "create", "-I", "10.0.0.1"],
            &["mr", "--json", "10.0.0.1"],
            &["bench", "--json"],
        ] {
            assert!(parse(argv).is_ok(), "{argv:?}");
        }
    }

    #[test]
    fn xrc_commands_parse() {
        let cli = parse(&["xrc", "watch", "-I", "10.0.0.1", "-c", "2", "17"]).unwrap();
        let Command::Xrc(args) = cli.command else {
            panic!("not xrc");
        };
        let cmd::xrc::XrcCommand::Watch { hold, qp_num } = args.command else {
            panic!("not watch");
        };
        assert_eq!((qp_num, hold.count, hold.duration), (17, Some(2), None));
        let cli = parse(&[
            "xrc", "inject", "-I", "10.0.0.1", "17", "--event", "comm_est",
        ])
        .unwrap();
        let Command::Xrc(args) = cli.command else {
            panic!("not xrc");
        };
        let cmd::xrc::XrcCommand::Inject { event, .. } = args.command else {
            panic!("not inject");
        };
        assert_eq!(event, Some(rrds::xrc::EventKind::CommEst));
        assert!(parse(&[
            "xrc",
            "inject",
            "-I",
            "10.0.0.1",
            "17",
            "--event",
            "target_gone"
        ])
        .is_err());
        assert!(parse(&["xrc", "create"]).is_err());
    }

    #[test]
    fn command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    fn ping(argv: &[&str]) -> Result<cmd::ping::PingArgs, clap::Error> {
        match parse(argv)?.command {
            Command::Ping(args) => Ok(args),
            _ => panic!("not ping"),
        }
    }

    #[test]
    fn ping_takes_count_interval_and_local_address() {
        let args = ping(&[
            "ping",
            "-c",
            "3",
            "-i",
            "0.2",
            "-I",
            "127.0.0.1",
            "127.0.0.1",
        ])
        .unwrap();
        assert_eq!(args.count, Some(3));
        assert_eq!(args.interval, Duration::from_millis(200));
        assert_eq!(args.timeout, Duration::from_secs(1));
        assert_eq!(args.tos, None);
        assert_eq!(args.local, Some("127.0.0.1".parse::<IpAddr>().unwrap()));
        assert_eq!(args.addr, "127.0.0.1");
    }

    #[test]
    fn ping_takes_the_selftests_command_lines() {
        let args = ping(&["ping", "-c", "3", "-i", "0.1", "127.0.0.1"]).unwrap();
        assert_eq!(args.interval, Duration::from_millis(100));
        let args = ping(&[
            "ping",
            "-c",
            "3",
            "-i",
            "0.1",
            "-W",
            "20",
            "-I",
            "fd00:254:5::2",
            "fd00:254:5::1",
        ])
        .unwrap();
        assert_eq!(args.timeout, Duration::from_secs(20));
        assert_eq!(args.addr, "fd00:254:5::1");
        assert_eq!(
            ping(&["ping", "-i", "0.05", "h"]).unwrap().interval,
            Duration::from_millis(50)
        );
    }

    #[test]
    fn ping_runs_until_interrupted_without_a_count() {
        let args = ping(&["ping", "rds-peer.example"]).unwrap();
        assert_eq!(args.count, None);
        assert_eq!(args.interval, Duration::from_secs(1));
        assert_eq!(args.addr, "rds-peer.example");
    }

    #[test]
    fn ping_sets_a_tos() {
        assert_eq!(ping(&["ping", "-Q", "3", "10.0.0.1"]).unwrap().tos, Some(3));
        assert_eq!(
            ping(&["ping", "--tos", "0x20", "10.0.0.1"]).unwrap().tos,
            Some(32)
        );
        assert!(ping(&["ping", "-Q", "300", "10.0.0.1"]).is_err());
    }

    #[test]
    fn ping_needs_an_address_and_a_positive_count() {
        assert!(parse(&["ping"]).is_err());
        assert!(parse(&["ping", ""]).is_err());
        assert!(parse(&["ping", "-c", "0", "127.0.0.1"]).is_err());
        assert!(parse(&["ping", "-W", "0", "127.0.0.1"]).is_err());
        assert!(parse(&["ping", "-i", "-1", "127.0.0.1"]).is_err());
        assert!(parse(&["ping", "-I", "a-name", "127.0.0.1"]).is_err());
    }

    #[test]
    fn bench_defaults() {
        let Command::Bench(args) = parse(&["bench"]).unwrap().command else {
            panic!("not bench");
        };
        assert_eq!(args.addr, "127.0.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(args.peer_addr, None);
        assert_eq!(args.peer_addr(), args.addr);
        assert_eq!(args.transport, cmd::bench::TransportArg::Default);
        assert_eq!(args.sizes, vec![64, 8192]);
        assert_eq!(args.duration, Duration::from_secs(5));
        assert!(!args.until_interrupted());
        assert_eq!(args.runs, None);
        assert_eq!(args.runs(), 3);
        assert_eq!(args.ack_size, None);
        assert!(args.rdma_sizes.is_empty());
        assert_eq!(args.interval, None);
        assert_eq!(args.mode, cmd::bench::Mode::Both);
        assert_eq!(args.depth, 32);
        assert_eq!(args.tasks, 1);
        assert!(!args.server);
        assert_eq!(args.connect, None);
        assert!(!args.verify);
        assert!(!args.json);
        assert_eq!(args.plot, None);
    }

    #[test]
    fn bench_splits_in_server_and_client() {
        let bench = |argv: &[&str]| match parse(argv).map(|cli| cli.command) {
            Ok(Command::Bench(args)) => Ok(args),
            Ok(_) => panic!("not bench"),
            Err(err) => Err(err),
        };
        let server = bench(&["bench", "--server", "--addr", "10.0.0.2", "--port", "4001"]).unwrap();
        assert!(server.server);
        assert_eq!(server.port, 4001);
        assert_eq!(bench(&["bench", "--server"]).unwrap().port, 4000);
        let client = bench(&["bench", "--connect", "10.0.0.2:4000", "--tasks", "4"]).unwrap();
        assert_eq!(client.connect, Some("10.0.0.2:4000".parse().unwrap()));
        assert_eq!(client.tasks, 4);
        // The receiving end is the server's.
        assert_eq!(client.peer_addr(), "10.0.0.2".parse::<IpAddr>().unwrap());
        assert!(bench(&["bench", "--server", "--connect", "10.0.0.2:4000"]).is_err());
        assert!(bench(&["bench", "--server", "--peer-netns", "b"]).is_err());
        assert!(bench(&[
            "bench",
            "--connect",
            "10.0.0.2:4000",
            "--peer-addr",
            "10.0.0.3"
        ])
        .is_err());
        assert!(bench(&["bench", "--connect", "10.0.0.2"]).is_err());
        assert!(bench(&["bench", "--port", "4001"]).is_err());
        assert!(bench(&["bench", "--tasks", "0"]).is_err());
        assert!(bench(&["bench", "--tasks", "65"]).is_err());
    }

    #[test]
    fn bench_plot_takes_a_file() {
        use std::path::PathBuf;
        let cli = parse(&["bench", "--plot", "out/bench.svg", "--json"]).unwrap();
        let Command::Bench(args) = cli.command else {
            panic!("not bench");
        };
        assert_eq!(args.plot, Some(PathBuf::from("out/bench.svg")));
        assert!(args.json);
        assert!(!args.histogram);
        let Command::Bench(args) = parse(&["bench", "--plot=/tmp/b.svg"]).unwrap().command else {
            panic!("not bench");
        };
        assert_eq!(args.plot, Some(PathBuf::from("/tmp/b.svg")));
        assert!(parse(&["bench", "--plot"]).is_err());
        assert!(parse(&["bench", "--plot", ""]).is_err());
    }

    #[test]
    fn bench_takes_the_documented_command_line() {
        let cli = parse(&[
            "bench",
            "--addr",
            "127.0.0.1",
            "--size",
            "64",
            "--size",
            "8192",
            "--size",
            "1m",
            "--duration",
            "5",
            "--runs",
            "3",
            "--mode",
            "latency",
            "--depth",
            "8",
            "--json",
            "--verify",
        ])
        .unwrap();
        let Command::Bench(args) = cli.command else {
            panic!("not bench");
        };
        assert_eq!(args.sizes, vec![64, 8192, 1 << 20]);
        assert_eq!(args.mode, cmd::bench::Mode::Latency);
        assert_eq!(args.depth, 8);
        assert!(args.json && args.verify);
    }

    #[test]
    fn bench_histogram_is_a_flag() {
        let Command::Bench(args) = parse(&["bench", "--mode", "latency", "--histogram"])
            .unwrap()
            .command
        else {
            panic!("not bench");
        };
        assert!(args.histogram);
        assert!(parse(&["bench", "--histogram=yes"]).is_err());
    }

    #[test]
    fn bench_takes_the_ib_command_line() {
        let cli = parse(&[
            "bench",
            "--addr",
            "10.254.9.1",
            "--peer-addr",
            "10.254.9.2",
            "--transport",
            "ib",
            "--size",
            "64",
            "--size",
            "8192",
            "--duration",
            "5",
            "--runs",
            "3",
            "--mode",
            "both",
            "--verify",
            "--json",
        ])
        .unwrap();
        let Command::Bench(args) = cli.command else {
            panic!("not bench");
        };
        assert_eq!(args.addr, "10.254.9.1".parse::<IpAddr>().unwrap());
        assert_eq!(args.peer_addr(), "10.254.9.2".parse::<IpAddr>().unwrap());
        assert_eq!(args.transport, cmd::bench::TransportArg::Ib);
        assert_eq!(args.sizes, vec![64, 8192]);
    }

    #[test]
    fn bench_peer_address_defaults_to_the_address() {
        let Command::Bench(args) = parse(&["bench", "--addr", "::1"]).unwrap().command else {
            panic!("not bench");
        };
        assert_eq!(args.peer_addr(), "::1".parse::<IpAddr>().unwrap());
        let Command::Bench(args) = parse(&["bench", "--peer-addr", "127.0.0.2"])
            .unwrap()
            .command
        else {
            panic!("not bench");
        };
        assert_eq!(args.addr, "127.0.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(args.peer_addr(), "127.0.0.2".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn bench_transports() {
        use cmd::bench::TransportArg;
        for (name, want) in [
            ("ib", TransportArg::Ib),
            ("loop", TransportArg::Loop),
            ("default", TransportArg::Default),
        ] {
            let Command::Bench(args) = parse(&["bench", "--transport", name]).unwrap().command
            else {
                panic!("not bench");
            };
            assert_eq!(args.transport, want);
        }
    }

    #[test]
    fn bench_rejects_bad_values() {
        assert!(parse(&["bench", "--size", "2m"]).is_err());
        assert!(parse(&["bench", "--runs", "0"]).is_err());
        assert!(parse(&["bench", "--depth", "0"]).is_err());
        assert!(parse(&["bench", "--duration", "-1"]).is_err());
        assert!(parse(&["bench", "-T", "nan"]).is_err());
        assert!(parse(&["bench", "-a", "2m"]).is_err());
        assert!(parse(&["bench", "-D", "1048577"]).is_err());
        assert!(parse(&["bench", "--interval", "0"]).is_err());
        assert!(parse(&["bench", "--interval"]).is_err());
        assert!(parse(&["bench", "--mode", "fast"]).is_err());
        assert!(parse(&["bench", "--transport", "tcp"]).is_err());
        assert!(parse(&["bench", "--transport", "loopback"]).is_err());
        assert!(parse(&["bench", "--transport"]).is_err());
        assert!(parse(&["bench", "--peer-addr", "rbench1"]).is_err());
        assert!(parse(&["bench", "--peer-addr"]).is_err());
    }

    fn bench(argv: &[&str]) -> Result<cmd::bench::BenchArgs, clap::Error> {
        match parse(argv)?.command {
            Command::Bench(args) => Ok(args),
            _ => panic!("not bench"),
        }
    }

    #[test]
    fn bench_takes_rds_stress_short_flags() {
        // rds-stress -r ADDR -q 4096 -a 256 -d 16 -t 4 -T 10 -v, and -D.
        let args = bench(&[
            "bench", "-r", "10.0.0.1", "-q", "4096", "-a", "256", "-d", "16", "-t", "4", "-T",
            "10", "-v",
        ])
        .unwrap();
        assert_eq!(args.addr, "10.0.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(args.sizes, vec![4096]);
        assert_eq!(args.ack_size, Some(256));
        assert_eq!(args.depth, 16);
        assert_eq!(args.tasks, 4);
        assert_eq!(args.duration, Duration::from_secs(10));
        assert!(args.verify);
        assert_eq!(args.check(), Ok(()));
        // -q repeats as --size does, and takes k and m.
        let args = bench(&["bench", "-q", "64", "-q", "1k", "--size", "1m"]).unwrap();
        assert_eq!(args.sizes, vec![64, 1024, 1 << 20]);
        let args = bench(&[
            "bench", "--mode", "rdma", "-D", "64k", "-D", "1m", "-q", "8",
        ])
        .unwrap();
        assert_eq!(args.rdma_sizes, vec![65536, 1 << 20]);
        assert_eq!(args.check(), Ok(()));
    }

    #[test]
    fn bench_rdma_size_sizes_rdma_runs_only() {
        use cmd::bench::Kind;
        let args = bench(&["bench", "--mode", "register", "-D", "4k", "-q", "64"]).unwrap();
        assert_eq!(args.sizes_of(Kind::Register), &[4096]);
        assert_eq!(args.sizes_of(Kind::RdmaWrite), &[4096]);
        assert_eq!(args.sizes_of(Kind::Rate), &[64]);
        // Without -D, RDMA runs take --size.
        let args = bench(&["bench", "--mode", "rdma-read", "-q", "8k"]).unwrap();
        assert_eq!(args.sizes_of(Kind::RdmaRead), &[8192]);
        // -D with no RDMA run to size is refused, not ignored.
        let err = bench(&["bench", "-D", "64k"]).unwrap().check().unwrap_err();
        assert!(err.contains("--mode both has none"), "{err}");
        assert!(bench(&["bench", "--mode", "rate", "-D", "64k"])
            .unwrap()
            .check()
            .is_err());
    }

    #[test]
    fn bench_ack_size_sizes_the_latency_echo() {
        for mode in ["latency", "both"] {
            let args = bench(&["bench", "--mode", mode, "-a", "0"]).unwrap();
            assert_eq!(args.ack_size, Some(0));
            assert_eq!(args.check(), Ok(()), "{mode}");
        }
        let args = bench(&["bench", "--mode", "rate", "--ack-size", "8"]).unwrap();
        let err = args.check().unwrap_err();
        assert!(err.contains("--mode rate has none"), "{err}");
    }

    #[test]
    fn bench_runs_until_interrupted_with_duration_0() {
        let args = bench(&["bench", "-T", "0", "--mode", "rate", "-q", "1024"]).unwrap();
        assert!(args.until_interrupted());
        assert_eq!(args.duration, Duration::ZERO);
        // One run unless told otherwise.
        assert_eq!(args.runs(), 1);
        assert_eq!(args.check(), Ok(()));
        let args = bench(&[
            "bench",
            "--duration",
            "0",
            "--mode",
            "rdma-write",
            "-D",
            "1m",
        ])
        .unwrap();
        assert_eq!(args.check(), Ok(()));
        let args = bench(&[
            "bench", "-T", "0", "--mode", "latency", "-q", "8", "--runs", "1",
        ]);
        assert_eq!(args.unwrap().check(), Ok(()));
        // One measurement of one size only: Ctrl-C ends the benchmark.
        for argv in [
            &["bench", "-T", "0"][..],
            &["bench", "-T", "0", "--mode", "both", "-q", "64"],
            &["bench", "-T", "0", "--mode", "rdma", "-q", "64"],
            &["bench", "-T", "0", "--mode", "rate"],
            &[
                "bench", "-T", "0", "--mode", "rate", "-q", "64", "--runs", "2",
            ],
            &[
                "bench", "-T", "0", "--mode", "register", "-D", "4k", "-D", "8k",
            ],
            &[
                "bench",
                "-T",
                "0",
                "--mode",
                "rate",
                "-q",
                "64",
                "--connect",
                "10.0.0.2:4000",
            ],
        ] {
            let err = bench(argv).unwrap().check().unwrap_err();
            assert!(err.starts_with("--duration 0"), "{argv:?}: {err}");
        }
        // The default duration stays 5 s: scripts and the selftests rely on it.
        let args = bench(&["bench", "--mode", "rate"]).unwrap();
        assert_eq!(args.duration, Duration::from_secs(5));
        assert_eq!(args.runs(), 3);
        assert_eq!(bench(&["bench", "--runs", "7"]).unwrap().runs(), 7);
    }

    #[test]
    fn bench_interval_takes_seconds() {
        let args = bench(&["bench", "--interval", "1"]).unwrap();
        assert_eq!(args.interval, Some(Duration::from_secs(1)));
        let args = bench(&["bench", "--interval=0.5", "--json"]).unwrap();
        assert_eq!(args.interval, Some(Duration::from_millis(500)));
        assert!(parse(&["bench", "--interval", "-1"]).is_err());
        assert!(parse(&["bench", "--interval", "1s"]).is_err());
        // The server measures nothing itself.
        assert!(parse(&["bench", "--server", "--interval", "1"]).is_err());
    }

    #[test]
    fn plot_takes_files_and_an_output() {
        use std::path::PathBuf;
        let Command::Plot(args) = parse(&["plot", "rrds.json", "rds.json", "-o", "cmp.svg"])
            .unwrap()
            .command
        else {
            panic!("not plot");
        };
        assert_eq!(
            args.files,
            [PathBuf::from("rrds.json"), PathBuf::from("rds.json")]
        );
        assert_eq!(args.output, Some(PathBuf::from("cmp.svg")));
        let Command::Plot(args) = parse(&["plot", "-"]).unwrap().command else {
            panic!("not plot");
        };
        assert_eq!((args.files, args.output), (vec![PathBuf::from("-")], None));
        assert!(parse(&["plot"]).is_err());
        assert!(parse(&["plot", "-o", "x.svg"]).is_err());
        assert!(parse(&["plot", ""]).is_err());
        assert!(parse(&["plot", "a.json", "--output"]).is_err());
    }

    #[test]
    fn info_names_a_table() {
        use cmd::info::Table;
        let Command::Info(args) = parse(&["info", "sockets"]).unwrap().command else {
            panic!("not info");
        };
        assert_eq!(args.table, Some(Table::Sockets));
        for (name, want) in [
            ("counters", Table::Counters),
            ("connections", Table::Connections),
            ("send-messages", Table::SendMessages),
            ("retrans-messages", Table::RetransMessages),
            ("recv-messages", Table::RecvMessages),
            ("ib-connections", Table::IbConnections),
            ("xrc-targets", Table::XrcTargets),
        ] {
            let Command::Info(args) = parse(&["info", name]).unwrap().command else {
                panic!("not info");
            };
            assert_eq!(args.table, Some(want), "{name}");
        }
        assert!(parse(&["info", "flows"]).is_err());
        assert!(parse(&["info", "send_messages"]).is_err());
        // No table: all of them.
        let Command::Info(args) = parse(&["info"]).unwrap().command else {
            panic!("not info");
        };
        assert_eq!(args.table, None);
        assert!(parse(&["info", "counters", "sockets"]).is_err());
    }

    /// The user-facing subcommands, which completions and pages must cover.
    const SUBCOMMANDS: [&str; 7] = ["ping", "bench", "plot", "info", "xrc", "mr", "watch"];

    #[test]
    fn completions_cover_every_subcommand() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let mut out = Vec::new();
            write_completions(shell, &mut out);
            let script = String::from_utf8(out).unwrap();
            for sub in SUBCOMMANDS {
                assert!(script.contains(sub), "{shell}: no {sub}");
            }
            // Options of a subcommand, not only the names.
            assert!(script.contains("interval"), "{shell}: no ping --interval");
        }
        assert!(parse(&["completions", "bash"]).is_ok());
        assert!(parse(&["completions", "tcsh"]).is_err());
    }

    #[test]
    fn manpages_are_written_for_every_subcommand() {
        let dir = std::env::temp_dir().join(format!("rrds-man-{}", std::process::id()));
        write_manpages(&dir).unwrap();
        let page = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
        assert!(page("rrds.1").starts_with(".ie"), "not roff");
        assert!(page("rrds.1").contains(".TH rrds 1"));
        for sub in SUBCOMMANDS {
            let text = page(&format!("rrds-{sub}.1"));
            assert!(text.contains(&format!(".TH rrds-{sub} 1")), "{sub}");
        }
        assert!(page("rrds-ping.1").contains("interval"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

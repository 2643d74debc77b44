//! `lockstep bench group`: ordering throughput and latency of three members over
//! loopback TCP, for several writeset sizes, with and without fsync of the cache.
//! A benchmark, not a test: it prints figures and asserts nothing beyond success.

use clap::{Args, ValueEnum};
use lockstep_group::{Genesis, GroupConfig, GroupNode, MemberId, MemberInfo, NodeConfig, SubmitError};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// Flow-control thresholds of the benchmark's policy, in queued events per member.
const FC_HIGH: usize = 256;
const FC_LOW: usize = 128;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Fsync {
    On,
    Off,
    Both,
}

#[derive(Args)]
pub struct BenchArgs {
    /// Writesets ordered per (size, fsync) case.
    #[arg(long, default_value_t = 5000)]
    writesets: u64,
    /// Writeset sizes in bytes.
    #[arg(long, value_delimiter = ',', default_value = "1024,65536")]
    sizes: Vec<usize>,
    /// Submitting threads, spread over the three members.
    #[arg(long, default_value_t = 24)]
    clients: u64,
    #[arg(long, value_enum, default_value = "both")]
    fsync: Fsync,
    /// Where the members keep their caches (removed afterwards).
    #[arg(long, default_value = "/tmp/lockstep-bench-group")]
    dir: String,
}

pub fn run(args: BenchArgs) {
    let modes: &[bool] = match args.fsync {
        Fsync::On => &[true],
        Fsync::Off => &[false],
        Fsync::Both => &[false, true],
    };
    println!("| writeset | fsync | ordered | failed | writesets/s | MiB/s | p50 ms | p99 ms |");
    println!("|---:|:---:|---:|---:|---:|---:|---:|---:|");
    for &fsync in modes {
        for &size in &args.sizes {
            match run_case(&args, size, fsync) {
                Ok(line) => println!("{line}"),
                Err(e) => {
                    eprintln!("lockstep bench: {e}");
                    std::process::exit(1);
                }
            }
        }
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn start_cluster(dir: &Path, fsync: bool) -> Result<Vec<Arc<GroupNode>>, String> {
    let ports = (0..3).map(|_| free_port()).collect::<Result<Vec<_>, _>>();
    let ports = ports.map_err(|e| e.to_string())?;
    let peers: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let mut nodes = Vec::new();
    for (i, address) in peers.iter().enumerate() {
        let id = MemberId(i as u64 + 1);
        let config = NodeConfig {
            group: GroupConfig::new("bench"),
            info: MemberInfo {
                id,
                name: format!("bench{}", id.0),
                address: address.clone(),
                incoming_address: String::new(),
                incarnation: 0,
                arbitrator: false,
                weight: 1,
                segment: 0,
            },
            listen: address.clone(),
            data_dir: dir.join(format!("member{}", id.0)),
            fsync,
            bootstrap: (i == 0).then(Genesis::default),
            peers: peers.clone(),
            resume_after: 0,
            application_position: 0,
        };
        nodes.push(Arc::new(GroupNode::start(config).map_err(|e| e.to_string())?));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while !nodes.iter().all(|n| n.status().primary && n.status().view.members.len() == 3) {
        if Instant::now() > deadline {
            return Err("the three members did not form a primary component".into());
        }
        thread::sleep(Duration::from_millis(20));
    }
    Ok(nodes)
}

fn run_case(args: &BenchArgs, size: usize, fsync: bool) -> Result<String, String> {
    let dir = Path::new(&args.dir).join(format!("{size}-{fsync}"));
    let _ = std::fs::remove_dir_all(&dir);
    let nodes = start_cluster(&dir, fsync)?;
    // Every member's application consumes its deliveries, as a database would.
    let stop = Arc::new(AtomicBool::new(false));
    let consumers: Vec<_> = nodes
        .iter()
        .map(|n| {
            let (n, stop) = (n.clone(), stop.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = n.recv_delivered(Duration::from_millis(50));
                }
            })
        })
        .collect();
    // A simple flow-control policy on top of the group's mechanism: a member pauses its
    // senders while any member's receive queue exceeds FC_HIGH, until all are below FC_LOW.
    let flow_control: Vec<_> = nodes
        .iter()
        .map(|n| {
            let (n, stop) = (n.clone(), stop.clone());
            thread::spawn(move || {
                let mut paused = false;
                while !stop.load(Ordering::Relaxed) {
                    let longest = n.queue_lengths().into_iter().map(|(_, len)| len).max().unwrap_or(0);
                    if !paused && longest > FC_HIGH {
                        n.pause_senders();
                        paused = true;
                    } else if paused && longest < FC_LOW {
                        n.resume_senders();
                        paused = false;
                    }
                    thread::sleep(Duration::from_millis(1));
                }
            })
        })
        .collect();
    let issued = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let clients: Vec<_> = (0..args.clients)
        .map(|c| {
            let node = nodes[(c % 3) as usize].clone();
            let (issued, total) = (issued.clone(), args.writesets);
            thread::spawn(move || {
                let (mut latencies, mut failed) = (Vec::new(), BTreeMap::<String, u64>::new());
                let payload = vec![(c % 251) as u8; size];
                while issued.fetch_add(1, Ordering::Relaxed) < total {
                    let t = Instant::now();
                    loop {
                        match node.submit(payload.clone()) {
                            Ok(_) => latencies.push(t.elapsed()),
                            Err(SubmitError::Paused) => {
                                thread::sleep(Duration::from_micros(500));
                                continue;
                            }
                            Err(e) => *failed.entry(format!("{e:?}")).or_default() += 1,
                        }
                        break;
                    }
                }
                (latencies, failed)
            })
        })
        .collect();
    let (mut latencies, mut reasons) = (Vec::new(), BTreeMap::<String, u64>::new());
    for c in clients {
        let (l, f) = c.join().map_err(|_| "client panicked".to_string())?;
        latencies.extend(l);
        for (reason, n) in f {
            *reasons.entry(reason).or_default() += n;
        }
    }
    let failed: u64 = reasons.values().sum();
    if failed > 0 {
        // Why, on stderr: the table stays a table.
        eprintln!("{size} bytes, fsync {fsync}: failed {reasons:?}");
    }
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for t in consumers.into_iter().chain(flow_control) {
        let _ = t.join();
    }
    drop(nodes);
    let _ = std::fs::remove_dir_all(&dir);
    latencies.sort_unstable();
    let pct = |p: f64| {
        let i = ((latencies.len() as f64 * p) as usize).min(latencies.len() - 1);
        latencies[i].as_secs_f64() * 1000.0
    };
    if latencies.is_empty() {
        return Err(format!("no writeset ordered ({failed} failed)"));
    }
    let n = latencies.len() as f64;
    Ok(format!(
        "| {} KiB | {} | {} | {failed} | {:.0} | {:.1} | {:.2} | {:.2} |",
        size / 1024,
        if fsync { "on" } else { "off" },
        latencies.len(),
        n / elapsed,
        n * size as f64 / elapsed / (1 << 20) as f64,
        pct(0.50),
        pct(0.99)
    ))
}

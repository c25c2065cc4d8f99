//! In-process fuzzing: every harness of `ropescope::fuzz_harness` driven by its seeded mutator, as an ordinary
//! test (CI has no nightly toolchain for cargo-fuzz). Each case must return `Ok` or an error with a message:
//! never panic, never run longer than a time budget, never allocate more than [`ALLOC_FACTOR`] times its input
//! plus [`ALLOC_SLACK`] (measured by the counting allocator of this test binary).
//!
//! Environment:
//! - `ROPESCOPE_FUZZ_CASES=N`: cases per target (default [`DEFAULT_CASES`]); millions on demand, best with
//!   `--release`.
//! - `ROPESCOPE_FUZZ_SEED=S`: seed of the mutator (default 0); a failure names the seed and case number and
//!   saves the input under `target/fuzz-failures/`.
//! - `ROPESCOPE_FUZZ_CASE_SECONDS=T`: the per-case budget before a case counts as a hang (default 10 s: cases
//!   take micro- to milliseconds, so only a real hang comes near it).
//! - `ROPESCOPE_FUZZ_WRITE_CORPUS=DIR`: also write every seed to `DIR/<target>/`, the corpus layout of
//!   `cargo fuzz run` (see README, "Fuzzing").

use ropescope::fuzz_harness::mutate::Mutator;
use ropescope::fuzz_harness::{seeds, Target, PART_SEPARATOR};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, Once};
use std::time::{Duration, Instant};

/// Cases per target when `ROPESCOPE_FUZZ_CASES` is not set: the whole test stays well under a minute in a
/// debug build on two cores.
const DEFAULT_CASES: u64 = 5000;
/// A case may allocate at most this many times the length of its input ...
const ALLOC_FACTOR: usize = 32;
/// ... plus this much: the fixed cost of a case whatever its input (the tokenizer's compiled split regex,
/// rayon's first worker threads, hash-map start sizes).
const ALLOC_SLACK: usize = 8 << 20;
/// Inputs the mutator produces are cut to this length.
const MAX_INPUT: usize = 1 << 20;
/// Mutated inputs that parsed are kept for further mutation, up to this many per target.
const POOL_LIMIT: usize = 512;
/// How much of a real model file is taken as a seed: its header, up to and into the vocabulary.
const REAL_HEADER_BYTES: usize = 64 << 10;

/// Bytes currently allocated, and the most allocated since the last reset.
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting live bytes and their peak.
struct Counting;

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to `System`; the counters only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocation counting is global, so the targets run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());
/// Milliseconds since [`epoch`] at which the running case started (0 when none runs).
static CASE_START_MS: AtomicU64 = AtomicU64::new(0);
/// The running case's target and input, for the watchdog to save when it hangs.
static CURRENT: Mutex<(String, Vec<u8>)> = Mutex::new((String::new(), Vec::new()));

fn epoch() -> Instant {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *START.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    epoch().elapsed().as_millis() as u64 + 1
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v} is not a number"))
        })
        .unwrap_or(default)
}

fn failures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-failures")
}

/// Saves a failing input and returns its path.
fn save_failure(target: &str, data: &[u8]) -> PathBuf {
    let dir = failures_dir();
    std::fs::create_dir_all(&dir).expect("create target/fuzz-failures");
    let hash = data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let path = dir.join(format!("{target}-{hash:016x}.bin"));
    std::fs::write(&path, data).expect("write the failing input");
    path
}

/// Starts the watchdog once: a case running past the budget is saved and the process aborted, since a hung
/// case cannot be interrupted from inside.
fn start_watchdog(budget: Duration) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(100));
            let start = CASE_START_MS.load(Ordering::Relaxed);
            if start != 0 && now_ms().saturating_sub(start) > budget.as_millis() as u64 {
                let (target, data) = CURRENT.lock().map(|c| c.clone()).unwrap_or_default();
                let path = save_failure(&target, &data);
                eprintln!(
                    "fuzz: a {target} case ran longer than {budget:?}; input saved to {}",
                    path.display()
                );
                std::process::abort();
            }
        });
    });
}

/// Seeds from files: the converted models, 64 KiB headers of the real models when downloaded, the example
/// scan's JSON and `.npy` files, and the example scan as a whole directory (also with a shard record of it).
fn file_seeds(target: Target) -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let files_in = |dir: &Path, ext: &str| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.retain(|p| p.extension().is_some_and(|e| e == ext));
        v.sort();
        v
    };
    let example = root.join("fixtures/scan/example");
    match target {
        Target::Npy => {
            out.extend(
                files_in(&example, "npy")
                    .iter()
                    .map(|p| std::fs::read(p).unwrap()),
            );
        }
        Target::ScanJson => {
            out.extend(
                files_in(&example, "json")
                    .iter()
                    .map(|p| std::fs::read(p).unwrap()),
            );
        }
        Target::ScanDir => {
            let file = |name: &str| std::fs::read(example.join(name)).unwrap();
            let scan = [
                file("meta.json"),
                file("summary.json"),
                file("ablation.json"),
            ];
            let mut meta: serde_json::Value = serde_json::from_slice(&scan[0]).unwrap();
            meta["complete"] = false.into();
            let tasks: Vec<serde_json::Value> = ["natural/0", "natural/1", "random/0", "random/1"]
                .iter()
                .map(|t| serde_json::json!({"task": t, "seconds": 0.5}))
                .collect();
            let shard = serde_json::json!({
                "shard_format_version": 1, "shard": 1, "of": 2, "meta": meta, "tasks": tasks, "complete": true
            });
            let shard = serde_json::to_vec(&shard).unwrap();
            out.push(scan.join(PART_SEPARATOR));
            out.push(
                [&scan[..], &[shard, file("prompts.json")]]
                    .concat()
                    .join(PART_SEPARATOR),
            );
        }
        Target::NpyIds | Target::DivergeDump => {}
        _ => {
            let mut converted: Vec<PathBuf> = std::fs::read_dir(root.join("fixtures/converted"))
                .map(|d| d.flatten().map(|e| e.path().join("model.gguf")).collect())
                .unwrap_or_default();
            converted.retain(|p| p.exists());
            converted.sort();
            out.extend(converted.iter().map(|p| std::fs::read(p).unwrap()));
            let cache = std::env::var_os("ROPESCOPE_CACHE")
                .map(PathBuf::from)
                .or_else(|| {
                    std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/ropescope"))
                })
                .map(|c| c.join("models"));
            for model in cache.iter().flat_map(|c| files_in(c, "gguf")) {
                use std::io::Read;
                let mut head = Vec::new();
                std::fs::File::open(&model)
                    .and_then(|f| f.take(REAL_HEADER_BYTES as u64).read_to_end(&mut head))
                    .expect("read a real model's header");
                out.push(head);
            }
        }
    }
    out
}

/// What a run of one target saw.
#[derive(Debug, Default)]
struct Stats {
    seeds: u64,
    cases: u64,
    ok: u64,
    /// Largest peak allocation of one case, bytes.
    largest_peak: usize,
    /// Largest peak allocation over input length, among inputs of at least 4 KiB (below, the fixed cost of a
    /// case dominates).
    largest_ratio: f64,
}

/// Runs `target` on its seeds and on `cases` mutated inputs, failing on the first panic or over-allocation.
fn fuzz(target: Target) -> Stats {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cases = env_u64("ROPESCOPE_FUZZ_CASES", DEFAULT_CASES);
    let seed = env_u64("ROPESCOPE_FUZZ_SEED", 0);
    start_watchdog(Duration::from_secs(env_u64(
        "ROPESCOPE_FUZZ_CASE_SECONDS",
        10,
    )));
    let mut pool: Vec<Vec<u8>> = seeds::synthetic(target);
    pool.extend(file_seeds(target));
    if let Some(dir) = std::env::var_os("ROPESCOPE_FUZZ_WRITE_CORPUS") {
        let dir = Path::new(&dir).join(target.name());
        std::fs::create_dir_all(&dir).expect("create the corpus directory");
        for (i, s) in pool.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i:03}")), s).expect("write a seed");
        }
    }
    let n_seeds = pool.len();
    let mut mutator = Mutator::new(target, seed ^ target as u64);
    let mut stats = Stats {
        seeds: n_seeds as u64,
        ..Stats::default()
    };
    let started = Instant::now();
    for case in 0..n_seeds as u64 + cases {
        let input = if (case as usize) < n_seeds {
            pool[case as usize].clone()
        } else {
            let mut input = pool[(case as usize * 7919) % pool.len()].clone();
            mutator.mutate(&mut input, &pool, MAX_INPUT);
            input
        };
        *CURRENT.lock().unwrap() = (target.name().to_string(), input.clone());
        let base = LIVE.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        CASE_START_MS.store(now_ms(), Ordering::Relaxed);
        let result = std::panic::catch_unwind(|| target.run(&input));
        CASE_START_MS.store(0, Ordering::Relaxed);
        let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
        let replay = || {
            let path = save_failure(target.name(), &input);
            format!(
                "{} case {case} (ROPESCOPE_FUZZ_SEED={seed}), input of {} bytes saved to {}",
                target.name(),
                input.len(),
                path.display()
            )
        };
        let parsed = match result {
            Err(_) => panic!("panic in {}", replay()),
            Ok(r) => r.is_ok(),
        };
        let bound = ALLOC_FACTOR * input.len() + ALLOC_SLACK;
        assert!(
            peak <= bound,
            "{} allocated {peak} bytes, over the bound {bound}",
            replay()
        );
        stats.cases += 1;
        stats.largest_peak = stats.largest_peak.max(peak);
        if input.len() >= 4096 {
            stats.largest_ratio = stats.largest_ratio.max(peak as f64 / input.len() as f64);
        }
        if parsed {
            stats.ok += 1;
            if case as usize >= n_seeds {
                if pool.len() < POOL_LIMIT {
                    pool.push(input);
                } else {
                    let i = n_seeds + (case as usize % (POOL_LIMIT - n_seeds));
                    pool[i] = input;
                }
            }
        }
    }
    eprintln!(
        "fuzz {}: {} cases ({} seeds), {} parsed, largest allocation {} KiB, {:.1} x input (inputs >= 4 KiB), {:.1} s",
        target.name(),
        stats.cases,
        n_seeds,
        stats.ok,
        stats.largest_peak >> 10,
        stats.largest_ratio,
        started.elapsed().as_secs_f64()
    );
    stats
}

/// Every target runs all its cases; the seeds alone already reach a successful parse. (Nothing here allocates
/// outside the lock that `fuzz` holds, which would count against another target's case.)
fn check(target: Target) {
    let stats = fuzz(target);
    assert_eq!(
        stats.cases,
        stats.seeds + env_u64("ROPESCOPE_FUZZ_CASES", DEFAULT_CASES)
    );
    assert!(stats.ok > 0, "no input of {} parsed", target.name());
}

#[test]
fn gguf_file() {
    check(Target::GgufFile);
}

#[test]
fn gguf_directory() {
    check(Target::GgufDirectory);
}

#[test]
fn resolve() {
    check(Target::Resolve);
}

#[test]
fn tokenizer() {
    check(Target::Tokenizer);
}

#[test]
fn npy() {
    check(Target::Npy);
}

#[test]
fn scan_json() {
    check(Target::ScanJson);
}

#[test]
fn scan_dir() {
    check(Target::ScanDir);
}

#[test]
fn npy_ids() {
    check(Target::NpyIds);
}

#[test]
fn diverge_dump() {
    check(Target::DivergeDump);
}

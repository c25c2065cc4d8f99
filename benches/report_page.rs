//! How heavy the report page is: its bytes, and how soon headless Chromium paints it and finishes loading it from
//! `file://`, by Chromium's own clock.
//!
//! ```sh
//! cargo bench --bench report_page                                   # a synthetic scan of SmolLM2's shape
//! ROPESCOPE_REPORT_DIR=scan-out cargo bench --bench report_page     # a real scan (its report.html is rewritten)
//! ROPESCOPE_REPORT_PAGE=old/report.html cargo bench --bench report_page  # a page as it is (e.g. an older one)
//! ```
//!
//! The page (copied, with a timing script first in its `<head>`, the only change: see
//! `tests/support/src/report/browser.rs`) is loaded `ROPESCOPE_BENCH_RUNS` times (default 5) in a fresh profile
//! each time, with `--dump-dom`; the script writes the page's `first-paint` and `first-contentful-paint`
//! (`PerformanceObserver('paint')`), DOMContentLoaded and load event times into the DOM, from navigation start.
//! The medians are printed, for the page as opened and opened at a head card's fragment (that card drawn during
//! load), beside the wall time of the whole Chromium run less that of an empty page. The target (the default
//! SmolLM2 report ≤ 5 MB, first paint ≤ 2 s) is checked by reading this output, not by a timed test.

use ropescope_test_support::report::browser::{
    chromium, file_url, run, timings, with_timing_probe,
};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Page loads per measurement (median reported).
const DEFAULT_RUNS: usize = 5;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median timings (seconds by name) and median wall seconds of `runs` loads of `url`.
fn measure(chromium: &Path, work: &Path, url: &str, runs: usize) -> (Vec<(String, f64)>, f64) {
    let mut all: Vec<Vec<(String, f64)>> = Vec::new();
    let mut wall = Vec::new();
    for k in 0..runs {
        let profile = work.join(format!("profile-{k}"));
        let start = Instant::now();
        let (dom, _) = run(chromium, &profile, url, &["--dump-dom".into()]);
        wall.push(start.elapsed().as_secs_f64());
        all.push(timings(&dom));
        let _ = std::fs::remove_dir_all(&profile);
    }
    let names: Vec<String> = all[0].iter().map(|(k, _)| k.clone()).collect();
    let medians = names
        .into_iter()
        .map(|name| {
            let values = all
                .iter()
                .filter_map(|t| t.iter().find(|(k, _)| *k == name).map(|p| p.1))
                .collect();
            (name, median(values))
        })
        .collect();
    (medians, median(wall))
}

fn print(what: &str, (t, wall): &(Vec<(String, f64)>, f64), blank_wall: f64) {
    let get = |name: &str| {
        t.iter()
            .find(|(k, _)| k == name)
            .map_or("–".into(), |p| format!("{:.3} s", p.1))
    };
    println!(
        "{what}: first paint {}, first contentful paint {}, DOMContentLoaded {}, load {}; \
         Chromium run {:.2} s beyond an empty page",
        get("first-paint"),
        get("first-contentful-paint"),
        get("dom_content_loaded"),
        get("load"),
        wall - blank_wall
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing to run for.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let Some(chromium) = chromium() else { return };
    let runs = std::env::var("ROPESCOPE_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_RUNS)
        .max(1);
    let work = tempfile::tempdir().unwrap();
    let synthetic = work.path().join("scan");
    let page: PathBuf = match (
        std::env::var_os("ROPESCOPE_REPORT_PAGE"),
        std::env::var_os("ROPESCOPE_REPORT_DIR"),
    ) {
        (Some(page), _) => PathBuf::from(page),
        (None, Some(dir)) => ropescope::report::write_report(Path::new(&dir)).unwrap(),
        (None, None) => {
            ropescope_test_support::report::write_scan(
                &synthetic,
                &ropescope_test_support::report::SMOLLM2,
            );
            let start = Instant::now();
            let page = ropescope::report::write_report(&synthetic).unwrap();
            println!(
                "synthetic scan of SmolLM2's shape: report written in {:.2} s",
                start.elapsed().as_secs_f64()
            );
            page
        }
    };
    let html = std::fs::read_to_string(&page).unwrap();
    let heads = html.matches("<section class=\"head\"").count();
    println!(
        "page {}: {} bytes ({:.2} MB), {heads} heads, {} bytes per head",
        page.display(),
        html.len(),
        html.len() as f64 / 1e6,
        html.len() / heads.max(1)
    );
    let probed = work.path().join("probed.html");
    std::fs::write(&probed, with_timing_probe(&html)).unwrap();
    let blank = work.path().join("blank.html");
    std::fs::write(
        &blank,
        with_timing_probe(
            "<!DOCTYPE html><html><head><meta charset=\"utf-8\"/></head><body></body></html>",
        ),
    )
    .unwrap();
    measure(&chromium, work.path(), &file_url(&blank, None), 1); // the first start pays for disk caches
    let (_, blank_wall) = measure(&chromium, work.path(), &file_url(&blank, None), runs);
    println!("median of {runs} loads, times from navigation start:");
    let opened = measure(&chromium, work.path(), &file_url(&probed, None), runs);
    print("page", &opened, blank_wall);
    // A card in the middle of the page, opened by its fragment as a grid cell opens it.
    let ids: Vec<&str> = html
        .split("<section class=\"head\" id=\"")
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .collect();
    if let Some(id) = ids.get(ids.len() / 2) {
        let card = measure(&chromium, work.path(), &file_url(&probed, Some(id)), runs);
        print(&format!("page#{id}"), &card, blank_wall);
    }
}

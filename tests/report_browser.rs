//! The report as a user sees it: headless Chromium opens `report.html` from disk, with networking off, takes
//! a screenshot and dumps the rendered DOM. The page must render without console errors and show the grid
//! and the heatmaps. Chromium is the Debian package `chromium` (`fixtures/chromium.sh` installs it); without
//! it this test fails, unless `ROPESCOPE_SKIP_BROWSER=1`, when it says it skipped.

mod report_support;

use report_support::example;
use std::path::{Path, PathBuf};
use std::process::Command;

const CHROMIUM: &str = "/usr/bin/chromium";

/// Chromium's path, or `None` when the test is to be skipped; panics with the fix when Chromium is missing.
fn chromium() -> Option<PathBuf> {
    if std::env::var("ROPESCOPE_SKIP_BROWSER").as_deref() == Ok("1") {
        eprintln!("report_browser: skipped (ROPESCOPE_SKIP_BROWSER=1)");
        return None;
    }
    let path = PathBuf::from(CHROMIUM);
    assert!(
        path.exists(),
        "{CHROMIUM} is missing: run fixtures/chromium.sh (or `apt-get install -y chromium`), \
         or set ROPESCOPE_SKIP_BROWSER=1 to skip this test"
    );
    Some(path)
}

/// Runs Chromium headless on `page` with `extra` arguments; returns (stdout, stderr).
fn run(chromium: &Path, profile: &Path, page: &Path, extra: &[String]) -> (String, String) {
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1400,1000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Console messages in Chromium's log: the page has no script, so any message (an uncaught error is logged
/// as `INFO:CONSOLE … "Uncaught …"`) is a failure. Chromium's own complaints (dbus in a container) are not.
fn console_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect()
}

#[test]
fn report_renders_in_headless_chromium() {
    let Some(chromium) = chromium() else { return };
    let dir = example();
    let page = ropescope::report::write_report(dir.path()).unwrap();
    let page = page.canonicalize().unwrap();
    let work = tempfile::tempdir().unwrap();
    let shot = work.path().join("report.png");
    let (_, log) = run(
        &chromium,
        &work.path().join("profile-shot"),
        &page,
        &[format!("--screenshot={}", shot.display())],
    );
    assert!(
        console_errors(&log).is_empty(),
        "console errors: {:?}",
        console_errors(&log)
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(
        &png[16..24],
        &[0, 0, 5, 0x78, 0, 0, 3, 0xe8],
        "1400×1000 screenshot"
    );
    // A blank page compresses to a few kilobytes; the grid and heatmaps do not.
    assert!(
        png.len() > 30_000,
        "screenshot is only {} bytes: blank page?",
        png.len()
    );

    let (dom, log) = run(
        &chromium,
        &work.path().join("profile-dom"),
        &page,
        &["--dump-dom".into()],
    );
    assert!(
        console_errors(&log).is_empty(),
        "console errors: {:?}",
        console_errors(&log)
    );
    assert!(
        dom.contains("<table id=\"grid\">"),
        "grid missing from the rendered DOM"
    );
    assert!(dom.contains("href=\"#L1H0\""), "grid links missing");
    assert!(
        dom.contains("<figure id=\"L0H0_attention_natural\"><svg"),
        "heatmap missing"
    );
    assert!(
        dom.contains("data:image/png;base64,"),
        "heatmap raster missing"
    );
    if let Ok(keep) = std::env::var("ROPESCOPE_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

/// Seconds Chromium takes to load, lay out and dump `page`, less what it takes for an empty page: the page's
/// own load and render time (its first paint comes before the dump).
fn render_seconds(chromium: &Path, work: &Path, page: &Path) -> f64 {
    let blank = work.join("blank.html");
    std::fs::write(&blank, "<!DOCTYPE html><html><body></body></html>").unwrap();
    let time = |p: &Path, profile: &str| {
        let start = std::time::Instant::now();
        run(chromium, &work.join(profile), p, &["--dump-dom".into()]);
        start.elapsed().as_secs_f64()
    };
    time(&blank, "warm"); // the first start pays for disk caches
    let base = time(&blank, "blank");
    time(page, "page") - base
}

#[test]
fn rendered_headlines_equal_the_json_files() {
    let Some(chromium) = chromium() else { return };
    // The example, or a real scan directory given by ROPESCOPE_REPORT_DIR (its report is rewritten).
    let example_dir = example();
    let dir = std::env::var_os("ROPESCOPE_REPORT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| example_dir.path().to_path_buf());
    let page = ropescope::report::write_report(&dir)
        .unwrap()
        .canonicalize()
        .unwrap();
    let work = tempfile::tempdir().unwrap();
    let (dom, log) = run(
        &chromium,
        &work.path().join("profile"),
        &page,
        &["--dump-dom".into()],
    );
    assert!(
        console_errors(&log).is_empty(),
        "{:?}",
        console_errors(&log)
    );
    let checked = report_support::headlines::check(&dom, &dir);
    assert!(checked >= 8, "{checked} numbers checked");
    let seconds = render_seconds(&chromium, work.path(), &page);
    let size = std::fs::metadata(&page).unwrap().len();
    eprintln!(
        "report {} bytes, load and render {seconds:.2} s beyond an empty page",
        size
    );
    assert!(seconds <= 2.0, "the page takes {seconds:.2} s to render");
}

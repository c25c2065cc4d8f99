//! Headless Chromium for the report's browser test and its page benchmark: the page is opened from disk with
//! networking off, and Chromium dumps the DOM after the load event or takes a screenshot. Chromium is the Debian
//! package `chromium` (`fixtures/chromium.sh` installs it).

use std::path::{Path, PathBuf};
use std::process::Command;

const CHROMIUM: &str = "/usr/bin/chromium";

/// Chromium's path, or `None` when the browser tests are to be skipped (`ROPESCOPE_SKIP_BROWSER=1`); panics
/// with the fix when Chromium is missing.
pub fn chromium() -> Option<PathBuf> {
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

/// Runs Chromium headless on `url` (a `file://` URL, with a fragment if wanted) with `extra` arguments, in a
/// fresh profile `profile`; returns (stdout, stderr).
pub fn run(chromium: &Path, profile: &Path, url: &str, extra: &[String]) -> (String, String) {
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
        .arg(url)
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

/// The DOM Chromium renders for `url` (`--dump-dom`, fresh profile `profile`), after checking that the page
/// logged nothing to the console.
pub fn dump_dom(chromium: &Path, profile: &Path, url: &str) -> String {
    let (dom, log) = run(chromium, profile, url, &["--dump-dom".into()]);
    assert!(
        console_errors(&log).is_empty(),
        "console errors: {:?}",
        console_errors(&log)
    );
    dom
}

/// The `file://` URL of `page` (made absolute), with `#fragment` when given.
pub fn file_url(page: &Path, fragment: Option<&str>) -> String {
    let page = page.canonicalize().expect("page exists");
    match fragment {
        Some(f) => format!("file://{}#{f}", page.display()),
        None => format!("file://{}", page.display()),
    }
}

/// Console messages in Chromium's log: the page's script logs nothing, so any message (an uncaught error is
/// logged as `INFO:CONSOLE … "Uncaught …"`) is a failure. Chromium's own complaints (dbus in a container) are
/// not.
pub fn console_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect()
}

/// A script that records Chromium's own paint timings (`PerformanceObserver('paint')`: first paint and first
/// contentful paint) and the navigation's DOMContentLoaded and load times, in milliseconds from navigation
/// start, and writes them into the DOM as JSON (`<pre id="page-timing">`) once the page has loaded, where
/// `--dump-dom` reads them.
pub const TIMING_PROBE: &str = "<script>(function(){var t={};function paint(l){l.forEach(function(e){t[e.name]=e.startTime;});}\
try{new PerformanceObserver(function(l){paint(l.getEntries());}).observe({type:'paint',buffered:true});}catch(e){}\
addEventListener('load',function(){var n=performance.getEntriesByType('navigation')[0];\
t.dom_content_loaded=n?n.domContentLoadedEventEnd:-1;t.load=performance.now();paint(performance.getEntriesByType('paint'));\
var p=document.createElement('pre');p.id='page-timing';p.textContent=JSON.stringify(t);document.body.appendChild(p);});})();</script>";

/// `html` with [`TIMING_PROBE`] first in its `<head>` (after the charset), the only change.
pub fn with_timing_probe(html: &str) -> String {
    let at = html
        .find("<meta charset=\"utf-8\"/>")
        .map(|i| i + "<meta charset=\"utf-8\"/>".len())
        .or_else(|| html.find("<head>").map(|i| i + "<head>".len()))
        .expect("a <head>");
    format!("{}{TIMING_PROBE}{}", &html[..at], &html[at..])
}

/// The timings [`TIMING_PROBE`] wrote into a dumped DOM, in seconds by name (`first-paint`,
/// `first-contentful-paint`, `dom_content_loaded`, `load`).
pub fn timings(dom: &str) -> Vec<(String, f64)> {
    let start = dom
        .find("<pre id=\"page-timing\">")
        .expect("timing probe ran")
        + "<pre id=\"page-timing\">".len();
    let text = &dom[start..start + dom[start..].find("</pre>").unwrap()];
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, ms)| (k.clone(), ms.as_f64().unwrap() / 1000.0))
        .collect()
}

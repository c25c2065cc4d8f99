//! Pictures of a scan: the self-contained `report.html`, standalone SVG figures, and the page comparing scans
//! of several models (`compare_scans`); the notebook and other tools' formats are in `crate::export`. Everything is drawn from the files
//! of a scan output directory (`fixtures/scan/FORMAT.md`) read back from disk; figures of analyses that did
//! not run are replaced by a "not run" note.

pub mod catalog;
pub mod claims_html;
pub mod compare_scans;
pub mod data;
pub mod figures;
pub mod findings;
pub mod findings_html;
pub mod glossary;
pub mod html;
pub mod png;
pub mod spec;
pub mod svg;

use crate::error::Result;
use crate::io::inputs::Inputs;
use crate::io::staged::{Record, StagedDir, Staging};
use std::path::{Path, PathBuf};

/// File name of the report page inside the scan directory.
pub const REPORT_FILE: &str = "report.html";

/// Writes `dir/report.html` from the scan directory `dir`; returns its path.
pub fn write_report(dir: &Path) -> Result<PathBuf> {
    let data = data::ScanData::open(dir)?;
    let page = html::render(&data);
    let path = dir.join(REPORT_FILE);
    crate::io::write_atomic(&path, |w| w.write_all(page.as_bytes()))?;
    Ok(path)
}

/// Name of the record [`write_figures`] writes last: the figures' names, in catalogue order.
pub const FIGURES_FILE: &str = "figures.json";

/// Writes every figure of the scan directory `dir` as `out/{name}.svg`, attention maps at the files' full
/// resolution, and last `out/figures.json` (`producer`, `scan`, `figures`: the names); returns the figures'
/// paths. Figures of analyses that did not run are skipped. `out` is written whole ([`StagedDir`], taken before
/// the scan is read): an existing non-empty `out` is refused unless `force` and it holds earlier figures.
pub fn write_figures(dir: &Path, out: &Path, force: bool) -> Result<Vec<PathBuf>> {
    let staged = StagedDir::begin(
        out,
        &Staging {
            force,
            inputs: &Inputs::new([dir]),
            records: &[Record::FIGURES],
        },
    )?;
    let data = data::ScanData::open(dir)?;
    let opts = catalog::Options { max_map_side: None };
    let mut names = Vec::new();
    for f in catalog::all(&data, opts) {
        if let Ok(svg) = f.content {
            let name = format!("{}.svg", f.name);
            let path = staged.path().join(&name);
            crate::io::write_atomic(&path, |w| w.write_all(svg.as_bytes()))?;
            names.push(name);
        }
    }
    let record = serde_json::json!({
        "producer": format!("ropescope {}", env!("CARGO_PKG_VERSION")),
        "scan": dir.display().to_string(),
        "figures": names,
    });
    crate::io::write_json(&staged.path().join(FIGURES_FILE), &record)?;
    let target = staged.commit()?;
    Ok(names.iter().map(|n| target.join(n)).collect())
}

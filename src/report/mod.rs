//! Pictures of a scan: the self-contained `report.html`, standalone SVG figures, a Jupyter notebook that
//! reproduces them with numpy and matplotlib, and MInference head patterns. Everything is drawn from the files
//! of a scan output directory (`fixtures/scan/FORMAT.md`) read back from disk; figures of analyses that did
//! not run are replaced by a "not run" note.

pub mod catalog;
pub mod compare;
pub mod data;
pub mod duoattention;
pub mod figures;
pub mod findings;
pub mod findings_html;
pub mod html;
pub mod minference;
pub mod notebook;
pub mod png;
pub mod spec;
pub mod svg;

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// File name of the report page inside the scan directory.
pub const REPORT_FILE: &str = "report.html";

/// Writes `dir/report.html` from the scan directory `dir`; returns its path.
pub fn write_report(dir: &Path) -> Result<PathBuf> {
    let data = data::ScanData::open(dir)?;
    let page = html::render(&data);
    let path = dir.join(REPORT_FILE);
    crate::export::write_atomic(&path, |w| w.write_all(page.as_bytes()))?;
    Ok(path)
}

/// Writes every figure of the scan directory `dir` as `out/{name}.svg` (creating `out`), attention maps at
/// the files' full resolution; returns the paths written. Figures of analyses that did not run are skipped.
pub fn write_figures(dir: &Path, out: &Path) -> Result<Vec<PathBuf>> {
    let data = data::ScanData::open(dir)?;
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let opts = catalog::Options { max_map_side: None };
    let mut written = Vec::new();
    for f in catalog::all(&data, opts) {
        if let Ok(svg) = f.content {
            let path = out.join(format!("{}.svg", f.name));
            crate::export::write_atomic(&path, |w| w.write_all(svg.as_bytes()))?;
            written.push(path);
        }
    }
    Ok(written)
}

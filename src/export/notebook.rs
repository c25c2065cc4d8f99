//! A Jupyter notebook (nbformat 4.5) that loads a scan directory's `.npy` and `.json` files with numpy and
//! reproduces the report's figures with matplotlib. Cells are generated only for files present, each file is
//! loaded as `SCAN / "name"` (the scan directory relative to the notebook), and the output is deterministic:
//! no timestamps, fixed cell ids, sorted JSON keys, so regenerated notebooks diff cleanly.

use crate::report::data::ScanData;
use crate::error::{Error, Result};
use crate::scan::format::files;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Default file name of the notebook, inside the scan directory.
pub const NOTEBOOK_FILE: &str = "ropescope.ipynb";

/// Writes the notebook of the scan directory `dir` to `out` (default `dir/ropescope.ipynb`); the notebook
/// finds the scan by its path relative to the notebook's folder; `out` is checked before the scan is read.
/// Returns the path written.
pub fn write(dir: &Path, out: Option<&Path>) -> Result<PathBuf> {
    let out = out.map_or_else(|| dir.join(NOTEBOOK_FILE), Path::to_path_buf);
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    crate::io::check_output_file(
        &out,
        &crate::io::inputs::Inputs::new([dir]).replacing(NOTEBOOK_FILE),
    )?;
    let data = ScanData::open(dir)?;
    let scan = dir.canonicalize().map_err(|e| Error::io(dir, e))?;
    let parent = parent.canonicalize().map_err(|e| Error::io(&parent, e))?;
    let scan_path = relative(&parent, &scan).unwrap_or(scan);
    let notebook = build(&data, &scan_path.to_string_lossy());
    crate::io::write_json(&out, &notebook)?;
    Ok(out)
}

/// A cell's source as nbformat wants it: lines, each but the last ending in `\n`.
fn source(text: &str) -> Value {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    json!(lines)
}

/// Builds cells with sequential ids.
struct Cells(Vec<Value>);

impl Cells {
    fn markdown(&mut self, text: &str) {
        let id = format!("cell-{:03}", self.0.len());
        self.0.push(
            json!({"cell_type": "markdown", "id": id, "metadata": {}, "source": source(text)}),
        );
    }

    fn code(&mut self, text: &str) {
        let id = format!("cell-{:03}", self.0.len());
        self.0.push(json!({
            "cell_type": "code", "id": id, "metadata": {}, "execution_count": null, "outputs": [],
            "source": source(text)
        }));
    }
}

const SETUP: &str = r##"import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import PowerNorm

def load(name):
    return np.load(SCAN / name)

KIND_COLOURS = {"sink": "#7f7f7f", "diagonal": "#9467bd", "previous-token": "#d62728", "slash": "#ff7f0e",
                "induction": "#2ca02c", "positional": "#1f77b4", "symbolic": "#17becf"}

def label_colour(label):
    return KIND_COLOURS.get(label.split("(")[0], "#e6e6e6")
"##;

/// The notebook for `data`, loading files from `scan_path` (the directory as seen from the notebook).
pub fn build(data: &ScanData, scan_path: &str) -> Value {
    let has = |name: &str| data.dir.join(name).exists();
    let meta = &data.meta;
    let mut c = Cells(Vec::new());
    c.markdown(&format!(
        "# ropescope scan of `{}`\n\nsha256 `{}`. Written by `ropescope export-notebook`: it loads the scan's files with numpy and redraws the figures of `report.html` with matplotlib. `SCAN` is the scan directory, relative to this notebook.",
        meta.model_file, meta.model_sha256
    ));
    let path = serde_json::to_string(scan_path).unwrap_or_else(|_| "\".\"".into());
    c.code(&format!(
        "{SETUP}\nSCAN = Path({path})\nmeta = json.loads((SCAN / \"{}\").read_text())\nsummary = json.loads((SCAN / \"{}\").read_text())\nL, H = meta[\"model\"][\"n_layers\"], meta[\"model\"][\"n_heads\"]",
        files::META,
        files::SUMMARY
    ));
    c.markdown("## Head labels\n\nThe layer × head grid, coloured by label.");
    c.code(
        "fig, ax = plt.subplots(figsize=(max(4, 0.7 * H), max(2, 0.4 * L)))\nfor h in summary[\"heads\"]:\n    ax.add_patch(plt.Rectangle((h[\"head\"], h[\"layer\"]), 1, 1, color=label_colour(h[\"label\"])))\n    ax.text(h[\"head\"] + 0.5, h[\"layer\"] + 0.5, h[\"label\"], ha=\"center\", va=\"center\", fontsize=7)\nax.set_xlim(0, H); ax.set_ylim(L, 0)\nax.set_xlabel(\"head\"); ax.set_ylabel(\"layer\")\nplt.show()",
    );
    let (layer, head) = focus_head(data);
    c.markdown("## One head\n\nChange `LAYER`, `HEAD` to look at another head.");
    c.code(&format!("LAYER, HEAD = {layer}, {head}"));
    let maps: Vec<String> = ["natural", "random"]
        .iter()
        .map(|s| files::for_set(files::ATTENTION_MAP, s))
        .filter(|f| has(f))
        .collect();
    if !maps.is_empty() {
        let mut code = format!(
            // Constrained layout and two-line titles keep the maps' titles apart.
            "fig, axes = plt.subplots(1, {n}, figsize=({w}, 4.5), squeeze=False, layout=\"constrained\")\n",
            n = maps.len(),
            w = 6 * maps.len()
        );
        for (k, file) in maps.iter().enumerate() {
            let set = if file.contains("random") { "random" } else { "natural" };
            code.push_str(&format!(
                "m = load(\"{file}\")[LAYER, HEAD]\nim = axes[0, {k}].imshow(m, cmap=\"viridis\", norm=PowerNorm(0.5), interpolation=\"nearest\")\naxes[0, {k}].set_title(\"first {set} prompt\\n{{0}}×{{0}} block means\".format(m.shape[0]), fontsize=10)\naxes[0, {k}].set_xlabel(\"key bin\"); axes[0, {k}].set_ylabel(\"query bin\")\nfig.colorbar(im, ax=axes[0, {k}], label=\"attention (√ scale)\")\n"
            ));
        }
        code.push_str("plt.show()");
        c.markdown("### Attention maps\n\nBlock means of the first prompt's attention (see FORMAT.md: a cell is the mean of its block, future entries count as 0).");
        c.code(&code);
    }
    let slash: Vec<String> = ["natural", "random"]
        .iter()
        .map(|s| files::for_set(files::SLASH, s))
        .filter(|f| has(f))
        .collect();
    if !slash.is_empty() {
        let mut code = String::from("fig, ax = plt.subplots(figsize=(5, 3.5))\n");
        for file in &slash {
            code.push_str(&format!(
                "ax.plot(load(\"{file}\")[LAYER, HEAD], marker=\"o\", label=\"{file}\")\n"
            ));
        }
        code.push_str("ax.axhline(meta[\"parameters\"][\"kappa\"], ls=\"--\", color=\"grey\", label=\"κ\")\nax.set_xlabel(\"offset Δ\"); ax.set_ylabel(\"mean S[i, i−Δ]\"); ax.legend()\nplt.show()");
        c.markdown("### Slash score over Δ");
        c.code(&code);
    }
    let freq = if has(files::CHUNK_FREQUENCY) {
        format!(
            "g = load(\"{}\")[LAYER]\nticks = range(0, len(g), max(1, len(g) // 5))\nax.set_xticks(list(ticks)); ax.set_xticklabels([\"%.2g\" % g[i] for i in ticks])\nax.set_xlabel(\"frequency g_l, rad/token (chunk 0 fastest)\")\n",
            files::CHUNK_FREQUENCY
        )
    } else {
        "ax.set_xlabel(\"chunk l (0 fastest)\")\n".into()
    };
    let norms: Vec<(&str, String)> = [("q", files::CHUNK_NORMS_Q), ("k", files::CHUNK_NORMS_K)]
        .into_iter()
        .map(|(n, p)| (n, files::for_set(p, "natural")))
        .filter(|(_, f)| has(f))
        .collect();
    if !norms.is_empty() {
        let mut code = String::from("fig, ax = plt.subplots(figsize=(5, 3.5))\nwidth = 0.4\n");
        for (k, (name, file)) in norms.iter().enumerate() {
            code.push_str(&format!(
                "v = load(\"{file}\")[LAYER, HEAD]\nax.bar(np.arange(len(v)) + {k} * width, v, width, label=\"{name}\")\n"
            ));
        }
        code.push_str(&freq);
        code.push_str("ax.set_ylabel(\"mean ‖chunk‖₂\"); ax.legend()\nplt.show()");
        c.markdown("### Chunk norms of pre-RoPE q and k over frequency");
        c.code(&code);
    }
    let amp = files::for_set(files::FOURIER_AMPLITUDE, "natural");
    if has(&amp) {
        c.markdown("### Logit spectrum A_l of the mean query and key");
        c.code(&format!(
            "fig, ax = plt.subplots(figsize=(5, 3.5))\na = load(\"{amp}\")[LAYER, HEAD]\nax.bar(np.arange(len(a)), a)\n{freq}ax.set_ylabel(\"A_l\")\nplt.show()"
        ));
    }
    let sv: Vec<(&str, String)> = [
        ("q", files::SINGULAR_VALUES_Q),
        ("k", files::SINGULAR_VALUES_K),
    ]
    .into_iter()
    .map(|(n, p)| (n, files::for_set(p, "natural")))
    .filter(|(_, f)| has(f))
    .collect();
    if !sv.is_empty() {
        let mut code = String::from("fig, ax = plt.subplots(figsize=(5, 3.5))\nwidth = 0.4\n");
        for (k, (name, file)) in sv.iter().enumerate() {
            code.push_str(&format!(
                "s = load(\"{file}\")[LAYER, HEAD]\nshare = (s ** 2 / max((s ** 2).sum(), 1e-300))[:16]\nax.bar(np.arange(len(share)) + 1 + {k} * width, share, width, label=\"{name}\")\n"
            ));
        }
        code.push_str("ax.set_xlabel(\"singular value k (largest first)\"); ax.set_ylabel(\"σ_k² / Σσ²\"); ax.legend()\nplt.show()");
        c.markdown("### Rank-one structure");
        c.code(&code);
    }
    c.markdown("## Model-wide\n\n### Positional–symbolic plane");
    let (pos, sym) = crate::scan::labels::POSYM_FIELDS;
    c.code(&format!("pts = [(h, h[\"posym\"]) for h in summary[\"heads\"] if h.get(\"posym\")]\nif pts:\n    fig, ax = plt.subplots(figsize=(4.5, 4.5))\n    for h, p in pts:\n        ax.scatter(p[\"{pos}\"], p[\"{sym}\"], color=label_colour(h[\"label\"]), edgecolor=\"#333\")\n    ax.plot([0, 1], [0, 1], ls=\"--\", color=\"#bbb\")\n    ax.set_xlim(0, 1); ax.set_ylim(0, 1)\n    ax.set_xlabel(\"positional score s_pos\"); ax.set_ylabel(\"symbolic score s_sym\")\n    plt.show()\nelse:\n    print(\"posym: not run\")"));
    for (name, file) in &norms {
        c.markdown(&format!(
            "### Frequency usage of {name} per layer (head × chunk)"
        ));
        c.code(&format!(
            "norms = load(\"{file}\")\nfor layer in range(L):\n    fig, ax = plt.subplots(figsize=(6, 0.3 * H + 1.5))\n    im = ax.imshow(norms[layer], aspect=\"auto\", cmap=\"viridis\", interpolation=\"nearest\")\n    ax.set_title(\"frequency usage of {name}, layer %d\" % layer)\n    ax.set_xlabel(\"chunk l (0 fastest)\"); ax.set_ylabel(\"head\")\n    fig.colorbar(im, ax=ax, label=\"‖{name}‖\")\n    plt.show()"
        ));
    }
    c.markdown("### Slash-dominant heads");
    c.code("sd = summary.get(\"slash_dominant\")\nif sd:\n    print(\"kappa =\", sd[\"kappa\"])\n    for name in (\"natural\", \"random\"):\n        print(name, [(s[\"layer\"], s[\"head\"], s[\"delta\"]) for s in sd[name]])\nelse:\n    print(\"slash: not run\")");
    json!({
        "cells": c.0,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5
    })
}

/// The head the notebook opens on: the first slash-dominant head on natural prompts, else L0 H0.
fn focus_head(data: &ScanData) -> (usize, usize) {
    data.summary
        .slash_dominant
        .as_ref()
        .and_then(|s| s.natural.first())
        .map_or((0, 0), |s| (s.layer, s.head))
}

/// `to` relative to the directory `from` (both absolute, or both relative to the same place), when one can be
/// written with `..` steps; `None` otherwise.
pub fn relative(from: &Path, to: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let a: Vec<Component> = from.components().collect();
    let b: Vec<Component> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    if common == 0 && (from.has_root() || to.has_root()) {
        return None;
    }
    if a[common..]
        .iter()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return None;
    }
    let mut out = PathBuf::new();
    for _ in common..a.len() {
        out.push("..");
    }
    for c in &b[common..] {
        out.push(c.as_os_str());
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths() {
        let r = |a: &str, b: &str| relative(Path::new(a), Path::new(b));
        assert_eq!(r("/a/b", "/a/c/d"), Some(PathBuf::from("../c/d")));
        assert_eq!(r("/a/b", "/a/b"), Some(PathBuf::from(".")));
        assert_eq!(r("/a", "/a/scan"), Some(PathBuf::from("scan")));
    }

    #[test]
    fn sources_keep_newlines_but_the_last() {
        assert_eq!(source("a\nb"), json!(["a\n", "b"]));
    }
}

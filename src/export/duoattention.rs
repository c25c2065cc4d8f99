//! Retrieval and streaming heads in DuoAttention's format, so that the heads a scan finds local can get
//! DuoAttention's constant-size cache.
//!
//! DuoAttention (`duo_attn.utils.load_attn_pattern`) reads a directory holding `full_attention_heads.tsv`, one
//! line per layer and one tab-separated value in `[0, 1]` per key/value head (1: a retrieval head, which keeps
//! the full cache; 0: a streaming head, which keeps only `sink_size` first and `recent_size` last keys), and
//! `config.json` with `sink_size` and `recent_size`; its `sparsify_attention_heads` then turns the values into
//! a choice by a threshold or a sparsity.
//!
//! Our value for a query head is `1 − local_recall` ([`super::minference::local_recall`]): the share of its
//! attention (mean over the natural prompts' rows) that falls neither on key 0 nor on the `Δmax + 1` most
//! recent keys, the part a streaming head would lose. The window is the one measured: `sink_size` 1 and
//! `recent_size` `Δmax + 1` (17 by default), written into `config.json`. A key/value head takes the largest
//! value of its query heads (it can stream only if all of them can).

use crate::report::data::ScanData;
use super::minference::{local_recall, slash_scores};
use crate::error::{Error, Result};
use crate::io::inputs::Inputs;
use crate::io::staged::{Record, StagedDir, Staging};
use crate::io::write_atomic;
use serde_json::json;
use std::path::{Path, PathBuf};

/// The per-layer, per-KV-head values.
pub const HEADS_FILE: &str = "full_attention_heads.tsv";
/// The window the values were measured for.
pub const CONFIG_FILE: &str = "config.json";

/// `[layer][kv head]` full-attention values of the scan `data`. Fails when the `slash` analysis did not run.
pub fn full_attention_heads(data: &ScanData) -> Result<Vec<Vec<f64>>> {
    let m = &data.meta.model;
    let mut out = vec![vec![0.0_f64; m.n_kv_heads]; m.n_layers];
    for h in &data.summary.heads {
        let slash = slash_scores(data, h, "DuoAttention values")?;
        let cell = out
            .get_mut(h.layer)
            .and_then(|l| l.get_mut(h.kv_head))
            .ok_or_else(|| {
                Error::bad_data(&data.dir, format!("head L{}H{} names KV head {}, outside the model's {} × {}", h.layer,
                    h.head,
                    h.kv_head,
                    m.n_layers,
                    m.n_kv_heads
                ))
            })?;
        *cell = cell.max((1.0 - local_recall(data, h, slash)).clamp(0.0, 1.0));
    }
    Ok(out)
}

/// Writes `full_attention_heads.tsv` and last `config.json` of the scan directory `dir` into `out` (default
/// `dir/duoattention`), whole ([`StagedDir`], taken before the scan is read: an existing non-empty `out` is
/// refused unless `force` and it holds earlier patterns); returns the directory.
pub fn write(dir: &Path, out: Option<&Path>, force: bool) -> Result<PathBuf> {
    let out = out.map_or_else(|| dir.join("duoattention"), Path::to_path_buf);
    let staged = StagedDir::begin(
        &out,
        &Staging {
            force,
            inputs: &Inputs::new([dir]),
            records: &[Record::DUOATTENTION],
        },
    )?;
    let data = ScanData::open(dir)?;
    let values = full_attention_heads(&data)?;
    let text: String = values
        .iter()
        .map(|row| {
            let cells: Vec<String> = row.iter().map(|v| v.to_string()).collect();
            cells.join("\t") + "\n"
        })
        .collect();
    write_atomic(&staged.path().join(HEADS_FILE), |w| {
        w.write_all(text.as_bytes())
    })?;
    crate::io::write_json(
        &staged.path().join(CONFIG_FILE),
        &json!({
            "sink_size": 1,
            "recent_size": data.meta.parameters.delta_max + 1,
        }),
    )?;
    staged.commit()
}

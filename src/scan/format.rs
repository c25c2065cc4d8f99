//! The output directory of `ropescope scan`: serde structs of `meta.json`, `summary.json` and `prompts.json`,
//! and the names of the `.npy` files. `fixtures/scan/FORMAT.md` describes the layout in full.
//!
//! The format is append-only: fields are added, never renamed or removed; [`FORMAT_VERSION`] grows when a
//! field's meaning changes. Scores of an analysis that did not run are `null`.

use super::params::ScanParams;
use crate::model::Arithmetic;
use serde::{Deserialize, Serialize};

/// Version of the output format, in `meta.json` and `summary.json`.
pub const FORMAT_VERSION: u32 = 1;

/// Names of the two prompt sets, used as file-name suffixes (`slash_natural.npy`, `slash_random.npy`).
#[cfg(feature = "internals")]
pub const PROMPT_SETS: [&str; 2] = ["natural", "random"];

/// File names of the output directory. `{set}` stands for a name in [`PROMPT_SETS`].
pub mod files {
    /// Run metadata ([`super::Meta`]).
    pub const META: &str = "meta.json";
    /// Per-head scores and labels ([`super::Summary`]).
    pub const SUMMARY: &str = "summary.json";
    /// Token ids of every prompt ([`super::Prompts`]).
    pub const PROMPTS: &str = "prompts.json";
    /// The ranked text summary printed on the terminal.
    pub const SUMMARY_TEXT: &str = "summary.txt";
    /// `f64 [L, H, Δmax+1]`: mean `SlashScore(Δ)` over the set's prompts.
    pub const SLASH: &str = "slash_{set}.npy";
    /// `f64 [L, H]`: mean attention on key 0 from queries `1..N`, over the set's prompts.
    pub const SINK: &str = "sink_{set}.npy";
    /// `f64 [L, H]`: mean mass a head's learned sink takes from a row (models with sinks only: GPT-OSS).
    pub const LEARNED_SINK: &str = "learned_sink_{set}.npy";
    /// `f32 [L, H, M, M]`: attention of the set's first prompt, block-averaged to `M = min(N, 256)`.
    pub const ATTENTION_MAP: &str = "attention_map_{set}.npy";
    /// `f64 [L, H, C]`: mean 2-norm of each pre-RoPE query chunk (chunk 0 fastest).
    pub const CHUNK_NORMS_Q: &str = "chunk_norms_q_{set}.npy";
    /// `f64 [L, H, C]`: mean 2-norm of each pre-RoPE key chunk of the head's KV head.
    pub const CHUNK_NORMS_K: &str = "chunk_norms_k_{set}.npy";
    /// `f64 [L, H, Cv]`: mean 2-norm of each value chunk (coordinates paired as q and k are).
    pub const CHUNK_NORMS_V: &str = "chunk_norms_v_{set}.npy";
    /// `f64 [L, H, d]`: singular values of the stacked pre-RoPE queries of the set, largest first.
    pub const SINGULAR_VALUES_Q: &str = "singular_values_q_{set}.npy";
    /// `f64 [L, H, d]`: singular values of the stacked pre-RoPE keys of the set, largest first.
    pub const SINGULAR_VALUES_K: &str = "singular_values_k_{set}.npy";
    /// `f64 [L, H, C]`: `A_l = |q̄^(l)| |k̄^(l)|` of the mean pre-RoPE query and key.
    pub const FOURIER_AMPLITUDE: &str = "fourier_amplitude_{set}.npy";
    /// `f64 [L, H, C]`: `φ_l = α_l − β_l` (radians) of the mean pre-RoPE query and key.
    pub const FOURIER_PHASE: &str = "fourier_phase_{set}.npy";
    /// `f64 [L, C]`: angular frequency `g_l` (radians per token) of chunk `l` in layer `L`.
    pub const CHUNK_FREQUENCY: &str = "chunk_frequency.npy";
    /// `f64 [L, H, 2]`: mean and largest angle (radians) of projected embeddings to their axis, for W_Q.
    pub const CONE_Q: &str = "cone_q.npy";
    /// `f64 [L, H, 2]`: the same after W_K (the head's KV head).
    pub const CONE_K: &str = "cone_k.npy";

    /// A per-set file name: `{set}` replaced by `set`.
    pub fn for_set(pattern: &str, set: &str) -> String {
        pattern.replace("{set}", set)
    }
}

/// `meta.json`: what was run, on what, with which parameters.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// Version of ropescope that wrote the directory.
    pub ropescope_version: String,
    /// The model file as given on the command line.
    pub model_file: String,
    /// SHA-256 of the model file, lowercase hex.
    pub model_sha256: String,
    /// The model's shape.
    pub model: ModelMeta,
    /// Arithmetic precision of the forward passes (`"f32"` or `"f64"`).
    pub precision: String,
    /// How the forward passes multiplied by the weights (`"exact"` or `"ggml"`; directories of older versions,
    /// which have no such key, are exact).
    #[serde(default)]
    pub arithmetic: Arithmetic,
    /// The prompt sets, natural first.
    pub prompt_sets: Vec<PromptSetMeta>,
    /// Measurement parameters.
    pub parameters: ScanParams,
    /// Analyses that ran, by their CLI names.
    pub analyses: Vec<String>,
    /// Wall-clock time of the whole scan, seconds.
    pub elapsed_seconds: f64,
    /// Wall-clock time of each step of the scan, in the order run (absent in directories of older versions).
    #[serde(default)]
    pub step_seconds: Vec<StepTime>,
    /// The command that wrote the directory, argument by argument (absent in directories of older versions).
    #[serde(default)]
    pub command: Vec<String>,
    /// `true`: every analysis file was written before this `meta.json` (the last data file a scan writes).
    /// `report` and the other readers refuse a directory without it.
    #[serde(default)]
    pub complete: bool,
}

impl Meta {
    /// Why the directory this `meta.json` describes is not a complete scan a report may read, if it is not:
    /// no completion mark, no command, or no model hash.
    pub fn incomplete(&self) -> Option<&'static str> {
        let hash_ok = self.model_sha256.len() == 64
            && self
                .model_sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !self.complete {
            Some("it does not record a completed scan (\"complete\": true)")
        } else if self.command.is_empty() {
            Some("it does not record the command that wrote it")
        } else if !hash_ok {
            Some("it does not record the model file's sha256")
        } else {
            None
        }
    }
}

/// The time one step of a scan took.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct StepTime {
    /// The step: `natural prompts`, `random prompts`, `cone`, or a multi-pass analysis's name.
    pub step: String,
    /// Wall-clock seconds.
    pub seconds: f64,
}

/// Shape of the scanned model.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ModelMeta {
    /// `general.architecture`.
    pub architecture: String,
    /// Layers `L`.
    pub n_layers: usize,
    /// Query heads per layer `H`.
    pub n_heads: usize,
    /// Key/value heads per layer (of layer 0 where `kv_heads` lists each layer's).
    pub n_kv_heads: usize,
    /// Query/key head dimension `d` (the widest layer's where `head_dims` lists each layer's: the width of every
    /// per-dimension array, NaN past a narrower layer's own).
    pub head_dim: usize,
    /// Value head dimension (the widest layer's where `value_dims` lists each layer's).
    pub value_dim: usize,
    /// Key/value heads of each layer; written only when layers differ (Gemma 4).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kv_heads: Vec<usize>,
    /// Query/key head dimension of each layer; written only when layers differ (Gemma 4).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub head_dims: Vec<usize>,
    /// Value head dimension of each layer; written only when layers differ (Gemma 4).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub value_dims: Vec<usize>,
    /// Rotating chunks per head `C` (`d_rot / 2`; the most of any layer).
    pub n_chunks: usize,
    /// Chunks each layer rotates, 0 on a NoPE layer; written only when some layer rotates fewer than `C`
    /// (absent: every layer rotates `C`, as in scans of format 1 written before NoPE layers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rotated_chunks: Vec<usize>,
    /// RoPE base of each layer.
    pub rope_bases: Vec<f64>,
    /// Sliding window of each layer (`null` for global attention).
    pub windows: Vec<Option<usize>>,
    /// Chunked attention of each layer (Llama 4: a query sees only the keys of its own block of this many
    /// positions; `null` for none); written only when some layer has it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<Option<usize>>,
    /// Trained context length.
    pub context_length: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
}

impl ModelMeta {
    /// Chunks layer `l` rotates (`C` where the record lists no layer).
    pub fn chunks_of(&self, l: usize) -> usize {
        self.rotated_chunks.get(l).copied().unwrap_or(self.n_chunks)
    }

    /// Key/value heads of layer `l`.
    pub fn kv_heads_of(&self, l: usize) -> usize {
        self.kv_heads.get(l).copied().unwrap_or(self.n_kv_heads)
    }

    /// Query/key head dimension of layer `l`.
    pub fn head_dim_of(&self, l: usize) -> usize {
        self.head_dims.get(l).copied().unwrap_or(self.head_dim)
    }

    /// Whether layer `l` is a NoPE layer (rotates nothing).
    pub fn is_nope(&self, l: usize) -> bool {
        self.chunks_of(l) == 0
    }

    /// Whether the model has a NoPE layer.
    pub fn has_nope_layers(&self) -> bool {
        (0..self.n_layers).any(|l| self.is_nope(l))
    }
}

/// One prompt set.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PromptSetMeta {
    /// `"natural"` or `"random"`.
    pub name: String,
    /// Number of prompts.
    pub count: usize,
    /// Length in tokens of each prompt.
    pub lengths: Vec<usize>,
    /// Where each prompt came from: a built-in text's name, a file path, or `"uniform random ids"`.
    pub sources: Vec<String>,
    /// Where each prompt starts over with its own text (`null` for one that does not): the texts hold fewer
    /// tokens than the prompt length, so its continuation wraps around; written only when some prompt does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats_from: Vec<Option<usize>>,
}

/// `summary.json`: every head's scores and label, and model-wide results.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// Heads ordered by layer, then head.
    pub heads: Vec<HeadSummary>,
    /// (κ, Δ)-slash-dominant heads of each prompt set (analysis `slash`).
    pub slash_dominant: Option<SlashDominantSets>,
    /// Natural against random prompts (analysis `intrinsic`).
    pub intrinsic: Option<Intrinsic>,
    /// Cone of the token embeddings (analysis `cone`).
    pub cone: Option<EmbeddingCone>,
    /// What a reader must know before trusting the results (an analysis that ran but gave nothing; labels
    /// decided without their analyses). Empty when all is well; absent in directories of older versions.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Each empirical claim of the three papers that the scan measures, with its statistic and verdict
    /// (`src/scan/claims.rs`); absent in directories of older versions.
    #[serde(default)]
    pub claims: Vec<Claim>,
}

/// One claim of a paper, measured on the scanned model.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Claim {
    /// A stable name (`slash-rank-one`, ...).
    pub id: String,
    /// `slash` (Cheng et al.), `round-and-round` (Barbero et al.) or `positional-symbolic` (Urrutia et al.).
    pub paper: String,
    /// What the paper states, in a sentence.
    pub claim: String,
    /// The measured statistic; `null` when the claim is not measurable on this scan.
    pub statistic: Option<Statistic>,
    /// Its uncertainty; `null` where none is computed (a single model-wide measurement).
    pub uncertainty: Option<Interval>,
    /// `supported`, `contradicted`, `mixed` or `not measurable`.
    pub verdict: Verdict,
    /// The rule that turns the statistic into the verdict, with its threshold.
    pub rule: String,
    /// What else the reader must know: a second measure and whether it agrees, or why nothing was measured.
    pub note: String,
}

/// A claim's measured statistic.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Statistic {
    /// What is measured, over what.
    pub name: String,
    /// Its value.
    pub value: f64,
    /// How many heads (or other units) it is over.
    pub n: usize,
}

/// A percentile bootstrap interval.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Interval {
    /// How it was made (`bootstrap over heads, 1000 resamples, 95%`).
    pub method: String,
    /// Lower end.
    pub low: f64,
    /// Upper end.
    pub high: f64,
}

/// A claim's verdict on the scanned model.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum Verdict {
    /// The statistic's interval lies on the claim's side of the threshold.
    #[serde(rename = "supported")]
    Supported,
    /// It lies on the other side.
    #[serde(rename = "contradicted")]
    Contradicted,
    /// It straddles the threshold, or two measures of the claim disagree.
    #[serde(rename = "mixed")]
    Mixed,
    /// The analyses it needs did not run, or the model has nothing to measure it on.
    #[serde(rename = "not measurable")]
    NotMeasurable,
}

impl Verdict {
    /// The verdict as `summary.json` writes it.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Supported => "supported",
            Verdict::Contradicted => "contradicted",
            Verdict::Mixed => "mixed",
            Verdict::NotMeasurable => "not measurable",
        }
    }
}

/// One head's scores. Scores of analyses that did not run are `null`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HeadSummary {
    /// Layer (0-based).
    pub layer: usize,
    /// Query head (0-based).
    pub head: usize,
    /// Key/value head the query head reads.
    pub kv_head: usize,
    /// `sink`, `diagonal`, `previous-token`, `slash(Δ)`, `induction`, `positional`, `symbolic` or `mixed`.
    pub label: String,
    /// Slash and sink scores (analyses `slash`, `intrinsic`).
    pub slash: Option<HeadSlash>,
    /// Rank-one structure of pre-RoPE q and k (analysis `rank`).
    pub rank: Option<HeadRank>,
    /// Logit Fourier decomposition (analysis `fourier`).
    pub fourier: Option<HeadFourier>,
    /// Chunk-norm band shares (analysis `frequency`).
    pub frequency: Option<HeadFrequency>,
    /// Cone of the projected embeddings (analysis `cone`).
    pub cone: Option<HeadCone>,
    /// Per-head slice of the `posym` report (every `[layer][head]` field of `posym.json` at this head).
    pub posym: Option<serde_json::Value>,
    /// Per-head slice of the `detectors` report.
    pub detectors: Option<serde_json::Value>,
    /// The head's Cauchy–Schwarz tables with `in_head_set: true`, or `in_head_set: false` and the rule that
    /// chose the tabled heads (`head_set_rule`).
    pub cauchy_schwarz: Option<serde_json::Value>,
    /// The head's slash peak under the baseline and every variant of the `ablation` report, with each variant's
    /// model-wide loss change.
    pub ablation: Option<serde_json::Value>,
}

/// Slash and sink scores of one head on both prompt sets.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HeadSlash {
    /// `Δ` in `0..=Δmax` with the largest mean slash score on natural prompts.
    pub best_delta: usize,
    /// That score (natural prompts).
    pub best_score: f64,
    /// The larger of the scores at `best_delta − 1` and `best_delta + 1` (natural prompts; `null` when
    /// `Δmax` is 0): how sharply the best offset stands out. A head whose best offset does not peak is not
    /// labelled a slash head.
    #[serde(default)]
    pub neighbour_score: Option<f64>,
    /// The score at the same `Δ` on random prompts (`null` without `intrinsic`).
    pub random_score_at_best_delta: Option<f64>,
    /// `Δ` with the largest score on random prompts (`null` without `intrinsic`).
    pub random_best_delta: Option<usize>,
    /// Mean attention on key 0 (natural prompts).
    pub sink: f64,
    /// Mean attention on key 0 (random prompts).
    pub random_sink: Option<f64>,
    /// Mean mass of a row that the head's learned sink takes (natural prompts): the share of attention that
    /// goes to no key. Written only for a model with sinks (GPT-OSS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned_sink: Option<f64>,
    /// Whether the head is (κ, best_delta)-slash-dominant on natural prompts.
    pub slash_dominant: bool,
    /// Whether it is (κ, best_delta)-slash-dominant on random prompts too.
    pub random_slash_dominant: Option<bool>,
}

/// Rank-one structure of a head's pre-RoPE queries and keys over all tokens of the natural prompts.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HeadRank {
    /// `σ1² / Σσ²` of the stacked queries.
    pub q_rank_one_share: f64,
    /// Entropy effective rank of the stacked queries.
    pub q_effective_rank: f64,
    /// `σ1² / Σσ²` of the stacked keys.
    pub k_rank_one_share: f64,
    /// Entropy effective rank of the stacked keys.
    pub k_effective_rank: f64,
    /// Mean cosine of `q_i` to the queries' mean direction.
    pub q_cos_mean: f64,
    /// Standard deviation of that cosine.
    pub q_cos_std: f64,
    /// Mean cosine of `k_j` to the keys' mean direction.
    pub k_cos_mean: f64,
    /// Standard deviation of that cosine.
    pub k_cos_std: f64,
}

/// Shares of a total in the three frequency bands and, for a head with coordinates that never rotate, in those.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct Bands {
    /// Chunks with `0 < g_l < low_band_max_frequency`.
    pub low: f64,
    /// Chunks between the edges.
    pub medium: f64,
    /// Chunks with `g_l ≥ high_band_min_frequency`.
    pub high: f64,
    /// The coordinates that never rotate (past the rotated dimensions of a partial rotation, and p-RoPE's chunks
    /// of frequency 0), as one part; written only for a head that has such coordinates, the four shares then
    /// summing to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nope: Option<f64>,
}

/// Fourier decomposition of the logit of the mean pre-RoPE query and key (natural prompts).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HeadFourier {
    /// Share of `Σ A_l` in each band.
    pub amplitude_shares: Bands,
    /// `argmax_{Δ ∈ 0..=Δmax} Σ_l A_l cos(g_l Δ + φ_l)`: the slash offset the decomposition predicts.
    pub predicted_delta: usize,
    /// `best_delta` of the measured slash scores (`null` without `slash`).
    pub measured_delta: Option<usize>,
}

/// Where a head's chunk norms sit in frequency (natural prompts).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HeadFrequency {
    /// Share of `Σ_l mean |q^(l)|` in each band.
    pub q: Bands,
    /// Share of `Σ_l mean |k^(l)|` in each band.
    pub k: Bands,
}

/// Angular spread (radians) of sampled token embeddings after the head's projections.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct HeadCone {
    /// Mean angle to the axis after W_Q.
    pub q_mean_angle: f64,
    /// Largest angle to the axis after W_Q.
    pub q_max_angle: f64,
    /// Mean angle to the axis after W_K.
    pub k_mean_angle: f64,
    /// Largest angle to the axis after W_K.
    pub k_max_angle: f64,
}

/// A (κ, Δ)-slash-dominant head.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlashHead {
    /// Layer.
    pub layer: usize,
    /// Query head.
    pub head: usize,
    /// The offset `Δ` at which `SlashScore(Δ) ≥ κ`.
    pub delta: usize,
}

/// Every (layer, head, Δ) with `SlashScore(Δ) ≥ κ`, `Δ ∈ 0..=Δmax`, per prompt set.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SlashDominantSets {
    /// κ used.
    pub kappa: f64,
    /// On natural prompts.
    pub natural: Vec<SlashHead>,
    /// On random prompts (empty without `intrinsic`).
    pub random: Vec<SlashHead>,
}

/// How intrinsic the slash scores are: natural against random prompts.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Intrinsic {
    /// Jaccard index `|N ∩ R| / |N ∪ R|` of the (layer, head, Δ) triples (1 when both sets are empty).
    pub jaccard: f64,
    /// Jaccard index of the sets of (layer, head) that are slash-dominant at some Δ.
    pub jaccard_heads: f64,
    /// Pearson correlation of all `L·H·(Δmax+1)` slash scores between the sets.
    pub pearson_all: f64,
    /// Pearson correlation, over heads, of each head's largest slash score.
    pub pearson_best: f64,
}

/// Cone of the sampled token embeddings.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct EmbeddingCone {
    /// Number of vocabulary rows sampled.
    pub n_tokens: usize,
    /// Mean angle (radians) of an embedding to the embeddings' mean direction.
    pub mean_angle: f64,
    /// Largest angle (radians).
    pub max_angle: f64,
}

/// `prompts.json`: the token ids of every prompt, per set.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Prompts {
    /// Natural prompts.
    pub natural: Vec<Vec<u32>>,
    /// Random prompts.
    pub random: Vec<Vec<u32>>,
}

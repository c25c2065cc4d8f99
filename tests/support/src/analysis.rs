//! A one-layer synthetic model whose heads are built by hand, so that each analysis has a known answer.
//!
//! `qwen2` (biases on Q and K, half-split RoPE), one-hot token embeddings (`n_embd = vocab = 64`, unit
//! `attn_norm`, so the normed residual of token `t` is `8 e_t`), head dimension 32 and RoPE base `10^8`, so
//! chunk `l` turns by `g_l = 10^(−l/2)` radians per token: chunks 0–3 (`1, 0.32, 0.1, 0.03`) carry position,
//! chunks 8–15 (`g ≤ 10^−4`, under 0.02 rad over the prompts used) are practically unrotated.
//!
//! - [`HEAD_PREV`], [`HEAD_SLASH3`], [`HEAD_DIAG`]: `W_Q = W_K = 0` and constant biases `q`, `k = R(Δ g) q` on
//!   chunks 0–3 (Prop 3.1's construction) with amplitudes `|q_l||k_l| = A_l = 70 · (2, 1, 1, 1)`. The logit
//!   `scale · Σ_l A_l cos(g_l (i − j − Δ))` depends only on `i − j` and peaks at `i − j = Δ` (`Δ = 1, 3, 0`),
//!   12 nats above any other offset below 140.
//! - [`HEAD_SYMBOLIC`]: content matching in the unrotated chunks: `q = k = s · e_{c(t)}` with the class
//!   `c(t) = t mod 16` mapped to one coordinate of chunks 8–15 (class `c` in chunk `8 + c mod 8`); equal
//!   classes score `scale · s² ≈ 16`, others 0.
//! - [`HEAD_SINK`]: constant query on chunk 15, key non-zero only for token [`BOS`]: attention on position 0.
//! - [`HEAD_RANDOM`]: the synthetic model's random weights.

use ropescope::gguf::GgufFile;
use ropescope::model::Model;
use ropescope::rope::{Pairing, RopeSpec};
use ropescope::synth::SyntheticModel;

/// The BOS token: position 0 of every test prompt.
pub const BOS: u32 = 0;
/// Previous-token head (`Δ = 1`).
pub const HEAD_PREV: usize = 0;
/// Slash head of offset `Δ = 3`.
pub const HEAD_SLASH3: usize = 1;
/// Diagonal head (`Δ = 0`).
pub const HEAD_DIAG: usize = 2;
/// Content-matching head in unrotated chunks.
pub const HEAD_SYMBOLIC: usize = 3;
/// BOS/sink head.
pub const HEAD_SINK: usize = 4;
/// Untouched random head.
pub const HEAD_RANDOM: usize = 5;

/// Head dimension.
pub const HEAD_DIM: usize = 32;
/// RoPE base.
pub const BASE: f64 = 1e8;
/// Amplitudes `A_l = |q_l| |k_l|` of the positional heads on chunks 0–3.
pub const AMPLITUDES: [f64; 4] = [140.0, 70.0, 70.0, 70.0];
/// Norm of the symbolic head's query and key codes.
pub const SYMBOLIC_NORM: f64 = 9.5;
/// Norm of the sink head's query and BOS key.
pub const SINK_NORM: f64 = 10.0;

const N_EMBD: usize = 64;
const N_HEADS: usize = 6;

/// The RoPE of the model.
pub fn spec() -> RopeSpec {
    RopeSpec::new(HEAD_DIM, BASE, Pairing::HalfSplit)
}

/// Class of a token for [`HEAD_SYMBOLIC`].
pub fn class(t: u32) -> usize {
    t as usize % 16
}

/// The coordinate of the symbolic head's code of class `c`.
pub fn class_dim(c: usize) -> usize {
    let (a, b) = spec().chunk_dims(8 + c % 8);
    if c < 8 {
        a
    } else {
        b
    }
}

/// The constant query and key (pre-RoPE) of a positional head of offset `delta`: `k = R(Δ g) q`.
pub fn positional_qk(delta: usize) -> (Vec<f64>, Vec<f64>) {
    let s = spec();
    let (mut q, mut k) = (vec![0.0; HEAD_DIM], vec![0.0; HEAD_DIM]);
    for (l, a) in AMPLITUDES.iter().enumerate() {
        let (x, y) = s.chunk_dims(l);
        let phase = 0.7 * l as f64;
        q[x] = a.sqrt() * phase.cos();
        q[y] = a.sqrt() * phase.sin();
        let turned = phase + delta as f64 * s.frequency::<f64>(l);
        k[x] = a.sqrt() * turned.cos();
        k[y] = a.sqrt() * turned.sin();
    }
    (q, k)
}

/// The model's bytes.
pub fn known_heads_bytes() -> Vec<u8> {
    let mut m = SyntheticModel::new("qwen2");
    m.n_layers = 1;
    m.n_embd = N_EMBD;
    m.vocab = 64;
    m.n_heads = N_HEADS;
    m.n_kv_heads = N_HEADS;
    m.head_dim = HEAD_DIM;
    m.rope_dim = HEAD_DIM;
    m.n_ff = 64;
    m.rope_base = BASE as f32;
    m.seed = 3;
    let random = GgufFile::from_bytes(m.to_bytes()).unwrap();
    let get = |name: &str| random.dequantize_f32(name).unwrap();

    let mut embd = vec![0.0f32; m.vocab * N_EMBD];
    (0..m.vocab).for_each(|t| embd[t * N_EMBD + t] = 1.0);
    let (mut wq, mut wk) = (get("blk.0.attn_q.weight"), get("blk.0.attn_k.weight"));
    let (mut bq, mut bk) = (get("blk.0.attn_q.bias"), get("blk.0.attn_k.bias"));
    for h in 0..HEAD_RANDOM {
        for r in h * HEAD_DIM..(h + 1) * HEAD_DIM {
            wq[r * N_EMBD..(r + 1) * N_EMBD].fill(0.0);
            wk[r * N_EMBD..(r + 1) * N_EMBD].fill(0.0);
            bq[r] = 0.0;
            bk[r] = 0.0;
        }
    }
    for (h, delta) in [(HEAD_PREV, 1), (HEAD_SLASH3, 3), (HEAD_DIAG, 0)] {
        let (q, k) = positional_qk(delta);
        for d in 0..HEAD_DIM {
            bq[h * HEAD_DIM + d] = q[d] as f32;
            bk[h * HEAD_DIM + d] = k[d] as f32;
        }
    }
    // The normed residual of token t is 8 e_t, so a weight of s/8 gives a coordinate of s.
    for t in 0..m.vocab {
        let r = HEAD_SYMBOLIC * HEAD_DIM + class_dim(class(t as u32));
        wq[r * N_EMBD + t] = (SYMBOLIC_NORM / 8.0) as f32;
        wk[r * N_EMBD + t] = (SYMBOLIC_NORM / 8.0) as f32;
    }
    let sink_dim = HEAD_SINK * HEAD_DIM + spec().chunk_dims(15).0;
    bq[sink_dim] = SINK_NORM as f32;
    wk[sink_dim * N_EMBD + BOS as usize] = (SINK_NORM / 8.0) as f32;

    for (name, v) in [
        ("token_embd.weight", embd),
        ("blk.0.attn_norm.weight", vec![1.0; N_EMBD]),
        ("blk.0.attn_q.weight", wq),
        ("blk.0.attn_k.weight", wk),
        ("blk.0.attn_q.bias", bq),
        ("blk.0.attn_k.bias", bk),
    ] {
        m.overrides.insert(name.to_string(), v);
    }
    m.to_bytes()
}

/// The model in f64.
pub fn known_heads_model() -> Model<f64> {
    Model::load(&GgufFile::from_bytes(known_heads_bytes()).unwrap()).unwrap()
}

/// `n` prompts of `len` tokens: BOS, then tokens drawn by a fixed linear congruential rule from `1..64`.
pub fn prompts(n: usize, len: usize) -> Vec<Vec<u32>> {
    let mut state = 12345u64;
    (0..n)
        .map(|_| {
            std::iter::once(BOS)
                .chain((1..len).map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    1 + (state >> 33) as u32 % 63
                }))
                .collect()
        })
        .collect()
}

/// No progress report.
pub fn quiet(_: u64) {}

/// Token count of [`induction_model`].
pub const INDUCTION_VOCAB: usize = 16;

/// A two-layer model with an induction head built by K-composition.
///
/// `n_embd = 32`: dims 0–15 hold the token one-hot, dims 16–31 a slot for the previous token. Layer 0
/// head 0 is the previous-token head of [`known_heads_bytes`], its values copy the token dims and its output
/// writes them into the slot, so after layer 0 position `j` holds `e_{x_j} + e'_{x_{j−1}}` (the feed-forward
/// blocks are zeroed). In layer 1, head 0 is an induction head: its query codes the current token, its key
/// the slot, so `q_i · k_j = s²` exactly when `x_{j−1} = x_i`; head 1 is a duplicate-token head (query and key
/// both code the current token). Codes sit in the unrotated chunks 8–15, one coordinate per token.
pub fn induction_model() -> Model<f64> {
    const D: usize = 32;
    let mut m = SyntheticModel::new("qwen2");
    m.n_layers = 2;
    m.n_embd = D;
    m.vocab = INDUCTION_VOCAB;
    m.n_heads = 2;
    m.n_kv_heads = 2;
    m.head_dim = HEAD_DIM;
    m.rope_dim = HEAD_DIM;
    m.n_ff = 16;
    m.rope_base = BASE as f32;
    let width = 2 * HEAD_DIM;
    let mut embd = vec![0.0f32; INDUCTION_VOCAB * D];
    (0..INDUCTION_VOCAB).for_each(|t| embd[t * D + t] = 1.0);
    let zeros = |n: usize| vec![0.0f32; n];
    let mut put = |name: String, v: Vec<f32>| {
        m.overrides.insert(name, v);
    };
    put("token_embd.weight".into(), embd);
    for l in 0..2 {
        put(format!("blk.{l}.attn_norm.weight"), vec![1.0; D]);
        put(format!("blk.{l}.ffn_down.weight"), zeros(16 * D));
        for t in ["q", "k", "v"] {
            put(format!("blk.{l}.attn_{t}.bias"), zeros(width));
        }
    }
    // Layer 0: previous-token head 0; values copy the token dims, the output writes them to the slot. The
    // normed residual of a one-hot token is √32 e_t.
    let (q, k) = positional_qk(1);
    let mut bq = zeros(width);
    let mut bk = zeros(width);
    for d in 0..HEAD_DIM {
        bq[d] = q[d] as f32;
        bk[d] = k[d] as f32;
    }
    put("blk.0.attn_q.bias".into(), bq);
    put("blk.0.attn_k.bias".into(), bk);
    put("blk.0.attn_q.weight".into(), zeros(width * D));
    put("blk.0.attn_k.weight".into(), zeros(width * D));
    let mut wv = zeros(width * D);
    let mut wo = zeros(D * width);
    for t in 0..INDUCTION_VOCAB {
        wv[t * D + t] = 1.0;
        wo[(16 + t) * width + t] = 1.0 / (D as f32).sqrt();
    }
    put("blk.0.attn_v.weight".into(), wv);
    put("blk.0.attn_output.weight".into(), wo);
    // Layer 1: the residual is e_t + e'_s with norm √2, so its normed form is 4 (e_t + e'_s).
    let mut wq = zeros(width * D);
    let mut wk = zeros(width * D);
    for t in 0..INDUCTION_VOCAB {
        let w = (SYMBOLIC_NORM / 4.0) as f32;
        wq[class_dim(t) * D + t] = w;
        wk[class_dim(t) * D + 16 + t] = w;
        wq[(HEAD_DIM + class_dim(t)) * D + t] = w;
        wk[(HEAD_DIM + class_dim(t)) * D + t] = w;
    }
    put("blk.1.attn_q.weight".into(), wq);
    put("blk.1.attn_k.weight".into(), wk);
    Model::load(&GgufFile::from_bytes(m.to_bytes()).unwrap()).unwrap()
}

/// Asserts that `r` is an argument error whose message contains `needle`.
pub fn assert_argument_error<T: std::fmt::Debug>(r: ropescope::Result<T>, needle: &str) {
    match r {
        Err(ropescope::Error::Argument(m)) => assert!(m.contains(needle), "{m}"),
        other => panic!("expected an argument error containing {needle:?}, got {other:?}"),
    }
}

//! The embedding cone's images of the embeddings under each head's projections, held to the forward pass. At
//! layer 0 a position's pre-RoPE query and key depend on its own token alone, through the attention norm, the
//! projection with its bias, a latent bottleneck and QK-norm as the model has them: the images the cone
//! computes for layer 0 must have the spreads of the pre-RoPE queries and keys the engine's forward pass (held
//! to HF transformers by `tests/engine/converted.rs`) captures for the same tokens. Converted files of five
//! designs: plain (llama), biases (qwen2), LayerNorm with biases (phi2), QK-norm per head with Gemma's embedding
//! scale (gemma3), QK-norm over the whole projection, a slice of gains per head (olmo2), and DeepSeek V3's normed
//! query bottleneck with latent keys (deepseek3).

use ropescope::analysis::cone::cone_spread;
use ropescope::analysis::embedding_cone::{embedding_cone, Spread};
use ropescope::capture::CollectSink;
use ropescope::gguf::GgufFile;
use ropescope::model::{ForwardOptions, Model};
use ropescope_test_support::paths;

/// Angles (radians) of two f64 computations of the same spread, by different operations.
const ANGLE_TOL: f64 = 1e-9;

/// The spread of one head's `[T, d]` rows.
fn spread_of_rows(rows: &[f64], d: usize) -> Option<Spread> {
    let vectors: Vec<Vec<f64>> = rows.chunks(d).map(<[f64]>::to_vec).collect();
    cone_spread(&vectors).as_ref().map(Spread::from)
}

fn assert_close(what: &str, cone: Option<Spread>, pass: Option<Spread>) {
    let (c, p) = (cone.expect(what), pass.expect(what));
    assert!(
        (c.mean_angle - p.mean_angle).abs() < ANGLE_TOL
            && (c.max_angle - p.max_angle).abs() < ANGLE_TOL,
        "{what}: cone {c:?}, forward pass {p:?}"
    );
}

#[test]
fn layer_zero_images_are_the_forward_pass_queries_and_keys() {
    for variant in ["llama", "qwen2", "phi2", "gemma3", "olmo2", "deepseek3"] {
        let path = paths::fixture(&format!("converted/{variant}/model.gguf"));
        let file = GgufFile::open(&path).unwrap();
        let model = Model::<f64>::load(&file).unwrap();
        let c = &model.config;
        // Distinct tokens, none of them special to a model's first position: each row is its own token's.
        let ids: Vec<u32> = (3..(3 + 48).min(c.vocab_size as u32)).collect();
        let cone = embedding_cone(&model, &ids);
        let mut sink = CollectSink::new(vec![0], 0..0);
        model
            .forward(&ids, &ForwardOptions::default(), &mut sink)
            .unwrap();
        let mut seen = 0;
        for rec in &sink.records {
            let info = rec.info.as_ref().unwrap();
            assert_eq!(info.layer, 0);
            let what = format!("{variant} head {}", info.head);
            let q = spread_of_rows(&rec.q_pre, info.head_dim);
            assert_close(&format!("{what} query"), cone.queries[info.head], q);
            match cone.keys[info.head] {
                Some(k) => {
                    let pass = spread_of_rows(&rec.k_pre, info.head_dim);
                    assert_close(&format!("{what} key"), Some(k), pass);
                }
                // Latent attention has no key projection of the embeddings.
                None => assert_eq!(variant, "deepseek3", "{what}"),
            }
            seen += 1;
        }
        assert_eq!(seen, c.n_heads, "{variant}");
    }
}

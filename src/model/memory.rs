//! The memory pre-flight of the forward pass: a run is refused before any work when its prompt is longer than
//! the context or its activations and kept results exceed the memory available (`MemAvailable`, capped by
//! [`MEMORY_LIMIT_VAR`]). The scan adds what its analyses keep (`scan::memory`).

use super::{attention, Model};
use crate::error::{Error, Result};
use crate::numeric::Real;

impl<T: Real> Model<T> {
    /// Checks a prompt before any heavy work: non-empty, every id in the vocabulary, no longer than the
    /// context, and small enough for this machine's available memory.
    pub fn validate(&self, ids: &[u32]) -> Result<()> {
        self.validate_with_capture(ids, 0, "")
    }

    /// [`Model::validate`] for a run that also keeps `capture_bytes` of results in memory; `reduce` says which
    /// options reduce them (appended to the error).
    pub fn validate_with_capture(
        &self,
        ids: &[u32],
        capture_bytes: u64,
        reduce: &str,
    ) -> Result<()> {
        let c = &self.config;
        if ids.is_empty() {
            return Err(Error::Argument("the prompt has no tokens".into()));
        }
        if let Some((pos, &id)) = ids
            .iter()
            .enumerate()
            .find(|(_, &id)| id as usize >= c.vocab_size)
        {
            return Err(Error::Argument(format!(
                "token id {id} at position {pos} is outside the vocabulary of {} tokens",
                c.vocab_size
            )));
        }
        self.preflight(ids.len(), capture_bytes, reduce)
    }

    /// The length and memory checks of [`Model::validate_with_capture`] for a run of `n` tokens, before its
    /// prompt exists: no longer than the context, and small enough for the available memory with
    /// `capture_bytes` of kept results (`reduce`, appended to the error, says what reduces them).
    pub fn preflight(&self, n: usize, capture_bytes: u64, reduce: &str) -> Result<()> {
        let c = &self.config;
        if n > c.context_length {
            return Err(Error::Argument(format!(
                "the prompt has {n} tokens, more than the model's context of {}",
                c.context_length
            )));
        }
        let work = self.activation_bytes(n);
        let need = work.saturating_add(capture_bytes);
        if let Some(avail) = available_memory()? {
            if need > avail {
                let kept = if capture_bytes > 0 {
                    format!(
                        " ({} for the forward pass, {} for the results it keeps)",
                        mib(work),
                        mib(capture_bytes)
                    )
                } else {
                    String::new()
                };
                return Err(Error::Resource(format!(
                    "a {n}-token run needs about {} of memory{kept}; {} are available{reduce}",
                    mib(need),
                    mib(avail)
                )));
            }
        }
        Ok(())
    }

    /// Bytes of available memory ([`MEMORY_LIMIT_VAR`] or the system's) beyond what [`Model::preflight`]
    /// counts for a run of `n` tokens keeping `capture_bytes`; `None` when the available memory is not known.
    pub fn memory_left(&self, n: usize, capture_bytes: u64) -> Result<Option<u64>> {
        let need = self.activation_bytes(n).saturating_add(capture_bytes);
        Ok(available_memory()?.map(|avail| avail.saturating_sub(need)))
    }

    /// Working memory of a forward pass over `n` tokens (activations of the widest layer plus attention blocks,
    /// and the residual stream, which is kept in f64; the keys and values other layers reuse are counted in
    /// every layer's share, a bound; a mixture of experts adds [`Model::expert_bytes_per_token`]).
    pub fn activation_bytes(&self, n: usize) -> u64 {
        let c = &self.config;
        let size = std::mem::size_of::<T>() as u64;
        let stream = (c.n_embd as u64 * 8).saturating_mul(n as u64);
        let shared = c
            .layers
            .iter()
            .filter(|m| m.kv_from.is_some())
            .count()
            .min(1);
        let per_layer = |l: &super::LayerConfig| {
            let (d, dv, kv) = (l.head_dim(), l.value_dim, l.n_kv_heads);
            let elements = 2 * c.n_embd
                + 2 * (c.n_heads * d + kv * d) // q, k and their pre-RoPE copies
                + kv * d // the keys transposed for the score products
                + kv * dv
                + 2 * c.n_heads * dv
                + 3 * l.n_ff
                + shared * 2 * kv * (2 * d + dv); // kept keys and values of a layer others reuse
            let experts = if l.experts {
                self.expert_bytes_per_token()
            } else {
                0
            };
            elements as u64 * size + experts
        };
        let per_token = c.layers.iter().map(per_layer).max().unwrap_or(0);
        let blocks = (c.n_heads * 2 * attention::ROW_BLOCK) as u64 * size; // logits and probabilities per head block
        (per_token + blocks)
            .saturating_mul(n as u64)
            .saturating_add(stream)
    }

    /// What a mixture-of-experts block adds per token to the working memory of a pass (0 without one): the
    /// router's logits and each token's routes, the f64 sum of the experts' outputs, one expert's gathered
    /// input, gate, up and down outputs at a time (each token at most once per expert), the shared expert's
    /// activations and, beside a dense block (Gemma 4), the router's and the experts' normed inputs.
    pub fn expert_bytes_per_token(&self) -> u64 {
        let c = &self.config;
        let Some(moe) = c.moe else { return 0 };
        let size = std::mem::size_of::<T>() as u64;
        let d = c.n_embd as u64;
        let routes = 2 * moe.n_used as u64 * 16; // (expert, weight) per route, by token and by expert
        let elements = moe.n_experts as u64 // router logits
            + 2 * d // one expert's gathered input and down output
            + 2 * moe.n_ff as u64 // its gate and up outputs
            + 3 * moe.n_ff_shared.unwrap_or(0) as u64
            + if moe.beside_dense { 3 * d } else { 0 };
        elements * size + d * 8 + routes
    }
}

/// `bytes` in MiB, whole from 10 MiB up, with two decimals below.
fn mib(bytes: u64) -> String {
    let m = bytes as f64 / (1u64 << 20) as f64;
    if m >= 10.0 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{m:.2} MiB")
    }
}

/// The bytes of `mib` MiB of packed weights (`--packed-weights`, [`Model::keep_packed_weights`]): an error
/// when no address holds them.
pub fn packed_weight_bytes(mib: usize) -> Result<usize> {
    mib.checked_mul(1 << 20).ok_or_else(|| {
        Error::parameter(
            "packed_weights",
            "is more memory than this machine can address",
        )
    })
}

/// Environment variable that caps the memory runs may plan to use, in bytes or with a binary suffix (`512M`,
/// `2G`): for shared machines, and to try the pre-flight refusals.
pub const MEMORY_LIMIT_VAR: &str = "ROPESCOPE_MAX_MEMORY";

/// Bytes of memory available to this process: Linux's `MemAvailable`, lowered by [`MEMORY_LIMIT_VAR`] when set;
/// `None` when neither is known. A malformed limit is an error.
fn available_memory() -> Result<Option<u64>> {
    let os = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|info| {
            let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib.saturating_mul(1024))
        });
    let limit = match std::env::var(MEMORY_LIMIT_VAR) {
        Ok(v) => Some(parse_size(&v).ok_or_else(|| {
            Error::Argument(format!(
                "{MEMORY_LIMIT_VAR}={v:?} is not a size (bytes, or a number with K, M, G or T)"
            ))
        })?),
        Err(_) => None,
    };
    Ok(match (os, limit) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    })
}

/// `123`, `512K`, `64M`, `2G`, `1T` (binary multiples) as bytes.
fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last()? {
        (i, 'K' | 'k') => (&t[..i], 10),
        (i, 'M' | 'm') => (&t[..i], 20),
        (i, 'G' | 'g') => (&t[..i], 30),
        (i, 'T' | 't') => (&t[..i], 40),
        _ => (t, 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

//! The tokenizer description a GGUF file carries under `tokenizer.ggml.*`, read and checked in one place.

use crate::gguf::{Array, GgufFile, Value};
use crate::{Error, Result};

/// `tokenizer.ggml.token_type` of a control token (`<bos>`, `<|im_end|>`, ...).
pub(super) const TOKEN_TYPE_CONTROL: i64 = 3;
/// `tokenizer.ggml.token_type` of a user-defined token (matched whole in text, like a control token).
pub(super) const TOKEN_TYPE_USER_DEFINED: i64 = 4;

/// The tokenizer metadata of one file, borrowed from it; every id is checked to lie inside the vocabulary.
pub(super) struct Metadata<'a> {
    /// `tokenizer.ggml.model`: `gpt2` (byte-level BPE) or `llama` (SentencePiece).
    pub model: &'a str,
    /// `tokenizer.ggml.pre`: the pre-tokenizer of a byte-level BPE vocabulary.
    pub pre: Option<&'a str>,
    /// `general.architecture`, which selects the SentencePiece variant.
    pub architecture: Option<&'a str>,
    /// `tokenizer.ggml.tokens`: the vocabulary, indexed by token id.
    pub tokens: &'a [String],
    /// `tokenizer.ggml.token_type`, one per token (empty when the file has none).
    pub token_types: Vec<i64>,
    /// `tokenizer.ggml.scores`, one per token (empty when the file has none).
    pub scores: Vec<f64>,
    /// `tokenizer.ggml.merges`, as `"left right"` strings.
    pub merges: Option<&'a [String]>,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos: Option<u32>,
    /// `tokenizer.ggml.unknown_token_id`.
    pub unk: Option<u32>,
    /// `tokenizer.ggml.padding_token_id`.
    pub pad: Option<u32>,
    /// `tokenizer.ggml.add_bos_token`.
    pub add_bos: Option<bool>,
    /// `tokenizer.ggml.add_eos_token`.
    pub add_eos: Option<bool>,
    /// `tokenizer.ggml.add_space_prefix`.
    pub add_space_prefix: Option<bool>,
}

impl<'a> Metadata<'a> {
    /// Reads and checks the tokenizer metadata of `file`.
    pub fn from_gguf(file: &'a GgufFile) -> Result<Self> {
        let model = file
            .get_str("tokenizer.ggml.model")?
            .ok_or_else(|| Error::MissingKey("tokenizer.ggml.model".into()))?;
        let tokens = match file.get_array("tokenizer.ggml.tokens")? {
            Some(Array::String(tokens)) => tokens.as_slice(),
            Some(_) => return Err(bad("tokenizer.ggml.tokens", "expected an array of strings")),
            None => return Err(Error::MissingKey("tokenizer.ggml.tokens".into())),
        };
        if tokens.is_empty() {
            return Err(bad("tokenizer.ggml.tokens", "the vocabulary is empty"));
        }
        if u32::try_from(tokens.len()).is_err() {
            return Err(bad(
                "tokenizer.ggml.tokens",
                "more tokens than 32-bit ids can number",
            ));
        }
        let merges = match file.get_array("tokenizer.ggml.merges")? {
            Some(Array::String(merges)) => Some(merges.as_slice()),
            Some(_) => return Err(bad("tokenizer.ggml.merges", "expected an array of strings")),
            None => None,
        };
        let token_id = |key: &str| -> Result<Option<u32>> {
            match file.get_usize(key)? {
                Some(id) if id < tokens.len() => Ok(Some(id as u32)),
                Some(id) => Err(bad(
                    key,
                    &format!(
                        "token id {id} is outside the vocabulary of {}",
                        tokens.len()
                    ),
                )),
                None => Ok(None),
            }
        };
        Ok(Self {
            model,
            pre: file.get_str("tokenizer.ggml.pre")?,
            architecture: file.get_str("general.architecture")?,
            tokens,
            token_types: token_types(file, tokens.len())?,
            scores: scores(file, tokens.len())?,
            merges,
            bos: token_id("tokenizer.ggml.bos_token_id")?,
            eos: token_id("tokenizer.ggml.eos_token_id")?,
            unk: token_id("tokenizer.ggml.unknown_token_id")?,
            pad: token_id("tokenizer.ggml.padding_token_id")?,
            add_bos: get_bool(file, "tokenizer.ggml.add_bos_token")?,
            add_eos: get_bool(file, "tokenizer.ggml.add_eos_token")?,
            add_space_prefix: get_bool(file, "tokenizer.ggml.add_space_prefix")?,
        })
    }

    /// The type of token `id` (normal when the file gives no types).
    pub fn token_type(&self, id: usize) -> i64 {
        self.token_types.get(id).copied().unwrap_or(1)
    }
}

fn token_types(file: &GgufFile, n_tokens: usize) -> Result<Vec<i64>> {
    const KEY: &str = "tokenizer.ggml.token_type";
    let Some(array) = file.get_array(KEY)? else {
        return Ok(Vec::new());
    };
    let types = array
        .to_i64s()
        .ok_or_else(|| bad(KEY, "expected an array of integers"))?;
    check_len(KEY, types.len(), n_tokens)?;
    Ok(types)
}

fn scores(file: &GgufFile, n_tokens: usize) -> Result<Vec<f64>> {
    const KEY: &str = "tokenizer.ggml.scores";
    let scores: Vec<f64> = match file.get_array(KEY)? {
        None => return Ok(Vec::new()),
        Some(Array::F32(v)) => v.iter().map(|&x| x as f64).collect(),
        Some(Array::F64(v)) => v.clone(),
        Some(_) => return Err(bad(KEY, "expected an array of floats")),
    };
    check_len(KEY, scores.len(), n_tokens)?;
    Ok(scores)
}

fn check_len(key: &str, len: usize, n_tokens: usize) -> Result<()> {
    if len == n_tokens {
        Ok(())
    } else {
        Err(bad(
            key,
            &format!("{len} entries for a vocabulary of {n_tokens} tokens"),
        ))
    }
}

fn get_bool(file: &GgufFile, key: &str) -> Result<Option<bool>> {
    match file.get(key) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(bad(key, "expected a bool")),
    }
}

fn bad(key: &str, problem: &str) -> Error {
    Error::BadValue {
        key: key.into(),
        problem: problem.into(),
    }
}

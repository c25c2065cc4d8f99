//! Tokenizers built from a GGUF file's own metadata: byte-level BPE (`gpt2`, e.g. SmolLM2, Llama 3, Qwen2, with
//! the pre-tokenizers of [`PreTokenizer`]) and SentencePiece (`llama`, e.g. Gemma 3).
//!
//! The ids are those HF transformers produces for a tokenizer it builds from the same file, which
//! `tests/engine/tokenizer_real.rs` checks on the texts of `fixtures/tokenizer/`. The HF `tokenizers` crate is
//! deliberately not used here: it is the reference these tokenizers are tested against, and ropescope must stand
//! on its own.

mod bpe;
mod merge;
mod metadata;
mod pre;
mod special;
mod spm;
mod vocab;

use crate::gguf::GgufFile;
use crate::{Error, Result};
pub(crate) use bpe::byte_chars;
use bpe::ByteLevelBpe;
use metadata::{Metadata, TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED};
pub use pre::PreTokenizer;
use special::{Segment, SpecialTokens};
use spm::SentencePiece;
use vocab::Vocab;

/// A tokenizer: text to token ids and back.
pub struct Tokenizer {
    model: Model,
    specials: SpecialTokens,
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
    add_eos: bool,
}

/// The tokenizer model named by `tokenizer.ggml.model`.
enum Model {
    Bpe(ByteLevelBpe),
    Spm(SentencePiece),
}

impl Tokenizer {
    /// Builds the tokenizer `file`'s metadata describes (`tokenizer.ggml.*`).
    pub fn from_gguf(file: &GgufFile) -> Result<Self> {
        let meta = Metadata::from_gguf(file)?;
        let (model, add_bos_default) = match meta.model {
            "gpt2" => (Model::Bpe(ByteLevelBpe::from_metadata(&meta)?), false),
            // A SentencePiece file that does not say otherwise gets BOS, as in llama.cpp and HF.
            "llama" => (Model::Spm(SentencePiece::from_metadata(&meta)?), true),
            other => {
                return Err(Error::Tokenizer(format!(
                    "unsupported tokenizer model '{other}' (tokenizer.ggml.model; supported: gpt2, llama)"
                )))
            }
        };
        let add_bos = meta.add_bos.unwrap_or(add_bos_default);
        let add_eos = meta.add_eos.unwrap_or(false);
        if add_bos && meta.bos.is_none() {
            return Err(Error::MissingKey("tokenizer.ggml.bos_token_id".into()));
        }
        if add_eos && meta.eos.is_none() {
            return Err(Error::MissingKey("tokenizer.ggml.eos_token_id".into()));
        }
        let specials = SpecialTokens::new(special_contents(&meta), model.vocab())?;
        Ok(Self {
            model,
            specials,
            bos: meta.bos,
            eos: meta.eos,
            add_bos,
            add_eos,
        })
    }

    /// The ids of `text`. With `add_special`, BOS and EOS are added as the metadata asks
    /// (`tokenizer.ggml.add_bos_token`, `add_eos_token`). Control and user-defined tokens written in the text
    /// (such as `<|im_start|>`) become their ids either way.
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>> {
        let mut ids = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.add_bos {
            ids.extend(self.bos);
        }
        for segment in self.specials.split(text) {
            match segment {
                Segment::Token(id) => ids.push(id),
                Segment::Text { text, start } => match &self.model {
                    Model::Bpe(m) => m.encode(text, &mut ids)?,
                    Model::Spm(m) => m.encode(text, start, &mut ids),
                },
            }
        }
        if add_special && self.add_eos {
            ids.extend(self.eos);
        }
        Ok(ids)
    }

    /// The text of `ids`, special tokens included as written. Fails on an id outside the vocabulary.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let pieces = ids
            .iter()
            .map(|&id| {
                self.token(id).ok_or_else(|| {
                    Error::Argument(format!(
                        "token id {id} is outside the vocabulary of {} tokens",
                        self.vocab_size()
                    ))
                })
            })
            .collect::<Result<Vec<&str>>>()?;
        Ok(match &self.model {
            Model::Bpe(m) => m.decode(&pieces),
            Model::Spm(m) => m.decode(&pieces),
        })
    }

    /// The piece of token `id` as the tokenizer spells it (`Ġthe` in byte-level BPE, `▁the` in SentencePiece).
    pub fn token(&self, id: u32) -> Option<&str> {
        self.model.vocab().piece(id)
    }

    /// The beginning-of-sequence token, if the file names one.
    pub fn bos_id(&self) -> Option<u32> {
        self.bos
    }

    /// The end-of-sequence token, if the file names one.
    pub fn eos_id(&self) -> Option<u32> {
        self.eos
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.model.vocab().len()
    }
}

impl Model {
    fn vocab(&self) -> &Vocab {
        match self {
            Model::Bpe(m) => m.vocab(),
            Model::Spm(m) => m.vocab(),
        }
    }
}

/// The pieces matched whole in text: control and user-defined tokens, and the tokens the file names as BOS, EOS,
/// unknown and padding.
fn special_contents<'a>(meta: &'a Metadata) -> impl Iterator<Item = &'a str> {
    let typed = (0..meta.tokens.len()).filter(|&id| {
        matches!(
            meta.token_type(id),
            TOKEN_TYPE_CONTROL | TOKEN_TYPE_USER_DEFINED
        )
    });
    let named = [meta.bos, meta.eos, meta.unk, meta.pad]
        .into_iter()
        .flatten()
        .map(|id| id as usize);
    typed.chain(named).map(|id| meta.tokens[id].as_str())
}

//! Pre-tokenizers of byte-level BPE vocabularies: the regex that cuts text into pieces before BPE, chosen by
//! `tokenizer.ggml.pre`.
//!
//! The patterns, and the names that select them, are those HF transformers uses when it builds a tokenizer from a
//! GGUF file (`GGUF_PRE_TOKENIZER_SPLITS` in `transformers/integrations/gguf/gguf_tokenizer_mapping.py`, written
//! as the models' own `tokenizer.json` files write them; GPT-2's is HF tokenizers' `ByteLevel` regex, used for
//! every name without a pattern of its own), limited to the names llama.cpp's `llama-vocab.cpp` gives the same
//! pattern. Any other name is refused.
//!
//! Where llama.cpp differs, ropescope follows HF, whose ids are the reference the tests compare with:
//! - llama.cpp rewrites `(?i:'s|'t|...)` as `'[sS]|'[tT]|...` (its regex engine has no case-insensitive groups).
//!   Unicode case folding also matches `ſ` (U+017F, long s) to `s`: `it'ſ` splits as `it` `'ſ` here and in HF.
//! - llama.cpp writes Tekken's and GPT-4o's letter classes (`[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, ...) as
//!   look-ahead approximations, which treat combining marks differently.
//! - llama.cpp matches a Llama 3 piece that is a whole token of the vocabulary without merging it
//!   (`ignore_merges`); HF's GGUF tokenizer merges every piece, and so does ropescope.
//! - llama.cpp splits SmolLM's digits one by one before GPT-2's regex; HF does not (the SmolLM2 vocabulary has no
//!   multi-digit tokens, so that changes no id). For `default` (and a file without the key) llama.cpp runs four
//!   regexes in turn (punctuation runs, GPT-2's, digit runs, groups of three digits); HF runs GPT-2's alone.
//!
//! Every pattern ends in `\s+(?!\S)|\s+`: a run of white space gives its last character to the word that follows.
//! The look-ahead is kept as written: `fancy_regex` backtracks as HF tokenizers' Oniguruma does, leftmost
//! alternative first.

use crate::{Error, Result};
use fancy_regex::Regex;
use std::sync::OnceLock;

/// One of the split patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pattern {
    /// GPT-2: contractions in lower case, letters, numbers and other runs each after an optional space.
    Gpt2,
    /// Llama 3: case-insensitive contractions, letters after one optional non-letter, numbers in groups of 1-3
    /// digits, line breaks kept with the punctuation before them.
    Llama3,
    /// Qwen2: as Llama 3, but every digit on its own.
    Qwen2,
    /// Mistral's Tekken: words split at upper/lower-case boundaries, single digits.
    Tekken,
    /// GPT-4o (o200k): words split at case boundaries with their contractions, numbers in groups of 1-3 digits.
    Gpt4o,
}

impl Pattern {
    const ALL: [Pattern; 5] = [
        Pattern::Gpt2,
        Pattern::Llama3,
        Pattern::Qwen2,
        Pattern::Tekken,
        Pattern::Gpt4o,
    ];

    /// The regex, character for character as HF writes it.
    fn regex_source(self) -> &'static str {
        match self {
            Pattern::Gpt2 => {
                r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
            }
            Pattern::Llama3 => concat!(
                r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}",
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
            ),
            Pattern::Qwen2 => concat!(
                r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}",
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
            ),
            Pattern::Tekken => concat!(
                r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+",
                r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*",
                r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
            ),
            Pattern::Gpt4o => concat!(
                r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
                r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
                r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
            ),
        }
    }

    /// The compiled regex, built once per process: compiling the look-ahead regex costs more than the rest of a
    /// tokenizer's construction from metadata.
    fn regex(self) -> Result<&'static Regex> {
        static COMPILED: [OnceLock<std::result::Result<Regex, String>>; 5] =
            [const { OnceLock::new() }; 5];
        let index = Pattern::ALL
            .iter()
            .position(|&p| p == self)
            .expect("every pattern is listed in ALL");
        COMPILED[index]
            .get_or_init(|| Regex::new(self.regex_source()).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| Error::Tokenizer(format!("pre-tokenizer regex: {e}")))
    }
}

/// The values of `tokenizer.ggml.pre` ropescope knows, with their pattern. The names of each pattern are those
/// HF transformers and llama.cpp both give it; the first four are GPT-2's (HF has no pattern of its own for them).
const NAMES: [(&str, Pattern); 26] = [
    ("default", Pattern::Gpt2),
    ("gpt2", Pattern::Gpt2),
    ("gpt-2", Pattern::Gpt2),
    ("smollm", Pattern::Gpt2),
    ("llama3", Pattern::Llama3),
    ("llama-v3", Pattern::Llama3),
    ("llama-bpe", Pattern::Llama3),
    ("falcon3", Pattern::Llama3),
    ("falcon-h1", Pattern::Llama3),
    ("pixtral", Pattern::Llama3),
    ("midm-2.0", Pattern::Llama3),
    ("lfm2", Pattern::Llama3),
    ("jina-v5-nano", Pattern::Llama3),
    ("dbrx", Pattern::Llama3),
    ("smaug-bpe", Pattern::Llama3),
    ("qwen2", Pattern::Qwen2),
    ("deepseek-r1-qwen", Pattern::Qwen2),
    ("kormo", Pattern::Qwen2),
    ("f2llmv2", Pattern::Qwen2),
    ("megrez", Pattern::Qwen2),
    ("tekken", Pattern::Tekken),
    ("gpt-4o", Pattern::Gpt4o),
    ("llama4", Pattern::Gpt4o),
    ("kanana2", Pattern::Gpt4o),
    ("talkie", Pattern::Gpt4o),
    ("minimax-m2", Pattern::Gpt4o),
];

/// The pre-tokenizer of a byte-level BPE vocabulary: cuts text into the pieces BPE merges within.
#[derive(Clone, Copy, Debug)]
pub struct PreTokenizer {
    pattern: Pattern,
    regex: &'static Regex,
}

impl PreTokenizer {
    /// The pre-tokenizer `tokenizer.ggml.pre` names; `None` (no such key) is GPT-2's, as in HF. An unknown name
    /// is refused with the list of known ones.
    pub fn from_name(pre: Option<&str>) -> Result<Self> {
        let pattern = match pre {
            None => Pattern::Gpt2,
            Some(pre) => NAMES
                .iter()
                .find(|(name, _)| *name == pre)
                .map(|&(_, pattern)| pattern)
                .ok_or_else(|| {
                    Error::Tokenizer(format!(
                        "unsupported pre-tokenizer '{pre}' (tokenizer.ggml.pre; supported: {})",
                        Self::names().collect::<Vec<_>>().join(", ")
                    ))
                })?,
        };
        Ok(Self {
            pattern,
            regex: pattern.regex()?,
        })
    }

    /// The values of `tokenizer.ggml.pre` [`PreTokenizer::from_name`] accepts.
    pub fn names() -> impl Iterator<Item = &'static str> {
        NAMES.iter().map(|(name, _)| *name)
    }

    /// The split regex.
    pub fn regex_source(&self) -> &'static str {
        self.pattern.regex_source()
    }

    /// The pieces of `text`, in order: each match of the regex, and any text between matches as a piece of its
    /// own (HF's `Split` with behaviour `isolated`). The pieces concatenate to `text`.
    pub fn split<'t>(&self, text: &'t str) -> Result<Vec<&'t str>> {
        let mut pieces = Vec::new();
        let mut start = 0;
        for m in self.regex.find_iter(text) {
            let m = m.map_err(|e| Error::Tokenizer(format!("pre-tokenizer regex: {e}")))?;
            if m.start() > start {
                pieces.push(&text[start..m.start()]);
            }
            pieces.push(m.as_str());
            start = m.end();
        }
        if start < text.len() {
            pieces.push(&text[start..]);
        }
        Ok(pieces)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(pre: &str, text: &str) -> Vec<String> {
        PreTokenizer::from_name(Some(pre))
            .unwrap()
            .split(text)
            .unwrap()
            .into_iter()
            .map(String::from)
            .collect()
    }

    #[test]
    fn every_pattern_compiles() {
        for p in Pattern::ALL {
            p.regex().unwrap();
        }
    }

    #[test]
    fn gpt2_splits_words_numbers_and_spaces() {
        assert_eq!(
            split("smollm", "I'm  fine, 42x\t\n"),
            ["I", "'m", " ", " fine", ",", " 42", "x", "\t\n"]
        );
    }

    #[test]
    fn qwen2_splits_single_digits_and_llama3_groups_of_three() {
        assert_eq!(
            split("deepseek-r1-qwen", "a 12345"),
            ["a", " ", "1", "2", "3", "4", "5"]
        );
        assert_eq!(split("llama-bpe", "a 12345"), ["a", " ", "123", "45"]);
    }

    #[test]
    fn contractions_ignore_case_and_line_breaks_stay_with_punctuation() {
        assert_eq!(
            split("qwen2", "IT'S ok.\n\n  x"),
            ["IT", "'S", " ok", ".\n\n", " ", " x"]
        );
    }

    #[test]
    fn unknown_pre_tokenizer_is_named() {
        let err = PreTokenizer::from_name(Some("qwen35")).unwrap_err();
        assert!(err.to_string().contains("'qwen35'"), "{err}");
        assert!(err.to_string().contains("deepseek-r1-qwen"), "{err}");
    }
}

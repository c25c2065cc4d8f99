//! SentencePiece BPE (`tokenizer.ggml.model = llama`): Llama-style vocabularies and Gemma 3.
//!
//! Spaces become `▁`, the text's characters are the starting symbols (a character missing from the vocabulary
//! becomes its UTF-8 bytes' `<0xXX>` tokens, failing that Gemma's unknown token), and adjacent symbols merge when
//! their concatenation is a token. The order of merges is the one HF transformers derives from a GGUF vocabulary,
//! which the reference ids come from: best merged token first, then the longer left part, then the longer right
//! part. "Best" is the higher `tokenizer.ggml.scores` entry; for Gemma it is the earlier token id, because
//! Gemma's scores do not follow its merge order while its token order does (for Gemma 3's ordinary tokens the
//! two agree: the scores fall strictly with the id). Gemma also gets no prefix space, whatever
//! `tokenizer.ggml.add_space_prefix` says, and its all-space tokens are spelled with `▁`.

use super::merge::merge;
use super::metadata::Metadata;
use super::Vocab;
use crate::{Error, Result};
use std::cmp::Reverse;

/// The word-boundary mark that stands for a space.
const SPACE_MARK: char = '▁';

/// Architectures whose SentencePiece vocabulary follows Gemma's conventions.
const GEMMA_FAMILY: [&str; 3] = ["gemma", "gemma2", "gemma3"];

/// A SentencePiece BPE tokenizer model.
pub(super) struct SentencePiece {
    vocab: Vocab,
    /// Merge priority class of each token, 0 for the best (ties share a class).
    priority: Vec<u32>,
    /// Token id of each byte's `<0xXX>` token.
    byte_ids: [Option<u32>; 256],
    unk: Option<u32>,
    /// Whether `▁` is put before text at the very start of the input that does not start with a space.
    add_prefix_space: bool,
}

impl SentencePiece {
    /// Builds the model from the file's vocabulary, scores and flags.
    pub fn from_metadata(meta: &Metadata) -> Result<Self> {
        if meta.merges.is_some() {
            return Err(Error::Tokenizer(
                "a SentencePiece vocabulary with tokenizer.ggml.merges is not supported".into(),
            ));
        }
        let gemma = meta.architecture.is_some_and(|a| GEMMA_FAMILY.contains(&a));
        let priority = if gemma {
            (0..meta.tokens.len() as u32).collect()
        } else if meta.scores.is_empty() {
            return Err(Error::MissingKey("tokenizer.ggml.scores".into()));
        } else {
            priority_classes(&meta.scores)
        };
        let pieces = if gemma {
            meta.tokens.iter().map(|t| respell_spaces(t)).collect()
        } else {
            meta.tokens.to_vec()
        };
        let vocab = Vocab::new(pieces);
        let mut byte_ids = [None; 256];
        for (b, id) in byte_ids.iter_mut().enumerate() {
            *id = vocab.id(&format!("<0x{b:02X}>"));
        }
        Ok(Self {
            vocab,
            priority,
            byte_ids,
            // HF gives Gemma's tokenizer the unknown token but not the Llama-style one, which drops characters
            // it can spell neither as a token nor in bytes; the reference ids follow both.
            unk: if gemma { meta.unk } else { None },
            // Gemma's tokenizer never adds a prefix; Llama-style ones do unless the file says not to.
            add_prefix_space: !gemma && meta.add_space_prefix.unwrap_or(true),
        })
    }

    /// The vocabulary (Gemma's all-space tokens spelled with `▁`).
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// Appends the ids of `text` (free of special tokens, starting at byte `start` of the input) to `out`.
    pub fn encode(&self, text: &str, start: usize, out: &mut Vec<u32>) {
        let mut normalized = String::with_capacity(text.len() + 3);
        if self.add_prefix_space && start == 0 && !text.is_empty() && !text.starts_with(' ') {
            normalized.push(SPACE_MARK);
        }
        normalized.extend(text.chars().map(|c| if c == ' ' { SPACE_MARK } else { c }));
        let symbols = self.symbols(&normalized);
        let mut joined = String::new();
        out.extend(merge(&symbols, |l, r| {
            let (left, right) = (self.vocab.piece(l)?, self.vocab.piece(r)?);
            joined.clear();
            joined.push_str(left);
            joined.push_str(right);
            let merged = self.vocab.id(&joined)?;
            let rank = (
                self.priority[merged as usize],
                Reverse(left.chars().count()),
                Reverse(right.chars().count()),
                merged,
            );
            Some((rank, merged))
        }));
    }

    /// The starting symbols: one token per character, else its bytes' tokens, else the unknown token (one for a
    /// run of unknown characters); with none of those the character is dropped, as HF does.
    fn symbols(&self, text: &str) -> Vec<u32> {
        let mut symbols = Vec::with_capacity(text.len());
        let mut in_unknown_run = false;
        let mut buf = [0u8; 4];
        for c in text.chars() {
            if let Some(id) = self.vocab.id(c.encode_utf8(&mut buf)) {
                symbols.push(id);
                in_unknown_run = false;
                continue;
            }
            let bytes: Option<Vec<u32>> = c
                .encode_utf8(&mut buf)
                .bytes()
                .map(|b| self.byte_ids[b as usize])
                .collect();
            if let Some(bytes) = bytes {
                symbols.extend(bytes);
                in_unknown_run = false;
            } else if let Some(unk) = self.unk {
                if !in_unknown_run {
                    symbols.push(unk);
                }
                in_unknown_run = true;
            }
        }
        symbols
    }

    /// The text of `pieces`: `▁` back to spaces, runs of `<0xXX>` tokens back to their UTF-8 (U+FFFD per byte
    /// when invalid), and the prefix space removed when the model adds one.
    pub fn decode(&self, pieces: &[&str]) -> String {
        let mut text = String::new();
        let mut bytes = Vec::new();
        for piece in pieces {
            if let Some(b) = byte_token(piece) {
                bytes.push(b);
                continue;
            }
            flush_bytes(&mut bytes, &mut text);
            text.extend(piece.chars().map(|c| if c == SPACE_MARK { ' ' } else { c }));
        }
        flush_bytes(&mut bytes, &mut text);
        if self.add_prefix_space && text.starts_with(' ') {
            text.remove(0);
        }
        text
    }
}

/// Dense ranks of `scores`, highest score first.
fn priority_classes(scores: &[f64]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let mut classes = vec![0; scores.len()];
    let mut class = 0;
    for (i, &id) in order.iter().enumerate() {
        if i > 0 && scores[id] != scores[order[i - 1]] {
            class += 1;
        }
        classes[id] = class;
    }
    classes
}

/// Gemma stores its tokens of two or more spaces with real spaces while its text has `▁` for them: such a
/// whitespace-only token containing a space is spelled as that many `▁`, as HF does.
fn respell_spaces(token: &str) -> String {
    if token.contains(' ') && token.chars().all(char::is_whitespace) {
        token.chars().map(|_| SPACE_MARK).collect()
    } else {
        token.to_string()
    }
}

/// The byte a `<0xXX>` piece stands for.
fn byte_token(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() == 2 {
        u8::from_str_radix(hex, 16).ok()
    } else {
        None
    }
}

fn flush_bytes(bytes: &mut Vec<u8>, text: &mut String) {
    if bytes.is_empty() {
        return;
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => text.push_str(s),
        Err(_) => text.extend(std::iter::repeat_n(
            char::REPLACEMENT_CHARACTER,
            bytes.len(),
        )),
    }
    bytes.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_classes_rank_scores_densely() {
        assert_eq!(priority_classes(&[-1.0, 0.0, -1.0, -3.0]), vec![1, 0, 1, 2]);
    }

    #[test]
    fn space_tokens_are_respelled() {
        assert_eq!(respell_spaces("   "), "▁▁▁");
        assert_eq!(respell_spaces("\n\n"), "\n\n");
        assert_eq!(respell_spaces("a b"), "a b");
    }

    #[test]
    fn byte_tokens_are_recognised() {
        assert_eq!(byte_token("<0x0A>"), Some(10));
        assert_eq!(byte_token("<0xff>"), Some(255));
        assert_eq!(byte_token("<0x1>"), None);
        assert_eq!(byte_token("<0xZZ>"), None);
    }
}

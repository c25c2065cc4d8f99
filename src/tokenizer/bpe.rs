//! Byte-level BPE (`tokenizer.ggml.model = gpt2`), as GPT-2 defined it and SmolLM2, Llama 3 and Qwen2 use it.
//!
//! Text is split by the pre-tokenizer's regex ([`PreTokenizer`], chosen by `tokenizer.ggml.pre`), each piece's
//! UTF-8 bytes are spelled in GPT-2's printable byte alphabet (`Ġ` for a space, ...), and the file's ranked merges
//! join the symbols of each piece.

use super::merge::merge;
use super::metadata::Metadata;
use super::{PreTokenizer, Vocab};
use crate::{Error, Result};
use std::collections::HashMap;

/// A byte-level BPE tokenizer model.
pub(super) struct ByteLevelBpe {
    vocab: Vocab,
    /// `(left, right)` → (rank, merged id).
    merges: HashMap<(u32, u32), (u32, u32)>,
    split: PreTokenizer,
    /// Token id of each byte's one-character piece.
    byte_ids: [Option<u32>; 256],
    /// Byte of each character of the byte alphabet.
    char_bytes: HashMap<char, u8>,
    /// Whether a space is put before text that does not start with one (`tokenizer.ggml.add_space_prefix`).
    add_prefix_space: bool,
}

impl ByteLevelBpe {
    /// Builds the model from the file's vocabulary, merges and pre-tokenizer name.
    pub fn from_metadata(meta: &Metadata) -> Result<Self> {
        let split = PreTokenizer::from_name(meta.pre)?;
        let byte_chars = byte_chars();
        let char_bytes: HashMap<char, u8> =
            (0..=255u8).map(|b| (byte_chars[b as usize], b)).collect();
        // As HF does, a piece written with characters outside the byte alphabet is respelled in it.
        let pieces = meta
            .tokens
            .iter()
            .map(|t| {
                if t.chars().all(|c| char_bytes.contains_key(&c)) {
                    t.clone()
                } else {
                    t.bytes().map(|b| byte_chars[b as usize]).collect()
                }
            })
            .collect();
        let vocab = Vocab::new(pieces);
        let merges = ranked_merges(meta, &vocab)?;
        let mut byte_ids = [None; 256];
        for (b, id) in byte_ids.iter_mut().enumerate() {
            *id = vocab.id(byte_chars[b].encode_utf8(&mut [0; 4]));
        }
        Ok(Self {
            vocab,
            merges,
            split,
            byte_ids,
            char_bytes,
            add_prefix_space: meta.add_space_prefix.unwrap_or(false),
        })
    }

    /// The vocabulary, with pieces spelled in the byte alphabet.
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// Appends the ids of `text` (free of special tokens) to `out`.
    pub fn encode(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let prefixed;
        let text = if self.add_prefix_space && !text.is_empty() && !text.starts_with(' ') {
            prefixed = format!(" {text}");
            &prefixed
        } else {
            text
        };
        for piece in self.split.split(text)? {
            self.encode_piece(piece, out);
        }
        Ok(())
    }

    /// BPE on one pre-tokenized piece. A byte whose character is not in the vocabulary is dropped, as HF does
    /// for a model without an unknown token.
    fn encode_piece(&self, piece: &str, out: &mut Vec<u32>) {
        let symbols: Vec<u32> = piece
            .bytes()
            .filter_map(|b| self.byte_ids[b as usize])
            .collect();
        out.extend(merge(&symbols, |l, r| self.merges.get(&(l, r)).copied()));
    }

    /// The text of `pieces`: each piece's characters mapped back to bytes (a piece with characters outside the
    /// byte alphabet, such as an added token, stands for its own UTF-8), invalid UTF-8 replaced by U+FFFD.
    pub fn decode(&self, pieces: &[&str]) -> String {
        let mut bytes = Vec::new();
        for piece in pieces {
            let mapped: Option<Vec<u8>> = piece
                .chars()
                .map(|c| self.char_bytes.get(&c).copied())
                .collect();
            match mapped {
                Some(b) => bytes.extend(b),
                None => bytes.extend_from_slice(piece.as_bytes()),
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// The merges of `tokenizer.ggml.merges` by pair of ids, ranked by their order in the file (a pair listed twice
/// keeps its last rank, as in HF).
fn ranked_merges(meta: &Metadata, vocab: &Vocab) -> Result<HashMap<(u32, u32), (u32, u32)>> {
    const KEY: &str = "tokenizer.ggml.merges";
    let merges = meta.merges.ok_or_else(|| Error::MissingKey(KEY.into()))?;
    let bad = |rank: usize, problem: &str| Error::BadValue {
        key: KEY.into(),
        problem: format!("merge {rank} {problem}"),
    };
    let mut ranked = HashMap::with_capacity(merges.len());
    let mut joined = String::new();
    for (rank, merge) in merges.iter().enumerate() {
        let (left, right) = merge.split_once(' ').ok_or_else(|| {
            bad(
                rank,
                &format!("'{merge}' is not two pieces separated by a space"),
            )
        })?;
        let id = |piece: &str| {
            vocab.id(piece).ok_or_else(|| {
                bad(
                    rank,
                    &format!("'{merge}': '{piece}' is not in the vocabulary"),
                )
            })
        };
        let pair = (id(left)?, id(right)?);
        joined.clear();
        joined.push_str(left);
        joined.push_str(right);
        let merged = id(&joined)?;
        let rank = u32::try_from(rank).map_err(|_| bad(rank, "is beyond 32-bit ranks"))?;
        ranked.insert(pair, (rank, merged));
    }
    Ok(ranked)
}

/// GPT-2's byte alphabet: printable bytes stand for themselves, the others for the characters from U+0100 on,
/// in byte order.
pub fn byte_chars() -> [char; 256] {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut chars = ['\0'; 256];
    let mut next = 0x100u32;
    for b in 0..=255u8 {
        chars[b as usize] = if printable(b) {
            b as char
        } else {
            next += 1;
            char::from_u32(next - 1).unwrap_or(char::REPLACEMENT_CHARACTER)
        };
    }
    chars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_alphabet_is_gpt2s() {
        let chars = byte_chars();
        assert_eq!(chars[b' ' as usize], 'Ġ');
        assert_eq!(chars[b'\n' as usize], 'Ċ');
        assert_eq!(chars[b'a' as usize], 'a');
        assert_eq!(chars[0xAD], 'Ń');
        let distinct: std::collections::HashSet<char> = chars.iter().copied().collect();
        assert_eq!(distinct.len(), 256);
    }
}

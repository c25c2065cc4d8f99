//! The prompt sets of a scan: natural prompts (built-in texts written for ropescope, or the user's files) and
//! as many random-token prompts of the same lengths.

use crate::error::{Error, Result};
use crate::tokenizer::Tokenizer;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The built-in texts: prose, code, lists, a recipe, a letter, notes with a table. Written for ropescope.
pub const BUILTIN_TEXTS: [(&str, &str); 8] = [
    ("harbour", include_str!("prompts/harbour.txt")),
    ("rust_code", include_str!("prompts/rust_code.txt")),
    ("shopping_list", include_str!("prompts/shopping_list.txt")),
    ("python_code", include_str!("prompts/python_code.txt")),
    ("encyclopedia", include_str!("prompts/encyclopedia.txt")),
    ("recipe", include_str!("prompts/recipe.txt")),
    ("letter", include_str!("prompts/letter.txt")),
    ("table_notes", include_str!("prompts/table_notes.txt")),
];

/// A prompt and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    /// A text's name, a file path, or `"uniform random ids"`.
    pub source: String,
    /// Token ids.
    pub ids: Vec<u32>,
    /// The position where the prompt starts over with its own first text, when the texts hold fewer tokens
    /// than the prompt length and its continuation wraps around: from there it repeats itself.
    pub repeats_from: Option<usize>,
}

/// `count` natural prompts of exactly `length` tokens: prompt `p` starts with text `p mod n` (BOS first when
/// the tokenizer adds one) and continues with the following texts, cyclically, separated by a blank line,
/// until it is `length` tokens long.
pub fn natural_prompts(
    tokenizer: &Tokenizer,
    texts: &[(String, String)],
    count: usize,
    length: usize,
) -> Result<Vec<Prompt>> {
    if texts.is_empty() {
        return Err(Error::Argument("no prompt texts".into()));
    }
    let pieces: Vec<Vec<u32>> = texts
        .iter()
        .map(|(_, t)| tokenizer.encode(&format!("\n\n{}", t.trim()), false))
        .collect::<Result<_>>()?;
    if let Some(i) = pieces.iter().position(|p| p.is_empty()) {
        return Err(Error::Argument(format!(
            "prompt text '{}' has no tokens",
            texts[i].0
        )));
    }
    // Each text's start is tokenized once, however many prompts start with it.
    let starts: Vec<Vec<u32>> = texts
        .iter()
        .map(|(_, t)| tokenizer.encode(t.trim(), true))
        .collect::<Result<_>>()?;
    Ok((0..count)
        .map(|p| {
            let first = p % texts.len();
            let mut ids = starts[first][..starts[first].len().min(length)].to_vec();
            let mut repeats_from = None;
            let mut next = first + 1;
            while ids.len() < length {
                if next % texts.len() == first && repeats_from.is_none() {
                    repeats_from = Some(ids.len());
                }
                ids.extend_from_slice(&pieces[next % texts.len()]);
                next += 1;
            }
            ids.truncate(length);
            Prompt {
                source: texts[first].0.clone(),
                ids,
                repeats_from,
            }
        })
        .collect())
}

/// One random prompt per natural prompt, of the same length: ids i.i.d. uniform over `0..vocab_size`, except
/// position 0, which keeps the natural prompt's first token when it is `bos` (so both sets share the
/// start-of-text token).
pub fn random_prompts(
    natural: &[Prompt],
    vocab_size: usize,
    bos: Option<u32>,
    seed: u64,
) -> Vec<Prompt> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    natural
        .iter()
        .map(|p| {
            let mut ids: Vec<u32> = (0..p.ids.len())
                .map(|_| rng.random_range(0..vocab_size as u32))
                .collect();
            if let (Some(b), Some(&first)) = (bos, p.ids.first()) {
                if first == b {
                    ids[0] = b;
                }
            }
            Prompt {
                source: "uniform random ids".into(),
                repeats_from: None,
                ids,
            }
        })
        .collect()
}

//! Tokens matched whole in the input text before any other processing (control tokens such as `<|im_end|>` or
//! `<start_of_turn>`, and user-defined tokens such as Gemma's runs of newlines), as HF tokenizers' added
//! vocabulary does: leftmost-longest matches on the raw text, whether or not special tokens are being added.

use super::Vocab;
use crate::{Error, Result};
use aho_corasick::{AhoCorasick, MatchKind};

/// A part of the input text: ordinary text for the model, or a token matched whole.
#[derive(Debug, PartialEq)]
pub(super) enum Segment<'t> {
    /// Text between matched tokens, with its byte offset in the input.
    Text {
        /// The text.
        text: &'t str,
        /// Its byte offset in the whole input.
        start: usize,
    },
    /// A token matched whole.
    Token(u32),
}

/// The set of tokens matched whole in text.
pub(super) struct SpecialTokens {
    /// `None` when there are no such tokens.
    matcher: Option<AhoCorasick>,
    /// Token id of each pattern of `matcher`.
    ids: Vec<u32>,
}

impl SpecialTokens {
    /// The tokens whose pieces, as spelled in `contents`, are entries of `vocab` (others cannot be matched as
    /// one token and are left to the model, as HF does). Empty pieces are skipped.
    pub fn new<'a>(contents: impl IntoIterator<Item = &'a str>, vocab: &Vocab) -> Result<Self> {
        let mut patterns: Vec<&str> = contents
            .into_iter()
            .filter(|c| !c.is_empty() && vocab.id(c).is_some())
            .collect();
        patterns.sort_unstable();
        patterns.dedup();
        if patterns.is_empty() {
            return Ok(Self {
                matcher: None,
                ids: Vec::new(),
            });
        }
        let ids = patterns.iter().filter_map(|p| vocab.id(p)).collect();
        let matcher = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&patterns)
            .map_err(|e| Error::Tokenizer(format!("cannot index the special tokens: {e}")))?;
        Ok(Self {
            matcher: Some(matcher),
            ids,
        })
    }

    /// Splits `text` into ordinary text and whole tokens; empty text between tokens is left out.
    pub fn split<'t>(&self, text: &'t str) -> Vec<Segment<'t>> {
        let mut segments = Vec::new();
        let mut start = 0;
        if let Some(matcher) = &self.matcher {
            for m in matcher.find_iter(text) {
                if m.start() > start {
                    segments.push(Segment::Text {
                        text: &text[start..m.start()],
                        start,
                    });
                }
                segments.push(Segment::Token(self.ids[m.pattern().as_usize()]));
                start = m.end();
            }
        }
        if start < text.len() {
            segments.push(Segment::Text {
                text: &text[start..],
                start,
            });
        }
        segments
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specials() -> (Vocab, SpecialTokens) {
        let vocab = Vocab::new(
            ["<a>", "<ab>", "x", "\n", "\n\n"]
                .map(String::from)
                .to_vec(),
        );
        let specials =
            SpecialTokens::new(["<a>", "<ab>", "\n", "\n\n", "", "<absent>"], &vocab).unwrap();
        (vocab, specials)
    }

    #[test]
    fn matches_are_leftmost_longest() {
        let (_, s) = specials();
        assert_eq!(
            s.split("x<ab>\n\n\ny"),
            vec![
                Segment::Text {
                    text: "x",
                    start: 0
                },
                Segment::Token(1),
                Segment::Token(4),
                Segment::Token(3),
                Segment::Text {
                    text: "y",
                    start: 8
                },
            ]
        );
    }

    #[test]
    fn text_without_tokens_is_one_segment() {
        let (_, s) = specials();
        assert_eq!(
            s.split("<absent>"),
            vec![Segment::Text {
                text: "<absent>",
                start: 0
            }]
        );
        assert_eq!(s.split(""), vec![]);
    }
}

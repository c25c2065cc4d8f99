//! A vocabulary: token pieces by id, and ids by piece.

use std::collections::HashMap;

/// Token pieces indexed by id, with the reverse index.
pub(super) struct Vocab {
    pieces: Vec<String>,
    ids: HashMap<String, u32>,
}

impl Vocab {
    /// A vocabulary of `pieces` (at most `u32::MAX` of them, checked when the metadata is read). When a
    /// piece occurs twice its later id wins, as in the `{token: id}` dictionary HF builds.
    pub fn new(pieces: Vec<String>) -> Self {
        let mut ids = HashMap::with_capacity(pieces.len());
        for (id, piece) in pieces.iter().enumerate() {
            ids.insert(piece.clone(), id as u32);
        }
        Self { pieces, ids }
    }

    /// The piece of token `id`.
    pub fn piece(&self, id: u32) -> Option<&str> {
        self.pieces.get(id as usize).map(String::as_str)
    }

    /// The id of `piece`.
    pub fn id(&self, piece: &str) -> Option<u32> {
        self.ids.get(piece).copied()
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }
}

//! The papers' constructions, as code the executable checks in `tests/theory/*.rs` run.
//!
//! Each claim has a document in `theory/` (statement, source, hypotheses, what the check computes, tolerance,
//! tests). Modules follow the papers:
//!
//! * [`head`]: a single attention head on given pre-RoPE queries and keys (RoPE, NoPE, explicit frequencies).
//! * [`rotation`]: Lemma A.1 of *Round and Round We Go* (distance of `n·g` to the nearest multiple of 2π).
//! * [`positional`]: Prop 3.1 and Thm 5.3 of *Round and Round We Go* (keys peaking at a distance; diagonal and
//!   previous-token heads and the exact norm they need).
//! * [`semantic_channel`]: Thm 6.1 of *Round and Round We Go* (the swap that breaks a single-frequency channel).
//! * [`prope`]: p-RoPE masks and logits.
//! * [`exclusion`]: Definition 2 and Theorem 1 of *Decoupling Positional and Symbolic Attention*.
//! * [`canonical_tasks`]: Index and Retrieval constructions (reconstructed Theorems 2–5 and 7 of that paper).
//! * [`slash`]: bounds behind the slash-pattern checks (noisy rank-one queries and keys, cones).
//!
//! Chunk indices are 0-based in code (chunk 0 is the fastest); the papers' chunk `l` is chunk `l − 1`.

pub mod canonical_tasks;
pub mod exclusion;
pub mod head;
pub mod positional;
pub mod prope;
pub mod rotation;
pub mod semantic_channel;
pub mod slash;

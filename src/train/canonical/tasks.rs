//! Generators of the canonical tasks of Decoupling Positional and Symbolic Attention. A token is the set of its
//! active one-hot features; the query token comes last and the model must output a class.

use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// A token: the indices of its active (one-hot) input features.
pub type Token = Vec<usize>;

/// The canonical tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    /// Context of symbols `x_0..x_{L−1}`, query "index `p`": output `x_p` (purely positional).
    Index,
    /// Context of key-value pair tokens with distinct keys, query a key: output its value (purely symbolic).
    Retrieval,
    /// Partial induction: pair tokens whose keys repeat, query a repeated key: output the value bound to its
    /// last occurrence (symbolic match plus a recency preference).
    Induction,
}

/// Sizes of a task's inputs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TaskSizes {
    /// Number of context tokens `L` before the query.
    pub context_len: usize,
    /// Number of symbols (Index) or values (Retrieval, Induction): the output classes.
    pub n_symbols: usize,
    /// Number of distinct keys (Retrieval needs `n_keys >= context_len`; Induction uses few, so keys repeat).
    pub n_keys: usize,
}

/// One input with its answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Example {
    /// The context tokens, positions `0..L`.
    pub context: Vec<Token>,
    /// The query token, at position `L`.
    pub query: Token,
    /// The class to output.
    pub answer: usize,
    /// The context position holding the answer.
    pub answer_pos: usize,
}

impl Task {
    /// Name as the CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            Task::Index => "index",
            Task::Retrieval => "retrieval",
            Task::Induction => "induction",
        }
    }

    /// Number of input features. Index: symbols, then one feature per position. Retrieval and Induction: keys,
    /// then values, then a query flag.
    pub fn n_features(self, s: &TaskSizes) -> usize {
        match self {
            Task::Index => s.n_symbols + s.context_len,
            Task::Retrieval | Task::Induction => s.n_keys + s.n_symbols + 1,
        }
    }

    /// Checks that the sizes allow the task.
    pub fn check(self, s: &TaskSizes) -> Result<(), String> {
        if s.context_len < 2 || s.n_symbols < 2 {
            return Err("context_len and n_symbols must be >= 2".into());
        }
        match self {
            Task::Index => Ok(()),
            Task::Retrieval if s.n_keys < s.context_len => {
                Err("retrieval needs n_keys >= context_len (distinct keys)".into())
            }
            Task::Induction if s.n_keys < 1 || s.n_keys >= s.context_len => {
                Err("induction needs 1 <= n_keys < context_len so that keys repeat".into())
            }
            _ => Ok(()),
        }
    }

    /// Draws one example (the sizes must pass [`Task::check`]).
    pub fn sample(self, s: &TaskSizes, rng: &mut ChaCha8Rng) -> Example {
        match self {
            Task::Index => {
                let symbols: Vec<usize> = (0..s.context_len)
                    .map(|_| rng.random_range(0..s.n_symbols))
                    .collect();
                let p = rng.random_range(0..s.context_len);
                Example {
                    context: symbols.iter().map(|&x| vec![x]).collect(),
                    query: vec![s.n_symbols + p],
                    answer: symbols[p],
                    answer_pos: p,
                }
            }
            Task::Retrieval => {
                let mut keys: Vec<usize> = (0..s.n_keys).collect();
                keys.shuffle(rng);
                keys.truncate(s.context_len);
                let values: Vec<usize> = (0..s.context_len)
                    .map(|_| rng.random_range(0..s.n_symbols))
                    .collect();
                let p = rng.random_range(0..s.context_len);
                pair_example(s, &keys, &values, p)
            }
            Task::Induction => loop {
                let keys: Vec<usize> = (0..s.context_len)
                    .map(|_| rng.random_range(0..s.n_keys))
                    .collect();
                let repeated: Vec<usize> = (0..s.n_keys)
                    .filter(|k| keys.iter().filter(|&x| x == k).count() >= 2)
                    .collect();
                if repeated.is_empty() {
                    continue;
                }
                let key = repeated[rng.random_range(0..repeated.len())];
                let mut values: Vec<usize> = (0..s.context_len)
                    .map(|_| rng.random_range(0..s.n_symbols))
                    .collect();
                let p = keys.iter().rposition(|&k| k == key).expect("key occurs");
                // Earlier occurrences of the key carry other values, so only the last one answers.
                for j in 0..p {
                    if keys[j] == key && values[j] == values[p] {
                        values[j] = (values[p] + rng.random_range(1..s.n_symbols)) % s.n_symbols;
                    }
                }
                break pair_example(s, &keys, &values, p);
            },
        }
    }
}

fn pair_example(s: &TaskSizes, keys: &[usize], values: &[usize], p: usize) -> Example {
    Example {
        context: keys
            .iter()
            .zip(values)
            .map(|(&k, &v)| vec![k, s.n_keys + v])
            .collect(),
        query: vec![keys[p], s.n_keys + s.n_symbols],
        answer: values[p],
        answer_pos: p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn names_are_the_command_lines() {
        // `ropescope train index|retrieval|induction`, and the names its progress bar and summary line print.
        let names = [Task::Index, Task::Retrieval, Task::Induction].map(Task::name);
        assert_eq!(names, ["index", "retrieval", "induction"]);
    }

    #[test]
    fn sizes_are_refused_one_condition_at_a_time() {
        let sizes = |context_len, n_symbols, n_keys| TaskSizes {
            context_len,
            n_symbols,
            n_keys,
        };
        for task in [Task::Index, Task::Retrieval, Task::Induction] {
            assert!(task.check(&sizes(1, 4, 1)).is_err(), "{task:?}: one context token");
            assert!(task.check(&sizes(4, 1, 1)).is_err(), "{task:?}: one symbol");
        }
        assert!(Task::Index.check(&sizes(2, 2, 0)).is_ok());
        // Retrieval: distinct keys, at least one per context position.
        assert!(Task::Retrieval.check(&sizes(4, 2, 3)).is_err());
        assert!(Task::Retrieval.check(&sizes(4, 2, 4)).is_ok());
        // Induction: at least one key and fewer keys than positions.
        assert!(Task::Induction.check(&sizes(4, 2, 0)).is_err());
        assert!(Task::Induction.check(&sizes(4, 2, 4)).is_err());
        assert!(Task::Induction.check(&sizes(4, 2, 1)).is_ok());
        assert!(Task::Induction.check(&sizes(4, 2, 3)).is_ok());
    }

    #[test]
    fn answers_are_where_the_tasks_say() {
        let s = TaskSizes {
            context_len: 10,
            n_symbols: 6,
            n_keys: 4,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for _ in 0..200 {
            let e = Task::Index.sample(&s, &mut rng);
            assert_eq!(e.context[e.answer_pos], vec![e.answer]);
            assert_eq!(e.query, vec![s.n_symbols + e.answer_pos]);
            let e = Task::Induction.sample(&s, &mut rng);
            let key = e.query[0];
            let last = e.context.iter().rposition(|t| t[0] == key).unwrap();
            assert_eq!(last, e.answer_pos);
            assert_eq!(e.context[last][1], s.n_keys + e.answer);
            let earlier = e.context[..last].iter().filter(|t| t[0] == key);
            assert!(earlier.clone().count() >= 1);
            assert!(earlier.into_iter().all(|t| t[1] != s.n_keys + e.answer));
        }
        let s = TaskSizes { n_keys: 12, ..s };
        let e = Task::Retrieval.sample(&s, &mut rng);
        let mut keys: Vec<usize> = e.context.iter().map(|t| t[0]).collect();
        keys.dedup();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), s.context_len);
    }
}

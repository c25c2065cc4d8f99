//! Token ids read from a `.npy` array: the `--ids` and `--prompts` files of `reference`, `scan` and `diverge`,
//! and the `ids.npy` of a dump `diverge` compares against.
//!
//! One prompt is a 1-D array `[n]`, or `[1, n]`: a batch of one, the shape of the `input_ids` that HF
//! tokenizers return with `return_tensors="np"`. Any other shape (a batch of several prompts, `[n, 1]`, a
//! scalar) is refused rather than flattened, since reading it as one prompt would run a sequence nobody wrote.

use crate::error::{Error, Result};
use crate::io::input_file::MAX_IDS_BYTES;
use crate::io::npy::Array;
use std::path::Path;

/// The token ids of the `.npy` file `path`: a regular file of at most [`MAX_IDS_BYTES`], read as
/// [`from_array`] reads an array.
pub fn read_file(path: &Path) -> Result<Vec<u32>> {
    let a = Array::read_limited(path, MAX_IDS_BYTES, "a token-id file")?;
    from_array(&a, &path.display().to_string())
}

/// The ids of `a`, read from `origin` (named in errors): an integer array of shape `[n]` or `[1, n]`, every
/// value in `0..=u32::MAX`. Anything else is [`Error::BadData`].
pub fn from_array(a: &Array, origin: &str) -> Result<Vec<u32>> {
    if !matches!(a.shape[..], [_] | [1, _]) {
        return Err(Error::bad_data(
            origin,
            format!(
                "token ids of shape {:?}; one prompt's ids are a 1-D array [n] or a batch of one [1, n], not \
                 flattened from other shapes",
                a.shape
            ),
        ));
    }
    let ints = a.to_i64().ok_or_else(|| {
        Error::bad_data(
            origin,
            format!("token ids must be integers (<i4 or <i8), not {:?}", a.dtype),
        )
    })?;
    ints.into_iter()
        .map(|v| {
            u32::try_from(v).map_err(|_| {
                Error::bad_data(
                    origin,
                    format!("token id {v} is outside the allowed 0..={}", u32::MAX),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::npy;

    fn array(shape: &[usize], data: &[i64]) -> Array {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ids.npy");
        npy::write(&p, shape, data).unwrap();
        Array::read(&p).unwrap()
    }

    #[test]
    fn one_prompt_or_a_batch_of_one() {
        assert_eq!(
            from_array(&array(&[3], &[5, 6, 7]), "a").unwrap(),
            [5, 6, 7]
        );
        assert_eq!(
            from_array(&array(&[1, 3], &[5, 6, 7]), "a").unwrap(),
            [5, 6, 7]
        );
    }

    #[test]
    fn other_shapes_and_values_are_refused() {
        for shape in [&[2, 3][..], &[3, 2], &[6, 1], &[1, 2, 3], &[]] {
            let n = shape.iter().product::<usize>();
            let err = from_array(&array(shape, &vec![1; n]), "x.npy").unwrap_err();
            assert!(err.to_string().contains("token ids of shape"), "{err}");
        }
        let err = from_array(&array(&[2], &[1, -1]), "x.npy").unwrap_err();
        assert!(err.to_string().contains("token id -1 is outside"), "{err}");
    }
}

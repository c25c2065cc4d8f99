//! Angular spread of vectors (token embeddings) around their mean direction: how well they lie on a cone.
//!
//! The axis is the normalised mean of the unit vectors `x_t / |x_t|`; the angle of `x_t` to the axis `u` is
//! `atan2(|x_t − (x_t·u) u|, x_t·u)` (accurate for small angles, unlike `acos`). The slash paper states its cone
//! condition only informally; the mean and the largest angle are the statistics we report.

/// Axis and angular spread of a set of vectors.
#[derive(Clone, Debug, PartialEq)]
pub struct ConeSpread {
    /// Unit mean direction `u`.
    pub axis: Vec<f64>,
    /// Mean angle (radians) between the vectors and `u`.
    pub mean_angle: f64,
    /// Largest angle (radians) between a vector and `u`.
    pub max_angle: f64,
}

/// The cone spread of `vectors` (all of one length). `None` when there are none, one is zero, their lengths
/// differ, or their unit vectors cancel (no mean direction).
pub fn cone_spread(vectors: &[Vec<f64>]) -> Option<ConeSpread> {
    let dim = vectors.first()?.len();
    let mut mean = vec![0.0; dim];
    for x in vectors {
        let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt();
        if x.len() != dim || norm == 0.0 {
            return None;
        }
        mean.iter_mut().zip(x).for_each(|(m, v)| *m += v / norm);
    }
    let mean_norm = mean.iter().map(|v| v * v).sum::<f64>().sqrt();
    if mean_norm == 0.0 {
        return None;
    }
    let axis: Vec<f64> = mean.iter().map(|v| v / mean_norm).collect();
    let angles: Vec<f64> = vectors
        .iter()
        .map(|x| {
            let along: f64 = x.iter().zip(&axis).map(|(v, u)| v * u).sum();
            let across = x
                .iter()
                .zip(&axis)
                .map(|(v, u)| (v - along * u).powi(2))
                .sum::<f64>()
                .sqrt();
            across.atan2(along)
        })
        .collect();
    Some(ConeSpread {
        axis,
        mean_angle: angles.iter().sum::<f64>() / angles.len() as f64,
        max_angle: angles.iter().copied().fold(0.0, f64::max),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_pair_has_axis_between_them() {
        let t = 0.1f64;
        let spread = cone_spread(&[vec![t.cos(), t.sin()], vec![t.cos(), -t.sin()]]).unwrap();
        assert!((spread.axis[0] - 1.0).abs() < 1e-15);
        assert!((spread.max_angle - t).abs() < 1e-15 && (spread.mean_angle - t).abs() < 1e-15);
        assert_eq!(cone_spread(&[vec![1.0, 0.0], vec![-1.0, 0.0]]), None);
    }

    #[test]
    fn the_axis_weighs_directions_not_lengths() {
        // A short and a long vector at right angles: the axis bisects them whatever their lengths.
        let spread = cone_spread(&[vec![0.5, 0.0], vec![0.0, 10.0]]).unwrap();
        let half = std::f64::consts::FRAC_1_SQRT_2;
        assert!((spread.axis[0] - half).abs() < 1e-15 && (spread.axis[1] - half).abs() < 1e-15);
        assert!((spread.mean_angle - std::f64::consts::FRAC_PI_4).abs() < 1e-15);
    }

    #[test]
    fn a_zero_vector_or_a_length_mismatch_has_no_spread() {
        // Each alone refuses: a zero vector of the right length, a non-zero vector of the wrong length.
        assert_eq!(cone_spread(&[vec![1.0, 0.0], vec![0.0, 0.0]]), None);
        assert_eq!(cone_spread(&[vec![1.0, 0.0], vec![1.0, 0.0, 0.0]]), None);
        assert_eq!(cone_spread(&[]), None);
    }
}

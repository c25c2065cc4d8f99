//! One label per head from its scores (rules in `fixtures/scan/FORMAT.md`, "Labels").

/// Numeric field of the `detectors` per-head slice read as the induction score.
pub const INDUCTION_FIELD: &str = "induction";
/// Induction score from which a head is labelled `induction`.
pub const INDUCTION_THRESHOLD: f64 = 0.3;
/// Numeric fields of the `posym` per-head slice read as the positional and symbolic scores.
pub const POSYM_FIELDS: (&str, &str) = ("s_pos", "s_sym");
/// Margin by which one of the positional and symbolic scores must exceed the other to name the head.
pub const POSYM_MARGIN: f64 = 0.2;
/// How many times the mean slash score at the best offset must exceed that at either neighbouring offset for
/// the head to be named by its offset: a broad local head (0.154, 0.159, 0.130 at Δ = 1, 2, 3) reaches κ at
/// several offsets without a slash at any.
pub const PEAK_RATIO: f64 = 1.5;

/// What a head's label is decided from; `None` where the analysis did not run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evidence {
    /// Best slash offset and its score on natural prompts.
    pub best_slash: Option<(usize, f64)>,
    /// The larger score at the offsets next to the best.
    pub slash_neighbour: Option<f64>,
    /// Mean attention on the first token.
    pub sink: Option<f64>,
    /// Induction score (detectors).
    pub induction: Option<f64>,
    /// Positional and symbolic scores (posym).
    pub posym: Option<(f64, f64)>,
}

impl Evidence {
    /// Reads the induction and posym scores from the per-head slices of those reports, when present.
    pub fn with_reports(
        mut self,
        detectors: Option<&serde_json::Value>,
        posym: Option<&serde_json::Value>,
    ) -> Self {
        let number = |v: Option<&serde_json::Value>, field: &str| v?.get(field)?.as_f64();
        self.induction = number(detectors, INDUCTION_FIELD);
        self.posym = number(posym, POSYM_FIELDS.0).zip(number(posym, POSYM_FIELDS.1));
        self
    }
}

/// The label: `diagonal`, `previous-token`, `slash(Δ)`, `induction`, `sink`, `positional`, `symbolic` or
/// `mixed`, by the first rule that applies.
pub fn label(e: &Evidence, kappa: f64, sink_threshold: f64) -> String {
    let peaks = |s: f64| e.slash_neighbour.is_none_or(|n| s >= PEAK_RATIO * n);
    let slash = e.best_slash.filter(|&(_, s)| s >= kappa && peaks(s));
    let sink = e.sink.filter(|&s| s >= sink_threshold);
    if let Some((delta, score)) = slash {
        if sink.is_none_or(|sink| score >= sink) {
            return match delta {
                0 => "diagonal".into(),
                1 => "previous-token".into(),
                d => format!("slash({d})"),
            };
        }
    }
    if e.induction.is_some_and(|s| s >= INDUCTION_THRESHOLD) {
        return "induction".into();
    }
    if sink.is_some() {
        return "sink".into();
    }
    match e.posym {
        Some((p, s)) if p - s >= POSYM_MARGIN => "positional".into(),
        Some((p, s)) if s - p >= POSYM_MARGIN => "symbolic".into(),
        _ => "mixed".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_apply_in_order() {
        let e = |best_slash, sink| Evidence {
            best_slash,
            sink,
            ..Default::default()
        };
        assert_eq!(label(&e(Some((3, 0.4)), Some(0.2)), 0.1, 0.5), "slash(3)");
        assert_eq!(label(&e(Some((1, 0.4)), None), 0.1, 0.5), "previous-token");
        assert_eq!(label(&e(Some((0, 0.4)), Some(0.6)), 0.1, 0.5), "sink");
        assert_eq!(label(&e(Some((0, 0.7)), Some(0.6)), 0.1, 0.5), "diagonal");
        assert_eq!(label(&e(Some((4, 0.05)), Some(0.1)), 0.1, 0.5), "mixed");
        // A best offset that does not stand out from its neighbours names no slash.
        let broad = Evidence {
            slash_neighbour: Some(0.154),
            ..e(Some((2, 0.159)), Some(0.1))
        };
        assert_eq!(label(&broad, 0.1, 0.5), "mixed");
        let sharp = Evidence {
            slash_neighbour: Some(0.10),
            ..broad.clone()
        };
        assert_eq!(label(&sharp, 0.1, 0.5), "slash(2)");
        // A head with a high induction score is an induction head even when the first token draws much of its
        // attention (the detectors' repeated prompts show what it does).
        let induction = Evidence {
            induction: Some(0.45),
            ..e(Some((0, 0.05)), Some(0.6))
        };
        assert_eq!(label(&induction, 0.1, 0.5), "induction");
        assert_eq!(label(&e(Some((0, 0.05)), Some(0.6)), 0.1, 0.5), "sink");
        let reports = e(None, None).with_reports(
            Some(&serde_json::json!({"induction": 0.5})),
            Some(&serde_json::json!({POSYM_FIELDS.0: 0.9, POSYM_FIELDS.1: 0.1})),
        );
        assert_eq!(label(&reports, 0.1, 0.5), "induction");
        let posym = Evidence {
            induction: None,
            ..reports
        };
        assert_eq!(label(&posym, 0.1, 0.5), "positional");
    }
}

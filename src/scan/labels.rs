//! One label per head from its scores (rules in `fixtures/scan/FORMAT.md`, "Labels").

/// Numeric field of the `detectors` per-head slice read as the induction score.
pub const INDUCTION_FIELD: &str = "induction";
/// Induction score from which a head is labelled `induction`.
pub const INDUCTION_THRESHOLD: f64 = 0.3;
/// Numeric fields of the `posym` per-head slice read as the positional and symbolic scores.
pub const POSYM_FIELDS: (&str, &str) = ("s_pos", "s_sym");
/// Margin by which one of the positional and symbolic scores must exceed the other to name the head.
pub const POSYM_MARGIN: f64 = 0.2;

/// What a head's label is decided from; `None` where the analysis did not run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evidence {
    /// Best slash offset and its score on natural prompts.
    pub best_slash: Option<(usize, f64)>,
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

/// The label: `sink`, `diagonal`, `previous-token`, `slash(Δ)`, `induction`, `positional`, `symbolic` or
/// `mixed`, by the first rule that applies.
pub fn label(e: &Evidence, kappa: f64, sink_threshold: f64) -> String {
    let slash = e.best_slash.filter(|&(_, s)| s >= kappa);
    if let Some(sink) = e.sink.filter(|&s| s >= sink_threshold) {
        if slash.is_none_or(|(_, s)| sink > s) {
            return "sink".into();
        }
    }
    if let Some((delta, _)) = slash {
        return match delta {
            0 => "diagonal".into(),
            1 => "previous-token".into(),
            d => format!("slash({d})"),
        };
    }
    if e.induction.is_some_and(|s| s >= INDUCTION_THRESHOLD) {
        return "induction".into();
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

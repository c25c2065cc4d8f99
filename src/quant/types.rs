//! The ggml tensor types: numeric ids, block geometry and names.

/// A ggml tensor type as stored in a GGUF tensor directory.
///
/// Every type ggml defines is listed, so the reader can size and bound-check any tensor; only some can be
/// dequantized (see [`GgmlType::can_dequantize`]).
#[allow(non_camel_case_types, missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ2_XXS,
    IQ2_XS,
    IQ3_XXS,
    IQ1_S,
    IQ4_NL,
    IQ3_S,
    IQ2_S,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    IQ1_M,
    BF16,
    TQ1_0,
    TQ2_0,
    MXFP4,
    NVFP4,
    Q1_0,
    Q2_0,
}

/// Super-block size of the K-quants.
pub const QK_K: usize = 256;

/// (type, id, name, elements per block, bytes per block): ggml's `type_traits` table.
const TABLE: &[(GgmlType, u32, &str, usize, usize)] = &[
    (GgmlType::F32, 0, "F32", 1, 4),
    (GgmlType::F16, 1, "F16", 1, 2),
    (GgmlType::Q4_0, 2, "Q4_0", 32, 2 + 16),
    (GgmlType::Q4_1, 3, "Q4_1", 32, 2 + 2 + 16),
    (GgmlType::Q5_0, 6, "Q5_0", 32, 2 + 4 + 16),
    (GgmlType::Q5_1, 7, "Q5_1", 32, 2 + 2 + 4 + 16),
    (GgmlType::Q8_0, 8, "Q8_0", 32, 2 + 32),
    (GgmlType::Q8_1, 9, "Q8_1", 32, 4 + 4 + 32),
    (
        GgmlType::Q2_K,
        10,
        "Q2_K",
        QK_K,
        2 + 2 + QK_K / 16 + QK_K / 4,
    ),
    (
        GgmlType::Q3_K,
        11,
        "Q3_K",
        QK_K,
        2 + QK_K / 4 + QK_K / 8 + 12,
    ),
    (GgmlType::Q4_K, 12, "Q4_K", QK_K, 2 + 2 + QK_K / 2 + 12),
    (
        GgmlType::Q5_K,
        13,
        "Q5_K",
        QK_K,
        2 + 2 + QK_K / 2 + QK_K / 8 + 12,
    ),
    (
        GgmlType::Q6_K,
        14,
        "Q6_K",
        QK_K,
        2 + QK_K / 2 + QK_K / 4 + QK_K / 16,
    ),
    (GgmlType::Q8_K, 15, "Q8_K", QK_K, 4 + QK_K + QK_K / 8),
    (GgmlType::IQ2_XXS, 16, "IQ2_XXS", QK_K, 2 + QK_K / 4),
    (
        GgmlType::IQ2_XS,
        17,
        "IQ2_XS",
        QK_K,
        2 + QK_K / 4 + QK_K / 32,
    ),
    (
        GgmlType::IQ3_XXS,
        18,
        "IQ3_XXS",
        QK_K,
        2 + QK_K / 4 + QK_K / 8,
    ),
    (GgmlType::IQ1_S, 19, "IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16),
    (GgmlType::IQ4_NL, 20, "IQ4_NL", 32, 2 + 16),
    (
        GgmlType::IQ3_S,
        21,
        "IQ3_S",
        QK_K,
        2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4,
    ),
    (GgmlType::IQ2_S, 22, "IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16),
    (
        GgmlType::IQ4_XS,
        23,
        "IQ4_XS",
        QK_K,
        2 + 2 + QK_K / 2 + QK_K / 64,
    ),
    (GgmlType::I8, 24, "I8", 1, 1),
    (GgmlType::I16, 25, "I16", 1, 2),
    (GgmlType::I32, 26, "I32", 1, 4),
    (GgmlType::I64, 27, "I64", 1, 8),
    (GgmlType::F64, 28, "F64", 1, 8),
    (
        GgmlType::IQ1_M,
        29,
        "IQ1_M",
        QK_K,
        QK_K / 8 + QK_K / 16 + QK_K / 32,
    ),
    (GgmlType::BF16, 30, "BF16", 1, 2),
    (GgmlType::TQ1_0, 34, "TQ1_0", QK_K, 2 + 4 * 13),
    (GgmlType::TQ2_0, 35, "TQ2_0", QK_K, 2 + 64),
    (GgmlType::MXFP4, 39, "MXFP4", 32, 1 + 16),
    (GgmlType::NVFP4, 40, "NVFP4", 64, 4 + 32),
    (GgmlType::Q1_0, 41, "Q1_0", 128, 2 + 16),
    (GgmlType::Q2_0, 42, "Q2_0", 64, 2 + 16),
];

impl GgmlType {
    fn row(self) -> &'static (GgmlType, u32, &'static str, usize, usize) {
        TABLE
            .iter()
            .find(|r| r.0 == self)
            .expect("every GgmlType has a table row")
    }

    /// The type with ggml id `id`, if ggml defines one.
    pub fn from_id(id: u32) -> Option<Self> {
        TABLE.iter().find(|r| r.1 == id).map(|r| r.0)
    }

    /// The type named `name` (ggml spelling, case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        TABLE
            .iter()
            .find(|r| r.2.eq_ignore_ascii_case(name))
            .map(|r| r.0)
    }

    /// ggml's numeric id.
    pub fn id(self) -> u32 {
        self.row().1
    }

    /// ggml's name (`"Q4_K"`).
    pub fn name(self) -> &'static str {
        self.row().2
    }

    /// Elements per block.
    pub fn block_size(self) -> usize {
        self.row().3
    }

    /// Bytes per block.
    pub fn type_size(self) -> usize {
        self.row().4
    }

    /// Whether this type can be dequantized ([`crate::gguf::GgufFile::dequantize_f32`], the engine's products):
    /// every type gguf-py's `gguf.quants.dequantize` dequantizes, and Q8_K.
    pub fn can_dequantize(self) -> bool {
        super::block_kernel(self).is_some()
    }

    /// Bytes taken by `n_elements` elements, or `None` when `n_elements` is not a whole number of blocks or the
    /// size overflows.
    pub fn byte_size(self, n_elements: u64) -> Option<u64> {
        let bs = self.block_size() as u64;
        if !n_elements.is_multiple_of(bs) {
            return None;
        }
        (n_elements / bs).checked_mul(self.type_size() as u64)
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

//! GGUF metadata values.

/// GGUF metadata value type ids, as stored in the file.
#[allow(missing_docs)]
pub mod type_id {
    pub const U8: u32 = 0;
    pub const I8: u32 = 1;
    pub const U16: u32 = 2;
    pub const I16: u32 = 3;
    pub const U32: u32 = 4;
    pub const I32: u32 = 5;
    pub const F32: u32 = 6;
    pub const BOOL: u32 = 7;
    pub const STRING: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const U64: u32 = 10;
    pub const I64: u32 = 11;
    pub const F64: u32 = 12;
}

/// One metadata value.
#[allow(missing_docs)]
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(Array),
}

/// A homogeneous metadata array, stored with its element type.
#[allow(missing_docs)]
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    String(Vec<String>),
    /// An array of arrays (each inner array may have its own element type).
    Array(Vec<Array>),
}

impl Value {
    /// The GGUF type id of this value.
    pub fn type_id(&self) -> u32 {
        use type_id::*;
        match self {
            Value::U8(_) => U8,
            Value::I8(_) => I8,
            Value::U16(_) => U16,
            Value::I16(_) => I16,
            Value::U32(_) => U32,
            Value::I32(_) => I32,
            Value::U64(_) => U64,
            Value::I64(_) => I64,
            Value::F32(_) => F32,
            Value::F64(_) => F64,
            Value::Bool(_) => BOOL,
            Value::String(_) => STRING,
            Value::Array(_) => ARRAY,
        }
    }

    /// The value as an unsigned integer, if it is a non-negative integer of any width.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v as u64),
            Value::U16(v) => Some(v as u64),
            Value::U32(v) => Some(v as u64),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a float, if it is a number (integers convert).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v as f64),
            Value::F64(v) => Some(v),
            Value::I8(v) => Some(v as f64),
            Value::I16(v) => Some(v as f64),
            Value::I32(v) => Some(v as f64),
            Value::I64(v) => Some(v as f64),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    /// The value as a string slice, if it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an array, if it is one.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

impl Array {
    /// The GGUF type id of the elements.
    pub fn elem_type_id(&self) -> u32 {
        use type_id::*;
        match self {
            Array::U8(_) => U8,
            Array::I8(_) => I8,
            Array::U16(_) => U16,
            Array::I16(_) => I16,
            Array::U32(_) => U32,
            Array::I32(_) => I32,
            Array::U64(_) => U64,
            Array::I64(_) => I64,
            Array::F32(_) => F32,
            Array::F64(_) => F64,
            Array::Bool(_) => BOOL,
            Array::String(_) => STRING,
            Array::Array(_) => ARRAY,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::F64(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements, if the array holds booleans.
    pub fn to_bools(&self) -> Option<Vec<bool>> {
        match self {
            Array::Bool(v) => Some(v.clone()),
            _ => None,
        }
    }

    /// The elements converted to `i64`, if the array holds integers of any width (u64 values above
    /// `i64::MAX` give `None`).
    pub fn to_i64s(&self) -> Option<Vec<i64>> {
        fn conv<T: Copy + TryInto<i64>>(v: &[T]) -> Option<Vec<i64>> {
            v.iter().map(|&x| x.try_into().ok()).collect()
        }
        match self {
            Array::U8(v) => conv(v),
            Array::I8(v) => conv(v),
            Array::U16(v) => conv(v),
            Array::I16(v) => conv(v),
            Array::U32(v) => conv(v),
            Array::I32(v) => conv(v),
            Array::U64(v) => conv(v),
            Array::I64(v) => Some(v.clone()),
            _ => None,
        }
    }
}

//! A bounds-checked little-endian reader over the bytes of a GGUF file.
//!
//! Every read checks the remaining length first, and every count read from the file is checked against the
//! bytes that remain before anything is allocated for it, so no file can cause a panic or an allocation larger
//! than the file itself.

use crate::error::{Error, Result};

/// Position-tracking reader over a byte slice.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next `n` bytes, or a [`Error::Truncated`] naming `what`.
    pub(crate) fn take(&mut self, n: u64, what: &dyn Fn() -> String) -> Result<&'a [u8]> {
        if n > self.remaining() as u64 {
            return Err(Error::Truncated {
                what: what(),
                offset: self.pos as u64,
                needed: n,
                len: self.buf.len() as u64,
            });
        }
        let n = n as usize;
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N]> {
        let bytes = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, what: &dyn Fn() -> String) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    pub(crate) fn u16(&mut self, what: &dyn Fn() -> String) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    pub(crate) fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    pub(crate) fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }
    pub(crate) fn f32(&mut self, what: &dyn Fn() -> String) -> Result<f32> {
        Ok(f32::from_le_bytes(self.array(what)?))
    }
    pub(crate) fn f64(&mut self, what: &dyn Fn() -> String) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array(what)?))
    }

    /// A GGUF string: u64 length, then that many bytes of UTF-8.
    pub(crate) fn string(&mut self, what: &dyn Fn() -> String) -> Result<String> {
        let len = self.u64(&|| format!("length of {}", what()))?;
        let start = self.pos;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| {
            Error::Malformed(format!("{} at offset {start} is not valid UTF-8", what()))
        })
    }

    /// Checks that `count` items of at least `min_item_bytes` each can still fit in the file, so a count read
    /// from the file may size an allocation.
    pub(crate) fn check_count(
        &self,
        count: u64,
        min_item_bytes: u64,
        what: &dyn Fn() -> String,
    ) -> Result<usize> {
        let fits = count
            .checked_mul(min_item_bytes)
            .is_some_and(|b| b <= self.remaining() as u64);
        if !fits {
            return Err(Error::Malformed(format!(
                "{} = {count} at offset {} cannot fit in the {} bytes that remain",
                what(),
                self.pos,
                self.remaining()
            )));
        }
        Ok(count as usize)
    }
}

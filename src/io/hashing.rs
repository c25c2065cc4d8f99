//! Content hashes of input files: a scan and a reference record the sha256 of the model they read.

use crate::error::{Error, Result};
use std::path::Path;

/// Lowercase hex sha256 of the contents of a regular file (anything else is refused, never read).
pub fn sha256_file(path: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut f = super::input_file::open_regular(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(format!("{:x}", h.finalize()))
}

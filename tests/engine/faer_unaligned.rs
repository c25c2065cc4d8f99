//! A minimal reproducer for faer's GEMM on slices that are not 64-byte aligned, the way the engine's operands
//! are (views into plain vectors at arbitrary element offsets).
//!
//! On an AVX-512 machine faer's x86 backend was seen to fault on such slices, which is one reason the engine's
//! products do not run on faer (the other, measured, is in the README's speed section). The products run in a
//! child process (this test binary re-run with `FAER_UNALIGNED_CHILD` set), so a fault is observed instead of
//! ending the test run. The test pins down the behaviour of the faer version in use:
//! - without AVX-512, every product must complete and match a plain triple loop to `TOL`;
//! - with AVX-512, it records whether the products complete, printing the outcome, and asserts that a completed
//!   run is correct: a fault there is the documented behaviour, a wrong result never is.

use std::process::Command;

/// Environment variable that makes this binary run the products instead of spawning them.
const CHILD: &str = "FAER_UNALIGNED_CHILD";

/// Relative tolerance against the triple loop (f32 sums of at most 640 products of values in [-1, 1]).
const TOL: f32 = 1e-4;

/// `(m, k, n)` shapes of the engine's products: a projection tile and attention scores and values.
const SHAPES: [(usize, usize, usize); 4] =
    [(512, 576, 64), (64, 64, 512), (64, 512, 64), (7, 33, 19)];

/// A deterministic value in [-1, 1).
fn noise(i: usize) -> f32 {
    ((i * 7919 + 13) % 1000) as f32 / 500.0 - 1.0
}

/// Runs `out = a · bᵀ` through faer for every shape with every operand starting 1 to 3 elements past an
/// allocation's start, and checks each against the triple loop.
fn products() -> Result<(), String> {
    for (m, k, n) in SHAPES {
        for offset in 1..4 {
            let a: Vec<f32> = (0..offset + m * k).map(noise).collect();
            let b: Vec<f32> = (0..offset + n * k).map(|i| noise(i + 5)).collect();
            let mut out = vec![0.0f32; offset + m * n];
            let (a_s, b_s) = (&a[offset..], &b[offset..]);
            faer::linalg::matmul::matmul(
                faer::MatMut::from_row_major_slice_mut(&mut out[offset..], m, n),
                faer::Accum::Replace,
                faer::MatRef::from_row_major_slice(a_s, m, k),
                faer::MatRef::from_row_major_slice(b_s, n, k).transpose(),
                1.0,
                faer::Par::Seq,
            );
            for r in 0..m {
                for c in 0..n {
                    let want: f32 = (0..k).map(|i| a_s[r * k + i] * b_s[c * k + i]).sum();
                    let got = out[offset + r * n + c];
                    if (got - want).abs() > TOL * (1.0 + want.abs()) {
                        return Err(format!(
                            "shape {m}x{k}x{n}, offset {offset}: element ({r}, {c}) is {got}, want {want}"
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

#[test]
fn faer_gemm_on_unaligned_slices() {
    if std::env::var_os(CHILD).is_some() {
        if let Err(e) = products() {
            panic!("{e}");
        }
        return;
    }
    // The test's name in this binary: its module path without the crate's name.
    let name = format!(
        "{}::faer_gemm_on_unaligned_slices",
        module_path!()
            .split_once("::")
            .expect("a module of the engine binary")
            .1
    );
    let output = Command::new(std::env::current_exe().expect("test binary"))
        .args([name.as_str(), "--exact", "--nocapture"])
        .env(CHILD, "1")
        .output()
        .expect("spawn the test binary");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let wrong = stdout.contains("want") || stderr.contains("want");
    assert!(!wrong, "faer gave a wrong product:\n{stdout}\n{stderr}");
    #[cfg(target_arch = "x86_64")]
    let avx512 = std::arch::is_x86_feature_detected!("avx512f");
    #[cfg(not(target_arch = "x86_64"))]
    let avx512 = false;
    if avx512 {
        println!(
            "faer 0.24 on AVX-512: products on unaligned slices {} ({})",
            if output.status.success() {
                "complete and match the triple loop"
            } else {
                "fault"
            },
            output.status
        );
    } else {
        assert!(
            output.status.success(),
            "faer's products failed without AVX-512 ({}):\n{stdout}\n{stderr}",
            output.status
        );
    }
}

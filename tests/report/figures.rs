//! Figures of the example scan: well-formed standalone SVG with axes and labels, honest downsampling notes,
//! and `ropescope figures` writing them.

use ropescope::report::catalog::{self, Options};
use ropescope::report::data::ScanData;
use ropescope_test_support::report::{check_xml, example, H, L, M, N};

#[test]
fn every_figure_is_well_formed_svg_with_axes() {
    let dir = example();
    let data = ScanData::open(dir.path()).unwrap();
    let figures = catalog::all(&data, Options { max_map_side: None });
    // Model-wide: plane, slash over Δ, q and k usage per layer plus their layer overviews; per head: six figures.
    assert_eq!(figures.len(), 2 + 2 * (L + 1) + L * H * 6);
    for f in &figures {
        let svg = f
            .content
            .as_ref()
            .unwrap_or_else(|why| panic!("{}: {why}", f.name));
        check_xml(svg).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        assert!(
            svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
            "{}",
            f.name
        );
        assert!(svg.matches("<line").count() >= 4, "{}: no ticks", f.name);
        assert!(svg.matches("<text").count() >= 5, "{}: no labels", f.name);
    }
}

#[test]
fn attention_maps_say_they_are_downsampled() {
    let dir = example();
    let data = ScanData::open(dir.path()).unwrap();
    let full = catalog::head(&data, 0, 0, Options { max_map_side: None });
    let svg = full[0].content.as_ref().unwrap();
    assert_eq!(full[0].name, "L0H0_attention_natural");
    assert!(svg.contains(&format!("N = {N} tokens")));
    assert!(svg.contains(&format!(
        "downsampled: {M}×{M} cells, each the mean of a 2×2 block"
    )));
    assert!(svg.contains("data:image/png;base64,"), "heatmap raster");
    assert!(svg.contains(">attn</text>"), "colour bar label");
    let small = catalog::head(
        &data,
        0,
        0,
        Options {
            max_map_side: Some(4),
        },
    );
    assert!(small[0]
        .content
        .as_ref()
        .unwrap()
        .contains("4×4 cells, each the mean of a 8×8 block"));
}

#[test]
fn figures_command_writes_one_svg_per_figure() {
    let dir = example();
    let out = dir.path().join("svg");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .args(["figures"])
        .arg(dir.path())
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    // The figures and their record, figures.json.
    assert_eq!(names.len(), 2 + 2 * (L + 1) + L * H * 6 + 1);
    for n in [
        "posym_plane.svg",
        "slash_by_delta.svg",
        "frequency_usage_q_L1.svg",
        "L1H0_slash.svg",
        "L1H2_attention_random.svg",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} missing");
    }
}

/// The model-wide slash profile: at every Δ, the mean over heads and the largest head of `slash_{set}.npy`.
#[test]
fn slash_over_delta_is_the_mean_and_largest_head_of_the_files() {
    let dir = example();
    let data = ScanData::open(dir.path()).unwrap();
    let spec = catalog::model_wide_specs(&data)
        .into_iter()
        .find(|f| f.name == "slash_by_delta")
        .unwrap()
        .spec
        .unwrap();
    let ropescope::report::spec::Plot::Lines { series, reference } = spec.plot else {
        panic!("a line plot")
    };
    assert_eq!(reference.map(|r| r.0), Some(data.meta.parameters.kappa));
    let a = ropescope::io::npy::Array::read(&dir.path().join("slash_natural.npy")).unwrap();
    let (w, v) = (a.shape[2], a.to_f64());
    let heads = v.len() / w;
    for d in 0..w {
        let column: Vec<f64> = (0..heads).map(|h| v[h * w + d]).collect();
        let mean = column.iter().sum::<f64>() / heads as f64;
        assert!((series[0].1[d] - mean).abs() < 1e-15);
        assert_eq!(series[1].1[d], column.iter().cloned().fold(0.0, f64::max));
    }
    assert_eq!(series.len(), 4, "natural and random");
}

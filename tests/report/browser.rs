//! The report as a user sees it: headless Chromium opens `report.html` from disk, with networking off, takes a
//! screenshot of the first screen and dumps the rendered DOM. The page must render without console errors,
//! show the findings and the grid, and draw a head's figures when its card is opened. Chromium is the Debian
//! package `chromium` (`fixtures/chromium.sh` installs it); without it these tests fail, unless
//! `ROPESCOPE_SKIP_BROWSER=1`, when they say they skipped. How fast the page paints is measured by
//! `cargo bench --bench report_page`, not here; here its size is held to a budget.

use ropescope_test_support::paths;
use ropescope_test_support::report::browser::{chromium, console_errors, dump_dom, file_url, run};
use ropescope_test_support::report::headlines;
use ropescope_test_support::report::{example, write_scan, SMOLLM2};
use std::path::PathBuf;

/// Largest page for the default SmolLM2 scan (270 heads): the 5 MB.
const PAGE_BUDGET: u64 = 5_000_000;

/// The example, or a real scan directory given by `ROPESCOPE_REPORT_DIR` (its report is rewritten).
fn scan_dir() -> (tempfile::TempDir, PathBuf) {
    let example_dir = example();
    let dir = std::env::var_os("ROPESCOPE_REPORT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| example_dir.path().to_path_buf());
    (example_dir, dir)
}

/// The first `<section>` whose id is `id`, up to its end.
fn card<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom
        .find(&format!("<section class=\"head\" id=\"{id}\""))
        .unwrap_or_else(|| panic!("card {id} missing"));
    &dom[start..start + dom[start..].find("</section>").unwrap()]
}

#[test]
fn report_renders_in_headless_chromium() {
    let Some(chromium) = chromium() else { return };
    let (_example, dir) = scan_dir();
    let page = ropescope::report::write_report(&dir).unwrap();
    let work = tempfile::tempdir().unwrap();
    let shot = work.path().join("report.png");
    let (_, log) = run(
        &chromium,
        &work.path().join("profile-shot"),
        &file_url(&page, None),
        &[format!("--screenshot={}", shot.display())],
    );
    assert!(
        console_errors(&log).is_empty(),
        "console errors: {:?}",
        console_errors(&log)
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(
        &png[16..24],
        &[0, 0, 5, 0x78, 0, 0, 3, 0xe8],
        "1400×1000 screenshot"
    );
    // A blank page compresses to a few kilobytes; the findings' tables and chart do not.
    assert!(
        png.len() > 30_000,
        "screenshot is only {} bytes: blank page?",
        png.len()
    );

    let dom = dump_dom(
        &chromium,
        &work.path().join("profile-dom"),
        &file_url(&page, None),
    );
    assert!(
        dom.contains("<table id=\"grid\">"),
        "grid missing from the rendered DOM"
    );
    assert!(dom.contains("href=\"#L1H0\""), "grid links missing");
    // The layer overviews of frequency usage are open: drawn at load, a raster in an SVG.
    let overview = &dom[dom
        .find("<figure id=\"frequency_usage_q_layers\">")
        .unwrap()..];
    assert!(
        overview.starts_with("<figure id=\"frequency_usage_q_layers\"><svg"),
        "frequency-usage overview not drawn"
    );
    assert!(
        overview.contains("data:image/png;base64,"),
        "heatmap raster missing"
    );
    // Closed cards are not drawn.
    assert!(
        dom.contains("<figure id=\"L0H0_attention_natural\"></figure>"),
        "a closed card was drawn"
    );
    if let Ok(keep) = std::env::var("ROPESCOPE_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, keep).unwrap();
    }
}

#[test]
fn opening_a_head_card_draws_its_figures() {
    let Some(chromium) = chromium() else { return };
    let dir = example();
    let page = ropescope::report::write_report(dir.path()).unwrap();
    let work = tempfile::tempdir().unwrap();
    // As from a grid cell or a head link: the page opened at the card's fragment.
    let dom = dump_dom(
        &chromium,
        &work.path().join("profile"),
        &file_url(&page, Some("L1H0")),
    );
    let opened = card(&dom, "L1H0");
    let details = &opened[opened.find("<details").unwrap()..];
    assert!(
        details[..details.find('>').unwrap()].contains(" open=\"\""),
        "card not opened"
    );
    for name in [
        "attention_natural",
        "attention_random",
        "slash",
        "chunk_norms",
        "spectrum",
        "rank",
    ] {
        assert!(
            opened.contains(&format!("<figure id=\"L1H0_{name}\"><svg")),
            "L1H0_{name} not drawn"
        );
    }
    // The map is the file's 16×16 map (the example's 32 tokens in 2×2 cells), coloured to the head's own
    // maximum below the first row (whose cell causality fixes).
    assert!(opened.contains("queries 0–31, all their keys"));
    assert!(opened.contains("each the mean of a 2×2 block"));
    assert!(opened.contains("the largest cell below row 0"));
    assert!(opened.contains("(row 0 is 0.500 in any head: queries 0–1 see only keys 0–1)"));
    assert!(
        opened.matches("data:image/png;base64,").count() >= 2,
        "both maps rastered"
    );
    // The other cards stay closed and empty.
    assert!(card(&dom, "L0H0").contains("<figure id=\"L0H0_slash\"></figure>"));
}

#[test]
fn a_clicked_column_sorts_its_table() {
    let Some(chromium) = chromium() else { return };
    let dir = example();
    let page = ropescope::report::write_report(dir.path()).unwrap();
    // The page, plus a script that clicks the "sink" header of the all-heads table twice (descending) and
    // lists the rows' heads.
    let html = std::fs::read_to_string(&page).unwrap();
    let click = "<script>var t=document.querySelector('#all-heads table'),th=t.rows[0].cells[5];\
                 th.click();th.click();var p=document.createElement('pre');p.id='order';\
                 p.textContent=Array.prototype.slice.call(t.rows,1).map(function(r){return r.cells[0].textContent;}).join(',');\
                 document.body.appendChild(p);</script></body>";
    let clicked = dir.path().join("clicked.html");
    std::fs::write(&clicked, html.replace("</body>", click)).unwrap();
    let work = tempfile::tempdir().unwrap();
    let dom = dump_dom(
        &chromium,
        &work.path().join("profile"),
        &file_url(&clicked, None),
    );
    let start = dom.find("<pre id=\"order\">").unwrap() + "<pre id=\"order\">".len();
    let order: Vec<&str> = dom[start..start + dom[start..].find('<').unwrap()]
        .split(',')
        .collect();
    // The example's sinks: L1H1 (0.782) then L0H1 (0.712) lead by sink score.
    assert_eq!(&order[..2], ["L1 H1", "L0 H1"], "{order:?}");
    assert_eq!(order.len(), 6);
}

#[test]
fn rendered_headlines_equal_the_json_files() {
    let Some(chromium) = chromium() else { return };
    let (_example, dir) = scan_dir();
    let page = ropescope::report::write_report(&dir).unwrap();
    let work = tempfile::tempdir().unwrap();
    let dom = dump_dom(
        &chromium,
        &work.path().join("profile"),
        &file_url(&page, None),
    );
    let checked = headlines::check(&dom, &dir);
    assert!(checked >= 8, "{checked} numbers checked");
}

/// The page of a scan of SmolLM2's default shape (270 heads, 256×256 maps of 512-token prompts, 32 chunks,
/// every analysis) stays within [`PAGE_BUDGET`]. The page's bytes depend only on the directory, so this holds
/// on any machine; the real SmolLM2 page is measured with `cargo bench --bench report_page`.
#[test]
fn page_of_a_smollm2_sized_scan_stays_within_budget() {
    let dir = tempfile::tempdir().unwrap();
    write_scan(dir.path(), &SMOLLM2);
    let page = ropescope::report::write_report(dir.path()).unwrap();
    let bytes = std::fs::metadata(&page).unwrap().len();
    let heads = (SMOLLM2.layers * SMOLLM2.heads) as u64;
    eprintln!(
        "SmolLM2-sized page: {bytes} bytes, {} per head",
        bytes / heads
    );
    assert!(
        bytes <= PAGE_BUDGET,
        "{bytes} bytes for {heads} heads: over {PAGE_BUDGET}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        html.matches("<section class=\"head\"").count() as u64,
        heads
    );
}

/// A model with NoPE layers as a user sees it (SmolLM3 converted by llama.cpp's converter, layers 3 and 7 NoPE):
/// the findings open with the RoPE layers against the NoPE layers, the grid names the NoPE rows, and a NoPE
/// head's card draws its maps and says why it has no per-frequency figures.
#[test]
fn nope_layers_are_set_against_rope_layers_in_the_rendered_page() {
    let Some(chromium) = chromium() else { return };
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("scan");
    let page = ropescope_test_support::inputs::scan_converted("smollm3", &out);
    let dom = dump_dom(
        &chromium,
        &work.path().join("profile"),
        &file_url(&page, Some("L3H0")),
    );
    assert!(
        dom.contains("<table id=\"rope-nope\">"),
        "RoPE/NoPE table missing"
    );
    assert!(dom.contains("<tr data-group=\"nope\"><td>NoPE</td><td>3, 7</td>"));
    assert!(dom.contains("<th>L3 NoPE</th>") && dom.contains("<th>L7 NoPE</th>"));
    let opened = card(&dom, "L3H0");
    assert!(
        opened.contains("<figure id=\"L3H0_attention_natural\"><svg"),
        "the NoPE head's map not drawn"
    );
    assert!(opened.contains("layer 3 is a NoPE layer: nothing rotates"));
}

/// A model trained with p-RoPE and layers of two shapes as a user sees it (Gemma 4 converted by llama.cpp's
/// converter: sliding layers of head dimension 16, global layers of 32 whose first 4 of 16 chunks turn): the grid
/// names the global p-RoPE rows, the findings set them against the fully rotating layers, the band table gives
/// the unrotated (NoPE) share its own column, and a global head's card draws its figures at its own width and
/// states its unrotated share.
#[test]
fn a_p_rope_model_with_layers_of_two_shapes_renders_its_unrotated_share() {
    let Some(chromium) = chromium() else { return };
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("scan");
    let page = ropescope_test_support::inputs::scan_converted("gemma4", &out);
    let dom = dump_dom(
        &chromium,
        &work.path().join("profile"),
        &file_url(&page, Some("L2H0")),
    );
    assert!(dom.contains("<th>L2 global p-RoPE 4/16</th>") && dom.contains("<th>L0</th>"));
    assert!(dom.contains("<th>unrotated (NoPE)</th>"), "no NoPE column");
    // The heatmap of all layers is indexed by chunk, each layer type's frequencies stated.
    assert!(
        dom.contains("layers 0–1, 3–4: chunk 0 at g = 1, the slowest turning chunk at g = 3e-4")
    );
    assert!(dom.contains("layers 2, 5: chunk 0 at g = 1, the slowest turning chunk at g = 0.075"));
    // The findings set the fully rotating sliding layers against the partially rotating global ones.
    assert!(dom.contains("<tr data-group=\"rope\"><td>RoPE</td><td>0, 1, 3, 4</td>"));
    assert!(dom.contains("<tr data-group=\"partial\"><td>partial RoPE</td><td>2, 5</td>"));
    let opened = card(&dom, "L2H0");
    for fig in ["chunk_norms", "spectrum", "rank"] {
        assert!(
            opened.contains(&format!("<figure id=\"L2H0_{fig}\"><svg")),
            "{fig} not drawn"
        );
    }
    assert!(
        opened.contains("unrotated (NoPE)"),
        "the card states no NoPE share"
    );
}

/// The reports of the two real models open with the papers' claims, each rendered verdict and value equal to
/// `summary.json`'s, and every other headline of the page equal to its file (two prompts of 64 tokens each,
/// every analysis).
#[test]
fn real_models_reports_open_with_their_claims() {
    let Some(chromium) = chromium() else { return };
    let work = tempfile::tempdir().unwrap();
    for model in [paths::SMOLLM2, paths::GEMMA3] {
        let out = work.path().join(model);
        let mut req = ropescope::scan::ScanRequest::new(paths::model(model));
        req.count = Some(2);
        req.params.prompt_length = 64;
        req.command = vec!["ropescope".into(), "scan".into(), model.into()];
        let summary = ropescope::scan::run(&req, &out, &ropescope::scan::NoProgress).unwrap();
        let page = summary.report.expect("a whole scan has a report");
        let dom = dump_dom(
            &chromium,
            &work.path().join("profile"),
            &file_url(&page, None),
        );
        let checked = headlines::check(&dom, &out);
        assert!(checked >= 20, "{model}: {checked} numbers checked");
    }
}

/// The reports of mixtures of experts open with their headlines equal to their files: Qwen3-MoE (softmax routing
/// over stacked experts), GPT-OSS (sinks, experts with biases) and DeepSeek-V2 (latent
/// attention, shared experts), each converted by llama.cpp's converter and scanned as a user would.
#[test]
fn mixtures_of_experts_reports_open_with_their_headlines() {
    let Some(chromium) = chromium() else { return };
    let work = tempfile::tempdir().unwrap();
    for variant in ["qwen3-moe", "gpt-oss", "deepseek2"] {
        let out = work.path().join(variant);
        let page = ropescope_test_support::inputs::scan_converted(variant, &out);
        // Fails on any console error.
        let dom = dump_dom(
            &chromium,
            &work.path().join("profile"),
            &file_url(&page, None),
        );
        let checked = headlines::check(&dom, &out);
        assert!(checked >= 10, "{variant}: {checked} numbers checked");
    }
}

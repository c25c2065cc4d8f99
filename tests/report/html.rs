//! The report page: self-contained, one grid cell per head linking to its section, and graceful when
//! analyses did not run or files are odd.

use ropescope::report::{write_report, REPORT_FILE};
use ropescope_test_support::report::headlines;
use ropescope_test_support::report::{check_xml, example, H, L};

fn report_of(dir: &std::path::Path) -> String {
    let path = write_report(dir).unwrap();
    assert_eq!(path, dir.join(REPORT_FILE));
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn report_is_self_contained_and_well_formed() {
    let dir = example();
    let html = report_of(dir.path());
    let body = html.strip_prefix("<!DOCTYPE html>\n").expect("doctype");
    check_xml(body).unwrap();
    // The only URL is the SVG namespace, which is an identifier, not a fetch. The one script is inline and
    // fetches nothing: the figures' data are JSON blocks in the page.
    let without_ns = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for bad in [
        "http://",
        "https://",
        "//cdn",
        " src=",
        "<link",
        "@import",
        "url(",
        "fetch(",
        "XMLHttpRequest",
        "import(",
        "<iframe",
    ] {
        assert!(!without_ns.contains(bad), "report contains {bad:?}");
    }
    let scripts: Vec<&str> = html.split("<script").skip(1).collect();
    assert_eq!(
        scripts.iter().filter(|s| s.starts_with('>')).count(),
        1,
        "one inline script"
    );
    assert!(scripts
        .iter()
        .all(|s| s.starts_with('>') || s.starts_with(" type=\"application/json\" id=\"")));
    // Links outside the script: fragments of the page or embedded images.
    let markup: String = without_ns
        .split("<script")
        .enumerate()
        .map(|(i, part)| match i {
            0 => part,
            _ => part.split_once("</script>").map_or("", |(_, after)| after),
        })
        .collect();
    for href in markup.split("href=\"").skip(1) {
        assert!(
            href.starts_with('#') || href.starts_with("data:image/png;base64,"),
            "external href {:?}",
            &href[..href.len().min(30)]
        );
    }
    assert!(html.contains(&"0f".repeat(32)), "model hash");
    assert!(html.contains("delta_max"), "parameters");
    assert!(
        html.contains("<tr><td>natural prompts</td><td>1.25</td><td>83.3%</td></tr>"),
        "meta.json's step_seconds, with each step's share of the scan"
    );
    assert!(
        html.contains("<td>NoPE (p = 0)</td><td>3.5000</td>"),
        "ablation variant with its loss change on a head's card"
    );
}

#[test]
fn grid_has_one_linked_cell_per_head_and_sections_match() {
    let dir = example();
    let html = report_of(dir.path());
    let grid = &html[html.find("<table id=\"grid\">").unwrap()..];
    let grid = &grid[..grid.find("</table>").unwrap()];
    assert_eq!(grid.matches("<td style=\"background:").count(), L * H);
    for l in 0..L {
        for h in 0..H {
            assert_eq!(grid.matches(&format!("href=\"#L{l}H{h}\"")).count(), 1);
            assert_eq!(
                html.matches(&format!("<section class=\"head\" id=\"L{l}H{h}\""))
                    .count(),
                1
            );
        }
    }
    assert!(grid.contains("title=\"L1 H0: slash(3)\""));
    assert!(grid.contains("title=\"L0 H1: sink\""));
    assert!(grid.contains("title=\"L0 H0: previous-token\""));
    // The example's cauchy-schwarz analysis tabled L0H0 only: its card has the tables, the others name the rule.
    let card = |l: usize, h: usize| {
        let start = html
            .find(&format!("<section class=\"head\" id=\"L{l}H{h}\""))
            .unwrap();
        &html[start..start + html[start..].find("</section>").unwrap()]
    };
    assert!(card(0, 0).contains("<td>cauchy-schwarz</td><td>tabled as previous_token"));
    assert!(card(0, 0).contains("<td>(i, i−1)</td><td>60</td><td>0.5000</td>"));
    assert!(card(1, 0).contains(
        "<td>cauchy-schwarz</td><td><span class=\"missing\">not in this analysis's head set (the heads labelled diagonal or previous-token"
    ));
    assert!(
        !html.contains(">not run<"),
        "every analysis of the example ran"
    );
}

#[test]
fn warnings_open_the_page() {
    let dir = example();
    let path = dir.path().join("summary.json");
    let mut summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    summary["warnings"] = serde_json::json!(["cauchy-schwarz ran but tabled no head"]);
    std::fs::write(&path, serde_json::to_vec(&summary).unwrap()).unwrap();
    let html = report_of(dir.path());
    let warning = html
        .find("<li>cauchy-schwarz ran but tabled no head</li>")
        .expect("warning shown");
    assert!(
        warning < html.find("<table id=\"grid\">").unwrap(),
        "before the grid"
    );
}

#[test]
fn missing_analyses_are_noted_not_fatal() {
    let dir = example();
    for f in [
        "attention_map_random.npy",
        "chunk_norms_q_natural.npy",
        "chunk_norms_k_natural.npy",
        "fourier_amplitude_natural.npy",
        "singular_values_q_natural.npy",
        "singular_values_k_natural.npy",
        "chunk_frequency.npy",
        "ablation.json",
        "slash_random.npy",
    ] {
        std::fs::remove_file(dir.path().join(f)).unwrap();
    }
    let path = dir.path().join("summary.json");
    let mut summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for h in summary["heads"].as_array_mut().unwrap() {
        for k in ["posym", "rank", "fourier", "frequency", "detectors"] {
            h[k] = serde_json::Value::Null;
        }
    }
    summary["intrinsic"] = serde_json::Value::Null;
    std::fs::write(&path, serde_json::to_vec(&summary).unwrap()).unwrap();
    let html = report_of(dir.path());
    check_xml(html.strip_prefix("<!DOCTYPE html>\n").unwrap()).unwrap();
    for note in [
        "not run: analysis `posym`",
        "not run: analysis `frequency` (chunk_norms_q_natural.npy absent)",
        "not run: analysis `intrinsic` (attention_map_random.npy absent)",
        "not run: analysis `fourier`",
        "not run: analysis `rank`",
        "not run: analysis `ablation`",
        "not run: analysis `intrinsic`",
    ] {
        assert!(html.contains(note), "{note}");
    }
    assert!(
        html.contains("<figure id=\"L0H0_attention_natural\"></figure>")
            && html.contains("\"name\":\"L0H0_attention_natural\""),
        "the natural map is still drawn"
    );
}

#[test]
fn odd_files_are_errors_naming_the_file() {
    let dir = example();
    let npy = dir.path().join("slash_natural.npy");
    let bytes = std::fs::read(&npy).unwrap();
    std::fs::write(&npy, &bytes[..bytes.len() - 5]).unwrap();
    let err = write_report(dir.path()).unwrap_err().to_string();
    assert!(err.contains("slash_natural.npy"), "{err}");

    let dir = example();
    ropescope::io::npy::write(&dir.path().join("sink_natural.npy"), &[2], &[0.0f64, 1.0]).unwrap();
    ropescope::io::npy::write(
        &dir.path().join("chunk_norms_q_natural.npy"),
        &[5, 3, 4],
        &[0.0f64; 60],
    )
    .unwrap();
    let err = write_report(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("chunk_norms_q_natural.npy") && err.contains("does not fit"),
        "{err}"
    );

    let dir = example();
    std::fs::write(dir.path().join("summary.json"), "{\"heads\": 3}").unwrap();
    let err = write_report(dir.path()).unwrap_err().to_string();
    assert!(err.contains("summary.json"), "{err}");

    let empty = tempfile::tempdir().unwrap();
    let err = write_report(empty.path()).unwrap_err().to_string();
    assert!(err.contains("meta.json"), "{err}");
}

#[test]
fn report_command_writes_the_page() {
    let dir = example();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_ropescope"))
        .arg("report")
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    assert!(dir.path().join(REPORT_FILE).exists());
}

#[test]
fn findings_open_the_page_with_the_files_numbers() {
    let dir = example();
    let html = report_of(dir.path());
    let checked = headlines::check(&html, dir.path());
    assert!(checked >= 8, "{checked} numbers checked");
    let findings = html.find("<section id=\"findings\">").unwrap();
    assert!(
        findings < html.find("<nav id=\"toc\">").unwrap(),
        "findings, then contents"
    );
    assert!(html.find("<nav id=\"toc\">").unwrap() < html.find("<table id=\"grid\">").unwrap());
    assert!(
        html.contains("mean angle to the mean direction 68.8°"),
        "cone in degrees"
    );
    // One unit per quantity: every angle on the page is in degrees, the cards' cone records too.
    assert!(html.contains("q_mean_angle_deg = "));
    assert!(!html.contains("_angle = "), "an angle in radians");
}

/// A directory whose `meta.json` does not record a finished scan, its command and its model's hash (a killed
/// scan's leftovers, an older version's output) is refused by every reader, exit 3, naming what is missing.
#[test]
fn a_directory_without_its_completion_record_is_refused() {
    type Edit = fn(&mut serde_json::Value);
    let edits: [(&str, Edit); 4] = [
        ("\"complete\": true", |m| m["complete"] = false.into()),
        ("\"complete\": true", |m| {
            m.as_object_mut().unwrap().remove("complete");
        }),
        ("the command", |m| {
            m.as_object_mut().unwrap().remove("command");
        }),
        ("sha256", |m| m["model_sha256"] = "".into()),
    ];
    for (needle, edit) in edits {
        let dir = example();
        let path = dir.path().join("meta.json");
        let mut meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        edit(&mut meta);
        std::fs::write(&path, serde_json::to_vec(&meta).unwrap()).unwrap();
        for command in ["report", "figures", "export-notebook", "export-minference"] {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_ropescope"))
                .arg(command)
                .arg(dir.path())
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(3), "{command}: {err}");
            assert!(
                err.contains("not a complete scan directory") && err.contains(needle),
                "{command}: {err}"
            );
        }
        assert!(!dir.path().join(REPORT_FILE).exists());
    }
}

/// The definitions section names every score and parameter with the value this scan used: κ and Δmax, the band
/// edges with the number of chunks in each band per layer type, the posym test's m and τ, the prompts and which
/// of them the multi-pass analyses use, and that the ablation runs without retraining.
#[test]
fn definitions_give_each_parameter_its_value() {
    let dir = example();
    let html = report_of(dir.path());
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("meta.json")).unwrap()).unwrap();
    let section = &html[html.find("<section id=\"glossary\">").expect("glossary")..];
    let section = &section[..section.find("</section>").unwrap()];
    let p = &meta["parameters"];
    assert!(section.contains(&format!("κ = {}", p["kappa"])));
    assert!(section.contains(&format!("Δ = 0..{}", p["delta_max"])));
    assert!(section.contains("m = 8, τ = 0.1"));
    assert!(section.contains("multi-pass analyses: first 2 natural"));
    assert!(section.contains("without retraining"));
    // The example's 4 chunks of heads of 8: g = 10000^(−2l/8) = 1, 0.1, 0.01, 0.001: two high (g ≥ 0.1), one
    // medium (0.01, on the low edge), one low.
    assert!(
        section.contains("layers 0–1: 1 low, 1 medium, 2 high"),
        "{section}"
    );
}

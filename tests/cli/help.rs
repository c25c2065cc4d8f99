//! Every subcommand's `--help` is plain text: no rustdoc link syntax leaks from the doc comments.

use std::process::Command;

#[test]
fn help_texts_have_no_rustdoc_links() {
    let help = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_ropescope"))
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let top = help(&["--help"]);
    let commands: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|&c| c != "help")
        .collect();
    assert!(commands.contains(&"bench-forward"), "{top}");
    for c in commands {
        let text = help(&[c, "--help"]);
        assert!(
            !text.contains("[`"),
            "{c} --help shows a rustdoc link:\n{text}"
        );
    }
}

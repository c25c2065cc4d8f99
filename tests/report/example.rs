//! `fixtures/scan/example/` is exactly what the test generator writes: a small, valid scan directory for
//! trying the report commands by hand. Regenerate it with `ROPESCOPE_REGENERATE_EXAMPLE=1 cargo test --test
//! report -- example`.

use ropescope_test_support::report::{example, example_dir, write_example};

#[test]
fn committed_example_matches_the_generator() {
    if std::env::var_os("ROPESCOPE_REGENERATE_EXAMPLE").is_some() {
        write_example(&example_dir());
    }
    let fresh = example();
    let mut names: Vec<String> = std::fs::read_dir(fresh.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for name in &names {
        let committed = std::fs::read(example_dir().join(name)).unwrap_or_else(|e| {
            panic!("fixtures/scan/example/{name}: {e}; regenerate it (see this file's header)")
        });
        let generated = std::fs::read(fresh.path().join(name)).unwrap();
        assert!(
            committed == generated,
            "fixtures/scan/example/{name} differs from the generator's; regenerate it"
        );
    }
}

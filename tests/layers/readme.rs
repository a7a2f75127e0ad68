//! README.md stays a front page (issue 35, part 8): at most 250 lines, the details on their
//! pages under docs/.

const MAX_LINES: usize = 250;

#[test]
fn the_readme_stays_short() {
    let lines = super::repo_file("README.md").lines().count();
    assert!(
        lines <= MAX_LINES,
        "README.md has {lines} lines, more than {MAX_LINES}: move the details to docs/"
    );
}

//! The docs as a book (issue 30, item 2): `book.toml` builds `docs/` with
//! mdBook (`scripts/mdbook.sh build`, in CI); these tests check what mdBook
//! does not, over the Markdown itself:
//! - every relative link lands on a file, and with a `#fragment` on a
//!   heading of it (mdBook's anchor ids, which GitHub's match for the
//!   headings we write): the chapters (their `{{#include}}`s expanded, as
//!   the book shows them), README, CHANGELOG and infra/README.md;
//! - a chapter links nowhere outside `docs/` (the book holds `docs/` only,
//!   so such a link is a 404 there), and every page under `docs/` is in
//!   `docs/SUMMARY.md`;
//! - the paging recipes and README's example are valid specs, and README
//!   stays the short page it is (the two commands, under 10 KB).
//!
//! A test over the Markdown rather than mdbook-linkcheck: no second tool to
//! build (linkcheck brings an HTTP client), README and the other top-level
//! files are checked too, and it runs with every `cargo nextest run`.

use std::collections::{BTreeSet, HashSet};
use std::path::{Component, Path, PathBuf};

use contracts::spec::PipelineSpec;
use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use super::template_topology::repo_root;

/// Markdown files read on GitHub, outside the book, whose links are checked.
const OUTSIDE: [&str; 3] = ["README.md", "CHANGELOG.md", "infra/README.md"];

/// mdBook's parser options (tables, footnotes, strikethrough, task lists,
/// heading attributes).
fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
}

/// `path` relative to the repository root, with `.` and `..` resolved.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn read(relative: &Path) -> String {
    std::fs::read_to_string(repo_root().join(relative)).unwrap_or_else(|err| panic!("{}: {err}", relative.display()))
}

/// The book's chapters, from the links of `docs/SUMMARY.md`, relative to
/// the repository root.
fn chapters() -> Vec<PathBuf> {
    let summary = read(Path::new("docs/SUMMARY.md"));
    Parser::new_ext(&summary, options())
        .filter_map(|event| match event {
            Event::Start(Tag::Link { dest_url, .. }) => Some(normalise(&Path::new("docs").join(&*dest_url))),
            _ => None,
        })
        .collect()
}

/// A chapter's text as the book shows it: each `{{#include PATH}}` or
/// `{{#include PATH:ANCHOR}}` replaced by the file (or the lines between its
/// `ANCHOR: name` and `ANCHOR_END: name` markers), as mdBook's links
/// preprocessor does.
fn expanded(chapter: &Path) -> Result<String, String> {
    let text = read(chapter);
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(start) = rest.find("{{#include ") {
        out.push_str(&rest[..start]);
        let after = &rest[start + "{{#include ".len()..];
        let end = after.find("}}").ok_or_else(|| format!("{}: an unclosed {{{{#include", chapter.display()))?;
        let argument = after[..end].trim();
        let (file, anchor) = match argument.split_once(':') {
            Some((file, anchor)) => (file, Some(anchor)),
            None => (argument, None),
        };
        let path = normalise(&chapter.parent().unwrap_or(Path::new("")).join(file));
        let included = std::fs::read_to_string(repo_root().join(&path))
            .map_err(|err| format!("{}: includes {}: {err}", chapter.display(), path.display()))?;
        match anchor {
            None => out.push_str(&included),
            Some(anchor) => {
                let lines: Vec<&str> = included
                    .lines()
                    .skip_while(|l| !l.contains(&format!("ANCHOR: {anchor}")))
                    .skip(1)
                    .take_while(|l| !l.contains(&format!("ANCHOR_END: {anchor}")))
                    .collect();
                if lines.is_empty() {
                    return Err(format!("{}: {} has no anchor {anchor}", chapter.display(), path.display()));
                }
                out.push_str(&lines.join("\n"));
            }
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// mdBook's id of a heading's text (`mdbook-html`'s `id_from_content`):
/// lowercase, letters, digits, `_` and `-` kept, whitespace made `-`, the
/// rest dropped.
fn heading_id(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// The anchors a page offers: its headings' ids (a repeated id gets `-1`,
/// `-2`, … as mdBook gives it) and HTML `id="…"` attributes.
fn anchors(text: &str) -> HashSet<String> {
    let mut ids = HashSet::new();
    let mut heading: Option<(String, Option<String>)> = None;
    for event in Parser::new_ext(text, options()) {
        match event {
            Event::Start(Tag::Heading { id, .. }) => heading = Some((String::new(), id.map(|id| id.to_string()))),
            Event::Text(t) | Event::Code(t) => {
                if let Some((content, _)) = heading.as_mut() {
                    content.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((content, explicit)) = heading.take() {
                    let id = explicit.unwrap_or_else(|| heading_id(&content));
                    let mut unique = id.clone();
                    let mut n = 1;
                    while !ids.insert(unique.clone()) {
                        unique = format!("{id}-{n}");
                        n += 1;
                    }
                }
            }
            Event::Html(html) | Event::InlineHtml(html) => {
                for piece in html.split("id=\"").skip(1) {
                    if let Some(end) = piece.find('"') {
                        ids.insert(piece[..end].to_owned());
                    }
                }
            }
            _ => {}
        }
    }
    ids
}

/// The relative links of a page: (line, destination).
fn links(text: &str) -> Vec<(usize, String)> {
    Parser::new_ext(text, options())
        .into_offset_iter()
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                Some((text[..range.start].lines().count().max(1), dest_url.to_string()))
            }
            _ => None,
        })
        .filter(|(_, dest)| !dest.contains("://") && !dest.starts_with("mailto:"))
        .collect()
}

/// The problems of one page's links; `in_book`: the page is a chapter, so a
/// link must stay under `docs/`.
fn check_page(page: &Path, text: &str, in_book: bool, chapters: &BTreeSet<PathBuf>) -> Vec<String> {
    let mut problems = Vec::new();
    for (line, dest) in links(text) {
        let at = format!("{}:{line}: ({dest})", page.display());
        let (file, fragment) = match dest.split_once('#') {
            Some((file, fragment)) => (file, Some(fragment)),
            None => (dest.as_str(), None),
        };
        let target = if file.is_empty() {
            page.to_path_buf()
        } else {
            normalise(&page.parent().unwrap_or(Path::new("")).join(file))
        };
        if !repo_root().join(&target).exists() {
            problems.push(format!("{at}: {} does not exist", target.display()));
            continue;
        }
        if in_book && !target.starts_with("docs") {
            problems.push(format!(
                "{at}: {} is outside docs/, so not in the book: link the chapter that includes it",
                target.display()
            ));
            continue;
        }
        let Some(fragment) = fragment.filter(|f| !f.is_empty()) else { continue };
        if target.extension().is_some_and(|e| e == "md") {
            let target_text = if chapters.contains(&target) {
                match expanded(&target) {
                    Ok(text) => text,
                    Err(err) => {
                        problems.push(err);
                        continue;
                    }
                }
            } else {
                read(&target)
            };
            if !anchors(&target_text).contains(fragment) {
                problems.push(format!("{at}: {} has no heading #{fragment}", target.display()));
            }
        }
    }
    problems
}

/// Every `.md` file under `dir`, relative to the repository root.
fn markdown_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(repo_root().join(&dir)).expect("read docs") {
            let path = dir.join(entry.expect("entry").file_name());
            if repo_root().join(&path).is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_relative_link_lands_on_a_file_and_a_heading() {
    let chapters: BTreeSet<PathBuf> = chapters().into_iter().collect();
    let mut problems = Vec::new();
    for chapter in &chapters {
        match expanded(chapter) {
            Ok(text) => problems.extend(check_page(chapter, &text, true, &chapters)),
            Err(err) => problems.push(err),
        }
    }
    for page in OUTSIDE {
        let page = Path::new(page);
        problems.extend(check_page(page, &read(page), false, &chapters));
    }
    assert!(problems.is_empty(), "broken links:\n  {}", problems.join("\n  "));
}

#[test]
fn every_page_under_docs_is_a_chapter_and_every_chapter_exists() {
    let chapters: BTreeSet<PathBuf> = chapters().into_iter().collect();
    let missing: Vec<_> = chapters.iter().filter(|c| !repo_root().join(c).is_file()).collect();
    assert!(missing.is_empty(), "docs/SUMMARY.md lists chapters that do not exist: {missing:?}");
    let orphans: Vec<_> = markdown_under(Path::new("docs"))
        .into_iter()
        .filter(|page| page != Path::new("docs/SUMMARY.md") && !chapters.contains(page))
        .collect();
    assert!(
        orphans.is_empty(),
        "pages under docs/ that docs/SUMMARY.md does not list (so not in the book): {orphans:?}"
    );
    for reference in contracts::references().into_iter().map(|(name, _)| Path::new("docs/contracts").join(name)) {
        assert!(chapters.contains(&reference), "{} is not a chapter", reference.display());
    }
}

/// The specs of a page: its ```yaml blocks that start with `version:`.
fn specs_in(text: &str) -> Vec<String> {
    text.split("```yaml\n")
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .filter(|block| block.lines().find(|l| !l.starts_with('#')).is_some_and(|l| l.starts_with("version:")))
        .map(str::to_owned)
        .collect()
}

#[test]
fn paging_recipes_are_valid_specs() {
    let page = read(Path::new("docs/paging-recipes.md"));
    let specs = specs_in(&page);
    assert!(specs.len() >= 9, "one spec per recipe, found {}", specs.len());
    let mut kinds = BTreeSet::new();
    for text in &specs {
        let spec = PipelineSpec::from_yaml(text).unwrap_or_else(|err| panic!("{err}:\n{text}"));
        kinds.insert(serde_json::to_value(&spec.strategy).expect("json")["kind"].to_string());
    }
    assert_eq!(kinds.len(), 3, "simple, paged and cursor recipes: {kinds:?}");
    // Each kind of next page the spec knows has a recipe.
    for next in ["link_header", "body_url", "body_token", "last_record", "page_number"] {
        assert!(page.contains(&format!("kind: {next}")), "no recipe pages by {next}");
    }
}

#[test]
fn readme_is_the_two_commands_an_example_and_links() {
    let readme = read(Path::new("README.md"));
    assert!(
        readme.len() < 10 * 1024,
        "README.md is {} bytes: keep it under 10 KB, move the rest into the book",
        readme.len()
    );
    for command in ["cargo run -p tributary-cli -- demo --lake ./lake", "bash .ci/run", "cargo install --path cli"] {
        assert!(readme.contains(&format!("\n{command}")), "README.md lost `{command}`");
    }
    let specs = specs_in(&readme);
    assert_eq!(specs.len(), 1, "README's example");
    let spec = PipelineSpec::from_yaml(&specs[0]).unwrap_or_else(|err| panic!("README's example: {err}"));
    let lines = specs[0].lines().count();
    assert!(lines <= 20, "README's example is {lines} lines");
    assert_eq!(spec.target.dataset, "customers");
}

#[test]
fn anchors_are_mdbooks() {
    assert_eq!(
        heading_id("Where a call may go (`request.allow`, the SSRF guard)"),
        "where-a-call-may-go-requestallow-the-ssrf-guard"
    );
    let ids = anchors("# A\n\n## `kind: paged`\n\n## A\n\n<a id=\"x\"></a>\n");
    for id in ["a", "kind-paged", "a-1", "x"] {
        assert!(ids.contains(id), "{id} in {ids:?}");
    }
}

//! Counts written in prose (how many variants, cells of the matrix, lesson
//! steps) are the code's: each phrase that states one is found where it
//! stands and its number read against the code, so a variant, a cell or a
//! step added without the words following fails here.

use std::path::Path;

const WORDS: [&str; 31] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
    "twenty-one",
    "twenty-two",
    "twenty-three",
    "twenty-four",
    "twenty-five",
    "twenty-six",
    "twenty-seven",
    "twenty-eight",
    "twenty-nine",
    "thirty",
];

/// `n` as an English word, as a number or as an ordinal ("sixteenth").
fn word(n: usize, ordinal: bool) -> String {
    let plain = WORDS.get(n).copied().unwrap_or("many").to_owned();
    if !ordinal {
        return plain;
    }
    let (head, last) = plain
        .rsplit_once('-')
        .map_or(("", plain.as_str()), |(h, l)| (h, l));
    let last = match last {
        "one" => "first".to_owned(),
        "two" => "second".to_owned(),
        "three" => "third".to_owned(),
        "five" => "fifth".to_owned(),
        "eight" => "eighth".to_owned(),
        "nine" => "ninth".to_owned(),
        "twelve" => "twelfth".to_owned(),
        "twenty" => "twentieth".to_owned(),
        "thirty" => "thirtieth".to_owned(),
        other => format!("{other}th"),
    };
    if head.is_empty() {
        last
    } else {
        format!("{head}-{last}")
    }
}

/// Each `(file, before, after, expected)`: the text between `before` and
/// `after` in `file` must be `expected`, wherever the phrase stands, and
/// the phrase must stand there at least once.
pub(crate) fn counts(root: &Path) -> Vec<String> {
    let variants = stocklock::variants::Variant::ALL.len();
    let cells = stocklock::check::cells().len();
    let steps = stocklock::lessons::STEPS.len();
    let phrases: Vec<(&str, &str, &str, String)> = vec![
        (
            "README.md",
            "protected in ",
            " different ways",
            word(variants, false),
        ),
        (
            "docs/README.md",
            "[Variants](variants.md): the ",
            " protections",
            word(variants, false),
        ),
        (
            "docs/variants.md",
            "The ",
            " ways this project protects",
            word(variants, false),
        ),
        (
            "docs/adding-a-variant.md",
            "adding a ",
            " protection strategy",
            word(variants + 1, true),
        ),
        (
            "docs/models.md",
            "The default matrix is ",
            " cells",
            cells.to_string(),
        ),
        // The lessons page renders its count from the path itself
        // (`tests/api/lessons.rs` reads it in both languages); the README
        // says it in words.
        ("README.md", "lock in ", " steps", word(steps, false)),
    ];
    let mut errors = Vec::new();
    for (file, before, after, expected) in phrases {
        let text = std::fs::read_to_string(root.join(file)).unwrap_or_default();
        let mut found = 0;
        for (at, _) in text.match_indices(after) {
            let head = &text[..at];
            let Some(start) = head.rfind(before) else {
                continue;
            };
            let said = &head[start + before.len()..];
            // The phrase only: a number or a word, no sentence in between.
            if said.is_empty() || said.chars().count() > 20 || said.contains(char::is_whitespace) {
                continue;
            }
            found += 1;
            if said != expected {
                let line = head.lines().count();
                errors.push(format!(
                    "{file}:{line}: says \"{before}{said}{after}\"; the code has {expected}"
                ));
            }
        }
        if found == 0 {
            errors.push(format!(
                "{file}: no \"{before}N{after}\" any more: state the count as the code has it ({expected}), or change this check"
            ));
        }
    }
    errors
}

#[test]
fn words_and_ordinals() {
    assert_eq!(word(20, false), "twenty");
    assert_eq!(word(21, true), "twenty-first");
    assert_eq!(word(16, true), "sixteenth");
}

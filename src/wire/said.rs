//! A sentence for people, in both languages of the pages.
//!
//! What the server says to a reader (a judge's evidence, a checker's step,
//! a verdict) is written once in English and once in Chinese where it is
//! made, with the same values in both: [`said!`](crate::said) formats the
//! two. The command line prints the English (`Display`); the pages show
//! the one of their language. On the wire a field `x` keeps its English
//! and `x_zh` carries the Chinese, so what read `x` before reads it still.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One sentence in English and in Chinese.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Said {
    pub en: String,
    pub zh: String,
}

impl Said {
    /// The same text in both languages: an identifier, a number, a name.
    pub fn same(text: impl Into<String>) -> Said {
        let text = text.into();
        Said {
            zh: text.clone(),
            en: text,
        }
    }

    /// Both texts mapped alike (`f` gets each and whether it is Chinese).
    pub fn map(&self, f: impl Fn(&str, bool) -> String) -> Said {
        Said {
            en: f(&self.en, false),
            zh: f(&self.zh, true),
        }
    }

    /// `self` followed by `separator` and `next`, in each language.
    pub fn then(mut self, separator: &Said, next: &Said) -> Said {
        self.en += &separator.en;
        self.en += &next.en;
        self.zh += &separator.zh;
        self.zh += &next.zh;
        self
    }

    /// The parts joined by `separator`, in each language.
    pub fn join<'a>(parts: impl IntoIterator<Item = &'a Said>, separator: &Said) -> Said {
        let mut joined: Option<Said> = None;
        for part in parts {
            joined = Some(match joined {
                None => part.clone(),
                Some(so_far) => so_far.then(separator, part),
            });
        }
        joined.unwrap_or_default()
    }

    pub fn is_empty(&self) -> bool {
        self.en.is_empty() && self.zh.is_empty()
    }

    /// English words left in the Chinese: each Latin word of two letters
    /// or more that is not all capitals (an acronym, a Redis command), not
    /// an identifier (with `_`, `-`, `.`, `/`, `:` or a digit in it), not a
    /// product name or kept term ([`KEPT`]) and not one of `allowed` (the
    /// caller's identifiers: variant and scenario names). The rule the
    /// Chinese pages are read by in Chromium. What stands between backticks
    /// is code, shown as such.
    pub fn stray_english(&self, allowed: &[&str]) -> Vec<String> {
        english_words(&self.zh)
            .into_iter()
            .filter(|word| !allowed.iter().any(|a| a.eq_ignore_ascii_case(word)))
            .collect()
    }
}

/// Names and terms Chinese writing about locks keeps in Latin letters: the
/// products, the units, `token` (the articles write "fencing token"), and
/// the abbreviations `id` and `pid`.
pub const KEPT: [&str; 19] = [
    "stocklock",
    "redis",
    "postgresql",
    "nginx",
    "etcd",
    "zookeeper",
    "lua",
    "redlock",
    "redisson",
    "curator",
    "chromium",
    "java",
    "token",
    "fencing",
    "id",
    "pid",
    "ms",
    "µs",
    "oha",
];

/// The Latin words of `text` that [`Said::stray_english`] counts as English
/// (before the caller's own identifiers are taken out).
pub fn english_words(text: &str) -> Vec<String> {
    // What stands between backticks is code (the pages show it so).
    let prose: String = text.split('`').step_by(2).collect::<Vec<_>>().join(" ");
    let mut words = Vec::new();
    let mut rest = prose.as_str();
    while let Some(start) = rest.find(|c: char| c.is_ascii_alphabetic()) {
        let tail = &rest[start..];
        // Joined to what stands before it (`/metrics`, `--instances`): a path, a flag;
        // or with a path's or a query's marks in it (`/timeline?sku=lua`).
        let joined = rest[..start]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_digit() || "_-./:?=&".contains(c));
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || "_-./:?=&'".contains(c)))
            .unwrap_or(tail.len());
        let word = tail[..end].trim_end_matches(['.', ':', '\'', '/', '-', '?', '=', '&']);
        let identifier = word.contains(|c: char| c.is_ascii_digit() || "_-./:?=&".contains(c));
        let capitals = word == word.to_ascii_uppercase();
        let kept = KEPT.iter().any(|k| k.eq_ignore_ascii_case(word));
        if word.len() >= 2 && !identifier && !joined && !capitals && !kept {
            words.push(word.to_owned());
        }
        rest = &tail[end.max(1)..];
    }
    words
}

/// The English: what the command line prints.
impl fmt::Display for Said {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.en)
    }
}

/// A [`Said`] from two format strings over the same values:
/// `said!("{n} buyers", "{n} 个买家")`, `said!("{} sold", "卖出 {}"; sold)`.
/// Both strings capture names from the caller's scope, like `format!`.
#[macro_export]
macro_rules! said {
    ($en:literal, $zh:literal $(;)?) => {
        $crate::wire::Said { en: format!($en), zh: format!($zh) }
    };
    ($en:literal, $zh:literal; $($arg:expr),+ $(,)?) => {
        $crate::wire::Said { en: format!($en, $($arg),+), zh: format!($zh, $($arg),+) }
    };
}

/// A [`Said`] from two format strings whose positional `{}` each take a
/// [`Said`], in its own language (where [`said!`](crate::said) formats
/// the same value into both); a name captured from the scope (`{n}`) is
/// the same in both. Each part is evaluated once per language.
#[macro_export]
macro_rules! said_of {
    ($en:literal, $zh:literal; $($part:expr),+ $(,)?) => {
        $crate::wire::Said {
            en: format!($en, $(&($part).en),+),
            zh: format!($zh, $(&($part).zh),+),
        }
    };
}

#[cfg(test)]
mod tests {
    use super::Said;

    #[test]
    fn both_languages_take_the_same_values() {
        let n = 3;
        let said = crate::said!("{n} buyers", "{n} 个买家");
        assert_eq!(said.en, "3 buyers");
        assert_eq!(said.zh, "3 个买家");
        let said = crate::said!("{} sold, {} left", "卖出 {},剩 {}"; 2, 8);
        assert_eq!(said.to_string(), "2 sold, 8 left");
        assert_eq!(said.zh, "卖出 2,剩 8");
    }

    #[test]
    fn joined_in_each_language() {
        let parts = [Said::same("a"), crate::said!("b", "乙")];
        let joined = Said::join(&parts, &crate::said!("; ", ";"));
        assert_eq!(joined.en, "a; b");
        assert_eq!(joined.zh, "a;乙");
        assert!(Said::join(&[], &Said::same(",")).is_empty());
    }

    #[test]
    fn stray_english_is_what_is_neither_code_nor_a_name() {
        let said = crate::said!(
            "",
            "A 的 token 在 Redis 里过期(lock_held,SET NX PX),setnx 卖出 3 件 and then,见 /metrics 和 /timeline?sku=lua,`lock` 的 TTL,是吗?"
        );
        assert_eq!(said.stray_english(&["setnx"]), ["and", "then"]);
        assert_eq!(
            said.stray_english(&["setnx", "and", "then"]),
            Vec::<String>::new()
        );
    }
}

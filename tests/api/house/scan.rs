//! The house test's reading of Rust source with plain string handling:
//! comments and literals blanked, then tokens, `use` trees expanded, and
//! every `crate::`, `super::` and `self::` path made absolute.

/// One import: where it is written and the absolute path it names.
#[derive(Debug)]
pub(super) struct Import {
    pub(super) file: String,
    pub(super) line: usize,
    pub(super) written: String,
    pub(super) target: Vec<String>,
}

/// A token of blanked source: an identifier, `::`, or one other character.
#[derive(Debug)]
pub(super) struct Token {
    pub(super) text: String,
    pub(super) line: usize,
}

pub(super) fn tokens(code: &str) -> Vec<Token> {
    let chars: Vec<char> = code.chars().collect();
    let (mut out, mut line, mut at) = (Vec::new(), 1, 0);
    while at < chars.len() {
        let c = chars[at];
        if c == '\n' {
            line += 1;
        }
        if c.is_whitespace() {
            at += 1;
            continue;
        }
        let start = at;
        if c.is_alphanumeric() || c == '_' {
            while at < chars.len() && (chars[at].is_alphanumeric() || chars[at] == '_') {
                at += 1;
            }
        } else if c == ':' && chars.get(at + 1) == Some(&':') {
            at += 2;
        } else {
            at += 1;
        }
        let text = chars[start..at].iter().collect();
        out.push(Token { text, line });
    }
    out
}

/// The paths a file names through `crate::`, `super::` or `self::`, made
/// absolute from the module they are written in (inline `mod x { }` blocks
/// included).
pub(super) fn imports_of(file: &str, module: &[String], text: &str) -> Vec<Import> {
    let tokens = tokens(&blank_comments_and_literals(text));
    let (mut found, mut inline, mut depth, mut at) = (Vec::new(), Vec::new(), 0, 0);
    while at < tokens.len() {
        let here: Vec<String> = module
            .iter()
            .chain(inline.iter().map(|(n, _)| n))
            .cloned()
            .collect();
        let text = tokens[at].text.as_str();
        let after_path = at > 0 && matches!(tokens[at - 1].text.as_str(), "::" | "$");
        match text {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            "mod" if tokens.get(at + 2).is_some_and(|t| t.text == "{") => {
                inline.push((tokens[at + 1].text.clone(), depth));
            }
            "use" if !after_path => {
                let end = (at..tokens.len())
                    .find(|&i| tokens[i].text == ";")
                    .unwrap_or(tokens.len());
                let mut paths = Vec::new();
                use_tree(&tokens[at + 1..end], &mut Vec::new(), &mut paths);
                for (path, line) in paths {
                    push_resolved(&mut found, file, &here, path, line);
                }
                at = end;
            }
            "crate" | "super" | "self"
                if !after_path && tokens.get(at + 1).is_some_and(|t| t.text == "::") =>
            {
                let mut path = vec![text.to_owned()];
                while tokens.get(at + 1).is_some_and(|t| t.text == "::")
                    && tokens.get(at + 2).is_some_and(|t| is_ident(&t.text))
                {
                    path.push(tokens[at + 2].text.clone());
                    at += 2;
                }
                push_resolved(&mut found, file, &here, path, tokens[at].line);
            }
            _ => {}
        }
        at += 1;
    }
    found
}

fn is_ident(text: &str) -> bool {
    text.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Expands a `use` tree (`crate::{a, b::{c, d}}`) into its leaves' paths.
fn use_tree(tokens: &[Token], prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, usize)>) {
    let mut at = 0;
    let depth = prefix.len();
    while at < tokens.len() {
        match tokens[at].text.as_str() {
            "::" => {}
            "{" => {
                let close = matching_brace(tokens, at);
                for part in split_top_level(&tokens[at + 1..close]) {
                    use_tree(part, prefix, out);
                }
                prefix.truncate(depth);
                return;
            }
            "as" => break,
            "*" => {
                prefix.push("*".to_owned());
                break;
            }
            name if is_ident(name) => prefix.push(name.to_owned()),
            _ => break,
        }
        at += 1;
    }
    if prefix.len() > depth {
        let line = tokens.first().map_or(0, |t| t.line);
        out.push((prefix.clone(), line));
    }
    prefix.truncate(depth);
}

fn matching_brace(tokens: &[Token], open: usize) -> usize {
    let mut depth = 0;
    for (at, token) in tokens.iter().enumerate().skip(open) {
        match token.text.as_str() {
            "{" => depth += 1,
            "}" if depth == 1 => return at,
            "}" => depth -= 1,
            _ => {}
        }
    }
    tokens.len()
}

fn split_top_level(tokens: &[Token]) -> Vec<&[Token]> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (at, token) in tokens.iter().enumerate() {
        match token.text.as_str() {
            "{" => depth += 1,
            "}" => depth -= 1,
            "," if depth == 0 => {
                parts.push(&tokens[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&tokens[start..]);
    parts.retain(|part| !part.is_empty());
    parts
}

/// Makes `path` absolute from module `here` and keeps it when it starts
/// at the crate (`crate::`, `super::`, `self::`).
fn push_resolved(
    out: &mut Vec<Import>,
    file: &str,
    here: &[String],
    path: Vec<String>,
    line: usize,
) {
    let written = path.join("::");
    let mut target: Vec<String> = match path[0].as_str() {
        "crate" => Vec::new(),
        "self" | "super" => here.to_vec(),
        _ => return,
    };
    for (at, part) in path.iter().enumerate() {
        match part.as_str() {
            "crate" if at == 0 => {}
            "self" => {}
            "super" => {
                target.pop();
            }
            _ => target.push(part.clone()),
        }
    }
    if !target.is_empty() && target[0] != "*" {
        out.push(Import {
            file: file.to_owned(),
            line,
            written,
            target,
        });
    }
}

/// `source` with its comments and string and character literals replaced
/// by spaces (line breaks kept, so line numbers stay).
pub(super) fn blank_comments_and_literals(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut at = 0;
    let blank = |out: &mut String, span: &[char]| {
        out.extend(span.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while at < chars.len() {
        let c = chars[at];
        let next = chars.get(at + 1).copied();
        let end = if c == '/' && next == Some('/') {
            (at..chars.len())
                .find(|&i| chars[i] == '\n')
                .unwrap_or(chars.len())
        } else if c == '/' && next == Some('*') {
            let (mut i, mut depth) = (at + 2, 1);
            while i < chars.len() && depth > 0 {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 1;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 1;
                }
                i += 1;
            }
            i
        } else if c == 'r'
            && (at == 0 || !ident(chars[at - 1]) || chars[at - 1] == 'b')
            && matches!(next, Some('"' | '#'))
        {
            let hashes = chars[at + 1..].iter().take_while(|&&c| c == '#').count();
            if chars.get(at + 1 + hashes) != Some(&'"') {
                out.push(c);
                at += 1;
                continue;
            }
            let mut i = at + 2 + hashes;
            while i < chars.len()
                && !(chars[i] == '"'
                    && chars[i + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&c| c == '#')
                        .count()
                        == hashes)
            {
                i += 1;
            }
            i + 1 + hashes
        } else if c == '"' {
            let mut i = at + 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i + 1
        } else if c == '\'' && next == Some('\\') {
            (at + 3..chars.len())
                .find(|&i| chars[i] == '\'')
                .map_or(chars.len(), |i| i + 1)
        } else if c == '\'' && chars.get(at + 2) == Some(&'\'') {
            at + 3
        } else {
            out.push(c);
            at += 1;
            continue;
        };
        let end = end.min(chars.len());
        blank(&mut out, &chars[at..end]);
        at = end;
    }
    out
}

//! Just enough Markdown for the docs' checks: fenced blocks, paragraphs
//! with their code spans (which may wrap across lines), headings and their
//! GitHub anchors, and tables. No dependency: the docs' own conventions
//! are narrow enough to read by hand.

/// One line of a page and where it sits.
#[derive(Clone, Debug)]
pub(crate) struct Line<'a> {
    /// 1-based, for error messages.
    pub(crate) number: usize,
    pub(crate) text: &'a str,
    /// Inside a fenced block: the block's info string (`sh`, `rust`, ``).
    pub(crate) code: Option<&'a str>,
    /// The fence line itself (opening or closing).
    pub(crate) fence: bool,
}

/// A page's lines, each marked with the fenced block it belongs to.
pub(crate) fn lines(text: &str) -> Vec<Line<'_>> {
    let mut open: Option<(char, usize, &str)> = None;
    let mut out = Vec::new();
    for (i, text) in text.lines().enumerate() {
        let trimmed = text.trim_start();
        let run = |c: char| trimmed.chars().take_while(|&x| x == c).count();
        let fence = ['`', '~']
            .into_iter()
            .map(|c| (c, run(c)))
            .find(|&(_, n)| n >= 3);
        let number = i + 1;
        match (open, fence) {
            (Some((c, n, info)), Some((f, m)))
                if f == c && m >= n && trimmed[m..].trim().is_empty() =>
            {
                out.push(Line {
                    number,
                    text,
                    code: Some(info),
                    fence: true,
                });
                open = None;
            }
            (Some((_, _, info)), _) => out.push(Line {
                number,
                text,
                code: Some(info),
                fence: false,
            }),
            (None, Some((c, n))) => {
                let info = trimmed[n..].trim();
                let info = info.split_whitespace().next().unwrap_or("");
                open = Some((c, n, info));
                out.push(Line {
                    number,
                    text,
                    code: Some(info),
                    fence: true,
                });
            }
            (None, None) => out.push(Line {
                number,
                text,
                code: None,
                fence: false,
            }),
        }
    }
    out
}

/// A run of prose lines between blank lines or blocks, joined with `\n`.
pub(crate) struct Paragraph {
    pub(crate) text: String,
    /// The line number each line of `text` starts at, with its offset.
    starts: Vec<(usize, usize)>,
}

impl Paragraph {
    /// The line number of a byte offset into `text`.
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        let i = self.starts.partition_point(|&(start, _)| start <= offset);
        self.starts[i.saturating_sub(1)].1
    }

    /// Its code spans: (offset of the opening backticks, content with
    /// line breaks as spaces), in order.
    pub(crate) fn code_spans(&self) -> Vec<(usize, String)> {
        spans(&self.text)
            .into_iter()
            .map(|(start, _, (a, b))| (start, self.text[a..b].replace('\n', " ").trim().to_owned()))
            .collect()
    }

    /// `text` with every code span blanked out (same length, same offsets).
    pub(crate) fn without_code(&self) -> String {
        let mut bytes = self.text.clone().into_bytes();
        for (start, end, _) in spans(&self.text) {
            for b in &mut bytes[start..end] {
                if *b != b'\n' {
                    *b = b' ';
                }
            }
        }
        String::from_utf8(bytes).expect("only ASCII was replaced by ASCII")
    }
}

/// Code spans in `text`: (start, end, (inner start, inner end)) byte ranges.
fn spans(text: &str) -> Vec<(usize, usize, (usize, usize))> {
    let bytes = text.as_bytes();
    let run_at = |i: usize| bytes[i..].iter().take_while(|&&b| b == b'`').count();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let n = run_at(i);
        let mut j = i + n;
        let mut close = None;
        while j < bytes.len() {
            if bytes[j] == b'`' {
                let m = run_at(j);
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                out.push((i, j + n, (i + n, j)));
                i = j + n;
            }
            None => i += n,
        }
    }
    out
}

/// The page's paragraphs: prose outside fenced blocks, split at blank
/// lines, headings and table rows staying in their paragraph.
pub(crate) fn paragraphs(lines: &[Line<'_>]) -> Vec<Paragraph> {
    let mut out = Vec::new();
    let mut current = Paragraph {
        text: String::new(),
        starts: Vec::new(),
    };
    for line in lines {
        if line.code.is_some() || line.text.trim().is_empty() {
            if !current.starts.is_empty() {
                out.push(std::mem::replace(
                    &mut current,
                    Paragraph {
                        text: String::new(),
                        starts: Vec::new(),
                    },
                ));
            }
            continue;
        }
        if !current.starts.is_empty() {
            current.text.push('\n');
        }
        current.starts.push((current.text.len(), line.number));
        current.text.push_str(line.text);
    }
    if !current.starts.is_empty() {
        out.push(current);
    }
    out
}

/// An ATX heading's text (`## The ledger` → `The ledger`).
pub(crate) fn heading(line: &str) -> Option<&str> {
    let trimmed = line.trim_start();
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let level = trimmed.chars().take_while(|&c| c == '#').count();
    let rest = &trimmed[level..];
    if !(1..=6).contains(&level) || !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    Some(rest.trim().trim_end_matches('#').trim())
}

/// GitHub's anchor for a heading: the rendered text lowercased, every
/// character but letters, digits, spaces, `-` and `_` dropped, spaces
/// turned into `-`.
pub(crate) fn slug(heading: &str) -> String {
    plain(heading)
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A heading's rendered text: links by their text, no backticks, no
/// emphasis stars, no HTML tags.
fn plain(heading: &str) -> String {
    let mut out = String::new();
    let mut rest = heading;
    while let Some(c) = rest.chars().next() {
        if c == '<'
            && let Some(end) = rest.find('>')
        {
            rest = &rest[end + 1..];
            continue;
        }
        if c == ']'
            && rest[1..].starts_with('(')
            && let Some(end) = rest.find(')')
        {
            rest = &rest[end + 1..];
            continue;
        }
        if !matches!(c, '[' | '`' | '*') {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Every anchor a page offers: its headings' slugs (a repeated one gets
/// `-1`, `-2`, ...) and the ids of `<a id=...>` / `<a name=...>`.
pub(crate) fn anchors(text: &str) -> Vec<String> {
    let lines = lines(text);
    let mut out: Vec<String> = Vec::new();
    for line in lines.iter().filter(|l| l.code.is_none()) {
        if let Some(heading) = heading(line.text) {
            let base = slug(heading);
            let mut candidate = base.clone();
            let mut n = 0;
            while out.contains(&candidate) {
                n += 1;
                candidate = format!("{base}-{n}");
            }
            out.push(candidate);
        }
        let mut rest = line.text;
        while let Some(at) = rest.find("<a ") {
            rest = &rest[at + 3..];
            let tag = &rest[..rest.find('>').unwrap_or(rest.len())];
            for attribute in ["id=", "name="] {
                if let Some(value) = attribute_value(tag, attribute) {
                    out.push(value.to_owned());
                }
            }
        }
    }
    out
}

/// The quoted value of `name=` in an HTML tag's attributes.
pub(crate) fn attribute_value<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(at) = tag[from..].find(name) {
        let start = from + at;
        from = start + name.len();
        let before = tag[..start].chars().last();
        if before.is_some_and(|c| !c.is_whitespace()) {
            continue;
        }
        let rest = &tag[from..];
        let quote = rest.chars().next()?;
        if quote != '"' && quote != '\'' {
            return None;
        }
        return rest[1..].find(quote).map(|end| &rest[1..1 + end]);
    }
    None
}

/// The cells of a table row, split at `|` outside code spans and escapes.
pub(crate) fn cells(row: &str) -> Vec<String> {
    let row = row.trim();
    let row = row.strip_prefix('|').unwrap_or(row);
    let mut out = Vec::new();
    let mut cell = String::new();
    let mut ticks = 0;
    let mut chars = row.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cell.push('|');
                chars.next();
            }
            '`' => {
                ticks ^= 1;
                cell.push(c);
            }
            '|' if ticks == 0 => out.push(std::mem::take(&mut cell).trim().to_owned()),
            _ => cell.push(c),
        }
    }
    if !cell.trim().is_empty() {
        out.push(cell.trim().to_owned());
    }
    out
}

/// A table's delimiter row (`|---|:--:|`).
pub(crate) fn is_delimiter(row: &str) -> bool {
    let cells = cells(row);
    !cells.is_empty()
        && cells.iter().all(|c| {
            let c = c.trim_matches(':');
            !c.is_empty() && c.chars().all(|x| x == '-')
        })
}

/// A table found on a page: its header cells and its rows (line, cells).
pub(crate) struct Table {
    pub(crate) line: usize,
    pub(crate) header: Vec<String>,
    pub(crate) rows: Vec<(usize, Vec<String>)>,
}

pub(crate) fn tables(lines: &[Line<'_>]) -> Vec<Table> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < lines.len() {
        let (head, delimiter) = (&lines[i], &lines[i + 1]);
        let is_row = |l: &Line<'_>| l.code.is_none() && l.text.trim_start().starts_with('|');
        if !(is_row(head) && is_row(delimiter) && is_delimiter(delimiter.text)) {
            i += 1;
            continue;
        }
        let mut table = Table {
            line: head.number,
            header: cells(head.text),
            rows: Vec::new(),
        };
        i += 2;
        while i < lines.len() && is_row(&lines[i]) {
            table.rows.push((lines[i].number, cells(lines[i].text)));
            i += 1;
        }
        out.push(table);
    }
    out
}

/// The first word of a cell, as a name: the first code span's content if
/// there is one, else the text without emphasis.
pub(crate) fn cell_name(cell: &str) -> String {
    if let Some((_, _, (a, b))) = spans(cell).first() {
        return cell[*a..*b].trim().to_owned();
    }
    cell.replace('*', " ")
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_owned()
}

/// Every code span's content in a block of text.
pub(crate) fn code_words(text: &str) -> Vec<String> {
    spans(text)
        .into_iter()
        .map(|(_, _, (a, b))| text[a..b].trim().to_owned())
        .collect()
}

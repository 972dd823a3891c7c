//! A timeline as one self-contained HTML file: the drawing script, the
//! styles and the data inline, so a teacher can put it on a slide or send
//! it, and it opens offline.

use askama::Template;

use super::Timeline;

#[derive(Template)]
#[template(path = "timeline_export.html")]
struct Export {
    sku: String,
    /// The timeline as JSON, safe inside a `<script>` element.
    data_json: String,
    script: String,
    css: String,
    generated: String,
    ledger_rows: Vec<(String, String)>,
}

/// The export of `timeline`, saying it was `generated` then (a UTC time).
/// The live timeline's (`/api/timeline/export`) and the checker's traces.
pub fn render(timeline: &Timeline, generated: &str) -> Result<String, String> {
    let json = serde_json::to_string(timeline).map_err(|err| format!("timeline: {err}"))?;
    let s = &timeline.state;
    let row = |label: &str, value: String| (label.to_owned(), value);
    let page = Export {
        sku: timeline.sku.clone(),
        data_json: embeddable(&json),
        script: include_str!("../../static/timeline.js").to_owned(),
        css: format!(
            "{}\n{}",
            include_str!("../../static/style.css"),
            include_str!("../../static/timeline.css")
        ),
        generated: generated.to_owned(),
        ledger_rows: vec![
            row("verdict", timeline.verdict.clone()),
            row("initial", s.initial.to_string()),
            row("sold", s.sold.to_string()),
            row("remaining", s.remaining.to_string()),
            row("oversold", s.oversold.to_string()),
            row("duplicates", s.duplicates.to_string()),
            row("busy", s.busy.to_string()),
            row("sections", timeline.sections.len().to_string()),
            row("overlapping pairs", timeline.overlap_count.to_string()),
        ],
    };
    page.render().map_err(|err| format!("template: {err}"))
}

/// JSON that cannot end the `<script>` element it sits in: every `<`
/// escaped (JSON reads `\u003c` as `<`).
fn embeddable(json: &str) -> String {
    json.replace('<', "\\u003c")
}

#[cfg(test)]
mod tests {
    #[test]
    fn embedded_json_cannot_close_its_script_element() {
        let json = r#"{"detail":"</script><script>alert(1)</script>"}"#;
        let safe = super::embeddable(json);
        assert!(!safe.contains("</script"));
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back["detail"], "</script><script>alert(1)</script>");
    }
}

//! One row of the bench: two sides alternated run by run, the medians of
//! their runs and the ratio, and the table's line for it (with its column
//! names above the rows).

use serde::Serialize;

use super::median;

/// One row: our side against theirs, alternated run by run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// A stable name (`lua-vs-healthz`, ...).
    pub row: String,
    /// What each side measured: ours, theirs.
    pub sides: [String; 2],
    pub unit: String,
    /// The median of our side's runs.
    pub ours: f64,
    /// The median of their side's runs.
    pub theirs: f64,
    /// `ours / theirs`.
    pub ratio: f64,
    /// Each run's pair of figures, in the order they ran: `[ours, theirs]`.
    pub runs: Vec<[f64; 2]>,
    /// The ratio an issue aims at, when one set it (a goal, never checked here) ...
    pub goal: Option<f64>,
    /// ... a floor (`false`: the ratio should be at least the goal, as for
    /// rates) or a ceiling (`true`: at most, as for costs).
    pub goal_at_most: bool,
    /// What else the row measured, in words (the Redis round trip, ...).
    pub note: Option<String>,
}

impl Row {
    /// A row of requests per second from its runs' pairs.
    pub fn new(row: &str, sides: [&str; 2], runs: Vec<[f64; 2]>, goal: Option<f64>) -> Row {
        let ours = median(runs.iter().map(|run| run[0]).collect());
        let theirs = median(runs.iter().map(|run| run[1]).collect());
        Row {
            row: row.to_owned(),
            sides: sides.map(str::to_owned),
            unit: "req/s".to_owned(),
            ours,
            theirs,
            ratio: ours / theirs,
            runs,
            goal,
            goal_at_most: false,
            note: None,
        }
    }

    /// The row's goal is a ceiling: a cost, the lower the better.
    pub fn at_most(self) -> Row {
        Row {
            goal_at_most: true,
            ..self
        }
    }

    /// The row in another unit than requests per second (`us`: a latency).
    pub fn in_unit(self, unit: &str) -> Row {
        Row {
            unit: unit.to_owned(),
            ..self
        }
    }

    pub fn with_note(self, note: String) -> Row {
        Row {
            note: Some(note),
            ..self
        }
    }

    /// The row as the table prints it (and its note on a line of its own).
    pub fn line(&self) -> String {
        let runs = |side: usize| {
            let shown: Vec<String> = self
                .runs
                .iter()
                .map(|run| format!("{:.0}", run[side]))
                .collect();
            shown.join(" ")
        };
        let goal = match (self.goal, self.goal_at_most) {
            (Some(goal), false) => format!(">= {goal:.2}"),
            (Some(goal), true) => format!("<= {goal:.2}"),
            (None, _) => "-".to_owned(),
        };
        let mut line = format!(
            "{:<27} {:>9} {:>7.0}  {:>9} {:>7.0}  {:>5.2}  {:<7}  {} | {}",
            self.row,
            self.sides[0],
            self.ours,
            self.sides[1],
            self.theirs,
            self.ratio,
            goal,
            runs(0),
            runs(1)
        );
        if self.unit != "req/s" {
            line.push_str(&format!(" ({})", self.unit));
        }
        if let Some(note) = &self.note {
            line.push_str("\n    ");
            line.push_str(note);
        }
        line
    }
}

/// The table's column names, above the rows.
pub fn table_head() -> String {
    format!(
        "{:<27} {:>17}  {:>17}  {:>5}  {:<7}  runs, ours | theirs (req/s)",
        "row", "ours (req/s)", "theirs (req/s)", "ratio", "goal"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_compares_the_medians_of_its_sides() {
        let row = Row::new(
            "lua-vs-healthz",
            ["lua", "/healthz"],
            vec![[300.0, 1000.0], [100.0, 900.0], [200.0, 5000.0]],
            Some(0.85),
        );
        assert_eq!((row.ours, row.theirs), (200.0, 1000.0));
        assert_eq!(row.ratio, 0.2);
        // Runs stay in the order they ran, as pairs.
        assert_eq!(row.runs[0], [300.0, 1000.0]);

        let even = Row::new("x", ["a", "b"], vec![[1.0, 4.0], [3.0, 8.0]], None);
        assert_eq!((even.ours, even.theirs, even.ratio), (2.0, 6.0, 2.0 / 6.0));
    }

    #[test]
    fn the_json_row_has_the_issues_fields() {
        let row = Row::new(
            "sold-out-vs-healthz",
            ["sold out", "/healthz"],
            vec![[90.0, 100.0]],
            Some(0.95),
        )
        .with_note("every answer 409".to_owned());
        let json = serde_json::to_value(&row).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "row": "sold-out-vs-healthz",
                "sides": ["sold out", "/healthz"],
                "unit": "req/s",
                "ours": 90.0,
                "theirs": 100.0,
                "ratio": 0.9,
                "runs": [[90.0, 100.0]],
                "goal": 0.95,
                "goal_at_most": false,
                "note": "every answer 409",
            })
        );
        let line = row.line();
        assert!(line.starts_with("sold-out-vs-healthz"), "{line}");
        assert!(
            line.contains(" 0.90 ") && line.contains("90 | 100"),
            "{line}"
        );
        assert!(line.ends_with("\n    every answer 409"), "{line}");
    }

    #[test]
    fn a_row_in_another_unit_says_so_on_its_line() {
        let row = Row::new("c1", ["a", "b"], vec![[250.0, 200.0]], None).in_unit("us");
        assert_eq!((row.unit.as_str(), row.ratio), ("us", 1.25));
        let line = row.line();
        assert!(line.contains("250 | 200 (us)"), "{line}");
        let rate = Row::new("r", ["a", "b"], vec![[1.0, 2.0]], None).line();
        assert!(rate.ends_with("1 | 2"), "{rate}");
    }

    #[test]
    fn a_cost_row_has_a_ceiling_for_its_goal() {
        let row = Row::new("c", ["lua", "bare"], vec![[30.0, 24.0]], Some(1.3)).at_most();
        assert!(row.goal_at_most);
        assert!(row.line().contains("<= 1.30"), "{}", row.line());
        let floor = Row::new("r", ["a", "b"], vec![[1.0, 2.0]], Some(0.9));
        assert!(floor.line().contains(">= 0.90"), "{}", floor.line());
    }
}

//! The lab's results: one [`Cell`] per scenario and variant, the matrix
//! printed from them, and the JSON of `stocklock lab --json`.

use serde::{Deserialize, Serialize};

use super::scenario::Scenario;
use crate::judge::{Judgement, Observed, said_of};
use crate::variants::{Claim, Variant};
use crate::wire::Said;

/// One cell of the matrix: what the variant claims, what the lab saw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cell {
    pub scenario: String,
    pub variant: String,
    /// The claim's text: `safe (stale token refused)`.
    pub expected: String,
    /// The same in Chinese (its identifiers in backticks).
    #[serde(default)]
    pub expected_zh: String,
    /// What the lab saw: a behaviour (`safe`, `oversells`, `frees`, ...),
    /// or `stuck`, `ledger broken`, `inconclusive` (the fault did not land,
    /// or the outcome came without its cause), `error`.
    pub observed: String,
    /// The same in Chinese, for the pages' 中文 view.
    #[serde(default)]
    pub observed_zh: String,
    /// The observed behaviour is the claimed one. Inconclusive never passes.
    pub pass: bool,
    pub evidence: String,
    /// The evidence in Chinese.
    #[serde(default)]
    pub evidence_zh: String,
    /// The checker's verdict on the cell's model (`stocklock check`), in a
    /// few words; `None` where the checker has no model of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `model` in Chinese, for the pages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_zh: Option<String>,
    /// The history checker's verdict of what the cell's clients were told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<String>,
    /// The same in Chinese (the checker's reason why is in English).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history_zh: Option<String>,
}

impl Cell {
    /// The cell of `judgement`, with the checker's `model` verdict on it if any.
    pub fn new(
        scenario: Scenario,
        variant: Variant,
        claim: &Claim,
        judgement: Judgement,
        model: Option<&crate::check::Verdict>,
    ) -> Cell {
        Cell {
            scenario: scenario.name().to_owned(),
            variant: variant.name().to_owned(),
            expected: claim.text(),
            expected_zh: claim.text_zh(),
            observed: judgement.observed.name().to_owned(),
            observed_zh: judgement.observed.name_zh().to_owned(),
            pass: judgement.observed == Observed::Seen(claim.behaviour),
            evidence: judgement.evidence.en,
            evidence_zh: judgement.evidence.zh,
            model: model.map(crate::check::Verdict::summary),
            model_zh: model.map(crate::check::Verdict::summary_zh),
            history: None,
            history_zh: None,
        }
    }

    /// The history checker's verdict beside the lab's: a disagreement
    /// fails the cell, saying why.
    pub fn set_second_opinion(&mut self, second: crate::judge::second::SecondOpinion) {
        if let Some(why) = &second.disagreement {
            self.pass = false;
            self.add_evidence(&said_of!(
                "; THE TWO JUDGES DISAGREE: {}",
                ";两个判定不一致:{}";
                why
            ));
        }
        self.history = Some(second.summary.en);
        self.history_zh = Some(second.summary.zh);
    }

    /// `more` after the evidence, in each language.
    pub fn add_evidence(&mut self, more: &Said) {
        self.evidence += &more.en;
        self.evidence_zh += &more.zh;
    }

    fn inconclusive(&self) -> bool {
        self.observed == Observed::Inconclusive.name()
    }

    /// What the matrix shows: `ok safe`, `XX oversells`, `?? inconclusive`.
    fn mark(&self) -> String {
        let mark = match (self.pass, self.inconclusive()) {
            (true, _) => "ok",
            (false, true) => "??",
            (false, false) => "XX",
        };
        format!("{mark} {}", self.observed)
    }

    /// The line printed as the cell finishes.
    pub fn line(&self, seconds: f64) -> String {
        let model = match &self.model {
            Some(model) => format!(" · model: {model}"),
            None => String::new(),
        };
        let model = match &self.history {
            Some(history) => format!("{model} · history: {history}"),
            None => model,
        };
        format!(
            "{} {:<19} {:<12} expected {:<40} observed {:<13} ({seconds:.1} s) {}{model}",
            match (self.pass, self.inconclusive()) {
                (true, _) => "PASS",
                (false, true) => "INCONCLUSIVE",
                (false, false) => "FAIL",
            },
            self.scenario,
            self.variant,
            self.expected,
            self.observed,
            self.evidence
        )
    }
}

/// `stocklock lab --json FILE`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabReport {
    pub cells: Vec<Cell>,
}

/// The matrix: a row per variant, a column per scenario, `-` where the
/// scenario does not apply (or was skipped).
pub fn print_matrix(scenarios: &[Scenario], variants: &[Variant], cells: &[Cell]) {
    let width = |s: Scenario| s.name().len().max(18);
    print!("{:<13}", "");
    for &scenario in scenarios {
        print!(" {:<w$}", scenario.name(), w = width(scenario));
    }
    println!();
    for variant in variants {
        print!("{:<13}", variant.name());
        for &scenario in scenarios {
            let shown = cells
                .iter()
                .find(|c| c.variant == variant.name() && c.scenario == scenario.name())
                .map_or_else(|| "-".to_owned(), Cell::mark);
            print!(" {shown:<w$}", w = width(scenario));
        }
        println!();
    }
}

/// One line per cell that failed: a contradiction of its claim, or a cell
/// that proved nothing.
pub fn print_failures(cells: &[Cell]) {
    for cell in cells.iter().filter(|c| !c.pass) {
        eprintln!(
            "{} {} / {}: expected {}, observed {}: {}",
            if cell.inconclusive() {
                "INCONCLUSIVE"
            } else {
                "CONTRADICTION"
            },
            cell.scenario,
            cell.variant,
            cell.expected,
            cell.observed,
            cell.evidence
        );
    }
}

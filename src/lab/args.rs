//! `stocklock lab`'s command line.

use clap::Args;

#[derive(Args, Debug)]
pub struct LabArgs {
    /// Scenarios to run (default: all). Each runs against every variant
    /// that claims something of it.
    #[arg(value_name = "SCENARIO", value_enum)]
    pub scenarios: Vec<crate::lab::Scenario>,
    /// Only these variants (repeat or comma-separate; default: all).
    #[arg(long, value_delimiter = ',')]
    pub variant: Vec<String>,
    /// Write every cell as JSON: {"cells":[{scenario, variant, expected, observed, pass, evidence}]}.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// Write each cell's timeline (its critical sections, overlaps and
    /// chaos events, as the page draws them) into this directory, one
    /// self-contained HTML file a cell, named in the cell's evidence.
    #[arg(long, value_name = "DIR")]
    pub timelines: Option<std::path::PathBuf>,
    /// Write every cell's history (what its buyers were told, and the books
    /// after it; SKUs named SCENARIO/VARIANT/SKU) to this file, in the
    /// format of `stocklock history check`. Every cell is judged by the
    /// history checker beside the lab's own judge either way.
    #[arg(long, value_name = "FILE")]
    pub history: Option<std::path::PathBuf>,
    /// Cells played at once, each lane on a stack of its own (Redis,
    /// PostgreSQL, two instances, nginx): a shorter run for more memory
    /// and CPU. Every cell is played and judged as alone; a machine with
    /// few cores can slow a cell's timing past what it tests. One with
    /// --target.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=crate::lab::runner::MAX_JOBS as i64))]
    pub jobs: u8,
    /// A running chaos-mode stack instead of one of the lab's own.
    #[command(flatten)]
    pub target: crate::harness::TargetArgs,
    /// Run for the lesson page: write the cell to the target's Redis as
    /// this lesson step's result (how an instance runs a step's experiment).
    #[arg(long, hide = true, requires = "target")]
    pub lesson: Option<String>,
    /// Sell from the SKUs named PREFIX and the variant (`--sku-prefix
    /// class-7-` plays `none` on `class-7-none`) instead of the variant's
    /// own, on a --target stack; only the scenarios that touch nothing but
    /// their SKU: one-instance, race, slow-business.
    #[arg(long, value_name = "PREFIX", requires = "target")]
    pub sku_prefix: Option<String>,
    /// Run for a classroom seat's lesson page: its SKUs and its results
    /// (how an instance runs a seat's experiment).
    #[arg(long, hide = true, requires = "lesson")]
    pub seat: Option<String>,
}

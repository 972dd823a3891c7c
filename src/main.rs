//! The `stocklock` binary: everything lives in the library; this only starts it.

fn main() -> std::process::ExitCode {
    stocklock::cli::main()
}

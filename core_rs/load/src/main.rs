//! The `colosim-load` binary: see the library (src/lib.rs) for what it does and its arguments.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(colosim_load::run(std::env::args().collect()))
}

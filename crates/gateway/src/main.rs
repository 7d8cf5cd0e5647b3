//! `lightwire-gateway`: see `--help`.
#![forbid(unsafe_code)]

mod cli;

/// Counts allocations for `/metrics` (a relaxed atomic add per allocation).
#[global_allocator]
static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();

fn main() -> std::process::ExitCode {
    cli::main()
}

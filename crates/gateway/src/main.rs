//! `lightwire-gateway`: see `--help`.

/// Counts allocations for `/metrics` (a relaxed atomic add per allocation).
#[global_allocator]
static ALLOC: lightwire_alloc::CountingAllocator = lightwire_alloc::CountingAllocator::system();

fn main() {
    std::process::exit(lightwire_gateway::cli::main());
}

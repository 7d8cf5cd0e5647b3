//! Prints the table of the events the engine sends to JavaScript
//! (`lightwire::events::ALL`) as JSON: what tests/event-contract compares with the
//! TypeScript declarations in pkg/src/types.ts.
//!
//! ```text
//! cargo run -q -p lightwire --example event_contract
//! ```

use lightwire::events::{ALL, EventShape};

/// A string as JSON (the table holds plain ASCII names; Rust's escapes for those are
/// JSON's).
fn json_string(s: &str) -> String {
    format!("{s:?}")
}

fn json_event(e: &EventShape) -> String {
    let variant = match e.variant {
        Some((k, v)) => format!("[{}, {}]", json_string(k), json_string(v)),
        None => "null".to_string(),
    };
    let fields: Vec<String> = e.fields.iter().map(|f| json_string(f)).collect();
    format!(
        "  {{\"type\": {}, \"variant\": {variant}, \"fields\": [{}]}}",
        json_string(e.kind),
        fields.join(", ")
    )
}

fn main() {
    let events: Vec<String> = ALL.iter().map(json_event).collect();
    println!("[\n{}\n]", events.join(",\n"));
}

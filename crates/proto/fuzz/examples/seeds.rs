//! Write a starting corpus for every target into `corpus/<target>/seed-*`, in the input
//! layouts the targets document: a real upgrade request and response (raw and built),
//! and frame streams from the crate's own encoders on both sides (raw and built).
//!
//! Run from this directory: `cargo +nightly run --example seeds`.

use std::fs;
use std::path::Path;

use lightwire_proto::ws;

const KEY: &[u8; 24] = b"dGhlIHNhbXBsZSBub25jZQ==";

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    fs::create_dir_all(&dir).expect("create the corpus directory");
    fs::write(dir.join(format!("seed-{name}")), bytes).expect("write a seed");
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn main() {
    // ws_handshake.
    let mut request = [0u8; 512];
    let n = ws::client_request("127.0.0.1:9735", "/", KEY, &mut request);
    let request = &request[..n];
    write("ws_handshake", "raw-request", &cat(&[&[0], request]));
    let mut response = [0u8; 256];
    let (_, len) = ws::server_handshake(request, &mut response)
        .expect("the crate's own request")
        .expect("complete");
    write(
        "ws_handshake",
        "raw-response",
        &cat(&[&[1], &response[..len]]),
    );
    write("ws_handshake", "built-request-crate", &[2, 0xff]);
    // GET / HTTP/1.1, then Host, Upgrade, Connection, Sec-WebSocket-Version, -Key.
    write(
        "ws_handshake",
        "built-request",
        &[2, 0, 0, 0, 5, 0, 1, 2, 3, 4],
    );
    // Names in lower case (selector bit 4), the key from the input.
    let mut lower = vec![2, 0, 1, 0, 5, 0x10, 0x11, 0x12, 0x13, 0x54];
    lower.extend_from_slice(&[7; 24]);
    write("ws_handshake", "built-request-lower", &lower);
    // 101, then Upgrade, Connection, Sec-WebSocket-Accept.
    write("ws_handshake", "built-response", &[3, 0, 3, 0, 1, 2]);

    // ws_frames, raw: client frames (masked) for the server side, server frames for the
    // client side, each with a ping between two binary messages.
    let mut client = Vec::new();
    ws::push_client_frame(
        &mut client,
        b"act one is fifty bytes, more or less",
        [1, 2, 3, 4],
    );
    client.extend_from_slice(&[0x89, 0x83, 9, 8, 7, 6, b'h' ^ 9, b'e' ^ 8, b'y' ^ 7]);
    ws::push_client_frame(&mut client, &[0x5a; 300], [0xff, 0, 0xff, 0]);
    let raw = |flags: u8, stream: &[u8]| {
        cat(&[
            &[flags],
            &(stream.len() as u16).to_le_bytes(),
            stream,
            &[2, 5, 1, 0, 3, 0x20, 0],
        ])
    };
    write("ws_frames", "raw-client-frames", &raw(0, &client));
    let mut server = Vec::new();
    for len in [50usize, 0, 126, 1000] {
        let (h, n) = ws::binary_header(len);
        server.extend_from_slice(&h[..n]);
        server.extend(std::iter::repeat_n(0x33, len));
    }
    server.extend_from_slice(&[0x89, 0x00]);
    write("ws_frames", "raw-server-frames", &raw(1, &server));

    // ws_frames, built: frame = kind, length selector [+ bytes], mask (4), fill.
    let frame = |kind: u8, len: u8| vec![kind, 0, len, 1, 2, 3, 4, 0x40];
    for (flags, name) in [(2u8, "built-server-side"), (3, "built-client-side")] {
        let mut seed = vec![flags, 6];
        seed.extend(frame(0, 20)); // binary, crate's encoder
        seed.extend(frame(0x81, 10)); // binary, not final
        seed.extend(frame(4, 3)); // ping between fragments
        seed.extend(frame(2, 7)); // continuation, final
        seed.extend([0, 4, 0x00, 0x10, 1, 2, 3, 4, 9]); // 16-bit length: 4096 bytes
        seed.extend(frame(6, 0)); // close
        seed.extend([0, 1, 3, 2, 7]); // no mutation, then chunks
        write("ws_frames", name, &seed);
    }
}

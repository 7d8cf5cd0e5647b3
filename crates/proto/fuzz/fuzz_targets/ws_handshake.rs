//! The HTTP upgrade: `ws::server_handshake` reads a client's request, `ws::client_response`
//! reads a server's answer (for the RFC 6455 example key `dGhlIHNhbXBsZSBub25jZQ==`).
//!
//! Input: `mode || body`, mode % 4:
//! * 0, raw request: the body is the request bytes.
//! * 1, raw response: the body is the response bytes.
//! * 2, built request: `method || path || version || line count || lines`, each line a
//!   selector byte (which header, the case of its name, which value) and, for some, more
//!   bytes (a key, a filler length); see `request`. Selector 0xff instead uses the crate's
//!   own `client_request`.
//! * 3, built response: `status || line count || lines`, likewise; see `response`.
//!
//! Checks, for every request: the result is `RequestTooLong` or `BadRequest`, or `Ok(None)`
//! only while the bytes are fewer than `MAX_REQUEST_LEN`, or `Ok(Some((end, n)))` with
//! `end` within the bytes and `MAX_REQUEST_LEN`, and the response is exactly the 101 with
//! the accept value of the request's `Sec-WebSocket-Key` (found with httparse), which
//! `client_response` accepts. An accepted request is accepted the same way with anything
//! appended (the first WebSocket frame often arrives in the same read), and every strict
//! prefix of it is `Ok(None)` (the responder calls again as bytes arrive: a request split
//! anywhere must not be refused). For every response: `BadResponse`, `Ok(None)` only under
//! `MAX_REQUEST_LEN`, or `Ok(Some(end))` within the bytes; an accepted response is accepted
//! with anything appended, and its strict prefixes are `Ok(None)` (or, from
//! `MAX_REQUEST_LEN` bytes on, `BadResponse("too long")`).
//! For built requests and responses the result is exactly the one the description predicts
//! (the rules in `request_verdict` and `response_verdict`, in the order the codec checks
//! them).
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightwire_proto::ws::{self, MAX_REQUEST_LEN, WsError};
use lightwire_proto_fuzz::Cursor;

/// RFC 6455 section 1.3's example key and its accept value.
const KEY: &[u8; 24] = b"dGhlIHNhbXBsZSBub25jZQ==";
const ACCEPT: &[u8; 28] = b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

/// What follows a request or response on the wire: a masked binary frame.
const NEXT_FRAME: &[u8] = &[0x82, 0x83, 1, 2, 3, 4, 0xaa, 0xbb, 0xcc];

fuzz_target!(|data: &[u8]| {
    let mut input = Cursor::new(data);
    match input.u8() % 4 {
        0 => {
            let _ = check_request(input.rest());
        }
        1 => {
            let _ = check_response(input.rest());
        }
        2 => {
            let (bytes, want) = request(&mut input);
            let got = check_request(&bytes);
            match (got, want) {
                (Ok(Some((end, _))), Ok(())) => assert_eq!(end, bytes.len(), "consumed"),
                (Err(e), Err(w)) if w.matches(e) => {}
                (got, want) => panic!("request {:?}: {got:?}, expected {want:?}", show(&bytes)),
            }
        }
        _ => {
            let (bytes, want) = response(&mut input);
            let got = check_response(&bytes);
            match (got, want) {
                (Ok(Some(end)), Ok(())) => assert_eq!(end, bytes.len(), "consumed"),
                (Err(e), Err(w)) if w.matches(e) => {}
                (got, want) => panic!("response {:?}: {got:?}, expected {want:?}", show(&bytes)),
            }
        }
    }
});

fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `server_handshake` on `request`, with the checks that hold for any bytes.
fn check_request(request: &[u8]) -> Result<Option<(usize, usize)>, WsError> {
    let mut response = [0u8; 256];
    let got = ws::server_handshake(request, &mut response);
    match got {
        Err(WsError::RequestTooLong | WsError::BadRequest(_)) => {}
        Err(e) => panic!("request refused with {e:?}"),
        Ok(None) => assert!(
            request.len() < MAX_REQUEST_LEN,
            "incomplete at {} bytes",
            request.len()
        ),
        Ok(Some((end, n))) => {
            assert!(end <= request.len() && end <= MAX_REQUEST_LEN, "end {end}");
            let key = find_key(&request[..end]).expect("an accepted request has a key");
            let key: &[u8; 24] = key.try_into().expect("an accepted key has 24 bytes");
            let mut want = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ".to_vec();
            want.extend_from_slice(&ws::accept_key(key));
            want.extend_from_slice(b"\r\n\r\n");
            assert_eq!(&response[..n], &want[..], "response");
            assert_eq!(ws::client_response(&response[..n], key), Ok(Some(n)));
            // What follows the request does not change the verdict.
            let mut more = request[..end].to_vec();
            more.extend_from_slice(NEXT_FRAME);
            let mut again = [0u8; 256];
            assert_eq!(
                ws::server_handshake(&more, &mut again),
                Ok(Some((end, n))),
                "with a frame after it"
            );
            assert_eq!(&again[..n], &want[..]);
            for cut in prefixes(end) {
                assert_eq!(
                    ws::server_handshake(&request[..cut], &mut again),
                    Ok(None),
                    "prefix of {cut} of {end} bytes: {:?}",
                    show(&request[..cut])
                );
            }
        }
    }
    if let Err(e) = got {
        assert!(!e.to_string().is_empty());
    }
    got
}

/// `client_response` on `response` for [`KEY`], with the checks that hold for any bytes.
fn check_response(response: &[u8]) -> Result<Option<usize>, WsError> {
    assert_eq!(&ws::accept_key(KEY), ACCEPT, "RFC 6455's example");
    let got = ws::client_response(response, KEY);
    match got {
        Err(WsError::BadResponse(_)) => {}
        Err(e) => panic!("response refused with {e:?}"),
        Ok(None) => assert!(
            response.len() < MAX_REQUEST_LEN,
            "incomplete at {} bytes",
            response.len()
        ),
        Ok(Some(end)) => {
            assert!(end <= response.len(), "end {end}");
            let mut more = response[..end].to_vec();
            more.extend_from_slice(NEXT_FRAME);
            assert_eq!(
                ws::client_response(&more, KEY),
                Ok(Some(end)),
                "with a frame after it"
            );
            // A complete response may be longer than the limit, but an incomplete one
            // is refused once it reaches it.
            for cut in prefixes(end) {
                let want = if cut < MAX_REQUEST_LEN {
                    Ok(None)
                } else {
                    Err(WsError::BadResponse("too long"))
                };
                assert_eq!(
                    ws::client_response(&response[..cut], KEY),
                    want,
                    "prefix of {cut} of {end} bytes"
                );
            }
        }
    }
    got
}

/// Strict prefix lengths to try for an accepted message of `end` bytes: all of them for
/// short messages, else every 7th and the last 16 (each try parses the whole prefix).
fn prefixes(end: usize) -> impl Iterator<Item = usize> {
    (0..end).filter(move |&cut| end <= 600 || cut % 7 == 0 || cut + 16 >= end)
}

/// The trimmed value of the first `Sec-WebSocket-Key` header, parsed independently of the
/// codec with httparse.
fn find_key(request: &[u8]) -> Option<&[u8]> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    req.parse(request).ok()?;
    req.headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("sec-websocket-key"))
        .map(|h| h.value.trim_ascii())
}

/// The refusal a built request or response must get.
#[derive(Clone, Copy, Debug)]
enum Refusal {
    /// Exactly this error.
    Exactly(WsError),
    /// Any `BadRequest`.
    AnyBadRequest,
}

impl Refusal {
    fn matches(self, e: WsError) -> bool {
        match self {
            Refusal::Exactly(w) => w == e,
            Refusal::AnyBadRequest => matches!(e, WsError::BadRequest(_)),
        }
    }
}

/// A header name in the case the selector's bits 4..6 pick.
fn cased(name: &str, selector: u8) -> String {
    match (selector >> 4) % 3 {
        0 => name.to_string(),
        1 => name.to_ascii_lowercase(),
        _ => name.to_ascii_uppercase(),
    }
}

/// A header value from a menu, by the selector's top bits, with optional padding.
fn pick<'a>(menu: &[&'a str], selector: u8) -> &'a str {
    menu[usize::from(selector >> 5) % menu.len()]
}

/// 24 characters from the input, mapped onto base64's alphabet (any 24 characters do:
/// the codec does not decode the key).
fn input_key(input: &mut Cursor) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..24)
        .map(|_| char::from(ALPHABET[usize::from(input.u8() % 64)]))
        .collect()
}

/// A request built from the input, and what the codec must answer.
fn request(input: &mut Cursor) -> (Vec<u8>, Result<(), Refusal>) {
    let method = input.u8();
    if method == 0xff {
        // The crate's own request.
        let mut out = [0u8; 512];
        let n = ws::client_request("127.0.0.1:9735", "/", KEY, &mut out);
        return (out[..n].to_vec(), Ok(()));
    }
    let method = ["GET", "GET", "get", "POST"][usize::from(method % 4)];
    let path = match input.u8() % 3 {
        0 => "/".to_string(),
        1 => "/lightwire?v=1".to_string(),
        _ => {
            let n = usize::from(input.u8() % 12);
            let mut p = "/".to_string();
            p.extend(
                (0..n).map(|_| char::from(b"abcXYZ019-._~%/?=&"[usize::from(input.u8() % 18)])),
            );
            p
        }
    };
    let version = ["HTTP/1.1", "HTTP/1.1", "HTTP/1.0"][usize::from(input.u8() % 3)];
    let mut text = format!("{method} {path} {version}\r\n");
    let count = usize::from(input.u8() % 40);
    // (lowercase name, trimmed value) of each line, in order.
    let mut lines: Vec<(String, String)> = Vec::new();
    for _ in 0..count {
        let s = input.u8();
        let (name, value) = match s % 8 {
            0 => ("Host", "gateway.example:443".to_string()),
            1 => (
                "Upgrade",
                pick(
                    &[
                        "websocket",
                        "WebSocket",
                        " websocket ",
                        "h2c",
                        "websocket, h2c",
                        "",
                    ],
                    s,
                )
                .to_string(),
            ),
            2 => (
                "Connection",
                pick(
                    &[
                        "Upgrade",
                        "keep-alive, Upgrade",
                        "keep-alive",
                        " upgrade ,x",
                        "",
                        "Upgradex",
                        "x,,upgrade",
                    ],
                    s,
                )
                .to_string(),
            ),
            3 => (
                "Sec-WebSocket-Version",
                pick(&["13", " 13 ", "8", "13, 8", "013"], s).to_string(),
            ),
            4 => (
                "Sec-WebSocket-Key",
                match s >> 5 {
                    0 | 1 => String::from_utf8_lossy(KEY).into_owned(),
                    2 | 3 => input_key(input),
                    4 => format!("  {}  ", input_key(input)),
                    5 => input_key(input)[..23].to_string(),
                    _ => format!("{}=", input_key(input)),
                },
            ),
            5 => (
                "X-Lightwire",
                pick(&["1", "a b c", "\"quoted\"", "x\ty"], s).to_string(),
            ),
            6 => ("X-Filler", "f".repeat(usize::from(input.u16()) % 5000)),
            _ => ("Origin", "https://example.org".to_string()),
        };
        let name = cased(name, s);
        text.push_str(&format!("{name}: {value}\r\n"));
        lines.push((name.to_ascii_lowercase(), value.trim_ascii().to_string()));
    }
    text.push_str("\r\n");
    let bytes = text.into_bytes();
    let want = request_verdict(method, version, &lines, bytes.len());
    (bytes, want)
}

/// The verdict for a request, in the codec's order: the header count (its parser holds
/// 32), the length, the request line, then `Upgrade`, `Connection`, the version and the
/// key, each judged on the first header of its name.
fn request_verdict(
    method: &str,
    version: &str,
    lines: &[(String, String)],
    len: usize,
) -> Result<(), Refusal> {
    if lines.len() > 32 {
        return Err(Refusal::Exactly(WsError::BadRequest("header count")));
    }
    if len > MAX_REQUEST_LEN {
        return Err(Refusal::Exactly(WsError::RequestTooLong));
    }
    if method != "GET" || version != "HTTP/1.1" {
        return Err(Refusal::AnyBadRequest);
    }
    let first = |name: &str| {
        lines
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    if !first("upgrade").is_some_and(|v| v.eq_ignore_ascii_case("websocket")) {
        return Err(Refusal::Exactly(WsError::BadRequest("Upgrade: websocket")));
    }
    if !first("connection").is_some_and(lists_upgrade) {
        return Err(Refusal::Exactly(WsError::BadRequest("Connection: Upgrade")));
    }
    if first("sec-websocket-version") != Some("13") {
        return Err(Refusal::Exactly(WsError::BadRequest(
            "Sec-WebSocket-Version: 13",
        )));
    }
    if !first("sec-websocket-key").is_some_and(|k| k.len() == 24) {
        return Err(Refusal::Exactly(WsError::BadRequest("Sec-WebSocket-Key")));
    }
    Ok(())
}

/// Whether a comma-separated list holds the token `upgrade` (any case, spaces around).
fn lists_upgrade(value: &str) -> bool {
    value
        .split(',')
        .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

/// A response built from the input, and what `client_response` must answer for [`KEY`].
fn response(input: &mut Cursor) -> (Vec<u8>, Result<(), Refusal>) {
    let (status, ok_status) = [
        ("HTTP/1.1 101 Switching Protocols", true),
        ("HTTP/1.1 101 Web Socket Protocol Handshake", true),
        ("HTTP/1.0 101 Switching Protocols", false),
        ("HTTP/1.1 200 OK", false),
        ("HTTP/1.1 426 Upgrade Required", false),
    ][usize::from(input.u8() % 5)];
    let mut text = format!("{status}\r\n");
    let count = usize::from(input.u8() % 40);
    let (mut upgrade, mut connection, mut accept) = (false, false, false);
    let accept_ok = String::from_utf8_lossy(ACCEPT).into_owned();
    for _ in 0..count {
        let s = input.u8();
        let (name, value) = match s % 6 {
            0 => {
                let v = pick(&["websocket", "WebSocket", " websocket ", "h2c", ""], s);
                upgrade |= v.trim().eq_ignore_ascii_case("websocket");
                ("Upgrade", v.to_string())
            }
            1 => {
                let v = pick(
                    &[
                        "Upgrade",
                        "keep-alive, Upgrade",
                        "keep-alive",
                        "Upgradex",
                        "",
                    ],
                    s,
                );
                connection |= lists_upgrade(v);
                ("Connection", v.to_string())
            }
            2 => {
                let v = match s >> 5 {
                    0..=2 => accept_ok.clone(),
                    3 => format!(" {accept_ok} "),
                    // Base64 is case-sensitive: this one is wrong.
                    4 => accept_ok.to_ascii_lowercase(),
                    5 => input_key(input),
                    _ => accept_ok[..27].to_string(),
                };
                accept |= v.trim().as_bytes() == ACCEPT;
                ("Sec-WebSocket-Accept", v)
            }
            3 => ("Server", "lightwire".to_string()),
            4 => ("X-Filler", "f".repeat(usize::from(input.u16()) % 5000)),
            _ => ("Sec-WebSocket-Protocol", "chat".to_string()),
        };
        text.push_str(&format!("{}: {value}\r\n", cased(name, s)));
    }
    text.push_str("\r\n");
    let bytes = text.into_bytes();
    // The parser holds 32 headers; a response it cannot parse is a bad status. The
    // length limit only applies while the response is incomplete.
    let want = if count > 32 || !ok_status {
        Err(Refusal::Exactly(WsError::BadResponse("status")))
    } else if !upgrade {
        Err(Refusal::Exactly(WsError::BadResponse("Upgrade: websocket")))
    } else if !connection {
        Err(Refusal::Exactly(WsError::BadResponse(
            "Connection: Upgrade",
        )))
    } else if !accept {
        Err(Refusal::Exactly(WsError::BadResponse(
            "Sec-WebSocket-Accept",
        )))
    } else {
        Ok(())
    };
    (bytes, want)
}

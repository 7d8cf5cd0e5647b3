//! One gateway's WebSocket: its callbacks push into the [`Inbox`]; bytes go out as one
//! binary message per [`crate::engine::Engine::poll_transmit`].

use crate::ids::GatewayId;
use std::rc::Rc;

use js_sys::ArrayBuffer;
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use web_sys::{BinaryType, CloseEvent, MessageEvent, WebSocket};

use super::inbox::{Inbox, Input};
use crate::reason::TransportError;

/// An open (or opening) WebSocket and the closures it calls.
pub struct Socket {
    ws: WebSocket,
    _on_open: Closure<dyn FnMut()>,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_close: Closure<dyn FnMut(CloseEvent)>,
    _on_error: Closure<dyn FnMut()>,
}

impl Socket {
    /// Open a WebSocket to `url` for gateway `g`, epoch `epoch`.
    pub fn open(
        url: &str,
        g: GatewayId,
        epoch: u32,
        inbox: &Rc<Inbox>,
    ) -> Result<Socket, TransportError> {
        let ws = WebSocket::new(url).map_err(|_| TransportError::OpenFailed)?;
        ws.set_binary_type(BinaryType::Arraybuffer);
        let on_open = {
            let inbox = inbox.clone();
            Closure::<dyn FnMut()>::new(move || inbox.push(Input::Opened { g, epoch }))
        };
        let on_message = {
            let inbox = inbox.clone();
            Closure::<dyn FnMut(MessageEvent)>::new(move |e: MessageEvent| {
                // Text messages are not part of the protocol: ignored (the gateway never
                // sends them).
                if let Ok(data) = e.data().dyn_into::<ArrayBuffer>() {
                    inbox.push(Input::Message { g, epoch, data });
                }
            })
        };
        let on_close = {
            let inbox = inbox.clone();
            Closure::<dyn FnMut(CloseEvent)>::new(move |e: CloseEvent| {
                let why = if e.was_clean() {
                    TransportError::Closed
                } else {
                    TransportError::Lost(e.code())
                };
                inbox.push(Input::Closed { g, epoch, why });
            })
        };
        // An error is always followed by a close event, which carries the news.
        let on_error = Closure::<dyn FnMut()>::new(|| {});
        ws.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        ws.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        ws.set_onclose(Some(on_close.as_ref().unchecked_ref()));
        ws.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        Ok(Socket {
            ws,
            _on_open: on_open,
            _on_message: on_message,
            _on_close: on_close,
            _on_error: on_error,
        })
    }

    /// Send one binary message; false if the socket is not open.
    pub fn send(&self, bytes: &[u8]) -> bool {
        self.ws.send_with_u8_array(bytes).is_ok()
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // Detach the callbacks before their closures are freed, then close.
        self.ws.set_onopen(None);
        self.ws.set_onmessage(None);
        self.ws.set_onclose(None);
        self.ws.set_onerror(None);
        let _ = self.ws.close();
    }
}

/// A JavaScript exception as text.
pub fn describe(e: &JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"))
}

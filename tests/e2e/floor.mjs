// The delivery floor: a bare WebSocket server that pushes a given number of bytes, in
// binary messages of a given size, as fast as the socket takes them, to whoever connects
// (`ws://127.0.0.1:PORT/?bytes=N&size=M`); and the dedicated worker that only counts them.
// What a sync over the same bytes and message sizes cannot beat in an engine: no handshake,
// no decryption, no validation, no storage, no request waiting for an answer.
//
// Written here rather than taken from a WebSocket package: a server that sends a fixed
// payload needs the upgrade's accept key and a binary frame header (RFC 6455, 1.3 and
// 5.2), twenty lines, and nothing else (no extension is negotiated, so nothing compresses).

import { createServer } from 'node:http';
import { createHash, randomBytes } from 'node:crypto';

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

/// An unmasked binary frame's header for a payload of `len` bytes (RFC 6455, 5.2).
function binaryHeader(len) {
  if (len < 126) return Buffer.from([0x82, len]);
  if (len < 65536) return Buffer.from([0x82, 126, len >> 8, len & 0xff]);
  const h = Buffer.alloc(10);
  h[0] = 0x82;
  h[1] = 127;
  h.writeBigUInt64BE(BigInt(len), 2);
  return h;
}

/// Start the floor server on 127.0.0.1 (an ephemeral port); resolves to
/// `{ url, close }`. Each connection gets its own push, then the server closes it.
export async function floorServer() {
  const server = createServer((_req, res) => {
    res.writeHead(404);
    res.end();
  });
  const sockets = new Set();
  server.on('upgrade', (req, socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    // Whatever the worker sends (its close frame) is read and dropped.
    socket.on('data', () => {});
    const q = new URL(req.url, 'http://floor').searchParams;
    const bytes = Number(q.get('bytes'));
    const size = Number(q.get('size'));
    const key = req.headers['sec-websocket-key'];
    if (!key || !(bytes > 0) || !(size > 0)) {
      socket.end('HTTP/1.1 400 Bad Request\r\n\r\n');
      return;
    }
    const accept = createHash('sha1').update(key + GUID).digest('base64');
    socket.setNoDelay(true);
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`,
    );
    // One full message built once (random, so nothing on the way could shrink it), sent
    // again and again; the last one shorter.
    const payload = randomBytes(size);
    const full = Buffer.concat([binaryHeader(size), payload]);
    let left = bytes;
    const pump = () => {
      while (left > 0) {
        let ok;
        if (left >= size) {
          ok = socket.write(full);
          left -= size;
        } else {
          ok = socket.write(Buffer.concat([binaryHeader(left), payload.subarray(0, left)]));
          left = 0;
        }
        if (!ok) {
          socket.once('drain', pump);
          return;
        }
      }
    };
    pump();
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `ws://127.0.0.1:${server.address().port}/`,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/// The worker that only counts: opens the WebSocket it is told, adds up the bytes of each
/// message (as an ArrayBuffer, as the client takes them), and posts what it counted once
/// the last byte came (the page times it, from before the worker is made).
export const FLOOR_WORKER = `
onmessage = (e) => {
  const { url, bytes } = e.data;
  const ws = new WebSocket(url);
  ws.binaryType = 'arraybuffer';
  let got = 0, messages = 0;
  ws.onmessage = (m) => {
    got += m.data.byteLength;
    messages += 1;
    if (got >= bytes) {
      ws.close();
      postMessage({ got, messages });
    }
  };
  ws.onerror = () => postMessage({ error: 'the WebSocket failed after ' + got + ' bytes' });
};
`;

/// The fetch floor's worker: fetches the files it is told from a mirror's base URL, one
/// after another with the next asked while one is read (as the client does), reads each
/// body's stream and only adds up its pieces' bytes; posts what it counted once the last
/// file ended. What a sync from a mirror's files cannot beat in an engine.
export const FETCH_FLOOR_WORKER = `
onmessage = async (e) => {
  const { base, files } = e.data;
  let got = 0, pieces = 0;
  try {
    let next = fetch(base + files[0]);
    for (let i = 0; i < files.length; i++) {
      const response = await next;
      if (i + 1 < files.length) next = fetch(base + files[i + 1]);
      if (response.status !== 200) throw new Error(files[i] + ': HTTP ' + response.status);
      const reader = response.body.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        got += value.byteLength;
        pieces += 1;
      }
    }
    postMessage({ got, pieces });
  } catch (err) {
    postMessage({ error: String(err) + ' after ' + got + ' bytes' });
  }
};
`;

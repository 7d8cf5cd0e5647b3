// The browser engines' own faults, in one place: the failures the end-to-end harness
// (run.mjs) may run once more, and the summary it prints of what it ran again.
//
// A failed scenario is the code's fault until shown otherwise. The one exception is a
// failure whose text carries the signature of a fault measured in an engine (each entry
// below says what was seen and where it is recorded): that one scenario is run once more,
// in a fresh profile, and the summary says so with the first failure in full. A stall or
// a timeout is never run again, whatever else its text says: a rerun once hid a liveness
// bug in WebKit, and a stall is what a rerun hides best.

// Each entry: the engine, a short name, an exact phrase (kept tight: a wider one would
// excuse our own bugs), what was seen and where, and an example of the text as the
// harness would show it (the policy's test reruns each example).
export const ENGINE_FAULTS = [
  {
    engine: 'webkit',
    name: 'out-of-bounds-access',
    // JavaScriptCore's wording of the trap (V8 and SpiderMonkey word it otherwise). The
    // package reports a failure of its engine's loop as `the engine failed: <message>`.
    pattern: /\bOut of bounds memory access\b/,
    evidence:
      'JavaScriptCore\'s concurrent JIT in WebKitGTK 2.50 trapped with "RuntimeError: Out of bounds memory access" in code that makes no such access ' +
      '(SipHash\'s rounds on four u64 in locals, and MemoryStore::commit, in the client crate\'s debug-wasm suite with the concurrent JIT on, never off: ' +
      'benches/README.md, "WebKit computes wrong values: JavaScriptCore\'s concurrent JIT"; k256\'s lincomb in the noise crate\'s suite, twice, ' +
      'the rerun passing: the items after "Known" under "Other figures").',
    example:
      'Error: tab 1: [{"type":"error","kind":"EngineFailed","message":"the engine failed: Out of bounds memory access","fatal":true}]',
  },
  {
    engine: 'webkit',
    name: 'copy-nonoverlapping-precondition',
    // Only a build with debug assertions checks it (the client crate's debug-wasm suite,
    // not the package's release wasm).
    pattern: /unsafe precondition\(s\) violated: ptr::copy_nonoverlapping\b/,
    evidence:
      'JavaScriptCore\'s concurrent JIT in WebKitGTK 2.50 broke the precondition of ptr::copy_nonoverlapping (ranges overlapping or misaligned) ' +
      'in the client crate\'s debug-wasm suite, run 67 of 148, with the concurrent JIT on, where the same wasm passes in every other engine: ' +
      'benches/README.md, "WebKit computes wrong values: JavaScriptCore\'s concurrent JIT".',
    example:
      'Error: panicked at library/core/src/panicking.rs:218:5:\n' +
      'unsafe precondition(s) violated: ptr::copy_nonoverlapping requires that both pointer arguments are aligned and non-null and the specified memory ranges do not overlap',
  },
  {
    engine: 'webkit',
    name: 'poly1305-multiply-overflow',
    // Tied to the Poly1305 file: an overflow anywhere else may well be ours. Only a build
    // with overflow checks has it (the package's release wasm has none).
    pattern: /noise\/src\/simd128\.rs:\d+:\d+:\s+attempt to multiply with overflow\b/,
    evidence:
      'JavaScriptCore\'s concurrent JIT in WebKitGTK 2.50 overflowed Poly1305\'s limb product (crates/noise/src/simd128.rs:224, limbs below 2^26 by construction) ' +
      'in the client crate\'s debug-wasm suite, with the concurrent JIT on only (run 141, and a run before those): ' +
      'benches/README.md, "WebKit computes wrong values: JavaScriptCore\'s concurrent JIT".',
    example: 'Error: panicked at crates/noise/src/simd128.rs:224:21:\nattempt to multiply with overflow',
  },
  {
    engine: 'webkit',
    name: 'unreachable-trap',
    // The trap a Rust panic compiles to in wasm, in JavaScriptCore's wording. The widest
    // entry: a panic of our own ends in it too, which is why a rerun of it is listed in the
    // summary with its first failure in full.
    pattern: /\bUnreachable code should not be executed\b/,
    evidence:
      'In a wasm build without overflow checks or debug assertions (the package\'s), a wrong value that makes Rust panic, such as the ones JavaScriptCore\'s ' +
      'concurrent JIT computed in WebKitGTK 2.50 (benches/README.md, "WebKit computes wrong values: JavaScriptCore\'s concurrent JIT"), ends in the ' +
      'unreachable trap, which JavaScriptCore words "RuntimeError: Unreachable code should not be executed".',
    example:
      'Error: tab 2: [{"type":"error","kind":"EngineFailed","message":"the engine failed: Unreachable code should not be executed","fatal":true}]',
  },
  {
    engine: 'webkit',
    name: 'corrupt-frame',
    // How a frame whose MAC did not check reaches the page: a `gateway` event with the code
    // `corrupt-frame` (crates/client/src/reason.rs) and the sentence of PeerError::Receive
    // (crates/proto/src/initiator.rs) over ReceiveError's (crates/noise/src/transport.rs).
    pattern: /"code":"corrupt-frame"|a message from the gateway was corrupted: (?:message body|length prefix) failed its MAC/,
    evidence:
      'WebKitGTK only computed a wrong MAC (BadBodyMac decrypting the client\'s init, same code and inputs as every other engine; the rerun passed): ' +
      'benches/README.md, the items after "Known" under "Other figures". The package survives it by reconnecting (a gateway event, state backing-off, code corrupt-frame), ' +
      'but a scenario that counts connections or errors fails on it.',
    example:
      'Error: a follower saw [{"type":"gateway","gateway":0,"url":"ws://127.0.0.1:10001","state":"backing-off",' +
      '"reason":"a message from the gateway was corrupted: message body failed its MAC","code":"corrupt-frame"}]',
  },
  {
    engine: 'webkit',
    name: 'key-miscomputed',
    // The wallet's own check (lightwire-wallet's descriptor.rs): every key derived by two
    // routes, taken only when they agree, three tries, then this error. In a scenario's
    // failure it means the engine computed a wrong value three times over.
    pattern: /the key at index \d+ came out different each time it was derived: this engine computes wrong values/,
    evidence:
      'JavaScriptCore\'s concurrent JIT in WebKitGTK 2.50 derived wrong keys (a different index each time, in either session; 4 of 24 wallet runs with the JIT on, 0 of 20 off): ' +
      'benches/README.md, "A wrong key in WebKit: the wallet that stopped fetching"; the wallet derives every key twice since, and says this when three tries disagree ' +
      '(a fresh-clone run of 173e843 met it in spendreorg).',
    example:
      'Error: InvalidArgument: descriptor "wpkh([5b9e042a/84\'/1\'/0\']tpubDDtT.../<0;1>/*)": the key at index 0 came out different each time it was derived: this engine computes wrong values',
  },
];

// What counts as a stall or a timeout: the harness's own wording for a wait that ran out,
// and its drivers'. Anywhere in the text:
//   "timed out"                until() ("timed out waiting for ...") and the WebKit
//                              driver's waitForFunction ("timed out after N ms");
//   "webdriver PATH: timeout:" and "webdriver PATH: script timeout:", WebDriver's error
//                              codes for a page load or a script that did not finish (a
//                              page that stopped answering);
//   "TimeoutError"             Playwright's and Puppeteer's error for a wait that ran out.
// In the harness's own sentence only (the first line of the failure, cut before the first
// `{` or `[`, where it starts quoting the package's events and metrics, whose sentences
// have words such as "did not finish in time" of their own):
//   "did not", "never"         assertions on a deadline or on something that should have
//                              happened ("the new leader did not connect once", "btcd never
//                              took ... into its mempool", "the gateway ... did not answer");
//   "in N s", "in N ms"        "no workerRestarted event in 30 s", "no tab took over in N ms";
//   "took over N"              "... took over 300 s" (a call to the detached Chromium);
//   "stall", "stalled"         what a stall says of itself.
// Not counted: "timeout" alone (Node's stack frames name listOnTimeout, the package's codes
// are handshake-timeout and the like, Rust's names handle_timeout), so a stack or a quoted
// event does not make every failure a stall.
const STALL_ANYWHERE = [/timed out/i, /\bwebdriver \S+: (?:script )?timeout:/, /\bTimeoutError\b/];
const STALL_IN_SENTENCE = [/\bdid not\b/i, /\bnever\b/i, /\bin \d[\d,_]* ?m?s\b/, /\btook over \d/, /\bstall(?:s|ed)?\b/i];

/// The harness's own sentence: the failure's first line, without the error's name, cut
/// where it starts quoting JSON.
function harnessSentence(text) {
  const first = text.split('\n', 1)[0].replace(/^\s*(?:[A-Za-z]*Error:\s*)+/, '');
  const quote = first.search(/[{[]/);
  return quote < 0 ? first : first.slice(0, quote);
}

/// The stall or timeout wording in `text`, or null.
export function stallWording(text) {
  for (const p of STALL_ANYWHERE) {
    const m = text.match(p);
    if (m) return m[0];
  }
  const sentence = harnessSentence(text);
  for (const p of STALL_IN_SENTENCE) {
    const m = sentence.match(p);
    if (m) return m[0];
  }
  return null;
}

/// Whether a failed scenario in `engine` may be run once more: { rerun, entry, why }.
/// `entry` is the fault whose signature the text carries, if any (also when it is not rerun,
/// so that the reason can name it); `why` is a sentence for the log.
export function classify(engine, failureText) {
  const text = String(failureText ?? '');
  const entry = ENGINE_FAULTS.find((f) => f.engine === engine && f.pattern.test(text)) ?? null;
  if (engine !== 'webkit') {
    return { rerun: false, entry, why: `a failure in ${engine} is never rerun: only WebKit has known engine faults (tests/e2e/engine-faults.mjs)` };
  }
  const stall = stallWording(text);
  if (stall !== null) {
    const also = entry ? `, though its text also carries ${entry.name}` : '';
    return { rerun: false, entry, why: `a stall or a timeout ("${stall}") is never rerun${also}` };
  }
  if (!entry) {
    return { rerun: false, entry: null, why: `it carries no known ${engine} engine fault (tests/e2e/engine-faults.mjs)` };
  }
  return { rerun: true, entry, why: `it carries ${entry.name}, a known fault of the engine: ${entry.evidence}` };
}

/// The first `n` lines of `text`, and how many were left out.
function head(text, n) {
  const lines = text.split('\n');
  return lines.length <= n ? lines : [...lines.slice(0, n), `(${lines.length - n} more lines)`];
}

function indent(text, by) {
  return text.split('\n').map((l) => by + l).join('\n');
}

/// The end of a run, from one record per scenario run:
///   { engine, name, run, error, why, rerun }
/// `run` is its repetition (1 to `repeat`); `error` the failure's whole text, or null when it
/// passed; `why` why it was not rerun (for a failure that was not); `rerun`, for one that was,
/// { entry (its name), error (the rerun's failure, or null when it passed) }.
/// Returns { failed, text }: `failed` counts the failures that fail the run (a rerun that
/// passed does not), `text` the summary to print.
export function summary(results, { repeat = 1 } = {}) {
  const failedFinally = (r) => r.error !== null && (!r.rerun || r.rerun.error !== null);
  const failed = results.filter(failedFinally).length;
  const engines = [...new Set(results.map((r) => r.engine))];
  const out = [];
  if (repeat > 1) {
    // A stress run: raw failures, nothing run again.
    out.push(`stress run (${engines.join(', ') || 'no engine'}), each scenario ${repeat} times: ${results.length} runs, ${failed} failed`);
    const rows = [];
    for (const r of results) {
      let row = rows.find((x) => x.engine === r.engine && x.name === r.name);
      if (!row) rows.push((row = { engine: r.engine, name: r.name, runs: 0, failures: [] }));
      row.runs += 1;
      if (r.error !== null) row.failures.push(r);
    }
    const cells = [['engine', 'scenario', 'runs', 'failures'], ...rows.map((x) => [x.engine, x.name, String(x.runs), String(x.failures.length)])];
    const width = [0, 1, 2, 3].map((i) => Math.max(...cells.map((c) => c[i].length)));
    for (const c of cells) {
      out.push(`  ${c[0].padEnd(width[0])}  ${c[1].padEnd(width[1])}  ${c[2].padStart(width[2])}  ${c[3].padStart(width[3])}`);
    }
    for (const row of rows) {
      for (const f of row.failures) {
        out.push(`  ${f.engine}: ${f.name}, run ${f.run}/${repeat} failed:`);
        out.push(indent(head(f.error, 40).join('\n'), '      '));
      }
    }
    return { failed, text: out.join('\n') };
  }
  const reruns = results.filter((r) => r.error !== null && r.rerun);
  const onlyOnRerun = reruns.filter((r) => r.rerun.error === null).length;
  const passed = results.filter((r) => r.error === null).length;
  out.push(
    `summary (${engines.join(', ') || 'no engine'}): ${results.length} scenario runs, ${passed} passed, ` +
      `${onlyOnRerun} passed only on a rerun, ${failed} failed`,
  );
  for (const r of results.filter((x) => x.error !== null && !x.rerun)) {
    out.push(`  FAILED ${r.engine}: ${r.name}, not rerun: ${r.why ?? 'no reason given'}`);
    out.push(`      ${r.error.split('\n', 1)[0]}`);
  }
  for (const r of reruns) {
    const outcome = r.rerun.error === null ? 'passed only on a rerun' : 'FAILED again on its rerun';
    out.push(`  RERUN ${r.engine}: ${r.name}, matched ${r.rerun.entry}: ${outcome}`);
    out.push('    its first failure, whole:');
    out.push(indent(r.error, '      '));
    if (r.rerun.error !== null) {
      out.push('    the rerun\'s failure:');
      out.push(indent(r.rerun.error, '      '));
    }
  }
  return { failed, text: out.join('\n') };
}

// One small page interface over the three browser engines users have, so that a scenario
// is written once (tests/e2e):
//   chromium  Debian's Chromium over CDP (playwright-core), profile on disk
//   firefox   Debian's Firefox ESR over WebDriver BiDi (puppeteer-core), profile on disk
//   webkit    WebKitGTK's MiniBrowser (Safari's engine) over classic WebDriver
//             (WebKitWebDriver), under Xvfb
// No tool downloads a browser: each is the system's.
//
// openEngine(name, profile) resolves to { name, newPage(), close() }; a page has
// goto(url), reload(), evaluate(fn, arg), waitForFunction(fn, arg, { timeout }),
// click(selector), fill(selector, text), press(key) (a key name: 'Escape'),
// setViewport({ width, height }), screenshot(path, { fullPage }), close(), and
// onError(callback) (uncaught page errors and console errors, where the driver reports
// them). `fn` runs in the page and may be async; `arg` and the result must be JSON values.
// Chromium's pages also have cdp() (a DevTools session) and crash() (kill the renderer).

import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import puppeteer from 'puppeteer-core';
import { freePort, kill, launch } from './browser.mjs';

export const ENGINES = ['chromium', 'firefox', 'webkit'];

export const FIREFOX = process.env.FIREFOX || '/usr/bin/firefox-esr';
export const WEBKIT_DRIVER = process.env.WEBKIT_DRIVER || '/usr/bin/WebKitWebDriver';
export const MINIBROWSER = process.env.MINIBROWSER || '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser';

/// Which engines this machine has (scripts/setup.sh installs all three).
export function available() {
  const have = { chromium: true, firefox: existsSync(FIREFOX), webkit: existsSync(WEBKIT_DRIVER) && existsSync(MINIBROWSER) };
  return ENGINES.filter((e) => have[e]);
}

/// Start engine `name` with its profile in the directory `profile`. `trust` (tests/public):
/// test certificates the engine is to accept for `host`, `{ host, cas, leaves, spki }`:
/// the authorities' and the servers' certificates (PEM files), and the base64 SHA-256 of
/// the servers' keys. Chromium takes the keys on its command line, Firefox the authorities
/// in its profile's own store (NSS's certutil), WebKitGTK the servers' certificates for
/// the host through its WebDriver (it allows a certificate, not an authority). No system
/// store is touched.
export async function openEngine(name, profile, { trust } = {}) {
  mkdirSync(profile, { recursive: true });
  if (name === 'chromium') {
    const flags = trust ? [`--ignore-certificate-errors-spki-list=${trust.spki.join(',')}`] : [];
    return chromium(profile, flags);
  }
  if (name === 'firefox') return firefox(profile, trust);
  if (name === 'webkit') return webkit(profile, trust);
  throw new Error(`unknown engine ${name}`);
}

async function chromium(profile, flags) {
  const chrome = await launch(profile, flags);
  return {
    name: 'chromium',
    async newPage() {
      const page = await chrome.browser.contexts()[0].newPage();
      return {
        goto: (url) => page.goto(url),
        reload: () => page.reload(),
        evaluate: (fn, arg) => page.evaluate(fn, arg),
        waitForFunction: (fn, arg, { timeout = 30_000 } = {}) => page.waitForFunction(fn, arg, { timeout }),
        click: (selector) => page.click(selector),
        fill: (selector, text) => page.fill(selector, text),
        press: (key) => page.keyboard.press(key),
        setViewport: (size) => page.setViewportSize(size),
        screenshot: (path, { fullPage = false } = {}) => page.screenshot({ path, fullPage }),
        close: () => page.close(),
        cdp: () => page.context().newCDPSession(page),
        // Kill the page's renderer, as a crash does (DevTools' Page.crash); the answer never
        // comes, so it is not awaited.
        async crash() {
          const cdp = await page.context().newCDPSession(page);
          cdp.send('Page.crash').catch(() => {});
          await new Promise((resolve) => page.once('crash', resolve));
        },
        onError: (cb) => {
          page.on('pageerror', (e) => cb(`page error: ${e.message}`));
          page.on('console', (m) => m.type() === 'error' && cb(`console error: ${m.text()}`));
        },
      };
    },
    close: () => kill(chrome.proc),
  };
}

async function firefox(profile, trust) {
  if (trust) {
    const certutil = (...a) => execFileSync('certutil', ['-d', `sql:${profile}`, ...a], { stdio: 'ignore' });
    if (!existsSync(`${profile}/cert9.db`)) certutil('-N', '--empty-password');
    trust.cas.forEach((ca, i) => certutil('-A', '-n', `lightwire test authority ${i}`, '-t', 'C,,', '-i', ca));
  }
  const browser = await puppeteer.launch({
    browser: 'firefox',
    executablePath: FIREFOX,
    headless: true,
    // Firefox's defaults, the persistent-storage prompt included (a headless browser never
    // answers it: the package must not wait for it).
    userDataDir: profile,
  });
  return {
    name: 'firefox',
    async newPage() {
      const page = await browser.newPage();
      return {
        goto: (url) => page.goto(url),
        reload: () => page.reload(),
        evaluate: (fn, arg) => page.evaluate(fn, arg),
        waitForFunction: (fn, arg, { timeout = 30_000 } = {}) =>
          page.waitForFunction(fn, { timeout, polling: 100 }, arg),
        click: (selector) => page.click(selector),
        async fill(selector, text) {
          await page.$eval(selector, (el) => {
            el.value = '';
          });
          await page.type(selector, text);
        },
        press: (key) => page.keyboard.press(key),
        setViewport: (size) => page.setViewport(size),
        screenshot: (path, { fullPage = false } = {}) => page.screenshot({ path, fullPage }),
        close: () => page.close(),
        onError: (cb) => {
          // Firefox also reports its own network log here (a WebSocket to a gateway that is
          // down), which Chromium keeps out of the page's errors: not the page's error.
          const network = /can’t establish a connection to the server at wss?:\/\//;
          const report = (text) => network.test(text) || cb(text);
          page.on('pageerror', (e) => report(`page error: ${e.message}`));
          page.on('console', (m) => m.type() === 'error' && report(`console error: ${m.text()}`));
        },
      };
    },
    close: () => browser.close(),
  };
}

/// WebKitGTK over classic WebDriver: one session, a window per page (a background tab is
/// not drawn, and a screenshot of it never comes).
async function webkit(profile, trust) {
  const display = `:${90 + Math.floor(Math.random() * 9)}`;
  const xvfb = spawn('Xvfb', [display, '-screen', '0', '1280x800x24', '-nolisten', 'tcp'], {
    stdio: 'ignore',
    detached: true,
  });
  const port = await freePort();
  const driver = spawn(WEBKIT_DRIVER, [`--port=${port}`, '--host=127.0.0.1'], {
    stdio: 'ignore',
    detached: true,
    // A real locale: under LANG=C WebKitGTK reports navigator.language "C", which no user
    // has and which Intl refuses (uPlot formats with it).
    env: { ...process.env, DISPLAY: display, XDG_DATA_HOME: profile, XDG_CACHE_HOME: profile, LANGUAGE: 'en_US', LANG: 'en_US.UTF-8', LC_ALL: 'en_US.UTF-8' },
  });
  const base = `http://127.0.0.1:${port}`;
  const call = async (method, path, body) => {
    const res = await fetch(base + path, {
      method,
      headers: { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await res.json();
    if (json.value?.error) throw new Error(`webdriver ${path}: ${json.value.error}: ${json.value.message}`);
    return json.value;
  };
  let session;
  for (let i = 0; ; i += 1) {
    try {
      session = await call('POST', '/session', {
        capabilities: {
          alwaysMatch: {
            'webkitgtk:browserOptions': {
              binary: MINIBROWSER,
              args: ['--automation'],
              ...(trust ? { certificates: trust.leaves.map((f) => ({ host: trust.host, certificateFile: f })) } : {}),
            },
          },
        },
      });
      break;
    } catch (e) {
      if (i > 50) throw e;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  const s = `/session/${session.sessionId}`;
  await call('POST', `${s}/timeouts`, { script: 600_000, pageLoad: 60_000 });
  const anchor = await call('GET', `${s}/window`);
  // Classic WebDriver acts on the current window: a page's every call first makes its
  // window current, and calls run one at a time (a scenario may drive several pages at
  // once: their calls would otherwise interleave between one page's switch and its call).
  let current = anchor;
  let queue = Promise.resolve();
  const serial = (f) => {
    const run = queue.then(f);
    queue = run.catch(() => {});
    return run;
  };
  const focus = async (handle) => {
    if (current === handle) return;
    await call('POST', `${s}/window`, { handle });
    current = handle;
  };
  // JavaScriptCore's `stack` holds only the frames: the message goes first, so that a
  // failure says what it was (and tests/e2e/engine-faults.mjs can read it).
  const evaluate = async (fn, arg) => {
    const script = `const done = arguments[arguments.length - 1];
      Promise.resolve().then(() => (${fn})(arguments[0]))
        .then((v) => done({ ok: v === undefined ? null : v }), (e) => done({ err: e && e.stack ? \`\${e}\\n\${e.stack}\` : String(e) }));`;
    const r = await call('POST', `${s}/execute/async`, { script, args: [arg === undefined ? null : arg] });
    if (r && 'err' in r) throw new Error(r.err);
    return r.ok;
  };
  return {
    name: 'webkit',
    async newPage() {
      const handle = await serial(async () => {
        const made = await call('POST', `${s}/window/new`, { type: 'window' });
        await focus(made.handle);
        return made.handle;
      });
      let closed = false;
      const element = async (selector) => {
        await focus(handle);
        const found = await call('POST', `${s}/element`, { using: 'css selector', value: selector });
        return Object.values(found)[0];
      };
      const here = (f) => (...a) =>
        serial(async () => {
          await focus(handle);
          return f(...a);
        });
      return {
        goto: here((url) => call('POST', `${s}/url`, { url })),
        reload: here(() => call('POST', `${s}/refresh`, {})),
        evaluate: here(evaluate),
        click: here(async (selector) => {
          await call('POST', `${s}/element/${await element(selector)}/click`, {});
        }),
        fill: here(async (selector, text) => {
          const id = await element(selector);
          await call('POST', `${s}/element/${id}/clear`, {});
          await call('POST', `${s}/element/${id}/value`, { text });
        }),
        press: here(async (key) => {
          const value = { Escape: '\uE00C', Enter: '\uE007' }[key];
          if (!value) throw new Error(`press: no WebDriver code for ${key}`);
          await call('POST', `${s}/actions`, {
            actions: [{ type: 'key', id: 'keyboard', actions: [{ type: 'keyDown', value }, { type: 'keyUp', value }] }],
          });
        }),
        // The window, not the viewport: classic WebDriver sets no viewport.
        setViewport: here(({ width, height }) => call('POST', `${s}/window/rect`, { width, height })),
        // The viewport only: classic WebDriver has no full-page screenshot.
        screenshot: here(async (path) => {
          writeFileSync(path, Buffer.from(await call('GET', `${s}/screenshot`), 'base64'));
        }),
        async waitForFunction(fn, arg, { timeout = 30_000 } = {}) {
          const deadline = Date.now() + timeout;
          while (!(await serial(() => focus(handle).then(() => evaluate(fn, arg))))) {
            if (Date.now() > deadline) throw new Error(`waitForFunction timed out after ${timeout} ms`);
            await new Promise((r) => setTimeout(r, 100));
          }
        },
        // Its own window, once: DELETE /window closes the current one, and a second close
        // of the same page would close the anchor (the session's last window), ending
        // the session for every scenario after it.
        close: () =>
          serial(async () => {
            if (closed) return;
            closed = true;
            await focus(handle);
            await call('DELETE', `${s}/window`);
            current = null;
            await focus(anchor);
          }),
        // Classic WebDriver reports no page errors; scenarios check results instead.
        onError: () => {},
      };
    },
    async close() {
      await call('DELETE', s).catch(() => {});
      await kill(driver);
      await kill(xvfb);
    },
  };
}

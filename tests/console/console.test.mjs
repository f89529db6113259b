// The web console in a real browser: Debian's chromium, headless, driven by
// playwright-core (tests/console/run installs it with npm ci), against a
// real local three-node cluster with TLS, automatic failover and an
// operator password. Run by ctest `console_browser`:
//   node console.test.mjs SERVER MKCERTS OUT_DIR
// It checks, on a standby's console: the topology shows the primary; a
// tube's counts change after puts; job bodies and actions are refused
// without credentials (401) and with a forged CSRF token (403); the
// operator logs in, kicks a buried job, pauses and unpauses a tube; a body
// holding <script> is shown as text and never runs; after kill -9 of the
// primary the page shows the new one without a reload; then a switchover
// from the new primary's console. Over TLS (node's https): beanstalkctl's
// certificate is the operator, a node's is not, an action still needs the
// CSRF header, and the login's cookie is Secure. Screenshots of the main views are saved
// in OUT_DIR. Every wait has a deadline; every process is killed at exit.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const [server, mkcerts, outDir] = process.argv.slice(2);
if (!server || !mkcerts || !outDir) {
  console.error('usage: node console.test.mjs SERVER MKCERTS OUT_DIR');
  process.exit(2);
}
let step = 'startup';
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'bq-console-'));
const pids = new Map();
let browser = null;

function finish(ok) {
  for (const p of pids.values()) try { p.kill('SIGKILL'); } catch { /* gone */ }
  if (ok) fs.rmSync(work, { recursive: true, force: true });
  else console.error(`work directory kept: ${work}`);
}
process.on('exit', (code) => finish(code === 0));
const watchdog = setTimeout(() => { console.error(`FAIL [${step}]: the run took more than 240 s`); process.exit(1); }, 240000);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(what, seconds, fn) {
  const deadline = Date.now() + seconds * 1000;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    if (Date.now() > deadline) throw new Error(`${what} within ${seconds} s (last: ${last})`);
    await sleep(50);
  }
}

// A free loopback port below the ephemeral range (as tests/support does),
// never the same one twice.
const portsGiven = new Set();
async function freePort() {
  for (;;) {
    const port = 10000 + Math.floor(Math.random() * 22000);
    if (portsGiven.has(port)) continue;
    portsGiven.add(port);
    const ok = await new Promise((resolve) => {
      const s = net.createServer().once('error', () => resolve(false))
        .listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (ok) return port;
  }
}

// ---- the cluster ----
const certs = path.join(work, 'certs');
assert.equal(spawnSync(mkcerts, [certs, 'n1', 'n2', 'n3', 'beanstalkctl']).status, 0, 'deploy/mkcerts');
const password = 'console-test-password-1234';
fs.writeFileSync(path.join(work, 'password'), `${password}\n`, { mode: 0o600 });
const nodes = [];
for (let i = 1; i <= 3; i++) nodes.push({ name: `n${i}`, client: await freePort(), repl: await freePort(), admin: await freePort() });

function start(n) {
  fs.mkdirSync(path.join(work, n.name), { recursive: true });
  const peers = nodes.flatMap((p) => ['--peer', `${p.name}=127.0.0.1:${p.repl}`]);
  const log = fs.openSync(path.join(work, `${n.name}.log`), 'a');
  const p = spawn(server, ['-l', '127.0.0.1', '-p', String(n.client), '-b', path.join(work, n.name), '-f', '0',
    '--node-id', n.name, ...peers, '--role=standby', '--failover=auto', '--status-interval', '0',
    '--admin-listen', `127.0.0.1:${n.admin}`, '--console-password-file', path.join(work, 'password'),
    '--tls-cert', path.join(certs, `${n.name}.pem`), '--tls-key', path.join(certs, `${n.name}.key`),
    '--tls-ca', path.join(certs, 'ca.pem')], { stdio: ['ignore', 'ignore', log] });
  pids.set(n.name, p);
}

async function status(n) {
  const r = await fetch(`http://127.0.0.1:${n.admin}/status`);
  return r.json();
}

// The primary, once every other live node streams from it.
async function settled() {
  const live = nodes.filter((n) => pids.has(n.name));
  for (const n of live) {
    const st = await status(n).catch(() => null);
    if (st && st.role === 'primary' && st.standbys.filter((s) => s.state === 'streaming').length === live.length - 1) return n;
  }
  return null;
}

// One beanstalk client connection: send a command, read its reply line
// (a reply with a body, RESERVED or FOUND, has it skipped).
function beanstalk(port) {
  const sock = net.connect(port, '127.0.0.1');
  let buf = Buffer.alloc(0);
  const waiters = [];
  const take = () => {
    const i = buf.indexOf('\r\n');
    if (i < 0) return false;
    const head = buf.subarray(0, i).toString();
    const m = /^(RESERVED|FOUND|OK) (?:\d+ )?(\d+)$/.exec(head);
    const need = i + 2 + (m ? Number(m[2]) + 2 : 0);
    if (buf.length < need) return false;
    buf = buf.subarray(need);
    waiters.shift()(head);
    return true;
  };
  sock.on('data', (d) => { buf = Buffer.concat([buf, d]); while (waiters.length && take()); });
  return {
    cmd(line, body) {
      sock.write(body === undefined ? `${line}\r\n` : Buffer.concat([Buffer.from(`${line}\r\n`), Buffer.from(body), Buffer.from('\r\n')]));
      return new Promise((resolve) => { waiters.push(resolve); while (waiters.length && take()); });
    },
    close() { sock.destroy(); },
  };
}

// A request to node n's admin port over TLS, as the client whose
// certificate is `who` (a deploy/mkcerts name), or none.
function tls(n, method, p, who, headers = {}) {
  const opts = {
    host: '127.0.0.1', port: n.admin, path: p, method, headers, servername: n.name,
    ca: fs.readFileSync(path.join(certs, 'ca.pem')),
  };
  if (who) {
    opts.cert = fs.readFileSync(path.join(certs, `${who}.pem`));
    opts.key = fs.readFileSync(path.join(certs, `${who}.key`));
  }
  return new Promise((resolve, reject) => {
    const req = https.request(opts, (res) => {
      let body = '';
      res.on('data', (d) => { body += d; });
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

function fail(e) {
  console.error(`FAIL [${step}]: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
}

try {
  nodes.forEach(start);
  step = 'election';
  const primary = await waitFor('a primary with two streaming standbys', 60, settled);
  const standbys = nodes.filter((n) => n !== primary);
  const viewer = standbys[0]; // the console is opened on a standby
  console.log(`primary ${primary.name}; console on ${viewer.name}`);

  step = 'browser';
  browser = await chromium.launch({ executablePath: process.env.BQ_CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('dialog', (d) => d.accept());
  const base = `http://127.0.0.1:${viewer.admin}`;
  await page.goto(`${base}/`);
  await page.evaluate(() => { window.__sameDocument = true; });

  step = 'topology';
  await page.waitForSelector(`#nodes tr[data-node="${primary.name}"][data-role="primary"]`, { timeout: 20000 });
  await page.waitForSelector(`#topology g.node.primary[data-node="${primary.name}"]`, { timeout: 5000 });
  for (const s of standbys) await page.waitForSelector(`#nodes tr[data-node="${s.name}"][data-role="standby"]`, { timeout: 20000 });
  assert.equal(await page.textContent('#conn-state'), 'live');

  step = 'counts change after puts';
  const tube = 'console-test';
  const c = beanstalk(viewer.client); // through the standby's proxy to the primary
  assert.equal(await c.cmd(`use ${tube}`), `USING ${tube}`);
  const ids = [];
  for (const body of ['one', 'two', 'three', '<script>window.__pwned = 1</script><b>bold</b>']) {
    const r = await c.cmd(`put 100 0 60 ${Buffer.byteLength(body)}`, body);
    assert.match(r, /^INSERTED \d+$/);
    ids.push(Number(r.split(' ')[1]));
  }
  const scriptId = ids[3];
  assert.equal(await c.cmd(`watch ${tube}`), 'WATCHING 2');
  assert.equal(await c.cmd('ignore default'), 'WATCHING 1');
  const reserved = await c.cmd('reserve-with-timeout 5');
  assert.match(reserved, /^RESERVED \d+ \d+$/);
  const buriedId = Number(reserved.split(' ')[1]);
  const ready = () => `#tubes tr[data-tube="${tube}"] td[data-k="current-jobs-ready"]`;
  await waitFor('the tube row with 3 ready', 10, async () => (await page.textContent(ready())) === '3');
  assert.equal(await c.cmd(`bury ${buriedId} 100`), 'BURIED');
  const buried = `#tubes tr[data-tube="${tube}"] td[data-k="current-jobs-buried"]`;
  await waitFor('the tube row with 1 buried', 10, async () => (await page.textContent(buried)) === '1');
  await page.screenshot({ path: path.join(outDir, 'console-cluster.png'), fullPage: true });

  step = 'refused without credentials';
  assert.equal(await page.textContent('#who'), 'read-only');
  assert.equal(await page.isVisible(`#tubes tr[data-tube="${tube}"] form.kick button`), false, 'kick hidden before login');
  const anon = await page.evaluate(async (t) => {
    const kick = await fetch(`/api/kick?tube=${t}&bound=1`, { method: 'POST', headers: { 'X-CSRF-Token': 'x' } });
    const peek = await fetch(`/api/peek?tube=${t}&state=buried`);
    const login = await fetch('/api/login', { method: 'POST', headers: { Authorization: 'Bearer wrong-password-xx' } });
    return [kick.status, peek.status, login.status];
  }, tube);
  assert.deepEqual(anon, [401, 401, 401]);
  assert.equal(await page.textContent(buried), '1', 'the refused kick changed nothing');

  step = 'login';
  await page.fill('#password', password);
  await page.click('#login');
  await waitFor('logged in', 10, async () => (await page.textContent('#who')).includes('logged in'));
  const cookies = await page.context().cookies();
  const sessionCookie = cookies.find((k) => k.name === `bq_console_${viewer.name}`);
  assert.ok(sessionCookie && sessionCookie.httpOnly && sessionCookie.sameSite === 'Strict', 'HttpOnly SameSite=Strict cookie');
  assert.equal(await page.evaluate(() => document.cookie), '', 'the session cookie is not readable by script');
  const forged = await page.evaluate(async (t) => (await fetch(`/api/kick?tube=${t}&bound=1`, { method: 'POST', headers: { 'X-CSRF-Token': 'forged' } })).status, tube);
  assert.equal(forged, 403, 'a forged CSRF token is refused');
  const noHeader = await page.evaluate(async (t) => (await fetch(`/api/kick?tube=${t}&bound=1`, { method: 'POST' })).status, tube);
  assert.equal(noHeader, 403, 'an action without the CSRF header is refused');
  assert.equal(await page.textContent(buried), '1');

  step = 'over TLS: beanstalkctl\'s certificate, a node\'s, the Secure cookie';
  const byCert = JSON.parse((await tls(viewer, 'GET', '/api/session', 'beanstalkctl')).body);
  assert.equal(byCert.operator, true);
  assert.equal(byCert.via, 'certificate');
  const byNode = JSON.parse((await tls(viewer, 'GET', '/api/session', viewer.name)).body);
  assert.equal(byNode.operator, false, 'a node\'s own certificate is not the operator');
  assert.equal((await tls(viewer, 'GET', `/api/peek?tube=${tube}&state=ready`, viewer.name)).status, 401);
  assert.equal((await tls(viewer, 'POST', `/api/kick?tube=${tube}&bound=1`, 'beanstalkctl')).status, 403,
    'a certificate without the CSRF header');
  const tlsLogin = await tls(viewer, 'POST', '/api/login', null, { Authorization: `Bearer ${password}` });
  assert.equal(tlsLogin.status, 200);
  assert.match(tlsLogin.headers['set-cookie'][0], /; HttpOnly; SameSite=Strict; Secure$/);
  assert.equal(await page.textContent(buried), '1');

  step = 'kick a buried job';
  await page.click(`#tubes tr[data-tube="${tube}"] form.kick button`);
  await waitFor('0 buried after the kick', 10, async () => (await page.textContent(buried)) === '0');
  await waitFor('4 ready after the kick', 10, async () => (await page.textContent(ready())) === '4');

  step = 'pause and unpause';
  await page.click(`#tubes tr[data-tube="${tube}"] form.pause button`);
  const pauseCell = `#tubes tr[data-tube="${tube}"] td[data-k="pause"]`;
  await waitFor('the tube paused', 10, async () => /s left$/.test(await page.textContent(pauseCell)));
  assert.equal(await page.textContent(`#tubes tr[data-tube="${tube}"] form.pause button`), 'Unpause');
  await page.click(`#tubes tr[data-tube="${tube}"] form.pause button`);
  await waitFor('the tube unpaused', 10, async () => (await page.textContent(pauseCell)) === 'no');

  step = 'a <script> body is text';
  await page.fill('#job-id', String(scriptId));
  await page.click('#show-job');
  await waitFor('the job shown', 10, async () => (await page.textContent('#job-title')) === `Job ${scriptId}`);
  assert.equal(await page.textContent('#job-body'), '<script>window.__pwned = 1</script><b>bold</b>');
  assert.equal(await page.locator('#job-body script, #job-body b').count(), 0, 'no element made of the body');
  assert.equal(await page.evaluate(() => window.__pwned), undefined, 'the body never ran');
  await page.screenshot({ path: path.join(outDir, 'console-job.png'), fullPage: true });

  step = 'delete a job';
  await page.fill('#job-id', String(ids[0]));
  await page.click('#show-job');
  await waitFor('job shown', 10, async () => (await page.textContent('#job-title')) === `Job ${ids[0]}`);
  await page.click('#job-delete');
  await waitFor('the job gone', 10, async () => (await page.textContent(ready())) === '3');
  assert.equal(await c.cmd(`peek ${ids[0]}`), 'NOT_FOUND');
  c.close();

  step = 'failover shown without a reload';
  pids.get(primary.name).kill('SIGKILL');
  pids.delete(primary.name);
  const next = await waitFor('a new primary on the page', 30, async () => {
    const row = await page.$('#nodes tr[data-role="primary"]');
    const name = row && await row.getAttribute('data-node');
    return name && name !== primary.name ? name : null;
  });
  assert.equal(await page.evaluate(() => window.__sameDocument), true, 'the page was not reloaded');
  await waitFor(`${primary.name} shown disconnected`, 20, async () => {
    const row = await page.$(`#nodes tr[data-node="${primary.name}"]`);
    return row && (await row.textContent()).includes('disconnected');
  });
  console.log(`new primary ${next}`);
  // The unpause above was replicated: the new primary has the tube unpaused.
  await waitFor('the tube unpaused on the new primary', 10, async () => (await page.textContent(pauseCell)) === 'no');
  await page.screenshot({ path: path.join(outDir, 'console-failover.png'), fullPage: true });
  assert.deepEqual(errors, [], 'no script error on the page');

  step = 'switchover from the primary\'s console';
  const newPrimary = nodes.find((n) => n.name === next);
  const other = nodes.find((n) => n !== newPrimary && n !== primary);
  await waitFor('the other node streaming', 30, async () => (await settled()) === newPrimary);
  const p2 = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  p2.on('dialog', (d) => d.accept());
  await p2.goto(`http://127.0.0.1:${newPrimary.admin}/`);
  await p2.waitForSelector('#login-form:not([hidden])', { timeout: 10000 });
  await p2.fill('#password', password);
  await p2.click('#login');
  await waitFor('logged in on the primary', 10, async () => (await p2.textContent('#who')).includes('logged in'));
  await waitFor('the switchover target offered', 10, async () => (await p2.$$eval('#switchover-to option', (o) => o.map((x) => x.value))).includes(other.name));
  await p2.selectOption('#switchover-to', other.name);
  await p2.click('#switchover');
  await waitFor(`${other.name} primary`, 30, async () => (await status(other)).role === 'primary');
  await waitFor('the page on the old primary shows it', 20, async () => !!(await p2.$(`#nodes tr[data-node="${other.name}"][data-role="primary"]`)));

  console.log('console: ok');
  await browser.close();
  clearTimeout(watchdog);
  process.exit(0);
} catch (e) {
  if (browser) {
    try {
      const pages = browser.contexts().flatMap((x) => x.pages());
      if (pages[0]) await pages[0].screenshot({ path: path.join(outDir, 'console-failure.png'), fullPage: true });
    } catch { /* best effort */ }
  }
  fail(e);
}

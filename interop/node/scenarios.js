#!/usr/bin/env node
'use strict';
/*
 * scenarios.js -- the interop scenarios: credisson (C) against node-redisson (Node) on
 * one redis-server. Started by interop/run, which provides the server and these
 * environment variables:
 *   CRD_INTEROP_PORT     port of the private redis-server (127.0.0.1)
 *   CRD_INTEROP_BIN      directory holding crd_interop_driver and crd_interop_worker
 *   CRD_GOLDEN_DIR       directory holding names.json (Redisson's recorded names)
 *   CRD_INTEROP_RESULTS  optional: write the results (latencies, deviations) as JSON here
 *   CRD_INTEROP_ONLY     optional: comma-separated scenario ids to run
 *   CRD_INTEROP_CLI      optional: the credisson CLI binary (its scenario is skipped without)
 *
 * Each scenario drives C and Node through their line drivers (interop/c/crd_driver.c,
 * interop/node/driver.js) step by step and checks the server with its own connection.
 * A scenario passes or fails; a known node-redisson deviation is recorded, not failed,
 * except where it would break mutual exclusion. Both drivers stamp every answer with
 * CLOCK_MONOTONIC microseconds, so cross-process latencies are plain differences.
 * Prints one line per scenario and ends with "interop: N passed, M failed".
 */
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const net = require('node:net');
const Redis = require('ioredis');

const PORT = Number(process.env.CRD_INTEROP_PORT || 6379);
const BIN = process.env.CRD_INTEROP_BIN || path.resolve(__dirname, '../../build/interop');
const GOLDEN = process.env.CRD_GOLDEN_DIR || path.resolve(__dirname, '../../tests/golden');
const C_DRIVER = path.join(BIN, 'crd_interop_driver');
const C_WORKER = path.join(BIN, 'crd_interop_worker');
const NODE_DRIVER = path.join(__dirname, 'driver.js');
const CLI = process.env.CRD_INTEROP_CLI || '';

const WAKE_LIMIT_MS = 50; // a wake-up by message must come within this of the unlock

// ---------------------------------------------------------------------------------- //
// Helpers                                                                             //
// ---------------------------------------------------------------------------------- //

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// MONITOR on a plain socket. ioredis' monitor() marks its connection "monitoring" only in
// a promise callback after MONITOR's +OK: a feed line that arrives in the same read as
// the +OK (any other client's command at that moment) is taken for a command reply and
// fails with "Command queue state error" (seen in CI twice). Here the first line is the
// +OK and every line after it is the feed, whatever the reads' boundaries.
function monitorRaw(port, onCommand) {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1');
    let buf = '';
    let ready = false;
    sock.setEncoding('utf8');
    sock.once('error', reject);
    sock.on('connect', () => sock.write('MONITOR\r\n'));
    sock.on('data', (chunk) => {
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf('\r\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 2);
        if (!ready) {
          if (line !== '+OK') { reject(new Error(`MONITOR answered ${line}`)); return; }
          ready = true;
          resolve({ disconnect: () => sock.destroy() });
          continue;
        }
        const q = line.indexOf('"');
        if (line[0] !== '+' || q < 0) continue;
        const args = line.slice(q + 1, -1).split('" "').map((e) => e.replace(/\\"/g, '"'));
        onCommand(args);
      }
    });
  });
}
const nowUs = () => Number(process.hrtime.bigint() / 1000n);
const ms = (us) => Math.round(us / 100) / 10; // µs -> ms with one decimal
const hex = (s) => 'hex:' + Buffer.from(s, 'utf8').toString('hex');
const median = (a) => {
  const s = [...a].sort((x, y) => x - y);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN;
};

class ScenarioError extends Error {}
class SkipScenario extends Error {}
function check(cond, msg) {
  if (!cond) throw new ScenarioError(msg);
}

/* A child process answering one JSON line per request line, in order. */
class Proc {
  constructor(label, cmd, args) {
    this.label = label;
    this.child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.waiting = [];
    this.stderr = '';
    this.exited = null;
    this.exitPromise = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => {
        this.exited = { code, signal };
        for (const w of this.waiting.splice(0)) w.reject(new ScenarioError(`${label} exited (${code ?? signal}): ${this.stderr.trim()}`));
        resolve(this.exited);
      });
    });
    this.child.on('error', (e) => {
      this.stderr += String(e);
    });
    this.child.stderr.on('data', (d) => {
      this.stderr += d;
    });
    this.child.stdin.on('error', () => {});
    readline.createInterface({ input: this.child.stdout }).on('line', (line) => {
      const w = this.waiting.shift();
      if (!w) return;
      clearTimeout(w.timer);
      try {
        w.resolve(JSON.parse(line));
      } catch (e) {
        w.reject(new ScenarioError(`${label}: bad answer ${line}`));
      }
    });
  }

  /* Send one command; the promise settles with its answer. `pending` tells whether it
   * is still outstanding. */
  send(line, timeoutMs = 15000) {
    const text = typeof line === 'string' ? line : JSON.stringify(line);
    let entry;
    const p = new Promise((resolve, reject) => {
      entry = { resolve, reject };
      entry.timer = setTimeout(() => {
        const i = this.waiting.indexOf(entry);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(new ScenarioError(`${this.label}: no answer to "${text.slice(0, 80)}" within ${timeoutMs} ms`));
      }, timeoutMs);
    });
    if (this.exited) return Promise.reject(new ScenarioError(`${this.label} has exited: ${this.stderr.trim()}`));
    this.waiting.push(entry);
    this.child.stdin.write(text + '\n');
    const tracked = p.then(
      (v) => {
        tracked.pending = false;
        return v;
      },
      (e) => {
        tracked.pending = false;
        throw e;
      },
    );
    tracked.pending = true;
    tracked.catch(() => {});
    return tracked;
  }

  async close() {
    if (this.exited) return;
    try {
      this.child.stdin.write('quit\n');
      this.child.stdin.end();
    } catch (e) {
      /* already gone */
    }
    const t = setTimeout(() => this.child.kill('SIGKILL'), 3000);
    await this.exitPromise;
    clearTimeout(t);
  }

  kill() {
    if (!this.exited) this.child.kill('SIGKILL');
  }
}

/* A C driver (credisson). */
async function cDriver(ctx, label, extra = []) {
  const p = new Proc(label, C_DRIVER, ['--port', String(PORT), ...extra]);
  ctx.procs.push(p);
  const h = await p.send('hello');
  check(h.ok, `${label}: ${h.detail || h.status}`);
  p.id = h.id;
  p.field = h.field;
  return p;
}

/* A Node driver (node-redisson). */
async function nodeDriver(ctx, label, extra = []) {
  const p = new Proc(label, process.execPath, [NODE_DRIVER, '--port', String(PORT), ...extra]);
  ctx.procs.push(p);
  const h = await p.send({ cmd: 'hello' });
  check(h.ok, `${label}: ${h.detail || h.status}`);
  p.id = h.id;
  return p;
}

// Commands, so the scenarios read like the steps they take.
const C = {
  lock: (d, name, waitMs, leaseMs, t) => d.send(`lock ${hex(name)} ${waitMs} ${leaseMs}`, t),
  unlock: (d, name) => d.send(`unlock ${hex(name)}`),
  force: (d, name) => d.send(`force ${hex(name)}`),
  count: (d, name) => d.send(`count ${hex(name)}`),
  waitevent: (d, kind, timeoutMs) => d.send(`waitevent ${kind} ${timeoutMs}`, timeoutMs + 5000),
};
const N = {
  lock: (d, name, leaseMs, t) => d.send({ cmd: 'lock', name, leaseMs }, t),
  tryLock: (d, name, waitMs, leaseMs, t) => d.send({ cmd: 'tryLock', name, waitMs, leaseMs }, t),
  unlock: (d, name) => d.send({ cmd: 'unlock', name }),
  forceUnlock: (d, name) => d.send({ cmd: 'forceUnlock', name }),
  isLocked: (d, name) => d.send({ cmd: 'isLocked', name }),
  info: (d, name) => d.send({ cmd: 'info', name }),
};

const javaChannel = (name) => (name.includes('{') ? `redisson_lock__channel:${name}` : `redisson_lock__channel:{${name}}`);

async function numsub(r, channel) {
  const res = await r.pubsub('NUMSUB', channel);
  return Number(res[1]);
}

/* Wait (bounded) until pred() is true; polls every 2 ms. */
async function waitUntil(pred, timeoutMs, what) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > end) throw new ScenarioError(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(2);
  }
}

/* A TCP proxy to the server that holds back every client->server chunk that carries a
 * SUBSCRIBE (and what follows it on that connection) for delayMs: the subscribe/check
 * race of PROTOCOL 13.1, made deterministic. onSubscribe() runs when one is held,
 * onForward(t) when it is finally passed on (t: monotonic µs). */
function subscribeDelayProxy(delayMs, onSubscribe, onForward) {
  const net = require('node:net');
  const sockets = new Set();
  const server = net.createServer((client) => {
    const upstream = net.connect(PORT, '127.0.0.1');
    sockets.add(client).add(upstream);
    let heldUntil = 0;
    let chain = Promise.resolve();
    client.on('data', (chunk) => {
      const isSub = /\$9\r\nsubscribe\r\n/i.test(chunk.toString('latin1'));
      if (isSub) {
        heldUntil = Date.now() + delayMs;
        onSubscribe();
      }
      const wait = heldUntil - Date.now();
      chain = chain
        .then(() => (wait > 0 ? sleep(wait) : null))
        .then(() => {
          upstream.write(chunk);
          if (isSub) onForward(nowUs());
        });
    });
    upstream.on('data', (d) => client.write(d));
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () =>
      resolve({
        port: server.address().port,
        close: () => {
          for (const s of sockets) s.destroy();
          server.close();
        },
      }),
    );
  });
}

// ---------------------------------------------------------------------------------- //
// Scenarios                                                                           //
// ---------------------------------------------------------------------------------- //
// Each takes ctx = {r (ioredis inspection connection), procs, notes, deviations,
// metrics} and throws ScenarioError to fail.

const scenarios = [];
function scenario(id, title, fn) {
  scenarios.push({ id, title, fn });
}

scenario('wire', 'node-redisson on the wire: key, field, TTL, message, latch, renewal', async (ctx) => {
  const { r } = ctx;
  const name = 'it:wire';
  const nd = await nodeDriver(ctx, 'node', ['--watchdog-ms', '1500']);
  const sub = new Redis({ port: PORT, lazyConnect: true });
  const seen = [];
  const mon = await monitorRaw(PORT, (args) => seen.push(args));
  ctx.closers.push(() => sub.disconnect(), () => mon.disconnect());
  await sub.connect();
  const msgs = [];
  sub.on('message', (ch, m) => msgs.push([ch, m]));
  await sub.subscribe(javaChannel(name));

  let a = await N.lock(nd, name);
  check(a.ok, `node lock: ${a.detail}`);
  const h = await r.hgetall(name);
  const fields = Object.keys(h);
  check(fields.length === 1 && h[fields[0]] === '1', `lock hash ${JSON.stringify(h)}: want one field with count 1`);
  check(fields[0].startsWith(nd.id + ':'), `owner field ${fields[0]} does not start with the instance id`);
  const tid = fields[0].slice(nd.id.length + 1);
  if (!/^[1-9][0-9]*$/.test(tid)) {
    ctx.deviation(`owner field is "<instance uuid>:<random uuid per getLock() object>" (seen "${fields[0]}"), not "<uuid>:<decimal thread id>" (PROTOCOL 1); harmless, C never parses foreign fields`);
  }
  const pttl = await r.pttl(name);
  check(pttl > 0 && pttl <= 1500, `PTTL after a watchdog acquire is ${pttl}, want (0, 1500]`);
  // Renewal: hold past two renewal periods (500 ms each), the TTL must have been re-armed.
  await sleep(1100);
  const pttl2 = await r.pttl(name);
  check(pttl2 > 500, `PTTL ${pttl2} after 1.1 s: node-redisson's watchdog did not renew`);
  const renew = seen.filter((c) => /^eval/i.test(c[0]) && c[2] === '1' && c[3] === name && c.length === 6);
  if (renew.length) ctx.note(`renewal: single-key form, ARGV [${renew[0][4]}, field], every timeout/3`);

  seen.length = 0;
  const before = (await r.keys('redisson_unlock_latch:*')).length;
  a = await N.unlock(nd, name);
  check(a.ok, `node unlock: ${a.detail}`);
  await waitUntil(async () => msgs.length > 0, 1000, 'the unlock message');
  check(msgs[0][0] === javaChannel(name) && msgs[0][1] === '0', `unlock published ${JSON.stringify(msgs[0])}, want "0" on ${javaChannel(name)}`);
  check((await r.exists(name)) === 0, 'lock hash still exists after the full unlock');
  await sleep(50);
  const unlockCmd = seen.find((c) => /^eval/i.test(c[0]) && c[2] === '3');
  if (unlockCmd) {
    const [, , , k1, k2, k3, a1, a2, a3, a4] = unlockCmd;
    check(k1 === name && k2 === javaChannel(name), `unlock KEYS ${k1}, ${k2}`);
    const rid = k3.slice(`redisson_unlock_latch:{${name}}:`.length);
    ctx.note(`unlock KEYS[3] ${k3}; ARGV [${a1}, ${a2}, ${a3 === fields[0] ? 'field' : a3}, ${a4}] (Java: [0, lease, field, PUB, LTTL])`);
    if (!/^[0-9a-f]{32}$/.test(rid)) ctx.deviation(`unlock request id is a dashed UUID ("${rid}"), not 32 hex characters (PROTOCOL 2.2); harmless`);
    if (Number(a4) < 1000) ctx.deviation(`unlock latch TTL is ${a4} ms (ARGV[4], hard-coded), not a retry window of seconds (Java: 16-20 s); node-redisson never retries an unlock, so the latch protects nothing`);
    const del = seen.find((c) => c[0].toLowerCase() === 'del');
    if (del && del[1] === k3) ctx.note('after the unlock it DELs its own latch (Java deletes a key named after its client id instead, Q1)');
    const pub = seen.find((c) => c[0].toLowerCase() === 'publish');
    if (pub) ctx.note(`publishes with "${pub[0]}" from inside the script (classic pub/sub, hard-coded; no SPUBLISH)`);
  } else {
    ctx.note('unlock script not seen on MONITOR');
  }
  const after = (await r.keys('redisson_unlock_latch:*')).length;
  check(after <= before, 'node-redisson left an unlock latch behind');
});

scenario('node-holds-c-waits', 'Node holds, C waits; C is woken by the unlock message', async (ctx) => {
  const name = 'it:n2c';
  const nd = await nodeDriver(ctx, 'node'); // watchdog 30 s: a TTL wake-up would take 30 s
  const cd = await cDriver(ctx, 'c');
  const lat = [];
  for (let i = 0; i < 5; i++) {
    let a = await N.lock(nd, name);
    check(a.ok, `node lock: ${a.detail}`);
    const waiting = C.lock(cd, name, 10000, -1, 15000);
    await waitUntil(async () => (await numsub(ctx.r, javaChannel(name))) >= 1, 3000, 'the C waiter to subscribe');
    await sleep(30); // let the C waiter finish its re-check and sleep on the message
    check(waiting.pending, 'C acquired while Node held the lock');
    const u = await N.unlock(nd, name);
    check(u.ok, `node unlock: ${u.detail}`);
    a = await waiting;
    check(a.ok, `C acquire: ${a.status} ${a.detail || ''}`);
    check(a.t1 >= u.t0, 'C acquired before Node started its unlock');
    lat.push(a.t1 - u.t0);
    const cu = await C.unlock(cd, name);
    check(cu.ok, `C release: ${cu.status}`);
  }
  ctx.metric('wake_ms', lat.map(ms));
  ctx.note(`Node unlock sent -> C acquired: ${lat.map(ms).join(', ')} ms; median ${ms(median(lat))} ms (limit ${WAKE_LIMIT_MS} ms; Node's TTL is 30 s)`);
  // The median carries the 50 ms rule; one run may be late by a scheduling hiccup on a
  // loaded machine, but never by anything near the 30 s a TTL wake-up would take.
  check(median(lat) <= WAKE_LIMIT_MS * 1000, `C took a median ${ms(median(lat))} ms to acquire after the Node unlock (limit ${WAKE_LIMIT_MS} ms)`);
  check(Math.max(...lat) <= 4 * WAKE_LIMIT_MS * 1000, `one C waiter took ${ms(Math.max(...lat))} ms after the Node unlock (limit ${4 * WAKE_LIMIT_MS} ms)`);
});

scenario('c-holds-node-waits', 'C holds, Node waits; Node is woken by the C unlock (or waits out the TTL)', async (ctx) => {
  const name = 'it:c2n';
  const cd = await cDriver(ctx, 'c', ['--watchdog-ms', '1500']);
  const nd = await nodeDriver(ctx, 'node');
  // Settled: Node is subscribed (NUMSUB) before C releases.
  const lat = [];
  for (let i = 0; i < 5; i++) {
    let a = await C.lock(cd, name, 0, -1);
    check(a.ok, `C lock: ${a.status}`);
    const waiting = N.lock(nd, name, undefined, 15000);
    await waitUntil(async () => (await numsub(ctx.r, javaChannel(name))) >= 1, 3000, 'the Node waiter to subscribe');
    await sleep(30);
    check(waiting.pending, 'Node acquired while C held the lock');
    const u = await C.unlock(cd, name);
    check(u.ok, `C release: ${u.status}`);
    a = await waiting;
    check(a.ok, `Node lock: ${a.detail}`);
    check(a.t1 >= u.t0, 'Node acquired before C started its release');
    lat.push(a.t1 - u.t0);
    const nu = await N.unlock(nd, name);
    check(nu.ok, `Node unlock: ${nu.detail}`);
  }
  ctx.metric('wake_ms', lat.map(ms));
  ctx.note(`Node subscribed before the release: C release sent -> Node acquired: ${lat.map(ms).join(', ')} ms; median ${ms(median(lat))} ms`);
  const slow = lat.filter((x) => x > WAKE_LIMIT_MS * 1000);
  if (slow.length) ctx.deviation(`${slow.length}/5 settled Node waiters were not woken by the C unlock message (waited ${slow.map(ms).join(', ')} ms)`);

});

scenario('lost-wakeup', 'unlock while the waiter\'s SUBSCRIBE is in flight (held 200 ms by a proxy)', async (ctx) => {
  // The holder connects directly; the waiter through the proxy. The holder releases as
  // soon as the waiter's SUBSCRIBE reaches the proxy, i.e. after the waiter's failed
  // attempt and before its subscription exists: the unlock message reaches nobody.
  // credisson re-checks after its subscription is confirmed (PROTOCOL 4.2 step 3), so it
  // gets in at about the delay; node-redisson does not re-check and sleeps until its
  // TTL slice ends.
  const delay = 200;
  const wd = 1500;
  const name = 'it:lost';
  let trigger = null;
  let forwarded = 0; // when the held SUBSCRIBE went on to the server (µs)
  const proxy = await subscribeDelayProxy(
    delay,
    () => trigger && trigger(),
    (t) => (forwarded = t),
  );
  ctx.closers.push(() => proxy.close());
  const armed = () => new Promise((resolve) => (trigger = () => ((trigger = null), resolve())));

  // C waits, Node holds.
  const nh = await nodeDriver(ctx, 'node-holder', ['--watchdog-ms', String(wd)]);
  const cw = new Proc('c-waiter', C_DRIVER, ['--port', String(proxy.port)]);
  ctx.procs.push(cw);
  check((await cw.send('hello')).ok, 'C driver via the proxy');
  check((await N.lock(nh, name)).ok, 'Node lock');
  let fired = armed();
  let waiting = C.lock(cw, name, 10000, -1, 15000);
  await fired;
  let u = await N.unlock(nh, name);
  check(u.ok, `Node unlock: ${u.detail}`);
  let a = await waiting;
  check(a.ok && a.t1 >= u.t0, `C waiter: ${a.status}`);
  const cLat = a.t1 - u.t0;
  const cAfterSub = a.t1 - forwarded;
  ctx.metric('c_waiter_ms', ms(cLat));
  ctx.note(`C waiter (credisson), unlock during its SUBSCRIBE: in ${ms(cLat)} ms after the Node unlock, ${ms(cAfterSub)} ms after its SUBSCRIBE reached the server (delay ${delay} ms)`);
  // The property (PROTOCOL 13.1): in within one round trip of the subscription, i.e.
  // about the delay after the unlock. Measured from the forward so that a late timer in
  // this process (a loaded machine) does not count against the library.
  check(forwarded > 0 && cAfterSub <= WAKE_LIMIT_MS * 1000, `C waiter got in ${ms(cAfterSub)} ms after its SUBSCRIBE reached the server; want <= ${WAKE_LIMIT_MS} ms`);
  check((await C.unlock(cw, name)).ok, 'C release');

  // Node waits, C holds (watchdog 1500 ms: the TTL slice Node may sleep is <= 1.5 s).
  const ch = await cDriver(ctx, 'c-holder', ['--watchdog-ms', String(wd)]);
  const nw = new Proc('node-waiter', process.execPath, [NODE_DRIVER, '--port', String(proxy.port)]);
  ctx.procs.push(nw);
  check((await nw.send({ cmd: 'hello' })).ok, 'Node driver via the proxy');
  check((await C.lock(ch, name, 0, -1)).ok, 'C lock');
  fired = armed();
  forwarded = 0;
  waiting = N.lock(nw, name, undefined, 15000);
  await fired;
  check(waiting.pending, 'Node acquired while C held the lock');
  u = await C.unlock(ch, name);
  check(u.ok, `C release: ${u.status}`);
  a = await waiting;
  check(a.ok, `Node lock: ${a.detail}`);
  check(a.t1 >= u.t0, 'Node acquired before C started its release');
  const nLat = a.t1 - u.t0;
  const nAfterSub = a.t1 - forwarded;
  ctx.metric('node_waiter_ms', ms(nLat));
  ctx.note(`Node waiter (node-redisson), unlock during its SUBSCRIBE: in ${ms(nLat)} ms after the C release, ${ms(nAfterSub)} ms after its SUBSCRIBE reached the server`);
  if (nAfterSub > WAKE_LIMIT_MS * 1000) {
    ctx.deviation(`lost wake-up: node-redisson subscribes after its failed attempt and never re-checks once subscribed; the C unlock published during its SUBSCRIBE was missed and it slept ${ms(nLat)} ms (its TTL slice, up to the holder's lease: 30 s with Java's default watchdog)`);
  }
  check((await N.unlock(nw, name)).ok, 'Node unlock');
});

scenario('expiry-wait', 'a lease runs out (nothing published): the waiter of the other language gets in', async (ctx) => {
  const name = 'it:expiry';
  const lease = 300;
  const cd = await cDriver(ctx, 'c');
  const nd = await nodeDriver(ctx, 'node');
  // Node holder with a 300 ms lease, C waits up to 2 s: C's slice is bounded by PTTL.
  check((await N.tryLock(nd, name, 0, lease)).ok, 'Node tryLock with a lease');
  const t0 = Date.now();
  let a = await C.lock(cd, name, 2000, 5000);
  check(a.ok, `C waiter after the Node lease ran out: ${a.status}`);
  ctx.note(`C waiter got in ${Date.now() - t0} ms after a ${lease} ms Node lease began (expiry publishes nothing)`);
  check((await C.unlock(cd, name)).ok, 'C release');
  // C holder with a 300 ms lease, Node tryLock(wait 2000).
  check((await C.lock(cd, name, 0, lease)).ok, 'C lock with a lease');
  const t1 = Date.now();
  a = await N.tryLock(nd, name, 2000, 5000);
  const took = Date.now() - t1;
  if (a.ok) {
    ctx.note(`Node tryLock(2000) got in ${took} ms after a ${lease} ms C lease began`);
    await N.unlock(nd, name);
  } else {
    ctx.deviation(`node-redisson tryLock(wait 2000 ms) returned false after ${took} ms: when a wait slice ends without a message (the lease ran out, which publishes nothing) a timed tryLock gives up instead of re-trying with the wait it has left; Java and credisson acquire here`);
    check((await ctx.r.exists(name)) === 0 || (await ctx.r.pttl(name)) > 0, 'lock state broken');
  }
});

scenario('reentrant', 'C holds twice; Node sees it locked, cannot unlock it, acquires after both releases', async (ctx) => {
  const name = 'it:reentrant';
  const cd = await cDriver(ctx, 'c');
  const nd = await nodeDriver(ctx, 'node');
  check((await C.lock(cd, name, 0, -1)).ok, 'C first acquire');
  check((await C.lock(cd, name, 0, -1)).ok, 'C reentrant acquire');
  check((await C.count(cd, name)).count === 2, 'C hold count is not 2');
  check((await ctx.r.hget(name, cd.field)) === '2', 'hash field of C is not 2');
  let a = await N.isLocked(nd, name);
  check(a.ok && a.locked === true, 'Node isLocked() is false while C holds');
  a = await N.unlock(nd, name);
  check(!a.ok && a.status === 'NOT_OWNER', `Node unlock of C's lock: ${a.status} (want NOT_OWNER)`);
  check((await ctx.r.hget(name, cd.field)) === '2', "Node's failed unlock changed C's count");
  a = await N.tryLock(nd, name, 0);
  check(a.ok === false, 'Node tryLock(0) succeeded on a C-held lock');
  check((await C.unlock(cd, name)).ok, 'C first release');
  check((await ctx.r.hget(name, cd.field)) === '1', 'count after one release is not 1');
  a = await N.isLocked(nd, name);
  check(a.locked === true, 'Node sees the lock free after one of two C releases');
  a = await N.tryLock(nd, name, 0);
  check(a.ok === false, 'Node tryLock(0) succeeded after one of two C releases');
  check((await C.unlock(cd, name)).ok, 'C second release');
  a = await N.tryLock(nd, name, 0);
  check(a.ok === true, 'Node tryLock(0) failed after both C releases');
  a = await N.unlock(nd, name);
  check(a.ok, `Node unlock: ${a.detail}`);
});

scenario('force-unlock', 'Node forceUnlock on a C-held lock; C reports the loss within one renewal period', async (ctx) => {
  const name = 'it:force';
  const wd = 1500; // renewal period 500 ms
  const cd = await cDriver(ctx, 'c', ['--watchdog-ms', String(wd)]);
  const nd = await nodeDriver(ctx, 'node');
  check((await C.lock(cd, name, 0, -1)).ok, 'C acquire');
  await sleep(150);
  const f = await N.forceUnlock(nd, name);
  check(f.ok && f.was_locked === true, 'Node forceUnlock did not delete the lock');
  const e = await C.waitevent(cd, 'lost', 3000);
  check(e.ok, 'C never reported CRD_EVENT_LOCK_LOST (waited 3 s)');
  const lat = e.t - f.t1;
  ctx.metric('lost_ms', ms(lat));
  ctx.note(`Node forceUnlock answered -> C lock-lost event: ${ms(lat)} ms (renewal period ${wd / 3} ms)`);
  check(lat <= (wd / 3 + 100) * 1000, `lock-lost came ${ms(lat)} ms after the forceUnlock (limit ${wd / 3 + 100} ms)`);
  check((await ctx.r.exists(name)) === 0, 'the C watchdog re-created the force-unlocked lock');
  const u = await C.unlock(cd, name);
  check(u.status === 'LOCK_LOST', `C release after the loss: ${u.status} (want LOCK_LOST)`);
});

scenario('watchdog-hold', 'C holds with the watchdog for 3x its timeout; Node tryLock(0) fails throughout', async (ctx) => {
  const name = 'it:watchdog';
  const wd = 1500;
  const cd = await cDriver(ctx, 'c', ['--watchdog-ms', String(wd)]);
  const nd = await nodeDriver(ctx, 'node');
  check((await C.lock(cd, name, 0, -1)).ok, 'C acquire');
  const end = Date.now() + 3 * wd;
  let tries = 0;
  let minTtl = Infinity;
  while (Date.now() < end) {
    const a = await N.tryLock(nd, name, 0);
    check(a.ok === false, `Node tryLock(0) succeeded ${tries} tries into the C hold`);
    const t = await ctx.r.pttl(name);
    check(t > 0, `PTTL of the C-held lock is ${t}`);
    minTtl = Math.min(minTtl, t);
    tries++;
    await sleep(200);
  }
  ctx.note(`${tries} Node tryLock(0) attempts over ${3 * wd} ms all failed; lowest PTTL seen ${minTtl} ms of ${wd}`);
  check((await C.unlock(cd, name)).ok, 'C release');
  const a = await N.tryLock(nd, name, 0);
  check(a.ok === true, 'Node tryLock(0) failed after the C release');
  check((await N.unlock(nd, name)).ok, 'Node unlock');
});

scenario('mixed-workers', '3 C and 2 Node processes increment one counter under one lock, 2000 times', async (ctx) => {
  const { r } = ctx;
  const name = 'it:mixed';
  const prefix = 'it:mixed:data';
  const per = 400;
  await r.del(name, `${prefix}:counter`, `${prefix}:guard`, `${prefix}:violations`, `${prefix}:last`, `${prefix}:handoffs`);
  const t0 = Date.now();
  const procs = [];
  const common = ['--port', String(PORT), '--name', name, '--prefix', prefix, '--count', String(per), '--lease', '2000'];
  for (let i = 0; i < 3; i++) procs.push(new Proc(`c-worker-${i}`, C_WORKER, common));
  for (let i = 0; i < 2; i++) procs.push(new Proc(`node-worker-${i}`, process.execPath, [NODE_DRIVER, 'worker', ...common]));
  ctx.procs.push(...procs);
  const results = procs.map((p) => {
    const line = new Promise((resolve) => {
      let buf = '';
      p.child.stdout.on('data', (d) => {
        buf += d;
      });
      p.exitPromise.then(() => resolve(buf.trim()));
    });
    return line;
  });
  const timeout = sleep(60000).then(() => 'timeout');
  const outcome = await Promise.race([Promise.all(procs.map((p) => p.exitPromise)), timeout]);
  check(outcome !== 'timeout', 'workers did not finish within 60 s');
  const secs = (Date.now() - t0) / 1000;
  const summaries = [];
  for (let i = 0; i < procs.length; i++) {
    const p = procs[i];
    const out = await results[i];
    check(p.exited.code === 0, `${p.label} exited ${p.exited.code ?? p.exited.signal}: ${p.stderr.trim()} ${out}`);
    let s;
    try {
      s = JSON.parse(out.split('\n').pop());
    } catch (e) {
      throw new ScenarioError(`${p.label}: no summary (${out})`);
    }
    check(s.done === per && s.errors === 0, `${p.label}: ${JSON.stringify(s)}`);
    summaries.push(`${p.label} max wait ${s.max_wait_ms} ms`);
    // A wait as long as the 2 s lease means the waiter slept out a TTL slice: a missed
    // wake-up (or a holder that really kept the lock that long, which these do not).
    if (s.max_wait_ms >= 1800) ctx.deviation(`${p.label} waited ${s.max_wait_ms} ms once, a whole lease: a wake-up missed under contention`);
  }
  const counter = Number(await r.get(`${prefix}:counter`));
  const violations = Number((await r.get(`${prefix}:violations`)) || 0);
  const handoffs = Number((await r.get(`${prefix}:handoffs`)) || 0);
  ctx.metric('mixed', { seconds: secs, counter, violations, handoffs });
  ctx.note(`counter ${counter}/${5 * per}, ${violations} overlaps, ${handoffs} hand-offs between C and Node, ${secs.toFixed(1)} s; ${summaries.join('; ')}`);
  check(violations === 0, `${violations} overlapping holds detected`);
  check(counter === 5 * per, `counter is ${counter}, want ${5 * per}`);
  check(handoffs > 0, 'the lock never passed between C and Node');
  check(Number((await r.get(`${prefix}:guard`)) || 0) === 0, 'guard not back to 0');
  check((await r.exists(name)) === 0, 'lock still held after all workers finished');
});

scenario('cli', 'the credisson CLI against node-redisson: busy exit, status, wake-up, lock lost', async (ctx) => {
  if (!CLI || !fs.existsSync(CLI)) throw new SkipScenario('no credisson CLI binary in the build dir');
  const name = 'it:cli';
  const url = `redis://127.0.0.1:${PORT}`;
  const nd = await nodeDriver(ctx, 'node');
  const cli = (args, label) => {
    const p = new Proc(label, CLI, ['--url', url, ...args]);
    ctx.procs.push(p);
    p.out = [];
    p.child.stdout.removeAllListeners('data');
    readline.createInterface({ input: p.child.stdout }).on('line', (l) => p.out.push([nowUs(), l]));
    p.child.stdin.end();
    return p;
  };
  check((await N.lock(nd, name)).ok, 'Node lock');
  const info = await N.info(nd, name);
  // 1. Busy: run --wait 0 exits 75 without running CMD.
  let p = cli(['run', '--wait', '0', name, '--', 'echo', 'ran'], 'cli-busy');
  let ex = await p.exitPromise;
  check(ex.code === 75, `credisson run --wait 0 on a Node-held lock exited ${ex.code ?? ex.signal} (want 75): ${p.stderr.trim()}`);
  check(!p.out.some(([, l]) => l === 'ran'), 'CMD ran although the lock was busy');
  // 2. status --json names the Node holder.
  p = cli(['status', '--json', name], 'cli-status');
  ex = await p.exitPromise;
  const status = p.out.map(([, l]) => l).join('\n');
  check(ex.code === 0 && status.includes(info.field), `credisson status --json does not show the Node holder ${info.field}: exit ${ex.code}, ${status}`);
  // 3. A waiting run is woken by the Node unlock.
  p = cli(['run', '--wait', '10000', name, '--', 'echo', 'ran'], 'cli-wait');
  await waitUntil(async () => (await numsub(ctx.r, javaChannel(name))) >= 1, 3000, 'the CLI to subscribe');
  await sleep(30);
  check(p.exited === null, 'credisson run got in while Node held the lock');
  const u = await N.unlock(nd, name);
  check(u.ok, 'Node unlock');
  ex = await p.exitPromise;
  const ran = p.out.find(([, l]) => l === 'ran');
  check(ex.code === 0 && ran, `credisson run after the Node unlock exited ${ex.code ?? ex.signal}: ${p.stderr.trim()}`);
  const lat = ran[0] - u.t0;
  ctx.metric('cli_wake_ms', ms(lat));
  ctx.note(`Node unlock sent -> CMD of credisson run printing: ${ms(lat)} ms (includes fork/exec of CMD)`);
  check(lat <= 1000 * 1000, `credisson run took ${ms(lat)} ms after the Node unlock (Node's TTL is 30 s)`);
  // 4. A run whose lock Node force-unlocks exits 70 (lock lost) within a renewal period.
  p = cli(['--watchdog-ms', '1500', 'run', name, '--', 'sleep', '20'], 'cli-hold');
  await waitUntil(async () => (await ctx.r.exists(name)) === 1, 3000, 'the CLI to take the lock');
  check(!(await N.tryLock(nd, name, 0)).ok, 'Node tryLock(0) got a lock held by credisson run');
  const f = await N.forceUnlock(nd, name);
  check(f.was_locked, 'Node forceUnlock found nothing');
  const timer = sleep(5000).then(() => 'timeout');
  ex = await Promise.race([p.exitPromise, timer]);
  check(ex !== 'timeout', 'credisson run did not notice the force-unlock within 5 s');
  const lostLat = nowUs() - f.t1;
  ctx.metric('cli_lost_ms', ms(lostLat));
  ctx.note(`Node forceUnlock -> credisson run exited ${ex.code}: ${ms(lostLat)} ms (renewal period 500 ms, then SIGTERM to CMD)`);
  check(ex.code === 70, `credisson run exited ${ex.code ?? ex.signal} after the force-unlock (want 70)`);
});

scenario('names', 'every golden name: C and Node exclude each other; derived names compared with Java', async (ctx) => {
  const file = path.join(GOLDEN, 'names.json');
  check(fs.existsSync(file), `no ${file}`);
  const golden = JSON.parse(fs.readFileSync(file, 'utf8')).names;
  const cd = await cDriver(ctx, 'c', ['--unsafe-names']);
  const nd = await nodeDriver(ctx, 'node');
  const failures = [];
  let like = 0;
  for (const g of golden) {
    const name = g.name;
    const shown = name.length > 24 ? `${name.slice(0, 12)}…(${Buffer.byteLength(name)} bytes)` : name;
    await ctx.r.del(name);
    const info = await N.info(nd, name);
    const nodeLatchPrefix = info.latch.slice(0, -'<rid>'.length);
    const same = info.key === g.rlock.key && info.channel === g.rlock.channel && nodeLatchPrefix === g.rlock.unlock_latch_key_prefix;
    // Exclusion both ways. The lock key is the bare name for everyone, so this should
    // hold even where the companion names differ.
    const problems = [];
    let a = await C.lock(cd, name, 0, 5000);
    if (!a.ok) problems.push(`C lock: ${a.status} ${a.detail || ''}`);
    else {
      a = await N.tryLock(nd, name, 0, 5000);
      if (a.ok) {
        problems.push('Node tryLock(0) succeeded while C held');
        await N.unlock(nd, name);
      }
      a = await C.unlock(cd, name);
      if (!a.ok) problems.push(`C release: ${a.status}`);
    }
    a = await N.tryLock(nd, name, 0, 5000);
    if (!a.ok) problems.push(`Node tryLock(0) on a free lock: ${a.status} ${a.detail || ''}`);
    else {
      a = await C.lock(cd, name, 0, 5000);
      if (a.ok) {
        problems.push('C lock(wait 0) succeeded while Node held');
        await C.unlock(cd, name);
      } else if (a.status !== 'BUSY') problems.push(`C lock while Node held: ${a.status}`);
      a = await N.unlock(nd, name);
      if (!a.ok) problems.push(`Node unlock: ${a.detail}`);
    }
    if (same) {
      like++;
      if (problems.length) failures.push(`${shown}: ${problems.join('; ')}`);
    } else {
      ctx.deviation(`"${shown}": node-redisson derives channel ${info.channel} and latch ${info.latch}; Java: ${g.rlock.channel}, ${g.rlock.unlock_latch_key_prefix}<rid> (it adds braces unless the name *starts* with "{"). Lock key is the bare name for both, so exclusion ${problems.length ? 'FAILED: ' + problems.join('; ') : 'still holds'}; wake-ups across the two channels are lost`);
    }
  }
  ctx.note(`${like}/${golden.length} golden names derived exactly like Java by node-redisson; exclusion checked both ways for all ${golden.length}`);
  check(failures.length === 0, failures.join(' | '));
  ctx.metric('names', { total: golden.length, like_java: like });

  // What a derivation difference costs: C unlocks "order:{42}" on Java's channel, the
  // Node waiter listens on its own, so it only gets in when its TTL slice ends.
  const name = 'order:{42}';
  if (!(name.includes('{') && !name.startsWith('{'))) return;
  await ctx.r.del(name);
  let a = await C.lock(cd, name, 0, 1000);
  check(a.ok, 'C lock order:{42}');
  const waiting = N.lock(nd, name, undefined, 10000);
  await waitUntil(async () => (await numsub(ctx.r, 'redisson_lock__channel:{order:{42}}')) >= 1, 3000, 'the Node waiter to subscribe');
  const u = await C.unlock(cd, name);
  check(u.ok, 'C release order:{42}');
  a = await waiting;
  check(a.ok && a.t1 >= u.t0, 'Node acquired order:{42} while C held it');
  ctx.metric('brace_wake_ms', ms(a.t1 - u.t0));
  ctx.note(`"order:{42}": Node waiter got in ${ms(a.t1 - u.t0)} ms after the C release (TTL slice, not the message)`);
  await N.unlock(nd, name);
});

// ---------------------------------------------------------------------------------- //
// Runner                                                                              //
// ---------------------------------------------------------------------------------- //

async function main() {
  const only = (process.env.CRD_INTEROP_ONLY || '').split(',').filter(Boolean);
  const r = new Redis({ port: PORT });
  await r.ping();
  let passed = 0;
  let failed = 0;
  const results = [];
  for (const s of scenarios) {
    if (only.length && !only.includes(s.id)) continue;
    const ctx = {
      r,
      procs: [],
      closers: [],
      notes: [],
      deviations: [],
      metrics: {},
      note: (t) => ctx.notes.push(t),
      deviation: (t) => ctx.deviations.push(t),
      metric: (k, v) => {
        ctx.metrics[k] = v;
      },
    };
    const t0 = Date.now();
    let error = null;
    let skipped = null;
    try {
      await Promise.race([
        s.fn(ctx),
        sleep(75000).then(() => {
          throw new ScenarioError('scenario took longer than 75 s');
        }),
      ]);
    } catch (e) {
      if (e instanceof SkipScenario) skipped = e.message;
      else error = e instanceof ScenarioError ? e.message : String(e && e.stack ? e.stack : e);
    }
    for (const c of ctx.closers) {
      try {
        c();
      } catch (e) {
        /* ignore */
      }
    }
    await Promise.all(ctx.procs.map((p) => (error ? (p.kill(), p.exitPromise) : p.close())));
    const secs = ((Date.now() - t0) / 1000).toFixed(1);
    if (skipped) {
      console.log(`SKIP ${s.id}: ${s.title}: ${skipped}`);
      results.push({ id: s.id, title: s.title, skipped });
      continue;
    }
    if (error) {
      failed++;
      console.log(`FAIL ${s.id}: ${s.title} (${secs} s)\n     ${error}`);
      for (const p of ctx.procs) if (p.stderr.trim()) console.log(`     [${p.label} stderr] ${p.stderr.trim().split('\n').slice(-3).join(' / ')}`);
    } else {
      passed++;
      console.log(`PASS ${s.id}: ${s.title} (${secs} s)`);
    }
    for (const n of ctx.notes) console.log(`     ${n}`);
    for (const d of ctx.deviations) console.log(`     deviation: ${d}`);
    results.push({ id: s.id, title: s.title, pass: !error, error, seconds: Number(secs), notes: ctx.notes, deviations: ctx.deviations, metrics: ctx.metrics });
  }
  r.disconnect();
  if (process.env.CRD_INTEROP_RESULTS) {
    fs.writeFileSync(process.env.CRD_INTEROP_RESULTS, JSON.stringify({ when: new Date().toISOString(), port: PORT, passed, failed, results }, null, 2) + '\n');
  }
  console.log(`interop: ${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.log(`interop: runner error: ${e && e.stack ? e.stack : e}`);
  console.log('interop: 0 passed, 1 failed');
  process.exit(1);
});

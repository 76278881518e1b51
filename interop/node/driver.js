#!/usr/bin/env node
'use strict';
/*
 * driver.js -- the Node peer of the interop suite: node-redisson (on ioredis) driven
 * one command per line.
 *
 * Interactive mode (the default): one Redisson instance; commands on stdin, one per
 * line, either JSON ({"cmd":"tryLock","name":"a b","waitMs":0,"leaseMs":1000}) or
 * words (tryLock NAME WAITMS [LEASEMS]; NAME may be hex:<bytes in hex>). One JSON
 * answer per command on stdout, in order; commands run one after the other.
 *
 *   hello                        {"id": the instance id (first half of every owner field)}
 *   lock NAME [leaseMs]          lock.lock(lease or watchdog): waits as long as it takes
 *   tryLock NAME waitMs [leaseMs] lock.tryLock(wait, lease or watchdog) -> "acquired"
 *   unlock NAME                  lock.unlock(); not the owner -> status NOT_OWNER
 *   forceUnlock NAME             lock.forceUnlock() -> "was_locked"
 *   isLocked NAME                lock.isLocked() -> "locked"
 *   info NAME                    names node-redisson derives: key, channel, latch, field
 *   now                          the clock, "t"
 *   quit                         close the connections and exit
 *
 * Every answer carries "ok", "status" and "t0"/"t1": process.hrtime in microseconds
 * before and after the call. On Linux that is CLOCK_MONOTONIC, the clock the C driver
 * (interop/c/crd_driver.c) prints, so the two can be subtracted.
 *
 * One lock object is kept per name, so repeated lock calls on a name are reentrant:
 * node-redisson's owner is the lock *object* (a random UUID per getLock()), not a
 * thread or an async context.
 *
 * Worker mode, for the mixed C/Node counter test (same steps as interop/c/crd_worker.c):
 *   node driver.js worker --port P --name NAME --prefix PREFIX --count N [--lease MS]
 *
 * Options for both modes: --host H (127.0.0.1), --port P (6379), --watchdog-ms N
 * (node-redisson's lockWatchdogTimeout, default 30000).
 */
const readline = require('node:readline');
const { Redisson } = require('node-redisson');

function nowUs() {
  return Number(process.hrtime.bigint() / 1000n);
}

function parseArgs(argv) {
  const o = { host: '127.0.0.1', port: 6379, watchdogMs: null, mode: 'driver' };
  let i = 0;
  if (argv[0] === 'worker') {
    o.mode = 'worker';
    i = 1;
  }
  for (; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[i + 1];
    if (a === '--host') o.host = v;
    else if (a === '--port') o.port = Number(v);
    else if (a === '--watchdog-ms') o.watchdogMs = Number(v);
    else if (a === '--name') o.name = v;
    else if (a === '--prefix') o.prefix = v;
    else if (a === '--count') o.count = Number(v);
    else if (a === '--lease') o.lease = Number(v);
    else {
      process.stderr.write(`driver.js: unknown argument ${a}\n`);
      process.exit(64);
    }
    i++;
  }
  return o;
}

function newRedisson(o) {
  const cfg = {
    redis: { options: { host: o.host, port: o.port, maxRetriesPerRequest: 2, enableOfflineQueue: true } },
  };
  // node-redisson divides the watchdog timeout by 3n: it must be a BigInt.
  if (o.watchdogMs) cfg.lockWatchdogTimeout = BigInt(o.watchdogMs);
  return new Redisson(cfg);
}

function decodeName(s) {
  if (typeof s === 'string' && s.startsWith('hex:')) return Buffer.from(s.slice(4), 'hex').toString('utf8');
  return s;
}

// A line is either JSON or words; both give {cmd, name, waitMs, leaseMs}.
function parseCommand(line) {
  const t = line.trim();
  if (!t) return null;
  if (t.startsWith('{')) {
    const j = JSON.parse(t);
    if (j.name !== undefined) j.name = decodeName(j.name);
    return j;
  }
  const w = t.split(/\s+/);
  const c = { cmd: w[0], name: w[1] === undefined ? undefined : decodeName(w[1]) };
  if (c.cmd === 'lock') {
    if (w[2] !== undefined) c.leaseMs = Number(w[2]);
  } else if (c.cmd === 'tryLock') {
    c.waitMs = Number(w[2]);
    if (w[3] !== undefined) c.leaseMs = Number(w[3]);
  }
  return c;
}

function leaseArg(ms) {
  // node-redisson: `true` (or anything not > 0) means watchdog.
  return ms === undefined || ms === null || ms <= 0 ? true : ms;
}

async function runDriver(o) {
  const redisson = newRedisson(o);
  const locks = new Map();
  const getLock = (name) => {
    if (!locks.has(name)) locks.set(name, redisson.getLock(name));
    return locks.get(name);
  };
  const out = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');

  async function handle(c) {
    const t0 = nowUs();
    const done = (extra) => out({ ok: true, status: 'OK', t0, t1: nowUs(), ...extra });
    switch (c.cmd) {
      case 'hello':
        return done({ id: redisson.commandExecutor.id });
      case 'now':
        return done({ t: t0 });
      case 'lock':
        await getLock(c.name).lock(leaseArg(c.leaseMs));
        return done({});
      case 'tryLock': {
        const got = await getLock(c.name).tryLock(c.waitMs, leaseArg(c.leaseMs));
        const t1 = nowUs();
        return out({ ok: got, status: got ? 'OK' : 'BUSY', acquired: got, t0, t1 });
      }
      case 'unlock':
        try {
          await getLock(c.name).unlock();
        } catch (e) {
          if (e && e.constructor && e.constructor.name === 'RedissonLockError') {
            return out({ ok: false, status: 'NOT_OWNER', t0, t1: nowUs(), detail: String(e.message) });
          }
          throw e;
        }
        return done({});
      case 'forceUnlock': {
        const was = await getLock(c.name).forceUnlock();
        return done({ was_locked: was });
      }
      case 'isLocked': {
        const locked = await getLock(c.name).isLocked();
        return done({ locked });
      }
      case 'info': {
        const l = getLock(c.name);
        return done({
          key: l.name,
          channel: l.getChannelName(),
          latch: l.getUnlockLatchName('<rid>'),
          field: l.getClientName(l.clientId),
        });
      }
      default:
        return out({ ok: false, status: 'USAGE', detail: `unknown command ${c.cmd}` });
    }
  }

  const rl = readline.createInterface({ input: process.stdin, terminal: false });
  let chain = Promise.resolve();
  let quitting = false;
  const finish = async () => {
    await redisson.quit();
    process.exit(0);
  };
  rl.on('line', (line) => {
    chain = chain.then(async () => {
      if (quitting) return;
      let c;
      try {
        c = parseCommand(line);
      } catch (e) {
        return out({ ok: false, status: 'USAGE', detail: String(e.message) });
      }
      if (!c) return;
      if (c.cmd === 'quit') {
        quitting = true;
        out({ ok: true, status: 'OK' });
        return finish();
      }
      try {
        await handle(c);
      } catch (e) {
        out({ ok: false, status: 'ERROR', detail: String(e && e.stack ? e.stack : e) });
      }
    });
  });
  rl.on('close', () => {
    chain = chain.then(() => (quitting ? undefined : finish()));
  });
}

async function runWorker(o) {
  if (!o.name || !o.prefix || !(o.count > 0)) {
    process.stderr.write('usage: driver.js worker --port P --name NAME --prefix PREFIX --count N [--lease MS]\n');
    process.exit(64);
  }
  const redisson = newRedisson(o);
  const redis = redisson.redis;
  const lock = redisson.getLock(o.name);
  const kGuard = `${o.prefix}:guard`;
  const kCounter = `${o.prefix}:counter`;
  const kViol = `${o.prefix}:violations`;
  const kLast = `${o.prefix}:last`;
  const kHand = `${o.prefix}:handoffs`;
  let done = 0;
  let errors = 0;
  let maxWait = 0;
  for (let i = 0; i < o.count; i++) {
    const t0 = Date.now();
    try {
      await lock.lock(leaseArg(o.lease));
    } catch (e) {
      process.stderr.write(`lock: ${e}\n`);
      errors++;
      continue;
    }
    maxWait = Math.max(maxWait, Date.now() - t0);
    if ((await redis.incr(kGuard)) !== 1) await redis.incr(kViol);
    const v = Number((await redis.get(kCounter)) || 0);
    await redis.set(kCounter, String(v + 1));
    const prev = await redis.set(kLast, 'node', 'GET');
    if (prev !== null && prev !== 'node') await redis.incr(kHand);
    await redis.decr(kGuard);
    try {
      await lock.unlock();
      done++;
    } catch (e) {
      process.stderr.write(`unlock: ${e}\n`);
      errors++;
    }
  }
  process.stdout.write(JSON.stringify({ lang: 'node', done, errors, max_wait_ms: maxWait }) + '\n');
  await redisson.quit();
  process.exit(errors ? 1 : 0);
}

const opts = parseArgs(process.argv.slice(2));
(opts.mode === 'worker' ? runWorker(opts) : runDriver(opts)).catch((e) => {
  process.stderr.write(`driver.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});

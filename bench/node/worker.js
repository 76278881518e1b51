#!/usr/bin/env node
'use strict';
/*
 * worker.js -- node-redisson's side of credisson-bench (bench/README.md).
 *
 * One process = one node-redisson client and one lock object (node-redisson's owner is
 * the lock object). It speaks the lines of the C workers (bench/worker.c): it prints
 * "ready" when connected, waits for "go" on stdin, runs, prints its results and exits.
 *
 *   node worker.js procs   --port P --name N --prefix K --duration-ms D
 *       loop: lock() bounded by a timer (watchdog lease), INCR K:guard (!= 1 is a violation),
 *       DECR, unlock.
 *       prints "R acq viol timeouts errors cpu_us late" and "L <wait us>...".
 *   node worker.js handoff --port P --name N --prefix K --rounds R --role 0|1
 *       two processes alternate the lock; prints "E <round> r|a <t us>".
 *   node worker.js pairs   --port P --name N --prefix K --count C
 *       uncontended lock+unlock pairs; prints "P n cpu_us" and "L <pair us>...".
 *
 * Times are process.hrtime in microseconds: CLOCK_MONOTONIC on Linux, the clock the C
 * side reads, so the driver can subtract one process's stamps from another's.
 * The packages come from interop/node/node_modules (NODE_PATH, set by the driver).
 */
const readline = require('node:readline');
const { Redisson } = require('node-redisson');
const Redis = require('ioredis');

const nowUs = () => Number(process.hrtime.bigint() / 1000n);

function parseArgs(argv) {
  const o = { mode: argv[0], host: '127.0.0.1', port: 6379, durationMs: 1000, rounds: 100, role: 0, count: 1000 };
  for (let i = 1; i < argv.length; i += 2) {
    const a = argv[i];
    const v = argv[i + 1];
    if (a === '--host') o.host = v;
    else if (a === '--port') o.port = Number(v);
    else if (a === '--name') o.name = v;
    else if (a === '--prefix') o.prefix = v;
    else if (a === '--duration-ms') o.durationMs = Number(v);
    else if (a === '--rounds') o.rounds = Number(v);
    else if (a === '--role') o.role = Number(v);
    else if (a === '--count') o.count = Number(v);
    else {
      process.stderr.write(`worker.js: unknown argument ${a}\n`);
      process.exit(64);
    }
  }
  return o;
}

const lines = [];
let waiting = null;
readline.createInterface({ input: process.stdin, terminal: false }).on('line', (l) => {
  if (waiting) {
    const w = waiting;
    waiting = null;
    w(l);
  } else lines.push(l);
});
const nextLine = () => (lines.length ? Promise.resolve(lines.shift()) : new Promise((r) => { waiting = r; }));

async function readyGo() {
  process.stdout.write('ready\n');
  const l = await nextLine();
  if (l !== 'go') process.exit(4);
}

// lock.lock() raced against a timer: true when acquired, false when ms passed first.
function lockWithin(lock, ms) {
  let timer;
  return Promise.race([
    lock.lock(true).then(() => true),
    new Promise((res) => { timer = setTimeout(() => res(false), ms); }),
  ]).finally(() => clearTimeout(timer));
}

function write(s) {
  return new Promise((r) => process.stdout.write(s, r));
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const redisson = new Redisson({ redis: { options: { host: o.host, port: o.port, maxRetriesPerRequest: 2 } } });
  const g = new Redis({ host: o.host, port: o.port, maxRetriesPerRequest: 2 });
  const lock = redisson.getLock(o.name);
  const guard = `${o.prefix}:guard`;

  // Warm-up on a private name (connections up, scripts loaded): a contended warm-up could
  // hit node-redisson's lost wake-ups before the measurement even starts.
  const warm = redisson.getLock(`${o.name}:warm:${process.pid}`);
  await warm.lock(true);
  await warm.unlock();
  if (o.mode === 'procs') {
    await readyGo();
    const lat = [];
    let acq = 0, viol = 0, timeouts = 0, errors = 0, late = 0;
    const cpu0 = process.cpuUsage();
    const deadline = nowUs() + o.durationMs * 1000;
    for (;;) {
      const t0 = nowUs();
      if (t0 >= deadline) break;
      // lock() (wait forever), bounded by our own timer: node-redisson's tryLock(wait)
      // gives up early under contention (it subtracts the total elapsed time from the
      // remaining wait on every wake-up), which would not be a fair comparison.
      const waitMs = Math.floor((deadline - t0) / 1000) + 2000;
      let got;
      try {
        got = await lockWithin(lock, waitMs);
      } catch (e) {
        process.stderr.write(`worker.js: tryLock: ${e}\n`);
        errors++;
        break;
      }
      const t1 = nowUs();
      lat.push(t1 - t0);
      if (!got) {
        timeouts++;
        break;
      }
      if (t1 <= deadline) acq++;
      else late++;
      if ((await g.incr(guard)) !== 1) viol++;
      await g.decr(guard);
      try {
        await lock.unlock();
      } catch (e) {
        process.stderr.write(`worker.js: unlock: ${e}\n`);
        errors++;
        break;
      }
    }
    const cu = process.cpuUsage(cpu0);
    // A lock() still pending after a timeout keeps running: exit right after reporting.
    await write(`R ${acq} ${viol} ${timeouts} ${errors} ${cu.user + cu.system} ${late}\nL ${lat.join(' ')}\n`);
  } else if (o.mode === 'handoff') {
    const r = o.role;
    const other = 1 - r;
    const ready = [`${o.prefix}:ready:0`, `${o.prefix}:ready:1`];
    const held = [`${o.prefix}:held:0`, `${o.prefix}:held:1`];
    const blpop = async (k) => {
      const res = await g.blpop(k, 3);
      if (!res) {
        process.stderr.write('worker.js: handoff partner did not answer within 3 s\n');
        process.exit(5);
      }
    };
    if (r === 0) await lock.lock(true);
    await readyGo();
    let out = '';
    for (let k = 0; k < o.rounds; k++) {
      if (k % 2 === r) {
        await blpop(ready[r]);
        // As the C worker: wait until the waiter is subscribed (node-redisson subscribes
        // after its first failed attempt; a release before that would be lost), then 3 ms.
        const chan = `redisson_lock__channel:{${o.name}}`;
        for (let i = 0; i < 5000; i++) {
          const [, n] = await g.pubsub('NUMSUB', chan);
          if (Number(n) > 0) break;
          await new Promise((res) => setTimeout(res, 0.2));
        }
        await new Promise((res) => setTimeout(res, 3));
        const t = nowUs();
        await lock.unlock();
        out += `E ${k} r ${t}\n`;
        if (k + 1 < o.rounds) await blpop(held[r]);
      } else {
        await g.rpush(ready[other], '1');
        const got = await lockWithin(lock, 2000);
        const t = nowUs();
        if (!got) {
          // A lost wake-up: report it as a stall and stop (the partner times out too).
          await write(out + `S ${k}\n`);
          process.exit(0);
        }
        out += `E ${k} a ${t}\n`;
        await g.rpush(held[other], '1');
      }
    }
    try {
      await lock.unlock();
    } catch (e) {
      // the other side holds it
    }
    await write(out);
  } else if (o.mode === 'pairs') {
    await readyGo();
    const lat = [];
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < o.count; i++) {
      const t0 = nowUs();
      await lock.lock(true);
      await lock.unlock();
      lat.push(nowUs() - t0);
    }
    const cu = process.cpuUsage(cpu0);
    await write(`P ${o.count} ${cu.user + cu.system}\nL ${lat.join(' ')}\n`);
  } else {
    process.stderr.write(`worker.js: unknown mode ${o.mode}\n`);
    process.exit(64);
  }
  // Exit without quit(): a lock() abandoned after a timeout may still be pending.
  process.exit(0);
}

main().catch((e) => {
  process.stderr.write(`worker.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});

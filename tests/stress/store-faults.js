// store-faults.js: the store under faults (make check-stress):
//   crash        kill -9 during a storm of SENDs to offline accounts
//   crash-shards4  the same with store.shards = 4
//   crash-drain  kill -9 while a recipient drains its backlog
//   diskfull     a full filesystem (root: a small tmpfs), then room again
//   diskfull-shards4  the same with four shards' files on that filesystem
//   order        1,000 backlogs drained at once, five times: per-sender order
// Each prints its counts and exits 0 when they hold. Only loopback, only the
// daemons it started, every wait bounded.
'use strict';

const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const BIN = process.env.ECHOROUTERD_BIN;
const KEEP = process.env.STRESS_KEEP === '1';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function conf(db, extra) {
	const accounts = [];
	for (let i = 0; i < 8; i++)
		accounts.push(`{ id = "alice${i}"; password = "a"; }`);
	for (let i = 0; i < 50; i++)
		accounts.push(`{ id = "acct${i}"; password = "p"; }`);
	return `dispatchers = 2;
idle_timeout = 0;
listeners = ( { name = "router"; address = "127.0.0.1"; port = 0; protocol = "router"; } );
accounts = ( ${accounts.join(',\n  ')} );
store = { path = "${db}"; sync = "full"; ${extra || ''} };
`;
}

// Starts the daemon; resolves once it says "started", with its port.
function start(dir, text) {
	const file = path.join(dir, 'echorouterd.conf');
	fs.writeFileSync(file, text);
	const child = spawn(BIN, ['-c', file], { stdio: ['ignore', 'ignore', 'pipe'] });
	const d = { child, log: '', port: 0, exited: null };
	child.stderr.setEncoding('utf8');
	child.on('exit', (code, signal) => { d.exited = { code, signal }; });
	return new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error(`no start:\n${d.log}`)), 15000);
		child.stderr.on('data', (c) => {
			d.log += c;
			const m = /listening name=router .* port=(\d+)/.exec(d.log);
			if (m && / started: /.test(d.log)) {
				d.port = Number(m[1]);
				clearTimeout(timer);
				resolve(d);
			}
		});
		child.on('exit', () => { clearTimeout(timer); reject(new Error(`exited:\n${d.log}`)); });
	});
}

function waitExit(d, ms) {
	if (d.exited)
		return Promise.resolve(d.exited);
	return new Promise((resolve, reject) => {
		const timer = setTimeout(() => reject(new Error('no exit')), ms);
		d.child.on('exit', () => { clearTimeout(timer); resolve(d.exited); });
	});
}

async function stop(d) {
	if (!d.exited)
		d.child.kill('SIGTERM');
	const e = await waitExit(d, 20000).catch(() => { d.child.kill('SIGKILL'); throw new Error('no stop'); });
	if (e.code !== 0)
		throw new Error(`exit ${JSON.stringify(e)}:\n${d.log.slice(-2000)}`);
}

async function kill9(d) {
	d.child.kill('SIGKILL');
	await waitExit(d, 10000);
}

// A line client: lines() gives what arrived, send() writes.
function client(port) {
	return new Promise((resolve, reject) => {
		const sock = net.connect(port, '127.0.0.1');
		const c = { sock, buf: '', lines: [], closed: false, onLine: null };
		sock.setEncoding('utf8');
		sock.on('data', (chunk) => {
			c.buf += chunk;
			let i;
			while ((i = c.buf.indexOf('\n')) >= 0) {
				const line = c.buf.slice(0, i);
				c.buf = c.buf.slice(i + 1);
				c.lines.push(line);
				if (c.onLine)
					c.onLine(line);
			}
		});
		sock.on('error', () => { c.closed = true; });
		sock.on('close', () => { c.closed = true; });
		sock.on('connect', () => resolve(c));
		setTimeout(() => reject(new Error('connect timeout')), 10000);
	});
}

async function until(pred, what, ms) {
	const end = Date.now() + ms;
	while (!pred()) {
		if (Date.now() > end)
			throw new Error(`timed out: ${what}`);
		await sleep(10);
	}
}

// Logs in; onLine, when given, sees every line after the OK, also those
// that came in the same read (a backlog follows the OK at once). A client
// that has just closed this address's last session may be told "ERR 409
// address in use": the daemon can read the new LOGIN (on one reactor)
// before the old session's close (on another). It logs in again, as any
// client would, for up to 10 s.
async function login(port, who, pw, onLine) {
	const end = Date.now() + 10000;
	const ok = `OK LOGIN ${who}`;
	for (;;) {
		const c = await client(port);
		c.sock.write(`LOGIN ${who} ${pw}\n`);
		await until(() => c.lines.length > 0,
		    `login ${who}: no answer`, end - Date.now());
		if (c.lines[0] === ok) {
			if (onLine) {
				c.onLine = onLine;
				for (const line of c.lines.slice(1))
					onLine(line);
			}
			return c;
		}
		c.sock.destroy();
		if (c.lines[0] !== 'ERR 409 address in use' || Date.now() > end)
			throw new Error(`login ${who}: ${c.lines[0]}`);
		await sleep(50);
	}
}

// Sends SENDs with window w until stopped; acked: texts answered OK.
function storm(c, sender, targets, w, acked, state) {
	const outstanding = [];
	let k = 0;
	const fill = () => {
		while (!state.stop && !c.closed && outstanding.length < w) {
			const to = targets[(k * 7 + sender.length) % targets.length];
			const text = `${sender}-${k++}`;
			outstanding.push(text);
			c.sock.write(`SEND ${to} ${text}\n`);
		}
	};
	c.onLine = (line) => {
		const text = outstanding.shift();
		if (line.startsWith('OK '))
			acked.add(text);
		fill();
	};
	fill();
}

// Logs in each account and collects MSG texts until quiet for quietMs.
async function collect(port, accounts, quietMs, maxMs) {
	const got = new Map();
	let last = Date.now();
	const cs = [];
	for (const a of accounts) {
		cs.push(await login(port, a, 'p', (line) => {
			const m = /^MSG \d+ \S+ (.*)$/.exec(line);
			if (m) {
				got.set(m[1], (got.get(m[1]) || 0) + 1);
				last = Date.now();
			}
		}));
	}
	const end = Date.now() + maxMs;
	while (Date.now() - last < quietMs && Date.now() < end)
		await sleep(50);
	for (const c of cs)
		c.sock.destroy();
	return got;
}

const accts = Array.from({ length: 50 }, (_, i) => `acct${i}`);

async function crash(dir, shards = 0) {
	const db = path.join(dir, 'store.db');
	const extra = shards ? `shards = ${shards};` : '';
	let d = await start(dir, conf(db, extra));
	const acked = new Set();
	const state = { stop: false };
	const senders = [];
	for (let i = 0; i < 8; i++) {
		const c = await login(d.port, `alice${i}`, 'a');
		storm(c, `alice${i}`, accts, 16, acked, state);
		senders.push(c);
	}
	await sleep(3000);
	await kill9(d);
	state.stop = true;
	const ackedAtKill = new Set(acked);
	for (const c of senders)
		c.sock.destroy();
	d = await start(dir, conf(db, extra));
	const got = await collect(d.port, accts, 1500, 60000);
	await stop(d);
	let lost = 0, dup = 0;
	for (const t of ackedAtKill)
		if (!got.has(t))
			lost++;
	for (const n of got.values())
		if (n > 1)
			dup++;
	console.log(`crash${shards ? `-shards${shards}` : ''}: ` +
	    `acknowledged=${ackedAtKill.size} delivered=${got.size} ` +
	    `lost=${lost} duplicated=${dup}`);
	if (ackedAtKill.size < 100)
		throw new Error('too few messages acknowledged to mean anything');
	// Nobody was receiving at the kill: nothing may come twice.
	if (lost > 0 || dup > 0)
		throw new Error('lost or duplicated messages');
}

async function crashDrain(dir) {
	const db = path.join(dir, 'store.db');
	const N = 40000;
	let d = await start(dir, conf(db));
	const a = await login(d.port, 'alice0', 'a');
	const acked = new Set();
	const state = { stop: false };
	storm(a, 'alice0', ['acct0'], 64, acked, state);
	await until(() => acked.size >= N, 'the backlog', 60000);
	state.stop = true;
	await until(() => a.lines.length - 1 >= acked.size, 'last answers', 10000).catch(() => {});
	const ackedSet = new Set(acked);
	a.sock.destroy();
	// acct0 drains; the daemon dies part way.
	const before = [];
	const b = await login(d.port, 'acct0', 'p', (line) => {
		const m = /^MSG \d+ \S+ (.*)$/.exec(line);
		if (m)
			before.push(m[1]);
	});
	await until(() => before.length >= N / 2, 'part of the drain', 60000);
	await kill9(d);
	b.sock.destroy();
	d = await start(dir, conf(db));
	const after = await collect(d.port, ['acct0'], 1500, 60000);
	await stop(d);
	const seen = new Set(before);
	let lost = 0, dup = 0, dupOld = 0;
	// What may come twice: a line leaves the store once the client's TCP
	// acknowledged it and its mark is committed. A receiver may hold its
	// ACK until two full segments have come (64 KiB each on loopback), so
	// the lines of the last 256 KiB read before the kill, and at least
	// the last 512 (the store's windows and the marks awaiting commit).
	let tail = 0, bytes = 0;
	while (tail < before.length && (tail < 512 || bytes < 256 * 1024))
		bytes += `MSG 12345678901234 alice0 ${before[before.length - ++tail]}\n`.length;
	const recent = new Set(before.slice(-tail));
	for (const t of ackedSet)
		if (!seen.has(t) && !after.has(t))
			lost++;
	for (const [t, n] of after) {
		if (seen.has(t) || n > 1) {
			dup++;
			if (!recent.has(t))
				dupOld++;
		}
	}
	console.log(`crash-drain: acknowledged=${ackedSet.size} ` +
	    `delivered_before_kill=${before.length} delivered_after=${after.size} ` +
	    `lost=${lost} duplicated=${dup} (of them not among the last ${tail} ` +
	    `before the kill: ${dupOld})`);
	// Again only those unacknowledged or uncommitted at the kill may
	// come twice: never one delivered long before.
	if (lost > 0 || dupOld > 0)
		throw new Error('lost messages, or duplicates beyond those in flight');
}

// SIGUSR1's stats line: the number of messages waiting (stored=).
async function storedNow(d) {
	const before = d.log.length;
	d.child.kill('SIGUSR1');
	await until(() => /stats .* stored=\d+/.test(d.log.slice(before)),
	    'a stats line', 5000);
	return Number(/stats .* stored=(\d+)/.exec(d.log.slice(before))[1]);
}

async function storedReaches(d, n, ms) {
	const end = Date.now() + ms;
	let stored = await storedNow(d);
	while (stored !== n && Date.now() < end) {
		await sleep(100);
		stored = await storedNow(d);
	}
	return stored;
}

// The recipient logs in while the disk is full: each MSG line it gets,
// until all of want came and 1.5 s passed quiet (or maxMs).
async function drainWhileFull(d, want, maxMs) {
	const lines = [];
	let last = Date.now();
	const b = await login(d.port, 'acct1', 'p', (line) => {
		const m = /^MSG \d+ \S+ (.*)$/.exec(line);
		if (m) {
			lines.push(m[1]);
			last = Date.now();
		}
	});
	const end = Date.now() + maxMs;
	const seen = () => new Set(lines);
	while (Date.now() < end &&
	    (Date.now() - last < 1500 || !want.every((t) => seen().has(t))))
		await sleep(50);
	b.sock.destroy();
	return lines;
}

// shards: each keeps its 4 MiB reserve on the same filesystem, which is
// made that much larger; one of them (acct1's) fills it.
async function diskfull(dir, shards = 1) {
	if (process.getuid() !== 0) {
		console.log('diskfull: SKIP (needs root to mount a small tmpfs)');
		return;
	}
	const mnt = path.join(dir, 'small');
	fs.mkdirSync(mnt);
	// The store keeps 4 MiB in reserve beside its file; 2 MiB of filler
	// leave it about 2 MiB to fill.
	try {
		execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${4 + 4 * shards}m`, 'tmpfs', mnt]);
	} catch (e) {
		console.log(`diskfull: SKIP (cannot mount a tmpfs: ${e.message})`);
		return;
	}
	let d = null;
	try {
		const filler = path.join(mnt, 'filler');
		fs.writeFileSync(filler, Buffer.alloc(2 << 20));
		const db = path.join(mnt, 'store.db');
		d = await start(dir, conf(db, `shards = ${shards};`));
		const a = await login(d.port, 'alice0', 'a');
		const text = 'x'.repeat(200);
		const acked = [];
		let refused = 0, k = 0;
		// Until the filesystem is full: one SEND at a time.
		const send = async () => {
			const n = a.lines.length;
			const t = `${k++}-${text}`;
			a.sock.write(`SEND acct1 ${t}\n`);
			await until(() => a.lines.length > n, 'an answer', 10000);
			const line = a.lines[n];
			if (line.startsWith('OK '))
				acked.push(t);
			else if (/^ERR 503 \d+ store full$/.test(line))
				refused++;
			else
				throw new Error(`unexpected: ${line}`);
			return line;
		};
		while (refused < 20 && k < 100000)
			await send();
		if (refused < 20)
			throw new Error('the filesystem never filled');
		// Alive: it still answers.
		const n = a.lines.length;
		a.sock.write('PING alive\n');
		await until(() => a.lines.length > n, 'PONG', 10000);
		if (a.lines[n] !== 'PONG alive')
			throw new Error(`got ${a.lines[n]}`);
		// Something else takes the last byte, the store's reserve too: the
		// recipient gets a window of messages whose marks cannot be
		// written, and then nothing (paused), not the same ones again.
		// (Marks that fit in the WAL's space and the pages the deletes
		// free go through: then more come, each still once.)
		const hog = path.join(mnt, 'hog');
		const fd = fs.openSync(hog, 'w');
		for (const size of [1 << 16, 4096, 512]) {
			try {
				for (;;)
					fs.writeSync(fd, Buffer.alloc(size));
			} catch (e) {
				if (e.code !== 'ENOSPC')
					throw e;
			}
		}
		fs.closeSync(fd);
		const paused = await drainWhileFull(d, [], 3000);
		fs.unlinkSync(hog);
		console.log(`diskfull: no room at all: msg_lines=${paused.length} ` +
		    `distinct=${new Set(paused).size}`);
		if (paused.length !== new Set(paused).size)
			throw new Error('messages sent again while their marks could not be written');
		// The recipient comes back with the disk still full but for the
		// reserve: each message once (its mark written from the reserve),
		// none sent again, and the backlog drains.
		const fullAcked = acked.slice();
		const lines = paused.concat(await drainWhileFull(d,
		    fullAcked.filter((t) => !paused.includes(t)), 30000));
		const distinct = new Set(lines);
		const missing = fullAcked.filter((t) => !distinct.has(t)).length;
		const storedFull = await storedReaches(d, 0, 5000);
		console.log(`diskfull: while full: acknowledged=${fullAcked.length} ` +
		    `msg_lines=${lines.length} distinct=${distinct.size} ` +
		    `missing=${missing} stored_after=${storedFull}`);
		if (lines.length !== distinct.size)
			throw new Error(`${lines.length - distinct.size} duplicates ` +
			    'while the disk was full');
		if (missing > 0 || storedFull !== 0)
			throw new Error('the backlog did not drain while the disk was full');
		const errs = (d.log.match(/store: .* failed: /g) || []).length;
		// Room again: storing resumes by itself.
		fs.unlinkSync(filler);
		let resumed = false;
		for (let i = 0; i < 100 && !resumed; i++) {
			resumed = (await send()).startsWith('OK ');
			if (!resumed)
				await sleep(100);
		}
		if (!resumed)
			throw new Error('storing did not resume');
		a.sock.destroy();
		const got = await collect(d.port, ['acct1'], 1500, 60000);
		let lost = 0;
		for (const t of acked)
			if (!got.has(t) && !distinct.has(t))
				lost++;
		console.log(`diskfull: acknowledged=${acked.length} refused=${refused} ` +
		    `delivered=${got.size + distinct.size} lost=${lost} errors_logged=${errs} ` +
		    `resumed=${/store: writing again/.test(d.log)}`);
		if (lost > 0)
			throw new Error('acknowledged messages lost');
		if (errs !== 1)
			throw new Error(`the error was logged ${errs} times, not once:\n` +
			    d.log.split('\n').filter((l) => /store: /.test(l)).join('\n'));
		// The counts came through the episode: nothing is left waiting.
		const stored = await storedReaches(d, 0, 5000);
		if (stored !== 0)
			throw new Error(`stored=${stored} after everything was delivered`);
		await stop(d);
		d = null;
	} finally {
		if (d)
			await kill9(d).catch(() => {});
		try {
			execFileSync('umount', [mnt]);
		} catch (e) {
			console.log(`diskfull: umount ${mnt}: ${e.message}`);
		}
	}
}

// A config of n recipient accounts r<i> and n senders s<i>.
function orderConf(db, n) {
	const accounts = [];
	for (let i = 0; i < n; i++)
		accounts.push(`{ id = "r${i}"; password = "p"; }`, `{ id = "s${i}"; password = "p"; }`);
	return `dispatchers = 2;
idle_timeout = 0;
listeners = ( { name = "router"; address = "127.0.0.1"; port = 0; protocol = "router"; } );
accounts = ( ${accounts.join(',\n  ')} );
store = { path = "${db}"; sync = "normal"; };
`;
}

// Sends SEND r<i> s<i>-<k> with 16 in flight until state.stop; the ks
// answered OK go in ok.
function orderStorm(c, i, state) {
	const st = { sent: 0, answered: 0, ok: new Set(), pending: [] };
	const fill = () => {
		while (!state.stop && !c.closed && st.pending.length < 16) {
			st.pending.push(st.sent);
			c.sock.write(`SEND r${i} s${i}-${st.sent++}\n`);
		}
	};
	c.onLine = (line) => {
		const k = st.pending.shift();
		st.answered++;
		if (line.startsWith('OK '))
			st.ok.add(k);
		fill();
	};
	fill();
	return st;
}

// One round: n senders keep 16 SENDs each in flight to their offline
// recipient for 3 s; then the n recipients log in at once and drain.
// Every OK must arrive, once, in the order sent, and nothing else.
async function orderRound(d, n, round) {
	const state = { stop: false };
	const senders = await Promise.all(Array.from({ length: n }, (_, i) => login(d.port, `s${i}`, 'p')));
	const sts = senders.map((c, i) => orderStorm(c, i, state));
	await sleep(3000);
	state.stop = true;
	await until(() => sts.every((st, i) => st.answered === st.sent || senders[i].closed),
	    'the answers', 30000);
	for (const c of senders)
		c.sock.destroy();
	const total = sts.reduce((t, st) => t + st.ok.size, 0);
	const last = new Array(n).fill(-1);
	let misordered = 0, arrived = 0, stray = 0;
	const start = Date.now();
	const rs = await Promise.all(Array.from({ length: n }, (_, i) =>
	    login(d.port, `r${i}`, 'p', (line) => {
		const m = /^MSG \d+ s(\d+) s\d+-(\d+)$/.exec(line);
		const k = m ? Number(m[2]) : -1;
		if (!m || Number(m[1]) !== i || !sts[i].ok.has(k)) {
			stray++;
			return;
		}
		if (k <= last[i])
			misordered++;
		last[i] = k;
		arrived++;
	})));
	await until(() => arrived >= total, 'the drain', 60000).catch(() => {});
	const took = Date.now() - start;
	await sleep(300);
	for (const c of rs)
		c.sock.destroy();
	const missing = total > arrived ? total - arrived : 0;
	console.log(`order round ${round}: acknowledged=${total} arrived=${arrived} ` +
	    `misordered=${misordered} missing=${missing} other=${stray} drain_ms=${took}`);
	return misordered + missing + stray;
}

async function order(dir) {
	const n = Number(process.env.STRESS_ORDER_ACCOUNTS || 1000);
	const rounds = Number(process.env.STRESS_ORDER_ROUNDS || 5);
	const d = await start(dir, orderConf(path.join(dir, 'store.db'), n));
	let bad = 0;
	try {
		for (let r = 1; r <= rounds; r++)
			bad += await orderRound(d, n, r);
	} catch (e) {
		await kill9(d);
		throw e;
	}
	await stop(d);
	if (bad > 0)
		throw new Error(`${bad} messages out of order, missing or extra`);
}

const scenarios = {
	crash, 'crash-shards4': (dir) => crash(dir, 4), 'crash-drain': crashDrain,
	diskfull, 'diskfull-shards4': (dir) => diskfull(dir, 4), order,
};

(async () => {
	const name = process.argv[2];
	if (!BIN || !scenarios[name]) {
		console.error(`usage: ECHOROUTERD_BIN=... node store-faults.js ${Object.keys(scenarios).join('|')}`);
		process.exit(2);
	}
	if (!/sqlite: yes/.test(execFileSync(BIN, ['-V']).toString())) {
		console.log(`${name}: SKIP (built without SQLite)`);
		return;
	}
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), `erd-${name}-`));
	try {
		await scenarios[name](dir);
	} finally {
		if (KEEP)
			console.log(`kept ${dir}`);
		else
			fs.rmSync(dir, { recursive: true, force: true });
	}
})().then(() => process.exit(0), (e) => {
	console.error(`${process.argv[2]}: FAIL: ${e.message}`);
	process.exit(1);
});

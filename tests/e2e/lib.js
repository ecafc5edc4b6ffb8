// lib.js: starts the real echorouterd for the SMPP interop tests and wraps the
// npm smpp client in promises. Every wait is bounded.
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const smpp = require('smpp');

const BIN = process.env.ECHOROUTERD_BIN ||
	path.join(__dirname, '..', '..', 'build', 'default', 'echorouterd');
// ECHOROUTERD_WRAP: a command the daemon runs under (make check-valgrind
// runs the TLS tests under valgrind); every wait is then longer.
const WRAP = (process.env.ECHOROUTERD_WRAP || '').split(/\s+/).filter(Boolean);
const WAIT_MS = WRAP.length ? 120000 : 15000;

function withTimeout(promise, ms, what) {
	let timer;
	const timeout = new Promise((_, reject) => {
		timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms);
	});
	return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// Starts the daemon on conf (listeners with port = 0) and learns each
// listener's port from its "listening name=... port=N" log lines.
async function startDaemon(conf) {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-smpp-'));
	const file = path.join(dir, 'echorouterd.conf');
	fs.writeFileSync(file, conf);
	const argv = [...WRAP, BIN, '-c', file];
	const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
	const d = { child, dir, log: '', ports: {}, exited: null };
	child.stderr.setEncoding('utf8');
	child.on('exit', (code, signal) => { d.exited = { code, signal }; });
	await withTimeout(new Promise((resolve, reject) => {
		child.stderr.on('data', (chunk) => {
			d.log += chunk;
			for (const m of d.log.matchAll(/listening name=(\S+) .* port=(\d+)/g))
				d.ports[m[1]] = Number(m[2]);
			if (/ started: /.test(d.log))
				resolve();
		});
		child.on('exit', () => reject(new Error(`daemon exited:\n${d.log}`)));
	}), WAIT_MS, 'daemon start');
	return d;
}

// SIGTERM, then the exit code (the test expects 0).
async function stopDaemon(d) {
	if (d.exited === null) {
		d.child.kill('SIGTERM');
		await withTimeout(new Promise((resolve) => d.child.on('exit', resolve)),
			WAIT_MS, 'daemon stop').catch((e) => { d.child.kill('SIGKILL'); throw e; });
	}
	fs.rmSync(d.dir, { recursive: true, force: true });
	if (d.exited.code !== 0) {
		// The log's end first: a long log is cut in the middle by
		// whoever shows the failure, and the reason is at its end.
		const tail = d.log.trimEnd().split('\n').slice(-8).join('\n');
		throw new Error(`daemon exit ${JSON.stringify(d.exited)}; its log ends:\n${tail}\n` +
		    `the whole log:\n${d.log}`);
	}
}

// Stops every daemon given (null or exited ones skipped), even when one
// fails: a daemon left running keeps the test process alive. Throws the
// first failure.
async function stopAll(...ds) {
	const errors = [];
	for (const d of ds)
		if (d)
			await stopDaemon(d).catch((e) => errors.push(e));
	if (errors.length > 0)
		throw errors[0];
}

function connect(port) {
	return withTimeout(new Promise((resolve, reject) => {
		const s = smpp.connect({ url: `smpp://127.0.0.1:${port}` }, () => resolve(s));
		s.on('error', reject);
	}), WAIT_MS, 'smpp connect');
}

// Sends a request and resolves with its response PDU.
function call(session, command, options) {
	return withTimeout(new Promise((resolve) => {
		session[command](options || {}, (pdu) => resolve(pdu));
	}), WAIT_MS, command);
}

// Resolves with the next PDU of that command the server sends.
function next(session, command) {
	return withTimeout(new Promise((resolve) => session.once(command, resolve)),
		WAIT_MS, `waiting for ${command}`);
}

async function bind(port, how, system_id, password) {
	const s = await connect(port);
	const r = await call(s, how, { system_id, password });
	return { s, status: r.command_status, resp: r };
}

// Why a test that reads a store file with the sqlite3 shell cannot run
// (false: it can).
function sqlite3Missing() {
	const { execFileSync } = require('node:child_process');
	try {
		execFileSync('sqlite3', ['-version'], { stdio: 'ignore' });
		return false;
	} catch {
		return 'no sqlite3 shell';
	}
}

// Why a test that needs NATS cannot run (false: it can): a build without
// the NATS client, or no nats-server.
function natsMissing(bin) {
	const { execFileSync } = require('node:child_process');
	if (bin && !/nats: yes/.test(execFileSync(bin, ['-V']).toString()))
		return 'built without NATS (WITH_NATS=no)';
	try {
		execFileSync('nats-server', ['--version']);
	} catch (e) {
		return 'nats-server is not installed (Debian: nats-server; make check installs it)';
	}
	return false;
}

// A loopback port nobody listens on now, for a server a test starts (and
// may stop and start again on the same port). It is taken from below the
// kernel's ephemeral range: a port from that range (what listen(0) gives)
// may meanwhile become the local port of any outgoing connection on the
// machine, and a server started again on it would exit with "address in
// use". Below the range only another explicit bind can take it.
const EPHEMERAL = (() => {
	try {
		const [lo, hi] = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range',
			'utf8').trim().split(/\s+/).map(Number);
		if (lo > 0 && hi >= lo)
			return { lo, hi };
	} catch (e) { /* not Linux: any port */ }
	return null;
})();
const FIXED_LO = 10000;

function listenOn(port) {
	return new Promise((resolve) => {
		const srv = net.createServer();
		srv.on('error', () => resolve(0));
		srv.listen(port, '127.0.0.1', () => {
			const got = srv.address().port;
			srv.close(() => resolve(got));
		});
	});
}

async function freePort() {
	// Below the ephemeral range if there is room there, else above it.
	let lo = FIXED_LO, hi = 0;
	if (EPHEMERAL && EPHEMERAL.lo - FIXED_LO >= 1000)
		hi = EPHEMERAL.lo - 1;
	else if (EPHEMERAL && 65535 - EPHEMERAL.hi >= 1000)
		[lo, hi] = [EPHEMERAL.hi + 1, 65535];
	for (let tries = 0; hi && tries < 50; tries++) {
		const port = await listenOn(lo + Math.floor(Math.random() * (hi - lo + 1)));
		if (port)
			return port;
	}
	const port = await listenOn(0);
	if (!port)
		throw new Error('no free loopback port');
	return port;
}

// Connects, answers (status(pdu), default ROK) and collects every
// deliver_sm from the start, then binds: a backlog may come right behind
// the bind_resp.
async function session(port, how, id, password, status) {
	const s = await connect(port);
	const got = [];
	s.on('deliver_sm', (pdu) => {
		got.push(pdu);
		s.send(pdu.response({ command_status: status ? status(pdu) : 0 }));
	});
	const r = await call(s, how, { system_id: id, password });
	if (r.command_status !== 0)
		throw new Error(`bind ${id}: status ${r.command_status}`);
	return { s, got };
}

// A raw TCP client, for bytes the smpp package would not send.
function rawConnect(port) {
	return withTimeout(new Promise((resolve, reject) => {
		const sock = net.connect(port, '127.0.0.1', () => resolve(sock));
		sock.on('error', reject);
	}), WAIT_MS, 'raw connect');
}

// Reads from a raw socket until n bytes or the close; bounded.
function rawRead(sock, n) {
	return withTimeout(new Promise((resolve) => {
		let buf = Buffer.alloc(0);
		const done = () => { sock.off('data', onData); resolve(buf); };
		const onData = (chunk) => {
			buf = Buffer.concat([buf, chunk]);
			if (buf.length >= n)
				done();
		};
		sock.on('data', onData);
		sock.once('close', done);
	}), WAIT_MS, 'raw read');
}

function header(len, id, status, seq) {
	const b = Buffer.alloc(16);
	b.writeUInt32BE(len, 0);
	b.writeUInt32BE(id, 4);
	b.writeUInt32BE(status, 8);
	b.writeUInt32BE(seq, 12);
	return b;
}

// The text of a deliver_sm, from message_payload or short_message.
function text(pdu) {
	const asString = (v) => (Buffer.isBuffer(v) ? v.toString() : String(v));
	if (pdu.message_payload) {
		const p = pdu.message_payload;
		return asString(p.message !== undefined ? p.message : p);
	}
	const sm = pdu.short_message;
	if (sm === undefined || sm === null)
		return '';
	return asString(sm.message !== undefined ? sm.message : sm);
}

// One GET /metrics on a fresh connection: the body (status 200 checked).
function scrapeRaw(port) {
	return withTimeout(new Promise((resolve, reject) => {
		const sock = net.connect(port, '127.0.0.1', () =>
			sock.write('GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n'));
		let buf = '';
		sock.setEncoding('utf8');
		sock.on('data', (c) => { buf += c; });
		sock.on('error', reject);
		sock.on('close', () => {
			const i = buf.indexOf('\r\n\r\n');
			if (!buf.startsWith('HTTP/1.1 200 ') || i < 0)
				return reject(new Error(`bad scrape: ${buf.slice(0, 300)}`));
			const len = Number(/\r\nContent-Length: (\d+)/i.exec(buf)[1]);
			const body = buf.slice(i + 4);
			if (Buffer.byteLength(body) !== len)
				return reject(new Error(`body ${Buffer.byteLength(body)} != ${len}`));
			resolve(body);
		});
	}), 10000, 'scrape');
}

// Parses an exposition into { 'name{labels}': value }.
function parseMetrics(text) {
	const v = {};
	for (const line of text.split('\n')) {
		if (line === '' || line.startsWith('#'))
			continue;
		const i = line.lastIndexOf(' ');
		v[line.slice(0, i)] = Number(line.slice(i + 1));
	}
	return v;
}

async function scrape(port) {
	return parseMetrics(await scrapeRaw(port));
}

// The value of a series, 0 when absent (a table row not yet counted).
function val(m, series) {
	return m[series] === undefined ? 0 : m[series];
}

// A plain NATS client for one exchange, as any client on the server may
// talk: once the server's INFO line is in, writes what send returns (the
// CONNECT line first), then resolves with done(what came so far) as soon
// as that is not undefined.
function natsExchange(port, send, done, ms = 10000) {
	return withTimeout(new Promise((resolve, reject) => {
		const sock = net.connect(port, '127.0.0.1');
		let buf = '', sent = false;
		sock.setEncoding('latin1');
		sock.on('error', reject);
		sock.on('data', (d) => {
			buf += d;
			if (!sent && buf.includes('\r\n')) {
				sent = true;
				sock.write(send(), 'latin1');
			}
			const v = sent ? done(buf) : undefined;
			if (v !== undefined) {
				sock.destroy();
				resolve(v);
			}
		});
	}), ms, 'NATS exchange');
}

function sleep(ms) {
	return new Promise((r) => setTimeout(r, ms));
}

// Polls fn until it returns a truthy value, for at most ms.
async function until(fn, ms, what) {
	const end = Date.now() + ms;
	for (;;) {
		const v = await fn();
		if (v)
			return v;
		if (Date.now() > end)
			throw new Error(`timed out: ${what}`);
		await sleep(100);
	}
}

// A router line client: c.lines are the whole lines received so far;
// each arrival calls c.waiters; c.wait(pred, what) waits for a line.
function lineClient(port, ms = 10000) {
	return withTimeout(new Promise((resolve, reject) => {
		const sock = net.connect(port, '127.0.0.1', () => resolve(c));
		const c = { sock, lines: [], partial: '', waiters: [] };
		// The first line (read so far or to come) that pred accepts.
		c.wait = (pred, what, wms = 10000) => withTimeout(new Promise((ok) => {
			const check = () => {
				const hit = c.lines.find(pred);
				if (hit === undefined)
					return;
				c.waiters.splice(c.waiters.indexOf(check), 1);
				ok(hit);
			};
			c.waiters.push(check);
			check();
		}), wms, what);
		sock.setEncoding('utf8');
		sock.on('error', reject);
		sock.on('data', (d) => {
			const parts = (c.partial + d).split('\n');
			c.partial = parts.pop();
			c.lines.push(...parts);
			for (const w of c.waiters.slice())
				w();
		});
	}), ms, 'line connect');
}

// A clustered daemon's stats line: SIGUSR1, then the line from its log.
function clusterStats(d, ms = 10000) {
	const before = d.log.length;
	d.child.kill('SIGUSR1');
	return until(() => {
		const m = /stats .*cluster=.*/.exec(d.log.slice(before));
		return m && m[0];
	}, ms, 'stats line');
}

// The configuration of a daemon with an smpp, a router, an http and a
// metrics listener (loopback, port 0): the accounts given (libconfig
// groups, one a line, without the list's parentheses), then tail.
function httpConf(accounts, tail = '') {
	return `dispatchers = 2;
idle_timeout = 0;
listeners = (
  { name = "smpp"; address = "127.0.0.1"; port = 0; protocol = "smpp"; },
  { name = "router"; address = "127.0.0.1"; port = 0; protocol = "router"; },
  { name = "http"; address = "127.0.0.1"; port = 0; protocol = "http"; },
  { name = "metrics"; address = "127.0.0.1"; port = 0; protocol = "metrics"; }
);
accounts = (
${accounts}
);
${tail}`;
}

module.exports = {
	natsExchange, sleep, until, clusterStats, lineClient,
	scrapeRaw, scrape, parseMetrics, val,
	smpp, startDaemon, stopDaemon, stopAll, connect, call, next, bind, session, rawConnect,
	rawRead, header, text, withTimeout, WRAP, freePort, natsMissing, sqlite3Missing, httpConf,
};

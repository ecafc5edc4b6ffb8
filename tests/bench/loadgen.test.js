// loadgen.test.js: the load generator behind `make bench` must measure the
// real daemon without error, and must fail, within its time bound, when a
// server corrupts, reorders or loses what it was sent. Fake servers here
// misbehave on purpose; every run is short and bounded.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const net = require('node:net');
const path = require('node:path');
const L = require('../e2e/lib.js');

const LOADGEN = process.env.LOADGEN ||
	path.join(__dirname, '..', '..', 'build', 'default', 'loadgen');
const RUN_MS = 30000;	// beyond loadgen's own alarm for these options

// Short runs: no warm-up, 1 s measured, 1 s to drain, 5 s to connect.
const SHORT = ['-w', '0', '-D', '1', '-T', '1', '-C', '5', '-t', '2'];

// Runs loadgen; resolves with its exit code, output, RESULT fields, time.
function loadgen(args) {
	return L.withTimeout(new Promise((resolve, reject) => {
		const t0 = Date.now();
		const child = spawn(LOADGEN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
		let out = '', err = '';
		child.stdout.setEncoding('utf8');
		child.stderr.setEncoding('utf8');
		child.stdout.on('data', (c) => { out += c; });
		child.stderr.on('data', (c) => { err += c; });
		child.on('error', reject);
		child.on('close', (code, signal) => {
			const r = {};
			const line = out.split('\n').find((l) => l.startsWith('RESULT '));
			for (const kv of (line || '').split(' ').slice(1)) {
				const i = kv.indexOf('=');
				r[kv.slice(0, i)] = kv.slice(i + 1);
			}
			resolve({ code, signal, out, err, result: line ? r : null,
				ms: Date.now() - t0 });
		});
	}), RUN_MS, `loadgen ${args.join(' ')}`);
}

function assertClean(run) {
	const why = `${run.out}\n${run.err}`;
	assert.equal(run.code, 0, why);
	assert.ok(run.result, why);
	assert.equal(run.result.errors, '0', why);
	assert.equal(run.result.lost, '0', why);
	assert.ok(Number(run.result.msgs) > 0, why);
	assert.ok(Number(run.result.rate) > 0, why);
	assert.ok(Number(run.result.p99_us) > 0, why);
}

function assertFailed(run, pattern) {
	const why = `${run.out}\n${run.err}`;
	assert.equal(run.code, 1, why);
	assert.equal(run.signal, null, why);
	assert.match(run.err, pattern, why);
	assert.ok(run.result, why);
}

// A loopback server on port 0 whose connections onConn handles.
async function fakeServer(onConn) {
	const socks = new Set();
	const srv = net.createServer((s) => {
		socks.add(s);
		s.on('close', () => socks.delete(s));
		s.on('error', () => {});
		onConn(s);
	});
	await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
	return {
		port: srv.address().port,
		close: () => new Promise((resolve) => {
			for (const s of socks)
				s.destroy();
			srv.close(resolve);
		}),
	};
}

// An echo server that hands chunk (and the connection's index) to mangle.
function fakeEcho(mangle) {
	let next = 0;
	return fakeServer((s) => {
		const id = next++;
		let off = 0;
		s.on('data', (chunk) => {
			const out = mangle(Buffer.from(chunk), off, id);
			off += chunk.length;
			if (out.length > 0)
				s.write(out);
		});
	});
}

// A router (LOGIN, SEND -> OK + MSG) whose deliveries go through deliver.
function fakeRouter(deliver) {
	const byAddr = new Map();
	let id = 0;
	return fakeServer((s) => {
		let buf = '', me = null;
		s.setEncoding('latin1');
		s.on('data', (chunk) => {
			buf += chunk;
			let lf;
			while ((lf = buf.indexOf('\n')) >= 0) {
				const line = buf.slice(0, lf);
				buf = buf.slice(lf + 1);
				const w = line.split(' ');
				if (w[0] === 'LOGIN') {
					me = w[1];
					byAddr.set(me, s);
					s.write(`OK LOGIN ${me}\n`);
				} else if (w[0] === 'SEND') {
					const text = line.slice(6 + w[1].length);
					const n = ++id;
					s.write(`OK ${n}\n`);
					deliver(byAddr.get(w[1]), `MSG ${n} ${me} ${text}\n`, n);
				}
			}
		});
	});
}

const DAEMON_CONF = `
dispatchers = 2;
idle_timeout = 0;
shutdown_timeout = 2;
log = { level = "info"; };
listeners = (
  { name = "echo"; address = "127.0.0.1"; port = 0; protocol = "echo"; },
  { name = "router"; address = "127.0.0.1"; port = 0; protocol = "router"; },
  { name = "smpp"; address = "127.0.0.1"; port = 0; protocol = "smpp"; }
);`;

test('every mode runs clean against the real daemon', async () => {
	const d = await L.startDaemon(DAEMON_CONF);
	try {
		for (const d16 of ['1', '16']) {
			const run = await loadgen(['-m', 'echo', '-p', d.ports.echo,
				'-n', '20', '-d', d16, '-s', '16', ...SHORT]);
			assertClean(run);
			assert.equal(run.result.mode, 'echo');
			assert.equal(run.result.d, d16);
			assert.equal(run.result.srv_cpu_us, undefined);
		}
		// -S: the server's CPU over the measured period (run-bench's
		// cpu_us/msg against a baseline).
		const cpu = await loadgen(['-m', 'echo', '-p', d.ports.echo,
			'-n', '20', '-s', '16', '-S', String(d.child.pid), ...SHORT]);
		assertClean(cpu);
		assert.match(cpu.result.srv_cpu_us, /^[0-9]+$/);
		assert.ok(Number(cpu.result.srv_cpu_us) > 0, cpu.out);
		for (const where of ['same', 'cross']) {
			const run = await loadgen(['-m', 'router', '-p', d.ports.router,
				'-P', '8', '-d', '4', '-x', where, '-R', '2', ...SHORT]);
			assertClean(run);
			assert.equal(run.result.pairs, '8');
		}
		const smpp = await loadgen(['-m', 'smpp', '-p', d.ports.smpp,
			'-P', '4', '-d', '4', ...SHORT]);
		assertClean(smpp);
		const idle = await loadgen(['-m', 'echo', '-p', d.ports.echo,
			'-n', '50', '-I', '1', '-C', '5']);
		assert.equal(idle.code, 0, idle.err);
		assert.match(idle.out, /^IDLE conns=50$/m);
		assert.equal(idle.result.mode, 'idle');
	} finally {
		await L.stopDaemon(d);
	}
});

test('smpp -g: line senders to SMPP receivers, short and in UCS-2 parts, checked', async () => {
	const d = await L.startDaemon(DAEMON_CONF);
	try {
		const base = ['-m', 'smpp', '-g', '-p', d.ports.router, '-r',
			d.ports.smpp, '-P', '4', '-d', '4', '-x', 'cross', '-R', '2'];
		const short = await loadgen([...base, ...SHORT]);
		assertClean(short);
		assert.equal(short.result.parts, '0');
		// 300 characters in UCS-2: 5 parts of at most 67.
		const long = await loadgen([...base, '-u', '-s', '300', ...SHORT]);
		assertClean(long);
		assert.equal(long.result.parts_per_msg, '5.00', long.out);
	} finally {
		await L.stopDaemon(d);
	}
});

test('smpp -g -E: the line senders turn RECEIPTS ON and count their RCPT lines', async () => {
	const d = await L.startDaemon(DAEMON_CONF);
	try {
		const base = ['-m', 'smpp', '-g', '-p', d.ports.router, '-r',
			d.ports.smpp, '-P', '4', '-d', '4', '-x', 'cross', '-R', '2', ...SHORT];
		const run = await loadgen([...base, '-E']);
		assertClean(run);
		const n = Number(run.result.receipts);
		// A receipt per message delivered, but for those still on their
		// way when the measured second ended.
		assert.ok(n > 0 && n <= Number(run.result.msgs) + 16, run.out);
		assert.ok(Number(run.result.receipt_rate) > 0, run.out);
		const plain = await loadgen(base);
		assertClean(plain);
		assert.equal(plain.result.receipts, undefined);
		const bad = await loadgen(['-m', 'router', '-p', d.ports.router, '-E', ...SHORT]);
		assert.equal(bad.code, 2, bad.err);
	} finally {
		await L.stopDaemon(d);
	}
});

test('smpp -u: parts that do not join (SAR, no UDH) fail the run', async () => {
	const d = await L.startDaemon(DAEMON_CONF + '\nsmpp = { long = "sar"; };');
	try {
		const run = await loadgen(['-m', 'smpp', '-g', '-u', '-s', '300',
			'-p', d.ports.router, '-r', d.ports.smpp, '-P', '2', '-d', '2',
			'-x', 'cross', '-R', '2', ...SHORT]);
		assertFailed(run, /bad text/);
	} finally {
		await L.stopDaemon(d);
	}
});

test('-A: pair addresses start with the prefix (a route to an upstream)', async () => {
	const froms = new Set();
	const srv = await fakeRouter((to, line) => {
		froms.add(line.split(' ')[2]);
		to.write(line);
	});
	const d = await L.startDaemon(DAEMON_CONF);
	try {
		// What a server sees: every sender's address carries the prefix.
		assertClean(await loadgen(['-m', 'router', '-p', srv.port,
			'-A', '+44', '-P', '2', '-d', '1', ...SHORT]));
		assert.equal(froms.size, 2, [...froms].join(','));
		for (const a of froms)
			assert.match(a, /^\+44[0-9]{1,4}s[0-9]+$/);
		// And the real daemon routes between such addresses.
		assertClean(await loadgen(['-m', 'router', '-p', d.ports.router,
			'-A', '+44', '-P', '4', '-d', '2', ...SHORT]));
		// Too long for a system_id (15) with the pid and role after it.
		const bad = await loadgen(['-m', 'router', '-p', d.ports.router,
			'-A', '+4412345', '-P', '1', ...SHORT]);
		assert.equal(bad.code, 2, bad.err);
	} finally {
		await srv.close();
		await L.stopDaemon(d);
	}
});

test('a corrupted echo byte fails the run and names the byte', async () => {
	// Connection 0's byte 500 comes back changed.
	const srv = await fakeEcho((b, off, id) => {
		if (id === 0 && off <= 500 && 500 < off + b.length)
			b[500 - off] ^= 0x20;
		return b;
	});
	try {
		const run = await loadgen(['-m', 'echo', '-p', srv.port, '-n', '4',
			'-s', '16', ...SHORT]);
		assertFailed(run, /first error: conn \d+: byte 500 differs/);
		assert.notEqual(run.result.errors, '0');
	} finally {
		await srv.close();
	}
});

test('extra echo bytes fail the run', async () => {
	const srv = await fakeEcho((b, off) => (off === 0 ? Buffer.concat([b, b]) : b));
	try {
		const run = await loadgen(['-m', 'echo', '-p', srv.port, '-n', '2',
			'-s', '16', ...SHORT]);
		assertFailed(run, /bytes nobody asked for/);
	} finally {
		await srv.close();
	}
});

test('replies a server swallows are counted lost, within the time bound', async () => {
	// Connection 1 stops answering after 10 messages; the others go on.
	const srv = await fakeEcho((b, off, id) => (id === 1 && off >= 160 ? Buffer.alloc(0) : b));
	try {
		const run = await loadgen(['-m', 'echo', '-p', srv.port, '-n', '4',
			'-s', '16', '-d', '2', ...SHORT]);
		assertFailed(run, /replies lost/);
		assert.equal(run.result.errors, '0');
		assert.equal(run.result.lost, '2');
		assert.ok(run.ms < 15000, `took ${run.ms} ms`);
	} finally {
		await srv.close();
	}
});

test('a server that never answers ends the run, not the test', async () => {
	const srv = await fakeEcho(() => Buffer.alloc(0));
	try {
		const run = await loadgen(['-m', 'echo', '-p', srv.port, '-n', '8',
			'-d', '3', ...SHORT]);
		assertFailed(run, /24 replies lost/);
		assert.equal(run.result.msgs, '0');
		assert.ok(run.ms < 15000, `took ${run.ms} ms`);
	} finally {
		await srv.close();
	}
});

test('a wrong line reply fails a line-mode run', async () => {
	let n = 0;
	const srv = await fakeServer((s) => {
		s.on('data', (chunk) => {
			for (const ch of chunk.toString('latin1'))
				if (ch === '\n')
					s.write(++n === 50 ? '-ERR no\r\n' : '+PONG\r\n');
		});
	});
	try {
		const run = await loadgen(['-m', 'line', '-p', srv.port, '-n', '4', ...SHORT]);
		assertFailed(run, /unexpected reply "-ERR no/);
	} finally {
		await srv.close();
	}
});

test('router deliveries out of order fail the run', async () => {
	// Message 20 is held back and delivered after message 21.
	let held = null;
	const srv = await fakeRouter((to, line, n) => {
		if (n === 20) {
			held = { to, line };
			return;
		}
		to.write(line);
		if (n === 21)
			held.to.write(held.line);
	});
	try {
		const run = await loadgen(['-m', 'router', '-p', srv.port, '-P', '1',
			'-d', '4', ...SHORT]);
		assertFailed(run, /first error: pair 0: got #20 expected #19/);
	} finally {
		await srv.close();
	}
});

test('a router delivery with changed text or sender fails the run', async () => {
	for (const [bad, pattern] of [
		[(l) => l.replace(/(\S)\n$/, (_, c) => `${c === 'x' ? 'y' : 'x'}\n`), /bad text/],
		[(l) => l.replace(/^(MSG \d+ )\S+/, '$1nobody'), /MSG from wrong sender/],
	]) {
		const srv = await fakeRouter((to, line, n) => to.write(n === 30 ? bad(line) : line));
		try {
			const run = await loadgen(['-m', 'router', '-p', srv.port, '-P', '2',
				'-d', '4', ...SHORT]);
			assertFailed(run, pattern);
		} finally {
			await srv.close();
		}
	}
});

// An HTTP/1.1 server: each request (method, url) to answer, which writes
// the raw response; keep-alive, pipelined requests answered in order.
function fakeHttp(answer) {
	const seen = { requests: 0, conns: 0 };
	return fakeServer((s) => {
		let buf = '';
		seen.conns++;
		s.setEncoding('latin1');
		s.on('data', (chunk) => {
			buf += chunk;
			let end;
			while ((end = buf.indexOf('\r\n\r\n')) >= 0) {
				const head = buf.slice(0, end);
				buf = buf.slice(end + 4);
				const [method, url] = head.split(' ');
				seen.requests++;
				s.write(answer(method, url, seen.requests));
			}
		});
	}).then((srv) => Object.assign(srv, { seen }));
}

const resp = (status, body) => `HTTP/1.1 ${status} X\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

test('-m line -H: keep-alive GETs, Content-Length honoured; a non-2xx fails the run', async () => {
	// The body holds what would look like a status line: it is skipped.
	const ok = await fakeHttp((m, url) => (m === 'GET' && url === '/x?a=1' ?
		resp(202, 'HTTP/1.1 500 not a response\r\n\r\n') : resp(400, 'bad')));
	try {
		const run = await loadgen(['-m', 'line', '-H', '-p', ok.port, '-n', '4',
			'-d', '1', '-q', '/x?a=1', ...SHORT]);
		assertClean(run);
		// One connection each, many requests on it.
		assert.equal(ok.seen.conns, 4);
		assert.ok(ok.seen.requests > 8, `${ok.seen.requests} requests`);
	} finally {
		await ok.close();
	}
	const bad = await fakeHttp((m, url, n) => (n === 20 ? resp(503, 'busy') : resp(200, 'ok')));
	try {
		const run = await loadgen(['-m', 'line', '-H', '-p', bad.port, '-n', '2',
			'-d', '1', '-q', '/x', ...SHORT]);
		assertFailed(run, /HTTP 503 busy/);
	} finally {
		await bad.close();
	}
});

test('smpp -g -H: Kannel sendsms GETs to SMPP receivers, each delivered in order', async () => {
	const d = await L.startDaemon(DAEMON_CONF.replace('listeners = (',
		'listeners = ( { name = "http"; address = "127.0.0.1"; port = 0; protocol = "http"; },'));
	try {
		const run = await loadgen(['-m', 'smpp', '-g', '-H', '-p', d.ports.http,
			'-r', d.ports.smpp, '-P', '4', '-d', '1', '-x', 'cross', '-R', '2',
			...SHORT]);
		assertClean(run);
		assert.equal(run.result.pairs, '4');
	} finally {
		await L.stopDaemon(d);
	}
});

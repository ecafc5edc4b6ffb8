// tls.test.js: TLS listeners against real clients: Node's tls (echo under
// partial reads and writes, router across reactors, HTTPS metrics), the npm
// smpp client over ssmpp://, client certificates, hostile handshakes, floods
// of half-open handshakes, the TLS 1.2 ciphers, close_notify, and a
// certificate swapped by SIGHUP. Certificates come from openssl(1).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const https = require('node:https');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const tls = require('node:tls');
const { Duplex } = require('node:stream');
const { execFileSync, spawnSync } = require('node:child_process');
const L = require('./lib.js');

const BIN = process.env.ECHOROUTERD_BIN;
let skip = false;
if (BIN && !/tls: yes/.test(execFileSync(BIN, ['-V']).toString()))
	skip = 'built without TLS';
try {
	execFileSync('openssl', ['version']);
} catch (e) {
	skip = skip || 'openssl(1) not installed';
}

const HANDSHAKE_TIMEOUT = 2;
// Memcheck does not see what the kernel writes through an io_uring (the
// plain metrics listeners' reads): under valgrind, plain reads.
const URING = process.env.ECHOROUTERD_WRAP ? 'io_uring = false;' : '';
let dir, d;

function openssl(...args) {
	execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
}

// A CA (name), and a certificate it signs for cn (server: for 127.0.0.1).
function makeCa(name) {
	openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`,
		'-out', `${name}.pem`, '-days', '2', '-subj', `/CN=${name}`);
}
function makeCert(ca, name, cn, serial) {
	fs.writeFileSync(path.join(dir, `${name}.ext`),
		'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
	openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`,
		'-out', `${name}.csr`, '-subj', `/CN=${cn}`);
	openssl('x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`,
		'-set_serial', String(serial), '-out', `${name}.pem`, '-days', '2',
		'-extfile', `${name}.ext`);
}
const pem = (name) => fs.readFileSync(path.join(dir, `${name}.pem`));
const keyOf = (name) => fs.readFileSync(path.join(dir, `${name}.key`));

function conf() {
	const t = `certificate = "${dir}/server.pem"; key = "${dir}/server.key";`;
	return `dispatchers = 2; ${URING}
idle_timeout = 0;
limits = { handshake_timeout = ${HANDSHAKE_TIMEOUT}; max_handshakes_per_ip = 0; };
listeners = (
  { name = "echo"; address = "127.0.0.1"; port = 0; protocol = "echo"; tls = { ${t} }; },
  { name = "router"; address = "127.0.0.1"; port = 0; protocol = "router"; tls = { ${t} }; },
  { name = "smpp"; address = "127.0.0.1"; port = 0; protocol = "smpp"; tls = { ${t} }; },
  { name = "metrics"; address = "127.0.0.1"; port = 0; protocol = "metrics"; tls = { ${t} }; },
  { name = "mtls"; address = "127.0.0.1"; port = 0; protocol = "echo";
    tls = { ${t} ca = "${dir}/ca.pem"; verify_client = true; min_version = "TLSv1.3"; }; },
  { name = "legacy"; address = "127.0.0.1"; port = 0; protocol = "echo";
    tls = { ${t} ciphers = "AES128-SHA"; }; },
  { name = "plainmetrics"; address = "127.0.0.1"; port = 0; protocol = "metrics"; }
);
accounts = ( { id = "tx"; password = "t"; }, { id = "rx"; password = "r"; },
  { id = "alice"; password = "a"; }, { id = "bob"; password = "b"; } );
`;
}

function tlsConnect(port, extra = {}) {
	return L.withTimeout(new Promise((resolve, reject) => {
		const s = tls.connect({ port, host: '127.0.0.1', ca: pem('ca'), ...extra },
			() => resolve(s));
		s.on('error', reject);
	}), 10000, 'tls connect');
}

// Resolves when s closes, with what it read meanwhile.
function untilClosed(s, ms = 10000) {
	return L.withTimeout(new Promise((resolve) => {
		const got = [];
		s.on('data', (c) => got.push(c));
		s.on('error', () => {});
		s.on('close', () => resolve(Buffer.concat(got)));
	}), ms, 'close');
}

async function until(pred, what, ms = 10000) {
	const end = Date.now() + ms;
	while (!(await pred())) {
		if (Date.now() > end)
			throw new Error(`timed out: ${what}`);
		await new Promise((r) => setTimeout(r, 50));
	}
}

test.before(async () => {
	if (skip)
		return;
	dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-tls-'));
	makeCa('ca');
	makeCa('other');
	makeCert('ca', 'server', '127.0.0.1', 1001);
	makeCert('ca', 'client', 'client', 2001);
	makeCert('other', 'stranger', 'stranger', 3001);
	d = await L.startDaemon(conf());
});

test.after(async () => {
	if (skip)
		return;
	await L.stopDaemon(d);
	fs.rmSync(dir, { recursive: true, force: true });
});

test('echo over TLS: 4 MiB byte-exact through small writes and a slow reader', { skip }, async () => {
	const s = await tlsConnect(d.ports.echo);
	const N = 4 << 20;
	const out = Buffer.alloc(N);
	for (let i = 0; i < N; i++)
		out[i] = (i * 131 + (i >> 11)) & 0xff;
	const chunks = [];
	let got = 0;
	const done = new Promise((resolve) => {
		s.on('data', (c) => {
			chunks.push(c);
			got += c.length;
			// A slow reader now and then: the daemon's writes go partial.
			if (chunks.length % 50 === 0) {
				s.pause();
				setTimeout(() => s.resume(), 20);
			}
			if (got >= N)
				resolve();
		});
	});
	for (let off = 0; off < N;) {
		const n = Math.min(N - off, 1 + Math.floor(Math.random() * 70000));
		if (!s.write(out.subarray(off, off + n)))
			await new Promise((r) => s.once('drain', r));
		off += n;
	}
	await L.withTimeout(done, 60000, 'echo back');
	assert.ok(Buffer.concat(chunks).equals(out), 'echoed bytes differ');
	s.end();
});

test('router over TLS: LOGIN and SEND between two clients', { skip }, async () => {
	const a = await tlsConnect(d.ports.router);
	const b = await tlsConnect(d.ports.router);
	const lines = (s) => {
		const acc = { l: [], buf: '' };
		s.setEncoding('utf8');
		s.on('data', (x) => {
			acc.buf += x;
			let i;
			while ((i = acc.buf.indexOf('\n')) >= 0) {
				acc.l.push(acc.buf.slice(0, i));
				acc.buf = acc.buf.slice(i + 1);
			}
		});
		return acc;
	};
	const la = lines(a), lb = lines(b);
	a.write('LOGIN alice a\n');
	b.write('LOGIN bob b\n');
	await until(() => la.l.length && lb.l.length, 'logins');
	for (let i = 0; i < 100; i++)
		a.write(`SEND bob m${i}\n`);
	await until(() => lb.l.filter((l) => l.startsWith('MSG ')).length === 100, '100 MSGs');
	assert.deepEqual(lb.l.filter((l) => l.startsWith('MSG ')).map((l) => l.split(' ')[3]),
		Array.from({ length: 100 }, (_, i) => `m${i}`));
	a.end();
	b.end();
});

test('SMPP over TLS (ssmpp://): bind, submit_sm, deliver_sm', { skip }, async () => {
	const connect = () => L.withTimeout(new Promise((resolve, reject) => {
		const s = L.smpp.connect({ url: `ssmpp://127.0.0.1:${d.ports.smpp}`, ca: pem('ca') },
			() => resolve(s));
		s.on('error', reject);
	}), 10000, 'ssmpp connect');
	const rx = await connect();
	const got = [];
	rx.on('deliver_sm', (pdu) => { got.push(L.text(pdu)); rx.send(pdu.response()); });
	assert.equal((await L.call(rx, 'bind_receiver', { system_id: 'rx', password: 'r' })).command_status, 0);
	const tx = await connect();
	assert.equal((await L.call(tx, 'bind_transmitter', { system_id: 'tx', password: 't' })).command_status, 0);
	for (let i = 0; i < 20; i++) {
		const r = await L.call(tx, 'submit_sm', { destination_addr: 'rx', short_message: `s${i}` });
		assert.equal(r.command_status, 0);
	}
	await until(() => got.length === 20, '20 deliver_sm');
	assert.deepEqual(got, Array.from({ length: 20 }, (_, i) => `s${i}`));
	tx.close();
	rx.close();
});

function httpsScrape() {
	return L.withTimeout(new Promise((resolve, reject) => {
		https.get({ host: '127.0.0.1', port: d.ports.metrics, path: '/metrics', ca: pem('ca'),
			agent: false }, (res) => {
			let b = '';
			res.setEncoding('utf8');
			res.on('data', (c) => { b += c; });
			res.on('end', () => resolve(b));
		}).on('error', reject);
	}), 10000, 'https');
}
const handshakes = async () => {
	const m = L.parseMetrics(await httpsScrape());
	const v = (r) => L.val(m, `echorouterd_tls_handshakes_total{result="${r}"}`);
	return { ok: v('ok'), bad: v('bad'), certificate: v('certificate'), timeout: v('timeout') };
};

test('metrics over HTTPS', { skip }, async () => {
	const body = await httpsScrape();
	assert.match(body, /^echorouterd_build_info\{version="/m);
	assert.match(body, /^echorouterd_tls_handshakes_total\{result="ok"\} [1-9]/m);
});

test('kernel TLS: the log says which path is taken, and the metrics count it', { skip }, async () => {
	const ulp = fs.existsSync('/proc/sys/net/ipv4/tcp_available_ulp') ?
		fs.readFileSync('/proc/sys/net/ipv4/tcp_available_ulp', 'utf8').split(/\s+/) : [];
	const s = await tlsConnect(d.ports.echo);
	s.end();
	const m = L.parseMetrics(await httpsScrape());
	const send = L.val(m, 'echorouterd_tls_ktls_total{direction="send"}');
	assert.ok('echorouterd_tls_ktls_total{direction="send"}' in m, 'the series is there');
	if (ulp.includes('tls')) {
		assert.match(d.log, /TLS: kernel TLS available/);
		assert.ok(send > 0, 'kernel TLS on, and not used');
	} else {
		assert.match(d.log, /TLS: no kernel TLS/);
		assert.equal(send, 0);
	}
});

test('client certificates: none, another CA\'s: refused; ours: served', { skip }, async () => {
	const before = await handshakes();
	await assert.rejects(tlsConnect(d.ports.mtls).then(async (s) => {
		// TLS 1.3: the server's refusal may come after the client's finish.
		s.write('x');
		await untilClosed(s);
		throw new Error('closed');
	}));
	await assert.rejects(tlsConnect(d.ports.mtls, { cert: pem('stranger'), key: keyOf('stranger') })
		.then(async (s) => { s.write('x'); await untilClosed(s); throw new Error('closed'); }));
	const s = await tlsConnect(d.ports.mtls, { cert: pem('client'), key: keyOf('client') });
	s.write('mutual\n');
	const back = await L.withTimeout(new Promise((r) => s.once('data', r)), 5000, 'echo');
	assert.equal(back.toString(), 'mutual\n');
	s.end();
	const after = await handshakes();
	assert.equal(after.certificate - before.certificate, 2, 'refused certificates counted');
});

test('hostile handshakes: plaintext, random bytes, a truncated ClientHello, one byte a second', { skip }, async () => {
	const before = await handshakes();
	// Plaintext on a TLS port: closed, nothing echoed in clear.
	let s = await L.rawConnect(d.ports.echo);
	s.write('hello in clear\r\n\r\n');
	let got = await untilClosed(s);
	assert.ok(!got.includes('hello'), 'plaintext came back');
	// Random bytes.
	s = await L.rawConnect(d.ports.echo);
	s.write(Buffer.from(Array.from({ length: 300 }, () => Math.floor(Math.random() * 256))));
	await untilClosed(s);
	// A ClientHello cut short: closed at handshake_timeout, not before.
	s = await L.rawConnect(d.ports.echo);
	const t0 = Date.now();
	s.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]));
	await untilClosed(s, (HANDSHAKE_TIMEOUT + 5) * 1000);
	const took = (Date.now() - t0) / 1000;
	assert.ok(took >= HANDSHAKE_TIMEOUT - 1 && took < HANDSHAKE_TIMEOUT + 3, `closed after ${took} s`);
	// One byte a second: the deadline is for the whole handshake.
	s = await L.rawConnect(d.ports.echo);
	const drip = setInterval(() => s.write(Buffer.from([0x16])), 1000);
	const t1 = Date.now();
	await untilClosed(s, (HANDSHAKE_TIMEOUT + 5) * 1000).finally(() => clearInterval(drip));
	assert.ok((Date.now() - t1) / 1000 < HANDSHAKE_TIMEOUT + 3);
	// And the listener still serves.
	const ok = await tlsConnect(d.ports.echo);
	ok.write('still\n');
	assert.equal((await L.withTimeout(new Promise((r) => ok.once('data', r)), 5000, 'echo'))
		.toString(), 'still\n');
	ok.end();
	// Counted by why: two bad, two out of time.
	const after = await handshakes();
	assert.equal(after.bad - before.bad, 2);
	assert.equal(after.timeout - before.timeout, 2);
});

test('2,000 stalled handshakes: 50 established clients see no error, and the stalled ones go at handshake_timeout', { skip }, async () => {
	const est = [];
	for (let i = 0; i < 50; i++)
		est.push(await tlsConnect(d.ports.echo));
	const before = await handshakes();
	const stalled = [];
	const closed = [];
	for (let i = 0; i < 2000; i += 200) {
		const batch = [];
		for (let k = 0; k < 200; k++)
			batch.push(L.rawConnect(d.ports.echo).then((s) => {
				s.on('error', () => {});
				closed.push(new Promise((r) => s.on('close', r)));
				// A ClientHello's first bytes, and nothing more.
				s.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]));
				stalled.push(s);
			}));
		await Promise.all(batch);
	}
	// Meanwhile, every established client: 50 round trips each.
	await Promise.all(est.map(async (s, i) => {
		for (let k = 0; k < 50; k++) {
			const msg = `c${i}-${k}\n`;
			const back = await L.withTimeout(new Promise((resolve, reject) => {
				let b = '';
				const on = (c) => {
					b += c;
					if (b.length >= msg.length) {
						s.off('data', on);
						s.off('error', reject);
						resolve(b);
					}
				};
				s.on('data', on);
				s.once('error', reject);
				s.write(msg);
			}), 5000, `round trip ${i}/${k}`);
			assert.equal(back, msg);
		}
	}));
	await L.withTimeout(Promise.all(closed), (HANDSHAKE_TIMEOUT + 10) * 1000,
		'the stalled ones closed');
	const after = await handshakes();
	assert.equal(after.timeout - before.timeout, 2000);
	est.forEach((s) => s.end());
});

test('SIGHUP: new connections get the new certificate, old ones keep working; a bad pair is refused', { skip }, async () => {
	const old = await tlsConnect(d.ports.echo);
	assert.equal(old.getPeerCertificate().serialNumber.replace(/^0+/, ''), (1001).toString(16).toUpperCase());
	makeCert('ca', 'server2', '127.0.0.1', 1002);
	fs.copyFileSync(path.join(dir, 'server2.pem'), path.join(dir, 'server.pem'));
	fs.copyFileSync(path.join(dir, 'server2.key'), path.join(dir, 'server.key'));
	let before = d.log.length;
	d.child.kill('SIGHUP');
	await until(() => /reloaded /.test(d.log.slice(before)), 'reloaded');
	const neu = await tlsConnect(d.ports.echo);
	assert.equal(neu.getPeerCertificate().serialNumber.replace(/^0+/, ''), (1002).toString(16).toUpperCase());
	old.write('old\n');
	assert.equal((await L.withTimeout(new Promise((r) => old.once('data', r)), 5000, 'old echo'))
		.toString(), 'old\n');
	// A key that does not match: the reload fails, naming the file; the
	// pair in use stays.
	fs.copyFileSync(path.join(dir, 'client.key'), path.join(dir, 'server.key'));
	before = d.log.length;
	d.child.kill('SIGHUP');
	await until(() => /reload failed/.test(d.log.slice(before)), 'reload failed');
	assert.match(d.log.slice(before), /server\.key/);
	const still = await tlsConnect(d.ports.echo);
	assert.equal(still.getPeerCertificate().serialNumber.replace(/^0+/, ''), (1002).toString(16).toUpperCase());
	fs.copyFileSync(path.join(dir, 'server2.key'), path.join(dir, 'server.key'));
	for (const s of [old, neu, still])
		s.end();
});

// ---- half-open handshakes: memory, caps, probes --------------------------

// make check SANITIZE=... says which sanitizer the binary has: its
// allocator's red zones and quarantine make memory figures meaningless.
const SAN = process.env.ECHOROUTERD_SANITIZE || '';
const MEASURED = !SAN && !process.env.ECHOROUTERD_WRAP;
// Under valgrind (make check-stress) every wait is longer.
const SLOW = process.env.ECHOROUTERD_WRAP ? 10 : 1;
// What an idle TLS connection may cost the daemon (docs/operations.md,
// "TLS": about 14 KiB).
const HALF_OPEN_KIB = 16;

// VmHWM (peak resident memory) or another /proc/PID/status field, KiB.
function statusKiB(pid, field) {
	const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm')
		.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
	return Number(m[1]);
}

// n raw clients of port that each send bytes and then say nothing; from
// localAddress when given. Resolves when all are connected and written,
// with the promises of their closes.
async function halfOpen(port, n, bytes, localAddress) {
	const closed = [];
	for (let i = 0; i < n; i += 200) {
		const batch = [];
		for (let k = i; k < Math.min(n, i + 200); k++)
			batch.push(L.withTimeout(new Promise((resolve, reject) => {
				const s = net.connect({ port, host: '127.0.0.1', localAddress }, () => {
					if (bytes.length > 0)
						s.write(bytes);
					resolve();
				});
				s.once('error', reject);
				closed.push(new Promise((r) => s.on('close', r)));
				// An alert may come before the close: read it.
				s.resume();
			}).then(() => {}, () => {}), 10000, 'connect'));
		await Promise.all(batch);
	}
	return closed;
}

// Round trips of established clients while fn runs: none may fail.
async function servedMeanwhile(port, fn) {
	const est = [];
	for (let i = 0; i < 20; i++)
		est.push(await tlsConnect(port));
	let stop = false;
	const loops = est.map(async (s, i) => {
		let k = 0;
		for (; !stop || k < 5; k++) {
			const msg = `c${i}-${k}\n`;
			const back = await L.withTimeout(new Promise((resolve, reject) => {
				let b = '';
				const on = (c) => {
					b += c;
					if (b.length >= msg.length) {
						s.off('data', on);
						s.off('error', reject);
						resolve(b);
					}
				};
				s.on('data', on);
				s.once('error', reject);
				s.write(msg);
			}), 10000, `round trip ${i}/${k}`);
			assert.equal(back, msg);
		}
		return k;
	});
	try {
		await fn();
	} finally {
		stop = true;
	}
	const trips = await Promise.all(loops);
	est.forEach((s) => s.end());
	return trips.reduce((a, b) => a + b, 0);
}

function floodConf(limits, handshakeTimeout = 3) {
	const t = `certificate = "${dir}/server.pem"; key = "${dir}/server.key";`;
	return `dispatchers = 2; ${URING}
idle_timeout = 0;
limits = { handshake_timeout = ${handshakeTimeout}; ${limits} };
listeners = (
  { name = "echo"; address = "127.0.0.1"; port = 0; protocol = "echo"; tls = { ${t} }; },
  { name = "metrics"; address = "127.0.0.1"; port = 0; protocol = "metrics"; }
);
`;
}

// 4,000 clients that each send bytes and stop, against a daemon of their
// own: its peak memory grows by less than HALF_OPEN_KIB per client, and
// established clients are served meanwhile. The closes come by
// handshake_timeout at the latest; the metrics after them are returned.
async function floodCase(bytes) {
	const N = 4000;
	const fd = await L.startDaemon(floodConf('max_handshakes_per_ip = 0;'));
	try {
		const pid = fd.child.pid;
		// A few handshakes first: OpenSSL's one-time tables are in the base.
		(await Promise.all([1, 2, 3].map(() => tlsConnect(fd.ports.echo)))).forEach((s) => s.end());
		const base = statusKiB(pid, 'VmHWM');
		let closed;
		const trips = await servedMeanwhile(fd.ports.echo, async () => {
			closed = await halfOpen(fd.ports.echo, N, bytes);
			await L.withTimeout(Promise.all(closed), 30000 * SLOW,
				'the half-open clients closed');
		});
		const per = (statusKiB(pid, 'VmHWM') - base) / N;
		console.log(`# ${N} clients sending ${bytes.toString('hex')}: peak RSS +${per.toFixed(2)} KiB each; ${trips} round trips meanwhile`);
		if (MEASURED)
			assert.ok(per < HALF_OPEN_KIB, `${per.toFixed(2)} KiB per half-open handshake`);
		return await L.scrape(fd.ports.metrics);
	} finally {
		await L.stopDaemon(fd);
	}
}

const hs = (m, r) => L.val(m, `echorouterd_tls_handshakes_total{result="${r}"}`);

test('4,000 ClientHello headers announcing 128 KiB (9 bytes each): refused at once, little memory, others served', { skip }, async () => {
	// A 4-byte record holding a ClientHello's header that announces
	// 131,000 bytes: OpenSSL allocated and zeroed that much for each.
	const m = await floodCase(Buffer.from([0x16, 3, 1, 0, 4, 1, 0x01, 0xff, 0xb8]));
	assert.equal(hs(m, 'bad'), 4000, 'refused as bad handshakes');
	assert.equal(hs(m, 'timeout'), 0, 'none left to time out');
	assert.equal(L.val(m, 'echorouterd_tls_handshaking'), 0);
});

test('4,000 half-open handshakes (a ClientHello begun, then silence): little memory each, others served', { skip }, async () => {
	// The header announces a plausible 508 bytes; the rest never comes.
	const m = await floodCase(Buffer.from([0x16, 3, 1, 0, 4, 1, 0, 1, 0xfc]));
	assert.equal(hs(m, 'timeout'), 4000);
	assert.equal(L.val(m, 'echorouterd_tls_handshaking'), 0);
});

test('max_handshakes and max_handshakes_per_ip: clients beyond are refused and counted; once the others go, served', { skip }, async () => {
	// Long enough for the first clients to stay while the others come.
	const fd = await L.startDaemon(floodConf('max_handshakes = 80; max_handshakes_per_ip = 50;', 8));
	// The acceptor counts a refusal, and the reactor the hand-off, a
	// moment after the client's connect: wait for them, then compare.
	const settled = async (want) => {
		let m;
		await until(async () => {
			m = await L.scrape(fd.ports.metrics);
			return Object.entries(want).every(([k, v]) => L.val(m, k) >= v);
		}, JSON.stringify(want));
		for (const [k, v] of Object.entries(want))
			assert.equal(L.val(m, k), v, k);
		return m;
	};
	try {
		const started = Buffer.from([0x16, 3, 1, 0, 4, 1, 0, 1, 0xfc]);
		// 60 from one address: 50 held, 10 refused by the per-address cap.
		const a = await halfOpen(fd.ports.echo, 60, started, '127.0.0.2');
		await settled({ 'echorouterd_refused_total{why="handshakes_ip"}': 10,
			echorouterd_tls_handshaking: 50 });
		// 40 from another: 30 more reach the cap of 80 in all.
		const b = await halfOpen(fd.ports.echo, 40, started, '127.0.0.3');
		await settled({ 'echorouterd_refused_total{why="handshakes"}': 10,
			echorouterd_tls_handshaking: 80 });
		// A client now is refused too; once the half-open ones time out,
		// one gets through.
		await assert.rejects(tlsConnect(fd.ports.echo));
		await L.withTimeout(Promise.all([...a, ...b]), 20000 * SLOW, 'half-open closed');
		await until(async () => L.val(await L.scrape(fd.ports.metrics),
			'echorouterd_tls_handshaking') === 0, 'no handshake under way');
		const s = await tlsConnect(fd.ports.echo);
		s.write('in\n');
		assert.equal((await L.withTimeout(new Promise((r) => s.once('data', r)), 5000, 'echo'))
			.toString(), 'in\n');
		s.end();
		const m = await L.scrape(fd.ports.metrics);
		assert.equal(hs(m, 'timeout'), 80);
		assert.equal(L.val(m, 'echorouterd_refused_total{why="handshakes"}'), 11);
	} finally {
		await L.stopDaemon(fd);
	}
});

test('TCP probes (connect, close, no byte): peer closes, not failed handshakes', { skip }, async () => {
	const closes = (m) => Object.fromEntries(['peer', 'reset', 'protocol'].map((r) =>
		[r, L.val(m, `echorouterd_closed_total{reason="${r}"}`)]));
	const before = await L.scrape(d.ports.plainmetrics);
	const c0 = closes(before);
	for (let i = 0; i < 20; i++) {
		const s = await L.rawConnect(d.ports.echo);
		await new Promise((r) => s.end(r));
		s.destroy();
	}
	let m;
	await until(async () => {
		m = await L.scrape(d.ports.plainmetrics);
		const c = closes(m);
		return c.peer + c.reset + c.protocol - c0.peer - c0.reset - c0.protocol >= 20;
	}, 'the probes closed');
	const c = closes(m);
	assert.equal(hs(m, 'bad') - hs(before, 'bad'), 0, 'counted as bad handshakes');
	assert.equal(c.protocol - c0.protocol, 0, 'closed as protocol errors');
	// The scrape before may add one peer close of its own.
	assert.ok(c.peer - c0.peer >= 20, `peer closes: ${c.peer - c0.peer}`);
});

// A ClientHello as Node's TLS client sends it (TLS 1.3, one key share).
function clientHello() {
	return L.withTimeout(new Promise((resolve) => {
		const srv = net.createServer((s) => s.once('data', (b) => {
			resolve(b);
			s.destroy();
			srv.close();
		}));
		srv.listen(0, '127.0.0.1', () => {
			const c = tls.connect({ port: srv.address().port, host: '127.0.0.1', ca: pem('ca') });
			c.on('error', () => {});
		});
	}), 10000, 'a ClientHello');
}

// hello with no key share (an empty list, as RFC 8446 4.2.8 allows): the
// server has to ask for one (HelloRetryRequest).
function withoutShare(hello) {
	const b = Buffer.from(hello);
	let o = 5 + 4 + 2 + 32;
	o += 1 + b[o];			// session id
	o += 2 + b.readUInt16BE(o);	// cipher suites
	o += 1 + b[o];			// compression methods
	const exts = o;
	for (o += 2; b.readUInt16BE(o) !== 0x33; o += 4 + b.readUInt16BE(o + 2))
		;			// to key_share
	const cut = b.readUInt16BE(o + 2) - 2;
	const out = Buffer.concat([b.subarray(0, o + 4), Buffer.from([0, 0]),
		b.subarray(o + 4 + 2 + cut)]);
	out.writeUInt16BE(2, o + 2);
	out.writeUInt16BE(b.readUInt16BE(exts) - cut, exts);
	out.writeUIntBE(b.readUIntBE(6, 3) - cut, 6, 3);
	out.writeUInt16BE(b.readUInt16BE(3) - cut, 3);
	return out;
}

// The ServerHello random that makes it a HelloRetryRequest (RFC 8446).
const HRR_RANDOM = 'cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c';

test('a second ClientHello (after a HelloRetryRequest) announcing 128 KiB: refused, not held', { skip }, async () => {
	const m0 = await L.scrape(d.ports.plainmetrics);
	const s = await L.rawConnect(d.ports.echo);
	const got = [];
	s.on('data', (c) => got.push(c));
	s.on('error', () => {});
	const closed = new Promise((r) => s.on('close', r));
	s.write(withoutShare(await clientHello()));
	await until(() => Buffer.concat(got).length >= 43, 'the HelloRetryRequest');
	assert.equal(Buffer.concat(got).subarray(11, 43).toString('hex'), HRR_RANDOM);
	s.write(Buffer.from([0x16, 3, 3, 0, 4, 1, 0x01, 0xff, 0xb8]));
	await L.withTimeout(closed, (HANDSHAKE_TIMEOUT + 10) * 1000, 'the close');
	let m;
	await until(async () => {
		m = await L.scrape(d.ports.plainmetrics);
		return hs(m, 'bad') + hs(m, 'timeout') > hs(m0, 'bad') + hs(m0, 'timeout');
	}, 'the handshake counted');
	assert.equal(hs(m, 'bad') - hs(m0, 'bad'), 1, 'refused as a bad handshake');
	assert.equal(hs(m, 'timeout') - hs(m0, 'timeout'), 0, 'held until handshake_timeout');
});

// ---- TLS 1.2 ciphers ------------------------------------------------------

// openssl s_client against port with args: whether the handshake was
// done, and the cipher.
function sClient(port, ...args) {
	const r = spawnSync('openssl', ['s_client', '-brief', '-connect', `127.0.0.1:${port}`,
		'-CAfile', path.join(dir, 'ca.pem'), ...args], { input: '', timeout: 10000, encoding: 'utf8' });
	const out = `${r.stdout}${r.stderr}`;
	const cipher = /Ciphersuite: (\S+)/.exec(out);
	return { ok: r.status === 0 && /CONNECTION ESTABLISHED/.test(out), cipher: cipher && cipher[1], out };
}

test('TLS 1.2 ciphers: ECDHE with AEAD by default, AES128-SHA refused; ciphers overrides', { skip }, async () => {
	const weak = sClient(d.ports.echo, '-tls1_2', '-cipher', 'AES128-SHA');
	assert.equal(weak.ok, false, `AES128-SHA accepted:\n${weak.out}`);
	for (const c of ['ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES256-GCM-SHA384',
		'ECDHE-RSA-CHACHA20-POLY1305']) {
		const r = sClient(d.ports.echo, '-tls1_2', '-cipher', c);
		assert.ok(r.ok, `${c} refused:\n${r.out}`);
		assert.equal(r.cipher, c);
	}
	// No forward secrecy or no AEAD: none of them.
	for (const c of ['AES256-GCM-SHA384', 'ECDHE-RSA-AES128-SHA', 'DHE-RSA-AES128-GCM-SHA256'])
		assert.equal(sClient(d.ports.echo, '-tls1_2', '-cipher', c).ok, false, `${c} accepted`);
	// TLS 1.3 as before.
	assert.ok(sClient(d.ports.echo, '-tls1_3').ok);
	// A listener's own list still rules.
	const legacy = sClient(d.ports.legacy, '-tls1_2', '-cipher', 'AES128-SHA');
	assert.ok(legacy.ok, legacy.out);
	assert.equal(legacy.cipher, 'AES128-SHA');
});

// ---- close_notify ---------------------------------------------------------

// A TLS 1.2 client whose socket keeps every byte the server sent: TLS 1.2
// leaves a record's type in the clear, so a close_notify shows as an alert
// record (21) where a bare FIN shows nothing. Resolves once connected.
function sniffed(port) {
	return L.withTimeout(new Promise((resolve, reject) => {
		const raw = net.connect({ port, host: '127.0.0.1', allowHalfOpen: true });
		const seen = [];
		const wire = new Duplex({
			read() {},
			write(chunk, enc, cb) { raw.write(chunk, cb); },
			final(cb) { raw.end(); cb(); },
		});
		const ended = new Promise((r) => raw.on('end', r));
		raw.on('data', (c) => { seen.push(c); wire.push(c); });
		raw.on('end', () => wire.push(null));
		raw.on('error', () => {});
		raw.on('connect', () => {
			const s = tls.connect({ socket: wire, host: '127.0.0.1', ca: pem('ca'),
				maxVersion: 'TLSv1.2' }, () => resolve({ s, raw, seen, ended }));
			s.on('error', reject);
		});
	}), 10000, 'sniffed TLS connect');
}

// The record types in what the server sent.
function recordTypes(seen) {
	const b = Buffer.concat(seen);
	const types = [];
	for (let o = 0; o + 5 <= b.length; o += 5 + b.readUInt16BE(o + 3))
		types.push(b[o]);
	return types;
}

async function serverEnd(c) {
	await L.withTimeout(c.ended, 10000, 'the server\'s FIN');
	c.s.on('error', () => {});
	c.raw.destroy();
	return recordTypes(c.seen);
}

test('close_notify: the server answers the client\'s own, every time', { skip }, async () => {
	for (let i = 0; i < 20; i++) {
		const c = await sniffed(d.ports.echo);
		c.s.write('x\n');
		await L.withTimeout(new Promise((r) => c.s.once('data', r)), 5000, 'echo');
		c.s.end();		// close_notify, then FIN
		const types = await serverEnd(c);
		assert.equal(types[types.length - 1], 21, `run ${i}: records ${types.join(',')}`);
	}
});

test('close_notify: after a router QUIT, and for an idle client when the daemon stops', { skip }, async () => {
	for (let i = 0; i < 20; i++) {
		const c = await sniffed(d.ports.router);
		c.s.write('PING\n');
		await L.withTimeout(new Promise((r) => c.s.once('data', r)), 5000, 'PONG');
		// Everything taken by the client before it quits.
		await new Promise((r) => setTimeout(r, 50));
		c.s.write('QUIT\n');
		const types = await serverEnd(c);
		assert.deepEqual(types.slice(-2), [23, 21], `run ${i}: records ${types.join(',')}`);
	}
	const fd = await L.startDaemon(floodConf(''));
	let c;
	try {
		c = await sniffed(fd.ports.echo);
		c.s.write('x\n');
		await L.withTimeout(new Promise((r) => c.s.once('data', r)), 5000, 'echo');
		await new Promise((r) => setTimeout(r, 100));
	} finally {
		await L.stopDaemon(fd);
	}
	const types = await serverEnd(c);
	assert.equal(types[types.length - 1], 21, `at stop: records ${types.join(',')}`);
});

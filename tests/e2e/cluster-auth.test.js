// cluster-auth.test.js: who may take part in a cluster. A nats-server with
// JetStream and the authorization of the cluster walk-through (read from
// docs/operations.md itself, so that the walk-through stays true), two
// nodes logging in as its user, all on loopback and free ports: the
// password never shown, refused or unusable credentials logged in
// libnats's words, a node without any warned, a copy of a message
// published again by another client not delivered, and a second process
// with a node's name refused.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { spawn, spawnSync } = require('node:child_process');
const L = require('./lib.js');

const BIN = process.env.ECHOROUTERD_BIN;
const skip = L.natsMissing(BIN);

const WAIT_MS = 20000;
const PASSWORD = 's3cret-pw';

const { until } = L;

// The nats-server authorization block of the cluster walk-through in
// docs/operations.md, its password replaced.
function docAuthorization() {
	const doc = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'operations.md'), 'utf8');
	const m = /^authorization \{\n[\s\S]*?^\}\n/m.exec(doc);
	assert.ok(m, 'the walk-through in docs/operations.md has an authorization block');
	assert.match(m[0], /password: "change-me"/);
	return m[0].replace('"change-me"', `"${PASSWORD}"`);
}

// One nats-server with JetStream on a free port; conf is added to its file.
async function startNats(dir, name, conf) {
	const n = { port: await L.freePort(), log: '', exited: false };
	const file = path.join(dir, `${name}.conf`);
	fs.writeFileSync(file, `listen: 127.0.0.1:${n.port}\n` +
		`jetstream { store_dir: "${path.join(dir, name)}" }\n${conf}`);
	n.child = spawn('nats-server', ['-c', file], { stdio: ['ignore', 'ignore', 'pipe'] });
	n.child.stderr.setEncoding('utf8');
	n.child.stderr.on('data', (c) => { n.log += c; });
	n.child.on('exit', () => { n.exited = true; });
	await until(() => /Server is ready/.test(n.log) || n.exited, WAIT_MS, `${name} ready`);
	assert.ok(!n.exited, `nats-server ${name} exited:\n${n.log}`);
	return n;
}

async function stopNats(n) {
	if (!n || n.exited)
		return;
	n.child.kill('SIGKILL');
	await until(() => n.exited, WAIT_MS, 'nats-server exit');
}

function nodeConf(node, url, extra = '') {
	return `dispatchers = 2;
idle_timeout = 0;
listeners = (
  { name = "router"; address = "127.0.0.1"; port = 0; protocol = "router"; }
);
accounts = (
  { id = "alice"; password = "a"; }, { id = "bob"; password = "b"; },
  { id = "carol"; password = "c"; }
);
cluster = {
  node = "${node}";
  servers = ( "${url}" );
  request_timeout = 2;
  claim_ttl = 6;
  ${extra}
};
`;
}

function url(n, user = 'erd', pass = PASSWORD) {
	return `nats://${user}:${pass}@127.0.0.1:${n.port}`;
}

// A line client: lines received so far, and a wait for more.
function lineClient(port) {
	return L.lineClient(port, WAIT_MS);
}

function waitLines(c, re, n) {
	return L.withTimeout(new Promise((resolve) => {
		const check = () => {
			const got = c.lines.filter((l) => re.test(l));
			if (got.length >= n) {
				c.waiters = c.waiters.filter((w) => w !== check);
				resolve(got);
			}
		};
		c.waiters.push(check);
		check();
	}), WAIT_MS, `${n} lines like ${re}`);
}

// LOGIN, again until the cluster takes it (JetStream may still be
// starting); the logged-in client.
function login(port, addr, pass) {
	return until(async () => {
		const c = await lineClient(port);
		c.sock.write(`LOGIN ${addr} ${pass}\n`);
		const [r] = await waitLines(c, /^(OK LOGIN|ERR)/, 1);
		if (r === `OK LOGIN ${addr}`) {
			// What came behind it (a backlog) stays.
			c.lines = c.lines.slice(c.lines.indexOf(r) + 1);
			return c;
		}
		c.sock.destroy();
		return null;
	}, WAIT_MS, `LOGIN ${addr}`);
}

// A plain NATS client, as anyone allowed on the server may run: raw
// protocol, payloads as latin1 strings; msgs collects every MSG.
function natsClient(port, user, pass) {
	return L.withTimeout(new Promise((resolve, reject) => {
		const sock = net.connect(port, '127.0.0.1');
		const c = { sock, buf: '', msgs: [], pongs: 0, waiters: [] };
		sock.setEncoding('latin1');
		sock.on('error', reject);
		sock.on('data', (d) => {
			c.buf += d;
			if (!c.ready && c.buf.includes('\r\n')) {
				c.ready = true;
				c.buf = c.buf.slice(c.buf.indexOf('\r\n') + 2);
				sock.write(`CONNECT ${JSON.stringify({ verbose: false, user, pass })}\r\n`, 'latin1');
				resolve(c);
			}
			for (;;) {
				const m = /^MSG (\S+) \S+ (?:(\S+) )?(\d+)\r\n/.exec(c.buf);
				if (m && c.buf.length >= m[0].length + Number(m[3]) + 2) {
					const at = m[0].length;
					c.msgs.push({ subject: m[1], reply: m[2],
						data: c.buf.slice(at, at + Number(m[3])) });
					c.buf = c.buf.slice(at + Number(m[3]) + 2);
				} else if (/^PONG\r\n/.test(c.buf)) {
					c.pongs++;
					c.buf = c.buf.slice(6);
				} else if (/^(PING|\+OK|INFO[^\r]*)\r\n/.test(c.buf)) {
					if (c.buf.startsWith('PING'))
						sock.write('PONG\r\n');
					c.buf = c.buf.slice(c.buf.indexOf('\r\n') + 2);
				} else {
					break;
				}
			}
			for (const w of c.waiters.slice())
				w();
		});
	}), WAIT_MS, 'NATS connect');
}

// Writes what, then waits until the server has handled it (PONG).
async function natsSync(c, what) {
	const want = c.pongs + 1;
	c.sock.write(`${what}PING\r\n`, 'latin1');
	await until(() => c.pongs >= want, WAIT_MS, 'PONG');
}

// A node's stats line (SIGUSR1), once it is in its log.
const stats = (d) => L.clusterStats(d, WAIT_MS);

let dir, nats, A, B;

test.before(async () => {
	if (skip)
		return;
	dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-cluster-auth-'));
	nats = await startNats(dir, 'n1', docAuthorization());
	A = await L.startDaemon(nodeConf('a', url(nats)));
	B = await L.startDaemon(nodeConf('b', url(nats)));
});

test.after(async () => {
	if (skip)
		return;
	const errors = [];
	for (const d of [A, B])
		if (d)
			await L.stopDaemon(d).catch((e) => errors.push(e));
	await stopNats(nats);
	fs.rmSync(dir, { recursive: true, force: true });
	if (errors.length > 0)
		throw errors[0];
});

test('with the walk-through\'s authorization the nodes reach each other, and a client without its user cannot connect', { skip }, async () => {
	const b = await login(B.ports.router, 'bob', 'b');
	const a = await login(A.ports.router, 'alice', 'a');
	a.sock.write('SEND bob hello across\n');
	const [ok] = await waitLines(a, /^(OK|ERR) /, 1);
	assert.match(ok, /^OK \d+$/);
	const [msg] = await waitLines(b, /^MSG /, 1);
	assert.equal(msg, `MSG ${ok.split(' ')[1]} alice hello across`);
	a.sock.destroy();
	b.sock.destroy();
	for (const [user, pass] of [[undefined, undefined], ['erd', 'wrong']]) {
		const r = await L.natsExchange(nats.port, () =>
			`CONNECT ${JSON.stringify({ verbose: false, user, pass })}\r\nPING\r\n`,
		(buf) => (/-ERR|PONG/.test(buf) ? buf : undefined));
		assert.match(r, /-ERR 'Authorization Violation'/, `${user}/${pass}`);
	}
});

test('the password in servers never shows: not in the log, not in the stats line', { skip }, async () => {
	for (const d of [A, B]) {
		assert.match(d.log, new RegExp(`connected to nats://127\\.0\\.0\\.1:${nats.port}\\n`));
		const st = await stats(d);
		assert.match(st, new RegExp(`cluster=nats://127\\.0\\.0\\.1:${nats.port} `));
		assert.ok(!d.log.includes(PASSWORD), d.log);
		// And with credentials, no warning about their absence.
		assert.doesNotMatch(d.log, /no NATS credentials/);
	}
});

test('a node without credentials warns at start that anyone may send as any address', { skip }, async () => {
	const open = await startNats(dir, 'open', '');
	let d;
	try {
		d = await L.startDaemon(nodeConf('lonely', `nats://127.0.0.1:${open.port}`));
		assert.match(d.log, /warning: cluster: no NATS credentials .*send messages as any address/);
	} finally {
		await L.stopAll(d);
		await stopNats(open);
	}
});

test('refused or unusable credentials: the log gives libnats\'s reason, and -t fails on a file it cannot read', { skip }, async () => {
	const garbage = path.join(dir, 'garbage.creds');
	fs.writeFileSync(garbage, 'not a credentials file\n');
	const cases = [
		[url(nats, 'erd', 'wrong'), '', /cannot connect to the NATS servers yet: Authorization Violation/],
		[`nats://127.0.0.1:${nats.port}`, `credentials = "${garbage}";`,
			/cannot connect to the NATS servers yet: .*(seed|JWT|jwt)/],
	];
	for (const [u, extra, want] of cases) {
		const d = await L.startDaemon(nodeConf('refused', u, extra));
		try {
			assert.match(d.log, want);
			assert.doesNotMatch(d.log, /no NATS server answers yet/);
			// libnats gives up after the same refusal twice: said, once.
			await until(() => /the NATS client gave up/.test(d.log), WAIT_MS, 'gave up');
			assert.ok(!d.log.includes('wrong@'), d.log);
			const c = await lineClient(d.ports.router);
			c.sock.write('LOGIN alice a\n');
			assert.deepEqual(await waitLines(c, /^(OK|ERR)/, 1), ['ERR 503 cluster unavailable']);
			c.sock.destroy();
		} finally {
			await L.stopDaemon(d);
		}
	}
	// A credentials file that is missing, or a directory: -t says so.
	const conf = path.join(dir, 'check.conf');
	for (const creds of [path.join(dir, 'none.creds'), dir]) {
		fs.writeFileSync(conf, nodeConf('x', `nats://127.0.0.1:${nats.port}`,
			`credentials = "${creds}";`));
		const r = spawnSync(BIN, ['-t', '-c', conf], { encoding: 'utf8', timeout: WAIT_MS });
		assert.equal(r.status, 1, r.stderr);
		assert.match(r.stderr, /check\.conf:\d+: cluster\.credentials: cannot read/);
	}
});

test('a copy of a message published again by another client, under another sender, is not delivered', { skip }, async () => {
	const b = await login(B.ports.router, 'bob', 'b');
	const a = await login(A.ports.router, 'alice', 'a');
	// Someone with the nodes' user (anyone, on a server without
	// authorization) listens on the cluster's subjects: an address's
	// shared one, and its owner's once the address is claimed...
	const spy = await natsClient(nats.port, 'erd', PASSWORD);
	await natsSync(spy, 'SUB erd.a.> 1\r\nSUB erd.o.> 2\r\n');
	a.sock.write('SEND bob hello\n');
	const [ok] = await waitLines(a, /^(OK|ERR) /, 1);
	assert.match(ok, /^OK \d+$/);
	const id = ok.split(' ')[1];
	await waitLines(b, /^MSG /, 1);
	const orig = await until(() => spy.msgs.find((m) => m.data.includes('hello')),
		WAIT_MS, 'the bundle for bob');
	// ... and publishes it again, as from carol, with and without the
	// reply subject of the node that sent it.
	const forged = orig.data.replace('alice', 'carol').replace('hello', 'pwned');
	assert.notEqual(forged, orig.data);
	await natsSync(spy, `PUB ${orig.subject} ${orig.reply} ${forged.length}\r\n${forged}\r\n` +
		`PUB ${orig.subject} ${forged.length}\r\n${forged}\r\n`);
	// Behind the copies, on the same subject: a message of alice's.
	a.sock.write('SEND bob after\n');
	await waitLines(b, /^MSG \d+ alice after$/, 1);
	spy.sock.destroy();
	assert.deepEqual(b.lines.filter((l) => l.startsWith('MSG')),
		[`MSG ${id} alice hello`, b.lines.find((l) => / after$/.test(l))]);
	assert.match(await stats(B), /cluster_errors=[1-9]/);
	a.sock.destroy();
	b.sock.destroy();
});

test('a second process with a node\'s name refuses to start; the node in the cluster says so and goes on', { skip }, async () => {
	const file = path.join(dir, 'twin.conf');
	fs.writeFileSync(file, nodeConf('a', url(nats)));
	const r = spawnSync(BIN, ['-c', file], { encoding: 'utf8', timeout: WAIT_MS });
	assert.equal(r.status, 1, r.stderr);
	assert.match(r.stderr, /node a is in the cluster already \(instance [0-9a-f]+\): node names must be unique/);
	await until(() => /another process with node name a .* tried to join/.test(A.log),
		WAIT_MS, 'the node in the cluster says so');
	// Its addresses and traffic are as before.
	const b = await login(B.ports.router, 'bob', 'b');
	const a = await login(A.ports.router, 'alice', 'a');
	a.sock.write('SEND bob still here\n');
	await waitLines(b, /^MSG \d+ alice still here$/, 1);
	a.sock.destroy();
	b.sock.destroy();
});

test('with the walk-through\'s user a node\'s JetStream store keeps a message for an offline account', { skip }, async () => {
	const S = await L.startDaemon(`${nodeConf('s', url(nats))}store = { backend = "jetstream"; };\n`);
	try {
		const x = await login(S.ports.router, 'alice', 'a');
		x.sock.write('SEND carol kept for later\n');
		const [ok] = await waitLines(x, /^(OK|ERR) /, 1);
		assert.match(ok, /^OK \d+$/);
		const c = await login(S.ports.router, 'carol', 'c');
		await waitLines(c, /^MSG \d+ alice kept for later$/, 1);
		x.sock.destroy();
		c.sock.destroy();
	} finally {
		await L.stopDaemon(S);
	}
});

test('the walk-through\'s permissions are all the nodes need: the server refused them nothing', { skip }, async () => {
	assert.doesNotMatch(nats.log, /Permissions Violation/);
});

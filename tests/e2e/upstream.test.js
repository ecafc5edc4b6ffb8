// upstream.test.js: echorouterd binds to SMS centres (the simulator in
// smsc-sim.js) as an ESME: binds of each type and count, a refused bind
// named once and backed off, a silent centre declared dead, an unbind from
// the centre answered and followed by a reconnect, TLS, and reloads that
// change credentials or remove the upstream.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync, spawnSync } = require('node:child_process');
const L = require('./lib.js');
const { SmscSim } = require('./smsc-sim.js');

const BIN = process.env.ECHOROUTERD_BIN ||
	path.join(__dirname, '..', '..', 'build', 'default', 'echorouterd');
const WAIT = L.WRAP.length ? 120000 : 20000;

function conf(upstreams) {
	return `dispatchers = 2;
listeners = (
  { name = "metrics"; address = "127.0.0.1"; port = 0; protocol = "metrics"; }
);
upstreams = (
${upstreams}
);
`;
}

function upstream(port, extra = '') {
	return `  { name = "opA"; host = "127.0.0.1"; port = ${port};
    system_id = "erd"; password = "secret"; ${extra} }`;
}

function bound(m, name = 'opA') {
	return L.val(m, `echorouterd_upstream_sessions_bound{upstream="${name}"}`);
}

async function untilBound(d, n, what) {
	return L.until(async () => bound(await L.scrape(d.ports.metrics)) === n,
		WAIT, what);
}

// SIGHUP with text as the new configuration; waits for the reload's end.
async function reload(d, text) {
	fs.writeFileSync(path.join(d.dir, 'echorouterd.conf'), text);
	const before = d.log.length;
	d.child.kill('SIGHUP');
	await L.until(() => /reloaded /.test(d.log.slice(before)), WAIT, 'reload');
}

function count(text, re) {
	return (text.match(re) || []).length;
}

test('a transceiver bind with the right credentials shows in /metrics; shutdown unbinds', async () => {
	const sim = new SmscSim({ password: 'secret' });
	const port = await sim.start();
	const d = await L.startDaemon(conf(upstream(port,
		'system_type = "VMA"; address_range = "^351";')));
	try {
		await untilBound(d, 1, 'one bound session');
		assert.equal(sim.bound('bind_transceiver'), 1);
		assert.equal(sim.binds.length, 1);
		const b = sim.pdus.find((p) => p.command === 'bind_transceiver');
		assert.equal(b.system_id, 'erd');
		assert.equal(b.password, 'secret');
		assert.equal(b.system_type, 'VMA');
		assert.equal(b.address_range, '^351');
		assert.equal(b.interface_version, 0x34);
		const m = await L.scrape(d.ports.metrics);
		assert.equal(L.val(m, 'echorouterd_upstream_bind_failures_total{upstream="opA"}'), 0);
		assert.match(d.log, /upstream opA: link 0 bound as transceiver to 127\.0\.0\.1:/);
		// The stats line (SIGUSR1) has the upstream's counts.
		const before = d.log.length;
		d.child.kill('SIGUSR1');
		await L.until(() => /stats .* upstream_opA_bound=1 upstream_opA_reconnects=0 upstream_opA_bind_failures=0/
			.test(d.log.slice(before)), WAIT, 'stats line');
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
	// SIGTERM unbound the session before closing it.
	assert.ok(sim.pdus.some((p) => p.command === 'unbind'), 'no unbind at shutdown');
});

test('"pair" opens one transmitter and one receiver per session', async () => {
	const sim = new SmscSim();
	const port = await sim.start();
	const d = await L.startDaemon(conf(upstream(port, 'bind = "pair";')));
	try {
		await untilBound(d, 2, 'a bound pair');
		assert.equal(sim.bound('bind_transmitter'), 1);
		assert.equal(sim.bound('bind_receiver'), 1);
		assert.equal(sim.bound('bind_transceiver'), 0);
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('sessions = 3 keeps three binds', async () => {
	const sim = new SmscSim();
	const port = await sim.start();
	const d = await L.startDaemon(conf(upstream(port, 'sessions = 3;')));
	try {
		await untilBound(d, 3, 'three bound sessions');
		await L.sleep(1500);
		// Three and no more: the links are kept, not opened again.
		assert.equal(sim.bound('bind_transceiver'), 3);
		assert.equal(sim.connects.length, 3);
		assert.equal(bound(await L.scrape(d.ports.metrics)), 3);
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('a wrong password is logged once by its status name and backed off', async () => {
	const sim = new SmscSim({ password: 'secret' });
	const port = await sim.start();
	const d = await L.startDaemon(conf(`  { name = "opA"; host = "127.0.0.1";
    port = ${port}; system_id = "erd"; password = "wrong";
    reconnect_min = 1; reconnect_max = 60; }`));
	try {
		await L.until(() => sim.connects.length >= 1, WAIT, 'a first connect');
		const first = sim.connects[0];
		await L.sleep(9000);
		const n = sim.connects.filter((t) => t - first < 9000).length;
		// Waits of 1-1.5, 2-3 and 4-6 s: 3 or 4 connects in 9 s where
		// a retry every second would make 9.
		assert.ok(n >= 2 && n <= 5, `${n} connects in 9 s`);
		assert.ok(sim.binds.every((b) => b.status === 0x0e), 'a bind taken');
		assert.equal(count(d.log, /bind refused: ESME_RINVPASWD \(invalid password\)/g), 1,
			d.log);
		const m = await L.scrape(d.ports.metrics);
		assert.ok(L.val(m, 'echorouterd_upstream_bind_failures_total{upstream="opA"}') >= 2);
		assert.ok(L.val(m, 'echorouterd_upstream_reconnects_total{upstream="opA"}') >= 1);
		assert.equal(bound(m), 0);
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('a refused connect is logged once and retried with back-off until the centre listens', async () => {
	const port = await L.freePort();
	const d = await L.startDaemon(conf(upstream(port,
		'reconnect_min = 1; reconnect_max = 2;')));
	const sim = new SmscSim();
	try {
		await L.until(async () => L.val(await L.scrape(d.ports.metrics),
			'echorouterd_upstream_reconnects_total{upstream="opA"}') >= 2,
		WAIT, 'two reconnects');
		assert.equal(count(d.log, /cannot connect to 127\.0\.0\.1:\d+: Connection refused/g), 1,
			d.log);
		await sim.start(port);
		await untilBound(d, 1, 'bound once the centre listens');
		assert.equal(sim.connects.length, 1);
	} finally {
		await L.stopDaemon(d);
		if (sim.server)
			await sim.stop();
	}
});

test('a silent SMS centre gets the link declared dead and reconnected', async () => {
	const sim = new SmscSim({ silent: true });
	const port = await sim.start();
	const d = await L.startDaemon(conf(upstream(port,
		'enquire_link_interval = 1; response_timeout = 2;')));
	try {
		await L.until(() => sim.bound() >= 2, WAIT, 'a second bind');
		assert.ok(sim.pdus.some((p) => p.command === 'enquire_link'));
		assert.match(d.log, /no answer to enquire_link in 2s: the link is dead/);
		assert.ok(sim.closed >= 1, 'the dead link was not closed');
		const m = await L.scrape(d.ports.metrics);
		assert.ok(L.val(m, 'echorouterd_upstream_reconnects_total{upstream="opA"}') >= 1);
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('an answered enquire_link keeps the link', async () => {
	const sim = new SmscSim();
	const port = await sim.start();
	const d = await L.startDaemon(conf(upstream(port,
		'enquire_link_interval = 1; response_timeout = 2;')));
	try {
		await untilBound(d, 1, 'bound');
		await L.sleep(5000);
		assert.ok(sim.pdus.filter((p) => p.command === 'enquire_link').length >= 2);
		assert.equal(sim.connects.length, 1);
		assert.doesNotMatch(d.log, /link is dead/);
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('an unbind from the SMS centre is answered and followed by a reconnect', async () => {
	const sim = new SmscSim();
	const port = await sim.start();
	const d = await L.startDaemon(conf(upstream(port)));
	try {
		await untilBound(d, 1, 'bound');
		assert.equal(await sim.unbindAll(), 1, 'unbind_resp');
		await L.until(() => sim.bound() >= 2, WAIT, 'bound again');
		await untilBound(d, 1, 'bound again in /metrics');
		assert.match(d.log, /the SMS centre unbound/);
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('a TLS SMS centre binds; -t checks the TLS files', async (t) => {
	if (spawnSync('openssl', ['version']).status !== 0)
		return t.skip('openssl(1) not installed');
	if (!/tls: yes/.test(execFileSync(BIN, ['-V']).toString()))
		return t.skip('built without TLS');
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-up-tls-'));
	try {
		execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes',
			'-keyout', 'smsc.key', '-out', 'smsc.pem', '-days', '2',
			'-subj', '/CN=smsc.test', '-addext', 'subjectAltName=DNS:smsc.test'],
		{ cwd: dir, stdio: 'ignore' });
		const key = fs.readFileSync(path.join(dir, 'smsc.key'));
		const cert = fs.readFileSync(path.join(dir, 'smsc.pem'));
		const sim = new SmscSim({ tls: { key, cert } });
		const port = await sim.start();
		const tls = (ca) => upstream(port, `tls = { ca = "${ca}"; server_name = "smsc.test"; };`);

		const bad = path.join(dir, 'bad.conf');
		fs.writeFileSync(bad, conf(tls(path.join(dir, 'missing.pem'))));
		const r = spawnSync(BIN, ['-t', '-c', bad], { encoding: 'utf8' });
		assert.equal(r.status, 1);
		assert.match(r.stderr, /bad\.conf:6: upstream "opA": .*missing\.pem/);

		const d = await L.startDaemon(conf(tls(path.join(dir, 'smsc.pem'))));
		try {
			await untilBound(d, 1, 'bound over TLS');
			assert.equal(sim.bound('bind_transceiver'), 1);
		} finally {
			await L.stopDaemon(d);
		}
		// The wrong name: the certificate is refused, nothing binds.
		const d2 = await L.startDaemon(conf(upstream(port,
			`tls = { ca = "${path.join(dir, 'smsc.pem')}"; server_name = "other.test"; };`)));
		try {
			await L.sleep(3000);
			assert.equal(sim.bound(), 1);
			assert.equal(bound(await L.scrape(d2.ports.metrics)), 0);
		} finally {
			await L.stopDaemon(d2);
			await sim.stop();
		}
	} finally {
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('a reload applies new credentials, and one without the upstream closes its sessions', async () => {
	const sim = new SmscSim({ password: 'secret' });
	const port = await sim.start();
	const d = await L.startDaemon(conf(`  { name = "opA"; host = "127.0.0.1";
    port = ${port}; system_id = "erd"; password = "old"; sessions = 2;
    reconnect_min = 30; reconnect_max = 60; }`));
	try {
		await L.until(() => sim.binds.length >= 2, WAIT, 'refused binds');
		// Backed off 30 s: only the new password brings it back now.
		await reload(d, conf(upstream(port, 'sessions = 2; reconnect_min = 30; reconnect_max = 60;')));
		await untilBound(d, 2, 'bound with the new password');
		assert.equal(sim.bound(), 2);
		await reload(d, conf('').replace(/upstreams = \(\n\n\);\n/, ''));
		await L.until(() => sim.sessions.size === 0, WAIT, 'sessions closed');
		assert.equal(sim.pdus.filter((p) => p.command === 'unbind').length, 2);
		await L.until(async () => !/upstream="opA"/.test(await L.scrapeRaw(d.ports.metrics)),
			WAIT, 'opA gone from /metrics');
		await L.sleep(1500);
		assert.equal(sim.bound(), 2, 'a removed upstream bound again');
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

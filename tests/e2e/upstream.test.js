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

// ---- routing messages to upstreams and submitting them ----------------------

// A daemon with a line listener, an SMPP listener and routes: +351 to
// the upstreams of ups (opA first), as mode asks.
function routeConf(ups, { mode = 'failover', to, extra = '' } = {}) {
	const names = to || ups.map((u) => `"upstream:${u.name}"`).join(', ');
	return `dispatchers = 2;
idle_timeout = 0;
listeners = (
  { name = "metrics"; address = "127.0.0.1"; port = 0; protocol = "metrics"; },
  { name = "router"; address = "127.0.0.1"; port = 0; protocol = "router"; },
  { name = "smpp"; address = "127.0.0.1"; port = 0; protocol = "smpp"; }
);
accounts = (
  { id = "alice"; password = "pa"; },
  { id = "esme1"; password = "pe"; }
);
routes = (
  { prefix = "+351"; to = [ ${names} ]; mode = "${mode}"; }
);
upstreams = (
${ups.map((u) => `  { name = "${u.name}"; host = "127.0.0.1"; port = ${u.port};
    system_id = "erd"; password = "secret"; source_ton = 5; source_npi = 0;
    dest_ton = 1; dest_npi = 1; reconnect_min = 1; reconnect_max = 2; ${u.extra || ''} }`).join(',\n')}
);
${extra}`;
}

async function lineLogin(d, addr = 'alice', password = 'pa') {
	const c = await L.lineClient(d.ports.router);
	c.sock.write(`LOGIN ${addr} ${password}\n`);
	await c.wait((l) => l.startsWith('OK LOGIN'), `login ${addr}`);
	return c;
}

// The npm package decodes short_message by data_coding (and takes a UDH
// apart): the text it read, and the UDH's information elements.
function smsText(pdu) {
	return L.text(pdu);
}

function smsUdh(pdu) {
	const sm = pdu.short_message;
	return sm && sm.udh ? sm.udh.map((ie) => [...ie]) : [];
}

test('a line SEND to +351 goes to the upstream as submit_sm; OK only after its submit_sm_resp', async () => {
	const sim = new SmscSim({ delay: 1500 });
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port }],
		{ extra: 'log = { level = "debug"; };' }));
	try {
		await untilBound(d, 1, 'opA bound');
		const c = await lineLogin(d);
		const sent = Date.now();
		c.sock.write('SEND +351910000001 hello @ home\n');
		await L.until(() => sim.submits.length === 1, WAIT, 'the submit_sm');
		// Not answered yet: the sender waits for the SMS centre.
		assert.ok(!c.lines.some((l) => /^OK \d+$/.test(l)), c.lines.join('|'));
		const ok = await c.wait((l) => /^OK \d+$/.test(l), 'OK', WAIT);
		assert.ok(Date.now() - sent >= 1400, 'OK before the submit_sm_resp');
		const p = sim.submits[0].pdu;
		assert.equal(p.destination_addr, '351910000001');
		assert.equal(p.dest_addr_ton, 1);
		assert.equal(p.dest_addr_npi, 1);
		assert.equal(p.source_addr, 'alice');
		assert.equal(p.source_addr_ton, 5);
		assert.equal(p.source_addr_npi, 0);
		assert.equal(p.data_coding, 0);
		// GSM 03.38 septets: '@' is 0x00, which reads back as '@' in
		// GSM only (0x40, ASCII's '@', is GSM's inverted '!').
		assert.equal(smsText(p), 'hello @ home');
		// The SMS centre's id is logged against ours (for receipts).
		const id = ok.split(' ')[1];
		await L.until(() => new RegExp(`upstream opA: message ${id} is SMSC id sim1000`).test(d.log),
			WAIT, 'the id log line');
		const m = await L.scrape(d.ports.metrics);
		assert.equal(L.val(m, 'echorouterd_upstream_submits_total{upstream="opA"}'), 1);
		assert.equal(L.val(m, 'echorouterd_upstream_responses_total{upstream="opA",status="ok"}'), 1);
		assert.equal(L.val(m, 'echorouterd_upstream_window{upstream="opA"}'), 0);
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('an SMPP submit_sm to +351 is passed through; its submit_sm_resp follows the upstream\'s', async () => {
	const sim = new SmscSim({ delay: 1000 });
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port }]));
	try {
		await untilBound(d, 1, 'opA bound');
		const { s } = await L.bind(d.ports.smpp, 'bind_transmitter', 'esme1', 'pe');
		const sent = Date.now();
		const r = await L.call(s, 'submit_sm', { destination_addr: '+351910000002',
			source_addr: '12345', data_coding: 8,
			short_message: Buffer.from('00e9004120ac', 'hex') });
		assert.equal(r.command_status, 0);
		assert.ok(Date.now() - sent >= 900, 'answered before the upstream');
		assert.equal(sim.submits.length, 1);
		const p = sim.submits[0].pdu;
		assert.equal(p.data_coding, 8);
		assert.equal(smsText(p), '\u00e9A\u20ac');
		assert.equal(smsUdh(p).length, 0);
		assert.equal(p.destination_addr, '351910000002');
		assert.equal(p.source_addr, '12345');
		s.close();
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('a permanent error from the upstream reaches the sender: SMPP with its status, a line client as ERR', async () => {
	const sim = new SmscSim({ submitStatus: () => 0x0b });	// ESME_RINVDSTADR
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port }]));
	try {
		await untilBound(d, 1, 'opA bound');
		const c = await lineLogin(d);
		c.sock.write('SEND +351910000003 nope\n');
		await c.wait((l) => /^ERR 502 \d+ upstream refused 0x0000000b$/.test(l), 'ERR 502', WAIT);
		const { s } = await L.bind(d.ports.smpp, 'bind_transmitter', 'esme1', 'pe');
		const r = await L.call(s, 'submit_sm', { destination_addr: '+351910000004',
			short_message: 'nope' });
		assert.equal(r.command_status, 0x0b);
		// Once each: a refusal is not retried.
		assert.equal(sim.submits.length, 2);
		const m = await L.scrape(d.ports.metrics);
		assert.equal(L.val(m, 'echorouterd_upstream_responses_total{upstream="opA",status="error"}'), 2);
		s.close();
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('ESME_RTHROTTLED pauses the upstream and the message goes again: delivered once', async () => {
	const sim = new SmscSim({ submitStatus: (p, n) => n === 0 ? 0x58 : 0 });
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port }]));
	try {
		await untilBound(d, 1, 'opA bound');
		const c = await lineLogin(d);
		c.sock.write('SEND +351910000005 again\n');
		await c.wait((l) => /^OK \d+$/.test(l), 'OK', WAIT);
		assert.equal(sim.submits.length, 2);
		assert.equal(sim.taken().length, 1);
		// After a pause, not at once.
		assert.ok(sim.submits[1].at - sim.submits[0].at >= 500,
			`${sim.submits[1].at - sim.submits[0].at} ms`);
		const m = await L.scrape(d.ports.metrics);
		assert.equal(L.val(m, 'echorouterd_upstream_throttles_total{upstream="opA"}'), 1);
		assert.equal(L.val(m, 'echorouterd_upstream_responses_total{upstream="opA",status="throttled"}'), 1);
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('a window of 2 keeps at most 2 submit_sm unanswered for 10 messages', async () => {
	const sim = new SmscSim({ delay: 150 });
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port, extra: 'window = 2;' }]));
	try {
		await untilBound(d, 1, 'opA bound');
		const c = await lineLogin(d);
		for (let i = 0; i < 10; i++)
			c.sock.write(`SEND +35191000010${i} message ${i}\n`);
		await L.until(() => c.lines.filter((l) => /^OK \d+$/.test(l)).length === 10,
			WAIT, 'ten OKs');
		assert.equal(sim.taken().length, 10);
		assert.equal(sim.maxUnanswered, 2);
		const texts = sim.submits.map((x) => smsText(x.pdu)).sort();
		assert.deepEqual(texts, [...Array(10).keys()].map((i) => `message ${i}`).sort());
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('sessions share messages by destination: one number\'s go through one session, in order', async () => {
	const sim = new SmscSim({ delay: 5 });
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port,
		extra: 'sessions = 4; window = 4;' }]));
	try {
		await untilBound(d, 4, 'opA bound four times');
		const c = await lineLogin(d);
		const to = ['+351910000700', '+351910000701', '+351910000702', '+351910000703',
			'+351910000704', '+351910000705', '+351910000706', '+351910000707'];
		let lines = '';
		for (let i = 0; i < 20; i++)
			for (const t of to)
				lines += `SEND ${t} ${t.slice(-3)} #${i}\n`;
		c.sock.write(lines);
		await L.until(() => c.lines.filter((l) => /^OK \d+$/.test(l)).length === 160,
			WAIT, '160 OKs');
		for (const t of to) {
			const mine = sim.submits.filter((x) => `+${x.pdu.destination_addr}` === t);
			assert.equal(mine.length, 20, t);
			assert.equal(new Set(mine.map((x) => x.session)).size, 1, `${t}: one session`);
			assert.deepEqual(mine.map((x) => smsText(x.pdu)),
				[...Array(20).keys()].map((i) => `${t.slice(-3)} #${i}`), `${t}: in order`);
		}
		assert.ok(new Set(sim.submits.map((x) => x.session)).size > 1,
			'eight numbers use more than one session');
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('queue_limit bounds the messages waiting for a session\'s window; past it the sender hears busy', async () => {
	const sim = new SmscSim({ submitStatus: () => null });	// never answers
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port,
		extra: 'window = 1; queue_limit = 2; response_timeout = 30; enquire_link_interval = 0;' }]));
	try {
		await untilBound(d, 1, 'opA bound');
		// An ESME: its answers need not wait for the first one's.
		const { s } = await L.bind(d.ports.smpp, 'bind_transmitter', 'esme1', 'pe');
		const got = [];
		for (let i = 0; i < 6; i++)
			s.submit_sm({ destination_addr: '+351910000800',
				short_message: `waiting ${i}` }, (r) => got.push(r.command_status));
		// One in the window, two queued: the other three are busy.
		await L.until(() => got.length === 3, WAIT, 'three answers');
		assert.deepEqual(got, [0x14, 0x14, 0x14]);	// ESME_RMSGQFUL
		await L.sleep(300);
		assert.equal(got.length, 3);
		assert.equal(sim.submits.length, 1);
		s.close();
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('/metrics shows how long the oldest message waiting for an upstream has waited', async () => {
	const sim = new SmscSim({ submitStatus: () => null });	// holds them
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port,
		extra: 'window = 1; response_timeout = 60; enquire_link_interval = 0;' }]));
	const age = async () => L.val(await L.scrape(d.ports.metrics),
		'echorouterd_upstream_oldest_age_seconds{upstream="opA"}');
	try {
		await untilBound(d, 1, 'opA bound');
		assert.equal(await age(), 0);
		const { s } = await L.bind(d.ports.smpp, 'bind_transmitter', 'esme1', 'pe');
		const got = [];
		for (let i = 0; i < 2; i++)
			s.submit_sm({ destination_addr: '+351910000810',
				short_message: `old ${i}` }, (r) => got.push(r.command_status));
		await L.until(async () => await age() >= 3, WAIT, 'an age of 3 s');
		// Answered: nothing waits any more.
		for (let k = 0; k < 2; k++) {
			await L.until(() => sim.held.length > 0, WAIT, 'a submit held');
			const { s: ss, pdu } = sim.held.shift();
			ss.send(pdu.response({ message_id: `ok${k}` }));
		}
		await L.until(() => got.length === 2, WAIT, 'both answered');
		assert.deepEqual(got, [0, 0]);
		await L.until(async () => await age() === 0, WAIT, 'no age once answered');
		s.close();
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('a long UCS-2 text arrives at the upstream as parts with a UDH', async () => {
	const sim = new SmscSim();
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port }]));
	try {
		await untilBound(d, 1, 'opA bound');
		const c = await lineLogin(d);
		const text = 'Привет мир '.repeat(10).trim();	// 109 UCS-2 units
		c.sock.write(`SEND +351910000200 ${text}\n`);
		await c.wait((l) => /^OK \d+$/.test(l), 'OK', WAIT);
		assert.equal(sim.submits.length, 2);
		let joined = '';
		const ref = smsUdh(sim.submits[0].pdu)[0][2];
		sim.submits.forEach((x, i) => {
			const p = x.pdu;
			assert.equal(p.data_coding, 8);
			assert.equal(p.esm_class & 0x40, 0x40);
			assert.deepEqual(smsUdh(p), [[0x00, 0x03, ref, 2, i + 1]]);
			joined += smsText(p);
		});
		assert.equal(joined, text);
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('long = "payload": a 700-character UCS-2 text goes as one submit_sm with a 1,400-octet message_payload', async () => {
	const sim = new SmscSim();
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port, extra: 'long = "payload";' }]));
	try {
		await untilBound(d, 1, 'opA bound');
		const c = await lineLogin(d);
		const text = 'Привет мир '.repeat(64).slice(0, 700);
		c.sock.write(`SEND +351910000250 ${text}\n`);
		await c.wait((l) => /^OK \d+$/.test(l), 'OK', WAIT);
		assert.equal(sim.submits.length, 1);
		const p = sim.submits[0].pdu;
		assert.equal(p.data_coding, 8);
		assert.ok(p.message_payload, "the text in message_payload");
		assert.equal(smsText(p), text);
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('failover: with opA down opB gets the message; round_robin alternates', async () => {
	const simB = new SmscSim();
	const portB = await simB.start();
	const portA = await L.freePort();	// nobody listens: opA stays down
	let d = await L.startDaemon(routeConf([{ name: 'opA', port: portA },
		{ name: 'opB', port: portB }]));
	try {
		await L.until(async () => bound(await L.scrape(d.ports.metrics), 'opB') === 1,
			WAIT, 'opB bound');
		const c = await lineLogin(d);
		c.sock.write('SEND +351910000300 to B\n');
		await c.wait((l) => /^OK \d+$/.test(l), 'OK', WAIT);
		assert.equal(simB.submits.length, 1);
	} finally {
		await L.stopDaemon(d);
	}
	const simA = new SmscSim();
	const pA = await simA.start();
	d = await L.startDaemon(routeConf([{ name: 'opA', port: pA },
		{ name: 'opB', port: portB }], { mode: 'round_robin' }));
	try {
		await L.until(async () => {
			const m = await L.scrape(d.ports.metrics);
			return bound(m, 'opA') === 1 && bound(m, 'opB') === 1;
		}, WAIT, 'both bound');
		const before = simB.submits.length;
		const c = await lineLogin(d);
		for (let i = 0; i < 4; i++) {
			c.sock.write(`SEND +35191000040${i} rr ${i}\n`);
			await L.until(() => c.lines.filter((l) => /^OK \d+$/.test(l)).length === i + 1,
				WAIT, `OK ${i}`);
		}
		assert.equal(simA.submits.length, 2);
		assert.equal(simB.submits.length - before, 2);
	} finally {
		await L.stopDaemon(d);
		await simA.stop();
		await simB.stop();
	}
});

test('no upstream of the route bound: the sender hears a temporary error at once', async () => {
	const port = await L.freePort();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port }]));
	try {
		const c = await lineLogin(d);
		c.sock.write('SEND +351910000500 nobody\n');
		await c.wait((l) => /^ERR 503 \d+ upstream unavailable$/.test(l), 'ERR 503', WAIT);
		const { s } = await L.bind(d.ports.smpp, 'bind_transmitter', 'esme1', 'pe');
		const r = await L.call(s, 'submit_sm', { destination_addr: '+351910000501',
			short_message: 'x' });
		assert.equal(r.command_status, 0x58);	// ESME_RTHROTTLED: later
		s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('a submit left unanswered kills the link; the message goes again on the next session', async () => {
	const sim = new SmscSim({ submitStatus: (p, n) => n === 0 ? null : 0 });
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port,
		extra: 'sessions = 2; response_timeout = 2; enquire_link_interval = 0;' }]));
	try {
		await untilBound(d, 2, 'opA bound twice');
		const c = await lineLogin(d);
		c.sock.write('SEND +351910000600 retried\n');
		await c.wait((l) => /^OK \d+$/.test(l), 'OK', WAIT);
		assert.equal(sim.submits.length, 2);
		assert.equal(sim.taken().length, 1);
		assert.match(d.log, /no answer to submit_sm in 2s: the link is dead/);
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('-t names a route\'s unknown upstream with its line', () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-route-'));
	const file = path.join(dir, 'echorouterd.conf');
	fs.writeFileSync(file, routeConf([{ name: 'opA', port: 2775 }],
		{ to: '"upstream:opA", "upstream:opX"' }));
	const line = fs.readFileSync(file, 'utf8').split('\n')
		.findIndex((l) => l.includes('prefix = "+351"')) + 1;
	const r = spawnSync(BIN, ['-t', '-c', file]);
	fs.rmSync(dir, { recursive: true, force: true });
	assert.equal(r.status, 1);
	assert.ok(r.stderr.toString().includes(`echorouterd.conf:${line}: route "+351": no upstream named "opX"`),
		r.stderr.toString());
});

// ---- store first: with a store, messages for upstreams wait on disk ---------

const noStore = !/sqlite: yes/.test(execFileSync(BIN, ['-V']).toString()) &&
	'built without SQLite (WITH_SQLITE=no)';

function storeConf(port, db) {
	return routeConf([{ name: 'opA', port, extra: 'response_timeout = 3;' }],
		{ extra: `store = { path = "${db}"; sync = "full"; };` });
}

async function sendAll(d, n, tag) {
	const c = await lineLogin(d);
	for (let i = 0; i < n; i++)
		c.sock.write(`SEND +35191000070${i} ${tag} ${i}\n`);
	await L.until(() => c.lines.filter((l) => /^OK \d+$/.test(l)).length === n,
		WAIT, `${n} OKs`);
	c.sock.destroy();
}

test('with a store: sent while the upstream is down, acknowledged at once, delivered once when it is up', { skip: noStore }, async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-upstore-'));
	const port = await L.freePort();
	const d = await L.startDaemon(storeConf(port, path.join(dir, 'store.db')));
	const sim = new SmscSim();
	try {
		// Nobody listens: the OKs mean "on disk".
		await sendAll(d, 5, 'stored');
		await sim.start(port);
		await L.until(() => sim.taken().length === 5, WAIT, 'five delivered');
		await L.sleep(1500);
		const texts = sim.submits.map((x) => smsText(x.pdu)).sort();
		assert.deepEqual(texts, [0, 1, 2, 3, 4].map((i) => `stored ${i}`));
		// Gone from the store once the SMSC took them.
		await L.until(async () => L.val(await L.scrape(d.ports.metrics),
			'echorouterd_store_messages') === 0, WAIT, 'an empty store');
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('with a store: one number\'s messages still reach the upstream in the order sent', { skip: noStore }, async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-upstore-'));
	const sim = new SmscSim({ delay: 2 });
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port,
		extra: 'sessions = 4; window = 4;' }], { extra: `store = { path = "${path.join(dir, 'store.db')}"; };` }));
	try {
		await untilBound(d, 4, 'opA bound four times');
		const c = await lineLogin(d);
		const to = ['+351910000900', '+351910000901', '+351910000902', '+351910000903'];
		let lines = '';
		for (let i = 0; i < 30; i++)
			for (const t of to)
				lines += `SEND ${t} ${t.slice(-3)} #${i}\n`;
		c.sock.write(lines);
		await L.until(() => sim.taken().length === 120, WAIT, '120 delivered');
		for (const t of to)
			assert.deepEqual(sim.submits.filter((x) => `+${x.pdu.destination_addr}` === t)
				.map((x) => smsText(x.pdu)),
			[...Array(30).keys()].map((i) => `${t.slice(-3)} #${i}`), `${t}: in order`);
		c.sock.destroy();
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('with a store: senders on every reactor, each to a number of its own, keep their order', { skip: noStore }, async () => {
	const N = 16, M = 100;
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-upstore-'));
	const sim = new SmscSim();
	const port = await sim.start();
	const senders = [...Array(N).keys()].map((k) => `{ id = "s${k}"; password = "p"; }`);
	const d = await L.startDaemon(routeConf([{ name: 'opA', port,
		extra: 'sessions = 2; window = 16;' }], { extra: `store = { path = "${path.join(dir, 'store.db')}"; };` })
		.replace('{ id = "esme1"; password = "pe"; }',
			`{ id = "esme1"; password = "pe"; }, ${senders.join(', ')}`));
	const cs = [];
	try {
		await untilBound(d, 2, 'opA bound twice');
		// Connections spread over the reactors: ids from each come in
		// their own order, and the store must not pass one over.
		for (let k = 0; k < N; k++) {
			const c = await L.lineClient(d.ports.router);
			c.sock.write(`LOGIN s${k} p\n`);
			await c.wait((l) => l.startsWith('OK LOGIN'), `login s${k}`);
			cs.push(c);
		}
		// Each keeps 8 SENDs unanswered, the next on each OK, as a
		// loaded client does: the store writes and hands out meanwhile.
		for (const [k, c] of cs.entries()) {
			let sent = 0;
			const more = () => c.sock.write(`SEND +3519100010${String(k).padStart(2, '0')} s${k} #${sent++}\n`);
			c.sock.on('data', (b) => {
				for (const l of b.toString().split('\n'))
					if (/^OK \d+$/.test(l) && sent < M)
						more();
			});
			for (let i = 0; i < 16; i++)
				more();
		}
		await L.until(() => sim.taken().length === N * M, WAIT, 'all delivered');
		for (let k = 0; k < N; k++)
			assert.deepEqual(sim.submits.filter((x) => x.pdu.destination_addr === `3519100010${String(k).padStart(2, '0')}`)
				.map((x) => smsText(x.pdu)),
			[...Array(M).keys()].map((i) => `s${k} #${i}`), `s${k}: in order`);
	} finally {
		for (const c of cs)
			c.sock.destroy();
		await L.stopDaemon(d);
		await sim.stop();
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('with a store: kill -9 with messages waiting for the upstream loses none; after the restart all are delivered', { skip: noStore }, async (t) => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-upstore-'));
	const db = path.join(dir, 'store.db');
	const port = await L.freePort();
	// The SMSC takes the first two and never answers them: they are in
	// flight when the daemon dies, and go again after the restart.
	const sim = new SmscSim({ submitStatus: (p, n) => n < 2 ? null : 0 });
	let d = await L.startDaemon(storeConf(port, db));
	try {
		await sendAll(d, 6, 'crash');
		await sim.start(port);
		// Four taken and gone from the store, two in flight.
		await L.until(async () => sim.taken().length === 4 &&
			L.val(await L.scrape(d.ports.metrics), 'echorouterd_store_messages') === 2,
			WAIT, 'four delivered, two in flight');
		d.child.kill('SIGKILL');
		await L.until(() => d.exited !== null, WAIT, 'the kill');
		fs.rmSync(d.dir, { recursive: true, force: true });
		d = null;
		await sim.stop();
		const sim2 = new SmscSim();
		await sim2.start(port);
		d = await L.startDaemon(storeConf(port, db));
		try {
			// Taken before the kill, or after the restart: all six.
			const taken = () => new Set([...sim.taken(), ...sim2.taken()]
				.map((x) => smsText(x.pdu)));
			await L.until(() => taken().size === 6, WAIT, 'all six after the restart');
			// The two left unanswered went again.
			assert.ok(sim2.taken().length >= 2, `${sim2.taken().length} after the restart`);
			await L.sleep(1500);
			const all = [...sim.submits, ...sim2.submits].map((x) => smsText(x.pdu));
			const dups = all.length - new Set(all).size;
			// At least once: what was in flight at the kill goes again,
			// what the SMSC took (and the store recorded) does not.
			t.diagnostic(`${all.length} submit_sm for 6 messages: ${dups} duplicates`);
			assert.equal(dups, 2);
			assert.equal(sim2.taken().length, 2);
			assert.equal(new Set(sim2.taken().map((x) => smsText(x.pdu))).size, sim2.taken().length,
				'none twice after the restart');
		} finally {
			await L.stopDaemon(d);
			await sim2.stop();
		}
	} finally {
		if (d && d.exited === null)
			await L.stopDaemon(d).catch(() => {});
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('max_tps paces parts over all sessions of the upstream', async () => {
	const sim = new SmscSim();
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port,
		extra: 'sessions = 2; max_tps = 2;' }]));
	try {
		await untilBound(d, 2, 'two sessions');
		const c = await lineLogin(d);
		for (let i = 0; i < 6; i++)
			c.sock.write(`SEND +35191000080${i} paced ${i}\n`);
		await L.until(() => c.lines.filter((l) => /^OK \d+$/.test(l)).length === 6,
			WAIT, 'six OKs');
		assert.equal(sim.taken().length, 6);
		// A second's burst (2), then 2 a second: the sixth no sooner
		// than about 2 s after the first, whichever session sent it.
		const at = sim.submits.map((x) => x.at);
		const span = Math.max(...at) - Math.min(...at);
		assert.ok(span >= 1500, `six parts in ${span} ms`);
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

// The link a destination's messages take of n bound ones: FNV-1a of the
// address, as the daemon picks (upstream_submit.c).
function linkOf(to, n) {
	let h = 2166136261;
	for (const b of Buffer.from(to))
		h = Math.imul((h ^ b) >>> 0, 16777619) >>> 0;
	return h % n;
}

// Two sessions on one reactor, both with parts queued behind a saturated
// max_tps: the parts it lets go are taken by each in turn, not first all
// of one session's queue (8 or so in a row). A reactor that wakes late
// finds several parts' time come, all taken by the session first in
// turn: runs of a few are allowed, while both sessions have parts left.
test('max_tps past its burst: two sessions of one reactor take their turns', async () => {
	const sim = new SmscSim();
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port,
		extra: 'sessions = 2; max_tps = 5;' }]).replace('dispatchers = 2;', 'dispatchers = 1;'));
	try {
		await untilBound(d, 2, 'two sessions');
		const c = await lineLogin(d);
		// Ten numbers for each link, sent alternately.
		const by = [[], []];
		for (let i = 0; by[0].length < 10 || by[1].length < 10; i++) {
			const to = `+3519100077${String(i).padStart(2, '0')}`;
			if (by[linkOf(to, 2)].length < 10)
				by[linkOf(to, 2)].push(to);
		}
		let all = '';
		for (let i = 0; i < 10; i++)
			all += `SEND ${by[0][i]} turn\nSEND ${by[1][i]} turn\n`;
		c.sock.write(all);
		await L.until(() => c.lines.filter((l) => /^OK \d+$/.test(l)).length === 20,
			WAIT, 'twenty OKs');
		assert.equal(sim.taken().length, 20);
		// After the burst (5), the longest run of one session's parts
		// while both have parts left (the rest of one queue comes in a
		// row whatever the turns).
		const order = sim.submits.slice(5).map((x) => x.session);
		const both = Math.min(...[...new Set(order)].map((s) => order.lastIndexOf(s)));
		let run = 1, longest = 1;
		for (let i = 1; i <= both; i++) {
			run = order[i] === order[i - 1] ? run + 1 : 1;
			longest = Math.max(longest, run);
		}
		assert.ok(longest <= 4, `a run of ${longest} parts of one session`);
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

// Past the burst, parts go as the pace allows them, each when its turn
// comes: the reactor wakes for it, rather than sending the rest at once
// at the next second's tick.
test('max_tps spreads the parts past its burst, one every 1/max_tps second', async () => {
	const sim = new SmscSim();
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port,
		extra: 'max_tps = 20; window = 30;' }]));
	try {
		await untilBound(d, 1, 'opA bound');
		const c = await lineLogin(d);
		let all = '';
		for (let i = 0; i < 30; i++)
			all += `SEND +3519100009${String(i).padStart(2, '0')} spread ${i}\n`;
		c.sock.write(all);
		await L.until(() => c.lines.filter((l) => /^OK \d+$/.test(l)).length === 30,
			WAIT, 'thirty OKs');
		assert.equal(sim.taken().length, 30);
		// A second's worth (20) at once, then one per 50 ms: the
		// thirtieth no sooner than 500 ms after the first.
		const at = sim.submits.map((x) => x.at).sort((a, b) => a - b);
		assert.ok(at[29] - at[0] >= 450, `thirty parts within ${at[29] - at[0]} ms`);
		// Spread, not sent in bunches at the second's ticks (which
		// leave at most two gaps): most of the last ten come apart.
		const gaps = at.slice(19).map((t, i, a) => (i ? t - a[i - 1] : 0)).slice(1);
		assert.ok(gaps.filter((g) => g >= 25).length >= 4, `gaps ${gaps.join(' ')} ms`);
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('SIGTERM with a submit unanswered: the session unbinds, the sender hears a temporary error, exit 0', async () => {
	const sim = new SmscSim({ submitStatus: () => null });
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port }]));
	try {
		await untilBound(d, 1, 'opA bound');
		const c = await lineLogin(d);
		c.sock.write('SEND +351910000900 never answered\n');
		await L.until(() => sim.submits.length === 1, WAIT, 'the submit_sm');
		d.child.kill('SIGTERM');
		await c.wait((l) => /^ERR 503 \d+ upstream unavailable$/.test(l), 'ERR 503', WAIT);
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
	assert.ok(sim.pdus.some((p) => p.command === 'unbind'), 'no unbind');
});

test('ESME_ROK with an empty or 70-octet message_id: delivered, warned of once, counted', async () => {
	const sim = new SmscSim({ messageId: (n) => n === 0 ? '' : 'x'.repeat(70) });
	const port = await sim.start();
	const d = await L.startDaemon(routeConf([{ name: 'opA', port }]));
	try {
		await untilBound(d, 1, 'opA bound');
		const c = await lineLogin(d);
		c.sock.write('SEND +351910001000 no id\n');
		c.sock.write('SEND +351910001001 long id\n');
		await L.until(() => c.lines.filter((l) => /^OK \d+$/.test(l)).length === 2,
			WAIT, 'two OKs');
		const m = await L.scrape(d.ports.metrics);
		assert.equal(L.val(m, 'echorouterd_upstream_bad_message_ids_total{upstream="opA"}'), 2);
		assert.equal(count(d.log, /without a usable message_id/g), 1);
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('with a store: an SMPP submit with registered_delivery gets no DELIVRD receipt from the store when the SMSC takes it', { skip: noStore }, async () => {
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-upstore-'));
	const sim = new SmscSim();
	const port = await sim.start();
	const d = await L.startDaemon(storeConf(port, path.join(dir, 'store.db')));
	try {
		await untilBound(d, 1, 'opA bound');
		const { s } = await L.bind(d.ports.smpp, 'bind_transceiver', 'esme1', 'pe');
		const got = [];
		s.on('deliver_sm', (pdu) => { got.push(pdu); s.send(pdu.response()); });
		const r = await L.call(s, 'submit_sm', { destination_addr: '+351910001100',
			short_message: 'receipt?', registered_delivery: 1 });
		assert.equal(r.command_status, 0);
		await L.until(() => sim.taken().length === 1, WAIT, 'the SMSC took it');
		assert.equal(sim.submits[0].pdu.registered_delivery, 1);
		// The SMSC's receipt is the one to come (not matched yet):
		// the store makes none of its own for a message it handed on.
		await L.sleep(1500);
		assert.equal(got.length, 0, got.map((p) => L.text(p)).join('|'));
		s.close();
	} finally {
		await L.stopDaemon(d);
		await sim.stop();
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

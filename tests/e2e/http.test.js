// http.test.js: the http listener as applications use it: curl with
// playSMS's Kannel query (plain and Unicode) reaching an SMPP client and a
// line client, the JSON API, Kannel's answers to bad input with nothing
// sent, and pipelined keep-alive requests answered in order. Run by
// `make check` (node --test).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { execFile, execFileSync } = require('node:child_process');
const L = require('./lib.js');

const BIN = process.env.ECHOROUTERD_BIN;
const SQLITE = !BIN || /sqlite: yes/.test(execFileSync(BIN, ['-V']).toString());

function conf(extra = '') {
	return L.httpConf(`  { id = "app"; password = "pw"; http = true;
    mo_url = "http://127.0.0.1:9/mo"; },
  { id = "slow"; password = "pw"; http = true; max_tps = 1; },
  { id = "nohttp"; password = "pw"; },
  { id = "bob"; password = "b"; },
  { id = "carol"; password = "c"; },
  { id = "two"; password = "t"; max_parts = 2; },
  { id = "u0"; password = "u"; }, { id = "u1"; password = "u"; },
  { id = "u2"; password = "u"; }, { id = "u3"; password = "u"; }`, extra);
}

// curl, as an application would run it: { status, body }.
function curl(args) {
	return L.withTimeout(new Promise((resolve, reject) => {
		execFile('curl', ['-sS', '--max-time', '20', '-w', '\n%{http_code}', ...args],
			{ maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
				if (err)
					return reject(new Error(`curl: ${err.message} ${stderr}`));
				const i = stdout.lastIndexOf('\n');
				resolve({ status: Number(stdout.slice(i + 1)), body: stdout.slice(0, i) });
			});
	}), 30000, 'curl');
}

function sendsms(d, query) {
	return curl([`http://127.0.0.1:${d.ports.http}/cgi-bin/sendsms?${query}`]);
}

// playSMS's Kannel plugin query, in its order: credentials, from, to,
// dlr-mask=31 and its dlr-url, then (Unicode) coding=2&charset=UTF-16BE,
// then the text.
function playsms(to, text, unicode) {
	const dlr = 'http://127.0.0.1/playsms/index.php?app=call&cat=gateway&plugin=kannel' +
	    '&access=dlr&type=%d&smslog_id=17&uid=1';
	let q = `username=app&password=pw&from=${encodeURIComponent('+35191')}` +
	    `&to=${encodeURIComponent(to)}&dlr-mask=31&dlr-url=${encodeURIComponent(dlr)}`;
	if (unicode) {
		q += '&coding=2&charset=UTF-16BE';
		const be = Buffer.from(text, 'utf16le').swap16();
		q += '&text=' + [...be].map((b) => '%' + b.toString(16).padStart(2, '0')).join('');
	} else {
		q += `&text=${encodeURIComponent(text)}`;
	}
	return q;
}

async function line(port, addr, password) {
	const c = await L.lineClient(port);
	c.sock.write(`LOGIN ${addr} ${password}\n`);
	await c.wait((l) => l.startsWith('OK LOGIN'), `login ${addr}`);
	return c;
}

test('playSMS over curl reaches an SMPP client and a line client', async () => {
	const d = await L.startDaemon(conf());
	try {
		const b = await L.session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
		const c = await line(d.ports.router, 'carol', 'c');
		let r = await sendsms(d, playsms('bob carol', 'Hello from playSMS!'));
		assert.equal(r.status, 202);
		assert.equal(r.body, '0: Accepted for delivery\n');
		await L.until(() => b.got.length === 1, 10000, 'deliver_sm at bob');
		assert.equal(L.text(b.got[0]), 'Hello from playSMS!');
		assert.equal(b.got[0].source_addr, '+35191');
		await c.wait((l) => / \+35191 Hello from playSMS!$/.test(l), 'MSG at carol');

		// Unicode as playSMS sends it: UTF-16BE octets, coding=2.
		const uni = 'مرحبا 😀 Ωmega';
		r = await sendsms(d, playsms('bob carol', uni, true));
		assert.equal(r.status, 202);
		assert.equal(r.body, '0: Accepted for delivery\n');
		await L.until(() => b.got.length === 2, 10000, 'the Unicode deliver_sm');
		assert.equal(b.got[1].data_coding, 8);
		assert.equal(L.text(b.got[1]), uni);
		await c.wait((l) => l.endsWith(` +35191 ${uni}`), 'the Unicode MSG at carol');
		c.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('POST form and the JSON API send; without a store a GET says so', async () => {
	const d = await L.startDaemon(conf());
	try {
		const c = await line(d.ports.router, 'carol', 'c');
		const base = `http://127.0.0.1:${d.ports.http}`;
		let r = await curl(['-d', 'user=app&pass=pw&to=carol&text=posted+form', `${base}/cgi-bin/sendsms`]);
		assert.equal(r.status, 202);
		await c.wait((l) => l.endsWith(' app posted form'), 'the form MSG');

		r = await curl(['-u', 'app:pw', '-H', 'Content-Type: application/json',
			'-d', JSON.stringify({ to: 'carol', from: 'shop', text: 'json olá' }),
			`${base}/api/v1/messages`]);
		assert.equal(r.status, 201, r.body);
		const j = JSON.parse(r.body);
		assert.match(j.id, /^\d+$/);
		assert.equal(j.parts, 1);
		assert.equal(j.state, 'accepted');
		await c.wait((l) => l === `MSG ${j.id} shop json olá`, 'the JSON MSG');

		r = await curl(['-u', 'app:pw', `${base}/api/v1/messages/${j.id}`]);
		assert.equal(r.status, 404);
		assert.match(JSON.parse(r.body).error, /no store/);

		// Bad JSON input, bad credentials, an account without http.
		r = await curl(['-u', 'app:pw', '-H', 'Content-Type: application/json',
			'-d', '{"to":"carol","text":"x","hex":"00"}', `${base}/api/v1/messages`]);
		assert.equal(r.status, 400);
		assert.ok(JSON.parse(r.body).error);
		r = await curl(['-u', 'app:bad', '-H', 'Content-Type: application/json',
			'-d', '{"to":"carol","text":"x"}', `${base}/api/v1/messages`]);
		assert.equal(r.status, 401);
		r = await curl(['-u', 'nohttp:pw', '-H', 'Content-Type: application/json',
			'-d', '{"to":"carol","text":"x"}', `${base}/api/v1/messages`]);
		assert.equal(r.status, 403);
		r = await curl(['-u', 'app:pw', '-H', 'Content-Type: application/json',
			'-d', '{"to":"nobody","text":"x"}', `${base}/api/v1/messages`]);
		assert.equal(r.status, 404);
		assert.match(JSON.parse(r.body).error, /no route/);
		await L.sleep(300);
		assert.equal(c.lines.filter((l) => l.startsWith('MSG')).length, 2);
		c.sock.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

test('bad input gets Kannel\'s answers and nothing is sent', async () => {
	const d = await L.startDaemon(conf());
	try {
		const b = await L.session(d.ports.smpp, 'bind_receiver', 'two', 't');
		const c = await line(d.ports.router, 'carol', 'c');
		const cases = [
			['username=app&password=pw&text=hi', 400, 'Missing receiver number, rejected'],
			['username=app&password=pw&to=carol', 400, 'Missing text, rejected'],
			['username=app&password=bad&to=carol&text=hi', 403, 'Authorization failed for sendsms'],
			['username=nohttp&password=pw&to=carol&text=hi', 403, 'Authorization failed for sendsms'],
			['username=app&password=pw&to=carol&text=hi&dlr-url=ftp%3A%2F%2Fx', 400,
			    'DLR-URL field misformed, rejected'],
			['username=app&password=pw&to=carol&text=hi&udh=0500', 400, 'UDH field misformed, rejected'],
			['username=app&password=pw&to=nobody&text=hi', 403, 'Not routable. Do not try again.'],
			// Three parts for an account with max_parts = 2.
			[`username=app&password=pw&to=two&text=${'a'.repeat(400)}`, 400,
			    'Message over the recipient\'s max_parts, rejected'],
			// max_tps = 1: the second recipient is over it, so neither goes.
			['username=slow&password=pw&to=carol+carol&text=hi', 503, 'Temporal failure, try again later.'],
		];
		for (const [q, status, body] of cases) {
			const r = await sendsms(d, q);
			assert.equal(r.status, status, q);
			assert.equal(r.body, body + '\n', q);
		}
		// A 100 KiB query: 414, the connection closed, nothing sent.
		const r = await sendsms(d, `username=app&password=pw&to=carol&text=${'x'.repeat(100 * 1024)}`);
		assert.equal(r.status, 414);
		await L.sleep(300);
		assert.deepEqual(c.lines.filter((l) => l.startsWith('MSG')), []);
		assert.equal(b.got.length, 0);
		// Still serving.
		assert.equal((await sendsms(d, 'username=app&password=pw&to=carol&text=ok')).status, 202);
		await c.wait((l) => l.endsWith(' app ok'), 'the MSG after');
		// /metrics counts them by endpoint and status.
		const m = await L.scrape(d.ports.metrics);
		const n = (ep, st) => L.val(m, `echorouterd_http_requests_total{endpoint="${ep}",status="${st}"}`);
		assert.equal(n('sendsms', 400), 5);
		assert.equal(n('sendsms', 403), 3);
		assert.equal(n('sendsms', 503), 1);
		assert.equal(n('sendsms', 202), 1);
		assert.equal(n('other', 414), 1);
		assert.equal(L.val(m, 'echorouterd_http_throttled_total'), 1);
		c.sock.destroy();
		b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

// What a raw request gets: the whole output until the server closes.
async function raw(d, bytes, ms = 20000) {
	const sock = await L.rawConnect(d.ports.http);
	let got = '';
	sock.setEncoding('utf8');
	sock.on('data', (x) => { got += x; });
	const closed = new Promise((resolve) => sock.on('close', resolve));
	sock.on('error', () => {});
	sock.write(bytes);
	await L.withTimeout(closed, ms, 'the server closing');
	return got;
}

test('HTTP errors: 413 body, 411 chunks, 405, content types, 408, each then closed', async () => {
	const d = await L.startDaemon(conf());
	try {
		const c = await line(d.ports.router, 'carol', 'c');
		const big = 'user=app&pass=pw&to=carol&text=' + 'x'.repeat(70 * 1024);
		let got = await raw(d, `POST /cgi-bin/sendsms HTTP/1.1\r\nHost: x\r\nContent-Type: ` +
		    `application/x-www-form-urlencoded\r\nContent-Length: ${big.length}\r\n\r\n${big}`);
		assert.match(got, /^HTTP\/1\.1 413 /);
		got = await raw(d, 'POST /api/v1/messages HTTP/1.1\r\nHost: x\r\n' +
		    'Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n');
		assert.match(got, /^HTTP\/1\.1 411 /);
		const base = `http://127.0.0.1:${d.ports.http}`;
		let r = await curl(['-X', 'DELETE', `${base}/cgi-bin/sendsms?user=app&pass=pw&to=carol&text=x`]);
		assert.equal(r.status, 405);
		r = await curl(['-H', 'Content-Type: text/plain', '-d', 'user=app&pass=pw&to=carol&text=x',
			`${base}/cgi-bin/sendsms`]);
		assert.equal(r.status, 400);
		assert.equal(r.body, 'Invalid content-type\n');
		r = await curl(['-u', 'app:pw', '-d', '{"to":"carol","text":"x"}', `${base}/api/v1/messages`]);
		assert.equal(r.status, 415);
		r = await curl([`${base}/cgi-bin/sendsms?user=app&pass=pw&to=carol&text=%zz`]);
		assert.equal(r.status, 400);
		// Half a request, then nothing: 408 and a close (10 s).
		got = await raw(d, 'GET /cgi-bin/sendsms?user=app HTTP/1.1\r\nHost: x\r\n', 30000);
		assert.match(got, /^HTTP\/1\.1 408 /);
		await L.sleep(300);
		assert.deepEqual(c.lines.filter((l) => l.startsWith('MSG')), []);
		c.sock.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

test('keep-alive: pipelined requests are answered in order', async () => {
	const d = await L.startDaemon(conf());
	try {
		// Line clients on both reactors: some verdicts come back later.
		const cs = [];
		for (let i = 0; i < 4; i++)
			cs.push(await line(d.ports.router, `u${i}`, 'u'));
		const req = (q) => `GET /cgi-bin/sendsms?${q} HTTP/1.1\r\nHost: x\r\n\r\n`;
		const reqs = [];
		for (let i = 0; i < 12; i++)
			reqs.push(i % 4 === 3 ? 'GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n' :
			    req(`user=app&pass=pw&to=u${i % 4}+u${(i + 1) % 4}&text=n${i}`));
		const sock = await L.rawConnect(d.ports.http);
		let got = '';
		sock.setEncoding('utf8');
		sock.on('data', (x) => { got += x; });
		sock.write(reqs.join(''));
		await L.until(() => (got.match(/HTTP\/1\.1 /g) || []).length === 12, 10000, '12 answers');
		const statuses = [...got.matchAll(/HTTP\/1\.1 (\d+)/g)].map((m) => Number(m[1]));
		assert.deepEqual(statuses, reqs.map((r) => (r.includes('/nothing') ? 404 : 202)));
		assert.equal((got.match(/0: Accepted for delivery/g) || []).length, 9);
		assert.ok(!sock.destroyed, 'the connection is kept');
		sock.destroy();
		for (const c of cs)
			c.sock.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

test('with a store: queued for later, and the JSON API tells its state', { skip: !SQLITE && 'built without SQLite' }, async () => {
	const d = await L.startDaemon(conf('store = { path = "store.db"; };'));
	try {
		// bob is offline: his store takes it.
		let r = await sendsms(d, 'username=app&password=pw&to=bob&text=later');
		assert.equal(r.status, 202);
		assert.equal(r.body, '3: Queued for later delivery\n');
		const base = `http://127.0.0.1:${d.ports.http}`;
		r = await curl(['-u', 'app:pw', '-H', 'Content-Type: application/json',
			'-d', '{"to":"bob","text":"json later"}', `${base}/api/v1/messages`]);
		assert.equal(r.status, 201, r.body);
		const j = JSON.parse(r.body);
		assert.equal(j.state, 'queued');
		r = await curl(['-u', 'app:pw', `${base}/api/v1/messages/${j.id}`]);
		assert.equal(r.status, 200, r.body);
		assert.equal(JSON.parse(r.body).state, 'enroute');
		// Another account asks: not its message.
		r = await curl(['-u', 'slow:pw', `${base}/api/v1/messages/${j.id}`]);
		assert.equal(r.status, 404);
		const b = await L.session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
		await L.until(() => b.got.length === 2, 10000, 'the backlog at bob');
		assert.deepEqual(b.got.map((p) => L.text(p)), ['later', 'json later']);
		// Delivered: an HTTP sender can ask, so its final state is kept.
		const end = Date.now() + 10000;
		let state;
		do {
			r = await curl(['-u', 'app:pw', `${base}/api/v1/messages/${j.id}`]);
			assert.equal(r.status, 200, r.body);
			state = JSON.parse(r.body).state;
			if (state !== 'delivered')
				await new Promise((res) => setTimeout(res, 50));
		} while (state !== 'delivered' && Date.now() < end);
		assert.equal(state, 'delivered');
		b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

// The blocks of operations.md's section title, in order.
function docBlocks(title) {
	const fs = require('node:fs');
	const path = require('node:path');
	const text = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'operations.md'), 'utf8');
	const start = text.indexOf(`\n### ${title}\n`);
	assert.ok(start >= 0, `docs/operations.md has no section ${title}`);
	// (Not at a "# " line: the shell blocks hold comments.)
	const m = /\n##+ /.exec(text.slice(start + 1));
	const end = m ? start + 1 + m.index : -1;
	return [...text.slice(start, end < 0 ? undefined : end).matchAll(/\n```(\w*)\n([\s\S]*?)\n```/g)]
		.map((m) => m[2].split('\n'));
}

function sampleConf() {
	const fs = require('node:fs');
	const path = require('node:path');
	const c = fs.readFileSync(path.join(__dirname, '..', '..', 'conf', 'echorouterd.conf'), 'utf8')
		.replace(/port = \d+;/g, 'port = 0;');
	return SQLITE ? c : c.replace(/^store = \{[\s\S]*?^\};/m, '');
}

const noIds = (l) => l.replace(/"id":"\d+"/, '"id":"<id>"').replace(/^MSG \d+/, 'MSG <id>');

test('operations.md\'s HTTP walk-through runs as written on the sample configuration', async () => {
	const [cmds, bobs] = docBlocks('Trying it on the sample configuration');
	const d = await L.startDaemon(sampleConf());
	try {
		const c = await L.lineClient(d.ports.router);
		const typed = bobs.filter((l) => !/^(OK|MSG) /.test(l));
		for (const t of typed)
			c.sock.write(`${t}\n`);
		await c.wait((l) => l.startsWith('OK LOGIN'), 'bob\'s login');
		for (let i = 0; i < cmds.length; i++) {
			if (!cmds[i].startsWith('curl '))
				continue;
			const cmd = cmds[i].replaceAll('127.0.0.1:13013', `127.0.0.1:${d.ports.http}`);
			const out = await L.withTimeout(new Promise((resolve, reject) =>
				execFile('sh', ['-c', cmd], (err, stdout) => (err ? reject(err) : resolve(stdout)))),
			20000, cmd);
			assert.equal(noIds(out.trimEnd()), noIds(cmds[i + 1].replace(/^# /, '')), cmd);
		}
		const shown = bobs.filter((l) => !typed.includes(l));
		await L.until(() => c.lines.length >= shown.length, 10000, 'bob\'s lines');
		assert.deepEqual(c.lines.map(noIds), shown.map(noIds));
		// Without accounts nobody sends as bob while he is logged in.
		const r = await sendsms(d, 'username=bob&to=bob&text=forged');
		assert.equal(r.status, 403);
		assert.equal(r.body, 'Sender not allowed for this account, rejected\n');
		const j = await curl(['-u', 'x:', '-H', 'Content-Type: application/json', '-d',
			'{"to":"bob","from":"bob","text":"forged"}', `http://127.0.0.1:${d.ports.http}/api/v1/messages`]);
		assert.equal(j.status, 403);
		await L.sleep(300);
		assert.equal(c.lines.length, shown.length);
		c.sock.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

// http-callbacks.test.js: what the http listener's applications asked to
// be told, posted to them by the http-out thread: a Kannel dlr-url with
// its escapes once an SMPP recipient answered, a JSON receipt_url, a
// receiver that is down at first (retried until it answers), a dlr-url
// outside http.callback_allow or at our own listener refused when asked,
// a message for the HTTP-only account posted to its mo_url (its sender's
// receipt once the application answered), callback_concurrency and
// callback_queue, giving up after callback_retries, with a store a post
// and a receipt awaited that survive kill -9 (the latter also when the
// kill came after its message's delivery was committed), the counts in
// /metrics, and
// the receipt of an upstream SMS centre for a send routed to it. The receiver is a node http
// server on port 0. Run by `make check` (node --test).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const L = require('./lib.js');
const { SmscSim } = require('./smsc-sim.js');

const HTTP_GROUP = 'callback_timeout = 5; callback_retries = 5; callback_concurrency = 2;';

function conf(extra = '', moPort = 9, httpGroup = HTTP_GROUP) {
	return L.httpConf(`  { id = "app"; password = "pw"; http = true;
    mo_url = "http://127.0.0.1:${moPort}/mo"; },
  { id = "bob"; password = "b"; },
  { id = "carol"; password = "c"; }`,
	`http = { callback_allow = [ "127.0.0.0/8" ]; ${httpGroup} };
${extra}`);
}

// The sqlite3 shell's answer to query on the store file f.
function sql(f, query) {
	return require('node:child_process').execFileSync('sqlite3', [f, query]).toString();
}

// A receiver on port (0: any): every request as { method, url, body },
// answered after delayMs.
function receiver(port = 0, delayMs = 0) {
	const got = [];
	const srv = http.createServer((req, res) => {
		let body = '';
		req.on('data', (c) => { body += c; });
		req.on('end', () => {
			got.push({ method: req.method, url: req.url, body,
				type: req.headers['content-type'], agent: req.headers['user-agent'] });
			setTimeout(() => res.end('ok'), delayMs);
		});
	});
	return new Promise((resolve, reject) => {
		srv.on('error', reject);
		srv.listen(port, '127.0.0.1', () =>
			resolve({ srv, got, port: srv.address().port }));
	});
}

function close(r) {
	return new Promise((resolve) => r.srv.close(resolve));
}

async function get(url, opts = {}) {
	const res = await L.withTimeout(fetch(url, opts), 20000, url);
	return { status: res.status, body: await res.text() };
}

async function line(port, addr, password) {
	const c = await L.lineClient(port);
	c.sock.write(`LOGIN ${addr} ${password}\n`);
	await c.wait((l) => l.startsWith('OK LOGIN'), `login ${addr}`);
	return c;
}

test('a Kannel dlr-url gets the delivered receipt with its escapes', async () => {
	const d = await L.startDaemon(conf());
	const r = await receiver();
	try {
		const b = await L.session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
		const dlr = `http://127.0.0.1:${r.port}/dlr?type=%d&id=%I&to=%p&from=%P&a=%A&t=%t&f=%F&pc=%%`;
		const q = `username=app&password=pw&from=${encodeURIComponent('+35191')}` +
		    `&to=bob&text=hi&dlr-mask=31&dlr-url=${encodeURIComponent(dlr)}`;
		const res = await get(`http://127.0.0.1:${d.ports.http}/cgi-bin/sendsms?${q}`);
		assert.equal(res.status, 202);
		assert.equal(res.body, '0: Accepted for delivery\n');
		await L.until(() => b.got.length === 1, 10000, 'deliver_sm at bob');
		await L.until(() => r.got.length === 1, 15000, 'the receipt');
		const u = new URL(r.got[0].url, 'http://x');
		assert.equal(r.got[0].method, 'GET');
		assert.match(r.got[0].agent, /^echorouterd\/\d+\.\d+\.\d+$/);
		assert.equal(u.pathname, '/dlr');
		assert.equal(u.searchParams.get('type'), '1');
		assert.match(u.searchParams.get('id'), /^\d+$/);
		assert.equal(u.searchParams.get('to'), 'bob');
		assert.equal(u.searchParams.get('from'), '+35191');
		assert.equal(u.searchParams.get('a'), 'DELIVRD');
		assert.match(u.searchParams.get('t'), /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/);
		assert.equal(u.searchParams.get('f'), '');
		assert.equal(u.searchParams.get('pc'), '%');
		// Encoded, not pasted: the + stays a +, not a space.
		assert.match(r.got[0].url, /from=%2B35191&/);
		const m = await L.scrape(d.ports.metrics);
		assert.equal(L.val(m, 'echorouterd_http_callbacks_total{result="sent"}'), 1);
		assert.equal(L.val(m, 'echorouterd_http_callbacks_pending{what="posts"}'), 0);
		assert.equal(L.val(m, 'echorouterd_http_callbacks_pending{what="receipts"}'), 0);
		b.s.close();
	} finally {
		await close(r);
		await L.stopDaemon(d);
	}
});

test('a recipient that refuses the message: the undelivered receipt (type 2)', async () => {
	const d = await L.startDaemon(conf());
	const r = await receiver();
	try {
		// ESME_RX_P_APPN: the application refuses it for good.
		const b = await L.session(d.ports.smpp, 'bind_receiver', 'bob', 'b', () => 0x65);
		const dlr = encodeURIComponent(`http://127.0.0.1:${r.port}/dlr?type=%d&a=%A&to=%p`);
		const res = await get(`http://127.0.0.1:${d.ports.http}/cgi-bin/sendsms?` +
		    `username=app&password=pw&to=bob&text=no&dlr-mask=3&dlr-url=${dlr}`);
		assert.equal(res.status, 202);
		await L.until(() => r.got.length === 1, 15000, 'the undelivered receipt');
		assert.equal(r.got[0].url, '/dlr?type=2&a=UNDELIV&to=bob');
		b.s.close();
	} finally {
		await close(r);
		await L.stopDaemon(d);
	}
});

test('dlr-mask says which receipts: 2 alone posts no delivered one', async () => {
	const d = await L.startDaemon(conf());
	const r = await receiver();
	try {
		const c = await line(d.ports.router, 'carol', 'c');
		const base = `http://127.0.0.1:${d.ports.http}/cgi-bin/sendsms?username=app&password=pw&to=carol`;
		const url = (tag) => encodeURIComponent(`http://127.0.0.1:${r.port}/${tag}?type=%d`);
		let res = await get(`${base}&text=one&dlr-mask=2&dlr-url=${url('two')}`);
		assert.equal(res.status, 202);
		res = await get(`${base}&text=two&dlr-mask=1&dlr-url=${url('one')}`);
		assert.equal(res.status, 202);
		await c.wait((l) => l.endsWith(' two'), 'both at carol');
		await L.until(() => r.got.length >= 1, 15000, 'the receipt');
		await L.sleep(500);
		assert.deepEqual(r.got.map((g) => g.url), ['/one?type=1']);
		c.sock.destroy();
	} finally {
		await close(r);
		await L.stopDaemon(d);
	}
});

test('a JSON send with receipt_url gets a JSON receipt', async () => {
	const d = await L.startDaemon(conf());
	const r = await receiver();
	try {
		const b = await L.session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
		const res = await get(`http://127.0.0.1:${d.ports.http}/api/v1/messages`, {
			method: 'POST',
			headers: { 'Content-Type': 'application/json',
				Authorization: 'Basic ' + Buffer.from('app:pw').toString('base64') },
			body: JSON.stringify({ to: 'bob', from: 'shop', text: 'json',
				receipt_url: `http://127.0.0.1:${r.port}/receipts` }),
		});
		assert.equal(res.status, 201, res.body);
		const id = JSON.parse(res.body).id;
		await L.until(() => r.got.length === 1, 15000, 'the JSON receipt');
		assert.equal(r.got[0].method, 'POST');
		assert.equal(r.got[0].url, '/receipts');
		assert.match(r.got[0].type, /^application\/json/);
		const j = JSON.parse(r.got[0].body);
		assert.equal(j.id, id);
		assert.equal(j.status, 'delivered');
		assert.equal(j.to, 'bob');
		assert.equal(j.from, 'shop');
		assert.match(j.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
		b.s.close();
	} finally {
		await close(r);
		await L.stopDaemon(d);
	}
});

test('a receiver that is down at first gets the receipt once it is up', async () => {
	const d = await L.startDaemon(conf());
	const port = await L.freePort();
	let r = null;
	try {
		const c = await line(d.ports.router, 'carol', 'c');
		const dlr = encodeURIComponent(`http://127.0.0.1:${port}/late?type=%d&id=%I`);
		const res = await get(`http://127.0.0.1:${d.ports.http}/cgi-bin/sendsms?` +
		    `username=app&password=pw&to=carol&text=later&dlr-mask=1&dlr-url=${dlr}`);
		assert.equal(res.status, 202);
		await c.wait((l) => l.endsWith(' later'), 'MSG at carol');
		// Refused at least once before the receiver comes up.
		await L.until(async () => L.val(await L.scrape(d.ports.metrics),
			'echorouterd_http_callbacks_total{result="retried"}') >= 1,
			15000, 'a retry');
		let m = await L.scrape(d.ports.metrics);
		assert.equal(L.val(m, 'echorouterd_http_callbacks_pending{what="posts"}'), 1);
		r = await receiver(port);
		await L.until(() => r.got.length === 1, 30000, 'the late receipt');
		assert.match(r.got[0].url, /^\/late\?type=1&id=\d+$/);
		await L.until(async () => L.val(await L.scrape(d.ports.metrics),
			'echorouterd_http_callbacks_total{result="sent"}') === 1, 10000, 'counted sent');
		m = await L.scrape(d.ports.metrics);
		assert.equal(L.val(m, 'echorouterd_http_callbacks_pending{what="posts"}'), 0);
		assert.equal(L.val(m, 'echorouterd_http_callbacks_total{result="failed"}'), 0);
		c.sock.destroy();
	} finally {
		if (r)
			await close(r);
		await L.stopDaemon(d);
	}
});

test('a dlr-url outside callback_allow or at our own listener is refused, nothing sent', async () => {
	const d = await L.startDaemon(conf());
	try {
		const c = await line(d.ports.router, 'carol', 'c');
		const base = `http://127.0.0.1:${d.ports.http}/cgi-bin/sendsms?username=app&password=pw&to=carol&dlr-mask=31`;
		let res = await get(`${base}&text=a&dlr-url=${encodeURIComponent('http://10.1.2.3/dlr?t=%d')}`);
		assert.equal(res.status, 403);
		assert.match(res.body, /^dlr-url refused: 10\.1\.2\.3:80 is outside http\.callback_allow/);
		res = await get(`${base}&text=b&dlr-url=${encodeURIComponent(`http://127.0.0.1:${d.ports.http}/cgi-bin/sendsms?to=carol`)}`);
		assert.equal(res.status, 403);
		assert.match(res.body, /one of this daemon's own listeners/);
		res = await get(`${base}&text=c&dlr-url=${encodeURIComponent(`http://localhost:${d.ports.metrics}/metrics`)}`);
		assert.equal(res.status, 403);
		res = await get(`http://127.0.0.1:${d.ports.http}/api/v1/messages`, {
			method: 'POST',
			headers: { 'Content-Type': 'application/json',
				Authorization: 'Basic ' + Buffer.from('app:pw').toString('base64') },
			body: JSON.stringify({ to: 'carol', text: 'd', receipt_url: 'http://[::ffff:10.0.0.1]:8080/x' }),
		});
		assert.equal(res.status, 403);
		assert.match(JSON.parse(res.body).error, /^"receipt_url" refused: .*outside http\.callback_allow/);
		// A mask of 0 asks for nothing: the URL is not looked at.
		res = await get(`http://127.0.0.1:${d.ports.http}/cgi-bin/sendsms?username=app&password=pw` +
		    `&to=carol&text=e&dlr-mask=0&dlr-url=${encodeURIComponent('http://10.1.2.3/')}`);
		assert.equal(res.status, 202);
		await c.wait((l) => l.endsWith(' e'), 'the one sent');
		await L.sleep(300);
		assert.equal(c.lines.filter((l) => l.startsWith('MSG')).length, 1);
		c.sock.destroy();
	} finally {
		await L.stopDaemon(d);
	}
});

const SQLITE = /sqlite: yes/.test(require('node:child_process')
	.execFileSync(process.env.ECHOROUTERD_BIN, ['-V']).toString());

test('with a store: buffered when stored, delivered once the recipient binds', { skip: !SQLITE && 'no SQLite' }, async () => {
	const d = await L.startDaemon(conf('store = { path = "store.db"; };'));
	const r = await receiver();
	try {
		const dlr = encodeURIComponent(`http://127.0.0.1:${r.port}/dlr?type=%d&id=%I&a=%A`);
		const res = await get(`http://127.0.0.1:${d.ports.http}/cgi-bin/sendsms?` +
		    `username=app&password=pw&to=bob&text=kept&dlr-mask=7&dlr-url=${dlr}`);
		assert.equal(res.status, 202);
		assert.equal(res.body, '3: Queued for later delivery\n');
		await L.until(() => r.got.length === 1, 15000, 'the buffered receipt');
		assert.match(r.got[0].url, /^\/dlr\?type=4&id=\d+&a=BUFFRED$/);
		const id = r.got[0].url.match(/id=(\d+)/)[1];
		const b = await L.session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
		await L.until(() => b.got.length === 1, 15000, 'the stored deliver_sm');
		await L.until(() => r.got.length === 2, 15000, 'the delivered receipt');
		assert.equal(r.got[1].url, `/dlr?type=1&id=${id}&a=DELIVRD`);
		await L.sleep(300);
		assert.equal(r.got.length, 2);
		b.s.close();
	} finally {
		await close(r);
		await L.stopDaemon(d);
	}
});

test('a message for an HTTP account goes to its mo_url, retried until it answers; the sender hears DELIVRD then', async () => {
	const port = await L.freePort();
	const d = await L.startDaemon(conf('', port));
	let r = null;
	try {
		const b = await L.session(d.ports.smpp, 'bind_transceiver', 'bob', 'b');
		const resp = await L.call(b.s, 'submit_sm', {
			source_addr: 'bob', destination_addr: 'app', data_coding: 0,
			short_message: Buffer.from('hi app'), registered_delivery: 1,
		});
		assert.equal(resp.command_status, 0);
		await L.until(async () => L.val(await L.scrape(d.ports.metrics),
			'echorouterd_http_callbacks_total{result="retried"}') >= 1,
			15000, 'a retry while the application is down');
		assert.equal(b.got.length, 0, 'no receipt before the application has it');
		r = await receiver(port);
		await L.until(() => r.got.length === 1, 30000, 'the MO post');
		assert.equal(r.got[0].method, 'POST');
		assert.equal(r.got[0].url, '/mo');
		assert.match(r.got[0].type, /^application\/json/);
		const j = JSON.parse(r.got[0].body);
		assert.equal(j.id, resp.message_id);
		assert.equal(j.from, 'bob');
		assert.equal(j.to, 'app');
		assert.equal(j.text, 'hi app');
		assert.match(j.at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
		await L.until(() => b.got.length === 1, 15000, 'the receipt at bob');
		assert.match(L.text(b.got[0]), new RegExp(`^id:${resp.message_id} .*stat:DELIVRD`));
		b.s.close();
	} finally {
		if (r)
			await close(r);
		await L.stopDaemon(d);
	}
});

test('callback_concurrency bounds the posts to one host; callback_queue the receipts awaited', async () => {
	const d = await L.startDaemon(conf('', 9, 'callback_concurrency = 1; callback_queue = 3;'));
	let open = 0, most = 0;
	const got = [];
	const srv = http.createServer((req, res) => {
		open++;
		most = Math.max(most, open);
		got.push(req.url);
		// Held a while: a second post to this host would overlap it.
		setTimeout(() => { open--; res.end('ok'); }, 300);
	});
	await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
	try {
		const c = await line(d.ports.router, 'carol', 'c');
		const dlr = encodeURIComponent(`http://127.0.0.1:${srv.address().port}/d?id=%I`);
		const base = `http://127.0.0.1:${d.ports.http}/cgi-bin/sendsms?username=app&password=pw&dlr-mask=1&dlr-url=${dlr}`;
		// Three recipients: the three receipts callback_queue has room for.
		let res = await get(`${base}&to=carol+carol+carol&text=three`);
		assert.equal(res.status, 202);
		await L.until(() => got.length === 3, 20000, 'three receipts');
		assert.equal(most, 1, 'posts to one host overlapped');
		await L.until(async () => L.val(await L.scrape(d.ports.metrics),
			'echorouterd_http_callbacks_pending{what="receipts"}') === 0, 10000, 'room again');
		// Four would be over it: refused before anything is sent.
		res = await get(`${base}&to=carol+carol+carol+carol&text=four`);
		assert.equal(res.status, 503);
		assert.equal(res.body, 'Temporal failure, try again later.\n');
		await L.sleep(300);
		assert.equal(c.lines.filter((l) => l.endsWith(' four')).length, 0);
		c.sock.destroy();
	} finally {
		await new Promise((resolve) => srv.close(resolve));
		await L.stopDaemon(d);
	}
});

test('given up after callback_retries: counted failed, and an mo_url sender hears UNDELIV', async () => {
	const port = await L.freePort();
	const d = await L.startDaemon(conf('', port, 'callback_retries = 1; callback_timeout = 2;'));
	try {
		const b = await L.session(d.ports.smpp, 'bind_transceiver', 'bob', 'b');
		const resp = await L.call(b.s, 'submit_sm', {
			source_addr: 'bob', destination_addr: 'app', data_coding: 0,
			short_message: Buffer.from('nobody home'), registered_delivery: 1,
		});
		assert.equal(resp.command_status, 0);
		// The first attempt, one retry a second later, then given up.
		await L.until(() => b.got.length === 1, 20000, 'the receipt at bob');
		assert.match(L.text(b.got[0]), new RegExp(`^id:${resp.message_id} .*stat:UNDELIV`));
		const m = await L.scrape(d.ports.metrics);
		assert.equal(L.val(m, 'echorouterd_http_callbacks_total{result="retried"}'), 1);
		assert.equal(L.val(m, 'echorouterd_http_callbacks_total{result="failed"}'), 1);
		assert.equal(L.val(m, 'echorouterd_http_callbacks_total{result="sent"}'), 0);
		assert.equal(L.val(m, 'echorouterd_http_callbacks_pending{what="posts"}'), 0);
		assert.match(d.log, /http-out: 127\.0\.0\.1: given up after 2 attempts/);
		b.s.close();
	} finally {
		await L.stopDaemon(d);
	}
});

test('with a store, a post pending at kill -9 is posted after the restart', { skip: !SQLITE && 'no SQLite' }, async () => {
	const fs = require('node:fs');
	const os = require('node:os');
	const path = require('node:path');
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-cb-'));
	const port = await L.freePort();
	const c2 = conf(`store = { path = "${dir}/store.db"; };`);
	let d = await L.startDaemon(c2), d2 = null, r = null;
	try {
		const c = await line(d.ports.router, 'carol', 'c');
		const dlr = encodeURIComponent(`http://127.0.0.1:${port}/kept?type=%d&id=%I`);
		const res = await get(`http://127.0.0.1:${d.ports.http}/cgi-bin/sendsms?` +
		    `username=app&password=pw&to=carol&text=k&dlr-mask=1&dlr-url=${dlr}`);
		assert.equal(res.status, 202);
		await c.wait((l) => l.endsWith(' k'), 'MSG at carol');
		await L.until(async () => L.val(await L.scrape(d.ports.metrics),
			'echorouterd_http_callbacks_total{result="retried"}') >= 1,
			15000, 'a retry: the post is pending (and kept)');
		c.sock.destroy();
		d.child.kill('SIGKILL');
		await L.until(() => d.exited !== null, 10000, 'killed');
		fs.rmSync(d.dir, { recursive: true, force: true });
		d = null;
		r = await receiver(port);
		d2 = await L.startDaemon(c2);
		await L.until(() => r.got.length === 1, 20000, 'the kept post');
		assert.match(r.got[0].url, /^\/kept\?type=1&id=\d+$/);
		await L.until(async () => L.val(await L.scrape(d2.ports.metrics),
			'echorouterd_http_callbacks_total{result="sent"}') === 1, 10000, 'counted');
		// Answered: no longer kept, a second restart posts nothing.
		await L.sleep(500);
		await L.stopDaemon(d2);
		d2 = await L.startDaemon(c2);
		await L.sleep(1500);
		assert.equal(r.got.length, 1);
	} finally {
		if (d)
			d.child.kill('SIGKILL');
		if (r)
			await close(r);
		if (d2)
			await L.stopDaemon(d2);
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test('with a store, a receipt awaited across a restart is posted once the stored message is delivered', { skip: !SQLITE && 'no SQLite' }, async () => {
	const fs = require('node:fs');
	const os = require('node:os');
	const path = require('node:path');
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-cb-'));
	const c2 = conf(`store = { path = "${dir}/store.db"; };`);
	const r = await receiver();
	let d = await L.startDaemon(c2), d2 = null;
	try {
		const dlr = encodeURIComponent(`http://127.0.0.1:${r.port}/w?type=%d&id=%I&to=%p`);
		const res = await get(`http://127.0.0.1:${d.ports.http}/cgi-bin/sendsms?` +
		    `username=app&password=pw&to=bob&text=later&dlr-mask=1&dlr-url=${dlr}`);
		assert.equal(res.status, 202);
		assert.equal(res.body, '3: Queued for later delivery\n');
		// The message is committed (3: queued); what its receipt asked
		// follows through http-out to the store's next commit.
		await L.sleep(1500);
		d.child.kill('SIGKILL');
		await L.until(() => d.exited !== null, 10000, 'killed');
		fs.rmSync(d.dir, { recursive: true, force: true });
		d = null;
		d2 = await L.startDaemon(c2);
		const b = await L.session(d2.ports.smpp, 'bind_receiver', 'bob', 'b');
		await L.until(() => b.got.length === 1, 15000, 'the stored message');
		await L.until(() => r.got.length === 1, 15000, 'its receipt');
		assert.match(r.got[0].url, /^\/w\?type=1&id=\d+&to=bob$/);
		b.s.close();
	} finally {
		if (d)
			d.child.kill('SIGKILL');
		await close(r);
		if (d2)
			await L.stopDaemon(d2);
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

// What a kill -9 leaves when it comes between the commit that made a
// message final and the one that keeps its receipt's post: the message in
// fin, its receipt still awaited. Made here with the sqlite3 shell in a
// store a clean stop left, as no timing could make it every time.
test('with a store, a receipt awaited whose message a kill -9 left delivered is posted at the start', { skip: (!SQLITE && 'no SQLite') || L.sqlite3Missing() }, async () => {
	const fs = require('node:fs');
	const os = require('node:os');
	const path = require('node:path');
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'erd-cb-'));
	const c2 = conf(`store = { path = "${dir}/store.db"; };`);
	const r = await receiver();
	let d = await L.startDaemon(c2);
	try {
		const dlr = encodeURIComponent(`http://127.0.0.1:${r.port}/f?type=%d&id=%I`);
		const res = await get(`http://127.0.0.1:${d.ports.http}/cgi-bin/sendsms?` +
		    `username=app&password=pw&to=bob&text=gone&dlr-mask=3&dlr-url=${dlr}`);
		assert.equal(res.status, 202);
		await L.sleep(1500);
		await L.stopDaemon(d);
		d = null;
		const files = fs.readdirSync(dir).filter((f) => /^store\.db(\.\d+)?$/.test(f))
			.map((f) => path.join(dir, f));
		const ids = files.map((f) => sql(f, 'SELECT id FROM msg;')).join('').split('\n')
			.filter((l) => l !== '');
		assert.equal(ids.length, 1, 'one message waits');
		assert.equal(files.map((f) => sql(f, 'SELECT count(*) FROM awaited;').trim())
			.filter((n) => n === '1').length, 1, 'its receipt is awaited');
		for (const f of files)
			sql(f, `INSERT INTO fin SELECT id, account, submitter, 2, final_date FROM msg WHERE id = ${ids[0]};` +
			    `DELETE FROM msg WHERE id = ${ids[0]};`);
		d = await L.startDaemon(c2);
		await L.until(() => r.got.length === 1, 15000, 'the receipt of the delivered message');
		assert.equal(r.got[0].url, `/f?type=1&id=${ids[0]}`);
		await L.until(async () => L.val(await L.scrape(d.ports.metrics),
			'echorouterd_http_callbacks_pending{what="receipts"}') === 0, 10000, 'no longer awaited');
		// Nothing waits for bob: no second receipt when he binds.
		const b = await L.session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
		await L.sleep(500);
		assert.equal(b.got.length, 0);
		assert.equal(r.got.length, 1);
		b.s.close();
	} finally {
		await close(r);
		if (d)
			await L.stopDaemon(d);
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

// A daemon whose route +351 goes to the SMS centre simulator on simPort,
// once its session is bound.
async function upstreamDaemon(simPort) {
	const d = await L.startDaemon(conf(`routes = ( { prefix = "+351"; to = "upstream:opA"; } );
upstreams = ( { name = "opA"; host = "127.0.0.1"; port = ${simPort};
  system_id = "erd"; password = "secret"; } );`));
	try {
		await L.until(async () => L.val(await L.scrape(d.ports.metrics),
			'echorouterd_upstream_sessions_bound{upstream="opA"}') === 1, 20000, 'bound');
	} catch (e) {
		await L.stopDaemon(d);
		throw e;
	}
	return d;
}

test('a send routed to an upstream SMS centre gets the centre\'s receipt at its dlr-url, with our id', async () => {
	const sim = new SmscSim({ messageId: () => '3039' });
	const simPort = await sim.start();
	const d = await upstreamDaemon(simPort);
	const r = await receiver();
	try {
		const dlr = `http://127.0.0.1:${r.port}/dlr?type=%d&id=%I&a=%A`;
		const q = `username=app&password=pw&to=${encodeURIComponent('+351910000001')}` +
		    `&text=hi&dlr-mask=3&dlr-url=${encodeURIComponent(dlr)}`;
		const res = await get(`http://127.0.0.1:${d.ports.http}/cgi-bin/sendsms?${q}`);
		assert.equal(res.status, 202);
		await L.until(() => sim.taken().length === 1, 10000, 'the submit_sm');
		assert.equal(sim.submits[0].pdu.registered_delivery & 1, 1, 'the centre is asked for a receipt');
		// The centre's receipt names its id in decimal (0x3039).
		const rr = await sim.deliver({ source_addr: '351910000001', destination_addr: 'app',
			esm_class: 0x04, short_message: Buffer.from('id:12345 sub:001 dlvrd:001 ' +
			'submit date:2611261830 done date:2611261832 stat:DELIVRD err:000 text:hi') });
		assert.equal(rr.command_status, 0);
		await L.until(() => r.got.length === 1, 15000, 'the receipt at the dlr-url');
		const u = new URL(r.got[0].url, 'http://x');
		assert.equal(u.searchParams.get('type'), '1');
		assert.equal(u.searchParams.get('a'), 'DELIVRD');
		assert.match(u.searchParams.get('id'), /^\d+$/);
		const m = await L.scrape(d.ports.metrics);
		assert.equal(L.val(m, 'echorouterd_upstream_receipts_matched_total{upstream="opA"}'), 1);
	} finally {
		await close(r);
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('dlr-mask 8 and 16: the SMS centre took the send (ACK, %F its id, also in the final receipt) or refused it (REJECTD, and a 400)', async () => {
	// The first submit is taken as id 3039, the second refused for good.
	const sim = new SmscSim({ messageId: () => '3039',
		submitStatus: (p, n) => (n === 0 ? 0 : 0x45) });
	const simPort = await sim.start();
	const d = await upstreamDaemon(simPort);
	const r = await receiver();
	try {
		const dlr = `http://127.0.0.1:${r.port}/dlr?type=%d&a=%A&f=%F`;
		const send = (to, mask) => get(`http://127.0.0.1:${d.ports.http}/cgi-bin/sendsms?` +
			`username=app&password=pw&to=${encodeURIComponent(to)}&text=hi` +
			`&dlr-mask=${mask}&dlr-url=${encodeURIComponent(dlr)}`);
		assert.equal((await send('+351910000001', 9)).status, 202);
		await L.until(() => r.got.length === 1, 15000, 'the SMSC ack');
		let u = new URL(r.got[0].url, 'http://x');
		assert.deepEqual([u.searchParams.get('type'), u.searchParams.get('a'),
			u.searchParams.get('f')], ['8', 'ACK', '3039']);
		// The centre's final receipt carries its id too.
		await sim.deliver({ source_addr: '351910000001', destination_addr: 'app',
			esm_class: 0x04, short_message: Buffer.from('id:12345 sub:001 dlvrd:001 ' +
			'submit date:2611261830 done date:2611261832 stat:DELIVRD err:000 text:hi') });
		await L.until(() => r.got.length === 2, 15000, 'the delivered receipt');
		u = new URL(r.got[1].url, 'http://x');
		assert.deepEqual([u.searchParams.get('type'), u.searchParams.get('f')], ['1', '3039']);
		// Refused for good: 16, and nothing more.
		// The sender hears it is for good (not 503: try again).
		const res = await send('+351910000002', 31);
		assert.equal(res.status, 400);
		assert.match(res.body, /Rejected by the SMS centre/);
		await L.until(() => r.got.length === 3, 15000, 'the SMSC reject');
		u = new URL(r.got[2].url, 'http://x');
		assert.deepEqual([u.searchParams.get('type'), u.searchParams.get('a'),
			u.searchParams.get('f')], ['16', 'REJECTD', '']);
		await L.sleep(500);
		assert.equal(r.got.length, 3);
	} finally {
		await close(r);
		await L.stopDaemon(d);
		await sim.stop();
	}
});

test('the next post starts as soon as a transfer ends: 200 receipts one at a time in seconds, not minutes', async () => {
	// A receiver that takes 20 ms per request: the receipts queue up.
	// With callback_concurrency = 1, a thread that waited for its poll's
	// timeout after each transfer posted one a second once the sends
	// stopped waking it: minutes for these, not 4 s.
	const d = await L.startDaemon(conf('', 9, 'callback_timeout = 5; callback_retries = 5; callback_concurrency = 1;'));
	const r = await receiver(0, 20);
	const N = 200;
	try {
		const b = await L.session(d.ports.smpp, 'bind_receiver', 'bob', 'b');
		const dlr = `http://127.0.0.1:${r.port}/dlr?id=%I`;
		const q = `username=app&password=pw&to=bob&text=hi&dlr-mask=1&dlr-url=${encodeURIComponent(dlr)}`;
		for (let i = 0; i < N; i++)
			assert.equal((await get(`http://127.0.0.1:${d.ports.http}/cgi-bin/sendsms?${q}`)).status, 202);
		await L.until(() => b.got.length === N, 20000, 'every deliver_sm at bob');
		await L.until(() => r.got.length === N, 30000, `${N} receipts (${r.got.length} so far)`);
		assert.equal(new Set(r.got.map((g) => g.url)).size, N, 'each once');
		b.s.close();
	} finally {
		await close(r);
		await L.stopDaemon(d);
	}
});

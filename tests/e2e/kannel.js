// kannel.js: a Kannel gateway (bearerbox and smsbox, Debian package
// kannel) for the end-to-end tests, bound to echorouterd's SMPP listener
// as a transceiver: its sendsms HTTP interface submits to echorouterd, and
// what echorouterd delivers to it (MO, to Kannel) goes to the get-url of
// its one sms-service. Both boxes run from one config file in a temporary
// directory, log there, and are stopped by PID. Every wait is bounded.
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const L = require('./lib.js');

const ADMIN_PASSWORD = 'adm';
const SENDSMS_USER = 't', SENDSMS_PASSWORD = 'p';
const WAIT_MS = 20000;

// Debian installs the boxes in /usr/sbin, which a user's PATH may lack.
function boxPath(name) {
	const dirs = (process.env.PATH || '').split(':').filter(Boolean)
		.concat(['/usr/sbin', '/usr/local/sbin']);
	for (const d of dirs) {
		const p = path.join(d, name);
		try {
			fs.accessSync(p, fs.constants.X_OK);
			return p;
		} catch (e) {
			// not here
		}
	}
	return null;
}

// Why the Kannel tests cannot run (false: they can).
function kannelMissing() {
	if (!boxPath('bearerbox') || !boxPath('smsbox'))
		return 'Kannel is not installed (Debian: kannel; make check installs it)';
	return false;
}

// The config file of both boxes. o: smppPort, account, password, ports
// { admin, smsbox, sendsms }, moUrl, moRecode, altCharset (what Kannel
// takes data_coding 0 for; GSM 03.38 without it).
function kannelConf(o) {
	return `group = core
admin-port = ${o.ports.admin}
admin-interface = 127.0.0.1
admin-password = ${ADMIN_PASSWORD}
admin-allow-ip = 127.0.0.1
smsbox-port = ${o.ports.smsbox}
smsbox-interface = 127.0.0.1
box-allow-ip = 127.0.0.1

group = smsc
smsc = smpp
smsc-id = echorouterd
host = 127.0.0.1
port = ${o.smppPort}
transceiver-mode = true
smsc-username = ${o.account}
smsc-password = ${o.password}
system-type = "VMA"
reconnect-delay = 1
${o.altCharset ? `alt-charset = "${o.altCharset}"` : ''}

group = smsbox
bearerbox-host = 127.0.0.1
bearerbox-port = ${o.ports.smsbox}
sendsms-port = ${o.ports.sendsms}
sendsms-interface = 127.0.0.1
mo-recode = ${o.moRecode ? 'true' : 'false'}

group = sendsms-user
username = ${SENDSMS_USER}
password = ${SENDSMS_PASSWORD}
max-messages = 10
concatenation = true

group = sms-service
keyword = default
get-url = "${o.moUrl}?text=%a&bin=%b&coding=%c&charset=%C&from=%p&to=%P&udh=%u"
max-messages = 0
`;
}

// One GET on a fresh connection: { status, body }; bounded.
function get(url, ms = 5000) {
	return L.withTimeout(new Promise((resolve, reject) => {
		const req = http.get(url, { agent: false }, (res) => {
			let body = '';
			res.setEncoding('utf8');
			res.on('data', (d) => { body += d; });
			res.on('end', () => resolve({ status: res.statusCode, body }));
		});
		req.on('error', reject);
	}), ms, `GET ${url}`);
}

function spawnBox(dir, name, conf) {
	const out = fs.openSync(path.join(dir, `${name}.log`), 'w');
	const child = spawn(boxPath(name), [conf], { stdio: ['ignore', out, out] });
	fs.closeSync(out);
	const box = { name, child, exited: null };
	child.on('exit', (code, signal) => { box.exited = { code, signal }; });
	return box;
}

function logTail(k, name, lines = 15) {
	try {
		const t = fs.readFileSync(path.join(k.dir, `${name}.log`), 'utf8');
		return t.trimEnd().split('\n').slice(-lines).join('\n');
	} catch (e) {
		return '(no log)';
	}
}

// The admin status page, or '' while bearerbox does not answer.
async function status(k) {
	try {
		const r = await get(`http://127.0.0.1:${k.ports.admin}/status.txt?password=${ADMIN_PASSWORD}`);
		return r.status === 200 ? r.body : '';
	} catch (e) {
		return '';
	}
}

// Polls until ok(status page) is true; a box that exits first fails it
// at once.
async function until(k, ok, what) {
	const end = Date.now() + WAIT_MS;
	for (;;) {
		for (const b of [k.bearerbox, k.smsbox])
			if (b && b.exited)
				throw new Error(`${b.name} exited ${JSON.stringify(b.exited)}`);
		if (await ok(await status(k)))
			return;
		if (Date.now() > end)
			throw new Error(`timed out: ${what}`);
		await L.sleep(100);
	}
}

// Ready: the SMPP connection online, smsbox connected to bearerbox and
// its sendsms port answering.
async function sendsmsAnswers(k) {
	const r = await get(`http://127.0.0.1:${k.ports.sendsms}/cgi-bin/sendsms`)
		.catch(() => null);
	return r !== null;
}

// Starts bearerbox, then (once it answers: smsbox gives up on a bearerbox
// not there) smsbox, on free loopback ports. Kannel cannot take port 0,
// so a port taken meanwhile (a box exits) means another try on others.
// o: as kannelConf, without ports.
async function startKannel(o) {
	let last;
	for (let attempt = 0; attempt < 3; attempt++) {
		const k = { dir: fs.mkdtempSync(path.join(os.tmpdir(), 'erd-kannel-')) };
		k.ports = { admin: await L.freePort(), smsbox: await L.freePort(),
			sendsms: await L.freePort() };
		const conf = path.join(k.dir, 'kannel.conf');
		fs.writeFileSync(conf, kannelConf({ ...o, ports: k.ports }));
		try {
			k.bearerbox = spawnBox(k.dir, 'bearerbox', conf);
			await until(k, (s) => s !== '', 'bearerbox answering');
			k.smsbox = spawnBox(k.dir, 'smsbox', conf);
			await until(k, async (s) => /SMPP:[^\n]*\(online /.test(s) &&
			    /smsbox:[^\n]*IP /.test(s) && await sendsmsAnswers(k),
			    'Kannel online');
			return k;
		} catch (e) {
			last = new Error(`${e.message}\nbearerbox's log ends:\n` +
			    `${logTail(k, 'bearerbox')}\nsmsbox's log ends:\n${logTail(k, 'smsbox')}`);
			await stopKannel(k);
		}
	}
	throw last;
}

// SIGTERM, then SIGKILL if it has not exited in time, saying so: a box
// that hangs in its shutdown costs the run STOP_MS, and its log says why.
const STOP_MS = 10000;
async function stopBox(k, b) {
	if (!b || b.exited)
		return;
	const gone = new Promise((resolve) => b.child.once('exit', resolve));
	b.child.kill('SIGTERM');
	await L.withTimeout(gone, STOP_MS, `${b.name} stop`).catch(async () => {
		process.stderr.write(`${b.name} still running ${STOP_MS} ms after ` +
		    `SIGTERM, killed; its log ends:\n${logTail(k, b.name)}\n`);
		b.child.kill('SIGKILL');
		await L.withTimeout(gone, WAIT_MS, `${b.name} SIGKILL`);
	});
}

// smsbox first: bearerbox waits for its boxes when it shuts down.
async function stopKannel(k) {
	if (!k)
		return;
	await stopBox(k, k.smsbox);
	await stopBox(k, k.bearerbox);
	fs.rmSync(k.dir, { recursive: true, force: true });
}

// A sendsms request: params (to, from, text, coding, charset, ...)
// URL-encoded as UTF-8; { status, body }.
function sendsms(k, params) {
	const q = new URLSearchParams({ username: SENDSMS_USER,
		password: SENDSMS_PASSWORD, ...params });
	return get(`http://127.0.0.1:${k.ports.sendsms}/cgi-bin/sendsms?${q}`);
}

// A query string's values as the bytes they encode (URLSearchParams
// would read them as UTF-8, and %b or UCS-2 text are not).
function queryBytes(query) {
	const v = {};
	for (const pair of query.split('&')) {
		const i = pair.indexOf('=');
		const key = i < 0 ? pair : pair.slice(0, i);
		const raw = i < 0 ? '' : pair.slice(i + 1).replace(/\+/g, ' ');
		const bytes = [];
		for (let j = 0; j < raw.length; j++) {
			if (raw[j] === '%' && /^[0-9A-Fa-f]{2}$/.test(raw.slice(j + 1, j + 3))) {
				bytes.push(parseInt(raw.slice(j + 1, j + 3), 16));
				j += 2;
			} else {
				bytes.push(...Buffer.from(raw[j], 'latin1'));
			}
		}
		v[key] = Buffer.from(bytes);
	}
	return v;
}

// An HTTP server on a free loopback port for the sms-service's get-url:
// m.url, m.got (each request's query as bytes), m.close().
function moServer() {
	return L.withTimeout(new Promise((resolve, reject) => {
		const m = { got: [], waiters: [] };
		m.srv = http.createServer((req, res) => {
			const q = req.url.indexOf('?');
			m.got.push(queryBytes(q < 0 ? '' : req.url.slice(q + 1)));
			res.writeHead(200, { 'Content-Type': 'text/plain' });
			res.end('');
			for (const w of m.waiters.slice())
				w();
		});
		m.srv.on('error', reject);
		m.srv.listen(0, '127.0.0.1', () => {
			m.url = `http://127.0.0.1:${m.srv.address().port}/mo`;
			resolve(m);
		});
		m.close = () => new Promise((r) => {
			m.srv.closeAllConnections();
			m.srv.close(r);
		});
	}), WAIT_MS, 'MO server');
}

// Resolves with the first request pred accepts, in at most ms.
function moWait(m, pred, what, ms = WAIT_MS) {
	return L.withTimeout(new Promise((resolve) => {
		const check = () => {
			const hit = m.got.find(pred);
			if (hit === undefined)
				return;
			m.waiters.splice(m.waiters.indexOf(check), 1);
			resolve(hit);
		};
		m.waiters.push(check);
		check();
	}), ms, what);
}

// The failed count of the SMPP connection on the admin status page.
async function smscFailed(k) {
	const m = /SMPP:[^\n]*failed (\d+)/.exec(await status(k));
	return m ? Number(m[1]) : 0;
}

module.exports = {
	kannelMissing, startKannel, stopKannel, sendsms, moServer, moWait,
	smscFailed, logTail, queryBytes,
};

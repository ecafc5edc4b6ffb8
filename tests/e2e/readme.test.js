// readme.test.js: the README's "Text both ways" tour, run as written: its
// bob.js (the npm smpp client) against the sample configuration, and its
// terminal 2 typed into a line client; what both terminals show must be
// what the README shows, but for the message ids. Run by `make check`
// (node --test).
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync, spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const L = require('./lib.js');

const ROOT = path.join(__dirname, '..', '..');

// The fenced blocks of the README's section named title, in order.
function sectionBlocks(title) {
	const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
	const start = readme.indexOf(`\n### ${title}\n`);
	assert.ok(start >= 0, `README.md has no section ${title}`);
	const end = readme.indexOf('\n#', start + 1);
	const body = readme.slice(start, end < 0 ? undefined : end);
	return [...body.matchAll(/\n```(\w*)\n([\s\S]*?)\n```/g)]
		.map((m) => ({ lang: m[1], lines: m[2].split('\n'), text: m[2] }));
}

// Ids differ from run to run.
function noIds(l) {
	return l.replace(/^(OK|MSG) \d+/, '$1 <id>').replace(/ id \d+$/, ' id <id>');
}

// The sample configuration on free ports, its store in the daemon's
// directory (a relative path is relative to the file); a build without
// SQLite refuses a store, so there it goes, as make install does.
function sampleConf() {
	const BIN = process.env.ECHOROUTERD_BIN;
	const conf = fs.readFileSync(path.join(ROOT, 'conf', 'echorouterd.conf'), 'utf8')
		.replace(/port = \d+;/g, 'port = 0;');
	if (BIN && !/sqlite: yes/.test(execFileSync(BIN, ['-V']).toString()))
		return conf.replace(/^store = \{[\s\S]*?^\};/m, '');
	return conf;
}

test('the README\'s text tour: alice\'s olá € ☃ and @A€ hi reach bob.js, and its answers alice, as shown', async () => {
	const [script, term1, term2] = sectionBlocks('Text both ways');
	assert.equal(script.lang, 'js');
	const d = await L.startDaemon(sampleConf());
	let bob = null, c = null;
	try {
		const file = path.join(d.dir, 'bob.js');
		fs.writeFileSync(file, script.text.replace('smpp://127.0.0.1:2775',
		    `smpp://127.0.0.1:${d.ports.smpp}`));
		bob = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'inherit'],
			env: { ...process.env, NODE_PATH: path.join(__dirname, 'node_modules') } });
		let out = '';
		bob.stdout.setEncoding('utf8');
		bob.stdout.on('data', (s) => { out += s; });
		const shown1 = term1.lines.filter((l) => !l.startsWith('$ '));
		await L.until(() => out.includes(shown1[0]), 15000, shown1[0]);

		// Terminal 2: what is typed, and after each what comes back.
		const shown2 = term2.lines.filter((l) => !l.startsWith('$ '));
		c = await L.lineClient(d.ports.router);
		const typed = shown2.filter((l) => !/^(OK|MSG) /.test(l));
		for (const t of typed) {
			const i = shown2.indexOf(t);
			let j = i + 1;
			while (j < shown2.length && /^(OK|MSG) /.test(shown2[j]))
				j++;
			const want = c.lines.length + j - i - 1;
			c.sock.write(`${t}\n`);
			await L.until(() => c.lines.length >= want, 15000, `the replies to ${t}`);
		}
		assert.deepEqual(c.lines.map(noIds),
		    shown2.filter((l) => !typed.includes(l)).map(noIds));
		await L.until(() => out.trimEnd().split('\n').length >= shown1.length, 15000,
		    'bob.js\'s output');
		const printed = out.trimEnd().split('\n');
		assert.deepEqual(printed.map(noIds), shown1.map(noIds));
		// bob's answer is the MSG alice gets, under the same id.
		const answered = printed.filter((l) => / id \d+$/.test(l)).map((l) => l.split(' id ')[1]);
		const msgs = c.lines.filter((l) => l.startsWith('MSG ')).map((l) => l.split(' ')[1]);
		assert.deepEqual(answered, msgs);
	} finally {
		if (c)
			c.sock.destroy();
		if (bob && bob.exitCode === null) {
			const gone = new Promise((r) => bob.once('exit', r));
			bob.kill('SIGTERM');
			await L.withTimeout(gone, 10000, 'bob.js exit');
		}
		await L.stopDaemon(d);
	}
});

// Ids and dates differ from run to run.
function noIdsOrDates(l) {
	return noIds(l).replace(/^RCPT \d+ (\S+) (\d+) \d{10}$/, 'RCPT <id> $1 $2 <date>');
}

test('the README\'s upstream tour: the simulator gets the SEND, its receipt and its message reach alice, as shown', async () => {
	const [confBlock, term1, term2] = sectionBlocks('An SMS centre upstream');
	const cli = path.join(__dirname, 'smsc-cli.js');
	assert.match(term1.lines[0], /^\$ NODE_PATH=tests\/e2e\/node_modules node tests\/e2e\/smsc-cli\.js$/);
	const sim = spawn(process.execPath, [cli, '0'], { stdio: ['pipe', 'pipe', 'inherit'],
		env: { ...process.env, NODE_PATH: path.join(__dirname, 'node_modules') } });
	let out = '', d = null, c = null;
	sim.stdout.setEncoding('utf8');
	sim.stdout.on('data', (s) => { out += s; });
	try {
		await L.until(() => / on 127\.0\.0\.1:\d+,/.test(out), 15000, 'the simulator');
		const port = / on 127\.0\.0\.1:(\d+),/.exec(out)[1];
		assert.match(confBlock.text, /port = 2776;/);
		d = await L.startDaemon(`${sampleConf()}\n${confBlock.text.replace('port = 2776;', `port = ${port};`)}\n`);
		await L.until(() => out.includes('bound: '), 15000, 'the daemon bound');
		const shown2 = term2.lines.filter((l) => !l.startsWith('$ '));
		const replies = /^(OK|MSG|RCPT) /;
		c = await L.lineClient(d.ports.router);
		// Typed in terminal 2, and the replies before the next line typed
		// (the MSG comes after terminal 1's line).
		const typed = shown2.filter((l) => !replies.test(l));
		const mo = term1.lines.find((l) => /^\+\d+ alice /.test(l));
		assert.ok(mo, 'terminal 1 types a message from the network');
		for (const t of typed) {
			const i = shown2.indexOf(t);
			let j = i + 1;
			while (j < shown2.length && replies.test(shown2[j]) && !shown2[j].startsWith('MSG '))
				j++;
			const want = c.lines.length + j - i - 1;
			c.sock.write(`${t}\n`);
			await L.until(() => c.lines.length >= want, 15000, `the replies to ${t}`);
		}
		sim.stdin.write(`${mo}\n`);
		await L.until(() => c.lines.length >= shown2.length - typed.length, 15000, 'the MSG');
		assert.deepEqual(c.lines.map(noIdsOrDates),
		    shown2.filter((l) => !typed.includes(l)).map(noIdsOrDates));
		const rcpt = c.lines.find((l) => l.startsWith('RCPT '));
		assert.equal(rcpt.split(' ')[1], c.lines.find((l) => /^OK \d+$/.test(l)).split(' ')[1]);
		const shown1 = term1.lines.filter((l) => !l.startsWith('$ ') && l !== mo)
			.map((l) => l.replace(/:2776,/, `:${port},`));
		await L.until(() => out.trimEnd().split('\n').length >= shown1.length, 15000,
		    'the simulator\'s output');
		assert.deepEqual(out.trimEnd().split('\n'), shown1);
	} finally {
		if (c)
			c.sock.destroy();
		if (d)
			await L.stopDaemon(d);
		const gone = new Promise((r) => sim.once('exit', r));
		sim.kill('SIGTERM');
		await L.withTimeout(gone, 10000, 'the simulator\'s exit');
	}
});

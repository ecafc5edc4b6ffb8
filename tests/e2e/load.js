// load.js: submit_sm -> deliver_sm throughput through echorouterd, with the
// npm smpp client. Usage (the daemon must be running with an smpp listener
// and no accounts, or accounts e0..e(N-1) with password "p"):
//   node tests/e2e/load.js PORT [SESSIONS=50] [WINDOW=32] [SECONDS=5]
// Every message is checked to arrive exactly once; prints one RESULT line.
'use strict';

const smpp = require('smpp');

const port = Number(process.argv[2]);
const N = Number(process.argv[3] || 50);
const WINDOW = Number(process.argv[4] || 32);
const SECS = Number(process.argv[5] || 5);
if (!port) {
	console.error('usage: node load.js PORT [SESSIONS] [WINDOW] [SECONDS]');
	process.exit(2);
}

function bind(i) {
	return new Promise((resolve, reject) => {
		const s = smpp.connect({ url: `smpp://127.0.0.1:${port}` }, () => {
			s.bind_transceiver({ system_id: `e${i}`, password: 'p' }, (r) =>
				(r.command_status === 0 ? resolve(s) : reject(new Error(`bind e${i}: ${r.command_status}`))));
		});
		s.on('error', reject);
	});
}

(async () => {
	const sessions = await Promise.all(Array.from({ length: N }, (_, i) => bind(i)));
	const seen = new Set();
	let submitted = 0, answered = 0, failed = 0, delivered = 0, dup = 0;
	let running = true;
	sessions.forEach((s) => s.on('deliver_sm', (pdu) => {
		const t = pdu.short_message.message;
		if (seen.has(t)) dup++;
		seen.add(t);
		delivered++;
		s.send(pdu.response());
	}));
	const t0 = Date.now();
	await Promise.all(sessions.map((s, i) => new Promise((resolve) => {
		let inflight = 0, k = 0;
		const pump = () => {
			while (running && inflight < WINDOW) {
				const to = (i + 1 + (k % (N - 1))) % N;
				inflight++;
				submitted++;
				s.submit_sm({ destination_addr: `e${to}`, short_message: `e${i}#${k++}` }, (r) => {
					inflight--;
					answered++;
					if (r.command_status !== 0) failed++;
					if (running) pump();
					else if (inflight === 0) resolve();
				});
			}
		};
		pump();
		setTimeout(() => { running = false; if (inflight === 0) resolve(); }, SECS * 1000);
	})));
	const secs = (Date.now() - t0) / 1000;
	await new Promise((r) => setTimeout(r, 500));
	console.log(`RESULT mode=smpp sessions=${N} window=${WINDOW} secs=${secs.toFixed(2)} ` +
		`submitted=${submitted} answered=${answered} failed=${failed} delivered=${delivered} ` +
		`duplicates=${dup} submit_per_s=${Math.round(answered / secs)} deliver_per_s=${Math.round(delivered / secs)}`);
	sessions.forEach((s) => s.destroy());
	process.exit(failed || dup || delivered !== answered - failed ? 1 : 0);
})().catch((e) => { console.error(e); process.exit(1); });

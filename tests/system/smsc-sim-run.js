// smsc-sim-run.js: the tests' SMS centre simulator as a process, for
// check-system.sh (a shell script cannot hold a node object). Usage:
//   node smsc-sim-run.js LOGFILE [SECONDS]
// Listens on a free loopback port and prints "port N" on stdout; appends
// one JSON line per PDU it receives to LOGFILE ({command, source_addr,
// destination_addr, text (the short_message as UTF-8 or, when not valid
// UTF-8, hex), data_coding}); exits on SIGTERM, or by itself after SECONDS
// (300), so a failed test run never leaves it behind.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { SmscSim } = require(path.join(__dirname, '..', 'e2e', 'smsc-sim.js'));

function text(sm) {
	if (sm === undefined || sm === null)
		return '';
	if (typeof sm === 'string')
		return sm;
	const b = Buffer.isBuffer(sm) ? sm : sm.message !== undefined
		? Buffer.from(String(sm.message)) : Buffer.from([]);
	const s = b.toString('utf8');
	return Buffer.from(s, 'utf8').equals(b) ? s : b.toString('hex');
}

async function main() {
	const log = process.argv[2];
	const secs = Number(process.argv[3] || 300);
	if (!log) {
		console.error('usage: smsc-sim-run.js LOGFILE [SECONDS]');
		process.exit(2);
	}
	const sim = new SmscSim();
	const port = await sim.start(0);
	let done = 0;
	const flush = () => {
		for (; done < sim.pdus.length; done++) {
			const p = sim.pdus[done];
			fs.appendFileSync(log, JSON.stringify({ command: p.command,
				source_addr: p.source_addr,
				destination_addr: p.destination_addr,
				text: text(p.short_message), data_coding: p.data_coding,
			}) + '\n');
		}
	};
	const timer = setInterval(flush, 100);
	const stop = async () => {
		clearInterval(timer);
		flush();
		await sim.stop();
		process.exit(0);
	};
	process.on('SIGTERM', stop);
	setTimeout(stop, secs * 1000).unref();
	console.log(`port ${port}`);
}

main().catch((e) => { console.error(e); process.exit(1); });

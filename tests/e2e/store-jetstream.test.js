// store-jetstream.test.js: every test of store.test.js again, on the
// JetStream backend (store.backend = "jetstream", a one-node cluster on a
// nats-server -js the tests start).
'use strict';

process.env.ERD_STORE_BACKEND = 'jetstream';
require('./store.test.js');

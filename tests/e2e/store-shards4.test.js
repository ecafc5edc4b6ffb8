// store-shards4.test.js: every test of store.test.js again, with
// store.shards = 4 (four store threads, each with a file of its own).
'use strict';

process.env.ERD_STORE_SHARDS = '4';
require('./store.test.js');

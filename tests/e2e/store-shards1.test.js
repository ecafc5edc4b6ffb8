// store-shards1.test.js: every test of store.test.js again, with
// store.shards = 1 (one store thread and file, as before shards).
'use strict';

process.env.ERD_STORE_SHARDS = '1';
require('./store.test.js');

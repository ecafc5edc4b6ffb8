/* test_store.c: the SQLite store backend on a temporary file: order, scans, expiry, marks, reopen, files that are not a store, schema 1 files migrated. */
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "helpers.h"
#include "msg.h"
#include "receipt_map.h"
#include "store.h"
#include "store_backend.h"
#include "store_int.h"
#include "suites.h"

#if ER_WITH_SQLITE
#include <sqlite3.h>

static char dir[64];
static struct store_conf sc;

/* A configuration holding sc, as a backend is opened with the whole. */
static const struct config *
with_sc(void)
{
	static struct config cf;

	cf.store = sc;
	return &cf;
}

static void
setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/erd-store-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	memset(&sc, 0, sizeof(sc));
	sc.enabled = true;
	snprintf(sc.path, sizeof(sc.path), "%s/store.db", dir);
	sc.sync_full = true;
}

static void
teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static struct store_backend *
open_ok(bool check_only)
{
	char *err = NULL;
	struct store_backend *b = store_sqlite_ops.open(with_sc(), sc.path, check_only,
	    &err);

	ck_assert_msg(b != NULL, "open: %s", err ? err : "?");
	return b;
}

/* Opens and expects a refusal whose text names the file and says why. */
static void
open_refused(const char *why)
{
	char *err = NULL;

	ck_assert_ptr_null(store_sqlite_ops.open(with_sc(), sc.path, false, &err));
	ck_assert_ptr_nonnull(err);
	ck_assert_msg(strstr(err, sc.path) != NULL, "no file in \"%s\"", err);
	ck_assert_msg(strstr(err, why) != NULL, "\"%s\" lacks \"%s\"", err,
	    why);
	free(err);
}

/*
 * Puts message id for account, with text and times, into the open
 * transaction (or on its own); the fields see() checks set.
 */
static void
put_in_txn(struct store_backend *b, uint64_t id, const char *account,
    const char *text, uint64_t expires)
{
	struct msg *m = msg_new(strlen(text));
	struct store_rec rec;

	memcpy(m->text, text, strlen(text));
	m->len = strlen(text);
	m->id = id;
	m->submitted = 1000;
	snprintf(m->from, sizeof(m->from), "alice");
	snprintf(m->to, sizeof(m->to), "%s", account);
	snprintf(m->reply_to, sizeof(m->reply_to), "alice");
	m->registered_delivery = 1;
	m->sender_ref = 42;
	memset(&rec, 0, sizeof(rec));
	rec.m = m;
	snprintf(rec.account, sizeof(rec.account), "%s", account);
	rec.state = MSG_STATE_ENROUTE;
	rec.expires = expires;
	ck_assert_int_eq(store_sqlite_ops.put(b, &rec), 0);
	free(m);
}

/* put_in_txn in a transaction of its own. */
static void
put(struct store_backend *b, uint64_t id, const char *account,
    const char *text, uint64_t expires)
{
	ck_assert_int_eq(store_sqlite_ops.begin(b, true), 0);
	put_in_txn(b, id, account, text, expires);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
}

/* Collects the ids and texts a scan calls back with. */
struct seen {
	uint64_t ids[64];
	char	texts[64][32];
	int	n;
};

static int
see(struct store_rec *rec, void *arg)
{
	struct seen *s = arg;

	ck_assert_int_lt(s->n, 64);
	s->ids[s->n] = rec->m->id;
	snprintf(s->texts[s->n], sizeof(s->texts[0]), "%.*s",
	    (int)rec->m->len, rec->m->text);
	/* The SMPP fields come back as they went in. */
	ck_assert_uint_eq(rec->m->registered_delivery, 1);
	ck_assert_uint_eq(rec->m->sender_ref, 42);
	ck_assert_str_eq(rec->m->reply_to, "alice");
	s->n++;
	return 0;
}

static struct seen
scan(struct store_backend *b, const char *account, uint64_t after)
{
	struct seen s = { .n = 0 };

	ck_assert_int_eq(store_sqlite_ops.scan(b, account, after, 64, see,
	    &s), s.n);
	return s;
}

struct counts {
	uint64_t bob, carol;
	int	accounts;
};

static int
count_backlog(const char *account, uint64_t count, uint64_t bytes,
    void *arg)
{
	struct counts *c = arg;

	ck_assert_uint_gt(bytes, 0);
	c->accounts++;
	if (strcmp(account, "bob") == 0)
		c->bob = count;
	else if (strcmp(account, "carol") == 0)
		c->carol = count;
	return 0;
}

START_TEST(test_order_marks_reopen)
{
	struct store_backend *b = open_ok(false);
	struct store_rec rec;
	struct counts c = { 0 };
	struct seen s;
	uint64_t max, n, bytes, cursor = 0;

	/* Ids out of order: the scan gives them in id order. */
	put(b, 3072, "bob", "third", 5000);
	put(b, 1024, "bob", "first", 5000);
	put(b, 2048, "carol", "for carol", 5000);
	put(b, 2049, "bob", "second", 5000);
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 3);
	ck_assert_str_eq(s.texts[0], "first");
	ck_assert_str_eq(s.texts[1], "second");
	ck_assert_str_eq(s.texts[2], "third");
	/* after: only what comes later. */
	s = scan(b, "bob", 2049);
	ck_assert_int_eq(s.n, 1);
	ck_assert_uint_eq(s.ids[0], 3072);
	/* Delivered: out of the backlog, still there to be asked about. */
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 1024, "bob", MSG_STATE_DELIVERED,
	    1500, 0, 0, true), 1);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 2);
	ck_assert_int_eq(store_sqlite_ops.get(b, 1024, &rec), 1);
	ck_assert_uint_eq(rec.state, MSG_STATE_DELIVERED);
	ck_assert_uint_eq(rec.final_date, 1500);
	free(rec.m);
	ck_assert_int_eq(store_sqlite_ops.get(b, 999, &rec), 0);
	ck_assert_int_eq(store_sqlite_ops.backlogs(b, count_backlog, &c), 0);
	ck_assert_int_eq(c.accounts, 2);
	ck_assert_uint_eq(c.bob, 2);
	ck_assert_uint_eq(c.carol, 1);
	ck_assert_uint_eq(store_sqlite_ops.oldest(b, "bob"), 1000);
	store_sqlite_ops.close(b);

	/* Reopened: all of it is still there. */
	b = open_ok(false);
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 2);
	ck_assert_str_eq(s.texts[0], "second");
	ck_assert_int_eq(store_sqlite_ops.max_id(b, &max), 0);
	ck_assert_uint_eq(max, 3072);
	/* A final state counts for its account, submitter and a row. */
	ck_assert_int_eq(store_sqlite_ops.finals(b, &n, &bytes), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(bytes, strlen("bob") + strlen("alice") +
	    STORE_FINAL_ROW);
	/* Purge: final states older than the time go, the rest stays. */
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	bytes = 0;
	ck_assert_int_eq(store_sqlite_ops.purge(b, 1400, &cursor, 100,
	    &bytes), 0);
	ck_assert_uint_eq(cursor, 0);	/* the end of the table */
	ck_assert_uint_eq(bytes, 0);
	ck_assert_int_eq(store_sqlite_ops.purge(b, 1600, &cursor, 100,
	    &bytes), 1);
	ck_assert_uint_eq(bytes, strlen("bob") + strlen("alice") +
	    STORE_FINAL_ROW);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	ck_assert_int_eq(store_sqlite_ops.get(b, 1024, &rec), 0);
	ck_assert_int_eq(store_sqlite_ops.finals(b, &n, &bytes), 0);
	ck_assert_uint_eq(n, 0);
	/* The highest id stays known though its row went. */
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 3072, "bob", MSG_STATE_DELIVERED,
	    1700, 0, 0, true), 1);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	ck_assert_int_eq(store_sqlite_ops.max_id(b, &max), 0);
	ck_assert_uint_eq(max, 3072);
	store_sqlite_ops.close(b);
}
END_TEST

START_TEST(test_expiry_and_by_dest)
{
	struct store_backend *b = open_ok(false);
	struct seen s = { .n = 0 };

	put(b, 1024, "bob", "soon", 100);
	put(b, 2048, "bob", "later", 900);
	put(b, 3072, "carol", "sooner", 50);
	ck_assert_int_eq(store_sqlite_ops.expired(b, 99, 10, see, &s), 1);
	ck_assert_uint_eq(s.ids[0], 3072);
	s.n = 0;
	/* Soonest first. */
	ck_assert_int_eq(store_sqlite_ops.expired(b, 500, 10, see, &s), 2);
	ck_assert_uint_eq(s.ids[0], 3072);
	ck_assert_uint_eq(s.ids[1], 1024);
	s.n = 0;
	ck_assert_int_eq(store_sqlite_ops.by_dest(b, "alice", "bob", 10, see,
	    &s), 2);
	s.n = 0;
	ck_assert_int_eq(store_sqlite_ops.by_dest(b, "mallory", "bob", 10,
	    see, &s), 0);
	/* Expired: no longer in the backlog nor due to expire. */
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 1024, "bob", MSG_STATE_EXPIRED,
	    100, 0, 0, true), 1);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_str_eq(s.texts[0], "later");
	s.n = 0;
	ck_assert_int_eq(store_sqlite_ops.expired(b, 500, 10, see, &s), 1);
	store_sqlite_ops.close(b);
}
END_TEST

/* The count query q gives on the file, opened beside the backend. */
static int
count_in_file(const char *q)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	int n = -1;

	ck_assert_int_eq(sqlite3_open(sc.path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(db, q, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

static void
exec_in_file(const char *q)
{
	sqlite3 *db;
	char *e = NULL;

	ck_assert_int_eq(sqlite3_open(sc.path, &db), SQLITE_OK);
	ck_assert_msg(sqlite3_exec(db, q, NULL, NULL, &e) == SQLITE_OK,
	    "%s: %s", q, e ? e : "?");
	sqlite3_close(db);
}

/* Puts a message of submitter with flags, in its own transaction. */
static void
put_from(struct store_backend *b, uint64_t id, const char *submitter,
    uint32_t flags)
{
	struct msg *m = msg_new(2);
	struct store_rec rec = { .m = m, .state = MSG_STATE_ENROUTE };

	memcpy(m->text, "hi", 2);
	m->len = 2;
	m->id = id;
	m->flags = flags;
	m->submitted = 1000;
	snprintf(m->reply_to, sizeof(m->reply_to), "%s", submitter);
	snprintf(rec.account, sizeof(rec.account), "bob");
	ck_assert_int_eq(store_sqlite_ops.begin(b, true), 0);
	ck_assert_int_eq(store_sqlite_ops.put(b, &rec), 0);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	free(m);
}

/* Which messages keep a final row: what mark is told (final_row). */
START_TEST(test_final_row_predicate)
{
	struct msg *m = msg_new(0);

	snprintf(m->reply_to, sizeof(m->reply_to), "esme");
	m->flags = MSG_F_PREFIX_FIRST;
	ck_assert(store_final_row(m));
	m->flags = MSG_F_LINE_TEXT | MSG_F_LINE_CLIENT;
	ck_assert(!store_final_row(m));
	m->flags = MSG_F_RECEIPT | MSG_F_NO_VERDICT;
	ck_assert(!store_final_row(m));
	m->flags = 0;
	m->reply_to[0] = '\0';
	ck_assert(!store_final_row(m));
	free(m);
}
END_TEST

/*
 * A final state stays only where its submitter can ask for it: an SMPP
 * or HTTP submitter's message keeps a row in fin; a line client's, a
 * receipt and one with no submitter leave none (mark says which).
 */
START_TEST(test_final_rows_only_if_asked)
{
	struct store_backend *b = open_ok(false);
	struct store_rec rec;
	uint64_t n = 0, bytes = 0;

	put_from(b, 1024, "esme", MSG_F_PREFIX_FIRST);
	put_from(b, 2048, "linec", MSG_F_LINE_TEXT | MSG_F_LINE_CLIENT);
	put_from(b, 3072, "", 0);
	put_from(b, 4096, "esme", MSG_F_RECEIPT | MSG_F_NO_VERDICT);
	put_from(b, 5120, "esme", MSG_F_PREFIX_FIRST);
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 1024, "bob", MSG_STATE_DELIVERED,
	    1500, 0, 0, true), 1);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 2048, "bob", MSG_STATE_DELIVERED,
	    1500, 0, 0, true), 0);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 3072, "bob", MSG_STATE_EXPIRED,
	    1500, 0, 0, true), 0);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 4096, "bob", MSG_STATE_DELIVERED,
	    1500, 0, 0, true), 0);
	/* Told it keeps none (a line client's, say): none, looked for or not. */
	ck_assert_int_eq(store_sqlite_ops.mark(b, 5120, "bob", MSG_STATE_DELIVERED,
	    1500, 0, 0, false), 0);
	/* Twice, or a row that is not there: nothing kept. */
	ck_assert_int_eq(store_sqlite_ops.mark(b, 1024, "bob", MSG_STATE_DELIVERED,
	    1600, 0, 0, true), 0);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	ck_assert_int_eq(store_sqlite_ops.get(b, 1024, &rec), 1);
	ck_assert_uint_eq(rec.state, MSG_STATE_DELIVERED);
	ck_assert_uint_eq(rec.final_date, 1500);
	ck_assert_str_eq(rec.m->reply_to, "esme");
	ck_assert_str_eq(rec.account, "bob");
	free(rec.m);
	for (uint64_t id = 2048; id <= 5120; id += 1024)
		ck_assert_int_eq(store_sqlite_ops.get(b, id, &rec), 0);
	ck_assert_int_eq(store_sqlite_ops.finals(b, &n, &bytes), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(bytes, strlen("bob") + strlen("esme") +
	    STORE_FINAL_ROW);
	store_sqlite_ops.close(b);
	/*
	 * In the file: one final row, no message left (the rows that waited
	 * in done for a sweep went at close), and a view of it.
	 */
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM fin"), 1);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM msg"), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM done"), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM finals WHERE"
	    " id = 1024 AND account = 'bob' AND submitter = 'esme'"), 1);
}
END_TEST

/*
 * A name first used in a transaction that rolled back is not in the
 * file: used again, it is written again, not taken from memory.
 */
START_TEST(test_names_rollback)
{
	struct store_backend *b = open_ok(false);
	struct msg *m = msg_new(1);
	struct store_rec rec = { .m = m, .state = MSG_STATE_ENROUTE };
	struct seen s;

	m->id = 1024;
	m->len = 1;
	m->text[0] = 'x';
	m->registered_delivery = 1;
	m->sender_ref = 42;
	snprintf(m->reply_to, sizeof(m->reply_to), "alice");
	snprintf(rec.account, sizeof(rec.account), "dave");
	ck_assert_int_eq(store_sqlite_ops.begin(b, true), 0);
	ck_assert_int_eq(store_sqlite_ops.put(b, &rec), 0);
	store_sqlite_ops.rollback(b);
	m->id = 2048;
	ck_assert_int_eq(store_sqlite_ops.begin(b, true), 0);
	ck_assert_int_eq(store_sqlite_ops.put(b, &rec), 0);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	free(m);
	store_sqlite_ops.close(b);
	b = open_ok(false);
	s = scan(b, "dave", 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_uint_eq(s.ids[0], 2048);
	store_sqlite_ops.close(b);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM messages WHERE"
	    " account = 'dave' AND submitter = 'alice'"), 1);
}
END_TEST

/*
 * Schema 1, as the store made it before names had keys: its CREATE
 * statements as they were (src/store_sqlite.c, schema and fin_schema),
 * here as text so that the test keeps them when the code moves on.
 */
static const char schema1[] =
    "PRAGMA application_id = 1163019347;"	/* "ERDS" */
    "PRAGMA user_version = 1;"
    "CREATE TABLE msg ("
    " id INTEGER PRIMARY KEY,"
    " account TEXT NOT NULL,"
    " submitter TEXT NOT NULL,"
    " src TEXT NOT NULL,"
    " dst TEXT NOT NULL,"
    " state INTEGER NOT NULL,"
    " submitted INTEGER NOT NULL,"
    " due INTEGER NOT NULL,"
    " expires INTEGER NOT NULL,"
    " final_date INTEGER NOT NULL,"
    " attempts INTEGER NOT NULL,"
    " flags INTEGER NOT NULL,"
    " text BLOB NOT NULL,"
    " smpp BLOB NOT NULL"
    ");"
    "CREATE INDEX msg_backlog ON msg(account, id) WHERE state = 1;"
    "CREATE INDEX msg_expiry ON msg(expires) WHERE state = 1;";
static const char schema1_fin[] =
    "CREATE TABLE fin ("
    " id INTEGER PRIMARY KEY,"
    " account TEXT NOT NULL,"
    " submitter TEXT NOT NULL,"
    " state INTEGER NOT NULL,"
    " final_date INTEGER NOT NULL"
    ");";

/*
 * Makes a schema 1 file: with_fin, as the last version made them (final
 * states in fin), else as the one before (final states in msg). Messages
 * 1024..5120 wait (bob: 1024, 3072, 5120, 4096 of alice, the rest of
 * esme; carol: 2048); 512 was delivered at 77 (esme's, to bob).
 */
static void
make_schema1(bool with_fin)
{
	char q[4096], smpp[2 * 89 + 1];

	/* Pages of 4 KiB, as every file before schema 4's daemons had. */
	exec_in_file("PRAGMA page_size = 4096");
	exec_in_file(schema1);
	if (with_fin)
		exec_in_file(schema1_fin);
	/* SMPP blob version 2: TON/NPI 1/1 0/0, registered_delivery 1. */
	snprintf(smpp, sizeof(smpp), "02010100000000%s", "01");
	while (strlen(smpp) < 2 * 89)
		strcat(smpp, "00");
	snprintf(q, sizeof(q),
	    "INSERT INTO msg VALUES (5120, 'bob', 'esme', 'src5', 'bob', 1,"
	    " 1005, 0, 9005, 0, 2, 1, 'fifth', X'%s');"
	    "INSERT INTO msg VALUES (1024, 'bob', 'esme', 'src1', 'bob', 1,"
	    " 1001, 0, 9001, 0, 0, 1, 'first', X'%s');"
	    "INSERT INTO msg VALUES (2048, 'carol', 'esme', 'src2', 'carol',"
	    " 1, 1002, 0, 9002, 0, 0, 0, 'for carol', X'');"
	    "INSERT INTO msg VALUES (3072, 'bob', 'esme', 'src3', 'bob', 1,"
	    " 1003, 1500, 9003, 0, 1, 0, 'second', X'');"
	    "INSERT INTO msg VALUES (4096, 'bob', 'alice', 'src4', 'bob', 1,"
	    " 1004, 0, 9004, 0, 0, 64, 'third', X'');",
	    smpp, smpp);
	exec_in_file(q);
	exec_in_file(with_fin ? "INSERT INTO fin VALUES (512, 'bob', 'esme',"
	    " 2, 77);" : "INSERT INTO msg VALUES (512, 'bob', 'esme', 'src0',"
	    " 'bob', 2, 1000, 0, 9000, 77, 0, 0, '', X'');");
}

static int
see_any(struct store_rec *rec, void *arg)
{
	struct store_rec *out = arg;
	size_t i = 0;

	while (out[i].m != NULL)
		i++;
	ck_assert_uint_lt(i, 7);
	out[i] = *rec;
	rec->m = NULL;
	return 0;
}

/* A schema 1 file opened: every message as it was, in order. */
static void
check_migrated(void)
{
	static const uint64_t ids[] = { 1024, 3072, 4096, 5120 };
	static const char *const texts[] = { "first", "second", "third",
	    "fifth" };
	struct store_rec got[8], rec;
	struct store_backend *b;
	char src[16];
	uint64_t n = 0, bytes = 0, max = 0;

	/* -t: said to be migrated, not migrated. */
	b = open_ok(true);
	store_sqlite_ops.close(b);
	ck_assert_int_eq(count_in_file("PRAGMA user_version"), 1);
	b = open_ok(false);
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(store_sqlite_ops.scan(b, "bob", 0, 10, see_any, got),
	    4);
	for (int i = 0; i < 4; i++) {
		ck_assert_uint_eq(got[i].m->id, ids[i]);
		ck_assert_str_eq(got[i].account, "bob");
		ck_assert_uint_eq(got[i].m->len, strlen(texts[i]));
		ck_assert_mem_eq(got[i].m->text, texts[i], strlen(texts[i]));
		ck_assert_str_eq(got[i].m->reply_to, i == 2 ? "alice" : "esme");
		ck_assert_uint_eq(got[i].m->submitted, 1000 + ids[i] / 1024);
		snprintf(src, sizeof(src), "src%u", (unsigned)(ids[i] / 1024));
		ck_assert_str_eq(got[i].m->from, src);
		ck_assert_uint_eq(got[i].expires, 9000 + ids[i] / 1024);
		ck_assert_uint_eq(got[i].state, MSG_STATE_ENROUTE);
		free(got[i].m);
	}
	ck_assert_uint_eq(got[1].due, 1500);
	ck_assert_uint_eq(got[1].attempts, 1);
	ck_assert_uint_eq(got[3].attempts, 2);
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(store_sqlite_ops.scan(b, "carol", 0, 10, see_any,
	    got), 1);
	ck_assert_uint_eq(got[0].m->id, 2048);
	ck_assert_str_eq(got[0].m->from, "src2");
	ck_assert_str_eq(got[0].m->to, "carol");
	free(got[0].m);
	/* The SMPP fields and flags came through. */
	ck_assert_int_eq(store_sqlite_ops.get(b, 5120, &rec), 1);
	ck_assert_uint_eq(rec.m->src_ton, 1);
	ck_assert_uint_eq(rec.m->src_npi, 1);
	ck_assert_uint_eq(rec.m->registered_delivery, 1);
	ck_assert_uint_eq(rec.m->flags, MSG_F_PREFIX_FIRST);
	ck_assert_str_eq(rec.m->from, "src5");
	free(rec.m);
	/* The final state survives, still answered for. */
	ck_assert_int_eq(store_sqlite_ops.get(b, 512, &rec), 1);
	ck_assert_uint_eq(rec.state, MSG_STATE_DELIVERED);
	ck_assert_uint_eq(rec.final_date, 77);
	ck_assert_str_eq(rec.m->reply_to, "esme");
	ck_assert_str_eq(rec.account, "bob");
	free(rec.m);
	ck_assert_int_eq(store_sqlite_ops.finals(b, &n, &bytes), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(store_sqlite_ops.max_id(b, &max), 0);
	ck_assert_uint_eq(max, 5120);
	/* by_dest and cancel find them by the submitter's name. */
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(store_sqlite_ops.by_dest(b, "esme", "bob", 10,
	    see_any, got), 3);
	for (int i = 0; i < 3; i++)
		free(got[i].m);
	store_sqlite_ops.close(b);
	ck_assert_int_eq(count_in_file("PRAGMA user_version"), 4);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM sqlite_master"
	    " WHERE name IN ('msg1', 'fin1', 'msg_backlog')"), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM messages WHERE"
	    " account = 'bob' AND submitter = 'esme'"), 3);
	/* Opened again: nothing more to do, the same messages. */
	b = open_ok(false);
	memset(got, 0, sizeof(got));
	ck_assert_int_eq(store_sqlite_ops.scan(b, "bob", 0, 10, see_any, got),
	    4);
	for (int i = 0; i < 4; i++)
		free(got[i].m);
	store_sqlite_ops.close(b);
}

START_TEST(test_migrate_schema1)
{
	make_schema1(true);
	check_migrated();
	/* A file made before keeps the page size it was made with. */
	ck_assert_int_eq(count_in_file("PRAGMA page_size"), 4096);
}
END_TEST

/*
 * A new file has 16 KiB pages (fewer WAL frames a group); a file of 4 KiB
 * pages (test_migrate_schema1) is kept as it is.
 */
START_TEST(test_page_size_of_a_new_file)
{
	struct store_backend *b = open_ok(false);

	put(b, 1024, "bob", "first", 5000);
	store_sqlite_ops.close(b);
	ck_assert_int_eq(count_in_file("PRAGMA page_size"), 16384);
	b = open_ok(false);
	ck_assert_int_eq(scan(b, "bob", 0).n, 1);
	store_sqlite_ops.close(b);
	ck_assert_int_eq(count_in_file("PRAGMA page_size"), 16384);
}
END_TEST

/* Older still: no fin, final rows in msg. */
START_TEST(test_migrate_schema1_no_fin)
{
	make_schema1(false);
	check_migrated();
}
END_TEST

/* A schema newer than the code: refused, the file left alone. */
START_TEST(test_newer_schema_refused)
{
	struct store_backend *b = open_ok(false);

	store_sqlite_ops.close(b);
	exec_in_file("PRAGMA user_version = 5");
	open_refused("newer than this echorouterd knows");
	ck_assert_int_eq(count_in_file("PRAGMA user_version"), 5);
}
END_TEST

/*
 * Schema 2 kept each account's waiting messages in an index of the file;
 * schema 3 keeps them in memory. A schema 2 file opened: its index
 * dropped, its messages found as before.
 */
START_TEST(test_migrate_schema2)
{
	struct store_backend *b = open_ok(false);
	struct seen s;

	put(b, 3072, "bob", "third", 5000);
	put(b, 1024, "bob", "first", 5000);
	put(b, 2048, "carol", "for carol", 5000);
	store_sqlite_ops.close(b);
	exec_in_file("DROP VIEW messages; DROP TABLE done;"
	    " CREATE VIEW messages AS SELECT * FROM msg;"
	    " CREATE INDEX msg_backlog ON msg(account, id)"
	    " WHERE state = 1; PRAGMA user_version = 2;");
	/* -t: said to be migrated, not migrated. */
	b = open_ok(true);
	store_sqlite_ops.close(b);
	ck_assert_int_eq(count_in_file("PRAGMA user_version"), 2);
	b = open_ok(false);
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 2);
	ck_assert_str_eq(s.texts[0], "first");
	ck_assert_str_eq(s.texts[1], "third");
	s = scan(b, "carol", 0);
	ck_assert_int_eq(s.n, 1);
	store_sqlite_ops.close(b);
	ck_assert_int_eq(count_in_file("PRAGMA user_version"), 4);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM sqlite_master"
	    " WHERE name = 'msg_backlog'"), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM messages"), 3);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM done"), 0);
}
END_TEST

/*
 * Messages that left stay rows of msg until a sweep, hidden by their
 * accounts' marks (delivered in order, as here; out of order their ids go
 * into done, test_marks_out_of_order): once a group leaves 65,536 to
 * sweep (a store of 128 MiB), at the next poll, not in the group, the
 * oldest 16,384 or twice what the groups since the last sweep added; the
 * rest once the store is idle. Meanwhile nothing finds them, and an id of
 * theirs stored again takes its old row's place.
 */
START_TEST(test_sweep_of_done)
{
	struct store_backend *b;
	struct store_rec rec;
	const uint64_t n = 70000;

	sc.max_bytes = (uint64_t)1 << 27;	/* 128 MiB: sweeps at 65,536 */
	b = open_ok(false);

	ck_assert_int_eq(store_sqlite_ops.begin(b, true), 0);
	for (uint64_t id = 1; id <= n; id++)
		put_in_txn(b, id, id % 2 ? "bob" : "carol", "x", 5000);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	for (uint64_t id = 1; id <= n; id++) {
		/* Groups of 60,000 and 10,000. */
		if (id == 1 || id == 60001)
			ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
		ck_assert_int_eq(store_sqlite_ops.mark(b, id, id % 2 ? "bob" :
		    "carol", MSG_STATE_DELIVERED, 1500, 0, 0, false), 0);
		if (id == 60000) {
			ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
			ck_assert_int_eq(count_in_file("SELECT count(*) FROM"
			    " messages"), 10000);
			/* Up to the first waiting: bob 60,000, carol 60,001. */
			ck_assert_int_eq(count_in_file("SELECT sum(id) FROM"
			    " upto"), 60000 + 60001);
		}
	}
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	/* A mark for each account, nothing in done. */
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM done"), 0);
	ck_assert_int_eq(count_in_file("SELECT sum(id) FROM upto"), 2 * n - 1);
	/* Answered first: the sweep waits for the poll after. */
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM msg"), 70000);
	ck_assert_int_eq(store_sqlite_ops.poll(b), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM msg"), 50000);
	/* The sweep committed unsynced; the next group commits synced. */
	ck_assert_int_eq(store_sqlite_synchronous(b), 1);
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	ck_assert_int_eq(store_sqlite_synchronous(b), 2);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	ck_assert_int_eq(store_sqlite_synchronous(b), 2);
	ck_assert_int_eq(store_sqlite_ops.poll(b), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM msg"), 50000);
	ck_assert_int_eq(count_in_file("SELECT min(id) FROM msg"), 20001);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM messages"), 0);
	ck_assert_int_eq(scan(b, "bob", 0).n, 0);
	ck_assert_int_eq(store_sqlite_ops.get(b, n, &rec), 0);
	/*
	 * Idle: 16,384 a second. A transaction that changed nothing (the
	 * receipts' purge, each second) is no write: the store is idle still.
	 */
	sleep(3);
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	sleep(3);
	ck_assert_int_eq(store_sqlite_ops.poll(b), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM msg"),
	    50000 - 16384);
	/*
	 * Stored again under an id carol's mark hides: its old row goes, the
	 * new one waits (in below), and the mark stays.
	 */
	put(b, n, "carol", "again", 5000);
	ck_assert_int_eq(scan(b, "carol", 0).n, 1);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM msg"),
	    50000 - 16384);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM messages"), 1);
	ck_assert_int_eq(count_in_file("SELECT id FROM below"), n);
	ck_assert_int_eq(count_in_file("SELECT sum(id) FROM upto"), 2 * n - 1);
	/* Closed: the rest go. */
	store_sqlite_ops.close(b);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM done"), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM msg"), 1);
	/* A small store (512 KiB) sweeps at 256: a group of 300 is swept. */
	sc.max_bytes = (uint64_t)1 << 19;
	b = open_ok(false);
	ck_assert_int_eq(store_sqlite_ops.begin(b, true), 0);
	for (uint64_t id = n + 1; id <= n + 300; id++)
		put_in_txn(b, id, "bob", "x", 5000);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	for (uint64_t id = n + 1; id <= n + 300; id++)
		ck_assert_int_eq(store_sqlite_ops.mark(b, id, "bob",
		    MSG_STATE_DELIVERED, 1500, 0, 0, false), 0);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	ck_assert_int_eq(store_sqlite_ops.poll(b), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM done"), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM msg"), 1);
	store_sqlite_ops.close(b);
}
END_TEST

/*
 * Killed with rows in done (marked, not swept): opened again, none of
 * them is a message to any query; closed, they are gone.
 */
START_TEST(test_reopen_with_done)
{
	struct store_backend *b = open_ok(false);
	struct counts c = { 0 };
	struct seen s = { .n = 0 };
	struct store_rec rec;

	put(b, 1024, "bob", "first", 100);
	put(b, 2048, "bob", "second", 200);
	put(b, 3072, "carol", "for carol", 50);
	store_sqlite_ops.close(b);
	/* 9999: an id in done with no row (a mark repeated after a sweep). */
	exec_in_file("INSERT INTO done VALUES (1024), (3072), (9999)");
	b = open_ok(false);
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_uint_eq(s.ids[0], 2048);
	ck_assert_int_eq(scan(b, "carol", 0).n, 0);
	ck_assert_int_eq(store_sqlite_ops.backlogs(b, count_backlog, &c), 0);
	ck_assert_int_eq(c.accounts, 1);
	ck_assert_uint_eq(c.bob, 1);
	s.n = 0;
	ck_assert_int_eq(store_sqlite_ops.expired(b, 1000, 10, see, &s), 1);
	ck_assert_uint_eq(s.ids[0], 2048);
	s.n = 0;
	ck_assert_int_eq(store_sqlite_ops.by_dest(b, "alice", "bob", 10, see,
	    &s), 1);
	ck_assert_int_eq(store_sqlite_ops.get(b, 1024, &rec), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM messages"), 1);
	/* Stored under that id after all: not hidden by it. */
	put(b, 9999, "bob", "late", 5000);
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 2);
	ck_assert_uint_eq(s.ids[1], 9999);
	/* Marked twice: once in done. Its row there, then gone at close. */
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 1024, "bob",
	    MSG_STATE_DELIVERED, 1500, 0, 0, false), 0);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	store_sqlite_ops.close(b);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM done"), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM msg"), 2);
}
END_TEST

/*
 * A message that leaves while one of its account's before it waits goes
 * into done; the mark moves once those before it left, over it too. In
 * the group, before its commit, what left is found by no statement.
 */
START_TEST(test_marks_out_of_order)
{
	struct store_backend *b = open_ok(false);
	struct store_rec rec;
	struct seen s;

	for (uint64_t id = 1; id <= 6; id++)
		put(b, id, "bob", "m", 5000);
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 2, "bob",
	    MSG_STATE_DELIVERED, 1500, 0, 0, false), 0);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 3, "bob",
	    MSG_STATE_DELIVERED, 1500, 0, 0, false), 0);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 1, "bob",
	    MSG_STATE_DELIVERED, 1500, 0, 0, false), 0);
	/* Before the commit: gone for a get, a search by destination. */
	ck_assert_int_eq(store_sqlite_ops.get(b, 1, &rec), 0);
	s.n = 0;
	ck_assert_int_eq(store_sqlite_ops.by_dest(b, "alice", "bob", 10, see,
	    &s), 3);
	ck_assert_uint_eq(s.ids[0], 4);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM done"), 2);
	ck_assert_int_eq(count_in_file("SELECT id FROM upto"), 3);
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 3);
	ck_assert_uint_eq(s.ids[0], 4);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM messages"), 3);
	/* Twice: nothing more. */
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 1, "bob",
	    MSG_STATE_DELIVERED, 1500, 0, 0, true), 0);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM done"), 2);
	/* The last: the mark is its id. */
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	for (uint64_t id = 4; id <= 6; id++)
		ck_assert_int_eq(store_sqlite_ops.mark(b, id, "bob",
		    MSG_STATE_DELIVERED, 1500, 0, 0, false), 0);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	ck_assert_int_eq(count_in_file("SELECT id FROM upto"), 6);
	ck_assert_int_eq(scan(b, "bob", 0).n, 0);
	store_sqlite_ops.close(b);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM msg"), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM done"), 0);
}
END_TEST

/*
 * Ids from different reactors come out of order: one stored under its
 * account's mark (all before it delivered) waits in below, across a
 * restart, and leaves under the mark. A group that put one and rolled
 * back leaves nothing behind: delivered messages stay delivered.
 */
START_TEST(test_stored_under_the_mark)
{
	struct store_backend *b = open_ok(false);
	struct seen s;

	put(b, 10, "bob", "a", 5000);
	put(b, 20, "bob", "b", 5000);
	put(b, 30, "bob", "c", 5000);
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	for (uint64_t id = 10; id <= 30; id += 10)
		ck_assert_int_eq(store_sqlite_ops.mark(b, id, "bob",
		    MSG_STATE_DELIVERED, 1500, 0, 0, false), 0);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	ck_assert_int_eq(count_in_file("SELECT id FROM upto"), 30);
	/* Put and rolled back, then another: only that one waits. */
	ck_assert_int_eq(store_sqlite_ops.begin(b, true), 0);
	put_in_txn(b, 25, "bob", "d", 5000);
	store_sqlite_ops.rollback(b);
	put(b, 15, "bob", "e", 5000);
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_uint_eq(s.ids[0], 15);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM messages"), 1);
	ck_assert_int_eq(count_in_file("SELECT id FROM below"), 15);
	ck_assert_int_eq(count_in_file("SELECT id FROM upto"), 30);
	store_sqlite_ops.close(b);
	/* Killed before a sweep: the rows the mark hides are swept, not 15. */
	exec_in_file("INSERT INTO msg SELECT 20, account, submitter, src, dst,"
	    " state, submitted, due, expires, final_date, attempts, flags, text,"
	    " smpp FROM msg WHERE id = 15");
	b = open_ok(false);
	ck_assert_int_eq(store_sqlite_ops.poll(b), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM msg"), 1);
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_uint_eq(s.ids[0], 15);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM messages"), 1);
	/* It leaves under the mark: out of below, the mark as it was. */
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 15, "bob",
	    MSG_STATE_DELIVERED, 1500, 0, 0, false), 0);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM below"), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM messages"), 0);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM done"), 0);
	ck_assert_int_eq(scan(b, "bob", 0).n, 0);
	store_sqlite_ops.close(b);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM msg"), 0);
}
END_TEST

/*
 * A write of a mark that fails (a statement refused, the group open
 * still): the message waits as before, and the mark tried again in the
 * same group writes it (its final row too, once).
 */
START_TEST(test_mark_failed_then_again)
{
	struct store_backend *b = open_ok(false);
	struct seen s;

	for (uint64_t id = 1; id <= 3; id++)
		put(b, id, "bob", "m", 5000);
	ck_assert_int_eq(store_sqlite_exec(b, "CREATE TEMP TRIGGER no_done"
	    " BEFORE INSERT ON done BEGIN SELECT RAISE(ABORT, 'no'); END"), 0);
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	/* 2 before 1: for done, which refuses. */
	ck_assert_int_eq(store_sqlite_ops.mark(b, 2, "bob",
	    MSG_STATE_DELIVERED, 1500, 0, 0, true), -1);
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 3);
	ck_assert_int_eq(store_sqlite_exec(b, "DROP TRIGGER no_done"), 0);
	/* Its final row, written by the first try, written again. */
	ck_assert_int_eq(store_sqlite_ops.mark(b, 2, "bob",
	    MSG_STATE_DELIVERED, 1500, 0, 0, true), 1);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	ck_assert_int_eq(count_in_file("SELECT id FROM done"), 2);
	ck_assert_int_eq(count_in_file("SELECT id FROM fin"), 2);
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 2);
	ck_assert_uint_eq(s.ids[1], 3);
	store_sqlite_ops.close(b);
}
END_TEST

/*
 * A group SQLite ended itself (a failed write): its marks are not written
 * outside it, its commit fails, and what it took out waits again.
 */
START_TEST(test_marks_of_a_group_sqlite_ended)
{
	struct store_backend *b = open_ok(false);
	struct seen s;

	for (uint64_t id = 1; id <= 3; id++)
		put(b, id, "bob", "m", 5000);
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 1, "bob",
	    MSG_STATE_DELIVERED, 1500, 0, 0, false), 0);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 2, "bob",
	    MSG_STATE_DELIVERED, 1500, 0, 0, false), 0);
	ck_assert_int_eq(store_sqlite_exec(b, "ROLLBACK"), 0);
	ck_assert_int_eq(store_sqlite_ops.commit(b), -1);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM upto"), 0);
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 3);
	ck_assert_uint_eq(s.ids[0], 1);
	store_sqlite_ops.close(b);
	b = open_ok(false);
	ck_assert_int_eq(scan(b, "bob", 0).n, 3);
	store_sqlite_ops.close(b);
}
END_TEST

/*
 * Killed with rows a mark hides (not swept): opened again, none of them is
 * a message; the next id is above the mark even with no row left; closed,
 * they are gone. A group rolled back takes its marks back.
 */
START_TEST(test_reopen_with_marks)
{
	struct store_backend *b = open_ok(false);
	struct seen s;
	uint64_t max = 0;

	put(b, 1024, "bob", "first", 5000);
	put(b, 2048, "bob", "second", 5000);
	put(b, 3072, "carol", "for carol", 5000);
	store_sqlite_ops.close(b);
	exec_in_file("INSERT INTO upto SELECT id, 1024 FROM name"
	    " WHERE name = 'bob'; INSERT INTO upto VALUES (999, 9000)");
	b = open_ok(false);
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_uint_eq(s.ids[0], 2048);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM messages"), 2);
	ck_assert_int_eq(store_sqlite_ops.max_id(b, &max), 0);
	ck_assert_uint_eq(max, 9000);
	/* Rolled back: 2048 waits again, the mark as it was. */
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 2048, "bob",
	    MSG_STATE_DELIVERED, 1500, 0, 0, false), 0);
	ck_assert_int_eq(scan(b, "bob", 0).n, 0);
	store_sqlite_ops.rollback(b);
	ck_assert_int_eq(scan(b, "bob", 0).n, 1);
	/* A group after it writes the mark as it was, not as rolled back. */
	put(b, 4096, "carol", "x", 5000);
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 4096, "carol",
	    MSG_STATE_DELIVERED, 1500, 0, 0, false), 0);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	ck_assert_int_eq(count_in_file("SELECT u.id FROM upto u JOIN name n"
	    " ON n.id = u.account WHERE n.name = 'bob'"), 1024);
	store_sqlite_ops.close(b);
	ck_assert_int_eq(count_in_file("SELECT count(*) FROM msg"), 2);
	ck_assert_int_eq(count_in_file("SELECT min(id) FROM msg"), 2048);
}
END_TEST

/*
 * What a transaction that does not commit put or took away is not found
 * by a scan: the waiting ids in memory follow the file.
 */
START_TEST(test_rollback_undoes_waiting)
{
	struct store_backend *b = open_ok(false);
	struct seen s;

	put(b, 1024, "bob", "kept", 5000);
	ck_assert_int_eq(store_sqlite_ops.begin(b, true), 0);
	put_in_txn(b, 2048, "bob", "lost", 5000);
	put_in_txn(b, 3072, "newcomer", "lost", 5000);
	ck_assert_int_eq(store_sqlite_ops.mark(b, 1024, "bob",
	    MSG_STATE_DELIVERED, 1500, 0, 0, true), 1);
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 1);	/* inside it: as it left them */
	ck_assert_uint_eq(s.ids[0], 2048);
	store_sqlite_ops.rollback(b);
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_uint_eq(s.ids[0], 1024);
	s = scan(b, "newcomer", 0);
	ck_assert_int_eq(s.n, 0);
	/* Another name takes the newcomer's place: none of its messages. */
	put(b, 4096, "dora", "hers", 5000);
	s = scan(b, "dora", 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_uint_eq(s.ids[0], 4096);
	store_sqlite_ops.close(b);
}
END_TEST

/* A row deleted or moved by hand (sqlite3 on the file) is passed over. */
START_TEST(test_row_deleted_by_hand)
{
	struct store_backend *b = open_ok(false);
	struct seen s;

	put(b, 1024, "bob", "first", 5000);
	put(b, 2048, "bob", "second", 5000);
	put(b, 3072, "bob", "third", 5000);
	exec_in_file("DELETE FROM msg WHERE id IN (1024, 3072)");
	s = scan(b, "bob", 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_uint_eq(s.ids[0], 2048);
	ck_assert_uint_eq(store_sqlite_ops.oldest(b, "bob"), 1000);
	/* Given to another account by hand: not bob's to be given. */
	put(b, 4096, "carol", "carol's", 5000);
	exec_in_file("UPDATE msg SET account = (SELECT account FROM msg"
	    " WHERE id = 4096) WHERE id = 2048");
	ck_assert_int_eq(scan(b, "bob", 0).n, 0);
	store_sqlite_ops.close(b);
	/* Reopened: where the file says. */
	b = open_ok(false);
	ck_assert_int_eq(scan(b, "bob", 0).n, 0);
	s = scan(b, "carol", 0);
	ck_assert_int_eq(s.n, 2);
	ck_assert_uint_eq(s.ids[0], 2048);
	store_sqlite_ops.close(b);
}
END_TEST

/* The file or its WAL deleted or replaced: check says so. */
START_TEST(test_check_sees_files_go)
{
	struct store_backend *b = open_ok(false);
	char wal[PATH_MAX + 8];
	struct stat st;

	/* The space kept for marks on a full disk: 4 MiB, held. */
	snprintf(wal, sizeof(wal), "%s-reserve", sc.path);
	ck_assert_int_eq(stat(wal, &st), 0);
	ck_assert_int_eq(st.st_size, 4 << 20);
	ck_assert(!store_sqlite_ops.full(b));
	snprintf(wal, sizeof(wal), "%s-wal", sc.path);
	ck_assert_int_eq(stat(wal, &st), 0);	/* made at open */
	ck_assert_int_eq(store_sqlite_ops.check(b), 0);
	/* Replaced: another file under the same name. */
	ck_assert_int_eq(unlink(wal), 0);
	close(open(wal, O_CREAT | O_WRONLY, 0600));
	ck_assert_int_eq(store_sqlite_ops.check(b), -1);
	store_sqlite_ops.close(b);
	/* And the file itself removed. */
	ck_assert_int_eq(unlink(sc.path), 0);
	unlink(wal);
	b = open_ok(false);
	ck_assert_int_eq(store_sqlite_ops.check(b), 0);
	ck_assert_int_eq(unlink(sc.path), 0);
	ck_assert_int_eq(store_sqlite_ops.check(b), -1);
	store_sqlite_ops.close(b);
}
END_TEST

START_TEST(test_rollback)
{
	struct store_backend *b = open_ok(false);
	struct msg *m = msg_new(1);
	struct store_rec rec = { .m = m, .state = MSG_STATE_ENROUTE };

	m->id = 7168;
	m->len = 1;
	m->text[0] = 'x';
	snprintf(rec.account, sizeof(rec.account), "bob");
	ck_assert_int_eq(store_sqlite_ops.begin(b, true), 0);
	ck_assert(store_sqlite_ops.in_txn(b));
	ck_assert_int_eq(store_sqlite_ops.put(b, &rec), 0);
	/* The same id twice: refused, the transaction still open. */
	ck_assert_int_lt(store_sqlite_ops.put(b, &rec), 0);
	store_sqlite_ops.rollback(b);
	ck_assert(!store_sqlite_ops.in_txn(b));
	ck_assert_int_eq(scan(b, "bob", 0).n, 0);
	free(m);
	store_sqlite_ops.close(b);
}
END_TEST

START_TEST(test_not_a_store)
{
	char cmd[PATH_MAX + 64], junk[8192];
	int fd;

	/* Random bytes. */
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 131 + 7);
	fd = open(sc.path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	open_refused("not a store");
	/* Another SQLite database. */
	unlink(sc.path);
	snprintf(cmd, sizeof(cmd), "sqlite3 '%s' 'CREATE TABLE x (y)'",
	    sc.path);
	if (system(cmd) == 0)
		open_refused("not an echorouterd store");
	/* Damaged pages: found by the integrity check. */
	unlink(sc.path);
	{
		struct store_backend *b = open_ok(false);
		char text[200];

		memset(text, 'y', sizeof(text) - 1);
		text[sizeof(text) - 1] = '\0';
		for (uint64_t i = 1; i <= 300; i++)
			put(b, i << 10, "bob", text, 5000);
		store_sqlite_ops.close(b);
	}
	fd = open(sc.path, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, junk, 4096, 3 * 4096), 4096);
	close(fd);
	open_refused(sc.path);
	/* -t on a missing file in a writable directory: fine, nothing made. */
	unlink(sc.path);
	store_sqlite_ops.close(open_ok(true));
	ck_assert_int_ne(access(sc.path, F_OK), 0);
	/* ... and in a directory that is not there: refused. */
	snprintf(sc.path, sizeof(sc.path), "%s/none/store.db", dir);
	{
		char *err = NULL;

		ck_assert_ptr_null(store_sqlite_ops.open(with_sc(), sc.path, true,
		    &err));
		ck_assert_ptr_nonnull(strstr(err, "cannot be made"));
		free(err);
	}
}
END_TEST

/* store_check opens the backend the configuration names, by name. */
START_TEST(test_check_opens_by_name)
{
	char text[512];
	char *err = NULL;
	struct config *cf;

	snprintf(text, sizeof(text), "listeners = ( { name = \"r\"; "
	    "address = \"127.0.0.1\"; port = 0; protocol = \"router\"; } );\n"
	    "store = { path = \"%s/by-name.db\"; backend = \"sqlite\"; };\n",
	    dir);
	cf = unit_config(text);
	ck_assert_msg(store_check(cf, &err) == 0, "check: %s",
	    err != NULL ? err : "?");
	/* -t makes nothing. */
	snprintf(text, sizeof(text), "%s/by-name.db", dir);
	ck_assert_int_ne(access(text, F_OK), 0);
	config_unref(cf);
}
END_TEST

#endif

/*
 * The table of backends: each by its configuration name, with the build
 * option it needs, its operations only when built in; other names none.
 */
/*
 * An account's shard is a pure function of its id and the count: files
 * written by one build are read by the next. A change here moves every
 * message at the first start after an upgrade (and is a bug).
 */
START_TEST(test_shard_of_is_stable)
{
	ck_assert_uint_eq(store_shard_of("alice", 2), 0);
	ck_assert_uint_eq(store_shard_of("alice", 8), 6);
	ck_assert_uint_eq(store_shard_of("bob", 4), 2);
	ck_assert_uint_eq(store_shard_of("upstream:smsc1", 8), 4);
	ck_assert_uint_eq(store_shard_of("+351910000501", 4), 3);
	ck_assert_uint_eq(store_shard_of("+351910000502", 4), 2);
	for (unsigned n = 1; n <= 32; n++)
		ck_assert_uint_lt(store_shard_of("anyone", n), n);
	ck_assert_uint_eq(store_shard_of("", 1), 0);
}
END_TEST

START_TEST(test_backends_by_name)
{
	const struct store_backend_info *bi;

	bi = store_backend_find("sqlite");
	ck_assert_ptr_nonnull(bi);
	ck_assert_str_eq(bi->name, "sqlite");
	ck_assert_str_eq(bi->option, "WITH_SQLITE");
#if ER_WITH_SQLITE
	ck_assert_ptr_eq(bi->ops, &store_sqlite_ops);
#else
	ck_assert_ptr_null(bi->ops);
#endif
	bi = store_backend_find("jetstream");
	ck_assert_ptr_nonnull(bi);
	ck_assert_str_eq(bi->option, "WITH_NATS");
#if ER_WITH_NATS
	ck_assert_ptr_eq(bi->ops, &store_js_ops);
#else
	ck_assert_ptr_null(bi->ops);
#endif
	ck_assert_ptr_null(store_backend_find("SQLite"));
	ck_assert_ptr_null(store_backend_find(""));
	ck_assert_ptr_null(store_backend_find("files"));
}
END_TEST

#if ER_WITH_SQLITE
/*
 * Puts a message for bob with these flags and data_coding; smpp gives it
 * the destination an SMPP client submits to (a line client's has none).
 */
static void
put_coded(struct store_backend *b, uint64_t id, uint32_t flags, uint8_t dc,
    bool smpp)
{
	struct msg *m = msg_new(4);
	struct store_rec rec;

	memcpy(m->text, "\x04\x1F\x04\x40", 4);
	m->len = 4;
	m->id = id;
	m->flags = flags;
	m->data_coding = dc;
	snprintf(m->to, sizeof(m->to), "bob");
	snprintf(m->reply_to, sizeof(m->reply_to), "alice");
	if (smpp)
		snprintf(m->dst_addr, sizeof(m->dst_addr), "bob");
	memset(&rec, 0, sizeof(rec));
	rec.m = m;
	snprintf(rec.account, sizeof(rec.account), "bob");
	rec.state = MSG_STATE_ENROUTE;
	ck_assert_int_eq(store_sqlite_ops.begin(b, true), 0);
	ck_assert_int_eq(store_sqlite_ops.put(b, &rec), 0);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	free(m);
}

/* The flags of stored message id that say how to read its text. */
static uint32_t
coding_of(struct store_backend *b, uint64_t id, uint8_t *dc)
{
	struct store_rec rec;
	uint32_t f;

	ck_assert_int_eq(store_sqlite_ops.get(b, id, &rec), 1);
	f = rec.m->flags & MSG_F_CODING;
	*dc = rec.m->data_coding;
	ck_assert_int_eq(memcmp(rec.m->text, "\x04\x1F\x04\x40", 4), 0);
	free(rec.m);
	return f;
}

/*
 * How to read a message's text is stored with it, so that it converts
 * the same after the store; rows written before it was (SMPP blob
 * version 1, no coding flags) read as they were: an SMPP client's message
 * as its octets in data_coding, a receipt and a line client's as text.
 */
START_TEST(test_text_coding_kept)
{
	struct store_backend *b = open_ok(false);
	char sql[256];
	sqlite3 *db;
	uint8_t dc;

	put_coded(b, 1024, MSG_F_CODED | MSG_F_DC0_LATIN1, 8, true);
	put_coded(b, 2048, 0, 0, false);
	put_coded(b, 3072, MSG_F_CODED, 0, true);
	put_coded(b, 4096, MSG_F_RECEIPT, 0, true);
	store_sqlite_ops.close(b);
	b = open_ok(false);
	ck_assert_uint_eq(coding_of(b, 1024, &dc),
	    MSG_F_CODED | MSG_F_DC0_LATIN1);
	ck_assert_uint_eq(dc, 8);
	ck_assert_uint_eq(coding_of(b, 2048, &dc), 0);
	store_sqlite_ops.close(b);
	/* 3072 and 4096 as a version before this one wrote them. */
	snprintf(sql, sizeof(sql), "UPDATE msg SET flags = flags & ~%u,"
	    " smpp = X'01' || substr(smpp, 2) WHERE id IN (3072, 4096)",
	    (unsigned)MSG_F_CODING);
	ck_assert_int_eq(sqlite3_open(sc.path, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	b = open_ok(false);
	ck_assert_uint_eq(coding_of(b, 3072, &dc), MSG_F_CODED);
	ck_assert_uint_eq(coding_of(b, 4096, &dc), 0);
	ck_assert_uint_eq(coding_of(b, 1024, &dc),
	    MSG_F_CODED | MSG_F_DC0_LATIN1);
	store_sqlite_ops.close(b);
}
END_TEST

/*
 * The receipt id map's rows: each key of an SMSC id finds our message
 * and what its receipt needs, after a reopen too; dropping by one key
 * drops every key of that SMSC id, and not those of another part of the
 * same message of ours; the purge takes what was written before its time.
 */
START_TEST(test_receipt_ids)
{
	struct store_backend *b = open_ok(false);
	struct receipt_key k[RECEIPT_KEYS_MAX], look[RECEIPT_KEYS_MAX];
	struct receipt_key part2[RECEIPT_KEYS_MAX];
	struct receipt_orig o = { .id = 4242, .submitted = 1700000000,
	    .src_ton = 5, .src_npi = 0, .dst_ton = 1, .dst_npi = 1,
	    .registered_delivery = 1 }, got;
	unsigned n, n2;

	n = receipt_id_keys(UPSTREAM_RECEIPT_AUTO, false, "3039", 4, k);

	ck_assert_uint_eq(n, 3);
	snprintf(o.reply_to, sizeof(o.reply_to), "alice");
	snprintf(o.to, sizeof(o.to), "+351910000001");
	snprintf(o.src_addr, sizeof(o.src_addr), "alice");
	snprintf(o.dst_addr, sizeof(o.dst_addr), "351910000001");
	ck_assert_int_eq(store_sqlite_ops.begin(b, true), 0);
	for (unsigned i = 0; i < n; i++)
		ck_assert_int_eq(store_sqlite_ops.rcpt_put(b, "opA", &k[i], 1,
		    &o, 100), 0);
	/* The message's second part: another id of the centre's. */
	n2 = receipt_id_keys(UPSTREAM_RECEIPT_AUTO, false, "303a", 4, part2);
	for (unsigned i = 0; i < n2; i++)
		ck_assert_int_eq(store_sqlite_ops.rcpt_put(b, "opA", &part2[i],
		    2, &o, 100), 0);
	n = receipt_id_keys(UPSTREAM_RECEIPT_AUTO, false, "77", 2, k);
	o.id = 77;
	for (unsigned i = 0; i < n; i++)
		ck_assert_int_eq(store_sqlite_ops.rcpt_put(b, "opA", &k[i], 3,
		    &o, 200), 0);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	store_sqlite_ops.close(b);
	b = open_ok(false);
	/* "12345" is 0x3039: its decimal key finds message 4242. */
	n = receipt_id_keys(UPSTREAM_RECEIPT_AUTO, true, "12345", 5, look);
	ck_assert_int_eq(store_sqlite_ops.rcpt_get(b, "opA", &look[0], &got),
	    0);
	ck_assert_int_eq(store_sqlite_ops.rcpt_get(b, "opA", &look[1], &got),
	    1);
	ck_assert_uint_eq(got.id, 4242);
	ck_assert_uint_eq(got.submitted, 1700000000);
	ck_assert_str_eq(got.reply_to, "alice");
	ck_assert_str_eq(got.to, "+351910000001");
	ck_assert_str_eq(got.dst_addr, "351910000001");
	ck_assert(got.src_ton == 5 && got.dst_ton == 1 && got.dst_npi == 1 &&
	    got.registered_delivery == 1);
	/* Another upstream's same id is not ours. */
	ck_assert_int_eq(store_sqlite_ops.rcpt_get(b, "opB", &look[1], &got),
	    0);
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	/* The first part's final receipt: its three rows go, not part 2's. */
	ck_assert_int_eq(store_sqlite_ops.rcpt_del(b, "opA", &look[1]), 0);
	for (unsigned i = 0; i < 3; i++)
		ck_assert_int_eq(store_sqlite_ops.rcpt_get(b, "opA", &look[i],
		    &got), 0);
	n = receipt_id_keys(UPSTREAM_RECEIPT_AUTO, false, "3039", 4, k);
	for (unsigned i = 0; i < n; i++)
		ck_assert_int_eq(store_sqlite_ops.rcpt_get(b, "opA", &k[i],
		    &got), 0);
	for (unsigned i = 0; i < n2; i++) {
		ck_assert_int_eq(store_sqlite_ops.rcpt_get(b, "opA", &part2[i],
		    &got), 1);
		ck_assert_uint_eq(got.id, 4242);
	}
	ck_assert_int_eq(store_sqlite_ops.rcpt_del(b, "opA", &part2[n2 - 1]),
	    0);
	for (unsigned i = 0; i < n2; i++)
		ck_assert_int_eq(store_sqlite_ops.rcpt_get(b, "opA", &part2[i],
		    &got), 0);
	/* A key nothing was filed under drops nothing. */
	ck_assert_int_eq(store_sqlite_ops.rcpt_del(b, "opB", &look[1]), 0);
	ck_assert_int_eq(store_sqlite_ops.rcpt_purge(b, 150, 100), 0);
	ck_assert_int_eq(store_sqlite_ops.rcpt_purge(b, 201, 1), 1);
	ck_assert_int_eq(store_sqlite_ops.rcpt_purge(b, 201, 100), 2);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	store_sqlite_ops.close(b);
}
END_TEST

/*
 * A store file whose receipt table is from before grp (a daemon before
 * parts were told apart): the column is added on open; its rows, grp
 * NULL, still go by our id, together.
 */
START_TEST(test_receipt_ids_old_table)
{
	struct store_backend *b = open_ok(false);
	struct receipt_key k[RECEIPT_KEYS_MAX];
	struct receipt_orig o = { .id = 5, .registered_delivery = 1 }, got;
	unsigned n = receipt_id_keys(UPSTREAM_RECEIPT_AUTO, false, "abc", 3, k);

	store_sqlite_ops.close(b);
	exec_in_file("DROP TABLE rcpt; CREATE TABLE rcpt (upstream TEXT NOT "
	    "NULL, kind INTEGER NOT NULL, k BLOB NOT NULL, id INTEGER NOT "
	    "NULL, added INTEGER NOT NULL, submitted INTEGER NOT NULL, "
	    "submitter TEXT NOT NULL, dst TEXT NOT NULL, src_addr TEXT NOT "
	    "NULL, dst_addr TEXT NOT NULL, addr_bits INTEGER NOT NULL, rd "
	    "INTEGER NOT NULL, PRIMARY KEY (upstream, kind, k)) WITHOUT "
	    "ROWID; INSERT INTO rcpt VALUES ('opA', 0, CAST('abc' AS BLOB), "
	    "5, 1, 1, 'a', 'b', 'a', 'b', 0, 1), ('opA', 0, CAST('abd' AS "
	    "BLOB), 5, 1, 1, 'a', 'b', 'a', 'b', 0, 1);");
	b = open_ok(false);
	ck_assert_int_eq(store_sqlite_ops.rcpt_get(b, "opA", &k[0], &got), 1);
	ck_assert_uint_eq(got.id, 5);
	ck_assert_int_eq(store_sqlite_ops.begin(b, false), 0);
	/* A new row beside the old ones. */
	o.id = 6;
	ck_assert_int_eq(store_sqlite_ops.rcpt_put(b, "opB", &k[0], 9, &o, 1),
	    0);
	ck_assert_int_eq(store_sqlite_ops.rcpt_del(b, "opA", &k[0]), 0);
	ck_assert_int_eq(store_sqlite_ops.commit(b), 0);
	n = receipt_id_keys(UPSTREAM_RECEIPT_AUTO, false, "abd", 3, k);
	ck_assert_uint_gt(n, 0);
	ck_assert_int_eq(store_sqlite_ops.rcpt_get(b, "opA", &k[0], &got), 0);
	ck_assert_int_eq(store_sqlite_ops.rcpt_get(b, "opB", &k[0], &got), 0);
	n = receipt_id_keys(UPSTREAM_RECEIPT_AUTO, false, "abc", 3, k);
	ck_assert_int_eq(store_sqlite_ops.rcpt_get(b, "opB", &k[0], &got), 1);
	ck_assert_uint_eq(got.id, 6);
	store_sqlite_ops.close(b);
}
END_TEST
#endif

Suite *
store_suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("sqlite");

#if ER_WITH_SQLITE
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_order_marks_reopen);
	tcase_add_test(tc, test_expiry_and_by_dest);
	tcase_add_test(tc, test_rollback);
	tcase_add_test(tc, test_final_rows_only_if_asked);
	tcase_add_test(tc, test_final_row_predicate);
	tcase_add_test(tc, test_names_rollback);
	tcase_add_test(tc, test_migrate_schema1);
	tcase_add_test(tc, test_migrate_schema1_no_fin);
	tcase_add_test(tc, test_newer_schema_refused);
	tcase_add_test(tc, test_migrate_schema2);
	tcase_add_test(tc, test_page_size_of_a_new_file);
	tcase_add_test(tc, test_rollback_undoes_waiting);
	tcase_add_test(tc, test_reopen_with_done);
	tcase_add_test(tc, test_marks_out_of_order);
	tcase_add_test(tc, test_reopen_with_marks);
	tcase_add_test(tc, test_stored_under_the_mark);
	tcase_add_test(tc, test_marks_of_a_group_sqlite_ended);
	tcase_add_test(tc, test_mark_failed_then_again);
	tcase_add_test(tc, test_row_deleted_by_hand);
	tcase_add_test(tc, test_text_coding_kept);
	tcase_add_test(tc, test_check_sees_files_go);
	tcase_add_test(tc, test_not_a_store);
	tcase_add_test(tc, test_check_opens_by_name);
	tcase_add_test(tc, test_receipt_ids);
	tcase_add_test(tc, test_receipt_ids_old_table);
#endif
	suite_add_tcase(s, tc);
#if ER_WITH_SQLITE
	/* 70,000 messages and an idle store's 5 s (60 s under a sanitizer). */
	tc = tcase_create("sweep");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_sweep_of_done);
	suite_add_tcase(s, tc);
#endif
	tc = tcase_create("backends");
	tcase_add_test(tc, test_backends_by_name);
	tcase_add_test(tc, test_shard_of_is_stable);
	suite_add_tcase(s, tc);
	return s;
}

/*
 * storebench.c: what SQLite costs per stored message with several row
 * schemas, measured without the daemon (make storebench; never part of
 * make check), so that the store's next row is picked with figures.
 *
 * For each schema and each sync setting, on a fresh file in a temporary
 * directory, with the pragmas the store sets (src/store_sqlite.c,
 * sqlite_open): -n messages are inserted, to -a accounts from as many
 * senders drawn at random, -t byte texts, -g to a commit; then drained:
 * the accounts are taken in turn, each scanning its backlog in pages of
 * -S (the store's pump refills a session from half empty) and marking -R
 * messages delivered per turn, -g marks to a commit. Rounds (-r) run
 * every cell once, interleaved, so that the machine's drift moves all
 * alike; a line per run (messages/s and us of CPU per message for each
 * phase), then a table of the medians. Exit 1 when a run loses or keeps a
 * message it should not: then its figures measured something else.
 * Built with -DSB_LMDB=1 (where liblmdb-dev is), schemas l and m run the
 * same phases on LMDB instead (lmdb_run), and -w the sharded inserts.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#if SB_LMDB
#include <lmdb.h>
#endif
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

/*
 * The store's settings (src/store_sqlite.c: make_file, sqlite_open,
 * CKPT_BYTES): 16 KiB pages, a checkpoint every 64 MiB of WAL.
 */
#define PRAGMAS "PRAGMA page_size = 16384; PRAGMA journal_mode = WAL;" \
	" PRAGMA cache_size = -16384; PRAGMA wal_autocheckpoint = 4096;"
#define VALIDITY	86400		/* store.default_validity */
#define MSG_STATE_ENROUTE	1
#define MSG_STATE_DELIVERED	2
#define LINE_TEXT_FLAG	(1 << 6)	/* MSG_F_LINE_TEXT, a line client's */
#define LINE_CLIENT_FLAG (1 << 13)	/* MSG_F_LINE_CLIENT */
#define PREFIX_FIRST_FLAG (1 << 0)	/* MSG_F_PREFIX_FIRST: SMPP's, HTTP's */
/* STORE_FINAL_NOT_KEPT: MSG_F_RECEIPT, MSG_F_LINE_CLIENT. */
#define FINAL_NOT_KEPT	((1 << 3) | LINE_CLIENT_FLAG)
#define MAX_SCHEMAS	14
#if SB_LMDB
#define SB_SCHEMAS	"aohrbcdefglm"
#else
#define SB_SCHEMAS	"aohrbcdefg"
#endif
#define MAX_ROUNDS	15

/*
 * The columns every schema keeps, as src/store_sqlite.c's msg does after
 * its id, account and submitter.
 */
#define MSG_REST \
	" src TEXT NOT NULL, dst TEXT NOT NULL, state INTEGER NOT NULL," \
	" submitted INTEGER NOT NULL, due INTEGER NOT NULL," \
	" expires INTEGER NOT NULL, final_date INTEGER NOT NULL," \
	" attempts INTEGER NOT NULL, flags INTEGER NOT NULL," \
	" text BLOB NOT NULL, smpp BLOB NOT NULL"
#define EXPIRY "CREATE INDEX msg_expiry ON msg(expires) WHERE state = 1;"
#define BACKLOG "CREATE INDEX msg_backlog ON msg(account, id) WHERE state = 1;"
#define FIN(type) "CREATE TABLE fin (id INTEGER PRIMARY KEY," \
	" account " type " NOT NULL, submitter " type " NOT NULL," \
	" state INTEGER NOT NULL, final_date INTEGER NOT NULL);"
/* Integer keys: each name once; the store would keep the key in memory. */
#define NAMES "CREATE TABLE name (id INTEGER PRIMARY KEY," \
	" name TEXT NOT NULL UNIQUE);"
#define DLV(type) "CREATE TABLE dlv (account " type " PRIMARY KEY," \
	" upto INTEGER NOT NULL) WITHOUT ROWID;"
#define ROWID_MSG(type) "CREATE TABLE msg (id INTEGER PRIMARY KEY," \
	" account " type " NOT NULL, submitter " type " NOT NULL," MSG_REST ");"
/* query_sm, cancel_sm and replace_sm find a message by id alone. */
#define CLUSTERED_MSG(type) "CREATE TABLE msg (account " type " NOT NULL," \
	" id INTEGER NOT NULL, submitter " type " NOT NULL," MSG_REST \
	", PRIMARY KEY (account, id)) WITHOUT ROWID;" \
	"CREATE UNIQUE INDEX msg_id ON msg(id);"

/*
 * src/store_sqlite.c's schema 2 (a): names as keys, the name table's key 0
 * the empty name, and views for sqlite3(1) (never read here).
 */
#define NAMES2 NAMES "INSERT INTO name VALUES (0, '');"
#define VIEWS "CREATE VIEW messages AS SELECT m.id, a.name AS account," \
	" s.name AS submitter FROM msg m JOIN name a ON a.id = m.account" \
	" JOIN name s ON s.id = m.submitter;"

/* src/store_sqlite.c: sql[ST_PUT], sql[ST_SCAN] (same text). */
static const char put_sql[] =
    "INSERT INTO msg (id, account, submitter, src, dst, state,"
    " submitted, due, expires, final_date, attempts, flags, text, smpp)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,"
    " ?14)";
static const char scan_sql[] =
    "SELECT id, account, submitter, src, dst, state, submitted, due,"
    " expires, final_date, attempts, flags, text, smpp FROM msg"
    " WHERE account = ?1 AND state = 1 AND id > ?2 ORDER BY id LIMIT ?3";
/* src/store_sqlite.c: sql[ST_FIN_ADD], sql[ST_DELETE] (sqlite_mark). */
static const char fin_add_sql[] =
    "INSERT INTO fin SELECT id, account, submitter, ?2, ?3"
    " FROM msg WHERE id = ?1";
static const char delete_sql[] = "DELETE FROM msg WHERE id = ?1";
/*
 * Schema 2's sql[ST_FIN_ADD] (mark_final): to fin only where a submitter
 * can ask (?4: STORE_FINAL_NOT_KEPT); then sql[ST_DELETE] as before.
 */
static const char fin_kept_sql[] = "INSERT INTO fin SELECT id, account,"
    " submitter, ?2, ?3 FROM msg WHERE id = ?1 AND submitter <> 0 AND"
    " flags & ?4 = 0";
/* The same with DELETE ... RETURNING (measured, a mark's cost doubled). */
static const char delete_ret_sql[] = "DELETE FROM msg WHERE id = ?1"
    " RETURNING account, submitter, flags";
static const char fin_put_sql[] = "INSERT INTO fin (id, account, submitter,"
    " state, final_date) VALUES (?1, ?2, ?3, ?4, ?5)";
/* Clustered: the account is known when marking (?4, ?2), as it is. */
static const char fin_add_acct_sql[] =
    "INSERT INTO fin SELECT id, account, submitter, ?2, ?3"
    " FROM msg WHERE account = ?4 AND id = ?1";
static const char delete_acct_sql[] =
    "DELETE FROM msg WHERE account = ?2 AND id = ?1";
/* Marks by range: the account's messages in (?2, ?3] were delivered. */
static const char fin_range_sql[] =
    "INSERT INTO fin SELECT id, account, submitter, ?4, ?5 FROM msg"
    " WHERE account = ?1 AND state = 1 AND id > ?2 AND id <= ?3";
static const char delete_range_sql[] =
    "DELETE FROM msg WHERE account = ?1 AND state = 1 AND id > ?2"
    " AND id <= ?3";
static const char upto_sql[] =
    "INSERT INTO dlv (account, upto) VALUES (?1, ?2)"
    " ON CONFLICT (account) DO UPDATE SET upto = excluded.upto";

struct schema {
	char	key;
	const char *name;
	const char *ddl;
	bool	int_keys;	/* account and submitter: keys into name */
	bool	range;		/* marks: per account and range, per group */
	bool	fin;		/* final states kept for query_sm */
	const char *fin_add;	/* per message, or per range */
	const char *del;
	bool	returning;	/* del says whether fin keeps the row */
	uint32_t flags;		/* the messages' (0: LINE_TEXT_FLAG) */
};
/* LMDB's schemas (l, m) use neither ddl nor statements: see lmdb_run. */
#define IS_LMDB(s)	((s)->key >= 'l')

static const struct schema schemas[] = {
	/* Line clients' messages: no final rows kept. */
	{ 'a', "today", NAMES2 ROWID_MSG("INTEGER") BACKLOG EXPIRY
	    FIN("INTEGER") VIEWS, true, false, true, fin_kept_sql,
	    delete_sql, false, LINE_TEXT_FLAG | LINE_CLIENT_FLAG },
	/* An SMPP client's messages: the final rows kept. */
	{ 'h', "today, SMPP's", NAMES2 ROWID_MSG("INTEGER") BACKLOG EXPIRY
	    FIN("INTEGER") VIEWS, true, false, true, fin_kept_sql,
	    delete_sql, false, PREFIX_FIRST_FLAG },
	/* a with the mark's DELETE ... RETURNING, then fin if kept. */
	{ 'r', "a, RETURNING", NAMES2 ROWID_MSG("INTEGER") BACKLOG EXPIRY
	    FIN("INTEGER") VIEWS, true, false, true, fin_put_sql,
	    delete_ret_sql, true, LINE_TEXT_FLAG | LINE_CLIENT_FLAG },
	/* Schema 1, before names had keys: every final row kept. */
	{ 'o', "schema 1", ROWID_MSG("TEXT") BACKLOG EXPIRY FIN("TEXT"),
	    false, false, true, fin_add_sql, delete_sql, false, 0 },
	{ 'b', "int keys", NAMES ROWID_MSG("INTEGER") BACKLOG EXPIRY
	    FIN("INTEGER"), true, false, true, fin_add_sql, delete_sql, false,
	    0 },
	{ 'c', "clustered", CLUSTERED_MSG("TEXT") EXPIRY FIN("TEXT"),
	    false, false, true, fin_add_acct_sql, delete_acct_sql, false, 0 },
	{ 'd', "range marks", ROWID_MSG("TEXT") BACKLOG EXPIRY FIN("TEXT")
	    DLV("TEXT"), false, true, true, fin_range_sql, delete_range_sql,
	    false, 0 },
	{ 'e', "b+d", NAMES ROWID_MSG("INTEGER") BACKLOG EXPIRY
	    FIN("INTEGER") DLV("INTEGER"), true, true, true, fin_range_sql,
	    delete_range_sql, false, 0 },
	{ 'f', "b+c+d", NAMES CLUSTERED_MSG("INTEGER") EXPIRY FIN("INTEGER")
	    DLV("INTEGER"), true, true, true, fin_range_sql,
	    delete_range_sql, false, 0 },
	/* What the final rows cost: a line client cannot query_sm. */
	{ 'g', "e, no fin rows", NAMES ROWID_MSG("INTEGER") BACKLOG EXPIRY
	    DLV("INTEGER"), true, true, false, NULL, delete_range_sql, false,
	    0 },
#if SB_LMDB
	/*
	 * LMDB: msg keyed (account, id) big-endian, so a backlog is one
	 * cursor range; ids keyed id -> account for query_sm. Like g: no
	 * final rows. l deletes per message; m per account range, with a
	 * delivered-up-to mark in dlv.
	 */
	{ 'l', "lmdb, per msg", "", true, false, false, NULL, NULL, false, 0 },
	{ 'm', "lmdb, range marks", "", true, true, false, NULL, NULL, false,
	    0 },
#endif
};
#define NSCHEMAS (sizeof(schemas) / sizeof(schemas[0]))

struct opts {
	unsigned n, accounts, text, group, run, page, rounds;
	const char *schemas;
	bool	full, normal;
	const char *dir;
	unsigned writers;	/* -w: LMDB shards, insert only */
};

/* One phase's measure: messages, wall and thread CPU seconds. */
struct phase {
	uint64_t n;
	double	wall, cpu;
};

struct result {
	struct phase ins, mark, scan;
	double	mib;		/* the file after the inserts */
};

/* An account's place in the drain. */
struct acct {
	int64_t	cursor;		/* scanned up to this id */
	int64_t	upto;		/* marked delivered up to this id */
	int64_t	group_lo;	/* range mode: upto when the group began */
	int64_t	queue[256];	/* scanned, not yet marked */
	unsigned qhead, qlen;
	bool	done;		/* its backlog is empty */
	bool	touched;	/* marked in the open group */
};

/* A run: one schema, one sync, one file. */
struct run {
	const struct opts *o;
	const struct schema *s;
	sqlite3	*db;
	sqlite3_stmt *put, *scan, *fin, *del, *upto;
#if SB_LMDB
	MDB_env	*env;
	MDB_dbi	msg_dbi, id_dbi, dlv_dbi;
#endif
	char	path[4096];
	struct acct *acct;
	int64_t	*marks;		/* the open group: ids, with macct */
	unsigned *macct;
	unsigned nmarks;
	uint64_t scanned, marked;
};

/* LMDB (schemas l, m): the same phases on an env; see lmdb_run. */
static void lmdb_insert(struct run *r, unsigned i, int64_t now);
static void lmdb_txn(struct run *r, bool begin);
static unsigned lmdb_scan_page(struct run *r, unsigned k);
static void lmdb_mark(struct run *r, unsigned k, int64_t id);
static void lmdb_mark_range(struct run *r, unsigned k);
static double median(double *v, unsigned n);

/* What every run inserts, the same for every schema. */
static char **names;		/* accounts, then senders */
static unsigned *msg_acct, *msg_from;
static uint8_t *text;

static void __attribute__((noreturn, format(printf, 1, 2)))
die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "storebench: ");
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void *
xmalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);

	if (p == NULL)
		die("out of memory");
	return p;
}

static double
clock_s(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Starts (or, with stop, ends and adds up) a timed stretch of p. */
static void
phase_time(struct phase *p, bool stop, double *w0, double *c0)
{
	double w = clock_s(CLOCK_MONOTONIC);
	double c = clock_s(CLOCK_THREAD_CPUTIME_ID);

	if (stop) {
		p->wall += w - *w0;
		p->cpu += c - *c0;
	}
	*w0 = w;
	*c0 = c;
}

static void
exec_sql(struct run *r, const char *q)
{
	char *err = NULL;

	if (sqlite3_exec(r->db, q, NULL, NULL, &err) != SQLITE_OK)
		die("%s: %s: %s", r->path, q, err ? err : "?");
}

static sqlite3_stmt *
prepare(struct run *r, const char *q)
{
	sqlite3_stmt *st = NULL;

	if (q != NULL && sqlite3_prepare_v3(r->db, q, -1,
	    SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK)
		die("%s: %s: %s", r->path, q, sqlite3_errmsg(r->db));
	return st;
}

/* Steps a statement that returns no rows, then resets it, as exec_stmt. */
static void
step_done(struct run *r, sqlite3_stmt *st)
{
	if (sqlite3_step(st) != SQLITE_DONE)
		die("%s: %s: %s", r->path, sqlite3_sql(st),
		    sqlite3_errmsg(r->db));
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* Binds name k (an account or a sender) as the schema keys it. */
static void
bind_name(const struct run *r, sqlite3_stmt *st, int i, unsigned k)
{
	if (r->s->int_keys)
		sqlite3_bind_int64(st, i, (sqlite3_int64)k + 1);
	else
		sqlite3_bind_text(st, i, names[k], -1, SQLITE_STATIC);
}

static int64_t
msg_id(unsigned i)
{
	/* Like the daemon's: a sequence above 10 bits of maker and node. */
	return ((int64_t)i + 1) << 10 | 3;
}

/* Opens a fresh file with the store's pragmas and the schema's tables. */
static void
run_open(struct run *r, bool full)
{
	if (sqlite3_open_v2(r->path, &r->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
		die("%s: cannot open: %s", r->path, r->db ?
		    sqlite3_errmsg(r->db) : "out of memory");
	exec_sql(r, PRAGMAS);
	exec_sql(r, full ? "PRAGMA synchronous = FULL" :
	    "PRAGMA synchronous = NORMAL");
	exec_sql(r, r->s->ddl);
	r->put = prepare(r, put_sql);
	r->scan = prepare(r, scan_sql);
	r->fin = prepare(r, r->s->fin_add);
	r->del = prepare(r, r->s->del);
	r->upto = prepare(r, r->s->range ? upto_sql : NULL);
}

/* Integer keys: the names, once, before the clock starts. */
static void
run_names(struct run *r)
{
	sqlite3_stmt *st;

	if (!r->s->int_keys)
		return;
	st = prepare(r, "INSERT INTO name (id, name) VALUES (?1, ?2)");
	exec_sql(r, "BEGIN");
	for (unsigned k = 0; k < 2 * r->o->accounts; k++) {
		sqlite3_bind_int64(st, 1, (sqlite3_int64)k + 1);
		sqlite3_bind_text(st, 2, names[k], -1, SQLITE_STATIC);
		step_done(r, st);
	}
	exec_sql(r, "COMMIT");
	sqlite3_finalize(st);
}

static void
run_close(struct run *r)
{
	static const char *const tails[] = { "", "-wal", "-shm" };
	char p[sizeof(r->path) + 8];

	sqlite3_finalize(r->put);
	sqlite3_finalize(r->scan);
	sqlite3_finalize(r->fin);
	sqlite3_finalize(r->del);
	sqlite3_finalize(r->upto);
	if (sqlite3_close(r->db) != SQLITE_OK)
		die("%s: cannot close: %s", r->path, sqlite3_errmsg(r->db));
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", r->path, tails[i]);
		if (unlink(p) < 0 && errno != ENOENT)
			die("%s: %s", p, strerror(errno));
	}
}

/* Message i as src/store_sqlite.c's bind_rec binds a line client's. */
static void
bind_put(struct run *r, unsigned i, int64_t now)
{
	sqlite3_stmt *st = r->put;
	unsigned a = msg_acct[i], from = r->o->accounts + msg_from[i];

	sqlite3_bind_int64(st, 1, msg_id(i));
	bind_name(r, st, 2, a);
	bind_name(r, st, 3, from);
	sqlite3_bind_text(st, 4, names[from], -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, names[a], -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 6, MSG_STATE_ENROUTE);
	sqlite3_bind_int64(st, 7, now);
	sqlite3_bind_int64(st, 8, 0);
	sqlite3_bind_int64(st, 9, now + VALIDITY);
	sqlite3_bind_int64(st, 10, 0);
	sqlite3_bind_int64(st, 11, 0);
	sqlite3_bind_int64(st, 12, r->s->flags ? r->s->flags :
	    LINE_TEXT_FLAG);
	sqlite3_bind_blob(st, 13, text, (int)r->o->text, SQLITE_STATIC);
	/* No SMPP fields: a zero-length blob, as the store binds it. */
	sqlite3_bind_blob(st, 14, text, 0, SQLITE_TRANSIENT);
}

static void
insert_all(struct run *r, struct phase *p)
{
	const struct opts *o = r->o;
	int64_t now = (int64_t)time(NULL);
	double w0, c0;

	phase_time(p, false, &w0, &c0);
	for (unsigned i = 0; i < o->n; i++) {
		if (IS_LMDB(r->s)) {
			if (i % o->group == 0)
				lmdb_txn(r, true);
			lmdb_insert(r, i, now);
			if ((i + 1) % o->group == 0 || i + 1 == o->n)
				lmdb_txn(r, false);
			continue;
		}
		if (i % o->group == 0)
			exec_sql(r, "BEGIN");
		bind_put(r, i, now);
		step_done(r, r->put);
		if ((i + 1) % o->group == 0 || i + 1 == o->n)
			exec_sql(r, "COMMIT");
	}
	phase_time(p, true, &w0, &c0);
	p->n = o->n;
}

/* The size of the file the inserts made, its WAL copied back. */
static double
file_mib(struct run *r)
{
	struct stat st;

	exec_sql(r, "PRAGMA wal_checkpoint(TRUNCATE)");
	if (stat(r->path, &st) < 0)
		die("%s: %s", r->path, strerror(errno));
	return (double)st.st_size / (1024.0 * 1024.0);
}

/* What the store's read_rec makes of a row: names and a copied text. */
struct rec {
	int64_t	id;
	char	account[65], submitter[65], src[65], dst[65];
	uint8_t	*text;
};

static void
copy_name(const struct run *r, sqlite3_stmt *st, int col, char *out)
{
	const unsigned char *t;
	int64_t k;

	if (r->s->int_keys) {
		/* The store would map its key to the name in memory. */
		k = sqlite3_column_int64(st, col);
		t = (const unsigned char *)(k >= 1 &&
		    k <= 2 * (int64_t)r->o->accounts ? names[k - 1] : "");
	} else {
		t = sqlite3_column_text(st, col);
	}
	snprintf(out, 65, "%s", t != NULL ? (const char *)t : "");
}

static void
read_row(const struct run *r, sqlite3_stmt *st, struct rec *rec)
{
	int len = sqlite3_column_bytes(st, 12);

	rec->id = sqlite3_column_int64(st, 0);
	copy_name(r, st, 1, rec->account);
	copy_name(r, st, 2, rec->submitter);
	snprintf(rec->src, sizeof(rec->src), "%s",
	    (const char *)sqlite3_column_text(st, 3));
	snprintf(rec->dst, sizeof(rec->dst), "%s",
	    (const char *)sqlite3_column_text(st, 4));
	rec->text = xmalloc((size_t)len);
	memcpy(rec->text, sqlite3_column_blob(st, 12), (size_t)len);
	if (sqlite3_column_int(st, 5) != MSG_STATE_ENROUTE ||
	    len != (int)r->o->text || strcmp(rec->dst,
	    names[msg_acct[(rec->id >> 10) - 1]]) != 0)
		die("%s: row %lld is not what was stored", r->path,
		    (long long)rec->id);
}

/* The next page of account k's backlog into its queue: how many. */
static unsigned
scan_page(struct run *r, unsigned k, struct phase *p)
{
	struct acct *a = &r->acct[k];
	sqlite3_stmt *st = r->scan;
	unsigned n = 0;
	struct rec rec;
	double w0, c0;
	int rc;

	phase_time(p, false, &w0, &c0);
	if (IS_LMDB(r->s)) {
		n = lmdb_scan_page(r, k);
		phase_time(p, true, &w0, &c0);
		p->n += n;
		return n;
	}
	bind_name(r, st, 1, k);
	sqlite3_bind_int64(st, 2, a->cursor);
	sqlite3_bind_int64(st, 3, r->o->page);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		read_row(r, st, &rec);
		free(rec.text);
		a->queue[(a->qhead + a->qlen++) % 256] = rec.id;
		a->cursor = rec.id;
		n++;
	}
	if (rc != SQLITE_DONE)
		die("%s: scan: %s", r->path, sqlite3_errmsg(r->db));
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	phase_time(p, true, &w0, &c0);
	p->n += n;
	return n;
}

/* Schema 2's mark_final: the row out, to fin if its state is kept. */
static void
mark_returning(struct run *r, int64_t id, int64_t now)
{
	int64_t account = 0, submitter = 0;
	uint32_t flags = FINAL_NOT_KEPT;
	int rc;

	sqlite3_bind_int64(r->del, 1, id);
	while ((rc = sqlite3_step(r->del)) == SQLITE_ROW) {
		account = sqlite3_column_int64(r->del, 0);
		submitter = sqlite3_column_int64(r->del, 1);
		flags = (uint32_t)sqlite3_column_int64(r->del, 2);
	}
	if (rc != SQLITE_DONE)
		die("%s: %s: %s", r->path, sqlite3_sql(r->del),
		    sqlite3_errmsg(r->db));
	sqlite3_reset(r->del);
	sqlite3_clear_bindings(r->del);
	if (submitter == 0 || (flags & FINAL_NOT_KEPT))
		return;
	sqlite3_bind_int64(r->fin, 1, id);
	sqlite3_bind_int64(r->fin, 2, account);
	sqlite3_bind_int64(r->fin, 3, submitter);
	sqlite3_bind_int(r->fin, 4, MSG_STATE_DELIVERED);
	sqlite3_bind_int64(r->fin, 5, now);
	step_done(r, r->fin);
}

/* As sqlite_mark marks a delivery: the final row to fin, the row out. */
static void
mark_row(struct run *r, unsigned k, int64_t id, int64_t now)
{
	if (r->s->returning) {
		mark_returning(r, id, now);
		return;
	}
	if (r->fin != NULL) {
		sqlite3_bind_int64(r->fin, 1, id);
		sqlite3_bind_int(r->fin, 2, MSG_STATE_DELIVERED);
		sqlite3_bind_int64(r->fin, 3, now);
		if (r->s->flags != 0)
			sqlite3_bind_int64(r->fin, 4, FINAL_NOT_KEPT);
		else if (sqlite3_bind_parameter_count(r->fin) >= 4)
			bind_name(r, r->fin, 4, k);
		step_done(r, r->fin);
	}
	sqlite3_bind_int64(r->del, 1, id);
	if (sqlite3_bind_parameter_count(r->del) >= 2)
		bind_name(r, r->del, 2, k);
	step_done(r, r->del);
}

/* Account k's deliveries of the group, (group_lo, upto], at once. */
static void
mark_range(struct run *r, unsigned k, int64_t now)
{
	struct acct *a = &r->acct[k];

	if (r->fin != NULL) {
		bind_name(r, r->fin, 1, k);
		sqlite3_bind_int64(r->fin, 2, a->group_lo);
		sqlite3_bind_int64(r->fin, 3, a->upto);
		sqlite3_bind_int(r->fin, 4, MSG_STATE_DELIVERED);
		sqlite3_bind_int64(r->fin, 5, now);
		step_done(r, r->fin);
	}
	bind_name(r, r->del, 1, k);
	sqlite3_bind_int64(r->del, 2, a->group_lo);
	sqlite3_bind_int64(r->del, 3, a->upto);
	step_done(r, r->del);
	bind_name(r, r->upto, 1, k);
	sqlite3_bind_int64(r->upto, 2, a->upto);
	step_done(r, r->upto);
	a->group_lo = a->upto;
	a->touched = false;
}

/* Writes and commits the open group of marks. */
static void
flush_marks(struct run *r, struct phase *p)
{
	int64_t now = (int64_t)time(NULL);
	double w0, c0;

	if (r->nmarks == 0)
		return;
	phase_time(p, false, &w0, &c0);
	if (IS_LMDB(r->s))
		lmdb_txn(r, true);
	else
		exec_sql(r, "BEGIN");
	for (unsigned i = 0; i < r->nmarks; i++) {
		unsigned k = r->macct[i];

		if (IS_LMDB(r->s) && !r->s->range)
			lmdb_mark(r, k, r->marks[i]);
		else if (IS_LMDB(r->s) && r->acct[k].touched)
			lmdb_mark_range(r, k);
		else if (IS_LMDB(r->s))
			continue;
		else if (!r->s->range)
			mark_row(r, k, r->marks[i], now);
		else if (r->acct[k].touched)
			mark_range(r, k, now);
	}
	if (IS_LMDB(r->s))
		lmdb_txn(r, false);
	else
		exec_sql(r, "COMMIT");
	phase_time(p, true, &w0, &c0);
	p->n += r->nmarks;
	r->marked += r->nmarks;
	r->nmarks = 0;
}

/* Account k's turn: up to -R of what it was handed out are delivered. */
static void
take_turn(struct run *r, unsigned k, struct phase *p)
{
	struct acct *a = &r->acct[k];

	for (unsigned j = 0; j < r->o->run && a->qlen > 0; j++) {
		int64_t id = a->queue[a->qhead];

		a->qhead = (a->qhead + 1) % 256;
		a->qlen--;
		r->marks[r->nmarks] = id;
		r->macct[r->nmarks++] = k;
		/* In order, and none failed: the mark moves up to it. */
		a->upto = id;
		a->touched = true;
		if (r->nmarks == r->o->group)
			flush_marks(r, p);
	}
}

static void
drain_all(struct run *r, struct result *res)
{
	unsigned left = r->o->accounts;

	while (left > 0) {
		for (unsigned k = 0; k < r->o->accounts; k++) {
			struct acct *a = &r->acct[k];

			if (a->done)
				continue;
			if (a->qlen == 0 && scan_page(r, k, &res->scan) == 0) {
				a->done = true;
				left--;
				continue;
			}
			take_turn(r, k, &res->mark);
		}
	}
	flush_marks(r, &res->mark);
}

static int64_t
count_rows(struct run *r, const char *q)
{
	sqlite3_stmt *st = prepare(r, q);
	int64_t n = -1;

	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return n;
}

/*
 * Every message scanned and marked once, none left, each final row kept
 * where the schema keeps it (not for a line client's, in a).
 */
static void
check_drained(struct run *r, const struct result *res)
{
	int64_t left = count_rows(r, "SELECT count(*) FROM msg");
	int64_t fin = r->s->fin ? count_rows(r, "SELECT count(*) FROM fin") :
	    0;
	int64_t want = r->s->fin && !(r->s->flags & FINAL_NOT_KEPT) ?
	    (int64_t)r->o->n : 0;

	if (res->scan.n != r->o->n || r->marked != r->o->n || left != 0 ||
	    fin != want)
		die("%s (%c): %llu scanned, %llu marked, %lld left, %lld final"
		    " (want %lld) of %u", r->path, r->s->key,
		    (unsigned long long)res->scan.n,
		    (unsigned long long)r->marked, (long long)left,
		    (long long)fin, (long long)want, r->o->n);
}

#if SB_LMDB
/*
 * LMDB. Keys are big-endian so that memcmp orders them: msg (account 4,
 * id 8) -> the packed record, ids (id 8) -> account 4, dlv (account 4) ->
 * delivered up to (8). Commits are durable as LMDB's default makes them
 * (fdatasync of the data, then of the meta page); "normal" opens the env
 * with MDB_NOMETASYNC (the meta page written but not synced: a crash may
 * lose the last commit, not the file), like SQLite's NORMAL in WAL mode.
 */
#define LMDB_REC_MAX	(4 + 2 * 65 + 1 + 4 * 8 + 2 * 4 + 2 + 65536 + 2)

static void
lmdb_check(const struct run *r, int rc, const char *what)
{
	if (rc != MDB_SUCCESS)
		die("%s: %s: %s", r->path, what, mdb_strerror(rc));
}

static void
be_put(uint8_t *p, uint64_t v, unsigned len)
{
	for (unsigned i = len; i-- > 0; v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t
be_get(const uint8_t *p, unsigned len)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < len; i++)
		v = v << 8 | p[i];
	return v;
}

/* Account k's key (k + 1, as the name table's) with message id. */
static MDB_val
lmdb_key(uint8_t buf[12], unsigned k, int64_t id)
{
	be_put(buf, (uint64_t)k + 1, 4);
	be_put(buf + 4, (uint64_t)id, 8);
	return (MDB_val){ .mv_size = 12, .mv_data = buf };
}

static uint8_t *
pack_str(uint8_t *p, const char *s)
{
	size_t n = strlen(s);

	*p++ = (uint8_t)n;
	memcpy(p, s, n);
	return p + n;
}

/* Message i packed as the store's columns, names as integer keys. */
static size_t
lmdb_pack(const struct run *r, unsigned i, int64_t now, uint8_t *buf)
{
	unsigned a = msg_acct[i], from = r->o->accounts + msg_from[i];
	uint8_t *p = buf;

	be_put(p, (uint64_t)from + 1, 4), p += 4;
	p = pack_str(p, names[from]);
	p = pack_str(p, names[a]);
	*p++ = MSG_STATE_ENROUTE;
	be_put(p, (uint64_t)now, 8), p += 8;			/* submitted */
	be_put(p, 0, 8), p += 8;				/* due */
	be_put(p, (uint64_t)(now + VALIDITY), 8), p += 8;	/* expires */
	be_put(p, 0, 8), p += 8;				/* final_date */
	be_put(p, 0, 4), p += 4;				/* attempts */
	be_put(p, LINE_TEXT_FLAG, 4), p += 4;
	be_put(p, r->o->text, 2), p += 2;
	memcpy(p, text, r->o->text), p += r->o->text;
	be_put(p, 0, 2), p += 2;				/* smpp */
	return (size_t)(p - buf);
}

/* The open write transaction: one per thread (shards, -w). */
static __thread MDB_txn *lmdb_wtxn;

static void
lmdb_txn(struct run *r, bool begin)
{
	if (begin)
		lmdb_check(r, mdb_txn_begin(r->env, NULL, 0, &lmdb_wtxn),
		    "begin");
	else
		lmdb_check(r, mdb_txn_commit(lmdb_wtxn), "commit");
}

static void
lmdb_insert(struct run *r, unsigned i, int64_t now)
{
	static uint8_t rec[LMDB_REC_MAX];
	uint8_t kb[12], ib[8], ab[4];
	MDB_val key = lmdb_key(kb, msg_acct[i], msg_id(i));
	MDB_val val = { .mv_size = lmdb_pack(r, i, now, rec), .mv_data = rec };
	MDB_val ik = { .mv_size = 8, .mv_data = ib };
	MDB_val iv = { .mv_size = 4, .mv_data = ab };

	/* As the store's INSERT: a key already there is an error. */
	lmdb_check(r, mdb_put(lmdb_wtxn, r->msg_dbi, &key, &val,
	    MDB_NOOVERWRITE), "put msg");
	be_put(ib, (uint64_t)msg_id(i), 8);
	be_put(ab, (uint64_t)msg_acct[i] + 1, 4);
	lmdb_check(r, mdb_put(lmdb_wtxn, r->id_dbi, &ik, &iv,
	    MDB_NOOVERWRITE), "put id");
}

/* A record read back as read_row does: names, a copied text, checks. */
static void
lmdb_read(const struct run *r, const MDB_val *key, const MDB_val *val)
{
	const uint8_t *p = val->mv_data, *end = p + val->mv_size;
	int64_t id = (int64_t)be_get((const uint8_t *)key->mv_data + 4, 8);
	struct rec rec = { .id = id };
	size_t len;

	p += 4;
	snprintf(rec.submitter, sizeof(rec.submitter), "%.*s", p[0],
	    (const char *)p + 1), p += 1 + p[0];
	snprintf(rec.dst, sizeof(rec.dst), "%.*s", p[0],
	    (const char *)p + 1), p += 1 + p[0];
	if (p + 1 + 40 + 2 > end || *p != MSG_STATE_ENROUTE)
		die("%s: record %lld is not what was stored", r->path,
		    (long long)id);
	p += 1 + 40;
	len = (size_t)be_get(p, 2), p += 2;
	if (p + len + 2 != end || len != r->o->text || strcmp(rec.dst,
	    names[msg_acct[(id >> 10) - 1]]) != 0)
		die("%s: record %lld is not what was stored", r->path,
		    (long long)id);
	rec.text = xmalloc(len);
	memcpy(rec.text, p, len);
	free(rec.text);
}

/* The next page of account k's backlog: one cursor range, read-only. */
static unsigned
lmdb_scan_page(struct run *r, unsigned k)
{
	struct acct *a = &r->acct[k];
	uint8_t kb[12];
	MDB_val key = lmdb_key(kb, k, a->cursor + 1), val;
	MDB_txn *txn;
	MDB_cursor *cur;
	unsigned n = 0;
	int rc;

	lmdb_check(r, mdb_txn_begin(r->env, NULL, MDB_RDONLY, &txn), "read");
	lmdb_check(r, mdb_cursor_open(txn, r->msg_dbi, &cur), "cursor");
	rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
	while (rc == MDB_SUCCESS && n < r->o->page &&
	    be_get(key.mv_data, 4) == (uint64_t)k + 1) {
		lmdb_read(r, &key, &val);
		a->cursor = (int64_t)be_get((uint8_t *)key.mv_data + 4, 8);
		a->queue[(a->qhead + a->qlen++) % 256] = a->cursor;
		n++;
		rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
	}
	if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND)
		lmdb_check(r, rc, "scan");
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	return n;
}

static void
lmdb_del_id(struct run *r, int64_t id)
{
	uint8_t ib[8];
	MDB_val ik = { .mv_size = 8, .mv_data = ib };

	be_put(ib, (uint64_t)id, 8);
	lmdb_check(r, mdb_del(lmdb_wtxn, r->id_dbi, &ik, NULL), "del id");
}

/* l: a delivery deletes its record and its id entry. */
static void
lmdb_mark(struct run *r, unsigned k, int64_t id)
{
	uint8_t kb[12];
	MDB_val key = lmdb_key(kb, k, id);

	lmdb_check(r, mdb_del(lmdb_wtxn, r->msg_dbi, &key, NULL), "del msg");
	lmdb_del_id(r, id);
}

/* m: account k's (group_lo, upto] by one cursor walk, and its mark. */
static void
lmdb_mark_range(struct run *r, unsigned k)
{
	struct acct *a = &r->acct[k];
	uint8_t kb[12], ub[8];
	MDB_val key = lmdb_key(kb, k, a->group_lo + 1), val;
	MDB_val uk = { .mv_size = 4, .mv_data = kb };
	MDB_val uv = { .mv_size = 8, .mv_data = ub };
	MDB_cursor *cur;
	int64_t id;
	int rc;

	lmdb_check(r, mdb_cursor_open(lmdb_wtxn, r->msg_dbi, &cur), "cursor");
	rc = mdb_cursor_get(cur, &key, &val, MDB_SET_RANGE);
	while (rc == MDB_SUCCESS && be_get(key.mv_data, 4) == (uint64_t)k + 1 &&
	    (id = (int64_t)be_get((uint8_t *)key.mv_data + 4, 8)) <= a->upto) {
		lmdb_del_id(r, id);
		lmdb_check(r, mdb_cursor_del(cur, 0), "del range");
		/* After a delete, MDB_NEXT yields the entry that took its place. */
		rc = mdb_cursor_get(cur, &key, &val, MDB_NEXT);
	}
	if (rc != MDB_SUCCESS && rc != MDB_NOTFOUND)
		lmdb_check(r, rc, "range");
	mdb_cursor_close(cur);
	be_put(kb, (uint64_t)k + 1, 4);
	be_put(ub, (uint64_t)a->upto, 8);
	lmdb_check(r, mdb_put(lmdb_wtxn, r->dlv_dbi, &uk, &uv, 0), "put dlv");
	a->group_lo = a->upto;
	a->touched = false;
}

static void
lmdb_open(struct run *r, bool full)
{
	/* The map is the most the file may grow to; sparse until written. */
	size_t map = ((size_t)1 << 30) + (size_t)r->o->n * (1024 +
	    2 * r->o->text);
	MDB_txn *txn;

	lmdb_check(r, mdb_env_create(&r->env), "env");
	lmdb_check(r, mdb_env_set_mapsize(r->env, map), "mapsize");
	lmdb_check(r, mdb_env_set_maxdbs(r->env, 4), "maxdbs");
	lmdb_check(r, mdb_env_open(r->env, r->path, MDB_NOSUBDIR | MDB_NOTLS |
	    (full ? 0 : MDB_NOMETASYNC), 0600), "open");
	lmdb_check(r, mdb_txn_begin(r->env, NULL, 0, &txn), "begin");
	lmdb_check(r, mdb_dbi_open(txn, "msg", MDB_CREATE, &r->msg_dbi), "msg");
	lmdb_check(r, mdb_dbi_open(txn, "ids", MDB_CREATE, &r->id_dbi), "ids");
	lmdb_check(r, mdb_dbi_open(txn, "dlv", MDB_CREATE, &r->dlv_dbi), "dlv");
	lmdb_check(r, mdb_txn_commit(txn), "commit");
}

static size_t
lmdb_entries(struct run *r, MDB_dbi dbi)
{
	MDB_txn *txn;
	MDB_stat st;

	lmdb_check(r, mdb_txn_begin(r->env, NULL, MDB_RDONLY, &txn), "read");
	lmdb_check(r, mdb_stat(txn, dbi, &st), "stat");
	mdb_txn_abort(txn);
	return st.ms_entries;
}

/* Every message scanned and marked once; no record nor id entry left. */
static void
lmdb_check_drained(struct run *r, const struct result *res)
{
	size_t left = lmdb_entries(r, r->msg_dbi);
	size_t ids = lmdb_entries(r, r->id_dbi);

	if (res->scan.n != r->o->n || r->marked != r->o->n || left != 0 ||
	    ids != 0)
		die("%s (%c): %llu scanned, %llu marked, %zu left, %zu ids"
		    " of %u", r->path, r->s->key,
		    (unsigned long long)res->scan.n,
		    (unsigned long long)r->marked, left, ids, r->o->n);
}

static void
lmdb_close(struct run *r)
{
	char p[sizeof(r->path) + 8];

	mdb_env_close(r->env);
	snprintf(p, sizeof(p), "%s-lock", r->path);
	if ((unlink(r->path) < 0 && errno != ENOENT) ||
	    (unlink(p) < 0 && errno != ENOENT))
		die("%s: %s", r->path, strerror(errno));
}

/* One LMDB cell: the same phases as run_one's; the file as LMDB grew it. */
static void
lmdb_run(struct run *r, bool full, struct result *res)
{
	struct stat st;

	lmdb_open(r, full);
	insert_all(r, &res->ins);
	if (stat(r->path, &st) < 0)
		die("%s: %s", r->path, strerror(errno));
	res->mib = (double)st.st_size / (1024.0 * 1024.0);
	drain_all(r, res);
	lmdb_check_drained(r, res);
	lmdb_close(r);
}
/*
 * Shards (-w W): W threads, each with its own env (file) and writer,
 * insert the messages i with i % W == w, groups of -g / W (the same
 * traffic split W ways fills a group W times slower). What W writers
 * insert together; LMDB, like SQLite, has one writer per file.
 */
struct shard {
	struct run r;
	unsigned w, nw;
	struct phase ins;
};

static void *
shard_insert(void *arg)
{
	struct shard *sh = arg;
	struct run *r = &sh->r;
	unsigned group = r->o->group / sh->nw ? r->o->group / sh->nw : 1;
	int64_t now = (int64_t)time(NULL);
	unsigned in = 0;
	double w0, c0;

	phase_time(&sh->ins, false, &w0, &c0);
	for (unsigned i = sh->w; i < r->o->n; i += sh->nw) {
		if (in % group == 0)
			lmdb_txn(r, true);
		lmdb_insert(r, i, now);
		if (++in % group == 0)
			lmdb_txn(r, false);
	}
	if (in % group != 0)
		lmdb_txn(r, false);
	phase_time(&sh->ins, true, &w0, &c0);
	sh->ins.n = in;
	return NULL;
}

/* One sharded insert run: aggregate messages/s, mean CPU us/msg. */
static void
shard_run(const struct opts *o, const char *dir, unsigned nw, bool full,
    double *rate_out, double *us_out)
{
	struct shard sh[16];
	pthread_t t[16];
	double w0 = clock_s(CLOCK_MONOTONIC), cpu = 0;
	uint64_t n = 0;

	for (unsigned w = 0; w < nw; w++) {
		sh[w] = (struct shard){ .r = { .o = o, .s = &schemas[NSCHEMAS -
		    2] }, .w = w, .nw = nw };
		snprintf(sh[w].r.path, sizeof(sh[w].r.path), "%s/shard-%u.db",
		    dir, w);
		lmdb_open(&sh[w].r, full);
	}
	w0 = clock_s(CLOCK_MONOTONIC);
	for (unsigned w = 0; w < nw; w++)
		if (pthread_create(&t[w], NULL, shard_insert, &sh[w]) != 0)
			die("pthread_create failed");
	for (unsigned w = 0; w < nw; w++) {
		pthread_join(t[w], NULL);
		cpu += sh[w].ins.cpu;
		n += sh[w].ins.n;
	}
	*rate_out = (double)n / (clock_s(CLOCK_MONOTONIC) - w0);
	*us_out = cpu * 1e6 / (double)n;
	for (unsigned w = 0; w < nw; w++) {
		if (lmdb_entries(&sh[w].r, sh[w].r.msg_dbi) != sh[w].ins.n)
			die("%s: a shard lost a message", sh[w].r.path);
		lmdb_close(&sh[w].r);
	}
	if (n != o->n)
		die("shards inserted %llu of %u", (unsigned long long)n, o->n);
}

/* -w W: 1, 2, .. W shards, interleaved rounds, medians. */
static void
shard_bench(const struct opts *o, const char *dir)
{
	double rate[2][16][MAX_ROUNDS], us[2][16][MAX_ROUNDS];

	for (unsigned round = 0; round < o->rounds; round++)
		for (unsigned nw = 1; nw <= o->writers; nw *= 2)
			for (int f = 0; f < 2; f++) {
				if (!(f ? o->full : o->normal))
					continue;
				shard_run(o, dir, nw, f, &rate[f][nw - 1][round],
				    &us[f][nw - 1][round]);
				printf("shards round=%u writers=%u sync=%s"
				    " insert=%.0f/%.2f\n", round + 1, nw,
				    f ? "full" : "normal",
				    rate[f][nw - 1][round], us[f][nw - 1][round]);
				fflush(stdout);
			}
	printf("%-20s %-6s %9s %7s\n", "lmdb shards", "sync", "insert/s",
	    "us/msg");
	for (unsigned nw = 1; nw <= o->writers; nw *= 2)
		for (int f = 1; f >= 0; f--)
			if (f ? o->full : o->normal)
				printf("%-20u %-6s %9.0f %7.2f\n", nw, f ? "full" :
				    "normal", median(rate[f][nw - 1], o->rounds),
				    median(us[f][nw - 1], o->rounds));
	printf("insert/s = all writers together; us/msg = CPU per message,"
	    " summed over the writers\n");
}
#else
/* Without lmdb.h no schema is lmdb; these are never called. */
static void lmdb_insert(struct run *r, unsigned i, int64_t now)
{ (void)i, (void)now; die("%s: no LMDB", r->path); }
static void lmdb_txn(struct run *r, bool begin)
{ (void)begin; die("%s: no LMDB", r->path); }
static unsigned lmdb_scan_page(struct run *r, unsigned k)
{ (void)k; die("%s: no LMDB", r->path); }
static void lmdb_mark(struct run *r, unsigned k, int64_t id)
{ (void)k, (void)id; die("%s: no LMDB", r->path); }
static void lmdb_mark_range(struct run *r, unsigned k)
{ (void)k; die("%s: no LMDB", r->path); }
static void lmdb_run(struct run *r, bool full, struct result *res)
{ (void)full, (void)res; die("%s: no LMDB", r->path); }
#endif

/* One cell: schema s with sync full or normal, on a fresh file. */
static void
run_one(const struct opts *o, const char *dir, const struct schema *s,
    bool full, struct result *res)
{
	struct run r = { .o = o, .s = s };

	memset(res, 0, sizeof(*res));
	snprintf(r.path, sizeof(r.path), "%s/store-%c.db", dir, s->key);
	r.acct = xmalloc(o->accounts * sizeof(*r.acct));
	r.marks = xmalloc(o->group * sizeof(*r.marks));
	r.macct = xmalloc(o->group * sizeof(*r.macct));
	if (IS_LMDB(s)) {
		lmdb_run(&r, full, res);
		free(r.acct);
		free(r.marks);
		free(r.macct);
		return;
	}
	run_open(&r, full);
	run_names(&r);
	insert_all(&r, &res->ins);
	res->mib = file_mib(&r);
	drain_all(&r, res);
	check_drained(&r, res);
	run_close(&r);
	free(r.acct);
	free(r.marks);
	free(r.macct);
}

/* The messages: account and sender of each drawn at random, fixed seed. */
static void
make_messages(const struct opts *o)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	names = xmalloc(2 * o->accounts * sizeof(*names));
	for (unsigned k = 0; k < o->accounts; k++) {
		names[k] = xmalloc(16);
		names[o->accounts + k] = xmalloc(16);
		snprintf(names[k], 16, "acct%04u", k);
		snprintf(names[o->accounts + k], 16, "s%u", k);
	}
	msg_acct = xmalloc(o->n * sizeof(*msg_acct));
	msg_from = xmalloc(o->n * sizeof(*msg_from));
	for (unsigned i = 0; i < o->n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		msg_acct[i] = (unsigned)(x % o->accounts);
		msg_from[i] = (unsigned)((x >> 32) % o->accounts);
	}
	text = xmalloc(o->text);
	memset(text, 'x', o->text);
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of n values (of an even number: the mean of the middle two). */
static double
median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double
rate(const struct phase *p)
{
	return p->wall > 0 ? (double)p->n / p->wall : 0;
}

static double
cpu_us(const struct phase *p)
{
	return p->n > 0 ? p->cpu * 1e6 / (double)p->n : 0;
}

struct cell {
	const struct schema *s;
	bool	full;
	struct result r[MAX_ROUNDS];
	double	med[7];	/* insert/s, us, mark/s, us, drain/s, us, MiB */
};

static void
cell_medians(struct cell *c, unsigned rounds)
{
	double v[7][MAX_ROUNDS];

	for (unsigned i = 0; i < rounds; i++) {
		const struct result *r = &c->r[i];

		v[0][i] = rate(&r->ins), v[1][i] = cpu_us(&r->ins);
		v[2][i] = rate(&r->mark), v[3][i] = cpu_us(&r->mark);
		v[4][i] = rate(&r->scan), v[5][i] = cpu_us(&r->scan);
		v[6][i] = r->mib;
	}
	for (int j = 0; j < 7; j++)
		c->med[j] = median(v[j], rounds);
}

static void
print_table(struct cell *cells, unsigned n, const struct opts *o)
{
	printf("%-20s %-6s %9s %7s %9s %7s %9s %7s %7s\n", "schema", "sync",
	    "insert/s", "us/msg", "mark/s", "us/msg", "drain/s", "us/msg",
	    "MiB");
	for (unsigned i = 0; i < n; i++) {
		struct cell *c = &cells[i];
		char label[64];

		cell_medians(c, o->rounds);
		snprintf(label, sizeof(label), "%c %s", c->s->key, c->s->name);
		printf("%-20s %-6s %9.0f %7.2f %9.0f %7.2f %9.0f %7.2f %7.1f\n",
		    label, c->full ? "full" : "normal", c->med[0], c->med[1],
		    c->med[2], c->med[3], c->med[4], c->med[5], c->med[6]);
	}
	printf("medians of %u round%s; us/msg = CPU of the one thread per"
	    " message; drain = the scans; MiB = the file after the inserts\n",
	    o->rounds, o->rounds == 1 ? "" : "s");
}

/* The figures of issue 31 beside the best insert with sync = full. */
static void
print_yardsticks(const struct cell *cells, unsigned n)
{
	const struct cell *best = NULL, *today = NULL;

	for (unsigned i = 0; i < n; i++) {
		if (!cells[i].full)
			continue;
		if (cells[i].s->key == 'a')
			today = &cells[i];
		if (best == NULL || cells[i].med[0] > best->med[0])
			best = &cells[i];
	}
	printf("issue 31 (2 CPUs, 2026-11-24, the whole daemon over"
	    " loopback): redis appendfsync always ~340k/s at 2.9 us/msg;"
	    " store accept 157k/s at 6.8 us, drain 89k/s at 8.3 us\n");
	if (best == NULL)
		return;
	printf("here, sync = full, the engine alone on one thread:");
	if (today != NULL)
		printf(" a today inserts %.0f/s (%.2fx redis's 340k/s),",
		    today->med[0], today->med[0] / 340000.0);
	printf(" the best, %c %s, %.0f/s (%.2fx)\n", best->s->key,
	    best->s->name, best->med[0], best->med[0] / 340000.0);
}

static void __attribute__((noreturn))
usage(void)
{
	fprintf(stderr,
	    "usage: storebench [-n N] [-a ACCOUNTS] [-t BYTES] [-g PER_COMMIT]\n"
	    "                  [-S PAGE] [-R RUN] [-r ROUNDS] [-s SCHEMAS]\n"
	    "                  [-y full|normal|both] [-d DIR]\n"
	    "  -n N        messages per run                      [200000]\n"
	    "  -a A        accounts (and as many senders)        [1000]\n"
	    "  -t BYTES    text of each message                  [64]\n"
	    "  -g G        messages (inserts, marks) per commit  [7600]\n"
	    "  -S PAGE     rows a drain scan reads               [32]\n"
	    "  -R RUN      marks per account per turn            [G / A]\n"
	    "  -r ROUNDS   interleaved rounds (medians)          [3]\n"
	    "  -s KEYS     schemas, of:");
	for (size_t i = 0; i < NSCHEMAS; i++)
		fprintf(stderr, " %c (%s)", schemas[i].key, schemas[i].name);
	fprintf(stderr, "  [all]\n"
	    "  -y SYNC     PRAGMA synchronous: full, normal, both [both]\n"
	    "  -d DIR      where the files go (a disk, not tmpfs) [$TMPDIR"
	    " or /var/tmp]\n"
	    "  -w W        then LMDB inserts by 1, 2, 4 .. W writers, each on"
	    " its own file\n");
	exit(2);
}

static unsigned
num(const char *s, unsigned lo, unsigned hi)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0' || v < lo || v > hi)
		die("%s: want a number from %u to %u", s, lo, hi);
	return (unsigned)v;
}

static void
parse_opts(int argc, char **argv, struct opts *o)
{
	const char *sync = "both";
	int ch;

	while ((ch = getopt(argc, argv, "n:a:t:g:S:R:r:s:y:d:w:")) != -1) {
		switch (ch) {
		case 'n': o->n = num(optarg, 1, 100000000); break;
		case 'a': o->accounts = num(optarg, 1, 1000000); break;
		case 't': o->text = num(optarg, 0, 65536); break;
		case 'g': o->group = num(optarg, 1, 10000000); break;
		case 'S': o->page = num(optarg, 1, 256); break;
		case 'R': o->run = num(optarg, 1, 256); break;
		case 'r': o->rounds = num(optarg, 1, MAX_ROUNDS); break;
		case 's': o->schemas = optarg; break;
		case 'y': sync = optarg; break;
		case 'd': o->dir = optarg; break;
		case 'w': o->writers = num(optarg, 1, 16); break;
		default: usage();
		}
	}
	if (optind != argc)
		usage();
	o->full = strcmp(sync, "full") == 0 || strcmp(sync, "both") == 0;
	o->normal = strcmp(sync, "normal") == 0 || strcmp(sync, "both") == 0;
	if (!o->full && !o->normal)
		die("-y %s: want full, normal or both", sync);
	if (o->run == 0)
		o->run = o->group / o->accounts ? o->group / o->accounts : 1;
}

/* Each run as it ends: the spread behind the medians, and progress. */
static void
print_run(const struct cell *c, unsigned round)
{
	const struct result *r = &c->r[round];

	printf("run round=%u schema=%c sync=%s insert=%.0f/%.2f"
	    " mark=%.0f/%.2f drain=%.0f/%.2f mib=%.1f\n", round + 1,
	    c->s->key, c->full ? "full" : "normal", rate(&r->ins),
	    cpu_us(&r->ins), rate(&r->mark), cpu_us(&r->mark),
	    rate(&r->scan), cpu_us(&r->scan), r->mib);
	fflush(stdout);
}

/* The cells -s and -y ask for, schema by schema. */
static unsigned
make_cells(const struct opts *o, struct cell *cells)
{
	unsigned n = 0;

	for (const char *k = o->schemas; *k != '\0'; k++) {
		const struct schema *s = NULL;

		for (size_t i = 0; i < NSCHEMAS; i++)
			if (schemas[i].key == *k)
				s = &schemas[i];
		if (s == NULL || n + 2 > 2 * MAX_SCHEMAS)
			die("-s %s: no schema %c (or too many)", o->schemas, *k);
		if (o->full)
			cells[n++] = (struct cell){ .s = s, .full = true };
		if (o->normal)
			cells[n++] = (struct cell){ .s = s, .full = false };
	}
	return n;
}

static const char *
fs_name(const char *dir)
{
	struct statfs f;

	if (statfs(dir, &f) < 0)
		return "?";
	switch ((unsigned long)f.f_type) {
	case 0xEF53: return "ext4";
	case 0x58465342: return "xfs";
	case 0x9123683E: return "btrfs";
	case 0x794C7630: return "overlayfs";
	case 0x01021994: return "tmpfs: fsync costs nothing here";
	default: return "other";
	}
}

static void
print_header(const struct opts *o, const char *dir)
{
	printf("storebench: N=%u messages to %u accounts from %u senders,"
	    " %u-byte texts, %u per commit; drain: scans of %u, %u marks per"
	    " account per turn; %u interleaved round%s; SQLite %s; %s; %s"
	    " (%s)\n", o->n, o->accounts, o->accounts, o->text, o->group,
	    o->page, o->run, o->rounds, o->rounds == 1 ? "" : "s",
	    sqlite3_libversion(),
#if SB_LMDB
	    MDB_VERSION_STRING,
#else
	    "LMDB skipped (no lmdb.h: apt-get install liblmdb-dev)",
#endif
	    dir, fs_name(dir));
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	struct opts o = { .n = 200000, .accounts = 1000, .text = 64,
	    .group = 7600, .page = 32, .rounds = 3, .schemas = SB_SCHEMAS };
	static struct cell cells[2 * MAX_SCHEMAS];
	const char *tmp = getenv("TMPDIR");
	char dir[2048];
	unsigned ncells;

	o.dir = tmp != NULL && *tmp != '\0' ? tmp : "/var/tmp";
	parse_opts(argc, argv, &o);
	ncells = make_cells(&o, cells);
	make_messages(&o);
	if ((size_t)snprintf(dir, sizeof(dir), "%s/storebench.XXXXXX", o.dir) >=
	    sizeof(dir))
		die("-d %s: too long", o.dir);
	if (mkdtemp(dir) == NULL)
		die("%s: %s", dir, strerror(errno));
	print_header(&o, dir);
	for (unsigned round = 0; round < o.rounds; round++)
		for (unsigned i = 0; i < ncells; i++) {
			/* Rotated: no cell always runs first in a round. */
			struct cell *c = &cells[(i + round) % ncells];

			run_one(&o, dir, c->s, c->full, &c->r[round]);
			print_run(c, round);
		}
	if (rmdir(dir) < 0)
		die("%s: %s", dir, strerror(errno));
	print_table(cells, ncells, &o);
	print_yardsticks(cells, ncells);
#if SB_LMDB
	if (o.writers > 0) {
		if (mkdir(dir, 0700) < 0)
			die("%s: %s", dir, strerror(errno));
		shard_bench(&o, dir);
		if (rmdir(dir) < 0)
			die("%s: %s", dir, strerror(errno));
	}
#else
	if (o.writers > 0)
		printf("-w: LMDB skipped (no lmdb.h)\n");
#endif
	return 0;
}

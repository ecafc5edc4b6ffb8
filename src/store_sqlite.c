/*
 * store_sqlite.c: the store in one SQLite file (WAL journal), the
 * embedded default. One row per waiting message in table msg, final
 * states in fin, names in name; an operator looks with sqlite3(1) through
 * the views messages and finals. Only the store thread calls this.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "http_out.h"
#include "log.h"
#include "msg.h"
#include "receipt_map.h"
#include "store.h"
#include "store_backend.h"
#include "store_ids.h"
#include "util.h"

/* PRAGMA application_id of our files: "ERDS". */
#define STORE_APP_ID	0x45524453
#define STORE_VERSION	4
#define STR_(x)		#x
#define STR(x)		STR_(x)

/*
 * Space kept beside the store (<path>-reserve) so that a full disk still
 * lets deliveries be marked and rows be deleted: it is given back when a
 * write fails for want of room, and new messages are refused until the
 * filesystem has it again plus a margin (or the file has that much free
 * inside, once a backlog that filled the disk has drained).
 */
#define RESERVE_BYTES	((off_t)4 << 20)
#define RESERVE_MARGIN	((uint64_t)1 << 20)
/*
 * WAL between checkpoints: 64 MiB normally, 1 MiB once the filesystem
 * has less than LOW_SPACE free, so that what a checkpoint adds to the
 * file always fits in the reserve. In pages of the file's size.
 */
#define CKPT_BYTES	(64u << 20)
#define CKPT_BYTES_LOW	(1u << 20)
/*
 * The page size of a new file. 16 KiB, not SQLite's 4 KiB: a group
 * commit appends a quarter as many WAL frames (a pwrite each) and a
 * quarter as many b-tree pages are split as rows are added; stored
 * messages took 6 % less CPU each and the drain the same (measured).
 * 64 KiB took more. A file made before keeps its own size.
 */
#define PAGE_BYTES	16384
/* The page cache, KiB, of all shards together (below). */
#define CACHE_KIB	8192u
/*
 * The sweep of done (DONE_TABLE): once a group's commit leaves SWEEP_AT
 * rows in it, SWEEP_ROWS (or twice what the groups since the last sweep
 * added, if more: it keeps up) at the next tick of the store thread, after the
 * group was answered, in a transaction of its own; what is left below
 * SWEEP_AT, once a store is idle for SWEEP_IDLE s (a transaction that
 * changed nothing, such as the receipts' purge each second, is no write),
 * and at least SWEEP_ROWS every SWEEP_AGE s whatever the traffic, so
 * that a slow store's rows do not wait days for SWEEP_AT (and past their
 * validity, in the expiry index's way). The rows swept are the
 * oldest. While 1,000 accounts' backlogs drain together, the rows of the
 * last 64,000 or so messages handed out, some delivered and some not,
 * share their pages: swept at 65,536, most pages were rewritten several
 * times, a row at a time (2.8 KB written per message delivered, three
 * times what delivering it wrote); at 262,144 a shard (of two) the oldest
 * rows' pages are all done with, and sweeping writes a third as much. A
 * small store (max_bytes under 1 GiB) sweeps at one row per SWEEP_BYTES
 * of it. The count is the whole store's, shared by its shards, each at
 * least SWEEP_AT_MIN: what waits in done stays small beside what the
 * files may hold (a tenth, for SMS-sized rows).
 */
#define SWEEP_AT	524288
#define SWEEP_BYTES	2048
#define SWEEP_AT_MIN	256
#define SWEEP_ROWS	16384u
#define SWEEP_IDLE	5
#define SWEEP_AGE	60
/*
 * Short of space (low, spent): a message that leaves is deleted at once,
 * as it frees room a sweep would free only later, and a sweep of
 * SWEEP_ROWS_LOW, a WAL's worth the reserve holds, runs every second.
 */
#define SWEEP_ROWS_LOW	1024u
/* The ids one scan statement looks up (?1 .. ?32 of ST_SCAN). */
#define SCAN_IDS	32
#define LOW_SPACE	((uint64_t)64 << 20)

/*
 * Schema 3. Accounts and submitters are keys into name (each name once,
 * kept in memory: struct names): a row stores integers, not text (a fifth
 * less CPU per insert, mark and scan, measured). Key 0 is the empty name
 * (no submitter). An account's waiting messages are found through ids
 * kept in memory (store_ids.h), not an index by account in the file
 * (schema 2's msg_backlog): that index took a page write per account per
 * group commit, and with it the store took messages at two thirds of the
 * rate it does without.
 */
/*
 * For sqlite3(1): the waiting messages with their names
 * (docs/operations.md).
 */
#define MESSAGES_VIEW \
    "CREATE VIEW messages AS SELECT m.id, a.name AS account," \
    " s.name AS submitter, m.src, m.dst, m.state, m.submitted, m.due," \
    " m.expires, m.final_date, m.attempts, m.flags, m.text FROM msg m" \
    " JOIN name a ON a.id = m.account JOIN name s ON s.id = m.submitter" \
    " WHERE NOT EXISTS (SELECT 1 FROM done d WHERE d.id = m.id)" \
    " AND (m.id > ifnull((SELECT u.id FROM upto u" \
    " WHERE u.account = m.account), 0)" \
    " OR EXISTS (SELECT 1 FROM below w WHERE w.id = m.id));"
/*
 * A message that left the waiting ones (delivered, expired, ...) is not
 * deleted from msg then: its id goes into done, an append at the end of
 * a small tree, and its row stays until a sweep deletes the oldest rows
 * of done from msg, many at once and in id order (sweep()). Deleted
 * one by one as they were delivered, rows of 1,000 accounts' backlogs
 * interleaved in id order each cost a page written to the WAL per group:
 * the drain did three fifths as much. A row whose id is in done is no
 * message.
 */
#define DONE_TABLE "CREATE TABLE done (id INTEGER PRIMARY KEY);"
/*
 * Most messages leave in the order they came, and so most of what done
 * would hold is one mark per account (schema 4): every row of the account
 * up to the id in upto has left, but those in below. A message that
 * leaves while one before it waits (a retry, a schedule, an SMPP answer
 * out of order) goes into done as before. A message stored under its
 * account's mark (ids from different reactors come out of order, and a
 * drained account's mark is its last delivered id) goes into below, and
 * out of it when it leaves; a mark never goes down. An insert into done
 * per message delivered was a third of the drain's CPU; a mark is written
 * once a group for each account the group delivered to. The rows a mark
 * covers are deleted by the sweep as those of done are (the store keeps
 * their ids in memory, and reads them back at start).
 */
#define UPTO_TABLE "CREATE TABLE IF NOT EXISTS upto (" \
    " account INTEGER PRIMARY KEY, id INTEGER NOT NULL);" \
    "CREATE TABLE IF NOT EXISTS below (id INTEGER PRIMARY KEY);"

static const char schema[] =
    DONE_TABLE
    UPTO_TABLE
    "CREATE TABLE name ("
    " id INTEGER PRIMARY KEY,"
    " name TEXT NOT NULL UNIQUE"
    ");"
    "INSERT INTO name VALUES (0, '');"
    "CREATE TABLE msg ("
    " id INTEGER PRIMARY KEY,"		/* the message id submitters know */
    " account INTEGER NOT NULL,"	/* name: the recipient account */
    " submitter INTEGER NOT NULL,"	/* name: receipts go here; may query */
    " src TEXT NOT NULL,"		/* from */
    " dst TEXT NOT NULL,"		/* to, as the sender gave it */
    " state INTEGER NOT NULL,"		/* SMPP message_state: 1 ENROUTE */
    " submitted INTEGER NOT NULL,"	/* unix time */
    " due INTEGER NOT NULL,"		/* not before */
    " expires INTEGER NOT NULL,"	/* not after */
    " final_date INTEGER NOT NULL,"	/* when it left ENROUTE */
    " attempts INTEGER NOT NULL,"	/* temporary failures */
    " flags INTEGER NOT NULL,"
    " text BLOB NOT NULL,"
    " smpp BLOB NOT NULL"		/* TON/NPI, esm_class, ... packed */
    ");"
    "CREATE INDEX msg_expiry ON msg(expires) WHERE state = 1;"
    /*
     * A message in a final state leaves msg for fin, kept for query_sm:
     * only what it answers with, and only where a submitter can ask
     * (STORE_FINAL_NOT_KEPT). Shrunk in place, its row in msg would keep
     * the page it was on (SQLite merges pages on deletes, not on
     * updates): the file would grow with every message ever delivered
     * until the purge. Small, in id order, fin rows pack densely and
     * count against the limits.
     */
    "CREATE TABLE fin ("
    " id INTEGER PRIMARY KEY,"
    " account INTEGER NOT NULL,"
    " submitter INTEGER NOT NULL,"
    " state INTEGER NOT NULL,"
    " final_date INTEGER NOT NULL"
    ");"
    MESSAGES_VIEW
    "CREATE VIEW finals AS SELECT f.id, a.name AS account,"
    " s.name AS submitter, f.state, f.final_date FROM fin f"
    " JOIN name a ON a.id = f.account JOIN name s ON s.id = f.submitter;"
    "PRAGMA user_version = " STR(STORE_VERSION) ";";
/*
 * Schema 1 (user_version 1, or 0 before it was set) keyed rows by the
 * names' text; older files of it have no fin, their final rows in msg.
 * Migrated in place at open, in one transaction: the old tables renamed,
 * the new made, the rows copied with keys, the old dropped.
 */
static const char migrate_fin[] =
    "CREATE TABLE fin (id INTEGER PRIMARY KEY, account TEXT NOT NULL,"
    " submitter TEXT NOT NULL, state INTEGER NOT NULL,"
    " final_date INTEGER NOT NULL);"
    "INSERT INTO fin SELECT id, account, submitter, state, final_date"
    " FROM msg WHERE state <> 1;"
    "DELETE FROM msg WHERE state <> 1;";
static const char migrate_old[] =
    "ALTER TABLE msg RENAME TO msg1;"
    "ALTER TABLE fin RENAME TO fin1;"
    "DROP INDEX IF EXISTS msg_backlog;"
    "DROP INDEX IF EXISTS msg_expiry;";
static const char migrate_copy[] =
    "INSERT OR IGNORE INTO name (name) SELECT account FROM msg1 UNION"
    " SELECT submitter FROM msg1 UNION SELECT account FROM fin1 UNION"
    " SELECT submitter FROM fin1;"
    "INSERT INTO msg SELECT m.id, a.id, s.id, m.src, m.dst, m.state,"
    " m.submitted, m.due, m.expires, m.final_date, m.attempts, m.flags,"
    " m.text, m.smpp FROM msg1 m JOIN name a ON a.name = m.account"
    " JOIN name s ON s.name = m.submitter;"
    "INSERT INTO fin SELECT f.id, a.id, s.id, f.state, f.final_date"
    " FROM fin1 f JOIN name a ON a.name = f.account"
    " JOIN name s ON s.name = f.submitter;"
    "DROP TABLE msg1;"
    "DROP TABLE fin1;";
/* HTTP posts not yet answered (http_out.h): a restart posts them. */
static const char post_schema[] =
    /* Schema 3 files made before it had done (never released). */
    "CREATE TABLE IF NOT EXISTS done (id INTEGER PRIMARY KEY);"
    UPTO_TABLE
    "CREATE TABLE IF NOT EXISTS post ("
    " id INTEGER PRIMARY KEY,"
    " url TEXT NOT NULL,"
    " body TEXT"			/* NULL: a GET */
    ");"
    "CREATE TABLE IF NOT EXISTS awaited ("	/* receipts, by message id */
    " id INTEGER PRIMARY KEY,"
    " url TEXT NOT NULL,"
    " json INTEGER NOT NULL,"		/* receipt_url, else a dlr-url */
    " mask INTEGER NOT NULL,"		/* Kannel's dlr-mask */
    " dst TEXT NOT NULL,"
    " src TEXT NOT NULL,"
    " deadline INTEGER NOT NULL"	/* forgotten after it */
    ");";
enum {
	ST_PUT, ST_UPDATE, ST_MARK, ST_FIN_ADD, ST_DELETE, ST_GET, ST_FIN_GET,
	ST_SCAN, ST_EXPIRED, ST_BY_DEST, ST_FIN_SCAN, ST_FIN_DEL, ST_FINALS,
	ST_BACKLOGS, ST_OLDEST, ST_WAITING, ST_MAX_ID, ST_POST_PUT,
	ST_POST_DEL, ST_POSTS, ST_WANT_PUT, ST_WANT_DEL, ST_WANTS, ST_NAME_PUT,
	ST_DONE, ST_DONE_DEL, ST_SWEEP_LAST, ST_SWEEP_MSG, ST_SWEEP_DONE,
	ST_UPTO_PUT, ST_GONE, ST_BELOW_PUT, ST_BELOW_DEL, ST_N
};

/* Not a row that left the waiting messages (DONE_TABLE, UPTO_TABLE). */
#define NOT_DONE " AND NOT EXISTS (SELECT 1 FROM done WHERE done.id = msg.id)" \
    " AND (msg.id > ifnull((SELECT upto.id FROM upto" \
    " WHERE upto.account = msg.account), 0)" \
    " OR EXISTS (SELECT 1 FROM below WHERE below.id = msg.id))"

static const char *const sql[ST_N] = {
	[ST_PUT] = "INSERT INTO msg (id, account, submitter, src, dst, state,"
	    " submitted, due, expires, final_date, attempts, flags, text, smpp)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,"
	    " ?14)",
	[ST_UPDATE] = "UPDATE msg SET state = ?6, due = ?8, expires = ?9,"
	    " final_date = ?10, attempts = ?11, flags = ?12, text = ?13,"
	    " smpp = ?14 WHERE id = ?1" NOT_DONE,
	[ST_MARK] = "UPDATE msg SET state = ?2, final_date = ?3, due = ?4,"
	    " attempts = ?5 WHERE id = ?1" NOT_DONE,
	/*
	 * Final: to fin where a submitter can ask (?4: STORE_FINAL_NOT_KEPT),
	 * then out of msg. A DELETE ... RETURNING the row's flags, then an
	 * INSERT where kept, cost half as much again (storebench). Not run
	 * for a message the store knows keeps none (mark's final_row).
	 */
	[ST_FIN_ADD] = "INSERT OR REPLACE INTO fin SELECT id, account,"
	    " submitter, ?2, ?3"
	    " FROM msg WHERE id = ?1 AND submitter <> 0 AND flags & ?4 = 0",
	[ST_DELETE] = "DELETE FROM msg WHERE id = ?1",
	/*
	 * Not INSERT ... SELECT id FROM msg WHERE id = ?1, which would keep
	 * an id without a row out: that reads the row's page again, a
	 * third more CPU per delivered message (measured). sqlite_put drops
	 * what a stale id may hide instead.
	 */
	[ST_DONE] = "INSERT OR IGNORE INTO done VALUES (?1)",
	[ST_DONE_DEL] = "DELETE FROM done WHERE id = ?1",
	/* The sweep: up to ?1 of the oldest in done, out of msg and done. */
	[ST_SWEEP_LAST] = "SELECT max(id) FROM (SELECT id FROM done"
	    " ORDER BY id LIMIT ?1)",
	[ST_SWEEP_MSG] = "DELETE FROM msg WHERE id IN (SELECT id FROM done"
	    " WHERE id <= ?1)",
	[ST_SWEEP_DONE] = "DELETE FROM done WHERE id <= ?1",
#define COLS "id, account, submitter, src, dst, state, submitted, due," \
	" expires, final_date, attempts, flags, text, smpp"
	[ST_GET] = "SELECT " COLS " FROM msg WHERE id = ?1" NOT_DONE,
	/*
	 * SCAN_IDS ids of an account's, from memory: one statement, so one
	 * read transaction for them all (one for each, outside the store's
	 * transactions, cost more than the rows). No look into done: an id
	 * leaves the ids in memory as it goes into done (mark_final), and
	 * comes in only from rows that are not there (put, after drop_done;
	 * update and mark, whose statements skip done; the load at start).
	 * The look cost a twentieth of the drain's rate.
	 */
	[ST_SCAN] = "SELECT " COLS " FROM msg WHERE id IN (?1, ?2, ?3, ?4,"
	    " ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,"
	    " ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31,"
	    " ?32) AND state = 1 AND account = ?33 ORDER BY id",
	[ST_FIN_GET] = "SELECT id, account, submitter, state, final_date"
	    " FROM fin WHERE id = ?1",
	[ST_EXPIRED] = "SELECT " COLS " FROM msg WHERE state = 1 AND"
	    " expires <= ?1" NOT_DONE " ORDER BY expires LIMIT ?2",
	[ST_BY_DEST] = "SELECT " COLS " FROM msg WHERE state = 1 AND"
	    " submitter = ?1 AND dst = ?2" NOT_DONE " ORDER BY id LIMIT ?3",
#undef COLS
/* A key the name table lacks (an edited file) counts as an empty name. */
#define FINAL_BYTES "ifnull(length(a.name), 0) + ifnull(length(s.name), 0)" \
	" + " STR(STORE_FINAL_ROW)
#define FIN_NAMES " FROM fin f LEFT JOIN name a ON a.id = f.account" \
	" LEFT JOIN name s ON s.id = f.submitter"
	[ST_FIN_SCAN] = "SELECT f.id, f.final_date, " FINAL_BYTES FIN_NAMES
	    " WHERE f.id > ?1 ORDER BY f.id LIMIT ?2",
	[ST_FIN_DEL] = "DELETE FROM fin WHERE id = ?1",
	[ST_FINALS] = "SELECT count(*), total(" FINAL_BYTES ")" FIN_NAMES,
#undef FIN_NAMES
#undef FINAL_BYTES
	/*
	 * NOT INDEXED and in rowid order: the partial index msg_expiry
	 * matches state = 1, and through it the rows come in random order
	 * (and the ids out of order, each an insert into a list).
	 */
	[ST_BACKLOGS] = "SELECT account, submitter, length(text) +"
	    " length(src) + length(dst) + length(smpp) FROM msg NOT INDEXED"
	    " WHERE state = 1" NOT_DONE,
	[ST_OLDEST] = "SELECT submitted FROM msg WHERE id = ?1",
	[ST_WAITING] = "SELECT id, account FROM msg NOT INDEXED"
	    " WHERE state = 1" NOT_DONE " ORDER BY id",
	[ST_MAX_ID] = "SELECT max(coalesce((SELECT max(id) FROM msg), 0),"
	    " coalesce((SELECT max(id) FROM fin), 0),"
	    " coalesce((SELECT max(id) FROM upto), 0))",
	[ST_POST_PUT] = "INSERT OR REPLACE INTO post (id, url, body)"
	    " VALUES (?1, ?2, ?3)",
	[ST_POST_DEL] = "DELETE FROM post WHERE id = ?1",
	[ST_POSTS] = "SELECT id, url, body FROM post ORDER BY id",
	[ST_WANT_PUT] = "INSERT OR REPLACE INTO awaited (id, url, json, mask,"
	    " dst, src, deadline) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	[ST_WANT_DEL] = "DELETE FROM awaited WHERE id = ?1",
	[ST_WANTS] = "SELECT id, url, json, mask, dst, src, deadline"
	    " FROM awaited",
	[ST_NAME_PUT] = "INSERT INTO name (id, name) VALUES (?1, ?2)",
	[ST_UPTO_PUT] = "INSERT INTO upto (account, id) VALUES (?1, ?2)"
	    " ON CONFLICT (account) DO UPDATE SET id = excluded.id",
	/* Rows a mark hides, for the sweep (msg first: one pass over it). */
	[ST_GONE] = "SELECT m.id FROM msg m NOT INDEXED CROSS JOIN upto u"
	    " ON u.account = m.account WHERE m.id <= u.id AND NOT EXISTS"
	    " (SELECT 1 FROM below w WHERE w.id = m.id) AND NOT EXISTS"
	    " (SELECT 1 FROM done d WHERE d.id = m.id)",
	[ST_BELOW_PUT] = "INSERT OR IGNORE INTO below VALUES (?1)",
	[ST_BELOW_DEL] = "DELETE FROM below WHERE id = ?1",
};

/*
 * The names (accounts, submitters) and their keys, in memory: by key in
 * v (ascending: new keys are the highest plus one), by name through a
 * hash of indexes into v. What the open transaction added is past
 * committed: a transaction that does not commit takes it away again, so
 * that no key is used that the file does not have.
 */
struct names {
	struct name_ent {
		int64_t	key;
		char	*name;
		/*
		 * The account's mark (UPTO_TABLE), as written in the open
		 * transaction, and as committed; dirty: changed in the open
		 * transaction (in upto_dirty).
		 */
		uint64_t upto, upto_file, upto_saved;
		bool	dirty;
	} *v;
	size_t	n, cap;
	size_t	committed;
	uint32_t *slot;			/* index in v + 1; 0 empty */
	size_t	nslot;			/* a power of two, over twice n */
};

struct store_backend {
	sqlite3	*db;
	sqlite3_stmt *st[ST_N];
	struct names names;
	struct store_ids ids;		/* by the account's place in names */
	uint64_t ndone;			/* rows in done and gone, about */
	/* Names whose mark the open transaction changed (by place). */
	size_t	*upto_dirty;
	size_t	nupto_dirty, capupto_dirty;
	bool	upto_unwritten;		/* a mark the file lacks yet */
	/* Ids of rows a mark hides, not swept yet, and how many then. */
	uint64_t *gone;
	size_t	ngone, capgone, ngone_begin;
	size_t	gone_swept;		/* by the sweep not yet committed */
	bool	gone_sorted;
	uint64_t grown;			/* rows added since the last sweep */
	uint64_t ndone_begin;		/* ndone at the transaction's begin */
	uint64_t grown_begin;		/* grown then */
	bool	sweep_due;		/* a sweep at the next poll */
	uint64_t done_max;		/* no id in done is higher */
	uint64_t sweep_at;		/* SWEEP_AT, less for a small store */
	time_t	committed;		/* the last commit that wrote */
	time_t	swept;			/* the last sweep */
	int	changes_begin;		/* sqlite3_total_changes at begin */
	int	version;		/* the file's schema, as opened */
	sqlite3_stmt *rc[4];		/* the receipt ids' (RC_*) */
	bool	sync_full;		/* the configured sync */
	int	synchronous;		/* what the connection has now */
	char	path[4096];
	char	dir[4096];		/* path's directory: its free space */
	int	reserve_fd;		/* -1: none (or none possible) */
	bool	no_reserve;		/* the filesystem cannot keep one */
	bool	held;			/* the reserve is on disk */
	bool	spent;			/* no room: refuse new messages */
	int	page_size;
	bool	low;			/* short of space: checkpoint often */
	time_t	polled;
	/* The files opened, to see that nobody removes or replaces them. */
	struct file_id {
		dev_t	dev;
		ino_t	ino;
		bool	known;
	} db_id, wal_id;
};

static int sweep(struct store_backend *b, unsigned n);
static int sweep_alone(struct store_backend *b, unsigned n);

/* The slot of name: its index in v + 1 there, or an empty one. */
static size_t
names_slot(const struct names *nm, const char *name)
{
	size_t i = fnv1a_str(name) & (nm->nslot - 1);

	while (nm->slot[i] != 0 &&
	    strcmp(nm->v[nm->slot[i] - 1].name, name) != 0)
		i = (i + 1) & (nm->nslot - 1);
	return i;
}

/* Indexes v[0..n) again, in a table over twice as large as n. */
static void
names_rehash(struct names *nm)
{
	size_t want = 64;

	while (want < 2 * nm->n + 2)
		want *= 2;
	if (want != nm->nslot) {
		free(nm->slot);
		nm->slot = xcalloc(want, sizeof(*nm->slot));
		nm->nslot = want;
	} else
		memset(nm->slot, 0, want * sizeof(*nm->slot));
	for (size_t i = 0; i < nm->n; i++)
		nm->slot[names_slot(nm, nm->v[i].name)] = (uint32_t)i + 1;
}

static void
names_add(struct names *nm, int64_t key, const char *name)
{
	if (nm->n == nm->cap) {
		nm->cap = nm->cap ? nm->cap * 2 : 64;
		nm->v = xrealloc(nm->v, nm->cap * sizeof(*nm->v));
	}
	nm->v[nm->n].key = key;
	nm->v[nm->n].upto = nm->v[nm->n].upto_file = 0;
	nm->v[nm->n].upto_saved = 0;
	nm->v[nm->n].dirty = false;
	nm->v[nm->n++].name = xstrdup(name);
	if (2 * nm->n + 2 > nm->nslot)
		names_rehash(nm);
	else
		nm->slot[names_slot(nm, name)] = (uint32_t)nm->n;
}

/* Forgets the names past n (a transaction that did not commit). */
static void
names_cut(struct names *nm, size_t n)
{
	if (nm->n <= n)
		return;
	while (nm->n > n)
		free(nm->v[--nm->n].name);
	names_rehash(nm);
}

static void
names_free(struct names *nm)
{
	names_cut(nm, 0);
	free(nm->v);
	free(nm->slot);
}

/* The place in names of key; false for a key the table lacks. */
static bool
names_pos(const struct names *nm, int64_t key, size_t *pos)
{
	size_t lo = 0, hi = nm->n;

	/* Keys are dense but for rows deleted by hand: look there first. */
	if (key >= 0 && (uint64_t)key < nm->n && nm->v[key].key == key) {
		*pos = (size_t)key;
		return true;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (nm->v[mid].key == key) {
			*pos = mid;
			return true;
		}
		if (nm->v[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* Name key's text; "" for a key the table lacks. */
static const char *
names_get(const struct names *nm, int64_t key)
{
	size_t pos;

	return names_pos(nm, key, &pos) ? nm->v[pos].name : "";
}

/*
 * The SMPP fields, packed: version, numbers, fixed-width strings. Version
 * 2 has the same layout; its row's flags say how to read the text
 * (MSG_F_CODING). A version 1 row is from before they did: one with SMPP
 * fields that is not a receipt came from an SMPP client, its text in
 * data_coding, and data_coding 0 in the default GSM 03.38.
 */
#define SMPP_BLOB_LEN	(1 + 8 + 6 + 8 + 21 + 21 + 24)
#define SMPP_BLOB_VERSION	2

static void
pack_smpp(const struct msg *m, uint8_t *p)
{
	*p++ = SMPP_BLOB_VERSION;
	*p++ = m->src_ton;
	*p++ = m->src_npi;
	*p++ = m->dst_ton;
	*p++ = m->dst_npi;
	*p++ = m->esm_class;
	*p++ = m->data_coding;
	*p++ = m->registered_delivery;
	*p++ = m->message_state;
	memcpy(p, &m->umr, 2), p += 2;
	memcpy(p, &m->sar_ref, 2), p += 2;
	*p++ = m->sar_total;
	*p++ = m->sar_seq;
	memcpy(p, &m->sender_ref, 4), p += 4;
	memcpy(p, &m->sender_cmd, 4), p += 4;
	memcpy(p, m->src_addr, 21), p += 21;
	memcpy(p, m->dst_addr, 21), p += 21;
	memcpy(p, m->receipted_id, 24);
}

static bool
unpack_smpp(struct msg *m, const uint8_t *p, size_t n)
{
	if (n == 0)
		return true;	/* none: the fields stay zero */
	if (n != SMPP_BLOB_LEN || (*p != 1 && *p != SMPP_BLOB_VERSION))
		return false;
	if (*p++ == 1 && !(m->flags & MSG_F_RECEIPT))
		m->flags |= MSG_F_CODED;
	m->src_ton = *p++;
	m->src_npi = *p++;
	m->dst_ton = *p++;
	m->dst_npi = *p++;
	m->esm_class = *p++;
	m->data_coding = *p++;
	m->registered_delivery = *p++;
	m->message_state = *p++;
	memcpy(&m->umr, p, 2), p += 2;
	memcpy(&m->sar_ref, p, 2), p += 2;
	m->sar_total = *p++;
	m->sar_seq = *p++;
	memcpy(&m->sender_ref, p, 4), p += 4;
	memcpy(&m->sender_cmd, p, 4), p += 4;
	memcpy(m->src_addr, p, 21), p += 21;
	memcpy(m->dst_addr, p, 21), p += 21;
	memcpy(m->receipted_id, p, 24);
	m->src_addr[20] = m->dst_addr[20] = m->receipted_id[23] = '\0';
	return true;
}

/* Flags a stored message keeps. */
#define KEPT_FLAGS (MSG_F_PREFIX_FIRST | MSG_F_EXACT | \
	MSG_F_RECEIPT | MSG_F_UMR | MSG_F_SAR | MSG_F_LINE_TEXT | \
	MSG_F_CODING | MSG_F_HTTP_RCPT | MSG_F_LINE_CLIENT)

/*
 * Whether m has SMPP fields worth keeping: a line client's message has
 * none, and stored without them a row is half the size.
 */
static bool
has_smpp(const struct msg *m)
{
	return m->src_ton || m->src_npi || m->dst_ton || m->dst_npi ||
	    m->esm_class || m->data_coding || m->registered_delivery ||
	    m->message_state || m->umr || m->sar_ref || m->sar_total ||
	    m->sar_seq || m->sender_ref || m->sender_cmd || m->src_addr[0] ||
	    m->dst_addr[0] || m->receipted_id[0];
}

/* Binds rec's columns; its names by the keys the caller found. */
static void
bind_rec(sqlite3_stmt *st, const struct store_rec *rec, int64_t account,
    int64_t submitter)
{
	const struct msg *m = rec->m;
	uint8_t blob[SMPP_BLOB_LEN];
	bool smpp = has_smpp(m);

	if (smpp)
		pack_smpp(m, blob);
	sqlite3_bind_int64(st, 1, (sqlite3_int64)m->id);
	sqlite3_bind_int64(st, 2, account);
	sqlite3_bind_int64(st, 3, submitter);
	sqlite3_bind_text(st, 4, m->from, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, m->to, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 6, rec->state);
	sqlite3_bind_int64(st, 7, (sqlite3_int64)m->submitted);
	sqlite3_bind_int64(st, 8, (sqlite3_int64)rec->due);
	sqlite3_bind_int64(st, 9, (sqlite3_int64)rec->expires);
	sqlite3_bind_int64(st, 10, (sqlite3_int64)rec->final_date);
	sqlite3_bind_int64(st, 11, rec->attempts);
	sqlite3_bind_int64(st, 12, m->flags & KEPT_FLAGS);
	sqlite3_bind_blob(st, 13, m->text, (int)m->len, SQLITE_STATIC);
	sqlite3_bind_blob(st, 14, blob, smpp ? (int)sizeof(blob) : 0,
	    SQLITE_TRANSIENT);
}

static void
copy_col(sqlite3_stmt *st, int col, char *out, size_t len)
{
	const unsigned char *t = sqlite3_column_text(st, col);

	str_copy(out, len, t != NULL ? (const char *)t : "");
}

/* Column col, a name's key, as its text into out. */
static void
copy_name(const struct names *nm, sqlite3_stmt *st, int col, char *out,
    size_t len)
{
	str_copy(out, len, names_get(nm, sqlite3_column_int64(st, col)));
}

/* The row st is on, as a record with a message of its own. */
static bool
read_rec(const struct names *nm, sqlite3_stmt *st, struct store_rec *rec)
{
	int len = sqlite3_column_bytes(st, 12);
	const void *text = sqlite3_column_blob(st, 12);
	struct msg *m = msg_new((size_t)len);

	if (len > 0)
		memcpy(m->text, text, (size_t)len);
	m->len = (size_t)len;
	m->id = (uint64_t)sqlite3_column_int64(st, 0);
	copy_name(nm, st, 1, rec->account, sizeof(rec->account));
	copy_name(nm, st, 2, m->reply_to, sizeof(m->reply_to));
	copy_col(st, 3, m->from, sizeof(m->from));
	copy_col(st, 4, m->to, sizeof(m->to));
	rec->state = (uint8_t)sqlite3_column_int(st, 5);
	m->submitted = (uint64_t)sqlite3_column_int64(st, 6);
	rec->due = (uint64_t)sqlite3_column_int64(st, 7);
	rec->expires = (uint64_t)sqlite3_column_int64(st, 8);
	rec->final_date = (uint64_t)sqlite3_column_int64(st, 9);
	rec->attempts = (uint32_t)sqlite3_column_int64(st, 10);
	m->flags = (uint32_t)sqlite3_column_int64(st, 11) & KEPT_FLAGS;
	m->due = rec->due;
	m->expires = rec->expires;
	rec->m = m;
	if (!unpack_smpp(m, sqlite3_column_blob(st, 13),
	    (size_t)sqlite3_column_bytes(st, 13))) {
		msg_free(m);
		rec->m = NULL;
		return false;
	}
	return true;
}

static void
done_stmt(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* A write failed for want of room: refuse new messages, free the reserve. */
static void
reserve_spend(struct store_backend *b)
{
	b->spent = true;
	/* Truncated, not removed: taking it back needs no new inode. */
	if (b->held && ftruncate(b->reserve_fd, 0) == 0)
		b->held = false;
}

/* Takes the reserve (again). Whether it is held now. */
static bool
reserve_take(struct store_backend *b)
{
	char path[sizeof(b->path) + 16];
	int e;

	if (b->no_reserve || b->held)
		return b->held;
	if (b->reserve_fd < 0) {
		snprintf(path, sizeof(path), "%s-reserve", b->path);
		b->reserve_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (b->reserve_fd < 0) {
			b->no_reserve = true;
			return false;
		}
	}
	if ((e = posix_fallocate(b->reserve_fd, 0, RESERVE_BYTES)) == 0)
		return b->held = true;
	(void)ftruncate(b->reserve_fd, 0);	/* what part of it it got */
	if (e != ENOSPC && e != EDQUOT) {
		/* A filesystem that cannot allocate: no reserve. */
		close(b->reserve_fd);
		b->reserve_fd = -1;
		b->no_reserve = true;
	}
	return false;
}

/* Whether rc (of a step or an exec) means the disk is full. */
static bool
is_full(struct store_backend *b, int rc)
{
	int sys = sqlite3_system_errno(b->db);

	return (rc & 0xff) == SQLITE_FULL || sys == ENOSPC || sys == EDQUOT;
}

/* Steps a statement that returns no rows. 0, or -1. */
static int
exec_stmt(struct store_backend *b, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	if (rc != SQLITE_DONE && is_full(b, rc))
		reserve_spend(b);
	done_stmt(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

/* Calls fn for each row st returns; the count, or -1. */
static int
each_rec(struct store_backend *b, sqlite3_stmt *st, store_rec_fn *fn,
    void *arg)
{
	int rc, n = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_rec rec;
		int stop;

		memset(&rec, 0, sizeof(rec));
		if (!read_rec(&b->names, st, &rec))
			continue;	/* a row we cannot read: left alone */
		n++;
		stop = fn(&rec, arg);
		free(rec.m);
		if (stop)
			break;
	}
	done_stmt(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? n : -1;
}

/*
 * The marks the open transaction changed: kept as committed (saved), or
 * back to what was committed.
 */
static void
upto_settle(struct store_backend *b, bool saved)
{
	struct names *nm = &b->names;

	for (size_t i = 0; i < b->nupto_dirty; i++) {
		struct name_ent *e = &nm->v[b->upto_dirty[i]];

		if (saved)
			e->upto_saved = e->upto;
		else
			e->upto = e->upto_file = e->upto_saved;
		e->dirty = false;
	}
	b->nupto_dirty = 0;
	b->upto_unwritten = false;
}

/* Pos's mark is v, in the open transaction. */
static void
upto_set(struct store_backend *b, size_t pos, uint64_t v)
{
	struct name_ent *e = &b->names.v[pos];

	if (!e->dirty) {
		if (b->nupto_dirty == b->capupto_dirty) {
			b->capupto_dirty = b->capupto_dirty ?
			    b->capupto_dirty * 2 : 64;
			b->upto_dirty = xrealloc(b->upto_dirty,
			    b->capupto_dirty * sizeof(*b->upto_dirty));
		}
		b->upto_dirty[b->nupto_dirty++] = pos;
		e->dirty = true;
	}
	e->upto = v;
	b->upto_unwritten = true;
}

/*
 * Writes the marks the open transaction changed, at its commit, or before
 * a statement that reads them (what it finds must have left). 0, or -1.
 */
static int
upto_write(struct store_backend *b)
{
	sqlite3_stmt *st = b->st[ST_UPTO_PUT];

	if (!b->upto_unwritten)
		return 0;
	/* Ended by SQLite itself (a failed write): nothing outside it. */
	if (sqlite3_get_autocommit(b->db))
		return -1;
	for (size_t i = 0; i < b->nupto_dirty; i++) {
		struct name_ent *e = &b->names.v[b->upto_dirty[i]];

		if (e->upto == e->upto_file)
			continue;
		sqlite3_bind_int64(st, 1, e->key);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)e->upto);
		if (exec_stmt(b, st) < 0)
			return -1;
		e->upto_file = e->upto;
	}
	b->upto_unwritten = false;
	return 0;
}

static void
gone_add(struct store_backend *b, uint64_t id)
{
	if (b->ngone == b->capgone) {
		b->capgone = b->capgone ? b->capgone * 2 : 1024;
		b->gone = xrealloc(b->gone, b->capgone * sizeof(*b->gone));
	}
	if (b->ngone > 0 && id < b->gone[b->ngone - 1])
		b->gone_sorted = false;
	b->gone[b->ngone++] = id;
	b->ndone++;
	b->grown++;
}

/*
 * Outside a transaction, what one added or took away that did not commit
 * (rolled back, or by SQLite itself on a failed write) is undone in the
 * file: in memory too, the waiting ids and the marks first (they are by
 * the names' places), then the names.
 */
static void
settle(struct store_backend *b)
{
	if (!sqlite3_get_autocommit(b->db))
		return;
	if (b->ids.journal) {
		store_ids_undo(&b->ids);
		b->ndone = b->ndone_begin;
		b->grown = b->grown_begin;
		upto_settle(b, false);
		if (b->ngone > b->ngone_begin)
			b->ngone = b->ngone_begin;
	}
	names_cut(&b->names, b->names.committed);
}

/*
 * The key of name into *key and its place in the names into *pos (NULL:
 * not wanted): 1. None yet: 0, or with make one added (in the open
 * transaction, if one is) and 1. -1 when that failed.
 */
static int
name_key(struct store_backend *b, const char *name, bool make, int64_t *key,
    size_t *pos)
{
	struct names *nm = &b->names;
	sqlite3_stmt *st = b->st[ST_NAME_PUT];
	size_t i;

	settle(b);
	i = names_slot(nm, name);
	if (nm->slot[i] != 0) {
		*key = nm->v[nm->slot[i] - 1].key;
		if (pos != NULL)
			*pos = nm->slot[i] - 1;
		return 1;
	}
	if (!make)
		return 0;
	*key = nm->n > 0 ? nm->v[nm->n - 1].key + 1 : 1;
	sqlite3_bind_int64(st, 1, *key);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	if (exec_stmt(b, st) < 0)
		return -1;
	names_add(nm, *key, name);
	if (pos != NULL)
		*pos = nm->n - 1;
	if (sqlite3_get_autocommit(b->db))
		nm->committed = nm->n;
	return 1;
}

/*
 * Reads every waiting message's id into b->ids, by account. A row whose
 * account the name table lacks (an edited file) is left out: no account
 * can ask for it. 0, or -1.
 */
static int
ids_load(struct store_backend *b)
{
	sqlite3_stmt *st = b->st[ST_WAITING];
	int rc;

	store_ids_fini(&b->ids);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		size_t pos;

		if (names_pos(&b->names, sqlite3_column_int64(st, 1), &pos))
			store_ids_add(&b->ids, pos,
			    (uint64_t)sqlite3_column_int64(st, 0));
	}
	done_stmt(st);
	store_ids_trim(&b->ids);
	return rc == SQLITE_DONE ? 0 : -1;
}

/*
 * Reads the accounts' marks (UPTO_TABLE), and the ids of the rows they
 * hide into gone, for the sweep. 0, or -1.
 */
static int
upto_load(struct store_backend *b)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(b->db, "SELECT account, id FROM upto", -1, &st,
	    NULL) != SQLITE_OK)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		size_t pos;

		if (names_pos(&b->names, sqlite3_column_int64(st, 0), &pos))
			b->names.v[pos].upto = b->names.v[pos].upto_file =
			    b->names.v[pos].upto_saved =
			    (uint64_t)sqlite3_column_int64(st, 1);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return -1;
	st = b->st[ST_GONE];
	b->ngone = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		gone_add(b, (uint64_t)sqlite3_column_int64(st, 0));
	done_stmt(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

/* Reads table name into memory. 0, or -1. */
static int
names_load(struct store_backend *b)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(b->db, "SELECT id, name FROM name ORDER BY id",
	    -1, &st, NULL) != SQLITE_OK)
		return -1;
	names_cut(&b->names, 0);
	names_rehash(&b->names);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *t = sqlite3_column_text(st, 1);

		names_add(&b->names, sqlite3_column_int64(st, 0),
		    t != NULL ? (const char *)t : "");
	}
	sqlite3_finalize(st);
	b->names.committed = b->names.n;
	return rc == SQLITE_DONE ? 0 : -1;
}

static char *
open_error(const char *path, const char *fmt, const char *why)
{
	char *e = NULL;
	char msg[512];

	snprintf(msg, sizeof(msg), fmt, why);
	if (asprintf(&e, "%s: %s", path, msg) < 0)
		e = NULL;
	return e;
}

static int
pragma_int(sqlite3 *db, const char *q, int *out)
{
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
		return -1;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*out = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : -1;
}

static void
sqlite_close(struct store_backend *b)
{
	if (b == NULL)
		return;
	/*
	 * What is left in done goes: a file at rest holds only messages. A
	 * transaction a sweep, so that the WAL holds one at a time (up to
	 * SWEEP_AT rows may be left); short of space, done is small (rows
	 * went at once) and stays for the next start.
	 */
	if (b->st[ST_SWEEP_DONE] != NULL && !b->low && !b->spent)
		while (sweep_alone(b, SWEEP_ROWS) > 0)
			;
	for (int i = 0; i < ST_N; i++)
		sqlite3_finalize(b->st[i]);
	for (int i = 0; i < 4; i++)
		sqlite3_finalize(b->rc[i]);
	sqlite3_close(b->db);
	names_free(&b->names);
	store_ids_fini(&b->ids);
	free(b->upto_dirty);
	free(b->gone);
	if (b->reserve_fd >= 0)
		close(b->reserve_fd);
	free(b);
}

/* The file, its WAL, its shared memory and its reserve. */
static int
sqlite_remove(const char *path)
{
	static const char *const beside[] = { "-wal", "-shm", "-reserve" };
	char p[4096 + 16];

	for (size_t i = 0; i < ARRAY_LEN(beside); i++) {
		snprintf(p, sizeof(p), "%s%s", path, beside[i]);
		if (unlink(p) < 0 && errno != ENOENT)
			return -1;
	}
	return unlink(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* The WAL's pages between checkpoints (CKPT_BYTES), short of space or not. */
static int
ckpt_pages(const struct store_backend *b, bool low)
{
	return (int)((low ? CKPT_BYTES_LOW : CKPT_BYTES) /
	    (unsigned)b->page_size);
}

/* Makes the new, empty b->db a store, all at once. NULL, or the reason. */
static const char *
make_file(struct store_backend *b)
{
	static char why[256];
	char q[128];

	snprintf(q, sizeof(q), "PRAGMA page_size = %d; BEGIN;"
	    " PRAGMA application_id = %d;", PAGE_BYTES, STORE_APP_ID);
	if (sqlite3_exec(b->db, q, NULL, NULL, NULL) == SQLITE_OK &&
	    sqlite3_exec(b->db, schema, NULL, NULL, NULL) == SQLITE_OK &&
	    sqlite3_exec(b->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK)
		return NULL;
	snprintf(why, sizeof(why), "cannot make a store: %s",
	    sqlite3_errmsg(b->db));
	if (!sqlite3_get_autocommit(b->db))
		sqlite3_exec(b->db, "ROLLBACK", NULL, NULL, NULL);
	return why;
}

/*
 * Checks that b->db is ours (or new and empty: then makes it ours) and
 * whole. NULL, or the reason.
 */
static const char *
check_file(struct store_backend *b, bool readonly)
{
	static char why[256];
	sqlite3_stmt *st;
	int app = 0, tables = 0;
	const char *res;

	if (pragma_int(b->db, "PRAGMA application_id", &app) < 0 ||
	    pragma_int(b->db, "SELECT count(*) FROM sqlite_master",
	    &tables) < 0) {
		snprintf(why, sizeof(why), "not a store: %s",
		    sqlite3_errmsg(b->db));
		return why;
	}
	if (app == 0 && tables == 0) {
		b->version = STORE_VERSION;	/* made so now */
		return readonly ? NULL : make_file(b);
	}
	if (app != STORE_APP_ID)
		return "not an echorouterd store (another SQLite database)";
	if (pragma_int(b->db, "PRAGMA user_version", &b->version) < 0 ||
	    b->version > STORE_VERSION) {
		snprintf(why, sizeof(why), "its schema (version %d) is newer "
		    "than this echorouterd knows (%d): run the version that "
		    "made it", b->version, STORE_VERSION);
		return why;
	}
	if (sqlite3_prepare_v2(b->db, "PRAGMA quick_check(1)", -1, &st,
	    NULL) != SQLITE_OK) {
		snprintf(why, sizeof(why), "cannot check: %s",
		    sqlite3_errmsg(b->db));
		return why;
	}
	res = sqlite3_step(st) == SQLITE_ROW ?
	    (const char *)sqlite3_column_text(st, 0) : NULL;
	if (res == NULL || strcmp(res, "ok") != 0) {
		snprintf(why, sizeof(why), "fails its integrity check: %s",
		    res != NULL ? res : sqlite3_errmsg(b->db));
		sqlite3_finalize(st);
		return why;
	}
	sqlite3_finalize(st);
	return NULL;
}

/*
 * Whether path is still the file seen first (remembered then). A file not
 * there yet (the WAL before SQLite makes it) is not a change.
 */
static bool
same_file(const char *path, struct file_id *id)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return !id->known;
	if (!id->known) {
		id->dev = st.st_dev;
		id->ino = st.st_ino;
		id->known = true;
		return true;
	}
	return st.st_dev == id->dev && st.st_ino == id->ino &&
	    st.st_nlink > 0;
}

static int
sqlite_check(struct store_backend *b)
{
	char wal[sizeof(b->path) + 8];

	snprintf(wal, sizeof(wal), "%s-wal", b->path);
	if (!same_file(b->path, &b->db_id) || !same_file(wal, &b->wal_id)) {
		errno = ENOENT;
		return -1;
	}
	return 0;
}

/* How many rows the query q counts; -1 when it cannot. */
static int64_t
count_rows(sqlite3 *db, const char *q)
{
	sqlite3_stmt *st;
	int64_t n = -1;

	if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return n;
}

/* The messages of a schema 1 file, waiting and final. */
static int64_t
old_messages(sqlite3 *db)
{
	int64_t n = count_rows(db, "SELECT count(*) FROM msg");
	int64_t f = count_rows(db, "SELECT count(*) FROM sqlite_master WHERE"
	    " type = 'table' AND name = 'fin'") == 1 ?
	    count_rows(db, "SELECT count(*) FROM fin") : 0;

	return n < 0 || f < 0 ? -1 : n + f;
}

/* A migration from schema from failed: rolled back; the reason. */
static const char *
migrate_failed(struct store_backend *b, int from)
{
	static char why[256];

	snprintf(why, sizeof(why), "cannot migrate its schema %d to %d: %s",
	    from, STORE_VERSION, sqlite3_errmsg(b->db));
	if (!sqlite3_get_autocommit(b->db))
		sqlite3_exec(b->db, "ROLLBACK", NULL, NULL, NULL);
	return why;
}

/*
 * A schema 2 file made schema 4: its backlog index dropped (the store
 * keeps it in memory now), tables done, upto and below added. A schema 3
 * file: upto and below added, and the view that reads them. NULL, or the
 * reason.
 */
static const char *
schema_migrate_keyed(struct store_backend *b)
{
	if (sqlite3_exec(b->db, "BEGIN; DROP INDEX IF EXISTS msg_backlog;"
	    "CREATE TABLE IF NOT EXISTS done (id INTEGER PRIMARY KEY);"
	    UPTO_TABLE
	    "DROP VIEW IF EXISTS messages;" MESSAGES_VIEW
	    " PRAGMA user_version = " STR(STORE_VERSION) "; COMMIT;", NULL,
	    NULL, NULL) == SQLITE_OK) {
		log_notice("store: %s: schema %d -> %d", b->path, b->version,
		    STORE_VERSION);
		b->version = STORE_VERSION;
		return NULL;
	}
	return migrate_failed(b, b->version);
}

/*
 * A schema 1 file (b->version 0 or 1) made the current schema, in one
 * transaction: all of it or, failing, none. A schema 2 file loses its
 * backlog index. NULL, or the reason.
 */
static const char *
schema_migrate(struct store_backend *b)
{
	int64_t n;
	bool fin;

	if (b->version == 2 || b->version == 3)
		return schema_migrate_keyed(b);
	n = old_messages(b->db);
	fin = count_rows(b->db, "SELECT count(*) FROM sqlite_master WHERE"
	    " type = 'table' AND name = 'fin'") == 1;
	if (n >= 0 && sqlite3_exec(b->db, "BEGIN", NULL, NULL, NULL) ==
	    SQLITE_OK && (fin || sqlite3_exec(b->db, migrate_fin, NULL, NULL,
	    NULL) == SQLITE_OK) && sqlite3_exec(b->db, migrate_old, NULL,
	    NULL, NULL) == SQLITE_OK && sqlite3_exec(b->db, schema, NULL,
	    NULL, NULL) == SQLITE_OK && sqlite3_exec(b->db, migrate_copy,
	    NULL, NULL, NULL) == SQLITE_OK && sqlite3_exec(b->db, "COMMIT",
	    NULL, NULL, NULL) == SQLITE_OK) {
		log_notice("store: %s: schema 1 -> %d, %lld messages", b->path,
		    STORE_VERSION, (long long)n);
		b->version = STORE_VERSION;
		return NULL;
	}
	return migrate_failed(b, 1);
}

static const char *rcpt_ensure(struct store_backend *b);

/*
 * Once, before SQLite starts: no count of the memory it uses, which takes
 * a process-wide mutex on every allocation (a row's insert makes several),
 * shared by the shards' threads. Nothing here asks for the count.
 */
static void
sqlite_setup(void)
{
	(void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

static struct store_backend *
sqlite_open(const struct config *config, const char *path, bool check_only,
    char **err)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	const struct store_conf *cf = &config->store;
	struct store_backend *b = xcalloc(1, sizeof(*b));
	int flags = SQLITE_OPEN_NOMUTEX;
	const char *why;
	char dir[4096], pragmas[256];

	(void)pthread_once(&once, sqlite_setup);
	b->reserve_fd = -1;
	b->swept = time(NULL);
	b->sweep_at = cf->max_bytes / SWEEP_BYTES;
	if (b->sweep_at > SWEEP_AT)
		b->sweep_at = SWEEP_AT;
	b->sweep_at /= config_store_shards(config);	/* of the whole store */
	if (b->sweep_at < SWEEP_AT_MIN)
		b->sweep_at = SWEEP_AT_MIN;
	snprintf(b->path, sizeof(b->path), "%s", path);
	snprintf(dir, sizeof(dir), "%s", path);
	snprintf(b->dir, sizeof(b->dir), "%s", dirname(dir));
	b->sync_full = cf->sync_full;
	if (check_only && access(path, F_OK) < 0) {
		/* Missing: it will be made, if its directory lets us. */
		char dir[4096];

		snprintf(dir, sizeof(dir), "%s", path);
		if (access(dirname(dir), W_OK | X_OK) < 0) {
			*err = open_error(path, "cannot be made: %s",
			    strerror(errno));
			free(b);
			return NULL;
		}
		return b;
	}
	flags |= check_only ? SQLITE_OPEN_READONLY :
	    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	if (sqlite3_open_v2(path, &b->db, flags, NULL) != SQLITE_OK) {
		*err = open_error(path, "cannot open: %s",
		    b->db != NULL ? sqlite3_errmsg(b->db) : "out of memory");
		sqlite_close(b);
		return NULL;
	}
	sqlite3_busy_timeout(b->db, 1000);
	if ((why = check_file(b, check_only)) != NULL) {
		*err = open_error(path, "%s", why);
		sqlite_close(b);
		return NULL;
	}
	if (check_only) {
		if (b->version < 2 && b->db != NULL)
			log_notice("store: %s: schema 1, %lld messages: migrated "
			    "to schema %d when the daemon starts", path,
			    (long long)old_messages(b->db), STORE_VERSION);
		else if (b->version < STORE_VERSION && b->db != NULL)
			log_notice("store: %s: schema %d: migrated to schema "
			    "%d when the daemon starts", path, b->version,
			    STORE_VERSION);
		return b;
	}
	/*
	 * WAL: readers (sqlite3 by an operator) do not block the store, and
	 * a commit is one append. An 8 MiB page cache, shared by the shards
	 * (2 MiB each at least): with no index by account to keep in memory,
	 * 16 MiB held 14 MiB more RSS with a million stored (pages of rows
	 * appended, not read again until a drain) and drained no faster
	 * than 8; 4 MiB cost a drain a fifth more CPU (measured).
	 * Checkpoints every 64 MiB of WAL, not SQLite's 1,000 pages: a page
	 * changed by many commits is copied back once (a third more
	 * messages stored per second, measured).
	 */
	if (pragma_int(b->db, "PRAGMA page_size", &b->page_size) < 0 ||
	    b->page_size <= 0)
		b->page_size = 4096;
	snprintf(pragmas, sizeof(pragmas), "PRAGMA journal_mode = WAL;"
	    "PRAGMA synchronous = FULL; PRAGMA cache_size = -%u;"
	    "PRAGMA wal_autocheckpoint = %d;",
	    CACHE_KIB / config_store_shards(config) > CACHE_KIB / 4 ?
	    CACHE_KIB / config_store_shards(config) : CACHE_KIB / 4,
	    ckpt_pages(b, false));
	if (sqlite3_exec(b->db, pragmas, NULL, NULL, NULL) != SQLITE_OK) {
		*err = open_error(path, "cannot set up: %s",
		    sqlite3_errmsg(b->db));
		sqlite_close(b);
		return NULL;
	}
	b->synchronous = 2;
	if ((b->version < STORE_VERSION && (why = schema_migrate(b)) != NULL) ||
	    (why = rcpt_ensure(b)) != NULL) {
		*err = open_error(path, "%s", why);
		sqlite_close(b);
		return NULL;
	}
	if (sqlite3_exec(b->db, post_schema, NULL, NULL, NULL) != SQLITE_OK) {
		*err = open_error(path, "cannot add the tables of HTTP "
		    "posts and of messages that left: %s",
		    sqlite3_errmsg(b->db));
		sqlite_close(b);
		return NULL;
	}
	for (int i = 0; i < ST_N; i++)
		if (sqlite3_prepare_v3(b->db, sql[i], -1,
		    SQLITE_PREPARE_PERSISTENT, &b->st[i], NULL) != SQLITE_OK) {
			*err = open_error(path, "not a store we know: %s",
			    sqlite3_errmsg(b->db));
			sqlite_close(b);
			return NULL;
		}
	if (names_load(b) < 0 || ids_load(b) < 0 || upto_load(b) < 0 ||
	    (b->ndone = (uint64_t)count_rows(b->db,
	    "SELECT count(*) FROM done")) == (uint64_t)-1 ||
	    (b->done_max = (uint64_t)count_rows(b->db,
	    "SELECT ifnull(max(id), 0) FROM done")) == (uint64_t)-1) {
		b->ndone = 0;
		*err = open_error(path, "cannot read its names and waiting "
		    "messages: %s", sqlite3_errmsg(b->db));
		sqlite_close(b);
		return NULL;
	}
	b->ndone += b->ngone;
	b->grown = 0;
	/*
	 * The files as opened, for sqlite_check. A first write makes the
	 * WAL, which SQLite may otherwise open only later; on a full disk
	 * the first commit that works shows it.
	 */
	(void)sqlite3_exec(b->db, "PRAGMA user_version = " STR(STORE_VERSION),
	    NULL, NULL, NULL);
	sqlite_check(b);
	/* A disk full at start: refusing until there is room. */
	if (!reserve_take(b) && !b->no_reserve)
		b->spent = true;
	return b;
}

static int
sqlite_begin(struct store_backend *b, bool durable)
{
	/* FULL syncs the WAL at each commit; NORMAL only at checkpoints. */
	/*
	 * With sync = "full" every commit is: a group that only marks
	 * deliveries may carry a receipt, and the synchronous setting cannot
	 * change inside a transaction.
	 */
	int want = b->sync_full ? 2 : 1;

	(void)durable;

	if (want != b->synchronous) {
		if (sqlite3_exec(b->db, want == 2 ? "PRAGMA synchronous = FULL" :
		    "PRAGMA synchronous = NORMAL", NULL, NULL, NULL) != SQLITE_OK)
			return -1;
		b->synchronous = want;
	}
	settle(b);
	if (sqlite3_exec(b->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
		return -1;
	store_ids_begin(&b->ids);
	b->ngone_begin = b->ngone;
	b->ndone_begin = b->ndone;
	b->grown_begin = b->grown;
	b->changes_begin = sqlite3_total_changes(b->db);
	return 0;
}

static int
sqlite_commit(struct store_backend *b)
{
	int rc;

	rc = upto_write(b) < 0 ? SQLITE_ERROR :
	    sqlite3_exec(b->db, "COMMIT", NULL, NULL, NULL);
	if (rc == SQLITE_OK) {
		if (sqlite3_total_changes(b->db) != b->changes_begin)
			b->committed = time(NULL);
		b->names.committed = b->names.n;
		store_ids_commit(&b->ids);
		upto_settle(b, true);
		if (!b->wal_id.known)
			sqlite_check(b);
		/*
		 * Enough rows in done: the oldest go at the next poll, the
		 * rows of many groups' deliveries at once, so that a page of
		 * msg is written about once for all of its rows, not once for
		 * each group that delivered one.
		 */
		if (b->ndone >= b->sweep_at && !b->spent && !b->low)
			b->sweep_due = true;
		else if (!b->sweep_due)
			b->grown = 0;	/* counted from the group that passes */
		return 0;
	}
	if (is_full(b, rc))
		reserve_spend(b);
	/* A failed COMMIT may leave the transaction open: end it. */
	if (!sqlite3_get_autocommit(b->db))
		sqlite3_exec(b->db, "ROLLBACK", NULL, NULL, NULL);
	settle(b);
	return -1;
}

static bool
sqlite_full(struct store_backend *b)
{
	return b->spent;
}

static uint64_t
free_bytes(const struct store_backend *b)
{
	struct statvfs v;

	if (statvfs(b->dir, &v) < 0)
		return UINT64_MAX;	/* unknown: as if there were room */
	return (uint64_t)v.f_bavail * v.f_frsize;
}

/* Bytes of free pages inside the file: room for messages without disk. */
static uint64_t
inner_free(struct store_backend *b)
{
	int n = 0;

	if (pragma_int(b->db, "PRAGMA freelist_count", &n) < 0)
		return 0;
	return (uint64_t)n * (uint64_t)b->page_size;
}

/*
 * Once a second: the checkpoint interval for the space there is, and the
 * reserve taken (again) when the filesystem has room for it. With no room
 * for new messages, the WAL is checkpointed so that it is written again
 * from its start (its space kept, not given back to be taken by others),
 * and new messages are taken again once the filesystem has the reserve
 * and a margin, or the file that much free inside (a drained backlog).
 */
static int
sqlite_poll(struct store_backend *b)
{
	time_t now = time(NULL);
	uint64_t avail, want = (uint64_t)RESERVE_BYTES + RESERVE_MARGIN;
	bool low;

	if (b->sweep_due && !b->low && !b->spent) {
		b->sweep_due = false;
		sweep_alone(b, b->grown > SWEEP_ROWS / 2 ?
		    (unsigned)(2 * b->grown) : SWEEP_ROWS);
	}
	if (now == b->polled)
		return 0;
	b->polled = now;
	/*
	 * What is left in done: idle, swept a group at a time; short of
	 * space, a little every second whatever the traffic (the groups do
	 * not sweep then), so that pages come free inside the file.
	 */
	if (b->ndone > 0 && (b->low || b->spent))
		sweep_alone(b, SWEEP_ROWS_LOW);
	else if (b->ndone > 0 && (now - b->committed >= SWEEP_IDLE ||
	    now - b->swept >= SWEEP_AGE))
		sweep_alone(b, SWEEP_ROWS);
	avail = free_bytes(b);
	low = avail < LOW_SPACE + (uint64_t)RESERVE_BYTES;
	if (low != b->low) {
		char q[64];

		snprintf(q, sizeof(q), "PRAGMA wal_autocheckpoint = %d",
		    ckpt_pages(b, low));
		if (sqlite3_exec(b->db, q, NULL, NULL, NULL) == SQLITE_OK)
			b->low = low;
	}
	if (!b->spent) {
		if (!b->held && avail >= want)
			reserve_take(b);
		return 0;
	}
	(void)sqlite3_wal_checkpoint_v2(b->db, NULL,
	    SQLITE_CHECKPOINT_RESTART, NULL, NULL);
	avail = free_bytes(b);
	if ((avail >= want && (reserve_take(b) || b->no_reserve)) ||
	    inner_free(b) >= want)
		b->spent = false;
	return 0;
}

static void
sqlite_rollback(struct store_backend *b)
{
	if (!sqlite3_get_autocommit(b->db))
		sqlite3_exec(b->db, "ROLLBACK", NULL, NULL, NULL);
	settle(b);
}

static bool
sqlite_in_txn(struct store_backend *b)
{
	return !sqlite3_get_autocommit(b->db);
}

/* Binds id to statement i and steps it. 0, or -1. */
static int
exec_id(struct store_backend *b, int i, uint64_t id)
{
	sqlite3_bind_int64(b->st[i], 1, (sqlite3_int64)id);
	return exec_stmt(b, b->st[i]);
}

/*
 * Deletes the row of id, a message that left (in done), now: 1; 0 when
 * id is not in done; -1.
 */
static int
drop_done(struct store_backend *b, uint64_t id)
{
	if (exec_id(b, ST_DONE_DEL, id) < 0)
		return -1;
	if (sqlite3_changes(b->db) == 0)
		return 0;
	if (b->ndone > 0)
		b->ndone--;
	return exec_id(b, ST_DELETE, id) < 0 ? -1 : 1;
}

/* A message moved to another shard: its row goes at once. */
static int
sqlite_del(struct store_backend *b, uint64_t id, const char *account)
{
	int64_t key;
	size_t pos;

	if (exec_id(b, ST_DELETE, id) < 0)
		return -1;
	if (name_key(b, account, false, &key, &pos) <= 0)
		return 0;
	if (id <= b->names.v[pos].upto && exec_id(b, ST_BELOW_DEL, id) < 0)
		return -1;
	store_ids_del(&b->ids, pos, id);
	return 0;
}

/* Binds v to statement i, steps it and resets it: its result code. */
static int
step_id(struct store_backend *b, int i, sqlite3_int64 v)
{
	int rc;

	sqlite3_bind_int64(b->st[i], 1, v);
	rc = sqlite3_step(b->st[i]);
	done_stmt(b->st[i]);
	return rc;
}

static int
cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, c = *(const uint64_t *)y;

	return a < c ? -1 : a > c;
}

/* What is to be swept, counted again (after a failure, or all of it). */
static void
ndone_count(struct store_backend *b)
{
	int64_t count = count_rows(b->db, "SELECT count(*) FROM done");

	if (count >= 0)
		b->ndone = (uint64_t)count + b->ngone;
}

/*
 * Deletes up to n rows of messages that left, the oldest: first those
 * marks hide (gone; taken from it by sweep_alone once committed), then
 * those of done and their ids, in the open transaction (of its own: a
 * savepoint in a group's made SQLite copy every page the sweep changed to
 * a journal of the savepoint's, a third of what the drain wrote). Failing
 * half way harms nothing: the rows go before their ids, and an id in done
 * without a row hides nothing. The count deleted, or -1 (and the
 * transaction may be gone: SQLite ends it on some failures).
 */
static int
sweep(struct store_backend *b, unsigned n)
{
	sqlite3_stmt *st = b->st[ST_SWEEP_LAST];
	sqlite3_int64 last = 0;
	int rc, gone;
	size_t k;

	if (!b->gone_sorted && b->ngone > 1) {
		qsort(b->gone, b->ngone, sizeof(*b->gone), cmp_u64);
		b->gone_sorted = true;
	}
	k = b->ngone < n ? b->ngone : n;
	for (size_t i = 0; i < k; i++)
		if (exec_id(b, ST_DELETE, b->gone[i]) < 0)
			return -1;
	b->gone_swept = k;
	if ((n -= (unsigned)k) == 0)
		return (int)k;
	sqlite3_bind_int64(st, 1, n);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW)
		last = sqlite3_column_int64(st, 0);	/* NULL: 0 */
	done_stmt(st);
	if (rc != SQLITE_ROW)
		return -1;
	if (last == 0)
		return (int)k;
	if (step_id(b, ST_SWEEP_MSG, last) != SQLITE_DONE ||
	    step_id(b, ST_SWEEP_DONE, last) != SQLITE_DONE)
		return -1;
	gone = sqlite3_changes(b->db);
	return gone + (int)k;
}

/*
 * A sweep of up to n in a transaction of its own (no group is open).
 * Its commit is not synced: lost in a crash, its rows are still hidden
 * by their ids in done or by a mark, for the next sweep (the ids a mark
 * hides are read again at start); with sync = "full" the next group's
 * commit syncs the WAL with it (with "normal", a checkpoint does). After
 * a failure, what is to be swept is counted again. The count deleted, or
 * -1.
 */
static int
sweep_alone(struct store_backend *b, unsigned n)
{
	int gone;

	if (!sqlite3_get_autocommit(b->db))
		return -1;
	/* A group SQLite ended on a failed write is undone in memory first. */
	settle(b);
	if (b->synchronous == 2 && sqlite3_exec(b->db,
	    "PRAGMA synchronous = NORMAL", NULL, NULL, NULL) == SQLITE_OK)
		b->synchronous = 1;
	if (sqlite3_exec(b->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK)
		return -1;
	b->grown = 0;
	b->swept = time(NULL);
	b->gone_swept = 0;
	if ((gone = sweep(b, n)) >= 0 &&
	    sqlite3_exec(b->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK) {
		b->ngone -= b->gone_swept;
		if (b->gone_swept > 0)
			memmove(b->gone, b->gone + b->gone_swept,
			    b->ngone * sizeof(*b->gone));
		b->ndone -= (uint64_t)gone < b->ndone ? (uint64_t)gone :
		    b->ndone;
		if (gone < (int)n)	/* all of them: counted again */
			ndone_count(b);
		return gone;
	}
	if (!sqlite3_get_autocommit(b->db))
		sqlite3_exec(b->db, "ROLLBACK", NULL, NULL, NULL);
	ndone_count(b);
	return -1;
}

int
store_sqlite_exec(struct store_backend *b, const char *sql)
{
	return sqlite3_exec(b->db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

int
store_sqlite_synchronous(struct store_backend *b)
{
	int v;

	return pragma_int(b->db, "PRAGMA synchronous", &v) < 0 ? -1 : v;
}

/* Takes id out of gone (its row went otherwise). */
static void
gone_drop(struct store_backend *b, uint64_t id)
{
	for (size_t i = b->ngone; i-- > 0;)
		if (b->gone[i] == id) {
			memmove(b->gone + i, b->gone + i + 1,
			    (b->ngone - i - 1) * sizeof(*b->gone));
			b->ngone--;
			if (b->ngone_begin > i)
				b->ngone_begin--;
			if (b->ndone > 0)
				b->ndone--;
			return;
		}
}

/*
 * A message stored under its account's mark (UPTO_TABLE): into below, so
 * that the mark does not hide it. A row that left under the same id, not
 * swept yet (a message stored again: moved from another shard), goes
 * first, and its id from gone. 0, or -1.
 */
static int
below_put(struct store_backend *b, uint64_t id)
{
	if (exec_id(b, ST_DELETE, id) < 0)
		return -1;
	if (sqlite3_changes(b->db) > 0)
		gone_drop(b, id);
	return exec_id(b, ST_BELOW_PUT, id);
}

static int
sqlite_put(struct store_backend *b, const struct store_rec *rec)
{
	int64_t account, submitter;
	size_t pos;

	if (name_key(b, rec->account, true, &account, &pos) < 0 ||
	    name_key(b, rec->m->reply_to, true, &submitter, NULL) < 0)
		return -1;
	/*
	 * The id of a message that left, not swept yet (one stored again, a
	 * rare thing): its old row goes now, and its id from done, where it
	 * would hide the new one. A new message's id is above them all.
	 */
	if (rec->m->id <= b->done_max && drop_done(b, rec->m->id) < 0)
		return -1;
	if (rec->m->id <= b->names.v[pos].upto &&
	    below_put(b, rec->m->id) < 0)
		return -1;
	bind_rec(b->st[ST_PUT], rec, account, submitter);
	if (exec_stmt(b, b->st[ST_PUT]) < 0)
		return -1;
	if (rec->state == MSG_STATE_ENROUTE)
		store_ids_add(&b->ids, pos, rec->m->id);
	return 0;
}

/* The names stay: an update does not change them (?2, ?3 unused). */
static int
sqlite_update(struct store_backend *b, const struct store_rec *rec)
{
	int64_t key;
	size_t pos;

	if (upto_write(b) < 0)
		return -1;
	bind_rec(b->st[ST_UPDATE], rec, 0, 0);
	if (exec_stmt(b, b->st[ST_UPDATE]) < 0)
		return -1;
	if (sqlite3_changes(b->db) == 0 ||
	    name_key(b, rec->account, false, &key, &pos) <= 0)
		return 0;
	if (rec->state == MSG_STATE_ENROUTE)
		store_ids_add(&b->ids, pos, rec->m->id);
	else
		store_ids_del(&b->ids, pos, rec->m->id);
	return 0;
}

/*
 * id, a message that leaves (out of the ids of its account, at pos),
 * under the account's mark (UPTO_TABLE) if none of the account's before
 * it waits: the mark moves up to the first that waits after it (to id,
 * if none), and id goes to the sweep. One stored under the mark leaves
 * below, and is hidden by the mark. In the open transaction; the mark is
 * written at its commit, or before a statement reads marks. 1 if it went
 * so, 0 if it is for done, -1.
 */
static int
mark_upto(struct store_backend *b, uint64_t id, size_t pos)
{
	uint64_t first = store_ids_first(&b->ids, pos);

	if (sqlite3_get_autocommit(b->db))
		return 0;
	if (id <= b->names.v[pos].upto) {
		if (exec_id(b, ST_BELOW_DEL, id) < 0)
			return -1;
	} else if (first != 0 && first < id) {
		return 0;
	} else {
		upto_set(b, pos, first != 0 ? first - 1 : id);
	}
	gone_add(b, id);
	return 1;
}

/*
 * Final: what query_sm needs goes to fin where its submitter can ask
 * (STORE_FINAL_NOT_KEPT; key 0 is no submitter; replaced if there, from
 * a try whose later write failed), and the id under its account's mark
 * or into done (the row goes with a sweep). 1 kept, 0 not, -1.
 */
static int
mark_final_write(struct store_backend *b, uint64_t id, size_t pos,
    uint8_t state, uint64_t final_date, bool final_row)
{
	sqlite3_stmt *st = b->st[ST_FIN_ADD];
	int kept = 0, went;

	/* A line client's message: no final row to look for (a probe less). */
	if (!final_row)
		goto del;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	sqlite3_bind_int(st, 2, state);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)final_date);
	sqlite3_bind_int64(st, 4, STORE_FINAL_NOT_KEPT);
	if (exec_stmt(b, st) < 0)
		return -1;
	kept = sqlite3_changes(b->db) > 0;
del:
	if (b->low || b->spent) {
		if (drop_done(b, id) < 0 || exec_id(b, ST_DELETE, id) < 0 ||
		    (id <= b->names.v[pos].upto &&
		    exec_id(b, ST_BELOW_DEL, id) < 0))
			return -1;
	} else if ((went = mark_upto(b, id, pos)) < 0) {
		return -1;
	} else if (went == 0) {
		if (exec_id(b, ST_DONE, id) < 0)
			return -1;
		b->ndone += (uint64_t)sqlite3_changes(b->db);
		b->grown += (uint64_t)sqlite3_changes(b->db);
		if (id > b->done_max)
			b->done_max = id;
	}
	return kept;
}

static int
mark_final(struct store_backend *b, uint64_t id, const char *account,
    uint8_t state, uint64_t final_date, bool final_row)
{
	int64_t key;
	size_t pos;
	int kept;

	/*
	 * Not waiting (its ids are those of the rows waiting): it left
	 * already, or is not there. Nothing to write. (The caller knows the
	 * account: a DELETE ... RETURNING it cost a fifth more CPU per
	 * delivered message, measured.) Out of the ids first, as the mark
	 * looks for the first waiting after it; back in if a write failed,
	 * in a group that may still commit: the mark is tried again.
	 */
	if (name_key(b, account, false, &key, &pos) <= 0 ||
	    !store_ids_del(&b->ids, pos, id))
		return 0;
	if ((kept = mark_final_write(b, id, pos, state, final_date,
	    final_row)) < 0)
		store_ids_add(&b->ids, pos, id);
	return kept;
}

static int
sqlite_mark(struct store_backend *b, uint64_t id, const char *account,
    uint8_t state, uint64_t final_date, uint64_t due, uint32_t attempts,
    bool final_row)
{
	sqlite3_stmt *st = b->st[ST_MARK];
	int64_t key;
	size_t pos;

	if (state != MSG_STATE_ENROUTE)
		return mark_final(b, id, account, state, final_date,
		    final_row);
	if (upto_write(b) < 0)
		return -1;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	sqlite3_bind_int(st, 2, state);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)final_date);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)due);
	sqlite3_bind_int64(st, 5, attempts);
	if (exec_stmt(b, st) < 0)
		return -1;
	/* Waiting again (it was always, so far): where a scan finds it. */
	if (sqlite3_changes(b->db) > 0 &&
	    name_key(b, account, false, &key, &pos) > 0)
		store_ids_add(&b->ids, pos, id);
	return 0;
}

/* A final message from fin: its numbers, no text. 1, 0 none, -1. */
static int
fin_get(struct store_backend *b, uint64_t id, struct store_rec *rec)
{
	sqlite3_stmt *st = b->st[ST_FIN_GET];
	int rc;

	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		rec->m = msg_new(0);
		rec->m->id = id;
		copy_name(&b->names, st, 1, rec->account,
		    sizeof(rec->account));
		copy_name(&b->names, st, 2, rec->m->reply_to,
		    sizeof(rec->m->reply_to));
		rec->state = (uint8_t)sqlite3_column_int(st, 3);
		rec->final_date = (uint64_t)sqlite3_column_int64(st, 4);
	}
	done_stmt(st);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

static int
sqlite_get(struct store_backend *b, uint64_t id, struct store_rec *rec)
{
	sqlite3_stmt *st = b->st[ST_GET];
	int rc;

	memset(rec, 0, sizeof(*rec));
	if (upto_write(b) < 0)
		return -1;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	rc = sqlite3_step(st);
	memset(rec, 0, sizeof(*rec));
	if (rc == SQLITE_ROW && !read_rec(&b->names, st, rec))
		rc = SQLITE_ERROR;
	done_stmt(st);
	if (rc == SQLITE_DONE)
		return fin_get(b, id, rec);
	return rc == SQLITE_ROW ? 1 : -1;
}

/*
 * Calls fn for the waiting rows of the k ids (ascending, at most SCAN_IDS)
 * of the account at pos. An id with no such row (a file edited by hand)
 * is dropped. The count called, with *stop set when fn stopped; or -1.
 */
static int
scan_ids(struct store_backend *b, size_t pos, const uint64_t *ids, size_t k,
    store_rec_fn *fn, void *arg, bool *stop)
{
	sqlite3_stmt *st = b->st[ST_SCAN];
	size_t next = 0;
	int rc = SQLITE_DONE, called = 0;

	for (size_t i = 0; i < SCAN_IDS; i++)
		sqlite3_bind_int64(st, (int)i + 1,
		    (sqlite3_int64)ids[i < k ? i : k - 1]);
	/* An id in the wrong list (a row edited by hand) is dropped. */
	sqlite3_bind_int64(st, SCAN_IDS + 1, b->names.v[pos].key);
	while (!*stop && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_rec rec;
		uint64_t id = (uint64_t)sqlite3_column_int64(st, 0);

		while (next < k && ids[next] < id)
			store_ids_del(&b->ids, pos, ids[next++]);
		next++;
		memset(&rec, 0, sizeof(rec));
		if (!read_rec(&b->names, st, &rec))
			continue;	/* a row we cannot read: left alone */
		called++;
		*stop = fn(&rec, arg) != 0;
		free(rec.m);
	}
	done_stmt(st);
	if (*stop)
		return called;
	if (rc != SQLITE_DONE)
		return -1;
	while (next < k)
		store_ids_del(&b->ids, pos, ids[next++]);
	return called;
}

static int
sqlite_scan(struct store_backend *b, const char *account, uint64_t after,
    unsigned n, store_rec_fn *fn, void *arg)
{
	uint64_t ids[SCAN_IDS];
	int64_t key;
	size_t pos, k;
	int rc, called = 0;
	bool stop = false;

	if ((rc = name_key(b, account, false, &key, &pos)) <= 0)
		return rc;	/* a name never stored has no messages */
	while (!stop && (unsigned)called < n &&
	    (k = store_ids_from(&b->ids, pos, after, ids,
	    n - (unsigned)called < SCAN_IDS ? n - (unsigned)called :
	    SCAN_IDS)) > 0) {
		after = ids[k - 1];
		if ((rc = scan_ids(b, pos, ids, k, fn, arg, &stop)) < 0)
			return -1;
		called += rc;
	}
	return called;
}

static int
sqlite_expired(struct store_backend *b, uint64_t now, unsigned n,
    store_rec_fn *fn, void *arg)
{
	sqlite3_stmt *st = b->st[ST_EXPIRED];

	if (upto_write(b) < 0)
		return -1;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)now);
	sqlite3_bind_int64(st, 2, n);
	return each_rec(b, st, fn, arg);
}

static int
sqlite_by_dest(struct store_backend *b, const char *submitter,
    const char *dst, unsigned n, store_rec_fn *fn, void *arg)
{
	sqlite3_stmt *st = b->st[ST_BY_DEST];
	int64_t key;
	int rc;

	if ((rc = name_key(b, submitter, false, &key, NULL)) <= 0)
		return rc;
	if (upto_write(b) < 0)
		return -1;
	sqlite3_bind_int64(st, 1, key);
	sqlite3_bind_text(st, 2, dst, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, n);
	return each_rec(b, st, fn, arg);
}

/* Final rows to delete, found by a scan, deleted after it. */
struct doomed {
	uint64_t id;
	uint64_t bytes;
};

static int
sqlite_purge(struct store_backend *b, uint64_t before, uint64_t *cursor,
    unsigned n, uint64_t *bytes)
{
	sqlite3_stmt *st = b->st[ST_FIN_SCAN];
	struct doomed *v = xcalloc(n ? n : 1, sizeof(*v));
	unsigned seen = 0, k = 0, i;
	int rc;

	sqlite3_bind_int64(st, 1, (sqlite3_int64)*cursor);
	sqlite3_bind_int64(st, 2, n);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		uint64_t id = (uint64_t)sqlite3_column_int64(st, 0);

		seen++;
		*cursor = id;
		if ((uint64_t)sqlite3_column_int64(st, 1) >= before)
			continue;
		v[k].id = id;
		v[k++].bytes = (uint64_t)sqlite3_column_int64(st, 2);
	}
	done_stmt(st);
	if (rc != SQLITE_DONE)
		k = 0;
	else if (seen < n)
		*cursor = 0;	/* the end: from the start next time */
	for (i = 0; i < k; i++) {
		sqlite3_bind_int64(b->st[ST_FIN_DEL], 1, (sqlite3_int64)v[i].id);
		if (exec_stmt(b, b->st[ST_FIN_DEL]) < 0)
			break;
		*bytes += v[i].bytes;
	}
	free(v);
	/* Those deleted before a failure are counted: the caller sees it. */
	return rc != SQLITE_DONE ? -1 : (int)i;
}

static int
sqlite_finals(struct store_backend *b, uint64_t *count, uint64_t *bytes)
{
	sqlite3_stmt *st = b->st[ST_FINALS];
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW) {
		*count = (uint64_t)sqlite3_column_int64(st, 0);
		*bytes = (uint64_t)sqlite3_column_double(st, 1);
	}
	done_stmt(st);
	return rc == SQLITE_ROW ? 0 : -1;
}

/*
 * Summed here by the account's place in the names, not by a GROUP BY:
 * without an index by account that sorts every row in a temporary tree,
 * which may not fit in memory, nor on the full disk a resync follows.
 */
static int
sqlite_backlogs(struct store_backend *b, store_backlog_fn *fn, void *arg)
{
	sqlite3_stmt *st = b->st[ST_BACKLOGS];
	size_t n = b->names.n;
	uint64_t *count = xcalloc(n ? n : 1, sizeof(*count));
	uint64_t *bytes = xcalloc(n ? n : 1, sizeof(*bytes));
	size_t pos;
	int rc;

	/*
	 * A group SQLite ended itself (a failed write) left its marks
	 * unwritten: back to what is committed first, as the next begin
	 * would, or the recount after it fails and every count is lost.
	 */
	settle(b);
	if (upto_write(b) < 0) {
		free(count);
		free(bytes);
		return -1;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (!names_pos(&b->names, sqlite3_column_int64(st, 0), &pos) ||
		    pos >= n)
			continue;
		count[pos]++;
		bytes[pos] += (uint64_t)sqlite3_column_int64(st, 2) +
		    strlen(names_get(&b->names, sqlite3_column_int64(st, 1)));
	}
	done_stmt(st);
	for (pos = 0; rc == SQLITE_DONE && pos < n; pos++)
		if (count[pos] != 0 && b->names.v[pos].name[0] != '\0' &&
		    fn(b->names.v[pos].name, count[pos], bytes[pos], arg))
			break;
	free(count);
	free(bytes);
	return rc == SQLITE_DONE ? 0 : -1;
}

static uint64_t
sqlite_oldest(struct store_backend *b, const char *account)
{
	sqlite3_stmt *st = b->st[ST_OLDEST];
	uint64_t t = 0, id;
	int64_t key;
	size_t pos;

	if (name_key(b, account, false, &key, &pos) <= 0 ||
	    (id = store_ids_first(&b->ids, pos)) == 0)
		return 0;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	if (sqlite3_step(st) == SQLITE_ROW)
		t = (uint64_t)sqlite3_column_int64(st, 0);
	done_stmt(st);
	return t;
}

static int
sqlite_max_id(struct store_backend *b, uint64_t *id)
{
	sqlite3_stmt *st = b->st[ST_MAX_ID];
	int rc = sqlite3_step(st);

	*id = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(st, 0) : 0;
	done_stmt(st);
	return rc == SQLITE_ROW ? 0 : -1;
}

/*
 * The receipt id map (receipt_map.h): one row per key of an upstream's
 * message id, beside our id and what its receipt needs. Added to any
 * store file on open; an older daemon ignores the table. grp is the same
 * in the rows of one id the centre gave (one part of a message: each
 * part has its own id, and all have ours); rows of a file from before it
 * have none (NULL), and go together by our id.
 */
static const char rcpt_schema[] =
    "CREATE TABLE IF NOT EXISTS rcpt ("
    " upstream TEXT NOT NULL,"
    " kind INTEGER NOT NULL,"		/* enum receipt_key_kind */
    " k BLOB NOT NULL,"			/* the text, or the value (8 bytes) */
    " id INTEGER NOT NULL,"		/* ours */
    " added INTEGER NOT NULL,"		/* unix time */
    " submitted INTEGER NOT NULL,"
    " submitter TEXT NOT NULL,"
    " dst TEXT NOT NULL,"
    " src_addr TEXT NOT NULL,"
    " dst_addr TEXT NOT NULL,"
    " addr_bits INTEGER NOT NULL,"	/* the four TON/NPI, a byte each */
    " rd INTEGER NOT NULL,"		/* registered_delivery */
    " grp INTEGER,"
    " PRIMARY KEY (upstream, kind, k)) WITHOUT ROWID;"
    "CREATE INDEX IF NOT EXISTS rcpt_id ON rcpt(id);"
    "CREATE INDEX IF NOT EXISTS rcpt_added ON rcpt(added);";

enum { RC_PUT, RC_GET, RC_DEL, RC_PURGE };

static const char *const rcpt_sql[4] = {
	[RC_PUT] = "INSERT OR REPLACE INTO rcpt VALUES (?1, ?2, ?3, ?4, ?5,"
	    " ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
	[RC_GET] = "SELECT id, submitted, submitter, dst, src_addr, dst_addr,"
	    " addr_bits, rd FROM rcpt WHERE upstream = ?1 AND kind = ?2 AND"
	    " k = ?3",
	[RC_DEL] = "DELETE FROM rcpt WHERE id = (SELECT id FROM rcpt WHERE"
	    " upstream = ?1 AND kind = ?2 AND k = ?3) AND grp IS (SELECT grp"
	    " FROM rcpt WHERE upstream = ?1 AND kind = ?2 AND k = ?3)",
	[RC_PURGE] = "DELETE FROM rcpt WHERE (upstream, kind, k) IN (SELECT"
	    " upstream, kind, k FROM rcpt WHERE added < ?1 LIMIT ?2)",
};

static const char *
rcpt_ensure(struct store_backend *b)
{
	static char why[256];
	sqlite3_stmt *probe = NULL;

	if (sqlite3_exec(b->db, rcpt_schema, NULL, NULL, NULL) != SQLITE_OK)
		goto fail;
	/* A table from before grp: given the column, NULL in its rows. */
	if (sqlite3_prepare_v2(b->db, "SELECT grp FROM rcpt LIMIT 0", -1,
	    &probe, NULL) != SQLITE_OK && sqlite3_exec(b->db, "ALTER TABLE "
	    "rcpt ADD COLUMN grp INTEGER", NULL, NULL, NULL) != SQLITE_OK)
		goto fail;
	sqlite3_finalize(probe);
	probe = NULL;
	for (int i = 0; i < 4; i++)
		if (sqlite3_prepare_v3(b->db, rcpt_sql[i], -1,
		    SQLITE_PREPARE_PERSISTENT, &b->rc[i], NULL) != SQLITE_OK)
			goto fail;
	return NULL;
fail:
	sqlite3_finalize(probe);
	snprintf(why, sizeof(why), "cannot add the table of receipt ids: %s",
	    sqlite3_errmsg(b->db));
	return why;
}

/* Binds upstream and k as ?1 to ?3. */
static void
rcpt_bind_key(sqlite3_stmt *st, const char *upstream,
    const struct receipt_key *k, uint8_t *val)
{
	sqlite3_bind_text(st, 1, upstream, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, (int)k->kind);
	if (k->kind == RECEIPT_KEY_STR) {
		sqlite3_bind_blob(st, 3, k->str, (int)k->len, SQLITE_STATIC);
		return;
	}
	for (int i = 0; i < 8; i++)
		val[i] = (uint8_t)(k->val >> (56 - 8 * i));
	sqlite3_bind_blob(st, 3, val, 8, SQLITE_STATIC);
}

static int
sqlite_rcpt_put(struct store_backend *b, const char *upstream,
    const struct receipt_key *k, uint64_t grp, const struct receipt_orig *o,
    uint64_t added)
{
	sqlite3_stmt *st = b->rc[RC_PUT];
	uint8_t val[8];

	rcpt_bind_key(st, upstream, k, val);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)o->id);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)added);
	sqlite3_bind_int64(st, 6, (sqlite3_int64)o->submitted);
	sqlite3_bind_text(st, 7, o->reply_to, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 8, o->to, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 9, o->src_addr, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 10, o->dst_addr, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 11, (sqlite3_int64)o->src_ton << 24 |
	    (sqlite3_int64)o->src_npi << 16 | o->dst_ton << 8 | o->dst_npi);
	/* An HTTP send's mark rides above registered_delivery's 8 bits. */
	sqlite3_bind_int(st, 12, o->registered_delivery | (o->http ? 0x100 : 0));
	sqlite3_bind_int64(st, 13, (sqlite3_int64)grp);
	return exec_stmt(b, st);
}

static int
sqlite_rcpt_get(struct store_backend *b, const char *upstream,
    const struct receipt_key *k, struct receipt_orig *o)
{
	sqlite3_stmt *st = b->rc[RC_GET];
	uint8_t val[8];
	uint32_t bits;
	int rc;

	rcpt_bind_key(st, upstream, k, val);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		memset(o, 0, sizeof(*o));
		o->id = (uint64_t)sqlite3_column_int64(st, 0);
		o->submitted = (uint64_t)sqlite3_column_int64(st, 1);
		copy_col(st, 2, o->reply_to, sizeof(o->reply_to));
		copy_col(st, 3, o->to, sizeof(o->to));
		copy_col(st, 4, o->src_addr, sizeof(o->src_addr));
		copy_col(st, 5, o->dst_addr, sizeof(o->dst_addr));
		bits = (uint32_t)sqlite3_column_int64(st, 6);
		o->src_ton = (uint8_t)(bits >> 24);
		o->src_npi = (uint8_t)(bits >> 16);
		o->dst_ton = (uint8_t)(bits >> 8);
		o->dst_npi = (uint8_t)bits;
		o->registered_delivery = (uint8_t)sqlite3_column_int(st, 7);
		o->http = (sqlite3_column_int(st, 7) & 0x100) != 0;
	}
	done_stmt(st);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

static int
sqlite_rcpt_del(struct store_backend *b, const char *upstream,
    const struct receipt_key *k)
{
	sqlite3_stmt *st = b->rc[RC_DEL];
	uint8_t val[8];

	rcpt_bind_key(st, upstream, k, val);
	return exec_stmt(b, st);
}

static int
sqlite_rcpt_purge(struct store_backend *b, uint64_t before, unsigned n)
{
	sqlite3_stmt *st = b->rc[RC_PURGE];

	sqlite3_bind_int64(st, 1, (sqlite3_int64)before);
	sqlite3_bind_int(st, 2, (int)n);
	if (exec_stmt(b, st) < 0)
		return -1;
	return sqlite3_changes(b->db);
}

static int
sqlite_post_put(struct store_backend *b, uint64_t id, const char *url,
    const char *body)
{
	sqlite3_stmt *st = b->st[ST_POST_PUT];

	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	sqlite3_bind_text(st, 2, url, -1, SQLITE_STATIC);
	if (body != NULL)
		sqlite3_bind_text(st, 3, body, -1, SQLITE_STATIC);
	return exec_stmt(b, st);
}

static int
sqlite_post_del(struct store_backend *b, uint64_t id)
{
	sqlite3_stmt *st = b->st[ST_POST_DEL];

	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	return exec_stmt(b, st);
}

static int
sqlite_posts(struct store_backend *b, store_post_fn *fn, void *arg)
{
	sqlite3_stmt *st = b->st[ST_POSTS];
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW &&
	    fn((uint64_t)sqlite3_column_int64(st, 0),
	    (const char *)sqlite3_column_text(st, 1),
	    (const char *)sqlite3_column_text(st, 2), arg) == 0)
		;
	done_stmt(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

static int
sqlite_want_put(struct store_backend *b, const struct http_out_want *w)
{
	sqlite3_stmt *st = b->st[ST_WANT_PUT];

	sqlite3_bind_int64(st, 1, (sqlite3_int64)w->id);
	sqlite3_bind_text(st, 2, w->url, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, w->json);
	sqlite3_bind_int(st, 4, w->mask);
	sqlite3_bind_text(st, 5, w->to, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, w->from, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 7, (sqlite3_int64)w->deadline);
	return exec_stmt(b, st);
}

static int
sqlite_want_del(struct store_backend *b, uint64_t id)
{
	sqlite3_stmt *st = b->st[ST_WANT_DEL];

	sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
	return exec_stmt(b, st);
}

static int
sqlite_wants(struct store_backend *b, store_want_fn *fn, void *arg)
{
	sqlite3_stmt *st = b->st[ST_WANTS];
	struct http_out_want w;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		w.id = (uint64_t)sqlite3_column_int64(st, 0);
		w.url = (const char *)sqlite3_column_text(st, 1);
		w.json = sqlite3_column_int(st, 2) != 0;
		w.mask = sqlite3_column_int(st, 3);
		w.to = (const char *)sqlite3_column_text(st, 4);
		w.from = (const char *)sqlite3_column_text(st, 5);
		w.deadline = (uint64_t)sqlite3_column_int64(st, 6);
		if (fn(&w, arg) != 0)
			break;
	}
	done_stmt(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : -1;
}

const struct store_backend_ops store_sqlite_ops = {
	.name = "sqlite",
	.open = sqlite_open,
	.close = sqlite_close,
	.remove = sqlite_remove,
	.begin = sqlite_begin,
	.commit = sqlite_commit,
	.rollback = sqlite_rollback,
	.in_txn = sqlite_in_txn,
	.put = sqlite_put,
	.update = sqlite_update,
	.del = sqlite_del,
	.mark = sqlite_mark,
	.get = sqlite_get,
	.scan = sqlite_scan,
	.expired = sqlite_expired,
	.by_dest = sqlite_by_dest,
	.purge = sqlite_purge,
	.finals = sqlite_finals,
	.backlogs = sqlite_backlogs,
	.oldest = sqlite_oldest,
	.max_id = sqlite_max_id,
	.check = sqlite_check,
	.full = sqlite_full,
	.poll = sqlite_poll,
	.rcpt_put = sqlite_rcpt_put,
	.rcpt_get = sqlite_rcpt_get,
	.rcpt_del = sqlite_rcpt_del,
	.rcpt_purge = sqlite_rcpt_purge,
	.post_put = sqlite_post_put,
	.post_del = sqlite_post_del,
	.posts = sqlite_posts,
	.want_put = sqlite_want_put,
	.want_del = sqlite_want_del,
	.wants = sqlite_wants,
};

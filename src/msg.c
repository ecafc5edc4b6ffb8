/* msg.c: messages: making and copying them, their ids, the names of verdicts. */
#include "msg.h"

#include <malloc.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "counter.h"
#include "reactor.h"
#include "util.h"

/*
 * A reactor's thread: its spares of MSG_SPARE_BYTES. Thousands of
 * messages are in flight on a loaded reactor, too many for glibc's thread
 * cache: each past it paid a full malloc and free, twice a message (the
 * message and the copy its recipient's edge makes).
 */
static _Thread_local struct spares *msg_spares;

void
msg_spares_use(struct spares *s)
{
	msg_spares = s;
}

static void *
msg_alloc(size_t n)
{
	if (msg_spares != NULL && n <= MSG_SPARE_BYTES)
		return spares_take(msg_spares, MSG_SPARE_BYTES);
	return xmalloc(n);
}

void
msg_free(struct msg *m)
{
	size_t n;

	if (m == NULL)
		return;
	/*
	 * Only one of about the spares' size: a longer text's would be kept
	 * for gets that never take it (they ask for MSG_SPARE_BYTES), a
	 * burst of them held for a second for nothing.
	 */
	if (msg_spares != NULL && (n = malloc_usable_size(m)) >=
	    MSG_SPARE_BYTES && n < MSG_SPARE_BYTES + 64)
		spares_put(msg_spares, m);
	else
		free(m);
}

struct msg *
msg_new(size_t len)
{
	struct msg *m = msg_alloc(sizeof(*m) + len + 1);

	/*
	 * Not calloc: zeroing the whole message (368 bytes and the text, most
	 * of them SMPP strings a line client leaves empty) was 2 % of the time
	 * of cross-reactor routing. The fixed fields are zeroed, the strings
	 * emptied; the text is the caller's to fill.
	 */
	memset(m, 0, offsetof(struct msg, src_addr));
	m->src_addr[0] = m->dst_addr[0] = m->reply_to[0] = '\0';
	m->receipted_id[0] = m->from[0] = m->to[0] = '\0';
	m->remote_node[0] = '\0';
	m->len = 0;
	m->text[len] = '\0';
	return m;
}

struct msg *
msg_dup(const struct msg *m)
{
	size_t n = msg_size(m);

	return memcpy(msg_alloc(n), m, n);
}

/*
 * Ids follow the clock too, from the run's base: about a million a second
 * (ns / 1024), never faster than the base's 2^20 a second, so that the
 * next run's ids still start above. A sender whose next connection lands
 * on a quieter reactor then gets ids above those it had, and a backlog,
 * which goes out in id order, keeps its order. A reactor runs ahead of
 * the clock only beyond a million ids a second. Set before reactors run.
 */
static uint64_t id_base;
static uint64_t id_base_ns;

void
msg_set_id_base(struct reactor *r, uint64_t base)
{
	if (r->msg_seq < base)
		r->msg_seq = base;
	if (base > id_base) {
		id_base = base;
		id_base_ns = counter_now_ns();
	}
}

/* Each maker's low bits, plus one (0: its own number). */
static _Atomic uint16_t id_low[MSG_ID_LOW_MAX + 1];

void
msg_set_id_low(unsigned maker, unsigned low)
{
	if (maker <= MSG_ID_LOW_MAX && low <= MSG_ID_LOW_MAX)
		atomic_store_explicit(&id_low[maker], (uint16_t)(low + 1),
		    memory_order_relaxed);
}

uint64_t
msg_id_low(unsigned maker)
{
	unsigned v = atomic_load_explicit(&id_low[maker & MSG_ID_LOW_MAX],
	    memory_order_relaxed);

	return v != 0 ? v - 1 : maker & MSG_ID_LOW_MAX;
}

uint64_t
msg_next_id(struct reactor *r)
{
	uint64_t clock = r->turn_ns > id_base_ns ?
	    id_base + ((r->turn_ns - id_base_ns) >> 10) : id_base;

	if (r->msg_seq < clock)
		r->msg_seq = clock;
	/* Makers are below 1024: the low bits keep ids apart. */
	return (++r->msg_seq << 10) | msg_id_low(r->id);
}

const char *
msg_verdict_name(enum msg_verdict v)
{
	switch (v) {
	case MSG_PENDING:
		return "pending";
	case MSG_OK:
		return "ok";
	case MSG_NO_ROUTE:
		return "no route";
	case MSG_BUSY:
		return "recipient busy";
	case MSG_REFUSED:
		return "refused";
	case MSG_UNFIT:
		return "unfit";
	case MSG_FULL:
		return "store full";
	case MSG_STORE:
		return "to the store";
	case MSG_UNAVAILABLE:
		return "cluster unavailable";
	case MSG_STORE_LOST:
		return "store file lost";
	case MSG_HELD:
		return "held";
	case MSG_TOO_LONG:
		return "too many parts";
	case MSG_REJECTED:
		return "refused by the upstream";
	case MSG_UPSTREAM_DOWN:
		return "upstream unavailable";
	}
	return "?";
}
